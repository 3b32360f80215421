//! A sans-IO TCP Reno sender and receiver, enough for window-limited and loss-driven behaviour
//! (the 64 KiB-window-over-190-ms limit of the transatlantic ATM trials, and TCP flows competing
//! in a DiffServ scheduler).
//!
//! The connection is already established at time 0 ([`connect`] models the handshake's outcome:
//! the window-scale shift is used only if both ends enable RFC 1323 scaling). Data flows one way;
//! sequence numbers are byte offsets from 0 in a `u64` (no wraparound).
//!
//! Modelled:
//! - Reno congestion control (RFC 5681): slow start with an RFC 3390 initial window, congestion
//!   avoidance by byte counting (+1 MSS per cwnd of acknowledged bytes), fast retransmit on the
//!   third duplicate ACK and fast recovery (window inflation, deflation to ssthresh on the first
//!   new ACK), `ssthresh = max(FlightSize/2, 2·MSS)`. cwnd does not grow past the largest
//!   window the receiver offered or the send buffer (a simple congestion window validation, so
//!   a window-limited flow does not build an enormous unused cwnd).
//! - Retransmission timeout (RFC 6298): SRTT/RTTVAR with α = 1/8, β = 1/4, RTO clamped to
//!   [`SenderConfig::min_rto_ns`, `max_rto_ns`], exponential backoff, Karn's rule (one timed
//!   segment at a time; no sample across a retransmission), go-back-N from `snd_una` with
//!   cwnd = 1 MSS after a timeout; ssthresh is held on repeated timeouts of the same data; after
//!   a timeout no fast retransmit is entered for duplicate ACKs below the old `snd_max`
//!   (RFC 6582's `recover` guard, avoiding spurious retransmits from go-back-N duplicates).
//! - Flow control: receiver window (constant: the application reads at once), RFC 1323 window
//!   scaling (up to 1 GiB, shift ≤ 14) against the 65 535-byte unscaled limit, a send-buffer
//!   limit, MSS, sender silly-window avoidance (RFC 1122: send a short segment only if it ends
//!   the data or is at least half the largest window offered).
//! - Receiver: out-of-order buffering within the window, immediate duplicate ACKs for
//!   out-of-order segments, immediate ACK when a gap is filled, optional delayed ACKs (every
//!   second segment or after a timeout).
//!
//! Not modelled: the handshake and FIN, SACK, the timestamps option (RTT is sampled from the
//! sender's own clock), PAWS, Nagle (data is always available), NewReno partial-ACK handling
//! (plain Reno exits recovery on any new ACK, so several losses per window usually end in a
//! timeout), limited transmit, ECN, congestion window validation, receiver SWS avoidance and a
//! slow-reading application (a writing application may be paced: [`TcpSender::set_written`]),
//! zero-window probing (the window never closes), header options'
//! bytes (a fixed [`SenderConfig::header_bytes`] per segment).

use crate::QosError;

/// What the application gives the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Data {
    /// An infinite backlog (ftp-like greedy source).
    Bulk,
    /// A fixed number of bytes; the sender is finished when all are acknowledged.
    Bytes(u64),
}

/// Sender parameters. [`SenderConfig::default`] is a 1460-byte MSS bulk sender with RFC 6298
/// timer constants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderConfig {
    /// Payload bytes per full segment.
    pub mss: u32,
    /// IP + TCP header bytes added to each segment's payload on the wire.
    pub header_bytes: u32,
    /// Initial cwnd in bytes; `None` for RFC 3390 `min(4·MSS, max(2·MSS, 4380))`.
    pub initial_cwnd: Option<u64>,
    /// Initial ssthresh in bytes (RFC 5681: arbitrarily high).
    pub initial_ssthresh: u64,
    /// Most unacknowledged bytes the socket buffer holds.
    pub send_buffer: u64,
    pub data: Data,
    /// Offer RFC 1323 window scaling.
    pub window_scaling: bool,
    pub initial_rto_ns: u64,
    pub min_rto_ns: u64,
    pub max_rto_ns: u64,
    /// Clock granularity G of RFC 6298 (RTO = SRTT + max(G, 4·RTTVAR)).
    pub granularity_ns: u64,
    pub dupack_threshold: u32,
}

impl Default for SenderConfig {
    fn default() -> SenderConfig {
        SenderConfig {
            mss: 1460,
            header_bytes: 40,
            initial_cwnd: None,
            initial_ssthresh: u64::MAX,
            send_buffer: u64::MAX,
            data: Data::Bulk,
            window_scaling: true,
            initial_rto_ns: 1_000_000_000,
            min_rto_ns: 1_000_000_000,
            max_rto_ns: 60_000_000_000,
            granularity_ns: 1_000_000,
            dupack_threshold: 3,
        }
    }
}

