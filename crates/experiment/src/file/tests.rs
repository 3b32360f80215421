use super::point::normalise_address;
use super::*;
use flowlab_spec::{Direction, Protocol};
use flowlab_traffic::PacingMode;
use proptest::prelude::*;

const BASE: &str = r#"
[experiment]
name = "t"
seed = 7

[vars]
a1 = "10.0.0.1"

[[host]]
name = "h1"
address = "${a1}"

[[host]]
name = "h2"
address = "[fd00::2]:9000"

[[flow]]
name = "f1"
from = "h1"
to = "h2"
rate = "2M"
size = "500B"
duration = "5s"
"#;

fn err_of(text: &str) -> ExperimentError {
    match load(text) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e,
    }
}

/// The line of the first occurrence of `needle`.
fn line_with(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap()].matches('\n').count() + 1
}

#[test]
fn a_tcp_preset_runs_over_tcp_unless_the_file_says_udp() {
    let tcp = BASE.replacen("rate = \"2M\"", "traffic = \"preset:aquila-flow3\"", 1);
    let e = load(&tcp).unwrap();
    assert_eq!(e.points[0].flow("f1").unwrap().spec.protocol, Protocol::Tcp);
    let udp = tcp.replacen("duration", "protocol = \"udp\"\nduration", 1);
    let e = load(&udp).unwrap();
    assert_eq!(e.points[0].flow("f1").unwrap().spec.protocol, Protocol::Udp);
    let voip = BASE.replacen("rate = \"2M\"", "traffic = \"preset:aquila-flow1\"", 1);
    let e = load(&voip).unwrap();
    assert_eq!(e.points[0].flow("f1").unwrap().spec.protocol, Protocol::Udp);
}

#[test]
fn loads_a_minimal_file() {
    let e = load(BASE).unwrap();
    assert_eq!(e.name, "t");
    assert_eq!(e.seed, 7);
    assert_eq!(e.repeat, 1);
    assert_eq!(e.points.len(), 1);
    let p = &e.points[0];
    assert_eq!(p.host("h1").unwrap().address, "10.0.0.1:9470");
    assert_eq!(p.host("h2").unwrap().address, "[fd00::2]:9000");
    let f = p.flow("f1").unwrap();
    assert_eq!(f.spec.rate_bps, Some(2_000_000));
    assert_eq!(f.spec.size, 500);
    assert_eq!(f.spec.duration_ns, Some(5_000_000_000));
    assert_eq!(f.spec.protocol, Protocol::Udp);
    assert_eq!(f.spec.direction, Direction::Oneway);
    assert_eq!(e.plan.kind, BlockKind::Parallel);
}

#[test]
fn errors_name_the_line() {
    let cases: &[(&str, &str, &str)] = &[
        ("to = \"h2\"", "to = \"h9\"", "unknown host 'h9'"),
        ("rate = \"2M\"", "rate = \"2Q\"", "invalid rate"),
        ("size = \"500B\"", "size = \"10B\"", "below the 32-byte probe header"),
        (
            "duration = \"5s\"",
            "duration = \"5 parsecs\"",
            "invalid duration",
        ),
        (
            "rate = \"2M\"",
            "rate = \"2M\"\ntraffic = \"poisson:pps=oops\"",
            "traffic",
        ),
        (
            "rate = \"2M\"",
            "rate = \"2M\"\nmode = \"sideways\"",
            "not oneway",
        ),
        (
            "rate = \"2M\"",
            "rate = \"2M\"\ncolour = \"red\"",
            "unknown key 'colour'",
        ),
        (
            "address = \"${a1}\"",
            "address = \"${a9}\"",
            "unknown variable 'a9'",
        ),
        (
            "address = \"${a1}\"",
            "address = \"10.0.0.1:99999\"",
            "not HOST[:PORT]",
        ),
        ("rate = \"2M\"", "rate = \"2M\"\ndscp = \"af99\"", "dscp"),
        (
            "rate = \"2M\"",
            "rate = \"2M\"\ntraffic = \"rr:request=64,response=1k\"",
            "flowlab test",
        ),
        (
            "rate = \"2M\"",
            "rate = \"2M\"\nmode = \"loopback\"\nprotocol = \"tcp\"\ntraffic = \"poisson:pps=10,size=100\"",
            "one-way or reverse",
        ),
    ];
    for (from, to, want) in cases {
        let text = BASE.replacen(from, to, 1);
        let e = err_of(&text);
        let needle = to.lines().last().unwrap();
        assert_eq!(e.line, Some(line_with(&text, needle)), "{e} for {to}");
        assert!(e.message.contains(want), "{e} should mention {want}");
        assert!(!e.to_string().contains('\n'));
    }
}

