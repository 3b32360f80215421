use flowlab_qos::meter::Color::{self, Green, Red, Yellow};
use flowlab_qos::sched::QueueLimit;

use super::*;
use crate::diffserv::{read_sched, DiffServEdge};
use crate::{run_virtual, Event, Frame, LinkModel, Verdict};

const MS: u64 = 1_000_000;

/// The meter of the one class `{ body }` of a link's `classes`.
fn class(body: &str) -> Result<Option<MeterSpec>, FileError> {
    let root = flowlab_spanned::parse(&format!("classes = [{{ {body} }}]\n")).expect("toml");
    let doc = Reader::of(&root, "link")?;
    let spec = read_sched(&doc, QueueLimit::Unlimited)?;
    Ok(spec.classes[0].meter)
}

fn colours(spec: &MeterSpec, frames: &[(u64, u32)]) -> Vec<Color> {
    let mut m = Marker::new(spec).expect("valid");
    frames.iter().map(|&(t, b)| m.mark(t, b).0).collect()
}

#[test]
fn srtcm_follows_rfc_2697() {
    // CIR 1 Mbit/s = 125 B/ms, CBS = EBS = 3000 B, both full at 0.
    let spec = class(
        r#"meter = "srtcm", meter_rate = "1M", meter_burst = 3000, meter_excess_burst = 3000"#,
    )
    .unwrap()
    .unwrap();
    let mut frames: Vec<(u64, u32)> = (0..10).map(|_| (0, 1000)).collect();
    // 48 ms later 6000 B accrued: C fills to 3000 and its overflow refills E (3000).
    frames.extend((0..7).map(|_| (48 * MS, 1000)));
    let mut want = vec![Green; 3];
    want.extend([Yellow; 3]);
    want.extend([Red; 4]);
    want.extend([Green; 3]);
    want.extend([Yellow; 3]);
    want.push(Red);
    assert_eq!(colours(&spec, &frames), want);
}

#[test]
fn srtcm_fills_excess_only_from_committed_overflow() {
    let spec = class(
        r#"meter = "srtcm", meter_rate = "1M", meter_burst = 3000, meter_excess_burst = 3000"#,
    )
    .unwrap()
    .unwrap();
    // Empty both, then 24 ms (3000 B) only refills C: E stays empty.
    let mut frames: Vec<(u64, u32)> = (0..6).map(|_| (0, 1000)).collect();
    frames.extend((0..4).map(|_| (24 * MS, 1000)));
    let got = colours(&spec, &frames);
    assert_eq!(got[6..], [Green, Green, Green, Red]);
}

#[test]
fn trtcm_follows_rfc_2698() {
    // CIR 1 Mbit/s, CBS 2000 B; PIR 2 Mbit/s, PBS 4000 B.
    let spec = class(
        r#"meter = "trtcm", meter_rate = "1M", meter_burst = 2000, meter_peak_rate = "2M", meter_peak_burst = 4000"#,
    )
    .unwrap()
    .unwrap();
    let mut frames: Vec<(u64, u32)> = (0..6).map(|_| (0, 1000)).collect();
    // 4 ms: P +1000, C +500: yellow. 8 ms: P +1000, C 1000: green.
    frames.extend([(4 * MS, 1000), (8 * MS, 1000)]);
    assert_eq!(
        colours(&spec, &frames),
        [Green, Green, Yellow, Yellow, Red, Red, Yellow, Green]
    );
}

