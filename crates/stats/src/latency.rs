//! Delay distributions: exact moments plus HDR-histogram percentiles.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::Welford;

const SIGNIFICANT_DIGITS: u8 = 3;
/// Auto-resizing histograms stop at i64::MAX / 2 (146 years); larger magnitudes clamp,
/// while the exact min/max still see them.
const MAX_MAGNITUDE: u64 = (i64::MAX / 2) as u64;
/// p50, p90, p99 and p99.9, as fractions.
const SUMMARY_PERCENTILES: [(u64, u64); 4] = [(50, 100), (90, 100), (99, 100), (999, 1000)];

/// Latency / delay distribution: exact count/mean/variance/min/max (Welford on ns) plus
/// percentiles from an HDR histogram (3 significant digits).
///
/// Values are i64 nanoseconds and may be negative (one-way delay between unsynchronised
/// clocks). Two histogram sets keep both views precise: one of the values themselves,
/// so round-trip percentiles are within 0.1% of the value, and one of the values minus
/// the first sample, so relative one-way percentiles are within 0.1% of the spread
/// however large the clock offset is.
#[derive(Debug, Clone, Default)]
pub struct LatencyStats {
    /// `(first, min, max)` of the samples; `None` while empty.
    first_min_max_ns: Option<(i64, i64, i64)>,
    /// Moments of `ns - first`, which stay precise when a clock offset dwarfs the spread.
    offsets_from_first: Welford,
    absolute: SignedHistogram,
    from_first: SignedHistogram,
}

/// A serializable digest of a [`LatencyStats`]; every field is finite.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ns: f64,
    pub mean_ns: f64,
    pub max_ns: f64,
    pub variance_ns2: f64,
    pub stddev_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    /// max - min.
    pub peak_to_peak_ns: f64,
}

impl LatencySummary {
    /// The same distribution moved by `offset_ns` (e.g. made relative to another minimum).
    pub fn shifted(self, offset_ns: f64) -> LatencySummary {
        LatencySummary {
            min_ns: self.min_ns + offset_ns,
            mean_ns: self.mean_ns + offset_ns,
            max_ns: self.max_ns + offset_ns,
            p50_ns: self.p50_ns + offset_ns,
            p90_ns: self.p90_ns + offset_ns,
            p99_ns: self.p99_ns + offset_ns,
            p999_ns: self.p999_ns + offset_ns,
            ..self
        }
    }
}

impl LatencyStats {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, ns: i64) {
        self.push_n(ns, 1);
    }

    /// Records `ns` `n` times, as cheaply as once (datagrams coalesced into one train share
    /// their timestamps).
    pub fn push_n(&mut self, ns: i64, n: u64) {
        if n == 0 {
            return;
        }
        let (first, min, max) = self.first_min_max_ns.get_or_insert((ns, ns, ns));
        *min = (*min).min(ns);
        *max = (*max).max(ns);
        let offset = i128::from(ns) - i128::from(*first);
        self.offsets_from_first.push_n(offset as f64, n);
        self.absolute.record_n(i128::from(ns), n);
        self.from_first.record_n(offset, n);
    }

    pub fn count(&self) -> u64 {
        self.offsets_from_first.count()
    }

    /// Equivalent to pushing `other`'s samples here, up to histogram bucket precision.
    pub fn merge(&mut self, other: &LatencyStats) {
        let Some((other_first, other_min, other_max)) = other.first_min_max_ns else {
            return;
        };
        let Some((first, min, max)) = &mut self.first_min_max_ns else {
            *self = other.clone();
            return;
        };
        *min = (*min).min(other_min);
        *max = (*max).max(other_max);
        let rebase = i128::from(other_first) - i128::from(*first);
        self.offsets_from_first
            .merge(&other.offsets_from_first.shifted(rebase as f64));
        self.absolute.merge_shifted(&other.absolute, 0);
        self.from_first.merge_shifted(&other.from_first, rebase);
    }

    /// Absolute values, e.g. for round-trip delay.
    pub fn summary(&self) -> Option<LatencySummary> {
        let (first, min, max) = self.first_min_max_ns?;
        let moments = self.offsets_from_first.summary()?;
        let (min, max) = (i128::from(min), i128::from(max));
        let [p50, p90, p99, p999] = self
            .absolute
            .percentiles(SUMMARY_PERCENTILES)
            .map(|p| p.map_or(max, |value| value.clamp(min, max)) as f64);
        Some(LatencySummary {
            count: moments.count,
            min_ns: min as f64,
            mean_ns: (first as f64 + moments.mean).clamp(min as f64, max as f64),
            max_ns: max as f64,
            variance_ns2: moments.variance,
            stddev_ns: moments.stddev,
            p50_ns: p50,
            p90_ns: p90,
            p99_ns: p99,
            p999_ns: p999,
            peak_to_peak_ns: (max - min) as f64,
        })
    }

    /// Every field minus the minimum: relative one-way delay, valid without synchronised
    /// clocks. `min_ns` is 0 and `max_ns` is the largest delay above the minimum.
    pub fn relative_summary(&self) -> Option<LatencySummary> {
        let (first, min, max) = self.first_min_max_ns?;
        let moments = self.offsets_from_first.summary()?;
        let min_offset = i128::from(min) - i128::from(first);
        let spread = i128::from(max) - i128::from(min);
        let [p50, p90, p99, p999] = self
            .from_first
            .percentiles(SUMMARY_PERCENTILES)
            .map(|p| p.map_or(spread, |offset| (offset - min_offset).clamp(0, spread)) as f64);
        Some(LatencySummary {
            count: moments.count,
            min_ns: 0.0,
            mean_ns: (moments.mean - min_offset as f64).clamp(0.0, spread as f64),
            max_ns: spread as f64,
            variance_ns2: moments.variance,
            stddev_ns: moments.stddev,
            p50_ns: p50,
            p90_ns: p90,
            p99_ns: p99,
            p999_ns: p999,
            peak_to_peak_ns: spread as f64,
        })
    }
}

