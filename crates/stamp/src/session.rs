//! The Session-Sender, sans-IO: test packets built from a sequence number and a clock reading,
//! and replies turned into delays and losses.
//!
//! With T1 the sender's transmit time, T2 the reflector's receive time, T3 its transmit time
//! and T4 the reply's arrival here:
//! - round trip = T4 − T1, reflector residence = T3 − T2,
//! - two-way delay = round trip − residence (one clock each: valid without synchronisation),
//! - forward delay = T2 − T1, backward delay = T4 − T3: one-way, meaningful only when both
//!   clocks are synchronised, which each packet's error estimate (S bit) says.

use flowlab_stats::{Arrival, LatencyStats, LatencySummary, SeqCounts, SeqTracker};
use flowlab_wire::stamp::{ErrorEstimate, Mode, ReflectorRepr, SenderRepr, StampError, Timestamp};
use serde::{Deserialize, Serialize};

use crate::StampAuth;

/// The largest UDP payload over IPv4.
pub const MAX_PACKET_LEN: usize = 65_507;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("a STAMP packet in {mode} mode is {min} to {MAX_PACKET_LEN} bytes, not {size}")]
    PacketSize {
        size: usize,
        min: usize,
        mode: &'static str,
    },
}

/// Name of a mode as the output says it.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Unauthenticated => "unauthenticated",
        Mode::Authenticated => "authenticated",
    }
}

/// A random Session-Sender Identifier: any but 0, which a reflector of RFC 8762 alone sends
/// back.
pub fn random_ssid() -> u16 {
    rand::random::<u16>().max(1)
}

/// Builds the session's test packets.
#[derive(Debug, Clone)]
pub struct SessionSender {
    auth: Option<StampAuth>,
    ssid: u16,
    packet_len: usize,
}

impl SessionSender {
    /// Authenticated with `auth`; `packet_len` bytes of UDP payload (the STAMP packet and zero
    /// padding, which a reflector returns as long).
    pub fn new(
        auth: Option<StampAuth>,
        ssid: u16,
        packet_len: usize,
    ) -> Result<Self, SessionError> {
        let mode = mode_of(&auth);
        if !(mode.packet_len()..=MAX_PACKET_LEN).contains(&packet_len) {
            return Err(SessionError::PacketSize {
                size: packet_len,
                min: mode.packet_len(),
                mode: mode_name(mode),
            });
        }
        Ok(SessionSender {
            auth,
            ssid,
            packet_len,
        })
    }

    pub fn mode(&self) -> Mode {
        mode_of(&self.auth)
    }

    pub fn packet_len(&self) -> usize {
        self.packet_len
    }

    pub fn ssid(&self) -> u16 {
        self.ssid
    }

    /// Writes test packet `seq`, stamped `sent_ns` (CLOCK_REALTIME) with this host's clock
    /// `error`, into `out` (at least `packet_len` bytes); returns its length.
    pub fn write_packet(
        &self,
        seq: u32,
        sent_ns: u64,
        error: ErrorEstimate,
        out: &mut [u8],
    ) -> usize {
        let packet = &mut out[..self.packet_len];
        packet.fill(0);
        let repr = SenderRepr {
            seq,
            timestamp: Timestamp::ntp_from_unix_ns(sent_ns),
            error_estimate: error,
            ssid: self.ssid,
        };
        repr.emit(packet, self.mode());
        if let Some(auth) = &self.auth {
            auth.seal(packet);
        }
        self.packet_len
    }

    /// A meter for this session's replies.
    pub fn reply_meter(&self) -> ReplyMeter {
        ReplyMeter::new(self.auth.clone(), self.ssid)
    }
}

fn mode_of(auth: &Option<StampAuth>) -> Mode {
    match auth {
        Some(_) => Mode::Authenticated,
        None => Mode::Unauthenticated,
    }
}

/// Why a datagram was not taken as a reply of this session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    #[error(transparent)]
    Malformed(#[from] StampError),
    #[error("HMAC does not verify")]
    BadHmac,
    #[error("not a reply to this session")]
    Foreign,
    #[error("a timestamp is before 1970")]
    BadTimestamp,
}

/// Replies that were not taken, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// Too short to be a reflector packet of the session's mode, or a timestamp before 1970.
    pub malformed: u64,
    pub bad_hmac: u64,
    /// Another session's SSID, or the sequence number of a packet not sent.
    pub foreign: u64,
}

/// How the reflector's clock and this host's stood, over the replies.
#[derive(Debug, Clone, Copy, Default)]
struct ClockAgreement {
    measured: u64,
    sender_unsynced: u64,
    reflector_unsynced: u64,
    max_error_ns: u64,
}

