use flowlab_atm::{Encapsulation, PhysicalLayer};
use proptest::prelude::*;

use super::*;
use crate::run_virtual;

fn port(phy: PhysicalLayer, buffer_cells: usize) -> PortSpec {
    PortSpec {
        phy: phy.name().into(),
        line: phy.line_rate(),
        buffer_cells,
        epd: None,
        ppd: false,
        clp_threshold: None,
        encap: Encapsulation::LlcSnapRouted,
        categories: Default::default(),
        vc_limits: VcLimits::default(),
    }
}

fn frame(id: u64, len: u32) -> Frame {
    Frame { id, len, dscp: 0 }
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
fn a_frame_leaves_when_its_last_cell_has_left() {
    // OC-3c: 2.831 µs a cell. 100 B + 8 LLC + 8 trailer = 3 cells (the tc-stab example).
    let mut m = AtmLink::new(AtmSpec::single_vc(port(PhysicalLayer::Oc3c, 100)), 1);
    let (events, _) = run_virtual(&mut m, [(0, frame(0, 100))]);
    let line = PhysicalLayer::Oc3c.line_rate();
    assert_eq!(departures(&events), [(0, line.cell_departure_ns(0, 2))]);
    let mut r = Vec::new();
    m.report(&mut r);
    let cells = r[0].cells.as_ref().unwrap();
    assert_eq!((cells.cells_in, cells.cells_out), (3, 3));
}

/// The saturated throughput is the AAL5 payload rate: frames × their bytes over the time
/// their cells take on the line, exactly.
#[test]
fn saturated_throughput_is_the_cell_rate_times_payload_per_cell() {
    let mut m = AtmLink::new(AtmSpec::single_vc(port(PhysicalLayer::Oc12c, 100_000)), 1);
    let n = 2000u64;
    let (events, _) = run_virtual(&mut m, (0..n).map(|i| (0, frame(i, 1500))));
    let d = departures(&events);
    assert_eq!(d.len() as u64, n);
    // 1500 B: ⌈1516/48⌉ = 32 cells a frame.
    let line = PhysicalLayer::Oc12c.line_rate();
    assert_eq!(d.last().unwrap().1, line.cell_departure_ns(0, 32 * n - 1));
    // In order, each 32 cells after the previous.
    for (k, &(id, at)) in d.iter().enumerate() {
        assert_eq!(
            (id, at),
            (k as u64, line.cell_departure_ns(0, 32 * k as u64 + 31))
        );
    }
}

#[test]
fn a_full_buffer_loses_frames_whole_and_counts_cells() {
    let mut spec = AtmSpec::single_vc(port(PhysicalLayer::E1, 40));
    spec.port.epd = Some(20);
    let mut m = AtmLink::new(spec, 1);
    let (events, verdicts) = run_virtual(&mut m, (0..10).map(|i| (0, frame(i, 500))));
    // 500 B = 11 cells: two frames fill 22 > 20 cells, so EPD refuses the rest whole.
    assert_eq!(departures(&events).len(), 2);
    let refused = verdicts
        .iter()
        .filter(|v| **v == Verdict::Dropped(Cause::Cells))
        .count();
    assert_eq!(refused, 8);
    let mut r = Vec::new();
    m.report(&mut r);
    let c = r[0].cells.as_ref().unwrap();
    assert_eq!((c.dropped_epd, c.frames_epd), (88, 8));
    assert_eq!(r[0].dropped.get("cells_lost"), Some(&8));
}

#[test]
fn cell_loss_on_the_line_loses_whole_frames() {
    let mut spec = AtmSpec::single_vc(port(PhysicalLayer::Oc3c, 100_000));
    spec.cell_loss = LossModel::Random { p: 0.01 };
    let mut m = AtmLink::new(spec, 3);
    let n = 20_000u64;
    let (events, _) = run_virtual(&mut m, (0..n).map(|i| (i * 100_000, frame(i, 1500))));
    let delivered = departures(&events).len() as f64;
    let dropped = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::Drop {
                    cause: Cause::Cells,
                    ..
                }
            )
        })
        .count() as f64;
    assert_eq!(delivered + dropped, n as f64);
    // 32 cells a frame, each lost with 1 %; a lost last cell also takes the next frame, so
    // a frame arrives if its 32 cells and the previous frame's last one did.
    let want = 0.99f64.powi(33);
    assert!((delivered / n as f64 - want).abs() < 0.01, "{delivered}");
    let mut r = Vec::new();
    m.report(&mut r);
    let lost = r[0].cells.as_ref().unwrap().lost_on_line as f64;
    assert!((lost / (32.0 * n as f64) - 0.01).abs() < 0.001);
}

