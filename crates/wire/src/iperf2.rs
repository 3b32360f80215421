//! iperf2's UDP datagram header (`struct UDP_datagram` in iperf 2.1's `payloads.h`): the
//! packet id's low 32 bits, the sender's wall clock (seconds, microseconds), then the id's
//! high 32 bits, all big-endian. Ids number a flow's datagrams from 1; the final datagram
//! carries the negated next id (the FIN that ends an `iperf -s` report). Next comes iperf2's
//! client header, whose first word holds its flags: as iperf2's server does, the id is read
//! as 64 bits only when they say so (`HEADER_SEQNO64B`), else as a signed 32-bit number.

/// Bytes of the header.
pub const IPERF2_HEADER_LEN: usize = 16;
/// The client header's flag that makes the id's high 32 bits part of it.
pub const HEADER_SEQNO64B: u32 = 0x0800_0000;
/// Where the client header's flags end.
const FLAGS_END: usize = IPERF2_HEADER_LEN + 4;

/// One datagram's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iperf2Header {
    /// The datagram's number from 1; negative on the final datagram.
    pub id: i64,
    pub sec: u32,
    pub usec: u32,
}

impl Iperf2Header {
    /// Reads a datagram's header; `None` when it is shorter than the header.
    pub fn parse(datagram: &[u8]) -> Option<Iperf2Header> {
        let word = |at: usize| {
            datagram
                .get(at..at + 4)
                .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let (low, sec, usec, high) = (word(0)?, word(4)?, word(8)?, word(12)?);
        let flags = word(IPERF2_HEADER_LEN).unwrap_or(0);
        let id = match flags & HEADER_SEQNO64B {
            0 => i64::from(low as i32),
            _ => ((u64::from(high) << 32) | u64::from(low)) as i64,
        };
        Some(Iperf2Header { id, sec, usec })
    }

    /// Writes the header at the start of `datagram` (at least [`IPERF2_HEADER_LEN`] bytes)
    /// and, where it fits, the client header's flags: 64-bit ids and nothing else, so a
    /// receiver reads the whole id and no test options.
    pub fn emit(&self, datagram: &mut [u8]) {
        let id = self.id as u64;
        datagram[..4].copy_from_slice(&(id as u32).to_be_bytes());
        datagram[4..8].copy_from_slice(&self.sec.to_be_bytes());
        datagram[8..12].copy_from_slice(&self.usec.to_be_bytes());
        datagram[12..16].copy_from_slice(&((id >> 32) as u32).to_be_bytes());
        if let Some(flags) = datagram.get_mut(IPERF2_HEADER_LEN..FLAGS_END) {
            flags.copy_from_slice(&HEADER_SEQNO64B.to_be_bytes());
        }
    }

    /// A header stamped at `wall_ns` (nanoseconds since the Unix epoch).
    pub fn at(id: i64, wall_ns: u64) -> Iperf2Header {
        Iperf2Header {
            id,
            sec: (wall_ns / 1_000_000_000) as u32,
            usec: (wall_ns % 1_000_000_000 / 1_000) as u32,
        }
    }

    /// The sender's wall clock in nanoseconds since the Unix epoch.
    pub fn sent_ns(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.usec) * 1_000
    }

    /// The final datagram, whose negative id ends the receiver's report.
    pub fn is_fin(&self) -> bool {
        self.id < 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagram 1 and the FIN after datagram 12, as iperf 2.1.8 (`iperf -c 127.0.0.1 -u -l 100
    /// -n 1200`) sent them: the client header's flags 0x48010098 include `HEADER_SEQNO64B`.
    const FIRST: [u8; 24] = [
        0x00, 0x00, 0x00, 0x01, 0x6b, 0x06, 0x13, 0x7f, 0x00, 0x06, 0x7d, 0x25, 0x00, 0x00, 0x00,
        0x00, 0x48, 0x01, 0x00, 0x98, 0x00, 0x00, 0x00, 0x01,
    ];
    const FIN: [u8; 24] = [
        0xff, 0xff, 0xff, 0xf3, 0x6b, 0x06, 0x13, 0x7f, 0x00, 0x06, 0x9e, 0x65, 0xff, 0xff, 0xff,
        0xff, 0x48, 0x01, 0x00, 0x98, 0x00, 0x00, 0x00, 0x01,
    ];

    #[test]
    fn iperf2s_datagrams_read_as_it_wrote_them() {
        let first = Iperf2Header::parse(&FIRST).unwrap();
        assert_eq!(
            first,
            Iperf2Header {
                id: 1,
                sec: 0x6b06_137f,
                usec: 0x0006_7d25
            }
        );
        assert_eq!(
            first.sent_ns(),
            0x6b06_137f * 1_000_000_000 + 0x0006_7d25 * 1_000
        );
        assert!(!first.is_fin());
        let fin = Iperf2Header::parse(&FIN).unwrap();
        assert_eq!(fin.id, -13);
        assert!(fin.is_fin());
        assert_eq!(Iperf2Header::parse(&FIN[..15]), None);
    }

    /// Without `HEADER_SEQNO64B` (no client header, or a 32-bit sender) iperf2's server reads
    /// the low word alone as a signed number; so does this parser.
    #[test]
    fn ids_are_32_bits_unless_the_flags_say_64() {
        let mut legacy = FIN;
        legacy[12..16].fill(0);
        legacy[16..20].fill(0);
        assert_eq!(Iperf2Header::parse(&legacy).unwrap().id, -13);
        assert_eq!(Iperf2Header::parse(&legacy[..16]).unwrap().id, -13);
        let mut wide = FIRST;
        wide[12..16].copy_from_slice(&[0, 0, 0, 1]);
        assert_eq!(Iperf2Header::parse(&wide).unwrap().id, 0x1_0000_0001);
        wide[16..20].fill(0);
        assert_eq!(Iperf2Header::parse(&wide).unwrap().id, 1);
    }

    #[test]
    fn emitted_headers_are_iperf2s_bytes_with_64_bit_ids_and_no_options() {
        let mut out = [0xaau8; 24];
        Iperf2Header::parse(&FIN).unwrap().emit(&mut out);
        assert_eq!(out[..16], FIN[..16]);
        assert_eq!(out[16..], [0x08, 0, 0, 0, 0xaa, 0xaa, 0xaa, 0xaa]);
        let big = Iperf2Header::at(0x1_0000_0002, 1_500_000_123_456);
        assert_eq!((big.sec, big.usec), (1_500, 123));
        big.emit(&mut out);
        assert_eq!(out[..4], [0, 0, 0, 2]);
        assert_eq!(out[12..16], [0, 0, 0, 1]);
        assert_eq!(Iperf2Header::parse(&out), Some(big));
        // No room for flags: the header alone, read back as 32 bits.
        let mut exact = [0xaau8; IPERF2_HEADER_LEN];
        big.emit(&mut exact);
        assert_eq!(exact[..12], out[..12]);
        assert_eq!(Iperf2Header::parse(&exact).unwrap().id, 2);
    }
}
