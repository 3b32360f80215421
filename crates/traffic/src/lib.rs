//! Traffic models: when the next packet is due and how big it is.
//!
//! Nothing here reads a clock or touches a socket: the caller passes `now` in nanoseconds of
//! whatever clock drives it (CLOCK_MONOTONIC in the real engine, virtual time in a simulator).

mod pacer;
mod schedule;

pub use pacer::{Action, EndCondition, Pacer, PacerConfig};
pub use schedule::{PacedSchedule, TrafficError};