#[test]
fn an_edge_remarks_yellow_and_drops_red() {
    let root = flowlab_spanned::parse(
        r#"classes = [
  { name = "af1", dscp = ["af11", "af12"], meter = "srtcm", meter_rate = "1M", meter_burst = 2000, meter_excess_burst = 2000, yellow = "af12" },
  { name = "be", default = true },
]
"#,
    )
    .unwrap();
    let spec = read_sched(&Reader::of(&root, "link").unwrap(), QueueLimit::Unlimited).unwrap();
    let mut edge = DiffServEdge::new(&spec, 100_000_000, 1, None);
    let input = (0..6).map(|i| {
        (
            0,
            Frame {
                id: i,
                len: 1000,
                dscp: 10,
            },
        )
    });
    let (events, verdicts) = run_virtual(&mut edge, input);
    let dscps: Vec<u8> = events
        .iter()
        .filter_map(|e| match e {
            Event::Depart { frame, .. } => Some(frame.dscp),
            _ => None,
        })
        .collect();
    assert_eq!(dscps, [10, 10, 12, 12], "green kept, yellow re-marked");
    let meter_drops = verdicts
        .iter()
        .filter(|v| **v == Verdict::Dropped(crate::Cause::Meter))
        .count();
    assert_eq!(meter_drops, 2, "red dropped");
    let mut r = Vec::new();
    edge.report(&mut r);
    let af1 = &r[0].classes[0];
    assert_eq!((af1.remarked, af1.out_of_profile, af1.sent), (2, 2, 4));
}

#[test]
fn a_remarked_frame_joins_the_class_of_its_new_dscp() {
    let root = flowlab_spanned::parse(
        r#"classes = [
  { name = "ef", dscp = "ef", meter_rate = "1M", meter_burst = 1000, red = "be" },
  { name = "be", default = true },
]
"#,
    )
    .unwrap();
    let spec = read_sched(&Reader::of(&root, "link").unwrap(), QueueLimit::Unlimited).unwrap();
    let mut edge = DiffServEdge::new(&spec, 100_000_000, 1, None);
    let input = (0..3).map(|i| {
        (
            0,
            Frame {
                id: i,
                len: 1000,
                dscp: 46,
            },
        )
    });
    let (events, _) = run_virtual(&mut edge, input);
    assert_eq!(events.len(), 3, "nothing dropped");
    let mut r = Vec::new();
    edge.report(&mut r);
    let sent: Vec<u64> = r[0].classes.iter().map(|c| c.sent).collect();
    assert_eq!(sent, [1, 2]);
    assert_eq!(r[0].classes[0].remarked, 2);
}

#[test]
fn defaults_and_errors() {
    let m = class(r#"meter_rate = "8M""#).unwrap().unwrap();
    assert_eq!(m, MeterSpec::policer(8_000_000, 10_000));
    let m = class(r#"meter = "trtcm", meter_rate = "1M", meter_peak_rate = "2M""#)
        .unwrap()
        .unwrap();
    assert_eq!(
        (m.burst_bytes, m.kind, m.yellow, m.red),
        (
            1500,
            MeterKind::TrTcm {
                pir_bps: 2_000_000,
                pbs_bytes: 2500
            },
            Action::Keep,
            Action::Drop
        )
    );
    for (body, want) in [
        (r#"meter = "srtcm""#, "needs meter_rate"),
        (r#"red = "be""#, "needs meter_rate"),
        (
            r#"meter_rate = "1M", meter_peak_rate = "2M""#,
            "needs meter = \"trtcm\"",
        ),
        (
            r#"meter_rate = "1M", meter_excess_burst = 1"#,
            "needs meter = \"srtcm\"",
        ),
        (
            r#"meter = "trtcm", meter_rate = "1M""#,
            "needs meter_peak_rate",
        ),
        (
            r#"meter = "trtcm", meter_rate = "2M", meter_peak_rate = "1M""#,
            "below meter_rate",
        ),
        (r#"meter_rate = "1M", yellow = "af12""#, "no yellow"),
        (
            r#"meter = "srtcm", meter_rate = "1M", red = "zz""#,
            "keep, drop or a DSCP",
        ),
        (r#"meter = "leaky", meter_rate = "1M""#, "meter"),
        (r#"meter_rate = "1M", meter_burst = 0"#, "above 0"),
    ] {
        let e = class(body).expect_err(body).to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{body}: {e}");
    }
}
