//! The I/O around the sans-IO reflector and session: a UDP socket, the clocks, the pacer.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use flowlab_pacing::Waiter;
use flowlab_results::meter::SenderMeter;
use flowlab_sys::clock::{monotonic_ns, realtime_ns, realtime_sync};
use flowlab_sys::signal::is_interrupted;
use flowlab_sys::udp::{self, RecvBatch};
use flowlab_traffic::{Action, EndCondition, PacedSchedule, Pacer, PacerConfig, PacingMode};
use flowlab_wire::stamp::ErrorEstimate;

use crate::reflector::{Reflector, ReflectorClock, Request};
use crate::report::{StampResult, SCHEMA_VERSION};
use crate::session::{mode_name, ReplyMeter, SessionSender};

/// How often a blocked receive wakes to look at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// The largest datagram read whole.
const MAX_DATAGRAM: usize = 65_536;
/// How often the reflector re-reads its clock's synchronisation state.
const CLOCK_REFRESH_NS: u64 = 1_000_000_000;
/// A packet later than this behind its slot is skipped (counted as a missed slot).
const MAX_LATENESS_NS: u64 = 50_000_000;

/// This host's realtime clock as an error estimate: synchronised with its estimated error, or
/// not, with its maximum error.
pub fn clock_error() -> ErrorEstimate {
    match realtime_sync() {
        Ok(s) if s.synchronized => ErrorEstimate::ntp(true, s.est_error_ns),
        Ok(s) => ErrorEstimate::ntp(false, s.max_error_ns),
        Err(_) => ErrorEstimate::ntp(false, u64::MAX),
    }
}

/// Binds the reflector's socket. `::` is dual-stack; a host without IPv6 falls back to
/// `0.0.0.0`.
pub fn bind_reflector(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = match UdpSocket::bind(addr) {
        Err(e) if addr.ip() == Ipv6Addr::UNSPECIFIED && e.kind() != io::ErrorKind::AddrInUse => {
            UdpSocket::bind((Ipv4Addr::UNSPECIFIED, addr.port()))
        }
        other => other,
    }
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot bind STAMP reflector to {addr}: {e}"),
        )
    })?;
    udp::enable_rx_timestamps(&socket)?;
    // Without it the sender TTL is reported as unknown (0).
    let _ = udp::enable_recv_ttl(&socket);
    socket.set_read_timeout(Some(POLL))?;
    Ok(socket)
}

/// Reflects what arrives on `socket` until `stop` is set or the process is interrupted.
pub fn serve_reflector(
    socket: &UdpSocket,
    reflector: &mut Reflector,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut batch = RecvBatch::new(16, MAX_DATAGRAM);
    let mut out = vec![0u8; MAX_DATAGRAM];
    let mut error = clock_error();
    let mut error_read_ns = monotonic_ns();
    while !stop.load(Ordering::Relaxed) && !is_interrupted() {
        let n = udp::recv_batch(socket, &mut batch)?;
        for i in 0..n {
            let meta = batch.meta(i);
            let Some(source) = meta.source.filter(|_| !meta.truncated) else {
                continue;
            };
            let now = monotonic_ns();
            if now.saturating_sub(error_read_ns) >= CLOCK_REFRESH_NS {
                error = clock_error();
                error_read_ns = now;
            }
            let req = Request {
                bytes: batch.payload(i),
                source: source.ip(),
                received_ns: meta.kernel_rx_ns.unwrap_or_else(realtime_ns),
                ttl: meta.ttl,
            };
            let clock = ReflectorClock {
                monotonic_ns: now,
                transmit_ns: realtime_ns(),
                error,
            };
            if let Ok(len) = reflector.reflect(&req, &clock, &mut out) {
                // A reply that cannot leave is the sender's loss to count.
                let _ = socket.send_to(&out[..len], source);
            }
        }
    }
    Ok(())
}

