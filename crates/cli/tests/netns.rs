//! Tests across two network namespaces joined by a veth pair: real packets through a real
//! kernel path. They need root and iproute2; without them each test says it was skipped
//! (in CI, where root is given, they fail instead of skipping).

mod common;

use std::process::{Command, Output};

use common::capture::{tcpdump_or_skip, Capture};
use common::lab::Lab;
use common::*;
use flowlab_netns::{Side, VethPair};
use serde_json::Value;

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

/// Every one of `slots` was sent, or skipped as hopelessly late on a loaded machine (at most
/// 1 %), and none was lost on the way. Returns the share sent, which scales the rate.
fn assert_every_slot_sent_or_skipped(v: &Value, slots: f64) -> f64 {
    let sent = f64_at(v, "/summary/packets_sent");
    let skipped = f64_at(v, "/summary/lost_by_sender");
    assert_eq!(sent + skipped, slots);
    assert!(
        skipped <= slots / 100.0,
        "{skipped} of {slots} slots skipped"
    );
    assert_eq!(f64_at(v, "/summary/packets_lost"), 0.0);
    sent / slots
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
    let sent = assert_every_slot_sent_or_skipped(&v, 1500.0);
    let goodput = f64_at(&v, "/summary/receiver_goodput_bps");
    assert!(
        within(goodput, 2e6 * sent, 0.01),
        "receiver goodput {goodput}"
    );
    assert!(within(
        f64_at(&v, "/summary/sender_throughput_bps"),
        2e6 * sent,
        0.01
    ));
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
    // A slot the sender woke too late for (a loaded machine) is skipped, not echoed.
    let skipped = f64_at(&v, "/summary/lost_by_sender");
    assert_eq!(f64_at(&v, "/summary/round_trip/count") + skipped, 200.0);
    assert!(skipped <= 5.0, "{skipped} slots skipped");
    let min = f64_at(&v, "/summary/round_trip/min_ns");
    let p50 = f64_at(&v, "/summary/round_trip/p50_ns");
    assert!(
        min > 0.0 && min <= p50 && p50 < 5e6,
        "rtt min {min} p50 {p50}"
    );
    assert!(f64_at(&v, "/agent/echo/packets_echoed") >= 200.0 - skipped);
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

/// Issue 12: in a reverse test the agent sends, so drops in its own qdisc come back in its
/// report and are no longer counted as the network's loss.
#[test]
fn a_reverse_senders_qdisc_drops_come_back_from_the_agent() {
    let Some(pair) = flowlab_netns::skip_unless_netns("reverse_qdisc_drops") else {
        return;
    };
    pair.limit_rate(Side::B, 1_000_000, 10_000, 20)
        .expect("tbf");
    let _agent = agent_in_b(&pair, AGENT);
    // Transmit stamps keep the sender from GSO trains, which a qdisc drops as one.
    let args = [
        AGENT,
        "--reverse",
        "--rate",
        "2M",
        "--size",
        "1000",
        "-d",
        "2s",
        "--tx-timestamps",
    ];
    let v = json(&client_in_a(&pair, &args));
    let lost = f64_at(&v, "/summary/packets_lost");
    assert!(lost > 100.0, "2 Mbit/s through 1 Mbit/s loses: {lost}");
    assert_eq!(v["agent"]["host_qdisc_drops"]["qdisc"], "tbf");
    assert!(
        v["client"]["host_qdisc_drops"].is_null(),
        "the client sent nothing"
    );
    let at_host = f64_at(&v, "/summary/lost_in_sender_qdisc");
    assert!(
        at_host >= 0.95 * lost && at_host <= lost,
        "{at_host} of {lost} lost in the agent's tbf"
    );
    let beyond = f64_at(&v, "/summary/lost_beyond_sender");
    assert_eq!(at_host + beyond, lost);
}

/// Issue 12: RTT under a flow's own load. Through a 10 Mbit/s tbf holding 50 ms of queue,
/// a 12 Mbit/s load's echoed packets wait in the queue they fill; at 1 Mbit/s they do not.
#[test]
fn echoes_of_a_load_through_a_tbf_wait_in_its_queue() {
    let Some(pair) = flowlab_netns::skip_unless_netns("echo_every_tbf") else {
        return;
    };
    pair.limit_rate(Side::A, 10_000_000, 10_000, 50)
        .expect("tbf");
    let _agent = agent_in_b(&pair, AGENT);
    let rtt_p50 = |rate: &str| {
        let v = json(&client_in_a(
            &pair,
            &[
                AGENT,
                "--rate",
                rate,
                "--size",
                "1000",
                "-d",
                "2s",
                "--echo-every",
                "10",
            ],
        ));
        assert!(
            f64_at(&v, "/summary/echoes/unique") > 0.0,
            "no echo of {rate}"
        );
        f64_at(&v, "/summary/round_trip/p50_ns")
    };
    let idle = rtt_p50("1M");
    let loaded = rtt_p50("12M");
    eprintln!("echo_every_tbf: rtt p50 idle {idle} ns, under load {loaded} ns");
    assert!(idle < 5e6, "idle rtt p50 {idle} ns");
    assert!(
        loaded > 20e6 && loaded > 10.0 * idle,
        "loaded rtt p50 {loaded} ns"
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
    let sent = assert_every_slot_sent_or_skipped(&v, 1000.0);
    assert!(within(
        f64_at(&v, "/summary/receiver_goodput_bps"),
        2e6 * sent,
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
            .env("FLOWLAB_DB", test_db())
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
    // Every slot is sent or skipped, and every packet sent arrives or is counted dropped at
    // the receiving socket (a loaded machine can leave either end behind); none is lost in
    // between.
    let sent = f64_at(&v, "/summary/packets_sent");
    assert_eq!(sent + f64_at(&v, "/summary/lost_by_sender"), 300.0);
    let received = f64_at(&v, "/summary/packets_received");
    // Counted for UDP: 0 when none, not null.
    let dropped = f64_at(&v, "/summary/lost_at_receiver_socket");
    assert_eq!(
        received + dropped,
        sent,
        "{received} received, {dropped} dropped of {sent}"
    );
    assert!(v["summary"]["wire_headers"]
        .as_str()
        .unwrap()
        .contains("IPv6"));
}

#[test]
fn dscp_and_token_bucket_contract_are_visible_on_the_wire() {
    let Some(pair) = flowlab_netns::skip_unless_netns("dscp_capture") else {
        return;
    };
    if !tcpdump_or_skip("dscp_capture") {
        return;
    }
    let _agent = agent_in_b(&pair, AGENT);
    let filter = format!("udp and dst host {AGENT} and greater 200");
    let capture = Capture::start(&pair.ns_b, &pair.dev_b, &filter);
    // Bursts of 20 KB every 200 ms (800 kbit/s average) held to 400 kbit/s sustained with a
    // 5 KB bucket, at a 2 Mbit/s peak: the sender must shape them.
    let traffic = "burst:n=20,every=200ms,size=1000+contract:pr=2M,sr=400k,bs=5k";
    let v = json(&client_in_a(
        &pair,
        &[AGENT, "--dscp", "ef", "--traffic", traffic, "-d", "3s"],
    ));
    std::thread::sleep(std::time::Duration::from_millis(300));
    // (capture time, TOS, payload length) of each datagram.
    let packets: Vec<(u64, u8, usize)> = capture
        .stop()
        .packets
        .iter()
        .map(|p| (p.at_ns, p.tos, p.payload.len()))
        .collect();
    let sent = f64_at(&v, "/summary/packets_sent") as usize;
    assert!(
        sent > 50 && packets.len() >= sent,
        "captured {} of {sent}",
        packets.len()
    );
    assert!(
        packets.iter().all(|p| p.1 >> 2 == 46),
        "every datagram carries DSCP EF (46)"
    );
    // The sender's own conformance report agrees with the capture.
    let c = v
        .pointer("/client/sender/contract")
        .unwrap_or_else(|| panic!("no contract report: {v:#}"));
    assert_eq!(f64_at(c, "/contract/sustained_rate_bps"), 400_000.0);
    assert!(
        f64_at(c, "/shaper/delayed") > 0.0,
        "bursts above the bucket wait"
    );
    assert!(
        f64_at(c, "/max_excess_bytes") < 1000.0,
        "as sent, within the contract: {c}"
    );
    // Token-bucket conformance from the capture: bytes in any window starting at a packet
    // stay within bucket + rate x window, with one packet of slack for capture timing.
    let (rate, bucket) = (400_000.0 / 8.0, 5_000.0);
    for (i, start) in packets.iter().enumerate() {
        let mut bytes = 0.0;
        for p in &packets[i..] {
            bytes += p.2 as f64;
            let window = (p.0 - start.0) as f64 / 1e9;
            assert!(
                bytes <= bucket + rate * window + 1_000.0,
                "{bytes} B in {window} s breaks the contract"
            );
        }
    }
}

#[test]
fn a_slow_reader_fills_its_buffer_then_drops_and_says_so() {
    let Some(pair) = flowlab_netns::skip_unless_netns("slow_reader") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    // 4 Mbit/s offered, the agent's application reads 1 Mbit/s from a small buffer.
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT,
            "--rate",
            "4M",
            "--size",
            "1000",
            "-d",
            "3s",
            "--read-rate",
            "1M",
            "--recv-buffer",
            "64KiB",
        ],
    ));
    let loss = f64_at(&v, "/summary/loss_pct");
    assert!(
        loss > 40.0,
        "loss {loss}% with a reader at a quarter of the rate"
    );
    let drops = f64_at(&v, "/summary/lost_at_receiver_socket");
    assert!(
        drops > 0.0,
        "the kernel attributes the losses to the receiving socket's buffer"
    );
    // Delay grows by the buffer's worth: 64 KiB (doubled by the kernel) at 1 Mbit/s is ~1 s.
    let delay_max = f64_at(&v, "/summary/relative_one_way_delay/max_ns");
    assert!(delay_max > 200e6, "relative delay max {delay_max} ns");
}

#[test]
fn native_frames_cross_the_veth_and_a_sweep_compares_them_with_udp() {
    let Some(pair) = flowlab_netns::skip_unless_netns("raw_frames") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT, "--proto", "raw", "--rate", "2M", "--size", "500", "-d", "2s",
        ],
    ));
    let sent = assert_every_slot_sent_or_skipped(&v, 1000.0);
    assert!(within(
        f64_at(&v, "/summary/receiver_goodput_bps"),
        2e6 * sent,
        0.01
    ));
    assert!(v["summary"]["wire_headers"]
        .as_str()
        .unwrap()
        .contains("no IP"));
    assert!(v["summary"]["relative_one_way_delay"]["p99_ns"].is_number());
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT, "--proto", "raw", "--mode", "loopback", "--rate", "1M", "--size", "200", "-n",
            "200",
        ],
    ));
    assert_eq!(f64_at(&v, "/summary/round_trip/count"), 200.0);
    // The seed's native-versus-IP comparison: one sweep, both stacks, several sizes.
    let db = std::env::temp_dir().join(format!("flowlab-raw-sweep-{}.sqlite3", std::process::id()));
    let o = pair
        .command_in(&pair.ns_a, FLOWLAB)
        .args([
            "sweep",
            AGENT,
            "--vary",
            "proto=udp,raw",
            "--vary",
            "size=200,800,1400",
            "--rate",
            "2M",
            "-d",
            "500ms",
        ])
        .args(["--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let export = flowlab(&["export", "1", "--json", "--db", db.to_str().unwrap()]);
    assert_eq!(json(&export)["points"].as_array().map(Vec::len), Some(6));
    let _ = std::fs::remove_file(db);
}

#[test]
fn an_experiment_runs_three_parallel_flows_through_a_lab_bottleneck() {
    if !flowlab_netns::netns_or_skip("experiment_parallel") {
        return;
    }
    let lab = Lab::up("three-hosts.toml", "three");
    let v = lab.run("h1", "lab-three-parallel.toml", |t| t);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3, "each flow reported");
    let total: f64 = flows
        .iter()
        .map(|f| f64_at(f, "/result/summary/receiver_goodput_bps"))
        .sum();
    assert!(flows
        .iter()
        .all(|f| f64_at(f, "/result/summary/receiver_goodput_bps") > 0.5e6));
    assert!(
        total <= 10.05e6,
        "three flows through a 10 Mbit/s link got {total} bit/s together"
    );
    assert!(total >= 8e6, "the bottleneck is used: {total} bit/s");
    assert_eq!(
        v["clocks"].as_object().unwrap().len(),
        4,
        "every agent's clock was checked"
    );
    // One-way delays with the clock offsets removed, and the bound that qualifies them.
    assert!(
        flows
            .iter()
            .all(|f| f["one_way_delay"]["bound_ns"].is_number()),
        "{v:#}"
    );
    // The clocks were re-probed during the step; namespaces share one clock, so each fitted
    // drift is ~0 within its bound.
    for (agent, c) in v["clocks"].as_object().unwrap() {
        let drift = c["drift_ppm"].as_f64().expect("re-probed during the step");
        let bound = f64_at(c, "/drift_bound_ppm");
        assert!(drift.abs() <= bound, "{agent}: drift {drift} ± {bound} ppm");
    }

    // The offered-load search: the highest load with no loss is the bottleneck's rate. The
    // loads step finely near the 10 Mbit/s link (each source's 100 % is 6 Mbit/s).
    let v = lab.run("h1", "lab-three-offered-load.toml", |t| {
        t.replace("loads = \"10..100:10\"", "loads = \"50..60:2\"")
    });
    let lossless_payload = f64_at(&v, "/search/lossless_offered_bps");
    // tbf counts Ethernet frames: 1000-byte payloads travel in 1042-byte frames. A short
    // trial's small excess can fit in the link's 64 KiB queue, so "within 5 %" either side.
    let lossless_wire = lossless_payload * 1042.0 / 1000.0;
    assert!(
        (9.5e6..=10.5e6).contains(&lossless_wire),
        "lossless {lossless_wire} bit/s on a 10 Mbit/s link"
    );

    // An agent lost mid-experiment: its branch fails and is recorded; the others are kept.
    let file = lab.dir.join("lost.toml");
    let example = format!(
        "{}/../../examples/experiments/lab-three-parallel.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(
        &file,
        std::fs::read_to_string(example)
            .unwrap()
            .replace("\"3s\"", "\"6s\""),
    )
    .unwrap();
    let run = Command::new(FLOWLAB)
        .args([
            "lab", "exec", "--lab", &lab.name, "h1", "--", FLOWLAB, "run",
        ])
        .arg(&file)
        .args(["--lab", &lab.name, "--json"])
        .env("FLOWLAB_LAB_DIR", &lab.dir)
        .env("FLOWLAB_DB", test_db())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    let ns = format!("fl-{}-h2", lab.name);
    let pids = Command::new("ip")
        .args(["netns", "pids", &ns])
        .output()
        .unwrap();
    for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
        let _ = Command::new("kill").args(["-9", pid]).status();
    }
    let o = run.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "a failed branch fails the run: {}",
        stderr(&o)
    );
    let v = json(&o);
    let flows = v["flows"].as_array().unwrap();
    let failed: Vec<&str> = flows
        .iter()
        .filter(|f| f["error"].is_string())
        .map(|f| f["flow"].as_str().unwrap())
        .collect();
    assert_eq!(failed, vec!["f2"], "{v:#}");
    let kept = flows.iter().filter(|f| f["result"].is_object()).count();
    assert_eq!(kept, 2, "the other flows' results are kept");
}

