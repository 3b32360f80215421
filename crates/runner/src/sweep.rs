//! Sweeps: one test per point of a parameter grid (the cartesian product of the `--vary`
//! axes), repeated for confidence intervals or until the interval is tight, in random order
//! if asked, each finished point stored at once so an interrupted sweep loses nothing and a
//! resumed one runs only what is missing.

use std::path::Path;

use anyhow::{bail, Context};
use flowlab_control::{run_test, TestOptions};
use flowlab_results::PacketRecord;
use flowlab_spec::{Direction, Param, ParamValue, Protocol, TestSpec, ValueKind};
use flowlab_store::{Point as StoredPoint, Run, RunId, RunStatus, Store};
use rand::seq::SliceRandom as _;
use rand::SeedableRng as _;
use serde_json::{json, Map, Value};

use crate::defaults;
use crate::observer::{Event, Observer};
use crate::record::{environment, open_store, point_data};

/// Most points one sweep may have: more is a typo in a range, not an experiment.
pub const MAX_POINTS: usize = 100_000;

/// One swept parameter and its values, each typed and as stored (numbers in bytes, bit/s,
/// seconds or counts, so reports plot against them; names as typed).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub param: Param,
    pub values: Vec<(ParamValue, Value)>,
}

/// A warning when a swept protocol changes what is not given: each protocol then takes its
/// own default rate and size (UDP 1 Mbit/s in 1200 B, TCP as fast as it can in 256 kB), and
/// the points compare more than the protocol.
pub fn protocol_defaults_warning(axes: &[Axis], base: &PointBase) -> Option<String> {
    let sweeps_protocol = axes.iter().any(|a| a.param == Param::Protocol);
    let set = |p: Param| base.given.contains(&p) || axes.iter().any(|a| a.param == p);
    let free: Vec<&str> = [Param::Rate, Param::Size]
        .into_iter()
        .filter(|&p| !set(p))
        .map(|p| p.name())
        .collect();
    (sweeps_protocol && !free.is_empty()).then(|| {
        format!(
            "warning: --vary proto without --{}: each protocol takes its own default (UDP 1 Mbit/s in 1200 B, TCP max in 256 kB)",
            free.join(" or --")
        )
    })
}

/// `NAME=v1,v2,a..b:step`: a parameter (by its flag or file name) and its values, as people
/// type them. Numeric parameters take ranges; a traffic model's files are read here.
pub fn parse_vary(spec: &str) -> anyhow::Result<Axis> {
    let bad = |why: &dyn std::fmt::Display| anyhow::anyhow!("invalid --vary '{spec}': {why}");
    let (name, values) = spec
        .split_once('=')
        .ok_or_else(|| bad(&"expected NAME=VALUES, e.g. size=100..8000:100"))?;
    let param: Param = name.parse().map_err(|e| bad(&e))?;
    let mut out = Vec::new();
    for item in values.split(',').map(str::trim) {
        if item.is_empty() {
            bail!(bad(&"empty value"));
        }
        match item.split_once("..") {
            Some((a, rest)) if numeric(param) => {
                out.extend(range(param, a, rest).map_err(|e| bad(&e))?);
            }
            _ => {
                let value = param.parse_value(item).map_err(|e| bad(&e))?;
                let value = with_files(value).map_err(|e| bad(&e))?;
                out.push((value.clone(), stored(param, &value, item)));
            }
        }
    }
    Ok(Axis { param, values: out })
}

/// The axes of every `--vary`.
pub fn parse_axes(vary: &[String]) -> anyhow::Result<Vec<Axis>> {
    vary.iter().map(|v| parse_vary(v)).collect()
}

/// Parameters whose values are numbers: they take ranges and are stored as numbers.
fn numeric(param: Param) -> bool {
    matches!(
        param.kind(),
        ValueKind::Rate | ValueKind::Bytes | ValueKind::Duration | ValueKind::Number
    )
}

