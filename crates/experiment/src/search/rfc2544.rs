//! RFC 2544's bisections: throughput (§26.1), the highest rate without loss, checked against
//! the capacity the search measured and re-run once at a longer trial; and back-to-back
//! frames (§26.4), the longest burst at line rate without loss.

use serde::{Deserialize, Serialize};

use super::{sane_loss, sane_rate, SearchError, Trial};

/// RFC 2544 §24: the test portion of each trial lasts at least 60 s.
pub const RFC2544_TRIAL_NS: u64 = 60_000_000_000;

/// The found rate's second trial is this many times as long as the others.
pub(crate) const VERIFY_FACTOR: u64 = 2;

/// Binary search for the highest value (a rate, a burst length) whose trial passes: the first
/// trial at `max`, the second at `min`, then halving between the highest pass and the lowest
/// failure until they are no more than `resolution` apart.
#[derive(Debug, Clone)]
struct Bisection {
    min: u64,
    max: u64,
    resolution: u64,
    tolerance: f64,
    pass: Option<(u64, f64)>,
    fail: Option<u64>,
    pending: Option<u64>,
    trials: Vec<(u64, f64, f64)>,
}

impl Bisection {
    fn new(min: u64, max: u64, resolution: u64, tolerance: f64) -> Result<Self, SearchError> {
        if min == 0 || min > max {
            return Err(SearchError::Invalid(format!(
                "a bisection needs 0 < min <= max (min {min}, max {max})"
            )));
        }
        if !(tolerance.is_finite() && (0.0..1.0).contains(&tolerance)) {
            return Err(SearchError::Invalid(
                "loss tolerance must be in [0, 1)".to_string(),
            ));
        }
        Ok(Bisection {
            min,
            max,
            resolution: resolution.max(1),
            tolerance,
            pass: None,
            fail: None,
            pending: None,
            trials: Vec::new(),
        })
    }

    /// The value to try next (the pending one again until it is recorded), or `None` when
    /// the search is over: `max` passed, `min` failed, or the bracket is narrow enough.
    fn next_value(&mut self) -> Option<u64> {
        if self.pending.is_none() {
            self.pending = match (self.pass, self.fail) {
                (None, None) => Some(self.max),
                (None, Some(hi)) if hi != self.min => Some(self.min),
                (Some((lo, _)), Some(hi)) if hi - lo > self.resolution => Some(lo + (hi - lo) / 2),
                _ => None,
            };
        }
        self.pending
    }

    fn record(&mut self, value: u64, loss_ratio: f64, output: f64) -> Result<(), SearchError> {
        let expected = self.pending.ok_or(SearchError::NoPendingTrial)?;
        if expected != value {
            return Err(SearchError::WrongTrial {
                expected,
                got: value,
            });
        }
        self.pending = None;
        let (loss, output) = (sane_loss(loss_ratio), sane_rate(output));
        self.trials.push((value, loss, output));
        if loss <= self.tolerance {
            self.pass = Some((value, output));
        } else {
            self.fail = Some(value);
        }
        Ok(())
    }
}

/// Why an RFC 2544 throughput should not be taken at face value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThroughputFlag {
    /// The trials were shorter than RFC 2544's 60 s: a queue can absorb a rate above the
    /// path's capacity for that long.
    ShortTrial,
    /// The rate is above the capacity the search measured.
    AboveCapacity,
    /// The rate lost packets when re-run at a longer trial.
    LossAtLongerTrial,
}

impl ThroughputFlag {
    /// What the flag means, for people.
    pub fn describe(self) -> &'static str {
        match self {
            ThroughputFlag::ShortTrial => "trials shorter than RFC 2544's 60 s",
            ThroughputFlag::AboveCapacity => "above the capacity the search measured",
            ThroughputFlag::LossAtLongerTrial => "lost packets when re-run at a longer trial",
        }
    }
}

/// The found rate's second, longer trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub rate_bps: u64,
    pub trial_s: f64,
    pub loss_ratio: f64,
    pub throughput_bps: f64,
}