/// Receiver parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiverConfig {
    /// Receive buffer = the window offered (the application reads at once).
    pub buffer: u64,
    /// Offer RFC 1323 window scaling.
    pub window_scaling: bool,
    /// Delayed-ACK timeout; `None` acknowledges every segment at once.
    pub delayed_ack_ns: Option<u64>,
    /// Header bytes of an ACK on the wire.
    pub header_bytes: u32,
}

impl Default for ReceiverConfig {
    /// A 64 KiB buffer (the classic maximum), scaling offered, no delayed ACKs.
    fn default() -> ReceiverConfig {
        ReceiverConfig {
            buffer: 64 * 1024,
            window_scaling: true,
            delayed_ack_ns: None,
            header_bytes: 40,
        }
    }
}

/// A data segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Segment {
    pub seq: u64,
    /// Payload bytes.
    pub len: u32,
    /// Whether these bytes were sent before.
    pub retransmission: bool,
    /// Bytes on the wire (payload + headers).
    pub wire_size: u32,
}

impl Segment {
    /// One past the last byte (saturating: untrusted segments never overflow).
    pub fn end(&self) -> u64 {
        self.seq.saturating_add(u64::from(self.len))
    }
}

/// A pure ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ack {
    /// Next byte expected (cumulative).
    pub ack: u64,
    /// The 16-bit window field; the sender shifts it by the negotiated scale.
    pub window: u16,
    pub wire_size: u32,
}

/// The largest window RFC 1323 allows: 65535 · 2^14 bytes (just under 1 GiB).
pub const MAX_SCALED_WINDOW: u64 = 65_535 << 14;

/// The smallest shift (≤ 14) at which `buffer` fits the 16-bit window field.
pub fn window_shift(buffer: u64) -> u8 {
    let mut s = 0;
    while s < 14 && buffer >> s > 65_535 {
        s += 1;
    }
    s
}

/// Builds both ends of an established connection from their configurations.
pub fn connect(
    sender: SenderConfig,
    receiver: ReceiverConfig,
) -> Result<(TcpSender, TcpReceiver), QosError> {
    if sender.mss == 0 {
        return Err(QosError::ZeroMss);
    }
    let shift = if sender.window_scaling && receiver.window_scaling {
        window_shift(receiver.buffer)
    } else {
        0
    };
    let rx = TcpReceiver::new(receiver, shift);
    let wnd = u64::from(rx.window_field()) << shift;
    Ok((TcpSender::new(sender, shift, wnd), rx))
}

/// Sender counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    pub segments_sent: u64,
    pub payload_bytes_sent: u64,
    pub retransmitted_segments: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub acks_received: u64,
    pub dupacks_received: u64,
    pub rtt_samples: u64,
}

/// A Reno sender (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpSender {
    cfg: SenderConfig,
    wscale: u8,
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    cwnd: u64,
    ssthresh: u64,
    ca_acked: u64,
    peer_wnd: u64,
    max_peer_wnd: u64,
    dupacks: u32,
    in_recovery: bool,
    recover: Option<u64>,
    retransmit_pending: bool,
    srtt: Option<u64>,
    rttvar: u64,
    rto: u64,
    backoff: u32,
    rto_deadline: Option<u64>,
    /// (end sequence, send time) of the segment being timed.
    timed: Option<(u64, u64)>,
    /// Bytes a paced application has written so far (`None`: all of `cfg.data` at once).
    written: Option<u64>,
    stats: SenderStats,
}

impl TcpSender {
    /// A sender whose peer offered `peer_window` bytes and a window-scale `shift` (see
    /// [`connect`]). An MSS of 0 is raised to 1.
    pub fn new(cfg: SenderConfig, shift: u8, peer_window: u64) -> TcpSender {
        let mut cfg = cfg;
        cfg.mss = cfg.mss.max(1);
        cfg.max_rto_ns = cfg.max_rto_ns.max(cfg.min_rto_ns).max(1);
        let mss = u64::from(cfg.mss);
        let iw = cfg
            .initial_cwnd
            .unwrap_or_else(|| (4 * mss).min((2 * mss).max(4380)))
            .max(mss);
        TcpSender {
            wscale: shift.min(14),
            snd_una: 0,
            snd_nxt: 0,
            snd_max: 0,
            cwnd: iw,
            ssthresh: cfg.initial_ssthresh,
            ca_acked: 0,
            peer_wnd: peer_window,
            max_peer_wnd: peer_window,
            dupacks: 0,
            in_recovery: false,
            recover: None,
            retransmit_pending: false,
            srtt: None,
            rttvar: 0,
            rto: cfg.initial_rto_ns.clamp(cfg.min_rto_ns, cfg.max_rto_ns),
            backoff: 0,
            rto_deadline: None,
            timed: None,
            written: None,
            stats: SenderStats::default(),
            cfg,
        }
    }

    fn mss(&self) -> u64 {
        u64::from(self.cfg.mss)
    }

    fn flight_size(&self) -> u64 {
        self.snd_max - self.snd_una
    }

