//! Whole Ethernet frames through an AF_XDP socket on one interface's queue 0, in copy mode
//! (what a veth allows): the kernel copies each received frame into a frame of the socket's
//! UMEM and hands it over on the rx ring, with no system call; frames to send are written to
//! UMEM frames, queued on the tx ring, and sent by one `sendto` kick per batch.
//!
//! Opening the socket attaches a small XDP program ([`bpf`]) to the interface that
//! redirects every frame to it, through a BPF link: when the socket is dropped, or the
//! process dies, the kernel detaches the program, so nothing outlives a crash. While it is
//! attached, the interface's own stack sees no frame.
//!
//! The socket splits into a [`XdpReceiver`] (fill and rx rings) and a [`XdpSender`] (tx and
//! completion rings), each over its own half of the UMEM, so that two threads can use the
//! two directions of one interface.

mod bpf;
mod ring;

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use crate::packet::BatchSent;
use bpf::{Attachment, StampPlace, STAMP_LEN};
use ring::{Mapping, Ring};

/// Bytes of one UMEM frame (a page: aligned mode's largest).
const FRAME_SIZE: usize = 4096;
/// Entries of each ring, and UMEM frames of each half.
const RING_SIZE: u32 = 2048;
/// The kernel leaves this much room in front of a received frame (XDP_PACKET_HEADROOM).
const HEADROOM: usize = 256;
/// The longest frame (from the Ethernet header on) a UMEM frame holds.
pub const MAX_FRAME: usize = FRAME_SIZE - HEADROOM;
/// `sendto` kicks per frame batch at most: the kernel sends 32 frames per kick in copy mode.
const KICKS_PER_FRAME: usize = 32;

/// The parts both halves use: the link (dropped first, detaching the program), the socket,
/// and the UMEM.
struct Shared {
    attachment: Attachment,
    fd: OwnedFd,
    umem: Mapping,
}

impl Shared {
    /// Bytes of stamp at the start of a received frame's descriptor.
    fn stamp_in_frame(&self) -> usize {
        match self.attachment.place {
            StampPlace::Metadata => 0,
            StampPlace::Head => STAMP_LEN,
        }
    }

    fn frame(&self, addr: u64, len: usize) -> *mut u8 {
        debug_assert!(addr as usize + len <= self.umem.len());
        self.umem.as_ptr().wrapping_add(addr as usize)
    }
}

/// Opens an AF_XDP socket on queue 0 of interface `ifindex` (copy mode) and attaches the
/// program that redirects the interface's frames to it. Needs CAP_NET_ADMIN, CAP_NET_RAW
/// and CAP_BPF; fails with a one-line reason when the kernel lacks AF_XDP or BPF, or the
/// interface already has an XDP program.
pub fn open(ifindex: u32) -> io::Result<(XdpReceiver, XdpSender)> {
    let fd = socket()?;
    let umem = Mapping::anonymous(FRAME_SIZE * 2 * RING_SIZE as usize)?;
    let reg = libc::xdp_umem_reg {
        addr: umem.as_ptr() as u64,
        len: umem.len() as u64,
        chunk_size: FRAME_SIZE as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    set(fd.as_fd(), libc::XDP_UMEM_REG, &reg)?;
    for ring in [
        libc::XDP_UMEM_FILL_RING,
        libc::XDP_UMEM_COMPLETION_RING,
        libc::XDP_RX_RING,
        libc::XDP_TX_RING,
    ] {
        set(fd.as_fd(), ring, &(RING_SIZE as libc::c_int))?;
    }
    let off = offsets(fd.as_fd())?;
    let b = fd.as_fd();
    let mut fill = Ring::map(b, &off.fr, RING_SIZE, libc::XDP_UMEM_PGOFF_FILL_RING)?;
    let completion = Ring::map(b, &off.cr, RING_SIZE, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
    let rx = Ring::map(b, &off.rx, RING_SIZE, libc::XDP_PGOFF_RX_RING as u64)?;
    let tx = Ring::map(b, &off.tx, RING_SIZE, libc::XDP_PGOFF_TX_RING as u64)?;
    // The first half of the UMEM receives, the second sends.
    for k in 0..RING_SIZE as u64 {
        fill.push(k * FRAME_SIZE as u64);
    }
    fill.submit();
    bind(fd.as_fd(), ifindex)?;
    let attachment = Attachment::attach(ifindex, fd.as_fd()).map_err(bpf_reason)?;
    let shared = Arc::new(Shared {
        attachment,
        fd,
        umem,
    });
    let free = (RING_SIZE as u64..2 * RING_SIZE as u64)
        .map(|k| k * FRAME_SIZE as u64)
        .collect();
    Ok((
        XdpReceiver {
            shared: shared.clone(),
            fill,
            rx,
            held: 0,
        },
        XdpSender {
            shared,
            tx,
            completion,
            free,
        },
    ))
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: socket() takes plain integers and returns a new descriptor or -1.
    let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        let e = io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => "the kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)",
            Some(libc::EPERM) | Some(libc::EACCES) => "an AF_XDP socket needs CAP_NET_RAW",
            _ => "opening an AF_XDP socket",
        };
        return Err(io::Error::new(e.kind(), format!("{why}: {e}")));
    }
    // SAFETY: `raw` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// The bpf(2) failures a user can act on, in one line.
fn bpf_reason(e: io::Error) -> io::Error {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) => " (needs CAP_BPF and CAP_NET_ADMIN)",
        Some(libc::ENOSYS) => " (the kernel has no bpf(2): CONFIG_BPF_SYSCALL)",
        Some(libc::EBUSY) | Some(libc::EEXIST) => " (the interface already has an XDP program)",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{e}{hint}"))
}

