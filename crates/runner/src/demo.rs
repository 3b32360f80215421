//! The demo: an agent in this process on 127.0.0.1 and a small version of the WS2NetTest
//! paper's Test 1 (a 2 Mb/s flow, packet sizes 100 to 8000 B, UDP and TCP, loopback mode:
//! round trip, loss, CPU) and Test 3 (round trip at low load), each point repeated for
//! confidence intervals.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use flowlab_control::{run_test, LocalAgent, TestOptions, TestRun};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_store::RunId;
use serde_json::{json, Value};

use crate::observer::{Event, Observer};

const SIZES: [u32; 7] = [100, 500, 1000, 2000, 4000, 6000, 8000];
const TEST1_RATE: u64 = 2_000_000;
const TEST1_DURATION: Duration = Duration::from_millis(500);
/// Each point runs this many times, for confidence intervals (Figures 5-7 with error bars).
pub const REPETITIONS: u32 = 3;
/// Test 3: 50 packets/s whatever the size.
pub const TEST3_PACKETS_PER_SEC: u64 = 50;
const TEST3_COUNT: u64 = 25;
const DESCRIPTION: &str = "WS2NetTest Test 1 and Test 3 on loopback";

fn spec(
    protocol: Protocol,
    rate_bps: u64,
    size: u32,
    duration: Option<Duration>,
    count: Option<u64>,
) -> TestSpec {
    TestSpec {
        protocol,
        direction: Direction::Loopback,
        rate_bps: Some(rate_bps),
        size,
        duration_ns: duration.map(|d| d.as_nanos() as u64),
        count,
        interval_ns: None,
        flows: 1,
        client_udp_ports: Vec::new(),
        raw: None,
        busy_poll: false,
        packet_log: false,
        socket: Default::default(),
        traffic: None,
        seed: 1,
        authenticated_packets: false,
        echo_every: None,
        omit_ns: None,
        pacing: Default::default(),
        multicast: None,
    }
}

/// Test 1 over UDP and TCP, then Test 3, each at every size.
fn plan() -> Vec<(&'static str, TestSpec)> {
    let mut plan = Vec::new();
    for protocol in [Protocol::Udp, Protocol::Tcp] {
        for size in SIZES {
            let test1 = spec(protocol, TEST1_RATE, size, Some(TEST1_DURATION), None);
            plan.push(("test1", test1));
        }
    }
    for size in SIZES {
        let rate = TEST3_PACKETS_PER_SEC * u64::from(size) * 8;
        let test3 = spec(Protocol::Udp, rate, size, None, Some(TEST3_COUNT));
        plan.push(("test3", test3));
    }
    plan
}

/// What the demo ran: each test with its point and repetition, and why it stopped early.
pub struct Demo {
    pub tests: Vec<(Value, u32, TestRun)>,
    pub failure: Option<String>,
}

/// Runs the demo against an agent of its own; stops at Ctrl-C or at the first failed test.
pub fn run_demo(observer: &mut dyn Observer) -> anyhow::Result<Demo> {
    let local = LocalAgent::start().context("cannot start the demo agent")?;
    observer.on(Event::DemoStarted(local.addr()));
    let mut demo = Demo {
        tests: Vec::new(),
        failure: None,
    };
    'plan: for (name, spec) in plan() {
        let mut results = Vec::new();
        for repetition in 0..REPETITIONS {
            if flowlab_sys::signal::is_interrupted() {
                break 'plan;
            }
            let options = TestOptions {
                target: local.addr().to_string(),
                spec: spec.clone(),
                key: None,
                drain: Duration::from_millis(100),
                interface: None,
                agent_interface: None,
                bind: None,
                cport: None,
            };
            match run_test(&options, &mut |_| {}) {
                Ok(run) => {
                    let proto = if spec.protocol == Protocol::Udp {
                        "udp"
                    } else {
                        "tcp"
                    };
                    let point = json!({ "test": name, "proto": proto, "size": spec.size });
                    results.push(run.result.clone());
                    demo.tests.push((point, repetition, run));
                }
                Err(e) => {
                    demo.failure = Some(e.to_string());
                    break 'plan;
                }
            }
        }
        observer.on(Event::DemoPointFinished {
            test: name,
            results: &results,
        });
    }
    let _ = local.stop();
    Ok(demo)
}

impl Demo {
    /// Writes every result as one JSON document.
    pub fn save(&self, out: &Path) -> anyhow::Result<()> {
        let tests: Vec<Value> = self
            .tests
            .iter()
            .map(|(point, repetition, run)| {
                json!({ "test": point["test"], "repetition": repetition, "result": run.result })
            })
            .collect();
        let document = json!({
            "schema_version": flowlab_control::SCHEMA_VERSION,
            "demo": DESCRIPTION,
            "tests": tests,
        });
        std::fs::write(out, serde_json::to_string_pretty(&document)? + "\n")
            .with_context(|| format!("cannot write {}", out.display()))
    }

    /// Stores the demo as one run and writes its HTML report to `report`.
    pub fn store(&self, db: Option<&Path>, report: &Path) -> anyhow::Result<RunId> {
        let points: Vec<(Value, u32, &TestRun)> = self
            .tests
            .iter()
            .map(|(p, r, run)| (p.clone(), *r, run))
            .collect();
        let id = crate::record::store_test_run(db, "demo", &run_params(), &points)?;
        crate::record::write_report(db, id, report)?;
        Ok(id)
    }
}

/// The stored run's parameters, which its report shows: what each test sent, how fast and
/// for how long.
fn run_params() -> Value {
    json!({
        "description": DESCRIPTION,
        "repetitions": REPETITIONS,
        "sizes": SIZES.map(|b| flowlab_units::format_bytes(f64::from(b))).join(", "),
        "test1": format!(
            "UDP and TCP at {} for {} each, loopback",
            flowlab_units::format_rate(TEST1_RATE as f64),
            flowlab_units::format_duration_ns(TEST1_DURATION.as_nanos() as f64)
        ),
        "test3": format!(
            "UDP at {TEST3_PACKETS_PER_SEC} packets/s, {TEST3_COUNT} packets, loopback"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_the_papers() {
        let p = plan();
        assert_eq!(p.len(), 3 * SIZES.len());
        assert!(p[..7]
            .iter()
            .all(|(n, s)| *n == "test1" && s.protocol == Protocol::Udp));
        assert!(p[7..14].iter().all(|(_, s)| s.protocol == Protocol::Tcp));
        let (name, last) = &p[20];
        assert_eq!(
            (*name, last.size, last.count),
            ("test3", 8000, Some(TEST3_COUNT))
        );
        assert_eq!(last.rate_bps, Some(50 * 8000 * 8), "50 packets/s");
        assert!(p.iter().all(|(_, s)| s.validate().is_ok()));
    }

    #[test]
    fn the_report_names_the_rate_and_duration() {
        let params = run_params();
        assert_eq!(
            params["test1"],
            "UDP and TCP at 2.00 Mbit/s for 500 ms each, loopback"
        );
        assert!(params["test3"].as_str().unwrap().contains("50 packets/s"));
    }
}
