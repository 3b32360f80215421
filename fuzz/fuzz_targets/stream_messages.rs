//! Message heads and the TCP stream splitter on untrusted bytes: never panic, a parsed head
//! re-emits to the same header bytes, and splitting does not depend on how reads cut the stream.
#![no_main]

use flowlab_wire::{MessageHead, StreamSplitter};
use libfuzzer_sys::fuzz_target;

/// Messages (seq, length) the splitter finds when the stream arrives in `chunk`-byte reads.
fn split(stream: &[u8], chunk: usize) -> (Vec<(u64, Option<u32>)>, bool) {
    let mut splitter = StreamSplitter::new(64, 1 << 16);
    let mut heads = Vec::new();
    let mut failed = false;
    for piece in stream.chunks(chunk) {
        if splitter
            .push(piece, |h| heads.push((h.probe.seq, h.length)))
            .is_err()
        {
            failed = true;
            break;
        }
    }
    (heads, failed)
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, stream)) = data.split_first() else {
        return;
    };
    if let Ok(head) = MessageHead::parse(stream) {
        let mut out = vec![0u8; head.len()];
        assert!(head.emit(&mut out));
        assert_eq!(&out[..], &stream[..head.len()]);
        assert_eq!(MessageHead::parse(&out), Ok(head));
    }
    let whole = split(stream, stream.len().max(1));
    assert_eq!(split(stream, usize::from(cut).max(1)), whole);
});
