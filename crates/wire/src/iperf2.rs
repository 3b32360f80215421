//! iperf2's UDP datagram header (`struct UDP_datagram` in iperf 2.1's `payloads.h`): the
//! packet id's low 32 bits, the sender's wall clock (seconds, microseconds), then the id's
//! high 32 bits, all big-endian. Ids number a flow's datagrams from 1; the final datagram
//! carries the negated next id (the FIN that ends an `iperf -s` report). What follows the
//! header is iperf2's optional client header: all zero flags mean "none".

/// Bytes of the header.
pub const IPERF2_HEADER_LEN: usize = 16;

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
        Some(Iperf2Header {
            id: ((u64::from(high) << 32) | u64::from(low)) as i64,
            sec,
            usec,
        })
    }

    /// Writes the header at the start of `datagram` (at least [`IPERF2_HEADER_LEN`] bytes)
    /// and zeroes the client header's flags after it, so a receiver reads no options.
    pub fn emit(&self, datagram: &mut [u8]) {
        let id = self.id as u64;
        datagram[..4].copy_from_slice(&(id as u32).to_be_bytes());
        datagram[4..8].copy_from_slice(&self.sec.to_be_bytes());
        datagram[8..12].copy_from_slice(&self.usec.to_be_bytes());
        datagram[12..16].copy_from_slice(&((id >> 32) as u32).to_be_bytes());
        let flags_end = datagram.len().min(IPERF2_HEADER_LEN + 4);
        datagram[IPERF2_HEADER_LEN..flags_end].fill(0);
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

    /// Datagrams 1 and the FIN after 12, as iperf 2.1.8 (`iperf -c -u -l 100`) sent them.
    const FIRST: [u8; 20] = [
        0x00, 0x00, 0x00, 0x01, 0x6b, 0x06, 0x08, 0x66, 0x00, 0x0e, 0xaa, 0x59, 0x00, 0x00, 0x00,
        0x00, 0x48, 0x01, 0x00, 0x98,
    ];
    const FIN: [u8; 16] = [
        0xff, 0xff, 0xff, 0xf3, 0x6b, 0x06, 0x08, 0x68, 0x00, 0x00, 0xef, 0xcf, 0xff, 0xff, 0xff,
        0xff,
    ];

    #[test]
    fn iperf2s_datagrams_read_as_it_wrote_them() {
        let first = Iperf2Header::parse(&FIRST).unwrap();
        assert_eq!(
            first,
            Iperf2Header {
                id: 1,
                sec: 0x6b06_0866,
                usec: 0x000e_aa59
            }
        );
        assert_eq!(
            first.sent_ns(),
            0x6b06_0866 * 1_000_000_000 + 0x000e_aa59 * 1_000
        );
        assert!(!first.is_fin());
        let fin = Iperf2Header::parse(&FIN).unwrap();
        assert_eq!(fin.id, -13);
        assert!(fin.is_fin());
        assert_eq!(Iperf2Header::parse(&FIN[..15]), None);
    }

    #[test]
    fn emitted_headers_are_iperf2s_bytes_with_no_client_options() {
        let mut out = [0xaau8; 24];
        Iperf2Header::parse(&FIN).unwrap().emit(&mut out);
        assert_eq!(out[..16], FIN);
        assert_eq!(out[16..], [0, 0, 0, 0, 0xaa, 0xaa, 0xaa, 0xaa]);
        let mut exact = [0xaau8; IPERF2_HEADER_LEN];
        let big = Iperf2Header::at(0x1_0000_0002, 1_500_000_123_456);
        big.emit(&mut exact);
        assert_eq!(exact[..4], [0, 0, 0, 2]);
        assert_eq!(exact[12..], [0, 0, 0, 1]);
        assert_eq!((big.sec, big.usec), (1_500, 123));
        assert_eq!(Iperf2Header::parse(&exact), Some(big));
    }
}
