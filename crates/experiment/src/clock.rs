//! Clock offset between two hosts from NTP-style exchanges, sans-IO.
//!
//! A probe leaves the client at `t1` (client clock), reaches the server at `t2` (server
//! clock), leaves it at `t3` and returns at `t4` (client clock). With a symmetric path the
//! server's clock is ahead of the client's by `θ = ((t2 − t1) + (t3 − t4)) / 2`, and whatever
//! the asymmetry, the true offset lies within `θ ± δ/2` where `δ = (t4 − t1) − (t3 − t2)` is
//! the round trip spent on the network. Queueing only adds to `δ`, so the samples with the
//! smallest round trip are the trustworthy ones: the estimator keeps the minimum-RTT sample of
//! each time window, fits `θ(t) = a + b·t` through them by least squares (`b` is the drift),
//! and bounds its error by half the smallest round trip plus the fit residual.
//!
//! The residual is widened by each sample's own uncertainty: `r = max_i(|θ_i − fit(t_i)| +
//! (δ_i − δ_min)/2)`, so that at every kept sample the truth lies within `δ_min/2 + r` of the
//! line. The error of a line against a (linear) true offset is itself linear, so the bound
//! `B = δ_min/2 + r` holds over the whole span of the samples; beyond it the error can grow
//! by at most `2B` per span, and [`ClockOffset::at`] widens the bound accordingly (the drift's
//! own bound, `2B/span`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One exchange, all in nanoseconds: `t1`, `t4` on the client's clock, `t2`, `t3` on the
/// server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    pub t1: u64,
    pub t2: u64,
    pub t3: u64,
    pub t4: u64,
}

impl ClockSample {
    /// Server clock minus client clock, assuming a symmetric path.
    pub fn offset_ns(&self) -> i128 {
        let (t1, t2, t3, t4) = (
            i128::from(self.t1),
            i128::from(self.t2),
            i128::from(self.t3),
            i128::from(self.t4),
        );
        ((t2 - t1) + (t3 - t4)) / 2
    }

    /// Round trip spent on the network (the server's holding time removed).
    pub fn rtt_ns(&self) -> i128 {
        (i128::from(self.t4) - i128::from(self.t1)) - (i128::from(self.t3) - i128::from(self.t2))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClockError {
    #[error("clock sample out of order: the client received before it sent (t4 < t1)")]
    ClientOrder,
    #[error("clock sample out of order: the server sent before it received (t3 < t2)")]
    ServerOrder,
    #[error("clock sample has a negative round trip: the server held the probe longer than the client waited")]
    NegativeRtt,
}

/// Streams samples in, keeps one per window (the least-RTT one), fits offset and drift.
#[derive(Debug, Clone)]
pub struct ClockEstimator {
    window_ns: u64,
    /// Window index (t1 / window) -> least-RTT sample of that window.
    best: BTreeMap<u64, ClockSample>,
    /// Bound on memory: the oldest windows are dropped past this many.
    max_windows: usize,
}

/// The fitted line and its error terms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClockFit {
    /// Client time the fit is centred on.
    pub t_ref: u64,
    /// Offset (server − client) at `t_ref`.
    pub offset_ref_ns: i128,
    /// Drift: change of the offset per nanosecond of client time (1e-6 = 1 ppm).
    pub drift: f64,
    /// Smallest network round trip among the kept samples.
    pub min_rtt_ns: u64,
    /// Largest distance of a kept sample's offset from the fitted line, plus half its round
    /// trip's excess over the smallest one.
    pub residual_ns: f64,
    /// Client times of the first and last kept samples: the span the bound holds over.
    pub t_first: u64,
    pub t_last: u64,
    /// Samples the fit used.
    pub samples: usize,
}

impl Default for ClockEstimator {
    fn default() -> Self {
        ClockEstimator::new(1_000_000_000)
    }
}

impl ClockEstimator {
    /// `window_ns`: keep the best sample of each window this long (1 s by default). Shorter
    /// windows follow drift with more points; longer ones give each window more chances of
    /// an unqueued probe.
    pub fn new(window_ns: u64) -> Self {
        ClockEstimator {
            window_ns: window_ns.max(1),
            best: BTreeMap::new(),
            max_windows: 100_000,
        }
    }

