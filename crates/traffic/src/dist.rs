//! Distributions of packet sizes (bytes) and gaps (nanoseconds), seeded and reproducible.
//!
//! A [`Dist`] is a description (serialisable, parsed from text such as `exp:10ms` or
//! `uniform:72..1468`); a [`Sampler`] is a validated `Dist` ready to draw from a
//! [`ChaCha8Rng`]. The parametric laws are rand_distr's samplers (ziggurat for the exponential
//! and normal, inversion for Pareto), so a seed replays the same values for a given
//! Cargo.lock. The empirical CDF is inverted here: rand_distr has no law linear between the
//! points of a table (ns-2's empirical random variable).

use crate::TrafficError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Exp, LogNormal, Normal, Pareto};
use serde::{Deserialize, Serialize};

/// What the numbers of a distribution mean, for parsing units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// Bytes: `1500`, `1.5k`, `64KiB`; plain decimals (`800.5`) are accepted too.
    Bytes,
    /// Nanoseconds, written as durations: `10ms`, `1.35s`; a bare number is seconds.
    Duration,
    /// A plain number.
    Number,
}

/// A distribution of non-negative values (bytes for sizes, nanoseconds for gaps).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "dist", rename_all = "snake_case")]
pub enum Dist {
    /// Always `value`.
    Const { value: f64 },
    /// Uniform on `[low, high]`.
    Uniform { low: f64, high: f64 },
    /// Exponential of mean `mean`.
    Exp { mean: f64 },
    /// Normal of mean `mean` and standard deviation `sd`, truncated to values above 0
    /// (redrawn until positive).
    Normal { mean: f64, sd: f64 },
    /// Pareto of shape `shape` (alpha) and scale `scale` (the minimum value). The mean is
    /// `shape * scale / (shape - 1)`, finite only for `shape > 1`.
    Pareto { shape: f64, scale: f64 },
    /// Log-normal whose *value* has mean `mean` and standard deviation `sd`.
    LogNormal { mean: f64, sd: f64 },
    /// An empirical distribution from a CDF table.
    Empirical(EmpiricalCdf),
    /// An empirical CDF still to be read from a file (`cdf:FILE`): [`Dist::resolve`] turns it
    /// into [`Dist::Empirical`] with the caller's file reader.
    CdfFile { path: String, step: bool },
}

fn bad(msg: impl Into<String>) -> TrafficError {
    TrafficError::invalid(msg)
}

fn finite(name: &str, x: f64) -> Result<f64, TrafficError> {
    if x.is_finite() {
        Ok(x)
    } else {
        Err(bad(format!("{name} must be a finite number, not {x}")))
    }
}

fn non_negative(name: &str, x: f64) -> Result<f64, TrafficError> {
    let x = finite(name, x)?;
    if x < 0.0 {
        Err(bad(format!("{name} must not be negative (got {x})")))
    } else {
        Ok(x)
    }
}

fn positive(name: &str, x: f64) -> Result<f64, TrafficError> {
    let x = finite(name, x)?;
    if x <= 0.0 {
        Err(bad(format!("{name} must be above 0 (got {x})")))
    } else {
        Ok(x)
    }
}

/// Parses one number of the given kind into its base unit (bytes, nanoseconds or itself).
pub fn parse_value(s: &str, kind: ValueKind) -> Result<f64, TrafficError> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(bad(format!("value '{t}' must not be negative")));
    }
    match kind {
        ValueKind::Number => t
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| bad(format!("invalid number '{t}'"))),
        ValueKind::Bytes => match flowlab_units::parse_bytes(t) {
            Ok(b) => Ok(b as f64),
            Err(e) => t
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| TrafficError::from(e)),
        },
        ValueKind::Duration => {
            let d = flowlab_units::parse_duration(t)?;
            Ok(d.as_nanos() as f64)
        }
    }
}

