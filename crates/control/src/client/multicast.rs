//! A multicast test: the client sends one flow to a group, and every agent it asks joins the
//! group and only receives. Each agent's figures become a result of their own, beside the
//! one sender's: loss and delay per receiver.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use flowlab_engine::{RunContext, SenderOutcome};
use flowlab_results::{Role, SideReport};
use flowlab_spec::{MulticastGroup, TestSpec};
use socket2::{Domain, Socket, Type};

use super::{negotiate, resolve, setup_error, Accepted, ClientError, Data, Keepalive, Session};
use super::{TestOptions, TestRun, AGENT_SILENCE};
use crate::outcome::ThreadTime;
use crate::protocol::Message;
use crate::result::{Origin, TestResult};

/// What to send to which group, and which agents receive it.
#[derive(Debug, Clone)]
pub struct MulticastOptions {
    /// The receiving agents, as typed (`HOST`, `HOST:PORT`).
    pub agents: Vec<String>,
    /// The test; its `multicast` names the group.
    pub spec: TestSpec,
    pub key: Option<Vec<u8>>,
    /// How long the receivers go on after the last packet left.
    pub drain: Duration,
    /// This end's address: the control connections come from it and the group's packets
    /// leave by the interface holding it (default: the one towards the first agent).
    pub bind: Option<IpAddr>,
}

/// The one sender's side, and a result per receiving agent (each with that sender's side).
#[derive(Debug, Clone)]
pub struct MulticastOutcome {
    pub sender: SideReport,
    pub receivers: Vec<TestRun>,
}

/// One receiving agent while the test runs.
struct Receiver {
    target: String,
    addr: SocketAddr,
    accepted: Accepted,
    session: Session,
    last_heard: Instant,
}

/// How the group's flow is sent from the socket connected to it, until done or `stop`, when
/// not by the engine's sender (flowlab's probes): e.g. in another tool's datagrams. `None`
/// when another host sent it: no count here, so each receiver's loss is what it saw missing.
pub type GroupSender<'a> = dyn Fn(&UdpSocket, &AtomicBool) -> Option<SenderOutcome> + Sync + 'a;

/// Runs the test: every agent joins first, then the client sends (by `send`, or the engine's
/// sender when `None`); one result per agent.
pub fn run_multicast(
    options: &MulticastOptions,
    send: Option<&GroupSender<'_>>,
) -> Result<MulticastOutcome, ClientError> {
    let spec = &options.spec;
    let group = spec
        .multicast
        .clone()
        .ok_or_else(|| ClientError::Setup("no multicast group".into()))?;
    let mut receivers = options
        .agents
        .iter()
        .map(|target| join(options, target))
        .collect::<Result<Vec<_>, _>>()?;
    let local = match (options.bind, receivers.first()) {
        (Some(ip), _) => ip,
        (None, Some(r)) => r
            .accepted
            .conn
            .stream()
            .local_addr()
            .map_err(super::setup_io)?
            .ip(),
        (None, None) => {
            return Err(ClientError::Target(
                "no receiving agents given: --bind ADDR names the interface to send from".into(),
            ))
        }
    };
    let socket = group_sender(&group, local).map_err(|e| {
        ClientError::Setup(format!(
            "cannot send to the multicast group {}: {e}",
            group.group
        ))
    })?;
    let socks = [socket];
    let notes = flowlab_engine::configure_udp(&socks, spec, true);
    let started_at_ns = flowlab_sys::clock::realtime_ns();
    for r in &mut receivers {
        r.accepted.conn.send(&Message::Start).map_err(setup_error)?;
    }
    let ctx = RunContext {
        session: group.session,
        send_cap_bps: receivers
            .iter()
            .filter_map(|r| r.accepted.rate_cap_bps)
            .min(),
        return_cookie: None,
        packet_key: None,
        schedule_watch: None,
    };
    let stop = AtomicBool::new(false);
    let (outcome, time) = std::thread::scope(|scope| {
        let sender = scope.spawn(|| {
            ThreadTime::measure(|| match send {
                Some(send) => send(&socks[0], &stop),
                None => Some(flowlab_engine::udp_send(&socks, spec, &ctx, &stop)),
            })
        });
        // With no agents (other tools receive) the flow runs its course, or until Ctrl-C.
        match receivers.is_empty() {
            true => wait_for(|| sender.is_finished() || flowlab_sys::signal::is_interrupted()),
            false => watch(&mut receivers, || sender.is_finished(), options.drain),
        }
        stop.store(true, Ordering::Relaxed);
        // A panic in the sender is a bug: it goes on up.
        sender
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    });
    let (sender, error) = outcome.map_or((None, None), |o| (Some(o.report), o.error));
    let client = SideReport {
        cpu: time.cpu_load(),
        sender,
        error,
        notes,
        ..SideReport::new(Role::Sender, flowlab_sys::host::hostname())
    };
    let interrupted = flowlab_sys::signal::is_interrupted();
    let receivers = receivers
        .into_iter()
        .map(|r| r.finish(spec, &client, started_at_ns, interrupted))
        .collect();
    Ok(MulticastOutcome {
        sender: client,
        receivers,
    })
}

