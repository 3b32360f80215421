//! UDP roles for one or many flows, each flow on its own connected socket: a paced sender
//! (one thread, a timer heap over the flows, trains sent with UDP GSO or sendmmsg), a receiver
//! (recvmmsg with kernel timestamps, socket-drop counters and GRO) and an echoer.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::AtomicBool;

use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::EchoReport;
use flowlab_sys::poll::wait_readable;
use flowlab_sys::{clock, udp};
use flowlab_traffic::Action;
use flowlab_wire::{ProbeHeader, ProbeRepr, PROBE_HEADER_LEN};

use crate::readiness::{DatagramSocket, Readiness};
use crate::{
    fill_payload, merge_flows, on_flow_threads, stopped, wait_until, FlowParams, IntervalClock,
    IntervalSink, ReceiverOutcome, SendBudget, SenderOutcome, ACK_PERIOD, ACK_TIMEOUT_NS,
    MAX_BATCH,
};

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
/// Largest UDP payload of one GSO send (IPv4 limit).
const MAX_GSO_BYTES: usize = 65_507;
/// Above this packet rate a receiver asks the kernel to coalesce (GRO): per-packet timestamps
/// matter less than keeping up.
const GRO_FROM_PACKETS_PER_SEC: f64 = 50_000.0;

/// Packets of one train, each in a slot of `stride` bytes: GSO sends uniform trains as one
/// buffer, sendmmsg sends each packet's `len` bytes.
struct Train {
    stride: usize,
    lens: Vec<usize>,
    bytes: Vec<u8>,
}

impl Train {
    fn new(stride: usize, max_packets: usize) -> Self {
        let mut bytes = vec![0u8; stride * max_packets];
        for packet in bytes.chunks_mut(stride) {
            fill_payload(packet);
        }
        Train {
            stride,
            lens: vec![stride; max_packets],
            bytes,
        }
    }

    /// Stamps the first `count` packets; `len(i)` is packet `i`'s size, at most the stride.
    fn stamp(
        &mut self,
        count: usize,
        session: u32,
        first_seq: u64,
        sent_ns: u64,
        len: impl Fn(usize) -> usize,
    ) {
        for (i, packet) in self.bytes.chunks_mut(self.stride).take(count).enumerate() {
            self.lens[i] = len(i).clamp(PROBE_HEADER_LEN, self.stride);
            ProbeRepr {
                flags: 0,
                session,
                seq: first_seq + i as u64,
                sent_ns,
                echoed_ns: 0,
            }
            .emit(packet);
        }
    }

    fn len(&self, i: usize) -> usize {
        self.lens[i]
    }

    /// Hands the first `count` packets to the kernel one by one, each to leave at
    /// `txtime(i)`; returns how many it took.
    fn send_timed<S: DatagramSocket>(
        &self,
        sock: &S,
        count: usize,
        txtime: impl Fn(usize) -> u64,
    ) -> io::Result<usize> {
        for (i, slot) in self.bytes.chunks(self.stride).take(count).enumerate() {
            if let Err(e) = sock.send_at(&slot[..self.lens[i]], txtime(i), true) {
                return if i == 0 { Err(e) } else { Ok(i) };
            }
        }
        Ok(count)
    }

    /// Hands the first `count` packets to the kernel; returns how many it took. `wait`:
    /// block for buffer space (max rate) or not (paced: a full buffer is a loss).
    fn send<S: DatagramSocket>(
        &self,
        sock: &S,
        count: usize,
        gso: bool,
        wait: bool,
    ) -> io::Result<usize> {
        let uniform = self.lens[..count].iter().all(|&l| l == self.stride);
        if gso && uniform && count > 1 {
            let buf = &self.bytes[..self.stride * count];
            sock.send_segments(buf, self.stride as u16, !wait)
                .map(|_| count)
        } else {
            let slices: Vec<&[u8]> = self
                .bytes
                .chunks(self.stride)
                .zip(&self.lens)
                .take(count)
                .map(|(slot, &len)| &slot[..len])
                .collect();
            sock.send_frames(&slices, !wait)
        }
    }
}

