//! Network namespaces joined by veth pairs, for flowlab's integration tests,
//! benchmarks and the `flowlab lab` testbed ([`lab`]).
//!
//! # Why shell out to `ip` and `tc`?
//!
//! iproute2 is the stable, documented, universally installed interface to
//! Linux namespaces, links, addresses and queueing disciplines; its command
//! lines are the same on every distribution and kernel we care about, and
//! they are what a human would type to reproduce or debug a setup. The Rust
//! netlink crates are thin, fast-moving wrappers that would make us
//! re-implement iproute2's argument parsing (tbf burst/latency maths,
//! `ip netns` bind mounts under `/run/netns`, ...) and would need `unsafe`
//! `setns(2)` calls. Setup speed is irrelevant next to test runtime, so every
//! operation here is an `ip`/`tc` invocation behind the small [`Runner`]
//! trait, which also lets the command sequences be unit-tested without root.
//!
//! # Layout of a [`VethPair`]
//!
//! ```text
//!   netns "flt-<pid>-<n>-a"                 netns "flt-<pid>-<n>-b"
//!   lo up                                   lo up
//!   fl<pid>-<n>a  10.99.0.1/24  <--veth-->  fl<pid>-<n>b  10.99.0.2/24
//!                 fd99::1/64                              fd99::2/64
//! ```
//!
//! Every pair is isolated in its own namespaces, so all pairs use the same
//! addresses and many tests can run in parallel. Nothing is ever configured
//! in the caller's (root) namespace.
//!
//! # Tests elsewhere
//!
//! ```no_run
//! # fn t() {
//! let Some(pair) = flowlab_netns::skip_unless_netns("my_test") else { return };
//! let out = pair.command_in(&pair.ns_b, "ip").args(["-4", "addr"]).output().unwrap();
//! # }
//! ```
//!
//! Without root or iproute2 this prints `my_test: skipped: needs root and
//! iproute2 (<reason>)` and returns `None`; when the `CI` environment
//! variable is set it panics instead, so CI can never silently skip.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub mod lab;

/// Common prefix of every namespace this crate creates.
pub const NS_PREFIX: &str = "flt-";

/// Errors from namespace setup. Every message is a single line.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// The program could not be started at all (usually: not installed).
    #[error("cannot run `{program}`: {source} (is iproute2 installed and in PATH?)")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// The program ran and exited unsuccessfully.
    #[error("`{command}` failed: {stderr}")]
    Command { command: String, stderr: String },
    /// A caller-supplied argument was rejected before running anything.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Setup finished but did not become ready in time.
    #[error("timed out: {0}")]
    Timeout(String),
}

/// Runs an external program; the seam that lets the logic be unit-tested.
pub trait Runner {
    /// Runs `program args`, returning its stdout. A non-zero exit becomes
    /// [`NetnsError::Command`] with the command line and stderr (one line).
    fn run(&self, program: &str, args: &[&str]) -> Result<String, NetnsError>;
}

/// [`Runner`] backed by [`std::process::Command`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemRunner;

impl Runner for SystemRunner {
    fn run(&self, program: &str, args: &[&str]) -> Result<String, NetnsError> {
        let out = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| NetnsError::Spawn {
                program: program.to_string(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            let stderr = one_line(&String::from_utf8_lossy(&out.stderr));
            Err(NetnsError::Command {
                command: command_line(program, args),
                stderr: if stderr.is_empty() {
                    out.status.to_string()
                } else {
                    stderr
                },
            })
        }
    }
}

/// Renders `program args...` as a shell-like command line (for messages).
pub fn command_line(program: &str, args: &[&str]) -> String {
    let mut s = program.to_string();
    for a in args {
        s.push(' ');
        if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
            s.push('\'');
            s.push_str(&a.replace('\'', "'\\''"));
            s.push('\'');
        } else {
            s.push_str(a);
        }
    }
    s
}

