//! TCP roles. The flow is a sequence of messages, each starting with a probe header so the
//! receiver can find message boundaries in the byte stream and measure per-message delay:
//! messages of exactly `size` bytes for a constant rate, or, with a traffic model, messages of
//! the model's sizes that carry their length (see `flowlab_wire::message`). Pacing applies to
//! application writes of one message.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::{EchoReport, TcpInfoReport};
use flowlab_spec::TestSpec;
use flowlab_sys::{clock, tcp};
use flowlab_traffic::sender::{Packet, Poll, SendPolicy};
use flowlab_wire::message::FRAMED_HEAD_LEN;
use flowlab_wire::{MessageHead, ProbeHeader, ProbeRepr, StreamSplitter};

use crate::readiness::Readiness;
use crate::{
    batching, fill_payload, merge_flows, on_flow_threads, stopped, IntervalClock, IntervalSink,
    ReceiverOutcome, RunContext, SendBudget, SenderOutcome, MAX_BATCH, MAX_TCP_MESSAGE,
    POLL_PERIOD,
};
use flowlab_pacing::Waiter;

pub(crate) fn is_timeout(e: &io::Error) -> bool {
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

/// TCP_INFO of a sending connection at the end of a test: once the peer has acknowledged all
/// it was written (SIOCOUTQ empty), or after a second. Read as soon as the last write returns,
/// it misses the retransmissions of the last window in flight.
pub fn tcp_info_report_when_acked(stream: &TcpStream) -> Option<TcpInfoReport> {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && tcp::tcp_unsent_bytes(stream).is_ok_and(|n| n > 0) {
        std::thread::sleep(Duration::from_millis(2));
    }
    tcp_info_report(stream)
}

/// Writes all of `buf`, retrying through write timeouts until `stop`. Returns false if the
/// stop came first or the connection failed.
pub(crate) fn write_whole(
    stream: &mut &TcpStream,
    buf: &[u8],
    stop: &AtomicBool,
) -> io::Result<bool> {
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

    /// The buffer for message `seq` of `len` bytes, once the kernel is done with its last use.
    fn slot(
        &mut self,
        stream: &TcpStream,
        seq: u64,
        len: usize,
        stop: &AtomicBool,
    ) -> io::Result<Option<&mut [u8]>> {
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
        Ok(self.ring.get_mut(index).map(|buf| {
            if buf.len() < len {
                // A model's message larger than any before: grow the buffer, keep the pattern.
                buf.resize(len, 0);
                fill_payload(buf);
            }
            &mut buf[..len]
        }))
    }

    fn send(
        &mut self,
        mut stream: &TcpStream,
        seq: u64,
        len: usize,
        stop: &AtomicBool,
    ) -> io::Result<bool> {
        let index = (seq % self.ring.len() as u64) as usize;
        let buf = &self.ring[index][..len];
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
pub fn tcp_send(
    streams: &[TcpStream],
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
) -> SenderOutcome {
    let budget = SendBudget::of(ctx);
    let (flows, worker_cpu_ns) = on_flow_threads(streams.len(), |i| {
        send_one(&streams[i], i, spec, ctx.session, &budget, stop)
    });
    let (merged, error) = merge_flows(flows, SenderMeter::absorb);
    let error = error.or_else(|| streams.is_empty().then(|| "no connection".to_string()));
    let mut meter = merged.unwrap_or_else(|| SenderMeter::new(0, false, false));
    SenderOutcome {
        report: meter.report(),
        log: meter.take_log(),
        error,
        worker_cpu_ns,
    }
}

/// Sends flow `index` on its connection, driving a sender core of that one flow: fixed-size
/// messages at the constant rate, or the times and sizes of the flow's traffic model in
/// length-framed messages.
fn send_one(
    stream: &TcpStream,
    index: usize,
    spec: &TestSpec,
    session: u32,
    budget: &SendBudget,
    stop: &AtomicBool,
) -> (SenderMeter, Option<String>) {
    let mut meter = SenderMeter::new(1, spec.paced(), spec.packet_log);
    let _ = stream.set_write_timeout(Some(POLL_PERIOD));
    // Paced messages must leave when written; at max rate Nagle costs nothing. --nodelay wins.
    let _ = stream.set_nodelay(spec.socket.nodelay.unwrap_or(spec.paced()));
    let mut outbox = Outbox::new(spec.size as usize, spec.socket.zerocopy);
    let realtime_offset = clock::realtime_minus_monotonic_ns();
    // A model's sizes, within what a framed message can be.
    let policy = SendPolicy {
        min_size: FRAMED_HEAD_LEN as u32,
        max_size: MAX_TCP_MESSAGE,
        ..spec.send_policy()
    };
    let start = clock::monotonic_ns();
    let mut core = match spec.sender_core(index..index + 1, start, batching(MAX_BATCH), policy) {
        Ok(core) => core,
        Err(e) => return (meter, Some(e)),
    };
    if let Some(contract) = core.pacers().next().and_then(|p| p.contract()) {
        meter.hold_to_contract(0, contract);
    }
    let mut waiter = Waiter::new(spec, 1, false);
    loop {
        if stopped(stop) {
            core.handle_stop();
        }
        let now = clock::monotonic_ns();
        match core.poll(now) {
            Poll::Done => break,
            Poll::Wait { until_ns } => meter.on_pacing_spin(waiter.wait(until_ns).spun_ns),
            Poll::Transmit { .. } => {
                let train = core.train();
                let admitted = budget.admit(now, train.len(), |k| train[k].size);
                core.handle_budget(admitted);
                if core.train().is_empty() {
                    continue;
                }
                meter.on_batch(core.train().len() as u64);
                let writer = MessageWriter {
                    outbox: &mut outbox,
                    stream,
                    session,
                    framed: spec.modelled(),
                    realtime_offset,
                };
                match writer.send_train(core.train(), &mut meter, stop) {
                    Ok(taken) => {
                        core.handle_sent(taken);
                    }
                    Err(e) => core.handle_failure(e),
                }
            }
        }
    }
    if let Some(pacer) = core.pacers().next() {
        meter.set_missed_slots(0, pacer.missed_slots());
        if let Some(report) = pacer.contract_report() {
            meter.set_shaper_report(0, report);
        }
    }
    if let Some(pacing) = waiter.report() {
        meter.set_pacing(pacing);
    }
    (meter, core.error().map(str::to_string))
}

/// What one TCP sender writes its messages with.
struct MessageWriter<'a> {
    outbox: &'a mut Outbox,
    stream: &'a TcpStream,
    session: u32,
    /// A traffic model's messages carry their length (`flowlab_wire::message`).
    framed: bool,
    realtime_offset: i64,
}

impl MessageWriter<'_> {
    /// Writes the train's messages one by one; how many were written before a stop, or why
    /// writing failed.
    fn send_train(
        self,
        train: &[Packet],
        meter: &mut SenderMeter,
        stop: &AtomicBool,
    ) -> Result<usize, String> {
        let failed = |e: io::Error| format!("TCP send failed: {e}");
        for (k, p) in train.iter().enumerate() {
            let message = match self.outbox.slot(self.stream, p.seq, p.size as usize, stop) {
                Ok(Some(m)) => m,
                Ok(None) => return Ok(k),
                Err(e) => return Err(failed(e)),
            };
            let now_mono = clock::monotonic_ns();
            let sent_ns = now_mono.saturating_add_signed(self.realtime_offset);
            let probe = ProbeRepr {
                flags: 0,
                session: self.session,
                seq: p.seq,
                sent_ns,
                echoed_ns: 0,
            };
            match self.framed {
                true => MessageHead::framed(probe, p.size).emit(message),
                false => probe.emit(message),
            };
            match self.outbox.send(self.stream, p.seq, p.size as usize, stop) {
                Ok(true) => meter.on_sent(0, p.seq, p.size, sent_ns, p.due_ns, now_mono),
                Ok(false) => return Ok(k),
                Err(e) => return Err(failed(e)),
            }
        }
        Ok(train.len())
    }
}

/// Receives every flow's message stream (one connection each) until `stop` or every peer
/// has closed.
pub fn tcp_receive(
    streams: &[TcpStream],
    spec: &TestSpec,
    ctx: &RunContext,
    round_trip: bool,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> ReceiverOutcome {
    let mut meter =
        ReceiverMeter::new(streams.len(), round_trip, spec.packet_log).omitting(spec.omit_ns);
    let mut splitters: Vec<StreamSplitter> = streams
        .iter()
        .map(|_| StreamSplitter::new(spec.size, MAX_TCP_MESSAGE))
        .collect();
    let mut open = vec![true; streams.len()];
    let mut buf = vec![0u8; 256 * 1024];
    let mut intervals = IntervalClock::new(spec.interval_ns, clock::monotonic_ns());
    let mut error = None;
    match Readiness::new(streams, crate::setup::busy_poll(spec)) {
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
                    hold_window_clamp(&streams[i], spec);
                    let arrival_ns = clock::realtime_ns();
                    let meter = &mut meter;
                    let split = splitters[i].push(&buf[..n], |head| match head.probe {
                        p if p.session == ctx.session => meter.on_packet(
                            i,
                            Arrived {
                                seq: p.seq,
                                size: head.length.unwrap_or(spec.size),
                                sent_ns: p.sent_ns,
                                echoed_ns: p.is_echo().then_some(p.echoed_ns),
                                arrival_ns,
                                kernel_stamp: false,
                            },
                        ),
                        _ => meter.on_malformed(),
                    });
                    if split.is_err() {
                        // No later boundary can be trusted: stop reading this connection.
                        meter.on_malformed();
                        open[i] = false;
                    }
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
        echo: None,
    }
}

/// Sets the test's window clamp again after a read. Linux (6.x) replaces a connection's clamp
/// with one from its receive buffer whenever it re-measures the payload's share of the
/// buffers it receives into, the first data included, so a clamp set once at the start
/// held for no packet: a 64 KiB clamp over 190 ms gave a window of 80 KiB.
fn hold_window_clamp(stream: &TcpStream, spec: &TestSpec) {
    if let Some(clamp) = spec.socket.window_clamp {
        let _ = tcp::set_window_clamp(stream, clamp);
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
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
) -> (EchoReport, Option<String>) {
    let mut report = EchoReport::default();
    let mut pending: Vec<PendingEcho> = streams
        .iter()
        .map(|s| {
            let _ = s.set_nodelay(true);
            let _ = s.set_write_timeout(Some(POLL_PERIOD));
            PendingEcho {
                message: vec![0u8; spec.size as usize],
                filled: 0,
            }
        })
        .collect();
    let mut open = vec![true; streams.len()];
    let mut error = None;
    match Readiness::new(streams, crate::setup::busy_poll(spec)) {
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
                        Ok(mut h) if h.session() == ctx.session => h.set_echo(clock::realtime_ns()),
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
    use std::net::TcpListener;

    use flowlab_spec::{Direction, Protocol};

    use super::*;

    /// The receiver's clamp is still the test's after data has arrived, which the kernel
    /// alone does not keep (it re-derives the clamp as it measures the received buffers).
    /// The bytes are no messages, so the receiver reads until it finds no boundary.
    #[test]
    fn the_receiver_holds_the_window_clamp_while_data_arrives() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut sender = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (receiver, _) = listener.accept().unwrap();
        let mut spec = TestSpec::new(Protocol::Tcp, Direction::Oneway);
        spec.socket.window_clamp = Some(65_536);
        let _ = crate::configure_tcp(std::slice::from_ref(&receiver), &spec, false);
        sender
            .set_write_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        let writer = std::thread::spawn(move || {
            let _ = sender.write_all(&vec![0u8; 4 << 20]);
        });
        let ctx = RunContext {
            session: 1,
            send_cap_bps: None,
            return_cookie: None,
            packet_key: None,
            schedule_watch: None,
        };
        let streams = [receiver];
        let outcome = tcp_receive(
            &streams,
            &spec,
            &ctx,
            false,
            &AtomicBool::new(false),
            &mut |_| {},
        );
        assert!(outcome.report.malformed > 0, "the receiver read the bytes");
        assert_eq!(tcp::window_clamp(&streams[0]).unwrap(), 65_536);
        drop(streams);
        writer.join().unwrap();
    }
}
