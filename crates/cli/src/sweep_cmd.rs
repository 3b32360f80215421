//! `flowlab sweep`: one test per point of a parameter grid (the cartesian product of the --vary
//! lists), repeated for confidence intervals, each finished point stored at once so an
//! interrupted sweep loses nothing and `--resume` runs only what is missing.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Parser as _;
use flowlab_control::{load_key, run_test, TestOptions};
use flowlab_results::PacketRecord;
use flowlab_store::{plain, Point, Run, RunId, RunStatus, Store};
use rand::seq::SliceRandom as _;
use rand::SeedableRng as _;
use serde_json::{json, Map, Value};

use crate::args::TestArgs;
use crate::history_cmd::{environment, open_store, point_data};

/// Most points one sweep may have: more is a typo in a range, not an experiment.
const MAX_POINTS: usize = 100_000;

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The agent: HOST, HOST:PORT, [IPV6]:PORT.
    pub target: String,
    /// A parameter and its values: size=100..8000:100, proto=udp,tcp, rate=1M,2M,5M,
    /// mode=oneway,loopback,reverse, duration=1s,2s, count=..., flows=1..4:1, or any other
    /// test option by its flag name (congestion=cubic,bbr). Repeat for a grid.
    #[arg(long, value_name = "NAME=VALUES", required = true)]
    pub vary: Vec<String>,
    /// Repetitions of every point.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub repeat: u32,
    /// Repeat each point until the 95 % confidence interval of --ci-metric is within this much
    /// of its mean (2%, 0.5%), at least twice and at most --max-repeat times.
    #[arg(long, value_parser = parse_percent, conflicts_with = "repeat")]
    pub until_ci: Option<f64>,
    /// Most repetitions with --until-ci.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=10_000))]
    pub max_repeat: u32,
    /// Metric whose interval --until-ci watches (rtt, loss, throughput, or a metric name).
    #[arg(long, default_value = "rtt")]
    pub ci_metric: String,
    /// Run the points in random order (seeded by --seed), so slow drifts do not masquerade as
    /// effects of the swept parameter.
    #[arg(long)]
    pub shuffle: bool,
    /// Seed of --shuffle.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Continue an interrupted sweep: run only the points run RUN lacks (same flags needed).
    #[arg(long, value_name = "RUN")]
    pub resume: Option<RunId>,
    /// Results database (default: $FLOWLAB_DB or ~/.local/share/flowlab/history.sqlite3).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Metrics in the final table.
    #[arg(long, value_delimiter = ',', default_value = "rtt,loss,cpu,throughput")]
    pub show: Vec<String>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Store every packet's fate in the database (for delay and loss plots).
    #[arg(long)]
    pub packet_log: bool,
    /// Send TCP messages (as `flowlab test --tcp`).
    #[arg(long, conflicts_with = "udp")]
    pub tcp: bool,
    /// Send UDP datagrams (default).
    #[arg(long)]
    pub udp: bool,
    /// Offered rate (2M, max).
    #[arg(long, short)]
    pub rate: Option<String>,
    /// Bytes per packet.
    #[arg(long, short)]
    pub size: Option<String>,
    /// How long each test sends (default 10s unless --count).
    #[arg(long, short)]
    pub duration: Option<String>,
    /// Packets per test.
    #[arg(long, short = 'n')]
    pub count: Option<String>,
    /// oneway or loopback.
    #[arg(long)]
    pub mode: Option<String>,
    /// Agent sends, client receives.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Parallel flows.
    #[arg(long, short = 'P')]
    pub flows: Option<String>,
    /// Live intervals inside each test (for time-series plots).
    #[arg(long, short)]
    pub interval: Option<String>,
    /// Pre-shared key, when the agent requires one.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Wait for packets in flight after the last one is sent.
    #[arg(long)]
    pub drain: Option<String>,
}

/// `2%` or `0.02` as a fraction.
fn parse_percent(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("invalid interval width '{s}': expected a percentage such as 2%"))?;
    if !(v > 0.0 && v < 10.0) {
        return Err(format!("invalid interval width '{s}': must be above 0%"));
    }
    Ok(v)
}

