//! `flowlab test --iperf3 HOST[:PORT]`: a test against an unmodified `iperf3 -s`, measured
//! on flowlab's side by flowlab's meters, and written as flowlab's result document with the
//! server's own figures (from its results) as the other side.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use flowlab_control::client::resolve_with_port;
use flowlab_control::result::{Origin, TestResult};
use flowlab_control::{TestOptions, TestRun};
use flowlab_iperf3::frame::{encode_json, MAX_RESULTS_JSON};
use flowlab_iperf3::udp::{CONNECT_MSG, CONNECT_REPLY, LEGACY_CONNECT_REPLY};
use flowlab_iperf3::{
    ClientAction, ClientMachine, Cookie, Params, ParamsLimits, Results, State, TestPlan,
};
use flowlab_results::meter::{ReceiverMeter, SenderMeter};
use flowlab_results::{ReceiverReport, Role, SenderReport, SideReport};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_stats::SeqCounts;

use super::server::read_document;
use super::streams::{self, Streams};

/// The version this client names in its parameters.
const CLIENT_VERSION: &str = concat!("flowlab-", env!("CARGO_PKG_VERSION"));
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// What a flowlab client asks of an iperf3 server: iperf3's own bounds (`MAX_TIME`,
/// `MAX_STREAMS`), and TCP writes long enough for flowlab's header.
const CLIENT_LIMITS: ParamsLimits = ParamsLimits {
    max_duration_s: 86_400,
    max_rate_bps: None,
    max_streams: 128,
    min_tcp_block: flowlab_wire::PROBE_HEADER_LEN as u64,
};

/// The iperf3 test a flowlab test is, checked as a server would check it: a constant rate
/// (or TCP as fast as it goes) for a duration, one way or reverse, in streams of `--size`
/// writes or datagrams.
pub fn plan_of(spec: &TestSpec) -> anyhow::Result<TestPlan> {
    let unsupported = [
        (spec.protocol == Protocol::Raw, "native frames"),
        (spec.direction == Direction::Loopback, "loopback mode"),
        (spec.traffic.is_some(), "traffic models"),
        (spec.count.is_some(), "--count"),
        (spec.echo_every.is_some(), "--echo-every"),
    ];
    if let Some((_, what)) = unsupported.iter().find(|(on, _)| *on) {
        bail!("invalid iperf3 test: {what} not supported against iperf3");
    }
    let duration_ns = spec
        .duration_ns
        .ok_or_else(|| anyhow!("invalid iperf3 test: no duration"))?;
    let plan = TestPlan {
        udp: spec.protocol == Protocol::Udp,
        reverse: spec.direction == Direction::Reverse,
        streams: u64::from(spec.flows),
        duration_s: duration_ns.div_ceil(1_000_000_000),
        block: u64::from(spec.size),
        rate_bps: spec.rate_bps,
        counters_64bit: false,
    };
    let params = Params::for_plan(&plan, CLIENT_VERSION);
    params
        .check(&CLIENT_LIMITS)
        .map_err(|e| anyhow!("invalid iperf3 test: {e}"))
}

/// `flowlab test --iperf3`: the test `options` describe against the iperf3 server at their
/// target, until it ends or Ctrl-C.
pub fn run(options: &TestOptions) -> anyhow::Result<TestRun> {
    let plan = plan_of(&options.spec)?;
    let stop = flowlab_sys::signal::interrupt_flag();
    let mut run = run_test(&options.target, &plan, options.drain, stop)?;
    run.result.spec = options.spec.clone();
    Ok(run)
}

