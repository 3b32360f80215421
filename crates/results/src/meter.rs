//! Meters: sans-IO accumulators that turn per-packet events into reports. The real engine, the
//! emulator and the simulator all feed them, each with its own clock.

use flowlab_stats::{rate_per_sec, Arrival, InterArrival, LatencyStats, Rfc3550Jitter, SeqTracker};

use crate::{Batching, IntervalReport, LostBySender, PacketRecord, ReceiverReport, SenderReport};

/// Cap on per-packet records kept in memory (about 400 MB); past it recording stops.
pub const MAX_PACKET_RECORDS: usize = 10_000_000;

/// What a receiver measures. Times are nanoseconds of one clock, comparable to the senders'
/// `sent_ns` stamps (CLOCK_REALTIME in the real engine).
#[derive(Debug)]
pub struct ReceiverMeter {
    seq: SeqTracker,
    bytes: u64,
    malformed: u64,
    socket_drops: Option<u64>,
    delay: LatencyStats,
    /// Loopback only: arrival back at the client minus send time.
    round_trip: Option<LatencyStats>,
    jitter: Rfc3550Jitter,
    inter_arrival: InterArrival,
    first_arrival: Option<u64>,
    last_arrival: u64,
    kernel_stamps: u64,
    user_stamps: u64,
    interval: IntervalCounters,
    log: Option<Vec<PacketRecord>>,
}

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
struct IntervalCounters {
    packets: u64,
    bytes: u64,
    lost: u64,
    delay: LatencyStats,
}

impl ReceiverMeter {
    /// `round_trip`: echoes come back to this meter (loopback test at the client).
    pub fn new(round_trip: bool, packet_log: bool) -> Self {
        ReceiverMeter {
            seq: SeqTracker::new(),
            bytes: 0,
            malformed: 0,
            socket_drops: None,
            delay: LatencyStats::new(),
            round_trip: round_trip.then(LatencyStats::new),
            jitter: Rfc3550Jitter::new(),
            inter_arrival: InterArrival::new(),
            first_arrival: None,
            last_arrival: 0,
            kernel_stamps: 0,
            user_stamps: 0,
            interval: IntervalCounters::default(),
            log: packet_log.then(Vec::new),
        }
    }

    pub fn on_packet(&mut self, p: Arrived) {
        match self.seq.on_packet(p.seq) {
            Arrival::Duplicate => return,
            Arrival::Gap { missing } => self.interval.lost += missing,
            Arrival::Late => self.interval.lost = self.interval.lost.saturating_sub(1),
            Arrival::InOrder | Arrival::TooOld => {}
        }
        self.bytes += u64::from(p.size);
        self.interval.packets += 1;
        self.interval.bytes += u64::from(p.size);
        if p.kernel_stamp {
            self.kernel_stamps += 1;
        } else {
            self.user_stamps += 1;
        }
        self.first_arrival.get_or_insert(p.arrival_ns);
        self.last_arrival = self.last_arrival.max(p.arrival_ns);
        self.inter_arrival.push(p.arrival_ns);
        // One-way: to the agent when echoed, else to here. Clocks may differ: only relative
        // values of this difference are reported.
        let one_way_end = p.echoed_ns.unwrap_or(p.arrival_ns);
        let transit = one_way_end as i64 - p.sent_ns as i64;
        self.delay.push(transit);
        self.jitter.push(transit);
        match &mut self.round_trip {
            Some(rtt) => {
                let value = p.arrival_ns as i64 - p.sent_ns as i64;
                rtt.push(value);
                self.interval.delay.push(value);
            }
            None => self.interval.delay.push(transit),
        }
        if let Some(log) = &mut self.log {
            if log.len() < MAX_PACKET_RECORDS {
                log.push(PacketRecord {
                    seq: p.seq,
                    size: p.size,
                    sent_ns: Some(p.sent_ns),
                    received_ns: Some(p.arrival_ns),
                    echoed_ns: p.echoed_ns,
                });
            }
        }
    }

    /// A datagram that was not a probe of this session.
    pub fn on_malformed(&mut self) {
        self.malformed += 1;
    }

    /// Cumulative socket-buffer drops reported by the kernel.
    pub fn set_socket_drops(&mut self, drops: u64) {
        self.socket_drops = Some(drops);
    }

    pub fn packets_received(&self) -> u64 {
        self.seq.counts().unique
    }

