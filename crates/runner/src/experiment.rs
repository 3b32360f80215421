//! Experiments across many hosts: each step's flows run together through a [`StepRunner`]
//! (the real network's agents, a lab's, or a simulated network), every result is collected,
//! the file's search runs if it has one, and the experiment is stored as one run with the
//! network it ran on.
//!
//! On a real network ([`Network`]) the controller first checks every agent and estimates its
//! clock, then each agent runs its flows as a client towards the other end's agent, from an
//! agreed start time converted to its own clock. On a simulated one
//! ([`SimulatedNetwork`](crate::simulated::SimulatedNetwork)) the simulator runs the same
//! flows in virtual time.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use flowlab_control::{TestResult, TestRun};
use flowlab_emu::EmuReport;
use flowlab_experiment::{Experiment, ResolvedFlow, SearchMachine, Step, TrialFlow};
use flowlab_netns::lab::LabState;
use flowlab_results::ReceiverReport;
use flowlab_spec::Direction;
use flowlab_store::RunId;
use serde_json::{json, Value};

use crate::emulated::EmulatorWatch;
use crate::observer::{Event, ExperimentStart, Observer};
pub use crate::outcome::{ClockOffset, Clocks, FlowOutcome, NetworkKind, OneWay, TrialOutcome};
use crate::simulated::SimulatedNetwork;
use clocks::ClockWatch;

mod clocks;

/// How often the agents' clocks are re-probed while an experiment runs.
const REPROBE_PERIOD: Duration = Duration::from_secs(2);
/// Flows of a step start this long after the controller schedules them.
const START_DELAY: Duration = Duration::from_millis(800);

/// Runs the flows of one step together, wherever they run.
pub trait StepRunner {
    /// What network this is, as the results record it.
    fn network(&self) -> &NetworkKind;
    /// The clocks of the agents the flows run on, as this runner knows them (empty where
    /// there are none to know).
    fn clocks(&self) -> &Clocks;
    /// Runs `step`'s flows together: one result per flow, in the step's order. A failed flow
    /// fails alone.
    fn run_step(&mut self, step: &Step) -> Vec<Result<TestResult, String>>;
}

/// The real network: flowlab agents, each running its flows as a client (`--allow-relay`).
pub struct Network {
    key: Option<Vec<u8>>,
    /// The agents' clocks, re-probed in the background; `clocks` is their fit after the last
    /// step.
    watch: ClockWatch,
    clocks: Clocks,
    /// Real, or a lab's.
    kind: NetworkKind,
}

impl Network {
    /// Checks that every agent of `steps` answers and speaks our version, and starts
    /// estimating its clock (re-probed every [`REPROBE_PERIOD`] until the network is
    /// dropped), before anything runs. `kind`: the real network, or a lab's agents.
    pub fn connect(
        steps: &[Step],
        key: Option<Vec<u8>>,
        kind: NetworkKind,
    ) -> anyhow::Result<Network> {
        let agents: BTreeSet<&String> = steps
            .iter()
            .flat_map(|s| s.flows.iter())
            .flat_map(|f| [&f.client_agent, &f.server_agent])
            .collect();
        let watch = ClockWatch::start(&agents, key.as_deref(), REPROBE_PERIOD)?;
        let clocks = watch.clocks();
        Ok(Network {
            key,
            watch,
            clocks,
            kind,
        })
    }
}

impl StepRunner for Network {
    fn network(&self) -> &NetworkKind {
        &self.kind
    }

    fn clocks(&self) -> &Clocks {
        &self.clocks
    }

