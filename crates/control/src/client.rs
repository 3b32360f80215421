//! The client: asks an agent for a test, runs its own side, and combines both sides.

use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::protocol::Message;
use flowlab_engine::{QdiscWatch, RunContext};
use flowlab_results::schedule_watch::ScheduleWatch;
use flowlab_results::{packet_log, IntervalReport, PacketRecord, SideReport};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_wire::control::MAX_OPEN_REQUEST_LEN;
use flowlab_wire::{ClientHello, ControlError};

use crate::auth::{End, Nonces};
use crate::conn::{Conn, ConnError, Deadline};
use crate::native::{self, check_mtu, raw_error};
use crate::outcome::{RoleOutcome, ThreadTime};
use crate::result::{roles, Origin, TestResult};
use crate::{auth, DEFAULT_PORT};

/// Errors that stop a test before it starts. Once it runs, errors land in the result instead,
/// beside what was measured.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Target(String),
    #[error("cannot connect to {addr}: {reason}")]
    Connect { addr: SocketAddr, reason: String },
    #[error("agent at {addr} speaks protocol version {peer}, this client speaks {ours}: run the same flowlab version on both ends")]
    Version {
        addr: SocketAddr,
        peer: u16,
        ours: u16,
    },
    #[error("{addr} is not a flowlab agent (bad handshake)")]
    NotAnAgent { addr: SocketAddr },
    #[error("the agent at {addr} requires a pre-shared key: pass --key-file")]
    KeyRequired { addr: SocketAddr },
    #[error("the agent at {addr} does not ask for a key, so it cannot prove it holds yours: refusing it (start it with --key-file, or test without one)")]
    KeyNotAsked { addr: SocketAddr },
    #[error("the agent at {addr} could not prove it holds the key: refusing it")]
    AgentUnproven { addr: SocketAddr },
    #[error("the agent refused the test: {0}")]
    Refused(String),
    #[error("test setup failed: {0}")]
    Setup(String),
}

/// What to run and against whom.
#[derive(Debug, Clone)]
pub struct TestOptions {
    /// `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address.
    pub target: String,
    pub spec: TestSpec,
    pub key: Option<Vec<u8>>,
    /// How long to wait for in-flight packets after the last one was sent.
    pub drain: Duration,
    /// Native frames: this end's interface and the agent's, when not the ones holding the
    /// control connection's addresses.
    pub interface: Option<String>,
    pub agent_interface: Option<String>,
    /// This end's address for the control connection and the data sockets (`--bind`), and
    /// the first data port (`--cport`: flow *i* on port + *i*); the kernel picks what is
    /// `None`. Connection-per-transaction tests (CRR) connect from ephemeral ports.
    pub bind: Option<IpAddr>,
    pub cport: Option<u16>,
}

/// A finished (or stopped) test: the result document and, when asked for, per-packet records.
#[derive(Debug, Clone)]
pub struct TestRun {
    pub result: TestResult,
    pub packets: Vec<PacketRecord>,
}

const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// With heartbeats every 0.5 s, this long without a word means the agent is gone.
const AGENT_SILENCE: Duration = Duration::from_millis(2500);
/// How long the agent may take to send its report after Finish.
const REPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Splits `HOST[:PORT]` and resolves it.
pub fn resolve(target: &str) -> Result<SocketAddr, ClientError> {
    resolve_with_port(target, DEFAULT_PORT)
}

/// [`resolve`] for another service: `default_port` when the target names none.
pub fn resolve_with_port(target: &str, default_port: u16) -> Result<SocketAddr, ClientError> {
    let (host, port) = split_target(target)?;
    resolve_host(&host, port.unwrap_or(default_port), Family::Any)
}

/// Which of a host's addresses a client takes (iperf3's `-4` and `-6`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Family {
    #[default]
    Any,
    V4,
    V6,
}

impl Family {
    /// The family `-4` or `-6` leave (`-4` when both are given).
    pub fn from_flags(ipv4: bool, ipv6: bool) -> Family {
        match (ipv4, ipv6) {
            (true, _) => Family::V4,
            (_, true) => Family::V6,
            _ => Family::Any,
        }
    }
}

/// The first address of `host` in `family`, with `port`.
pub fn resolve_host(host: &str, port: u16, family: Family) -> Result<SocketAddr, ClientError> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|_| ClientError::Target(format!("cannot resolve host '{host}'")))?;
    let mut fitting = addrs.filter(|a| match family {
        Family::Any => true,
        Family::V4 => a.is_ipv4(),
        Family::V6 => a.is_ipv6(),
    });
    let which = match family {
        Family::Any => "",
        Family::V4 => "IPv4 ",
        Family::V6 => "IPv6 ",
    };
    fitting
        .next()
        .ok_or_else(|| ClientError::Target(format!("host '{host}' has no {which}address")))
}

