use std::collections::BTreeMap;

use flowlab_results::Role;
use serde_json::json;

use super::*;
use crate::experiment::{run_experiment, steps, ExperimentOutcome};

fn example(path: &str) -> String {
    let path = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn experiment(text: &str) -> Experiment {
    flowlab_experiment::load(text).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `experiment` on the network file `network` (a path under examples/).
fn run_on(experiment: &Experiment, network: &str) -> ExperimentOutcome {
    let mut net = SimulatedNetwork::new(network, &example(network), experiment).unwrap();
    let steps = steps(experiment, &BTreeMap::new());
    run_experiment(
        experiment,
        &steps,
        &BTreeMap::new(),
        &mut net,
        &mut |_: crate::Event<'_>| {},
    )
    .unwrap()
}

const PAIR: &str = r#"
[experiment]
name = "pair"

[[host]]
name = "a"
address = "10.0.0.1"

[[host]]
name = "b"
address = "10.0.0.2"
"#;

#[test]
fn a_step_becomes_the_documents_a_real_client_writes() {
    let e = experiment(&format!(
        "{PAIR}
[[flow]]
name = \"half\"
from = \"a\"
to = \"b\"
rate = \"5M\"
size = \"1000B\"
duration = \"1s\"

[[flow]]
name = \"back\"
from = \"a\"
to = \"b\"
mode = \"reverse\"
rate = \"1M\"
size = \"500B\"
duration = \"1s\"

[plan]
parallel = [\"half\", \"back\"]
"
    ));
    let out = run_on(&e, "examples/sim/bottleneck.toml");
    assert_eq!(out.failed(), 0);
    let half = out.flows[0].result.as_ref().unwrap();
    assert_eq!(
        half.target, "10.0.0.2:9470",
        "the agent as the file names it"
    );
    assert_eq!(half.agent_address, "b", "the node that served");
    assert_eq!(half.summary.sender, "client");
    assert_eq!(half.summary.packets_sent, 625);
    assert_eq!(half.summary.packets_lost, 0);
    let goodput = half.summary.receiver_goodput_bps;
    assert!((goodput / 5e6 - 1.0).abs() < 0.01, "{goodput}");
    assert_eq!(half.agent.as_ref().unwrap().role, Role::Receiver);
    assert!(half.error.is_none());
    let back = out.flows[1].result.as_ref().unwrap();
    assert_eq!(back.summary.sender, "agent");
    assert_eq!(back.summary.packets_received, 250);
    // One virtual clock: one-way delays are exact (10 Mb/s serialises 1028 B in 822.4 µs).
    let one_way = out.flows[0].one_way.unwrap();
    assert!(one_way.valid && one_way.bound_ns == 0.0);
    assert!((one_way.min_ns - 822_400.0).abs() < 1_000.0, "{one_way:?}");
}

#[test]
fn the_network_is_recorded_with_the_hash_of_its_text() {
    let e = experiment(&format!(
        "{PAIR}
[[flow]]
name = \"x\"
from = \"a\"
to = \"b\"
rate = \"1M\"
duration = \"200ms\"

[plan]
serial = [\"x\"]
"
    ));
    let out = run_on(&e, "examples/sim/bottleneck.toml");
    let NetworkKind::Sim { file, name, sha256 } = &out.network else {
        panic!("{:?}", out.network);
    };
    assert_eq!(
        (file.as_str(), name.as_str()),
        ("examples/sim/bottleneck.toml", "bottleneck")
    );
    assert_eq!(sha256.len(), 64);
    assert_eq!(
        sha256,
        &sha256_hex(&example("examples/sim/bottleneck.toml"))
    );
    assert_ne!(sha256, &sha256_hex(&example("examples/sim/lab-three.toml")));
    let doc = out.to_json(None);
    assert_eq!(doc["network"]["kind"], "sim");
    assert_eq!(doc["network"]["sha256"], json!(sha256));
    assert_eq!(
        out.network.to_string(),
        format!(
            "sim examples/sim/bottleneck.toml (bottleneck, sha256 {})",
            &sha256[..12]
        )
    );
}

#[test]
fn sha256_matches_its_test_vector() {
    assert_eq!(
        sha256_hex("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn a_host_the_network_lacks_is_one_line_naming_it() {
    let e = experiment(&format!(
        "{PAIR}
[[host]]
name = \"c\"
address = \"10.0.0.3\"

[[flow]]
name = \"x\"
from = \"a\"
to = \"b\"
duration = \"1s\"

[plan]
serial = [\"x\"]
"
    ));
    let net = "examples/sim/bottleneck.toml";
    let err = SimulatedNetwork::new(net, &example(net), &e)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "examples/sim/bottleneck.toml: host c is not in the network \
         (add it to [hosts] or as a host node)"
    );
    let bad = SimulatedNetwork::new("bad.toml", "[network]\nnoise = 1\n", &e)
        .err()
        .unwrap()
        .to_string();
    assert!(bad.starts_with("bad.toml:2: "), "{bad}");
    assert_eq!(bad.lines().count(), 1);
}

#[test]
fn a_flow_the_simulator_refuses_fails_its_step() {
    let e = experiment(&format!(
        "{PAIR}
[[flow]]
name = \"ok\"
from = \"a\"
to = \"b\"
duration = \"1s\"

[[flow]]
name = \"paced-tcp\"
from = \"a\"
to = \"b\"
protocol = \"tcp\"
rate = \"1M\"
duration = \"1s\"

[plan]
parallel = [\"ok\", \"paced-tcp\"]
"
    ));
    let out = run_on(&e, "examples/sim/bottleneck.toml");
    assert_eq!(out.failed(), 2);
    let err = out.flows[0].result.as_ref().unwrap_err();
    assert!(
        err.starts_with("simulation: flow paced-tcp: a rate"),
        "{err}"
    );
}

/// Issue 12: 1.5 s trials let the 32 KiB queue absorb a rate above the link's.
#[test]
fn the_rfc2544_example_is_flagged_above_the_link_and_rfc2544_trials_are_not() {
    let text = example("examples/experiments/lab-bottleneck-rfc2544.toml");
    let out = run_on(&experiment(&text), "examples/sim/bottleneck.toml");
    assert_eq!(out.failed(), 0);
    let search = out.search.as_ref().unwrap();
    let found = search["rate_bps"].as_f64().unwrap();
    let capacity = search["capacity_bps"].as_f64().unwrap();
    // 9.73 Mbit/s of payload fills 10 Mb/s of IP packets; a 1.5 s trial a little above
    // fits the queue, and says so.
    let payload_ceiling = 10e6 * 1000.0 / 1028.0;
    assert!(
        (capacity / payload_ceiling - 1.0).abs() < 1e-3,
        "{capacity}"
    );
    assert!((9.5e6..10e6).contains(&found), "{found}");
    assert!(found > capacity, "{search:#}");
    assert_eq!(search["flags"], json!(["short_trial", "above_capacity"]));

    let rfc = text.replace("trial = \"1500ms\"", "");
    let out = run_on(&experiment(&rfc), "examples/sim/bottleneck.toml");
    let search = out.search.as_ref().unwrap();
    assert_eq!(search["trial_s"], 60.0, "RFC 2544's default");
    let found = search["rate_bps"].as_f64().unwrap();
    assert!(
        found <= search["capacity_bps"].as_f64().unwrap(),
        "{search:#}"
    );
    assert!(found <= payload_ceiling);
    assert_eq!(search["flags"], json!([]));
    assert_eq!(search["verification"]["trial_s"], 120.0);
}

#[test]
fn the_offered_load_example_saturates_the_bottleneck() {
    let e = experiment(&example("examples/experiments/lab-three-offered-load.toml"));
    let out = run_on(&e, "examples/sim/lab-three.toml");
    assert_eq!(out.failed(), 0);
    let search = out.search.as_ref().unwrap();
    // 50 % of 3 × 6 Mbit/s fits 10 Mb/s, 60 % overflows the 64 KiB queue within 1.5 s.
    assert_eq!(search["lossless_offered_bps"], 9_000_000);
    for point in search["points"].as_array().unwrap() {
        let (offered, output) = (point["rate_bps"].as_f64(), point["throughput_bps"].as_f64());
        assert!(output.unwrap() <= offered.unwrap(), "{point}");
    }
    assert_eq!(
        out.flows.len(),
        30,
        "ten loads of three flows, and no plan step"
    );
    for key in ["peak_bps", "full_load_bps"] {
        let bps = search[key].as_f64().unwrap();
        assert!((9.5e6..10e6).contains(&bps), "{key} {bps}");
    }
}

#[test]
fn a_scenario_file_runs_with_its_overrides_and_says_what_is_wrong_in_one_line() {
    let path = |p: &str| Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(p);
    let file = path("examples/sim/ping-cell-loss.toml");
    let short = Some(Duration::from_millis(100));
    let r = run_scenario(&file, Some(3), short).unwrap();
    assert_eq!(r.runs[0].seed, 3);
    assert_eq!(r.runs[0].duration_ns, 100_000_000);
    let zero = run_scenario(&file, None, Some(Duration::ZERO)).unwrap_err();
    assert_eq!(zero.to_string(), "invalid duration: must be above 0 s");
    let missing = run_scenario(&path("no-such.toml"), None, None).unwrap_err();
    assert!(
        format!("{missing:#}").contains("cannot read "),
        "{missing:#}"
    );
    let network = run_scenario(&path("examples/sim/bottleneck.toml"), None, None).unwrap_err();
    assert!(
        network
            .to_string()
            .contains("bottleneck.toml:12: this is a network file"),
        "{network}"
    );
}
