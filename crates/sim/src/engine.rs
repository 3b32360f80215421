//! The discrete-event engine: sans-IO models (atm ports, qos schedulers, qos TCP) driven by a
//! virtual clock.
//!
//! One future-event list ordered by (time, insertion number) makes a run a pure function of
//! the scenario and the seed. Each schedulable thing (a flow, an output port, a link's cells in
//! flight, a shaper, a background source) has at most one live wake-up it relies on; stale
//! wake-ups are harmless. Cells inside switches are `CellMeta` (12 bytes); a link in flight is
//! a FIFO of (arrival time, unit), since one link delivers in order.
//!
//! Work no other event can observe takes no event of its own, without changing the order of
//! anything observable: arrivals on a sink link (see `Iface::sink`) are handled as the units
//! leave, and a sink port holding one cell defers its wake-up (see `Iface::deferred`). Only
//! the reported event count shows it.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap, VecDeque};

use flowlab_atm::gcra::{Policer, PolicerVerdict};
use flowlab_atm::replicate::LoopStep;
use flowlab_atm::switch::Verdict as AtmVerdict;
use flowlab_atm::{
    cells_per_packet, CellMeta, Departure, Encapsulation, ExactNs, FrameDelimiter, LineRate,
    OutputPort, PolicingAction, PortConfig, RecirculationLoop, Shaper, VcId, VcLimits,
};
use flowlab_link::diffserv::DiffServPort;
use flowlab_link::impair::Impairments;
use flowlab_link::{Event as LinkEvent, Frame, LinkModel, Verdict as LinkVerdict};
use flowlab_qos::tcp::{
    connect, Ack, Data, ReceiverConfig, Segment, SenderConfig, TcpReceiver, TcpSender,
};
use flowlab_qos::PacketMeta;
use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::EchoReport;
use flowlab_stats::{rate_over_span, LatencyStats};
use flowlab_traffic::EndCondition;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::Exp1;

use self::bg_model::ModelSource;
use self::cell_loss::LineLoss;
use self::fragments::{Frag, Fragmenter};
use crate::endsys::{Cost, Held, Next, SocketBuffer, Stages, FILL_SAMPLE_NS};
use crate::report::{
    BackgroundReport, ClassReport, FlowReport, FragReport, HostReport, PolicerReport, PortReport,
    TcpReport, VcReport,
};
use crate::scenario::{FlowSpec, Model, NodeKind, NodeSpec, Protocol};
use crate::sender::{FlowSender, Transmit};

const NEVER: u64 = u64::MAX;
/// Spreads the run's seed over the impairment stages, one per link direction.
const STAGE_SEED_MIX: u64 = 0x9e37_79b9_7f4a_7c15;
/// What a receiver report's `arrival_clock` says of the simulator's arrival times.
const VIRTUAL_CLOCK: &str = "virtual";
/// Spreads a port's seed over its adapter clock's offset.
const CLOCK_SEED_MIX: u64 = 0xbf58_476d_1ce4_e5b9;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ev {
    /// A flow's source or TCP timers.
    Flow(u32),
    /// An output port's next transmission.
    Iface(u32),
    /// The next unit in flight on an interface's link reaches the far end.
    Arrive(u32),
    /// A shaped stream's next cell may leave.
    Shape(u32),
    /// A background source's next cell (or a recirculating cell's return).
    Bg(u32),
    /// An end-system stage (host CPU, router forwarding) releases a packet.
    EndSys(u32),
}

#[derive(Clone, Copy)]
struct Entry {
    at: u64,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

impl Entry {
    /// (time, insertion number) as one integer: cheaper to compare than a tuple.
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.at) << 64) | u128::from(self.seq)
    }
}

/// How many of the earliest pending events are kept in a sorted array instead of the heap
/// (a power of two: indices are masked, which lets the compiler drop bounds checks).
const NEAR: usize = 16;
const MASK: usize = NEAR - 1;

/// The future-event list: pops entries in (time, insertion number) order, exactly as one
/// binary heap would. A simulation usually has only a handful of pending wake-ups, and a new
/// one is usually the latest, so they live in a small array sorted earliest first: pop
/// advances `head`, push is an append after a short scan from the end. When the array is
/// full, the latest entries overflow into a binary heap, and `pop` takes the smaller of the
/// two minima, so the order never depends on where an entry was kept.
struct EventQueue {
    // The array as columns: the scan reads only times, and entries move as single words (a
    // whole `Entry` copied through the stack stalled store-to-load forwarding on every push).
    at: [u64; NEAR],
    seq: [u64; NEAR],
    ev: [Ev; NEAR],
    head: usize,
    len: usize,
    far: BinaryHeap<Reverse<Entry>>,
}

impl EventQueue {
    fn new() -> EventQueue {
        EventQueue {
            at: [0; NEAR],
            seq: [0; NEAR],
            ev: [Ev::Flow(0); NEAR],
            head: 0,
            len: 0,
            far: BinaryHeap::new(),
        }
    }

    #[inline(always)]
    fn entry(&self, i: usize) -> Entry {
        let i = i & MASK;
        Entry {
            at: self.at[i],
            seq: self.seq[i],
            ev: self.ev[i],
        }
    }

    /// Adds `e`, whose insertion number must be above every pending one (the engine numbers
    /// pushes in order), so it goes after every pending entry of the same time and only
    /// times need comparing.
    #[inline(always)]
    fn push(&mut self, e: Entry) {
        if self.len == NEAR && !self.make_room(e) {
            return;
        }
        // Here len < NEAR, so every index below is in range and the masks change nothing.
        self.insert_after_earlier(e, |q, i| q.at[i & MASK] > e.at);
    }

    /// Adds `e` with an insertion number that may be below pending ones (a wake-up the
    /// engine deferred), so whole keys are compared.
    #[cold]
    #[inline(never)]
    fn push_keyed(&mut self, e: Entry) {
        if self.len == NEAR && !self.make_room(e) {
            return;
        }
        self.insert_after_earlier(e, |q, i| q.entry(i).key() > e.key());
    }

    /// Moves up one slot the pending entries that `later` says go after `e`, from the
    /// latest down, and puts `e` in the gap.
    #[inline(always)]
    fn insert_after_earlier(&mut self, e: Entry, later: impl Fn(&Self, usize) -> bool) {
        let mut i = self.len;
        while i > self.head && later(self, i - 1) {
            let (to, from) = (i & MASK, (i - 1) & MASK);
            self.at[to] = self.at[from];
            self.seq[to] = self.seq[from];
            self.ev[to] = self.ev[from];
            i -= 1;
        }
        let i = i & MASK;
        self.at[i] = e.at;
        self.seq[i] = e.seq;
        self.ev[i] = e.ev;
        self.len += 1;
    }

    /// The array is full: compacts it, or moves its latest entry (or `e` itself, returning
    /// false) to the heap. Out of line, to keep `push` small where it is inlined.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, e: Entry) -> bool {
        if self.head > 0 {
            let live = self.head..self.len;
            self.at.copy_within(live.clone(), 0);
            self.seq.copy_within(live.clone(), 0);
            self.ev.copy_within(live, 0);
            self.len -= self.head;
            self.head = 0;
            return true;
        }
        let last = self.entry(NEAR - 1);
        if last.at <= e.at {
            self.far.push(Reverse(e));
            return false;
        }
        self.far.push(Reverse(last));
        self.len -= 1;
        true
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<Entry> {
        if self.head == self.len {
            return self.far.pop().map(|r| r.0);
        }
        let a = self.entry(self.head);
        if let Some(Reverse(b)) = self.far.peek() {
            if b.key() < a.key() {
                return self.far.pop().map(|r| r.0);
            }
        }
        self.head += 1;
        if self.head == self.len {
            self.head = 0;
            self.len = 0;
        }
        Some(a)
    }
}

#[derive(Debug, Clone, Copy)]
enum Unit {
    Cell(CellMeta),
    Packet { stream: u32, frame: u32 },
}

enum IfaceKind {
    /// A cell-level port: every ATM switch port, and a host's ATM adapter.
    Atm(Box<OutputPort>),
    /// A packet scheduler, over an IP link or (on routers) over ATM via AAL5.
    Ip(Box<IpIface>),
}

struct IpIface {
    /// Meters, classifier, scheduler, transmit ring and line: the emulator's port too.
    port: DiffServPort,
    over_atm: Option<Encapsulation>,
    packets_dropped: u64,
}

struct Iface {
    name: String,
    to: usize,
    delay_ns: u64,
    rate_bps: u64,
    kind: IfaceKind,
    flight: VecDeque<(u64, Unit)>,
    /// An IP link's impairment stage: packets leaving the port go through it instead of
    /// `flight`, and reach the far end when it releases them (in time order, which may not
    /// be the order they came in).
    impair: Option<Box<Impairments>>,
    /// An ATM link's cell loss on the line, deciding every stream cell it carries.
    line_loss: Option<Box<LineLoss>>,
    wake: u64,
    arrive_wake: u64,
    atm_encap: Option<Encapsulation>,
    /// Whether the far end is an ATM switch (cells are switched, not reassembled).
    to_switch: bool,
    /// The background sources loading this port, in index order.
    bgs: Vec<usize>,
    /// Every unit on this link ends its path at the far end with a delivery that touches
    /// only its own flow's receiver (UDP data, ping echoes). Such arrivals commute with
    /// every other event, so they are handled as the units leave, with their own arrival
    /// times, and need no events.
    sink: bool,
    /// `Iface` wake-ups of this port in the event list, stale ones included.
    queued: u32,
    /// A sink port's wake-up kept out of the event list, as (time, insertion number). While
    /// the port holds a single cell and nothing else of it is queued, that departure changes
    /// nothing another event sees until the port is next touched: it is replayed then (see
    /// `settle`) or at the end, or queued with its own insertion number if a second cell
    /// comes first. The run is the same, with fewer events.
    deferred: Option<(u64, u64)>,
}

