//! The control protocol: a TCP connection from client to agent.
//!
//! 1. Each side sends a fixed 16-byte [`Hello`] (magic, protocol version, flags) and checks the
//!    peer's. The hello layout never changes, so a peer of another version is always recognised
//!    and named in the error, on both sides.
//! 2. Then length-prefixed frames: `u32` big-endian length of what follows, a `u8` message
//!    version, and a JSON body (a message of `flowlab_control::protocol`). JSON keeps messages
//!    extensible and debuggable;
//!    the prefix keeps framing independent of the body.
//! 3. With a pre-shared key, the agent's challenge, the client's nonce and proof and the agent's
//!    proof come first; every later frame ends in a [`FRAME_TAG_LEN`]-byte tag that the length
//!    prefix counts: HMAC-SHA256(session key, direction, sequence number, prefix, content).

use std::collections::VecDeque;

use thiserror::Error;

/// Protocol version spoken in the hello. Bump on any incompatible change.
/// 2: mutual authentication (client nonce, agent proof) and tagged frames after it.
pub const PROTOCOL_VERSION: u16 = 2;
/// Version byte of every frame body.
pub const MESSAGE_VERSION: u8 = 1;
/// Largest frame body accepted; bounds memory against a hostile peer.
pub const MAX_FRAME_LEN: usize = 4 << 20;
/// Largest frame an agent takes from a client outside the request: authentication, start,
/// finish, time probes. All are a few hundred bytes.
pub const MAX_SMALL_FRAME_LEN: usize = 4 << 10;
/// Largest request an agent without a key takes: room for an embedded trace of about 30,000
/// packets (some 35 bytes of JSON each). After authentication a request may take
/// [`MAX_FRAME_LEN`].
pub const MAX_OPEN_REQUEST_LEN: usize = 1 << 20;
/// Bytes of the tag ending each frame after a pre-shared-key handshake.
pub const FRAME_TAG_LEN: usize = 32;
/// Magic at the start of each hello.
pub const HELLO_MAGIC: [u8; 8] = *b"FLOWLAB\0";
pub const HELLO_LEN: usize = 16;
/// Hello flag set by an agent that requires the pre-shared-key challenge.
pub const HELLO_FLAG_AUTH_REQUIRED: u16 = 0x0001;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ControlError {
    #[error("peer is not a flowlab endpoint (bad hello magic)")]
    BadMagic,
    #[error(
        "protocol version mismatch: peer speaks version {peer}, this side speaks version {ours}"
    )]
    VersionMismatch { peer: u16, ours: u16 },
    #[error("control frame of {len} bytes exceeds the {max}-byte limit")]
    FrameTooLong { len: usize, max: usize },
    #[error("control frame is empty")]
    EmptyFrame,
    #[error("unsupported control message version {0}")]
    BadMessageVersion(u8),
    #[error("malformed control message: {0}")]
    Malformed(String),
}

/// The fixed hello exchanged first by both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub flags: u16,
}

/// The hello a client sends: the current version and no flags.
pub struct ClientHello;
impl ClientHello {
    pub fn current() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            flags: 0,
        }
    }
}

impl Hello {
    pub fn emit(&self) -> [u8; HELLO_LEN] {
        let mut out = [0u8; HELLO_LEN];
        out[..8].copy_from_slice(&HELLO_MAGIC);
        out[8..10].copy_from_slice(&self.version.to_be_bytes());
        out[10..12].copy_from_slice(&self.flags.to_be_bytes());
        out
    }

    /// Parses a peer's hello; does not judge its version (see [`Hello::check_version`]).
    pub fn parse(bytes: &[u8; HELLO_LEN]) -> Result<Hello, ControlError> {
        if bytes[..8] != HELLO_MAGIC {
            return Err(ControlError::BadMagic);
        }
        Ok(Hello {
            version: u16::from_be_bytes([bytes[8], bytes[9]]),
            flags: u16::from_be_bytes([bytes[10], bytes[11]]),
        })
    }

    pub fn check_version(&self) -> Result<(), ControlError> {
        if self.version == PROTOCOL_VERSION {
            Ok(())
        } else {
            Err(ControlError::VersionMismatch {
                peer: self.version,
                ours: PROTOCOL_VERSION,
            })
        }
    }

    pub fn auth_required(&self) -> bool {
        self.flags & HELLO_FLAG_AUTH_REQUIRED != 0
    }
}

