//! UDP fast path: socket options, kernel receive timestamps, receive-queue
//! drop counters and batched send/receive (sendmmsg/recvmmsg).

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use crate::cmsg::{self, read_ne, CmsgBuf};
use crate::sockopt::{get_bytes, get_int, set_bytes, set_int};

/// Kernel uapi value; the kernel may answer SO_TIMESTAMPNS_OLD requests on
/// some 32-bit ABIs with this type too.
const SO_TIMESTAMPNS_NEW: libc::c_int = 64;
/// Bytes reserved per message for the source address (sockaddr_storage).
const NAME_LEN: usize = std::mem::size_of::<libc::sockaddr_storage>();
/// Bytes reserved per message for control messages: timestamp + ovfl
/// need ~40 bytes; extra room so other cmsgs a caller enables do not
/// truncate ours.
const CONTROL_LEN: usize = 256;
/// Kernel limit on messages per recvmmsg/sendmmsg call (UIO_MAXIOV).
const MAX_BATCH: usize = 1024;
/// Kernel uapi value of SO_TIMESTAMPING_NEW (the cmsg type used on time64 ABIs).
const SO_TIMESTAMPING_NEW: libc::c_int = 65;

/// Enables SO_TIMESTAMPNS: a CLOCK_REALTIME ns kernel receive stamp per datagram.
pub fn enable_rx_timestamps(fd: impl AsFd) -> io::Result<()> {
    set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Asks for the TTL (IPv4, IP_RECVTTL) and hop limit (IPv6, IPV6_RECVHOPLIMIT) of each
/// received datagram, in [`RecvMeta::ttl`]. On an IPv6 socket both are asked, so IPv4
/// datagrams of a dual-stack socket carry theirs too; fails only if neither can be.
pub fn enable_recv_ttl(fd: impl AsFd) -> io::Result<()> {
    let fd = fd.as_fd();
    let v4 = set_int(fd, libc::IPPROTO_IP, libc::IP_RECVTTL, 1);
    let v6 = set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1);
    v4.or(v6)
}

/// Enables SO_RXQ_OVFL: each datagram carries the socket's cumulative
/// receive-buffer drop count, so receiver-side loss can be told apart from
/// network loss.
pub fn enable_rxq_ovfl(fd: impl AsFd) -> io::Result<()> {
    set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1)
}

/// The socket's receive-buffer drops so far (SO_MEMINFO's SK_MEMINFO_DROPS, the counter
/// SO_RXQ_OVFL reports): read at the end, it also counts drops no later datagram carried.
/// It counts what the kernel dropped: one buffer each, which holds a train under GRO.
pub fn socket_drops(fd: impl AsFd) -> io::Result<u64> {
    const WORD: usize = std::mem::size_of::<u32>();
    let at = usize::try_from(libc::SK_MEMINFO_DROPS).unwrap_or(usize::MAX);
    let mut info = [0u8; 16 * WORD];
    let len = get_bytes(fd.as_fd(), libc::SOL_SOCKET, libc::SO_MEMINFO, &mut info)?;
    info[..len]
        .get(at * WORD..(at + 1) * WORD)
        .and_then(|b| <[u8; WORD]>::try_from(b).ok())
        .map(|b| u64::from(u32::from_ne_bytes(b)))
        .ok_or_else(|| io::Error::new(io::ErrorKind::Unsupported, "SO_MEMINFO has no drop count"))
}

fn set_buf(
    fd: BorrowedFd<'_>,
    force: libc::c_int,
    plain: libc::c_int,
    size: usize,
) -> io::Result<()> {
    let v = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // FORCE bypasses net.core.[rw]mem_max but needs CAP_NET_ADMIN.
    set_int(fd, libc::SOL_SOCKET, force, v).or_else(|_| set_int(fd, libc::SOL_SOCKET, plain, v))
}

/// Sets send/receive buffer sizes, trying SO_*BUFFORCE first (root, ignores
/// the sysctl caps) and falling back to SO_SNDBUF/SO_RCVBUF. The kernel
/// doubles the value for bookkeeping; see [`buffer_sizes`].
pub fn set_buffer_sizes(fd: impl AsFd, send: Option<usize>, recv: Option<usize>) -> io::Result<()> {
    let fd = fd.as_fd();
    if let Some(n) = send {
        set_buf(fd, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, n)?;
    }
    if let Some(n) = recv {
        set_buf(fd, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, n)?;
    }
    Ok(())
}

/// Effective (send, recv) buffer sizes as reported by the kernel (i.e.
/// including its 2× overhead allowance).
pub fn buffer_sizes(fd: impl AsFd) -> io::Result<(usize, usize)> {
    let fd = fd.as_fd();
    let snd = get_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF)?;
    let rcv = get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)?;
    Ok((
        usize::try_from(snd).unwrap_or(0),
        usize::try_from(rcv).unwrap_or(0),
    ))
}

/// Per-datagram metadata from a [`recv_batch`] call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecvMeta {
    /// Bytes stored in the payload (at most the batch's `max_len`).
    pub len: usize,
    /// Kernel CLOCK_REALTIME receive stamp, ns (needs [`enable_rx_timestamps`],
    /// or software RX stamps via [`crate::timestamping::enable_timestamping`]).
    pub kernel_rx_ns: Option<u64>,
    /// NIC hardware receive stamp (SCM_TIMESTAMPING raw hardware), ns in the
    /// NIC clock's timescale; needs RX_HARDWARE|RAW_HARDWARE and a NIC with
    /// hardware timestamping enabled (never on lo or veth).
    pub hw_rx_ns: Option<u64>,
    /// Cumulative receive-buffer drops at the time this datagram was queued
    /// (needs [`enable_rxq_ovfl`]). The kernel omits it while the count is 0,
    /// so `None` means "no drops yet" once enabled.
    pub rxq_drops: Option<u32>,
    /// With [`enable_gro`]: the payload holds several datagrams coalesced by
    /// the kernel, each `gro_segment` bytes (the last may be shorter); the
    /// caller splits them. `None` means one datagram.
    pub gro_segment: Option<u16>,
    /// The datagram was larger than `max_len` and was cut (MSG_TRUNC).
    pub truncated: bool,
    /// Its IP TTL or hop limit on arrival (needs [`enable_recv_ttl`]).
    pub ttl: Option<u8>,
    /// Sender address.
    pub source: Option<SocketAddr>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    len: usize,
    flags: libc::c_int,
    control_len: usize,
    name_len: usize,
}

