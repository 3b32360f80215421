//! The agent as a stranger would try it: hand-made control frames against a real `flowlab
//! serve`, each attack checked for its outcome (issue 11). Attacks on the data path of a
//! lab (native frames) need root and two namespaces; without them they say they were skipped.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::attacker::{refusal, tampering_proxy, udp_request, ControlPeer, HELLO};
use common::*;
use serde_json::{json, Value};

/// Every field an attacker can set out of range is refused by the agent itself, with the
/// reason the client would have given.
#[test]
fn agent_refuses_every_field_out_of_range() {
    let agent = loopback_agent(&["--max-tests", "1"]);
    let cases: [(&str, Value, &str); 14] = [
        ("interval_ns", json!(0), "interval must be at least 10 ms"),
        ("interval_ns", json!(1), "interval must be at least 10 ms"),
        ("size", json!(0), "below the 32-byte probe header"),
        ("size", json!(70_000), "exceeds the UDP maximum"),
        ("flows", json!(0), "at least one flow"),
        ("duration_ns", json!(0), "duration must be above 0 s"),
        ("duration_ns", json!(u64::MAX), "exceeds the longest test"),
        ("count", json!(0), "count must be at least 1 packet"),
        ("rate_bps", json!(0), "rate must be above 0 bit/s"),
        ("client_udp_ports", json!([0]), "port 0 is not a port"),
        ("client_udp_ports", json!([1, 2]), "give one port per flow"),
        (
            "raw",
            json!({"client_mac": "ff:ff:ff:ff:ff:ff", "agent_interface": null}),
            "applies to --proto raw only",
        ),
        ("socket", socket_with("dscp", json!(99)), "a DSCP is 0..=63"),
        (
            "socket",
            socket_with("congestion", json!("../../etc")),
            "not a congestion control name",
        ),
    ];
    for (field, value, reason) in cases {
        let mut spec = udp_request(40_000);
        spec[field] = value;
        let mut peer = ControlPeer::connect(&agent.addr);
        let got = refusal(&peer.request(spec));
        assert!(got.contains(reason), "{field}: '{got}' lacks '{reason}'");
    }
    // The refusals held no slot: a valid test runs on the agent's single one.
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-d",
        "1s",
        "--rate",
        "1M",
        "--json",
        "--no-store",
    ]);
    assert!(
        o.status.success(),
        "valid test after attacks: {}",
        stderr(&o)
    );
}

fn socket_with(option: &str, value: Value) -> Value {
    let mut socket = udp_request(1)["socket"].clone();
    socket[option] = value;
    socket
}

/// Native frames go only to the control peer's MAC address, out of the interface of the
/// route to it: a request naming a broadcast MAC, another host's MAC or another interface is
/// refused, and one naming the right ones (or none) is accepted.
#[test]
fn raw_frames_go_only_to_the_control_peer() {
    let Some(pair) = flowlab_netns::skip_unless_netns("raw_frames_go_only_to_the_control_peer")
    else {
        return;
    };
    let mut cmd = pair.command_in(&pair.ns_b, FLOWLAB);
    cmd.args(["serve", "--bind", "10.99.0.2", "--port", "9470"]);
    let _agent = start_agent(cmd);
    let (ns_a, dev_a) = (pair.ns_a.clone(), pair.dev_a.clone());
    let own_mac = std::thread::spawn(move || {
        flowlab_sys::host::enter_netns(&ns_a).expect("enter namespace a");
        let mac = flowlab_sys::raw::interface_named(&dev_a).expect("veth").mac;
        flowlab_spec::format_mac(&mac)
    })
    .join()
    .unwrap();
    let cases = [
        (
            json!("ff:ff:ff:ff:ff:ff"),
            json!(null),
            Some("not a unicast address"),
        ),
        (
            json!("01:00:5e:00:00:01"),
            json!(null),
            Some("not a unicast address"),
        ),
        (
            json!("02:12:34:56:78:9a"),
            json!(null),
            Some("the request names client MAC"),
        ),
        (
            json!(own_mac),
            json!("lo"),
            Some("the request names interface lo"),
        ),
        (json!(own_mac), json!(pair.dev_b), None),
        (json!(own_mac), json!(null), None),
    ];
    let ns_a = pair.ns_a.clone();
    std::thread::spawn(move || {
        flowlab_sys::host::enter_netns(&ns_a).expect("enter namespace a");
        for (mac, interface, refused) in cases {
            let mut spec = udp_request(1);
            spec["protocol"] = json!("raw");
            spec["client_udp_ports"] = json!([]);
            spec["raw"] = json!({"client_mac": mac, "agent_interface": interface});
            let mut peer = ControlPeer::connect("10.99.0.2:9470");
            let answer = peer.request(spec);
            match refused {
                Some(reason) => {
                    let got = refusal(&answer);
                    assert!(got.contains(reason), "{mac}: '{got}' lacks '{reason}'");
                }
                None => {
                    assert_eq!(answer["type"], "accepted", "{mac} {interface}: {answer}");
                    let agent_mac = answer["agent_mac"].as_str().unwrap_or_default();
                    assert_eq!(agent_mac.len(), 17, "the agent names its MAC: {answer}");
                }
            }
        }
    })
    .join()
    .unwrap();
}

