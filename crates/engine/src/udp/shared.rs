//! Many one-way flows from one unconnected UDP socket (one source port), each to its own
//! agent port: the sender hands the datagrams of every flow due in one wake-up to the kernel
//! with one sendmmsg, where connected sockets cost a system call per datagram. With
//! `--packet-socket` the same datagrams leave as whole frames through a packet socket
//! ([`FramePath`]): route, neighbour and headers are looked up once, not per datagram.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_sys::netlink::{self, LinkPeer};
use flowlab_sys::packet::FrameSocket;
use flowlab_sys::timestamping::TxStamp;
use flowlab_sys::{raw, udp};
use flowlab_wire::udp_frame::{UdpFrameHeader, ETH_HEADER_LEN};

use crate::readiness::DatagramSend;

/// From this many flows a one-way client shares one socket: below it the system calls are
/// few, and a connected socket per flow also hears the agent's port vanish (ICMP).
pub const SHARED_SOCKET_FROM_FLOWS: u32 = 64;

/// Whether a client sends the flows of `spec` from one shared socket: a paced one-way UDP
/// load of [`SHARED_SOCKET_FROM_FLOWS`] or more flows, or any through a packet socket,
/// without what is per socket (transmit timestamps, the kernel's pacing rate). Its flows are
/// paced in user space (no SO_TXTIME, which finds its qdisc by a connected peer), and a send
/// buffer set is the one socket's.
pub fn shares_socket(spec: &TestSpec) -> bool {
    spec.protocol == Protocol::Udp
        && spec.direction == Direction::Oneway
        && (spec.flows >= SHARED_SOCKET_FROM_FLOWS || spec.socket.packet_socket)
        && spec.paced()
        && spec.transactions().is_none()
        && spec.echo_every.is_none()
        && spec.multicast.is_none()
        && !spec.socket.tx_timestamps
        && !spec.socket.kernel_pacing
}

/// One flow of a shared socket: its datagrams go to `peer`, as whole frames with `frame`'s
/// headers where the flows have a packet socket.
pub struct SharedFlow<'a> {
    sock: &'a UdpSocket,
    peer: SocketAddr,
    frame: Option<(&'a FrameSocket, &'a UdpFrameHeader)>,
}

impl<'a> SharedFlow<'a> {
    /// The flows of `sock`, one per peer, in flow order; through `frames` if given (opened
    /// for the same peers).
    pub fn all(
        sock: &'a UdpSocket,
        peers: &[SocketAddr],
        frames: Option<&'a FramePath>,
    ) -> Vec<SharedFlow<'a>> {
        peers
            .iter()
            .enumerate()
            .map(|(i, &peer)| SharedFlow {
                sock,
                peer,
                frame: frames.and_then(|f| Some((&f.socket, f.headers.get(i)?))),
            })
            .collect()
    }
}

/// A packet socket on the interface towards the peers, and each flow's frame headers.
#[derive(Debug)]
pub struct FramePath {
    socket: FrameSocket,
    headers: Vec<UdpFrameHeader>,
}

impl FramePath {
    /// The path of datagrams of up to `max_payload` bytes from `local` (the shared socket's
    /// address: its port is the flows' source port) to each of `peers`, with DiffServ code
    /// point `dscp`: the route's interface and next hop from the kernel's tables, whose
    /// neighbour entry the control connection has resolved. Needs CAP_NET_RAW; the peers
    /// must be reached through one interface whose MTU holds the datagrams.
    pub fn open(
        local: SocketAddr,
        peers: &[SocketAddr],
        dscp: u8,
        max_payload: usize,
    ) -> Result<FramePath, String> {
        // (peer address, next hop, this end's MAC address there), one per peer address.
        let mut hops: Vec<(std::net::IpAddr, LinkPeer, [u8; 6])> = Vec::new();
        let mut headers = Vec::with_capacity(peers.len());
        for peer in peers {
            let ip = peer.ip().to_canonical();
            let k = match hops.iter().position(|(at, ..)| *at == ip) {
                Some(k) => k,
                None => {
                    hops.push(hop_to(ip)?);
                    hops.len() - 1
                }
            };
            let (_, hop, local_mac) = &hops[k];
            if hop.ifindex != hops[0].1.ifindex {
                return Err(format!(
                    "--packet-socket: the peers are reached through {} and {}; one interface only",
                    hops[0].1.interface, hop.interface
                ));
            }
            let header =
                UdpFrameHeader::new(*local_mac, hop.mac, local, *peer, dscp).ok_or_else(|| {
                    format!("--packet-socket: {local} and {peer} are not of one family")
                })?;
            headers.push(header);
        }
        let Some((_, hop, _)) = hops.first() else {
            return Err("--packet-socket: no flows".into());
        };
        check_mtu(
            hop,
            headers.first().map_or(0, UdpFrameHeader::len),
            max_payload,
        )?;
        let socket = FrameSocket::open_sender(hop.ifindex).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => {
                "--packet-socket needs CAP_NET_RAW (run as root)".to_string()
            }
            _ => format!(
                "--packet-socket: cannot open a packet socket on {}: {e}",
                hop.interface
            ),
        })?;
        Ok(FramePath { socket, headers })
    }
}

/// The next hop towards `ip`, and this end's MAC address on its interface.
fn hop_to(ip: std::net::IpAddr) -> Result<(std::net::IpAddr, LinkPeer, [u8; 6]), String> {
    let hop =
        netlink::next_hop(ip).map_err(|e| format!("--packet-socket: no next hop for {ip}: {e}"))?;
    let local =
        raw::interface_named(&hop.interface).map_err(|e| format!("--packet-socket: {e}"))?;
    Ok((ip, hop, local.mac))
}

/// Refuses datagrams whose frames exceed the interface's MTU: a packet socket does not
/// fragment.
fn check_mtu(hop: &LinkPeer, header_len: usize, max_payload: usize) -> Result<(), String> {
    let Some(mtu) = flowlab_sys::tuning::interface_mtu(&hop.interface).map(|m| m as usize) else {
        return Ok(());
    };
    let ip_len = header_len.saturating_sub(ETH_HEADER_LEN) + max_payload;
    if ip_len > mtu {
        return Err(format!(
            "--packet-socket: datagrams of {max_payload} B make {ip_len}-byte IP packets, above \
             the MTU of {} ({mtu} B); a packet socket does not fragment",
            hop.interface
        ));
    }
    Ok(())
}

fn unsupported(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        format!("{what}: not on a shared socket"),
    )
}

impl DatagramSend for SharedFlow<'_> {
    fn send_frames(&self, frames: &[&[u8]], nowait: bool) -> io::Result<usize> {
        udp::send_batch_to(self.sock, frames, &vec![self.peer; frames.len()], nowait)
    }
    fn gso_supported(&self) -> bool {
        false
    }
    fn send_segments(&self, _: &[u8], _: u16, _: bool) -> io::Result<usize> {
        Err(unsupported("segmentation offload"))
    }
    fn kernel_timed(&self) -> bool {
        false
    }
    fn send_at(&self, _: &[u8], _: u64, _: bool) -> io::Result<usize> {
        Err(unsupported("transmit times"))
    }
    fn tx_stamps(&self, _: &mut Vec<TxStamp>) -> io::Result<()> {
        Err(unsupported("transmit timestamps"))
    }
    fn shared(&self) -> Option<(BorrowedFd<'_>, SocketAddr)> {
        Some((self.sock.as_fd(), self.peer))
    }
    fn frame(&self) -> Option<(&FrameSocket, &UdpFrameHeader)> {
        self.frame
    }
}
