//! The results history: every run (a test, a sweep and its points, later experiments and
//! simulations) in one embedded SQLite database, so results can be listed, compared, plotted
//! and exported long after the terminal output is gone. Or in PostgreSQL (`--db
//! postgres://...`), an archive a fleet of agents shares: the same tables and migrations, the
//! same API (`db` hides which one).
//!
//! Each write is one transaction: a run's header, then each point (its result document, its flat
//! metrics and its packet log) atomically. An interrupted sweep keeps every finished point, and a
//! full disk or a crash never leaves half a point behind.
//!
//! Several flowlab processes may write one database at once: it is in WAL mode, writes take the
//! write lock up front (`BEGIN IMMEDIATE`) and wait for it, retried with backoff for up to
//! `LOCK_WAIT`, and a new database's schema is created under an exclusive lock (an advisory
//! lock in PostgreSQL).

mod db;
mod pg;
mod schema;
mod sqlite;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use db::{BadColumn, Db, Lock, Row, Sql, Tx};
use flowlab_results::PacketRecord;
use rusqlite::Connection;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use pg::{hide_password, is_postgres_url};
pub use schema::SCHEMA_VERSION;

/// A run's id: a small integer users type (`flowlab show 12`).
pub type RunId = i64;
/// A point's id, unique over the database.
pub type PointId = i64;

/// How long one statement waits for another writer's lock (SQLite's busy handler).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write keeps retrying a busy database before giving up: a sweep's point must
/// outlast other sweeps' writes, but a stuck process must not hang this one for ever.
const LOCK_WAIT: Duration = Duration::from_secs(60);
/// The longest pause between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Why the history could not be read or written, in one line.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("results database {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("results database {path} is locked by another process (waited {secs} s); try again when it finishes")]
    Locked { path: String, secs: u64 },
    #[error(
        "results database {path} is read-only: cannot record results (use --db PATH or FLOWLAB_DB)"
    )]
    ReadOnly { path: String },
    #[error("disk full writing results database {path}: this write was rolled back, earlier runs are intact")]
    DiskFull { path: String },
    #[error("results database {path} was written by a newer flowlab (schema {found}, this one knows up to {known})")]
    TooNew {
        path: String,
        found: i64,
        known: i64,
    },
    #[error("no run {0} in the results database (see `flowlab history`)")]
    NoSuchRun(RunId),
    #[error("results database {path}: {reason}")]
    Sql { path: String, reason: String },
    #[error("results database: bad stored JSON: {0}")]
    Json(String),
    #[error("cannot write export: {0}")]
    Io(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Facts about the machine that ran a run, collected by the caller (the CLI) so the store
/// stays free of system calls.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub kernel: String,
    pub cpu_model: String,
    pub flowlab_version: String,
    pub clock_source: String,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Started and not finished: still going, or the process died.
    Running,
    Complete,
    Interrupted,
    Failed,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> RunStatus {
        match s {
            "complete" => RunStatus::Complete,
            "interrupted" => RunStatus::Interrupted,
            "failed" => RunStatus::Failed,
            _ => RunStatus::Running,
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of `flowlab history`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    pub id: RunId,
    pub kind: String,
    /// Unix time in ns.
    pub created_at_ns: i64,
    pub finished_at_ns: Option<i64>,
    pub status: RunStatus,
    pub params: Value,
    pub env: Environment,
    pub points: u64,
}

/// One measured point of a run: a test at one setting of the swept parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub id: PointId,
    pub params: Value,
    pub repetition: u32,
    /// The `TestResult` document as stored.
    pub result: Value,
    /// Flat metrics, in the order they were stored.
    pub metrics: Vec<(String, f64)>,
    /// Number of per-packet records stored (load them with `load_packets`).
    pub packets: u64,
}

/// A run with all its points.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub info: RunInfo,
    pub points: Vec<Point>,
}

impl Run {
    /// Every metric name present in any point, sorted: what can be plotted.
    pub fn metric_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .points
            .iter()
            .flat_map(|p| p.metrics.iter().map(|(n, _)| n.clone()))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// The results database: a SQLite file, or a PostgreSQL archive several hosts share.
pub struct Store {
    db: Db,
    /// `LOCK_WAIT`, shorter in tests.
    lock_wait: Duration,
}

/// `$FLOWLAB_DB`, else `$XDG_DATA_HOME/flowlab/history.sqlite3`, else
/// `~/.local/share/flowlab/history.sqlite3`. Does not create anything.
pub fn default_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(p) = var("FLOWLAB_DB") {
        return Some(PathBuf::from(p));
    }
    let base = match var("XDG_DATA_HOME") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(var("HOME")?).join(".local/share"),
    };
    Some(base.join("flowlab").join("history.sqlite3"))
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn to_i64(v: u64, what: &str) -> Result<i64> {
    i64::try_from(v)
        .map_err(|_| StoreError::Json(format!("{what} {v} does not fit a 64-bit signed integer")))
}