/// `--max-rate` bounds a test's aggregate: every flow counted, a traffic model by the load it
/// really offers (run ahead), not by its `rate_bps` field.
#[test]
fn max_rate_bounds_the_aggregate_and_models() {
    let agent = loopback_agent(&["--max-rate", "5M"]);
    let cases: [&[&str]; 2] = [
        &["--rate", "2M", "--flows", "4"],
        &["--reverse", "--traffic", "poisson:pps=200000,size=1400"],
    ];
    for extra in cases {
        let mut args = vec!["test", &agent.addr, "-d", "2s", "--no-store"];
        args.extend_from_slice(extra);
        assert_one_line_error(
            &flowlab(&args),
            "the agent's limit of 5.00 Mbit/s (--max-rate)",
        );
    }
    // An attacker's own frame: a model far past the limit with a tiny rate_bps beside it.
    let mut peer = ControlPeer::connect(&agent.addr);
    let mut spec = udp_request(40_000);
    spec["direction"] = json!("reverse");
    let model = flowlab_traffic::TrafficSpec::parse("poisson:pps=200000,size=1400").unwrap();
    spec["traffic"] = serde_json::to_value(model).unwrap();
    spec["rate_bps"] = json!(1000);
    let got = refusal(&peer.request(spec));
    assert!(got.contains("the traffic model offers"), "{got}");
}

/// The agent holds its own sending to `--max-rate` while it sends: a reverse `--rate max`
/// test against a 20 Mbit/s agent arrives at no more than 20 Mbit/s (and the burst).
#[test]
fn the_agent_holds_its_sending_to_the_limit() {
    let agent = loopback_agent(&["--max-rate", "20M"]);
    for proto in ["udp", "tcp"] {
        let o = flowlab(&[
            "test",
            &agent.addr,
            "--reverse",
            "--rate",
            "max",
            "--proto",
            proto,
            "--size",
            "1200",
            "-d",
            "2s",
            "--json",
            "--no-store",
        ]);
        assert!(o.status.success(), "{proto}: {}", stderr(&o));
        let v = json(&o);
        let bytes = f64_at(&v, "/summary/bytes_received");
        // 2 s at 20 Mbit/s is 5 MB, plus one 256 KiB burst and what the last second adds.
        assert!(
            bytes <= 5.0e6 + 300e3,
            "{proto}: {bytes} B in 2 s past a 20 Mbit/s limit"
        );
        assert!(
            bytes >= 3.0e6,
            "{proto}: only {bytes} B: the limit is not the only brake"
        );
    }
}

/// Counts the datagrams `sock` receives until `until`, and when the last came.
fn count_until(
    sock: &std::net::UdpSocket,
    until: std::time::Instant,
) -> (u64, Option<std::time::Instant>) {
    sock.set_read_timeout(Some(std::time::Duration::from_millis(20)))
        .unwrap();
    let (mut n, mut last, mut buf) = (0, None, [0u8; 2048]);
    while std::time::Instant::now() < until {
        if sock.recv(&mut buf).is_ok() {
            n += 1;
            last = Some(std::time::Instant::now());
        }
    }
    (n, last)
}

