//! `flowlab reproduce`: regenerates docs/reproductions.md from the seeds' published numbers
//! and the simulator (`flowlab_runner::reproduce`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// The Markdown to write; the plots go to reproductions/ beside it.
    #[arg(long, default_value = "docs/reproductions.md")]
    pub out: PathBuf,
    /// Only these seed papers (000 to 004, comma-separated); default all.
    #[arg(long)]
    pub seed: Option<String>,
    /// Also measure the rows a lab answers, through the emulator (root; minutes).
    #[arg(long)]
    pub emulated: bool,
}

pub fn run(args: ReproduceArgs) -> anyhow::Result<ExitCode> {
    let seeds: Vec<&str> = args.seed.iter().flat_map(|s| s.split(',')).collect();
    let rows = flowlab_runner::reproduce::write(&args.out, &seeds, args.emulated)?;
    println!("{}: {} rows", args.out.display(), rows.len());
    Ok(ExitCode::SUCCESS)
}
