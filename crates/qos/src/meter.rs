//! Token buckets: policers that colour packets (single rate, srTCM RFC 2697, trTCM RFC 2698) and
//! a shaper that delays them until they conform.
//!
//! Arithmetic is exact: a bucket holds tokens in units of bit·nanoseconds-per-second (one byte
//! is `8 * 10^9` units), so a rate of `r` bit/s adds exactly `r` units per nanosecond and a
//! refill over any interval is one multiplication in `u128`. Nothing is rounded while filling or
//! spending, so a meter run for days accepts exactly what the ideal fluid bucket accepts. The
//! only rounding is in [`TokenBucket::earliest_conform`], which rounds a waiting time *up* to
//! the next whole nanosecond (a packet never leaves before it conforms).
//!
//! Buckets start full. Time that goes backwards (`now` below the last update) adds no tokens.

use std::collections::VecDeque;

use crate::sched::{Counters, QueueLimit};
use crate::{DropReason, PacketMeta, QosError, Verdict};

const UNITS_PER_BYTE: u128 = 8 * 1_000_000_000;

fn units(bytes: u64) -> u128 {
    u128::from(bytes) * UNITS_PER_BYTE
}

/// The colour a meter gives a packet (RFC 2697/2698 names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Color {
    /// Within the committed profile.
    Green,
    /// Above committed, within the excess (srTCM) or peak (trTCM) profile.
    Yellow,
    /// Out of profile.
    Red,
}

/// One bucket's level and depth, in exact units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Level {
    tokens: u128,
    cap: u128,
}

impl Level {
    fn full(bytes: u64) -> Level {
        Level {
            tokens: units(bytes),
            cap: units(bytes),
        }
    }

    /// Adds `add` units, returning what overflowed the cap.
    fn fill(&mut self, add: u128) -> u128 {
        let t = self.tokens.saturating_add(add);
        if t > self.cap {
            self.tokens = self.cap;
            t - self.cap
        } else {
            self.tokens = t;
            0
        }
    }

    fn has(&self, need: u128) -> bool {
        self.tokens >= need
    }

    fn take(&mut self, need: u128) {
        self.tokens = self.tokens.saturating_sub(need);
    }
}

/// Units a rate adds between `last` and `now` (none if time went backwards).
fn accrued(rate_bps: u64, last: u64, now: u64) -> u128 {
    u128::from(now.saturating_sub(last)) * u128::from(rate_bps)
}

/// A single token bucket: rate `rate_bps`, depth `burst_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_bytes: u64,
    level: Level,
    last_ns: u64,
}

impl TokenBucket {
    /// A full bucket at time `now_ns`.
    pub fn new(rate_bps: u64, burst_bytes: u64, now_ns: u64) -> Result<TokenBucket, QosError> {
        if rate_bps == 0 {
            return Err(QosError::ZeroRate);
        }
        if burst_bytes == 0 {
            return Err(QosError::ZeroBurst);
        }
        Ok(TokenBucket {
            rate_bps,
            burst_bytes,
            level: Level::full(burst_bytes),
            last_ns: now_ns,
        })
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    pub fn burst_bytes(&self) -> u64 {
        self.burst_bytes
    }

    /// Brings the bucket up to `now_ns`.
    pub fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            self.level
                .fill(accrued(self.rate_bps, self.last_ns, now_ns));
            self.last_ns = now_ns;
        }
    }

    /// Whole bytes of tokens at the last update.
    pub fn tokens_bytes(&self) -> u64 {
        u64::try_from(self.level.tokens / UNITS_PER_BYTE).unwrap_or(u64::MAX)
    }

    /// Whether `bytes` conform at `now_ns`, without spending.
    pub fn conforms(&mut self, now_ns: u64, bytes: u32) -> bool {
        self.refill(now_ns);
        self.level.has(units(bytes.into()))
    }

    /// Spends `bytes` if they conform at `now_ns`; returns whether they did.
    pub fn try_consume(&mut self, now_ns: u64, bytes: u32) -> bool {
        let ok = self.conforms(now_ns, bytes);
        if ok {
            self.level.take(units(bytes.into()));
        }
        ok
    }

    /// The earliest time at which `bytes` conform, given no other spending: the last update
    /// time if they conform already, `None` if they exceed the bucket depth (never conform).
    pub fn earliest_conform(&self, bytes: u32) -> Option<u64> {
        let need = units(bytes.into());
        if need > self.level.cap {
            return None;
        }
        if self.level.has(need) {
            return Some(self.last_ns);
        }
        let wait = (need - self.level.tokens).div_ceil(u128::from(self.rate_bps));
        Some(u64::try_from(u128::from(self.last_ns) + wait).unwrap_or(u64::MAX))
    }
}

