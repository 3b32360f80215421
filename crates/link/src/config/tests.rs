use super::*;
use crate::{run_virtual, Event, Frame};
use flowlab_atm::ServiceCategory;

/// The `emulate` table of `text` (the inline table's body).
fn load(body: &str) -> Result<EmulateSpec, FileError> {
    let root = flowlab_spanned::parse(&format!("emulate = {{ {body} }}\n")).expect("toml");
    let doc = Reader::of(&root, "")?;
    read(&Reader::of(doc.required("emulate")?, "emulate")?)
}

fn err(body: &str) -> String {
    load(body).expect_err(body).to_string()
}

#[test]
fn keys_choose_the_stages() {
    let s = load(r#"delay = "10ms""#).unwrap();
    assert!(s.ip.is_none() && s.atm.is_none());
    assert_eq!(s.impair.as_ref().unwrap().delay_ns, 10_000_000);
    let s = load(r#"rate = "10M", buffer = "32KiB""#).unwrap();
    let ip = s.ip.unwrap();
    assert_eq!(ip.rate_bps, 10_000_000);
    assert_eq!(ip.sched.classes[0].limit, QueueLimit::Bytes(32 * 1024));
    let s = load(r#"phy = "OC-3c", encap = "vc-mux", epd = 500, ppd = true"#).unwrap();
    let atm = s.atm.unwrap();
    assert_eq!(
        (atm.port.phy.as_str(), atm.port.epd, atm.port.ppd),
        ("OC-3c", Some(500), true)
    );
    assert!(s.ip.is_none());
    // ATM under a scheduler: the port runs at the cell rate unless shaped lower.
    let s = load(
        r#"phy = "E1", scheduler = "pq-wfq", classes = [{ dscp = "ef", priority = true }, { name = "be" }]"#,
    )
    .unwrap();
    assert_eq!(s.ip.unwrap().rate_bps, 1_920_000);
}

use flowlab_qos::sched::QueueLimit;

#[test]
fn loss_forms() {
    let loss = |body: &str| load(body).unwrap().impair.unwrap().loss;
    assert_eq!(loss(r#"loss = "1%""#), LossModel::Random { p: 0.01 });
    assert_eq!(loss("loss = 0.5"), LossModel::Random { p: 0.5 });
    let LossModel::GilbertElliott { p, r, .. } = loss(r#"loss = "2%", loss_burst = 4"#) else {
        panic!("gilbert");
    };
    assert_eq!(r, 0.25);
    assert!((p / (p + r) - 0.02).abs() < 1e-12);
    assert_eq!(
        loss("gemodel = { p = 0.01, r = 0.3, loss_bad = 0.9 }"),
        LossModel::GilbertElliott {
            p: 0.01,
            r: 0.3,
            loss_bad: 0.9,
            loss_good: 0.0
        }
    );
    let cells = load(r#"phy = "OC-3c", cell_loss = 1e-4"#)
        .unwrap()
        .atm
        .unwrap();
    assert_eq!(cells.cell_loss, LossModel::Random { p: 1e-4 });
    let ge = r#"phy = "OC-3c", cell_gemodel = { p = 0.01, r = 0.25, loss_bad = 0.5 }"#;
    assert_eq!(
        load(ge).unwrap().atm.unwrap().cell_loss,
        LossModel::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_bad: 0.5,
            loss_good: 0.0
        }
    );
    let both = r#"phy = "OC-3c", cell_loss = 0.1, cell_gemodel = { p = 0.1, r = 0.5 }"#;
    assert!(err(both).contains("give cell_loss or cell_gemodel, not both"));
    assert!(err("cell_loss_burst = 3.0, delay = \"1ms\"").contains("needs phy"));
}

#[test]
fn bad_tables_are_one_line_errors() {
    for (body, want) in [
        ("", "nothing to emulate"),
        (r#"delay = "1ms", colour = 1"#, "colour"),
        (r#"loss = "150%""#, "between 0 and 1"),
        ("loss_burst = 3", "needs loss"),
        (r#"loss = 0.1, gemodel = { p = 0.1, r = 0.2 }"#, "not both"),
        ("gemodel = { p = 0.1 }", "r: missing"),
        (r#"epd = 10, delay = "1ms""#, "needs phy"),
        (r#"phy = "OC-48""#, "unknown"),
        (
            r#"phy = "E1", rate = "3M""#,
            "above the E1 line's cell rate",
        ),
        (
            r#"scheduler = "pq-wfq", classes = [{ dscp = "ef" }]"#,
            "needs rate",
        ),
        (
            r#"phy = "E1", vcs = [{ police = "drop" }]"#,
            "needs a contract",
        ),
        (r#"distribution = "gamma", delay = "1ms""#, "'gamma' is not"),
        (r#"delay = "2m""#, "at most 60s"),
    ] {
        let e = err(body);
        assert!(e.contains(want), "{body}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

/// A DiffServ edge onto an ATM VC with a propagation delay: a frame's cells are on the line
/// once, ending with the edge's last bit (to within a cell slot), and arrive after the delay.
#[test]
fn a_chain_hands_frames_down_at_their_departure_times() {
    let s = load(r#"phy = "E1", rate = "424k", delay = "10ms""#).unwrap();
    let mut chain = s.build(0);
    let f = Frame {
        id: 1,
        len: 100,
        dscp: 0,
    };
    let (events, _) = run_virtual(&mut chain, [(0, f)]);
    // 3 cells: 3 ms through the 424 kbit/s edge, the last 3 E1 cell slots of which are the
    // cells' on the line, then 10 ms.
    let line = flowlab_atm::PhysicalLayer::E1.line_rate();
    let slot = line.first_slot_at_or_after(0, 3_000_000 - line.cell_time().times_floor(3));
    let want = line.cell_departure_ns(0, slot + 2) + 10_000_000;
    assert_eq!(
        events,
        [Event::Depart {
            frame: f,
            at_ns: want
        }]
    );
    let mut r = Vec::new();
    chain.report(&mut r);
    let stages: Vec<&str> = r.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(stages, ["diffserv", "atm", "impair"]);
}

proptest::proptest! {
    /// The IP port in front of an ATM stage is the simulator's IP interface onto the VC
    /// (`DiffServPort` charging cells): through the chain, every frame arrives when that
    /// port's last bit leaves, up to the cell slot its cells wait for, never later.
    #[test]
    fn an_edge_onto_atm_times_frames_as_the_simulators_port(
        arrivals in proptest::collection::vec((0u64..20_000_000, 40u32..1500), 1..40),
    ) {
        let s = load(r#"phy = "E1", scheduler = "fifo", buffer_packets = 1000"#).unwrap();
        let ip = s.ip.as_ref().unwrap();
        let encap = s.atm.as_ref().unwrap().port.encap;
        let mut sorted = arrivals;
        sorted.sort();
        let frames: Vec<(u64, Frame)> = sorted
            .iter()
            .enumerate()
            .map(|(i, &(t, len))| (t, Frame { id: i as u64, len, dscp: 0 }))
            .collect();
        let mut port = crate::diffserv::DiffServPort::new(&ip.sched, ip.rate_bps, ip.tx_ring);
        let mut ends = Vec::new();
        for &(t, f) in &frames {
            while let Some(d) = port.poll_transmit(t) {
                ends.push(d.end_ns);
            }
            let cells = flowlab_atm::cells_per_packet(f.len as usize, encap) * 53;
            let packet = flowlab_qos::PacketMeta::new(f.id, 0, cells as u32, t);
            proptest::prop_assert!(port.enqueue(t, packet).is_ok());
        }
        while let Some(d) = port.poll_transmit(u64::MAX) {
            ends.push(d.end_ns);
        }
        let (events, _) = run_virtual(&mut s.build(0), frames);
        let slot = flowlab_atm::PhysicalLayer::E1.line_rate().cell_time().times_ceil(1);
        proptest::prop_assert_eq!(events.len(), ends.len());
        for (event, end) in events.iter().zip(&ends) {
            let Event::Depart { at_ns, .. } = event else {
                panic!("{event:?}");
            };
            proptest::prop_assert!((*end..=end + slot).contains(at_ns), "{} against {}", at_ns, end);
        }
    }
}

#[test]
fn a_chain_reports_copies_and_late_drops() {
    let s = load(r#"phy = "OC-3c", cell_loss = 0.5, duplicate = 1.0"#).unwrap();
    let mut chain = s.build(0);
    let frames = (0..100).map(|i| {
        (
            i * 1_000_000,
            Frame {
                id: i,
                len: 1500,
                dscp: 0,
            },
        )
    });
    let (events, _) = run_virtual(&mut chain, frames);
    let copies = events
        .iter()
        .filter(|e| matches!(e, Event::Copy { .. }))
        .count();
    let departs = events
        .iter()
        .filter(|e| matches!(e, Event::Depart { .. }))
        .count();
    let drops = events
        .iter()
        .filter(|e| matches!(e, Event::Drop { .. }))
        .count();
    // Almost every frame loses a cell; the few that pass are sent twice.
    assert_eq!(departs, 2 * copies);
    assert_eq!(drops + copies, 100);
}

/// The examples of docs/emulation.md.
#[test]
fn the_documented_examples_load() {
    let docs = include_str!("../../../../docs/emulation.md");
    let examples: Vec<&str> = docs
        .split("emulate = {")
        .skip(1)
        .map(|rest| {
            // Up to the closing brace at depth 0.
            let mut depth = 1;
            let end = rest
                .char_indices()
                .find(|&(_, c)| {
                    depth += i32::from(c == '{') - i32::from(c == '}');
                    depth == 0
                })
                .map_or(rest.len(), |(i, _)| i);
            &rest[..end]
        })
        .collect();
    assert!(examples.len() >= 4);
    for body in examples {
        let spec = load(body).unwrap_or_else(|e| panic!("{body}: {e}"));
        spec.build(0);
    }
    let six = load(r#"phy = "OC-3c", rate = "6M", delay = "95ms""#).unwrap();
    assert_eq!(six.ip.unwrap().rate_bps, 6_000_000);
    assert_eq!(six.impair.unwrap().delay_ns, 95_000_000);
}

#[test]
fn impairment_keys_are_emulate_keys() {
    assert!(IMPAIR_KEYS.iter().all(|k| KEYS.contains(k)));
}

#[test]
fn vc_limits_are_atm_port_keys() {
    let s = load(r#"phy = "E1", buffer_cells = 200, vc_buffer_cells = 100, vc_epd = 50"#).unwrap();
    let limits = s.atm.unwrap().port.vc_limits;
    assert_eq!(
        (limits.buffer_cells, limits.epd_threshold),
        (Some(100), Some(50))
    );
    assert!(err("vc_epd = 5").contains("needs phy"));
    assert!(err(r#"phy = "E1", vc_buffer_cells = 10, vc_epd = 10"#).contains("must be below"));
}

#[test]
fn category_queues_are_atm_port_keys() {
    let s = load(
        r#"phy = "E1", buffer_cells = 200, queues = [{ service = "ubr", buffer_cells = 100, clp_threshold = 50, epd = 90 }]"#,
    )
    .unwrap();
    let port = s.atm.unwrap().port;
    let ubr = port.categories[ServiceCategory::Ubr.priority()];
    assert_eq!(
        (ubr.buffer_cells, ubr.clp1_threshold, ubr.epd_threshold),
        (Some(100), Some(50), Some(90))
    );
    assert_eq!(port.port_config(200).categories, port.categories);
    assert!(port.categories[ServiceCategory::Cbr.priority()] == Default::default());
    let queue = |q: &str| {
        err(&format!(
            r#"phy = "E1", buffer_cells = 200, queues = [{q}]"#
        ))
    };
    assert!(queue("{ buffer_cells = 10 }").contains("needs service"));
    assert!(queue(r#"{ service = "ubr" }"#).contains("needs buffer_cells, clp_threshold or epd"));
    assert!(queue(r#"{ service = "ubr", buffer_cells = 300 }"#).contains("exceed the port's"));
    assert!(queue(r#"{ service = "ubr", buffer_cells = 10, epd = 10 }"#)
        .contains("EPD threshold 10 must be below the queue's 10 cells"));
    assert!(queue(r#"{ service = "cbr", clp_threshold = 200 }"#).contains("must be below"));
    assert!(
        queue(r#"{ service = "ubr", epd = 5 }, { service = "ubr", epd = 6 }"#)
            .contains("a second queue")
    );
    assert!(queue(r#"{ service = "ubr", epd = 5, limit = 3 }"#).contains("limit"));
    assert!(err(r#"queues = [{ service = "ubr", epd = 5 }]"#).contains("needs phy"));
}