/// Runs `plan` against the iperf3 server at `target` (port 5201 unless given); a reverse
/// test's receivers wait `drain` after TEST_END for datagrams still in flight.
pub fn run_test(
    target: &str,
    plan: &TestPlan,
    drain: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<TestRun> {
    let server = resolve_with_port(target, flowlab_iperf3::DEFAULT_PORT)?;
    let started_at_ns = flowlab_sys::clock::realtime_ns();
    let mut random = [0u8; 36];
    rand::Rng::fill(&mut rand::thread_rng(), &mut random[..]);
    let cookie = Cookie::from_entropy(random);
    let mut control = TcpStream::connect_timeout(&server, SETUP_TIMEOUT)
        .with_context(|| format!("cannot reach the iperf3 server at {server}"))?;
    control.set_read_timeout(Some(SETUP_TIMEOUT + Duration::from_secs(plan.duration_s)))?;
    let _ = control.set_nodelay(true);
    control.write_all(cookie.bytes())?;
    let mut machine = ClientMachine::default();
    let mut streams = None;
    let mut ours = None;
    let mut theirs = None;
    loop {
        let mut byte = [0u8; 1];
        control
            .read_exact(&mut byte)
            .context("the iperf3 server closed the connection")?;
        match machine.on_server_state(byte[0])? {
            ClientAction::SendParams => {
                let params = Params::for_plan(plan, CLIENT_VERSION).to_json();
                control.write_all(&encode_json(&params))?;
            }
            ClientAction::ConnectStreams => streams = Some(open_streams(server, &cookie, plan)?),
            ClientAction::Wait => {}
            ClientAction::Run => {
                let streams = streams.as_ref().ok_or_else(|| anyhow!("no streams"))?;
                ours = Some(run_streams(&mut control, streams, plan, drain, stop)?);
            }
            ClientAction::ExchangeResults => {
                let (_, results) = ours
                    .as_ref()
                    .ok_or_else(|| anyhow!("results before the test"))?;
                control.write_all(&encode_json(&results.to_json()))?;
                let document = read_document(&mut control, MAX_RESULTS_JSON)?;
                theirs = Some(Results::parse(&document, plan.streams as usize)?);
            }
            ClientAction::Finish => {
                control.write_all(&[State::IperfDone.byte()])?;
                break;
            }
            ClientAction::ReadServerError => bail!("{}", server_error(&mut control)),
        }
    }
    let (side, _) = ours.ok_or_else(|| anyhow!("the server skipped the test"))?;
    let theirs = theirs.ok_or_else(|| anyhow!("the server sent no results"))?;
    Ok(result(
        target,
        server,
        started_at_ns,
        plan,
        side,
        &theirs,
        stop,
    ))
}

/// The two codes after SERVER_ERROR, in a line.
fn server_error(control: &mut TcpStream) -> String {
    let mut codes = [0u8; 8];
    match control.read_exact(&mut codes) {
        Ok(()) => {
            let code = u32::from_be_bytes([codes[0], codes[1], codes[2], codes[3]]);
            format!("the iperf3 server refused the test (iperf3 error number {code})")
        }
        Err(_) => "the iperf3 server refused the test".to_string(),
    }
}

/// Opens the plan's streams as iperf3's client does: TCP connections that start with the
/// cookie, or UDP sockets that send "9876" and wait for "6789".
fn open_streams(server: SocketAddr, cookie: &Cookie, plan: &TestPlan) -> anyhow::Result<Streams> {
    let count = plan.streams as usize;
    if !plan.udp {
        let open = |_| -> anyhow::Result<TcpStream> {
            let mut s = TcpStream::connect_timeout(&server, SETUP_TIMEOUT)?;
            s.write_all(cookie.bytes())?;
            Ok(s)
        };
        return Ok(Streams::Tcp(
            (0..count).map(open).collect::<anyhow::Result<_>>()?,
        ));
    }
    let unspecified: SocketAddr = match server {
        SocketAddr::V4(_) => "0.0.0.0:0".parse()?,
        SocketAddr::V6(_) => "[::]:0".parse()?,
    };
    let open = |_| -> anyhow::Result<UdpSocket> {
        let socket = UdpSocket::bind(unspecified)?;
        socket.connect(server)?;
        socket.set_read_timeout(Some(SETUP_TIMEOUT))?;
        socket.send(&CONNECT_MSG)?;
        let mut buf = vec![0u8; plan.block as usize + 1];
        // In reverse tests the server's first datagrams may come before its reply.
        for _ in 0..3 {
            let n = socket.recv(&mut buf)?;
            if buf[..n] == CONNECT_REPLY || buf[..n] == LEGACY_CONNECT_REPLY {
                return Ok(socket);
            }
        }
        bail!("the iperf3 server did not accept a UDP stream")
    };
    Ok(Streams::Udp(
        (0..count).map(open).collect::<anyhow::Result<_>>()?,
    ))
}

/// Runs the test for its duration (or until `stop`), then TEST_END (a receiver goes on for
/// `drain`); flowlab's side report and its iperf3 results.
fn run_streams(
    control: &mut TcpStream,
    streams: &Streams,
    plan: &TestPlan,
    drain: Duration,
    stop: &AtomicBool,
) -> anyhow::Result<(SideReport, Results)> {
    let done = AtomicBool::new(false);
    let ends_at = Instant::now() + Duration::from_secs(plan.duration_s);
    let measured = std::thread::scope(|scope| {
        let measuring = scope.spawn(|| match plan.reverse {
            false => (Some(streams::send_all(streams, plan, None, &done)), None),
            true => (None, Some(streams::receive_all(streams, plan, &done))),
        });
        while Instant::now() < ends_at && !stop.load(Ordering::Relaxed) && !measuring.is_finished()
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        // A sender stops before TEST_END; a receiver hears what was sent until the server
        // read it.
        if !plan.reverse {
            done.store(true, Ordering::Relaxed);
        }
        let end = control.write_all(&[State::TestEnd.byte()]);
        if plan.reverse {
            std::thread::sleep(drain);
            done.store(true, Ordering::Relaxed);
        }
        (measuring.join(), end)
    });
    let (sent, received) = measured.0.map_err(|_| anyhow!("a stream thread failed"))?;
    measured.1?;
    let results = Results {
        sender_has_retransmits: if plan.reverse { -1.0 } else { 0.0 },
        streams: streams::stream_results(plan, sent.as_ref().map(|s| &s.0), received.as_ref()),
        ..Results::default()
    };
    let error = sent.as_ref().and_then(|s| s.1.clone());
    let (role, sender) = match sent {
        Some((report, _)) => (Role::Sender, Some(report)),
        None => (Role::Receiver, None),
    };
    Ok((side(role, sender, received, error), results))
}

fn side(
    role: Role,
    sender: Option<SenderReport>,
    receiver: Option<ReceiverReport>,
    error: Option<String>,
) -> SideReport {
    SideReport {
        sender,
        receiver,
        error,
        ..SideReport::new(role, flowlab_sys::host::hostname())
    }
}

/// The iperf3 server's side as flowlab reports it: totals of its per-stream figures.
fn server_side(plan: &TestPlan, theirs: &Results) -> SideReport {
    let sum = |f: fn(&flowlab_iperf3::StreamResult) -> f64| {
        theirs.streams.iter().map(f).sum::<f64>() as u64
    };
    let longest = theirs
        .streams
        .iter()
        .map(|s| s.end_time - s.start_time)
        .fold(0.0, f64::max);
    let duration_ns = (longest * 1e9) as u64;
    let note = match plan.udp {
        true => "figures from the iperf3 server's results",
        false => {
            "figures from the iperf3 server's results; TCP packets are its bytes in --size blocks"
        }
    };
    let mut report = match plan.reverse {
        true => {
            let mut sent = SenderMeter::new(0, false, false).report();
            (sent.packets_sent, sent.bytes_sent) = (sum(|s| s.packets), sum(|s| s.bytes));
            sent.duration_ns = duration_ns;
            side(Role::Sender, Some(sent), None, None)
        }
        false => {
            let mut received = ReceiverMeter::new(1, false, false).report(None);
            let lost = sum(|s| s.errors);
            // TCP has no datagrams: its bytes are counted in blocks of the write size.
            let unique = match plan.udp {
                true => sum(|s| s.packets).saturating_sub(lost),
                false => sum(|s| s.bytes).div_ceil(plan.block),
            };
            received.packets = SeqCounts {
                received: unique,
                unique,
                lost,
                ..SeqCounts::default()
            };
            received.bytes_received = sum(|s| s.bytes);
            received.duration_ns = duration_ns;
            let jitters = theirs.streams.iter().map(|s| s.jitter).sum::<f64>();
            received.jitter_ns = jitters / theirs.streams.len().max(1) as f64 * 1e9;
            received.arrival_clock = "iperf3".to_string();
            side(Role::Receiver, None, Some(received), None)
        }
    };
    report.host = "iperf3".to_string();
    report.notes.push(note.to_string());
    report
}

fn result(
    target: &str,
    server: SocketAddr,
    started_at_ns: u64,
    plan: &TestPlan,
    ours: SideReport,
    theirs: &Results,
    stop: &AtomicBool,
) -> TestRun {
    let spec = streams::spec_of(plan, !plan.reverse);
    let agent = server_side(plan, theirs);
    let error = ours.error.clone();
    let origin = Origin {
        target: target.to_string(),
        agent_address: server.to_string(),
        ipv6: server.is_ipv6(),
        started_at_ns,
    };
    TestRun {
        result: TestResult {
            interrupted: stop.load(Ordering::Relaxed),
            error,
            ..TestResult::new(spec, origin, Some(ours), Some(agent))
        },
        packets: Vec::new(),
    }
}
