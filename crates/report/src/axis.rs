//! Axes as people read them: SI-prefixed tick labels ("2 M", "350 µs") and the choice between a
//! linear and a logarithmic scale.

use crate::metrics::Unit;

/// How an axis maps values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    /// Logarithmic when the values span more than a decade (see [`wants_log`]).
    #[default]
    Auto,
    Linear,
    Log,
}

impl std::str::FromStr for Scale {
    type Err = String;

    fn from_str(name: &str) -> Result<Scale, String> {
        match name {
            "auto" => Ok(Scale::Auto),
            "linear" => Ok(Scale::Linear),
            "log" => Ok(Scale::Log),
            _ => Err(format!(
                "unknown scale '{name}' (expected auto, linear or log)"
            )),
        }
    }
}

impl Scale {
    /// Whether an axis over `values` is drawn logarithmic.
    pub fn is_log(self, values: impl Iterator<Item = f64>) -> bool {
        match self {
            Scale::Auto => wants_log(values),
            Scale::Linear => false,
            Scale::Log => true,
        }
    }
}

/// A series reads better on a log axis when all its values are positive and the largest is
/// more than ten times the smallest: a 50 µs line then no longer lies flat beside 232 ms.
pub fn wants_log(values: impl Iterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for v in values.filter(|v| v.is_finite()) {
        if v <= 0.0 {
            return false;
        }
        lo = lo.min(v);
        hi = hi.max(v);
    }
    lo.is_finite() && hi > 10.0 * lo
}

/// Ticks of a log axis over `lo..hi`: 1, 2 and 5 of each decade, or the decades alone when
/// that would be more than `max` ticks (flent's and gnuplot's habit), or every second, third,
/// ... decade when even those are too many.
pub fn log_ticks(lo: f64, hi: f64, max: usize) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new();
    }
    let decades = (lo.log10().floor() as i32)..=(hi.log10().ceil() as i32);
    let within = |steps: &[f64]| -> Vec<f64> {
        decades
            .clone()
            .flat_map(|d| steps.iter().map(move |m| m * 10f64.powi(d)))
            .filter(|v| (lo..=hi).contains(v))
            .collect()
    };
    let fine = within(&[1.0, 2.0, 5.0]);
    if fine.len() <= max {
        return fine;
    }
    let whole = within(&[1.0]);
    let every = whole.len().div_ceil(max.max(1));
    whole.into_iter().step_by(every).collect()
}

const PREFIXES: [&str; 9] = ["p", "n", "µ", "m", "", "k", "M", "G", "T"];
/// Index of the empty prefix in `PREFIXES`.
const UNPREFIXED: i32 = 4;

/// A number with at most three significant digits, trailing zeros dropped: 2, 2.5, 350, 0.125.
fn short(v: f64) -> String {
    let digits = 2 - v.abs().log10().floor() as i32;
    let text = format!("{v:.*}", digits.max(0) as usize);
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

/// `v` with an SI prefix and `symbol`: `si(2e6, "")` is "2 M", `si(3.5e-4, "s")` "350 µs".
pub fn si(v: f64, symbol: &str) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v} {symbol}").trim_end().to_string();
    }
    let power = prefix_power(v);
    let mantissa = short(v / 1e3f64.powi(power));
    format!("{mantissa} {}{symbol}", prefix(power))
        .trim_end()
        .to_string()
}

/// The power of 1000 whose prefix suits `v` (nonzero, finite).
fn prefix_power(v: f64) -> i32 {
    let mut power = (v.abs().log10() / 3.0).floor() as i32;
    // 999.95 k rounds to "1000 k": say 1 M.
    let rounded = short(v / 1e3f64.powi(power)).parse::<f64>();
    if rounded.is_ok_and(|m| m.abs() >= 1e3) {
        power += 1;
    }
    power.clamp(-UNPREFIXED, PREFIXES.len() as i32 - 1 - UNPREFIXED)
}

