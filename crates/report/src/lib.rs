//! Turning stored runs into knowledge: statistics over repetitions (mean, standard deviation,
//! 95 % confidence intervals), plots (SVG or PNG), and one self-contained HTML report per run.

pub mod axis;
pub mod figure;
pub mod html;
pub mod metrics;
pub mod overlay;
pub mod plot;
pub mod stats;

use std::collections::BTreeMap;

use flowlab_store::{plain, Run, Store};
use serde_json::Value;

pub use axis::Scale;
pub use figure::{Figure, Format};
pub use metrics::{describe, Metric, Unit};
pub use plot::Scales;
pub use stats::{estimate, until_ci, Estimate};

/// Why a plot or report could not be made, in one line.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("the run has no metric '{name}'; it has: {available}")]
    NoSuchMetric { name: String, available: String },
    #[error("the run has no parameter '{name}'; its points vary: {available}")]
    NoSuchParam { name: String, available: String },
    #[error("parameter '{name}' is not numeric ('{value}'): use it with --by instead of --x")]
    NotNumeric { name: String, value: String },
    #[error("{0}")]
    NoData(String),
    #[error("cannot draw the plot: {0}")]
    Plot(String),
    #[error(transparent)]
    Store(#[from] flowlab_store::StoreError),
}

/// What to plot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// y against a swept x with CI error bars, one line per `by` group.
    Lines,
    /// Per-interval values over time.
    TimeSeries,
    /// Packet delay histogram.
    Histogram,
    /// Packet delay CDF.
    Cdf,
    /// Lost packets against packet index.
    LossIndex,
    /// Packet delay against send time.
    DelayTime,
}

impl PlotKind {
    /// Every kind, by the name people type and with what it shows.
    pub const ALL: [(PlotKind, &'static str, &'static str); 6] = [
        (
            PlotKind::Lines,
            "lines",
            "Metric means against a swept parameter, 95 % confidence intervals as error bars",
        ),
        (
            PlotKind::TimeSeries,
            "timeseries",
            "Per-interval values over time (tests run with --interval)",
        ),
        (
            PlotKind::Histogram,
            "histogram",
            "Packet delay histogram (runs with a packet log)",
        ),
        (PlotKind::Cdf, "cdf", "Packet delay CDF"),
        (
            PlotKind::LossIndex,
            "loss-index",
            "Lost packets against packet index",
        ),
        (
            PlotKind::DelayTime,
            "delay-time",
            "Packet delay against send time",
        ),
    ];
}

impl std::str::FromStr for PlotKind {
    type Err = String;

    fn from_str(name: &str) -> Result<PlotKind, String> {
        let known = PlotKind::ALL.iter().find(|(_, n, _)| *n == name);
        known.map(|(kind, _, _)| *kind).ok_or_else(|| {
            let names: Vec<&str> = PlotKind::ALL.iter().map(|(_, n, _)| *n).collect();
            format!("unknown plot kind '{name}' (expected {})", names.join(", "))
        })
    }
}

/// A plot request, as `flowlab plot` takes it.
#[derive(Debug, Clone)]
pub struct PlotRequest {
    pub kind: PlotKind,
    /// Swept parameter on the x axis (Lines); default: the first numeric swept parameter.
    pub x: Option<String>,
    /// Metrics (names or aliases like `rtt`, `loss`, `cpu`).
    pub ys: Vec<String>,
    /// Parameters whose combinations make separate lines.
    pub by: Vec<String>,
    /// Which point's packet log (index in the run); default: the first that has one.
    pub point: Option<usize>,
    /// Linear, log, or chosen from the data (log past a decade).
    pub scales: Scales,
}

/// Parameters whose value differs between points of a run, in first-seen order.
pub fn swept_params(run: &Run) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for p in &run.points {
        if let Value::Object(m) = &p.params {
            for k in m.keys() {
                if !keys.contains(k) {
                    keys.push(k.clone());
                }
            }
        }
    }
    keys.retain(|k| {
        let first = run.points.first().and_then(|p| p.params.get(k));
        run.points.iter().any(|p| p.params.get(k) != first)
    });
    keys
}

