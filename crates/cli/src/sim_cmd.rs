//! `flowlab sim FILE`: a scenario run in virtual time by the deterministic simulator.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use flowlab_units::parse_duration;

use flowlab_runner::output::print_result;

#[derive(Args, Debug)]
pub struct SimArgs {
    /// The scenario file (TOML): nodes, links, flows, contracts; see docs/simulation.md.
    pub file: PathBuf,
    /// Seed of the simulation's random choices, overriding the file's.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Simulated time, overriding the file's (10s, 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Print the report as one JSON document.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn run(args: SimArgs) -> anyhow::Result<ExitCode> {
    let report = flowlab_runner::simulated::run_scenario(&args.file, args.seed, args.duration)?;
    let json = flowlab_sim::to_json(&report);
    print_result(&json, args.output.as_deref(), args.json, || {
        flowlab_sim::render_human(&report)
    })?;
    Ok(ExitCode::SUCCESS)
}
