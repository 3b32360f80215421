//! Traffic models: when the next packet is due and how big it is.
//!
//! Nothing here reads a clock or touches a socket: the caller passes `now` in nanoseconds of
//! whatever clock drives it (CLOCK_MONOTONIC in the real engine, virtual time in a simulator).
//!
//! Two layers:
//! - [`PacedSchedule`] and [`Pacer`]: the constant-rate schedule and the sender's decision loop;
//!   [`sender::SenderCore`] puts the pacers of a sender's flows, its rate cap and its
//!   acknowledgement rules together behind `poll`/`handle_*`, for the engine and the simulator.
//! - [`Source`]: a packet source that produces [`Emission`]s (offset from the flow's start,
//!   payload size) lazily and in time order. Sources are built from [`dist`]ributions and
//!   [`models`], shaped by a token-bucket [`contract`], named as [`preset`]s, and described on
//!   the command line or in the control protocol by a [`spec::TrafficSpec`]. Every random source
//!   takes a seed and replays the same sequence for the same seed.

pub mod contract;
pub mod dist;
pub mod load;
pub mod models;
mod pacer;
pub mod pacing;
pub mod preset;
pub mod rr;
mod schedule;
pub mod sender;
pub mod spec;
pub mod trace;

pub use contract::{ConformanceMeter, ContractParams, ContractReport, Shaper};
pub use dist::{Dist, EmpiricalCdf, Sampler, ValueKind};
pub use pacer::{Action, EndCondition, Pacer, PacerConfig};
pub use pacing::{Conditions, GroupWindow, PacingMode, PacingPlanner, Strategy};
pub use rr::{Transaction, TransactionConfig, Transactions};
pub use schedule::{PacedSchedule, TrafficError};
pub use spec::TrafficSpec;

use serde::{Deserialize, Serialize};

/// One packet of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Emission {
    /// When the packet leaves, in nanoseconds from the flow's start.
    pub at_ns: u64,
    /// Bytes of payload.
    pub size: u32,
}

/// A packet source: emissions in non-decreasing time order, produced on demand.
pub trait Source: Send {
    /// The next packet, or `None` when the source has finished (many never do: the caller's
    /// end condition stops them).
    fn next_emission(&mut self) -> Option<Emission>;

    /// Conformance to a traffic contract so far, for sources shaped by one ([`Shaper`]).
    fn contract_report(&self) -> Option<ContractReport> {
        None
    }

    /// The contract the source is shaped to, if any.
    fn contract(&self) -> Option<ContractParams> {
        None
    }
}

impl<S: Source + ?Sized> Source for Box<S> {
    fn next_emission(&mut self) -> Option<Emission> {
        (**self).next_emission()
    }
    fn contract_report(&self) -> Option<ContractReport> {
        (**self).contract_report()
    }
    fn contract(&self) -> Option<ContractParams> {
        (**self).contract()
    }
}

/// Derives the seed of sub-flow `index` from a flow's seed (SplitMix64 finaliser), so that the
/// sub-flows of a preset are independent but all follow from the one seed.
pub fn derive_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed
        ^ index
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
