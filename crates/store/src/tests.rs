use super::*;
use serde_json::json;

impl Store {
    fn sqlite(&self) -> &Connection {
        self.db.as_sqlite().expect("a SQLite store")
    }
}

fn env() -> Environment {
    Environment {
        hostname: "h".into(),
        kernel: "6.1".into(),
        cpu_model: "cpu".into(),
        flowlab_version: "0.1.0".into(),
        clock_source: "tsc".into(),
    }
}

fn packet(seq: u64, lost: bool) -> PacketRecord {
    PacketRecord {
        flow: 0,
        seq,
        size: 100,
        sent_ns: Some(1_000 + seq),
        received_ns: (!lost).then_some(2_000 + seq),
        echoed_ns: None,
    }
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("flowlab-store-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("sub").join("history.sqlite3")
}

#[test]
fn round_trip_of_a_sweep() {
    let mut s = Store::open_in_memory().unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let run = s
        .begin_run("sweep", &json!({"vary": ["size"]}), &env())
        .unwrap();
    let metrics = vec![
        ("loss_pct".to_string(), 1.5),
        ("rtt_mean_us".to_string(), 42.0),
    ];
    let packets = [packet(0, false), packet(1, true)];
    let p = s
        .add_point(
            run,
            &json!({"size": 100}),
            0,
            &json!({"x": 1}),
            &metrics,
            Some(&packets),
        )
        .unwrap();
    s.add_point(
        run,
        &json!({"size": 200}),
        0,
        &json!({"x": 2}),
        &metrics,
        None,
    )
    .unwrap();
    s.finish_run(run, RunStatus::Complete).unwrap();
    let loaded = s.load_run(run).unwrap();
    assert_eq!(loaded.info.kind, "sweep");
    assert_eq!(loaded.info.status, RunStatus::Complete);
    assert_eq!(loaded.info.env, env());
    assert_eq!(loaded.points.len(), 2);
    assert_eq!(loaded.points[0].metrics, metrics);
    assert_eq!(loaded.points[0].packets, 2);
    assert_eq!(loaded.points[1].params, json!({"size": 200}));
    assert_eq!(s.load_packets(p).unwrap(), packets.to_vec());
    assert_eq!(loaded.metric_names(), vec!["loss_pct", "rtt_mean_us"]);
    let runs = s.list_runs(10).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].points, 2);
    assert_eq!(s.done_points(run).unwrap().len(), 2);
}

/// Each point's two ends are kept as columns, for queries over many agents.
#[test]
fn points_keep_their_hosts() {
    let mut s = Store::open_in_memory().unwrap();
    let run = s.begin_run("test", &json!({}), &env()).unwrap();
    let ends = json!({"client": {"host": "site-a"}, "agent": {"host": "site-b"}});
    let p = s.add_point(run, &json!({}), 0, &ends, &[], None).unwrap();
    let q = s
        .add_point(run, &json!({}), 0, &json!({}), &[], None)
        .unwrap();
    let hosts = |id: PointId| {
        s.sqlite()
            .query_row(
                "SELECT client_host, agent_host FROM points WHERE id = ?1",
                [id],
                |r| {
                    Ok((
                        r.get::<_, Option<String>>(0)?,
                        r.get::<_, Option<String>>(1)?,
                    ))
                },
            )
            .unwrap()
    };
    assert_eq!(hosts(p), (Some("site-a".into()), Some("site-b".into())));
    assert_eq!(hosts(q), (None, None));
}

#[test]
fn exports() {
    let mut s = Store::open_in_memory().unwrap();
    let run = s.begin_run("sweep", &json!({}), &env()).unwrap();
    s.add_point(
        run,
        &json!({"proto": "udp", "size": 100}),
        1,
        &json!({}),
        &[("loss_pct".into(), 2.0)],
        None,
    )
    .unwrap();
    let mut csv = Vec::new();
    let describe = |name: &str| (format!("{name}, labelled"), "%".to_string());
    s.export_csv(run, &describe, &mut csv).unwrap();
    assert_eq!(
        String::from_utf8(csv).unwrap(),
        "run,point,repetition,proto,size,metric,value,unit,label\n1,0,1,udp,100,loss_pct,2,%,\"loss_pct, labelled\"\n"
    );
    let mut js = Vec::new();
    s.export_json(run, &mut js).unwrap();
    let v: Value = serde_json::from_slice(&js).unwrap();
    assert_eq!(v["points"][0]["metrics"]["loss_pct"], json!(2.0));
    assert_eq!(v["environment"]["kernel"], json!("6.1"));
}

#[test]
fn unknown_runs_are_clear_errors() {
    let mut s = Store::open_in_memory().unwrap();
    let e = s.load_run(7).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no run 7 in the results database (see `flowlab history`)"
    );
    assert!(matches!(
        s.add_point(7, &json!({}), 0, &json!({}), &[], None),
        Err(StoreError::NoSuchRun(7))
    ));
    assert!(matches!(
        s.finish_run(7, RunStatus::Failed),
        Err(StoreError::NoSuchRun(7))
    ));
}

