//! ATM models for flowlab: cells, AAL5, IP encapsulation, line rates, traffic contracts and
//! a switch output port, all sans-IO.
//!
//! Nothing here opens a socket, reads a clock or starts a thread: time is a `u64` of
//! nanoseconds handed in by the caller, so the same code runs under the discrete-event
//! simulator (virtual time) and the real-time emulator. Untrusted bytes go through checked
//! parsers that return errors and never panic; receivers count what they discard.
//!
//! # Map
//!
//! - [`cell`]: the 53-byte cell, UNI/NNI headers, PTI codes, HEC (CRC-8 + coset 0x55): a
//!   checked view [`Cell`] and the parsed [`CellHeader`] / [`CellRepr`].
//! - [`aal5`]: CPCS-PDU layout and CRC-32, allocation-free [`Segmenter`], per-VC
//!   [`Reassembler`] with error counters.
//! - [`frame`]: AAL5 frames delimited on cell metadata ([`FrameDelimiter`]): which frames
//!   survive cell loss.
//! - [`encap`]: RFC 2684 LLC/SNAP and VC-mux, bridged 802.3, PPPoA/PPPoE, LANE, Classical IP
//!   MTU, IPv4 fragmentation, and [`cells_per_packet`] (checked against Linux `sch_cake`).
//! - [`link`]: ATM25, E1, DS-3 PLCP, OC-3c, OC-12c and custom lines as exact cell times;
//!   propagation delay.
//! - [`gcra`]: GCRA in its virtual-scheduling and leaky-bucket forms, CBR/VBR contracts, a
//!   policer (drop or tag) and a shaper.
//! - [`switch`]: an output port with a shared buffer, strict priority CBR > rt-VBR > nrt-VBR >
//!   UBR at cell level, EPD/PPD/CLP discard, EFCI marking and management counters.
//! - [`replicate`]: point-to-multipoint copies, recirculation loops (load multiplication as in
//!   seed 002) and a constant-rate background source.
//! - [`time`]: [`ExactNs`], exact fractions of a nanosecond, so that schedules never drift.
//!
//! # What is and is not modelled
//!
//! Modelled: cell and AAL5 formats bit for bit; the cell cost of every common encapsulation;
//! line cell rates exactly (slot k of a line starts at ⌊k·cell time⌋); GCRA conformance exactly
//! in rational arithmetic; an output-buffered switch port with cell-level strict priority,
//! frame-aware discard and per-VC counters. Not modelled: the physical layer below the cell
//! stream (SONET overhead is folded into the cell rate; HEC single-bit correction, cell
//! delineation and scrambling are absent); signalling, OAM and RM cell contents (they are
//! carried and counted, not interpreted); ABR rate control and GFR; input-port queueing, switch
//! fabric contention and head-of-line blocking; per-VC fair queueing inside a category (each
//! category is one FIFO); AAL1/2/3/4.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod aal5;
pub mod cell;
pub mod encap;
pub mod frame;
pub mod gcra;
pub mod link;
pub mod replicate;
pub mod switch;
pub mod time;

pub use aal5::{cells_for_payload, Aal5Counters, Aal5Error, Pdu, Reassembler, Segmenter};
pub use cell::{Cell, CellError, CellHeader, CellRepr, HeaderFormat, PayloadType};
pub use encap::{cells_per_packet, fragment_sizes, Encapsulation};
pub use frame::{Delimited, FrameDelimiter};
pub use gcra::{Contract, Gcra, LeakyBucket, Policer, PolicingAction, Shaper};
pub use link::{LineRate, Link, PhysicalLayer};
pub use replicate::{ConstantCellSource, PointToMultipoint, RecirculationLoop};
pub use switch::{
    CategoryLimits, CategoryLimitsError, CellMeta, Departure, DropReason, OutputPort, PortConfig,
    ServiceCategory, VcId, VcLimits, Verdict,
};
pub use time::ExactNs;
