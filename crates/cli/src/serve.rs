//! `flowlab serve`: the agent.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use flowlab_control::{load_key, AgentConfig, AgentStats, ConnLimits, Limits};
use flowlab_units::{format_duration_ns, format_rate};

use crate::args::ServeArgs;

/// Binds the control listener. The default `::` is dual-stack (IPv6 and IPv4); on a host
/// without IPv6 it falls back to `0.0.0.0`.
pub fn bind(ip: IpAddr, port: u16) -> anyhow::Result<TcpListener> {
    let addr = SocketAddr::new(ip, port);
    match TcpListener::bind(addr) {
        Ok(l) => Ok(l),
        // Only a host without IPv6 falls back; a port in use is reported as such.
        Err(e)
            if ip == IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                && e.kind() != std::io::ErrorKind::AddrInUse =>
        {
            TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
                .with_context(|| format!("cannot listen on port {port}"))
        }
        Err(e) => Err(e).with_context(|| format!("cannot listen on {addr}")),
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    crate::pin_cpus(args.cpus.as_ref())?;
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
    let listener = bind(args.bind, args.port)?;
    flowlab_sys::signal::interrupt_flag();
    let local = listener.local_addr()?;
    eprintln!(
        "flowlab agent {} listening on {local}{}",
        env!("CARGO_PKG_VERSION"),
        if config.key.is_some() {
            " (key required)"
        } else {
            ""
        }
    );
    eprintln!("{}", limits_line(&config.limits));
    eprintln!("{}", connections_line(&config.connections));
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
    use std::sync::atomic::Ordering::Relaxed;
    eprintln!(
        "flowlab agent stopping: {} connections ({} more turned away), {} tests run, {} refused, {} malformed control connections",
        stats.sessions.load(Relaxed),
        stats.turned_away.load(Relaxed),
        stats.tests_run.load(Relaxed),
        stats.refused.load(Relaxed),
        stats.malformed_control.load(Relaxed)
    );
    Ok(ExitCode::SUCCESS)
}

/// The limits in force, said at start: a stranger's test can ask for no more.
fn limits_line(limits: &Limits) -> String {
    let rate = limits
        .max_rate_bps
        .map_or("unlimited rate".into(), |r| format_rate(r as f64));
    format!(
        "limits: {rate} and {} per test, {} flows each, {} tests at once\n  \
         (--max-rate, --max-duration: 'unlimited' lifts; --max-flows, --max-tests)",
        format_duration_ns(limits.max_duration.as_nanos() as f64),
        limits.max_flows,
        limits.max_tests,
    )
}

/// The caps on connections still in setup, said with the other limits.
fn connections_line(c: &ConnLimits) -> String {
    use flowlab_control::agent::{HANDSHAKE_TIMEOUT, START_TIMEOUT};
    format!(
        "connections in setup: {} at once, {} per source; {} s from connecting to the request, \
         {} s from acceptance to start\n  (--max-connections, --max-connections-per-source)",
        c.max_connections,
        c.max_per_source,
        HANDSHAKE_TIMEOUT.as_secs(),
        START_TIMEOUT.as_secs(),
    )
}
