//! UDP roles: paced sender (sendmmsg trains), receiver (recvmmsg with kernel timestamps and
//! socket-drop counters) and echoer (loopback tests).

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::AtomicBool;

use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::EchoReport;
use flowlab_sys::{clock, udp};
use flowlab_traffic::Action;
use flowlab_wire::{ProbeHeader, ProbeRepr};

use crate::{
    fill_payload, stopped, wait_until, FlowParams, IntervalClock, IntervalSink, ReceiverOutcome,
    SenderOutcome, MAX_BATCH, POLL_PERIOD,
};

/// Largest datagram a receiver accepts; anything larger is cut and counted as malformed.
const MAX_DATAGRAM: usize = 65_535;

fn is_buffer_full(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::WouldBlock || err.raw_os_error() == Some(libc_enobufs())
}

/// ENOBUFS, the kernel's "device queue full" (Linux value; this engine runs on Linux only).
const fn libc_enobufs() -> i32 {
    105
}

/// Sends the flow on a connected UDP socket. Paced flows never block in the kernel: a full
/// send buffer is a packet lost by the sender, as the user asked for that rate. At max rate
/// the socket blocks so the sender goes exactly as fast as the path takes packets.
pub fn udp_send(sock: &UdpSocket, flow: &FlowParams, stop: &AtomicBool) -> SenderOutcome {
    let paced = flow.rate_bps.is_some();
    let mut meter = SenderMeter::new(paced, flow.packet_log);
    let mut error = None;
    if let Err(e) = sock.set_nonblocking(paced) {
        error = Some(format!("cannot configure the data socket: {e}"));
    }
    let size = flow.size as usize;
    let mut buffers: Vec<Vec<u8>> = (0..MAX_BATCH)
        .map(|_| {
            let mut b = vec![0u8; size];
            fill_payload(&mut b);
            b
        })
        .collect();
    let start_mono = clock::monotonic_ns();
    let realtime_offset = clock::realtime_minus_monotonic_ns();
    let mut pacer = flow.pacer(start_mono);
    let mut seq = 0u64;
    while error.is_none() && !stopped(stop) {
        let (first, count) = match pacer.poll(clock::monotonic_ns()) {
            Action::Done => break,
            Action::Wait { until_ns } => {
                wait_until(until_ns);
                continue;
            }
            Action::Send { first, count } => (first, count as usize),
        };
        let now_mono = clock::monotonic_ns();
        let sent_ns = now_mono.saturating_add_signed(realtime_offset);
        for (i, buf) in buffers.iter_mut().take(count).enumerate() {
            let header = ProbeRepr {
                flags: 0,
                session: flow.session,
                seq: seq + i as u64,
                sent_ns,
                echoed_ns: 0,
            };
            header.emit(buf);
        }
        let slices: Vec<&[u8]> = buffers.iter().take(count).map(Vec::as_slice).collect();
        let mut done = 0usize;
        while done < count {
            match udp::send_batch(sock, &slices[done..]) {
                Ok(n) => {
                    meter.on_batch(n as u64);
                    for k in done..done + n {
                        let slot = first + k as u64;
                        meter.on_sent(seq, flow.size, sent_ns, pacer.deadline(slot), now_mono);
                        seq += 1;
                    }
                    done += n;
                    if paced {
                        // What the kernel refused now stays refused: resending later would
                        // break the schedule.
                        meter.on_send_buffer_full((count - done) as u64);
                        break;
                    }
                }
                Err(e) if is_buffer_full(&e) => {
                    meter.on_send_buffer_full((count - done) as u64);
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    // An ICMP port unreachable from an earlier packet: the peer's socket is
                    // gone. Count it and go on; the control connection decides the end.
                    meter.on_send_error((count - done) as u64);
                    break;
                }
                Err(e) => {
                    meter.on_send_error((count - done) as u64);
                    error = Some(format!("send failed: {e}"));
                    break;
                }
            }
        }
        pacer.advance(count as u64);
    }
    meter.set_missed_slots(pacer.missed_slots());
    SenderOutcome {
        report: meter.report(),
        log: meter.take_log(),
        error,
    }
}

