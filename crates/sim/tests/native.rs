//! Native AAL5 frames (`protocol = "raw"`), a receiving socket's buffer and a host's CPU
//! figure: each against arithmetic done by hand.

mod common;

use common::one_run;
use flowlab_sim::load;

/// PC `a`, a switch and PC `b` on ATM25 links; `a_keys` and `b_keys` are node keys, `flow`
/// the flow's.
fn atm25(a_keys: &str, b_keys: &str, flow: &str) -> String {
    format!(
        r#"[sim]
duration = "1s"
[[node]]
name = "a"
kind = "host"
{a_keys}
[[node]]
name = "s"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
{b_keys}
[[link]]
from = "a"
to = "s"
phy = "ATM25"
[[link]]
from = "s"
to = "b"
phy = "ATM25"
buffer_cells = 4000
[[flow]]
name = "f"
from = "a"
to = "b"
{flow}
"#
    )
}

#[test]
fn native_8000_byte_frames_reach_the_aal5_ceiling_of_atm25() {
    let r = one_run(&atm25(
        "",
        "",
        "protocol = \"raw\"\nrate = \"24M\"\nsize = 8000",
    ));
    let f = &r.flows[0];
    assert_eq!(f.protocol, "raw");
    // 8000 data bytes + the 8-byte AAL5 trailer = 8008 bytes, no LLC/SNAP header (VC-mux
    // null encapsulation): 166.83 cell payloads of 48 bytes, so 167 cells.
    assert_eq!(f.cells_per_packet, Some(167));
    // ATM25 sends a cell every 54 byte times of 25.6 Mb/s: 16.875 µs. Frames leave back to
    // back, one every 167 × 16.875 µs = 2.818125 ms: 64000 bits per frame.
    let ceiling: f64 = 64_000.0 / 2.818_125e-3;
    assert!((ceiling / 1e6 - 22.710).abs() < 0.001, "{ceiling}");
    assert!((f.goodput_bps - ceiling).abs() < 1.0, "{}", f.goodput_bps);
    assert_eq!(f.goodput_bps, f.throughput_bps, "no headers to leave out");
    // The same payload as UDP takes 8028 IP bytes + 8 LLC/SNAP: 168 cells.
    let udp = one_run(&atm25(
        "",
        "",
        "protocol = \"udp\"\nrate = \"24M\"\nsize = 8028",
    ));
    assert_eq!(udp.flows[0].cells_per_packet, Some(168));
    assert!(udp.flows[0].goodput_bps < f.goodput_bps);
}

#[test]
fn native_frames_are_refused_off_atm_and_above_the_mtu() {
    let text = atm25("", "", "protocol = \"raw\"\nrate = \"1M\"\nsize = 9181");
    let e = load(&text).expect_err("refused").to_string();
    assert!(e.contains("above the path MTU 9180"), "{e}");
    let ip = text
        .replace("kind = \"atm-switch\"", "kind = \"ip-router\"")
        .replace("phy = \"ATM25\"", "rate = \"10M\"")
        .replace("size = 9181", "size = 1000");
    let e = load(&ip).expect_err("refused").to_string();
    assert!(e.contains("native AAL5 frames need ATM links"), "{e}");
}

#[test]
fn a_slow_reader_overflows_its_socket_buffer_by_what_it_cannot_read() {
    // 1000-byte frames every 1 ms (8 Mb/s), read at 4 Mb/s (2 ms each) from 10000 bytes.
    let flow = "protocol = \"raw\"\nrate = \"8M\"\nsize = 1000\n\
                recv_buffer = \"10000B\"\nread_rate = \"4M\"";
    let r = one_run(&atm25("", "", flow));
    let f = &r.flows[0];
    let b = f.socket_buffer.as_ref().expect("socket buffer report");
    assert_eq!(b.size_bytes, 10_000);
    assert_eq!(b.peak_bytes, 10_000);
    assert_eq!(f.receiver.socket_buffer_drops, Some(b.overflows));
    // Arrivals exceed reads by one frame every 2 ms; the buffer holds 10 frames, so from
    // about the 20th ms every other frame is refused: about (1000 - 20) / 2 of 1000.
    let sent = f.sender.packets_sent;
    assert_eq!(sent, 1_000);
    assert!((485..=495).contains(&b.overflows), "{}", b.overflows);
    assert_eq!(
        f.receiver.packets.unique + b.overflows + f.in_flight_at_end,
        sent
    );
    assert!(
        (f.goodput_bps - 4e6).abs() < 4e6 * 0.01,
        "read at 4 Mb/s: {}",
        f.goodput_bps
    );
    // Sampled every 100 ms over the run and its drain: full while the source sends.
    assert_eq!(b.fill_bytes.len(), 20);
    assert!(
        b.fill_bytes[1..9].iter().all(|&x| x >= 9_000),
        "{:?}",
        b.fill_bytes
    );
    assert_eq!(*b.fill_bytes.last().unwrap(), 0, "read empty in the drain");
}

