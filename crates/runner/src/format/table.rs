//! The metrics table of `flowlab show` and `flowlab sweep`: one row per point (repetitions
//! pooled), its columns grouped (throughput, loss, delay, CPU), each headed by the metric
//! table's label (`flowlab_report::describe`) and its values in SI units with the column's
//! unit under the label, and wrapped to 80 columns: a group too wide for one table continues
//! in another, each repeating the swept parameters.

use flowlab_report::stats::Method;
use flowlab_report::{describe, Estimate, Metric, PointStats, Unit};
use flowlab_spec::{Param, ValueKind};
use flowlab_store::{plain, Run};

use flowlab_units::fit::{wrap, wrap_to, WIDTH};

/// The column groups, in the order they print.
const GROUPS: [&str; 4] = ["throughput", "loss", "delay", "CPU"];

fn group_of(name: &str) -> &'static str {
    let unit = describe(name).unit;
    if name.contains("cpu") {
        "CPU"
    } else if unit == Unit::Seconds {
        "delay"
    } else if matches!(unit, Unit::BitsPerSec | Unit::PerSec | Unit::Bytes)
        || matches!(
            name,
            "packets_sent" | "packets_received" | "transactions" | "echoes"
        )
    {
        "throughput"
    } else {
        "loss"
    }
}

/// The statistics of a distribution in reading order: `rtt_min_us` before `rtt_mean_us`.
const STATS: [&str; 8] = ["min", "mean", "p50", "p90", "p99", "p999", "max", "stddev"];

/// Orders a group's metrics: each distribution's statistics together, in [`STATS`] order.
fn reading_order(name: &str) -> (String, usize) {
    let stem = name.strip_suffix("_us").unwrap_or(name);
    STATS
        .iter()
        .enumerate()
        .find_map(|(rank, stat)| {
            let prefix = stem.strip_suffix(stat)?.strip_suffix('_')?;
            Some((prefix.to_string(), rank))
        })
        .unwrap_or((name.to_string(), 0))
}

/// A column's divisor and unit for values in `unit` (seconds, bit/s, ...): the SI prefix that
/// puts its largest value in [1, 1000). A column of zeros keeps the prefix `stored` (the
/// stored number's unit, 1e-6 for µs) names.
fn column_scale(unit: Unit, largest: f64, stored: f64) -> (f64, String) {
    // The first prefix as a power of 1000: nanoseconds are 1000^-3 s.
    let (first, prefixes, symbol): (i32, &[&str], &str) = match unit {
        Unit::Percent => return (1.0, "%".into()),
        Unit::Plain => return (1.0, String::new()),
        Unit::Seconds => (-3, &["n", "µ", "m", ""], "s"),
        Unit::BitsPerSec => (0, &["", "k", "M", "G", "T"], "bit/s"),
        Unit::PerSec => (0, &["", "k", "M", "G", "T"], "/s"),
        Unit::Bytes => (0, &["", "k", "M", "G", "T"], "B"),
        // Counts below a million read best whole.
        Unit::Count if largest < 1e6 => return (1.0, String::new()),
        Unit::Count => (0, &["", "k", "M", "G", "T"], ""),
    };
    let divisor = |step: usize| 1000f64.powi(first + step as i32);
    let floor = if largest == 0.0 { stored } else { 0.0 };
    let mut step = 0;
    while step + 1 < prefixes.len()
        && (largest.abs() / divisor(step) >= 1000.0 || divisor(step) < floor * 0.999)
    {
        step += 1;
    }
    (divisor(step), format!("{}{symbol}", prefixes[step]))
}

/// About 3 significant digits, at most 3 decimals; whole counts without decimals.
fn number(v: f64, whole: bool) -> String {
    if whole && v.fract() == 0.0 {
        return format!("{v:.0}");
    }
    let magnitude = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    let decimals = (2 - magnitude).clamp(0, 3) as usize;
    let text = format!("{v:.decimals$}");
    // 0.9996 rounds up to 1.000: a decimal fewer keeps 3 significant digits.
    let next_power = 10f64.powi(magnitude + 1);
    match text.parse::<f64>() {
        Ok(r) if decimals > 0 && decimals as i32 == 2 - magnitude && r.abs() >= next_power => {
            format!("{v:.prec$}", prec = decimals - 1)
        }
        _ => text,
    }
}

