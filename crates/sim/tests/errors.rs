//! Every kind of bad scenario is refused before running, with the line at fault.

use flowlab_sim::load;

const BASE: &str = r#"[sim]
duration = "1s"
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
"#;

/// Loads BASE + `extra` and returns (line, message).
fn error(extra: &str) -> (usize, String) {
    let text = format!("{BASE}{extra}");
    let e = load(&text).expect_err("should fail");
    (e.line.expect("a line"), e.message)
}

const BASE_LINES: usize = 19;

#[test]
fn base_is_valid() {
    assert!(load(BASE).is_ok());
    assert_eq!(BASE.lines().count(), BASE_LINES);
}

#[test]
fn unknown_node() {
    let (line, msg) =
        error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"nowhere\"\nrate = \"1M\"\n");
    assert_eq!(line, BASE_LINES + 4);
    assert!(msg.contains("unknown node \"nowhere\""), "{msg}");
}

#[test]
fn zero_rate() {
    let (line, msg) = error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"0\"\n");
    assert_eq!(line, BASE_LINES + 5);
    assert!(msg.contains("greater than zero"), "{msg}");
}

#[test]
fn mtu_below_headers() {
    let (line, msg) = error("[[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nmtu = 20\n");
    assert_eq!(line, BASE_LINES + 5);
    assert!(msg.contains("below the 40 bytes"), "{msg}");
}

#[test]
fn scr_above_pcr() {
    let (line, msg) = error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nservice = \"nrt-vbr\"\npcr = \"1M\"\nscr = \"2M\"\n");
    assert_eq!(line, BASE_LINES + 8);
    assert!(msg.contains("above pcr"), "{msg}");
}

#[test]
fn routing_loop_and_no_path() {
    let (line, msg) = error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\npath = [\"a\", \"s\", \"a\", \"b\"]\n");
    assert_eq!(line, BASE_LINES + 6);
    assert!(msg.contains("routing loop"), "{msg}");
    let (line, msg) = error("[[node]]\nname = \"c\"\nkind = \"host\"\n[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"c\"\nrate = \"1M\"\n");
    assert_eq!(line, BASE_LINES + 4);
    assert!(msg.contains("no path"), "{msg}");
}

#[test]
fn unknown_key() {
    let (line, msg) =
        error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nsped = 3\n");
    assert_eq!(line, BASE_LINES + 6);
    assert!(msg.contains("sped"), "{msg}");
}

#[test]
fn sweep_errors_point_at_the_value() {
    let text = format!("{BASE}[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\n[sweep]\nparam = \"flow.f.rate\"\nvalues = [\"1M\", \"0\"]\n");
    let e = load(&text).unwrap_err();
    assert_eq!(e.line, Some(BASE_LINES + 5));
    assert!(e.message.contains("sweep value 0"), "{}", e.message);
    let shown = e.with_file("x.toml").to_string();
    assert!(
        shown.starts_with(&format!("x.toml:{}: ", BASE_LINES + 5)),
        "{shown}"
    );
}

#[test]
fn display_without_file() {
    let e = load("[sim]\nduration = \"fast\"\n").unwrap_err();
    assert!(e.to_string().starts_with("line 2: duration"), "{e}");
}

/// Loads BASE + `extra` expecting an error mentioning `want`, in well under a second: a load
/// that simulated instead of refusing would hang here.
fn capped(extra: &str, want: &str) -> (usize, String) {
    let t0 = std::time::Instant::now();
    let text = format!("{BASE}{extra}");
    let e = load(&text).expect_err("should be refused");
    assert!(t0.elapsed().as_secs_f64() < 2.0, "took {:?}", t0.elapsed());
    assert!(
        e.message.contains(want),
        "{} should mention {want}",
        e.message
    );
    assert!(!e.to_string().contains('\n'));
    (e.line.expect("a line"), e.message)
}

const UDP: &str = "[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\n";

#[test]
fn impossible_load_is_refused_not_simulated() {
    let (line, msg) = capped(&format!("{UDP}rate = \"100G\"\n"), "more than 10×");
    assert_eq!(line, BASE_LINES + 5);
    assert!(msg.contains("flow f offers 100000000000 bit/s"), "{msg}");
    assert!(msg.contains("link a-s"), "{msg}");
    // Two flows that are each possible, but not together.
    let two = format!(
        "{UDP}rate = \"1G\"\n[[flow]]\nname = \"g\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1G\"\n"
    );
    let (line, _) = capped(&two, "flows f, g offer 2000000000 bit/s together");
    assert_eq!(line, BASE_LINES + 10);
    // Pings every nanosecond are a load too.
    let ping = format!("{UDP}protocol = \"ping\"\ninterval = \"1ns\"\n");
    capped(&ping, "more than 10×");
}

