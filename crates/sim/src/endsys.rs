//! The end-system model: what hosts and routers add to a packet's time besides links and
//! queues. A host's CPU spends `send_cost` on every packet it sends and `receive_cost` on
//! every packet it receives, one packet at a time (so it also bounds the host's packet rate);
//! its ATM adapter segments cells no faster than `sar_rate`; a router forwards a packet
//! `processing` after its last bit (or cell) arrived, pipelined. `cost_jitter` adds a uniform
//! draw of 0..jitter to each of the node's per-packet times. Each delay keeps packet order.
//! `send_byte_cost` and `receive_byte_cost` add a cost per byte of the packet; a host's CPU
//! reports its busy time over the run (`HostReport`). A flow may end in a receive socket
//! buffer (`SocketBuffer`) drained by its application at `read_rate`.
//! Defaults are 0 / the line rate: nothing added, as before the model existed.

use std::collections::VecDeque;

use flowlab_spanned::{FileError, Reader};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::scenario::NodeKind;

/// A node table's end-system keys.
pub(crate) const ENDSYS_KEYS: &[&str] = &[
    "send_cost",
    "receive_cost",
    "send_byte_cost",
    "receive_byte_cost",
    "sar_rate",
    "processing",
    "cost_jitter",
];
/// Spreads the run's seed over the nodes' jitter draws.
const JITTER_SEED_MIX: u64 = 0xd1b5_4a32_d192_ed03;

/// One node's end-system parameters (all zero or `None`: nothing modelled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct EndSystem {
    pub send_cost_ns: u64,
    pub receive_cost_ns: u64,
    /// CPU time per byte of each packet sent or received, on top of the packet's cost.
    pub send_byte_cost_ns: u64,
    pub receive_byte_cost_ns: u64,
    /// A host's ATM adapter segmentation rate (cell bits per second), below the line's.
    pub sar_rate_bps: Option<u64>,
    pub processing_ns: u64,
    pub cost_jitter_ns: u64,
}

/// Reads a node's end-system keys; a key that does not apply to its kind is an error.
pub(crate) fn read_endsys(n: &Reader, kind: NodeKind) -> Result<EndSystem, FileError> {
    let only_for = |key: &str, want: NodeKind, what: &str| -> Result<(), FileError> {
        match n.get(key) {
            Some(item) if kind != want => {
                Err(n.error(item, key, format!("applies to {what} only")))
            }
            _ => Ok(()),
        }
    };
    let host_keys = [
        "send_cost",
        "receive_cost",
        "send_byte_cost",
        "receive_byte_cost",
        "sar_rate",
    ];
    for key in host_keys {
        only_for(key, NodeKind::Host, "hosts")?;
    }
    only_for("processing", NodeKind::IpRouter, "ip-routers")?;
    let costs = [
        "send_cost",
        "receive_cost",
        "send_byte_cost",
        "receive_byte_cost",
        "processing",
    ];
    if let Some(item) = n.get("cost_jitter") {
        if !costs.iter().any(|k| n.get(k).is_some()) {
            let why =
                "needs send_cost, receive_cost (per packet or per byte) or processing to spread";
            return Err(n.error(item, "cost_jitter", why));
        }
    }
    let sar_rate_bps = n.bit_rate("sar_rate", "'max' is the default (the line's rate)")?;
    Ok(EndSystem {
        send_cost_ns: n.duration_ns("send_cost")?.unwrap_or(0),
        receive_cost_ns: n.duration_ns("receive_cost")?.unwrap_or(0),
        send_byte_cost_ns: n.duration_ns("send_byte_cost")?.unwrap_or(0),
        receive_byte_cost_ns: n.duration_ns("receive_byte_cost")?.unwrap_or(0),
        sar_rate_bps,
        processing_ns: n.duration_ns("processing")?.unwrap_or(0),
        cost_jitter_ns: n.duration_ns("cost_jitter")?.unwrap_or(0),
    })
}

/// What a held packet does when its time comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Handed to the interface of hop `hop` (a host's first, a router's next).
    Forward { hop: u32 },
    /// Waits in the flow's socket buffer for its application to read it.
    Read,
    /// Delivered to the receiving application.
    Deliver,
}

/// A packet held by a [`Stage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub stream: u32,
    pub frame: u32,
    pub next: Next,
}

