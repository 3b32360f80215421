//! The two databases behind the store, SQLite (a file) and PostgreSQL (a shared archive), behind
//! one small interface: SQL text with `?N` parameters, values of the four types the schema uses,
//! rows as vectors. The store's queries are written once; what differs lives in `sqlite`, `pg`
//! and the migrations' `Dialect`.

use std::cell::RefCell;

use crate::schema::Dialect;
use crate::{pg, sqlite, Result, StoreError};

/// A value going into or coming out of the database.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Sql {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

impl From<i64> for Sql {
    fn from(v: i64) -> Self {
        Sql::Int(v)
    }
}

impl From<u32> for Sql {
    fn from(v: u32) -> Self {
        Sql::Int(i64::from(v))
    }
}

impl From<f64> for Sql {
    fn from(v: f64) -> Self {
        Sql::Real(v)
    }
}

impl From<&str> for Sql {
    fn from(v: &str) -> Self {
        Sql::Text(v.to_string())
    }
}

impl From<String> for Sql {
    fn from(v: String) -> Self {
        Sql::Text(v)
    }
}

impl From<Option<i64>> for Sql {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Sql::Null, Sql::Int)
    }
}

/// A stored value of the wrong type (a foreign or damaged database): the reason, in words.
pub(crate) struct BadColumn(pub(crate) String);

/// One result row.
pub(crate) struct Row(pub(crate) Vec<Sql>);

impl Row {
    fn at(&self, i: usize) -> std::result::Result<&Sql, BadColumn> {
        self.0
            .get(i)
            .ok_or_else(|| BadColumn(format!("column {i} is missing")))
    }

    fn wrong(&self, i: usize, wanted: &str) -> BadColumn {
        BadColumn(format!("column {i} holds {:?}, not {wanted}", self.0[i]))
    }

    pub(crate) fn int(&self, i: usize) -> std::result::Result<i64, BadColumn> {
        match self.at(i)? {
            Sql::Int(v) => Ok(*v),
            _ => Err(self.wrong(i, "an integer")),
        }
    }

    pub(crate) fn opt_int(&self, i: usize) -> std::result::Result<Option<i64>, BadColumn> {
        match self.at(i)? {
            Sql::Null => Ok(None),
            _ => self.int(i).map(Some),
        }
    }

    pub(crate) fn real(&self, i: usize) -> std::result::Result<f64, BadColumn> {
        match self.at(i)? {
            Sql::Real(v) => Ok(*v),
            // SQLite keeps a REAL that has an integer value as written by some tools.
            Sql::Int(v) => Ok(*v as f64),
            _ => Err(self.wrong(i, "a number")),
        }
    }

    pub(crate) fn text(&self, i: usize) -> std::result::Result<String, BadColumn> {
        match self.at(i)? {
            Sql::Text(v) => Ok(v.clone()),
            _ => Err(self.wrong(i, "text")),
        }
    }
}

/// How a transaction keeps others out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lock {
    /// The write lock up front (SQLite's `BEGIN IMMEDIATE`; PostgreSQL's row locks suffice).
    Write,
    /// No other migration at once (SQLite's `BEGIN EXCLUSIVE`; a PostgreSQL advisory lock).
    Migrate,
}

enum Backend {
    Sqlite(rusqlite::Connection),
    /// The client and the statements prepared on it. Reads take `&self` in the store's API,
    /// and the client needs `&mut` for every statement.
    Postgres(Box<RefCell<(postgres::Client, pg::Prepared)>>),
}

/// An open database and the name it is shown by in messages.
pub(crate) struct Db {
    backend: Backend,
    path: String,
}

impl Db {
    pub(crate) fn sqlite(conn: rusqlite::Connection, path: String) -> Db {
        Db {
            backend: Backend::Sqlite(conn),
            path,
        }
    }