#[test]
fn duplicates_and_missing_sections() {
    let dup = format!("{BASE}\n[[flow]]\nname = \"f1\"\nfrom = \"h1\"\nto = \"h2\"\n");
    let e = err_of(&dup);
    assert!(e.message.contains("defined twice"), "{e}");
    assert_eq!(e.line, Some(dup.lines().count() - 3));
    let dup_host = BASE.replace("name = \"h2\"", "name = \"h1\"");
    assert!(err_of(&dup_host)
        .message
        .contains("host 'h1' is defined twice"));
    assert!(err_of("[experiment]\nname = \"x\"\n")
        .message
        .contains("no [[flow]]"));
    assert!(err_of("[[flow]]\nname = \"x\"\n")
        .message
        .contains("[experiment]"));
    let e = err_of("[experiment]\nname = \"x\"\n[wat]\n");
    assert_eq!(e.line, Some(3));
    let e = err_of("[experiment\nname = 1");
    assert_eq!(e.line, Some(1));
}

#[test]
fn plans_blocks_and_detects_cycles() {
    let text = format!(
        "{BASE}\n[[flow]]\nname = \"f2\"\nfrom = \"h2\"\nto = \"h1\"\nduration = \"1s\"\n\
         [plan]\nserial = [\"a\", {{ parallel = [\"f1\", \"f2\"], repeat = 2 }}]\n\
         [[plan.block]]\nname = \"a\"\nserial = [\"f1\", \"f2\"]\nstart = \"1s\"\n"
    );
    let e = load(&text).unwrap();
    assert_eq!(e.plan.items.len(), 2);
    let cyc = format!(
        "{BASE}\n[plan]\nserial = [\"a\"]\n[[plan.block]]\nname = \"a\"\nserial = [\"b\"]\n\
         [[plan.block]]\nname = \"b\"\nparallel = [\"f1\", \"a\"]\n"
    );
    let err = err_of(&cyc);
    assert!(err.message.contains("cycle: a -> b -> a"), "{err}");
    assert_eq!(
        err.line,
        Some(line_with(&cyc, "parallel = [\"f1\", \"a\"]"))
    );
    let unknown = format!("{BASE}\n[plan]\nserial = [\"f1\", \"nope\"]\n");
    let err = err_of(&unknown);
    assert!(err.message.contains("'nope' is neither"));
    assert_eq!(err.line, Some(line_with(&unknown, "serial = [")));
    let both = format!("{BASE}\n[plan]\nserial = [\"f1\"]\nparallel = [\"f1\"]\n");
    assert!(err_of(&both).message.contains("not both"));
}

#[test]
fn sweeps_expand_and_validate_every_point() {
    let text = format!(
        "{BASE}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1M..3M:1M\"\n\
         [[sweep]]\nparam = \"flow.f1.size\"\nvalues = [100, \"1KiB\"]\n"
    );
    let e = load(&text).unwrap();
    assert_eq!(e.points.len(), 6);
    let rates: Vec<_> = e
        .points
        .iter()
        .map(|p| p.flows[0].spec.rate_bps.unwrap())
        .collect();
    assert_eq!(rates, [1, 1, 2, 2, 3, 3].map(|x| x * 1_000_000));
    assert_eq!(e.points[1].flows[0].spec.size, 1024);
    assert_eq!(
        e.points[1].labels,
        vec![
            ("flow.f1.rate".to_string(), "1000000".to_string()),
            ("flow.f1.size".to_string(), "1KiB".to_string())
        ]
    );
    // A bad value in the last point is found at load, at its own line.
    let bad = format!("{BASE}\n[[sweep]]\nparam = \"flow.f1.size\"\nvalues = [100,\n  \"7B\"]\n");
    let err = err_of(&bad);
    assert_eq!(err.line, Some(line_with(&bad, "\"7B\"")));
    assert!(err.message.contains("sweep point"), "{err}");
    let var =
        format!("{BASE}\n[[sweep]]\nparam = \"vars.a1\"\nvalues = [\"10.0.0.5\", \"10.0.0.6\"]\n");
    let e = load(&var).unwrap();
    assert_eq!(e.points[1].hosts[0].address, "10.0.0.6:9470");
    for (param, want) in [
        ("flow.zz.rate", "unknown flow"),
        ("vars.zz", "unknown variable"),
        ("flow.f1.colour", "not a flow parameter"),
        ("whatever", "is not flow.NAME.KEY"),
    ] {
        let t = format!("{BASE}\n[[sweep]]\nparam = \"{param}\"\nvalues = [1]\n");
        assert!(err_of(&t).message.contains(want), "{param}");
    }
    let huge = format!("{BASE}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1..1G:1\"\n");
    assert!(err_of(&huge).message.contains("more than"));
}

