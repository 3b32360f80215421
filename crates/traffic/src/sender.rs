//! The sender's core, sans-IO in the manner of quinn-proto: [`SenderCore::poll`] says what to
//! transmit now (a train of packets on one flow), when to wake, or that sending is over, and
//! the `handle_*` methods take what the driver learned (how much the socket took, what the
//! rate cap allowed, acknowledgements, unreachable ports, a stop). The real-time engine
//! drives it with the monotonic clock and sockets; a simulator drives it in virtual time.
//!
//! Driving one transmission:
//! 1. `poll(now)` returns `Transmit { flow }`; [`SenderCore::train`] lists its packets.
//! 2. Optionally ask the rate cap ([`SendCap::admit`]) and pass its answer to
//!    [`SenderCore::handle_budget`]: the train shrinks to what was admitted, or the flow
//!    waits for the cap.
//! 3. Send what is left of `train()` and report exactly one of [`SenderCore::handle_sent`]
//!    (all, some or none taken), [`SenderCore::handle_unreachable`] or
//!    [`SenderCore::handle_failure`].
//!
//! A driver may gather the trains of several flows due at once and send them in one call:
//! it reports each as taken when gathered, then gives back what the call refused with
//! [`SenderCore::handle_refused`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::contract::TokenBucket;
use crate::{Action, Pacer};

/// Shortest burst a capped sender may send at once: one GSO train of 64 KiB, with room.
const MIN_BURST_BYTES: u64 = 256 * 1024;
/// Otherwise the burst is this long at the capped rate.
const BURST_NS: u64 = 5_000_000;

/// A rate cap over everything a sender sends (an agent's `--max-rate`): one token bucket,
/// shared by every flow of a role, starting full.
#[derive(Debug, Clone, Copy)]
pub struct SendCap {
    bucket: TokenBucket,
}

impl SendCap {
    /// A cap of `rate_bps`, its bucket full at `now_ns`.
    pub fn new(rate_bps: u64, now_ns: u64) -> SendCap {
        let mut bucket = TokenBucket::new(rate_bps, Self::burst_bytes(rate_bps));
        bucket.take(now_ns, 0);
        SendCap { bucket }
    }

    /// The burst a cap of `rate_bps` allows: 5 ms of it, at least 256 KiB.
    pub fn burst_bytes(rate_bps: u64) -> u32 {
        let burst = (u128::from(rate_bps) / 8 * u128::from(BURST_NS) / 1_000_000_000)
            .max(u128::from(MIN_BURST_BYTES));
        u32::try_from(burst).unwrap_or(u32::MAX)
    }

    /// How many of the `count` packets sized by `size(k)` may leave at `now_ns` (their tokens
    /// are taken), or, when not even the first may, the time it can.
    pub fn admit(
        &mut self,
        now_ns: u64,
        count: usize,
        size: impl Fn(usize) -> u32,
    ) -> Result<usize, u64> {
        let bucket = &mut self.bucket;
        // A whole train that fits is taken at once; packet by packet only at the edge.
        let train: u64 = (0..count).map(|k| u64::from(size(k))).sum();
        if let Ok(train) = u32::try_from(train) {
            if bucket.conforms(now_ns, train) {
                bucket.take(now_ns, train);
                return Ok(count);
            }
        }
        let admitted = (0..count)
            .take_while(|&k| {
                let fits = bucket.conforms(now_ns, size(k));
                if fits {
                    bucket.take(now_ns, size(k));
                }
                fits
            })
            .count();
        match admitted {
            0 if count > 0 => Err(bucket.earliest(now_ns, size(0)).max(now_ns + 1)),
            n => Ok(n),
        }
    }
}

/// How a driver groups due packets into trains, and when it gives up on late ones (see
/// [`crate::PacerConfig`]): a real-time driver batches below its timing resolution; a
/// simulator needs no window and is never late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batching {
    pub train_window_ns: u64,
    /// Largest train: its packets are listed at once, and a max-rate flow always fills it.
    pub max_batch: u64,
    pub max_lateness_ns: u64,
}

