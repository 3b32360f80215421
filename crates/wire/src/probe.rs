//! The probe header: 32 bytes, big-endian, at the start of every UDP datagram, TCP message
//! and (later) raw frame that flowlab sends.
//!
//! ```text
//!  0      2    3     4          8                16               24               32
//!  +------+----+-----+----------+----------------+----------------+----------------+
//!  |magic |ver |flags| session  |   sequence     |   sent (ns)    |   echoed (ns)  |
//!  +------+----+-----+----------+----------------+----------------+----------------+
//! ```
//! `sent` is the sender's CLOCK_REALTIME when the packet left the application; `echoed` is the
//! echoing agent's receive time in loopback tests, or the responder's in request/response
//! tests (0 otherwise).
//!
//! Flags: [`FLAG_ECHO`] marks an echo. In a byte stream (TCP) or a request/response test,
//! [`FLAG_LENGTH`](crate::message::FLAG_LENGTH) says a 4-byte big-endian message length follows
//! the header, [`FLAG_REQUEST`](crate::message::FLAG_REQUEST) that a 4-byte response size
//! follows that, and [`FLAG_RESPONSE`](crate::message::FLAG_RESPONSE) marks a response: see
//! [`crate::message`]. A message without `FLAG_LENGTH` is the fixed-size format.
//!
//! [`FLAG_AUTH`] marks an authenticated probe (as TWAMP's authenticated mode): a
//! [`PROBE_TAG_LEN`]-byte tag follows the header, a MAC over the header's 32 bytes (flags
//! included) under the session's test-packet key. The MAC itself is computed above this crate;
//! [`auth_tag_range`] says where it goes.

use thiserror::Error;

/// Length of the probe header; the smallest packet flowlab can send.
pub const PROBE_HEADER_LEN: usize = 32;
/// "FL": tells flowlab's packets from stray traffic.
pub const PROBE_MAGIC: u16 = 0x464c;
/// Version of the probe header layout.
pub const PROBE_VERSION: u8 = 1;

/// Flag: this packet is an echo sent back by the agent in a loopback test.
pub const FLAG_ECHO: u8 = 0x01;
/// Flag: a tag over the header follows it (authenticated test packets).
pub const FLAG_AUTH: u8 = 0x10;
/// Bytes of an authenticated probe's tag (a MAC truncated to 128 bits, as TWAMP's).
pub const PROBE_TAG_LEN: usize = 16;
/// The smallest authenticated packet: header and tag.
pub const AUTH_PROBE_LEN: usize = PROBE_HEADER_LEN + PROBE_TAG_LEN;

/// Where an authenticated probe's tag lies in `packet`, if the packet is long enough to hold it.
pub fn auth_tag_range(packet: &[u8]) -> Option<std::ops::Range<usize>> {
    (packet.len() >= AUTH_PROBE_LEN).then_some(PROBE_HEADER_LEN..AUTH_PROBE_LEN)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ProbeError {
    #[error("probe packet too short: {0} bytes, need {PROBE_HEADER_LEN}")]
    Truncated(usize),
    #[error("not a flowlab probe (magic {0:#06x})")]
    BadMagic(u16),
    #[error("unsupported probe version {0}")]
    BadVersion(u8),
}

/// Parsed probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProbeRepr {
    pub flags: u8,
    pub session: u32,
    pub seq: u64,
    pub sent_ns: u64,
    pub echoed_ns: u64,
}

