//! iperf3 interoperation on loopback with Debian's unmodified iperf3: `iperf3 -c` against
//! `flowlab serve --iperf3` (TCP, UDP at a rate, -R, -P 2, a refusal), iperf3's --json
//! figures checked against the counts flowlab's server logs; and `flowlab test --iperf3`
//! against `iperf3 -s`, flowlab's figures checked against the server's -J output. Without
//! iperf3 each test says it was skipped (under CI it fails instead; .ci/run installs it).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use common::*;

/// iperf3, or `None` after saying `test` was skipped (a failure under CI).
fn iperf3(test: &str) -> Option<&'static str> {
    let found = Command::new("iperf3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "iperf3 is required when CI is set (.ci/run installs it)"
        );
        eprintln!("{test}: skipped: needs iperf3 (apt-get install iperf3)");
        return None;
    }
    Some("iperf3")
}

/// `flowlab serve --iperf3` on a loopback port, and the lines it logs after its banner.
struct Server {
    _agent: Agent,
    port: String,
    lines: Receiver<String>,
}

impl Server {
    fn start() -> Server {
        let mut child = Command::new(FLOWLAB)
            .args([
                "serve",
                "--bind",
                "127.0.0.1",
                "--port",
                "0",
                "--iperf3",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn flowlab serve --iperf3");
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let banner = lines.next().expect("no banner").expect("read");
        let port = banner
            .split("iperf3 clients on 127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no port in {banner}"))
            .to_string();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let agent = Agent {
            child,
            addr: String::new(),
        };
        Server {
            _agent: agent,
            port,
            lines: rx,
        }
    }

    /// The next line about an iperf3 test.
    fn test_line(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .expect("no iperf3 test logged");
            if line.contains("iperf3 test from") {
                return line;
            }
        }
    }

    /// `iperf3 -c` against it with `flags`, its --json document.
    fn iperf3_client(&self, flags: &[&str]) -> serde_json::Value {
        let o = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &self.port, "-J"])
            .args(flags)
            .output()
            .expect("run iperf3 -c");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("iperf3's JSON");
        // iperf3 -J exits 0 on some errors: its document says them.
        assert!(
            o.status.success() && v.get("error").is_none(),
            "iperf3 failed: {v}"
        );
        v
    }
}

/// The number right before `unit` in a server's log line ("received 1000 B", "3 lost").
fn count_before(line: &str, unit: &str) -> f64 {
    let words: Vec<&str> = line.split([' ', ',']).filter(|w| !w.is_empty()).collect();
    let at = words
        .windows(2)
        .position(|w| w[1] == unit)
        .unwrap_or_else(|| panic!("no count of {unit} in {line}"));
    words[at].parse().expect("a number")
}

#[test]
fn iperf3_tcp_client_gets_flowlabs_received_bytes() {
    let Some(_) = iperf3("iperf3_tcp_client_gets_flowlabs_received_bytes") else {
        return;
    };
    let server = Server::start();
    let v = server.iperf3_client(&["-t", "2"]);
    let line = server.test_line();
    let received = count_before(&line, "B");
    assert_eq!(f64_at(&v, "/end/sum_received/bytes"), received, "{line}");
    let sent = f64_at(&v, "/end/sum_sent/bytes");
    // What was still in flight when the client sent TEST_END is not counted, as in iperf3.
    assert!(
        received <= sent && received > 0.9 * sent,
        "{sent} {received}"
    );
}

#[test]
fn iperf3_udp_client_at_a_rate_gets_flowlabs_count_and_loss() {
    let Some(_) = iperf3("iperf3_udp_client_at_a_rate_gets_flowlabs_count_and_loss") else {
        return;
    };
    let server = Server::start();
    let v = server.iperf3_client(&["-u", "-b", "4M", "-l", "1000", "-t", "2"]);
    let line = server.test_line();
    let (received, lost) = (count_before(&line, "packets"), count_before(&line, "lost"));
    assert_eq!(
        f64_at(&v, "/end/sum_received/packets"),
        received + lost,
        "{line}"
    );
    assert_eq!(f64_at(&v, "/end/sum_received/lost_packets"), lost);
    assert_eq!(
        f64_at(&v, "/end/sum_received/bytes"),
        count_before(&line, "B")
    );
    // 4 Mbit/s of 1000-byte datagrams for 2 s: 1000 (fewer where a loaded host skips late
    // slots), each sent one received on loopback.
    let sent = f64_at(&v, "/end/sum_sent/packets");
    assert!((900.0..=1010.0).contains(&sent), "{sent}");
    assert_eq!(received, sent);
    assert!(f64_at(&v, "/end/sum_received/jitter_ms") < 5.0);
}

#[test]
fn iperf3_reverse_clients_get_what_flowlab_sent_over_two_streams() {
    let Some(_) = iperf3("iperf3_reverse_clients_get_what_flowlab_sent_over_two_streams") else {
        return;
    };
    let server = Server::start();
    let tcp = server.iperf3_client(&["-R", "-P", "2", "-t", "2"]);
    let line = server.test_line();
    assert!(line.contains("TCP -R, 2 stream(s)"), "{line}");
    assert_eq!(
        f64_at(&tcp, "/end/sum_sent/bytes"),
        count_before(&line, "B")
    );
    assert_eq!(tcp["end"]["streams"].as_array().map(Vec::len), Some(2));
    let udp = server.iperf3_client(&["-R", "-P", "2", "-u", "-b", "2M", "-l", "500", "-t", "2"]);
    let line = server.test_line();
    let sent = count_before(&line, "packets");
    assert_eq!(f64_at(&udp, "/end/sum_sent/packets"), sent, "{line}");
    // Two streams of 2 Mbit/s in 500-byte datagrams for 2 s: 2000 in all, none lost.
    assert!((1800.0..=2020.0).contains(&sent), "{sent}");
    assert_eq!(f64_at(&udp, "/end/sum_received/lost_packets"), 0.0);
}

