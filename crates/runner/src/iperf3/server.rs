//! `flowlab serve --iperf3`: answers unmodified iperf3 clients, one test at a time as iperf3
//! does, treating each client as a stranger (docs/security.md): every parameter checked
//! against the agent's limits, streams taken only from the control connection's address,
//! data sent only on streams the client opened, every wait bounded.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use flowlab_iperf3::frame::{json_length, MAX_PARAMS_JSON, MAX_RESULTS_JSON};
use flowlab_iperf3::udp::{CONNECT_MSG, CONNECT_REPLY};
use flowlab_iperf3::{
    ParamsLimits, Results, ServerEvent, ServerMachine, State, TestPlan, COOKIE_SIZE,
};

use anyhow::Context;

use super::streams::{self, Streams};

/// How long a connection may take to send its cookie, a document, or its streams.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long past its duration a test may run before the server ends it.
const END_GRACE: Duration = Duration::from_secs(10);

/// What the server allows: each test's parameters, and connections still to send their
/// cookie (more are closed unread; the agent's `--max-connections`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLimits {
    pub params: ParamsLimits,
    pub max_pending: usize,
}

impl ServerLimits {
    /// The agent's limits, for iperf3 tests: its longest test, its rate over all streams,
    /// its flows as streams, its connections in setup.
    pub fn of_agent(limits: &flowlab_control::Limits, max_connections: usize) -> ServerLimits {
        ServerLimits {
            params: ParamsLimits {
                max_duration_s: limits.max_duration.as_secs(),
                max_rate_bps: limits.max_rate_bps,
                max_streams: limits.max_flows as u64,
                // flowlab's TCP sender stamps its header into every write.
                min_tcp_block: flowlab_wire::PROBE_HEADER_LEN as u64,
            },
            max_pending: max_connections,
        }
    }
}

/// Where a line per test goes.
pub type Log = Arc<dyn Fn(String) + Send + Sync>;

/// The running test: its cookie, and where its stream connections go.
type Active = Arc<Mutex<Option<([u8; COOKIE_SIZE], Sender<TcpStream>)>>>;

/// Serves iperf3 clients on `listener` until `stop`; `log` takes a line per test.
pub fn serve(
    listener: TcpListener,
    limits: ServerLimits,
    stop: &AtomicBool,
    log: Log,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let (tx, rx) = mpsc::channel::<(TcpStream, [u8; COOKIE_SIZE])>();
    let pending = Arc::new(AtomicUsize::new(0));
    let active: Active = Arc::new(Mutex::new(None));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => read_cookie_apart(conn, &tx, &pending, limits.max_pending),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(e),
        }
        while let Ok((conn, cookie)) = rx.try_recv() {
            dispatch(conn, cookie, &active, limits.params, &log);
        }
    }
    Ok(())
}

/// Reads a new connection's cookie on a thread of its own, so a silent one holds up no
/// other; beyond `max_pending` at once, connections are closed unread.
fn read_cookie_apart(
    mut conn: TcpStream,
    tx: &Sender<(TcpStream, [u8; COOKIE_SIZE])>,
    pending: &Arc<AtomicUsize>,
    max_pending: usize,
) {
    if pending.fetch_add(1, Ordering::SeqCst) >= max_pending {
        pending.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let (tx, pending) = (tx.clone(), Arc::clone(pending));
    std::thread::spawn(move || {
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(SETUP_TIMEOUT));
        let mut cookie = [0u8; COOKIE_SIZE];
        if conn.read_exact(&mut cookie).is_ok() {
            let _ = tx.send((conn, cookie));
        }
        pending.fetch_sub(1, Ordering::SeqCst);
    });
}

/// A connection with its cookie: a new test when none runs, a stream of the running test,
/// or turned away with ACCESS_DENIED.
fn dispatch(
    mut conn: TcpStream,
    cookie: [u8; COOKIE_SIZE],
    active: &Active,
    limits: ParamsLimits,
    log: &Log,
) {
    let mut slot = active.lock().unwrap_or_else(|e| e.into_inner());
    match &*slot {
        Some((owner, streams)) if *owner == cookie => {
            // Once the test has its streams it takes no more: turned away like strangers.
            if let Err(mpsc::SendError(mut conn)) = streams.send(conn) {
                let _ = conn.write_all(&[State::AccessDenied.byte()]);
            }
        }
        Some(_) => {
            let _ = conn.write_all(&[State::AccessDenied.byte()]);
        }
        None => {
            let (tx, rx) = mpsc::channel();
            *slot = Some((cookie, tx));
            let (active, log) = (Arc::clone(active), Arc::clone(log));
            std::thread::spawn(move || {
                let peer = conn
                    .peer_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string());
                let line = match run_test(conn, cookie, rx, limits) {
                    Ok(summary) => format!("iperf3 test from {peer}: {summary}"),
                    Err(e) => format!("iperf3 test from {peer} refused or failed: {e}"),
                };
                *active.lock().unwrap_or_else(|e| e.into_inner()) = None;
                log(line);
            });
        }
    }
}