/// A number in the parameter's unit (bit/s, bytes, ns, count), for a range's bounds.
fn magnitude(value: &ParamValue) -> Option<u64> {
    match value {
        ParamValue::Rate(r) => *r,
        ParamValue::Bytes(n) | ParamValue::Duration(n) | ParamValue::Number(n) => Some(*n),
        _ => None,
    }
}

fn of_magnitude(param: Param, n: u64) -> ParamValue {
    match param.kind() {
        ValueKind::Rate => ParamValue::Rate(Some(n)),
        ValueKind::Bytes => ParamValue::Bytes(n),
        ValueKind::Duration => ParamValue::Duration(n),
        _ => ParamValue::Number(n),
    }
}

/// `a..b:step` (the step is 1 unless a duration) into its values, exactly.
fn range(param: Param, a: &str, rest: &str) -> anyhow::Result<Vec<(ParamValue, Value)>> {
    let bound = |text: &str| -> anyhow::Result<u64> {
        magnitude(&param.parse_value(text)?)
            .ok_or_else(|| anyhow::anyhow!("'max' cannot be in a range"))
    };
    let (b, step) = match rest.split_once(':') {
        Some((b, step)) => (b, Some(bound(step)?)),
        None => (rest, None),
    };
    let (a, b) = (bound(a)?, bound(b)?);
    let step = match step {
        Some(s) => s,
        None if param.kind() == ValueKind::Duration => {
            bail!("a range of durations needs a step (1s..10s:1s)")
        }
        None => 1,
    };
    if step == 0 || b < a {
        bail!("a range a..b:step needs a <= b and a step above 0");
    }
    let n = (b - a) / step + 1;
    if n > MAX_POINTS as u64 {
        bail!("{n} values, at most {MAX_POINTS}");
    }
    Ok((0..n)
        .map(|i| {
            let v = of_magnitude(param, a + i * step);
            let json = stored(param, &v, "");
            (v, json)
        })
        .collect())
}

/// A traffic model with the files it names read and embedded, so the agent needs none.
fn with_files(value: ParamValue) -> anyhow::Result<ParamValue> {
    match value {
        ParamValue::Traffic(t) => Ok(ParamValue::Traffic(crate::test::embed_files(&t)?)),
        other => Ok(other),
    }
}

/// How a value is stored in a point: numbers in their unit (durations in seconds), names
/// lower-case, anything else as typed.
fn stored(param: Param, value: &ParamValue, typed: &str) -> Value {
    match (param.kind(), value) {
        (ValueKind::Duration, ParamValue::Duration(ns)) => seconds(*ns),
        (ValueKind::Rate, ParamValue::Rate(None)) => json!("max"),
        (_, v) if numeric(param) => magnitude(v).map_or(Value::Null, |n| json!(n)),
        (ValueKind::Protocol | ValueKind::Direction | ValueKind::Pacing, _) => {
            json!(typed.to_ascii_lowercase())
        }
        _ => json!(typed),
    }
}

/// Whole seconds as JSON integers (so `duration=1s` prints as 1, not 1.0).
fn seconds(ns: u64) -> Value {
    if ns.is_multiple_of(1_000_000_000) {
        json!(ns / 1_000_000_000)
    } else {
        json!(ns as f64 / 1e9)
    }
}

/// One point of a sweep: its parameters as stored, and the test it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub params: Value,
    pub spec: TestSpec,
}

/// Every combination of the axes' values, the first axis varying slowest: the stored
/// parameters and the settings of each point.
pub fn cartesian(axes: &[Axis]) -> Vec<(Value, Vec<(Param, ParamValue)>)> {
    let mut points = vec![(Map::new(), Vec::new())];
    for axis in axes {
        points = points
            .into_iter()
            .flat_map(|(params, settings)| {
                axis.values.iter().map(move |(value, json)| {
                    let (mut params, mut settings) = (params.clone(), settings.clone());
                    params.insert(axis.param.name().to_string(), json.clone());
                    settings.push((axis.param, value.clone()));
                    (params, settings)
                })
            })
            .collect();
    }
    points
        .into_iter()
        .map(|(params, settings)| (Value::Object(params), settings))
        .collect()
}

