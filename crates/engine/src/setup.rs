//! Data-socket settings the user asked for, applied before a role starts. What the kernel
//! refuses or cannot honour becomes a note in the report rather than a failed test.

use std::net::{TcpStream, UdpSocket};
use std::os::fd::AsFd;

use flowlab_sys::timestamping::{self, TimestampFlags};
use flowlab_sys::{netlink, socket, tcp, udp};

use flowlab_spec::TestSpec;
use flowlab_traffic::PacingMode;

fn common(
    fd: impl AsFd + Copy,
    ipv6: bool,
    spec: &TestSpec,
    sending: bool,
    notes: &mut Vec<String>,
) {
    let o = &spec.socket;
    if let Some(dscp) = o.dscp {
        // DSCP is the top six bits of the former TOS byte; ECN bits stay 0.
        if let Err(e) = socket::set_tos(fd, dscp << 2, ipv6) {
            notes.push(format!("DSCP {dscp} not set: {e}"));
        }
    }
    if let Some(priority) = o.priority {
        if let Err(e) = socket::set_priority(fd, priority) {
            notes.push(format!("socket priority {priority} not set: {e}"));
        }
    }
    if let Some(mark) = o.mark {
        if let Err(e) = socket::set_mark(fd, mark) {
            notes.push(format!("SO_MARK {mark} not set (needs CAP_NET_ADMIN): {e}"));
        }
    }
    if o.send_buffer.is_some() || o.recv_buffer.is_some() {
        let (send, recv) = (
            o.send_buffer.map(|b| b as usize),
            o.recv_buffer.map(|b| b as usize),
        );
        match udp::set_buffer_sizes(fd, send, recv) {
            Ok(()) => {
                if let Ok((s, r)) = udp::buffer_sizes(fd) {
                    notes.push(format!(
                        "socket buffers: send {s} B, receive {r} B (as the kernel reports them)"
                    ));
                }
            }
            Err(e) => notes.push(format!("socket buffer sizes not set: {e}")),
        }
    }
    if o.kernel_pacing && sending {
        if let Some(rate) = spec.rate_bps {
            if let Err(e) = socket::set_max_pacing_rate(fd, rate / 8) {
                notes.push(format!("kernel pacing not set: {e}"));
            }
        }
    }
}

/// Cores a spinning thread needs: its own, the other end's (client and agent often share a
/// small host) and one for the kernel's softirq work, which a spinning core starves.
pub const SPIN_CORES: usize = 3;

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether receivers busy-poll: asked (`--busy-poll`) and the host has [`SPIN_CORES`].
pub(crate) fn busy_poll(spec: &TestSpec) -> bool {
    spec.busy_poll && cores() >= SPIN_CORES
}

/// What spinning the test asks of a host with too few cores: `--busy-poll` falls back to
/// blocking reads; precise pacing spins on, with a warning.
fn spin_notes(spec: &TestSpec, sending: bool, cores: usize) -> Vec<String> {
    let mut notes = Vec::new();
    if cores >= SPIN_CORES {
        return notes;
    }
    if spec.busy_poll {
        notes.push(format!(
            "--busy-poll not used: {cores} cores are too few to spin beside the other end and \
             the kernel's softirq ({SPIN_CORES} needed); sockets were read blocking"
        ));
    }
    if sending && spec.paced() && spec.pacing == PacingMode::Precise {
        notes.push(format!(
            "--pacing precise spins on {cores} cores shared with the other end and the \
             kernel's softirq ({SPIN_CORES} needed to spin freely): the spin may delay them \
             (auto spends at most 5 % of a core)"
        ));
    }
    notes
}

/// Applies the socket options to UDP data sockets; returns notes for the report.
pub fn configure_udp(socks: &[UdpSocket], spec: &TestSpec, sending: bool) -> Vec<String> {
    let mut notes = spin_notes(spec, sending, cores());
    for sock in socks {
        let ipv6 = sock.local_addr().is_ok_and(|a| a.is_ipv6());
        common(sock, ipv6, spec, sending, &mut notes);
    }
    notes.dedup();
    if spec.socket.kernel_pacing && sending && spec.rate_bps.is_some() {
        notes.push(kernel_udp_pacing(socks));
    } else if spec.pacing == PacingMode::Efficient && sending && spec.paced() {
        notes.extend(efficient_txtime(socks));
    }
    if spec.socket.zerocopy {
        notes.push("zero-copy applies to TCP only; UDP sent as usual".into());
    }
    if spec.socket.tx_timestamps && sending {
        let flags = TimestampFlags::TX_SOFTWARE
            | TimestampFlags::SOFTWARE
            | TimestampFlags::TX_HARDWARE
            | TimestampFlags::RAW_HARDWARE
            | TimestampFlags::OPT_ID
            | TimestampFlags::OPT_TSONLY;
        if let Some(e) = socks
            .iter()
            .find_map(|s| timestamping::enable_timestamping(s, flags).err())
        {
            notes.push(format!("transmit timestamps unavailable: {e}"));
        } else if spec.rate_bps.is_none() {
            notes
                .push("transmit timestamps measure paced flows only; not taken at max rate".into());
        }
    }
    notes
}