#[test]
fn a_plain_overload_still_loads() {
    // 2× the OC-3c, policed: the kind of overload the papers study.
    let text = format!(
        "{BASE}{UDP}rate = \"300M\"\nservice = \"cbr\"\npcr = \"100M\"\npolice = \"drop\"\n"
    );
    assert!(load(&text).is_ok());
}

#[test]
fn packet_budget_is_checked_before_running() {
    let long = BASE.replace("duration = \"1s\"", "duration = \"20000s\"");
    let text = format!("{long}{UDP}rate = \"1G\"\n");
    let e = load(&text).expect_err("over the budget");
    assert!(
        e.message.contains("more than the limit of 200000000"),
        "{}",
        e.message
    );
    assert!(e.message.contains("flow f: 2500000000"), "{}", e.message);
    assert_eq!(e.line, Some(BASE_LINES + 1));
}

#[test]
fn duration_sweep_and_tables_are_capped() {
    let long = BASE.replace("duration = \"1s\"", "duration = \"25h\"");
    let e = load(&long).expect_err("too long");
    assert_eq!(e.line, Some(2));
    assert!(
        e.message.contains("more than the limit of 86400 s"),
        "{}",
        e.message
    );
    let values: Vec<String> = (1..=200_000).map(|i| format!("\"{i}k\"")).collect();
    let sweep = format!(
        "{UDP}rate = \"1M\"\n[sweep]\nparam = \"flow.f.rate\"\nvalues = [{}]\n",
        values.join(",")
    );
    let (line, _) = capped(&sweep, "200000 values, more than the limit of 1000 runs");
    assert_eq!(line, BASE_LINES + 8);
    let nodes: String = (0..1001)
        .map(|i| format!("[[node]]\nname = \"n{i}\"\nkind = \"host\"\n"))
        .collect();
    capped(&nodes, "more than 1000 [[node]] tables");
}

#[test]
fn traffic_models_are_checked_where_they_are_given() {
    let flow = |extra: &str| format!("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\n{extra}");
    for (extra, at, what) in [
        (
            "traffic = \"poisson:pps=oops\"\n",
            5,
            "traffic: poisson option 'pps'",
        ),
        ("traffic = \"no-such-preset\"\n", 5, "unknown traffic kind"),
        (
            "traffic = \"rr:request=64,response=1k\"\n",
            5,
            "not simulated",
        ),
        ("traffic = \"trace:calls.txt\"\n", 5, "reads no files"),
        (
            "traffic = \"voip-g711\"\nrate = \"1M\"\n",
            6,
            "rate: a traffic model sets its own",
        ),
        (
            "traffic = \"voip-g711\"\nsize = 100\n",
            6,
            "size: a traffic model sets its own",
        ),
        (
            "traffic = \"voip-g711\"\nprotocol = \"tcp\"\n",
            5,
            "runs over udp",
        ),
    ] {
        let (line, msg) = error(&flow(extra));
        assert_eq!(
            (line, msg.contains(what)),
            (BASE_LINES + at, true),
            "{extra}: {msg}"
        );
    }
    assert!(load(&format!("{BASE}{}", flow("traffic = \"voip-g711\"\n"))).is_ok());
}

#[test]
fn a_model_that_overloads_its_first_link_is_refused() {
    // 20 Gbit/s of 1200-byte datagrams against an OC-3c.
    let (line, msg) =
        error("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\ntraffic = \"poisson:pps=2000000,size=1200\"\n");
    assert_eq!(line, BASE_LINES + 5);
    assert!(
        msg.contains("flow f offers") && msg.contains("impossible load"),
        "{msg}"
    );
}

