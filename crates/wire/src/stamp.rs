//! STAMP test packets (RFC 8762), with RFC 8972's Session-Sender Identifier: the packets of
//! TWAMP-light (RFC 5357's TWAMP-Test) in their STAMP form.
//!
//! Session-Sender packet, unauthenticated (44 bytes) and authenticated (112 bytes):
//! ```text
//!  unauthenticated                         authenticated
//!   0  sequence number (4)                   0  sequence number (4)
//!   4  timestamp (8)                         4  MBZ (12)
//!  12  error estimate (2)                   16  timestamp (8)
//!  14  SSID (2, RFC 8972; MBZ in 8762)      24  error estimate (2)
//!  16  MBZ (28)                             26  SSID (2)
//!                                           28  MBZ (68)
//!                                           96  HMAC (16)
//! ```
//! Session-Reflector packet, unauthenticated (44 bytes) and authenticated (112 bytes):
//! ```text
//!  unauthenticated                         authenticated
//!   0  sequence number (4)                   0  sequence number (4)
//!   4  timestamp (8)                         4  MBZ (12)
//!  12  error estimate (2)                   16  timestamp (8)
//!  14  SSID (2)                             24  error estimate (2)
//!  16  receive timestamp (8)                26  SSID (2)
//!  24  sender sequence number (4)           28  MBZ (4)
//!  28  sender timestamp (8)                 32  receive timestamp (8)
//!  36  sender error estimate (2)            40  MBZ (8)
//!  38  MBZ (2)                              48  sender sequence number (4)
//!  40  sender TTL (1)                       52  MBZ (12)
//!  41  MBZ (3)                              64  sender timestamp (8)
//!                                           72  sender error estimate (2)
//!                                           74  MBZ (6)
//!                                           80  sender TTL (1)
//!                                           81  MBZ (15)
//!                                           96  HMAC (16)
//! ```
//! Everything is big-endian. Bytes after these are padding (or RFC 8972 TLVs, which this
//! module does not interpret). The HMAC (authenticated mode) covers the 96 bytes before it;
//! it is computed above this crate, [`Mode::hmac_range`] says where it goes.
//!
//! A TWAMP-light reflector's packet ends after the sender TTL (41 bytes), so a reflected
//! packet of 41 to 43 bytes is read too; a request shorter than that cannot be answered
//! without sending more than it carried.

use std::ops::Range;

use thiserror::Error;

/// The well-known STAMP port (RFC 8762 §4.1).
pub const STAMP_PORT: u16 = 862;
/// A STAMP packet in unauthenticated mode, either direction.
pub const UNAUTH_LEN: usize = 44;
/// A STAMP packet in authenticated mode, either direction.
pub const AUTH_LEN: usize = 112;
/// The HMAC: HMAC-SHA-256 truncated to 128 bits (RFC 8762 §4.4).
pub const HMAC_LEN: usize = 16;
/// The shortest unauthenticated reflector packet: TWAMP-Test's, ending after the sender TTL.
pub const TWAMP_REFLECTED_LEN: usize = 41;
/// The fields an unauthenticated Session-Sender packet carries, SSID included.
const UNAUTH_SENDER_FIELDS: usize = 16;

/// Seconds from the NTP epoch (1900) to the Unix epoch (1970).
const NTP_UNIX_OFFSET_S: u64 = 2_208_988_800;
/// TAI − UTC since 2017: PTP timestamps count TAI seconds.
const TAI_UTC_OFFSET_S: u64 = 37;
const NS_PER_SEC: u64 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum StampError {
    #[error("STAMP packet too short: {len} bytes, need {need}")]
    Truncated { len: usize, need: usize },
}

/// Unauthenticated or authenticated: the two layouts of RFC 8762.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Unauthenticated,
    Authenticated,
}

impl Mode {
    /// Bytes of a STAMP packet in this mode (before padding).
    pub fn packet_len(self) -> usize {
        match self {
            Mode::Unauthenticated => UNAUTH_LEN,
            Mode::Authenticated => AUTH_LEN,
        }
    }

    /// Where the HMAC lies; `None` in unauthenticated mode. It covers `0..range.start`.
    pub fn hmac_range(self) -> Option<Range<usize>> {
        match self {
            Mode::Unauthenticated => None,
            Mode::Authenticated => Some(AUTH_LEN - HMAC_LEN..AUTH_LEN),
        }
    }

