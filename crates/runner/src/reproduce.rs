//! `flowlab reproduce`: the seed papers' published numbers beside flowlab's, run now in
//! virtual time through the example scenarios (examples/sim/, embedded so the command runs
//! anywhere), written as docs/reproductions.md with SVG plots of the figures.

pub mod emulated;
mod labs;
mod published;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use flowlab_report::overlay::{overlay, Series};
use flowlab_sim::SimReport;

use emulated::{EmulatedData, Emulation, MeasuredCell};
pub use labs::{emulated_probes, EmulatedProbe, LabRun, LAB_RUNS};
pub use published::{FIGURES, ROWS, SCENARIOS};

/// The seeds, as `--seed` names them.
pub const SEEDS: [&str; 5] = ["000", "001", "002", "003", "004"];

/// A scenario file under examples/sim/, by its file name without `.toml`.
pub struct Scenario {
    pub key: &'static str,
    pub text: &'static str,
}

/// What a row reads from a run's report.
#[derive(Clone, Copy, Debug)]
pub enum Metric {
    IpThroughputMbps,
    GoodputMbps,
    GoodputKbps,
    /// A TCP flow's application bytes delivered over the whole run, as a measurement
    /// interval averages them: the receiving span of a flow that stalls after a few
    /// segments (a starved one) is no rate.
    RunGoodputKbps,
    LossPercent,
    MaxDelayMs,
    DelayVariationMs,
    CellsPerPacket,
    /// Cells dropped over cells offered at the port `name`.
    PortCellLossPercent,
    /// Cells of the VC `name` dropped over those it offered at the port named here.
    VcCellLossPercent(&'static str),
    /// Every flow of the run together (the probe's name says which they are).
    TotalGoodputMbps,
    /// The most the flows carried together in any run of the sweep (the run is ignored).
    PeakTotalGoodputMbps,
    /// The most the flows carried together in a run where none lost a packet.
    LosslessTotalGoodputMbps,
    /// The largest x of the sweep (run *i* at `xs[i]`) at which flow `name` lost nothing.
    LosslessKnee(&'static [f64]),
    /// Host `name`'s modelled CPU: busy time over the run's duration.
    HostCpuPercent,
    /// Datagrams flow `name`'s socket buffer took before it first overflowed.
    PacketsBeforeOverflow,
    /// The first x of the sweep (run *i* at `xs[i]`) from which flow `name` loses nothing
    /// in any later run.
    LosslessFrom(&'static [f64]),
    /// Flow `name`'s mean round trip (a loopback flow's echoes, a ping's).
    RoundTripMs,
    /// How much flow `name`'s mean round trip grows from run `.0` of the sweep to run `.1`.
    RoundTripRiseMs(usize, usize),
    /// Flow `name`'s mean round trip less that of the flow named here, in the same run.
    RoundTripAboveMs(&'static str),
}

impl Metric {
    /// Whether it reads every run of a sweep rather than the probe's run.
    fn spans_runs(self) -> bool {
        matches!(
            self,
            Metric::PeakTotalGoodputMbps
                | Metric::LosslessTotalGoodputMbps
                | Metric::LosslessKnee(_)
                | Metric::LosslessFrom(_)
                | Metric::RoundTripRiseMs(..)
        )
    }
}

/// Where a row's simulated value comes from: the run (sweep point) of a scenario, and the
/// flow (or port) `name` in it.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    pub scenario: &'static str,
    pub run: usize,
    pub name: &'static str,
    pub metric: Metric,
}

#[derive(Clone, Copy, Debug)]
pub enum Published {
    Value(f64),
    /// A 95 % confidence interval.
    Range(f64, f64),
    /// What the paper says without a number flowlab can compare.
    Text(&'static str),
}

#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// A fraction of the published value.
    Relative(f64),
    /// In the row's unit.
    Absolute(f64),
}

/// How a row is judged.
#[derive(Clone, Copy, Debug)]
pub enum Check {
    /// Follows from link rates, encapsulation and contracts: equal at the published digits.
    Exact { decimals: u32 },
    /// An exact figure flowlab computes otherwise; the explanation says why.
    Differs,
    /// Host- or load-dependent: within the tolerance of the value (or interval).
    Within(Tolerance),
    /// The published value is a host's measurement under flowlab's ceiling.
    Ceiling,
    /// The paper saw the flow starve: below 10 % of its 100 kbit/s contract.
    Starved,
    /// No simulated value can answer it yet; the explanation says why.
    NotReproduced,
}

/// One published number.
pub struct Row {
    pub seed: &'static str,
    pub item: &'static str,
    pub unit: &'static str,
    pub published: Published,
    pub probe: Option<Probe>,
    pub check: Check,
    pub explanation: &'static str,
}

/// A figure drawn as a plot: the rows of its points, each at its x.
pub struct Figure {
    pub seed: &'static str,
    pub file: &'static str,
    pub title: &'static str,
    pub x_label: &'static str,
    pub y_label: &'static str,
    pub points: &'static [(f64, &'static str)],
    /// Published points read off the paper's figure or text at (x, y) rather than a row's
    /// value (e.g. a knee: its burst size at the rate sent).
    pub marks: &'static [(f64, f64)],
    /// Where flowlab's curves come from.
    pub curve: Curve,
}

/// A figure's flowlab curves.
#[derive(Clone, Copy, Debug)]
pub enum Curve {
    /// One curve joining the values of the figure's rows.
    Rows,
    /// A curve per probe from the first runs of its swept scenario (the probe's `run`
    /// ignored), at these x values in sweep order; labelled by the probe's name when there
    /// are several.
    Sweep(&'static [Probe], &'static [f64]),
    /// Flow `name`'s socket buffer fill (kB) against time (s) over the probe's run (its
    /// metric is not read).
    SocketFill(Probe),
}

impl Curve {
    fn probes(&self) -> &[Probe] {
        match self {
            Curve::Rows => &[],
            Curve::Sweep(probes, _) => probes,
            Curve::SocketFill(p) => std::slice::from_ref(p),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Exact,
    Differs,
    Within,
    Outside,
    NotReproduced,
}

impl Verdict {
    fn text(self) -> &'static str {
        match self {
            Verdict::Exact => "exact",
            Verdict::Differs => "differs",
            Verdict::Within => "within tolerance",
            Verdict::Outside => "outside tolerance",
            Verdict::NotReproduced => "not reproduced",
        }
    }
}

/// A row with flowlab's value now, and the value a lab measured (`--emulated`), if one did.
pub struct Outcome {
    pub row: &'static Row,
    pub simulated: Option<f64>,
    pub verdict: Verdict,
    pub emulated: Option<MeasuredCell>,
}

/// Which rows to run: the rows of the seeds named (all when empty) that pass `filter`.
pub fn outcomes(seeds: &[&str], filter: impl Fn(&Row) -> bool) -> anyhow::Result<Vec<Outcome>> {
    let rows = chosen_rows(seeds, filter)?;
    let keys: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.probe)
        .map(|p| p.scenario)
        .collect();
    outcomes_of(rows, &run_all(&keys)?, &EmulatedData::default())
}

fn chosen_rows(seeds: &[&str], filter: impl Fn(&Row) -> bool) -> anyhow::Result<Vec<&'static Row>> {
    if let Some(bad) = seeds.iter().find(|s| !SEEDS.contains(s)) {
        bail!("unknown seed {bad}: expected one of {}", SEEDS.join(", "));
    }
    Ok(ROWS
        .iter()
        .filter(|r| seeds.is_empty() || seeds.contains(&r.seed))
        .filter(|r| filter(r))
        .collect())
}

