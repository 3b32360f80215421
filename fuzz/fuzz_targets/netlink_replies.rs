//! rtnetlink reply parser (the egress qdisc lookup of --kernel-pacing): never panics, and
//! every message it returns lies inside the input.
#![no_main]

use flowlab_sys::netlink::{parse_replies, Reply};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(replies) = parse_replies(data) else {
        return;
    };
    // Each message takes at least a 16-byte header.
    assert!(replies.len() * 16 <= data.len());
    for reply in replies {
        if let Reply::Qdisc {
            kind: Some(kind), ..
        } = reply
        {
            // Each char comes from at least one input byte (an invalid byte becomes the
            // 3-byte U+FFFD, so the string's bytes may outnumber the input's).
            assert!(kind.chars().count() <= data.len());
        }
    }
});
