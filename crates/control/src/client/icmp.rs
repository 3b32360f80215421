//! ICMP echo (`flowlab test --proto icmp HOST`): requests to any host, no agent needed, paced
//! as a UDP test is (`size` bytes of data at `rate`, so one a second by default), with the
//! round trips, loss, duplicates and reordering measured by the same meters and written as
//! the same result document (the client's side only). The socket is `flowlab_sys::icmp`'s
//! (a ping socket, or a raw one as root); the bytes are `flowlab_wire::icmp`'s.

mod reply;

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::{split_target, ClientError, TestOptions, TestRun};
use crate::result::{Origin, TestResult};
use flowlab_results::meter::{Arrived, ReceiverMeter, SenderMeter};
use flowlab_results::{IntervalReport, Role, SideReport};
use flowlab_spec::TestSpec;
use flowlab_sys::icmp::{Access, EchoSocket};
use flowlab_sys::{clock, udp};
use flowlab_wire::icmp::{emit_request, Family, Stamp};

use reply::{Framing, Reply};

/// Most replies read in one call.
const BATCH: usize = 64;
/// Longest sleep between checks of Ctrl-C and the schedule.
const POLL: Duration = Duration::from_millis(100);

/// Runs the echo test `options` describe against the host at their target (a port, if the
/// target names one, is ignored), until its count or duration, a drain for the last
/// replies, or Ctrl-C.
pub fn run(
    options: &TestOptions,
    on_interval: &mut dyn FnMut(&IntervalReport),
) -> Result<TestRun, ClientError> {
    let spec = &options.spec;
    let target = resolve_host(&options.target)?;
    let socket = EchoSocket::open(target, options.bind)
        .map_err(|e| ClientError::Setup(format!("cannot open an ICMP socket to {target}: {e}")))?;
    let mut notes = configure(&socket, spec);
    let family = if target.is_ipv6() {
        Family::V6
    } else {
        Family::V4
    };
    let mtu = socket.path_mtu().ok();
    let dont_fragment = spec.socket.dont_fragment;
    notes.extend(mtu.and_then(|m| reply::fragmentation_note(family, spec.size, m, dont_fragment)));
    let started_at_ns = clock::realtime_ns();
    let stop = flowlab_sys::signal::interrupt_flag();
    let mut pinger = Pinger::new(&socket, spec, family, options.drain);
    let error = pinger.run(stop, on_interval).err().map(|e| format!("{e}"));
    notes.extend(pinger.notes());
    let intervals = std::mem::take(&mut pinger.intervals);
    let (side, packets) = pinger.finish(notes, error.clone());
    let origin = Origin {
        target: options.target.clone(),
        agent_address: target.to_string(),
        ipv6: target.is_ipv6(),
        started_at_ns,
    };
    Ok(TestRun {
        result: TestResult {
            intervals,
            interrupted: stop.load(Ordering::Relaxed),
            error,
            ..TestResult::new(spec.clone(), origin, Some(side), None)
        },
        packets,
    })
}

/// The target's address: HOST, an IP address, or either with a port (ignored).
fn resolve_host(target: &str) -> Result<IpAddr, ClientError> {
    let (host, _) = split_target(target)?;
    (host.as_str(), 0)
        .to_socket_addrs()
        .map_err(|e| ClientError::Target(format!("cannot resolve '{host}': {e}")))?
        .next()
        .map(|a| a.ip())
        .ok_or_else(|| ClientError::Target(format!("'{host}' has no address")))
}

/// Applies the spec's socket options; what the kernel refused, as notes.
fn configure(socket: &EchoSocket, spec: &TestSpec) -> Vec<String> {
    let s = &spec.socket;
    let results = [
        (
            "don't-fragment",
            Some(socket.set_dont_fragment(s.dont_fragment)),
        ),
        (
            "DSCP",
            s.dscp
                .map(|d| flowlab_sys::socket::set_tos(socket, d << 2, socket.ipv6)),
        ),
        (
            "priority",
            s.priority
                .map(|p| flowlab_sys::socket::set_priority(socket, p)),
        ),
        (
            "mark",
            s.mark.map(|m| flowlab_sys::socket::set_mark(socket, m)),
        ),
        (
            "socket buffers",
            (s.send_buffer.is_some() || s.recv_buffer.is_some()).then(|| {
                let size = |b: Option<u32>| b.map(|b| b as usize);
                udp::set_buffer_sizes(socket, size(s.send_buffer), size(s.recv_buffer))
            }),
        ),
    ];
    results
        .into_iter()
        .filter_map(|(what, result)| Some((what, result?.err()?)))
        .map(|(what, e)| format!("{what} not set: {e}"))
        .collect()
}

