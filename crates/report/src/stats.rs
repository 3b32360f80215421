//! Statistics over repetitions: mean, standard deviation and a 95 % confidence interval, so a
//! difference between two points can be told from noise. Each interval respects its metric's
//! range ([`Range`]): loss is a proportion (a Wilson interval on the packet counts pooled over
//! repetitions, widened by their overdispersion), percentiles get a seeded bootstrap, and other
//! figures Student's t for the mean, cut where the range ends (at 0 for a figure that cannot be
//! negative). Fewer than two repetitions give no interval, except for loss, whose counts give
//! one.
//!
//! Why not an interval on the log scale for figures that cannot be negative: the tables show
//! the arithmetic mean, which a log-scale interval (of the geometric mean, or Cox's of a
//! log-normal mean) does not estimate, and with three repetitions its bounds grow with the
//! exponential of the spread (Cox's gave 10, 100 and 1000 µs an interval up to 493 s), where
//! Student's grow with the spread itself (to 1.73 ms).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{Continuous, ContinuousCDF, StudentsT};

/// Confidence level of every interval.
pub const CONFIDENCE: f64 = 0.95;
/// Resamples of the bootstrap.
const BOOTSTRAP_RESAMPLES: usize = 2000;
/// Fixed seed: re-running a report gives identical intervals.
const BOOTSTRAP_SEED: u64 = 0x0066_6c6f_776c_6162;

/// How an interval was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Fewer than two values: no interval.
    None,
    StudentT,
    Bootstrap,
    /// Wilson score interval of a proportion on pooled counts (overdispersion-adjusted).
    Wilson,
    /// Student's t interval reaching beyond the metric's range (below 0 for a figure that
    /// cannot be negative), cut where the range ends.
    StudentTCut,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::None => "none",
            Method::StudentT => "Student t",
            Method::Bootstrap => "bootstrap",
            Method::Wilson => "Wilson on pooled counts",
            Method::StudentTCut => "Student t cut at the range",
        }
    }

    /// Whether the interval is symmetric about the mean, so `± half-width` says it all.
    pub fn symmetric(self) -> bool {
        matches!(self, Method::StudentT | Method::None)
    }
}

/// The values a metric can take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Range {
    /// A percentage of packets (0 to 100), with counts to pool.
    Loss,
    /// Never negative: delays, rates, counts, CPU.
    NonNegative,
    /// Either sign: relative one-way delay, schedule error, IPDV.
    Signed,
}

impl Range {
    /// The smallest and largest value the metric can take.
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Range::Loss => (0.0, 100.0),
            Range::NonNegative => (0.0, f64::INFINITY),
            Range::Signed => (f64::NEG_INFINITY, f64::INFINITY),
        }
    }
}

/// The range of a metric, from its name (see `metrics::extract`).
pub fn range_of(name: &str) -> Range {
    if name == "loss_pct" {
        Range::Loss
    } else if ["delay_", "schedule_error_", "ipdv_"]
        .iter()
        .any(|signed| name.starts_with(signed))
    {
        Range::Signed
    } else {
        Range::NonNegative
    }
}

/// A metric over its repetitions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 below two values.
    pub stddev: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub method: Method,
}

impl Estimate {
    /// Half the interval's width (for asymmetric bootstrap intervals, the larger side).
    pub fn half_width(&self) -> f64 {
        (self.mean - self.ci_low).max(self.ci_high - self.mean)
    }

    /// Half-width relative to |mean|; infinite when the mean is 0 and the interval is not.
    pub fn relative_half_width(&self) -> f64 {
        let h = self.half_width();
        if h == 0.0 {
            0.0
        } else if self.mean == 0.0 {
            f64::INFINITY
        } else {
            h / self.mean.abs()
        }
    }
}

/// Whether a metric name is a percentile (`..._p50_...`, `p99`): those get a bootstrap interval.
pub fn is_percentile(name: &str) -> bool {
    name.split('_').any(|part| {
        part.strip_prefix('p')
            .is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
    })
}

