//! ICMP echo (RFC 792 for IPv4, RFC 4443 for IPv6): the 8-byte header (type, code, checksum,
//! identifier, sequence number), the RFC 1071 checksum, the 16-byte stamp flowlab puts at the
//! start of an echo's data (send time and a sequence number that does not wrap at 65536),
//! and the error messages a path returns about a request (fragmentation needed, packet too
//! big, unreachable, time exceeded). A raw IPv4 socket hands up the IP header too:
//! [`strip_ipv4_header`] takes it off.

use thiserror::Error;

/// Type, code, checksum, identifier, sequence number.
pub const ECHO_HEADER_LEN: usize = 8;
/// flowlab's stamp at the start of an echo's data: send time (ns) and sequence number.
pub const STAMP_LEN: usize = 16;
/// The least IPv4 header; options make it longer (IHL).
const IPV4_MIN_HEADER: usize = 20;

/// Which ICMP: the types differ, and only ICMPv4's checksum is the sender's to compute
/// (ICMPv6's covers a pseudo-header the kernel fills in).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    fn request_type(self) -> u8 {
        match self {
            Family::V4 => 8,
            Family::V6 => 128,
        }
    }

    fn reply_type(self) -> u8 {
        match self {
            Family::V4 => 0,
            Family::V6 => 129,
        }
    }
}

/// Why bytes are not an ICMP message this end can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum IcmpError {
    #[error("ICMP message of {0} bytes is shorter than its 8-byte header")]
    Short(usize),
    #[error("ICMP checksum mismatch")]
    Checksum,
    #[error("not an IPv4 ICMP packet")]
    NotIpv4Icmp,
    #[error("echo data of {0} bytes is shorter than flowlab's 16-byte stamp")]
    NoStamp(usize),
}

/// What a path said about a request it could not deliver whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathError {
    /// IPv4 type 3 code 4, with the next hop's MTU where the router gave one (RFC 1191).
    FragmentationNeeded { mtu: Option<u16> },
    /// ICMPv6 type 2.
    PacketTooBig { mtu: u32 },
    /// Destination unreachable, other codes.
    Unreachable { code: u8 },
    /// TTL or hop limit exceeded in transit, or reassembly time exceeded.
    TimeExceeded { code: u8 },
}

/// One parsed ICMP message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    EchoReply(Echo<'a>),
    EchoRequest(Echo<'a>),
    Error(PathError),
    /// Any other type: counted, not read.
    Other {
        kind: u8,
        code: u8,
    },
}

/// An echo request or reply: its identifier, sequence number and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo<'a> {
    pub ident: u16,
    pub seq: u16,
    pub data: &'a [u8],
}

/// flowlab's stamp in an echo's data: when the request left (CLOCK_REALTIME ns) and its
/// sequence number (the header's 16 bits are its low bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub sent_ns: u64,
    pub seq: u64,
}

impl Stamp {
    /// The stamp at the start of `data`.
    pub fn parse(data: &[u8]) -> Result<Stamp, IcmpError> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_be_bytes(data.get(at..at + 8)?.try_into().ok()?))
        };
        match (word(0), word(8)) {
            (Some(sent_ns), Some(seq)) => Ok(Stamp { sent_ns, seq }),
            _ => Err(IcmpError::NoStamp(data.len())),
        }
    }
}

/// The RFC 1071 Internet checksum of `bytes`.
pub use crate::checksum::internet as checksum;

/// Writes an echo request into `buf` (cleared first): header, the stamp, then the byte
/// pattern 0x10, 0x11, ... up to `data_len` bytes of data (at least the stamp's 16). ICMPv4's
/// checksum is filled in; ICMPv6's is left zero for the kernel.
pub fn emit_request(family: Family, ident: u16, stamp: Stamp, data_len: usize, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&[family.request_type(), 0, 0, 0]);
    buf.extend_from_slice(&ident.to_be_bytes());
    buf.extend_from_slice(&(stamp.seq as u16).to_be_bytes());
    buf.extend_from_slice(&stamp.sent_ns.to_be_bytes());
    buf.extend_from_slice(&stamp.seq.to_be_bytes());
    let pattern = (STAMP_LEN..data_len.max(STAMP_LEN)).map(|i| i as u8);
    buf.extend(pattern);
    if family == Family::V4 {
        let sum = checksum(buf);
        buf[2..4].copy_from_slice(&sum.to_be_bytes());
    }
}

/// Whether echo data after the stamp is the pattern [`emit_request`] wrote: a reply that
/// differs was corrupted on the way.
pub fn pattern_intact(data: &[u8]) -> bool {
    data.iter()
        .enumerate()
        .skip(STAMP_LEN)
        .all(|(i, &b)| b == i as u8)
}

