//! IP fragmentation in scenarios: hosts and routers fragment datagrams above a link's MTU,
//! the far host reassembles them, and a lost fragment loses its datagram.

use flowlab_sim::{load, run, RunReport};

/// Pings of `size` IP bytes from a over a 9180-byte link to router r, then over a 1500-byte
/// link (with `impair` keys) to b.
fn routed(size: u32, impair: &str) -> String {
    format!(
        r#"
[sim]
duration = "2s"
drain = "31s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "r"
kind = "ip-router"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "r"
rate = "100M"
mtu = 9180
[[link]]
from = "r"
to = "b"
rate = "100M"
mtu = 1500
{impair}
[[flow]]
name = "p"
from = "a"
to = "b"
protocol = "ping"
size = {size}
interval = "10ms"
"#
    )
}

fn one(text: &str) -> RunReport {
    run(&load(text).unwrap(), None).runs.remove(0)
}

#[test]
fn a_router_fragments_and_the_far_host_reassembles() {
    let r = one(&routed(4124, ""));
    let f = &r.flows[0];
    let frag = f.fragmentation.unwrap();
    // 200 requests split by the router, 200 echoes split by b: three fragments each.
    assert_eq!(frag.datagrams_fragmented, 400);
    assert_eq!(frag.fragments, 1200);
    assert_eq!(frag.reassembled, 400);
    assert_eq!(f.receiver.packets.received, 200);
    assert_eq!(f.loss_ratio, 0.0);
    // The router's port toward b sent the fragments: 1500 + 1500 + 1164 bytes per request.
    let port = r.ports.iter().find(|p| p.name == "r->b").unwrap();
    let sent: u64 = port.classes.iter().map(|c| c.sent_bytes).sum();
    assert_eq!(sent, 200 * (1500 + 1500 + 1164));
}

#[test]
fn a_lost_fragment_loses_its_datagram_after_the_reassembly_timeout() {
    let r = one(&routed(4124, "loss = \"10%\""));
    let f = &r.flows[0];
    let frag = f.fragmentation.unwrap();
    // A datagram of three fragments survives 10 % loss with 0.9³: about 27 % of requests
    // are lost, and an echo (three fragments on the lossy link too) as often.
    let ping_survives = 0.9f64.powi(6);
    assert!(
        (f.loss_ratio - (1.0 - ping_survives)).abs() < 0.08,
        "{}",
        f.loss_ratio
    );
    // Every datagram that lost some but not all of its fragments timed out within the run
    // (31 s of drain); those that lost all of them left nothing to time out.
    let incomplete = frag.datagrams_fragmented - frag.reassembled;
    assert!(frag.reassembly_timeouts > 0 && frag.reassembly_timeouts <= incomplete);
    assert_eq!(frag.awaiting_reassembly_at_end, 0);
    let all_lost = 0.1f64.powi(3) * frag.datagrams_fragmented as f64;
    assert!((incomplete - frag.reassembly_timeouts) as f64 <= 10.0 * all_lost + 3.0);
    assert_eq!(f.in_flight_at_end, 0);
}

#[test]
fn pings_above_the_path_mtu_run_and_small_ones_report_no_fragmentation() {
    let r = one(&routed(1400, ""));
    assert!(r.flows[0].fragmentation.is_none());
    assert!(load(&routed(65_536, ""))
        .unwrap_err()
        .to_string()
        .contains("65535"));
}

#[test]
fn incomplete_datagrams_at_the_end_await_reassembly_within_the_timeout() {
    let short = routed(4124, "loss = \"10%\"").replace("drain = \"31s\"", "drain = \"1s\"");
    let frag = one(&short).flows[0].fragmentation.unwrap();
    assert_eq!(frag.reassembly_timeouts, 0);
    assert!(frag.awaiting_reassembly_at_end > 0);
    assert!(frag.awaiting_reassembly_at_end <= frag.datagrams_fragmented - frag.reassembled);
}
