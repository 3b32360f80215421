//! `flowlab test`: one test against an agent.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use flowlab_control::{load_key, TestOptions, TestRun};
use flowlab_runner::format;
use flowlab_runner::sweep::PointBase;
use flowlab_spec::{Direction, Param, Protocol, SocketOptions, TestSpec};
use flowlab_traffic::TrafficSpec;
use flowlab_units::Rate;

use crate::args::{Mode, Proto, TestArgs};
use crate::terminal::{Output, Terminal};

/// Turns flags into a validated test spec.
pub fn spec_from_args(args: &TestArgs) -> anyhow::Result<TestSpec> {
    let spec = spec_of_flags(args)?;
    spec.validate()
        .map_err(|e| anyhow::anyhow!("invalid test: {e}"))?;
    Ok(spec)
}

/// The test the flags describe, not yet validated.
fn spec_of_flags(args: &TestArgs) -> anyhow::Result<TestSpec> {
    let named = traffic_text(args)
        .map(|t| TrafficSpec::parse(&t))
        .transpose()
        .map_err(|e| anyhow::anyhow!("invalid traffic: {e}"))?;
    // A TCP application's traffic (rr, crr, the TCP presets) goes over TCP unless told otherwise.
    let prefers_tcp = named.as_ref().is_some_and(TrafficSpec::prefers_tcp);
    let protocol = match (args.tcp, args.udp, args.proto) {
        (true, _, _) | (_, _, Some(Proto::Tcp)) => Protocol::Tcp,
        (_, true, _) | (_, _, Some(Proto::Udp)) => Protocol::Udp,
        (_, _, None) if prefers_tcp => Protocol::Tcp,
        (_, _, None) => Protocol::Udp,
        (_, _, Some(Proto::Raw)) => Protocol::Raw,
    };
    let transactions = named.as_ref().is_some_and(|t| t.transactions().is_some());
    let direction = match (args.reverse, args.mode) {
        (true, _) => Direction::Reverse,
        (false, Mode::Oneway) => Direction::Oneway,
        (false, Mode::Loopback) => Direction::Loopback,
    };
    let defaults = TestSpec::new(protocol, direction);
    let rate = args.rate.unwrap_or(match defaults.rate_bps {
        Some(r) if !transactions => Rate::BitsPerSec(r),
        _ => Rate::Max,
    });
    let size = args.size.unwrap_or(u64::from(defaults.size));
    let size =
        u32::try_from(size).map_err(|_| anyhow::anyhow!("invalid size: {size} B is too large"))?;
    let duration = match (args.duration, args.count) {
        (None, None) => defaults.duration_ns.map(Duration::from_nanos),
        (d, _) => d,
    };
    let traffic = traffic_from_args(args, &rate, size)?;
    // Each sub-flow of a preset (audio, video) is a flow of its own.
    let flows = match &traffic {
        Some(t) if args.flows == 1 && !transactions => {
            flowlab_runner::defaults::model_flows(t, args.seed)
        }
        _ => args.flows,
    };
    let spec = TestSpec {
        protocol,
        direction,
        rate_bps: match rate {
            Rate::Max => None,
            Rate::BitsPerSec(r) => Some(r),
        },
        size,
        duration_ns: duration.map(|d| d.as_nanos().min(u128::from(u64::MAX)) as u64),
        count: args.count,
        interval_ns: args.interval.map(|i| i.as_nanos() as u64),
        flows,
        client_udp_ports: Vec::new(),
        raw: None,
        busy_poll: args.busy_poll,
        packet_log: args.packet_log.is_some(),
        socket: SocketOptions {
            send_buffer: args.send_buffer,
            recv_buffer: args.recv_buffer,
            kernel_pacing: args.kernel_pacing,
            zerocopy: args.zerocopy,
            congestion: args.congestion.clone(),
            tx_timestamps: args.tx_timestamps,
            dscp: args.dscp,
            priority: args.priority,
            mark: args.mark,
            nodelay: args.nodelay,
            mss: args.mss,
            window_clamp: args.window_clamp,
            read_rate_bps: args.read_rate,
        },
        traffic,
        seed: args.seed,
    };
    Ok(spec)
}