/// Parses an ICMP message (no IP header). ICMPv4's checksum is checked; ICMPv6's was the
/// kernel's to check.
pub fn parse(family: Family, bytes: &[u8]) -> Result<Message<'_>, IcmpError> {
    if bytes.len() < ECHO_HEADER_LEN {
        return Err(IcmpError::Short(bytes.len()));
    }
    if family == Family::V4 && checksum(bytes) != 0 {
        return Err(IcmpError::Checksum);
    }
    let (kind, code) = (bytes[0], bytes[1]);
    let echo = || Echo {
        ident: u16::from_be_bytes([bytes[4], bytes[5]]),
        seq: u16::from_be_bytes([bytes[6], bytes[7]]),
        data: &bytes[ECHO_HEADER_LEN..],
    };
    let error = |e| Ok(Message::Error(e));
    match (family, kind) {
        (_, k) if k == family.reply_type() => Ok(Message::EchoReply(echo())),
        (_, k) if k == family.request_type() => Ok(Message::EchoRequest(echo())),
        (Family::V4, 3) if code == 4 => {
            let mtu = u16::from_be_bytes([bytes[6], bytes[7]]);
            error(PathError::FragmentationNeeded {
                mtu: (mtu != 0).then_some(mtu),
            })
        }
        (Family::V4, 3) | (Family::V6, 1) => error(PathError::Unreachable { code }),
        (Family::V6, 2) => error(PathError::PacketTooBig {
            mtu: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        }),
        (Family::V4, 11) | (Family::V6, 3) => error(PathError::TimeExceeded { code }),
        _ => Ok(Message::Other { kind, code }),
    }
}

/// The ICMP message inside an IPv4 packet, as a raw socket receives it: the header's length
/// (IHL) skipped after checking it is version 4 carrying ICMP.
pub fn strip_ipv4_header(packet: &[u8]) -> Result<&[u8], IcmpError> {
    let header = packet.first().map_or(0, |b| usize::from(b & 0x0f) * 4);
    let is_icmp = packet.first().is_some_and(|b| b >> 4 == 4) && packet.get(9) == Some(&1);
    match packet.get(header..) {
        Some(icmp) if is_icmp && header >= IPV4_MIN_HEADER => Ok(icmp),
        _ => Err(IcmpError::NotIpv4Icmp),
    }
}

/// Bytes of IP and ICMP headers around `data_len` bytes of echo data.
pub fn datagram_len(family: Family, data_len: usize) -> usize {
    let ip = match family {
        Family::V4 => IPV4_MIN_HEADER,
        Family::V6 => 40,
    };
    ip + ECHO_HEADER_LEN + data_len
}

