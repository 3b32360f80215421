//! TOML text → an owned tree whose every key and value carries its line.
//!
//! Owned rather than borrowed from the text so that a format can substitute variables or
//! sweep values into a copy of a table and read it again, every line still right.

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::FileError;

/// A value and the line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    line: usize,
    value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    /// A TOML date or time, as written; no flowlab format has one, so it is kept as text only
    /// for messages.
    Datetime(String),
    Array(Vec<Item>),
    Table(Table),
}

/// A key as written, with its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub name: String,
    pub line: usize,
}

/// A table's entries in the order of the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    entries: Vec<(Key, Item)>,
}

impl Item {
    pub fn new(line: usize, value: Value) -> Item {
        Item { line, value }
    }

    /// A string value, e.g. one of a range's expanded values.
    pub fn string(line: usize, text: impl Into<String>) -> Item {
        Item::new(line, Value::String(text.into()))
    }

    /// 1-based line where the value starts.
    pub fn line(&self) -> usize {
        self.line
    }

    pub fn value(&self) -> &Value {
        &self.value
    }

    /// An error about this value.
    pub fn error(&self, message: impl Into<String>) -> FileError {
        FileError::at(self.line, message)
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_table(&self) -> Option<&Table> {
        match &self.value {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_table_mut(&mut self) -> Option<&mut Table> {
        match &mut self.value {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Item]> {
        match &self.value {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_array_mut(&mut self) -> Option<&mut Vec<Item>> {
        match &mut self.value {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The text of a string, number or boolean (strings unquoted, numbers in decimal), as
    /// unit parsers and messages read it; `None` for dates, arrays and tables.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::String(s) => Some(s.clone()),
            Value::Integer(i) => Some(i.to_string()),
            Value::Float(x) => Some(x.to_string()),
            Value::Boolean(b) => Some(b.to_string()),
            Value::Datetime(_) | Value::Array(_) | Value::Table(_) => None,
        }
    }

    /// What the value is, for messages: "string", "integer", "table", ...
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            Value::String(_) => "string",
            Value::Integer(_) => "integer",
            Value::Float(_) => "float",
            Value::Boolean(_) => "boolean",
            Value::Datetime(_) => "datetime",
            Value::Array(_) => "array",
            Value::Table(_) => "table",
        }
    }
}

impl Table {
    pub fn get(&self, key: &str) -> Option<&Item> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Item> {
        self.entries
            .iter_mut()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
    }

    /// Sets `key` to `item`, replacing its value where the key exists (the key keeps its
    /// line), else adding it at the item's line.
    pub fn insert(&mut self, key: &str, item: Item) {
        match self.get_mut(key) {
            Some(slot) => *slot = item,
            None => self.entries.push((
                Key {
                    name: key.to_string(),
                    line: item.line,
                },
                item,
            )),
        }
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&Key, &Item)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }

    /// Values in file order, changeable (a format substituting variables into every string).
    pub fn values_mut(&mut self) -> impl Iterator<Item = (&Key, &mut Item)> {
        self.entries.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Parses TOML text into its root table (at line 1); a syntax error names its line.
pub fn parse(text: &str) -> Result<Item, FileError> {
    let doc = DeTable::parse(text).map_err(|e| {
        let lines = Lines::new(text);
        FileError::new(e.span().map(|s| lines.line(s.start)), e.message())
    })?;
    let lines = Lines::new(text);
    let root = table(&lines, doc.get_ref())?;
    Ok(Item::new(1, Value::Table(root)))
}

/// Byte offsets where lines start, to turn spans into line numbers.
struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let breaks = text.match_indices('\n').map(|(i, _)| i + 1);
        Lines {
            starts: std::iter::once(0).chain(breaks).collect(),
        }
    }

    /// 1-based line of byte offset `pos`.
    fn line(&self, pos: usize) -> usize {
        self.starts.partition_point(|&s| s <= pos).max(1)
    }
}

fn table(lines: &Lines, t: &DeTable<'_>) -> Result<Table, FileError> {
    let mut entries = Vec::with_capacity(t.len());
    for (k, v) in t.iter() {
        let key = Key {
            name: k.get_ref().to_string(),
            line: lines.line(k.span().start),
        };
        let item = item(lines, v, &key.name)?;
        entries.push((key, item));
    }
    // File order, whatever order the parser's map keeps.
    entries.sort_by_key(|(k, _)| k.line);
    Ok(Table { entries })
}

/// `key` names the value in an error (an integer out of range).
fn item(lines: &Lines, v: &Spanned<DeValue<'_>>, key: &str) -> Result<Item, FileError> {
    let line = lines.line(v.span().start);
    let value = match v.get_ref() {
        DeValue::String(s) => Value::String(s.to_string()),
        DeValue::Integer(i) => {
            let digits: String = i.as_str().chars().filter(|&c| c != '_').collect();
            match i64::from_str_radix(&digits, i.radix()) {
                Ok(n) => Value::Integer(n),
                Err(_) => return Err(FileError::at(line, format!("{key}: integer out of range"))),
            }
        }
        DeValue::Float(f) => match f.as_str().replace('_', "").parse::<f64>() {
            Ok(x) => Value::Float(x),
            Err(_) => return Err(FileError::at(line, format!("{key}: float out of range"))),
        },
        DeValue::Boolean(b) => Value::Boolean(*b),
        DeValue::Datetime(d) => Value::Datetime(d.to_string()),
        DeValue::Array(a) => Value::Array(
            a.iter()
                .map(|x| item(lines, x, key))
                .collect::<Result<_, _>>()?,
        ),
        DeValue::Table(t) => Value::Table(table(lines, t)?),
    };
    Ok(Item::new(line, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_and_value_knows_its_line() {
        let text = "a = 1\n[t]\nb = \"x\"\nc = [1,\n  2.5]\n[[arr]]\nd = true\n[[arr]]\n";
        let root = parse(text).unwrap();
        let root = root.as_table().unwrap();
        assert_eq!(root.get("a").unwrap().value(), &Value::Integer(1));
        let t = root.get("t").unwrap();
        assert_eq!(t.line(), 2);
        let t = t.as_table().unwrap();
        assert_eq!(t.get("b").unwrap().line(), 3);
        let c = t.get("c").unwrap().as_array().unwrap();
        assert_eq!((c[0].line(), c[1].line()), (4, 5));
        assert_eq!(c[1].scalar_text().as_deref(), Some("2.5"));
        let arr = root.get("arr").unwrap().as_array().unwrap();
        assert_eq!((arr[0].line(), arr[1].line()), (6, 8));
        let keys: Vec<_> = root
            .iter()
            .map(|(k, _)| (k.name.as_str(), k.line))
            .collect();
        assert_eq!(keys, [("a", 1), ("t", 2), ("arr", 6)]);
    }

    #[test]
    fn numbers_in_every_notation() {
        let root = parse("h = 0xff\no = 0o17\nb = 0b101\nu = 1_000\nf = 1_0.5\n").unwrap();
        let root = root.as_table().unwrap();
        let get = |k| root.get(k).unwrap().value().clone();
        assert_eq!(get("h"), Value::Integer(255));
        assert_eq!(get("o"), Value::Integer(15));
        assert_eq!(get("b"), Value::Integer(5));
        assert_eq!(get("u"), Value::Integer(1000));
        assert_eq!(get("f"), Value::Float(10.5));
    }

    #[test]
    fn errors_name_their_line() {
        let e = parse("a = 1\n[t\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(!e.message.contains('\n'));
        let e = parse("a = 1\nbig = 0xffffffffffffffff\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: big: integer out of range");
    }

    #[test]
    fn insert_replaces_or_appends() {
        let mut root = parse("a = 1\n").unwrap();
        let t = root.as_table_mut().unwrap();
        t.insert("a", Item::string(9, "x"));
        t.insert("b", Item::string(7, "y"));
        assert_eq!(t.get("a").unwrap().line(), 9);
        let keys: Vec<_> = t.iter().map(|(k, _)| (k.name.clone(), k.line)).collect();
        assert_eq!(keys, [("a".to_string(), 1), ("b".to_string(), 7)]);
    }
}