#[test]
fn an_rfc2544_search_finds_a_tbf_links_rate() {
    if !flowlab_netns::netns_or_skip("experiment_rfc2544") {
        return;
    }
    let lab = Lab::up("bottleneck.toml", "bottleneck");
    let v = lab.run("a", "lab-bottleneck-rfc2544.toml", |t| t);
    let rate = f64_at(&v, "/search/rate_bps");
    assert!(
        (9.5e6..=10.5e6).contains(&rate),
        "zero-loss rate {rate} bit/s through a 10 Mbit/s tbf"
    );
}

/// A 2 s request/response test (`--traffic` `traffic`) from A to the agent in B.
fn transactions_in_a(pair: &VethPair, traffic: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![AGENT, "--traffic", traffic, "-d", "2s"];
    args.extend_from_slice(extra);
    json(&client_in_a(pair, &args))
}

/// A figure of the result's `summary.transactions`.
fn transaction_figure(v: &serde_json::Value, path: &str) -> f64 {
    f64_at(v, &format!("/summary/transactions/{path}"))
}

#[test]
fn tcp_request_response_between_namespaces() {
    let Some(pair) = flowlab_netns::skip_unless_netns("tcp_rr") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = transactions_in_a(&pair, "rr:request=64,response=1k,think=0", &[]);
    let transactions = transaction_figure(&v, "transactions");
    let p50 = transaction_figure(&v, "latency/p50_ns");
    let p99 = transaction_figure(&v, "latency/p99_ns");
    let rate = transaction_figure(&v, "transactions_per_sec");
    eprintln!("tcp_rr: {transactions} transactions, {rate:.0}/s, p50 {p50} ns, p99 {p99} ns");
    assert!(transactions > 100.0, "{transactions} transactions");
    assert!(p50 > 0.0 && p50 < 50e6, "latency p50 {p50} ns");
    assert_eq!(
        transaction_figure(&v, "response_bytes"),
        transactions * 1000.0,
        "every response is whole"
    );
    assert_eq!(transaction_figure(&v, "errors"), 0.0);
    assert_eq!(v["spec"]["protocol"], "tcp", "rr runs over TCP by default");
    assert_eq!(f64_at(&v, "/agent/responder/malformed"), 0.0);
}

