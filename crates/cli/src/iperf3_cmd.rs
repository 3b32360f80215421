//! `flowlab test --iperf3` (against `iperf3 -s`) and `flowlab serve --iperf3` (answering
//! `iperf3 -c`): flags in, calls to `flowlab_runner::iperf3`.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::anyhow;
use flowlab_control::{client::resolve_with_port, Limits, TestOptions};
use flowlab_runner::iperf3::client;
use flowlab_runner::iperf3::server::{self, ServerLimits};
use flowlab_runner::output::{conclude, print_result};
use flowlab_units::Rate;

use crate::args::{ServeArgs, TestArgs};

/// `flowlab test --iperf3 HOST[:PORT]`.
pub fn run_test(args: &TestArgs) -> anyhow::Result<ExitCode> {
    let rate = args.rate.and_then(|r| match r {
        Rate::Max => None,
        Rate::BitsPerSec(bps) => Some(bps),
    });
    let plan = client::plan(
        args.udp,
        args.reverse,
        args.flows,
        args.duration,
        args.size,
        rate,
    )?;
    let stop = flowlab_sys::signal::interrupt_flag();
    let run = client::run_test(&args.target, &plan, args.drain, stop)?;
    let options = TestOptions {
        target: args.target.clone(),
        spec: run.result.spec.clone(),
        key: None,
        drain: args.drain,
        interface: None,
        agent_interface: None,
    };
    if !args.no_store {
        let id = flowlab_runner::record::store_single_test(args.db.as_deref(), &options, &run)?;
        eprintln!("flowlab: stored as run {id} (flowlab show {id})");
    }
    let json = serde_json::to_string_pretty(&run.result)?;
    print_result(&json, args.output.as_deref(), args.json, || {
        flowlab_runner::format::render(&run.result)
    })?;
    let ending = conclude(run.result.error.as_deref(), run.result.interrupted, "test");
    Ok(ending.unwrap_or(ExitCode::SUCCESS))
}

/// Starts the iperf3 server `--iperf3` asks for, if any, with the agent's limits.
pub fn start_server(args: &ServeArgs, limits: &Limits) -> anyhow::Result<()> {
    let Some(spec) = &args.iperf3 else {
        return Ok(());
    };
    let addr = match spec.parse::<u16>() {
        Ok(port) => std::net::SocketAddr::new(args.bind, port),
        Err(_) => resolve_with_port(spec, flowlab_iperf3::DEFAULT_PORT).map_err(|e| anyhow!(e))?,
    };
    let limits = ServerLimits::of_agent(limits, args.max_connections as usize);
    let quiet = args.quiet;
    let log = Arc::new(move |line: String| {
        if !quiet || line.contains("refused") {
            eprintln!("flowlab: {line}");
        }
    });
    let (_, local) = server::spawn(addr, limits, log)?;
    eprintln!("flowlab: answering iperf3 clients on {local} (TCP and UDP)");
    Ok(())
}