fn opt_i64(v: Option<u64>) -> Result<Sql> {
    Ok(v.map(|v| to_i64(v, "timestamp")).transpose()?.into())
}

impl Store {
    /// Opens (creating if needed, with its directory) and migrates the database at `path`, or
    /// the PostgreSQL database it names if it is a `postgres://` URL (`open_postgres`).
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(url) = path.to_str().filter(|p| is_postgres_url(p)) {
            return Store::open_postgres(url);
        }
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
                path: shown.clone(),
                reason: format!("cannot create directory {}: {e}", dir.display()),
            })?;
        }
        let conn = Connection::open(path).map_err(|e| sqlite::classify(&shown, e))?;
        Store::setup(conn, shown)
    }

    /// Connects to the PostgreSQL database at `url` (`postgres://user@host/db`, libpq's URL
    /// form, without TLS) and migrates it: the same tables as a SQLite file.
    pub fn open_postgres(url: &str) -> Result<Store> {
        let mut store = Store {
            db: pg::connect(url)?,
            lock_wait: LOCK_WAIT,
        };
        store.migrate()?;
        Ok(store)
    }

    /// A database in memory, for tests and dry runs.
    pub fn open_in_memory() -> Result<Store> {
        let conn = Connection::open_in_memory().map_err(|e| sqlite::classify(":memory:", e))?;
        Store::setup(conn, ":memory:".to_string())
    }

    fn setup(conn: Connection, path: String) -> Result<Store> {
        sqlite::configure(&conn, &path)?;
        let in_memory = path == ":memory:";
        let mut store = Store {
            db: Db::sqlite(conn, path),
            lock_wait: LOCK_WAIT,
        };
        if !in_memory {
            store.use_wal()?;
        }
        store.migrate()?;
        Ok(store)
    }

    /// WAL lets `history` read during a sweep and writers not block readers.
    fn use_wal(&self) -> Result<()> {
        let Some(conn) = self.db.as_sqlite() else {
            return Ok(());
        };
        retry(self.lock_wait, || {
            match conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(())) {
                Err(e) => match sqlite::classify(self.path(), e) {
                    e @ StoreError::Locked { .. } => Err(e),
                    // Read-only or broken files: reported on the first read or write.
                    _ => Ok(()),
                },
                Ok(()) => Ok(()),
            }
        })
    }

    /// The path (or the URL, without its password) shown in messages.
    pub fn path(&self) -> &str {
        self.db.path()
    }

    fn migrate(&mut self) -> Result<()> {
        let db = &mut self.db;
        retry(self.lock_wait, || schema::migrate(db))
    }

    /// Runs `f` in a write transaction that takes the lock up front, so SQLite's busy handler
    /// waits for it (a read upgraded to a write fails at once instead), retried while busy.
    fn write<T>(&mut self, mut f: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let db = &mut self.db;
        retry(self.lock_wait, || db.transaction(Lock::Write, &mut f))
    }

    /// The schema version the database is at (after migration: `SCHEMA_VERSION`).
    pub fn schema_version(&self) -> Result<i64> {
        self.db.schema_version()
    }

    /// Records the start of a run; its points follow with `add_point`.
    pub fn begin_run(&mut self, kind: &str, params: &Value, env: &Environment) -> Result<RunId> {
        let env = serde_json::to_string(env).map_err(|e| StoreError::Json(e.to_string()))?;
        let args = [
            kind.into(),
            now_ns().into(),
            params.to_string().into(),
            env.into(),
        ];
        self.write(|tx| {
            tx.query_int(
                "INSERT INTO runs (kind, created_at_ns, status, params_json, env_json) VALUES (?1, ?2, 'running', ?3, ?4) RETURNING id",
                &args,
            )
        })
    }

    /// Starts a run whose guard marks it failed unless it is finished.
    pub fn start_run(
        &mut self,
        kind: &str,
        params: &Value,
        env: &Environment,
    ) -> Result<ActiveRun<'_>> {
        let id = self.begin_run(kind, params, env)?;
        Ok(self.continue_run(id))
    }

    /// Guards a run already stored (a resumed sweep) like `start_run`.
    pub fn continue_run(&mut self, id: RunId) -> ActiveRun<'_> {
        ActiveRun {
            store: self,
            id,
            finished: false,
        }
    }

    /// Stores one finished point (result, metrics and packet log) in one transaction.
    pub fn add_point(
        &mut self,
        run: RunId,
        point_params: &Value,
        repetition: u32,
        result: &Value,
        metrics: &[(String, f64)],
        packets: Option<&[PacketRecord]>,
    ) -> Result<PointId> {
        self.write(|tx| {
            let point = insert_point(tx, run, point_params, repetition, result)?;
            insert_metrics(tx, run, point, repetition, metrics)?;
            insert_packets(tx, point, packets.unwrap_or_default())?;
            Ok(point)
        })
    }

    /// Marks a run finished with `status`.
    pub fn finish_run(&mut self, run: RunId, status: RunStatus) -> Result<()> {
        let args = [status.as_str().into(), now_ns().into(), run.into()];
        let n = self.write(|tx| {
            tx.execute(
                "UPDATE runs SET status = ?1, finished_at_ns = ?2 WHERE id = ?3",
                &args,
            )
        })?;
        if n == 0 {
            return Err(StoreError::NoSuchRun(run));
        }
        Ok(())
    }

    /// The newest `limit` runs, newest first.
    pub fn list_runs(&self, limit: usize) -> Result<Vec<RunInfo>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let sql = format!("{RUN_INFO} ORDER BY r.id DESC LIMIT ?1");
        let rows = self.db.query(&sql, &[limit.into()], RawInfo::decode)?;
        rows.into_iter().map(RawInfo::parse).collect()
    }

    /// One run with its points and metrics (not its packets).
    pub fn load_run(&self, id: RunId) -> Result<Run> {
        let sql = format!("{RUN_INFO} WHERE r.id = ?1");
        let raw = self.db.query(&sql, &[id.into()], RawInfo::decode)?;
        let info = raw
            .into_iter()
            .next()
            .ok_or(StoreError::NoSuchRun(id))?
            .parse()?;
        let raw_points = self.db.query(
            "SELECT p.id, p.params_json, p.repetition, p.result_json,
                    (SELECT COUNT(*) FROM packets k WHERE k.point_id = p.id)
             FROM points p WHERE p.run_id = ?1 ORDER BY p.ordinal, p.id",
            &[id.into()],
            |r| Ok((r.int(0)?, r.text(1)?, r.int(2)?, r.text(3)?, r.int(4)?)),
        )?;
        let mut points = Vec::with_capacity(raw_points.len());
        for (pid, params, repetition, result, packets) in raw_points {
            let metrics = self.db.query(
                "SELECT name, value FROM metrics WHERE point_id = ?1 ORDER BY rowid",
                &[pid.into()],
                |r| Ok((r.text(0)?, r.real(1)?)),
            )?;
            points.push(Point {
                id: pid,
                params: parse_json(&params)?,
                repetition: u32::try_from(repetition).unwrap_or(0),
                result: parse_json(&result)?,
                metrics,
                packets: u64::try_from(packets).unwrap_or(0),
            });
        }
        Ok(Run { info, points })
    }

    /// The packet log of one point, sorted by flow then sequence number.
    pub fn load_packets(&self, point: PointId) -> Result<Vec<PacketRecord>> {
        let u = |v: Option<i64>| v.and_then(|v| u64::try_from(v).ok());
        let small = |v: i64| {
            u32::try_from(v).map_err(|_| BadColumn(format!("{v} is not a flow number or size")))
        };
        self.db.query(
            "SELECT flow, seq, size, sent_ns, received_ns, echoed_ns FROM packets WHERE point_id = ?1 ORDER BY flow, seq",
            &[point.into()],
            |r| {
                Ok(PacketRecord {
                    flow: small(r.int(0)?)?,
                    seq: u64::try_from(r.int(1)?).unwrap_or(0),
                    size: small(r.int(2)?)?,
                    sent_ns: u(r.opt_int(3)?),
                    received_ns: u(r.opt_int(4)?),
                    echoed_ns: u(r.opt_int(5)?),
                })
            },
        )
    }

    /// The run as one JSON document: run header, environment, and every point with its result
    /// document and metrics.
    pub fn export_json(&self, id: RunId, out: &mut dyn Write) -> Result<()> {
        let run = self.load_run(id)?;
        let doc = run_to_json(&run);
        let text =
            serde_json::to_string_pretty(&doc).map_err(|e| StoreError::Json(e.to_string()))?;
        writeln!(out, "{text}").map_err(|e| StoreError::Io(e.to_string()))
    }

    /// The run's metrics as CSV, one row per point and metric: `point,repetition`, one column
    /// per swept parameter, then `metric,value` (long form, what spreadsheets pivot), then the
    /// value's `unit` and the metric's human `label`, as `describe` (the report's metric table)
    /// gives them.
    pub fn export_csv(
        &self,
        id: RunId,
        describe: &dyn Fn(&str) -> (String, String),
        out: &mut dyn Write,
    ) -> Result<()> {
        let run = self.load_run(id)?;
        let mut keys: Vec<String> = Vec::new();
        for p in &run.points {
            if let Value::Object(m) = &p.params {
                for k in m.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
        }
        let io = |e: std::io::Error| StoreError::Io(e.to_string());
        let mut header = vec!["run".to_string(), "point".into(), "repetition".into()];
        header.extend(keys.iter().map(|k| csv_field(k)));
        header.extend(["metric", "value", "unit", "label"].map(String::from));
        writeln!(out, "{}", header.join(",")).map_err(io)?;
        for (i, p) in run.points.iter().enumerate() {
            let params: Vec<String> = keys
                .iter()
                .map(|k| {
                    p.params
                        .get(k)
                        .map_or(String::new(), |v| csv_field(&plain(v)))
                })
                .collect();
            for (name, value) in &p.metrics {
                let mut row = vec![id.to_string(), i.to_string(), p.repetition.to_string()];
                row.extend(params.iter().cloned());
                let (label, unit) = describe(name);
                row.push(csv_field(name));
                row.push(value.to_string());
                row.extend([csv_field(&unit), csv_field(&label)]);
                writeln!(out, "{}", row.join(",")).map_err(io)?;
            }
        }
        Ok(())
    }

    /// (point parameters, repetition) of every point already stored: what `--resume` skips.
    pub fn done_points(&self, run: RunId) -> Result<Vec<(Value, u32)>> {
        Ok(self
            .load_run(run)?
            .points
            .into_iter()
            .map(|p| (p.params, p.repetition))
            .collect())
    }
}

