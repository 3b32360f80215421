use std::net::{IpAddr, Ipv4Addr};

use flowlab_wire::stamp::{AUTH_LEN, UNAUTH_LEN};

use super::*;
use crate::reflector::{ReflectorClock, Request};
use crate::Reflector;

const T1: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;
const SYNCED: ErrorEstimate = ErrorEstimate(0x8f84); // about 1 ms
const UNSYNCED: ErrorEstimate = ErrorEstimate(0x0f84);

/// Packet `seq` sent at T1 + seq ms, reflected 3 ms later after 1 ms inside the reflector.
fn reflected(
    sender: &SessionSender,
    reflector: &mut Reflector,
    seq: u32,
    reflector_clock: ErrorEstimate,
) -> Vec<u8> {
    let sent = T1 + u64::from(seq) * MS;
    let mut buf = vec![0u8; sender.packet_len()];
    sender.write_packet(seq, sent, SYNCED, &mut buf);
    let req = Request {
        bytes: &buf,
        source: IpAddr::V4(Ipv4Addr::LOCALHOST),
        received_ns: sent + 3 * MS,
        ttl: Some(64),
    };
    let clock = ReflectorClock {
        monotonic_ns: 0,
        transmit_ns: sent + 4 * MS,
        error: reflector_clock,
    };
    let mut out = vec![0u8; buf.len()];
    let len = reflector.reflect(&req, &clock, &mut out).unwrap();
    out.truncate(len);
    out
}

/// The reply to packet `seq` arrives 2 ms after the reflector sent it.
fn arrival(seq: u32) -> u64 {
    T1 + u64::from(seq) * MS + 6 * MS
}

#[test]
fn packet_sizes_are_checked() {
    assert!(SessionSender::new(None, 1, UNAUTH_LEN).is_ok());
    let e = SessionSender::new(None, 1, 43).unwrap_err();
    assert_eq!(
        e.to_string(),
        "a STAMP packet in unauthenticated mode is 44 to 65507 bytes, not 43"
    );
    let auth = Some(StampAuth::new(b"k"));
    assert!(SessionSender::new(auth.clone(), 1, UNAUTH_LEN).is_err());
    assert!(SessionSender::new(auth, 1, AUTH_LEN).is_ok());
    assert!(SessionSender::new(None, 1, MAX_PACKET_LEN + 1).is_err());
}

#[test]
fn test_packets_carry_what_they_say() {
    let sender = SessionSender::new(None, 0xabcd, 64).unwrap();
    let mut buf = vec![0xffu8; 80];
    assert_eq!(sender.write_packet(9, T1, SYNCED, &mut buf), 64);
    let p = SenderRepr::parse(&buf[..64], Mode::Unauthenticated).unwrap();
    assert_eq!((p.seq, p.ssid, p.error_estimate), (9, 0xabcd, SYNCED));
    assert_eq!(p.timestamp.to_unix_ns(false), Some(T1));
    assert!(
        buf[16..64].iter().all(|&b| b == 0),
        "MBZ and padding are zero"
    );
}

#[test]
fn delays_from_the_four_timestamps() {
    let sender = SessionSender::new(None, 7, UNAUTH_LEN).unwrap();
    let mut reflector = Reflector::new(None, 1000);
    let mut meter = sender.reply_meter();
    for seq in 0..3 {
        let reply = reflected(&sender, &mut reflector, seq, SYNCED);
        assert_eq!(
            meter.on_reply(&reply, arrival(seq), 3),
            Ok(Arrival::InOrder)
        );
    }
    let r = meter.report(3);
    let min = |d: &Option<LatencySummary>| d.unwrap().min_ns;
    let max = |d: &Option<LatencySummary>| d.unwrap().max_ns;
    assert_eq!(min(&r.round_trip), 6e6);
    assert_eq!(min(&r.reflector_residence), 1e6);
    assert_eq!((min(&r.two_way_delay), max(&r.two_way_delay)), (5e6, 5e6));
    assert_eq!(min(&r.one_way.forward), 3e6);
    assert_eq!(min(&r.one_way.backward), 2e6);
    assert!(r.one_way.valid, "{}", r.one_way.reason);
    assert_eq!(r.one_way.error_bound_ns, Some(2 * 1_007_081));
    assert_eq!(r.sender_ttl, Some(TtlRange { min: 64, max: 64 }));
    assert_eq!((r.replies.unique, r.loss.round_trip_lost), (3, 0));
}

