//! `flowlab compare RUN RUN [RUN]`: stored runs side by side, flow by flow (throughput, loss,
//! delay percentiles), each later run's difference from the first. Flows are matched by their
//! stored point (flow name and labels) and repetition, so the same experiment file run with
//! `--sim`, `--lab` and on real hosts lines up.

use std::path::Path;

use anyhow::bail;
use flowlab_store::{plain, Point, Run, RunId};
use serde::Serialize;
use serde_json::Value;

use crate::outcome::NetworkKind;

/// The flat metrics compared, in this order (`flowlab_report::metrics` names); a metric no
/// run has is left out.
pub const METRICS: &[&str] = &[
    "goodput_bps",
    "loss_pct",
    "packets_sent",
    "delay_p50_us",
    "delay_p90_us",
    "delay_p99_us",
    "rtt_p50_us",
    "rtt_p90_us",
    "rtt_p99_us",
];
/// What a TCP flow is compared on: a real run counts the application's messages and times
/// them, a simulated one counts segments, so their packet counts and delays differ in kind.
pub const TCP_METRICS: &[&str] = &["goodput_bps", "loss_pct"];
/// Version of the `--json` document's layout.
pub const SCHEMA_VERSION: u32 = 1;
/// How many runs one comparison takes.
pub const RUNS: std::ops::RangeInclusive<usize> = 2..=3;

/// One compared run: what it was and where it ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparedRun {
    pub run: RunId,
    pub kind: String,
    /// `real`, `lab NAME` or `sim FILE (...)`, when the run records it.
    pub network: Option<String>,
}

/// A later run's value against the first run's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Difference {
    /// Later minus first, in the metric's unit.
    pub absolute: f64,
    /// `absolute` as a percentage of the first value; none when that is 0.
    pub relative_pct: Option<f64>,
}

/// One metric of one flow across the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub metric: String,
    /// One per run, in the order given; none where a run lacks the flow or the figure.
    pub values: Vec<Option<f64>>,
    /// One per run after the first.
    pub differences: Vec<Option<Difference>>,
}

/// One flow (a stored point and repetition) across the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowComparison {
    /// The point's labels, `flow=bulk step=1`, with `#N` for repetition N > 0.
    pub flow: String,
    /// `udp` or `tcp` (the first run's that has the flow).
    pub protocol: String,
    pub metrics: Vec<MetricRow>,
}

/// The result of `flowlab compare` (`--json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub schema_version: u32,
    pub runs: Vec<ComparedRun>,
    pub flows: Vec<FlowComparison>,
}

/// Loads runs `ids` from the database `db` and compares them.
pub fn compare(db: Option<&Path>, ids: &[RunId]) -> anyhow::Result<Comparison> {
    let store = crate::record::open_store(db)?;
    let runs = ids
        .iter()
        .map(|&id| store.load_run(id))
        .collect::<Result<Vec<_>, _>>()?;
    Comparison::of(&runs)
}

/// What `flowlab compare` prints: the table, or the JSON document with `json`.
pub fn output(db: Option<&Path>, ids: &[RunId], json: bool) -> anyhow::Result<String> {
    let c = compare(db, ids)?;
    Ok(match json {
        true => format!("{}\n", serde_json::to_string_pretty(&c)?),
        false => crate::format::comparison_table(&c),
    })
}

impl Comparison {
    /// Compares `runs` (2 or 3, each with results): every flow any of them has, in the order
    /// first seen.
    pub fn of(runs: &[Run]) -> anyhow::Result<Comparison> {
        if !RUNS.contains(&runs.len()) {
            bail!("compare takes 2 or 3 runs, not {}", runs.len());
        }
        if let Some(empty) = runs.iter().find(|r| r.points.is_empty()) {
            bail!("run {} has no results to compare", empty.info.id);
        }
        let mut keys: Vec<String> = Vec::new();
        for p in runs.iter().flat_map(|r| &r.points) {
            let key = flow_key(p);
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let flows = keys
            .into_iter()
            .map(|key| {
                let points: Vec<Option<&Point>> = runs
                    .iter()
                    .map(|r| r.points.iter().find(|p| flow_key(p) == key))
                    .collect();
                let protocol = points
                    .iter()
                    .flatten()
                    .find_map(|p| p.result.pointer("/spec/protocol")?.as_str())
                    .unwrap_or("udp")
                    .to_string();
                let metrics = match protocol.as_str() {
                    "tcp" => TCP_METRICS,
                    _ => METRICS,
                };
                FlowComparison {
                    metrics: metric_rows(metrics, &points),
                    flow: key,
                    protocol,
                }
            })
            .collect();
        let runs = runs
            .iter()
            .map(|r| ComparedRun {
                run: r.info.id,
                kind: r.info.kind.clone(),
                network: NetworkKind::of_params(&r.info.params).map(|n| n.to_string()),
            })
            .collect();
        Ok(Comparison {
            schema_version: SCHEMA_VERSION,
            runs,
            flows,
        })
    }
}

/// A point's labels as one key: `flow=NAME` first, the others sorted, `#N` for repetitions.
fn flow_key(p: &Point) -> String {
    let mut labels: Vec<String> = match &p.params {
        Value::Object(m) => m.iter().map(|(k, v)| format!("{k}={}", plain(v))).collect(),
        Value::Null => Vec::new(),
        other => vec![plain(other)],
    };
    labels.sort_by_key(|l| !l.starts_with("flow="));
    if p.repetition > 0 {
        labels.push(format!("#{}", p.repetition));
    }
    match labels.is_empty() {
        true => "(the test)".into(),
        false => labels.join(" "),
    }
}

/// The rows of `metrics` that any of `points` has.
fn metric_rows(metrics: &[&str], points: &[Option<&Point>]) -> Vec<MetricRow> {
    metrics
        .iter()
        .filter_map(|&metric| {
            let values: Vec<Option<f64>> = points
                .iter()
                .map(|p| {
                    let p = (*p)?;
                    p.metrics.iter().find(|(n, _)| n == metric).map(|m| m.1)
                })
                .collect();
            if values.iter().all(Option::is_none) {
                return None;
            }
            let differences = values[1..]
                .iter()
                .map(|v| Some(difference(values[0]?, (*v)?)))
                .collect();
            Some(MetricRow {
                metric: metric.into(),
                values,
                differences,
            })
        })
        .collect()
}

fn difference(first: f64, later: f64) -> Difference {
    let absolute = later - first;
    Difference {
        absolute,
        relative_pct: (first != 0.0).then(|| absolute / first.abs() * 100.0),
    }
}

#[cfg(test)]
mod tests;
