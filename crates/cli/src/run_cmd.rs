//! `flowlab run FILE`: an experiment across many hosts. The controller checks every agent and
//! its clock, then runs each step's flows together (each agent runs its flows as a client
//! towards the other end's agent, from an agreed start time), collects every result, runs the
//! file's search if it has one, and stores the experiment as one run.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use flowlab_control::{TestResult, TestRun};
use flowlab_experiment::{ClockEstimator, ClockSample, Experiment, SearchMachine, Step};
use flowlab_units::{format_duration_ns, format_rate};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The experiment file (TOML); see docs/experiments.md.
    pub file: PathBuf,
    /// Take host addresses from this running lab (`flowlab lab up`): hosts named as in the lab.
    #[arg(long)]
    pub lab: Option<String>,
    /// Pre-shared key of the agents.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// The results database (default: $FLOWLAB_DB, else ~/.local/share/flowlab/history.sqlite3).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Also write the HTML report of the run here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print the results as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// Clock exchanges per agent before the experiment.
const CLOCK_PROBES: usize = 16;
/// Flows of a step start this long after the controller schedules them.
const START_DELAY: Duration = Duration::from_millis(800);

/// One flow's outcome in one step.
struct FlowOutcome {
    step: usize,
    flow: String,
    labels: Vec<(String, String)>,
    repetition: u32,
    result: Result<TestResult, String>,
    one_way: Option<OneWay>,
}

/// Absolute one-way delay of a flow: its receive-minus-send timestamps with the estimated
/// offset between the two agents' clocks removed, and the bound of that estimate.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct OneWay {
    min_ns: f64,
    p50_ns: f64,
    p99_ns: f64,
    max_ns: f64,
    /// Error bound of the clock offset; the figures are only as good as this.
    bound_ns: f64,
    /// False when the bound exceeds the delay: the figures say little.
    valid: bool,
}

