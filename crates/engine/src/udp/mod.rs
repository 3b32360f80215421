//! UDP roles for one or many flows, each flow on its own connected socket (or, for a client's
//! many one-way flows, one shared socket: `shared`): a paced sender
//! (`send`: one thread, a timer heap over the flows, trains sent with UDP GSO or sendmmsg,
//! across flows on a shared socket), a
//! receiver (recvmmsg with kernel timestamps, socket-drop counters and GRO), an echoer, and
//! the loopback client that sends and takes the echoes on one thread (also the client of a
//! one-way load whose every Nth packet is echoed, `--echo-every`).

mod send;
mod shared;

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::AtomicBool;

use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::schedule_book::ScheduleBook;
use flowlab_results::EchoReport;
use flowlab_spec::{DatagramHeader, TestSpec};
use flowlab_sys::poll::wait_readable;
use flowlab_sys::{clock, udp};
use flowlab_wire::iperf2::Iperf2Header;
use flowlab_wire::{ProbeHeader, ProbeRepr};

use crate::packet_auth::PacketAuth;

use crate::readiness::{DatagramSend, DatagramSocket, Readiness};
use crate::{
    stopped, IntervalClock, IntervalSink, ReceiverOutcome, RunContext, SendBudget, SenderOutcome,
    MAX_BATCH,
};
use send::{Sender, Step};

pub use send::udp_send;
pub use shared::{shares_socket, FramePath, SharedFlow, SHARED_SOCKET_FROM_FLOWS};

/// A receiver of this many flows, or of a flow fast enough for GRO, reads every
/// [`COALESCE_PERIOD`] rather than waking per datagram (see `Readiness::coalesced`).
const COALESCE_FROM_SOCKETS: usize = 64;
const COALESCE_PERIOD: std::time::Duration = std::time::Duration::from_micros(200);
/// Largest datagram (or GRO-coalesced train) a receiver accepts.
const MAX_RECEIVE: usize = 65_535;
/// Receive buffers of a max-rate receiver, all its sockets together, unless the user sets
/// them: a GSO sender outruns a receiver descheduled for a few ms (8 MiB, about 10 ms at
/// 9 Mpps of 64 B, lost 0.25 % in one round of three).
const MAX_RATE_RECV_BUFFERS: usize = 32 << 20;
/// The least a max-rate receiving socket gets of that budget.
const MIN_MAX_RATE_RECV_BUFFER: usize = 4 << 20;
/// Above this packet rate a receiver asks the kernel to coalesce (GRO): per-packet timestamps
/// matter less than keeping up.
const GRO_FROM_PACKETS_PER_SEC: f64 = 50_000.0;