#[test]
fn tcp_connect_request_response_connects_once_per_transaction() {
    let Some(pair) = flowlab_netns::skip_unless_netns("tcp_crr") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = transactions_in_a(&pair, "crr:request=64,response=1k", &["--flows", "2"]);
    let transactions = transaction_figure(&v, "transactions");
    let connects = transaction_figure(&v, "connects");
    let connect_p50 = transaction_figure(&v, "connect/p50_ns");
    let rate = transaction_figure(&v, "transactions_per_sec");
    eprintln!("tcp_crr: {transactions} transactions, {rate:.0}/s, connect p50 {connect_p50} ns");
    assert!(transactions > 50.0, "{transactions} transactions");
    assert_eq!(connects, transactions, "a connection per transaction");
    assert_eq!(f64_at(&v, "/agent/responder/connections"), connects);
    let latency_p50 = transaction_figure(&v, "latency/p50_ns");
    assert!(
        connect_p50 > 0.0 && connect_p50 < latency_p50,
        "connect p50 {connect_p50} ns within the transaction's {latency_p50} ns"
    );
}

#[test]
fn large_responses_through_a_10mbit_tbf_take_their_serialization_time() {
    let Some(pair) = flowlab_netns::skip_unless_netns("rr_tbf") else {
        return;
    };
    // Responses flow from the agent (B) to the client (A): limit B's egress.
    pair.limit_rate(Side::B, 10_000_000, 2_000, 100)
        .expect("tbf");
    let _agent = agent_in_b(&pair, AGENT);
    let v = transactions_in_a(&pair, "rr:request=64,response=100k", &[]);
    // 100 kB at 10 Mbit/s is 80 ms on the wire before any header.
    let min = transaction_figure(&v, "latency/min_ns");
    let p50 = transaction_figure(&v, "latency/p50_ns");
    let rate = transaction_figure(&v, "transactions_per_sec");
    let transactions = transaction_figure(&v, "transactions");
    eprintln!("rr_tbf: {transactions} transactions, {rate:.2}/s, latency min {min} p50 {p50} ns");
    assert!(transactions >= 10.0, "{transactions} transactions");
    assert!(
        min >= 80e6,
        "latency min {min} ns below the serialization time"
    );
    assert!(
        rate <= 1e9 / 80e6 && rate >= 0.8e9 / p50,
        "{rate} transactions/s against a p50 of {p50} ns"
    );
}