impl Dist {
    /// Pareto of the given shape whose mean is `mean`; the shape must be above 1, since a
    /// Pareto with shape <= 1 has no finite mean.
    pub fn pareto_with_mean(shape: f64, mean: f64) -> Result<Dist, TrafficError> {
        let shape = finite("Pareto shape", shape)?;
        let mean = positive("Pareto mean", mean)?;
        if shape <= 1.0 {
            return Err(bad(format!(
                "Pareto shape must be above 1 for a finite mean (got {shape})"
            )));
        }
        Ok(Dist::Pareto {
            shape,
            scale: mean * (shape - 1.0) / shape,
        })
    }

    /// Parses `const:500` (or just `500`), `uniform:72..1468`, `exp:10ms`, `normal:800,200`,
    /// `pareto:1.5,100` (shape, scale), `pareto-mean:1.5,500` (shape, mean),
    /// `lognormal:800,200` (mean, sd of the value), `cdf:FILE` (interpolated) or
    /// `cdf-step:FILE` (discrete values). Numbers are read as `kind` says.
    pub fn parse(s: &str, kind: ValueKind) -> Result<Dist, TrafficError> {
        let s = s.trim();
        let (name, args) = match s.split_once(':') {
            Some((n, a)) => (n.trim().to_ascii_lowercase(), a),
            None => {
                // A bare value is a constant.
                let value = parse_value(s, kind)
                    .map_err(|e| bad(format!("invalid distribution '{s}': {e}")))?;
                return Ok(Dist::Const { value });
            }
        };
        let ctx = |e: TrafficError| bad(format!("invalid distribution '{s}': {e}"));
        let list = |n: usize| -> Result<Vec<f64>, TrafficError> {
            let parts: Vec<&str> = if n == 2 && args.contains("..") {
                args.splitn(2, "..").collect()
            } else {
                args.split(',').collect()
            };
            if parts.len() != n {
                return Err(bad(format!("expected {n} value(s), got {}", parts.len())));
            }
            parts.iter().map(|p| parse_value(p, kind)).collect()
        };
        let dist = match name.as_str() {
            "const" | "constant" | "fixed" => Dist::Const {
                value: list(1).map_err(ctx)?[0],
            },
            "uniform" | "u" => {
                let v = list(2).map_err(ctx)?;
                Dist::Uniform {
                    low: v[0],
                    high: v[1],
                }
            }
            "exp" | "exponential" => Dist::Exp {
                mean: list(1).map_err(ctx)?[0],
            },
            "normal" | "gauss" => {
                let v = list(2).map_err(ctx)?;
                Dist::Normal {
                    mean: v[0],
                    sd: v[1],
                }
            }
            "lognormal" | "lognorm" => {
                let v = list(2).map_err(ctx)?;
                Dist::LogNormal {
                    mean: v[0],
                    sd: v[1],
                }
            }
            "pareto" => {
                let parts: Vec<&str> = args.split(',').collect();
                if parts.len() != 2 {
                    return Err(ctx(bad("expected shape,scale")));
                }
                let shape = parse_value(parts[0], ValueKind::Number).map_err(ctx)?;
                let scale = parse_value(parts[1], kind).map_err(ctx)?;
                Dist::Pareto { shape, scale }
            }
            "pareto-mean" | "paretomean" => {
                let parts: Vec<&str> = args.split(',').collect();
                if parts.len() != 2 {
                    return Err(ctx(bad("expected shape,mean")));
                }
                let shape = parse_value(parts[0], ValueKind::Number).map_err(ctx)?;
                let mean = parse_value(parts[1], kind).map_err(ctx)?;
                Dist::pareto_with_mean(shape, mean).map_err(ctx)?
            }
            "cdf" | "cdf-step" => {
                let path = args.trim();
                if path.is_empty() {
                    return Err(ctx(bad("expected a file name")));
                }
                Dist::CdfFile {
                    path: path.to_string(),
                    step: name == "cdf-step",
                }
            }
            other => {
                return Err(bad(format!(
                    "unknown distribution '{other}' in '{s}' (expected const, uniform, exp, normal, pareto, pareto-mean, lognormal, cdf or cdf-step)"
                )))
            }
        };
        dist.validate().map_err(ctx)?;
        Ok(dist)
    }