#[test]
fn dscp_picks_the_vc_and_cbr_cells_go_first() {
    let mut spec = AtmSpec::single_vc(port(PhysicalLayer::E1, 10_000));
    spec.vcs.insert(
        0,
        VcSpec {
            name: "ef".into(),
            dscps: vec![46],
            service: ServiceCategory::Cbr,
            contract: None,
            police: PolicingAction::Drop,
        },
    );
    let mut m = AtmLink::new(spec, 1);
    let ef = Frame {
        id: 99,
        len: 40,
        dscp: 46,
    };
    // A 9000 B frame (189 cells) is on its way when the EF frame arrives: it goes next.
    let (events, _) = run_virtual(&mut m, [(0, frame(0, 9000)), (1_000_000, ef)]);
    let d = departures(&events);
    assert_eq!(d[0].0, 99);
    let line = PhysicalLayer::E1.line_rate();
    // 40 B + 16 is two cells, in the first two slots from its arrival.
    let slot = line.first_slot_at_or_after(0, 1_000_000);
    assert_eq!(d[0].1, line.cell_departure_ns(0, slot + 1));
}

/// A UBR flood in front of three EF frames on an E1 port of 200 cells: sharing the buffer,
/// the flood fills it and the EF frames are lost; with 100 cells a VC (EPD at 68: a frame
/// that may not fit is refused whole), every EF frame leaves and no cell meets a full buffer.
#[test]
fn each_vc_keeps_its_share_of_the_buffer_from_a_flood() {
    let ef_delivered = |limits: VcLimits| {
        let mut spec = AtmSpec::single_vc(port(PhysicalLayer::E1, 200));
        spec.port.vc_limits = limits;
        spec.vcs.insert(
            0,
            VcSpec {
                name: "ef".into(),
                dscps: vec![46],
                service: ServiceCategory::Cbr,
                contract: None,
                police: PolicingAction::Drop,
            },
        );
        let mut m = AtmLink::new(spec, 1);
        let flood = (0..10).map(|i| (0, frame(i, 1500)));
        let ef = (10..13).map(|id| {
            (
                0,
                Frame {
                    id,
                    len: 1000,
                    dscp: 46,
                },
            )
        });
        let (events, _) = run_virtual(&mut m, flood.chain(ef));
        let mut r = Vec::new();
        m.report(&mut r);
        let c = r[0].cells.clone().unwrap();
        let ef = departures(&events).iter().filter(|d| d.0 >= 10).count();
        (ef, c.dropped_buffer_full, c.frames_epd)
    };
    assert_eq!(ef_delivered(VcLimits::default()).0, 0);
    let shares = VcLimits {
        buffer_cells: Some(100),
        epd_threshold: Some(68),
    };
    // 1500 B is 32 cells: the flood's first three frames (96 cells) pass EPD, seven do not.
    assert_eq!(ef_delivered(shares), (3, 0, 7));
}

#[test]
fn the_policer_drops_cells_beyond_the_contract() {
    let mut spec = AtmSpec::single_vc(port(PhysicalLayer::Oc3c, 100_000));
    spec.vcs[0].contract = Some(ContractSpec {
        pcr_bps: 10_000_000,
        cdvt_ns: 0,
        scr_bps: None,
        mbs: 1,
    });
    let mut m = AtmLink::new(spec, 1);
    // 1500 B every 1 ms is 32 cells × 424 bit / ms = 13.6 Mbit/s of cells: above the PCR.
    let (events, _) = run_virtual(&mut m, (0..100).map(|i| (i * 1_000_000, frame(i, 1500))));
    let mut r = Vec::new();
    m.report(&mut r);
    let c = r[0].cells.as_ref().unwrap();
    assert!(c.policed_dropped > 0);
    assert!(departures(&events).len() < 100);
}

proptest! {
    /// Every frame offered ends as exactly one departure or drop, departures in time order,
    /// whatever the buffer, discard settings, loss and arrivals.
    #[test]
    fn every_frame_has_one_fate(
        input in proptest::collection::vec((0u64..20_000, 1u32..9000, any::<bool>()), 1..200),
        buffer in 1usize..400, epd: bool, ppd: bool, loss in 0.0f64..0.2, seed: u64,
    ) {
        let mut spec = AtmSpec::single_vc(port(PhysicalLayer::Ds3Plcp, buffer));
        spec.port.epd = (epd && buffer > 1).then_some(buffer / 2);
        spec.port.ppd = ppd;
        spec.cell_loss = LossModel::Random { p: loss };
        spec.vcs.insert(0, VcSpec {
            name: "ef".into(), dscps: vec![46], service: ServiceCategory::Cbr,
            contract: None, police: PolicingAction::Drop,
        });
        let mut m = AtmLink::new(spec, seed);
        let mut t = 0;
        let arrivals: Vec<(u64, Frame)> = input.iter().enumerate().map(|(i, &(g, len, ef))| {
            t += g;
            (t, Frame { id: i as u64, len, dscp: if ef { 46 } else { 0 } })
        }).collect();
        let (events, verdicts) = run_virtual(&mut m, arrivals.clone());
        let refused = verdicts.iter().filter(|v| matches!(v, Verdict::Dropped(_))).count();
        prop_assert_eq!(events.len() + refused, arrivals.len());
        let mut seen = std::collections::HashSet::new();
        let mut last = 0;
        for e in &events {
            let (id, at) = match e {
                Event::Depart { frame, at_ns } | Event::Drop { frame, at_ns, .. } => (frame.id, *at_ns),
                Event::Copy { .. } => unreachable!(),
            };
            prop_assert!(seen.insert(id));
            prop_assert!(at >= arrivals[id as usize].0 && at >= last);
            last = at;
        }
    }
}