/// Mean, standard deviation and 95 % interval of `values` (non-finite values are ignored).
pub fn estimate(values: &[f64], percentile: bool) -> Estimate {
    let v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    let mean = if n == 0 {
        0.0
    } else {
        v.iter().sum::<f64>() / n as f64
    };
    let stddev = if n < 2 {
        0.0
    } else {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    };
    if n < 2 {
        return Estimate {
            n,
            mean,
            stddev,
            ci_low: mean,
            ci_high: mean,
            method: Method::None,
        };
    }
    if percentile {
        let (lo, hi) = bootstrap_mean_ci(&v, BOOTSTRAP_SEED);
        return Estimate {
            n,
            mean,
            stddev,
            ci_low: lo,
            ci_high: hi,
            method: Method::Bootstrap,
        };
    }
    let t = t_quantile(0.5 + CONFIDENCE / 2.0, (n - 1) as f64);
    let h = t * stddev / (n as f64).sqrt();
    Estimate {
        n,
        mean,
        stddev,
        ci_low: mean - h,
        ci_high: mean + h,
        method: Method::StudentT,
    }
}

/// Percentile bootstrap interval of the mean, deterministic for a given seed.
pub fn bootstrap_mean_ci(values: &[f64], seed: u64) -> (f64, f64) {
    let n = values.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| (0..n).map(|_| values[rng.gen_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    let alpha = (1.0 - CONFIDENCE) / 2.0;
    let at =
        |q: f64| means[((q * BOOTSTRAP_RESAMPLES as f64) as usize).min(BOOTSTRAP_RESAMPLES - 1)];
    (at(alpha), at(1.0 - alpha))
}

/// Each repetition of a point by its flat metrics.
pub type Repetitions<'a> = Vec<&'a [(String, f64)]>;

/// The estimate of metric `name` over repetitions, each given by its flat metrics; `None`
/// when no repetition has it. Loss pools `packets_lost` over `packets_lost +
/// packets_received` where every repetition has them.
pub fn estimate_metric(name: &str, repetitions: &[&[(String, f64)]]) -> Option<Estimate> {
    let get = |rep: &[(String, f64)], n: &str| rep.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
    let values: Vec<f64> = repetitions.iter().filter_map(|r| get(r, name)).collect();
    if values.is_empty() {
        return None;
    }
    let range = range_of(name);
    if range == Range::Loss {
        let counts: Option<Vec<(f64, f64)>> = repetitions
            .iter()
            .map(|r| Some((get(r, "packets_lost")?, get(r, "packets_received")?)))
            .collect();
        if let Some(e) = counts.and_then(|c| loss_estimate(&values, &c)) {
            return Some(e);
        }
    }
    Some(estimate_in(&values, range, is_percentile(name)))
}

/// Mean and interval of `values` within `range` (percentiles by bootstrap): Student's t, its
/// bounds cut where the range ends.
pub fn estimate_in(values: &[f64], range: Range, percentile: bool) -> Estimate {
    let plain = estimate(values, percentile);
    let (floor, ceiling) = range.bounds();
    if plain.method != Method::StudentT || (plain.ci_low >= floor && plain.ci_high <= ceiling) {
        return plain;
    }
    Estimate {
        ci_low: plain.ci_low.max(floor),
        ci_high: plain.ci_high.min(ceiling),
        method: Method::StudentTCut,
        ..plain
    }
}

/// Loss (percent) pooled over repetitions' (lost, received) counts, with a Wilson interval whose
/// sample size is divided by the overdispersion between repetitions (Pearson's χ² over its
/// degrees of freedom, at least 1): repetitions that disagree more than binomial noise allows
/// widen it. `None` when no packet was counted.
fn loss_estimate(values: &[f64], counts: &[(f64, f64)]) -> Option<Estimate> {
    let lost: f64 = counts.iter().map(|c| c.0).sum();
    let total: f64 = counts.iter().map(|c| c.0 + c.1).sum();
    if total <= 0.0 {
        return None;
    }
    let p = lost / total;
    let n = counts.len();
    let dispersion = if n >= 2 && p > 0.0 && p < 1.0 {
        let chi2: f64 = counts
            .iter()
            .filter(|c| c.0 + c.1 > 0.0)
            .map(|&(k, r)| (k - (k + r) * p).powi(2) / ((k + r) * p * (1.0 - p)))
            .sum();
        (chi2 / (n - 1) as f64).max(1.0)
    } else {
        1.0
    };
    let (lo, hi) = wilson(p, total / dispersion);
    let plain = estimate(values, false);
    Some(Estimate {
        mean: 100.0 * p,
        ci_low: 100.0 * lo,
        ci_high: 100.0 * hi,
        method: Method::Wilson,
        ..plain
    })
}

/// Wilson score interval of proportion `p` over `n` trials at [`CONFIDENCE`].
pub fn wilson(p: f64, n: f64) -> (f64, f64) {
    let z = Z_95;
    let z2n = z * z / n;
    let centre = (p + z2n / 2.0) / (1.0 + z2n);
    let h = z / (1.0 + z2n) * (p * (1.0 - p) / n + z2n / (4.0 * n)).sqrt();
    // At 0 and 1 the bound is exact; rounding would leave 1e-18 where 0 is meant.
    let lo = if p <= 0.0 { 0.0 } else { (centre - h).max(0.0) };
    let hi = if p >= 1.0 { 1.0 } else { (centre + h).min(1.0) };
    (lo, hi)
}

/// The standard normal's quantile at 0.5 + [`CONFIDENCE`] / 2.
const Z_95: f64 = 1.959_963_984_540_054;

/// Whether to run another repetition: true until the 95 % half-width is within
/// `target_rel_halfwidth` of the mean (e.g. 0.02 for 2 %), with at least 2 and at most
/// `max_count` repetitions.
pub fn until_ci(
    values: &[f64],
    percentile: bool,
    target_rel_halfwidth: f64,
    max_count: usize,
) -> bool {
    let n = values.len();
    if n >= max_count {
        return false;
    }
    if n < 2 {
        return true;
    }
    estimate(values, percentile).relative_half_width() > target_rel_halfwidth
}

/// The `p` quantile of Student's t with `df` degrees of freedom (statrs' inverse of the
/// regularised incomplete beta); NaN outside 0 < p < 1 or for df ≤ 0, where statrs would panic.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    let Ok(law) = StudentsT::new(0.0, 1.0, df) else {
        return f64::NAN;
    };
    // statrs' inverse is ~1e-4 off at large df (its inverse beta's tolerance); Newton steps
    // on its CDF, which is exact to ~1e-15, bring that to ~1e-12.
    let mut t = law.inverse_cdf(p);
    for _ in 0..3 {
        t -= (law.cdf(t) - p) / law.pdf(t);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn reps(rows: &[&[(&str, f64)]]) -> Vec<Vec<(String, f64)>> {
        rows.iter()
            .map(|r| r.iter().map(|(k, v)| (k.to_string(), *v)).collect())
            .collect()
    }

    fn metric(name: &str, rows: &[Vec<(String, f64)>]) -> Estimate {
        let slices: Vec<&[(String, f64)]> = rows.iter().map(Vec::as_slice).collect();
        estimate_metric(name, &slices).unwrap()
    }

    #[test]
    fn z_is_the_normal_quantile() {
        assert!((t_quantile(0.5 + CONFIDENCE / 2.0, 1e6) - Z_95).abs() < 1e-5);
    }

    /// Wilson's interval for 0 of 100 and 5 of 100 (as R's `prop.test(x, 100, correct = FALSE)`
    /// gives them).
    #[test]
    fn wilson_vectors() {
        let (lo, hi) = wilson(0.0, 100.0);
        assert_eq!(lo, 0.0);
        assert!((hi - 0.036_993).abs() < 1e-5, "{hi}");
        let (lo, hi) = wilson(0.05, 100.0);
        assert!((lo - 0.021_544).abs() < 1e-5, "{lo}");
        assert!((hi - 0.111_750).abs() < 1e-5, "{hi}");
    }

    /// Issue 12: loss of 0 % and 50 % over two repetitions gave -200 % with Student's t.
    #[test]
    fn loss_pools_counts_and_stays_within_0_and_100() {
        let rows = reps(&[
            &[
                ("loss_pct", 0.0),
                ("packets_lost", 0.0),
                ("packets_received", 1000.0),
            ],
            &[
                ("loss_pct", 50.0),
                ("packets_lost", 500.0),
                ("packets_received", 500.0),
            ],
        ]);
        let e = metric("loss_pct", &rows);
        assert_eq!(e.method, Method::Wilson);
        assert!((e.mean - 25.0).abs() < 1e-9);
        assert!(e.ci_low >= 0.0 && e.ci_high <= 100.0);
        // Repetitions this far apart widen the interval far beyond 2000 packets' binomial one.
        let binomial = wilson(0.25, 2000.0);
        assert!(e.ci_high - e.ci_low > 5.0 * 100.0 * (binomial.1 - binomial.0));
        // One repetition with no loss: an interval from its counts, not a bare 0.
        let one = metric("loss_pct", &rows[..1]);
        assert_eq!((one.n, one.mean, one.ci_low), (1, 0.0, 0.0));
        assert!(one.ci_high > 0.0 && one.ci_high < 1.0);
    }

    /// Student's t for the mean, against R's `t.test(x)$conf.int`, cut at 0 where the figure
    /// cannot be negative. Issue 12: an RTT of 10 µs and 300 ms gave an interval down to
    /// -150 ms; Cox's log-normal interval then gave 10, 12, 11 µs one of 3.4 to 35.5 µs.
    #[test]
    fn nonnegative_metrics_get_students_t_cut_at_zero() {
        let close = |got: f64, want: f64| {
            assert!((got - want).abs() <= 1e-10 * want.abs(), "{got} vs {want}");
        };
        // Three close repetitions: 11 ± 4.302653 · 1 / √3, nothing to cut.
        let e = metric("rtt_mean_us", &rows_of("rtt_mean_us", &[10.0, 12.0, 11.0]));
        assert_eq!((e.n, e.method), (3, Method::StudentT));
        close(e.ci_low, 8.515_862_288);
        close(e.ci_high, 13.484_137_712);
        // Goodput within 1 %: 100 M ± 2.48 M, as for any figure.
        let e = metric(
            "goodput_bps",
            &rows_of("goodput_bps", &[99e6, 100e6, 101e6]),
        );
        close(e.ci_low, 97_515_862.288_25);
        close(e.ci_high, 102_484_137.711_75);
        // Two repetitions: t(1) = 12.706205; the lower bound -1.706 stops at 0.
        let e = metric("rtt_mean_us", &rows_of("rtt_mean_us", &[10.0, 12.0]));
        assert_eq!(e.method, Method::StudentTCut);
        assert_eq!(e.ci_low, 0.0);
        close(e.ci_high, 23.706_204_736);
        let e = metric("rtt_mean_us", &rows_of("rtt_mean_us", &[10.0, 300_000.0]));
        assert_eq!((e.mean, e.ci_low), (150_005.0, 0.0));
        close(e.ci_high, 2_055_872.179_4);
        // A zero is no obstacle (no logarithm).
        let e = metric("cpu_client_pct", &rows_of("cpu_client_pct", &[0.0, 4.0]));
        assert_eq!((e.method, e.ci_low), (Method::StudentTCut, 0.0));
        close(e.ci_high, 27.412_409_472);
        // Signed figures keep Student's t, which may cross zero.
        let e = metric("delay_mean_us", &rows_of("delay_mean_us", &[-5.0, 5.0]));
        assert_eq!(e.method, Method::StudentT);
        close(e.ci_low, -63.531_023_681);
        // One repetition: no interval.
        let e = metric("rtt_mean_us", &rows_of("rtt_mean_us", &[7.0]));
        assert_eq!((e.method, e.ci_low, e.ci_high), (Method::None, 7.0, 7.0));
    }

    /// Loss without packet counts to pool stays between 0 and 100 %.
    #[test]
    fn loss_without_counts_is_cut_at_both_ends() {
        let e = metric("loss_pct", &rows_of("loss_pct", &[0.0, 99.0]));
        assert_eq!(
            (e.method, e.ci_low, e.ci_high),
            (Method::StudentTCut, 0.0, 100.0)
        );
    }

    fn rows_of(name: &str, values: &[f64]) -> Vec<Vec<(String, f64)>> {
        values
            .iter()
            .map(|v| vec![(name.to_string(), *v)])
            .collect()
    }

    proptest! {
        /// Whatever the values, an interval lies within its metric's range and holds its mean.
        #[test]
        fn intervals_respect_ranges(values in proptest::collection::vec(0.0f64..1e6, 1..8),
                                    lost in proptest::collection::vec(0u32..1000, 1..8)) {
            for name in ["rtt_mean_us", "goodput_bps", "cpu_agent_pct", "rtt_p99_us"] {
                let e = metric(name, &rows_of(name, &values));
                prop_assert!(e.ci_low >= 0.0, "{name}: {e:?}");
                prop_assert!(e.ci_low <= e.mean + 1e-9 && e.mean <= e.ci_high + 1e-9, "{name}: {e:?}");
            }
            let rows: Vec<Vec<(String, f64)>> = lost.iter().map(|&k| {
                let (k, r) = (f64::from(k), 1000.0 - f64::from(k));
                vec![("loss_pct".into(), 100.0 * k / 1000.0), ("packets_lost".into(), k), ("packets_received".into(), r)]
            }).collect();
            let e = metric("loss_pct", &rows);
            prop_assert!(e.ci_low >= 0.0 && e.ci_high <= 100.0, "{e:?}");
            prop_assert!(e.ci_low <= e.mean + 1e-9 && e.mean <= e.ci_high + 1e-9, "{e:?}");
        }
    }

    #[test]
    fn t_quantiles_match_tables() {
        for (df, want) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (9.0, 2.262),
            (29.0, 2.045),
        ] {
            let got = t_quantile(0.975, df);
            assert!((got - want).abs() < 0.0006, "df {df}: {got} vs {want}");
        }
        assert!((t_quantile(0.975, 1e6) - 1.95996).abs() < 1e-3);
        assert!((t_quantile(0.025, 4.0) + 2.776).abs() < 0.0006);
        assert!(t_quantile(1.5, 3.0).is_nan());
        assert!(t_quantile(0.0, 3.0).is_nan() && t_quantile(f64::NAN, 3.0).is_nan());
        assert!(t_quantile(0.975, 0.0).is_nan() && t_quantile(0.975, -1.0).is_nan());
        assert_eq!(t_quantile(0.5, 7.0), 0.0);
        // R's qt() to 1e-9.
        for (p, df, want) in [
            (0.975, 1.0, 12.706_204_736_174_7),
            (0.975, 4.0, 2.776_445_105_197_79),
            (0.975, 29.0, 2.045_229_642_132_70),
            (0.995, 2.0, 9.924_843_200_918_28),
        ] {
            let got = t_quantile(p, df);
            assert!((got - want).abs() < 1e-9, "p {p} df {df}: {got}");
        }
    }

    #[test]
    fn estimate_of_known_data() {
        let e = estimate(&[1.0, 2.0, 3.0, 4.0, 5.0], false);
        assert_eq!(e.n, 5);
        assert!((e.mean - 3.0).abs() < 1e-12);
        assert!((e.stddev - 2.5f64.sqrt()).abs() < 1e-12);
        let h = 2.776445 * 2.5f64.sqrt() / 5f64.sqrt();
        assert!((e.half_width() - h).abs() < 1e-4);
        assert_eq!(e.method, Method::StudentT);
        let one = estimate(&[7.0], false);
        assert_eq!(
            (one.mean, one.half_width(), one.method),
            (7.0, 0.0, Method::None)
        );
        assert_eq!(estimate(&[], false).n, 0);
        assert_eq!(estimate(&[1.0, f64::NAN], false).n, 1);
    }

    #[test]
    fn bootstrap_is_deterministic_and_brackets_the_mean() {
        let v = [10.0, 12.0, 11.0, 30.0, 9.0, 10.5];
        let a = estimate(&v, true);
        let b = estimate(&v, true);
        assert_eq!(a, b);
        assert_eq!(a.method, Method::Bootstrap);
        assert!(a.ci_low < a.mean && a.mean < a.ci_high);
        assert!(a.ci_low >= 9.0 && a.ci_high <= 30.0);
    }

    #[test]
    fn percentile_names() {
        assert!(is_percentile("rtt_p99_us"));
        assert!(is_percentile("delay_p999_us"));
        assert!(!is_percentile("rtt_mean_us"));
        assert!(!is_percentile("packets_per_sec"));
    }

    #[test]
    fn until_ci_stops_when_tight_or_at_max() {
        assert!(until_ci(&[], false, 0.02, 10));
        assert!(until_ci(&[100.0], false, 0.02, 10));
        assert!(!until_ci(&[100.0, 100.1, 99.9], false, 0.02, 10));
        assert!(until_ci(&[100.0, 150.0, 50.0], false, 0.02, 10));
        assert!(!until_ci(&[100.0, 150.0, 50.0], false, 0.02, 3));
        assert!(!until_ci(&[0.0, 0.0], false, 0.02, 10));
    }
}