/// A run being recorded, from `Store::start_run`: marked failed when dropped unfinished, so an
/// error or early return never leaves it "running" for ever. Derefs to the store.
pub struct ActiveRun<'a> {
    store: &'a mut Store,
    id: RunId,
    finished: bool,
}

impl ActiveRun<'_> {
    pub fn id(&self) -> RunId {
        self.id
    }

    /// Marks the run finished with `status`.
    pub fn finish(mut self, status: RunStatus) -> Result<()> {
        // Tried once: if this fails, marking it failed would too.
        self.finished = true;
        self.store.finish_run(self.id, status)
    }
}

impl std::ops::Deref for ActiveRun<'_> {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store
    }
}

impl std::ops::DerefMut for ActiveRun<'_> {
    fn deref_mut(&mut self) -> &mut Store {
        self.store
    }
}

impl Drop for ActiveRun<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // Best effort: the error that got us here is the one reported.
            let _ = self.store.finish_run(self.id, RunStatus::Failed);
        }
    }
}

/// Inserts a point's row, numbered after the run's other points.
fn insert_point(
    tx: &mut Tx<'_>,
    run: RunId,
    params: &Value,
    repetition: u32,
    result: &Value,
) -> Result<PointId> {
    // One statement for both: a round trip less per point to a PostgreSQL archive.
    let counts = tx.query(
        "SELECT (SELECT COUNT(*) FROM runs WHERE id = ?1), (SELECT COUNT(*) FROM points WHERE run_id = ?1)",
        &[run.into()],
        |r| Ok((r.int(0)?, r.int(1)?)),
    )?;
    let Some(&(1, ordinal)) = counts.first() else {
        return Err(StoreError::NoSuchRun(run));
    };
    let host = |end: &str| result[end]["host"].as_str().map_or(Sql::Null, Sql::from);
    tx.query_int(
        "INSERT INTO points (run_id, ordinal, params_json, repetition, result_json, created_at_ns, client_host, agent_host) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
        &[
            run.into(),
            ordinal.into(),
            params.to_string().into(),
            repetition.into(),
            result.to_string().into(),
            now_ns().into(),
            host("client"),
            host("agent"),
        ],
    )
}

