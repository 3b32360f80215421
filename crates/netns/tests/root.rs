//! Tests that need root and iproute2; they print "skipped: ..." otherwise
//! (and fail when the CI environment variable is set).

use std::net::SocketAddr;
use std::process::Command;

use flowlab_netns::{netns_available, qdisc_available, Side, VethPair};

mod common;

use common::{output, udp_crosses};

fn netns_list() -> String {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "list"]);
    output(cmd)
}

#[test]
fn pair_is_configured_and_removed_on_drop() {
    let Some(pair) = flowlab_netns::skip_unless_netns("pair_is_configured_and_removed_on_drop")
    else {
        return;
    };
    let mut cmd = pair.command_in(&pair.ns_a, "ip");
    cmd.args(["-4", "addr"]);
    assert!(output(cmd).contains("10.99.0.1/24"));

    let mut cmd = pair.command_on(Side::B, "ip");
    cmd.args(["-6", "addr", "show", "dev", &pair.dev_b, "scope", "global"]);
    let v6 = output(cmd);
    assert!(v6.contains("fd99::2/64"), "{v6}");
    assert!(!v6.contains("tentative"), "{v6}");

    let mut cmd = pair.command_in(&pair.ns_a, "ip");
    cmd.args(["route", "get", "10.99.0.2"]);
    let route = output(cmd);
    assert!(route.contains(&format!("dev {}", pair.dev_a)), "{route}");

    let mut cmd = pair.command_in(&pair.ns_b, "ip");
    cmd.args(["link", "show", "lo"]);
    assert!(output(cmd).contains("UP"));

    let list = netns_list();
    assert!(
        list.contains(&pair.ns_a) && list.contains(&pair.ns_b),
        "{list}"
    );
    let (a, b) = (pair.ns_a.clone(), pair.ns_b.clone());
    drop(pair);
    let list = netns_list();
    assert!(!list.contains(&a) && !list.contains(&b), "{list}");
}

#[test]
fn udp_datagram_crosses_v4_and_v6() {
    let Some(pair) = flowlab_netns::skip_unless_netns("udp_datagram_crosses_v4_and_v6") else {
        return;
    };
    udp_crosses(
        &pair.ns_a,
        &pair.ns_b,
        SocketAddr::new(VethPair::ADDR_B.into(), 47001),
    );
    udp_crosses(
        &pair.ns_a,
        &pair.ns_b,
        SocketAddr::new(VethPair::ADDR6_B.into(), 47002),
    );
}

/// Not a real test: the worker that `udp_crosses` runs inside a namespace.
/// Without the environment variable it does nothing.
#[test]
fn udp_helper() {
    common::udp_worker();
}

#[test]
fn rate_limit_applies_tbf() {
    let Some(pair) = flowlab_netns::skip_unless_netns("rate_limit_applies_tbf") else {
        return;
    };
    pair.limit_rate(Side::A, 10_000_000, 15_000, 20).unwrap();
    let mut cmd = pair.command_on(Side::A, "tc");
    cmd.args(["qdisc", "show", "dev", &pair.dev_a]);
    let shown = output(cmd);
    assert!(shown.contains("tbf") && shown.contains("10Mbit"), "{shown}");
    // Replacing works too.
    pair.limit_rate(Side::A, 1_000_000, 15_000, 20).unwrap();
}

#[test]
fn qdisc_detection() {
    if let Err(reason) = netns_available() {
        if std::env::var_os("CI").is_some() {
            panic!("qdisc_detection: netns unavailable in CI: {reason}");
        }
        eprintln!("qdisc_detection: skipped: needs root and iproute2 ({reason})");
        assert!(!qdisc_available("tbf"));
        return;
    }
    assert!(qdisc_available("tbf"));
    assert!(qdisc_available("htb"));
    assert!(qdisc_available("ingress"));
    assert!(qdisc_available("u32"));
    // Present or not depending on the kernel; must just answer.
    let netem = qdisc_available("netem");
    let fq = qdisc_available("fq");
    eprintln!("netem available: {netem}, fq available: {fq}");
    assert!(!qdisc_available("no_such_qdisc"));
    // Probes leave nothing behind.
    let mine = format!("flt-{}-", std::process::id());
    let list = netns_list();
    assert!(
        !list
            .lines()
            .any(|l| l.starts_with(&mine) && l.contains("-q")),
        "{list}"
    );
}

#[test]
fn require_netns_macro() {
    fn inner(ran: &mut bool) {
        let pair = flowlab_netns::require_netns!("require_netns_macro");
        assert!(pair.ns_a.starts_with("flt-"));
        *ran = true;
    }
    let mut ran = false;
    inner(&mut ran);
    if netns_available().is_err() {
        assert!(!ran, "macro must return early when skipping");
    }
}