    /// Adds one exchange; inconsistent timestamps are refused, never half-used.
    pub fn add(&mut self, s: ClockSample) -> Result<(), ClockError> {
        if s.t4 < s.t1 {
            return Err(ClockError::ClientOrder);
        }
        if s.t3 < s.t2 {
            return Err(ClockError::ServerOrder);
        }
        if s.rtt_ns() < 0 {
            return Err(ClockError::NegativeRtt);
        }
        let w = s.t1 / self.window_ns;
        match self.best.get(&w) {
            Some(old) if old.rtt_ns() <= s.rtt_ns() => {}
            _ => {
                self.best.insert(w, s);
            }
        }
        while self.best.len() > self.max_windows {
            self.best.pop_first();
        }
        Ok(())
    }

    /// The filtered samples (least RTT per window), in time order.
    pub fn filtered(&self) -> impl Iterator<Item = &ClockSample> {
        self.best.values()
    }

    /// Least-squares line through the filtered samples' offsets against `t1`; `None` before
    /// the first sample. One window gives a constant offset (no drift).
    pub fn fit(&self) -> Option<ClockFit> {
        let first = self.best.values().next()?;
        let t_ref = first.t1;
        let o_ref = first.offset_ns();
        // Relative to the first sample so that f64 keeps nanosecond precision.
        let pts: Vec<(f64, f64)> = self
            .best
            .values()
            .map(|s| ((s.t1 - t_ref) as f64, (s.offset_ns() - o_ref) as f64))
            .collect();
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
        let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
        let drift = if sxx > 0.0 { sxy / sxx } else { 0.0 };
        let a = my - drift * mx;
        let min_rtt = self.best.values().map(|s| s.rtt_ns()).min().unwrap_or(0);
        let residual = pts
            .iter()
            .zip(self.best.values())
            .map(|(p, s)| (p.1 - (a + drift * p.0)).abs() + (s.rtt_ns() - min_rtt) as f64 / 2.0)
            .fold(0.0, f64::max);
        let t_last = self.best.values().next_back().map_or(t_ref, |s| s.t1);
        Some(ClockFit {
            t_ref,
            offset_ref_ns: o_ref + a.round() as i128,
            drift,
            min_rtt_ns: u64::try_from(min_rtt).unwrap_or(u64::MAX),
            residual_ns: residual,
            t_first: t_ref,
            t_last,
            samples: pts.len(),
        })
    }
}

impl ClockFit {
    /// Half the smallest round trip plus the residual: the truth lies within this of the line
    /// over the samples' span.
    pub fn bound_ns(&self) -> f64 {
        (self.min_rtt_ns / 2) as f64 + self.residual_ns
    }

    /// The fit as a host's clock is reported and used: the offset at the last sample, the
    /// drift in ppm and the bounds of both.
    pub fn offset(&self) -> ClockOffset {
        let at = i128::from(self.t_last) - i128::from(self.t_ref);
        let offset = self.offset_ref_ns + (self.drift * at as f64).round() as i128;
        let span = self.t_last - self.t_first;
        let bound = self.bound_ns();
        // Lines within `bound` of the truth at both ends of the span differ in slope by at
        // most 2·bound/span.
        let drift_bound = (span > 0).then(|| 2.0 * bound / span as f64 * 1e6);
        ClockOffset {
            offset_ns: i64::try_from(offset).unwrap_or(if offset < 0 {
                i64::MIN
            } else {
                i64::MAX
            }),
            // Saturating float-to-int conversion: a huge bound stays huge, never wraps.
            bound_ns: bound.ceil() as u64,
            at_ns: self.t_last,
            drift_ppm: drift_bound.map(|_| self.drift * 1e6),
            drift_bound_ppm: drift_bound,
            first_probe_ns: self.t_first,
            probes: self.samples,
        }
    }
}

/// A host's clock against this one's, from a [`ClockFit`]: what a run reports for each agent
/// and corrects one-way delays with.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The host's clock minus this one's at `at_ns`.
    pub offset_ns: i64,
    /// Error bound of the offset anywhere between the first and the last probe.
    pub bound_ns: u64,
    /// This host's time (Unix ns) of the last probe the fit used.
    pub at_ns: u64,
    /// How fast the offset changes, µs per second; `None` while every probe falls into one
    /// window (no drift can be told; taken as 0).
    pub drift_ppm: Option<f64>,
    /// Error bound of `drift_ppm`.
    pub drift_bound_ppm: Option<f64>,
    /// This host's time of the first probe the fit used.
    pub first_probe_ns: u64,
    /// Probes the fit used (the least round trip of each window).
    pub probes: usize,
}

