use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TrafficError {
    #[error("rate must be above 0 bit/s")]
    ZeroRate,
    #[error("packet size must be above 0 bytes")]
    ZeroSize,
    /// A parameter, spec or distribution that makes no sense; the message is one line.
    #[error("{0}")]
    Invalid(String),
    /// A malformed line of a text file (trace or empirical CDF); lines count from 1.
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
    /// A malformed pcap file.
    #[error("pcap: {0}")]
    Pcap(String),
    /// A file the spec names could not be read by the caller.
    #[error("cannot read '{path}': {message}")]
    File { path: String, message: String },
}

impl TrafficError {
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        TrafficError::Invalid(message.into())
    }
}

impl From<flowlab_units::UnitError> for TrafficError {
    fn from(e: flowlab_units::UnitError) -> Self {
        TrafficError::Invalid(e.to_string())
    }
}

/// A constant-rate flow on an absolute schedule: packet `k` is due at
/// `start + k * size_bits / rate` seconds, computed exactly in integers for each `k`, so the
/// schedule never drifts however long it runs (no accumulated rounding of an interval).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacedSchedule {
    start_ns: u64,
    rate_bps: u64,
    packet_bits: u64,
}

const NS_PER_SEC: u128 = 1_000_000_000;

impl PacedSchedule {
    pub fn new(start_ns: u64, rate_bps: u64, packet_bytes: u32) -> Result<Self, TrafficError> {
        if rate_bps == 0 {
            return Err(TrafficError::ZeroRate);
        }
        if packet_bytes == 0 {
            return Err(TrafficError::ZeroSize);
        }
        Ok(PacedSchedule {
            start_ns,
            rate_bps,
            packet_bits: u64::from(packet_bytes) * 8,
        })
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    /// Time between packets, in (fractional) nanoseconds.
    pub fn interval_ns(&self) -> f64 {
        self.packet_bits as f64 * 1e9 / self.rate_bps as f64
    }

    /// When packet `k` (from 0) is due; rounded down to the nanosecond, saturating.
    pub fn deadline(&self, k: u64) -> u64 {
        let offset =
            u128::from(k) * u128::from(self.packet_bits) * NS_PER_SEC / u128::from(self.rate_bps);
        u64::try_from(u128::from(self.start_ns) + offset).unwrap_or(u64::MAX)
    }

    /// How many packets are due at or before `now_ns`.
    pub fn due_by(&self, now_ns: u64) -> u64 {
        if now_ns < self.start_ns {
            return 0;
        }
        // deadline(k) = floor(k*B/R) <= e  <=>  k*B < (e+1)*R  <=>  k < ceil((e+1)*R/B).
        let elapsed = u128::from(now_ns - self.start_ns);
        let bits_ns = u128::from(self.packet_bits) * NS_PER_SEC;
        let count = ((elapsed + 1) * u128::from(self.rate_bps)).div_ceil(bits_ns);
        u64::try_from(count).unwrap_or(u64::MAX)
    }

    /// Number of packets due strictly before `end_ns`: the packets of a test of that end time.
    pub fn count_before(&self, end_ns: u64) -> u64 {
        if end_ns <= self.start_ns {
            return 0;
        }
        self.due_by(end_ns - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn two_megabit_500_bytes_is_every_2ms() {
        let s = PacedSchedule::new(1_000, 2_000_000, 500).unwrap();
        assert_eq!(s.interval_ns(), 2_000_000.0);
        assert_eq!(s.deadline(0), 1_000);
        assert_eq!(s.deadline(3), 6_001_000);
        assert_eq!(s.due_by(999), 0);
        assert_eq!(s.due_by(1_000), 1);
        assert_eq!(s.due_by(2_000_999), 1);
        assert_eq!(s.due_by(2_001_000), 2);
        // A 3 s test holds 1500 packets.
        assert_eq!(s.count_before(1_000 + 3_000_000_000), 1500);
    }

    #[test]
    fn no_drift_over_a_million_packets() {
        // 1 Mbit/s of 1000-byte packets: 8 ms apart, so packet 1e6 is due 8000 s after start,
        // exactly, although the interval of a rate like 3 Mbit/s has no exact binary form.
        let s = PacedSchedule::new(0, 1_000_000, 1000).unwrap();
        assert_eq!(s.deadline(1_000_000), 8_000_000_000_000);
        let s = PacedSchedule::new(0, 3_000_000, 1000).unwrap();
        // 1e6 * 8000 bits / 3e6 bit/s = 2666.666...s
        assert_eq!(s.deadline(1_000_000), 2_666_666_666_666);
        // Summing a rounded interval instead would drift by 1e6 * 0.666 ns = 0.67 ms.
        let rounded_interval = s.interval_ns() as u64;
        assert_ne!(rounded_interval * 1_000_000, s.deadline(1_000_000));
    }

    #[test]
    fn rejects_zero() {
        assert_eq!(PacedSchedule::new(0, 0, 100), Err(TrafficError::ZeroRate));
        assert_eq!(PacedSchedule::new(0, 100, 0), Err(TrafficError::ZeroSize));
    }

    proptest! {
        #[test]
        fn deadlines_are_monotonic_and_within_a_nanosecond_of_ideal(
            rate in 1_000u64..100_000_000_000, size in 1u32..65_535, k in 0u64..10_000_000
        ) {
            let s = PacedSchedule::new(0, rate, size).unwrap();
            prop_assert!(s.deadline(k) <= s.deadline(k + 1));
            let ideal = k as f64 * f64::from(size) * 8.0 * 1e9 / rate as f64;
            prop_assert!((s.deadline(k) as f64 - ideal).abs() <= 1.0 + ideal * 1e-12);
        }

        #[test]
        fn due_by_agrees_with_deadline(rate in 1_000u64..10_000_000_000, size in 1u32..65_535, k in 0u64..1_000_000) {
            let s = PacedSchedule::new(5, rate, size).unwrap();
            let d = s.deadline(k);
            prop_assert!(s.due_by(d) > k);
            prop_assert!(s.due_by(d - 1) <= k);
        }
    }
}
