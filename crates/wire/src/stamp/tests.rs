//! Byte vectors laid out as RFC 8762's figures 1 to 4 (with RFC 8972's SSID), one field a line.

use super::*;
use proptest::prelude::*;

/// 2023-11-14 22:13:20 UTC and a half, a quarter after that, and three quarters.
const T1_NS: u64 = 1_700_000_000_500_000_000;
const T2_NS: u64 = 1_700_000_000_625_000_000;
const T3_NS: u64 = 1_700_000_000_750_000_000;

/// Figure 1: Session-Sender, unauthenticated.
static SENDER_UNAUTH: [u8; 44] = [
    0x00, 0x00, 0x01, 0x02, // sequence number 258
    0xe8, 0xfe, 0x6f, 0x80, // timestamp: NTP seconds 3,908,988,800 (Unix 1,700,000,000)
    0x80, 0x00, 0x00, 0x00, // timestamp: fraction 0.5
    0x8f, 0x84, // error estimate: S=1 Z=0 scale 15 multiplier 132 (about 1 ms)
    0xbe, 0xef, // SSID (RFC 8972; MBZ in RFC 8762)
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // MBZ (28 octets)
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
];

/// Figure 2: Session-Sender, authenticated (HMAC left zero: it is computed above this crate).
static SENDER_AUTH: [u8; 112] = [
    0x00, 0x00, 0x01, 0x02, // sequence number 258
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // MBZ (12 octets)
    0xe8, 0xfe, 0x6f, 0x80, // timestamp: seconds
    0x80, 0x00, 0x00, 0x00, // timestamp: fraction
    0x8f, 0x84, // error estimate
    0xbe, 0xef, // SSID
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // MBZ (68 octets)
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, //
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // HMAC (16 octets)
];

/// Figure 3: Session-Reflector, unauthenticated.
static REFLECTOR_UNAUTH: [u8; 44] = [
    0x00, 0x00, 0x00, 0x07, // sequence number 7 (a stateful reflector's own count)
    0xe8, 0xfe, 0x6f, 0x80, // timestamp (T3): seconds
    0xc0, 0x00, 0x00, 0x00, // timestamp (T3): fraction 0.75
    0x0f, 0x84, // error estimate: S=0 (not synchronised), scale 15, multiplier 132
    0xbe, 0xef, // SSID, copied
    0xe8, 0xfe, 0x6f, 0x80, // receive timestamp (T2): seconds
    0xa0, 0x00, 0x00, 0x00, // receive timestamp (T2): fraction 0.625
    0x00, 0x00, 0x01, 0x02, // sender sequence number 258
    0xe8, 0xfe, 0x6f, 0x80, // sender timestamp (T1): seconds
    0x80, 0x00, 0x00, 0x00, // sender timestamp (T1): fraction
    0x8f, 0x84, // sender error estimate
    0x00, 0x00, // MBZ
    0x3f, // sender TTL 63
    0x00, 0x00, 0x00, // MBZ (3 octets)
];

/// Figure 4: Session-Reflector, authenticated.
static REFLECTOR_AUTH: [u8; 112] = [
    0x00, 0x00, 0x00, 0x07, // sequence number
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // MBZ (12 octets)
    0xe8, 0xfe, 0x6f, 0x80, 0xc0, 0x00, 0x00, 0x00, // timestamp (T3)
    0x0f, 0x84, // error estimate
    0xbe, 0xef, // SSID
    0, 0, 0, 0, // MBZ (4 octets; 6 in RFC 8762, before the SSID)
    0xe8, 0xfe, 0x6f, 0x80, 0xa0, 0x00, 0x00, 0x00, // receive timestamp (T2)
    0, 0, 0, 0, 0, 0, 0, 0, // MBZ (8 octets)
    0x00, 0x00, 0x01, 0x02, // sender sequence number
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // MBZ (12 octets)
    0xe8, 0xfe, 0x6f, 0x80, 0x80, 0x00, 0x00, 0x00, // sender timestamp (T1)
    0x8f, 0x84, // sender error estimate
    0, 0, 0, 0, 0, 0,    // MBZ (6 octets)
    0x3f, // sender TTL
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // MBZ (15 octets)
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // HMAC (16 octets)
];

