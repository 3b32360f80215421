//! The `flowlab` command: parses flags, validates them and dispatches to the library crates.

mod args;
mod demo;
mod history_cmd;
mod lab_cmd;
mod plot_cmd;
mod reproduce_cmd;
mod run_cmd;
mod serve;
mod sim_cmd;
mod stamp_cmd;
mod sweep_cmd;
mod terminal;
mod test_cmd;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line, like every other error: clap's first line, without its own prefix.
            let line = flowlab_runner::format::one_line_error(&e.to_string());
            eprintln!("flowlab: error: {line} (see --help)");
            return ExitCode::from(2);
        }
    };
    // Many-flow tests need a socket per flow; the soft limit of 1024 is too low for them.
    let _ = flowlab_sys::host::raise_open_file_limit();
    let result = match cli.command {
        args::Command::Serve(a) => serve::run(a),
        args::Command::Test(a) => test_cmd::run(*a),
        args::Command::Demo(a) => demo::run(a),
        args::Command::Sim(a) => sim_cmd::run(a),
        args::Command::Reproduce(a) => reproduce_cmd::run(a),
        args::Command::Lab(a) => lab_cmd::run(a),
        args::Command::Run(a) => run_cmd::run(a),
        args::Command::Sweep(a) => sweep_cmd::run(*a),
        args::Command::History(a) => history_cmd::run_history(a),
        args::Command::Show(a) => history_cmd::run_show(a),
        args::Command::Export(a) => history_cmd::run_export(a),
        args::Command::Compare(a) => history_cmd::run_compare(a),
        args::Command::Plot(a) => plot_cmd::run_plot(a),
        args::Command::Report(a) => plot_cmd::run_report(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            let code = flowlab_runner::test::exit_code(&e);
            if code != 0 {
                eprintln!("flowlab: error: {e:#}");
            }
            ExitCode::from(code)
        }
    }
}
