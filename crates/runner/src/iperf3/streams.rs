//! An iperf3 test's data streams, either end: TCP sent by the engine's `tcp_send`; UDP sent
//! by a driver of the engine's sender core with iperf3's header in each datagram; both
//! received into flowlab's `ReceiverMeter`, then told in iperf3's result figures.

use std::io::Read;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};

use flowlab_engine::RunContext;
use flowlab_iperf3::results::StreamResult;
use flowlab_iperf3::udp::UdpHeader;
use flowlab_iperf3::{stream_id, TestPlan};
use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::{ReceiverReport, SenderReport};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_sys::clock;

use crate::foreign_udp::{udp_send, POLL};

/// A test's streams, opened by the client: TCP connections, the client's connected UDP
/// sockets, or the server's one UDP socket and each stream's client address.
pub enum Streams {
    Tcp(Vec<TcpStream>),
    Udp(Vec<UdpSocket>),
    UdpServer(UdpSocket, Vec<SocketAddr>),
}

impl Streams {
    /// Closes TCP streams at the test's end, as iperf3's server does at TEST_END: a client
    /// still draining them sees the end of its data.
    pub fn close(&self) {
        if let Streams::Tcp(tcp) = self {
            for s in tcp {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// The flowlab test an iperf3 plan is, a flow per stream; `flowlab_sends`: flowlab's end
/// sends (`Oneway` as flowlab's client would say).
pub fn spec_of(plan: &TestPlan, flowlab_sends: bool) -> TestSpec {
    let protocol = if plan.udp {
        Protocol::Udp
    } else {
        Protocol::Tcp
    };
    let direction = if flowlab_sends {
        Direction::Oneway
    } else {
        Direction::Reverse
    };
    TestSpec {
        rate_bps: plan.rate_bps,
        size: plan.block as u32,
        duration_ns: Some(plan.duration_s * 1_000_000_000),
        flows: plan.streams as u32,
        ..TestSpec::new(protocol, direction)
    }
}

/// Sends every stream for the plan's duration (or until `stop`), at most `cap` bit/s in all.
pub fn send_all(
    streams: &Streams,
    plan: &TestPlan,
    cap: Option<u64>,
    stop: &AtomicBool,
) -> (SenderReport, Option<String>) {
    let spec = spec_of(plan, true);
    // Datagrams number from 1, stamped with the monotonic clock, as iperf3 does.
    let header = |datagram: &mut [u8], seq: u64| {
        let now = clock::monotonic_ns();
        let header = UdpHeader {
            sec: (now / 1_000_000_000) as u32,
            usec: (now % 1_000_000_000 / 1_000) as u32,
            count: seq + 1,
        };
        header.emit(datagram, plan.counters_64bit);
    };
    let udp =
        |socket: &UdpSocket, to: Option<SocketAddr>| udp_send(socket, to, &spec, &header, stop);
    let meters: Vec<(SenderMeter, Option<String>)> = match streams {
        Streams::Tcp(tcp) => {
            let ctx = RunContext {
                send_cap_bps: cap,
                ..RunContext::default()
            };
            let outcome = flowlab_engine::tcp_send(tcp, &spec, &ctx, stop);
            return (outcome.report, outcome.error);
        }
        Streams::Udp(sockets) => on_threads(sockets.iter().map(|s| move || udp(s, None))),
        Streams::UdpServer(socket, peers) => {
            on_threads(peers.iter().map(|&to| move || udp(socket, Some(to))))
        }
    };
    let mut error = None;
    let mut all: Option<SenderMeter> = None;
    for (meter, e) in meters {
        error = error.or(e);
        match &mut all {
            Some(all) => all.absorb(meter),
            None => all = Some(meter),
        }
    }
    let report = all
        .map(|m| m.report())
        .unwrap_or_else(|| SenderMeter::new(0, false, false).report());
    (report, error)
}

/// Receives every stream until `stop`.
pub fn receive_all(streams: &Streams, plan: &TestPlan, stop: &AtomicBool) -> ReceiverReport {
    let meters: Vec<ReceiverMeter> = match streams {
        Streams::Tcp(tcp) => on_threads(tcp.iter().map(|s| move || tcp_receive(s, stop))),
        Streams::Udp(sockets) => on_threads(
            sockets
                .iter()
                .map(|s| move || udp_receive(s, None, plan, stop)),
        ),
        Streams::UdpServer(socket, peers) => vec![udp_receive(socket, Some(peers), plan, stop)],
    };
    let mut all: Option<ReceiverMeter> = None;
    for meter in meters {
        match &mut all {
            Some(all) => all.absorb(meter),
            None => all = Some(meter),
        }
    }
    let mut report = all
        .unwrap_or_else(|| ReceiverMeter::new(1, false, false))
        .report(None);
    if !plan.udp {
        // iperf3's TCP payload carries no send times: no delay or jitter to tell.
        report.relative_delay = None;
        report.transit_min_ns = None;
        report.ipdv = None;
        report.jitter_ns = 0.0;
    }
    report
}

/// Runs each job on a thread of its own: a blocked socket holds up no other stream.
fn on_threads<T: Send, F: FnOnce() -> T + Send>(jobs: impl Iterator<Item = F>) -> Vec<T> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = jobs.map(|job| scope.spawn(job)).collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// Receives UDP until `stop`: from a connected socket (one stream), or from the server's
/// socket, each datagram the stream of its source address (others are not counted).
fn udp_receive(
    socket: &UdpSocket,
    peers: Option<&[SocketAddr]>,
    plan: &TestPlan,
    stop: &AtomicBool,
) -> ReceiverMeter {
    let mut meter = ReceiverMeter::new(peers.map_or(1, <[_]>::len), false, false);
    let _ = socket.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; plan.block as usize + 1];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(got) => got,
            Err(_) => continue,
        };
        let arrival_ns = clock::monotonic_ns();
        let flow = match peers {
            Some(peers) => peers.iter().position(|p| *p == from),
            None => Some(0),
        };
        let header = UdpHeader::parse(&buf[..n], plan.counters_64bit);
        match (flow, header) {
            // Packets number from 1; flowlab's sequence numbers from 0.
            (Some(flow), Some(h)) if h.count > 0 => meter.on_packet(
                flow,
                Arrived {
                    seq: h.count - 1,
                    size: n as u32,
                    sent_ns: h.sent_ns(),
                    echoed_ns: None,
                    arrival_ns,
                    kernel_stamp: false,
                },
            ),
            _ => meter.on_malformed(),
        }
    }
    meter
}

/// Receives a TCP stream until `stop` or the peer closes: each read one "packet" of the
/// meter (bytes and arrival times; iperf3's payload has no send time).
fn tcp_receive(mut stream: &TcpStream, stop: &AtomicBool) -> ReceiverMeter {
    let mut meter = ReceiverMeter::new(1, false, false);
    let _ = stream.set_read_timeout(Some(POLL));
    let mut buf = vec![0u8; 256 * 1024];
    let mut seq = 0;
    while !stop.load(Ordering::Relaxed) {
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => break,
        };
        let now = clock::monotonic_ns();
        let arrived = Arrived {
            seq,
            size: n as u32,
            sent_ns: now,
            echoed_ns: None,
            arrival_ns: now,
            kernel_stamp: false,
        };
        meter.on_packet(0, arrived);
        seq += 1;
    }
    meter
}