    /// Growth limit of cwnd: the most the peer's window and the send buffer ever allow.
    fn cwnd_cap(&self) -> u64 {
        self.max_peer_wnd.min(self.cfg.send_buffer).max(self.mss())
    }

    fn loss_ssthresh(&self) -> u64 {
        (self.flight_size() / 2).max(2 * self.mss())
    }

    /// The next segment to send at `now_ns`, if the windows allow one. Call until `None` after
    /// every ACK and timeout.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Segment> {
        self.handle_timeout(now_ns);
        let seg = if self.retransmit_pending {
            self.retransmit_pending = false;
            let len = self.mss().min(self.flight_size());
            if len == 0 {
                return None;
            }
            Segment {
                seq: self.snd_una,
                len: len as u32,
                retransmission: true,
                wire_size: (len as u32).saturating_add(self.cfg.header_bytes),
            }
        } else {
            let wnd = self.cwnd.min(self.peer_wnd).min(self.cfg.send_buffer);
            let flight = self.snd_nxt - self.snd_una;
            let remaining = match self.cfg.data {
                Data::Bulk => u64::MAX,
                Data::Bytes(n) => n.saturating_sub(self.snd_nxt),
            };
            let remaining = match self.written {
                Some(w) => remaining.min(w.saturating_sub(self.snd_nxt)),
                None => remaining,
            };
            let len = self.mss().min(wnd.saturating_sub(flight)).min(remaining);
            if len == 0 {
                return None;
            }
            if len < self.mss() && len < remaining && len < self.max_peer_wnd / 2 {
                return None; // sender silly-window avoidance
            }
            let seg = Segment {
                seq: self.snd_nxt,
                len: len as u32,
                retransmission: self.snd_nxt < self.snd_max,
                wire_size: (len as u32).saturating_add(self.cfg.header_bytes),
            };
            self.snd_nxt += len;
            self.snd_max = self.snd_max.max(self.snd_nxt);
            if !seg.retransmission && self.timed.is_none() {
                self.timed = Some((seg.end(), now_ns));
            }
            seg
        };
        if seg.retransmission {
            self.timed = None; // Karn: never time across a retransmission
            self.stats.retransmitted_segments += 1;
        }
        if self.rto_deadline.is_none() {
            self.rto_deadline = Some(now_ns.saturating_add(self.rto));
        }
        self.stats.segments_sent += 1;
        self.stats.payload_bytes_sent += u64::from(seg.len);
        Some(seg)
    }

    /// Processes an ACK. ACKs below `snd_una` or above anything sent are ignored.
    pub fn on_ack(&mut self, now_ns: u64, ack: &Ack) {
        self.stats.acks_received += 1;
        let a = ack.ack;
        if a > self.snd_max || a < self.snd_una {
            return;
        }
        self.peer_wnd = u64::from(ack.window) << self.wscale;
        self.max_peer_wnd = self.max_peer_wnd.max(self.peer_wnd);
        let mss = self.mss();
        if a > self.snd_una {
            let acked = a - self.snd_una;
            self.snd_una = a;
            self.snd_nxt = self.snd_nxt.max(a);
            if let Some((end, sent)) = self.timed {
                if a >= end {
                    self.rtt_sample(now_ns.saturating_sub(sent));
                    self.timed = None;
                }
            }
            if self.in_recovery {
                self.cwnd = self.ssthresh; // Reno: deflate and leave recovery
                self.in_recovery = false;
                self.ca_acked = 0;
            } else if self.cwnd >= self.cwnd_cap() {
                // Not cwnd-limited: do not grow a window that is never used.
            } else if self.cwnd < self.ssthresh {
                self.cwnd = self
                    .cwnd
                    .saturating_add(acked.min(mss))
                    .min(self.cwnd_cap());
            } else {
                self.ca_acked += acked;
                if self.ca_acked >= self.cwnd {
                    self.ca_acked -= self.cwnd;
                    self.cwnd = self.cwnd.saturating_add(mss).min(self.cwnd_cap());
                }
            }
            self.dupacks = 0;
            self.backoff = 0;
            self.retransmit_pending = false;
            self.rto_deadline = if self.snd_una == self.snd_max {
                None
            } else {
                Some(now_ns.saturating_add(self.rto))
            };
        } else if a == self.snd_una && self.snd_una < self.snd_max {
            self.dupacks += 1;
            self.stats.dupacks_received += 1;
            if self.in_recovery {
                self.cwnd = self.cwnd.saturating_add(mss);
            } else if self.dupacks == self.cfg.dupack_threshold
                && self.recover.is_none_or(|r| a > r)
            {
                self.ssthresh = self.loss_ssthresh();
                self.cwnd = self
                    .ssthresh
                    .saturating_add(u64::from(self.cfg.dupack_threshold).saturating_mul(mss));
                self.ca_acked = 0;
                self.in_recovery = true;
                self.retransmit_pending = true;
                self.timed = None;
                self.stats.fast_retransmits += 1;
            }
        }
    }

    /// Fires the retransmission timer if it is due at `now_ns`. Called by `poll_transmit` too.
    pub fn handle_timeout(&mut self, now_ns: u64) {
        let Some(deadline) = self.rto_deadline else {
            return;
        };
        if deadline > now_ns {
            return;
        }
        if self.snd_una == self.snd_max {
            self.rto_deadline = None;
            return;
        }
        self.stats.timeouts += 1;
        if self.backoff == 0 {
            self.ssthresh = self.loss_ssthresh();
        }
        self.cwnd = self.mss();
        self.ca_acked = 0;
        self.snd_nxt = self.snd_una;
        self.recover = Some(self.snd_max);
        self.in_recovery = false;
        self.dupacks = 0;
        self.retransmit_pending = false;
        self.timed = None;
        self.backoff += 1;
        self.rto = self.rto.saturating_mul(2).min(self.cfg.max_rto_ns);
        self.rto_deadline = Some(now_ns.saturating_add(self.rto));
    }

    /// The retransmission timer's deadline, if armed.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.rto_deadline
    }

    fn rtt_sample(&mut self, r: u64) {
        self.stats.rtt_samples += 1;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let var = (3 * u128::from(self.rttvar) + u128::from(s.abs_diff(r))) / 4;
                let avg = (7 * u128::from(s) + u128::from(r)) / 8;
                self.rttvar = u64::try_from(var).unwrap_or(u64::MAX);
                self.srtt = Some(u64::try_from(avg).unwrap_or(u64::MAX));
            }
        }
        let srtt = self.srtt.unwrap_or(r);
        let rto = srtt.saturating_add(self.cfg.granularity_ns.max(self.rttvar.saturating_mul(4)));
        self.rto = rto.clamp(self.cfg.min_rto_ns, self.cfg.max_rto_ns);
    }

    /// Whether a fixed-size transfer is fully acknowledged (never for bulk data).
    /// A paced application has written `bytes` in all (never less than before): only those
    /// are sent. Poll for segments after each write.
    pub fn set_written(&mut self, bytes: u64) {
        self.written = Some(self.written.map_or(bytes, |w| w.max(bytes)));
    }

    pub fn is_finished(&self) -> bool {
        matches!(self.cfg.data, Data::Bytes(n) if self.snd_una >= n)
    }

    pub fn config(&self) -> &SenderConfig {
        &self.cfg
    }

    pub fn cwnd(&self) -> u64 {
        self.cwnd
    }

    pub fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    /// The peer's window in bytes (after scaling).
    pub fn peer_window(&self) -> u64 {
        self.peer_wnd
    }

    pub fn window_shift(&self) -> u8 {
        self.wscale
    }

    pub fn snd_una(&self) -> u64 {
        self.snd_una
    }

    pub fn snd_nxt(&self) -> u64 {
        self.snd_nxt
    }

    pub fn snd_max(&self) -> u64 {
        self.snd_max
    }

    pub fn in_recovery(&self) -> bool {
        self.in_recovery
    }

    pub fn srtt_ns(&self) -> Option<u64> {
        self.srtt
    }

    pub fn rttvar_ns(&self) -> u64 {
        self.rttvar
    }

    pub fn rto_ns(&self) -> u64 {
        self.rto
    }

    pub fn stats(&self) -> &SenderStats {
        &self.stats
    }
}

