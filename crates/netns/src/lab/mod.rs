//! `flowlab lab`: a local testbed of hosts as network namespaces, described in a TOML file.
//!
//! Each host and each switch is a namespace `fl-<lab>-<node>`; a link is a veth pair created
//! directly inside the two namespaces (nothing ever appears in the caller's namespace); a
//! switch is a Linux bridge in its own namespace. Hosts with more than one link forward, and
//! every host gets shortest-path routes to every subnet (see [`plan`]). Links may be
//! rate-limited (tbf on each egress direction) and delayed (netem, where the kernel has it), or
//! emulated: run through flowlab's emulator, in a namespace of its own (see [`emulate`]).
//!
//! What was created is recorded in `<run dir>/<lab>/state.json` before anything is created,
//! so that `down` can undo a lab even after a crash; and `down` also finds namespaces with the
//! lab's prefix that no state mentions. Deleting a namespace deletes its veths and bridges, so
//! cleanup is: stop every process inside the lab's namespaces, then delete the namespaces.

pub mod emulate;
pub mod plan;
pub mod spec;

use std::fs;
use std::io::ErrorKind;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

pub use plan::{
    lab_of_ns, lab_prefix, ns_of, IfacePlan, LinkPlan, NodeKind, NodePlan, Plan, RoutePlan,
    Shaping, BRIDGE, LAB_NS_PREFIX,
};
pub use spec::{LabSpec, LinkSpec, NodeSpec, SpecError};

use crate::{parse_netns_list, NetnsError, Runner, SystemRunner};

/// Control port of the agents `up` starts.
pub const AGENT_PORT: u16 = 9470;
/// Name of the state file inside a lab's run directory.
pub const STATE_FILE: &str = "state.json";
/// Version of the state file's layout.
pub const STATE_VERSION: u32 = 1;

/// Errors of lab operations; every message is one line.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error(transparent)]
    Spec(#[from] SpecError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// The operation would clash with something that exists (or is not allowed).
    #[error("{0}")]
    Refused(String),
    /// No such lab or host.
    #[error("{0}")]
    NotFound(String),
    /// An agent did not start.
    #[error("{0}")]
    Agent(String),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

/// What `up` created, as saved in `state.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabState {
    pub version: u32,
    pub name: String,
    /// The lab file, as given to `up`.
    pub file: Option<String>,
    pub created_unix: u64,
    /// False while `up` is still creating (or if it crashed half-way).
    pub complete: bool,
    pub plan: Plan,
    pub agents: Vec<AgentState>,
    /// The emulator of the lab's emulated links, if it has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<EmulatorState>,
}

/// The emulator process `up` started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulatorState {
    pub ns: String,
    pub pid: u32,
    pub log: PathBuf,
    /// Its counters and timing, rewritten every second (see `flowlab_emu::EmuReport`).
    pub report: PathBuf,
}

/// An agent started by `up`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    pub host: String,
    pub ns: String,
    pub pid: u32,
    /// Where clients reach it: the host's first IPv4 address and the port.
    pub addr: String,
    pub log: PathBuf,
}

impl LabState {
    /// Reads `<run_dir>/<lab>/state.json`; `Ok(None)` if there is none.
    pub fn load(run_dir: &Path, lab: &str) -> Result<Option<LabState>, LabError> {
        let path = run_dir.join(lab).join(STATE_FILE);
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(|e| {
                LabError::Refused(format!(
                    "{}: unreadable lab state ({e}); `flowlab lab down {lab}` still removes the lab",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(format!("reading {}", path.display()))(e)),
        }
    }

    /// Writes the state atomically (temporary file, then rename).
    fn save(&self, dir: &Path) -> Result<(), LabError> {
        let path = dir.join(STATE_FILE);
        let tmp = dir.join(".state.json.tmp");
        let text = serde_json::to_string_pretty(self).expect("state serialises");
        fs::write(&tmp, text + "\n")
            .and_then(|()| fs::rename(&tmp, &path))
            .map_err(io_err(format!("writing {}", path.display())))
    }

    /// The table `up` and `status` print: host, namespace, addresses, agent.
    pub fn table(&self) -> String {
        let mut rows = vec![[
            "HOST".to_string(),
            "NAMESPACE".into(),
            "ADDRESSES".into(),
            "AGENT".into(),
        ]];
        for n in &self.plan.nodes {
            let agent = match self.agents.iter().find(|a| a.host == n.name) {
                Some(a) if pid_alive(a.pid) => a.addr.clone(),
                Some(a) => format!("{} (not running)", a.addr),
                None if n.kind == NodeKind::Switch => "(switch)".into(),
                None => match &self.emulator {
                    Some(e) if n.kind == NodeKind::Emulator && pid_alive(e.pid) => {
                        format!("(emulator, report {})", e.report.display())
                    }
                    Some(_) if n.kind == NodeKind::Emulator => "(emulator, not running)".into(),
                    _ => "-".into(),
                },
            };
            let mut name = n.name.clone();
            if n.router {
                name += " (router)";
            }
            let addrs = n.addresses();
            rows.push([
                name,
                n.ns.clone(),
                if addrs.is_empty() {
                    "-".into()
                } else {
                    addrs.join(" ")
                },
                agent,
            ]);
        }
        format_table(&rows)
    }
}

/// Left-aligned columns separated by two spaces, one row a line.
pub fn format_table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 < N {
                line += &format!("{c:<w$}  ", w = widths[i]);
            } else {
                line += c;
            }
        }
        out += line.trim_end();
        out.push('\n');
    }
    out
}

