//! Packet sources: constant rate, bursts, on/off (with VoIP voice activity), Poisson, generic
//! gap/size, frame-based video, TCP-like message bursts and trace replay.
//!
//! Every source produces emissions in non-decreasing time, as offsets from the flow's start.
//! Deterministic schedules are computed from the packet index (no drift); random ones keep
//! their clock in `f64` nanoseconds (exact to the nanosecond for 104 days) and round each
//! emission.

use crate::dist::{rng, to_u64, Dist, Sampler, MAX_PACKET_SIZE};
use crate::{Emission, PacedSchedule, Source, TrafficError};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

fn bad(msg: impl Into<String>) -> TrafficError {
    TrafficError::invalid(msg)
}

/// Streams of a model's generator.
const GAPS: u64 = 0;
const SIZES: u64 = 1;
const PERIODS: u64 = 2;

/// Constant bit rate: packet `k` of `size` bytes at `k * size * 8 / rate` exactly.
#[derive(Debug, Clone)]
pub struct ConstantRate {
    schedule: PacedSchedule,
    size: u32,
    k: u64,
}

impl ConstantRate {
    pub fn new(rate_bps: u64, size: u32) -> Result<Self, TrafficError> {
        Ok(ConstantRate {
            schedule: PacedSchedule::new(0, rate_bps, size)?,
            size,
            k: 0,
        })
    }
}

impl Source for ConstantRate {
    fn next_emission(&mut self) -> Option<Emission> {
        let at_ns = self.schedule.deadline(self.k);
        if at_ns == u64::MAX {
            return None;
        }
        self.k += 1;
        Some(Emission {
            at_ns,
            size: self.size,
        })
    }
}

/// Bursts of `n` packets every `every_ns`: back to back (all at the burst's start) or, with a
/// peak rate, paced at that rate from the burst's start. A burst that would overlap the next
/// delays it (emissions never go back in time).
pub struct Bursts {
    n: u32,
    every_ns: u64,
    peak_bps: Option<u64>,
    size: Sampler,
    rng: ChaCha8Rng,
    burst: u64,
    index: u32,
    bits_in_burst: u128,
    last: u64,
}

impl Bursts {
    pub fn new(
        n: u32,
        every_ns: u64,
        size: &Dist,
        peak_bps: Option<u64>,
        seed: u64,
    ) -> Result<Self, TrafficError> {
        if n == 0 {
            return Err(bad("a burst must have at least 1 packet"));
        }
        if every_ns == 0 {
            return Err(bad("the burst period must be above 0"));
        }
        if peak_bps == Some(0) {
            return Err(TrafficError::ZeroRate);
        }
        Ok(Bursts {
            n,
            every_ns,
            peak_bps,
            size: Sampler::new(size)?,
            rng: rng(seed, SIZES),
            burst: 0,
            index: 0,
            bits_in_burst: 0,
            last: 0,
        })
    }
}

impl Source for Bursts {
    fn next_emission(&mut self) -> Option<Emission> {
        if self.index == self.n {
            self.index = 0;
            self.bits_in_burst = 0;
            self.burst = self.burst.checked_add(1)?;
        }
        let start = self.burst.checked_mul(self.every_ns)?;
        let offset = match self.peak_bps {
            Some(peak) => self.bits_in_burst * 1_000_000_000 / u128::from(peak),
            None => 0,
        };
        let at = u64::try_from(u128::from(start) + offset).ok()?;
        let at_ns = at.max(self.last);
        let size = self.size.sample_size(&mut self.rng, MAX_PACKET_SIZE);
        self.bits_in_burst += u128::from(size) * 8;
        self.index += 1;
        self.last = at_ns;
        Some(Emission { at_ns, size })
    }
}

/// On/off: constant rate `rate_bps` in packets of `size` bytes while on, silent while off;
/// period lengths drawn from `on` and `off` (constant or exponential, or any distribution).
/// Each on period starts with a packet and sends one every `size * 8 / rate`.
///
/// [`OnOff::voip_brady`] is Brady's model of a conversation with voice activity detection:
/// exponential talk spurts of mean 1.0 s and silences of mean 1.35 s.
pub struct OnOff {
    on: Sampler,
    off: Sampler,
    schedule: PacedSchedule,
    size: u32,
    rng: ChaCha8Rng,
    period_start: f64,
    period_len: u64,
    k: u64,
}

