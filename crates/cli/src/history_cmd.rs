//! `flowlab history`, `flowlab show RUN`, `flowlab export RUN`: the results database from the
//! command line, plus the helpers other commands use to record their runs in it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use flowlab_control::TestRun;
use flowlab_store::{Environment, RunId, RunInfo, RunStatus, Store};
use serde_json::Value;

/// Opens the results database: `--db PATH`, else `$FLOWLAB_DB`, else the XDG data directory.
pub fn open_store(db: Option<&Path>) -> anyhow::Result<Store> {
    let path = match db {
        Some(p) => p.to_path_buf(),
        None => flowlab_store::default_path().context(
            "no place for the results database: set FLOWLAB_DB, XDG_DATA_HOME or HOME, or pass --db PATH",
        )?,
    };
    Ok(Store::open(&path)?)
}

/// Facts about this machine stored beside every run, so results from different hosts or
/// kernels are not compared unknowingly.
pub fn environment() -> Environment {
    Environment {
        hostname: flowlab_sys::host::hostname(),
        kernel: flowlab_sys::host::kernel_release(),
        cpu_model: cpu_model(),
        flowlab_version: env!("CARGO_PKG_VERSION").to_string(),
        clock_source: flowlab_sys::host::clock_source(),
    }
}

/// The first "model name" of /proc/cpuinfo, or "unknown".
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| parse_cpu_model(&text))
        .unwrap_or_else(|| "unknown".into())
}

fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| matches!(k.trim(), "model name" | "Processor" | "cpu model"))
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The flat metrics and result JSON of one test, as the store keeps them.
pub fn point_data(run: &TestRun) -> anyhow::Result<(Value, Vec<(String, f64)>)> {
    let result = serde_json::to_value(&run.result)?;
    let metrics = flowlab_report::metrics::extract(&result);
    Ok((result, metrics))
}

/// Records finished tests as one run of `kind` (`test`, `demo`, ...): `params` describes the
/// run, each test is a point with its own parameters and repetition number. Packet logs are
/// stored when recorded. Returns the run id users type (`flowlab show ID`).
pub fn store_test_run(
    db: Option<&Path>,
    kind: &str,
    params: &Value,
    tests: &[(Value, u32, &TestRun)],
) -> anyhow::Result<RunId> {
    let mut store = open_store(db)?;
    // Marked failed if a point cannot be stored.
    let mut active = store.start_run(kind, params, &environment())?;
    let id = active.id();
    let mut status = RunStatus::Complete;
    for (point, repetition, run) in tests {
        let (result, metrics) = point_data(run)?;
        let packets = (!run.packets.is_empty()).then_some(run.packets.as_slice());
        active.add_point(id, point, *repetition, &result, &metrics, packets)?;
        if run.result.interrupted {
            status = RunStatus::Interrupted;
        } else if run.result.error.is_some() && status == RunStatus::Complete {
            status = RunStatus::Failed;
        }
    }
    active.finish(status)?;
    Ok(id)
}

/// Records one `flowlab test` as a run of kind `test`: the target and spec as its parameters.
/// Returns the run id.
pub fn store_single_test(
    db: Option<&Path>,
    options: &flowlab_control::TestOptions,
    run: &TestRun,
) -> anyhow::Result<RunId> {
    let params = serde_json::json!({ "target": options.target, "spec": options.spec });
    store_test_run(db, "test", &params, &[(serde_json::json!({}), 0, run)])
}

/// `2026-11-22 07:54:05` (UTC) from Unix ns.
pub fn format_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What a run was, in a few words: its target and what it varied.
fn describe(info: &RunInfo) -> String {
    let p = &info.params;
    let mut parts = Vec::new();
    if let Some(t) = p.get("target").and_then(Value::as_str) {
        parts.push(t.to_string());
    }
    if let Some(v) = p.get("vary").and_then(Value::as_array) {
        let v: Vec<String> = v.iter().map(flowlab_store::plain).collect();
        parts.push(format!("vary {}", v.join(" ")));
    }
    if let Some(d) = p.get("description").and_then(Value::as_str) {
        parts.push(d.to_string());
    }
    parts.join("; ")
}

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Results database (default: $FLOWLAB_DB or ~/.local/share/flowlab/history.sqlite3).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Show at most this many runs, newest first.
    #[arg(long, short = 'n', default_value_t = 20)]
    pub limit: usize,
}

