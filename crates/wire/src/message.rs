//! Messages in a byte stream: a probe header, optionally followed by the message's length and,
//! for requests, the size of the response asked for.
//!
//! ```text
//!  0                32         36              40
//!  +----------------+----------+---------------+------------------
//!  | probe header   | length   | response size |  payload ...
//!  +----------------+----------+---------------+------------------
//!                    FLAG_LENGTH  FLAG_REQUEST
//! ```
//! `length` (big-endian `u32`) counts the whole message, probe header included. A message
//! without [`FLAG_LENGTH`] has the stream's fixed size (`--size`), the original TCP format.
//! A request ([`FLAG_REQUEST`], always with [`FLAG_LENGTH`]) asks the agent to answer with a
//! [`FLAG_RESPONSE`] message of `response size` bytes carrying the request's sequence number.
//! UDP requests and responses use the same layout; there `length` equals the datagram's.

use thiserror::Error;

use crate::probe::{ProbeError, ProbeRepr, PROBE_HEADER_LEN};

/// Flag: a 4-byte big-endian message length follows the probe header.
pub const FLAG_LENGTH: u8 = 0x02;
/// Flag: a request of a request/response test; a 4-byte big-endian response size follows the
/// length (so the flag comes with [`FLAG_LENGTH`]).
pub const FLAG_REQUEST: u8 = 0x04;
/// Flag: the response to the request with the same sequence number.
pub const FLAG_RESPONSE: u8 = 0x08;

/// Probe header and length: the smallest length-framed message.
pub const FRAMED_HEAD_LEN: usize = PROBE_HEADER_LEN + 4;
/// Probe header, length and response size: the smallest request.
pub const REQUEST_HEAD_LEN: usize = FRAMED_HEAD_LEN + 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum MessageError {
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error("a request must carry its length (flags {0:#04x})")]
    RequestWithoutLength(u8),
    #[error("message length {length} B is below its {head} B header")]
    LengthBelowHead { length: u32, head: usize },
    #[error("message length {length} B exceeds the {max} B limit")]
    TooLong { length: u32, max: u32 },
}

/// The start of a message: its probe header, and its length and response size where the
/// flags say they follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MessageHead {
    pub probe: ProbeRepr,
    /// Whole message in bytes; present exactly when the probe flags carry [`FLAG_LENGTH`].
    pub length: Option<u32>,
    /// Bytes of the response asked for; present exactly for requests.
    pub response_size: Option<u32>,
}

/// Header bytes of a message with these flags.
pub fn head_len(flags: u8) -> usize {
    match (flags & FLAG_LENGTH != 0, flags & FLAG_REQUEST != 0) {
        (true, true) => REQUEST_HEAD_LEN,
        (true, false) => FRAMED_HEAD_LEN,
        (false, _) => PROBE_HEADER_LEN,
    }
}

