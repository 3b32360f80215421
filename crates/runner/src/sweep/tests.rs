use super::*;
use flowlab_spec::{Direction, Protocol, SocketOptions};

fn values(axis: &Axis) -> Vec<Value> {
    axis.values.iter().map(|(_, j)| j.clone()).collect()
}

#[test]
fn parses_ranges_and_lists() {
    let a = parse_vary("size=100..500:100").unwrap();
    assert_eq!(a.param, Param::Size);
    assert_eq!(
        values(&a),
        vec![json!(100), json!(200), json!(300), json!(400), json!(500)]
    );
    assert_eq!(a.values[1].0, ParamValue::Bytes(200));
    let a = parse_vary("size=100..8000:100").unwrap();
    assert_eq!(
        (a.values.len(), values(&a).last().cloned()),
        (80, Some(json!(8000)))
    );
    let a = parse_vary("size=64KiB,1500B").unwrap();
    assert_eq!(values(&a), vec![json!(65536), json!(1500)]);
    let a = parse_vary("rate=1M..3M:1M").unwrap();
    assert_eq!(
        values(&a),
        vec![json!(1_000_000), json!(2_000_000), json!(3_000_000)]
    );
    let a = parse_vary("duration=500ms,1.5s,2s").unwrap();
    assert_eq!(values(&a), vec![json!(0.5), json!(1.5), json!(2)]);
    assert_eq!(a.values[0].0, ParamValue::Duration(500_000_000));
    let a = parse_vary("protocol=UDP,tcp").unwrap();
    assert_eq!(a.param, Param::Protocol);
    assert_eq!(values(&a), vec![json!("udp"), json!("tcp")]);
    assert_eq!(a.values[1].0, ParamValue::Protocol(Protocol::Tcp));
    assert_eq!(parse_vary("flows=1..3").unwrap().values.len(), 3);
    let a = parse_vary("dscp=ef,af41").unwrap();
    assert_eq!(values(&a), vec![json!("ef"), json!("af41")]);
    assert_eq!(a.values[0].0, ParamValue::Number(46));
    let a = parse_vary("send_buffer=64KiB").unwrap();
    assert_eq!(a.param, Param::SendBuffer);
    assert_eq!(values(&parse_vary("rate=max,1M").unwrap())[0], json!("max"));
}

#[test]
fn rejects_bad_vary_in_one_line() {
    for bad in [
        "size",
        "size=",
        "size=500..100:10",
        "size=1..10:0",
        "proto=sctp",
        "mode=sideways",
        "size=1..1000000000",
        "json=1",
        "size=abc",
        "proto=udp..tcp",
        "duration=1s..2s",
        "rate=1M..max:1M",
        "traffic=trace:/nonexistent/flowlab-trace",
    ] {
        let e = parse_vary(bad)
            .err()
            .unwrap_or_else(|| panic!("{bad} parsed"));
        let text = format!("{e:#}");
        assert!(text.starts_with("invalid --vary"), "{bad}: {text}");
        assert!(!text.contains('\n'), "{bad}: {text}");
    }
}

#[test]
fn cartesian_product_first_axis_slowest() {
    let axes = vec![
        parse_vary("size=100,200").unwrap(),
        parse_vary("proto=udp,tcp").unwrap(),
    ];
    let p = cartesian(&axes);
    assert_eq!(p.len(), 4);
    assert_eq!(p[0].0, json!({"size": 100, "proto": "udp"}));
    assert_eq!(p[1].0, json!({"size": 100, "proto": "tcp"}));
    assert_eq!(p[3].0, json!({"size": 200, "proto": "tcp"}));
    assert_eq!(
        p[3].1,
        vec![
            (Param::Size, ParamValue::Bytes(200)),
            (Param::Protocol, ParamValue::Protocol(Protocol::Tcp))
        ]
    );
    assert_eq!(cartesian(&[]), vec![(json!({}), vec![])]);
}

fn spec() -> TestSpec {
    TestSpec {
        protocol: Protocol::Udp,
        direction: Direction::Oneway,
        rate_bps: Some(1_000_000),
        size: 1200,
        duration_ns: Some(1_000_000_000),
        count: None,
        interval_ns: None,
        flows: 1,
        client_udp_ports: Vec::new(),
        raw: None,
        busy_poll: false,
        packet_log: false,
        socket: SocketOptions::default(),
        traffic: None,
        seed: 1,
        authenticated_packets: false,
        echo_every: None,
        omit_ns: None,
        pacing: Default::default(),
        multicast: None,
    }
}

