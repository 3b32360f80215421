//! Traffic specs as typed on the command line (`--traffic KIND[:OPTIONS]`) and carried as
//! JSON in the control protocol.
//!
//! ```text
//! constant                                   the test's rate and size (see with_defaults)
//! constant:rate=2M,size=500
//! poisson:pps=1000,size=exp:500
//! onoff:on=exp:1s,off=exp:1.35s,rate=64k,size=160
//! burst:n=10,every=100ms[,size=1000][,peak=10M]
//! generic:gap=uniform:1ms..3ms,size=normal:800,200
//! video:fps=25,size=normal:4000,1500,mtu=1468[,spread=true][,min=72]
//! video:fps=30,gop=IBBPBBPBBPBB,i=20k,p=8k,b=3k
//! tcp:gap=exp:2s,msg=lognormal:10k,5k[,mss=1460][,iw=4][,rtt=50ms]
//! trace:FILE                                 text "time size" records or a pcap
//! preset:NAME
//! rr:request=64,response=1k[,think=exp:10ms]  request/response transactions (netperf RR)
//! crr:request=64,response=1k[,think=0]        a new connection per transaction (netperf CRR)
//! ... +contract:pr=100k,sr=100k,bs=10k[,pbs=1500]
//! ```
//!
//! Options are `key=value` separated by commas; a piece without `=` continues the previous
//! value, so distributions keep their own commas (`size=normal:4000,1500`). Sizes take byte
//! units, times take duration units, rates take bit-rate units.

use crate::contract::{ContractParams, Shaper};
use crate::dist::{parse_value, Dist, ValueKind};
use crate::models::{
    Bursts, ConstantRate, FrameSizes, GapSource, MessageBursts, MessageConfig, OnOff, Replay,
    Video, VideoConfig,
};
use crate::rr::TransactionConfig;
use crate::{preset, trace, Emission, Source, TrafficError};
use serde::{Deserialize, Serialize};

/// Rate of `constant` when neither the spec nor the caller gives one.
pub const DEFAULT_RATE_BPS: u64 = 1_000_000;
/// Size of `constant` when neither the spec nor the caller gives one.
pub const DEFAULT_SIZE: u32 = 1000;

/// A described traffic source (or set of sources, for presets).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TrafficSpec {
    /// Constant bit rate; `None` fields take the caller's `--rate`/`--size` through
    /// [`TrafficSpec::with_defaults`], else [`DEFAULT_RATE_BPS`] and [`DEFAULT_SIZE`].
    Constant {
        rate_bps: Option<u64>,
        size: Option<u32>,
    },
    Poisson {
        pps: f64,
        size: Dist,
    },
    OnOff {
        on: Dist,
        off: Dist,
        rate_bps: u64,
        size: u32,
    },
    Burst {
        n: u32,
        every_ns: u64,
        size: Dist,
        peak_bps: Option<u64>,
    },
    Generic {
        gap: Dist,
        size: Dist,
    },
    Video(VideoConfig),
    Tcp(MessageConfig),
    /// A trace file still to be read (by the caller's reader passed to `build`).
    Trace {
        path: String,
    },
    /// A parsed trace, as [`TrafficSpec::resolve_files`] leaves it to travel without the file.
    TraceData {
        emissions: Vec<Emission>,
    },
    Preset {
        name: String,
    },
    /// Request/response transactions (`rr`, `crr`): not a paced source but a workload the
    /// engine runs as transactions.
    RequestResponse(TransactionConfig),
    /// Any spec shaped to a token-bucket contract.
    Shaped {
        inner: Box<TrafficSpec>,
        contract: ContractParams,
    },
}

fn bad(msg: impl Into<String>) -> TrafficError {
    TrafficError::invalid(msg)
}

/// Splits `k=v,k=v` keeping commas of values (pieces without `=` join the previous value).
fn options(kind: &str, s: &str, allowed: &[&str]) -> Result<Vec<(String, String)>, TrafficError> {
    let mut out: Vec<(String, String)> = Vec::new();
    if s.trim().is_empty() {
        return Ok(out);
    }
    for piece in s.split(',') {
        match piece.split_once('=') {
            Some((k, v)) => {
                let k = k.trim().to_ascii_lowercase();
                if !allowed.contains(&k.as_str()) {
                    return Err(bad(format!(
                        "unknown option '{k}' for {kind} (expected {})",
                        allowed.join(", ")
                    )));
                }
                if out.iter().any(|(o, _)| *o == k) {
                    return Err(bad(format!("option '{k}' given twice for {kind}")));
                }
                out.push((k, v.trim().to_string()));
            }
            None => match out.last_mut() {
                Some((_, v)) => {
                    v.push(',');
                    v.push_str(piece.trim());
                }
                None => {
                    return Err(bad(format!(
                        "expected key=value options for {kind}, got '{piece}'"
                    )))
                }
            },
        }
    }
    Ok(out)
}

