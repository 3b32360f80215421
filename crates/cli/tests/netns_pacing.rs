//! Kernel pacing between two namespaces: flowlab reads the egress qdisc of the path and says
//! whether the kernel can pace UDP there. Needs root (skipped, and says so, without it).

mod common;

use common::*;
use flowlab_netns::{Side, VethPair};

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
