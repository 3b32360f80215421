//! The UDP sender: a thin driver of `flowlab_traffic::sender::SenderCore` on the monotonic
//! clock and connected sockets. The core decides what is due; this stamps the probe headers,
//! hands trains to the kernel (UDP GSO, sendmmsg, or one by one with transmit times), reads
//! acknowledgements and transmit timestamps, and feeds the meter.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

use flowlab_results::meter::SenderMeter;
use flowlab_results::schedule_book::ScheduleBook;
use flowlab_spec::TestSpec;
use flowlab_sys::packet::{vnet_checksum_header, VNET_HDR_LEN};
use flowlab_sys::{clock, udp};
use flowlab_traffic::sender::{Packet, Poll, SenderCore};
use flowlab_traffic::GroupWindow;
use flowlab_wire::udp_frame::{MAX_HEADER_LEN, UDP_CHECKSUM_OFFSET};
use flowlab_wire::{ProbeRepr, PROBE_HEADER_LEN};

use crate::packet_auth::PacketAuth;
use flowlab_pacing::Waiter;

use crate::readiness::DatagramSend;
use crate::{
    batching, fill_payload, merge_flows, on_flow_threads, stopped, RunContext, SendBudget,
    SenderOutcome, ACK_PERIOD, ACK_TIMEOUT_NS, MAX_BATCH,
};

