//! Native link-layer sockets (AF_PACKET): test frames with flowlab's own EtherType, no IP and
//! no UDP, as WS2NetTest compared an application over TCP/IP and over native ATM.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// IEEE 802 "local experimental" EtherType 1: no other protocol uses it on a real network.
pub const FLOWLAB_ETHERTYPE: u16 = 0x88b5;

/// Linux `PACKET_IGNORE_OUTGOING` (since 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;

/// An interface: name, index and hardware address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// Kernel name, e.g. `eth0`.
    pub name: String,
    /// Kernel interface index.
    pub index: u32,
    /// Hardware (MAC) address.
    pub mac: [u8; 6],
}

/// Every interface with a hardware address and the IP addresses it holds (getifaddrs).
fn interfaces() -> io::Result<Vec<(Interface, Vec<IpAddr>)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found: Vec<(Interface, Vec<IpAddr>)> = Vec::new();
    let mut cursor = head;
    while !cursor.is_null() {
        // SAFETY: `cursor` is a node of the list getifaddrs returned, alive until freed.
        let entry = unsafe { &*cursor };
        cursor = entry.ifa_next;
        if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(entry.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: ifa_addr points at a sockaddr whose family tells its real type.
        let family = i32::from(unsafe { (*entry.ifa_addr).sa_family });
        let slot = match found.iter().position(|(i, _)| i.name == name) {
            Some(p) => p,
            None => {
                found.push((
                    Interface {
                        name: name.clone(),
                        index: 0,
                        mac: [0; 6],
                    },
                    Vec::new(),
                ));
                found.len() - 1
            }
        };
        match family {
            libc::AF_PACKET => {
                // SAFETY: an AF_PACKET ifa_addr is a sockaddr_ll.
                let ll = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_ll) };
                found[slot].0.index = ll.sll_ifindex as u32;
                if ll.sll_halen == 6 {
                    found[slot].0.mac.copy_from_slice(&ll.sll_addr[..6]);
                }
            }
            libc::AF_INET => {
                // SAFETY: an AF_INET ifa_addr is a sockaddr_in.
                let sin = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
                found[slot].1.push(IpAddr::from(
                    u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                ));
            }
            libc::AF_INET6 => {
                // SAFETY: an AF_INET6 ifa_addr is a sockaddr_in6.
                let sin6 = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in6) };
                found[slot].1.push(IpAddr::from(sin6.sin6_addr.s6_addr));
            }
            _ => {}
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// The interface holding `ip` (the local end of a control connection), for native frames
/// on the same path.
pub fn interface_with_address(ip: IpAddr) -> io::Result<Interface> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    interfaces()?
        .into_iter()
        .find(|(_, addrs)| addrs.contains(&ip))
        .map(|(i, _)| i)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface holds {ip}")))
}

/// An interface by name.
pub fn interface_named(name: &str) -> io::Result<Interface> {
    interfaces()?
        .into_iter()
        .map(|(i, _)| i)
        .find(|i| i.name == name && i.index != 0)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface named '{name}'"),
            )
        })
}

/// An AF_PACKET datagram socket on one interface for [`FLOWLAB_ETHERTYPE`], sending to one
/// peer MAC address: the kernel writes and strips the Ethernet header.
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
    peer: libc::sockaddr_ll,
}

fn link_address(ifindex: u32, mac: &[u8; 6]) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain integers; all-zero is valid.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = FLOWLAB_ETHERTYPE.to_be();
    sll.sll_ifindex = ifindex as i32;
    sll.sll_halen = 6;
    sll.sll_addr[..6].copy_from_slice(mac);
    sll
}