/// The client of a UDP loopback test, on one thread: each packet leaves on its schedule and
/// the echoes are taken in between, so no second thread competes with the sender for a core.
/// That is what keeps round trips short on a small machine, above all with busy polling
/// (the agent's echo thread spins on the other core). `sending_done` is raised when the last
/// packet has left; receiving goes on until `stop_receiving`. With `echo_every` the load's
/// live intervals are the agent's: this end reports none.
pub fn udp_ping<S: DatagramSocket>(
    socks: &[S],
    spec: &TestSpec,
    ctx: &RunContext,
    stop_sending: &AtomicBool,
    stop_receiving: &AtomicBool,
    sending_done: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> (SenderOutcome, ReceiverOutcome) {
    prepare_receivers(socks, spec, false);
    let auth = ctx.packet_auth();
    let mut error = socks
        .iter()
        .find_map(|s| s.set_nonblocking(true).err())
        .map(|e| format!("cannot configure a data socket: {e}"));
    let fds: Vec<BorrowedFd<'_>> = socks.iter().map(|s| s.as_fd()).collect();
    let mut meter = ReceiverMeter::new(socks.len(), true, spec.packet_log).omitting(spec.omit_ns);
    let mut batch = udp::RecvBatch::new(MAX_BATCH as usize, MAX_RECEIVE);
    let mut scratch = TrainScratch::default();
    let period = spec.interval_ns.filter(|_| spec.echo_every.is_none());
    let mut intervals = IntervalClock::new(period, clock::monotonic_ns());
    let budget = SendBudget::of(ctx);
    let start = clock::monotonic_ns();
    let (mut sender, mut sending) = match Sender::new(socks, 0, spec, ctx, &budget, start) {
        Ok(mut s) => {
            s.remember_schedule(spec.echo_every.map_or(1, u64::from));
            (Some(s), true)
        }
        Err(e) => {
            error = error.or(Some(e));
            (None, false)
        }
    };
    let mut poll_at = None;
    let busy_poll = crate::setup::busy_poll(spec);
    'test: while !stopped(stop_receiving) {
        for (i, sock) in socks.iter().enumerate() {
            loop {
                match udp::recv_batch(sock, &mut batch) {
                    Ok(0) => break,
                    Ok(n) => (0..n).for_each(|k| {
                        let from = Incoming {
                            session: ctx.session,
                            auth: auth.as_ref(),
                            book: sender.as_ref().and_then(|s| s.book.as_ref()),
                            header: DatagramHeader::Flowlab,
                        };
                        record_datagram(
                            &mut meter,
                            i,
                            &from,
                            batch.payload(k),
                            batch.meta(k),
                            &mut scratch,
                        )
                    }),
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                    Err(e) => {
                        error = Some(format!("receive failed: {e}"));
                        break 'test;
                    }
                }
            }
        }
        while let Some((index, start, end)) = intervals.closed(clock::monotonic_ns()) {
            on_interval(meter.take_interval(index, start, end));
        }
        // After a wait for packets the qdisc holds to their time, the deadline has come.
        let now = clock::monotonic_ns().max(poll_at.take().unwrap_or(0));
        let mut next_send = None;
        if let (true, Some(s)) = (sending, sender.as_mut()) {
            if stopped(stop_sending) {
                s.core.handle_stop();
            }
            match s.step(now) {
                Step::Sent => continue,
                Step::Done => sending = false,
                Step::Idle { until_ns } => next_send = Some(until_ns),
            }
            if !sending {
                sending_done.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        if busy_poll {
            continue;
        }
        let margin = match (next_send, sender.as_mut()) {
            (Some(t), Some(s)) => s.waiter.margin_ns(t),
            _ => 0,
        };
        match (next_send, sender.as_mut()) {
            // Close to a deadline: wait for it as the plan says (echoes keep their kernel
            // stamps meanwhile).
            (Some(t), Some(s)) if t <= now.saturating_add(margin) => {
                let waited = s.waiter.wait(t);
                s.meter.on_pacing_spin(waited.spun_ns);
                poll_at = Some(waited.poll_at_ns);
            }
            (Some(t), _) => {
                let wait = t
                    .saturating_sub(now.saturating_add(margin))
                    .min(crate::POLL_PERIOD.as_nanos() as u64);
                // A failed wait returns at once; the next read reports the error.
                let _ = wait_readable(&fds, std::time::Duration::from_nanos(wait));
            }
            (None, _) => {
                let _ = wait_readable(&fds, crate::POLL_PERIOD);
            }
        }
    }
    sending_done.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some((index, start, end)) = intervals.last(clock::monotonic_ns()) {
        on_interval(meter.take_interval(index, start, end));
    }
    let (mut sent_meter, send_error) = match sender {
        Some(s) => s.finish(),
        None => (
            SenderMeter::new(socks.len(), spec.rate_bps.is_some(), false),
            None,
        ),
    };
    // Echoes of a load: packets 0, N, 2N... of each flow were to come back, the last ones too.
    let echoes_due: Option<Vec<u64>> = spec.echo_every.map(|n| {
        let sent = sent_meter.packets_per_flow();
        sent.iter().map(|&p| p.div_ceil(u64::from(n))).collect()
    });
    count_socket_drops(socks, &mut meter);
    let received = ReceiverOutcome {
        report: meter.report(echoes_due.as_deref()),
        log: meter.take_log(),
        error,
        echo: None,
    };
    let sent = SenderOutcome {
        report: sent_meter.report(),
        log: sent_meter.take_log(),
        error: send_error,
        worker_cpu_ns: (0, 0),
    };
    (sent, received)
}

/// Whether a receiver of this flow should let the kernel coalesce datagrams.
fn wants_gro(spec: &TestSpec) -> bool {
    spec.packets_per_sec()
        .is_none_or(|pps| pps >= GRO_FROM_PACKETS_PER_SEC)
}

/// What [`prepare_receivers`] got from the kernel.
struct Prepared {
    gro: bool,
    /// Every socket stamps arrivals: reading late does not move a measured arrival.
    kernel_stamps: bool,
}

/// Prepares receiving sockets: kernel timestamps, GRO when asked, busy polling when asked.
/// Failures are not fatal: the report then says user-space time.
fn prepare_receivers<S: DatagramSocket>(socks: &[S], spec: &TestSpec, gro: bool) -> Prepared {
    let mut gro_on = gro;
    let mut kernel_stamps = true;
    // At max rate a sender outruns the receiver in bursts: a deep buffer absorbs them
    // (the user's --recv-buffer wins; it was set with the other socket options).
    if spec.rate_bps.is_none() && spec.socket.recv_buffer.is_none() {
        let each = (MAX_RATE_RECV_BUFFERS / socks.len().max(1)).max(MIN_MAX_RATE_RECV_BUFFER);
        for sock in socks {
            let _ = udp::set_buffer_sizes(sock, None, Some(each));
        }
    }
    let busy_poll = crate::setup::busy_poll(spec);
    for sock in socks {
        kernel_stamps &= udp::enable_rx_timestamps(sock).is_ok();
        if gro {
            gro_on &= udp::enable_gro(sock).is_ok();
        }
        if busy_poll {
            let _ = flowlab_sys::socket::set_busy_poll(sock, crate::BUSY_POLL_US);
        }
    }
    Prepared {
        gro: gro_on,
        kernel_stamps,
    }
}

/// Receives every flow (one socket each) until `stop`. With `round_trip`, packets are echoes
/// coming back to the client of a loopback test.
pub fn udp_receive<S: DatagramSocket>(
    socks: &[S],
    spec: &TestSpec,
    ctx: &RunContext,
    round_trip: bool,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> ReceiverOutcome {
    // A slow reader takes one datagram at a time, never coalesced.
    let read_rate = spec.socket.read_rate_bps.filter(|&r| r > 0);
    let prepared = prepare_receivers(socks, spec, read_rate.is_none() && wants_gro(spec));
    let auth = ctx.packet_auth();
    let from = Incoming {
        session: ctx.session,
        auth: auth.as_ref(),
        book: None,
        header: spec
            .multicast
            .as_ref()
            .map_or(DatagramHeader::Flowlab, |m| m.header),
    };
    let mut echoer = spec.echo_every.map(|n| Echoer::new(ctx, u64::from(n)));
    let mut meter =
        ReceiverMeter::new(socks.len(), round_trip, spec.packet_log).omitting(spec.omit_ns);
    let batch_size = if read_rate.is_some() {
        1
    } else {
        MAX_BATCH as usize
    };
    let mut batch = udp::RecvBatch::new(batch_size, MAX_RECEIVE);
    let mut intervals = IntervalClock::new(spec.interval_ns, clock::monotonic_ns());
    let mut next_read_ns = 0u64;
    let mut scratch = TrainScratch::default();
    let mut error = None;
    // An echo must not wait for a timer: it would add up to the period to its round trip.
    let coalesce = !crate::setup::busy_poll(spec)
        && echoer.is_none()
        && read_rate.is_none()
        && prepared.kernel_stamps
        && (socks.len() >= COALESCE_FROM_SOCKETS || wants_gro(spec));
    let ready = if coalesce {
        Readiness::coalesced(socks, COALESCE_PERIOD)
    } else {
        Readiness::new(socks, crate::setup::busy_poll(spec))
    };
    match ready {
        Err(e) => error = Some(format!("cannot watch the data sockets: {e}")),
        Ok(mut ready) => {
            while !stopped(stop) {
                let result = ready.each_ready(|i| {
                    if let Some(rate) = read_rate {
                        slow_reader_wait(&mut next_read_ns, stop);
                        let n = udp::recv_batch(&socks[i], &mut batch)?;
                        if n > 0 {
                            let meta = batch.meta(0);
                            let bits = meta.len as u64 * 8;
                            next_read_ns = next_read_ns.max(clock::monotonic_ns())
                                + bits * 1_000_000_000 / rate;
                            // The delay a slow application sees ends when it reads, not when
                            // the kernel queued the datagram.
                            let read_now = udp::RecvMeta {
                                kernel_rx_ns: None,
                                ..meta
                            };
                            record_datagram(
                                &mut meter,
                                i,
                                &from,
                                batch.payload(0),
                                read_now,
                                &mut scratch,
                            );
                            if let Some(echoer) = &mut echoer {
                                echoer.take(batch.payload(0), &read_now);
                                echoer.send(&socks[i]);
                            }
                        }
                        return Ok(n);
                    }
                    let n = udp::recv_batch(&socks[i], &mut batch)?;
                    for k in 0..n {
                        record_datagram(
                            &mut meter,
                            i,
                            &from,
                            batch.payload(k),
                            batch.meta(k),
                            &mut scratch,
                        );
                        if let Some(echoer) = &mut echoer {
                            echoer.take(batch.payload(k), &batch.meta(k));
                        }
                    }
                    if let Some(echoer) = &mut echoer {
                        echoer.send(&socks[i]);
                    }
                    Ok(n)
                });
                if let Err(e) = result {
                    error = Some(format!("receive failed: {e}"));
                    break;
                }
                while let Some((index, start, end)) = intervals.closed(clock::monotonic_ns()) {
                    on_interval(meter.take_interval(index, start, end));
                }
            }
        }
    }
    if let Some((index, start, end)) = intervals.last(clock::monotonic_ns()) {
        on_interval(meter.take_interval(index, start, end));
    }
    count_socket_drops(socks, &mut meter);
    let mut report = meter.report(None);
    report.gro = prepared.gro;
    ReceiverOutcome {
        report,
        log: meter.take_log(),
        error,
        echo: echoer.map(|e| e.report),
    }
}

/// Each socket's receive-buffer drops over the test, read at its end (0 when none; unknown
/// where the kernel does not tell).
fn count_socket_drops<S: DatagramSocket>(socks: &[S], meter: &mut ReceiverMeter) {
    for (i, sock) in socks.iter().enumerate() {
        if let Ok(drops) = udp::socket_drops(sock) {
            meter.set_socket_drops(i, drops);
        }
    }
}

/// Sleeps until a slow reader may read again (no spin: its timing is coarse by design).
fn slow_reader_wait(next_read_ns: &mut u64, stop: &AtomicBool) {
    loop {
        let now = clock::monotonic_ns();
        if now >= *next_read_ns || stopped(stop) {
            return;
        }
        let wait = (*next_read_ns - now).min(crate::POLL_PERIOD.as_nanos() as u64);
        std::thread::sleep(std::time::Duration::from_nanos(wait));
    }
}

/// Splits a received buffer into its datagrams: one, or several when GRO coalesced a train.
fn datagrams<'a>(payload: &'a [u8], meta: &udp::RecvMeta) -> impl Iterator<Item = &'a [u8]> {
    let segment = meta.gro_segment.map_or(payload.len(), usize::from).max(1);
    payload.chunks(segment)
}

/// Reusable scratch for grouping the datagrams of a coalesced buffer into trains.
#[derive(Default)]
struct TrainScratch {
    seqs: Vec<u64>,
}

/// What a receiver knows of the datagrams it takes.
#[derive(Clone, Copy)]
struct Incoming<'a> {
    session: u32,
    /// Authenticated test packets: the tag each must carry.
    auth: Option<&'a PacketAuth>,
    /// Echoes back at the sender: when their packets were due, and which packets come back.
    book: Option<&'a ScheduleBook>,
    /// Whose header the datagrams carry (iperf2's has no session).
    header: DatagramHeader,
}