/// The sweep's points, each with the test `spec_of` makes of its settings. Every point is
/// checked here, before the first test: a typo must not stop a sweep halfway.
pub fn points(
    axes: &[Axis],
    spec_of: impl Fn(&[(Param, ParamValue)]) -> anyhow::Result<TestSpec>,
) -> anyhow::Result<Vec<Point>> {
    for (i, axis) in axes.iter().enumerate() {
        if axes[..i].iter().any(|a| a.param == axis.param) {
            bail!(
                "invalid --vary: {} is given twice (list its values in one --vary)",
                axis.param
            );
        }
    }
    let total: usize = axes.iter().map(|a| a.values.len()).product();
    if total > MAX_POINTS {
        bail!("the sweep has {total} points, at most {MAX_POINTS}");
    }
    cartesian(axes)
        .into_iter()
        .map(|(params, settings)| {
            let spec = spec_of(&settings).with_context(|| {
                format!("point {}", flowlab_report::plot::point_label(&params, 0))
            })?;
            Ok(Point { params, spec })
        })
        .collect()
}

/// The test a sweep's points start from: the spec its flags describe, and the parameters
/// those flags gave; the others follow their defaults.
#[derive(Debug, Clone)]
pub struct PointBase {
    pub spec: TestSpec,
    pub given: Vec<Param>,
}

impl PointBase {
    /// One point's test, validated: see [`PointBase::fill`].
    pub fn spec(&self, point: &[(Param, ParamValue)]) -> anyhow::Result<TestSpec> {
        let spec = self.fill(point)?;
        spec.validate()
            .map_err(|e| anyhow::anyhow!("invalid test: {e}"))?;
        Ok(spec)
    }

    /// The point's settings on top of the base, not yet validated. What neither the flags
    /// nor the point give follows the point as it would on the command line: the protocol a
    /// traffic model prefers, a protocol's size and rate, no default duration beside a count,
    /// a preset's flows. The command line's own flags are such a point on a bare base.
    pub fn fill(&self, point: &[(Param, ParamValue)]) -> anyhow::Result<TestSpec> {
        let point_gives = |p: Param| point.iter().any(|(q, _)| *q == p);
        let free = |p: Param| !point_gives(p) && !self.given.contains(&p);
        let mut spec = self.spec.clone();
        for (param, value) in point {
            spec.set(*param, value.clone())?;
        }
        let model = point_gives(Param::Traffic) || point_gives(Param::Preset);
        if model && free(Param::Protocol) {
            spec.protocol = defaults::protocol(spec.traffic.as_ref());
        }
        let transactions = spec
            .traffic
            .as_ref()
            .is_some_and(|t| t.transactions().is_some());
        if free(Param::Size) {
            spec.size = flowlab_spec::default_size(spec.protocol);
        }
        if free(Param::Rate) {
            let paced = flowlab_spec::default_rate_bps(spec.protocol);
            spec.rate_bps = paced.filter(|_| !transactions);
        }
        if spec.protocol == Protocol::Icmp {
            icmp_defaults(&mut spec, free(Param::Rate));
        }
        if free(Param::Duration) {
            let default = flowlab_spec::DEFAULT_DURATION_NS;
            spec.duration_ns = spec.count.is_none().then_some(default);
        }
        // Set again: a constant model's missing rate and size are the point's final ones.
        for (param, value) in point.iter().filter(|(p, _)| *p == Param::Traffic) {
            spec.set(*param, value.clone())?;
        }
        if let Some(t) = spec.traffic.as_ref().filter(|_| model && !transactions) {
            if free(Param::Flows) {
                spec.flows = defaults::model_flows(t, spec.seed);
            }
        }
        Ok(spec)
    }
}