/// A single-rate, two-colour policer (CIR/CBS): green if the packet fits the bucket, else red.
/// Red packets spend nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SingleRateMeter {
    bucket: TokenBucket,
}

impl SingleRateMeter {
    pub fn new(cir_bps: u64, cbs_bytes: u64, now_ns: u64) -> Result<SingleRateMeter, QosError> {
        Ok(SingleRateMeter {
            bucket: TokenBucket::new(cir_bps, cbs_bytes, now_ns)?,
        })
    }

    pub fn meter(&mut self, now_ns: u64, bytes: u32) -> Color {
        if self.bucket.try_consume(now_ns, bytes) {
            Color::Green
        } else {
            Color::Red
        }
    }

    pub fn bucket(&self) -> &TokenBucket {
        &self.bucket
    }
}

/// Single Rate Three Color Marker (RFC 2697): bucket C (CBS) fills at CIR; what overflows C fills
/// bucket E (EBS). Green spends from C, yellow from E, red spends nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrTcm {
    cir_bps: u64,
    c: Level,
    e: Level,
    last_ns: u64,
}

impl SrTcm {
    /// Both buckets start full. RFC 2697 asks that at least one of CBS and EBS be above 0 and
    /// recommends sizes at least the largest packet.
    pub fn new(
        cir_bps: u64,
        cbs_bytes: u64,
        ebs_bytes: u64,
        now_ns: u64,
    ) -> Result<SrTcm, QosError> {
        if cir_bps == 0 {
            return Err(QosError::ZeroRate);
        }
        if cbs_bytes == 0 && ebs_bytes == 0 {
            return Err(QosError::ZeroBurst);
        }
        Ok(SrTcm {
            cir_bps,
            c: Level::full(cbs_bytes),
            e: Level::full(ebs_bytes),
            last_ns: now_ns,
        })
    }

    fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let spill = self.c.fill(accrued(self.cir_bps, self.last_ns, now_ns));
            self.e.fill(spill);
            self.last_ns = now_ns;
        }
    }

    /// Colour-blind mode.
    pub fn meter(&mut self, now_ns: u64, bytes: u32) -> Color {
        self.meter_aware(now_ns, bytes, Color::Green)
    }

    /// Colour-aware mode: a packet pre-coloured yellow can only be yellow or red, red stays red.
    pub fn meter_aware(&mut self, now_ns: u64, bytes: u32, pre: Color) -> Color {
        self.refill(now_ns);
        let b = units(bytes.into());
        if pre == Color::Green && self.c.has(b) {
            self.c.take(b);
            Color::Green
        } else if pre != Color::Red && self.e.has(b) {
            self.e.take(b);
            Color::Yellow
        } else {
            Color::Red
        }
    }
}

/// Two Rate Three Color Marker (RFC 2698): bucket P (PBS) fills at PIR, bucket C (CBS) at CIR.
/// Red if P lacks the tokens; else yellow (spending P) if C lacks them; else green (spending
/// both).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrTcm {
    cir_bps: u64,
    pir_bps: u64,
    c: Level,
    p: Level,
    last_ns: u64,
}

