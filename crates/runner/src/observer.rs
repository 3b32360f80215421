//! How the runners report progress: one [`Event`] at a time to an [`Observer`], so a terminal,
//! a test or a future front end each show it their own way.

use flowlab_control::TestOptions;
use flowlab_experiment::Step;
use flowlab_results::IntervalReport;
use serde_json::Value;

use crate::outcome::{Clocks, FlowOutcome, NetworkKind, TrialOutcome};

/// Something a runner did or saw.
#[derive(Debug)]
pub enum Event<'a> {
    /// A test is about to start.
    TestStarted(&'a TestOptions),
    /// A live report of a running test; `transactions`: a request/response test.
    Interval {
        report: &'a IntervalReport,
        transactions: bool,
    },
    /// A sweep starts with this many tests still to run (a lower bound with --until-ci), and
    /// how long they are expected to take.
    SweepStarted { tests: u64, expected_ns: u64 },
    /// A sweep point's test starts; `done`: tests this sweep has stored so far.
    PointStarted {
        point: &'a Value,
        repetition: u32,
        done: u64,
    },
    /// An experiment starts.
    ExperimentStarted(ExperimentStart<'a>),
    /// An experiment's step ended, with each flow's outcome.
    StepFinished {
        step: &'a Step,
        flows: &'a [FlowOutcome],
    },
    /// A search's trial ended.
    TrialFinished(&'a TrialOutcome),
    /// A search ended with this result.
    SearchFinished(&'a Value),
    /// The demo's agent listens here.
    DemoStarted(std::net::SocketAddr),
    /// A demo point's repetitions ended (fewer than planned when one failed).
    DemoPointFinished {
        test: &'a str,
        results: &'a [flowlab_control::TestResult],
    },
}

/// An experiment about to run: its name, steps (none with a search, which replaces the
/// plan), the network its flows run on and the clocks of its hosts.
#[derive(Debug, Clone, Copy)]
pub struct ExperimentStart<'a> {
    pub name: &'a str,
    pub steps: usize,
    pub search: bool,
    pub network: &'a NetworkKind,
    pub clocks: &'a Clocks,
}

/// Receives a runner's events.
pub trait Observer {
    fn on(&mut self, event: Event<'_>);
}

impl<F: FnMut(Event<'_>)> Observer for F {
    fn on(&mut self, event: Event<'_>) {
        self(event)
    }
}