    /// Each flow on its client agent, from one start time (converted to each agent's clock);
    /// a lost agent fails only its flows.
    fn run_step(&mut self, step: &Step) -> Vec<Result<TestResult, String>> {
        let start = flowlab_sys::clock::realtime_ns() + START_DELAY.as_nanos() as u64;
        let (key, clocks) = (self.key.as_deref(), &self.clocks);
        let drain = step.drain_ns.map(Duration::from_nanos);
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = step
                .flows
                .iter()
                .map(|f| {
                    let offset = clocks.get(&f.client_agent).map_or(0, |c| c.at(start).0);
                    let at = (start + f.start_offset_ns).saturating_add_signed(offset);
                    let length = f.spec.duration_ns.unwrap_or(60_000_000_000);
                    let timeout = Duration::from_nanos(length + f.start_offset_ns)
                        + drain.unwrap_or_default()
                        + Duration::from_secs(30);
                    scope.spawn(move || {
                        flowlab_control::controller::relay(
                            &f.client_agent,
                            key,
                            &f.server_agent,
                            f.spec.clone(),
                            Some(at),
                            drain,
                            timeout,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("the flow's thread failed".into()))
                })
                .collect()
        });
        // The fit now covers the step: its one-way delays are corrected along it.
        self.clocks = self.watch.clocks();
        results
    }
}

/// The state of a running lab (`flowlab lab up`).
fn lab_state(lab: &str) -> anyhow::Result<LabState> {
    let dir = flowlab_netns::lab::default_run_dir();
    LabState::load(&dir, lab)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .ok_or_else(|| anyhow::anyhow!("no lab named '{lab}' is up (flowlab lab status)"))
}

/// Agent addresses of a lab, by host name.
fn lab_agents(state: &LabState) -> BTreeMap<String, String> {
    let agents = state.agents.iter();
    agents.map(|a| (a.host.clone(), a.addr.clone())).collect()
}

/// Points the step's flows at `lab`'s agents where the hosts are named as in the lab.
fn relocate(mut step: Step, lab: &BTreeMap<String, String>) -> Step {
    for f in &mut step.flows {
        if let Some(a) = lab.get(&f.from) {
            f.client_agent = a.clone();
        }
        if let Some(a) = lab.get(&f.to) {
            f.server_agent = a.clone();
        }
    }
    step
}

/// The experiment's steps in order, its hosts at `lab`'s agents where named as in the lab.
pub fn steps(experiment: &Experiment, lab: &BTreeMap<String, String>) -> Vec<Step> {
    flowlab_experiment::plan(experiment)
        .into_iter()
        .map(|s| relocate(s, lab))
        .collect()
}