#[test]
fn searches_are_validated() {
    let s = format!(
        "{BASE}\n[search]\nkind = \"rfc2544-throughput\"\nflow = \"f1\"\nmax = \"100M\"\n\
         resolution = \"100k\"\ntrial = \"2s\"\n"
    );
    let e = load(&s).unwrap();
    let sp = e.search.unwrap();
    assert_eq!(sp.trial_ns, Some(2_000_000_000));
    assert!(matches!(
        sp.kind,
        SearchKind::Rfc2544Throughput {
            max_bps: 100_000_000,
            ..
        }
    ));
    let bad = s.replace("rfc2544-throughput", "fastest");
    assert!(err_of(&bad).message.contains("is not rfc2544"));
    let nof = s.replace("flow = \"f1\"", "flow = \"f9\"");
    assert!(err_of(&nof).message.contains("unknown flow 'f9'"));
    let with_sweep = format!("{s}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = [1]\n");
    assert!(err_of(&with_sweep).message.contains("cannot also have"));
}

/// Loads `text`, expecting an error that names `want` at the line of `needle`, in well
/// under a second: a cap checked after expanding would hang here instead.
fn assert_capped(text: &str, needle: &str, want: &str) {
    let t0 = std::time::Instant::now();
    let e = err_of(text);
    assert!(
        t0.elapsed().as_secs_f64() < 2.0,
        "{e}: took {:?}",
        t0.elapsed()
    );
    assert!(e.message.contains(want), "{e} should mention {want}");
    assert_eq!(e.line, Some(line_with(text, needle)), "{e}");
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn repeats_are_capped() {
    let huge = BASE.replace("seed = 7", "seed = 7\nrepeat = 4000000000");
    assert_capped(&huge, "repeat =", "4000000000 is above the limit of 10000");
    let block = format!("{BASE}\n[plan]\nserial = [\"f1\"]\nrepeat = 20000\n");
    assert_capped(&block, "repeat = 20000", "above the limit of 10000");
    let sockets = BASE.replace("size = \"500B\"", "size = \"500B\"\nflows = 5000");
    assert_capped(&sockets, "flows = 5000", "above the limit of 1024");
}

#[test]
fn sweep_values_are_counted_before_expanding() {
    let many: Vec<String> = (0..200_000).map(|i| i.to_string()).collect();
    let literal = format!(
        "{BASE}\n[[sweep]]\nparam = \"flow.f1.size\"\nvalues = [{}]\n",
        many.join(",")
    );
    assert_capped(
        &literal,
        "param = ",
        "200000 points, more than the limit of 10000",
    );
    let ranges = format!(
        "{BASE}\n[[sweep]]\nparam = \"flow.f1.size\"\nvalues = [\"100..9000:1\", \"100..9000:1\"]\n"
    );
    assert_capped(&ranges, "param = ", "17802 points");
    let nested = format!(
        "{BASE}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1M..100M:1M\"\n\
         [[sweep]]\nparam = \"flow.f1.size\"\nvalues = \"100..199:1\"\n\
         [[sweep]]\nparam = \"flow.f1.duration\"\nvalues = \"1s..100s:1s\"\n"
    );
    assert_capped(&nested, "param = ", "1000000 points");
}

#[test]
fn steps_and_flow_runs_are_capped_as_products() {
    let steps = format!(
        "{}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1M..20M:1M\"\n",
        BASE.replace("seed = 7", "seed = 7\nrepeat = 10000")
            .replace("duration = \"5s\"", "duration = \"10ms\"")
    );
    assert_capped(
        &steps,
        "repeat = 10000",
        "= 200000 steps, more than the limit of 100000",
    );
    let runs = format!(
        "{}\n[plan]\nparallel = [{}]\n",
        BASE.replace("seed = 7", "seed = 7\nrepeat = 10000")
            .replace("duration = \"5s\"", "duration = \"1s\""),
        vec!["\"f1\""; 30].join(", ")
    );
    assert_capped(&runs, "repeat = 10000", "300000 flow runs");
    let wide = format!("{BASE}\n[plan]\nparallel = [{{ serial = [\"f1\"], repeat = 2000 }}]\n");
    assert_capped(&wide, "[plan]", "starts 2000 flows together");
}

#[test]
fn named_blocks_cannot_multiply_without_bound() {
    let mut text = format!("{BASE}\n[plan]\nserial = [\"b0\"]\n");
    for i in 0..40 {
        let next = i + 1;
        text.push_str(&format!(
            "[[plan.block]]\nname = \"b{i}\"\nserial = [\"b{next}\", \"b{next}\"]\n"
        ));
    }
    text.push_str("[[plan.block]]\nname = \"b40\"\nserial = [\"f1\"]\n");
    let e = err_of(&text);
    assert!(e.message.contains("more than 100000 items"), "{e}");
}

#[test]
fn planned_time_and_definitions_are_capped() {
    let long = BASE.replace("duration = \"5s\"", "duration = \"25h\"");
    assert_capped(&long, "[[flow]]", "25.0 h in all");
    let rep = BASE
        .replace("seed = 7", "seed = 7\nrepeat = 9000")
        .replace("duration = \"5s\"", "duration = \"10s\"");
    assert_capped(&rep, "repeat = 9000", "25.0 h in all");
    let mut hosts = BASE.to_string();
    for i in 0..1001 {
        hosts.push_str(&format!("[[host]]\nname = \"x{i}\"\naddress = \"h{i}\"\n"));
    }
    assert_capped(
        &hosts,
        "[[host]]\nname = \"x998\"",
        "more than 1000 [[host]] tables",
    );
}

#[test]
fn search_trials_are_capped() {
    let search = |body: &str| format!("{BASE}\n[search]\nflow = \"f1\"\n{body}\n");
    let b2b =
        search("kind = \"rfc2544-back-to-back\"\nrate = \"1G\"\nmax = 100000\nrepeat = 10000");
    assert_capped(
        &b2b,
        "[search]",
        "190000 trials, more than the limit of 10000",
    );
    let loss = search("kind = \"rfc2544-loss\"\nmax = \"1G\"\nstep = 0.001");
    assert_capped(&loss, "[search]", "100002 trials");
    let long = search("kind = \"rfc2544-throughput\"\nmax = \"1G\"\ntrial = \"10h\"");
    assert_capped(&long, "[search]", "more than the limit of 24.0 h");
    let loads = search(&format!(
        "kind = \"offered-load\"\nloads = [{}]",
        vec!["\"1..100:1\""; 101].join(", ")
    ));
    assert_capped(
        &loads,
        "loads = ",
        "10100 values, more than the limit of 10000",
    );
}

#[test]
fn the_examples_load() {
    for (name, text) in [
        (
            "three-sources",
            include_str!("../../../../examples/experiments/three-sources.toml"),
        ),
        (
            "five-pairs",
            include_str!("../../../../examples/experiments/five-pairs.toml"),
        ),
        (
            "burst-size",
            include_str!("../../../../examples/experiments/burst-size.toml"),
        ),
        // Every example stays within the caps of crate::limits.
        (
            "aquila-mix",
            include_str!("../../../../examples/experiments/aquila-mix.toml"),
        ),
        (
            "lab-bottleneck-rfc2544",
            include_str!("../../../../examples/experiments/lab-bottleneck-rfc2544.toml"),
        ),
        (
            "lab-three-offered-load",
            include_str!("../../../../examples/experiments/lab-three-offered-load.toml"),
        ),
        (
            "lab-three-parallel",
            include_str!("../../../../examples/experiments/lab-three-parallel.toml"),
        ),
    ] {
        let e = load(text).unwrap_or_else(|err| panic!("{name}: {err}"));
        assert_eq!(e.name, name);
    }
}

#[test]
fn addresses_normalise() {
    assert_eq!(normalise_address("h").unwrap(), "h:9470");
    assert_eq!(normalise_address("h:1").unwrap(), "h:1");
    assert_eq!(normalise_address("fd00::1").unwrap(), "[fd00::1]:9470");
    assert_eq!(normalise_address("[fd00::1]").unwrap(), "[fd00::1]:9470");
    for bad in [
        "", "a b", "h:", ":1", "h:0", "[x", "[]:1", "a:b:c", "[::1]x",
    ] {
        assert!(normalise_address(bad).is_err(), "{bad}");
    }
}

proptest! {
    /// Whatever the text, loading returns (never panics), and errors are one line.
    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
        if let Err(e) = load(&s) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }

    /// Mutating the base file anywhere never panics.
    #[test]
    fn mutated_files_never_panic(pos in 0usize..400, junk in "[\\[\\]{}=\",.$a-z0-9 \n]{0,8}") {
        let mut t = BASE.to_string();
        let p = pos.min(t.len());
        if t.is_char_boundary(p) {
            t.insert_str(p, &junk);
        }
        if let Err(e) = load(&t) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }
}

