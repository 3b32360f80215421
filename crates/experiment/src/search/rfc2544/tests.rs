use super::*;
use crate::search::tests::net;
use proptest::prelude::*;

/// RFC 2544's own trial length, for tests that are not about it.
const LONG: u64 = RFC2544_TRIAL_NS;

/// Runs the search on `path` (loss and output of a trial); returns how many trials ran.
fn run(s: &mut Rfc2544Throughput, path: impl Fn(&Trial) -> (f64, f64)) -> usize {
    let mut n = 0;
    while let Some(t) = s.next_trial() {
        let (loss, output) = path(&t);
        s.record(t.rate_bps, loss, output).unwrap();
        n += 1;
        assert!(n < 200, "search does not terminate");
    }
    n
}

fn on(c: u64) -> impl Fn(&Trial) -> (f64, f64) {
    let path = net(c);
    move |t| path(t.rate_bps)
}

#[test]
fn throughput_converges_within_resolution() {
    let mut s = Rfc2544Throughput::new(1_000_000, 100_000_000, 100_000, 0.0, LONG).unwrap();
    let n = run(&mut s, on(37_123_456));
    let r = s.result();
    let found = r.rate_bps.unwrap();
    assert!(
        found <= 37_123_456 && 37_123_456 - found <= 100_000,
        "{found}"
    );
    assert!(r.failed_bps.unwrap() > 37_123_456);
    assert!(n <= 2 + 10 + 1 + 1, "{n} trials");
    assert_eq!(r.trials.len() + 1, n, "the bisection and one re-run");
    let v = r.verification.unwrap();
    assert_eq!((v.rate_bps, v.trial_s, v.loss_ratio), (found, 120.0, 0.0));
    assert_eq!(r.capacity_bps, Some(37_123_456.0));
    assert_eq!(r.flags, []);
}

#[test]
fn throughput_edges() {
    let mut s = Rfc2544Throughput::new(1_000, 10_000, 10, 0.0, LONG).unwrap();
    assert_eq!(run(&mut s, on(1_000_000)), 2, "max passes, then its re-run");
    assert_eq!(s.result().rate_bps, Some(10_000));
    assert_eq!(s.result().capacity_bps, None, "nothing saturated the path");
    let mut s = Rfc2544Throughput::new(1_000, 10_000, 10, 0.0, LONG).unwrap();
    assert_eq!(
        run(&mut s, on(10)),
        2,
        "max and min fail: nothing to re-run"
    );
    assert_eq!(s.result().rate_bps, None);
    assert_eq!(s.result().verification, None);
    assert!(s.is_done());
}

#[test]
fn record_checks_the_trial() {
    let mut s = Rfc2544Throughput::new(1_000, 10_000, 10, 0.0, LONG).unwrap();
    assert_eq!(s.record(5, 0.0, 5.0), Err(SearchError::NoPendingTrial));
    let t = s.next_trial().unwrap();
    assert_eq!(s.next_trial().unwrap(), t, "asking again repeats the trial");
    assert!(matches!(
        s.record(5, 0.0, 5.0),
        Err(SearchError::WrongTrial { .. })
    ));
    // NaN loss counts as a failure, not a pass.
    s.record(t.rate_bps, f64::NAN, 0.0).unwrap();
    assert_eq!(s.result().failed_bps, Some(10_000));
    assert!(Rfc2544Throughput::new(0, 10, 1, 0.0, LONG).is_err());
    assert!(Rfc2544Throughput::new(10, 5, 1, 0.0, LONG).is_err());
    assert!(Rfc2544Throughput::new(1, 5, 1, f64::NAN, LONG).is_err());
    assert!(Rfc2544Throughput::new(1, 5, 1, 0.0, 0).is_err());
}

