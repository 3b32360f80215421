//! The control plane: the agent (`flowlab serve`) that serves tests, and the client
//! (`flowlab test`) that asks for one, runs its side, and combines both sides' measurements.
//!
//! Control runs on plain blocking sockets and threads: a session is a few messages per second,
//! and the data plane, which needs the precision, has its own dedicated threads.

mod admission;
pub mod agent;
pub mod auth;
pub mod client;
mod conn;
pub mod controller;
pub mod host_facts;
pub mod metrics;
mod native;
mod outcome;
pub mod protocol;
pub mod result;

pub use admission::ConnLimits;
pub use agent::{serve, AgentConfig, AgentStats, Limits, LocalAgent};
pub use auth::{load_key, AuthError};
pub use client::{run_test, ClientError, TestOptions, TestRun};
pub use protocol::{Message, ReadMessage};
pub use result::{Origin, Summary2, TestResult, GRO_MAX_SEGMENTS, SCHEMA_VERSION};

/// Default TCP port of the control connection.
pub const DEFAULT_PORT: u16 = 9470;