/// Consecutive empty on periods after which an on/off source gives up (only a degenerate
/// distribution of on periods gets there).
const MAX_EMPTY_PERIODS: u32 = 1_000_000;

impl OnOff {
    pub fn new(
        on: &Dist,
        off: &Dist,
        rate_bps: u64,
        size: u32,
        seed: u64,
    ) -> Result<Self, TrafficError> {
        if on.mean() == Some(0.0) {
            return Err(bad("on periods must be longer than 0"));
        }
        let on = Sampler::new(on)?;
        let off = Sampler::new(off)?;
        let mut rng = rng(seed, PERIODS);
        let period_len = on.sample_ns(&mut rng);
        Ok(OnOff {
            on,
            off,
            schedule: PacedSchedule::new(0, rate_bps, size)?,
            size,
            rng,
            period_start: 0.0,
            period_len,
            k: 0,
        })
    }

    /// 64 kb/s G.711 voice in 160-byte packets every 20 ms, with voice activity: exponential
    /// talk spurts of mean 1.0 s and silences of mean 1.35 s (Brady). Mean rate
    /// 64 kb/s * 1.0 / 2.35 ≈ 27.2 kb/s (slightly more, as each spurt starts with a packet).
    pub fn voip_brady(seed: u64) -> Result<Self, TrafficError> {
        OnOff::new(
            &Dist::Exp { mean: 1.0e9 },
            &Dist::Exp { mean: 1.35e9 },
            64_000,
            160,
            seed,
        )
    }
}

impl Source for OnOff {
    fn next_emission(&mut self) -> Option<Emission> {
        for _ in 0..MAX_EMPTY_PERIODS {
            let offset = self.schedule.deadline(self.k);
            if offset < self.period_len {
                self.k += 1;
                let at = self.period_start + offset as f64;
                return Some(Emission {
                    at_ns: to_u64(at),
                    size: self.size,
                });
            }
            let off = self.off.sample(&mut self.rng);
            self.period_start += self.period_len as f64 + off;
            if !self.period_start.is_finite() || self.period_start >= u64::MAX as f64 {
                return None;
            }
            self.period_len = self.on.sample_ns(&mut self.rng);
            self.k = 0;
        }
        None
    }
}

/// Packets separated by gaps from one distribution, with sizes from another. The first packet
/// leaves one gap after the start. A Poisson source is this with exponential gaps.
pub struct GapSource {
    gap: Sampler,
    size: Sampler,
    gap_rng: ChaCha8Rng,
    size_rng: ChaCha8Rng,
    t: f64,
}

impl GapSource {
    pub fn new(gap: &Dist, size: &Dist, seed: u64) -> Result<Self, TrafficError> {
        Ok(GapSource {
            gap: Sampler::new(gap)?,
            size: Sampler::new(size)?,
            gap_rng: rng(seed, GAPS),
            size_rng: rng(seed, SIZES),
            t: 0.0,
        })
    }

    /// Poisson arrivals at `pps` packets per second (exponential gaps of mean `1/pps`).
    pub fn poisson(pps: f64, size: &Dist, seed: u64) -> Result<Self, TrafficError> {
        if !pps.is_finite() || pps <= 0.0 {
            return Err(bad(format!(
                "packet rate must be above 0 packets/s (got {pps})"
            )));
        }
        GapSource::new(&Dist::Exp { mean: 1e9 / pps }, size, seed)
    }
}

impl Source for GapSource {
    fn next_emission(&mut self) -> Option<Emission> {
        let gap = self.gap.sample(&mut self.gap_rng);
        self.t += gap;
        if !self.t.is_finite() || self.t >= u64::MAX as f64 {
            return None;
        }
        Some(Emission {
            at_ns: to_u64(self.t),
            size: self.size.sample_size(&mut self.size_rng, MAX_PACKET_SIZE),
        })
    }
}