/// One test on its control connection, from the cookie to IPERF_DONE; a line saying what
/// ran, or why it did not.
fn run_test(
    mut control: TcpStream,
    cookie: [u8; COOKIE_SIZE],
    stream_conns: Receiver<TcpStream>,
    limits: ParamsLimits,
) -> anyhow::Result<String> {
    control.set_read_timeout(Some(SETUP_TIMEOUT))?;
    let _ = control.set_nodelay(true);
    let (mut machine, answer) = ServerMachine::start(&cookie)?;
    control.write_all(&answer)?;
    let params = read_document(&mut control, MAX_PARAMS_JSON).context("no parameters")?;
    let (plan, answer) = match machine.on_params(&params, &limits) {
        Ok(accepted) => accepted,
        Err((refusal, bytes)) => {
            control.write_all(&bytes)?;
            return Err(refusal.into());
        }
    };
    let peer = control.peer_addr()?.ip();
    // Bound before CREATE_STREAMS, or the client's connect datagram may find no socket.
    let udp = plan
        .udp
        .then(|| UdpSocket::bind(control.local_addr()?))
        .transpose()?;
    control.write_all(&answer)?;
    let (streams, start) = match udp {
        Some(socket) => {
            drop(stream_conns);
            accept_udp(socket, peer, &mut machine)?
        }
        None => accept_tcp(stream_conns, peer, &mut machine)?,
    };
    control.write_all(&start)?;
    let (ours, summary) = run_streams(&mut control, &mut machine, &streams, &plan, limits)?;
    let theirs = read_document(&mut control, MAX_RESULTS_JSON).context("no client results")?;
    let (_, answer) = machine.on_client_results(&theirs, &ours)?;
    control.write_all(&answer)?;
    let mut last = [0u8; 1];
    control.read_exact(&mut last).context("no IPERF_DONE")?;
    machine.on_client_state(last[0])?;
    Ok(summary)
}

/// A length-prefixed JSON document of at most `max` bytes.
pub(crate) fn read_document(control: &mut TcpStream, max: usize) -> anyhow::Result<Vec<u8>> {
    let mut head = [0u8; 4];
    control.read_exact(&mut head)?;
    let mut document = vec![0u8; json_length(head, max)?];
    control.read_exact(&mut document)?;
    Ok(document)
}

/// The test's TCP streams: connections with its cookie from the client's address, until
/// the machine has them all; with the bytes that start the test. `conns` is dropped on
/// return, so later connections are refused.
fn accept_tcp(
    conns: Receiver<TcpStream>,
    peer: IpAddr,
    machine: &mut ServerMachine,
) -> anyhow::Result<(Streams, [u8; 2])> {
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut streams = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let conn = conns
            .recv_timeout(left)
            .map_err(|_| anyhow::anyhow!("streams not opened in time"))?;
        if conn.peer_addr()?.ip() != peer {
            continue;
        }
        streams.push(conn);
        if let Some(start) = machine.on_stream()? {
            return Ok((Streams::Tcp(streams), start));
        }
    }
}

/// The test's UDP streams: a connect datagram from each of the client's stream sockets,
/// answered, until the machine has them all; with the bytes that start the test.
/// Datagrams from other addresses are ignored.
fn accept_udp(
    socket: UdpSocket,
    peer: IpAddr,
    machine: &mut ServerMachine,
) -> anyhow::Result<(Streams, [u8; 2])> {
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut peers: Vec<SocketAddr> = Vec::new();
    let mut buf = [0u8; 64];
    loop {
        let late = || anyhow::anyhow!("UDP streams not opened in time");
        let left = deadline.saturating_duration_since(Instant::now());
        anyhow::ensure!(!left.is_zero(), late());
        socket.set_read_timeout(Some(left))?;
        let (n, from) = socket.recv_from(&mut buf).map_err(|_| late())?;
        if from.ip() != peer || buf[..n] != CONNECT_MSG || peers.contains(&from) {
            continue;
        }
        socket.send_to(&CONNECT_REPLY, from)?;
        peers.push(from);
        if let Some(start) = machine.on_stream()? {
            return Ok((Streams::UdpServer(socket, peers), start));
        }
    }
}