struct Opts {
    kind: &'static str,
    items: Vec<(String, String)>,
}

impl Opts {
    fn get(&self, k: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    }
    fn required(&self, k: &str) -> Result<&str, TrafficError> {
        self.get(k)
            .ok_or_else(|| bad(format!("{} needs option '{k}'", self.kind)))
    }
    fn ctx(&self, k: &str, e: TrafficError) -> TrafficError {
        bad(format!("{} option '{k}': {e}", self.kind))
    }
    fn dist(&self, k: &str, kind: ValueKind, default: Option<&str>) -> Result<Dist, TrafficError> {
        let v = match (self.get(k), default) {
            (Some(v), _) => v,
            (None, Some(d)) => d,
            (None, None) => self.required(k)?,
        };
        Dist::parse(v, kind).map_err(|e| self.ctx(k, e))
    }
    fn rate(&self, k: &str) -> Result<Option<u64>, TrafficError> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        match flowlab_units::parse_rate(v).map_err(|e| self.ctx(k, e.into()))? {
            flowlab_units::Rate::BitsPerSec(b) => Ok(Some(b)),
            flowlab_units::Rate::Max => Err(self.ctx(k, bad("'max' is not a rate here"))),
        }
    }
    fn bytes(&self, k: &str) -> Result<Option<u32>, TrafficError> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        let b = flowlab_units::parse_bytes(v).map_err(|e| self.ctx(k, e.into()))?;
        let b =
            u32::try_from(b).map_err(|_| self.ctx(k, bad(format!("{b} bytes is too large"))))?;
        if b == 0 {
            return Err(self.ctx(k, TrafficError::ZeroSize));
        }
        Ok(Some(b))
    }
    fn duration(&self, k: &str) -> Result<Option<u64>, TrafficError> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        let d = flowlab_units::parse_duration(v).map_err(|e| self.ctx(k, e.into()))?;
        u64::try_from(d.as_nanos())
            .map(Some)
            .map_err(|_| self.ctx(k, bad("too long")))
    }
    fn count(&self, k: &str) -> Result<Option<u32>, TrafficError> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        let n = flowlab_units::parse_count(v).map_err(|e| self.ctx(k, e.into()))?;
        u32::try_from(n)
            .map(Some)
            .map_err(|_| self.ctx(k, bad("too large")))
    }
    fn number(&self, k: &str) -> Result<Option<f64>, TrafficError> {
        let Some(v) = self.get(k) else {
            return Ok(None);
        };
        parse_value(v, ValueKind::Number)
            .map(Some)
            .map_err(|e| self.ctx(k, e))
    }
    fn flag(&self, k: &str) -> Result<Option<bool>, TrafficError> {
        match self.get(k) {
            None => Ok(None),
            Some("true" | "yes" | "1" | "on") => Ok(Some(true)),
            Some("false" | "no" | "0" | "off") => Ok(Some(false)),
            Some(v) => Err(self.ctx(k, bad(format!("expected true or false, got '{v}'")))),
        }
    }
}

const CONTRACT_SEP: &str = "+contract:";

