//! What a link's stages report: counters kept since the link came up, the same for a
//! simulated and an emulated run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One stage of a link direction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    /// `atm`, `diffserv` or `impair`.
    pub stage: String,
    pub frames_in: u64,
    pub frames_out: u64,
    pub bytes_out: u64,
    /// Frames lost, by cause (`loss`, `queue_full`, `meter`, `cells_lost`).
    pub dropped: BTreeMap<String, u64>,
    /// Extra copies made (impairments).
    pub duplicated: u64,
    /// Frames sent ahead of their turn (impairments).
    pub reordered: u64,
    /// Largest backlog seen, in `depth_unit`.
    pub max_depth: u64,
    /// `frames` or `cells`.
    pub depth_unit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<CellReport>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
}

impl StageReport {
    pub(crate) fn new(stage: &str, depth_unit: &str) -> StageReport {
        StageReport {
            stage: stage.into(),
            depth_unit: depth_unit.into(),
            ..StageReport::default()
        }
    }

    pub(crate) fn count_drop(&mut self, cause: crate::Cause) {
        *self.dropped.entry(cause.name().into()).or_default() += 1;
    }

    /// Frames lost for any cause.
    pub fn frames_dropped(&self) -> u64 {
        self.dropped.values().sum()
    }
}

/// An ATM stage's cells.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellReport {
    pub cells_in: u64,
    pub cells_out: u64,
    /// Cells the GCRA policer discarded, and those it tagged CLP = 1.
    pub policed_dropped: u64,
    pub policed_tagged: u64,
    pub dropped_buffer_full: u64,
    pub dropped_epd: u64,
    pub dropped_ppd: u64,
    pub dropped_clp: u64,
    /// Cells lost on the line (the cell loss model).
    pub lost_on_line: u64,
    pub frames_epd: u64,
    pub frames_ppd: u64,
    pub vcs: Vec<VcReport>,
}

/// One VC of an ATM stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcReport {
    pub name: String,
    pub service: String,
    pub cells_in: u64,
    pub cells_out: u64,
    pub cells_dropped: u64,
    pub frames_in: u64,
    pub frames_out: u64,
}

/// One class of a DiffServ stage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassReport {
    pub name: String,
    pub enqueued: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    /// Tail drops at the class queue.
    pub dropped: u64,
    /// Frames the class's meter found out of profile and dropped.
    pub out_of_profile: u64,
    /// Frames the class's marker gave another DSCP (counted in the class that metered them).
    #[serde(default)]
    pub remarked: u64,
}
