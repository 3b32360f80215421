//! The figures of a stored run, each built as a [`Figure`] (the one plotting path, drawn as
//! SVG or PNG): values in their unit from the metric table, labels people read.

use std::collections::BTreeMap;

use flowlab_results::PacketRecord;
use flowlab_store::{plain, Run};
use serde_json::Value;

use crate::axis::Scale;
use crate::figure::{Axis, Figure, Mark, Panel, Series};
use crate::metrics::{self, Metric, Unit};
use crate::stats::{estimate_metric, range_of, Range, Repetitions};
use crate::ReportError;

/// Time-series lines drawn at most (one per point); more would be unreadable.
const MAX_SERIES: usize = 12;
/// Bins of a delay histogram.
const BINS: usize = 50;

/// The scales a request asks for, x and y.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scales {
    pub x: Scale,
    pub y: Scale,
}

impl Scales {
    /// `--scale` for both axes, unless `--log-x` or `--log-y` asks for a log axis.
    pub fn from_flags(both: Scale, log_x: bool, log_y: bool) -> Scales {
        let pick = |log| if log { Scale::Log } else { both };
        Scales {
            x: pick(log_x),
            y: pick(log_y),
        }
    }
}

/// Time runs on a linear axis unless a log one is asked for: the first second of a minute-long
/// test spans more than a decade, but is no reason to stretch it.
fn linear_unless_asked(scale: Scale) -> Scale {
    match scale {
        Scale::Auto => Scale::Linear,
        asked => asked,
    }
}

/// An axis for a metric or parameter of the table.
fn metric_axis(m: &Metric, scale: Scale) -> Axis {
    Axis {
        label: m.axis_label(),
        unit: m.unit,
        scale,
        from_zero: range_of(&m.name) != Range::Signed,
    }
}

fn axis(label: &str, unit: Unit, scale: Scale) -> Axis {
    Axis {
        label: label.into(),
        unit,
        scale,
        from_zero: true,
    }
}

/// One line per `by` group: x = a swept parameter, y = a metric's mean over repetitions with
/// its 95 % interval as error bars (never below zero where the metric cannot be); one panel
/// per metric. An empty `by` is [`default_by`]: only repetitions are averaged.
pub fn lines(
    run: &Run,
    x: &str,
    ys: &[String],
    by: &[String],
    scales: Scales,
) -> Result<Figure, ReportError> {
    let ys = metrics::resolve(ys, &run.metric_names())?;
    let params = crate::swept_params(run);
    let by = if by.is_empty() {
        &default_by(run, x)
    } else {
        by
    };
    let known = |p: &str| run.points.iter().any(|pt| pt.params.get(p).is_some());
    if let Some(unknown) = std::iter::once(x)
        .chain(by.iter().map(String::as_str))
        .find(|p| !known(p))
    {
        return Err(ReportError::NoSuchParam {
            name: unknown.into(),
            available: params.join(", "),
        });
    }
    let x_metric = metrics::describe(x);
    let panels = ys
        .iter()
        .map(|y| {
            let m = metrics::describe(y);
            Ok(Panel {
                title: format!("{} against {}", m.label, x_metric.label),
                series: line_series(run, x, &m, by)?,
                y: metric_axis(&m, scales.y),
                guides: Vec::new(),
            })
        })
        .collect::<Result<_, ReportError>>()?;
    Ok(Figure {
        x: metric_axis(&x_metric, scales.x),
        x_span: None,
        panels,
    })
}

/// The lines of a plot against `x` when none are asked for: one per test (or experiment flow),
/// i.e. per combination of the other parameters the points vary, so points of different tests
/// are never averaged as if they were repetitions. A parameter that follows from `x` (one value
/// per x, like a step's label beside its load) would only cut every line into single points,
/// so it is left out.
pub fn default_by(run: &Run, x: &str) -> Vec<String> {
    let follows_x = |param: &str| {
        let mut seen: Vec<(&Value, Option<&Value>)> = Vec::new();
        run.points.iter().all(|p| {
            let (xv, pv) = (p.params.get(x).unwrap_or(&Value::Null), p.params.get(param));
            match seen.iter().find(|(v, _)| *v == xv) {
                Some((_, first)) => *first == pv,
                None => {
                    seen.push((xv, pv));
                    true
                }
            }
        })
    };
    crate::swept_params(run)
        .into_iter()
        .filter(|p| p != x && !follows_x(p))
        .collect()
}