/// `HOST[:PORT]`, `[V6]:PORT` or a bare IPv6 address into the host and the port it names.
pub fn split_target(target: &str) -> Result<(String, Option<u16>), ClientError> {
    let bad_port = |p: &str| ClientError::Target(format!("invalid port '{p}' in '{target}'"));
    if let Some(rest) = target.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| ClientError::Target(format!("missing ']' in '{target}'")))?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p.parse().map_err(|_| bad_port(p))?),
            None if after.is_empty() => None,
            None => return Err(bad_port(after)),
        };
        return Ok((host.to_string(), port));
    }
    if target.is_empty() {
        return Err(ClientError::Target("no host given".into()));
    }
    // More than one colon: a bare IPv6 address without a port.
    if target.matches(':').count() > 1 {
        return Ok((target.to_string(), None));
    }
    match target.split_once(':') {
        Some((host, p)) => Ok((host.to_string(), Some(p.parse().map_err(|_| bad_port(p))?))),
        None => Ok((target.to_string(), None)),
    }
}

fn setup_error(e: ConnError) -> ClientError {
    ClientError::Setup(e.to_string())
}

fn setup_io(e: std::io::Error) -> ClientError {
    ClientError::Setup(e.to_string())
}

/// What the agent accepted.
struct Accepted {
    conn: Conn,
    spec: TestSpec,
    session: u32,
    data_ports: Vec<u16>,
    agent_mac: Option<String>,
    rate_cap_bps: Option<u64>,
    cookie: Option<u64>,
    udp: Vec<UdpSocket>,
    /// Native frames: this end's interface.
    raw_interface: Option<flowlab_sys::raw::Interface>,
}

/// What a request larger than an agent without a key takes needs.
const OPEN_REQUEST_HINT: &str =
    " of an agent without a key: shorten the trace, or use --key-file on both ends";

/// A TCP connection to `to` from `from`, when given (address, port or both; a fixed port may
/// be taken again while its last connection lingers in TIME_WAIT).
fn connect_from(from: Option<SocketAddr>, to: SocketAddr) -> std::io::Result<TcpStream> {
    let Some(from) = from else {
        return TcpStream::connect_timeout(&to, SETUP_TIMEOUT);
    };
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&from.into())?;
    socket.connect_timeout(&to.into(), SETUP_TIMEOUT)?;
    Ok(socket.into())
}

/// Where flow `flow`'s data socket binds: the control connection's address, and `--cport`
/// plus the flow's index.
fn data_addr(local_ip: IpAddr, cport: Option<u16>, flow: u32) -> Result<SocketAddr, ClientError> {
    let port = match cport {
        None => 0,
        Some(first) => u16::try_from(u32::from(first) + flow).map_err(|_| {
            ClientError::Setup(format!("--cport {first} leaves no port for flow {flow}"))
        })?,
    };
    Ok(SocketAddr::new(local_ip, port))
}

fn connect(from: Option<IpAddr>, addr: SocketAddr) -> Result<TcpStream, ClientError> {
    let from = from.map(|ip| SocketAddr::new(ip, 0));
    connect_from(from, addr).map_err(|e| ClientError::Connect {
        addr,
        reason: match e.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                "connection refused (is `flowlab serve` running there?)".into()
            }
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
                format!("no answer within {} s", SETUP_TIMEOUT.as_secs())
            }
            _ => e.to_string(),
        },
    })
}

/// Connects to an agent, exchanges hellos and, with a key, proves it and has the agent prove
/// it; a client with a key refuses an agent that does not ask for one.
pub(crate) fn connect_agent(
    addr: SocketAddr,
    key: Option<&[u8]>,
    from: Option<IpAddr>,
) -> Result<Conn, ClientError> {
    let mut conn = Conn::new(connect(from, addr)?);
    let by = Deadline::after(SETUP_TIMEOUT, "the agent's handshake");
    conn.send_hello(ClientHello::current())
        .map_err(setup_error)?;
    let hello = match conn.recv_hello(by) {
        Ok(h) => h,
        // No hello (bad bytes, silence, a close): whatever listens there is not an agent.
        Err(_) => return Err(ClientError::NotAnAgent { addr }),
    };
    if let Err(ControlError::VersionMismatch { peer, ours }) = hello.check_version() {
        return Err(ClientError::Version { addr, peer, ours });
    }
    match (hello.auth_required(), key) {
        (true, Some(key)) => authenticate(&mut conn, addr, key, by)?,
        (true, None) => return Err(ClientError::KeyRequired { addr }),
        (false, Some(_)) => return Err(ClientError::KeyNotAsked { addr }),
        (false, None) => conn.set_peer_max(MAX_OPEN_REQUEST_LEN, OPEN_REQUEST_HINT),
    }
    Ok(conn)
}

