//! One self-contained HTML file per run: parameters, environment, summary table and every plot
//! that the run's data allows, inline SVG, no scripts, fonts or links to fetch.

use std::fmt::Write as _;

use flowlab_store::{plain, Run, Store};

use crate::{aggregate, metrics, plot, swept_params, PlotKind, PlotRequest, ReportError};

/// Metrics shown first in reports when present.
const KEY_METRICS: [&str; 6] = ["rtt", "delay", "loss", "cpu", "throughput", "jitter"];

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG element of a plotters document (without any XML prologue), to inline in HTML.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

/// A table of one row per point: the swept parameters, then each metric with its interval, and
/// a line naming the interval each metric uses.
fn table(h: &mut String, run: &Run, swept: &[String], names: &[String]) {
    let rows = aggregate(run, names);
    h.push_str("<table>\n<tr>");
    for c in swept.iter().chain(names.iter()) {
        let _ = write!(h, "<th>{}</th>", escape(c));
    }
    h.push_str("<th>n</th></tr>\n");
    for row in &rows {
        h.push_str("<tr>");
        for k in swept {
            let _ = write!(
                h,
                "<td>{}</td>",
                escape(&row.params.get(k).map(plain).unwrap_or_default())
            );
        }
        let mut n = 0;
        for name in names {
            match row.estimates.iter().find(|(k, _)| k == name) {
                Some((_, e)) => {
                    n = n.max(e.n);
                    let _ = write!(h, "<td>{}</td>", escape(&crate::fmt_estimate(e)));
                }
                None => h.push_str("<td>-</td>"),
            }
        }
        let _ = writeln!(h, "<td>{n}</td></tr>");
    }
    h.push_str("</table>\n");
    if let Some(note) = crate::interval_note(&rows) {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(&note));
    }
}

/// The report of `run`: deterministic for a given stored run.
/// An offered-load search (seed 003, Figure 1): total throughput against total offered load,
/// with the lossless, peak and full-load throughput marked. Plain SVG, deterministic.
fn search_figure(params: &serde_json::Value) -> Option<String> {
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
    let marks: Vec<(&str, f64)> = [
        ("lossless", "lossless_bps"),
        ("peak", "peak_bps"),
        ("full load", "full_load_bps"),
    ]
    .iter()
    .filter_map(|(label, key)| Some((*label, search.get(*key)?.as_f64()?)))
    .collect();
    if points.len() < 2 || marks.len() < 3 {
        return None;
    }
    let max_x = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let max_y = points
        .iter()
        .map(|p| p.1)
        .chain(marks.iter().map(|m| m.1))
        .fold(1.0, f64::max)
        * 1.1;
    let (w, hgt, left, bottom) = (640.0, 360.0, 70.0, 40.0);
    let sx = |x: f64| left + x / max_x * (w - left - 20.0);
    let sy = |y: f64| hgt - bottom - y / max_y * (hgt - bottom - 20.0);
    let mut svg = format!("<figure><svg width=\"{w}\" height=\"{hgt}\" viewBox=\"0 0 {w} {hgt}\" xmlns=\"http://www.w3.org/2000/svg\" font-family=\"sans-serif\" font-size=\"12\">\n");
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>",
        sy(0.0),
        w - 20.0,
        sy(0.0)
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{}\" x2=\"{left}\" y2=\"20\" stroke=\"black\"/>",
        sy(0.0)
    );
    // Labels sit at different places along their lines: the values are often close.
    for (n, (label, y)) in marks.iter().enumerate() {
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{y0:.1}\" x2=\"{x1}\" y2=\"{y0:.1}\" stroke=\"#888\" stroke-dasharray=\"4 3\"/><text x=\"{tx:.1}\" y=\"{ty:.1}\">{label} {v:.2} Mbit/s</text>",
            y0 = sy(*y),
            x1 = w - 20.0,
            tx = left + 8.0 + n as f64 * 170.0,
            ty = sy(*y) + if n == 0 { 14.0 } else { -4.0 },
            v = y / 1e6
        );
    }
    let line: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
        .collect();
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>",
        line.join(" ")
    );
    for (x, y) in &points {
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#1f77b4\"/>",
            sx(*x),
            sy(*y)
        );
    }
    let _ = writeln!(svg, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">offered load (Mbit/s, all sources); 0 to {:.1}</text>", (left + w) / 2.0, hgt - 8.0, max_x / 1e6);
    let _ = writeln!(svg, "<text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">throughput (Mbit/s), 0 to {:.1}</text>", hgt / 2.0, hgt / 2.0, max_y / 1e6);
    svg.push_str("</svg><figcaption>Total throughput against offered load, lossless, peak and full-load throughput marked (ATM Forum frame-level metrics)</figcaption></figure>\n");
    Some(svg)
}