    pub(crate) fn postgres(client: postgres::Client, shown: String) -> Db {
        Db {
            backend: Backend::Postgres(Box::new(RefCell::new((client, pg::Prepared::new())))),
            path: shown,
        }
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    pub(crate) fn dialect(&self) -> Dialect {
        match self.backend {
            Backend::Sqlite(_) => Dialect::Sqlite,
            Backend::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (pragmas) and for tests.
    pub(crate) fn as_sqlite(&self) -> Option<&rusqlite::Connection> {
        match &self.backend {
            Backend::Sqlite(c) => Some(c),
            Backend::Postgres(_) => None,
        }
    }

    /// Every row `sql` yields, each made into a `T` by `decode`.
    pub(crate) fn query<T>(
        &self,
        sql: &str,
        args: &[Sql],
        decode: impl Fn(&Row) -> std::result::Result<T, BadColumn>,
    ) -> Result<Vec<T>> {
        let rows = match &self.backend {
            Backend::Sqlite(c) => sqlite::query(c, &self.path, sql, args)?,
            Backend::Postgres(c) => {
                let (client, prepared) = &mut *c.borrow_mut();
                pg::query(client, prepared, &self.path, sql, args)?
            }
        };
        decode_all(&self.path, rows, decode)
    }

    /// The schema version last written by `Tx::set_schema_version`; 0 for a new database.
    pub(crate) fn schema_version(&self) -> Result<i64> {
        match &self.backend {
            Backend::Sqlite(c) => sqlite::schema_version(c, &self.path),
            Backend::Postgres(c) => pg::schema_version(&mut c.borrow_mut().0, &self.path),
        }
    }

    /// Runs `f` in one transaction, committed if it succeeds and rolled back if not.
    pub(crate) fn transaction<T>(
        &mut self,
        lock: Lock,
        f: &mut impl FnMut(&mut Tx<'_>) -> Result<T>,
    ) -> Result<T> {
        let path = self.path.as_str();
        match &mut self.backend {
            Backend::Sqlite(c) => {
                let inner = TxInner::Sqlite(sqlite::begin(c, path, lock)?);
                let mut tx = Tx { inner, path };
                let value = f(&mut tx)?;
                tx.commit()?;
                Ok(value)
            }
            Backend::Postgres(c) => {
                let (client, prepared) = c.get_mut();
                let inner = TxInner::Postgres(pg::begin(client, path, lock)?, prepared);
                let mut tx = Tx { inner, path };
                let value = f(&mut tx)?;
                tx.commit()?;
                Ok(value)
            }
        }
    }
}

enum TxInner<'a> {
    Sqlite(rusqlite::Transaction<'a>),
    Postgres(postgres::Transaction<'a>, &'a mut pg::Prepared),
}

/// A transaction in progress (see `Db::transaction`).
pub(crate) struct Tx<'a> {
    inner: TxInner<'a>,
    path: &'a str,
}

impl Tx<'_> {
    /// Runs one statement; the number of rows it changed.
    pub(crate) fn execute(&mut self, sql: &str, args: &[Sql]) -> Result<u64> {
        match &mut self.inner {
            TxInner::Sqlite(t) => sqlite::execute(t, self.path, sql, args),
            TxInner::Postgres(t, prepared) => pg::execute(t, prepared, self.path, sql, args),
        }
    }

    /// Inserts `rows` with `insert` (`INSERT INTO t (a, b)`), up to `ROWS_PER_INSERT` rows a
    /// statement: one round trip to a PostgreSQL server for a point's metrics instead of one
    /// per metric. Stops at the first error.
    pub(crate) fn insert_rows(
        &mut self,
        insert: &str,
        rows: impl Iterator<Item = Result<Vec<Sql>>>,
    ) -> Result<()> {
        let (mut values, mut count, mut width) = (Vec::new(), 0, 0);
        for row in rows {
            let row = row?;
            width = row.len();
            values.extend(row);
            count += 1;
            if count == ROWS_PER_INSERT {
                self.execute(&values_sql(insert, width, count), &values)?;
                (values, count) = (Vec::new(), 0);
            }
        }
        if count > 0 {
            self.execute(&values_sql(insert, width, count), &values)?;
        }
        Ok(())
    }

    /// Every row `sql` yields, as `Db::query`.
    pub(crate) fn query<T>(
        &mut self,
        sql: &str,
        args: &[Sql],
        decode: impl Fn(&Row) -> std::result::Result<T, BadColumn>,
    ) -> Result<Vec<T>> {
        let rows = match &mut self.inner {
            TxInner::Sqlite(t) => sqlite::query(t, self.path, sql, args)?,
            TxInner::Postgres(t, prepared) => pg::query(t, prepared, self.path, sql, args)?,
        };
        decode_all(self.path, rows, decode)
    }

    /// The one integer of a statement that yields one row (`INSERT ... RETURNING id`, a count).
    pub(crate) fn query_int(&mut self, sql: &str, args: &[Sql]) -> Result<i64> {
        let rows = self.query(sql, args, |r| r.int(0))?;
        rows.into_iter().next().ok_or_else(|| StoreError::Sql {
            path: self.path.to_string(),
            reason: "a statement that yields a row yielded none".into(),
        })
    }

    /// The schema version as `Db::schema_version`, read under this transaction's lock.
    pub(crate) fn schema_version(&mut self) -> Result<i64> {
        match &mut self.inner {
            TxInner::Sqlite(t) => sqlite::schema_version(t, self.path),
            TxInner::Postgres(t, _) => pg::schema_version_locked(t, self.path),
        }
    }

    pub(crate) fn set_schema_version(&mut self, version: i64) -> Result<()> {
        match &mut self.inner {
            TxInner::Sqlite(t) => sqlite::set_schema_version(t, self.path, version),
            TxInner::Postgres(t, _) => pg::set_schema_version(t, self.path, version),
        }
    }

    /// Runs a migration's statements (several, separated by semicolons, no parameters).
    pub(crate) fn execute_batch(&mut self, sql: &str) -> Result<()> {
        match &mut self.inner {
            TxInner::Sqlite(t) => sqlite::execute_batch(t, self.path, sql),
            TxInner::Postgres(t, _) => pg::execute_batch(t, self.path, sql),
        }
    }

    fn commit(self) -> Result<()> {
        match self.inner {
            TxInner::Sqlite(t) => t.commit().map_err(|e| sqlite::classify(self.path, e)),
            TxInner::Postgres(t, _) => t.commit().map_err(|e| pg::classify(self.path, e)),
        }
    }
}

/// Rows a multi-row `INSERT` carries: 700 parameters for the widest table, far below
/// SQLite's 32766 and PostgreSQL's 65535.
const ROWS_PER_INSERT: usize = 100;

/// `insert VALUES (?1, ?2), (?3, ?4)` for `rows` rows of `width` columns.
fn values_sql(insert: &str, width: usize, rows: usize) -> String {
    let tuple = |r: usize| {
        let params: Vec<String> = (1..=width).map(|c| format!("?{}", r * width + c)).collect();
        format!("({})", params.join(", "))
    };
    let tuples: Vec<String> = (0..rows).map(tuple).collect();
    format!("{insert} VALUES {}", tuples.join(", "))
}

fn decode_all<T>(
    path: &str,
    rows: Vec<Row>,
    decode: impl Fn(&Row) -> std::result::Result<T, BadColumn>,
) -> Result<Vec<T>> {
    rows.iter()
        .map(|r| {
            decode(r).map_err(|BadColumn(reason)| StoreError::Sql {
                path: path.to_string(),
                reason,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_row_inserts_number_every_parameter() {
        assert_eq!(
            values_sql("INSERT INTO t (a, b)", 2, 2),
            "INSERT INTO t (a, b) VALUES (?1, ?2), (?3, ?4)"
        );
        assert_eq!(
            values_sql("INSERT INTO t (a)", 1, 1),
            "INSERT INTO t (a) VALUES (?1)"
        );
    }
}
