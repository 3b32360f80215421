//! The agent: accepts control connections, runs each test in its own session thread, and
//! sends test traffic only to the address of the client that asked.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::protocol::Message;
use flowlab_engine::FlowParams;
use flowlab_results::{IntervalReport, PacketRecord, SideReport};
use flowlab_spec::{format_mac, parse_mac};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_sys::cpu::CpuSnapshot;
use flowlab_sys::netlink;
use flowlab_sys::raw::{self, RawSocket};
use flowlab_traffic::contract::TokenBucket;
use flowlab_traffic::load::offered_load;
use flowlab_units::format_rate;
use flowlab_wire::control::{
    HELLO_FLAG_AUTH_REQUIRED, MAX_FRAME_LEN, MAX_OPEN_REQUEST_LEN, MAX_SMALL_FRAME_LEN,
};
use flowlab_wire::{ControlError, Hello, PROTOCOL_VERSION};

use crate::admission::{self, Admission, ConnLimits, Ticket};
use crate::auth;
use crate::conn::{Conn, ConnError, Deadline, PACKET_LOG_CHUNK};
use crate::result::roles;

/// What one test may ask for. The defaults bound what a stranger can make an agent do; an
/// operator lifts each explicitly (`flowlab serve --max-rate unlimited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_duration: Duration,
    /// Most bit/s of one test, all flows together, held while sending; `None`: no limit.
    pub max_rate_bps: Option<u64>,
    pub max_tests: usize,
    /// Most flows in one test.
    pub max_flows: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_duration: Duration::from_secs(300),
            max_rate_bps: Some(DEFAULT_MAX_RATE_BPS),
            max_tests: 16,
            max_flows: 1024,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    pub limits: Limits,
    /// Pre-shared key: when set, clients must answer the HMAC challenge first.
    pub key: Option<Vec<u8>>,
    /// Whether a controller may have this agent run tests towards other agents (`flowlab
    /// run`); off by default, as it makes this host send to an address the controller names.
    pub allow_relay: bool,
    /// Connections in setup (hello to start), in total and per source.
    pub connections: ConnLimits,
}

/// Counters the agent keeps across sessions.
#[derive(Debug, Default)]
pub struct AgentStats {
    pub sessions: AtomicU64,
    pub tests_run: AtomicU64,
    pub refused: AtomicU64,
    /// Control connections that did not speak the protocol (bad hello, bad frames).
    pub malformed_control: AtomicU64,
    pub active_tests: AtomicUsize,
    /// Connections closed at once: over the caps on connections in setup.
    pub turned_away: AtomicU64,
}

/// The default `--max-rate`: a fast host's link, not a data centre's aggregate.
pub const DEFAULT_MAX_RATE_BPS: u64 = 10_000_000_000;
/// How often the agent shows it is alive during a test.
const HEARTBEAT: Duration = Duration::from_millis(500);
/// A test ends when its client has sent nothing (it heartbeats) for this long.
const CLIENT_SILENCE: Duration = Duration::from_secs(3);
/// How long a connecting peer may take for each setup step.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// From connecting to the request, all steps together: a peer dripping bytes holds no
/// connection longer.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// From `accepted` to the client's `start`: an accepted test holds its slot no longer.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);
/// Past its duration limit a test gets this long to finish before the agent stops it.
const OVERRUN_GRACE: Duration = Duration::from_secs(5);

/// Serves until `stop` is raised. Each control connection gets its own thread; logs go to
/// `log` (one line each).
pub fn serve(
    listener: TcpListener,
    config: AgentConfig,
    stats: Arc<AgentStats>,
    stop: &AtomicBool,
    log: Arc<dyn Fn(String) + Send + Sync>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let config = Arc::new(config);
    let next_session = Arc::new(AtomicU32::new(rand::random::<u32>() | 1));
    let admission = Admission::new(config.connections);
    while !stop.load(Ordering::Relaxed) && !flowlab_sys::signal::is_interrupted() {
        match listener.accept() {
            Ok((stream, peer)) => {
                let ticket = match admission.admit(peer.ip()) {
                    Ok(ticket) => ticket,
                    Err(reason) => {
                        stats.turned_away.fetch_add(1, Ordering::Relaxed);
                        log(format!("{peer}: turned away: {reason}"));
                        admission::turn_away(stream, agent_hello(&config), reason);
                        continue;
                    }
                };
                let _ = stream.set_nonblocking(false);
                stats.sessions.fetch_add(1, Ordering::Relaxed);
                let (config, stats, log, next) = (
                    config.clone(),
                    stats.clone(),
                    log.clone(),
                    next_session.clone(),
                );
                std::thread::spawn(move || {
                    let session = next.fetch_add(1, Ordering::Relaxed);
                    let result = run_session(stream, peer, session, &config, &stats, ticket, &*log);
                    if let Err(e) = result {
                        log(format!("{peer}: {e}"));
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => log(format!("accept failed: {e}")),
        }
    }
    Ok(())
}

/// An agent serving on 127.0.0.1 from a thread of this process (the demo, tests).
pub struct LocalAgent {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl LocalAgent {
    /// Starts a quiet agent with the default configuration on an ephemeral loopback port.
    pub fn start() -> std::io::Result<LocalAgent> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let quiet: Arc<dyn Fn(String) + Send + Sync> = Arc::new(|_| {});
                serve(
                    listener,
                    AgentConfig::default(),
                    Arc::new(AgentStats::default()),
                    &stop,
                    quiet,
                )
            })
        };
        Ok(LocalAgent {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and waits for the agent; its result is the accept loop's.
    pub fn stop(mut self) -> std::io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(std::thread::JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(std::io::Error::other("the agent thread failed")),
            None => Ok(()),
        }
    }
}

impl Drop for LocalAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Releases a test slot when the session ends, however it ends.
struct Slot<'a>(&'a AgentStats);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.active_tests.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A test slot, if fewer than `--max-tests` are running; it is freed when dropped.
fn take_slot<'a>(stats: &'a AgentStats, limits: &Limits) -> Option<Slot<'a>> {
    let active = stats.active_tests.fetch_add(1, Ordering::Relaxed);
    let slot = Slot(stats);
    (active < limits.max_tests).then_some(slot)
}

