use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use flowlab_wire::stamp::{ReflectorRepr, UNAUTH_LEN};
use proptest::prelude::*;

use super::*;
use crate::SessionSender;

const T1: u64 = 1_700_000_000_000_000_000;
const SECOND: u64 = 1_000_000_000;

fn v4(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, last))
}

fn request(sender: &SessionSender, seq: u32) -> Vec<u8> {
    let mut buf = vec![0u8; sender.packet_len()];
    sender.write_packet(seq, T1, ErrorEstimate::ntp(true, 1_000), &mut buf);
    buf
}

fn clock(monotonic_ns: u64) -> ReflectorClock {
    ReflectorClock {
        monotonic_ns,
        transmit_ns: T1 + 2_000_000,
        error: ErrorEstimate::ntp(false, 5_000_000),
    }
}

fn reflect(r: &mut Reflector, bytes: &[u8], source: IpAddr, mono: u64) -> Result<Vec<u8>, Refusal> {
    let req = Request {
        bytes,
        source,
        received_ns: T1 + 1_000_000,
        ttl: Some(61),
    };
    let mut out = vec![0u8; 2048];
    let len = r.reflect(&req, &clock(mono), &mut out)?;
    out.truncate(len);
    Ok(out)
}

#[test]
fn reflects_every_field_and_keeps_the_length() {
    let sender = SessionSender::new(None, 0x1234, 100).unwrap();
    let mut req = request(&sender, 77);
    req[90] = 0xab; // padding comes back as it went
    let mut r = Reflector::new(None, DEFAULT_MAX_PPS);
    let reply = reflect(&mut r, &req, v4(1), 0).unwrap();
    assert_eq!(reply.len(), 100);
    assert_eq!(reply[90], 0xab);
    let got = ReflectorRepr::parse(&reply, Mode::Unauthenticated).unwrap();
    assert_eq!(
        got,
        ReflectorRepr {
            seq: 77, // stateless: the sender's number
            timestamp: Timestamp::ntp_from_unix_ns(T1 + 2_000_000),
            error_estimate: ErrorEstimate::ntp(false, 5_000_000),
            ssid: 0x1234,
            receive_timestamp: Timestamp::ntp_from_unix_ns(T1 + 1_000_000),
            sender_seq: 77,
            sender_timestamp: Timestamp::ntp_from_unix_ns(T1),
            sender_error_estimate: ErrorEstimate::ntp(true, 1_000),
            sender_ttl: 61,
        }
    );
    assert_eq!(r.stats().reflected, 1);
}

#[test]
fn twamp_light_requests_down_to_41_bytes() {
    let sender = SessionSender::new(None, 0, UNAUTH_LEN).unwrap();
    let req = request(&sender, 3);
    let mut r = Reflector::new(None, DEFAULT_MAX_PPS);
    assert_eq!(reflect(&mut r, &req[..41], v4(1), 0).unwrap().len(), 41);
    assert_eq!(
        reflect(&mut r, &req[..40], v4(1), 0),
        Err(Refusal::TooShort)
    );
    assert_eq!(r.stats().too_short, 1);
}

#[test]
fn authenticated_mode_checks_and_seals() {
    let auth = StampAuth::new(b"shared secret");
    let sender = SessionSender::new(Some(auth.clone()), 9, 112).unwrap();
    let mut r = Reflector::new(Some(auth.clone()), DEFAULT_MAX_PPS);
    let reply = reflect(&mut r, &request(&sender, 5), v4(1), 0).unwrap();
    assert!(auth.verify(&reply));
    let got = ReflectorRepr::parse(&reply, Mode::Authenticated).unwrap();
    assert_eq!((got.sender_seq, got.ssid, got.sender_ttl), (5, 9, 61));

    let forged = SessionSender::new(Some(StampAuth::new(b"guess")), 9, 112).unwrap();
    let bad = reflect(&mut r, &request(&forged, 6), v4(1), 0);
    assert_eq!(bad, Err(Refusal::BadHmac));
    let unauth = SessionSender::new(None, 9, UNAUTH_LEN).unwrap();
    let short = reflect(&mut r, &request(&unauth, 7), v4(1), 0);
    assert_eq!(short, Err(Refusal::TooShort));
    assert_eq!(r.stats().bad_hmac, 1);
}

#[test]
fn each_source_is_held_to_its_rate() {
    let sender = SessionSender::new(None, 0, UNAUTH_LEN).unwrap();
    let req = request(&sender, 0);
    let mut r = Reflector::new(None, 1000);
    let burst = (0..200)
        .filter(|_| reflect(&mut r, &req, v4(1), SECOND).is_ok())
        .count();
    assert_eq!(burst, 100, "a burst of 100 ms at 1000 packets/s");
    assert_eq!(r.stats().rate_limited, 100);
    // Another source has its own budget; the first gets one packet a millisecond back.
    assert!(reflect(&mut r, &req, v4(2), SECOND).is_ok());
    assert!(reflect(&mut r, &req, v4(1), SECOND + 1_000_000).is_ok());
    assert!(reflect(&mut r, &req, v4(1), SECOND + 1_000_000).is_err());
}

#[test]
fn sources_are_addresses_and_ipv6_prefixes() {
    let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap();
    let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().unwrap();
    let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
    assert_eq!(source_key(a.into()), source_key(b.into()));
    assert_ne!(source_key(a.into()), source_key(c.into()));
    let mapped = Ipv4Addr::new(192, 0, 2, 1).to_ipv6_mapped();
    assert_eq!(source_key(mapped.into()), v4(1));
}

#[test]
fn the_source_table_is_bounded() {
    let mut limiter = SourceLimiter::new(1000, 2);
    assert!(limiter.admit(v4(1), SECOND).is_ok());
    assert!(limiter.admit(v4(2), SECOND).is_ok());
    assert_eq!(limiter.admit(v4(3), SECOND), Err(Refusal::TooManySources));
    // Once the others have been quiet long enough for their buckets to refill, a new
    // source takes a place.
    assert!(limiter.admit(v4(3), 3 * SECOND).is_ok());
    assert_eq!(limiter.tat.len(), 1);
}

proptest! {
    #[test]
    fn never_panics_nor_amplifies(
        bytes in proptest::collection::vec(any::<u8>(), 0..200),
        auth: bool,
    ) {
        let key = auth.then(|| StampAuth::new(b"k"));
        let mut r = Reflector::new(key, DEFAULT_MAX_PPS);
        if let Ok(reply) = reflect(&mut r, &bytes, v4(1), 0) {
            prop_assert_eq!(reply.len(), bytes.len());
        }
        let mut tiny = [0u8; 8];
        let req = Request { bytes: &bytes, source: v4(1), received_ns: 0, ttl: None };
        prop_assert!(r.reflect(&req, &clock(0), &mut tiny).is_err() || bytes.len() <= 8);
    }
}
