//! Running mean and variance in one pass, mergeable across threads or intervals.

use serde::{Deserialize, Serialize};

/// Welford running mean/variance with min/max.
///
/// Non-finite inputs are ignored so that one bad sample cannot turn every later
/// summary into NaN.
#[derive(Debug, Clone, Default)]
pub struct Welford {
    count: u64,
    mean: f64,
    /// Sum of squared deviations from the mean.
    m2: f64,
    min: f64,
    max: f64,
}

/// A finished set of moments, ready to serialize.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    /// Sample variance (n - 1); 0 for a single sample.
    pub variance: f64,
    pub stddev: f64,
    pub min: f64,
    pub max: f64,
}

impl Welford {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        if self.count == 0 {
            *self = Self {
                count: 1,
                mean: x,
                m2: 0.0,
                min: x,
                max: x,
            };
            return;
        }
        self.count = self.count.saturating_add(1);
        let delta = x - self.mean;
        self.mean += delta / self.count as f64;
        self.m2 += delta * (x - self.mean);
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }

    /// Pushes `x` `n` times at the cost of one merge (a coalesced train of equal samples).
    pub fn push_n(&mut self, x: f64, n: u64) {
        if n == 0 || !x.is_finite() {
            return;
        }
        self.merge(&Welford {
            count: n,
            mean: x,
            m2: 0.0,
            min: x,
            max: x,
        });
    }

    /// Chan et al. parallel merge: the result equals pushing both sample sets into one.
    pub fn merge(&mut self, other: &Welford) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other.clone();
            return;
        }
        let self_count = self.count as f64;
        let other_count = other.count as f64;
        let total = self_count + other_count;
        let delta = other.mean - self.mean;
        self.mean += delta * other_count / total;
        self.m2 += other.m2 + delta * delta * self_count * other_count / total;
        self.count = self.count.saturating_add(other.count);
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then_some(self.mean)
    }

    /// Sample variance (n - 1); `None` when n < 2.
    pub fn variance(&self) -> Option<f64> {
        (self.count >= 2).then(|| finite_or_max((self.m2 / (self.count - 1) as f64).max(0.0)))
    }

    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }

    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// `None` when empty; variance is 0 for one sample so every field stays finite.
    pub fn summary(&self) -> Option<Summary> {
        if self.count == 0 {
            return None;
        }
        let variance = self.variance().unwrap_or(0.0);
        Some(Summary {
            count: self.count,
            mean: finite_or_max(self.mean),
            variance,
            stddev: variance.sqrt(),
            min: self.min,
            max: self.max,
        })
    }

    /// The same moments for every sample plus `offset`: variance is unchanged.
    pub(crate) fn shifted(&self, offset: f64) -> Welford {
        if self.count == 0 {
            return self.clone();
        }
        Welford {
            mean: self.mean + offset,
            min: self.min + offset,
            max: self.max + offset,
            ..self.clone()
        }
    }
}

/// Huge finite inputs can overflow the squared deviations; saturate rather than emit inf.
fn finite_or_max(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else if x < 0.0 {
        f64::MIN
    } else {
        f64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_n_equals_repeated_push() {
        let mut a = Welford::new();
        let mut b = Welford::new();
        for (x, n) in [(3.0, 4u64), (10.0, 1), (-2.5, 7)] {
            a.push_n(x, n);
            (0..n).for_each(|_| b.push(x));
        }
        let (a, b) = (a.summary().unwrap(), b.summary().unwrap());
        assert_eq!(a.count, b.count);
        assert!((a.mean - b.mean).abs() < 1e-12 && (a.variance - b.variance).abs() < 1e-9);
    }
    use proptest::prelude::*;

    fn two_pass(samples: &[f64]) -> (f64, f64) {
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, variance)
    }

    fn close(a: f64, b: f64, scale: f64) -> bool {
        (a - b).abs() <= 1e-9 * scale.max(1e-300)
    }

    #[test]
    fn empty_and_single_sample() {
        let mut stats = Welford::new();
        assert_eq!(stats.count(), 0);
        assert_eq!(stats.mean(), None);
        assert_eq!(stats.variance(), None);
        assert_eq!(stats.min(), None);
        assert_eq!(stats.summary(), None);
        stats.push(4.0);
        assert_eq!(stats.variance(), None);
        let summary = stats.summary().expect("one sample");
        assert_eq!(
            summary,
            Summary {
                count: 1,
                mean: 4.0,
                variance: 0.0,
                stddev: 0.0,
                min: 4.0,
                max: 4.0
            }
        );
    }

    #[test]
    fn known_values() {
        let mut stats = Welford::new();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            stats.push(x);
        }
        assert_eq!(stats.mean(), Some(5.0));
        // Sum of squared deviations is 32, over n - 1 = 7.
        assert!((stats.variance().unwrap_or_default() - 32.0 / 7.0).abs() < 1e-12);
        assert_eq!(stats.min(), Some(2.0));
        assert_eq!(stats.max(), Some(9.0));
    }

    #[test]
    fn non_finite_inputs_are_ignored_and_output_stays_finite() {
        let mut stats = Welford::new();
        stats.push(f64::NAN);
        stats.push(f64::INFINITY);
        assert_eq!(stats.count(), 0);
        stats.push(f64::MAX);
        stats.push(-f64::MAX);
        let summary = stats.summary().expect("two samples");
        let json = serde_json::to_string(&summary).expect("finite fields serialize");
        assert!(!json.contains("null"), "{json}");
        assert!(summary.variance.is_finite() && summary.stddev.is_finite());
    }

    proptest! {
        #[test]
        fn matches_two_pass(samples in prop::collection::vec(-1e6f64..1e6, 2..200)) {
            let mut stats = Welford::new();
            samples.iter().for_each(|&x| stats.push(x));
            let (mean, variance) = two_pass(&samples);
            let summary = stats.summary().expect("non-empty");
            let magnitude = samples.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            prop_assert!(close(summary.mean, mean, magnitude), "{} vs {}", summary.mean, mean);
            prop_assert!(close(summary.variance, variance, variance.max(magnitude)),
                "{} vs {}", summary.variance, variance);
            prop_assert_eq!(summary.count, samples.len() as u64);
        }

        #[test]
        fn merge_equals_sequential(
            left in prop::collection::vec(-1e6f64..1e6, 0..100),
            right in prop::collection::vec(-1e6f64..1e6, 0..100),
        ) {
            let mut sequential = Welford::new();
            let mut first = Welford::new();
            let mut second = Welford::new();
            for &x in &left { sequential.push(x); first.push(x); }
            for &x in &right { sequential.push(x); second.push(x); }
            first.merge(&second);
            prop_assert_eq!(first.count(), sequential.count());
            prop_assert_eq!(first.min(), sequential.min());
            prop_assert_eq!(first.max(), sequential.max());
            if let (Some(a), Some(b)) = (first.mean(), sequential.mean()) {
                prop_assert!(close(a, b, 1e6));
            }
            if let (Some(a), Some(b)) = (first.variance(), sequential.variance()) {
                prop_assert!(close(a, b, b.max(1e6)), "{} vs {}", a, b);
            }
        }
    }
}