fn prefix(power: i32) -> &'static str {
    PREFIXES[(power + UNPREFIXED) as usize]
}

/// An interval's numbers (mean first, then its bounds) under one prefix, with three
/// significant digits of the mean or as many decimals as `resolution` (a half-width) needs
/// to show: "2.0000", "1.9998", "2.0008" and "Mbit/s". Zeros read "0".
pub fn shared(values: &[f64], resolution: f64, unit: Unit) -> (Vec<String>, String) {
    let finite = || {
        values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && *v != 0.0)
    };
    let anchor = finite().next().unwrap_or(0.0);
    let largest = finite().fold(0.0f64, |m, v| m.max(v.abs()));
    let prefixed = unit.si() && anchor != 0.0 && !(unit == Unit::Count && largest < 1.0);
    let power = if prefixed { prefix_power(anchor) } else { 0 };
    let scale = 1e3f64.powi(power);
    let digits = |v: f64| match v.is_finite() && v > 0.0 {
        true => -((v / scale).log10().floor() as i32),
        false => 0,
    };
    let decimals = (digits(anchor.abs()) + 2)
        .max(digits(resolution))
        .clamp(0, 9) as usize;
    let numbers = values
        .iter()
        .map(|v| match *v == 0.0 {
            true => "0".to_string(),
            false => format!("{:.decimals$}", v / scale),
        })
        .collect();
    (numbers, format!("{}{}", prefix(power), unit.symbol()))
}

/// A tick's label for a value already in `unit` (seconds, bit/s, ...).
pub fn tick(v: f64, unit: Unit) -> String {
    with_symbol(v, unit, unit.tick_symbol())
}

/// A value in `unit` as a table cell reads it, the whole unit after the number: "9.5 Mbit/s",
/// "350 µs", "0.5 %", "1.5 k".
pub fn value(v: f64, unit: Unit) -> String {
    match unit {
        Unit::Percent if v.is_finite() && v != 0.0 => format!("{} %", short(v)),
        // A value stands alone, so even zero carries its unit (a tick's axis names it).
        _ if v == 0.0 && !unit.symbol().is_empty() => format!("0 {}", unit.symbol()),
        _ => with_symbol(v, unit, unit.symbol()),
    }
}