/// Magnitudes of negative and non-negative values in separate histograms, so that the
/// precision is relative to |value|. Created on first use: most streams have one sign.
#[derive(Debug, Clone, Default)]
struct SignedHistogram {
    negative: Option<Histogram<u64>>,
    non_negative: Option<Histogram<u64>>,
}

impl SignedHistogram {
    fn record_n(&mut self, value: i128, count: u64) {
        let magnitude = u64::try_from(value.unsigned_abs())
            .unwrap_or(u64::MAX)
            .min(MAX_MAGNITUDE);
        let side = if value < 0 {
            &mut self.negative
        } else {
            &mut self.non_negative
        };
        let histogram = match side {
            Some(histogram) => histogram,
            None => match Histogram::new(SIGNIFICANT_DIGITS) {
                Ok(histogram) => side.insert(histogram),
                // Unreachable with valid constants; losing a percentile sample beats a panic.
                Err(_) => return,
            },
        };
        // Only fails when a resize cannot be addressed, which MAX_MAGNITUDE rules out.
        let _ = histogram.record_n(magnitude, count);
    }

    fn len(side: &Option<Histogram<u64>>) -> u64 {
        side.as_ref().map_or(0, Histogram::len)
    }

    /// Nearest-rank percentiles, each `numerator / denominator`: the smallest value with at
    /// least that fraction of samples at or below it. Integer maths avoids 0.999 * n
    /// rounding up a rank. One pass over each side's histogram serves every percentile
    /// (a pass per percentile was most of a report's cost).
    fn percentiles<const N: usize>(&self, fractions: [(u64, u64); N]) -> [Option<i128>; N] {
        let negative_count = Self::len(&self.negative);
        let total = negative_count.saturating_add(Self::len(&self.non_negative));
        // (rank among that side's magnitudes, which percentile) per side.
        let (mut negative, mut non_negative) = (Vec::new(), Vec::new());
        for (k, (numerator, denominator)) in fractions.into_iter().enumerate() {
            let rank = (u128::from(total) * u128::from(numerator))
                .div_ceil(u128::from(denominator))
                .max(1);
            let Ok(rank) = u64::try_from(rank) else {
                continue;
            };
            if rank <= negative_count {
                // The rank-th smallest negative is the (count - rank + 1)-th largest magnitude.
                negative.push((negative_count - rank + 1, k));
            } else {
                non_negative.push((rank - negative_count, k));
            }
        }
        let mut values = [None; N];
        for (side, wanted, sign) in [
            (&self.negative, negative, -1),
            (&self.non_negative, non_negative, 1),
        ] {
            if let Some(histogram) = side {
                for (k, magnitude) in magnitudes_at_ranks(histogram, wanted) {
                    values[k] = Some(sign * i128::from(magnitude));
                }
            }
        }
        values
    }

    /// Adds `other`'s samples moved by `shift`, bucket by bucket.
    fn merge_shifted(&mut self, other: &SignedHistogram, shift: i128) {
        for (histogram, sign) in [(&other.negative, -1), (&other.non_negative, 1)] {
            let Some(histogram) = histogram else {
                continue;
            };
            for bucket in histogram.iter_recorded() {
                let magnitude = histogram.median_equivalent(bucket.value_iterated_to());
                self.record_n(
                    sign * i128::from(magnitude) + shift,
                    bucket.count_at_value(),
                );
            }
        }
    }
}

