//! `flowlab plot RUN` and `flowlab report RUN`: figures and a self-contained HTML page from a
//! stored run, so results can be looked at again without re-running anything.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use flowlab_report::{PlotKind, PlotRequest, Scale, Scales};
use flowlab_store::RunId;

/// `--kind`'s values, each with what it shows (in `--help`).
fn kinds() -> impl TypedValueParser<Value = PlotKind> {
    let values = PlotKind::ALL.map(|(_, name, shows)| PossibleValue::new(name).help(shows));
    PossibleValuesParser::new(values).try_map(|name| name.parse::<PlotKind>())
}

#[derive(clap::Args, Debug)]
pub struct PlotArgs {
    /// Run id, as `flowlab history` lists them.
    pub run: RunId,
    /// Swept parameter on the x axis (lines); default: the first numeric one.
    #[arg(long)]
    pub x: Option<String>,
    /// Metrics, one panel each: rtt, loss, cpu, delay, throughput, jitter or exact names.
    #[arg(long, value_delimiter = ',')]
    pub y: Vec<String>,
    /// One line per value of these parameters (lines); default: one line per test, by every
    /// other parameter the points vary, so only repetitions are averaged.
    #[arg(long, value_delimiter = ',')]
    pub by: Vec<String>,
    #[arg(long, value_parser = kinds(), default_value = "lines")]
    pub kind: PlotKind,
    /// Point whose packet log to plot (index in `flowlab show`); default: the first with one.
    #[arg(long)]
    pub point: Option<usize>,
    /// File to write: PNG when it ends in .png, else SVG.
    #[arg(long, short, default_value = "plot.svg")]
    pub output: PathBuf,
    /// Axis scales: auto (log when values span more than a decade), linear or log.
    #[arg(long, default_value = "auto")]
    pub scale: Scale,
    /// Logarithmic x axis (overrides --scale for x).
    #[arg(long)]
    pub log_x: bool,
    /// Logarithmic y axes (overrides --scale for y).
    #[arg(long)]
    pub log_y: bool,
    /// Results database.
    #[arg(long)]
    pub db: Option<PathBuf>,
}

/// `flowlab plot RUN ...`.
pub fn run_plot(args: PlotArgs) -> anyhow::Result<ExitCode> {
    let req = PlotRequest {
        kind: args.kind,
        x: args.x,
        ys: args.y,
        by: args.by,
        point: args.point,
        scales: Scales::from_flags(args.scale, args.log_x, args.log_y),
    };
    flowlab_runner::record::write_plot(args.db.as_deref(), args.run, &req, &args.output)?;
    println!("{}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Run id.
    pub run: RunId,
    /// HTML file to write (default: flowlab-run-RUN.html).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Results database.
    #[arg(long)]
    pub db: Option<PathBuf>,
}

/// `flowlab report RUN`.
pub fn run_report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let out = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("flowlab-run-{}.html", args.run)));
    flowlab_runner::record::write_report(args.db.as_deref(), args.run, &out)?;
    println!("{}", out.display());
    Ok(ExitCode::SUCCESS)
}
