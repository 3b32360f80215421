//! Output-port scheduling: per-class queues, the disciplines that pick the next packet, and a
//! [`Port`] that serializes packets at a line rate.
//!
//! Every class is a FIFO with its own buffer limit ([`QueueLimit`], tail drop) and counters, so
//! packets of one class are never reordered (RFC 2597's rule for a microflow within an AF
//! class). The disciplines:
//!
//! - [`Fifo`]: one shared queue (one limit), counters kept per class.
//! - [`StrictPriority`]: class 0 first, then 1, … Non-preemptive at packet level: the port never
//!   interrupts a transmission, so a top-priority packet may wait one lower-priority packet's
//!   residual transmission time (at most `L_max / C`).
//! - [`Wfq`]: **WF²Q+** (Bennett and Zhang, 1997): per-class start and finish tags, a system
//!   virtual time `V ← max(V + L, min S_i)`, and service of the smallest finish tag among
//!   classes whose start tag is ≤ V. Chosen over SCFQ for its worst-case fairness (no class runs
//!   ahead of its GPS share by more than one packet) with only per-class (not per-packet)
//!   state. Tags are integers in units of `1/65536` byte, so rounding is negligible and there
//!   are no floats.
//! - [`Drr`]: Deficit Round Robin (Shreedhar and Varghese, 1995), a quantum in bytes per class.
//!   Rounds in which no class can send are skipped arithmetically, so a small quantum costs no
//!   loop iterations.
//! - [`PqWfq`]: strict priority for the first `k` classes (the premium queues), WF²Q+ over the
//!   rest, which share only what the priority classes leave (AQUILA's edge scheduler).
//!
//! Schedulers are work-conserving and know nothing of time except to record when a packet was
//! enqueued; the [`Port`] adds the line rate.

use std::collections::VecDeque;

use crate::classify::Classifier;
use crate::{DropReason, PacketMeta, QosError, Verdict};

/// A class buffer's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many packets.
    Packets(u32),
    /// At most this many bytes (a packet is dropped if it would exceed the limit).
    Bytes(u64),
    /// No limit (for tests and lossless models).
    Unlimited,
}

impl QueueLimit {
    /// Whether a queue holding `packets`/`bytes` can take one more packet of `size` bytes.
    pub fn admits(&self, packets: usize, bytes: u64, size: u32) -> bool {
        match *self {
            QueueLimit::Packets(n) => packets < n as usize,
            QueueLimit::Bytes(b) => bytes.saturating_add(u64::from(size)) <= b,
            QueueLimit::Unlimited => true,
        }
    }
}

/// Per-class counters: packets and bytes enqueued, sent and dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    pub dropped: u64,
    pub dropped_bytes: u64,
}

impl Counters {
    pub(crate) fn enqueue(&mut self, size: u32) {
        self.enqueued += 1;
        self.enqueued_bytes += u64::from(size);
    }

    pub(crate) fn send(&mut self, size: u32) {
        self.sent += 1;
        self.sent_bytes += u64::from(size);
    }

    pub(crate) fn drop(&mut self, size: u32) {
        self.dropped += 1;
        self.dropped_bytes += u64::from(size);
    }
}

/// A packet leaving a scheduler: its class and when it was enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dequeued {
    pub class: usize,
    pub packet: PacketMeta,
    pub enqueued_ns: u64,
}

/// One class's FIFO with a limit and counters.
#[derive(Debug, Clone)]
pub struct ClassQueue {
    q: VecDeque<Dequeued>,
    bytes: u64,
    limit: QueueLimit,
    counters: Counters,
}

impl ClassQueue {
    pub fn new(limit: QueueLimit) -> ClassQueue {
        ClassQueue {
            q: VecDeque::new(),
            bytes: 0,
            limit,
            counters: Counters::default(),
        }
    }

    fn push(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        if !self.limit.admits(self.q.len(), self.bytes, packet.size) {
            self.counters.drop(packet.size);
            return Verdict::Dropped(DropReason::QueueFull);
        }
        self.q.push_back(Dequeued {
            class,
            packet,
            enqueued_ns: now_ns,
        });
        self.bytes += u64::from(packet.size);
        self.counters.enqueue(packet.size);
        Verdict::Queued
    }

    fn pop(&mut self) -> Option<Dequeued> {
        let d = self.q.pop_front()?;
        self.bytes -= u64::from(d.packet.size);
        self.counters.send(d.packet.size);
        Some(d)
    }

    fn head_size(&self) -> Option<u32> {
        self.q.front().map(|d| d.packet.size)
    }

    pub fn len(&self) -> usize {
        self.q.len()
    }

    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn limit(&self) -> QueueLimit {
        self.limit
    }

    pub fn counters(&self) -> &Counters {
        &self.counters
    }
}

/// A queueing discipline over numbered classes.
pub trait Scheduler {
    fn num_classes(&self) -> usize;

    /// Offers a packet to `class` at `now_ns`; tail-drops it if the class buffer is full.
    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict;

    /// The next packet to transmit, if any.
    fn dequeue(&mut self, now_ns: u64) -> Option<Dequeued>;

    /// Counters of `class`, `None` if it does not exist.
    fn counters(&self, class: usize) -> Option<Counters>;

    /// Packets and bytes waiting in `class` (for FIFO: the class's share of the shared queue).
    fn backlog(&self, class: usize) -> Option<(usize, u64)>;

    fn is_empty(&self) -> bool;
}

fn queues(limits: &[QueueLimit]) -> Result<Vec<ClassQueue>, QosError> {
    if limits.is_empty() {
        return Err(QosError::NoClasses);
    }
    Ok(limits.iter().map(|&l| ClassQueue::new(l)).collect())
}

/// First come, first served over all classes, one shared buffer.
#[derive(Debug, Clone)]
pub struct Fifo {
    queue: ClassQueue,
    counters: Vec<Counters>,
    backlog: Vec<(usize, u64)>,
}

