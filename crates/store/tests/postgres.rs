//! The PostgreSQL archive (`--db postgres://...`) against a real server each test starts: it
//! holds and gives back what a SQLite file does, many hosts may open a new archive at once, and
//! its failures are the store's one-line errors. Skipped, saying so, without PostgreSQL.

mod pg_server;

use std::path::Path;

use flowlab_results::PacketRecord;
use flowlab_store::{Environment, RunId, RunInfo, RunStatus, Store, StoreError, SCHEMA_VERSION};
use pg_server::PgServer;
use serde_json::{json, Value};

fn env() -> Environment {
    Environment {
        hostname: "site-a".into(),
        kernel: "6.1".into(),
        cpu_model: "cpu".into(),
        flowlab_version: "0.1.0".into(),
        clock_source: "tsc".into(),
    }
}

fn packet(seq: u64) -> PacketRecord {
    PacketRecord {
        flow: 1,
        seq,
        size: 1200,
        sent_ns: Some(1_000 + seq),
        received_ns: (!seq.is_multiple_of(3)).then_some(2_000 + seq),
        echoed_ns: None,
    }
}

/// A finished sweep of two points with metrics, hosts and a packet log.
fn store_a_sweep(s: &mut Store) -> RunId {
    let run = s
        .begin_run(
            "sweep",
            &json!({"vary": ["size"], "target": "site-b"}),
            &env(),
        )
        .unwrap();
    for (i, size) in [64, 1500].into_iter().enumerate() {
        let result =
            json!({"client": {"host": "site-a"}, "agent": {"host": "site-b"}, "size": size});
        let metrics = [
            ("goodput_bps".to_string(), 9.5e6 + i as f64),
            ("loss_pct".to_string(), 0.125),
            ("rtt_p99_us".to_string(), 1234.5),
        ];
        let packets: Vec<_> = (0..50).map(packet).collect();
        s.add_point(
            run,
            &json!({"size": size}),
            0,
            &result,
            &metrics,
            Some(&packets),
        )
        .unwrap();
    }
    s.finish_run(run, RunStatus::Complete).unwrap();
    run
}

/// A run's header without the times it was written at.
fn timeless(mut info: RunInfo) -> RunInfo {
    assert!(info.created_at_ns > 0);
    info.created_at_ns = 0;
    info.finished_at_ns = info.finished_at_ns.map(|_| 0);
    info
}

fn export_json(s: &Store, run: RunId) -> Value {
    let mut out = Vec::new();
    s.export_json(run, &mut out).unwrap();
    let mut doc: Value = serde_json::from_slice(&out).unwrap();
    doc["created_at_ns"] = json!(0);
    doc["finished_at_ns"] = json!(0);
    doc
}

