//! What an experiment measured, as its observers and its store see it: each flow's outcome,
//! the one-way delays the hosts' clocks allow, a search's trials.

use std::collections::BTreeMap;

use flowlab_control::TestResult;
use serde::Serialize;

/// A host's clock against this one's: the estimated offset and the bound of that estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ClockOffset {
    pub offset_ns: i64,
    pub bound_ns: u64,
}

/// Clocks by agent address.
pub type Clocks = BTreeMap<String, ClockOffset>;

/// Absolute one-way delay of a flow: its receive-minus-send timestamps with the estimated
/// offset between the two agents' clocks removed, and the bound of that estimate.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct OneWay {
    pub min_ns: f64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub max_ns: f64,
    /// Error bound of the clock offset; the figures are only as good as this.
    pub bound_ns: f64,
    /// False when the bound exceeds the delay: the figures say little.
    pub valid: bool,
}

/// One flow's outcome in one step.
#[derive(Debug)]
pub struct FlowOutcome {
    pub step: usize,
    pub flow: String,
    pub labels: Vec<(String, String)>,
    pub repetition: u32,
    pub result: Result<TestResult, String>,
    pub one_way: Option<OneWay>,
}

/// A search's trial: what was offered and what came through, all its flows together.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialOutcome {
    pub index: usize,
    pub offered_bps: u64,
    pub goodput_bps: f64,
    /// Lost over sent.
    pub loss: f64,
}
