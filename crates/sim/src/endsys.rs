//! The end-system model: what hosts and routers add to a packet's time besides links and
//! queues. A host's CPU spends `send_cost` on every packet it sends and `receive_cost` on
//! every packet it receives, one packet at a time (so it also bounds the host's packet rate);
//! its ATM adapter segments cells no faster than `sar_rate`; a router forwards a packet
//! `processing` after its last bit (or cell) arrived, pipelined. `cost_jitter` adds a uniform
//! draw of 0..jitter to each of the node's per-packet times. Each delay keeps packet order.
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
    for key in ["send_cost", "receive_cost", "sar_rate"] {
        only_for(key, NodeKind::Host, "hosts")?;
    }
    only_for("processing", NodeKind::IpRouter, "ip-routers")?;
    let costs = ["send_cost", "receive_cost", "processing"];
    if let Some(item) = n.get("cost_jitter") {
        if !costs.iter().any(|k| n.get(k).is_some()) {
            let why = "needs send_cost, receive_cost or processing to spread";
            return Err(n.error(item, "cost_jitter", why));
        }
    }
    let sar_rate_bps = n.bit_rate("sar_rate", "'max' is the default (the line's rate)")?;
    Ok(EndSystem {
        send_cost_ns: n.duration_ns("send_cost")?.unwrap_or(0),
        receive_cost_ns: n.duration_ns("receive_cost")?.unwrap_or(0),
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

/// One place a packet spends time: a host CPU (packets one at a time, each for its cost) or a
/// router's forwarding path (each packet delayed, several at once). Packets leave in the order
/// they came.
#[derive(Debug)]
pub(crate) struct Stage {
    cost_ns: u64,
    jitter_ns: u64,
    serial: bool,
    /// When the CPU is next free (serial), or the last packet's release (pipelined).
    free_ns: u64,
    held: VecDeque<(u64, Held)>,
    rng: ChaCha8Rng,
}

impl Stage {
    pub(crate) fn new(cost_ns: u64, jitter_ns: u64, serial: bool, seed: u64) -> Stage {
        Stage {
            cost_ns,
            jitter_ns,
            serial,
            free_ns: 0,
            held: VecDeque::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// When a packet arriving at `now_ns` leaves.
    fn release_ns(&mut self, now_ns: u64) -> u64 {
        let jitter = match self.jitter_ns {
            0 => 0,
            j => self.rng.next_u64() % (j + 1),
        };
        let cost = self.cost_ns.saturating_add(jitter);
        let t = if self.serial {
            now_ns.max(self.free_ns).saturating_add(cost)
        } else {
            now_ns.saturating_add(cost).max(self.free_ns)
        };
        self.free_ns = t;
        t
    }

    /// Holds `h` from `now_ns`; returns its release time.
    pub(crate) fn hold(&mut self, now_ns: u64, h: Held) -> u64 {
        let t = self.release_ns(now_ns);
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
}

/// Which stage, if any, each node's sends and forwards and each interface's receptions pass.
#[derive(Debug, Default)]
pub(crate) struct Stages {
    pub stages: Vec<Stage>,
    send: Vec<Option<u32>>,
    forward: Vec<Option<u32>>,
    receive: Vec<Option<u32>>,
}

impl Stages {
    /// The stages of `nodes`; `iface_to[i]` is the node interface `i` leads to (a host's
    /// receive CPU is per interface, since a host with two links has two adapters).
    pub(crate) fn new(nodes: &[EndSystem], iface_to: &[usize], seed: u64) -> Stages {
        let mut s = Stages::default();
        let mut salt = 0u64;
        // Jitter spreads the node's own costs; a node without costs has none to spread.
        let mut add = |cost: u64, e: &EndSystem, serial: bool| {
            salt += 1;
            (cost > 0).then(|| {
                let seed = seed ^ salt.wrapping_mul(JITTER_SEED_MIX);
                s.stages
                    .push(Stage::new(cost, e.cost_jitter_ns, serial, seed));
                (s.stages.len() - 1) as u32
            })
        };
        let send: Vec<_> = nodes.iter().map(|e| add(e.send_cost_ns, e, true)).collect();
        let forward: Vec<_> = nodes
            .iter()
            .map(|e| add(e.processing_ns, e, false))
            .collect();
        let receive: Vec<_> = iface_to
            .iter()
            .map(|&n| {
                let e = nodes.get(n).copied().unwrap_or_default();
                add(e.receive_cost_ns, &e, true)
            })
            .collect();
        s.send = send;
        s.forward = forward;
        s.receive = receive;
        s
    }

    /// The stage a packet sent by `node` passes first.
    pub(crate) fn send(&self, node: usize) -> Option<usize> {
        self.send.get(node).copied().flatten().map(|k| k as usize)
    }

    /// The stage a packet forwarded by `node` passes.
    pub(crate) fn forward(&self, node: usize) -> Option<usize> {
        self.forward
            .get(node)
            .copied()
            .flatten()
            .map(|k| k as usize)
    }

    /// The stage a packet delivered through interface `iface` passes.
    pub(crate) fn receive(&self, iface: usize) -> Option<usize> {
        self.receive
            .get(iface)
            .copied()
            .flatten()
            .map(|k| k as usize)
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
        let mut cpu = Stage::new(100, 0, true, 1);
        assert_eq!(cpu.hold(0, held(0)), 100);
        assert_eq!(cpu.hold(10, held(1)), 200, "waits for the first");
        assert_eq!(cpu.hold(500, held(2)), 600, "idle CPU starts at once");
        assert_eq!(cpu.release(99), None);
        assert_eq!(cpu.release(200).map(|h| h.frame), Some(0));
        assert_eq!(cpu.release(200).map(|h| h.frame), Some(1));
        assert_eq!(cpu.release(200), None);
    }

    #[test]
    fn a_router_delays_packets_in_parallel() {
        let mut r = Stage::new(100, 0, false, 1);
        assert_eq!(r.hold(0, held(0)), 100);
        assert_eq!(r.hold(10, held(1)), 110, "not queued behind the first");
    }

    #[test]
    fn jitter_stays_in_range_and_keeps_order() {
        let mut r = Stage::new(1_000, 500, false, 7);
        let mut last = 0;
        let mut spread = (u64::MAX, 0);
        for k in 0..1_000u64 {
            let now = k * 2_000;
            let t = r.hold(now, held(k as u32));
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
        let s = Stages::new(&[host, router, EndSystem::default()], &[1, 0, 2], 1);
        assert_eq!(s.stages.len(), 3);
        assert!(s.send(0).is_some() && s.send(1).is_none());
        assert!(s.forward(1).is_some() && s.forward(0).is_none());
        assert!(s.receive(1).is_some(), "interface 1 leads to the host");
        assert!(s.receive(0).is_none() && s.receive(2).is_none());
    }
}