/// Receiver counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    pub segments_received: u64,
    pub out_of_order_segments: u64,
    pub duplicate_segments: u64,
    pub out_of_window_segments: u64,
    pub acks_sent: u64,
}

/// A receiver: reassembles, acknowledges, offers a constant window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpReceiver {
    cfg: ReceiverConfig,
    wscale: u8,
    rcv_nxt: u64,
    /// Out-of-order ranges `[start, end)`, sorted and disjoint, all above `rcv_nxt`.
    ooo: Vec<(u64, u64)>,
    acks_due: u32,
    unacked_segments: u32,
    delayed_deadline: Option<u64>,
    last_ns: u64,
    stats: ReceiverStats,
}

impl TcpReceiver {
    /// A receiver using the window-scale `shift` agreed in the handshake (see [`connect`]).
    pub fn new(cfg: ReceiverConfig, shift: u8) -> TcpReceiver {
        TcpReceiver {
            cfg,
            wscale: shift.min(14),
            rcv_nxt: 0,
            ooo: Vec::new(),
            acks_due: 0,
            unacked_segments: 0,
            delayed_deadline: None,
            last_ns: 0,
            stats: ReceiverStats::default(),
        }
    }

    /// The 16-bit window field this receiver advertises.
    pub fn window_field(&self) -> u16 {
        let w = if self.wscale == 0 {
            self.cfg.buffer.min(65_535)
        } else {
            (self.cfg.buffer >> self.wscale).min(65_535)
        };
        w as u16
    }

