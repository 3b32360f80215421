//! `flowlab reproduce`: the seed papers' published numbers beside flowlab's, run now in
//! virtual time through the example scenarios (examples/sim/, embedded so the command runs
//! anywhere), written as docs/reproductions.md with SVG plots of the figures.

mod published;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, bail, Context};
use flowlab_report::overlay::{overlay, Series};
use flowlab_sim::SimReport;

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
    LossPercent,
    MaxDelayMs,
    DelayVariationMs,
    CellsPerPacket,
    /// Cells dropped over cells offered at the port `name`.
    PortCellLossPercent,
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
    /// flowlab's curve from every run of a swept scenario (the `run` of the probe ignored),
    /// at these x values in sweep order; without it, the curve joins the rows' values.
    pub sweep: Option<(Probe, &'static [f64])>,
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

/// A row with flowlab's value now.
pub struct Outcome {
    pub row: &'static Row,
    pub simulated: Option<f64>,
    pub verdict: Verdict,
}

/// Which rows to run: the rows of the seeds named (all when empty) that pass `filter`.
pub fn outcomes(seeds: &[&str], filter: impl Fn(&Row) -> bool) -> anyhow::Result<Vec<Outcome>> {
    if let Some(bad) = seeds.iter().find(|s| !SEEDS.contains(s)) {
        bail!("unknown seed {bad}: expected one of {}", SEEDS.join(", "));
    }
    let rows: Vec<&'static Row> = ROWS
        .iter()
        .filter(|r| seeds.is_empty() || seeds.contains(&r.seed))
        .filter(|r| filter(r))
        .collect();
    let mut reports = BTreeMap::new();
    for probe in rows.iter().filter_map(|r| r.probe) {
        if !reports.contains_key(probe.scenario) {
            reports.insert(probe.scenario, run(probe.scenario)?);
        }
    }
    rows.into_iter()
        .map(|row| {
            let simulated = match row.probe {
                Some(p) => Some(read(&reports[p.scenario], &p)?),
                None => None,
            };
            Ok(Outcome {
                row,
                simulated,
                verdict: judge(row, simulated),
            })
        })
        .collect()
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
        Metric::IpThroughputMbps => flow()?.throughput_bps / 1e6,
        Metric::GoodputMbps => flow()?.goodput_bps / 1e6,
        Metric::GoodputKbps => flow()?.goodput_bps / 1e3,
        Metric::LossPercent => flow()?.loss_ratio * 100.0,
        Metric::MaxDelayMs => flow()?.one_way_delay.as_ref().map_or(0.0, |d| d.max_ns) / 1e6,
        Metric::DelayVariationMs => flow()?.delay_variation_ns / 1e6,
        Metric::CellsPerPacket => flow()?.cells_per_packet.ok_or_else(missing)? as f64,
    })
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

/// Runs the rows of `seeds` (all when empty) and writes the Markdown to `out` and each
/// figure's SVG beside it, in `reproductions/`. Returns the outcomes; an error, after
/// writing, if an exact row no longer matches.
pub fn write(out: &Path, seeds: &[&str]) -> anyhow::Result<Vec<Outcome>> {
    let started = std::time::Instant::now();
    let outcomes = outcomes(seeds, |_| true)?;
    let dir = out.parent().unwrap_or(Path::new(".")).join("reproductions");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut figures = Vec::new();
    for figure in FIGURES
        .iter()
        .filter(|f| seeds.is_empty() || seeds.contains(&f.seed))
    {
        let path = dir.join(format!("{}.svg", figure.file));
        let curve = match figure.sweep {
            Some((probe, xs)) => sweep_curve(&probe, xs)?,
            None => Vec::new(),
        };
        std::fs::write(&path, plot(figure, &outcomes, curve)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        figures.push(figure);
    }
    let text = markdown(&outcomes, &figures, started.elapsed().as_secs());
    std::fs::write(out, text).with_context(|| format!("cannot write {}", out.display()))?;
    let broken = outcomes
        .iter()
        .filter(|o| matches!(o.row.check, Check::Exact { .. }) && o.verdict != Verdict::Exact);
    if let Some(o) = broken.into_iter().next() {
        bail!(
            "exact row no longer matches: seed {} {}",
            o.row.seed,
            o.row.item
        );
    }
    Ok(outcomes)
}

/// flowlab's value at each run of the probe's swept scenario.
fn sweep_curve(probe: &Probe, xs: &[f64]) -> anyhow::Result<Vec<(f64, f64)>> {
    let report = run(probe.scenario)?;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| Ok((x, read(&report, &Probe { run: i, ..*probe })?)))
        .collect()
}

/// The figure's published points (markers) over flowlab's curve (a line): `curve` if not
/// empty, else the simulated values of the figure's rows.
pub fn plot(
    figure: &Figure,
    outcomes: &[Outcome],
    mut curve: Vec<(f64, f64)>,
) -> anyhow::Result<String> {
    let mut published = Vec::new();
    let mut simulated = Vec::new();
    for &(x, item) in figure.points {
        let Some(o) = outcomes.iter().find(|o| o.row.item == item) else {
            continue;
        };
        if let Published::Value(p) = o.row.published {
            published.push((x, p));
        }
        simulated.extend(o.simulated.map(|s| (x, s)));
    }
    if !curve.is_empty() {
        simulated = std::mem::take(&mut curve);
    }
    let series = [
        Series {
            label: "published",
            points: published,
            joined: false,
        },
        Series {
            label: "flowlab (simulated)",
            points: simulated,
            joined: true,
        },
    ];
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

fn difference(o: &Outcome) -> String {
    match (o.simulated, o.row.published) {
        (Some(s), Published::Value(p)) => signed(s - p),
        (Some(s), Published::Range(lo, _)) if s < lo => signed(s - lo),
        (Some(s), Published::Range(_, hi)) if s > hi => signed(s - hi),
        (Some(_), Published::Range(..)) => "0 (inside)".into(),
        _ => "–".into(),
    }
}

fn markdown(outcomes: &[Outcome], figures: &[&Figure], seconds: u64) -> String {
    let mut md = String::from(HEADER);
    let _ = writeln!(md, "\nThis run took {seconds} s.\n");
    md.push_str(&summary(outcomes));
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
                format!(" (`{}` run {}, {})", p.scenario, p.run, p.name)
            });
            let _ = writeln!(
                md,
                "| {} | {} | {} | {sim}{source} | not run | {} | {} | {} |",
                o.row.item,
                o.row.unit,
                published_text(o.row.published),
                difference(o),
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
- **not reproduced**: no scenario answers the number yet; the row stays, with the reason.

Emulated: no lab file reproduces these testbeds yet, so the emulated column says `not run`
(the emulator's link models are the simulator's, `crates/link`).
";