impl Fifo {
    /// `classes` only sizes the per-class counters; `limit` bounds the shared buffer.
    pub fn new(classes: usize, limit: QueueLimit) -> Result<Fifo, QosError> {
        if classes == 0 {
            return Err(QosError::NoClasses);
        }
        Ok(Fifo {
            queue: ClassQueue::new(limit),
            counters: vec![Counters::default(); classes],
            backlog: vec![(0, 0); classes],
        })
    }
}

impl Scheduler for Fifo {
    fn num_classes(&self) -> usize {
        self.counters.len()
    }

    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        let Some(c) = self.counters.get_mut(class) else {
            return Verdict::Dropped(DropReason::NoSuchClass);
        };
        let v = self.queue.push(now_ns, class, packet);
        if v == Verdict::Queued {
            c.enqueue(packet.size);
            let b = &mut self.backlog[class];
            b.0 += 1;
            b.1 += u64::from(packet.size);
        } else {
            c.drop(packet.size);
        }
        v
    }

    fn dequeue(&mut self, _now_ns: u64) -> Option<Dequeued> {
        let d = self.queue.pop()?;
        if let Some(c) = self.counters.get_mut(d.class) {
            c.send(d.packet.size);
            let b = &mut self.backlog[d.class];
            b.0 -= 1;
            b.1 -= u64::from(d.packet.size);
        }
        Some(d)
    }

    fn counters(&self, class: usize) -> Option<Counters> {
        self.counters.get(class).copied()
    }

    fn backlog(&self, class: usize) -> Option<(usize, u64)> {
        self.backlog.get(class).copied()
    }

    fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Strict (non-preemptive) priority: the lowest-numbered non-empty class is served first.
#[derive(Debug, Clone)]
pub struct StrictPriority {
    queues: Vec<ClassQueue>,
}

impl StrictPriority {
    /// One class per limit, highest priority first.
    pub fn new(limits: &[QueueLimit]) -> Result<StrictPriority, QosError> {
        Ok(StrictPriority {
            queues: queues(limits)?,
        })
    }
}

impl Scheduler for StrictPriority {
    fn num_classes(&self) -> usize {
        self.queues.len()
    }

    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        match self.queues.get_mut(class) {
            Some(q) => q.push(now_ns, class, packet),
            None => Verdict::Dropped(DropReason::NoSuchClass),
        }
    }

    fn dequeue(&mut self, _now_ns: u64) -> Option<Dequeued> {
        self.queues.iter_mut().find(|q| !q.is_empty())?.pop()
    }

    fn counters(&self, class: usize) -> Option<Counters> {
        self.queues.get(class).map(|q| q.counters)
    }

    fn backlog(&self, class: usize) -> Option<(usize, u64)> {
        self.queues.get(class).map(|q| (q.len(), q.bytes))
    }

    fn is_empty(&self) -> bool {
        self.queues.iter().all(ClassQueue::is_empty)
    }
}

/// A class's share: its buffer limit and its WFQ weight or DRR quantum (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassSpec {
    pub limit: QueueLimit,
    pub weight: u32,
}

impl ClassSpec {
    pub fn new(weight: u32, limit: QueueLimit) -> ClassSpec {
        ClassSpec { limit, weight }
    }
}

fn check_weights(specs: &[ClassSpec]) -> Result<Vec<ClassQueue>, QosError> {
    if let Some(i) = specs.iter().position(|s| s.weight == 0) {
        return Err(QosError::ZeroWeight(i));
    }
    queues(&specs.iter().map(|s| s.limit).collect::<Vec<_>>())
}

/// Fixed-point scale of WF²Q+ tags: one byte is 65536 tag units.
const TAG_SCALE: u128 = 1 << 16;

/// WF²Q+ weighted fair queueing (see the module doc). Class `i` gets
/// `weight_i / Σ weight` of the link while all classes are backlogged, and idle classes' share
/// is redistributed in proportion.
#[derive(Debug, Clone)]
pub struct Wfq {
    queues: Vec<ClassQueue>,
    /// Tag units per byte for each class: `TAG_SCALE * Σw / w_i`.
    cost: Vec<u128>,
    start: Vec<u128>,
    finish: Vec<u128>,
    virtual_time: u128,
}

impl Wfq {
    pub fn new(specs: &[ClassSpec]) -> Result<Wfq, QosError> {
        let queues = check_weights(specs)?;
        let total: u128 = specs.iter().map(|s| u128::from(s.weight)).sum();
        let n = specs.len();
        Ok(Wfq {
            queues,
            cost: specs
                .iter()
                .map(|s| TAG_SCALE * total / u128::from(s.weight))
                .collect(),
            start: vec![0; n],
            finish: vec![0; n],
            virtual_time: 0,
        })
    }

    fn tag(&self, class: usize, size: u32) -> u128 {
        self.cost[class].saturating_mul(u128::from(size))
    }
}

impl Scheduler for Wfq {
    fn num_classes(&self) -> usize {
        self.queues.len()
    }

    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        let Some(q) = self.queues.get_mut(class) else {
            return Verdict::Dropped(DropReason::NoSuchClass);
        };
        let was_empty = q.is_empty();
        let v = q.push(now_ns, class, packet);
        if was_empty && v == Verdict::Queued {
            // A newly backlogged class starts no earlier than the system virtual time.
            self.start[class] = self.virtual_time.max(self.finish[class]);
            self.finish[class] = self.start[class].saturating_add(self.tag(class, packet.size));
        }
        v
    }

    fn dequeue(&mut self, _now_ns: u64) -> Option<Dequeued> {
        let backlogged = || (0..self.queues.len()).filter(|&i| !self.queues[i].is_empty());
        let min_start = backlogged().map(|i| self.start[i]).min()?;
        self.virtual_time = self.virtual_time.max(min_start);
        let v = self.virtual_time;
        // Smallest finish tag among eligible classes (start <= V); ties go to the lower index.
        let pick = backlogged()
            .filter(|&i| self.start[i] <= v)
            .min_by_key(|&i| self.finish[i])?;
        let d = self.queues[pick].pop()?;
        self.virtual_time = self
            .virtual_time
            .saturating_add(u128::from(d.packet.size) * TAG_SCALE);
        if let Some(next) = self.queues[pick].head_size() {
            self.start[pick] = self.finish[pick];
            self.finish[pick] = self.start[pick].saturating_add(self.tag(pick, next));
        }
        Some(d)
    }

    fn counters(&self, class: usize) -> Option<Counters> {
        self.queues.get(class).map(|q| q.counters)
    }

    fn backlog(&self, class: usize) -> Option<(usize, u64)> {
        self.queues.get(class).map(|q| (q.len(), q.bytes))
    }

    fn is_empty(&self) -> bool {
        self.queues.iter().all(ClassQueue::is_empty)
    }
}

