//! Typed reads of a table's fields, each error naming the line of the value at fault.

use std::fmt;

use flowlab_units::{parse_bytes, parse_count, parse_duration, parse_rate, Rate};

use crate::{FileError, Item, Table};

/// A table being read: its fields, its line (for "missing key" errors), and what it is called
/// in messages (`flow 'f1'`, `search`; empty for messages that start with the key alone).
#[derive(Debug, Clone)]
pub struct Reader<'t> {
    table: &'t Table,
    line: usize,
    what: String,
}

impl<'t> Reader<'t> {
    pub fn new(table: &'t Table, line: usize, what: impl Into<String>) -> Self {
        Reader {
            table,
            line,
            what: what.into(),
        }
    }

    /// Reads `item`, which must be a table.
    pub fn of(item: &'t Item, what: impl Into<String>) -> Result<Self, FileError> {
        let what = what.into();
        match item.as_table() {
            Some(t) => Ok(Reader::new(t, item.line(), what)),
            None => Err(item.error(format!(
                "{}: expected a table, found {}",
                name_or(&what, "value"),
                item.type_name()
            ))),
        }
    }

    /// The same table, called `what` in messages from now on (once its name is known).
    pub fn named(&self, what: impl Into<String>) -> Self {
        Reader::new(self.table, self.line, what)
    }

    pub fn line(&self) -> usize {
        self.line
    }

    /// What the table is called in messages.
    pub fn what(&self) -> &str {
        &self.what
    }

