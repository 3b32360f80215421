//! One self-contained HTML file per run, built with maud (escaped by construction):
//! parameters with the command that reproduces the run, environment, summary tables and every
//! plot the run's data allows, inline SVG, no scripts, fonts or links to fetch. A plot without
//! data is collapsed to one line saying why.

use maud::{html, Markup, PreEscaped, DOCTYPE};
use serde_json::Value;

use flowlab_store::{plain, Run, Store};

use crate::{
    aggregate, metrics, plot, swept_params, Figure, Metric, PlotKind, PlotRequest, ReportError,
    Scales,
};

/// Metrics shown first in reports when present.
const KEY_METRICS: [&str; 6] = ["rtt", "delay", "loss", "cpu", "throughput", "jitter"];

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#111}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:.2em .5em;text-align:right}\
th{background:#eee}td{white-space:nowrap}table.params td,table.params th{text-align:left;white-space:normal}\
div.wide{overflow-x:auto}\
pre{background:#f6f6f6;padding:.5em;overflow:auto}figure{margin:1.5em 0}figure svg{max-width:100%;height:auto}\
details.empty{color:#555;margin:.5em 0}";

/// The SVG element of a plotters document (without any XML prologue), to inline in HTML.
fn inline_svg(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

/// The report of `run`: deterministic for a given stored run.
pub fn report(store: &Store, run: &Run) -> Result<String, ReportError> {
    let i = &run.info;
    let title = format!("flowlab run {} ({})", i.id, i.kind);
    let swept = swept_params(run);
    let available = run.metric_names();
    let key: Vec<String> = metrics::resolve_lenient(&KEY_METRICS.map(String::from), &available);
    let main = if key.is_empty() { &available } else { &key };
    let figures = figures(store, run, &swept, &key);
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                h1 { (title) }
                p { "Status: " (i.status.as_str()) "; " (run.points.len()) " points." }
                h2 { "Parameters" }
                (parameters(&i.params))
                h2 { "Environment" }
                table.params {
                    @for (k, v) in [
                        ("host", &i.env.hostname),
                        ("kernel", &i.env.kernel),
                        ("CPU", &i.env.cpu_model),
                        ("clock source", &i.env.clock_source),
                        ("flowlab", &i.env.flowlab_version),
                    ] {
                        tr { th { (k) } td { (v) } }
                    }
                }
                h2 { "Results" }
                p { "Mean over repetitions with its 95 % confidence interval: ± half-width where it is symmetric, (low–high) where the metric's range makes it lopsided; below each table, the interval each metric uses." }
                (table(run, &swept, main))
                @if main.len() < available.len() {
                    details { summary { "All metrics" } (table(run, &swept, &available)) }
                }
                h2 { "Plots" }
                @if figures.is_empty() {
                    p { "No plot: the run has a single point without intervals or packet log." }
                }
                @for (caption, figure) in &figures {
                    (figure_markup(caption, figure)?)
                }
            }
        }
    };
    Ok(page.into_string() + "\n")
}

/// The run's parameters as a table (nested values as compact JSON), the command first.
fn parameters(params: &Value) -> Markup {
    let command = params.get("command").and_then(Value::as_str);
    let rows: Vec<(String, String)> = match params {
        Value::Object(map) => map
            .iter()
            .filter(|(k, _)| *k != "command" && *k != "search")
            .map(|(k, v)| (k.clone(), plain(v)))
            .collect(),
        Value::Null => Vec::new(),
        other => vec![("parameters".into(), plain(other))],
    };
    html! {
        @if let Some(command) = command {
            p { "Reproduce with:" }
            pre.command { (command) }
        }
        @if !rows.is_empty() {
            table.params {
                @for (k, v) in &rows { tr { th { (k) } td { (v) } } }
            }
        }
    }
}

/// A table of one row per point: the swept parameters, then each metric (headed by its label
/// from the metric table, its raw name on hover) with its interval in its unit, SI-prefixed,
/// and a line naming each interval.
fn table(run: &Run, swept: &[String], names: &[String]) -> Markup {
    let rows = aggregate(run, names);
    let params: Vec<Metric> = swept.iter().map(|c| metrics::describe(c)).collect();
    let columns: Vec<Metric> = names.iter().map(|c| metrics::describe(c)).collect();
    html! {
        // Cells keep their number and unit on one line; a wide table scrolls.
        div.wide { table {
            tr {
                @for c in params.iter().chain(&columns) { th title=(c.name) { (c.label) } }
                th { "n" }
            }
            @for row in &rows {
                tr {
                    @for p in &params { td { (param_cell(row.params.get(&p.name), p)) } }
                    @for m in &columns {
                        td { (row.estimates.iter().find(|(k, _)| *k == m.name).map_or("-".into(), |(_, e)| m.format_estimate(e))) }
                    }
                    td { (row.estimates.iter().map(|(_, e)| e.n).max().unwrap_or(0)) }
                }
            }
        } }
        @if let Some(note) = crate::interval_note_naming(&rows, &|n| metrics::describe(n).label) {
            p.note { (note) }
        }
    }
}

/// A parameter's value: a number in its unit ("1 kB"), anything else as it was given.
fn param_cell(value: Option<&Value>, param: &Metric) -> String {
    match value.map(|v| (v, plot::as_number(v))) {
        Some((Value::Number(_), Some(n))) => param.format(n),
        Some((v, _)) => plain(v),
        None => String::new(),
    }
}

/// A figure, or one collapsed line when it has no data (or the data does not allow it).
fn figure_markup(
    caption: &str,
    figure: &Result<Figure, ReportError>,
) -> Result<Markup, ReportError> {
    Ok(match figure {
        Ok(figure) if !figure.is_empty() => html! {
            figure {
                (PreEscaped(inline_svg(&figure.svg()?)))
                figcaption { (caption) }
            }
        },
        Ok(_) => empty(caption, "nothing to draw"),
        // A plot the data does not allow is said, not fatal: the rest of the report stands.
        Err(e) => empty(caption, &e.to_string()),
    })
}

fn empty(caption: &str, why: &str) -> Markup {
    html! { details.empty { summary { (caption) ": no plot" } p { (why) } } }
}

/// Every figure the run's data allows, with its caption.
fn figures(
    store: &Store,
    run: &Run,
    swept: &[String],
    key: &[String],
) -> Vec<(String, Result<Figure, ReportError>)> {
    let request = |kind, x: Option<String>, ys: Vec<String>, by: Vec<String>| PlotRequest {
        kind,
        x,
        ys,
        by,
        point: None,
        scales: Scales::default(),
    };
    let mut figures = Vec::new();
    if let Some(search) = plot::search(&run.info.params) {
        figures.push((
            "Offered-load search (ATM Forum frame-level metrics)".into(),
            Ok(search),
        ));
    }
    let numeric_x = swept.iter().find(|k| {
        run.points
            .iter()
            .all(|p| p.params.get(k.as_str()).and_then(plot::as_number).is_some())
    });
    if let (Some(x), false) = (numeric_x, key.is_empty()) {
        // No `by`: one line per test, as `flowlab plot` draws it (`plot::default_by`).
        let req = request(PlotKind::Lines, Some(x.clone()), key.to_vec(), Vec::new());
        let caption = format!("Metrics against {}", metrics::describe(x).label);
        figures.push((caption, crate::plot(store, run, &req)));
    }
    let has_intervals = run.points.iter().any(|p| {
        p.result
            .get("intervals")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    });
    if has_intervals {
        let req = request(
            PlotKind::TimeSeries,
            None,
            vec!["goodput_bps".into()],
            Vec::new(),
        );
        figures.push(("Goodput per interval".into(), crate::plot(store, run, &req)));
    }
    if run.points.iter().any(|p| p.packets > 0) {
        for (kind, caption) in [
            (PlotKind::Histogram, "Delay histogram"),
            (PlotKind::Cdf, "Delay CDF"),
            (PlotKind::LossIndex, "Lost packets against packet index"),
            (PlotKind::DelayTime, "Delay against time"),
        ] {
            let req = request(kind, None, Vec::new(), Vec::new());
            figures.push((caption.into(), crate::plot(store, run, &req)));
        }
    }
    figures
}