/// One echo test in progress: the schedule, the meters, and what the path and the kernel
/// said.
struct Pinger<'a> {
    socket: &'a EchoSocket,
    spec: &'a TestSpec,
    framing: Framing,
    ident: u16,
    interval_ns: u64,
    start_mono: u64,
    start_real: u64,
    drain_ns: u64,
    /// Requests handed to the kernel or refused by it so far.
    tried: u64,
    sent: SenderMeter,
    received: ReceiverMeter,
    corrupted: u64,
    path_errors: BTreeMap<String, u64>,
    send_errors: BTreeMap<String, u64>,
    report_period: Option<u64>,
    intervals: Vec<IntervalReport>,
}

impl<'a> Pinger<'a> {
    fn new(socket: &'a EchoSocket, spec: &'a TestSpec, family: Family, drain: Duration) -> Self {
        let ident = socket.kernel_ident().unwrap_or_else(rand::random);
        Pinger {
            socket,
            spec,
            framing: Framing {
                family,
                ipv4_header: socket.access == Access::Raw && family == Family::V4,
                ident: (socket.access == Access::Raw).then_some(ident),
            },
            ident,
            interval_ns: spec.packet_interval_ns().unwrap_or(1_000_000_000).max(1),
            start_mono: clock::monotonic_ns(),
            start_real: clock::realtime_ns(),
            drain_ns: drain.as_nanos().min(u128::from(u64::MAX)) as u64,
            tried: 0,
            sent: SenderMeter::new(1, true, spec.packet_log),
            received: ReceiverMeter::new(1, true, spec.packet_log).omitting(spec.omit_ns),
            corrupted: 0,
            path_errors: BTreeMap::new(),
            send_errors: BTreeMap::new(),
            report_period: spec.interval_ns,
            intervals: Vec::new(),
        }
    }

    /// When request `k` is due on the monotonic clock; `None` past the test's end.
    fn due(&self, k: u64) -> Option<u64> {
        let offset = k.checked_mul(self.interval_ns)?;
        let past_count = self.spec.count.is_some_and(|c| k >= c);
        let past_time = self.spec.duration_ns.is_some_and(|d| offset >= d);
        (!past_count && !past_time).then(|| self.start_mono.saturating_add(offset))
    }

    /// Sends on schedule and reads replies until the last request's drain ends, every
    /// request is answered, or `stop`; an error only for a socket that fails to read.
    fn run(
        &mut self,
        stop: &AtomicBool,
        on_interval: &mut dyn FnMut(&IntervalReport),
    ) -> io::Result<()> {
        let mut batch = udp::RecvBatch::new(BATCH, flowlab_spec::MAX_ICMP_DATA as usize + 128);
        let mut request = Vec::new();
        let mut drain_until = None;
        while !stop.load(Ordering::Relaxed) {
            let now = clock::monotonic_ns();
            while let Some(due) = self.due(self.tried).filter(|&d| d <= now) {
                self.send(due, &mut request);
            }
            if self.due(self.tried).is_none() {
                drain_until.get_or_insert(now.saturating_add(self.drain_ns));
            }
            self.receive(&mut batch)?;
            self.close_intervals(now, on_interval);
            let answered = self.received.packets_received() >= self.sent.packets_sent();
            if drain_until.is_some_and(|end| now >= end || answered) {
                break;
            }
            let wake = self.due(self.tried).or(drain_until).unwrap_or(now);
            let wait = Duration::from_nanos(wake.saturating_sub(now)).min(POLL);
            flowlab_sys::poll::wait_readable(&[std::os::fd::AsFd::as_fd(self.socket)], wait)?;
        }
        self.last_interval(on_interval);
        Ok(())
    }