/// An echo is a round trip, so the flags' one-way default becomes loopback; a rate left to
/// the default sends one request a second at any size, as ping does.
fn icmp_defaults(spec: &mut TestSpec, rate_free: bool) {
    if spec.direction == Direction::Oneway {
        spec.direction = Direction::Loopback;
    }
    if rate_free {
        spec.rate_bps = Some(flowlab_spec::icmp_rate_bps(spec.size));
    }
}

/// Every point of `axes` on `base`, validated; with `packet_log` each test keeps its
/// packets' fates for the store.
pub fn points_on(axes: &[Axis], base: &PointBase, packet_log: bool) -> anyhow::Result<Vec<Point>> {
    points(axes, |point| {
        let mut spec = base.spec(point)?;
        spec.packet_log = packet_log;
        Ok(spec)
    })
}

/// What running one point gave.
pub enum PointOutcome {
    Done {
        result: Value,
        metrics: Vec<(String, f64)>,
        packets: Option<Vec<PacketRecord>>,
    },
    /// Ctrl-C during the test: the partial test is not stored.
    Interrupted,
    Failed(String),
}

/// Runs one point's test.
pub trait PointRunner {
    fn run(&mut self, point: &Point, repetition: u32) -> anyhow::Result<PointOutcome>;
}

/// Runs points as tests against a real agent.
pub struct NetworkPoints {
    pub target: String,
    pub key: Option<Vec<u8>>,
    pub drain: std::time::Duration,
    /// Keep every packet's fate for the store.
    pub packet_log: bool,
}

impl PointRunner for NetworkPoints {
    fn run(&mut self, point: &Point, _repetition: u32) -> anyhow::Result<PointOutcome> {
        let options = TestOptions {
            target: self.target.clone(),
            spec: point.spec.clone(),
            key: self.key.clone(),
            drain: self.drain,
            interface: None,
            agent_interface: None,
            bind: None,
            cport: None,
        };
        let test = match run_test(&options, &mut |_| {}) {
            Ok(t) => t,
            Err(e) => return Ok(PointOutcome::Failed(e.to_string())),
        };
        if test.result.interrupted {
            return Ok(PointOutcome::Interrupted);
        }
        if let Some(e) = &test.result.error {
            return Ok(PointOutcome::Failed(e.clone()));
        }
        let (result, metrics) = point_data(&test)?;
        let packets = self.packet_log.then_some(test.packets);
        Ok(PointOutcome::Done {
            result,
            metrics,
            packets,
        })
    }
}

/// How the sweep repeats points.
#[derive(Debug, Clone)]
pub struct Plan {
    pub points: Vec<Point>,
    pub repeat: u32,
    /// (target relative half-width, most repetitions, metric).
    pub until_ci: Option<(f64, u32, String)>,
    pub shuffle: bool,
    pub seed: u64,
}

/// How a sweep ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    Complete,
    Interrupted,
    Failed(String),
    /// A measured point could not be stored: the sweep stops there.
    NotStored(String),
}

impl Ending {
    /// What a front end says of a sweep (run `run_id`) that ended so, `finished` being
    /// whether the run was then marked complete: nothing when complete, the one line of an
    /// interrupted sweep, or the error that stopped it, each saying how to resume.
    pub fn conclusion(
        self,
        finished: flowlab_store::Result<()>,
        run_id: RunId,
    ) -> anyhow::Result<Option<String>> {
        let resume = format!("continue with --resume {run_id}");
        match self {
            Ending::Complete => {
                finished.with_context(|| format!("run {run_id} not marked complete"))?;
                Ok(None)
            }
            Ending::Interrupted => Ok(Some(format!(
                "flowlab: interrupted: finished points are stored; {resume}"
            ))),
            Ending::Failed(e) => {
                bail!("sweep stopped at {e}; finished points are stored, {resume}")
            }
            Ending::NotStored(e) => {
                bail!("sweep stopped: {e}; {resume} once the database takes writes again")
            }
        }
    }