#[test]
fn one_way_delays_need_both_clocks_synchronised() {
    let sender = SessionSender::new(None, 7, UNAUTH_LEN).unwrap();
    let mut reflector = Reflector::new(None, 1000);
    let mut meter = sender.reply_meter();
    let reply = reflected(&sender, &mut reflector, 0, UNSYNCED);
    meter.on_reply(&reply, arrival(0), 1).unwrap();
    let one_way = meter.report(1).one_way;
    assert!(!one_way.valid);
    assert_eq!(
        one_way.reason,
        "the reflector's clock was not synchronised for 1 of 1 replies"
    );
    assert!(one_way.forward.is_some(), "still shown, marked not valid");
    assert_eq!(sender.reply_meter().report(0).one_way.reason, "no replies");
}

#[test]
fn stateless_loss_has_no_direction() {
    let sender = SessionSender::new(None, 7, UNAUTH_LEN).unwrap();
    let mut reflector = Reflector::new(None, 1000);
    let mut meter = sender.reply_meter();
    for seq in [0, 1, 3] {
        let reply = reflected(&sender, &mut reflector, seq, SYNCED);
        meter.on_reply(&reply, arrival(seq), 5).unwrap();
    }
    let loss = meter.report(5).loss;
    assert_eq!(loss.round_trip_lost, 2, "2 and the tail packet 4");
    assert_eq!(loss.round_trip_loss_pct, 40.0);
    assert!(!loss.reflector_stateful);
    assert_eq!((loss.forward_lost, loss.backward_lost), (None, None));
}

/// A stateful reflector's reply: its own count `own` for the sender's packet `seq`.
fn stateful_reply(own: u32, seq: u32) -> Vec<u8> {
    let mut out = vec![0u8; UNAUTH_LEN];
    let ts = |ns| Timestamp::ntp_from_unix_ns(ns);
    let sent = T1 + u64::from(seq) * MS;
    ReflectorRepr {
        seq: own,
        timestamp: ts(sent + 4 * MS),
        error_estimate: SYNCED,
        ssid: 7,
        receive_timestamp: ts(sent + 3 * MS),
        sender_seq: seq,
        sender_timestamp: ts(sent),
        sender_error_estimate: SYNCED,
        sender_ttl: 60,
    }
    .emit(&mut out, Mode::Unauthenticated);
    out
}

#[test]
fn a_stateful_reflector_tells_the_direction() {
    // Five sent; packet 1 never reached the reflector (it numbered 0, 2, 3, 4 as 0..=3), and
    // its reply to packet 3 (its number 2) was lost on the way back.
    let mut meter = SessionSender::new(None, 7, UNAUTH_LEN)
        .unwrap()
        .reply_meter();
    for (own, seq) in [(0, 0), (1, 2), (3, 4)] {
        meter
            .on_reply(&stateful_reply(own, seq), arrival(seq), 5)
            .unwrap();
    }
    let loss = meter.report(5).loss;
    assert!(loss.reflector_stateful);
    assert_eq!(loss.round_trip_lost, 2);
    assert_eq!((loss.forward_lost, loss.backward_lost), (Some(1), Some(1)));
}

#[test]
fn stray_datagrams_are_counted_not_measured() {
    let auth = StampAuth::new(b"key");
    let sender = SessionSender::new(Some(auth.clone()), 7, AUTH_LEN).unwrap();
    let mut reflector = Reflector::new(Some(auth), 1000);
    let mut meter = sender.reply_meter();
    let good = reflected(&sender, &mut reflector, 0, SYNCED);
    assert_eq!(meter.on_reply(&good, arrival(0), 1), Ok(Arrival::InOrder));
    assert_eq!(meter.on_reply(&good, arrival(0), 1), Ok(Arrival::Duplicate));
    let mut tampered = good.clone();
    tampered[20] ^= 1;
    assert_eq!(
        meter.on_reply(&tampered, arrival(0), 1),
        Err(ReplyError::BadHmac)
    );
    assert!(matches!(
        meter.on_reply(&good[..50], 0, 1),
        Err(ReplyError::Malformed(_))
    ));
    let later = reflected(&sender, &mut reflector, 1, SYNCED);
    assert_eq!(
        meter.on_reply(&later, arrival(1), 1),
        Err(ReplyError::Foreign),
        "not sent yet"
    );
    let other = SessionSender::new(Some(StampAuth::new(b"key")), 8, AUTH_LEN).unwrap();
    let theirs = reflected(&other, &mut reflector, 0, SYNCED);
    assert_eq!(
        meter.on_reply(&theirs, arrival(0), 1),
        Err(ReplyError::Foreign),
        "other SSID"
    );
    let r = meter.report(1);
    assert_eq!(
        r.rejected,
        Rejected {
            malformed: 1,
            bad_hmac: 1,
            foreign: 2
        }
    );
    assert_eq!((r.replies.unique, r.replies.duplicates), (1, 1));
    assert_eq!(
        r.round_trip.unwrap().count,
        1,
        "a duplicate is not measured twice"
    );
}