/// How a sender treats its packets, whoever drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendPolicy {
    /// Bytes of a packet whose pacer names no size (the constant-rate schedule).
    pub size: u32,
    /// A traffic model's sizes are clamped into `min_size..=max_size` (what one packet of
    /// the transport can be).
    pub min_size: u32,
    pub max_size: u32,
    /// What the socket refuses is lost, so the schedule holds (a constant rate); otherwise
    /// it is sent later.
    pub drop_refused: bool,
    /// The flows send only while their receiver acknowledges (a reverse UDP sender): a flow
    /// never acknowledged, or not for this long, stops the sender.
    pub ack_timeout_ns: Option<u64>,
}

/// One packet of a train.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// The flow's sequence number: dense from 0 over the packets the socket took.
    pub seq: u64,
    pub size: u32,
    /// When its slot was due; `None` at max rate.
    pub due_ns: Option<u64>,
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Send [`SenderCore::train`] on flow `flow` now, then report how it went.
    Transmit { flow: usize },
    /// Nothing is due before `until_ns`.
    Wait { until_ns: u64 },
    /// Every flow is over, or the sender stopped ([`SenderCore::error`] says why, if it
    /// failed).
    Done,
}

/// A flow's pacer and where its sequence numbers stand.
#[derive(Debug)]
struct Flow {
    pacer: Pacer,
    next_seq: u64,
    /// When the flow's receiver last acknowledged.
    acked_ns: Option<u64>,
}

/// The train handed out by the last `poll`, until the driver reports on it.
#[derive(Debug)]
struct Pending {
    flow: usize,
    polled_ns: u64,
}

/// The sending decisions of one or more flows: a timer heap over their pacers, sequence
/// numbers, the rate cap's answers and the acknowledgement rules.
#[derive(Debug)]
pub struct SenderCore {
    policy: SendPolicy,
    flows: Vec<Flow>,
    due: BinaryHeap<Reverse<(u64, usize)>>,
    pending: Option<Pending>,
    train: Vec<Packet>,
    error: Option<String>,
    stopped: bool,
}

impl SenderCore {
    /// A core over `flows`: each flow's pacer and when it is first due (flows may start
    /// staggered).
    pub fn new(flows: Vec<(Pacer, u64)>, policy: SendPolicy) -> SenderCore {
        let due = flows
            .iter()
            .enumerate()
            .map(|(i, &(_, first_ns))| Reverse((first_ns, i)))
            .collect();
        SenderCore {
            policy,
            flows: flows
                .into_iter()
                .map(|(pacer, _)| Flow {
                    pacer,
                    next_seq: 0,
                    acked_ns: None,
                })
                .collect(),
            due,
            pending: None,
            train: Vec::new(),
            error: None,
            stopped: false,
        }
    }

    /// Decides the next step at `now_ns`. A train handed out and not yet reported on is
    /// handed out again.
    pub fn poll(&mut self, now_ns: u64) -> Poll {
        if let Some(p) = &self.pending {
            return Poll::Transmit { flow: p.flow };
        }
        loop {
            let Some(&Reverse((next, i))) = self.due.peek() else {
                return Poll::Done;
            };
            if self.stopped || self.error.is_some() {
                return Poll::Done;
            }
            if let Some(why) = self.ack_refusal(i, now_ns) {
                self.error = Some(why);
                return Poll::Done;
            }
            if next > now_ns {
                return Poll::Wait { until_ns: next };
            }
            self.due.pop();
            match self.flows[i].pacer.poll(now_ns) {
                Action::Done => {}
                Action::Wait { until_ns } => self.due.push(Reverse((until_ns, i))),
                Action::Send { first, count } => {
                    self.fill_train(i, first, count, now_ns);
                    return Poll::Transmit { flow: i };
                }
            }
        }
    }

    fn fill_train(&mut self, i: usize, first: u64, count: u64, now_ns: u64) {
        let policy = self.policy;
        let flow = &self.flows[i];
        self.train.clear();
        self.train.extend((0..count).map(|k| Packet {
            seq: flow.next_seq + k,
            size: flow.pacer.size(first + k).map_or(policy.size, |s| {
                s.clamp(policy.min_size, policy.max_size.max(policy.min_size))
            }),
            due_ns: flow.pacer.deadline(first + k),
        }));
        self.pending = Some(Pending {
            flow: i,
            polled_ns: now_ns,
        });
    }

    /// The packets of the train to send (empty when none is pending).
    pub fn train(&self) -> &[Packet] {
        match self.pending {
            Some(_) => &self.train,
            None => &[],
        }
    }