/// Incremental frame splitter: feed it bytes as they arrive, take whole frames out.
/// Sans-IO, so the same code serves blocking sockets, tests and fuzzing.
#[derive(Debug)]
pub struct FrameDecoder {
    buffer: VecDeque<u8>,
    max_len: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder {
            buffer: VecDeque::new(),
            max_len: MAX_FRAME_LEN,
        }
    }
}

impl FrameDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Refuses frames longer than `max_len` (at most [`MAX_FRAME_LEN`]) from the next frame on.
    pub fn set_max_len(&mut self, max_len: usize) {
        self.max_len = max_len.min(MAX_FRAME_LEN);
    }

    pub fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend(bytes);
    }

    /// Next whole frame's content (after the length prefix), undecoded.
    pub fn next_frame(&mut self) -> Result<Option<Vec<u8>>, ControlError> {
        if self.buffer.len() < 4 {
            return Ok(None);
        }
        let len_bytes = [
            self.buffer[0],
            self.buffer[1],
            self.buffer[2],
            self.buffer[3],
        ];
        let len = u32::from_be_bytes(len_bytes) as usize;
        if len > self.max_len {
            return Err(ControlError::FrameTooLong {
                len,
                max: self.max_len,
            });
        }
        if self.buffer.len() < 4 + len {
            return Ok(None);
        }
        self.buffer.drain(..4);
        Ok(Some(self.buffer.drain(..len).collect()))
    }
}

/// Splits a tagged frame's content into the message part and its tag.
pub fn split_tag(frame: &[u8]) -> Option<(&[u8], &[u8])> {
    frame
        .len()
        .checked_sub(FRAME_TAG_LEN)
        .map(|at| frame.split_at(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    static HELLO_BYTES: [u8; 16] = [
        b'F', b'L', b'O', b'W', b'L', b'A', b'B', 0, 0x00, 0x02, 0x00, 0x01, 0, 0, 0, 0,
    ];

    #[test]
    fn hello_vector() {
        let h = Hello {
            version: 2,
            flags: HELLO_FLAG_AUTH_REQUIRED,
        };
        assert_eq!(h.emit(), HELLO_BYTES);
        assert_eq!(Hello::parse(&HELLO_BYTES), Ok(h));
        assert!(h.auth_required());
    }

    #[test]
    fn hello_rejects_magic_and_version() {
        let mut b = HELLO_BYTES;
        b[0] = b'X';
        assert_eq!(Hello::parse(&b), Err(ControlError::BadMagic));
        let other = Hello {
            version: PROTOCOL_VERSION + 1,
            flags: 0,
        };
        let err = other.check_version().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "protocol version mismatch: peer speaks version {}, this side speaks version {}",
                PROTOCOL_VERSION + 1,
                PROTOCOL_VERSION
            )
        );
    }

    #[test]
    fn frames_split_across_pushes() {
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x03\x01a");
        assert_eq!(d.next_frame(), Ok(None));
        d.push(b"b\x00\x00");
        assert_eq!(d.next_frame(), Ok(Some(b"\x01ab".to_vec())));
        assert_eq!(d.next_frame(), Ok(None));
        d.push(b"\x00\x00");
        assert_eq!(d.next_frame(), Ok(Some(Vec::new())));
    }

    #[test]
    fn decoder_cap_applies_from_the_next_frame() {
        let frame = b"\x00\x00\x00\x11\x01{\"type\":\"start\"}";
        let mut d = FrameDecoder::new();
        d.set_max_len(16);
        d.push(frame);
        assert_eq!(
            d.next_frame(),
            Err(ControlError::FrameTooLong { len: 17, max: 16 })
        );
        let mut d = FrameDecoder::new();
        d.set_max_len(17);
        d.push(frame);
        assert_eq!(d.next_frame(), Ok(Some(frame[4..].to_vec())));
        d.set_max_len(usize::MAX);
        d.push(&(MAX_FRAME_LEN as u32 + 1).to_be_bytes());
        assert!(d.next_frame().is_err(), "never above MAX_FRAME_LEN");
    }

    #[test]
    fn tag_split() {
        let frame = [7u8; FRAME_TAG_LEN + 3];
        assert_eq!(split_tag(&frame), Some((&frame[..3], &frame[3..])));
        assert_eq!(split_tag(&frame[..FRAME_TAG_LEN - 1]), None);
    }

    proptest! {
        #[test]
        fn decoder_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8)) {
            let mut d = FrameDecoder::new();
            for c in chunks {
                d.push(&c);
                while let Ok(Some(_)) = d.next_frame() {}
            }
        }
    }
}
