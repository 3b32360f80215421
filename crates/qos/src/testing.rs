//! A tiny deterministic discrete-event loop, and a one-path TCP transfer built on it.
//!
//! [`EventQueue`] is a binary heap of `(time, insertion number, event)`: events at the same
//! time come out in the order they were scheduled, so a run is a pure function of its inputs
//! (no clock, no randomness, no hash iteration order). The pattern for driving sans-IO
//! elements, used by [`run_transfer`]:
//!
//! 1. pop the earliest event and feed it to its element;
//! 2. "pump": drain every element's `poll_transmit(now)` and schedule what comes out (after a
//!    propagation delay, into the next element);
//! 3. schedule a wake-up at each element's `poll_timeout()` if it changed (stale wake-ups are
//!    harmless: the element has nothing to do).
//!
//! [`run_transfer`] wires a [`TcpSender`] through a FIFO bottleneck [`Port`] and a fixed
//! one-way delay to a [`TcpReceiver`], whose ACKs return over a pure delay (no queue).

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use crate::classify::Classifier;
use crate::sched::{Counters, Fifo, Port, QueueLimit, Scheduler};
use crate::tcp::{connect, Ack, ReceiverConfig, Segment, SenderConfig, TcpReceiver, TcpSender};
use crate::{PacketMeta, QosError, Verdict};

struct Entry<E> {
    at: u64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl<E> Eq for Entry<E> {}

impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> Ord for Entry<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A deterministic future-event list with a virtual clock.
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    next_seq: u64,
    now: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_seq: 0,
            now: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn new() -> EventQueue<E> {
        EventQueue::default()
    }

    /// Schedules `event` at `at_ns`; a time in the past is moved to now (time never runs
    /// backwards).
    pub fn schedule(&mut self, at_ns: u64, event: E) {
        let at = at_ns.max(self.now);
        self.heap.push(Reverse(Entry {
            at,
            seq: self.next_seq,
            event,
        }));
        self.next_seq += 1;
    }

    /// The earliest event, advancing the clock to its time.
    pub fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse(e) = self.heap.pop()?;
        self.now = e.at;
        Some((e.at, e.event))
    }

    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    pub fn now(&self) -> u64 {
        self.now
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// The forward path of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathConfig {
    /// Propagation delay each way (the RTT is twice this plus serialization and queueing).
    pub one_way_delay_ns: u64,
    /// Bottleneck line rate for data segments.
    pub bottleneck_bps: u64,
    /// Bottleneck buffer (tail drop).
    pub buffer: QueueLimit,
}

/// A whole transfer's set-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferConfig {
    pub path: PathConfig,
    pub sender: SenderConfig,
    pub receiver: ReceiverConfig,
    /// Simulated time at which the run stops.
    pub until_ns: u64,
    /// Record a [`TraceEvent`] for every segment and ACK.
    pub trace: bool,
}

/// What happened, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceEvent {
    Sent {
        t: u64,
        seg: Segment,
    },
    /// Dropped by the caller's loss function.
    Lost {
        t: u64,
        seg: Segment,
    },
    /// Tail-dropped at the bottleneck.
    QueueDrop {
        t: u64,
        seg: Segment,
    },
    Delivered {
        t: u64,
        seg: Segment,
    },
    AckSent {
        t: u64,
        ack: Ack,
    },
    AckReceived {
        t: u64,
        ack: u64,
        cwnd: u64,
        ssthresh: u64,
    },
    /// The sender's retransmission timer fired; `rto` is the backed-off value.
    Timeout {
        t: u64,
        rto: u64,
    },
}

/// The end state of a transfer.
#[derive(Debug, Clone)]
pub struct TransferReport {
    pub sender: TcpSender,
    pub receiver: TcpReceiver,
    pub port_counters: Counters,
    pub trace: Vec<TraceEvent>,
    /// `(time, in-order bytes delivered)` after each segment arrival.
    pub deliveries: Vec<(u64, u64)>,
    pub end_ns: u64,
}

impl TransferReport {
    /// In-order bytes delivered by `t_ns`.
    pub fn delivered_at(&self, t_ns: u64) -> u64 {
        let i = self.deliveries.partition_point(|&(t, _)| t <= t_ns);
        if i == 0 {
            0
        } else {
            self.deliveries[i - 1].1
        }
    }

    /// Application goodput (bit/s) between two times.
    pub fn goodput_bps(&self, from_ns: u64, to_ns: u64) -> f64 {
        if to_ns <= from_ns {
            return 0.0;
        }
        let bytes = self.delivered_at(to_ns) - self.delivered_at(from_ns);
        bytes as f64 * 8.0 * 1e9 / (to_ns - from_ns) as f64
    }
}

enum Ev {
    Wake,
    SegmentArrives(Segment),
    AckArrives(Ack),
}