/// A figure with its interval, scaled: `2.00 ± 0.05`, or `2.00 (1.90–2.15)` when asymmetric.
fn cell(e: &Estimate, divisor: f64, whole: bool) -> String {
    let f = |v: f64| number(v / divisor, whole);
    match e.method {
        Method::None => f(e.mean),
        m if m.symmetric() => format!(
            "{} ± {}",
            f(e.mean),
            number(e.half_width() / divisor, false)
        ),
        _ => format!("{} ({}–{})", f(e.mean), f(e.ci_low), f(e.ci_high)),
    }
}

/// A column's label is wrapped to its cells' width, but no narrower than this.
const LABEL_WIDTH: usize = 16;

/// One column: its label (wrapped over as many lines as it needs), its unit and its cells,
/// one per row.
pub(super) struct Column {
    pub label: Vec<String>,
    pub unit: String,
    pub cells: Vec<String>,
}

impl Column {
    /// A column headed by `label`, wrapped at spaces to the width of its cells.
    pub fn new(label: &str, unit: String, cells: Vec<String>) -> Column {
        let widest = |texts: &[String]| texts.iter().map(|t| t.chars().count()).max();
        let width = widest(&cells).unwrap_or(0).max(LABEL_WIDTH);
        Column {
            label: wrap_to(label, width),
            unit,
            cells,
        }
    }

    fn width(&self) -> usize {
        (self.label.iter().chain([&self.unit]).chain(&self.cells))
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
    }
}

/// A column of plain figures in `unit`, scaled to one SI prefix named in its header; `-` where
/// a figure is missing.
pub(super) fn value_column(label: &str, unit: Unit, values: &[Option<f64>]) -> Column {
    let largest = values.iter().flatten().map(|v| v.abs()).fold(0.0, f64::max);
    let (divisor, symbol) = column_scale(unit, largest, 1.0);
    let whole = unit == Unit::Count && divisor == 1.0;
    let cells = (values.iter())
        .map(|v| v.map_or("-".into(), |v| number(v / divisor, whole)))
        .collect();
    Column::new(label, symbol, cells)
}

fn metric_column(name: &str, rows: &[PointStats]) -> Column {
    let metric = describe(name);
    let estimate = |r: &PointStats| {
        let (_, e) = r.estimates.iter().find(|(k, _)| k == name)?;
        Some(Estimate {
            mean: e.mean * metric.scale,
            ci_low: e.ci_low * metric.scale,
            ci_high: e.ci_high * metric.scale,
            ..*e
        })
    };
    let largest = rows
        .iter()
        .filter_map(estimate)
        .map(|e| e.mean.abs())
        .fold(0.0, f64::max);
    let (divisor, symbol) = column_scale(metric.unit, largest, metric.scale);
    let whole = metric.unit == Unit::Count && divisor == 1.0;
    let cells = rows
        .iter()
        .map(|r| estimate(r).map_or("-".into(), |e| cell(&e, divisor, whole)))
        .collect();
    Column::new(&metric.label, symbol, cells)
}

/// A swept parameter's unit when its values are numbers: a rate in SI units, sizes in whole
/// bytes and durations in seconds (as stored), a metric as the metric table says
/// (`offered_bps`); the symbol, when not the unit's own.
fn key_unit(name: &str) -> Option<(Unit, &'static str)> {
    match name.parse::<Param>().map(Param::kind) {
        Ok(ValueKind::Rate) => Some((Unit::BitsPerSec, "")),
        Ok(ValueKind::Bytes) => Some((Unit::Count, "B")),
        Ok(ValueKind::Duration) => Some((Unit::Count, "s")),
        _ => {
            Some((describe(name).unit, "")).filter(|(u, _)| !matches!(u, Unit::Count | Unit::Plain))
        }
    }
}

