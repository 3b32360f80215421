//! The one plotting path: every figure (sweeps, time series, packet plots, the offered-load
//! search) is a [`Figure`] of stacked panels, drawn by plotters as SVG or PNG with the same
//! theme: SI-prefixed ticks, linear or log axes, legends beside the data, and series told
//! apart by marker and dash as well as colour, so a grayscale print still reads.

use std::ops::Range;

use plotters::coord::combinators::WithKeyPoints;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::axis::{log_ticks, tick, Scale};
use crate::metrics::Unit;
use crate::ReportError;

const WIDTH: u32 = 860;
const PANEL_HEIGHT: u32 = 340;
/// Room right of the data for the legend.
const LEGEND_WIDTH: u32 = 190;
/// Characters of a legend label that fit beside its sample line.
const LEGEND_CHARS: usize = 24;
/// The legend's first row and the height of each, in pixels.
const LEGEND_TOP: i32 = 46;
const LEGEND_ROW: i32 = 20;
/// At most this many markers along one line, so long series stay lines.
const MARKERS_PER_LINE: usize = 16;
const FONT: &str = "sans-serif";
/// Ticks of a log axis at most, before only decades are labelled.
const MAX_LOG_TICKS: usize = 9;

/// An axis: what it shows, its unit, and its scale.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub unit: Unit,
    pub scale: Scale,
    /// A linear axis starts at zero (rates, counts), not at the smallest value.
    pub from_zero: bool,
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mark {
    /// A line with markers (and error bars when the series has them).
    Line,
    /// Dots only (one per packet).
    Dots,
    /// The series' markers without a line (reference points).
    Points,
    /// Bars of this width from the axis up (a histogram; x is the bar's left edge).
    Bars(f64),
    /// A vertical stroke from the axis up at each x (lost packets).
    Spikes,
}

/// One series of a panel, in the axes' units.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// Each point's interval (low, high); empty when the series has none.
    pub errors: Vec<(f64, f64)>,
    pub mark: Mark,
}

/// One panel: a y axis, its series, and labelled horizontal guides (search results).
#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub y: Axis,
    pub series: Vec<Series>,
    pub guides: Vec<(String, f64)>,
}

/// Panels stacked over one x axis.
#[derive(Debug, Clone)]
pub struct Figure {
    pub x: Axis,
    /// The x axis's extent when the data's would be too narrow (all packets, not only lost ones).
    pub x_span: Option<(f64, f64)>,
    pub panels: Vec<Panel>,
}

/// What a figure is rendered as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    /// The format a file name asks for: `.png`, else SVG.
    pub fn of_path(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("png") => Format::Png,
            _ => Format::Svg,
        }
    }
}

fn pe<E: std::fmt::Display>(e: E) -> ReportError {
    ReportError::Plot(e.to_string())
}

/// Series style `i`: colours of the Okabe-Ito palette, which differ in lightness too.
const COLORS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 0, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
];
/// Dash and gap lengths in pixels; (0, 0) is a solid line.
const DASHES: [(u32, u32); 4] = [(0, 0), (8, 4), (2, 3), (12, 3)];
const MARKERS: usize = 4;

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

impl Figure {
    pub fn height(&self) -> u32 {
        PANEL_HEIGHT * self.panels.len().max(1) as u32
    }

    /// Whether any panel has something to draw (empty figures are left out of reports).
    pub fn is_empty(&self) -> bool {
        self.panels
            .iter()
            .all(|p| p.series.iter().all(|s| s.points.is_empty()))
    }

