//! PostgreSQL under `Db`, for an archive several hosts write (`--db postgres://...`): the
//! connection, statements (`?N` parameters become `$N`), values, the schema version (a one-row
//! table, as PostgreSQL has no `user_version`) and its error codes as the store's errors.
//!
//! No TLS: the client speaks plain TCP or a Unix socket, so an archive across an untrusted
//! network is reached through a tunnel or a TLS-terminating proxy (docs/fleet.md).

use std::collections::HashMap;
use std::error::Error;
use std::str::FromStr;
use std::time::Duration;

use bytes::BytesMut;
use postgres::error::SqlState;
use postgres::types::{IsNull, ToSql, Type, WrongType};
use postgres::{Client, Config, GenericClient, NoTls, Statement, Transaction};

use crate::db::{Db, Lock, Row, Sql};
use crate::{Result, StoreError};

/// How long connecting may take when the URL names no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The table that holds the schema version.
const VERSION_TABLE: &str = "flowlab_schema";

/// Held for the length of a migration so two hosts opening a new archive at once take turns
/// (the number spells "flowlab" in ASCII).
const MIGRATION_LOCK: i64 = 0x66_6c6f_776c_6162;

/// Statements prepared on a connection, by their SQL: each is parsed once a connection, so
/// running one again costs one round trip instead of two.
pub(crate) type Prepared = HashMap<String, Statement>;

/// Whether `--db` (or `FLOWLAB_DB`) names a PostgreSQL database rather than a file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `arg` with the password of a PostgreSQL URL in it left out (`--db=postgres://u:pw@h/d`), so
/// a recorded command line never keeps one.
pub fn hide_password(arg: &str) -> String {
    let schemes = ["postgres://", "postgresql://"];
    match schemes.iter().filter_map(|s| arg.find(s)).min() {
        Some(at) => format!("{}{}", &arg[..at], without_password(&arg[at..])),
        None => arg.to_string(),
    }
}

/// Connects to the database at `url` (libpq's URL form).
pub(crate) fn connect(url: &str) -> Result<Db> {
    let shown = without_password(url);
    let mut config = Config::from_str(url).map_err(|e| StoreError::Open {
        path: shown.clone(),
        reason: one_line(&e.to_string()),
    })?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.application_name("flowlab");
    let client = config.connect(NoTls).map_err(|e| classify(&shown, e))?;
    Ok(Db::postgres(client, shown))
}

/// The URL as messages show it: the password left out, from the user part and the query.
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (before_query, query) = rest
        .split_once('?')
        .map_or((rest, None), |(a, q)| (a, Some(q)));
    let (authority, path) = before_query
        .split_once('/')
        .map_or((before_query, None), |(a, p)| (a, Some(p)));
    let authority = match authority.rsplit_once('@') {
        Some((user, host)) => format!("{}@{host}", user.split(':').next().unwrap_or("")),
        None => authority.to_string(),
    };
    let mut shown = format!("{scheme}://{authority}");
    if let Some(path) = path {
        shown = format!("{shown}/{path}");
    }
    if let Some(query) = query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|kv| !kv.starts_with("password="))
            .collect();
        if !kept.is_empty() {
            shown = format!("{shown}?{}", kept.join("&"));
        }
    }
    shown
}

/// `?N` parameters (SQLite's, as the store writes them) as PostgreSQL's `$N`.
fn numbered(sql: &str) -> String {
    sql.replace('?', "$")
}

impl ToSql for Sql {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn Error + Sync + Send>> {
        match self {
            Sql::Null => Ok(IsNull::Yes),
            Sql::Int(v) if *ty == Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
            Sql::Int(v) if <i64 as ToSql>::accepts(ty) => v.to_sql(ty, out),
            Sql::Real(v) if <f64 as ToSql>::accepts(ty) => v.to_sql(ty, out),
            Sql::Text(v) if <String as ToSql>::accepts(ty) => v.to_sql(ty, out),
            _ => Err(Box::new(WrongType::new::<Sql>(ty.clone()))),
        }
    }

    fn accepts(_: &Type) -> bool {
        // Checked in `to_sql`, which knows the value.
        true
    }

    postgres::types::to_sql_checked!();
}

fn refs(args: &[Sql]) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|a| a as &(dyn ToSql + Sync)).collect()
}

fn value(row: &postgres::Row, i: usize) -> std::result::Result<Sql, String> {
    let ty = row.columns()[i].type_();
    let got = |e: postgres::Error| e.to_string();
    let value = match *ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i).map_err(got)?.map(Sql::Int),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map_err(got)?
            .map(|v| Sql::Int(v.into())),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(i)
            .map_err(got)?
            .map(Sql::Real),
        Type::TEXT | Type::VARCHAR => row
            .try_get::<_, Option<String>>(i)
            .map_err(got)?
            .map(Sql::Text),
        _ => {
            return Err(format!(
                "column {i} has type {ty}, which flowlab does not read"
            ))
        }
    };
    Ok(value.unwrap_or(Sql::Null))
}

/// `sql` prepared on `client`'s connection, once.
fn prepare(
    client: &mut impl GenericClient,
    prepared: &mut Prepared,
    sql: &str,
) -> std::result::Result<Statement, postgres::Error> {
    if let Some(statement) = prepared.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare(&numbered(sql))?;
    prepared.insert(sql.to_string(), statement.clone());
    Ok(statement)
}

