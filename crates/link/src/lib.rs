//! flowlab's link models as one sans-IO chain, driven in virtual time by the simulator and in
//! real time by the emulator.
//!
//! A link direction is a [`LinkModel`]: frames go in with [`LinkModel::enqueue`] at the time
//! they reach the link, and come out of [`LinkModel::dequeue`] as [`Event`]s: a departure at
//! the far end (at its modelled time), a loss inside the link, or an extra copy. The models
//! are the ones the simulator runs, wrapped for one point-to-point link:
//!
//! - [`atm::AtmLink`]: frames segmented into AAL5 cells with the link's encapsulation, GCRA
//!   policing per VC, the `flowlab-atm` output port (per-category queues, EPD/PPD, the PHY's
//!   cell slots), random or bursty cell loss on the line, and reassembly: a frame that lost
//!   a cell is lost whole.
//! - [`diffserv::DiffServEdge`]: the DSCP classifier, token-bucket meters and a scheduler
//!   (FIFO, PQ, WFQ, DRR, PQ-WFQ) serialising onto a line of `flowlab-qos`.
//! - [`impair::Impairments`]: what people ask netem for: delay with jitter and a
//!   distribution, random and Gilbert-Elliott loss, duplication, reordering, a rate and a
//!   queue limit.
//! - [`chain::Chain`]: stages in sequence, each frame passing from one to the next at its
//!   departure time.
//!
//! Nothing here reads a clock, sleeps or does I/O; randomness comes from a seeded RNG per
//! stage, so a run is a function of its inputs and seed. [`config`] reads the `emulate` keys
//! of a lab link (the same keys a simulated link has).

#![forbid(unsafe_code)]

pub mod atm;
pub mod chain;
pub mod config;
pub mod diffserv;
pub mod impair;
pub mod loss;
pub mod marker;
mod report;

pub use report::{CellReport, ClassReport, StageReport, VcReport};

/// What a model knows of a frame: an identity chosen by the driver, its length and its
/// DiffServ code point. `len` is the network-layer length (the IP packet, without the
/// 14-byte Ethernet header), what the simulator's links charge too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Frame {
    pub id: u64,
    pub len: u32,
    pub dscp: u8,
}

/// Why a frame was lost inside a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// Random or Gilbert-Elliott frame loss (impairments).
    Loss,
    /// A queue or the link's frame limit was full.
    QueueFull,
    /// A DiffServ meter found the frame out of profile.
    Meter,
    /// ATM: some of the frame's cells were lost (policed, discarded by the port or lost on
    /// the line), so reassembly failed; the cell counters say why.
    Cells,
}

impl Cause {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Cause::Loss => "loss",
            Cause::QueueFull => "queue_full",
            Cause::Meter => "meter",
            Cause::Cells => "cells_lost",
        }
    }
}

/// The outcome of offering a frame to a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The link holds the frame: one [`Event`] about it will follow.
    Queued,
    /// The link holds the frame and a copy of it: two events will follow.
    Duplicated,
    /// The link lost the frame at once.
    Dropped(Cause),
}

/// What comes out of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// The frame leaves the far end of the link at `at_ns`.
    Depart { frame: Frame, at_ns: u64 },
    /// The frame was lost inside the link at `at_ns`.
    Drop {
        frame: Frame,
        at_ns: u64,
        cause: Cause,
    },
    /// A later stage copied the frame: one more event about it will follow.
    Copy { frame: Frame },
}

/// One direction of a link, sans-IO.
///
/// Time never goes back: each call's `now_ns` is at least the previous one's. Everything the
/// model had due at or before `now_ns` happens before a frame enqueued at `now_ns` arrives.
pub trait LinkModel: Send {
    /// A frame reaches the link at `now_ns`.
    fn enqueue(&mut self, now_ns: u64, frame: Frame) -> Verdict;

    /// When [`LinkModel::dequeue`] next has work: the next event, or an internal step the
    /// model must take then. `None` while the link is empty. It may move earlier after an
    /// enqueue, never later without one.
    fn next_event_ns(&self) -> Option<u64>;

    /// The next event due at or before `now_ns`, in time order.
    fn dequeue(&mut self, now_ns: u64) -> Option<Event>;

    /// The model's counters, one report per stage.
    fn report(&self, out: &mut Vec<StageReport>);

    /// Frames (or, for ATM, cells) held now, per stage, in report order.
    fn depth(&self, out: &mut Vec<u64>);
}

/// A uniform draw in [0, 1) from a seeded generator.
pub(crate) fn unit_f64(rng: &mut rand_chacha::ChaCha8Rng) -> f64 {
    use rand_chacha::rand_core::RngCore;
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// A generator for a stage, from the link's seed and the stage's place in the chain.
pub(crate) fn stage_rng(seed: u64, stage: u64) -> rand_chacha::ChaCha8Rng {
    use rand_chacha::rand_core::SeedableRng;
    rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ stage.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Drives `model` in virtual time, as the simulator does: each arrival `(time, frame)` (in
/// time order) after every event due by then; then everything left. Returns the events and
/// the enqueue verdicts.
pub fn run_virtual(
    model: &mut dyn LinkModel,
    arrivals: impl IntoIterator<Item = (u64, Frame)>,
) -> (Vec<Event>, Vec<Verdict>) {
    let mut events = Vec::new();
    let mut verdicts = Vec::new();
    let drain_until = |model: &mut dyn LinkModel, until: u64, events: &mut Vec<Event>| {
        while let Some(t) = model.next_event_ns().filter(|&t| t <= until) {
            if let Some(e) = model.dequeue(t) {
                events.push(e);
            }
        }
    };
    for (t, frame) in arrivals {
        drain_until(model, t, &mut events);
        verdicts.push(model.enqueue(t, frame));
    }
    drain_until(model, u64::MAX, &mut events);
    (events, verdicts)
}
