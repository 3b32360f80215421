//! STAMP (RFC 8762, with RFC 8972's Session-Sender Identifier) and TWAMP-light (RFC 5357's
//! test packets): a stateless Session-Reflector and a paced Session-Sender that interoperate
//! with other implementations.
//!
//! - [`reflector`] (sans-IO): a request in, its reply out, a rate per source.
//! - [`session`] (sans-IO): test packets built, replies matched, delays and losses measured.
//! - [`report`]: the session's result document and its human form.
//! - [`net`]: the sockets, clocks and pacer around them.
//! - [`service`]: a session from what a person typed, a reflector on its own thread.
//!
//! The packet layouts are `flowlab_wire::stamp`.

mod auth;
pub mod net;
pub mod reflector;
pub mod report;
pub mod service;
pub mod session;

pub use auth::StampAuth;
pub use net::{bind_reflector, run_session, serve_reflector, RunError, SessionOptions};
pub use reflector::{Reflector, ReflectorStats};
pub use report::{render, StampResult};
pub use service::{ReflectorThread, SessionRequest};
pub use session::{SessionReport, SessionSender};
