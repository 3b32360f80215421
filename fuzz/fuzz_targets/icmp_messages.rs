//! ICMP messages on untrusted bytes, as an echo test reads what its socket hands up (with
//! an IPv4 header from a raw socket, without one from a ping socket): never a panic; an
//! ICMPv4 message that parses has a valid checksum; an echo whose data holds a stamp
//! re-emits to a request that parses back to the same identifier and stamp.
#![no_main]

use flowlab_wire::icmp::{self, Family, Message, Stamp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let inner = icmp::strip_ipv4_header(data).ok();
    for bytes in [Some(data), inner].into_iter().flatten() {
        for family in [Family::V4, Family::V6] {
            let Ok(message) = icmp::parse(family, bytes) else {
                continue;
            };
            if family == Family::V4 {
                assert_eq!(icmp::checksum(bytes), 0);
            }
            let (Message::EchoReply(echo) | Message::EchoRequest(echo)) = message else {
                continue;
            };
            let _ = icmp::pattern_intact(echo.data);
            let Ok(stamp) = Stamp::parse(echo.data) else {
                continue;
            };
            let mut out = Vec::new();
            icmp::emit_request(family, echo.ident, stamp, echo.data.len(), &mut out);
            let Ok(Message::EchoRequest(again)) = icmp::parse(family, &out) else {
                panic!("an emitted request does not parse back");
            };
            assert_eq!((again.ident, Stamp::parse(again.data)), (echo.ident, Ok(stamp)));
            assert!(icmp::pattern_intact(again.data));
        }
    }
});
