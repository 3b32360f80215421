//! Every number right, shown to be (issue 12): each metric flowlab reports is measured on the
//! same run by an independent observer, and the two must agree within a stated tolerance.
//!
//! | flowlab's figure | observer |
//! |---|---|
//! | packets and bytes sent, received, lost | tcpdump on the sender's and the receiver's veth |
//! | inter-arrival percentiles | receiver capture's stamps |
//! | sending rate and pacing gaps | sender capture's stamps |
//! | one-way delay (relative) | both captures (the namespaces share one clock) |
//! | round trips of an echoed load | the client's capture of each probe and its echo |
//! | loss in a dropping qdisc, and its attribution to the sender's qdisc | `tc -s qdisc` drop counter |
//! | TCP bytes delivered | the capture's sequence numbers |
//! | TCP retransmissions | `nstat` TcpRetransSegs in the sender's namespace |
//!
//! CPU against /proc/PID/stat is checked in `cpu.rs` (loopback); RFC 2544 and offered-load results against the
//! tbf's rate in `searches.rs`. Needs root and tcpdump; without them each test says it was
//! skipped.

mod common;

use std::collections::HashMap;
use std::process::Command;

use common::capture::{tcp_stream_bytes, tcpdump_or_skip, Capture, Captured, Packet};
use common::*;
use flowlab_netns::{Side, VethPair};
use serde_json::Value;

const AGENT: &str = "10.99.0.2";
const CONTROL_PORT: &str = "9470";

fn agent_in_b(pair: &VethPair) -> Agent {
    let mut cmd = pair.command_in(&pair.ns_b, FLOWLAB);
    cmd.args(["serve", "--bind", AGENT, "--port", CONTROL_PORT]);
    start_agent(cmd)
}

fn test_from_a(pair: &VethPair, args: &[&str]) -> Value {
    let o = pair
        .command_in(&pair.ns_a, FLOWLAB)
        .args(["test", AGENT, "--json"])
        .args(args)
        .output()
        .expect("run the client");
    assert!(o.status.success(), "client failed: {}", stderr(&o));
    json(&o)
}

/// A test datagram seen on the wire: its capture time and UDP payload length.
#[derive(Clone, Copy)]
struct Datagram {
    at_ns: u64,
    len: usize,
}

/// Test datagrams of `size` bytes to the agent, by sequence number. A veth passes GSO trains
/// as one skb, and a capture shows them so: each `size` bytes of it is one datagram.
fn probes(c: &Captured, size: usize) -> HashMap<u64, Datagram> {
    assert_eq!(c.kernel_drops, 0, "the capture itself lost packets");
    let to_agent = c
        .packets
        .iter()
        .filter(|p| p.proto == 17 && p.dst.to_string() == AGENT);
    let mut out = HashMap::new();
    for p in to_agent {
        for segment in p.payload.chunks(size) {
            if let Ok(probe) = flowlab_wire::probe::ProbeRepr::parse(segment) {
                let datagram = Datagram {
                    at_ns: p.at_ns,
                    len: segment.len(),
                };
                assert!(
                    out.insert(probe.seq, datagram).is_none(),
                    "sequence {} twice",
                    probe.seq
                );
            }
        }
    }
    out
}

/// The `q` quantile (0..1) of `values`, by nearest rank.
fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

fn gaps_ns(mut stamps: Vec<u64>) -> Vec<f64> {
    stamps.sort_unstable();
    stamps.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
}

fn assert_close(what: &str, flowlab: f64, observed: f64, abs: f64, rel: f64) {
    let tolerance = abs.max(observed.abs() * rel);
    assert!(
        (flowlab - observed).abs() <= tolerance,
        "{what}: flowlab says {flowlab}, the observer {observed} (tolerance {tolerance})"
    );
    eprintln!("crosscheck: {what}: flowlab {flowlab:.1}, observed {observed:.1}");
}

