use super::*;
use flowlab_control::Summary2;

/// A network of one bottleneck of `capacity` bit/s shared by a step's flows: each flow gets
/// its share of what fits and loses the rest. Flows named "broken" fail.
struct Bottleneck {
    capacity: f64,
    clocks: Clocks,
    /// Each step run: its index and its wait for packets in flight.
    steps: Vec<(usize, Option<u64>)>,
    kind: NetworkKind,
}

impl Bottleneck {
    fn new(capacity: f64) -> Bottleneck {
        let clocks = [("10.0.0.1:9470", 0), ("10.0.0.2:9470", 2_000_000)]
            .into_iter()
            .map(|(a, offset_ns)| (a.to_string(), ClockOffset::fixed(offset_ns, 1000)))
            .collect();
        Bottleneck {
            capacity,
            clocks,
            steps: Vec::new(),
            kind: NetworkKind::Lab {
                name: "fake".into(),
            },
        }
    }
}

fn result(spec: &flowlab_spec::TestSpec, goodput: f64, loss: f64) -> TestResult {
    let sent = 1000;
    let lost = (loss * sent as f64).round() as u64;
    let size = u64::from(spec.size);
    TestResult {
        schema_version: flowlab_control::SCHEMA_VERSION,
        flowlab_version: "test".into(),
        started_at_ns: 0,
        target: "b".into(),
        agent_address: "10.0.0.2:9470".into(),
        spec: spec.clone(),
        summary: Summary2 {
            packets_sent: sent,
            bytes_sent: sent * size,
            packets_lost: lost,
            bytes_received: (sent - lost) * size,
            loss_pct: loss * 100.0,
            receiver_goodput_bps: goodput,
            ..Summary2::default()
        },
        client: None,
        agent: None,
        intervals: Vec::new(),
        interrupted: false,
        error: None,
    }
}

impl StepRunner for Bottleneck {
    fn network(&self) -> &NetworkKind {
        &self.kind
    }

    fn clocks(&self) -> &Clocks {
        &self.clocks
    }

    fn run_step(&mut self, step: &Step) -> Vec<Result<TestResult, String>> {
        self.steps.push((step.index, step.drain_ns));
        let offered: f64 = step
            .flows
            .iter()
            .map(|f| f.spec.rate_bps.unwrap_or(0) as f64)
            .sum();
        let through = offered.min(self.capacity) / offered.max(1.0);
        step.flows
            .iter()
            .map(|f| match f.name.as_str() {
                "broken" => Err("agent lost".to_string()),
                _ => {
                    let rate = f.spec.rate_bps.unwrap_or(0) as f64;
                    Ok(result(&f.spec, rate * through, 1.0 - through))
                }
            })
            .collect()
    }
}

const HOSTS: &str = r#"
[experiment]
name = "fake"

[[host]]
name = "a"
address = "10.0.0.1"

[[host]]
name = "b"
address = "10.0.0.2"
"#;

fn load(rest: &str) -> Experiment {
    flowlab_experiment::load(&format!("{HOSTS}{rest}")).unwrap()
}

#[test]
fn steps_run_in_order_through_the_step_runner() {
    let e = load(
        r#"
[[flow]]
name = "x"
from = "a"
to = "b"
rate = "3M"
duration = "1s"

[[flow]]
name = "broken"
from = "a"
to = "b"
rate = "2M"
duration = "1s"

[plan]
serial = ["x", "broken"]

[[sweep]]
param = "flow.x.rate"
values = ["3M", "9M"]
"#,
    );
    let steps = steps(&e, &BTreeMap::new());
    let mut net = Bottleneck::new(8e6);
    let mut seen = Vec::new();
    let mut observer = |ev: Event<'_>| match ev {
        Event::ExperimentStarted(s) => seen.push(format!(
            "start {} {} {}",
            s.steps,
            s.clocks.len(),
            s.network
        )),
        Event::StepFinished { step, flows } => {
            seen.push(format!("step {} {}", step.index, flows.len()))
        }
        _ => {}
    };
    let out = run_experiment(&e, &steps, &BTreeMap::new(), &mut net, &mut observer).unwrap();
    assert_eq!(net.steps, [(0, None), (1, None), (2, None), (3, None)]);
    assert_eq!(
        seen,
        [
            "start 4 2 lab fake",
            "step 0 1",
            "step 1 1",
            "step 2 1",
            "step 3 1"
        ]
    );
    assert_eq!(
        out.failed(),
        2,
        "the broken flow fails alone, at each sweep point"
    );
    let fast = &out.flows[2];
    assert_eq!(fast.flow, "x");
    assert!(fast
        .labels
        .contains(&("offered_bps".into(), "9000000".into())));
    assert_eq!(
        fast.result.as_ref().unwrap().summary.receiver_goodput_bps,
        8e6
    );
    let doc = out.to_json(Some(7));
    assert_eq!(doc["run"], 7);
    assert_eq!(doc["flows"][1]["error"], "agent lost");
    assert_eq!(doc["clocks"]["10.0.0.2:9470"]["offset_ns"], 2_000_000);
    assert_eq!(doc["network"], json!({"kind": "lab", "name": "fake"}));
    assert_eq!(point_of(fast)["offered_bps"], json!(9e6));
    assert_eq!(point_of(fast)["flow"], "x");
}

