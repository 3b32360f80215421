//! Meters: sans-IO accumulators that turn per-packet events into reports. The real engine, the
//! emulator and the simulator all feed them, each with its own clock.
//!
//! A meter covers one or more flows of a test: sequence numbers, jitter and inter-arrival
//! times are per flow (they only mean something within one flow); delay distributions and
//! schedule errors are shared, which keeps a 1000-flow meter small.

use std::sync::Arc;

use flowlab_stats::{
    rate_over_span, rate_per_sec, Arrival, InterArrival, LatencyStats, LatencySummary, LossRuns,
    Rfc3550Jitter, SeqCounts, SeqTracker, Welford,
};

use flowlab_traffic::{ConformanceMeter, ContractParams, ContractReport};

use crate::schedule_watch::{ScheduleWatch, ScheduleWindow};

use crate::{
    Batching, ContractConformance, FlowReceiverSummary, FlowSenderSummary, IntervalReport,
    LostBySender, PacingReport, PacketRecord, ReceiverReport, SenderReport, TransactionReport,
    Warmup,
};

/// Cap on per-packet records kept in memory (about 50 MB at each end: a max-rate test with
/// `--packet-log` cost an agent 630 MB before); past it recording stops.
pub const MAX_PACKET_RECORDS: usize = 1_000_000;

/// One received probe, as a meter needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrived {
    pub seq: u64,
    pub size: u32,
    pub sent_ns: u64,
    /// Agent's receive time carried back by an echo (loopback tests).
    pub echoed_ns: Option<u64>,
    pub arrival_ns: u64,
    /// Whether `arrival_ns` is a kernel receive timestamp.
    pub kernel_stamp: bool,
}

#[derive(Debug, Default)]
struct FlowRx {
    seq: SeqTracker,
    bytes: u64,
    jitter: Rfc3550Jitter,
    inter_arrival: InterArrival,
    transit: Welford,
    first_arrival: Option<u64>,
    last_arrival: u64,
    socket_drops: Option<u64>,
    /// Sequence number and transit of the highest packet so far, for IPDV.
    last_transit: Option<(u64, i64)>,
    /// `--omit`: the first sequence number measured (one past the warm-up's highest seen);
    /// `seq` counts from it.
    base: u64,
    /// The packets its sender says it sent, told in-band (iperf2's final datagram).
    announced_sent: Option<u64>,
}

#[derive(Debug, Default)]
struct IntervalCounters {
    packets: u64,
    bytes: u64,
    lost: u64,
    reordered: u64,
    delay: LatencyStats,
}

/// What a receiver measures. Times are nanoseconds of one clock, comparable to the senders'
/// `sent_ns` stamps (CLOCK_REALTIME in the real engine).
#[derive(Debug)]
pub struct ReceiverMeter {
    flows: Vec<FlowRx>,
    malformed: u64,
    /// One-way transit (to the agent, for echoes) of every flow.
    delay: LatencyStats,
    /// Loopback only: arrival of the echo back here minus send time.
    round_trip: Option<LatencyStats>,
    /// Loopback only: arrival of the echo minus when its packet was due (see
    /// [`crate::schedule_book`]).
    from_schedule: LatencyStats,
    /// Inter-arrival gaps and IPDV of every flow.
    gaps: LatencyStats,
    ipdv: LatencyStats,
    kernel_stamps: u64,
    user_stamps: u64,
    interval: IntervalCounters,
    log: Option<Vec<PacketRecord>>,
    omit: Option<Omit>,
}

/// A warm-up being left out: packets sent before the first send stamp seen plus `omit_ns`.
#[derive(Debug)]
struct Omit {
    omit_ns: u64,
    start_ns: Option<u64>,
    left_out: u64,
}

impl ReceiverMeter {
    /// `round_trip`: echoes come back to this meter (loopback test at the client).
    pub fn new(flows: usize, round_trip: bool, packet_log: bool) -> Self {
        ReceiverMeter {
            flows: (0..flows.max(1)).map(|_| FlowRx::default()).collect(),
            malformed: 0,
            delay: LatencyStats::new(),
            round_trip: round_trip.then(LatencyStats::new),
            from_schedule: LatencyStats::new(),
            gaps: LatencyStats::new(),
            ipdv: LatencyStats::new(),
            kernel_stamps: 0,
            user_stamps: 0,
            interval: IntervalCounters::default(),
            log: packet_log.then(Vec::new),
            omit: None,
        }
    }

    /// Leaves out a warm-up of `omit_ns` (`--omit`): packets sent (by their send stamps)
    /// before the first stamp seen plus `omit_ns`, and in each flow the sequence numbers up
    /// to the highest of them, so loss counts only what was sent after it.
    pub fn omitting(mut self, omit_ns: Option<u64>) -> Self {
        self.omit = omit_ns.map(|omit_ns| Omit {
            omit_ns,
            start_ns: None,
            left_out: 0,
        });
        self
    }

    /// Whether the packets `seqs` of `flow`, sent at `sent_ns`, are the warm-up's: until the
    /// flow's first measured packet, those sent in it (moving the first measured number past
    /// them); after, those numbered below the first measured. They are counted apart.
    fn in_warmup(&mut self, flow: usize, sent_ns: u64, seqs: &[u64]) -> bool {
        let (Some(omit), Some(f)) = (&mut self.omit, self.flows.get_mut(flow)) else {
            return false;
        };
        let start = *omit.start_ns.get_or_insert(sent_ns);
        let warm = match f.first_arrival {
            None => sent_ns < start.saturating_add(omit.omit_ns),
            Some(_) => seqs.iter().all(|&s| s < f.base),
        };
        if warm && f.first_arrival.is_none() {
            let highest = seqs.iter().max().map_or(0, |&s| s.saturating_add(1));
            f.base = f.base.max(highest);
        }
        if warm {
            omit.left_out += seqs.len() as u64;
        }
        warm
    }

    pub fn on_packet(&mut self, flow: usize, p: Arrived) {
        self.on_train(flow, p, &[p.seq]);
    }