/// How a swept parameter's values are typed and stored.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Bytes,
    Rate,
    Seconds,
    Count,
    Text,
}

fn kind_of(name: &str) -> Kind {
    match name {
        "size" | "send-buffer" | "recv-buffer" => Kind::Bytes,
        "rate" => Kind::Rate,
        "duration" | "interval" | "drain" => Kind::Seconds,
        "count" | "flows" => Kind::Count,
        _ => Kind::Text,
    }
}

/// One value in its stored unit (bytes, bit/s, seconds, count).
fn parse_one(kind: Kind, name: &str, s: &str) -> anyhow::Result<f64> {
    let e = |e: flowlab_units::UnitError| anyhow::anyhow!("invalid --vary {name}: {e}");
    Ok(match kind {
        Kind::Bytes => flowlab_units::parse_bytes(s).map_err(e)? as f64,
        Kind::Rate => match flowlab_units::parse_rate(s).map_err(e)? {
            flowlab_units::Rate::BitsPerSec(b) => b as f64,
            flowlab_units::Rate::Max => bail!("invalid --vary {name}: 'max' cannot be in a range"),
        },
        Kind::Seconds => flowlab_units::parse_duration(s).map_err(e)?.as_secs_f64(),
        Kind::Count => flowlab_units::parse_count(s).map_err(e)? as f64,
        Kind::Text => bail!("invalid --vary {name}: only numeric parameters take ranges"),
    })
}

/// `NAME=v1,v2,a..b:step` into the name and its values (numbers in stored units, or text).
pub fn parse_vary(spec: &str) -> anyhow::Result<(String, Vec<Value>)> {
    let (name, values) = spec.split_once('=').with_context(|| {
        format!("invalid --vary '{spec}': expected NAME=VALUES, e.g. size=100..8000:100")
    })?;
    let name = name.trim().trim_start_matches("--").replace('_', "-");
    let name = if name == "protocol" {
        "proto".to_string()
    } else {
        name
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        bail!("invalid --vary '{spec}': bad parameter name");
    }
    if matches!(
        name.as_str(),
        "target" | "json" | "json-stream" | "output" | "packet-log" | "key-file"
    ) {
        bail!("invalid --vary '{spec}': {name} cannot be varied");
    }
    let kind = kind_of(&name);
    let mut out = Vec::new();
    for item in values.split(',').map(str::trim) {
        if item.is_empty() {
            bail!("invalid --vary '{spec}': empty value");
        }
        match item.split_once("..") {
            Some((a, rest)) if kind != Kind::Text => {
                let (b, step) = match rest.split_once(':') {
                    Some((b, step)) => (b, Some(step)),
                    None => (rest, None),
                };
                let (a, b) = (parse_one(kind, &name, a)?, parse_one(kind, &name, b)?);
                let step = match step {
                    Some(s) => parse_one(kind, &name, s)?,
                    None if kind == Kind::Seconds => bail!(
                        "invalid --vary '{spec}': a range of durations needs a step (1s..10s:1s)"
                    ),
                    None => 1.0,
                };
                if step <= 0.0 || b < a {
                    bail!("invalid --vary '{spec}': a range a..b:step needs a <= b and a step above 0");
                }
                let n = ((b - a) / step + 1e-9).floor() as usize + 1;
                if n > MAX_POINTS {
                    bail!("invalid --vary '{spec}': {n} values, at most {MAX_POINTS}");
                }
                out.extend((0..n).map(|i| number(a + i as f64 * step)));
            }
            _ if kind == Kind::Text => {
                let v = item.to_ascii_lowercase();
                match name.as_str() {
                    "proto" if !matches!(v.as_str(), "udp" | "tcp" | "raw") => {
                        bail!("invalid --vary '{spec}': proto is udp, tcp or raw")
                    }
                    "mode" if !matches!(v.as_str(), "oneway" | "loopback" | "reverse") => {
                        bail!("invalid --vary '{spec}': mode is oneway, loopback or reverse")
                    }
                    _ => {}
                }
                out.push(Value::String(
                    if matches!(name.as_str(), "proto" | "mode") {
                        v
                    } else {
                        item.to_string()
                    },
                ));
            }
            _ => out.push(number(parse_one(kind, &name, item)?)),
        }
    }
    Ok((name, out))
}

