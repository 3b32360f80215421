//! One control connection's life at the agent: hellos and proofs, the request and its
//! checks, the data sockets, then serving the control connection while the role runs, and
//! the report.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use flowlab_engine::{QdiscWatch, RunContext};
use flowlab_results::{IntervalReport, PacketRecord, Role, SideReport};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_units::format_rate;
use flowlab_wire::control::{
    HELLO_FLAG_AUTH_REQUIRED, MAX_FRAME_LEN, MAX_OPEN_REQUEST_LEN, MAX_SMALL_FRAME_LEN,
};
use flowlab_wire::{ControlError, Hello, PROTOCOL_VERSION};

use super::checks::{check_limits, check_request, raw_path};
use super::config::{
    AgentConfig, AgentStats, Limits, CLIENT_SILENCE, CLIENT_SILENCE_RECEIVING, HANDSHAKE_TIMEOUT,
    HEARTBEAT, OVERRUN_GRACE, START_TIMEOUT,
};
use super::data::DataSockets;
use super::relay::{answer_host_query, answer_time_probes, relay_drain, relay_test};
use super::roles::{run_role, Event};
use crate::admission::Ticket;
use crate::auth;
use crate::conn::{Conn, ConnError, Deadline, PACKET_LOG_CHUNK};
use crate::outcome::{RoleOutcome, ThreadTime};
use crate::protocol::Message;
use crate::result::roles;

