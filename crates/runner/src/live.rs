//! `flowlab test --live`: a terminal view redrawn at every interval report — this interval's
//! throughput, loss, delay percentiles and the sender's schedule error above small plots of
//! each over the test so far.
//! It draws in an inline viewport below the command line (no alternate screen, no raw mode:
//! Ctrl-C stops the test as usual and the result prints under the view). Where stdout is not
//! a terminal, [`test_observer`] gives the plain interval lines instead.

use std::collections::VecDeque;
use std::io::IsTerminal as _;

use flowlab_results::IntervalReport;
use flowlab_units::{format_count, format_duration_ns, format_rate};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Sparkline};
use ratatui::{Frame, TerminalOptions, Viewport};

use crate::terminal::{Output, Terminal};
use crate::{format, Event, Observer};

/// Lines the view takes.
pub const HEIGHT: u16 = 13;
/// Intervals the plots keep: the view's memory is bounded however long the test runs.
const HISTORY: usize = 512;

/// The observer of `flowlab test`: the live view with `--live` when stdout is a terminal
/// and the output is text, else the plain lines of [`Terminal`].
pub fn test_observer(output: Output, live: bool) -> Box<dyn Observer> {
    let plain = Terminal::new(output, false);
    if !draws_live(output, live, std::io::stdout().is_terminal()) {
        return Box::new(plain);
    }
    let options = TerminalOptions {
        viewport: Viewport::Inline(HEIGHT),
    };
    match ratatui::Terminal::with_options(CrosstermBackend::new(std::io::stdout()), options) {
        Ok(terminal) => Box::new(LiveView::new(terminal)),
        Err(_) => Box::new(plain),
    }
}

/// Whether `--live` draws the view: text output to a terminal only.
fn draws_live(output: Output, live: bool, stdout_is_terminal: bool) -> bool {
    live && output == Output::Human && stdout_is_terminal
}

/// One interval as the plots show it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Point {
    throughput_bps: f64,
    lost: u64,
    delay_p99_ns: Option<f64>,
    /// The sender's largest lateness against its schedule (early departures count as 0).
    schedule_max_ns: Option<f64>,
}

/// What the view shows: the test's headline, its latest interval and the history.
#[derive(Debug, Default)]
pub struct LiveState {
    title: String,
    latest: Option<IntervalReport>,
    history: VecDeque<Point>,
    packets: u64,
    lost: u64,
}

impl LiveState {
    /// Takes an interval report.
    pub fn push(&mut self, report: &IntervalReport) {
        if self.history.len() == HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(Point {
            throughput_bps: report.throughput_bps,
            lost: report.lost,
            delay_p99_ns: report.delay.as_ref().map(|d| d.p99_ns),
            schedule_max_ns: report.schedule_error.as_ref().map(|e| e.max_ns.max(0.0)),
        });
        self.packets += report.packets;
        self.lost += report.lost;
        self.latest = Some(report.clone());
    }

    /// The text lines above the plots.
    fn figures(&self) -> Vec<Line<'static>> {
        let Some(r) = &self.latest else {
            return vec![Line::from("waiting for the first interval...")];
        };
        let seconds = r.end_ns as f64 / 1e9;
        let offered = self.packets + self.lost;
        let loss_pct = if offered == 0 {
            0.0
        } else {
            100.0 * self.lost as f64 / offered as f64
        };
        let mut lines = vec![Line::from(format!(
            "{seconds:.1} s  throughput {}  {} pkt/s  lost {} here, {} ({loss_pct:.2} %) in all",
            format_rate(r.throughput_bps),
            format_count(r.packets_per_sec),
            r.lost,
            self.lost
        ))];
        lines.push(Line::from(match &r.delay {
            Some(d) => format!(
                "delay p50 {}  p90 {}  p99 {}  max {}  jitter {}",
                format_duration_ns(d.p50_ns),
                format_duration_ns(d.p90_ns),
                format_duration_ns(d.p99_ns),
                format_duration_ns(d.max_ns),
                format_duration_ns(r.jitter_ns)
            ),
            None => "delay: none measured in this interval".to_string(),
        }));
        lines.push(Line::from(schedule_line(r)));
        lines
    }

    /// The last `width` points of one series as the plots take them.
    fn series(&self, width: u16, value: impl Fn(&Point) -> u64) -> Vec<u64> {
        let skip = self.history.len().saturating_sub(usize::from(width));
        self.history.iter().skip(skip).map(value).collect()
    }
}