#[test]
fn a_reader_that_keeps_up_loses_nothing() {
    let flow = "protocol = \"udp\"\nrate = \"2M\"\nsize = 1028\nrecv_buffer = \"2000B\"";
    let r = one_run(&atm25("", "", flow));
    let f = &r.flows[0];
    assert_eq!(f.loss_ratio, 0.0);
    let b = f.socket_buffer.as_ref().unwrap();
    assert_eq!(
        (b.overflows, b.peak_bytes),
        (0, 1000),
        "charged its UDP payload"
    );
}

#[test]
fn host_cpu_is_the_sum_of_its_costs_over_the_run() {
    // 250 packets of 1000 IP bytes in 1 s (2 Mb/s); the sender pays 100 µs + 1000 × 100 ns
    // = 200 µs each: 50 ms, 5 %; the receiver 300 µs each: 75 ms, 7.5 %.
    let r = one_run(&atm25(
        "send_cost = \"100us\"\nsend_byte_cost = \"100ns\"",
        "receive_cost = \"300us\"",
        "protocol = \"udp\"\nrate = \"2M\"\nsize = 1000",
    ));
    assert_eq!(r.flows[0].sender.packets_sent, 250);
    let cpu = |name: &str| r.hosts.iter().find(|h| h.name == name).expect(name).clone();
    let (a, b) = (cpu("a"), cpu("b"));
    assert_eq!((a.send_busy_ns, a.receive_busy_ns), (50_000_000, 0));
    assert!((a.cpu_ratio - 0.05).abs() < 1e-12, "{}", a.cpu_ratio);
    assert_eq!((b.send_busy_ns, b.receive_busy_ns), (0, 75_000_000));
    assert!((b.cpu_ratio - 0.075).abs() < 1e-12);
    assert_eq!(r.hosts.len(), 2, "hosts without costs are not reported");
}

#[test]
fn a_shaped_vc_loses_at_the_sender_what_its_pcr_cannot_carry() {
    // 1000-byte frames (21 cells) at 2.2 Mb/s into a CBR VC shaped to 2 Mb/s of cells
    // (4716.98 cells/s: 1.7969 Mb/s of frames), the adapter holding two frames for it.
    let flow = "protocol = \"raw\"\nrate = \"2.2M\"\nsize = 1000\nservice = \"cbr\"\n\
                pcr = \"2M\"\nshape = true";
    let text = atm25("", "", flow).replace(
        "phy = \"ATM25\"\n[[link]]",
        "phy = \"ATM25\"\nhost_buffer_cells = 42\n[[link]]",
    );
    let r = one_run(&text);
    let f = &r.flows[0];
    let carried = 2e6 / 424.0 / 21.0 * 8000.0;
    assert!(
        (f.goodput_bps - carried).abs() < carried * 1e-4,
        "{}",
        f.goodput_bps
    );
    let lost = 1.0 - carried / 2.2e6;
    assert!(
        (f.loss_ratio - lost).abs() < 0.005,
        "{} against {lost}",
        f.loss_ratio
    );
    assert_eq!(f.in_flight_at_end, 0, "the drain empties the shaper");
}

/// WS2NetTest's loopback test: the far application sends every frame back through the same
/// costs and links, so with the same PC at both ends a round trip is two one-way trips.
#[test]
fn a_loopback_flow_echoes_each_frame_through_both_hosts() {
    let pc = "send_cost = \"100us\"\nreceive_cost = \"300us\"";
    let flow = "protocol = \"raw\"\nrate = \"80k\"\nsize = 1008\nloopback = true";
    let r = one_run(&atm25(pc, pc, flow));
    let f = &r.flows[0];
    let rtt = f.receiver.round_trip.as_ref().expect("echoes come back");
    let one_way = f.one_way_delay.as_ref().expect("requests arrive");
    assert_eq!(rtt.count, 10, "ten frames a second, each echoed");
    // 1008 bytes and the trailer are 22 cells of 16.875 µs on each of the two links.
    let line_ns = 22.0 * 16_875.0;
    assert!(one_way.min_ns >= 400_000.0 + line_ns, "{}", one_way.min_ns);
    assert!(
        (rtt.mean_ns - 2.0 * one_way.mean_ns).abs() < 0.01 * rtt.mean_ns,
        "{} against 2 × {}",
        rtt.mean_ns,
        one_way.mean_ns
    );
    let plain = one_run(&atm25(
        pc,
        pc,
        "protocol = \"raw\"\nrate = \"80k\"\nsize = 1008",
    ));
    assert!(plain.flows[0].receiver.round_trip.is_none());
}

#[test]
fn loopback_is_for_udp_and_raw_flows() {
    let e = load(&atm25("", "", "protocol = \"tcp\"\nloopback = true"))
        .expect_err("tcp")
        .to_string();
    assert!(e.contains("loopback") && !e.contains('\n'), "{e}");
    let e = load(&atm25(
        "",
        "",
        "protocol = \"raw\"\nrate = \"1M\"\nloopback = 1",
    ))
    .expect_err("not a bool")
    .to_string();
    assert!(e.contains("loopback") && !e.contains('\n'), "{e}");
}
