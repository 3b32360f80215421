//! SO_TIMESTAMPING: software and hardware receive stamps (parsed into
//! [`crate::udp::RecvMeta`]) and transmit stamps read from the error queue,
//! so send times can be measured where the kernel or NIC sent the packet
//! rather than where the application called send.

use std::io;
use std::ops::BitOr;
use std::os::fd::AsFd;

use crate::cmsg;
use crate::sockopt::set_int;

/// SO_TIMESTAMPING flags (linux/net_tstamp.h); combine with `|`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimestampFlags(u32);

impl TimestampFlags {
    /// Stamp outgoing packets when the NIC sends them.
    pub const TX_HARDWARE: Self = Self(libc::SOF_TIMESTAMPING_TX_HARDWARE);
    /// Stamp outgoing packets when the driver hands them to the NIC.
    pub const TX_SOFTWARE: Self = Self(libc::SOF_TIMESTAMPING_TX_SOFTWARE);
    /// Stamp incoming packets in the NIC.
    pub const RX_HARDWARE: Self = Self(libc::SOF_TIMESTAMPING_RX_HARDWARE);
    /// Stamp incoming packets when the stack receives them.
    pub const RX_SOFTWARE: Self = Self(libc::SOF_TIMESTAMPING_RX_SOFTWARE);
    /// Report software stamps (needed with the *_SOFTWARE generation flags).
    pub const SOFTWARE: Self = Self(libc::SOF_TIMESTAMPING_SOFTWARE);
    /// Report raw NIC-clock hardware stamps.
    pub const RAW_HARDWARE: Self = Self(libc::SOF_TIMESTAMPING_RAW_HARDWARE);
    /// Tag TX stamps with a per-socket counter (one per send on UDP).
    pub const OPT_ID: Self = Self(libc::SOF_TIMESTAMPING_OPT_ID);
    /// TX stamps carry no copy of the packet, only the stamp.
    pub const OPT_TSONLY: Self = Self(libc::SOF_TIMESTAMPING_OPT_TSONLY);
    /// Also add IP_PKTINFO to TX stamps.
    pub const OPT_CMSG: Self = Self(libc::SOF_TIMESTAMPING_OPT_CMSG);

    /// No flags (turns timestamping off).
    pub const fn empty() -> Self {
        Self(0)
    }

    /// The raw bit mask.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// True if every flag in `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for TimestampFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Sets SO_TIMESTAMPING. Hardware flags also need the NIC's timestamping
/// turned on (SIOCSHWTSTAMP), which lo and veth do not support: their
/// hardware stamps simply never appear.
///
/// When no socket on the host had RX stamping on, the kernel turns it on
/// stack-wide from a deferred work item, so datagrams received in the first
/// moments after this call may carry no software RX stamp (unlike
/// SO_TIMESTAMPNS, which then stamps at recv time). Treat a missing stamp
/// as "unknown", not as an error.
pub fn enable_timestamping(fd: impl AsFd, flags: TimestampFlags) -> io::Result<()> {
    set_int(
        fd.as_fd(),
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPING,
        libc::c_int::from_ne_bytes(flags.0.to_ne_bytes()),
    )
}

/// A transmit timestamp from the socket error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TxStamp {
    /// OPT_ID counter of the send it belongs to (0 for the first send
    /// after enabling); meaningless without [`TimestampFlags::OPT_ID`].
    pub id: u32,
    /// Software stamp (CLOCK_REALTIME ns), with TX_SOFTWARE|SOFTWARE.
    pub software_ns: Option<u64>,
    /// Raw hardware stamp (NIC clock ns), with TX_HARDWARE|RAW_HARDWARE.
    pub hardware_ns: Option<u64>,
}

/// Kernel SCM_TSTAMP_SND: stamp taken when the packet left (driver or NIC).
const SCM_TSTAMP_SND: u32 = 0;
/// Kernel uapi value of SO_TIMESTAMPING_NEW (cmsg type on time64 ABIs).
const SO_TIMESTAMPING_NEW: libc::c_int = 65;

/// Parses one error-queue message's control bytes into a send stamp, if it
/// is one (scheduler/ACK stamps and other errors are skipped).
fn parse_tx_stamp(control: &[u8]) -> Option<TxStamp> {
    let mut stamps = (None, None);
    let mut ee = None;
    for c in cmsg::iter(control) {
        let (level, ty, data) = c;
        if level == libc::SOL_SOCKET && (ty == libc::SCM_TIMESTAMPING || ty == SO_TIMESTAMPING_NEW)
        {
            stamps = cmsg::parse_scm_timestamping(data);
        } else if let Some(e) = cmsg::parse_extended_err(c) {
            ee = Some(e);
        }
    }
    let ee = ee?;
    let is_stamp = ee.errno == libc::ENOMSG as u32
        && ee.origin == libc::SO_EE_ORIGIN_TIMESTAMPING
        && ee.info == SCM_TSTAMP_SND;
    if !is_stamp || (stamps.0.is_none() && stamps.1.is_none()) {
        return None;
    }
    Some(TxStamp {
        id: ee.data,
        software_ns: stamps.0,
        hardware_ns: stamps.1,
    })
}