    /// The shortest reflected packet in this mode.
    pub fn min_reflected_len(self) -> usize {
        match self {
            Mode::Unauthenticated => TWAMP_REFLECTED_LEN,
            Mode::Authenticated => AUTH_LEN,
        }
    }

    fn min_sender_len(self) -> usize {
        match self {
            Mode::Unauthenticated => UNAUTH_SENDER_FIELDS,
            Mode::Authenticated => AUTH_LEN,
        }
    }
}

/// A 64-bit timestamp as carried: NTP (32-bit seconds since 1900, 32-bit fraction) when the
/// error estimate's Z bit is 0, truncated PTPv2 (32-bit TAI seconds since 1970, 32-bit
/// nanoseconds) when it is 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The NTP timestamp of a Unix time in ns (the fraction rounded down; wraps into NTP era
    /// 1 after 2036 as the format does).
    pub fn ntp_from_unix_ns(ns: u64) -> Timestamp {
        let secs = (ns / NS_PER_SEC + NTP_UNIX_OFFSET_S) & 0xffff_ffff;
        let frac = (u128::from(ns % NS_PER_SEC) << 32) / u128::from(NS_PER_SEC);
        Timestamp(secs << 32 | frac as u64)
    }

    /// Unix time in ns, reading the stamp as NTP (`ptp` false) or PTP (`ptp` true: the Z bit
    /// of the error estimate beside it). NTP seconds with the top bit clear are taken as era 1
    /// (2036–2104, RFC 4330 §3); `None` before the Unix epoch.
    pub fn to_unix_ns(self, ptp: bool) -> Option<u64> {
        let secs = self.0 >> 32;
        let low = self.0 & 0xffff_ffff;
        if ptp {
            let unix = secs.checked_sub(TAI_UTC_OFFSET_S)?;
            return Some(unix * NS_PER_SEC + low.min(NS_PER_SEC - 1));
        }
        let secs = if secs & 0x8000_0000 != 0 {
            secs
        } else {
            secs + (1 << 32)
        };
        let unix = secs.checked_sub(NTP_UNIX_OFFSET_S)?;
        let frac_ns = (u128::from(low) * u128::from(NS_PER_SEC) + (1 << 31)) >> 32;
        Some(unix * NS_PER_SEC + frac_ns as u64)
    }
}

/// The error estimate (RFC 4656 §4.1.2, Z bit from RFC 8186): S (synchronised to UTC by an
/// external source), Z (timestamp format: 0 NTP, 1 PTP), and an error of
/// `multiplier × 2^scale × 2^-32` seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ErrorEstimate(pub u16);

const S_BIT: u16 = 0x8000;
const Z_BIT: u16 = 0x4000;

impl ErrorEstimate {
    /// The smallest NTP-format estimate that covers `error_ns` (the multiplier is never 0).
    pub fn ntp(synchronized: bool, error_ns: u64) -> ErrorEstimate {
        let units = (u128::from(error_ns) << 32).div_ceil(u128::from(NS_PER_SEC));
        let mut scale = 0u32;
        while scale < 63 && units.div_ceil(1u128 << scale) > 255 {
            scale += 1;
        }
        let multiplier = units.div_ceil(1u128 << scale).clamp(1, 255) as u16;
        let s = if synchronized { S_BIT } else { 0 };
        ErrorEstimate(s | (scale as u16) << 8 | multiplier)
    }

    pub fn synchronized(self) -> bool {
        self.0 & S_BIT != 0
    }

    /// Whether the timestamps it qualifies are PTP-format.
    pub fn ptp(self) -> bool {
        self.0 & Z_BIT != 0
    }

    pub fn scale(self) -> u8 {
        ((self.0 >> 8) & 0x3f) as u8
    }

    pub fn multiplier(self) -> u8 {
        (self.0 & 0xff) as u8
    }