/// Whether process `pid` exists and is not a zombie (an agent that exited stays a zombie
/// until init, its parent after `setsid -f`, reaps it).
pub fn pid_alive(pid: u32) -> bool {
    pid > 0
        && fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            // "pid (comm) S ...": the state follows the last ')'.
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .is_some_and(|state| state != "Z" && state != "X")
        })
}

/// Where labs keep state, pidfiles and agent logs: `$FLOWLAB_LAB_DIR`, else
/// `/run/flowlab-lab` for root (a tmpfs, so a reboot forgets labs exactly when the kernel
/// forgets their namespaces), else `$XDG_RUNTIME_DIR/flowlab-lab`.
pub fn default_run_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FLOWLAB_LAB_DIR").filter(|d| !d.is_empty()) {
        return d.into();
    }
    let root = fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| crate::parse_effective_uid(&s))
        == Some(0);
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(x) if !root => PathBuf::from(x).join("flowlab-lab"),
        _ => PathBuf::from("/run/flowlab-lab"),
    }
}

/// Options of [`up`].
#[derive(Debug, Clone)]
pub struct UpOptions {
    /// Parent of the lab's state directory (see [`default_run_dir`]).
    pub run_dir: PathBuf,
    /// The flowlab binary to run `serve` with on each host; `None`: no agents.
    pub agent_exe: Option<PathBuf>,
    pub agent_port: u16,
    /// The lab file's name, recorded in the state.
    pub file: Option<String>,
    /// How long each agent may take to listen.
    pub agent_timeout: Duration,
    /// The flowlab binary to run `lab emulate` with, for labs with emulated links.
    pub emulator_exe: Option<PathBuf>,
}

impl UpOptions {
    pub fn new(run_dir: PathBuf) -> UpOptions {
        UpOptions {
            run_dir,
            agent_exe: None,
            agent_port: AGENT_PORT,
            file: None,
            agent_timeout: Duration::from_secs(10),
            emulator_exe: None,
        }
    }
}

/// Creates the lab `spec` describes (after checking the kernel can shape as asked), starts
/// the agents, and returns its state. Refuses if the lab exists; on any failure, removes
/// everything it created.
pub fn up(spec: &LabSpec, opts: &UpOptions) -> Result<LabState, LabError> {
    spec.check_kernel(crate::qdisc_available)?;
    up_with(&SystemRunner, spec, opts)
}

