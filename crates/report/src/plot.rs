//! Plots as SVG (plotters' SVG backend): text stays `<text>` elements, so no font is bundled or
//! rasterised and the same data always gives the same bytes.

use std::collections::BTreeMap;

use flowlab_results::PacketRecord;
use flowlab_store::{plain, Run};
use plotters::prelude::*;
use serde_json::Value;

use crate::stats::{estimate_metric, Repetitions};
use crate::{metrics, ReportError};

const WIDTH: u32 = 800;
const PANEL_HEIGHT: u32 = 360;
/// Time-series lines drawn at most (one per point); more would be unreadable.
const MAX_SERIES: usize = 12;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

pub(crate) fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

pub(crate) fn pe<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// A range that always has width, padded a little so points do not sit on the frame.
pub(crate) fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if !lo.is_finite() {
        return 0.0..1.0;
    }
    if from_zero && lo > 0.0 {
        lo = 0.0;
    }
    if hi <= lo {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        hi = lo + pad;
        if !from_zero {
            lo -= pad;
        }
    }
    let pad = (hi - lo) * 0.05;
    (if from_zero && lo >= 0.0 { lo } else { lo - pad })..hi + pad
}

/// Draws one panel per metric, stacked, and returns the SVG document.
fn panels(
    count: usize,
    mut draw: impl FnMut(
        usize,
        &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    ) -> Result<(), ReportError>,
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let height = PANEL_HEIGHT * count.max(1) as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(pe)?;
        for (i, area) in root.split_evenly((count.max(1), 1)).iter().enumerate() {
            draw(i, area)?;
        }
        root.present().map_err(pe)?;
    }
    Ok(svg)
}

/// One line per `by` group: x = a swept parameter, y = a metric's mean over repetitions with
/// its 95 % interval as error bars; one panel per metric.
pub fn lines(run: &Run, x: &str, ys: &[String], by: &[String]) -> Result<String, ReportError> {
    let ys = metrics::resolve(ys, &run.metric_names())?;
    let params = crate::swept_params(run);
    let known = |p: &str| run.points.iter().any(|pt| pt.params.get(p).is_some());
    if !known(x) {
        return Err(ReportError::NoSuchParam {
            name: x.into(),
            available: params.join(", "),
        });
    }
    if let Some(b) = by.iter().find(|b| !known(b)) {
        return Err(ReportError::NoSuchParam {
            name: b.clone(),
            available: params.join(", "),
        });
    }
    panels(ys.len(), |i, area| {
        let y = &ys[i];
        // group -> x -> each repetition's metrics (and those of any other parameters).
        let mut groups: BTreeMap<String, BTreeMap<OrdF64, Repetitions>> = BTreeMap::new();
        for p in &run.points {
            let Some(xv) = p.params.get(x).and_then(as_number) else {
                return Err(ReportError::NotNumeric {
                    name: x.into(),
                    value: p.params.get(x).map(plain).unwrap_or_default(),
                });
            };
            if !p.metrics.iter().any(|(n, _)| n == y) {
                continue;
            }
            let g = by
                .iter()
                .map(|b| format!("{b}={}", p.params.get(b).map(plain).unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(" ");
            groups
                .entry(g)
                .or_default()
                .entry(OrdF64(xv))
                .or_default()
                .push(&p.metrics);
        }
        let series: Vec<(String, Vec<(f64, crate::stats::Estimate)>)> = groups
            .into_iter()
            .map(|(g, pts)| {
                (
                    g,
                    pts.into_iter()
                        .filter_map(|(x, reps)| Some((x.0, estimate_metric(y, &reps)?)))
                        .collect(),
                )
            })
            .collect();
        let xr = range(
            series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x)),
            false,
        );
        let yr = range(
            series
                .iter()
                .flat_map(|(_, p)| p.iter().flat_map(|(_, e)| [e.ci_low, e.ci_high])),
            true,
        );
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{y} against {x}"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr, yr)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc(x)
            .y_desc(y.as_str())
            .draw()
            .map_err(pe)?;
        for (gi, (g, pts)) in series.iter().enumerate() {
            let c = color(gi);
            let label = if g.is_empty() { y.clone() } else { g.clone() };
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|(x, e)| (*x, e.mean)),
                    c.stroke_width(2),
                ))
                .map_err(pe)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart
                .draw_series(pts.iter().map(|(x, e)| {
                    ErrorBar::new_vertical(*x, e.ci_low, e.mean, e.ci_high, c.filled(), 8)
                }))
                .map_err(pe)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(pe)?;
        Ok(())
    })
}