/// Reusable buffers for recvmmsg: `batch` messages of up to `max_len` bytes,
/// with control buffers for timestamp + ovfl cmsgs. Allocate once, reuse for
/// every call so the receive path does not allocate.
///
/// With [`enable_gro`] one message can carry up to 64 KiB of coalesced
/// datagrams, so use `max_len` >= 65535 (else they arrive truncated).
pub struct RecvBatch {
    max_len: usize,
    payload: Vec<u8>,
    names: Vec<u8>,
    control: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    slots: Vec<Slot>,
    filled: usize,
}

// SAFETY: the raw pointers inside `iovs`/`hdrs` only ever point into this
// struct's own heap buffers, are rewritten before every syscall, and are never
// dereferenced by Rust code, so moving or sharing the struct is sound.
unsafe impl Send for RecvBatch {}
// SAFETY: as above; `&self` methods only read the plain byte/slot vectors.
unsafe impl Sync for RecvBatch {}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("capacity", &self.hdrs.len())
            .field("max_len", &self.max_len)
            .field("filled", &self.filled)
            .finish()
    }
}

impl RecvBatch {
    /// `batch` is clamped to 1..=1024 and `max_len` to at least 1.
    pub fn new(batch: usize, max_len: usize) -> Self {
        let batch = batch.clamp(1, MAX_BATCH);
        let max_len = max_len.max(1);
        let empty_iov = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        // SAFETY: mmsghdr is integers and raw pointers; all-zero (null) is valid.
        let empty_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        RecvBatch {
            max_len,
            payload: vec![0; batch.saturating_mul(max_len)],
            names: vec![0; batch * NAME_LEN],
            control: vec![0; batch * CONTROL_LEN],
            iovs: vec![empty_iov; batch],
            hdrs: vec![empty_hdr; batch],
            slots: vec![Slot::default(); batch],
            filled: 0,
        }
    }

    /// Number of messages filled by the last [`recv_batch`].
    pub fn len(&self) -> usize {
        self.filled
    }

    /// True when the last [`recv_batch`] filled nothing.
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Maximum messages per call.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Maximum stored bytes per message.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Payload of message `i`; empty if `i >= len()`.
    pub fn payload(&self, i: usize) -> &[u8] {
        let Some(slot) = self.slots.get(i).filter(|_| i < self.filled) else {
            return &[];
        };
        let start = i * self.max_len;
        let end = start + slot.len.min(self.max_len);
        self.payload.get(start..end).unwrap_or(&[])
    }

    /// Metadata of message `i`; all-default if `i >= len()`.
    pub fn meta(&self, i: usize) -> RecvMeta {
        let Some(slot) = self.slots.get(i).filter(|_| i < self.filled) else {
            return RecvMeta::default();
        };
        let cstart = i * CONTROL_LEN;
        let control = self
            .control
            .get(cstart..cstart + slot.control_len.min(CONTROL_LEN))
            .unwrap_or(&[]);
        let c = parse_cmsgs(control);
        let nstart = i * NAME_LEN;
        let name = self
            .names
            .get(nstart..nstart + slot.name_len.min(NAME_LEN))
            .unwrap_or(&[]);
        RecvMeta {
            len: slot.len.min(self.max_len),
            kernel_rx_ns: c.rx_ns,
            hw_rx_ns: c.hw_ns,
            rxq_drops: c.drops,
            gro_segment: c.gro,
            truncated: slot.flags & libc::MSG_TRUNC != 0,
            ttl: c.ttl,
            source: parse_sockaddr(name),
        }
    }

    /// Points every header at its own payload/name/control slice.
    fn prepare(&mut self) {
        self.filled = 0;
        let payload = self.payload.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        let control = self.control.as_mut_ptr();
        for (i, iov) in self.iovs.iter_mut().enumerate() {
            iov.iov_base = payload.wrapping_add(i * self.max_len).cast();
            iov.iov_len = self.max_len;
        }
        // Taken after the iovecs are written so no later borrow invalidates it.
        let iovs = self.iovs.as_mut_ptr();
        for (i, hdr) in self.hdrs.iter_mut().enumerate() {
            let m = &mut hdr.msg_hdr;
            m.msg_name = names.wrapping_add(i * NAME_LEN).cast();
            m.msg_namelen = NAME_LEN as libc::socklen_t;
            m.msg_iov = iovs.wrapping_add(i);
            m.msg_iovlen = 1;
            m.msg_control = control.wrapping_add(i * CONTROL_LEN).cast();
            m.msg_controllen = CONTROL_LEN as _;
            m.msg_flags = 0;
            hdr.msg_len = 0;
        }
    }
}

/// What [`parse_cmsgs`] found in one message's control buffer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RxCmsgs {
    /// SCM_TIMESTAMPNS, else SCM_TIMESTAMPING ts[0] (software).
    rx_ns: Option<u64>,
    /// SCM_TIMESTAMPING ts[2] (raw hardware).
    hw_ns: Option<u64>,
    drops: Option<u32>,
    gro: Option<u16>,
    /// IP_TTL or IPV6_HOPLIMIT.
    ttl: Option<u8>,
}