#[test]
fn the_aquila_tcp_flow_runs_over_tcp_and_reports_its_contract() {
    let Some(pair) = flowlab_netns::skip_unless_netns("aquila_tcp") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    // Flow #3: greedy, shaped to PR = SR = 100 kb/s, BS = 10 kB, in 1500-byte messages.
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT,
            "--preset",
            "aquila-flow3",
            "--proto",
            "tcp",
            "-d",
            "3s",
        ],
    ));
    assert_eq!(v["spec"]["protocol"], "tcp");
    let received = f64_at(&v, "/summary/packets_received");
    let goodput = f64_at(&v, "/summary/receiver_goodput_bps");
    let delay_p99 = f64_at(&v, "/summary/relative_one_way_delay/p99_ns");
    let c = v
        .pointer("/client/sender/contract")
        .unwrap_or_else(|| panic!("no contract report: {v:#}"));
    eprintln!(
        "aquila_tcp: {received} messages, goodput {goodput:.0} bit/s, delay p99 {delay_p99} ns, contract {c}"
    );
    // 1500 B every 120 ms: 25 messages in 3 s.
    assert!((20.0..=27.0).contains(&received), "{received} messages");
    assert!(within(goodput, 100_000.0, 0.1), "goodput {goodput}");
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
    assert_eq!(f64_at(c, "/contract/sustained_rate_bps"), 100_000.0);
    assert_eq!(f64_at(c, "/contract/bucket_bytes"), 10_000.0);
    assert!(
        f64_at(c, "/shaper/delayed") > 0.0,
        "the greedy source is shaped"
    );
    let excess = f64_at(c, "/max_excess_bytes");
    assert!(excess < 1500.0, "as sent, {excess} B beyond the contract");
}