/// `flowlab history`: the newest runs.
pub fn run_history(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let store = open_store(args.db.as_deref())?;
    let runs = store.list_runs(args.limit)?;
    let mut out = std::io::stdout().lock();
    if runs.is_empty() {
        writeln!(out, "no runs yet in {}", store.path())?;
        return Ok(ExitCode::SUCCESS);
    }
    writeln!(
        out,
        "{:>5}  {:<19}  {:<10} {:<11} {:>6}  what",
        "run", "started (UTC)", "kind", "status", "points"
    )?;
    for r in runs {
        writeln!(
            out,
            "{:>5}  {:<19}  {:<10} {:<11} {:>6}  {}",
            r.id,
            format_time(r.created_at_ns),
            r.kind,
            r.status.as_str(),
            r.points,
            describe(&r)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct ShowArgs {
    /// Run id, as `flowlab history` lists them.
    pub run: RunId,
    /// Results database.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Metrics to show (names or rtt, loss, cpu, delay, throughput, jitter); default: all.
    #[arg(long, value_delimiter = ',')]
    pub metrics: Vec<String>,
}

/// `flowlab show RUN`: one run's parameters, environment and results table.
pub fn run_show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let store = open_store(args.db.as_deref())?;
    let run = store.load_run(args.run)?;
    let names = if args.metrics.is_empty() {
        Vec::new()
    } else {
        flowlab_report::metrics::resolve(&args.metrics, &run.metric_names())?
    };
    let i = &run.info;
    let mut out = std::io::stdout().lock();
    writeln!(out, "run {} ({}), {}", i.id, i.kind, i.status)?;
    writeln!(out, "started   {} UTC", format_time(i.created_at_ns))?;
    if let Some(f) = i.finished_at_ns {
        writeln!(out, "finished  {} UTC", format_time(f))?;
    }
    writeln!(
        out,
        "host      {} (kernel {}, {}, clock {}), flowlab {}",
        i.env.hostname, i.env.kernel, i.env.cpu_model, i.env.clock_source, i.env.flowlab_version
    )?;
    writeln!(out, "params    {}", i.params)?;
    writeln!(out, "points    {}\n", run.points.len())?;
    if !run.points.is_empty() {
        write!(out, "{}", flowlab_report::text_table(&run, &names))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("format").args(["csv", "json"]).required(true)))]
pub struct ExportArgs {
    /// Run id.
    pub run: RunId,
    /// Metrics as CSV, one row per point and metric.
    #[arg(long)]
    pub csv: bool,
    /// The whole run as one JSON document (result documents included).
    #[arg(long)]
    pub json: bool,
    /// Write here instead of stdout.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Results database.
    #[arg(long)]
    pub db: Option<PathBuf>,
}

/// `flowlab export RUN --csv|--json`.
pub fn run_export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    let store = open_store(args.db.as_deref())?;
    let mut buf = Vec::new();
    if args.csv {
        store.export_csv(args.run, &mut buf)?;
    } else {
        store.export_json(args.run, &mut buf)?;
    }
    match &args.output {
        Some(path) => std::fs::write(path, &buf)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&buf)?;
            out.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc_times() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00");
        assert_eq!(
            format_time(1_795_331_874_473_394_538),
            "2026-11-22 07:17:54"
        );
        assert_eq!(
            format_time(951_782_400 * 1_000_000_000),
            "2000-02-29 00:00:00"
        );
    }

    #[test]
    fn reads_cpu_model() {
        let text = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Test CPU @ 3GHz\n";
        assert_eq!(parse_cpu_model(text).as_deref(), Some("Test CPU @ 3GHz"));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
    }

    #[test]
    fn describes_sweeps() {
        let info = RunInfo {
            id: 1,
            kind: "sweep".into(),
            created_at_ns: 0,
            finished_at_ns: None,
            status: RunStatus::Complete,
            params: serde_json::json!({"target": "h", "vary": ["size=1..2:1"]}),
            env: Environment::default(),
            points: 0,
        };
        assert_eq!(describe(&info), "h; vary size=1..2:1");
    }
}
