//! `flowlab test --stamp` (a STAMP session to any reflector) and `flowlab serve --stamp` (a
//! STAMP reflector beside the agent, or alone): flags in, calls to `flowlab_stamp`.

use std::process::ExitCode;

use anyhow::anyhow;
use flowlab_control::load_key;
use flowlab_runner::test::{resolve_agent, usage_error, usage_error_if_invalid};
use flowlab_stamp::service::{reflector_addr, stopping_line};
use flowlab_stamp::{ReflectorThread, SessionRequest};
use flowlab_wire::stamp::STAMP_PORT;

use crate::args::{ServeArgs, TestArgs};
use flowlab_runner::output::{conclude, print_result};

/// `flowlab test --stamp HOST[:PORT]`.
pub fn run_test(args: &TestArgs) -> anyhow::Result<ExitCode> {
    let key = args.key_file.as_deref().map(load_key).transpose()?;
    let request = SessionRequest {
        key: key.as_deref(),
        size: args.size,
        rate: args.rate,
        count: args.count,
        duration: args.duration,
        drain: args.drain,
        pacing: args.pacing,
    };
    let family = flowlab_control::client::Family::from_flags(args.ipv4, args.ipv6);
    let resolve =
        || resolve_agent(&args.target, args.port, family, STAMP_PORT).map_err(|e| e.to_string());
    let options = request.options(resolve).map_err(usage_error_if_invalid)?;
    flowlab_sys::signal::interrupt_flag();
    let result = flowlab_stamp::run_session(&options)?;
    let json = serde_json::to_string_pretty(&result)?;
    print_result(&json, args.output.as_deref(), args.json, || {
        flowlab_stamp::render(&result)
    })?;
    let ending = conclude(result.error.as_deref(), result.interrupted, "session");
    Ok(ending.unwrap_or(ExitCode::SUCCESS))
}

/// Starts the reflector `--stamp` asks for, if any, and says where and how it reflects.
pub fn start_reflector(
    args: &ServeArgs,
    key: Option<&[u8]>,
) -> anyhow::Result<Option<ReflectorThread>> {
    let Some(spec) = &args.stamp else {
        return Ok(None);
    };
    let addr = reflector_addr(spec, args.bind).map_err(usage_error)?;
    let reflector = ReflectorThread::spawn(addr, key, args.stamp_max_pps, |e| {
        eprintln!("flowlab: error: STAMP reflector stopped: {e}")
    })?;
    eprintln!("{}", reflector.banner());
    Ok(Some(reflector))
}

/// Stops the reflector (now, or with `wait`, at Ctrl-C) and says what it did.
pub fn finish_reflector(reflector: ReflectorThread, wait: bool) -> anyhow::Result<ExitCode> {
    let stats = reflector.finish(wait).map_err(|e| anyhow!(e))?;
    eprintln!("{}", stopping_line(&stats));
    Ok(ExitCode::SUCCESS)
}
