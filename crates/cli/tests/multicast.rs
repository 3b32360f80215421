//! Multicast across a lab bridge: the router of `examples/lab/three-hosts.toml` sends one flow
//! to a group, and the agents of h1, h2 and h3 (on the same switch) join it and receive.
//! Needs root and iproute2; skipped without them.

mod common;

use std::process::Command;

use common::lab::Lab;
use common::*;

const RECEIVERS: [&str; 3] = ["10.77.64.1", "10.77.64.2", "10.77.64.3"];
const RECEIVERS6: [&str; 3] = ["fd77:0:0:1000::1", "fd77:0:0:1000::2", "fd77:0:0:1000::3"];

/// `flowlab test --multicast ...` run in the lab's router `r`.
fn multicast_from_r(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let o = Command::new(FLOWLAB)
        .args([
            "lab",
            "exec",
            "--lab",
            &lab.name,
            "r",
            "--",
            FLOWLAB,
            "test",
            "--multicast",
        ])
        .args(args)
        .arg("--json")
        .env("FLOWLAB_LAB_DIR", &lab.dir)
        .env("FLOWLAB_DB", test_db())
        .output()
        .unwrap();
    assert!(o.status.success(), "multicast test: {}", stderr(&o));
    let id = stderr(&o)
        .split("stored as run ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
        .expect("stored");
    let shown = flowlab(&["show", &id]);
    assert!(stderr(&shown).is_empty(), "{}", stderr(&shown));
    let text = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(text.contains("(multicast)"), "{text}");
    json(&o)
}

/// Each receiver's figures: what it got of what the one sender sent (`count` slots, a few
/// skipped as hopelessly late on a loaded machine, as on this one while others build).
fn check_receivers(results: &serde_json::Value, receivers: &[&str], count: f64) {
    let results = results.as_array().expect("one document per receiver");
    assert_eq!(results.len(), receivers.len());
    let sent = f64_at(&results[0], "/summary/packets_sent");
    let skipped = f64_at(&results[0], "/summary/lost_by_sender");
    assert_eq!(sent + skipped, count);
    assert!(skipped <= 0.1 * count, "{skipped} slots skipped");
    for (r, name) in results.iter().zip(receivers) {
        assert_eq!(r["target"], *name);
        assert_eq!(r["error"], serde_json::Value::Null, "{r:#}");
        assert_eq!(
            f64_at(r, "/summary/packets_sent"),
            sent,
            "one sender for all"
        );
        let received = f64_at(r, "/summary/packets_received");
        assert_eq!(
            received + f64_at(r, "/summary/packets_lost"),
            sent,
            "{name}"
        );
        // A bridge on one host loses nothing unless a receiver falls behind.
        assert!(
            received >= 0.99 * sent,
            "{name} received {received} of {sent}"
        );
        assert!(
            f64_at(r, "/summary/relative_one_way_delay/p50_ns") < 5e6,
            "{name}"
        );
        assert_eq!(f64_at(r, "/agent/receiver/packets/unique"), received);
    }
}

#[test]
fn three_receivers_on_a_bridge_each_report_the_group_flow() {
    if !flowlab_netns::netns_or_skip("multicast_bridge") {
        return;
    }
    let lab = Lab::up("three-hosts.toml", "three");
    let agents = RECEIVERS.join(",");
    let v4 = multicast_from_r(
        &lab,
        &[
            "239.1.2.3:6000",
            "--agents",
            &agents,
            "-r",
            "2M",
            "-s",
            "1000",
            "-n",
            "500",
            "--bind",
            "10.77.64.4",
        ],
    );
    check_receivers(&v4, &RECEIVERS, 500.0);
    assert_eq!(v4[0]["spec"]["multicast"]["hops"], 1);
    let agents6 = RECEIVERS6.join(",");
    let v6 = multicast_from_r(
        &lab,
        &[
            "[ff15::1234]:6000",
            "--agents",
            &agents6,
            "-r",
            "1M",
            "-s",
            "500",
            "-n",
            "200",
            "--ttl",
            "2",
            "--bind",
            "fd77:0:0:1000::4",
        ],
    );
    check_receivers(&v6, &RECEIVERS6, 200.0);
    assert_eq!(v6[2]["spec"]["multicast"]["hops"], 2);
}

#[test]
fn a_group_must_be_multicast_and_receivers_named() {
    let run = |args: &[&str]| {
        Command::new(FLOWLAB)
            .args(["test", "--multicast"])
            .args(args)
            .output()
            .unwrap()
    };
    let unicast = run(&["10.0.0.1", "--agents", "10.0.0.2"]);
    assert_eq!(unicast.status.code(), Some(2));
    assert!(
        stderr(&unicast).contains("10.0.0.1 is not a multicast address"),
        "{}",
        stderr(&unicast)
    );
    let reverse = run(&["239.1.1.1", "--agents", "10.0.0.2", "--reverse"]);
    assert_eq!(reverse.status.code(), Some(2));
    assert!(stderr(&reverse).contains("multicast: the client sends and the agents receive"));
    let alone = Command::new(FLOWLAB)
        .args(["test", "239.1.1.1", "--agents", "10.0.0.2"])
        .output()
        .unwrap();
    assert_eq!(alone.status.code(), Some(2), "--agents needs --multicast");
}