/// Extracts receive timestamps, the SO_RXQ_OVFL count and the UDP_GRO
/// segment size from a control buffer laid out as the kernel writes it.
/// Pure byte parsing: no alignment needs.
fn parse_cmsgs(buf: &[u8]) -> RxCmsgs {
    let mut out = RxCmsgs::default();
    let mut sw_stamp = None;
    for (level, ty, data) in cmsg::iter(buf) {
        if level == libc::SOL_SOCKET {
            match ty {
                t if t == libc::SCM_TIMESTAMPNS || t == SO_TIMESTAMPNS_NEW => {
                    out.rx_ns = cmsg::parse_timespec(data);
                }
                t if t == libc::SCM_TIMESTAMPING || t == SO_TIMESTAMPING_NEW => {
                    let (sw, hw) = cmsg::parse_scm_timestamping(data);
                    sw_stamp = sw;
                    out.hw_ns = hw;
                }
                t if t == libc::SO_RXQ_OVFL => {
                    out.drops = read_ne::<4>(data, 0).map(u32::from_ne_bytes);
                }
                _ => {}
            }
        } else if (level == libc::IPPROTO_IP && ty == libc::IP_TTL)
            || (level == libc::IPPROTO_IPV6 && ty == libc::IPV6_HOPLIMIT)
        {
            out.ttl = read_ne::<4>(data, 0)
                .map(i32::from_ne_bytes)
                .and_then(|v| u8::try_from(v).ok());
        } else if level == libc::SOL_UDP && ty == libc::UDP_GRO {
            out.gro = read_ne::<4>(data, 0)
                .map(i32::from_ne_bytes)
                .and_then(|v| u16::try_from(v).ok())
                .filter(|&v| v > 0);
        }
    }
    out.rx_ns = out.rx_ns.or(sw_stamp);
    out
}

/// Decodes a sockaddr_in / sockaddr_in6 written by the kernel.
fn parse_sockaddr(b: &[u8]) -> Option<SocketAddr> {
    let family = libc::c_int::from(u16::from_ne_bytes(read_ne::<2>(b, 0)?));
    let port = u16::from_be_bytes(read_ne::<2>(b, 2)?);
    match family {
        libc::AF_INET if b.len() >= 16 => {
            let ip = Ipv4Addr::from(read_ne::<4>(b, 4)?);
            Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
        }
        libc::AF_INET6 if b.len() >= 28 => {
            let flow = u32::from_be_bytes(read_ne::<4>(b, 4)?);
            let ip = Ipv6Addr::from(read_ne::<16>(b, 8)?);
            let scope = u32::from_ne_bytes(read_ne::<4>(b, 24)?);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, port, flow, scope)))
        }
        _ => None,
    }
}

/// recvmmsg with MSG_WAITFORONE: blocks until at least one datagram arrives
/// (then takes whatever else is already queued, up to the batch size), or
/// until the socket's SO_RCVTIMEO expires, which yields `Ok(0)`. EAGAIN on
/// a non-blocking socket and EINTR (so the caller can check the interrupt
/// flag) also yield `Ok(0)`. Works for IPv4 and IPv6 sockets.
pub fn recv_batch(fd: impl AsFd, batch: &mut RecvBatch) -> io::Result<usize> {
    batch.prepare();
    let vlen = batch.hdrs.len().min(MAX_BATCH) as libc::c_uint;
    // SAFETY: prepare() pointed every header at buffers owned by `batch`
    // with matching lengths; `batch` is mutably borrowed for the whole call,
    // so nothing else aliases them. A null timeout is allowed.
    let rc = unsafe {
        libc::recvmmsg(
            fd.as_fd().as_raw_fd(),
            batch.hdrs.as_mut_ptr(),
            vlen,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return match err.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
            _ => Err(err),
        };
    }
    let n = usize::try_from(rc).unwrap_or(0).min(batch.hdrs.len());
    // Field types differ across libc targets (e.g. msg_controllen on musl).
    #[allow(clippy::unnecessary_cast)]
    for (slot, hdr) in batch.slots.iter_mut().zip(&batch.hdrs).take(n) {
        *slot = Slot {
            len: hdr.msg_len as usize,
            flags: hdr.msg_hdr.msg_flags,
            control_len: hdr.msg_hdr.msg_controllen as usize,
            name_len: hdr.msg_hdr.msg_namelen as usize,
        };
    }
    batch.filled = n;
    Ok(n)
}

/// sendmmsg on a connected socket: sends as many of `packets` as the kernel
/// accepts and returns how many went. An error (EAGAIN, ENOBUFS, ...) is
/// returned only if nothing was sent; the caller classifies it.
pub fn send_batch(fd: impl AsFd, packets: &[&[u8]]) -> io::Result<usize> {
    send_batch_flags(fd.as_fd(), packets, &[], 0)
}

/// [`send_batch`] that never blocks (MSG_DONTWAIT), whatever the socket's
/// blocking mode: a paced sender sharing its socket with a blocking receiver
/// (loopback tests) must not wait for buffer space.
pub fn send_batch_nowait(fd: impl AsFd, packets: &[&[u8]]) -> io::Result<usize> {
    send_batch_flags(fd.as_fd(), packets, &[], libc::MSG_DONTWAIT)
}

/// sendmmsg on an unconnected socket, datagram `i` to `to[i]`: flows that
/// share one socket (and its source port) leave in one call. Returns as
/// [`send_batch`]; `to` must name one address per datagram. `nowait`: never
/// block for buffer space, as [`send_batch_nowait`].
pub fn send_batch_to(
    fd: impl AsFd,
    packets: &[&[u8]],
    to: &[SocketAddr],
    nowait: bool,
) -> io::Result<usize> {
    if to.len() != packets.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one destination per datagram",
        ));
    }
    let flags = if nowait { libc::MSG_DONTWAIT } else { 0 };
    send_batch_flags(fd.as_fd(), packets, to, flags)
}

/// sendmmsg in chunks of 64; `to` empty (a connected socket) or one address
/// per packet.
fn send_batch_flags(
    fd: BorrowedFd<'_>,
    packets: &[&[u8]],
    to: &[SocketAddr],
    flags: libc::c_int,
) -> io::Result<usize> {
    send_gathered(fd, packets.len(), |i| [packets[i]], to, flags)
}