/// One plot of a stored run, to draw as SVG (`Figure::svg`) or PNG (`Figure::png`).
pub fn plot(store: &Store, run: &Run, req: &PlotRequest) -> Result<Figure, ReportError> {
    let scales = req.scales;
    match req.kind {
        PlotKind::Lines => {
            let x = match &req.x {
                Some(x) => x.clone(),
                None => default_x(run)?,
            };
            plot::lines(run, &x, &default_ys(&req.ys), &req.by, scales)
        }
        PlotKind::TimeSeries => {
            let ys = if req.ys.is_empty() {
                vec!["goodput_bps".to_string()]
            } else {
                req.ys.clone()
            };
            plot::timeseries(run, &ys, scales)
        }
        kind => {
            let (title, packets) = packets_of(store, run, req.point)?;
            match kind {
                PlotKind::Histogram => plot::histogram(&packets, &title, scales),
                PlotKind::Cdf => plot::cdf(&packets, &title, scales),
                PlotKind::LossIndex => plot::loss_index(&packets, &title),
                _ => plot::delay_time(&packets, &title, scales),
            }
        }
    }
}

fn default_ys(ys: &[String]) -> Vec<String> {
    if ys.is_empty() {
        vec!["rtt".into(), "loss".into()]
    } else {
        ys.to_vec()
    }
}

fn default_x(run: &Run) -> Result<String, ReportError> {
    let swept = swept_params(run);
    swept
        .iter()
        .find(|k| {
            run.points
                .iter()
                .all(|p| p.params.get(k.as_str()).and_then(plot::as_number).is_some())
        })
        .cloned()
        .ok_or_else(|| ReportError::NoSuchParam {
            name: "(--x)".into(),
            available: if swept.is_empty() {
                "nothing (a single point: try --kind timeseries or histogram)".into()
            } else {
                swept.join(", ")
            },
        })
}

/// The packet log of the chosen point (or the first point that has one), with its label.
pub fn packets_of(
    store: &Store,
    run: &Run,
    point: Option<usize>,
) -> Result<(String, Vec<flowlab_results::PacketRecord>), ReportError> {
    let chosen = match point {
        Some(i) => run.points.get(i).ok_or_else(|| {
            ReportError::NoData(format!(
                "the run has no point {i}; it has {} (0 to {})",
                run.points.len(),
                run.points.len().saturating_sub(1)
            ))
        })?,
        None => run.points.iter().find(|p| p.packets > 0).ok_or_else(|| {
            ReportError::NoData("the run has no packet log (record one with --packet-log)".into())
        })?,
    };
    let packets = store.load_packets(chosen.id)?;
    Ok((
        format!(
            "run {} {}",
            run.info.id,
            plot::point_label(&chosen.params, chosen.repetition)
        ),
        packets,
    ))
}

/// One row of a summary table: a point's parameters and each metric over its repetitions.
#[derive(Debug, Clone)]
pub struct PointStats {
    pub params: Value,
    pub estimates: Vec<(String, Estimate)>,
}

