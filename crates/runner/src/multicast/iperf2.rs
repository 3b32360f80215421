//! `--iperf2`: the group's flow in iperf2's datagrams, so Debian's `iperf` takes either end.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use flowlab_engine::SenderOutcome;
use flowlab_spec::{MulticastGroup, TestSpec};
use flowlab_sys::clock;
use flowlab_wire::iperf2::Iperf2Header;

use crate::foreign_udp::udp_send;

/// Sends the flow in iperf2's datagrams (ids from 1, wall-clock stamps), then its final
/// datagram (the id after the last one due, negated), which ends `iperf -s`'s report. Sent
/// once, as iperf2's multicast client does: a multicast receiver sends no acknowledgement.
pub(super) fn send(
    socket: &UdpSocket,
    spec: &TestSpec,
    stop: &AtomicBool,
) -> Option<SenderOutcome> {
    let last_id = AtomicU64::new(0);
    let header = |datagram: &mut [u8], seq: u64| {
        last_id.fetch_max(seq + 1, Ordering::Relaxed);
        Iperf2Header::at(seq as i64 + 1, clock::realtime_ns()).emit(datagram);
    };
    let (meter, error) = udp_send(socket, None, spec, &header, stop);
    let mut fin = vec![0u8; spec.size as usize];
    let next = last_id.load(Ordering::Relaxed) as i64 + 1;
    Iperf2Header::at(-next, clock::realtime_ns()).emit(&mut fin);
    let fin_error = socket
        .send(&fin)
        .err()
        .map(|e| format!("cannot send iperf2's final datagram: {e}"));
    Some(SenderOutcome {
        report: meter.report(),
        log: Vec::new(),
        error: error.or(fin_error),
        worker_cpu_ns: (0, 0),
    })
}

/// iperf2 sends: once every agent has joined, says so (the moment to start `iperf -c`), then
/// waits out the test's duration (or Ctrl-C) while they receive; nothing was sent here.
pub(super) fn await_sender(spec: &TestSpec, stop: &AtomicBool) -> Option<SenderOutcome> {
    let duration = Duration::from_nanos(spec.duration_ns.unwrap_or(0));
    if let Some(group) = &spec.multicast {
        eprintln!("{}", ready_line(group, duration));
    }
    let until = Instant::now() + duration;
    while Instant::now() < until
        && !stop.load(Ordering::Relaxed)
        && !flowlab_sys::signal::is_interrupted()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// What a person (or a script) waits for before starting iperf's sender.
fn ready_line(group: &MulticastGroup, listening: Duration) -> String {
    let version = if group.group.is_ipv6() { " -V" } else { "" };
    format!(
        "flowlab: the agents have joined {}: start `iperf -c {} -p {} -u -T {}{version}` now; \
         they listen for {:.0} s",
        std::net::SocketAddr::new(group.group, group.port),
        group.group,
        group.port,
        group.hops,
        listening.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_line_names_the_command_that_reaches_the_agents() {
        let group = MulticastGroup {
            group: "ff15::7".parse().unwrap(),
            port: 6002,
            hops: 2,
            session: 0,
            header: flowlab_spec::DatagramHeader::Iperf2,
        };
        assert_eq!(
            ready_line(&group, Duration::from_secs(6)),
            "flowlab: the agents have joined [ff15::7]:6002: start \
             `iperf -c ff15::7 -p 6002 -u -T 2 -V` now; they listen for 6 s"
        );
    }
}
