//! Integer socket option helpers shared by the `udp` and `tcp` modules.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Sets an `int`-valued socket option.
pub(crate) fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and the length passed matches its size.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an `int`-valued socket option.
pub(crate) fn get_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live, writable and `len` is the size of `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets a socket option whose value is an arbitrary byte layout (u64,
/// structs, strings), built by the caller in native byte order.
pub(crate) fn set_bytes(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &[u8],
) -> io::Result<()> {
    let len = libc::socklen_t::try_from(value.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "option value too long"))?;
    // SAFETY: `value` is a live slice and `len` is exactly its length; the
    // kernel only reads from it.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// SO_RCVTIMEO; zero waits for ever.
pub(crate) fn set_read_timeout(fd: BorrowedFd<'_>, t: std::time::Duration) -> io::Result<()> {
    let mut timeval = Vec::with_capacity(16);
    timeval.extend_from_slice(&(t.as_secs() as libc::time_t).to_ne_bytes());
    timeval.extend_from_slice(&libc::suseconds_t::from(t.subsec_micros() as i32).to_ne_bytes());
    set_bytes(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &timeval)
}

/// Reads a socket option into `buf`, returning the length the kernel wrote.
pub(crate) fn get_bytes(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut len = libc::socklen_t::try_from(buf.len()).unwrap_or(libc::socklen_t::MAX);
    // SAFETY: `buf` is live and writable for `len` bytes; the kernel writes
    // at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(usize::try_from(len).unwrap_or(0).min(buf.len()))
    } else {
        Err(io::Error::last_os_error())
    }
}