/// A swept parameter's column: in its unit (see [`key_unit`]) when every value is a number,
/// else as stored.
fn key_column(name: &str, rows: &[PointStats]) -> Column {
    let numbers: Option<Vec<Option<f64>>> = (rows.iter())
        .map(|r| {
            r.params
                .get(name)
                .map(|v| v.as_f64().map(Some))
                .unwrap_or(Some(None))
        })
        .collect();
    let Metric { label, scale, .. } = describe(name);
    match (numbers, key_unit(name)) {
        (Some(values), Some((unit, symbol))) => {
            let values: Vec<Option<f64>> = values.iter().map(|v| v.map(|v| v * scale)).collect();
            let mut column = value_column(&label, unit, &values);
            if !symbol.is_empty() {
                column.unit = symbol.into();
            }
            column
        }
        _ => {
            let cells = (rows.iter())
                .map(|r| r.params.get(name).map(plain).unwrap_or_default())
                .collect();
            Column::new(&label, String::new(), cells)
        }
    }
}

/// The columns that name each row: the swept parameters, and `n` when points were repeated.
fn key_columns(run: &Run, rows: &[PointStats]) -> Vec<Column> {
    let mut keys: Vec<Column> = flowlab_report::swept_params(run)
        .into_iter()
        .map(|k| key_column(&k, rows))
        .collect();
    let n: Vec<usize> = rows
        .iter()
        .map(|r| r.estimates.iter().map(|(_, e)| e.n).max().unwrap_or(0))
        .collect();
    if n.iter().any(|&n| n > 1) {
        keys.push(Column {
            label: vec!["n".into()],
            unit: String::new(),
            cells: n.iter().map(usize::to_string).collect(),
        });
    }
    keys
}

/// Prints `columns` as a table under their labels (the last lines of each aligned) and units,
/// each line indented by two spaces.
pub(super) fn print_columns(columns: &[&Column], rows: usize, out: &mut String) {
    let widths: Vec<usize> = columns.iter().map(|c| c.width()).collect();
    let line = |text: &dyn Fn(&Column) -> &str| {
        let cells: Vec<String> = (columns.iter().zip(&widths))
            .map(|(c, w)| format!("{:>w$}", text(c)))
            .collect();
        format!("  {}", cells.join("  ")).trim_end().to_string() + "\n"
    };
    let label_lines = columns.iter().map(|c| c.label.len()).max().unwrap_or(0);
    for i in 0..label_lines {
        out.push_str(&line(&|c| {
            let blank = label_lines - c.label.len();
            i.checked_sub(blank).map_or("", |at| &c.label[at])
        }));
    }
    if columns.iter().any(|c| !c.unit.is_empty()) {
        out.push_str(&line(&|c| &c.unit));
    }
    for row in 0..rows {
        out.push_str(&line(&|c| &c.cells[row]));
    }
}

/// The metric columns in chunks that fit [`WIDTH`] beside the key columns (at least one
/// metric per chunk, however wide).
fn chunks<'a>(keys: &[Column], metrics: &'a [Column]) -> Vec<Vec<&'a Column>> {
    let key_width: usize = keys.iter().map(|c| c.width() + 2).sum::<usize>() + 2;
    let mut out: Vec<Vec<&Column>> = Vec::new();
    let mut used = key_width;
    for m in metrics {
        let w = m.width() + 2;
        match out.last_mut() {
            Some(chunk) if used + w <= WIDTH + 2 => chunk.push(m),
            _ => {
                out.push(vec![m]);
                used = key_width;
            }
        }
        used += w;
    }
    out
}

