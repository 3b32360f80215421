//! Meters and markers at a simulated edge: an srTCM re-marks a flow's excess, and the next
//! router classifies the packets by their new DSCP.

use flowlab_sim::{load, run};

const EDGE: &str = r#"[sim]
duration = "10s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "edge"
kind = "ip-router"
[[node]]
name = "core"
kind = "ip-router"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "edge"
rate = "100M"
[[link]]
from = "edge"
to = "core"
rate = "100M"
scheduler = "priority"
classes = [
  { name = "af1", dscp = "af11", meter = "srtcm", meter_rate = "2M", meter_burst = 3000, meter_excess_burst = 3000, yellow = "af12", red = "af13" },
  { name = "rest", default = true },
]
[[link]]
from = "core"
to = "b"
rate = "100M"
scheduler = "priority"
classes = [
  { name = "green", dscp = "af11" },
  { name = "yellow", dscp = "af12" },
  { name = "red", dscp = "af13" },
]
[[flow]]
name = "u"
from = "a"
to = "b"
protocol = "udp"
rate = "4M"
size = 1000
dscp = "af11"
"#;

#[test]
fn an_edge_marks_and_the_core_sees_the_marks() {
    let r = run(&load(EDGE).unwrap(), None);
    let run = &r.runs[0];
    let port = |name: &str| run.ports.iter().find(|p| p.name == name).unwrap();
    let edge = &port("edge->core").classes;
    let core = &port("core->b").classes;
    let sent = |cs: &[flowlab_sim::report::ClassReport], name: &str| {
        cs.iter().find(|c| c.name == name).unwrap().sent
    };
    // 500 packets/s offered against 250/s committed: half green, and the excess bucket is
    // only fed by the committed one's overflow, which a flow above CIR never leaves: after
    // the first 3 of EBS, the rest is red.
    let total = run.flows[0].receiver.packets.unique;
    assert_eq!(total, 5000, "re-marked, not dropped");
    let (g, y, red) = (sent(core, "green"), sent(core, "yellow"), sent(core, "red"));
    assert_eq!(g + y + red, total);
    assert_eq!(y, 3, "only the excess bucket's first fill");
    assert!((2_500..=2_505).contains(&g), "{g}");
    assert_eq!(edge[0].remarked, y + red);
    assert_eq!(run.flows[0].loss_ratio, 0.0);
}

#[test]
fn red_is_dropped_by_default() {
    let text = EDGE.replace(", red = \"af13\"", "");
    let r = run(&load(&text).unwrap(), None);
    let f = &r.runs[0].flows[0];
    assert!((f.loss_ratio - 0.5).abs() < 0.01, "{}", f.loss_ratio);
    let edge = &r.runs[0]
        .ports
        .iter()
        .find(|p| p.name == "edge->core")
        .unwrap();
    assert_eq!(
        edge.classes[0].out_of_profile,
        f.sender.packets_sent - f.receiver.packets.unique
    );
}