#[test]
fn udp_counts_gaps_and_delays_agree_with_captures_at_both_ends() {
    let Some(pair) = flowlab_netns::skip_unless_netns("crosscheck_udp") else {
        return;
    };
    if !tcpdump_or_skip("crosscheck_udp") {
        return;
    }
    let _agent = agent_in_b(&pair);
    let filter = format!("udp and dst host {AGENT}");
    let at_sender = Capture::start(&pair.ns_a, &pair.dev_a, &filter);
    let at_receiver = Capture::start(&pair.ns_b, &pair.dev_b, &filter);
    // 2000 packets/s of 1000 B for 3 s: 500 µs between departures.
    let v = test_from_a(&pair, &["--rate", "16M", "--size", "1000", "-d", "3s"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (sent_c, received_c) = (at_sender.stop(), at_receiver.stop());
    let (sent, received) = (probes(&sent_c, 1000), probes(&received_c, 1000));

    let s = &v["summary"];
    let at_socket = s["lost_at_receiver_socket"].as_f64().unwrap_or(0.0);
    assert_close(
        "packets sent",
        f64_at(s, "/packets_sent"),
        sent.len() as f64,
        0.0,
        0.0,
    );
    assert_close(
        "packets received (+ dropped at the socket)",
        f64_at(s, "/packets_received") + at_socket,
        received.len() as f64,
        0.0,
        0.0,
    );
    let bytes: usize = received.values().map(|p| p.len).sum();
    let per_packet = bytes as f64 / received.len() as f64;
    assert_close(
        "bytes received",
        f64_at(s, "/bytes_received") + at_socket * per_packet,
        bytes as f64,
        0.0,
        0.0,
    );
    assert_close(
        "packets lost in the network",
        f64_at(s, "/packets_lost"),
        (sent.len() - received.len()) as f64,
        0.0,
        0.0,
    );
    check_arrival_gaps(s, &received);
    check_departures(s, &sent);
    check_one_way_delay(s, &sent, &received);
}

/// Inter-arrival percentiles: both read the kernel's receive stamp of the same skb.
fn check_arrival_gaps(s: &Value, received: &HashMap<u64, Datagram>) {
    let mut gaps = gaps_ns(received.values().map(|p| p.at_ns).collect());
    for (q, key) in [(0.5, "p50_ns"), (0.9, "p90_ns")] {
        let ptr = format!("/inter_arrival_distribution/{key}");
        let observed = quantile(&mut gaps, q);
        assert_close(
            &format!("inter-arrival {key}"),
            f64_at(s, &ptr),
            observed,
            20e3,
            0.02,
        );
    }
}

/// The rate on the wire is the rate flowlab says it sent; the wire's departure gaps vary no
/// more than flowlab's schedule error allows (a gap is the difference of two errors).
fn check_departures(s: &Value, sent: &HashMap<u64, Datagram>) {
    let stamps: Vec<u64> = sent.values().map(|p| p.at_ns).collect();
    let span_s = (stamps.iter().max().unwrap() - stamps.iter().min().unwrap()) as f64 / 1e9;
    let wire_pps = (stamps.len() - 1) as f64 / span_s;
    assert_close(
        "packets/s sent",
        f64_at(s, "/sender_packets_per_sec"),
        wire_pps,
        0.0,
        0.01,
    );
    let interval = 500e3;
    let mut gaps = gaps_ns(stamps);
    assert_close(
        "departure gap p50",
        interval,
        quantile(&mut gaps, 0.5),
        0.0,
        0.02,
    );
    let mut deviation: Vec<f64> = gaps.iter().map(|g| (g - interval).abs()).collect();
    let wire_p90 = quantile(&mut deviation, 0.9);
    let error_p90 = f64_at(s, "/schedule_error/p90_ns") - f64_at(s, "/schedule_error/min_ns");
    assert!(
        wire_p90 <= 2.0 * error_p90 + 50e3,
        "the wire's gaps vary by {wire_p90} ns (p90), flowlab's schedule error p90 is {error_p90} ns"
    );
}

/// Relative one-way delay (delay above the smallest) from the two captures, packet by packet,
/// against flowlab's, which also holds the sender's own stack time.
fn check_one_way_delay(
    s: &Value,
    sent: &HashMap<u64, Datagram>,
    received: &HashMap<u64, Datagram>,
) {
    let delays: Vec<f64> = received
        .iter()
        .filter_map(|(seq, r)| Some(r.at_ns as f64 - sent.get(seq)?.at_ns as f64))
        .collect();
    let min = delays.iter().copied().fold(f64::INFINITY, f64::min);
    let mut relative: Vec<f64> = delays.iter().map(|d| d - min).collect();
    for (q, key) in [(0.5, "p50_ns"), (0.9, "p90_ns")] {
        let ptr = format!("/relative_one_way_delay/{key}");
        let observed = quantile(&mut relative, q);
        assert_close(
            &format!("relative one-way delay {key}"),
            f64_at(s, &ptr),
            observed,
            100e3,
            0.1,
        );
    }
}

/// RTT under load (`--echo-every`): each echoed packet's round trip against the client veth's
/// capture of the probe leaving and its echo coming back; flowlab's also holds the client's
/// own sending stack time.
#[test]
fn echoed_round_trips_agree_with_the_client_capture() {
    let Some(pair) = flowlab_netns::skip_unless_netns("crosscheck_rtt") else {
        return;
    };
    if !tcpdump_or_skip("crosscheck_rtt") {
        return;
    }
    let _agent = agent_in_b(&pair);
    let capture = Capture::start(&pair.ns_a, &pair.dev_a, &format!("udp and host {AGENT}"));
    let args = [
        "--rate",
        "16M",
        "--size",
        "1000",
        "-d",
        "2s",
        "--echo-every",
        "10",
    ];
    let v = test_from_a(&pair, &args);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let captured = capture.stop();
    let sent = probes(&captured, 1000);
    let echoes = captured
        .packets
        .iter()
        .filter(|p| p.proto == 17 && p.src.to_string() == AGENT);
    let mut round_trips = Vec::new();
    for echo in echoes {
        let Ok(probe) = flowlab_wire::probe::ProbeRepr::parse(&echo.payload) else {
            continue;
        };
        if let Some(out) = sent.get(&probe.seq).filter(|_| probe.is_echo()) {
            round_trips.push((echo.at_ns - out.at_ns) as f64);
        }
    }
    let counted = f64_at(&v, "/summary/round_trip/count");
    assert_eq!(
        round_trips.len() as f64,
        counted,
        "echoes captured and counted"
    );
    for (q, key) in [(0.5, "p50_ns"), (0.9, "p90_ns")] {
        let observed = quantile(&mut round_trips, q);
        let flowlab = f64_at(&v, &format!("/summary/round_trip/{key}"));
        assert_close(
            &format!("echoed round trip {key}"),
            flowlab,
            observed,
            100e3,
            0.1,
        );
    }
}

/// Drops of one qdisc, from `tc -s qdisc show`.
fn qdisc_drops(pair: &VethPair, side: Side) -> u64 {
    let o = Command::new("tc")
        .args([
            "-n",
            pair.ns(side),
            "-s",
            "qdisc",
            "show",
            "dev",
            pair.dev(side),
        ])
        .output()
        .expect("tc");
    let text = String::from_utf8_lossy(&o.stdout);
    let after = text.split("dropped ").nth(1).expect("a drop counter");
    after
        .split(',')
        .next()
        .unwrap()
        .trim()
        .parse()
        .expect("a number of drops")
}

#[test]
fn loss_behind_a_dropping_tbf_agrees_with_the_capture_and_tc() {
    let Some(pair) = flowlab_netns::skip_unless_netns("crosscheck_loss") else {
        return;
    };
    if !tcpdump_or_skip("crosscheck_loss") {
        return;
    }
    pair.limit_rate(Side::A, 8_000_000, 10_000, 10)
        .expect("tbf");
    let _agent = agent_in_b(&pair);
    let before = qdisc_drops(&pair, Side::A);
    let at_receiver = Capture::start(
        &pair.ns_b,
        &pair.dev_b,
        &format!("udp and dst host {AGENT}"),
    );
    // 12 Mbit/s offered to 8: about a third is dropped by the tbf. A qdisc counts a dropped
    // GSO train as one drop: transmit stamps keep the sender from forming trains.
    let args = [
        "--rate",
        "12M",
        "--size",
        "1000",
        "-d",
        "3s",
        "--tx-timestamps",
    ];
    let v = test_from_a(&pair, &args);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let received = at_receiver.stop();
    let dropped = qdisc_drops(&pair, Side::A) - before;
    let s = &v["summary"];
    let sent = f64_at(s, "/packets_sent");
    let arrived = probes(&received, 1000).len() as f64;
    let lost = f64_at(s, "/packets_lost");
    assert!(
        lost > sent / 5.0,
        "the tbf drops a good share: {lost} of {sent}"
    );
    assert_close("packets lost", lost, sent - arrived, 0.0, 0.0);
    assert_close(
        "loss %",
        f64_at(s, "/loss_pct"),
        100.0 * (sent - arrived) / sent,
        1e-6,
        0.0,
    );
    // The tbf may drop a few control segments too.
    assert!(
        dropped as f64 >= lost && dropped as f64 <= lost + 5.0,
        "tc counts {dropped} drops, flowlab {lost} lost"
    );
    // Those drops are the sending host's own, and the report says so: its reading of the
    // tbf's counter (within the test) agrees with tc's (around the command).
    let counted = f64_at(&v, "/client/host_qdisc_drops/drops");
    assert_eq!(v["client"]["host_qdisc_drops"]["qdisc"], "tbf");
    assert!(
        counted <= dropped as f64 && dropped as f64 <= counted + 5.0,
        "flowlab read {counted} drops, tc {dropped}"
    );
    assert_close(
        "lost in the sender's qdisc",
        f64_at(s, "/lost_in_sender_qdisc"),
        lost,
        0.0,
        0.0,
    );
    assert_eq!(f64_at(s, "/lost_beyond_sender"), 0.0);
}

/// TcpRetransSegs of a namespace, from `nstat` (absolute, history left alone).
fn retransmitted_segments(ns: &str) -> u64 {
    let o = Command::new("ip")
        .args(["netns", "exec", ns, "nstat", "-asz", "TcpRetransSegs"])
        .output()
        .expect("nstat");
    let text = String::from_utf8_lossy(&o.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("TcpRetransSegs"))
        .expect("nstat line");
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .expect("a count")
}

#[test]
fn tcp_bytes_and_retransmits_agree_with_the_capture_and_nstat() {
    let Some(pair) = flowlab_netns::skip_unless_netns("crosscheck_tcp") else {
        return;
    };
    if !tcpdump_or_skip("crosscheck_tcp") {
        return;
    }
    // A short queue at 10 Mbit/s: TCP overflows it and retransmits.
    pair.limit_rate(Side::A, 10_000_000, 5_000, 2).expect("tbf");
    let _agent = agent_in_b(&pair);
    let before = retransmitted_segments(&pair.ns_a);
    let filter = format!("tcp and dst host {AGENT} and not dst port {CONTROL_PORT}");
    let at_receiver = Capture::start(&pair.ns_b, &pair.dev_b, &filter);
    let v = test_from_a(&pair, &["--proto", "tcp", "-d", "3s"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let captured = at_receiver.stop();
    let retransmitted = retransmitted_segments(&pair.ns_a) - before;
    assert_eq!(captured.kernel_drops, 0, "the capture itself lost packets");
    let data: Vec<&Packet> = captured.packets.iter().collect();
    assert_close(
        "TCP bytes received",
        f64_at(&v, "/summary/bytes_received"),
        tcp_stream_bytes(&data) as f64,
        0.0,
        0.0,
    );
    let flowlab = f64_at(&v, "/client/tcp_info/total_retrans");
    assert!(retransmitted > 0, "the short queue makes TCP retransmit");
    // The control connection may retransmit a segment or two of its own.
    eprintln!("crosscheck: TCP retransmissions: flowlab {flowlab}, nstat {retransmitted}");
    assert!(
        flowlab <= retransmitted as f64 && flowlab + 2.0 >= retransmitted as f64,
        "flowlab counts {flowlab} retransmissions, nstat {retransmitted}"
    );
}
