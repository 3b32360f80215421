//! UDP streams: the 4-byte "connect" handshake and the header of every datagram.

/// A client's first datagram on a UDP stream: `UDP_CONNECT_MSG`, 0x36373839 written in
/// little-endian order (and the swapped constant on big-endian hosts), so "9876" on the wire.
pub const CONNECT_MSG: [u8; 4] = *b"9876";
/// The server's answer, `UDP_CONNECT_REPLY`: "6789" on the wire.
pub const CONNECT_REPLY: [u8; 4] = *b"6789";
/// What older servers answer: 987654321 in the host's order (little-endian here).
pub const LEGACY_CONNECT_REPLY: [u8; 4] = 987_654_321u32.to_le_bytes();

/// A UDP datagram's header (`iperf_udp_send`): the sender's clock (seconds, microseconds)
/// and the packet's number from 1, all big-endian; the number is 32 bits, or 64 with
/// `--udp-counters-64bit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    pub sec: u32,
    pub usec: u32,
    pub count: u64,
}

impl UdpHeader {
    pub fn len(counters_64bit: bool) -> usize {
        if counters_64bit {
            16
        } else {
            12
        }
    }

    /// Reads a datagram's header; `None` when it is shorter than the header.
    pub fn parse(datagram: &[u8], counters_64bit: bool) -> Option<UdpHeader> {
        let word = |at: usize| {
            Some(u32::from_be_bytes(
                datagram.get(at..at + 4)?.try_into().ok()?,
            ))
        };
        let count = match counters_64bit {
            true => u64::from_be_bytes(datagram.get(8..16)?.try_into().ok()?),
            false => u64::from(word(8)?),
        };
        Some(UdpHeader {
            sec: word(0)?,
            usec: word(4)?,
            count,
        })
    }

    /// Writes the header at the start of `datagram` (at least [`UdpHeader::len`] bytes).
    pub fn emit(&self, datagram: &mut [u8], counters_64bit: bool) {
        datagram[..4].copy_from_slice(&self.sec.to_be_bytes());
        datagram[4..8].copy_from_slice(&self.usec.to_be_bytes());
        match counters_64bit {
            true => datagram[8..16].copy_from_slice(&self.count.to_be_bytes()),
            false => datagram[8..12].copy_from_slice(&(self.count as u32).to_be_bytes()),
        }
    }

    /// The sender's clock in nanoseconds.
    pub fn sent_ns(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.usec) * 1_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handshake_bytes_are_iperf_h_constants_in_little_endian_order() {
        assert_eq!(CONNECT_MSG, 0x3637_3839u32.to_le_bytes());
        assert_eq!(CONNECT_REPLY, 0x3938_3736u32.to_le_bytes());
        assert_eq!(LEGACY_CONNECT_REPLY, [0xb1, 0x68, 0xde, 0x3a]);
    }

    #[test]
    fn headers_are_big_endian_seconds_microseconds_and_count() {
        // Packet 3 sent at 1000.000500 s, as iperf_udp_send lays it out with htonl.
        let short = [0, 0, 0x03, 0xe8, 0, 0, 0x01, 0xf4, 0, 0, 0, 3];
        let header = UdpHeader {
            sec: 1000,
            usec: 500,
            count: 3,
        };
        assert_eq!(UdpHeader::parse(&short, false), Some(header));
        let mut long = [0u8; 16];
        header.emit(&mut long, true);
        assert_eq!(long[8..], [0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(UdpHeader::parse(&long, true), Some(header));
        let mut out = [0u8; 12];
        header.emit(&mut out, false);
        assert_eq!(out, short);
        assert_eq!(header.sent_ns(), 1_000_000_500_000);
        assert_eq!(UdpHeader::parse(&short[..11], false), None);
        assert_eq!(UdpHeader::parse(&short, true), None);
    }
}