/// Steps that name every agent the experiment uses, to check and clock them first: the plan's
/// steps, or with a search (which replaces the plan) its first trial, since every trial runs
/// the same flows between the same hosts.
fn reaching_every_agent(
    experiment: &Experiment,
    steps: &[Step],
    lab: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<Step>> {
    let Some(search) = &experiment.search else {
        return Ok(steps.to_vec());
    };
    let mut machine = search
        .machine(experiment)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let trial = machine.next_trial();
    let first = trial.and_then(|t| flowlab_experiment::trial_step(experiment, &t, 0));
    Ok(first.map(|s| relocate(s, lab)).into_iter().collect())
}

/// Where `flowlab run` runs an experiment's flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// The agents at the file's host addresses.
    Real,
    /// A running lab's agents, for hosts named as in the lab.
    Lab(&'a str),
    /// The simulated network of this network file.
    Sim(&'a Path),
}

impl<'a> Target<'a> {
    /// From `--lab` and `--sim`, which exclude each other.
    pub fn from_flags(lab: Option<&'a str>, sim: Option<&'a Path>) -> anyhow::Result<Target<'a>> {
        Ok(match (lab, sim) {
            (Some(_), Some(_)) => bail!("--lab and --sim exclude each other"),
            (Some(lab), None) => Target::Lab(lab),
            (None, Some(sim)) => Target::Sim(sim),
            (None, None) => Target::Real,
        })
    }
}

/// An experiment file ready to run on its network.
pub struct Prepared {
    pub experiment: Experiment,
    pub steps: Vec<Step>,
    /// A lab's agents by host name (empty off a lab).
    lab: BTreeMap<String, String>,
    /// An emulated lab's report, whose counters are kept with the run.
    emulator_report: Option<PathBuf>,
    runner: Box<dyn StepRunner>,
}

/// Loads the experiment `file` and readies `target`: a real network's or lab's agents are
/// checked and their clocks estimated (`key`: the agents' pre-shared key); a network file is
/// loaded and must place every host of the experiment.
pub fn prepare(file: &Path, target: Target, key: Option<Vec<u8>>) -> anyhow::Result<Prepared> {
    let name = file.display();
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {name}"))?;
    let experiment = flowlab_experiment::load(&text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let state = match target {
        Target::Lab(lab) => Some(lab_state(lab)?),
        Target::Real | Target::Sim(_) => None,
    };
    let lab = state.as_ref().map(lab_agents).unwrap_or_default();
    let emulator_report = state.and_then(|s| s.emulator).map(|e| e.report);
    let steps = steps(&experiment, &lab);
    let runner: Box<dyn StepRunner> = match target {
        Target::Sim(path) => Box::new(SimulatedNetwork::for_experiment(path, &experiment)?),
        Target::Real => agents(&experiment, &steps, &lab, key, NetworkKind::Real)?,
        Target::Lab(name) => {
            let kind = NetworkKind::Lab { name: name.into() };
            agents(&experiment, &steps, &lab, key, kind)?
        }
    };
    Ok(Prepared {
        experiment,
        steps,
        lab,
        emulator_report,
        runner,
    })
}

/// Readies `experiment` on the running lab `state` (hosts named as in the lab), as
/// [`prepare`] does for [`Target::Lab`], for a caller that brought the lab up itself.
pub fn prepare_on_lab(experiment: Experiment, state: &LabState) -> anyhow::Result<Prepared> {
    let lab = lab_agents(state);
    let steps = steps(&experiment, &lab);
    let kind = NetworkKind::Lab {
        name: state.name.clone(),
    };
    let runner = agents(&experiment, &steps, &lab, None, kind)?;
    Ok(Prepared {
        experiment,
        steps,
        emulator_report: state.emulator.as_ref().map(|e| e.report.clone()),
        lab,
        runner,
    })
}

/// The agents of `steps`, checked and clocked.
fn agents(
    experiment: &Experiment,
    steps: &[Step],
    lab: &BTreeMap<String, String>,
    key: Option<Vec<u8>>,
    kind: NetworkKind,
) -> anyhow::Result<Box<dyn StepRunner>> {
    let reached = reaching_every_agent(experiment, steps, lab)?;
    Ok(Box::new(Network::connect(&reached, key, kind)?))
}

impl Prepared {
    /// Runs the experiment and its search (see [`run_experiment`]); on an emulated lab, the
    /// emulator's counters over the run come with the outcome.
    pub fn run(&mut self, observer: &mut dyn Observer) -> anyhow::Result<ExperimentOutcome> {
        let watch = self.emulator_report.as_deref().map(EmulatorWatch::start);
        let runner = self.runner.as_mut();
        let mut outcome =
            run_experiment(&self.experiment, &self.steps, &self.lab, runner, observer)?;
        outcome.emulator = watch.map(|w| w.finish().map_err(|e| format!("{e:#}")));
        Ok(outcome)
    }
}

/// What the end that received the flow measured (the client, for reverse and loopback).
fn arrivals(result: &TestResult) -> Option<&ReceiverReport> {
    let receiving = match result.spec.direction {
        Direction::Oneway => result.agent.as_ref(),
        Direction::Reverse | Direction::Loopback => result.client.as_ref(),
    };
    receiving?.receiver.as_ref()
}

/// One-way delay from the receiving end's timestamps, corrected by the agents' clock offsets
/// (each relative to the controller) along their fitted lines at the middle of the flow's
/// arrivals. The smallest delay came at an unknown time of the flow, so the bound adds how
/// far the two clocks may drift apart in half its span. Loopback flows have round trips instead.
fn one_way(result: &TestResult, flow: &ResolvedFlow, clocks: &Clocks) -> Option<OneWay> {
    let (sender_agent, receiver_agent) = match result.spec.direction {
        Direction::Oneway => (&flow.client_agent, &flow.server_agent),
        Direction::Reverse => (&flow.server_agent, &flow.client_agent),
        Direction::Loopback => return None,
    };
    let rx = arrivals(result)?;
    let transit_min = rx.transit_min_ns? as f64;
    let relative = rx.relative_delay.as_ref()?;
    let sender = clocks.get(sender_agent.as_str())?;
    let receiver = clocks.get(receiver_agent.as_str())?;
    // `started_at_ns` is on the relaying client agent's clock; the fits are on ours.
    let client_offset = clocks
        .get(flow.client_agent.as_str())
        .map_or(0, |c| c.offset_ns);
    let middle = (result.started_at_ns + rx.duration_ns / 2).saturating_add_signed(-client_offset);
    let ((rx_off, rx_bound), (tx_off, tx_bound)) = (receiver.at(middle), sender.at(middle));
    let drift_ppm = receiver.drift_ppm.unwrap_or(0.0) - sender.drift_ppm.unwrap_or(0.0);
    let drift_bound_ppm = receiver
        .drift_bound_ppm
        .zip(sender.drift_bound_ppm)
        .map(|(r, s)| r + s);
    let min_ns = transit_min - rx_off.saturating_sub(tx_off) as f64;
    // The fitted drift apart, and its own bound where the flow outlasts the probes' span.
    let apart_ppm = drift_ppm.abs() + drift_bound_ppm.unwrap_or(0.0);
    let apart_ns = apart_ppm * 1e-6 * rx.duration_ns as f64 / 2.0;
    let bound_ns = rx_bound.saturating_add(tx_bound) as f64 + apart_ns;
    Some(OneWay {
        min_ns,
        p50_ns: min_ns + relative.p50_ns,
        p99_ns: min_ns + relative.p99_ns,
        max_ns: min_ns + relative.max_ns,
        bound_ns,
        valid: flowlab_experiment::one_way_valid(min_ns as i64, bound_ns as u64),
        clock_drift_ppm: drift_bound_ppm.map(|_| drift_ppm),
        clock_drift_bound_ppm: drift_bound_ppm,
    })
}

/// What an experiment measured.
#[derive(Debug)]
pub struct ExperimentOutcome {
    pub name: String,
    pub network: NetworkKind,
    pub clocks: Clocks,
    pub flows: Vec<FlowOutcome>,
    /// The search's result, if the file has a search.
    pub search: Option<Value>,
    /// On an emulated lab: the emulator's counters over the run, or why they could not be
    /// read.
    pub emulator: Option<Result<EmuReport, String>>,
}

/// Runs one step through `runner` and labels its flows' outcomes.
fn run_step(step: &Step, runner: &mut dyn StepRunner) -> Vec<FlowOutcome> {
    // The step's total offered load labels its results (a search's trials relabel it).
    let offered: Option<u64> = step.flows.iter().map(|f| f.spec.rate_bps).sum();
    let mut labels = step.labels.clone();
    if let Some(total) = offered {
        labels.push(("offered_bps".into(), total.to_string()));
    }
    let results = runner.run_step(step);
    let clocks = runner.clocks();
    results
        .into_iter()
        .zip(&step.flows)
        .map(|(result, f)| FlowOutcome {
            step: step.index,
            flow: f.name.clone(),
            labels: labels.clone(),
            repetition: step.repetition,
            one_way: result.as_ref().ok().and_then(|r| one_way(r, f, clocks)),
            result,
        })
        .collect()
}

/// Runs `steps` (from [`steps`]: none when `experiment` has a search) of `experiment`, then
/// its search, through `runner`. Stops between steps at Ctrl-C; a failed or interrupted search
/// is an error.
pub fn run_experiment(
    experiment: &Experiment,
    steps: &[Step],
    lab: &BTreeMap<String, String>,
    runner: &mut dyn StepRunner,
    observer: &mut dyn Observer,
) -> anyhow::Result<ExperimentOutcome> {
    observer.on(Event::ExperimentStarted(ExperimentStart {
        name: &experiment.name,
        steps: steps.len(),
        search: experiment.search.is_some(),
        network: runner.network(),
        clocks: runner.clocks(),
    }));
    let mut flows = Vec::new();
    for step in steps {
        if flowlab_sys::signal::is_interrupted() {
            break;
        }
        let outcomes = run_step(step, runner);
        observer.on(Event::StepFinished {
            step,
            flows: &outcomes,
        });
        flows.extend(outcomes);
    }
    let search = match &experiment.search {
        Some(spec) if !flowlab_sys::signal::is_interrupted() => {
            let mut machine = spec
                .machine(experiment)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let search = Search {
                experiment,
                lab,
                runner,
                observer,
            };
            Some(search.run(&mut machine, &mut flows)?)
        }
        _ => None,
    };
    Ok(ExperimentOutcome {
        name: experiment.name.clone(),
        network: runner.network().clone(),
        clocks: runner.clocks().clone(),
        flows,
        search,
        emulator: None,
    })
}

/// A search in progress: where its trials run and who hears of them.
struct Search<'a> {
    experiment: &'a Experiment,
    lab: &'a BTreeMap<String, String>,
    runner: &'a mut dyn StepRunner,
    observer: &'a mut dyn Observer,
}

impl Search<'_> {
    /// Runs the file's search: each trial is a step of the search's flows, fed back as the
    /// flows' total loss ratio and output throughput ([`trial_outcome`]).
    fn run(
        self,
        machine: &mut SearchMachine,
        flows: &mut Vec<FlowOutcome>,
    ) -> anyhow::Result<Value> {
        let mut index = 0;
        while let Some(trial) = machine.next_trial() {
            if flowlab_sys::signal::is_interrupted() {
                bail!("interrupted during the search");
            }
            let Some(step) = flowlab_experiment::trial_step(self.experiment, &trial, index) else {
                bail!("the search names no flow of the experiment");
            };
            let step = relocate(step, self.lab);
            let outcomes = run_step(&step, self.runner);
            let outcome = trial_outcome(index, trial.rate_bps, &outcomes)?;
            self.observer.on(Event::TrialFinished(&outcome));
            machine
                .record(&trial, outcome.loss, outcome.goodput_bps)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            flows.extend(outcomes);
            index += 1;
        }
        let result = match machine {
            SearchMachine::Throughput(s) => serde_json::to_value(s.result()),
            SearchMachine::BackToBack(s) => serde_json::to_value(s.result()),
            SearchMachine::LossVsLoad(s) => serde_json::to_value(s.points()),
            SearchMachine::OfferedLoad(s) => serde_json::to_value(s.metrics()),
            SearchMachine::BurstSize(s) => serde_json::to_value(s.estimate()),
        }?;
        self.observer.on(Event::SearchFinished(&result));
        Ok(result)
    }
}