/// The sender's departures against their schedule in this interval.
fn schedule_line(r: &IntervalReport) -> String {
    match &r.schedule_error {
        Some(e) => format!(
            "schedule error p50 {}  p99 {}  max {}  ({} packets)",
            format_duration_ns(e.p50_ns),
            format_duration_ns(e.p99_ns),
            format_duration_ns(e.max_ns),
            format_count(e.count as f64)
        ),
        None => "schedule error: not measured here (max rate, TCP, or the agent sends)".to_string(),
    }
}

/// A plot: its name, the value it takes of a point and how its peak reads.
type Plot = (&'static str, fn(&Point) -> u64, fn(u64) -> String);

/// Draws the view into `area`.
pub fn draw(frame: &mut Frame, area: Rect, state: &LiveState) {
    // The headline's first line is the frame's title; the rest goes on above the figures.
    let mut headline = flowlab_units::fit::wrap_to(&state.title, usize::from(area.width) - 4);
    let rest: Vec<Line> = headline.split_off(1).into_iter().map(Line::from).collect();
    let title = format!(" {} ", headline.concat());
    let outer = Block::default()
        .borders(Borders::ALL)
        .title(Line::from(title).style(Style::new().add_modifier(Modifier::BOLD)));
    let inner = outer.inner(area);
    frame.render_widget(outer, area);
    let text_rows = 3 + rest.len() as u16;
    let [text, plots] =
        Layout::vertical([Constraint::Length(text_rows), Constraint::Min(3)]).areas(inner);
    let figures: Vec<Line> = rest.into_iter().chain(state.figures()).collect();
    frame.render_widget(Paragraph::new(figures), text);
    let columns = Layout::horizontal([Constraint::Ratio(1, 4); 4]).areas::<4>(plots);
    let peak = |values: &[u64]| values.iter().copied().max().unwrap_or(0);
    let plots: [Plot; 4] = [
        (
            "throughput",
            |p| p.throughput_bps as u64,
            |v| format_rate(v as f64),
        ),
        ("lost", |p| p.lost, |v| v.to_string()),
        (
            "delay p99",
            |p| p.delay_p99_ns.unwrap_or(0.0) as u64,
            |v| format_duration_ns(v as f64),
        ),
        (
            "sent late",
            |p| p.schedule_max_ns.unwrap_or(0.0) as u64,
            |v| format_duration_ns(v as f64),
        ),
    ];
    for ((name, value, label), area) in plots.into_iter().zip(columns) {
        let data = state.series(area.width.saturating_sub(2), value);
        // The peak goes under the plot: four titles and their figures do not fit 80 columns.
        let block = Block::default()
            .borders(Borders::ALL)
            .title(format!(" {name} "))
            .title_bottom(format!(" max {} ", label(peak(&data))));
        let plot = Sparkline::default().block(block).data(&data);
        frame.render_widget(plot, area);
    }
}

/// The live view over any ratatui backend (a real terminal, or a test's buffer).
pub struct LiveView<B: Backend> {
    terminal: ratatui::Terminal<B>,
    state: LiveState,
    /// Every other event prints as without the view.
    plain: Terminal,
}

impl<B: Backend> LiveView<B> {
    pub fn new(terminal: ratatui::Terminal<B>) -> LiveView<B> {
        LiveView {
            terminal,
            state: LiveState::default(),
            plain: Terminal::new(Output::Human, true),
        }
    }

    /// The backend, for tests to read what was drawn.
    pub fn backend(&self) -> &B {
        self.terminal.backend()
    }

    fn redraw(&mut self) {
        let state = &self.state;
        // Drawing is best effort: a failing terminal must not stop the measurement.
        let _ = self.terminal.draw(|frame| draw(frame, frame.area(), state));
    }
}

impl<B: Backend> Observer for LiveView<B> {
    fn on(&mut self, event: Event<'_>) {
        match event {
            Event::TestStarted(options) => {
                self.state.title = format::headline_line(options);
                self.redraw();
            }
            Event::Interval { report, .. } => {
                self.state.push(report);
                self.redraw();
            }
            other => self.plain.on(other),
        }
    }
}

impl<B: Backend> Drop for LiveView<B> {
    /// Leaves the cursor under the view, where the result prints.
    fn drop(&mut self) {
        let below = self.terminal.get_frame().area().bottom();
        let _ = self.terminal.set_cursor_position((0, below));
        let _ = self.terminal.show_cursor();
    }
}

#[cfg(test)]
mod tests;
