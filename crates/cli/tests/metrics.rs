//! `flowlab serve --metrics`: the agent's Prometheus endpoint after real tests on loopback.

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};

use common::*;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

fn scrape(port: u16) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("metrics listening");
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\n\r\n")
        .expect("request");
    let mut reply = String::new();
    stream.read_to_string(&mut reply).expect("reply");
    assert!(reply.starts_with("HTTP/1.0 200 OK"), "{reply}");
    reply
}

fn value(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in {metrics}"))
        .parse()
        .expect("a number")
}

#[test]
fn metrics_count_tests_served_refused_and_their_bytes() {
    let port = free_port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let agent = loopback_agent(&["--max-duration", "2s", "--metrics", &metrics_addr]);
    let served = flowlab(&[
        "test",
        &agent.addr,
        "--rate",
        "1M",
        "--size",
        "500",
        "-d",
        "1s",
        "--no-store",
    ]);
    assert!(served.status.success(), "{}", stderr(&served));
    let refused = flowlab(&["test", &agent.addr, "-d", "5s", "--no-store"]);
    assert!(!refused.status.success());
    let metrics = scrape(port);
    assert_eq!(value(&metrics, "flowlab_tests_total"), 1.0);
    assert_eq!(value(&metrics, "flowlab_tests_refused_total"), 1.0);
    assert_eq!(value(&metrics, "flowlab_active_tests"), 0.0);
    // 1 Mbit/s for 1 s: 250 packets of 500 B, all received on loopback.
    let bytes = value(&metrics, "flowlab_received_bytes_total");
    assert!((120_000.0..=130_000.0).contains(&bytes), "{bytes}");
    assert!(
        metrics.contains(",protocol=\"udp\",role=\"receiver\"} 0\n"),
        "a per-test series: {metrics}"
    );
}

#[test]
fn metrics_listen_only_where_asked() {
    let bad = flowlab(&["serve", "--metrics", "localhost"]);
    assert_one_line_error(
        &bad,
        "invalid value 'localhost' for '--metrics <ADDR:PORT>'",
    );
    assert_eq!(bad.status.code(), Some(2));
}
