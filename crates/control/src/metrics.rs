//! The agent's Prometheus metrics (`flowlab serve --metrics ADDR`): its counters and the
//! summaries of its last [`RECENT_TESTS`] tests in the text exposition format, served over a
//! minimal HTTP/1.0 `GET /metrics` on a listener of its own, one request at a time.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use flowlab_results::SideReport;
use flowlab_spec::TestSpec;

use crate::agent::AgentStats;

/// Tests whose summaries the metrics keep (the oldest dropped first): memory stays bounded
/// however long the agent runs.
pub const RECENT_TESTS: usize = 32;
/// The longest request head read, and how long a scraper may take to send it.
const MAX_REQUEST: usize = 8192;
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the idle listener looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// One finished test as the agent saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct TestSummary {
    pub session: u32,
    /// udp, tcp or raw.
    pub protocol: &'static str,
    /// The agent's role: sender, receiver, echo or responder.
    pub role: &'static str,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Packets the agent's receiver counted lost (0 when it did not receive).
    pub packets_lost: u64,
    pub duration_s: f64,
    pub failed: bool,
}

impl TestSummary {
    /// The agent's side of a finished test.
    pub fn of(session: u32, spec: &TestSpec, report: &SideReport) -> TestSummary {
        let echoed = report.echo.as_ref().map_or(0, |e| e.bytes_echoed);
        let (requests, responses) = report
            .responder
            .as_ref()
            .map_or((0, 0), |r| (r.request_bytes, r.response_bytes));
        let sender = report.sender.as_ref();
        let receiver = report.receiver.as_ref();
        let duration_ns = sender
            .map(|s| s.duration_ns)
            .into_iter()
            .chain(receiver.map(|r| r.duration_ns))
            .max()
            .unwrap_or(0);
        TestSummary {
            session,
            protocol: match spec.protocol {
                flowlab_spec::Protocol::Udp => "udp",
                flowlab_spec::Protocol::Tcp => "tcp",
                flowlab_spec::Protocol::Raw => "raw",
                flowlab_spec::Protocol::Icmp => "icmp",
            },
            role: role_name(report.role),
            bytes_sent: sender.map_or(0, |s| s.bytes_sent) + echoed + responses,
            bytes_received: receiver.map_or(0, |r| r.bytes_received) + echoed + requests,
            packets_lost: receiver.map_or(0, |r| r.packets.lost),
            duration_s: duration_ns as f64 / 1e9,
            failed: report.error.is_some(),
        }
    }
}

fn role_name(role: flowlab_results::Role) -> &'static str {
    use flowlab_results::Role;
    match role {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
        Role::Echo => "echo",
        Role::Requester => "requester",
        Role::Responder => "responder",
    }
}

/// The last [`RECENT_TESTS`] summaries.
#[derive(Debug, Default)]
pub struct RecentTests(std::sync::Mutex<VecDeque<TestSummary>>);

impl RecentTests {
    /// Keeps `summary`, dropping the oldest beyond [`RECENT_TESTS`].
    pub fn push(&self, summary: TestSummary) {
        let mut recent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if recent.len() == RECENT_TESTS {
            recent.pop_front();
        }
        recent.push_back(summary);
    }

    fn snapshot(&self) -> Vec<TestSummary> {
        let recent = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        recent.iter().cloned().collect()
    }
}

