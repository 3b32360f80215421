//! How the emulator reads frames from one interface and writes them to another: AF_XDP (an
//! XDP program hands each frame to a socket's rings; `flowlab_sys::xdp`; the default) or
//! AF_PACKET (`recvmmsg`/`sendmmsg` on packet sockets). Both give the direction the same
//! frames: a `virtio_net_hdr` then the Ethernet frame, with an arrival time.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::str::FromStr;

use flowlab_sys::packet::{BatchSent, FrameSocket, VNET_HDR_LEN};
use flowlab_sys::udp::{enable_rx_timestamps, enable_rxq_ovfl, RecvBatch};
use flowlab_sys::xdp::{XdpReceiver, XdpSender};

/// Frames read per call; a jumbo frame fits an AF_PACKET slot.
pub const BATCH: usize = 64;
const MAX_FRAME: usize = 9216 + 18;
/// The `virtio_net_hdr` of a frame read through AF_XDP: no offload state (its transport
/// checksum is completed in software, see [`crate::checksum`]).
const PLAIN_VNET_HDR: [u8; VNET_HDR_LEN] = [0; VNET_HDR_LEN];

/// The emulator's capture path (the lab file's `emulator_capture`). AF_XDP by default: it
/// measured a quarter to two fifths less of the emulator's CPU per frame than AF_PACKET and
/// less than half its release error's tail (docs/benchmarks.md, section f).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapturePath {
    /// Packet sockets: `recvmmsg` with kernel receive stamps, `sendmmsg` past the qdisc.
    AfPacket,
    /// AF_XDP sockets in copy mode, with an XDP program on each of the emulator's interfaces.
    #[default]
    AfXdp,
}

impl CapturePath {
    pub const NAMES: &'static [&'static str] = &["af_packet", "af_xdp"];
}

impl FromStr for CapturePath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "af_packet" => Ok(CapturePath::AfPacket),
            "af_xdp" => Ok(CapturePath::AfXdp),
            _ => Err(format!(
                "unknown capture path {s:?} (use {})",
                CapturePath::NAMES.join(" or ")
            )),
        }
    }
}

impl fmt::Display for CapturePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapturePath::AfPacket => "af_packet",
            CapturePath::AfXdp => "af_xdp",
        })
    }
}

/// Where a direction's frames come in.
pub enum Ingress {
    Packet {
        socket: FrameSocket,
        batch: RecvBatch,
        /// The kernel's count of frames its socket buffer dropped.
        overflow: u64,
    },
    Xdp(XdpReceiver),
}

/// One frame read: its bytes behind a `virtio_net_hdr` (in two parts when the capture path
/// has no header of its own) and when it arrived.
pub struct Arrival<'a> {
    pub parts: [&'a [u8]; 2],
    /// CLOCK_MONOTONIC ns; `None` when the kernel gave no stamp.
    pub at_ns: Option<u64>,
    /// Its transport checksum may be still to compute (see [`crate::checksum`]).
    pub needs_checksum: bool,
}

impl Ingress {
    /// A packet socket on `ifindex`, with kernel receive stamps and drop counts.
    pub fn packet(ifindex: u32) -> io::Result<Ingress> {
        let socket = FrameSocket::open(ifindex, true)?;
        enable_rx_timestamps(&socket)?;
        enable_rxq_ovfl(&socket)?;
        Ok(Ingress::Packet {
            socket,
            batch: RecvBatch::new(BATCH, MAX_FRAME),
            overflow: 0,
        })
    }

    /// Reads the frames waiting, at most [`BATCH`], without blocking; how many. They stay
    /// readable with [`Ingress::arrival`] until the next call.
    pub fn receive(&mut self) -> io::Result<usize> {
        match self {
            Ingress::Packet {
                socket,
                batch,
                overflow,
            } => {
                let n = socket.receive(batch)?;
                if let Some(d) = (0..n).rev().find_map(|i| batch.meta(i).rxq_drops) {
                    *overflow = u64::from(d);
                }
                Ok(n)
            }
            Ingress::Xdp(rx) => Ok(rx.receive(BATCH)),
        }
    }

    /// Frame `i` of the last [`Ingress::receive`]; `realtime_offset_ns` converts the packet
    /// socket's CLOCK_REALTIME stamps.
    pub fn arrival(&self, i: usize, realtime_offset_ns: i64) -> Arrival<'_> {
        match self {
            Ingress::Packet { batch, .. } => Arrival {
                parts: [batch.payload(i), &[]],
                at_ns: batch
                    .meta(i)
                    .kernel_rx_ns
                    .map(|rt| (rt as i64).saturating_sub(realtime_offset_ns).max(0) as u64),
                needs_checksum: false,
            },
            Ingress::Xdp(rx) => Arrival {
                parts: [&PLAIN_VNET_HDR, rx.frame(i)],
                at_ns: rx.arrival_ns(i),
                needs_checksum: true,
            },
        }
    }

    /// Frames the kernel dropped before the emulator could read them, so far.
    pub fn overflow(&self) -> u64 {
        match self {
            Ingress::Packet { overflow, .. } => *overflow,
            Ingress::Xdp(rx) => rx.dropped().unwrap_or(0),
        }
    }
}

impl AsFd for Ingress {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Ingress::Packet { socket, .. } => socket.as_fd(),
            Ingress::Xdp(rx) => rx.as_fd(),
        }
    }
}

/// Where a direction's frames leave.
pub enum Egress {
    Packet(FrameSocket),
    Xdp(XdpSender),
}

impl Egress {
    /// A send-only packet socket on `ifindex`.
    pub fn packet(ifindex: u32) -> io::Result<Egress> {
        FrameSocket::open(ifindex, false).map(Egress::Packet)
    }

    /// Sends frames (each behind its `virtio_net_hdr`) in order, without waiting.
    pub fn send_batch(&mut self, frames: &mut [&[u8]]) -> BatchSent {
        match self {
            Egress::Packet(socket) => socket.send_batch(frames),
            Egress::Xdp(tx) => {
                for f in frames.iter_mut() {
                    *f = f.get(VNET_HDR_LEN..).unwrap_or_default();
                }
                tx.send_batch(frames)
            }
        }
    }
}

/// Both ends of each of a link's two directions on the capture path: `(ingress, egress)`
/// for `a → b`, then for `b → a`. AF_XDP has one socket per interface, whose receiving
/// half serves the direction coming in there and whose sending half the one going out.
pub fn open_link(
    path: CapturePath,
    iface_a: u32,
    iface_b: u32,
) -> io::Result<[(Ingress, Egress); 2]> {
    match path {
        CapturePath::AfPacket => Ok([
            (Ingress::packet(iface_a)?, Egress::packet(iface_b)?),
            (Ingress::packet(iface_b)?, Egress::packet(iface_a)?),
        ]),
        CapturePath::AfXdp => {
            let (rx_a, tx_a) = flowlab_sys::xdp::open(iface_a)?;
            let (rx_b, tx_b) = flowlab_sys::xdp::open(iface_b)?;
            Ok([
                (Ingress::Xdp(rx_a), Egress::Xdp(tx_b)),
                (Ingress::Xdp(rx_b), Egress::Xdp(tx_a)),
            ])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_paths_by_name() {
        for name in CapturePath::NAMES {
            assert_eq!(name.parse::<CapturePath>().unwrap().to_string(), *name);
        }
        assert_eq!(CapturePath::default(), CapturePath::AfXdp);
        let e = "tun".parse::<CapturePath>().unwrap_err();
        assert_eq!(e, "unknown capture path \"tun\" (use af_packet or af_xdp)");
    }
}
