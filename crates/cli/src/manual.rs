//! `flowlab completions SHELL` and `flowlab man [COMMAND]`, generated from the clap definitions.

use std::process::ExitCode;

use clap::CommandFactory as _;

use crate::args::Cli;

pub fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut out = std::io::stdout().lock();
    clap_complete::generate(shell, &mut Cli::command(), "flowlab", &mut out);
    Ok(ExitCode::SUCCESS)
}

/// The page of `flowlab`, or of `flowlab COMMAND` (named `flowlab-COMMAND`, as git's are).
pub fn man(command: Option<&str>) -> anyhow::Result<ExitCode> {
    let mut cli = Cli::command();
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => cli.find_subcommand(name).cloned().ok_or_else(|| {
            flowlab_runner::test::usage_error(format!("flowlab has no command '{name}'"))
        })?,
    };
    let man = clap_mangen::Man::new(page).source(concat!("flowlab ", env!("CARGO_PKG_VERSION")));
    man.render(&mut std::io::stdout().lock())?;
    Ok(ExitCode::SUCCESS)
}