/// What a stage spends on one packet: a fixed part, a part per byte (in picoseconds, so a
/// reading rate converts without losing precision), and a uniform jitter of 0..`jitter_ns`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    pub packet_ns: u64,
    pub byte_ps: u64,
    pub jitter_ns: u64,
}

impl Cost {
    /// A host CPU's cost: per packet and per byte, in nanoseconds.
    fn cpu(packet_ns: u64, byte_ns: u64, jitter_ns: u64) -> Cost {
        Cost {
            packet_ns,
            byte_ps: byte_ns.saturating_mul(1_000),
            jitter_ns,
        }
    }

    /// An application reading `rate_bps` bits of each datagram per second.
    pub(crate) fn reading(rate_bps: u64) -> Cost {
        Cost {
            byte_ps: (8_000_000_000_000 / rate_bps.max(1)).max(1),
            ..Cost::default()
        }
    }

    fn is_zero(&self) -> bool {
        self.packet_ns == 0 && self.byte_ps == 0
    }

    fn of(&self, bytes: u32) -> u64 {
        let per_byte = u128::from(self.byte_ps) * u128::from(bytes) / 1_000;
        self.packet_ns
            .saturating_add(u64::try_from(per_byte).unwrap_or(u64::MAX))
    }
}

/// One place a packet spends time: a host CPU (packets one at a time, each for its cost) or a
/// router's forwarding path (each packet delayed, several at once). Packets leave in the order
/// they came. A serial stage counts the time it is busy up to `busy_limit_ns` (the run's
/// duration), for the host's CPU figure.
#[derive(Debug)]
pub(crate) struct Stage {
    cost: Cost,
    serial: bool,
    /// When the CPU is next free (serial), or the last packet's release (pipelined).
    free_ns: u64,
    held: VecDeque<(u64, Held)>,
    rng: ChaCha8Rng,
    busy_limit_ns: u64,
    busy_ns: u64,
}

impl Stage {
    pub(crate) fn new(cost: Cost, serial: bool, seed: u64) -> Stage {
        Stage {
            cost,
            serial,
            free_ns: 0,
            held: VecDeque::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            busy_limit_ns: u64::MAX,
            busy_ns: 0,
        }
    }

    /// When a packet of `bytes` arriving at `now_ns` leaves.
    fn release_ns(&mut self, now_ns: u64, bytes: u32) -> u64 {
        let jitter = match self.cost.jitter_ns {
            0 => 0,
            j => self.rng.next_u64() % (j + 1),
        };
        let cost = self.cost.of(bytes).saturating_add(jitter);
        let t = if self.serial {
            let start = now_ns.max(self.free_ns);
            let end = start.saturating_add(cost);
            let limit = self.busy_limit_ns;
            self.busy_ns += end.min(limit) - start.min(limit);
            end
        } else {
            now_ns.saturating_add(cost).max(self.free_ns)
        };
        self.free_ns = t;
        t
    }

    /// Holds `h`, a packet of `bytes`, from `now_ns`; returns its release time.
    pub(crate) fn hold(&mut self, now_ns: u64, h: Held, bytes: u32) -> u64 {
        let t = self.release_ns(now_ns, bytes);
        self.held.push_back((t, h));
        t
    }

    /// The next packet released by `now_ns`.
    pub(crate) fn release(&mut self, now_ns: u64) -> Option<Held> {
        match self.held.front() {
            Some(&(t, h)) if t <= now_ns => {
                self.held.pop_front();
                Some(h)
            }
            _ => None,
        }
    }

    /// Time spent on packets before the run's end (serial stages).
    pub(crate) fn busy_ns(&self) -> u64 {
        self.busy_ns
    }
}

/// Which stage, if any, each node's sends and forwards, each interface's receptions and
/// each flow's application reads pass.
#[derive(Debug, Default)]
pub(crate) struct Stages {
    pub stages: Vec<Stage>,
    send: Vec<Option<u32>>,
    forward: Vec<Option<u32>>,
    receive: Vec<Option<u32>>,
    read: Vec<Option<u32>>,
}

