//! Token-bucket traffic contracts: a shaper that delays a source's emissions until they
//! conform, and a report of how far the source was from conforming.
//!
//! A contract is a dual token bucket, as in ATM VBR and the AQUILA premium services: a peak
//! bucket (rate `peak_rate_bps`, depth `peak_bucket_bytes`, usually one maximum-size packet)
//! and a sustained bucket (rate `sustained_rate_bps`, depth `bucket_bytes`). Both start full.
//! A packet of `s` bytes conforms at `t` if both buckets hold `s` bytes of tokens; sending it
//! takes them. Equivalently, for every run of packets `i..=j`, their bytes are at most
//! `depth + rate * (t_j - t_i)` for each bucket.
//!
//! Token arithmetic is exact: tokens are counted in units of 10^-9 bit, so a bucket of rate
//! `r` bit/s gains exactly `r` units per nanosecond.

use crate::{Emission, Source, TrafficError};
use serde::{Deserialize, Serialize};

/// A token-bucket contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContractParams {
    pub peak_rate_bps: u64,
    /// Depth of the peak bucket: a packet larger than this can never conform (the shaper
    /// sends it when the bucket is full and counts it as oversize).
    pub peak_bucket_bytes: u32,
    pub sustained_rate_bps: u64,
    /// Burst size: depth of the sustained bucket.
    pub bucket_bytes: u32,
}

impl ContractParams {
    pub fn validate(&self) -> Result<(), TrafficError> {
        if self.peak_rate_bps == 0 || self.sustained_rate_bps == 0 {
            return Err(TrafficError::ZeroRate);
        }
        if self.sustained_rate_bps > self.peak_rate_bps {
            return Err(TrafficError::invalid(format!(
                "sustained rate {} bit/s is above the peak rate {} bit/s",
                self.sustained_rate_bps, self.peak_rate_bps
            )));
        }
        if self.bucket_bytes == 0 || self.peak_bucket_bytes == 0 {
            return Err(TrafficError::invalid("bucket sizes must be above 0 bytes"));
        }
        Ok(())
    }
}

/// How a source stood against its contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ContractReport {
    /// Packets that went through the shaper.
    pub packets: u64,
    pub bytes: u64,
    /// Packets that left later than the source emitted them.
    pub delayed: u64,
    pub max_delay_ns: u64,
    pub total_delay_ns: u64,
    /// Packets of the unshaped source that a policer of the same contract would have found
    /// non-conforming (and dropped or marked); a policer takes no tokens for those.
    pub would_violate: u64,
    /// Packets larger than a bucket: sent when the bucket was full, overdrawing it.
    pub oversize: u64,
}

const UNITS_PER_BYTE: i128 = 8 * 1_000_000_000;

/// One token bucket, exact.
#[derive(Debug, Clone, Copy)]
pub struct TokenBucket {
    rate: i128,
    depth: i128,
    tokens: i128,
    at: u64,
}

impl TokenBucket {
    /// A full bucket of `depth_bytes` filling at `rate_bps`.
    pub fn new(rate_bps: u64, depth_bytes: u32) -> Self {
        let depth = i128::from(depth_bytes) * UNITS_PER_BYTE;
        TokenBucket {
            rate: i128::from(rate_bps),
            depth,
            tokens: depth,
            at: 0,
        }
    }

    fn tokens_at(&self, t: u64) -> i128 {
        let dt = i128::from(t.saturating_sub(self.at));
        self.tokens
            .saturating_add(dt.saturating_mul(self.rate))
            .min(self.depth)
    }

    /// Does a packet of `size` bytes conform at `t` (not before the last packet)?
    pub fn conforms(&self, t: u64, size: u32) -> bool {
        self.tokens_at(t) >= i128::from(size) * UNITS_PER_BYTE
    }

    /// The earliest time at or after `t` when `size` bytes (at most a full bucket) conform.
    pub fn earliest(&self, t: u64, size: u32) -> u64 {
        let t = t.max(self.at);
        let need = (i128::from(size) * UNITS_PER_BYTE).min(self.depth);
        let have = self.tokens_at(t);
        if have >= need || self.rate == 0 {
            return t;
        }
        // Tokens at `t` were below the depth, so they grow linearly from `self.at`.
        let short = need - self.tokens;
        let wait = (short + self.rate - 1) / self.rate;
        u64::try_from(i128::from(self.at) + wait)
            .unwrap_or(u64::MAX)
            .max(t)
    }