/// A session to run.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub reflector: SocketAddr,
    pub sender: SessionSender,
    pub rate_bps: u64,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// How long to wait for replies after the last packet.
    pub drain: Duration,
    /// How the sender waits for each slot (as `flowlab test --pacing`).
    pub pacing: PacingMode,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("invalid STAMP session: {0}")]
    Invalid(String),
    #[error("STAMP socket towards {addr}: {source}")]
    Socket { addr: SocketAddr, source: io::Error },
}

/// Sequence numbers are 32 bits: a session sends at most this many packets.
const MAX_PACKETS: u64 = 1 << 32;

/// Runs a session: paced test packets to the reflector, replies read beside them.
pub fn run_session(opts: &SessionOptions) -> Result<StampResult, RunError> {
    let socket = connect(opts.reflector).map_err(|source| RunError::Socket {
        addr: opts.reflector,
        source,
    })?;
    let start_mono = monotonic_ns() + 1_000_000;
    let mut pacer = pacer(opts, start_mono)?;
    let meter = Mutex::new(opts.sender.reply_meter());
    let sent = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let started_unix_ns = realtime_ns();
    let (sender, error) = std::thread::scope(|s| {
        let receiver = s.spawn(|| receive_replies(&socket, &meter, &sent, &done));
        let result = send_packets(&socket, opts, &mut pacer, &sent);
        wait_for_replies(&meter, &sent, opts.drain);
        done.store(true, Ordering::Relaxed);
        let received = receiver.join().unwrap_or(Ok(()));
        (result, received.err())
    });
    let sent = sent.load(Ordering::Relaxed);
    let meter = meter.into_inner().unwrap_or_else(|p| p.into_inner());
    let session = meter.report(sent);
    let refused = error
        .as_ref()
        .is_some_and(|e| e.kind() == io::ErrorKind::ConnectionRefused);
    let error = match (refused, session.replies.unique, error) {
        (true, 0, _) => Some("the reflector's port is closed (ICMP port unreachable)".to_string()),
        (true, _, _) | (_, _, None) => None,
        (_, _, Some(e)) => Some(format!("receiving replies: {e}")),
    };
    Ok(StampResult {
        schema_version: SCHEMA_VERSION,
        kind: "stamp".into(),
        reflector: opts.reflector.to_string(),
        mode: mode_name(opts.sender.mode()).into(),
        ssid: opts.sender.ssid(),
        packet_size: opts.sender.packet_len() as u32,
        rate_bps: opts.rate_bps,
        packets_per_sec: opts.rate_bps as f64 / (opts.sender.packet_len() as f64 * 8.0),
        started_unix_ns,
        sender: sender.report(),
        session,
        interrupted: is_interrupted(),
        error,
    })
}

fn connect(reflector: SocketAddr) -> io::Result<UdpSocket> {
    let local: SocketAddr = if reflector.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local)?;
    socket.connect(reflector)?;
    udp::enable_rx_timestamps(&socket)?;
    socket.set_read_timeout(Some(POLL))?;
    Ok(socket)
}

fn pacer(opts: &SessionOptions, start_ns: u64) -> Result<Pacer, RunError> {
    let invalid = |m: String| RunError::Invalid(m);
    let len =
        u32::try_from(opts.sender.packet_len()).map_err(|_| invalid("packet too large".into()))?;
    let schedule =
        PacedSchedule::new(start_ns, opts.rate_bps, len).map_err(|e| invalid(e.to_string()))?;
    if opts.count.is_some_and(|c| c > MAX_PACKETS) {
        return Err(invalid(format!(
            "at most {MAX_PACKETS} packets (32-bit sequence numbers)"
        )));
    }
    let until_ns = opts
        .duration
        .map(|d| start_ns.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)));
    Ok(Pacer::new(PacerConfig {
        schedule: Some(schedule),
        end: EndCondition {
            until_ns,
            count: Some(opts.count.unwrap_or(MAX_PACKETS).min(MAX_PACKETS)),
        },
        train_window_ns: 0,
        max_batch: 1,
        max_lateness_ns: MAX_LATENESS_NS,
    }))
}

