//! The Session-Reflector, sans-IO: a request's bytes, where and when it came in, and the
//! reflector's clock in; the reply's bytes out, or why there is none.
//!
//! Stateless (RFC 8762 §4.3): the reply carries the sender's own sequence number, and nothing
//! is kept per session. It never sends more than it got: the reply has the request's length
//! (padding and anything after the STAMP fields reflected as they came), and a request too
//! short to hold a reply gets none. Each source (an IPv4 address, an IPv6 /64) is held to a
//! packet rate, and at most [`MAX_SOURCES`] sources are tracked at once.

use std::collections::HashMap;
use std::net::IpAddr;

use flowlab_wire::stamp::{ErrorEstimate, Mode, ReflectorRepr, SenderRepr, Timestamp};

use crate::StampAuth;

/// Sources whose rate is tracked at once; past it a new source is refused until one idles.
pub const MAX_SOURCES: usize = 4096;
/// Default packets a second reflected to one source.
pub const DEFAULT_MAX_PPS: u32 = 1000;
/// How many packets above its rate one source may send at once, per 1000 packets a second.
const BURST_PER_1000_PPS: u64 = 100;
/// Smallest burst, for low rates.
const MIN_BURST: u64 = 10;
/// Idle sources are swept out at most this often, so a flood of new sources costs no more
/// than one sweep of the table a second.
const SWEEP_EVERY_NS: u64 = 1_000_000_000;

/// Why a request got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("too short to reflect without amplification")]
    TooShort,
    #[error("HMAC does not verify")]
    BadHmac,
    #[error("over the source's rate")]
    RateLimited,
    #[error("too many sources at once")]
    TooManySources,
}

/// What the reflector did, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReflectorStats {
    pub reflected: u64,
    pub too_short: u64,
    pub bad_hmac: u64,
    pub rate_limited: u64,
    pub too_many_sources: u64,
}

impl ReflectorStats {
    fn count(&mut self, refusal: Refusal) {
        let counter = match refusal {
            Refusal::TooShort => &mut self.too_short,
            Refusal::BadHmac => &mut self.bad_hmac,
            Refusal::RateLimited => &mut self.rate_limited,
            Refusal::TooManySources => &mut self.too_many_sources,
        };
        *counter += 1;
    }
}

/// One received request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub bytes: &'a [u8],
    pub source: IpAddr,
    /// CLOCK_REALTIME when it arrived, ns (the kernel's receive stamp where there is one).
    pub received_ns: u64,
    /// Its TTL or hop limit on arrival, where the socket could tell.
    pub ttl: Option<u8>,
}

/// The reflector's clock at the moment of reflecting.
#[derive(Debug, Clone, Copy)]
pub struct ReflectorClock {
    /// CLOCK_MONOTONIC, ns: paces sources.
    pub monotonic_ns: u64,
    /// CLOCK_REALTIME, ns: the reply's transmit timestamp.
    pub transmit_ns: u64,
    /// The realtime clock's synchronisation and error.
    pub error: ErrorEstimate,
}

#[derive(Debug)]
pub struct Reflector {
    auth: Option<StampAuth>,
    limiter: SourceLimiter,
    stats: ReflectorStats,
}

impl Reflector {
    /// Authenticated mode with `auth`, else unauthenticated; `max_pps` per source.
    pub fn new(auth: Option<StampAuth>, max_pps: u32) -> Self {
        Reflector {
            auth,
            limiter: SourceLimiter::new(max_pps, MAX_SOURCES),
            stats: ReflectorStats::default(),
        }
    }

    pub fn mode(&self) -> Mode {
        match self.auth {
            Some(_) => Mode::Authenticated,
            None => Mode::Unauthenticated,
        }
    }

    pub fn stats(&self) -> ReflectorStats {
        self.stats
    }

