//! iperf3 interoperation: `flowlab serve --iperf3` answers iperf3 clients, `flowlab test
//! --iperf3` runs against iperf3 servers. The protocol is `flowlab_iperf3` (sans-IO); this
//! is its sockets, with the engine's senders and flowlab's meters on the streams.

pub mod client;
pub mod server;
pub mod streams;

pub use flowlab_iperf3::DEFAULT_PORT;