    /// Packets that share everything but their sequence numbers (`p.seq` is ignored): a train
    /// the kernel coalesced (GRO) carries one arrival stamp, and a GSO train one send stamp.
    /// Sequence accounting stays per packet; the distributions take the train at once, which
    /// keeps a receiver at millions of packets per second. Returns how many were new (not
    /// duplicates).
    pub fn on_train(&mut self, flow: usize, p: Arrived, seqs: &[u64]) -> u64 {
        if self.in_warmup(flow, p.sent_ns, seqs) {
            return 0;
        }
        let Some(f) = self.flows.get_mut(flow) else {
            self.malformed += seqs.len() as u64;
            return 0;
        };
        // After a warm-up, numbers count from the first measured; any below it are late
        // warm-up packets of a train that straddles the end (dropped from the train).
        let shifted: Vec<u64>;
        let seqs = match f.base {
            0 => seqs,
            base => {
                shifted = seqs.iter().filter_map(|s| s.checked_sub(base)).collect();
                &shifted
            }
        };
        let mut fresh = 0u64;
        // A GSO train arrives as consecutive numbers ahead of all earlier ones: accounted
        // in one step unless each packet is logged.
        let consecutive = seqs.windows(2).all(|w| w[1].wrapping_sub(w[0]) == 1);
        let run = match seqs {
            [first, _, ..] if consecutive && self.log.is_none() => {
                f.seq.on_run_ahead(*first, seqs.len() as u64)
            }
            _ => None,
        };
        if let Some(missing) = run {
            self.interval.lost += missing;
            fresh = seqs.len() as u64;
        }
        for &seq in seqs.iter().filter(|_| run.is_none()) {
            match f.seq.on_packet(seq) {
                Arrival::Duplicate => continue,
                Arrival::Gap { missing } => self.interval.lost += missing,
                Arrival::Late | Arrival::TooOld => self.interval.reordered += 1,
                Arrival::InOrder => {}
            }
            fresh += 1;
            if let Some(log) = &mut self.log {
                if log.len() < MAX_PACKET_RECORDS {
                    log.push(PacketRecord {
                        flow: flow as u32,
                        seq: seq + f.base,
                        size: p.size,
                        sent_ns: Some(p.sent_ns),
                        received_ns: Some(p.arrival_ns),
                        echoed_ns: p.echoed_ns,
                    });
                }
            }
        }
        if fresh == 0 {
            return 0;
        }
        f.bytes += u64::from(p.size) * fresh;
        f.first_arrival.get_or_insert(p.arrival_ns);
        f.last_arrival = f.last_arrival.max(p.arrival_ns);
        if let Some(gap) = f.inter_arrival.push_n(p.arrival_ns, fresh) {
            self.gaps.push(gap);
        }
        self.gaps.push_n(0, fresh - 1);
        // One-way: to the agent when echoed, else to here. Clocks may differ: only relative
        // values of this difference are reported.
        let transit = p.echoed_ns.unwrap_or(p.arrival_ns) as i64 - p.sent_ns as i64;
        record_ipdv(&mut self.ipdv, &mut f.last_transit, seqs, transit);
        f.jitter.push_n(transit, fresh);
        f.transit.push_n(transit as f64, fresh);
        self.delay.push_n(transit, fresh);
        self.interval.packets += fresh;
        self.interval.bytes += u64::from(p.size) * fresh;
        match &mut self.round_trip {
            Some(rtt) => {
                let value = p.arrival_ns as i64 - p.sent_ns as i64;
                rtt.push_n(value, fresh);
                self.interval.delay.push_n(value, fresh);
            }
            None => self.interval.delay.push_n(transit, fresh),
        }
        if p.kernel_stamp {
            self.kernel_stamps += fresh;
        } else {
            self.user_stamps += fresh;
        }
        fresh
    }

    /// One echo back at a loopback client, whose packet was due at `scheduled_ns` on the
    /// sender's clock (`None`: no schedule, as at max rate, or forgotten): its round trip is
    /// taken from its departure and, beside it, from its schedule.
    pub fn on_echo(&mut self, flow: usize, p: Arrived, scheduled_ns: Option<u64>) {
        let fresh = self.on_train(flow, p, &[p.seq]);
        if let (1, Some(due), true) = (fresh, scheduled_ns, self.round_trip.is_some()) {
            self.from_schedule.push(p.arrival_ns as i64 - due as i64);
        }
    }

    /// A datagram that was not a probe of this session.
    pub fn on_malformed(&mut self) {
        self.malformed += 1;
    }