fn set<T>(fd: BorrowedFd<'_>, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live T and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn get<T>(fd: BorrowedFd<'_>, name: libc::c_int, value: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a live, writable T and `len` is its size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (value as *mut T).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn offsets(fd: BorrowedFd<'_>) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: the struct is plain integers; all-zero is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    get(fd, libc::XDP_MMAP_OFFSETS, &mut off)?;
    Ok(off)
}

fn bind(fd: BorrowedFd<'_>, ifindex: u32) -> io::Result<()> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: libc::XDP_COPY,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: 0,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `sxdp` is a valid sockaddr_xdp and the length matches it.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sxdp as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("binding the AF_XDP socket: {e}"),
        ));
    }
    Ok(())
}

/// The receiving half: frames the interface received.
pub struct XdpReceiver {
    shared: Arc<Shared>,
    fill: Ring<u64>,
    rx: Ring<libc::xdp_desc>,
    /// Frames read by the last [`receive`](XdpReceiver::receive), ours until the next.
    held: u32,
}

impl XdpReceiver {
    /// Gives the frames of the last call back to the kernel, then takes the frames waiting
    /// (at most `max`) without blocking or a system call; how many. Until the next call,
    /// [`frame`](XdpReceiver::frame) and [`arrival_ns`](XdpReceiver::arrival_ns) read them.
    pub fn receive(&mut self, max: usize) -> usize {
        self.give_back();
        self.held = self.rx.available().min(max as u32);
        self.held as usize
    }

