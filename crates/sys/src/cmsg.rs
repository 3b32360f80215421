//! Control messages (cmsg) as bytes, and the socket error queue.
//!
//! Parsing works on plain byte slices (no alignment or pointer casts), so
//! kernel-written buffers can be read without `unsafe`; building writes
//! into an 8-byte-aligned array in the kernel's CMSG layout.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Kernel cmsg alignment (sizeof(long) == sizeof(usize) on Linux).
pub(crate) const CMSG_ALIGN: usize = std::mem::size_of::<usize>();
/// Kernel `struct cmsghdr`: size_t len, int level, int type.
pub(crate) const CMSG_HDR: usize = cmsg_align(std::mem::size_of::<usize>() + 8);

/// Rounds up to the kernel's cmsg alignment (CMSG_ALIGN).
pub(crate) const fn cmsg_align(n: usize) -> usize {
    (n + CMSG_ALIGN - 1) & !(CMSG_ALIGN - 1)
}

/// Reads `N` bytes at `at`, or `None` if the slice is too short.
pub(crate) fn read_ne<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// Timespec payload: 2×i64 (64-bit / time64) or 2×i32 (legacy 32-bit).
pub(crate) fn parse_timespec(d: &[u8]) -> Option<u64> {
    let (sec, nsec) = if d.len() >= 16 {
        (
            i64::from_ne_bytes(read_ne::<8>(d, 0)?),
            i64::from_ne_bytes(read_ne::<8>(d, 8)?),
        )
    } else {
        (
            i64::from(i32::from_ne_bytes(read_ne::<4>(d, 0)?)),
            i64::from(i32::from_ne_bytes(read_ne::<4>(d, 4)?)),
        )
    };
    if sec < 0 || !(0..1_000_000_000).contains(&nsec) {
        return None;
    }
    Some(crate::clock::timespec_to_ns(sec, nsec))
}

/// `struct scm_timestamping` (3 timespecs): (ts[0] software, ts[2] raw
/// hardware), each `None` when the kernel left it zero.
pub(crate) fn parse_scm_timestamping(d: &[u8]) -> (Option<u64>, Option<u64>) {
    let each = if d.len() >= 48 { 16 } else { 8 };
    let ts = |i: usize| {
        d.get(i * each..(i + 1) * each)
            .and_then(parse_timespec)
            .filter(|&ns| ns != 0)
    };
    (ts(0), ts(2))
}

/// One control message: (level, type, data).
pub(crate) type Cmsg<'a> = (i32, i32, &'a [u8]);

/// Iterates the control messages in a kernel-written buffer; stops at the
/// first malformed header instead of failing.
pub(crate) fn iter(buf: &[u8]) -> impl Iterator<Item = Cmsg<'_>> {
    const W: usize = std::mem::size_of::<usize>();
    let mut off = 0usize;
    std::iter::from_fn(move || {
        let hdr = buf.get(off..off.saturating_add(CMSG_HDR))?;
        let len = read_ne::<W>(hdr, 0).map_or(0, usize::from_ne_bytes);
        let level = i32::from_ne_bytes(read_ne::<4>(hdr, W)?);
        let ty = i32::from_ne_bytes(read_ne::<4>(hdr, W + 4)?);
        if len < CMSG_HDR {
            return None;
        }
        let data = buf.get(off + CMSG_HDR..off.saturating_add(len))?;
        off = off.saturating_add(cmsg_align(len));
        Some((level, ty, data))
    })
}

/// Send-side control buffer of up to `N` bytes, aligned for cmsghdr.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(crate) struct CmsgBuf<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> CmsgBuf<N> {
    /// An empty buffer.
    pub(crate) const fn new() -> Self {
        CmsgBuf {
            bytes: [0; N],
            len: 0,
        }
    }

    /// Appends one cmsg; `false` (buffer unchanged) if it does not fit.
    pub(crate) fn push(&mut self, level: i32, ty: i32, data: &[u8]) -> bool {
        let len = CMSG_HDR + data.len();
        let end = self.len + cmsg_align(len);
        let Some(dst) = self.bytes.get_mut(self.len..end) else {
            return false;
        };
        dst.fill(0);
        const W: usize = std::mem::size_of::<usize>();
        dst[..W].copy_from_slice(&len.to_ne_bytes());
        dst[W..W + 4].copy_from_slice(&level.to_ne_bytes());
        dst[W + 4..W + 8].copy_from_slice(&ty.to_ne_bytes());
        dst[CMSG_HDR..len].copy_from_slice(data);
        self.len = end;
        true
    }

    /// The messages written so far.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or(&[])
    }
}

/// `struct sock_extended_err` from an IP_RECVERR / IPV6_RECVERR cmsg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExtendedErr {
    pub(crate) errno: u32,
    pub(crate) origin: u8,
    pub(crate) info: u32,
    pub(crate) data: u32,
}