fn busy(limits: &Limits) -> String {
    format!(
        "agent is running its limit of {} concurrent tests (--max-tests)",
        limits.max_tests
    )
}

fn refuse(conn: &mut Conn, stats: &AgentStats, reason: String) -> Result<(), String> {
    stats.refused.fetch_add(1, Ordering::Relaxed);
    let _ = conn.send(&Message::Refused {
        reason: reason.clone(),
    });
    Err(format!("refused: {reason}"))
}

fn protocol_error(stats: &AgentStats, e: ConnError) -> String {
    if matches!(e, ConnError::Protocol(_) | ConnError::Tag(_)) {
        stats.malformed_control.fetch_add(1, Ordering::Relaxed);
    }
    e.to_string()
}

/// The agent's hello: its version, and whether it asks for the key.
fn agent_hello(config: &AgentConfig) -> Hello {
    let flags = match config.key {
        Some(_) => HELLO_FLAG_AUTH_REQUIRED,
        None => 0,
    };
    Hello {
        version: PROTOCOL_VERSION,
        flags,
    }
}

/// Hellos, then with a key the proofs both ways; frames are tagged from then on. Leaves the
/// frame cap at what a request may take.
fn greet(
    conn: &mut Conn,
    config: &AgentConfig,
    stats: &AgentStats,
    by: Deadline,
) -> Result<(), String> {
    conn.set_max_frame(MAX_SMALL_FRAME_LEN);
    let hello = conn.recv_hello(by).map_err(|e| protocol_error(stats, e))?;
    conn.send_hello(agent_hello(config))
        .map_err(|e| e.to_string())?;
    hello.check_version().map_err(|e| format!("client {e}"))?;
    let Some(key) = &config.key else {
        conn.set_max_frame(MAX_OPEN_REQUEST_LEN);
        return Ok(());
    };
    authenticate(conn, key, stats, by)?;
    conn.set_max_frame(MAX_FRAME_LEN);
    Ok(())
}

/// The client proves the key over both nonces, then the agent does; both derive the key
/// that tags every later frame.
fn authenticate(
    conn: &mut Conn,
    key: &[u8],
    stats: &AgentStats,
    by: Deadline,
) -> Result<(), String> {
    let agent_nonce = auth::new_nonce();
    conn.send(&Message::AuthChallenge {
        nonce: agent_nonce.clone(),
    })
    .map_err(|e| e.to_string())?;
    let answer = conn.recv_by(by).map_err(|e| protocol_error(stats, e))?;
    let nonces = match &answer {
        Message::AuthResponse { nonce, mac } => {
            auth::Nonces::parse(nonce, &agent_nonce).filter(|n| n.verify_client(key, mac))
        }
        _ => None,
    };
    let Some(nonces) = nonces else {
        return refuse(
            conn,
            stats,
            "authentication failed: wrong or missing key".into(),
        );
    };
    conn.send(&Message::AuthOk {
        mac: nonces.agent_proof(key),
    })
    .map_err(|e| e.to_string())?;
    conn.start_tags(nonces.session_key(key), auth::End::Agent);
    Ok(())
}

/// Tells the client why the session ends (a bad tag, a missed deadline) and says it.
fn fail(conn: &mut Conn, stats: &AgentStats, e: ConnError) -> String {
    let message = protocol_error(stats, e);
    let _ = conn.send(&Message::Error {
        message: message.clone(),
    });
    message
}