/// Sets the point on `spec()` and validates: what a front end's `spec_of` does, less defaults.
fn set_all(settings: &[(Param, ParamValue)]) -> anyhow::Result<TestSpec> {
    let mut s = spec();
    for (p, v) in settings {
        s.set(*p, v.clone())?;
    }
    s.validate()?;
    Ok(s)
}

#[test]
fn points_are_checked_before_any_test() {
    let axes = vec![parse_vary("size=100,70000").unwrap()];
    let e = points(&axes, set_all).unwrap_err();
    assert!(format!("{e:#}").starts_with("point size=70000: "), "{e:#}");
    let axes = vec![
        parse_vary("size=100").unwrap(),
        parse_vary("size=200").unwrap(),
    ];
    assert!(points(&axes, set_all)
        .unwrap_err()
        .to_string()
        .contains("given twice"));
    let axes = vec![
        parse_vary("size=100,200").unwrap(),
        parse_vary("mss=536").unwrap(),
    ];
    let p = points(&axes, set_all).unwrap();
    assert_eq!(p[1].spec.size, 200);
    assert_eq!(p[1].spec.socket.mss, Some(536));
    assert_eq!(p[1].params, json!({"size": 200, "mss": 536}));
}

/// `--vary pacing=...`: stored lower-case, each point's mode set, validate's refusal kept.
#[test]
fn pacing_is_swept_and_each_point_validated() {
    let axes = vec![parse_vary("pacing=Precise,efficient,auto").unwrap()];
    assert_eq!(
        values(&axes[0]),
        vec![json!("precise"), json!("efficient"), json!("auto")]
    );
    let p = points(&axes, set_all).unwrap();
    let modes: Vec<_> = p.iter().map(|p| p.spec.pacing).collect();
    assert_eq!(modes, flowlab_traffic::PacingMode::ALL);
    let axes = vec![
        parse_vary("rate=max").unwrap(),
        parse_vary("pacing=precise").unwrap(),
    ];
    let e = format!("{:#}", points(&axes, set_all).unwrap_err());
    assert!(e.contains("pacing precise needs a paced test"), "{e}");
    assert!(parse_vary("pacing=lazy").is_err());
}

/// A test runner that runs nothing: it answers from a closure.
struct Fake<F: FnMut(&Point, u32) -> anyhow::Result<PointOutcome>>(F);

impl<F: FnMut(&Point, u32) -> anyhow::Result<PointOutcome>> PointRunner for Fake<F> {
    fn run(&mut self, point: &Point, repetition: u32) -> anyhow::Result<PointOutcome> {
        (self.0)(point, repetition)
    }
}

fn fake(rtt: f64) -> anyhow::Result<PointOutcome> {
    Ok(PointOutcome::Done {
        result: json!({}),
        metrics: vec![("rtt_mean_us".into(), rtt)],
        packets: None,
    })
}

fn plan(vary: &str, repeat: u32) -> Plan {
    Plan {
        points: points(&[parse_vary(vary).unwrap()], set_all).unwrap(),
        repeat,
        until_ci: None,
        shuffle: false,
        seed: 1,
    }
}

fn sweep_run(s: &mut Store) -> RunId {
    s.begin_run("sweep", &json!({}), &Default::default())
        .unwrap()
}

