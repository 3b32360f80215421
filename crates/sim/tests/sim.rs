//! End-to-end checks of the simulator against numbers that follow from the models.

use flowlab_sim::{load, run, to_json};

const LINE: &str = r#"
[[node]]
name = "a"
kind = "host"
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
"#;

fn scenario(sim: &str, rest: &str) -> String {
    format!("[sim]\n{sim}\n{LINE}{rest}")
}

#[test]
fn cells_per_packet_end_to_end() {
    // 64-byte pings are 92 IP bytes: (92 + 16) / 48 -> 3 cells with LLC/SNAP.
    for (size, cells) in [(92u32, 3u64), (1052, 23), (9180, 192)] {
        let text = scenario(
            "duration = \"1s\"",
            &format!("[[link]]\nfrom = \"s\"\nto = \"b\"\nphy = \"OC-3c\"\n[[flow]]\nname = \"p\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"ping\"\nsize = {size}\ninterval = \"100ms\"\n"),
        );
        let r = run(&load(&text).unwrap(), None);
        let f = &r.runs[0].flows[0];
        assert_eq!(f.cells_per_packet, Some(cells));
        let port = r.runs[0].ports.iter().find(|p| p.name == "s->b").unwrap();
        assert_eq!(port.cells_out, 10 * cells, "size {size}");
        assert_eq!(f.receiver.packets.unique, 10);
    }
}

#[test]
fn gcra_policing_drops_a_known_share() {
    // 1000 single-cell packets above the PCR, policed by dropping.
    let text = scenario(
        "duration = \"2s\"",
        r#"[[link]]
from = "s"
to = "b"
phy = "OC-3c"
[[flow]]
name = "u"
from = "a"
to = "b"
protocol = "udp"
rate = "424k"
size = "32B"
count = 1000
pcr = "212k"
cdvt = "0us"
police = "drop"
"#,
    );
    let r = run(&load(&text).unwrap(), None);
    let f = &r.runs[0].flows[0];
    // 32 B + 16 B overhead = 1 cell per packet, one every 603.8 µs against T = 2 ms with
    // CDVT 0: a cell conforms only once TAT has passed, so every ⌈2 / 0.6038⌉ = 4th passes.
    let p = f.policer.unwrap();
    assert_eq!(p.passed + p.dropped, 1000);
    assert_eq!(p.passed, 250, "{p:?}");
    assert_eq!(f.receiver.packets.unique, 250);
}

#[test]
fn pq_residual_delay_is_one_max_packet() {
    // A premium 100-byte stream shares a 1 Mb/s PQ router port with 1500-byte best effort:
    // its worst extra delay is the residual transmission of one 1500-byte packet (12 ms).
    let text = r#"
[sim]
duration = "5s"
[[node]]
name = "v"
kind = "host"
[[node]]
name = "d"
kind = "host"
[[node]]
name = "r"
kind = "ip-router"
[[node]]
name = "sink"
kind = "host"
[[link]]
from = "v"
to = "r"
rate = "100M"
[[link]]
from = "d"
to = "r"
rate = "100M"
[[link]]
from = "r"
to = "sink"
rate = "1M"
scheduler = "priority"
classes = [{ name = "ef", dscp = ["ef"] }, { name = "be", default = true }]
[[flow]]
name = "voice"
from = "v"
to = "sink"
rate = "64k"
size = 100
dscp = "ef"
[[flow]]
name = "data"
from = "d"
to = "sink"
rate = "2M"
size = 1500
"#;
    let r = run(&load(text).unwrap(), None);
    let v = &r.runs[0].flows[0];
    let d = v.one_way_delay.unwrap();
    let own = 100.0 * 8.0 / 1e6 * 1e9; // 0.8 ms on the 1 Mb/s port
    let residual = 1500.0 * 8.0 / 1e6 * 1e9; // 12 ms
    assert!(d.max_ns <= own + residual + 20_000.0, "{d:?}");
    assert!(d.max_ns >= own + 0.8 * residual, "{d:?}");
    assert_eq!(v.loss_ratio, 0.0);
}

#[test]
fn window_limited_tcp_over_190ms() {
    let text = r#"
[sim]
duration = "20s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "s1"
kind = "atm-switch"
[[node]]
name = "s2"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
[[link]]
from = "a"
to = "s1"
phy = "OC-3c"
[[link]]
from = "s1"
to = "s2"
phy = "OC-3c"
delay = "95ms"
buffer_cells = 4000
[[link]]
from = "s2"
to = "b"
phy = "OC-3c"
[[flow]]
name = "t"
from = "a"
to = "b"
protocol = "tcp"
window = "64KiB"
window_scaling = false
mss = 9140
"#;
    let r = run(&load(text).unwrap(), None);
    let f = &r.runs[0].flows[0];
    // 65535 bytes per ~190 ms round trip: about 2.7 Mb/s of goodput (less slow start).
    let bound = 65_535.0 * 8.0 / 0.190;
    assert!(f.goodput_bps < bound, "{}", f.goodput_bps);
    assert!(f.goodput_bps > 0.85 * bound, "{}", f.goodput_bps);
}

