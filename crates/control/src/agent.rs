//! The agent: accepts control connections, runs each test in its own session thread, and
//! sends test traffic only to the address of the client that asked.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use flowlab_engine::FlowParams;
use flowlab_results::{IntervalReport, PacketRecord, SideReport};
use flowlab_sys::cpu::CpuSnapshot;
use flowlab_wire::control::HELLO_FLAG_AUTH_REQUIRED;
use flowlab_wire::{
    Direction, Hello, Message, Protocol, TestSpec, PROBE_HEADER_LEN, PROTOCOL_VERSION,
};

use crate::auth;
use crate::conn::{Conn, ConnError, PACKET_LOG_CHUNK};
use crate::result::roles;

/// What one test may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_duration: Duration,
    /// `None`: no limit on the rate, `--rate max` allowed.
    pub max_rate_bps: Option<u64>,
    pub max_tests: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_duration: Duration::from_secs(300),
            max_rate_bps: None,
            max_tests: 16,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    pub limits: Limits,
    /// Pre-shared key: when set, clients must answer the HMAC challenge first.
    pub key: Option<Vec<u8>>,
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
}

/// Largest UDP payload over IPv4 (65535 - 20 - 8); the IPv6 limit is higher, this one is safe.
pub const MAX_UDP_PAYLOAD: u32 = 65_507;
/// Largest TCP message.
pub const MAX_TCP_MESSAGE: u32 = 16 << 20;
/// How often the agent shows it is alive during a test.
const HEARTBEAT: Duration = Duration::from_millis(500);
/// How long a connecting peer may take for each setup step.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
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
    while !stop.load(Ordering::Relaxed) && !flowlab_sys::signal::is_interrupted() {
        match listener.accept() {
            Ok((stream, peer)) => {
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
                    if let Err(e) = run_session(stream, peer, session, &config, &stats, &*log) {
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

/// Releases a test slot when the session ends, however it ends.
struct Slot<'a>(&'a AgentStats);
impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.active_tests.fetch_sub(1, Ordering::Relaxed);
    }
}

fn refuse(conn: &mut Conn, stats: &AgentStats, reason: String) -> Result<(), String> {
    stats.refused.fetch_add(1, Ordering::Relaxed);
    let _ = conn.send(&Message::Refused {
        reason: reason.clone(),
    });
    Err(format!("refused: {reason}"))
}

fn protocol_error(stats: &AgentStats, e: ConnError) -> String {
    if matches!(e, ConnError::Protocol(_)) {
        stats.malformed_control.fetch_add(1, Ordering::Relaxed);
    }
    e.to_string()
}

fn run_session(
    stream: TcpStream,
    peer: SocketAddr,
    session: u32,
    config: &AgentConfig,
    stats: &AgentStats,
    log: &dyn Fn(String),
) -> Result<(), String> {
    let local_ip = stream.local_addr().map_err(|e| e.to_string())?.ip();
    let mut conn = Conn::new(stream);
    let hello = conn
        .recv_hello(SETUP_TIMEOUT)
        .map_err(|e| protocol_error(stats, e))?;
    let flags = if config.key.is_some() {
        HELLO_FLAG_AUTH_REQUIRED
    } else {
        0
    };
    conn.send_hello(Hello {
        version: PROTOCOL_VERSION,
        flags,
    })
    .map_err(|e| e.to_string())?;
    hello.check_version().map_err(|e| format!("client {e}"))?;

    if let Some(key) = &config.key {
        let nonce = auth::new_nonce();
        conn.send(&Message::AuthChallenge {
            nonce: nonce.clone(),
        })
        .map_err(|e| e.to_string())?;
        match conn
            .recv(SETUP_TIMEOUT)
            .map_err(|e| protocol_error(stats, e))?
        {
            Message::AuthResponse { mac } if auth::verify(key, &nonce, &mac) => {
                conn.send(&Message::AuthOk).map_err(|e| e.to_string())?;
            }
            _ => {
                return refuse(
                    &mut conn,
                    stats,
                    "authentication failed: wrong or missing key".into(),
                )
            }
        }
    }

    let spec = match conn
        .recv(SETUP_TIMEOUT)
        .map_err(|e| protocol_error(stats, e))?
    {
        Message::Request { spec } => spec,
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
    let active = stats.active_tests.fetch_add(1, Ordering::Relaxed);
    let _slot = Slot(stats);
    if active >= config.limits.max_tests {
        return refuse(
            &mut conn,
            stats,
            format!(
                "agent is running its limit of {} concurrent tests (--max-tests)",
                config.limits.max_tests
            ),
        );
    }
    let data = DataSocket::open(&spec, local_ip, peer.ip()).inspect_err(|e| {
        let _ = conn.send(&Message::Error { message: e.clone() });
    })?;
    conn.send(&Message::Accepted {
        session,
        data_port: data.port(),
    })
    .map_err(|e| e.to_string())?;
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
        .recv(SETUP_TIMEOUT)
        .map_err(|e| protocol_error(stats, e))?
    {
        Message::Start => {}
        other => return Err(format!("expected start, got '{}'", other.kind())),
    }
    stats.tests_run.fetch_add(1, Ordering::Relaxed);
    let report = run_test(&mut conn, data, &spec, session, config.limits.max_duration);
    log(format!(
        "{peer}: session {session} done{}",
        report
            .error
            .as_ref()
            .map_or(String::new(), |e| format!(": {e}"))
    ));
    Ok(())
}

/// Checks a test against the protocol's bounds; the client checks before asking, the agent
/// again on receipt.
pub fn check_spec(spec: &TestSpec) -> Result<(), String> {
    let (max_size, what) = match spec.protocol {
        Protocol::Udp => (MAX_UDP_PAYLOAD, "the UDP maximum"),
        Protocol::Tcp => (MAX_TCP_MESSAGE, "the TCP message maximum"),
    };
    if spec.size < PROBE_HEADER_LEN as u32 {
        return Err(format!(
            "packet size {} B is below the {PROBE_HEADER_LEN}-byte probe header",
            spec.size
        ));
    }
    if spec.size > max_size {
        return Err(format!(
            "packet size {} B exceeds {what} of {max_size} B",
            spec.size
        ));
    }
    if spec.duration_ns.is_none() && spec.count.is_none() {
        return Err("the test has no end: give a duration or a count".into());
    }
    if spec.rate_bps == Some(0) {
        return Err("rate must be above 0 bit/s".into());
    }
    Ok(())
}

/// Checks a request against the protocol's bounds and the agent's limits.
pub fn check_request(spec: &TestSpec, limits: &Limits) -> Result<(), String> {
    check_spec(spec)?;
    if let Some(d) = spec.duration_ns {
        if d > limits.max_duration.as_nanos() as u64 {
            return Err(format!(
                "duration {:.1} s exceeds the agent's limit of {:.1} s (--max-duration)",
                d as f64 / 1e9,
                limits.max_duration.as_secs_f64()
            ));
        }
    }
    match (spec.rate_bps, limits.max_rate_bps) {
        (None, Some(max)) => {
            return Err(format!(
                "--rate max is not allowed: the agent limits rates to {max} bit/s (--max-rate)"
            ))
        }
        (Some(rate), Some(max)) if rate > max => {
            return Err(format!(
                "rate {rate} bit/s exceeds the agent's limit of {max} bit/s (--max-rate)"
            ))
        }
        _ => {}
    }
    if spec.protocol == Protocol::Udp && spec.client_udp_port.is_none_or(|p| p == 0) {
        return Err("a UDP test needs the client's UDP port".into());
    }
    Ok(())
}

/// The agent's data socket before and after the client's side is known.
enum DataSocket {
    Udp(UdpSocket),
    TcpListening(TcpListener),
    Tcp(TcpStream),
}

impl DataSocket {
    /// UDP: bound and connected to the client's address only, so the kernel drops datagrams
    /// from anyone else and the agent can send nowhere else.
    fn open(spec: &TestSpec, local_ip: IpAddr, peer_ip: IpAddr) -> Result<DataSocket, String> {
        let local = SocketAddr::new(local_ip, 0);
        match spec.protocol {
            Protocol::Udp => {
                let sock = UdpSocket::bind(local)
                    .map_err(|e| format!("cannot open a UDP data socket: {e}"))?;
                let port = spec.client_udp_port.unwrap_or(0);
                sock.connect(SocketAddr::new(peer_ip, port))
                    .map_err(|e| format!("cannot connect the UDP data socket: {e}"))?;
                Ok(DataSocket::Udp(sock))
            }
            Protocol::Tcp => TcpListener::bind(local)
                .map(DataSocket::TcpListening)
                .map_err(|e| format!("cannot open a TCP data socket: {e}")),
        }
    }

    fn port(&self) -> u16 {
        let addr = match self {
            DataSocket::Udp(s) => s.local_addr(),
            DataSocket::TcpListening(l) => l.local_addr(),
            DataSocket::Tcp(s) => s.local_addr(),
        };
        addr.map(|a| a.port()).unwrap_or(0)
    }

    /// TCP: accepts the data connection, from the client's address only.
    fn establish(self, peer_ip: IpAddr) -> Result<DataSocket, String> {
        let DataSocket::TcpListening(listener) = self else {
            return Ok(self);
        };
        listener.set_nonblocking(true).map_err(|e| e.to_string())?;
        let deadline = Instant::now() + SETUP_TIMEOUT;
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, from)) if from.ip() == peer_ip => {
                    stream.set_nonblocking(false).map_err(|e| e.to_string())?;
                    return Ok(DataSocket::Tcp(stream));
                }
                Ok(_) => {} // someone else: dropped
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(format!("data connection failed: {e}")),
            }
        }
        Err("the client did not open the TCP data connection".into())
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
    data: DataSocket,
    spec: &TestSpec,
    session: u32,
    max_duration: Duration,
) -> SideReport {
    let flow = flow_params(spec, session);
    let (_, role) = roles(spec.direction);
    let stop = AtomicBool::new(false);
    let (events, inbox) = mpsc::channel::<Event>();
    let cpu_start = CpuSnapshot::take().ok();
    let started = Instant::now();
    let mut report = SideReport {
        role,
        host: flowlab_sys::host::hostname(),
        cpu: None,
        sender: None,
        receiver: None,
        echo: None,
        tcp_info: None,
        error: None,
    };
    let mut log: Vec<PacketRecord> = Vec::new();
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let mut on_interval = |r: IntervalReport| {
                let _ = events.send(Event::Interval(Box::new(r)));
            };
            run_role(data, spec, &flow, &stop, &mut on_interval, &events)
        });
        let mut last_beat = Instant::now();
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
                Ok(Some(_)) | Ok(None) => {}
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
        report.sender = outcome.sender;
        report.receiver = outcome.receiver;
        report.echo = outcome.echo;
        report.tcp_info = outcome.tcp_info;
        log = outcome.log;
        if report.error.is_none() {
            report.error = outcome.error;
        }
    });
    report.cpu = cpu_start.and_then(|start| cpu_load(&start));
    for chunk in log.chunks(PACKET_LOG_CHUNK) {
        let _ = conn.send(&Message::PacketLog {
            records: chunk.to_vec(),
        });
    }
    let _ = conn.send(&Message::Report {
        report: Box::new(report.clone()),
    });
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
    }
}