fn be_u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl MessageHead {
    /// A length-framed message of `length` bytes.
    pub fn framed(probe: ProbeRepr, length: u32) -> MessageHead {
        MessageHead {
            probe: ProbeRepr {
                flags: (probe.flags | FLAG_LENGTH) & !FLAG_REQUEST,
                ..probe
            },
            length: Some(length),
            response_size: None,
        }
    }

    /// A request of `length` bytes asking for a response of `response_size` bytes.
    pub fn request(probe: ProbeRepr, length: u32, response_size: u32) -> MessageHead {
        MessageHead {
            probe: ProbeRepr {
                flags: probe.flags | FLAG_LENGTH | FLAG_REQUEST,
                ..probe
            },
            length: Some(length),
            response_size: Some(response_size),
        }
    }

    /// The response of `length` bytes to `request`, stamped with the time the request was read.
    pub fn response_to(request: &ProbeRepr, length: u32, received_ns: u64) -> MessageHead {
        MessageHead::framed(
            ProbeRepr {
                flags: FLAG_RESPONSE,
                session: request.session,
                seq: request.seq,
                sent_ns: request.sent_ns,
                echoed_ns: received_ns,
            },
            length,
        )
    }

    pub fn is_request(&self) -> bool {
        self.response_size.is_some()
    }

    pub fn is_response(&self) -> bool {
        self.probe.flags & FLAG_RESPONSE != 0
    }

    /// Header bytes of this message.
    pub fn len(&self) -> usize {
        head_len(self.probe.flags)
    }

    /// Never: a head is at least a probe header (for clippy's `len` convention).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Parses the head at the start of `bytes` (which may hold more of the message).
    pub fn parse(bytes: &[u8]) -> Result<MessageHead, MessageError> {
        let probe = ProbeRepr::parse(bytes)?;
        let head = head_len(probe.flags);
        if probe.flags & FLAG_REQUEST != 0 && probe.flags & FLAG_LENGTH == 0 {
            return Err(MessageError::RequestWithoutLength(probe.flags));
        }
        if bytes.len() < head {
            return Err(ProbeError::Truncated(bytes.len()).into());
        }
        let length = (head > PROBE_HEADER_LEN).then(|| be_u32_at(bytes, PROBE_HEADER_LEN));
        if let Some(length) = length {
            if (length as usize) < head {
                return Err(MessageError::LengthBelowHead { length, head });
            }
        }
        Ok(MessageHead {
            probe,
            length,
            response_size: (head == REQUEST_HEAD_LEN).then(|| be_u32_at(bytes, FRAMED_HEAD_LEN)),
        })
    }

    /// Writes the head into the start of `out`; false (writing nothing) if `out` is too short
    /// or the fields disagree with the flags.
    pub fn emit(&self, out: &mut [u8]) -> bool {
        let head = self.len();
        let consistent = self.length.is_some() == (head > PROBE_HEADER_LEN)
            && self.response_size.is_some() == (head == REQUEST_HEAD_LEN);
        if out.len() < head || !consistent {
            return false;
        }
        self.probe.emit(out);
        if let Some(length) = self.length {
            out[PROBE_HEADER_LEN..FRAMED_HEAD_LEN].copy_from_slice(&length.to_be_bytes());
        }
        if let Some(size) = self.response_size {
            out[FRAMED_HEAD_LEN..REQUEST_HEAD_LEN].copy_from_slice(&size.to_be_bytes());
        }
        true
    }
}

/// Finds message boundaries in a byte stream (sans-IO): bytes go in as they were read, and each
/// message's head comes out once its last byte is in. Messages with [`FLAG_LENGTH`] carry their
/// length; others have the stream's fixed size. A malformed head cannot be skipped (the next
/// boundary is unknown), so it ends the stream: every later push returns the same error.
#[derive(Debug, Clone)]
pub struct StreamSplitter {
    fixed_size: usize,
    max_length: u32,
    head: [u8; REQUEST_HEAD_LEN],
    /// Bytes of the current message taken so far.
    taken: usize,
    /// The current message's parsed head and length, once known.
    current: Option<(MessageHead, usize)>,
    failed: Option<MessageError>,
}

impl StreamSplitter {
    /// `fixed_size`: the length of messages without a length field (at least a probe
    /// header); `max_length`: the largest length a message may claim.
    pub fn new(fixed_size: u32, max_length: u32) -> Self {
        StreamSplitter {
            fixed_size: (fixed_size as usize).max(PROBE_HEADER_LEN),
            max_length,
            head: [0; REQUEST_HEAD_LEN],
            taken: 0,
            current: None,
            failed: None,
        }
    }

    /// Whether part of a message has been taken: at the end of a stream, a message cut off.
    pub fn mid_message(&self) -> bool {
        self.taken > 0
    }

