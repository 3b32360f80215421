//! TCP_INFO for per-connection reports (RTT, cwnd, retransmits, rates),
//! send-queue depth, MSG_ZEROCOPY and per-connection tuning options.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use crate::cmsg;
use crate::sockopt::{get_bytes, get_int, set_bytes, set_int};

use serde::{Deserialize, Serialize};

/// Subset of the kernel's TCP_INFO shown in reports.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Smoothed RTT, microseconds.
    pub rtt_us: u32,
    /// RTT variance, microseconds.
    pub rttvar_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Retransmitted segments over the connection lifetime.
    pub total_retrans: u32,
    /// Kernel pacing rate, bits per second (kernel reports bytes/s; ×8 here).
    pub pacing_rate_bps: u64,
    /// Most recent delivery rate estimate, bits per second (×8 of kernel bytes/s).
    pub delivery_rate_bps: u64,
    /// Sender MSS, bytes.
    pub snd_mss: u32,
}

/// Prefix of the kernel's `struct tcp_info` (linux/tcp.h) up to
/// tcpi_delivery_rate. Our own copy so the layout does not depend on the
/// libc target (musl's struct is shorter).
#[repr(C)]
#[derive(Default)]
#[allow(dead_code)] // most fields exist only to fix the layout
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    bitfields: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
}

const _: () = assert!(std::mem::size_of::<RawTcpInfo>() == 168);

/// Reads TCP_INFO. Fields newer than the running kernel stay 0.
pub fn tcp_info(fd: impl AsFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = std::mem::size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a writable repr(C) struct of `len` bytes; the kernel
    // writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: raw.rtt,
        rttvar_us: raw.rttvar,
        snd_cwnd: raw.snd_cwnd,
        total_retrans: raw.total_retrans,
        pacing_rate_bps: raw.pacing_rate.saturating_mul(8),
        delivery_rate_bps: raw.delivery_rate.saturating_mul(8),
        snd_mss: raw.snd_mss,
    })
}

/// linux/sockios.h SIOCOUTQNSD: bytes in the send queue not yet sent.
const SIOCOUTQNSD: libc::Ioctl = 0x894B;
/// linux/errqueue.h: error-queue origin of zerocopy completions.
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;

fn ioctl_int(fd: BorrowedFd<'_>, req: libc::Ioctl) -> io::Result<u32> {
    let mut v: libc::c_int = 0;
    // SAFETY: both requests write one int through the pointer, which is
    // live and writable for the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), req, &mut v as *mut libc::c_int) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(u32::try_from(v).unwrap_or(0))
}

/// SIOCOUTQ: bytes in the send queue not yet acknowledged by the peer
/// (unsent plus in flight), for judging how far the sender runs ahead.
pub fn tcp_unsent_bytes(fd: impl AsFd) -> io::Result<u32> {
    ioctl_int(fd.as_fd(), libc::TIOCOUTQ)
}

/// SIOCOUTQNSD: bytes in the send queue the stack has not sent yet.
pub fn tcp_notsent_bytes(fd: impl AsFd) -> io::Result<u32> {
    ioctl_int(fd.as_fd(), SIOCOUTQNSD)
}

/// Enables SO_ZEROCOPY so [`send_zerocopy`] can pin user pages instead of
/// copying (pays off above ~10 KB per send).
pub fn set_zerocopy(fd: impl AsFd) -> io::Result<()> {
    set_int(fd.as_fd(), libc::SOL_SOCKET, libc::SO_ZEROCOPY, 1)
}

/// send with MSG_ZEROCOPY; returns bytes queued. Each successful call is
/// one completion to reap with [`reap_zerocopy_completions`]; until then
/// the kernel may still read `buf`'s pages, so overwriting the buffer
/// early can change what is sent. Without [`set_zerocopy`] the flag is
/// ignored (TCP) or refused (UDP).
pub fn send_zerocopy(fd: impl AsFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is a live slice of `buf.len()` bytes; send only reads it.
    let rc = unsafe {
        libc::send(
            fd.as_fd().as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_ZEROCOPY,
        )
    };
    usize::try_from(rc).map_err(|_| io::Error::last_os_error())
}

/// Count of [`send_zerocopy`] calls completed in one error-queue message:
/// the kernel reports an inclusive range [ee_info, ee_data] of call numbers.
fn zerocopy_completed(control: &[u8]) -> u32 {
    cmsg::iter(control)
        .filter_map(cmsg::parse_extended_err)
        .filter(|e| e.errno == 0 && e.origin == SO_EE_ORIGIN_ZEROCOPY)
        .map(|e| e.data.wrapping_sub(e.info).wrapping_add(1))
        .fold(0, u32::wrapping_add)
}

/// Reads zerocopy completion notifications (MSG_ERRQUEUE, never blocks)
/// and returns how many sends completed since the last call. On loopback
/// the kernel copies anyway but still notifies.
pub fn reap_zerocopy_completions(fd: impl AsFd) -> io::Result<u32> {
    let mut done = 0u32;
    cmsg::drain_errqueue(fd.as_fd(), |c| {
        done = done.wrapping_add(zerocopy_completed(c))
    })?;
    Ok(done)
}

/// TCP_CONGESTION: selects the congestion control algorithm by name (e.g.
/// "cubic", "bbr"); fails if the kernel lacks it or, unprivileged, it is
/// not in net.ipv4.tcp_allowed_congestion_control.
pub fn set_congestion_control(fd: impl AsFd, name: &str) -> io::Result<()> {
    if name.is_empty() || name.len() >= 16 || name.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "congestion control name must be 1-15 bytes without NUL",
        ));
    }
    set_bytes(
        fd.as_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        name.as_bytes(),
    )
}