    /// Takes `size` bytes of tokens at `t` (not before the last take). The bucket may go
    /// below empty for an oversize packet.
    pub fn take(&mut self, t: u64, size: u32) {
        let t = t.max(self.at);
        self.tokens = self.tokens_at(t) - i128::from(size) * UNITS_PER_BYTE;
        self.at = t;
    }

    pub fn depth_bytes(&self) -> u64 {
        u64::try_from(self.depth / UNITS_PER_BYTE).unwrap_or(u64::MAX)
    }
}

/// A pair of buckets: the contract.
#[derive(Debug, Clone, Copy)]
struct Buckets {
    peak: TokenBucket,
    sustained: TokenBucket,
}

impl Buckets {
    fn new(c: &ContractParams) -> Self {
        Buckets {
            peak: TokenBucket::new(c.peak_rate_bps, c.peak_bucket_bytes),
            sustained: TokenBucket::new(c.sustained_rate_bps, c.bucket_bytes),
        }
    }
}

/// Shapes a source to a contract: each emission leaves at the earliest time at or after the
/// source emitted it, and not before the previous one, when both buckets conform (FIFO, no
/// drops). The output therefore always conforms (except oversize packets, which are counted).
pub struct Shaper<S: Source> {
    inner: S,
    contract: ContractParams,
    shaper: Buckets,
    policer: Buckets,
    policer_last: u64,
    last: u64,
    report: ContractReport,
}

impl<S: Source> Shaper<S> {
    pub fn new(inner: S, contract: ContractParams) -> Result<Self, TrafficError> {
        contract.validate()?;
        Ok(Shaper {
            inner,
            contract,
            shaper: Buckets::new(&contract),
            policer: Buckets::new(&contract),
            policer_last: 0,
            last: 0,
            report: ContractReport::default(),
        })
    }

    pub fn contract(&self) -> &ContractParams {
        &self.contract
    }

    pub fn report(&self) -> ContractReport {
        self.report
    }
}

impl<S: Source> Source for Shaper<S> {
    fn next_emission(&mut self) -> Option<Emission> {
        let e = self.inner.next_emission()?;
        // The policer sees the source as it is.
        let pt = e.at_ns.max(self.policer_last);
        self.policer_last = pt;
        let p = &mut self.policer;
        if p.peak.conforms(pt, e.size) && p.sustained.conforms(pt, e.size) {
            p.peak.take(pt, e.size);
            p.sustained.take(pt, e.size);
        } else {
            self.report.would_violate += 1;
        }
        // The shaper delays it until it conforms.
        let s = &mut self.shaper;
        let t = e.at_ns.max(self.last);
        let t = t
            .max(s.peak.earliest(t, e.size))
            .max(s.sustained.earliest(t, e.size));
        if u64::from(e.size) > s.peak.depth_bytes() || u64::from(e.size) > s.sustained.depth_bytes()
        {
            self.report.oversize += 1;
        }
        s.peak.take(t, e.size);
        s.sustained.take(t, e.size);
        self.last = t;
        let delay = t - e.at_ns.min(t);
        let r = &mut self.report;
        r.packets += 1;
        r.bytes += u64::from(e.size);
        if delay > 0 {
            r.delayed += 1;
            r.max_delay_ns = r.max_delay_ns.max(delay);
            r.total_delay_ns = r.total_delay_ns.saturating_add(delay);
        }
        Some(Emission {
            at_ns: t,
            size: e.size,
        })
    }

    fn contract_report(&self) -> Option<ContractReport> {
        Some(self.report)
    }

    fn contract(&self) -> Option<ContractParams> {
        Some(self.contract)
    }
}

/// Measures a sequence of real departures against a contract: for each bucket, the largest
/// excess of any run of packets over `depth + rate * span`. Zero means the departures
/// conform; a shaped flow sent on time shows a few bytes at most (the send-time jitter).
#[derive(Debug, Clone, Copy)]
pub struct ConformanceMeter {
    contract: ContractParams,
    buckets: Buckets,
    last: u64,
    /// Largest token deficit seen (tokens may go below empty here), in token units.
    max_deficit: i128,
}