#[derive(Debug, Clone, Copy)]
enum Payload {
    /// A datagram of sub-flow `sub` (a ping request, for an echoing flow).
    Udp {
        sub: u32,
        seq: u64,
    },
    /// An echoing flow's datagram on its way back.
    Echo {
        sub: u32,
        seq: u64,
        req_sent: u64,
        echoed: u64,
    },
    Seg {
        seg: Segment,
        txn: u64,
    },
    Ack(Ack),
}

/// What became of a packet sent on a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Somewhere on its path (a shaper, a queue, a link), or arriving after the end.
    InFlight,
    Delivered,
    /// Dropped: refused by a queue or policer, lost by an impairment, or its frame failed
    /// reassembly.
    Dropped,
    /// A fragmented datagram's piece, split again at a router: its parts carry it on.
    Split,
}

#[derive(Debug, Clone, Copy)]
struct Pkt {
    size: u32,
    cells: u32,
    /// Its DSCP: the stream's, until an edge's marker re-marks it.
    dscp: u8,
    sent_ns: u64,
    payload: Payload,
    fate: Fate,
    /// The piece of a fragmented datagram this record is, if it is one.
    frag: Option<Frag>,
}

impl Pkt {
    /// The sub-flow whose sequence the packet counts in.
    fn sub(&self) -> usize {
        match self.payload {
            Payload::Udp { sub, .. } | Payload::Echo { sub, .. } => sub as usize,
            Payload::Seg { .. } | Payload::Ack(_) => 0,
        }
    }
}

struct Stream {
    flow: usize,
    reverse: bool,
    path: Vec<usize>,
    ifaces: Vec<usize>,
    dscp: u8,
    inflight: VecDeque<Pkt>,
    base: u32,
    /// Some link of the path may deliver out of order (impairment jitter or reordering).
    reorders: bool,
    /// Packets an impairment stage sent twice, by frame, kept for their second arrival.
    copies: HashMap<u32, Pkt>,
    next_frame: u32,
    /// AAL5 receivers, one per node of the path.
    reasm: Vec<FrameDelimiter>,
    police_hop: Option<usize>,
    policer: Option<Policer>,
    shaper: Option<Shaper>,
    shape_q: VecDeque<CellMeta>,
    shape_wake: u64,
    frag: Fragmenter,
    /// The extra leaves of a point-to-multipoint VC rooted here: their streams and the
    /// switch where each gets its copies.
    replicas: Vec<(usize, usize)>,
}

impl Stream {
    /// AAL5 reassembly of `cell` at hop `hop` (a host or router); true when it completes a
    /// good frame. A frame is good only if exactly its own cells arrived; a lost last cell
    /// merges two frames and both fail the CRC.
    fn reassemble(&mut self, hop: usize, cell: CellMeta) -> bool {
        let Some(done) = self.reasm.get_mut(hop).and_then(|r| r.push(&cell)) else {
            return false;
        };
        let intact = done
            .frame
            .checked_sub(self.base)
            .and_then(|d| self.inflight.get(d as usize))
            .is_some_and(|p| done.is_intact(p.cells));
        if !intact {
            self.dropped(done.frame);
        }
        intact
    }

    /// Packet `frame` was dropped on the way (if it is still awaited).
    fn dropped(&mut self, frame: u32) {
        let slot = frame.checked_sub(self.base);
        if let Some(p) = slot.and_then(|d| self.inflight.get_mut(d as usize)) {
            if p.fate == Fate::InFlight {
                p.fate = Fate::Dropped;
            }
        }
    }

    /// Packet `frame` now carries `dscp`.
    fn remark(&mut self, frame: u32, dscp: u8) {
        let slot = frame.checked_sub(self.base);
        if let Some(p) = slot.and_then(|d| self.inflight.get_mut(d as usize)) {
            p.dscp = dscp;
        }
    }

    /// Packet `frame` was sent twice: its record is kept for the copy.
    fn copied(&mut self, frame: u32) {
        let slot = frame.checked_sub(self.base);
        if let Some(p) = slot.and_then(|d| self.inflight.get(d as usize)) {
            self.copies.insert(frame, *p);
        }
    }

    /// Packet `frame` reached the stream's last node: its record, unless it was dropped or
    /// already delivered (a copy). On a path that keeps order every earlier packet still
    /// awaited was dropped; settled packets leave the front of `inflight`.
    fn delivered(&mut self, frame: u32) -> Option<Pkt> {
        let idx = frame.checked_sub(self.base)? as usize;
        let p = self.inflight.get_mut(idx)?;
        if p.fate != Fate::InFlight {
            return None;
        }
        p.fate = Fate::Delivered;
        let pkt = *p;
        if !self.reorders {
            for earlier in self.inflight.iter_mut().take(idx) {
                if earlier.fate == Fate::InFlight {
                    earlier.fate = Fate::Dropped;
                }
            }
        }
        while self
            .inflight
            .front()
            .is_some_and(|p| p.fate != Fate::InFlight)
        {
            self.inflight.pop_front();
            self.base = self.base.wrapping_add(1);
        }
        Some(pkt)
    }

    /// Per sub-flow, packets neither delivered nor dropped (a fragmented datagram once).
    fn in_flight(&self, per_sub: &mut [u64]) {
        for p in self.inflight.iter().filter(|p| Stream::counts_in_flight(p)) {
            if let Some(n) = per_sub.get_mut(p.sub()) {
                *n += 1;
            }
        }
    }
}

enum Source {
    Udp(Box<FlowSender>),
    Ping { interval_ns: u64 },
    Tcp(Box<(TcpSender, TcpReceiver)>),
}

struct FlowRt {
    source: Source,
    /// The far end sends every datagram back (ping, loopback).
    echo: bool,
    next_k: u64,
    fwd: usize,
    rev: usize,
    wake: u64,
    sender: SenderMeter,
    receiver: ReceiverMeter,
    one_way: LatencyStats,
    /// Datagrams (TCP: segments) sent or lost at the sender, per sub-flow.
    sent: Vec<u64>,
    /// What the far end of an echoing flow sent back.
    echoed: EchoReport,
    txn: u64,
    finished_ns: Option<u64>,
}

struct Background {
    port_iface: usize,
    next_ns: u64,
    k: u64,
    interval: ExactNs,
    mean_ns: f64,
    frame: u32,
    in_frame: u32,
    injected: u64,
    returns: VecDeque<(u64, CellMeta)>,
    recirc: RecirculationLoop,
    wake: u64,
    /// A traffic model's frames, instead of cells at `rate`.
    model: Option<Box<ModelSource>>,
}

enum VcOwner {
    Stream(usize),
    Background(usize),
}

pub(crate) struct Sim<'m> {
    m: &'m Model,
    queue: EventQueue,
    seq: u64,
    /// The insertion number of the event being handled.
    cur_seq: u64,
    now: u64,
    end_ns: u64,
    ifaces: Vec<Iface>,
    streams: Vec<Stream>,
    flows: Vec<FlowRt>,
    bgs: Vec<Background>,
    owners: Vec<VcOwner>,
    rng: ChaCha8Rng,
    events: u64,
    cells_sent: u64,
    /// Datagrams a flow's sender hands over at one wake-up (kept to reuse its allocation).
    due: Vec<Transmit>,
    /// Host CPUs, router forwarding paths and applications reading sockets (`endsys`).
    endsys: Stages,
    /// Per flow, its receiving socket's buffer, if the flow has one.
    sockets: Vec<Option<SocketBuffer>>,
}

/// What one run produced.
#[derive(Debug, PartialEq)]
pub(crate) struct Outcome {
    pub flows: Vec<FlowReport>,
    /// Hosts whose CPU the end-system model charges.
    pub hosts: Vec<HostReport>,
    /// Per flow, what its far end sent back (nothing unless it echoes).
    pub echoes: Vec<EchoReport>,
    pub ports: Vec<PortReport>,
    pub backgrounds: Vec<BackgroundReport>,
    pub events: u64,
    pub cells: u64,
}

/// A paced TCP flow's application at `now`: the bytes it has written (one MSS every
/// MSS × 8 / pace seconds from its start, the first at the start) and when it writes next.
fn paced_writes(f: &FlowSpec, now: u64) -> Option<(u64, u64)> {
    let pace = u128::from(f.tcp.pace_bps?.max(1));
    let mss = u128::from(f.tcp.mss.max(1));
    let elapsed = u128::from(now.saturating_sub(f.start_ns));
    // Write k is due at start + ceil(k · mss · 8e9 / pace).
    let done = elapsed * pace / (mss * 8_000_000_000) + 1;
    let next = (done * mss * 8_000_000_000).div_ceil(pace);
    let next_ns = u64::try_from(next).map_or(NEVER, |n| f.start_ns.saturating_add(n));
    Some((u64::try_from(done * mss).unwrap_or(u64::MAX), next_ns))
}

/// Whether a flow's far end sends every datagram back (ping, loopback).
fn echoes(p: &Protocol) -> bool {
    match p {
        Protocol::Ping { .. } => true,
        Protocol::Udp(s) => s.echo,
        Protocol::Tcp => false,
    }
}