fn run_session(
    stream: TcpStream,
    peer: SocketAddr,
    session: u32,
    config: &AgentConfig,
    stats: &AgentStats,
    ticket: Ticket,
    log: &dyn Fn(String),
) -> Result<(), String> {
    let local_ip = stream.local_addr().map_err(|e| e.to_string())?.ip();
    let mut conn = Conn::new(stream);
    let by = Deadline::after(HANDSHAKE_TIMEOUT, "the handshake (hello to request)");
    greet(&mut conn, config, stats, by)?;
    let request = match conn.recv_by(by) {
        Ok(request) => request,
        Err(ConnError::Protocol(e @ ControlError::Malformed(_))) => {
            stats.malformed_control.fetch_add(1, Ordering::Relaxed);
            return refuse(&mut conn, stats, format!("unreadable request: {e}"));
        }
        Err(e) => return Err(fail(&mut conn, stats, e)),
    };
    conn.set_max_frame(MAX_SMALL_FRAME_LEN);
    let spec = match request {
        Message::Request { spec } => spec,
        Message::TimeProbe { t1_ns } => return answer_time_probes(&mut conn, t1_ns),
        Message::RunTest {
            target,
            spec,
            start_at_ns,
        } => {
            if !config.allow_relay {
                return refuse(
                    &mut conn,
                    stats,
                    "this agent does not run tests towards other agents (start it with --allow-relay)".into(),
                );
            }
            drop(ticket);
            if let Err(reason) = check_limits(&spec, &config.limits) {
                return refuse(&mut conn, stats, reason);
            }
            let Some(_slot) = take_slot(stats, &config.limits) else {
                return refuse(&mut conn, stats, busy(&config.limits));
            };
            return relay_test(&mut conn, config, &target, spec, start_at_ns, log);
        }
        other => {
            stats.malformed_control.fetch_add(1, Ordering::Relaxed);
            return refuse(
                &mut conn,
                stats,
                format!("expected a test request, got '{}'", other.kind()),
            );
        }
    };
    if let Err(reason) = check_request(&spec, &config.limits) {
        return refuse(&mut conn, stats, reason);
    }
    let raw = match spec.protocol {
        Protocol::Raw => match raw_path(&spec, peer.ip()) {
            Ok(path) => Some(path),
            Err(reason) => return refuse(&mut conn, stats, reason),
        },
        _ => None,
    };
    let Some(_slot) = take_slot(stats, &config.limits) else {
        return refuse(&mut conn, stats, busy(&config.limits));
    };
    let cookie = (spec.protocol == Protocol::Udp && spec.direction == Direction::Reverse)
        .then(rand::random::<u64>);
    let data = DataSockets::open(&spec, local_ip, peer.ip(), raw).inspect_err(|e| {
        let _ = conn.send(&Message::Error { message: e.clone() });
    })?;
    conn.send(&Message::Accepted {
        session,
        data_ports: data.ports(),
        agent_mac: data.mac(),
        rate_cap_bps: config.limits.max_rate_bps,
        cookie,
    })
    .map_err(|e| e.to_string())?;
    let start_by = Deadline::after(START_TIMEOUT, "start");
    log(format!(
        "{peer}: session {session}: {:?} {:?} size {} rate {}",
        spec.protocol,
        spec.direction,
        spec.size,
        spec.rate_bps
            .map_or("max".to_string(), |r| format!("{r} bit/s"))
    ));
    let data = data.establish(peer.ip()).inspect_err(|e| {
        let _ = conn.send(&Message::Error { message: e.clone() });
    })?;
    match conn
        .recv_by(start_by)
        .map_err(|e| fail(&mut conn, stats, e))?
    {
        Message::Start => {}
        other => return Err(format!("expected start, got '{}'", other.kind())),
    }
    drop(ticket);
    stats.tests_run.fetch_add(1, Ordering::Relaxed);
    let report = run_test(&mut conn, data, &spec, session, &config.limits, cookie);
    log(format!(
        "{peer}: session {session} done{}",
        report
            .error
            .as_ref()
            .map_or(String::new(), |e| format!(": {e}"))
    ));
    Ok(())
}

