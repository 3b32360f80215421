//! Probe header parser on untrusted datagrams: never panics, and whatever parses re-emits to
//! the same 32 bytes and parses back to the same value.
#![no_main]

use flowlab_wire::{ProbeRepr, PROBE_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(repr) = ProbeRepr::parse(data) else {
        return;
    };
    let mut out = [0u8; PROBE_HEADER_LEN];
    assert!(repr.emit(&mut out));
    // Every byte of the header is either checked (magic, version) or a field, so emitting
    // reproduces the input's header exactly.
    assert_eq!(&out[..], &data[..PROBE_HEADER_LEN]);
    assert_eq!(ProbeRepr::parse(&out), Ok(repr));
});