pub(crate) fn query(
    client: &mut impl GenericClient,
    prepared: &mut Prepared,
    path: &str,
    sql: &str,
    args: &[Sql],
) -> Result<Vec<Row>> {
    let statement = prepare(client, prepared, sql).map_err(|e| classify(path, e))?;
    let rows = client
        .query(&statement, &refs(args))
        .map_err(|e| classify(path, e))?;
    rows.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| value(r, i))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map(Row)
                .map_err(|reason| StoreError::Sql {
                    path: path.to_string(),
                    reason,
                })
        })
        .collect()
}

pub(crate) fn execute(
    client: &mut impl GenericClient,
    prepared: &mut Prepared,
    path: &str,
    sql: &str,
    args: &[Sql],
) -> Result<u64> {
    let statement = prepare(client, prepared, sql).map_err(|e| classify(path, e))?;
    client
        .execute(&statement, &refs(args))
        .map_err(|e| classify(path, e))
}

pub(crate) fn execute_batch(client: &mut impl GenericClient, path: &str, sql: &str) -> Result<()> {
    client.batch_execute(sql).map_err(|e| classify(path, e))
}

pub(crate) fn begin<'c>(client: &'c mut Client, path: &str, lock: Lock) -> Result<Transaction<'c>> {
    let mut tx = client.transaction().map_err(|e| classify(path, e))?;
    if lock == Lock::Migrate {
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .map_err(|e| classify(path, e))?;
    }
    Ok(tx)
}

/// The version without taking a lock; 0 where no migration has run yet.
pub(crate) fn schema_version(client: &mut impl GenericClient, path: &str) -> Result<i64> {
    match client.query(&format!("SELECT MAX(version) FROM {VERSION_TABLE}"), &[]) {
        Ok(rows) => Ok(rows
            .first()
            .and_then(|r| r.get::<_, Option<i64>>(0))
            .unwrap_or(0)),
        Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(0),
        Err(e) => Err(classify(path, e)),
    }
}

/// The version inside a migration's transaction, whose first statement creates the table (an
/// error would end the transaction, so it is not probed for).
pub(crate) fn schema_version_locked(tx: &mut Transaction<'_>, path: &str) -> Result<i64> {
    execute_batch(
        tx,
        path,
        &format!("CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version BIGINT NOT NULL)"),
    )?;
    schema_version(tx, path)
}

pub(crate) fn set_schema_version(tx: &mut Transaction<'_>, path: &str, version: i64) -> Result<()> {
    let sql =
        format!("DELETE FROM {VERSION_TABLE}; INSERT INTO {VERSION_TABLE} VALUES ({version})");
    execute_batch(tx, path, &sql)
}

/// Turns PostgreSQL's error codes into the one-line errors users can act on.
pub(crate) fn classify(path: &str, e: postgres::Error) -> StoreError {
    let path = path.to_string();
    let Some(db) = e.as_db_error() else {
        // No answer from a server: it could not be reached, or the connection broke.
        return StoreError::Open {
            path,
            reason: one_line(&e.to_string()),
        };
    };
    let reason = one_line(db.message());
    match *db.code() {
        SqlState::T_R_SERIALIZATION_FAILURE
        | SqlState::T_R_DEADLOCK_DETECTED
        | SqlState::LOCK_NOT_AVAILABLE => StoreError::Locked { path, secs: 0 },
        SqlState::READ_ONLY_SQL_TRANSACTION => StoreError::ReadOnly { path },
        SqlState::DISK_FULL => StoreError::DiskFull { path },
        SqlState::INVALID_PASSWORD
        | SqlState::INVALID_AUTHORIZATION_SPECIFICATION
        | SqlState::INVALID_CATALOG_NAME
        | SqlState::TOO_MANY_CONNECTIONS
        | SqlState::CANNOT_CONNECT_NOW => StoreError::Open { path, reason },
        _ => StoreError::Sql { path, reason },
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        let cases = [
            (
                "postgres://flowlab:s3cret@db.example:5432/archive",
                "postgres://flowlab@db.example:5432/archive",
            ),
            (
                "postgresql://u@h/d?password=x&sslmode=disable",
                "postgresql://u@h/d?sslmode=disable",
            ),
            (
                "postgres:///archive?host=/run/pg&password=x",
                "postgres:///archive?host=/run/pg",
            ),
            ("postgres://h", "postgres://h"),
        ];
        for (url, shown) in cases {
            assert_eq!(without_password(url), shown, "{url}");
        }
    }

    #[test]
    fn command_lines_lose_their_passwords() {
        assert_eq!(
            hide_password("--db=postgres://u:pw@h/d"),
            "--db=postgres://u@h/d"
        );
        assert_eq!(hide_password("postgresql://u:pw@h"), "postgresql://u@h");
        assert_eq!(hide_password("--rate=10M"), "--rate=10M");
    }

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_postgres_url("postgres://h/db"));
        assert!(is_postgres_url("postgresql:///db?host=/tmp"));
        assert!(!is_postgres_url("postgres.sqlite3"));
        assert!(!is_postgres_url("/var/lib/flowlab/history.sqlite3"));
    }

    #[test]
    fn parameters_are_numbered_as_postgresql_wants() {
        assert_eq!(
            numbered("UPDATE runs SET status = ?1 WHERE id = ?2"),
            "UPDATE runs SET status = $1 WHERE id = $2"
        );
    }

    #[test]
    fn a_bad_url_is_a_one_line_error() {
        let e = connect("postgres://u:pw@h:notaport/db")
            .err()
            .unwrap()
            .to_string();
        assert!(!e.contains('\n') && !e.contains("pw"), "{e}");
        assert!(
            e.starts_with("results database postgres://u@h:notaport/db:"),
            "{e}"
        );
    }
}
