//! The jitter figure RTP receivers report, so results compare with other tools.

/// RFC 3550 section 6.4.1 interarrival jitter: J += (|D| - J)/16, D = difference of
/// transit times of consecutive packets.
///
/// Transit times may include an unknown clock offset: it cancels out in D.
#[derive(Debug, Clone, Default)]
pub struct Rfc3550Jitter {
    last_transit_ns: Option<i64>,
    jitter_ns: f64,
}

impl Rfc3550Jitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// `transit_ns` is arrival time minus send timestamp, in arrival order.
    pub fn push(&mut self, transit_ns: i64) {
        if let Some(last) = self.last_transit_ns {
            // i128 so that extreme transit values cannot overflow.
            let difference = (i128::from(transit_ns) - i128::from(last)).unsigned_abs() as f64;
            self.jitter_ns += (difference - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit_ns);
    }

    /// `n` packets in a row with the same transit: the first moves J as usual, the others
    /// (D = 0) each shrink it by 1/16.
    pub fn push_n(&mut self, transit_ns: i64, n: u64) {
        if n == 0 {
            return;
        }
        self.push(transit_ns);
        let repeats = i32::try_from(n - 1).unwrap_or(i32::MAX);
        self.jitter_ns *= (15.0f64 / 16.0).powi(repeats);
    }

    pub fn value_ns(&self) -> f64 {
        self.jitter_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_n_equals_repeated_push() {
        let (mut a, mut b) = (Rfc3550Jitter::new(), Rfc3550Jitter::new());
        for (t, n) in [(100, 1u64), (180, 5), (90, 3)] {
            a.push_n(t, n);
            (0..n).for_each(|_| b.push(t));
        }
        assert!((a.value_ns() - b.value_ns()).abs() < 1e-9);
    }

    #[test]
    fn hand_computed_example() {
        // Transits 100, 116, 100, 132 ns; the 1000 ns offset of the second run cancels.
        // first packet: no D yet, J = 0
        // D = 116 - 100 = 16:  J = 0      + (16 - 0)      / 16 = 1
        // D = 100 - 116 = -16: J = 1      + (16 - 1)      / 16 = 1.9375
        // D = 132 - 100 = 32:  J = 1.9375 + (32 - 1.9375) / 16 = 1.9375 + 1.87890625 = 3.81640625
        for offset in [0, 1000, -1000] {
            let mut jitter = Rfc3550Jitter::new();
            jitter.push(100 + offset);
            assert_eq!(jitter.value_ns(), 0.0);
            jitter.push(116 + offset);
            assert_eq!(jitter.value_ns(), 1.0);
            jitter.push(100 + offset);
            assert_eq!(jitter.value_ns(), 1.9375);
            jitter.push(132 + offset);
            assert_eq!(jitter.value_ns(), 3.81640625);
        }
    }

    #[test]
    fn extreme_transits_do_not_overflow() {
        let mut jitter = Rfc3550Jitter::new();
        jitter.push(i64::MIN);
        jitter.push(i64::MAX);
        assert!(jitter.value_ns().is_finite());
        assert!(jitter.value_ns() > 0.0);
    }
}
