//! Searches as sans-IO state machines: each asks for the next trial, the controller runs it as
//! a test and records what the network did (loss ratio, output throughput), and the machine
//! decides the next trial. No clock and no socket here, so the same machines run against real
//! networks, the simulator, or a function in a unit test.
//!
//! * [`Rfc2544Throughput`]: RFC 2544 §26.1, binary search for the highest rate with no loss,
//!   re-run once at a longer trial and flagged where it exceeds the capacity it measured.
//! * [`BackToBack`]: RFC 2544 §26.4, binary search for the longest burst at line rate with no
//!   loss, the whole search repeated and averaged.
//! * [`LossVsLoad`]: RFC 2544 §26.3, loss ratio from 100 % of the maximum rate downwards in
//!   steps (10 %), until two successive trials lose nothing.
//! * [`OfferedLoad`]: the ATM Forum frame-level throughput metrics from a sweep of offered load
//!   over several sources: lossless, peak and full-load throughput.
//! * [`BurstSize`]: bursts of growing size at a constant average rate; the knee (largest burst
//!   without loss) estimates the bottleneck's buffer.

use serde::{Deserialize, Serialize};
use thiserror::Error;

mod rfc2544;
pub(crate) use rfc2544::VERIFY_FACTOR;
pub use rfc2544::{
    BackToBack, BackToBackResult, Rfc2544Throughput, ThroughputFlag, ThroughputResult,
    Verification, RFC2544_TRIAL_NS,
};

/// RFC 2544 §23: after a trial's last packet, wait this long for packets still in flight (a
/// queue draining) before counting what was lost.
pub const TRIAL_DRAIN_NS: u64 = 2_000_000_000;

/// A search was fed something it did not ask for.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SearchError {
    #[error("no trial is pending: call next_trial first")]
    NoPendingTrial,
    #[error("recorded a trial at {got}, but the pending trial is at {expected}")]
    WrongTrial { expected: u64, got: u64 },
    #[error("{0}")]
    Invalid(String),
}

/// One trial the controller must run: every flow of the search at `rate_bps` (for
/// [`OfferedLoad`], each source at `load_pct` % of its own full rate), sending bursts of
/// `burst_packets` back-to-back packets when set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trial {
    /// Rate of the trial in bit/s: the search's value for rate searches, the line (peak) rate
    /// for back-to-back bursts, the average rate for burst-size trials, the total offered
    /// load for offered-load trials.
    pub rate_bps: u64,
    /// Packets per burst, for the burst searches.
    pub burst_packets: Option<u64>,
    /// Period of the bursts (burst-size search): keeps the average rate constant.
    pub burst_every_ns: Option<u64>,
    /// Offered load in percent of full load (offered-load and loss-vs-load searches).
    pub load_pct: Option<f64>,
    /// Length of this trial when the search chooses it (the longer re-run of an RFC 2544
    /// throughput); otherwise the search's `trial`.
    pub duration_ns: Option<u64>,
}

impl Trial {
    fn at_rate(rate_bps: u64) -> Trial {
        Trial {
            rate_bps,
            burst_packets: None,
            burst_every_ns: None,
            load_pct: None,
            duration_ns: None,
        }
    }
}

/// A loss ratio that is not a number, or outside [0, 1], is treated as total loss: a broken
/// measurement must never make a rate look lossless.
fn sane_loss(loss_ratio: f64) -> f64 {
    if loss_ratio.is_finite() && (0.0..=1.0).contains(&loss_ratio) {
        loss_ratio
    } else {
        1.0
    }
}

fn sane_rate(bps: f64) -> f64 {
    if bps.is_finite() && bps > 0.0 {
        bps
    } else {
        0.0
    }
}

// ---------------------------------------------------------------------------------------------

/// One point of the loss-against-load curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadPoint {
    pub load_pct: f64,
    pub rate_bps: u64,
    pub loss_ratio: f64,
    pub throughput_bps: f64,
}