fn sender() -> SenderRepr {
    SenderRepr {
        seq: 258,
        timestamp: Timestamp::ntp_from_unix_ns(T1_NS),
        error_estimate: ErrorEstimate::ntp(true, 1_000_000),
        ssid: 0xbeef,
    }
}

fn reflector() -> ReflectorRepr {
    ReflectorRepr {
        seq: 7,
        timestamp: Timestamp::ntp_from_unix_ns(T3_NS),
        error_estimate: ErrorEstimate::ntp(false, 1_000_000),
        ssid: 0xbeef,
        receive_timestamp: Timestamp::ntp_from_unix_ns(T2_NS),
        sender_seq: 258,
        sender_timestamp: Timestamp::ntp_from_unix_ns(T1_NS),
        sender_error_estimate: ErrorEstimate::ntp(true, 1_000_000),
        sender_ttl: 63,
    }
}

#[test]
fn sender_vectors_parse_and_emit() {
    for (mode, bytes) in [
        (Mode::Unauthenticated, &SENDER_UNAUTH[..]),
        (Mode::Authenticated, &SENDER_AUTH[..]),
    ] {
        assert_eq!(bytes.len(), mode.packet_len());
        assert_eq!(SenderRepr::parse(bytes, mode), Ok(sender()));
        let mut out = vec![0xaa; bytes.len() + 4];
        assert!(sender().emit(&mut out, mode));
        assert_eq!(&out[..bytes.len()], bytes, "{mode:?}");
        assert_eq!(&out[bytes.len()..], &[0xaa; 4], "padding is the caller's");
        assert!(!sender().emit(&mut out[..bytes.len() - 1], mode));
    }
}

#[test]
fn reflector_vectors_parse_and_emit() {
    for (mode, bytes) in [
        (Mode::Unauthenticated, &REFLECTOR_UNAUTH[..]),
        (Mode::Authenticated, &REFLECTOR_AUTH[..]),
    ] {
        assert_eq!(ReflectorRepr::parse(bytes, mode), Ok(reflector()));
        let mut out = vec![0xaa; bytes.len()];
        assert!(reflector().emit(&mut out, mode));
        assert_eq!(out, bytes, "{mode:?}");
    }
}

#[test]
fn twamp_light_reply_of_41_bytes() {
    let short = &REFLECTOR_UNAUTH[..TWAMP_REFLECTED_LEN];
    assert_eq!(
        ReflectorRepr::parse(short, Mode::Unauthenticated),
        Ok(reflector())
    );
    let mut out = [0xaa; 41];
    assert!(reflector().emit(&mut out, Mode::Unauthenticated));
    assert_eq!(&out[..], short);
    assert!(!reflector().emit(&mut [0u8; 40], Mode::Unauthenticated));
}

#[test]
fn short_packets_are_refused() {
    assert_eq!(
        SenderRepr::parse(&SENDER_UNAUTH[..15], Mode::Unauthenticated),
        Err(StampError::Truncated { len: 15, need: 16 })
    );
    assert_eq!(
        SenderRepr::parse(&SENDER_UNAUTH, Mode::Authenticated),
        Err(StampError::Truncated { len: 44, need: 112 })
    );
    assert_eq!(
        ReflectorRepr::parse(&REFLECTOR_UNAUTH[..40], Mode::Unauthenticated),
        Err(StampError::Truncated { len: 40, need: 41 })
    );
    assert_eq!(Mode::Authenticated.hmac_range(), Some(96..112));
    assert_eq!(Mode::Unauthenticated.hmac_range(), None);
}

#[test]
fn error_estimate_fields() {
    let e = ErrorEstimate(0x8f84);
    assert!(e.synchronized());
    assert!(!e.ptp());
    assert_eq!((e.scale(), e.multiplier()), (15, 132));
    assert_eq!(e.error_ns(), 1_007_081);
    assert_eq!(ErrorEstimate::ntp(true, 1_000_000), e);
    // The multiplier is never 0, even for a perfect clock.
    assert_eq!(ErrorEstimate::ntp(false, 0), ErrorEstimate(0x0001));
    assert!(ErrorEstimate(0x4001).ptp());
    // Huge errors and the largest estimate saturate instead of wrapping.
    assert_eq!(ErrorEstimate::ntp(false, u64::MAX).error_ns(), u64::MAX);
    assert_eq!(ErrorEstimate(0x3fff).error_ns(), u64::MAX);
}

