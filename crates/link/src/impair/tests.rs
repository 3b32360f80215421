use proptest::prelude::*;

use super::*;
use crate::run_virtual;

fn frame(id: u64, len: u32) -> Frame {
    Frame { id, len, dscp: 0 }
}

/// `n` frames of `len` bytes every `gap_ns` from time 0.
fn arrivals(n: u64, len: u32, gap_ns: u64) -> impl Iterator<Item = (u64, Frame)> {
    (0..n).map(move |i| (i * gap_ns, frame(i, len)))
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
fn delay_only_adds_exactly_the_delay_in_order() {
    let config = ImpairConfig {
        delay_ns: 95_000_000,
        ..ImpairConfig::default()
    };
    let mut m = Impairments::new(config, 1);
    let (events, _) = run_virtual(&mut m, arrivals(1000, 1500, 12_000));
    let d = departures(&events);
    assert_eq!(d.len(), 1000);
    for (k, &(id, at)) in d.iter().enumerate() {
        assert_eq!(id, k as u64);
        assert_eq!(at, k as u64 * 12_000 + 95_000_000);
    }
    let mut r = Vec::new();
    m.report(&mut r);
    assert_eq!((r[0].frames_in, r[0].frames_out), (1000, 1000));
    // 95 ms of frames every 12 µs are held at once.
    assert_eq!(r[0].max_depth, 1000);
}

#[test]
fn the_limit_bounds_what_is_held_and_counts_drops() {
    let config = ImpairConfig {
        delay_ns: 1_000_000,
        limit: 10,
        ..ImpairConfig::default()
    };
    let mut m = Impairments::new(config, 1);
    // 100 frames 1 µs apart: only 10 may be on the 1 ms delay line at once.
    let (events, verdicts) = run_virtual(&mut m, arrivals(100, 125, 1_000));
    assert_eq!(departures(&events).len(), 10);
    let full = verdicts
        .iter()
        .filter(|v| **v == Verdict::Dropped(Cause::QueueFull))
        .count();
    assert_eq!(full, 90);
    let mut r = Vec::new();
    m.report(&mut r);
    assert_eq!(r[0].dropped.get("queue_full"), Some(&90));
    assert_eq!(r[0].max_depth, 10);
}

/// Mean and standard deviation of the added delay over many frames.
fn delay_moments(distribution: Distribution) -> (f64, f64, u64, u64) {
    let config = ImpairConfig {
        delay_ns: 10_000_000,
        jitter_ns: 1_000_000,
        distribution,
        ..ImpairConfig::default()
    };
    let mut m = Impairments::new(config, 3);
    let n = 100_000u64;
    let (events, _) = run_virtual(&mut m, arrivals(n, 100, 1_000));
    let added: Vec<f64> = departures(&events)
        .iter()
        .map(|&(id, at)| (at - id * 1_000) as f64)
        .collect();
    let mean = added.iter().sum::<f64>() / n as f64;
    let var = added.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
    let min = added.iter().cloned().fold(f64::MAX, f64::min) as u64;
    let max = added.iter().cloned().fold(0.0, f64::max) as u64;
    (mean, var.sqrt(), min, max)
}

#[test]
fn jitter_distributions_have_the_delay_as_mean_and_their_spread() {
    let (mean, sd, min, max) = delay_moments(Distribution::Uniform);
    assert!((mean - 1e7).abs() < 1e4, "{mean}");
    assert!((sd - 1e6 / 3f64.sqrt()).abs() < 1e4, "{sd}");
    assert!(min >= 9_000_000 && max <= 11_000_000);
    let (mean, sd, _, _) = delay_moments(Distribution::Normal);
    assert!((mean - 1e7).abs() < 1e4, "{mean}");
    assert!((sd - 1e6).abs() < 2e4, "{sd}");
    let (mean, sd, min, max) = delay_moments(Distribution::Pareto);
    assert!((mean - 1e7).abs() < 3e4, "{mean}");
    assert!((sd - 1e6).abs() < 2e5, "{sd}");
    // Heavy tail one way: never much below the delay, sometimes far above it.
    assert!(
        min as f64 >= 1e7 - 0.58e6 && max as f64 > 1e7 + 5e6,
        "{min} {max}"
    );
}

#[test]
fn jitter_reorders_as_netem_does() {
    let config = ImpairConfig {
        delay_ns: 1_000_000,
        jitter_ns: 500_000,
        ..ImpairConfig::default()
    };
    let mut m = Impairments::new(config, 9);
    let (events, _) = run_virtual(&mut m, arrivals(1000, 100, 10_000));
    let d = departures(&events);
    assert!(d.windows(2).all(|w| w[0].1 <= w[1].1), "time order");
    assert!(
        d.windows(2).any(|w| w[0].0 > w[1].0),
        "some frames overtaken"
    );
}

#[test]
fn reordered_frames_skip_the_delay() {
    let config = ImpairConfig {
        delay_ns: 1_000_000,
        reorder: 0.25,
        ..ImpairConfig::default()
    };
    let mut m = Impairments::new(config, 5);
    let (events, _) = run_virtual(&mut m, arrivals(10_000, 100, 10_000));
    let d = departures(&events);
    let early = d.iter().filter(|&&(id, at)| at == id * 10_000).count();
    let late = d
        .iter()
        .filter(|&&(id, at)| at == id * 10_000 + 1_000_000)
        .count();
    assert_eq!(early + late, 10_000);
    assert!((early as f64 / 1e4 - 0.25).abs() < 0.02, "{early}");
    let mut r = Vec::new();
    m.report(&mut r);
    assert_eq!(r[0].reordered, early as u64);
}

#[test]
fn loss_and_duplication_have_their_rates() {
    let config = ImpairConfig {
        loss: LossModel::Random { p: 0.1 },
        duplicate: 0.05,
        ..ImpairConfig::default()
    };
    let mut m = Impairments::new(config, 11);
    let n = 100_000;
    let (events, verdicts) = run_virtual(&mut m, arrivals(n, 100, 1_000));
    let lost = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Dropped(_)))
        .count();
    let dup = verdicts
        .iter()
        .filter(|v| **v == Verdict::Duplicated)
        .count();
    assert!((lost as f64 / n as f64 - 0.1).abs() < 0.005);
    assert!((dup as f64 / (n as usize - lost) as f64 - 0.05).abs() < 0.005);
    assert_eq!(departures(&events).len(), n as usize - lost + dup);
}

