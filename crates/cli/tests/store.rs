//! The results database under concurrency and faults, through the real binary: sweeps sharing
//! one new database, a corrupt file, a full disk. A test or sweep whose results cannot be
//! stored still prints them, says why in one line and exits 1.

mod common;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output};

use common::*;

/// A fresh database path of this test process, removed with its WAL files when dropped.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> TempDb {
        let path = std::env::temp_dir().join(format!(
            "flowlab-store-{}-{name}.sqlite3",
            std::process::id()
        ));
        let db = TempDb(path);
        db.remove();
        db
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.arg()));
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.remove();
    }
}

/// `flowlab test` against `agent`, stored into `db`.
fn test_into(agent: &Agent, db: &str, extra: &[&str]) -> Output {
    Command::new(FLOWLAB)
        .args([
            "test",
            &agent.addr,
            "-d",
            "200ms",
            "--rate",
            "1M",
            "--db",
            db,
        ])
        .args(extra)
        .output()
        .unwrap()
}

/// A sweep of `sizes` against `agent`, stored into `db`.
fn sweep_into(agent: &Agent, db: &str, sizes: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(FLOWLAB);
    cmd.args(["sweep", &agent.addr, "--vary", sizes, "-d", "200ms"])
        .args(["--quiet", "--db", db])
        .args(extra);
    cmd
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Every run in `db` as exported JSON, oldest first.
fn runs(db: &str) -> Vec<serde_json::Value> {
    let history = flowlab(&["history", "--db", db]);
    assert!(history.status.success(), "{}", stderr(&history));
    let count = stdout(&history).lines().skip(1).count();
    (1..=count)
        .map(|id| json(&flowlab(&["export", &id.to_string(), "--json", "--db", db])))
        .collect()
}

/// Three sweeps started at once on a database that does not exist yet: each stores every point
/// and finishes its run (they used to race on creating the schema and fail on the lock).
#[test]
fn concurrent_sweeps_on_a_new_database_all_store_every_point() {
    let agent = loopback_agent(&[]);
    let db = TempDb::new("concurrent");
    let children: Vec<_> = (0..3)
        .map(|_| {
            sweep_into(&agent, db.arg(), "size=100,200,300,400", &["--rate", "1M"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "a sweep failed: {}", stderr(&o));
    }
    let runs = runs(db.arg());
    assert_eq!(runs.len(), 3);
    for run in &runs {
        assert_eq!(run["status"], "complete", "{run:#}");
        assert_eq!(run["points"].as_array().unwrap().len(), 4, "{run:#}");
    }
}

/// A file of garbage where the database should be: the test still prints its result, then
/// fails with one line that says what is wrong with the file.
#[test]
fn a_corrupt_database_fails_the_test_and_keeps_its_result() {
    let agent = loopback_agent(&[]);
    let db = TempDb::new("corrupt");
    std::fs::write(&db.0, b"flowlab test: not a database ".repeat(200)).unwrap();
    let o = test_into(&agent, db.arg(), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_one_line_error(&o, "result not stored");
    assert!(
        stderr(&o).contains("not a SQLite database"),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("Result ("), "{}", stdout(&o));
    let o = test_into(&agent, db.arg(), &["--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(json(&o)["summary"].is_object());
}

/// A tmpfs of a few pages, unmounted (and its directory removed) when dropped.
struct TinyDisk(PathBuf);

impl TinyDisk {
    /// Mounts one, or says why the test is skipped (root is needed for `mount`).
    fn mount(test_name: &str) -> Option<TinyDisk> {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        if flowlab_netns::parse_effective_uid(&status) != Some(0) {
            eprintln!("{test_name}: skipped: needs root");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("flowlab-tiny-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "mount -t tmpfs failed although running as root");
        Some(TinyDisk(dir))
    }

    /// Fills the disk, leaving `free` bytes (tmpfs counts whole pages).
    fn fill(&self, free: u64) {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let page = [0u8; 4096];
        while f.write_all(&page).and_then(|_| f.flush()).is_ok() {}
        let len = f.metadata().unwrap().len();
        f.set_len(len.saturating_sub(free)).unwrap();
    }
}

impl Drop for TinyDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A disk that fills up: a sweep stops at the point it cannot store, a test cannot store its
/// result; both print what they measured, say "disk full" and exit 1, and no run is left
/// "running".
#[test]
fn a_full_disk_fails_sweep_and_test_and_keeps_their_results() {
    let Some(disk) = TinyDisk::mount("a_full_disk") else {
        return;
    };
    let agent = loopback_agent(&[]);
    let db = disk.0.join("history.sqlite3");
    let db = db.to_str().unwrap();
    assert!(test_into(&agent, db, &[]).status.success());
    // Room for the run's header, not for a point with its packet log.
    disk.fill(64 * 1024);
    let o = sweep_into(
        &agent,
        db,
        "size=100,200",
        &["--packet-log", "--rate", "8M"],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_one_line_error(&o, "disk full");
    // The sweep's expected time, then the table of what it measured.
    let table = stdout(&o)
        .split_once('\n')
        .map(|(_, rest)| rest.to_string());
    assert!(
        table.is_some_and(|t| t.starts_with("throughput\n")),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("0 points stored"), "{}", stdout(&o));
    disk.fill(0);
    let o = test_into(&agent, db, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_one_line_error(&o, "disk full");
    assert!(stdout(&o).contains("Result ("), "{}", stdout(&o));
    std::fs::remove_file(disk.0.join("filler")).unwrap();
    let statuses: Vec<_> = runs(db).iter().map(|r| r["status"].clone()).collect();
    assert_eq!(statuses, ["complete", "failed"]);
}
