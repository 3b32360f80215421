//! The spanned-TOML layer under flowlab's hand-written file formats (experiment files,
//! simulator scenarios, lab files): TOML text becomes a [`Table`] tree in which every key and
//! value knows its line, a [`Reader`] reads a table's fields as typed values (strings,
//! integers, rates, sizes, durations, choices) and rejects unknown keys, and [`ValueRange`]
//! expands the `"START..END:STEP"` values of sweeps. Every failure is one [`FileError`]: one
//! line of message and, where known, the line of the file it is about.

mod error;
mod range;
mod read;
mod tree;

pub use error::FileError;
pub use range::{count_values, expand_values, SweepValue, Unit, ValueRange};
pub use read::Reader;
pub use tree::{parse, Item, Key, Table, Value};
