//! iperf3's wire protocol (esnet/iperf, `src/iperf_api.c`, `iperf_tcp.c`, `iperf_udp.c`,
//! `iperf.h`), sans-IO: bytes in, bytes and decisions out, no sockets.
//!
//! A test: the client opens a TCP control connection and sends a 37-byte [`Cookie`]; the
//! server answers with one signed [`State`] byte at each step (`PARAM_EXCHANGE`, then
//! `CREATE_STREAMS` after the client's [`Params`] in a length-prefixed JSON [`frame`]); the
//! client opens its streams (TCP: a connection that starts with the cookie; UDP: a datagram
//! [`udp::CONNECT_MSG`] answered with [`udp::CONNECT_REPLY`]); `TEST_START`, `TEST_RUNNING`;
//! the client sends `TEST_END` after its duration; `EXCHANGE_RESULTS` (both send their
//! [`Results`], client first); `DISPLAY_RESULTS`; the client's `IPERF_DONE`.

pub mod frame;
pub mod machine;
pub mod params;
pub mod results;
pub mod udp;

pub use frame::{Cookie, FrameError, State, COOKIE_SIZE};
pub use machine::{
    ClientAction, ClientMachine, ProtocolError, ServerEvent, ServerMachine, ServerStop,
};
pub use params::{Params, ParamsLimits, Refusal, TestPlan};
pub use results::{Results, ResultsError, StreamResult};

/// iperf3's default port, TCP for control and TCP streams, UDP for UDP streams.
pub const DEFAULT_PORT: u16 = 5201;

/// iperf3's stream ids: 1 for the first stream, then 3, 4, 5 ... (`iperf_add_stream` keeps
/// skipping 2 for compatibility between versions).
pub fn stream_id(index: usize) -> i64 {
    match index {
        0 => 1,
        i => i as i64 + 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_skip_two_like_iperf_add_stream() {
        let ids: Vec<i64> = (0..4).map(stream_id).collect();
        assert_eq!(ids, [1, 3, 4, 5]);
    }
}
