//! Socket options shared by UDP and TCP data sockets: busy polling,
//! kernel pacing cap, queueing priority, firewall mark and DSCP/ECN bits.

use std::io;
use std::os::fd::AsFd;

use crate::sockopt::{set_bytes, set_int};

fn clamp_int(v: u32) -> libc::c_int {
    libc::c_int::try_from(v).unwrap_or(libc::c_int::MAX)
}

/// SO_BUSY_POLL: spin up to `usecs` on the device queue in blocking
/// receives instead of sleeping for an interrupt, trading CPU for latency.
/// Raising it above net.core.busy_poll needs CAP_NET_ADMIN.
pub fn set_busy_poll(fd: impl AsFd, usecs: u32) -> io::Result<()> {
    set_int(
        fd.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_BUSY_POLL,
        clamp_int(usecs),
    )
}

/// SO_MAX_PACING_RATE in bytes per second (`u64::MAX`: unlimited).
///
/// TCP paces itself to it; UDP is paced only under the fq qdisc, and the
/// option is accepted either way, so success does not prove pacing.
pub fn set_max_pacing_rate(fd: impl AsFd, bytes_per_sec: u64) -> io::Result<()> {
    // The kernel reads an unsigned long when given that many bytes.
    let v = libc::c_ulong::try_from(bytes_per_sec).unwrap_or(libc::c_ulong::MAX);
    set_bytes(
        fd.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_MAX_PACING_RATE,
        &v.to_ne_bytes(),
    )
}

/// SO_PRIORITY: the skb priority qdiscs classify on (0..=6 unprivileged,
/// higher needs CAP_NET_ADMIN).
pub fn set_priority(fd: impl AsFd, prio: u32) -> io::Result<()> {
    set_int(
        fd.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_PRIORITY,
        clamp_int(prio),
    )
}

/// SO_MARK: the fwmark for policy routing and filters (needs CAP_NET_ADMIN).
pub fn set_mark(fd: impl AsFd, mark: u32) -> io::Result<()> {
    // The kernel reads the mark as a u32; pass the same bits as an int.
    set_int(
        fd.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_MARK,
        libc::c_int::from_ne_bytes(mark.to_ne_bytes()),
    )
}

/// Sets the IPv4 TOS byte (IP_TOS) or IPv6 traffic class (IPV6_TCLASS):
/// DSCP in the top six bits, ECN in the low two. `ipv6` must match the
/// socket's family.
pub fn set_tos(fd: impl AsFd, tos: u8, ipv6: bool) -> io::Result<()> {
    let (level, name) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
    } else {
        (libc::IPPROTO_IP, libc::IP_TOS)
    };
    set_int(fd.as_fd(), level, name, libc::c_int::from(tos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::{get_bytes, get_int};
    use std::net::{TcpListener, TcpStream, UdpSocket};

    #[test]
    fn options_read_back() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = s.as_fd();
        set_busy_poll(fd, 50).unwrap();
        assert_eq!(
            get_int(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL).unwrap(),
            50
        );
        set_priority(fd, 6).unwrap();
        assert_eq!(get_int(fd, libc::SOL_SOCKET, libc::SO_PRIORITY).unwrap(), 6);
        // Root in these tests, so SO_MARK is allowed.
        set_mark(fd, 0x8000_0042).unwrap();
        let mark = get_int(fd, libc::SOL_SOCKET, libc::SO_MARK).unwrap();
        assert_eq!(mark as u32, 0x8000_0042);
        set_tos(fd, 0xb8, false).unwrap();
        assert_eq!(get_int(fd, libc::IPPROTO_IP, libc::IP_TOS).unwrap(), 0xb8);
        let s6 = UdpSocket::bind("[::1]:0").unwrap();
        set_tos(&s6, 0x20, true).unwrap();
        assert_eq!(
            get_int(s6.as_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS).unwrap(),
            0x20
        );
    }

    fn pacing_rate(fd: impl AsFd) -> u64 {
        let mut b = [0u8; 8];
        let n = get_bytes(
            fd.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            &mut b,
        )
        .unwrap();
        match n {
            8 => u64::from_ne_bytes(b),
            _ => u64::from(u32::from_ne_bytes([b[0], b[1], b[2], b[3]])),
        }
    }

    #[test]
    fn max_pacing_rate_tcp_and_udp() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_max_pacing_rate(&c, 12_500_000).unwrap();
        assert_eq!(pacing_rate(&c), 12_500_000);
        // Above 4 GB/s needs the u64 form.
        set_max_pacing_rate(&c, 10_000_000_000).unwrap();
        assert_eq!(pacing_rate(&c), 10_000_000_000);
        set_max_pacing_rate(&c, u64::MAX).unwrap();
        // UDP accepts it too (it only takes effect under fq).
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_max_pacing_rate(&u, 1_000_000).unwrap();
        assert_eq!(pacing_rate(&u), 1_000_000);
    }

    #[test]
    fn tos_on_wrong_family_errors() {
        let s6 = UdpSocket::bind("[::1]:0").unwrap();
        let s4 = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(set_tos(&s4, 0x10, true).is_err());
        // An IPv6 socket accepts IP_TOS (for v4-mapped traffic), so no
        // assertion on that direction.
        let _ = set_tos(&s6, 0x10, false);
    }
}