/// What RFC 2544 throughput found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// Highest offered rate that passed (loss within tolerance); `None` when even the minimum
    /// rate lost packets.
    pub rate_bps: Option<u64>,
    /// Output throughput measured at that rate.
    pub throughput_bps: Option<f64>,
    /// Lowest rate that failed; the true threshold lies in `[rate_bps, failed_bps)`.
    pub failed_bps: Option<u64>,
    /// Every trial of the bisection, in order: (rate, loss ratio, throughput).
    pub trials: Vec<(u64, f64, f64)>,
    /// Length of each trial of the bisection, seconds.
    pub trial_s: f64,
    /// The path's capacity as the search measured it: once a trial lost packets (saturated
    /// the path), the highest output throughput of any trial; `None` when no trial lost.
    pub capacity_bps: Option<f64>,
    /// The found rate re-run once at a longer trial.
    pub verification: Option<Verification>,
    /// Reasons to doubt `rate_bps`; empty when there are none.
    pub flags: Vec<ThroughputFlag>,
}

/// RFC 2544 §26.1 throughput: the highest rate at which no frame is lost, by binary search.
///
/// The first trial is at `max` (a device that forwards everything is found in one trial), the
/// second at `min` (if that loses, there is no throughput to report), then the interval
/// between the highest pass and the lowest failure is halved until it is no wider than the
/// resolution: at most `2 + log2((max-min)/resolution) + 1` trials. Then the found rate runs
/// once more at twice the trial length: a queue that absorbed a rate above capacity during a
/// short trial overflows in a longer one.
#[derive(Debug, Clone)]
pub struct Rfc2544Throughput {
    bisection: Bisection,
    trial_ns: u64,
    verifying: bool,
    verification: Option<Verification>,
}

impl Rfc2544Throughput {
    /// `loss_tolerance` is the loss ratio still counted as a pass (RFC 2544: 0); `trial_ns`
    /// the length of each trial of the bisection (RFC 2544: [`RFC2544_TRIAL_NS`]).
    pub fn new(
        min_bps: u64,
        max_bps: u64,
        resolution_bps: u64,
        loss_tolerance: f64,
        trial_ns: u64,
    ) -> Result<Self, SearchError> {
        if trial_ns == 0 {
            return Err(SearchError::Invalid(
                "throughput search needs a trial length".into(),
            ));
        }
        Ok(Rfc2544Throughput {
            bisection: Bisection::new(min_bps, max_bps, resolution_bps, loss_tolerance)?,
            trial_ns,
            verifying: false,
            verification: None,
        })
    }

    /// The next trial, or `None` when the search is over. Asking again before recording
    /// returns the same trial.
    pub fn next_trial(&mut self) -> Option<Trial> {
        if let Some(rate) = self.bisection.next_value() {
            return Some(Trial::at_rate(rate));
        }
        let (rate, _) = self.bisection.pass?;
        if self.verification.is_some() {
            return None;
        }
        self.verifying = true;
        Some(Trial {
            duration_ns: Some(self.trial_ns.saturating_mul(VERIFY_FACTOR)),
            ..Trial::at_rate(rate)
        })
    }

    /// Records the outcome of the pending trial.
    pub fn record(
        &mut self,
        rate_bps: u64,
        loss_ratio: f64,
        throughput_bps: f64,
    ) -> Result<(), SearchError> {
        if !self.verifying {
            return self.bisection.record(rate_bps, loss_ratio, throughput_bps);
        }
        let expected = self.bisection.pass.map_or(0, |p| p.0);
        if rate_bps != expected {
            return Err(SearchError::WrongTrial {
                expected,
                got: rate_bps,
            });
        }
        self.verifying = false;
        self.verification = Some(Verification {
            rate_bps,
            trial_s: self.trial_ns.saturating_mul(VERIFY_FACTOR) as f64 / 1e9,
            loss_ratio: sane_loss(loss_ratio),
            throughput_bps: sane_rate(throughput_bps),
        });
        Ok(())
    }

    /// Whether the search has no trial left to run.
    pub fn is_done(&self) -> bool {
        self.clone().next_trial().is_none()
    }

