//! The agent's request validator: any request body an attacker can send either fails to
//! parse or is judged by `TestSpec::validate`, which never panics, and what it accepts is
//! within the protocol's bounds.
#![no_main]

use flowlab_control::protocol::Message;
use flowlab_spec::TestSpec;
use flowlab_spec::{MAX_ECHO_EVERY, MAX_FLOWS, MAX_RATE_BPS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let spec: TestSpec = match serde_json::from_slice(data) {
        Ok(spec) => spec,
        // The same bytes as a whole control frame body, as the agent reads them.
        Err(_) => match Message::decode(&[&[1u8][..], data].concat()) {
            Ok(Message::Request { spec }) => spec,
            _ => return,
        },
    };
    if spec.validate().is_ok() {
        assert!(spec.flows >= 1 && spec.flows <= MAX_FLOWS);
        assert!(spec.rate_bps.is_none_or(|r| r >= 1 && r <= MAX_RATE_BPS));
        assert!(spec.duration_ns.is_some() || spec.count.is_some());
        assert!(spec.interval_ns.is_none_or(|i| i >= 10_000_000));
        assert!(spec
            .echo_every
            .is_none_or(|n| (1..=MAX_ECHO_EVERY).contains(&n)));
        // A warm-up leaves part of the test to measure.
        assert!(spec
            .omit_ns
            .is_none_or(|o| o >= 1 && spec.duration_ns.is_none_or(|d| o < d)));
    }
});
