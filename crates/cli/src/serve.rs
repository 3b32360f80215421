//! `flowlab serve`: the agent.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use flowlab_control::{load_key, AgentConfig, AgentStats, ConnLimits, Limits};
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
        return reflector.map_or(Ok(ExitCode::SUCCESS), |r| r.finish(true));
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
    let listener = host::bind(args.bind, args.port)?;
    flowlab_sys::signal::interrupt_flag();
    eprint!("{}", format::agent_banner(listener.local_addr()?, &config));
    let quiet = args.quiet;
    let log: Arc<dyn Fn(String) + Send + Sync> = Arc::new(move |line: String| {
        if !quiet {
            eprintln!("{line}");
        }
    });
    let stats = Arc::new(AgentStats::default());
    let stop = AtomicBool::new(false);
    flowlab_control::serve(listener, config, stats.clone(), &stop, log)?;
    if let Some(reflector) = reflector {
        reflector.finish(false)?;
    }
    eprintln!("{}", format::agent_stopping(&stats));
    Ok(ExitCode::SUCCESS)
}
