//! The end-system model: host CPU costs, an adapter's segmentation rate and router latency
//! move delays by exactly what the model says.

mod common;

use common::one_run;
use flowlab_sim::load;

/// Host `a`, router `r`, host `b` on 10 Mb/s links; `extra` adds node keys by name.
fn ip_path(a: &str, r: &str, b: &str, flow: &str) -> String {
    format!(
        r#"[sim]
duration = "1s"
[[node]]
name = "a"
kind = "host"
{a}
[[node]]
name = "r"
kind = "ip-router"
{r}
[[node]]
name = "b"
kind = "host"
{b}
[[link]]
from = "a"
to = "r"
rate = "10M"
[[link]]
from = "r"
to = "b"
rate = "10M"
[[flow]]
name = "u"
from = "a"
to = "b"
protocol = "udp"
{flow}
"#
    )
}

fn delays(text: &str) -> (f64, f64) {
    let r = one_run(text);
    let d = r.flows[0].one_way_delay.expect("delays");
    (d.min_ns, d.max_ns)
}

const LIGHT: &str = "rate = \"80k\"\nsize = 1000";

#[test]
fn costs_and_processing_add_up_exactly() {
    let (min0, max0) = delays(&ip_path("", "", "", LIGHT));
    // 1000 B at 10 Mb/s twice: 1.6 ms, no queueing at 10 packets/s.
    assert_eq!((min0, max0), (1_600_000.0, 1_600_000.0));
    let text = ip_path(
        "send_cost = \"100us\"",
        "processing = \"200us\"",
        "receive_cost = \"50us\"",
        LIGHT,
    );
    assert_eq!(delays(&text), (1_950_000.0, 1_950_000.0));
}

#[test]
fn a_host_cpu_bounds_its_packet_rate() {
    // 2000 packets/s offered, 1 ms of CPU each: the host sends 1000 a second.
    let text = ip_path("send_cost = \"1ms\"", "", "", "rate = \"1.6M\"\nsize = 100");
    let r = one_run(&text);
    let f = &r.flows[0];
    let pps = f.throughput_bps / 800.0;
    assert!((pps - 1000.0).abs() < 2.0, "{pps} packets/s");
    let d = f.one_way_delay.unwrap();
    assert!(d.max_ns > 400e6, "the CPU's queue grows: {}", d.max_ns);
}

#[test]
fn a_receiving_cpu_serialises_deliveries() {
    // Back-to-back 100 B packets arrive every 80 µs; 200 µs each to receive.
    let text = ip_path(
        "",
        "",
        "receive_cost = \"200us\"",
        "rate = \"10M\"\nsize = 100\ncount = 100",
    );
    let r = one_run(&text);
    let f = &r.flows[0];
    assert_eq!(f.receiver.packets.unique, 100);
    let d = f.one_way_delay.unwrap();
    // Sent every 80 µs, received every 200 µs: the last waits for the 99 before it.
    assert_eq!(d.min_ns, 160_000.0 + 200_000.0);
    assert_eq!(d.max_ns, 160_000.0 + 100.0 * 200_000.0 - 99.0 * 80_000.0);
}

#[test]
fn jitter_spreads_delays_within_its_range() {
    let text = ip_path(
        "",
        "processing = \"1ms\"\ncost_jitter = \"500us\"",
        "",
        LIGHT,
    );
    let (min, max) = delays(&text);
    assert!(min >= 2_600_000.0 && max <= 3_100_000.0, "{min}..{max}");
    assert!(max - min > 300_000.0, "spread {min}..{max}");
}

#[test]
fn an_adapter_segments_at_its_sar_rate() {
    let text = |sar: &str| {
        format!(
            r#"[sim]
duration = "1s"
[[node]]
name = "a"
kind = "host"
{sar}
[[node]]
name = "s"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "s"
phy = "OC-3c"
[[link]]
from = "s"
to = "b"
phy = "OC-3c"
[[flow]]
name = "u"
from = "a"
to = "b"
protocol = "udp"
rate = "100k"
size = 9180
"#
        )
    };
    let (fast, _) = delays(&text(""));
    let (slow, _) = delays(&text("sar_rate = \"10.176M\""));
    // 192 cells at 24 000 cells/s leave in 8 ms instead of 192 OC-3c cell times.
    let cell = 424.0 * 1e9 / 149_760_000.0;
    assert!((fast - 193.0 * cell).abs() < 1_000.0, "{fast}");
    assert!((slow - (8_000_000.0 + cell)).abs() < 50_000.0, "{slow}");
}

#[test]
fn misplaced_keys_are_one_line_errors() {
    for (a, r, b, want) in [
        ("processing = \"1ms\"", "", "", "applies to ip-routers only"),
        ("", "send_cost = \"1ms\"", "", "applies to hosts only"),
        ("", "", "cost_jitter = \"1ms\"", "needs send_cost"),
        ("sar_rate = \"0\"", "", "", "greater than zero"),
    ] {
        let err = load(&ip_path(a, r, b, LIGHT)).unwrap_err().to_string();
        assert!(err.contains(want) && !err.contains('\n'), "{err}");
        assert!(err.starts_with("line "), "{err}");
    }
}

#[test]
fn a_paced_tcp_writer_sends_at_its_pace() {
    let tcp = "protocol = \"tcp\"\nmss = 1460\npace = \"2M\"";
    let text = ip_path("", "", "", "").replace("protocol = \"udp\"\n", tcp);
    let r = one_run(&text);
    let f = &r.flows[0];
    // One 1460-byte write every 5.84 ms: 2 Mb/s of payload, well below the 10 Mb/s links.
    assert!(
        (f.goodput_bps - 2e6).abs() < 2e6 * 0.01,
        "{}",
        f.goodput_bps
    );
    assert_eq!(f.tcp.as_ref().unwrap().retransmitted_segments, 0);
    let udp = ip_path("", "", "", "rate = \"1M\"\nsize = 100\npace = \"1M\"");
    let e = load(&udp).unwrap_err().to_string();
    assert!(e.contains("paces tcp flows"), "{e}");
}
