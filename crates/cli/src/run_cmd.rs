//! `flowlab run FILE`: an experiment across many hosts, run by
//! [`flowlab_runner::experiment`] on the real network's agents, a lab's, or a simulated
//! network.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use flowlab_runner::experiment::{self, Target};

use flowlab_runner::terminal::{Output, Terminal};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The experiment file (TOML); see docs/experiments.md.
    pub file: PathBuf,
    /// Take host addresses from this running lab (`flowlab lab up`): hosts named as in the lab.
    #[arg(long)]
    pub lab: Option<String>,
    /// Run on this simulated network instead (a network file, docs/simulation.md).
    #[arg(long, conflicts_with = "lab", value_name = "NETWORK.toml")]
    pub sim: Option<PathBuf>,
    /// Pre-shared key of the agents.
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// The results database, a file or postgres:// URL (default: $FLOWLAB_DB or XDG data dir).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Also write the HTML report of the run here.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// Print the results as one JSON document.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let name = args.file.display().to_string();
    let key = args
        .key_file
        .as_deref()
        .map(flowlab_control::load_key)
        .transpose()?;
    let target = Target::from_flags(args.lab.as_deref(), args.sim.as_deref())?;
    flowlab_sys::signal::interrupt_flag();
    let mut prepared = experiment::prepare(&args.file, target, key)?;
    let output = if args.json {
        Output::Json
    } else {
        Output::Human
    };
    let mut terminal = Terminal::new(output, false);
    let outcome = prepared.run(&mut terminal)?;
    // The results are printed even when they cannot be stored; that error comes last.
    let (db, report) = (args.db.as_deref(), args.report.as_deref());
    let (stored, not_stored) = match outcome.store(db, &name, report) {
        Ok(id) => (id, None),
        Err(e) => (None, Some(e)),
    };
    if args.json {
        println!("{}", outcome.to_json(stored));
    } else if let Some(id) = stored {
        println!("stored as run {id} (flowlab show {id}, flowlab report {id})");
    }
    let failed = outcome.failed();
    if failed > 0 {
        eprintln!(
            "flowlab: {failed} of {} flows failed; the others' results are kept",
            outcome.flows.len()
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
