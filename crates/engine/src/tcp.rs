//! TCP roles. The flow is a sequence of messages of exactly `size` bytes, each starting with a
//! probe header, so the receiver can find message boundaries in the byte stream and measure
//! per-message delay. Pacing applies to application writes of one message.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;

use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::{EchoReport, TcpInfoReport};
use flowlab_sys::{clock, tcp};
use flowlab_traffic::Action;
use flowlab_wire::{ProbeHeader, ProbeRepr, PROBE_HEADER_LEN};

use crate::readiness::Readiness;
use crate::{
    fill_payload, stopped, wait_until, FlowParams, IntervalClock, IntervalSink, ReceiverOutcome,
    SenderOutcome, MAX_BATCH, POLL_PERIOD,
};

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// TCP_INFO of a connection, for reports.
pub fn tcp_info_report(stream: &TcpStream) -> Option<TcpInfoReport> {
    tcp::tcp_info(stream).ok().map(|i| TcpInfoReport {
        rtt_us: i.rtt_us,
        rttvar_us: i.rttvar_us,
        snd_cwnd: i.snd_cwnd,
        total_retrans: i.total_retrans,
        pacing_rate_bps: i.pacing_rate_bps,
        delivery_rate_bps: i.delivery_rate_bps,
        snd_mss: i.snd_mss,
    })
}

/// Writes all of `buf`, retrying through write timeouts until `stop`. Returns false if the
/// stop came first or the connection failed.
fn write_whole(stream: &mut &TcpStream, buf: &[u8], stop: &AtomicBool) -> io::Result<bool> {
    write_whole_with(buf, stop, |rest| stream.write(rest))
}

