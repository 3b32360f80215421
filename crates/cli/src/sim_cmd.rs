//! `flowlab sim FILE`: a scenario run in virtual time by the deterministic simulator.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use flowlab_units::parse_duration;

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
    let name = args.file.display().to_string();
    let text =
        std::fs::read_to_string(&args.file).with_context(|| format!("cannot read {name}"))?;
    let mut scenario =
        flowlab_sim::load(&text).map_err(|e| anyhow::anyhow!("{}", e.with_file(&name)))?;
    if let Some(d) = args.duration {
        if d.is_zero() {
            anyhow::bail!("invalid duration: must be above 0 s");
        }
        scenario.set_duration_ns(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }
    let report = flowlab_sim::run(&scenario, args.seed);
    let json = flowlab_sim::to_json(&report);
    if let Some(path) = &args.output {
        std::fs::write(path, format!("{json}\n"))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        writeln!(out, "{json}")?;
    } else {
        write!(out, "{}", flowlab_sim::render_human(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}