/// [`up`] with an explicit [`Runner`] for `ip`/`tc` (agents are still real processes) and
/// without the kernel check.
pub fn up_with(
    runner: &dyn Runner,
    spec: &LabSpec,
    opts: &UpOptions,
) -> Result<LabState, LabError> {
    let plan = Plan::new(spec)?;
    let name = &spec.name;
    let prefix = lab_prefix(name);
    let existing: Vec<String> = parse_netns_list(&runner.run("ip", &["netns", "list"])?)
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    fs::create_dir_all(&opts.run_dir)
        .map_err(io_err(format!("creating {}", opts.run_dir.display())))?;
    let dir = opts.run_dir.join(name);
    let already = || {
        LabError::Refused(format!(
            "lab {name:?} is already up (state in {}): run `flowlab lab down {name}` first",
            dir.display()
        ))
    };
    if !existing.is_empty() {
        return Err(if dir.exists() {
            already()
        } else {
            LabError::Refused(format!(
                "namespaces of lab {name:?} exist ({}): run `flowlab lab down {name}` first",
                existing.join(", ")
            ))
        });
    }
    // Creating the directory is the lock: two `up`s of one lab cannot both succeed.
    match fs::create_dir(&dir) {
        Err(e) if e.kind() == ErrorKind::AlreadyExists => return Err(already()),
        r => r.map_err(io_err(format!("creating {}", dir.display())))?,
    }
    let mut state = LabState {
        version: STATE_VERSION,
        name: name.clone(),
        file: opts.file.clone(),
        created_unix: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        complete: false,
        plan,
        agents: Vec::new(),
        emulator: None,
    };
    let result = state
        .save(&dir)
        .and_then(|()| create(runner, &state.plan).map_err(LabError::from))
        .and_then(|()| start_emulator(spec, opts, &dir, &mut state))
        .and_then(|()| match &opts.agent_exe {
            Some(exe) => start_agents(exe, opts, &dir, &mut state),
            None => Ok(()),
        })
        .and_then(|()| {
            state.complete = true;
            state.save(&dir)
        });
    match result {
        Ok(()) => Ok(state),
        Err(e) => {
            // Undo everything; the first error is the one worth reporting.
            let _ = down_lab(runner, name, &opts.run_dir);
            Err(e)
        }
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs the plan's `ip`, `sysctl` and `tc` commands in order.
fn create(r: &dyn Runner, plan: &Plan) -> Result<(), NetnsError> {
    for n in &plan.nodes {
        // Plain `ip netns add`: unlike test pairs, a lab namespace that exists is not ours to
        // replace (and `up` checked there is none).
        r.run("ip", &["netns", "add", &n.ns])?;
    }
    for n in &plan.nodes {
        let ns = n.ns.as_str();
        r.run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        // Before any link exists, so that new interfaces inherit the defaults.
        let sysctls: &[&str] = match n.kind {
            NodeKind::Host if n.router => &[
                "net.ipv4.ip_forward=1",
                "net.ipv6.conf.all.forwarding=1",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.default.rp_filter=0",
            ],
            NodeKind::Host => &[],
            // A switch only bridges, the emulator only copies frames: no IPv6 link-local
            // chatter of their own on the segment.
            NodeKind::Switch | NodeKind::Emulator => &[
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ],
        };
        if !sysctls.is_empty() {
            let args = [&["netns", "exec", ns, "sysctl", "-qw"], sysctls].concat();
            r.run("ip", &args)?;
        }
        if n.kind == NodeKind::Switch {
            r.run("ip", &["-n", ns, "link", "add", BRIDGE, "type", "bridge"])?;
            r.run("ip", &["-n", ns, "link", "set", BRIDGE, "up"])?;
        }
    }
    for l in &plan.links {
        let Some((e, ea, eb)) = l.via else {
            veth_pair(r, plan, l.a, l.b)?;
            continue;
        };
        veth_pair(r, plan, l.a, (e, ea))?;
        veth_pair(r, plan, (e, eb), l.b)?;
        // The emulator models MTU-sized frames: the hosts' stacks must hand it no
        // multi-segment GSO buffers (their checksums it carries as the kernel left them).
        for (n, i) in [l.a, l.b] {
            let (ns, dev) = (&plan.nodes[n].ns, &plan.nodes[n].ifaces[i].dev);
            r.run(
                "ip",
                &["-n", ns, "link", "set", "dev", dev, "gso_max_segs", "1"],
            )?;
        }
    }
    wait_not_tentative(r, plan, Duration::from_secs(5))?;
    for n in &plan.nodes {
        let ns = n.ns.as_str();
        for rt in &n.routes {
            let d4 = format!("{}/{}", rt.dest4, rt.prefix4);
            let d6 = format!("{}/{}", rt.dest6, rt.prefix6);
            let (v4, v6) = (rt.via4.to_string(), rt.via6.to_string());
            r.run(
                "ip",
                &["-n", ns, "route", "add", &d4, "via", &v4, "dev", &rt.dev],
            )?;
            r.run(
                "ip",
                &[
                    "-n", ns, "-6", "route", "add", &d6, "via", &v6, "dev", &rt.dev,
                ],
            )?;
        }
    }
    Ok(())
}

/// Creates the veth pair between interface `a.1` of node `a.0` and `b.1` of `b.0`, then
/// brings each end up with its bridge port, addresses and shaping.
fn veth_pair(
    r: &dyn Runner,
    plan: &Plan,
    a: (usize, usize),
    b: (usize, usize),
) -> Result<(), NetnsError> {
    let (na, nb) = (&plan.nodes[a.0], &plan.nodes[b.0]);
    let (da, db) = (&na.ifaces[a.1].dev, &nb.ifaces[b.1].dev);
    r.run(
        "ip",
        &[
            "-n", &na.ns, "link", "add", da, "type", "veth", "peer", "name", db, "netns", &nb.ns,
        ],
    )?;
    for (n, i) in [(na, a.1), (nb, b.1)] {
        let (ns, f) = (n.ns.as_str(), &n.ifaces[i]);
        let dev = f.dev.as_str();
        if n.kind == NodeKind::Switch {
            r.run("ip", &["-n", ns, "link", "set", dev, "master", BRIDGE])?;
        }
        r.run("ip", &["-n", ns, "link", "set", dev, "up"])?;
        if let Some(a) = f.addr4 {
            let a = format!("{a}/{}", f.prefix4);
            r.run("ip", &["-n", ns, "addr", "add", &a, "dev", dev])?;
        }
        if let Some(a) = f.addr6 {
            let a = format!("{a}/{}", f.prefix6);
            r.run("ip", &["-n", ns, "addr", "add", &a, "dev", dev, "nodad"])?;
        }
        if let Some(s) = &f.shaping {
            for args in s.tc_commands(ns, dev) {
                r.run("tc", &strs(&args))?;
            }
        }
    }
    Ok(())
}

/// Waits until no host has a tentative IPv6 address: even with `nodad` an address stays
/// tentative until the kernel has seen the link's carrier come up, and routes via it (and
/// agents binding to it) would fail until then.
fn wait_not_tentative(r: &dyn Runner, plan: &Plan, timeout: Duration) -> Result<(), NetnsError> {
    let start = Instant::now();
    for n in plan.nodes.iter().filter(|n| n.kind == NodeKind::Host) {
        if n.ifaces.is_empty() {
            continue;
        }
        loop {
            let args = ["-n", &n.ns, "-6", "-o", "addr", "show", "tentative"];
            if r.run("ip", &args)?.trim().is_empty() {
                break;
            }
            if start.elapsed() > timeout {
                return Err(NetnsError::Timeout(format!(
                    "IPv6 addresses in {} still tentative after {timeout:?}",
                    n.ns
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    Ok(())
}

/// Starts `exe serve` detached in every host's namespace, then waits until each listens.
fn start_agents(
    exe: &Path,
    opts: &UpOptions,
    dir: &Path,
    state: &mut LabState,
) -> Result<(), LabError> {
    let port = opts.agent_port.to_string();
    let mut pending = Vec::new();
    for n in state.plan.nodes.iter().filter(|n| n.kind == NodeKind::Host) {
        let pidfile = dir.join(format!("{}.pid", n.name));
        let log = dir.join(format!("{}.log", n.name));
        let args = [
            "serve",
            "--bind",
            "::",
            "--port",
            &port,
            "--quiet",
            "--allow-relay",
        ];
        spawn_detached(&n.ns, exe, &args, &pidfile, &log)
            .map_err(|e| LabError::Agent(format!("starting the agent on {}: {e}", n.name)))?;
        let first_v4 = n.ifaces.iter().find_map(|i| i.addr4);
        let addr = match first_v4 {
            Some(a) => format!("{a}:{port}"),
            None => format!("[::1]:{port}"),
        };
        pending.push((n.name.clone(), n.ns.clone(), pidfile, log, addr));
    }
    let deadline = Instant::now() + opts.agent_timeout;
    for (host, ns, pidfile, log, addr) in pending {
        let pid = wait_listening(&host, &pidfile, &log, deadline)?;
        state.agents.push(AgentState {
            host,
            ns,
            pid,
            addr,
            log,
        });
    }
    Ok(())
}

/// Starts `exe args` detached inside namespace `ns`, its pid in `pidfile`, its output in
/// `log`.
fn spawn_detached(
    ns: &str,
    exe: &Path,
    args: &[&str],
    pidfile: &Path,
    log: &Path,
) -> Result<(), String> {
    let logf = fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let logf2 = logf
        .try_clone()
        .map_err(|e| format!("opening {}: {e}", log.display()))?;
    // `setsid -f` forks, so the process is nobody's child (no zombie, no terminal's
    // Ctrl-C); the shell writes its own pid and then becomes `ip netns exec`, which
    // becomes the process: the pidfile holds its pid.
    let status = Command::new("setsid")
        .args(["-f", "sh", "-c", "echo $$ > \"$0\"; exec \"$@\""])
        .arg(pidfile)
        .args(["ip", "netns", "exec", ns])
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(logf)
        .stderr(logf2)
        .status()
        .map_err(|e| format!("cannot run `setsid` (util-linux): {e}"))?;
    if !status.success() {
        return Err(format!("setsid {status}"));
    }
    Ok(())
}

/// Starts the emulator if the lab has emulated links, and waits until it has opened them.
fn start_emulator(
    spec: &LabSpec,
    opts: &UpOptions,
    dir: &Path,
    state: &mut LabState,
) -> Result<(), LabError> {
    let Some(node) = state
        .plan
        .nodes
        .iter()
        .find(|n| n.kind == NodeKind::Emulator)
    else {
        return Ok(());
    };
    let Some(exe) = &opts.emulator_exe else {
        return Err(LabError::Refused(
            "the lab has emulated links, but no flowlab binary was given to run the emulator"
                .into(),
        ));
    };
    let file = dir.join(emulate::LAB_FILE);
    fs::write(&file, &spec.source).map_err(io_err(format!("writing {}", file.display())))?;
    let (pidfile, log) = (dir.join("emulator.pid"), dir.join("emulator.log"));
    let dir_arg = dir.display().to_string();
    spawn_detached(&node.ns, exe, &["lab", "emulate", &dir_arg], &pidfile, &log)
        .map_err(|e| LabError::Agent(format!("starting the emulator: {e}")))?;
    let deadline = Instant::now() + opts.agent_timeout;
    let pid = wait_for("the emulator", emulate::READY, &pidfile, &log, deadline)?;
    state.emulator = Some(EmulatorState {
        ns: node.ns.clone(),
        pid,
        log,
        report: dir.join(emulate::REPORT_FILE),
    });
    Ok(())
}

/// Polls an agent's pidfile and log until it says "listening on", it dies, or `deadline`.
fn wait_listening(
    host: &str,
    pidfile: &Path,
    log: &Path,
    deadline: Instant,
) -> Result<u32, LabError> {
    wait_for(
        &format!("the agent on {host}"),
        "listening on",
        pidfile,
        log,
        deadline,
    )
}

/// Polls a process's pidfile and log until the log has `marker`, it dies, or `deadline`.
fn wait_for(
    who: &str,
    marker: &str,
    pidfile: &Path,
    log: &Path,
    deadline: Instant,
) -> Result<u32, LabError> {
    let mut pid = None;
    loop {
        if pid.is_none() {
            pid = fs::read_to_string(pidfile)
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
        }
        let text = fs::read_to_string(log).unwrap_or_default();
        if let Some(p) = pid {
            if text.contains(marker) {
                return Ok(p);
            }
            if !pid_alive(p) {
                let last = text.lines().rev().find(|l| !l.trim().is_empty());
                return Err(LabError::Agent(format!(
                    "{who} exited: {}",
                    last.unwrap_or("(no output)")
                )));
            }
        }
        if Instant::now() > deadline {
            return Err(LabError::Agent(format!(
                "{who} did not start in time (log: {})",
                log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What [`down`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    pub labs: Vec<String>,
    pub namespaces: Vec<String>,
    /// Processes stopped inside the namespaces (agents and anything else).
    pub processes: usize,
}

/// Removes lab `name` (or, with `None`, every `fl-` lab): stops every process inside its
/// namespaces, deletes the namespaces (and with them all veths and bridges) and its state.
/// Finds labs from their state directory and from leftover namespaces alike.
pub fn down(name: Option<&str>, run_dir: &Path) -> Result<DownReport, LabError> {
    down_with(&SystemRunner, name, run_dir)
}

/// [`down`] with an explicit [`Runner`].
pub fn down_with(
    runner: &dyn Runner,
    name: Option<&str>,
    run_dir: &Path,
) -> Result<DownReport, LabError> {
    let labs = match name {
        Some(n) => {
            spec::check_name(n, "lab", 0).map_err(|e| LabError::Refused(e.message))?;
            vec![n.to_string()]
        }
        None => known_labs(runner, run_dir)?,
    };
    let mut report = DownReport::default();
    let mut first_err = None;
    for lab in labs {
        match down_lab(runner, &lab, run_dir) {
            Ok(Some((namespaces, processes))) => {
                report.labs.push(lab);
                report.namespaces.extend(namespaces);
                report.processes += processes;
            }
            Ok(None) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    if let (Some(n), true) = (name, report.labs.is_empty()) {
        return Err(LabError::NotFound(format!(
            "no lab {n:?}: no state in {} and no {} namespaces",
            run_dir.display(),
            lab_prefix(n)
        )));
    }
    Ok(report)
}

/// Names of labs with a state directory or with namespaces.
pub fn known_labs(runner: &dyn Runner, run_dir: &Path) -> Result<Vec<String>, LabError> {
    let mut labs: Vec<String> = match fs::read_dir(run_dir) {
        Ok(rd) => rd
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| spec::check_name(n, "lab", 0).is_ok())
            .collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_err(format!("reading {}", run_dir.display()))(e)),
    };
    let listed = runner.run("ip", &["netns", "list"])?;
    labs.extend(
        parse_netns_list(&listed)
            .iter()
            .filter_map(|ns| lab_of_ns(ns).map(str::to_string)),
    );
    labs.sort();
    labs.dedup();
    Ok(labs)
}

/// Removes one lab; `None` if nothing of it existed, else (namespaces removed, processes
/// stopped).
fn down_lab(
    runner: &dyn Runner,
    lab: &str,
    run_dir: &Path,
) -> Result<Option<(Vec<String>, usize)>, LabError> {
    let dir = run_dir.join(lab);
    let prefix = lab_prefix(lab);
    let namespaces: Vec<String> = parse_netns_list(&runner.run("ip", &["netns", "list"])?)
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    if namespaces.is_empty() && !dir.exists() {
        return Ok(None);
    }
    let processes = stop_processes(runner, &namespaces)?;
    let mut removed = Vec::new();
    let mut first_err = None;
    for ns in namespaces {
        match runner.run("ip", &["netns", "del", &ns]) {
            Ok(_) => removed.push(ns),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e.into());
    }
    match fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            return Err(io_err(format!("removing {}", dir.display()))(e))
        }
        _ => {}
    }
    Ok(Some((removed, processes)))
}

/// Pids of the processes inside each namespace (`ip netns pids`).
fn pids_in(runner: &dyn Runner, namespaces: &[String]) -> Vec<String> {
    let mut pids = Vec::new();
    for ns in namespaces {
        if let Ok(out) = runner.run("ip", &["netns", "pids", ns]) {
            pids.extend(
                out.split_whitespace()
                    .filter(|p| p.parse::<u32>().is_ok())
                    .map(str::to_string),
            );
        }
    }
    pids
}

/// Stops every process inside `namespaces`: SIGTERM, up to 3 s to exit, then SIGKILL. Only
/// pids the kernel reports inside the lab's namespaces are signalled, so a stale pidfile can
/// never hit an unrelated process. Returns how many there were.
fn stop_processes(runner: &dyn Runner, namespaces: &[String]) -> Result<usize, LabError> {
    let pids = pids_in(runner, namespaces);
    if pids.is_empty() {
        return Ok(0);
    }
    let count = pids.len();
    for (signal, wait) in [("-TERM", 3000), ("-KILL", 2000)] {
        let now = pids_in(runner, namespaces);
        if now.is_empty() {
            return Ok(count);
        }
        let mut args = vec![signal];
        args.extend(now.iter().map(String::as_str));
        // Some may exit in between: "No such process" is fine.
        let _ = runner.run("kill", &args);
        let deadline = Instant::now() + Duration::from_millis(wait);
        while Instant::now() < deadline {
            if pids_in(runner, namespaces).is_empty() {
                return Ok(count);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let left = pids_in(runner, namespaces);
    if left.is_empty() {
        Ok(count)
    } else {
        Err(LabError::Refused(format!(
            "processes {} inside the lab survived SIGKILL",
            left.join(", ")
        )))
    }
}

/// One lab as `status` sees it.
#[derive(Debug, Clone)]
pub struct LabSummary {
    pub name: String,
    /// Its state, if it has one that could be read.
    pub state: Option<LabState>,
    /// Its namespaces that exist now.
    pub namespaces: Vec<String>,
    /// Why the lab looks broken, if it does (no state, missing namespaces, half-built).
    pub problem: Option<String>,
}

/// Every lab with state or namespaces.
pub fn status(run_dir: &Path) -> Result<Vec<LabSummary>, LabError> {
    status_with(&SystemRunner, run_dir)
}

/// [`status`] with an explicit [`Runner`].
pub fn status_with(runner: &dyn Runner, run_dir: &Path) -> Result<Vec<LabSummary>, LabError> {
    let listed = parse_netns_list(&runner.run("ip", &["netns", "list"])?);
    let mut out = Vec::new();
    for name in known_labs(runner, run_dir)? {
        let prefix = lab_prefix(&name);
        let namespaces: Vec<String> = listed
            .iter()
            .filter(|n| n.starts_with(&prefix))
            .cloned()
            .collect();
        let (state, mut problem) = match LabState::load(run_dir, &name) {
            Ok(s) => (s, None),
            Err(e) => (None, Some(e.to_string())),
        };
        if let Some(s) = &state {
            let missing: Vec<String> = s
                .plan
                .namespaces()
                .into_iter()
                .filter(|n| !namespaces.contains(n))
                .collect();
            if !s.complete {
                problem = Some(format!(
                    "half-built (or `up` is still running): `flowlab lab down {name}` removes it"
                ));
            } else if !missing.is_empty() {
                problem = Some(format!("namespaces missing: {}", missing.join(", ")));
            }
        } else if problem.is_none() {
            problem = Some(format!(
                "leftover namespaces without state: `flowlab lab down {name}` removes them"
            ));
        }
        out.push(LabSummary {
            name,
            state,
            namespaces,
            problem,
        });
    }
    Ok(out)
}

/// The namespace of node `node` (host or switch), looked up in lab `lab` or, if `None`, in
/// every lab (it must then be unique).
pub fn find_node(run_dir: &Path, lab: Option<&str>, node: &str) -> Result<String, LabError> {
    find_node_with(&SystemRunner, run_dir, lab, node)
}

/// [`find_node`] with an explicit [`Runner`].
pub fn find_node_with(
    runner: &dyn Runner,
    run_dir: &Path,
    lab: Option<&str>,
    node: &str,
) -> Result<String, LabError> {
    let labs = status_with(runner, run_dir)?;
    let hits: Vec<(String, String)> = labs
        .iter()
        .filter(|l| lab.is_none_or(|want| want == l.name))
        .filter_map(|l| {
            let ns = ns_of(&l.name, node);
            l.namespaces.contains(&ns).then(|| (l.name.clone(), ns))
        })
        .collect();
    match hits.as_slice() {
        [(_, ns)] => Ok(ns.clone()),
        [] => Err(LabError::NotFound(match lab {
            Some(l) if !labs.iter().any(|s| s.name == l) => {
                format!("no lab {l:?} is up (see `flowlab lab status`)")
            }
            Some(l) => format!("lab {l:?} has no host {node:?} (see `flowlab lab status`)"),
            None if labs.is_empty() => "no lab is up (start one with `flowlab lab up FILE`)".into(),
            None => format!("no lab has a host {node:?} (see `flowlab lab status`)"),
        })),
        many => Err(LabError::Refused(format!(
            "host {node:?} is in labs {}: choose one with --lab",
            many.iter()
                .map(|(l, _)| l.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// `ip netns exec NS program args...`, for `lab exec`.
pub fn exec_command(ns: &str, argv: &[String]) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).args(argv);
    cmd
}

/// The first IPv4 address of `host` in a lab's state (for tests and scripts).
pub fn host_addr(state: &LabState, host: &str) -> Option<IpAddr> {
    state
        .plan
        .node(host)?
        .ifaces
        .iter()
        .find_map(|i| i.addr4.map(IpAddr::V4))
}

#[cfg(test)]
mod tests;
