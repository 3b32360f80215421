//! Thin, safe wrappers over the Linux system interfaces flowlab needs.
//!
//! This is the only crate in the workspace allowed to use `unsafe` and libc,
//! so every syscall is isolated here behind an `io::Result` API.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs, clippy::undocumented_unsafe_blocks)]

pub mod clock;
mod cmsg;
pub mod cpu;
pub mod daemon;
pub mod host;
pub mod icmp;
pub mod netlink;
pub mod packet;
pub mod poll;
pub mod raw;
pub mod signal;
pub mod socket;
mod sockopt;
pub mod tcp;
pub mod timestamping;
pub mod tuning;
pub mod udp;
pub mod xdp;

/// Serialises CPU-spinning tests so their timing checks do not disturb each other.
#[cfg(test)]
static TEST_CPU_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