/// Return routability: a reverse test's agent sends to a port only after that port brought
/// back the session's cookie, and stops within about a second once it no longer does.
#[test]
fn reverse_traffic_only_to_a_port_that_asks_for_it() {
    use std::time::{Duration, Instant};
    let agent = loopback_agent(&[]);
    for acknowledge in [false, true] {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut spec = udp_request(rx.local_addr().unwrap().port());
        spec["direction"] = json!("reverse");
        spec["rate_bps"] = json!(8_000_000);
        spec["size"] = json!(1000);
        spec["duration_ns"] = json!(6_000_000_000u64);
        let mut peer = ControlPeer::connect(&agent.addr);
        let accepted = peer.request(spec);
        assert_eq!(accepted["type"], "accepted", "{accepted}");
        let cookie = accepted["cookie"]
            .as_u64()
            .expect("a cookie for reverse UDP");
        let port = accepted["data_ports"][0].as_u64().unwrap() as u16;
        rx.connect(("127.0.0.1", port)).unwrap();
        if acknowledge {
            // Once only: the agent must stop a second after it.
            rx.send(&flowlab_wire::ack::emit_ack(cookie)).unwrap();
        }
        peer.send(&json!({"type": "start"}));
        let start = Instant::now();
        let (n, last) = count_until(&rx, start + Duration::from_secs(3));
        if acknowledge {
            // 1000 packets/s: about a second's worth after the one acknowledgement.
            assert!(
                (500..1600).contains(&n),
                "{n} datagrams after one acknowledgement"
            );
            let stopped = last.unwrap().duration_since(start);
            assert!(
                stopped < Duration::from_millis(1600),
                "still sending after {stopped:?}"
            );
        } else {
            assert_eq!(n, 0, "datagrams sent to a port that never acknowledged");
        }
    }
}

/// A client that vanishes without a word (control connection open, silent) loses its test
/// within seconds, and its slot is free for the next client: the agent only receives here,
/// so it waits 15 s for a word (a sending agent waits 3 s).
#[test]
fn a_silent_client_loses_its_slot() {
    let agent = loopback_agent(&["--max-tests", "1"]);
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut spec = udp_request(rx.local_addr().unwrap().port());
    spec["duration_ns"] = json!(60_000_000_000u64);
    let mut peer = ControlPeer::connect(&agent.addr);
    assert_eq!(peer.request(spec)["type"], "accepted");
    peer.send(&json!({"type": "start"}));
    let freed = slot_frees_within(&agent, Duration::from_secs(20), || {});
    assert!(freed >= Duration::from_secs(14), "freed after {freed:?}");
}