/// The `--traffic` text, or the `--preset` as one.
fn traffic_text(args: &TestArgs) -> Option<String> {
    match (&args.traffic, &args.preset) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(p)) => Some(format!("preset:{p}")),
        (None, None) => None,
    }
}

/// The traffic model the flags name, with files read and embedded so the agent needs none.
fn traffic_from_args(
    args: &TestArgs,
    rate: &Rate,
    size: u32,
) -> anyhow::Result<Option<TrafficSpec>> {
    let Some(text) = traffic_text(args) else {
        return Ok(None);
    };
    let rate = match rate {
        Rate::BitsPerSec(r) => *r,
        Rate::Max => 1_000_000,
    };
    let spec = TrafficSpec::parse(&text)
        .map_err(anyhow::Error::from)
        .and_then(|t| flowlab_runner::test::embed_files(&t.with_defaults(rate, size)))
        .map_err(|e| anyhow::anyhow!("invalid traffic: {e}"))?;
    Ok(Some(spec))
}

/// The test a sweep's points start from: the flags common to every point, and which
/// parameters they give.
pub fn point_base(args: &TestArgs) -> anyhow::Result<PointBase> {
    let given = [
        (
            Param::Protocol,
            args.tcp || args.udp || args.proto.is_some(),
        ),
        (Param::Size, args.size.is_some()),
        (Param::Rate, args.rate.is_some()),
        (Param::Duration, args.duration.is_some()),
        // A preset gives its own flows unless told otherwise.
        (Param::Flows, args.flows != 1),
    ];
    Ok(PointBase {
        spec: spec_of_flags(args)?,
        given: given
            .into_iter()
            .filter(|(_, g)| *g)
            .map(|(p, _)| p)
            .collect(),
    })
}

pub fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if args.stamp {
        return crate::stamp_cmd::run_test(&args);
    }
    let spec = spec_from_args(&args)?;
    if let Some(cpus) = &args.cpus {
        flowlab_runner::host::pin_cpus(&cpus.0)?;
    }
    let key = args.key_file.as_deref().map(load_key).transpose()?;
    let options = TestOptions {
        target: args.target.clone(),
        spec,
        key,
        drain: args.drain,
        interface: args.interface.clone(),
        agent_interface: args.agent_interface.clone(),
    };
    flowlab_sys::signal::interrupt_flag();
    let output = match (args.json, args.json_stream) {
        (true, _) => Output::Json,
        (_, true) => Output::JsonStream,
        _ => Output::Human,
    };
    let run = flowlab_runner::test::run_test(&options, &mut Terminal::new(output, false))?;
    flowlab_runner::test::save(&run, args.output.as_deref(), args.packet_log.as_deref())?;
    // Before printing: a closed stdout (`| head`) must not lose the result.
    let stored = store(&args, &options, &run);
    let mut stdout = std::io::stdout().lock();
    match output {
        Output::Json => writeln!(stdout, "{}", serde_json::to_string_pretty(&run.result)?)?,
        Output::JsonStream => writeln!(stdout, "{}", format::stream_line("result", &run.result))?,
        Output::Human => write!(stdout, "{}", format::render(&run.result))?,
    }
    stdout.flush()?;
    if let Some(e) = &run.result.error {
        eprintln!("flowlab: error: {e} (results above cover the test up to then)");
        return Ok(ExitCode::from(1));
    }
    if run.result.interrupted {
        eprintln!("flowlab: interrupted: results above cover the test up to then");
        return Ok(ExitCode::from(130));
    }
    Ok(if stored {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Records the test in the results database unless `--no-store`; false, with the reason said
/// in one line, when it could not.
fn store(args: &TestArgs, options: &TestOptions, run: &TestRun) -> bool {
    if args.no_store {
        return true;
    }
    match flowlab_runner::record::store_single_test(args.db.as_deref(), options, run) {
        Ok(id) => eprintln!("flowlab: stored as run {id} (flowlab show {id})"),
        Err(e) => {
            eprintln!("flowlab: error: result not stored: {e:#}");
            return false;
        }
    }
    true
}