/// Kernel transmit timestamps, matched to the packets they stamp by the per-socket counter
/// (SOF_TIMESTAMPING_OPT_ID counts datagrams from 0 in send order).
struct Departures {
    /// Per flow: (counter, scheduled time) of packets sent and not yet stamped.
    pending: Vec<VecDeque<(u32, u64)>>,
    next_id: Vec<u32>,
    stamps: Vec<flowlab_sys::timestamping::TxStamp>,
}

/// Stamps that never come (a kernel without them) must not grow memory without bound.
const MAX_PENDING_STAMPS: usize = 1 << 16;

impl Departures {
    fn new(flows: usize) -> Self {
        Departures {
            pending: vec![VecDeque::new(); flows],
            next_id: vec![0; flows],
            stamps: Vec::new(),
        }
    }

    fn on_sent(&mut self, flow: usize, deadline_ns: u64) {
        let pending = &mut self.pending[flow];
        if pending.len() == MAX_PENDING_STAMPS {
            pending.pop_front();
        }
        pending.push_back((self.next_id[flow], deadline_ns));
        self.next_id[flow] = self.next_id[flow].wrapping_add(1);
    }

    /// Reads the flow's queued stamps and records each packet's departure error.
    fn collect(
        &mut self,
        sock: &impl AsFd,
        flow: usize,
        realtime_offset: i64,
        meter: &mut SenderMeter,
    ) {
        self.stamps.clear();
        if flowlab_sys::timestamping::read_tx_timestamps(sock, &mut self.stamps).is_err() {
            return;
        }
        let pending = &mut self.pending[flow];
        for stamp in &self.stamps {
            let Some(departed) = stamp
                .software_ns
                .map(|ns| ns.saturating_add_signed(-realtime_offset))
            else {
                continue;
            };
            // Packets before this stamp's counter got none (dropped stamps): skip them.
            while let Some(&(id, deadline)) = pending.front() {
                let behind = stamp.id.wrapping_sub(id) as i32;
                if behind < 0 {
                    break;
                }
                pending.pop_front();
                if behind == 0 {
                    meter.on_departure(deadline, departed, stamp.hardware_ns.is_some());
                    break;
                }
            }
        }
    }
}

/// Sends every flow (one socket each) from this thread. Paced flows never wait in the
/// kernel: a full send buffer is a packet lost by the sender, as the user asked for that rate.
/// At max rate sends wait for buffer space, so the sender goes as fast as the path takes
/// packets. The sockets' blocking mode is left alone (a loopback receiver shares them).
///
/// Many flows are shared among event loops, one per core (the calling thread runs the first):
/// one loop would queue packets behind each other once sends fill its core.
pub fn udp_send<S: DatagramSocket>(
    socks: &[S],
    flow: &FlowParams,
    stop: &AtomicBool,
) -> SenderOutcome {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A loop with dense deadlines spins its core; one core stays for the receiver and the
    // kernel's softirq work, which on a small machine share it with the sender.
    let loops = (socks.len() / FLOWS_PER_LOOP).clamp(1, cores.saturating_sub(1).max(1));
    let share = socks.len().div_ceil(loops).max(1);
    let budget = SendBudget::of(flow);
    let (per_loop, worker_cpu_ns) = on_flow_threads(loops, |n| {
        let chunk = socks.chunks(share).nth(n).unwrap_or(&[]);
        send_loop(chunk, n * share, flow, &budget, stop)
    });
    let (meter, mut error) = merge_flows(per_loop, SenderMeter::absorb);
    let mut meter =
        meter.unwrap_or_else(|| SenderMeter::new(socks.len(), flow.rate_bps.is_some(), false));
    if socks.is_empty() {
        error = error.or(Some("no data socket".into()));
    }
    SenderOutcome {
        report: meter.report(),
        log: meter.take_log(),
        error,
        worker_cpu_ns,
    }
}

/// Below this many flows per core one event loop keeps up.
const FLOWS_PER_LOOP: usize = 128;

