//! `flowlab test --proto icmp` beside Debian's `ping` (iputils) across two namespaces: the
//! same requests through the same bottleneck should lose about as many and wait about as
//! long. Needs root, iproute2 and ping; each test says it was skipped without them.

mod common;

use std::process::Command;

use common::*;
use flowlab_netns::{Side, VethPair};

const HOST: &str = "10.99.0.2";
const HOST6: &str = "fd99::2";

/// What ping reported: requests, replies, and each reply's round trip in ms.
struct PingRun {
    sent: f64,
    received: f64,
    rtts_ms: Vec<f64>,
}

impl PingRun {
    fn loss_pct(&self) -> f64 {
        100.0 * (self.sent - self.received) / self.sent
    }

    fn median_ms(&self) -> f64 {
        let mut r = self.rtts_ms.clone();
        r.sort_by(f64::total_cmp);
        r[r.len() / 2]
    }
}

fn ping_or_skip(test: &str) -> bool {
    let found = Command::new("ping").arg("-V").output().is_ok();
    if !found {
        eprintln!("skipping {test}: Debian's ping (iputils-ping) is not installed");
    }
    found
}

/// Runs ping in namespace A; its summary line and per-reply times read back.
fn ping(pair: &VethPair, args: &[&str]) -> PingRun {
    let o = pair
        .command_on(Side::A, "ping")
        .args(args)
        .output()
        .expect("run ping");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    let summary = text
        .lines()
        .find(|l| l.contains("packets transmitted"))
        .unwrap_or_else(|| panic!("no ping summary: {text}{}", stderr(&o)));
    let count = |what: &str| -> f64 {
        let before = summary.split(what).next().unwrap_or_default();
        let word = before.rsplit([' ', ',']).find(|w| !w.is_empty());
        word.and_then(|w| w.parse().ok()).expect("a count")
    };
    let rtts_ms = text
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    PingRun {
        sent: count(" packets transmitted"),
        received: count(" received"),
        rtts_ms,
    }
}

fn flowlab_icmp(pair: &VethPair, args: &[&str]) -> serde_json::Value {
    let o = pair
        .command_on(Side::A, FLOWLAB)
        .args(["test", "--proto", "icmp", "--no-store", "--json"])
        .args(args)
        .output()
        .expect("run flowlab");
    assert!(o.status.success(), "flowlab failed: {}", stderr(&o));
    json(&o)
}

/// Lets namespace A's root open ping sockets, so flowlab takes that path there (the raw
/// socket is taken where the range excludes it, as by default).
fn allow_ping_sockets(pair: &VethPair) {
    let status = pair
        .command_on(Side::A, "sysctl")
        .args(["-qw", "net.ipv4.ping_group_range=0 2147483647"])
        .status()
        .expect("sysctl");
    assert!(status.success());
}

/// 1000-byte echoes every 50 ms (164 kbit/s of IP) while the replies leave through an
/// 80 kbit/s tbf with 300 ms of queue: about half are lost and the rest wait in a full queue.
/// ping's loss is flowlab's within 10 points, its median round trip within 25 %.
#[test]
fn loss_and_round_trips_through_a_tbf_match_pings() {
    let Some(pair) = flowlab_netns::skip_unless_netns("icmp_tbf") else {
        return;
    };
    if !ping_or_skip("icmp_tbf") {
        return;
    }
    allow_ping_sockets(&pair);
    pair.limit_rate(Side::B, 80_000, 1514, 300).unwrap();
    let theirs = ping(&pair, &["-c", "100", "-i", "0.05", "-s", "1000", HOST]);
    // 1000 B every 50 ms.
    let ours = flowlab_icmp(
        &pair,
        &[
            HOST, "-s", "1000", "-r", "160k", "-n", "100", "--drain", "2s",
        ],
    );
    let loss = f64_at(&ours, "/summary/loss_pct");
    assert_eq!(f64_at(&ours, "/summary/packets_sent"), 100.0);
    assert!(
        (20.0..80.0).contains(&theirs.loss_pct()),
        "the tbf should drop about half of ping's: {}",
        theirs.loss_pct()
    );
    assert!(
        (loss - theirs.loss_pct()).abs() <= 10.0,
        "flowlab lost {loss} %, ping {} %",
        theirs.loss_pct()
    );
    let median_ms = f64_at(&ours, "/summary/round_trip/p50_ns") / 1e6;
    let ping_ms = theirs.median_ms();
    assert!(
        (median_ms - ping_ms).abs() <= 0.25 * ping_ms,
        "median round trip: flowlab {median_ms} ms, ping {ping_ms} ms"
    );
    assert_eq!(f64_at(&ours, "/summary/duplicates"), 0.0);
}