/// Groups a run's points by parameters (repetitions pooled) and estimates each of `names`
/// (all metrics when empty), in first-seen order of the points.
pub fn aggregate(run: &Run, names: &[String]) -> Vec<PointStats> {
    let names: Vec<String> = if names.is_empty() {
        run.metric_names()
    } else {
        names.to_vec()
    };
    let mut order: Vec<String> = Vec::new();
    // Each group: its parameters and the flat metrics of each of its repetitions.
    let mut groups: BTreeMap<String, (Value, stats::Repetitions)> = BTreeMap::new();
    for p in &run.points {
        let key = p.params.to_string();
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        let entry = groups
            .entry(key)
            .or_insert_with(|| (p.params.clone(), Vec::new()));
        entry.1.push(&p.metrics);
    }
    // Rows in parameter order (numbers numerically), not run order: shuffled sweeps read the same.
    let swept = swept_params(run);
    let mut rows: Vec<(Value, stats::Repetitions)> = order
        .into_iter()
        .filter_map(|k| groups.remove(&k))
        .collect();
    rows.sort_by(|a, b| {
        swept
            .iter()
            .map(|k| compare_values(a.0.get(k), b.0.get(k)))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows.into_iter()
        .map(|(params, repetitions)| PointStats {
            params,
            estimates: names
                .iter()
                .filter_map(|n| Some((n.clone(), stats::estimate_metric(n, &repetitions)?)))
                .collect(),
        })
        .collect()
}

fn compare_values(a: Option<&Value>, b: Option<&Value>) -> std::cmp::Ordering {
    match (a.and_then(plot::as_number), b.and_then(plot::as_number)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => a.map(plain).cmp(&b.map(plain)),
    }
}

/// A plain-text table: one row per point, `mean ± half-width` per metric.
pub fn text_table(run: &Run, names: &[String]) -> String {
    let rows = aggregate(run, names);
    let swept = swept_params(run);
    let names: Vec<String> = if names.is_empty() {
        run.metric_names()
    } else {
        names.to_vec()
    };
    let mut table: Vec<Vec<String>> = vec![swept
        .iter()
        .cloned()
        .chain(names.iter().cloned())
        .chain(["n".into()])
        .collect()];
    for r in &rows {
        let mut row: Vec<String> = swept
            .iter()
            .map(|k| r.params.get(k).map(plain).unwrap_or_default())
            .collect();
        let mut n = 0;
        for name in &names {
            row.push(match r.estimates.iter().find(|(k, _)| k == name) {
                Some((_, e)) => {
                    n = n.max(e.n);
                    fmt_estimate(e)
                }
                None => "-".into(),
            });
        }
        row.push(n.to_string());
        table.push(row);
    }
    let widths: Vec<usize> = (0..table[0].len())
        .map(|c| {
            table
                .iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(s, w)| format!("{s:>w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    if let Some(note) = interval_note(&rows) {
        out.push_str(&note);
        out.push('\n');
    }
    out
}

/// A figure with its interval: `mean ± half-width` when the interval is symmetric,
/// `mean (low–high)` when not, the bare mean when there is none.
pub fn fmt_estimate(e: &Estimate) -> String {
    match e.method {
        stats::Method::None => fmt_num(e.mean),
        m if m.symmetric() => format!("{} ± {}", fmt_num(e.mean), fmt_num(e.half_width())),
        _ => format!(
            "{} ({}–{})",
            fmt_num(e.mean),
            fmt_num(e.ci_low),
            fmt_num(e.ci_high)
        ),
    }
}

/// Which interval each metric of `rows` used, e.g. "95 % intervals: Wilson on pooled counts
/// (loss_pct); Student t (rtt_mean_us)"; `None` when no row has an interval.
pub fn interval_note(rows: &[PointStats]) -> Option<String> {
    interval_note_naming(rows, &|name| name.to_string())
}

/// `interval_note` with each metric called what `call` says (its label, in reports). Each
/// metric is named once: one whose Student t interval was cut at its range in only some rows
/// is listed as such, not under both kinds of interval.
pub fn interval_note_naming(rows: &[PointStats], call: &dyn Fn(&str) -> String) -> Option<String> {
    let mut by_kind: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, methods) in methods_by_metric(rows) {
        let kind = match methods.as_slice() {
            [stats::Method::StudentT, stats::Method::StudentTCut]
            | [stats::Method::StudentTCut, stats::Method::StudentT] => {
                "Student t, cut at the range in some rows"
            }
            [only] => only.name(),
            _ => "several kinds",
        };
        match by_kind.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, names)) => names.push(name),
            None => by_kind.push((kind, vec![name])),
        }
    }
    if by_kind.is_empty() {
        return None;
    }
    let parts: Vec<String> = by_kind
        .iter()
        .map(|(kind, names)| {
            let called: Vec<String> = names.iter().map(|n| call(n)).collect();
            format!("{kind} ({})", called.join(", "))
        })
        .collect();
    Some(format!("95 % intervals: {}", parts.join("; ")))
}

/// Each metric of `rows` with an interval, in order of appearance, and the kinds of
/// interval its rows used.
fn methods_by_metric(rows: &[PointStats]) -> Vec<(&str, Vec<stats::Method>)> {
    let mut metrics: Vec<(&str, Vec<stats::Method>)> = Vec::new();
    for (name, e) in rows.iter().flat_map(|r| &r.estimates) {
        if e.method == stats::Method::None {
            continue;
        }
        match metrics.iter_mut().find(|(n, _)| *n == name.as_str()) {
            Some((_, methods)) if methods.contains(&e.method) => {}
            Some((_, methods)) => methods.push(e.method),
            None => metrics.push((name, vec![e.method])),
        }
    }
    metrics
}

/// A number with about 4 significant digits, without exponent for everyday magnitudes.
pub fn fmt_num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if !(1e-3..1e9).contains(&a) {
        return format!("{v:.3e}");
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests;