/// The table of a run's `names` metrics (all when empty), grouped and wrapped.
pub fn metrics_table(run: &Run, names: &[String]) -> String {
    let rows = flowlab_report::aggregate(run, names);
    let names = match names.is_empty() {
        true => run.metric_names(),
        false => names.to_vec(),
    };
    let keys = key_columns(run, &rows);
    let mut out = String::new();
    for group in GROUPS {
        let mut in_group: Vec<&String> = names.iter().filter(|n| group_of(n) == group).collect();
        in_group.sort_by_cached_key(|n| reading_order(n));
        let metrics: Vec<Column> = (in_group.into_iter())
            .map(|n| metric_column(n, &rows))
            .collect();
        for (i, chunk) in chunks(&keys, &metrics).into_iter().enumerate() {
            out.push_str(&match i {
                0 => format!("{group}\n"),
                _ => format!("{group} (continued)\n"),
            });
            let columns: Vec<&Column> = keys.iter().chain(chunk).collect();
            print_columns(&columns, rows.len(), &mut out);
        }
    }
    let label = |name: &str| describe(name).label;
    if let Some(note) = flowlab_report::interval_note_naming(&rows, &label) {
        out.push_str(&wrap(&note, 2));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_store::{Environment, Point, RunInfo, RunStatus};
    use serde_json::json;

    fn sweep(points: &[(u64, f64, f64)]) -> Run {
        let metrics = |goodput: f64, rtt_us: f64| {
            let mut m = vec![
                ("goodput_bps".to_string(), goodput),
                ("loss_pct".into(), 0.5),
                ("packets_sent".into(), 1000.0),
                ("cpu_client_pct".into(), 3.25),
            ];
            for stat in ["mean", "min", "max", "stddev", "p50", "p90", "p99", "p999"] {
                m.push((format!("rtt_{stat}_us"), rtt_us));
                m.push((format!("delay_{stat}_us"), rtt_us / 2.0));
            }
            m
        };
        Run {
            info: RunInfo {
                id: 1,
                kind: "sweep".into(),
                created_at_ns: 0,
                finished_at_ns: None,
                status: RunStatus::Complete,
                params: json!({}),
                env: Environment::default(),
                points: points.len() as u64,
            },
            points: (points.iter().enumerate())
                .map(|(i, &(size, goodput, rtt))| Point {
                    id: i as i64 + 1,
                    params: json!({ "size": size }),
                    repetition: 0,
                    result: serde_json::Value::Null,
                    metrics: metrics(goodput, rtt),
                    packets: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn groups_in_si_units_within_80_columns() {
        let run = sweep(&[(100, 2e6, 350.0), (1000, 2.5e6, 1200.0)]);
        let text = metrics_table(&run, &[]);
        assert!(text.lines().all(|l| l.chars().count() <= WIDTH), "{text}");
        let at = |heading: &str| text.lines().position(|l| l == heading).unwrap();
        assert!(at("throughput") < at("loss"), "{text}");
        assert!(
            at("loss") < at("delay") && at("delay") < at("CPU"),
            "{text}"
        );
        // 16 delay columns do not fit in one table: it continues in 5 more, the size repeated
        // in each of the 9 tables.
        assert_eq!(text.matches("\ndelay (continued)\n").count(), 5, "{text}");
        let sizes = text.lines().filter(|l| l.starts_with("  packet size"));
        assert_eq!(sizes.count(), 9, "{text}");
        let lines: Vec<&str> = text.lines().collect();
        // Labels from the metric table, never the stored names.
        assert!(!text.contains('_'), "{text}");
        let throughput = at("throughput");
        assert!(
            lines[throughput + 1].starts_with("  packet size  goodput  packets sent"),
            "{text}"
        );
        assert!(lines[throughput + 2].contains("Mbit/s"), "{text}");
        assert!(lines[throughput + 3].contains("2.00"), "{text}");
        assert!(lines[throughput + 4].contains("2.50"), "{text}");
        assert!(lines[throughput + 3].ends_with(" 1000"), "{text}");
        // Each distribution's statistics together, min first; its labels over two lines.
        let delay = at("delay");
        assert!(lines[delay + 1].ends_with("minimum relative  mean relative  median relative"));
        assert!(lines[delay + 2].starts_with("  packet size     one-way delay"));
        // One-way delays up to 600 µs in µs; round trips up to 1.2 ms in ms, both rows.
        assert!(lines[delay + 3].ends_with("µs"), "{text}");
        assert!(lines[delay + 4].ends_with(" 175"), "{text}");
        let rtt = lines
            .iter()
            .position(|l| l.ends_with("mean round-trip           median  90th percentile"))
            .unwrap();
        assert!(lines[rtt + 2].ends_with("ms"), "{text}");
        assert!(lines[rtt + 3].ends_with(" 0.350"), "{text}");
        assert!(lines[rtt + 4].ends_with(" 1.20"), "{text}");
        assert!(lines[at("CPU") + 1].ends_with("client CPU"), "{text}");
        assert!(lines[at("CPU") + 2].contains('%'), "{text}");
        assert!(lines[at("loss") + 3].ends_with("0.500"), "{text}");
    }

    #[test]
    fn small_delays_in_microseconds_and_named_metrics_only() {
        let run = sweep(&[(100, 950e3, 350.0)]);
        let text = metrics_table(&run, &["rtt_p99_us".into(), "goodput_bps".into()]);
        // One point: no parameter was swept, so none names the row.
        let expected = "throughput\n  goodput\n   kbit/s\n      950\n\
                        delay\n  99th percentile\n  round-trip time\n               µs\n              350\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn scales_and_rounds() {
        assert_eq!(
            column_scale(Unit::BitsPerSec, 2e9, 1.0),
            (1e9, "Gbit/s".into())
        );
        assert_eq!(
            column_scale(Unit::Seconds, 0.5e-9, 1e-6),
            (1e-9, "ns".into())
        );
        assert_eq!(column_scale(Unit::Seconds, 0.0, 1e-6), (1e-6, "µs".into()));
        assert_eq!(column_scale(Unit::Seconds, 0.0, 1e-9), (1e-9, "ns".into()));
        assert_eq!(
            column_scale(Unit::Seconds, 105_024e-9, 1e-9),
            (1e-6, "µs".into())
        );
        assert_eq!(column_scale(Unit::Seconds, 2.5, 1e-6), (1.0, "s".into()));
        assert_eq!(column_scale(Unit::Count, 999_999.0, 1.0), (1.0, "".into()));
        assert_eq!(column_scale(Unit::Count, 2e6, 1.0), (1e6, "M".into()));
        assert_eq!(reading_order("rtt_p99_us"), ("rtt".into(), 4));
        assert_eq!(reading_order("loss_pct"), ("loss_pct".into(), 0));
        assert_eq!(number(2.0, false), "2.00");
        assert_eq!(number(123.456, false), "123");
        assert_eq!(number(0.0123, false), "0.012");
        assert_eq!(number(0.99996, false), "1.00");
        assert_eq!(number(9.9996, false), "10.0");
        assert_eq!(number(-0.0999, false), "-0.100");
        assert_eq!(number(1000.0, true), "1000");
        assert_eq!(group_of("host_cpu_agent_pct"), "CPU");
        assert_eq!(group_of("cpu_ns_per_packet_client"), "CPU");
        assert_eq!(group_of("jitter_us"), "delay");
        assert_eq!(group_of("loss_periods"), "loss");
        assert_eq!(group_of("transactions_per_sec"), "throughput");
    }

    /// Labels wrap at spaces to their cells' width (at least 16), the last lines aligned.
    #[test]
    fn long_labels_wrap_over_lines() {
        let wide = Column::new(
            "99th percentile relative one-way delay",
            "µs".into(),
            vec!["41.8 (28.2–66.9)".into()],
        );
        assert_eq!(wide.label, ["99th percentile", "relative one-way", "delay"]);
        let short = Column::new("n", String::new(), vec!["3".into()]);
        let mut out = String::new();
        print_columns(&[&short, &wide], 1, &mut out);
        assert_eq!(
            out,
            "      99th percentile\n     relative one-way\n  n             delay\n                   µs\n  3  41.8 (28.2–66.9)\n"
        );
    }

    #[test]
    fn swept_rates_in_si_units() {
        let mut run = sweep(&[(100, 2e6, 350.0), (1000, 2.5e6, 1200.0)]);
        for (p, rate) in run.points.iter_mut().zip([1_000_000, 20_000_000]) {
            p.params = json!({ "offered_bps": rate });
        }
        let text = metrics_table(&run, &["goodput_bps".into()]);
        assert_eq!(
            text,
            "throughput\n  total offered\n           load  goodput\n         Mbit/s   Mbit/s\n           1.00     2.00\n           20.0     2.50\n"
        );
    }
}