fn record_datagram(
    meter: &mut ReceiverMeter,
    flow_index: usize,
    from: &Incoming<'_>,
    payload: &[u8],
    meta: udp::RecvMeta,
    scratch: &mut TrainScratch,
) {
    let book = from.book;
    // Echoes come back to a loopback client; anything else goes one way. On a shared medium
    // (native frames on `lo`) an end also sees the other direction's frames: not ours.
    let expect_echo = meter.expects_echoes();
    if meta.truncated {
        return meter.on_malformed();
    }
    let (arrival_ns, kernel_stamp) = match meta.kernel_rx_ns {
        Some(ns) => (ns, true),
        None => (clock::realtime_ns(), false),
    };
    // Consecutive datagrams with the same send stamp and size (one GSO train, coalesced by
    // GRO) share every figure but their sequence numbers: account them as one train.
    let mut train: Option<Arrived> = None;
    scratch.seqs.clear();
    for datagram in datagrams(payload, &meta) {
        let (seq, sent_ns, echoed_ns) = match read_datagram(datagram, from, expect_echo) {
            Read::Packet {
                seq,
                sent_ns,
                echoed_ns,
            } => (seq, sent_ns, echoed_ns),
            Read::NotOurs => continue,
            Read::SenderDone { packets } => {
                meter.set_announced_sent(flow_index, packets);
                continue;
            }
            Read::Malformed => {
                meter.on_malformed();
                continue;
            }
        };
        let arrived = Arrived {
            seq,
            size: datagram.len() as u32,
            sent_ns,
            echoed_ns,
            arrival_ns,
            kernel_stamp,
        };
        // An echo at its sender: timed from its departure and from its schedule, counted in
        // the echoes' own sequence space (one datagram each: echo receivers take no GRO).
        if let Some(book) = book.filter(|_| expect_echo) {
            match book.echo_seq(seq) {
                Some(echo_seq) => meter.on_echo(
                    flow_index,
                    Arrived {
                        seq: echo_seq,
                        ..arrived
                    },
                    book.scheduled(flow_index, seq),
                ),
                None => meter.on_malformed(),
            }
            continue;
        }
        match train {
            Some(t)
                if Arrived {
                    seq: t.seq,
                    ..arrived
                } == t => {}
            Some(t) => {
                meter.on_train(flow_index, t, &scratch.seqs);
                scratch.seqs.clear();
                train = Some(arrived);
            }
            None => train = Some(arrived),
        }
        scratch.seqs.push(seq);
    }
    if let Some(t) = train {
        meter.on_train(flow_index, t, &scratch.seqs);
    }
}