/// One event loop: sends `socks`' flows, returns its meter (flows numbered from 0).
fn send_loop<S: DatagramSocket>(
    socks: &[S],
    first_flow: usize,
    flow: &FlowParams,
    budget: &SendBudget,
    stop: &AtomicBool,
) -> (SenderMeter, Option<String>) {
    let mut sender = match Sender::new(socks, first_flow, flow, budget) {
        Ok(s) => s,
        Err(e) => {
            return (
                SenderMeter::new(socks.len(), flow.rate_bps.is_some(), false),
                Some(e),
            )
        }
    };
    while !stopped(stop) {
        match sender.step(clock::monotonic_ns()) {
            Step::Sent => {}
            Step::Idle { until_ns } => {
                let spun = wait_until(until_ns);
                sender.meter.on_pacing_spin(spun);
            }
            Step::Done => break,
        }
    }
    sender.finish()
}

/// What a sender did in one step.
enum Step {
    /// Sent a train (or skipped slots); call again at once.
    Sent,
    /// Nothing is due before `until_ns`.
    Idle { until_ns: u64 },
    /// Every flow is over, or sending failed.
    Done,
}

/// The sending half of an event loop: a timer heap over its flows' pacers. Driven by
/// [`send_loop`] alone, or interleaved with receiving by [`udp_ping`].
struct Sender<'a, S> {
    socks: &'a [S],
    flow: &'a FlowParams,
    budget: &'a SendBudget,
    meter: SenderMeter,
    error: Option<String>,
    paced: bool,
    size: usize,
    stamping: bool,
    departures: Departures,
    /// Each datagram carries its scheduled time for the fq qdisc (`--kernel-pacing`).
    kernel_timed: bool,
    gso: bool,
    train: Train,
    realtime_offset: i64,
    pacers: Vec<flowlab_traffic::Pacer>,
    seqs: Vec<u64>,
    due: BinaryHeap<Reverse<(u64, usize)>>,
    acks: Option<AckWatch>,
}

/// A reverse sender's view of its client's acknowledgements (see `flowlab_wire::ack`).
struct AckWatch {
    cookie: u64,
    /// When each flow's socket last heard the cookie (monotonic ns).
    heard_ns: Vec<Option<u64>>,
    next_read_ns: u64,
}

impl AckWatch {
    fn new(cookie: u64, flows: usize) -> AckWatch {
        AckWatch {
            cookie,
            heard_ns: vec![None; flows],
            next_read_ns: 0,
        }
    }

    /// Reads what acknowledgements wait on every socket, at most every [`ACK_PERIOD`].
    fn read<S: DatagramSocket>(&mut self, socks: &[S], now: u64) {
        if now < self.next_read_ns {
            return;
        }
        self.next_read_ns = now + ACK_PERIOD.as_nanos() as u64;
        let mut buf = [0u8; 64];
        for (sock, heard) in socks.iter().zip(&mut self.heard_ns) {
            while let Ok(n) = sock.recv_nowait(&mut buf) {
                if flowlab_wire::ack::is_ack(&buf[..n], self.cookie) {
                    *heard = Some(now);
                }
            }
        }
    }

    /// Why flow `i` may not send at `now`, if it may not.
    fn refusal(&self, i: usize, now: u64) -> Option<String> {
        match self.heard_ns[i] {
            None => Some(format!(
                "flow {i}: the client's data port never acknowledged: nothing sent to it"
            )),
            Some(t) if now.saturating_sub(t) > ACK_TIMEOUT_NS => Some(format!(
                "flow {i}: the client stopped acknowledging for {:.1} s: stopped sending",
                ACK_TIMEOUT_NS as f64 / 1e9
            )),
            Some(_) => None,
        }
    }
}

