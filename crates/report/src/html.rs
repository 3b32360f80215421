//! One self-contained HTML file per run: parameters, environment, summary table and every plot
//! that the run's data allows, inline SVG, no scripts, fonts or links to fetch.

use std::fmt::Write as _;

use flowlab_store::{plain, Run, Store};

use crate::{aggregate, fmt_num, metrics, plot, swept_params, PlotKind, PlotRequest, ReportError};

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

/// A table of one row per point: the swept parameters, then `mean ± half-width` per metric.
fn table(h: &mut String, run: &Run, swept: &[String], names: &[String]) {
    h.push_str("<table>\n<tr>");
    for c in swept.iter().chain(names.iter()) {
        let _ = write!(h, "<th>{}</th>", escape(c));
    }
    h.push_str("<th>n</th></tr>\n");
    for row in aggregate(run, names) {
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
                Some((_, e)) if e.n > 1 => {
                    n = n.max(e.n);
                    let _ = write!(
                        h,
                        "<td>{} ± {}</td>",
                        fmt_num(e.mean),
                        fmt_num(e.half_width())
                    );
                }
                Some((_, e)) => {
                    n = n.max(e.n);
                    let _ = write!(h, "<td>{}</td>", fmt_num(e.mean));
                }
                None => h.push_str("<td>-</td>"),
            }
        }
        let _ = writeln!(h, "<td>{n}</td></tr>");
    }
    h.push_str("</table>\n");
}

/// The report of `run`: deterministic for a given stored run.
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
    h.push_str("<h2>Results</h2>\n<p>Mean ± half-width of the 95 % confidence interval over repetitions (Student t; bootstrap for percentiles).</p>\n");
    let main = if key.is_empty() { &available } else { &key };
    table(&mut h, run, &swept, main);
    if main.len() < available.len() {
        h.push_str("<details><summary>All metrics</summary>\n");
        table(&mut h, run, &swept, &available);
        h.push_str("</details>\n");
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
