//! The `flowlab` command: parses flags, validates them and dispatches to the library crates.

mod args;
mod demo;
mod output;
mod serve;
mod test_cmd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    let result = match cli.command {
        args::Command::Serve(a) => serve::run(a),
        args::Command::Test(a) => test_cmd::run(a),
        args::Command::Demo(a) => demo::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A closed pipe (`flowlab test ... | head`) is not an error.
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("flowlab: error: {e:#}");
            ExitCode::from(1)
        }
    }
}