#[test]
fn sweep_values_may_be_ranges_in_the_keys_unit() {
    let text = format!(
        "{BASE}{UDP}rate = \"1M\"\n[sweep]\nparam = \"flow.f.rate\"\nvalues = [\"1M..3M:1M\", \"10M\"]\n"
    );
    assert_eq!(load(&text).unwrap().runs(), 4);
    let bad = text.replace("1M..3M:1M", "3M..1M:1M");
    let e = load(&bad).unwrap_err();
    assert_eq!(e.line, Some(BASE_LINES + 8));
    assert!(e.message.contains("START <= END"), "{}", e.message);
    // Text keys have no unit: a value with ".." is one value.
    let text_key = format!(
        "{BASE}{UDP}rate = \"1M\"\nservice = \"ubr\"\n[sweep]\nparam = \"flow.f.service\"\nvalues = [\"cbr..ubr:1\"]\n"
    );
    let e = load(&text_key).unwrap_err();
    assert_eq!(e.line, Some(BASE_LINES + 6));
    assert!(e.message.contains("\"cbr..ubr:1\""), "{}", e.message);
}

#[test]
fn unknown_sections_keys_and_bad_sweep_params_are_named() {
    let e = load(&format!("{BASE}[sweeep]\n")).unwrap_err();
    assert_eq!(e.line, Some(BASE_LINES + 1));
    assert!(
        e.message.starts_with("unknown section 'sweeep'"),
        "{}",
        e.message
    );
    let (line, msg) = error(&format!(
        "{UDP}rate = \"1M\"\n[sweep]\nparam = \"flow.g.rate\"\nvalues = [1]\n"
    ));
    assert_eq!(line, BASE_LINES + 7);
    assert_eq!(msg, "sweep: no [[flow]] named g");
    let (line, msg) = error("[[node]]\nname = \"c\"\nkind = \"hub\"\n");
    assert_eq!(line, BASE_LINES + 3);
    assert!(
        msg.contains("'hub' is not host, atm-switch, ip-router or router"),
        "{msg}"
    );
}

#[test]
fn a_sweep_may_set_several_keys_to_each_value() {
    let two = "[[flow]]\nname = \"g\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\n";
    let text = format!(
        "{BASE}{UDP}rate = \"1M\"\n{two}[sweep]\nparam = [\"flow.f.rate\", \"flow.g.rate\"]\nvalues = [\"2M\", \"4M\"]\n"
    );
    let report = flowlab_sim::run(&load(&text).unwrap(), None);
    assert_eq!(report.runs.len(), 2);
    for (run, mbps) in report.runs.iter().zip([2.0, 4.0]) {
        let sweep = run.sweep.as_ref().unwrap();
        assert_eq!(sweep.param, "flow.f.rate,flow.g.rate");
        for f in &run.flows {
            let got = f.throughput_bps / 1e6;
            assert!((got - mbps).abs() < 0.05 * mbps, "{}: {got}", f.name);
        }
    }
    let (line, msg) = error(&format!(
        "{UDP}rate = \"1M\"\nsize = 100\n[sweep]\nparam = [\"flow.f.rate\", \"flow.f.size\"]\nvalues = [1]\n"
    ));
    assert_eq!(line, BASE_LINES + 8);
    assert_eq!(
        msg,
        "sweep: flow.f.rate and flow.f.size take different units"
    );
    let (line, msg) = error(&format!(
        "{UDP}rate = \"1M\"\n[sweep]\nparam = []\nvalues = [1]\n"
    ));
    assert_eq!(line, BASE_LINES + 7);
    assert_eq!(msg, "sweep: param: expected a key or a list of keys");
}

#[test]
fn socket_keys_belong_to_a_datagram_flow_with_a_buffer() {
    let flow = |keys: &str| format!("[[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\n{keys}\n");
    let line = BASE_LINES + 5;
    for (keys, want) in [
        (
            "protocol = \"tcp\"\nrecv_buffer = 4096",
            "models a udp or raw flow's socket",
        ),
        ("rate = \"1M\"\nread_rate = \"1M\"", "needs recv_buffer"),
        (
            "rate = \"1M\"\nrecv_buffer = 4096\nread_rate_from = \"1s\"",
            "read_rate_from: needs read_rate",
        ),
        ("rate = \"1M\"\nrecv_buffer = 0", "must be above 0"),
        (
            "protocol = \"raw\"\nrate = \"1M\"\nsize = 0",
            "must be above 0",
        ),
    ] {
        let (at, message) = error(&flow(keys));
        assert!(message.contains(want), "{keys}: {message}");
        assert!(at >= line && at <= line + 2, "{keys}: line {at}");
    }
}
