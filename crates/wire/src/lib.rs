//! Wire formats of flowlab: the probe header at the start of every test packet, the framing of
//! the control protocol between a client and an agent, the return-routability datagram, and
//! STAMP's test packets (RFC 8762), iperf2's UDP header and ICMP echo for interoperating
//! with other measurement tools.
//! This crate depends on no other flowlab crate.
//!
//! Every format follows the same shape: a checked view over untrusted bytes that never panics
//! once its length is checked, a parsed value (`Repr`), and byte test vectors beside the parser.
//! No I/O happens here: callers hand in and take out byte slices.

pub mod ack;
pub mod checksum;
pub mod control;
pub mod icmp;
pub mod iperf2;
pub mod message;
pub mod probe;
pub mod stamp;
pub mod udp_frame;

pub use control::{ClientHello, ControlError, FrameDecoder, Hello, PROTOCOL_VERSION};
pub use message::{MessageError, MessageHead, StreamSplitter};
pub use probe::{ProbeError, ProbeHeader, ProbeRepr, PROBE_HEADER_LEN};
