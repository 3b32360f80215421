//! What a test is when nothing says otherwise. `flowlab test` without flags and an experiment
//! flow for the keys its file leaves out both start from [`TestSpec::new`], so the two agree.

use flowlab_traffic::PacingMode;

use crate::{Direction, Protocol, SocketOptions, TestSpec};

/// Length of a test given neither a duration nor a count.
pub const DEFAULT_DURATION_NS: u64 = 10_000_000_000;
/// Rate of a paced test (UDP, native frames); TCP sends as fast as it can.
pub const DEFAULT_PACED_RATE_BPS: u64 = 1_000_000;
/// UDP payload: fits the 1280-byte minimum IPv6 MTU with its headers.
pub const DEFAULT_UDP_SIZE: u32 = 1200;
/// Native frame payload.
pub const DEFAULT_RAW_SIZE: u32 = 1000;
/// ICMP echo data: ping's default (64 bytes of ICMP with the header).
pub const DEFAULT_ICMP_SIZE: u32 = 56;
/// TCP write size. Measured on a veth, one connection: 256 kB writes gave 18-25 Gbit/s where
/// 128 KiB and 256 KiB gave 12-15 (iperf3's 128 KiB: 14-16), and 500 kB or 1 MB 15-21.
pub const DEFAULT_TCP_SIZE: u32 = 256_000;

impl TestSpec {
    /// A test of `protocol` in `direction` with every other field at its default: one flow
    /// for 10 s, UDP at 1 Mbit/s in 1200-byte packets, TCP at max rate in 256 kB writes,
    /// native frames at 1 Mbit/s in 1000-byte frames, ICMP echoes of 56 bytes one a second
    /// (as ping); no traffic model, kernel socket defaults, seed 0, `auto` pacing.
    pub fn new(protocol: Protocol, direction: Direction) -> TestSpec {
        TestSpec {
            protocol,
            direction,
            rate_bps: default_rate_bps(protocol),
            size: default_size(protocol),
            duration_ns: Some(DEFAULT_DURATION_NS),
            count: None,
            interval_ns: None,
            flows: 1,
            client_udp_ports: Vec::new(),
            raw: None,
            busy_poll: false,
            packet_log: false,
            socket: SocketOptions::default(),
            traffic: None,
            seed: 0,
            authenticated_packets: false,
            echo_every: None,
            omit_ns: None,
            pacing: PacingMode::Auto,
            multicast: None,
        }
    }
}

/// The default rate of `protocol`; `None` is max rate.
pub fn default_rate_bps(protocol: Protocol) -> Option<u64> {
    match protocol {
        Protocol::Udp | Protocol::Raw => Some(DEFAULT_PACED_RATE_BPS),
        Protocol::Tcp => None,
        Protocol::Icmp => Some(icmp_rate_bps(DEFAULT_ICMP_SIZE)),
    }
}

/// The rate of one ICMP echo request a second (ping's default interval) at `size` bytes of
/// data: what an ICMP test's rate is when only its size is given.
pub fn icmp_rate_bps(size: u32) -> u64 {
    u64::from(size.max(1)) * 8
}

/// The default packet (or write) size of `protocol`.
pub fn default_size(protocol: Protocol) -> u32 {
    match protocol {
        Protocol::Udp => DEFAULT_UDP_SIZE,
        Protocol::Raw => DEFAULT_RAW_SIZE,
        Protocol::Tcp => DEFAULT_TCP_SIZE,
        Protocol::Icmp => DEFAULT_ICMP_SIZE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_documented_values() {
        let udp = TestSpec::new(Protocol::Udp, Direction::Oneway);
        assert_eq!((udp.rate_bps, udp.size), (Some(1_000_000), 1200));
        assert_eq!(
            (udp.duration_ns, udp.count, udp.flows),
            (Some(10_000_000_000), None, 1)
        );
        let tcp = TestSpec::new(Protocol::Tcp, Direction::Reverse);
        assert_eq!(
            (tcp.rate_bps, tcp.size, tcp.direction),
            (None, 256_000, Direction::Reverse)
        );
        let raw = TestSpec::new(Protocol::Raw, Direction::Loopback);
        assert_eq!((raw.rate_bps, raw.size), (Some(1_000_000), 1000));
        let icmp = TestSpec::new(Protocol::Icmp, Direction::Loopback);
        assert_eq!((icmp.rate_bps, icmp.size), (Some(448), 56));
        assert_eq!(icmp.packet_interval_ns(), Some(1_000_000_000));
        for spec in [udp, tcp, raw, icmp] {
            spec.validate().unwrap();
        }
    }
}