/// Reads every queued TX stamp (MSG_ERRQUEUE, never blocks) and appends it
/// to `out`; returns how many were appended. Stamps arrive shortly after
/// the packet leaves, so poll again later for recent sends. Only "sent"
/// stamps are returned; other error-queue messages are consumed and dropped.
pub fn read_tx_timestamps(fd: impl AsFd, out: &mut Vec<TxStamp>) -> io::Result<usize> {
    let before = out.len();
    cmsg::drain_errqueue(fd.as_fd(), |control| {
        if let Some(s) = parse_tx_stamp(control) {
            out.push(s);
        }
    })?;
    Ok(out.len() - before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmsg::tests::cmsg;
    use crate::udp::{enable_rx_timestamps, recv_batch, send_batch, RecvBatch};
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

    fn tx_stamps(addr: &str) {
        let (tx, rx) = pair(addr);
        let f = TimestampFlags::TX_SOFTWARE
            | TimestampFlags::SOFTWARE
            | TimestampFlags::OPT_ID
            | TimestampFlags::OPT_TSONLY;
        assert!(f.contains(TimestampFlags::OPT_ID));
        enable_timestamping(&tx, f).unwrap();
        let mut out = Vec::new();
        assert_eq!(read_tx_timestamps(&tx, &mut out).unwrap(), 0);
        let before = crate::clock::realtime_ns();
        let pkts: Vec<[u8; 32]> = (0..5u8).map(|i| [i; 32]).collect();
        let refs: Vec<&[u8]> = pkts.iter().map(|p| p.as_slice()).collect();
        assert_eq!(send_batch(&tx, &refs).unwrap(), 5);
        let mut batch = RecvBatch::new(8, 64);
        let mut got = 0;
        while got < 5 {
            let n = recv_batch(&rx, &mut batch).unwrap();
            assert!(n > 0);
            got += n;
        }
        let after = crate::clock::realtime_ns();
        let t0 = std::time::Instant::now();
        while out.len() < 5 && t0.elapsed() < Duration::from_secs(2) {
            read_tx_timestamps(&tx, &mut out).unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let ids: Vec<u32> = out.iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4]);
        for s in &out {
            let ns = s.software_ns.expect("software stamp");
            assert!(
                ns + 1_000_000 >= before && ns <= after + 1_000_000,
                "{before} {ns} {after}"
            );
            assert_eq!(s.hardware_ns, None, "lo has no hardware stamps");
        }
    }

    #[test]
    fn tx_software_stamps_ipv4() {
        tx_stamps("127.0.0.1:0");
    }

    #[test]
    fn tx_software_stamps_ipv6() {
        tx_stamps("[::1]:0");
    }

    #[test]
    fn rx_software_stamps_fill_kernel_rx_ns() {
        let (tx, rx) = pair("127.0.0.1:0");
        let f = TimestampFlags::RX_SOFTWARE
            | TimestampFlags::SOFTWARE
            | TimestampFlags::RX_HARDWARE
            | TimestampFlags::RAW_HARDWARE;
        enable_timestamping(&rx, f).unwrap();
        let mut batch = RecvBatch::new(4, 64);
        // The first datagrams may be unstamped while the kernel turns RX
        // stamping on (deferred static key); wait until one is stamped.
        let t0 = std::time::Instant::now();
        loop {
            send_batch(&tx, &[b"warmup"]).unwrap();
            assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
            if batch.meta(0).kernel_rx_ns.is_some() {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(2),
                "RX stamping never turned on"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let before = crate::clock::realtime_ns();
        send_batch(&tx, &[b"hello"]).unwrap();
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
        let after = crate::clock::realtime_ns();
        let m = batch.meta(0);
        let ns = m.kernel_rx_ns.expect("software rx stamp");
        assert!(ns + 1_000_000 >= before && ns <= after + 1_000_000);
        assert_eq!(m.hw_rx_ns, None, "lo has no hardware stamps");
        // Both mechanisms at once still give one consistent stamp.
        enable_rx_timestamps(&rx).unwrap();
        send_batch(&tx, &[b"again"]).unwrap();
        assert_eq!(recv_batch(&rx, &mut batch).unwrap(), 1);
        assert!(batch.meta(0).kernel_rx_ns.unwrap() >= ns);
        enable_timestamping(&rx, TimestampFlags::empty()).unwrap();
    }

    fn ee_bytes(errno: u32, origin: u8, info: u32, data: u32) -> Vec<u8> {
        let mut ee = Vec::new();
        ee.extend_from_slice(&errno.to_ne_bytes());
        ee.extend_from_slice(&[origin, 0, 0, 0]);
        ee.extend_from_slice(&info.to_ne_bytes());
        ee.extend_from_slice(&data.to_ne_bytes());
        ee
    }

    #[test]
    fn tx_stamp_parser() {
        let mut ts = Vec::new();
        for (s, ns) in [(7i64, 1i64), (0, 0), (9, 2)] {
            ts.extend_from_slice(&s.to_ne_bytes());
            ts.extend_from_slice(&ns.to_ne_bytes());
        }
        let stamp = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &ts);
        let mut buf = stamp.clone();
        buf.extend(cmsg(
            libc::SOL_IP,
            libc::IP_RECVERR,
            &ee_bytes(libc::ENOMSG as u32, 4, 0, 17),
        ));
        assert_eq!(
            parse_tx_stamp(&buf),
            Some(TxStamp {
                id: 17,
                software_ns: Some(7_000_000_001),
                hardware_ns: Some(9_000_000_002),
            })
        );
        // A SCHED stamp (info 1) or a real ICMP error is not a send stamp.
        let mut sched = stamp.clone();
        sched.extend(cmsg(
            libc::SOL_IPV6,
            libc::IPV6_RECVERR,
            &ee_bytes(libc::ENOMSG as u32, 4, 1, 3),
        ));
        assert_eq!(parse_tx_stamp(&sched), None);
        let mut icmp = stamp;
        icmp.extend(cmsg(
            libc::SOL_IP,
            libc::IP_RECVERR,
            &ee_bytes(libc::ECONNREFUSED as u32, 2, 0, 0),
        ));
        assert_eq!(parse_tx_stamp(&icmp), None);
        for cut in 0..buf.len() {
            let _ = parse_tx_stamp(&buf[..cut]);
        }
        assert_eq!(parse_tx_stamp(&[]), None);
    }
}