fn quiet(_: Event<'_>) {}

#[test]
fn resume_runs_only_missing_points() {
    let mut s = Store::open_in_memory().unwrap();
    let run = sweep_run(&mut s);
    let p = plan("size=100,200,300", 2);
    // First attempt: fails at the 4th test (size 100, repetition 1).
    let mut calls = 0;
    let mut first = Fake(|_: &Point, _| {
        calls += 1;
        if calls == 4 {
            Ok(PointOutcome::Failed("agent lost".into()))
        } else {
            fake(10.0)
        }
    });
    let (ending, _) = execute(&mut s, run, &p, &mut quiet, &mut first).unwrap();
    assert!(
        matches!(ending, Ending::Failed(ref e) if e.contains("size=100 #1") && e.contains("agent lost")),
        "{ending:?}"
    );
    assert_eq!(s.load_run(run).unwrap().points.len(), 3);
    // Resume: only the 3 missing tests run, and the observer hears of each.
    let mut ran = Vec::new();
    let mut events = Vec::new();
    let mut resumed = Fake(|pt: &Point, rep| {
        ran.push((pt.params.clone(), rep));
        fake(10.0)
    });
    let mut observer = |e: Event<'_>| {
        if let Event::PointStarted {
            point,
            repetition,
            done,
        } = e
        {
            events.push((point.clone(), repetition, done));
        }
    };
    let (ending, table) = execute(&mut s, run, &p, &mut observer, &mut resumed).unwrap();
    assert_eq!(ending, Ending::Complete);
    let missing = vec![
        (json!({"size": 100}), 1),
        (json!({"size": 200}), 1),
        (json!({"size": 300}), 1),
    ];
    assert_eq!(ran, missing);
    let started: Vec<_> = events.iter().map(|(p, r, _)| (p.clone(), *r)).collect();
    assert_eq!(started, missing);
    assert_eq!(
        events.iter().map(|e| e.2).collect::<Vec<_>>(),
        [0, 1, 2],
        "done counts this sweep's stored tests"
    );
    assert_eq!(table.points.len(), 6);
    assert_eq!(s.load_run(run).unwrap().points.len(), 6);
    // Nothing left: a second resume runs nothing.
    let mut none = Fake(|_: &Point, _| panic!("nothing to run"));
    let (ending, _) = execute(&mut s, run, &p, &mut quiet, &mut none).unwrap();
    assert_eq!(ending, Ending::Complete);
}

#[test]
fn shuffle_is_seeded() {
    let order = |seed| {
        let mut s = Store::open_in_memory().unwrap();
        let run = sweep_run(&mut s);
        let p = Plan {
            shuffle: true,
            seed,
            ..plan("size=101..108", 1)
        };
        let mut seen = Vec::new();
        let mut runner = Fake(|pt: &Point, _| {
            seen.push(pt.spec.size);
            fake(1.0)
        });
        execute(&mut s, run, &p, &mut quiet, &mut runner).unwrap();
        seen
    };
    assert_eq!(order(7), order(7));
    assert_ne!(order(7), (101..=108).collect::<Vec<_>>());
    let mut sorted = order(7);
    sorted.sort();
    assert_eq!(sorted, (101..=108).collect::<Vec<_>>());
}

#[test]
fn until_ci_repeats_noisy_points_only() {
    let mut s = Store::open_in_memory().unwrap();
    let run = sweep_run(&mut s);
    let p = Plan {
        until_ci: Some((0.02, 6, "rtt".into())),
        ..plan("size=100,200", 1)
    };
    // size 100 is steady; size 200 alternates widely and never converges.
    let mut runner = Fake(|pt: &Point, rep| match pt.spec.size {
        100 => fake(100.0),
        _ => fake(if rep % 2 == 0 { 50.0 } else { 150.0 }),
    });
    execute(&mut s, run, &p, &mut quiet, &mut runner).unwrap();
    let r = s.load_run(run).unwrap();
    let count = |v: i64| {
        r.points
            .iter()
            .filter(|p| p.params["size"] == json!(v))
            .count()
    };
    assert_eq!((count(100), count(200)), (2, 6));
}

#[test]
fn a_resume_must_be_the_same_sweep() {
    let job = SweepJob {
        target: "h".into(),
        vary: vec!["size=100,200".into()],
        test_flags: vec![],
        repeat: 1,
        until_ci: None,
        max_repeat: 10,
        ci_metric: "rtt".into(),
        shuffle: false,
        seed: 0,
        packet_log: false,
        resume: None,
    };
    let mut s = Store::open_in_memory().unwrap();
    let run = s
        .begin_run("sweep", &job.definition(), &Default::default())
        .unwrap();
    assert!(check_resumable(&s, run, &job.definition()).is_ok());
    let other = SweepJob {
        vary: vec!["size=100,300".into()],
        ..job.clone()
    };
    let e = check_resumable(&s, run, &other.definition()).unwrap_err();
    assert!(e.to_string().contains("with vary"), "{e}");
    let test = s
        .begin_run("test", &json!({}), &Default::default())
        .unwrap();
    assert!(check_resumable(&s, test, &job.definition())
        .unwrap_err()
        .to_string()
        .contains("not a sweep"));
}