/// Inserts a point's finite metrics.
fn insert_metrics(
    tx: &mut Tx<'_>,
    run: RunId,
    point: PointId,
    repetition: u32,
    metrics: &[(String, f64)],
) -> Result<()> {
    let rows = metrics
        .iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(name, value)| {
            Ok(vec![
                run.into(),
                point.into(),
                repetition.into(),
                name.as_str().into(),
                (*value).into(),
            ])
        });
    tx.insert_rows(
        "INSERT INTO metrics (run_id, point_id, repetition, name, value)",
        rows,
    )
}

/// Inserts a point's packet log.
fn insert_packets(tx: &mut Tx<'_>, point: PointId, packets: &[PacketRecord]) -> Result<()> {
    let rows = packets.iter().map(|r| {
        Ok(vec![
            point.into(),
            r.flow.into(),
            to_i64(r.seq, "sequence number")?.into(),
            r.size.into(),
            opt_i64(r.sent_ns)?,
            opt_i64(r.received_ns)?,
            opt_i64(r.echoed_ns)?,
        ])
    });
    tx.insert_rows(
        "INSERT INTO packets (point_id, flow, seq, size, sent_ns, received_ns, echoed_ns)",
        rows,
    )
}

/// Calls `attempt` again while the database is busy, with growing pauses, for up to `wait`.
/// SQLite's busy handler already waited inside each try; this covers what it does not (a lock
/// lost to another writer between tries, a new database being set up).
fn retry<T>(wait: Duration, mut attempt: impl FnMut() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    loop {
        match attempt() {
            Err(StoreError::Locked { path, .. }) => {
                if start.elapsed() + pause >= wait {
                    let secs = start.elapsed().as_secs();
                    return Err(StoreError::Locked { path, secs });
                }
                std::thread::sleep(jittered(pause));
                pause = (pause * 2).min(MAX_BACKOFF);
            }
            other => return other,
        }
    }
}

