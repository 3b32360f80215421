//! TCP_INFO for per-connection reports (RTT, cwnd, retransmits, rates).

use std::io;
use std::os::fd::{AsFd, AsRawFd};

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
}
