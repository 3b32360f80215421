//! STAMP: flowlab's session-sender against flowlab's reflector on loopback, and between two
//! network namespaces in both modes over IPv4 and IPv6; the packets on the wire as tshark's
//! TWAMP-Test (or STAMP) dissector reads them; the flags' one-line errors. The namespace tests
//! need root and iproute2 (and tshark for the capture); without them each says it was skipped,
//! and under CI it fails instead.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use flowlab_netns::VethPair;

/// Starts `cmd` (a `flowlab serve --stamp-only ...`) and waits for its banner; the reflector's
/// address as it said it. Killed when dropped.
fn start_reflector(mut cmd: Command) -> Agent {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn flowlab serve --stamp");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let banner = lines
        .next()
        .expect("reflector exited before starting")
        .expect("read");
    let addr = banner
        .split("STAMP reflector on UDP ")
        .nth(1)
        .and_then(|rest| rest.split(": ").next())
        .unwrap_or_else(|| panic!("no address in {banner}"))
        .to_string();
    std::thread::spawn(move || for _ in lines {});
    Agent { child, addr }
}

/// A reflector in `ns_b` on `bind` (ADDR:PORT), with any extra flags.
fn reflector_in_b(pair: &VethPair, bind: &str, extra: &[&str]) -> Agent {
    let mut cmd = pair.command_in(&pair.ns_b, FLOWLAB);
    cmd.args(["serve", "--stamp-only", "--stamp", bind])
        .args(extra);
    start_reflector(cmd)
}

/// Runs `flowlab test --stamp` in `cmd`'s place (a namespace, or here) and parses its result.
fn session(mut cmd: Command, target: &str, count: u32, extra: &[&str]) -> serde_json::Value {
    let o: Output = cmd
        .args([
            "test", "--stamp", target, "--rate", "140800", "--drain", "3s",
        ])
        .args(["--count", &count.to_string()])
        .args(extra)
        .arg("--json")
        .output()
        .expect("run flowlab test --stamp");
    assert!(o.status.success(), "session failed: {}", stderr(&o));
    json(&o)
}

/// A session of `count` packets at 400 packets/s of 44 B (fewer of larger ones). Replies
/// have 3 s to come back: a loaded CI machine can stall a process that long.
fn session_from_a(pair: &VethPair, target: &str, count: u32, extra: &[&str]) -> serde_json::Value {
    session(pair.command_in(&pair.ns_a, FLOWLAB), target, count, extra)
}

fn key_file(name: &str) -> std::path::PathBuf {
    let path =
        std::env::temp_dir().join(format!("flowlab-stamp-{name}-{}.key", std::process::id()));
    std::fs::write(&path, "a key shared by sender and reflector\n").unwrap();
    path
}

/// Every packet came back, measured: delays present and sane, the TTL read at the reflector.
fn assert_clean_session(v: &serde_json::Value, mode: &str, size: f64) {
    assert_eq!(v["kind"], "stamp");
    assert_eq!(v["mode"], mode);
    assert_eq!(f64_at(v, "/packet_size"), size);
    assert_eq!(f64_at(v, "/sender/packets_sent"), 40.0);
    assert_eq!(f64_at(v, "/replies/unique"), 40.0, "{v:#}");
    assert_eq!(f64_at(v, "/loss/round_trip_lost"), 0.0);
    assert_eq!(
        v["loss"]["reflector_stateful"], false,
        "flowlab reflects statelessly"
    );
    let two_way = f64_at(v, "/two_way_delay/mean_ns");
    let round_trip = f64_at(v, "/round_trip/mean_ns");
    let residence = f64_at(v, "/reflector_residence/mean_ns");
    assert!(
        two_way > 0.0 && two_way < 50e6,
        "two-way delay {two_way} ns"
    );
    assert!((round_trip - residence - two_way).abs() < 1e3, "{v:#}");
    // Both ends share this host's clock, so one-way delays add up to the two-way delay.
    let forward = f64_at(v, "/one_way/forward/mean_ns");
    let backward = f64_at(v, "/one_way/backward/mean_ns");
    assert!((forward + backward - two_way).abs() < 1e3, "{v:#}");
    assert_eq!(f64_at(v, "/sender_ttl/min"), 64.0, "{v:#}");
    assert!(v["one_way"]["reason"].as_str().is_some());
    assert_eq!(f64_at(v, "/rejected/bad_hmac"), 0.0);
}

