//! The Ethernet, IP and UDP headers in front of a datagram that leaves as a whole frame
//! through a packet socket (`--packet-socket`): built once per flow, then written for each
//! packet's length. The UDP checksum is left to the device, as a local stack leaves it
//! (CHECKSUM_PARTIAL): its field holds the pseudo-header's folded sum, and the frame's vnet
//! header tells the kernel where the checksum starts.

use std::net::{IpAddr, SocketAddr};

use crate::checksum::{add_words, fold};

/// Bytes of an Ethernet II header.
pub const ETH_HEADER_LEN: usize = 14;
/// Bytes of UDP's header.
pub const UDP_HEADER_LEN: usize = 8;
/// The longest header: Ethernet, IPv6, UDP.
pub const MAX_HEADER_LEN: usize = ETH_HEADER_LEN + 40 + UDP_HEADER_LEN;
/// Where UDP's checksum field lies in its header.
pub const UDP_CHECKSUM_OFFSET: usize = 6;

const UDP: u8 = 17;
const HOP_LIMIT: u8 = 64;

/// One flow's headers, without the lengths and checksums each packet sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFrameHeader {
    bytes: [u8; MAX_HEADER_LEN],
    len: usize,
    v6: bool,
    /// The raw sum of the pseudo-header's addresses and protocol.
    pseudo_sum: u64,
}