fn with_symbol(v: f64, unit: Unit, symbol: &str) -> String {
    // Counts take no sub-unit prefix: a count of 0.8, not "800 m"; zero is "0" in any unit.
    let plain = !unit.si() || (unit == Unit::Count && v.abs() < 1.0);
    match plain {
        _ if v == 0.0 => "0".into(),
        false => si(v, symbol),
        true => short(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_take_si_prefixes() {
        assert_eq!(si(2e6, ""), "2 M");
        assert_eq!(si(3.5e-4, "s"), "350 µs");
        assert_eq!(si(0.232, "s"), "232 ms");
        assert_eq!(si(1500.0, "B"), "1.5 kB");
        assert_eq!(si(999.96e3, ""), "1 M");
        assert_eq!(si(12.0, ""), "12");
        assert_eq!(si(0.0, "s"), "0 s");
        assert_eq!(si(-2.5e-3, "s"), "-2.5 ms");
        assert_eq!(si(1e18, ""), "1000000 T");
        assert_eq!(tick(2.5e6, Unit::BitsPerSec), "2.5 M");
        assert_eq!(tick(5e-5, Unit::Seconds), "50 µs");
        assert_eq!(tick(1.25, Unit::Percent), "1.25");
        assert_eq!(tick(0.0, Unit::Percent), "0");
        assert_eq!(tick(0.0, Unit::Seconds), "0", "zero needs no unit");
        assert_eq!(tick(0.8, Unit::Count), "0.8");
        assert_eq!(tick(2500.0, Unit::Count), "2.5 k");
        assert_eq!(tick(0.001234, Unit::Percent), "0.00123");
        assert_eq!(tick(1000.0, Unit::Plain), "1000");
    }

    #[test]
    fn intervals_share_a_prefix_and_show_their_width() {
        let (n, unit) = shared(&[2.0e6, 1.9998e6, 2.0008e6], 200.0, Unit::BitsPerSec);
        assert_eq!(
            (n.join(" "), unit.as_str()),
            ("2.0000 1.9998 2.0008".into(), "Mbit/s")
        );
        let (n, unit) = shared(&[96.4e-6, 26.3e-6, 387e-6], 70e-6, Unit::Seconds);
        assert_eq!(
            (n.join(" "), unit.as_str()),
            ("96.4 26.3 387.0".into(), "µs")
        );
        let (n, unit) = shared(&[0.0, 0.0, 0.102], 0.102, Unit::Percent);
        assert_eq!((n.join(" "), unit.as_str()), ("0 0 0.102".into(), "%"));
        let (n, unit) = shared(&[-5.89e-6, -17.2e-6, 5.4e-6], 11.3e-6, Unit::Seconds);
        assert_eq!(
            (n.join(" "), unit.as_str()),
            ("-5.89 -17.20 5.40".into(), "µs")
        );
        let (n, unit) = shared(&[0.5, 0.2, 0.8], 0.3, Unit::Count);
        assert_eq!(
            (n.join(" "), unit.as_str()),
            ("0.500 0.200 0.800".into(), "")
        );
    }

    #[test]
    fn values_carry_their_whole_unit() {
        assert_eq!(value(9.5e6, Unit::BitsPerSec), "9.5 Mbit/s");
        assert_eq!(value(5.35e-5, Unit::Seconds), "53.5 µs");
        assert_eq!(value(0.2, Unit::Percent), "0.2 %");
        assert_eq!(value(2500.0, Unit::PerSec), "2.5 k/s");
        assert_eq!(value(1500.0, Unit::Bytes), "1.5 kB");
        assert_eq!(value(3.0, Unit::Count), "3");
        assert_eq!(value(0.0, Unit::BitsPerSec), "0 bit/s");
        assert_eq!(value(0.0, Unit::Percent), "0 %");
        assert_eq!(value(0.0, Unit::Count), "0");
        assert_eq!(value(f64::NAN, Unit::Percent), "NaN");
    }

    #[test]
    fn log_axes_for_series_spanning_more_than_a_decade() {
        assert!(wants_log([5e-5, 0.232].into_iter()));
        assert!(!wants_log([1.0, 10.0].into_iter()), "exactly a decade");
        assert!(
            !wants_log([0.0, 100.0].into_iter()),
            "zero has no logarithm"
        );
        assert!(!wants_log(std::iter::empty()));
        assert!(Scale::Auto.is_log([1.0, 11.0].into_iter()));
        assert!(!Scale::Linear.is_log([1.0, 1e6].into_iter()));
        assert!(Scale::Log.is_log([1.0, 2.0].into_iter()));
        assert_eq!("log".parse::<Scale>(), Ok(Scale::Log));
        let flags = crate::Scales::from_flags(Scale::Linear, false, true);
        assert_eq!((flags.x, flags.y), (Scale::Linear, Scale::Log));
        assert_eq!(
            log_ticks(80.0, 2500.0, 8),
            [100.0, 200.0, 500.0, 1000.0, 2000.0]
        );
        assert_eq!(log_ticks(1e-5, 1.0, 8), [1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0]);
        assert!(log_ticks(0.0, 1.0, 8).is_empty());
        // 26 decades: every third, so at most 9 ticks.
        let sparse = log_ticks(1e-15, 1e10, 9);
        assert!(sparse.len() <= 9 && sparse.len() >= 8, "{sparse:?}");
        assert_eq!((sparse[0], sparse[1]), (1e-15, 1e-12));
        assert!("ln"
            .parse::<Scale>()
            .unwrap_err()
            .contains("auto, linear or log"));
    }
}