/// The series of one metric `y` against `x`, one per `by` group, in the metric's unit.
fn line_series(run: &Run, x: &str, y: &Metric, by: &[String]) -> Result<Vec<Series>, ReportError> {
    // group -> x -> each repetition's metrics.
    let mut groups: BTreeMap<String, BTreeMap<OrdF64, Repetitions>> = BTreeMap::new();
    for p in &run.points {
        let Some(xv) = p.params.get(x).and_then(as_number) else {
            return Err(ReportError::NotNumeric {
                name: x.into(),
                value: p.params.get(x).map(plain).unwrap_or_default(),
            });
        };
        if !p.metrics.iter().any(|(n, _)| *n == y.name) {
            continue;
        }
        let group = by
            .iter()
            .map(|b| format!("{b}={}", p.params.get(b).map(plain).unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(" ");
        groups
            .entry(group)
            .or_default()
            .entry(OrdF64(xv))
            .or_default()
            .push(&p.metrics);
    }
    let floor = if range_of(&y.name) == Range::Signed {
        f64::NEG_INFINITY
    } else {
        0.0
    };
    let x_scale = metrics::describe(x).scale;
    Ok(groups
        .into_iter()
        .map(|(group, pts)| {
            let estimates: Vec<(f64, crate::Estimate)> = pts
                .into_iter()
                .filter_map(|(xv, reps)| Some((xv.0 * x_scale, estimate_metric(&y.name, &reps)?)))
                .collect();
            Series {
                label: if group.is_empty() {
                    y.label.clone()
                } else {
                    group
                },
                points: estimates
                    .iter()
                    .map(|(x, e)| (*x, e.mean * y.scale))
                    .collect(),
                errors: estimates
                    .iter()
                    .filter(|(_, e)| e.n > 1)
                    .map(|(_, e)| (e.ci_low.max(floor) * y.scale, e.ci_high * y.scale))
                    .collect(),
                mark: Mark::Line,
            }
        })
        .map(|mut s| {
            // Error bars only when every point has one (they pair with points by position).
            if s.errors.len() != s.points.len() {
                s.errors.clear();
            }
            s
        })
        .collect())
}

/// Per-interval values over the test's time, one line per point (at most `MAX_SERIES`).
pub fn timeseries(run: &Run, ys: &[String], scales: Scales) -> Result<Figure, ReportError> {
    let mut available: Vec<String> = run
        .points
        .iter()
        .flat_map(|p| {
            intervals(&p.result)
                .flat_map(|iv| metrics::interval_metrics(iv).into_iter().map(|(n, _)| n))
        })
        .collect();
    available.sort();
    available.dedup();
    if available.is_empty() {
        return Err(ReportError::NoData(
            "the run has no live intervals (run tests with --interval)".into(),
        ));
    }
    let ys = metrics::resolve(ys, &available)?;
    let shown = match run.points.len() {
        n if n > MAX_SERIES => format!(" (the first {MAX_SERIES} of {n} points)"),
        _ => String::new(),
    };
    let panels = ys
        .iter()
        .map(|y| {
            let m = metrics::describe(y);
            let series = run
                .points
                .iter()
                .take(MAX_SERIES)
                .map(|p| Series {
                    label: point_label(&p.params, p.repetition),
                    points: interval_values(&p.result, &m),
                    errors: Vec::new(),
                    mark: Mark::Line,
                })
                .collect();
            Panel {
                title: format!("{} per interval{shown}", m.label),
                y: metric_axis(&m, scales.y),
                series,
                guides: Vec::new(),
            }
        })
        .collect();
    Ok(Figure {
        x: axis("time", Unit::Seconds, linear_unless_asked(scales.x)),
        x_span: None,
        panels,
    })
}

/// (end of the interval in s, value in the metric's unit) of each interval that has `m`.
fn interval_values(result: &Value, m: &Metric) -> Vec<(f64, f64)> {
    intervals(result)
        .filter_map(|iv| {
            let t = iv.get("end_ns").and_then(Value::as_f64)? / 1e9;
            let found = metrics::interval_metrics(iv)
                .into_iter()
                .find(|(n, _)| *n == m.name);
            Some((t, found?.1 * m.scale))
        })
        .collect()
}

fn intervals(result: &Value) -> impl Iterator<Item = &Value> {
    result
        .get("intervals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// "size=100 proto=udp #1": a point's parameters as a legend label.
pub fn point_label(params: &Value, repetition: u32) -> String {
    let mut s = match params {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", plain(v)))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    };
    if repetition > 0 {
        s.push_str(&format!(" #{repetition}"));
    }
    if s.is_empty() {
        "test".into()
    } else {
        s.trim().to_string()
    }
}

/// Per-packet delays in µs with the packet's send time: round trip when the packets were
/// echoed (one clock), else one-way delay relative to the smallest (the ends' clocks differ).
pub fn packet_delays(packets: &[PacketRecord]) -> (Vec<(u64, f64)>, &'static str) {
    let loopback = packets.iter().any(|p| p.echoed_ns.is_some());
    let raw: Vec<(u64, i128)> = packets
        .iter()
        .filter_map(|p| {
            Some((
                p.sent_ns?,
                i128::from(p.received_ns?) - i128::from(p.sent_ns?),
            ))
        })
        .collect();
    let base = if loopback {
        0
    } else {
        raw.iter().map(|(_, d)| *d).min().unwrap_or(0)
    };
    let label = if loopback {
        "round-trip delay"
    } else {
        "relative one-way delay"
    };
    (
        raw.into_iter()
            .map(|(t, d)| (t, (d - base) as f64 / 1e3))
            .collect(),
        label,
    )
}

fn need_packets(packets: &[PacketRecord]) -> Result<(), ReportError> {
    if packets.is_empty() {
        return Err(ReportError::NoData(
            "the run has no packet log (record one with --packet-log)".into(),
        ));
    }
    Ok(())
}

/// A figure of one panel with one unlabelled series.
fn single(title: String, x: Axis, y: Axis, points: Vec<(f64, f64)>, mark: Mark) -> Figure {
    let series = Series {
        label: String::new(),
        points,
        errors: Vec::new(),
        mark,
    };
    Figure {
        x,
        x_span: None,
        panels: vec![Panel {
            title,
            y,
            series: vec![series],
            guides: Vec::new(),
        }],
    }
}

/// Each arrived packet's send time (ns) and delay, with what the delay is.
type Delays = (Vec<(u64, f64)>, &'static str);

/// Delays in seconds, or an error when no packet of the log arrived.
fn arrived_delays(packets: &[PacketRecord]) -> Result<Delays, ReportError> {
    need_packets(packets)?;
    let (delays, label) = packet_delays(packets);
    if delays.is_empty() {
        return Err(ReportError::NoData("no packet of the log arrived".into()));
    }
    Ok((
        delays.into_iter().map(|(t, d)| (t, d * 1e-6)).collect(),
        label,
    ))
}

/// Histogram of packet delays (`BINS` bins, linear delay axis: bins have equal widths).
pub fn histogram(
    packets: &[PacketRecord],
    title: &str,
    scales: Scales,
) -> Result<Figure, ReportError> {
    let (delays, label) = arrived_delays(packets)?;
    let (lo, hi) = delays
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), d| {
            (l.min(d.1), h.max(d.1))
        });
    let width = if hi > lo {
        (hi - lo) / BINS as f64
    } else {
        lo.abs().max(1e-6) * 0.1
    };
    let mut counts = [0u64; BINS];
    for (_, d) in &delays {
        counts[(((d - lo) / width) as usize).min(BINS - 1)] += 1;
    }
    let bars = (0..BINS)
        .map(|i| (lo + i as f64 * width, counts[i] as f64))
        .collect();
    Ok(single(
        format!("{title}: delay histogram"),
        axis(label, Unit::Seconds, Scale::Linear),
        axis("packets", Unit::Count, scales.y),
        bars,
        Mark::Bars(width),
    ))
}

/// Empirical CDF of packet delays.
pub fn cdf(packets: &[PacketRecord], title: &str, scales: Scales) -> Result<Figure, ReportError> {
    let (delays, label) = arrived_delays(packets)?;
    let mut d: Vec<f64> = delays.into_iter().map(|x| x.1).collect();
    d.sort_by(f64::total_cmp);
    let n = d.len() as f64;
    let points = d
        .iter()
        .enumerate()
        .map(|(i, &x)| (x, (i + 1) as f64 / n))
        .collect();
    let mut x = axis(label, Unit::Seconds, scales.x);
    x.from_zero = false;
    Ok(single(
        format!("{title}: delay CDF"),
        x,
        axis("fraction of packets", Unit::Percent, Scale::Linear),
        points,
        Mark::Line,
    ))
}

/// Lost packets against packet index (WS2NetTest Figure 12): a stroke at each lost sequence
/// number, so bursts and periodic losses show.
pub fn loss_index(packets: &[PacketRecord], title: &str) -> Result<Figure, ReportError> {
    need_packets(packets)?;
    let lost: Vec<(f64, f64)> = packets
        .iter()
        .filter(|p| p.sent_ns.is_some() && p.received_ns.is_none())
        .map(|p| (p.seq as f64, 1.0))
        .collect();
    let mut figure = single(
        format!(
            "{title}: lost packets ({} of {})",
            lost.len(),
            packets.len()
        ),
        axis("packet index", Unit::Count, Scale::Linear),
        axis("lost", Unit::Count, Scale::Linear),
        lost,
        Mark::Spikes,
    );
    // The x axis spans every packet sent, lost or not.
    let last = packets.iter().map(|p| p.seq).max().unwrap_or(0) as f64;
    figure.x_span = Some((0.0, last.max(1.0)));
    Ok(figure)
}

/// Delay of each packet against its send time (WS2NetTest Figure 13).
pub fn delay_time(
    packets: &[PacketRecord],
    title: &str,
    scales: Scales,
) -> Result<Figure, ReportError> {
    let (delays, label) = arrived_delays(packets)?;
    let t0 = delays.iter().map(|d| d.0).min().unwrap_or(0);
    let points = delays
        .iter()
        .map(|&(t, d)| ((t - t0) as f64 / 1e9, d))
        .collect();
    Ok(single(
        format!("{title}: delay against time"),
        axis("send time", Unit::Seconds, linear_unless_asked(scales.x)),
        axis(label, Unit::Seconds, scales.y),
        points,
        Mark::Dots,
    ))
}

/// An offered-load search (seed 003, Figure 1): total throughput against total offered load,
/// with the lossless, peak and full-load throughput as labelled guides; `None` when the run's
/// parameters hold no complete search.
pub fn search(params: &Value) -> Option<Figure> {
    let search = params.get("search")?;
    let points: Vec<(f64, f64)> = search
        .get("points")?
        .as_array()?
        .iter()
        .filter_map(|p| {
            Some((
                p.get("rate_bps")?.as_f64()?,
                p.get("throughput_bps")?.as_f64()?,
            ))
        })
        .collect();
    let guides: Vec<(String, f64)> = [
        ("lossless", "lossless_bps"),
        ("peak", "peak_bps"),
        ("full load", "full_load_bps"),
    ]
    .iter()
    .filter_map(|(label, key)| Some((label.to_string(), search.get(*key)?.as_f64()?)))
    .collect();
    if points.len() < 2 || guides.len() < 3 {
        return None;
    }
    let rate = metrics::describe("rate_bps");
    let throughput = metrics::describe("throughput_bps");
    let mut figure = single(
        "Total throughput against offered load (all sources)".into(),
        metric_axis(&rate, Scale::Linear),
        metric_axis(&throughput, Scale::Linear),
        points,
        Mark::Line,
    );
    figure.panels[0].series[0].label = "throughput".into();
    figure.panels[0].guides = guides;
    Some(figure)
}

/// A JSON number, or a string that parses as one (sizes typed as "100").
pub fn as_number(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .filter(|x: &f64| x.is_finite())
}

/// f64 ordered by total order, for map keys.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}