impl TrafficSpec {
    /// Parses a `--traffic` value. Errors are one line.
    pub fn parse(s: &str) -> Result<TrafficSpec, TrafficError> {
        let s = s.trim();
        if let Some((inner, contract)) = s.split_once(CONTRACT_SEP) {
            let inner = TrafficSpec::parse(inner)?;
            let o = Opts {
                kind: "contract",
                items: options("contract", contract, &["pr", "sr", "bs", "pbs"])?,
            };
            let pr = o
                .rate("pr")?
                .ok_or_else(|| bad("contract needs option 'pr'"))?;
            let sr = o.rate("sr")?.unwrap_or(pr);
            let bs = o
                .bytes("bs")?
                .ok_or_else(|| bad("contract needs option 'bs'"))?;
            let contract = ContractParams {
                peak_rate_bps: pr,
                peak_bucket_bytes: o.bytes("pbs")?.unwrap_or(1500),
                sustained_rate_bps: sr,
                bucket_bytes: bs,
            };
            let shaped = TrafficSpec::Shaped {
                inner: Box::new(inner),
                contract,
            };
            shaped.validate()?;
            return Ok(shaped);
        }
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) => (k.trim().to_ascii_lowercase(), r),
            None => (s.to_ascii_lowercase(), ""),
        };
        let opts = |kind: &'static str, allowed: &[&str]| -> Result<Opts, TrafficError> {
            Ok(Opts {
                kind,
                items: options(kind, rest, allowed)?,
            })
        };
        use ValueKind::{Bytes, Duration};
        let spec = match kind.as_str() {
            "constant" | "cbr" => {
                let o = opts("constant", &["rate", "size"])?;
                TrafficSpec::Constant {
                    rate_bps: o.rate("rate")?,
                    size: o.bytes("size")?,
                }
            }
            "poisson" => {
                let o = opts("poisson", &["pps", "size"])?;
                let pps = o.number("pps")?.ok_or_else(|| bad("poisson needs option 'pps'"))?;
                if pps <= 0.0 {
                    return Err(bad(format!("poisson rate must be above 0 packets/s (got {pps})")));
                }
                TrafficSpec::Poisson {
                    pps,
                    size: o.dist("size", Bytes, Some("1000"))?,
                }
            }
            "onoff" | "on-off" | "vad" => {
                let o = opts("onoff", &["on", "off", "rate", "size"])?;
                TrafficSpec::OnOff {
                    on: o.dist("on", Duration, Some("exp:1s"))?,
                    off: o.dist("off", Duration, Some("exp:1.35s"))?,
                    rate_bps: o.rate("rate")?.unwrap_or(64_000),
                    size: o.bytes("size")?.unwrap_or(160),
                }
            }
            "burst" | "bursts" => {
                let o = opts("burst", &["n", "every", "size", "peak"])?;
                let n = o.count("n")?.ok_or_else(|| bad("burst needs option 'n'"))?;
                let every_ns = o
                    .duration("every")?
                    .ok_or_else(|| bad("burst needs option 'every'"))?;
                TrafficSpec::Burst {
                    n,
                    every_ns,
                    size: o.dist("size", Bytes, Some("1000"))?,
                    peak_bps: o.rate("peak")?,
                }
            }
            "generic" => {
                let o = opts("generic", &["gap", "size"])?;
                TrafficSpec::Generic {
                    gap: o.dist("gap", Duration, None)?,
                    size: o.dist("size", Bytes, Some("1000"))?,
                }
            }
            "video" => {
                let o = opts(
                    "video",
                    &["fps", "size", "gop", "i", "p", "b", "mtu", "min", "spread", "scene"],
                )?;
                let fps = o.number("fps")?.unwrap_or(25.0);
                let frames = match (o.get("size"), o.get("gop"), o.get("scene")) {
                    (Some(_), None, None) => FrameSizes::Dist {
                        size: o.dist("size", Bytes, None)?,
                    },
                    (None, Some(pattern), None) => FrameSizes::Gop {
                        pattern: pattern.to_string(),
                        i: o.dist("i", Bytes, None)?,
                        p: o.dist("p", Bytes, Some("0"))?,
                        b: o.dist("b", Bytes, Some("0"))?,
                    },
                    (None, None, Some(scene)) => parse_scene(scene)?,
                    _ => {
                        return Err(bad(
                            "video needs exactly one of 'size', 'gop' (with i, p, b) or 'scene'",
                        ))
                    }
                };
                let config = VideoConfig {
                    fps,
                    frames,
                    mtu: o.bytes("mtu")?.unwrap_or(1468),
                    min_packet: o.bytes("min")?.unwrap_or(1),
                    spread: o.flag("spread")?.unwrap_or(false),
                };
                // Validate now, for a clear error at the command line.
                Video::new(&config, 0)?;
                TrafficSpec::Video(config)
            }
            "tcp" | "messages" => {
                let o = opts("tcp", &["gap", "msg", "mss", "iw", "rtt"])?;
                TrafficSpec::Tcp(MessageConfig {
                    gap: o.dist("gap", Duration, None)?,
                    message: o.dist("msg", Bytes, None)?,
                    mss: o.bytes("mss")?.unwrap_or(1460),
                    initial_window: o.count("iw")?.unwrap_or(4),
                    rtt_ns: o.duration("rtt")?.unwrap_or(50_000_000),
                })
            }
            "rr" | "crr" => {
                let o = opts(if kind == "rr" { "rr" } else { "crr" }, &["request", "response", "think"])?;
                TrafficSpec::RequestResponse(TransactionConfig {
                    request: o.dist("request", Bytes, Some("64"))?,
                    response: o.dist("response", Bytes, Some("64"))?,
                    think: o.dist("think", Duration, Some("0"))?,
                    connect_each: kind == "crr",
                })
            }
            "trace" => {
                let path = rest.trim();
                if path.is_empty() {
                    return Err(bad("trace needs a file name: trace:FILE"));
                }
                TrafficSpec::Trace {
                    path: path.to_string(),
                }
            }
            "preset" => {
                let name = rest.trim();
                if !preset::names().any(|n| n == name) {
                    let known: Vec<&str> = preset::names().collect();
                    return Err(bad(format!(
                        "unknown preset '{name}' (known: {})",
                        known.join(", ")
                    )));
                }
                TrafficSpec::Preset {
                    name: name.to_string(),
                }
            }
            other => {
                return Err(bad(format!(
                    "unknown traffic kind '{other}' (expected constant, poisson, onoff, burst, generic, video, tcp, trace, preset, rr or crr)"
                )))
            }
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks every parameter, as `build` would, without reading files.
    pub fn validate(&self) -> Result<(), TrafficError> {
        match self {
            TrafficSpec::Constant { rate_bps, size } => {
                if *rate_bps == Some(0) {
                    return Err(TrafficError::ZeroRate);
                }
                if *size == Some(0) {
                    return Err(TrafficError::ZeroSize);
                }
            }
            TrafficSpec::Poisson { pps, size } => {
                if !pps.is_finite() || *pps <= 0.0 {
                    return Err(bad("poisson rate must be above 0 packets/s"));
                }
                size.validate()?;
            }
            TrafficSpec::OnOff {
                on,
                off,
                rate_bps,
                size,
            } => {
                on.validate()?;
                off.validate()?;
                crate::PacedSchedule::new(0, *rate_bps, *size)?;
            }
            TrafficSpec::Burst {
                n,
                every_ns,
                size,
                peak_bps,
            } => {
                if *n == 0 || *every_ns == 0 {
                    return Err(bad("burst needs n >= 1 and a period above 0"));
                }
                if *peak_bps == Some(0) {
                    return Err(TrafficError::ZeroRate);
                }
                size.validate()?;
            }
            TrafficSpec::Generic { gap, size } => {
                gap.validate()?;
                size.validate()?;
            }
            TrafficSpec::Video(c) => {
                if !c.fps.is_finite() || c.fps <= 0.0 || c.mtu == 0 || c.min_packet > c.mtu {
                    return Err(bad("video needs fps > 0 and 0 < min <= mtu"));
                }
                c.frames.validate()?;
            }
            TrafficSpec::Tcp(c) => {
                c.gap.validate()?;
                c.message.validate()?;
                if c.mss == 0 || c.initial_window == 0 {
                    return Err(bad("tcp needs mss and iw above 0"));
                }
            }
            TrafficSpec::Trace { path } => {
                if path.is_empty() {
                    return Err(bad("trace needs a file name"));
                }
            }
            TrafficSpec::TraceData { emissions } => {
                Replay::new(emissions.clone())?;
            }
            TrafficSpec::Preset { name } => {
                if !preset::names().any(|n| n == name) {
                    return Err(bad(format!("unknown preset '{name}'")));
                }
            }
            TrafficSpec::RequestResponse(c) => c.validate()?,
            TrafficSpec::Shaped { inner, contract } => {
                if matches!(**inner, TrafficSpec::RequestResponse(_)) {
                    return Err(bad("request/response transactions take no contract"));
                }
                contract.validate()?;
                inner.validate()?;
            }
        }
        Ok(())
    }

    /// Fills a `constant` spec's missing rate and size with the caller's (`--rate`,
    /// `--size`).
    pub fn with_defaults(self, rate_bps: u64, size: u32) -> TrafficSpec {
        match self {
            TrafficSpec::Constant {
                rate_bps: r,
                size: s,
            } => TrafficSpec::Constant {
                rate_bps: Some(r.unwrap_or(rate_bps)),
                size: Some(s.unwrap_or(size)),
            },
            TrafficSpec::Shaped { inner, contract } => TrafficSpec::Shaped {
                inner: Box::new(inner.with_defaults(rate_bps, size)),
                contract,
            },
            other => other,
        }
    }

    /// Files the spec needs read (traces and empirical CDFs).
    pub fn required_files(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut dist = |d: &Dist| {
            if let Dist::CdfFile { path, .. } = d {
                out.push(path.clone());
            }
        };
        match self {
            TrafficSpec::Poisson { size, .. } => dist(size),
            TrafficSpec::OnOff { on, off, .. } => {
                dist(on);
                dist(off);
            }
            TrafficSpec::Burst { size, .. } => dist(size),
            TrafficSpec::Generic { gap, size } => {
                dist(gap);
                dist(size);
            }
            TrafficSpec::Video(c) => match &c.frames {
                FrameSizes::Dist { size } => dist(size),
                FrameSizes::Gop { i, p, b, .. } => {
                    dist(i);
                    dist(p);
                    dist(b);
                }
                FrameSizes::Scene { .. } => {}
            },
            TrafficSpec::Tcp(c) => {
                dist(&c.gap);
                dist(&c.message);
            }
            TrafficSpec::RequestResponse(c) => {
                dist(&c.request);
                dist(&c.response);
                dist(&c.think);
            }
            TrafficSpec::Trace { path } => out.push(path.clone()),
            TrafficSpec::Shaped { inner, .. } => out.extend(inner.required_files()),
            _ => {}
        }
        out
    }

    /// Reads every file the spec names with `files` and embeds the parsed content (a trace
    /// becomes [`TrafficSpec::TraceData`], a CDF file an empirical distribution), so the spec
    /// can travel to an agent that has no such file.
    pub fn resolve_files(
        &self,
        files: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<TrafficSpec, TrafficError> {
        Ok(match self {
            TrafficSpec::Poisson { pps, size } => TrafficSpec::Poisson {
                pps: *pps,
                size: size.resolve(files)?,
            },
            TrafficSpec::OnOff {
                on,
                off,
                rate_bps,
                size,
            } => TrafficSpec::OnOff {
                on: on.resolve(files)?,
                off: off.resolve(files)?,
                rate_bps: *rate_bps,
                size: *size,
            },
            TrafficSpec::Burst {
                n,
                every_ns,
                size,
                peak_bps,
            } => TrafficSpec::Burst {
                n: *n,
                every_ns: *every_ns,
                size: size.resolve(files)?,
                peak_bps: *peak_bps,
            },
            TrafficSpec::Generic { gap, size } => TrafficSpec::Generic {
                gap: gap.resolve(files)?,
                size: size.resolve(files)?,
            },
            TrafficSpec::Video(c) => TrafficSpec::Video(VideoConfig {
                frames: c.frames.resolve(files)?,
                ..c.clone()
            }),
            TrafficSpec::Tcp(c) => TrafficSpec::Tcp(MessageConfig {
                gap: c.gap.resolve(files)?,
                message: c.message.resolve(files)?,
                ..c.clone()
            }),
            TrafficSpec::RequestResponse(c) => TrafficSpec::RequestResponse(TransactionConfig {
                request: c.request.resolve(files)?,
                response: c.response.resolve(files)?,
                think: c.think.resolve(files)?,
                connect_each: c.connect_each,
            }),
            TrafficSpec::Trace { path } => TrafficSpec::TraceData {
                emissions: read_trace(path, files)?,
            },
            TrafficSpec::Shaped { inner, contract } => TrafficSpec::Shaped {
                inner: Box::new(inner.resolve_files(files)?),
                contract: *contract,
            },
            other => other.clone(),
        })
    }

    /// Whether the traffic is a TCP application's, which a test carries over TCP unless told
    /// otherwise: request/response (netperf's TCP_RR and TCP_CRR) and the TCP presets.
    pub fn prefers_tcp(&self) -> bool {
        match self {
            TrafficSpec::RequestResponse(_) => true,
            TrafficSpec::Preset { name } => preset::over_tcp(name),
            TrafficSpec::Shaped { inner, .. } => inner.prefers_tcp(),
            _ => false,
        }
    }

    /// The request/response workload, if this spec is one (`rr`, `crr`).
    pub fn transactions(&self) -> Option<&TransactionConfig> {
        match self {
            TrafficSpec::RequestResponse(c) => Some(c),
            _ => None,
        }
    }

    /// Builds the sources (one, or several for a preset). Random sources follow from `seed`
    /// (sub-flow `i` of a preset from [`crate::derive_seed`]`(seed, i)`); `files` reads the files the
    /// spec names (trace, CDF) so that the model itself does no I/O.
    pub fn build(
        &self,
        seed: u64,
        files: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<Vec<Box<dyn Source>>, TrafficError> {
        let spec = self.resolve_files(files)?;
        spec.validate()?;
        let one = |s: Box<dyn Source>| Ok(vec![s]);
        match spec {
            TrafficSpec::Constant { rate_bps, size } => one(Box::new(ConstantRate::new(
                rate_bps.unwrap_or(DEFAULT_RATE_BPS),
                size.unwrap_or(DEFAULT_SIZE),
            )?)),
            TrafficSpec::Poisson { pps, size } => {
                one(Box::new(GapSource::poisson(pps, &size, seed)?))
            }
            TrafficSpec::OnOff {
                on,
                off,
                rate_bps,
                size,
            } => one(Box::new(OnOff::new(&on, &off, rate_bps, size, seed)?)),
            TrafficSpec::Burst {
                n,
                every_ns,
                size,
                peak_bps,
            } => one(Box::new(Bursts::new(n, every_ns, &size, peak_bps, seed)?)),
            TrafficSpec::Generic { gap, size } => one(Box::new(GapSource::new(&gap, &size, seed)?)),
            TrafficSpec::Video(c) => one(Box::new(Video::new(&c, seed)?)),
            TrafficSpec::Tcp(c) => one(Box::new(MessageBursts::new(&c, seed)?)),
            TrafficSpec::Trace { .. } => Err(bad("trace file was not read")),
            TrafficSpec::RequestResponse(_) => Err(bad(
                "request/response runs transactions, not a paced packet source",
            )),
            TrafficSpec::TraceData { emissions } => one(Box::new(Replay::new(emissions)?)),
            TrafficSpec::Preset { name } => Ok(preset::build(&name, seed)?
                .into_iter()
                .map(|f| f.source)
                .collect()),
            TrafficSpec::Shaped { inner, contract } => inner
                .build(seed, files)?
                .into_iter()
                .map(|s| Ok(Box::new(Shaper::new(s, contract)?) as Box<dyn Source>))
                .collect(),
        }
    }
}

impl TrafficSpec {
    /// The source of flow `index` of a test (its `index`-th socket): the sources built from
    /// [`crate::derive_seed`]`(seed, index)`, and of them sub-flow `index` modulo their
    /// number (a preset's audio, video, ...). The real engine and the simulator both pick a
    /// flow's packets with this.
    pub fn source_for(
        &self,
        seed: u64,
        index: u64,
        files: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<Box<dyn Source>, TrafficError> {
        let mut sources = self.build(crate::derive_seed(seed, index), files)?;
        if sources.is_empty() {
            return Err(bad("the traffic model produced no source"));
        }
        let pick = (index % sources.len() as u64) as usize;
        Ok(sources.swap_remove(pick))
    }
}

/// `scene=MEAN,SD,RHO,MIN,MAX` (bytes, bytes, correlation, bytes, bytes).
fn parse_scene(s: &str) -> Result<FrameSizes, TrafficError> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() != 5 {
        return Err(bad(format!(
            "video option 'scene': expected MEAN,SD,RHO,MIN,MAX, got '{s}'"
        )));
    }
    let b = |i: usize| parse_value(parts[i], ValueKind::Bytes);
    let frames = FrameSizes::Scene {
        mean: b(0)?,
        sd: b(1)?,
        rho: parse_value(parts[2], ValueKind::Number)?,
        min: b(3)?,
        max: b(4)?,
    };
    frames.validate()?;
    Ok(frames)
}

/// Reads and parses a trace file: pcap if it has a pcap magic, else UTF-8 text records.
pub fn read_trace(
    path: &str,
    files: &dyn Fn(&str) -> Result<Vec<u8>, String>,
) -> Result<Vec<Emission>, TrafficError> {
    let bytes = files(path).map_err(|message| TrafficError::File {
        path: path.to_string(),
        message,
    })?;
    let parsed = if trace::is_pcap(&bytes) {
        trace::parse_pcap(&bytes)
    } else {
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            bad(format!(
                "trace '{path}' is neither a pcap file nor UTF-8 text"
            ))
        })?;
        trace::parse_text(text)
    };
    parsed.map_err(|e| bad(format!("trace '{path}': {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(p: &str) -> Result<Vec<u8>, String> {
        Err(format!("no file {p}"))
    }

    fn take(s: &mut dyn Source, n: usize) -> Vec<Emission> {
        (0..n).map_while(|_| s.next_emission()).collect()
    }

    #[test]
    fn parses_every_kind() {
        let cases = [
            "constant",
            "constant:rate=2M,size=500",
            "poisson:pps=1000,size=exp:500",
            "onoff:on=exp:1s,off=exp:1.35s,rate=64k,size=160",
            "onoff",
            "burst:n=10,every=100ms",
            "burst:n=10,every=100ms,size=uniform:72..1468,peak=10M",
            "generic:gap=uniform:1ms..3ms,size=normal:800,200",
            "video:fps=25,size=normal:4000,1500,mtu=1468",
            "video:fps=30,gop=IBBPBBPBBPBB,i=20k,p=8k,b=normal:3000,500,spread=true",
            "video:scene=5000,1250,0.98,2500,7500,min=72",
            "tcp:gap=exp:2s,msg=lognormal:10k,5k,mss=1460,iw=4,rtt=50ms",
            "trace:/tmp/x,y=z.txt",
            "preset:voip-g711",
            "poisson:pps=100,size=1500+contract:pr=100k,sr=100k,bs=10k",
            "rr:request=64,response=1k,think=0",
            "crr:response=uniform:100..200,think=exp:1ms",
        ];
        for c in cases {
            let spec = TrafficSpec::parse(c).unwrap_or_else(|e| panic!("{c}: {e}"));
            // Survives the control protocol.
            let json = serde_json::to_string(&spec).unwrap();
            let back: TrafficSpec = serde_json::from_str(&json).unwrap();
            assert_eq!(back, spec, "{c}");
        }
        assert_eq!(
            TrafficSpec::parse("video:fps=25,size=normal:4000,1500,mtu=1468").unwrap(),
            TrafficSpec::Video(VideoConfig {
                fps: 25.0,
                frames: FrameSizes::Dist {
                    size: Dist::Normal {
                        mean: 4000.0,
                        sd: 1500.0
                    }
                },
                mtu: 1468,
                min_packet: 1,
                spread: false,
            })
        );
        assert_eq!(
            TrafficSpec::parse("trace:/tmp/x,y=z.txt").unwrap(),
            TrafficSpec::Trace {
                path: "/tmp/x,y=z.txt".into()
            }
        );
    }

    #[test]
    fn parse_errors_are_clear_single_lines() {
        let cases = [
            ("warp:1", "unknown traffic kind 'warp'"),
            ("poisson", "poisson needs option 'pps'"),
            (
                "poisson:pps=-5",
                "poisson option 'pps': value '-5' must not be negative",
            ),
            (
                "poisson:pps=10,speed=1",
                "unknown option 'speed' for poisson",
            ),
            (
                "onoff:rate=-64k",
                "onoff option 'rate': invalid rate '-64k'",
            ),
            ("burst:n=10", "burst needs option 'every'"),
            ("video:fps=25", "video needs exactly one of"),
            (
                "video:size=pareto-mean:1,500",
                "video option 'size': invalid distribution",
            ),
            ("preset:nope", "unknown preset 'nope'"),
            ("trace:", "trace needs a file name"),
            (
                "constant:rate=0",
                "constant option 'rate': invalid rate '0'",
            ),
            ("poisson:pps=1,pps=2", "option 'pps' given twice"),
            ("x+contract:pr=1k", "unknown traffic kind 'x'"),
            (
                "constant+contract:pr=1k,sr=2k,bs=1k",
                "sustained rate 2000 bit/s is above",
            ),
            ("video:gop=IXP,i=1k", "GOP pattern 'IXP' has 'X'"),
            ("rr:response=0", "response size 0 B is outside"),
            ("rr:response=1G", "response size 1000000000 B is outside"),
            ("crr:size=10", "unknown option 'size' for crr"),
            (
                "rr:response=1k+contract:pr=1M,bs=10k",
                "request/response transactions take no contract",
            ),
        ];
        for (input, want) in cases {
            let e = TrafficSpec::parse(input).unwrap_err().to_string();
            assert!(e.contains(want), "{input}: {e}");
            assert!(!e.contains('\n'), "{input}: {e}");
        }
    }

    #[test]
    fn builds_sources_reproducibly() {
        let spec = TrafficSpec::parse("poisson:pps=1000,size=exp:500").unwrap();
        let mut a = spec.build(7, &no_files).unwrap();
        let mut b = spec.build(7, &no_files).unwrap();
        let mut c = spec.build(8, &no_files).unwrap();
        let x = take(&mut a[0], 100);
        assert_eq!(x, take(&mut b[0], 100));
        assert_ne!(x, take(&mut c[0], 100));
        let presets = TrafficSpec::parse("preset:videoconf-1998").unwrap();
        assert_eq!(presets.build(1, &no_files).unwrap().len(), 2);
    }

    #[test]
    fn constant_takes_the_callers_defaults() {
        let spec = TrafficSpec::parse("constant")
            .unwrap()
            .with_defaults(8_000_000, 1000);
        let mut s = spec.build(0, &no_files).unwrap();
        let t: Vec<u64> = take(&mut s[0], 3).iter().map(|e| e.at_ns).collect();
        assert_eq!(t, [0, 1_000_000, 2_000_000]);
    }

    #[test]
    fn trace_and_cdf_files_are_read_through_the_caller() {
        let files = |p: &str| -> Result<Vec<u8>, String> {
            match p {
                "t.txt" => Ok(b"0 100\n0.5 200\n".to_vec()),
                "bad.txt" => Ok(b"0 100\n0.5 200\n0.4 10\n".to_vec()),
                "sizes.cdf" => Ok(b"100 0.5\n200 1\n".to_vec()),
                _ => Err("not found".into()),
            }
        };
        let spec = TrafficSpec::parse("trace:t.txt").unwrap();
        assert_eq!(spec.required_files(), ["t.txt"]);
        let mut s = spec.build(0, &files).unwrap();
        assert_eq!(
            take(&mut s[0], 10),
            [
                Emission {
                    at_ns: 0,
                    size: 100
                },
                Emission {
                    at_ns: 500_000_000,
                    size: 200
                }
            ]
        );
        let e = TrafficSpec::parse("trace:bad.txt")
            .unwrap()
            .build(0, &files)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "trace 'bad.txt': line 3: time 0.4 goes back before the previous record's"
        );
        let e = TrafficSpec::parse("trace:missing")
            .unwrap()
            .build(0, &files)
            .err()
            .unwrap();
        assert_eq!(e.to_string(), "cannot read 'missing': not found");
        // A resolved spec carries the data, not the file name.
        let spec = TrafficSpec::parse("generic:gap=10ms,size=cdf:sizes.cdf").unwrap();
        assert_eq!(spec.required_files(), ["sizes.cdf"]);
        let resolved = spec.resolve_files(&files).unwrap();
        assert!(resolved.required_files().is_empty());
        let json = serde_json::to_string(&resolved).unwrap();
        let back: TrafficSpec = serde_json::from_str(&json).unwrap();
        let mut s = back.build(3, &no_files).unwrap();
        assert!(take(&mut s[0], 100)
            .iter()
            .all(|e| (100..=200).contains(&e.size)));
    }

    #[test]
    fn shaped_spec_conforms() {
        let spec =
            TrafficSpec::parse("burst:n=20,every=1s,size=1500+contract:pr=100k,sr=100k,bs=10k")
                .unwrap();
        let mut s = spec.build(0, &no_files).unwrap();
        let out = take(&mut s[0], 200);
        let c = ContractParams {
            peak_rate_bps: 100_000,
            peak_bucket_bytes: 1500,
            sustained_rate_bps: 100_000,
            bucket_bytes: 10_000,
        };
        assert_eq!(crate::contract::first_violation(&out, &c), None);
        assert!(s[0].contract_report().unwrap().delayed > 0);
    }

    #[test]
    fn parser_never_panics() {
        let pieces = [
            "poisson",
            ":",
            "=",
            ",",
            "pps",
            "size",
            "exp",
            "1e400",
            "-",
            "..",
            "+contract:",
            "video",
            "gop",
            "scene",
            "0",
            "nan",
            "inf",
            "preset",
            "trace",
            "cdf",
            "pareto",
            "uniform",
            "1.5",
            "k",
            "ms",
        ];
        let mut x: u32 = 7;
        for _ in 0..5000 {
            let mut s = String::new();
            for _ in 0..6 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                s.push_str(pieces[x as usize % pieces.len()]);
            }
            if let Ok(spec) = TrafficSpec::parse(&s) {
                if let Ok(mut sources) = spec.build(1, &no_files) {
                    for src in sources.iter_mut() {
                        take(src, 20);
                    }
                }
            }
        }
    }

    #[test]
    fn source_for_picks_the_sub_flow_of_its_index_from_its_own_seed() {
        let preset = TrafficSpec::parse("preset:videoconf-1998").unwrap();
        for index in 0..4u64 {
            let mut picked = preset.source_for(9, index, &no_files).unwrap();
            let mut all = preset
                .build(crate::derive_seed(9, index), &no_files)
                .unwrap();
            let k = index as usize % all.len();
            assert_eq!(take(&mut picked, 50), take(&mut all[k], 50));
        }
        // Audio (sub-flow 0) and video (1) differ.
        let mut audio = preset.source_for(9, 0, &no_files).unwrap();
        let mut video = preset.source_for(9, 1, &no_files).unwrap();
        assert_ne!(take(&mut audio, 5), take(&mut video, 5));
    }
}