impl ClockOffset {
    /// A clock known exactly, `offset_ns` off with a bound of `bound_ns` at all times
    /// (simulated hosts share one virtual clock: 0 and 0).
    pub fn fixed(offset_ns: i64, bound_ns: u64) -> ClockOffset {
        ClockOffset {
            offset_ns,
            bound_ns,
            at_ns: 0,
            drift_ppm: Some(0.0),
            drift_bound_ppm: Some(0.0),
            first_probe_ns: 0,
            probes: 0,
        }
    }

    /// The offset at this host's time `t` along the fitted line, and its bound: `bound_ns`
    /// between the first and last probes, beyond them widened by the drift's bound for each
    /// ns away (`B·(1 + 2·d/span)`). Without a drift (one window) the offset is taken as
    /// constant and the bound is not widened.
    ///
    /// To turn a one-way delay measured as `server_rx − client_tx` into a true one, subtract
    /// the offset at `client_tx`; the bound carries over unchanged.
    pub fn at(&self, t: u64) -> (i64, u64) {
        let dt = i128::from(t) - i128::from(self.at_ns);
        let drift = self.drift_ppm.unwrap_or(0.0) * 1e-6;
        let off = i128::from(self.offset_ns) + (drift * dt as f64).round() as i128;
        let off = i64::try_from(off).unwrap_or(if off < 0 { i64::MIN } else { i64::MAX });
        let outside = if t < self.first_probe_ns {
            self.first_probe_ns - t
        } else {
            t.saturating_sub(self.at_ns)
        };
        let widening = self.drift_bound_ppm.unwrap_or(0.0) * 1e-6 * outside as f64;
        (off, (self.bound_ns as f64 + widening).ceil() as u64)
    }
}