/// What a datagram says of itself.
enum Read {
    Packet {
        seq: u64,
        sent_ns: u64,
        echoed_ns: Option<u64>,
    },
    /// Another test's packet, or the other direction's.
    NotOurs,
    /// iperf2's final datagram: how many packets its sender sent.
    SenderDone {
        packets: u64,
    },
    Malformed,
}

fn read_datagram(datagram: &[u8], from: &Incoming<'_>, expect_echo: bool) -> Read {
    if from.header == DatagramHeader::Iperf2 {
        // iperf2 numbers from 1 (flowlab from 0); its final datagram's id is the next, negated.
        return match Iperf2Header::parse(datagram) {
            Some(h) if h.id > 0 => Read::Packet {
                seq: h.id as u64 - 1,
                sent_ns: h.sent_ns(),
                echoed_ns: None,
            },
            Some(h) if h.is_fin() => Read::SenderDone {
                packets: h.id.unsigned_abs() - 1,
            },
            Some(_) => Read::NotOurs,
            None => Read::Malformed,
        };
    }
    match ProbeRepr::parse(datagram) {
        // Forged or altered: not a packet of this test.
        Ok(p) if p.session == from.session && from.auth.is_some_and(|a| !a.verify(datagram)) => {
            Read::Malformed
        }
        Ok(p) if p.session == from.session && p.is_echo() == expect_echo => Read::Packet {
            seq: p.seq,
            sent_ns: p.sent_ns,
            echoed_ns: p.is_echo().then_some(p.echoed_ns),
        },
        Ok(p) if p.session == from.session => Read::NotOurs,
        _ => Read::Malformed,
    }
}