/// The rows judged against the scenarios' reports, with the labs' values of `emulated`.
fn outcomes_of(
    rows: Vec<&'static Row>,
    reports: &Reports,
    emulated: &EmulatedData,
) -> anyhow::Result<Vec<Outcome>> {
    rows.into_iter()
        .map(|row| {
            let simulated = match row.probe {
                Some(p) => Some(read(report(reports, p.scenario)?, &p)?),
                None => None,
            };
            Ok(Outcome {
                row,
                simulated,
                verdict: judge(row, simulated),
                emulated: emulated.cell(row.item).cloned(),
            })
        })
        .collect()
}

/// Each scenario's report, by key.
type Reports = BTreeMap<String, SimReport>;

fn report<'r>(reports: &'r Reports, key: &str) -> anyhow::Result<&'r SimReport> {
    reports.get(key).ok_or_else(|| anyhow!("no scenario {key}"))
}

/// Runs each scenario named once, on threads of their own (each run is deterministic, so
/// the order they finish in changes nothing).
fn run_all(keys: &[&str]) -> anyhow::Result<Reports> {
    let mut unique: Vec<&str> = keys.to_vec();
    unique.sort_unstable();
    unique.dedup();
    std::thread::scope(|scope| {
        let handles: Vec<_> = unique
            .iter()
            .map(|&key| (key, scope.spawn(move || run(key))))
            .collect();
        handles
            .into_iter()
            .map(|(key, h)| {
                let report = h.join().map_err(|_| anyhow!("scenario {key} panicked"))??;
                Ok((key.to_string(), report))
            })
            .collect()
    })
}

