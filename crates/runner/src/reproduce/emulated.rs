//! The emulated column: the labs of [`LAB_RUNS`] brought up in network namespaces, their
//! experiments run through real sockets and flowlab's emulator, and the values of the rows
//! they answer kept in a data file (`reproductions/emulated.json` beside the document), so
//! that rendering the document needs neither root nor minutes of real time.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use flowlab_control::TestResult;
use flowlab_emu::EmuReport;
use flowlab_netns::lab::{self, LabSpec, LabState, UpOptions};
use serde::{Deserialize, Serialize};

use super::labs::{emulated_probes, EmulatedProbe, LabRun, LAB_RUNS};
use super::Metric;
use crate::experiment::{prepare_on_lab, ExperimentOutcome};

/// The data file, under the document's `reproductions/` directory.
pub const DATA_FILE: &str = "emulated.json";

/// What the labs measured, as kept in the data file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmulatedData {
    pub runs: Vec<MeasuredRun>,
    pub cells: Vec<MeasuredCell>,
}

/// One lab run: when it ran, and how busy the machine was (the emulator's timing, and so
/// delays and bursts, suffer on a loaded machine).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredRun {
    pub key: String,
    /// UTC, `YYYY-MM-DD HH:MM:SS`.
    pub measured: String,
    /// The one-minute load average as the run ended.
    pub load_average: Option<f64>,
    /// The emulator's own error (release time less modelled departure), in microseconds,
    /// in the direction where it was worst: how much of a lab's delays is not the model's
    /// (absent from files written before it, and where no frame crossed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_error_us: Option<ReleaseError>,
}

/// A release error's 99th percentile and maximum, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReleaseError {
    pub p99: f64,
    pub max: f64,
}

impl ReleaseError {
    /// The worst of `report`'s directions: the largest 99th percentile, the largest maximum.
    pub fn worst(report: &EmuReport) -> Option<ReleaseError> {
        report
            .links
            .iter()
            .flat_map(|l| &l.directions)
            .filter_map(|d| d.release_error.as_ref())
            .map(|e| ReleaseError {
                p99: e.p99_ns / 1e3,
                max: e.max_ns / 1e3,
            })
            .reduce(|a, b| ReleaseError {
                p99: a.p99.max(b.p99),
                max: a.max.max(b.max),
            })
    }
}

/// One row's emulated value: the median of the runs' values where the experiment repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredCell {
    pub item: String,
    pub value: f64,
    /// Each repetition's value, in increasing order, when there was more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<f64>,
}