    /// The figure as an SVG document: text stays `<text>`, so the same data gives the same bytes.
    pub fn svg(&self) -> Result<String, ReportError> {
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (WIDTH, self.height())).into_drawing_area();
            self.draw(&root)?;
            root.present().map_err(pe)?;
        }
        Ok(svg)
    }

    /// The figure as a PNG file at `path` (text rasterised with the bundled DejaVu Sans).
    pub fn png(&self, path: &std::path::Path) -> Result<(), ReportError> {
        let root = BitMapBackend::new(path, (WIDTH, self.height())).into_drawing_area();
        self.draw(&root)?;
        root.present().map_err(pe)
    }

    /// Writes the figure to `path` in the format its extension names.
    pub fn write(&self, path: &std::path::Path) -> Result<(), ReportError> {
        match Format::of_path(path) {
            Format::Png => self.png(path),
            Format::Svg => std::fs::write(path, self.svg()?)
                .map_err(|e| pe(format!("cannot write {}: {e}", path.display()))),
        }
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), ReportError> {
        register_font()?;
        root.fill(&WHITE).map_err(pe)?;
        let points = || {
            self.panels
                .iter()
                .flat_map(|p| &p.series)
                .flat_map(|s| &s.points)
        };
        let x_log = self.x.scale.is_log(points().map(|p| p.0));
        let extent = self.x_span.into_iter().flat_map(|(lo, hi)| [lo, hi]);
        let x_range = span(points().map(|p| p.0).chain(extent), x_log, self.x.from_zero);
        let areas = root.split_evenly((self.panels.len().max(1), 1));
        for (panel, area) in self.panels.iter().zip(&areas) {
            let (data, legend) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
            let y_log = panel.y.scale.is_log(ys(panel));
            let shown = &on_axes(panel, x_log, y_log);
            let guides = panel.guides.iter().map(|g| g.1);
            let y_range = span(ys(shown).chain(guides), y_log, panel.y.from_zero);
            let xr = x_range.clone();
            match (x_log, y_log) {
                (false, false) => self.panel(&data, shown, lin(xr), lin(y_range)),
                (false, true) => self.panel(&data, shown, lin(xr), log(y_range)),
                (true, false) => self.panel(&data, shown, log(xr), lin(y_range)),
                (true, true) => self.panel(&data, shown, log(xr), log(y_range)),
            }?;
            draw_legend(&legend, panel)?;
        }
        Ok(())
    }

    fn panel<DB, X, Y>(
        &self,
        area: &DrawingArea<DB, Shift>,
        panel: &Panel,
        x: X,
        y: Y,
    ) -> Result<(), ReportError>
    where
        DB: DrawingBackend,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let (x_lo, x_hi) = (x.range().start, x.range().end);
        let y_floor = y.range().start;
        let y_labels = y_label_count(panel, y.range().end - y_floor);
        let mut chart = ChartBuilder::on(area)
            .caption(&panel.title, (FONT, 16))
            .margin(10)
            .x_label_area_size(44)
            .y_label_area_size(86)
            .build_cartesian_2d(x, y)
            .map_err(pe)?;
        let (x_unit, y_unit) = (self.x.unit, panel.y.unit);
        chart
            .configure_mesh()
            .x_desc(&self.x.label)
            .y_desc(&panel.y.label)
            .axis_desc_style((FONT, 13))
            .label_style((FONT, 12))
            .x_label_formatter(&|v| tick(*v, x_unit))
            .y_label_formatter(&|v| tick(*v, y_unit))
            .x_labels(8)
            .y_labels(y_labels)
            .light_line_style(TRANSPARENT)
            .bold_line_style(RGBColor(225, 225, 225))
            .draw()
            .map_err(pe)?;
        // Markers tell series apart, and show where the measured points of a short line are.
        let several = panel.series.len() > 1;
        for (i, series) in panel.series.iter().enumerate() {
            let marked = several || series.points.len() <= MARKERS_PER_LINE;
            draw_series(&mut chart, series, i, y_floor, marked)?;
        }
        for (i, (_, value)) in panel.guides.iter().enumerate() {
            let style = guide_style(i);
            chart
                .draw_series(DashedLineSeries::new(
                    [(x_lo, *value), (x_hi, *value)],
                    6,
                    4,
                    style,
                ))
                .map_err(pe)?;
        }
        Ok(())
    }
}

