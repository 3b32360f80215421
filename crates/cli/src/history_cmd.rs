//! `flowlab history`, `flowlab show RUN`, `flowlab export RUN`, `flowlab compare RUN RUN`: the
//! results database from the command line.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use flowlab_runner::record;
use flowlab_store::RunId;

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// The results database, a file or postgres:// URL (default: $FLOWLAB_DB or XDG data dir).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Show at most this many runs, newest first.
    #[arg(long, short = 'n', default_value_t = 20)]
    pub limit: usize,
}

/// `flowlab history`: the newest runs.
pub fn run_history(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let text = record::history_text(args.db.as_deref(), args.limit)?;
    write!(std::io::stdout().lock(), "{text}")?;
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
    let text = record::show_text(args.db.as_deref(), args.run, &args.metrics)?;
    write!(std::io::stdout().lock(), "{text}")?;
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
    let (db, out) = (args.db.as_deref(), args.output.as_deref());
    record::export(db, args.run, args.csv, out)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Two or three run ids; differences are against the first.
    #[arg(num_args = 2..=3, required = true, value_name = "RUN")]
    pub runs: Vec<RunId>,
    /// Results database.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Print the comparison as one JSON document.
    #[arg(long)]
    pub json: bool,
}

/// `flowlab compare RUN RUN [RUN]`: each flow's figures side by side.
pub fn run_compare(args: CompareArgs) -> anyhow::Result<ExitCode> {
    let text = flowlab_runner::compare::output(args.db.as_deref(), &args.runs, args.json)?;
    write!(std::io::stdout().lock(), "{text}")?;
    Ok(ExitCode::SUCCESS)
}