    /// Received frame `i` (below what [`receive`](XdpReceiver::receive) returned), from its
    /// Ethernet header on.
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.held as usize, "frame {i} of {}", self.held);
        let desc = self.rx.peek(i as u32);
        let skip = self.shared.stamp_in_frame();
        let len = (desc.len as usize).min(MAX_FRAME).saturating_sub(skip);
        let addr = desc.addr + skip as u64;
        // SAFETY: the kernel wrote `desc.len` bytes at `desc.addr` and leaves the frame alone
        // until it goes back on the fill ring, which needs `&mut self`.
        unsafe { std::slice::from_raw_parts(self.shared.frame(addr, len), len) }
    }

    /// When frame `i` reached the interface's XDP hook (CLOCK_MONOTONIC ns), or `None` if
    /// the program could not stamp it.
    pub fn arrival_ns(&self, i: usize) -> Option<u64> {
        assert!(i < self.held as usize, "frame {i} of {}", self.held);
        let stamp = self.stamp(self.rx.peek(i as u32).addr);
        // SAFETY: the stamp lies in the frame's headroom or its first bytes, ours while the
        // frame is held.
        let at = unsafe { stamp.read_unaligned() };
        (at != 0).then_some(at)
    }

    /// A received frame's stamp: in the metadata before `addr`, or the 8 bytes at it.
    fn stamp(&self, addr: u64) -> *mut u64 {
        let at = self.shared.frame(addr, 0);
        match self.shared.attachment.place {
            StampPlace::Metadata => at.wrapping_sub(STAMP_LEN).cast(),
            StampPlace::Head => at.cast(),
        }
    }

    fn give_back(&mut self) {
        if self.held == 0 {
            return;
        }
        for k in 0..self.held {
            let addr = self.rx.peek(k).addr;
            // SAFETY: as in `arrival_ns`; cleared so that a frame the program cannot stamp
            // does not show an old time.
            unsafe { self.stamp(addr).write_unaligned(0) };
            self.fill.push(addr & !(FRAME_SIZE as u64 - 1));
        }
        self.rx.release(self.held);
        self.fill.submit();
        self.held = 0;
    }

    /// Frames the kernel could not hand over: no free frame or too long (`rx_dropped`,
    /// which includes the fill ring's empty events), or the rx ring full.
    pub fn dropped(&self) -> io::Result<u64> {
        // SAFETY: the struct is plain integers; all-zero is valid.
        let mut s: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        get(self.shared.fd.as_fd(), libc::XDP_STATISTICS, &mut s)?;
        Ok(s.rx_dropped + s.rx_ring_full)
    }
}

/// Readable (for poll) when frames wait on the rx ring.
impl AsFd for XdpReceiver {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.fd.as_fd()
    }
}

/// The sending half: frames out of the interface.
pub struct XdpSender {
    shared: Arc<Shared>,
    tx: Ring<libc::xdp_desc>,
    completion: Ring<u64>,
    /// UMEM frames of this half not in the kernel's hands.
    free: Vec<u64>,
}

impl XdpSender {
    /// Sends whole frames (from the Ethernet header on) in order, without waiting: each is
    /// copied into a free UMEM frame and queued, then one kick per 32 frames sends them.
    /// Frames are counted as not sent when no UMEM frame or ring entry is free (the kernel
    /// still holds the earlier ones), as failed when too long for a UMEM frame.
    pub fn send_batch(&mut self, frames: &[&[u8]]) -> BatchSent {
        self.reclaim();
        let mut out = BatchSent::default();
        for (k, frame) in frames.iter().enumerate() {
            if frame.len() > MAX_FRAME {
                out.failed += 1;
                continue;
            }
            let Some(addr) = (self.tx.free() > 0).then(|| self.free.pop()).flatten() else {
                out.queue_full += frames.len() - k;
                break;
            };
            let to = self.shared.frame(addr, frame.len());
            // SAFETY: `addr` is a free frame of this half (the kernel returned it), at least
            // MAX_FRAME long; nobody else writes it until the kernel completes it.
            unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), to, frame.len()) };
            self.tx.push(libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            });
            out.sent += 1;
        }
        if out.sent > 0 {
            self.tx.submit();
            self.kick(out.sent);
        }
        out
    }

    /// Makes the kernel send what the tx ring holds (32 frames per `sendto` in copy mode).
    fn kick(&mut self, queued: usize) {
        for _ in 0..queued.div_ceil(KICKS_PER_FRAME) + 1 {
            // SAFETY: a zero-length sendto on our socket, no buffers involved.
            let rc = unsafe {
                let fd = self.shared.fd.as_raw_fd();
                libc::sendto(
                    fd,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            let again = rc >= 0
                || matches!(
                    io::Error::last_os_error().raw_os_error(),
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                );
            if !again || self.tx.pending() == 0 {
                return;
            }
        }
    }

    /// Takes back the frames the kernel has sent.
    fn reclaim(&mut self) {
        let n = self.completion.available();
        if n > 0 {
            self.free.extend((0..n).map(|k| self.completion.peek(k)));
            self.completion.release(n);
        }
    }
}

#[cfg(test)]
mod tests;
