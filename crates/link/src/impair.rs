//! The impairments people ask netem for, as one sans-IO stage: a limit, loss, duplication,
//! delay with jitter drawn from a distribution, and reordering. (netem's `rate` is the
//! serialising port of [`crate::diffserv`], a FIFO by default, as on a simulated link.)
//!
//! A frame's fate is decided when it arrives, in this order: the limit (frames held by the
//! stage, netem's `limit`), loss, duplication; then each copy is delayed by
//! `delay + jitter · z`, z drawn from the distribution, never below zero. A reordered copy
//! skips the delay and jitter and leaves at once (netem's `reorder`, which, as there, needs a
//! delay to show). Frames leave in departure-time order, so jitter reorders as netem's does.
//!
//! Not modelled: netem's correlation parameters, corruption, slotting, and its 4-state loss.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand_chacha::ChaCha8Rng;
use rand_distr::{Pareto, StandardNormal};

use crate::loss::{LossModel, LossProcess};
use crate::{unit_f64, Cause, Event, Frame, LinkModel, StageReport, Verdict};

/// netem's default `limit` drops silently once packets/s × delay exceeds 1000; this one
/// holds 95 ms of 1500-byte frames at 5 Gbit/s.
pub const DEFAULT_LIMIT: u32 = 50_000;

/// The shape of the jitter around the delay, scaled so that `jitter` is its standard
/// deviation (uniform: its half-width, as netem's default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Distribution {
    /// Uniform on [-jitter, +jitter].
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter`.
    Normal,
    /// Pareto (shape 3) shifted to mean 0, standard deviation `jitter`: rare long delays.
    Pareto,
}

impl Distribution {
    /// A draw with mean 0 (and unit scale, see the type).
    fn sample(self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Distribution::Uniform => 2.0 * unit_f64(rng) - 1.0,
            Distribution::Normal => rand_distr::Distribution::sample(&StandardNormal, rng),
            Distribution::Pareto => {
                // Scale 1, shape 3: mean 3/2 and standard deviation √3/2.
                let law = Pareto::new(1.0, 3.0).expect("constant, valid parameters");
                let x: f64 = rand_distr::Distribution::sample(&law, rng);
                (x - 1.5) / (3f64.sqrt() / 2.0)
            }
        }
    }
}

/// An impairment stage's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ImpairConfig {
    pub delay_ns: u64,
    pub jitter_ns: u64,
    pub distribution: Distribution,
    pub loss: LossModel,
    /// Probability that a frame is sent twice.
    pub duplicate: f64,
    /// Probability that a frame skips the delay.
    pub reorder: f64,
    /// Most frames held at once.
    pub limit: u32,
}

impl Default for ImpairConfig {
    fn default() -> ImpairConfig {
        ImpairConfig {
            delay_ns: 0,
            jitter_ns: 0,
            distribution: Distribution::Uniform,
            loss: LossModel::None,
            duplicate: 0.0,
            reorder: 0.0,
            limit: DEFAULT_LIMIT,
        }
    }
}

impl ImpairConfig {
    /// Whether the stage does nothing but delay every frame by `delay_ns` (no jitter, loss,
    /// copies, reordering, or limit other than the default): a plain propagation delay.
    pub fn is_fixed_delay(&self) -> bool {
        *self
            == ImpairConfig {
                delay_ns: self.delay_ns,
                ..ImpairConfig::default()
            }
    }

    /// Whether frames may leave in another order than they came (jitter or reordering).
    pub fn may_reorder(&self) -> bool {
        self.jitter_ns > 0 || self.reorder > 0.0
    }
}

/// A frame on its way out, ordered by departure time then arrival order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Held {
    at_ns: u64,
    seq: u64,
    id: u64,
    len: u32,
    dscp: u8,
}

/// The impairment stage.
#[derive(Debug, Clone)]
pub struct Impairments {
    config: ImpairConfig,
    rng: ChaCha8Rng,
    loss: LossProcess,
    held: BinaryHeap<Reverse<Held>>,
    seq: u64,
    report: StageReport,
}

impl Impairments {
    /// The stage; `seed` makes its random choices repeatable.
    pub fn new(config: ImpairConfig, seed: u64) -> Impairments {
        Impairments {
            loss: LossProcess::new(config.loss),
            rng: crate::stage_rng(seed, 0),
            config,
            held: BinaryHeap::new(),
            seq: 0,
            report: StageReport::new("impair", "frames"),
        }
    }

    /// Puts one copy of `frame` on its way.
    fn send(&mut self, now_ns: u64, frame: Frame) {
        let mut at_ns = now_ns;
        if self.config.reorder > 0.0 && unit_f64(&mut self.rng) < self.config.reorder {
            self.report.reordered += 1;
        } else {
            at_ns = at_ns.saturating_add(self.delay_sample());
        }
        self.held.push(Reverse(Held {
            at_ns,
            seq: self.seq,
            id: frame.id,
            len: frame.len,
            dscp: frame.dscp,
        }));
        self.seq += 1;
        self.report.max_depth = self.report.max_depth.max(self.held.len() as u64);
    }

    fn delay_sample(&mut self) -> u64 {
        let (delay, jitter) = (self.config.delay_ns, self.config.jitter_ns);
        if jitter == 0 {
            return delay;
        }
        let z = self.config.distribution.sample(&mut self.rng);
        (delay as f64 + jitter as f64 * z).max(0.0).round() as u64
    }
}

impl LinkModel for Impairments {
    fn enqueue(&mut self, now_ns: u64, frame: Frame) -> Verdict {
        self.report.frames_in += 1;
        let verdict = if self.held.len() >= self.config.limit as usize {
            Verdict::Dropped(Cause::QueueFull)
        } else if self.loss.lose(&mut self.rng) {
            Verdict::Dropped(Cause::Loss)
        } else if self.config.duplicate > 0.0
            && unit_f64(&mut self.rng) < self.config.duplicate
            && self.held.len() + 1 < self.config.limit as usize
        {
            Verdict::Duplicated
        } else {
            Verdict::Queued
        };
        match verdict {
            Verdict::Dropped(cause) => self.report.count_drop(cause),
            Verdict::Duplicated => {
                self.report.duplicated += 1;
                self.send(now_ns, frame);
                self.send(now_ns, frame);
            }
            Verdict::Queued => self.send(now_ns, frame),
        }
        verdict
    }

    fn next_event_ns(&self) -> Option<u64> {
        self.held.peek().map(|h| h.0.at_ns)
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Event> {
        let Reverse(h) = *self.held.peek().filter(|h| h.0.at_ns <= now_ns)?;
        self.held.pop();
        self.report.frames_out += 1;
        self.report.bytes_out += u64::from(h.len);
        Some(Event::Depart {
            frame: Frame {
                id: h.id,
                len: h.len,
                dscp: h.dscp,
            },
            at_ns: h.at_ns,
        })
    }

    fn report(&self, out: &mut Vec<StageReport>) {
        out.push(self.report.clone());
    }

    fn depth(&self, out: &mut Vec<u64>) {
        out.push(self.held.len() as u64);
    }
}

#[cfg(test)]
mod tests;