/// Answers clock probes until the controller hangs up: each reply carries the receive and
/// send times of this host's CLOCK_REALTIME.
fn answer_time_probes(conn: &mut Conn, first_t1: u64) -> Result<(), String> {
    let mut t1_ns = first_t1;
    loop {
        let t2_ns = flowlab_sys::clock::realtime_ns();
        let t3_ns = flowlab_sys::clock::realtime_ns();
        conn.send(&Message::TimeReply {
            t1_ns,
            t2_ns,
            t3_ns,
        })
        .map_err(|e| e.to_string())?;
        match conn.recv(SETUP_TIMEOUT) {
            Ok(Message::TimeProbe { t1_ns: next }) => t1_ns = next,
            Ok(Message::Finish) | Err(ConnError::Closed) => return Ok(()),
            Ok(other) => return Err(format!("expected a time probe, got '{}'", other.kind())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Runs a controller's test as a client towards another agent and returns its result. The
/// traffic goes between the two agents only: each sends to the end that connected to it.
fn relay_test(
    conn: &mut Conn,
    config: &AgentConfig,
    target: &str,
    spec: TestSpec,
    start_at_ns: Option<u64>,
    log: &dyn Fn(String),
) -> Result<(), String> {
    if let Some(at) = start_at_ns {
        let wait = at.saturating_sub(flowlab_sys::clock::realtime_ns());
        std::thread::sleep(Duration::from_nanos(wait.min(60_000_000_000)));
    }
    log(format!("relayed test towards {target}"));
    let options = crate::client::TestOptions {
        target: target.to_string(),
        spec,
        key: config.key.clone(),
        drain: Duration::from_millis(500),
        interface: None,
        agent_interface: None,
    };
    let result = match crate::client::run_test(&options, &mut |_| {}) {
        Ok(run) => serde_json::to_value(&run.result).map_err(|e| e.to_string())?,
        Err(e) => {
            let _ = conn.send(&Message::Error {
                message: relay_error(&e),
            });
            return Err(format!("relayed test failed: {e}"));
        }
    };
    conn.send(&Message::TestDone { result })
        .map_err(|e| e.to_string())
}

/// What a controller learns of a relayed test that failed. A target that never spoke flowlab
/// gets one answer whatever it was (closed, open, filtered or keyed port, unresolvable), so
/// a relay cannot be used as a port scanner.
fn relay_error(e: &crate::client::ClientError) -> String {
    use crate::client::ClientError;
    match e {
        ClientError::Target(_) | ClientError::Connect { .. } | ClientError::NotAnAgent { .. } => {
            "the target did not answer as a flowlab agent".into()
        }
        other => other.to_string(),
    }
}

/// Checks a request against the protocol's bounds and the agent's limits.
pub fn check_request(spec: &TestSpec, limits: &Limits) -> Result<(), String> {
    check_limits(spec, limits)?;
    let ports_given = spec.client_udp_ports.len() == spec.flows as usize
        && spec.client_udp_ports.iter().all(|&p| p != 0);
    if spec.protocol == Protocol::Udp && !ports_given {
        return Err("a UDP test needs the client's UDP port for each flow".into());
    }
    Ok(())
}

/// The protocol's bounds and the agent's limits, for its own tests and relayed ones alike.
fn check_limits(spec: &TestSpec, limits: &Limits) -> Result<(), String> {
    spec.validate().map_err(|e| e.to_string())?;
    if let Some(d) = spec.duration_ns {
        if d > limits.max_duration.as_nanos() as u64 {
            return Err(format!(
                "duration {:.1} s exceeds the agent's limit of {:.1} s (--max-duration)",
                d as f64 / 1e9,
                limits.max_duration.as_secs_f64()
            ));
        }
    }
    if let Some(max) = limits.max_rate_bps {
        check_load(spec, max)?;
    }
    if spec.flows as usize > limits.max_flows {
        return Err(format!(
            "{} flows exceed the agent's limit of {} (--max-flows)",
            spec.flows, limits.max_flows
        ));
    }
    Ok(())
}

/// How far ahead a traffic model is run to find its load, and how many of its packets at most.
const LOAD_HORIZON: Duration = Duration::from_secs(10);
const LOAD_MAX_PACKETS: usize = 1_000_000;

/// The test's offered load against the agent's `--max-rate`, over all its flows. A constant
/// rate is its rate times its flows. A traffic model is run ahead (its own sources, no clock)
/// over its first seconds, and every packet must fit a token bucket of the limit: a model's
/// peak where it has one, else its mean with a bounded burst. `--rate max` and transactions
/// run held to the limit, which the agent also enforces while sending.
fn check_load(spec: &TestSpec, max: u64) -> Result<(), String> {
    let flows = u64::from(spec.flows);
    let limit = || {
        format!(
            "the agent's limit of {} (--max-rate)",
            format_rate(max as f64)
        )
    };
    let Some(traffic) = &spec.traffic else {
        let rate = spec.rate_bps.unwrap_or(0);
        let total = rate.saturating_mul(flows);
        let asked = match flows {
            1 => format!("rate {}", format_rate(rate as f64)),
            _ => format!(
                "{flows} flows x {} = {}",
                format_rate(rate as f64),
                format_rate(total as f64)
            ),
        };
        return match total > max {
            true => Err(format!("{asked} exceeds {}", limit())),
            false => Ok(()),
        };
    };
    if traffic.transactions().is_some() {
        return Ok(());
    }
    let flow = flow_params(spec, 0);
    let sources = (0..spec.flows as usize)
        .filter_map(|i| flow.source_for(i).transpose())
        .collect::<Result<Vec<_>, String>>()?;
    let horizon = spec
        .duration_ns
        .map_or(LOAD_HORIZON, Duration::from_nanos)
        .min(LOAD_HORIZON);
    let bucket = TokenBucket::new(max, flowlab_engine::SendBudget::burst_bytes(max));
    let load = offered_load(sources, horizon.as_nanos() as u64, LOAD_MAX_PACKETS, bucket);
    match load.first_excess_ns {
        Some(at) => Err(format!(
            "the traffic model offers {} over {flows} flow(s) and passes {} {:.0} ms in",
            format_rate(load.mean_bps),
            limit(),
            at as f64 / 1e6
        )),
        None => Ok(()),
    }
}

/// The interface native frames use: the one named, else the one holding the control
/// connection's local address.
pub fn raw_interface(named: Option<&str>, local_ip: IpAddr) -> Result<raw::Interface, String> {
    match named {
        Some(name) => raw::interface_named(name).map_err(|e| e.to_string()),
        None => {
            raw::interface_with_address(local_ip).map_err(|e| format!("{e}: name the interface"))
        }
    }
}

/// Where the agent's native frames go: out of the interface the kernel routes the control
/// peer through, to the MAC address of the peer's neighbour entry there. Never to what a
/// request names: a request naming another MAC address or interface is refused.
struct RawPath {
    local: raw::Interface,
    peer_mac: [u8; 6],
}

fn raw_path(spec: &TestSpec, peer_ip: IpAddr) -> Result<RawPath, String> {
    let peer = netlink::link_peer(peer_ip)
        .map_err(|e| format!("native frames go only to a client on this host's link: {e}"))?;
    let named = spec.raw.as_ref();
    if let Some(mac) = named.and_then(|r| parse_mac(&r.client_mac)) {
        if mac != peer.mac {
            return Err(format!(
                "the request names client MAC address {}, but {} is {} on {}",
                format_mac(&mac),
                peer_ip.to_canonical(),
                format_mac(&peer.mac),
                peer.interface
            ));
        }
    }
    if let Some(name) = named.and_then(|r| r.agent_interface.as_deref()) {
        if name != peer.interface {
            return Err(format!(
                "the request names interface {name}, but the client is reached on {}",
                peer.interface
            ));
        }
    }
    let local = raw::interface_named(&peer.interface).map_err(|e| e.to_string())?;
    Ok(RawPath {
        local,
        peer_mac: peer.mac,
    })
}

/// A native frame must fit the interface's MTU: there is no IP to fragment it.
pub fn check_mtu(interface: &raw::Interface, size: u32) -> Result<(), String> {
    let mtu = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", interface.name))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok());
    match mtu {
        Some(mtu) if size > mtu => Err(format!(
            "a native frame of {size} B exceeds the MTU of {} ({mtu} B)",
            interface.name
        )),
        _ => Ok(()),
    }
}

/// A failed AF_PACKET socket, in words a user can act on.
pub fn raw_error(interface: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "native frames (--proto raw) need CAP_NET_RAW: run as root".to_string()
        }
        _ => format!("cannot open a native socket on {interface}: {e}"),
    }
}

/// Socket options that do not apply to native frames.
fn raw_notes(flow: &FlowParams) -> Vec<String> {
    let o = &flow.socket;
    let ip_only = o.dscp.is_some() || o.mark.is_some() || o.kernel_pacing || o.tx_timestamps;
    ip_only
        .then(|| {
            "DSCP, marks, kernel pacing and transmit stamps apply to IP sockets, not native frames"
                .to_string()
        })
        .into_iter()
        .collect()
}

/// The agent's data sockets, one per flow, before and after the client's side is known.
enum DataSockets {
    Udp(Vec<UdpSocket>),
    /// Native frames: one socket on the interface, sending to the client's MAC address; this
    /// end's MAC address.
    Raw(Vec<RawSocket>, [u8; 6]),
    TcpListening(TcpListener, usize),
    Tcp(Vec<TcpStream>),
    /// CRR: a connection per transaction, accepted from the client's address only.
    TcpAcceptEach(TcpListener, IpAddr),
}

impl DataSockets {
    /// UDP: each bound and connected to the client's address only, so the kernel drops
    /// datagrams from anyone else and the agent can send nowhere else.
    fn open(
        spec: &TestSpec,
        local_ip: IpAddr,
        peer_ip: IpAddr,
        raw: Option<RawPath>,
    ) -> Result<DataSockets, String> {
        let local = SocketAddr::new(local_ip, 0);
        match spec.protocol {
            Protocol::Udp => spec
                .client_udp_ports
                .iter()
                .map(|&port| {
                    let sock = UdpSocket::bind(local)
                        .map_err(|e| format!("cannot open a UDP data socket: {e}"))?;
                    sock.connect(SocketAddr::new(peer_ip, port))
                        .map_err(|e| format!("cannot connect a UDP data socket: {e}"))?;
                    Ok(sock)
                })
                .collect::<Result<Vec<_>, String>>()
                .map(DataSockets::Udp),
            Protocol::Tcp => {
                let connect_each = spec
                    .traffic
                    .as_ref()
                    .and_then(|t| t.transactions())
                    .is_some_and(|rr| rr.connect_each);
                TcpListener::bind(local)
                    .map(|l| match connect_each {
                        true => DataSockets::TcpAcceptEach(l, peer_ip),
                        false => DataSockets::TcpListening(l, spec.flows as usize),
                    })
                    .map_err(|e| format!("cannot open a TCP data socket: {e}"))
            }
            Protocol::Raw => {
                let interface = raw.ok_or("native frames need the path to the client")?;
                check_mtu(&interface.local, spec.size)?;
                RawSocket::open(&interface.local, interface.peer_mac)
                    .map(|s| DataSockets::Raw(vec![s], interface.local.mac))
                    .map_err(|e| raw_error(&interface.local.name, &e))
            }
        }
    }

    /// This end's MAC address, for native frames.
    fn mac(&self) -> Option<String> {
        match self {
            DataSockets::Raw(_, mac) => Some(format_mac(mac)),
            _ => None,
        }
    }

    /// The ports the client sends to: one per UDP flow; TCP flows all connect to one port.
    fn ports(&self) -> Vec<u16> {
        let port = |a: std::io::Result<SocketAddr>| a.map(|a| a.port()).unwrap_or(0);
        match self {
            DataSockets::Udp(socks) => socks.iter().map(|s| port(s.local_addr())).collect(),
            DataSockets::Raw(..) => Vec::new(),
            DataSockets::TcpListening(l, _) | DataSockets::TcpAcceptEach(l, _) => {
                vec![port(l.local_addr())]
            }
            DataSockets::Tcp(streams) => streams.iter().map(|s| port(s.local_addr())).collect(),
        }
    }

    /// Applies the test's socket options; returns notes for the report.
    fn configure(&self, flow: &FlowParams, sending: bool) -> Vec<String> {
        match self {
            DataSockets::Udp(socks) => flowlab_engine::configure_udp(socks, flow, sending),
            DataSockets::Raw(..) => raw_notes(flow),
            DataSockets::Tcp(streams) => flowlab_engine::configure_tcp(streams, flow, sending),
            DataSockets::TcpListening(..) | DataSockets::TcpAcceptEach(..) => Vec::new(),
        }
    }

    /// TCP: accepts the data connections, from the client's address only.
    fn establish(self, peer_ip: IpAddr) -> Result<DataSockets, String> {
        let DataSockets::TcpListening(listener, flows) = self else {
            return Ok(self);
        };
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        let mut streams = Vec::with_capacity(flows);
        while streams.len() < flows {
            if Instant::now() >= deadline {
                return Err(format!(
                    "the client opened {} of {flows} TCP data connections",
                    streams.len()
                ));
            }
            match listener.accept() {
                Ok((stream, from)) if from.ip() == peer_ip => {
                    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                    streams.push(stream);
                }
                Ok(_) => {} // someone else: dropped
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(format!("data connection failed: {e}")),
            }
        }
        Ok(DataSockets::Tcp(streams))
    }
}

/// What a role thread sends to the session thread.
enum Event {
    Interval(Box<IntervalReport>),
    SenderDone,
}

/// Runs the agent's role while serving the control connection, then reports.
fn run_test(
    conn: &mut Conn,
    data: DataSockets,
    spec: &TestSpec,
    session: u32,
    limits: &Limits,
    cookie: Option<u64>,
) -> SideReport {
    let max_duration = limits.max_duration;
    let flow = FlowParams {
        send_cap_bps: limits.max_rate_bps,
        return_cookie: cookie,
        ..flow_params(spec, session)
    };
    let (_, role) = roles(spec);
    let stop = AtomicBool::new(false);
    let (events, inbox) = mpsc::channel::<Event>();
    let cpu_start = CpuSnapshot::take().ok();
    let started = Instant::now();
    let mut report = SideReport {
        role,
        host: flowlab_sys::host::hostname(),
        cpu: None,
        role_cpu: None,
        sender: None,
        receiver: None,
        echo: None,
        transactions: None,
        responder: None,
        tcp_info: None,
        error: None,
        notes: data.configure(&flow, role == flowlab_results::Role::Sender),
    };
    if let (None, Some(cap)) = (spec.rate_bps, limits.max_rate_bps) {
        report.notes.push(format!(
            "--rate max: each end sends at most {} in all, the agent's limit (--max-rate)",
            format_rate(cap as f64)
        ));
    }
    let mut log: Vec<PacketRecord> = Vec::new();
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let mut on_interval = |r: IntervalReport| {
                let _ = events.send(Event::Interval(Box::new(r)));
            };
            let (mut outcome, time) = ThreadTime::measure(|| {
                run_role(data, spec, &flow, &stop, &mut on_interval, &events)
            });
            outcome.time = time.with_workers(outcome.worker_cpu_ns);
            outcome
        });
        let (mut last_beat, mut last_heard) = (Instant::now(), Instant::now());
        loop {
            while let Ok(event) = inbox.try_recv() {
                let message = match event {
                    Event::Interval(report) => Message::Interval { report: *report },
                    Event::SenderDone => Message::SenderDone,
                };
                if conn.send(&message).is_err() {
                    report.error = Some("the client went away".into());
                }
            }
            if report.error.is_some() {
                break;
            }
            if started.elapsed() > max_duration + OVERRUN_GRACE {
                report.error = Some(format!(
                    "stopped at the duration limit of {:.0} s",
                    max_duration.as_secs_f64()
                ));
                break;
            }
            if last_beat.elapsed() >= HEARTBEAT {
                last_beat = Instant::now();
                let _ = conn.send(&Message::Heartbeat);
            }
            match conn.poll(Duration::from_millis(50)) {
                Ok(Some(Message::Finish)) => break,
                Ok(Some(_)) => last_heard = Instant::now(),
                Ok(None) if last_heard.elapsed() > CLIENT_SILENCE => {
                    report.error = Some(format!(
                        "client lost: no word from it for {:.0} s",
                        CLIENT_SILENCE.as_secs_f64()
                    ));
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    report.error = Some(format!("client lost: {e}"));
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let outcome = worker
            .join()
            .unwrap_or_else(|_| RoleOutcome::failed("the test thread failed"));
        let spin = outcome.sender.as_ref().map_or(0, |s| s.pacing_spin_ns);
        report.role_cpu = outcome.time.role_cpu(spin);
        report.sender = outcome.sender;
        report.receiver = outcome.receiver;
        report.echo = outcome.echo;
        report.responder = outcome.responder;
        report.tcp_info = outcome.tcp_info;

        log = outcome.log;
        if report.error.is_none() {
            report.error = outcome.error;
        }
    });
    report.cpu = cpu_start.and_then(|start| cpu_load(&start));
    // A client that stopped reading stalls the first send; the rest would stall again.
    let logged = log.chunks(PACKET_LOG_CHUNK).try_for_each(|chunk| {
        conn.send(&Message::PacketLog {
            records: chunk.to_vec(),
        })
    });
    if logged.is_ok() {
        let _ = conn.send(&Message::Report {
            report: Box::new(report.clone()),
        });
    }
    report
}

/// Mean CPU load since `start`.
pub fn cpu_load(start: &CpuSnapshot) -> Option<flowlab_results::CpuLoad> {
    let end = CpuSnapshot::take().ok()?;
    let u = flowlab_sys::cpu::usage_between(start, &end);
    Some(flowlab_results::CpuLoad {
        process_user_pct: u.process_user_pct,
        process_system_pct: u.process_system_pct,
        host_pct: u.host_pct,
        cores: u.cores,
        process_max_rss_bytes: u.process_max_rss_bytes,
    })
}

pub fn flow_params(spec: &TestSpec, session: u32) -> FlowParams {
    FlowParams {
        session,
        rate_bps: spec.rate_bps,
        size: spec.size,
        duration: spec.duration_ns.map(Duration::from_nanos),
        count: spec.count,
        interval: spec.interval_ns.map(Duration::from_nanos),
        packet_log: spec.packet_log,
        busy_poll: spec.busy_poll,
        socket: spec.socket.clone(),
        traffic: spec.traffic.clone(),
        seed: spec.seed,
        send_cap_bps: None,
        return_cookie: None,
    }
}

/// CPU and wall time of the threads that ran a role.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadTime {
    pub user_ns: u64,
    pub system_ns: u64,
    pub wall_ns: u64,
}

