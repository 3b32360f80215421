//! Gaps between consecutive arrivals, e.g. to see pacing or batching by the path.

use crate::{Summary, Welford};

/// Inter-arrival times from successive arrival timestamps (ns).
#[derive(Debug, Clone, Default)]
pub struct InterArrival {
    last_arrival_ns: Option<u64>,
    gaps_ns: Welford,
}

impl InterArrival {
    pub fn new() -> Self {
        Self::default()
    }

    /// A timestamp earlier than the previous one gives a negative gap, kept so that the
    /// mean still equals (last - first) / (n - 1). Returns the gap, if there was an arrival
    /// before.
    pub fn push(&mut self, arrival_ns: u64) -> Option<i64> {
        let gap = self
            .last_arrival_ns
            .map(|last| i128::from(arrival_ns) - i128::from(last));
        if let Some(gap) = gap {
            self.gaps_ns.push(gap as f64);
        }
        self.last_arrival_ns = Some(arrival_ns);
        // Beyond ±292 years a gap is a broken clock, not a measurement: saturate.
        gap.map(|g| g.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    }

    /// `n` arrivals at the same instant (one coalesced train): one gap from the previous
    /// arrival, then `n - 1` gaps of zero. Returns the first gap, as [`Self::push`].
    pub fn push_n(&mut self, arrival_ns: u64, n: u64) -> Option<i64> {
        if n == 0 {
            return None;
        }
        let gap = self.push(arrival_ns);
        self.gaps_ns.push_n(0.0, n - 1);
        gap
    }

    /// The gap distribution, e.g. to merge several flows' gaps.
    pub fn gaps(&self) -> &Welford {
        &self.gaps_ns
    }

    /// `None` until two arrivals have been seen.
    pub fn summary(&self) -> Option<Summary> {
        self.gaps_ns.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_between_arrivals() {
        let mut gaps = InterArrival::new();
        assert_eq!(gaps.summary(), None);
        gaps.push(1_000);
        assert_eq!(gaps.summary(), None);
        gaps.push(1_100);
        gaps.push(1_400);
        let summary = gaps.summary().expect("two gaps");
        assert_eq!(summary.count, 2);
        assert_eq!(summary.mean, 200.0);
        assert_eq!(summary.min, 100.0);
        assert_eq!(summary.max, 300.0);
        assert_eq!(summary.variance, 20_000.0);
    }

    #[test]
    fn backwards_timestamp_is_a_negative_gap() {
        let mut gaps = InterArrival::new();
        gaps.push(u64::MAX);
        gaps.push(0);
        let summary = gaps.summary().expect("one gap");
        assert_eq!(summary.min, -(u64::MAX as f64));
        assert!(summary.mean.is_finite());
    }
}
