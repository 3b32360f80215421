//! `--db postgres://...` through the real binary: a deterministic experiment (a simulated
//! network) stored once in a PostgreSQL archive the test starts and once in a SQLite file reads
//! back the same through `history`, `show` and `export`. Skipped, saying so, without PostgreSQL.

mod common;
#[path = "../../store/tests/pg_server/mod.rs"]
mod pg_server;

use std::process::{Command, Output};

use common::*;
use pg_server::PgServer;
use serde_json::Value;

const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const EXPERIMENT: &str = "examples/experiments/lab-three-parallel.toml";
const NETWORK: &str = "examples/sim/lab-three.toml";

/// `flowlab ARGS` in the workspace with `FLOWLAB_DB=DB`, succeeded.
fn flowlab_on(db: &str, args: &[&str]) -> String {
    let o: Output = Command::new(FLOWLAB)
        .current_dir(WORKSPACE)
        .args(args)
        .env("FLOWLAB_DB", db)
        .output()
        .expect("run flowlab");
    let what = format!("FLOWLAB_DB={db} flowlab {args:?}");
    assert!(o.status.success(), "{what}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// `text` with its wall-clock times ("2026-11-24 20:37:14") masked.
fn timeless(text: &str) -> String {
    let mut out = text.to_string();
    let shape = "dddd-dd-dd dd:dd:dd";
    let mut i = 0;
    while i + shape.len() <= out.len() {
        let window = &out.as_bytes()[i..i + shape.len()];
        let fits = shape.bytes().zip(window).all(|(s, &c)| match s {
            b'd' => c.is_ascii_digit(),
            s => s == c,
        });
        if fits {
            out.replace_range(i..i + shape.len(), "TIME");
        }
        i += 1;
    }
    out
}

/// The export document without what differs by when and where it was written.
fn export(db: &str) -> Value {
    let mut doc: Value = serde_json::from_str(&flowlab_on(db, &["export", "1", "--json"])).unwrap();
    for key in ["created_at_ns", "finished_at_ns"] {
        assert!(doc[key].as_i64().unwrap() > 0);
        doc[key] = Value::Null;
    }
    // A simulated test starts at the wall clock's time too.
    for point in doc["points"].as_array_mut().unwrap() {
        point["result"]["started_at_ns"] = Value::Null;
    }
    doc
}

#[test]
fn an_experiment_stored_in_postgresql_reads_back_as_from_sqlite() {
    let Some(server) = PgServer::start("cli") else {
        return;
    };
    let pg = server.database("cli");
    let file = SqliteFile(
        std::env::temp_dir().join(format!("flowlab-pg-cli-{}.sqlite3", std::process::id())),
    );
    let lite = file.0.to_str().unwrap();
    for db in [pg.as_str(), lite] {
        let out = flowlab_on(db, &["run", EXPERIMENT, "--sim", NETWORK]);
        assert!(out.contains("stored as run 1"), "{out}");
    }
    let history = |db: &str| timeless(&flowlab_on(db, &["history"]));
    assert_eq!(history(&pg), history(lite));
    assert!(history(&pg).contains("lab-three-parallel on sim"));
    let show = |db: &str| timeless(&flowlab_on(db, &["show", "1"]));
    assert_eq!(show(&pg), show(lite));
    assert!(show(&pg).contains("points    3\n"), "{}", show(&pg));
    assert_eq!(export(&pg), export(lite));
    let csv = |db: &str| flowlab_on(db, &["export", "1", "--csv"]);
    assert_eq!(csv(&pg), csv(lite));

    // A password given on the command line is neither printed nor recorded with the run.
    let with_password = pg.replace("flowlab@", "flowlab:hunter2@");
    let o = Command::new(FLOWLAB)
        .current_dir(WORKSPACE)
        .args(["run", EXPERIMENT, "--sim", NETWORK, "--db", &with_password])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let show = flowlab_on(&pg, &["show", "2"]);
    assert!(
        show.contains("'postgres://flowlab@localhost/cli?host="),
        "{show}"
    );
    assert!(!format!("{show}{}", String::from_utf8_lossy(&o.stdout)).contains("hunter2"));
}

/// A SQLite file of the test, removed with its WAL files however the test ends.
struct SqliteFile(std::path::PathBuf);

impl Drop for SqliteFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}