    fn status(&self) -> RunStatus {
        match self {
            Ending::Complete => RunStatus::Complete,
            Ending::Interrupted => RunStatus::Interrupted,
            Ending::Failed(_) | Ending::NotStored(_) => RunStatus::Failed,
        }
    }
}

/// A sweep as the user gave it: what is recorded with its run, and what a resume must match.
#[derive(Debug, Clone)]
pub struct SweepJob {
    pub target: String,
    /// The `--vary` texts as typed.
    pub vary: Vec<String>,
    /// The test flags common to every point, as typed.
    pub test_flags: Vec<String>,
    pub repeat: u32,
    pub until_ci: Option<f64>,
    pub max_repeat: u32,
    pub ci_metric: String,
    pub shuffle: bool,
    pub seed: u64,
    pub packet_log: bool,
    /// Continue this run instead of starting one.
    pub resume: Option<RunId>,
}

impl SweepJob {
    fn definition(&self) -> Value {
        json!({
            "target": self.target,
            "vary": self.vary,
            "test_flags": self.test_flags,
            "repeat": self.repeat,
            "until_ci": self.until_ci,
            "max_repeat": self.max_repeat,
            "ci_metric": self.ci_metric,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "packet_log": self.packet_log,
            "command": crate::record::command_line(),
        })
    }

    pub fn plan(&self, points: Vec<Point>) -> Plan {
        Plan {
            points,
            repeat: self.repeat,
            until_ci: self
                .until_ci
                .map(|t| (t, self.max_repeat, self.ci_metric.clone())),
            shuffle: self.shuffle,
            seed: self.seed,
        }
    }
}

/// What a sweep left: how it ended, the run as measured (stored points and this sweep's,
/// also one that could not be stored), and whether its status could be recorded.
pub struct SweepOutcome {
    pub run_id: RunId,
    pub ending: Ending,
    pub run: Run,
    pub finished: flowlab_store::Result<()>,
    /// Where the database is.
    pub db_path: String,
}

/// Runs `job` over `points` with `runner`, recorded in the database `db`.
pub fn run_sweep(
    db: Option<&Path>,
    job: &SweepJob,
    points: Vec<Point>,
    runner: &mut dyn PointRunner,
    observer: &mut dyn Observer,
) -> anyhow::Result<SweepOutcome> {
    let definition = job.definition();
    let plan = job.plan(points);
    check_ci_metric(&plan)?;
    let mut store = open_store(db)?;
    // Marked failed if the sweep stops on an error.
    let mut active = match job.resume {
        Some(id) => {
            check_resumable(&store, id, &definition)?;
            store.continue_run(id)
        }
        None => store.start_run("sweep", &definition, &environment())?,
    };
    let run_id = active.id();
    observer.on(Event::SweepStarted {
        tests: planned(&plan),
        expected_ns: expected_ns(&plan),
    });
    let (ending, run) = execute(&mut active, run_id, &plan, observer, runner)?;
    let finished = active.finish(ending.status());
    Ok(SweepOutcome {
        run_id,
        ending,
        run,
        finished,
        db_path: store.path().to_string(),
    })
}

/// `--until-ci` must watch a figure every point measures: round trips only come from
/// loopback tests and echoed loads (`--echo-every`), transaction figures only from request/response ones. (Before, a one-way
/// sweep watching the default `rtt` ran every point to the most repetitions.)
fn check_ci_metric(plan: &Plan) -> anyhow::Result<()> {
    let Some((_, _, metric)) = &plan.until_ci else {
        return Ok(());
    };
    let round_trip = metric == "rtt" || metric.starts_with("rtt_");
    let transactional = metric.starts_with("transaction");
    for point in &plan.points {
        let has_transactions = point
            .spec
            .traffic
            .as_ref()
            .is_some_and(|t| t.transactions().is_some());
        let echoed = point.spec.direction == flowlab_spec::Direction::Loopback
            || point.spec.echo_every.is_some();
        let missing =
            (round_trip && !echoed && !has_transactions) || (transactional && !has_transactions);
        if missing {
            bail!(
                "--until-ci watches {metric}, which point {} does not measure (round trips need --mode loopback or --echo-every, transaction figures rr or crr traffic); choose another with --ci-metric, e.g. delay, loss or throughput",
                point.params
            );
        }
    }
    Ok(())
}