impl MeasuredCell {
    /// The cell of `values` (at least one): their median, and all of them if several.
    pub fn of(item: &str, mut values: Vec<f64>) -> MeasuredCell {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let value = match n % 2 {
            1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        MeasuredCell {
            item: item.into(),
            value,
            runs: if n > 1 { values } else { Vec::new() },
        }
    }
}

impl EmulatedData {
    /// Reads `path`; nothing measured if it does not exist.
    pub fn load(path: &Path) -> anyhow::Result<EmulatedData> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .with_context(|| format!("{}: not an emulated-values file", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(EmulatedData::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self).expect("plain data serialises");
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// The row's cell, if a lab measured it.
    pub fn cell(&self, item: &str) -> Option<&MeasuredCell> {
        self.cells.iter().find(|c| c.item == item)
    }

    /// How lab run `key` was measured.
    pub fn run(&self, key: &str) -> Option<&MeasuredRun> {
        self.runs.iter().find(|r| r.key == key)
    }

    /// `newer`'s runs and cells in place of these.
    pub fn merge(&mut self, newer: EmulatedData) {
        self.runs
            .retain(|r| !newer.runs.iter().any(|n| n.key == r.key));
        self.cells
            .retain(|c| !newer.cells.iter().any(|n| n.item == c.item));
        self.runs.extend(newer.runs);
        self.cells.extend(newer.cells);
        let order = |key: &str| LAB_RUNS.iter().position(|r| r.key == key);
        self.runs.sort_by_key(|r| order(&r.key));
    }
}

/// How labs come up: the flowlab binary their agents and emulator run, where their state
/// lives, and a suffix of their names (lab `rp<key><tag>`), so that tests' labs do not meet.
pub struct Emulation {
    pub exe: PathBuf,
    pub run_dir: PathBuf,
    pub tag: String,
}

impl Emulation {
    /// This binary, the default state directory, the plain names.
    pub fn here() -> anyhow::Result<Emulation> {
        Ok(Emulation {
            exe: std::env::current_exe().context("finding the flowlab binary for the labs")?,
            run_dir: lab::default_run_dir(),
            tag: String::new(),
        })
    }
}

/// The probes whose row passes `chosen`, and the lab runs they need, in order.
pub fn planned(chosen: impl Fn(&str) -> bool) -> Vec<(&'static LabRun, Vec<EmulatedProbe>)> {
    LAB_RUNS
        .iter()
        .map(|run| {
            let probes = emulated_probes()
                .filter(|p| p.run == run.key && chosen(p.item))
                .copied()
                .collect();
            (run, probes)
        })
        .filter(|(_, probes): &(_, Vec<_>)| !probes.is_empty())
        .collect()
}

/// What the labs measured, and why those that failed did (`lab FILE: why`).
pub struct Measurement {
    pub data: EmulatedData,
    pub failures: Vec<String>,
}

/// Brings each lab of `plan` up in turn, runs its experiment and reads its rows. Refuses
/// at once without root; a lab that cannot come up (a missing qdisc) or a flow that fails
/// fails its run alone.
pub fn measure(
    plan: &[(&LabRun, Vec<EmulatedProbe>)],
    how: &Emulation,
    progress: &mut dyn FnMut(&str),
) -> anyhow::Result<Measurement> {
    flowlab_netns::netns_available()
        .map_err(|why| anyhow!("--emulated brings labs up in network namespaces: {why}"))?;
    let mut measured = Measurement {
        data: EmulatedData::default(),
        failures: Vec::new(),
    };
    for (run, probes) in plan {
        progress(&format!(
            "lab {} with {}: {}",
            run.lab_file, run.experiment_file, run.trials
        ));
        match measure_run(run, probes, how) {
            Ok((record, cells)) => {
                measured.data.runs.push(record);
                measured.data.cells.extend(cells);
            }
            Err(e) => measured
                .failures
                .push(format!("lab {}: {e:#}", run.lab_file)),
        }
    }
    Ok(measured)
}

/// One lab up, its experiment run, its rows read, the lab down.
fn measure_run(
    run: &LabRun,
    probes: &[EmulatedProbe],
    how: &Emulation,
) -> anyhow::Result<(MeasuredRun, Vec<MeasuredCell>)> {
    let up = LabUp::new(run, how)?;
    let outcome = run_on(&up.state, run)?;
    let record = MeasuredRun {
        key: run.key.into(),
        measured: crate::format::format_time(flowlab_sys::clock::realtime_ns() as i64),
        load_average: flowlab_sys::tuning::load_average(),
        release_error_us: match &outcome.emulator {
            Some(Ok(report)) => ReleaseError::worst(report),
            _ => None,
        },
    };
    let cells = probes
        .iter()
        .map(|p| {
            let values = read(&outcome, p).with_context(|| format!("row {:?}", p.item))?;
            Ok(MeasuredCell::of(p.item, values))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok((record, cells))
}

/// A lab brought up for one run, taken down when dropped.
struct LabUp {
    state: LabState,
    run_dir: PathBuf,
}

impl LabUp {
    fn new(run: &LabRun, how: &Emulation) -> anyhow::Result<LabUp> {
        let parse =
            |text: &str| LabSpec::parse(text).map_err(|e| anyhow!(e.with_file(run.lab_file)));
        // Renamed in its text, which the emulator reads again from the lab's state.
        let original = format!("name = {:?}", parse(run.lab)?.name);
        let renamed = format!("name = \"rp{}{}\"", run.key, how.tag);
        let spec = parse(&run.lab.replacen(&original, &renamed, 1))?;
        let mut opts = UpOptions::new(how.run_dir.clone());
        opts.file = Some(run.lab_file.into());
        opts.agent_exe = Some(how.exe.clone());
        opts.emulator_exe = Some(how.exe.clone());
        let state = lab::up(&spec, &opts).map_err(|e| anyhow!("lab {}: {e}", run.lab_file))?;
        Ok(LabUp {
            state,
            run_dir: how.run_dir.clone(),
        })
    }
}

impl Drop for LabUp {
    fn drop(&mut self) {
        if let Err(e) = lab::down(Some(&self.state.name), &self.run_dir) {
            eprintln!("flowlab: lab {} not taken down: {e}", self.state.name);
        }
    }
}

/// Runs `run`'s experiment from inside its controller host, as `flowlab lab exec HOST --
/// flowlab run FILE --lab NAME` would: on a thread of its own that enters the host's
/// namespace, where the threads it starts stay too.
fn run_on(state: &LabState, run: &LabRun) -> anyhow::Result<ExperimentOutcome> {
    let experiment = flowlab_experiment::load(run.experiment)
        .map_err(|e| anyhow!("{}: {e}", run.experiment_file))?;
    let ns = lab::plan::ns_of(&state.name, run.controller);
    std::thread::scope(|scope| {
        let thread = scope.spawn(|| {
            flowlab_sys::host::enter_netns(&ns).with_context(|| format!("entering {ns}"))?;
            let mut prepared = prepare_on_lab(experiment, state)?;
            prepared.run(&mut |_: crate::Event<'_>| {})
        });
        thread
            .join()
            .map_err(|_| anyhow!("the run on lab {} panicked", state.name))?
    })
}

/// The probe's values from the run: a flow's receiver in each repetition of the plan, or
/// the emulator's counters over the whole run.
fn read(outcome: &ExperimentOutcome, p: &EmulatedProbe) -> anyhow::Result<Vec<f64>> {
    if let Metric::PortCellLossPercent = p.metric {
        let report = match &outcome.emulator {
            Some(Ok(report)) => report,
            Some(Err(why)) => bail!("the emulator's counters: {why}"),
            None => bail!("the lab has no emulator"),
        };
        return Ok(vec![port_cell_loss(report, p.name)?]);
    }
    let values = outcome
        .flows
        .iter()
        .filter(|f| f.flow == p.name)
        .map(|flow| {
            let result = flow
                .result
                .as_ref()
                .map_err(|e| anyhow!("flow {} failed: {e}", p.name))?;
            if let Some(e) = &result.error {
                bail!("flow {} failed: {e}", p.name);
            }
            flow_value(result, p.metric)
                .ok_or_else(|| anyhow!("flow {}: no {:?}", p.name, p.metric))
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    match values.is_empty() {
        true => bail!("no flow {}", p.name),
        false => Ok(values),
    }
}

fn flow_value(result: &TestResult, metric: Metric) -> Option<f64> {
    let s = &result.summary;
    let receiver = result.agent.as_ref()?.receiver.as_ref()?;
    Some(match metric {
        Metric::GoodputMbps => s.receiver_goodput_bps / 1e6,
        Metric::GoodputKbps => s.receiver_goodput_bps / 1e3,
        Metric::LossPercent => s.loss_pct,
        // The lab's hosts share this machine's clock, so the raw transit (receive stamp less
        // send stamp) is the one-way delay, with no offset to estimate.
        Metric::MaxDelayMs => {
            let min = receiver.transit_min_ns? as f64;
            (min + receiver.relative_delay.as_ref()?.max_ns) / 1e6
        }
        Metric::DelayVariationMs => receiver.relative_delay.as_ref()?.max_ns / 1e6,
        _ => return None,
    })
}

/// Cells dropped over cells offered at the ATM stage of link direction `FROM>TO`.
fn port_cell_loss(report: &EmuReport, direction: &str) -> anyhow::Result<f64> {
    let dir = report
        .links
        .iter()
        .flat_map(|l| &l.directions)
        .find(|d| format!("{}>{}", d.from, d.to) == direction)
        .ok_or_else(|| anyhow!("no emulated link direction {direction}"))?;
    let cells = dir
        .stages
        .iter()
        .find_map(|s| s.cells.as_ref())
        .ok_or_else(|| anyhow!("{direction} has no ATM stage"))?;
    let dropped = cells.policed_dropped
        + cells.dropped_buffer_full
        + cells.dropped_epd
        + cells.dropped_ppd
        + cells.dropped_clp
        + cells.lost_on_line;
    Ok(100.0 * dropped as f64 / cells.cells_in.max(1) as f64)
}

/// The data file beside the document `out`.
pub fn data_path(out: &Path) -> PathBuf {
    let dir = out.parent().unwrap_or(Path::new("."));
    dir.join("reproductions").join(DATA_FILE)
}

#[cfg(test)]
mod tests;
