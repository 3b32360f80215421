//! `flowlab sweep`: the flags of a sweep into a [`flowlab_runner::sweep`] job, each point's
//! test made from the sweep's test flags with the point's values set on top.

use std::process::ExitCode;

use clap::Parser as _;
use flowlab_control::load_key;
use flowlab_runner::format;
use flowlab_runner::sweep::{self, NetworkPoints, SweepJob};
use flowlab_runner::test::usage_error;

use crate::args::{SweepArgs, TestArgs};
use flowlab_runner::terminal::{Output, Terminal};

/// The flags of `flowlab test` common to every point, as typed, without those the sweep varies.
fn base_flags(args: &SweepArgs, varied: &[&str]) -> Vec<String> {
    let is_varied = |n: &str| varied.contains(&n);
    let mut f: Vec<String> = Vec::new();
    if !is_varied("proto") {
        if args.tcp {
            f.push("--tcp".into());
        }
        if args.udp {
            f.push("--udp".into());
        }
    }
    if !is_varied("mode") {
        if args.reverse {
            f.push("--reverse".into());
        }
        if let Some(m) = &args.mode {
            f.extend(["--mode".into(), m.clone()]);
        }
    }
    for (name, value) in [
        ("rate", &args.rate),
        ("size", &args.size),
        ("duration", &args.duration),
        ("count", &args.count),
        ("flows", &args.flows),
        ("interval", &args.interval),
        ("drain", &args.drain),
        ("pacing", &args.pacing),
    ] {
        if let Some(v) = value.as_ref().filter(|_| !is_varied(name)) {
            f.extend([format!("--{name}"), v.clone()]);
        }
    }
    f
}

/// `flowlab test`'s own flags, parsed by its own parser, so the flags common to every point
/// mean what they mean to `flowlab test`.
#[derive(clap::Parser, Debug)]
#[command(no_binary_name = true)]
struct BaseTest {
    #[command(flatten)]
    test: TestArgs,
}

/// The sweep's test flags (once for the whole sweep).
fn base_test(target: &str, flags: &[String]) -> anyhow::Result<TestArgs> {
    let argv = std::iter::once(target.to_string()).chain(flags.iter().cloned());
    let parsed = BaseTest::try_parse_from(argv).map_err(|e| {
        let line = format::one_line_error(&e.to_string());
        usage_error(format!("invalid test flags: {line}"))
    })?;
    Ok(parsed.test)
}

pub fn run(args: SweepArgs) -> anyhow::Result<ExitCode> {
    let axes = sweep::parse_axes(&args.vary).map_err(usage_error)?;
    let varied: Vec<&str> = axes.iter().map(|a| a.param.name()).collect();
    let test_flags = base_flags(&args, &varied);
    let base = base_test(&args.target, &test_flags)?;
    let start = crate::test_cmd::point_base(&base).map_err(usage_error)?;
    if let Some(warning) = sweep::protocol_defaults_warning(&axes, &start) {
        eprintln!("{warning}");
    }
    // The sweep stores the packet records in the database.
    let points = sweep::points_on(&axes, &start, args.packet_log).map_err(usage_error)?;
    let specs = points.iter().map(|p| &p.spec);
    flowlab_runner::test::check_path_rate(&args.target, specs, args.force_rate)?;
    let job = SweepJob {
        target: args.target.clone(),
        vary: args.vary.clone(),
        test_flags,
        repeat: args.repeat,
        until_ci: args.until_ci,
        max_repeat: args.max_repeat,
        ci_metric: args.ci_metric.clone(),
        shuffle: args.shuffle,
        seed: args.seed,
        packet_log: args.packet_log,
        resume: args.resume,
    };
    let mut runner = NetworkPoints {
        target: args.target.clone(),
        key: args.key_file.as_deref().map(load_key).transpose()?,
        drain: base.drain,
        packet_log: args.packet_log,
    };
    flowlab_sys::signal::interrupt_flag();
    let mut terminal = Terminal::new(Output::Human, args.quiet);
    let outcome = sweep::run_sweep(args.db.as_deref(), &job, points, &mut runner, &mut terminal);
    terminal.clear();
    let outcome = outcome?;
    print!("{}", format::sweep_summary(&outcome, &args.show));
    let ending = outcome
        .ending
        .conclusion(outcome.finished, outcome.run_id)?;
    Ok(ending.map_or(ExitCode::SUCCESS, |interrupted| {
        eprintln!("{interrupted}");
        ExitCode::from(130)
    }))
}
