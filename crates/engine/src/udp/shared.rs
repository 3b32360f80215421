//! Many one-way flows from one unconnected UDP socket (one source port), each to its own
//! agent port: the sender hands the datagrams of every flow due in one wake-up to the kernel
//! with one sendmmsg, where connected sockets cost a system call per datagram.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_sys::timestamping::TxStamp;
use flowlab_sys::udp;

use crate::readiness::DatagramSend;

/// From this many flows a one-way client shares one socket: below it the system calls are
/// few, and a connected socket per flow also hears the agent's port vanish (ICMP).
pub const SHARED_SOCKET_FROM_FLOWS: u32 = 64;

/// Whether a client sends the flows of `spec` from one shared socket: a paced one-way UDP
/// load of [`SHARED_SOCKET_FROM_FLOWS`] or more flows, without what is per socket (transmit
/// timestamps, the kernel's pacing rate). Its flows are paced in user space (no SO_TXTIME,
/// which finds its qdisc by a connected peer), and a send buffer set is the one socket's.
pub fn shares_socket(spec: &TestSpec) -> bool {
    spec.protocol == Protocol::Udp
        && spec.direction == Direction::Oneway
        && spec.flows >= SHARED_SOCKET_FROM_FLOWS
        && spec.paced()
        && spec.transactions().is_none()
        && spec.echo_every.is_none()
        && spec.multicast.is_none()
        && !spec.socket.tx_timestamps
        && !spec.socket.kernel_pacing
}

/// One flow of a shared socket: its datagrams go to `peer`.
pub struct SharedFlow<'a> {
    sock: &'a UdpSocket,
    peer: SocketAddr,
}

impl<'a> SharedFlow<'a> {
    /// The flows of `sock`, one per peer, in flow order.
    pub fn all(sock: &'a UdpSocket, peers: &[SocketAddr]) -> Vec<SharedFlow<'a>> {
        peers
            .iter()
            .map(|&peer| SharedFlow { sock, peer })
            .collect()
    }
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
}