/// Sends each packet on its slot, stamped as it leaves; `sent` counts those handed over.
fn send_packets(
    socket: &UdpSocket,
    opts: &SessionOptions,
    pacer: &mut Pacer,
    sent: &AtomicU64,
) -> SenderMeter {
    let mut meter = SenderMeter::new(1, true, false);
    let mut buf = vec![0u8; opts.sender.packet_len()];
    let mut error = clock_error();
    let mut error_read_ns = monotonic_ns();
    // The slots' spacing, as the schedule has it.
    let spacing_ns = pacer
        .deadline(1)
        .zip(pacer.deadline(0))
        .map_or(0, |(b, a)| b - a);
    let mut waiter = Waiter::for_schedule(opts.pacing, spacing_ns);
    while !is_interrupted() {
        match pacer.poll(monotonic_ns()) {
            Action::Done => break,
            Action::Wait { until_ns } => meter.on_pacing_spin(waiter.wait(until_ns).spun_ns),
            Action::Send { first, count } => {
                let now = monotonic_ns();
                if now.saturating_sub(error_read_ns) >= CLOCK_REFRESH_NS {
                    error = clock_error();
                    error_read_ns = now;
                }
                let sent_ns = realtime_ns();
                // The pacer's count never exceeds 2^32 slots: the number fits.
                let len = opts
                    .sender
                    .write_packet(first as u32, sent_ns, error, &mut buf);
                // Counted before it leaves, so its reply can never look foreign; lost or not,
                // the number is used.
                sent.store(first + count, Ordering::Relaxed);
                let mono = monotonic_ns();
                meter.on_batch(1);
                match socket.send(&buf[..len]) {
                    Ok(_) => {
                        meter.on_sent(0, first, len as u32, sent_ns, pacer.deadline(first), mono)
                    }
                    Err(e) if udp::is_send_buffer_full(&e) => meter.on_send_buffer_full(0, 1),
                    Err(_) => meter.on_send_error(0, 1),
                }
                pacer.advance(count);
            }
        }
    }
    meter.set_missed_slots(0, pacer.missed_slots());
    if let Some(pacing) = waiter.report() {
        meter.set_pacing(pacing);
    }
    meter
}

/// Waits `drain` for the last replies, or less once every packet has one.
fn wait_for_replies(meter: &Mutex<ReplyMeter>, sent: &AtomicU64, drain: Duration) {
    let deadline =
        monotonic_ns().saturating_add(u64::try_from(drain.as_nanos()).unwrap_or(u64::MAX));
    while monotonic_ns() < deadline && !is_interrupted() {
        let all_in = meter
            .lock()
            .map(|m| m.replied() >= sent.load(Ordering::Relaxed))
            .unwrap_or(true);
        if all_in {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn receive_replies(
    socket: &UdpSocket,
    meter: &Mutex<ReplyMeter>,
    sent: &AtomicU64,
    done: &AtomicBool,
) -> io::Result<()> {
    let mut batch = RecvBatch::new(16, MAX_DATAGRAM);
    let mut refused = None;
    while !done.load(Ordering::Relaxed) && !is_interrupted() {
        let n = match udp::recv_batch(socket, &mut batch) {
            Ok(n) => n,
            // An ICMP unreachable for an earlier packet: said at the end if nothing came back.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                refused = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let Ok(mut m) = meter.lock() else {
            break;
        };
        for i in 0..n {
            let arrival = batch.meta(i).kernel_rx_ns.unwrap_or_else(realtime_ns);
            let _ = m.on_reply(batch.payload(i), arrival, sent.load(Ordering::Relaxed));
        }
    }
    refused.map_or(Ok(()), Err)
}
