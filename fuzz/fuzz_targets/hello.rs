//! Control-connection hello (the first 16 bytes a peer sends): never panics, and a parsed hello
//! re-emits to the same magic, version and flags.
#![no_main]

use flowlab_wire::Hello;
use libfuzzer_sys::fuzz_target;

const HELLO_LEN: usize = 16;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = data.first_chunk::<HELLO_LEN>() else {
        return;
    };
    let Ok(hello) = Hello::parse(bytes) else {
        return;
    };
    let _ = hello.check_version();
    let _ = hello.auth_required();
    let out = hello.emit();
    // Bytes 12..16 are reserved and not kept; the rest must survive a round trip.
    assert_eq!(&out[..12], &bytes[..12]);
    assert_eq!(Hello::parse(&out), Ok(hello));
});
