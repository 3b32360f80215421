//! Units as people type them on the command line, and as people like to read them.
//!
//! The prefixes `k`, `M`, `G` and `T` are decimal (SI: 10^3, 10^6, 10^9, 10^12) because
//! network rates are quoted that way; the prefix letter's case does not matter, since
//! nobody means millibits. `Ki`, `Mi`, `Gi` and `Ti` are binary (2^10 ... 2^40) and are
//! accepted for byte sizes only. Fractions are allowed (`1.5G`) but the result must be a
//! whole number of the base unit, so parsing is exact decimal arithmetic, never float
//! rounding. Every parser returns a [`UnitError`] whose message fits on one line, so the
//! functions can be used directly as clap `value_parser`s.

pub mod fit;

use std::time::Duration;

/// A parse failure, phrased so that clap can print it as-is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} '{input}': {expected}")]
pub struct UnitError {
    pub kind: &'static str,
    pub input: String,
    pub expected: &'static str,
}

/// A target send rate; `Max` means "as fast as the path allows".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    Max,
    BitsPerSec(u64),
}

impl Rate {
    /// The rate in bit/s; `None` for `Max`.
    pub fn bits_per_sec(self) -> Option<u64> {
        match self {
            Rate::Max => None,
            Rate::BitsPerSec(r) => Some(r),
        }
    }
}

const RATE_EXPECTED: &str =
    "expected a number with an optional k, M, G or T suffix (2M, 500k, 1.5G) or 'max'";
const RATE_ZERO: &str = "must be greater than zero (use 'max' for no limit)";
const RATE_FRACTION: &str = "must be a whole number of bits per second";
const RATE_TOO_LARGE: &str = "too large (at most 18446744 Tbit/s)";

/// Parses a bit rate such as `2M`, `500k`, `1.5Gbit/s` or `max`.
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let error = |expected| unit_error("rate", s, expected);
    if s.trim().eq_ignore_ascii_case("max") {
        return Ok(Rate::Max);
    }
    let (number, rest) = split_number(s).ok_or_else(|| error(RATE_EXPECTED))?;
    let (multiplier, unit) = decimal_prefix(rest);
    if !is_bit_rate_unit(unit) {
        return Err(error(RATE_EXPECTED));
    }
    match number.scale(multiplier) {
        Scaled::Whole(0) => Err(error(RATE_ZERO)),
        Scaled::Whole(bits) => u64::try_from(bits)
            .map(Rate::BitsPerSec)
            .map_err(|_| error(RATE_TOO_LARGE)),
        Scaled::Fraction => Err(error(RATE_FRACTION)),
        Scaled::Overflow => Err(error(RATE_TOO_LARGE)),
    }
}

const BYTES_EXPECTED: &str =
    "expected a number of bytes with an optional k, M, G, T (decimal) or Ki, Mi, Gi, Ti (binary) suffix and optional B (1500, 64k, 64KiB, 1MB)";
const BYTES_FRACTION: &str = "must be a whole number of bytes";
const BYTES_TOO_LARGE: &str = "too large (must fit in 64 bits)";

/// Parses a byte size such as `1500`, `64k`, `64KiB` or `1.5MB`.
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    let error = |expected| unit_error("size", s, expected);
    let (number, rest) = split_number(s).ok_or_else(|| error(BYTES_EXPECTED))?;
    let (multiplier, unit) = byte_prefix(rest);
    if !(unit.is_empty() || unit == "B") {
        return Err(error(BYTES_EXPECTED));
    }
    match number.scale(multiplier) {
        Scaled::Whole(bytes) => u64::try_from(bytes).map_err(|_| error(BYTES_TOO_LARGE)),
        Scaled::Fraction => Err(error(BYTES_FRACTION)),
        Scaled::Overflow => Err(error(BYTES_TOO_LARGE)),
    }
}

const COUNT_EXPECTED: &str =
    "expected a whole number with an optional k, M, G or T suffix (1000, 10k, 1M)";
const COUNT_FRACTION: &str = "must be a whole number";
const COUNT_TOO_LARGE: &str = "too large (must fit in 64 bits)";

