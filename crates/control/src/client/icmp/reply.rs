//! What an ICMP echo test makes of each message it receives, and the notes it writes about
//! fragmentation: sans-IO, so tests hand in bytes.

use std::collections::BTreeMap;

use flowlab_wire::icmp::{self, Family, Message, PathError, Stamp};

/// How the socket hands messages up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    pub family: Family,
    /// A raw IPv4 socket: each message comes with its IP header.
    pub ipv4_header: bool,
    /// A raw socket hears every echo reply from the host: only this identifier is ours.
    /// A ping socket's kernel already sorted them (`None`).
    pub ident: Option<u16>,
}

/// One received message, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// A reply to request `stamp.seq`, with `data_len` bytes of data, `intact` when they
    /// are the bytes sent.
    Echo {
        stamp: Stamp,
        data_len: u32,
        intact: bool,
    },
    /// The path's word about a request.
    Path(PathError),
    /// Not ours: another process's reply, our own request looped back, other ICMP.
    Ignored,
    /// Too short, a bad checksum, or a reply without flowlab's stamp.
    Malformed,
}

/// Reads one received message; `sent` requests have left so far, so a reply naming a later
/// one is not ours.
pub fn read(framing: Framing, bytes: &[u8], sent: u64) -> Reply {
    let message = match framing.ipv4_header {
        true => icmp::strip_ipv4_header(bytes),
        false => Ok(bytes),
    };
    let parsed = message.and_then(|m| icmp::parse(framing.family, m));
    let echo = match parsed {
        Ok(Message::EchoReply(echo)) => echo,
        Ok(Message::Error(e)) => return Reply::Path(e),
        Ok(Message::EchoRequest(_) | Message::Other { .. }) => return Reply::Ignored,
        Err(_) => return Reply::Malformed,
    };
    if framing.ident.is_some_and(|id| id != echo.ident) {
        return Reply::Ignored;
    }
    match Stamp::parse(echo.data) {
        Ok(stamp) if stamp.seq < sent && stamp.seq as u16 == echo.seq => Reply::Echo {
            stamp,
            data_len: u32::try_from(echo.data.len()).unwrap_or(u32::MAX),
            intact: icmp::pattern_intact(echo.data),
        },
        Ok(_) => Reply::Ignored,
        Err(_) => Reply::Malformed,
    }
}

/// What happens to requests of `size` bytes of data over a path MTU of `mtu`: `None` when
/// they fit in one packet.
pub fn fragmentation_note(
    family: Family,
    size: u32,
    mtu: u32,
    dont_fragment: bool,
) -> Option<String> {
    let datagram = icmp::datagram_len(family, size as usize);
    let mtu = mtu as usize;
    if datagram <= mtu {
        return None;
    }
    Some(match dont_fragment {
        true => format!(
            "refused: each request is a {datagram}-byte IP datagram, above the path MTU of {mtu} B, and don't-fragment is set: the kernel sent none"
        ),
        false => format!(
            "fragmented: each request is a {datagram}-byte IP datagram, sent as {} fragments over the path MTU of {mtu} B; losing any fragment loses the echo",
            icmp::fragments(family, datagram, mtu)
        ),
    })
}

/// The path's answers, counted by what they said, as notes.
pub fn path_notes(heard: &BTreeMap<String, u64>) -> Vec<String> {
    heard
        .iter()
        .map(|(what, n)| format!("the path answered {n} request(s) with {what}"))
        .collect()
}

