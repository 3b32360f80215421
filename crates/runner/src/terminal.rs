//! The terminal observer: what a runner's events look like on stdout (lines of text or JSON)
//! and stderr (a sweep's progress bar).

use std::io::{IsTerminal as _, Write as _};

use crate::format;
use crate::{Event, Observer};

/// How a command prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    Human,
    /// One JSON document at the end: nothing while running.
    Json,
    /// One JSON object per line, live.
    JsonStream,
}

/// Prints events as they come; a sweep's progress is a bar on stderr.
pub struct Terminal {
    output: Output,
    /// No progress bar.
    quiet: bool,
    interval_header: bool,
    bar: Option<indicatif::ProgressBar>,
}

impl Terminal {
    /// `quiet`: no progress bar (there is none either when stderr is not a terminal).
    pub fn new(output: Output, quiet: bool) -> Terminal {
        Terminal {
            output,
            quiet,
            interval_header: false,
            bar: None,
        }
    }

    /// Removes the progress bar, before the final table.
    pub fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }

    fn human(&self, text: impl std::fmt::Display) {
        // Live output is best effort: a closed stdout must not stop the measurement.
        if self.output == Output::Human {
            let _ = write!(std::io::stdout(), "{text}");
        }
    }

    fn progress(&mut self, label: String, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            if bar.length().is_some_and(|l| l <= done) {
                bar.set_length(done + 1);
            }
            bar.set_message(label);
        }
    }
}

impl Observer for Terminal {
    fn on(&mut self, event: Event<'_>) {
        match event {
            Event::TestStarted(options) => {
                self.human(format_args!("{}\n", format::headline(options)))
            }
            Event::Interval {
                report,
                transactions,
            } => match self.output {
                Output::JsonStream => {
                    let _ = writeln!(
                        std::io::stdout(),
                        "{}",
                        format::stream_line("interval", report)
                    );
                }
                Output::Human => {
                    if !self.interval_header {
                        self.interval_header = true;
                        self.human(format_args!("{}\n", format::interval_header(transactions)));
                    }
                    self.human(format_args!("{}\n", format::interval_line(report)));
                }
                Output::Json => {}
            },
            Event::SweepStarted { tests, expected_ns } => {
                self.human(crate::sweep::expected_line(tests, expected_ns));
                self.bar = progress_bar(self.quiet, tests)
            }
            Event::PointStarted {
                point,
                repetition,
                done,
            } => self.progress(flowlab_report::plot::point_label(point, repetition), done),
            Event::ExperimentStarted(start) => self.human(format::experiment_header(&start)),
            Event::StepFinished { step, flows } => self.human(format::step_text(step, flows)),
            Event::TrialFinished(trial) => {
                self.human(format_args!("{}\n", format::trial_line(trial)))
            }
            Event::SearchFinished(result) => self.human(format::search_text(result)),
            Event::DemoStarted(agent) => self.human(format_args!(
                "{}\n{}\n",
                format::demo_intro(agent),
                format::demo_header()
            )),
            Event::DemoPointFinished { test, results } => {
                // Row by row: a slow demo shows its progress.
                self.human(format_args!("{}\n", format::demo_row(test, results)));
                let _ = std::io::stdout().flush();
            }
        }
    }
}

/// A progress bar with ETA on stderr, none when stderr is not a terminal or with --quiet.
fn progress_bar(quiet: bool, len: u64) -> Option<indicatif::ProgressBar> {
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} tests, ETA {eta}  {msg}")
    {
        bar.set_style(style);
    }
    Some(bar)
}