impl Stages {
    /// The stages of `nodes`; `iface_to[i]` is the node interface `i` leads to (a host's
    /// receive CPU is per interface, since a host with two links has two adapters);
    /// `readers[f]`, flow `f`'s application reading its socket, if it reads at a rate. CPUs
    /// count their busy time up to `run_ns`.
    pub(crate) fn new(
        nodes: &[EndSystem],
        iface_to: &[usize],
        readers: &[Option<Cost>],
        seed: u64,
        run_ns: u64,
    ) -> Stages {
        let mut s = Stages::default();
        let mut salt = 0u64;
        // Jitter spreads the node's own costs; a node without costs has none to spread.
        let mut add = |cost: Cost, serial: bool| {
            salt += 1;
            (!cost.is_zero()).then(|| {
                let seed = seed ^ salt.wrapping_mul(JITTER_SEED_MIX);
                let mut stage = Stage::new(cost, serial, seed);
                stage.busy_limit_ns = run_ns;
                s.stages.push(stage);
                (s.stages.len() - 1) as u32
            })
        };
        let send: Vec<_> = nodes
            .iter()
            .map(|e| {
                let cost = Cost::cpu(e.send_cost_ns, e.send_byte_cost_ns, e.cost_jitter_ns);
                add(cost, true)
            })
            .collect();
        let forward: Vec<_> = nodes
            .iter()
            .map(|e| add(Cost::cpu(e.processing_ns, 0, e.cost_jitter_ns), false))
            .collect();
        let receive: Vec<_> = iface_to
            .iter()
            .map(|&n| {
                let e = nodes.get(n).copied().unwrap_or_default();
                let cost = Cost::cpu(e.receive_cost_ns, e.receive_byte_cost_ns, e.cost_jitter_ns);
                add(cost, true)
            })
            .collect();
        let read: Vec<_> = readers
            .iter()
            .map(|r| r.and_then(|cost| add(cost, true)))
            .collect();
        s.send = send;
        s.forward = forward;
        s.receive = receive;
        s.read = read;
        s
    }

    fn index(list: &[Option<u32>], i: usize) -> Option<usize> {
        list.get(i).copied().flatten().map(|k| k as usize)
    }

    /// The stage a packet sent by `node` passes first.
    pub(crate) fn send(&self, node: usize) -> Option<usize> {
        Stages::index(&self.send, node)
    }

    /// The stage a packet forwarded by `node` passes.
    pub(crate) fn forward(&self, node: usize) -> Option<usize> {
        Stages::index(&self.forward, node)
    }

    /// The stage a packet delivered through interface `iface` passes.
    pub(crate) fn receive(&self, iface: usize) -> Option<usize> {
        Stages::index(&self.receive, iface)
    }

    /// The stage in which flow `flow`'s application reads a datagram from its socket.
    pub(crate) fn read(&self, flow: usize) -> Option<usize> {
        Stages::index(&self.read, flow)
    }

    /// Host `node`'s CPU time sending, and receiving through the interfaces of `iface_to`
    /// that lead to it, before the run's end.
    pub(crate) fn cpu_busy_ns(&self, node: usize, iface_to: &[usize]) -> (u64, u64) {
        let busy = |k: Option<usize>| k.map_or(0, |k| self.stages[k].busy_ns());
        let receive = (0..iface_to.len())
            .filter(|&i| iface_to[i] == node)
            .map(|i| busy(self.receive(i)))
            .sum();
        (busy(self.send(node)), receive)
    }
}

/// A flow's receive socket buffer: `size` bytes, each datagram charged its bytes (as
/// Winsock's SO_RCVBUF counts data; Linux charges truesize, the buffer the kernel allocated,
/// which the scenario can stand for with a smaller size) from its arrival at the host until
/// its application has read it. A datagram that does not fit is dropped and counted, as a
/// real receiver's kernel counts a receive-buffer overflow. The fill is sampled every
/// `sample_ns` (the fill at the end of each period), for plotting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SocketBuffer {
    size: u64,
    fill: u64,
    peak: u64,
    overflows: u64,
    /// Datagrams admitted so far, and how many were before the first overflow (when).
    admitted: u64,
    first_overflow: Option<(u64, u64)>,
    sample_ns: u64,
    /// The fill at the end of each whole sample period so far.
    samples: Vec<u64>,
}

/// A flow's receiving socket (`recv_buffer`, `read_rate`, `read_rate_from` on the flow): its
/// buffer's size, and how fast its application reads (`None`: as soon as the host's CPU
/// hands a datagram over), from `read_rate_from_ns` after the run's start (before it, at
/// once: an application that falls behind only after a while).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SocketSpec {
    pub buffer_bytes: u64,
    pub read_rate_bps: Option<u64>,
    pub read_rate_from_ns: u64,
}