impl TrTcm {
    /// Both buckets start full; RFC 2698 requires PIR ≥ CIR and both sizes above 0.
    pub fn new(
        cir_bps: u64,
        cbs_bytes: u64,
        pir_bps: u64,
        pbs_bytes: u64,
        now_ns: u64,
    ) -> Result<TrTcm, QosError> {
        if cir_bps == 0 {
            return Err(QosError::ZeroRate);
        }
        if pir_bps < cir_bps {
            return Err(QosError::PeakBelowCommitted {
                pir: pir_bps,
                cir: cir_bps,
            });
        }
        if cbs_bytes == 0 || pbs_bytes == 0 {
            return Err(QosError::ZeroBurst);
        }
        Ok(TrTcm {
            cir_bps,
            pir_bps,
            c: Level::full(cbs_bytes),
            p: Level::full(pbs_bytes),
            last_ns: now_ns,
        })
    }

    fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            self.c.fill(accrued(self.cir_bps, self.last_ns, now_ns));
            self.p.fill(accrued(self.pir_bps, self.last_ns, now_ns));
            self.last_ns = now_ns;
        }
    }

    /// Colour-blind mode.
    pub fn meter(&mut self, now_ns: u64, bytes: u32) -> Color {
        self.meter_aware(now_ns, bytes, Color::Green)
    }

    /// Colour-aware mode (RFC 2698 §3).
    pub fn meter_aware(&mut self, now_ns: u64, bytes: u32, pre: Color) -> Color {
        self.refill(now_ns);
        let b = units(bytes.into());
        if pre == Color::Red || !self.p.has(b) {
            Color::Red
        } else if pre == Color::Yellow || !self.c.has(b) {
            self.p.take(b);
            Color::Yellow
        } else {
            self.p.take(b);
            self.c.take(b);
            Color::Green
        }
    }
}

/// A token-bucket shaper: a FIFO whose head leaves at the earliest time it conforms to the
/// sustained bucket (and, if set, a peak bucket, as in an ATM/AQUILA PR/SR/BS contract). Order
/// is preserved; the queue is bounded (tail drop).
#[derive(Debug, Clone)]
pub struct Shaper {
    sustained: TokenBucket,
    peak: Option<TokenBucket>,
    queue: VecDeque<PacketMeta>,
    queued_bytes: u64,
    limit: QueueLimit,
    counters: Counters,
}

impl Shaper {
    /// A shaper to `rate_bps` with bucket depth `burst_bytes`, holding at most `limit`.
    pub fn new(
        rate_bps: u64,
        burst_bytes: u64,
        limit: QueueLimit,
        now_ns: u64,
    ) -> Result<Shaper, QosError> {
        Ok(Shaper {
            sustained: TokenBucket::new(rate_bps, burst_bytes, now_ns)?,
            peak: None,
            queue: VecDeque::new(),
            queued_bytes: 0,
            limit,
            counters: Counters::default(),
        })
    }

    /// Adds a peak-rate bucket (depth usually one maximum-size packet).
    pub fn with_peak(
        mut self,
        peak_bps: u64,
        peak_burst_bytes: u64,
        now_ns: u64,
    ) -> Result<Shaper, QosError> {
        self.peak = Some(TokenBucket::new(peak_bps, peak_burst_bytes, now_ns)?);
        Ok(self)
    }

    /// Queues the packet; drops it if the queue is full or it is larger than a bucket.
    pub fn enqueue(&mut self, _now_ns: u64, pkt: PacketMeta) -> Verdict {
        let too_large = |b: &TokenBucket| u64::from(pkt.size) > b.burst_bytes();
        if too_large(&self.sustained) || self.peak.as_ref().is_some_and(too_large) {
            self.counters.drop(pkt.size);
            return Verdict::Dropped(DropReason::TooLarge);
        }
        if !self
            .limit
            .admits(self.queue.len(), self.queued_bytes, pkt.size)
        {
            self.counters.drop(pkt.size);
            return Verdict::Dropped(DropReason::QueueFull);
        }
        self.queue.push_back(pkt);
        self.queued_bytes += u64::from(pkt.size);
        self.counters.enqueue(pkt.size);
        Verdict::Queued
    }