#[test]
fn iperf3_clients_beyond_the_agents_limits_are_refused_in_one_line() {
    let Some(_) = iperf3("iperf3_clients_beyond_the_agents_limits_are_refused_in_one_line") else {
        return;
    };
    let server = Server::start();
    let o = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &server.port, "-t", "301"])
        .output()
        .expect("run iperf3 -c");
    assert!(!o.status.success());
    let said = String::from_utf8_lossy(&o.stderr).to_string() + &String::from_utf8_lossy(&o.stdout);
    assert!(said.contains("error - test duration too long"), "{said}");
    let line = server.test_line();
    assert!(
        line.ends_with("refused or failed: time 301 is not 0 to 300"),
        "{line}"
    );
    let bidir = Command::new("iperf3")
        .args(["-c", "127.0.0.1", "-p", &server.port, "--bidir", "-t", "1"])
        .output()
        .expect("run iperf3 -c");
    assert!(!bidir.status.success());
    assert!(server.test_line().ends_with("bidirectional not supported"));
}

/// `iperf3 -s -1 -J` on a free loopback port, once it listens; its port.
fn iperf3_server() -> (std::process::Child, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new("iperf3")
        .args(["-s", "-1", "-J", "-B", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn iperf3 -s");
    // Listening: the port in /proc/net/tcp in state 0A (a connection would be its one test).
    let hex = format!(":{port:04X} ");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string("/proc/net/tcp")
        .unwrap_or_default()
        .lines()
        .any(|l| l.contains(&hex) && l.split_whitespace().nth(3) == Some("0A"))
    {
        assert!(Instant::now() < deadline, "iperf3 -s did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, port.to_string())
}

/// Runs `flowlab test --iperf3` with `flags` against a fresh `iperf3 -s`; flowlab's result
/// and the server's -J document.
fn flowlab_against_iperf3(flags: &[&str]) -> (serde_json::Value, serde_json::Value) {
    let (server, port) = iperf3_server();
    let target = format!("127.0.0.1:{port}");
    let db = test_db();
    let o = Command::new(FLOWLAB)
        .args([
            "test",
            "--iperf3",
            &target,
            "--json",
            "--db",
            db.to_str().unwrap(),
        ])
        .args(flags)
        .output()
        .expect("run flowlab test --iperf3");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("stored as run"), "{}", stderr(&o));
    let server = server.wait_with_output().expect("iperf3 -s");
    let theirs = serde_json::from_slice(&server.stdout).expect("iperf3 -s JSON");
    (json(&o), theirs)
}

#[test]
fn flowlab_test_against_iperf3_s_udp_agrees_with_the_servers_json() {
    let Some(_) = iperf3("flowlab_test_against_iperf3_s_udp_agrees_with_the_servers_json") else {
        return;
    };
    let flags = ["--udp", "--rate", "4M", "--size", "1000", "-d", "2s"];
    let (ours, theirs) = flowlab_against_iperf3(&flags);
    let sent = f64_at(&ours, "/summary/packets_sent");
    assert!((900.0..=1010.0).contains(&sent), "{sent}");
    let received = f64_at(&theirs, "/end/sum_received/packets");
    let lost = f64_at(&theirs, "/end/sum_received/lost_packets");
    assert_eq!(
        received, sent,
        "every datagram counted by iperf3 -s on loopback"
    );
    assert_eq!(f64_at(&ours, "/summary/packets_lost"), lost);
    assert_eq!(
        f64_at(&ours, "/summary/bytes_received"),
        f64_at(&theirs, "/end/sum_received/bytes")
    );
    let jitter_ms = f64_at(&theirs, "/end/sum_received/jitter_ms");
    assert!((f64_at(&ours, "/summary/jitter_ns") / 1e6 - jitter_ms).abs() < 1e-9);
}

#[test]
fn flowlab_test_against_iperf3_s_reverse_counts_what_the_server_sent() {
    let Some(_) = iperf3("flowlab_test_against_iperf3_s_reverse_counts_what_the_server_sent")
    else {
        return;
    };
    let flags = [
        "--udp",
        "--reverse",
        "--flows",
        "2",
        "--rate",
        "2M",
        "--size",
        "500",
        "-d",
        "2s",
    ];
    let (ours, theirs) = flowlab_against_iperf3(&flags);
    let sent = f64_at(&theirs, "/end/sum_sent/packets");
    assert_eq!(f64_at(&ours, "/summary/packets_sent"), sent);
    // flowlab's own receive path: every datagram the server sent, none lost on loopback.
    assert_eq!(f64_at(&ours, "/client/receiver/packets/unique"), sent);
    assert_eq!(f64_at(&ours, "/summary/packets_lost"), 0.0);
    assert!(ours["summary"]["relative_one_way_delay"].is_object());
    let (tcp, theirs) = flowlab_against_iperf3(&["--tcp", "--reverse", "-d", "2s"]);
    let bytes = f64_at(&theirs, "/end/sum_sent/bytes");
    assert_eq!(f64_at(&tcp, "/summary/bytes_sent"), bytes);
    assert_eq!(f64_at(&tcp, "/summary/bytes_received"), bytes);
}