/// A flow's table, given `keys`, between the hosts of BASE.
fn one_flow(keys: &str) -> String {
    let hosts = &BASE[..BASE.find("[[flow]]").unwrap()];
    format!("{hosts}[[flow]]\nname = \"f\"\nfrom = \"h1\"\nto = \"h2\"\n{keys}\n")
}

#[test]
fn flows_left_at_defaults_are_the_cli_defaults() {
    let udp = load(&one_flow("")).unwrap();
    let spec = &udp.points[0].flow("f").unwrap().spec;
    assert_eq!(*spec, TestSpec::new(Protocol::Udp, Direction::Oneway));
    assert_eq!((spec.rate_bps, spec.size), (Some(1_000_000), 1200));
    let tcp = load(&one_flow("protocol = \"tcp\"\nmode = \"reverse\"")).unwrap();
    let spec = &tcp.points[0].flow("f").unwrap().spec;
    assert_eq!(*spec, TestSpec::new(Protocol::Tcp, Direction::Reverse));
    assert_eq!((spec.rate_bps, spec.size), (None, 256_000));
    // A count alone ends the flow, as `flowlab test --count` does.
    let counted = load(&one_flow("count = 100")).unwrap();
    let spec = &counted.points[0].flow("f").unwrap().spec;
    assert_eq!((spec.count, spec.duration_ns), (Some(100), None));
}