/// What a role produced, whichever role it was.
#[derive(Default)]
pub struct RoleOutcome {
    pub sender: Option<flowlab_results::SenderReport>,
    pub receiver: Option<flowlab_results::ReceiverReport>,
    pub echo: Option<flowlab_results::EchoReport>,
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
    data: DataSocket,
    spec: &TestSpec,
    flow: &FlowParams,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(IntervalReport),
    events: &mpsc::Sender<Event>,
) -> RoleOutcome {
    let mut out = RoleOutcome::default();
    match (data, spec.direction) {
        (DataSocket::Udp(sock), Direction::Oneway) => {
            let r = flowlab_engine::udp_receive(&sock, flow, false, stop, on_interval);
            (out.receiver, out.log, out.error) = (Some(r.report), r.log, r.error);
        }
        (DataSocket::Udp(sock), Direction::Reverse) => {
            let s = flowlab_engine::udp_send(&sock, flow, stop);
            let _ = events.send(Event::SenderDone);
            (out.sender, out.log, out.error) = (Some(s.report), s.log, s.error);
        }
        (DataSocket::Udp(sock), Direction::Loopback) => {
            let (echo, error) = flowlab_engine::udp_echo(&sock, flow.session, stop);
            (out.echo, out.error) = (Some(echo), error);
        }
        (DataSocket::Tcp(mut stream), Direction::Oneway) => {
            let r = flowlab_engine::tcp_receive(&mut stream, flow, false, stop, on_interval);
            (out.receiver, out.log, out.error) = (Some(r.report), r.log, r.error);
        }
        (DataSocket::Tcp(mut stream), Direction::Reverse) => {
            let s = flowlab_engine::tcp_send(&mut stream, flow, stop);
            out.tcp_info = flowlab_engine::tcp_info_report(&stream);
            let _ = events.send(Event::SenderDone);
            (out.sender, out.log, out.error) = (Some(s.report), s.log, s.error);
        }
        (DataSocket::Tcp(mut stream), Direction::Loopback) => {
            let (echo, error) = flowlab_engine::tcp_echo(&mut stream, flow, stop);
            (out.echo, out.error) = (Some(echo), error);
        }
        (DataSocket::TcpListening(_), _) => {
            out.error = Some("TCP data connection never established".into())
        }
    }
    out
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
            client_udp_port: Some(5000),
            packet_log: false,
        }
    }

    #[test]
    fn limits_refuse_with_reasons() {
        let limits = Limits {
            max_duration: Duration::from_secs(10),
            max_rate_bps: Some(5_000_000),
            max_tests: 1,
        };
        assert_eq!(check_request(&spec(), &limits), Ok(()));
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
                "rate 6000000 bit/s exceeds the agent's limit of 5000000 bit/s (--max-rate)",
            ),
            (
                TestSpec {
                    rate_bps: None,
                    ..spec()
                },
                "--rate max is not allowed: the agent limits rates to 5000000 bit/s (--max-rate)",
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
                    client_udp_port: None,
                    ..spec()
                },
                "a UDP test needs the client's UDP port",
            ),
        ];
        for (spec, reason) in cases {
            assert_eq!(check_request(&spec, &limits), Err(reason.to_string()));
        }
    }
}
