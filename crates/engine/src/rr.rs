//! Request/response roles (netperf's RR and CRR). The client sends a request whose header
//! names the response size, the agent answers with a response of that size, and the client
//! times each transaction from the request's first byte written to the response's last byte
//! read, then waits the think time. TCP RR keeps one connection per flow; TCP CRR opens one
//! per transaction (connect, request, response, close) and counts the connect in the
//! transaction, timing it apart too; UDP RR sends one request datagram and waits at most
//! [`UDP_RESPONSE_TIMEOUT`] for the response datagram.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;
use std::time::Duration;

use flowlab_results::meter::TransactionMeter;
use flowlab_results::{IntervalReport, ResponderReport, TransactionReport};
use flowlab_spec::TestSpec;
use flowlab_sys::clock;
use flowlab_traffic::{derive_seed, Transaction, Transactions};
use flowlab_wire::message::{FRAMED_HEAD_LEN, REQUEST_HEAD_LEN};
use flowlab_wire::{MessageHead, ProbeRepr, StreamSplitter, PROBE_HEADER_LEN};

use crate::tcp::{is_timeout, write_whole};
use crate::{
    configure_tcp, fill_payload, merge_flows, on_flow_threads, stopped, wait_until,
    with_thread_cpu, IntervalClock, IntervalSink, RunContext, SendBudget, MAX_TCP_MESSAGE,
    POLL_PERIOD,
};

/// A UDP transaction whose response has not come within this time is counted lost.
pub const UDP_RESPONSE_TIMEOUT: Duration = Duration::from_secs(1);
/// Largest UDP request or response (the IPv4 payload limit).
const MAX_UDP_MESSAGE: u32 = 65_507;
/// How long a CRR connect may take before the transaction fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read from a stream at once.
const READ_CHUNK: usize = 256 * 1024;

/// What a requesting client returns.
#[derive(Debug, Clone)]
pub struct TransactionOutcome {
    pub report: TransactionReport,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
    /// (user, system) CPU ns of the threads it started for flows beyond the first.
    pub worker_cpu_ns: (u64, u64),
}

/// What an answering agent returns.
#[derive(Debug, Clone)]
pub struct ResponderOutcome {
    pub report: ResponderReport,
    pub error: Option<String>,
    pub worker_cpu_ns: (u64, u64),
}

/// A message buffer of at least `len` bytes with the payload pattern, for the head to go on.
fn message_of(buf: &mut Vec<u8>, len: usize) -> &mut [u8] {
    if buf.len() < len {
        buf.resize(len, 0);
        fill_payload(buf);
    }
    &mut buf[..len]
}

/// One client stream: its transactions, their end, its meter and request buffer.
struct Requester<'a> {
    spec: &'a TestSpec,
    session: u32,
    model: Transactions,
    meter: TransactionMeter,
    /// This flow's transactions of the current live interval, when intervals are reported.
    interval: Option<&'a Mutex<TransactionMeter>>,
    request: Vec<u8>,
    seq: u64,
    end_mono_ns: Option<u64>,
    max_size: u32,
}

impl<'a> Requester<'a> {
    fn new(
        spec: &'a TestSpec,
        session: u32,
        index: usize,
        max_size: u32,
        interval: Option<&'a Mutex<TransactionMeter>>,
    ) -> Result<Self, String> {
        let config = spec
            .transactions()
            .ok_or("the test carries no request/response workload")?;
        let model = Transactions::new(config, derive_seed(spec.seed, index as u64))
            .map_err(|e| format!("request/response model: {e}"))?;
        Ok(Requester {
            spec,
            session,
            model,
            meter: TransactionMeter::new(config.connect_each),
            interval,
            request: Vec::new(),
            seq: 0,
            end_mono_ns: spec
                .duration_ns
                .map(|d| clock::monotonic_ns().saturating_add(d)),
            max_size,
        })
    }

    /// A transaction started at `started` (monotonic) got its `response_len`-byte answer now.
    fn completed(&mut self, started: u64, response_len: u32) {
        let ended = clock::monotonic_ns();
        self.meter.on_transaction(started, ended, response_len);
        if let Some(interval) = self.interval {
            interval
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .on_transaction(started, ended, response_len);
        }
    }

    fn over(&self, stop: &AtomicBool) -> bool {
        stopped(stop)
            || self.spec.count.is_some_and(|n| self.seq >= n)
            || self
                .end_mono_ns
                .is_some_and(|end| clock::monotonic_ns() >= end)
    }

