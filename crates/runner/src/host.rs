//! What flowlab does on this host beside tests: listen as an agent, keep to some CPUs, bring
//! a lab of namespaces up.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use flowlab_control::metrics::MetricsServer;
use flowlab_control::{AgentConfig, AgentStats};
use flowlab_netns::lab::{self, LabSpec, LabState, UpOptions};

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

/// Binds the listener of `--metrics`, said in one line, the flag's own, if it cannot.
pub fn bind_metrics(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).with_context(|| format!("cannot listen for --metrics on {addr}"))
}

/// Runs the agent on `listener` until the process is interrupted, each line of its log to
/// `log`, its Prometheus metrics on `metrics` if given; returns what it did.
pub fn serve_agent(
    listener: TcpListener,
    config: AgentConfig,
    metrics: Option<TcpListener>,
    log: impl Fn(String) + Send + Sync + 'static,
) -> anyhow::Result<Arc<AgentStats>> {
    let stats = Arc::new(AgentStats::default());
    let _metrics = metrics
        .map(|l| MetricsServer::start(l, stats.clone()))
        .transpose()?;
    let never = AtomicBool::new(false);
    flowlab_control::serve(listener, config, stats.clone(), &never, Arc::new(log))?;
    Ok(stats)
}

/// Pins this process to `cpus` (`--cpus`), before it starts any thread.
pub fn pin_cpus(cpus: &[usize]) -> anyhow::Result<()> {
    flowlab_sys::cpu::pin_to(cpus).map_err(|e| {
        let list: Vec<String> = cpus.iter().map(usize::to_string).collect();
        let why = if e.kind() == std::io::ErrorKind::InvalidInput {
            "no such CPU is online here".to_string()
        } else {
            e.to_string()
        };
        anyhow::anyhow!("cannot run on CPUs {}: {why}", list.join(","))
    })
}

/// Creates the lab `file` describes, its state under `run_dir`, with an agent on every host
/// on `port` if `agents` (this very binary, serving).
pub fn lab_up(file: &Path, run_dir: PathBuf, port: u16, agents: bool) -> anyhow::Result<LabState> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {name}"))?;
    let spec = LabSpec::parse(&text).map_err(|e| e.with_file(&name))?;
    let mut opts = UpOptions::new(run_dir);
    opts.file = Some(name.clone());
    opts.agent_port = port;
    let exe = std::env::current_exe().context("finding the flowlab binary for the agents")?;
    opts.emulator_exe = Some(exe.clone());
    if agents {
        opts.agent_exe = Some(exe);
    }
    lab::up(&spec, &opts).map_err(|e| match e {
        lab::LabError::Spec(e) => anyhow::anyhow!(e.with_file(&name)),
        e => anyhow::anyhow!(e),
    })
}
