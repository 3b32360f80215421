//! STAMP packets (RFC 8762) on untrusted datagrams, as a reflector and a session-sender read
//! them, in both modes: never a panic; whatever parses re-emits to a packet that parses back
//! to the same value; timestamps and error estimates convert without overflow.
#![no_main]

use flowlab_wire::stamp::{Mode, ReflectorRepr, SenderRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for mode in [Mode::Unauthenticated, Mode::Authenticated] {
        if let Ok(sender) = SenderRepr::parse(data, mode) {
            let mut out = vec![0u8; mode.packet_len()];
            assert!(sender.emit(&mut out, mode));
            assert_eq!(SenderRepr::parse(&out, mode), Ok(sender));
            let _ = sender.timestamp.to_unix_ns(sender.error_estimate.ptp());
        }
        if let Ok(reflector) = ReflectorRepr::parse(data, mode) {
            let mut out = vec![0u8; data.len().min(mode.packet_len())];
            assert!(reflector.emit(&mut out, mode));
            assert_eq!(ReflectorRepr::parse(&out, mode), Ok(reflector));
            let _ = reflector
                .receive_timestamp
                .to_unix_ns(reflector.error_estimate.ptp());
            let _ = reflector.error_estimate.error_ns();
            let _ = reflector.sender_error_estimate.error_ns();
        }
    }
});
