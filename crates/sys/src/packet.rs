//! Whole Ethernet frames on one interface (AF_PACKET, SOCK_RAW, every EtherType): what a
//! user-space link emulator reads from one veth end and writes to another. Frames this
//! socket's interface sends are not read back (PACKET_IGNORE_OUTGOING), so an emulator
//! writing to an interface never sees its own frames; writes bypass the interface's qdisc
//! (PACKET_QDISC_BYPASS), so the emulator alone decides when a frame leaves. A sender of
//! UDP datagrams as whole frames ([`FrameSocket::open_sender`]) keeps the qdisc.
//!
//! Every frame read or written starts with a [`VNET_HDR_LEN`]-byte `virtio_net_hdr`
//! (PACKET_VNET_HDR): the kernel's checksum and segmentation state of the buffer. A frame
//! from a local stack on a veth usually carries a checksum still to be computed
//! (CHECKSUM_PARTIAL); written back with its header, the kernel keeps that state and the
//! receiving stack accepts the frame, where a bare copy would fail its checksum.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::udp::{recv_batch, send_batch_nowait, send_gathered, RecvBatch};

/// Linux `ETH_P_ALL`: every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// Linux `PACKET_IGNORE_OUTGOING` (since 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// Linux `PACKET_QDISC_BYPASS` (since 3.14).
const PACKET_QDISC_BYPASS: libc::c_int = 20;
/// Linux `PACKET_VNET_HDR`.
const PACKET_VNET_HDR: libc::c_int = 15;
/// Bytes of the `virtio_net_hdr` in front of every frame.
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the device completes a checksum (CHECKSUM_PARTIAL).
const VIRTIO_NET_HDR_F_NEEDS_CSUM: u8 = 1;

/// The `virtio_net_hdr` of a frame whose transport checksum the device completes: the sum
/// from byte `start` of the Ethernet frame to its end, stored `offset` bytes after `start`
/// (the field holding the pseudo-header's sum). The kernel computes it in software where
/// the device cannot, as for its own sockets' packets.
pub fn vnet_checksum_header(start: u16, offset: u16) -> [u8; VNET_HDR_LEN] {
    let mut h = [0u8; VNET_HDR_LEN];
    h[0] = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    // The packet socket reads the legacy header in the host's byte order.
    h[6..8].copy_from_slice(&start.to_ne_bytes());
    h[8..10].copy_from_slice(&offset.to_ne_bytes());
    h
}

/// A packet socket bound to one interface.
#[derive(Debug)]
pub struct FrameSocket {
    fd: OwnedFd,
}

impl FrameSocket {
    /// Opens a non-blocking socket on the interface with index `ifindex`, reading every
    /// frame the interface receives if `receive` (else it only sends); needs CAP_NET_RAW
    /// (PermissionDenied otherwise). Fails if the kernel cannot ignore outgoing frames,
    /// since the emulator would then read its own writes.
    pub fn open(ifindex: u32, receive: bool) -> io::Result<FrameSocket> {
        // Protocol 0 receives nothing: a send-only socket costs no copy of each frame.
        let protocol = if receive { ETH_P_ALL.to_be() } else { 0 };
        let socket = Self::bound(ifindex, protocol)?;
        let fd = socket.fd.as_fd();
        crate::sockopt::set_int(fd, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        crate::sockopt::set_int(fd, libc::SOL_PACKET, PACKET_QDISC_BYPASS, 1)?;
        // Room for bursts while the emulator thread sleeps (the kernel caps it at rmem_max
        // unless privileged, which we are).
        let _ = crate::sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20);
        Ok(socket)
    }

    /// A send-only socket on `ifindex` whose frames pass the interface's qdisc, as a local
    /// stack's do (a sender's shaping still applies); needs CAP_NET_RAW.
    pub fn open_sender(ifindex: u32) -> io::Result<FrameSocket> {
        Self::bound(ifindex, 0)
    }

    /// A non-blocking packet socket for `protocol` (network byte order) with vnet headers,
    /// bound to `ifindex`.
    fn bound(ifindex: u32, protocol: u16) -> io::Result<FrameSocket> {
        // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                i32::from(protocol),
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        crate::sockopt::set_int(fd.as_fd(), libc::SOL_PACKET, PACKET_VNET_HDR, 1)?;
        // SAFETY: sockaddr_ll is plain integers; all-zero is valid.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol;
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll and the length matches it.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(FrameSocket { fd })
    }