/// How often a socket buffer's fill is sampled for its report.
pub(crate) const FILL_SAMPLE_NS: u64 = 100_000_000;

/// What a flow's socket buffer did over a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SocketBufferReport {
    pub size_bytes: u64,
    pub peak_bytes: u64,
    /// Datagrams dropped because the buffer was full (receive-buffer overflow).
    pub overflows: u64,
    /// When the first datagram was dropped, and how many had been admitted before it.
    pub first_overflow_ns: Option<u64>,
    pub admitted_before_overflow: Option<u64>,
    pub sample_ns: u64,
    /// The fill (bytes) at the end of each period of `sample_ns` from the run's start.
    pub fill_bytes: Vec<u64>,
}

impl SocketBuffer {
    pub(crate) fn new(size: u64, sample_ns: u64) -> SocketBuffer {
        SocketBuffer {
            size,
            fill: 0,
            peak: 0,
            overflows: 0,
            admitted: 0,
            first_overflow: None,
            sample_ns: sample_ns.max(1),
            samples: Vec::new(),
        }
    }

    /// Records the fill of the periods that ended by `now_ns`.
    fn catch_up(&mut self, now_ns: u64) {
        let ended = now_ns / self.sample_ns;
        while (self.samples.len() as u64) < ended {
            self.samples.push(self.fill);
        }
    }

    /// A datagram of `bytes` arrives at `now_ns`: true if it fits (and is now held).
    pub(crate) fn admit(&mut self, now_ns: u64, bytes: u64) -> bool {
        self.catch_up(now_ns);
        if self.fill + bytes > self.size {
            self.overflows += 1;
            self.first_overflow.get_or_insert((now_ns, self.admitted));
            return false;
        }
        self.admitted += 1;
        self.fill += bytes;
        self.peak = self.peak.max(self.fill);
        true
    }

    /// The application read a datagram of `bytes` at `now_ns`.
    pub(crate) fn read(&mut self, now_ns: u64, bytes: u64) {
        self.catch_up(now_ns);
        self.fill = self.fill.saturating_sub(bytes);
    }