#[test]
fn the_aquila_flow_mix_runs_through_an_e1_lab_link() {
    if !flowlab_netns::netns_or_skip("aquila_mix") {
        return;
    }
    let lab = Lab::up("e1.toml", "e1");
    let v = lab.run("a", "aquila-mix.toml", |t| t.replace("\"10s\"", "\"4s\""));
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 5, "each AQUILA flow reported: {v:#}");
    let by_name = |name: &str| {
        flows
            .iter()
            .find(|f| f["flow"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .get("result")
            .unwrap_or_else(|| panic!("{name} failed: {v:#}"))
    };
    for (name, protocol) in [
        ("flow1-voip", "udp"),
        ("flow2-mission-critical", "tcp"),
        ("flow3-multimedia", "tcp"),
        ("flow4-best-effort", "tcp"),
        ("background", "udp"),
    ] {
        let r = by_name(name);
        assert_eq!(r["spec"]["protocol"], protocol, "{name}");
        eprintln!(
            "aquila_mix: {name} {protocol} {:.0} bit/s, loss {:.2} %",
            f64_at(r, "/summary/receiver_goodput_bps"),
            f64_at(r, "/summary/loss_pct")
        );
    }
    let voip = f64_at(by_name("flow1-voip"), "/summary/receiver_goodput_bps");
    assert!(within(voip, 64_000.0, 0.1), "VoIP at 64 kbit/s: {voip}");
    for name in ["flow3-multimedia", "flow4-best-effort"] {
        let c = &by_name(name)["client"]["sender"]["contract"];
        assert_eq!(f64_at(c, "/contract/sustained_rate_bps"), 100_000.0);
        assert!(
            f64_at(c, "/max_excess_bytes") < 1500.0,
            "{name} as sent: {c}"
        );
    }
    // Together the flows offer more than the E1 carries: the link is full, never above. Over
    // the test's 4 s (each flow's own goodput has its own span: a bursty TCP flow's reads
    // higher), with 5 % for the queue still draining at the end.
    let total: f64 = flows
        .iter()
        .map(|f| f64_at(&f["result"], "/summary/bytes_received") * 8.0 / 4.0)
        .sum();
    assert!(
        (1.5e6..=2.048e6 * 1.05).contains(&total),
        "{total} bit/s through a 2.048 Mbit/s link"
    );
    assert!(
        f64_at(by_name("background"), "/summary/loss_pct") > 1.0,
        "the oversubscribed FIFO drops the background's datagrams"
    );
}

#[test]
fn the_videoconference_preset_of_1998_crosses_the_veth() {
    let Some(pair) = flowlab_netns::skip_unless_netns("videoconf_1998") else {
        return;
    };
    let _agent = agent_in_b(&pair, AGENT);
    let v = json(&client_in_a(
        &pair,
        &[AGENT, "--preset", "videoconf-1998", "-d", "4s"],
    ));
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0, "{v:#}");
    let flows = v["agent"]["receiver"]["flows"]
        .as_array()
        .expect("per-flow table");
    assert_eq!(flows.len(), 2, "audio and video");
    let (audio, video) = (&flows[0], &flows[1]);
    // Audio: 64 kbit/s in 1119-byte packets.
    let audio_bytes = f64_at(audio, "/bytes_received");
    let audio_packets = f64_at(audio, "/packets/unique");
    assert_eq!(audio_bytes / audio_packets, 1119.0);
    assert!(
        within(audio_bytes * 8.0 / 4.0, 64_000.0, 0.15),
        "audio at {} bit/s",
        audio_bytes * 2.0
    );
    // Video: 0.5-1.5 Mbit/s in packets of 72 to 1468 bytes.
    let video_bps = f64_at(video, "/bytes_received") * 8.0 / 4.0;
    assert!(
        (0.5e6..=1.5e6).contains(&video_bps),
        "video at {video_bps} bit/s"
    );
    let mean_size = f64_at(video, "/bytes_received") / f64_at(video, "/packets/unique");
    assert!(
        (72.0..=1468.0).contains(&mean_size),
        "video packets {mean_size} B"
    );
    eprintln!(
        "videoconf_1998: audio {:.0} bit/s in {audio_packets} packets, video {video_bps:.0} bit/s, mean {mean_size:.0} B",
        audio_bytes * 2.0
    );
}