/// Parses a count such as `1000`, `10k` or `1.5M`.
pub fn parse_count(s: &str) -> Result<u64, UnitError> {
    let error = |expected| unit_error("count", s, expected);
    let (number, rest) = split_number(s).ok_or_else(|| error(COUNT_EXPECTED))?;
    let (multiplier, unit) = decimal_prefix(rest);
    if !unit.is_empty() {
        return Err(error(COUNT_EXPECTED));
    }
    match number.scale(multiplier) {
        Scaled::Whole(count) => u64::try_from(count).map_err(|_| error(COUNT_TOO_LARGE)),
        Scaled::Fraction => Err(error(COUNT_FRACTION)),
        Scaled::Overflow => Err(error(COUNT_TOO_LARGE)),
    }
}

const SWITCH_EXPECTED: &str = "expected on or off";

/// Parses a switch: `on`, `yes`, `true` or `off`, `no`, `false`, in any case.
pub fn parse_switch(s: &str) -> Result<bool, UnitError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "yes" | "true" => Ok(true),
        "off" | "no" | "false" => Ok(false),
        _ => Err(unit_error("switch", s, SWITCH_EXPECTED)),
    }
}

const BIT_RATE_EXPECTED: &str = "expected a number of bit/s (2M, 500k), not 'max'";

/// Parses a rate that must be a number of bit/s (`2M`), not `max`.
pub fn parse_bit_rate(s: &str) -> Result<u64, UnitError> {
    match parse_rate(s)? {
        Rate::BitsPerSec(r) => Ok(r),
        Rate::Max => Err(unit_error("rate", s, BIT_RATE_EXPECTED)),
    }
}

const PERCENT_EXPECTED: &str = "expected a percentage above 0 such as 2% (or a fraction: 0.02)";

/// Parses a share such as `2%` or `0.02` as a fraction above 0 and below 10 (1000 %).
pub fn parse_percent(s: &str) -> Result<f64, UnitError> {
    let t = s.trim();
    match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .ok()
    .filter(|v| *v > 0.0 && *v < 10.0)
    .ok_or_else(|| unit_error("percentage", s, PERCENT_EXPECTED))
}

const CPUS_EXPECTED: &str = "expected CPU numbers and ranges such as 0, 2-3 or 0,2-3";
/// More CPUs than any machine flowlab runs on: bounds what a range may expand to.
const MAX_CPU: u64 = 4095;

/// Parses a CPU list as `taskset -c` takes it (`0`, `0,2`, `1-3`, `0,2-3`): sorted, no repeats.
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, UnitError> {
    let error = || unit_error("CPU list", s, CPUS_EXPECTED);
    let number = |t: &str| {
        t.trim()
            .parse::<u64>()
            .ok()
            .filter(|&n| n <= MAX_CPU)
            .ok_or_else(error)
    };
    let mut cpus = Vec::new();
    for part in s.split(',') {
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => (number(part)?, number(part)?),
        };
        if first > last {
            return Err(error());
        }
        cpus.extend((first..=last).map(|c| c as usize));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A CPU list as one flag value (clap reads a `Vec` field as repeated values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::str::FromStr for CpuList {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_cpu_list(s).map(CpuList)
    }
}

/// A limit's rate in bit/s; `None` for 'unlimited' (also 'max').
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit(pub Option<u64>);

impl std::str::FromStr for RateLimit {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        match s {
            "unlimited" => Ok(RateLimit(None)),
            _ => parse_rate(s).map(|r| RateLimit(r.bits_per_sec())),
        }
    }
}

const DURATION_EXPECTED: &str =
    "expected a number with a unit h, m, s, ms, us or ns (10s, 1.5s, 500ms, 1m30s); a bare number is seconds";
const DURATION_FRACTION: &str = "must be a whole number of nanoseconds";
const DURATION_TOO_LARGE: &str = "too large";

