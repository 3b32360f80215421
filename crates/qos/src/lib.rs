//! QoS network elements as sans-IO state machines: what an edge router or a bottleneck port does
//! to packets, and a TCP that reacts to it.
//!
//! Nothing here reads a clock, opens a socket or spawns a thread: time is a `u64` of nanoseconds
//! passed in by the driver (a discrete-event simulator with virtual time, or a real-time
//! emulator). The APIs follow quinn-proto: `enqueue(now, packet) -> Verdict`,
//! `poll_transmit(now) -> Option<_>`, `poll_timeout() -> Option<u64>`. A driver calls
//! `poll_transmit` until it returns `None` after every input, and again when `now` reaches
//! `poll_timeout()`.
//!
//! # Module map
//!
//! - [`classify`]: ordered DiffServ rules (DSCP, address prefixes, ports, protocol) → class
//!   index; DSCP names (`ef`, `af11`..`af43`, `cs0`..`cs7`, `be`/`df`).
//! - [`meter`]: token buckets in exact integer arithmetic: a single-rate policer, srTCM
//!   (RFC 2697), trTCM (RFC 2698) and a token-bucket shaper with a bounded queue.
//! - [`sched`]: per-class queues with tail drop and counters, the schedulers FIFO, strict
//!   priority, WFQ (WF²Q+), DRR and PQ-WFQ, and a [`sched::Port`] that serializes packets at a
//!   line rate.
//! - [`tcp`]: a Reno sender and a receiver (RFC 5681, RFC 6298 RTO, RFC 1323 window scaling,
//!   optional delayed ACKs).
//! - [`testing`]: a deterministic discrete-event loop and a one-path TCP transfer runner, used by
//!   the tests and reusable by simulators.
//!
//! # What is modelled and what is not
//!
//! Modelled: packet-level classification, metering, shaping, queueing and non-preemptive
//! serialization at a line rate; byte-exact token and transmission arithmetic that does not
//! drift over long runs; TCP's window and loss dynamics.
//!
//! Not modelled: link-layer framing (a [`PacketMeta::size`] is the number of bytes the port
//! charges; add ATM cell tax or Ethernet overhead before enqueueing), preemption, active queue
//! management (only tail drop), header rewriting (re-marking is returned as a colour, the caller
//! rewrites `dscp`), IP fragmentation, and everything in [`tcp`]'s own "not modelled" list.

#![forbid(unsafe_code)]

use std::net::{IpAddr, Ipv4Addr};

pub mod classify;
pub mod meter;
pub mod sched;
pub mod tcp;
pub mod testing;

/// What the QoS elements know about a packet: its identity, size on the wire and the header
/// fields a DiffServ classifier looks at. `Copy`, so queues hold it by value and the hot path
/// never allocates per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketMeta {
    /// Unique id chosen by the traffic source (for tracing a packet through elements).
    pub id: u64,
    /// Flow (microflow or aggregate) the packet belongs to, chosen by the traffic source.
    pub flow: u32,
    /// Bytes on the wire: what meters charge and ports serialize.
    pub size: u32,
    /// DiffServ code point, 0..=63 (the upper six bits of the TOS/traffic-class byte).
    pub dscp: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// IP protocol number (6 TCP, 17 UDP).
    pub proto: u8,
    /// When the source created the packet, for end-to-end delay.
    pub created_ns: u64,
}

impl PacketMeta {
    /// A UDP packet between unspecified IPv4 addresses with DSCP 0; set the other fields with
    /// struct update syntax or the `with_*` helpers.
    pub fn new(id: u64, flow: u32, size: u32, created_ns: u64) -> PacketMeta {
        PacketMeta {
            id,
            flow,
            size,
            dscp: 0,
            src: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dst: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            src_port: 0,
            dst_port: 0,
            proto: 17,
            created_ns,
        }
    }

    /// The same packet with another DSCP (values above 63 are masked to six bits).
    pub fn with_dscp(mut self, dscp: u8) -> PacketMeta {
        self.dscp = dscp & 0x3f;
        self
    }

    /// The same packet with other addresses, ports and protocol.
    pub fn with_five_tuple(
        mut self,
        src: IpAddr,
        src_port: u16,
        dst: IpAddr,
        dst_port: u16,
        proto: u8,
    ) -> PacketMeta {
        self.src = src;
        self.src_port = src_port;
        self.dst = dst;
        self.dst_port = dst_port;
        self.proto = proto;
        self
    }
}

/// The outcome of offering a packet to a queueing element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The element holds the packet; it comes out of `poll_transmit` later.
    Queued,
    /// The element discarded the packet (and counted it).
    Dropped(DropReason),
}

/// Why a packet was discarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// Tail drop: the class's buffer limit would be exceeded.
    QueueFull,
    /// The class index does not exist in this scheduler.
    NoSuchClass,
    /// The packet is larger than the shaper's bucket, so it could never conform.
    TooLarge,
}

/// Configuration errors: one clear line each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QosError {
    #[error("rate must be above 0 bit/s")]
    ZeroRate,
    #[error("bucket size must be above 0 bytes")]
    ZeroBurst,
    #[error("a scheduler needs at least one class")]
    NoClasses,
    #[error("class {0}: weight (or DRR quantum) must be above 0")]
    ZeroWeight(usize),
    #[error("trTCM peak rate {pir} bit/s is below committed rate {cir} bit/s")]
    PeakBelowCommitted { pir: u64, cir: u64 },
    #[error("TCP MSS must be above 0 bytes")]
    ZeroMss,
    #[error(
        "unknown DSCP name {0:?}: expected ef, af11..af43, cs0..cs7, be, df or a number 0..=63"
    )]
    UnknownDscp(String),
    #[error("invalid prefix {0:?}: expected ADDRESS/LENGTH, e.g. 10.0.0.0/8 or 2001:db8::/32")]
    BadPrefix(String),
    #[error("invalid port range {0:?}: expected PORT or LOW-HIGH with LOW <= HIGH")]
    BadPortRange(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_dscp_masks_to_six_bits() {
        let p = PacketMeta::new(1, 2, 100, 0).with_dscp(0xff);
        assert_eq!(p.dscp, 63);
    }

    #[test]
    fn errors_are_one_line() {
        let errs = [
            QosError::ZeroRate,
            QosError::UnknownDscp("xyz".into()),
            QosError::BadPrefix("1.2.3.4/40".into()),
            QosError::PeakBelowCommitted { pir: 1, cir: 2 },
        ];
        for e in errs {
            let s = e.to_string();
            assert!(!s.contains('\n') && !s.is_empty(), "{s}");
        }
    }
}
