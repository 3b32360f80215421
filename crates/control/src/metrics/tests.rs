use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use super::*;

fn summary(session: u32) -> TestSummary {
    TestSummary {
        session,
        protocol: "udp",
        role: "receiver",
        bytes_sent: 0,
        bytes_received: 1000,
        packets_lost: 2,
        duration_s: 1.5,
        failed: false,
    }
}

fn stats_with_tests(tests: u32) -> AgentStats {
    let stats = AgentStats::default();
    for session in 0..tests {
        stats.record(summary(session));
    }
    stats
}

/// Checks the text exposition format line by line (what `promtool check metrics` checks of
/// syntax): every sample's family has HELP and TYPE before it, names and label sets are
/// well formed, values are numbers, no series repeats. Returns the samples.
fn parse_exposition(text: &str) -> Vec<(String, f64)> {
    let valid_name = |n: &str| {
        !n.is_empty()
            && !n.starts_with(|c: char| c.is_ascii_digit())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let (mut helped, mut typed) = (Vec::new(), Vec::new());
    let mut samples: Vec<(String, f64)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(valid_name(name) && !helped.contains(&name), "{line}");
            helped.push(name);
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(
                helped.last() == Some(&name) && !typed.contains(&name),
                "{line}"
            );
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            assert!(kind != "counter" || name.ends_with("_total"), "{line}");
            typed.push(name);
        } else {
            let (series, value) = line.rsplit_once(' ').expect("a sample: series value");
            let name = series.split('{').next().unwrap();
            assert_eq!(
                typed.last(),
                Some(&name),
                "sample outside its family: {line}"
            );
            if let Some(labels) = series.strip_prefix(name).filter(|l| !l.is_empty()) {
                let inner = labels.strip_prefix('{').and_then(|l| l.strip_suffix('}'));
                for pair in inner.expect("{labels}").split(',') {
                    let (key, quoted) = pair.split_once('=').expect("key=\"value\"");
                    assert!(valid_name(key), "{line}");
                    assert!(quoted.len() >= 2 && quoted.starts_with('"') && quoted.ends_with('"'));
                }
            }
            let value: f64 = value.parse().expect("a number");
            assert!(
                !samples.iter().any(|(s, _)| s == series),
                "repeated {series}"
            );
            samples.push((series.to_string(), value));
        }
    }
    samples
}

#[test]
fn the_exposition_is_well_formed_and_counts() {
    let stats = stats_with_tests(3);
    stats.refused.fetch_add(2, Ordering::Relaxed);
    let samples = parse_exposition(&exposition(&stats));
    let value = |series: &str| samples.iter().find(|(s, _)| s == series).map(|s| s.1);
    assert_eq!(value("flowlab_tests_refused_total"), Some(2.0));
    assert_eq!(value("flowlab_received_bytes_total"), Some(3000.0));
    assert_eq!(value("flowlab_active_tests"), Some(0.0));
    assert_eq!(
        value(r#"flowlab_test_lost_packets{session="2",protocol="udp",role="receiver"}"#),
        Some(2.0)
    );
    let empty = parse_exposition(&exposition(&AgentStats::default()));
    assert_eq!(
        empty.len(),
        8,
        "the counters, and no per-test series without tests"
    );
}

#[test]
fn promtool_accepts_the_exposition() {
    let Ok(mut child) = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    else {
        assert!(
            std::env::var_os("CI").is_none(),
            "promtool is required when CI is set (.ci/run installs Debian's prometheus)"
        );
        eprintln!("skipped: promtool is not installed (the format is checked by the parser test)");
        return;
    };
    let text = exposition(&stats_with_tests(2));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}"
    );
}

#[test]
fn memory_holds_the_last_tests_only() {
    let stats = stats_with_tests(100);
    let recent = stats.recent.snapshot();
    assert_eq!(recent.len(), RECENT_TESTS);
    assert_eq!(recent[0].session, 100 - RECENT_TESTS as u32);
    assert_eq!(stats.bytes_received.load(Ordering::Relaxed), 100_000);
}

fn get(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    reply
}

#[test]
fn the_endpoint_answers_get_metrics_only() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = MetricsServer::start(listener, Arc::new(stats_with_tests(1))).unwrap();
    let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.0 200 OK\r\n"), "{ok}");
    assert!(ok.contains("Content-Type: text/plain; version=0.0.4"));
    let body = ok.split("\r\n\r\n").nth(1).unwrap();
    assert_eq!(parse_exposition(body).len(), 13);
    assert!(get(addr, "GET / HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
    assert!(get(addr, "POST /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 405"));
    assert!(get(addr, "\r\n\r\n").starts_with("HTTP/1.0 405"));
    drop(server);
    assert!(TcpStream::connect(addr).is_err(), "stopped when dropped");
}
