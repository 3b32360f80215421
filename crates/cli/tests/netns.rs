//! Tests across two network namespaces joined by a veth pair: real packets through a real
//! kernel path. They need root and iproute2; without them each test says it was skipped
//! (in CI, where root is given, they fail instead of skipping).

mod common;

use std::process::{Command, Output};

use common::*;
use flowlab_netns::{Side, VethPair};

const AGENT: &str = "10.99.0.2";
const AGENT6: &str = "[fd99::2]";

fn agent_in_b(pair: &VethPair, bind: &str) -> Agent {
    let mut cmd = pair.command_in(&pair.ns_b, FLOWLAB);
    cmd.args(["serve", "--bind", bind, "--port", "9470"]);
    start_agent(cmd)
}

fn client_in_a(pair: &VethPair, args: &[&str]) -> Output {
    let mut cmd: Command = pair.command_in(&pair.ns_a, FLOWLAB);
    let o = cmd
        .arg("test")
        .args(args)
        .arg("--json")
        .output()
        .expect("run client");
    assert!(o.status.success(), "client failed: {}", stderr(&o));
    o
}

fn within(value: f64, target: f64, tolerance: f64) -> bool {
    (value - target).abs() <= target * tolerance
}

#[test]
fn udp_2mbit_500b_arrives_at_2mbit_within_1pct_without_loss() {
    let Some(pair) = flowlab_netns::skip_unless_netns("udp_2mbit_500b") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = json(&client_in_a(
        &pair,
        &[AGENT, "--rate", "2M", "--size", "500", "-d", "3s"],
    ));
    let goodput = f64_at(&v, "/summary/receiver_goodput_bps");
    assert!(within(goodput, 2e6, 0.01), "receiver goodput {goodput}");
    assert!(within(
        f64_at(&v, "/summary/sender_throughput_bps"),
        2e6,
        0.01
    ));
    assert_eq!(f64_at(&v, "/summary/packets_sent"), 1500.0);
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
    assert_eq!(v["summary"]["arrival_clock"], "kernel");
    // Inter-arrival mean is the 2 ms interval.
    assert!(within(f64_at(&v, "/summary/inter_arrival/mean"), 2e6, 0.01));
}

#[test]
fn loopback_reports_round_trip_delay() {
    let Some(pair) = flowlab_netns::skip_unless_netns("loopback_rtt") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT, "--mode", "loopback", "--rate", "1M", "--size", "1000", "-n", "200",
        ],
    ));
    assert_eq!(f64_at(&v, "/summary/round_trip/count"), 200.0);
    let min = f64_at(&v, "/summary/round_trip/min_ns");
    let p50 = f64_at(&v, "/summary/round_trip/p50_ns");
    assert!(
        min > 0.0 && min <= p50 && p50 < 5e6,
        "rtt min {min} p50 {p50}"
    );
    assert!(f64_at(&v, "/agent/echo/packets_echoed") >= 200.0);
}

#[test]
fn tbf_at_1mbit_halves_a_2mbit_udp_offer_and_holds_tcp_to_1mbit() {
    let Some(pair) = flowlab_netns::skip_unless_netns("tbf_1mbit") else {
        return;
    };
    pair.limit_rate(Side::A, 1_000_000, 10_000, 100)
        .expect("tbf");
    let _agent = agent_in_b(&pair, AGENT);
    let v = json(&client_in_a(
        &pair,
        &[AGENT, "--rate", "2M", "--size", "1000", "-d", "3s"],
    ));
    let loss = f64_at(&v, "/summary/loss_pct");
    assert!(
        (40.0..=60.0).contains(&loss),
        "UDP loss {loss}% over a 1 Mbit/s link"
    );
    let goodput = f64_at(&v, "/summary/receiver_goodput_bps");
    assert!((0.85e6..=1.0e6).contains(&goodput), "UDP goodput {goodput}");
    let v = json(&client_in_a(
        &pair,
        &[AGENT, "--tcp", "--size", "8k", "-d", "4s"],
    ));
    let goodput = f64_at(&v, "/summary/receiver_goodput_bps");
    assert!((0.8e6..=1.05e6).contains(&goodput), "TCP goodput {goodput}");
    assert_eq!(
        f64_at(&v, "/summary/packets_lost"),
        0.0,
        "TCP loses nothing"
    );
    assert!(
        f64_at(&v, "/summary/tcp_unreceived_at_end") > 0.0,
        "a full send buffer is still queued at the end"
    );
}

#[test]
fn reverse_test_sends_from_the_agent() {
    let Some(pair) = flowlab_netns::skip_unless_netns("reverse") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT,
            "--reverse",
            "--rate",
            "2M",
            "--size",
            "500",
            "-d",
            "2s",
        ],
    ));
    assert_eq!(v["summary"]["sender"], "agent");
    assert_eq!(f64_at(&v, "/summary/packets_sent"), 1000.0);
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
    assert!(within(
        f64_at(&v, "/summary/receiver_goodput_bps"),
        2e6,
        0.01
    ));
}

#[test]
fn two_clients_test_against_one_agent_at_the_same_time() {
    let Some(pair) = flowlab_netns::skip_unless_netns("two_clients") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let spawn = |args: &[&str]| {
        pair.command_in(&pair.ns_a, FLOWLAB)
            .arg("test")
            .args(args)
            .arg("--json")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn(&[AGENT, "--rate", "1M", "--size", "500", "-d", "2s"]);
    let b = spawn(&[
        AGENT, "--tcp", "--rate", "1M", "--size", "1000", "-d", "2s", "--mode", "loopback",
    ]);
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let v = json(&o);
        assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
        assert!(f64_at(&v, "/summary/packets_received") >= 240.0);
    }
}

#[test]
fn ipv6_across_the_veth_pair() {
    let Some(pair) = flowlab_netns::skip_unless_netns("ipv6") else {
        return;
    };
    let _agent = agent_in_b(&pair, "fd99::2");
    let v = json(&client_in_a(
        &pair,
        &[
            &format!("{AGENT6}:9470"),
            "--rate",
            "2M",
            "--size",
            "1000",
            "-n",
            "300",
        ],
    ));
    assert_eq!(f64_at(&v, "/summary/packets_received"), 300.0);
    assert!(v["summary"]["wire_headers"]
        .as_str()
        .unwrap()
        .contains("IPv6"));
}