    /// The next transaction, with its request written into the buffer: (transaction, request
    /// length, response length), both lengths at least their heads. `None` once the flow's
    /// duration or count is over.
    fn next(&mut self, stop: &AtomicBool) -> Option<(Transaction, usize, u32)> {
        if self.over(stop) {
            return None;
        }
        let t = self.model.next_transaction(self.max_size);
        let request_len = t.request_size.max(REQUEST_HEAD_LEN as u32);
        let response_len = t.response_size.max(FRAMED_HEAD_LEN as u32);
        let probe = ProbeRepr {
            flags: 0,
            session: self.session,
            seq: self.seq,
            sent_ns: clock::realtime_ns(),
            echoed_ns: 0,
        };
        let message = message_of(&mut self.request, request_len as usize);
        MessageHead::request(probe, request_len, response_len).emit(message);
        self.meter.on_request(request_len);
        Some((t, request_len as usize, response_len))
    }

    /// Done with the current transaction: waits its think time (unless the flow ends first).
    fn think(&mut self, t: &Transaction, stop: &AtomicBool) {
        self.seq += 1;
        let until = clock::monotonic_ns().saturating_add(t.think_ns);
        let until = self.end_mono_ns.map_or(until, |end| until.min(end));
        while !stopped(stop) && clock::monotonic_ns() < until {
            wait_until(until);
        }
    }
}

/// Sends a request on `stream` and reads until the response to `seq` is whole. `Ok(false)`:
/// stopped first.
fn exchange(
    mut stream: &TcpStream,
    request: &[u8],
    seq: u64,
    buf: &mut [u8],
    stop: &AtomicBool,
) -> Result<bool, String> {
    if !write_whole(&mut stream, request, stop).map_err(|e| format!("request failed: {e}"))? {
        return Ok(false);
    }
    let mut splitter = StreamSplitter::new(PROBE_HEADER_LEN as u32, MAX_TCP_MESSAGE);
    let mut answered = false;
    let mut stray = None;
    while !answered {
        let n = match stream.read(buf) {
            Ok(0) => return Err("the agent closed the connection".into()),
            Ok(n) => n,
            Err(e) if is_timeout(&e) => {
                if stopped(stop) {
                    return Ok(false);
                }
                continue;
            }
            Err(e) => return Err(format!("response failed: {e}")),
        };
        splitter
            .push(&buf[..n], |head| {
                if head.is_response() && head.probe.seq == seq {
                    answered = true;
                } else {
                    stray = Some(head.probe.seq);
                }
            })
            .map_err(|e| format!("malformed response: {e}"))?;
        if let Some(other) = stray {
            return Err(format!("a response to {other} came for request {seq}"));
        }
    }
    Ok(true)
}

fn prepare_stream(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(POLL_PERIOD));
    let _ = stream.set_write_timeout(Some(POLL_PERIOD));
}

