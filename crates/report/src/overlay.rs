//! A measured curve with reference points drawn over it (a paper's published values against
//! flowlab's), for `flowlab reproduce`: a [`Figure`] like every other plot.

use crate::axis::Scale;
use crate::figure::{Axis, Figure, Mark, Panel, Series as FigureSeries};
use crate::metrics::Unit;
use crate::ReportError;

/// One named set of (x, y) points: joined by a line, or drawn as separate markers.
pub struct Series<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
    pub joined: bool,
}

/// Every series on one panel, linear axes from zero as the seeds' figures draw them. The
/// labels carry their units ("window (kB)"), so ticks are plain numbers: 1000, not "1 k".
pub fn figure(title: &str, x_label: &str, y_label: &str, series: &[Series<'_>]) -> Figure {
    let axis = |label: &str| Axis {
        label: label.to_string(),
        unit: Unit::Plain,
        scale: Scale::Linear,
        from_zero: true,
    };
    let series = series
        .iter()
        .map(|s| FigureSeries {
            label: s.label.to_string(),
            points: s.points.clone(),
            errors: Vec::new(),
            mark: if s.joined { Mark::Line } else { Mark::Points },
        })
        .collect();
    Figure {
        x: axis(x_label),
        x_span: None,
        panels: vec![Panel {
            title: title.to_string(),
            y: axis(y_label),
            series,
            guides: Vec::new(),
        }],
    }
}

/// [`figure`] as an SVG document.
pub fn overlay(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
) -> Result<String, ReportError> {
    figure(title, x_label, y_label, series).svg()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_series_and_their_labels_are_drawn() {
        let series = [
            Series {
                label: "published",
                points: vec![(64.0, 23.0), (4096.0, 93.0)],
                joined: false,
            },
            Series {
                label: "flowlab",
                points: vec![(64.0, 4.0), (4096.0, 99.0)],
                joined: true,
            },
        ];
        let fig = figure("loss against size", "bytes", "%", &series);
        let marks: Vec<Mark> = fig.panels[0].series.iter().map(|s| s.mark).collect();
        assert_eq!(marks, [Mark::Points, Mark::Line]);
        let svg = overlay("loss against size", "bytes", "%", &series).unwrap();
        // plotters writes each text on a line of its own.
        let text = |t: &str| svg.lines().any(|l| l.trim() == t);
        assert!(text("published") && text("flowlab"));
        assert!(svg.contains("<circle"), "published points are markers");
        assert!(svg.contains("<polyline"), "the simulated curve is a line");
        // Plain ticks, the unit in the label: 4096 bytes reads "4000", not "4000.0" or "4 k".
        assert!(text("4000") && !text("4 k") && !svg.contains("4000.0"));
    }
}