/// Every y a panel's range must hold: its points and their intervals' bounds.
fn ys(panel: &Panel) -> impl Iterator<Item = f64> + '_ {
    panel.series.iter().flat_map(|s| {
        let errors = s.errors.iter().flat_map(|(lo, hi)| [*lo, *hi]);
        s.points.iter().map(|p| p.1).chain(errors)
    })
}

/// How far beyond its points' extremes an interval reaches on a log y axis before its bar
/// stops at the frame: Student's bound over two runs reaches 12.7 standard deviations, and
/// would otherwise squash every point into a decade of a far wider axis.
const LOG_INTERVAL_REACH: f64 = 100.0;

/// The panel without the points a log axis cannot show (zero or below), with their error
/// bars: they would otherwise sit on the frame as if measured there. On a log y axis the
/// bars are cut at [`LOG_INTERVAL_REACH`] beyond the points.
fn on_axes(panel: &Panel, x_log: bool, y_log: bool) -> Panel {
    let shown = |&(x, y): &(f64, f64)| (!x_log || x > 0.0) && (!y_log || y > 0.0);
    let mut panel = panel.clone();
    for s in &mut panel.series {
        if s.errors.len() == s.points.len() {
            let pairs = s.points.iter().copied().zip(s.errors.iter().copied());
            (s.points, s.errors) = pairs.filter(|(p, _)| shown(p)).unzip();
        } else {
            s.points.retain(shown);
        }
    }
    let (lo, hi) = panel
        .series
        .iter()
        .flat_map(|s| &s.points)
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
    if y_log && lo.is_finite() {
        let (floor, ceiling) = (lo / LOG_INTERVAL_REACH, hi * LOG_INTERVAL_REACH);
        for (low, high) in panel.series.iter_mut().flat_map(|s| &mut s.errors) {
            (*low, *high) = (low.clamp(floor, ceiling), high.clamp(floor, ceiling));
        }
    }
    panel
}

/// How many y ticks to ask for: whole counts over a short span get one per unit, so a
/// 0-or-1 axis is not ticked at 0.2, 0.4, ...
fn y_label_count(panel: &Panel, span: f64) -> usize {
    let whole = panel.y.unit == Unit::Count
        && panel
            .series
            .iter()
            .flat_map(|s| &s.points)
            .all(|p| p.1.fract() == 0.0);
    match whole && span < 7.0 {
        true => span.floor() as usize + 1,
        false => 7,
    }
}

/// Guides are gray dashed lines of decreasing darkness, apart from the series' colours.
fn guide_style(i: usize) -> ShapeStyle {
    let level = [90u8, 140, 185][i % 3];
    RGBColor(level, level, level).stroke_width(2)
}

/// Registers the bundled font once: bitmaps need glyphs, and SVG layout measures text with it.
fn register_font() -> Result<(), ReportError> {
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    match ok {
        true => Ok(()),
        false => Err(pe("the bundled font does not load")),
    }
}

fn lin(r: Range<f64>) -> RangedCoordf64 {
    r.into()
}

fn log(r: Range<f64>) -> WithKeyPoints<LogCoord<f64>> {
    let ticks = log_ticks(r.start, r.end, MAX_LOG_TICKS);
    r.log_scale().with_key_points(ticks)
}

/// The range of an axis over `values`: padded a little so points do not sit on the frame; a
/// log range spans only positive values.
fn span(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Range<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| {
            (l.min(v), h.max(v))
        });
    if !lo.is_finite() {
        return if log { 1.0..10.0 } else { 0.0..1.0 };
    }
    if log {
        return lo / 1.25..hi * 1.25;
    }
    let lo = if from_zero && lo > 0.0 { 0.0 } else { lo };
    let (lo, hi) = match hi > lo {
        true => (lo, hi),
        false if lo == 0.0 => (0.0, 1.0),
        false => (lo - lo.abs() * 0.1, hi + hi.abs() * 0.1),
    };
    let pad = (hi - lo) * 0.05;
    let start = if from_zero && lo >= 0.0 { lo } else { lo - pad };
    start..hi + pad
}

