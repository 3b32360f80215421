//! SQLite under `Db`: statements, values, transactions, the schema version (`PRAGMA
//! user_version`) and its error codes as the store's one-line errors.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{params_from_iter, Connection, ErrorCode, TransactionBehavior};

use crate::db::{Lock, Row, Sql};
use crate::{Result, StoreError, BUSY_TIMEOUT};

impl rusqlite::ToSql for Sql {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Sql::Null => ValueRef::Null,
            Sql::Int(v) => ValueRef::Integer(*v),
            Sql::Real(v) => ValueRef::Real(*v),
            Sql::Text(v) => ValueRef::Text(v.as_bytes()),
        }))
    }
}

fn value(v: ValueRef<'_>) -> Sql {
    match v {
        ValueRef::Null => Sql::Null,
        ValueRef::Integer(i) => Sql::Int(i),
        ValueRef::Real(f) => Sql::Real(f),
        // Text that is not UTF-8 and blobs: kept as text, so JSON parsing reports them.
        ValueRef::Text(t) | ValueRef::Blob(t) => Sql::Text(String::from_utf8_lossy(t).into()),
    }
}

/// Busy waits and foreign keys, on every connection.
pub(crate) fn configure(conn: &Connection, path: &str) -> Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(|e| classify(path, e))?;
    // Foreign keys keep points tied to runs.
    conn.execute_batch("PRAGMA foreign_keys = ON;")
        .map_err(|e| classify(path, e))
}

pub(crate) fn query(conn: &Connection, path: &str, sql: &str, args: &[Sql]) -> Result<Vec<Row>> {
    let c = |e| classify(path, e);
    let mut stmt = conn.prepare_cached(sql).map_err(c)?;
    let width = stmt.column_count();
    let rows = stmt
        .query_map(params_from_iter(args), |r| {
            (0..width)
                .map(|i| r.get_ref(i).map(value))
                .collect::<rusqlite::Result<Vec<_>>>()
                .map(Row)
        })
        .map_err(c)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(c)
}

pub(crate) fn execute(conn: &Connection, path: &str, sql: &str, args: &[Sql]) -> Result<u64> {
    let c = |e| classify(path, e);
    let n = conn
        .prepare_cached(sql)
        .map_err(c)?
        .execute(params_from_iter(args))
        .map_err(c)?;
    Ok(n as u64)
}

pub(crate) fn execute_batch(conn: &Connection, path: &str, sql: &str) -> Result<()> {
    conn.execute_batch(sql).map_err(|e| classify(path, e))
}

pub(crate) fn begin<'c>(
    conn: &'c mut Connection,
    path: &str,
    lock: Lock,
) -> Result<rusqlite::Transaction<'c>> {
    let behavior = match lock {
        Lock::Write => TransactionBehavior::Immediate,
        Lock::Migrate => TransactionBehavior::Exclusive,
    };
    conn.transaction_with_behavior(behavior)
        .map_err(|e| classify(path, e))
}

pub(crate) fn schema_version(conn: &Connection, path: &str) -> Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(|e| classify(path, e))
}

pub(crate) fn set_schema_version(conn: &Connection, path: &str, version: i64) -> Result<()> {
    conn.pragma_update(None, "user_version", version)
        .map_err(|e| classify(path, e))
}

/// Turns SQLite's error codes into the one-line errors users can act on.
pub(crate) fn classify(path: &str, e: rusqlite::Error) -> StoreError {
    let path = path.to_string();
    if let rusqlite::Error::SqliteFailure(f, msg) = &e {
        return match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => StoreError::Locked {
                path,
                secs: BUSY_TIMEOUT.as_secs(),
            },
            ErrorCode::ReadOnly => StoreError::ReadOnly { path },
            ErrorCode::DiskFull => StoreError::DiskFull { path },
            // The WAL index (`-shm`) could not grow: on a full disk, where it often grows first.
            _ if f.extended_code == rusqlite::ffi::SQLITE_IOERR_SHMSIZE => {
                StoreError::DiskFull { path }
            }
            ErrorCode::CannotOpen => StoreError::Open {
                path,
                reason: "cannot open the file (missing directory or no permission)".into(),
            },
            ErrorCode::NotADatabase => StoreError::Open {
                path,
                reason: "not a SQLite database".into(),
            },
            ErrorCode::DatabaseCorrupt => StoreError::Open {
                path,
                reason: "the database file is corrupt".into(),
            },
            _ => StoreError::Sql {
                path,
                reason: msg.clone().unwrap_or_else(|| f.to_string()),
            },
        };
    }
    StoreError::Sql {
        path,
        reason: e.to_string(),
    }
}