/// Runs one TCP transfer over `cfg.path` until `cfg.until_ns` (or until a fixed-size transfer
/// is acknowledged). `lose(now, segment)` decides which segments vanish before the bottleneck.
pub fn run_transfer(
    cfg: &TransferConfig,
    lose: &mut dyn FnMut(u64, &Segment) -> bool,
) -> Result<TransferReport, QosError> {
    let (mut tx, mut rx) = connect(cfg.sender, cfg.receiver)?;
    let fifo = Fifo::new(1, cfg.path.buffer)?;
    let mut port = Port::new(cfg.path.bottleneck_bps, fifo, Classifier::new(0))?;
    let delay = cfg.path.one_way_delay_ns;
    let mut q: EventQueue<Ev> = EventQueue::new();
    let mut in_port: HashMap<u64, Segment> = HashMap::new();
    let mut next_id = 0u64;
    let mut trace = Vec::new();
    let mut deliveries = Vec::new();
    let mut wakes: [Option<u64>; 3] = [None; 3];
    let mut now = 0;
    let mut record = |e: TraceEvent| {
        if cfg.trace {
            trace.push(e);
        }
    };

    let mut event = Some(Ev::Wake);
    while let Some(ev) = event.take() {
        match ev {
            Ev::Wake => {}
            Ev::SegmentArrives(seg) => {
                rx.on_segment(now, &seg);
                deliveries.push((now, rx.delivered()));
                record(TraceEvent::Delivered { t: now, seg });
            }
            Ev::AckArrives(ack) => {
                tx.on_ack(now, &ack);
                record(TraceEvent::AckReceived {
                    t: now,
                    ack: ack.ack,
                    cwnd: tx.cwnd(),
                    ssthresh: tx.ssthresh(),
                });
            }
        }
        // Pump.
        let timeouts = tx.stats().timeouts;
        tx.handle_timeout(now);
        if tx.stats().timeouts != timeouts {
            record(TraceEvent::Timeout {
                t: now,
                rto: tx.rto_ns(),
            });
        }
        while let Some(seg) = tx.poll_transmit(now) {
            record(TraceEvent::Sent { t: now, seg });
            if lose(now, &seg) {
                record(TraceEvent::Lost { t: now, seg });
                continue;
            }
            let pkt = PacketMeta::new(next_id, 0, seg.wire_size, now);
            if port.enqueue(now, pkt) == Verdict::Queued {
                in_port.insert(next_id, seg);
            } else {
                record(TraceEvent::QueueDrop { t: now, seg });
            }
            next_id += 1;
        }
        while let Some(d) = port.poll_transmit(now) {
            if let Some(seg) = in_port.remove(&d.packet.id) {
                q.schedule(d.end_ns.saturating_add(delay), Ev::SegmentArrives(seg));
            }
        }
        while let Some(ack) = rx.poll_transmit(now) {
            record(TraceEvent::AckSent { t: now, ack });
            q.schedule(now.saturating_add(delay), Ev::AckArrives(ack));
        }
        let timers = [tx.poll_timeout(), port.poll_timeout(), rx.poll_timeout()];
        for (w, t) in wakes.iter_mut().zip(timers) {
            if let Some(t) = t {
                if *w != Some(t) && t > now {
                    q.schedule(t, Ev::Wake);
                    *w = Some(t);
                }
            }
        }
        if tx.is_finished() {
            break;
        }
        match q.pop() {
            Some((t, ev)) if t <= cfg.until_ns => {
                now = t;
                event = Some(ev);
            }
            _ => {}
        }
    }
    Ok(TransferReport {
        port_counters: port.scheduler().counters(0).unwrap_or_default(),
        sender: tx,
        receiver: rx,
        trace,
        deliveries,
        end_ns: now,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_in_time_then_insertion_order() {
        let mut q = EventQueue::new();
        q.schedule(5, "c");
        q.schedule(1, "a");
        q.schedule(5, "d");
        q.schedule(1, "b");
        assert_eq!(q.peek_time(), Some(1));
        let out: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(out, vec![(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
        assert_eq!(q.now(), 5);
        q.schedule(2, "late");
        assert_eq!(q.pop(), Some((5, "late")));
        assert!(q.is_empty());
    }

    #[test]
    fn fixed_transfer_completes_and_reports() {
        let cfg = TransferConfig {
            path: PathConfig {
                one_way_delay_ns: 10_000_000,
                bottleneck_bps: 100_000_000,
                buffer: QueueLimit::Packets(100),
            },
            sender: SenderConfig {
                data: crate::tcp::Data::Bytes(100_000),
                ..SenderConfig::default()
            },
            receiver: ReceiverConfig::default(),
            until_ns: 10_000_000_000,
            trace: false,
        };
        let rep = run_transfer(&cfg, &mut |_, _| false).unwrap();
        assert!(rep.sender.is_finished());
        assert_eq!(rep.receiver.delivered(), 100_000);
        assert_eq!(rep.delivered_at(u64::MAX), 100_000);
        assert!(rep.trace.is_empty());
        assert!(rep.end_ns > 20_000_000 && rep.end_ns < 1_000_000_000);
    }
}