/// The base `flowlab sweep h` gives with no test flags: UDP's defaults, nothing given.
fn bare() -> PointBase {
    PointBase {
        spec: TestSpec {
            duration_ns: Some(flowlab_spec::DEFAULT_DURATION_NS),
            ..spec()
        },
        given: Vec::new(),
    }
}

fn point(vary: &[&str]) -> Vec<(Param, ParamValue)> {
    let axes: Vec<Axis> = vary.iter().map(|v| parse_vary(v).unwrap()).collect();
    cartesian(&axes).remove(0).1
}

#[test]
fn a_point_follows_the_defaults_of_what_it_sets() {
    // TCP's size and rate, as `flowlab test --proto tcp` would have them.
    let s = bare().spec(&point(&["proto=tcp"])).unwrap();
    assert_eq!(
        (s.protocol, s.size, s.rate_bps),
        (Protocol::Tcp, 256_000, None)
    );
    // Given by the flags: kept.
    let given = PointBase {
        spec: TestSpec {
            size: 500,
            rate_bps: Some(2_000_000),
            ..bare().spec
        },
        given: vec![Param::Size, Param::Rate],
    };
    let s = given.spec(&point(&["proto=tcp"])).unwrap();
    assert_eq!((s.size, s.rate_bps), (500, Some(2_000_000)));
    // A count without a duration runs to its count.
    let s = bare().spec(&point(&["count=500"])).unwrap();
    assert_eq!((s.count, s.duration_ns), (Some(500), None));
    // A preset: its protocol and one flow per sub-flow.
    let s = bare().spec(&point(&["preset=videoconf-1998"])).unwrap();
    assert_eq!((s.protocol, s.flows), (Protocol::Udp, 2));
    let s = bare().spec(&point(&["traffic=rr:request=64"])).unwrap();
    assert_eq!((s.protocol, s.rate_bps, s.flows), (Protocol::Tcp, None, 1));
    // A constant model takes the point's final size.
    let s = bare()
        .spec(&point(&["traffic=constant", "proto=tcp"]))
        .unwrap();
    let expected = flowlab_traffic::TrafficSpec::Constant {
        rate_bps: Some(1_000_000),
        size: Some(256_000),
    };
    assert_eq!(s.traffic, Some(expected));
    // And the whole test is validated.
    let e = bare().spec(&point(&["size=70000"])).unwrap_err();
    assert!(e.to_string().starts_with("invalid test: "), "{e}");
}

/// Issue 12: a one-way sweep watching the default `rtt` ran every point to --max-repeat.
#[test]
fn until_ci_refuses_a_metric_the_tests_do_not_measure() {
    let one_way = Plan {
        until_ci: Some((0.02, 6, "rtt".into())),
        ..plan("size=100,200", 1)
    };
    assert_eq!(one_way.points[0].spec.direction, Direction::Oneway);
    let e = check_ci_metric(&one_way).unwrap_err().to_string();
    assert!(
        e.contains("--until-ci watches rtt") && !e.contains('\n'),
        "{e}"
    );
    let mut loopback = one_way.clone();
    for p in &mut loopback.points {
        p.spec.direction = Direction::Loopback;
    }
    check_ci_metric(&loopback).unwrap();
    let mut echoed = one_way.clone();
    for p in &mut echoed.points {
        p.spec.echo_every = Some(10);
    }
    check_ci_metric(&echoed).unwrap();
    let delay = Plan {
        until_ci: Some((0.02, 6, "delay".into())),
        ..one_way.clone()
    };
    check_ci_metric(&delay).unwrap();
    // What the static check cannot know stops the sweep after the first test.
    let mut s = Store::open_in_memory().unwrap();
    let run = sweep_run(&mut s);
    let mut runner = Fake(|_: &Point, _| {
        Ok(PointOutcome::Done {
            result: json!({}),
            metrics: vec![("goodput_bps".into(), 1e6)],
            packets: None,
        })
    });
    let (ending, table) = execute(&mut s, run, &delay, &mut quiet, &mut runner).unwrap();
    assert!(
        matches!(&ending, Ending::Failed(e) if e.contains("did not measure")),
        "{ending:?}"
    );
    assert_eq!(table.points.len(), 1);
}

