//! A control connection: hello exchange and framed messages over a TCP stream.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use flowlab_wire::control::{HELLO_LEN, MAX_FRAME_LEN};
use flowlab_wire::{ControlError, FrameDecoder, Hello, Message};

/// What can go wrong on a control connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("the peer closed the control connection")]
    Closed,
    #[error("no word from the peer for {0:.1} s")]
    Timeout(f64),
    #[error(transparent)]
    Protocol(#[from] ControlError),
    #[error("control connection failed: {0}")]
    Io(#[from] io::Error),
}

pub struct Conn {
    stream: TcpStream,
    decoder: FrameDecoder,
    buf: Vec<u8>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Self {
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            decoder: FrameDecoder::new(),
            buf: vec![0; 64 * 1024],
        }
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    pub fn send_hello(&mut self, hello: Hello) -> Result<(), ConnError> {
        self.stream.write_all(&hello.emit())?;
        Ok(())
    }

    /// Reads the peer's hello; bad magic is an error, the version is for the caller to judge.
    pub fn recv_hello(&mut self, timeout: Duration) -> Result<Hello, ConnError> {
        self.stream.set_read_timeout(Some(timeout))?;
        let mut bytes = [0u8; HELLO_LEN];
        match self.stream.read_exact(&mut bytes) {
            Ok(()) => Ok(Hello::parse(&bytes)?),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(ConnError::Closed),
            Err(e) if is_timeout(&e) => Err(ConnError::Timeout(timeout.as_secs_f64())),
            Err(e) => Err(e.into()),
        }
    }

    pub fn send(&mut self, message: &Message) -> Result<(), ConnError> {
        self.stream.write_all(&message.encode())?;
        Ok(())
    }

    /// Next message, waiting at most `timeout`: `Ok(None)` when none came in time.
    pub fn poll(&mut self, timeout: Duration) -> Result<Option<Message>, ConnError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.decoder.next_message()? {
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
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Largest records chunk per packet-log message, well inside [`MAX_FRAME_LEN`].
pub const PACKET_LOG_CHUNK: usize = MAX_FRAME_LEN / 256;