pub fn report(store: &Store, run: &Run) -> Result<String, ReportError> {
    let i = &run.info;
    let mut h = String::new();
    let title = format!("flowlab run {} ({})", i.id, i.kind);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto;padding:0 1em}}table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #bbb;padding:.2em .5em;text-align:right}}th{{background:#eee}}pre{{background:#f6f6f6;padding:.5em;overflow:auto}}figure{{margin:1em 0}}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let _ = writeln!(
        h,
        "<p>Status: {}; {} points.</p>",
        escape(i.status.as_str()),
        run.points.len()
    );
    h.push_str("<h2>Environment</h2>\n<table>\n");
    for (k, v) in [
        ("host", &i.env.hostname),
        ("kernel", &i.env.kernel),
        ("CPU", &i.env.cpu_model),
        ("clock source", &i.env.clock_source),
        ("flowlab", &i.env.flowlab_version),
    ] {
        let _ = writeln!(h, "<tr><th>{}</th><td>{}</td></tr>", k, escape(v));
    }
    h.push_str("</table>\n<h2>Parameters</h2>\n");
    let params = serde_json::to_string_pretty(&i.params).unwrap_or_default();
    let _ = writeln!(h, "<pre>{}</pre>", escape(&params));

    let available = run.metric_names();
    let mut key: Vec<String> = Vec::new();
    for k in KEY_METRICS {
        if let Ok(found) = metrics::resolve(&[k.to_string()], &available) {
            key.extend(found);
        }
    }
    let swept = swept_params(run);
    h.push_str("<h2>Results</h2>\n<p>Mean over repetitions with its 95 % confidence interval: ± half-width where it is symmetric, (low–high) where the metric's range makes it lopsided; below each table, the interval each metric uses.</p>\n");
    let main = if key.is_empty() { &available } else { &key };
    table(&mut h, run, &swept, main);
    if main.len() < available.len() {
        h.push_str("<details><summary>All metrics</summary>\n");
        table(&mut h, run, &swept, &available);
        h.push_str("</details>\n");
    }
    if let Some(figure) = search_figure(&i.params) {
        h.push_str("<h2>Search</h2>\n");
        h.push_str(&figure);
    }
    h.push_str("<h2>Plots</h2>\n");
    let mut figures: Vec<(String, Result<String, ReportError>)> = Vec::new();
    let numeric_x = swept.iter().find(|k| {
        run.points
            .iter()
            .all(|p| p.params.get(k.as_str()).and_then(plot::as_number).is_some())
    });
    if let (Some(x), false) = (numeric_x, key.is_empty()) {
        let by: Vec<String> = swept.iter().filter(|k| *k != x).cloned().collect();
        let req = PlotRequest {
            kind: PlotKind::Lines,
            x: Some(x.clone()),
            ys: key.clone(),
            by,
            point: None,
        };
        figures.push((
            format!("Metrics against {x}"),
            crate::plot(store, run, &req),
        ));
    }
    let has_intervals = run.points.iter().any(|p| {
        p.result
            .get("intervals")
            .and_then(|v| v.as_array())
            .is_some_and(|a| !a.is_empty())
    });
    if has_intervals {
        let req = PlotRequest {
            kind: PlotKind::TimeSeries,
            x: None,
            ys: vec!["goodput_bps".into()],
            by: Vec::new(),
            point: None,
        };
        figures.push(("Goodput per interval".into(), crate::plot(store, run, &req)));
    }
    if run.points.iter().any(|p| p.packets > 0) {
        for (kind, caption) in [
            (PlotKind::Histogram, "Delay histogram"),
            (PlotKind::Cdf, "Delay CDF"),
            (PlotKind::LossIndex, "Lost packets against packet index"),
            (PlotKind::DelayTime, "Delay against time"),
        ] {
            let req = PlotRequest {
                kind,
                x: None,
                ys: Vec::new(),
                by: Vec::new(),
                point: None,
            };
            figures.push((caption.into(), crate::plot(store, run, &req)));
        }
    }
    if figures.is_empty() {
        h.push_str("<p>No plot: the run has a single point without intervals or packet log.</p>\n");
    }
    for (caption, svg) in figures {
        match svg {
            Ok(svg) => {
                let _ = writeln!(
                    h,
                    "<figure>{}<figcaption>{}</figcaption></figure>",
                    inline_svg(&svg),
                    escape(&caption)
                );
            }
            // A plot the data does not allow is said, not fatal: the rest of the report stands.
            Err(e) => {
                let _ = writeln!(h, "<p>{}: {}</p>", escape(&caption), escape(&e.to_string()));
            }
        }
    }
    h.push_str("</body></html>\n");
    Ok(h)
}

#[cfg(test)]
mod search_figure_tests {
    use super::search_figure;

    #[test]
    fn an_offered_load_search_is_drawn_with_its_three_marks() {
        let params = serde_json::json!({"search": {
        "lossless_bps": 9.0e6, "peak_bps": 9.6e6, "full_load_bps": 9.5e6,
        "points": [
            {"rate_bps": 3.0e6, "throughput_bps": 3.0e6},
            {"rate_bps": 9.0e6, "throughput_bps": 9.0e6},
            {"rate_bps": 18.0e6, "throughput_bps": 9.5e6}
        ]}});
        let svg = search_figure(&params).expect("a figure");
        for needle in [
            "lossless 9.00 Mbit/s",
            "peak 9.60 Mbit/s",
            "full load 9.50 Mbit/s",
            "<polyline",
        ] {
            assert!(svg.contains(needle), "{needle}");
        }
        assert_eq!(search_figure(&params), Some(svg), "deterministic");
        assert_eq!(
            search_figure(&serde_json::json!({"search": {"rate_bps": 1}})),
            None
        );
        assert_eq!(search_figure(&serde_json::json!({})), None);
    }
}