impl ThreadTime {
    /// Runs `f` on this thread and measures it. The total is the thread's precise CPU clock;
    /// getrusage's tick-granular user/system split only apportions it.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (T, ThreadTime) {
        let usage = || flowlab_sys::cpu::thread_usage().unwrap_or((0, 0));
        let (start, start_cpu, wall) = (usage(), flowlab_sys::cpu::thread_cpu_ns(), Instant::now());
        let out = f();
        let (end, end_cpu) = (usage(), flowlab_sys::cpu::thread_cpu_ns());
        let total = end_cpu.saturating_sub(start_cpu);
        let user_ticks = end.0.saturating_sub(start.0);
        let system_ticks = end.1.saturating_sub(start.1);
        let user_ns = match user_ticks + system_ticks {
            0 => total,
            ticks => (total as u128 * u128::from(user_ticks) / u128::from(ticks)) as u64,
        };
        let time = ThreadTime {
            user_ns,
            system_ns: total - user_ns,
            wall_ns: wall.elapsed().as_nanos() as u64,
        };
        (out, time)
    }

    /// Adds the CPU of worker threads a role started (extra TCP connections).
    pub fn with_workers(self, (user_ns, system_ns): (u64, u64)) -> ThreadTime {
        ThreadTime {
            user_ns: self.user_ns + user_ns,
            system_ns: self.system_ns + system_ns,
            ..self
        }
    }

    /// Two threads that ran side by side.
    pub fn plus(self, other: ThreadTime) -> ThreadTime {
        ThreadTime {
            user_ns: self.user_ns + other.user_ns,
            system_ns: self.system_ns + other.system_ns,
            wall_ns: self.wall_ns.max(other.wall_ns),
        }
    }

    /// Shares of one core; `spin_ns` of pacing busy-wait is named apart (it is user time).
    pub fn role_cpu(&self, spin_ns: u64) -> Option<flowlab_results::RoleCpu> {
        let pct = |ns: u64| 100.0 * ns as f64 / self.wall_ns as f64;
        (self.wall_ns > 0).then(|| flowlab_results::RoleCpu {
            user_pct: pct(self.user_ns),
            system_pct: pct(self.system_ns),
            pacing_spin_pct: pct(spin_ns.min(self.user_ns)),
        })
    }
}

