//! `flowlab run FILE --sim NETWORK.toml`, through the real binary: the example experiments
//! run unchanged on the example networks, print the result documents real runs print, and
//! are stored and shown with the network they ran on. No root needed: nothing is sent.

mod common;
#[path = "../../control/tests/json_schema/mod.rs"]
mod json_schema;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

/// Where the examples are, so commands name them as a user types them.
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const RFC2544: &str = "examples/experiments/lab-bottleneck-rfc2544.toml";
const OFFERED_LOAD: &str = "examples/experiments/lab-three-offered-load.toml";
const BOTTLENECK: &str = "examples/sim/bottleneck.toml";
const LAB_THREE: &str = "examples/sim/lab-three.toml";

/// A database of one test, removed with its WAL files when dropped.
struct Db(PathBuf);

impl Db {
    fn new(name: &str) -> Db {
        let db = Db(std::env::temp_dir().join(format!(
            "flowlab-simrun-{}-{name}.sqlite3",
            std::process::id()
        )));
        db.remove();
        db
    }

    fn arg(&self) -> &str {
        self.0.to_str().unwrap()
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.arg()));
        }
    }

    /// `flowlab ARGS --db DB` in the workspace.
    fn flowlab(&self, args: &[&str]) -> Output {
        Command::new(FLOWLAB)
            .current_dir(WORKSPACE)
            .args(args)
            .args(["--db", self.arg()])
            .output()
            .expect("run flowlab")
    }

    /// The stored run `id` as `flowlab export --json` writes it.
    fn export(&self, id: &str) -> Value {
        let o = self.flowlab(&["export", id, "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        json(&o)
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        self.remove();
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn succeeded(o: &Output) {
    assert!(o.status.success(), "{}\nstdout: {}", stderr(o), stdout(o));
}

/// Every flow's result of a `flowlab run --json` document against the published schema.
fn check_flows_against_the_schema(doc: &Value) {
    let schema = json_schema::schema();
    let mut validator = json_schema::Validator::new(&schema);
    let flows = doc["flows"].as_array().expect("flows");
    assert!(!flows.is_empty());
    for f in flows {
        assert_eq!(f["error"], Value::Null, "{f:#}");
        let errors = validator.check(None, &f["result"]);
        assert!(errors.is_empty(), "schema errors: {errors:#?}\nin {f:#}");
    }
}

#[test]
fn the_rfc2544_example_runs_on_the_simulated_bottleneck() {
    let db = Db::new("rfc2544");
    let o = db.flowlab(&["run", RFC2544, "--sim", BOTTLENECK, "--json"]);
    succeeded(&o);
    let doc = json(&o);
    assert_eq!(doc["experiment"], "lab-bottleneck-rfc2544");
    assert_eq!(doc["network"]["kind"], "sim");
    assert_eq!(doc["network"]["file"], BOTTLENECK);
    assert_eq!(doc["network"]["name"], "bottleneck");
    check_flows_against_the_schema(&doc);
    // Just under the link: 9.73 Mbit/s of payload fill 10 Mb/s (a 1.5 s trial a little above
    // fits the 32 KiB queue).
    let found = doc["search"]["rate_bps"].as_u64().expect("a throughput");
    assert!((9_500_000..10_000_000).contains(&found), "{found}");

    let run = doc["run"].to_string();
    let show = db.flowlab(&["show", &run]);
    succeeded(&show);
    let hash = doc["network"]["sha256"].as_str().unwrap();
    let named = format!("sim {BOTTLENECK} (bottleneck, sha256 {})", &hash[..12]);
    assert!(
        stdout(&show).contains(&format!("network   {named}\n")),
        "{}",
        stdout(&show)
    );
    let history = db.flowlab(&["history"]);
    succeeded(&history);
    assert!(
        stdout(&history).contains(&format!("lab-bottleneck-rfc2544 on {named}")),
        "{}",
        stdout(&history)
    );
    let html = std::env::temp_dir().join(format!("flowlab-simrun-{}.html", std::process::id()));
    let report = db.flowlab(&["report", &run, "-o", html.to_str().unwrap()]);
    succeeded(&report);
    let page = std::fs::read_to_string(&html).unwrap();
    let _ = std::fs::remove_file(&html);
    assert!(
        page.contains(hash),
        "the report's parameters name the network"
    );
}

#[test]
fn the_offered_load_example_runs_on_the_simulated_three_hosts() {
    let db = Db::new("offered-load");
    let o = db.flowlab(&["run", OFFERED_LOAD, "--sim", LAB_THREE]);
    succeeded(&o);
    let text = stdout(&o);
    assert!(
        text.starts_with(
            "experiment lab-three-offered-load (a search, 4 agents), network sim\n  \
             examples/sim/lab-three.toml (three, sha256 "
        ),
        "{text}"
    );
    assert!(text.contains("stored as run 1 "), "{text}");
    // The result as a sentence and a table in SI units, not JSON, within 80 columns.
    assert!(
        text.contains(
            "\nOffered load: throughput 9.00 Mbit/s without loss (at 9.00 Mbit/s offered);"
        ),
        "{text}"
    );
    assert!(
        text.contains("\n  load  offered  loss  throughput\n     %   Mbit/s     %      Mbit/s\n"),
        "{text}"
    );
    assert!(
        !text.contains('{') && text.lines().all(|l| l.chars().count() <= 80),
        "{text}"
    );
    let run = db.export("1");
    assert_eq!(run["params"]["network"]["name"], "three");
    // The three sources at 10 loads; the search replaces the plan, whose step never runs.
    assert_eq!(run["points"].as_array().unwrap().len(), 30);
    let search = &run["params"]["search"];
    assert_eq!(search["lossless_offered_bps"], 9_000_000, "{search:#}");
    let full = search["full_load_bps"].as_f64().unwrap();
    assert!((9.5e6..10e6).contains(&full), "{full}");
}

/// What a report puts side by side: a simulated run measures what a real one does, except
/// the CPU (nothing runs on a CPU in the simulator).
#[test]
fn simulated_and_real_runs_have_the_same_metrics() {
    let db = Db::new("side-by-side");
    let agent = loopback_agent(&[]);
    let real = db.flowlab(&["test", &agent.addr, "-d", "300ms", "--rate", "1M"]);
    succeeded(&real);
    let experiment =
        std::env::temp_dir().join(format!("flowlab-simrun-{}-pair.toml", std::process::id()));
    std::fs::write(
        &experiment,
        "[experiment]\nname = \"pair\"\n\
         [[host]]\nname = \"a\"\naddress = \"10.0.0.1\"\n\
         [[host]]\nname = \"b\"\naddress = \"10.0.0.2\"\n\
         [[flow]]\nname = \"x\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nduration = \"300ms\"\n\
         [plan]\nserial = [\"x\"]\n",
    )
    .unwrap();
    let simulated = db.flowlab(&["run", experiment.to_str().unwrap(), "--sim", BOTTLENECK]);
    let _ = std::fs::remove_file(&experiment);
    succeeded(&simulated);
    let names = |run: &Value| -> BTreeSet<String> {
        let points = run["points"].as_array().unwrap();
        assert_eq!(points.len(), 1);
        points[0]["metrics"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    };
    let real = names(&db.export("1"));
    let simulated = names(&db.export("2"));
    let measured: BTreeSet<String> = real.into_iter().filter(|n| !n.contains("cpu")).collect();
    assert_eq!(simulated, measured);
    assert!(simulated.contains("goodput_bps") && simulated.contains("delay_p99_us"));
}

#[test]
fn a_host_the_network_lacks_is_one_line_naming_it() {
    let db = Db::new("missing-host");
    let o = db.flowlab(&["run", OFFERED_LOAD, "--sim", BOTTLENECK]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "flowlab: error: examples/sim/bottleneck.toml: host h1 is not in the network \
         (add it to [hosts] or as a host node)\n"
    );
    assert!(stdout(&o).is_empty());
}

#[test]
fn sim_and_lab_exclude_each_other() {
    let db = Db::new("exclusive");
    let o = db.flowlab(&["run", RFC2544, "--sim", BOTTLENECK, "--lab", "bottleneck"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}

/// `flowlab compare`: the transatlantic experiment on its simulated twin twice (the same
/// seeds, so no differences) and on a 26 Mb/s copy of the PVC (the paper's other rate),
/// side by side as text and JSON.
#[test]
fn compare_puts_runs_side_by_side_with_their_differences() {
    let db = Db::new("compare");
    let experiment = "examples/experiments/transatlantic.toml";
    let network = "examples/sim/transatlantic.toml";
    let faster = std::env::temp_dir().join(format!("flowlab-26m-{}.toml", std::process::id()));
    let text = std::fs::read_to_string(format!("{WORKSPACE}/{network}")).unwrap();
    std::fs::write(&faster, text.replace("rate = \"6M\"", "rate = \"26M\"")).unwrap();
    for net in [network, network, faster.to_str().unwrap()] {
        succeeded(&db.flowlab(&["run", experiment, "--sim", net]));
    }
    let _ = std::fs::remove_file(&faster);
    let o = db.flowlab(&["compare", "1", "2", "3"]);
    succeeded(&o);
    let text = stdout(&o);
    assert!(text.contains("run 1     experiment on sim examples/sim/transatlantic.toml"));
    assert!(
        text.contains("flow=udp, total offered load 5 Mbit/s (udp)"),
        "{text}"
    );
    assert!(text.contains("flow=tcp (tcp)"), "{text}");
    let tcp = text.split("flow=tcp").nth(1).unwrap();
    let goodput = tcp.lines().find(|l| l.contains("goodput")).unwrap();
    // Run 2 is run 1 again; over 26 Mb/s TCP is held by its 140,000-byte window instead.
    assert!(goodput.contains(" +0.0 % "), "{goodput}");
    assert!(!tcp.contains("delay"), "TCP delays are not compared: {tcp}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");

    let o = db.flowlab(&["compare", "1", "3", "--json"]);
    succeeded(&o);
    let c = json(&o);
    assert_eq!(c["schema_version"], 1);
    assert_eq!(c["runs"][1]["run"], 3);
    let tcp = &c["flows"][1];
    assert_eq!(tcp["protocol"], "tcp");
    let values = tcp["metrics"][0]["values"].as_array().unwrap();
    let (six, faster) = (values[0].as_f64().unwrap(), values[1].as_f64().unwrap());
    assert!(six < 5.2e6 && faster > 5.3e6, "{values:?}");
    let d = tcp["metrics"][0]["differences"][0]["absolute"]
        .as_f64()
        .unwrap();
    assert_eq!(d, faster - six);

    assert_one_line_error(&db.flowlab(&["compare", "1", "99"]), "99");
    assert!(!db.flowlab(&["compare", "1"]).status.success());
}
