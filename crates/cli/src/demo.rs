//! `flowlab demo`: an agent in this process on 127.0.0.1 and a small version of the
//! WS2NetTest tests ([`flowlab_runner::demo`]), stored and ending in an HTML report.

use std::process::ExitCode;

use flowlab_runner::demo;

use crate::args::DemoArgs;
use crate::terminal::{Output, Terminal};

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    flowlab_sys::signal::interrupt_flag();
    let demo = demo::run_demo(&mut Terminal::new(Output::Human, false))?;
    demo.save(&args.out)?;
    println!("\nAll results (JSON): {}", args.out.display());
    let id = demo.store(args.db.as_deref(), &args.report)?;
    println!(
        "Stored as run {id}. Report (round trip, loss and CPU against packet size, UDP and TCP, \
         with 95% confidence intervals): {}",
        args.report.display()
    );
    if let Some(e) = demo.failure {
        anyhow::bail!("demo stopped: {e}");
    }
    Ok(ExitCode::SUCCESS)
}