fn run(key: &str) -> anyhow::Result<SimReport> {
    let s = SCENARIOS
        .iter()
        .find(|s| s.key == key)
        .ok_or_else(|| anyhow!("no scenario {key}"))?;
    let scenario = flowlab_sim::load(s.text)
        .map_err(|e| anyhow!("{}", e.with_file(&format!("examples/sim/{key}.toml"))))?;
    Ok(flowlab_sim::run(&scenario, None))
}

fn read(report: &SimReport, p: &Probe) -> anyhow::Result<f64> {
    let missing = || anyhow!("{}: no run {} with {}", p.scenario, p.run, p.name);
    let run = report.runs.get(p.run).ok_or_else(missing)?;
    let flow = || {
        run.flows
            .iter()
            .find(|f| f.name == p.name)
            .ok_or_else(missing)
    };
    Ok(match p.metric {
        Metric::PortCellLossPercent => {
            let port = run
                .ports
                .iter()
                .find(|q| q.name == p.name)
                .ok_or_else(missing)?;
            100.0 * port.cells_dropped as f64 / port.cells_in.max(1) as f64
        }
        Metric::VcCellLossPercent(port) => {
            let vc = run
                .ports
                .iter()
                .find(|q| q.name == port)
                .and_then(|q| q.vcs.iter().find(|v| v.name == p.name))
                .ok_or_else(missing)?;
            100.0 * vc.cells_dropped as f64 / vc.cells_in.max(1) as f64
        }
        Metric::IpThroughputMbps => flow()?.throughput_bps / 1e6,
        Metric::GoodputMbps => flow()?.goodput_bps / 1e6,
        Metric::GoodputKbps => flow()?.goodput_bps / 1e3,
        Metric::RunGoodputKbps => {
            let delivered = flow()?.tcp.as_ref().ok_or_else(missing)?.delivered_bytes;
            delivered as f64 * 8e6 / run.duration_ns.max(1) as f64
        }
        Metric::LossPercent => flow()?.loss_ratio * 100.0,
        Metric::MaxDelayMs => flow()?.one_way_delay.as_ref().map_or(0.0, |d| d.max_ns) / 1e6,
        Metric::DelayVariationMs => flow()?.delay_variation_ns / 1e6,
        Metric::CellsPerPacket => flow()?.cells_per_packet.ok_or_else(missing)? as f64,
        Metric::TotalGoodputMbps => total_goodput_mbps(run),
        Metric::PeakTotalGoodputMbps => report
            .runs
            .iter()
            .map(total_goodput_mbps)
            .fold(0.0, f64::max),
        Metric::LosslessTotalGoodputMbps => report
            .runs
            .iter()
            .filter(|r| r.flows.iter().all(|f| f.loss_ratio == 0.0))
            .map(total_goodput_mbps)
            .fold(0.0, f64::max),
        Metric::LosslessKnee(xs) => lossless_knee(report, p.name, xs).ok_or_else(missing)?,
        Metric::LosslessFrom(xs) => lossless_from(report, p.name, xs).ok_or_else(missing)?,
        Metric::HostCpuPercent => {
            let host = run.hosts.iter().find(|h| h.name == p.name);
            100.0 * host.ok_or_else(missing)?.cpu_ratio
        }
        Metric::PacketsBeforeOverflow => {
            let buffer = flow()?.socket_buffer.as_ref().ok_or_else(missing)?;
            buffer.admitted_before_overflow.ok_or_else(missing)? as f64
        }
        Metric::RoundTripMs => round_trip_ms(run, p.name).ok_or_else(missing)?,
        Metric::RoundTripRiseMs(from, to) => {
            let at = |i: usize| report.runs.get(i).and_then(|r| round_trip_ms(r, p.name));
            at(to)
                .zip(at(from))
                .map(|(b, a)| b - a)
                .ok_or_else(missing)?
        }
        Metric::RoundTripAboveMs(other) => {
            let pair = round_trip_ms(run, p.name).zip(round_trip_ms(run, other));
            pair.map(|(a, b)| a - b).ok_or_else(missing)?
        }
    })
}

