//! Sockets for ICMP echo: an unprivileged ping socket (SOCK_DGRAM with IPPROTO_ICMP or
//! IPPROTO_ICMPV6, allowed to the groups in `net.ipv4.ping_group_range`) where the kernel
//! allows one, else a raw socket (needs CAP_NET_RAW). Either is connected to the target, so
//! it hears only that host; the don't-fragment setting and the path MTU are read and set
//! here.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::sockopt::{get_int, set_int};

/// Which kind of socket the kernel gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// A ping socket: the kernel sets the echo identifier (the socket's "port"), fills in
    /// checksums, and hands up only replies to this socket, without the IP header.
    Ping,
    /// A raw socket: every ICMP message from the target, IPv4 ones with their IP header.
    Raw,
}

/// A connected socket for echo requests to one address.
#[derive(Debug)]
pub struct EchoSocket {
    socket: Socket,
    /// How the kernel let this process send ICMP.
    pub access: Access,
    /// IPv6 (ICMPv6) rather than IPv4.
    pub ipv6: bool,
}

impl EchoSocket {
    /// Opens a ping socket to `target` (a raw one where ping sockets are not allowed),
    /// bound to `bind` if given, non-blocking, with kernel receive timestamps.
    pub fn open(target: IpAddr, bind: Option<IpAddr>) -> io::Result<EchoSocket> {
        let ipv6 = target.is_ipv6();
        let (domain, protocol) = match ipv6 {
            false => (Domain::IPV4, Protocol::ICMPV4),
            true => (Domain::IPV6, Protocol::ICMPV6),
        };
        let (socket, access) = match Socket::new(domain, Type::DGRAM, Some(protocol)) {
            Ok(s) => (s, Access::Ping),
            Err(e) if denied(&e) => match Socket::new(domain, Type::from(libc::SOCK_RAW), Some(protocol)) {
                Ok(s) => (s, Access::Raw),
                Err(raw) if denied(&raw) => {
                    return Err(io::Error::new(
                        raw.kind(),
                        "ICMP needs a ping socket (this group is outside net.ipv4.ping_group_range) or CAP_NET_RAW for a raw one",
                    ))
                }
                Err(raw) => return Err(raw),
            },
            Err(e) => return Err(e),
        };
        if let Some(addr) = bind {
            socket.bind(&SockAddr::from(SocketAddr::new(addr, 0)))?;
        }
        socket.connect(&SockAddr::from(SocketAddr::new(target, 0)))?;
        socket.set_nonblocking(true)?;
        crate::udp::enable_rx_timestamps(&socket)?;
        Ok(EchoSocket {
            socket,
            access,
            ipv6,
        })
    }

    /// The identifier the kernel puts in this ping socket's requests (its bound "port");
    /// `None` for a raw socket, whose requests carry the caller's.
    pub fn kernel_ident(&self) -> Option<u16> {
        match self.access {
            Access::Raw => None,
            Access::Ping => self.socket.local_addr().ok()?.as_socket().map(|a| a.port()),
        }
    }

    /// Don't fragment: `true` makes the kernel refuse (EMSGSIZE) a request above the path
    /// MTU and set DF on every one (IPv6: never fragment at this host); `false` lets it
    /// fragment requests above the MTU and send all without DF.
    pub fn set_dont_fragment(&self, on: bool) -> io::Result<()> {
        let fd = self.socket.as_fd();
        match self.ipv6 {
            false => {
                let mode = if on {
                    libc::IP_PMTUDISC_DO
                } else {
                    libc::IP_PMTUDISC_DONT
                };
                set_int(fd, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, mode)
            }
            true => {
                let mode = if on {
                    libc::IPV6_PMTUDISC_DO
                } else {
                    libc::IPV6_PMTUDISC_DONT
                };
                set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, mode)?;
                set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, i32::from(on))
            }
        }
    }

    /// The path MTU the kernel knows towards the target (the route's, lowered by any
    /// "fragmentation needed" or "packet too big" heard since).
    pub fn path_mtu(&self) -> io::Result<u32> {
        let fd = self.socket.as_fd();
        let mtu = match self.ipv6 {
            false => get_int(fd, libc::IPPROTO_IP, libc::IP_MTU)?,
            true => get_int(fd, libc::IPPROTO_IPV6, libc::IPV6_MTU)?,
        };
        u32::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
    }

    /// Sends one ICMP message (header and data; no IP header).
    pub fn send(&self, message: &[u8]) -> io::Result<usize> {
        self.socket.send(message)
    }
}

impl AsFd for EchoSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// Whether a receive failed with the ICMP error the path sent about an earlier request
/// (a connected socket reports the last one once): unreachable, refused, too big.
pub fn is_path_error(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EHOSTUNREACH | libc::ENETUNREACH | libc::EMSGSIZE | libc::ECONNREFUSED)
    )
}

/// The kernel refused the socket type to this process.
fn denied(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echo_socket_reaches_loopback_and_knows_its_mtu() {
        let socket = match EchoSocket::open(IpAddr::from([127, 0, 0, 1]), None) {
            Ok(s) => s,
            // Neither a ping socket nor CAP_NET_RAW here: nothing to test.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return,
            Err(e) => panic!("{e}"),
        };
        assert!(!socket.ipv6);
        assert!(socket.path_mtu().unwrap() >= 1280);
        socket.set_dont_fragment(true).unwrap();
        match socket.access {
            Access::Ping => assert!(socket.kernel_ident().is_some()),
            Access::Raw => assert_eq!(socket.kernel_ident(), None),
        }
        let oversized = vec![0u8; 70_000];
        assert!(socket.send(&oversized).is_err(), "above the IP maximum");
    }
}