/// Deficit Round Robin: each visit adds the class's quantum (bytes) to its deficit; it sends
/// head packets while they fit the deficit. A quantum of at least the largest packet gives O(1)
/// work per packet; smaller quanta are correct too.
#[derive(Debug, Clone)]
pub struct Drr {
    queues: Vec<ClassQueue>,
    quantum: Vec<u64>,
    deficit: Vec<u64>,
    active: VecDeque<usize>,
    /// Whether the class at the front of `active` has received its quantum for this visit.
    turn_started: bool,
}

impl Drr {
    /// `weight` of each spec is its quantum in bytes.
    pub fn new(specs: &[ClassSpec]) -> Result<Drr, QosError> {
        let queues = check_weights(specs)?;
        let n = specs.len();
        Ok(Drr {
            queues,
            quantum: specs.iter().map(|s| u64::from(s.weight)).collect(),
            deficit: vec![0; n],
            active: VecDeque::with_capacity(n),
            turn_started: false,
        })
    }
}

impl Scheduler for Drr {
    fn num_classes(&self) -> usize {
        self.queues.len()
    }

    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        let Some(q) = self.queues.get_mut(class) else {
            return Verdict::Dropped(DropReason::NoSuchClass);
        };
        let was_empty = q.is_empty();
        let v = q.push(now_ns, class, packet);
        if was_empty && v == Verdict::Queued {
            self.deficit[class] = 0;
            self.active.push_back(class);
        }
        v
    }

    fn dequeue(&mut self, _now_ns: u64) -> Option<Dequeued> {
        let mut fruitless = 0;
        loop {
            let i = *self.active.front()?;
            if !self.turn_started {
                self.deficit[i] = self.deficit[i].saturating_add(self.quantum[i]);
                self.turn_started = true;
            }
            let head = u64::from(self.queues[i].head_size()?);
            if head <= self.deficit[i] {
                self.deficit[i] -= head;
                let d = self.queues[i].pop();
                if self.queues[i].is_empty() {
                    self.deficit[i] = 0;
                    self.active.pop_front();
                    self.turn_started = false;
                }
                return d;
            }
            self.active.rotate_left(1);
            self.turn_started = false;
            fruitless += 1;
            if fruitless >= self.active.len() {
                // A whole round without a packet: skip the further rounds in which nobody
                // could send, exactly as if they had been run.
                let skip = self
                    .active
                    .iter()
                    .map(|&j| {
                        let need = u64::from(self.queues[j].head_size().unwrap_or(0))
                            .saturating_sub(self.deficit[j]);
                        need.div_ceil(self.quantum[j]).saturating_sub(1)
                    })
                    .min()
                    .unwrap_or(0);
                for &j in &self.active {
                    self.deficit[j] =
                        self.deficit[j].saturating_add(skip.saturating_mul(self.quantum[j]));
                }
                fruitless = 0;
            }
        }
    }

    fn counters(&self, class: usize) -> Option<Counters> {
        self.queues.get(class).map(|q| q.counters)
    }

    fn backlog(&self, class: usize) -> Option<(usize, u64)> {
        self.queues.get(class).map(|q| (q.len(), q.bytes))
    }

    fn is_empty(&self) -> bool {
        self.active.is_empty()
    }
}

/// Priority queueing for premium classes `0..k`, then WF²Q+ over classes `k..`.
#[derive(Debug, Clone)]
pub struct PqWfq {
    pq: StrictPriority,
    wfq: Wfq,
}

impl PqWfq {
    /// `priority` lists the premium classes (highest first, numbered from 0); `weighted` the
    /// classes after them.
    pub fn new(priority: &[QueueLimit], weighted: &[ClassSpec]) -> Result<PqWfq, QosError> {
        Ok(PqWfq {
            pq: StrictPriority::new(priority)?,
            wfq: Wfq::new(weighted).map_err(|e| match e {
                QosError::ZeroWeight(i) => QosError::ZeroWeight(i + priority.len()),
                e => e,
            })?,
        })
    }

    pub fn priority_classes(&self) -> usize {
        self.pq.num_classes()
    }
}

impl Scheduler for PqWfq {
    fn num_classes(&self) -> usize {
        self.pq.num_classes() + self.wfq.num_classes()
    }

    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        let k = self.pq.num_classes();
        if class < k {
            self.pq.enqueue(now_ns, class, packet)
        } else {
            self.wfq.enqueue(now_ns, class - k, packet)
        }
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Dequeued> {
        if let Some(d) = self.pq.dequeue(now_ns) {
            return Some(d);
        }
        let mut d = self.wfq.dequeue(now_ns)?;
        d.class += self.pq.num_classes();
        Some(d)
    }

    fn counters(&self, class: usize) -> Option<Counters> {
        let k = self.pq.num_classes();
        if class < k {
            self.pq.counters(class)
        } else {
            self.wfq.counters(class - k)
        }
    }

