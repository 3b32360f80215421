//! The control protocol: a TCP connection from client to agent.
//!
//! 1. Each side sends a fixed 16-byte [`Hello`] (magic, protocol version, flags) and checks the
//!    peer's. The hello layout never changes, so a peer of another version is always recognised
//!    and named in the error, on both sides.
//! 2. Then length-prefixed frames: `u32` big-endian length of what follows, a `u8` message
//!    version, and a JSON body (one [`Message`]). JSON keeps messages extensible and debuggable;
//!    the prefix keeps framing independent of the body.
//! 3. With a pre-shared key, the agent's challenge, the client's nonce and proof and the agent's
//!    proof come first; every later frame ends in a [`FRAME_TAG_LEN`]-byte tag that the length
//!    prefix counts: HMAC-SHA256(session key, direction, sequence number, prefix, content).

use std::collections::VecDeque;

use crate::spec::TestSpec;
use flowlab_results::{IntervalReport, PacketRecord, SideReport};
use serde::{Deserialize, Serialize};
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

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// Agent to client: its nonce (64 hex digits); prove you hold the key.
    AuthChallenge {
        nonce: String,
    },
    /// Client to agent: the client's nonce and its proof over both nonces.
    AuthResponse {
        nonce: String,
        mac: String,
    },
    /// Agent to client: the agent's proof over both nonces. Tagged frames follow.
    AuthOk {
        mac: String,
    },
    Request {
        spec: TestSpec,
    },
    /// The agent's data ports, one per flow; its MAC address for native frames.
    Accepted {
        session: u32,
        data_ports: Vec<u16>,
        agent_mac: Option<String>,
        /// The agent's `--max-rate`: it holds its own sending to it, and asks the client to
        /// hold its sending to it too (a `--rate max` test runs as fast as the limit allows).
        #[serde(default)]
        rate_cap_bps: Option<u64>,
        /// A reverse UDP test's return-routability cookie: the client sends it from each data
        /// socket (`crate::ack`), and the agent sends to a socket only while it arrives.
        #[serde(default)]
        cookie: Option<u64>,
    },
    /// Agent refuses a request (limits, bad parameters, failed authentication).
    Refused {
        reason: String,
    },
    /// Client to agent: sockets are ready, begin.
    Start,
    /// Each way while a test runs, so a dead or vanished peer is noticed quickly.
    Heartbeat,
    /// Live interval measured by the agent's side.
    Interval {
        report: IntervalReport,
    },
    /// Agent to client: the agent's sender has sent its last packet.
    SenderDone,
    /// Client to agent: stop (end of test, or the user interrupted) and report.
    Finish,
    /// Per-packet records of the agent's side, in chunks, before its report.
    PacketLog {
        records: Vec<PacketRecord>,
    },
    /// The agent's report for its side of the test; ends the session.
    Report {
        report: Box<SideReport>,
    },
    /// Controller to agent (started with `--allow-relay`): run this test as a client against
    /// the agent at `target`, starting at `start_at_ns` (Unix time), and return the result.
    RunTest {
        target: String,
        spec: TestSpec,
        start_at_ns: Option<u64>,
    },
    /// Agent to controller: the result document of a `RunTest` (a flowlab test result).
    TestDone {
        result: serde_json::Value,
    },
    /// Clock probe (NTP-style): the controller's send time...
    TimeProbe {
        t1_ns: u64,
    },
    /// ...and the agent's receive and reply times, on its CLOCK_REALTIME.
    TimeReply {
        t1_ns: u64,
        t2_ns: u64,
        t3_ns: u64,
    },
    /// A fatal error; the sender closes the connection after it.
    Error {
        message: String,
    },
}

impl Message {
    /// Encodes one frame: length prefix, message version, JSON body.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising these plain data types cannot fail: no maps with non-string keys.
        let body = serde_json::to_vec(self).unwrap_or_default();
        let mut out = Vec::with_capacity(5 + body.len());
        out.extend_from_slice(&((body.len() + 1) as u32).to_be_bytes());
        out.push(MESSAGE_VERSION);
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a frame's content (after the length prefix).
    pub fn decode(frame: &[u8]) -> Result<Message, ControlError> {
        let (&version, body) = frame.split_first().ok_or(ControlError::EmptyFrame)?;
        if version != MESSAGE_VERSION {
            return Err(ControlError::BadMessageVersion(version));
        }
        serde_json::from_slice(body).map_err(|e| ControlError::Malformed(e.to_string()))
    }