/// Parses a duration such as `10s`, `500ms`, `1.5s`, `1m30s` or `10` (seconds).
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let error = |expected| unit_error("duration", s, expected);
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(error(DURATION_EXPECTED));
    }
    let mut total_ns: u128 = 0;
    let mut components = 0;
    while !rest.is_empty() {
        let (number, after_number) = split_number(rest).ok_or_else(|| error(DURATION_EXPECTED))?;
        let unit_len = after_number
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after_number.len());
        let (unit, after_unit) = after_number.split_at(unit_len);
        let unit = unit.trim();
        let ns_per_unit = match unit {
            "" if components == 0 && after_unit.is_empty() => 1_000_000_000,
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(error(DURATION_EXPECTED)),
        };
        let component_ns = match number.scale(ns_per_unit) {
            Scaled::Whole(ns) => ns,
            Scaled::Fraction => return Err(error(DURATION_FRACTION)),
            Scaled::Overflow => return Err(error(DURATION_TOO_LARGE)),
        };
        total_ns = total_ns
            .checked_add(component_ns)
            .ok_or_else(|| error(DURATION_TOO_LARGE))?;
        components += 1;
        rest = after_unit.trim_start();
    }
    let secs = u64::try_from(total_ns / 1_000_000_000).map_err(|_| error(DURATION_TOO_LARGE))?;
    // The remainder is below 10^9, so it always fits.
    let nanos = (total_ns % 1_000_000_000) as u32;
    Ok(Duration::new(secs, nanos))
}

/// Formats a bit rate with 3 significant digits: `2.00 Mbit/s`, `950 kbit/s`.
pub fn format_rate(bits_per_sec: f64) -> String {
    format_si(bits_per_sec, &["", "k", "M", "G", "T"], "bit/s")
}

/// Formats a byte amount with decimal prefixes: `1.50 MB`, `512 B`.
pub fn format_bytes(bytes: f64) -> String {
    format_si(bytes, &["", "k", "M", "G", "T"], "B")
}

/// Formats nanoseconds in the most readable of ns, µs, ms and s: `12.3 µs`, `2.50 s` (human
/// text; parsing takes `us` too, for those who cannot type µ).
pub fn format_duration_ns(ns: f64) -> String {
    format_si(ns, &["ns", "µs", "ms", "s"], "")
}

/// Formats a wall-clock span as people say it: `45 s`, `4 min 48 s`, `2 h 05 min`.
pub fn format_wall_time(secs: u64) -> String {
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {} s", secs / 60, secs % 60),
        _ => format!("{} h {:02} min", secs / 3600, secs % 3600 / 60),
    }
}

/// Formats a count or a per-second count (e.g. packets/s): `1.23 k`, `950`, `2.00 M`.
pub fn format_count(x: f64) -> String {
    format_si(x, &["", "k", "M", "G", "T"], "")
}

fn unit_error(kind: &'static str, input: &str, expected: &'static str) -> UnitError {
    UnitError {
        kind,
        input: input.to_owned(),
        expected,
    }
}

/// A non-negative decimal number kept exact: `digits / 10^fraction_digits`.
struct Decimal {
    /// `None` when the digits alone overflow, so the error can say "too large".
    digits: Option<u128>,
    fraction_digits: u32,
}

enum Scaled {
    Whole(u128),
    Fraction,
    Overflow,
}

impl Decimal {
    /// Multiplies exactly, so that `1.1G` is 1_100_000_000 and `1.5` bytes is rejected.
    fn scale(&self, multiplier: u128) -> Scaled {
        let Some(product) = self
            .digits
            .and_then(|digits| digits.checked_mul(multiplier))
        else {
            return Scaled::Overflow;
        };
        let Some(divisor) = 10u128.checked_pow(self.fraction_digits) else {
            return Scaled::Overflow;
        };
        if product % divisor == 0 {
            Scaled::Whole(product / divisor)
        } else {
            Scaled::Fraction
        }
    }
}