/// A flow's run-time state: its source (the pacers of a UDP flow, a ping clock, a TCP
/// connection) and its meters.
fn flow_rt(m: &Model, fi: usize, seed: u64) -> FlowRt {
    let f = &m.flows[fi];
    let source = match &f.protocol {
        // An extra leaf sends nothing itself: its root's cells are copied to it.
        _ if f.replica_of.is_some() => Source::Ping { interval_ns: NEVER },
        Protocol::Udp(spec) => {
            let end = EndCondition {
                until_ns: Some(f.stop_ns),
                count: f.count,
            };
            match FlowSender::new(spec, f.start_ns, end, spec.seed_for(seed, fi)) {
                Ok(s) => Source::Udp(Box::new(s)),
                Err(_) => Source::Ping { interval_ns: NEVER },
            }
        }
        Protocol::Ping { interval_ns } => Source::Ping {
            interval_ns: *interval_ns,
        },
        Protocol::Tcp => {
            let t = &f.tcp;
            let sc = SenderConfig {
                mss: t.mss.max(1),
                send_buffer: t.send_buffer.max(1),
                data: t.bytes.map_or(Data::Bulk, Data::Bytes),
                window_scaling: t.window_scaling,
                min_rto_ns: t.min_rto_ns,
                ..SenderConfig::default()
            };
            let rc = ReceiverConfig {
                buffer: t.window,
                window_scaling: t.window_scaling,
                delayed_ack_ns: t.delayed_ack_ns,
                ..ReceiverConfig::default()
            };
            match connect(sc, rc) {
                Ok(pair) => Source::Tcp(Box::new(pair)),
                Err(_) => Source::Ping { interval_ns: NEVER },
            }
        }
    };
    let echo = echoes(&f.protocol);
    let subflows = match &f.protocol {
        Protocol::Udp(spec) => spec.subflows.max(1) as usize,
        _ => 1,
    };
    let mut sender = SenderMeter::new(subflows, !matches!(f.protocol, Protocol::Tcp), false);
    if let Source::Udp(s) = &source {
        s.hold_to_contracts(&mut sender);
    }
    FlowRt {
        source,
        echo,
        next_k: 0,
        fwd: 2 * fi,
        rev: 2 * fi + 1,
        wake: NEVER,
        sender,
        receiver: ReceiverMeter::new(subflows, echo, false),
        one_way: LatencyStats::new(),
        sent: vec![0; subflows],
        echoed: EchoReport::default(),
        txn: 0,
        finished_ns: None,
    }
}

fn iface_of(m: &Model, from: usize, to: usize) -> Option<usize> {
    m.links.iter().enumerate().find_map(|(i, l)| {
        if (l.a, l.b) == (from, to) {
            Some(2 * i)
        } else if (l.a, l.b) == (to, from) {
            Some(2 * i + 1)
        } else {
            None
        }
    })
}

/// The per-VC limits of interface `i` (direction `i % 2` of link `i / 2`) if it is an ATM
/// switch's output port: a host adapter has its own buffer and no per-VC limits.
fn switch_vc_limits(m: &Model, i: usize) -> Option<VcLimits> {
    let l = &m.links[i / 2];
    let from = if i.is_multiple_of(2) { l.a } else { l.b };
    let atm = l.atm.as_ref()?;
    (m.nodes[from].kind == NodeKind::AtmSwitch).then_some(atm.port.vc_limits)
}

/// A host adapter's cell line: the physical line, or slower if its SAR segments slower.
fn adapter_line(line: LineRate, host: &NodeSpec) -> LineRate {
    match host.endsys.sar_rate_bps {
        Some(sar) if (sar as f64) < line.cell_bit_rate() => {
            LineRate::from_cell_bit_rate(sar).unwrap_or(line)
        }
        _ => line,
    }
}

/// A host adapter's transmit clock against the switches' (which share one): 10 to 20 ppm
/// either way, drawn from the port's seed, within SONET's free-running ±20 ppm. Without it
/// every adapter sends on the switches' cell grid, and a packet turned round at once (a ping
/// echo) reaches the next switch port exactly as a place in its buffer frees, ahead of any
/// cell arriving between slots, so it is never refused by a full buffer.
fn adapter_clock_ppm(port_seed: u64) -> i32 {
    let draw = ChaCha8Rng::seed_from_u64(port_seed ^ CLOCK_SEED_MIX).next_u32();
    let ppm = 10 + (draw % 11) as i32;
    if draw & (1 << 31) == 0 {
        ppm
    } else {
        -ppm
    }
}

/// Both directions of every link, each an output port (cells or packets) with its line, its
/// far end, and its impairment stage, seeded per direction from the run's `seed`.
fn ifaces(m: &Model, seed: u64) -> Vec<Iface> {
    let mut ifaces = Vec::with_capacity(m.links.len() * 2);
    for l in &m.links {
        for (from, to) in [(l.a, l.b), (l.b, l.a)] {
            let stage_seed = seed ^ (ifaces.len() as u64 + 1).wrapping_mul(STAGE_SEED_MIX);
            let impair = l
                .impair
                .as_ref()
                .map(|c| Box::new(Impairments::new(c.clone(), stage_seed)));
            let line_loss = l
                .atm
                .as_ref()
                .and_then(|a| LineLoss::new(a.cell_loss, stage_seed));
            let from_kind = m.nodes[from].kind;
            let kind = match (&l.atm, from_kind) {
                (Some(a), NodeKind::AtmSwitch | NodeKind::Host) => {
                    let buffer = if from_kind == NodeKind::Host {
                        a.host_buffer_cells
                    } else {
                        a.port.buffer_cells
                    };
                    let cfg = if from_kind == NodeKind::AtmSwitch {
                        a.port.port_config(buffer)
                    } else {
                        let mut cfg =
                            PortConfig::new(adapter_line(a.port.line, &m.nodes[from]), buffer);
                        cfg.clock_offset_ppm = adapter_clock_ppm(stage_seed);
                        cfg
                    };
                    IfaceKind::Atm(Box::new(OutputPort::new(cfg)))
                }
                _ => IfaceKind::Ip(Box::new(IpIface {
                    port: DiffServPort::new(&l.sched, l.rate_bps, l.tx_ring),
                    over_atm: l.atm.as_ref().map(|a| a.port.encap),
                    packets_dropped: 0,
                })),
            };
            ifaces.push(Iface {
                name: format!("{}->{}", m.nodes[from].name, m.nodes[to].name),
                to,
                delay_ns: l.delay_ns,
                rate_bps: l.rate_bps,
                kind,
                flight: VecDeque::new(),
                // Its releases need events of their own.
                sink: impair.is_none(),
                impair,
                line_loss,
                wake: NEVER,
                arrive_wake: NEVER,
                atm_encap: l.atm.as_ref().map(|a| a.port.encap),
                to_switch: m.nodes[to].kind == NodeKind::AtmSwitch,
                bgs: Vec::new(),
                queued: 0,
                deferred: None,
            });
        }
    }
    ifaces
}