/// Number of tests still to run at the start (a lower bound with --until-ci).
fn planned(plan: &Plan) -> u64 {
    let reps = plan.until_ci.as_ref().map_or(plan.repeat, |_| 2);
    plan.points.len() as u64 * u64::from(reps)
}

/// What a test takes beyond its traffic: connecting, the default 500 ms drain, reports.
const TEST_OVERHEAD_NS: u64 = 1_000_000_000;

/// How long the planned tests are expected to take (at least, with `--until-ci`): each
/// point's traffic (its duration, or its count at its rate) and [`TEST_OVERHEAD_NS`].
fn expected_ns(plan: &Plan) -> u64 {
    let reps = plan.until_ci.as_ref().map_or(plan.repeat, |_| 2);
    let one_test = |spec: &TestSpec| {
        let counted = spec.count.zip(spec.rate_bps).map(|(count, rate)| {
            let bits = u128::from(count) * u128::from(spec.size) * 8;
            (bits * 1_000_000_000 / u128::from(rate.max(1))).min(u128::from(u64::MAX)) as u64
        });
        let sending = match (spec.duration_ns, counted) {
            (Some(d), Some(c)) => d.min(c),
            (d, c) => d.or(c).unwrap_or(0),
        };
        sending.saturating_add(TEST_OVERHEAD_NS)
    };
    let each: u64 = plan.points.iter().map(|p| one_test(&p.spec)).sum();
    each.saturating_mul(u64::from(reps))
}

/// The line a sweep prints before it starts.
pub fn expected_line(tests: u64, expected_ns: u64) -> String {
    let time = flowlab_units::format_wall_time(expected_ns.div_ceil(1_000_000_000));
    format!("flowlab: {tests} tests, expected to take about {time}\n")
}

/// A run can be resumed by the same sweep: same kind, target, axes and test options.
fn check_resumable(store: &Store, id: RunId, definition: &Value) -> anyhow::Result<()> {
    let info = store.load_run(id)?.info;
    if info.kind != "sweep" {
        bail!(
            "run {id} is a {}, not a sweep: only sweeps can be resumed",
            info.kind
        );
    }
    for key in ["target", "vary", "test_flags", "packet_log"] {
        if info.params.get(key) != definition.get(key) {
            bail!(
                "run {id} was a sweep with {key} {}, not {}: give the same target, --vary and test options to resume it",
                info.params.get(key).unwrap_or(&Value::Null),
                definition.get(key).unwrap_or(&Value::Null)
            );
        }
    }
    Ok(())
}

/// Runs the plan round by round (repetition r of every point that needs it, shuffled per round
/// when asked), skipping what `store` already has for `run`, storing each point as it finishes.
/// Returns the run as measured: the stored points and this sweep's, also one not stored.
pub fn execute(
    store: &mut Store,
    run: RunId,
    plan: &Plan,
    observer: &mut dyn Observer,
    runner: &mut dyn PointRunner,
) -> anyhow::Result<(Ending, Run)> {
    let mut table = store.load_run(run)?;
    let ending = run_rounds(store, &mut table, plan, observer, runner)?;
    Ok((ending, table))
}

/// The value --until-ci watches in one point's metrics: the name itself or its alias.
fn ci_value(metrics: &[(String, f64)], name: &str) -> Option<f64> {
    let names = flowlab_report::metrics::resolve(
        &[name.to_string()],
        &metrics.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
    )
    .ok()?;
    metrics
        .iter()
        .find(|(n, _)| Some(n) == names.first())
        .map(|(_, v)| *v)
}