/// What `result`'s flow offered, sent and received, as a search's trial counts it: the
/// offered rate is the constant schedule's (rate times sockets), none for a traffic model.
fn trial_flow(result: &TestResult) -> TrialFlow {
    let spec = &result.spec;
    let s = &result.summary;
    TrialFlow {
        offered_bps: spec
            .rate_bps
            .filter(|_| spec.traffic.is_none())
            .map(|rate| rate.saturating_mul(u64::from(spec.flows))),
        packets_sent: s.packets_sent,
        packets_lost: s.packets_lost,
        bytes_sent: s.bytes_sent,
        bytes_received: s.bytes_received,
        receive_span_ns: arrivals(result).map_or(0, |rx| rx.duration_ns),
    }
}

/// A trial's totals over its flows (see [`flowlab_experiment::trial`]); a failed flow fails
/// the trial. `rate_bps`: the trial's rate as the search named it, shown as the offered load
/// where a flow's own rate is unknown.
fn trial_outcome(
    index: usize,
    rate_bps: u64,
    flows: &[FlowOutcome],
) -> anyhow::Result<TrialOutcome> {
    let mut counted = Vec::new();
    for r in flows {
        match &r.result {
            Ok(t) => counted.push(trial_flow(t)),
            Err(e) => bail!("trial {index} failed: flow {}: {e}", r.flow),
        }
    }
    let totals = flowlab_experiment::trial_totals(&counted);
    let offered: Option<u64> = counted.iter().map(|f| f.offered_bps).sum();
    Ok(TrialOutcome {
        index,
        offered_bps: offered.unwrap_or(rate_bps),
        goodput_bps: totals.throughput_bps,
        loss: totals.loss_ratio,
        duration_ns: flows
            .iter()
            .filter_map(|r| r.result.as_ref().ok()?.spec.duration_ns)
            .max(),
    })
}

