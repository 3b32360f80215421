//! `flowlab demo`: an agent in this process on 127.0.0.1 and a small version of the
//! WS2NetTest tests ([`flowlab_runner::demo`]), stored and ending in an HTML report.

use std::process::ExitCode;

use flowlab_runner::{demo, format};

use crate::args::DemoArgs;
use flowlab_runner::terminal::{Output, Terminal};

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    flowlab_sys::signal::interrupt_flag();
    let demo = demo::run_demo(&mut Terminal::new(Output::Human, false))?;
    demo.save(&args.out)?;
    println!("\nAll results (JSON): {}", args.out.display());
    let id = demo.store(args.db.as_deref(), &args.report)?;
    println!("{}", format::demo_stored(id, &args.report));
    if let Some(e) = demo.failure {
        anyhow::bail!("demo stopped: {e}");
    }
    Ok(ExitCode::SUCCESS)
}
