//! Which of a role's sockets have data: one blocking socket, a busy-polled set, or an epoll
//! set. One thread serves all flows of a role this way.

use std::io;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};

use flowlab_sys::poll::Poller;
use flowlab_sys::raw::RawSocket;
use flowlab_sys::timestamping::TxStamp;
use flowlab_sys::udp;

use crate::POLL_PERIOD;

/// Sockets a role reads from.
pub trait DataSocket: AsFd {
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()>;
}

/// Sockets that carry test datagrams: UDP, or native link-layer frames (`--proto raw`).
/// Each is connected to its one peer.
pub trait DatagramSocket: DataSocket + DatagramSend {}

impl<S: DataSocket + DatagramSend> DatagramSocket for S {}

/// The sending half of a datagram socket: all a sender uses, so a test double can stand in.
pub trait DatagramSend: Sync {
    /// Sends the datagrams; how many went. `nowait`: never block for buffer space.
    fn send_frames(&self, frames: &[&[u8]], nowait: bool) -> io::Result<usize>;
    /// Whether [`DatagramSend::send_segments`] can send a train in one call (UDP GSO).
    fn gso_supported(&self) -> bool;
    /// Sends `buf` as datagrams of `segment` bytes in one call; bytes sent.
    fn send_segments(&self, buf: &[u8], segment: u16, nowait: bool) -> io::Result<usize>;
    /// Whether the socket asks the fq qdisc to send each datagram at a time on
    /// CLOCK_MONOTONIC (SO_TXTIME, set up by `configure_udp`).
    fn kernel_timed(&self) -> bool;
    /// Sends one datagram to leave at `txtime_ns` (CLOCK_MONOTONIC); bytes sent.
    fn send_at(&self, frame: &[u8], txtime_ns: u64, nowait: bool) -> io::Result<usize>;
    /// Reads a waiting datagram without blocking (a reverse sender's acknowledgements).
    /// Native frames need none: they go only to a verified neighbour, so they read nothing.
    fn recv_nowait(&self, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::ErrorKind::WouldBlock.into())
    }
    /// Appends the kernel's transmit timestamps queued on the socket (`--tx-timestamps`).
    fn tx_stamps(&self, out: &mut Vec<TxStamp>) -> io::Result<()>;
    /// The unconnected socket this flow shares with others, and the flow's peer: the
    /// datagrams of all its flows can leave in one call (see `udp::shared`).
    fn shared(&self) -> Option<(BorrowedFd<'_>, SocketAddr)> {
        None
    }
    /// The packet socket and the flow's frame headers, where its datagrams leave as whole
    /// frames (`--packet-socket`, on a shared socket only).
    fn frame(
        &self,
    ) -> Option<(
        &flowlab_sys::packet::FrameSocket,
        &flowlab_wire::udp_frame::UdpFrameHeader,
    )> {
        None
    }
}

impl DatagramSend for UdpSocket {
    fn send_frames(&self, frames: &[&[u8]], nowait: bool) -> io::Result<usize> {
        if nowait {
            udp::send_batch_nowait(self, frames)
        } else {
            udp::send_batch(self, frames)
        }
    }
    fn gso_supported(&self) -> bool {
        udp::gso_supported(self)
    }
    fn send_segments(&self, buf: &[u8], segment: u16, nowait: bool) -> io::Result<usize> {
        if nowait {
            udp::send_gso_nowait(self, buf, segment)
        } else {
            udp::send_gso(self, buf, segment)
        }
    }
    fn kernel_timed(&self) -> bool {
        udp::txtime_clock(self) == Some(udp::TxClock::Monotonic)
    }
    fn send_at(&self, frame: &[u8], txtime_ns: u64, nowait: bool) -> io::Result<usize> {
        udp::send_at(self, frame, txtime_ns, nowait)
    }
    fn recv_nowait(&self, buf: &mut [u8]) -> io::Result<usize> {
        udp::recv_nowait(self, buf)
    }
    fn tx_stamps(&self, out: &mut Vec<TxStamp>) -> io::Result<()> {
        flowlab_sys::timestamping::read_tx_timestamps(self, out).map(drop)
    }
}

impl DataSocket for RawSocket {
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        RawSocket::set_nonblocking(self, on)
    }
    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        RawSocket::set_read_timeout(self, t)
    }
}