    /// The error it states, in ns (rounded up, saturating).
    pub fn error_ns(self) -> u64 {
        let units = u128::from(self.multiplier()) << self.scale();
        let ns = (units * u128::from(NS_PER_SEC)).div_ceil(1 << 32);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// Field offsets of one layout.
struct Layout {
    timestamp: usize,
    error: usize,
    ssid: usize,
    receive_timestamp: usize,
    sender_seq: usize,
    sender_timestamp: usize,
    sender_error: usize,
    sender_ttl: usize,
}

const UNAUTH_LAYOUT: Layout = Layout {
    timestamp: 4,
    error: 12,
    ssid: 14,
    receive_timestamp: 16,
    sender_seq: 24,
    sender_timestamp: 28,
    sender_error: 36,
    sender_ttl: 40,
};

const AUTH_LAYOUT: Layout = Layout {
    timestamp: 16,
    error: 24,
    ssid: 26,
    receive_timestamp: 32,
    sender_seq: 48,
    sender_timestamp: 64,
    sender_error: 72,
    sender_ttl: 80,
};

fn layout(mode: Mode) -> &'static Layout {
    match mode {
        Mode::Unauthenticated => &UNAUTH_LAYOUT,
        Mode::Authenticated => &AUTH_LAYOUT,
    }
}

fn be_u16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

fn check_len(b: &[u8], need: usize) -> Result<(), StampError> {
    if b.len() < need {
        return Err(StampError::Truncated { len: b.len(), need });
    }
    Ok(())
}

/// Checked view over a Session-Sender packet.
#[derive(Debug)]
pub struct SenderPacket<T: AsRef<[u8]>> {
    buffer: T,
    mode: Mode,
}

impl<T: AsRef<[u8]>> SenderPacket<T> {
    /// Wraps a buffer after checking it holds every field of `mode` (16 bytes unauthenticated,
    /// 112 authenticated); accessors cannot panic after this.
    pub fn new_checked(buffer: T, mode: Mode) -> Result<Self, StampError> {
        check_len(buffer.as_ref(), mode.min_sender_len())?;
        Ok(SenderPacket { buffer, mode })
    }

    pub fn seq(&self) -> u32 {
        be_u32(self.buffer.as_ref(), 0)
    }
    pub fn timestamp(&self) -> Timestamp {
        Timestamp(be_u64(self.buffer.as_ref(), layout(self.mode).timestamp))
    }
    pub fn error_estimate(&self) -> ErrorEstimate {
        ErrorEstimate(be_u16(self.buffer.as_ref(), layout(self.mode).error))
    }
    pub fn ssid(&self) -> u16 {
        be_u16(self.buffer.as_ref(), layout(self.mode).ssid)
    }
}

/// Checked view over a Session-Reflector packet.
#[derive(Debug)]
pub struct ReflectorPacket<T: AsRef<[u8]>> {
    buffer: T,
    mode: Mode,
}

impl<T: AsRef<[u8]>> ReflectorPacket<T> {
    /// Wraps a buffer after checking it holds every field of `mode` (41 bytes
    /// unauthenticated, 112 authenticated); accessors cannot panic after this.
    pub fn new_checked(buffer: T, mode: Mode) -> Result<Self, StampError> {
        check_len(buffer.as_ref(), mode.min_reflected_len())?;
        Ok(ReflectorPacket { buffer, mode })
    }

    fn u16_at(&self, at: usize) -> u16 {
        be_u16(self.buffer.as_ref(), at)
    }
    fn u64_at(&self, at: usize) -> u64 {
        be_u64(self.buffer.as_ref(), at)
    }

    pub fn seq(&self) -> u32 {
        be_u32(self.buffer.as_ref(), 0)
    }
    pub fn timestamp(&self) -> Timestamp {
        Timestamp(self.u64_at(layout(self.mode).timestamp))
    }
    pub fn error_estimate(&self) -> ErrorEstimate {
        ErrorEstimate(self.u16_at(layout(self.mode).error))
    }
    pub fn ssid(&self) -> u16 {
        self.u16_at(layout(self.mode).ssid)
    }
    pub fn receive_timestamp(&self) -> Timestamp {
        Timestamp(self.u64_at(layout(self.mode).receive_timestamp))
    }
    pub fn sender_seq(&self) -> u32 {
        be_u32(self.buffer.as_ref(), layout(self.mode).sender_seq)
    }
    pub fn sender_timestamp(&self) -> Timestamp {
        Timestamp(self.u64_at(layout(self.mode).sender_timestamp))
    }
    pub fn sender_error_estimate(&self) -> ErrorEstimate {
        ErrorEstimate(self.u16_at(layout(self.mode).sender_error))
    }
    pub fn sender_ttl(&self) -> u8 {
        self.buffer.as_ref()[layout(self.mode).sender_ttl]
    }
}

/// A parsed Session-Sender packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderRepr {
    pub seq: u32,
    pub timestamp: Timestamp,
    pub error_estimate: ErrorEstimate,
    /// RFC 8972's Session-Sender Identifier; 0 from a sender that does not set it.
    pub ssid: u16,
}