#[test]
fn a_search_runs_its_trials_through_the_step_runner() {
    let e = load(
        r#"
[[flow]]
name = "probe"
from = "a"
to = "b"
rate = "1M"
duration = "1s"

[plan]
serial = ["probe"]

[search]
kind = "rfc2544-throughput"
flows = ["probe"]
min = "1M"
max = "20M"
resolution = "250k"
trial = "1s"
"#,
    );
    let steps = steps(&e, &BTreeMap::new());
    let mut net = Bottleneck::new(8e6);
    let mut trials = Vec::new();
    let mut found = None;
    let mut observer = |ev: Event<'_>| match ev {
        Event::TrialFinished(t) => trials.push(t.clone()),
        Event::SearchFinished(r) => found = Some(r.clone()),
        _ => {}
    };
    let out = run_experiment(&e, &steps, &BTreeMap::new(), &mut net, &mut observer).unwrap();
    assert!(trials.len() > 3, "{trials:?}");
    assert_eq!(trials[0].index, 0);
    let lossless = trials
        .iter()
        .filter(|t| t.loss == 0.0)
        .map(|t| t.offered_bps);
    let best = lossless.max().unwrap();
    assert!((7_750_000..=8_000_000).contains(&best), "{best}");
    assert!(
        trials.iter().all(|t| t.goodput_bps <= t.offered_bps as f64),
        "{trials:?}"
    );
    assert_eq!(found, out.search);
    // Issue 12: the plan's step ran first and was stored beside trial 0.
    assert_eq!(
        out.flows.len(),
        trials.len(),
        "only the search's trials run"
    );
    let trial_steps: Vec<_> = (0..trials.len())
        .map(|i| (i, Some(flowlab_experiment::TRIAL_DRAIN_NS)))
        .collect();
    assert_eq!(net.steps, trial_steps);
    let (last, bisection) = trials.split_last().unwrap();
    assert!(bisection
        .iter()
        .all(|t| t.duration_ns == Some(1_000_000_000)));
    assert_eq!(
        last.duration_ns,
        Some(2_000_000_000),
        "the re-run of the result"
    );
    let found = found.unwrap();
    assert!(found.to_string().contains(&best.to_string()), "{found}");
    // 1 s trials: the result says it is shorter than RFC 2544 asks, in the text too.
    assert_eq!(found["flags"], json!(["short_trial"]));
    let capacity = found["capacity_bps"].as_f64().unwrap();
    assert!((capacity / 8e6 - 1.0).abs() < 1e-3, "{capacity}");
    let text = crate::format::search_text(&found);
    assert!(
        text.ends_with("\nwarning: trials shorter than RFC 2544's 60 s (1.00 s: a queue can hide a rate\n         above capacity)\n"),
        "{text}"
    );
}

#[test]
fn a_failed_trial_fails_the_search() {
    let flows = [FlowOutcome {
        step: 0,
        flow: "broken".into(),
        labels: vec![],
        repetition: 0,
        result: Err("agent lost".into()),
        one_way: None,
    }];
    let e = trial_outcome(3, 1, &flows).unwrap_err();
    assert_eq!(e.to_string(), "trial 3 failed: flow broken: agent lost");
}

#[test]
fn lab_hosts_relocate_flows() {
    let e = load(
        r#"
[[flow]]
name = "x"
from = "a"
to = "b"
duration = "1s"

[plan]
serial = ["x"]
"#,
    );
    let lab = BTreeMap::from([("b".to_string(), "[fd00::2]:9470".to_string())]);
    let s = steps(&e, &lab);
    assert_eq!(s[0].flows[0].client_agent, "10.0.0.1:9470");
    assert_eq!(s[0].flows[0].server_agent, "[fd00::2]:9470");
}

