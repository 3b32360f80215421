//! `flowlab doctor` across two network namespaces: a sound veth path, then the same path
//! broken on purpose (a small TCP receive buffer limit and a smaller MTU at the agent, a tbf
//! that drops at the client, window scaling off), each flagged. Needs root and iproute2, as netns.rs.

mod common;

use std::process::Command;

use common::*;
use flowlab_netns::{Side, VethPair};

const AGENT: &str = "10.99.0.2";

/// Runs `flowlab doctor --json` from namespace A against an agent in B.
fn doctor(pair: &VethPair) -> (Option<i32>, serde_json::Value) {
    let mut serve = pair.command_in(&pair.ns_b, FLOWLAB);
    serve.args(["serve", "--bind", AGENT, "--port", "9470"]);
    let _agent = start_agent(serve);
    let out = pair
        .command_in(&pair.ns_a, FLOWLAB)
        .args(["doctor", AGENT, "--json"])
        .output()
        .expect("run flowlab doctor");
    (out.status.code(), json(&out))
}

/// The warning findings as (check, found).
fn warnings(doc: &serde_json::Value) -> Vec<(String, String)> {
    let findings = doc["findings"].as_array().expect("findings");
    findings
        .iter()
        .filter(|f| f["status"] == "warn")
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap_or_default().to_string();
            (text("check"), text("found"))
        })
        .collect()
}

/// Runs a command in one side's namespace; it must succeed and say nothing on stderr
/// (sysctl exits 0 on some refused writes).
fn in_ns(pair: &VethPair, side: Side, program: &str, args: &[&str]) {
    let out = pair
        .command_on(side, program)
        .args(args)
        .output()
        .expect(program);
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{program} {args:?} failed: {}",
        stderr(&out)
    );
}

/// On a sound path the path's own items pass (load and clock depend on the host running
/// the test, so they are not asserted).
#[test]
fn a_sound_veth_path_passes_the_path_checks() {
    let Some(pair) = flowlab_netns::skip_unless_netns("doctor_sound_path") else {
        return;
    };
    let (_, doc) = doctor(&pair);
    let path_checks = ["buffers", "mtu", "qdisc", "loss", "socket-overflow"];
    let flagged: Vec<_> = warnings(&doc)
        .into_iter()
        .filter(|(check, _)| path_checks.contains(&check.as_str()))
        .collect();
    assert_eq!(flagged, [], "{doc:#}");
    let idle = &doc["examination"]["idle"];
    assert_eq!(idle["sent"], idle["received"], "{idle}");
    assert_eq!(doc["examination"]["remote"]["egress"]["mtu"], 1500);
}

#[test]
fn each_broken_item_is_flagged() {
    let Some(pair) = flowlab_netns::skip_unless_netns("doctor_broken_path") else {
        return;
    };
    // net.core.rmem_max is per namespace on 6.x kernels but refuses writes outside the
    // initial one (EINVAL); net.ipv4.tcp_rmem and tcp_window_scaling take them.
    in_ns(
        &pair,
        Side::B,
        "sysctl",
        &["-qw", "net.ipv4.tcp_rmem=4096 8192 16384"],
    );
    in_ns(
        &pair,
        Side::B,
        "ip",
        &["link", "set", "dev", &pair.dev_b, "mtu", "1280"],
    );
    pair.limit_rate(Side::A, 100_000, 2000, 20)
        .expect("tbf on the client's side");
    let (code, doc) = doctor(&pair);
    assert_eq!(code, Some(1), "a warning exits with 1");
    let flagged = warnings(&doc);
    let has = |check: &str, needle: &str| {
        flagged
            .iter()
            .any(|(c, found)| c == check && found.contains(needle))
    };
    assert!(
        has("buffers", "agent: net.ipv4.tcp_rmem allows 16"),
        "{flagged:#?}"
    );
    assert!(
        has("mtu", "MTU 1500 here, 1280 at the agent"),
        "{flagged:#?}"
    );
    // "none of N": a loaded machine may skip one of the 10 slots.
    assert!(
        has("mtu", "echoed packets of 1500 B crossed"),
        "{flagged:#?}"
    );
    assert!(has("qdisc", "here: out of"), "{flagged:#?}");
    assert!(has("loss", "lost at an idle 200 kbit/s"), "{flagged:#?}");
}

/// Text output: one line per finding and the change under it.
#[test]
fn the_text_names_what_to_change() {
    let Some(pair) = flowlab_netns::skip_unless_netns("doctor_text") else {
        return;
    };
    in_ns(
        &pair,
        Side::B,
        "sysctl",
        &["-qw", "net.ipv4.tcp_window_scaling=0"],
    );
    let mut serve = pair.command_in(&pair.ns_b, FLOWLAB);
    serve.args(["serve", "--bind", AGENT, "--port", "9470"]);
    let _agent = start_agent(serve);
    let out: std::process::Output = Command::new("ip")
        .args(["netns", "exec", &pair.ns_a, FLOWLAB, "doctor", AGENT])
        .output()
        .expect("run flowlab doctor");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("flowlab doctor {AGENT}: RTT ")),
        "{text}"
    );
    assert!(
        text.contains("WARN  buffers         agent: TCP window scaling is off"),
        "{text}"
    );
    assert!(
        text.contains("change: sysctl -w net.ipv4.tcp_window_scaling=1 (agent)"),
        "{text}"
    );
}

/// On loopback (no root needed): every check of the list is there, in order.
#[test]
fn every_check_is_reported_on_loopback() {
    let agent = loopback_agent(&[]);
    let out = flowlab(&["doctor", &agent.addr, "--json"]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", stderr(&out));
    let doc = json(&out);
    let checks: Vec<&str> = doc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["check"].as_str())
        .collect();
    let mut seen = checks.clone();
    seen.dedup();
    assert_eq!(
        seen,
        ["buffers", "mtu", "load", "cpufreq", "load", "cpufreq", "qdisc", "loss", "clock"],
        "{doc:#}"
    );
    assert_eq!(doc["examination"]["remote"]["egress"]["interface"], "lo");
}

#[test]
fn an_unreachable_agent_is_one_line() {
    let o = flowlab(&["doctor", "127.0.0.1:1"]);
    assert_one_line_error(&o, "cannot connect to 127.0.0.1:1");
    assert_eq!(o.status.code(), Some(1));
}