#[test]
fn sweeping_the_protocol_warns_when_rate_or_size_follow_it() {
    let axes = [parse_vary("proto=udp,tcp").unwrap()];
    let base = |given: Vec<Param>| PointBase {
        spec: TestSpec::new(Protocol::Udp, Direction::Oneway),
        given,
    };
    let w = protocol_defaults_warning(&axes, &base(vec![])).unwrap();
    assert!(w.contains("--rate or --size"), "{w}");
    let w = protocol_defaults_warning(&axes, &base(vec![Param::Rate])).unwrap();
    assert!(w.contains("--size") && !w.contains("--rate"), "{w}");
    assert_eq!(
        protocol_defaults_warning(&axes, &base(vec![Param::Rate, Param::Size])),
        None
    );
    let sizes = [parse_vary("size=100,200").unwrap()];
    assert_eq!(protocol_defaults_warning(&sizes, &base(vec![])), None);
}

#[test]
fn each_ending_says_how_to_resume() {
    let id: RunId = 7;
    assert_eq!(Ending::Complete.conclusion(Ok(()), id).unwrap(), None);
    assert_eq!(
        Ending::Interrupted.conclusion(Ok(()), id).unwrap().unwrap(),
        "flowlab: interrupted: finished points are stored; continue with --resume 7"
    );
    let failed = Ending::Failed("size=100 #1: agent lost".into()).conclusion(Ok(()), id);
    assert_eq!(
        failed.unwrap_err().to_string(),
        "sweep stopped at size=100 #1: agent lost; finished points are stored, continue with --resume 7"
    );
    let not_stored = Ending::NotStored("disk full".into()).conclusion(Ok(()), id);
    assert!(not_stored
        .unwrap_err()
        .to_string()
        .ends_with("--resume 7 once the database takes writes again"));
}

#[test]
fn the_flags_base_fills_what_they_leave_without_validating() {
    // A count alone: no default duration; TCP's own size and rate; not yet checked.
    let tcp = [
        (Param::Protocol, ParamValue::Protocol(Protocol::Tcp)),
        (Param::Count, ParamValue::Number(0)),
    ];
    let filled = bare().fill(&tcp).unwrap();
    assert_eq!(filled.duration_ns, None);
    assert_eq!(filled.size, flowlab_spec::default_size(Protocol::Tcp));
    assert_eq!(filled.rate_bps, None);
    assert!(
        bare().spec(&tcp).is_err(),
        "a count of 0 is refused when validated"
    );
}

#[test]
fn a_sweep_says_how_long_it_will_take() {
    // Two 1 s points, three times, each with a second of set-up and drain.
    let p = plan("size=100,200", 3);
    assert_eq!(expected_ns(&p), 12_000_000_000);
    // 1000 packets of 1250 B at 1 Mbit/s take 10 s; at least twice with --until-ci.
    let mut counted = Plan {
        until_ci: Some((0.02, 6, "rtt".into())),
        ..plan("count=1000", 1)
    };
    for point in &mut counted.points {
        (point.spec.size, point.spec.duration_ns) = (1250, None);
    }
    assert_eq!(expected_ns(&counted), 22_000_000_000);
    assert_eq!(
        expected_line(2, 22_000_000_000),
        "flowlab: 2 tests, expected to take about 22 s\n"
    );
}

#[test]
fn an_icmp_sweep_over_size_sends_one_echo_a_second_at_every_size() {
    let icmp = bare().fill(&point(&["proto=icmp"])).unwrap();
    let base = PointBase {
        spec: icmp,
        given: vec![Param::Protocol],
    };
    for size in [64u32, 4096] {
        let s = base.spec(&point(&[&format!("size={size}")])).unwrap();
        assert_eq!(
            (s.protocol, s.direction, s.size),
            (Protocol::Icmp, Direction::Loopback, size)
        );
        assert_eq!(s.packet_interval_ns(), Some(1_000_000_000));
    }
    // A rate the flags give is kept: the interval follows the size.
    let paced = PointBase {
        spec: TestSpec {
            rate_bps: Some(51_200),
            ..base.spec.clone()
        },
        given: vec![Param::Protocol, Param::Rate],
    };
    let s = paced.spec(&point(&["size=64"])).unwrap();
    assert_eq!(s.packet_interval_ns(), Some(10_000_000));
}