/// Joins the non-empty lines of `text` with "; ".
fn one_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Which end of a [`VethPair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    A,
    B,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn next_id() -> u32 {
    COUNTER.fetch_add(1, Ordering::Relaxed)
}

/// Namespace name `flt-<pid>-<n>-<suffix>`.
fn ns_name(pid: u32, n: u32, suffix: &str) -> String {
    format!("{NS_PREFIX}{pid}-{n}-{suffix}")
}

/// Interface name `fl<pid hex>-<n hex><side>`, at most 15 bytes (IFNAMSIZ-1).
/// PIDs are below 2^22 (6 hex digits); `n` is reduced to 5 hex digits. The
/// names only have to be unique inside the pair's own namespaces anyway.
fn dev_name(pid: u32, n: u32, side: char) -> String {
    let name = format!("fl{:x}-{:x}{side}", pid & 0xff_ffff, n & 0xf_ffff);
    debug_assert!(name.len() <= 15, "{name}");
    name
}

/// Parses `ip netns list` output ("name (id: 3)" or "name" per line).
pub fn parse_netns_list(output: &str) -> Vec<String> {
    output
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// `ip netns add NAME`; a name carrying our own PID can only be a leftover
/// of a crashed earlier process that had the same PID, so on "File exists"
/// it is deleted and added again.
fn netns_add(runner: &dyn Runner, name: &str) -> Result<(), NetnsError> {
    match runner.run("ip", &["netns", "add", name]) {
        Err(NetnsError::Command { stderr, .. }) if stderr.contains("File exists") => {
            let _ = runner.run("ip", &["netns", "del", name]);
            runner.run("ip", &["netns", "add", name]).map(drop)
        }
        r => r.map(drop),
    }
}

/// Two namespaces joined by a veth pair; see the crate docs for the layout.
/// Dropping it deletes both namespaces (and with them the veth ends).
pub struct VethPair {
    pub ns_a: String,
    pub ns_b: String,
    pub dev_a: String,
    pub dev_b: String,
    runner: Box<dyn Runner + Send + Sync>,
}

impl std::fmt::Debug for VethPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VethPair")
            .field("ns_a", &self.ns_a)
            .field("ns_b", &self.ns_b)
            .field("dev_a", &self.dev_a)
            .field("dev_b", &self.dev_b)
            .finish_non_exhaustive()
    }
}

impl VethPair {
    pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
    pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
    pub const ADDR6_A: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 1);
    pub const ADDR6_B: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 2);
    pub const PREFIX_LEN4: u8 = 24;
    pub const PREFIX_LEN6: u8 = 64;

    /// Creates a fresh pair using the real `ip` command.
    pub fn create() -> Result<VethPair, NetnsError> {
        Self::create_with(SystemRunner)
    }

    /// Creates a pair using `runner` (which is also used by `Drop` and
    /// [`VethPair::limit_rate`]). On failure everything created is removed.
    pub fn create_with(
        runner: impl Runner + Send + Sync + 'static,
    ) -> Result<VethPair, NetnsError> {
        let pid = std::process::id();
        let n = next_id();
        let pair = VethPair {
            ns_a: ns_name(pid, n, "a"),
            ns_b: ns_name(pid, n, "b"),
            dev_a: dev_name(pid, n, 'a'),
            dev_b: dev_name(pid, n, 'b'),
            runner: Box::new(runner),
        };
        // On error `pair` is dropped here, deleting whatever was created.
        pair.setup()?;
        Ok(pair)
    }

    fn setup(&self) -> Result<(), NetnsError> {
        let r = &*self.runner;
        let (a, b, da, db) = (&*self.ns_a, &*self.ns_b, &*self.dev_a, &*self.dev_b);
        netns_add(r, a)?;
        netns_add(r, b)?;
        // Create both ends directly inside their namespaces: nothing ever
        // appears in the caller's namespace.
        r.run(
            "ip",
            &[
                "-n", a, "link", "add", da, "type", "veth", "peer", "name", db, "netns", b,
            ],
        )?;
        for (ns, dev, v4, v6) in [
            (a, da, Self::ADDR_A, Self::ADDR6_A),
            (b, db, Self::ADDR_B, Self::ADDR6_B),
        ] {
            let v4 = format!("{v4}/{}", Self::PREFIX_LEN4);
            let v6 = format!("{v6}/{}", Self::PREFIX_LEN6);
            r.run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
            r.run("ip", &["-n", ns, "link", "set", dev, "up"])?;
            r.run("ip", &["-n", ns, "addr", "add", &v4, "dev", dev])?;
            r.run("ip", &["-n", ns, "addr", "add", &v6, "dev", dev, "nodad"])?;
        }
        self.wait_ready(Duration::from_secs(3))
    }

    /// Waits until no IPv6 address is tentative any more. Even with `nodad`
    /// an address stays tentative until the kernel has processed the link's
    /// carrier-up event, which happens asynchronously after `link set up`.
    fn wait_ready(&self, timeout: Duration) -> Result<(), NetnsError> {
        let start = Instant::now();
        for (ns, dev) in [(&self.ns_a, &self.dev_a), (&self.ns_b, &self.dev_b)] {
            loop {
                let args = ["-n", ns, "-6", "-o", "addr", "show", "dev", dev];
                let out = self.runner.run(
                    "ip",
                    &[&args[..], &["scope", "global", "tentative"]].concat(),
                )?;
                if out.trim().is_empty() {
                    break;
                }
                if start.elapsed() > timeout {
                    return Err(NetnsError::Timeout(format!(
                        "IPv6 address on {dev} in {ns} still tentative after {timeout:?}"
                    )));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        Ok(())
    }

    /// Namespace name of `side`.
    pub fn ns(&self, side: Side) -> &str {
        match side {
            Side::A => &self.ns_a,
            Side::B => &self.ns_b,
        }
    }

    /// Veth device name of `side` (inside that side's namespace).
    pub fn dev(&self, side: Side) -> &str {
        match side {
            Side::A => &self.dev_a,
            Side::B => &self.dev_b,
        }
    }

    /// IPv4 address of `side`.
    pub fn addr(side: Side) -> Ipv4Addr {
        match side {
            Side::A => Self::ADDR_A,
            Side::B => Self::ADDR_B,
        }
    }

    /// IPv6 address of `side`.
    pub fn addr6(side: Side) -> Ipv6Addr {
        match side {
            Side::A => Self::ADDR6_A,
            Side::B => Self::ADDR6_B,
        }
    }

    /// A [`Command`] that runs `program` inside namespace `ns`
    /// (`ip netns exec NS program ...`); add arguments with `.arg(s)`.
    pub fn command_in(&self, ns: &str, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, program]);
        cmd
    }

    /// Like [`VethPair::command_in`] for one side of this pair.
    pub fn command_on(&self, side: Side, program: &str) -> Command {
        self.command_in(self.ns(side), program)
    }

    /// Limits egress of `side`'s device with a token bucket:
    /// `tc -n NS qdisc replace dev DEV root tbf rate <R>bit burst <B> latency <L>ms`.
    /// `burst_bytes` must be at least one MTU (1514) or nothing gets through;
    /// calling it again replaces the previous limit.
    pub fn limit_rate(
        &self,
        side: Side,
        rate_bps: u64,
        burst_bytes: u64,
        latency_ms: u32,
    ) -> Result<(), NetnsError> {
        let args = tbf_args(
            self.ns(side),
            self.dev(side),
            rate_bps,
            burst_bytes,
            latency_ms,
        )?;
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.runner.run("tc", &args).map(drop)
    }
}

fn tbf_args(
    ns: &str,
    dev: &str,
    rate_bps: u64,
    burst_bytes: u64,
    latency_ms: u32,
) -> Result<Vec<String>, NetnsError> {
    if rate_bps == 0 || burst_bytes == 0 || latency_ms == 0 {
        return Err(NetnsError::InvalidArgument(format!(
            "tbf rate ({rate_bps} bit/s), burst ({burst_bytes} B) and latency ({latency_ms} ms) must be > 0"
        )));
    }
    Ok([
        "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("{rate_bps}bit"),
        "burst".into(),
        burst_bytes.to_string(),
        "latency".into(),
        format!("{latency_ms}ms"),
    ])
    .collect())
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = self.runner.run("ip", &["netns", "del", &self.ns_a]);
        let _ = self.runner.run("ip", &["netns", "del", &self.ns_b]);
    }
}

/// Removes every namespace whose name starts with `prefix` (leftovers after a
/// crash) and returns the names removed. Careful: `cleanup_leftovers(NS_PREFIX)`
/// also removes the namespaces of *running* flowlab tests; prefer
/// [`cleanup_stale_leftovers`]. An empty prefix is rejected.
pub fn cleanup_leftovers(prefix: &str) -> Result<Vec<String>, NetnsError> {
    cleanup_leftovers_with(&SystemRunner, prefix)
}

/// [`cleanup_leftovers`] with an explicit [`Runner`].
pub fn cleanup_leftovers_with(
    runner: &dyn Runner,
    prefix: &str,
) -> Result<Vec<String>, NetnsError> {
    if prefix.is_empty() {
        return Err(NetnsError::InvalidArgument(
            "refusing to remove every namespace (empty prefix)".into(),
        ));
    }
    remove_matching(runner, |name| name.starts_with(prefix))
}

/// Removes `flt-<pid>-...` namespaces whose creating process no longer exists
/// (checked via `/proc/<pid>`), leaving those of running processes alone.
pub fn cleanup_stale_leftovers() -> Result<Vec<String>, NetnsError> {
    cleanup_stale_leftovers_with(&SystemRunner, |pid| {
        std::path::Path::new(&format!("/proc/{pid}")).exists()
    })
}

/// [`cleanup_stale_leftovers`] with an explicit [`Runner`] and liveness test.
pub fn cleanup_stale_leftovers_with(
    runner: &dyn Runner,
    pid_alive: impl Fn(u32) -> bool,
) -> Result<Vec<String>, NetnsError> {
    remove_matching(runner, |name| {
        name.strip_prefix(NS_PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| !pid_alive(pid))
    })
}

/// Deletes all listed namespaces matching `pred`; tries them all, then
/// reports the first failure, if any.
fn remove_matching(
    runner: &dyn Runner,
    pred: impl Fn(&str) -> bool,
) -> Result<Vec<String>, NetnsError> {
    let listed = runner.run("ip", &["netns", "list"])?;
    let mut removed = Vec::new();
    let mut first_err = None;
    for name in parse_netns_list(&listed).into_iter().filter(|n| pred(n)) {
        match runner.run("ip", &["netns", "del", &name]) {
            Ok(_) => removed.push(name),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// Effective UID from the text of `/proc/self/status` (`Uid: real eff ...`).
pub fn parse_effective_uid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1))
        .and_then(|uid| uid.parse().ok())
}

/// Checks that namespaces can be created here: running as root, `ip`
/// present, and `ip netns add` works. `Err` holds a one-line reason for a
/// `skipped: <reason>` message. The answer is computed once per process.
pub fn netns_available() -> Result<(), String> {
    static AVAILABLE: OnceLock<Result<(), String>> = OnceLock::new();
    AVAILABLE.get_or_init(check_available).clone()
}

fn check_available() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    match parse_effective_uid(&status) {
        Some(0) => {}
        Some(uid) => return Err(format!("not running as root (effective uid {uid})")),
        None => return Err("cannot find Uid in /proc/self/status".into()),
    }
    let runner = SystemRunner;
    runner.run("ip", &["-V"]).map_err(|e| match e {
        NetnsError::Spawn { source, .. } => format!("`ip` (iproute2) not found: {source}"),
        e => e.to_string(),
    })?;
    let probe = ns_name(std::process::id(), next_id(), "p");
    netns_add(&runner, &probe).map_err(|e| e.to_string())?;
    let _ = runner.run("ip", &["netns", "del", &probe]);
    Ok(())
}

/// Returns a fresh [`VethPair`], or `None` after printing
/// `"{test_name}: skipped: needs root and iproute2 ({reason})"` to stderr.
/// If the `CI` environment variable is set (and not "", "0" or "false"),
/// it panics instead, so CI never silently skips.
pub fn skip_unless_netns(test_name: &str) -> Option<VethPair> {
    if !netns_or_skip(test_name) {
        return None;
    }
    match VethPair::create() {
        Ok(pair) => Some(pair),
        Err(e) => {
            skip(test_name, format!("creating veth pair: {e}"));
            None
        }
    }
}

/// Whether namespaces can be created here; if not, prints
/// `"{test_name}: skipped: needs root and iproute2 ({reason})"` and returns
/// `false` (or panics when `CI` is set, like [`skip_unless_netns`]). For tests
/// that build their own namespaces, such as labs.
pub fn netns_or_skip(test_name: &str) -> bool {
    match netns_available() {
        Ok(()) => true,
        Err(reason) => {
            skip(test_name, reason);
            false
        }
    }
}

fn skip(test_name: &str, reason: String) {
    if in_ci() {
        panic!("{test_name}: network namespaces are required when CI is set: {reason}");
    }
    eprintln!("{test_name}: skipped: needs root and iproute2 ({reason})");
}

fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !(v.is_empty() || v == "0" || v == "false"))
}

/// `let pair = require_netns!("test_name");` — evaluates to a fresh
/// [`VethPair`], or returns from the enclosing function (after printing the
/// skip message) when namespaces are unavailable. See [`skip_unless_netns`].
#[macro_export]
macro_rules! require_netns {
    ($test_name:expr) => {
        match $crate::skip_unless_netns($test_name) {
            ::std::option::Option::Some(pair) => pair,
            ::std::option::Option::None => return,
        }
    };
}

/// Classifier (filter) kinds; these are probed as a filter on an ingress qdisc.
const CLASSIFIERS: &[&str] = &[
    "u32", "bpf", "matchall", "flower", "basic", "fw", "route", "flow", "cgroup",
];

/// Whether this kernel supports the tc qdisc `kind` (e.g. "tbf", "htb",
/// "netem", "fq", "ingress", "clsact"); classifier kinds ("u32", "bpf",
/// "matchall", "flower", ...) are accepted too. Probed by really adding it
/// on a veth device inside a scratch namespace, so it needs root (otherwise
/// `false`). Kinds that need parameters unknown to this probe report
/// `false`. Results are cached per process.
pub fn qdisc_available(kind: &str) -> bool {
    static CACHE: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(&known) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(kind) {
        return known;
    }
    let ok = netns_available().is_ok() && {
        let ns = ns_name(std::process::id(), next_id(), "q");
        probe_qdisc(&SystemRunner, &ns, kind)
    };
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(kind.to_string(), ok);
    ok
}

/// The probe behind [`qdisc_available`]: creates namespace `ns` with a veth
/// pair, tries `kind` on it, and deletes the namespace again.
pub fn probe_qdisc(runner: &dyn Runner, ns: &str, kind: &str) -> bool {
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return false;
    }
    if netns_add(runner, ns).is_err() {
        return false;
    }
    let tc = |args: &[&str]| {
        let mut full = vec!["-n", ns];
        full.extend_from_slice(args);
        runner.run("tc", &full).is_ok()
    };
    let ok = runner
        .run(
            "ip",
            &[
                "-n", ns, "link", "add", "flq0", "type", "veth", "peer", "name", "flq1",
            ],
        )
        .is_ok()
        && match kind {
            "ingress" | "clsact" => tc(&["qdisc", "add", "dev", "flq0", kind]),
            k if CLASSIFIERS.contains(&k) => {
                let params: &[&str] = match k {
                    "u32" => &["match", "u32", "0", "0", "flowid", "1:1"],
                    "bpf" => &["bytecode", "1,6 0 0 4294967295,", "flowid", "1:1"],
                    "fw" | "route" | "cgroup" => &[],
                    _ => &["classid", "1:1"],
                };
                let mut args = vec![
                    "filter", "add", "dev", "flq0", "parent", "ffff:", "protocol", "all", "prio",
                    "1", k,
                ];
                args.extend_from_slice(params);
                tc(&["qdisc", "add", "dev", "flq0", "ingress"]) && tc(&args)
            }
            k => {
                let params: &[&str] = match k {
                    "tbf" => &["rate", "1mbit", "burst", "32kb", "latency", "50ms"],
                    "netem" => &["delay", "1ms"],
                    _ => &[],
                };
                let mut args = vec!["qdisc", "add", "dev", "flq0", "root", k];
                args.extend_from_slice(params);
                tc(&args)
            }
        };
    let _ = runner.run("ip", &["netns", "del", ns]);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    type Responder = dyn Fn(&str) -> Result<String, NetnsError> + Send + Sync;

    /// Records every command line; answers through `respond`.
    #[derive(Clone)]
    struct Fake {
        log: Arc<Mutex<Vec<String>>>,
        respond: Arc<Responder>,
    }

    impl Fake {
        fn ok() -> Self {
            Self::with(|_| Ok(String::new()))
        }
        fn with(f: impl Fn(&str) -> Result<String, NetnsError> + Send + Sync + 'static) -> Self {
            Fake {
                log: Arc::default(),
                respond: Arc::new(f),
            }
        }
        fn log(&self) -> Vec<String> {
            self.log.lock().unwrap().clone()
        }
    }

    impl Runner for Fake {
        fn run(&self, program: &str, args: &[&str]) -> Result<String, NetnsError> {
            let line = command_line(program, args);
            self.log.lock().unwrap().push(line.clone());
            (self.respond)(&line)
        }
    }

    fn fail(line: &str, stderr: &str) -> Result<String, NetnsError> {
        Err(NetnsError::Command {
            command: line.into(),
            stderr: stderr.into(),
        })
    }

    #[test]
    fn names_are_unique_prefixed_and_short() {
        let pid = 4_194_303; // largest possible pid
        for n in [0, 1, 0xfffff, u32::MAX] {
            for side in ['a', 'b'] {
                let d = dev_name(pid, n, side);
                assert!(d.len() <= 15, "{d}");
            }
        }
        assert_eq!(ns_name(123, 7, "a"), "flt-123-7-a");
        assert_eq!(dev_name(0x123, 7, 'b'), "fl123-7b");
        let a = next_id();
        let b = next_id();
        assert_ne!(a, b);
    }

    #[test]
    fn create_sequence_and_drop() {
        let fake = Fake::ok();
        let pair = VethPair::create_with(fake.clone()).unwrap();
        let (a, b, da, db) = (
            pair.ns_a.clone(),
            pair.ns_b.clone(),
            pair.dev_a.clone(),
            pair.dev_b.clone(),
        );
        assert!(a.starts_with(&format!("flt-{}-", std::process::id())) && a.ends_with("-a"));
        assert_eq!(b, format!("{}b", &a[..a.len() - 1]));
        let expected = vec![
            format!("ip netns add {a}"),
            format!("ip netns add {b}"),
            format!("ip -n {a} link add {da} type veth peer name {db} netns {b}"),
            format!("ip -n {a} link set lo up"),
            format!("ip -n {a} link set {da} up"),
            format!("ip -n {a} addr add 10.99.0.1/24 dev {da}"),
            format!("ip -n {a} addr add fd99::1/64 dev {da} nodad"),
            format!("ip -n {b} link set lo up"),
            format!("ip -n {b} link set {db} up"),
            format!("ip -n {b} addr add 10.99.0.2/24 dev {db}"),
            format!("ip -n {b} addr add fd99::2/64 dev {db} nodad"),
            format!("ip -n {a} -6 -o addr show dev {da} scope global tentative"),
            format!("ip -n {b} -6 -o addr show dev {db} scope global tentative"),
        ];
        assert_eq!(fake.log(), expected);
        drop(pair);
        let log = fake.log();
        assert_eq!(
            &log[expected.len()..],
            &[format!("ip netns del {a}"), format!("ip netns del {b}")]
        );
    }

    #[test]
    fn create_failure_cleans_up_and_reports() {
        let fake = Fake::with(|l| {
            if l.contains(" type veth ") {
                fail(l, "Error: Unknown device type.")
            } else {
                Ok(String::new())
            }
        });
        let err = VethPair::create_with(fake.clone()).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("type veth") && msg.ends_with("failed: Error: Unknown device type."));
        assert!(!msg.contains('\n'));
        let log = fake.log();
        assert!(log[log.len() - 2].starts_with("ip netns del flt-"));
        assert!(log[log.len() - 1].starts_with("ip netns del flt-"));
    }

    #[test]
    fn leftover_with_own_pid_is_replaced() {
        let fake = Fake::with({
            let seen = Mutex::new(false);
            move |l| {
                let mut seen = seen.lock().unwrap();
                if l.starts_with("ip netns add") && !*seen {
                    *seen = true;
                    fail(
                        l,
                        "Cannot create namespace file \"/run/netns/x\": File exists",
                    )
                } else {
                    Ok(String::new())
                }
            }
        });
        netns_add(&fake, "flt-1-2-a").unwrap();
        assert_eq!(
            fake.log(),
            [
                "ip netns add flt-1-2-a",
                "ip netns del flt-1-2-a",
                "ip netns add flt-1-2-a"
            ]
        );
    }

    #[test]
    fn waits_until_not_tentative() {
        let calls = Arc::new(AtomicU32::new(0));
        let fake = Fake::with({
            let calls = calls.clone();
            move |l| {
                if l.ends_with(" tentative") && calls.fetch_add(1, Ordering::SeqCst) < 2 {
                    Ok("2: x inet6 fd99::1/64 scope global tentative\n".into())
                } else {
                    Ok(String::new())
                }
            }
        });
        let _pair = VethPair::create_with(fake.clone()).unwrap();
        let polls = fake
            .log()
            .iter()
            .filter(|l| l.ends_with(" tentative"))
            .count();
        assert_eq!(polls, 4);
    }

    #[test]
    fn tbf_command_line() {
        let fake = Fake::ok();
        let pair = VethPair::create_with(fake.clone()).unwrap();
        pair.limit_rate(Side::B, 10_000_000, 15_000, 20).unwrap();
        let last = fake.log().last().unwrap().clone();
        assert_eq!(
            last,
            format!(
                "tc -n {} qdisc replace dev {} root tbf rate 10000000bit burst 15000 latency 20ms",
                pair.ns_b, pair.dev_b
            )
        );
        pair.limit_rate(Side::A, 1, 1, 1).unwrap();
        assert!(fake
            .log()
            .last()
            .unwrap()
            .contains(&format!("-n {} ", pair.ns_a)));
        let n = fake.log().len();
        assert!(matches!(
            pair.limit_rate(Side::A, 0, 1500, 10),
            Err(NetnsError::InvalidArgument(_))
        ));
        assert_eq!(fake.log().len(), n, "nothing run for invalid args");
    }

    #[test]
    fn command_in_uses_ip_netns_exec() {
        let pair = VethPair::create_with(Fake::ok()).unwrap();
        let mut cmd = pair.command_on(Side::A, "ip");
        cmd.args(["-4", "addr"]);
        assert_eq!(cmd.get_program(), "ip");
        let args: Vec<_> = cmd.get_args().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            args,
            ["netns", "exec", pair.ns_a.as_str(), "ip", "-4", "addr"]
        );
    }

    #[test]
    fn parse_list() {
        let out = "flt-123-0-a (id: 3)\nother\n\nflt-123-0-b (id: 4)\n";
        assert_eq!(
            parse_netns_list(out),
            ["flt-123-0-a", "other", "flt-123-0-b"]
        );
    }

    #[test]
    fn cleanup_removes_only_prefixed() {
        let fake = Fake::with(|l| {
            if l == "ip netns list" {
                Ok("flt-123-0-a (id: 3)\nother\nflt-123-0-b\n".into())
            } else {
                Ok(String::new())
            }
        });
        let removed = cleanup_leftovers_with(&fake, "flt-").unwrap();
        assert_eq!(removed, ["flt-123-0-a", "flt-123-0-b"]);
        assert_eq!(
            fake.log(),
            [
                "ip netns list",
                "ip netns del flt-123-0-a",
                "ip netns del flt-123-0-b"
            ]
        );
        assert!(matches!(
            cleanup_leftovers_with(&fake, ""),
            Err(NetnsError::InvalidArgument(_))
        ));
    }

    #[test]
    fn cleanup_tries_all_then_reports_first_error() {
        let fake = Fake::with(|l| match l {
            "ip netns list" => Ok("flt-1-0-a\nflt-1-0-b\n".into()),
            "ip netns del flt-1-0-a" => fail(l, "busy"),
            _ => Ok(String::new()),
        });
        let err = cleanup_leftovers_with(&fake, "flt-1-").unwrap_err();
        assert_eq!(err.to_string(), "`ip netns del flt-1-0-a` failed: busy");
        assert_eq!(fake.log().last().unwrap(), "ip netns del flt-1-0-b");
    }

    #[test]
    fn stale_cleanup_spares_live_pids() {
        let fake = Fake::with(|l| {
            if l == "ip netns list" {
                Ok("flt-10-0-a (id: 1)\nflt-20-3-b (id: 2)\nflt-x\nother\n".into())
            } else {
                Ok(String::new())
            }
        });
        let removed = cleanup_stale_leftovers_with(&fake, |pid| pid == 10).unwrap();
        assert_eq!(removed, ["flt-20-3-b"]);
    }

    #[test]
    fn effective_uid() {
        let status = "Name:\tcargo\nUid:\t1000\t0\t0\t0\nGid:\t0\t0\t0\t0\n";
        assert_eq!(parse_effective_uid(status), Some(0));
        assert_eq!(
            parse_effective_uid("Uid:\t0\t1000\t1000\t1000\n"),
            Some(1000)
        );
        assert_eq!(parse_effective_uid("Name: x\n"), None);
    }

    #[test]
    fn probe_commands_and_result() {
        let fake = Fake::with(|l| {
            if l.contains(" netem") {
                fail(l, "Error: Specified qdisc kind is unknown.")
            } else {
                Ok(String::new())
            }
        });
        assert!(probe_qdisc(&fake, "flt-1-0-q", "tbf"));
        assert_eq!(
            fake.log(),
            [
                "ip netns add flt-1-0-q",
                "ip -n flt-1-0-q link add flq0 type veth peer name flq1",
                "tc -n flt-1-0-q qdisc add dev flq0 root tbf rate 1mbit burst 32kb latency 50ms",
                "ip netns del flt-1-0-q",
            ]
        );
        assert!(!probe_qdisc(&fake, "flt-1-1-q", "netem"));
        assert_eq!(fake.log().last().unwrap(), "ip netns del flt-1-1-q");
        assert!(probe_qdisc(&fake, "flt-1-2-q", "u32"));
        assert!(fake
            .log()
            .contains(&"tc -n flt-1-2-q filter add dev flq0 parent ffff: protocol all prio 1 u32 match u32 0 0 flowid 1:1".to_string()));
        let n = fake.log().len();
        assert!(!probe_qdisc(&fake, "flt-1-3-q", "tbf; rm -rf /"));
        assert!(!probe_qdisc(&fake, "flt-1-3-q", ""));
        assert_eq!(fake.log().len(), n);
    }

    #[test]
    fn messages_are_one_line() {
        assert_eq!(
            one_line("Error: x\n\n  We have an error\n"),
            "Error: x; We have an error"
        );
        assert_eq!(command_line("tc", &["a b", ""]), "tc 'a b' ''");
        let e = SystemRunner
            .run("/nonexistent/flowlab-no-such-program", &[])
            .unwrap_err();
        assert!(matches!(e, NetnsError::Spawn { .. }));
        assert!(!e.to_string().contains('\n'));
    }
}