impl ConformanceMeter {
    pub fn new(contract: ContractParams) -> Self {
        ConformanceMeter {
            contract,
            buckets: Buckets::new(&contract),
            last: 0,
            max_deficit: 0,
        }
    }

    pub fn contract(&self) -> ContractParams {
        self.contract
    }

    /// A packet of `size` bytes that left at `t_ns` (times never go back).
    pub fn on_packet(&mut self, t_ns: u64, size: u32) {
        let t = t_ns.max(self.last);
        self.last = t;
        for bucket in [&mut self.buckets.peak, &mut self.buckets.sustained] {
            bucket.take(t, size);
            self.max_deficit = self.max_deficit.max(-bucket.tokens);
        }
    }

    /// The largest excess in bytes, rounded up.
    pub fn max_excess_bytes(&self) -> u64 {
        let bytes = (self.max_deficit + UNITS_PER_BYTE - 1) / UNITS_PER_BYTE;
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }
}

/// Checks that a sequence of emissions conforms to a contract, by the arrival-curve
/// definition (every run of packets within `depth + rate * span` for both buckets). Returns
/// the index of the first packet that ends a violating run. Quadratic: for tests and short
/// sequences.
pub fn first_violation(emissions: &[Emission], c: &ContractParams) -> Option<usize> {
    let buckets = [
        (c.peak_rate_bps, c.peak_bucket_bytes),
        (c.sustained_rate_bps, c.bucket_bytes),
    ];
    for j in 0..emissions.len() {
        let mut bytes: u128 = 0;
        for i in (0..=j).rev() {
            bytes += u128::from(emissions[i].size);
            let span = u128::from(emissions[j].at_ns.saturating_sub(emissions[i].at_ns));
            for (rate, depth) in buckets {
                let allowed = (u128::from(depth) * 8_000_000_000)
                    .saturating_add(u128::from(rate).saturating_mul(span));
                if bytes * 8_000_000_000 > allowed {
                    return Some(j);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::Replay;
    use proptest::prelude::*;

    fn aquila() -> ContractParams {
        ContractParams {
            peak_rate_bps: 100_000,
            peak_bucket_bytes: 1500,
            sustained_rate_bps: 100_000,
            bucket_bytes: 10_000,
        }
    }

    fn run(input: Vec<Emission>, c: ContractParams) -> (Vec<Emission>, ContractReport) {
        let mut s = Shaper::new(Replay::new(input).unwrap(), c).unwrap();
        let mut out = Vec::new();
        while let Some(e) = s.next_emission() {
            out.push(e);
        }
        (out, s.report())
    }

    #[test]
    fn the_meter_measures_how_far_departures_break_the_contract() {
        let (shaped, _) = run(
            vec![
                Emission {
                    at_ns: 0,
                    size: 1500
                };
                10
            ],
            aquila(),
        );
        let mut meter = ConformanceMeter::new(aquila());
        for e in &shaped {
            meter.on_packet(e.at_ns, e.size);
        }
        assert_eq!(meter.max_excess_bytes(), 0);
        // One packet 1 ms early: the peak bucket (1500 B at 12.5 kB/s) is 12.5 B short.
        meter.on_packet(shaped[9].at_ns + 119_000_000, 1500);
        assert_eq!(meter.max_excess_bytes(), 13);
        // A burst of three packets at once overdraws the peak bucket by two packets.
        let mut burst = ConformanceMeter::new(aquila());
        for _ in 0..3 {
            burst.on_packet(5, 1500);
        }
        assert_eq!(burst.max_excess_bytes(), 3000);
    }

    #[test]
    fn a_burst_is_smoothed_to_the_peak_rate() {
        // Ten 1500-byte packets at once: 100 kb/s is one every 120 ms.
        let input = vec![
            Emission {
                at_ns: 0,
                size: 1500
            };
            10
        ];
        let (out, r) = run(input, aquila());
        let t: Vec<u64> = out.iter().map(|e| e.at_ns).collect();
        assert_eq!(t, (0..10).map(|k| k * 120_000_000).collect::<Vec<_>>());
        assert_eq!(r.delayed, 9);
        assert_eq!(r.max_delay_ns, 1_080_000_000);
        assert_eq!(r.would_violate, 9);
        assert_eq!(r.oversize, 0);
        assert_eq!(first_violation(&out, &aquila()), None);
    }

    #[test]
    fn sustained_bucket_allows_a_burst_then_the_sustained_rate() {
        let c = ContractParams {
            peak_rate_bps: 10_000_000,
            peak_bucket_bytes: 1000,
            sustained_rate_bps: 80_000,
            bucket_bytes: 3000,
        };
        let input = vec![
            Emission {
                at_ns: 0,
                size: 1000
            };
            5
        ];
        let (out, _) = run(input, c);
        let t: Vec<u64> = out.iter().map(|e| e.at_ns).collect();
        // Three at the peak rate (0.8 ms apart), then one per 100 ms of sustained tokens.
        assert_eq!(t, [0, 800_000, 1_600_000, 100_000_000, 200_000_000]);
        assert_eq!(first_violation(&out, &c), None);
    }

    #[test]
    fn conforming_input_passes_untouched() {
        let input: Vec<Emission> = (0..20)
            .map(|k| Emission {
                at_ns: k * 200_000_000,
                size: 1500,
            })
            .collect();
        let (out, r) = run(input.clone(), aquila());
        assert_eq!(out, input);
        assert_eq!((r.delayed, r.would_violate, r.packets), (0, 0, 20));
    }

    #[test]
    fn oversize_packets_are_counted_not_stuck() {
        let input = vec![
            Emission {
                at_ns: 0,
                size: 4000
            };
            3
        ];
        let (out, r) = run(input, aquila());
        assert_eq!(out.len(), 3);
        assert_eq!(r.oversize, 3);
        assert!(out.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
    }

    #[test]
    fn bad_contracts_are_rejected() {
        let mut c = aquila();
        c.sustained_rate_bps = 200_000;
        assert!(Shaper::new(Replay::new(vec![]).unwrap(), c).is_err());
        let mut c = aquila();
        c.peak_rate_bps = 0;
        assert!(c.validate().is_err());
        let mut c = aquila();
        c.bucket_bytes = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn extreme_rates_and_times_do_not_overflow() {
        let c = ContractParams {
            peak_rate_bps: u64::MAX,
            peak_bucket_bytes: u32::MAX,
            sustained_rate_bps: u64::MAX,
            bucket_bytes: 1,
        };
        let input = vec![
            Emission {
                at_ns: 0,
                size: u32::MAX,
            },
            Emission {
                at_ns: u64::MAX,
                size: u32::MAX,
            },
            Emission {
                at_ns: u64::MAX,
                size: 1,
            },
        ];
        let (out, _) = run(input.clone(), c);
        assert_eq!(out.len(), 3);
        let _ = first_violation(&out, &c);
        let slow = ContractParams {
            peak_rate_bps: 1,
            peak_bucket_bytes: 1,
            sustained_rate_bps: 1,
            bucket_bytes: 1,
        };
        let (out, _) = run(input, slow);
        assert!(out.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
    }

    #[test]
    fn report_serialises() {
        let j = serde_json::to_string(&ContractReport::default()).unwrap();
        assert!(j.contains("\"would_violate\":0"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn shaped_output_always_conforms(
            gaps in proptest::collection::vec((0u64..50_000_000, 1u32..1500), 1..120),
            peak in 10_000u64..100_000_000, ratio in 1u64..20,
            peak_depth in 1500u32..4000, depth in 1500u32..50_000,
        ) {
            let c = ContractParams {
                peak_rate_bps: peak,
                peak_bucket_bytes: peak_depth,
                sustained_rate_bps: (peak / ratio).max(1),
                bucket_bytes: depth,
            };
            let mut t = 0u64;
            let input: Vec<Emission> = gaps.iter().map(|&(g, size)| {
                t += g;
                Emission { at_ns: t, size }
            }).collect();
            let (out, r) = run(input.clone(), c);
            prop_assert_eq!(out.len(), input.len());
            prop_assert_eq!(first_violation(&out, &c), None);
            prop_assert!(out.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
            for (o, i) in out.iter().zip(&input) {
                prop_assert!(o.at_ns >= i.at_ns);
                prop_assert_eq!(o.size, i.size);
            }
            // The policer's verdict agrees with the arrival-curve check of the input.
            prop_assert_eq!(r.would_violate == 0, first_violation(&input, &c).is_none());
            prop_assert_eq!(r.delayed == 0, r.would_violate == 0);
        }
    }
}