    fn backlog(&self, class: usize) -> Option<(usize, u64)> {
        let k = self.pq.num_classes();
        if class < k {
            self.pq.backlog(class)
        } else {
            self.wfq.backlog(class - k)
        }
    }

    fn is_empty(&self) -> bool {
        self.pq.is_empty() && self.wfq.is_empty()
    }
}

impl<S: Scheduler + ?Sized> Scheduler for Box<S> {
    fn num_classes(&self) -> usize {
        (**self).num_classes()
    }
    fn enqueue(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        (**self).enqueue(now_ns, class, packet)
    }
    fn dequeue(&mut self, now_ns: u64) -> Option<Dequeued> {
        (**self).dequeue(now_ns)
    }
    fn counters(&self, class: usize) -> Option<Counters> {
        (**self).counters(class)
    }
    fn backlog(&self, class: usize) -> Option<(usize, u64)> {
        (**self).backlog(class)
    }
    fn is_empty(&self) -> bool {
        (**self).is_empty()
    }
}

/// A packet that has finished transmission on a [`Port`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Departure {
    pub class: usize,
    pub packet: PacketMeta,
    pub enqueued_ns: u64,
    /// First bit on the wire; `start_ns - enqueued_ns` is the queueing delay.
    pub start_ns: u64,
    /// Last bit on the wire.
    pub end_ns: u64,
}

const NS_PER_SEC: u128 = 1_000_000_000;

/// A line's clock: when each packet handed to an idle or busy line of `rate_bps` starts and
/// ends. End times count from the start of the busy period
/// (`start + ceil(bits_so_far * 10^9 / rate)`), so back-to-back packets never accumulate
/// rounding.
#[derive(Debug, Clone)]
pub struct LineClock {
    rate_bps: u64,
    busy_start_ns: u64,
    busy_bits: u128,
    busy_end_ns: u64,
}

impl LineClock {
    pub fn new(rate_bps: u64) -> Result<LineClock, QosError> {
        if rate_bps == 0 {
            return Err(QosError::ZeroRate);
        }
        Ok(LineClock {
            rate_bps,
            busy_start_ns: 0,
            busy_bits: 0,
            busy_end_ns: 0,
        })
    }

    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// When the line is free again.
    pub fn busy_until_ns(&self) -> u64 {
        self.busy_end_ns
    }

    /// Sends `bytes` handed over at `at_ns`: (first bit, last bit) on the line, never before
    /// the previous packet ended, even if the caller's time went back.
    pub fn send(&mut self, at_ns: u64, bytes: u32) -> (u64, u64) {
        let start = at_ns.max(self.busy_end_ns);
        if at_ns > self.busy_end_ns || self.busy_bits == 0 {
            self.busy_start_ns = start;
            self.busy_bits = 0;
        }
        self.busy_bits += u128::from(bytes) * 8;
        let offset = (self.busy_bits * NS_PER_SEC).div_ceil(u128::from(self.rate_bps));
        let end = u64::try_from(u128::from(self.busy_start_ns) + offset).unwrap_or(u64::MAX);
        self.busy_end_ns = end;
        (start, end)
    }
}

/// An output port: a classifier, a scheduler, a transmit ring and a link of `rate_bps`.
/// Transmission is non-preemptive and takes `size * 8 / rate` seconds.
///
/// End times are computed from the start of the current busy period
/// (`start + ceil(bits_so_far * 10^9 / rate)`), so back-to-back packets never accumulate
/// rounding. A packet enqueued at `t` while the link is idle starts at `t`.
///
/// The transmit ring (as on a NIC) holds packets the scheduler has already handed over; its
/// head is on the wire. A ring of 1 (the default) is a pure scheduler: the next packet is
/// chosen only when the line frees.
///
/// Drive it with [`Port::enqueue`] and, whenever `now >= poll_timeout()`,
/// [`Port::poll_transmit`] until it returns `None`. Late polling is safe: departures are
/// computed at their exact times and queued until polled. A packet enqueued at exactly the
/// time a transmission ends, before that end is polled, competes for the next turn of the
/// line; polled first, the turn is already given. The simulator relies on this: its events
/// at one time run in insertion order.
#[derive(Debug, Clone)]
pub struct Port<S> {
    line: LineClock,
    sched: S,
    classifier: Classifier,
    /// Packets handed over by the scheduler; the head is on the wire while `current` is set.
    ring: VecDeque<Dequeued>,
    ring_size: usize,
    /// The head's (start, end) on the wire.
    current: Option<(u64, u64)>,
    done: VecDeque<Departure>,
}

impl<S: Scheduler> Port<S> {
    pub fn new(rate_bps: u64, sched: S, classifier: Classifier) -> Result<Port<S>, QosError> {
        Ok(Port {
            line: LineClock::new(rate_bps)?,
            sched,
            classifier,
            ring: VecDeque::new(),
            ring_size: 1,
            current: None,
            done: VecDeque::new(),
        })
    }

    /// The same port with a transmit ring of `packets` (at least 1, the packet on the wire).
    pub fn with_tx_ring(mut self, packets: usize) -> Port<S> {
        self.ring_size = packets.max(1);
        self
    }

    pub fn rate_bps(&self) -> u64 {
        self.line.rate_bps()
    }

    /// Transmission time of `size` bytes from an idle link, rounded up to the nanosecond.
    pub fn tx_time_ns(&self, size: u32) -> u64 {
        let bits = u128::from(size) * 8;
        u64::try_from((bits * NS_PER_SEC).div_ceil(u128::from(self.rate_bps()))).unwrap_or(u64::MAX)
    }

    /// Classifies the packet and offers it to its class.
    pub fn enqueue(&mut self, now_ns: u64, packet: PacketMeta) -> Verdict {
        let class = self.classifier.classify(&packet);
        self.enqueue_class(now_ns, class, packet)
    }

