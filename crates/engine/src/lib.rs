//! The real-time data plane: threads that send, receive and echo test packets on real sockets.
//!
//! Each role is a loop that drives the sans-IO pieces (the sender core of `flowlab-traffic`,
//! the probe header, the meters) with the real clocks and sockets of `flowlab-sys`. A role
//! runs until its flow ends or its stop flag is raised, then returns what it measured; it
//! never panics on input.

mod budget;
pub mod packet_auth;
mod qdisc_watch;
mod readiness;
mod rr;
mod setup;
mod tcp;
mod udp;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use flowlab_results::schedule_watch::ScheduleWatch;
use flowlab_results::{EchoReport, IntervalReport, PacketRecord, ReceiverReport, SenderReport};
use flowlab_sys::clock;
use flowlab_traffic::sender::Batching;

pub use budget::SendBudget;
pub use qdisc_watch::QdiscWatch;
pub use readiness::{DataSocket, DatagramSocket};
pub use rr::{
    tcp_accept_respond, tcp_connect_request, tcp_request, tcp_respond, udp_request, udp_respond,
    ResponderOutcome, TransactionOutcome, UDP_RESPONSE_TIMEOUT,
};
pub use setup::{configure_tcp, configure_udp};
pub use tcp::{tcp_echo, tcp_info_report, tcp_info_report_when_acked, tcp_receive, tcp_send};
pub use udp::{
    shares_socket, udp_echo, udp_ping, udp_receive, udp_send, FramePath, SharedFlow,
    SHARED_SOCKET_FROM_FLOWS,
};

/// How long a blocking socket call may wait before the loop checks its stop flag again.
pub const POLL_PERIOD: Duration = flowlab_pacing::MAX_WAIT;
/// Packets due within this window leave as one train (the pacing resolution).
pub const TRAIN_WINDOW_NS: u64 = 4_000;
/// Spin margin of waits outside a paced sender's schedule (a rate cap's tokens, a think
/// time), which follow no pacing plan.
const UNPLANNED_SPIN_NS: u64 = 20_000;
/// Largest train handed to the kernel in one call.
pub const MAX_BATCH: u64 = 64;
/// A packet this late behind its slot is skipped and counted as a missed slot.
pub const MAX_LATENESS_NS: u64 = 10_000_000;
/// Largest TCP message, and largest request or response of a transaction.
pub const MAX_TCP_MESSAGE: u32 = flowlab_traffic::rr::MAX_MESSAGE_SIZE;
/// A reverse sender stops once a flow's client has not acknowledged for this long.
pub const ACK_TIMEOUT_NS: u64 = 1_000_000_000;
/// How often a reverse sender reads its flows' acknowledgements (and a client sends them).
pub const ACK_PERIOD: Duration = Duration::from_millis(200);
/// SO_BUSY_POLL budget, microseconds, for `--busy-poll`.
pub const BUSY_POLL_US: u32 = 50;

/// What only the running end knows of a test, beside its [`flowlab_spec::TestSpec`].
#[derive(Debug, Clone, Default)]
pub struct RunContext {
    /// The session every probe header carries.
    pub session: u32,
    /// The most bit/s this end may send over all flows (an agent's `--max-rate`), enforced
    /// while sending whatever the schedule or model asks for; `None`: no limit.
    pub send_cap_bps: Option<u64>,
    /// A reverse UDP sender's return-routability cookie: it sends a flow's packets only while
    /// that flow's socket hears the cookie from the client (`flowlab_wire::ack`).
    pub return_cookie: Option<u64>,
    /// Authenticated test packets: the session's test-packet key. Senders tag every probe,
    /// receivers and the echo drop any without a right tag.
    pub packet_key: Option<[u8; 32]>,
    /// Where paced senders hand their schedule error as they go, for live intervals.
    pub schedule_watch: Option<Arc<ScheduleWatch>>,
}

impl RunContext {
    /// The tagger of authenticated test packets, when the test has them.
    pub fn packet_auth(&self) -> Option<packet_auth::PacketAuth> {
        self.packet_key.as_ref().map(packet_auth::PacketAuth::new)
    }
}

/// How the real-time senders batch: trains of packets due within [`TRAIN_WINDOW_NS`], at
/// most `max_batch` each, skipping slots [`MAX_LATENESS_NS`] late.
fn batching(max_batch: u64) -> Batching {
    Batching {
        train_window_ns: TRAIN_WINDOW_NS,
        max_batch,
        max_lateness_ns: MAX_LATENESS_NS,
    }
}

/// What a sender returns.
#[derive(Debug, Clone)]
pub struct SenderOutcome {
    pub report: SenderReport,
    pub log: Vec<PacketRecord>,
    /// Why it stopped early, if it did.
    pub error: Option<String>,
    /// (user, system) CPU ns of worker threads the sender started besides the calling one
    /// (one per extra TCP connection), for the role's CPU figures.
    pub worker_cpu_ns: (u64, u64),
}