/// TCP RR: each flow's transactions over its own connection, a thread per flow.
pub fn tcp_request(
    streams: &[TcpStream],
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> TransactionOutcome {
    run_requesters(
        streams.len(),
        (spec, ctx.session),
        MAX_TCP_MESSAGE,
        on_interval,
        |i, r| request_on(&streams[i], r, stop),
    )
}

fn request_on(stream: &TcpStream, r: &mut Requester<'_>, stop: &AtomicBool) -> Option<String> {
    prepare_stream(stream);
    let mut buf = vec![0u8; READ_CHUNK];
    while let Some((t, request_len, response_len)) = r.next(stop) {
        let started = clock::monotonic_ns();
        match exchange(stream, &r.request[..request_len], r.seq, &mut buf, stop) {
            Ok(true) => r.completed(started, response_len),
            Ok(false) => r.meter.on_timeout(),
            Err(e) => {
                r.meter.on_error();
                return Some(e);
            }
        }
        r.think(&t, stop);
    }
    None
}

/// TCP CRR: each transaction on a new connection to `agent` (connect, request, response,
/// close), a thread per flow. The agent closes first, so the client's ports do not linger in
/// TIME_WAIT.
pub fn tcp_connect_request(
    agent: SocketAddr,
    flows: usize,
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> TransactionOutcome {
    run_requesters(
        flows,
        (spec, ctx.session),
        MAX_TCP_MESSAGE,
        on_interval,
        |_, r| connect_request(agent, r, stop),
    )
}

fn connect_request(agent: SocketAddr, r: &mut Requester<'_>, stop: &AtomicBool) -> Option<String> {
    let mut buf = vec![0u8; READ_CHUNK];
    while let Some((t, request_len, response_len)) = r.next(stop) {
        let started = clock::monotonic_ns();
        let stream = match TcpStream::connect_timeout(&agent, CONNECT_TIMEOUT) {
            Ok(s) => s,
            Err(e) => {
                r.meter.on_error();
                return Some(format!("cannot connect to {agent}: {e}"));
            }
        };
        r.meter.on_connect(clock::monotonic_ns() - started);
        // Notes were given when the first connection's options were checked at setup.
        let _ = configure_tcp(std::slice::from_ref(&stream), r.spec, true);
        prepare_stream(&stream);
        match exchange(&stream, &r.request[..request_len], r.seq, &mut buf, stop) {
            Ok(true) => {
                r.completed(started, response_len);
                // The agent's close (end of stream) completes the transaction's cycle.
                let _ = (&stream).read(&mut buf);
            }
            Ok(false) => r.meter.on_timeout(),
            Err(e) => {
                r.meter.on_error();
                return Some(e);
            }
        }
        drop(stream);
        r.think(&t, stop);
    }
    None
}

/// UDP RR: one request datagram, one response datagram, a socket and a thread per flow.
pub fn udp_request(
    socks: &[UdpSocket],
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
    on_interval: IntervalSink<'_>,
) -> TransactionOutcome {
    run_requesters(
        socks.len(),
        (spec, ctx.session),
        MAX_UDP_MESSAGE,
        on_interval,
        |i, r| udp_request_on(&socks[i], r, stop),
    )
}

fn udp_request_on(sock: &UdpSocket, r: &mut Requester<'_>, stop: &AtomicBool) -> Option<String> {
    let _ = sock.set_nonblocking(false);
    let _ = sock.set_read_timeout(Some(POLL_PERIOD));
    let mut buf = vec![0u8; MAX_UDP_MESSAGE as usize + 1];
    let timeout_ns = UDP_RESPONSE_TIMEOUT.as_nanos() as u64;
    while let Some((t, request_len, _)) = r.next(stop) {
        let started = clock::monotonic_ns();
        match sock.send(&r.request[..request_len]) {
            Ok(_) => {}
            // An ICMP notice for an earlier datagram: the agent's socket is gone for now, so
            // this transaction failed without waiting for its response.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                r.meter.on_error();
                r.think(&t, stop);
                continue;
            }
            Err(e) => {
                r.meter.on_error();
                return Some(format!("request failed: {e}"));
            }
        }
        loop {
            let now = clock::monotonic_ns();
            if now.saturating_sub(started) >= timeout_ns || stopped(stop) {
                r.meter.on_timeout();
                break;
            }
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {
                    continue
                }
                Err(e) => {
                    r.meter.on_error();
                    return Some(format!("response failed: {e}"));
                }
            };
            // Late responses to earlier requests and stray datagrams are passed over.
            match MessageHead::parse(&buf[..n]) {
                Ok(h)
                    if h.is_response() && h.probe.seq == r.seq && h.probe.session == r.session =>
                {
                    r.completed(started, n as u32);
                    break;
                }
                _ => {}
            }
        }
        r.think(&t, stop);
    }
    None
}