/// Echoes every probe of this session back on the socket it came in on (each connected to
/// the client), stamped with its arrival time, until `stop`.
pub fn udp_echo<S: DatagramSocket>(
    socks: &[S],
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
) -> (EchoReport, Option<String>) {
    prepare_receivers(socks, spec, false);
    let mut echoer = Echoer::new(ctx, 1);
    let mut batch = udp::RecvBatch::new(MAX_BATCH as usize, MAX_RECEIVE);
    let mut error = None;
    match Readiness::new(socks, crate::setup::busy_poll(spec)) {
        Err(e) => error = Some(format!("cannot watch the data sockets: {e}")),
        Ok(mut ready) => {
            while !stopped(stop) {
                let result = ready.each_ready(|i| {
                    let n = udp::recv_batch(&socks[i], &mut batch)?;
                    for k in 0..n {
                        let meta = batch.meta(k);
                        echoer.take(batch.payload(k), &meta);
                    }
                    echoer.send(&socks[i]);
                    Ok(n)
                });
                if let Err(e) = result {
                    error = Some(format!("receive failed: {e}"));
                    break;
                }
            }
        }
    }
    let mut report = echoer.report;
    let drops: io::Result<Vec<u64>> = socks.iter().map(udp::socket_drops).collect();
    report.socket_buffer_drops = drops.ok().map(|d| d.iter().sum());
    (report, error)
}