/// Per-interval values over the test's time, one line per point (at most `MAX_SERIES`).
pub fn timeseries(run: &Run, ys: &[String]) -> Result<String, ReportError> {
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
    panels(ys.len(), |i, area| {
        let y = &ys[i];
        let series: Vec<(String, Vec<(f64, f64)>)> = run
            .points
            .iter()
            .take(MAX_SERIES)
            .map(|p| {
                let pts = intervals(&p.result)
                    .filter_map(|iv| {
                        let t = iv.get("end_ns").and_then(Value::as_f64)? / 1e9;
                        let v = metrics::interval_metrics(iv)
                            .into_iter()
                            .find(|(n, _)| n == y)?
                            .1;
                        Some((t, v))
                    })
                    .collect();
                (point_label(&p.params, p.repetition), pts)
            })
            .collect();
        let xr = range(
            series.iter().flat_map(|(_, p)| p.iter().map(|(x, _)| *x)),
            true,
        );
        let yr = range(
            series.iter().flat_map(|(_, p)| p.iter().map(|(_, y)| *y)),
            true,
        );
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{y} per interval"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr, yr)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(y.as_str())
            .draw()
            .map_err(pe)?;
        for (si, (label, pts)) in series.iter().enumerate() {
            let c = color(si);
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))
                .map_err(pe)?
                .label(label.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(pe)?;
        Ok(())
    })
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
        "round-trip delay (µs)"
    } else {
        "relative one-way delay (µs)"
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

/// Histogram of packet delays (50 bins).
pub fn histogram(packets: &[PacketRecord], title: &str) -> Result<String, ReportError> {
    need_packets(packets)?;
    let (delays, label) = packet_delays(packets);
    if delays.is_empty() {
        return Err(ReportError::NoData("no packet of the log arrived".into()));
    }
    const BINS: usize = 50;
    let xr = range(delays.iter().map(|d| d.1), false);
    let width = (xr.end - xr.start) / BINS as f64;
    let mut counts = [0u64; BINS];
    for (_, d) in &delays {
        let b = (((d - xr.start) / width) as usize).min(BINS - 1);
        counts[b] += 1;
    }
    let ymax = counts.iter().copied().max().unwrap_or(1) as f64 * 1.05;
    panels(1, |_, area| {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title}: delay histogram"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr.clone(), 0.0..ymax)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc(label)
            .y_desc("packets")
            .draw()
            .map_err(pe)?;
        chart
            .draw_series(counts.iter().enumerate().map(|(i, &c)| {
                let x0 = xr.start + i as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width, c as f64)], color(0).filled())
            }))
            .map_err(pe)?;
        Ok(())
    })
}

/// Empirical CDF of packet delays.
pub fn cdf(packets: &[PacketRecord], title: &str) -> Result<String, ReportError> {
    need_packets(packets)?;
    let (delays, label) = packet_delays(packets);
    let mut d: Vec<f64> = delays.into_iter().map(|x| x.1).collect();
    if d.is_empty() {
        return Err(ReportError::NoData("no packet of the log arrived".into()));
    }
    d.sort_by(f64::total_cmp);
    let n = d.len() as f64;
    let xr = range(d.iter().copied(), false);
    panels(1, |_, area| {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title}: delay CDF"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr.clone(), 0.0..1.0)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc(label)
            .y_desc("fraction of packets")
            .draw()
            .map_err(pe)?;
        chart
            .draw_series(LineSeries::new(
                d.iter().enumerate().map(|(i, &x)| (x, (i + 1) as f64 / n)),
                color(0).stroke_width(2),
            ))
            .map_err(pe)?;
        Ok(())
    })
}

/// Lost packets against packet index (WS2NetTest Figure 12): a mark at each lost sequence
/// number, so bursts and periodic losses show.
pub fn loss_index(packets: &[PacketRecord], title: &str) -> Result<String, ReportError> {
    need_packets(packets)?;
    let lost: Vec<f64> = packets
        .iter()
        .filter(|p| p.sent_ns.is_some() && p.received_ns.is_none())
        .map(|p| p.seq as f64)
        .collect();
    let xr = range(packets.iter().map(|p| p.seq as f64), true);
    panels(1, |_, area| {
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{title}: lost packets ({} of {})",
                    lost.len(),
                    packets.len()
                ),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr.clone(), 0.0..1.2)
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("packet index")
            .y_desc("lost")
            .y_labels(2)
            .draw()
            .map_err(pe)?;
        chart
            .draw_series(
                lost.iter()
                    .map(|&s| PathElement::new(vec![(s, 0.0), (s, 1.0)], color(1).stroke_width(1))),
            )
            .map_err(pe)?;
        Ok(())
    })
}

/// Delay of each packet against its send time (WS2NetTest Figure 13).
pub fn delay_time(packets: &[PacketRecord], title: &str) -> Result<String, ReportError> {
    need_packets(packets)?;
    let (delays, label) = packet_delays(packets);
    let t0 = delays.iter().map(|d| d.0).min().unwrap_or(0);
    let pts: Vec<(f64, f64)> = delays
        .iter()
        .map(|&(t, d)| ((t - t0) as f64 / 1e9, d))
        .collect();
    if pts.is_empty() {
        return Err(ReportError::NoData("no packet of the log arrived".into()));
    }
    let xr = range(pts.iter().map(|p| p.0), true);
    let yr = range(pts.iter().map(|p| p.1), true);
    panels(1, |_, area| {
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title}: delay against time"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(xr.clone(), yr.clone())
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc("send time (s)")
            .y_desc(label)
            .draw()
            .map_err(pe)?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 2, color(0).filled())))
            .map_err(pe)?;
        Ok(())
    })
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
