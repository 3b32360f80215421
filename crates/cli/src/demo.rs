//! `flowlab demo`: an agent in this process on 127.0.0.1 and a small version of the WS2NetTest
//! paper's Test 1 (a 2 Mb/s flow, packet sizes 100 to 8000 B, UDP and TCP, loopback mode: round
//! trip, loss, CPU) and Test 3 (round trip at low load), each point repeated for confidence
//! intervals; the run is stored in the results database and ends in an HTML report.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use flowlab_control::{run_test, LocalAgent, TestOptions, TestResult, TestRun};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_units::format_duration_ns;

use crate::args::DemoArgs;

const SIZES: [u32; 7] = [100, 500, 1000, 2000, 4000, 6000, 8000];
const TEST1_RATE: u64 = 2_000_000;
const TEST1_DURATION: Duration = Duration::from_millis(500);
/// Each point runs this many times, for confidence intervals (Figures 5-7 with error bars).
const REPETITIONS: u32 = 3;
/// Test 3: 50 packets/s whatever the size.
const TEST3_PACKETS_PER_SEC: u64 = 50;
const TEST3_COUNT: u64 = 25;

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
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    flowlab_sys::signal::interrupt_flag();
    let local = LocalAgent::start().context("cannot start the demo agent")?;
    let agent: SocketAddr = local.addr();
    println!("flowlab demo: an agent on {agent}; WS2NetTest Test 1 (2 Mb/s, sizes 100-8000 B, UDP and TCP, loopback) and Test 3 (round trip at {TEST3_PACKETS_PER_SEC} packets/s)\n");
    let mut plan = Vec::new();
    for protocol in [Protocol::Udp, Protocol::Tcp] {
        for size in SIZES {
            plan.push((
                "test1",
                spec(protocol, TEST1_RATE, size, Some(TEST1_DURATION), None),
            ));
        }
    }
    for size in SIZES {
        let rate = TEST3_PACKETS_PER_SEC * u64::from(size) * 8;
        plan.push((
            "test3",
            spec(Protocol::Udp, rate, size, None, Some(TEST3_COUNT)),
        ));
    }
    println!(
        "{:<6} {:<4} {:>6}  {:>10} {:>10} {:>10}  {:>8}  {:>10} {:>10}   (mean of {REPETITIONS} runs)",
        "test", "prot", "size", "rtt mean", "rtt p99", "rtt max", "loss", "cpu client", "cpu agent"
    );
    let mut results: Vec<serde_json::Value> = Vec::new();
    let mut stored: Vec<(serde_json::Value, u32, TestRun)> = Vec::new();
    let mut failure = None;
    'plan: for (name, spec) in plan {
        let mut runs = Vec::new();
        for repetition in 0..REPETITIONS {
            if flowlab_sys::signal::is_interrupted() {
                break 'plan;
            }
            let options = TestOptions {
                target: agent.to_string(),
                spec: spec.clone(),
                key: None,
                drain: Duration::from_millis(100),
                interface: None,
                agent_interface: None,
            };
            match run_test(&options, &mut |_| {}) {
                Ok(run) => {
                    results.push(serde_json::json!({ "test": name, "repetition": repetition, "result": run.result }));
                    let proto = if spec.protocol == Protocol::Udp {
                        "udp"
                    } else {
                        "tcp"
                    };
                    let point =
                        serde_json::json!({ "test": name, "proto": proto, "size": spec.size });
                    runs.push(run.result.clone());
                    stored.push((point, repetition, run));
                }
                Err(e) => {
                    failure = Some(e.to_string());
                    break 'plan;
                }
            }
        }
        println!("{}", row(name, &runs));
        std::io::stdout().flush()?;
    }
    let _ = local.stop();
    let document = serde_json::json!({
        "schema_version": flowlab_control::SCHEMA_VERSION,
        "demo": "WS2NetTest Test 1 and Test 3 on loopback",
        "tests": results,
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&document)? + "\n")
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("\nAll results (JSON): {}", args.out.display());
    let points: Vec<(serde_json::Value, u32, &TestRun)> = stored
        .iter()
        .map(|(p, r, run)| (p.clone(), *r, run))
        .collect();
    let params = serde_json::json!({ "description": "WS2NetTest Test 1 and Test 3 on loopback", "repetitions": REPETITIONS });
    let id = crate::history_cmd::store_test_run(args.db.as_deref(), "demo", &params, &points)?;
    crate::plot_cmd::write_report(args.db.as_deref(), id, &args.report)?;
    println!(
        "Stored as run {id}. Report (round trip, loss and CPU against packet size, UDP and TCP, \
         with 95% confidence intervals): {}",
        args.report.display()
    );
    if let Some(e) = failure {
        anyhow::bail!("demo stopped: {e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of the table: means over a point's repetitions.
fn row(name: &str, runs: &[TestResult]) -> String {
    let Some(first) = runs.first() else {
        return format!("{name:<6} (no run finished)");
    };
    let mean = |pick: &dyn Fn(&TestResult) -> Option<f64>| {
        let values: Vec<f64> = runs.iter().filter_map(pick).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let rtt = |f: fn(&flowlab_stats::LatencySummary) -> f64| {
        mean(&|r: &TestResult| r.summary.round_trip.as_ref().map(f))
            .map_or("-".into(), format_duration_ns)
    };
    let cpu = |f: fn(&TestResult) -> Option<&flowlab_results::RoleCpu>| {
        mean(&|r: &TestResult| f(r).map(|c| c.user_pct + c.system_pct - c.pacing_spin_pct))
            .map_or("-".into(), |v| format!("{v:.1}%"))
    };
    let protocol = crate::output::protocol_name(first.spec.protocol);
    format!(
        "{:<6} {:<4} {:>6}  {:>10} {:>10} {:>10}  {:>7.2}%  {:>10} {:>10}",
        name,
        protocol,
        first.spec.size,
        rtt(|d| d.mean_ns),
        rtt(|d| d.p99_ns),
        rtt(|d| d.max_ns),
        mean(&|r: &TestResult| Some(r.summary.loss_pct)).unwrap_or(0.0),
        cpu(|r| r.summary.client_role_cpu.as_ref()),
        cpu(|r| r.summary.agent_role_cpu.as_ref()),
    )
}