/// What a role produced, whichever role it was.
#[derive(Default)]
pub struct RoleOutcome {
    pub time: ThreadTime,
    /// CPU of worker threads the role started, added to `time` once measured.
    pub worker_cpu_ns: (u64, u64),
    pub sender: Option<flowlab_results::SenderReport>,
    pub receiver: Option<flowlab_results::ReceiverReport>,
    pub echo: Option<flowlab_results::EchoReport>,
    pub transactions: Option<flowlab_results::TransactionReport>,
    pub responder: Option<flowlab_results::ResponderReport>,
    pub tcp_info: Option<flowlab_results::TcpInfoReport>,
    /// Records of the role: received packets, or sent ones for a lone sender.
    pub log: Vec<PacketRecord>,
    /// A loopback client's sent packets, beside the echoes in `log`.
    pub sent_log: Vec<PacketRecord>,
    pub error: Option<String>,
}

impl RoleOutcome {
    pub fn failed(why: &str) -> Self {
        RoleOutcome {
            error: Some(why.to_string()),
            ..RoleOutcome::default()
        }
    }
}

fn run_role(
    data: DataSockets,
    spec: &TestSpec,
    flow: &FlowParams,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(IntervalReport),
    events: &mpsc::Sender<Event>,
) -> RoleOutcome {
    let mut out = RoleOutcome::default();
    if flow.transactions().is_some() {
        let answered = match &data {
            DataSockets::Tcp(streams) => flowlab_engine::tcp_respond(streams, flow, stop),
            DataSockets::TcpAcceptEach(listener, peer) => {
                flowlab_engine::tcp_accept_respond(listener, *peer, spec.flows as usize, flow, stop)
            }
            DataSockets::Udp(socks) => flowlab_engine::udp_respond(socks, flow, stop),
            _ => return RoleOutcome::failed("request/response runs over TCP or UDP"),
        };
        out.worker_cpu_ns = answered.worker_cpu_ns;
        (out.responder, out.error) = (Some(answered.report), answered.error);
        return out;
    }
    match (data, spec.direction) {
        (DataSockets::Udp(socks), direction) => {
            datagram_role(&socks, direction, flow, stop, on_interval, events, &mut out)
        }
        (DataSockets::Raw(socks, _), direction) => {
            datagram_role(&socks, direction, flow, stop, on_interval, events, &mut out)
        }
        (DataSockets::Tcp(streams), Direction::Oneway) => {
            let r = flowlab_engine::tcp_receive(&streams, flow, false, stop, on_interval);
            (out.receiver, out.log, out.error) = (Some(r.report), r.log, r.error);
        }
        (DataSockets::Tcp(streams), Direction::Reverse) => {
            let s = flowlab_engine::tcp_send(&streams, flow, stop);
            out.worker_cpu_ns = s.worker_cpu_ns;
            out.tcp_info = streams.first().and_then(flowlab_engine::tcp_info_report);
            let _ = events.send(Event::SenderDone);
            (out.sender, out.log, out.error) = (Some(s.report), s.log, s.error);
        }
        (DataSockets::Tcp(streams), Direction::Loopback) => {
            let (echo, error) = flowlab_engine::tcp_echo(&streams, flow, stop);
            (out.echo, out.error) = (Some(echo), error);
        }
        (DataSockets::TcpListening(..) | DataSockets::TcpAcceptEach(..), _) => {
            out.error = Some("TCP data connection never established".into())
        }
    }
    out
}