/// Whether a one-way value (a delay corrected by an offset estimate) means anything: it does
/// not when the offset's error bound is as large as the value itself. Flag such values
/// instead of reporting them.
pub fn one_way_valid(value_ns: i64, bound_ns: u64) -> bool {
    bound_ns < value_ns.unsigned_abs()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A server clock `offset0 + drift·t` ahead of the client's, a path of `base` ns each way
    /// plus exponential-ish queueing delays.
    fn exchange(
        rng: &mut ChaCha8Rng,
        t1: u64,
        offset0: i64,
        drift: f64,
        base: u64,
        queue: u64,
    ) -> ClockSample {
        let server = |t: u64| (t as i64 + offset0 + (drift * t as f64) as i64) as u64;
        let q = |rng: &mut ChaCha8Rng| {
            // Most probes queue a little, some a lot, now and then none.
            if rng.gen_bool(0.1) {
                0
            } else {
                rng.gen_range(0..queue)
            }
        };
        let arrive = t1 + base + q(rng);
        let hold = rng.gen_range(1_000..50_000);
        let leave = arrive + hold;
        let back = leave + base + q(rng);
        ClockSample {
            t1,
            t2: server(arrive),
            t3: server(leave),
            t4: back,
        }
    }

    fn true_offset(t: u64, offset0: i64, drift: f64) -> i64 {
        offset0 + (drift * t as f64) as i64
    }

    #[test]
    fn recovers_offset_and_drift_within_the_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (offset0, drift) = (-3_456_789_i64, 20e-6); // 20 ppm
        let start = 1_700_000_000_000_000_000u64;
        let mut est = ClockEstimator::new(1_000_000_000);
        for i in 0..600u64 {
            let t1 = start + i * 100_000_000; // 10 per second for a minute
            let s = exchange(&mut rng, t1, offset0, drift, 200_000, 2_000_000);
            est.add(s).unwrap();
        }
        let fit = est.fit().unwrap();
        assert_eq!(fit.samples, 60);
        assert!((fit.drift - drift).abs() < 2e-6, "drift {}", fit.drift);
        for k in [0u64, 30, 59, 70] {
            let t = start + k * 1_000_000_000;
            let (off, bound) = est.fit().unwrap().offset().at(t);
            let truth = true_offset(t - start, offset0, drift) + (drift * start as f64) as i64;
            let err = (off - truth).unsigned_abs();
            assert!(err <= bound, "t+{k}s: error {err} > bound {bound}");
            assert!(
                bound < 3_000_000,
                "bound {bound} should stay near the queueing delays"
            );
        }
        assert!(one_way_valid(5_000_000, 300_000));
        assert!(!one_way_valid(200_000, 300_000));
        assert!(!one_way_valid(-200_000, 300_000));
    }

    /// Issue 12: drift was never estimated. A clock 35 ppm fast, probed in bursts every 2 s for
    /// two minutes through a queueing path, is fitted within the drift bound reported.
    #[test]
    fn a_drifting_clock_is_fitted_within_its_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let (offset0, drift) = (250_000_i64, 35e-6);
        let mut est = ClockEstimator::new(2_000_000_000);
        for burst in 0..60u64 {
            for k in 0..4 {
                let t1 = 1_000_000_000_000 + burst * 2_000_000_000 + k * 5_000_000;
                est.add(exchange(&mut rng, t1, offset0, drift, 100_000, 3_000_000))
                    .unwrap();
            }
        }
        let clock = est.fit().unwrap().offset();
        assert_eq!(clock.probes, 60);
        let (ppm, bound) = (clock.drift_ppm.unwrap(), clock.drift_bound_ppm.unwrap());
        assert!((ppm - 35.0).abs() <= bound, "drift {ppm} ± {bound} ppm");
        assert!(
            bound < 100.0,
            "a two-minute span bounds drift tightly: {bound} ppm"
        );
        // The offset along the line, even a minute past the last probe, within its bound.
        for t in [1_000_000_000_000, 1_060_000_000_000, 1_180_000_000_000] {
            let (off, b) = clock.at(t);
            let truth = true_offset(t, offset0, drift);
            assert!(
                (off - truth).unsigned_abs() <= b + 4,
                "t {t}: {off} vs {truth} ± {b}"
            );
        }
        // One burst: the drift is unknown, never a made-up 0 ± 0.
        let mut one = ClockEstimator::new(2_000_000_000);
        one.add(exchange(
            &mut rng,
            5_000_000_000,
            offset0,
            drift,
            100_000,
            3_000_000,
        ))
        .unwrap();
        let clock = one.fit().unwrap().offset();
        assert_eq!((clock.drift_ppm, clock.drift_bound_ppm), (None, None));
    }

    #[test]
    fn refuses_inconsistent_samples() {
        let mut est = ClockEstimator::default();
        assert_eq!(est.fit(), None);
        let bad = ClockSample {
            t1: 10,
            t2: 5,
            t3: 6,
            t4: 9,
        };
        assert_eq!(est.add(bad), Err(ClockError::ClientOrder));
        let bad = ClockSample {
            t1: 10,
            t2: 5,
            t3: 4,
            t4: 19,
        };
        assert_eq!(est.add(bad), Err(ClockError::ServerOrder));
        let bad = ClockSample {
            t1: 10,
            t2: 0,
            t3: 100,
            t4: 19,
        };
        assert_eq!(est.add(bad), Err(ClockError::NegativeRtt));
        let ok = ClockSample {
            t1: 10,
            t2: 1_000,
            t3: 1_002,
            t4: 20,
        };
        est.add(ok).unwrap();
        // ((990) + (982)) / 2 = 986, rtt 8.
        assert_eq!(est.fit().unwrap().offset().at(10_000), (986, 4));
    }

    proptest! {
        #[test]
        fn truth_is_within_the_bound(
            seed in any::<u64>(),
            offset0 in -1_000_000_000i64..1_000_000_000,
            ppm in -100.0f64..100.0,
            base in 10_000u64..5_000_000,
            queue in 1u64..10_000_000,
        ) {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let drift = ppm * 1e-6;
            let mut est = ClockEstimator::new(500_000_000);
            for i in 0..100u64 {
                let t1 = 1_000_000_000_000 + i * 100_000_000;
                est.add(exchange(&mut rng, t1, offset0, drift, base, queue)).unwrap();
            }
            for k in [0u64, 5, 9] {
                let t = 1_000_000_000_000 + k * 1_000_000_000;
                let (off, bound) = est.fit().unwrap().offset().at(t);
                let truth = true_offset(t, offset0, drift);
                // Integer rounding of the synthetic clock adds a few ns.
                prop_assert!((off - truth).unsigned_abs() <= bound + 4,
                    "error {} bound {}", (off - truth).unsigned_abs(), bound);
            }
        }
    }
}