#[test]
fn same_seed_same_bytes_other_seed_other_result() {
    let text = scenario(
        "duration = \"1s\"\nseed = 7",
        r#"[[link]]
from = "s"
to = "b"
phy = "OC-3c"
buffer_cells = 64
[[background]]
name = "bg"
from = "s"
to = "b"
rate = "50M"
pattern = "poisson"
passes = 3
[[flow]]
name = "p"
from = "a"
to = "b"
protocol = "ping"
size = 1052
interval = "1ms"
"#,
    );
    let s = load(&text).unwrap();
    let one = to_json(&run(&s, None));
    let two = to_json(&run(&s, None));
    assert_eq!(one.as_bytes(), two.as_bytes());
    let other = run(&s, Some(8));
    let a = run(&s, None);
    let drops = |r: &flowlab_sim::SimReport| {
        r.runs[0]
            .ports
            .iter()
            .find(|p| p.name == "s->b")
            .unwrap()
            .cells_dropped
    };
    assert!(drops(&a) > 0);
    assert_ne!(drops(&a), drops(&other));
}

#[test]
fn every_example_loads_and_runs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sim");
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut n = 0;
    for path in entries
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
    {
        let text = std::fs::read_to_string(&path).unwrap();
        // Network files (for experiments) are tested in tests/network.rs.
        if flowlab_sim::SimNetwork::load(&text).is_ok() {
            continue;
        }
        let mut s =
            load(&text).unwrap_or_else(|e| panic!("{}", e.with_file(&path.display().to_string())));
        s.set_duration_ns(200_000_000);
        let r = run(&s, None);
        assert_eq!(r.runs.len(), s.runs());
        assert!(
            r.runs.iter().all(|run| !run.flows.is_empty()),
            "{}",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 5);
}

/// Two hosts over a 100 Mbit/s IP link (1 ms), and `flows`.
fn ip_pair(duration: &str, flows: &str) -> String {
    format!(
        "[sim]\nduration = \"{duration}\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n\
         [[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\nfrom = \"a\"\nto = \"b\"\n\
         rate = \"100M\"\ndelay = \"1ms\"\n{flows}"
    )
}

fn model_flow(traffic: &str) -> String {
    format!("[[flow]]\nname = \"m\"\nfrom = \"a\"\nto = \"b\"\ntraffic = \"{traffic}\"\n")
}

#[test]
fn a_poisson_model_runs_at_its_rate_and_replays_with_its_seed() {
    let text = ip_pair("5s", &model_flow("poisson:pps=2000,size=1200"));
    let s = load(&text).unwrap();
    let r = run(&s, None);
    let f = &r.runs[0].flows[0];
    let sent = f.sender.packets_sent;
    // 10,000 expected; a Poisson count's sd is 100.
    assert!((9_600..10_400).contains(&sent), "{sent}");
    assert_eq!(f.receiver.packets.unique, sent);
    assert_eq!(f.loss_ratio, 0.0);
    // Payload plus 28 header bytes on the wire, 1200 B of goodput each.
    assert_eq!(f.receiver.bytes_received, sent * 1228);
    let goodput = 2000.0 * 1200.0 * 8.0;
    assert!(
        (f.goodput_bps / goodput - 1.0).abs() < 0.04,
        "{}",
        f.goodput_bps
    );
    // 1228 B at 100 Mbit/s plus 1 ms: the least one-way delay.
    let d = f.one_way_delay.unwrap();
    assert_eq!(d.min_ns, 1_000_000.0 + 98_240.0);
    assert_eq!(to_json(&r), to_json(&run(&s, None)));
    assert_ne!(to_json(&r), to_json(&run(&s, Some(2))));
}

#[test]
fn a_preset_runs_each_part_as_a_sub_flow() {
    let text = ip_pair("20s", &model_flow("videoconf-1998"));
    let r = run(&load(&text).unwrap(), None);
    let f = &r.runs[0].flows[0];
    assert_eq!(f.packet_bytes, 0, "sizes vary");
    let parts = &f.sender.flows;
    assert_eq!(parts.len(), 2);
    // Audio: 64 kb/s of 1119-byte packets, 7.15 a second; the receiver sees them all.
    assert!((140..=144).contains(&parts[0].packets_sent), "{parts:?}");
    // A scenario counts IP bytes: the payload and 28 header bytes.
    assert_eq!(parts[0].bytes_sent, parts[0].packets_sent * (1119 + 28));
    assert_eq!(f.receiver.flows[0].packets.unique, parts[0].packets_sent);
    // Video: mean 1 Mbit/s, 0.5 to 1.5 by scene.
    let video_bps = parts[1].bytes_sent as f64 * 8.0 / 20.0;
    assert!((500e3..1.5e6).contains(&video_bps), "{video_bps}");
    assert_eq!(f.receiver.packets.unique, f.sender.packets_sent);
    assert_eq!(to_json(&r), to_json(&run(&load(&text).unwrap(), None)));
}

#[test]
fn a_model_above_the_path_mtu_is_fragmented_on_the_way() {
    // Video frames cut at 9000 bytes do not fit a 1500-byte MTU: 5028 IP bytes are sent as
    // four fragments (1480 × 3 + 568 data bytes) and put together at the receiver.
    let text = ip_pair("2s", &model_flow("video:fps=25,size=5000,mtu=9000"));
    let f = &run(&load(&text).unwrap(), None).runs[0].flows[0];
    assert_eq!(f.sender.packets_sent, 50);
    assert_eq!(f.sender.lost_by_sender.send_errors, 0);
    let frag = f.fragmentation.expect("fragmentation is reported");
    assert_eq!((frag.datagrams_fragmented, frag.fragments), (50, 200));
    assert_eq!(frag.reassembled, f.receiver.packets.received);
    assert_eq!(frag.reassembly_timeouts, 0);
    assert_eq!(f.receiver.packets.received + f.in_flight_at_end, 50);
    assert_eq!(f.loss_ratio, 0.0);
}
