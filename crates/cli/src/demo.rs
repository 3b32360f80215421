//! `flowlab demo`: an agent in this process on 127.0.0.1 and a small version of the WS2NetTest
//! paper's Test 1 (a 2 Mb/s flow, packet sizes 100 to 8000 B, UDP and TCP, loopback mode: round
//! trip, loss, CPU) and Test 3 (round trip at low load).

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use flowlab_control::{run_test, AgentConfig, AgentStats, TestOptions, TestResult};
use flowlab_units::format_duration_ns;
use flowlab_wire::{Direction, Protocol, TestSpec};

use crate::args::DemoArgs;

const SIZES: [u32; 7] = [100, 500, 1000, 2000, 4000, 6000, 8000];
const TEST1_RATE: u64 = 2_000_000;
const TEST1_DURATION: Duration = Duration::from_millis(1500);
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
        busy_poll: false,
        packet_log: false,
        socket: Default::default(),
        traffic: None,
        seed: 1,
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    flowlab_sys::signal::interrupt_flag();
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .context("cannot start the demo agent")?;
    let agent: SocketAddr = listener.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let agent_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let quiet: Arc<dyn Fn(String) + Send + Sync> = Arc::new(|_| {});
            flowlab_control::serve(
                listener,
                AgentConfig::default(),
                Arc::new(AgentStats::default()),
                &stop,
                quiet,
            )
        })
    };
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
        "{:<6} {:<4} {:>6}  {:>10} {:>10} {:>10}  {:>8}  {:>10} {:>10}",
        "test", "prot", "size", "rtt mean", "rtt p99", "rtt max", "loss", "cpu client", "cpu agent"
    );
    let mut results: Vec<serde_json::Value> = Vec::new();
    let mut failure = None;
    for (name, spec) in plan {
        if flowlab_sys::signal::is_interrupted() {
            break;
        }
        let options = TestOptions {
            target: agent.to_string(),
            spec,
            key: None,
            drain: Duration::from_millis(200),
        };
        match run_test(&options, &mut |_| {}) {
            Ok(run) => {
                println!("{}", row(name, &run.result));
                std::io::stdout().flush()?;
                results.push(serde_json::json!({ "test": name, "result": run.result }));
            }
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = agent_thread.join();
    let document = serde_json::json!({
        "schema_version": flowlab_control::SCHEMA_VERSION,
        "demo": "WS2NetTest Test 1 and Test 3 on loopback",
        "tests": results,
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&document)? + "\n")
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    println!("\nAll results (JSON): {}", args.out.display());
    if let Some(e) = failure {
        anyhow::bail!("demo stopped: {e}");
    }
    Ok(ExitCode::SUCCESS)
}

/// CPU of the role's threads (client and agent share this process, so process figures would
/// not tell them apart), less the busy-wait of precise pacing: what the packets cost.
fn cpu(c: Option<&flowlab_results::RoleCpu>) -> String {
    c.map_or("-".into(), |c| {
        format!("{:.1}%", c.user_pct + c.system_pct - c.pacing_spin_pct)
    })
}

fn row(name: &str, r: &TestResult) -> String {
    let s = &r.summary;
    let rtt = |pick: fn(&flowlab_stats::LatencySummary) -> f64| {
        s.round_trip
            .as_ref()
            .map_or("-".into(), |d| format_duration_ns(pick(d)))
    };
    let protocol = match r.spec.protocol {
        Protocol::Udp => "UDP",
        Protocol::Tcp => "TCP",
    };
    format!(
        "{:<6} {:<4} {:>6}  {:>10} {:>10} {:>10}  {:>7.2}%  {:>10} {:>10}",
        name,
        protocol,
        r.spec.size,
        rtt(|d| d.mean_ns),
        rtt(|d| d.p99_ns),
        rtt(|d| d.max_ns),
        s.loss_pct,
        cpu(s.client_role_cpu.as_ref()),
        cpu(s.agent_role_cpu.as_ref()),
    )
}