/// Runs the streams until the client's TEST_END (or its duration and a grace period),
/// sends EXCHANGE_RESULTS; the server's results and a line for the log.
fn run_streams(
    control: &mut TcpStream,
    machine: &mut ServerMachine,
    streams: &Streams,
    plan: &TestPlan,
    limits: ParamsLimits,
) -> anyhow::Result<(Results, String)> {
    let stop = AtomicBool::new(false);
    let ends_by = Instant::now() + Duration::from_secs(plan.duration_s) + END_GRACE;
    control.set_read_timeout(Some(Duration::from_millis(100)))?;
    let (results, ended) = std::thread::scope(|scope| {
        let measuring = scope.spawn(|| measure(streams, plan, limits, &stop));
        let ended = wait_for_end(control, machine, ends_by);
        stop.store(true, Ordering::Relaxed);
        (measuring.join(), ended)
    });
    streams.close();
    let answer = ended?;
    control.set_read_timeout(Some(SETUP_TIMEOUT))?;
    control.write_all(&answer)?;
    results.map_err(|_| anyhow::anyhow!("a stream thread failed"))
}

/// The client's next state byte, which must be TEST_END before `ends_by`.
fn wait_for_end(
    control: &mut TcpStream,
    machine: &mut ServerMachine,
    ends_by: Instant,
) -> anyhow::Result<Vec<u8>> {
    let mut byte = [0u8; 1];
    loop {
        anyhow::ensure!(Instant::now() < ends_by, "the client ran past its duration");
        match control.read(&mut byte) {
            Ok(0) => anyhow::bail!("the client closed the control connection"),
            Ok(_) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    match machine.on_client_state(byte[0])? {
        ServerEvent::TestEnd(answer) => Ok(answer),
        _ => anyhow::bail!("the client ended the test early"),
    }
}

/// This end's part: send (`-R`) or receive; its iperf3 results and a summary line.
fn measure(
    streams: &Streams,
    plan: &TestPlan,
    limits: ParamsLimits,
    stop: &AtomicBool,
) -> (Results, String) {
    let what = if plan.udp { "UDP" } else { "TCP" };
    let (sent, received, line) = match plan.reverse {
        true => {
            let (report, error) = streams::send_all(streams, plan, limits.max_rate_bps, stop);
            let line = format!(
                "{what} -R, {} stream(s): sent {} B in {} packets{}",
                plan.streams,
                report.bytes_sent,
                report.packets_sent,
                error.map_or_else(String::new, |e| format!(" ({e})"))
            );
            (Some(report), None, line)
        }
        false => {
            let report = streams::receive_all(streams, plan, stop);
            let line = format!(
                "{what}, {} stream(s): received {} B, {} packets, {} lost",
                plan.streams, report.bytes_received, report.packets.unique, report.packets.lost
            );
            (None, Some(report), line)
        }
    };
    let results = Results {
        sender_has_retransmits: if plan.reverse { 0.0 } else { -1.0 },
        streams: streams::stream_results(plan, sent.as_ref(), received.as_ref()),
        ..Results::default()
    };
    (results, line)
}

/// Binds `addr` and serves iperf3 clients on a thread until Ctrl-C; the thread's handle and
/// the address it listens on.
pub fn spawn(
    addr: SocketAddr,
    limits: ServerLimits,
    log: Log,
) -> anyhow::Result<(std::thread::JoinHandle<io::Result<()>>, SocketAddr)> {
    let listener = crate::host::bind(addr.ip(), addr.port())?;
    let local = listener.local_addr()?;
    let stop = flowlab_sys::signal::interrupt_flag();
    Ok((
        std::thread::spawn(move || serve(listener, limits, stop, log)),
        local,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair on loopback: (the server's end, the client's end).
    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (listener.accept().unwrap().0, client)
    }

    fn answer(mut client: TcpStream) -> Vec<u8> {
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut got = Vec::new();
        let _ = client.read_to_end(&mut got);
        got
    }

    #[test]
    fn connections_a_running_test_does_not_take_are_denied() {
        let limits = ServerLimits::of_agent(&flowlab_control::Limits::default(), 4).params;
        let log: Log = Arc::new(|_| {});
        let (tx, rx) = mpsc::channel();
        let cookie = [b'a'; COOKIE_SIZE];
        let active: Active = Arc::new(Mutex::new(Some((cookie, tx))));
        // Another test's cookie while one runs: busy.
        let (server, client) = pair();
        dispatch(server, [b'b'; COOKIE_SIZE], &active, limits, &log);
        assert_eq!(answer(client), [0xff]);
        // The running test's cookie: a stream, while the test takes streams.
        let (server, client) = pair();
        dispatch(server, cookie, &active, limits, &log);
        assert!(rx.try_recv().is_ok());
        // After it has its streams (the receiver gone): denied too.
        drop(rx);
        let (server, client_late) = pair();
        dispatch(server, cookie, &active, limits, &log);
        assert_eq!(answer(client_late), [0xff]);
        drop(client);
    }
}
