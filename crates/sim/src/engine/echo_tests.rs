//! Ping echoes through a loaded switch port.

use super::*;

/// Seed 002's switch with its recirculating loops on the port towards the pinging host, the
/// echoes' way; no link delays, so without adapter clocks of their own every cell would
/// travel on the switch's cell grid.
const ECHO_PORT_LOADED: &str = r#"
[sim]
duration = "2s"
seed = 2
[[node]]
name = "ws1"
kind = "host"
[[node]]
name = "sw"
kind = "atm-switch"
[[node]]
name = "ws2"
kind = "host"
[[link]]
from = "ws1"
to = "sw"
phy = "OC-3c"
buffer_cells = 256
[[link]]
from = "sw"
to = "ws2"
phy = "OC-3c"
[[background]]
name = "loops"
from = "sw"
to = "ws1"
traffic = "poisson:pps=305,size=8192"
passes = 6
loop_delay = "20us"
[[flow]]
name = "ping1024"
from = "ws1"
to = "ws2"
protocol = "ping"
size = 1052
interval = "10ms"
"#;

#[test]
fn echoes_lose_cells_at_a_loaded_port_and_count_as_lost() {
    let scenario = crate::load(ECHO_PORT_LOADED).expect("scenario loads");
    let out = Sim::new(&scenario.variants[0].model, 2).run();
    let flow = &out.flows[0];
    let port = out
        .ports
        .iter()
        .find(|p| p.name == "sw->ws1")
        .expect("port");
    let echoes = port
        .vcs
        .iter()
        .find(|v| v.name == "ping1024/rev")
        .expect("vc");
    assert!(port.cells_dropped > 0);
    // Echo cells meet the loops' cells at every phase of the port's slots, so some are
    // refused, as the port refuses others' (it drops about 7 % of all cells).
    assert!(echoes.cells_dropped * 100 > echoes.cells_in, "{echoes:?}");
    // Every echo with a refused cell is a ping lost: 23 cells each, none lost on the way out.
    let lost = flow.receiver.packets.lost;
    assert!(
        lost * 23 >= echoes.cells_dropped,
        "{lost} pings lost, {echoes:?}"
    );
    assert!(lost <= echoes.cells_dropped);
    assert_eq!(flow.sender.packets_sent, 200);
    assert!(flow.loss_ratio > 0.05, "{}", flow.loss_ratio);
}
