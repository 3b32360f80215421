//! Pushes 50 million cells through one switch output port in virtual time and prints how many
//! cell events per second the model sustains on this core.
//!
//! Run with `cargo run --release -p flowlab-atm --example cell_throughput [cells]`.

use std::time::Instant;

use flowlab_atm::link::PhysicalLayer;
use flowlab_atm::switch::{CellMeta, OutputPort, PortConfig, ServiceCategory, Verdict};
use flowlab_atm::time::ExactNs;

fn main() {
    let cells: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000_000);
    let line = PhysicalLayer::Oc3c.line_rate();
    let mut config = PortConfig::new(line, 4096);
    config.epd_threshold = Some(3000);
    config.ppd = true;
    let mut port = OutputPort::new(config);
    let vcs: Vec<_> = ServiceCategory::ALL
        .iter()
        .map(|&c| port.add_vc(c))
        .collect();
    // Offer 105% of the line rate so that the buffer fills and EPD/PPD work too.
    let interval = ExactNs::new(
        line.cell_time().numer() * 100,
        line.cell_time().denom() * 105,
    )
    .expect("non-zero");

    let started = Instant::now();
    let mut transmitted = 0u64;
    let mut queued = 0u64;
    let mut checksum = 0u64;
    for k in 0..cells {
        let now = interval.times_floor(k);
        while let Some(d) = port.poll_transmit(now) {
            transmitted += 1;
            checksum = checksum.wrapping_add(d.tx_start_ns);
        }
        // Frames of 32 cells, interleaved over the four VCs.
        let vc = vcs[((k / 32) % 4) as usize];
        let cell = CellMeta::user_data(vc, (k / 128) as u32, k % 32 == 31);
        if port.enqueue(now, cell) == Verdict::Queued {
            queued += 1;
        }
    }
    while let Some(t) = port.poll_timeout() {
        if let Some(d) = port.poll_transmit(t) {
            transmitted += 1;
            checksum = checksum.wrapping_add(d.tx_start_ns);
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    let events = cells + transmitted;
    let c = port.counters();
    println!("cells offered      {cells}");
    println!("cells queued       {queued}");
    println!("cells transmitted  {transmitted}");
    println!(
        "cells dropped      {} (buffer {}, EPD {}, PPD {}), frames EPD {} PPD {}",
        c.dropped(),
        c.dropped_buffer_full,
        c.dropped_epd,
        c.dropped_ppd,
        c.frames_epd,
        c.frames_ppd
    );
    println!(
        "virtual time       {:.3} s",
        interval.times_floor(cells) as f64 / 1e9
    );
    println!("wall time          {elapsed:.3} s (checksum {checksum:x})");
    println!(
        "throughput         {:.1} M cells offered/s, {:.1} M cell events/s (enqueue + transmit)",
        cells as f64 / elapsed / 1e6,
        events as f64 / elapsed / 1e6
    );
}
