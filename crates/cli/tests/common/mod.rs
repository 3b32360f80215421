//! Helpers for the CLI's integration tests: run the real `flowlab` binary, start agents.
#![allow(dead_code)] // each test file uses its own subset

pub mod attacker;
pub mod capture;
pub mod lab;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const FLOWLAB: &str = env!("CARGO_BIN_EXE_flowlab");

/// An agent process, killed when dropped.
pub struct Agent {
    pub child: Child,
    /// Address it listens on, as it printed it.
    pub addr: String,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `cmd` (a `flowlab serve ...` command) and waits for its "listening on ADDR" line.
pub fn start_agent(mut cmd: Command) -> Agent {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flowlab serve");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(10);
    let addr = loop {
        assert!(Instant::now() < deadline, "agent did not start");
        let line = lines
            .next()
            .expect("agent exited before listening")
            .expect("read");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest
                .split_whitespace()
                .next()
                .unwrap_or_default()
                .to_string();
        }
    };
    // Keep draining the agent's log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Agent { child, addr }
}

/// An agent on loopback with an ephemeral port.
pub fn loopback_agent(extra: &[&str]) -> Agent {
    let mut cmd = Command::new(FLOWLAB);
    cmd.args(["serve", "--bind", "127.0.0.1", "--port", "0"])
        .args(extra);
    start_agent(cmd)
}

/// A results database of this test process, so tests never write into the user's home.
pub fn test_db() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("flowlab-tests-{}.sqlite3", std::process::id()))
}

pub fn flowlab(args: &[&str]) -> Output {
    Command::new(FLOWLAB)
        .args(args)
        .env("FLOWLAB_DB", test_db())
        .output()
        .expect("run flowlab")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Parses stdout as one JSON document.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        )
    })
}

/// Asserts a failed command printed exactly one clear error line and did not panic.
pub fn assert_one_line_error(o: &Output, needle: &str) {
    let err = stderr(o);
    assert!(!o.status.success(), "expected failure, stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].contains(needle), "expected '{needle}' in: {err}");
}

pub fn f64_at(v: &serde_json::Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {v:#}"))
}

/// Every one of `slots` packets of a test document `v` was sent, or skipped by the sender as
/// hopelessly late (a loaded machine can stall it: that is accounted, not lost), and every
/// packet sent arrived.
pub fn assert_every_slot_accounted(v: &serde_json::Value, slots: f64) {
    let sent = f64_at(v, "/summary/packets_sent");
    let skipped = f64_at(v, "/summary/lost_by_sender");
    assert_eq!(sent + skipped, slots, "{}", v["summary"]);
    assert_eq!(
        f64_at(v, "/summary/packets_received"),
        sent,
        "{}",
        v["summary"]
    );
}