/// Whole numbers as JSON integers (so `size=100` prints as 100, not 100.0).
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9e15 {
        json!(x as i64)
    } else {
        json!(x)
    }
}

/// Every combination of the axes' values, the first axis varying slowest.
pub fn cartesian(axes: &[(String, Vec<Value>)]) -> Vec<Value> {
    let mut points = vec![Map::new()];
    for (name, values) in axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut p = p.clone();
                    p.insert(name.clone(), v.clone());
                    p
                })
            })
            .collect();
    }
    points.into_iter().map(Value::Object).collect()
}

/// The flags of `flowlab test` common to every point, without those the sweep varies.
fn base_flags(args: &SweepArgs, varied: &[String]) -> Vec<String> {
    let is_varied = |n: &str| varied.iter().any(|v| v == n);
    let mut f: Vec<String> = Vec::new();
    if !is_varied("proto") {
        if args.tcp {
            f.push("--tcp".into());
        }
        if args.udp {
            f.push("--udp".into());
        }
    }
    if !is_varied("mode") {
        if args.reverse {
            f.push("--reverse".into());
        }
        if let Some(m) = &args.mode {
            f.extend(["--mode".into(), m.clone()]);
        }
    }
    for (name, value) in [
        ("rate", &args.rate),
        ("size", &args.size),
        ("duration", &args.duration),
        ("count", &args.count),
        ("flows", &args.flows),
        ("interval", &args.interval),
        ("drain", &args.drain),
    ] {
        if let Some(v) = value.as_ref().filter(|_| !is_varied(name)) {
            f.extend([format!("--{name}"), v.clone()]);
        }
    }
    f
}

/// The flags that set one point's parameters.
fn point_flags(point: &Value) -> Vec<String> {
    let mut f = Vec::new();
    let Value::Object(m) = point else { return f };
    for (name, v) in m {
        match (name.as_str(), v) {
            ("proto", v) => f.extend(["--proto".to_string(), plain(v)]),
            ("mode", Value::String(m)) if m == "reverse" => f.push("--reverse".into()),
            (name, Value::Number(n)) if kind_of(name) == Kind::Seconds => {
                let ns = (n.as_f64().unwrap_or(0.0) * 1e9).round() as u64;
                f.extend([format!("--{name}"), format!("{ns}ns")]);
            }
            (name, v) => f.extend([format!("--{name}"), plain(v)]),
        }
    }
    f
}

/// `flowlab test`'s own flags, parsed by its own parser, so a point is exactly the test that
/// `flowlab test` would run with those flags.
#[derive(clap::Parser, Debug)]
#[command(no_binary_name = true, args_override_self = true)]
struct PointTest {
    #[command(flatten)]
    test: TestArgs,
}

