//! Loss settings in scenarios, from crates/link's loss models: cell loss on ATM links and
//! packet loss on IP links, independent or in bursts; the measured loss and burst length
//! match what the keys configure.

use flowlab_sim::report::FlowReport;
use flowlab_sim::{load, run};

/// One-cell UDP packets (32 IP bytes: 48 with LLC/SNAP and the AAL5 trailer) from a through
/// switch s to b over OC-3c links; `keys` go on the first link.
fn atm(keys: &str) -> String {
    format!(
        r#"
[sim]
duration = "10s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "s"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "s"
phy = "OC-3c"
{keys}
[[link]]
from = "s"
to = "b"
phy = "OC-3c"
[[flow]]
name = "f"
from = "a"
to = "b"
rate = "5.12M"
size = 32
"#
    )
}

/// 100-byte UDP packets over a 100 Mbit/s IP link with `keys`.
fn ip(keys: &str) -> String {
    format!(
        r#"
[sim]
duration = "10s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "b"
rate = "100M"
{keys}
[[flow]]
name = "f"
from = "a"
to = "b"
rate = "16M"
size = 100
"#
    )
}

fn flow(text: &str) -> FlowReport {
    run(&load(text).unwrap(), None)
        .runs
        .remove(0)
        .flows
        .remove(0)
}

/// The flow's loss ratio and mean loss period (consecutive packets lost).
fn loss_and_burst(f: &FlowReport) -> (f64, f64) {
    assert_eq!(f.sender.packets_sent, 200_000);
    let periods = f.receiver.loss_periods.expect("losses");
    (f.loss_ratio, periods.mean_length)
}

fn near(got: f64, want: f64, rel: f64) -> bool {
    (got / want - 1.0).abs() < rel
}

#[test]
fn independent_cell_loss_loses_that_share_of_one_cell_packets() {
    let (loss, burst) = loss_and_burst(&flow(&atm("cell_loss = 0.01")));
    // 2,000 losses expected, sd 45.
    assert!(near(loss, 0.01, 0.07), "{loss}");
    // Runs of independent losses: mean 1 / (1 − p).
    assert!(near(burst, 1.0 / 0.99, 0.02), "{burst}");
}

#[test]
fn bursty_cell_loss_keeps_the_mean_and_makes_bursts_of_the_set_length() {
    let f = flow(&atm("cell_loss = 0.01\ncell_loss_burst = 4.0"));
    let (loss, burst) = loss_and_burst(&f);
    // 500 bursts of mean 4 expected: the loss count's sd is about 5 %.
    assert!(near(loss, 0.01, 0.15), "{loss}");
    assert!(near(burst, 4.0, 0.12), "{burst}");
    let r = run(
        &load(&atm("cell_loss = 0.01\ncell_loss_burst = 4.0")).unwrap(),
        None,
    );
    let port = r.runs[0].ports.iter().find(|p| p.name == "a->s").unwrap();
    assert_eq!(port.cells_lost_on_line, f.receiver.packets.lost);
}

#[test]
fn gilbert_elliott_cell_loss_has_its_long_run_mean() {
    // p / (p + r) of the time in the bad state, half its cells lost there.
    let text = atm("cell_gemodel = { p = 0.002, r = 0.25, loss_bad = 0.5 }");
    let (loss, _) = loss_and_burst(&flow(&text));
    let want = 0.002 / 0.252 * 0.5;
    assert!(near(loss, want, 0.2), "{loss} vs {want}");
}

#[test]
fn packet_loss_on_an_ip_link_independent_and_in_bursts() {
    let (loss, burst) = loss_and_burst(&flow(&ip("loss = \"2%\"")));
    assert!(near(loss, 0.02, 0.06), "{loss}");
    assert!(near(burst, 1.0 / 0.98, 0.02), "{burst}");
    let (loss, burst) = loss_and_burst(&flow(&ip("loss = \"2%\"\nloss_burst = 5.0")));
    assert!(near(loss, 0.02, 0.15), "{loss}");
    assert!(near(burst, 5.0, 0.12), "{burst}");
}

#[test]
fn cell_loss_needs_an_atm_link() {
    let e = load(&ip("cell_loss = 0.01")).unwrap_err().to_string();
    assert!(e.contains("cell_loss") && e.contains("needs phy"), "{e}");
}