/// How a video source chooses frame sizes (bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "frames", rename_all = "snake_case")]
pub enum FrameSizes {
    /// Independent sizes from one distribution.
    Dist { size: Dist },
    /// A group of pictures repeated: `pattern` of `I`, `P` and `B`, each frame type with its
    /// own size distribution, e.g. `IBBPBBPBBPBB`.
    Gop {
        pattern: String,
        i: Dist,
        p: Dist,
        b: Dist,
    },
    /// Scene motion: a stationary AR(1) process of mean `mean`, standard deviation `sd` and
    /// frame-to-frame correlation `rho` (close to 1: slowly varying), clamped to
    /// `[min, max]`.
    Scene {
        mean: f64,
        sd: f64,
        rho: f64,
        min: f64,
        max: f64,
    },
}

impl FrameSizes {
    pub fn validate(&self) -> Result<(), TrafficError> {
        match self {
            FrameSizes::Dist { size } => size.validate(),
            FrameSizes::Gop { pattern, i, p, b } => {
                if pattern.is_empty() {
                    return Err(bad("the GOP pattern is empty"));
                }
                if let Some(c) = pattern
                    .chars()
                    .find(|c| !matches!(c.to_ascii_uppercase(), 'I' | 'P' | 'B'))
                {
                    return Err(bad(format!(
                        "GOP pattern '{pattern}' has '{c}': only I, P and B are frame types"
                    )));
                }
                i.validate()?;
                p.validate()?;
                b.validate()
            }
            FrameSizes::Scene {
                mean,
                sd,
                rho,
                min,
                max,
            } => {
                let all = [mean, sd, rho, min, max];
                if all.iter().any(|x| !x.is_finite()) {
                    return Err(bad("scene parameters must be finite"));
                }
                if *mean <= 0.0 || *sd < 0.0 || *min < 0.0 || min > max {
                    return Err(bad(
                        "scene motion needs mean > 0, sd >= 0 and 0 <= min <= max",
                    ));
                }
                if !(0.0..1.0).contains(rho) {
                    return Err(bad(format!(
                        "scene correlation must be in [0, 1), got {rho}"
                    )));
                }
                Ok(())
            }
        }
    }

    /// Mean frame size in bytes, where known (a scene's is its `mean`, before clamping).
    pub fn mean(&self) -> Option<f64> {
        match self {
            FrameSizes::Dist { size } => size.mean(),
            FrameSizes::Gop { pattern, i, p, b } => {
                let mut sum = 0.0;
                for c in pattern.chars() {
                    sum += match c.to_ascii_uppercase() {
                        'I' => i.mean()?,
                        'P' => p.mean()?,
                        _ => b.mean()?,
                    };
                }
                Some(sum / pattern.len().max(1) as f64)
            }
            FrameSizes::Scene { mean, .. } => Some(*mean),
        }
    }

    /// Replaces CDF file references in the distributions.
    pub fn resolve(
        &self,
        files: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<FrameSizes, TrafficError> {
        Ok(match self {
            FrameSizes::Dist { size } => FrameSizes::Dist {
                size: size.resolve(files)?,
            },
            FrameSizes::Gop { pattern, i, p, b } => FrameSizes::Gop {
                pattern: pattern.clone(),
                i: i.resolve(files)?,
                p: p.resolve(files)?,
                b: b.resolve(files)?,
            },
            other => other.clone(),
        })
    }
}

/// Video configuration: `fps` frames per second, frame sizes, frames split into packets of at
/// most `mtu` bytes (a last fragment is raised to at least `min_packet`), sent back to back at
/// the frame time or spread evenly over the frame interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VideoConfig {
    pub fps: f64,
    pub frames: FrameSizes,
    pub mtu: u32,
    #[serde(default = "one")]
    pub min_packet: u32,
    #[serde(default)]
    pub spread: bool,
}

fn one() -> u32 {
    1
}

