//! Caps on every count that multiplies an experiment's work, checked at load before anything
//! is expanded: a typo (`repeat = 4000000000`, a range stepping by 1 bit/s) must be refused in
//! a millisecond with its line, not found by a planner that fills memory for an hour. Each cap
//! is far above what a real experiment asks for; docs/experiments.md ("Limits") lists them.

use crate::file::{Block, BlockKind, Item, SearchKind, SweepPoint};

/// Most repetitions of the whole plan, of a block, or of a back-to-back search: the RFC 2544
/// asks for 50; 10,000 runs of even a one-second step is almost three hours.
pub const MAX_REPEAT: u32 = 10_000;
/// Most sweep points (combinations of sweep values) and most values of one search list.
pub const MAX_POINTS: u64 = 10_000;
/// Most steps of the whole experiment (sweep points × repetitions × steps of the plan): at
/// one second each, more than a day of running.
pub const MAX_STEPS: u64 = 100_000;
/// Most flow runs of the whole experiment (every flow of every step): the planner holds each
/// as a ready test spec (about half a kilobyte), so this bounds the plan to ~100 MB.
pub const MAX_FLOW_RUNS: u64 = 200_000;
/// Most flows starting in one step: each is a test on some agent, and an agent serves 16 tests
/// at once by default.
pub const MAX_STEP_FLOWS: u64 = 1_024;
/// Most parallel sockets of one flow (`flows`): the agent's default `--max-flows`.
pub const MAX_PARALLEL: u32 = 1_024;
/// Most `[[host]]` and most `[[flow]]` tables.
pub const MAX_DEFINITIONS: usize = 1_000;
/// Most (sweep point × host or flow) pairs: each point holds its own copy of every host and
/// flow, a few hundred bytes each.
pub const MAX_POINT_ENTRIES: u64 = 200_000;
/// Most items (flows and blocks) of the plan once named blocks are copied in where they are
/// used: blocks naming each other twice over double at every level.
pub const MAX_PLAN_ITEMS: u64 = 100_000;
/// Most trials of a search.
pub const MAX_TRIALS: u64 = 10_000;
/// Most planned running time, summed over every step and trial whose length is known in
/// advance (duration, or count at a constant rate): 24 h.
pub const MAX_PLANNED_NS: u64 = 24 * 3600 * 1_000_000_000;

/// What a block costs, per run of it; every sum saturates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    pub steps: u64,
    pub flow_runs: u64,
    /// Flows of its largest step.
    pub step_flows: u64,
    pub items: u64,
}

/// The shape of `b`, from the tree alone (the same at every sweep point).
pub(crate) fn shape(b: &Block) -> Shape {
    let mut once = Shape::default();
    for it in &b.items {
        let s = match it {
            Item::Flow(_) => Shape {
                steps: 1,
                flow_runs: 1,
                step_flows: 1,
                items: 1,
            },
            Item::Block(inner) => shape(inner),
        };
        once.flow_runs = once.flow_runs.saturating_add(s.flow_runs);
        once.items = once.items.saturating_add(s.items);
        match b.kind {
            BlockKind::Serial => {
                once.steps = once.steps.saturating_add(s.steps);
                once.step_flows = once.step_flows.max(s.step_flows);
            }
            // Everything of a parallel block starts in one step.
            BlockKind::Parallel => {
                once.steps = 1;
                once.step_flows = once.flow_runs;
            }
        }
    }
    let r = u64::from(b.repeat);
    Shape {
        steps: once.steps.saturating_mul(r),
        flow_runs: once.flow_runs.saturating_mul(r),
        step_flows: once.step_flows,
        items: once.items.saturating_add(1),
    }
}

/// Planned running time of `b` at point `p`: serial items add up, parallel ones overlap.
/// Flows whose length is unknown in advance count only their start offset.
pub(crate) fn planned_ns(b: &Block, p: &SweepPoint) -> u64 {
    let mut once: u64 = 0;
    for it in &b.items {
        let ns = match it {
            Item::Flow(n) => p.flow(n).map_or(0, |f| {
                f.start_ns.saturating_add(f.known_length_ns().unwrap_or(0))
            }),
            Item::Block(inner) => planned_ns(inner, p),
        };
        once = match b.kind {
            BlockKind::Serial => once.saturating_add(ns),
            BlockKind::Parallel => once.max(ns),
        };
    }
    once.saturating_add(b.start_ns)
        .saturating_mul(u64::from(b.repeat))
}

/// `ns` as hours, for messages.
pub(crate) fn hours(ns: u64) -> String {
    format!("{:.1} h", ns as f64 / 3.6e12)
}

/// Trials a search runs at most, saturating.
pub(crate) fn search_trials(kind: &SearchKind) -> u64 {
    // Bisection: the two ends, then one trial per halving of the span down to the resolution.
    let bisection = |min: u64, max: u64, res: u64| {
        let halvings = 64 - ((max - min) / res.max(1)).leading_zeros();
        u64::from(halvings) + 2
    };
    match kind {
        SearchKind::Rfc2544Throughput {
            min_bps,
            max_bps,
            resolution_bps,
            ..
        } => {
            // The re-run of the result lasts as long as this many trials.
            bisection(*min_bps, *max_bps, *resolution_bps) + crate::search::VERIFY_FACTOR
        }
        SearchKind::BackToBack {
            min_packets,
            max_packets,
            resolution_packets,
            repeat,
            ..
        } => bisection(*min_packets, *max_packets, *resolution_packets)
            .saturating_mul(u64::from(*repeat)),
        // From 100 % down by `step`, plus the two clean trials that end it.
        SearchKind::LossVsLoad { step_pct, .. } => {
            ((100.0 / step_pct).ceil() as u64).saturating_add(2)
        }
        SearchKind::OfferedLoad { loads_pct } => loads_pct.len() as u64 + 1,
        SearchKind::BurstSize { bursts_bytes, .. } => bursts_bytes.len() as u64,
    }
}