/// The socket's congestion control algorithm (TCP_CONGESTION).
pub fn congestion_control(fd: impl AsFd) -> io::Result<String> {
    let mut buf = [0u8; 16];
    let n = get_bytes(
        fd.as_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        &mut buf,
    )?;
    let name = buf.get(..n).unwrap_or(&[]);
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(name.get(..end).unwrap_or(&[])).into_owned())
}

/// TCP_MAXSEG: caps the MSS; set it before connect/listen to take effect
/// on the handshake (it is then also what the peer is told).
pub fn set_mss(fd: impl AsFd, mss: u32) -> io::Result<()> {
    let v = libc::c_int::try_from(mss).unwrap_or(libc::c_int::MAX);
    set_int(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_MAXSEG, v)
}

/// TCP_WINDOW_CLAMP: caps the advertised receive window, bounding what
/// the peer can have in flight (the kernel raises tiny values to its minimum).
pub fn set_window_clamp(fd: impl AsFd, bytes: u32) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_int(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, v)
}

/// The window clamp in force (TCP_WINDOW_CLAMP).
pub fn window_clamp(fd: impl AsFd) -> io::Result<u32> {
    let v = get_int(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP)?;
    Ok(u32::try_from(v).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::time::Duration;

    #[test]
    fn loopback_connection_has_rtt_and_mss() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 4096];
        for _ in 0..10 {
            client.write_all(&[7u8; 4096]).unwrap();
            server.read_exact(&mut buf).unwrap();
            server.write_all(b"ack").unwrap();
            client.read_exact(&mut buf[..3]).unwrap();
        }
        let info = tcp_info(&client).unwrap();
        eprintln!("{info:?}");
        assert!(info.rtt_us > 0);
        assert!(info.snd_mss > 0);
        assert!(info.snd_cwnd > 0);
        let json = serde_json::to_string(&info).unwrap();
        assert_eq!(serde_json::from_str::<TcpInfo>(&json).unwrap(), info);
    }

    #[test]
    fn non_tcp_socket_is_error() {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(&udp).is_err());
    }

    fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        (client, server)
    }

    #[test]
    fn send_queue_depth() {
        let (mut client, server) = connected();
        assert_eq!(tcp_unsent_bytes(&client).unwrap(), 0);
        assert_eq!(tcp_notsent_bytes(&client).unwrap(), 0);
        // The server never reads, so its window fills and data stays queued.
        crate::udp::set_buffer_sizes(&server, None, Some(4096)).unwrap();
        client.set_nonblocking(true).unwrap();
        let chunk = [1u8; 65536];
        let mut wrote = 0usize;
        loop {
            match client.write(&chunk) {
                Ok(n) => wrote += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        let q = tcp_unsent_bytes(&client).unwrap();
        let nsd = tcp_notsent_bytes(&client).unwrap();
        eprintln!("wrote {wrote}, outq {q}, notsent {nsd}");
        assert!(q > 0 && (q as usize) <= wrote);
        assert!(nsd <= q);
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        // SIOCOUTQ also works on UDP (bytes in the send buffer), so only check it answers.
        assert!(tcp_unsent_bytes(&udp).is_ok());
    }

    #[test]
    fn zerocopy_sends_complete() {
        let (client, mut server) = connected();
        set_zerocopy(&client).unwrap();
        let data = vec![5u8; 64 * 1024];
        for _ in 0..3 {
            assert_eq!(send_zerocopy(&client, &data).unwrap(), data.len());
        }
        let mut sink = vec![0u8; data.len() * 3];
        server.read_exact(&mut sink).unwrap();
        assert!(sink.iter().all(|&b| b == 5));
        let mut done = 0;
        let t0 = std::time::Instant::now();
        while done < 3 && t0.elapsed() < Duration::from_secs(2) {
            done += reap_zerocopy_completions(&client).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(done, 3);
        assert_eq!(reap_zerocopy_completions(&client).unwrap(), 0);
    }

    #[test]
    fn zerocopy_completion_parser() {
        let mut ee = Vec::new();
        ee.extend_from_slice(&0u32.to_ne_bytes());
        ee.extend_from_slice(&[SO_EE_ORIGIN_ZEROCOPY, 0, 1, 0]);
        ee.extend_from_slice(&4u32.to_ne_bytes());
        ee.extend_from_slice(&9u32.to_ne_bytes());
        let c = crate::cmsg::tests::cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee);
        assert_eq!(zerocopy_completed(&c), 6);
        assert_eq!(zerocopy_completed(&[]), 0);
        // A timestamp on the error queue is not a completion.
        ee[4] = libc::SO_EE_ORIGIN_TIMESTAMPING;
        let c = crate::cmsg::tests::cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee);
        assert_eq!(zerocopy_completed(&c), 0);
    }

    #[test]
    fn congestion_control_switch() {
        let (client, _server) = connected();
        set_congestion_control(&client, "reno").unwrap();
        assert_eq!(congestion_control(&client).unwrap(), "reno");
        assert!(set_congestion_control(&client, "no-such-cc").is_err());
        assert!(set_congestion_control(&client, "").is_err());
        assert!(set_congestion_control(&client, "a\0b").is_err());
        assert!(set_congestion_control(&client, "x".repeat(16).as_str()).is_err());
        assert_eq!(congestion_control(&client).unwrap(), "reno");
    }

    #[test]
    fn mss_and_window_clamp() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        set_mss(&listener, 1000).unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // The listener advertised MSS 1000 in its SYN-ACK.
        let mss = tcp_info(&client).unwrap().snd_mss;
        assert!(mss > 0 && mss <= 1000, "client snd_mss {mss}");
        set_window_clamp(&server, 100_000).unwrap();
        assert_eq!(window_clamp(&server).unwrap(), 100_000);
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(set_mss(&udp, 1000).is_err());
    }
}