#[test]
fn timestamps_convert() {
    let t = Timestamp::ntp_from_unix_ns(T1_NS);
    assert_eq!(t.0, 0xe8fe_6f80_8000_0000);
    assert_eq!(t.to_unix_ns(false), Some(T1_NS));
    // NTP era 1: 2040-01-01 wraps the seconds and still reads back.
    let later = 2_208_988_800 * NS_PER_SEC + 123;
    let t = Timestamp::ntp_from_unix_ns(later);
    assert!(t.0 >> 63 == 0);
    assert_eq!(t.to_unix_ns(false), Some(later));
    // PTP: TAI seconds and nanoseconds.
    let ptp = Timestamp((1_700_000_037 << 32) | 250_000_000);
    assert_eq!(ptp.to_unix_ns(true), Some(1_700_000_000_250_000_000));
    // Before 1970 is not a time a packet is sent at.
    assert_eq!(Timestamp(0x8000_0000_0000_0000).to_unix_ns(false), None);
}

proptest! {
    #[test]
    fn sender_round_trips(seq: u32, ts: u64, err: u16, ssid: u16, auth: bool) {
        let mode = if auth { Mode::Authenticated } else { Mode::Unauthenticated };
        let r = SenderRepr {
            seq,
            timestamp: Timestamp(ts),
            error_estimate: ErrorEstimate(err),
            ssid,
        };
        let mut buf = vec![0u8; mode.packet_len()];
        prop_assert!(r.emit(&mut buf, mode));
        prop_assert_eq!(SenderRepr::parse(&buf, mode), Ok(r));
    }

    #[test]
    fn reflector_round_trips(
        seq: u32, ts: u64, err: u16, ssid: u16, rx: u64,
        sseq: u32, sts: u64, serr: u16, ttl: u8, auth: bool,
    ) {
        let mode = if auth { Mode::Authenticated } else { Mode::Unauthenticated };
        let r = ReflectorRepr {
            seq,
            timestamp: Timestamp(ts),
            error_estimate: ErrorEstimate(err),
            ssid,
            receive_timestamp: Timestamp(rx),
            sender_seq: sseq,
            sender_timestamp: Timestamp(sts),
            sender_error_estimate: ErrorEstimate(serr),
            sender_ttl: ttl,
        };
        let mut buf = vec![0u8; mode.packet_len()];
        prop_assert!(r.emit(&mut buf, mode));
        prop_assert_eq!(ReflectorRepr::parse(&buf, mode), Ok(r));
    }

    #[test]
    fn unix_ns_round_trips_through_ntp(ns in 0u64..4_000_000_000 * NS_PER_SEC) {
        prop_assert_eq!(Timestamp::ntp_from_unix_ns(ns).to_unix_ns(false), Some(ns));
    }

    #[test]
    fn error_estimate_covers_the_error(ns in 0u64..1_000 * NS_PER_SEC, synced: bool) {
        let e = ErrorEstimate::ntp(synced, ns);
        prop_assert_eq!(e.synchronized(), synced);
        prop_assert!(e.multiplier() >= 1);
        prop_assert!(e.error_ns() >= ns);
        // Within one part in 127 (the multiplier's precision) above it, or a few ns.
        prop_assert!(e.error_ns() <= ns + ns / 127 + 2);
    }

    #[test]
    fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        for mode in [Mode::Unauthenticated, Mode::Authenticated] {
            let _ = SenderRepr::parse(&bytes, mode);
            let _ = ReflectorRepr::parse(&bytes, mode);
            if let Ok(r) = ReflectorRepr::parse(&bytes, mode) {
                let _ = r.timestamp.to_unix_ns(r.error_estimate.ptp());
                let _ = r.error_estimate.error_ns();
            }
        }
    }
}
