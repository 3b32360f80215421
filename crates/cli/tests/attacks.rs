//! The agent as a stranger would try it: hand-made control frames against a real `flowlab
//! serve`, each attack checked for its outcome (issue 11). Attacks on the data path of a
//! lab (native frames) need root and two namespaces; without them they say they were skipped.

mod common;

use common::attacker::{refusal, udp_request, ControlPeer};
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
        flowlab_wire::spec::format_mac(&mac)
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
/// within seconds, and its slot is free for the next client.
#[test]
fn a_silent_client_loses_its_slot() {
    use std::time::{Duration, Instant};
    let agent = loopback_agent(&["--max-tests", "1"]);
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut spec = udp_request(rx.local_addr().unwrap().port());
    spec["duration_ns"] = json!(60_000_000_000u64);
    let mut peer = ControlPeer::connect(&agent.addr);
    assert_eq!(peer.request(spec)["type"], "accepted");
    peer.send(&json!({"type": "start"}));
    let start = Instant::now();
    loop {
        let o = flowlab(&["test", &agent.addr, "-d", "1s", "--no-store"]);
        if o.status.success() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(8),
            "slot still held: {}",
            stderr(&o)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