/// Prepares a UDP socket for receiving: kernel timestamps, drop counters, a short read
/// timeout so the loop can see its stop flag. Failures are not fatal: the measurement then
/// falls back to user-space time or unknown drops, and the report says so.
fn prepare_receiver(sock: &UdpSocket) {
    let _ = udp::enable_rx_timestamps(sock);
    let _ = udp::enable_rxq_ovfl(sock);
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_read_timeout(Some(POLL_PERIOD));
}

/// Receives the flow until `stop`. With `round_trip`, packets are echoes coming back to the
/// client of a loopback test.
pub fn udp_receive(
    sock: &UdpSocket,
    flow: &FlowParams,
    round_trip: bool,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> ReceiverOutcome {
    prepare_receiver(sock);
    let mut meter = ReceiverMeter::new(round_trip, flow.packet_log);
    let mut batch = udp::RecvBatch::new(MAX_BATCH as usize, MAX_DATAGRAM);
    let mut intervals = IntervalClock::new(flow.interval, clock::monotonic_ns());
    let mut error = None;
    while !stopped(stop) {
        match udp::recv_batch(sock, &mut batch) {
            Ok(n) => {
                for i in 0..n {
                    record_datagram(&mut meter, flow.session, batch.payload(i), batch.meta(i));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => {
                error = Some(format!("receive failed: {e}"));
                break;
            }
        }
        while let Some((index, start, end)) = intervals.closed(clock::monotonic_ns()) {
            on_interval(meter.take_interval(index, start, end));
        }
    }
    if let Some((index, start, end)) = intervals.last(clock::monotonic_ns()) {
        on_interval(meter.take_interval(index, start, end));
    }
    ReceiverOutcome {
        report: meter.report(None),
        log: meter.take_log(),
        error,
    }
}

fn record_datagram(meter: &mut ReceiverMeter, session: u32, payload: &[u8], meta: udp::RecvMeta) {
    if let Some(drops) = meta.rxq_drops {
        meter.set_socket_drops(u64::from(drops));
    }
    let probe = match ProbeRepr::parse(payload) {
        Ok(p) if p.session == session && !meta.truncated => p,
        _ => return meter.on_malformed(),
    };
    let (arrival_ns, kernel_stamp) = match meta.kernel_rx_ns {
        Some(ns) => (ns, true),
        None => (clock::realtime_ns(), false),
    };
    meter.on_packet(Arrived {
        seq: probe.seq,
        size: meta.len as u32,
        sent_ns: probe.sent_ns,
        echoed_ns: probe.is_echo().then_some(probe.echoed_ns),
        arrival_ns,
        kernel_stamp,
    });
}

/// Echoes every probe of this session back to the (connected) peer, stamped with its arrival
/// time, until `stop`.
pub fn udp_echo(sock: &UdpSocket, session: u32, stop: &AtomicBool) -> (EchoReport, Option<String>) {
    prepare_receiver(sock);
    let mut report = EchoReport::default();
    let mut batch = udp::RecvBatch::new(MAX_BATCH as usize, MAX_DATAGRAM);
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(MAX_BATCH as usize);
    let mut error = None;
    while !stopped(stop) {
        let n = match udp::recv_batch(sock, &mut batch) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => {
                error = Some(format!("receive failed: {e}"));
                break;
            }
        };
        out.clear();
        for i in 0..n {
            let meta = batch.meta(i);
            if let Some(drops) = meta.rxq_drops {
                report.socket_buffer_drops = Some(u64::from(drops));
            }
            let mut packet = batch.payload(i).to_vec();
            let Ok(mut header) = ProbeHeader::new_checked(&mut packet[..]) else {
                report.malformed += 1;
                continue;
            };
            if header.session() != session || meta.truncated {
                report.malformed += 1;
                continue;
            }
            header.set_echo(meta.kernel_rx_ns.unwrap_or_else(clock::realtime_ns));
            out.push(packet);
        }
        let slices: Vec<&[u8]> = out.iter().map(Vec::as_slice).collect();
        let mut done = 0;
        while done < slices.len() {
            match udp::send_batch(sock, &slices[done..]) {
                Ok(k) => {
                    report.packets_echoed += k as u64;
                    report.bytes_echoed += slices[done..done + k]
                        .iter()
                        .map(|s| s.len() as u64)
                        .sum::<u64>();
                    done += k;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The echo path is lossy like any other: a refused echo is a lost echo.
                Err(_) => break,
            }
        }
    }
    (report, error)
}