enum FrameGen {
    Dist(Sampler),
    Gop {
        pattern: Vec<u8>,
        i: Sampler,
        p: Sampler,
        b: Sampler,
    },
    Scene {
        mean: f64,
        sd: f64,
        rho: f64,
        min: f64,
        max: f64,
        x: f64,
    },
}

/// Frame-based video.
pub struct Video {
    config: VideoConfig,
    gen: FrameGen,
    rng: ChaCha8Rng,
    frame: u64,
    frame_start: u64,
    frame_bytes: u64,
    packets: u64,
    sent: u64,
}

const MAX_EMPTY_FRAMES: u32 = 1_000_000;

impl Video {
    pub fn new(config: &VideoConfig, seed: u64) -> Result<Self, TrafficError> {
        if !config.fps.is_finite() || config.fps <= 0.0 {
            return Err(bad(format!(
                "frame rate must be above 0 frames/s (got {})",
                config.fps
            )));
        }
        if config.mtu == 0 {
            return Err(bad("the largest packet (mtu) must be above 0 bytes"));
        }
        if config.min_packet > config.mtu {
            return Err(bad("the smallest packet is above the largest"));
        }
        config.frames.validate()?;
        let mut rng = rng(seed, SIZES);
        let gen = match &config.frames {
            FrameSizes::Dist { size } => FrameGen::Dist(Sampler::new(size)?),
            FrameSizes::Gop { pattern, i, p, b } => FrameGen::Gop {
                pattern: pattern.to_ascii_uppercase().into_bytes(),
                i: Sampler::new(i)?,
                p: Sampler::new(p)?,
                b: Sampler::new(b)?,
            },
            FrameSizes::Scene {
                mean,
                sd,
                rho,
                min,
                max,
            } => FrameGen::Scene {
                mean: *mean,
                sd: *sd,
                rho: *rho,
                min: *min,
                max: *max,
                // Start in the stationary law.
                x: mean + sd * rng.sample::<f64, _>(StandardNormal),
            },
        };
        Ok(Video {
            config: config.clone(),
            gen,
            rng,
            frame: 0,
            frame_start: 0,
            frame_bytes: 0,
            packets: 0,
            sent: 0,
        })
    }

    fn frame_size(&mut self, frame: u64) -> u64 {
        let x = match &mut self.gen {
            FrameGen::Dist(s) => s.sample(&mut self.rng),
            FrameGen::Gop { pattern, i, p, b } => {
                let len = pattern.len().max(1) as u64;
                let kind = pattern.get((frame % len) as usize).copied().unwrap_or(b'I');
                match kind {
                    b'I' => i.sample(&mut self.rng),
                    b'P' => p.sample(&mut self.rng),
                    _ => b.sample(&mut self.rng),
                }
            }
            FrameGen::Scene {
                mean,
                sd,
                rho,
                min,
                max,
                x,
            } => {
                let out = x.clamp(*min, *max);
                let innovation =
                    *sd * (1.0 - *rho * *rho).sqrt() * self.rng.sample::<f64, _>(StandardNormal);
                *x = *mean + *rho * (*x - *mean) + innovation;
                out
            }
        };
        to_u64(x)
    }

    fn frame_time(&self, frame: u64) -> u64 {
        to_u64(frame as f64 * 1e9 / self.config.fps)
    }
}

impl Source for Video {
    fn next_emission(&mut self) -> Option<Emission> {
        let mut empty = 0;
        while self.sent == self.packets {
            if empty == MAX_EMPTY_FRAMES {
                return None;
            }
            empty += 1;
            let frame = self.frame;
            self.frame = self.frame.checked_add(1)?;
            self.frame_start = self.frame_time(frame);
            if self.frame_start == u64::MAX {
                return None;
            }
            self.frame_bytes = self.frame_size(frame);
            self.packets = self.frame_bytes.div_ceil(u64::from(self.config.mtu));
            self.sent = 0;
        }
        let mtu = u64::from(self.config.mtu);
        let j = self.sent;
        let size = if j + 1 < self.packets {
            mtu
        } else {
            self.frame_bytes - j * mtu
        };
        let size = size.max(u64::from(self.config.min_packet)).min(mtu) as u32;
        let at_ns = if self.config.spread && self.packets > 1 {
            let interval = 1e9 / self.config.fps;
            self.frame_start
                .saturating_add(to_u64(j as f64 * interval / self.packets as f64))
        } else {
            self.frame_start
        };
        self.sent += 1;
        Some(Emission { at_ns, size })
    }
}