/// Asks one agent to join the group and receive.
fn join(options: &MulticastOptions, target: &str) -> Result<Receiver, ClientError> {
    let addr = resolve(target)?;
    let test = TestOptions {
        target: target.to_string(),
        spec: options.spec.clone(),
        key: options.key.clone(),
        drain: options.drain,
        interface: None,
        agent_interface: None,
        bind: options.bind,
        cport: None,
    };
    let accepted = negotiate(&test, addr).map_err(|e| match e {
        ClientError::Refused(why) => ClientError::Refused(format!("{target}: {why}")),
        other => other,
    })?;
    Ok(Receiver {
        target: target.to_string(),
        addr,
        accepted,
        session: Session::default(),
        last_heard: Instant::now(),
    })
}

/// A socket connected to the group, with its TTL (hop limit), leaving by the interface that
/// holds `local`.
fn group_sender(group: &MulticastGroup, local: IpAddr) -> std::io::Result<UdpSocket> {
    let at = SocketAddr::new(group.group, group.port);
    let socket = Socket::new(Domain::for_address(at), Type::DGRAM, None)?;
    match (group.group, local) {
        (IpAddr::V4(_), IpAddr::V4(local)) => {
            socket.set_multicast_if_v4(&local)?;
            socket.set_multicast_ttl_v4(u32::from(group.hops))?;
            socket.bind(&SocketAddr::new(local.into(), 0).into())?;
        }
        (IpAddr::V6(_), local) => {
            let interface = flowlab_sys::raw::interface_with_address(local)?;
            socket.set_multicast_if_v6(interface.index)?;
            socket.set_multicast_hops_v6(u32::from(group.hops))?;
        }
        (IpAddr::V4(_), IpAddr::V6(_)) => {
            return Err(std::io::Error::other(
                "an IPv4 group needs an IPv4 address here",
            ))
        }
    }
    socket.connect(&at.into())?;
    Ok(socket.into())
}

fn wait_for(done: impl Fn() -> bool) {
    while !done() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Serves the control connections (heartbeats out, live reports in) until the sender is
/// done and the drain has passed, Ctrl-C, or every agent is lost.
fn watch(receivers: &mut [Receiver], sender_done: impl Fn() -> bool, drain: Duration) {
    let nothing = Data::Udp(Vec::new());
    let mut keepalives: Vec<Keepalive<'_>> = receivers
        .iter()
        .map(|_| Keepalive::new(&nothing, None))
        .collect();
    let mut drain_from = None;
    let poll = Duration::from_millis(20) / receivers.len().max(1) as u32;
    loop {
        if flowlab_sys::signal::is_interrupted() {
            return;
        }
        if drain_from.is_none() && sender_done() {
            drain_from = Some(Instant::now());
        }
        if drain_from.is_some_and(|t| t.elapsed() >= drain) {
            return;
        }
        let mut live = 0;
        for (r, keepalive) in receivers.iter_mut().zip(&mut keepalives) {
            if r.session.error.is_some() {
                continue;
            }
            live += 1;
            keepalive.tick(&mut r.accepted.conn);
            r.hear(poll);
        }
        if live == 0 {
            return;
        }
    }
}

impl Receiver {
    /// Takes what the agent sent within `wait`.
    fn hear(&mut self, wait: Duration) {
        match self.accepted.conn.poll(wait) {
            Ok(Some(message)) => {
                self.last_heard = Instant::now();
                self.session.take(message, &mut |_| {});
            }
            Ok(None) if self.last_heard.elapsed() > AGENT_SILENCE => {
                let silence = AGENT_SILENCE.as_secs_f64();
                self.session.error =
                    Some(format!("agent lost: no word from it for {silence:.1} s"));
            }
            Ok(None) => {}
            Err(e) => self.session.error = Some(format!("agent lost: {e}")),
        }
    }

    /// Collects the agent's report: its result beside the sender's side.
    fn finish(
        mut self,
        spec: &TestSpec,
        client: &SideReport,
        started_at_ns: u64,
        interrupted: bool,
    ) -> TestRun {
        if self.session.error.is_none() && self.session.agent_report.is_none() {
            self.session.finish(&mut self.accepted.conn, &mut |_| {});
        }
        let agent = self.session.agent_report.map(|b| *b);
        let error = self.session.error.or_else(|| client.error.clone());
        let error = error.or_else(|| agent.as_ref().and_then(|a| a.error.clone()));
        let origin = Origin {
            target: self.target,
            agent_address: self.addr.to_string(),
            ipv6: self.addr.is_ipv6(),
            started_at_ns,
        };
        TestRun {
            result: TestResult {
                intervals: self.session.intervals,
                interrupted,
                error,
                ..TestResult::new(spec.clone(), origin, Some(client.clone()), agent)
            },
            packets: Vec::new(),
        }
    }
}