impl DatagramSend for RawSocket {
    fn send_frames(&self, frames: &[&[u8]], nowait: bool) -> io::Result<usize> {
        self.send_batch(frames, nowait)
    }
    fn gso_supported(&self) -> bool {
        false
    }
    fn send_segments(&self, _: &[u8], _: u16, _: bool) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no segmentation offload for raw frames",
        ))
    }
    fn kernel_timed(&self) -> bool {
        false
    }
    fn send_at(&self, _: &[u8], _: u64, _: bool) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "no transmit times for raw frames",
        ))
    }
    fn tx_stamps(&self, out: &mut Vec<TxStamp>) -> io::Result<()> {
        flowlab_sys::timestamping::read_tx_timestamps(self, out).map(drop)
    }
}

impl DataSocket for UdpSocket {
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        UdpSocket::set_nonblocking(self, on)
    }
    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        UdpSocket::set_read_timeout(self, t)
    }
}

impl DataSocket for TcpStream {
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        TcpStream::set_nonblocking(self, on)
    }
    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }
}

enum Mode {
    /// One socket: a blocking read with a timeout is the lowest-latency wait.
    Blocking,
    /// Spin over non-blocking sockets: no wake-up latency, one core busy.
    Spin,
    /// Wait on an epoll set; with a period, sleep that long and take what is ready instead of
    /// waking per datagram.
    Epoll(Poller, Vec<(u64, bool, bool)>, Option<std::time::Duration>),
}

pub(crate) struct Readiness {
    count: usize,
    mode: Mode,
}

/// Reads one socket drains at most this many times per turn, so flows share the thread.
const DRAIN_TURNS: usize = 16;

impl Readiness {
    pub(crate) fn new<S: DataSocket>(socks: &[S], busy_poll: bool) -> io::Result<Readiness> {
        let mode = if busy_poll {
            Mode::Spin
        } else if socks.len() == 1 {
            Mode::Blocking
        } else {
            Self::epoll(socks, None)?
        };
        Self::with_mode(socks, mode)
    }

    /// Reads every `period` instead of waking on each datagram: a receiver woken per
    /// datagram (or per GRO train) makes the sending core pay for the wake-up in its softirq
    /// (veth delivers there), which slowed 1000 sparse flows' sends by milliseconds and a
    /// max-rate GSO sender by a fifth. Only for receivers whose arrival times are the
    /// kernel's receive stamps: reading late then moves no measurement.
    pub(crate) fn coalesced<S: DataSocket>(
        socks: &[S],
        period: std::time::Duration,
    ) -> io::Result<Readiness> {
        Self::with_mode(socks, Self::epoll(socks, Some(period))?)
    }

    fn epoll<S: DataSocket>(socks: &[S], period: Option<std::time::Duration>) -> io::Result<Mode> {
        let poller = Poller::new()?;
        for (i, s) in socks.iter().enumerate() {
            poller.add(s.as_fd(), i as u64, true, false)?;
        }
        Ok(Mode::Epoll(poller, Vec::with_capacity(socks.len()), period))
    }

    fn with_mode<S: DataSocket>(socks: &[S], mode: Mode) -> io::Result<Readiness> {
        for s in socks {
            match mode {
                Mode::Blocking => {
                    s.set_nonblocking(false)?;
                    s.set_read_timeout(Some(POLL_PERIOD))?;
                }
                _ => s.set_nonblocking(true)?,
            }
        }
        Ok(Readiness {
            count: socks.len(),
            mode,
        })
    }

    /// Calls `read(i)` for sockets that have data, waiting at most [`POLL_PERIOD`]; `read`
    /// returns how many messages it took (0: nothing more now). A refused-port notice from an
    /// earlier send (ICMP) is not a read error.
    pub(crate) fn each_ready(
        &mut self,
        mut read: impl FnMut(usize) -> io::Result<usize>,
    ) -> io::Result<()> {
        let mut drain = |i: usize, turns: usize| -> io::Result<()> {
            for _ in 0..turns {
                match read(i) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        };
        match &mut self.mode {
            Mode::Blocking => drain(0, 1),
            Mode::Spin => (0..self.count).try_for_each(|i| drain(i, DRAIN_TURNS)),
            Mode::Epoll(poller, events, period) => {
                let timeout = match period {
                    Some(period) => {
                        std::thread::sleep(*period);
                        std::time::Duration::ZERO
                    }
                    None => POLL_PERIOD,
                };
                poller.wait(events, Some(timeout))?;
                events
                    .iter()
                    .try_for_each(|&(token, _, _)| drain(token as usize, DRAIN_TURNS))
            }
        }
    }
}