/// Delays and losses from a session's replies.
#[derive(Debug)]
pub struct ReplyMeter {
    auth: Option<StampAuth>,
    ssid: u16,
    replies: SeqTracker,
    highest_reflector_seq: Option<u32>,
    reflector_stateful: bool,
    round_trip: LatencyStats,
    two_way: LatencyStats,
    residence: LatencyStats,
    forward: LatencyStats,
    backward: LatencyStats,
    clocks: ClockAgreement,
    ttl: Option<(u8, u8)>,
    rejected: Rejected,
}

/// One reply's four timestamps, Unix ns.
struct Times {
    t1: i64,
    t2: i64,
    t3: i64,
    t4: i64,
}

impl ReplyMeter {
    pub fn new(auth: Option<StampAuth>, ssid: u16) -> Self {
        ReplyMeter {
            auth,
            ssid,
            replies: SeqTracker::new(),
            highest_reflector_seq: None,
            reflector_stateful: false,
            round_trip: LatencyStats::new(),
            two_way: LatencyStats::new(),
            residence: LatencyStats::new(),
            forward: LatencyStats::new(),
            backward: LatencyStats::new(),
            clocks: ClockAgreement::default(),
            ttl: None,
            rejected: Rejected::default(),
        }
    }

    /// Takes a datagram that arrived at `arrival_ns` (CLOCK_REALTIME) after `sent` packets of
    /// the session had left; what it was to the sequence, or why it was not taken.
    pub fn on_reply(
        &mut self,
        bytes: &[u8],
        arrival_ns: u64,
        sent: u64,
    ) -> Result<Arrival, ReplyError> {
        let result = self.take(bytes, arrival_ns, sent);
        if let Err(e) = result {
            let counter = match e {
                ReplyError::Malformed(_) | ReplyError::BadTimestamp => &mut self.rejected.malformed,
                ReplyError::BadHmac => &mut self.rejected.bad_hmac,
                ReplyError::Foreign => &mut self.rejected.foreign,
            };
            *counter += 1;
        }
        result
    }

    fn take(&mut self, bytes: &[u8], arrival_ns: u64, sent: u64) -> Result<Arrival, ReplyError> {
        let r = ReflectorRepr::parse(bytes, mode_of(&self.auth))?;
        if self.auth.as_ref().is_some_and(|auth| !auth.verify(bytes)) {
            return Err(ReplyError::BadHmac);
        }
        // A reflector of RFC 8762 alone leaves the SSID zero.
        if (r.ssid != self.ssid && r.ssid != 0) || u64::from(r.sender_seq) >= sent {
            return Err(ReplyError::Foreign);
        }
        let times = times_of(&r, arrival_ns).ok_or(ReplyError::BadTimestamp)?;
        let arrival = self.replies.on_packet(u64::from(r.sender_seq));
        if arrival == Arrival::Duplicate {
            return Ok(arrival);
        }
        self.reflector_stateful |= r.seq != r.sender_seq;
        self.highest_reflector_seq = self.highest_reflector_seq.max(Some(r.seq));
        self.record(&times);
        self.record_clocks(&r);
        if r.sender_ttl != 0 {
            let (lo, hi) = self.ttl.unwrap_or((r.sender_ttl, r.sender_ttl));
            self.ttl = Some((lo.min(r.sender_ttl), hi.max(r.sender_ttl)));
        }
        Ok(arrival)
    }

    fn record(&mut self, t: &Times) {
        let round_trip = t.t4 - t.t1;
        let residence = t.t3 - t.t2;
        self.round_trip.push(round_trip);
        self.residence.push(residence);
        self.two_way.push(round_trip - residence);
        self.forward.push(t.t2 - t.t1);
        self.backward.push(t.t4 - t.t3);
    }

    fn record_clocks(&mut self, r: &ReflectorRepr) {
        let c = &mut self.clocks;
        c.measured += 1;
        c.sender_unsynced += u64::from(!r.sender_error_estimate.synchronized());
        c.reflector_unsynced += u64::from(!r.error_estimate.synchronized());
        let error =
            (r.sender_error_estimate.error_ns()).saturating_add(r.error_estimate.error_ns());
        c.max_error_ns = c.max_error_ns.max(error);
    }

    /// Packets with a reply so far.
    pub fn replied(&self) -> u64 {
        self.replies.counts().unique
    }

    /// What the replies to `sent` packets showed.
    pub fn report(&self, sent: u64) -> SessionReport {
        let replies = self.replies.counts_with_sent(sent);
        SessionReport {
            replies,
            loss: self.loss(sent, &replies),
            round_trip: self.round_trip.summary(),
            two_way_delay: self.two_way.summary(),
            reflector_residence: self.residence.summary(),
            one_way: self.one_way(),
            sender_ttl: self.ttl.map(|(min, max)| TtlRange { min, max }),
            rejected: self.rejected,
        }
    }