impl<'m> Sim<'m> {
    pub(crate) fn new(m: &'m Model, seed: u64) -> Sim<'m> {
        let mut ifaces = ifaces(m, seed);

        let mut streams = Vec::new();
        let mut flows = Vec::new();
        let mut owners = Vec::new();
        for (fi, f) in m.flows.iter().enumerate() {
            for reverse in [false, true] {
                let mut path = f.path.clone();
                if reverse {
                    path.reverse();
                }
                let hops: Vec<usize> = path
                    .windows(2)
                    .filter_map(|w| iface_of(m, w[0], w[1]))
                    .collect();
                let police_hop = (!reverse && f.police.is_some())
                    .then(|| {
                        path.iter()
                            .position(|&n| m.nodes[n].kind == NodeKind::AtmSwitch)
                    })
                    .flatten();
                let policer = police_hop.and(f.contract.as_ref()).and_then(|c| {
                    c.contract(c.cdvt_ns)
                        .map(|k| Policer::new(k, f.police.unwrap_or(PolicingAction::Drop)))
                });
                let shaper = (!reverse && f.shape)
                    .then(|| {
                        f.contract
                            .as_ref()
                            .and_then(|c| c.contract(0))
                            .map(Shaper::new)
                    })
                    .flatten();
                let reorders = hops.iter().any(|&i| {
                    let stage = m.links[i / 2].impair.as_ref();
                    stage.is_some_and(|c| c.may_reorder())
                });
                let sid = streams.len();
                for &i in &hops {
                    let switch_limits = switch_vc_limits(m, i).map(|l| f.vc_limits.unwrap_or(l));
                    if let IfaceKind::Atm(port) = &mut ifaces[i].kind {
                        port.set_vc(VcId(sid as u32), f.service);
                        if let Some(limits) = switch_limits {
                            port.set_vc_limits(VcId(sid as u32), limits);
                        }
                    }
                }
                let mtus = hops.iter().map(|&i| m.links[i / 2].mtu).collect();
                streams.push(Stream {
                    frag: Fragmenter::new(mtus),
                    replicas: Vec::new(),
                    flow: fi,
                    reverse,
                    reasm: vec![FrameDelimiter::default(); path.len()],
                    path,
                    ifaces: hops,
                    dscp: f.dscp,
                    inflight: VecDeque::new(),
                    base: 0,
                    reorders,
                    copies: HashMap::new(),
                    next_frame: 0,
                    police_hop,
                    policer,
                    shaper,
                    shape_q: VecDeque::new(),
                    shape_wake: NEVER,
                });
                owners.push(VcOwner::Stream(sid));
            }
            flows.push(flow_rt(m, fi, seed));
        }

        for (fi, f) in m.flows.iter().enumerate() {
            if let Some((root, branch)) = f.replica_of {
                streams[2 * root].replicas.push((2 * fi, branch));
            }
        }
        for st in &streams {
            let delivers_only = match &m.flows[st.flow].protocol {
                Protocol::Tcp => false,
                // Requests are echoed at the far end; echoes end there.
                p if echoes(p) => st.reverse,
                // A one-way flow's reverse stream carries nothing.
                _ if st.reverse => continue,
                _ => true,
            };
            for &i in &st.ifaces {
                let to = ifaces[i].to;
                let ends_here = st
                    .path
                    .iter()
                    .position(|&n| n == to)
                    .is_some_and(|h| h + 1 == st.path.len());
                if !(delivers_only && ends_here) {
                    ifaces[i].sink = false;
                }
            }
        }

        let node_costs: Vec<_> = m.nodes.iter().map(|n| n.endsys).collect();
        let iface_to: Vec<usize> = ifaces.iter().map(|i| i.to).collect();
        let readers: Vec<_> = m
            .flows
            .iter()
            .map(|f| f.socket.and_then(|s| s.read_rate_bps).map(Cost::reading))
            .collect();
        let endsys = Stages::new(&node_costs, &iface_to, &readers, seed, m.duration_ns);
        for (i, iface) in ifaces.iter_mut().enumerate() {
            // A receiving host's CPU orders deliveries in time: no shortcut past it.
            if endsys.receive(i).is_some() {
                iface.sink = false;
            }
        }
        // A socket buffer's fill orders arrivals and reads in time, too.
        for st in streams
            .iter()
            .filter(|st| m.flows[st.flow].socket.is_some())
        {
            for &i in &st.ifaces {
                ifaces[i].sink = false;
            }
        }
        let sockets = m
            .flows
            .iter()
            .map(|f| {
                f.socket
                    .map(|s| SocketBuffer::new(s.buffer_bytes, FILL_SAMPLE_NS))
            })
            .collect();

        let mut bgs = Vec::new();
        for (bi, b) in m.backgrounds.iter().enumerate() {
            let l = &m.links[b.link];
            let port_iface = if l.a == b.node {
                2 * b.link
            } else {
                2 * b.link + 1
            };
            ifaces[port_iface].bgs.push(bi);
            let base = owners.len();
            let vcs: Vec<VcId> = (0..b.passes).map(|p| VcId((base + p) as u32)).collect();
            let limits = switch_vc_limits(m, port_iface).unwrap_or_default();
            for &vc in &vcs {
                if let IfaceKind::Atm(port) = &mut ifaces[port_iface].kind {
                    port.set_vc(vc, b.service);
                    port.set_vc_limits(vc, limits);
                }
                owners.push(VcOwner::Background(bi));
            }
            let interval = ExactNs::new(
                424 * 1_000_000_000,
                u128::from(b.cells_per_second_num.max(1)),
            )
            .unwrap_or(ExactNs::from_ns(1));
            let model = b.model.as_ref().zip(l.atm.as_ref()).and_then(|(spec, a)| {
                let seed = spec.seed_for(seed, m.flows.len() + bi);
                let line = a.port.line.cell_bit_rate();
                let rate = b.sar_rate_bps.map_or(line, |sar| line.min(sar as f64));
                ModelSource::new(b, spec, seed, a.port.encap, rate).map(Box::new)
            });
            bgs.push(Background {
                model,
                port_iface,
                next_ns: b.start_ns,
                k: 0,
                interval,
                mean_ns: interval.as_f64(),
                frame: 0,
                in_frame: 0,
                injected: 0,
                returns: VecDeque::new(),
                recirc: RecirculationLoop::new(vcs, b.loop_delay_ns),
                wake: NEVER,
            });
        }

        Sim {
            m,
            queue: EventQueue::new(),
            seq: 0,
            cur_seq: 0,
            now: 0,
            end_ns: m.duration_ns.saturating_add(m.drain_ns),
            ifaces,
            streams,
            flows,
            bgs,
            owners,
            rng: ChaCha8Rng::seed_from_u64(seed),
            events: 0,
            cells_sent: 0,
            due: Vec::new(),
            endsys,
            sockets,
        }
    }

    #[inline]
    fn push(&mut self, at: u64, ev: Ev) {
        self.queue.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
        self.seq += 1;
    }

    /// Runs to the end and returns the figures.
    pub(crate) fn run(mut self) -> Outcome {
        for f in 0..self.flows.len() {
            let t = self.m.flows[f].start_ns;
            self.flows[f].wake = t;
            self.push(t, Ev::Flow(f as u32));
        }
        for b in 0..self.bgs.len() {
            if self.m.backgrounds[b].start_ns < self.m.backgrounds[b].stop_ns {
                let t = self.bgs[b].next_ns;
                self.bgs[b].wake = t;
                self.push(t, Ev::Bg(b as u32));
            }
        }
        while let Some(e) = self.queue.pop() {
            if e.at > self.end_ns {
                break;
            }
            self.now = e.at;
            self.cur_seq = e.seq;
            self.events += 1;
            match e.ev {
                Ev::Flow(f) => {
                    let f = f as usize;
                    if self.flows[f].wake == e.at {
                        self.flows[f].wake = NEVER;
                    }
                    self.pump_flow(f);
                }
                Ev::Iface(i) => {
                    let i = i as usize;
                    self.ifaces[i].queued -= 1;
                    if self.ifaces[i].wake == e.at {
                        self.ifaces[i].wake = NEVER;
                    }
                    self.service(i);
                }
                Ev::Arrive(i) => {
                    let i = i as usize;
                    if self.ifaces[i].arrive_wake == e.at {
                        self.ifaces[i].arrive_wake = NEVER;
                    }
                    self.arrivals(i);
                }
                Ev::Shape(s) => {
                    let s = s as usize;
                    if self.streams[s].shape_wake == e.at {
                        self.streams[s].shape_wake = NEVER;
                    }
                    self.shape_release(s);
                }
                Ev::Bg(b) => {
                    let b = b as usize;
                    if self.bgs[b].wake == e.at {
                        self.bgs[b].wake = NEVER;
                    }
                    self.background(b);
                }
                Ev::EndSys(k) => self.endsys_release(k as usize),
            }
        }
        for i in 0..self.ifaces.len() {
            if self.ifaces[i]
                .deferred
                .is_some_and(|(t, _)| t <= self.end_ns)
            {
                self.replay(i);
            }
        }
        for fl in &mut self.flows {
            if let Source::Udp(s) = &fl.source {
                s.finish(&mut fl.sender);
            }
        }
        self.reports()
    }

    #[inline]
    fn ensure_iface(&mut self, i: usize) {
        let iface = &mut self.ifaces[i];
        let next = match &iface.kind {
            IfaceKind::Atm(p) => p.poll_timeout(),
            IfaceKind::Ip(ip) => ip.port.poll_timeout(),
        };
        if iface.deferred.is_some() {
            self.undefer(i);
        }
        let Some(t) = next else {
            return;
        };
        let iface = &mut self.ifaces[i];
        if t < iface.wake || iface.wake < self.now {
            iface.wake = t;
            let single = matches!(&iface.kind, IfaceKind::Atm(p) if p.occupancy() == 1);
            if single && iface.sink && iface.queued == 0 && iface.bgs.is_empty() {
                iface.deferred = Some((t, self.seq));
                self.seq += 1;
            } else {
                iface.queued += 1;
                self.push(t, Ev::Iface(i as u32));
            }
        }
    }

    /// A second cell reached port `i`: its deferred wake-up goes in the queue after all.
    #[cold]
    fn undefer(&mut self, i: usize) {
        let iface = &mut self.ifaces[i];
        if matches!(&iface.kind, IfaceKind::Atm(p) if p.occupancy() == 1) {
            return;
        }
        if let Some((t, seq)) = iface.deferred.take() {
            iface.queued += 1;
            self.queue.push_keyed(Entry {
                at: t,
                seq,
                ev: Ev::Iface(i as u32),
            });
        }
    }

    /// Before port `i` is touched: replays its deferred wake-up if that would have come
    /// before the event being handled.
    #[inline]
    fn settle(&mut self, i: usize) {
        if let Some(d) = self.ifaces[i].deferred {
            if d < (self.now, self.cur_seq) {
                self.replay(i);
            }
        }
    }

    /// Handles port `i`'s deferred wake-up as its event would have been handled then.
    fn replay(&mut self, i: usize) {
        let Some((t, _)) = self.ifaces[i].deferred.take() else {
            return;
        };
        if self.ifaces[i].wake == t {
            self.ifaces[i].wake = NEVER;
        }
        // The port is left empty, so the rest of `service` would do nothing.
        let now = std::mem::replace(&mut self.now, t);
        self.transmit(i);
        self.sink_arrivals(i);
        self.now = now;
    }

    #[inline]
    fn ensure_arrive(&mut self, i: usize) {
        let iface = &self.ifaces[i];
        let next = match &iface.impair {
            Some(stage) => stage.next_event_ns(),
            None => iface.flight.front().map(|&(t, _)| t),
        };
        if let Some(t) = next {
            if t < self.ifaces[i].arrive_wake || self.ifaces[i].arrive_wake < self.now {
                self.ifaces[i].arrive_wake = t;
                self.push(t, Ev::Arrive(i as u32));
            }
        }
    }

    fn ensure_flow(&mut self, f: usize, t: Option<u64>) {
        if let Some(t) = t {
            let t = t.max(self.now);
            if t < self.flows[f].wake || self.flows[f].wake < self.now {
                self.flows[f].wake = t;
                self.push(t, Ev::Flow(f as u32));
            }
        }
    }

    /// Sources: emit what is due, run TCP, schedule the next wake-up.
    fn pump_flow(&mut self, f: usize) {
        let now = self.now;
        let m = self.m;
        let spec = &m.flows[f];
        let stop = spec.stop_ns;
        let count = spec.count.unwrap_or(u64::MAX);
        let fwd = self.flows[f].fwd;
        match &mut self.flows[f].source {
            Source::Udp(sender) => {
                let mut due = std::mem::take(&mut self.due);
                let next = sender.poll(now, &mut due);
                for t in due.drain(..) {
                    self.send_datagram(f, t);
                }
                self.due = due;
                self.ensure_flow(f, next);
            }
            Source::Ping { interval_ns } => {
                let interval = *interval_ns;
                if interval == NEVER {
                    return;
                }
                let mut next = None;
                loop {
                    let k = self.flows[f].next_k;
                    let due = spec.start_ns.saturating_add(k.saturating_mul(interval));
                    if k >= count || due >= stop {
                        break;
                    }
                    if due > now {
                        next = Some(due);
                        break;
                    }
                    self.flows[f].next_k += 1;
                    let req = Payload::Udp { sub: 0, seq: k };
                    self.emit(fwd, req, spec.size, Some(due));
                }
                self.ensure_flow(f, next);
            }
            Source::Tcp(_) => self.pump_tcp(f),
        }
    }

    /// Sends datagram `t` of flow `f` (fragmented on the way if a link is too small for it).
    fn send_datagram(&mut self, f: usize, t: Transmit) {
        let m = self.m;
        let Protocol::Udp(spec) = &m.flows[f].protocol else {
            return;
        };
        let size = t.payload.saturating_add(spec.header_bytes);
        let fl = &mut self.flows[f];
        let (fwd, seq) = (
            fl.fwd,
            Payload::Udp {
                sub: t.sub,
                seq: t.seq,
            },
        );
        self.emit(fwd, seq, size, Some(t.deadline_ns));
    }

    fn pump_tcp(&mut self, f: usize) {
        let now = self.now;
        let stop = self.m.flows[f].stop_ns;
        if now >= stop || self.flows[f].finished_ns.is_some() {
            return;
        }
        let (fwd, rev) = (self.flows[f].fwd, self.flows[f].rev);
        let mut segs: Vec<Segment> = Vec::new();
        let mut acks: Vec<Ack> = Vec::new();
        let next;
        let finished;
        {
            let Source::Tcp(pair) = &mut self.flows[f].source else {
                return;
            };
            let (tx, rx) = &mut **pair;
            if tx.poll_timeout().is_some_and(|t| t <= now) {
                tx.handle_timeout(now);
            }
            let writes = paced_writes(&self.m.flows[f], now);
            if let Some((written, _)) = writes {
                tx.set_written(written);
            }
            while let Some(s) = tx.poll_transmit(now) {
                segs.push(s);
            }
            while let Some(a) = rx.poll_transmit(now) {
                acks.push(a);
            }
            finished = tx.is_finished();
            next = [tx.poll_timeout(), rx.poll_timeout(), writes.map(|w| w.1)]
                .into_iter()
                .flatten()
                .min();
        }
        if finished {
            self.flows[f].finished_ns = Some(now);
        }
        for seg in segs {
            let txn = self.flows[f].txn;
            self.flows[f].txn += 1;
            self.emit(fwd, Payload::Seg { seg, txn }, seg.wire_size, None);
        }
        for ack in acks {
            self.emit(rev, Payload::Ack(ack), ack.wire_size, None);
        }
        if self.flows[f].finished_ns.is_none() {
            self.ensure_flow(f, next.filter(|&t| t < stop));
        }
    }

    /// A host sends a packet on `stream` (its first hop).
    fn emit(&mut self, s: usize, payload: Payload, size: u32, deadline: Option<u64>) {
        let st = &mut self.streams[s];
        let frame = st.push_datagram(size, self.now, payload);
        let (flow, reverse) = (st.flow, st.reverse);
        if !reverse {
            self.count_sent(flow, payload, size, deadline);
        }
        let node = self.streams[s].path[0];
        match self.endsys.send(node) {
            Some(k) => self.hold(k, s, frame, Next::Forward { hop: 0 }, size),
            None => self.forward(s, 0, frame),
        }
        if !self.streams[s].replicas.is_empty() {
            self.copy_to_replicas(s, frame, payload, size, deadline);
        }
    }

    /// Flow `f`'s sender sent `payload` of `size` bytes now.
    fn count_sent(&mut self, f: usize, payload: Payload, size: u32, deadline: Option<u64>) {
        let now = self.now;
        let (sub, seq) = match payload {
            Payload::Udp { sub, seq } => (sub as usize, seq),
            Payload::Seg { txn, .. } => (0, txn),
            _ => (0, 0),
        };
        let metered = size.saturating_sub(self.m.flows[f].metered_headers);
        let fl = &mut self.flows[f];
        fl.sender.on_sent(sub, seq, metered, now, deadline, now);
        if let Some(n) = fl.sent.get_mut(sub) {
            *n += 1;
        }
    }

    /// Holds packet `frame` of stream `s` (`bytes` of it count) in end-system stage `k`
    /// until it is released.
    fn hold(&mut self, k: usize, s: usize, frame: u32, next: Next, bytes: u32) {
        let stream = s as u32;
        let held = Held {
            stream,
            frame,
            next,
        };
        let t = self.endsys.stages[k].hold(self.now, held, bytes);
        self.push(t, Ev::EndSys(k as u32));
    }

    /// The size of packet `frame` of stream `s` (0 once it is no longer awaited).
    fn packet_size(&self, s: usize, frame: u32) -> u32 {
        let st = &self.streams[s];
        frame
            .checked_sub(st.base)
            .and_then(|d| st.inflight.get(d as usize))
            .map_or(0, |p| p.size)
    }

    /// What end-system stage `k` releases by now goes on its way.
    fn endsys_release(&mut self, k: usize) {
        while let Some(h) = self.endsys.stages[k].release(self.now) {
            let s = h.stream as usize;
            match h.next {
                Next::Forward { hop } => self.forward(s, hop as usize, h.frame),
                Next::Read => self.await_read(s, h.frame),
                Next::Deliver => self.read(s, h.frame),
            }
        }
    }

    /// Hands packet `frame` of stream `s` to the interface of hop `hop`.
    fn forward(&mut self, s: usize, hop: usize, frame: u32) {
        let now = self.now;
        let Some(&i) = self.streams[s].ifaces.get(hop) else {
            return;
        };
        // First: a replayed delivery may retire earlier packets and move the slots.
        self.settle(i);
        let parts = self.streams[s].split_at(frame, hop);
        if !parts.is_empty() {
            for part in parts {
                self.forward(s, hop, part);
            }
            return;
        }
        let Some(idx) = frame.checked_sub(self.streams[s].base).map(|d| d as usize) else {
            return;
        };
        let Some((size, dscp)) = self.streams[s].inflight.get(idx).map(|p| (p.size, p.dscp)) else {
            return;
        };
        let encap = self.encap_of(s, i);
        match &mut self.ifaces[i].kind {
            IfaceKind::Atm(port) => {
                let n =
                    cells_per_packet(size as usize, encap.unwrap_or(Encapsulation::LlcSnapRouted))
                        as u32;
                if let Some(p) = self.streams[s].inflight.get_mut(idx) {
                    p.cells = n;
                }
                let vc = VcId(s as u32);
                // A shaped VC queues in its adapter's buffer: a frame that does not fit whole
                // is the sender's loss.
                let adapter_cells = self.m.links[i / 2]
                    .atm
                    .as_ref()
                    .map_or(usize::MAX, |a| a.host_buffer_cells);
                let st = &mut self.streams[s];
                if hop == 0 && st.shaper.is_some() && st.shape_q.len() + n as usize > adapter_cells
                {
                    st.dropped(frame);
                } else if hop == 0 && st.shaper.is_some() {
                    let was_empty = st.shape_q.is_empty();
                    for j in 0..n {
                        st.shape_q
                            .push_back(CellMeta::user_data(vc, frame, j + 1 == n));
                    }
                    if was_empty {
                        if let Some(sh) = st.shaper.as_mut() {
                            let t = sh.departure_ns(now);
                            st.shape_wake = t;
                            self.push(t, Ev::Shape(s as u32));
                        }
                    }
                } else {
                    if port.enqueue_frame(now, vc, frame, n) < n {
                        st.dropped(frame);
                    }
                    self.ensure_iface(i);
                }
            }
            IfaceKind::Ip(ip) => {
                let charged = match ip.over_atm {
                    Some(e) => {
                        let n = cells_per_packet(size as usize, e);
                        if let Some(p) = self.streams[s].inflight.get_mut(idx) {
                            p.cells = n as u32;
                        }
                        (n * 53) as u32
                    }
                    None => size,
                };
                let pkt = PacketMeta::new(u64::from(frame), s as u32, charged, now).with_dscp(dscp);
                if ip.port.enqueue(now, pkt).is_err() {
                    ip.packets_dropped += 1;
                    self.streams[s].dropped(frame);
                }
                self.ensure_iface(i);
            }
        }
    }

    fn shape_release(&mut self, s: usize) {
        let now = self.now;
        let Some(&i) = self.streams[s].ifaces.first() else {
            return;
        };
        self.settle(i);
        let st = &mut self.streams[s];
        let Some(cell) = st.shape_q.pop_front() else {
            return;
        };
        if let IfaceKind::Atm(port) = &mut self.ifaces[i].kind {
            if port.enqueue(now, cell) != AtmVerdict::Queued {
                st.dropped(cell.frame);
            }
        }
        if !st.shape_q.is_empty() {
            if let Some(sh) = st.shaper.as_mut() {
                let t = sh.departure_ns(now);
                st.shape_wake = t;
                self.push(t, Ev::Shape(s as u32));
            }
        }
        self.ensure_iface(i);
    }

    /// An output port's transmissions due by now.
    fn service(&mut self, i: usize) {
        self.transmit(i);
        if self.ifaces[i].sink {
            self.sink_arrivals(i);
        }
        self.ensure_iface(i);
        self.ensure_arrive(i);
        // Recirculated background cells come back later.
        for k in 0..self.ifaces[i].bgs.len() {
            let b = self.ifaces[i].bgs[k];
            self.ensure_bg(b);
        }
    }

    /// Puts on the line what port `i` sends by now.
    fn transmit(&mut self, i: usize) {
        let now = self.now;
        let delay = self.ifaces[i].delay_ns;
        let iface = &mut self.ifaces[i];
        match &mut iface.kind {
            IfaceKind::Atm(port) => {
                let n_streams = self.streams.len();
                while let Some(d) = port.poll_transmit(now) {
                    self.cells_sent += 1;
                    let vc = d.cell.vc.0 as usize;
                    // Stream VCs come first (dense indices), background passes after them.
                    if vc < n_streams && iface.line_loss.as_mut().is_some_and(|l| l.lose()) {
                        continue;
                    }
                    if vc < n_streams {
                        let t = d.tx_end_ns.saturating_add(delay);
                        if !iface.sink {
                            iface.flight.push_back((t, Unit::Cell(d.cell)));
                            continue;
                        }
                        // Reassembled as it leaves: the far end is the stream's last node and
                        // only the complete frame is left to deliver (see `Iface::sink`).
                        let st = &mut self.streams[vc];
                        if st.reassemble(st.path.len().saturating_sub(1), d.cell) {
                            let (stream, frame) = (vc as u32, d.cell.frame);
                            iface.flight.push_back((t, Unit::Packet { stream, frame }));
                        }
                        continue;
                    }
                    match self.owners.get(vc) {
                        Some(VcOwner::Stream(_)) => {
                            iface
                                .flight
                                .push_back((d.tx_end_ns.saturating_add(delay), Unit::Cell(d.cell)));
                        }
                        Some(VcOwner::Background(b)) => {
                            let b = *b;
                            recirculate(&mut self.bgs[b], &d);
                        }
                        None => {}
                    }
                }
            }
            IfaceKind::Ip(ip) => {
                while let Some(d) = ip.port.poll_transmit(now) {
                    let (start, end, pkt) = (d.start_ns, d.end_ns, d.packet);
                    let stream = pkt.flow;
                    let frame = pkt.id as u32;
                    // A marker may have re-marked it: the next hops classify the new DSCP.
                    self.streams[stream as usize].remark(frame, pkt.dscp);
                    match (ip.over_atm, iface.impair.as_mut()) {
                        (None, None) => iface
                            .flight
                            .push_back((end.saturating_add(delay), Unit::Packet { stream, frame })),
                        (None, Some(stage)) => {
                            let id = (u64::from(stream) << 32) | u64::from(frame);
                            let (len, dscp) = (pkt.size, pkt.dscp);
                            let st = &mut self.streams[stream as usize];
                            match stage.enqueue(end, Frame { id, len, dscp }) {
                                LinkVerdict::Dropped(_) => st.dropped(frame),
                                LinkVerdict::Duplicated => st.copied(frame),
                                LinkVerdict::Queued => {}
                            }
                        }
                        (Some(_), _) => {
                            let n = u64::from(pkt.size / 53).max(1);
                            let span = end - start;
                            for j in 0..n {
                                self.cells_sent += 1;
                                if iface.line_loss.as_mut().is_some_and(|l| l.lose()) {
                                    continue;
                                }
                                let t = start + (span * (j + 1)).div_ceil(n);
                                let cell = CellMeta::user_data(VcId(stream), frame, j + 1 == n);
                                iface
                                    .flight
                                    .push_back((t.saturating_add(delay), Unit::Cell(cell)));
                            }
                        }
                    }
                }
            }
        }
    }

    /// Units reaching the far end of interface `i`'s link.
    fn arrivals(&mut self, i: usize) {
        let now = self.now;
        let node = self.ifaces[i].to;
        let to_switch = self.ifaces[i].to_switch;
        while let Some(&(t, unit)) = self.ifaces[i].flight.front() {
            if t > now {
                break;
            }
            self.ifaces[i].flight.pop_front();
            self.unit_at(node, to_switch, unit, now);
        }
        while let Some(e) = self.ifaces[i]
            .impair
            .as_mut()
            .and_then(|st| st.dequeue(now))
        {
            // The stage yields only departures; its drops were seen as it took the packets.
            if let LinkEvent::Depart { frame, .. } = e {
                let (stream, frame) = ((frame.id >> 32) as u32, frame.id as u32);
                self.unit_at(node, to_switch, Unit::Packet { stream, frame }, now);
            }
        }
        self.ensure_arrive(i);
    }

    /// Everything in flight on sink link `i` (see `Iface::sink`), each at its own arrival
    /// time; units arriving after the end are never seen, as with events.
    fn sink_arrivals(&mut self, i: usize) {
        let node = self.ifaces[i].to;
        let to_switch = self.ifaces[i].to_switch;
        while let Some((t, unit)) = self.ifaces[i].flight.pop_front() {
            if t > self.end_ns {
                self.ifaces[i].flight.clear();
                break;
            }
            self.unit_at(node, to_switch, unit, t);
        }
    }

    /// `unit` reaches `node` at `now`.
    fn unit_at(&mut self, node: usize, to_switch: bool, unit: Unit, now: u64) {
        match unit {
            Unit::Cell(cell) => self.cell_at(node, to_switch, cell, now),
            Unit::Packet { stream, frame } => {
                let s = stream as usize;
                if let Some(hop) = self
                    .streams
                    .get(s)
                    .and_then(|st| st.path.iter().position(|&n| n == node))
                {
                    self.packet_at(s, hop, frame, now);
                }
            }
        }
    }

    fn cell_at(&mut self, node: usize, to_switch: bool, mut cell: CellMeta, now: u64) {
        let s = cell.vc.0 as usize;
        let Some(st) = self.streams.get_mut(s) else {
            return;
        };
        let Some(hop) = st.path.iter().position(|&n| n == node) else {
            return;
        };
        if to_switch {
            if st.police_hop == Some(hop) {
                if let Some(p) = st.policer.as_mut() {
                    match p.police(now, cell.clp) {
                        PolicerVerdict::Pass => {}
                        PolicerVerdict::Tag => cell.clp = true,
                        PolicerVerdict::Drop => {
                            st.dropped(cell.frame);
                            return;
                        }
                    }
                }
            }
            let Some(&i) = st.ifaces.get(hop) else {
                return;
            };
            if !st.replicas.is_empty() {
                self.replicate_cell(s, node, cell, now);
            }
            self.settle(i);
            if let IfaceKind::Atm(port) = &mut self.ifaces[i].kind {
                if port.enqueue(now, cell) != AtmVerdict::Queued {
                    self.streams[s].dropped(cell.frame);
                }
            }
            self.ensure_iface(i);
            return;
        }
        if st.reassemble(hop, cell) {
            self.packet_at(s, hop, cell.frame, now);
        }
    }

    /// Packet `frame` of stream `s` reaches hop `hop` at `now` (the clock, except on a sink
    /// link, where only deliveries happen).
    fn packet_at(&mut self, s: usize, hop: usize, frame: u32, now: u64) {
        let st = &self.streams[s];
        if hop + 1 < st.path.len() {
            match self.endsys.forward(st.path[hop]) {
                Some(k) => {
                    let size = self.packet_size(s, frame);
                    self.hold(k, s, frame, Next::Forward { hop: hop as u32 }, size);
                }
                None => self.forward(s, hop, frame),
            }
            return;
        }
        // Only non-sink links reach a receive stage or a socket buffer, so `now` is the
        // clock here.
        let into = hop.checked_sub(1).and_then(|h| st.ifaces.get(h).copied());
        self.at_host(s, frame, into, now);
    }

    /// Packet `frame` of stream `s` reaches its receiving application at `now`.
    fn deliver(&mut self, s: usize, frame: u32, now: u64) {
        let st = &mut self.streams[s];
        // A copy's second arrival is delivered again, as a real receiver sees it.
        let Some(pkt) = st.delivered(frame).or_else(|| st.copies.remove(&frame)) else {
            return;
        };
        let Some(pkt) = st.reassemble_ip(pkt, now) else {
            return;
        };
        let f = st.flow;
        let delay = now.saturating_sub(pkt.sent_ns);
        match pkt.payload {
            Payload::Udp { sub, seq } if self.flows[f].echo => {
                let payload = pkt.size.saturating_sub(self.m.flows[f].metered_headers);
                let fl = &mut self.flows[f];
                fl.one_way.push(delay as i64);
                fl.echoed.packets_echoed += 1;
                fl.echoed.bytes_echoed += u64::from(payload);
                let echo = Payload::Echo {
                    sub,
                    seq,
                    req_sent: pkt.sent_ns,
                    echoed: now,
                };
                let rev = fl.rev;
                self.emit(rev, echo, pkt.size, None);
            }
            Payload::Udp { sub, seq } => self.record(f, sub, seq, pkt, now),
            Payload::Seg { seg, txn } => {
                self.record(f, 0, txn, pkt, now);
                if let Source::Tcp(pair) = &mut self.flows[f].source {
                    pair.1.on_segment(now, &seg);
                }
                self.pump_tcp(f);
            }
            Payload::Ack(ack) => {
                if let Source::Tcp(pair) = &mut self.flows[f].source {
                    pair.0.on_ack(now, &ack);
                }
                self.pump_tcp(f);
            }
            Payload::Echo {
                sub,
                seq,
                req_sent,
                echoed,
            } => {
                let size = pkt.size.saturating_sub(self.m.flows[f].metered_headers);
                self.flows[f].receiver.on_packet(
                    sub as usize,
                    Arrived {
                        seq,
                        size,
                        sent_ns: req_sent,
                        echoed_ns: Some(echoed),
                        arrival_ns: now,
                        kernel_stamp: true,
                    },
                );
            }
        }
    }

    /// A one-way packet (UDP datagram, TCP segment) of sub-flow `sub` delivered at `now`.
    fn record(&mut self, f: usize, sub: u32, seq: u64, pkt: Pkt, now: u64) {
        let size = pkt.size.saturating_sub(self.m.flows[f].metered_headers);
        let fl = &mut self.flows[f];
        fl.one_way.push(now.saturating_sub(pkt.sent_ns) as i64);
        fl.receiver.on_packet(
            sub as usize,
            Arrived {
                seq,
                size,
                sent_ns: pkt.sent_ns,
                echoed_ns: None,
                arrival_ns: now,
                kernel_stamp: true,
            },
        );
    }

    fn ensure_bg(&mut self, b: usize) {
        let stop = self.m.backgrounds[b].stop_ns;
        let bg = &self.bgs[b];
        let emit = match &bg.model {
            Some(src) => src.next_ns(),
            None => (bg.next_ns < stop).then_some(bg.next_ns),
        };
        let ret = bg.returns.front().map(|r| r.0);
        let t = match (emit, ret) {
            (Some(a), Some(r)) => Some(a.min(r)),
            (a, r) => a.or(r),
        };
        if let Some(t) = t {
            if t < self.bgs[b].wake || self.bgs[b].wake < self.now {
                self.bgs[b].wake = t;
                self.push(t, Ev::Bg(b as u32));
            }
        }
    }

    fn background(&mut self, b: usize) {
        let now = self.now;
        let m = self.m;
        let spec = &m.backgrounds[b];
        let i = self.bgs[b].port_iface;
        let IfaceKind::Atm(port) = &mut self.ifaces[i].kind else {
            return;
        };
        let bg = &mut self.bgs[b];
        while let Some(&(t, cell)) = bg.returns.front() {
            if t > now {
                break;
            }
            bg.returns.pop_front();
            port.enqueue(now, cell);
        }
        let vc = bg.recirc.first_vc();
        if let (Some(src), Some(vc)) = (bg.model.as_mut(), vc) {
            let mut cells = Vec::new();
            src.cells_due(now, &mut cells);
            for (frame, end) in cells {
                let mut cell = CellMeta::user_data(vc, frame, end);
                cell.clp = spec.clp;
                port.enqueue(now, cell);
                bg.injected += 1;
            }
        }
        while bg.model.is_none() && bg.next_ns <= now && bg.next_ns < spec.stop_ns {
            let Some(vc) = bg.recirc.first_vc() else {
                break;
            };
            bg.in_frame += 1;
            let end = bg.in_frame >= spec.cells_per_frame;
            let mut cell = CellMeta::user_data(vc, bg.frame, end);
            cell.clp = spec.clp;
            if end {
                bg.in_frame = 0;
                bg.frame = bg.frame.wrapping_add(1);
            }
            port.enqueue(now, cell);
            bg.injected += 1;
            bg.k += 1;
            bg.next_ns = if spec.poisson {
                let unit: f64 = rand_distr::Distribution::sample(&Exp1, &mut self.rng);
                let gap = unit * bg.mean_ns;
                bg.next_ns.saturating_add(gap.round().max(0.0) as u64)
            } else {
                spec.start_ns.saturating_add(bg.interval.times_floor(bg.k))
            };
        }
        self.ensure_iface(i);
        self.ensure_bg(b);
    }

    /// Flow `fi`'s figures at the end of the run.
    fn flow_report(&self, fi: usize) -> FlowReport {
        let m = self.m;
        let f = &m.flows[fi];
        let rt = &self.flows[fi];
        let st = &self.streams[rt.fwd];
        let sender = rt.sender.report();
        // Loss counts only packets whose fate is known: drops, not those still on the way.
        let mut in_flight = vec![0; rt.sent.len()];
        st.in_flight(&mut in_flight);
        if rt.echo {
            self.streams[rt.rev].in_flight(&mut in_flight);
        }
        let settled: Vec<u64> = (rt.sent.iter().zip(&in_flight))
            .map(|(sent, flying)| sent.saturating_sub(*flying))
            .collect();
        let mut receiver = rt.receiver.report(Some(&settled));
        if receiver.packets.received > 0 {
            receiver.arrival_clock = VIRTUAL_CLOCK.to_string();
        }
        if let Some(b) = &self.sockets[fi] {
            receiver.socket_buffer_drops = Some(b.report(self.end_ns).overflows);
        }
        let one_way = rt.one_way.summary();
        let (goodput_bytes, tcp) = match &rt.source {
            Source::Tcp(pair) => {
                let (tx, rx) = &**pair;
                let stats = tx.stats();
                (
                    rx.delivered(),
                    Some(TcpReport {
                        segments_sent: stats.segments_sent,
                        retransmitted_segments: stats.retransmitted_segments,
                        fast_retransmits: stats.fast_retransmits,
                        timeouts: stats.timeouts,
                        delivered_bytes: rx.delivered(),
                        finished_ns: rt.finished_ns,
                        window_shift: tx.window_shift(),
                        final_cwnd: tx.cwnd(),
                    }),
                )
            }
            _ => {
                let hdr = if f.native { 0 } else { 28u64 };
                let pkts = receiver.packets.unique;
                (receiver.bytes_received.saturating_sub(pkts * hdr), None)
            }
        };
        let slots: u64 = settled.iter().sum();
        let sent = slots.max(1);
        let lost = receiver.packets.lost;
        FlowReport {
            name: f.name.clone(),
            protocol: match f.protocol {
                Protocol::Udp(_) if f.native => "raw",
                Protocol::Udp(_) => "udp",
                Protocol::Ping { .. } => "ping",
                Protocol::Tcp => "tcp",
            }
            .to_string(),
            path: st.path.iter().map(|&n| m.nodes[n].name.clone()).collect(),
            service: format!("{:?}", f.service).to_lowercase(),
            dscp: f.dscp,
            packet_bytes: f.size,
            cells_per_packet: st
                .ifaces
                .first()
                .and_then(|&i| Some((self.encap_of(rt.fwd, i)?, m.links[i / 2].mtu)))
                .filter(|_| f.size > 0)
                .map(|(e, mtu)| cells_of_datagram(f.size, mtu, e)),
            delay_variation_ns: one_way.map_or(0.0, |s| s.peak_to_peak_ns),
            one_way_delay: one_way,
            loss_ratio: if slots == 0 {
                0.0
            } else {
                lost as f64 / sent as f64
            },
            // Over the receiving span, as a real test's receiver measures.
            throughput_bps: rate_over_span(
                receiver.bytes_received * 8,
                receiver.packets.unique,
                receiver.duration_ns,
            ),
            goodput_bps: rate_over_span(
                goodput_bytes * 8,
                receiver.packets.unique,
                receiver.duration_ns,
            ),
            policer: st.policer.as_ref().map(|p| {
                let c = p.counters();
                PolicerReport {
                    passed: c.passed,
                    tagged: c.tagged,
                    dropped: c.dropped,
                }
            }),
            tcp,
            in_flight_at_end: in_flight.iter().sum(),
            fragmentation: FragReport::both(st.frag_report(), self.streams[rt.rev].frag_report()),
            socket_buffer: self.sockets[fi].as_ref().map(|b| b.report(self.end_ns)),
            sender,
            receiver,
        }
    }

    fn reports(mut self) -> Outcome {
        let m = self.m;
        for st in &mut self.streams {
            st.frag.expire(self.end_ns);
        }
        let flows = (0..m.flows.len()).map(|fi| self.flow_report(fi)).collect();
        let vc_name = |vc: u32| -> String {
            match self.owners.get(vc as usize) {
                Some(VcOwner::Stream(s)) => {
                    let st = &self.streams[*s];
                    format!(
                        "{}/{}",
                        m.flows[st.flow].name,
                        if st.reverse { "rev" } else { "fwd" }
                    )
                }
                Some(VcOwner::Background(b)) => {
                    let pass = self.bgs[*b]
                        .recirc
                        .vcs()
                        .iter()
                        .position(|v| v.0 == vc)
                        .unwrap_or(0);
                    format!("{}/pass{}", m.backgrounds[*b].name, pass)
                }
                None => format!("vc{vc}"),
            }
        };
        let mut ports = Vec::new();
        for iface in &self.ifaces {
            match &iface.kind {
                IfaceKind::Atm(p) => {
                    let c = p.counters();
                    if c.cells_in == 0 {
                        continue;
                    }
                    let vcs = (0..self.owners.len() as u32)
                        .filter_map(|v| {
                            p.vc_counters(VcId(v))
                                .filter(|vc| vc.cells_in > 0)
                                .map(|vc| VcReport {
                                    name: vc_name(v),
                                    cells_in: vc.cells_in,
                                    cells_out: vc.cells_out,
                                    cells_dropped: vc.cells_dropped,
                                    frames_epd: vc.frames_epd,
                                    frames_ppd: vc.frames_ppd,
                                })
                        })
                        .collect();
                    ports.push(PortReport {
                        name: iface.name.clone(),
                        kind: "atm".into(),
                        rate_bps: iface.rate_bps,
                        cells_in: c.cells_in,
                        cells_out: c.cells_out,
                        cells_dropped: c.dropped(),
                        dropped_buffer_full: c.dropped_buffer_full,
                        dropped_epd: c.dropped_epd,
                        dropped_ppd: c.dropped_ppd,
                        dropped_clp: c.dropped_clp,
                        frames_epd: c.frames_epd,
                        frames_ppd: c.frames_ppd,
                        max_occupancy_cells: c.max_occupancy,
                        cells_lost_on_line: iface.line_loss.as_ref().map_or(0, |l| l.lost),
                        vcs,
                        classes: Vec::new(),
                        impair: None,
                    });
                }
                IfaceKind::Ip(ip) => {
                    let classes: Vec<ClassReport> = ip
                        .port
                        .classes()
                        .into_iter()
                        .map(|c| ClassReport {
                            name: c.name,
                            enqueued: c.enqueued,
                            sent: c.sent,
                            dropped: c.dropped,
                            sent_bytes: c.sent_bytes,
                            out_of_profile: c.out_of_profile,
                            remarked: c.remarked,
                        })
                        .collect();
                    let idle = |c: &ClassReport| c.enqueued == 0 && c.dropped == 0;
                    if classes.iter().all(|c| idle(c) && c.out_of_profile == 0) {
                        continue;
                    }
                    ports.push(PortReport {
                        name: iface.name.clone(),
                        kind: if ip.over_atm.is_some() {
                            "ip-over-atm"
                        } else {
                            "ip"
                        }
                        .into(),
                        rate_bps: iface.rate_bps,
                        cells_in: 0,
                        cells_out: 0,
                        cells_dropped: 0,
                        dropped_buffer_full: ip.packets_dropped,
                        dropped_epd: 0,
                        dropped_ppd: 0,
                        dropped_clp: 0,
                        frames_epd: 0,
                        frames_ppd: 0,
                        max_occupancy_cells: 0,
                        cells_lost_on_line: iface.line_loss.as_ref().map_or(0, |l| l.lost),
                        vcs: Vec::new(),
                        classes,
                        impair: iface.impair.as_ref().and_then(|stage| {
                            let mut reports = Vec::new();
                            stage.report(&mut reports);
                            reports.pop()
                        }),
                    });
                }
            }
        }
        let bgs = m
            .backgrounds
            .iter()
            .zip(&self.bgs)
            .map(|(s, b)| BackgroundReport {
                name: s.name.clone(),
                cells_injected: b.injected,
                passes: s.passes as u64,
            })
            .collect();
        Outcome {
            hosts: self.host_reports(),
            flows,
            echoes: self.flows.into_iter().map(|f| f.echoed).collect(),
            ports,
            backgrounds: bgs,
            events: self.events,
            cells: self.cells_sent,
        }
    }
}

fn recirculate(bg: &mut Background, d: &Departure) {
    if let LoopStep::Recirculate { arrival_ns, cell } = bg.recirc.next_pass(d) {
        bg.returns.push_back((arrival_ns, cell));
    }
}

mod bg_model;
mod cell_loss;
#[cfg(test)]
mod echo_tests;
mod fragments;
mod host;
mod p2mp;

/// Cells a datagram of `size` IP bytes takes on an ATM link of `mtu`: every fragment is its
/// own AAL5 frame.
fn cells_of_datagram(size: u32, mtu: u32, encap: Encapsulation) -> u64 {
    crate::frag::Piece::whole(size)
        .fragment(mtu)
        .iter()
        .map(|p| cells_per_packet(p.wire_size() as usize, encap) as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 002's Table 2: a 2048-byte ping (2076 IP bytes) is 44 cells whole, 45 as the
    /// two fragments of a 1500-byte MTU; the 4096-byte one is 32 + 32 + 25.
    #[test]
    fn a_fragmented_datagram_takes_the_cells_of_its_fragments() {
        let llc = Encapsulation::LlcSnapRouted;
        assert_eq!(cells_of_datagram(2076, 9180, llc), 44);
        assert_eq!(cells_of_datagram(2076, 1500, llc), 45);
        assert_eq!(cells_of_datagram(4124, 1500, llc), 89);
        assert_eq!(cells_of_datagram(92, 1500, llc), 3);
    }

    /// The event queue pops exactly what one binary heap of (time, insertion number) would,
    /// including when more than `NEAR` entries are pending and some live in the heap.
    #[test]
    fn event_queue_pops_in_heap_order() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut q = EventQueue::new();
        let mut heap = BinaryHeap::new();
        let (mut seq, mut now) = (0u64, 0u64);
        let mut spare = None;
        for round in 0..20_000u64 {
            // Bursts of pushes (sometimes many at once) at or after the current time.
            let pushes = if round % 500 == 0 { 40 } else { rnd(4) };
            for _ in 0..pushes {
                let span = if rnd(3) == 0 { 1 } else { 50 };
                let at = now + rnd(span);
                let ev = Ev::Iface(rnd(8) as u32);
                // Now and then a number is set aside and used later, below pending ones, as
                // for a deferred wake-up put in the queue late.
                let e = match spare.take() {
                    Some(old) if rnd(4) == 0 => {
                        let e = Entry { at, seq: old, ev };
                        q.push_keyed(e);
                        e
                    }
                    held => {
                        spare = held;
                        if spare.is_none() && rnd(8) == 0 {
                            spare = Some(seq);
                            seq += 1;
                        }
                        let e = Entry { at, seq, ev };
                        seq += 1;
                        q.push(e);
                        e
                    }
                };
                heap.push(Reverse(e));
            }
            for _ in 0..rnd(4) {
                let a = q.pop().map(|e| (e.at, e.seq, e.ev));
                let b = heap.pop().map(|Reverse(e)| (e.at, e.seq, e.ev));
                assert_eq!(a, b);
                if let Some((at, _, _)) = a {
                    now = at;
                }
            }
        }
        while let Some(Reverse(e)) = heap.pop() {
            assert_eq!(q.pop().map(|e| (e.at, e.seq)), Some((e.at, e.seq)));
        }
        assert!(q.pop().is_none());
    }

    /// Runs every variant of `text` with and without the shortcuts (arrivals on sink links
    /// handled at departure, deferred port wake-ups) and checks that only the number of
    /// events differs.
    fn same_without_shortcuts(text: &str, duration_ns: u64) {
        let mut scenario = crate::load(text).expect("scenario loads");
        scenario.set_duration_ns(duration_ns);
        for v in &scenario.variants {
            let fast = Sim::new(&v.model, 7).run();
            let mut exact = Sim::new(&v.model, 7);
            for iface in &mut exact.ifaces {
                iface.sink = false;
            }
            let exact = exact.run();
            assert!(fast.events <= exact.events);
            assert_eq!(
                Outcome {
                    events: exact.events,
                    ..fast
                },
                exact
            );
        }
    }

    #[test]
    fn shortcuts_change_nothing_but_the_event_count() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sim");
        for name in [
            "e1-aquila-atm",
            "e1-aquila-ip",
            "ping-cell-loss",
            "policing-cdvt",
            "tcp-190ms",
        ] {
            let text = std::fs::read_to_string(format!("{dir}/{name}.toml")).expect("example");
            same_without_shortcuts(&text, 300_000_000);
        }
        // Three hosts into one switch port: it queues, so deferred wake-ups go in the queue
        // after all, and EPD (or a one-cell buffer) discards cells; cells from a1 and a3
        // arrive in lockstep with the port's slots, so the order of ties shows.
        let node =
            |name: &str, kind: &str| format!("[[node]]\nname = \"{name}\"\nkind = \"{kind}\"\n");
        let link = |from: &str, to: &str, extra: &str| {
            format!("[[link]]\nfrom = \"{from}\"\nto = \"{to}\"\nphy = \"OC-3c\"\n{extra}")
        };
        let flow = |name: &str, from: &str, rate: &str, size: &str| {
            format!(
                "[[flow]]\nname = \"{name}\"\nfrom = \"{from}\"\nto = \"b\"\n\
                 protocol = \"udp\"\nrate = \"{rate}\"\nsize = \"{size}\"\n"
            )
        };
        for port in ["buffer_cells = 300\nepd = 200\n", "buffer_cells = 1\n"] {
            let merge = [
                "[sim]\nduration = \"1s\"\n".to_string(),
                node("a1", "host"),
                node("a2", "host"),
                node("a3", "host"),
                node("s", "atm-switch"),
                node("b", "host"),
                link("a1", "s", ""),
                link("a2", "s", "delay = \"1300ns\"\n"),
                link("a3", "s", ""),
                link("s", "b", port),
                flow("big", "a1", "60M", "9180B"),
                flow("small", "a2", "30M", "1500B"),
                flow("tiny", "a3", "40M", "100B"),
            ]
            .concat();
            same_without_shortcuts(&merge, 200_000_000);
        }
        // An impaired IP link (its releases always take events) ahead of a sink ATM link.
        let impaired = [
            "[sim]\nduration = \"1s\"\n".to_string(),
            node("a1", "host"),
            node("r", "ip-router"),
            node("b", "host"),
            "[[link]]\nfrom = \"a1\"\nto = \"r\"\nrate = \"100M\"\ndelay = \"1ms\"\n\
             jitter = \"500us\"\nloss = \"2%\"\nduplicate = \"1%\"\n"
                .to_string(),
            link("r", "b", ""),
            flow("u", "a1", "20M", "1500B"),
        ]
        .concat();
        same_without_shortcuts(&impaired, 200_000_000);
    }
}
