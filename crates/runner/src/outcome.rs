//! What an experiment measured, as its observers and its store see it: the network it ran on,
//! each flow's outcome, the one-way delays the hosts' clocks allow, a search's trials.

use std::collections::BTreeMap;
use std::fmt;

use flowlab_control::TestResult;
pub use flowlab_experiment::ClockOffset;
use serde::{Deserialize, Serialize};

/// The network an experiment's flows ran on, recorded with its results (`network` in the
/// stored run's parameters and the `--json` document).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum NetworkKind {
    /// Agents at the experiment's host addresses.
    Real,
    /// The agents of a running lab (`flowlab lab up`), by its name.
    Lab { name: String },
    /// A simulated network: its file as given, the file's `name`, and the SHA-256 of its text
    /// (so runs on different versions of one file are told apart).
    Sim {
        file: String,
        name: String,
        sha256: String,
    },
}

impl NetworkKind {
    /// The network recorded in a stored run's parameters, if it records one.
    pub fn of_params(params: &serde_json::Value) -> Option<NetworkKind> {
        serde_json::from_value(params.get("network")?.clone()).ok()
    }
}

/// `real`, `lab NAME`, or `sim FILE (NAME, sha256 0123456789ab)`.
impl fmt::Display for NetworkKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkKind::Real => f.write_str("real"),
            NetworkKind::Lab { name } => write!(f, "lab {name}"),
            NetworkKind::Sim { file, name, sha256 } => {
                let hash: String = sha256.chars().take(12).collect();
                match name.as_str() {
                    "" => write!(f, "sim {file} (sha256 {hash})"),
                    _ => write!(f, "sim {file} ({name}, sha256 {hash})"),
                }
            }
        }
    }
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
    /// How fast the receiver's clock gains on the sender's (ppm, from the two fits), and the
    /// bound of that; `None` while a clock's drift is unknown.
    pub clock_drift_ppm: Option<f64>,
    pub clock_drift_bound_ppm: Option<f64>,
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
    /// Payload bytes received over the trial's span (never above what was offered).
    pub goodput_bps: f64,
    /// Lost over sent.
    pub loss: f64,
    /// How long the trial's flows sent (the longest), when they had a duration.
    pub duration_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn network_kinds_are_stored_and_named_as_documented() {
        let cases = [
            (NetworkKind::Real, r#"{"kind":"real"}"#, "real"),
            (
                NetworkKind::Lab {
                    name: "three".into(),
                },
                r#"{"kind":"lab","name":"three"}"#,
                "lab three",
            ),
            (
                NetworkKind::Sim {
                    file: "n.toml".into(),
                    name: String::new(),
                    sha256: "0123456789abcdef".into(),
                },
                r#"{"kind":"sim","file":"n.toml","name":"","sha256":"0123456789abcdef"}"#,
                "sim n.toml (sha256 0123456789ab)",
            ),
        ];
        for (kind, stored, text) in cases {
            assert_eq!(serde_json::to_string(&kind).unwrap(), stored);
            let params =
                json!({ "network": serde_json::from_str::<serde_json::Value>(stored).unwrap() });
            assert_eq!(NetworkKind::of_params(&params), Some(kind.clone()));
            assert_eq!(kind.to_string(), text);
        }
        assert_eq!(NetworkKind::of_params(&json!({"target": "h"})), None);
        assert_eq!(
            NetworkKind::of_params(&json!({"network": {"kind": "moon"}})),
            None
        );
    }
}