    /// Offers a packet to an explicit class (bypassing the classifier).
    pub fn enqueue_class(&mut self, now_ns: u64, class: usize, packet: PacketMeta) -> Verdict {
        self.advance(now_ns.saturating_sub(1));
        let v = self.sched.enqueue(now_ns, class, packet);
        self.fill(now_ns);
        v
    }

    /// The next packet whose last bit left at or before `now_ns`.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Departure> {
        self.advance(now_ns);
        self.done.pop_front()
    }

    /// When the next departure is due (in the past if one is waiting to be polled).
    pub fn poll_timeout(&self) -> Option<u64> {
        self.done
            .front()
            .map(|d| d.end_ns)
            .or(self.current.map(|(_, end)| end))
    }

    /// Packets held: in the scheduler, in the ring (the one on the wire included) and
    /// finished but not yet polled.
    pub fn backlog_packets(&self) -> usize {
        let queued: usize = (0..self.sched.num_classes())
            .filter_map(|c| self.sched.backlog(c))
            .map(|(n, _)| n)
            .sum();
        queued + self.ring.len() + self.done.len()
    }

    pub fn scheduler(&self) -> &S {
        &self.sched
    }

    pub fn scheduler_mut(&mut self) -> &mut S {
        &mut self.sched
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// Completes every transmission that ends by `now_ns`, starting the next back to back.
    fn advance(&mut self, now_ns: u64) {
        while let Some((start_ns, end_ns)) = self.current.filter(|&(_, end)| end <= now_ns) {
            self.current = None;
            if let Some(d) = self.ring.pop_front() {
                self.done.push_back(Departure {
                    class: d.class,
                    packet: d.packet,
                    enqueued_ns: d.enqueued_ns,
                    start_ns,
                    end_ns,
                });
            }
            self.fill(end_ns);
        }
    }

    /// Moves packets from the scheduler into the ring and starts the head if the line is
    /// idle.
    fn fill(&mut self, at_ns: u64) {
        while self.ring.len() < self.ring_size {
            match self.sched.dequeue(at_ns) {
                Some(d) => self.ring.push_back(d),
                None => break,
            }
        }
        if self.current.is_some() {
            return;
        }
        let Some(head) = self.ring.front() else {
            return;
        };
        self.current = Some(self.line.send(at_ns, head.packet.size));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{Rule, EF};
    use proptest::prelude::*;

    fn pkt(id: u64, size: u32) -> PacketMeta {
        PacketMeta::new(id, 0, size, 0)
    }

    /// Enqueues `(class, size)` at time 0, dequeues everything.
    fn drain(s: &mut dyn Scheduler, input: &[(usize, u32)]) -> Vec<Dequeued> {
        for (id, &(c, sz)) in input.iter().enumerate() {
            s.enqueue(0, c, pkt(id as u64, sz));
        }
        std::iter::from_fn(|| s.dequeue(0)).collect()
    }

    fn all_schedulers(n: usize, limit: QueueLimit) -> Vec<(&'static str, Box<dyn Scheduler>)> {
        let limits = vec![limit; n];
        let specs: Vec<ClassSpec> = (0..n)
            .map(|i| ClassSpec::new(100 * (i as u32 + 1), limit))
            .collect();
        vec![
            ("fifo", Box::new(Fifo::new(n, limit).unwrap())),
            ("pq", Box::new(StrictPriority::new(&limits).unwrap())),
            ("wfq", Box::new(Wfq::new(&specs).unwrap())),
            ("drr", Box::new(Drr::new(&specs).unwrap())),
            (
                "pqwfq",
                Box::new(PqWfq::new(&limits[..1], &specs[1..]).unwrap()),
            ),
        ]
    }

    #[test]
    fn fifo_preserves_arrival_order() {
        let mut f = Fifo::new(3, QueueLimit::Unlimited).unwrap();
        let out = drain(&mut f, &[(2, 100), (0, 50), (1, 1500), (0, 60), (2, 1)]);
        let ids: Vec<u64> = out.iter().map(|d| d.packet.id).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        assert_eq!(f.counters(0).unwrap().sent, 2);
        assert_eq!(f.counters(2).unwrap().sent_bytes, 101);
        assert_eq!(f.backlog(0), Some((0, 0)));
    }

    #[test]
    fn strict_priority_serves_lowest_class_first() {
        let mut s = StrictPriority::new(&[QueueLimit::Unlimited; 3]).unwrap();
        let out = drain(&mut s, &[(2, 1), (1, 1), (2, 1), (0, 1), (1, 1)]);
        let ids: Vec<u64> = out.iter().map(|d| d.packet.id).collect();
        assert_eq!(ids, vec![3, 1, 4, 0, 2]);
    }

    #[test]
    fn tail_drop_by_packets_and_bytes_with_counters() {
        let mut s =
            StrictPriority::new(&[QueueLimit::Packets(2), QueueLimit::Bytes(1000)]).unwrap();
        assert_eq!(s.enqueue(0, 0, pkt(0, 10)), Verdict::Queued);
        assert_eq!(s.enqueue(0, 0, pkt(1, 10)), Verdict::Queued);
        assert_eq!(
            s.enqueue(0, 0, pkt(2, 10)),
            Verdict::Dropped(DropReason::QueueFull)
        );
        assert_eq!(s.enqueue(0, 1, pkt(3, 600)), Verdict::Queued);
        assert_eq!(
            s.enqueue(0, 1, pkt(4, 500)),
            Verdict::Dropped(DropReason::QueueFull)
        );
        assert_eq!(s.enqueue(0, 1, pkt(5, 400)), Verdict::Queued);
        assert_eq!(
            s.enqueue(0, 7, pkt(6, 1)),
            Verdict::Dropped(DropReason::NoSuchClass)
        );
        let c0 = s.counters(0).unwrap();
        assert_eq!((c0.enqueued, c0.dropped, c0.dropped_bytes), (2, 1, 10));
        let c1 = s.counters(1).unwrap();
        assert_eq!((c1.enqueued_bytes, c1.dropped_bytes), (1000, 500));
        assert_eq!(s.backlog(1), Some((2, 1000)));
        while s.dequeue(0).is_some() {}
        assert_eq!(s.counters(1).unwrap().sent_bytes, 1000);
        assert!(s.is_empty());
    }

    #[test]
    fn bad_configs_are_errors() {
        assert_eq!(
            Fifo::new(0, QueueLimit::Unlimited).unwrap_err(),
            QosError::NoClasses
        );
        assert_eq!(StrictPriority::new(&[]).unwrap_err(), QosError::NoClasses);
        let specs = [
            ClassSpec::new(1, QueueLimit::Unlimited),
            ClassSpec::new(0, QueueLimit::Unlimited),
        ];
        assert_eq!(Wfq::new(&specs).unwrap_err(), QosError::ZeroWeight(1));
        assert_eq!(Drr::new(&specs).unwrap_err(), QosError::ZeroWeight(1));
        assert_eq!(
            PqWfq::new(&[QueueLimit::Unlimited], &specs).unwrap_err(),
            QosError::ZeroWeight(2)
        );
        let f = Fifo::new(1, QueueLimit::Unlimited).unwrap();
        assert_eq!(
            Port::new(0, f, Classifier::new(0)).unwrap_err(),
            QosError::ZeroRate
        );
    }

    /// Serves `rounds` packets from permanently backlogged classes and returns bytes per class.
    fn backlogged_shares(s: &mut dyn Scheduler, sizes: &[u32], rounds: usize) -> Vec<u64> {
        let n = sizes.len();
        let mut id = 0;
        for _ in 0..4 {
            for (c, &sz) in sizes.iter().enumerate() {
                s.enqueue(0, c, pkt(id, sz));
                id += 1;
            }
        }
        let mut bytes = vec![0u64; n];
        for _ in 0..rounds {
            let d = s.dequeue(0).unwrap();
            bytes[d.class] += u64::from(d.packet.size);
            // Keep every class backlogged.
            s.enqueue(0, d.class, pkt(id, sizes[d.class]));
            id += 1;
        }
        bytes
    }

    fn assert_shares(bytes: &[u64], weights: &[u32], tol: f64) {
        let total: u64 = bytes.iter().sum();
        let wsum: u32 = weights.iter().sum();
        for (b, w) in bytes.iter().zip(weights) {
            let got = *b as f64 / total as f64;
            let want = f64::from(*w) / f64::from(wsum);
            assert!(
                (got - want).abs() <= tol * want,
                "got {got:.4}, want {want:.4} ({bytes:?})"
            );
        }
    }

    #[test]
    fn drr_shares_follow_quanta() {
        let weights = [1500, 3000, 4500];
        let specs: Vec<_> = weights
            .iter()
            .map(|&w| ClassSpec::new(w, QueueLimit::Unlimited))
            .collect();
        let mut d = Drr::new(&specs).unwrap();
        let bytes = backlogged_shares(&mut d, &[1500, 576, 40], 60_000);
        assert_shares(&bytes, &weights, 0.01);
    }

    #[test]
    fn drr_with_tiny_quantum_skips_rounds() {
        let specs = [
            ClassSpec::new(1, QueueLimit::Unlimited),
            ClassSpec::new(3, QueueLimit::Unlimited),
        ];
        let mut d = Drr::new(&specs).unwrap();
        let bytes = backlogged_shares(&mut d, &[1500, 1500], 4000);
        assert_shares(&bytes, &[1, 3], 0.01);
    }

    #[test]
    fn wfq_shares_follow_weights() {
        let weights = [1, 2, 5];
        let specs: Vec<_> = weights
            .iter()
            .map(|&w| ClassSpec::new(w, QueueLimit::Unlimited))
            .collect();
        let mut w = Wfq::new(&specs).unwrap();
        let bytes = backlogged_shares(&mut w, &[1500, 576, 40], 60_000);
        assert_shares(&bytes, &weights, 0.01);
    }

    /// WF²Q+ interleaves: with equal weights and sizes, service alternates exactly.
    #[test]
    fn wfq_equal_weights_alternate() {
        let specs = [ClassSpec::new(1, QueueLimit::Unlimited); 2];
        let mut w = Wfq::new(&specs).unwrap();
        let out = drain(
            &mut w,
            &[(0, 100), (0, 100), (0, 100), (1, 100), (1, 100), (1, 100)],
        );
        let classes: Vec<usize> = out.iter().map(|d| d.class).collect();
        assert_eq!(classes, vec![0, 1, 0, 1, 0, 1]);
    }

    #[test]
    fn pq_wfq_serves_premium_first_then_weights() {
        let mut s = PqWfq::new(
            &[QueueLimit::Unlimited],
            &[
                ClassSpec::new(1, QueueLimit::Unlimited),
                ClassSpec::new(3, QueueLimit::Unlimited),
            ],
        )
        .unwrap();
        let out = drain(&mut s, &[(1, 100), (2, 100), (0, 53), (1, 100), (0, 53)]);
        assert_eq!(out[0].class, 0);
        assert_eq!(out[1].class, 0);
        assert_eq!(s.num_classes(), 3);
        let bytes = backlogged_shares(&mut s, &[53, 1500, 1500], 30_000);
        // Class 0 is always backlogged, so it takes everything: strict priority starves.
        assert_eq!(bytes[1] + bytes[2], 0);
        let mut s = PqWfq::new(
            &[QueueLimit::Unlimited],
            &[
                ClassSpec::new(1, QueueLimit::Unlimited),
                ClassSpec::new(3, QueueLimit::Unlimited),
            ],
        )
        .unwrap();
        let mut bytes = [0u64; 3];
        let mut id = 0;
        for _ in 0..4 {
            s.enqueue(0, 1, pkt(id, 1500));
            s.enqueue(0, 2, pkt(id + 1, 1500));
            id += 2;
        }
        for round in 0..20_000u64 {
            if round % 10 == 0 {
                s.enqueue(0, 0, pkt(id, 53));
                id += 1;
            }
            let d = s.dequeue(0).unwrap();
            bytes[d.class] += u64::from(d.packet.size);
            if d.class > 0 {
                s.enqueue(0, d.class, pkt(id, 1500));
                id += 1;
            }
        }
        assert_eq!(bytes[0], 2000 * 53);
        assert_shares(&bytes[1..], &[1, 3], 0.01);
    }

    #[test]
    fn port_transmission_time_is_exact_and_does_not_drift() {
        let f = Fifo::new(1, QueueLimit::Unlimited).unwrap();
        let mut p = Port::new(1_900_000, f, Classifier::new(0)).unwrap();
        let n = 200_000u64;
        for i in 0..n {
            p.enqueue(0, pkt(i, 53));
        }
        // Poll very late: everything departed at its own time.
        let mut last = None;
        let mut prev_end = 0;
        while let Some(d) = p.poll_transmit(u64::MAX) {
            assert_eq!(d.start_ns, prev_end);
            prev_end = d.end_ns;
            last = Some(d);
        }
        let total_bits = u128::from(n) * 53 * 8;
        let want = (total_bits * NS_PER_SEC).div_ceil(1_900_000) as u64;
        assert_eq!(last.unwrap().end_ns, want);
        assert_eq!(p.poll_timeout(), None);
    }

    #[test]
    fn port_idle_link_starts_at_arrival() {
        // A boxed scheduler works too (choose the discipline at run time).
        let f: Box<dyn Scheduler> = Box::new(Fifo::new(1, QueueLimit::Unlimited).unwrap());
        let mut p = Port::new(8_000_000, f, Classifier::new(0)).unwrap(); // 1 byte/µs
        p.enqueue(1_000, pkt(0, 100));
        assert_eq!(p.poll_timeout(), Some(101_000));
        assert_eq!(p.poll_transmit(100_999), None);
        // Second packet arrives after the link went idle (driver polls late).
        p.enqueue(500_000, pkt(1, 100));
        let a = p.poll_transmit(500_000).unwrap();
        assert_eq!((a.start_ns, a.end_ns), (1_000, 101_000));
        assert_eq!(p.poll_timeout(), Some(600_000));
        let b = p.poll_transmit(600_000).unwrap();
        assert_eq!((b.start_ns, b.end_ns), (500_000, 600_000));
    }

    /// The AQUILA residual-delay case: a 1500-byte STD packet has just started on the
    /// 1.9 Mbit/s bottleneck when a 53-byte EF (premium CBR) packet arrives. The EF packet waits
    /// exactly L_max/C = 12000/1.9e6 s = 6.315790 ms (rounded up to the ns).
    #[test]
    fn pq_residual_delay_is_one_max_packet() {
        let classifier = Classifier::new(1).rule(Rule::to_class(0).dscp(EF));
        let sched = PqWfq::new(
            &[QueueLimit::Packets(10)],
            &[ClassSpec::new(1, QueueLimit::Packets(100))],
        )
        .unwrap();
        let mut p = Port::new(1_900_000, sched, classifier).unwrap();
        assert_eq!(p.enqueue(0, pkt(1, 1500)), Verdict::Queued);
        assert_eq!(p.enqueue(0, pkt(2, 1500)), Verdict::Queued);
        assert_eq!(p.enqueue(0, pkt(3, 53).with_dscp(EF)), Verdict::Queued);
        let first = p.poll_transmit(u64::MAX).unwrap();
        assert_eq!(first.packet.id, 1);
        let ef = p.poll_transmit(u64::MAX).unwrap();
        assert_eq!(ef.packet.id, 3);
        assert_eq!(ef.class, 0);
        let l_max_over_c = p.tx_time_ns(1500);
        assert_eq!(l_max_over_c, 6_315_790);
        assert_eq!(ef.start_ns - ef.enqueued_ns, l_max_over_c);
        assert_eq!(p.poll_transmit(u64::MAX).unwrap().packet.id, 2);
    }

    fn pq_port(ring: usize) -> Port<StrictPriority> {
        let classifier = Classifier::new(1).rule(Rule::to_class(0).dscp(EF));
        let sched = StrictPriority::new(&[QueueLimit::Unlimited, QueueLimit::Unlimited]).unwrap();
        Port::new(8_000_000, sched, classifier) // 1 byte/µs
            .unwrap()
            .with_tx_ring(ring)
    }

    /// A packet enqueued at the very nanosecond the line frees, before that end is polled,
    /// competes for the line; polled first, the turn was already given.
    #[test]
    fn port_arrival_at_the_end_of_a_transmission_competes_unless_polled_first() {
        for (poll_first, want) in [(false, [1, 3, 2]), (true, [1, 2, 3])] {
            let mut p = pq_port(1);
            p.enqueue(0, pkt(1, 100));
            p.enqueue(0, pkt(2, 100));
            let mut order = Vec::new();
            if poll_first {
                order.extend(std::iter::from_fn(|| p.poll_transmit(100_000)));
            }
            p.enqueue(100_000, pkt(3, 100).with_dscp(EF));
            order.extend(std::iter::from_fn(|| p.poll_transmit(u64::MAX)));
            let ids: Vec<u64> = order.iter().map(|d| d.packet.id).collect();
            assert_eq!(ids, want, "poll first: {poll_first}");
        }
    }

    /// Packets already in the transmit ring are committed: an EF packet arriving later waits
    /// behind them, however high its priority.
    #[test]
    fn port_tx_ring_commits_packets_before_the_scheduler_sees_later_ones() {
        for (ring, want) in [(1, [1, 4, 2, 3]), (3, [1, 2, 3, 4])] {
            let mut p = pq_port(ring);
            for id in 1..=3 {
                p.enqueue(0, pkt(id, 100));
            }
            p.enqueue(50_000, pkt(4, 100).with_dscp(EF));
            let ids: Vec<u64> = std::iter::from_fn(|| p.poll_transmit(u64::MAX))
                .map(|d| d.packet.id)
                .collect();
            assert_eq!(ids, want, "ring {ring}");
            assert_eq!(p.backlog_packets(), 0);
        }
    }

    proptest! {
        /// Any sequence of enqueues and polls, at any times (even going backwards) and sizes,
        /// never panics, never overlaps two transmissions, and conserves packets.
        #[test]
        fn port_survives_any_input(
            ops in proptest::collection::vec((any::<bool>(), 0u64..10_000_000, any::<u32>(), 0usize..6), 1..300),
            rate in 1u64..u64::MAX,
            which in 0usize..5,
        ) {
            let (_, s) = all_schedulers(4, QueueLimit::Packets(8)).swap_remove(which);
            let mut p = Port::new(rate, s, Classifier::new(0)).unwrap();
            let mut out = Vec::new();
            let mut queued = 0u64;
            for (enq, t, size, class) in ops {
                if enq {
                    if p.enqueue_class(t, class, pkt(0, size)) == Verdict::Queued {
                        queued += 1;
                    }
                } else {
                    out.extend(std::iter::from_fn(|| p.poll_transmit(t)));
                }
                let _ = p.poll_timeout();
            }
            out.extend(std::iter::from_fn(|| p.poll_transmit(u64::MAX)));
            prop_assert_eq!(out.len() as u64, queued);
            for w in out.windows(2) {
                prop_assert!(w[0].end_ns <= w[1].start_ns);
            }
        }

        /// Every discipline keeps each class in FIFO order and conserves packets.
        #[test]
        fn no_reordering_within_a_class(
            input in proptest::collection::vec((0usize..4, 1u32..2000), 0..200),
            limit in prop_oneof![
                Just(QueueLimit::Unlimited),
                (1u32..20).prop_map(QueueLimit::Packets),
                (1u64..20_000).prop_map(QueueLimit::Bytes),
            ],
        ) {
            for (name, mut s) in all_schedulers(4, limit) {
                let out = drain(&mut *s, &input);
                let mut last = [None::<u64>; 4];
                for d in &out {
                    prop_assert_eq!(input[d.packet.id as usize].0, d.class, "{}", name);
                    if let Some(prev) = last[d.class] {
                        prop_assert!(d.packet.id > prev, "{} reordered class {}", name, d.class);
                    }
                    last[d.class] = Some(d.packet.id);
                }
                let mut sent = 0;
                let mut dropped = 0;
                for c in 0..4 {
                    let k = s.counters(c).unwrap();
                    prop_assert_eq!(k.enqueued, k.sent, "{}", name);
                    sent += k.sent;
                    dropped += k.dropped;
                }
                prop_assert_eq!(sent as usize, out.len());
                prop_assert_eq!((sent + dropped) as usize, input.len());
                prop_assert!(s.is_empty());
                if name == "fifo" {
                    prop_assert!(out.windows(2).all(|w| w[0].packet.id < w[1].packet.id));
                }
            }
        }

    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Long-run shares of permanently backlogged classes match weights (WFQ) and quanta
        /// (DRR, with quanta of at least the largest packet) within 2 %.
        #[test]
        fn fair_queueing_shares_match_weights(
            weights in proptest::collection::vec(1u32..8, 2..5),
            sizes in proptest::collection::vec(40u32..1500, 5),
        ) {
            let n = weights.len();
            let wspecs: Vec<_> = weights.iter().map(|&w| ClassSpec::new(w, QueueLimit::Unlimited)).collect();
            let dspecs: Vec<_> = weights.iter().map(|&w| ClassSpec::new(w * 1500, QueueLimit::Unlimited)).collect();
            let mut wfq = Wfq::new(&wspecs).unwrap();
            let mut drr = Drr::new(&dspecs).unwrap();
            let bytes = backlogged_shares(&mut wfq, &sizes[..n], 40_000);
            assert_shares(&bytes, &weights, 0.02);
            let bytes = backlogged_shares(&mut drr, &sizes[..n], 40_000);
            assert_shares(&bytes, &weights, 0.02);
        }

        /// A premium packet arriving at any moment on a port saturated with low-priority
        /// traffic of up to 1500 bytes waits at most L_max/C (the premium queue is otherwise
        /// empty: arrivals are spaced wider than their own transmission).
        #[test]
        fn premium_wait_is_bounded_by_residual(
            be_sizes in proptest::collection::vec(40u32..=1500, 50..200),
            ef_offsets in proptest::collection::vec(0u64..6_000_000, 1..40),
        ) {
            let sched = PqWfq::new(&[QueueLimit::Unlimited], &[ClassSpec::new(1, QueueLimit::Unlimited)]).unwrap();
            let rate = 1_900_000;
            let mut p = Port::new(rate, sched, Classifier::new(1).rule(Rule::to_class(0).dscp(EF))).unwrap();
            for (i, &sz) in be_sizes.iter().enumerate() {
                p.enqueue(0, pkt(i as u64, sz));
            }
            let bound = p.tx_time_ns(1500);
            // EF every 7 ms (wider than 53 B at 1.9 Mbit/s) at random offsets within the slot.
            let mut t_ef: Vec<u64> = ef_offsets.iter().enumerate().map(|(k, &o)| k as u64 * 7_000_000 + o).collect();
            t_ef.sort_unstable();
            let mut out = Vec::new();
            for (k, &t) in t_ef.iter().enumerate() {
                while let Some(d) = p.poll_transmit(t) { out.push(d); }
                p.enqueue(t, pkt(1_000_000 + k as u64, 53).with_dscp(EF));
            }
            while let Some(d) = p.poll_transmit(u64::MAX) { out.push(d); }
            for d in out.iter().filter(|d| d.class == 0) {
                prop_assert!(d.start_ns - d.enqueued_ns <= bound);
            }
        }
    }
}