/// A path error in words, the key it is counted under.
pub fn describe(e: PathError) -> String {
    match e {
        PathError::FragmentationNeeded { mtu: Some(m) } => {
            format!("'fragmentation needed' (next-hop MTU {m} B)")
        }
        PathError::FragmentationNeeded { mtu: None } => "'fragmentation needed'".into(),
        PathError::PacketTooBig { mtu } => format!("'packet too big' (MTU {mtu} B)"),
        PathError::Unreachable { code } => format!("'destination unreachable' (code {code})"),
        PathError::TimeExceeded { code } => format!("'time exceeded' (code {code})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(ident: u16, seq: u64, data: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        let stamp = Stamp { sent_ns: 5, seq };
        icmp::emit_request(Family::V6, ident, stamp, data, &mut buf);
        buf[0] = 129; // the kernel's reply: type changed, the rest as sent
        buf
    }

    const PING: Framing = Framing {
        family: Family::V6,
        ipv4_header: false,
        ident: None,
    };

    #[test]
    fn replies_are_ours_only_when_their_stamp_and_ident_agree() {
        let stamp = Stamp { sent_ns: 5, seq: 3 };
        let ok = Reply::Echo {
            stamp,
            data_len: 56,
            intact: true,
        };
        assert_eq!(read(PING, &reply(9, 3, 56), 4), ok);
        assert_eq!(
            read(PING, &reply(9, 4, 56), 4),
            Reply::Ignored,
            "not sent yet"
        );
        let raw = Framing {
            ident: Some(7),
            ..PING
        };
        assert_eq!(
            read(raw, &reply(9, 3, 56), 4),
            Reply::Ignored,
            "another ident"
        );
        assert_eq!(read(raw, &reply(7, 3, 56), 4), ok);
        let mut bent = reply(7, 3, 56);
        bent[40] ^= 0xff;
        assert!(matches!(
            read(raw, &bent, 4),
            Reply::Echo { intact: false, .. }
        ));
        let mut short = reply(7, 3, 56);
        short.truncate(20);
        assert_eq!(read(raw, &short, 4), Reply::Malformed);
        let mut request = reply(7, 3, 56);
        request[0] = 128;
        assert_eq!(read(raw, &request, 4), Reply::Ignored, "our own request");
    }

    #[test]
    fn ipv4_replies_come_with_and_without_their_header() {
        let mut icmp_reply = Vec::new();
        icmp::emit_request(
            Family::V4,
            7,
            Stamp { sent_ns: 1, seq: 0 },
            16,
            &mut icmp_reply,
        );
        icmp_reply[0] = 0;
        icmp_reply[2..4].copy_from_slice(&[0, 0]);
        let sum = icmp::checksum(&icmp_reply);
        icmp_reply[2..4].copy_from_slice(&sum.to_be_bytes());
        let framing = Framing {
            family: Family::V4,
            ipv4_header: true,
            ident: Some(7),
        };
        let mut packet = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 1];
        packet.resize(20, 0);
        packet.extend_from_slice(&icmp_reply);
        assert!(matches!(read(framing, &packet, 1), Reply::Echo { .. }));
        let ping = Framing {
            ipv4_header: false,
            ..framing
        };
        assert!(matches!(read(ping, &icmp_reply, 1), Reply::Echo { .. }));
        assert_eq!(read(framing, &icmp_reply, 1), Reply::Malformed);
    }

    #[test]
    fn oversized_requests_are_noted_by_the_dont_fragment_setting() {
        assert_eq!(fragmentation_note(Family::V4, 1472, 1500, true), None);
        let fragmented = fragmentation_note(Family::V4, 4096, 1500, false).unwrap();
        assert!(
            fragmented.starts_with(
                "fragmented: each request is a 4124-byte IP datagram, sent as 3 fragments"
            ),
            "{fragmented}"
        );
        let refused = fragmentation_note(Family::V6, 1500, 1500, true).unwrap();
        assert!(
            refused.starts_with("refused: each request is a 1548-byte"),
            "{refused}"
        );
        let heard = BTreeMap::from([(describe(PathError::PacketTooBig { mtu: 1280 }), 2)]);
        assert_eq!(
            path_notes(&heard),
            ["the path answered 2 request(s) with 'packet too big' (MTU 1280 B)"]
        );
    }
}