    /// Closes the current interval `[start_ns, end_ns)` (relative to the test start) and
    /// starts the next.
    pub fn take_interval(&mut self, index: u64, start_ns: u64, end_ns: u64) -> IntervalReport {
        let counters = std::mem::take(&mut self.interval);
        let span = end_ns.saturating_sub(start_ns);
        let delay = if self.round_trip.is_some() {
            counters.delay.summary()
        } else {
            self.relative_interval_delay(&counters.delay)
        };
        IntervalReport {
            index,
            start_ns,
            end_ns,
            packets: counters.packets,
            bytes: counters.bytes,
            lost: counters.lost,
            throughput_bps: rate_per_sec(counters.bytes * 8, span),
            packets_per_sec: rate_per_sec(counters.packets, span),
            delay,
            jitter_ns: self.jitter.value_ns(),
            tcp_info: None,
        }
    }

    /// An interval's one-way delays relative to the whole test's minimum so far, so that
    /// intervals are comparable with each other.
    fn relative_interval_delay(
        &self,
        interval: &LatencyStats,
    ) -> Option<flowlab_stats::LatencySummary> {
        let overall_min = self.delay.summary()?.min_ns;
        let s = interval.summary()?;
        Some(flowlab_stats::LatencySummary {
            min_ns: s.min_ns - overall_min,
            mean_ns: s.mean_ns - overall_min,
            max_ns: s.max_ns - overall_min,
            p50_ns: s.p50_ns - overall_min,
            p90_ns: s.p90_ns - overall_min,
            p99_ns: s.p99_ns - overall_min,
            p999_ns: s.p999_ns - overall_min,
            ..s
        })
    }

    pub fn round_trip(&self) -> Option<flowlab_stats::LatencySummary> {
        self.round_trip.as_ref().and_then(LatencyStats::summary)
    }

    /// Takes the per-packet records gathered so far.
    pub fn take_log(&mut self) -> Vec<PacketRecord> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The report; `sent` is the sender's packet count when known, so tail losses count.
    pub fn report(&self, sent: Option<u64>) -> ReceiverReport {
        let packets = match sent {
            Some(sent) => self.seq.counts_with_sent(sent),
            None => self.seq.counts(),
        };
        let arrival_clock = match (self.kernel_stamps, self.user_stamps) {
            (0, 0) => "none",
            (_, 0) => "kernel",
            (0, _) => "user",
            _ => "mixed",
        };
        ReceiverReport {
            packets,
            bytes_received: self.bytes,
            malformed: self.malformed,
            socket_buffer_drops: self.socket_drops,
            duration_ns: self
                .first_arrival
                .map_or(0, |first| self.last_arrival.saturating_sub(first)),
            relative_delay: self.delay.relative_summary(),
            round_trip: self.round_trip(),
            jitter_ns: self.jitter.value_ns(),
            inter_arrival: self.inter_arrival.summary(),
            arrival_clock: arrival_clock.to_string(),
        }
    }
}

/// What a sender measures.
#[derive(Debug)]
pub struct SenderMeter {
    packets: u64,
    bytes: u64,
    lost: LostBySender,
    schedule_error: Option<LatencyStats>,
    first_send: Option<u64>,
    last_send: u64,
    syscalls: u64,
    max_batch: u64,
    gso: bool,
    log: Option<Vec<PacketRecord>>,
}

impl SenderMeter {
    pub fn new(paced: bool, packet_log: bool) -> Self {
        SenderMeter {
            packets: 0,
            bytes: 0,
            lost: LostBySender::default(),
            schedule_error: paced.then(LatencyStats::new),
            first_send: None,
            last_send: 0,
            syscalls: 0,
            max_batch: 0,
            gso: false,
            log: packet_log.then(Vec::new),
        }
    }

    /// One batch handed to the kernel at `now_ns` (same clock as `deadline_ns`).
    pub fn on_batch(&mut self, packets: u64) {
        self.syscalls += 1;
        self.max_batch = self.max_batch.max(packets);
    }

    /// A packet the kernel accepted. `deadline_ns` is its slot on the pacing clock and
    /// `sent_mono_ns` when it left on that clock; `sent_ns` is its probe timestamp.
    pub fn on_sent(
        &mut self,
        seq: u64,
        size: u32,
        sent_ns: u64,
        deadline_ns: Option<u64>,
        sent_mono_ns: u64,
    ) {
        self.packets += 1;
        self.bytes += u64::from(size);
        self.first_send.get_or_insert(sent_mono_ns);
        self.last_send = sent_mono_ns;
        if let (Some(errors), Some(deadline)) = (&mut self.schedule_error, deadline_ns) {
            errors.push(sent_mono_ns as i64 - deadline as i64);
        }
        if let Some(log) = &mut self.log {
            if log.len() < MAX_PACKET_RECORDS {
                log.push(PacketRecord {
                    seq,
                    size,
                    sent_ns: Some(sent_ns),
                    received_ns: None,
                    echoed_ns: None,
                });
            }
        }
    }

