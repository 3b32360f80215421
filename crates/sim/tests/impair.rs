//! The impairment stage on simulated links: the lab's `emulate` keys, read by the same code,
//! and what they do in virtual time.

use flowlab_link::{config, run_virtual, Event, Frame, LinkModel};
use flowlab_sim::{load, run, run_step, SimFlow, SimNetwork};
use flowlab_spanned::Reader;
use flowlab_spec::{Direction, Protocol, TestSpec};

fn example(path: &str) -> String {
    let path = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Hosts a and b joined by one link with `keys`, and `flow` from a to b.
fn two_hosts(duration: &str, keys: &str, flow: &str) -> String {
    format!(
        "[sim]\nduration = \"{duration}\"\n\
         [[node]]\nname = \"a\"\nkind = \"host\"\n\
         [[node]]\nname = \"b\"\nkind = \"host\"\n\
         [[link]]\nfrom = \"a\"\nto = \"b\"\n{keys}\n\
         [[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\n{flow}"
    )
}

const PING: &str = "protocol = \"ping\"\nsize = 84\ninterval = \"100ms\"\n";

fn mean_rtt_ns(keys: &str) -> f64 {
    let r = run(&load(&two_hosts("2s", keys, PING)).unwrap(), None);
    let f = &r.runs[0].flows[0];
    assert_eq!(f.receiver.packets.unique, 20, "{keys}");
    f.receiver.round_trip.expect("round trips").mean_ns
}

#[test]
fn a_10ms_each_way_link_adds_20ms_to_the_rtt() {
    let bare = mean_rtt_ns("rate = \"10M\"");
    // A delay alone is the link's propagation delay; with a limit of its own it is the
    // impairment stage: both add exactly 10 ms each way.
    for keys in [
        "rate = \"10M\"\ndelay = \"10ms\"",
        "rate = \"10M\"\ndelay = \"10ms\"\nlimit = 100",
    ] {
        let delayed = mean_rtt_ns(keys);
        assert!(
            (delayed - bare - 20e6).abs() < 1.0,
            "{keys}: {bare} -> {delayed}"
        );
    }
}

/// Gilbert-Elliott loss (p = 1 %, r = 25 %: bursts of mean 4, a loss ratio of
/// 0.01 / 0.26 = 3.85 %) over 200,000 packets of a long virtual run. The tolerance, 0.4
/// percentage points, is about 3 standard deviations of the ratio measured over 200,000
/// packets lost in bursts of 4 (variance about 2/r - 1 = 7 times the binomial one).
#[test]
fn gilbert_elliott_loss_has_its_mean_over_a_long_run() {
    let keys = "rate = \"100M\"\ngemodel = { p = 0.01, r = 0.25 }";
    let flow = "protocol = \"udp\"\nrate = \"8M\"\nsize = \"1000B\"\n";
    let r = run(&load(&two_hosts("200s", keys, flow)).unwrap(), None);
    let f = &r.runs[0].flows[0];
    assert_eq!(f.sender.packets_sent, 200_000);
    let want = 0.01 / 0.26;
    assert!(
        (f.loss_ratio - want).abs() < 0.004,
        "loss {} against {want}",
        f.loss_ratio
    );
    let stage = r.runs[0].ports[0]
        .impair
        .as_ref()
        .expect("an impairment stage");
    assert_eq!(stage.dropped["loss"], f.receiver.packets.lost);
    // Losses come in bursts of mean 1/r = 4.
    let periods = f.receiver.loss_periods.as_ref().expect("losses");
    assert!((periods.mean_length - 4.0).abs() < 0.3, "{periods:?}");
}

#[test]
fn jitter_reorders_and_nothing_is_counted_lost_for_it() {
    let keys = "rate = \"100M\"\ndelay = \"10ms\"\njitter = \"5ms\"";
    let flow = "protocol = \"udp\"\nrate = \"8M\"\nsize = \"1000B\"\n";
    let r = run(&load(&two_hosts("5s", keys, flow)).unwrap(), None);
    let f = &r.runs[0].flows[0];
    let p = f.receiver.packets;
    assert_eq!((p.unique, p.lost), (5000, 0), "{p:?}");
    assert!(p.reordered > 100, "{p:?}");
    assert_eq!(f.in_flight_at_end, 0);
    let d = f.one_way_delay.expect("delays");
    // Uniform on 10 ms ± 5 ms, plus 0.08 ms on the line.
    assert!(d.min_ns >= 5e6 && d.max_ns <= 15.1e6, "{d:?}");
    assert!((d.mean_ns - 10.08e6).abs() < 0.2e6, "{d:?}");
}

/// A copy reaches the receiver, which counts it as a duplicate, as a real one would.
#[test]
fn duplicated_packets_arrive_twice() {
    let keys = "rate = \"100M\"\ndelay = \"2ms\"\nduplicate = \"10%\"";
    let flow = "protocol = \"udp\"\nrate = \"8M\"\nsize = \"1000B\"\n";
    let r = run(&load(&two_hosts("5s", keys, flow)).unwrap(), None);
    let f = &r.runs[0].flows[0];
    let p = f.receiver.packets;
    let copies = r.runs[0].ports[0].impair.as_ref().unwrap().duplicated;
    assert_eq!((p.unique, p.lost, p.duplicates), (5000, 0, copies), "{p:?}");
    assert!((400..600).contains(&copies), "{copies}");
    assert_eq!(p.received, 5000 + copies);
}

/// Out of order, every packet is still accounted for once: delivered, dropped by the port's
/// queue or by the stage, or in flight at the end.
#[test]
fn reordered_packets_are_each_delivered_dropped_or_in_flight() {
    let keys = "rate = \"10M\"\nbuffer_packets = 20\ndelay = \"10ms\"\njitter = \"4ms\"\n\
                reorder = \"5%\"\nloss = \"2%\"\nloss_burst = 2";
    let flow = "protocol = \"udp\"\nrate = \"12M\"\nsize = \"1000B\"\n";
    for drain in ["1s", "5ms"] {
        let text = two_hosts("3s", keys, flow)
            .replace("[sim]\n", &format!("[sim]\ndrain = \"{drain}\"\n"));
        let r = run(&load(&text).unwrap(), None);
        let f = &r.runs[0].flows[0];
        let p = f.receiver.packets;
        let port = &r.runs[0].ports[0];
        let stage = port.impair.as_ref().unwrap();
        assert_eq!(
            p.lost,
            port.dropped_buffer_full + stage.frames_dropped(),
            "{drain}"
        );
        assert_eq!(
            p.unique + p.lost + f.in_flight_at_end,
            f.sender.packets_sent,
            "{drain}"
        );
        assert!(p.reordered > 0 && p.lost > 0, "{p:?}");
        assert_eq!(f.in_flight_at_end > 0, drain == "5ms", "{drain}");
    }
}

#[test]
fn impairments_on_an_atm_link_are_refused_in_one_line() {
    let keys = "phy = \"OC-3c\"\ndelay = \"1ms\"\nloss = \"1%\"";
    let e = load(&two_hosts("1s", keys, PING)).unwrap_err().to_string();
    assert!(
        e.contains("loss") && e.contains("ATM link takes delay only") && !e.contains('\n'),
        "{e}"
    );
    let keys = "rate = \"10M\"\nloss = \"150%\"";
    let e = load(&two_hosts("1s", keys, PING)).unwrap_err().to_string();
    assert!(e.contains("between 0 and 1") && !e.contains('\n'), "{e}");
}

/// The lab's links, each direction the emulator's chain (seeded as the emulator seeds it).
fn lab_chains(text: &str) -> Vec<Box<dyn LinkModel>> {
    let root = flowlab_spanned::parse(text).unwrap();
    let doc = Reader::of(&root, "").unwrap();
    doc.tables("link")
        .unwrap()
        .iter()
        .map(|l| {
            let e = Reader::of(l.required("emulate").unwrap(), "emulate").unwrap();
            Box::new(config::read(&e).unwrap().build(0)) as Box<dyn LinkModel>
        })
        .collect()
}

/// Frames through `chains` one after the other: delivered (frame id, one-way delay).
fn through(chains: &mut [Box<dyn LinkModel>], frames: Vec<(u64, Frame)>) -> Vec<(u64, u64)> {
    let sent: Vec<u64> = frames.iter().map(|&(t, _)| t).collect();
    let mut arrivals = frames;
    for chain in chains {
        let (events, _) = run_virtual(chain.as_mut(), arrivals);
        arrivals = events
            .into_iter()
            .filter_map(|e| match e {
                Event::Depart { frame, at_ns } => Some((at_ns, frame)),
                _ => None,
            })
            .collect();
    }
    arrivals
        .iter()
        .map(|&(t, f)| (f.id, t - sent[f.id as usize]))
        .collect()
}

/// `n` datagrams of 1000 B at 8 Mbit/s from a to b, in an experiment step of seed `seed`.
fn udp_a_to_b(n: u64, seed: u64) -> SimFlow {
    let mut spec = TestSpec::new(Protocol::Udp, Direction::Oneway);
    spec.rate_bps = Some(8_000_000);
    spec.size = 1000;
    spec.duration_ns = Some(n * 1_000_000);
    spec.seed = seed;
    SimFlow {
        name: "a-b".into(),
        from: "a".into(),
        to: "b".into(),
        start_offset_ns: 0,
        spec,
    }
}

/// In an experiment, each step's seed seeds the network's impairments: a repetition draws
/// its own losses, and the same step replays them.
#[test]
fn a_steps_seed_draws_its_impairments() {
    let net = SimNetwork::load(&example("examples/sim/emulated.toml")).unwrap();
    let lost = |seed| {
        let out = run_step(&net, &[udp_a_to_b(20_000, seed)]).unwrap();
        out[0].receiver().receiver.as_ref().unwrap().packets.lost
    };
    assert_eq!(lost(7), lost(7));
    assert_ne!(lost(7), lost(8));
}

/// examples/lab/emulated.toml through the emulator's models and examples/sim/emulated.toml
/// in the simulator: 60,000 datagrams of 1000 B at 8 Mbit/s from a to b. The loss ratio
/// (1 % in bursts of 3, from two different random streams) agrees within 0.3 percentage
/// points, about 3 standard deviations of their difference; the least one-way delay (5 ms,
/// 23 cells on OC-3c, 1028 bytes at 10 Mbit/s) is the same to the nanosecond.
#[test]
fn the_emulated_lab_and_its_simulated_twin_agree() {
    const N: u64 = 60_000;
    let mut chains = lab_chains(&example("examples/lab/emulated.toml"));
    let frames = (0..N).map(|k| {
        let f = Frame {
            id: k,
            len: 1028,
            dscp: 0,
        };
        (k * 1_000_000, f)
    });
    let lab = through(&mut chains, frames.collect());
    let lab_loss = 1.0 - lab.len() as f64 / N as f64;
    let lab_min = lab.iter().map(|&(_, d)| d).min().unwrap() as i64;

    let net = SimNetwork::load(&example("examples/sim/emulated.toml")).unwrap();
    let out = run_step(&net, &[udp_a_to_b(N, 1)]).unwrap();
    let got = out[0].receiver().receiver.as_ref().unwrap();
    assert_eq!(got.packets.unique + got.packets.lost, N);
    let sim_loss = got.packets.lost as f64 / N as f64;
    assert!(
        (lab_loss - sim_loss).abs() < 0.003 && (0.005..0.015).contains(&sim_loss),
        "lab {lab_loss} sim {sim_loss}"
    );
    assert_eq!(got.transit_min_ns, Some(lab_min));
}