fn test_args(
    target: &str,
    base: &[String],
    point: &Value,
    packet_log: bool,
) -> anyhow::Result<TestArgs> {
    let mut argv = vec![target.to_string()];
    argv.extend(base.iter().cloned());
    argv.extend(point_flags(point));
    if packet_log {
        // Only `spec.packet_log` is taken from this; the sweep stores records in the database.
        argv.extend(["--packet-log".into(), "-".into()]);
    }
    let parsed = PointTest::try_parse_from(&argv).map_err(|e| {
        let text = e.to_string();
        let line = text
            .lines()
            .next()
            .unwrap_or_default()
            .trim_start_matches("error: ")
            .to_string();
        anyhow::anyhow!("invalid point {}: {line}", point)
    })?;
    Ok(parsed.test)
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

/// How the sweep repeats points.
#[derive(Debug, Clone)]
pub struct Plan {
    pub points: Vec<Value>,
    pub repeat: u32,
    /// (target relative half-width, most repetitions, metric).
    pub until_ci: Option<(f64, u32, String)>,
    pub shuffle: bool,
    pub seed: u64,
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
    fn status(&self) -> RunStatus {
        match self {
            Ending::Complete => RunStatus::Complete,
            Ending::Interrupted => RunStatus::Interrupted,
            Ending::Failed(_) | Ending::NotStored(_) => RunStatus::Failed,
        }
    }
}

/// Runs the plan round by round (repetition r of every point that needs it, shuffled per round
/// when asked), skipping what `store` already has for `run`, storing each point as it finishes.
/// Returns the run as measured: the stored points and this sweep's, also one not stored.
pub fn execute(
    store: &mut Store,
    run: RunId,
    plan: &Plan,
    progress: impl FnMut(&Value, u32, u64),
    run_point: impl FnMut(&Value, u32) -> anyhow::Result<PointOutcome>,
) -> anyhow::Result<(Ending, Run)> {
    let mut table = store.load_run(run)?;
    let ending = run_rounds(store, &mut table, plan, progress, run_point)?;
    Ok((ending, table))
}

/// For each point of the plan, its stored repetitions and the watched metric's values.
fn done_so_far(plan: &Plan, stored: &[Point]) -> Vec<(Vec<u32>, Vec<f64>)> {
    let mut done: Vec<(Vec<u32>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); plan.points.len()];
    for p in stored {
        if let Some(i) = plan.points.iter().position(|q| *q == p.params) {
            done[i].0.push(p.repetition);
            if let Some((_, _, m)) = &plan.until_ci {
                done[i].1.extend(ci_value(&p.metrics, m));
            }
        }
    }
    done
}

/// `execute`'s loop; each measured point is added to `table`.
fn run_rounds(
    store: &mut Store,
    table: &mut Run,
    plan: &Plan,
    mut progress: impl FnMut(&Value, u32, u64),
    mut run_point: impl FnMut(&Value, u32) -> anyhow::Result<PointOutcome>,
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
            todo.shuffle(&mut rng);
        }
        for i in todo {
            if flowlab_sys::signal::is_interrupted() {
                return Ok(Ending::Interrupted);
            }
            let point = &plan.points[i];
            progress(point, rep, stored_now);
            match run_point(point, rep)? {
                PointOutcome::Done {
                    result,
                    metrics,
                    packets,
                } => {
                    let stored =
                        store.add_point(run, point, rep, &result, &metrics, packets.as_deref());
                    if let Some((_, _, m)) = &plan.until_ci {
                        done[i].1.extend(ci_value(&metrics, m));
                    }
                    table.points.push(Point {
                        // 0: not stored (SQLite's ids start at 1).
                        id: *stored.as_ref().unwrap_or(&0),
                        params: point.clone(),
                        repetition: rep,
                        result,
                        metrics,
                        packets: packets.map_or(0, |p| p.len() as u64),
                    });
                    if let Err(e) = stored {
                        let label = flowlab_report::plot::point_label(point, rep);
                        return Ok(Ending::NotStored(format!("point {label} not stored: {e}")));
                    }
                    stored_now += 1;
                    done[i].0.push(rep);
                }
                PointOutcome::Interrupted => return Ok(Ending::Interrupted),
                PointOutcome::Failed(e) => {
                    return Ok(Ending::Failed(format!(
                        "point {}: {e}",
                        flowlab_report::plot::point_label(point, rep)
                    )))
                }
            }
        }
    }
    Ok(Ending::Complete)
}

/// Number of tests still to run at the start (a lower bound with --until-ci).
fn planned(plan: &Plan) -> u64 {
    let reps = plan.until_ci.as_ref().map_or(plan.repeat, |_| 2);
    plan.points.len() as u64 * u64::from(reps)
}

pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let axes = args
        .vary
        .iter()
        .map(|v| parse_vary(v))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let names: Vec<String> = axes.iter().map(|(n, _)| n.clone()).collect();
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
    {
        bail!(
            "invalid --vary: {} is given twice (list its values in one --vary)",
            dup.1
        );
    }
    let total: usize = axes.iter().map(|(_, v)| v.len()).product();
    if total > MAX_POINTS {
        bail!("the sweep has {total} points, at most {MAX_POINTS}");
    }
    let points = cartesian(&axes);
    let base = base_flags(&args, &names);
    // Check every point before the first test: a typo must not stop a sweep halfway.
    for p in &points {
        crate::test_cmd::spec_from_args(&test_args(&args.target, &base, p, args.packet_log)?)
            .with_context(|| format!("point {}", flowlab_report::plot::point_label(p, 0)))?;
    }
    let key = args.key_file.as_deref().map(load_key).transpose()?;
    let plan = Plan {
        points,
        repeat: args.repeat,
        until_ci: args
            .until_ci
            .map(|t| (t, args.max_repeat, args.ci_metric.clone())),
        shuffle: args.shuffle,
        seed: args.seed,
    };
    let definition = json!({
        "target": args.target,
        "vary": args.vary,
        "test_flags": base,
        "repeat": args.repeat,
        "until_ci": args.until_ci,
        "max_repeat": args.max_repeat,
        "ci_metric": args.ci_metric,
        "shuffle": args.shuffle,
        "seed": args.seed,
        "packet_log": args.packet_log,
    });
    let mut store = open_store(args.db.as_deref())?;
    // Marked failed if the sweep stops on an error.
    let mut active = match args.resume {
        Some(id) => {
            check_resumable(&store, id, &definition)?;
            store.continue_run(id)
        }
        None => store.start_run("sweep", &definition, &environment())?,
    };
    let run_id = active.id();
    flowlab_sys::signal::interrupt_flag();
    let bar = progress_bar(args.quiet, planned(&plan));
    let drain_default = std::time::Duration::from_millis(500);
    let ending = execute(
        &mut active,
        run_id,
        &plan,
        |point, rep, done| {
            bar.set_position(done);
            if bar.length().is_some_and(|l| l <= done) {
                bar.set_length(done + 1);
            }
            bar.set_message(flowlab_report::plot::point_label(point, rep));
        },
        |point, _rep| {
            let targs = test_args(&args.target, &base, point, args.packet_log)?;
            let spec = crate::test_cmd::spec_from_args(&targs)?;
            let options = TestOptions {
                target: args.target.clone(),
                spec,
                key: key.clone(),
                drain: if args.drain.is_some() {
                    targs.drain
                } else {
                    drain_default
                },
                interface: targs.interface.clone(),
                agent_interface: targs.agent_interface.clone(),
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
            let packets = args.packet_log.then_some(test.packets);
            Ok(PointOutcome::Done {
                result,
                metrics,
                packets,
            })
        },
    );
    bar.finish_and_clear();
    let (ending, run) = ending?;
    let shown = flowlab_report::metrics::resolve_lenient(&args.show, &run.metric_names());
    if !run.points.is_empty() {
        print!("{}", flowlab_report::text_table(&run, &shown));
    }
    let stored = run.points.iter().filter(|p| p.id > 0).count();
    let finished = active.finish(ending.status());
    println!("\nrun {run_id}: {stored} points stored in {} (flowlab show {run_id}, flowlab plot {run_id}, flowlab report {run_id})", store.path());
    conclude(ending, finished, run_id)
}