/// For each point of the plan, its stored repetitions and the watched metric's values.
fn done_so_far(plan: &Plan, stored: &[StoredPoint]) -> Vec<(Vec<u32>, Vec<f64>)> {
    let mut done: Vec<(Vec<u32>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); plan.points.len()];
    for p in stored {
        if let Some(i) = plan.points.iter().position(|q| q.params == p.params) {
            done[i].0.push(p.repetition);
            if let Some((_, _, m)) = &plan.until_ci {
                done[i].1.extend(ci_value(&p.metrics, m));
            }
        }
    }
    done
}

/// The points that still need repetition `rep`, in the order they run.
fn round(
    plan: &Plan,
    done: &[(Vec<u32>, Vec<f64>)],
    rep: u32,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> Vec<usize> {
    let mut todo: Vec<usize> = (0..plan.points.len())
        .filter(|&i| !done[i].0.contains(&rep))
        .filter(|&i| match &plan.until_ci {
            None => true,
            Some((target, max, m)) => {
                let pct = flowlab_report::stats::is_percentile(m);
                flowlab_report::until_ci(&done[i].1, pct, *target, *max as usize)
            }
        })
        .collect();
    if plan.shuffle {
        todo.shuffle(rng);
    }
    todo
}

/// `execute`'s loop; each measured point is added to `table`.
fn run_rounds(
    store: &mut Store,
    table: &mut Run,
    plan: &Plan,
    observer: &mut dyn Observer,
    runner: &mut dyn PointRunner,
) -> anyhow::Result<Ending> {
    let run = table.info.id;
    let mut done = done_so_far(plan, &table.points);
    let max_rounds = plan
        .until_ci
        .as_ref()
        .map_or(plan.repeat, |(_, max, _)| *max);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(plan.seed);
    let mut stored_now = 0u64;
    for rep in 0..max_rounds {
        for i in round(plan, &done, rep, &mut rng) {
            if flowlab_sys::signal::is_interrupted() {
                return Ok(Ending::Interrupted);
            }
            let point = &plan.points[i];
            let label = || flowlab_report::plot::point_label(&point.params, rep);
            observer.on(Event::PointStarted {
                point: &point.params,
                repetition: rep,
                done: stored_now,
            });
            let (result, metrics, packets) = match runner.run(point, rep)? {
                PointOutcome::Done {
                    result,
                    metrics,
                    packets,
                } => (result, metrics, packets),
                PointOutcome::Interrupted => return Ok(Ending::Interrupted),
                PointOutcome::Failed(e) => {
                    return Ok(Ending::Failed(format!("point {}: {e}", label())))
                }
            };
            let params = &point.params;
            let stored = store.add_point(run, params, rep, &result, &metrics, packets.as_deref());
            let watched = plan
                .until_ci
                .as_ref()
                .map(|(_, _, m)| (m, ci_value(&metrics, m)));
            if let Some((_, value)) = watched {
                done[i].1.extend(value);
            }
            table.points.push(StoredPoint {
                // 0: not stored (SQLite's ids start at 1).
                id: *stored.as_ref().unwrap_or(&0),
                params: params.clone(),
                repetition: rep,
                result,
                metrics,
                packets: packets.map_or(0, |p| p.len() as u64),
            });
            if let Err(e) = stored {
                return Ok(Ending::NotStored(format!(
                    "point {} not stored: {e}",
                    label()
                )));
            }
            stored_now += 1;
            done[i].0.push(rep);
            if let Some((m, None)) = watched {
                return Ok(Ending::Failed(format!(
                    "--until-ci watches {m}, which point {} did not measure; choose another with --ci-metric",
                    label()
                )));
            }
        }
    }
    Ok(Ending::Complete)
}

#[cfg(test)]
mod tests;