/// RFC 2544 §26.3 frame loss rate: trials from 100 % of `max_bps` downwards in `step_pct`
/// steps (the RFC: at most 10 %), until two successive trials lose nothing.
#[derive(Debug, Clone)]
pub struct LossVsLoad {
    max_bps: u64,
    step_pct: f64,
    next_pct: f64,
    pending: Option<(f64, u64)>,
    clean_in_a_row: u32,
    points: Vec<LoadPoint>,
}

impl LossVsLoad {
    pub fn new(max_bps: u64, step_pct: f64) -> Result<Self, SearchError> {
        if max_bps == 0 || !(step_pct.is_finite() && step_pct > 0.0 && step_pct <= 100.0) {
            return Err(SearchError::Invalid(
                "loss-vs-load needs a maximum rate and a step in (0, 100] %".into(),
            ));
        }
        Ok(LossVsLoad {
            max_bps,
            step_pct,
            next_pct: 100.0,
            pending: None,
            clean_in_a_row: 0,
            points: Vec::new(),
        })
    }

    pub fn next_trial(&mut self) -> Option<Trial> {
        let (pct, rate) = match self.pending {
            Some(p) => p,
            None => {
                // A small epsilon keeps 100 - 10*10 from stopping one step early by rounding.
                if self.clean_in_a_row >= 2 || self.next_pct <= 1e-9 {
                    return None;
                }
                let pct = self.next_pct;
                let rate = ((self.max_bps as f64) * pct / 100.0).round().max(1.0) as u64;
                self.pending = Some((pct, rate));
                (pct, rate)
            }
        };
        Some(Trial {
            load_pct: Some(pct),
            ..Trial::at_rate(rate)
        })
    }

    pub fn record(
        &mut self,
        rate_bps: u64,
        loss_ratio: f64,
        throughput_bps: f64,
    ) -> Result<(), SearchError> {
        let (pct, expected) = self.pending.ok_or(SearchError::NoPendingTrial)?;
        if expected != rate_bps {
            return Err(SearchError::WrongTrial {
                expected,
                got: rate_bps,
            });
        }
        self.pending = None;
        let loss = sane_loss(loss_ratio);
        self.clean_in_a_row = if loss == 0.0 {
            self.clean_in_a_row + 1
        } else {
            0
        };
        self.points.push(LoadPoint {
            load_pct: pct,
            rate_bps,
            loss_ratio: loss,
            throughput_bps: sane_rate(throughput_bps),
        });
        self.next_pct = 100.0 - self.step_pct * self.points.len() as f64;
        Ok(())
    }

    pub fn points(&self) -> &[LoadPoint] {
        &self.points
    }
}

// ---------------------------------------------------------------------------------------------

/// The ATM Forum frame-level throughput metrics of an offered-load sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameLevelMetrics {
    /// Output throughput at the highest offered load that lost nothing (`None` when every
    /// load lost).
    pub lossless_bps: Option<f64>,
    /// The offered load (total bit/s) of that point.
    pub lossless_offered_bps: Option<u64>,
    /// Maximum output throughput at any load.
    pub peak_bps: f64,
    /// Output throughput with every source at 100 % of its full rate.
    pub full_load_bps: Option<f64>,
    /// Every point, by increasing load.
    pub points: Vec<LoadPoint>,
}

/// Offered-load sweep over several sources competing for a path (seed 003 §4.1, ATM Forum
/// BTD-TEST-TM-PERF). At load *p* % every source *i* sends at *p* % of its full rate `R_i`;
/// the offered load is `p/100 · Σ R_i`. The loads run in increasing order, and 100 % is
/// always among them because it gives the full-load throughput.
#[derive(Debug, Clone)]
pub struct OfferedLoad {
    full_rates: Vec<u64>,
    loads: Vec<f64>,
    next: usize,
    pending: Option<usize>,
    points: Vec<LoadPoint>,
}

