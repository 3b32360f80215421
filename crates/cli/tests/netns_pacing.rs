//! Pacing between two namespaces: flowlab reads the egress qdisc of the path and says whether
//! the kernel can pace UDP there, and `--pacing` trades departure precision for CPU, measured
//! against a capture. Needs root (skipped, and says so, without it).

mod common;

use common::capture::{tcpdump_or_skip, Capture};
use common::*;
use flowlab_netns::{Side, VethPair};
use serde_json::Value;

const AGENT: &str = "10.99.0.2";

fn client_notes(pair: &VethPair) -> Vec<String> {
    let mut cmd = pair.command_on(Side::A, FLOWLAB);
    cmd.args([
        "test",
        AGENT,
        "--rate",
        "1M",
        "--size",
        "500",
        "-d",
        "1s",
        "--kernel-pacing",
        "--json",
    ]);
    let o = cmd.output().expect("run client");
    assert!(o.status.success(), "client failed: {}", stderr(&o));
    json(&o)["client"]["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect()
}

#[test]
fn kernel_pacing_names_the_egress_qdisc_and_uses_fq_when_present() {
    let Some(pair) = flowlab_netns::skip_unless_netns("kernel_pacing_qdisc") else {
        return;
    };
    let mut agent = pair.command_on(Side::B, FLOWLAB);
    agent.args(["serve", "--bind", AGENT, "--port", "9470"]);
    let _agent = start_agent(agent);
    let dev = pair.dev(Side::A).to_string();

    let notes = client_notes(&pair);
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&format!("{dev} has qdisc noqueue, not fq"))),
        "a fresh veth has no qdisc: {notes:?}"
    );

    pair.limit_rate(Side::A, 10_000_000, 10_000, 100)
        .expect("tbf");
    let notes = client_notes(&pair);
    assert!(
        notes
            .iter()
            .any(|n| n.contains(&format!("{dev} has qdisc tbf, not fq"))),
        "tbf named: {notes:?}"
    );

    let fq = pair
        .command_on(Side::A, "tc")
        .args(["qdisc", "replace", "dev", &dev, "root", "fq"])
        .output()
        .expect("run tc");
    if !fq.status.success() {
        eprintln!(
            "fq is not in this kernel ({}): the SO_TXTIME send path was not exercised",
            String::from_utf8_lossy(&fq.stderr).trim()
        );
        return;
    }
    let notes = client_notes(&pair);
    assert!(
        notes
            .iter()
            .any(|n| n.contains("sends each datagram at its scheduled time")),
        "fq paces: {notes:?}"
    );
}

/// 500 packets/s of 1000 B.
const INTERVAL_NS: u64 = 2_000_000;

/// A one-way test at 500 packets/s with `pacing`, captured leaving the client's veth: the
/// result and how far each gap between departures is from the 2 ms interval, sorted (as
/// bench/run measures every tool: no sequence numbers, so a skipped slot shifts nothing).
fn paced_500(pair: &VethPair, pacing: &str) -> (Value, Vec<u64>) {
    let filter = format!("udp and dst host {AGENT}");
    let capture = Capture::start(&pair.ns_a, &pair.dev_a, &filter);
    let o = pair
        .command_on(Side::A, FLOWLAB)
        .args(["test", AGENT, "--rate", "4M", "--size", "1000", "-d", "3s"])
        .args(["--pacing", pacing, "--json"])
        .output()
        .expect("run client");
    let departures: Vec<u64> = capture
        .stop()
        .packets
        .iter()
        .filter(|p| p.payload.len() == 1000)
        .map(|p| p.at_ns)
        .collect();
    assert!(o.status.success(), "client failed: {}", stderr(&o));
    assert!(
        departures.len() > 1_000,
        "{} of 1500 captured",
        departures.len()
    );
    let mut errors: Vec<u64> = departures
        .windows(2)
        .map(|w| (w[1].saturating_sub(w[0])).abs_diff(INTERVAL_NS))
        .collect();
    errors.sort_unstable();
    (json(&o), errors)
}

fn quantile(sorted: &[u64], q: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

#[test]
fn efficient_pacing_keeps_its_slots_for_less_cpu_than_precise() {
    let Some(pair) = flowlab_netns::skip_unless_netns("efficient_pacing") else {
        return;
    };
    if !tcpdump_or_skip("efficient_pacing") {
        return;
    }
    let mut agent = pair.command_on(Side::B, FLOWLAB);
    agent.args(["serve", "--bind", AGENT, "--port", "9470"]);
    let _agent = start_agent(agent);

    let (efficient, errors) = paced_500(&pair, "efficient");
    let (precise, _) = paced_500(&pair, "precise");
    let pacing = |r: &Value| r["client"]["sender"]["pacing"].clone();
    let (e, p) = (pacing(&efficient), pacing(&precise));
    eprintln!(
        "500 packets/s: efficient {e}, abs(gap - 2 ms) p50 {} us p99 {} us; precise {p}",
        quantile(&errors, 0.5) / 1_000,
        quantile(&errors, 0.99) / 1_000
    );
    assert_eq!(e["mode"], "efficient");
    assert_eq!(p["mode"], "precise");
    // Loose bounds: a shared 2-core host under a build wakes late by milliseconds at times.
    assert!(quantile(&errors, 0.5) < 1_000_000, "median departure error");
    assert!(quantile(&errors, 0.99) < 20_000_000, "p99 departure error");
    let cpu = |v: &Value| v["cpu_ns"].as_u64().expect("pacing cpu_ns");
    assert!(
        cpu(&e) < cpu(&p),
        "efficient waits cost less: {e} against {p}"
    );
    let notes = efficient["client"]["notes"].to_string();
    assert!(
        notes.contains("not fq: no kernel transmit times"),
        "{notes}"
    );

    // The agent paces a reverse test as the client asked.
    let o = pair
        .command_on(Side::A, FLOWLAB)
        .args([
            "test", AGENT, "-R", "--rate", "400k", "--size", "1000", "-d", "1s",
        ])
        .args(["--pacing", "efficient", "--json"])
        .output()
        .expect("run client");
    assert!(o.status.success(), "reverse failed: {}", stderr(&o));
    assert_eq!(json(&o)["agent"]["sender"]["pacing"]["mode"], "efficient");
}
