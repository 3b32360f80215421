//! Estimators shared by the real-time engine and the discrete-event simulator.
//!
//! Everything here is sans-IO: time arrives as integer nanoseconds chosen by the caller
//! (a real or a virtual clock), so the same code gives the same numbers in both. Every
//! `f64` that a summary exposes is finite, because JSON consumers reject NaN and infinity.

mod interarrival;
mod jitter;
mod latency;
mod loss_runs;
mod sequence;
mod welford;

pub use interarrival::InterArrival;
pub use jitter::Rfc3550Jitter;
pub use latency::{LatencyStats, LatencySummary};
pub use loss_runs::{LossPeriods, LossRuns};
pub use sequence::{Arrival, SeqCounts, SeqTracker};
pub use welford::{Summary, Welford};

/// Amount per second over `duration_ns`; 0.0 for an empty interval rather than NaN/inf.
pub fn rate_per_sec(amount: u64, duration_ns: u64) -> f64 {
    if duration_ns == 0 {
        return 0.0;
    }
    amount as f64 * 1e9 / duration_ns as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_per_sec_cases() {
        assert_eq!(rate_per_sec(1000, 1_000_000_000), 1000.0);
        assert_eq!(rate_per_sec(1000, 500_000_000), 2000.0);
        assert_eq!(rate_per_sec(1000, 0), 0.0);
        assert_eq!(rate_per_sec(0, 0), 0.0);
        assert!(rate_per_sec(u64::MAX, 1).is_finite());
    }
}