    /// The window in bytes as the sender will see it.
    pub fn window(&self) -> u64 {
        u64::from(self.window_field()) << self.wscale
    }

    /// Accepts a segment.
    pub fn on_segment(&mut self, now_ns: u64, seg: &Segment) {
        self.stats.segments_received += 1;
        self.last_ns = now_ns;
        if seg.len == 0 {
            return;
        }
        let (start, end) = (seg.seq, seg.end());
        if end <= self.rcv_nxt {
            self.stats.duplicate_segments += 1;
            self.ack_now();
            return;
        }
        if start >= self.rcv_nxt.saturating_add(self.window()) {
            self.stats.out_of_window_segments += 1;
            self.ack_now();
            return;
        }
        if start > self.rcv_nxt {
            self.stats.out_of_order_segments += 1;
            self.insert_ooo(start, end);
            self.ack_now(); // duplicate ACK
            return;
        }
        let had_gap = !self.ooo.is_empty();
        self.rcv_nxt = end;
        while let Some(&(s, e)) = self.ooo.first() {
            if s > self.rcv_nxt {
                break;
            }
            self.rcv_nxt = self.rcv_nxt.max(e);
            self.ooo.remove(0);
        }
        match self.cfg.delayed_ack_ns {
            Some(delay) if !had_gap => {
                self.unacked_segments += 1;
                if self.unacked_segments >= 2 {
                    self.ack_now();
                } else if self.delayed_deadline.is_none() {
                    self.delayed_deadline = Some(now_ns.saturating_add(delay));
                }
            }
            _ => self.ack_now(),
        }
    }

    fn ack_now(&mut self) {
        self.acks_due = self.acks_due.saturating_add(1);
    }

    fn insert_ooo(&mut self, start: u64, end: u64) {
        let i = self.ooo.partition_point(|&(s, _)| s < start);
        self.ooo.insert(i, (start, end));
        // Merge overlapping or adjacent neighbours.
        let mut j = i.saturating_sub(1);
        while j + 1 < self.ooo.len() {
            let (s0, e0) = self.ooo[j];
            let (s1, e1) = self.ooo[j + 1];
            if s1 <= e0 {
                self.ooo[j] = (s0, e0.max(e1));
                self.ooo.remove(j + 1);
            } else if j >= i {
                break;
            } else {
                j += 1;
            }
        }
    }