/// iperf3's per-stream figures of what this end measured: a sender's bytes and datagrams,
/// a receiver's bytes, highest datagram number, gaps and jitter.
pub fn stream_results(
    plan: &TestPlan,
    sent: Option<&SenderReport>,
    received: Option<&ReceiverReport>,
) -> Vec<StreamResult> {
    (0..plan.streams as usize)
        .map(|i| {
            let mut r = StreamResult {
                id: stream_id(i) as f64,
                retransmits: -1.0,
                ..StreamResult::default()
            };
            if let Some(s) = sent {
                let flow = s.flows.get(i);
                r.bytes = flow.map_or(s.bytes_sent, |f| f.bytes_sent) as f64;
                r.packets = flow.map_or(s.packets_sent, |f| f.packets_sent) as f64;
                r.end_time = flow.map_or(s.duration_ns, |f| f.duration_ns) as f64 / 1e9;
            }
            if let Some(rx) = received {
                let flow = rx.flows.get(i);
                let counts = flow.map_or(rx.packets, |f| f.packets);
                r.bytes = flow.map_or(rx.bytes_received, |f| f.bytes_received) as f64;
                r.end_time = flow.map_or(rx.duration_ns, |f| f.duration_ns) as f64 / 1e9;
                if plan.udp {
                    r.jitter = flow.map_or(rx.jitter_ns, |f| f.jitter_ns) / 1e9;
                    r.errors = counts.lost as f64;
                    r.packets = (counts.unique + counts.lost) as f64;
                }
            }
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrival(seq: u64, at_ns: u64) -> Arrived {
        Arrived {
            seq,
            size: 100,
            sent_ns: at_ns,
            echoed_ns: None,
            arrival_ns: at_ns + 1_000,
            kernel_stamp: false,
        }
    }

    #[test]
    fn a_receivers_streams_are_told_as_iperf3_counts_them() {
        let plan = TestPlan {
            udp: true,
            reverse: false,
            streams: 2,
            duration_s: 1,
            block: 100,
            rate_bps: Some(1_000_000),
            counters_64bit: false,
        };
        let mut meter = ReceiverMeter::new(2, false, false);
        // Stream 1: packets 1, 2 and 5 (numbered from 1 on the wire): 3 and 4 missing.
        for (k, seq) in [0, 1, 4].into_iter().enumerate() {
            meter.on_packet(0, arrival(seq, k as u64 * 1_000_000));
        }
        meter.on_packet(1, arrival(0, 0));
        let results = stream_results(&plan, None, Some(&meter.report(None)));
        let ids: Vec<f64> = results.iter().map(|r| r.id).collect();
        assert_eq!(ids, [1.0, 3.0]);
        let first = &results[0];
        assert_eq!(
            (first.bytes, first.packets, first.errors),
            (300.0, 5.0, 2.0)
        );
        assert_eq!((first.end_time, first.retransmits), (0.002, -1.0));
        assert_eq!((results[1].packets, results[1].errors), (1.0, 0.0));
    }
}