/// `pause` plus up to half of it again, so writers that collided do not retry in step.
fn jittered(pause: Duration) -> Duration {
    let spread = u64::try_from(pause.as_nanos() / 2).unwrap_or(1).max(1);
    pause + Duration::from_nanos(now_ns().unsigned_abs() % spread)
}

/// A JSON value as a person reads it: strings without quotes.
pub fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The JSON export document of a run.
pub fn run_to_json(run: &Run) -> Value {
    let i = &run.info;
    serde_json::json!({
        "run": i.id,
        "kind": i.kind,
        "created_at_ns": i.created_at_ns,
        "finished_at_ns": i.finished_at_ns,
        "status": i.status.as_str(),
        "params": i.params,
        "environment": i.env,
        "points": run.points.iter().map(|p| serde_json::json!({
            "params": p.params,
            "repetition": p.repetition,
            "metrics": p.metrics.iter().map(|(n, v)| (n.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
            "result": p.result,
        })).collect::<Vec<_>>(),
    })
}

fn parse_json(s: &str) -> Result<Value> {
    serde_json::from_str(s).map_err(|e| StoreError::Json(e.to_string()))
}

/// The columns of a `RunInfo`, followed by `WHERE` or `ORDER BY`.
const RUN_INFO: &str =
    "SELECT r.id, r.kind, r.created_at_ns, r.finished_at_ns, r.status, r.params_json, r.env_json,
            (SELECT COUNT(*) FROM points p WHERE p.run_id = r.id)
     FROM runs r";

struct RawInfo {
    id: i64,
    kind: String,
    created: i64,
    finished: Option<i64>,
    status: String,
    params: String,
    env: String,
    points: i64,
}

impl RawInfo {
    fn decode(r: &Row) -> std::result::Result<RawInfo, BadColumn> {
        Ok(RawInfo {
            id: r.int(0)?,
            kind: r.text(1)?,
            created: r.int(2)?,
            finished: r.opt_int(3)?,
            status: r.text(4)?,
            params: r.text(5)?,
            env: r.text(6)?,
            points: r.int(7)?,
        })
    }

    fn parse(self) -> Result<RunInfo> {
        Ok(RunInfo {
            id: self.id,
            kind: self.kind,
            created_at_ns: self.created,
            finished_at_ns: self.finished,
            status: RunStatus::parse(&self.status),
            params: parse_json(&self.params)?,
            // Older or foreign rows may lack fields: keep what is there.
            env: serde_json::from_str(&self.env).unwrap_or_default(),
            points: u64::try_from(self.points).unwrap_or(0),
        })
    }
}

#[cfg(test)]
mod tests;
