//! Experiment steps on simulated networks: the figures follow from link rates, queues and
//! delays, and the example networks run the example experiments.

use flowlab_experiment::{plan, trial_step, ResolvedFlow};
use flowlab_results::{ReceiverReport, Role, SideReport};
use flowlab_sim::{run_step, SimFlow, SimNetwork};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_traffic::TrafficSpec;

fn example(path: &str) -> String {
    let path = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn network(path: &str) -> SimNetwork {
    SimNetwork::load(&example(path)).unwrap_or_else(|e| panic!("{}", e.with_file(path)))
}

/// A UDP test as `flowlab test` sends it.
fn udp(rate_bps: u64, size: u32, duration_ns: u64) -> TestSpec {
    TestSpec {
        rate_bps: Some(rate_bps),
        size,
        duration_ns: Some(duration_ns),
        seed: 1,
        ..TestSpec::new(Protocol::Udp, Direction::Oneway)
    }
}

fn flow(from: &str, to: &str, spec: TestSpec) -> SimFlow {
    SimFlow {
        name: format!("{from}-{to}"),
        from: from.into(),
        to: to.into(),
        start_offset_ns: 0,
        spec,
    }
}

fn from_plan(f: &ResolvedFlow) -> SimFlow {
    SimFlow {
        name: f.name.clone(),
        from: f.from.clone(),
        to: f.to.clone(),
        start_offset_ns: f.start_offset_ns,
        spec: f.spec.clone(),
    }
}

fn receiver(side: &SideReport) -> &ReceiverReport {
    side.receiver.as_ref().expect("a receiver report")
}

/// Goodput as a real run's summary computes it: payload bits over the arrivals' span.
fn goodput_bps(r: &ReceiverReport) -> f64 {
    let n = r.packets.unique as f64;
    r.bytes_received as f64 * 8.0 * (n - 1.0) / n * 1e9 / r.duration_ns as f64
}

/// Sent minus received, over sent, as a real run's summary counts loss.
fn loss(sender: &SideReport, receiver: &ReceiverReport) -> f64 {
    let sent = sender.sender.as_ref().unwrap().packets_sent as f64;
    (sent - receiver.packets.unique as f64) / sent
}

/// Two hosts over one link of `rate` and `delay`.
fn pair(rate: &str, delay: &str) -> SimNetwork {
    SimNetwork::load(&format!(
        "[network]\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\n\
         kind = \"host\"\n[[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"{rate}\"\n\
         delay = \"{delay}\"\nbuffer = \"32KiB\"\n"
    ))
    .unwrap()
}

#[test]
fn the_example_networks_load() {
    let b = network("examples/sim/bottleneck.toml");
    assert_eq!(b.name(), "bottleneck");
    let three = network("examples/sim/lab-three.toml");
    assert_eq!(three.name(), "three");
    assert!(three.description().contains("10 Mb/s"));
}

#[test]
fn twice_the_bottleneck_delivers_its_rate_and_loses_the_rest() {
    let net = network("examples/sim/bottleneck.toml");
    let spec = udp(20_000_000, 1000, 2_000_000_000);
    let r = &run_step(&net, &[flow("a", "b", spec)]).unwrap()[0];
    assert_eq!(
        (r.client.role, r.agent.role),
        (Role::Sender, Role::Receiver)
    );
    assert_eq!(r.agent.host, "b");
    let (sent, got) = (r.client.sender.as_ref().unwrap(), receiver(&r.agent));
    assert_eq!(sent.packets_sent, 5000);
    assert_eq!(
        sent.bytes_sent,
        5000 * 1000,
        "payload bytes, as a real test counts"
    );
    // The link carries 10 Mbit/s of 1028-byte IP packets: 9.73 Mbit/s of payload.
    let capacity = 10e6 * 1000.0 / 1028.0;
    let g = goodput_bps(got);
    assert!(g < 10e6 && (g / capacity - 1.0).abs() < 0.005, "{g}");
    // Delivered: 2 s at the link's rate and the 32 KiB queue that drains after.
    let delivered = (10e6 * 2.0 + 32768.0 * 8.0) / (1028.0 * 8.0);
    let expected = 1.0 - delivered / 5000.0;
    let l = loss(&r.client, got);
    assert!(
        (l - expected).abs() < 0.003,
        "loss {l}, expected {expected}"
    );
    assert_eq!(got.packets.lost, 5000 - got.packets.unique);
    assert!(r.client.cpu.is_none() && r.agent.role_cpu.is_none());
}

#[test]
fn below_capacity_nothing_is_lost_and_delay_is_propagation_plus_serialisation() {
    let net = pair("10M", "5ms");
    let r = &run_step(&net, &[flow("a", "b", udp(5_000_000, 1000, 1_000_000_000))]).unwrap()[0];
    let got = receiver(&r.agent);
    assert_eq!(got.packets.unique, 625);
    assert_eq!(loss(&r.client, got), 0.0);
    // 5 ms and 1028 bytes at 10 Mbit/s (822.4 us), for every packet.
    assert_eq!(got.transit_min_ns, Some(5_822_400));
    assert_eq!(got.relative_delay.unwrap().max_ns, 0.0);
    assert_eq!(got.jitter_ns, 0.0);
}

#[test]
fn reverse_sends_from_the_agent_and_loopback_echoes() {
    let net = pair("10M", "5ms");
    let mut reverse = udp(1_000_000, 1000, 1_000_000_000);
    reverse.direction = Direction::Reverse;
    let mut loopback = reverse.clone();
    loopback.direction = Direction::Loopback;
    let results = run_step(&net, &[flow("a", "b", reverse), flow("a", "b", loopback)]).unwrap();
    let r = &results[0];
    assert_eq!(
        (r.client.role, r.agent.role),
        (Role::Receiver, Role::Sender)
    );
    assert_eq!(r.sender().sender.as_ref().unwrap().packets_sent, 125);
    assert_eq!(receiver(r.receiver()).packets.unique, 125);
    let l = &results[1];
    assert_eq!((l.client.role, l.agent.role), (Role::Sender, Role::Echo));
    assert_eq!(l.agent.echo.as_ref().unwrap().packets_echoed, 125);
    assert_eq!(l.agent.echo.as_ref().unwrap().bytes_echoed, 125_000);
    let back = receiver(&l.client);
    assert_eq!(back.packets.unique, 125);
    // Both ways 5 ms and 822.4 us; the reverse flow's packets share the line with the
    // echoes, so a few wait.
    let rtt = back.round_trip.unwrap();
    assert_eq!(rtt.min_ns, 2.0 * 5_822_400.0);
    assert!(rtt.max_ns < 2.0 * 5_822_400.0 + 822_400.0 + 1.0, "{rtt:?}");
}

#[test]
fn traffic_models_run_as_in_a_real_test_and_replay_with_the_seed() {
    let net = pair("100M", "1ms");
    let mut spec = udp(1, 1200, 2_000_000_000);
    spec.traffic = Some(TrafficSpec::parse("poisson:pps=2000,size=1200").unwrap());
    let run = |seed| {
        let mut s = spec.clone();
        s.seed = seed;
        run_step(&net, &[flow("a", "b", s)]).unwrap()
    };
    let a = run(5);
    assert_eq!(a, run(5));
    assert_ne!(a, run(6));
    let got = receiver(&a[0].agent);
    assert!((3_800..4_200).contains(&got.packets.unique), "{got:?}");
    assert_eq!(got.bytes_received, got.packets.unique * 1200);

    // A preset's parts are the test's flows (`flowlab test --preset` sets one per part).
    spec.traffic = Some(TrafficSpec::parse("preset:videoconf-1998").unwrap());
    spec.flows = 2;
    let r = &run_step(&net, &[flow("a", "b", spec)]).unwrap()[0];
    let parts = &r.client.sender.as_ref().unwrap().flows;
    assert_eq!(parts.len(), 2);
    assert!((14..=15).contains(&parts[0].packets_sent), "{parts:?}");
    assert_eq!(parts[0].bytes_sent, parts[0].packets_sent * 1119);
}

#[test]
fn bulk_tcp_fills_the_bottleneck_without_loss() {
    let net = network("examples/sim/bottleneck.toml");
    let mut spec = udp(1, 256_000, 3_000_000_000);
    (spec.protocol, spec.rate_bps) = (Protocol::Tcp, None);
    let r = &run_step(&net, &[flow("a", "b", spec)]).unwrap()[0];
    let got = receiver(&r.agent);
    // 1460 payload bytes in every 1500 on the wire, once the window is open.
    let g = goodput_bps(got);
    assert!((9.0e6..=10e6 * 1460.0 / 1500.0).contains(&g), "{g}");
    assert!(r.client.notes.iter().any(|n| n.contains("segments")));
}

#[test]
fn the_rfc2544_example_finds_the_bottleneck() {
    let e = flowlab_experiment::load(&example("examples/experiments/lab-bottleneck-rfc2544.toml"))
        .unwrap();
    let net = network("examples/sim/bottleneck.toml");
    let mut search = e.search.as_ref().unwrap().machine(&e).unwrap();
    let mut trials = 0;
    while let Some(trial) = search.next_trial() {
        let step = trial_step(&e, &trial, trials).unwrap();
        let flows: Vec<SimFlow> = step.flows.iter().map(from_plan).collect();
        let r = &run_step(&net, &flows).unwrap()[0];
        let got = receiver(&r.agent);
        search
            .record(&trial, loss(&r.client, got), goodput_bps(got))
            .unwrap();
        trials += 1;
    }
    let flowlab_experiment::SearchMachine::Throughput(t) = search else {
        panic!("an RFC 2544 search");
    };
    // 9.73 Mbit/s of payload fills the link; a trial of 1.5 s just above it fits the queue.
    let found = t.result().rate_bps.unwrap();
    assert!((9_500_000..=9_900_000).contains(&found), "{found}");
}

#[test]
fn the_three_sources_example_shares_the_bottleneck() {
    let text = example("examples/experiments/lab-three-offered-load.toml");
    // The file's plan (the three sources together), without the search that replaces it.
    let e = flowlab_experiment::load(&text[..text.find("[search]").unwrap()]).unwrap();
    let net = network("examples/sim/lab-three.toml");
    let step = &plan(&e)[0];
    assert_eq!(step.flows.len(), 3);
    let flows: Vec<SimFlow> = step.flows.iter().map(from_plan).collect();
    let results = run_step(&net, &flows).unwrap();
    let total: f64 = results
        .iter()
        .map(|r| goodput_bps(receiver(&r.agent)))
        .sum();
    // 18 Mbit/s offered, 9.73 Mbit/s of payload through.
    assert!(
        (total / (10e6 * 1000.0 / 1028.0) - 1.0).abs() < 0.03,
        "{total}"
    );
    // Delivered: 1.5 s at the link's rate and the 64 KiB queue that drains after. (How the
    // three share it is not a figure to trust: sources at equal rates that start together
    // stay in lockstep, and a full queue serves them in a fixed order.)
    let (mut sent, mut got) = (0, 0);
    for r in &results {
        sent += r.client.sender.as_ref().unwrap().packets_sent;
        got += receiver(&r.agent).packets.unique;
    }
    assert_eq!(sent, 3 * 1125);
    let delivered = (10e6 * 1.5 + 65536.0 * 8.0) / (1028.0 * 8.0);
    assert!((got as f64 - delivered).abs() < 3.0, "{got} of {sent}");
}

#[test]
fn what_cannot_be_simulated_is_refused_in_one_line() {
    let net = network("examples/sim/lab-three.toml");
    let mut tcp_rate = udp(1_000_000, 1000, 1_000_000_000);
    tcp_rate.protocol = Protocol::Tcp;
    let mut counted_model = udp(1, 1000, 1);
    (counted_model.duration_ns, counted_model.count) = (None, Some(10));
    counted_model.traffic = Some(TrafficSpec::parse("poisson:pps=10,size=100").unwrap());
    let mut zero = udp(1_000_000, 1000, 1_000_000_000);
    zero.flows = 0;
    for (f, why) in [
        (flow("h1", "nowhere", udp(1, 1000, 1)), "not in the network"),
        (flow("h1", "r", udp(1, 1000, 1)), "a router or switch"),
        (flow("h1", "h1", udp(1, 1000, 1)), "the same node"),
        (flow("h1", "sink", udp(1, 9000, 1)), "above the path MTU"),
        (flow("h1", "sink", tcp_rate), "not simulated"),
        (flow("h1", "sink", counted_model), "give a duration"),
        (flow("h1", "sink", zero), "at least one flow"),
        (
            flow("h1", "sink", udp(100_000_000_000, 1000, 1_000_000_000)),
            "impossible load",
        ),
    ] {
        let e = run_step(&net, &[f]).unwrap_err().to_string();
        assert!(e.contains(why) && !e.contains('\n'), "{why}: {e}");
    }
}

#[test]
fn a_bad_network_file_names_its_line() {
    let base = example("examples/sim/bottleneck.toml");
    let lines = base.lines().count();
    for (extra, at, why) in [
        (
            "[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\n",
            1,
            "[[flow]]: a network file has",
        ),
        ("[hosts]\nclient = \"nowhere\"\n", 2, "is not a host node"),
        ("[sim]\nduration = \"1s\"\n", 1, "[sim]: a network file"),
    ] {
        let e = SimNetwork::load(&format!("{base}{extra}")).unwrap_err();
        assert_eq!(e.line, Some(lines + at), "{e}");
        assert!(e.message.contains(why), "{e}");
    }
    let e = SimNetwork::load(&base.replace("[network]", "[netwrk]")).unwrap_err();
    assert!(e.message.contains("netwrk"), "{e}");
    let e = SimNetwork::load(&base.replace("rate = \"10M\"", "rate = \"0\"")).unwrap_err();
    assert!(e.line.is_some(), "{e}");
    // A scenario is not a network, and a network not a scenario.
    let e = flowlab_sim::load(&base).unwrap_err();
    assert!(e.message.contains("network file"), "{e}");
    let scenario = example("examples/sim/tcp-190ms.toml");
    assert!(SimNetwork::load(&scenario).is_err());
}

#[test]
fn hosts_map_experiment_names_to_nodes() {
    let text = format!(
        "{}[hosts]\nclient = \"a\"\nserver = \"b\"\n",
        example("examples/sim/bottleneck.toml")
    );
    let net = SimNetwork::load(&text).unwrap();
    let r = &run_step(
        &net,
        &[flow("client", "server", udp(1_000_000, 1000, 100_000_000))],
    )
    .unwrap()[0];
    assert_eq!((r.client.host.as_str(), r.agent.host.as_str()), ("a", "b"));
    assert_eq!(receiver(&r.agent).packets.unique, 13);
}

#[test]
fn a_start_spread_moves_the_loss_between_flows_not_the_total() {
    let losses = |spread: &str| {
        let net = SimNetwork::load(&format!(
            "[network]\nstart_spread = \"{spread}\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n\
             [[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\nfrom = \"a\"\nto = \"b\"\n\
             rate = \"10M\"\nbuffer_packets = 20\n"
        ))
        .unwrap();
        let flows = [
            flow("a", "b", udp(6_000_000, 1000, 2_000_000_000)),
            flow("a", "b", udp(8_000_000, 1400, 2_000_000_000)),
        ];
        let r = run_step(&net, &flows).unwrap();
        let got: Vec<u64> = r
            .iter()
            .map(|f| receiver(&f.agent).packets.unique)
            .collect();
        let lost: Vec<f64> = r
            .iter()
            .map(|f| loss(&f.client, receiver(&f.agent)))
            .collect();
        (got, lost)
    };
    let (fixed, spread) = (losses("0s"), losses("300ms"));
    assert_eq!(
        spread,
        losses("300ms"),
        "the step's seed decides the starts"
    );
    assert_ne!(fixed.1, spread.1, "the flows' phases differ");
    // The link carries its rate while both send (at least the 1.7 s after the latest start),
    // whatever the phases.
    for (got, _) in [fixed, spread] {
        let bytes = got[0] as f64 * 1028.0 + got[1] as f64 * 1428.0;
        let full = 10e6 / 8.0 * 2.0 + 20.0 * 1428.0;
        assert!(
            bytes <= full && bytes >= 10e6 / 8.0 * 1.7,
            "{bytes} of {full}"
        );
    }
}

/// PCs `a` and `b` through an ATM switch on ATM25 links.
fn atm25_pair() -> SimNetwork {
    SimNetwork::load(
        "[network]\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"s\"\n\
         kind = \"atm-switch\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\n\
         from = \"a\"\nto = \"s\"\nphy = \"ATM25\"\n[[link]]\nfrom = \"s\"\nto = \"b\"\n\
         phy = \"ATM25\"\n",
    )
    .unwrap()
}

#[test]
fn native_frames_run_as_aal5_frames_and_a_slow_reader_fills_its_buffer() {
    let mut raw = udp(2_000_000, 1000, 1_000_000_000);
    raw.protocol = Protocol::Raw;
    let out = run_step(&atm25_pair(), &[flow("a", "b", raw.clone())]).unwrap();
    let r = receiver(&out[0].agent);
    assert_eq!(r.packets.unique, 250);
    assert_eq!(r.bytes_received, 250_000, "the frames' bytes, no headers");
    assert_eq!(r.socket_buffer_drops, None);
    // A 4000-byte buffer read at 1 Mb/s: half the frames cannot be read in time.
    raw.socket.recv_buffer = Some(4000);
    raw.socket.read_rate_bps = Some(1_000_000);
    let out = run_step(&atm25_pair(), &[flow("a", "b", raw.clone())]).unwrap();
    let r = receiver(&out[0].agent);
    let drops = r.socket_buffer_drops.expect("overflows counted");
    assert!((120..=130).contains(&drops), "{drops}");
    assert!(out[0].client.notes.iter().all(|n| !n.contains("reader")));
    raw.direction = Direction::Loopback;
    let e = run_step(&atm25_pair(), &[flow("a", "b", raw)]).unwrap_err();
    assert!(e.to_string().contains("one-way"), "{e}");
    let mut over_ip = udp(1_000_000, 1000, 1_000_000_000);
    over_ip.protocol = Protocol::Raw;
    let e = run_step(&pair("10M", "1ms"), &[flow("a", "b", over_ip)]).unwrap_err();
    assert!(e.to_string().contains("ATM links"), "{e}");
}