    /// A flow's sender's own count of its packets, told in-band (iperf2's final datagram):
    /// without a count from elsewhere, packets lost after the last one received count too.
    pub fn set_announced_sent(&mut self, flow: usize, packets: u64) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.announced_sent = Some(packets);
        }
    }

    /// Cumulative drops at a flow's receiving socket, as the kernel reports them.
    pub fn set_socket_drops(&mut self, flow: usize, drops: u64) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.socket_drops = Some(drops);
        }
    }

    pub fn packets_received(&self) -> u64 {
        self.flows.iter().map(|f| f.seq.counts().unique).sum()
    }

    /// Appends another meter's flows (a worker thread's share) and merges its distributions.
    pub fn absorb(&mut self, other: ReceiverMeter) {
        let offset = self.flows.len() as u32;
        self.flows.extend(other.flows);
        self.malformed += other.malformed;
        self.delay.merge(&other.delay);
        self.gaps.merge(&other.gaps);
        self.ipdv.merge(&other.ipdv);
        if let (Some(mine), Some(theirs)) = (&mut self.round_trip, &other.round_trip) {
            mine.merge(theirs);
        }
        self.from_schedule.merge(&other.from_schedule);
        if let (Some(mine), Some(theirs)) = (&mut self.omit, &other.omit) {
            mine.left_out += theirs.left_out;
        }
        self.kernel_stamps += other.kernel_stamps;
        self.user_stamps += other.user_stamps;
        self.interval.packets += other.interval.packets;
        self.interval.bytes += other.interval.bytes;
        self.interval.lost += other.interval.lost;
        self.interval.reordered += other.interval.reordered;
        self.interval.delay.merge(&other.interval.delay);
        if let (Some(mine), Some(theirs)) = (&mut self.log, other.log) {
            mine.extend(theirs.into_iter().map(|r| PacketRecord {
                flow: r.flow + offset,
                ..r
            }));
        }
    }

    /// Closes the current interval `[start_ns, end_ns)` (relative to the test start) and
    /// starts the next.
    pub fn take_interval(&mut self, index: u64, start_ns: u64, end_ns: u64) -> IntervalReport {
        let counters = std::mem::take(&mut self.interval);
        let span = end_ns.saturating_sub(start_ns);
        let delay = if self.round_trip.is_some() {
            counters.delay.summary()
        } else {
            // Relative to the whole test's minimum so far, so intervals compare.
            let overall_min = self.delay.summary().map_or(0.0, |s| s.min_ns);
            counters.delay.summary().map(|s| s.shifted(-overall_min))
        };
        IntervalReport {
            index,
            start_ns,
            end_ns,
            packets: counters.packets,
            bytes: counters.bytes,
            lost: counters.lost,
            reordered: counters.reordered,
            throughput_bps: rate_per_sec(counters.bytes * 8, span),
            packets_per_sec: rate_per_sec(counters.packets, span),
            delay,
            jitter_ns: self.mean_jitter(),
            tcp_info: None,
            schedule_error: None,
        }
    }

    fn mean_jitter(&self) -> f64 {
        let active: Vec<f64> = self
            .flows
            .iter()
            .filter(|f| f.first_arrival.is_some())
            .map(|f| f.jitter.value_ns())
            .collect();
        if active.is_empty() {
            0.0
        } else {
            active.iter().sum::<f64>() / active.len() as f64
        }
    }

    /// Whether this meter takes echoes (a loopback client), even before any arrived.
    pub fn expects_echoes(&self) -> bool {
        self.round_trip.is_some()
    }

    pub fn round_trip(&self) -> Option<LatencySummary> {
        self.round_trip.as_ref().and_then(LatencyStats::summary)
    }

    /// Takes the per-packet records gathered so far.
    pub fn take_log(&mut self) -> Vec<PacketRecord> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Each flow's figures, when the meter has more than one.
    fn flow_summaries(&self, counts: &[SeqCounts]) -> Vec<FlowReceiverSummary> {
        if self.flows.len() < 2 {
            return Vec::new();
        }
        let overall_min = self.delay.summary().map_or(0.0, |s| s.min_ns);
        (self.flows.iter().zip(counts).enumerate())
            .map(|(i, (f, c))| {
                let duration_ns = f
                    .first_arrival
                    .map_or(0, |a| f.last_arrival.saturating_sub(a));
                FlowReceiverSummary {
                    flow: i as u32,
                    packets: *c,
                    bytes_received: f.bytes,
                    duration_ns,
                    goodput_bps: rate_over_span(f.bytes * 8, c.unique, duration_ns),
                    loss_pct: loss_pct(c),
                    jitter_ns: f.jitter.value_ns(),
                    mean_relative_delay_ns: f.transit.mean().map_or(0.0, |m| m - overall_min),
                }
            })
            .collect()
    }

    /// The report; `sent` is the sender's per-flow packet counts when known (else what a
    /// sender announced in-band, at least what was seen), so tail losses count.
    pub fn report(&self, sent: Option<&[u64]>) -> ReceiverReport {
        // After a warm-up, what the sender sent from each flow's first measured number on.
        let sent_by = |i: usize| {
            let f = self.flows.get(i)?;
            let seen = || {
                let c = f.seq.counts();
                c.unique + c.lost
            };
            let announced = || {
                f.announced_sent
                    .map(|n| n.saturating_sub(f.base).max(seen()))
            };
            let given = sent
                .and_then(|s| s.get(i))
                .map(|n| n.saturating_sub(f.base));
            given.or_else(announced)
        };
        let counts: Vec<SeqCounts> = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| match sent_by(i) {
                Some(n) => f.seq.counts_with_sent(n),
                None => f.seq.counts(),
            })
            .collect();
        let runs: Vec<LossRuns> = (self.flows.iter().enumerate())
            .map(|(i, f)| f.seq.loss_runs(sent_by(i)))
            .collect();
        let packets = counts.iter().fold(SeqCounts::default(), |a, c| SeqCounts {
            received: a.received + c.received,
            unique: a.unique + c.unique,
            lost: a.lost + c.lost,
            reordered: a.reordered + c.reordered,
            duplicates: a.duplicates + c.duplicates,
        });
        let first = self.flows.iter().filter_map(|f| f.first_arrival).min();
        let last = self.flows.iter().map(|f| f.last_arrival).max().unwrap_or(0);
        let mut inter_arrival = Welford::new();
        for f in &self.flows {
            inter_arrival.merge(f.inter_arrival.gaps());
        }
        let drops: Vec<u64> = self.flows.iter().filter_map(|f| f.socket_drops).collect();
        let per_flow = self.flow_summaries(&counts);
        let arrival_clock = match (self.kernel_stamps, self.user_stamps) {
            (0, 0) => "none",
            (_, 0) => "kernel",
            (0, _) => "user",
            _ => "mixed",
        };
        ReceiverReport {
            packets,
            bytes_received: self.flows.iter().map(|f| f.bytes).sum(),
            malformed: self.malformed,
            socket_buffer_drops: (!drops.is_empty()).then(|| drops.iter().sum()),
            duration_ns: first.map_or(0, |first| last.saturating_sub(first)),
            relative_delay: self.delay.relative_summary(),
            transit_min_ns: self.delay.summary().map(|d| d.min_ns as i64),
            round_trip: self.round_trip(),
            round_trip_from_schedule: self.from_schedule.summary(),
            jitter_ns: self.mean_jitter(),
            inter_arrival: inter_arrival.summary(),
            inter_arrival_distribution: self.gaps.summary(),
            ipdv: self.ipdv.summary(),
            loss_periods: LossRuns::combine(&runs),
            arrival_clock: arrival_clock.to_string(),
            gro: false,
            flows: per_flow,
            warmup: self.omit.as_ref().map(|o| Warmup {
                packets_received: o.left_out,
                packets_sent: self.flows.iter().map(|f| f.base).sum(),
            }),
        }
    }
}