impl RawSocket {
    /// Opens and binds the socket; needs CAP_NET_RAW (PermissionDenied otherwise).
    pub fn open(interface: &Interface, peer_mac: [u8; 6]) -> io::Result<RawSocket> {
        // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                i32::from(FLOWLAB_ETHERTYPE.to_be()),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // A sender must not read back its own frames (on `lo` every frame is seen twice).
        // Kernels before 4.20 lack the option: harmless, the receiver filters by flags.
        let _ = crate::sockopt::set_int(fd.as_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        let local = link_address(interface.index, &[0; 6]);
        // SAFETY: `local` is a valid sockaddr_ll and the length matches it.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&local as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RawSocket {
            fd,
            peer: link_address(interface.index, &peer_mac),
        })
    }

    /// sendmmsg of `frames` (payloads) to the peer; returns how many went.
    pub fn send_batch(&self, frames: &[&[u8]], nowait: bool) -> io::Result<usize> {
        const CHUNK: usize = 64;
        let flags = if nowait { libc::MSG_DONTWAIT } else { 0 };
        let mut sent = 0;
        for chunk in frames.chunks(CHUNK) {
            let mut iovs = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; CHUNK];
            // SAFETY: mmsghdr is integers and raw pointers; all-zero (null) is valid.
            let mut hdrs: [libc::mmsghdr; CHUNK] = unsafe { std::mem::zeroed() };
            for (i, frame) in chunk.iter().enumerate() {
                // sendmmsg never writes through iov_base or msg_name; *mut is only the C type.
                iovs[i].iov_base = frame.as_ptr().cast_mut().cast();
                iovs[i].iov_len = frame.len();
            }
            let iov_ptr = iovs.as_mut_ptr();
            for (i, hdr) in hdrs.iter_mut().take(chunk.len()).enumerate() {
                hdr.msg_hdr.msg_iov = iov_ptr.wrapping_add(i);
                hdr.msg_hdr.msg_iovlen = 1;
                hdr.msg_hdr.msg_name = (&self.peer as *const libc::sockaddr_ll).cast_mut().cast();
                hdr.msg_hdr.msg_namelen =
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            }
            // SAFETY: the first `chunk.len()` headers point at live iovecs, frames and the
            // peer address, which the kernel only reads.
            let rc = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    chunk.len() as libc::c_uint,
                    flags,
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                return if sent > 0 { Ok(sent) } else { Err(err) };
            }
            let n = rc as usize;
            sent += n;
            if n < chunk.len() {
                break;
            }
        }
        Ok(sent)
    }

    /// O_NONBLOCK on or off.
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        // SAFETY: F_GETFL/F_SETFL on our own descriptor touch no memory.
        let flags = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_GETFL) };
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let flags = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: as above.
        if unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_SETFL, flags) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// SO_RCVTIMEO; `None` waits for ever.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        crate::sockopt::set_read_timeout(self.fd.as_fd(), timeout.unwrap_or_default())
    }
}

impl AsFd for RawSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_by_address_and_name() {
        let lo = interface_with_address("127.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(lo.name, "lo");
        assert_eq!(interface_named("lo").unwrap().index, lo.index);
        assert!(interface_named("no-such-if0").is_err());
    }

    #[test]
    fn frames_cross_loopback_when_privileged() {
        let lo = interface_named("lo").unwrap();
        let (tx, rx) = match (RawSocket::open(&lo, [0; 6]), RawSocket::open(&lo, [0; 6])) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) if e.kind() == io::ErrorKind::PermissionDenied => {
                eprintln!("frames_cross_loopback_when_privileged: skipped: needs CAP_NET_RAW");
                return;
            }
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
        };
        rx.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let frame = [0x5au8; 60];
        assert_eq!(tx.send_batch(&[&frame, &frame], false).unwrap(), 2);
        let mut batch = crate::udp::RecvBatch::new(8, 2048);
        let mut got = 0;
        while got < 2 {
            let n = crate::udp::recv_batch(&rx, &mut batch).unwrap();
            assert!(n > 0, "frames did not arrive");
            got += (0..n).filter(|&i| batch.payload(i) == frame).count();
        }
    }
}