/// Tries a short test on the agent's single slot every half second (calling `meanwhile`
/// before each try) until one runs, failing past `within`; how long that took.
fn slot_frees_within(agent: &Agent, within: Duration, mut meanwhile: impl FnMut()) -> Duration {
    let start = Instant::now();
    loop {
        meanwhile();
        let o = flowlab(&["test", &agent.addr, "-n", "10", "--no-store"]);
        if o.status.success() {
            return start.elapsed();
        }
        assert!(start.elapsed() < within, "slot still held: {}", stderr(&o));
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A client that keeps heartbeating but stops reading cannot hold the agent: once the agent's
/// writes make no progress for 10 s (here: a 300,000-record packet log it never reads), the
/// session ends and its slot is free.
#[test]
fn a_client_that_stops_reading_loses_its_slot() {
    let agent = loopback_agent(&["--max-tests", "1"]);
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut spec = udp_request(tx.local_addr().unwrap().port());
    spec["packet_log"] = json!(true);
    spec["size"] = json!(40);
    spec["rate_bps"] = json!(1_000_000_000u64);
    spec["duration_ns"] = json!(30_000_000_000u64);
    let mut peer = ControlPeer::connect(&agent.addr);
    let answer = peer.request(spec);
    assert_eq!(answer["type"], "accepted", "{answer}");
    let port = answer["data_ports"][0].as_u64().unwrap() as u16;
    tx.connect(("127.0.0.1", port)).unwrap();
    peer.send(&json!({"type": "start"}));
    let session = answer["session"].as_u64().unwrap() as u32;
    let mut datagram = [0u8; 40];
    for seq in 0..300_000u64 {
        let probe = flowlab_wire::ProbeRepr {
            flags: 0,
            session,
            seq,
            sent_ns: 1,
            echoed_ns: 0,
        };
        probe.emit(&mut datagram);
        let _ = tx.send(&datagram);
        // Paced in bursts, so the agent's socket buffer keeps up.
        if seq % 64 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    peer.send(&json!({"type": "finish"}));
    let heartbeat = peer.frame(&json!({"type": "heartbeat"}));
    // Heartbeats go on until the agent gives up on this connection.
    let waited = slot_frees_within(&agent, Duration::from_secs(25), || {
        let _ = peer.stream.write_all(&heartbeat);
    });
    eprintln!("slot free {waited:?} after the client stopped reading");
}

/// A number (kB) or count from the agent process's /proc status.
fn proc_status(agent: &Agent, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", agent.child.id())).unwrap();
    status
        .lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {field} in {status}"))
}

/// Whether the agent turned this connection away: its hello then a `refused` frame wait
/// in the socket.
fn was_turned_away(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = stream.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).contains("\"type\":\"refused\"")
}

/// 200 connections each holding the largest partial request an agent without a key takes
/// (1 MiB): 64 are admitted, the rest turned away at once, and the agent stays small (before
/// the caps: 831 MB and 201 threads with 4 MiB frames). A 4 MiB frame is refused at its
/// prefix, with the reason.
#[test]
fn partial_large_frames_from_200_connections_keep_the_agent_small() {
    // Every connection comes from 127.0.0.1: lift the per-source cap to reach the total one.
    let agent = loopback_agent(&["--max-connections-per-source", "1000"]);
    let head = [HELLO.as_slice(), &(1u32 << 20).to_be_bytes(), &[1]].concat();
    let body = vec![b' '; (1 << 20) - 4096];
    let mut conns: Vec<TcpStream> = (0..200)
        .map(|_| {
            let mut s = TcpStream::connect(&agent.addr).unwrap();
            s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
            let _ = s.write_all(&head).and_then(|()| s.write_all(&body));
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let rss_mb = proc_status(&agent, "VmRSS:") / 1024;
    let threads = proc_status(&agent, "Threads:");
    let turned_away = conns.iter_mut().map(was_turned_away).filter(|&t| t).count();
    eprintln!("agent under attack: {rss_mb} MB, {threads} threads, {turned_away} turned away");
    assert!(turned_away >= 136, "only {turned_away} of 200 turned away");
    assert!(threads <= 70, "{threads} threads");
    assert!(rss_mb < 200, "agent RSS {rss_mb} MB");
    drop(conns);
    // A frame announced over the cap is refused before any of it is buffered.
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.write_all(&[HELLO.as_slice(), &(4u32 << 20).to_be_bytes()].concat())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    let said = String::from_utf8_lossy(&rest[16..]).into_owned();
    assert!(
        said.contains("control frame of 4194304 bytes exceeds the 1048576-byte limit"),
        "{said}"
    );
    std::thread::sleep(Duration::from_millis(200));
    let o = flowlab(&["test", &agent.addr, "-n", "10", "--json", "--no-store"]);
    assert!(o.status.success(), "after the attack: {}", stderr(&o));
}

/// A hello dripped a byte a second (each byte well inside any per-read timeout) is dropped
/// at the 5 s handshake deadline, not after its 16 s.
#[test]
fn dripped_hello_is_dropped_at_the_deadline() {
    let agent = loopback_agent(&[]);
    let mut s = TcpStream::connect(&agent.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(1000)))
        .unwrap();
    let started = Instant::now();
    let closed_after = HELLO.iter().find_map(|&byte| {
        let _ = s.write_all(&[byte]);
        match s.read(&mut [0u8; 64]) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
            _ => Some(started.elapsed()),
        }
    });
    let closed_after = closed_after.expect("the agent kept a dripping hello for 16 s");
    assert!(
        closed_after > Duration::from_secs(4) && closed_after < Duration::from_millis(6500),
        "closed after {closed_after:?}"
    );
}

/// An accepted request never followed by `start` (its bytes dripped) frees the agent's only
/// test slot at the 5 s start deadline, with an error; a valid test then runs.
#[test]
fn request_without_start_frees_the_slot() {
    let agent = loopback_agent(&["--max-tests", "1"]);
    let mut peer = ControlPeer::connect(&agent.addr);
    let answer = peer.request(udp_request(40_001));
    assert_eq!(answer["type"], "accepted", "{answer}");
    let accepted = Instant::now();
    let start = peer.frame(&json!({"type": "start"}));
    peer.stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut answer = None;
    for &byte in &start[..start.len() - 1] {
        let _ = peer.stream.write_all(&[byte]);
        answer = peer.recv();
        if answer.is_some() || accepted.elapsed() > Duration::from_secs(8) {
            break;
        }
    }
    let waited = accepted.elapsed();
    let answer = answer.expect("the agent ends the session with an error");
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap()
            .contains("start did not come within 5.0 s"),
        "{answer}"
    );
    assert!(waited < Duration::from_millis(6500), "slot held {waited:?}");
    let o = flowlab(&["test", &agent.addr, "-n", "10", "--json", "--no-store"]);
    assert!(
        o.status.success(),
        "test after a request without start: {}",
        stderr(&o)
    );
}

/// One address holds at most 16 connections in setup: the 17th is turned away at once, a
/// real client too with a one-line reason; once they close, tests run again.
#[test]
fn connections_per_source_are_capped() {
    let agent = loopback_agent(&[]);
    let held: Vec<ControlPeer> = (0..16).map(|_| ControlPeer::connect(&agent.addr)).collect();
    let mut next = ControlPeer::connect(&agent.addr);
    let got = refusal(&next.recv().expect("a refusal"));
    assert!(
        got.contains("16 connections in setup from 127.0.0.1"),
        "{got}"
    );
    assert!(next.recv().is_none(), "and closed");
    let o = flowlab(&["test", &agent.addr, "-n", "10", "--no-store"]);
    assert_one_line_error(&o, "(--max-connections-per-source)");
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    let o = flowlab(&["test", &agent.addr, "-n", "10", "--json", "--no-store"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

fn key_file(name: &str, key: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("flowlab-{name}-{}", std::process::id()));
    std::fs::write(&path, key).unwrap();
    path
}

fn keyed_test(addr: &str, key: &std::path::Path) -> std::process::Output {
    let key = key.to_str().unwrap();
    flowlab(&[
        "test",
        addr,
        "-n",
        "10",
        "--key-file",
        key,
        "--json",
        "--no-store",
    ])
}

/// A byte changed on the path in the client's request after authentication: the agent ends
/// the session with the reason, and the client prints it on one line.
#[test]
fn tampered_request_after_auth_ends_the_session() {
    let key = key_file("tamper-request", "tamper");
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    // Client frames: 0 auth_response, 1 request.
    let proxy = tampering_proxy(&agent.addr, true, 1);
    assert_one_line_error(&keyed_test(&proxy, &key), "failed authentication");
    assert!(keyed_test(&agent.addr, &key).status.success());
}

/// A byte changed in the agent's `accepted` after authentication: the client refuses it.
#[test]
fn tampered_agent_frame_after_auth_is_refused_by_the_client() {
    let key = key_file("tamper-accepted", "tamper");
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    // Agent frames: 0 auth_challenge, 1 auth_ok, 2 accepted.
    let proxy = tampering_proxy(&agent.addr, false, 2);
    assert_one_line_error(&keyed_test(&proxy, &key), "failed authentication");
}

/// A byte changed in the client's `start`: the agent stops the test before it runs.
#[test]
fn tampered_start_ends_the_session() {
    let key = key_file("tamper-start", "tamper");
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    let proxy = tampering_proxy(&agent.addr, true, 2);
    let o = keyed_test(&proxy, &key);
    let error = json(&o)["error"].as_str().unwrap_or_default().to_string();
    assert!(error.contains("failed authentication"), "{error}");
}

/// The client's request frame sent again in place of `start` (a replay, tag and all) ends
/// the session.
#[test]
fn replayed_frame_after_auth_ends_the_session() {
    let key = key_file("replay", "replay");
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    let mut peer = ControlPeer::connect(&agent.addr);
    peer.authenticate(b"replay");
    let request = peer.frame(&json!({"type": "request", "spec": udp_request(40_002)}));
    peer.stream.write_all(&request).unwrap();
    assert_eq!(peer.recv().expect("an answer")["type"], "accepted");
    peer.stream.write_all(&request).unwrap();
    let answer = peer.recv().expect("an error");
    let message = answer["message"].as_str().unwrap_or_default();
    assert!(message.contains("failed authentication"), "{answer}");
    assert!(peer.recv().is_none(), "and closed");
}

/// A client given a key refuses an agent that does not ask for one: it could be anyone.
#[test]
fn client_with_a_key_refuses_an_agent_without_one() {
    let key = key_file("no-key-agent", "secret");
    let agent = loopback_agent(&[]);
    assert_one_line_error(&keyed_test(&agent.addr, &key), "does not ask for a key");
}

/// A fake agent that asks for the key but cannot prove it holds it is refused.
#[test]
fn client_refuses_an_agent_that_cannot_prove_the_key() {
    let key = key_file("fake-agent", "secret");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let fake = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut peer = ControlPeer {
            stream,
            tags: None,
            session_key: None,
        };
        let mut hello = HELLO;
        peer.stream.read_exact(&mut hello).unwrap();
        hello[11] = 1; // asks for the key
        peer.stream.write_all(&hello).unwrap();
        peer.send(&json!({"type": "auth_challenge", "nonce": "77".repeat(32)}));
        let response = peer.recv().expect("the client's proof");
        assert_eq!(response["type"], "auth_response");
        peer.send(&json!({"type": "auth_ok", "mac": "00".repeat(32)}));
    });
    assert_one_line_error(&keyed_test(&addr, &key), "could not prove it holds the key");
    fake.join().unwrap();
}

/// A relaying agent is no port scanner: a closed port, an open port of another service and an
/// unresolvable name all get the same answer; and relayed tests count against its limits.
#[test]
fn relay_reveals_nothing_about_targets_and_counts_against_limits() {
    let relay = loopback_agent(&["--allow-relay", "--max-rate", "5M"]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open_addr = open.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in open.incoming().flatten() {
            use std::io::Write;
            let _ = (&s).write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
        }
    });
    let mut spec = udp_request(1);
    spec["client_udp_ports"] = json!([]);
    let mut answers = Vec::new();
    for target in [
        closed_addr.as_str(),
        open_addr.as_str(),
        "no-such-host.invalid:9470",
    ] {
        let mut peer = ControlPeer::connect(&relay.addr);
        peer.send(
            &json!({"type": "run_test", "target": target, "spec": spec, "start_at_ns": null}),
        );
        let answer = peer.recv().expect("an answer");
        answers.push(answer["message"].as_str().unwrap_or_default().to_string());
    }
    assert!(
        answers
            .iter()
            .all(|a| a == "the target did not answer as a flowlab agent"),
        "{answers:?}"
    );
    // A relayed test past the relay's own limit is refused before anything is sent.
    spec["rate_bps"] = json!(50_000_000);
    let mut peer = ControlPeer::connect(&relay.addr);
    peer.send(&json!({"type": "run_test", "target": open_addr, "spec": spec, "start_at_ns": null}));
    let got = refusal(&peer.recv().expect("an answer"));
    assert!(got.contains("--max-rate"), "{got}");
}