fn export_csv(s: &Store, run: RunId) -> String {
    let mut out = Vec::new();
    let describe = |m: &str| (m.to_uppercase(), "u".to_string());
    s.export_csv(run, &describe, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn the_archive_gives_back_what_a_sqlite_file_does() {
    let Some(server) = PgServer::start("same") else {
        return;
    };
    let url = server.database("same");
    // The URL as `--db` and FLOWLAB_DB pass it: a path that is a URL.
    let mut pg = Store::open(Path::new(&url)).unwrap();
    let mut lite = Store::open_in_memory().unwrap();
    assert_eq!(pg.schema_version().unwrap(), SCHEMA_VERSION);
    let (a, b) = (store_a_sweep(&mut pg), store_a_sweep(&mut lite));
    assert_eq!((a, b), (1, 1));

    let (pg_runs, lite_runs) = (pg.list_runs(10).unwrap(), lite.list_runs(10).unwrap());
    assert_eq!(pg_runs.len(), 1);
    let timeless_all = |runs: Vec<RunInfo>| runs.into_iter().map(timeless).collect::<Vec<_>>();
    assert_eq!(timeless_all(pg_runs), timeless_all(lite_runs));

    let (mut pg_run, mut lite_run) = (pg.load_run(a).unwrap(), lite.load_run(b).unwrap());
    pg_run.info = timeless(pg_run.info);
    lite_run.info = timeless(lite_run.info);
    assert_eq!(pg_run, lite_run);
    assert_eq!(
        pg_run.points[1].metrics[0],
        ("goodput_bps".to_string(), 9.5e6 + 1.0)
    );
    assert_eq!(pg_run.points[0].packets, 50);
    let point = pg_run.points[0].id;
    assert_eq!(
        pg.load_packets(point).unwrap(),
        (0..50).map(packet).collect::<Vec<_>>()
    );

    assert_eq!(export_json(&pg, a), export_json(&lite, b));
    let csv = export_csv(&pg, a);
    assert_eq!(csv, export_csv(&lite, b));
    assert!(
        csv.contains("\n1,1,0,1500,goodput_bps,9500001,u,GOODPUT_BPS\n"),
        "{csv}"
    );
    assert!(matches!(pg.load_run(7), Err(StoreError::NoSuchRun(7))));

    // The hosts' columns, as a dashboard reads them.
    let o = server.psql(
        "same",
        "SELECT DISTINCT client_host || '>' || agent_host FROM points",
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "site-a>site-b");
}

/// Hosts of a fleet opening a new archive at once: the migration runs once, under its lock,
/// and every writer stores every point.
#[test]
fn a_new_archive_opened_by_many_hosts_at_once() {
    let Some(server) = PgServer::start("many") else {
        return;
    };
    let url = server.database("many");
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(6));
    let writers: Vec<_> = (0..6)
        .map(|_| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                let mut s = Store::open_postgres(&url).unwrap();
                store_a_sweep(&mut s)
            })
        })
        .collect();
    let mut runs: Vec<RunId> = writers.into_iter().map(|w| w.join().unwrap()).collect();
    runs.sort();
    assert_eq!(runs, (1..=6).collect::<Vec<_>>());
    let s = Store::open_postgres(&url).unwrap();
    for run in runs {
        let loaded = s.load_run(run).unwrap();
        assert_eq!(loaded.info.status, RunStatus::Complete);
        assert_eq!(loaded.points.len(), 2);
        assert!(loaded
            .points
            .iter()
            .all(|p| p.metrics.len() == 3 && p.packets == 50));
    }
    let o = server.psql("many", "SELECT version FROM flowlab_schema");
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        SCHEMA_VERSION.to_string()
    );
}

#[test]
fn archive_failures_are_one_line_errors() {
    let Some(server) = PgServer::start("errors") else {
        return;
    };
    let url = server.database("errors");
    let mut s = Store::open_postgres(&url).unwrap();
    let run = s.begin_run("sweep", &json!({}), &env()).unwrap();
    // A packet that does not fit the column: the point's transaction is rolled back whole.
    let bad = PacketRecord {
        seq: u64::MAX,
        ..packet(0)
    };
    let e = s
        .add_point(
            run,
            &json!({}),
            0,
            &json!({}),
            &[("m".into(), 1.0)],
            Some(&[packet(1), bad]),
        )
        .unwrap_err();
    assert!(matches!(e, StoreError::Json(_)), "{e}");
    assert_eq!(s.load_run(run).unwrap().points.len(), 0);
    let o = server.psql("errors", "SELECT COUNT(*) FROM metrics");
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0");

    // An archive written by a newer flowlab.
    assert!(server
        .psql("errors", "UPDATE flowlab_schema SET version = 99")
        .status
        .success());
    let e = Store::open_postgres(&url).err().unwrap();
    assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");

    // A database that does not exist, and a password never shown.
    let missing = url.replace(
        "flowlab@localhost/errors",
        "flowlab:hunter2@localhost/nowhere",
    );
    let e = Store::open(Path::new(&missing)).err().unwrap().to_string();
    assert!(e.contains("\"nowhere\" does not exist"), "{e}");
    assert!(!e.contains("hunter2") && !e.contains('\n'), "{e}");
}