#[test]
fn every_flow_key_maps_into_the_test_spec() {
    let text = one_flow(
        "protocol = \"tcp\"\nmode = \"loopback\"\nrate = \"5M\"\nsize = \"1KiB\"\n\
         duration = \"3s\"\ncount = \"2k\"\ninterval = \"1s\"\ndscp = \"ef\"\nflows = 4\n\
         start = \"250ms\"\ncongestion = \"reno\"\nsend_buffer = \"64KiB\"\nrecv_buffer = 1000\n\
         mss = 1000\nwindow_clamp = \"140000B\"",
    );
    let e = load(&text).unwrap();
    let f = e.points[0].flow("f").unwrap();
    let mut want = TestSpec::new(Protocol::Tcp, Direction::Loopback);
    want.rate_bps = Some(5_000_000);
    want.size = 1024;
    want.duration_ns = Some(3_000_000_000);
    want.count = Some(2000);
    want.interval_ns = Some(1_000_000_000);
    want.flows = 4;
    want.socket.dscp = Some(46);
    want.socket.congestion = Some("reno".into());
    want.socket.send_buffer = Some(65536);
    want.socket.recv_buffer = Some(1000);
    want.socket.mss = Some(1000);
    want.socket.window_clamp = Some(140_000);
    assert_eq!(f.spec, want);
    assert_eq!(
        (f.from.as_str(), f.to.as_str(), f.start_ns),
        ("h1", "h2", 250_000_000)
    );
    let frames = load(&one_flow("packet_socket = true")).unwrap();
    assert!(
        frames.points[0]
            .flow("f")
            .unwrap()
            .spec
            .socket
            .packet_socket
    );
    let traffic = load(&one_flow("traffic = \"poisson:pps=10,size=100\"")).unwrap();
    assert!(traffic.points[0].flow("f").unwrap().spec.traffic.is_some());
    let echoed = load(&one_flow("echo_every = 10")).unwrap();
    assert_eq!(
        echoed.points[0].flow("f").unwrap().spec.echo_every,
        Some(10)
    );
}