/// Runs `work(i, requester)` for each flow `i` on a thread of its own (see
/// `on_flow_threads`); `work` returns why its flow stopped early, if it did.
fn run_requesters(
    flows: usize,
    (spec, session): (&TestSpec, u32),
    max_size: u32,
    on_interval: IntervalSink<'_>,
    work: impl Fn(usize, &mut Requester<'_>) -> Option<String> + Sync,
) -> TransactionOutcome {
    let tallies: Vec<Mutex<TransactionMeter>> = match spec.interval_ns {
        Some(_) => (0..flows).map(|_| Mutex::default()).collect(),
        None => Vec::new(),
    };
    let run = || {
        on_flow_threads(flows, |i| {
            match Requester::new(spec, session, i, max_size, tallies.get(i)) {
                Ok(mut r) => {
                    let error = work(i, &mut r);
                    (r.meter, error)
                }
                Err(e) => (TransactionMeter::default(), Some(e)),
            }
        })
    };
    let (results, worker_cpu_ns) = if tallies.is_empty() {
        run()
    } else {
        // The flows run on other threads; this one reports the live intervals.
        let mut intervals = IntervalClock::new(spec.interval_ns, clock::monotonic_ns());
        std::thread::scope(|scope| {
            // Flow 0 runs on the runner thread: its CPU counts with the other flows'.
            let runner = scope.spawn(|| {
                let ((results, (user, system)), own) = with_thread_cpu(run);
                (results, (user + own.0, system + own.1))
            });
            while !runner.is_finished() {
                std::thread::sleep(INTERVAL_CHECK);
                while let Some((index, start, end)) = intervals.closed(clock::monotonic_ns()) {
                    on_interval(interval_report(&tallies, index, start, end));
                }
            }
            if let Some((index, start, end)) = intervals.last(clock::monotonic_ns()) {
                on_interval(interval_report(&tallies, index, start, end));
            }
            runner
                .join()
                .unwrap_or_else(|_| ((0..flows.max(1)).map(|_| None).collect(), (0, 0)))
        })
    };
    let (meter, error) = merge_flows(results, TransactionMeter::absorb);
    TransactionOutcome {
        report: meter.unwrap_or_default().report(),
        error: error.or_else(|| (flows == 0).then(|| "no flow to run".to_string())),
        worker_cpu_ns,
    }
}

/// How often the interval reporter looks at the clock while the flows run.
const INTERVAL_CHECK: Duration = Duration::from_millis(10);

/// A live interval of a request/response test: `packets` are the transactions completed in
/// it, `bytes` their responses, `delay` their latency.
fn interval_report(
    tallies: &[Mutex<TransactionMeter>],
    index: u64,
    start_ns: u64,
    end_ns: u64,
) -> IntervalReport {
    let mut total = TransactionMeter::default();
    for tally in tallies {
        total.absorb(std::mem::take(
            &mut *tally.lock().unwrap_or_else(|p| p.into_inner()),
        ));
    }
    let total = total.report();
    let seconds = (end_ns.saturating_sub(start_ns) as f64 / 1e9).max(1e-9);
    IntervalReport {
        index,
        start_ns,
        end_ns,
        packets: total.transactions,
        bytes: total.response_bytes,
        lost: 0,
        reordered: 0,
        throughput_bps: total.response_bytes as f64 * 8.0 / seconds,
        packets_per_sec: total.transactions as f64 / seconds,
        delay: total.latency,
        jitter_ns: 0.0,
        tcp_info: None,
        schedule_error: None,
    }
}

fn add_responses(total: &mut ResponderReport, r: ResponderReport) {
    total.requests += r.requests;
    total.request_bytes += r.request_bytes;
    total.responses += r.responses;
    total.response_bytes += r.response_bytes;
    total.connections += r.connections;
    total.malformed += r.malformed;
}

/// Runs `work(i, budget)` for every flow; the budget holds all responses to the agent's limit.
fn run_responders(
    flows: usize,
    ctx: &RunContext,
    work: impl Fn(usize, &SendBudget) -> (ResponderReport, Option<String>) + Sync,
) -> ResponderOutcome {
    let budget = SendBudget::of(ctx);
    let (results, worker_cpu_ns) = on_flow_threads(flows, |i| work(i, &budget));
    let (report, error) = merge_flows(results, add_responses);
    ResponderOutcome {
        report: report.unwrap_or_default(),
        error,
        worker_cpu_ns,
    }
}

/// The response to a well-formed request of this session asking for at most `max` bytes;
/// `None` for anything else (counted malformed, not answered).
fn response_length(head: &MessageHead, session: u32, max: u32) -> Option<u32> {
    let size = head.response_size?;
    (head.probe.session == session && (1..=max).contains(&size))
        .then(|| size.max(FRAMED_HEAD_LEN as u32))
}

/// Answers the requests on one connection until the client closes it (or, with `once`, after
/// the first response: a CRR connection).
fn answer(
    mut stream: &TcpStream,
    session: u32,
    budget: &SendBudget,
    once: bool,
    stop: &AtomicBool,
    report: &mut ResponderReport,
) -> Result<(), String> {
    prepare_stream(stream);
    let mut splitter = StreamSplitter::new(PROBE_HEADER_LEN as u32, MAX_TCP_MESSAGE);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut response = Vec::new();
    let mut requests = Vec::new();
    while !stopped(stop) {
        let n = match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if is_timeout(&e) => continue,
            // The client may reset its connections when the test ends.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(format!("reading requests failed: {e}")),
        };
        let received_ns = clock::realtime_ns();
        report.request_bytes += n as u64;
        if splitter.push(&buf[..n], |h| requests.push(h)).is_err() {
            // No later boundary can be trusted: the connection is dropped.
            report.malformed += 1;
            return Ok(());
        }
        for head in requests.drain(..) {
            let Some(len) = response_length(&head, session, MAX_TCP_MESSAGE) else {
                report.malformed += 1;
                continue;
            };
            report.requests += 1;
            budget.hold(len);
            let message = message_of(&mut response, len as usize);
            MessageHead::response_to(&head.probe, len, received_ns).emit(message);
            match write_whole(&mut stream, message, stop) {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => return Err(format!("response failed: {e}")),
            }
            report.responses += 1;
            report.response_bytes += u64::from(len);
            if once {
                return Ok(());
            }
        }
    }
    Ok(())
}

