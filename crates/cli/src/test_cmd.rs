//! `flowlab test`: one test against an agent.

use std::process::ExitCode;
use std::time::Duration;

use flowlab_control::client::Family;
use flowlab_control::{load_key, TestOptions};
use flowlab_runner::format;
use flowlab_runner::multicast::MulticastRequest;
use flowlab_runner::sweep::PointBase;
use flowlab_spec::{Direction, Param, ParamValue, Protocol, SocketOptions, TestSpec};
use flowlab_traffic::TrafficSpec;

use crate::args::{Mode, Proto, TestArgs};
use flowlab_runner::output::{conclude, print_result, titled};
use flowlab_runner::terminal::Output;
use flowlab_runner::test::{pinned_target, usage_error};

/// How often `--live` redraws unless `--interval` says.
const LIVE_INTERVAL: Duration = Duration::from_secs(1);

/// Turns flags into a validated test spec; a refusal is a usage error (exit status 2).
pub fn spec_from_args(args: &TestArgs) -> anyhow::Result<TestSpec> {
    let spec = point_base(args).map_err(usage_error)?.spec;
    spec.validate()
        .map_err(|e| usage_error(format!("invalid test: {e}")))?;
    Ok(spec)
}

/// The test the flags describe, not yet validated, and which parameters they give (a
/// sweep's points start from it). The flags others' defaults follow (traffic, protocol,
/// size, rate, duration, flows) are set as a sweep sets a point's.
pub fn point_base(args: &TestArgs) -> anyhow::Result<PointBase> {
    use ParamValue as V;
    let invalid_traffic = |e: &dyn std::fmt::Display| anyhow::anyhow!("invalid traffic: {e}");
    let mut point = Vec::new();
    // The `--traffic` text, or the `--preset` as one.
    let preset = args.preset.as_ref().map(|p| format!("preset:{p}"));
    if let Some(text) = args.traffic.clone().or(preset) {
        let model = TrafficSpec::parse(&text).map_err(|e| invalid_traffic(&e))?;
        point.push((Param::Traffic, V::Traffic(model)));
    }
    let protocol = match (args.tcp, args.udp, args.proto) {
        (true, _, _) | (_, _, Some(Proto::Tcp)) => Some(Protocol::Tcp),
        (_, true, _) | (_, _, Some(Proto::Udp)) => Some(Protocol::Udp),
        (_, _, Some(Proto::Raw)) => Some(Protocol::Raw),
        (_, _, Some(Proto::Icmp)) => Some(Protocol::Icmp),
        (_, _, None) => None,
    };
    point.extend(protocol.map(|p| (Param::Protocol, V::Protocol(p))));
    if let Some(size) = args.size {
        u32::try_from(size).map_err(|_| anyhow::anyhow!("invalid size: {size} B is too large"))?;
        point.push((Param::Size, V::Bytes(size)));
    }
    point.extend(args.rate.map(|r| (Param::Rate, V::Rate(r.bits_per_sec()))));
    let nanos = |d: Duration| d.as_nanos().min(u128::from(u64::MAX)) as u64;
    point.extend(
        args.duration
            .map(|d| (Param::Duration, V::Duration(nanos(d)))),
    );
    point.extend(args.echo_every.map(|n| (Param::EchoEvery, V::Number(n))));
    if args.flows != 1 {
        point.push((Param::Flows, V::Number(u64::from(args.flows))));
    }
    let direction = match (args.reverse, args.mode) {
        (true, _) => Direction::Reverse,
        (false, Mode::Oneway) => Direction::Oneway,
        (false, Mode::Loopback) => Direction::Loopback,
    };
    let base = TestSpec {
        count: args.count,
        interval_ns: args
            .interval
            .or(args.live.then_some(LIVE_INTERVAL))
            .map(nanos),
        omit_ns: args.omit.map(nanos),
        busy_poll: args.busy_poll,
        pacing: args.pacing.unwrap_or_default(),
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
            dont_fragment: args.dont_fragment,
            packet_socket: args.packet_socket,
        },
        seed: args.seed,
        authenticated_packets: args.auth_packets,
        ..TestSpec::new(Protocol::Udp, direction)
    };
    let flags = PointBase {
        spec: base,
        given: Vec::new(),
    };
    let mut spec = flags.fill(&point)?;
    // Files read and embedded, so the agent needs none.
    if let Some(t) = &spec.traffic {
        let embedded = flowlab_runner::test::embed_files(t).map_err(|e| invalid_traffic(&e))?;
        spec.traffic = Some(embedded);
    }
    let given = point.into_iter().map(|(param, _)| param).collect();
    Ok(PointBase { spec, given })
}