    fn send(&mut self, due_mono: u64, buf: &mut Vec<u8>) {
        let seq = self.tried;
        self.tried += 1;
        let sent_ns = clock::realtime_ns();
        let stamp = Stamp { sent_ns, seq };
        emit_request(
            self.framing.family,
            self.ident,
            stamp,
            self.spec.size as usize,
            buf,
        );
        self.sent.on_batch(1);
        match self.socket.send(buf) {
            Ok(_) => {
                let now = clock::monotonic_ns();
                self.sent
                    .on_sent(0, seq, self.spec.size, sent_ns, Some(due_mono), now);
            }
            Err(e) => {
                self.sent.on_send_error(0, 1);
                *self.send_errors.entry(e.to_string()).or_default() += 1;
            }
        }
    }

    /// Reads every reply waiting.
    fn receive(&mut self, batch: &mut udp::RecvBatch) -> io::Result<()> {
        loop {
            let n = match udp::recv_batch(self.socket, batch) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                // A connected socket's last ICMP error, reported once: the path's word.
                Err(e) if flowlab_sys::icmp::is_path_error(&e) => {
                    *self.path_errors.entry(format!("'{e}'")).or_default() += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            for k in 0..n {
                let meta = batch.meta(k);
                let arrival_ns = meta.kernel_rx_ns.unwrap_or_else(clock::realtime_ns);
                let kernel_stamp = meta.kernel_rx_ns.is_some();
                self.on_message(batch.payload(k), arrival_ns, kernel_stamp);
            }
        }
    }

    fn on_message(&mut self, bytes: &[u8], arrival_ns: u64, kernel_stamp: bool) {
        match reply::read(self.framing, bytes, self.tried) {
            Reply::Echo {
                stamp,
                data_len,
                intact,
            } => {
                self.corrupted += u64::from(!intact);
                let arrived = Arrived {
                    seq: stamp.seq,
                    size: data_len,
                    sent_ns: stamp.sent_ns,
                    echoed_ns: None,
                    arrival_ns,
                    kernel_stamp,
                };
                let scheduled = self.start_real + stamp.seq * self.interval_ns;
                self.received.on_echo(0, arrived, Some(scheduled));
            }
            Reply::Path(e) => *self.path_errors.entry(reply::describe(e)).or_default() += 1,
            Reply::Malformed => self.received.on_malformed(),
            Reply::Ignored => {}
        }
    }

    /// Live intervals closed by `now`.
    fn close_intervals(&mut self, now: u64, on_interval: &mut dyn FnMut(&IntervalReport)) {
        let Some(period) = self.report_period else {
            return;
        };
        loop {
            let index = self.intervals.len() as u64;
            let (start, end) = (index * period, (index + 1) * period);
            if self.start_mono + end > now {
                return;
            }
            let report = self.received.take_interval(index, start, end);
            on_interval(&report);
            self.intervals.push(report);
        }
    }

    /// The interval the test ended in, cut at the end.
    fn last_interval(&mut self, on_interval: &mut dyn FnMut(&IntervalReport)) {
        if let Some(period) = self.report_period {
            let index = self.intervals.len() as u64;
            let end = clock::monotonic_ns().saturating_sub(self.start_mono);
            let report = self.received.take_interval(index, index * period, end);
            on_interval(&report);
            self.intervals.push(report);
        }
    }

    /// What the kernel and the path said, and corrupted replies.
    fn notes(&self) -> Vec<String> {
        let mut notes = reply::path_notes(&self.path_errors);
        for (e, n) in &self.send_errors {
            notes.push(format!("{n} request(s) not sent: {e}"));
        }
        if self.corrupted > 0 {
            let n = self.corrupted;
            notes.push(format!(
                "{n} reply(ies) came back with data unlike the request's"
            ));
        }
        notes
    }

    /// The client's side report and, with a packet log, every request's fate.
    fn finish(
        mut self,
        notes: Vec<String>,
        error: Option<String>,
    ) -> (SideReport, Vec<flowlab_results::PacketRecord>) {
        let sent_log = self.sent.take_log();
        let received_log = self.received.take_log();
        let packets = flowlab_results::packet_log::merge(&sent_log, &received_log);
        let mut receiver = self.received.report(None);
        // A reply carries no stamp of the far end: its delay is a round trip, not one way.
        receiver.relative_delay = None;
        let side = SideReport {
            sender: Some(self.sent.report()),
            receiver: Some(receiver),
            error,
            notes,
            ..SideReport::new(Role::Sender, flowlab_sys::host::hostname())
        };
        (side, packets)
    }
}
