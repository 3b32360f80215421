//! `flowlab serve`: the agent.

use std::process::ExitCode;

use flowlab_control::{load_key, AgentConfig, ConnLimits, Limits};
use flowlab_runner::daemon::{detach, PidFile};
use flowlab_runner::{format, host};

use crate::args::ServeArgs;

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    if let Some(cpus) = &args.cpus {
        host::pin_cpus(&cpus.0)?;
    }
    let key = args.key_file.as_deref().map(load_key).transpose()?;
    let pidfile = args.pidfile.as_deref().map(PidFile::claim).transpose()?;
    // The port is open before the agent leaves the terminal, so a port in use is seen there.
    let listener = match args.stamp_only {
        true => None,
        false => Some(host::bind(args.bind, args.port)?),
    };
    let metrics = args.metrics.map(host::bind_metrics).transpose()?;
    detach(args.daemon, args.logfile.as_deref(), pidfile.as_ref())?;
    let reflector = crate::stamp_cmd::start_reflector(&args, key.as_deref())?;
    let Some(listener) = listener else {
        // The reflector (`--stamp-only` requires `--stamp`) runs alone until Ctrl-C.
        flowlab_sys::signal::interrupt_flag();
        return reflector.map_or(Ok(ExitCode::SUCCESS), |r| {
            crate::stamp_cmd::finish_reflector(r, true)
        });
    };
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
    flowlab_sys::signal::interrupt_flag();
    eprint!("{}", format::agent_banner(listener.local_addr()?, &config));
    if let Some(metrics) = &metrics {
        eprintln!("metrics: http://{}/metrics", metrics.local_addr()?);
    }
    let quiet = args.quiet;
    let stats = host::serve_agent(listener, config, metrics, move |line| {
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
