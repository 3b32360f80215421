//! Exact durations in nanoseconds.
//!
//! A cell time is rarely a whole number of nanoseconds (OC-3c: 2831.19… ns), and a model that
//! rounds it once and then adds it up drifts by microseconds a second. Every rate in this crate
//! is therefore carried as an exact fraction `num / den` of a nanosecond, and times are computed
//! from a start and an index, never by accumulating rounded steps.

/// Nanoseconds in one second.
pub const NS_PER_SECOND: u128 = 1_000_000_000;

/// An exact non-negative duration of `num / den` nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExactNs {
    num: u128,
    den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

impl ExactNs {
    /// The zero duration.
    pub const ZERO: ExactNs = ExactNs { num: 0, den: 1 };

    /// `num / den` nanoseconds, reduced; `None` when `den` is zero.
    pub fn new(num: u128, den: u128) -> Option<ExactNs> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den).max(1);
        Some(ExactNs {
            num: num / g,
            den: den / g,
        })
    }

    /// A whole number of nanoseconds.
    pub const fn from_ns(ns: u64) -> ExactNs {
        ExactNs {
            num: ns as u128,
            den: 1,
        }
    }

    /// The interval between events at `events_per_second` (1 s / rate); `None` for a zero rate.
    pub fn per_rate(events_per_second: u64) -> Option<ExactNs> {
        ExactNs::new(NS_PER_SECOND, u128::from(events_per_second))
    }

    /// The interval between events at the rational rate `events / seconds` per second.
    pub fn per_rational_rate(events: u64, seconds: u64) -> Option<ExactNs> {
        if events == 0 {
            return None;
        }
        ExactNs::new(NS_PER_SECOND * u128::from(seconds), u128::from(events))
    }

    /// Numerator of the reduced fraction.
    pub const fn numer(self) -> u128 {
        self.num
    }

    /// Denominator of the reduced fraction (never zero).
    pub const fn denom(self) -> u128 {
        self.den
    }

    /// The value as a float, for printing and for callers that accept rounding.
    pub fn as_f64(self) -> f64 {
        self.num as f64 / self.den as f64
    }

    /// Whether the duration is zero.
    pub const fn is_zero(self) -> bool {
        self.num == 0
    }

    /// `k` times this duration, rounded down to whole nanoseconds (saturating).
    pub fn times_floor(self, k: u64) -> u64 {
        let product = self.num.saturating_mul(u128::from(k)) / self.den;
        u64::try_from(product).unwrap_or(u64::MAX)
    }

    /// `k` times this duration, rounded up to whole nanoseconds (saturating).
    pub fn times_ceil(self, k: u64) -> u64 {
        let product = self.num.saturating_mul(u128::from(k));
        let q = product / self.den + u128::from(product % self.den != 0);
        u64::try_from(q).unwrap_or(u64::MAX)
    }

    /// Sum of two durations (saturating), exact.
    pub fn saturating_add(self, other: ExactNs) -> ExactNs {
        let den = (self.den / gcd(self.den, other.den)).saturating_mul(other.den);
        let a = self.num.saturating_mul(den / self.den);
        let b = other.num.saturating_mul(den / other.den);
        ExactNs::new(a.saturating_add(b), den).unwrap_or(ExactNs::ZERO)
    }

    /// Difference `self − other`, or zero when `other` is larger; exact.
    pub fn saturating_sub(self, other: ExactNs) -> ExactNs {
        let den = (self.den / gcd(self.den, other.den)).saturating_mul(other.den);
        let a = self.num.saturating_mul(den / self.den);
        let b = other.num.saturating_mul(den / other.den);
        ExactNs::new(a.saturating_sub(b), den).unwrap_or(ExactNs::ZERO)
    }

    /// This duration multiplied by a whole number `k` (saturating), exact.
    pub fn saturating_mul(self, k: u64) -> ExactNs {
        ExactNs::new(self.num.saturating_mul(u128::from(k)), self.den).unwrap_or(ExactNs::ZERO)
    }

    /// Events per second at one event per this duration (`None` when zero).
    pub fn rate_per_second_f64(self) -> Option<f64> {
        if self.num == 0 {
            None
        } else {
            Some(NS_PER_SECOND as f64 * self.den as f64 / self.num as f64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduces_and_rejects_zero_denominator() {
        let x = ExactNs::new(424_000, 1_000).unwrap();
        assert_eq!((x.numer(), x.denom()), (424, 1));
        assert!(ExactNs::new(1, 0).is_none());
        assert!(ExactNs::per_rate(0).is_none());
    }

    #[test]
    fn times_floor_and_ceil_are_exact() {
        let third = ExactNs::new(1000, 3).unwrap();
        assert_eq!(third.times_floor(3), 1000);
        assert_eq!(third.times_floor(1), 333);
        assert_eq!(third.times_ceil(1), 334);
        assert_eq!(third.times_ceil(3), 1000);
        // A million steps later there is still no drift.
        assert_eq!(third.times_floor(3_000_000), 1_000_000_000);
    }

    #[test]
    fn add_and_sub_use_a_common_denominator() {
        let a = ExactNs::new(1, 3).unwrap();
        let b = ExactNs::new(1, 6).unwrap();
        assert_eq!(a.saturating_add(b), ExactNs::new(1, 2).unwrap());
        assert_eq!(a.saturating_sub(b), b);
        assert_eq!(b.saturating_sub(a), ExactNs::ZERO);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        let big = ExactNs::new(u128::MAX, 1).unwrap();
        assert_eq!(big.times_floor(u64::MAX), u64::MAX);
        assert_eq!(big.times_ceil(2), u64::MAX);
        let _ = big.saturating_add(big);
        let _ = big.saturating_mul(u64::MAX);
    }
}