    pub(crate) fn report(&self, end_ns: u64) -> SocketBufferReport {
        let mut b = self.clone();
        b.catch_up(end_ns);
        SocketBufferReport {
            size_bytes: b.size,
            peak_bytes: b.peak,
            overflows: b.overflows,
            first_overflow_ns: b.first_overflow.map(|f| f.0),
            admitted_before_overflow: b.first_overflow.map(|f| f.1),
            sample_ns: b.sample_ns,
            fill_bytes: b.samples,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(frame: u32) -> Held {
        Held {
            stream: 0,
            frame,
            next: Next::Deliver,
        }
    }

    #[test]
    fn a_cpu_serves_one_packet_at_a_time() {
        let mut cpu = Stage::new(Cost::cpu(100, 0, 0), true, 1);
        assert_eq!(cpu.hold(0, held(0), 1), 100);
        assert_eq!(cpu.hold(10, held(1), 1), 200, "waits for the first");
        assert_eq!(cpu.hold(500, held(2), 1), 600, "idle CPU starts at once");
        assert_eq!(cpu.release(99), None);
        assert_eq!(cpu.release(200).map(|h| h.frame), Some(0));
        assert_eq!(cpu.release(200).map(|h| h.frame), Some(1));
        assert_eq!(cpu.release(200), None);
    }

    #[test]
    fn a_router_delays_packets_in_parallel() {
        let mut r = Stage::new(Cost::cpu(100, 0, 0), false, 1);
        assert_eq!(r.hold(0, held(0), 1), 100);
        assert_eq!(r.hold(10, held(1), 1), 110, "not queued behind the first");
    }

    #[test]
    fn jitter_stays_in_range_and_keeps_order() {
        let mut r = Stage::new(Cost::cpu(1_000, 0, 500), false, 7);
        let mut last = 0;
        let mut spread = (u64::MAX, 0);
        for k in 0..1_000u64 {
            let now = k * 2_000;
            let t = r.hold(now, held(k as u32), 100);
            assert!(t >= last, "order kept");
            let d = t - now;
            assert!((1_000..=1_500).contains(&d), "delay {d}");
            spread = (spread.0.min(d), spread.1.max(d));
            last = t;
        }
        assert!(
            spread.1 - spread.0 > 400,
            "draws cover the range: {spread:?}"
        );
    }

    #[test]
    fn only_nodes_with_costs_get_stages() {
        let host = EndSystem {
            send_cost_ns: 5,
            receive_cost_ns: 7,
            ..EndSystem::default()
        };
        let router = EndSystem {
            processing_ns: 9,
            ..EndSystem::default()
        };
        let readers = [None, Some(Cost::reading(1_000_000))];
        let nodes = [host, router, EndSystem::default()];
        let s = Stages::new(&nodes, &[1, 0, 2], &readers, 1, u64::MAX);
        assert_eq!(s.stages.len(), 4);
        assert!(s.read(1).is_some() && s.read(0).is_none());
        assert!(s.send(0).is_some() && s.send(1).is_none());
        assert!(s.forward(1).is_some() && s.forward(0).is_none());
        assert!(s.receive(1).is_some(), "interface 1 leads to the host");
        assert!(s.receive(0).is_none() && s.receive(2).is_none());
    }

    #[test]
    fn a_cpu_pays_per_packet_and_per_byte() {
        let mut cpu = Stage::new(Cost::cpu(1_000, 20, 0), true, 1);
        assert_eq!(cpu.hold(0, held(0), 8_000), 161_000, "1 µs + 8000 × 20 ns");
        // An application reading 1 Mb/s takes 8 µs a byte: 8 ms for 1000 bytes.
        let mut reader = Stage::new(Cost::reading(1_000_000), true, 1);
        assert_eq!(reader.hold(0, held(0), 1_000), 8_000_000);
        assert_eq!(reader.hold(0, held(1), 500), 12_000_000, "after the first");
    }

    #[test]
    fn cpu_busy_is_the_sum_of_costs_within_the_run() {
        let host = EndSystem {
            send_cost_ns: 100,
            send_byte_cost_ns: 1,
            receive_cost_ns: 50,
            ..EndSystem::default()
        };
        // Host 0 sends; interfaces 0 and 2 lead to it, interface 1 elsewhere.
        let mut s = Stages::new(&[host, host], &[0, 1, 0], &[], 1, 1_000);
        let send = s.send(0).unwrap();
        for k in 0..3u32 {
            s.stages[send].hold(u64::from(k) * 400, held(k), 100);
        }
        let (r0, r2) = (s.receive(0).unwrap(), s.receive(2).unwrap());
        s.stages[r0].hold(0, held(0), 9);
        s.stages[r2].hold(0, held(0), 9);
        let elsewhere = s.receive(1).unwrap();
        s.stages[elsewhere].hold(0, held(0), 9);
        // Sends of 200 ns at 0, 400 and 800 (the last cut at the run's end of 1000 ns):
        // 200 + 200 + 200; two receives of 50 ns reach host 0, one goes elsewhere.
        assert_eq!(s.cpu_busy_ns(0, &[0, 1, 0]), (600, 100));
        s.stages[send].hold(900, held(3), 100);
        assert_eq!(
            s.cpu_busy_ns(0, &[0, 1, 0]).0,
            600,
            "busy after the end is not counted"
        );
    }

    #[test]
    fn a_socket_buffer_overflows_when_arrivals_exceed_reads_by_its_size() {
        let mut b = SocketBuffer::new(3_000, 1_000);
        // 1000-byte datagrams every 100 ns, one read every 200 ns: the fill grows by 1000
        // bytes every 200 ns, and the first that finds 3000 bytes held is refused.
        let mut admitted = 0;
        for k in 0..8u64 {
            let now = k * 100;
            if k > 0 && k % 2 == 0 {
                b.read(now, 1_000);
            }
            if b.admit(now, 1_000) {
                admitted += 1;
            } else {
                assert_eq!(
                    k, 5,
                    "arrivals 6 (0..=5) less reads 2 exceed 3000 bytes at k = 5"
                );
                break;
            }
        }
        assert_eq!(admitted, 5);
        let r = b.report(2_500);
        assert_eq!((r.peak_bytes, r.overflows), (3_000, 1));
        assert_eq!(
            (r.first_overflow_ns, r.admitted_before_overflow),
            (Some(500), Some(5))
        );
        assert_eq!(
            r.fill_bytes,
            vec![3_000, 3_000],
            "two whole periods of 1000 ns"
        );
        assert!(b.admit(600, 0), "an empty datagram always fits");
    }
}