/// sendmmsg of `count` messages in chunks of 64, message `i` gathered from the `P` parts
/// `parts(i)`; `to` empty (a connected socket) or one address per message. Returns how many
/// the kernel took; an error only if it took none.
pub(crate) fn send_gathered<'a, const P: usize>(
    fd: BorrowedFd<'_>,
    count: usize,
    parts: impl Fn(usize) -> [&'a [u8]; P],
    to: &[SocketAddr],
    flags: libc::c_int,
) -> io::Result<usize> {
    const CHUNK: usize = 64;
    let raw = fd.as_fd().as_raw_fd();
    let mut sent = 0usize;
    for first in (0..count).step_by(CHUNK) {
        let len = CHUNK.min(count - first);
        let names: Vec<socket2::SockAddr> =
            to.iter().skip(first).take(len).map(|&a| a.into()).collect();
        let mut iovs = [[libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; P]; CHUNK];
        // SAFETY: mmsghdr is integers and raw pointers; all-zero (null) is valid.
        let mut hdrs: [libc::mmsghdr; CHUNK] = unsafe { std::mem::zeroed() };
        for (k, iov) in iovs.iter_mut().take(len).enumerate() {
            for (v, part) in iov.iter_mut().zip(parts(first + k)) {
                // sendmmsg never writes through iov_base; *mut is only the C type.
                v.iov_base = part.as_ptr().cast_mut().cast();
                v.iov_len = part.len();
            }
        }
        for (k, hdr) in hdrs.iter_mut().take(len).enumerate() {
            hdr.msg_hdr.msg_iov = iovs[k].as_mut_ptr();
            hdr.msg_hdr.msg_iovlen = P;
            if let Some(name) = names.get(k) {
                // The kernel only reads the name; *mut is only the C type.
                hdr.msg_hdr.msg_name = name.as_ptr().cast_mut().cast();
                hdr.msg_hdr.msg_namelen = name.len();
            }
        }
        // SAFETY: the first `len` headers point at iovecs in `iovs`, which point at the
        // caller's live slices, and at names in `names`, alive until the call returns; the
        // kernel only reads them.
        let rc = unsafe { libc::sendmmsg(raw, hdrs.as_mut_ptr(), len as libc::c_uint, flags) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return if sent > 0 { Ok(sent) } else { Err(err) };
        }
        let n = usize::try_from(rc).unwrap_or(0);
        sent += n;
        if n < len {
            break;
        }
    }
    Ok(sent)
}

/// Linux UDP_MAX_SEGMENTS: the most segments one GSO send may carry.
pub const GSO_MAX_SEGMENTS: usize = 64;

/// True if the kernel knows UDP_SEGMENT (UDP GSO, Linux 4.18+).
///
/// Probes with getsockopt so the socket's default GSO size is left as is;
/// the kernel segments in software when the device cannot, so knowing the
/// option is enough.
pub fn gso_supported(fd: impl AsFd) -> bool {
    get_int(fd.as_fd(), libc::SOL_UDP, libc::UDP_SEGMENT).is_ok()
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Rejects what the kernel would reject with a bare EINVAL, with a clear message.
fn check_gso(len: usize, segment_size: u16) -> io::Result<()> {
    if segment_size == 0 {
        return Err(invalid("GSO segment size must be at least 1"));
    }
    if len.div_ceil(usize::from(segment_size)) > GSO_MAX_SEGMENTS {
        return Err(invalid("GSO send exceeds 64 segments"));
    }
    Ok(())
}

/// Control buffer big enough for one small cmsg (u16/u64 payload).
type SmallCmsg = CmsgBuf<32>;

fn gso_cmsg(segment_size: u16) -> SmallCmsg {
    let mut c = SmallCmsg::new();
    // A 2-byte payload always fits in 32 bytes.
    let _ = c.push(
        libc::SOL_UDP,
        libc::UDP_SEGMENT,
        &segment_size.to_ne_bytes(),
    );
    c
}

/// One sendmsg of `buf` with the given control bytes on a connected socket.
pub(crate) fn send_with_cmsg(
    fd: BorrowedFd<'_>,
    buf: &[u8],
    control: &[u8],
    flags: libc::c_int,
) -> io::Result<usize> {
    let mut iov = libc::iovec {
        // sendmsg never writes through iov_base; *mut is only the C type.
        iov_base: buf.as_ptr().cast_mut().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is integers and raw pointers; all-zero (null) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !control.is_empty() {
        // The kernel only reads the control buffer on send.
        msg.msg_control = control.as_ptr().cast_mut().cast();
        msg.msg_controllen = control.len() as _;
    }
    // SAFETY: `msg` points at `iov` (→ `buf`) and `control`, all live for the
    // call with matching lengths; the kernel only reads them.
    let rc = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, flags) };
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

/// UDP GSO: sends `buf` as back-to-back datagrams of `segment_size` bytes
/// (the last may be shorter) in one sendmsg with a UDP_SEGMENT cmsg, so the
/// stack is traversed once for up to 64 datagrams. The socket must be
/// connected. Returns bytes sent.
///
/// Kernel limits: at most [`GSO_MAX_SEGMENTS`] segments (checked here) and
/// `buf.len()` <= 65507 (IPv4) / 65527 (IPv6) bytes (EMSGSIZE otherwise);
/// each segment must fit the path MTU (EINVAL otherwise).
pub fn send_gso(fd: impl AsFd, buf: &[u8], segment_size: u16) -> io::Result<usize> {
    check_gso(buf.len(), segment_size)?;
    send_with_cmsg(fd.as_fd(), buf, gso_cmsg(segment_size).as_bytes(), 0)
}

/// [`send_gso`] that never blocks (MSG_DONTWAIT); see [`send_batch_nowait`].
pub fn send_gso_nowait(fd: impl AsFd, buf: &[u8], segment_size: u16) -> io::Result<usize> {
    check_gso(buf.len(), segment_size)?;
    send_with_cmsg(
        fd.as_fd(),
        buf,
        gso_cmsg(segment_size).as_bytes(),
        libc::MSG_DONTWAIT,
    )
}

/// [`send_gso`] for many buffers in sendmmsg calls, each `(buf,
/// segment_size)` with its own UDP_SEGMENT cmsg. Returns how many *messages*
/// (not segments) went; an error is returned only if none went. Every entry
/// is validated before anything is sent.
pub fn send_gso_batch(fd: impl AsFd, bufs: &[(&[u8], u16)]) -> io::Result<usize> {
    const CHUNK: usize = 64;
    for (buf, seg) in bufs {
        check_gso(buf.len(), *seg)?;
    }
    let raw = fd.as_fd().as_raw_fd();
    let mut sent = 0usize;
    for chunk in bufs.chunks(CHUNK) {
        let mut iovs = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; CHUNK];
        let mut controls = [SmallCmsg::new(); CHUNK];
        // SAFETY: mmsghdr is integers and raw pointers; all-zero (null) is valid.
        let mut hdrs: [libc::mmsghdr; CHUNK] = unsafe { std::mem::zeroed() };
        for ((iov, ctl), (buf, seg)) in iovs.iter_mut().zip(controls.iter_mut()).zip(chunk) {
            // sendmmsg never writes through iov_base; *mut is only the C type.
            iov.iov_base = buf.as_ptr().cast_mut().cast();
            iov.iov_len = buf.len();
            *ctl = gso_cmsg(*seg);
        }
        let iov_ptr = iovs.as_mut_ptr();
        for (i, (hdr, ctl)) in hdrs.iter_mut().zip(&controls).take(chunk.len()).enumerate() {
            let m = &mut hdr.msg_hdr;
            m.msg_iov = iov_ptr.wrapping_add(i);
            m.msg_iovlen = 1;
            let c = ctl.as_bytes();
            m.msg_control = c.as_ptr().cast_mut().cast();
            m.msg_controllen = c.len() as _;
        }
        // SAFETY: the first `chunk.len()` headers point at iovecs in `iovs`
        // (→ caller buffers) and control bytes in `controls`, all live and
        // unmoved until the call returns; the kernel only reads them.
        let rc = unsafe { libc::sendmmsg(raw, hdrs.as_mut_ptr(), chunk.len() as libc::c_uint, 0) };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return if sent > 0 { Ok(sent) } else { Err(err) };
        }
        let n = usize::try_from(rc).unwrap_or(0);
        sent += n;
        if n < chunk.len() {
            break;
        }
    }
    Ok(sent)
}