type Chart<'a, DB, X, Y> = ChartContext<'a, DB, Cartesian2d<X, Y>>;

fn draw_series<DB, X, Y>(
    chart: &mut Chart<'_, DB, X, Y>,
    series: &Series,
    i: usize,
    y_floor: f64,
    marked: bool,
) -> Result<(), ReportError>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = color(i);
    let pts = &series.points;
    match series.mark {
        Mark::Line => {
            draw_line(chart, pts, i)?;
            if marked {
                let every = pts.len().div_ceil(MARKERS_PER_LINE).max(1);
                let some: Vec<(f64, f64)> = pts.iter().step_by(every).copied().collect();
                draw_markers(chart, &some, i)?;
            }
            chart
                .draw_series(pts.iter().zip(&series.errors).map(|((x, y), (lo, hi))| {
                    ErrorBar::new_vertical(*x, lo.max(y_floor), *y, *hi, c.stroke_width(1), 8)
                }))
                .map_err(pe)?;
        }
        Mark::Points => draw_markers(chart, pts, i)?,
        Mark::Dots => {
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 2, c.filled())))
                .map_err(pe)?;
        }
        Mark::Bars(width) => {
            chart
                .draw_series(pts.iter().map(|(x, y)| {
                    Rectangle::new([(*x, y_floor), (x + width, *y)], c.mix(0.75).filled())
                }))
                .map_err(pe)?;
        }
        Mark::Spikes => {
            chart
                .draw_series(pts.iter().map(|(x, y)| {
                    PathElement::new(vec![(*x, y_floor), (*x, *y)], c.stroke_width(1))
                }))
                .map_err(pe)?;
        }
    }
    Ok(())
}

fn draw_line<DB, X, Y>(
    chart: &mut Chart<'_, DB, X, Y>,
    pts: &[(f64, f64)],
    i: usize,
) -> Result<(), ReportError>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let style = color(i).stroke_width(2);
    match DASHES[i % DASHES.len()] {
        (0, _) => chart
            .draw_series(LineSeries::new(pts.iter().copied(), style))
            .map(|_| ()),
        (dash, gap) => chart
            .draw_series(DashedLineSeries::new(pts.iter().copied(), dash, gap, style))
            .map(|_| ()),
    }
    .map_err(pe)
}

fn draw_markers<DB, X, Y>(
    chart: &mut Chart<'_, DB, X, Y>,
    pts: &[(f64, f64)],
    i: usize,
) -> Result<(), ReportError>
where
    DB: DrawingBackend,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let c = color(i);
    let each = pts.iter().copied();
    match i % MARKERS {
        0 => chart
            .draw_series(each.map(|p| Circle::new(p, 4, c.filled())))
            .map(|_| ()),
        1 => chart
            .draw_series(
                each.map(|p| EmptyElement::at(p) + Rectangle::new([(-4, -4), (4, 4)], c.filled())),
            )
            .map(|_| ()),
        2 => chart
            .draw_series(each.map(|p| TriangleMarker::new(p, 5, c.filled())))
            .map(|_| ()),
        _ => chart
            .draw_series(each.map(|p| Cross::new(p, 4, c.stroke_width(2))))
            .map(|_| ()),
    }
    .map_err(pe)
}