/// Answers the agent's challenge with this end's nonce and proof, checks the agent's proof,
/// and tags every later frame with the session key.
fn authenticate(
    conn: &mut Conn,
    addr: SocketAddr,
    key: &[u8],
    by: Deadline,
) -> Result<(), ClientError> {
    let agent_nonce = match conn.recv_by(by).map_err(setup_error)? {
        Message::AuthChallenge { nonce } => nonce,
        other => return Err(unexpected(other, "instead of an auth challenge")),
    };
    let client_nonce = auth::new_nonce();
    let nonces =
        Nonces::parse(&client_nonce, &agent_nonce).ok_or(ClientError::AgentUnproven { addr })?;
    conn.send(&Message::AuthResponse {
        nonce: client_nonce,
        mac: nonces.client_proof(key),
    })
    .map_err(setup_error)?;
    match conn.recv_by(by).map_err(setup_error)? {
        Message::AuthOk { mac } if nonces.verify_agent(key, &mac) => {}
        Message::AuthOk { .. } => return Err(ClientError::AgentUnproven { addr }),
        other => return Err(unexpected(other, "after authentication")),
    }
    conn.start_tags(nonces.session_key(key), End::Client);
    Ok(())
}

/// A refusal as such, anything else as out of place.
fn unexpected(message: Message, when: &str) -> ClientError {
    match message {
        Message::Refused { reason } => ClientError::Refused(reason),
        other => ClientError::Setup(format!("unexpected '{}' {when}", other.kind())),
    }
}

