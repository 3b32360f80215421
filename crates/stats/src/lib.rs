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

/// Rate over a span that covers `count` events (first to last): `count - 1` gaps, so a paced
/// flow measures at exactly its rate. What a receiver's goodput is, in real tests and in the
/// simulator alike; 0.0 for fewer than two events or an empty span.
pub fn rate_over_span(amount: u64, count: u64, span_ns: u64) -> f64 {
    if count < 2 || span_ns == 0 {
        return 0.0;
    }
    amount as f64 * (count - 1) as f64 / count as f64 * 1e9 / span_ns as f64
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

    #[test]
    fn span_rate_is_exact_for_a_paced_flow() {
        // 1500 packets of 500 B, 2 ms apart: the span is 1499 gaps.
        let r = rate_over_span(1500 * 500 * 8, 1500, 1499 * 2_000_000);
        assert!((r - 2_000_000.0).abs() < 1e-6);
        assert_eq!(rate_over_span(100, 1, 10), 0.0);
        assert_eq!(rate_over_span(100, 5, 0), 0.0);
    }
}
