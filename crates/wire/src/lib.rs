//! Wire formats of flowlab: the probe header at the start of every test packet, and the
//! control protocol between a client and an agent.
//!
//! Every format follows the same shape: a checked view over untrusted bytes that never panics
//! once its length is checked, a parsed value (`Repr`), and byte test vectors beside the parser.
//! No I/O happens here: callers hand in and take out byte slices.

pub mod ack;
pub mod control;
pub mod message;
pub mod probe;

pub mod spec;

pub use control::{ClientHello, ControlError, FrameDecoder, Hello, Message, PROTOCOL_VERSION};
pub use message::{MessageError, MessageHead, StreamSplitter};
pub use probe::{ProbeError, ProbeHeader, ProbeRepr, PROBE_HEADER_LEN};
pub use spec::{Direction, Protocol, RawEndpoint, SocketOptions, SpecError, TestSpec};