/// The legend, beside the data: each series' line, marker and label, then the guides with
/// their values. Labels too long for its width are shortened with "…", and series beyond the
/// panel's height are counted on one last row.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
) -> Result<(), ReportError> {
    let text = (FONT, 12).into_font().color(&BLACK);
    let row = |n: usize| LEGEND_TOP + LEGEND_ROW * n as i32;
    // Styles follow the series' positions, labelled or not, as in the plot.
    let labelled: Vec<(usize, &Series)> = panel
        .series
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.label.is_empty())
        .collect();
    let room = ((PANEL_HEIGHT as i32 - LEGEND_TOP) / LEGEND_ROW) as usize;
    let overflow = labelled.len() + panel.guides.len() > room;
    let shown = match overflow {
        true => room.saturating_sub(panel.guides.len() + 1),
        false => labelled.len(),
    };
    let mut n = 0;
    for &(i, series) in &labelled[..shown] {
        let y = row(n);
        match series.mark {
            Mark::Line => {
                draw_legend_line(area, i, y)?;
                draw_legend_marker(area, i, (16, y))?;
            }
            Mark::Points => draw_legend_marker(area, i, (16, y))?,
            _ => area
                .draw(&Rectangle::new(
                    [(8, y - 4), (24, y + 4)],
                    color(i).filled(),
                ))
                .map_err(pe)?,
        }
        area.draw_text(&fit(&series.label), &text, (34, y - 7))
            .map_err(pe)?;
        n += 1;
    }
    if overflow {
        let more = format!("… and {} more", labelled.len() - shown);
        area.draw_text(&more, &text, (34, row(n) - 7)).map_err(pe)?;
        n += 1;
    }
    for (i, (label, value)) in panel.guides.iter().enumerate() {
        let y = row(n);
        let sample = DashedPathElement::new(vec![(4, y), (28, y)], 6, 4, guide_style(i));
        area.draw(&sample).map_err(pe)?;
        let value = crate::axis::si(*value, "");
        let line = format!("{label} {value}{}", panel.y.unit.name());
        area.draw_text(&fit(&line), &text, (34, y - 7))
            .map_err(pe)?;
        n += 1;
    }
    Ok(())
}

/// `label` shortened to what the legend's width holds.
fn fit(label: &str) -> String {
    match label.chars().count() > LEGEND_CHARS {
        true => label.chars().take(LEGEND_CHARS - 1).chain(['…']).collect(),
        false => label.to_string(),
    }
}

/// A legend's sample of series `i`'s line, with its dashes.
fn draw_legend_line<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    i: usize,
    y: i32,
) -> Result<(), ReportError> {
    let style = color(i).stroke_width(2);
    let ends = vec![(4, y), (28, y)];
    match DASHES[i % DASHES.len()] {
        (0, _) => area.draw(&PathElement::new(ends, style)),
        (dash, gap) => area.draw(&DashedPathElement::new(ends, dash, gap, style)),
    }
    .map_err(pe)
}

