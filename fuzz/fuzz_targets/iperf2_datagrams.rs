//! iperf2's UDP header on untrusted datagrams, as a multicast agent with `--iperf2 sender`
//! reads whatever reaches the group: never a panic; whatever parses re-emits into a datagram
//! of the same length that parses back to the same header, its first 12 bytes unchanged.
#![no_main]

use flowlab_wire::iperf2::Iperf2Header;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(header) = Iperf2Header::parse(data) else {
        return;
    };
    let mut out = vec![0u8; data.len()];
    header.emit(&mut out);
    assert_eq!(out[..12], data[..12]);
    assert_eq!(Iperf2Header::parse(&out), Some(header));
    assert_eq!(header.is_fin(), header.id < 0);
    let _ = header.sent_ns();
});