/// One control connection: its peer, its session number, and the agent it talks to.
pub(super) struct Session<'a> {
    pub(super) peer: SocketAddr,
    pub(super) id: u32,
    pub(super) config: &'a AgentConfig,
    pub(super) stats: &'a AgentStats,
    pub(super) log: &'a dyn Fn(String),
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
pub(super) fn agent_hello(config: &AgentConfig) -> Hello {
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

impl Session<'_> {
    /// Serves the connection: hellos (and proofs), then the one request it makes.
    pub(super) fn run(&self, stream: TcpStream, ticket: Ticket) -> Result<(), String> {
        let (config, stats) = (self.config, self.stats);
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
        match request {
            Message::Request { spec } => self.own_test(&mut conn, local_ip, &spec, ticket),
            Message::TimeProbe { t1_ns } => answer_time_probes(&mut conn, t1_ns),
            Message::HostQuery => answer_host_query(&mut conn, self.peer.ip()),
            Message::RunTest {
                target,
                spec,
                start_at_ns,
                drain_ns,
            } => self.relayed_test(&mut conn, &target, spec, (start_at_ns, drain_ns), ticket),
            other => {
                stats.malformed_control.fetch_add(1, Ordering::Relaxed);
                refuse(
                    &mut conn,
                    stats,
                    format!("expected a test request, got '{}'", other.kind()),
                )
            }
        }
    }

    /// A controller's test towards another agent, if this agent relays.
    fn relayed_test(
        &self,
        conn: &mut Conn,
        target: &str,
        spec: TestSpec,
        (start_at_ns, drain_ns): (Option<u64>, Option<u64>),
        ticket: Ticket,
    ) -> Result<(), String> {
        let (config, stats) = (self.config, self.stats);
        if !config.allow_relay {
            return refuse(
                conn,
                stats,
                "this agent does not run tests towards other agents (start it with --allow-relay)"
                    .into(),
            );
        }
        drop(ticket);
        if let Err(reason) = check_limits(&spec, &config.limits) {
            return refuse(conn, stats, reason);
        }
        let drain = match relay_drain(drain_ns) {
            Ok(drain) => drain,
            Err(reason) => return refuse(conn, stats, reason),
        };
        let Some(_slot) = take_slot(stats, &config.limits) else {
            return refuse(conn, stats, busy(&config.limits));
        };
        relay_test(conn, config, target, spec, (start_at_ns, drain), self.log)
    }

    /// The client's own test: checked, accepted with data sockets towards the client only,
    /// started, run and reported.
    fn own_test(
        &self,
        conn: &mut Conn,
        local_ip: IpAddr,
        spec: &TestSpec,
        ticket: Ticket,
    ) -> Result<(), String> {
        let (config, stats, peer, session) = (self.config, self.stats, self.peer, self.id);
        if let Err(reason) = check_request(spec, &config.limits) {
            return refuse(conn, stats, reason);
        }
        let packet_key = conn.test_packet_key();
        if spec.authenticated_packets && packet_key.is_none() {
            let reason = "authenticated test packets need a pre-shared key, and this agent has none (--key-file)";
            return refuse(conn, stats, reason.into());
        }
        let raw = match spec.protocol {
            Protocol::Raw => match raw_path(spec, peer.ip()) {
                Ok(path) => Some(path),
                Err(reason) => return refuse(conn, stats, reason),
            },
            _ => None,
        };
        let Some(_slot) = take_slot(stats, &config.limits) else {
            return refuse(conn, stats, busy(&config.limits));
        };
        let cookie = (spec.protocol == Protocol::Udp && spec.direction == Direction::Reverse)
            .then(rand::random::<u64>);
        let data = DataSockets::open(spec, local_ip, peer.ip(), raw).inspect_err(|e| {
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
        (self.log)(format!(
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
        match conn.recv_by(start_by).map_err(|e| fail(conn, stats, e))? {
            Message::Start => {}
            other => return Err(format!("expected start, got '{}'", other.kind())),
        }
        drop(ticket);
        stats.tests_run.fetch_add(1, Ordering::Relaxed);
        let ctx = RunContext {
            // A multicast sender's probes carry the session every receiver was told.
            session: spec.multicast.as_ref().map_or(session, |m| m.session),
            send_cap_bps: config.limits.max_rate_bps,
            return_cookie: cookie,
            packet_key: packet_key.filter(|_| spec.authenticated_packets),
            schedule_watch: None,
        };
        let report = run_test(conn, data, spec, &ctx, &config.limits);
        stats.record(crate::metrics::TestSummary::of(session, spec, &report));
        (self.log)(format!(
            "{peer}: session {session} done{}",
            report
                .error
                .as_ref()
                .map_or(String::new(), |e| format!(": {e}"))
        ));
        Ok(())
    }
}

/// Runs the agent's role while serving the control connection, then reports.
fn run_test(
    conn: &mut Conn,
    data: DataSockets,
    spec: &TestSpec,
    ctx: &RunContext,
    limits: &Limits,
) -> SideReport {
    let (_, role) = roles(spec);
    let stop = AtomicBool::new(false);
    let (events, inbox) = mpsc::channel::<Event>();
    // The agent sends in reverse tests and echoes in loopback ones: its own qdisc's drops.
    let peer = conn.stream().peer_addr().map(|a| a.ip()).ok();
    let qdisc_watch = peer
        .filter(|_| matches!(role, Role::Sender | Role::Echo))
        .and_then(QdiscWatch::start);
    let mut report = SideReport {
        notes: data.configure(spec, role == Role::Sender),
        ..SideReport::new(role, flowlab_sys::host::hostname())
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
            let (mut outcome, time) =
                ThreadTime::measure(|| run_role(data, spec, ctx, &stop, &mut on_interval, &events));
            outcome.time = time.with_workers(outcome.worker_cpu_ns);
            outcome
        });
        report.error = serve_control(conn, &inbox, limits.max_duration, client_silence(role));
        stop.store(true, Ordering::Relaxed);
        let outcome = worker
            .join()
            .unwrap_or_else(|_| RoleOutcome::failed("the test thread failed"));
        report.role_cpu = outcome.role_cpu();
        report.cpu = outcome.time.cpu_load();
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
    report.host_qdisc_drops = qdisc_watch.zip(peer).and_then(|(w, peer)| w.finish(peer));
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

/// How long the agent in `role` waits for a word from its client before ending the test.
fn client_silence(role: Role) -> Duration {
    match role {
        Role::Receiver | Role::Responder => CLIENT_SILENCE_RECEIVING,
        Role::Sender | Role::Echo | Role::Requester => CLIENT_SILENCE,
    }
}

/// Serves the control connection while the role runs: relays its events, heartbeats, and
/// listens for the client. Returns at `finish`, or with why the test ends early: after
/// `silence` without a word from the client, among others.
fn serve_control(
    conn: &mut Conn,
    inbox: &mpsc::Receiver<Event>,
    max_duration: Duration,
    silence: Duration,
) -> Option<String> {
    let started = Instant::now();
    let (mut last_beat, mut last_heard) = (Instant::now(), Instant::now());
    loop {
        let mut error = None;
        while let Ok(event) = inbox.try_recv() {
            let message = match event {
                Event::Interval(report) => Message::Interval { report: *report },
                Event::SenderDone => Message::SenderDone,
            };
            if conn.send(&message).is_err() {
                error = Some("the client went away".to_string());
            }
        }
        if error.is_some() {
            return error;
        }
        if started.elapsed() > max_duration + OVERRUN_GRACE {
            return Some(format!(
                "stopped at the duration limit of {:.0} s",
                max_duration.as_secs_f64()
            ));
        }
        if last_beat.elapsed() >= HEARTBEAT {
            last_beat = Instant::now();
            let _ = conn.send(&Message::Heartbeat);
        }
        match conn.poll(Duration::from_millis(50)) {
            Ok(Some(Message::Finish)) => return None,
            Ok(Some(_)) => last_heard = Instant::now(),
            Ok(None) if last_heard.elapsed() > silence => {
                return Some(format!(
                    "client lost: no word from it for {:.0} s",
                    silence.as_secs_f64()
                ))
            }
            Ok(None) => {}
            Err(e) => return Some(format!("client lost: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_agent_that_sends_gives_up_on_a_silent_client_within_seconds() {
        for sends in [Role::Sender, Role::Echo] {
            assert_eq!(client_silence(sends), Duration::from_secs(3));
        }
        for listens in [Role::Receiver, Role::Responder] {
            assert_eq!(client_silence(listens), Duration::from_secs(15));
        }
    }
}