    /// Once a trial lost packets (the path was saturated), the highest output of any trial:
    /// the path carried at least that much, and a saturated path delivers its capacity. The
    /// highest rather than the saturated trials' own outputs, since a sender stalled by a
    /// busy host leaves the link idle for a while and lowers what one trial shows.
    fn capacity(&self) -> Option<f64> {
        let tolerance = self.bisection.tolerance;
        let verified = self
            .verification
            .iter()
            .map(|v| (v.loss_ratio, v.throughput_bps));
        let outcomes = || {
            let bisection = self.bisection.trials.iter().map(|&(_, l, o)| (l, o));
            bisection.chain(verified.clone())
        };
        let saturated = outcomes().any(|(loss, _)| loss > tolerance);
        saturated.then(|| outcomes().map(|(_, output)| output).fold(0.0, f64::max))
    }

    pub fn result(&self) -> ThroughputResult {
        let b = &self.bisection;
        let rate = b.pass.map(|p| p.0);
        let capacity = self.capacity();
        let mut flags = Vec::new();
        if self.trial_ns < RFC2544_TRIAL_NS {
            flags.push(ThroughputFlag::ShortTrial);
        }
        if let (Some(rate), Some(capacity)) = (rate, capacity) {
            if rate as f64 > capacity {
                flags.push(ThroughputFlag::AboveCapacity);
            }
        }
        if self
            .verification
            .as_ref()
            .is_some_and(|v| v.loss_ratio > b.tolerance)
        {
            flags.push(ThroughputFlag::LossAtLongerTrial);
        }
        ThroughputResult {
            rate_bps: rate,
            throughput_bps: b.pass.map(|p| p.1),
            failed_bps: b.fail,
            trials: b.trials.clone(),
            trial_s: self.trial_ns as f64 / 1e9,
            capacity_bps: capacity,
            verification: self.verification.clone(),
            flags,
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// What the back-to-back search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackToBackResult {
    /// Longest lossless burst (packets) found by each repetition of the search; 0 when even
    /// the shortest burst lost.
    pub per_search: Vec<u64>,
    /// Their mean, as RFC 2544 reports it.
    pub mean_packets: f64,
}

/// RFC 2544 §26.4 back-to-back frames: the longest burst sent at minimum gap (line rate)
/// without loss, by binary search over the burst length, repeated `repeat` times (the RFC
/// asks for 50) and averaged.
#[derive(Debug, Clone)]
pub struct BackToBack {
    line_rate_bps: u64,
    repeat: u32,
    fresh: Bisection,
    inner: Bisection,
    found: Vec<u64>,
}

impl BackToBack {
    pub fn new(
        line_rate_bps: u64,
        min_packets: u64,
        max_packets: u64,
        resolution_packets: u64,
        repeat: u32,
    ) -> Result<Self, SearchError> {
        if line_rate_bps == 0 {
            return Err(SearchError::Invalid(
                "back-to-back search needs a line rate".into(),
            ));
        }
        let fresh = Bisection::new(min_packets, max_packets, resolution_packets, 0.0)?;
        Ok(BackToBack {
            line_rate_bps,
            repeat: repeat.max(1),
            inner: fresh.clone(),
            fresh,
            found: Vec::new(),
        })
    }

    pub fn next_trial(&mut self) -> Option<Trial> {
        loop {
            if self.found.len() >= self.repeat as usize {
                return None;
            }
            if let Some(burst) = self.inner.next_value() {
                return Some(Trial {
                    burst_packets: Some(burst),
                    ..Trial::at_rate(self.line_rate_bps)
                });
            }
            self.found.push(self.inner.pass.map_or(0, |p| p.0));
            self.inner = self.fresh.clone();
        }
    }

    /// Records the outcome of the pending burst.
    pub fn record(&mut self, burst_packets: u64, loss_ratio: f64) -> Result<(), SearchError> {
        self.inner.record(burst_packets, loss_ratio, 0.0)
    }

    pub fn result(&self) -> BackToBackResult {
        let mean = if self.found.is_empty() {
            0.0
        } else {
            self.found.iter().map(|&x| x as f64).sum::<f64>() / self.found.len() as f64
        };
        BackToBackResult {
            per_search: self.found.clone(),
            mean_packets: mean,
        }
    }
}

#[cfg(test)]
mod tests;