    /// Short name for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::AuthChallenge { .. } => "auth_challenge",
            Message::AuthResponse { .. } => "auth_response",
            Message::AuthOk { .. } => "auth_ok",
            Message::Request { .. } => "request",
            Message::Accepted { .. } => "accepted",
            Message::Refused { .. } => "refused",
            Message::Start => "start",
            Message::Heartbeat => "heartbeat",
            Message::Interval { .. } => "interval",
            Message::SenderDone => "sender_done",
            Message::Finish => "finish",
            Message::PacketLog { .. } => "packet_log",
            Message::Report { .. } => "report",
            Message::RunTest { .. } => "run_test",
            Message::TestDone { .. } => "test_done",
            Message::TimeProbe { .. } => "time_probe",
            Message::TimeReply { .. } => "time_reply",
            Message::Error { .. } => "error",
        }
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

    /// Next whole message, `Ok(None)` when more bytes are needed. After an error the stream is
    /// out of step and the connection must be dropped.
    pub fn next_message(&mut self) -> Result<Option<Message>, ControlError> {
        match self.next_frame()? {
            Some(frame) => Message::decode(&frame).map(Some),
            None => Ok(None),
        }
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
    use crate::spec::{Direction, Protocol, SocketOptions};
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
    fn frame_vector() {
        let bytes = Message::Start.encode();
        assert_eq!(bytes, b"\x00\x00\x00\x11\x01{\"type\":\"start\"}".to_vec());
        let refused = Message::Refused {
            reason: "rate".into(),
        };
        assert_eq!(
            refused.encode(),
            b"\x00\x00\x00\x23\x01{\"type\":\"refused\",\"reason\":\"rate\"}".to_vec()
        );
    }

    fn spec() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Loopback,
            rate_bps: Some(2_000_000),
            size: 500,
            duration_ns: Some(3_000_000_000),
            count: None,
            interval_ns: Some(1_000_000_000),
            flows: 1,
            client_udp_ports: vec![40000],
            raw: None,
            busy_poll: false,
            packet_log: false,
            socket: SocketOptions::default(),
            traffic: None,
            seed: 1,
        }
    }

    #[test]
    fn request_vector_and_round_trip() {
        let m = Message::Request { spec: spec() };
        let encoded = m.encode();
        let body = std::str::from_utf8(&encoded[5..]).unwrap();
        assert_eq!(
            body,
            r#"{"type":"request","spec":{"protocol":"udp","direction":"loopback","rate_bps":2000000,"size":500,"duration_ns":3000000000,"count":null,"interval_ns":1000000000,"flows":1,"client_udp_ports":[40000],"raw":null,"busy_poll":false,"packet_log":false,"socket":{"send_buffer":null,"recv_buffer":null,"kernel_pacing":false,"zerocopy":false,"congestion":null,"tx_timestamps":false,"dscp":null,"priority":null,"mark":null,"nodelay":null,"mss":null,"window_clamp":null,"read_rate_bps":null},"traffic":null,"seed":1}}"#
        );
        let mut d = FrameDecoder::new();
        d.push(&encoded[..7]);
        assert_eq!(d.next_message(), Ok(None));
        d.push(&encoded[7..]);
        assert_eq!(d.next_message(), Ok(Some(m)));
        assert_eq!(d.next_message(), Ok(None));
    }

    #[test]
    fn auth_vectors() {
        let response = Message::AuthResponse {
            nonce: "00".repeat(32),
            mac: "ab".into(),
        };
        let body = format!(
            "{{\"type\":\"auth_response\",\"nonce\":\"{}\",\"mac\":\"ab\"}}",
            "00".repeat(32)
        );
        assert_eq!(&response.encode()[5..], body.as_bytes());
        let ok = Message::AuthOk { mac: "cd".into() };
        assert_eq!(
            ok.encode(),
            b"\x00\x00\x00\x1e\x01{\"type\":\"auth_ok\",\"mac\":\"cd\"}".to_vec()
        );
    }

    #[test]
    fn decoder_cap_applies_from_the_next_frame() {
        let start = Message::Start.encode();
        let mut d = FrameDecoder::new();
        d.set_max_len(16);
        d.push(&start);
        assert_eq!(
            d.next_message(),
            Err(ControlError::FrameTooLong { len: 17, max: 16 })
        );
        let mut d = FrameDecoder::new();
        d.set_max_len(17);
        d.push(&start);
        assert_eq!(d.next_message(), Ok(Some(Message::Start)));
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

    #[test]
    fn decoder_rejects_garbage() {
        let mut d = FrameDecoder::new();
        d.push(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            d.next_message(),
            Err(ControlError::FrameTooLong { .. })
        ));
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x03\x01{}");
        assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x00");
        assert_eq!(d.next_message(), Err(ControlError::EmptyFrame));
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x01\x07");
        assert_eq!(d.next_message(), Err(ControlError::BadMessageVersion(7)));
        // Unknown fields are refused, not silently dropped.
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x2a\x01{\"type\":\"refused\",\"reason\":\"x\",\"extra\":1}");
        assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8)) {
            let mut d = FrameDecoder::new();
            for c in chunks {
                d.push(&c);
                while let Ok(Some(_)) = d.next_message() {}
            }
        }

        #[test]
        fn messages_round_trip(reason in ".{0,40}", session: u32, port: u16) {
            for m in [Message::Refused { reason: reason.clone() }, Message::Accepted { session, data_ports: vec![port, port.wrapping_add(1)], agent_mac: None, rate_cap_bps: Some(1), cookie: Some(7) }, Message::Error { message: reason.clone() }] {
                let mut d = FrameDecoder::new();
                d.push(&m.encode());
                prop_assert_eq!(d.next_message(), Ok(Some(m)));
            }
        }
    }
}