pub fn run(args: TestArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.logfile {
        flowlab_runner::daemon::log_to(path)?;
    }
    if args.stamp {
        return crate::stamp_cmd::run_test(&args);
    }
    let spec = spec_from_args(&args)?;
    if let Some(cpus) = &args.cpus {
        flowlab_runner::host::pin_cpus(&cpus.0)?;
    }
    let key = args.key_file.as_deref().map(load_key).transpose()?;
    let options = TestOptions {
        target: pinned_target(
            &args.target,
            args.port,
            Family::from_flags(args.ipv4, args.ipv6),
        )?,
        spec,
        key,
        drain: args.drain,
        interface: args.interface.clone(),
        agent_interface: args.agent_interface.clone(),
        bind: args.bind,
        cport: args.cport,
    };
    if args.multicast {
        let db = (!args.no_store).then_some(args.db.as_deref());
        let request =
            MulticastRequest::new(options, &args.agents, args.ttl, args.iperf2.map(Into::into));
        return flowlab_runner::multicast::run_and_print(&request, args.json, db);
    }
    flowlab_runner::test::check_path_rate(&options.target, [&options.spec], args.force_rate)?;
    flowlab_sys::signal::interrupt_flag();
    let output = match (args.json, args.json_stream) {
        (true, _) => Output::Json,
        (_, true) => Output::JsonStream,
        _ => Output::Human,
    };
    let run = match args.iperf3 {
        true => flowlab_runner::iperf3::client::run(&options)?,
        false => {
            let mut observer = flowlab_runner::live::test_observer(output, args.live);
            let run = flowlab_runner::test::run_test(&options, &mut *observer)?;
            drop(observer); // the live view leaves the cursor under it for the result
            run
        }
    };
    flowlab_runner::test::save(&run, args.output.as_deref(), args.packet_log.as_deref())?;
    // Before printing: a closed stdout (`| head`) must not lose the result.
    let db = (!args.no_store).then_some(args.db.as_deref());
    let stored =
        flowlab_runner::record::store_test_saying(db, &options, &run, args.title.as_deref());
    let json = match output {
        Output::JsonStream => format::stream_line("result", &run.result),
        _ => serde_json::to_string_pretty(&run.result)?,
    };
    print_result(&json, None, output != Output::Human, || {
        titled(args.title.as_deref(), format::render(&run.result))
    })?;
    let ending = conclude(run.result.error.as_deref(), run.result.interrupted, "test");
    Ok(ending.unwrap_or(ExitCode::from(u8::from(!stored))))
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::args::{Cli, Command};

    fn flags(line: &str) -> TestArgs {
        let argv = format!("flowlab test 127.0.0.1 {line}");
        match Cli::try_parse_from(argv.split_whitespace())
            .unwrap()
            .command
        {
            Command::Test(args) => *args,
            _ => unreachable!("a test"),
        }
    }

    #[test]
    fn what_the_flags_leave_follows_what_they_give() {
        let preset = spec_from_args(&flags("--preset videoconf-1998")).unwrap();
        assert_eq!((preset.protocol, preset.flows), (Protocol::Udp, 2));
        let rr = spec_from_args(&flags("--traffic rr:request=64,response=1k")).unwrap();
        assert_eq!(
            (rr.protocol, rr.rate_bps, rr.flows),
            (Protocol::Tcp, None, 1)
        );
        let counted = spec_from_args(&flags("--tcp --count 5")).unwrap();
        let tcp_size = flowlab_spec::default_size(Protocol::Tcp);
        assert_eq!((counted.duration_ns, counted.size), (None, tcp_size));
        let base = point_base(&flags("--rate 2M -P 3 --mode loopback")).unwrap();
        assert_eq!(base.given, [Param::Rate, Param::Flows]);
        assert_eq!(base.spec.direction, Direction::Loopback);
        let huge = spec_from_args(&flags("--size 9000000000")).unwrap_err();
        assert_eq!(huge.to_string(), "invalid size: 9000000000 B is too large");
    }

    #[test]
    fn iperf3_flags_mean_what_they_mean_there() {
        let short = "-t 3 -b 2M -l 500 -u -P 4 -R -J -p 5201 -4 -B 127.0.0.1 --cport 6000 \
                     -T x -A 0 -C reno -M 1400 -Z -O 1";
        let long = "--time 3 --bitrate 2M --length 500 --udp --parallel 4 --reverse --json \
                    --port 5201 --version4 --bind 127.0.0.1 --cport 6000 --title x \
                    --affinity 0 --congestion reno --set-mss 1400 --zerocopy --omit 1";
        let flowlab = "-d 3 -r 2M -s 500 --udp --flows 4 --reverse --json --port 5201 --ipv4 \
                       --bind 127.0.0.1 --cport 6000 --title x --cpus 0 --congestion reno \
                       --mss 1400 --zerocopy --omit 1";
        let (short, long) = (flags(short), flags(long));
        assert_eq!(format!("{short:?}"), format!("{long:?}"));
        assert_eq!(format!("{short:?}"), format!("{:?}", flags(flowlab)));
        let spec = spec_from_args(&short).unwrap();
        assert_eq!(
            (spec.duration_ns, spec.rate_bps, spec.size, spec.flows),
            (Some(3_000_000_000), Some(2_000_000), 500, 4)
        );
        assert_eq!(
            (spec.direction, spec.omit_ns),
            (Direction::Reverse, Some(1_000_000_000))
        );
        assert_eq!(
            (short.port, short.cport, short.json),
            (Some(5201), Some(6000), true)
        );
    }

    #[test]
    fn echo_every_is_a_flag_of_one_way_udp_loads() {
        let load = spec_from_args(&flags("--echo-every 10 --rate 2M")).unwrap();
        assert_eq!(
            (load.echo_every, load.rate_bps),
            (Some(10), Some(2_000_000))
        );
        assert_eq!(spec_from_args(&flags("")).unwrap().echo_every, None);
        let loopback = spec_from_args(&flags("--echo-every 10 --mode loopback")).unwrap_err();
        assert!(
            loopback
                .to_string()
                .starts_with("invalid test: echo-every measures RTT inside a one-way UDP load"),
            "{loopback}"
        );
        let zero = spec_from_args(&flags("--echo-every 0")).unwrap_err();
        assert_eq!(
            zero.to_string(),
            "invalid test: echo-every must be 1..=1000000 packets"
        );
    }
}
