//! A measured curve with reference points drawn over it (a paper's published values against
//! flowlab's), for `flowlab reproduce`.

use plotters::prelude::*;

use crate::plot::{color, pe, range};
use crate::ReportError;

/// One named set of (x, y) points: joined by a line, or drawn as separate markers.
pub struct Series<'a> {
    pub label: &'a str,
    pub points: Vec<(f64, f64)>,
    pub joined: bool,
}

/// Draws every series on one chart (y from zero) and returns the SVG document.
pub fn overlay(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series<'_>],
) -> Result<String, ReportError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (800, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(pe)?;
        let all = || series.iter().flat_map(|s| s.points.iter());
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                range(all().map(|p| p.0), false),
                range(all().map(|p| p.1), true),
            )
            .map_err(pe)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .draw()
            .map_err(pe)?;
        for (i, s) in series.iter().enumerate() {
            let c = color(i);
            let points = s.points.iter().copied();
            let drawn = if s.joined {
                chart.draw_series(LineSeries::new(points, c.stroke_width(2)))
            } else {
                chart.draw_series(points.map(|p| Circle::new(p, 5, c.filled())))
            };
            drawn
                .map_err(pe)?
                .label(s.label)
                .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(pe)?;
        root.present().map_err(pe)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_series_and_their_labels_are_drawn() {
        let svg = overlay(
            "loss against size",
            "bytes",
            "%",
            &[
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
            ],
        )
        .unwrap();
        assert!(svg.contains("published") && svg.contains("flowlab"));
        assert!(svg.contains("<circle"), "published points are markers");
        assert!(svg.contains("<polyline"), "the simulated curve is a line");
    }
}