/// The one echo of test packets: the agent of a loopback test echoes every probe, the
/// receiver of a load with `--echo-every N` every probe whose sequence number N divides.
/// Echoes leave on the socket the probe came in on, connected to the client: an echo goes
/// only to the peer that asked.
struct Echoer {
    session: u32,
    auth: Option<PacketAuth>,
    every: u64,
    /// Echoes of the last read, waiting to be sent.
    out: Vec<Vec<u8>>,
    report: EchoReport,
}

impl Echoer {
    fn new(ctx: &RunContext, every: u64) -> Echoer {
        Echoer {
            session: ctx.session,
            auth: ctx.packet_auth(),
            every: every.max(1),
            out: Vec::with_capacity(MAX_BATCH as usize),
            report: EchoReport::default(),
        }
    }

    /// Queues the echoes of one received buffer (a datagram, or a GRO train of them), each
    /// stamped with the buffer's arrival.
    fn take(&mut self, payload: &[u8], meta: &udp::RecvMeta) {
        for datagram in datagrams(payload, meta) {
            // Forged or altered packets are not echoed (nor is the echo sealed).
            let genuine = self.auth.as_ref().is_none_or(|a| a.verify(datagram));
            match ProbeHeader::new_checked(datagram) {
                // An echo seen again (native frames on a shared medium) is not echoed twice.
                Ok(h) if h.flags() & flowlab_wire::probe::FLAG_ECHO != 0 => {}
                Ok(h) if h.session() == self.session && !meta.truncated && genuine => {
                    if h.seq().is_multiple_of(self.every) {
                        self.out.push(self.echo(datagram, meta));
                    }
                }
                _ => self.report.malformed += 1,
            }
        }
    }

    fn echo(&self, datagram: &[u8], meta: &udp::RecvMeta) -> Vec<u8> {
        let mut packet = datagram.to_vec();
        if let Ok(mut h) = ProbeHeader::new_checked(&mut packet[..]) {
            h.set_echo(meta.kernel_rx_ns.unwrap_or_else(clock::realtime_ns));
        }
        if let Some(auth) = &self.auth {
            auth.seal(&mut packet);
        }
        packet
    }

