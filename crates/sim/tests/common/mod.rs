//! What the simulator's integration tests share.

use flowlab_sim::{load, run, RunReport};

/// The first (only) run of a scenario's text.
pub fn one_run(text: &str) -> RunReport {
    let s = load(text).unwrap_or_else(|e| panic!("{e}"));
    run(&s, None).runs.remove(0)
}

/// A 60 Mb/s hog of 9180-byte packets and a 5 Mb/s flow of 1500-byte ones share a DS3 port
/// of 2000 cells; `port`, `hog` and `small` add keys to the port's link and the two flows.
#[allow(dead_code)] // each test binary uses its own part of this module
pub fn shared_port(port: &str, hog: &str, small: &str) -> String {
    format!(
        r#"[sim]
duration = "2s"
[[node]]
name = "a1"
kind = "host"
[[node]]
name = "a2"
kind = "host"
[[node]]
name = "s"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a1"
to = "s"
phy = "OC-3c"
[[link]]
from = "a2"
to = "s"
phy = "OC-3c"
[[link]]
from = "s"
to = "b"
phy = "DS3"
buffer_cells = 2000
{port}
[[flow]]
name = "hog"
from = "a1"
to = "b"
protocol = "udp"
rate = "60M"
size = 9180
{hog}
[[flow]]
name = "small"
from = "a2"
to = "b"
protocol = "udp"
rate = "5M"
size = 1500
{small}
"#
    )
}

/// A flow's loss ratio.
#[allow(dead_code)]
pub fn loss(r: &RunReport, name: &str) -> f64 {
    r.flows.iter().find(|f| f.name == name).unwrap().loss_ratio
}