/// Flow `name`'s mean round trip in `run`, if it has echoes.
fn round_trip_ms(run: &flowlab_sim::RunReport, name: &str) -> Option<f64> {
    let flow = run.flows.iter().find(|f| f.name == name)?;
    Some(flow.receiver.round_trip.as_ref()?.mean_ns / 1e6)
}

/// Flow `p.name`'s socket buffer fill in the probe's run: (s, kB) at the end of each sample.
fn socket_fill(report: &SimReport, p: &Probe) -> anyhow::Result<Vec<(f64, f64)>> {
    let missing = || {
        anyhow!(
            "{}: no socket buffer of {} in run {}",
            p.scenario,
            p.name,
            p.run
        )
    };
    let run = report.runs.get(p.run).ok_or_else(missing)?;
    let flow = run.flows.iter().find(|f| f.name == p.name);
    let b = flow
        .and_then(|f| f.socket_buffer.as_ref())
        .ok_or_else(missing)?;
    Ok((b.fill_bytes.iter().enumerate())
        .map(|(i, &bytes)| {
            (
                (i + 1) as f64 * b.sample_ns as f64 / 1e9,
                bytes as f64 / 1e3,
            )
        })
        .collect())
}

fn total_goodput_mbps(run: &flowlab_sim::RunReport) -> f64 {
    run.flows.iter().map(|f| f.goodput_bps).sum::<f64>() / 1e6
}

/// The knee of a sweep: the last `xs[i]` before flow `name` first loses a packet (run `i`
/// at `xs[i]`); `None` if it lost packets in the first run.
fn lossless_knee(report: &SimReport, name: &str, xs: &[f64]) -> Option<f64> {
    report
        .runs
        .iter()
        .zip(xs)
        .take_while(|(run, _)| {
            run.flows
                .iter()
                .any(|f| f.name == name && f.loss_ratio == 0.0)
        })
        .map(|(_, &x)| x)
        .last()
}

/// Where a sweep starts to work: the first `xs[i]` from which flow `name` loses nothing in
/// run `i` and every later one; `None` if it lost packets in the last run.
fn lossless_from(report: &SimReport, name: &str, xs: &[f64]) -> Option<f64> {
    let lossless = |run: &flowlab_sim::RunReport| {
        run.flows
            .iter()
            .any(|f| f.name == name && f.loss_ratio == 0.0)
    };
    let runs = report.runs.iter().zip(xs).rev();
    runs.take_while(|(run, _)| lossless(run))
        .map(|(_, &x)| x)
        .last()
}