/// Three sources in lockstep at 16.2 Mbit/s into 10 Mb/s: the full queue serves them in a
/// fixed order, and the last is starved after its first 50-odd packets. Its goodput over its
/// own short span would lift the sum above the link; over the trial's span it does not.
#[test]
fn a_starved_flow_counts_for_what_it_delivered() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/experiments/lab-three-offered-load.toml"
    ))
    .unwrap();
    // The file's plan (its three flows together), without the search that replaces it.
    let plan = &text[..text.find("[search]").unwrap()];
    let plan = plan.replace("full_rate = \"6M\"", "full_rate = \"5400k\"");
    let e = flowlab_experiment::load(&plan).unwrap();
    let network = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/sim/lab-three.toml"
    );
    let network_text = std::fs::read_to_string(network).unwrap();
    let mut net = crate::SimulatedNetwork::new(network, &network_text, &e).unwrap();
    let outcomes = run_step(&steps(&e, &BTreeMap::new())[0], &mut net);
    let summed: f64 = outcomes
        .iter()
        .map(|o| o.result.as_ref().unwrap().summary.receiver_goodput_bps)
        .sum();
    let trial = trial_outcome(0, 16_200_000, &outcomes).unwrap();
    let capacity = 10e6 * 1000.0 / 1028.0;
    assert!(
        summed > capacity * 1.02,
        "{summed}: the lockstep no longer starves a flow"
    );
    assert!(
        (trial.goodput_bps / capacity - 1.0).abs() < 0.02,
        "{}",
        trial.goodput_bps
    );
    assert!(trial.loss > 0.3, "{}", trial.loss);
}

#[test]
fn a_target_is_real_a_lab_or_a_simulation_never_two() {
    let sim = Path::new("n.toml");
    assert_eq!(Target::from_flags(None, None).unwrap(), Target::Real);
    assert_eq!(
        Target::from_flags(Some("three"), None).unwrap(),
        Target::Lab("three")
    );
    assert_eq!(
        Target::from_flags(None, Some(sim)).unwrap(),
        Target::Sim(sim)
    );
    let both = Target::from_flags(Some("three"), Some(sim)).unwrap_err();
    assert_eq!(both.to_string(), "--lab and --sim exclude each other");
}

/// Issue 12: one-way delays are corrected along each clock's fitted line (at the middle of
/// the flow), not by one offset taken before the experiment.
#[test]
fn one_way_delay_is_corrected_along_the_fitted_clocks() {
    let e = load(
        r#"
[[flow]]
name = "x"
from = "a"
to = "b"
rate = "1M"
duration = "2s"
"#,
    );
    let flow = steps(&e, &BTreeMap::new())[0].flows[0].clone();
    // The receiver's clock was 5 ms ahead at the last probe and gains 100 ppm; the flow's
    // arrivals span 9 to 11 s after that probe, so at their middle it is 6 ms ahead.
    let t0 = 1_000_000_000_000_u64;
    let receiver = ClockOffset {
        offset_ns: 5_000_000,
        bound_ns: 20_000,
        at_ns: t0,
        drift_ppm: Some(100.0),
        drift_bound_ppm: Some(2.0),
        first_probe_ns: t0 - 60_000_000_000,
        probes: 30,
    };
    let clocks: Clocks = [
        (flow.client_agent.clone(), ClockOffset::fixed(0, 10_000)),
        (flow.server_agent.clone(), receiver),
    ]
    .into_iter()
    .collect();
    // A true delay of 1 ms, each packet stamped on arrival by the drifting clock.
    let start = t0 + 9_000_000_000;
    let mut meter = flowlab_results::meter::ReceiverMeter::new(1, false, false);
    for seq in 0..=200u64 {
        let sent = start + seq * 10_000_000;
        let (ahead, _) = receiver.at(sent);
        meter.on_packet(
            0,
            flowlab_results::meter::Arrived {
                seq,
                size: 1000,
                sent_ns: sent,
                echoed_ns: None,
                arrival_ns: sent + 1_000_000 + ahead as u64,
                kernel_stamp: true,
            },
        );
    }
    let mut r = result(&flow.spec, 1e6, 0.0);
    r.started_at_ns = start;
    r.agent = Some(flowlab_results::SideReport {
        receiver: Some(meter.report(None)),
        ..flowlab_results::SideReport::new(flowlab_results::Role::Receiver, "b".into())
    });
    let o = one_way(&r, &flow, &clocks).unwrap();
    // Bounds: 20 µs + 2 ppm over the 10 s since the last probe, the sender's 10 µs, and the
    // clocks' 100 ± 2 ppm apart over half the 2 s of arrivals (as the receiver's clock times
    // them).
    assert!(
        (o.bound_ns - 152_000.0).abs() < 100.0,
        "bound {} ns",
        o.bound_ns
    );
    assert!((o.min_ns - 1e6).abs() <= o.bound_ns, "min {} ns", o.min_ns);
    assert!(o.valid);
    assert_eq!(o.clock_drift_ppm, Some(100.0));
    // The offset of the last probe alone (5 ms) would have said 1.9 ms.
    let transit_min = r
        .agent
        .as_ref()
        .unwrap()
        .receiver
        .as_ref()
        .unwrap()
        .transit_min_ns;
    assert_eq!(transit_min, Some(6_900_000));
}