/// Splits leading `123` or `1.5` (after whitespace) from the rest; `None` when there is
/// no number.
fn split_number(s: &str) -> Option<(Decimal, &str)> {
    let s = s.trim_start();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, rest) = s.split_at(end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let mut digits = Some(0u128);
    for c in whole.chars().chain(fraction.chars()) {
        let digit = u128::from(c.to_digit(10)?);
        digits = digits.and_then(|d| d.checked_mul(10)?.checked_add(digit));
    }
    let fraction_digits = u32::try_from(fraction.len()).ok()?;
    Some((
        Decimal {
            digits,
            fraction_digits,
        },
        rest.trim(),
    ))
}

/// Splits an optional decimal prefix letter off a unit, returning its multiplier.
fn decimal_prefix(unit: &str) -> (u128, &str) {
    let mut chars = unit.chars();
    let multiplier = match chars.next().map(|c| c.to_ascii_lowercase()) {
        Some('k') => 1_000,
        Some('m') => 1_000_000,
        Some('g') => 1_000_000_000,
        Some('t') => 1_000_000_000_000,
        _ => return (1, unit),
    };
    (multiplier, chars.as_str().trim_start())
}

/// Like [`decimal_prefix`], but also understands the binary `Ki`, `Mi`, `Gi`, `Ti`.
fn byte_prefix(unit: &str) -> (u128, &str) {
    let (decimal_multiplier, rest) = decimal_prefix(unit);
    let Some(after_i) = rest.strip_prefix('i') else {
        return (decimal_multiplier, rest);
    };
    let binary_multiplier = match decimal_multiplier {
        1_000 => 1u128 << 10,
        1_000_000 => 1 << 20,
        1_000_000_000 => 1 << 30,
        1_000_000_000_000 => 1 << 40,
        _ => return (decimal_multiplier, rest),
    };
    (binary_multiplier, after_i)
}

/// `B/s` and `Bps` are rejected on purpose: they usually mean bytes, not bits.
fn is_bit_rate_unit(unit: &str) -> bool {
    matches!(unit, "" | "bps" | "b/s")
        || matches!(
            unit.to_ascii_lowercase().as_str(),
            "bit" | "bits" | "bit/s" | "bits/s"
        )
}

/// Shared 3-significant-digit formatter. `prefixes[i]` is the unit of `1000^i`.
fn format_si(value: f64, prefixes: &[&str], unit: &str) -> String {
    let join = |number: String, index: usize| {
        let label = format!("{}{unit}", prefixes.get(index).copied().unwrap_or(""));
        if label.is_empty() {
            number
        } else {
            format!("{number} {label}")
        }
    };
    if !value.is_finite() {
        return join("n/a".to_owned(), 0);
    }
    let sign = if value < 0.0 { "-" } else { "" };
    let magnitude = value.abs();
    if magnitude == 0.0 || (magnitude.fract() == 0.0 && magnitude < 1000.0) {
        return join(format!("{sign}{magnitude}"), 0);
    }
    let last_index = prefixes.len().saturating_sub(1);
    let mut index = 0;
    while index < last_index && magnitude >= 1000f64.powi(index as i32 + 1) {
        index += 1;
    }
    loop {
        let scaled = magnitude / 1000f64.powi(index as i32);
        // Above the smallest prefix a value below 1 only comes from a carry and shows as 1.00.
        let decimals =
            decimals_for_three_significant_digits(if index > 0 { scaled.max(1.0) } else { scaled });
        let text = format!("{scaled:.decimals$}");
        // Rounding may carry into the next prefix, e.g. 999.7k -> "1000k" -> "1.00 M".
        let carried = text.parse::<f64>().is_ok_and(|rounded| rounded >= 1000.0);
        if carried && index < last_index {
            index += 1;
            continue;
        }
        return join(format!("{sign}{text}"), index);
    }
}

