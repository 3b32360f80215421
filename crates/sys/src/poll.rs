//! epoll readiness for one thread serving many sockets (e.g. an agent
//! echoing many flows) without a thread per socket.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// Events returned per `epoll_wait` call; more stay queued for the next.
const MAX_EVENTS: usize = 256;

/// Waits until any of `fds` is readable or `timeout` passes, with nanosecond resolution
/// (ppoll), where epoll's millisecond timeout is too coarse for pacing. Returns whether one
/// is readable; EINTR counts as a timeout.
pub fn wait_readable(fds: &[std::os::fd::BorrowedFd<'_>], timeout: Duration) -> io::Result<bool> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
    };
    // SAFETY: `polled` is a live array of `polled.len()` pollfds the kernel may write
    // `revents` into; `ts` is a valid timespec; a null signal mask keeps the current one.
    let rc = unsafe {
        libc::ppoll(
            polled.as_mut_ptr(),
            polled.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(err)
        };
    }
    Ok(rc > 0)
}

/// An epoll instance. Level-triggered: a socket stays ready until drained.
#[derive(Debug)]
pub struct Poller {
    epfd: OwnedFd,
    buf: Vec<libc::epoll_event>,
}

fn interest(readable: bool, writable: bool) -> u32 {
    let mut ev = 0;
    if readable {
        ev |= libc::EPOLLIN as u32;
    }
    if writable {
        ev |= libc::EPOLLOUT as u32;
    }
    ev
}

fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl Poller {
    /// Creates the epoll instance (close-on-exec).
    pub fn new() -> io::Result<Poller> {
        // SAFETY: epoll_create1 takes only flags and touches no memory.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(fd) };
        let empty = libc::epoll_event { events: 0, u64: 0 };
        Ok(Poller {
            epfd,
            buf: vec![empty; MAX_EVENTS],
        })
    }

    fn ctl(&self, op: libc::c_int, fd: impl AsFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a live epoll_event for the call; the kernel only reads it.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd.as_fd().as_raw_fd(), &mut ev) })
            .map(drop)
    }

    /// Watches `fd`, reporting `token` when it becomes readable and/or
    /// writable as asked. Errors and hang-ups are always reported (as
    /// readable and writable) so the caller's next I/O call sees them.
    /// The caller must `remove` the fd before closing it.
    pub fn add(&self, fd: impl AsFd, token: u64, readable: bool, writable: bool) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest(readable, writable), token)
    }

    /// Changes the token or interest of a watched fd.
    pub fn modify(
        &self,
        fd: impl AsFd,
        token: u64,
        readable: bool,
        writable: bool,
    ) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest(readable, writable), token)
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: impl AsFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for readiness (`None`: forever; sub-millisecond timeouts round
    /// up to 1 ms), replacing `events` with `(token, readable, writable)`
    /// entries. Returns their count; a timeout or EINTR gives `Ok(0)` so
    /// the caller can check the interrupt flag.
    pub fn wait(
        &mut self,
        events: &mut Vec<(u64, bool, bool)>,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        events.clear();
        let ms = timeout.map_or(-1, |d| {
            let ms = d.as_nanos().div_ceil(1_000_000);
            libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX)
        });
        let cap = libc::c_int::try_from(self.buf.len()).unwrap_or(libc::c_int::MAX);
        // SAFETY: `buf` is writable for `cap` epoll_events and exclusively
        // borrowed for the call.
        let rc = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), self.buf.as_mut_ptr(), cap, ms) };
        let n = match cvt(rc) {
            Ok(n) => usize::try_from(n).unwrap_or(0),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        };
        let problem = (libc::EPOLLERR | libc::EPOLLHUP) as u32;
        for ev in self.buf.iter().take(n) {
            // Copy out of the (packed on x86_64) struct; no references taken.
            let (bits, token) = (ev.events, ev.u64);
            let readable = bits & (libc::EPOLLIN as u32 | libc::EPOLLRDHUP as u32 | problem) != 0;
            let writable = bits & (libc::EPOLLOUT as u32 | problem) != 0;
            events.push((token, readable, writable));
        }
        Ok(events.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_readable_times_out_then_sees_a_datagram() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let started = std::time::Instant::now();
        assert!(!wait_readable(&[a.as_fd()], Duration::from_micros(300)).unwrap());
        assert!(started.elapsed() >= Duration::from_micros(300));
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        assert!(wait_readable(&[b.as_fd(), a.as_fd()], Duration::from_secs(1)).unwrap());
    }
    use std::net::UdpSocket;

    #[test]
    fn two_udp_sockets() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("[::1]:0").unwrap();
        let tx4 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx6 = UdpSocket::bind("[::1]:0").unwrap();
        let mut p = Poller::new().unwrap();
        p.add(&a, 1, true, false).unwrap();
        p.add(&b, 2, true, false).unwrap();
        assert!(p.add(&a, 9, true, false).is_err(), "double add");
        let mut ev = Vec::new();
        assert_eq!(p.wait(&mut ev, Some(Duration::from_millis(10))).unwrap(), 0);
        assert!(ev.is_empty());

        tx6.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert_eq!(p.wait(&mut ev, Some(Duration::from_secs(2))).unwrap(), 1);
        assert_eq!(ev, vec![(2, true, false)]);
        // Level-triggered: still ready until read.
        assert_eq!(p.wait(&mut ev, Some(Duration::ZERO)).unwrap(), 1);
        let mut buf = [0u8; 8];
        b.recv(&mut buf).unwrap();

        tx4.send_to(b"y", a.local_addr().unwrap()).unwrap();
        tx6.send_to(b"z", b.local_addr().unwrap()).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        p.wait(&mut ev, None).unwrap();
        ev.sort_unstable();
        assert_eq!(ev, vec![(1, true, false), (2, true, false)]);

        // Writable interest on an idle UDP socket is ready at once.
        p.modify(&a, 7, true, true).unwrap();
        p.wait(&mut ev, Some(Duration::from_millis(100))).unwrap();
        assert!(ev.contains(&(7, true, true)));

        p.remove(&a).unwrap();
        p.remove(&b).unwrap();
        assert!(p.remove(&b).is_err());
        assert_eq!(p.wait(&mut ev, Some(Duration::from_micros(1))).unwrap(), 0);
    }
}