/// TCP-like message bursts (e-mail, web objects): messages arrive with gaps from `gap`, with
/// sizes from `message`; each is cut into segments of at most `mss` bytes sent in slow-start
/// rounds one `rtt_ns` apart, the first round `initial_window` segments back to back and each
/// round after twice the one before. A message that arrives while the previous one is still
/// being sent waits for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageConfig {
    pub gap: Dist,
    pub message: Dist,
    pub mss: u32,
    pub initial_window: u32,
    pub rtt_ns: u64,
}

pub struct MessageBursts {
    config: MessageConfig,
    gap: Sampler,
    message: Sampler,
    gap_rng: ChaCha8Rng,
    size_rng: ChaCha8Rng,
    arrival: f64,
    bytes_left: u64,
    round_start: u64,
    round_left: u64,
    window: u64,
    last: u64,
}

impl MessageBursts {
    pub fn new(config: &MessageConfig, seed: u64) -> Result<Self, TrafficError> {
        if config.mss == 0 {
            return Err(bad("the segment size (mss) must be above 0 bytes"));
        }
        if config.initial_window == 0 {
            return Err(bad("the initial window must be at least 1 segment"));
        }
        Ok(MessageBursts {
            gap: Sampler::new(&config.gap)?,
            message: Sampler::new(&config.message)?,
            config: config.clone(),
            gap_rng: rng(seed, GAPS),
            size_rng: rng(seed, SIZES),
            arrival: 0.0,
            bytes_left: 0,
            round_start: 0,
            round_left: 0,
            window: 0,
            last: 0,
        })
    }
}

impl Source for MessageBursts {
    fn next_emission(&mut self) -> Option<Emission> {
        let mut tries = 0;
        while self.bytes_left == 0 {
            tries += 1;
            if tries > MAX_EMPTY_FRAMES {
                return None;
            }
            self.arrival += self.gap.sample(&mut self.gap_rng);
            if !self.arrival.is_finite() || self.arrival >= u64::MAX as f64 {
                return None;
            }
            self.bytes_left = to_u64(self.message.sample(&mut self.size_rng));
            self.round_start = to_u64(self.arrival).max(self.last);
            self.window = u64::from(self.config.initial_window);
            self.round_left = self.window;
        }
        if self.round_left == 0 {
            self.round_start = self.round_start.saturating_add(self.config.rtt_ns);
            self.window = self.window.saturating_mul(2);
            self.round_left = self.window;
        }
        let size = self.bytes_left.min(u64::from(self.config.mss));
        self.bytes_left -= size;
        self.round_left -= 1;
        self.last = self.round_start;
        Some(Emission {
            at_ns: self.round_start,
            size: size as u32,
        })
    }
}

/// A greedy source: packets of `size` bytes, all due at once (bulk transfer of unlimited
/// data); only a contract or the path paces it.
#[derive(Debug, Clone)]
pub struct Greedy {
    size: u32,
}

impl Greedy {
    pub fn new(size: u32) -> Result<Self, TrafficError> {
        if size == 0 {
            return Err(TrafficError::ZeroSize);
        }
        Ok(Greedy { size })
    }
}

impl Source for Greedy {
    fn next_emission(&mut self) -> Option<Emission> {
        Some(Emission {
            at_ns: 0,
            size: self.size,
        })
    }
}

/// Replays a list of emissions (a parsed trace).
#[derive(Debug, Clone)]
pub struct Replay {
    emissions: std::sync::Arc<[Emission]>,
    next: usize,
}

