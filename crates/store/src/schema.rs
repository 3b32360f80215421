//! The database layout and its migrations, numbered by `PRAGMA user_version`. A new database is
//! built by running every migration from 0, so the upgrade path is the path always tested.

use rusqlite::{Connection, TransactionBehavior};

/// The layout this code writes.
pub const SCHEMA_VERSION: i64 = 2;

pub(crate) enum MigrateError {
    TooNew(i64),
    Sql(rusqlite::Error),
}

impl From<rusqlite::Error> for MigrateError {
    fn from(e: rusqlite::Error) -> Self {
        MigrateError::Sql(e)
    }
}

/// Version 1: runs, their points (result documents) and a flat metrics table.
pub(crate) const V1: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    created_at_ns INTEGER NOT NULL,
    status TEXT NOT NULL,
    params_json TEXT NOT NULL
);
CREATE TABLE points (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    params_json TEXT NOT NULL,
    repetition INTEGER NOT NULL,
    result_json TEXT NOT NULL
);
CREATE TABLE metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    point_id INTEGER NOT NULL REFERENCES points(id) ON DELETE CASCADE,
    repetition INTEGER NOT NULL,
    name TEXT NOT NULL,
    value REAL NOT NULL
);
";

/// Version 2: the environment and end time of a run, per-packet logs, and indexes for plotting.
const V2: &str = "
ALTER TABLE runs ADD COLUMN env_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN finished_at_ns INTEGER;
ALTER TABLE points ADD COLUMN created_at_ns INTEGER;
CREATE TABLE packets (
    point_id INTEGER NOT NULL REFERENCES points(id) ON DELETE CASCADE,
    flow INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sent_ns INTEGER,
    received_ns INTEGER,
    echoed_ns INTEGER
);
CREATE INDEX points_by_run ON points(run_id, ordinal);
CREATE INDEX metrics_by_point ON metrics(point_id);
CREATE INDEX metrics_by_run ON metrics(run_id, name);
CREATE INDEX packets_by_point ON packets(point_id, flow, seq);
";

const MIGRATIONS: [&str; 2] = [V1, V2];

/// Brings the database to `SCHEMA_VERSION` in one exclusive transaction, so processes opening
/// a new database at once never both create it.
pub(crate) fn migrate(conn: &mut Connection) -> Result<(), MigrateError> {
    // Already current: no write lock, so read-only files open too.
    if checked_version(conn)? == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
    // Read again under the lock: another opener may have migrated meanwhile.
    let version = checked_version(&tx)?;
    for sql in MIGRATIONS.iter().skip(version.max(0) as usize) {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    tx.commit()?;
    Ok(())
}

/// The file's schema version; an error if it is newer than this code.
fn checked_version(conn: &Connection) -> Result<i64, MigrateError> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(MigrateError::TooNew(version));
    }
    Ok(version)
}