/// One-way delay from the receiving end's timestamps, corrected by the agents' clock offsets
/// (each relative to the controller). Loopback flows have round trips instead.
fn one_way(
    result: &TestResult,
    flow: &flowlab_experiment::ResolvedFlow,
    clocks: &BTreeMap<String, (i64, u64)>,
) -> Option<OneWay> {
    use flowlab_spec::Direction;
    let (receiving, sender_agent, receiver_agent) = match result.spec.direction {
        Direction::Oneway => (
            result.agent.as_ref()?,
            &flow.client_agent,
            &flow.server_agent,
        ),
        Direction::Reverse => (
            result.client.as_ref()?,
            &flow.server_agent,
            &flow.client_agent,
        ),
        Direction::Loopback => return None,
    };
    let rx = receiving.receiver.as_ref()?;
    let transit_min = rx.transit_min_ns? as f64;
    let relative = rx.relative_delay.as_ref()?;
    let (off_s, bound_s) = *clocks.get(sender_agent.as_str())?;
    let (off_r, bound_r) = *clocks.get(receiver_agent.as_str())?;
    let min_ns = transit_min - (off_r - off_s) as f64;
    let bound_ns = bound_r.saturating_add(bound_s) as f64;
    Some(OneWay {
        min_ns,
        p50_ns: min_ns + relative.p50_ns,
        p99_ns: min_ns + relative.p99_ns,
        max_ns: min_ns + relative.max_ns,
        bound_ns,
        valid: flowlab_experiment::one_way_valid(min_ns as i64, bound_ns as u64),
    })
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let text =
        std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {name}"))?;
    let experiment = flowlab_experiment::load(&text).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let key = args
        .key_file
        .as_deref()
        .map(flowlab_control::load_key)
        .transpose()?;
    let lab_agents = match &args.lab {
        Some(lab) => lab_agents(lab)?,
        None => BTreeMap::new(),
    };
    let relocate = |step: Step| relocate(step, &lab_agents);
    let steps: Vec<Step> = flowlab_experiment::plan(&experiment)
        .into_iter()
        .map(relocate)
        .collect();
    flowlab_sys::signal::interrupt_flag();

    // Before anything runs: every agent answers, speaks our version, and has a known clock.
    let agents: BTreeSet<String> = steps
        .iter()
        .flat_map(|s| {
            s.flows
                .iter()
                .flat_map(|f| [f.client_agent.clone(), f.server_agent.clone()])
        })
        .collect();
    let mut clocks = BTreeMap::new();
    for agent in &agents {
        let exchanges =
            flowlab_control::controller::probe_clock(agent, key.as_deref(), CLOCK_PROBES)
                .map_err(|e| anyhow::anyhow!("agent {agent}: {e}"))?;
        let mut estimator = ClockEstimator::new(10_000_000_000);
        for (t1, t2, t3, t4) in exchanges {
            let _ = estimator.add(ClockSample { t1, t2, t3, t4 });
        }
        let now = flowlab_sys::clock::realtime_ns();
        let (offset, bound) = estimator.offset_at(now).unwrap_or((0, u64::MAX));
        clocks.insert(agent.clone(), (offset, bound));
    }
    let mut out = std::io::stdout().lock();
    if !args.json {
        writeln!(
            out,
            "experiment {} ({} steps, {} agents)",
            experiment.name,
            steps.len(),
            agents.len()
        )?;
        for (agent, (offset, bound)) in &clocks {
            writeln!(
                out,
                "  clock of {agent}: offset {} ± {} from this host",
                format_duration_ns(*offset as f64),
                format_duration_ns(*bound as f64)
            )?;
        }
    }

    let mut outcomes: Vec<FlowOutcome> = Vec::new();
    for step in &steps {
        if flowlab_sys::signal::is_interrupted() {
            break;
        }
        let results = run_step(step, key.as_deref(), &clocks);
        if !args.json {
            print_step(&mut out, step, &results)?;
        }
        outcomes.extend(results);
    }
    let search = match &experiment.search {
        Some(spec) if !flowlab_sys::signal::is_interrupted() => {
            let mut machine = spec
                .machine(&experiment)
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            Some(run_search(
                &experiment,
                &mut machine,
                key.as_deref(),
                &clocks,
                &lab_agents,
                &mut outcomes,
                &mut out,
                args.json,
            )?)
        }
        _ => None,
    };

    // The results are printed even when they cannot be stored; that error comes last.
    let (stored, not_stored) = match store(&args, &experiment, &outcomes, search.as_ref()) {
        Ok(id) => (id, None),
        Err(e) => (None, Some(e)),
    };
    let clocks_json: BTreeMap<&String, serde_json::Value> = clocks
        .iter()
        .map(|(a, (o, b))| (a, serde_json::json!({ "offset_ns": o, "bound_ns": b })))
        .collect();
    if args.json {
        let flows: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|o| {
                serde_json::json!({
                    "step": o.step, "flow": o.flow, "repetition": o.repetition,
                    "labels": o.labels.iter().cloned().collect::<BTreeMap<_, _>>(),
                    "result": o.result.as_ref().ok(), "error": o.result.as_ref().err(),
                    "one_way_delay": o.one_way,
                })
            })
            .collect();
        let doc = serde_json::json!({
            "schema_version": flowlab_control::SCHEMA_VERSION,
            "experiment": experiment.name,
            "run": stored,
            "clocks": clocks_json,
            "flows": flows,
            "search": search,
        });
        writeln!(out, "{doc}")?;
    } else if let Some(id) = stored {
        writeln!(
            out,
            "stored as run {id} (flowlab show {id}, flowlab report {id})"
        )?;
    }
    let failed = outcomes.iter().filter(|o| o.result.is_err()).count();
    if failed > 0 {
        eprintln!(
            "flowlab: {failed} of {} flows failed; the others' results are kept",
            outcomes.len()
        );
    }
    if let Some(e) = not_stored {
        return Err(e.context("results not stored"));
    }
    Ok(if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Agent addresses of a running lab, by host name.
fn lab_agents(lab: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let dir = flowlab_netns::lab::default_run_dir();
    let state = flowlab_netns::lab::LabState::load(&dir, lab)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .ok_or_else(|| anyhow::anyhow!("no lab named '{lab}' is up (flowlab lab status)"))?;
    Ok(state.agents.into_iter().map(|a| (a.host, a.addr)).collect())
}

/// Points the step's flows at the lab's agents where the hosts are named as in the lab.
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

/// Runs a step's flows together: each on its client agent, from one start time (converted
/// to each agent's clock), collecting every result; a lost agent fails only its flows.
fn run_step(
    step: &Step,
    key: Option<&[u8]>,
    clocks: &BTreeMap<String, (i64, u64)>,
) -> Vec<FlowOutcome> {
    let start = flowlab_sys::clock::realtime_ns() + START_DELAY.as_nanos() as u64;
    // The step's total offered load labels its results (a search's trials relabel it).
    let offered: Option<u64> = step.flows.iter().map(|f| f.spec.rate_bps).sum();
    let mut labels = step.labels.clone();
    if let Some(total) = offered {
        labels.push(("offered_bps".into(), total.to_string()));
    }
    let labels = &labels;
    std::thread::scope(|scope| {
        let handles: Vec<_> = step
            .flows
            .iter()
            .map(|f| {
                let offset = clocks.get(&f.client_agent).map_or(0, |c| c.0);
                let at = (start + f.start_offset_ns).saturating_add_signed(offset);
                let length = f.spec.duration_ns.unwrap_or(60_000_000_000);
                let timeout =
                    Duration::from_nanos(length + f.start_offset_ns) + Duration::from_secs(30);
                scope.spawn(move || {
                    flowlab_control::controller::relay(
                        &f.client_agent,
                        key,
                        &f.server_agent,
                        f.spec.clone(),
                        Some(at),
                        timeout,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .zip(&step.flows)
            .map(|(h, f)| {
                let result = h
                    .join()
                    .unwrap_or_else(|_| Err("the flow's thread failed".into()));
                FlowOutcome {
                    step: step.index,
                    flow: f.name.clone(),
                    labels: labels.clone(),
                    repetition: step.repetition,
                    one_way: result.as_ref().ok().and_then(|r| one_way(r, f, clocks)),
                    result,
                }
            })
            .collect()
    })
}

fn print_step(out: &mut impl Write, step: &Step, results: &[FlowOutcome]) -> std::io::Result<()> {
    let labels: Vec<String> = step
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    writeln!(
        out,
        "step {} (repetition {}{}{})",
        step.index,
        step.repetition,
        if labels.is_empty() { "" } else { ", " },
        labels.join(" ")
    )?;
    let mut total = 0.0;
    let width = results
        .iter()
        .map(|r| r.flow.len())
        .chain([9]) // "all flows"
        .max()
        .unwrap_or(9);
    for r in results {
        match &r.result {
            Ok(t) => {
                let s = &t.summary;
                total += s.receiver_goodput_bps;
                let delay = s
                    .round_trip
                    .as_ref()
                    .map(|d| format!("rtt p50 {}", format_duration_ns(d.p50_ns)))
                    .or_else(|| {
                        s.relative_one_way_delay
                            .as_ref()
                            .map(|d| format!("delay p99 {}", format_duration_ns(d.p99_ns)))
                    })
                    .unwrap_or_default();
                writeln!(
                    out,
                    "  {:<width$} {:>13}  loss {:>7.3}%  {delay}",
                    r.flow,
                    format_rate(s.receiver_goodput_bps),
                    s.loss_pct
                )?;
            }
            Err(e) => writeln!(out, "  {:<width$} failed: {e}", r.flow)?,
        }
    }
    writeln!(out, "  {:<width$} {:>13}", "all flows", format_rate(total))
}

/// Runs the file's search: each trial is a step of the search's flows; the trial's loss is
/// the flows' total lost over total sent, its throughput their total receiver goodput.
#[allow(clippy::too_many_arguments)]
fn run_search(
    experiment: &Experiment,
    machine: &mut SearchMachine,
    key: Option<&[u8]>,
    clocks: &BTreeMap<String, (i64, u64)>,
    lab: &BTreeMap<String, String>,
    outcomes: &mut Vec<FlowOutcome>,
    out: &mut impl Write,
    json: bool,
) -> anyhow::Result<serde_json::Value> {
    let mut index = 0;
    while let Some(trial) = machine.next_trial() {
        if flowlab_sys::signal::is_interrupted() {
            bail!("interrupted during the search");
        }
        let Some(step) = flowlab_experiment::trial_step(experiment, &trial, index) else {
            bail!("the search names no flow of the experiment");
        };
        let step = relocate(step, lab);
        let results = run_step(&step, key, clocks);
        let (mut sent, mut lost, mut goodput) = (0u64, 0u64, 0.0);
        for r in &results {
            match &r.result {
                Ok(t) => {
                    sent += t.summary.packets_sent;
                    lost += t.summary.packets_lost;
                    goodput += t.summary.receiver_goodput_bps;
                }
                Err(e) => bail!("trial {index} failed: flow {}: {e}", r.flow),
            }
        }
        let loss = if sent == 0 {
            1.0
        } else {
            lost as f64 / sent as f64
        };
        if !json {
            writeln!(
                out,
                "trial {index}: offered {} -> goodput {}, loss {:.3}%",
                format_rate(trial.rate_bps as f64),
                format_rate(goodput),
                loss * 100.0
            )?;
        }
        machine
            .record(&trial, loss, goodput)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        outcomes.extend(results);
        index += 1;
    }
    let result = match machine {
        SearchMachine::Throughput(s) => serde_json::to_value(s.result()),
        SearchMachine::BackToBack(s) => serde_json::to_value(s.result()),
        SearchMachine::LossVsLoad(s) => serde_json::to_value(s.points()),
        SearchMachine::OfferedLoad(s) => serde_json::to_value(s.metrics()),
        SearchMachine::BurstSize(s) => serde_json::to_value(s.estimate()),
    }?;
    if !json {
        writeln!(out, "search result: {result}")?;
    }
    Ok(result)
}

/// Stores every finished flow of the experiment as one run; returns its id.
fn store(
    args: &RunArgs,
    experiment: &Experiment,
    outcomes: &[FlowOutcome],
    search: Option<&serde_json::Value>,
) -> anyhow::Result<Option<i64>> {
    let runs: Vec<(serde_json::Value, u32, TestRun)> = outcomes
        .iter()
        .filter_map(|o| {
            let result = o.result.as_ref().ok()?.clone();
            // Numeric labels stay numbers, so a report plots against them: the offered load of
            // each step or trial is the axis, flows the lines.
            let value = |v: &String| {
                v.parse::<f64>().map_or_else(
                    |_| serde_json::Value::String(v.clone()),
                    serde_json::Value::from,
                )
            };
            let mut point: BTreeMap<String, serde_json::Value> = o
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), value(v)))
                .collect();
            point.insert("flow".into(), o.flow.clone().into());
            Some((
                serde_json::to_value(point).ok()?,
                o.repetition,
                TestRun {
                    result,
                    packets: Vec::new(),
                },
            ))
        })
        .collect();
    if runs.is_empty() {
        return Ok(None);
    }
    let points: Vec<(serde_json::Value, u32, &TestRun)> =
        runs.iter().map(|(p, r, t)| (p.clone(), *r, t)).collect();
    // The search's result (lossless, peak and full-load throughput, ...) heads the report.
    let params = serde_json::json!({
        "experiment": experiment.name,
        "file": args.file.display().to_string(),
        "search": search,
    });
    let id =
        crate::history_cmd::store_test_run(args.db.as_deref(), "experiment", &params, &points)?;
    if let Some(report) = &args.report {
        crate::plot_cmd::write_report(args.db.as_deref(), id, report)?;
    }
    Ok(Some(id))
}