/// Enables UDP GRO receive (UDP_GRO): the kernel may hand several
/// same-size datagrams from one flow to a single recv, cutting per-packet
/// cost. Each such message carries [`RecvMeta::gro_segment`]; size the
/// [`RecvBatch`] `max_len` at 65535 or more.
pub fn enable_gro(fd: impl AsFd) -> io::Result<()> {
    set_int(fd.as_fd(), libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// True for the errors a full send path gives (EAGAIN/EWOULDBLOCK: socket
/// buffer full; ENOBUFS: qdisc or device queue full), so callers can back
/// off and retry without naming errno values.
pub fn is_send_buffer_full(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS)
}

/// Clock that [`send_at`] transmit times are read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxClock {
    /// CLOCK_MONOTONIC: what the fq qdisc expects.
    Monotonic,
    /// CLOCK_TAI: what the etf qdisc expects (CLOCK_REALTIME + leap seconds).
    Tai,
}

/// Enables SO_TXTIME so [`send_at`] can ask for a transmit time.
///
/// The time is honoured only by the etf or fq qdisc on the egress device;
/// under any other qdisc the packet leaves immediately and no error is
/// reported, so a caller must check the qdisc to claim kernel pacing.
pub fn set_txtime(fd: impl AsFd, clock: TxClock) -> io::Result<()> {
    let id = match clock {
        TxClock::Monotonic => libc::CLOCK_MONOTONIC,
        TxClock::Tai => libc::CLOCK_TAI,
    };
    // struct sock_txtime { clockid_t clockid; __u32 flags; }, flags 0.
    let mut v = [0u8; 8];
    v[..4].copy_from_slice(&id.to_ne_bytes());
    set_bytes(fd.as_fd(), libc::SOL_SOCKET, libc::SO_TXTIME, &v)
}

/// The clock SO_TXTIME was enabled with on this socket, if it was.
pub fn txtime_clock(fd: impl AsFd) -> Option<TxClock> {
    let mut v = [0u8; 8];
    let n = get_bytes(fd.as_fd(), libc::SOL_SOCKET, libc::SO_TXTIME, &mut v).ok()?;
    let id = libc::clockid_t::from_ne_bytes(v.get(..4)?.try_into().ok()?);
    // An unset socket reports clock 0 (CLOCK_REALTIME), which set_txtime never chooses.
    match (n, id) {
        (8, libc::CLOCK_MONOTONIC) => Some(TxClock::Monotonic),
        (8, libc::CLOCK_TAI) => Some(TxClock::Tai),
        _ => None,
    }
}

/// Sends one datagram with an SCM_TXTIME cmsg asking for transmission at
/// `txtime_ns` on the clock given to [`set_txtime`]. Returns bytes sent.
/// `nowait`: fail with WouldBlock rather than wait for buffer space.
pub fn send_at(fd: impl AsFd, buf: &[u8], txtime_ns: u64, nowait: bool) -> io::Result<usize> {
    let mut c = SmallCmsg::new();
    // An 8-byte payload always fits in 32 bytes.
    let _ = c.push(libc::SOL_SOCKET, libc::SCM_TXTIME, &txtime_ns.to_ne_bytes());
    let flags = if nowait { libc::MSG_DONTWAIT } else { 0 };
    send_with_cmsg(fd.as_fd(), buf, c.as_bytes(), flags)
}