/// The exit code and the one line on stderr of a sweep that ended as `ending`.
fn conclude(
    ending: Ending,
    finished: flowlab_store::Result<()>,
    run_id: RunId,
) -> anyhow::Result<ExitCode> {
    let resume = format!("continue with --resume {run_id}");
    match ending {
        Ending::Complete => {
            finished.with_context(|| format!("run {run_id} not marked complete"))?;
            Ok(ExitCode::SUCCESS)
        }
        Ending::Interrupted => {
            eprintln!("flowlab: interrupted: finished points are stored; {resume}");
            Ok(ExitCode::from(130))
        }
        Ending::Failed(e) => bail!("sweep stopped at {e}; finished points are stored, {resume}"),
        Ending::NotStored(e) => {
            bail!("sweep stopped: {e}; {resume} once the database takes writes again")
        }
    }
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

/// A progress bar with ETA on stderr, hidden when stderr is not a terminal or with --quiet.
fn progress_bar(quiet: bool, len: u64) -> indicatif::ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} tests, ETA {eta}  {msg}")
    {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_lists() {
        let (n, v) = parse_vary("size=100..500:100").unwrap();
        assert_eq!(n, "size");
        assert_eq!(
            v,
            vec![json!(100), json!(200), json!(300), json!(400), json!(500)]
        );
        let (_, v) = parse_vary("size=100..8000:100").unwrap();
        assert_eq!((v.len(), v.last().cloned()), (80, Some(json!(8000))));
        let (_, v) = parse_vary("size=64KiB,1500B").unwrap();
        assert_eq!(v, vec![json!(65536), json!(1500)]);
        let (_, v) = parse_vary("rate=1M..3M:1M").unwrap();
        assert_eq!(
            v,
            vec![json!(1_000_000), json!(2_000_000), json!(3_000_000)]
        );
        let (_, v) = parse_vary("duration=500ms,1.5s").unwrap();
        assert_eq!(v, vec![json!(0.5), json!(1.5)]);
        let (n, v) = parse_vary("protocol=UDP,tcp").unwrap();
        assert_eq!((n.as_str(), v), ("proto", vec![json!("udp"), json!("tcp")]));
        let (_, v) = parse_vary("flows=1..3").unwrap();
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn rejects_bad_vary() {
        for bad in [
            "size",
            "size=",
            "size=500..100:10",
            "size=1..10:0",
            "proto=sctp",
            "mode=sideways",
            "size=1..1000000000",
            "json=1",
            "size=abc",
            "proto=udp..tcp",
            "duration=1s..2s",
        ] {
            assert!(parse_vary(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn cartesian_product_first_axis_slowest() {
        let axes = vec![
            ("size".to_string(), vec![json!(100), json!(200)]),
            ("proto".to_string(), vec![json!("udp"), json!("tcp")]),
        ];
        let p = cartesian(&axes);
        assert_eq!(p.len(), 4);
        assert_eq!(p[0], json!({"size": 100, "proto": "udp"}));
        assert_eq!(p[1], json!({"size": 100, "proto": "tcp"}));
        assert_eq!(p[3], json!({"size": 200, "proto": "tcp"}));
        assert_eq!(cartesian(&[]), vec![json!({})]);
    }

    #[test]
    fn points_become_test_flags() {
        let base = vec!["--rate".to_string(), "2M".into(), "--udp".into()];
        let a = test_args(
            "h",
            &base[..2],
            &json!({"size": 500, "proto": "tcp", "duration": 1.5}),
            true,
        )
        .unwrap();
        assert_eq!(a.proto, Some(crate::args::Proto::Tcp));
        assert!(!a.udp);
        assert_eq!(a.size, Some(500));
        assert_eq!(a.duration, Some(std::time::Duration::from_millis(1500)));
        assert!(a.packet_log.is_some());
        let a = test_args("h", &base, &json!({"mode": "reverse"}), false).unwrap();
        assert!(a.reverse && a.udp);
        let a = test_args(
            "h",
            &["--size".into(), "100".into()],
            &json!({"size": 300}),
            false,
        )
        .unwrap();
        assert_eq!(
            a.size,
            Some(300),
            "the point's value wins over the base flag"
        );
        assert!(test_args("h", &[], &json!({"colour": "red"}), false).is_err());
    }

    #[test]
    fn percent_parsing() {
        assert_eq!(parse_percent("2%"), Ok(0.02));
        assert_eq!(parse_percent("0.5"), Ok(0.5));
        assert!(parse_percent("0%").is_err());
        assert!(parse_percent("x").is_err());
    }

    fn fake(rtt: f64) -> anyhow::Result<PointOutcome> {
        Ok(PointOutcome::Done {
            result: json!({}),
            metrics: vec![("rtt_mean_us".into(), rtt)],
            packets: None,
        })
    }

    fn plan(points: Vec<Value>, repeat: u32) -> Plan {
        Plan {
            points,
            repeat,
            until_ci: None,
            shuffle: false,
            seed: 1,
        }
    }

    #[test]
    fn resume_runs_only_missing_points() {
        let mut s = Store::open_in_memory().unwrap();
        let run = s
            .begin_run("sweep", &json!({}), &Default::default())
            .unwrap();
        let points = cartesian(&[("size".into(), vec![json!(1), json!(2), json!(3)])]);
        let p = plan(points, 2);
        // First attempt: fails at the 4th test (size 1, repetition 1).
        let mut calls = 0;
        let (ending, _) = execute(
            &mut s,
            run,
            &p,
            |_, _, _| {},
            |_, _| {
                calls += 1;
                if calls == 4 {
                    Ok(PointOutcome::Failed("agent lost".into()))
                } else {
                    fake(10.0)
                }
            },
        )
        .unwrap();
        assert!(
            matches!(ending, Ending::Failed(ref e) if e.contains("size=1 #1") && e.contains("agent lost")),
            "{ending:?}"
        );
        assert_eq!(s.load_run(run).unwrap().points.len(), 3);
        // Resume: only the 3 missing tests run.
        let mut ran = Vec::new();
        let (ending, _) = execute(
            &mut s,
            run,
            &p,
            |_, _, _| {},
            |pt, rep| {
                ran.push((pt.clone(), rep));
                fake(10.0)
            },
        )
        .unwrap();
        assert_eq!(ending, Ending::Complete);
        assert_eq!(
            ran,
            vec![
                (json!({"size": 1}), 1),
                (json!({"size": 2}), 1),
                (json!({"size": 3}), 1)
            ]
        );
        assert_eq!(s.load_run(run).unwrap().points.len(), 6);
        // Nothing left: a second resume runs nothing.
        let (ending, _) = execute(
            &mut s,
            run,
            &p,
            |_, _, _| {},
            |_, _| panic!("nothing to run"),
        )
        .unwrap();
        assert_eq!(ending, Ending::Complete);
    }

    #[test]
    fn shuffle_is_seeded() {
        let points = cartesian(&[("size".into(), (1..=8).map(|i| json!(i)).collect())]);
        let order = |seed| {
            let mut s = Store::open_in_memory().unwrap();
            let run = s
                .begin_run("sweep", &json!({}), &Default::default())
                .unwrap();
            let p = Plan {
                shuffle: true,
                seed,
                ..plan(points.clone(), 1)
            };
            let mut seen = Vec::new();
            execute(
                &mut s,
                run,
                &p,
                |_, _, _| {},
                |pt, _| {
                    seen.push(pt["size"].as_i64().unwrap());
                    fake(1.0)
                },
            )
            .unwrap();
            seen
        };
        assert_eq!(order(7), order(7));
        assert_ne!(order(7), (1..=8).collect::<Vec<_>>());
        let mut sorted = order(7);
        sorted.sort();
        assert_eq!(sorted, (1..=8).collect::<Vec<_>>());
    }

    #[test]
    fn until_ci_repeats_noisy_points_only() {
        let mut s = Store::open_in_memory().unwrap();
        let run = s
            .begin_run("sweep", &json!({}), &Default::default())
            .unwrap();
        let points = cartesian(&[("size".into(), vec![json!(1), json!(2)])]);
        let p = Plan {
            until_ci: Some((0.02, 6, "rtt".into())),
            ..plan(points, 1)
        };
        execute(
            &mut s,
            run,
            &p,
            |_, _, _| {},
            |pt, rep| {
                // size 1 is steady; size 2 alternates widely and never converges.
                if pt["size"] == json!(1) {
                    fake(100.0)
                } else {
                    fake(if rep % 2 == 0 { 50.0 } else { 150.0 })
                }
            },
        )
        .unwrap();
        let r = s.load_run(run).unwrap();
        let count = |v: i64| {
            r.points
                .iter()
                .filter(|p| p.params["size"] == json!(v))
                .count()
        };
        assert_eq!((count(1), count(2)), (2, 6));
    }
}