/// The verdict on `row` given flowlab's value.
pub fn judge(row: &Row, simulated: Option<f64>) -> Verdict {
    let Some(sim) = simulated else {
        return Verdict::NotReproduced;
    };
    let within = |ok: bool| {
        if ok {
            Verdict::Within
        } else {
            Verdict::Outside
        }
    };
    match (row.check, row.published) {
        (Check::Exact { decimals }, Published::Value(p)) => {
            let scale = 10f64.powi(decimals as i32);
            if (sim * scale).round() == (p * scale).round() {
                Verdict::Exact
            } else {
                Verdict::Differs
            }
        }
        (Check::Within(t), Published::Value(p)) => within((sim - p).abs() <= slack(t, p)),
        (Check::Within(t), Published::Range(lo, hi)) => {
            within(sim >= lo - slack(t, lo) && sim <= hi + slack(t, hi))
        }
        (Check::Ceiling, Published::Value(p)) => within(sim >= p),
        (Check::Starved, _) => within(sim < 10.0),
        (Check::Differs, _) => Verdict::Differs,
        _ => Verdict::NotReproduced,
    }
}

fn slack(t: Tolerance, published: f64) -> f64 {
    match t {
        Tolerance::Relative(f) => f * published.abs(),
        Tolerance::Absolute(a) => a,
    }
}

/// docs/reproductions.md and its plots, as `flowlab reproduce` writes them.
pub struct Document {
    pub markdown: String,
    /// Each figure's file name (without `.svg`) and SVG text.
    pub plots: Vec<(&'static str, String)>,
    pub outcomes: Vec<Outcome>,
}

/// Runs the rows and figures of `seeds` (all when empty), each scenario once, beside the
/// labs' values of `emulated`.
pub fn render(seeds: &[&str], emulated: &EmulatedData) -> anyhow::Result<Document> {
    let rows = chosen_rows(seeds, |_| true)?;
    let figures: Vec<&Figure> = FIGURES
        .iter()
        .filter(|f| seeds.is_empty() || seeds.contains(&f.seed))
        .collect();
    let keys: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.probe)
        .chain(
            figures
                .iter()
                .flat_map(|f| f.curve.probes().iter().copied()),
        )
        .map(|p| p.scenario)
        .collect();
    let reports = run_all(&keys)?;
    let outcomes = outcomes_of(rows, &reports, emulated)?;
    let plots = figures
        .iter()
        .map(|f| Ok((f.file, plot(f, &outcomes, curves(f.curve, &reports)?)?)))
        .collect::<anyhow::Result<_>>()?;
    Ok(Document {
        markdown: markdown(&outcomes, &figures, emulated),
        plots,
        outcomes,
    })
}

