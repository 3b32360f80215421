//! `flowlab doctor AGENT`: seed 003's tuning check list (Table 2) run against the path to an
//! agent. [`examine`] measures (clock probes, a short idle-rate test, an MTU-sized probe) and
//! gathers both ends' host facts (the agent's over the control protocol); [`diagnose`] turns
//! them into findings, each with what to change.

mod checks;

use std::net::IpAddr;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use flowlab_control::client::resolve;
use flowlab_control::controller::{host_facts, ClockProbe};
use flowlab_control::host_facts::HostFacts;
use flowlab_control::TestOptions;
use flowlab_experiment::clock::ClockSample;
use flowlab_spec::{Direction, Protocol, TestSpec};
use serde::Serialize;

pub use checks::{bdp_bytes, diagnose, path_rate_bps, DEFAULT_PATH_RATE_BPS};

/// Clock probes taken for the RTT and the offset.
const CLOCK_PROBES: usize = 20;
/// The idle-rate test: small echoed packets, slow enough that nothing on a sound path drops.
const IDLE_RATE_BPS: u64 = 200_000;
const IDLE_SIZE: u32 = 250;
const IDLE_DURATION: Duration = Duration::from_secs(2);
/// Echoed packets of the MTU probe, at a rate that queues nothing.
const MTU_PROBES: u64 = 10;
const MTU_PROBE_RATE_BPS: u64 = 1_000_000;
/// The largest UDP payload over IPv4: loopback's 64 KiB MTU takes no more.
const MAX_UDP_PAYLOAD: u32 = 65_507;

/// How a finding reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to change.
    Ok,
    /// Worth knowing; changes only what some tests can do.
    Note,
    /// Limits or distorts measurements on this path.
    Warn,
}

/// One item of the check list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// buffers, mtu, load, cpufreq, qdisc, route, loss, socket-overflow or clock.
    pub check: &'static str,
    pub status: Status,
    pub found: String,
    /// What to change, when something should.
    pub change: Option<String>,
}

/// The least-RTT clock probe's round trip and offset (agent minus here).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClockCheck {
    pub rtt_ns: u64,
    pub offset_ns: i64,
    /// Half the round trip: the offset is exact to within it on any path.
    pub bound_ns: u64,
}

/// A short echoed UDP test's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// UDP payload bytes.
    pub size: u32,
    pub rate_bps: u64,
    pub sent: u64,
    /// Echoes back.
    pub received: u64,
    /// Packets dropped at a receiving socket's buffer, either end.
    pub socket_drops: Option<u64>,
    /// Why the test did not run or ended early.
    pub error: Option<String>,
}

/// Everything measured and gathered about the path to an agent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Examination {
    pub target: String,
    pub local: HostFacts,
    pub remote: HostFacts,
    pub clock: Option<ClockCheck>,
    pub idle: Option<Probe>,
    pub mtu_probe: Option<Probe>,
    /// IP and UDP header bytes on this path (28 over IPv4, 48 over IPv6).
    pub udp_headers: u32,
}

impl Examination {
    fn ends(&self) -> impl Iterator<Item = (checks::End, &HostFacts)> {
        [
            (checks::End::Here, &self.local),
            (checks::End::Agent, &self.remote),
        ]
        .into_iter()
    }
}

/// The doctor's document (`--json`): what was measured and what it means.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    pub examination: Examination,
    pub findings: Vec<Finding>,
}

impl Diagnosis {
    /// Whether any finding warns (the command then exits with status 1).
    pub fn warns(&self) -> bool {
        self.findings.iter().any(|f| f.status == Status::Warn)
    }
}

/// Measures the path to the agent at `target` and gathers both ends' facts. Fails only when
/// the agent cannot be reached or refuses; a probe test that fails is a finding.
pub fn examine(target: &str, key: Option<&[u8]>) -> anyhow::Result<Examination> {
    let agent = resolve(target)?.ip();
    let clock = measure_clock(target, key)?;
    let udp_headers = udp_headers(agent);
    let options = |spec| TestOptions {
        target: target.to_string(),
        spec,
        key: key.map(<[u8]>::to_vec),
        drain: Duration::from_millis(500),
        interface: None,
        agent_interface: None,
        bind: None,
        cport: None,
    };
    let idle = probe(&options(idle_spec()));
    let mtu = HostFacts::gather(agent).egress.and_then(|e| e.mtu);
    let size = mtu.map(|mtu| mtu.saturating_sub(udp_headers).min(MAX_UDP_PAYLOAD));
    let mtu_probe = size.map(|size| probe(&options(mtu_spec(size))));
    // After the probes, so the qdiscs' drop counters include theirs.
    let remote = host_facts(target, key)?;
    Ok(Examination {
        target: target.to_string(),
        local: HostFacts::gather(agent),
        remote,
        clock,
        idle: Some(idle),
        mtu_probe,
        udp_headers,
    })
}