fn negotiate(options: &TestOptions, addr: SocketAddr) -> Result<Accepted, ClientError> {
    let mut conn = connect_agent(addr, options.key.as_deref(), options.bind)?;
    let local_ip = conn
        .stream()
        .local_addr()
        .map_err(|e| ClientError::Setup(e.to_string()))?
        .ip();
    let mut spec = options.spec.clone();
    let mut raw_interface = None;
    if spec.protocol == Protocol::Raw {
        let interface = native::raw_interface(options.interface.as_deref(), local_ip)
            .map_err(ClientError::Setup)?;
        check_mtu(&interface, spec.size).map_err(ClientError::Setup)?;
        spec.raw = Some(flowlab_spec::RawEndpoint {
            client_mac: flowlab_spec::format_mac(&interface.mac),
            agent_interface: options.agent_interface.clone(),
        });
        raw_interface = Some(interface);
    }
    // Many one-way flows share one socket: the agent's sockets all hear its one port.
    let shared = flowlab_engine::shares_socket(&spec);
    let sockets = if shared { 1 } else { spec.flows };
    let udp = match spec.protocol {
        // A multicast receiver hears the group, not a socket of this end.
        Protocol::Raw => Vec::new(),
        Protocol::Udp if spec.multicast.is_some() => Vec::new(),
        Protocol::Udp => (0..sockets)
            .map(|flow| {
                let at = data_addr(local_ip, options.cport, flow)?;
                UdpSocket::bind(at).map_err(|e| {
                    ClientError::Setup(format!("cannot open a UDP data socket on {at}: {e}"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        Protocol::Tcp | Protocol::Icmp => Vec::new(),
    };
    spec.client_udp_ports = udp
        .iter()
        .map(|s| s.local_addr().map(|a| a.port()).unwrap_or(0))
        .collect();
    if shared {
        spec.client_udp_ports = spec.client_udp_ports.repeat(spec.flows as usize);
    }
    conn.send(&Message::Request { spec: spec.clone() })
        .map_err(setup_error)?;
    match conn.recv(SETUP_TIMEOUT).map_err(setup_error)? {
        Message::Accepted {
            session,
            data_ports,
            agent_mac,
            rate_cap_bps,
            cookie,
        } => Ok(Accepted {
            conn,
            spec,
            session,
            data_ports,
            agent_mac,
            rate_cap_bps,
            cookie,
            udp,
            raw_interface,
        }),
        Message::Refused { reason } => Err(ClientError::Refused(reason)),
        Message::Error { message } => Err(ClientError::Setup(format!("agent: {message}"))),
        other => Err(ClientError::Setup(format!(
            "unexpected '{}' in reply to the request",
            other.kind()
        ))),
    }
}

/// The packet socket and frame headers of the shared socket's flows to `peers`.
fn frame_path(
    sock: &UdpSocket,
    peers: &[SocketAddr],
    spec: &TestSpec,
) -> Result<flowlab_engine::FramePath, ClientError> {
    let local = sock
        .local_addr()
        .map_err(|e| ClientError::Setup(e.to_string()))?;
    // A traffic model's larger packets, if any, fail at their send (EMSGSIZE).
    let size = spec.size as usize;
    flowlab_engine::FramePath::open(local, peers, spec.socket.dscp.unwrap_or(0), size)
        .map_err(ClientError::Setup)
}

/// The client's data sockets, one per flow.
enum Data {
    Udp(Vec<UdpSocket>),
    /// One unconnected socket for many one-way flows, each flow's agent address, and the
    /// packet socket their datagrams leave through (`--packet-socket`).
    SharedUdp(
        UdpSocket,
        Vec<SocketAddr>,
        Option<flowlab_engine::FramePath>,
    ),
    Raw(Vec<flowlab_sys::raw::RawSocket>),
    Tcp(Vec<TcpStream>),
    /// CRR: the agent's address, connected to anew for every transaction, and the number of
    /// concurrent transaction streams.
    TcpConnectEach(SocketAddr, usize),
}

fn connect_data(
    accepted: &mut Accepted,
    agent_ip: IpAddr,
    options: &TestOptions,
) -> Result<Data, ClientError> {
    let spec = &accepted.spec;
    let ports = &accepted.data_ports;
    let bad_reply = || {
        ClientError::Setup(format!(
            "the agent offered {} data ports for {} flows",
            ports.len(),
            spec.flows
        ))
    };
    match spec.protocol {
        Protocol::Icmp => Err(ClientError::Setup("ICMP echo runs without an agent".into())),
        Protocol::Raw => {
            let interface = accepted.raw_interface.as_ref().ok_or_else(bad_reply)?;
            let mac = accepted
                .agent_mac
                .as_deref()
                .and_then(flowlab_spec::parse_mac)
                .ok_or_else(|| {
                    ClientError::Setup("the agent sent no MAC address for native frames".into())
                })?;
            flowlab_sys::raw::RawSocket::open(interface, mac)
                .map(|s| Data::Raw(vec![s]))
                .map_err(|e| ClientError::Setup(raw_error(&interface.name, &e)))
        }
        Protocol::Udp if flowlab_engine::shares_socket(spec) => {
            let sock = accepted
                .udp
                .pop()
                .filter(|_| ports.len() == spec.flows as usize);
            let peers: Vec<SocketAddr> = ports
                .iter()
                .map(|&p| SocketAddr::new(agent_ip, p))
                .collect();
            let sock = sock.ok_or_else(bad_reply)?;
            let frames = match spec.socket.packet_socket {
                true => Some(frame_path(&sock, &peers, spec)?),
                false => None,
            };
            Ok(Data::SharedUdp(sock, peers, frames))
        }
        Protocol::Udp => {
            if ports.len() != accepted.udp.len() {
                return Err(bad_reply());
            }
            for (sock, &port) in accepted.udp.iter().zip(ports) {
                sock.connect(SocketAddr::new(agent_ip, port)).map_err(|e| {
                    ClientError::Setup(format!("cannot connect a UDP data socket: {e}"))
                })?;
            }
            Ok(Data::Udp(std::mem::take(&mut accepted.udp)))
        }
        Protocol::Tcp => {
            let agent = SocketAddr::new(agent_ip, *ports.first().ok_or_else(bad_reply)?);
            let connect_each = spec
                .traffic
                .as_ref()
                .and_then(|t| t.transactions())
                .is_some_and(|rr| rr.connect_each);
            if connect_each {
                return Ok(Data::TcpConnectEach(agent, spec.flows as usize));
            }
            let local_ip = accepted.conn.stream().local_addr().map_err(setup_io)?.ip();
            let bound = options.bind.is_some() || options.cport.is_some();
            (0..spec.flows)
                .map(|flow| {
                    let from = data_addr(local_ip, options.cport, flow)?;
                    connect_from(bound.then_some(from), agent).map_err(|e| {
                        ClientError::Setup(format!(
                            "cannot open a TCP data connection from {from} to {agent}: {e}"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Data::Tcp)
        }
    }
}

mod icmp;
mod multicast;
pub use multicast::{run_multicast, GroupSender, MulticastOptions, MulticastOutcome};

/// Runs one test. Errors before the start are returned; later ones are kept in the result
/// together with everything measured up to them.
pub fn run_test(
    options: &TestOptions,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<TestRun, ClientError> {
    if options.spec.protocol == Protocol::Icmp {
        return icmp::run(options, on_interval);
    }
    let addr = resolve(&options.target)?;
    let mut accepted = negotiate(options, addr)?;
    let data = connect_data(&mut accepted, addr.ip(), options)?;
    let Accepted {
        mut conn,
        spec,
        session,
        rate_cap_bps,
        cookie,
        ..
    } = accepted;
    let mut keepalive = Keepalive::new(&data, cookie);
    // The first acknowledgements are waiting at the agent before it starts sending.
    keepalive.send_acks();
    let notes = match &data {
        Data::Raw(_) | Data::TcpConnectEach(..) => Vec::new(),
        Data::Udp(socks) => {
            flowlab_engine::configure_udp(socks, &spec, spec.direction != Direction::Reverse)
        }
        Data::SharedUdp(sock, ..) => {
            flowlab_engine::configure_udp(std::slice::from_ref(sock), &spec, true)
        }
        Data::Tcp(streams) => {
            flowlab_engine::configure_tcp(streams, &spec, spec.direction != Direction::Reverse)
        }
    };
    let started_at_ns = flowlab_sys::clock::realtime_ns();
    // The client sends in one-way and loopback tests: its own qdisc drops are not the network's.
    let qdisc_watch = (spec.direction != Direction::Reverse)
        .then(|| QdiscWatch::start(addr.ip()))
        .flatten();
    conn.send(&Message::Start).map_err(setup_error)?;

    let ctx = RunContext {
        session,
        send_cap_bps: rate_cap_bps,
        return_cookie: None,
        packet_key: conn
            .test_packet_key()
            .filter(|_| spec.authenticated_packets),
        schedule_watch: schedule_watch(&spec),
    };
    let signals = RoleSignals::default();
    let (interval_tx, interval_rx) = mpsc::channel::<IntervalReport>();
    let mut session_state = Session {
        schedule_watch: ctx.schedule_watch.clone(),
        ..Session::default()
    };
    let mut client_outcome = RoleOutcome::default();

    std::thread::scope(|scope| {
        let (sender, receiver) = spawn_roles(scope, &data, &spec, &ctx, &signals, interval_tx);
        let mut drain_from: Option<Instant> = None;
        let mut last_heard = Instant::now();
        loop {
            for r in interval_rx.try_iter() {
                session_state.interval(r, on_interval);
            }
            if flowlab_sys::signal::is_interrupted() {
                session_state.interrupted = true;
                break;
            }
            let local_sender_done = sender.as_ref().is_some_and(|s| s.is_finished())
                || signals.sending_done.load(Ordering::Relaxed);
            if drain_from.is_none() && (local_sender_done || session_state.agent_sender_done) {
                drain_from = Some(Instant::now());
            }
            if drain_from.is_some_and(|t| t.elapsed() >= options.drain) {
                break;
            }
            keepalive.tick(&mut conn);
            match conn.poll(Duration::from_millis(20)) {
                Ok(Some(mut message)) => {
                    last_heard = Instant::now();
                    // TCP state lives at the sender: a one-way TCP test's live intervals come
                    // from the agent's receiver, so the client adds its own TCP_INFO.
                    if let (Message::Interval { report }, Data::Tcp(streams)) =
                        (&mut message, &data)
                    {
                        if spec.direction == Direction::Oneway {
                            report.tcp_info =
                                streams.first().and_then(flowlab_engine::tcp_info_report);
                        }
                    }
                    session_state.take(message, on_interval);
                    if session_state.agent_report.is_some() || session_state.error.is_some() {
                        break;
                    }
                }
                Ok(None) if last_heard.elapsed() > AGENT_SILENCE => {
                    session_state.error = Some(format!(
                        "agent lost: no word from it for {:.1} s",
                        AGENT_SILENCE.as_secs_f64()
                    ));
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    session_state.error = Some(format!("agent lost: {e}"));
                    break;
                }
            }
        }
        signals.stop_sending.store(true, Ordering::Relaxed);
        signals.stop_receiving.store(true, Ordering::Relaxed);
        let join = |h: Option<std::thread::ScopedJoinHandle<'_, RoleOutcome>>| {
            h.map(|h| {
                h.join()
                    .unwrap_or_else(|_| RoleOutcome::failed("a test thread failed"))
            })
        };
        let sent = join(sender);
        let received = join(receiver);
        client_outcome = merge_outcomes(sent, received);
        for r in interval_rx.try_iter() {
            session_state.interval(r, on_interval);
        }
    });

    if session_state.error.is_none() && session_state.agent_report.is_none() {
        session_state.finish(&mut conn, on_interval);
    }
    let (client_role, _) = roles(&spec);
    let client = SideReport {
        cpu: client_outcome.time.cpu_load(),
        role_cpu: client_outcome.role_cpu(),
        sender: client_outcome.sender,
        receiver: client_outcome.receiver,
        transactions: client_outcome.transactions,
        tcp_info: client_outcome.tcp_info,
        host_qdisc_drops: qdisc_watch.and_then(|w| w.finish(addr.ip())),
        error: client_outcome.error.clone(),
        notes,
        ..SideReport::new(client_role, flowlab_sys::host::hostname())
    };
    let agent = session_state.agent_report.map(|b| *b);
    let packets = if spec.packet_log {
        let (sent, received) = match spec.direction {
            Direction::Oneway => (&client_outcome.log, &session_state.agent_log),
            Direction::Reverse => (&session_state.agent_log, &client_outcome.log),
            Direction::Loopback => (&client_outcome.sent_log, &client_outcome.log),
        };
        packet_log::merge(sent, received)
    } else {
        Vec::new()
    };
    // The client's own failure (ENETUNREACH, say) explains a missing report better than the
    // missing report does.
    let error = match (session_state.error, client_outcome.error) {
        (Some(session), Some(own)) if session == NO_REPORT => Some(format!("{own}; {session}")),
        (session, own) => session.or(own),
    };
    let error = error.or_else(|| agent.as_ref().and_then(|a| a.error.clone()));
    let origin = Origin {
        target: options.target.clone(),
        agent_address: addr.to_string(),
        ipv6: addr.is_ipv6(),
        started_at_ns,
    };
    Ok(TestRun {
        result: TestResult {
            intervals: session_state.intervals,
            interrupted: session_state.interrupted,
            error,
            ..TestResult::new(spec, origin, Some(client), agent)
        },
        packets,
    })
}

/// Where the client's sender hands its schedule error for live intervals: when the client
/// sends paced datagrams and intervals are asked for (the TCP sender keeps it to its report).
fn schedule_watch(spec: &TestSpec) -> Option<Arc<ScheduleWatch>> {
    let sends = spec.direction != Direction::Reverse
        && spec.transactions().is_none()
        && spec.protocol != Protocol::Tcp;
    (sends && spec.paced() && spec.interval_ns.is_some()).then(Arc::default)
}

/// What the client sends while a test runs so the agent goes on: heartbeats on the control
/// connection, and for a reverse UDP test the return-routability cookie from every data
/// socket (the agent sends to a socket only while its cookie arrives).
struct Keepalive<'a> {
    acks: Vec<&'a UdpSocket>,
    ack: [u8; flowlab_wire::ack::ACK_LEN],
    last: Option<Instant>,
}

impl<'a> Keepalive<'a> {
    fn new(data: &'a Data, cookie: Option<u64>) -> Keepalive<'a> {
        let acks = match (data, cookie) {
            (Data::Udp(socks), Some(_)) => socks.iter().collect(),
            _ => Vec::new(),
        };
        Keepalive {
            acks,
            ack: flowlab_wire::ack::emit_ack(cookie.unwrap_or(0)),
            last: None,
        }
    }

    /// Sends what is due: at most every [`flowlab_engine::ACK_PERIOD`].
    fn tick(&mut self, conn: &mut Conn) {
        if self
            .last
            .is_some_and(|t| t.elapsed() < flowlab_engine::ACK_PERIOD)
        {
            return;
        }
        self.last = Some(Instant::now());
        self.send_acks();
        // A failed heartbeat shows as a lost agent on the next read.
        let _ = conn.send(&Message::Heartbeat);
    }

    fn send_acks(&self) {
        for sock in &self.acks {
            // A lost acknowledgement is covered by the next; the agent waits a second.
            let _ = sock.send(&self.ack);
        }
    }
}

const NO_REPORT: &str = "the agent sent no report";

/// What the client learned from the agent during and after the test.
#[derive(Default)]
struct Session {
    intervals: Vec<IntervalReport>,
    /// The client's own paced sender's schedule error, added to each interval.
    schedule_watch: Option<Arc<ScheduleWatch>>,
    agent_sender_done: bool,
    agent_report: Option<Box<SideReport>>,
    agent_log: Vec<PacketRecord>,
    interrupted: bool,
    error: Option<String>,
}

impl Session {
    fn take(&mut self, message: Message, on_interval: &mut dyn FnMut(&IntervalReport)) {
        match message {
            Message::Interval { report } => self.interval(report, on_interval),
            Message::SenderDone => self.agent_sender_done = true,
            Message::PacketLog { records } => self.agent_log.extend(records),
            Message::Report { report } => self.agent_report = Some(report),
            Message::Error { message } => self.error = Some(format!("agent: {message}")),
            Message::Heartbeat => {}
            other => self.error = Some(format!("unexpected '{}' from the agent", other.kind())),
        }
    }

    /// An interval of whichever end receives, with the client's schedule error meanwhile.
    fn interval(
        &mut self,
        mut report: IntervalReport,
        on_interval: &mut dyn FnMut(&IntervalReport),
    ) {
        if let Some(watch) = &self.schedule_watch {
            report.schedule_error = watch.take();
        }
        on_interval(&report);
        self.intervals.push(report);
    }

    /// Tells the agent to stop and collects its report.
    fn finish(&mut self, conn: &mut Conn, on_interval: &mut dyn FnMut(&IntervalReport)) {
        if let Err(e) = conn.send(&Message::Finish) {
            self.error = Some(format!("agent lost: {e}"));
            return;
        }
        let deadline = Instant::now() + REPORT_TIMEOUT;
        while self.agent_report.is_none() && self.error.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.error = Some(NO_REPORT.into());
                break;
            }
            match conn.poll(left) {
                Ok(Some(m)) => self.take(m, on_interval),
                Ok(None) => {}
                Err(e) => self.error = Some(format!("agent lost before its report: {e}")),
            }
        }
    }
}

/// Flags between the client's control loop and its role threads.
#[derive(Default)]
struct RoleSignals {
    stop_sending: AtomicBool,
    stop_receiving: AtomicBool,
    /// Raised by a loopback client's single thread when its last packet has left.
    sending_done: AtomicBool,
}

type RoleHandle<'scope> = Option<std::thread::ScopedJoinHandle<'scope, RoleOutcome>>;

/// Starts the client's sender and/or receiver threads for this direction.
fn spawn_roles<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    data: &'env Data,
    spec: &'env TestSpec,
    ctx: &'env RunContext,
    signals: &'env RoleSignals,
    intervals: mpsc::Sender<IntervalReport>,
) -> (RoleHandle<'scope>, RoleHandle<'scope>) {
    let RoleSignals {
        stop_sending,
        stop_receiving,
        ..
    } = signals;
    if spec.transactions().is_some() {
        return (
            Some(spawn_requester(
                scope,
                data,
                spec,
                ctx,
                stop_sending,
                intervals,
            )),
            None,
        );
    }
    // A datagram loopback client sends and takes the echoes on one thread, as does the
    // client of a load whose every Nth packet is echoed.
    match (data, spec.direction) {
        (Data::Udp(socks), direction)
            if direction == Direction::Loopback || spec.echo_every.is_some() =>
        {
            return (
                None,
                Some(spawn_ping(scope, socks, spec, ctx, signals, intervals)),
            )
        }
        (Data::Raw(socks), Direction::Loopback) => {
            return (
                None,
                Some(spawn_ping(scope, socks, spec, ctx, signals, intervals)),
            )
        }
        _ => {}
    }
    let sends = matches!(spec.direction, Direction::Oneway | Direction::Loopback);
    let receives = matches!(spec.direction, Direction::Reverse | Direction::Loopback);
    let round_trip = spec.direction == Direction::Loopback;
    let sender = sends.then(|| {
        scope.spawn(move || {
            let mut out = RoleOutcome::default();
            let (outcome, time) = ThreadTime::measure(|| match data {
                Data::Udp(socks) => flowlab_engine::udp_send(socks, spec, ctx, stop_sending),
                Data::SharedUdp(sock, peers, frames) => {
                    let flows = flowlab_engine::SharedFlow::all(sock, peers, frames.as_ref());
                    flowlab_engine::udp_send(&flows, spec, ctx, stop_sending)
                }
                Data::Raw(socks) => flowlab_engine::udp_send(socks, spec, ctx, stop_sending),
                Data::Tcp(streams) => flowlab_engine::tcp_send(streams, spec, ctx, stop_sending),
                // No standing connection: only request/response tests connect per transaction.
                Data::TcpConnectEach(..) => flowlab_engine::tcp_send(&[], spec, ctx, stop_sending),
            });
            if let Data::Tcp(streams) = data {
                out.tcp_info = streams
                    .first()
                    .and_then(flowlab_engine::tcp_info_report_when_acked);
            }
            out.time = time.with_workers(outcome.worker_cpu_ns);
            (out.sender, out.log, out.error) = (Some(outcome.report), outcome.log, outcome.error);
            out
        })
    });
    let receiver = receives.then(|| {
        scope.spawn(move || {
            let mut on_interval = |r: IntervalReport| {
                let _ = intervals.send(r);
            };
            let (outcome, time) = ThreadTime::measure(|| match data {
                Data::Udp(socks) => flowlab_engine::udp_receive(
                    socks,
                    spec,
                    ctx,
                    round_trip,
                    stop_receiving,
                    &mut on_interval,
                ),
                Data::Raw(socks) => flowlab_engine::udp_receive(
                    socks,
                    spec,
                    ctx,
                    round_trip,
                    stop_receiving,
                    &mut on_interval,
                ),
                Data::Tcp(streams) => flowlab_engine::tcp_receive(
                    streams,
                    spec,
                    ctx,
                    round_trip,
                    stop_receiving,
                    &mut on_interval,
                ),
                Data::TcpConnectEach(..) => flowlab_engine::tcp_receive(
                    &[],
                    spec,
                    ctx,
                    round_trip,
                    stop_receiving,
                    &mut on_interval,
                ),
                // Shared only by one-way senders (`shares_socket`): nothing to receive.
                Data::SharedUdp(..) => flowlab_engine::udp_receive::<UdpSocket>(
                    &[],
                    spec,
                    ctx,
                    round_trip,
                    stop_receiving,
                    &mut on_interval,
                ),
            });
            RoleOutcome {
                time,
                receiver: Some(outcome.report),
                log: outcome.log,
                error: outcome.error,
                ..RoleOutcome::default()
            }
        })
    });
    (sender, receiver)
}

/// A request/response client's thread: transactions on its connections or sockets.
fn spawn_requester<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    data: &'env Data,
    spec: &'env TestSpec,
    ctx: &'env RunContext,
    stop: &'env AtomicBool,
    intervals: mpsc::Sender<IntervalReport>,
) -> std::thread::ScopedJoinHandle<'scope, RoleOutcome> {
    scope.spawn(move || {
        let mut on_interval = |r: IntervalReport| {
            let _ = intervals.send(r);
        };
        let (outcome, time) = ThreadTime::measure(|| match data {
            Data::Tcp(streams) => {
                flowlab_engine::tcp_request(streams, spec, ctx, stop, &mut on_interval)
            }
            Data::TcpConnectEach(agent, flows) => flowlab_engine::tcp_connect_request(
                *agent,
                *flows,
                spec,
                ctx,
                stop,
                &mut on_interval,
            ),
            Data::Udp(socks) => {
                flowlab_engine::udp_request(socks, spec, ctx, stop, &mut on_interval)
            }
            // Refused by TestSpec::validate: no native-frame transactions.
            Data::Raw(_) => flowlab_engine::udp_request(&[], spec, ctx, stop, &mut on_interval),
            // Never shared: `shares_socket` leaves transactions out.
            Data::SharedUdp(..) => {
                flowlab_engine::udp_request(&[], spec, ctx, stop, &mut on_interval)
            }
        });
        RoleOutcome {
            time: time.with_workers(outcome.worker_cpu_ns),
            transactions: Some(outcome.report),
            tcp_info: match data {
                Data::Tcp(streams) => streams.first().and_then(flowlab_engine::tcp_info_report),
                _ => None,
            },
            error: outcome.error,
            ..RoleOutcome::default()
        }
    })
}

/// A loopback client's single thread (see `flowlab_engine::udp_ping`).
fn spawn_ping<'scope, 'env, S: flowlab_engine::DatagramSocket>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    socks: &'env [S],
    spec: &'env TestSpec,
    ctx: &'env RunContext,
    signals: &'env RoleSignals,
    intervals: mpsc::Sender<IntervalReport>,
) -> std::thread::ScopedJoinHandle<'scope, RoleOutcome> {
    scope.spawn(move || {
        let mut on_interval = |r: IntervalReport| {
            let _ = intervals.send(r);
        };
        let ((sent, received), time) = ThreadTime::measure(|| {
            flowlab_engine::udp_ping(
                socks,
                spec,
                ctx,
                &signals.stop_sending,
                &signals.stop_receiving,
                &signals.sending_done,
                &mut on_interval,
            )
        });
        RoleOutcome {
            time,
            sender: Some(sent.report),
            receiver: Some(received.report),
            sent_log: sent.log,
            log: received.log,
            error: sent.error.or(received.error),
            ..RoleOutcome::default()
        }
    })
}

/// The client's side is one report even when two threads (loopback) measured it.
fn merge_outcomes(sent: Option<RoleOutcome>, received: Option<RoleOutcome>) -> RoleOutcome {
    match (sent, received) {
        (Some(s), Some(r)) => RoleOutcome {
            time: s.time.plus(r.time),
            worker_cpu_ns: (0, 0),
            sender: s.sender,
            receiver: r.receiver,
            tcp_info: s.tcp_info,
            sent_log: s.log,
            log: r.log,
            error: s.error.or(r.error),
            echo: None,
            transactions: None,
            responder: None,
        },
        (Some(only), None) | (None, Some(only)) => only,
        (None, None) => RoleOutcome::failed("no test thread ran"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_like_people_type_them() {
        let ok = |t: &str| split_target(t).unwrap();
        assert_eq!(ok("example"), ("example".into(), None));
        assert_eq!(ok("10.0.0.1:5000"), ("10.0.0.1".into(), Some(5000)));
        assert_eq!(ok("[::1]:5000"), ("::1".into(), Some(5000)));
        assert_eq!(ok("[::1]"), ("::1".into(), None));
        assert_eq!(ok("fd00::2"), ("fd00::2".into(), None));
        assert_eq!(resolve_with_port("[::1]", 862).unwrap().port(), 862);
        for bad in ["", "host:port", "[::1", "[::1]x", "h:99999"] {
            assert!(split_target(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn data_sockets_take_consecutive_ports_from_cport() {
        let ip = "127.0.0.1".parse().unwrap();
        assert_eq!(data_addr(ip, None, 3).unwrap().port(), 0);
        assert_eq!(data_addr(ip, Some(5000), 3).unwrap().port(), 5003);
        let e = data_addr(ip, Some(65535), 1).unwrap_err();
        assert_eq!(
            e.to_string(),
            "test setup failed: --cport 65535 leaves no port for flow 1"
        );
    }

    #[test]
    fn a_family_picks_the_hosts_addresses() {
        assert_eq!(Family::from_flags(false, true), Family::V6);
        assert_eq!(Family::from_flags(false, false), Family::Any);
        let v4 = resolve_host("127.0.0.1", 7, Family::from_flags(true, false)).unwrap();
        assert_eq!(v4, "127.0.0.1:7".parse().unwrap());
        let e = resolve_host("127.0.0.1", 7, Family::V6).unwrap_err();
        assert_eq!(e.to_string(), "host '127.0.0.1' has no IPv6 address");
        assert!(resolve_host("::1", 7, Family::Any).unwrap().is_ipv6());
    }

    #[test]
    fn unknown_host_is_one_clear_line() {
        let e = resolve("no-such-host.invalid").unwrap_err();
        assert_eq!(e.to_string(), "cannot resolve host 'no-such-host.invalid'");
    }
}