/// `pacing` is a flow key, and sweeps like any other.
#[test]
fn pacing_is_a_flow_key_and_sweeps() {
    let text = format!(
        "{BASE}\n[[sweep]]\nparam = \"flow.f1.pacing\"\n\
         values = [\"precise\", \"efficient\", \"auto\"]\n"
    );
    let e = load(&text).unwrap();
    let modes: Vec<_> = e.points.iter().map(|p| p.flows[0].spec.pacing).collect();
    assert_eq!(modes, PacingMode::ALL);
    let example = include_str!("../../../../examples/experiments/pacing-modes.toml");
    let e = load(example).unwrap();
    let modes: Vec<_> = e.points.iter().map(|p| p.flows[0].spec.pacing).collect();
    assert_eq!(modes, PacingMode::ALL, "docs' example");
    let f = load(&one_flow("pacing = \"efficient\"")).unwrap();
    assert_eq!(
        f.points[0].flow("f").unwrap().spec.pacing,
        PacingMode::Efficient
    );
}

#[test]
fn refusals_of_test_spec_validate_name_the_key_at_fault() {
    for (keys, needle, want) in [
        (
            "rate = \"2M\"\ninterval = \"1ms\"",
            "interval",
            "interval must be at least 10 ms",
        ),
        (
            "duration = \"200h\"",
            "duration",
            "exceeds the longest test",
        ),
        (
            "send_buffer = \"2GiB\"",
            "send_buffer",
            "send buffer exceeds the largest",
        ),
        (
            "recv_buffer = 0",
            "recv_buffer",
            "a receive buffer is at least 1 B",
        ),
        (
            "protocol = \"tcp\"\nwindow_clamp = 0",
            "window_clamp",
            "a window clamp is at least 1 B",
        ),
        (
            "protocol = \"tcp\"\nmss = 40",
            "mss",
            "a TCP MSS is 88..=65535 B",
        ),
        (
            "congestion = \"no such thing\"",
            "congestion",
            "not a congestion control name",
        ),
        (
            "protocol = \"tcp\"\npacket_socket = true",
            "packet_socket",
            "--packet-socket sends UDP datagrams only",
        ),
        (
            "mode = \"loopback\"\necho_every = 10",
            "echo_every",
            "echo-every measures RTT inside a one-way UDP load",
        ),
        (
            "protocol = \"tcp\"\nsize = \"100MB\"",
            "size =",
            "exceeds the TCP message maximum",
        ),
        (
            "rate = \"max\"\npacing = \"precise\"",
            "pacing",
            "pacing precise needs a paced test",
        ),
        (
            "pacing = \"lazy\"",
            "pacing",
            "expected precise, efficient or auto",
        ),
    ] {
        let text = one_flow(keys);
        let e = err_of(&text);
        assert_eq!(e.line, Some(line_with(&text, needle)), "{e}");
        assert!(e.message.starts_with("flow 'f' "), "{e}");
        assert!(e.message.contains(want), "{e} should mention {want}");
    }
}

#[test]
fn an_icmp_flow_is_a_round_trip_of_one_request_a_second_unless_paced() {
    let icmp = load(&one_flow(
        "protocol = \"icmp\"\nsize = \"1000B\"\ncount = 10",
    ))
    .unwrap();
    let spec = &icmp.points[0].flow("f").unwrap().spec;
    assert_eq!(
        (spec.protocol, spec.direction, spec.size),
        (Protocol::Icmp, Direction::Loopback, 1000)
    );
    assert_eq!(spec.packet_interval_ns(), Some(1_000_000_000));
    let paced = load(&one_flow(
        "protocol = \"icmp\"\nsize = \"64B\"\nrate = \"51.2k\"",
    ))
    .unwrap();
    let spec = &paced.points[0].flow("f").unwrap().spec;
    assert_eq!(spec.packet_interval_ns(), Some(10_000_000));
    let reverse = load(&one_flow("protocol = \"icmp\"\nmode = \"reverse\"")).unwrap_err();
    assert!(
        reverse.to_string().contains("an echo is a round trip"),
        "{reverse}"
    );
}