fn udp_headers(agent: IpAddr) -> u32 {
    match agent {
        IpAddr::V4(_) => 28,
        IpAddr::V6(_) => 48,
    }
}

/// The least-RTT sample of [`CLOCK_PROBES`] exchanges, `None` if none was in order.
fn measure_clock(target: &str, key: Option<&[u8]>) -> anyhow::Result<Option<ClockCheck>> {
    let exchanges = ClockProbe::connect(target, key)?.exchange(CLOCK_PROBES)?;
    let best = exchanges
        .into_iter()
        .map(|(t1, t2, t3, t4)| ClockSample { t1, t2, t3, t4 })
        .filter(|s| s.t4 >= s.t1 && s.t3 >= s.t2 && s.rtt_ns() >= 0)
        .min_by_key(ClockSample::rtt_ns);
    Ok(best.map(|s| {
        let rtt_ns = u64::try_from(s.rtt_ns()).unwrap_or(u64::MAX);
        ClockCheck {
            rtt_ns,
            offset_ns: i64::try_from(s.offset_ns()).unwrap_or(i64::MAX),
            bound_ns: rtt_ns / 2,
        }
    }))
}

fn idle_spec() -> TestSpec {
    TestSpec {
        rate_bps: Some(IDLE_RATE_BPS),
        size: IDLE_SIZE,
        duration_ns: Some(IDLE_DURATION.as_nanos() as u64),
        ..TestSpec::new(Protocol::Udp, Direction::Loopback)
    }
}

/// [`MTU_PROBES`] echoed datagrams of `size` payload bytes: as large as this end's MTU takes.
fn mtu_spec(size: u32) -> TestSpec {
    TestSpec {
        rate_bps: Some(MTU_PROBE_RATE_BPS),
        size,
        duration_ns: None,
        count: Some(MTU_PROBES),
        ..TestSpec::new(Protocol::Udp, Direction::Loopback)
    }
}

/// Runs a probe test; its failure is part of the outcome.
fn probe(options: &TestOptions) -> Probe {
    let spec = &options.spec;
    let mut outcome = Probe {
        size: spec.size,
        rate_bps: spec.rate_bps.unwrap_or(0),
        sent: 0,
        received: 0,
        socket_drops: None,
        error: None,
    };
    if let Err(e) = spec.validate() {
        outcome.error = Some(e.to_string());
        return outcome;
    }
    match flowlab_control::run_test(options, &mut |_| {}) {
        Ok(run) => {
            let s = &run.result.summary;
            outcome.sent = s.packets_sent;
            outcome.received = s.packets_received;
            outcome.socket_drops = s.lost_at_receiver_socket.or(s.receive_buffers_dropped);
            outcome.error = run.result.error;
        }
        Err(e) => outcome.error = Some(e.to_string()),
    }
    outcome
}

/// `flowlab doctor`: examines the path to `target`, prints the findings as text or JSON, and
/// exits with status 1 when one warns.
pub fn run(target: &str, key_file: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let key = key_file.map(flowlab_control::load_key).transpose()?;
    let examination = examine(target, key.as_deref())?;
    let findings = diagnose(&examination);
    let diagnosis = Diagnosis {
        examination,
        findings,
    };
    let text = serde_json::to_string_pretty(&diagnosis)?;
    crate::output::print_result(&text, None, json, || render(&diagnosis))?;
    Ok(ExitCode::from(u8::from(diagnosis.warns())))
}

/// The findings as text: a headline, then one line per finding and its change below it.
pub fn render(diagnosis: &Diagnosis) -> String {
    let exam = &diagnosis.examination;
    let mut out = format!("flowlab doctor {}", exam.target);
    if let (Some(clock), Some(bdp)) = (&exam.clock, bdp_bytes(exam)) {
        out += &format!(
            ": RTT {}, BDP {} at {}",
            flowlab_units::format_duration_ns(clock.rtt_ns as f64),
            flowlab_units::format_bytes(bdp as f64),
            flowlab_units::format_rate(path_rate_bps(exam) as f64)
        );
    }
    out.push('\n');
    for f in &diagnosis.findings {
        let status = match f.status {
            Status::Ok => "ok",
            Status::Note => "note",
            Status::Warn => "WARN",
        };
        out += &crate::format::wrap(&format!("{status:<5} {:<15} {}", f.check, f.found), 22);
        if let Some(change) = &f.change {
            out += &crate::format::wrap(&format!("{:21} change: {change}", ""), 30);
        }
    }
    let warnings = diagnosis
        .findings
        .iter()
        .filter(|f| f.status == Status::Warn);
    out += &format!("{} warnings\n", warnings.count());
    out
}