impl OfferedLoad {
    /// `full_rates_bps`: each source's 100 % rate; `loads_pct`: the loads to try, in percent.
    pub fn new(full_rates_bps: Vec<u64>, loads_pct: &[f64]) -> Result<Self, SearchError> {
        if full_rates_bps.is_empty() || full_rates_bps.contains(&0) {
            return Err(SearchError::Invalid(
                "offered-load needs at least one source, each with a full rate".into(),
            ));
        }
        let mut loads: Vec<f64> = Vec::new();
        for &l in loads_pct {
            if !(l.is_finite() && l > 0.0 && l <= 100.0) {
                return Err(SearchError::Invalid(format!(
                    "offered load {l} % is not in (0, 100]"
                )));
            }
            loads.push(l);
        }
        loads.push(100.0);
        loads.sort_by(f64::total_cmp);
        loads.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
        Ok(OfferedLoad {
            full_rates: full_rates_bps,
            loads,
            next: 0,
            pending: None,
            points: Vec::new(),
        })
    }

    /// Each source's rate at `load_pct`.
    pub fn source_rates(&self, load_pct: f64) -> Vec<u64> {
        self.full_rates
            .iter()
            .map(|&r| ((r as f64) * load_pct / 100.0).round().max(1.0) as u64)
            .collect()
    }

    pub fn next_trial(&mut self) -> Option<Trial> {
        let i = match self.pending {
            Some(i) => i,
            None if self.next < self.loads.len() => {
                self.pending = Some(self.next);
                self.next
            }
            None => return None,
        };
        let pct = self.loads[i];
        Some(Trial {
            load_pct: Some(pct),
            ..Trial::at_rate(self.source_rates(pct).iter().sum())
        })
    }

    /// Records the pending trial: the aggregate loss ratio and output throughput (the sum
    /// over the sources, as the paper's Figure 1 plots).
    pub fn record(
        &mut self,
        rate_bps: u64,
        loss_ratio: f64,
        throughput_bps: f64,
    ) -> Result<(), SearchError> {
        let i = self.pending.ok_or(SearchError::NoPendingTrial)?;
        let pct = self.loads[i];
        let expected: u64 = self.source_rates(pct).iter().sum();
        if expected != rate_bps {
            return Err(SearchError::WrongTrial {
                expected,
                got: rate_bps,
            });
        }
        self.pending = None;
        self.next += 1;
        self.points.push(LoadPoint {
            load_pct: pct,
            rate_bps,
            loss_ratio: sane_loss(loss_ratio),
            throughput_bps: sane_rate(throughput_bps),
        });
        Ok(())
    }

    pub fn metrics(&self) -> FrameLevelMetrics {
        frame_level_metrics(&self.points)
    }
}

/// Lossless, peak and full-load throughput from measured points (any order).
pub fn frame_level_metrics(points: &[LoadPoint]) -> FrameLevelMetrics {
    let mut pts = points.to_vec();
    pts.sort_by(|a, b| a.load_pct.total_cmp(&b.load_pct));
    let lossless = pts.iter().rev().find(|p| p.loss_ratio == 0.0);
    let peak = pts.iter().map(|p| p.throughput_bps).fold(0.0, f64::max);
    let full = pts.iter().rev().find(|p| (p.load_pct - 100.0).abs() < 1e-9);
    FrameLevelMetrics {
        lossless_bps: lossless.map(|p| p.throughput_bps),
        lossless_offered_bps: lossless.map(|p| p.rate_bps),
        peak_bps: peak,
        full_load_bps: full.map(|p| p.throughput_bps),
        points: pts,
    }
}

// ---------------------------------------------------------------------------------------------

/// One burst-size trial's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstPoint {
    pub burst_bytes: u64,
    pub burst_packets: u64,
    pub loss_ratio: f64,
    pub throughput_bps: f64,
}

/// The knee of the burst-size curve and the buffer it implies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferEstimate {
    /// Largest burst (bytes) with no loss below the first lossy one.
    pub knee_bytes: Option<u64>,
    /// Smallest lossy burst.
    pub first_loss_bytes: Option<u64>,
    /// `knee · (1 − C/P)`: the queue the knee burst built; the buffer is at least this.
    pub buffer_bytes: Option<f64>,
    /// `first_loss · (1 − C/P)`: the buffer is below this.
    pub buffer_upper_bytes: Option<f64>,
    pub points: Vec<BurstPoint>,
}