impl ExperimentOutcome {
    /// Flows that gave no result.
    pub fn failed(&self) -> usize {
        self.flows.iter().filter(|o| o.result.is_err()).count()
    }

    /// Stores every finished flow as one run (`file` names the experiment file) and writes
    /// its HTML report to `report` if given; `None` when no flow finished.
    pub fn store(
        &self,
        db: Option<&Path>,
        file: &str,
        report: Option<&Path>,
    ) -> anyhow::Result<Option<RunId>> {
        let runs: Vec<(Value, u32, TestRun)> = self
            .flows
            .iter()
            .filter_map(|o| {
                let result = o.result.as_ref().ok()?.clone();
                let run = TestRun {
                    result,
                    packets: Vec::new(),
                };
                Some((point_of(o), o.repetition, run))
            })
            .collect();
        if runs.is_empty() {
            return Ok(None);
        }
        let points: Vec<(Value, u32, &TestRun)> =
            runs.iter().map(|(p, r, t)| (p.clone(), *r, t)).collect();
        // The search's result (lossless, peak and full-load throughput, ...) heads the report.
        let mut params = json!({
            "experiment": self.name, "file": file, "network": self.network, "search": self.search,
        });
        if let Some(emulator) = self.emulator_json() {
            params["emulator"] = emulator;
        }
        let id = crate::record::store_test_run(db, "experiment", &params, &points)?;
        if let Some(report) = report {
            crate::record::write_report(db, id, report)?;
        }
        Ok(Some(id))
    }