    /// Checks the parameters (finite, non-negative, consistent).
    pub fn validate(&self) -> Result<(), TrafficError> {
        match self {
            Dist::Const { value } => {
                non_negative("constant", *value)?;
            }
            Dist::Uniform { low, high } => {
                non_negative("uniform low", *low)?;
                non_negative("uniform high", *high)?;
                if low > high {
                    return Err(bad(format!("uniform low {low} is above high {high}")));
                }
            }
            Dist::Exp { mean } => {
                positive("exponential mean", *mean)?;
            }
            Dist::Normal { mean, sd } => {
                positive("normal mean", *mean)?;
                non_negative("normal sd", *sd)?;
            }
            Dist::Pareto { shape, scale } => {
                positive("Pareto shape", *shape)?;
                positive("Pareto scale", *scale)?;
            }
            Dist::LogNormal { mean, sd } => {
                positive("log-normal mean", *mean)?;
                non_negative("log-normal sd", *sd)?;
            }
            Dist::Empirical(cdf) => cdf.validate()?,
            Dist::CdfFile { path, .. } => {
                if path.is_empty() {
                    return Err(bad("empirical CDF file name is empty"));
                }
            }
        }
        Ok(())
    }

    /// The mean, where finite and known in closed form (the normal's is that of the
    /// untruncated law, close when `mean` is a few `sd` above 0).
    pub fn mean(&self) -> Option<f64> {
        match self {
            Dist::Const { value } => Some(*value),
            Dist::Uniform { low, high } => Some((low + high) / 2.0),
            Dist::Exp { mean } | Dist::Normal { mean, .. } | Dist::LogNormal { mean, .. } => {
                Some(*mean)
            }
            Dist::Pareto { shape, scale } => (*shape > 1.0).then(|| shape * scale / (shape - 1.0)),
            Dist::Empirical(cdf) => Some(cdf.mean()),
            Dist::CdfFile { .. } => None,
        }
    }

    /// Replaces a [`Dist::CdfFile`] by the parsed table, reading the file with `files`.
    pub fn resolve(
        &self,
        files: &dyn Fn(&str) -> Result<Vec<u8>, String>,
    ) -> Result<Dist, TrafficError> {
        match self {
            Dist::CdfFile { path, step } => {
                let bytes = files(path).map_err(|message| TrafficError::File {
                    path: path.clone(),
                    message,
                })?;
                let text = std::str::from_utf8(&bytes)
                    .map_err(|_| bad(format!("CDF file '{path}' is not UTF-8 text")))?;
                let mut cdf = EmpiricalCdf::parse(text)
                    .map_err(|e| bad(format!("CDF file '{path}': {e}")))?;
                cdf.step = *step;
                Ok(Dist::Empirical(cdf))
            }
            other => Ok(other.clone()),
        }
    }
}

/// An empirical distribution given by its cumulative distribution function: points
/// `(value, P(X <= value))` with increasing values, non-decreasing probabilities in `[0, 1]`
/// and the last probability 1.
///
/// Sampling inverts the CDF. With `step` false (the default, as in ns-2's empirical random
/// variable) the CDF is linear between points, and the first point's probability is a mass at
/// its value; with `step` true only the listed values occur.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmpiricalCdf {
    pub points: Vec<(f64, f64)>,
    #[serde(default)]
    pub step: bool,
}