/// Udp or Udp6 counters of namespace `ns` (/proc/net/snmp, /proc/net/snmp6): `name` → value.
fn udp_counter(pair: &VethPair, ns: &str, v6: bool, name: &str) -> u64 {
    let (file, key) = match v6 {
        true => ("/proc/net/snmp6", format!("Udp6{name}")),
        false => ("/proc/net/snmp", name.to_string()),
    };
    let o = pair.command_in(ns, "cat").arg(file).output().expect("cat");
    let text = String::from_utf8_lossy(&o.stdout);
    if v6 {
        return text
            .lines()
            .find_map(|l| l.strip_prefix(&key)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {file}"));
    }
    let mut udp = text.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let at = names.split_whitespace().position(|n| n == key).unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// `--packet-socket` across the veth, IPv4 and IPv6: with the sender's checksum offload off
/// (ethtool), its kernel completes every UDP checksum flowlab's frames leave to the device
/// and the receiving stack checks them all, as it checks the IPv4 header's: every datagram
/// arrives, none fails a check (the namespace's Udp InCsumErrors), and the report says the
/// datagrams left through a packet socket.
#[test]
fn a_packet_sockets_frames_pass_the_receivers_checks() {
    let Some(pair) = flowlab_netns::skip_unless_netns("packet_socket") else {
        return;
    };
    let offload_off = pair
        .command_in(&pair.ns_a, "ethtool")
        .args(["-K", pair.dev(Side::A), "tx", "off"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !offload_off {
        eprintln!("packet_socket: no ethtool, so the receiver trusts the checksums unchecked");
    }
    for (bind, to, v6) in [
        (AGENT, AGENT.to_string(), false),
        ("fd99::2", format!("{AGENT6}:9470"), true),
    ] {
        let _agent = agent_in_b(&pair, bind);
        let errors_before = udp_counter(&pair, &pair.ns_b, v6, "InCsumErrors");
        let v = json(&client_in_a(
            &pair,
            &[
                &to,
                "--packet-socket",
                "--flows",
                "8",
                "--rate",
                "800k",
                "--size",
                "1000",
                "-n",
                "200",
            ],
        ));
        let sent = f64_at(&v, "/summary/packets_sent");
        // 200 datagrams of each of the 8 flows; a loaded machine skips a few late slots.
        assert_eq!(sent + f64_at(&v, "/summary/lost_by_sender"), 1600.0);
        assert!(sent >= 1440.0, "{sent} of 1600 sent");
        let received = f64_at(&v, "/summary/packets_received");
        let dropped = f64_at(&v, "/summary/lost_at_receiver_socket");
        assert_eq!(
            received + dropped,
            sent,
            "IPv6 {v6}: {received} received, {dropped} dropped of {sent}"
        );
        assert_eq!(
            v["client"]["sender"]["batching"]["packet_socket"], true,
            "{v}"
        );
        let errors = udp_counter(&pair, &pair.ns_b, v6, "InCsumErrors") - errors_before;
        assert_eq!(
            errors, 0,
            "IPv6 {v6}: {errors} checksum errors at the receiver"
        );
    }
    // The human report names the send path.
    let _agent = agent_in_b(&pair, AGENT);
    let o = pair
        .command_in(&pair.ns_a, FLOWLAB)
        .args([
            "test",
            AGENT,
            "--packet-socket",
            "--rate",
            "800k",
            "-n",
            "50",
        ])
        .output()
        .expect("run client");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("send path          whole frames through a packet socket"),
        "{text}"
    );
    // The sender's qdisc still applies: a 1 Mbit/s tbf drops half of a 2 Mbit/s offer, and
    // the report puts the loss in the sender's qdisc, as for a UDP socket's datagrams.
    pair.limit_rate(Side::A, 1_000_000, 10_000, 20)
        .expect("tbf");
    let v = json(&client_in_a(
        &pair,
        &[
            AGENT,
            "--packet-socket",
            "--rate",
            "2M",
            "--size",
            "1000",
            "-d",
            "3s",
        ],
    ));
    let sent = f64_at(&v, "/summary/packets_sent");
    let in_qdisc = f64_at(&v, "/summary/lost_in_sender_qdisc");
    assert!(
        (0.4..=0.6).contains(&(in_qdisc / sent)),
        "{in_qdisc} of {sent} lost in the sender's qdisc"
    );
    // A packet socket does not fragment: a datagram above the veth's MTU is refused at once.
    let o = pair
        .command_in(&pair.ns_a, FLOWLAB)
        .args([
            "test",
            AGENT,
            "--packet-socket",
            "--size",
            "1480",
            "-n",
            "5",
        ])
        .output()
        .expect("run client");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("does not fragment"), "{}", stderr(&o));
}