/// Kernel pacing of UDP needs the fq qdisc on the egress interface: there each datagram is
/// given its scheduled time (SO_TXTIME) on top of flowlab's own pacing. Elsewhere the note
/// says which qdisc is there and that the kernel ignores the asked pacing.
fn kernel_udp_pacing(socks: &[UdpSocket]) -> String {
    let Some(peer) = socks.first().and_then(|s| s.peer_addr().ok()) else {
        return "kernel pacing: no connected socket to find the path's qdisc".into();
    };
    let egress = match netlink::egress(peer.ip()) {
        Ok(e) => e,
        Err(e) => {
            return format!(
            "kernel pacing: the egress qdisc could not be read ({e}); flowlab paces in user space"
        )
        }
    };
    let root = egress.root.as_deref().unwrap_or("none");
    if !egress.kinds.iter().any(|k| k == "fq") {
        let etf = if egress.paces_udp() {
            " (etf needs transmit times ahead of its delta: not used)"
        } else {
            ""
        };
        return format!(
            "kernel pacing asked, but {} has qdisc {root}, not fq{etf}: the kernel does not pace \
             UDP there (SO_MAX_PACING_RATE and SO_TXTIME are ignored); flowlab paces in user space",
            egress.interface
        );
    }
    match socks
        .iter()
        .find_map(|s| udp::set_txtime(s, udp::TxClock::Monotonic).err())
    {
        None => format!(
            "kernel pacing: fq on {} sends each datagram at its scheduled time (SO_TXTIME), \
             one datagram per call",
            egress.interface
        ),
        Some(e) => format!("SO_TXTIME not set: {e}; flowlab paces in user space"),
    }
}

/// `--pacing efficient` hands datagrams to the kernel early with their transmit time where
/// the egress qdisc is fq (SO_TXTIME), so the sender sleeps rather than spins; elsewhere (this
/// kernel may lack fq) the note names the qdisc there.
fn efficient_txtime(socks: &[UdpSocket]) -> Option<String> {
    let peer = socks.first()?.peer_addr().ok()?;
    let egress = match netlink::egress(peer.ip()) {
        Ok(e) => e,
        Err(e) => {
            return Some(format!(
                "pacing efficient: egress qdisc unreadable ({e}); paced in user space"
            ))
        }
    };
    if !egress.kinds.iter().any(|k| k == "fq") {
        return Some(format!(
            "pacing efficient: {} has qdisc {}, not fq: no kernel transmit times (SO_TXTIME); \
             paced in user space",
            egress.interface,
            egress.root.as_deref().unwrap_or("none")
        ));
    }
    Some(
        match socks
            .iter()
            .find_map(|s| udp::set_txtime(s, udp::TxClock::Monotonic).err())
        {
            None => format!(
                "pacing efficient: fq on {} sends each datagram at its transmit time (SO_TXTIME)",
                egress.interface
            ),
            Some(e) => format!("pacing efficient: SO_TXTIME not set ({e}); paced in user space"),
        },
    )
}

/// Applies the socket options to TCP data connections; returns notes for the report.
pub fn configure_tcp(streams: &[TcpStream], spec: &TestSpec, sending: bool) -> Vec<String> {
    let mut notes = spin_notes(spec, sending, cores());
    for stream in streams {
        let ipv6 = stream.local_addr().is_ok_and(|a| a.is_ipv6());
        common(stream, ipv6, spec, sending, &mut notes);
        if let Some(mss) = spec.socket.mss {
            if let Err(e) = tcp::set_mss(stream, mss) {
                notes.push(format!("TCP MSS {mss} not set: {e}"));
            }
        }
        if let Some(clamp) = spec.socket.window_clamp {
            if let Err(e) = tcp::set_window_clamp(stream, clamp) {
                notes.push(format!("TCP window clamp {clamp} not set: {e}"));
            }
        }
        if let Some(cc) = &spec.socket.congestion {
            if let Err(e) = tcp::set_congestion_control(stream, cc) {
                notes.push(format!("congestion control '{cc}' not set: {e}"));
            }
        }
        if spec.socket.tx_timestamps && sending {
            notes.push("transmit timestamps are taken for UDP only".into());
        }
        if spec.socket.zerocopy && sending {
            if let Err(e) = tcp::set_zerocopy(stream) {
                notes.push(format!("zero-copy not available: {e}; sent with copies"));
            }
        }
    }
    notes.dedup();
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_spec::{Direction, Protocol};

    fn spec(busy_poll: bool, pacing: PacingMode) -> TestSpec {
        TestSpec {
            busy_poll,
            pacing,
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        }
    }

    #[test]
    fn two_cores_refuse_busy_polling_and_warn_of_precise_spinning() {
        let notes = spin_notes(&spec(true, PacingMode::Precise), true, 2);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("--busy-poll not used: 2 cores are too few"));
        assert!(notes[1].starts_with("--pacing precise spins on 2 cores"));
        // A receiver does not pace; auto needs no warning.
        assert_eq!(
            spin_notes(&spec(false, PacingMode::Precise), false, 2),
            Vec::<String>::new()
        );
        assert!(spin_notes(&spec(false, PacingMode::Auto), true, 1).is_empty());
        assert!(spin_notes(&spec(true, PacingMode::Precise), true, SPIN_CORES).is_empty());
    }
}
