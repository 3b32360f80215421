//! The agent's roles: which engine role runs on its data sockets for a test, and what it
//! tells the session thread while it runs.

use std::sync::atomic::AtomicBool;
use std::sync::mpsc;

use flowlab_engine::RunContext;
use flowlab_results::IntervalReport;
use flowlab_spec::{Direction, TestSpec};

use super::data::DataSockets;
use crate::outcome::RoleOutcome;

/// What a role thread sends to the session thread.
pub(super) enum Event {
    Interval(Box<IntervalReport>),
    SenderDone,
}

/// Runs the agent's side of `spec` on `data` until `stop`.
pub(super) fn run_role(
    data: DataSockets,
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(IntervalReport),
    events: &mpsc::Sender<Event>,
) -> RoleOutcome {
    let mut out = RoleOutcome::default();
    if spec.transactions().is_some() {
        let flows = spec.flows as usize;
        let answered = match &data {
            DataSockets::Tcp(streams) => flowlab_engine::tcp_respond(streams, ctx, stop),
            DataSockets::TcpAcceptEach(listener, peer) => {
                flowlab_engine::tcp_accept_respond(listener, *peer, flows, spec, ctx, stop)
            }
            DataSockets::Udp(socks) => flowlab_engine::udp_respond(socks, ctx, stop),
            _ => return RoleOutcome::failed("request/response runs over TCP or UDP"),
        };
        out.worker_cpu_ns = answered.worker_cpu_ns;
        (out.responder, out.error) = (Some(answered.report), answered.error);
        return out;
    }
    match (data, spec.direction) {
        (DataSockets::Udp(socks), _) => {
            datagram_role(&socks, spec, ctx, stop, on_interval, events, &mut out)
        }
        (DataSockets::Raw(socks, _), _) => {
            datagram_role(&socks, spec, ctx, stop, on_interval, events, &mut out)
        }
        (DataSockets::Tcp(streams), Direction::Oneway) => {
            let r = flowlab_engine::tcp_receive(&streams, spec, ctx, false, stop, on_interval);
            (out.receiver, out.log, out.error) = (Some(r.report), r.log, r.error);
        }
        (DataSockets::Tcp(streams), Direction::Reverse) => {
            let s = flowlab_engine::tcp_send(&streams, spec, ctx, stop);
            out.worker_cpu_ns = s.worker_cpu_ns;
            out.tcp_info = streams
                .first()
                .and_then(flowlab_engine::tcp_info_report_when_acked);
            let _ = events.send(Event::SenderDone);
            (out.sender, out.log, out.error) = (Some(s.report), s.log, s.error);
        }
        (DataSockets::Tcp(streams), Direction::Loopback) => {
            let (echo, error) = flowlab_engine::tcp_echo(&streams, spec, ctx, stop);
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
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(IntervalReport),
    events: &mpsc::Sender<Event>,
    out: &mut RoleOutcome,
) {
    match spec.direction {
        Direction::Oneway => {
            let r = flowlab_engine::udp_receive(socks, spec, ctx, false, stop, on_interval);
            (out.receiver, out.log, out.error) = (Some(r.report), r.log, r.error);
            out.echo = r.echo;
        }
        Direction::Reverse => {
            let s = flowlab_engine::udp_send(socks, spec, ctx, stop);
            let _ = events.send(Event::SenderDone);
            (out.sender, out.log, out.error) = (Some(s.report), s.log, s.error);
        }
        Direction::Loopback => {
            let (echo, error) = flowlab_engine::udp_echo(socks, spec, ctx, stop);
            (out.echo, out.error) = (Some(echo), error);
        }
    }
}