/// The 1-based `rank`-th smallest magnitude, as the middle of its bucket.
/// For each `(rank, key)`, the magnitude of the rank-th smallest sample (1-based), in one
/// pass over the histogram; a rank beyond its count has none.
fn magnitudes_at_ranks(
    histogram: &Histogram<u64>,
    mut wanted: Vec<(u64, usize)>,
) -> Vec<(usize, u64)> {
    wanted.sort_unstable();
    let mut found = Vec::with_capacity(wanted.len());
    let mut next = wanted.iter().peekable();
    let mut seen: u64 = 0;
    for bucket in histogram.iter_recorded() {
        if next.peek().is_none() {
            break;
        }
        seen = seen.saturating_add(bucket.count_at_value());
        while let Some(&(_, key)) = next.next_if(|(rank, _)| *rank <= seen) {
            found.push((key, histogram.median_equivalent(bucket.value_iterated_to())));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PERCENTILES: [(u64, u64); 4] = SUMMARY_PERCENTILES;

    fn exact_percentile(sorted: &[i64], numerator: u64, denominator: u64) -> i64 {
        let n = sorted.len() as u64;
        let rank = (n * numerator).div_ceil(denominator).max(1);
        sorted[(rank - 1) as usize]
    }

    fn reported(summary: &LatencySummary) -> [f64; 4] {
        [
            summary.p50_ns,
            summary.p90_ns,
            summary.p99_ns,
            summary.p999_ns,
        ]
    }

    fn assert_all_finite(summary: &LatencySummary) {
        let json = serde_json::to_string(summary).expect("serializes");
        assert!(!json.contains("null"), "{json}");
    }

    #[test]
    fn empty_has_no_summary() {
        let stats = LatencyStats::new();
        assert_eq!(stats.count(), 0);
        assert_eq!(stats.summary(), None);
        assert_eq!(stats.relative_summary(), None);
    }

    #[test]
    fn single_sample() {
        let mut stats = LatencyStats::new();
        stats.push(1_500);
        let summary = stats.summary().expect("one sample");
        assert_eq!(summary.count, 1);
        assert_eq!(summary.min_ns, 1_500.0);
        assert_eq!(summary.p50_ns, 1_500.0);
        assert_eq!(summary.p999_ns, 1_500.0);
        assert_eq!(summary.variance_ns2, 0.0);
        assert_eq!(summary.peak_to_peak_ns, 0.0);
        let relative = stats.relative_summary().expect("one sample");
        assert_eq!(relative.max_ns, 0.0);
        assert_eq!(relative.p99_ns, 0.0);
    }

    #[test]
    fn negative_values() {
        let mut stats = LatencyStats::new();
        for ns in [-500, -100, -300, 200, 0, -200, 100, -400, 300, 400] {
            stats.push(ns);
        }
        let summary = stats.summary().expect("samples");
        assert_all_finite(&summary);
        assert_eq!(summary.min_ns, -500.0);
        assert_eq!(summary.max_ns, 400.0);
        assert_eq!(summary.mean_ns, -50.0);
        assert_eq!(summary.peak_to_peak_ns, 900.0);
        // Sorted: -500 -400 -300 -200 -100 0 100 200 300 400; buckets are exact below 2048.
        assert_eq!(summary.p50_ns, -100.0);
        assert_eq!(summary.p90_ns, 300.0);
        assert_eq!(summary.p99_ns, 400.0);
        let relative = stats.relative_summary().expect("samples");
        assert_all_finite(&relative);
        assert_eq!(relative.min_ns, 0.0);
        assert_eq!(relative.mean_ns, 450.0);
        assert_eq!(relative.p50_ns, 400.0);
        assert_eq!(relative.p90_ns, 800.0);
        assert_eq!(relative.max_ns, 900.0);
    }

    #[test]
    fn extreme_values_do_not_panic() {
        let mut stats = LatencyStats::new();
        for ns in [0, i64::MAX, i64::MIN, 1, -1, i64::MAX] {
            stats.push(ns);
        }
        let summary = stats.summary().expect("samples");
        assert_all_finite(&summary);
        assert_eq!(summary.min_ns, i64::MIN as f64);
        assert_eq!(summary.max_ns, i64::MAX as f64);
        assert!(summary.p999_ns <= summary.max_ns && summary.p50_ns >= summary.min_ns);
        let relative = stats.relative_summary().expect("samples");
        assert_all_finite(&relative);
        assert_eq!(relative.min_ns, 0.0);
        assert_eq!(relative.max_ns, u64::MAX as f64);
    }

    #[test]
    fn relative_summary_is_precise_despite_a_huge_clock_offset() {
        let offset: i64 = 3_600_000_000_000_000; // 1000 hours of clock difference
        let mut stats = LatencyStats::new();
        for extra in [1_000_000, 0, 2_000_000, 500_000] {
            stats.push(offset + extra);
        }
        let relative = stats.relative_summary().expect("samples");
        assert_eq!(relative.min_ns, 0.0);
        assert!((relative.p50_ns - 500_000.0).abs() <= 0.001 * 2_000_000.0);
        assert!((relative.mean_ns - 875_000.0).abs() < 1.0);
        assert_eq!(relative.max_ns, 2_000_000.0);
    }

    proptest! {
        #[test]
        fn percentiles_within_a_tenth_of_a_percent(
            samples in prop::collection::vec(-2_000_000_000i64..2_000_000_000, 1..2_000)
        ) {
            let mut stats = LatencyStats::new();
            samples.iter().for_each(|&ns| stats.push(ns));
            let mut sorted = samples.clone();
            sorted.sort_unstable();
            let summary = stats.summary().expect("samples");
            for ((numerator, denominator), got) in PERCENTILES.into_iter().zip(reported(&summary)) {
                let exact = exact_percentile(&sorted, numerator, denominator) as f64;
                prop_assert!((got - exact).abs() <= 0.001 * exact.abs(),
                    "p{numerator}/{denominator}: {got} vs {exact}");
            }
            prop_assert_eq!(summary.min_ns, sorted[0] as f64);
            prop_assert_eq!(summary.max_ns, sorted[sorted.len() - 1] as f64);
        }

        #[test]
        fn relative_percentiles_within_a_tenth_of_a_percent_of_the_spread(
            offset in any::<i64>().prop_map(|o| o / 2),
            delays in prop::collection::vec(0i64..100_000_000, 1..1_000)
        ) {
            let mut stats = LatencyStats::new();
            delays.iter().for_each(|&d| stats.push(offset + d));
            let mut sorted = delays.clone();
            sorted.sort_unstable();
            let min = sorted[0];
            let spread = (sorted[sorted.len() - 1] - min) as f64;
            let relative = stats.relative_summary().expect("samples");
            prop_assert_eq!(relative.min_ns, 0.0);
            prop_assert_eq!(relative.max_ns, spread);
            for ((numerator, denominator), got) in PERCENTILES.into_iter().zip(reported(&relative)) {
                let exact = (exact_percentile(&sorted, numerator, denominator) - min) as f64;
                prop_assert!((got - exact).abs() <= 0.001 * spread,
                    "p{numerator}/{denominator}: {got} vs {exact}");
            }
        }

        #[test]
        fn merge_matches_sequential(
            left in prop::collection::vec(-1_000_000i64..1_000_000_000, 0..300),
            right in prop::collection::vec(-1_000_000i64..1_000_000_000, 0..300),
        ) {
            let mut sequential = LatencyStats::new();
            let mut merged = LatencyStats::new();
            let mut other = LatencyStats::new();
            for &ns in &left { sequential.push(ns); merged.push(ns); }
            for &ns in &right { sequential.push(ns); other.push(ns); }
            merged.merge(&other);
            prop_assert_eq!(merged.count(), sequential.count());
            let (Some(a), Some(b)) = (merged.summary(), sequential.summary()) else {
                prop_assert!(left.is_empty() && right.is_empty());
                return Ok(());
            };
            prop_assert_eq!(a.min_ns, b.min_ns);
            prop_assert_eq!(a.max_ns, b.max_ns);
            prop_assert!((a.mean_ns - b.mean_ns).abs() <= 1e-6 * b.max_ns.abs().max(1.0));
            for (x, y) in reported(&a).into_iter().zip(reported(&b)) {
                prop_assert!((x - y).abs() <= 0.001 * y.abs(), "{x} vs {y}");
            }
            let (ra, rb) = (merged.relative_summary(), sequential.relative_summary());
            let (Some(ra), Some(rb)) = (ra, rb) else { unreachable!("non-empty") };
            for (x, y) in reported(&ra).into_iter().zip(reported(&rb)) {
                prop_assert!((x - y).abs() <= 0.002 * rb.max_ns, "{x} vs {y}");
            }
        }
    }
}
