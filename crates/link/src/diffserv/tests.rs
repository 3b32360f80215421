use flowlab_qos::sched::QueueLimit;

use super::*;
use crate::run_virtual;

fn frame(id: u64, len: u32, dscp: u8) -> Frame {
    Frame { id, len, dscp }
}

fn pq_wfq() -> SchedSpec {
    let class = |name: &str, dscps: Vec<u8>, priority: bool, weight: u32| ClassSpec {
        name: name.into(),
        dscps,
        weight,
        priority,
        limit: QueueLimit::Packets(50),
        meter: None,
    };
    SchedSpec {
        kind: SchedKind::PqWfq,
        classes: vec![
            class("ef", vec![46], true, 1),
            class("af", vec![10], false, 3),
            class("be", vec![], false, 1),
        ],
        default_class: 2,
    }
}

fn departures(events: &[Event]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Depart { frame, at_ns } => Some((frame.id, *at_ns)),
            _ => None,
        })
        .collect()
}

#[test]
fn ef_waits_at_most_one_packet_and_wfq_shares_the_rest() {
    let mut m = DiffServEdge::new(&pq_wfq(), 2_000_000, 1, None);
    // 40 AF and 40 BE packets at once, then an EF one while the first is on the line.
    let mut input: Vec<(u64, Frame)> = (0..80)
        .map(|i| (0, frame(i, 1000, if i % 2 == 0 { 10 } else { 0 })))
        .collect();
    input.push((1_000_000, frame(999, 100, 46)));
    let (events, _) = run_virtual(&mut m, input);
    let d = departures(&events);
    // 1000 B at 2 Mbit/s is 4 ms: the EF packet goes right after the first.
    assert_eq!(d[1].0, 999);
    assert_eq!(d[1].1, 4_000_000 + 400_000);
    // Of the first 40 others, AF (weight 3) has about three quarters.
    let af = d[2..42].iter().filter(|(id, _)| id % 2 == 0).count();
    assert!((28..=32).contains(&af), "{af}");
}

#[test]
fn a_meter_drops_out_of_profile_frames() {
    let mut spec = SchedSpec::fifo(QueueLimit::Unlimited);
    spec.classes[0].meter = Some(MeterSpec::policer(1_000_000, 1500));
    let mut m = DiffServEdge::new(&spec, 100_000_000, 1, None);
    // 1000 B every 4 ms is 2 Mbit/s, twice the meter's rate: about half pass.
    let (events, verdicts) = run_virtual(
        &mut m,
        (0..1000).map(|i| (i * 4_000_000, frame(i, 1000, 0))),
    );
    let metered = verdicts
        .iter()
        .filter(|v| **v == Verdict::Dropped(crate::Cause::Meter))
        .count();
    assert!((495..=505).contains(&metered), "{metered}");
    assert_eq!(departures(&events).len(), 1000 - metered);
    let mut r = Vec::new();
    m.report(&mut r);
    assert_eq!(r[0].classes[0].out_of_profile, metered as u64);
}

#[test]
fn onto_atm_a_frame_leaves_when_its_cells_must_start() {
    let spec = SchedSpec::fifo(QueueLimit::Unlimited);
    let line = flowlab_atm::LineRate::from_cells_per_second(2000).unwrap();
    let onto_atm = Some(OntoAtm {
        encap: Encapsulation::LlcSnapRouted,
        line,
    });
    // 100 B is 3 cells = 159 B = 1272 bit: 3 ms at 424 kbit/s, the last 1.5 ms of which
    // its cells spend on the 2000-cell/s line; the frame keeps its length.
    let mut shaped = DiffServEdge::new(&spec, 424_000, 1, onto_atm);
    let (events, _) = run_virtual(&mut shaped, [(0, frame(0, 100, 0)), (0, frame(1, 100, 0))]);
    assert_eq!(departures(&events), [(0, 1_500_000), (1, 4_500_000)]);
    assert!(matches!(events[0], Event::Depart { frame: f, .. } if f.len == 100));
    // At the line's own cell rate, a frame leaves as it starts.
    let mut at_line = DiffServEdge::new(&spec, 848_000, 1, onto_atm);
    let (events, _) = run_virtual(&mut at_line, [(0, frame(0, 100, 0)), (0, frame(1, 100, 0))]);
    assert_eq!(departures(&events), [(0, 0), (1, 1_500_000)]);
}