    /// The head packet if it conforms at `now_ns` (spending its tokens).
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<PacketMeta> {
        let size = self.queue.front()?.size;
        let ok = self.sustained.conforms(now_ns, size)
            && self.peak.as_mut().is_none_or(|p| p.conforms(now_ns, size));
        if !ok {
            return None;
        }
        self.sustained.try_consume(now_ns, size);
        if let Some(p) = self.peak.as_mut() {
            p.try_consume(now_ns, size);
        }
        let pkt = self.queue.pop_front()?;
        self.queued_bytes -= u64::from(pkt.size);
        self.counters.send(pkt.size);
        Some(pkt)
    }

    /// When the head packet conforms (may be in the past: call `poll_transmit` now).
    pub fn poll_timeout(&self) -> Option<u64> {
        let size = self.queue.front()?.size;
        let s = self.sustained.earliest_conform(size)?;
        match &self.peak {
            Some(p) => Some(s.max(p.earliest_conform(size)?)),
            None => Some(s),
        }
    }

    pub fn len(&self) -> usize {
        self.queue.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn bucket_refills_exactly() {
        // 8 kbit/s = 1 byte per ms; 100 bytes deep.
        let mut b = TokenBucket::new(8_000, 100, 0).unwrap();
        assert!(b.try_consume(0, 100));
        assert!(!b.try_consume(0, 1));
        assert_eq!(b.earliest_conform(50), Some(50_000_000));
        assert!(!b.try_consume(49_999_999, 50));
        assert!(b.try_consume(50_000_000, 50));
        // Caps at depth.
        b.refill(10 * S);
        assert_eq!(b.tokens_bytes(), 100);
        assert_eq!(b.earliest_conform(101), None);
    }

    #[test]
    fn time_going_backwards_adds_nothing() {
        let mut b = TokenBucket::new(8_000, 100, 1_000).unwrap();
        assert!(b.try_consume(1_000, 100));
        assert!(!b.try_consume(0, 1));
        assert!(b.try_consume(1_000 + 1_000_000, 1));
    }

    #[test]
    fn zero_config_is_an_error() {
        assert_eq!(TokenBucket::new(0, 1, 0), Err(QosError::ZeroRate));
        assert_eq!(TokenBucket::new(1, 0, 0), Err(QosError::ZeroBurst));
        assert!(SrTcm::new(1, 0, 0, 0).is_err());
        assert!(TrTcm::new(2, 1, 1, 1, 0).is_err());
        assert!(TrTcm::new(1, 0, 1, 1, 0).is_err());
    }

    /// Over a long run a greedy source through the policer gets exactly rate × time + burst.
    #[test]
    fn no_drift_over_an_hour() {
        // 1.9 Mbit/s, the AQUILA bottleneck.
        let rate = 1_900_000;
        // Deep enough that arrivals on a 1 ms grid never find it full (no tokens discarded).
        let mut m = SingleRateMeter::new(rate, 3000, 0).unwrap();
        let mut green_bytes: u64 = 0;
        // 1500-byte packets offered every ms (12 Mbit/s) for an hour.
        let end = 3_600 * S;
        let mut t = 0;
        while t <= end {
            if m.meter(t, 1500) == Color::Green {
                green_bytes += 1500;
            }
            t += 1_000_000;
        }
        let ideal = (u128::from(rate) * u128::from(end) / u128::from(8 * S)) as u64 + 3000;
        assert!(green_bytes <= ideal, "{green_bytes} > {ideal}");
        assert!(ideal - green_bytes < 2 * 1500, "{green_bytes} vs {ideal}");
    }

    #[test]
    fn srtcm_colours() {
        // CIR 8 kbit/s (1 B/ms), CBS 100, EBS 200.
        let mut m = SrTcm::new(8_000, 100, 200, 0).unwrap();
        assert_eq!(m.meter(0, 100), Color::Green);
        assert_eq!(m.meter(0, 150), Color::Yellow);
        assert_eq!(m.meter(0, 60), Color::Red);
        assert_eq!(m.meter(0, 50), Color::Yellow);
        assert_eq!(m.meter(0, 1), Color::Red);
        // 100 ms fills C; the next 50 ms spill into E.
        assert_eq!(m.meter(150 * 1_000_000, 100), Color::Green);
        assert_eq!(m.meter(150 * 1_000_000, 50), Color::Yellow);
        assert_eq!(m.meter(150 * 1_000_000, 1), Color::Red);
        // Colour-aware: yellow never becomes green, red stays red.
        let mut m = SrTcm::new(8_000, 100, 200, 0).unwrap();
        assert_eq!(m.meter_aware(0, 10, Color::Yellow), Color::Yellow);
        assert_eq!(m.meter_aware(0, 10, Color::Red), Color::Red);
        assert_eq!(m.meter_aware(0, 100, Color::Green), Color::Green);
    }

    #[test]
    fn trtcm_colours() {
        // CIR 1 B/ms CBS 100; PIR 2 B/ms PBS 300.
        let mut m = TrTcm::new(8_000, 100, 16_000, 300, 0).unwrap();
        assert_eq!(m.meter(0, 100), Color::Green); // P 200, C 0
        assert_eq!(m.meter(0, 150), Color::Yellow); // P 50
        assert_eq!(m.meter(0, 60), Color::Red);
        // 50 ms: C +50, P +100 -> C 50, P 150.
        assert_eq!(m.meter(50_000_000, 50), Color::Green); // P 100, C 0
        assert_eq!(m.meter(50_000_000, 100), Color::Yellow); // P 0
        assert_eq!(m.meter(50_000_000, 1), Color::Red);
        let mut m = TrTcm::new(8_000, 100, 16_000, 300, 0).unwrap();
        assert_eq!(m.meter_aware(0, 10, Color::Yellow), Color::Yellow);
        assert_eq!(m.meter_aware(0, 10, Color::Red), Color::Red);
    }

    #[test]
    fn shaper_releases_at_conformance_times() {
        // 1 B/ms, depth 100: three 100-byte packets leave at 0, 100 ms, 200 ms.
        let mut s = Shaper::new(8_000, 100, QueueLimit::Packets(3), 0).unwrap();
        for i in 0..3 {
            assert_eq!(s.enqueue(0, PacketMeta::new(i, 0, 100, 0)), Verdict::Queued);
        }
        let mut small = Shaper::new(8_000, 100, QueueLimit::Packets(1), 0).unwrap();
        assert_eq!(
            small.enqueue(0, PacketMeta::new(0, 0, 10, 0)),
            Verdict::Queued
        );
        assert_eq!(
            small.enqueue(0, PacketMeta::new(1, 0, 10, 0)),
            Verdict::Dropped(DropReason::QueueFull)
        );
        assert_eq!(
            s.enqueue(0, PacketMeta::new(9, 0, 101, 0)),
            Verdict::Dropped(DropReason::TooLarge)
        );
        let mut out = Vec::new();
        while let Some(t) = s.poll_timeout() {
            if let Some(p) = s.poll_transmit(t) {
                out.push((t, p.id));
            } else {
                panic!("not released at its timeout {t}");
            }
        }
        assert_eq!(out, vec![(0, 0), (100_000_000, 1), (200_000_000, 2)]);
        assert_eq!(s.counters().sent, 3);
        assert_eq!(s.counters().dropped, 1);
    }

    #[test]
    fn shaper_with_peak_spaces_a_burst() {
        // Sustained 100 kbit/s with a 10 kB burst (AQUILA Table 3), peak 1 Mbit/s, 1500 B deep.
        let mut s = Shaper::new(100_000, 10_000, QueueLimit::Bytes(100_000), 0)
            .unwrap()
            .with_peak(1_000_000, 1500, 0)
            .unwrap();
        for i in 0..4 {
            s.enqueue(0, PacketMeta::new(i, 0, 1500, 0));
        }
        let mut times = Vec::new();
        while let Some(t) = s.poll_timeout() {
            assert!(s.poll_transmit(t).is_some());
            times.push(t);
        }
        // 1500 B at 1 Mbit/s = 12 ms apart.
        assert_eq!(times, vec![0, 12_000_000, 24_000_000, 36_000_000]);
    }

    proptest! {
        /// A shaper never releases more than rate × elapsed + burst and keeps FIFO order.
        #[test]
        fn shaper_output_conforms(
            sizes in proptest::collection::vec(1u32..1500, 1..60),
            gaps in proptest::collection::vec(0u64..5_000_000, 1..60),
            rate in 10_000u64..10_000_000,
        ) {
            let burst = 3000;
            let mut s = Shaper::new(rate, burst, QueueLimit::Packets(1000), 0).unwrap();
            let mut t = 0;
            let mut out: Vec<(u64, u32, u64)> = Vec::new();
            let mut pending: std::collections::VecDeque<(u64, u32)> =
                sizes.iter().zip(gaps.iter().cycle()).map(|(&sz, &g)| { t += g; (t, sz) }).collect();
            let mut id = 0;
            let mut now = 0;
            loop {
                let next_arrival = pending.front().map(|a| a.0);
                let next_tx = s.poll_timeout();
                let next = match (next_arrival, next_tx) {
                    (None, None) => break,
                    (Some(a), None) => a,
                    (None, Some(x)) => x,
                    (Some(a), Some(x)) => a.min(x),
                };
                now = now.max(next);
                while pending.front().is_some_and(|a| a.0 <= now) {
                    let (_, sz) = pending.pop_front().unwrap();
                    prop_assert_eq!(s.enqueue(now, PacketMeta::new(id, 0, sz, now)), Verdict::Queued);
                    id += 1;
                }
                while let Some(p) = s.poll_transmit(now) {
                    out.push((now, p.size, p.id));
                }
            }
            prop_assert_eq!(out.len(), sizes.len());
            for (i, o) in out.iter().enumerate() {
                prop_assert_eq!(o.2, i as u64);
            }
            // Any window [t_i, t_j] carries at most burst + rate*(t_j - t_i) bytes.
            for i in 0..out.len() {
                let mut bytes = 0u128;
                for o in &out[i..] {
                    bytes += u128::from(o.1);
                    let allowed = u128::from(burst) * 8 * 1_000_000_000
                        + u128::from(o.0 - out[i].0) * u128::from(rate);
                    prop_assert!(bytes * 8 * 1_000_000_000 <= allowed);
                }
            }
        }

        /// Whatever the inputs, meters never panic and trTCM green implies srTCM-like bounds.
        #[test]
        fn meters_never_panic(
            ops in proptest::collection::vec((any::<u64>(), any::<u32>()), 1..50),
            cir in 1u64..u64::MAX, pir_extra in 0u64..1000, bs in 1u64..u64::MAX,
        ) {
            let mut a = SingleRateMeter::new(cir, bs, 0).unwrap();
            let mut b = SrTcm::new(cir, bs, bs, 0).unwrap();
            let mut c = TrTcm::new(cir, bs, cir.saturating_add(pir_extra), bs, 0).unwrap();
            for (t, sz) in ops {
                a.meter(t, sz);
                b.meter(t, sz);
                c.meter(t, sz);
                let _ = a.bucket().earliest_conform(sz);
            }
        }
    }
}