    /// The next ACK to send at `now_ns`, if one is due.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Ack> {
        if self.acks_due > 0 {
            self.acks_due -= 1;
        } else if self.delayed_deadline.is_some_and(|d| d <= now_ns) {
            // the delayed ACK timer fired
        } else {
            return None;
        }
        self.delayed_deadline = None;
        self.unacked_segments = 0;
        self.stats.acks_sent += 1;
        Some(Ack {
            ack: self.rcv_nxt,
            window: self.window_field(),
            wire_size: self.cfg.header_bytes,
        })
    }

    /// When the delayed-ACK timer fires, if armed.
    /// (An ACK already due reports the time of the segment that made it due.)
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.acks_due > 0 {
            return Some(self.last_ns);
        }
        self.delayed_deadline
    }

    /// In-order bytes delivered to the application.
    pub fn delivered(&self) -> u64 {
        self.rcv_nxt
    }

    pub fn window_shift(&self) -> u8 {
        self.wscale
    }

    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::QueueLimit;
    use crate::testing::{run_transfer, PathConfig, TraceEvent, TransferConfig, TransferReport};
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    #[test]
    fn window_shift_and_fields() {
        assert_eq!(window_shift(65_535), 0);
        assert_eq!(window_shift(65_536), 1);
        assert_eq!(window_shift(1 << 20), 5);
        assert_eq!(window_shift(1 << 30), 14);
        assert_eq!(window_shift(u64::MAX), 14);
        let (s, r) = connect(
            SenderConfig::default(),
            ReceiverConfig {
                buffer: 1 << 30,
                ..ReceiverConfig::default()
            },
        )
        .unwrap();
        assert_eq!(r.window_field(), 65_535);
        assert_eq!(s.peer_window(), MAX_SCALED_WINDOW);
        // Without scaling on either side the window is capped at 65535.
        for (ss, rs) in [(false, true), (true, false)] {
            let (s, r) = connect(
                SenderConfig {
                    window_scaling: ss,
                    ..SenderConfig::default()
                },
                ReceiverConfig {
                    buffer: 1 << 30,
                    window_scaling: rs,
                    ..ReceiverConfig::default()
                },
            )
            .unwrap();
            assert_eq!((s.window_shift(), r.window_shift()), (0, 0));
            assert_eq!(s.peer_window(), 65_535);
        }
        assert_eq!(
            connect(
                SenderConfig {
                    mss: 0,
                    ..SenderConfig::default()
                },
                ReceiverConfig::default()
            )
            .unwrap_err(),
            QosError::ZeroMss
        );
    }

    #[test]
    fn a_paced_writer_sends_only_what_it_wrote() {
        let mut s = TcpSender::new(SenderConfig::default(), 0, 1 << 20);
        s.set_written(2 * 1460 + 100);
        let lens: Vec<u32> = std::iter::from_fn(|| s.poll_transmit(0))
            .map(|g| g.len)
            .collect();
        // The short tail ends what was written and goes at once (no Nagle).
        assert_eq!(lens, [1460, 1460, 100]);
        s.set_written(1460);
        assert_eq!(s.poll_transmit(0), None, "a write never shrinks");
        s.set_written(3 * 1460);
        // cwnd is 3 MSS, 3020 bytes in flight: 1360 more fit.
        assert_eq!(
            s.poll_transmit(0).map(|g| (g.seq, g.len)),
            Some((3020, 1360))
        );
    }

    #[test]
    fn rtt_estimator_follows_rfc6298() {
        let mut s = TcpSender::new(SenderConfig::default(), 0, 1 << 20);
        s.rtt_sample(100 * MS);
        assert_eq!((s.srtt_ns(), s.rttvar_ns()), (Some(100 * MS), 50 * MS));
        assert_eq!(s.rto_ns(), S); // 100 + 200 ms, clamped up to 1 s
        s.rtt_sample(300 * MS);
        // RTTVAR = 3/4·50 + 1/4·200 = 87.5 ms; SRTT = 7/8·100 + 1/8·300 = 125 ms.
        assert_eq!((s.srtt_ns(), s.rttvar_ns()), (Some(125 * MS), 87_500_000));
        assert_eq!(s.rto_ns(), S);
        s.rtt_sample(2 * S);
        assert_eq!(s.srtt_ns(), Some(359_375_000));
        assert_eq!(s.rto_ns(), 359_375_000 + 4 * s.rttvar_ns());
    }

    fn ack(a: u64) -> Ack {
        Ack {
            ack: a,
            window: 65_535,
            wire_size: 40,
        }
    }

    #[test]
    fn three_dupacks_retransmit_and_halve() {
        let cfg = SenderConfig {
            initial_cwnd: Some(10 * 1460),
            ..SenderConfig::default()
        };
        let mut s = TcpSender::new(cfg, 0, 65_535);
        let sent: Vec<Segment> = std::iter::from_fn(|| s.poll_transmit(0)).collect();
        assert_eq!(sent.len(), 10);
        assert_eq!(s.snd_max(), 14_600);
        s.on_ack(10 * MS, &ack(1460));
        assert_eq!(s.cwnd(), 11 * 1460);
        // Refill the window: 11 in flight from 1460.
        while s.poll_transmit(10 * MS).is_some() {}
        assert_eq!(s.snd_max() - s.snd_una(), 11 * 1460);
        for i in 0..2 {
            s.on_ack(11 * MS + i, &ack(1460));
            assert!(!s.in_recovery());
        }
        s.on_ack(12 * MS, &ack(1460));
        assert!(s.in_recovery());
        assert_eq!(s.ssthresh(), 11 * 1460 / 2);
        assert_eq!(s.cwnd(), 11 * 1460 / 2 + 3 * 1460);
        let r = s.poll_transmit(12 * MS).unwrap();
        assert_eq!((r.seq, r.len, r.retransmission), (1460, 1460, true));
        // Inflated window is still below the flight: nothing new.
        assert_eq!(s.poll_transmit(12 * MS), None);
        s.on_ack(200 * MS, &ack(14_600 + 1460));
        assert!(!s.in_recovery());
        assert_eq!(s.cwnd(), s.ssthresh());
        assert_eq!(s.stats().fast_retransmits, 1);
        assert_eq!(s.stats().timeouts, 0);
    }

    #[test]
    fn invalid_acks_are_ignored() {
        let mut s = TcpSender::new(SenderConfig::default(), 0, 65_535);
        while s.poll_transmit(0).is_some() {}
        let before = s.clone();
        s.on_ack(1, &ack(1_000_000_000));
        assert_eq!(s.snd_una(), before.snd_una());
        assert_eq!(s.cwnd(), before.cwnd());
    }

    #[test]
    fn receiver_reassembles_and_dupacks() {
        let mut r = TcpReceiver::new(ReceiverConfig::default(), 0);
        let seg = |seq, len| Segment {
            seq,
            len,
            retransmission: false,
            wire_size: len + 40,
        };
        r.on_segment(0, &seg(0, 100));
        assert_eq!(r.poll_transmit(0).unwrap().ack, 100);
        r.on_segment(1, &seg(200, 100));
        r.on_segment(2, &seg(400, 100));
        r.on_segment(3, &seg(300, 100));
        let acks: Vec<u64> = std::iter::from_fn(|| r.poll_transmit(3))
            .map(|a| a.ack)
            .collect();
        assert_eq!(acks, vec![100, 100, 100]);
        r.on_segment(4, &seg(100, 100));
        assert_eq!(r.poll_transmit(4).unwrap().ack, 500);
        assert_eq!(r.delivered(), 500);
        r.on_segment(5, &seg(0, 100));
        assert_eq!(r.poll_transmit(5).unwrap().ack, 500);
        assert_eq!(r.stats().duplicate_segments, 1);
        // Beyond the window: not stored, answered.
        r.on_segment(6, &seg(500 + 65_535, 10));
        assert_eq!(r.stats().out_of_window_segments, 1);
        assert_eq!(r.poll_transmit(6).unwrap().ack, 500);
        assert_eq!(r.poll_transmit(6), None);
    }

    #[test]
    fn delayed_acks_every_second_segment_or_timeout() {
        let cfg = ReceiverConfig {
            delayed_ack_ns: Some(200 * MS),
            ..ReceiverConfig::default()
        };
        let mut r = TcpReceiver::new(cfg, 0);
        let seg = |seq| Segment {
            seq,
            len: 1000,
            retransmission: false,
            wire_size: 1040,
        };
        r.on_segment(0, &seg(0));
        assert_eq!(r.poll_transmit(0), None);
        assert_eq!(r.poll_timeout(), Some(200 * MS));
        r.on_segment(10 * MS, &seg(1000));
        assert_eq!(r.poll_transmit(10 * MS).unwrap().ack, 2000);
        assert_eq!(r.poll_timeout(), None);
        r.on_segment(20 * MS, &seg(2000));
        assert_eq!(r.poll_transmit(219 * MS), None);
        assert_eq!(r.poll_transmit(220 * MS).unwrap().ack, 3000);
    }

    fn path(bps: u64) -> PathConfig {
        PathConfig {
            one_way_delay_ns: 95 * MS,
            bottleneck_bps: bps,
            buffer: QueueLimit::Packets(1000),
        }
    }

    fn run(
        sender: SenderConfig,
        receiver: ReceiverConfig,
        bps: u64,
        until: u64,
        mut drop: impl FnMut(u64, &Segment) -> bool,
    ) -> TransferReport {
        let cfg = TransferConfig {
            path: path(bps),
            sender,
            receiver,
            until_ns: until,
            trace: true,
        };
        run_transfer(&cfg, &mut drop).unwrap()
    }

    /// The MAY trial: standard TCP with a 64 KiB window over 190 ms gets ≈ 64 KiB / 0.19 s =
    /// 2.76 Mbit/s whatever the link rate (here 10 Mbit/s). Only whole segments are sent, so
    /// the window holds 44 × 1460 bytes and each round trip adds one segment's serialization:
    /// 64240 · 8 / 0.1912 s = 2.69 Mbit/s, within 3 % of the paper's bound.
    #[test]
    fn window_limited_64k_over_190ms() {
        let rx = ReceiverConfig {
            buffer: 64 * 1024,
            window_scaling: false,
            ..ReceiverConfig::default()
        };
        let rep = run(SenderConfig::default(), rx, 10_000_000, 60 * S, |_, _| {
            false
        });
        let bound = 65_535.0 * 8.0 / 0.19;
        let g = rep.goodput_bps(10 * S, 60 * S);
        assert!(g > 0.95 * bound && g <= bound, "goodput {g} vs {bound}");
        assert_eq!(rep.sender.peer_window(), 65_535);
        assert_eq!(rep.sender.stats().retransmitted_segments, 0);
        // A faster link makes no difference (MAY: 6 vs 26 Mbit/s).
        let rep26 = run(SenderConfig::default(), rx, 26_000_000, 60 * S, |_, _| {
            false
        });
        let g26 = rep26.goodput_bps(10 * S, 60 * S);
        assert!((g26 - g).abs() < 0.02 * g, "{g26} vs {g}");
    }

    /// RFC 1323 scaling with a 1 MiB window fills a 10 Mbit/s bottleneck (payload share
    /// 1460/1500 of the line rate).
    #[test]
    fn window_scaling_fills_the_bottleneck() {
        let rx = ReceiverConfig {
            buffer: 1 << 20,
            ..ReceiverConfig::default()
        };
        let rep = run(SenderConfig::default(), rx, 10_000_000, 60 * S, |_, _| {
            false
        });
        assert_eq!(rep.sender.window_shift(), 5);
        let line = 10_000_000.0 * 1460.0 / 1500.0;
        let g = rep.goodput_bps(10 * S, 60 * S);
        assert!(
            g > 0.99 * line && g <= line * 1.0001,
            "goodput {g} vs {line}"
        );
        assert_eq!(rep.port_counters.dropped, 0);
    }

    fn big_window() -> ReceiverConfig {
        ReceiverConfig {
            buffer: 1 << 20,
            ..ReceiverConfig::default()
        }
    }

    fn one_loss_run() -> TransferReport {
        let sender = SenderConfig {
            data: Data::Bytes(3_000_000),
            ..SenderConfig::default()
        };
        let lost = 60 * 1460;
        run(sender, big_window(), 10_000_000, 60 * S, move |_, seg| {
            seg.seq == lost && !seg.retransmission
        })
    }

    #[test]
    fn one_loss_triggers_fast_retransmit_and_halves_cwnd() {
        let rep = one_loss_run();
        let st = rep.sender.stats();
        assert_eq!(st.fast_retransmits, 1);
        assert_eq!(st.timeouts, 0);
        assert_eq!(st.retransmitted_segments, 1);
        assert!(rep.sender.is_finished());
        assert_eq!(rep.receiver.delivered(), 3_000_000);
        let acks: Vec<(u64, u64)> = rep
            .trace
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::AckReceived { cwnd, ssthresh, .. } => Some((cwnd, ssthresh)),
                _ => None,
            })
            .collect();
        let k = acks.iter().position(|a| a.1 != u64::MAX).unwrap();
        let cwnd_before = acks[k - 1].0;
        let ssthresh = acks[k].1;
        assert!(
            (2 * ssthresh).abs_diff(cwnd_before) <= 2 * 1460,
            "cwnd {cwnd_before} -> ssthresh {ssthresh}"
        );
        assert_eq!(acks[k].0, ssthresh + 3 * 1460);
        // Recovery ends with cwnd = ssthresh.
        assert!(acks[k..].iter().any(|&(c, s)| c == s && s == ssthresh));
    }

    #[test]
    fn outage_triggers_rto_with_exponential_backoff() {
        let rx = ReceiverConfig {
            buffer: 64 * 1024,
            window_scaling: false,
            ..ReceiverConfig::default()
        };
        let rep = run(SenderConfig::default(), rx, 10_000_000, 40 * S, |t, _| {
            (3 * S..12 * S).contains(&t)
        });
        assert!(rep.sender.stats().timeouts >= 3);
        assert_eq!(rep.sender.stats().fast_retransmits, 0);
        let timeouts: Vec<u64> = rep
            .trace
            .iter()
            .filter_map(|e| match *e {
                TraceEvent::Timeout { t, .. } => Some(t),
                _ => None,
            })
            .collect();
        // The retransmitted segment is the same each time (snd_una), and the gaps double.
        let gaps: Vec<u64> = timeouts.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.len() >= 3, "{timeouts:?}");
        for w in gaps.windows(2) {
            assert_eq!(w[1], 2 * w[0], "{gaps:?}");
        }
        assert!(gaps[0] >= 2 * S);
        // The transfer resumes after the outage.
        assert!(rep.receiver.delivered() as f64 > rep.delivered_at(12 * S) as f64 + 1e6);
    }

    #[test]
    fn same_inputs_same_outputs() {
        let a = one_loss_run();
        let b = one_loss_run();
        assert_eq!(a.trace, b.trace);
        assert_eq!(a.sender, b.sender);
        assert_eq!(a.receiver, b.receiver);
        assert!(a.trace.len() > 1000);
    }

    proptest! {
        /// Arbitrary ACKs and timer calls never panic and keep the sender's invariants.
        #[test]
        fn sender_survives_any_acks(
            ops in proptest::collection::vec((0u64..200_000, 0u8..3, any::<u16>(), 0u64..3 * S), 1..200),
        ) {
            let mut s = TcpSender::new(SenderConfig::default(), 3, 65_535);
            let mut now = 0;
            for (a, kind, w, dt) in ops {
                now += dt;
                match kind {
                    0 => { s.on_ack(now, &Ack { ack: a.min(s.snd_max() + 10), window: w, wire_size: 40 }); }
                    1 => { while s.poll_transmit(now).is_some() {} }
                    _ => s.handle_timeout(now),
                }
                prop_assert!(s.snd_una() <= s.snd_nxt() && s.snd_nxt() <= s.snd_max());
                prop_assert!(s.cwnd() >= 1460);
            }
        }

        /// Arbitrary segments never panic, and the ACK never exceeds contiguous data.
        #[test]
        fn receiver_survives_any_segments(
            segs in proptest::collection::vec((0u64..100_000, 0u32..3000), 1..200),
        ) {
            let mut r = TcpReceiver::new(ReceiverConfig { delayed_ack_ns: Some(1), ..ReceiverConfig::default() }, 0);
            let mut have = vec![false; 110_000];
            for (i, (seq, len)) in segs.into_iter().enumerate() {
                let seg = Segment { seq, len, retransmission: false, wire_size: len + 40 };
                // Marking every offered byte is a superset of what the receiver accepts.
                for b in seq..(seq + u64::from(len)).min(110_000) { have[b as usize] = true; }
                r.on_segment(i as u64, &seg);
                while let Some(a) = r.poll_transmit(i as u64) {
                    prop_assert!(have[..a.ack as usize].iter().all(|&x| x));
                }
            }
        }
    }
}