/// Parses an extended error if this cmsg is IP_RECVERR or IPV6_RECVERR.
pub(crate) fn parse_extended_err((level, ty, d): Cmsg<'_>) -> Option<ExtendedErr> {
    let is_err = (level == libc::SOL_IP && ty == libc::IP_RECVERR)
        || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR);
    if !is_err {
        return None;
    }
    Some(ExtendedErr {
        errno: u32::from_ne_bytes(read_ne::<4>(d, 0)?),
        origin: *d.get(4)?,
        info: u32::from_ne_bytes(read_ne::<4>(d, 8)?),
        data: u32::from_ne_bytes(read_ne::<4>(d, 12)?),
    })
}

/// Most error-queue messages read per call, so one call is bounded.
const ERRQUEUE_MAX: usize = 4096;

/// Reads the socket error queue (MSG_ERRQUEUE, never blocks) until it is
/// empty, calling `f` with each message's control bytes. Returns the
/// number of messages read.
pub(crate) fn drain_errqueue(fd: BorrowedFd<'_>, mut f: impl FnMut(&[u8])) -> io::Result<usize> {
    // The payload (the original packet unless OPT_TSONLY) is not needed:
    // a short buffer just sets MSG_TRUNC.
    let mut data = [0u8; 64];
    let mut control = CmsgBuf::<512>::new();
    let mut n = 0;
    while n < ERRQUEUE_MAX {
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: msghdr is integers and raw pointers; all-zero (null) is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.bytes.as_mut_ptr().cast();
        msg.msg_controllen = control.bytes.len() as _;
        // SAFETY: `msg` points at `iov`/`data`/`control`, all live and
        // exclusively borrowed for the call, with matching lengths.
        let rc = unsafe {
            libc::recvmsg(
                fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(n),
                _ if n > 0 => Ok(n),
                _ => Err(err),
            };
        }
        // Field type differs across libc targets (e.g. musl).
        #[allow(clippy::unnecessary_cast)]
        let clen = (msg.msg_controllen as usize).min(control.bytes.len());
        f(control.bytes.get(..clen).unwrap_or(&[]));
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds one cmsg the way the kernel lays it out.
    pub(crate) fn cmsg(level: i32, ty: i32, data: &[u8]) -> Vec<u8> {
        let mut b = CmsgBuf::<256>::new();
        assert!(b.push(level, ty, data));
        b.as_bytes().to_vec()
    }

    #[test]
    fn build_and_iterate() {
        let mut b = CmsgBuf::<64>::new();
        assert!(b.push(1, 2, &[7, 8]));
        assert!(b.push(3, 4, &9u64.to_ne_bytes()));
        assert!(!b.push(5, 6, &[0; 64]), "overflow rejected");
        let v: Vec<_> = iter(b.as_bytes()).collect();
        assert_eq!(
            v,
            vec![(1, 2, &[7u8, 8][..]), (3, 4, &9u64.to_ne_bytes()[..])]
        );
        assert_eq!(b.as_bytes().len(), 2 * CMSG_HDR + cmsg_align(2) + 8);
    }

    #[test]
    fn extended_err_parse() {
        let mut ee = Vec::new();
        ee.extend_from_slice(&42u32.to_ne_bytes());
        ee.extend_from_slice(&[4, 0, 0, 0]);
        ee.extend_from_slice(&7u32.to_ne_bytes());
        ee.extend_from_slice(&9u32.to_ne_bytes());
        let want = Some(ExtendedErr {
            errno: 42,
            origin: 4,
            info: 7,
            data: 9,
        });
        assert_eq!(
            parse_extended_err((libc::SOL_IP, libc::IP_RECVERR, &ee)),
            want
        );
        assert_eq!(
            parse_extended_err((libc::SOL_IPV6, libc::IPV6_RECVERR, &ee)),
            want
        );
        assert_eq!(parse_extended_err((libc::SOL_IP, 99, &ee)), None);
        assert_eq!(
            parse_extended_err((libc::SOL_IP, libc::IP_RECVERR, &ee[..10])),
            None
        );
    }

    #[test]
    fn scm_timestamping_parse() {
        let mut d = Vec::new();
        for (s, ns) in [(1i64, 2i64), (0, 0), (3, 4)] {
            d.extend_from_slice(&s.to_ne_bytes());
            d.extend_from_slice(&ns.to_ne_bytes());
        }
        assert_eq!(
            parse_scm_timestamping(&d),
            (Some(1_000_000_002), Some(3_000_000_004))
        );
        assert_eq!(parse_scm_timestamping(&[0; 48]), (None, None));
        for cut in 0..d.len() {
            let _ = parse_scm_timestamping(&d[..cut]);
        }
    }
}