/// Needs neither root nor namespaces: a reflector on loopback, on a port the kernel picks.
#[test]
fn stamp_session_on_loopback() {
    let mut cmd = Command::new(FLOWLAB);
    cmd.args(["serve", "--stamp-only", "--stamp", "127.0.0.1:0"]);
    let reflector = start_reflector(cmd);
    let v = session(
        Command::new(FLOWLAB),
        &reflector.addr,
        40,
        &["--pacing", "efficient"],
    );
    assert_clean_session(&v, "unauthenticated", 44.0);
    // The session waits for its slots as every paced sender does, as asked (a slot already
    // due when a late wake-up ends needs no wait of its own).
    assert_eq!(v["sender"]["pacing"]["mode"], "efficient", "{v:#}");
    assert!(f64_at(&v, "/sender/pacing/waits") >= 1.0, "{v:#}");
    // Human output names each figure.
    let o = flowlab(&[
        "test",
        "--stamp",
        &reflector.addr,
        "--count",
        "3",
        "--rate",
        "3520",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    for figure in [
        "two-way delay",
        "round trip",
        "reflector residence",
        "one-way delays",
        "pacing",
    ] {
        assert!(text.contains(figure), "{figure} missing in {text}");
    }
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
}

#[test]
fn stamp_flags_are_checked_in_one_line() {
    let o = flowlab(&["test", "--stamp", "127.0.0.1", "--size", "43"]);
    assert_one_line_error(&o, "44 to 65507 bytes, not 43");
    let o = flowlab(&["test", "--stamp", "127.0.0.1", "--rate", "max"]);
    assert_one_line_error(&o, "a STAMP session is paced");
    let o = flowlab(&["test", "--stamp", "127.0.0.1", "--mode", "loopback"]);
    assert_one_line_error(&o, "cannot be used with");
    let o = flowlab(&["serve", "--stamp", "host:x", "--stamp-only"]);
    assert_one_line_error(&o, "invalid --stamp 'host:x'");
    let o = flowlab(&["serve", "--stamp-only"]);
    assert_one_line_error(&o, "--stamp");
}

#[test]
fn stamp_sessions_between_namespaces_in_both_modes() {
    let Some(pair) = flowlab_netns::skip_unless_netns("stamp_between_namespaces") else {
        return;
    };
    let _plain = reflector_in_b(&pair, "10.99.0.2:862", &[]);
    let v = session_from_a(&pair, "10.99.0.2", 40, &[]);
    assert_clean_session(&v, "unauthenticated", 44.0);
    let v = session_from_a(&pair, "10.99.0.2", 40, &["--size", "300"]);
    assert_clean_session(&v, "unauthenticated", 300.0);

    let key = key_file("both-modes");
    let key_arg = key.to_str().unwrap();
    let _auth = reflector_in_b(&pair, "[::]:8620", &["--key-file", key_arg]);
    let v = session_from_a(&pair, "[fd99::2]:8620", 40, &["--key-file", key_arg]);
    assert_clean_session(&v, "authenticated", 112.0);
    let v = session_from_a(&pair, "10.99.0.2:8620", 40, &["--key-file", key_arg]);
    assert_clean_session(&v, "authenticated", 112.0);

    // The wrong key: the reflector drops every packet, so nothing comes back.
    let wrong =
        std::env::temp_dir().join(format!("flowlab-stamp-wrong-{}.key", std::process::id()));
    std::fs::write(&wrong, "not the key").unwrap();
    let v = session_from_a(
        &pair,
        "10.99.0.2:8620",
        40,
        &["--key-file", wrong.to_str().unwrap()],
    );
    assert_eq!(f64_at(&v, "/replies/unique"), 0.0);
    assert_eq!(f64_at(&v, "/loss/round_trip_loss_pct"), 100.0);
    let _ = std::fs::remove_file(key);
    let _ = std::fs::remove_file(wrong);
}

/// tshark, or `None` after saying the test was skipped (a failure under CI).
fn tshark() -> Option<&'static str> {
    let found = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "tshark is required when CI is set (.ci/run installs it)"
        );
        eprintln!("stamp_packets_decode_in_tshark: skipped: needs tshark");
        return None;
    }
    Some("tshark")
}

/// The dissector: Wireshark's STAMP one where this tshark has it, else TWAMP-Test.
fn dissector(tshark: &str) -> &'static str {
    let protocols = Command::new(tshark).args(["-G", "protocols"]).output();
    let has_stamp = protocols.is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l.split('\t').nth(2) == Some("stamp"))
    });
    if has_stamp {
        "stamp"
    } else {
        "twamp.test"
    }
}

/// The reflectors' ports: unauthenticated, authenticated.
const PORTS: [u16; 2] = [862, 8620];