    /// Sends the queued echoes on `sock`.
    fn send<S: DatagramSend>(&mut self, sock: &S) {
        let slices: Vec<&[u8]> = self.out.iter().map(Vec::as_slice).collect();
        let mut done = 0;
        while done < slices.len() {
            match sock.send_frames(&slices[done..], false) {
                Ok(k) => {
                    self.report.packets_echoed += k as u64;
                    self.report.bytes_echoed += slices[done..done + k]
                        .iter()
                        .map(|s| s.len() as u64)
                        .sum::<u64>();
                    done += k;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The echo path is lossy like any other: a refused echo is lost.
                Err(_) => break,
            }
        }
        self.out.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(session: u32, seq: u64, flags: u8) -> Vec<u8> {
        let mut packet = vec![0u8; 100];
        let header = ProbeRepr {
            flags,
            session,
            seq,
            sent_ns: 1_000 + seq,
            echoed_ns: 0,
        };
        assert!(header.emit(&mut packet));
        packet
    }

    /// A receiver of iperf2's datagrams: ids from 1 are packets from 0, stamped with their
    /// send time; the final datagram (the next id, negated) tells the count sent; id 0 is
    /// no packet.
    #[test]
    fn iperf2_datagrams_read_by_their_own_header() {
        let from = Incoming {
            session: 7,
            auth: None,
            book: None,
            header: DatagramHeader::Iperf2,
        };
        let mut datagram = vec![0u8; 100];
        Iperf2Header::at(3, 5_000_001_000).emit(&mut datagram);
        assert!(matches!(
            read_datagram(&datagram, &from, false),
            Read::Packet {
                seq: 2,
                sent_ns: 5_000_001_000,
                echoed_ns: None
            }
        ));
        Iperf2Header::at(-4, 0).emit(&mut datagram);
        assert!(matches!(
            read_datagram(&datagram, &from, false),
            Read::SenderDone { packets: 3 }
        ));
        Iperf2Header::at(0, 0).emit(&mut datagram);
        assert!(matches!(
            read_datagram(&datagram, &from, false),
            Read::NotOurs
        ));
        assert!(matches!(
            read_datagram(&datagram[..15], &from, false),
            Read::Malformed
        ));
        let flowlab = Incoming {
            header: DatagramHeader::Flowlab,
            ..from
        };
        assert!(matches!(
            read_datagram(&probe(7, 3, 0), &flowlab, false),
            Read::Packet { seq: 3, .. }
        ));
    }

    /// `--echo-every 10`: of a load's packets, 0, 10 and 20 come back marked and stamped;
    /// another session's packet is malformed, an echo is never echoed again.
    #[test]
    fn the_echoer_returns_every_nth_probe_of_its_session() {
        let ctx = RunContext {
            session: 7,
            ..RunContext::default()
        };
        let mut echoer = Echoer::new(&ctx, 10);
        let meta = udp::RecvMeta {
            kernel_rx_ns: Some(55_000),
            ..udp::RecvMeta::default()
        };
        for seq in 0..25 {
            echoer.take(&probe(7, seq, 0), &meta);
        }
        echoer.take(&probe(8, 30, 0), &meta);
        echoer.take(&probe(7, 40, flowlab_wire::probe::FLAG_ECHO), &meta);
        let echoes: Vec<ProbeRepr> = echoer
            .out
            .iter()
            .map(|p| ProbeRepr::parse(p).unwrap())
            .collect();
        assert_eq!(
            echoes.iter().map(|p| p.seq).collect::<Vec<_>>(),
            [0, 10, 20]
        );
        assert!(echoes.iter().all(|p| p.is_echo() && p.echoed_ns == 55_000));
        assert_eq!(
            echoes[1].sent_ns, 1_010,
            "the send stamp goes back unchanged"
        );
        assert_eq!(echoer.report.malformed, 1);
    }
}