#[test]
fn the_re_run_is_twice_as_long_and_checked() {
    let mut s = Rfc2544Throughput::new(1_000, 10_000, 10, 0.0, 1_500_000_000).unwrap();
    let first = s.next_trial().unwrap();
    assert_eq!(first.duration_ns, None, "the search's own trial length");
    // No loss, but the queue stretched the arrivals: 8000 bit/s came out.
    s.record(first.rate_bps, 0.0, 8_000.0).unwrap();
    assert_eq!(s.result().capacity_bps, None, "nothing lost: not saturated");
    let again = s.next_trial().unwrap();
    assert_eq!(
        (again.rate_bps, again.duration_ns),
        (10_000, Some(3_000_000_000))
    );
    assert!(matches!(
        s.record(9_999, 0.0, 1.0),
        Err(SearchError::WrongTrial { .. })
    ));
    s.record(10_000, 0.25, 7_500.0).unwrap();
    assert!(s.is_done());
    let r = s.result();
    assert_eq!(
        r.rate_bps,
        Some(10_000),
        "the flags qualify the rate, not change it"
    );
    assert_eq!(
        r.capacity_bps,
        Some(8_000.0),
        "once the re-run lost, the best any trial delivered"
    );
    assert_eq!(
        r.flags,
        [
            ThroughputFlag::ShortTrial,
            ThroughputFlag::AboveCapacity,
            ThroughputFlag::LossAtLongerTrial
        ]
    );
}

/// A tbf of `capacity` bit/s behind a queue of `buffer` bits: a trial at `rate` for `t_ns`
/// loses only what overflows the queue, and delivers at most the capacity.
fn queue(capacity: f64, buffer: f64, trial_ns: u64) -> impl Fn(&Trial) -> (f64, f64) {
    move |t| {
        let rate = t.rate_bps as f64;
        let seconds = t.duration_ns.unwrap_or(trial_ns) as f64 / 1e9;
        let excess = ((rate - capacity) * seconds - buffer).max(0.0);
        (excess / (rate * seconds), rate.min(capacity))
    }
}

/// Issue 12: on lab `bottleneck` (10 Mbit/s tbf, 32 KiB queue and a 3 KiB bucket, 1000-byte
/// payloads in 1042-byte frames) 1.5 s trials found 9.76 Mbit/s, above the link's 9.6.
#[test]
fn a_queue_that_absorbs_a_short_trial_is_flagged() {
    let (capacity, buffer) = (10e6 * 1000.0 / 1042.0, 35.0 * 1024.0 * 8.0);
    let search = |trial_ns| {
        let mut s = Rfc2544Throughput::new(1_000_000, 20_000_000, 250_000, 0.0, trial_ns).unwrap();
        run(&mut s, queue(capacity, buffer, trial_ns));
        s.result()
    };
    let short = search(1_500_000_000);
    assert_eq!(short.rate_bps, Some(9_757_812));
    assert!((short.capacity_bps.unwrap() - capacity).abs() < 1.0);
    assert_eq!(
        short.flags,
        [
            ThroughputFlag::ShortTrial,
            ThroughputFlag::AboveCapacity,
            ThroughputFlag::LossAtLongerTrial
        ]
    );
    let rfc = search(RFC2544_TRIAL_NS);
    assert!(rfc.rate_bps.unwrap() as f64 <= capacity, "{rfc:?}");
    assert_eq!(rfc.flags, []);
}

proptest! {
    #[test]
    fn throughput_always_within_resolution(
        cap in 1u64..2_000_000, min in 1u64..1000, span in 1u64..2_000_000, res in 1u64..5000
    ) {
        let max = min + span;
        let mut s = Rfc2544Throughput::new(min, max, res, 0.0, LONG).unwrap();
        run(&mut s, on(cap));
        let r = s.result();
        if cap >= max {
            prop_assert_eq!(r.rate_bps, Some(max));
        } else if cap < min {
            prop_assert_eq!(r.rate_bps, None);
        } else {
            let f = r.rate_bps.unwrap();
            prop_assert!(f <= cap && cap - f <= res);
        }
        prop_assert_eq!(r.flags, vec![]);
    }
}

#[test]
fn back_to_back_finds_the_longest_clean_burst() {
    // A buffer that absorbs bursts up to 347 packets at this line rate.
    let mut s = BackToBack::new(1_000_000_000, 1, 10_000, 1, 3).unwrap();
    let mut n = 0;
    while let Some(t) = s.next_trial() {
        assert_eq!(t.rate_bps, 1_000_000_000);
        assert_eq!(t.duration_ns, None, "a burst has no re-run");
        let b = t.burst_packets.unwrap();
        s.record(b, if b <= 347 { 0.0 } else { 0.01 }).unwrap();
        n += 1;
        assert!(n < 200);
    }
    let r = s.result();
    assert_eq!(r.per_search, vec![347, 347, 347]);
    assert_eq!(r.mean_packets, 347.0);
}