    /// The rate cap's answer for the pending train: `Ok(n)` sends its first `n` packets
    /// (the rest stay due), `Err(until_ns)` holds the flow until then.
    pub fn handle_budget(&mut self, admitted: Result<usize, u64>) {
        let Some(p) = &self.pending else {
            return;
        };
        match admitted {
            Ok(n) => self.train.truncate(n),
            Err(until_ns) => {
                self.due.push(Reverse((until_ns, p.flow)));
                self.pending = None;
            }
        }
    }

    /// The socket took the first `taken` packets of the train (all of it, part of it, or
    /// none: a full buffer). Returns how many of the rest are given up as lost: with
    /// `drop_refused` all of them, else none (they are sent later).
    pub fn handle_sent(&mut self, taken: usize) -> u64 {
        let Some(p) = self.pending.take() else {
            return 0;
        };
        let count = self.train.len();
        let taken = taken.min(count);
        let flow = &mut self.flows[p.flow];
        flow.next_seq += taken as u64;
        let (advance, lost) = match self.policy.drop_refused {
            true => (count, count - taken),
            false => (taken, 0),
        };
        flow.pacer.advance(advance as u64);
        self.due.push(Reverse((p.polled_ns, p.flow)));
        lost as u64
    }

    /// A driver that sends several flows' trains in one call reports each train as taken
    /// ([`SenderCore::handle_sent`]) as it gathers them; when the call then refuses the last
    /// `refused` of them on `flow` (a suffix of what it gathered of the flow), their sequence
    /// numbers go back to the flow, so the numbers stay dense over packets sent. Returns how
    /// many are lost: with `drop_refused` all of them. Without it the pacer has already moved
    /// past them, so a driver batches across flows only under `drop_refused`.
    pub fn handle_refused(&mut self, flow: usize, refused: usize) -> u64 {
        let Some(f) = self.flows.get_mut(flow) else {
            return 0;
        };
        let refused = (refused as u64).min(f.next_seq);
        f.next_seq -= refused;
        refused
    }

    /// The peer's port is unreachable (an ICMP error for an earlier packet): the train is
    /// lost. A sender that needs acknowledgements stops; any other goes on.
    pub fn handle_unreachable(&mut self) {
        let Some(p) = self.pending.take() else {
            return;
        };
        if self.policy.ack_timeout_ns.is_some() {
            self.error = Some(format!(
                "flow {}: the client's port is unreachable (ICMP): stopped sending",
                p.flow
            ));
            return;
        }
        self.flows[p.flow].pacer.advance(self.train.len() as u64);
        self.due.push(Reverse((p.polled_ns, p.flow)));
    }

    /// Sending failed for good: the sender stops with `reason`.
    pub fn handle_failure(&mut self, reason: String) {
        self.pending = None;
        self.error.get_or_insert(reason);
    }

    /// Flow `flow`'s receiver acknowledged at `now_ns`.
    pub fn handle_ack(&mut self, flow: usize, now_ns: u64) {
        if let Some(f) = self.flows.get_mut(flow) {
            f.acked_ns = Some(now_ns);
        }
    }

    /// The test is over (a stop from the control plane): nothing more is sent.
    pub fn handle_stop(&mut self) {
        self.pending = None;
        self.stopped = true;
    }

    /// Why flow `i` may not send at `now_ns`, if it needs acknowledgements and lacks them.
    fn ack_refusal(&self, i: usize, now_ns: u64) -> Option<String> {
        let timeout = self.policy.ack_timeout_ns?;
        match self.flows[i].acked_ns {
            None => Some(format!(
                "flow {i}: the client's data port never acknowledged: nothing sent to it"
            )),
            Some(t) if now_ns.saturating_sub(t) > timeout => Some(format!(
                "flow {i}: the client stopped acknowledging for {:.1} s: stopped sending",
                timeout as f64 / 1e9
            )),
            Some(_) => None,
        }
    }

    /// Why the sender stopped early, if it did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// Each flow's pacer (missed slots, contracts), in flow order.
    pub fn pacers(&self) -> impl Iterator<Item = &Pacer> {
        self.flows.iter().map(|f| &f.pacer)
    }
}

#[cfg(test)]
mod tests;