    pub fn table(&self) -> &'t Table {
        self.table
    }

    /// Refuses the first key (in file order) outside `allowed`.
    pub fn only(&self, allowed: &[&str]) -> Result<(), FileError> {
        match self
            .table
            .iter()
            .find(|(k, _)| !allowed.contains(&k.name.as_str()))
        {
            None => Ok(()),
            Some((k, _)) => Err(FileError::at(
                k.line,
                format!(
                    "{}: unknown key '{}' (expected one of: {})",
                    name_or(&self.what, "table"),
                    k.name,
                    allowed.join(", ")
                ),
            )),
        }
    }

    /// Refuses the first key (in file order) outside `allowed`, as a section of a file.
    pub fn only_sections(&self, allowed: &[&str]) -> Result<(), FileError> {
        match self
            .table
            .iter()
            .find(|(k, _)| !allowed.contains(&k.name.as_str()))
        {
            None => Ok(()),
            Some((k, _)) => Err(FileError::at(
                k.line,
                format!(
                    "unknown section '{}' (expected {})",
                    k.name,
                    one_of(allowed)
                ),
            )),
        }
    }

    pub fn get(&self, key: &str) -> Option<&'t Item> {
        self.table.get(key)
    }

    pub fn required(&self, key: &str) -> Result<&'t Item, FileError> {
        self.get(key).ok_or_else(|| {
            FileError::at(
                self.line,
                format!("{}: missing key '{key}'", name_or(&self.what, "table")),
            )
        })
    }

    /// An error about the value of `key`: `WHAT KEY: message`.
    pub fn error(&self, item: &Item, key: &str, message: impl fmt::Display) -> FileError {
        match self.what.as_str() {
            "" => item.error(format!("{key}: {message}")),
            what => item.error(format!("{what} {key}: {message}")),
        }
    }

    /// An error about the table as a whole, at its line: `WHAT: message`.
    pub fn table_error(&self, message: impl fmt::Display) -> FileError {
        FileError::at(
            self.line,
            format!("{}: {message}", name_or(&self.what, "table")),
        )
    }

    /// `key` read by `read`, or `None` when absent; `read`'s error is about the value.
    fn read<T>(
        &self,
        key: &str,
        read: impl FnOnce(&Item) -> Result<T, String>,
    ) -> Result<Option<T>, FileError> {
        match self.get(key) {
            None => Ok(None),
            Some(item) => read(item).map(Some).map_err(|m| self.error(item, key, m)),
        }
    }

    pub fn string(&self, key: &str) -> Result<Option<&'t str>, FileError> {
        match self.get(key) {
            None => Ok(None),
            Some(item) => match item.as_str() {
                Some(s) => Ok(Some(s)),
                None => Err(self.error(item, key, "expected a string")),
            },
        }
    }

    pub fn required_string(&self, key: &str) -> Result<&'t str, FileError> {
        self.required(key)?;
        Ok(self.string(key)?.unwrap_or_default())
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, FileError> {
        self.read(key, |item| match item.value() {
            crate::Value::Boolean(b) => Ok(*b),
            _ => Err("expected true or false".into()),
        })
    }

    /// A whole number >= 0: a TOML integer, or a string of digits.
    pub fn uint(&self, key: &str) -> Result<Option<u64>, FileError> {
        self.read(key, |item| {
            let text = match item.value() {
                crate::Value::Integer(i) => i.to_string(),
                crate::Value::String(s) => s.clone(),
                _ => item
                    .scalar_text()
                    .unwrap_or_else(|| item.type_name().into()),
            };
            match (item.value(), text.trim().parse::<u64>()) {
                (crate::Value::Integer(_) | crate::Value::String(_), Ok(n)) => Ok(n),
                _ => Err(format!("expected a whole number >= 0, got '{text}'")),
            }
        })
    }

    /// A finite number, integer or float, or a string of one; a trailing `%` is allowed.
    pub fn float(&self, key: &str) -> Result<Option<f64>, FileError> {
        self.read(key, |item| {
            let text = unit_text(item)?;
            match text.trim().trim_end_matches('%').parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(format!("expected a number, got '{text}'")),
            }
        })
    }

    /// A rate as typed on the command line (`2M`, `500k`, `max`), or a bare number of bit/s.
    pub fn rate(&self, key: &str) -> Result<Option<Rate>, FileError> {
        self.read(key, |item| {
            parse_rate(&unit_text(item)?).map_err(|e| e.to_string())
        })
    }

    /// A rate in bit/s; `max` is refused, `why_not_max` saying why.
    pub fn bit_rate(&self, key: &str, why_not_max: &str) -> Result<Option<u64>, FileError> {
        self.read(key, |item| {
            match parse_rate(&unit_text(item)?).map_err(|e| e.to_string())? {
                Rate::BitsPerSec(b) => Ok(b),
                Rate::Max => Err(why_not_max.to_string()),
            }
        })
    }

    /// A size in bytes (`1500`, `64KiB`, `4kB`).
    pub fn bytes(&self, key: &str) -> Result<Option<u64>, FileError> {
        self.read(key, |item| {
            parse_bytes(&unit_text(item)?).map_err(|e| e.to_string())
        })
    }

    /// A duration (`10s`, `500ms`, `1m30s`) in nanoseconds.
    pub fn duration_ns(&self, key: &str) -> Result<Option<u64>, FileError> {
        self.read(key, |item| {
            let d = parse_duration(&unit_text(item)?).map_err(|e| e.to_string())?;
            u64::try_from(d.as_nanos()).map_err(|_| "too long".to_string())
        })
    }

    /// A count (`1000`, `10k`).
    pub fn count(&self, key: &str) -> Result<Option<u64>, FileError> {
        self.read(key, |item| {
            parse_count(&unit_text(item)?).map_err(|e| e.to_string())
        })
    }

    /// A count above 0.
    pub fn positive(&self, key: &str) -> Result<Option<u64>, FileError> {
        match self.count(key)? {
            Some(0) => Err(self.error(self.required(key)?, key, "must be above 0")),
            n => Ok(n),
        }
    }

    /// One of `choices` by name (a string).
    pub fn choice<T: Copy>(
        &self,
        key: &str,
        choices: &[(&str, T)],
    ) -> Result<Option<T>, FileError> {
        let Some(text) = self.string(key)? else {
            return Ok(None);
        };
        match choices.iter().find(|(name, _)| *name == text) {
            Some((_, v)) => Ok(Some(*v)),
            None => {
                let mut names: Vec<&str> = Vec::new();
                for (name, _) in choices {
                    if !names.contains(name) {
                        names.push(name);
                    }
                }
                Err(self.error(
                    self.required(key)?,
                    key,
                    format!("'{text}' is not {}", one_of(&names)),
                ))
            }
        }
    }

    /// `[[key]]`: an array of tables, each with its line; empty when absent.
    pub fn tables(&self, key: &str) -> Result<Vec<Reader<'t>>, FileError> {
        let Some(item) = self.get(key) else {
            return Ok(Vec::new());
        };
        let bad = || {
            self.error(
                item,
                key,
                format!("expected an array of tables ([[{key}]])"),
            )
        };
        let list = item.as_array().ok_or_else(bad)?;
        list.iter()
            .map(|t| Reader::of(t, key).map_err(|_| bad()))
            .collect()
    }
}

/// The text a unit parser reads: a string's, or a number's digits.
fn unit_text(item: &Item) -> Result<String, String> {
    match item.value() {
        crate::Value::String(_) | crate::Value::Integer(_) | crate::Value::Float(_) => {
            Ok(item.scalar_text().unwrap_or_default())
        }
        _ => Err(format!(
            "expected a string or a number, found {}",
            item.type_name()
        )),
    }
}