/// Bytes for one packet's vnet header and Ethernet, IP and UDP headers.
const FRAME_HEADER_SLOT: usize = VNET_HDR_LEN + MAX_HEADER_LEN;
/// Largest UDP payload of one GSO send (IPv4 limit).
const MAX_GSO_BYTES: usize = 65_507;
/// Below this many flows per core one event loop keeps up.
const FLOWS_PER_LOOP: usize = 128;

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

    /// Stamps `packets` (each at most the stride) into the slots from `first` on, with the
    /// session and send time.
    fn stamp(
        &mut self,
        first: usize,
        packets: &[Packet],
        session: u32,
        sent_ns: u64,
        auth: Option<&PacketAuth>,
    ) {
        let slots = self.bytes.chunks_mut(self.stride).skip(first);
        for (i, (slot, p)) in (first..).zip(slots.zip(packets)) {
            self.lens[i] = (p.size as usize).clamp(PROBE_HEADER_LEN, self.stride);
            ProbeRepr {
                flags: 0,
                session,
                seq: p.seq,
                sent_ns,
                echoed_ns: 0,
            }
            .emit(slot);
            if let Some(auth) = auth {
                auth.seal(&mut slot[..self.lens[i]]);
            }
        }
    }

    fn len(&self, i: usize) -> usize {
        self.lens[i]
    }

    fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// The first `count` packets, each its `len` bytes.
    fn frames(&self, count: usize) -> Vec<&[u8]> {
        self.bytes
            .chunks(self.stride)
            .zip(&self.lens)
            .take(count)
            .map(|(slot, &len)| &slot[..len])
            .collect()
    }

    /// Hands the first `count` packets to the kernel one by one, each to leave at
    /// `txtime(i)`; returns how many it took.
    fn send_timed<S: DatagramSend>(
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
    fn send<S: DatagramSend>(
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
            sock.send_frames(&self.frames(count), !wait)
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
        sock: &impl DatagramSend,
        flow: usize,
        realtime_offset: i64,
        meter: &mut SenderMeter,
    ) {
        self.stamps.clear();
        if sock.tx_stamps(&mut self.stamps).is_err() {
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
pub fn udp_send<S: DatagramSend>(
    socks: &[S],
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
) -> SenderOutcome {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // A loop with dense deadlines spins its core; one core stays for the receiver and the
    // kernel's softirq work, which on a small machine share it with the sender.
    let loops = (socks.len() / FLOWS_PER_LOOP).clamp(1, cores.saturating_sub(1).max(1));
    let share = socks.len().div_ceil(loops).max(1);
    let budget = SendBudget::of(ctx);
    let (per_loop, worker_cpu_ns) = on_flow_threads(loops, |n| {
        let chunk = socks.chunks(share).nth(n).unwrap_or(&[]);
        send_loop(chunk, n * share, spec, ctx, &budget, stop)
    });
    let (meter, mut error) = merge_flows(per_loop, SenderMeter::absorb);
    let mut meter =
        meter.unwrap_or_else(|| SenderMeter::new(socks.len(), spec.rate_bps.is_some(), false));
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

/// One event loop: sends `socks`' flows, returns its meter (flows numbered from 0).
fn send_loop<S: DatagramSend>(
    socks: &[S],
    first_flow: usize,
    spec: &TestSpec,
    ctx: &RunContext,
    budget: &SendBudget,
    stop: &AtomicBool,
) -> (SenderMeter, Option<String>) {
    let start = clock::monotonic_ns();
    let mut sender = match Sender::new(socks, first_flow, spec, ctx, budget, start) {
        Ok(s) => s,
        Err(e) => {
            return (
                SenderMeter::new(socks.len(), spec.rate_bps.is_some(), false),
                Some(e),
            )
        }
    };
    let mut now = start;
    loop {
        if stopped(stop) {
            sender.core.handle_stop();
        }
        match sender.step(now) {
            Step::Sent => now = clock::monotonic_ns(),
            Step::Idle { until_ns } => {
                let waited = sender.waiter.wait(until_ns);
                sender.meter.on_pacing_spin(waited.spun_ns);
                now = waited.poll_at_ns;
            }
            Step::Done => break,
        }
    }
    sender.finish()
}

/// What a sender did in one step.
pub(crate) enum Step {
    /// Sent a train (or was refused by the budget); call again at once.
    Sent,
    /// Nothing is due before `until_ns`.
    Idle { until_ns: u64 },
    /// Every flow is over, or sending failed.
    Done,
}

/// The sending half of an event loop: the core over its flows, driven by [`send_loop`] alone
/// or interleaved with receiving by `udp_ping`.
pub(crate) struct Sender<'a, S> {
    socks: &'a [S],
    session: u32,
    /// Authenticated test packets: tags each probe.
    auth: Option<PacketAuth>,
    budget: &'a SendBudget,
    pub(crate) core: SenderCore,
    pub(crate) meter: SenderMeter,
    /// Constant rate: sends never wait for buffer space.
    paced: bool,
    stamping: bool,
    departures: Departures,
    /// Each datagram carries its scheduled time for the fq qdisc (`--kernel-pacing`).
    kernel_timed: bool,
    gso: bool,
    /// The flows share one unconnected socket: what is due at once leaves in one call.
    shared: bool,
    /// The packets gathered across flows for one shared send, in slot order, and where each
    /// goes.
    gathered: Vec<(usize, Packet)>,
    gathered_to: Vec<SocketAddr>,
    /// Each gathered packet's vnet and frame headers, where they leave through a packet
    /// socket, in slots of [`FRAME_HEADER_SLOT`] bytes.
    frame_headers: Vec<u8>,
    /// Where a shared send is due and which deadlines it takes (`PacingMode::group_window`).
    group_window: GroupWindow,
    train: Train,
    realtime_offset: i64,
    acks: Option<AckReader>,
    /// A sender whose packets come back as echoes remembers when they were due.
    pub(crate) book: Option<ScheduleBook>,
    /// Its waits for deadlines (paced flows).
    pub(crate) waiter: Waiter,
}

/// Reads a reverse sender's acknowledgements (see `flowlab_wire::ack`) for the core.
struct AckReader {
    cookie: u64,
    next_read_ns: u64,
}

impl AckReader {
    /// Reads what acknowledgements wait on every socket, at most every [`ACK_PERIOD`].
    fn read<S: DatagramSend>(&mut self, socks: &[S], now: u64, core: &mut SenderCore) {
        if now < self.next_read_ns {
            return;
        }
        self.next_read_ns = now + ACK_PERIOD.as_nanos() as u64;
        let mut buf = [0u8; 64];
        for (i, sock) in socks.iter().enumerate() {
            while let Ok(n) = sock.recv_nowait(&mut buf) {
                if flowlab_wire::ack::is_ack(&buf[..n], self.cookie) {
                    core.handle_ack(i, now);
                }
            }
        }
    }
}

impl<'a, S: DatagramSend> Sender<'a, S> {
    /// The sender of `socks`' flows (the test's flows from `first_flow` on), starting at
    /// `start` on the monotonic clock.
    pub(crate) fn new(
        socks: &'a [S],
        first_flow: usize,
        spec: &TestSpec,
        ctx: &RunContext,
        budget: &'a SendBudget,
        start: u64,
    ) -> Result<Self, String> {
        let paced = spec.rate_bps.is_some();
        let mut meter = SenderMeter::new(socks.len(), paced, spec.packet_log);
        if let Some(watch) = &ctx.schedule_watch {
            meter.watch_schedule(watch.clone());
        }
        let size = spec.size as usize;
        // A GSO train is one IP datagram of segments; each segment must also fit the path
        // MTU, which only the first send tells (EINVAL): then the sender falls back to
        // sendmmsg. Transmit stamps are matched one per datagram, so they rule out GSO trains.
        let stamping = spec.socket.tx_timestamps && paced;
        let kernel_timed = paced && socks.first().is_some_and(DatagramSend::kernel_timed);
        let shared = paced && !stamping && !kernel_timed && shared_socket(socks);
        let gso = !stamping
            && !kernel_timed
            && !spec.modelled()
            && size * 2 <= MAX_GSO_BYTES
            && socks.first().is_some_and(DatagramSend::gso_supported);
        // A traffic model picks each packet's size: slots must hold the largest datagram.
        let stride = if spec.modelled() { MAX_GSO_BYTES } else { size };
        let max_train = if gso {
            (MAX_GSO_BYTES / size).min(MAX_BATCH as usize)
        } else {
            MAX_BATCH as usize
        };
        let policy = flowlab_traffic::sender::SendPolicy {
            min_size: PROBE_HEADER_LEN as u32,
            max_size: stride as u32,
            ack_timeout_ns: ctx.return_cookie.map(|_| ACK_TIMEOUT_NS),
            ..spec.send_policy()
        };
        let flows = first_flow..first_flow + socks.len();
        let core = spec.sender_core(flows, start, batching(max_train as u64), policy)?;
        for (i, pacer) in core.pacers().enumerate() {
            if let Some(contract) = pacer.contract() {
                meter.hold_to_contract(i, contract);
            }
        }
        Ok(Sender {
            socks,
            session: ctx.session,
            auth: ctx.packet_auth(),
            budget,
            core,
            meter,
            paced,
            stamping,
            departures: Departures::new(socks.len()),
            kernel_timed,
            gso,
            shared,
            gathered: Vec::with_capacity(max_train),
            gathered_to: Vec::with_capacity(max_train),
            frame_headers: Vec::new(),
            group_window: spec.pacing.group_window(),
            train: Train::new(stride, max_train),
            realtime_offset: clock::realtime_minus_monotonic_ns(),
            acks: ctx.return_cookie.map(|cookie| AckReader {
                cookie,
                next_read_ns: 0,
            }),
            book: None,
            waiter: Waiter::new(spec, socks.len(), kernel_timed),
        })
    }

    /// Remembers when every `every`th packet was due (on the real-time clock of the send
    /// stamps), for the round trips of their echoes.
    pub(crate) fn remember_schedule(&mut self, every: u64) {
        self.book = Some(ScheduleBook::new(self.socks.len(), every));
    }

    /// Sends what is due at `now` (on the monotonic clock), or says when something will be.
    pub(crate) fn step(&mut self, now: u64) -> Step {
        if let Some(acks) = &mut self.acks {
            acks.read(self.socks, now, &mut self.core);
        }
        match self.core.poll(now) {
            Poll::Done => Step::Done,
            Poll::Wait { until_ns } if self.shared => {
                let lateness = self.waiter.expected_lateness_ns();
                let until_ns = self.group_window.wake_at(until_ns, lateness);
                Step::Idle { until_ns }
            }
            Poll::Wait { until_ns } => Step::Idle { until_ns },
            Poll::Transmit { flow } if self.shared => {
                self.transmit_shared(flow, now);
                Step::Sent
            }
            Poll::Transmit { flow } => {
                self.transmit(flow, now);
                Step::Sent
            }
        }
    }

    /// Sends the core's train on flow `i`, as far as the budget and the kernel take it.
    fn transmit(&mut self, i: usize, now: u64) {
        let train = self.core.train();
        let admitted = self.budget.admit(now, train.len(), |k| train[k].size);
        self.core.handle_budget(admitted);
        let packets = self.core.train();
        let count = packets.len();
        if count == 0 {
            return;
        }
        // Packets the qdisc holds to their transmit time leave then, not now.
        let now_mono = match self.kernel_timed {
            true => clock::monotonic_ns().max(now),
            false => clock::monotonic_ns(),
        };
        let sent_ns = now_mono.saturating_add_signed(self.realtime_offset);
        self.train
            .stamp(0, packets, self.session, sent_ns, self.auth.as_ref());
        let sock = &self.socks[i];
        let mut sent = if self.kernel_timed {
            self.train
                .send_timed(sock, count, |k| packets[k].due_ns.unwrap_or(now_mono))
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
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            // An ICMP port unreachable for an earlier packet: the peer socket is gone. The
            // control connection decides the end; these packets are send errors.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.meter.on_send_error(i, count as u64);
                return self.core.handle_unreachable();
            }
            Err(e) => {
                self.meter.on_send_error(i, count as u64);
                return self.core.handle_failure(format!("send failed: {e}"));
            }
        };
        self.record(i, taken, sent_ns, now_mono);
        // What the kernel refused stays refused when paced: resending would break the schedule.
        let lost = self.core.handle_sent(taken);
        if self.paced {
            self.meter.on_send_buffer_full(i, lost);
        }
    }

    /// Gathers the trains of every flow due by `now` and half the group window after it, from
    /// flow `first` on, into one send on the shared socket. Each train is reported taken as it is
    /// gathered; what the send then refuses gives its sequence numbers back and is lost (paced
    /// flows only share).
    fn transmit_shared(&mut self, first: usize, now: u64) {
        self.gathered.clear();
        let now_mono = clock::monotonic_ns();
        let sent_ns = now_mono.saturating_add_signed(self.realtime_offset);
        let mut flow = first;
        loop {
            // A train that does not fit stays pending for the next send.
            if self.gathered.len() + self.core.train().len() > self.train.capacity() {
                break;
            }
            let train = self.core.train();
            let admitted = self.budget.admit(now, train.len(), |k| train[k].size);
            self.core.handle_budget(admitted);
            let packets = self.core.train();
            let at = self.gathered.len();
            self.train
                .stamp(at, packets, self.session, sent_ns, self.auth.as_ref());
            self.gathered.extend(packets.iter().map(|&p| (flow, p)));
            let count = packets.len();
            self.core.handle_sent(count);
            match self.core.poll(self.group_window.gathers_until(now)) {
                Poll::Transmit { flow: next } => flow = next,
                Poll::Wait { .. } | Poll::Done => break,
            }
        }
        let taken = match self.send_gathered() {
            Ok(n) => n,
            Err(e) if udp::is_send_buffer_full(&e) => 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => {
                for &(i, _) in &self.gathered {
                    self.meter.on_send_error(i, 1);
                }
                return self.core.handle_failure(format!("send failed: {e}"));
            }
        };
        if taken > 0 {
            self.meter.on_batch(taken as u64);
        }
        for k in 0..self.gathered.len() {
            let (i, p) = self.gathered[k];
            if k < taken {
                self.record_packet(i, &p, self.train.len(k), sent_ns, now_mono);
            } else {
                let lost = self.core.handle_refused(i, 1);
                self.meter.on_send_buffer_full(i, lost);
            }
        }
    }

    /// One sendmmsg of the gathered packets, each to its flow's peer: on the shared socket, or
    /// as whole frames through the flows' packet socket.
    fn send_gathered(&mut self) -> io::Result<usize> {
        if self.through_frames() {
            return self.send_gathered_frames();
        }
        let Some((fd, _)) = self.socks.first().and_then(DatagramSend::shared) else {
            return Err(io::Error::other("no shared socket"));
        };
        self.gathered_to.clear();
        let peers = self
            .gathered
            .iter()
            .filter_map(|&(i, _)| self.socks[i].shared());
        self.gathered_to.extend(peers.map(|(_, peer)| peer));
        let frames = self.train.frames(self.gathered.len());
        udp::send_batch_to(fd, &frames, &self.gathered_to, true)
    }

    /// Whether the flows' datagrams leave as whole frames through a packet socket.
    fn through_frames(&self) -> bool {
        self.socks.first().and_then(DatagramSend::frame).is_some()
    }

    /// The gathered packets as frames: each one's headers written into its slot (the IPv4
    /// identification is the flow's sequence number), then one sendmmsg of headers and
    /// payloads. The device completes each UDP checksum (CHECKSUM_PARTIAL).
    fn send_gathered_frames(&mut self) -> io::Result<usize> {
        let count = self.gathered.len();
        self.frame_headers.resize(count * FRAME_HEADER_SLOT, 0);
        let mut socket = None;
        for (k, &(i, p)) in self.gathered.iter().enumerate() {
            let Some((sock, header)) = self.socks[i].frame() else {
                return Err(io::Error::other("a flow without a packet socket"));
            };
            socket = Some(sock);
            let slot = &mut self.frame_headers[k * FRAME_HEADER_SLOT..(k + 1) * FRAME_HEADER_SLOT];
            let start = header.checksum_start() as u16;
            slot[..VNET_HDR_LEN]
                .copy_from_slice(&vnet_checksum_header(start, UDP_CHECKSUM_OFFSET as u16));
            header.emit(&mut slot[VNET_HDR_LEN..], self.train.len(k), p.seq as u16);
        }
        let Some(socket) = socket else {
            return Ok(0);
        };
        let payloads = self.train.frames(count);
        let (headers, socks, gathered) = (&self.frame_headers, self.socks, &self.gathered);
        let header_len = |k: usize| socks[gathered[k].0].frame().map_or(0, |(_, h)| h.len());
        socket.send_gathered(count, |k| {
            let at = k * FRAME_HEADER_SLOT;
            [&headers[at..at + VNET_HDR_LEN + header_len(k)], payloads[k]]
        })
    }

    /// Feeds the meter the first `taken` packets of the train, and their transmit stamps.
    fn record(&mut self, i: usize, taken: usize, sent_ns: u64, now_mono: u64) {
        if taken > 0 {
            self.meter.on_batch(taken as u64);
        }
        for k in 0..taken {
            let p = self.core.train()[k];
            self.record_packet(i, &p, self.train.len(k), sent_ns, now_mono);
        }
        if self.stamping {
            self.departures
                .collect(&self.socks[i], i, self.realtime_offset, &mut self.meter);
        }
    }

    /// Feeds the meter one packet of flow `i` that the kernel took, `len` bytes.
    fn record_packet(&mut self, i: usize, p: &Packet, len: usize, sent_ns: u64, now_mono: u64) {
        self.meter
            .on_sent(i, p.seq, len as u32, sent_ns, p.due_ns, now_mono);
        if let (true, Some(deadline)) = (self.stamping, p.due_ns) {
            self.departures.on_sent(i, deadline);
        }
        if let (Some(book), Some(due)) = (&mut self.book, p.due_ns) {
            book.on_sent(i, p.seq, due.saturating_add_signed(self.realtime_offset));
        }
    }

    pub(crate) fn finish(mut self) -> (SenderMeter, Option<String>) {
        if let Some(pacing) = self.waiter.report() {
            self.meter.set_pacing(pacing);
        }
        for (i, pacer) in self.core.pacers().enumerate() {
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
        let frames = self.through_frames() && self.meter.packets_sent() > 0;
        self.meter.set_packet_socket(frames);
        let error = self.core.error().map(str::to_string);
        (self.meter, error)
    }
}

/// Whether every flow of `socks` sends from one shared socket.
fn shared_socket<S: DatagramSend>(socks: &[S]) -> bool {
    use std::os::fd::AsRawFd;
    let fd = |s: &S| s.shared().map(|(fd, _)| fd.as_raw_fd());
    socks
        .first()
        .and_then(fd)
        .is_some_and(|first| socks.iter().all(|s| fd(s) == Some(first)))
}

#[cfg(test)]
mod tests;
