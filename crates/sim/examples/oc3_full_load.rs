//! Measures the engine: an OC-3c switch port at full load (9180-byte Classical IP packets
//! offered above the line rate) for 10 simulated seconds. Prints the wall time and the cell
//! events per second. Run in release: `cargo run --release -p flowlab-sim --example
//! oc3_full_load`.

const SCENARIO: &str = r#"
[sim]
duration = "10s"
drain = "0s"
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
[[link]]
from = "s"
to = "b"
phy = "OC-3c"
[[flow]]
name = "full"
from = "a"
to = "b"
protocol = "udp"
rate = "136M"
size = "9180B"
"#;

fn main() {
    let scenario = match flowlab_sim::load(SCENARIO) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let start = std::time::Instant::now();
    let report = flowlab_sim::run(&scenario, None);
    let wall = start.elapsed().as_secs_f64();
    let run = &report.runs[0];
    let cells = run.cells_transmitted;
    // Each transmitted cell is one port transmission and one arrival at the far end.
    let cell_events = 2 * cells;
    let f = &run.flows[0];
    println!("simulated 10 s of OC-3c at full load in {wall:.3} s wall time");
    println!(
        "cells transmitted {cells} ({:.2} M cells/s of line), engine events {}",
        cells as f64 / 10.0 / 1e6,
        run.events
    );
    println!(
        "cell events per second of wall time: {:.1} M",
        cell_events as f64 / wall / 1e6
    );
    println!(
        "flow throughput {:.2} Mbit/s of IP packets (AAL5 maximum for 9180-byte packets: 135.1)",
        f.throughput_bps / 1e6
    );
}
