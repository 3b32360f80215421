//! Statistics over repetitions: mean, standard deviation and a 95 % confidence interval, so a
//! difference between two points can be told from noise. Means use Student's t; percentile
//! metrics (skewed, few repetitions) use a seeded bootstrap so the same data always gives the
//! same interval.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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

/// The `p` quantile of Student's t with `df` degrees of freedom (df ≥ 1), by bisection on the
/// exact CDF (regularised incomplete beta); accurate to ~1e-9.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(0.0..1.0).contains(&p) || p == 0.0 || df <= 0.0 {
        return f64::NAN;
    }
    if p == 0.5 {
        return 0.0;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_cdf(hi, df) < p {
        hi *= 2.0;
        if hi > 1e12 {
            return f64::INFINITY;
        }
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_cdf(mid, df) < p {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-12 * hi.max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// CDF of Student's t.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    let x = df / (df + t * t);
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, x);
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// Regularised incomplete beta I_x(a, b) (Numerical Recipes' continued fraction).
fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_cf(a, b, x) / a
    } else {
        1.0 - front * beta_cf(b, a, 1.0 - x) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms: ~1e-15 relative).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x)Γ(1−x) = π / sin(πx).
        return (std::f64::consts::PI / (std::f64::consts::PI * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn ln_gamma_is_exact_at_integers() {
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
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