fn decimals_for_three_significant_digits(scaled: f64) -> usize {
    if scaled >= 100.0 {
        0
    } else if scaled >= 10.0 {
        1
    } else if scaled >= 1.0 {
        2
    } else {
        // Only reachable at the smallest prefix; cap so tiny values stay readable.
        let leading_zeros = (-scaled.log10()).floor() as usize;
        (leading_zeros + 3).min(12)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_as_taskset_takes_them() {
        assert_eq!(parse_cpu_list("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_list("3,0-1,1").unwrap(), vec![0, 1, 3]);
        assert_eq!(parse_cpu_list("2-4").unwrap(), vec![2, 3, 4]);
        for bad in ["", "a", "1-", "3-1", "-1", "0,,1", "99999", "1.5"] {
            let e = parse_cpu_list(bad).unwrap_err().to_string();
            assert!(e.contains("CPU list"), "{bad}: {e}");
        }
    }
    use proptest::prelude::*;

    #[test]
    fn parse_rate_accepts_common_forms() {
        let cases = [
            ("2M", 2_000_000),
            ("2m", 2_000_000),
            ("500k", 500_000),
            ("500K", 500_000),
            ("1.5G", 1_500_000_000),
            ("1.1G", 1_100_000_000),
            ("100", 100),
            ("1T", 1_000_000_000_000),
            ("2Mbit", 2_000_000),
            ("2Mbps", 2_000_000),
            ("2Mbit/s", 2_000_000),
            ("2Mb/s", 2_000_000),
            ("2 Mbit/s", 2_000_000),
            ("2M bit/s", 2_000_000),
            ("2.00 Mbit/s", 2_000_000),
            (" 10k ", 10_000),
            ("0.5k", 500),
            (".5k", 500),
            ("5.", 5),
            ("18446744073709551615", u64::MAX),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_rate(input),
                Ok(Rate::BitsPerSec(expected)),
                "input {input:?}"
            );
        }
        assert_eq!(parse_rate("max"), Ok(Rate::Max));
        assert_eq!(parse_rate("MAX"), Ok(Rate::Max));
    }

    #[test]
    fn parse_rate_rejects_bad_input() {
        let cases = [
            ("", RATE_EXPECTED),
            ("M", RATE_EXPECTED),
            ("2Q", RATE_EXPECTED),
            ("-2M", RATE_EXPECTED),
            ("NaN", RATE_EXPECTED),
            ("inf", RATE_EXPECTED),
            ("1e6", RATE_EXPECTED),
            ("1.2.3", RATE_EXPECTED),
            ("2MB/s", RATE_EXPECTED),
            ("2MBps", RATE_EXPECTED),
            ("2Mi", RATE_EXPECTED),
            ("2M2", RATE_EXPECTED),
            ("0", RATE_ZERO),
            ("0.0M", RATE_ZERO),
            ("1.5", RATE_FRACTION),
            ("18446744073709551616", RATE_TOO_LARGE),
            ("99999999999T", RATE_TOO_LARGE),
            (
                "9999999999999999999999999999999999999999999",
                RATE_TOO_LARGE,
            ),
        ];
        for (input, expected) in cases {
            let error = parse_rate(input).expect_err(input);
            assert_eq!(error.expected, expected, "input {input:?}");
            assert_eq!(error.kind, "rate");
            assert_eq!(error.input, input);
        }
    }

    #[test]
    fn error_message_is_one_clear_line() {
        let message = parse_rate("2Q").expect_err("2Q is invalid").to_string();
        assert_eq!(
            message,
            "invalid rate '2Q': expected a number with an optional k, M, G or T suffix (2M, 500k, 1.5G) or 'max'"
        );
        for message in [
            message,
            parse_bytes("x").expect_err("invalid").to_string(),
            parse_duration("x").expect_err("invalid").to_string(),
            parse_count("x").expect_err("invalid").to_string(),
        ] {
            assert!(!message.contains('\n'), "{message}");
        }
    }

    #[test]
    fn parse_bytes_cases() {
        let good = [
            ("1500", 1500),
            ("1500B", 1500),
            ("0", 0),
            ("64k", 64_000),
            ("64kB", 64_000),
            ("64KB", 64_000),
            ("64Ki", 65_536),
            ("64KiB", 65_536),
            ("1M", 1_000_000),
            ("1MiB", 1_048_576),
            ("1GiB", 1 << 30),
            ("1Ti", 1 << 40),
            ("1.5k", 1500),
            ("1.5Ki", 1536),
            ("1.50 MB", 1_500_000),
        ];
        for (input, expected) in good {
            assert_eq!(parse_bytes(input), Ok(expected), "input {input:?}");
        }
        let bad = [
            ("", BYTES_EXPECTED),
            ("k", BYTES_EXPECTED),
            ("64kb", BYTES_EXPECTED),
            ("64Kib", BYTES_EXPECTED),
            ("-1", BYTES_EXPECTED),
            ("1Q", BYTES_EXPECTED),
            ("1.5", BYTES_FRACTION),
            ("1.0001k", BYTES_FRACTION),
            ("20000000T", BYTES_TOO_LARGE),
        ];
        for (input, expected) in bad {
            let error = parse_bytes(input).expect_err(input);
            assert_eq!(error.expected, expected, "input {input:?}");
            assert_eq!(error.kind, "size");
        }
    }

    #[test]
    fn parse_duration_cases() {
        let good = [
            ("10s", Duration::from_secs(10)),
            ("10", Duration::from_secs(10)),
            ("2m", Duration::from_secs(120)),
            ("2min", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("500ms", Duration::from_millis(500)),
            ("250us", Duration::from_micros(250)),
            ("250µs", Duration::from_micros(250)),
            ("100ns", Duration::from_nanos(100)),
            ("1.5s", Duration::from_millis(1500)),
            ("0.5", Duration::from_millis(500)),
            ("0s", Duration::ZERO),
            ("1m30s", Duration::from_secs(90)),
            ("1h 2m 3.5s", Duration::from_millis(3_723_500)),
            (" 10 s ", Duration::from_secs(10)),
        ];
        for (input, expected) in good {
            assert_eq!(parse_duration(input), Ok(expected), "input {input:?}");
        }
        let bad = [
            ("", DURATION_EXPECTED),
            ("s", DURATION_EXPECTED),
            ("-1s", DURATION_EXPECTED),
            ("10x", DURATION_EXPECTED),
            ("1m30", DURATION_EXPECTED),
            ("1.2.3s", DURATION_EXPECTED),
            ("abc", DURATION_EXPECTED),
            ("0.5ns", DURATION_FRACTION),
            ("99999999999999999999999h", DURATION_TOO_LARGE),
        ];
        for (input, expected) in bad {
            let error = parse_duration(input).expect_err(input);
            assert_eq!(error.expected, expected, "input {input:?}");
            assert_eq!(error.kind, "duration");
        }
    }

    #[test]
    fn parse_count_cases() {
        let good = [
            ("1000", 1000),
            ("0", 0),
            ("10k", 10_000),
            ("10K", 10_000),
            ("1M", 1_000_000),
            ("1.5M", 1_500_000),
            ("2G", 2_000_000_000),
        ];
        for (input, expected) in good {
            assert_eq!(parse_count(input), Ok(expected), "input {input:?}");
        }
        let bad = [
            ("", COUNT_EXPECTED),
            ("10x", COUNT_EXPECTED),
            ("10Ki", COUNT_EXPECTED),
            ("-5", COUNT_EXPECTED),
            ("1.5", COUNT_FRACTION),
            ("20000000T", COUNT_TOO_LARGE),
        ];
        for (input, expected) in bad {
            let error = parse_count(input).expect_err(input);
            assert_eq!(error.expected, expected, "input {input:?}");
            assert_eq!(error.kind, "count");
        }
    }

    #[test]
    fn format_cases() {
        let cases = [
            (format_rate(2e6), "2.00 Mbit/s"),
            (format_rate(950e3), "950 kbit/s"),
            (format_rate(12.3e9), "12.3 Gbit/s"),
            (format_rate(0.0), "0 bit/s"),
            (format_rate(5.0), "5 bit/s"),
            (format_rate(1.5), "1.50 bit/s"),
            (format_rate(999_700.0), "1.00 Mbit/s"),
            (format_rate(999.7), "1.00 kbit/s"),
            (format_rate(5e15), "5000 Tbit/s"),
            (format_rate(f64::NAN), "n/a bit/s"),
            (format_bytes(1.5e6), "1.50 MB"),
            (format_bytes(512.0), "512 B"),
            (format_bytes(64_000.0), "64.0 kB"),
            (format_duration_ns(12_300.0), "12.3 µs"),
            (format_duration_ns(1_234_000.0), "1.23 ms"),
            (format_duration_ns(2.5e9), "2.50 s"),
            (format_duration_ns(850.0), "850 ns"),
            (format_duration_ns(-1500.0), "-1.50 µs"),
            (format_duration_ns(0.25), "0.250 ns"),
            (format_duration_ns(3600e9), "3600 s"),
            (format_count(1234.0), "1.23 k"),
            (format_count(950.0), "950"),
            (format_count(2e6), "2.00 M"),
            (format_count(0.0), "0"),
            (format_count(f64::INFINITY), "n/a"),
        ];
        for (actual, expected) in cases {
            assert_eq!(actual, expected);
        }
    }

    proptest! {
        #[test]
        fn formatted_rate_parses_back_within_rounding(bits in 1u64..1_000_000_000_000_000_000) {
            let text = format_rate(bits as f64);
            let parsed = match parse_rate(&text) {
                Ok(Rate::BitsPerSec(parsed)) => parsed,
                other => return Err(TestCaseError::fail(format!("{text:?} parsed as {other:?}"))),
            };
            let relative_error = (parsed as f64 - bits as f64).abs() / bits as f64;
            // 3 significant digits: at worst half a unit in the third digit of 1.00.
            prop_assert!(relative_error <= 0.005 + 1e-12, "{bits} -> {text} -> {parsed}");
        }

        #[test]
        fn formatted_bytes_parse_back_within_rounding(bytes in 0u64..1_000_000_000_000_000) {
            let text = format_bytes(bytes as f64);
            let parsed = parse_bytes(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let tolerance = 0.005 * bytes as f64 + 1e-9;
            prop_assert!((parsed as f64 - bytes as f64).abs() <= tolerance, "{bytes} -> {text}");
        }

        #[test]
        fn parsers_never_panic(input in "\\PC{0,24}") {
            let _ = parse_rate(&input);
            let _ = parse_bytes(&input);
            let _ = parse_duration(&input);
            let _ = parse_count(&input);
        }

        #[test]
        fn integer_rates_parse_exactly(bits in 1u64..) {
            prop_assert_eq!(parse_rate(&bits.to_string()), Ok(Rate::BitsPerSec(bits)));
        }
    }

    #[test]
    fn switches_percentages_and_bit_rates() {
        assert_eq!(parse_switch("On"), Ok(true));
        assert_eq!(parse_switch("no"), Ok(false));
        assert!(parse_switch("maybe").is_err());
        assert_eq!(parse_percent("2%"), Ok(0.02));
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        for bad in ["0%", "-1%", "x", "1000%", "NaN"] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_bit_rate("1.5M"), Ok(1_500_000));
        let e = parse_bit_rate("max").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid rate 'max': expected a number of bit/s (2M, 500k), not 'max'"
        );
    }

    #[test]
    fn limits_and_cpu_lists_are_single_flag_values() {
        assert_eq!("unlimited".parse(), Ok(RateLimit(None)));
        assert_eq!("max".parse(), Ok(RateLimit(None)));
        assert_eq!("1G".parse(), Ok(RateLimit(Some(1_000_000_000))));
        assert_eq!(Rate::Max.bits_per_sec(), None);
        assert!("fast".parse::<RateLimit>().is_err());
        assert_eq!("0,2-3".parse(), Ok(CpuList(vec![0, 2, 3])));
        assert!("3-1".parse::<CpuList>().is_err());
    }

    #[test]
    fn wall_time_reads_as_people_say_it() {
        assert_eq!(format_wall_time(45), "45 s");
        assert_eq!(format_wall_time(288), "4 min 48 s");
        assert_eq!(format_wall_time(7500), "2 h 05 min");
    }
}