impl<'a, S: DatagramSocket> Sender<'a, S> {
    fn new(
        socks: &'a [S],
        first_flow: usize,
        flow: &'a FlowParams,
        budget: &'a SendBudget,
    ) -> Result<Self, String> {
        let paced = flow.rate_bps.is_some();
        let mut meter = SenderMeter::new(socks.len(), paced, flow.packet_log);
        let size = flow.size as usize;
        // A GSO train is one IP datagram of segments; each segment must also fit the path
        // MTU, which only the first send tells (EINVAL): then the sender falls back to
        // sendmmsg. Transmit stamps are matched one per datagram, so they rule out GSO trains.
        let stamping = flow.socket.tx_timestamps && paced;
        let kernel_timed = paced && socks.first().is_some_and(DatagramSocket::kernel_timed);
        let gso = !stamping
            && !kernel_timed
            && !flow.modelled()
            && size * 2 <= MAX_GSO_BYTES
            && socks.first().is_some_and(DatagramSocket::gso_supported);
        // A traffic model picks each packet's size: slots must hold the largest datagram.
        let stride = if flow.modelled() { MAX_GSO_BYTES } else { size };
        let max_train = if gso {
            (MAX_GSO_BYTES / size).min(MAX_BATCH as usize)
        } else {
            MAX_BATCH as usize
        };
        let start = clock::monotonic_ns();
        // Flows start spread over one packet interval, so they do not all leave in lockstep.
        let stagger = flow
            .interval_ns()
            .map_or(0, |i| i / socks.len().max(1) as u64);
        let pacers: Result<Vec<_>, String> = (0..socks.len())
            .map(|i| flow.pacer_for(first_flow + i, start + stagger * i as u64, max_train as u64))
            .collect();
        let pacers = match pacers {
            Ok(p) => p,
            Err(e) => return Err(format!("traffic model: {e}")),
        };
        for (i, pacer) in pacers.iter().enumerate() {
            if let Some(contract) = pacer.contract() {
                meter.hold_to_contract(i, contract);
            }
        }
        Ok(Sender {
            socks,
            flow,
            budget,
            meter,
            error: None,
            paced,
            size,
            stamping,
            departures: Departures::new(socks.len()),
            kernel_timed,
            gso,
            train: Train::new(stride, max_train),
            realtime_offset: clock::realtime_minus_monotonic_ns(),
            pacers,
            seqs: vec![0; socks.len()],
            due: (0..socks.len())
                .map(|i| Reverse((start + stagger * i as u64, i)))
                .collect(),
            acks: flow
                .return_cookie
                .map(|cookie| AckWatch::new(cookie, socks.len())),
        })
    }

    /// Sends what is due at `now` (on the monotonic clock), or says when something will be.
    fn step(&mut self, now: u64) -> Step {
        let Some(&Reverse((next, i))) = self.due.peek() else {
            return Step::Done;
        };
        if self.error.is_some() {
            return Step::Done;
        }
        if let Some(acks) = &mut self.acks {
            acks.read(self.socks, now);
            if let Some(why) = acks.refusal(i, now) {
                self.error = Some(why);
                return Step::Done;
            }
        }
        if next > now {
            return Step::Idle { until_ns: next };
        }
        self.due.pop();
        let (first, count) = match self.pacers[i].poll(now) {
            Action::Done => return Step::Sent,
            Action::Wait { until_ns } => {
                self.due.push(Reverse((until_ns, i)));
                return Step::Sent;
            }
            Action::Send { first, count } => (first, count as usize),
        };
        let (pacer, size) = (&self.pacers[i], self.size);
        let size_of = |k: usize| pacer.size(first + k as u64).unwrap_or(size as u32);
        let count = match self.budget.admit(now, count, size_of) {
            Ok(n) => n,
            Err(until_ns) => {
                self.due.push(Reverse((until_ns, i)));
                return Step::Sent;
            }
        };
        let now_mono = clock::monotonic_ns();
        let sent_ns = now_mono.saturating_add_signed(self.realtime_offset);
        self.train
            .stamp(count, self.flow.session, self.seqs[i], sent_ns, |k| {
                pacer.size(first + k as u64).map_or(size, |s| s as usize)
            });
        let sock = &self.socks[i];
        let mut sent = if self.kernel_timed {
            let pacer = &self.pacers[i];
            self.train.send_timed(sock, count, |k| {
                pacer.deadline(first + k as u64).unwrap_or(now_mono)
            })
        } else {
            self.train.send(sock, count, self.gso, !self.paced)
        };
        if self.gso
            && sent
                .as_ref()
                .is_err_and(|e| e.kind() == io::ErrorKind::InvalidInput)
        {
            self.gso = false;
            sent = self.train.send(sock, count, false, !self.paced);
        }
        let taken = match sent {
            Ok(n) => n,
            Err(e) if udp::is_send_buffer_full(&e) => 0,
            // An ICMP port unreachable for an earlier packet: the peer socket is gone. The
            // control connection decides the end; these packets are send errors.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused && self.acks.is_some() => {
                self.meter.on_send_error(i, count as u64);
                self.error = Some(format!(
                    "flow {i}: the client's port is unreachable (ICMP): stopped sending"
                ));
                return Step::Done;
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.meter.on_send_error(i, count as u64);
                self.pacers[i].advance(count as u64);
                self.due.push(Reverse((now, i)));
                return Step::Sent;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => {
                self.meter.on_send_error(i, count as u64);
                self.error = Some(format!("send failed: {e}"));
                return Step::Done;
            }
        };
        if taken > 0 {
            self.meter.on_batch(taken as u64);
        }
        for k in 0..taken {
            let deadline = self.pacers[i].deadline(first + k as u64);
            let len = self.train.len(k) as u32;
            self.meter
                .on_sent(i, self.seqs[i], len, sent_ns, deadline, now_mono);
            if let (true, Some(deadline)) = (self.stamping, deadline) {
                self.departures.on_sent(i, deadline);
            }
            self.seqs[i] += 1;
        }
        if self.stamping {
            self.departures
                .collect(sock, i, self.realtime_offset, &mut self.meter);
        }
        if self.paced {
            // What the kernel refused stays refused: resending later would break the schedule.
            self.meter.on_send_buffer_full(i, (count - taken) as u64);
            self.pacers[i].advance(count as u64);
        } else {
            self.pacers[i].advance(taken as u64);
        }
        self.due.push(Reverse((now, i)));
        Step::Sent
    }