impl EmpiricalCdf {
    /// Parses lines `value probability` (cumulative). Blank lines and `#` comments are
    /// skipped; values are plain numbers in the base unit (bytes, or nanoseconds for gaps).
    /// Errors name the line.
    pub fn parse(text: &str) -> Result<EmpiricalCdf, TrafficError> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut last_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let content = raw.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            last_line = line;
            let err = |message: String| TrafficError::Line { line, message };
            let fields: Vec<&str> = content
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|f| !f.is_empty())
                .collect();
            if fields.len() != 2 {
                return Err(err(format!(
                    "expected 'value probability', got {} field(s)",
                    fields.len()
                )));
            }
            let value: f64 = fields[0]
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| err(format!("invalid value '{}'", fields[0])))?;
            let p: f64 = fields[1]
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| err(format!("invalid probability '{}'", fields[1])))?;
            if value < 0.0 {
                return Err(err(format!("value {value} is negative")));
            }
            if !(0.0..=1.0).contains(&p) {
                return Err(err(format!("probability {p} is outside [0, 1]")));
            }
            if let Some(&(pv, pp)) = points.last() {
                if value <= pv {
                    return Err(err(format!("values must increase ({value} after {pv})")));
                }
                if p < pp {
                    return Err(err(format!(
                        "cumulative probabilities must not decrease ({p} after {pp})"
                    )));
                }
            }
            points.push((value, p));
        }
        match points.last() {
            None => Err(bad("empirical CDF has no points")),
            Some(&(_, p)) if (p - 1.0).abs() > 1e-9 => Err(TrafficError::Line {
                line: last_line,
                message: format!("the last cumulative probability must be 1, got {p}"),
            }),
            Some(_) => {
                if let Some(last) = points.last_mut() {
                    last.1 = 1.0;
                }
                Ok(EmpiricalCdf {
                    points,
                    step: false,
                })
            }
        }
    }

    fn validate(&self) -> Result<(), TrafficError> {
        let Some(&(_, last)) = self.points.last() else {
            return Err(bad("empirical CDF has no points"));
        };
        if (last - 1.0).abs() > 1e-9 {
            return Err(bad("empirical CDF must end at probability 1"));
        }
        let mut prev: Option<(f64, f64)> = None;
        for &(v, p) in &self.points {
            if !v.is_finite() || v < 0.0 || !(0.0..=1.0).contains(&p) {
                return Err(bad("empirical CDF point out of range"));
            }
            if let Some((pv, pp)) = prev {
                if v <= pv || p < pp {
                    return Err(bad("empirical CDF must increase"));
                }
            }
            prev = Some((v, p));
        }
        Ok(())
    }

    /// The mean of the distribution as sampled.
    pub fn mean(&self) -> f64 {
        let mut mean = 0.0;
        let mut prev: Option<(f64, f64)> = None;
        for &(v, p) in &self.points {
            match prev {
                None => mean += v * p,
                Some((pv, pp)) => {
                    let mass = p - pp;
                    mean += mass * if self.step { v } else { (v + pv) / 2.0 };
                }
            }
            prev = Some((v, p));
        }
        mean
    }

    fn sample(&self, u: f64) -> f64 {
        // First point whose cumulative probability reaches u.
        let i = self.points.partition_point(|&(_, p)| p < u);
        let Some(&(v, p)) = self.points.get(i) else {
            return self.points.last().map_or(0.0, |&(v, _)| v);
        };
        if self.step || i == 0 {
            return v;
        }
        let (pv, pp) = self.points[i - 1];
        if p <= pp {
            return v;
        }
        pv + (u - pp) / (p - pp) * (v - pv)
    }
}

/// A validated distribution ready for sampling.
#[derive(Debug, Clone)]
pub struct Sampler {
    dist: Dist,
    law: Law,
}

/// What a [`Sampler`] draws from: rand_distr's law for each parametric [`Dist`].
#[derive(Debug, Clone)]
enum Law {
    Const(f64),
    Uniform {
        low: f64,
        high: f64,
    },
    Exp(Exp<f64>),
    /// Truncated to values above 0 by redrawing.
    PositiveNormal(Normal<f64>),
    Pareto(Pareto<f64>),
    LogNormal(LogNormal<f64>),
    Empirical(EmpiricalCdf),
}

impl Law {
    /// The law of a validated, resolved `dist`.
    fn of(dist: &Dist) -> Result<Law, TrafficError> {
        // Validation rules these out; a clear error all the same, never a panic.
        let refused = |e: &dyn std::fmt::Display| bad(format!("{dist:?}: {e}"));
        Ok(match dist {
            Dist::Const { value } => Law::Const(*value),
            Dist::Uniform { low, high } => Law::Uniform {
                low: *low,
                high: *high,
            },
            Dist::Exp { mean } => Law::Exp(Exp::new(1.0 / mean).map_err(|e| refused(&e))?),
            Dist::Normal { mean, sd } => {
                Law::PositiveNormal(Normal::new(*mean, *sd).map_err(|e| refused(&e))?)
            }
            Dist::Pareto { shape, scale } => {
                Law::Pareto(Pareto::new(*scale, *shape).map_err(|e| refused(&e))?)
            }
            Dist::LogNormal { mean, sd } => {
                Law::LogNormal(LogNormal::from_mean_cv(*mean, sd / mean).map_err(|e| refused(&e))?)
            }
            Dist::Empirical(cdf) => Law::Empirical(cdf.clone()),
            Dist::CdfFile { path, .. } => {
                return Err(bad(format!(
                    "empirical CDF file '{path}' was not read (resolve the spec first)"
                )))
            }
        })
    }
}