/// The agent's metrics in the Prometheus text format (version 0.0.4).
pub fn exposition(stats: &AgentStats) -> String {
    let mut out = String::new();
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    let counters = [
        (
            "flowlab_sessions_total",
            "Control connections admitted.",
            load(&stats.sessions),
        ),
        (
            "flowlab_tests_total",
            "Tests started (served).",
            load(&stats.tests_run),
        ),
        (
            "flowlab_tests_refused_total",
            "Requests refused (limits, bad parameters, authentication).",
            load(&stats.refused),
        ),
        (
            "flowlab_connections_turned_away_total",
            "Connections turned away in setup (admission limits).",
            load(&stats.turned_away),
        ),
        (
            "flowlab_control_malformed_total",
            "Malformed control frames or messages.",
            load(&stats.malformed_control),
        ),
        (
            "flowlab_sent_bytes_total",
            "Test payload bytes the agent sent, over finished tests.",
            load(&stats.bytes_sent),
        ),
        (
            "flowlab_received_bytes_total",
            "Test payload bytes the agent received, over finished tests.",
            load(&stats.bytes_received),
        ),
    ];
    for (name, help, value) in counters {
        family(&mut out, name, help, "counter");
        let _ = writeln!(out, "{name} {value}");
    }
    family(
        &mut out,
        "flowlab_active_tests",
        "Tests running now.",
        "gauge",
    );
    let active = stats.active_tests.load(Ordering::Relaxed);
    let _ = writeln!(out, "flowlab_active_tests {active}");
    recent_families(&mut out, &stats.recent.snapshot());
    out
}

/// The per-test gauges, labelled by session, protocol and the agent's role.
fn recent_families(out: &mut String, recent: &[TestSummary]) {
    type Field = fn(&TestSummary) -> f64;
    let gauges: [(&str, &str, Field); 5] = [
        (
            "flowlab_test_sent_bytes",
            "Bytes the agent sent in a recent test.",
            |t| t.bytes_sent as f64,
        ),
        (
            "flowlab_test_received_bytes",
            "Bytes the agent received in a recent test.",
            |t| t.bytes_received as f64,
        ),
        (
            "flowlab_test_lost_packets",
            "Packets the agent's receiver counted lost in a recent test.",
            |t| t.packets_lost as f64,
        ),
        (
            "flowlab_test_duration_seconds",
            "Duration of a recent test at the agent.",
            |t| t.duration_s,
        ),
        (
            "flowlab_test_failed",
            "1 if a recent test ended in an error.",
            |t| f64::from(u8::from(t.failed)),
        ),
    ];
    for (name, help, field) in gauges {
        family(out, name, help, "gauge");
        for t in recent {
            let _ = writeln!(
                out,
                "{name}{{session=\"{}\",protocol=\"{}\",role=\"{}\"}} {}",
                t.session,
                t.protocol,
                t.role,
                field(t)
            );
        }
    }
}

fn family(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The metrics endpoint's thread; dropping it stops the thread and waits for it.
pub struct MetricsServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Serves `GET /metrics` on `listener` until dropped or the process is interrupted.
    pub fn start(listener: TcpListener, stats: Arc<AgentStats>) -> std::io::Result<MetricsServer> {
        listener.set_nonblocking(true)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) && !flowlab_sys::signal::is_interrupted() {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = answer(stream, &stats);
                    }
                    Err(_) => std::thread::sleep(POLL),
                }
            }
        });
        Ok(MetricsServer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request head and answers it: the metrics for `GET /metrics`, 404 or 405 else.
fn answer(mut stream: TcpStream, stats: &AgentStats) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST {
        match stream.read(&mut buf)? {
            0 => break,
            n => head.extend_from_slice(&buf[..n]),
        }
    }
    let response = response(&head, stats);
    stream.write_all(response.as_bytes())
}

/// The HTTP response to a request head.
fn response(head: &[u8], stats: &AgentStats) -> String {
    let line = head
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or(b"");
    let mut words = line.split(|&b| b == b' ');
    let (status, body, kind) = match (words.next(), words.next()) {
        (Some(b"GET"), Some(b"/metrics")) => (
            "200 OK",
            exposition(stats),
            "text/plain; version=0.0.4; charset=utf-8",
        ),
        (Some(b"GET"), _) => ("404 Not Found", "see /metrics\n".into(), "text/plain"),
        _ => ("405 Method Not Allowed", "GET only\n".into(), "text/plain"),
    };
    format!(
        "HTTP/1.0 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests;
