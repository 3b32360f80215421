//! Invariants of the figures over the example scenarios: no flow's goodput exceeds what its
//! path can carry of its payload.

use flowlab_atm::{cells_per_packet, PolicingAction};
use flowlab_qos::sched::QueueLimit;

use crate::engine::Sim;
use crate::scenario::{FlowSpec, Model, NodeKind, Protocol};

/// One hop of a path: the packets per second its line carries at most, and the longest its
/// full buffer takes to drain.
struct Hop {
    packets_per_s: f64,
    drain_s: f64,
}

fn hop(m: &Model, f: &FlowSpec, from: usize, to: usize) -> Option<Hop> {
    let l = m
        .links
        .iter()
        .find(|l| (l.a, l.b) == (from, to) || (l.a, l.b) == (to, from))?;
    let queued_bytes: f64 = (l.sched.classes.iter())
        .map(|c| match c.limit {
            QueueLimit::Packets(n) => f64::from(n) * f64::from(l.mtu),
            QueueLimit::Bytes(b) => b as f64,
            QueueLimit::Unlimited => f64::INFINITY,
        })
        .sum();
    let ip_drain_s = queued_bytes * 8.0 / l.rate_bps as f64;
    Some(match &l.atm {
        Some(a) => {
            let cells_per_s = a.port.line.cell_bit_rate() / 424.0;
            let buffer = match m.nodes[from].kind {
                NodeKind::Host => a.host_buffer_cells as f64,
                NodeKind::AtmSwitch => a.port.buffer_cells as f64,
                NodeKind::IpRouter => queued_bytes / 48.0 + 1.0,
            };
            let cells = cells_per_packet(f.size as usize, a.port.encap) as f64;
            Hop {
                packets_per_s: cells_per_s / cells,
                drain_s: buffer / cells_per_s,
            }
        }
        None => Hop {
            packets_per_s: l.rate_bps as f64 / (8.0 * f64::from(f.size)),
            drain_s: ip_drain_s,
        },
    })
}

/// The most payload per second flow `f` can deliver over a receiving span of `span_s`,
/// whatever else shares its path: each of its links (an ATM line's cells, an IP link's
/// bytes) and its contract when it is shaped or policed by dropping bound its packets. Queues
/// after a bound may release packets closer together than it spaced them, by at most the
/// time those queues take to drain, and a policer lets its tolerance through above the rate:
/// both count as extra packets over the span. `None` for a traffic model's packets (sizes
/// vary).
fn payload_ceiling_bps(m: &Model, f: &FlowSpec, span_s: f64) -> Option<f64> {
    if f.size == 0 {
        return None;
    }
    let headers = if f.protocol == Protocol::Tcp { 40 } else { 28 };
    let payload_bits = 8.0 * f64::from(f.size - headers);
    let hops = (f.path.windows(2))
        .map(|w| hop(m, f, w[0], w[1]))
        .collect::<Option<Vec<Hop>>>()?;
    let drain_after = |k: usize| hops[k..].iter().map(|h| h.drain_s).sum::<f64>();
    let over_span =
        |pps: f64, compress_s: f64, extra: f64| pps + (pps * compress_s + extra) / span_s;
    let mut best = f64::INFINITY;
    for (k, h) in hops.iter().enumerate() {
        best = best.min(over_span(h.packets_per_s, drain_after(k + 1), 1.0));
    }
    let first_atm = (f.path.windows(2)).find_map(|w| {
        let l = m
            .links
            .iter()
            .find(|l| (l.a, l.b) == (w[0], w[1]) || (l.a, l.b) == (w[1], w[0]))?;
        l.atm
            .as_ref()
            .map(|a| cells_per_packet(f.size as usize, a.port.encap) as f64)
    });
    let enforced = f.shape || f.police == Some(PolicingAction::Drop);
    if let (Some(c), Some(cells), true) = (&f.contract, first_atm, enforced) {
        let pps = c.scr_bps.unwrap_or(c.pcr_bps) as f64 / 424.0 / cells;
        let mut extra = 1.0;
        if !f.shape {
            let tolerance = c.cdvt_ns as f64 * c.pcr_bps as f64 / 424e9 + f64::from(c.mbs);
            extra += (1.0 + tolerance) / cells;
        }
        best = best.min(over_span(pps, drain_after(0), extra));
    }
    Some(best * payload_bits)
}

#[test]
fn no_goodput_exceeds_its_paths_payload_ceiling() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sim");
    let mut checked = 0;
    for name in [
        "e1-aquila-atm",
        "e1-aquila-ip",
        "ping-cell-loss",
        "policing-cdvt",
        "tcp-190ms",
    ] {
        let text = std::fs::read_to_string(format!("{dir}/{name}.toml")).expect("example");
        let mut scenario = crate::load(&text).expect("example loads");
        // Short runs: what arrives in the drain weighs most then.
        scenario.set_duration_ns(5_000_000_000);
        for v in &scenario.variants {
            let out = Sim::new(&v.model, v.model.seed).run();
            for (f, r) in v.model.flows.iter().zip(&out.flows) {
                let span_s = r.receiver.duration_ns as f64 / 1e9;
                let Some(ceiling) = payload_ceiling_bps(&v.model, f, span_s) else {
                    continue;
                };
                assert!(
                    r.goodput_bps <= ceiling * (1.0 + 1e-9),
                    "{name} {:?} flow {}: goodput {} above its ceiling {ceiling}",
                    v.sweep,
                    f.name,
                    r.goodput_bps
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "{checked}");
}