/// The agent of a TCP RR test: answers each connection's requests, a thread per connection.
pub fn tcp_respond(streams: &[TcpStream], ctx: &RunContext, stop: &AtomicBool) -> ResponderOutcome {
    run_responders(streams.len(), ctx, |i, budget| {
        let mut report = ResponderReport {
            connections: 1,
            ..ResponderReport::default()
        };
        let error = answer(&streams[i], ctx.session, budget, false, stop, &mut report).err();
        (report, error)
    })
}

/// The agent of a TCP CRR test: `flows` threads accept connections from `peer_ip` only (any
/// other is closed unanswered) and answer one request on each, then close it.
pub fn tcp_accept_respond(
    listener: &TcpListener,
    peer_ip: IpAddr,
    flows: usize,
    spec: &TestSpec,
    ctx: &RunContext,
    stop: &AtomicBool,
) -> ResponderOutcome {
    if let Err(e) = listener.set_nonblocking(true) {
        return ResponderOutcome {
            report: ResponderReport::default(),
            error: Some(format!("cannot watch the data listener: {e}")),
            worker_cpu_ns: (0, 0),
        };
    }
    run_responders(flows, ctx, |_, budget| {
        let mut report = ResponderReport::default();
        while !stopped(stop) {
            match flowlab_sys::poll::wait_readable(&[listener.as_fd()], POLL_PERIOD) {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => return (report, Some(format!("cannot watch the data listener: {e}"))),
            }
            match listener.accept() {
                Ok((stream, from)) if from.ip() == peer_ip => {
                    report.connections += 1;
                    let _ = stream.set_nonblocking(false);
                    let _ = configure_tcp(std::slice::from_ref(&stream), spec, true);
                    // One connection failing (a reset) is the client's business, not the test's.
                    let _ = answer(&stream, ctx.session, budget, true, stop, &mut report);
                }
                Ok(_) => {}
                // Another thread took it.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return (report, Some(format!("accepting connections failed: {e}"))),
            }
        }
        (report, None)
    })
}

/// The agent of a UDP RR test: answers each request datagram with one response datagram, a
/// thread per flow's socket.
pub fn udp_respond(socks: &[UdpSocket], ctx: &RunContext, stop: &AtomicBool) -> ResponderOutcome {
    run_responders(socks.len(), ctx, |i, budget| {
        let sock = &socks[i];
        let mut report = ResponderReport::default();
        let _ = sock.set_nonblocking(false);
        let _ = sock.set_read_timeout(Some(POLL_PERIOD));
        let mut buf = vec![0u8; MAX_UDP_MESSAGE as usize + 1];
        let mut response = Vec::new();
        while !stopped(stop) {
            let n = match sock.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {
                    continue
                }
                Err(e) => return (report, Some(format!("reading requests failed: {e}"))),
            };
            let received_ns = clock::realtime_ns();
            report.request_bytes += n as u64;
            let len = MessageHead::parse(&buf[..n])
                .ok()
                .filter(|h| h.length == Some(n as u32))
                .and_then(|h| Some((h, response_length(&h, ctx.session, MAX_UDP_MESSAGE)?)));
            let Some((head, len)) = len else {
                report.malformed += 1;
                continue;
            };
            report.requests += 1;
            budget.hold(len);
            let message = message_of(&mut response, len as usize);
            MessageHead::response_to(&head.probe, len, received_ns).emit(message);
            match sock.send(message) {
                Ok(_) => {
                    report.responses += 1;
                    report.response_bytes += u64::from(len);
                }
                // The client's socket is gone (ICMP): the control connection decides the end.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return (report, Some(format!("response failed: {e}"))),
            }
        }
        (report, None)
    })
}