    fn finish(mut self) -> (SenderMeter, Option<String>) {
        for (i, pacer) in self.pacers.iter().enumerate() {
            self.meter.set_missed_slots(i, pacer.missed_slots());
            if let Some(report) = pacer.contract_report() {
                self.meter.set_shaper_report(i, report);
            }
        }
        if self.stamping {
            // The last packets' stamps arrive just after they leave.
            std::thread::sleep(std::time::Duration::from_millis(2));
            for (i, sock) in self.socks.iter().enumerate() {
                self.departures
                    .collect(sock, i, self.realtime_offset, &mut self.meter);
            }
        }
        let gso = self.gso && self.meter.packets_sent() > 0;
        self.meter.set_gso(gso);
        (self.meter, self.error)
    }
}

/// The client of a UDP loopback test, on one thread: each packet leaves on its schedule and
/// the echoes are taken in between, so no second thread competes with the sender for a core.
/// That is what keeps round trips short on a small machine, above all with busy polling
/// (the agent's echo thread spins on the other core). `sending_done` is raised when the last
/// packet has left; receiving goes on until `stop_receiving`.
pub fn udp_ping<S: DatagramSocket>(
    socks: &[S],
    flow: &FlowParams,
    stop_sending: &AtomicBool,
    stop_receiving: &AtomicBool,
    sending_done: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> (SenderOutcome, ReceiverOutcome) {
    prepare_receivers(socks, flow, false);
    let mut error = socks
        .iter()
        .find_map(|s| s.set_nonblocking(true).err())
        .map(|e| format!("cannot configure a data socket: {e}"));
    let fds: Vec<BorrowedFd<'_>> = socks.iter().map(|s| s.as_fd()).collect();
    let mut meter = ReceiverMeter::new(socks.len(), true, flow.packet_log);
    let mut batch = udp::RecvBatch::new(MAX_BATCH as usize, MAX_RECEIVE);
    let mut scratch = TrainScratch::default();
    let mut intervals = IntervalClock::new(flow.interval, clock::monotonic_ns());
    let budget = SendBudget::of(flow);
    let (mut sender, mut sending) = match Sender::new(socks, 0, flow, &budget) {
        Ok(s) => (Some(s), true),
        Err(e) => {
            error = error.or(Some(e));
            (None, false)
        }
    };
    'test: while !stopped(stop_receiving) {
        for (i, sock) in socks.iter().enumerate() {
            loop {
                match udp::recv_batch(sock, &mut batch) {
                    Ok(0) => break,
                    Ok(n) => (0..n).for_each(|k| {
                        record_datagram(
                            &mut meter,
                            i,
                            flow.session,
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
        let now = clock::monotonic_ns();
        let mut next_send = None;
        if let (true, Some(s)) = (sending, sender.as_mut()) {
            match s.step(now) {
                _ if stopped(stop_sending) => sending = false,
                Step::Sent => continue,
                Step::Done => sending = false,
                Step::Idle { until_ns } => next_send = Some(until_ns),
            }
            if !sending {
                sending_done.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        if flow.busy_poll {
            continue;
        }
        match next_send {
            // Close to a deadline: spin to it (echoes keep their kernel stamps meanwhile).
            Some(t) if t <= now + crate::spin_budget() => {
                let spun = wait_until(t);
                if let Some(s) = sender.as_mut() {
                    s.meter.on_pacing_spin(spun);
                }
            }
            Some(t) => {
                let wait = t
                    .saturating_sub(crate::spin_budget() + now)
                    .min(crate::POLL_PERIOD.as_nanos() as u64);
                // A failed wait returns at once; the next read reports the error.
                let _ = wait_readable(&fds, std::time::Duration::from_nanos(wait));
            }
            None => {
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
            SenderMeter::new(socks.len(), flow.rate_bps.is_some(), false),
            None,
        ),
    };
    let sent = SenderOutcome {
        report: sent_meter.report(),
        log: sent_meter.take_log(),
        error: send_error,
        worker_cpu_ns: (0, 0),
    };
    let received = ReceiverOutcome {
        report: meter.report(None),
        log: meter.take_log(),
        error,
    };
    (sent, received)
}

/// Whether a receiver of this flow should let the kernel coalesce datagrams.
fn wants_gro(flow: &FlowParams) -> bool {
    flow.packets_per_sec()
        .is_none_or(|pps| pps >= GRO_FROM_PACKETS_PER_SEC)
}

/// What [`prepare_receivers`] got from the kernel.
struct Prepared {
    gro: bool,
    /// Every socket stamps arrivals: reading late does not move a measured arrival.
    kernel_stamps: bool,
}

/// Prepares receiving sockets: kernel timestamps, drop counters, GRO when asked, busy polling
/// when asked. Failures are not fatal: the report then says user-space time or unknown drops.
fn prepare_receivers<S: DatagramSocket>(socks: &[S], flow: &FlowParams, gro: bool) -> Prepared {
    let mut gro_on = gro;
    let mut kernel_stamps = true;
    // At max rate a sender outruns the receiver in bursts: a deep buffer absorbs them
    // (the user's --recv-buffer wins; it was set with the other socket options).
    if flow.rate_bps.is_none() && flow.socket.recv_buffer.is_none() {
        let each = (MAX_RATE_RECV_BUFFERS / socks.len().max(1)).max(MIN_MAX_RATE_RECV_BUFFER);
        for sock in socks {
            let _ = udp::set_buffer_sizes(sock, None, Some(each));
        }
    }
    for sock in socks {
        kernel_stamps &= udp::enable_rx_timestamps(sock).is_ok();
        let _ = udp::enable_rxq_ovfl(sock);
        if gro {
            gro_on &= udp::enable_gro(sock).is_ok();
        }
        if flow.busy_poll {
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
    flow: &FlowParams,
    round_trip: bool,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> ReceiverOutcome {
    // A slow reader takes one datagram at a time, never coalesced.
    let read_rate = flow.socket.read_rate_bps.filter(|&r| r > 0);
    let prepared = prepare_receivers(socks, flow, read_rate.is_none() && wants_gro(flow));
    let mut meter = ReceiverMeter::new(socks.len(), round_trip, flow.packet_log);
    let batch_size = if read_rate.is_some() {
        1
    } else {
        MAX_BATCH as usize
    };
    let mut batch = udp::RecvBatch::new(batch_size, MAX_RECEIVE);
    let mut intervals = IntervalClock::new(flow.interval, clock::monotonic_ns());
    let mut next_read_ns = 0u64;
    let mut scratch = TrainScratch::default();
    let mut error = None;
    let coalesce = !flow.busy_poll
        && read_rate.is_none()
        && prepared.kernel_stamps
        && (socks.len() >= COALESCE_FROM_SOCKETS || wants_gro(flow));
    let ready = if coalesce {
        Readiness::coalesced(socks, COALESCE_PERIOD)
    } else {
        Readiness::new(socks, flow.busy_poll)
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
                                flow.session,
                                batch.payload(0),
                                read_now,
                                &mut scratch,
                            );
                        }
                        return Ok(n);
                    }
                    let n = udp::recv_batch(&socks[i], &mut batch)?;
                    for k in 0..n {
                        record_datagram(
                            &mut meter,
                            i,
                            flow.session,
                            batch.payload(k),
                            batch.meta(k),
                            &mut scratch,
                        );
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
    let mut report = meter.report(None);
    report.gro = prepared.gro;
    ReceiverOutcome {
        report,
        log: meter.take_log(),
        error,
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

fn record_datagram(
    meter: &mut ReceiverMeter,
    flow_index: usize,
    session: u32,
    payload: &[u8],
    meta: udp::RecvMeta,
    scratch: &mut TrainScratch,
) {
    // Echoes come back to a loopback client; anything else goes one way. On a shared medium
    // (native frames on `lo`) an end also sees the other direction's frames: not ours.
    let expect_echo = meter.expects_echoes();
    if let Some(drops) = meta.rxq_drops {
        meter.set_socket_drops(flow_index, u64::from(drops));
    }
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
        let probe = match ProbeRepr::parse(datagram) {
            Ok(p) if p.session == session && p.is_echo() == expect_echo => p,
            Ok(p) if p.session == session => continue,
            _ => {
                meter.on_malformed();
                continue;
            }
        };
        let arrived = Arrived {
            seq: probe.seq,
            size: datagram.len() as u32,
            sent_ns: probe.sent_ns,
            echoed_ns: probe.is_echo().then_some(probe.echoed_ns),
            arrival_ns,
            kernel_stamp,
        };
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
        scratch.seqs.push(probe.seq);
    }
    if let Some(t) = train {
        meter.on_train(flow_index, t, &scratch.seqs);
    }
}

/// Echoes every probe of this session back on the socket it came in on (each connected to
/// the client), stamped with its arrival time, until `stop`.
pub fn udp_echo<S: DatagramSocket>(
    socks: &[S],
    flow: &FlowParams,
    stop: &AtomicBool,
) -> (EchoReport, Option<String>) {
    prepare_receivers(socks, flow, false);
    let mut report = EchoReport::default();
    let mut batch = udp::RecvBatch::new(MAX_BATCH as usize, MAX_RECEIVE);
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(MAX_BATCH as usize);
    let mut drops = vec![0u64; socks.len()];
    let mut error = None;
    match Readiness::new(socks, flow.busy_poll) {
        Err(e) => error = Some(format!("cannot watch the data sockets: {e}")),
        Ok(mut ready) => {
            while !stopped(stop) {
                let result = ready.each_ready(|i| {
                    let n = udp::recv_batch(&socks[i], &mut batch)?;
                    out.clear();
                    for k in 0..n {
                        let meta = batch.meta(k);
                        if let Some(d) = meta.rxq_drops {
                            drops[i] = u64::from(d);
                        }
                        let mut packet = batch.payload(k).to_vec();
                        match ProbeHeader::new_checked(&mut packet[..]) {
                            // An echo seen again (native frames on a shared medium) is not
                            // echoed twice.
                            Ok(h) if h.flags() & flowlab_wire::probe::FLAG_ECHO != 0 => {}
                            Ok(mut h) if h.session() == flow.session && !meta.truncated => {
                                h.set_echo(meta.kernel_rx_ns.unwrap_or_else(clock::realtime_ns));
                                out.push(packet);
                            }
                            _ => report.malformed += 1,
                        }
                    }
                    let slices: Vec<&[u8]> = out.iter().map(Vec::as_slice).collect();
                    let mut done = 0;
                    while done < slices.len() {
                        match socks[i].send_frames(&slices[done..], false) {
                            Ok(k) => {
                                report.packets_echoed += k as u64;
                                report.bytes_echoed += slices[done..done + k]
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
                    Ok(n)
                });
                if let Err(e) = result {
                    error = Some(format!("receive failed: {e}"));
                    break;
                }
            }
        }
    }
    let total_drops: u64 = drops.iter().sum();
    report.socket_buffer_drops = (total_drops > 0).then_some(total_drops);
    (report, error)
}