/// Burst-size sweep at a constant average rate (seed 003 §4.3): bursts of `b` bytes enter the
/// bottleneck at the peak rate `P` and leave at its capacity `C`; the period of the bursts is
/// `b·8/rate`, so the average stays at `rate`.
///
/// A burst lasts `T = b·8/P`; meanwhile the link drains `C·T/8 = b·C/P` bytes, so the queue
/// peaks at `b − b·C/P = b·(1 − C/P)`. No loss while that fits the buffer: the largest
/// lossless burst `b*` (the knee) gives `buffer ≈ b*·(1 − C/P)`, and the first lossy burst an
/// upper bound. The queue must empty between bursts, which holds while `rate < C`.
#[derive(Debug, Clone)]
pub struct BurstSize {
    rate_bps: u64,
    size: u32,
    peak_bps: u64,
    capacity_bps: u64,
    bursts: Vec<u64>,
    next: usize,
    pending: Option<usize>,
    points: Vec<BurstPoint>,
}

impl BurstSize {
    /// `bursts_bytes` are rounded up to whole packets of `size` bytes and sorted.
    pub fn new(
        rate_bps: u64,
        size: u32,
        peak_bps: u64,
        capacity_bps: u64,
        bursts_bytes: &[u64],
    ) -> Result<Self, SearchError> {
        if rate_bps == 0 || size == 0 || peak_bps == 0 || capacity_bps == 0 {
            return Err(SearchError::Invalid(
                "burst-size needs a rate, a packet size, a peak rate and a capacity".into(),
            ));
        }
        if bursts_bytes.is_empty() || bursts_bytes.contains(&0) {
            return Err(SearchError::Invalid(
                "burst-size needs burst sizes above 0".into(),
            ));
        }
        let mut bursts: Vec<u64> = bursts_bytes
            .iter()
            .map(|&b| b.div_ceil(u64::from(size)))
            .collect();
        bursts.sort_unstable();
        bursts.dedup();
        Ok(BurstSize {
            rate_bps,
            size,
            peak_bps,
            capacity_bps,
            bursts,
            next: 0,
            pending: None,
            points: Vec::new(),
        })
    }

    fn trial(&self, packets: u64) -> Trial {
        let bits = u128::from(packets) * u128::from(self.size) * 8;
        let every = (bits * 1_000_000_000).div_ceil(u128::from(self.rate_bps));
        Trial {
            burst_packets: Some(packets),
            burst_every_ns: Some(u64::try_from(every).unwrap_or(u64::MAX)),
            ..Trial::at_rate(self.rate_bps)
        }
    }

    pub fn next_trial(&mut self) -> Option<Trial> {
        let i = match self.pending {
            Some(i) => i,
            None if self.next < self.bursts.len() => {
                self.pending = Some(self.next);
                self.next
            }
            None => return None,
        };
        Some(self.trial(self.bursts[i]))
    }

    pub fn record(
        &mut self,
        burst_packets: u64,
        loss_ratio: f64,
        throughput_bps: f64,
    ) -> Result<(), SearchError> {
        let i = self.pending.ok_or(SearchError::NoPendingTrial)?;
        if self.bursts[i] != burst_packets {
            return Err(SearchError::WrongTrial {
                expected: self.bursts[i],
                got: burst_packets,
            });
        }
        self.pending = None;
        self.next += 1;
        self.points.push(BurstPoint {
            burst_bytes: burst_packets * u64::from(self.size),
            burst_packets,
            loss_ratio: sane_loss(loss_ratio),
            throughput_bps: sane_rate(throughput_bps),
        });
        Ok(())
    }

    pub fn estimate(&self) -> BufferEstimate {
        knee_estimate(&self.points, self.peak_bps, self.capacity_bps)
    }
}