/// A request the agent cannot read is refused with the reason, not just hung up on.
#[test]
fn an_unreadable_request_is_refused_with_a_reason() {
    let agent = loopback_agent(&[]);
    let mut peer = ControlPeer::connect(&agent.addr);
    let mut spec = udp_request(40_000);
    spec["size"] = json!("big");
    let got = refusal(&peer.request(spec));
    assert!(got.starts_with("unreadable request: "), "{got}");
}

/// Authenticated test packets (issue 11, item 8): in a keyed session that asks for them, the
/// agent counts only packets sealed with the session's test-packet key; forged and altered
/// ones (right session, right sequence numbers) are dropped as malformed. An agent without a
/// key refuses to promise it.
#[test]
fn forged_test_packets_are_dropped_when_packets_are_authenticated() {
    let key = key_file("auth-packets", "packet key");
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut spec = udp_request(tx.local_addr().unwrap().port());
    spec["authenticated_packets"] = json!(true);
    spec["size"] = json!(100);
    spec["duration_ns"] = json!(2_000_000_000u64);
    let mut peer = ControlPeer::connect(&agent.addr);
    peer.authenticate(b"packet key");
    let answer = peer.request(spec.clone());
    assert_eq!(answer["type"], "accepted", "{answer}");
    let port = answer["data_ports"][0].as_u64().unwrap() as u16;
    let session = answer["session"].as_u64().unwrap() as u32;
    tx.connect(("127.0.0.1", port)).unwrap();
    peer.send(&json!({"type": "start"}));
    let test_key = flowlab_control::auth::test_packet_key(&peer.session_key.unwrap());
    let auth = flowlab_engine::packet_auth::PacketAuth::new(&test_key);
    let mut packet = [0u8; 100];
    for seq in 0..60u64 {
        let probe = flowlab_wire::ProbeRepr {
            flags: 0,
            session,
            seq,
            sent_ns: 1,
            echoed_ns: 0,
        };
        probe.emit(&mut packet);
        match seq % 3 {
            // Sealed: counted.
            0 => assert!(auth.seal(&mut packet)),
            // Sealed, then its sequence number changed on the way.
            1 => {
                auth.seal(&mut packet);
                packet[15] ^= 0x40;
            }
            // Forged: the flag set, a tag of zeros.
            _ => packet[3] |= flowlab_wire::probe::FLAG_AUTH,
        }
        tx.send(&packet).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    peer.send(&json!({"type": "finish"}));
    let report = loop {
        let m = peer.recv().expect("the agent's report");
        if m["type"] == "report" {
            break m;
        }
    };
    let receiver = &report["report"]["receiver"];
    assert_eq!(receiver["packets"]["unique"], 20, "{receiver}");
    assert_eq!(receiver["malformed"], 40, "{receiver}");
    // Without a key there is no session key to tag with: refused, with the reason.
    let open = loopback_agent(&[]);
    let mut peer = ControlPeer::connect(&open.addr);
    let got = refusal(&peer.request(spec));
    assert!(got.contains("need a pre-shared key"), "{got}");
    let _ = std::fs::remove_file(key);
}

/// `flowlab test --auth-packets` in each direction: every packet tagged, checked and counted.
#[test]
fn authenticated_packets_run_every_direction() {
    let key = key_file("auth-directions", "direction key");
    let agent = loopback_agent(&["--key-file", key.to_str().unwrap()]);
    for mode in [
        &["--mode", "oneway"][..],
        &["--mode", "loopback"],
        &["--reverse"],
    ] {
        let mut args = vec![
            "test",
            &agent.addr,
            "-n",
            "40",
            "--rate",
            "400k",
            "--size",
            "200",
        ];
        args.extend_from_slice(&["--key-file", key.to_str().unwrap(), "--auth-packets"]);
        args.extend_from_slice(&["--json", "--no-store"]);
        args.extend_from_slice(mode);
        let o = flowlab(&args);
        assert!(o.status.success(), "{mode:?}: {}", stderr(&o));
        let v = json(&o);
        assert_every_slot_accounted(&v, 40.0);
        assert_eq!(v["spec"]["authenticated_packets"], true);
    }
    let o = flowlab(&["test", &agent.addr, "--auth-packets", "-n", "5"]);
    assert!(!o.status.success(), "--auth-packets without --key-file");
    let _ = std::fs::remove_file(key);
}
