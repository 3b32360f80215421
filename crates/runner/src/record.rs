//! Recording runs in the results database: where it is, the facts about this machine kept
//! beside every run, and a finished set of tests stored as one run.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use flowlab_control::{TestOptions, TestRun};
use flowlab_report::PlotRequest;
use flowlab_store::{Environment, RunId, RunStatus, Store};
use serde_json::Value;

/// Opens the results database: `db`, else `$FLOWLAB_DB`, else the XDG data directory.
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

/// Records finished tests as one run of `kind` (`test`, `demo`, `experiment`): `params`
/// describes the run, each test is a point with its own parameters and repetition number.
/// Packet logs are stored when recorded. Returns the run id users type (`flowlab show ID`).
pub fn store_test_run(
    db: Option<&Path>,
    kind: &str,
    params: &Value,
    tests: &[(Value, u32, &TestRun)],
) -> anyhow::Result<RunId> {
    let mut store = open_store(db)?;
    // Marked failed if a point cannot be stored.
    let mut active = store.start_run(kind, &with_command(params), &environment())?;
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

/// The command that started this process, as a shell would take it back (the program by its
/// name, not its path): reports print it so a run can be reproduced. A database URL's password
/// is left out.
pub fn command_line() -> String {
    let mut args = std::env::args();
    let program = args.next().map(|p| {
        let path = Path::new(&p);
        path.file_name()
            .map_or(p.clone(), |n| n.to_string_lossy().into_owned())
    });
    program
        .into_iter()
        .chain(args)
        .map(|a| shell_quote(&flowlab_store::hide_password(&a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `a` quoted for a POSIX shell when it holds anything but safe characters.
fn shell_quote(a: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c);
    match !a.is_empty() && a.chars().all(safe) {
        true => a.to_string(),
        false => format!("'{}'", a.replace('\'', "'\\''")),
    }
}

/// The run's parameters with the command that made it, unless they name one already.
pub fn with_command(params: &Value) -> Value {
    let mut params = params.clone();
    if let Value::Object(map) = &mut params {
        map.entry("command")
            .or_insert_with(|| command_line().into());
    }
    params
}

/// Records one test as a run of kind `test`: the target and spec as its parameters.
/// `title` (`--title`), when given, is kept among the run's parameters.
pub fn store_single_test(
    db: Option<&Path>,
    options: &TestOptions,
    run: &TestRun,
    title: Option<&str>,
) -> anyhow::Result<RunId> {
    let mut params = serde_json::json!({ "target": options.target, "spec": options.spec });
    if let Some(title) = title {
        params["title"] = title.into();
    }
    store_test_run(db, "test", &params, &[(serde_json::json!({}), 0, run)])
}

/// Records a single test in `db` (`None`: not at all, `--no-store`), saying so in one line;
/// false, with the reason said, when it could not.
pub fn store_test_saying(
    db: Option<Option<&Path>>,
    options: &TestOptions,
    run: &TestRun,
    title: Option<&str>,
) -> bool {
    let Some(db) = db else {
        return true;
    };
    match store_single_test(db, options, run, title) {
        Ok(id) => eprintln!("flowlab: stored as run {id} (flowlab show {id})"),
        Err(e) => {
            eprintln!("flowlab: error: result not stored: {e:#}");
            return false;
        }
    }
    true
}

/// `flowlab history`: the newest `limit` runs of the database `db`, as text.
pub fn history_text(db: Option<&Path>, limit: usize) -> anyhow::Result<String> {
    let store = open_store(db)?;
    let runs = store.list_runs(limit)?;
    Ok(match runs.is_empty() {
        true => format!("no runs yet in {}\n", store.path()),
        false => crate::format::history_table(&runs),
    })
}

/// `flowlab show`: a stored run's parameters, environment and results, with the `metrics`
/// named (as `flowlab_report::metrics::resolve` takes them; all when empty), as text.
pub fn show_text(db: Option<&Path>, run: RunId, metrics: &[String]) -> anyhow::Result<String> {
    let loaded = open_store(db)?.load_run(run)?;
    let names = match metrics.is_empty() {
        true => Vec::new(),
        false => flowlab_report::metrics::resolve(metrics, &loaded.metric_names())?,
    };
    Ok(crate::format::show_run(&loaded, &names))
}

/// Writes the HTML report of a stored run.
pub fn write_report(db: Option<&Path>, run: RunId, out: &Path) -> anyhow::Result<()> {
    let store = open_store(db)?;
    let loaded = store.load_run(run)?;
    let html = flowlab_report::html::report(&store, &loaded)?;
    std::fs::write(out, html).with_context(|| format!("cannot write {}", out.display()))
}

/// Exports a stored run as CSV (metrics) or JSON (everything), to `out` or stdout.
pub fn export(db: Option<&Path>, run: RunId, csv: bool, out: Option<&Path>) -> anyhow::Result<()> {
    let store = open_store(db)?;
    let mut buf = Vec::new();
    if csv {
        // Each metric's label and unit from the report's table, as plots and tables use them.
        let describe = |name: &str| {
            let metric = flowlab_report::describe(name);
            (metric.label.clone(), metric.stored_unit().to_string())
        };
        store.export_csv(run, &describe, &mut buf)?;
    } else {
        store.export_json(run, &mut buf)?;
    }
    match out {
        Some(path) => {
            std::fs::write(path, &buf).with_context(|| format!("cannot write {}", path.display()))
        }
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&buf)?;
            Ok(stdout.flush()?)
        }
    }
}

/// Writes a plot of a stored run, as PNG when `out` ends in `.png`, else as SVG.
pub fn write_plot(
    db: Option<&Path>,
    run: RunId,
    request: &PlotRequest,
    out: &Path,
) -> anyhow::Result<()> {
    let store = open_store(db)?;
    let loaded = store.load_run(run)?;
    flowlab_report::plot(&store, &loaded, request)?.write(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_quoted_for_the_shell() {
        assert_eq!(shell_quote("--rate"), "--rate");
        assert_eq!(shell_quote("size=100,200"), "size=100,200");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
        let params = with_command(&serde_json::json!({"rate": "2M"}));
        assert!(params["command"].as_str().is_some_and(|c| !c.is_empty()));
        let named = serde_json::json!({"command": "flowlab demo"});
        assert_eq!(with_command(&named), named);
    }

    #[test]
    fn reads_cpu_model() {
        let text = "processor\t: 0\nvendor_id\t: X\nmodel name\t: Test CPU @ 3GHz\n";
        assert_eq!(parse_cpu_model(text).as_deref(), Some("Test CPU @ 3GHz"));
        assert_eq!(parse_cpu_model("processor : 0\n"), None);
    }
}