/// The knee of a burst-size curve and the buffer estimate `b·(1 − C/P)` (see [`BurstSize`]).
/// With `P <= C` no queue builds and there is no buffer to estimate.
pub fn knee_estimate(points: &[BurstPoint], peak_bps: u64, capacity_bps: u64) -> BufferEstimate {
    let mut pts = points.to_vec();
    pts.sort_by_key(|p| p.burst_bytes);
    let first_loss = pts.iter().position(|p| p.loss_ratio > 0.0);
    let clean = &pts[..first_loss.unwrap_or(pts.len())];
    let knee = clean.last().map(|p| p.burst_bytes);
    let first_loss_bytes = first_loss.map(|i| pts[i].burst_bytes);
    let factor = if peak_bps > capacity_bps {
        Some(1.0 - capacity_bps as f64 / peak_bps as f64)
    } else {
        None
    };
    BufferEstimate {
        knee_bytes: knee,
        first_loss_bytes,
        buffer_bytes: factor.and_then(|f| knee.map(|k| k as f64 * f)),
        buffer_upper_bytes: factor.and_then(|f| first_loss_bytes.map(|k| k as f64 * f)),
        points: pts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A synthetic path of capacity `c`: loses the excess of the offered rate.
    pub(super) fn net(c: u64) -> impl Fn(u64) -> (f64, f64) {
        move |rate| {
            if rate <= c {
                (0.0, rate as f64)
            } else {
                ((rate - c) as f64 / rate as f64, c as f64)
            }
        }
    }

    #[test]
    fn loss_vs_load_steps_down_until_two_clean_trials() {
        let mut s = LossVsLoad::new(100_000_000, 10.0).unwrap();
        let f = net(65_000_000);
        while let Some(t) = s.next_trial() {
            let (loss, tput) = f(t.rate_bps);
            s.record(t.rate_bps, loss, tput).unwrap();
        }
        let pcts: Vec<f64> = s.points().iter().map(|p| p.load_pct).collect();
        assert_eq!(pcts, vec![100.0, 90.0, 80.0, 70.0, 60.0, 50.0]);
        assert!(s.points()[3].loss_ratio > 0.0);
        assert_eq!(s.points()[4].loss_ratio, 0.0);
        // A path that never loses stops after 100 % and 90 %.
        let mut s = LossVsLoad::new(100, 10.0).unwrap();
        while let Some(t) = s.next_trial() {
            s.record(t.rate_bps, 0.0, t.rate_bps as f64).unwrap();
        }
        assert_eq!(s.points().len(), 2);
        // One that always loses runs down to the last step.
        let mut s = LossVsLoad::new(1000, 10.0).unwrap();
        while let Some(t) = s.next_trial() {
            s.record(t.rate_bps, 0.5, 0.0).unwrap();
        }
        assert_eq!(s.points().len(), 10);
    }

    #[test]
    fn offered_load_gives_the_frame_level_metrics() {
        // Three sources of 20 Mbit/s each into a 30 Mbit/s bottleneck whose throughput
        // collapses past saturation (retransmissions, as in seed 003 Figure 1).
        let cap = 30e6;
        let network = |offered: f64| {
            if offered <= 28e6 {
                (0.0, offered)
            } else if offered <= cap {
                (0.001, 28e6 + (offered - 28e6) * 0.75)
            } else {
                let t = 29.5e6 - (offered - cap) * 0.37;
                (1.0 - t / offered, t)
            }
        };
        let loads: Vec<f64> = (1..=10).map(|i| i as f64 * 10.0).collect();
        let mut s = OfferedLoad::new(vec![20_000_000; 3], &loads[..9]).unwrap();
        assert_eq!(s.source_rates(50.0), vec![10_000_000; 3]);
        let mut offered = vec![];
        while let Some(t) = s.next_trial() {
            offered.push(t.rate_bps);
            let (loss, tput) = network(t.rate_bps as f64);
            s.record(t.rate_bps, loss, tput).unwrap();
        }
        assert_eq!(offered.len(), 10, "100 % is added for the full-load point");
        assert_eq!(*offered.last().unwrap(), 60_000_000);
        let m = s.metrics();
        assert_eq!(m.lossless_offered_bps, Some(24_000_000));
        assert_eq!(m.lossless_bps, Some(24e6));
        assert!((m.peak_bps - 29.5e6).abs() < 1.0, "{}", m.peak_bps);
        let full = 29.5e6 - 30e6 * 0.37;
        assert!((m.full_load_bps.unwrap() - full).abs() < 1.0);
        assert!(OfferedLoad::new(vec![], &[]).is_err());
        assert!(OfferedLoad::new(vec![1], &[150.0]).is_err());
    }

    /// A fluid bottleneck: bursts enter at `peak`, leave at `cap`, `buffer` bytes of queue.
    fn burst_loss(bytes: u64, peak: u64, cap: u64, buffer: f64) -> f64 {
        let queue = bytes as f64 * (1.0 - cap as f64 / peak as f64);
        if queue <= buffer {
            0.0
        } else {
            (queue - buffer) / bytes as f64
        }
    }

    #[test]
    fn knee_recovers_a_known_buffer() {
        // Seed 003 §4.3: OC-3 into DS-3, 35 Mbit/s average, a 35 kB buffer.
        let (peak, cap, buffer) = (155_000_000, 45_000_000, 35_000.0);
        let size = 1000u32;
        let bursts: Vec<u64> = (1..=200).map(|k| k * 1000).collect();
        let mut s = BurstSize::new(35_000_000, size, peak, cap, &bursts).unwrap();
        while let Some(t) = s.next_trial() {
            let n = t.burst_packets.unwrap();
            let every = t.burst_every_ns.unwrap();
            // The average rate stays at 35 Mbit/s.
            let avg = (n * u64::from(size) * 8) as f64 * 1e9 / every as f64;
            assert!((avg - 35e6).abs() / 35e6 < 1e-5);
            let loss = burst_loss(n * u64::from(size), peak, cap, buffer);
            s.record(n, loss, 35e6 * (1.0 - loss)).unwrap();
        }
        let e = s.estimate();
        let est = e.buffer_bytes.unwrap();
        let hi = e.buffer_upper_bytes.unwrap();
        assert!(est <= buffer && buffer < hi, "{est} {buffer} {hi}");
        // Within one burst step's worth of queue.
        assert!(buffer - est <= 1000.0 * (1.0 - 45.0 / 155.0));
        assert_eq!(e.knee_bytes, Some(49_000));
    }

    #[test]
    fn knee_without_rate_mismatch_is_unknown() {
        let pts = vec![BurstPoint {
            burst_bytes: 10,
            burst_packets: 1,
            loss_ratio: 0.0,
            throughput_bps: 1.0,
        }];
        let e = knee_estimate(&pts, 10, 10);
        assert_eq!(e.knee_bytes, Some(10));
        assert_eq!(e.buffer_bytes, None);
        assert!(BurstSize::new(1, 1, 1, 1, &[]).is_err());
        assert!(BurstSize::new(0, 1, 1, 1, &[1]).is_err());
    }

    proptest! {
        #[test]
        fn knee_bounds_the_buffer(buffer in 1_000.0f64..1e7, step in 100u64..10_000) {
            let (peak, cap) = (1_000_000_000u64, 100_000_000u64);
            let top = (buffer * 3.0) as u64;
            let bursts: Vec<u64> = (1..=top / step + 2).map(|k| k * step).collect();
            let mut s = BurstSize::new(50_000_000, 100, peak, cap, &bursts).unwrap();
            while let Some(t) = s.next_trial() {
                let n = t.burst_packets.unwrap();
                s.record(n, burst_loss(n * 100, peak, cap, buffer), 1.0).unwrap();
            }
            let e = s.estimate();
            if let Some(lo) = e.buffer_bytes {
                prop_assert!(lo <= buffer + 1e-6);
            }
            prop_assert!(e.buffer_upper_bytes.unwrap() > buffer);
        }
    }
}