/// Lost packets in percent of those due (received once or lost); 0 when none were due.
pub fn loss_pct(c: &SeqCounts) -> f64 {
    match c.unique + c.lost {
        0 => 0.0,
        due => 100.0 * c.lost as f64 / due as f64,
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct FlowTx {
    packets: u64,
    bytes: u64,
    lost: LostBySender,
    first_send: Option<u64>,
    last_send: u64,
    /// A flow shaped to a contract: its departures measured against it, and its shaper's report.
    conformance: Option<ConformanceMeter>,
    shaper: Option<ContractReport>,
}

/// What a sender measures.
#[derive(Debug)]
pub struct SenderMeter {
    flows: Vec<FlowTx>,
    schedule_error: Option<LatencyStats>,
    /// Live: the schedule error handed to whoever reports intervals.
    live_schedule: Option<ScheduleWindow>,
    departure_error: LatencyStats,
    hardware_departures: u64,
    syscalls: u64,
    max_batch: u64,
    gso: bool,
    packet_socket: bool,
    pacing_spin_ns: u64,
    pacing: Option<PacingReport>,
    log: Option<Vec<PacketRecord>>,
}

impl SenderMeter {
    pub fn new(flows: usize, paced: bool, packet_log: bool) -> Self {
        SenderMeter {
            flows: vec![FlowTx::default(); flows.max(1)],
            schedule_error: paced.then(LatencyStats::new),
            live_schedule: None,
            departure_error: LatencyStats::new(),
            hardware_departures: 0,
            syscalls: 0,
            max_batch: 0,
            gso: false,
            packet_socket: false,
            pacing_spin_ns: 0,
            pacing: None,
            log: packet_log.then(Vec::new),
        }
    }

    /// Hands the schedule error to `watch` as it is measured (paced senders only).
    pub fn watch_schedule(&mut self, watch: Arc<ScheduleWatch>) {
        if self.schedule_error.is_some() {
            self.live_schedule = Some(ScheduleWindow::new(watch));
        }
    }

    /// A kernel transmit timestamp for a packet due at `deadline_ns` that left the stack at
    /// `departed_ns` (same clock); `hardware`: the NIC stamped it too.
    pub fn on_departure(&mut self, deadline_ns: u64, departed_ns: u64, hardware: bool) {
        self.departure_error
            .push(departed_ns as i64 - deadline_ns as i64);
        self.hardware_departures += u64::from(hardware);
    }

    /// Time spent busy-waiting for a deadline (the CPU cost of precise pacing).
    pub fn on_pacing_spin(&mut self, ns: u64) {
        self.pacing_spin_ns += ns;
    }

    /// How the sender waited for its deadlines (see [`PacingReport`]).
    pub fn set_pacing(&mut self, pacing: PacingReport) {
        self.pacing = Some(pacing);
    }

    /// One system call that handed `packets` to the kernel.
    pub fn on_batch(&mut self, packets: u64) {
        self.syscalls += 1;
        self.max_batch = self.max_batch.max(packets);
    }

    /// A packet the kernel accepted. `deadline_ns` is its slot on the pacing clock and
    /// `sent_mono_ns` when it left on that clock; `sent_ns` is its probe timestamp.
    pub fn on_sent(
        &mut self,
        flow: usize,
        seq: u64,
        size: u32,
        sent_ns: u64,
        deadline_ns: Option<u64>,
        sent_mono_ns: u64,
    ) {
        let Some(f) = self.flows.get_mut(flow) else {
            return;
        };
        f.packets += 1;
        f.bytes += u64::from(size);
        f.first_send.get_or_insert(sent_mono_ns);
        f.last_send = sent_mono_ns;
        if let Some(c) = &mut f.conformance {
            c.on_packet(sent_mono_ns, size);
        }
        if let (Some(errors), Some(deadline)) = (&mut self.schedule_error, deadline_ns) {
            let error = sent_mono_ns as i64 - deadline as i64;
            errors.push(error);
            if let Some(live) = &mut self.live_schedule {
                live.push(error, sent_mono_ns);
            }
        }
        if let Some(log) = &mut self.log {
            if log.len() < MAX_PACKET_RECORDS {
                log.push(PacketRecord {
                    flow: flow as u32,
                    seq,
                    size,
                    sent_ns: Some(sent_ns),
                    received_ns: None,
                    echoed_ns: None,
                });
            }
        }
    }

    pub fn on_send_buffer_full(&mut self, flow: usize, packets: u64) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.lost.send_buffer_full += packets;
        }
    }

    pub fn on_send_error(&mut self, flow: usize, packets: u64) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.lost.send_errors += packets;
        }
    }

    pub fn set_missed_slots(&mut self, flow: usize, missed: u64) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.lost.missed_slots = missed;
        }
    }

    /// Measures flow `flow`'s departures against the contract it is shaped to.
    pub fn hold_to_contract(&mut self, flow: usize, contract: ContractParams) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.conformance = Some(ConformanceMeter::new(contract));
        }
    }

    /// What flow `flow`'s shaper did (from its traffic source), at the end.
    pub fn set_shaper_report(&mut self, flow: usize, report: ContractReport) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.shaper = Some(report);
        }
    }

    /// The shaped flows against their contract (the first flow's contract is named).
    fn conformance(&self) -> Option<ContractConformance> {
        let shaped: Vec<&FlowTx> = self
            .flows
            .iter()
            .filter(|f| f.conformance.is_some())
            .collect();
        let contract = shaped.first()?.conformance?.contract();
        let mut shaper = ContractReport::default();
        for r in shaped.iter().filter_map(|f| f.shaper) {
            shaper.packets += r.packets;
            shaper.bytes += r.bytes;
            shaper.delayed += r.delayed;
            shaper.max_delay_ns = shaper.max_delay_ns.max(r.max_delay_ns);
            shaper.total_delay_ns = shaper.total_delay_ns.saturating_add(r.total_delay_ns);
            shaper.would_violate += r.would_violate;
            shaper.oversize += r.oversize;
        }
        Some(ContractConformance {
            contract,
            flows: shaped.len() as u32,
            shaper,
            max_excess_bytes: shaped
                .iter()
                .filter_map(|f| f.conformance.map(|c| c.max_excess_bytes()))
                .max()
                .unwrap_or(0),
        })
    }

    pub fn set_gso(&mut self, gso: bool) {
        self.gso = gso;
    }

    /// Whether the datagrams left through a packet socket.
    pub fn set_packet_socket(&mut self, packet_socket: bool) {
        self.packet_socket = packet_socket;
    }

    pub fn packets_sent(&self) -> u64 {
        self.flows.iter().map(|f| f.packets).sum()
    }

    /// Packets sent per flow, for the receiver's loss accounting.
    pub fn packets_per_flow(&self) -> Vec<u64> {
        self.flows.iter().map(|f| f.packets).collect()
    }

    /// Appends another meter's flows (a worker thread's share) and merges its distributions.
    pub fn absorb(&mut self, other: SenderMeter) {
        let offset = self.flows.len() as u32;
        self.flows.extend(other.flows);
        if let (Some(mine), Some(theirs)) = (&mut self.schedule_error, &other.schedule_error) {
            mine.merge(theirs);
        }
        self.departure_error.merge(&other.departure_error);
        self.hardware_departures += other.hardware_departures;
        self.syscalls += other.syscalls;
        self.max_batch = self.max_batch.max(other.max_batch);
        self.gso |= other.gso;
        self.packet_socket |= other.packet_socket;
        self.pacing_spin_ns += other.pacing_spin_ns;
        match (&mut self.pacing, &other.pacing) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            (None, theirs) => self.pacing.clone_from(theirs),
            _ => {}
        }
        if let (Some(mine), Some(theirs)) = (&mut self.log, other.log) {
            mine.extend(theirs.into_iter().map(|r| PacketRecord {
                flow: r.flow + offset,
                ..r
            }));
        }
    }

    pub fn take_log(&mut self) -> Vec<PacketRecord> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn report(&self) -> SenderReport {
        let packets = self.packets_sent();
        let lost = self
            .flows
            .iter()
            .fold(LostBySender::default(), |a, f| LostBySender {
                send_buffer_full: a.send_buffer_full + f.lost.send_buffer_full,
                missed_slots: a.missed_slots + f.lost.missed_slots,
                send_errors: a.send_errors + f.lost.send_errors,
            });
        let first = self.flows.iter().filter_map(|f| f.first_send).min();
        let last = self.flows.iter().map(|f| f.last_send).max().unwrap_or(0);
        let flows = if self.flows.len() > 1 {
            self.flows
                .iter()
                .enumerate()
                .map(|(i, f)| FlowSenderSummary {
                    flow: i as u32,
                    packets_sent: f.packets,
                    bytes_sent: f.bytes,
                    lost_by_sender: f.lost,
                    duration_ns: f.first_send.map_or(0, |s| f.last_send.saturating_sub(s)),
                })
                .collect()
        } else {
            Vec::new()
        };
        SenderReport {
            packets_sent: packets,
            bytes_sent: self.flows.iter().map(|f| f.bytes).sum(),
            lost_by_sender: lost,
            duration_ns: first.map_or(0, |first| last.saturating_sub(first)),
            schedule_error: self.schedule_error.as_ref().and_then(LatencyStats::summary),
            departure_error: self.departure_error.summary(),
            hardware_departures: self.hardware_departures,
            batching: Batching {
                syscalls: self.syscalls,
                mean_batch: if self.syscalls == 0 {
                    0.0
                } else {
                    packets as f64 / self.syscalls as f64
                },
                max_batch: self.max_batch,
                gso: self.gso,
                packet_socket: self.packet_socket,
            },
            pacing_spin_ns: self.pacing_spin_ns,
            pacing: self.pacing.clone(),
            flows,
            contract: self.conformance(),
        }
    }
}