impl UdpFrameHeader {
    /// The headers of datagrams from `src` to `dst` (IPv4-mapped addresses as IPv4) with
    /// DiffServ code point `dscp`, from `src_mac` to the next hop's `dst_mac`; `None` if the
    /// two addresses are not of one family.
    pub fn new(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src: SocketAddr,
        dst: SocketAddr,
        dscp: u8,
    ) -> Option<UdpFrameHeader> {
        let mut bytes = [0u8; MAX_HEADER_LEN];
        bytes[..6].copy_from_slice(&dst_mac);
        bytes[6..12].copy_from_slice(&src_mac);
        let tos = dscp << 2;
        let (ip_len, pseudo_sum) = match (src.ip().to_canonical(), dst.ip().to_canonical()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                bytes[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut bytes[ETH_HEADER_LEN..ETH_HEADER_LEN + 20];
                ip[0] = 0x45;
                ip[1] = tos;
                ip[6] = 0x40; // don't fragment, as Linux sends UDP
                ip[8] = HOP_LIMIT;
                ip[9] = UDP;
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                (20, add_words(&ip[12..20]) + u64::from(UDP))
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                bytes[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
                let ip = &mut bytes[ETH_HEADER_LEN..ETH_HEADER_LEN + 40];
                ip[0] = 0x60 | tos >> 4;
                ip[1] = tos << 4;
                ip[6] = UDP;
                ip[7] = HOP_LIMIT;
                ip[8..24].copy_from_slice(&s.octets());
                ip[24..40].copy_from_slice(&d.octets());
                (40, add_words(&ip[8..40]) + u64::from(UDP))
            }
            _ => return None,
        };
        let len = ETH_HEADER_LEN + ip_len + UDP_HEADER_LEN;
        let udp = &mut bytes[len - UDP_HEADER_LEN..len];
        udp[..2].copy_from_slice(&src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        Some(UdpFrameHeader {
            bytes,
            len,
            v6: ip_len == 40,
            pseudo_sum,
        })
    }

    /// Bytes of the headers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a header always has its Ethernet, IP and UDP parts.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Where the UDP header starts in the frame: the device's checksum covers the rest.
    pub fn checksum_start(&self) -> usize {
        self.len - UDP_HEADER_LEN
    }

    /// The largest payload of one frame: IP's 16-bit lengths (the link's MTU is the caller's).
    pub fn max_payload(&self) -> usize {
        let ip_header = if self.v6 { 0 } else { 20 };
        usize::from(u16::MAX) - ip_header - UDP_HEADER_LEN
    }

    /// Writes the headers of a packet of `payload_len` bytes (at most [`Self::max_payload`])
    /// with IPv4 identification `ip_id` into the first [`Self::len`] bytes of `out`.
    ///
    /// # Panics
    /// If `out` is shorter than the headers or the payload longer than the most.
    pub fn emit(&self, out: &mut [u8], payload_len: usize, ip_id: u16) {
        assert!(payload_len <= self.max_payload(), "payload too long");
        let out = &mut out[..self.len];
        out.copy_from_slice(&self.bytes[..self.len]);
        let udp_len = (UDP_HEADER_LEN + payload_len) as u16;
        let ip = &mut out[ETH_HEADER_LEN..self.len - UDP_HEADER_LEN];
        if self.v6 {
            ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
        } else {
            ip[2..4].copy_from_slice(&(udp_len + 20).to_be_bytes());
            ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
            let sum = !fold(add_words(ip));
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        let udp = &mut out[self.len - UDP_HEADER_LEN..];
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        let pseudo = fold(self.pseudo_sum + u64::from(udp_len));
        udp[6..8].copy_from_slice(&pseudo.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::internet;
    use proptest::prelude::*;

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];

    /// The frame of `payload` with its UDP checksum completed as a device would.
    fn completed(h: &UdpFrameHeader, payload: &[u8], ip_id: u16) -> Vec<u8> {
        let mut f = vec![0u8; h.len()];
        h.emit(&mut f, payload.len(), ip_id);
        f.extend_from_slice(payload);
        let start = h.checksum_start();
        let sum = !fold(add_words(&f[start..]));
        f[start + 6..start + 8].copy_from_slice(&sum.to_be_bytes());
        f
    }

    /// IPv4 UDP 10.77.0.1:40000 → 10.77.0.2:9999, payload "flowlab!", ID 1: the frame the
    /// emulator's checksum test holds (its UDP checksum 0x837b computed with Python's struct
    /// module), here with DF set and TTL 64 (IP checksum 0x262c, computed the same way).
    #[test]
    fn an_ipv4_frame_matches_its_bytes() {
        let src = "10.77.0.1:40000".parse().unwrap();
        let dst = "10.77.0.2:9999".parse().unwrap();
        let h = UdpFrameHeader::new(A, B, src, dst, 0).unwrap();
        assert_eq!(h.len(), 42);
        let f = completed(&h, b"flowlab!", 1);
        let mut want = Vec::new();
        want.extend_from_slice(&B);
        want.extend_from_slice(&A);
        want.extend_from_slice(&[0x08, 0x00]);
        want.extend_from_slice(&[
            0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, 17, 0x26, 0x2c, 10, 77, 0, 1, 10, 77, 0, 2,
        ]);
        want.extend_from_slice(&[0x9c, 0x40, 0x27, 0x0f, 0, 16, 0x83, 0x7b]);
        want.extend_from_slice(b"flowlab!");
        assert_eq!(f, want);
        assert_eq!(internet(&f[14..34]), 0, "IPv4 header checksum");
    }

    #[test]
    fn ipv6_carries_the_traffic_class_and_the_payload_length() {
        let src = "[fd00::1]:40000".parse().unwrap();
        let dst = "[fd00::2]:9999".parse().unwrap();
        let h = UdpFrameHeader::new(A, B, src, dst, 46).unwrap();
        assert_eq!(h.len(), 62);
        let f = completed(&h, &[7u8; 100], 0);
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        // Version 6, traffic class 46 << 2 = 0xb8 across the first two bytes.
        assert_eq!(&f[14..16], &[0x6b, 0x80]);
        assert_eq!(&f[18..20], &108u16.to_be_bytes());
        assert_eq!((f[20], f[21]), (17, 64));
        // The receiver's check: pseudo-header + UDP segment sums to all ones.
        let mut sum = add_words(&f[22..54]) + 17 + 108;
        sum += add_words(&f[54..]);
        assert_eq!(fold(sum), 0xffff);
    }

    #[test]
    fn mixed_families_have_no_header() {
        let src = "10.0.0.1:1".parse().unwrap();
        let dst = "[fd00::2]:2".parse().unwrap();
        assert!(UdpFrameHeader::new(A, B, src, dst, 0).is_none());
        let mapped = "[::ffff:10.0.0.2]:2".parse().unwrap();
        let h = UdpFrameHeader::new(A, B, src, mapped, 0).unwrap();
        assert_eq!(h.len(), 42);
    }

    proptest! {
        /// Whatever the addresses, ports, DSCP and length, a receiver's checks pass: the IPv4
        /// header sums to zero, and pseudo-header plus segment to all ones once the device
        /// has completed the checksum from the seed left in its field.
        #[test]
        fn every_ipv4_frame_checks(
            s in any::<u32>(), d in any::<u32>(), sp in any::<u16>(), dp in any::<u16>(),
            dscp in 0u8..64, id in any::<u16>(), payload in proptest::collection::vec(any::<u8>(), 0..1500),
        ) {
            let src = SocketAddr::from((s.to_be_bytes(), sp));
            let dst = SocketAddr::from((d.to_be_bytes(), dp));
            let h = UdpFrameHeader::new(A, B, src, dst, dscp).unwrap();
            let f = completed(&h, &payload, id);
            prop_assert_eq!(internet(&f[14..34]), 0);
            prop_assert_eq!(f[15], dscp << 2);
            let udp_len = 8 + payload.len() as u64;
            let sum = add_words(&f[26..34]) + 17 + udp_len + add_words(&f[34..]);
            prop_assert_eq!(fold(sum), 0xffff);
        }
    }
}
