//! Background sources driven by crates/traffic's models (on/off, TCP-like message rounds),
//! each packet an AAL5 frame of back-to-back cells into the loaded switch port.

use flowlab_sim::{load, run};

fn port_loaded_by(background: &str) -> String {
    format!(
        r#"
[sim]
duration = "2s"
seed = 3
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
[[link]]
from = "s"
to = "b"
phy = "OC-3c"
buffer_cells = 256
[[background]]
name = "bg"
from = "s"
to = "b"
{background}
[[flow]]
name = "f"
from = "a"
to = "b"
rate = "1M"
size = 1000
"#
    )
}

#[test]
fn an_on_off_background_sends_whole_frames_at_its_mean_rate() {
    // On half the time at 50 Mbit/s of 8192-byte datagrams: 8220 IP bytes, 172 cells each.
    let text = port_loaded_by(
        "traffic = \"onoff:on=exp:10ms,off=exp:10ms,rate=50M,size=8192\"\npasses = 2",
    );
    let s = load(&text).unwrap();
    let r = run(&s, None);
    let bg = &r.runs[0].backgrounds[0];
    assert_eq!(bg.cells_injected % 172, 0, "{}", bg.cells_injected);
    let frames = bg.cells_injected / 172;
    let want = 25e6 * 2.0 / 8.0 / 8192.0;
    assert!(
        (frames as f64 / want - 1.0).abs() < 0.25,
        "{frames} vs {want}"
    );
    // Recirculated once more: the port carried (about) twice the injected cells, less drops.
    let port = r.runs[0].ports.iter().find(|p| p.name == "s->b").unwrap();
    assert!(port.cells_in > bg.cells_injected * 2);
    assert_eq!(
        flowlab_sim::to_json(&r),
        flowlab_sim::to_json(&run(&s, None))
    );
    assert_ne!(
        flowlab_sim::to_json(&r),
        flowlab_sim::to_json(&run(&s, Some(4)))
    );
}

#[test]
fn bursts_of_frames_overflow_a_port_more_than_the_same_cells_spread_out() {
    // About the same mean cell rate (72 Mbit/s of cells, recirculated once more): Poisson
    // single cells, or 8 KiB datagrams on half the time at 130 Mbit/s.
    let spread = port_loaded_by("rate = \"72M\"\npattern = \"poisson\"\npasses = 2");
    let bursty = port_loaded_by(
        "traffic = \"onoff:on=exp:5ms,off=exp:5ms,rate=130M,size=8192\"\npasses = 2",
    );
    let dropped = |t: &str| {
        let r = run(&load(t).unwrap(), None);
        let p = r.runs[0].ports.iter().find(|p| p.name == "s->b").cloned();
        let p = p.unwrap();
        p.cells_dropped as f64 / p.cells_in as f64
    };
    let (spread, bursty) = (dropped(&spread), dropped(&bursty));
    // Twice the line rate while on: about half the cells of the on periods are lost.
    assert!(
        bursty > 0.2 && bursty > 3.0 * spread,
        "bursty {bursty} spread {spread}"
    );
}

#[test]
fn a_tcp_like_background_and_bad_keys() {
    let text =
        port_loaded_by("traffic = \"tcp:gap=exp:5ms,msg=lognormal:20k,10k,mss=9140,iw=4,rtt=1ms\"");
    let r = run(&load(&text).unwrap(), None);
    assert!(r.runs[0].backgrounds[0].cells_injected > 0);
    for (keys, want) in [
        (
            "traffic = \"poisson:pps=10\"\nrate = \"1M\"",
            "sets its own",
        ),
        (
            "traffic = \"poisson:pps=10\"\npattern = \"cbr\"",
            "sets its own",
        ),
        ("traffic = \"nonsense\"", "traffic"),
        (
            "rate = \"1M\"\nsar_rate = \"10M\"",
            "sar_rate: spaces a traffic model's cells",
        ),
        (
            "traffic = \"poisson:pps=10\"\nsar_rate = \"max\"",
            "'max' is the default",
        ),
    ] {
        let e = load(&port_loaded_by(keys)).unwrap_err().to_string();
        assert!(e.contains(want), "{keys}: {e}");
    }
}

#[test]
fn a_ttcp_background_is_a_bulk_tcp_transfer_that_queues_the_pings() {
    let net = |bg: &str| {
        format!(
            r#"
[sim]
duration = "2s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "r"
kind = "ip-router"
[[node]]
name = "b"
kind = "host"
[[node]]
name = "c"
kind = "host"
[[link]]
from = "a"
to = "r"
rate = "100M"
[[link]]
from = "c"
to = "r"
rate = "100M"
[[link]]
from = "r"
to = "b"
rate = "10M"
delay = "1ms"
buffer_packets = 50
[[flow]]
name = "ping"
from = "a"
to = "b"
protocol = "ping"
interval = "10ms"
{bg}
"#
        )
    };
    let ttcp = "[[background]]\nname = \"ttcp\"\nfrom = \"c\"\nto = \"b\"\npattern = \"ttcp\"\nwindow = \"60KiB\"";
    let quiet = run(&load(&net("")).unwrap(), None).runs.remove(0);
    let loaded = run(&load(&net(ttcp)).unwrap(), None).runs.remove(0);
    let bulk = loaded.flows.iter().find(|f| f.name == "ttcp").unwrap();
    assert_eq!(bulk.protocol, "tcp");
    // Its window (41 segments) fits the 50-packet queue: it fills the 10 Mbit/s bottleneck
    // (1460-byte segments: 97 % of it is payload) without a loss.
    assert!(bulk.goodput_bps > 8.5e6, "{}", bulk.goodput_bps);
    // And the pings wait behind its queue.
    let rtt = |r: &flowlab_sim::RunReport| {
        r.flows[0]
            .receiver
            .round_trip
            .as_ref()
            .map(|s| s.mean_ns)
            .unwrap()
    };
    assert!(
        rtt(&loaded) > rtt(&quiet) + 5e6,
        "{} vs {}",
        rtt(&loaded),
        rtt(&quiet)
    );
    let dup = format!(
        "{ttcp}\n[[background]]\nname = \"ping\"\nfrom = \"c\"\nto = \"b\"\npattern = \"ttcp\""
    );
    assert!(load(&net(&dup))
        .unwrap_err()
        .to_string()
        .contains("defined twice"));
}