/// Checked view over a byte buffer that starts with a probe header.
#[derive(Debug)]
pub struct ProbeHeader<T: AsRef<[u8]>> {
    buffer: T,
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> ProbeHeader<T> {
    /// Wraps a buffer after checking length, magic and version; accessors cannot panic after this.
    pub fn new_checked(buffer: T) -> Result<Self, ProbeError> {
        let b = buffer.as_ref();
        if b.len() < PROBE_HEADER_LEN {
            return Err(ProbeError::Truncated(b.len()));
        }
        let magic = be_u16(b, 0);
        if magic != PROBE_MAGIC {
            return Err(ProbeError::BadMagic(magic));
        }
        if b[2] != PROBE_VERSION {
            return Err(ProbeError::BadVersion(b[2]));
        }
        Ok(ProbeHeader { buffer })
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[3]
    }
    pub fn session(&self) -> u32 {
        be_u32(self.buffer.as_ref(), 4)
    }
    pub fn seq(&self) -> u64 {
        be_u64(self.buffer.as_ref(), 8)
    }
    pub fn sent_ns(&self) -> u64 {
        be_u64(self.buffer.as_ref(), 16)
    }
    pub fn echoed_ns(&self) -> u64 {
        be_u64(self.buffer.as_ref(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ProbeHeader<T> {
    /// Marks a received packet as an echo and stamps the echo time, in place (loopback agent).
    pub fn set_echo(&mut self, echoed_ns: u64) {
        let b = self.buffer.as_mut();
        b[3] |= FLAG_ECHO;
        b[24..32].copy_from_slice(&echoed_ns.to_be_bytes());
    }
}

impl ProbeRepr {
    pub fn parse(bytes: &[u8]) -> Result<ProbeRepr, ProbeError> {
        let h = ProbeHeader::new_checked(bytes)?;
        Ok(ProbeRepr {
            flags: h.flags(),
            session: h.session(),
            seq: h.seq(),
            sent_ns: h.sent_ns(),
            echoed_ns: h.echoed_ns(),
        })
    }

    /// Writes the header into the first 32 bytes of `out`; returns false (writing nothing) when
    /// `out` is too short.
    pub fn emit(&self, out: &mut [u8]) -> bool {
        if out.len() < PROBE_HEADER_LEN {
            return false;
        }
        out[0..2].copy_from_slice(&PROBE_MAGIC.to_be_bytes());
        out[2] = PROBE_VERSION;
        out[3] = self.flags;
        out[4..8].copy_from_slice(&self.session.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..24].copy_from_slice(&self.sent_ns.to_be_bytes());
        out[24..32].copy_from_slice(&self.echoed_ns.to_be_bytes());
        true
    }

    pub fn is_echo(&self) -> bool {
        self.flags & FLAG_ECHO != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    static PROBE_BYTES: [u8; 32] = [
        0x46, 0x4c, 0x01, 0x01, // magic, version, flags=echo
        0x00, 0x00, 0x30, 0x39, // session 12345
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // seq 42
        0x17, 0x9a, 0x2b, 0x3c, 0x4d, 0x5e, 0x6f, 0x70, // sent
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // echoed 1000
    ];

    fn sample() -> ProbeRepr {
        ProbeRepr {
            flags: FLAG_ECHO,
            session: 12345,
            seq: 42,
            sent_ns: 0x179a_2b3c_4d5e_6f70,
            echoed_ns: 1000,
        }
    }

    #[test]
    fn auth_tag_follows_the_header() {
        assert_eq!(auth_tag_range(&[0u8; 47]), None);
        assert_eq!(auth_tag_range(&[0u8; 48]), Some(32..48));
        assert_eq!(auth_tag_range(&[0u8; 1200]), Some(32..48));
        let flags = [
            FLAG_ECHO,
            FLAG_AUTH,
            crate::message::FLAG_LENGTH,
            crate::message::FLAG_REQUEST,
            crate::message::FLAG_RESPONSE,
        ];
        let all = flags.iter().fold(0u8, |acc, f| {
            assert_eq!(acc & f, 0, "flag {f:#04x} used twice");
            acc | f
        });
        assert_eq!(all.count_ones(), 5);
    }

    #[test]
    fn parse_vector() {
        assert_eq!(ProbeRepr::parse(&PROBE_BYTES), Ok(sample()));
        assert!(sample().is_echo());
    }

    #[test]
    fn emit_vector() {
        let mut out = [0u8; 40];
        assert!(sample().emit(&mut out));
        assert_eq!(&out[..32], &PROBE_BYTES[..]);
        assert!(!sample().emit(&mut [0u8; 31]));
    }

    #[test]
    fn set_echo_in_place() {
        let mut buf = PROBE_BYTES;
        buf[3] = 0;
        let mut h = ProbeHeader::new_checked(&mut buf[..]).unwrap();
        h.set_echo(7);
        assert_eq!(h.flags(), FLAG_ECHO);
        assert_eq!(h.echoed_ns(), 7);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            ProbeRepr::parse(&PROBE_BYTES[..31]),
            Err(ProbeError::Truncated(31))
        );
        let mut b = PROBE_BYTES;
        b[0] = 0;
        assert_eq!(ProbeRepr::parse(&b), Err(ProbeError::BadMagic(0x004c)));
        let mut b = PROBE_BYTES;
        b[2] = 9;
        assert_eq!(ProbeRepr::parse(&b), Err(ProbeError::BadVersion(9)));
    }

    proptest! {
        #[test]
        fn round_trips(flags: u8, session: u32, seq: u64, sent_ns: u64, echoed_ns: u64) {
            let r = ProbeRepr { flags, session, seq, sent_ns, echoed_ns };
            let mut buf = [0u8; PROBE_HEADER_LEN];
            prop_assert!(r.emit(&mut buf));
            prop_assert_eq!(ProbeRepr::parse(&buf), Ok(r));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = ProbeRepr::parse(&bytes);
        }
    }
}
