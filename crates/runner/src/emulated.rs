//! The emulator's counters of a run on an emulated lab, kept with the run: its report
//! (`emulator.json`, counters since the lab came up, rewritten every second) read before
//! and after the run, the counters reduced to what the run added and the depth samples to
//! the run's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use flowlab_emu::EmuReport;
use serde_json::Value;

/// Fields that are not counts since the lab came up, so a run's share is not their
/// difference: largest depths and release errors stay as the end report has them, depth
/// samples are cut to the run.
const NOT_COUNTS: &[&str] = &[
    "schema_version",
    "max_depth",
    "release_error",
    "read_lag",
    "late_parts",
    "depth",
];
/// The emulator rewrites its report every second; a little more is the longest wait for
/// one written after the run.
const REWRITE: Duration = Duration::from_millis(2500);

/// An emulated lab's report, watched over one run.
#[derive(Debug)]
pub struct EmulatorWatch {
    path: PathBuf,
    /// The report when the run started (none if the emulator had not written one).
    start: Option<EmuReport>,
}

impl EmulatorWatch {
    /// Notes the report at `path` as the run starts.
    pub fn start(path: &Path) -> EmulatorWatch {
        EmulatorWatch {
            path: path.to_path_buf(),
            start: EmuReport::load(path).ok(),
        }
    }

    /// The run's counters: the first report written after now, less the start's.
    pub fn finish(&self) -> anyhow::Result<EmuReport> {
        let now = SystemTime::now();
        let deadline = Instant::now() + REWRITE;
        let written = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
        while written(&self.path).is_none_or(|t| t < now) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let end = EmuReport::load(&self.path)
            .with_context(|| format!("reading the emulator's report {}", self.path.display()))?;
        Ok(match &self.start {
            Some(start) => run_share(end, start),
            None => end,
        })
    }
}

/// `end` less `start`: counts subtracted, depth samples from after `start`'s last.
pub fn run_share(mut end: EmuReport, start: &EmuReport) -> EmuReport {
    let last_sample = |r: &EmuReport, link: usize, dir: usize| {
        let d = r.links.get(link)?.directions.get(dir)?;
        d.depth.last().map(|s| s.t_ms)
    };
    for (i, link) in end.links.iter_mut().enumerate() {
        for (j, dir) in link.directions.iter_mut().enumerate() {
            if let Some(since) = last_sample(start, i, j) {
                dir.depth.retain(|s| s.t_ms > since);
            }
        }
    }
    let (Ok(mut counts), Ok(before)) = (serde_json::to_value(&end), serde_json::to_value(start))
    else {
        return end;
    };
    subtract(&mut counts, &before);
    serde_json::from_value(counts).unwrap_or(end)
}

/// Subtracts every count of `before` from the same count of `value` (never below 0), arrays
/// element by element, objects key by key but [`NOT_COUNTS`].
fn subtract(value: &mut Value, before: &Value) {
    match (value, before) {
        (Value::Object(m), Value::Object(b)) => {
            for (k, v) in m
                .iter_mut()
                .filter(|(k, _)| !NOT_COUNTS.contains(&k.as_str()))
            {
                if let Some(b) = b.get(k) {
                    subtract(v, b);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (v, b) in a.iter_mut().zip(b) {
                subtract(v, b);
            }
        }
        (v @ Value::Number(_), Value::Number(b)) => {
            if let (Some(x), Some(y)) = (v.as_u64(), b.as_u64()) {
                *v = x.saturating_sub(y).into();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