impl SenderRepr {
    pub fn parse(bytes: &[u8], mode: Mode) -> Result<SenderRepr, StampError> {
        let p = SenderPacket::new_checked(bytes, mode)?;
        Ok(SenderRepr {
            seq: p.seq(),
            timestamp: p.timestamp(),
            error_estimate: p.error_estimate(),
            ssid: p.ssid(),
        })
    }

    /// Writes the packet's first `mode.packet_len()` bytes (MBZ and HMAC zeroed; padding after
    /// them is the caller's); false, writing nothing, when `out` is shorter.
    pub fn emit(&self, out: &mut [u8], mode: Mode) -> bool {
        let Some(head) = out.get_mut(..mode.packet_len()) else {
            return false;
        };
        let l = layout(mode);
        head.fill(0);
        head[0..4].copy_from_slice(&self.seq.to_be_bytes());
        head[l.timestamp..l.timestamp + 8].copy_from_slice(&self.timestamp.0.to_be_bytes());
        head[l.error..l.error + 2].copy_from_slice(&self.error_estimate.0.to_be_bytes());
        head[l.ssid..l.ssid + 2].copy_from_slice(&self.ssid.to_be_bytes());
        true
    }
}

/// A parsed Session-Reflector packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReflectorRepr {
    /// The reflector's own count (stateful) or the sender's sequence number (stateless).
    pub seq: u32,
    /// When the reflector sent it.
    pub timestamp: Timestamp,
    /// Of the reflector's clock, for `timestamp` and `receive_timestamp`.
    pub error_estimate: ErrorEstimate,
    pub ssid: u16,
    /// When the reflector received the sender's packet.
    pub receive_timestamp: Timestamp,
    pub sender_seq: u32,
    pub sender_timestamp: Timestamp,
    pub sender_error_estimate: ErrorEstimate,
    /// TTL or hop limit of the sender's packet as it reached the reflector.
    pub sender_ttl: u8,
}

impl ReflectorRepr {
    pub fn parse(bytes: &[u8], mode: Mode) -> Result<ReflectorRepr, StampError> {
        let p = ReflectorPacket::new_checked(bytes, mode)?;
        Ok(ReflectorRepr {
            seq: p.seq(),
            timestamp: p.timestamp(),
            error_estimate: p.error_estimate(),
            ssid: p.ssid(),
            receive_timestamp: p.receive_timestamp(),
            sender_seq: p.sender_seq(),
            sender_timestamp: p.sender_timestamp(),
            sender_error_estimate: p.sender_error_estimate(),
            sender_ttl: p.sender_ttl(),
        })
    }

    /// Writes the packet into `out`'s first `mode.packet_len()` bytes, or all of `out` when it
    /// holds only a TWAMP-light reply (41 to 43 bytes); MBZ and HMAC are zeroed, bytes after
    /// them left alone. False, writing nothing, when `out` is shorter than
    /// `mode.min_reflected_len()`.
    pub fn emit(&self, out: &mut [u8], mode: Mode) -> bool {
        if out.len() < mode.min_reflected_len() {
            return false;
        }
        let end = out.len().min(mode.packet_len());
        let head = &mut out[..end];
        let l = layout(mode);
        head.fill(0);
        let mut put = |at: usize, bytes: &[u8]| head[at..at + bytes.len()].copy_from_slice(bytes);
        put(0, &self.seq.to_be_bytes());
        put(l.timestamp, &self.timestamp.0.to_be_bytes());
        put(l.error, &self.error_estimate.0.to_be_bytes());
        put(l.ssid, &self.ssid.to_be_bytes());
        put(l.receive_timestamp, &self.receive_timestamp.0.to_be_bytes());
        put(l.sender_seq, &self.sender_seq.to_be_bytes());
        put(l.sender_timestamp, &self.sender_timestamp.0.to_be_bytes());
        put(l.sender_error, &self.sender_error_estimate.0.to_be_bytes());
        put(l.sender_ttl, &[self.sender_ttl]);
        true
    }
}

#[cfg(test)]
mod tests;