/// Over IPv6 through the bare veth (a raw socket: ping sockets left disallowed), nothing is
/// lost and both tools' round trips stay well under a millisecond apart.
#[test]
fn ipv6_round_trips_match_pings_on_a_bare_path() {
    let Some(pair) = flowlab_netns::skip_unless_netns("icmp_ipv6") else {
        return;
    };
    if !ping_or_skip("icmp_ipv6") {
        return;
    }
    let theirs = ping(&pair, &["-6", "-c", "50", "-i", "0.02", "-s", "200", HOST6]);
    let ours = flowlab_icmp(&pair, &[HOST6, "-s", "200", "-r", "80k", "-n", "50"]);
    assert_eq!(theirs.loss_pct(), 0.0);
    assert_eq!(f64_at(&ours, "/summary/packets_received"), 50.0);
    assert_eq!(f64_at(&ours, "/summary/loss_pct"), 0.0);
    let median_ms = f64_at(&ours, "/summary/round_trip/p50_ns") / 1e6;
    assert!(
        (median_ms - theirs.median_ms()).abs() < 1.0,
        "median round trip: flowlab {median_ms} ms, ping {} ms",
        theirs.median_ms()
    );
    assert!(ours["summary"]["wire_headers"]
        .as_str()
        .unwrap()
        .contains("ICMP 8 + IPv6 40"));
}

/// Above the veth's 1500-byte MTU a request leaves as fragments and comes back whole; with
/// don't-fragment the kernel refuses it, as it refuses ping's `-M do`.
#[test]
fn requests_above_the_mtu_are_fragmented_or_refused_and_say_so() {
    let Some(pair) = flowlab_netns::skip_unless_netns("icmp_mtu") else {
        return;
    };
    if !ping_or_skip("icmp_mtu") {
        return;
    }
    let whole = flowlab_icmp(&pair, &[HOST, "-s", "4000", "-r", "320k", "-n", "10"]);
    assert_eq!(f64_at(&whole, "/summary/packets_received"), 10.0);
    let notes = whole["client"]["notes"].to_string();
    assert!(
        notes.contains("4028-byte IP datagram, sent as 3 fragments over the path MTU of 1500 B"),
        "{notes}"
    );
    let refused = flowlab_icmp(
        &pair,
        &[
            HOST,
            "-s",
            "4000",
            "-r",
            "320k",
            "-n",
            "10",
            "--dont-fragment",
        ],
    );
    assert_eq!(f64_at(&refused, "/summary/packets_sent"), 0.0);
    assert_eq!(f64_at(&refused, "/summary/lost_by_sender"), 10.0);
    let notes = refused["client"]["notes"].to_string();
    assert!(
        notes.contains("don't-fragment is set: the kernel sent none"),
        "{notes}"
    );
    assert!(
        notes.contains("10 request(s) not sent: Message too long"),
        "{notes}"
    );
    let theirs = pair
        .command_on(Side::A, "ping")
        .args(["-c", "1", "-M", "do", "-s", "4000", HOST])
        .output()
        .unwrap();
    assert!(
        !theirs.status.success(),
        "ping -M do sent a 4028-byte datagram"
    );
}
