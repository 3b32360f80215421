//! Admission of control connections: caps on connections in setup (from accept to a test's
//! start), in total and per source, so peers that never finish a handshake cannot exhaust the
//! agent's memory and threads. Running tests are bounded by `--max-tests` instead.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr, TcpStream};
use std::sync::{Arc, Mutex, PoisonError};

use crate::protocol::Message;
use flowlab_wire::Hello;

/// How many connections may be in setup at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    pub max_connections: usize,
    /// Per source address (IPv6: per /64, what one host usually holds). As many as the
    /// default `--max-tests`, so a controller starting that many flows at once gets through.
    pub max_per_source: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            max_connections: 64,
            max_per_source: 16,
        }
    }
}

#[derive(Default)]
struct Open {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

pub struct Admission {
    limits: ConnLimits,
    open: Mutex<Open>,
}

/// A connection's place; dropping it frees the place.
pub struct Ticket {
    admission: Arc<Admission>,
    source: IpAddr,
}

/// The address a per-source cap counts: IPv4 as is, IPv6 by its /64.
fn source_of(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        v4 => v4,
    }
}

impl Admission {
    pub fn new(limits: ConnLimits) -> Arc<Admission> {
        Arc::new(Admission {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A place for a connection from `ip`, or why there is none.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, String> {
        let source = source_of(ip);
        let mut open = self.lock();
        if open.total >= self.limits.max_connections {
            return Err(format!(
                "the agent has its limit of {} connections in setup (--max-connections)",
                self.limits.max_connections
            ));
        }
        let from_source = open.by_source.entry(source).or_default();
        if *from_source >= self.limits.max_per_source {
            return Err(format!(
                "the agent has its limit of {} connections in setup from {} (--max-connections-per-source)",
                self.limits.max_per_source,
                ip.to_canonical()
            ));
        }
        *from_source += 1;
        open.total += 1;
        Ok(Ticket {
            admission: self.clone(),
            source,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self.admission.lock();
        open.total -= 1;
        if let Some(n) = open.by_source.get_mut(&self.source) {
            *n -= 1;
            if *n == 0 {
                open.by_source.remove(&self.source);
            }
        }
    }
}

/// Tells a connection there is no room and closes it, never blocking the accept loop: the
/// hello and the refusal fit an empty socket buffer.
pub fn turn_away(mut stream: TcpStream, hello: Hello, reason: String) {
    let _ = stream.set_nonblocking(true);
    let mut out = hello.emit().to_vec();
    out.extend_from_slice(&Message::Refused { reason }.encode());
    let _ = stream.write_all(&out);
    // Unread bytes would turn the close into a reset that can discard the refusal.
    let mut sink = [0u8; 4096];
    for _ in 0..4 {
        if !matches!(stream.read(&mut sink), Ok(n) if n > 0) {
            break;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_in_total_and_per_source() {
        let a = Admission::new(ConnLimits {
            max_connections: 3,
            max_per_source: 2,
        });
        let one: IpAddr = "10.0.0.1".parse().unwrap();
        let two: IpAddr = "10.0.0.2".parse().unwrap();
        let t1 = a.admit(one).unwrap();
        let _t2 = a.admit(one).unwrap();
        let err = a.admit(one).err().unwrap();
        assert!(
            err.contains("2 connections in setup from 10.0.0.1"),
            "{err}"
        );
        let _t3 = a.admit(two).unwrap();
        let err = a.admit(two).err().unwrap();
        assert!(err.contains("limit of 3 connections"), "{err}");
        drop(t1);
        assert!(a.admit(two).is_ok(), "a freed place is free again");
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_ipv4_as_ipv4() {
        let a = Admission::new(ConnLimits {
            max_connections: 10,
            max_per_source: 1,
        });
        let _t = a.admit("2001:db8::1".parse().unwrap()).unwrap();
        assert!(a.admit("2001:db8::2".parse().unwrap()).is_err());
        assert!(a.admit("2001:db8:0:1::1".parse().unwrap()).is_ok());
        let _v4 = a.admit("192.0.2.1".parse().unwrap()).unwrap();
        assert!(a.admit("::ffff:192.0.2.1".parse().unwrap()).is_err());
    }
}