fn write_whole_with(
    buf: &[u8],
    stop: &AtomicBool,
    mut write: impl FnMut(&[u8]) -> io::Result<usize>,
) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        match write(&buf[done..]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "connection closed",
                ))
            }
            Ok(n) => done += n,
            Err(e) if is_timeout(&e) => {
                if stopped(stop) {
                    return Ok(false);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Send buffers of a TCP sender. With MSG_ZEROCOPY the kernel reads a buffer until it
/// reports the send complete, so messages rotate through a ring and a buffer is reused only
/// once its send has completed.
struct Outbox {
    ring: Vec<Vec<u8>>,
    zerocopy: bool,
    calls: u64,
    completed: u64,
}

const ZEROCOPY_RING: usize = 32;

impl Outbox {
    fn new(size: usize, zerocopy: bool) -> Self {
        let slots = if zerocopy { ZEROCOPY_RING } else { 1 };
        let ring = (0..slots)
            .map(|_| {
                let mut b = vec![0u8; size];
                fill_payload(&mut b);
                b
            })
            .collect();
        Outbox {
            ring,
            zerocopy,
            calls: 0,
            completed: 0,
        }
    }

    /// The buffer for message `seq`, once the kernel is done with its last use.
    fn slot(
        &mut self,
        stream: &TcpStream,
        seq: u64,
        stop: &AtomicBool,
    ) -> io::Result<Option<&mut Vec<u8>>> {
        while self.zerocopy && self.calls - self.completed >= ZEROCOPY_RING as u64 {
            self.completed += u64::from(tcp::reap_zerocopy_completions(stream)?);
            if stopped(stop) {
                return Ok(None);
            }
            if self.calls - self.completed >= ZEROCOPY_RING as u64 {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        let index = (seq % self.ring.len() as u64) as usize;
        Ok(self.ring.get_mut(index))
    }

    fn send(&mut self, mut stream: &TcpStream, seq: u64, stop: &AtomicBool) -> io::Result<bool> {
        let index = (seq % self.ring.len() as u64) as usize;
        let buf = &self.ring[index];
        if !self.zerocopy {
            return write_whole(&mut stream, buf, stop);
        }
        let calls = &mut self.calls;
        write_whole_with(buf, stop, |rest| {
            let n = tcp::send_zerocopy(stream, rest)?;
            *calls += 1;
            Ok(n)
        })
    }
}

/// Sends every flow (one connection each), a thread per connection: a blocked TCP write must
/// not hold up the other flows.
pub fn tcp_send(streams: &[TcpStream], flow: &FlowParams, stop: &AtomicBool) -> SenderOutcome {
    let Some((first, others)) = streams.split_first() else {
        let meter = SenderMeter::new(0, false, false);
        return SenderOutcome {
            report: meter.report(),
            log: Vec::new(),
            error: Some("no connection".into()),
            worker_cpu_ns: (0, 0),
        };
    };
    let (mut meter, error, worker_cpu_ns) = std::thread::scope(|scope| {
        let workers: Vec<_> = others
            .iter()
            .map(|stream| {
                scope.spawn(move || {
                    let before = flowlab_sys::cpu::thread_usage().unwrap_or((0, 0));
                    let out = send_one(stream, flow, stop);
                    let after = flowlab_sys::cpu::thread_usage().unwrap_or(before);
                    (
                        out,
                        (
                            after.0.saturating_sub(before.0),
                            after.1.saturating_sub(before.1),
                        ),
                    )
                })
            })
            .collect();
        // The first connection is served on this thread, so a single flow needs no other.
        let (mut meter, mut error) = send_one(first, flow, stop);
        let mut cpu = (0, 0);
        for worker in workers {
            match worker.join() {
                Ok(((m, e), (user, system))) => {
                    meter.absorb(m);
                    error = error.or(e);
                    cpu = (cpu.0 + user, cpu.1 + system);
                }
                Err(_) => error = error.or(Some("a sender thread failed".into())),
            }
        }
        (meter, error, cpu)
    });
    SenderOutcome {
        report: meter.report(),
        log: meter.take_log(),
        error,
        worker_cpu_ns,
    }
}

fn send_one(
    stream: &TcpStream,
    flow: &FlowParams,
    stop: &AtomicBool,
) -> (SenderMeter, Option<String>) {
    let mut meter = SenderMeter::new(1, flow.rate_bps.is_some(), flow.packet_log);
    let _ = stream.set_write_timeout(Some(POLL_PERIOD));
    // Paced messages must leave when written; at max rate Nagle costs nothing. --nodelay wins.
    let _ = stream.set_nodelay(flow.socket.nodelay.unwrap_or(flow.rate_bps.is_some()));
    let mut outbox = Outbox::new(flow.size as usize, flow.socket.zerocopy);
    let start_mono = clock::monotonic_ns();
    let realtime_offset = clock::realtime_minus_monotonic_ns();
    let mut pacer = flow.pacer(start_mono, MAX_BATCH);
    let mut seq = 0u64;
    let mut error = None;
    'flow: while !stopped(stop) {
        let (first, count) = match pacer.poll(clock::monotonic_ns()) {
            Action::Done => break,
            Action::Wait { until_ns } => {
                meter.on_pacing_spin(wait_until(until_ns));
                continue;
            }
            Action::Send { first, count } => (first, count),
        };
        meter.on_batch(count);
        for slot in first..first + count {
            let message = match outbox.slot(stream, seq, stop) {
                Ok(Some(m)) => m,
                Ok(None) => break 'flow,
                Err(e) => {
                    error = Some(format!("TCP send failed: {e}"));
                    break 'flow;
                }
            };
            let now_mono = clock::monotonic_ns();
            let sent_ns = now_mono.saturating_add_signed(realtime_offset);
            ProbeRepr {
                flags: 0,
                session: flow.session,
                seq,
                sent_ns,
                echoed_ns: 0,
            }
            .emit(message);
            match outbox.send(stream, seq, stop) {
                Ok(true) => {
                    meter.on_sent(0, seq, flow.size, sent_ns, pacer.deadline(slot), now_mono);
                    seq += 1;
                }
                Ok(false) => break 'flow,
                Err(e) => {
                    error = Some(format!("TCP send failed: {e}"));
                    break 'flow;
                }
            }
        }
        pacer.advance(count);
    }
    meter.set_missed_slots(0, pacer.missed_slots());
    (meter, error)
}

/// Splits a byte stream into `size`-byte messages and hands each complete one to `on_message`
/// with a view of its first bytes (the probe header).
struct MessageSplitter {
    size: usize,
    filled: usize,
    header: [u8; PROBE_HEADER_LEN],
}

impl MessageSplitter {
    fn new(size: usize) -> Self {
        MessageSplitter {
            size: size.max(PROBE_HEADER_LEN),
            filled: 0,
            header: [0; PROBE_HEADER_LEN],
        }
    }

    fn push(&mut self, mut bytes: &[u8], mut on_message: impl FnMut(&[u8; PROBE_HEADER_LEN])) {
        while !bytes.is_empty() {
            if self.filled < PROBE_HEADER_LEN {
                let take = (PROBE_HEADER_LEN - self.filled).min(bytes.len());
                self.header[self.filled..self.filled + take].copy_from_slice(&bytes[..take]);
                self.filled += take;
                bytes = &bytes[take..];
            }
            let take = (self.size - self.filled).min(bytes.len());
            self.filled += take;
            bytes = &bytes[take..];
            if self.filled == self.size {
                on_message(&self.header);
                self.filled = 0;
            }
        }
    }
}

/// Receives every flow's message stream (one connection each) until `stop` or every peer
/// has closed.
pub fn tcp_receive(
    streams: &[TcpStream],
    flow: &FlowParams,
    round_trip: bool,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> ReceiverOutcome {
    let mut meter = ReceiverMeter::new(streams.len(), round_trip, flow.packet_log);
    let mut splitters: Vec<MessageSplitter> = streams
        .iter()
        .map(|_| MessageSplitter::new(flow.size as usize))
        .collect();
    let mut open = vec![true; streams.len()];
    let mut buf = vec![0u8; 256 * 1024];
    let mut intervals = IntervalClock::new(flow.interval, clock::monotonic_ns());
    let mut error = None;
    match Readiness::new(streams, flow.busy_poll) {
        Err(e) => error = Some(format!("cannot watch the data connections: {e}")),
        Ok(mut ready) => {
            while !stopped(stop) && open.iter().any(|&o| o) {
                let result = ready.each_ready(|i| {
                    if !open[i] {
                        return Ok(0);
                    }
                    let n = match (&streams[i]).read(&mut buf) {
                        Ok(0) => {
                            open[i] = false;
                            return Ok(0);
                        }
                        Ok(n) => n,
                        Err(e) if is_timeout(&e) => return Ok(0),
                        Err(e) => return Err(e),
                    };
                    let arrival_ns = clock::realtime_ns();
                    let meter = &mut meter;
                    splitters[i].push(&buf[..n], |header| match ProbeRepr::parse(header) {
                        Ok(p) if p.session == flow.session => meter.on_packet(
                            i,
                            Arrived {
                                seq: p.seq,
                                size: flow.size,
                                sent_ns: p.sent_ns,
                                echoed_ns: p.is_echo().then_some(p.echoed_ns),
                                arrival_ns,
                                kernel_stamp: false,
                            },
                        ),
                        _ => meter.on_malformed(),
                    });
                    Ok(1)
                });
                if let Err(e) = result {
                    error = Some(format!("TCP receive failed: {e}"));
                    break;
                }
                while let Some((index, start, end)) = intervals.closed(clock::monotonic_ns()) {
                    let mut report = meter.take_interval(index, start, end);
                    report.tcp_info = streams.first().and_then(tcp_info_report);
                    on_interval(report);
                }
            }
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

/// A message being echoed: bytes read so far.
struct PendingEcho {
    message: Vec<u8>,
    filled: usize,
}

/// Echoes every message back on its connection with its arrival time stamped in, until
/// `stop` or every peer has closed.
pub fn tcp_echo(
    streams: &[TcpStream],
    flow: &FlowParams,
    stop: &AtomicBool,
) -> (EchoReport, Option<String>) {
    let mut report = EchoReport::default();
    let mut pending: Vec<PendingEcho> = streams
        .iter()
        .map(|s| {
            let _ = s.set_nodelay(true);
            let _ = s.set_write_timeout(Some(POLL_PERIOD));
            PendingEcho {
                message: vec![0u8; flow.size as usize],
                filled: 0,
            }
        })
        .collect();
    let mut open = vec![true; streams.len()];
    let mut error = None;
    match Readiness::new(streams, flow.busy_poll) {
        Err(e) => error = Some(format!("cannot watch the data connections: {e}")),
        Ok(mut ready) => {
            while !stopped(stop) && open.iter().any(|&o| o) {
                let result = ready.each_ready(|i| {
                    let p = &mut pending[i];
                    let mut stream = &streams[i];
                    match stream.read(&mut p.message[p.filled..]) {
                        Ok(0) => {
                            open[i] = false;
                            return Ok(0);
                        }
                        Ok(n) => p.filled += n,
                        Err(e) if is_timeout(&e) => return Ok(0),
                        Err(e) => return Err(e),
                    }
                    if p.filled < p.message.len() {
                        return Ok(1);
                    }
                    p.filled = 0;
                    match ProbeHeader::new_checked(&mut p.message[..]) {
                        Ok(mut h) if h.session() == flow.session => {
                            h.set_echo(clock::realtime_ns())
                        }
                        _ => {
                            report.malformed += 1;
                            return Ok(1);
                        }
                    }
                    if write_whole(&mut stream, &p.message, stop)? {
                        report.packets_echoed += 1;
                        report.bytes_echoed += p.message.len() as u64;
                    }
                    Ok(1)
                });
                if let Err(e) = result {
                    error = Some(format!("TCP echo failed: {e}"));
                    break;
                }
            }
        }
    }
    (report, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_finds_messages_across_reads() {
        let mut stream = Vec::new();
        for seq in 0..3u64 {
            let mut m = vec![0u8; 100];
            ProbeRepr {
                seq,
                ..Default::default()
            }
            .emit(&mut m);
            stream.extend(m);
        }
        let mut seqs = Vec::new();
        let mut s = MessageSplitter::new(100);
        for chunk in stream.chunks(7) {
            s.push(chunk, |h| seqs.push(ProbeRepr::parse(h).unwrap().seq));
        }
        assert_eq!(seqs, vec![0, 1, 2]);
    }
}