/// Captures `packets` packets to or from [`PORTS`] on `ns_b`'s veth while `during` runs.
fn capture(pair: &VethPair, packets: u32, file: &Path, during: impl FnOnce()) {
    let filter = format!("udp port {} or udp port {}", PORTS[0], PORTS[1]);
    let mut child: Child = pair
        .command_in(&pair.ns_b, "tshark")
        .args(["-i", &pair.dev_b, "-f", &filter])
        .args(["-c", &packets.to_string(), "-w"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tshark");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "tshark did not start capturing");
        let line = lines.next().expect("tshark exited").expect("read");
        if line.contains("Capturing on") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    // tshark says so a little before dumpcap's filter is in place.
    std::thread::sleep(Duration::from_millis(500));
    during();
    // tshark stops by itself after `packets` (and only then has written them all).
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait for tshark").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tshark did not see {packets} packets within 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The `fields` of the packets `filter` picks, one line each, [`PORTS`] decoded as STAMP.
fn decode(tshark: &str, file: &Path, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut cmd = Command::new(tshark);
    cmd.args(["-r"]).arg(file);
    for port in PORTS {
        cmd.args(["-d", &format!("udp.port=={port},{}", dissector(tshark))]);
    }
    cmd.args(["-Y", filter, "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let o = cmd.output().expect("run tshark -r");
    assert!(o.status.success(), "tshark: {}", stderr(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn stamp_packets_decode_in_tshark() {
    let Some(tshark) = tshark() else {
        return;
    };
    let Some(pair) = flowlab_netns::skip_unless_netns("stamp_packets_decode_in_tshark") else {
        return;
    };
    let file = std::env::temp_dir().join(format!("flowlab-stamp-{}.pcap", std::process::id()));
    let key = key_file("tshark");
    let key_arg = key.to_str().unwrap();
    let _plain = reflector_in_b(&pair, "10.99.0.2:862", &[]);
    let _auth = reflector_in_b(&pair, "10.99.0.2:8620", &["--key-file", key_arg]);
    capture(&pair, 30, &file, || {
        let v = session_from_a(&pair, "10.99.0.2", 10, &["--size", "60"]);
        assert_eq!(f64_at(&v, "/replies/unique"), 10.0, "{v:#}");
        let v = session_from_a(&pair, "10.99.0.2:8620", 5, &["--key-file", key_arg]);
        assert_eq!(f64_at(&v, "/replies/unique"), 5.0, "{v:#}");
    });
    let proto = dissector(tshark);
    let all = decode(tshark, &file, proto, &["frame.number"]);
    assert_eq!(
        all.len(),
        30,
        "15 requests and 15 replies decoded as {proto}"
    );
    let bad = decode(
        tshark,
        &file,
        "_ws.malformed || _ws.expert.severity >= error",
        &["frame.number"],
    );
    assert!(
        bad.is_empty(),
        "malformed or expert errors in frames {bad:?}"
    );
    // TWAMP-Test knows the unauthenticated layout only (the sequence number, first in both,
    // is checked for the authenticated packets).
    if proto == "twamp.test" {
        // Replies: the reflector's fields where TWAMP-Test puts them.
        let replies = decode(
            tshark,
            &file,
            "udp.srcport == 862",
            &[
                "twamp.test.seq_number",
                "twamp.test.sender_seq_number",
                "twamp.test.sender_ttl",
                "twamp.test.padding",
            ],
        );
        // TWAMP-Test's reflector packet ends at the TTL (41 bytes): STAMP's last 3 MBZ bytes and
        // the 16 of padding are its padding.
        let expected: Vec<String> = (0..10)
            .map(|i| format!("{i}\t{i}\t64\t{}", "00".repeat(19)))
            .collect();
        assert_eq!(replies, expected);
        let requests = decode(
            tshark,
            &file,
            "udp.dstport == 862 && twamp.test.error_estimate.multiplier > 0",
            &["twamp.test.seq_number"],
        );
        let expected: Vec<String> = (0..10).map(|i| i.to_string()).collect();
        assert_eq!(requests, expected);
        let authenticated = decode(
            tshark,
            &file,
            "udp.port == 8620 && frame.len == 154",
            &["twamp.test.seq_number"],
        );
        // A request and its reply per number; on a loaded machine the next request may leave
        // before the last reply is back, so the capture's order is not checked.
        let mut authenticated = authenticated;
        authenticated.sort();
        let expected: Vec<String> = (0..5)
            .flat_map(|i| [i.to_string(), i.to_string()])
            .collect();
        assert_eq!(
            authenticated, expected,
            "112-byte packets, a request and a reply each"
        );
    }
    let _ = std::fs::remove_file(file);
    let _ = std::fs::remove_file(key);
}
