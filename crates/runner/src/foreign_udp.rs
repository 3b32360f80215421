//! One UDP flow sent in another tool's datagrams (iperf3's, iperf2's): the engine's sender
//! core decides when each datagram goes, the tool's header starts it.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use flowlab_pacing::Waiter;
use flowlab_results::meter::SenderMeter;
use flowlab_spec::TestSpec;
use flowlab_sys::clock;
use flowlab_traffic::sender::{Batching, Packet, Poll};

/// How long a blocked read or write waits before it looks at the stop flag.
pub(crate) const POLL: Duration = Duration::from_millis(50);
/// The engine's train batching for paced UDP.
const BATCHING: Batching = Batching {
    train_window_ns: flowlab_engine::TRAIN_WINDOW_NS,
    max_batch: flowlab_engine::MAX_BATCH,
    max_lateness_ns: flowlab_engine::MAX_LATENESS_NS,
};

/// Writes another tool's header at the start of a datagram, given its packet's sequence
/// number (from 0), stamped as the tool stamps it.
pub(crate) type WriteHeader<'a> = dyn Fn(&mut [u8], u64) + Sync + 'a;

/// Sends one UDP flow: the engine's sender core decides when, `header` starts each
/// datagram (the rest is zero).
pub(crate) fn udp_send(
    socket: &UdpSocket,
    to: Option<SocketAddr>,
    spec: &TestSpec,
    header: &WriteHeader<'_>,
    stop: &AtomicBool,
) -> (SenderMeter, Option<String>) {
    let mut meter = SenderMeter::new(1, spec.paced(), false);
    let _ = socket.set_write_timeout(Some(POLL));
    let start = clock::monotonic_ns();
    let mut core = match spec.sender_core(0..1, start, BATCHING, spec.send_policy()) {
        Ok(core) => core,
        Err(e) => return (meter, Some(e)),
    };
    let mut datagram = vec![0u8; spec.size as usize];
    let mut waiter = Waiter::new(spec, 1, false);
    loop {
        if stop.load(Ordering::Relaxed) {
            core.handle_stop();
        }
        match core.poll(clock::monotonic_ns()) {
            Poll::Done => break,
            Poll::Wait { until_ns } => meter.on_pacing_spin(waiter.wait(until_ns).spun_ns),
            Poll::Transmit { .. } => {
                meter.on_batch(core.train().len() as u64);
                let out = Datagrams { socket, to, header };
                let (taken, error) = out.send(core.train(), &mut datagram, &mut meter);
                match error.map(|e| e.kind()) {
                    None | Some(io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                        let lost = core.handle_sent(taken);
                        meter.on_send_buffer_full(0, lost);
                    }
                    Some(io::ErrorKind::ConnectionRefused) => core.handle_unreachable(),
                    Some(kind) => core.handle_failure(format!("UDP send failed: {kind}")),
                }
            }
        }
    }
    if let Some(pacing) = waiter.report() {
        meter.set_pacing(pacing);
    }
    (meter, core.error().map(str::to_string))
}

/// Where one UDP stream's datagrams go, and how they begin.
struct Datagrams<'a> {
    socket: &'a UdpSocket,
    to: Option<SocketAddr>,
    header: &'a WriteHeader<'a>,
}

impl Datagrams<'_> {
    /// Sends a train's datagrams, each stamped now; how many the socket took, and the error
    /// that stopped the rest.
    fn send(
        &self,
        train: &[Packet],
        datagram: &mut [u8],
        meter: &mut SenderMeter,
    ) -> (usize, Option<io::Error>) {
        for (k, p) in train.iter().enumerate() {
            let now = clock::monotonic_ns();
            (self.header)(datagram, p.seq);
            let sent = match self.to {
                Some(to) => self.socket.send_to(datagram, to),
                None => self.socket.send(datagram),
            };
            match sent {
                Ok(_) => meter.on_sent(0, p.seq, p.size, now, p.due_ns, now),
                Err(e) => return (k, Some(e)),
            }
        }
        (train.len(), None)
    }
}