    /// Writes the reply to `req` into `out` and returns its length (the request's).
    pub fn reflect(
        &mut self,
        req: &Request<'_>,
        clock: &ReflectorClock,
        out: &mut [u8],
    ) -> Result<usize, Refusal> {
        let result = self.try_reflect(req, clock, out);
        match result {
            Ok(_) => self.stats.reflected += 1,
            Err(refusal) => self.stats.count(refusal),
        }
        result
    }

    fn try_reflect(
        &mut self,
        req: &Request<'_>,
        clock: &ReflectorClock,
        out: &mut [u8],
    ) -> Result<usize, Refusal> {
        let mode = self.mode();
        let len = req.bytes.len();
        if len < mode.min_reflected_len() || out.len() < len {
            return Err(Refusal::TooShort);
        }
        // The cheap check first: a flood is turned away before any HMAC is computed.
        self.limiter.admit(req.source, clock.monotonic_ns)?;
        if let Some(auth) = &self.auth {
            if !auth.verify(req.bytes) {
                return Err(Refusal::BadHmac);
            }
        }
        let sender = SenderRepr::parse(req.bytes, mode).map_err(|_| Refusal::TooShort)?;
        let reply = &mut out[..len];
        reply.copy_from_slice(req.bytes);
        let repr = ReflectorRepr {
            seq: sender.seq,
            timestamp: Timestamp::ntp_from_unix_ns(clock.transmit_ns),
            error_estimate: clock.error,
            ssid: sender.ssid,
            receive_timestamp: Timestamp::ntp_from_unix_ns(req.received_ns),
            sender_seq: sender.seq,
            sender_timestamp: sender.timestamp,
            sender_error_estimate: sender.error_estimate,
            // 0: the TTL could not be read.
            sender_ttl: req.ttl.unwrap_or(0),
        };
        if !repr.emit(reply, mode) {
            return Err(Refusal::TooShort);
        }
        if let Some(auth) = &self.auth {
            auth.seal(reply);
        }
        Ok(len)
    }
}

/// A per-source packet rate: GCRA (a token bucket kept as one "theoretical arrival time"),
/// over a bounded table of sources.
#[derive(Debug)]
struct SourceLimiter {
    interval_ns: u64,
    tolerance_ns: u64,
    max_sources: usize,
    /// Per source, when its bucket is full again.
    tat: HashMap<IpAddr, u64>,
    last_sweep_ns: Option<u64>,
}

impl SourceLimiter {
    fn new(max_pps: u32, max_sources: usize) -> Self {
        let pps = u64::from(max_pps.max(1));
        let interval_ns = 1_000_000_000 / pps;
        let burst = (pps * BURST_PER_1000_PPS / 1000).max(MIN_BURST);
        SourceLimiter {
            interval_ns,
            tolerance_ns: interval_ns * (burst - 1),
            max_sources,
            tat: HashMap::new(),
            last_sweep_ns: None,
        }
    }

    fn admit(&mut self, source: IpAddr, now_ns: u64) -> Result<(), Refusal> {
        let key = source_key(source);
        if !self.tat.contains_key(&key) && self.tat.len() >= self.max_sources {
            self.sweep(now_ns);
            if self.tat.len() >= self.max_sources {
                return Err(Refusal::TooManySources);
            }
        }
        let tat = self.tat.entry(key).or_insert(now_ns);
        let start = (*tat).max(now_ns);
        if start - now_ns > self.tolerance_ns {
            return Err(Refusal::RateLimited);
        }
        *tat = start + self.interval_ns;
        Ok(())
    }

    /// Forgets sources whose bucket is full again (they sent nothing for a while).
    fn sweep(&mut self, now_ns: u64) {
        if self
            .last_sweep_ns
            .is_some_and(|last| now_ns.saturating_sub(last) < SWEEP_EVERY_NS)
        {
            return;
        }
        self.last_sweep_ns = Some(now_ns);
        self.tat.retain(|_, tat| *tat > now_ns);
    }
}

/// A source as rate-limited: an IPv4 address (also when mapped into IPv6), or an IPv6 /64,
/// since one host usually holds a whole /64.
fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(prefix.into())
            }
        },
    }
}

#[cfg(test)]
mod tests;