    fn loss(&self, sent: u64, replies: &SeqCounts) -> Loss {
        // A stateful reflector numbers what it reflected: up to its highest number, the rest
        // were lost on the way there.
        let reflected = self
            .highest_reflector_seq
            .filter(|_| self.reflector_stateful)
            .map(|highest| (u64::from(highest) + 1).min(sent));
        Loss {
            sent,
            round_trip_lost: replies.lost,
            round_trip_loss_pct: pct(replies.lost, sent),
            reflector_stateful: self.reflector_stateful,
            forward_lost: reflected.map(|r| sent - r),
            backward_lost: reflected.map(|r| r.saturating_sub(replies.unique)),
        }
    }

    fn one_way(&self) -> OneWay {
        let c = &self.clocks;
        let mut unsynced = Vec::new();
        if c.sender_unsynced > 0 {
            unsynced.push(format!(
                "this host's clock was not synchronised for {} of {} replies",
                c.sender_unsynced, c.measured
            ));
        }
        if c.reflector_unsynced > 0 {
            unsynced.push(format!(
                "the reflector's clock was not synchronised for {} of {} replies",
                c.reflector_unsynced, c.measured
            ));
        }
        let valid = c.measured > 0 && unsynced.is_empty();
        let reason = match (c.measured, valid) {
            (0, _) => "no replies".to_string(),
            (_, true) => "both clocks synchronised (S bit set in every error estimate)".into(),
            (_, false) => unsynced.join("; "),
        };
        OneWay {
            valid,
            reason,
            error_bound_ns: (c.measured > 0).then_some(c.max_error_ns),
            forward: self.forward.summary(),
            backward: self.backward.summary(),
        }
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn times_of(r: &ReflectorRepr, arrival_ns: u64) -> Option<Times> {
    let own = |t: Timestamp, e: ErrorEstimate| {
        t.to_unix_ns(e.ptp()).and_then(|ns| i64::try_from(ns).ok())
    };
    Some(Times {
        t1: own(r.sender_timestamp, r.sender_error_estimate)?,
        t2: own(r.receive_timestamp, r.error_estimate)?,
        t3: own(r.timestamp, r.error_estimate)?,
        t4: i64::try_from(arrival_ns).ok()?,
    })
}

/// Losses, in total and, where the reflector tells, by direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Loss {
    pub sent: u64,
    /// Packets whose reply never came, whichever way they were lost.
    pub round_trip_lost: u64,
    pub round_trip_loss_pct: f64,
    /// The reflector numbers its replies itself (RFC 8762 stateful mode): it did so in at least
    /// one reply. A stateless reflector echoes the sender's numbers, and then losses have no
    /// direction.
    pub reflector_stateful: bool,
    /// Stateful reflector only: packets that never reached it (those sent after its last
    /// reply to arrive here counted as such).
    pub forward_lost: Option<u64>,
    /// Stateful reflector only: replies it sent that never arrived here.
    pub backward_lost: Option<u64>,
}

/// One-way delays, and whether they mean anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OneWay {
    /// Both clocks were synchronised to UTC (S bit) in every reply.
    pub valid: bool,
    /// Why they are, or are not, valid.
    pub reason: String,
    /// The largest sum of the two error estimates, ns: how far a one-way delay may be off.
    pub error_bound_ns: Option<u64>,
    /// Reflector receive time minus sender transmit time (T2 − T1).
    pub forward: Option<LatencySummary>,
    /// Arrival here minus reflector transmit time (T4 − T3).
    pub backward: Option<LatencySummary>,
}

/// The TTL (hop limit) of the test packets as they reached the reflector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TtlRange {
    pub min: u8,
    pub max: u8,
}

/// What a session's replies showed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionReport {
    /// Replies by the sender's sequence numbers: `lost` counts packets without a reply.
    pub replies: SeqCounts,
    pub loss: Loss,
    /// T4 − T1.
    pub round_trip: Option<LatencySummary>,
    /// Round trip minus the reflector's residence: (T4 − T1) − (T3 − T2).
    pub two_way_delay: Option<LatencySummary>,
    /// T3 − T2.
    pub reflector_residence: Option<LatencySummary>,
    pub one_way: OneWay,
    /// `None` when the reflector could not read it (it sent 0).
    pub sender_ttl: Option<TtlRange>,
    pub rejected: Rejected,
}

#[cfg(test)]
mod tests;