/// What a receiver returns.
#[derive(Debug, Clone)]
pub struct ReceiverOutcome {
    pub report: ReceiverReport,
    pub log: Vec<PacketRecord>,
    pub error: Option<String>,
    /// What a receiver echoed of its load (`--echo-every`).
    pub echo: Option<EchoReport>,
}

/// Where live interval reports go.
pub type IntervalSink<'a> = &'a mut dyn FnMut(IntervalReport);

/// Runs `work(i)` for every flow `i` of `0..flows`: flow 0 on this thread, each other on a
/// thread of its own, so a blocked socket call holds up no other flow. Returns each flow's
/// result in order (`None` where its thread failed) and the (user, system) CPU ns of the
/// extra threads.
fn on_flow_threads<T: Send>(
    flows: usize,
    work: impl Fn(usize) -> T + Sync,
) -> (Vec<Option<T>>, (u64, u64)) {
    let work = &work;
    std::thread::scope(|scope| {
        let workers: Vec<_> = (1..flows)
            .map(|i| scope.spawn(move || with_thread_cpu(|| work(i))))
            .collect();
        let mut results: Vec<Option<T>> = Vec::with_capacity(flows);
        if flows > 0 {
            results.push(Some(work(0)));
        }
        let mut cpu = (0, 0);
        for worker in workers {
            match worker.join() {
                Ok((out, (user, system))) => {
                    results.push(Some(out));
                    cpu = (cpu.0 + user, cpu.1 + system);
                }
                Err(_) => results.push(None),
            }
        }
        (results, cpu)
    })
}

/// Runs `f`, returning its result and the (user, system) CPU ns this thread spent on it.
fn with_thread_cpu<T>(f: impl FnOnce() -> T) -> (T, (u64, u64)) {
    let before = flowlab_sys::cpu::thread_usage().unwrap_or((0, 0));
    let out = f();
    let after = flowlab_sys::cpu::thread_usage().unwrap_or(before);
    (
        out,
        (
            after.0.saturating_sub(before.0),
            after.1.saturating_sub(before.1),
        ),
    )
}

/// Merges the per-flow results of [`on_flow_threads`] with `absorb`, keeping the first error;
/// a flow whose thread failed is an error too. `None` when no flow ran.
fn merge_flows<T>(
    flows: Vec<Option<(T, Option<String>)>>,
    mut absorb: impl FnMut(&mut T, T),
) -> (Option<T>, Option<String>) {
    let mut merged: Option<T> = None;
    let mut error = None;
    for outcome in flows {
        let Some((value, e)) = outcome else {
            error = error.or(Some("a test thread failed".to_string()));
            continue;
        };
        error = error.or(e);
        match &mut merged {
            Some(all) => absorb(all, value),
            None => merged = Some(value),
        }
    }
    (merged, error)
}

fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed) || flowlab_sys::signal::is_interrupted()
}

/// Waits for `until_ns` on the monotonic clock with a short spin, at most [`POLL_PERIOD`] so
/// a stop is noticed: for waits that are not a paced sender's (see `flowlab_pacing::Waiter`).
fn wait_until(until_ns: u64) {
    let target = until_ns.min(clock::monotonic_ns() + POLL_PERIOD.as_nanos() as u64);
    clock::pace_until(target, UNPLANNED_SPIN_NS);
}

/// Interval bookkeeping for receivers: when the next interval closes.
struct IntervalClock {
    period_ns: Option<u64>,
    start_mono_ns: u64,
    index: u64,
}

impl IntervalClock {
    fn new(period_ns: Option<u64>, start_mono_ns: u64) -> Self {
        IntervalClock {
            period_ns: period_ns.map(|p| p.max(1)),
            start_mono_ns,
            index: 0,
        }
    }

    /// Bounds `(index, start, end)` of every interval that closed by `now` (relative to start).
    fn closed(&mut self, now_mono_ns: u64) -> Option<(u64, u64, u64)> {
        let period = self.period_ns?;
        let start = self.index * period;
        let end = start + period;
        if now_mono_ns.saturating_sub(self.start_mono_ns) < end {
            return None;
        }
        let index = self.index;
        self.index += 1;
        Some((index, start, end))
    }

    /// The last, partial interval, if the period is set and anything of it elapsed.
    fn last(&mut self, now_mono_ns: u64) -> Option<(u64, u64, u64)> {
        let period = self.period_ns?;
        let start = self.index * period;
        let end = now_mono_ns.saturating_sub(self.start_mono_ns);
        (end > start).then(|| {
            self.index += 1;
            (self.index - 1, start, end)
        })
    }
}

/// A test payload: bytes after the probe header follow a fixed pattern, so captures are
/// recognisable and compression along the path cannot flatter the result.
fn fill_payload(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
}