    /// Takes the bytes read; calls `on_message` with the head of each message they complete.
    pub fn push(
        &mut self,
        mut bytes: &[u8],
        mut on_message: impl FnMut(MessageHead),
    ) -> Result<(), MessageError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        while !bytes.is_empty() {
            let (head, length) = match self.current {
                Some(current) => current,
                None => match self.take_head(&mut bytes) {
                    Ok(Some(current)) => current,
                    Ok(None) => return Ok(()),
                    Err(e) => {
                        self.failed = Some(e);
                        return Err(e);
                    }
                },
            };
            let take = (length - self.taken).min(bytes.len());
            self.taken += take;
            bytes = &bytes[take..];
            if self.taken == length {
                on_message(head);
                self.taken = 0;
                self.current = None;
            }
        }
        Ok(())
    }

    /// Gathers head bytes; once the head is whole, parses and checks it.
    fn take_head(
        &mut self,
        bytes: &mut &[u8],
    ) -> Result<Option<(MessageHead, usize)>, MessageError> {
        let want = if self.taken < PROBE_HEADER_LEN {
            PROBE_HEADER_LEN
        } else {
            head_len(self.head[3])
        };
        let take = (want - self.taken).min(bytes.len());
        self.head[self.taken..self.taken + take].copy_from_slice(&bytes[..take]);
        self.taken += take;
        *bytes = &bytes[take..];
        if self.taken < want {
            return Ok(None);
        }
        if want == PROBE_HEADER_LEN {
            // The flags are in: check the probe header now, then see whether more head follows.
            let probe = ProbeRepr::parse(&self.head[..PROBE_HEADER_LEN])?;
            if head_len(probe.flags) > PROBE_HEADER_LEN {
                return self.take_head(bytes);
            }
        }
        let head = MessageHead::parse(&self.head[..self.taken])?;
        let length = match head.length {
            Some(length) if length > self.max_length => {
                return Err(MessageError::TooLong {
                    length,
                    max: self.max_length,
                })
            }
            Some(length) => length as usize,
            None => self.fixed_size,
        };
        let current = (head, length);
        self.current = Some(current);
        Ok(Some(current))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A request: session 7, seq 3, sent 1000, 64 bytes long, asking for 1024 bytes.
    static REQUEST_BYTES: [u8; 40] = [
        0x46, 0x4c, 0x01, 0x06, // magic, version, flags = length | request
        0x00, 0x00, 0x00, 0x07, // session 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, // seq 3
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // sent 1000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // echoed 0
        0x00, 0x00, 0x00, 0x40, // length 64
        0x00, 0x00, 0x04, 0x00, // response size 1024
    ];

    /// Its response: 1024 bytes, flags = length | response, echoed at 2000.
    static RESPONSE_BYTES: [u8; 36] = [
        0x46, 0x4c, 0x01, 0x0a, // magic, version, flags = length | response
        0x00, 0x00, 0x00, 0x07, // session 7
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, // seq 3
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, // sent 1000
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0xd0, // echoed 2000
        0x00, 0x00, 0x04, 0x00, // length 1024
    ];

    fn request_probe() -> ProbeRepr {
        ProbeRepr {
            flags: 0,
            session: 7,
            seq: 3,
            sent_ns: 1000,
            echoed_ns: 0,
        }
    }

    #[test]
    fn request_and_response_vectors() {
        let request = MessageHead::request(request_probe(), 64, 1024);
        let mut out = [0u8; 64];
        assert!(request.emit(&mut out));
        assert_eq!(&out[..40], &REQUEST_BYTES[..]);
        assert_eq!(MessageHead::parse(&REQUEST_BYTES), Ok(request));
        assert!(request.is_request() && !request.is_response());

        let response = MessageHead::response_to(&request.probe, 1024, 2000);
        let mut out = [0u8; 36];
        assert!(response.emit(&mut out));
        assert_eq!(out, RESPONSE_BYTES);
        let parsed = MessageHead::parse(&RESPONSE_BYTES).unwrap();
        assert_eq!(parsed, response);
        assert!(parsed.is_response() && !parsed.is_request());
        assert_eq!(parsed.length, Some(1024));
    }

    #[test]
    fn rejects_inconsistent_heads() {
        assert_eq!(
            MessageHead::parse(&REQUEST_BYTES[..38]),
            Err(ProbeError::Truncated(38).into())
        );
        let mut b = REQUEST_BYTES;
        b[35] = 39; // shorter than its own head
        assert_eq!(
            MessageHead::parse(&b),
            Err(MessageError::LengthBelowHead {
                length: 39,
                head: 40
            })
        );
        let mut b = REQUEST_BYTES;
        b[3] = FLAG_REQUEST;
        assert_eq!(
            MessageHead::parse(&b),
            Err(MessageError::RequestWithoutLength(FLAG_REQUEST))
        );
        // Emitting refuses a head whose fields disagree with its flags, or a short buffer.
        let mut out = [0u8; 64];
        let mut odd = MessageHead::request(request_probe(), 64, 1);
        odd.response_size = None;
        assert!(!odd.emit(&mut out));
        assert!(!MessageHead::request(request_probe(), 64, 1).emit(&mut out[..39]));
    }

    /// A stream of framed messages of these sizes (seq = index) and the fixed-size one.
    fn stream_of(sizes: &[u32]) -> Vec<u8> {
        let mut stream = Vec::new();
        for (seq, &size) in sizes.iter().enumerate() {
            let mut m = vec![0xa5u8; size as usize];
            let probe = ProbeRepr {
                seq: seq as u64,
                ..Default::default()
            };
            assert!(MessageHead::framed(probe, size).emit(&mut m));
            stream.extend(m);
        }
        stream
    }

    #[test]
    fn framed_and_fixed_messages_split_across_reads() {
        let mut stream = stream_of(&[36, 1500, 37]);
        // A fixed-size message (no length field) of the stream's size, 100 bytes.
        let mut fixed = vec![0u8; 100];
        ProbeRepr {
            seq: 3,
            ..Default::default()
        }
        .emit(&mut fixed);
        stream.extend(fixed);
        for chunk in [1, 5, 33, 4096] {
            let mut s = StreamSplitter::new(100, 1 << 20);
            let mut got = Vec::new();
            for piece in stream.chunks(chunk) {
                s.push(piece, |h| got.push((h.probe.seq, h.length)))
                    .unwrap();
            }
            assert_eq!(
                got,
                [(0, Some(36)), (1, Some(1500)), (2, Some(37)), (3, None)],
                "chunks of {chunk}"
            );
            assert!(!s.mid_message());
        }
    }

    #[test]
    fn a_bad_head_ends_the_stream() {
        let mut s = StreamSplitter::new(100, 1000);
        let stream = stream_of(&[2000]);
        let e = s.push(&stream, |_| panic!("no message")).unwrap_err();
        assert_eq!(
            e,
            MessageError::TooLong {
                length: 2000,
                max: 1000
            }
        );
        assert_eq!(s.push(&stream_of(&[40]), |_| {}), Err(e));
        let mut s = StreamSplitter::new(100, 1000);
        assert_eq!(
            s.push(&[0u8; 40], |_| {}),
            Err(MessageError::Probe(ProbeError::BadMagic(0)))
        );
    }

    proptest! {
        /// Any sequence of message sizes, cut into any read chunks, comes back exactly.
        #[test]
        fn any_split_recovers_every_message(
            sizes in proptest::collection::vec(36u32..5000, 0..40),
            cuts in proptest::collection::vec(1usize..3000, 1..50),
        ) {
            let stream = stream_of(&sizes);
            let mut s = StreamSplitter::new(36, 1 << 20);
            let mut got = Vec::new();
            let (mut at, mut i) = (0, 0);
            while at < stream.len() {
                let end = (at + cuts[i % cuts.len()]).min(stream.len());
                s.push(&stream[at..end], |h| got.push((h.probe.seq, h.length.unwrap_or(0))))
                    .unwrap();
                at = end;
                i += 1;
            }
            let want: Vec<(u64, u32)> =
                sizes.iter().enumerate().map(|(i, &s)| (i as u64, s)).collect();
            prop_assert_eq!(got, want);
            prop_assert!(!s.mid_message());
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), chunk in 1usize..64) {
            let _ = MessageHead::parse(&bytes);
            let mut s = StreamSplitter::new(40, 4096);
            for piece in bytes.chunks(chunk) {
                let _ = s.push(piece, |_| {});
            }
        }
    }
}