#[test]
fn file_database_persists_and_creates_its_directory() {
    let path = temp_path("persist");
    let run = {
        let mut s = Store::open(&path).unwrap();
        let run = s
            .begin_run("test", &json!({"target": "x"}), &env())
            .unwrap();
        s.add_point(run, &json!({}), 0, &json!({"a": 1}), &[], None)
            .unwrap();
        run
    };
    let s = Store::open(&path).unwrap();
    assert_eq!(s.load_run(run).unwrap().points[0].result, json!({"a": 1}));
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// A database written by schema 1 (the previous layout) opens, migrates, keeps its runs, and
/// takes new runs with the new columns.
#[test]
fn migrates_a_version_1_database() {
    let path = temp_path("v1");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    {
        let c = Connection::open(&path).unwrap();
        c.execute_batch(&schema::Dialect::Sqlite.render(schema::V1))
            .unwrap();
        c.execute_batch(
            "INSERT INTO runs (kind, created_at_ns, status, params_json) VALUES ('test', 5, 'complete', '{\"rate\":1000}');
             INSERT INTO points (run_id, ordinal, params_json, repetition, result_json) VALUES (1, 0, '{}', 0, '{\"old\":true}');
             INSERT INTO metrics (run_id, point_id, repetition, name, value) VALUES (1, 1, 0, 'loss_pct', 0.5);
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let mut s = Store::open(&path).unwrap();
    assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
    let old = s.load_run(1).unwrap();
    assert_eq!(old.info.status, RunStatus::Complete);
    assert_eq!(old.info.params, json!({"rate": 1000}));
    assert_eq!(old.info.env, Environment::default());
    assert_eq!(old.info.finished_at_ns, None);
    assert_eq!(old.points[0].result, json!({"old": true}));
    assert_eq!(old.points[0].metrics, vec![("loss_pct".to_string(), 0.5)]);
    let run = s.begin_run("sweep", &json!({}), &env()).unwrap();
    let p = s
        .add_point(
            run,
            &json!({}),
            0,
            &json!({}),
            &[],
            Some(&[packet(0, true)]),
        )
        .unwrap();
    assert_eq!(s.load_packets(p).unwrap().len(), 1);
    assert_eq!(s.list_runs(10).unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn newer_schema_is_refused() {
    let path = temp_path("newer");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    let e = Store::open(&path).err().unwrap();
    assert!(matches!(e, StoreError::TooNew { found: 99, .. }), "{e}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// Another process holding the write lock past the retries: a clear "locked" error, and nothing
/// of the failed write is left.
#[test]
fn locked_database_is_a_clear_error() {
    let path = temp_path("locked");
    let mut s = Store::open(&path).unwrap();
    s.sqlite().busy_timeout(Duration::from_millis(100)).unwrap();
    s.lock_wait = Duration::from_millis(500);
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let e = s.begin_run("test", &json!({}), &env()).unwrap_err();
    assert!(matches!(e, StoreError::Locked { .. }), "{e}");
    assert!(e.to_string().contains("is locked by another process"));
    holder.execute_batch("ROLLBACK;").unwrap();
    assert!(s.list_runs(10).unwrap().is_empty());
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// A lock held longer than SQLite's busy handler waits is outlasted by the retries.
#[test]
fn lock_held_past_the_busy_timeout_is_waited_out() {
    let path = temp_path("outlasted");
    let mut s = Store::open(&path).unwrap();
    s.sqlite().busy_timeout(Duration::from_millis(50)).unwrap();
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE;").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(600));
        holder.execute_batch("COMMIT;").unwrap();
    });
    let start = Instant::now();
    let run = s.begin_run("test", &json!({}), &env()).unwrap();
    assert!(start.elapsed() >= Duration::from_millis(500));
    release.join().unwrap();
    assert_eq!(s.list_runs(10).unwrap()[0].id, run);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// A failure inside a point's transaction leaves no partial point and keeps earlier ones.
#[test]
fn failed_point_leaves_nothing_half_written() {
    let mut s = Store::open_in_memory().unwrap();
    let run = s.begin_run("sweep", &json!({}), &env()).unwrap();
    s.add_point(
        run,
        &json!({"n": 1}),
        0,
        &json!({}),
        &[("m".into(), 1.0)],
        None,
    )
    .unwrap();
    let bad = PacketRecord {
        seq: u64::MAX,
        ..packet(0, false)
    };
    assert!(s
        .add_point(
            run,
            &json!({"n": 2}),
            0,
            &json!({}),
            &[("m".into(), 2.0)],
            Some(&[packet(0, false), bad])
        )
        .is_err());
    let r = s.load_run(run).unwrap();
    assert_eq!(r.points.len(), 1);
    let n: i64 = s
        .sqlite()
        .query_row("SELECT COUNT(*) FROM metrics", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = s
        .sqlite()
        .query_row("SELECT COUNT(*) FROM packets", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
}

#[test]
fn read_only_file_is_a_clear_error() {
    let path = temp_path("ro");
    drop(Store::open(&path).unwrap());
    let c = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut s = Store::setup(c, path.display().to_string()).unwrap();
    let e = s.begin_run("test", &json!({}), &env()).unwrap_err();
    assert!(matches!(e, StoreError::ReadOnly { .. }), "{e}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

#[test]
fn default_path_prefers_flowlab_db() {
    // Only reads the environment; the variables of this process are left as they are.
    if std::env::var_os("FLOWLAB_DB").is_none() {
        if let Some(p) = default_path() {
            assert!(p.ends_with("flowlab/history.sqlite3"));
        }
    }
}

/// A full disk (simulated with a page limit) is a clear error, rolls the point back, and keeps
/// earlier runs.
#[test]
fn full_disk_is_a_clear_error_and_keeps_earlier_runs() {
    let mut s = Store::open_in_memory().unwrap();
    let run = s.begin_run("sweep", &json!({}), &env()).unwrap();
    s.add_point(
        run,
        &json!({"n": 1}),
        0,
        &json!({}),
        &[("m".into(), 1.0)],
        None,
    )
    .unwrap();
    let pages: i64 = s
        .sqlite()
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    s.sqlite()
        .query_row(
            &format!("PRAGMA max_page_count = {}", pages + 2),
            [],
            |_| Ok(()),
        )
        .unwrap();
    let many: Vec<PacketRecord> = (0..50_000).map(|i| packet(i, false)).collect();
    let e = s
        .add_point(run, &json!({"n": 2}), 0, &json!({}), &[], Some(&many))
        .unwrap_err();
    assert!(matches!(e, StoreError::DiskFull { .. }), "{e}");
    assert!(e.to_string().contains("earlier runs are intact"));
    let r = s.load_run(run).unwrap();
    assert_eq!(r.points.len(), 1);
    assert_eq!(s.load_packets(r.points[0].id).unwrap().len(), 0);
}

/// `writers` threads start at once on `path`, each opening its own connection and storing a run
/// of `points` points; every one must succeed.
fn concurrent_runs(path: &Path, writers: usize, points: usize) -> Vec<RunId> {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(writers));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (path, barrier) = (path.to_path_buf(), barrier.clone());
            std::thread::spawn(move || -> Result<RunId> {
                barrier.wait();
                let mut s = Store::open(&path)?;
                let run = s.begin_run("sweep", &json!({"writer": w}), &env())?;
                for n in 0..points {
                    let packets = [packet(n as u64, false)];
                    let m = [("m".to_string(), n as f64)];
                    s.add_point(run, &json!({"n": n}), 0, &json!({}), &m, Some(&packets))?;
                }
                s.finish_run(run, RunStatus::Complete)?;
                Ok(run)
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| {
            h.join()
                .unwrap()
                .unwrap_or_else(|e| panic!("a writer failed: {e}"))
        })
        .collect()
}

/// Every run complete with all its points, metrics and packets.
fn assert_all_stored(path: &Path, runs: &[RunId], points: usize) {
    let s = Store::open(path).unwrap();
    assert_eq!(s.list_runs(1000).unwrap().len(), runs.len());
    for &id in runs {
        let run = s.load_run(id).unwrap();
        assert_eq!(run.info.status, RunStatus::Complete, "run {id}");
        assert_eq!(run.points.len(), points, "run {id}");
        assert!(run
            .points
            .iter()
            .all(|p| p.packets == 1 && p.metrics.len() == 1));
    }
    let mode: String = s
        .sqlite()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

/// Openers of a database that does not exist yet race on creating its schema: none may fail.
#[test]
fn new_database_opened_by_many_at_once() {
    for round in 0..5 {
        let path = temp_path(&format!("new-{round}"));
        let runs = concurrent_runs(&path, 8, 5);
        assert_all_stored(&path, &runs, 5);
        let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
    }
}

/// Writers interleaving points on one database wait for each other instead of failing.
#[test]
fn concurrent_writers_all_store_every_point() {
    let path = temp_path("writers");
    drop(Store::open(&path).unwrap());
    let runs = concurrent_runs(&path, 6, 60);
    assert_all_stored(&path, &runs, 60);
    let _ = std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap());
}

/// A run dropped before it is finished (an error, an early return) is marked failed.
#[test]
fn unfinished_run_is_marked_failed() {
    let mut s = Store::open_in_memory().unwrap();
    let (failed, complete) = {
        let failed = s.start_run("test", &json!({}), &env()).unwrap().id();
        let run = s.start_run("test", &json!({}), &env()).unwrap();
        let complete = run.id();
        run.finish(RunStatus::Complete).unwrap();
        (failed, complete)
    };
    let status = |id| s.load_run(id).unwrap().info.status;
    assert_eq!(status(failed), RunStatus::Failed);
    assert_eq!(status(complete), RunStatus::Complete);
    assert!(s.load_run(failed).unwrap().info.finished_at_ns.is_some());
}