    /// The result document of `flowlab run --json`; `run`: where it was stored.
    pub fn to_json(&self, run: Option<RunId>) -> Value {
        let flows: Vec<Value> = self
            .flows
            .iter()
            .map(|o| {
                json!({
                    "step": o.step, "flow": o.flow, "repetition": o.repetition,
                    "labels": o.labels.iter().cloned().collect::<BTreeMap<_, _>>(),
                    "result": o.result.as_ref().ok(), "error": o.result.as_ref().err(),
                    "one_way_delay": o.one_way,
                })
            })
            .collect();
        json!({
            "schema_version": flowlab_control::SCHEMA_VERSION,
            "experiment": self.name,
            "network": self.network,
            "run": run,
            "clocks": self.clocks,
            "flows": flows,
            "search": self.search,
            "emulator": self.emulator_json(),
        })
    }

    /// The emulator's counters (`flowlab_emu::EmuReport`) or `{"error": why}`; none off an
    /// emulated lab.
    fn emulator_json(&self) -> Option<Value> {
        Some(match self.emulator.as_ref()? {
            Ok(report) => json!(report),
            Err(why) => json!({ "error": why }),
        })
    }
}

/// A flow's stored parameters: its labels, numbers kept numbers so a report plots against
/// them (the offered load of each step or trial is the axis, flows the lines).
fn point_of(o: &FlowOutcome) -> Value {
    let value = |v: &String| v.parse::<f64>().map_or_else(|_| json!(v), Value::from);
    let mut point: BTreeMap<String, Value> = o
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), value(v)))
        .collect();
    point.insert("flow".into(), o.flow.clone().into());
    json!(point)
}

#[cfg(test)]
mod tests;