fn name_or<'a>(what: &'a str, fallback: &'a str) -> &'a str {
    if what.is_empty() {
        fallback
    } else {
        what
    }
}

/// `a`, `a or b`, `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    fn with<T>(text: &str, f: impl FnOnce(&Reader) -> T) -> T {
        let root = parse(text).unwrap();
        f(&Reader::of(&root, "flow 'f'").unwrap())
    }

    #[test]
    fn units_from_strings_and_numbers() {
        with(
            "rate = \"2M\"\nmax = \"max\"\nsize = 1500\nk = \"64KiB\"\nd = \"1m30s\"\nn = \"10k\"\n",
            |r| {
                assert_eq!(r.rate("rate").unwrap(), Some(Rate::BitsPerSec(2_000_000)));
                assert_eq!(r.rate("max").unwrap(), Some(Rate::Max));
                assert_eq!(r.bytes("size").unwrap(), Some(1500));
                assert_eq!(r.bytes("k").unwrap(), Some(65536));
                assert_eq!(r.duration_ns("d").unwrap(), Some(90_000_000_000));
                assert_eq!(r.count("n").unwrap(), Some(10_000));
                assert_eq!(r.count("absent").unwrap(), None);
            },
        );
    }

    #[test]
    fn errors_name_the_table_the_key_and_the_line() {
        with(
            "a = 1\nrate = \"2Q\"\nmax = \"max\"\nz = 0\nb = [1]\n",
            |r| {
                let e = r.rate("rate").unwrap_err();
                assert_eq!(e.line, Some(2));
                assert!(
                    e.message.starts_with("flow 'f' rate: invalid rate '2Q'"),
                    "{e}"
                );
                let e = r.bit_rate("max", "needs bit/s").unwrap_err();
                assert_eq!(e.to_string(), "line 3: flow 'f' max: needs bit/s");
                let e = r.positive("z").unwrap_err();
                assert_eq!(e.to_string(), "line 4: flow 'f' z: must be above 0");
                let e = r.bytes("b").unwrap_err();
                assert!(e.message.contains("found array"), "{e}");
                let e = r.required("nope").unwrap_err();
                assert_eq!(e.to_string(), "line 1: flow 'f': missing key 'nope'");
                let e = r.only_sections(&["a", "rate", "max", "z"]).unwrap_err();
                assert_eq!(
                    e.to_string(),
                    "line 5: unknown section 'b' (expected a, rate, max or z)"
                );
                let e = r.only(&["a", "rate", "max", "z"]).unwrap_err();
                assert_eq!(
                    e.to_string(),
                    "line 5: flow 'f': unknown key 'b' (expected one of: a, rate, max, z)"
                );
            },
        );
    }

    #[test]
    fn plain_values_and_choices() {
        let text = "s = \"x\"\nn = 7\nt = \"7\"\nneg = -1\nf = \"50%\"\nb = true\np = \"tcp\"\n";
        with(text, |r| {
            assert_eq!(r.string("s").unwrap(), Some("x"));
            assert!(r.string("n").is_err());
            assert_eq!(r.uint("n").unwrap(), Some(7));
            assert_eq!(r.uint("t").unwrap(), Some(7));
            assert!(r
                .uint("neg")
                .unwrap_err()
                .message
                .contains(">= 0, got '-1'"));
            assert!(r.uint("b").is_err());
            assert_eq!(r.float("f").unwrap(), Some(50.0));
            assert_eq!(r.bool("b").unwrap(), Some(true));
            assert!(r.bool("s").is_err());
            let protocols = [("udp", 1), ("tcp", 2), ("ping", 3)];
            assert_eq!(r.choice("p", &protocols).unwrap(), Some(2));
            let e = r.choice("s", &protocols).unwrap_err();
            assert_eq!(e.message, "flow 'f' s: 'x' is not udp, tcp or ping");
        });
    }

    #[test]
    fn arrays_of_tables() {
        let root = parse("x = 1\n[[h]]\nname = \"a\"\n[[h]]\nname = \"b\"\n").unwrap();
        let r = Reader::of(&root, "").unwrap();
        let hs = r.tables("h").unwrap();
        assert_eq!(hs.iter().map(Reader::line).collect::<Vec<_>>(), [2, 4]);
        assert_eq!(hs[1].required_string("name").unwrap(), "b");
        let e = r.tables("x").unwrap_err();
        assert!(
            e.message.contains("expected an array of tables ([[x]])"),
            "{e}"
        );
        assert!(r.tables("none").unwrap().is_empty());
    }
}