/// What the requesting end of a request/response test measures, transaction by transaction.
/// Times are nanoseconds of one clock (CLOCK_MONOTONIC in the engine).
#[derive(Debug, Default)]
pub struct TransactionMeter {
    latency: LatencyStats,
    connect: Option<LatencyStats>,
    transactions: u64,
    connects: u64,
    request_bytes: u64,
    response_bytes: u64,
    timeouts: u64,
    errors: u64,
    first_start: Option<u64>,
    last_end: u64,
}

impl TransactionMeter {
    /// `connect_each`: a connection per transaction (CRR), whose setup times are kept.
    pub fn new(connect_each: bool) -> Self {
        TransactionMeter {
            connect: connect_each.then(LatencyStats::new),
            ..TransactionMeter::default()
        }
    }

    /// A connection established `ns` after its connect() began.
    pub fn on_connect(&mut self, ns: u64) {
        self.connects += 1;
        if let Some(c) = &mut self.connect {
            c.push(ns as i64);
        }
    }

    /// A request of `bytes` written (complete or not).
    pub fn on_request(&mut self, bytes: u32) {
        self.request_bytes += u64::from(bytes);
    }

    /// A transaction done: its request began at `started_ns`, its `response_bytes` were all
    /// read at `ended_ns`.
    pub fn on_transaction(&mut self, started_ns: u64, ended_ns: u64, response_bytes: u32) {
        self.transactions += 1;
        self.response_bytes += u64::from(response_bytes);
        self.latency
            .push(ended_ns.saturating_sub(started_ns) as i64);
        let first = *self.first_start.get_or_insert(started_ns);
        self.first_start = Some(first.min(started_ns));
        self.last_end = self.last_end.max(ended_ns);
    }

    pub fn on_timeout(&mut self) {
        self.timeouts += 1;
    }

    pub fn on_error(&mut self) {
        self.errors += 1;
    }

    pub fn transactions(&self) -> u64 {
        self.transactions
    }