    /// Reads the frames waiting (at most the batch's capacity) without blocking; returns
    /// how many ([`RecvBatch::payload`] holds each: the vnet header, then the Ethernet
    /// header).
    pub fn receive(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        recv_batch(self.fd.as_fd(), batch)
    }

    /// Sends whole frames (each vnet header first) out of the interface, without waiting,
    /// in as few `sendmmsg` calls as the kernel allows (one per 64 frames when all go): one
    /// system call for a burst of departures instead of one per frame. Frames are tried in
    /// order; once the interface's queue is full, the rest are counted as not sent; a frame
    /// the kernel refuses otherwise is counted as failed and the next is tried.
    pub fn send_batch(&self, frames: &[&[u8]]) -> BatchSent {
        let mut out = BatchSent::default();
        let mut next = 0;
        while next < frames.len() {
            match send_batch_nowait(self.fd.as_fd(), &frames[next..]) {
                Ok(n) if n > 0 => {
                    out.sent += n;
                    next += n;
                }
                Err(e) if !is_queue_full(&e) => {
                    out.failed += 1;
                    next += 1;
                }
                _ => {
                    out.queue_full += frames.len() - next;
                    break;
                }
            }
        }
        out
    }

    /// Sends `count` frames without waiting, frame `i` gathered from `parts(i)` (its vnet
    /// header first), in as few `sendmmsg` calls as the kernel allows; returns how many it
    /// took (frames in order: the rest found the socket's buffer full), an error only if it
    /// took none. A frame the interface's qdisc drops (ENOBUFS) counts as taken, as a UDP
    /// socket's datagram does: the qdisc counts the drop, and the next frame goes on.
    pub fn send_gathered<'a>(
        &self,
        count: usize,
        parts: impl Fn(usize) -> [&'a [u8]; 2],
    ) -> io::Result<usize> {
        let mut next = 0;
        while next < count {
            let from = next;
            match send_gathered(
                self.fd.as_fd(),
                count - from,
                |i| parts(from + i),
                &[],
                libc::MSG_DONTWAIT,
            ) {
                Ok(0) => break,
                Ok(n) => next += n,
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => next += 1,
                Err(e) if next == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(next)
    }
}

/// What became of the frames given to [`FrameSocket::send_batch`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchSent {
    /// Handed to the interface.
    pub sent: usize,
    /// Not sent: the interface's queue was full.
    pub queue_full: usize,
    /// Refused by the kernel for another reason.
    pub failed: usize,
}

fn is_queue_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS))
}

impl AsFd for FrameSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_sent_on_lo_reaches_another_socket_in_order() {
        let lo = crate::raw::interface_named("lo").unwrap();
        let (tx, rx) = match (
            FrameSocket::open(lo.index, false),
            FrameSocket::open(lo.index, true),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) if e.kind() == io::ErrorKind::PermissionDenied => {
                eprintln!("frame socket test skipped: needs CAP_NET_RAW");
                return;
            }
            (Err(e), _) | (_, Err(e)) => panic!("{e}"),
        };
        // An empty vnet header, then an Ethernet frame with the local-experimental
        // EtherType and a marker.
        let mut frame = vec![0u8; VNET_HDR_LEN + 64];
        let eth = VNET_HDR_LEN;
        frame[eth + 12..eth + 14].copy_from_slice(&crate::raw::FLOWLAB_ETHERTYPE.to_be_bytes());
        frame[eth + 14..eth + 22].copy_from_slice(b"emutest!");
        // A burst of three in one call, each frame marked with its index.
        let frames: Vec<Vec<u8>> = (0..3u8)
            .map(|k| {
                let mut f = frame.clone();
                f[eth + 22] = k;
                f
            })
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let sent = tx.send_batch(&refs);
        assert_eq!(
            sent,
            BatchSent {
                sent: 3,
                queue_full: 0,
                failed: 0
            }
        );
        let mut batch = RecvBatch::new(16, 2048);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut seen = Vec::new();
        while seen.len() < 3 && std::time::Instant::now() < deadline {
            let n = rx.receive(&mut batch).unwrap();
            seen.extend((0..n).filter_map(|i| frames.iter().position(|f| batch.payload(i) == f)));
        }
        assert_eq!(seen, [0, 1, 2], "the frames arrive whole and in order");
    }
}