impl Sampler {
    pub fn new(dist: &Dist) -> Result<Sampler, TrafficError> {
        dist.validate()?;
        Ok(Sampler {
            law: Law::of(dist)?,
            dist: dist.clone(),
        })
    }

    pub fn dist(&self) -> &Dist {
        &self.dist
    }

    /// Draws one value (finite unless the law has an infinite tail that overflows, which the
    /// integer conversions below clamp).
    pub fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match &self.law {
            Law::Const(value) => *value,
            Law::Uniform { low, high } => low + (high - low) * rng.gen::<f64>(),
            Law::Exp(law) => rng.sample(law),
            Law::PositiveNormal(law) => {
                for _ in 0..100 {
                    let x = rng.sample(law);
                    if x > 0.0 {
                        return x;
                    }
                }
                law.mean()
            }
            Law::Pareto(law) => rng.sample(law),
            Law::LogNormal(law) => rng.sample(law),
            Law::Empirical(cdf) => cdf.sample(rng.gen::<f64>()),
        }
    }

    /// Draws a duration in whole nanoseconds (rounded, clamped to `u64`).
    pub fn sample_ns(&self, rng: &mut ChaCha8Rng) -> u64 {
        to_u64(self.sample(rng))
    }

    /// Draws a packet size in bytes, rounded and clamped to `1..=max`.
    pub fn sample_size(&self, rng: &mut ChaCha8Rng, max: u32) -> u32 {
        let x = self.sample(rng).round();
        if x.is_nan() || x < 1.0 {
            1
        } else if x >= f64::from(max) {
            max
        } else {
            x as u32
        }
    }
}

/// Rounds to the nearest integer, clamping to `0..=u64::MAX` (NaN is 0).
pub(crate) fn to_u64(x: f64) -> u64 {
    // `as` saturates and maps NaN to 0.
    x.round() as u64
}

