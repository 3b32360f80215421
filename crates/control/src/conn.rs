//! A control connection: hello exchange and framed messages over a TCP stream.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::protocol::Message;
use flowlab_wire::control::{FRAME_TAG_LEN, HELLO_LEN, MAX_FRAME_LEN};
use flowlab_wire::{ControlError, FrameDecoder, Hello};

use crate::auth::{BadTag, End, FrameTags};

/// What can go wrong on a control connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("the peer closed the control connection")]
    Closed,
    #[error("no word from the peer for {0:.1} s")]
    Timeout(f64),
    #[error("{what} did not come within {secs:.1} s")]
    Late { what: &'static str, secs: f64 },
    #[error("the {kind} message takes {len} bytes, over the {max}-byte limit{hint}")]
    TooLarge {
        kind: &'static str,
        len: usize,
        max: usize,
        hint: &'static str,
    },
    #[error(transparent)]
    Tag(#[from] BadTag),
    #[error(transparent)]
    Protocol(#[from] ControlError),
    #[error("the peer read nothing for {0:.0} s")]
    Stalled(f64),
    #[error("control connection failed: {0}")]
    Io(#[from] io::Error),
}

/// When a step must be done by, and what to call it when it is not.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    limit: Duration,
    what: &'static str,
}

impl Deadline {
    pub fn after(limit: Duration, what: &'static str) -> Self {
        Deadline {
            at: Instant::now() + limit,
            limit,
            what,
        }
    }

    fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    fn missed(&self) -> ConnError {
        ConnError::Late {
            what: self.what,
            secs: self.limit.as_secs_f64(),
        }
    }
}

/// How long a send may make no progress: a peer that stops reading (while it may still send
/// heartbeats) must not hold a thread and a test slot for ever.
const WRITE_STALL: Duration = Duration::from_secs(10);

pub struct Conn {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
    /// After a pre-shared-key handshake: tags on every frame both ways.
    tags: Option<FrameTags>,
    /// Largest frame the peer takes, so an oversized one fails here with a reason.
    peer_max: (usize, &'static str),
    /// Derived from the session key: tags authenticated test packets.
    packet_key: Option<[u8; 32]>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Self {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(WRITE_STALL));
        Conn {
            stream,
            decoder: FrameDecoder::new(),
            buf: vec![0; 64 * 1024],
            tags: None,
            peer_max: (MAX_FRAME_LEN, ""),
            packet_key: None,
        }
    }

    /// Frames longer than `max` are refused from the next one on.
    pub fn set_max_frame(&mut self, max: usize) {
        self.decoder.set_max_len(max);
    }

    /// The largest frame the peer takes, and a hint for when a message exceeds it.
    pub fn set_peer_max(&mut self, max: usize, hint: &'static str) {
        self.peer_max = (max, hint);
    }

    /// From now on every frame is tagged with the session key, and checked.
    pub fn start_tags(&mut self, session_key: [u8; 32], end: End) {
        self.tags = Some(FrameTags::new(session_key, end));
        self.packet_key = Some(crate::auth::test_packet_key(&session_key));
    }

    /// The key of authenticated test packets, once the session is authenticated.
    pub fn test_packet_key(&self) -> Option<[u8; 32]> {
        self.packet_key
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn send_hello(&mut self, hello: Hello) -> Result<(), ConnError> {
        self.write(&hello.emit())
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), ConnError> {
        self.stream
            .write_all(bytes)
            .map_err(|e| match is_timeout(&e) {
                true => ConnError::Stalled(WRITE_STALL.as_secs_f64()),
                false => e.into(),
            })
    }

    /// Reads the peer's hello by `by`, however slowly its bytes come; bad magic is an error,
    /// the version is for the caller to judge.
    pub fn recv_hello(&mut self, by: Deadline) -> Result<Hello, ConnError> {
        let mut bytes = [0u8; HELLO_LEN];
        let mut got = 0;
        while got < HELLO_LEN {
            let left = by.left();
            if left.is_zero() {
                return Err(by.missed());
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut bytes[got..]) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => got += n,
                Err(e) if is_timeout(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Hello::parse(&bytes)?)
    }

    pub fn send(&mut self, message: &Message) -> Result<(), ConnError> {
        let mut frame = message.encode();
        let tag = if self.tags.is_some() {
            FRAME_TAG_LEN
        } else {
            0
        };
        let (max, hint) = self.peer_max;
        if frame.len() - 4 + tag > max {
            return Err(ConnError::TooLarge {
                kind: message.kind(),
                len: frame.len() - 4 + tag,
                max,
                hint,
            });
        }
        if let Some(tags) = &mut self.tags {
            tags.seal(&mut frame);
        }
        self.write(&frame)
    }

    /// The next whole message, its tag checked when frames are tagged.
    fn next_message(&mut self) -> Result<Option<Message>, ConnError> {
        let Some(frame) = self.decoder.next_frame()? else {
            return Ok(None);
        };
        let content = match &mut self.tags {
            Some(tags) => tags.open(&frame)?,
            None => &frame,
        };
        Ok(Some(Message::decode(content)?))
    }

    /// Next message, waiting at most `timeout`: `Ok(None)` when none came in time.
    pub fn poll(&mut self, timeout: Duration) -> Result<Option<Message>, ConnError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.next_message()? {
                return Ok(Some(m));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.stream
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            match self.stream.read(&mut self.buf) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => self.decoder.push(&self.buf[..n]),
                Err(e) if is_timeout(&e) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Next message within `timeout`, or a timeout error.
    pub fn recv(&mut self, timeout: Duration) -> Result<Message, ConnError> {
        self.poll(timeout)?
            .ok_or(ConnError::Timeout(timeout.as_secs_f64()))
    }

    /// Next message by `by`, however slowly its bytes come.
    pub fn recv_by(&mut self, by: Deadline) -> Result<Message, ConnError> {
        self.poll(by.left())?.ok_or_else(|| by.missed())
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Largest records chunk per packet-log message, well inside [`MAX_FRAME_LEN`].
pub const PACKET_LOG_CHUNK: usize = MAX_FRAME_LEN / 256;