    pub fn on_send_buffer_full(&mut self, packets: u64) {
        self.lost.send_buffer_full += packets;
    }

    pub fn on_send_error(&mut self, packets: u64) {
        self.lost.send_errors += packets;
    }

    pub fn set_missed_slots(&mut self, missed: u64) {
        self.lost.missed_slots = missed;
    }

    pub fn set_gso(&mut self, gso: bool) {
        self.gso = gso;
    }

    pub fn packets_sent(&self) -> u64 {
        self.packets
    }

    pub fn take_log(&mut self) -> Vec<PacketRecord> {
        self.log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn report(&self) -> SenderReport {
        SenderReport {
            packets_sent: self.packets,
            bytes_sent: self.bytes,
            lost_by_sender: self.lost,
            duration_ns: self
                .first_send
                .map_or(0, |first| self.last_send.saturating_sub(first)),
            schedule_error: self.schedule_error.as_ref().and_then(LatencyStats::summary),
            batching: Batching {
                syscalls: self.syscalls,
                mean_batch: if self.syscalls == 0 {
                    0.0
                } else {
                    self.packets as f64 / self.syscalls as f64
                },
                max_batch: self.max_batch,
                gso: self.gso,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn one_way_delay_is_relative_and_loss_counts_tail() {
        let mut m = ReceiverMeter::new(false, true);
        // Clocks 1 s apart: only the variation matters.
        m.on_packet(arrived(0, 0, 1_000_000_100));
        m.on_packet(arrived(1, 1_000, 1_000_001_300));
        m.on_packet(arrived(3, 3_000, 1_000_003_100));
        m.on_packet(arrived(3, 3_000, 1_000_003_200)); // duplicate: ignored
        let r = m.report(Some(5));
        assert_eq!(r.packets.unique, 3);
        assert_eq!(r.packets.lost, 2);
        assert_eq!(r.packets.duplicates, 1);
        assert_eq!(r.bytes_received, 1500);
        let d = r.relative_delay.unwrap();
        assert_eq!(d.min_ns, 0.0);
        assert_eq!(d.max_ns, 200.0);
        assert_eq!(r.duration_ns, 3_000);
        assert_eq!(r.arrival_clock, "kernel");
        assert_eq!(m.take_log().len(), 3);
        let i = m.take_interval(0, 0, 1_000_000_000);
        assert_eq!(i.packets, 3);
        assert_eq!(i.lost, 1);
        assert_eq!(i.throughput_bps, 12_000.0);
        assert_eq!(m.take_interval(1, 1_000_000_000, 2_000_000_000).packets, 0);
    }

    #[test]
    fn loopback_reports_round_trip_and_forward_delay() {
        let mut m = ReceiverMeter::new(true, false);
        for k in 0..4u64 {
            let sent = k * 1_000_000;
            m.on_packet(Arrived {
                echoed_ns: Some(sent + 40_000 + k * 1_000),
                ..arrived(k, sent, sent + 100_000 + k * 2_000)
            });
        }
        let r = m.report(Some(4));
        let rtt = r.round_trip.unwrap();
        assert_eq!(rtt.min_ns, 100_000.0);
        assert_eq!(rtt.count, 4);
        assert_eq!(r.relative_delay.unwrap().max_ns, 3_000.0);
    }

    #[test]
    fn sender_counts_losses_and_schedule_error() {
        let mut m = SenderMeter::new(true, false);
        m.on_batch(2);
        m.on_sent(0, 100, 5, Some(1_000), 1_010);
        m.on_sent(1, 100, 6, Some(2_000), 2_030);
        m.on_send_buffer_full(1);
        m.set_missed_slots(4);
        let r = m.report();
        assert_eq!(r.packets_sent, 2);
        assert_eq!(r.lost_by_sender.total(), 5);
        assert_eq!(r.schedule_error.unwrap().max_ns, 30.0);
        assert_eq!(r.batching.mean_batch, 2.0);
        assert_eq!(r.duration_ns, 1_020);
    }
}