/// The agent's role over UDP sockets or native frames: the same engine either way.
fn datagram_role<S: flowlab_engine::DatagramSocket>(
    socks: &[S],
    direction: Direction,
    flow: &FlowParams,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(IntervalReport),
    events: &mpsc::Sender<Event>,
    out: &mut RoleOutcome,
) {
    match direction {
        Direction::Oneway => {
            let r = flowlab_engine::udp_receive(socks, flow, false, stop, on_interval);
            (out.receiver, out.log, out.error) = (Some(r.report), r.log, r.error);
        }
        Direction::Reverse => {
            let s = flowlab_engine::udp_send(socks, flow, stop);
            let _ = events.send(Event::SenderDone);
            (out.sender, out.log, out.error) = (Some(s.report), s.log, s.error);
        }
        Direction::Loopback => {
            let (echo, error) = flowlab_engine::udp_echo(socks, flow, stop);
            (out.echo, out.error) = (Some(echo), error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Oneway,
            rate_bps: Some(1_000_000),
            size: 500,
            duration_ns: Some(1_000_000_000),
            count: None,
            interval_ns: None,
            flows: 1,
            client_udp_ports: vec![5000],
            raw: None,
            busy_poll: false,
            packet_log: false,
            socket: Default::default(),
            traffic: None,
            seed: 1,
        }
    }

    #[test]
    fn limits_refuse_with_reasons() {
        let limits = Limits {
            max_duration: Duration::from_secs(10),
            max_rate_bps: Some(5_000_000),
            max_tests: 1,
            max_flows: 4,
        };
        assert_eq!(check_request(&spec(), &limits), Ok(()));
        // --rate max runs held to the limit.
        let max = TestSpec {
            rate_bps: None,
            ..spec()
        };
        assert_eq!(check_request(&max, &limits), Ok(()));
        let cases = [
            (
                TestSpec { size: 10, ..spec() },
                "packet size 10 B is below the 32-byte probe header",
            ),
            (
                TestSpec {
                    size: 70_000,
                    ..spec()
                },
                "packet size 70000 B exceeds the UDP maximum of 65507 B",
            ),
            (
                TestSpec {
                    rate_bps: Some(6_000_000),
                    ..spec()
                },
                "rate 6.00 Mbit/s exceeds the agent's limit of 5.00 Mbit/s (--max-rate)",
            ),
            (
                TestSpec {
                    flows: 3,
                    client_udp_ports: vec![1, 2, 3],
                    rate_bps: Some(2_000_000),
                    ..spec()
                },
                "3 flows x 2.00 Mbit/s = 6.00 Mbit/s exceeds the agent's limit of 5.00 Mbit/s (--max-rate)",
            ),
            (
                TestSpec {
                    duration_ns: Some(20_000_000_000),
                    ..spec()
                },
                "duration 20.0 s exceeds the agent's limit of 10.0 s (--max-duration)",
            ),
            (
                TestSpec {
                    duration_ns: None,
                    ..spec()
                },
                "the test has no end: give a duration or a count",
            ),
            (
                TestSpec {
                    flows: 5,
                    client_udp_ports: vec![1, 2, 3, 4, 5],
                    ..spec()
                },
                "5 flows exceed the agent's limit of 4 (--max-flows)",
            ),
            (
                TestSpec {
                    client_udp_ports: vec![],
                    ..spec()
                },
                "a UDP test needs the client's UDP port for each flow",
            ),
        ];
        for (spec, reason) in cases {
            assert_eq!(check_request(&spec, &limits), Err(reason.to_string()));
        }
    }
}
