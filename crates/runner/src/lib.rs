//! flowlab's application, under any front end: run a test ([`test`]), a sweep ([`sweep`]:
//! repeated until the confidence interval is tight, shuffled, resumable) or an experiment
//! ([`experiment`]: clock estimation, synchronised starts, searches, on any [`StepRunner`]:
//! the real network's agents or a [`SimulatedNetwork`]),
//! and record runs in the results database ([`record`]). Each runner reports its progress as
//! [`Event`]s to an [`Observer`]; [`format`] holds every human text flowlab prints.

pub mod compare;
pub mod daemon;
pub mod defaults;
pub mod demo;
pub mod doctor;
pub mod emulated;
pub mod experiment;
mod foreign_udp;
pub mod format;
pub mod host;
pub mod iperf3;
pub mod live;
pub mod multicast;
pub mod observer;
pub mod outcome;
pub mod output;
pub mod record;
pub mod reproduce;
pub mod simulated;
pub mod sweep;
pub mod terminal;
pub mod test;

pub use experiment::{Network, StepRunner};
pub use observer::{Event, Observer};
pub use simulated::SimulatedNetwork;