proptest! {
    /// Whatever the settings and arrivals: every frame held comes out once per copy, never
    /// before it arrived, in time order, and the counters add up.
    #[test]
    fn frames_are_conserved_and_leave_in_time_order(
        gaps in proptest::collection::vec((0u64..50_000, 1u32..9000), 1..300),
        delay in 0u64..1_000_000, jitter in 0u64..1_000_000,
        loss in 0.0f64..0.5, dup in 0.0f64..0.5, reorder in 0.0f64..0.5,
        limit in 1u32..50,
        dist in 0usize..3, seed: u64,
    ) {
        let distribution = [Distribution::Uniform, Distribution::Normal, Distribution::Pareto][dist];
        let config = ImpairConfig {
            delay_ns: delay, jitter_ns: jitter, distribution,
            loss: LossModel::Random { p: loss }, duplicate: dup, reorder, limit,
        };
        let mut m = Impairments::new(config, seed);
        let mut t = 0;
        let input: Vec<(u64, Frame)> = gaps.iter().enumerate().map(|(i, &(g, len))| {
            t += g;
            (t, frame(i as u64, len))
        }).collect();
        let (events, verdicts) = run_virtual(&mut m, input.clone());
        let copies: usize = verdicts.iter().map(|v| match v {
            Verdict::Queued => 1, Verdict::Duplicated => 2, Verdict::Dropped(_) => 0,
        }).sum();
        let d = departures(&events);
        prop_assert_eq!(d.len(), copies);
        prop_assert!(d.windows(2).all(|w| w[0].1 <= w[1].1));
        for &(id, at) in &d {
            prop_assert!(at >= input[id as usize].0);
        }
        let mut r = Vec::new();
        m.report(&mut r);
        prop_assert_eq!(r[0].frames_in, input.len() as u64);
        prop_assert_eq!(r[0].frames_out, copies as u64);
        prop_assert_eq!(r[0].frames_in + r[0].duplicated, r[0].frames_out + r[0].frames_dropped());
        prop_assert!(r[0].max_depth <= u64::from(limit));
    }
}

#[test]
fn a_delay_alone_is_a_fixed_delay() {
    let delay = ImpairConfig {
        delay_ns: 10_000_000,
        ..ImpairConfig::default()
    };
    assert!(delay.is_fixed_delay() && !delay.may_reorder());
    let lossy = ImpairConfig {
        loss: LossModel::Random { p: 0.01 },
        ..delay.clone()
    };
    assert!(!lossy.is_fixed_delay() && !lossy.may_reorder());
    let limited = ImpairConfig {
        limit: 10,
        ..delay.clone()
    };
    assert!(!limited.is_fixed_delay());
    let jittery = ImpairConfig {
        jitter_ns: 1,
        ..delay
    };
    assert!(!jittery.is_fixed_delay() && jittery.may_reorder());
}