/// A generator for stream `stream` of `seed`: the parts of one model (gaps, sizes) draw from
/// separate streams, so changing one does not shift the other.
pub fn rng(seed: u64, stream: u64) -> ChaCha8Rng {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// Largest packet size a sampler produces by default: the largest UDP payload over IPv4.
pub const MAX_PACKET_SIZE: u32 = 65_507;

#[cfg(test)]
mod tests {
    use super::*;

    fn moments(d: &Dist, n: usize, seed: u64) -> (f64, f64) {
        let s = Sampler::new(d).unwrap();
        let mut r = rng(seed, 0);
        let xs: Vec<f64> = (0..n).map(|_| s.sample(&mut r)).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
        (mean, var)
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs().max(1e-12)
    }

    const N: usize = 100_000;

    #[test]
    fn constant_uniform_exponential_moments() {
        let (m, v) = moments(&Dist::Const { value: 500.0 }, N, 1);
        assert_eq!((m, v), (500.0, 0.0));
        let (m, v) = moments(
            &Dist::Uniform {
                low: 72.0,
                high: 1468.0,
            },
            N,
            2,
        );
        assert!(close(m, 770.0, 0.01), "{m}");
        assert!(close(v, 1396.0f64.powi(2) / 12.0, 0.02), "{v}");
        let (m, v) = moments(&Dist::Exp { mean: 1e7 }, N, 3);
        assert!(close(m, 1e7, 0.015), "{m}");
        assert!(close(v, 1e14, 0.04), "{v}");
    }

    #[test]
    fn normal_and_lognormal_moments() {
        let (m, v) = moments(
            &Dist::Normal {
                mean: 800.0,
                sd: 200.0,
            },
            N,
            4,
        );
        // Truncation at 0 is 4 sd away: negligible.
        assert!(close(m, 800.0, 0.005), "{m}");
        assert!(close(v, 40_000.0, 0.02), "{v}");
        let (m, v) = moments(
            &Dist::LogNormal {
                mean: 800.0,
                sd: 200.0,
            },
            N,
            5,
        );
        assert!(close(m, 800.0, 0.005), "{m}");
        assert!(close(v, 40_000.0, 0.04), "{v}");
    }

    #[test]
    fn pareto_moments() {
        // Shape 3: finite variance scale^2 * a / ((a-1)^2 (a-2)).
        let d = Dist::Pareto {
            shape: 3.0,
            scale: 100.0,
        };
        let (m, v) = moments(&d, N, 6);
        assert!(close(m, 150.0, 0.01), "{m}");
        // Heavy tail: variance converges slowly.
        assert!(close(v, 7500.0, 0.25), "{v}");
        let d = Dist::pareto_with_mean(1.5, 500.0).unwrap();
        assert_eq!(d.mean(), Some(500.0));
        let d = Dist::Pareto {
            shape: 5.0,
            scale: 100.0,
        };
        let (m, _) = moments(&d, N, 7);
        assert!(close(m, 125.0, 0.01), "{m}");
    }

    #[test]
    fn empirical_moments() {
        let cdf = EmpiricalCdf::parse("# sizes\n100 0.0\n200 0.5\n\n1000 1\n").unwrap();
        let d = Dist::Empirical(cdf.clone());
        let (m, _) = moments(&d, N, 8);
        // Mass 0.5 uniform on [100,200], 0.5 on [200,1000]: mean 75 + 300.
        assert!(close(cdf.mean(), 375.0, 1e-12));
        assert!(close(m, 375.0, 0.01), "{m}");
        let step = EmpiricalCdf {
            step: true,
            ..EmpiricalCdf::parse("72 0.4\n1468 1.0").unwrap()
        };
        let (m, v) = moments(&Dist::Empirical(step), N, 9);
        let want = 0.4 * 72.0 + 0.6 * 1468.0;
        assert!(close(m, want, 0.01), "{m}");
        let want_var = 0.4 * 0.6 * 1396.0f64.powi(2);
        assert!(close(v, want_var, 0.02), "{v}");
    }

    #[test]
    fn empirical_cdf_errors_name_the_line() {
        let e = EmpiricalCdf::parse("1 0.1\n2 0.05\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: cumulative probabilities must not decrease (0.05 after 0.1)"
        );
        let e = EmpiricalCdf::parse("1 0.1\n# c\n1 0.5\n").unwrap_err();
        assert!(
            e.to_string().starts_with("line 3: values must increase"),
            "{e}"
        );
        let e = EmpiricalCdf::parse("1 0.1\n2 0.9\n").unwrap_err();
        assert!(e.to_string().starts_with("line 2: the last"), "{e}");
        let e = EmpiricalCdf::parse("1 x\n").unwrap_err();
        assert_eq!(e.to_string(), "line 1: invalid probability 'x'");
        let e = EmpiricalCdf::parse("1 1.5\n").unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        assert!(EmpiricalCdf::parse("\n# nothing\n").is_err());
        assert!(EmpiricalCdf::parse("1 2 3\n").is_err());
    }

    #[test]
    fn parses_distributions_with_units() {
        use ValueKind::*;
        assert_eq!(
            Dist::parse("const:500", Bytes).unwrap(),
            Dist::Const { value: 500.0 }
        );
        assert_eq!(
            Dist::parse("1.5k", Bytes).unwrap(),
            Dist::Const { value: 1500.0 }
        );
        assert_eq!(
            Dist::parse("uniform:72..1468", Bytes).unwrap(),
            Dist::Uniform {
                low: 72.0,
                high: 1468.0
            }
        );
        assert_eq!(
            Dist::parse("exp:10ms", Duration).unwrap(),
            Dist::Exp { mean: 1e7 }
        );
        assert_eq!(
            Dist::parse("normal:800,200", Bytes).unwrap(),
            Dist::Normal {
                mean: 800.0,
                sd: 200.0
            }
        );
        assert_eq!(
            Dist::parse("pareto:1.5,100", Bytes).unwrap(),
            Dist::Pareto {
                shape: 1.5,
                scale: 100.0
            }
        );
        assert_eq!(
            Dist::parse("lognormal:1s,500ms", Duration).unwrap(),
            Dist::LogNormal { mean: 1e9, sd: 5e8 }
        );
        assert_eq!(
            Dist::parse("cdf:sizes.txt", Bytes).unwrap(),
            Dist::CdfFile {
                path: "sizes.txt".into(),
                step: false
            }
        );
    }

    #[test]
    fn parse_errors_are_one_line() {
        use ValueKind::*;
        for bad in [
            "pareto-mean:1,500",
            "pareto-mean:0.8,500",
            "exp:-5ms",
            "exp:0",
            "uniform:10..5",
            "normal:abc,1",
            "normal:1",
            "weird:1",
            "exp:",
            "cdf:",
            "pareto:0,1",
            "",
            "nan",
        ] {
            let e = Dist::parse(bad, Bytes).unwrap_err().to_string();
            assert!(!e.contains('\n') && !e.is_empty(), "{bad}: {e}");
        }
        let e = Dist::parse("pareto-mean:1,500", Bytes)
            .unwrap_err()
            .to_string();
        assert!(e.contains("shape must be above 1"), "{e}");
        let e = Dist::parse("exp:-5ms", Duration).unwrap_err().to_string();
        assert!(e.contains("negative"), "{e}");
    }

    #[test]
    fn cdf_files_resolve_through_the_callers_reader() {
        let d = Dist::parse("cdf-step:f", ValueKind::Bytes).unwrap();
        let files = |p: &str| -> Result<Vec<u8>, String> {
            if p == "f" {
                Ok(b"10 0.5\n20 1\n".to_vec())
            } else {
                Err("no such file".into())
            }
        };
        let r = d.resolve(&files).unwrap();
        assert_eq!(r.mean(), Some(15.0));
        assert!(Sampler::new(&d).is_err());
        let e = Dist::parse("cdf:g", ValueKind::Bytes)
            .unwrap()
            .resolve(&files)
            .unwrap_err();
        assert_eq!(e.to_string(), "cannot read 'g': no such file");
    }

    #[test]
    fn seeds_reproduce_and_differ() {
        let s = Sampler::new(&Dist::Exp { mean: 1000.0 }).unwrap();
        let draw = |seed| {
            let mut r = rng(seed, 0);
            (0..100).map(|_| s.sample(&mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }

    /// The first draws of each law for one seed, pinned: an upgrade of rand_distr that moves
    /// them moves every seeded simulation (and docs/reproductions.md) and must be seen.
    #[test]
    fn seeded_draws_are_pinned() {
        let pinned: [(&str, [u64; 4]); 5] = [
            ("exp:1000", [1689, 1075, 59, 410]),
            ("normal:800,200", [1005, 437, 966, 819]),
            ("pareto:1.5,100", [101, 2302, 124, 153]),
            ("lognormal:800,200", [999, 497, 952, 795]),
            ("uniform:72..1468", [1457, 85, 1079, 809]),
        ];
        for (law, want) in pinned {
            let s = Sampler::new(&Dist::parse(law, ValueKind::Bytes).unwrap()).unwrap();
            let mut r = rng(7, 1);
            let got: Vec<u64> = (0..4).map(|_| s.sample_ns(&mut r)).collect();
            assert_eq!(got, want, "{law}");
        }
    }

    #[test]
    fn extreme_pareto_does_not_panic() {
        let s = Sampler::new(&Dist::Pareto {
            shape: 0.001,
            scale: 1.0,
        })
        .unwrap();
        let mut r = rng(1, 0);
        for _ in 0..1000 {
            let _ = s.sample_ns(&mut r);
            let size = s.sample_size(&mut r, MAX_PACKET_SIZE);
            assert!((1..=MAX_PACKET_SIZE).contains(&size));
        }
    }
}