    /// Merges another stream's meter (a concurrent flow).
    pub fn absorb(&mut self, other: TransactionMeter) {
        self.latency.merge(&other.latency);
        if let (Some(mine), Some(theirs)) = (&mut self.connect, &other.connect) {
            mine.merge(theirs);
        }
        self.transactions += other.transactions;
        self.connects += other.connects;
        self.request_bytes += other.request_bytes;
        self.response_bytes += other.response_bytes;
        self.timeouts += other.timeouts;
        self.errors += other.errors;
        self.first_start = match (self.first_start, other.first_start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_end = self.last_end.max(other.last_end);
    }

    pub fn report(&self) -> TransactionReport {
        let duration_ns = self
            .first_start
            .map_or(0, |first| self.last_end.saturating_sub(first));
        TransactionReport {
            transactions: self.transactions,
            duration_ns,
            transactions_per_sec: if duration_ns == 0 {
                0.0
            } else {
                self.transactions as f64 * 1e9 / duration_ns as f64
            },
            latency: self.latency.summary(),
            connect: self.connect.as_ref().and_then(LatencyStats::summary),
            connects: self.connects,
            request_bytes: self.request_bytes,
            response_bytes: self.response_bytes,
            timeouts: self.timeouts,
            errors: self.errors,
        }
    }
}

/// RFC 3393 IPDV of a flow's packets `seqs`, which share one transit time: the first against
/// the flow's previous highest packet when they are neighbours, then 0 for each neighbour
/// pair inside the train. Packets that arrive out of order break pairs rather than make them.
fn record_ipdv(ipdv: &mut LatencyStats, last: &mut Option<(u64, i64)>, seqs: &[u64], transit: i64) {
    let (Some(&first), Some(&highest)) = (seqs.first(), seqs.iter().max()) else {
        return;
    };
    if let Some((last_seq, last_transit)) = *last {
        if last_seq.checked_add(1) == Some(first) {
            ipdv.push(transit.saturating_sub(last_transit));
        }
        if highest <= last_seq {
            return;
        }
    }
    let inside = seqs
        .windows(2)
        .filter(|w| w[0].checked_add(1) == Some(w[1]))
        .count();
    ipdv.push_n(0, inside as u64);
    *last = Some((highest, transit));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_add_up_across_streams() {
        let mut a = TransactionMeter::new(true);
        a.on_connect(50_000);
        a.on_request(64);
        a.on_transaction(1_000_000, 1_200_000, 1000);
        let mut b = TransactionMeter::new(true);
        b.on_connect(70_000);
        b.on_request(64);
        b.on_transaction(1_100_000, 2_000_000, 1000);
        b.on_timeout();
        a.absorb(b);
        let r = a.report();
        assert_eq!((r.transactions, r.connects, r.timeouts), (2, 2, 1));
        assert_eq!((r.request_bytes, r.response_bytes), (128, 2000));
        assert_eq!(r.duration_ns, 1_000_000);
        assert!((r.transactions_per_sec - 2000.0).abs() < 1e-9);
        let latency = r.latency.unwrap();
        assert_eq!(latency.count, 2);
        assert!(latency.min_ns >= 199_000.0 && latency.max_ns <= 901_000.0);
        assert_eq!(r.connect.unwrap().count, 2);
        assert!(TransactionMeter::new(false).report().connect.is_none());
    }

    #[test]
    fn a_shaped_flow_reports_its_contract() {
        let contract = ContractParams {
            peak_rate_bps: 100_000,
            peak_bucket_bytes: 1500,
            sustained_rate_bps: 100_000,
            bucket_bytes: 10_000,
        };
        let mut m = SenderMeter::new(2, true, false);
        m.hold_to_contract(1, contract);
        for k in 0..5u64 {
            m.on_sent(0, k, 1500, 0, None, k);
            // 1500 B at 100 kb/s: 120 ms apart conforms.
            m.on_sent(1, k, 1500, 0, None, k * 120_000_000);
        }
        m.set_shaper_report(
            1,
            ContractReport {
                packets: 5,
                delayed: 4,
                ..ContractReport::default()
            },
        );
        let c = m.report().contract.unwrap();
        assert_eq!((c.flows, c.shaper.delayed, c.max_excess_bytes), (1, 4, 0));
        assert!(SenderMeter::new(1, true, false).report().contract.is_none());
    }

    fn arrived(seq: u64, sent_ns: u64, arrival_ns: u64) -> Arrived {
        Arrived {
            seq,
            size: 500,
            sent_ns,
            echoed_ns: None,
            arrival_ns,
            kernel_stamp: true,
        }
    }

    /// `--omit 500 ns`: packets 0..=9 every 100 ns, 0..=4 sent in the warm-up. 0..=2 arrive
    /// in it, slowly; 3 and 7 are lost; 4 arrives after 5, so it counts from then on. The
    /// numbers from 3 count: 5 arrived, 2 lost, 1 reordered.
    #[test]
    fn a_warmup_is_left_out_of_every_figure() {
        let mut m = ReceiverMeter::new(1, false, true).omitting(Some(500));
        for seq in [0, 1, 2, 5, 4, 6, 8, 9] {
            let slow = if seq < 3 { 1_000_000 } else { 10 };
            m.on_packet(0, arrived(seq, seq * 100, seq * 100 + slow));
        }
        m.on_packet(0, arrived(1, 100, 2_000)); // a late duplicate of the warm-up's
        let r = m.report(Some(&[10]));
        let counts = (r.packets.unique, r.packets.lost, r.packets.reordered);
        assert_eq!(counts, (5, 2, 1));
        assert_eq!(r.bytes_received, 2500);
        assert_eq!(
            r.relative_delay.unwrap().max_ns,
            0.0,
            "warm-up delays left out"
        );
        let w = r.warmup.unwrap();
        assert_eq!((w.packets_received, w.packets_sent), (4, 3));
        // The packet log keeps the real sequence numbers.
        let logged: Vec<u64> = m.take_log().iter().map(|r| r.seq).collect();
        assert_eq!(logged, [5, 4, 6, 8, 9]);
        assert!(ReceiverMeter::new(1, false, false)
            .report(None)
            .warmup
            .is_none());
    }

    /// iperf2's final datagram says 6 were sent: 0, 1 and 3 arrived, so 2, 4 and 5 are lost;
    /// a count from the sender's end wins, and an announced count below what arrived is
    /// not believed.
    #[test]
    fn an_announced_count_counts_the_tail_lost() {
        let mut m = ReceiverMeter::new(1, false, false);
        for seq in [0, 1, 3] {
            m.on_packet(0, arrived(seq, seq * 100, seq * 100 + 10));
        }
        assert_eq!(m.report(None).packets.lost, 1);
        m.set_announced_sent(0, 6);
        assert_eq!(m.report(None).packets.lost, 3);
        assert_eq!(m.report(Some(&[5])).packets.lost, 2);
        m.set_announced_sent(0, 2);
        assert_eq!(m.report(None).packets.lost, 1);
        m.set_announced_sent(7, 100); // no such flow: nothing
    }

    #[test]
    fn one_way_delay_is_relative_and_loss_counts_tail() {
        let mut m = ReceiverMeter::new(1, false, true);
        // Clocks 1 s apart: only the variation matters.
        m.on_packet(0, arrived(0, 0, 1_000_000_100));
        m.on_packet(0, arrived(1, 1_000, 1_000_001_300));
        m.on_packet(0, arrived(3, 3_000, 1_000_003_100));
        m.on_packet(0, arrived(3, 3_000, 1_000_003_200)); // duplicate: ignored
        let r = m.report(Some(&[5]));
        assert_eq!(r.packets.unique, 3);
        assert_eq!(r.packets.lost, 2);
        assert_eq!(r.packets.duplicates, 1);
        assert_eq!(r.bytes_received, 1500);
        let d = r.relative_delay.unwrap();
        assert_eq!(d.min_ns, 0.0);
        assert_eq!(d.max_ns, 200.0);
        assert_eq!(r.duration_ns, 3_000);
        assert_eq!(r.arrival_clock, "kernel");
        assert!(r.flows.is_empty(), "no per-flow table for one flow");
        assert_eq!(m.take_log().len(), 3);
        let i = m.take_interval(0, 0, 1_000_000_000);
        assert_eq!(i.packets, 3);
        assert_eq!(i.lost, 1);
        assert_eq!(i.throughput_bps, 12_000.0);
        assert_eq!(i.delay.unwrap().max_ns, 200.0);
        assert_eq!(m.take_interval(1, 1_000_000_000, 2_000_000_000).packets, 0);
    }

    /// Delays 100, 130, 110 µs, a loss, then 150 µs: IPDV +30 and -20 µs (the pair across
    /// the loss is undefined); loss periods of 1 and of 2 (the tail); gaps with percentiles.
    #[test]
    fn ipdv_loss_periods_and_gap_percentiles() {
        let mut m = ReceiverMeter::new(1, false, false);
        for (seq, delay_us) in [(0u64, 100u64), (1, 130), (2, 110), (4, 150)] {
            let sent = seq * 1_000_000;
            m.on_packet(0, arrived(seq, sent, sent + delay_us * 1_000));
        }
        let r = m.report(Some(&[7]));
        let ipdv = r.ipdv.expect("ipdv");
        assert_eq!(
            (ipdv.count, ipdv.min_ns, ipdv.max_ns),
            (2, -20_000.0, 30_000.0)
        );
        let loss = r.loss_periods.expect("loss periods");
        assert_eq!((loss.periods, loss.lost, loss.max_length), (2, 3, 2));
        // Lost 3, 5 and 6: distances 2 and 1.
        assert_eq!(loss.mean_distance, Some(1.5));
        let gaps = r.inter_arrival_distribution.expect("gaps");
        assert_eq!(
            (gaps.count, gaps.min_ns, gaps.max_ns),
            (3, 980_000.0, 2_040_000.0)
        );
        let clean = ReceiverMeter::new(1, false, false).report(None);
        assert_eq!((clean.ipdv, clean.loss_periods), (None, None));
    }

    /// A GRO train: its neighbours' IPDV is 0, and it pairs with the packet before it.
    #[test]
    fn ipdv_of_a_train() {
        let mut m = ReceiverMeter::new(1, false, false);
        m.on_packet(0, arrived(0, 0, 100_000));
        m.on_train(0, arrived(0, 1_000_000, 1_120_000), &[1, 2, 3]);
        let ipdv = m.report(None).ipdv.unwrap();
        assert_eq!((ipdv.count, ipdv.max_ns, ipdv.p50_ns), (3, 20_000.0, 0.0));
    }

    #[test]
    fn loopback_reports_round_trip_and_forward_delay() {
        let mut m = ReceiverMeter::new(1, true, false);
        for k in 0..4u64 {
            let sent = k * 1_000_000;
            m.on_packet(
                0,
                Arrived {
                    echoed_ns: Some(sent + 40_000 + k * 1_000),
                    ..arrived(k, sent, sent + 100_000 + k * 2_000)
                },
            );
        }
        let r = m.report(Some(&[4]));
        let rtt = r.round_trip.unwrap();
        assert_eq!(rtt.min_ns, 100_000.0);
        assert_eq!(rtt.count, 4);
        assert_eq!(r.relative_delay.unwrap().max_ns, 3_000.0);
    }

    /// A packet sent 3 ms after its slot: its round trip from departure is the path's
    /// 100 µs, from the schedule 3.1 ms; an echo on time has both equal, and a duplicate
    /// counts in neither.
    #[test]
    fn a_late_send_shows_in_the_round_trip_from_schedule() {
        let mut m = ReceiverMeter::new(1, true, false);
        let on_time = arrived(0, 1_000_000, 1_100_000);
        m.on_echo(0, on_time, Some(1_000_000));
        let late = arrived(1, 5_000_000, 5_100_000);
        m.on_echo(0, late, Some(2_000_000));
        m.on_echo(0, late, Some(2_000_000));
        m.on_echo(0, arrived(2, 6_000_000, 6_100_000), None);
        let r = m.report(None);
        let rtt = r.round_trip.unwrap();
        assert_eq!(
            (rtt.count, rtt.min_ns, rtt.max_ns),
            (3, 100_000.0, 100_000.0)
        );
        let due = r.round_trip_from_schedule.unwrap();
        assert_eq!(
            (due.count, due.min_ns, due.max_ns),
            (2, 100_000.0, 3_100_000.0)
        );
        let one_way = ReceiverMeter::new(1, false, false);
        assert_eq!(one_way.report(None).round_trip_from_schedule, None);
    }

    #[test]
    fn a_train_counts_like_its_packets_one_by_one() {
        let mut one_by_one = ReceiverMeter::new(1, false, true);
        let mut train = ReceiverMeter::new(1, false, true);
        let seqs = [0, 1, 3, 3, 2];
        for &seq in &seqs {
            one_by_one.on_packet(0, arrived(seq, 1_000, 5_000));
        }
        train.on_train(0, arrived(99, 1_000, 5_000), &seqs);
        let (a, b) = (one_by_one.report(Some(&[5])), train.report(Some(&[5])));
        assert_eq!(a.packets, b.packets);
        assert_eq!(a.bytes_received, b.bytes_received);
        assert_eq!(a.relative_delay, b.relative_delay);
        assert_eq!(a.inter_arrival, b.inter_arrival);
        assert!((a.jitter_ns - b.jitter_ns).abs() < 1e-9);
        assert_eq!(one_by_one.take_log(), train.take_log());
    }

    #[test]
    fn consecutive_trains_count_like_their_packets_without_a_log() {
        let mut one_by_one = ReceiverMeter::new(1, false, false);
        let mut trains = ReceiverMeter::new(1, false, false);
        let sent: [&[u64]; 5] = [&[0, 1, 2, 3], &[6, 7, 8], &[7, 8], &[4], &[20, 21]];
        for (i, seqs) in sent.iter().enumerate() {
            let t = i as u64 * 1_000;
            for &seq in seqs.iter() {
                one_by_one.on_packet(0, arrived(seq, t, t + 500));
            }
            trains.on_train(0, arrived(99, t, t + 500), seqs);
        }
        let (a, b) = (one_by_one.report(Some(&[22])), trains.report(Some(&[22])));
        assert_eq!(a.packets, b.packets);
        assert_eq!(a.bytes_received, b.bytes_received);
        assert_eq!(a.inter_arrival, b.inter_arrival);
        assert_eq!(b.packets.duplicates, 2);
        assert_eq!(b.packets.lost, 22 - 10);
    }

    #[test]
    fn flows_keep_their_own_sequence_spaces() {
        let mut m = ReceiverMeter::new(2, false, false);
        for seq in 0..3 {
            m.on_packet(0, arrived(seq, seq * 10, seq * 10 + 5));
            m.on_packet(1, arrived(seq, seq * 10, seq * 10 + 7));
        }
        m.on_packet(5, arrived(0, 0, 0)); // no such flow
        let r = m.report(Some(&[3, 4]));
        assert_eq!(r.packets.unique, 6);
        assert_eq!(r.packets.duplicates, 0);
        assert_eq!(r.packets.lost, 1);
        assert_eq!(r.malformed, 1);
        assert_eq!(r.flows.len(), 2);
        assert_eq!(r.flows[1].packets.lost, 1);
        assert_eq!(r.flows[1].mean_relative_delay_ns, 2.0);
        // Flow 1: 3 of 4 due, 3 payloads over 20 ns (2 gaps of 3).
        assert_eq!(r.flows[1].loss_pct, 25.0);
        assert_eq!(r.flows[0].loss_pct, 0.0);
        let bits = r.flows[1].bytes_received as f64 * 8.0;
        assert!((r.flows[1].goodput_bps - bits * 2.0 / 3.0 * 1e9 / 20.0).abs() < 1e-6);
        // A second worker's share joins as flows 2 and 3.
        let mut other = ReceiverMeter::new(2, false, false);
        other.on_packet(0, arrived(0, 0, 9));
        m.absorb(other);
        assert_eq!(m.report(None).flows.len(), 4);
        assert_eq!(m.packets_received(), 7);
    }

    #[test]
    fn absorbed_flows_keep_distinct_indices_in_the_packet_log() {
        let mut a = SenderMeter::new(2, false, true);
        a.on_sent(1, 0, 100, 5, None, 5);
        let mut b = SenderMeter::new(2, false, true);
        b.on_sent(1, 0, 100, 6, None, 6);
        a.absorb(b);
        let flows: Vec<u32> = a.take_log().iter().map(|r| r.flow).collect();
        assert_eq!(flows, vec![1, 3]);
        let mut a = ReceiverMeter::new(1, false, true);
        a.on_packet(0, arrived(0, 0, 1));
        let mut b = ReceiverMeter::new(1, false, true);
        b.on_packet(0, arrived(0, 0, 1));
        a.absorb(b);
        let flows: Vec<u32> = a.take_log().iter().map(|r| r.flow).collect();
        assert_eq!(flows, vec![0, 1]);
    }

    #[test]
    fn sender_counts_losses_and_schedule_error() {
        let mut m = SenderMeter::new(1, true, false);
        m.on_batch(2);
        m.on_sent(0, 0, 100, 5, Some(1_000), 1_010);
        m.on_sent(0, 1, 100, 6, Some(2_000), 2_030);
        m.on_send_buffer_full(0, 1);
        m.set_missed_slots(0, 4);
        let r = m.report();
        assert_eq!(r.packets_sent, 2);
        assert_eq!(r.lost_by_sender.total(), 5);
        assert_eq!(r.schedule_error.unwrap().max_ns, 30.0);
        assert_eq!(r.batching.mean_batch, 2.0);
        assert_eq!(r.duration_ns, 1_020);
        let mut other = SenderMeter::new(1, true, false);
        other.on_sent(0, 0, 100, 7, Some(3_000), 3_100);
        m.absorb(other);
        let r = m.report();
        assert_eq!(r.flows.len(), 2);
        assert_eq!(r.schedule_error.unwrap().max_ns, 100.0);
        assert_eq!(m.packets_per_flow(), vec![2, 1]);
    }
}