impl Replay {
    /// The emissions must be in non-decreasing time (as the trace parsers guarantee).
    pub fn new(emissions: Vec<Emission>) -> Result<Self, TrafficError> {
        if let Some(i) = emissions.windows(2).position(|w| w[1].at_ns < w[0].at_ns) {
            return Err(bad(format!("trace record {} goes back in time", i + 2)));
        }
        Ok(Replay {
            emissions: emissions.into(),
            next: 0,
        })
    }
}

impl Source for Replay {
    fn next_emission(&mut self) -> Option<Emission> {
        let e = self.emissions.get(self.next).copied();
        self.next += 1;
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn take(s: &mut dyn Source, n: usize) -> Vec<Emission> {
        (0..n).map_while(|_| s.next_emission()).collect()
    }

    fn until(s: &mut dyn Source, end_ns: u64) -> Vec<Emission> {
        let mut out = Vec::new();
        while let Some(e) = s.next_emission() {
            if e.at_ns >= end_ns {
                break;
            }
            out.push(e);
        }
        out
    }

    #[test]
    fn constant_rate_is_exact() {
        let mut s = ConstantRate::new(64_000, 1119).unwrap();
        let e = take(&mut s, 3);
        assert_eq!(e[0].at_ns, 0);
        assert_eq!(e[1].at_ns, 139_875_000);
        assert_eq!(e[2].at_ns, 279_750_000);
        assert!(ConstantRate::new(0, 10).is_err());
    }

    #[test]
    fn bursts_back_to_back_and_at_peak_rate() {
        let mut s = Bursts::new(3, 100_000_000, &Dist::Const { value: 1000.0 }, None, 1).unwrap();
        let t: Vec<u64> = take(&mut s, 6).iter().map(|e| e.at_ns).collect();
        assert_eq!(t, [0, 0, 0, 100_000_000, 100_000_000, 100_000_000]);
        let mut s = Bursts::new(
            2,
            100_000_000,
            &Dist::Const { value: 1000.0 },
            Some(8_000_000),
            1,
        )
        .unwrap();
        let t: Vec<u64> = take(&mut s, 4).iter().map(|e| e.at_ns).collect();
        assert_eq!(t, [0, 1_000_000, 100_000_000, 101_000_000]);
    }

    #[test]
    fn poisson_gaps_have_exponential_moments() {
        let mut s = GapSource::poisson(1000.0, &Dist::Const { value: 100.0 }, 7).unwrap();
        let e = take(&mut s, 100_000);
        let gaps: Vec<f64> = std::iter::once(e[0].at_ns as f64)
            .chain(e.windows(2).map(|w| (w[1].at_ns - w[0].at_ns) as f64))
            .collect();
        let n = gaps.len() as f64;
        let mean = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (n - 1.0);
        assert!((mean - 1e6).abs() < 0.015e6, "{mean}");
        assert!((var - 1e12).abs() < 0.04e12, "{var}");
        // Counts per 10 ms window are Poisson(10): variance equals mean.
        let windows = e.last().unwrap().at_ns / 10_000_000;
        let mut counts = vec![0f64; windows as usize];
        for x in &e {
            if let Some(c) = counts.get_mut((x.at_ns / 10_000_000) as usize) {
                *c += 1.0;
            }
        }
        let m = counts.iter().sum::<f64>() / counts.len() as f64;
        let v = counts.iter().map(|c| (c - m).powi(2)).sum::<f64>() / (counts.len() - 1) as f64;
        assert!((m - 10.0).abs() < 0.2 && (v - 10.0).abs() < 0.5, "{m} {v}");
    }

    #[test]
    fn on_off_duty_cycle() {
        // Brady VoIP: 1.0 s on, 1.35 s off: 42.6% of the 50 packets/s slots.
        let mut s = OnOff::voip_brady(3).unwrap();
        let hour = 3_600_000_000_000;
        let e = until(&mut s, hour);
        let rate = e.len() as f64 / 3600.0;
        // Each spurt also starts with a packet: E[ceil(L/T)] = 1/(1-exp(-T/mean)) per spurt.
        let per_spurt = 1.0 / (1.0 - (-0.02f64).exp());
        let want = per_spurt / 2.35;
        assert!((rate - want).abs() / want < 0.03, "{rate} vs {want}");
        assert!(e.iter().all(|x| x.size == 160));
        // Fixed periods: exactly 5 packets per 100 ms on, then 100 ms off.
        let mut s = OnOff::new(
            &Dist::Const { value: 1e8 },
            &Dist::Const { value: 1e8 },
            64_000,
            160,
            1,
        )
        .unwrap();
        let t: Vec<u64> = take(&mut s, 7).iter().map(|e| e.at_ns).collect();
        assert_eq!(
            t,
            [
                0,
                20_000_000,
                40_000_000,
                60_000_000,
                80_000_000,
                200_000_000,
                220_000_000
            ]
        );
        assert!(OnOff::new(
            &Dist::Const { value: 0.0 },
            &Dist::Const { value: 0.0 },
            1,
            1,
            1
        )
        .is_err());
    }

    #[test]
    fn video_splits_frames_at_the_mtu() {
        let config = VideoConfig {
            fps: 25.0,
            frames: FrameSizes::Dist {
                size: Dist::Const { value: 3000.0 },
            },
            mtu: 1468,
            min_packet: 72,
            spread: false,
        };
        let mut s = Video::new(&config, 1).unwrap();
        let e = take(&mut s, 6);
        let sizes: Vec<u32> = e.iter().map(|x| x.size).collect();
        assert_eq!(sizes, [1468, 1468, 72, 1468, 1468, 72]);
        let t: Vec<u64> = e.iter().map(|x| x.at_ns).collect();
        assert_eq!(t, [0, 0, 0, 40_000_000, 40_000_000, 40_000_000]);
        let mut s = Video::new(
            &VideoConfig {
                spread: true,
                ..config
            },
            1,
        )
        .unwrap();
        let t: Vec<u64> = take(&mut s, 4).iter().map(|x| x.at_ns).collect();
        assert_eq!(t, [0, 13_333_333, 26_666_667, 40_000_000]);
    }

    #[test]
    fn gop_pattern_cycles() {
        let config = VideoConfig {
            fps: 10.0,
            frames: FrameSizes::Gop {
                pattern: "IBBP".into(),
                i: Dist::Const { value: 1000.0 },
                p: Dist::Const { value: 500.0 },
                b: Dist::Const { value: 200.0 },
            },
            mtu: 1500,
            min_packet: 1,
            spread: false,
        };
        let mut s = Video::new(&config, 1).unwrap();
        let sizes: Vec<u32> = take(&mut s, 8).iter().map(|x| x.size).collect();
        assert_eq!(sizes, [1000, 200, 200, 500, 1000, 200, 200, 500]);
        assert_eq!(config.frames.mean(), Some(475.0));
        let bad = FrameSizes::Gop {
            pattern: "IXP".into(),
            i: Dist::Const { value: 1.0 },
            p: Dist::Const { value: 1.0 },
            b: Dist::Const { value: 1.0 },
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn message_bursts_follow_slow_start() {
        let config = MessageConfig {
            gap: Dist::Const { value: 1e9 },
            message: Dist::Const { value: 10_000.0 },
            mss: 1460,
            initial_window: 2,
            rtt_ns: 50_000_000,
        };
        let mut s = MessageBursts::new(&config, 1).unwrap();
        let e = take(&mut s, 8);
        let t: Vec<u64> = e.iter().map(|x| x.at_ns).collect();
        let base = 1_000_000_000;
        assert_eq!(
            t,
            [
                base,
                base,
                base + 50_000_000,
                base + 50_000_000,
                base + 50_000_000,
                base + 50_000_000,
                base + 100_000_000,
                2 * base
            ]
        );
        let total: u32 = e[..7].iter().map(|x| x.size).sum();
        assert_eq!(total, 10_000);
    }

    #[test]
    fn replay_rejects_time_going_back() {
        let e = |at_ns| Emission { at_ns, size: 1 };
        assert!(Replay::new(vec![e(1), e(0)]).is_err());
        let mut r = Replay::new(vec![e(0), e(5)]).unwrap();
        assert_eq!(take(&mut r, 5).len(), 2);
    }

    #[test]
    fn seeds_reproduce_every_random_model() {
        let make = |seed: u64| -> Vec<Box<dyn Source>> {
            vec![
                Box::new(GapSource::poisson(100.0, &Dist::Exp { mean: 500.0 }, seed).unwrap()),
                Box::new(OnOff::voip_brady(seed).unwrap()),
                Box::new(
                    Bursts::new(4, 1_000_000, &Dist::Exp { mean: 900.0 }, None, seed).unwrap(),
                ),
                Box::new(
                    Video::new(
                        &VideoConfig {
                            fps: 25.0,
                            frames: FrameSizes::Scene {
                                mean: 5000.0,
                                sd: 1500.0,
                                rho: 0.9,
                                min: 72.0,
                                max: 20000.0,
                            },
                            mtu: 1468,
                            min_packet: 72,
                            spread: true,
                        },
                        seed,
                    )
                    .unwrap(),
                ),
                Box::new(
                    MessageBursts::new(
                        &MessageConfig {
                            gap: Dist::Exp { mean: 1e8 },
                            message: Dist::LogNormal { mean: 1e4, sd: 5e3 },
                            mss: 1460,
                            initial_window: 4,
                            rtt_ns: 1_000_000,
                        },
                        seed,
                    )
                    .unwrap(),
                ),
            ]
        };
        for (mut a, (mut b, mut c)) in make(5).into_iter().zip(make(5).into_iter().zip(make(6))) {
            let x = take(&mut a, 300);
            assert_eq!(x, take(&mut b, 300));
            assert_ne!(x, take(&mut c, 300));
        }
    }

    fn small_dist() -> impl Strategy<Value = Dist> {
        prop_oneof![
            (0.0f64..5e6).prop_map(|value| Dist::Const { value }),
            (1.0f64..5e6).prop_map(|mean| Dist::Exp { mean }),
            (0.0f64..1e6, 0.0f64..1e6).prop_map(|(a, b)| Dist::Uniform {
                low: a.min(b),
                high: a.max(b)
            }),
            (1.0f64..1e6, 0.0f64..1e6).prop_map(|(mean, sd)| Dist::Normal { mean, sd }),
            (0.5f64..4.0, 1.0f64..1e5).prop_map(|(shape, scale)| Dist::Pareto { shape, scale }),
            (1.0f64..1e6, 0.0f64..1e6).prop_map(|(mean, sd)| Dist::LogNormal { mean, sd }),
        ]
    }

    fn nondecreasing(s: &mut dyn Source, n: usize) -> bool {
        let e = take(s, n);
        e.windows(2).all(|w| w[0].at_ns <= w[1].at_ns)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_model_emits_in_time_order(
            gap in small_dist(), size in small_dist(), seed in any::<u64>(),
            rate in 1u64..10_000_000_000, n in 1u32..50, every in 1u64..1_000_000_000,
            fps in 0.5f64..240.0, mtu in 1u32..9000, spread in any::<bool>(),
            peak in proptest::option::of(1u64..10_000_000_000), psize in 1u32..65_000,
        ) {
            let sources: Vec<Box<dyn Source>> = vec![
                Box::new(ConstantRate::new(rate, psize).unwrap()),
                Box::new(Bursts::new(n, every, &size, peak, seed).unwrap()),
                Box::new(GapSource::new(&gap, &size, seed).unwrap()),
                Box::new(OnOff::new(&Dist::Exp { mean: 1e8 }, &gap, rate, psize, seed).unwrap()),
                Box::new(Video::new(&VideoConfig {
                    fps, frames: FrameSizes::Dist { size: size.clone() }, mtu, min_packet: 1, spread,
                }, seed).unwrap()),
                Box::new(MessageBursts::new(&MessageConfig {
                    gap: gap.clone(), message: size.clone(), mss: mtu, initial_window: n,
                    rtt_ns: every,
                }, seed).unwrap()),
            ];
            for mut s in sources {
                prop_assert!(nondecreasing(&mut s, 500));
            }
        }
    }
}
