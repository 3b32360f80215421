//! Value ranges of sweeps: `"START..END:STEP"` (inclusive) in a parameter's unit, counted
//! before they are expanded so a range of a billion values is refused, not listed.

use flowlab_units::{parse_bytes, parse_count, parse_duration, parse_rate, Rate};

use crate::{FileError, Item, Value};

/// How a parameter's range bounds are read, and its values written back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// bit/s (`1M..10M:1M`).
    Rate,
    /// bytes (`100B..1500B:100B`).
    Bytes,
    /// durations (`1s..5s:1s`), written back in nanoseconds.
    Duration,
    /// plain counts (`10..100:10`).
    Count,
}

impl Unit {
    /// `s` in the unit's base (bit/s, bytes, ns, count).
    pub fn parse(self, s: &str) -> Result<u64, String> {
        match self {
            Unit::Rate => match parse_rate(s) {
                Ok(Rate::BitsPerSec(b)) => Ok(b),
                Ok(Rate::Max) => Err("'max' cannot bound a range".into()),
                Err(e) => Err(e.to_string()),
            },
            Unit::Bytes => parse_bytes(s).map_err(|e| e.to_string()),
            Unit::Duration => parse_duration(s)
                .map_err(|e| e.to_string())
                .and_then(|d| u64::try_from(d.as_nanos()).map_err(|_| "too long".to_string())),
            Unit::Count => parse_count(s).map_err(|e| e.to_string()),
        }
    }
}

/// `START..END:STEP` in base units, counted but not expanded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueRange {
    start: u64,
    step: u64,
    len: u64,
    unit: Unit,
}

impl ValueRange {
    /// Reads `s` as a range of at most `max` values; `None` when `s` is not a range at all.
    pub fn parse(unit: Unit, s: &str, max: u64) -> Option<Result<ValueRange, String>> {
        let (a, rest) = s.split_once("..")?;
        Some((|| {
            let (b, step) = rest
                .split_once(':')
                .ok_or_else(|| format!("range '{s}' needs a step: START..END:STEP"))?;
            let (a, b, step) = (
                unit.parse(a.trim())?,
                unit.parse(b.trim())?,
                unit.parse(step.trim())?,
            );
            if step == 0 || b < a {
                return Err(format!("range '{s}' needs START <= END and STEP > 0"));
            }
            let len = (b - a) / step + 1;
            if len > max {
                return Err(format!(
                    "range '{s}' has {len} values, more than the limit of {max}"
                ));
            }
            Ok(ValueRange {
                start: a,
                step,
                len,
                unit,
            })
        })())
    }

    /// How many values the range stands for.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The values as text a unit parser reads back (durations with `ns`).
    pub fn values(self) -> impl Iterator<Item = String> {
        let suffix = if self.unit == Unit::Duration {
            "ns"
        } else {
            ""
        };
        // Never overflows: every value is at most END.
        (0..self.len).map(move |i| format!("{}{suffix}", self.start + i * self.step))
    }
}

/// One value of a sweep as written: a value, or a range standing for many.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepValue {
    One(Item),
    /// A range and the line it was written on.
    Range(ValueRange, usize),
}

impl SweepValue {
    /// Reads `items` (a sweep's values), taking strings that are ranges in `unit` as ranges;
    /// with no unit, nothing is a range. `what` starts a bad range's message.
    pub fn read_all(
        items: Vec<Item>,
        unit: Option<Unit>,
        max: u64,
        what: &str,
    ) -> Result<Vec<SweepValue>, FileError> {
        let mut out = Vec::with_capacity(items.len());
        for item in items {
            let range = match (unit, item.value()) {
                (Some(u), Value::String(s)) => ValueRange::parse(u, s, max),
                _ => None,
            };
            out.push(match range {
                Some(Ok(r)) => SweepValue::Range(r, item.line()),
                Some(Err(m)) => return Err(item.error(format!("{what}: {m}"))),
                None => SweepValue::One(item),
            });
        }
        Ok(out)
    }

    pub fn count(&self) -> u64 {
        match self {
            SweepValue::One(_) => 1,
            SweepValue::Range(r, _) => r.len(),
        }
    }
}

/// How many values `values` stand for, saturating.
pub fn count_values(values: &[SweepValue]) -> u64 {
    values
        .iter()
        .fold(0u64, |acc, v| acc.saturating_add(v.count()))
}

/// The values themselves, each range's at the line it was written on; call only once their
/// count is known to be within bounds.
pub fn expand_values(values: Vec<SweepValue>) -> Vec<Item> {
    let mut out = Vec::new();
    for v in values {
        match v {
            SweepValue::One(item) => out.push(item),
            SweepValue::Range(r, line) => out.extend(r.values().map(|t| Item::string(line, t))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_in_each_unit() {
        let values = |unit, s| {
            ValueRange::parse(unit, s, 100)
                .unwrap()
                .unwrap()
                .values()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            values(Unit::Rate, "1M..3M:1M"),
            ["1000000", "2000000", "3000000"]
        );
        assert_eq!(
            values(Unit::Bytes, "1KiB..2KiB:512"),
            ["1024", "1536", "2048"]
        );
        assert_eq!(
            values(Unit::Duration, "1s..2s:1s"),
            ["1000000000ns", "2000000000ns"]
        );
        assert_eq!(values(Unit::Count, "10..35:10"), ["10", "20", "30"]);
        assert!(ValueRange::parse(Unit::Count, "1M", 100).is_none());
    }

    #[test]
    fn bad_ranges_say_why() {
        let err = |unit, s| ValueRange::parse(unit, s, 100).unwrap().unwrap_err();
        assert!(err(Unit::Count, "1..5").contains("needs a step"));
        assert!(err(Unit::Count, "5..1:1").contains("START <= END"));
        assert!(err(Unit::Count, "1..5:0").contains("STEP > 0"));
        assert!(err(Unit::Rate, "1M..max:1M").contains("'max' cannot bound"));
        assert!(err(Unit::Count, "1..1000:1").contains("1000 values, more than the limit of 100"));
    }

    #[test]
    fn sweep_values_are_counted_then_expanded() {
        let items = vec![
            Item::new(3, Value::Integer(7)),
            Item::string(4, "1..3:1"),
            Item::string(5, "not a range"),
        ];
        let values = SweepValue::read_all(items.clone(), Some(Unit::Count), 10, "sweep").unwrap();
        assert_eq!(count_values(&values), 5);
        let out = expand_values(values);
        let texts: Vec<_> = out
            .iter()
            .map(|i| (i.line(), i.scalar_text().unwrap()))
            .collect();
        assert_eq!(
            texts,
            [(3, "7"), (4, "1"), (4, "2"), (4, "3"), (5, "not a range")]
                .map(|(l, t)| (l, t.to_string()))
        );
        let none = SweepValue::read_all(items.clone(), None, 10, "sweep").unwrap();
        assert_eq!(count_values(&none), 3);
        let e = SweepValue::read_all(
            vec![Item::string(9, "1..100:1")],
            Some(Unit::Count),
            10,
            "sweep",
        )
        .unwrap_err();
        assert_eq!(e.line, Some(9));
        assert!(
            e.message
                .starts_with("sweep: range '1..100:1' has 100 values"),
            "{e}"
        );
    }
}
