//! `flowlab serve`: the agent.

use std::process::ExitCode;

use flowlab_control::{load_key, AgentConfig, ConnLimits, Limits};
use flowlab_runner::{format, host};

use crate::args::ServeArgs;

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(cpus) = &args.cpus {
        host::pin_cpus(&cpus.0)?;
    }
    let key = match &args.key_file {
        Some(path) => Some(load_key(path)?),
        None => None,
    };
    let reflector = crate::stamp_cmd::start_reflector(&args, key.as_deref())?;
    if args.stamp_only {
        // The reflector (`--stamp-only` requires `--stamp`) runs alone until Ctrl-C.
        flowlab_sys::signal::interrupt_flag();
        return reflector.map_or(Ok(ExitCode::SUCCESS), |r| {
            crate::stamp_cmd::finish_reflector(r, true)
        });
    }
    let config = AgentConfig {
        limits: Limits {
            max_duration: args.max_duration,
            max_rate_bps: args.max_rate.0,
            max_tests: args.max_tests,
            max_flows: args.max_flows,
        },
        key,
        allow_relay: args.allow_relay,
        connections: ConnLimits {
            max_connections: args.max_connections as usize,
            max_per_source: args.max_connections_per_source as usize,
        },
    };
    flowlab_runner::iperf3::serve_beside(args.iperf3.as_deref(), args.bind, &config, args.quiet)?;
    let listener = host::bind(args.bind, args.port)?;
    flowlab_sys::signal::interrupt_flag();
    eprint!("{}", format::agent_banner(listener.local_addr()?, &config));
    let quiet = args.quiet;
    let stats = host::serve_agent(listener, config, move |line| {
        if !quiet {
            eprintln!("{line}");
        }
    })?;
    if let Some(reflector) = reflector {
        crate::stamp_cmd::finish_reflector(reflector, false)?;
    }
    eprintln!("{}", format::agent_stopping(&stats));
    Ok(ExitCode::SUCCESS)
}