fn draw_legend_marker<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    i: usize,
    at: (i32, i32),
) -> Result<(), ReportError> {
    let c = color(i);
    match i % MARKERS {
        0 => area.draw(&Circle::new(at, 4, c.filled())),
        1 => area.draw(&Rectangle::new(
            [(at.0 - 4, at.1 - 4), (at.0 + 4, at.1 + 4)],
            c.filled(),
        )),
        2 => area.draw(&TriangleMarker::new(at, 5, c.filled())),
        _ => area.draw(&Cross::new(at, 4, c.stroke_width(2))),
    }
    .map_err(pe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(label: String) -> Series {
        Series {
            label,
            points: vec![(1.0, 1.0), (2.0, 2.0)],
            errors: Vec::new(),
            mark: Mark::Line,
        }
    }

    fn figure(series: Vec<Series>) -> Figure {
        let axis = |label: &str| Axis {
            label: label.into(),
            unit: Unit::Count,
            scale: Scale::Linear,
            from_zero: true,
        };
        Figure {
            x: axis("x"),
            x_span: None,
            panels: vec![Panel {
                title: "t".into(),
                y: axis("y"),
                series,
                guides: Vec::new(),
            }],
        }
    }

    /// The texts of an SVG, which plotters writes each on a line of its own.
    fn texts(svg: &str) -> Vec<&str> {
        svg.lines().map(str::trim).collect()
    }

    /// Issue 16's demo report: a jitter interval of 0 to 4·10^13 µs over three runs spread
    /// its log axis over 25 decades. Bars now stop two decades beyond the points, and so
    /// does the axis.
    #[test]
    fn wild_intervals_do_not_stretch_a_log_axis() {
        let mut series = line("jitter".into());
        series.points = vec![(1.0, 1e-3), (2.0, 1e-2)];
        series.errors = vec![(1e-20, 1e10), (5e-3, 2e-2)];
        let mut fig = figure(vec![series]);
        fig.panels[0].y.scale = Scale::Log;
        let shown = on_axes(&fig.panels[0], false, true);
        assert_eq!(shown.series[0].errors, [(1e-5, 1.0), (5e-3, 2e-2)]);
        let svg = fig.svg().unwrap();
        let texts = texts(&svg);
        assert!(texts.contains(&"0.00001") && texts.contains(&"1"), "{svg}");
        assert!(
            !texts.contains(&"10") && !texts.contains(&"0.000001"),
            "{svg}"
        );
    }

    #[test]
    fn long_legends_are_shortened_and_counted() {
        assert_eq!(fit("proto=udp size=1000 #2"), "proto=udp size=1000 #2");
        let long = "proto=udp size=1000 rate=2M flows=4";
        assert_eq!(fit(long), "proto=udp size=1000 rat…");
        let svg = figure((0..30).map(|i| line(format!("series {i}"))).collect())
            .svg()
            .unwrap();
        let room = ((PANEL_HEIGHT as i32 - LEGEND_TOP) / LEGEND_ROW) as usize;
        let shown = room - 1;
        assert!(texts(&svg).contains(&format!("series {}", shown - 1).as_str()));
        assert!(!texts(&svg).contains(&format!("series {shown}").as_str()));
        let more = format!("… and {} more", 30 - shown);
        assert!(texts(&svg).contains(&more.as_str()), "{more}");
    }

    #[test]
    fn whole_counts_over_a_short_span_are_ticked_per_unit() {
        let panel = || figure(vec![line("a".into())]).panels[0].clone();
        let mut lost = panel();
        lost.series[0].points = vec![(1.0, 1.0), (5.0, 1.0)];
        assert_eq!(y_label_count(&lost, 1.05), 2, "0 and 1");
        assert_eq!(y_label_count(&lost, 40.0), 7, "a long span");
        lost.series[0].points[0].1 = 0.5;
        assert_eq!(y_label_count(&lost, 1.05), 7, "a fractional count");
        let mut seconds = panel();
        seconds.y.unit = Unit::Seconds;
        assert_eq!(y_label_count(&seconds, 2.1), 7, "not a count");
    }

    #[test]
    fn log_axes_leave_out_what_they_cannot_show() {
        let mut s = line("a".into());
        s.points = vec![(1.0, 0.0), (2.0, 5.0), (0.0, 3.0)];
        s.errors = vec![(0.0, 1.0), (4.0, 6.0), (2.0, 4.0)];
        let panel = figure(vec![s]).panels[0].clone();
        let log_y = on_axes(&panel, false, true);
        assert_eq!(log_y.series[0].points, [(2.0, 5.0), (0.0, 3.0)]);
        assert_eq!(log_y.series[0].errors, [(4.0, 6.0), (2.0, 4.0)]);
        let both = on_axes(&panel, true, true);
        assert_eq!(both.series[0].points, [(2.0, 5.0)]);
        assert_eq!(on_axes(&panel, false, false).series[0].points.len(), 3);
    }

    #[test]
    fn empty_figures_are_known_as_empty() {
        assert!(figure(Vec::new()).is_empty());
        let mut no_points = line("a".into());
        no_points.points.clear();
        assert!(figure(vec![no_points]).is_empty());
        assert!(!figure(vec![line("a".into())]).is_empty());
    }
}