/// Writes the Markdown of `seeds` (all when empty) to `out` and each figure's SVG beside
/// it, in `reproductions/`, with the emulated values kept there (`emulated.json`); with
/// `emulate`, the labs of those seeds' rows are measured first and their values kept.
/// Returns the outcomes; an error, after writing, if an exact row no longer matches.
pub fn write(out: &Path, seeds: &[&str], emulate: bool) -> anyhow::Result<Vec<Outcome>> {
    let rows = chosen_rows(seeds, |_| true)?;
    let dir = out.parent().unwrap_or(Path::new(".")).join("reproductions");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let data_path = emulated::data_path(out);
    let mut data = EmulatedData::load(&data_path)?;
    let mut failures = Vec::new();
    if emulate {
        let plan = emulated::planned(|item| rows.iter().any(|r| r.item == item));
        let measured = emulated::measure(&plan, &Emulation::here()?, &mut |line| {
            eprintln!("flowlab reproduce: {line}")
        })?;
        data.merge(measured.data);
        data.save(&data_path)?;
        failures = measured.failures;
    }
    let doc = render(seeds, &data)?;
    for (file, svg) in &doc.plots {
        let path = dir.join(format!("{file}.svg"));
        std::fs::write(&path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    std::fs::write(out, &doc.markdown)
        .with_context(|| format!("cannot write {}", out.display()))?;
    let broken = doc
        .outcomes
        .iter()
        .filter(|o| matches!(o.row.check, Check::Exact { .. }) && o.verdict != Verdict::Exact);
    if let Some(o) = broken.into_iter().next() {
        bail!(
            "exact row no longer matches: seed {} {}",
            o.row.seed,
            o.row.item
        );
    }
    if !failures.is_empty() {
        bail!("not emulated, the rest written: {}", failures.join("; "));
    }
    Ok(doc.outcomes)
}

/// A labelled line of a plot.
pub type Line = (String, Vec<(f64, f64)>);

/// A figure's curves other than its rows', each with its label.
fn curves(curve: Curve, reports: &Reports) -> anyhow::Result<Vec<Line>> {
    let label = |p: &Probe, n: usize| match n {
        1 => SIMULATED.to_string(),
        _ => format!("flowlab: {}", p.name),
    };
    match curve {
        Curve::Rows => Ok(Vec::new()),
        Curve::Sweep(probes, xs) => probes
            .iter()
            .map(|p| {
                let points = sweep_curve(report(reports, p.scenario)?, p, xs)?;
                Ok((label(p, probes.len()), points))
            })
            .collect(),
        Curve::SocketFill(p) => {
            let points = socket_fill(report(reports, p.scenario)?, &p)?;
            Ok(vec![(label(&p, 1), points)])
        }
    }
}

/// The label of flowlab's curve when a figure has one.
const SIMULATED: &str = "flowlab (simulated)";

/// flowlab's value at each of the first runs of the probe's swept scenario.
fn sweep_curve(report: &SimReport, probe: &Probe, xs: &[f64]) -> anyhow::Result<Vec<(f64, f64)>> {
    xs.iter()
        .enumerate()
        .map(|(i, &x)| Ok((x, read(report, &Probe { run: i, ..*probe })?)))
        .collect()
}

/// The figure's published points (markers) over flowlab's curves (lines): `curves` if not
/// empty, else the simulated values of the figure's rows; the rows' emulated values as
/// markers too, where a lab measured them.
pub fn plot(figure: &Figure, outcomes: &[Outcome], curves: Vec<Line>) -> anyhow::Result<String> {
    let mut published = figure.marks.to_vec();
    let mut simulated = Vec::new();
    let mut emulated = Vec::new();
    for &(x, item) in figure.points {
        let Some(o) = outcomes.iter().find(|o| o.row.item == item) else {
            continue;
        };
        if let Published::Value(p) = o.row.published {
            published.push((x, p));
        }
        simulated.extend(o.simulated.map(|s| (x, s)));
        emulated.extend(o.emulated.as_ref().map(|e| (x, e.value)));
    }
    let curves = match curves.is_empty() {
        true => vec![(SIMULATED.to_string(), simulated)],
        false => curves,
    };
    let mut series = vec![Series {
        label: "published",
        points: published,
        joined: false,
    }];
    series.extend(curves.iter().map(|(label, points)| Series {
        label,
        points: points.clone(),
        joined: true,
    }));
    if !emulated.is_empty() {
        series.push(Series {
            label: "flowlab (emulated)",
            points: emulated,
            joined: false,
        });
    }
    overlay(figure.title, figure.x_label, figure.y_label, &series)
        .map_err(|e| anyhow!("plot {}: {e}", figure.file))
}

fn number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn signed(v: f64) -> String {
    if v > 0.0 {
        format!("+{}", number(v))
    } else {
        number(v)
    }
}

fn published_text(p: Published) -> String {
    match p {
        Published::Value(v) => number(v),
        Published::Range(lo, hi) => format!("{} – {}", number(lo), number(hi)),
        Published::Text(t) => t.to_string(),
    }
}

/// A value's difference from the published number (from the nearer bound of an interval).
fn difference(value: Option<f64>, published: Published) -> String {
    match (value, published) {
        (Some(s), Published::Value(p)) => signed(s - p),
        (Some(s), Published::Range(lo, _)) if s < lo => signed(s - lo),
        (Some(s), Published::Range(_, hi)) if s > hi => signed(s - hi),
        (Some(_), Published::Range(..)) => "0 (inside)".into(),
        _ => "–".into(),
    }
}

/// The emulated cell: the lab's value and its difference from the published one; `not
/// run` where a lab answers the row but has not measured it, `no lab` where none does.
fn emulated_cell(o: &Outcome) -> String {
    match &o.emulated {
        Some(c) => {
            let value = match difference(Some(c.value), o.row.published) {
                d if d == "–" => number(c.value),
                d => format!("{} ({d})", number(c.value)),
            };
            match (c.runs.first(), c.runs.last()) {
                (Some(lo), Some(hi)) => format!(
                    "{value}, median of {}: {}–{}",
                    c.runs.len(),
                    number(*lo),
                    number(*hi)
                ),
                _ => value,
            }
        }
        None if emulated_probes().any(|p| p.item == o.row.item) => "not run".into(),
        None => "no lab".into(),
    }
}

fn markdown(outcomes: &[Outcome], figures: &[&Figure], emulated: &EmulatedData) -> String {
    let mut md = String::from(HEADER);
    md.push('\n');
    md.push_str(&summary(outcomes));
    md.push_str(&lab_runs(emulated));
    for seed in SEEDS {
        let rows: Vec<&Outcome> = outcomes.iter().filter(|o| o.row.seed == seed).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(md, "## Seed {seed}: {}\n", seed_title(seed));
        md.push_str("| table or figure | unit | published | simulated | emulated | difference | verdict | explanation |\n");
        md.push_str("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
        for o in rows {
            let sim = o.simulated.map_or("–".into(), number);
            let source = o.row.probe.map_or(String::new(), |p| {
                let run = match p.metric.spans_runs() {
                    true => "every run".to_string(),
                    false => format!("run {}", p.run),
                };
                format!(" (`{}` {run}, {})", p.scenario, p.name)
            });
            let _ = writeln!(
                md,
                "| {} | {} | {} | {sim}{source} | {} | {} | {} | {} |",
                o.row.item,
                o.row.unit,
                published_text(o.row.published),
                emulated_cell(o),
                difference(o.simulated, o.row.published),
                o.verdict.text(),
                o.row.explanation
            );
        }
        for f in figures.iter().filter(|f| f.seed == seed) {
            let _ = writeln!(md, "\n![{}](reproductions/{}.svg)", f.title, f.file);
        }
        md.push('\n');
    }
    md
}

/// The labs that answer rows: what each runs, and when it was measured.
fn lab_runs(emulated: &EmulatedData) -> String {
    let mut md = String::from(
        "| lab (examples/lab) | experiment (examples/experiments) | run from | trials | measured (UTC) | load average | emulator's release error, p99 / max | rows |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for run in LAB_RUNS {
        let rows = emulated_probes().filter(|p| p.run == run.key).count();
        let measured = emulated.run(run.key);
        let _ = writeln!(
            md,
            "| `{}` | `{}` | {} | {} | {} | {} | {} | {rows} |",
            run.lab_file,
            run.experiment_file,
            run.controller,
            run.trials,
            measured.map_or("not run", |m| &m.measured),
            measured
                .and_then(|m| m.load_average)
                .map_or("–".into(), |l| format!("{l:.1}")),
            measured
                .and_then(|m| m.release_error_us)
                .map_or("–".into(), |e| format!(
                    "{} / {}",
                    flowlab_units::format_duration_ns(e.p99 * 1e3),
                    flowlab_units::format_duration_ns(e.max * 1e3)
                )),
        );
    }
    md.push('\n');
    md
}

/// Rows by seed and verdict.
fn summary(outcomes: &[Outcome]) -> String {
    const VERDICTS: [Verdict; 5] = [
        Verdict::Exact,
        Verdict::Differs,
        Verdict::Within,
        Verdict::Outside,
        Verdict::NotReproduced,
    ];
    let mut md = String::from("| seed | rows |");
    for v in VERDICTS {
        let _ = write!(md, " {} |", v.text());
    }
    md.push_str("\n| --- | --- |");
    md.push_str(&" --- |".repeat(VERDICTS.len()));
    md.push('\n');
    for seed in SEEDS {
        let rows: Vec<&Outcome> = outcomes.iter().filter(|o| o.row.seed == seed).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = write!(md, "| {seed} | {} |", rows.len());
        for v in VERDICTS {
            let _ = write!(md, " {} |", rows.iter().filter(|o| o.verdict == v).count());
        }
        md.push('\n');
    }
    md.push('\n');
    md
}

fn seed_title(seed: &str) -> &'static str {
    match seed {
        "000" => "LEVERAGE, native ATM and TCP/IP on Windows 95 PCs over ATM25",
        "001" => "MAY, transatlantic ATM field trial (Classical IP, 190 ms PVCs)",
        "002" => "BAGNet, heavy load emulated by recirculating cells",
        "003" => "AAI, performance experiences in a wide-area ATM network",
        _ => "AQUILA, ATM against IP QoS over an E1 bottleneck",
    }
}

const HEADER: &str = "# Reproductions of the seed papers

Generated by `flowlab reproduce` (`crates/runner/src/reproduce.rs`; published numbers in
`reproduce/published.rs`, each cited by table, figure or section); do not edit by hand.
Every simulated value is run now, in virtual time, through a scenario under `examples/sim/`
that `flowlab sim` runs as well (the row names the file, the sweep run and the flow or port).

Verdicts:
- **exact**: a figure that follows from link rates, encapsulation and contract definitions,
  equal at the published digits. `flowlab reproduce` fails if one of them stops matching.
- **within / outside tolerance**: host- or load-dependent figures, compared within 10 % of
  the published value (confidence intervals: of their bounds), loss ratios under emulated
  load within 10 percentage points; the explanation says what flowlab does not model.
- **differs**: an exact figure flowlab computes otherwise, with the reason.
- **not reproduced**: flowlab has no number to set beside the published one, or the paper
  gives only a curve; the row stays, with the reason.

The document is the same on every run (the simulator is deterministic); a scenario's file
says which of its parameters the paper gives and which it chooses.

Emulated: the seeds' testbeds that are labs (`examples/lab`, with twins in `examples/sim`;
docs/emulation.md) answer some rows through real sockets and flowlab's emulator, which runs
the simulator's link models in real time. `flowlab reproduce --emulated` (root: it brings
each lab up in network namespaces, runs its experiment from a host inside it, and takes it
down; a few minutes) measures them and keeps the values in `reproductions/emulated.json`,
which every `flowlab reproduce` reads, so this document regenerates without root. The
emulated cell is the lab's value with its difference from the published one; `not run`
where a lab answers the row but has not measured it, `no lab` where none does: seed 000's
PCs and seed 003's wide-area testbed have no lab, and the AQUILA labs carry only the premium
flow #1 (flows #2 to #4 ran on VCs shaped to 100 kbit/s each, which a lab's VCs are not).
Trials are short (below); the table says when each lab ran and how busy the machine was.
It also gives the emulator's own error in each run (release time less the model's
departure time, in the direction where it was worst). A lab's maximum and peak-to-peak
delays hold the worst of it, which is most of what seed 004's emulated ATM rows add to the
simulated ones. Where the emulator is late, as at seed 002's four loaded OC-3c links, it
bunches the loads' frames into bursts at the port, which lose more cells there than the
paper's loops did while the probes between them lose fewer.
";