/// How many IP fragments a datagram of `datagram_len` bytes leaves as over an `mtu`: IPv4
/// fragments carry multiples of 8 data bytes after a 20-byte header; IPv6 ones also carry
/// an 8-byte fragment header. 1 when it fits (or the MTU is too small to say).
pub fn fragments(family: Family, datagram_len: usize, mtu: usize) -> usize {
    let (ip, extra) = match family {
        Family::V4 => (IPV4_MIN_HEADER, 0),
        Family::V6 => (40, 8),
    };
    if datagram_len <= mtu || mtu < ip + extra + 8 {
        return 1;
    }
    let per_fragment = (mtu - ip - extra) / 8 * 8;
    (datagram_len - ip).div_ceil(per_fragment)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo request of id 0x1234, seq 1 and 16 zero bytes of data; its checksum worked by
    /// hand: 0x0800 + 0x1234 + 0x0001 = 0x1a35, complemented.
    const PING_REQUEST: [u8; 24] = [
        0x08, 0x00, 0xe5, 0xca, 0x12, 0x34, 0x00, 0x01, // type 8, checksum, id, seq
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn checksum_follows_rfc_1071() {
        // RFC 1071 §3's example: the words 0001 f203 f4f5 f6f7 sum to ddf2, so the checksum
        // is its complement.
        let rfc = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&rfc), !0xddf2);
        assert_eq!(checksum(&PING_REQUEST), 0);
        // An odd length pads the last byte on the right.
        assert_eq!(checksum(&[0xab]), !0xab00);
    }

    #[test]
    fn requests_match_their_bytes() {
        let mut buf = Vec::new();
        let stamp = Stamp {
            sent_ns: 0x0102_0304_0506_0708,
            seq: 0x1_0002,
        };
        emit_request(Family::V4, 0xbeef, stamp, 20, &mut buf);
        // Checksum 0x06d3: the thirteen words summed by hand (Python), folded, complemented.
        let expected = [
            0x08, 0x00, 0x06, 0xd3, 0xbe, 0xef, 0x00, 0x02, // seq: the low 16 bits
            0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // sent_ns
            0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x02, // seq
            0x10, 0x11, 0x12, 0x13, // pattern
        ];
        assert_eq!(buf, expected);
        assert_eq!(checksum(&buf), 0);
        emit_request(Family::V6, 0xbeef, stamp, 4, &mut buf);
        assert_eq!(
            buf.len(),
            ECHO_HEADER_LEN + STAMP_LEN,
            "data holds the stamp"
        );
        assert_eq!(
            &buf[..4],
            &[128, 0, 0, 0],
            "ICMPv6 checksum left to the kernel"
        );
    }

    #[test]
    fn replies_parse_back_to_their_stamps() {
        let mut buf = Vec::new();
        let stamp = Stamp {
            sent_ns: 99,
            seq: 7,
        };
        emit_request(Family::V4, 1, stamp, 64, &mut buf);
        buf[0] = 0; // the reply's type; the checksum drops by 8 << 8
        let sum = u16::from_be_bytes([buf[2], buf[3]]).wrapping_add(0x0800);
        buf[2..4].copy_from_slice(&sum.to_be_bytes());
        let Ok(Message::EchoReply(echo)) = parse(Family::V4, &buf) else {
            panic!("not a reply: {:?}", parse(Family::V4, &buf));
        };
        assert_eq!((echo.ident, echo.seq, echo.data.len()), (1, 7, 64));
        assert_eq!(Stamp::parse(echo.data), Ok(stamp));
        assert!(pattern_intact(echo.data));
        buf[30] ^= 1;
        assert_eq!(parse(Family::V4, &buf), Err(IcmpError::Checksum));
        let mut v6 = vec![129, 0, 0, 0, 0, 1, 0, 7];
        v6.extend_from_slice(&buf[8..]);
        assert!(matches!(parse(Family::V6, &v6), Ok(Message::EchoReply(_))));
        assert!(!pattern_intact(&v6[8..]), "the flipped bit is seen");
    }

    #[test]
    fn path_errors_say_what_the_path_said() {
        let mut frag = [3, 4, 0, 0, 0, 0, 0x05, 0xdc];
        let sum = checksum(&frag);
        frag[2..4].copy_from_slice(&sum.to_be_bytes());
        assert_eq!(
            parse(Family::V4, &frag),
            Ok(Message::Error(PathError::FragmentationNeeded {
                mtu: Some(1500)
            }))
        );
        let too_big = [2, 0, 0, 0, 0, 0, 0x05, 0x00];
        assert_eq!(
            parse(Family::V6, &too_big),
            Ok(Message::Error(PathError::PacketTooBig { mtu: 1280 }))
        );
        let hops = [3, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            parse(Family::V6, &hops),
            Ok(Message::Error(PathError::TimeExceeded { code: 0 }))
        );
        assert_eq!(parse(Family::V6, &[1, 2, 3]), Err(IcmpError::Short(3)));
        assert_eq!(Stamp::parse(&[0; 15]), Err(IcmpError::NoStamp(15)));
    }

    #[test]
    fn ipv4_headers_come_off_by_their_length() {
        let mut packet = vec![0x46, 0, 0, 0, 0, 0, 0, 0, 64, 1];
        packet.resize(24, 0); // 24 bytes: IHL 6 with one option word
        packet.extend_from_slice(&PING_REQUEST);
        assert_eq!(strip_ipv4_header(&packet), Ok(&PING_REQUEST[..]));
        packet[9] = 17;
        assert_eq!(strip_ipv4_header(&packet), Err(IcmpError::NotIpv4Icmp));
        assert_eq!(strip_ipv4_header(&[0x4f]), Err(IcmpError::NotIpv4Icmp));
        assert_eq!(strip_ipv4_header(&[]), Err(IcmpError::NotIpv4Icmp));
    }

    #[test]
    fn fragments_count_as_the_kernel_cuts() {
        // ping -s 2048 over 1500: 2076 IP bytes in 1480 + 576 data bytes.
        assert_eq!(datagram_len(Family::V4, 2048), 2076);
        assert_eq!(fragments(Family::V4, 2076, 1500), 2);
        assert_eq!(
            fragments(Family::V4, datagram_len(Family::V4, 4096), 1500),
            3
        );
        assert_eq!(fragments(Family::V4, 1500, 1500), 1);
        // IPv6: 1448 data bytes a fragment at 1500.
        assert_eq!(
            fragments(Family::V6, datagram_len(Family::V6, 2900), 1500),
            3
        );
        assert_eq!(fragments(Family::V4, 9000, 10), 1);
    }
}