/// Reads one datagram if one is waiting (MSG_DONTWAIT), whatever the socket's blocking mode:
/// a sender checks for its peer's acknowledgements without ever waiting for them.
pub fn recv_nowait(fd: impl AsFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is writable for its length for the whole call.
    let n = unsafe {
        libc::recv(
            fd.as_fd().as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmsg::tests::cmsg;
    use std::net::UdpSocket;
    use std::time::Duration;

    fn pair(addr: &str) -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind(addr).unwrap();
        let tx = UdpSocket::bind(addr).unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        (tx, rx)
    }

    /// The TTL a datagram arrived with: the sender's, set apart from the default to be sure it
    /// is the packet's and not a constant. IPv4, IPv6, and IPv4 on a dual-stack socket.
    #[test]
    fn recv_ttl_reports_the_packets_ttl() {
        for (rx_addr, tx_addr, to) in [
            ("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"),
            ("[::1]:0", "[::1]:0", "::1"),
            ("[::]:0", "127.0.0.1:0", "127.0.0.1"),
        ] {
            let Ok(rx) = UdpSocket::bind(rx_addr) else {
                continue; // no IPv6 here
            };
            let tx = UdpSocket::bind(tx_addr).unwrap();
            let v6 = tx.local_addr().unwrap().is_ipv6();
            let level = if v6 {
                libc::IPPROTO_IPV6
            } else {
                libc::IPPROTO_IP
            };
            let name = if v6 {
                libc::IPV6_UNICAST_HOPS
            } else {
                libc::IP_TTL
            };
            set_int(tx.as_fd(), level, name, 42).unwrap();
            enable_recv_ttl(&rx).unwrap();
            rx.set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let port = rx.local_addr().unwrap().port();
            tx.send_to(b"ttl", (to, port)).unwrap();
            let mut batch = RecvBatch::new(1, 64);
            assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
            assert_eq!(batch.meta(0).ttl, Some(42), "{rx_addr} from {tx_addr}");
        }
    }

    fn roundtrip(addr: &str) {
        let (tx, rx) = pair(addr);
        enable_rx_timestamps(&rx).unwrap();
        enable_rxq_ovfl(&rx).unwrap();
        let pkts: Vec<Vec<u8>> = (0..5u8)
            .map(|i| vec![i; 10 + usize::from(i) * 100])
            .collect();
        let refs: Vec<&[u8]> = pkts.iter().map(|p| p.as_slice()).collect();
        let before = crate::clock::realtime_ns();
        assert_eq!(send_batch(&tx, &refs).unwrap(), 5);
        let mut batch = RecvBatch::new(16, 2048);
        let mut got = Vec::new();
        while got.len() < 5 {
            let n = recv_batch(&rx, &mut batch).unwrap();
            assert!(n > 0, "timed out after {} datagrams", got.len());
            assert_eq!(batch.len(), n);
            for i in 0..n {
                got.push((batch.payload(i).to_vec(), batch.meta(i)));
            }
        }
        let after = crate::clock::realtime_ns();
        for ((payload, meta), sent) in got.iter().zip(&pkts) {
            assert_eq!(payload, sent);
            assert_eq!(meta.len, sent.len());
            assert!(!meta.truncated);
            assert_eq!(meta.source, Some(tx.local_addr().unwrap()));
            let ts = meta.kernel_rx_ns.expect("kernel timestamp");
            assert!(
                ts + 1_000_000 >= before && ts <= after + 1_000_000,
                "{before} {ts} {after}"
            );
            assert_eq!(meta.rxq_drops, None);
        }
        // Out-of-range indexes do not panic.
        assert!(batch.payload(99).is_empty());
        assert_eq!(batch.meta(99), RecvMeta::default());
    }

    /// One unconnected socket, each datagram to its own receiver, in one call;
    /// more than one chunk of 64, so every chunk finds its own names.
    #[test]
    fn batch_to_many_receivers_from_one_port() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx: Vec<UdpSocket> = (0..3)
            .map(|_| UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        for r in &rx {
            r.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        }
        let pkts: Vec<Vec<u8>> = (0..150u8).map(|i| vec![i; 10 + usize::from(i)]).collect();
        let refs: Vec<&[u8]> = pkts.iter().map(Vec::as_slice).collect();
        let to: Vec<SocketAddr> = (0..150).map(|i| rx[i % 3].local_addr().unwrap()).collect();
        assert_eq!(send_batch_to(&tx, &refs, &to, false).unwrap(), 150);
        let mut buf = [0u8; 256];
        for (i, sent) in pkts.iter().enumerate() {
            let (n, from) = rx[i % 3].recv_from(&mut buf).unwrap();
            assert_eq!(
                (&buf[..n], from),
                (sent.as_slice(), tx.local_addr().unwrap())
            );
        }
        let e = send_batch_to(&tx, &refs, &to[..1], true).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(send_batch_to(&tx, &[], &[], true).unwrap(), 0);
    }

    #[test]
    fn batch_roundtrip_ipv4() {
        roundtrip("127.0.0.1:0");
    }

    #[test]
    fn batch_roundtrip_ipv6() {
        roundtrip("[::1]:0");
    }

    #[test]
    fn large_batch_send_spans_chunks() {
        let (tx, rx) = pair("127.0.0.1:0");
        set_buffer_sizes(&rx, None, Some(1 << 20)).unwrap();
        let data: Vec<[u8; 8]> = (0..150u64).map(|i| i.to_be_bytes()).collect();
        let refs: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        assert_eq!(send_batch(&tx, &refs).unwrap(), 150);
        assert_eq!(send_batch(&tx, &[]).unwrap(), 0);
        let mut batch = RecvBatch::new(64, 64);
        let mut seen = 0u64;
        while seen < 150 {
            let n = recv_batch(&rx, &mut batch).unwrap();
            assert!(n > 0);
            for i in 0..n {
                assert_eq!(batch.payload(i), seen.to_be_bytes());
                seen += 1;
            }
        }
    }

    #[test]
    fn rxq_drops_counted_when_flooded() {
        let (tx, rx) = pair("127.0.0.1:0");
        enable_rxq_ovfl(&rx).unwrap();
        set_buffer_sizes(&rx, None, Some(4096)).unwrap();
        rx.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let pkt = [0xabu8; 1000];
        let refs: Vec<&[u8]> = vec![&pkt; 2000];
        let mut sent = 0;
        while sent < refs.len() {
            match send_batch(&tx, &refs[sent..]) {
                Ok(n) => sent += n,
                Err(e) => panic!("send failed after {sent}: {e}"),
            }
        }
        // Datagrams queued before the overflow carry no count, so drain the
        // queue, then send one more which is stamped with the total.
        let mut batch = RecvBatch::new(32, 2048);
        let mut max_drops = 0u32;
        while recv_batch(&rx, &mut batch).unwrap() > 0 {
            for i in 0..batch.len() {
                max_drops = max_drops.max(batch.meta(i).rxq_drops.unwrap_or(0));
            }
        }
        send_batch(&tx, &[&pkt]).unwrap();
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
        let drops = batch.meta(0).rxq_drops.unwrap_or(0);
        eprintln!("rxq drops: {drops} (max before drain {max_drops})");
        assert!(drops > 0);
        assert!(drops >= max_drops);
        // SO_MEMINFO reads the same counter without a datagram to carry it.
        assert_eq!(socket_drops(&rx).unwrap(), u64::from(drops));
        let (_, quiet) = pair("127.0.0.1:0");
        assert_eq!(
            socket_drops(&quiet).unwrap(),
            0,
            "a fresh socket dropped nothing"
        );
    }

    #[test]
    fn oversize_datagram_is_truncated() {
        let (tx, rx) = pair("127.0.0.1:0");
        send_batch(&tx, &[&[9u8; 500]]).unwrap();
        let mut batch = RecvBatch::new(4, 100);
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
        let meta = batch.meta(0);
        assert!(meta.truncated);
        assert_eq!(meta.len, 100);
        assert_eq!(batch.payload(0), &[9u8; 100][..]);
    }

    #[test]
    fn read_timeout_returns_zero() {
        let (_tx, rx) = pair("[::1]:0");
        rx.set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        let mut batch = RecvBatch::new(8, 1500);
        let t0 = std::time::Instant::now();
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 0);
        assert!(batch.is_empty());
        assert!(t0.elapsed() < Duration::from_secs(5));
        rx.set_nonblocking(true).unwrap();
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 0);
    }

    #[test]
    fn buffer_sizes_applied() {
        let (tx, _rx) = pair("127.0.0.1:0");
        set_buffer_sizes(&tx, Some(256 * 1024), Some(512 * 1024)).unwrap();
        let (snd, rcv) = buffer_sizes(&tx).unwrap();
        // Kernel doubles the request; as root FORCE bypasses the sysctl caps.
        eprintln!("sndbuf {snd} rcvbuf {rcv}");
        assert!(snd > 0 && rcv > 0);
    }

    #[test]
    fn send_on_unconnected_socket_errors() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(send_batch(&s, &[b"x"]).is_err());
    }

    #[test]
    fn clamps_batch_params() {
        let b = RecvBatch::new(0, 0);
        assert_eq!((b.capacity(), b.max_len(), b.len()), (1, 1, 0));
        assert_eq!(RecvBatch::new(1_000_000, 1).capacity(), MAX_BATCH);
    }

    #[test]
    fn cmsg_parser() {
        let mut ts = Vec::new();
        ts.extend_from_slice(&5i64.to_ne_bytes());
        ts.extend_from_slice(&7i64.to_ne_bytes());
        let mut buf = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts);
        buf.extend(cmsg(libc::IPPROTO_IP, 8, &[1, 2, 3, 4]));
        buf.extend(cmsg(libc::IPPROTO_IP, libc::IP_TTL, &63i32.to_ne_bytes()));
        buf.extend(cmsg(
            libc::SOL_SOCKET,
            libc::SO_RXQ_OVFL,
            &42u32.to_ne_bytes(),
        ));
        buf.extend(cmsg(libc::SOL_UDP, libc::UDP_GRO, &1400i32.to_ne_bytes()));
        let got = parse_cmsgs(&buf);
        assert_eq!(
            got,
            RxCmsgs {
                rx_ns: Some(5_000_000_007),
                hw_ns: None,
                drops: Some(42),
                gro: Some(1400),
                ttl: Some(63),
            }
        );
        // Truncated / garbage input never panics.
        for cut in 0..buf.len() {
            let _ = parse_cmsgs(&buf[..cut]);
        }
        assert_eq!(parse_cmsgs(&[0xff; 64]), RxCmsgs::default());
        assert_eq!(parse_cmsgs(&[]), RxCmsgs::default());
        // Invalid nsec rejected.
        let mut bad = Vec::new();
        bad.extend_from_slice(&1i64.to_ne_bytes());
        bad.extend_from_slice(&2_000_000_000i64.to_ne_bytes());
        assert_eq!(
            parse_cmsgs(&cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &bad)).rx_ns,
            None
        );
        // Out-of-range GRO sizes are dropped.
        let neg = cmsg(libc::SOL_UDP, libc::UDP_GRO, &(-1i32).to_ne_bytes());
        assert_eq!(parse_cmsgs(&neg).gro, None);
    }

    #[test]
    fn cmsg_parser_scm_timestamping() {
        let mut d = Vec::new();
        for (s, ns) in [(10i64, 1i64), (0, 0), (20, 2)] {
            d.extend_from_slice(&s.to_ne_bytes());
            d.extend_from_slice(&ns.to_ne_bytes());
        }
        for ty in [libc::SCM_TIMESTAMPING, SO_TIMESTAMPING_NEW] {
            let got = parse_cmsgs(&cmsg(libc::SOL_SOCKET, ty, &d));
            assert_eq!(got.rx_ns, Some(10_000_000_001));
            assert_eq!(got.hw_ns, Some(20_000_000_002));
        }
        // SCM_TIMESTAMPNS wins over the SO_TIMESTAMPING software stamp.
        let mut ts = Vec::new();
        ts.extend_from_slice(&5i64.to_ne_bytes());
        ts.extend_from_slice(&0i64.to_ne_bytes());
        let mut buf = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &d);
        buf.extend(cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts));
        assert_eq!(parse_cmsgs(&buf).rx_ns, Some(5_000_000_000));
    }

    /// Reads datagrams until `want` payload bytes arrived (or a timeout),
    /// returning each message's (payload length, GRO segment).
    fn recv_all(rx: &UdpSocket, batch: &mut RecvBatch, want: usize) -> Vec<(usize, Option<u16>)> {
        let mut got = Vec::new();
        let mut total = 0;
        while total < want {
            let n = recv_batch(rx, batch).unwrap();
            assert!(n > 0, "timed out after {total} of {want} bytes");
            for i in 0..n {
                let m = batch.meta(i);
                assert!(!m.truncated);
                total += m.len;
                got.push((m.len, m.gro_segment));
            }
        }
        assert_eq!(total, want);
        got
    }

    fn gso_roundtrip(addr: &str) {
        let (tx, rx) = pair(addr);
        assert!(gso_supported(&tx));
        set_buffer_sizes(&rx, None, Some(1 << 20)).unwrap();
        let buf: Vec<u8> = (0..2000u32).map(|i| (i / 100) as u8).collect();
        assert_eq!(send_gso(&tx, &buf, 100).unwrap(), 2000);
        let mut batch = RecvBatch::new(64, 2048);
        let got = recv_all(&rx, &mut batch, 2000);
        // Without GRO on the receiver the kernel splits the GSO packet.
        assert_eq!(got, vec![(100, None); 20]);
        for i in 0..20 {
            assert_eq!(batch.payload(i), &[i as u8; 100][..]);
        }
    }

    #[test]
    fn gso_send_arrives_as_datagrams_ipv4() {
        gso_roundtrip("127.0.0.1:0");
    }

    #[test]
    fn gso_send_arrives_as_datagrams_ipv6() {
        gso_roundtrip("[::1]:0");
    }

    #[test]
    fn gso_short_last_segment_and_limits() {
        let (tx, rx) = pair("127.0.0.1:0");
        assert_eq!(send_gso(&tx, &[1u8; 250], 100).unwrap(), 250);
        let mut batch = RecvBatch::new(8, 2048);
        assert_eq!(
            recv_all(&rx, &mut batch, 250),
            vec![(100, None), (100, None), (50, None)]
        );
        let e = send_gso(&tx, &[0u8; 65 * 10], 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = send_gso(&tx, &[0u8; 10], 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        // Over the IPv4 UDP payload limit: the kernel refuses.
        assert!(send_gso(&tx, &vec![0u8; 64 * 1100], 1100).is_err());
        // Not a UDP socket: the probe says no.
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(!gso_supported(&tcp));
    }

    #[test]
    fn gso_batch_sends_each_message_segmented() {
        let (tx, rx) = pair("127.0.0.1:0");
        set_buffer_sizes(&rx, None, Some(1 << 20)).unwrap();
        let a = [1u8; 300];
        let b = [2u8; 50];
        let many: Vec<(&[u8], u16)> = vec![(&a, 100), (&b, 100)];
        assert_eq!(send_gso_batch(&tx, &many).unwrap(), 2);
        let mut batch = RecvBatch::new(16, 2048);
        let got = recv_all(&rx, &mut batch, 350);
        assert_eq!(got, vec![(100, None), (100, None), (100, None), (50, None)]);
        assert_eq!(batch.payload(3), &b[..]);
        // 70 messages span two sendmmsg chunks.
        let seventy: Vec<(&[u8], u16)> = vec![(&a, 150); 70];
        assert_eq!(send_gso_batch(&tx, &seventy).unwrap(), 70);
        let mut big = RecvBatch::new(256, 2048);
        assert_eq!(recv_all(&rx, &mut big, 70 * 300).len(), 140);
        assert_eq!(send_gso_batch(&tx, &[]).unwrap(), 0);
        // One bad entry rejects the whole batch before sending.
        let bad: Vec<(&[u8], u16)> = vec![(&a, 100), (&a, 0)];
        assert!(send_gso_batch(&tx, &bad).is_err());
        rx.set_nonblocking(true).unwrap();
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 0);
    }

    fn gro_roundtrip(addr: &str) {
        let (tx, rx) = pair(addr);
        enable_gro(&rx).unwrap();
        enable_rx_timestamps(&rx).unwrap();
        let buf: Vec<u8> = (0..1000u32).map(|i| (i / 100) as u8).collect();
        assert_eq!(send_gso(&tx, &buf, 100).unwrap(), 1000);
        let mut batch = RecvBatch::new(16, 65535);
        let got = recv_all(&rx, &mut batch, 1000);
        eprintln!("{addr}: GRO delivered {got:?}");
        let mut joined = Vec::new();
        for (i, (len, seg)) in got.iter().enumerate() {
            match seg {
                Some(seg) => {
                    // Coalesced: whole segments, the last possibly short.
                    let seg = usize::from(*seg);
                    assert_eq!(seg, 100);
                    assert!(*len >= seg && len.div_ceil(seg) <= GSO_MAX_SEGMENTS);
                }
                None => assert_eq!(*len, 100),
            }
            assert!(batch.meta(i).kernel_rx_ns.is_some());
            joined.extend_from_slice(batch.payload(i));
        }
        assert_eq!(joined, buf);
    }

    #[test]
    fn gro_receive_ipv4() {
        gro_roundtrip("127.0.0.1:0");
    }

    #[test]
    fn gro_receive_ipv6() {
        gro_roundtrip("[::1]:0");
    }

    #[test]
    fn send_buffer_full_classification() {
        assert!(is_send_buffer_full(&io::Error::from_raw_os_error(
            libc::EAGAIN
        )));
        assert!(is_send_buffer_full(&io::Error::from_raw_os_error(
            libc::ENOBUFS
        )));
        assert!(is_send_buffer_full(&io::ErrorKind::WouldBlock.into()));
        assert!(!is_send_buffer_full(&io::Error::from_raw_os_error(
            libc::ECONNREFUSED
        )));
        assert!(!is_send_buffer_full(&io::ErrorKind::Other.into()));
    }

    #[test]
    fn send_at_without_pacing_qdisc_goes_now() {
        let (tx, rx) = pair("127.0.0.1:0");
        assert_eq!(txtime_clock(&tx), None);
        set_txtime(&tx, TxClock::Monotonic).unwrap();
        set_txtime(&tx, TxClock::Tai).unwrap();
        assert_eq!(txtime_clock(&tx), Some(TxClock::Tai));
        set_txtime(&tx, TxClock::Monotonic).unwrap();
        assert_eq!(txtime_clock(&tx), Some(TxClock::Monotonic));
        // 10 s in the future: lo has no etf/fq qdisc, so it is sent at once.
        let at = crate::clock::monotonic_ns() + 10_000_000_000;
        assert_eq!(send_at(&tx, b"later", at, true).unwrap(), 5);
        let t0 = std::time::Instant::now();
        let mut batch = RecvBatch::new(4, 64);
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
        assert_eq!(batch.payload(0), b"later");
        assert!(t0.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn sockaddr_parser_rejects_short() {
        assert_eq!(parse_sockaddr(&[]), None);
        assert_eq!(parse_sockaddr(&[2, 0, 0, 80]), None);
        assert_eq!(parse_sockaddr(&[0xff; 128]), None);
    }
}
