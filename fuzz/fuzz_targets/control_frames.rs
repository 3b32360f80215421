//! Control-frame decoder on an untrusted TCP stream.
//!
//! Input layout: the first byte picks how the rest is cut into `push` calls (as if bytes
//! arrived in TCP segments of varying sizes) and, with its lowest bit, whether frames are
//! capped at the agent's small-frame limit; the remaining bytes are the stream. Each frame is
//! decoded as a plain frame and as a tagged one (content before a 32-byte tag); every decoded
//! plain message must encode and decode back to itself through a fresh decoder, and an agent's
//! host facts go through the client's check.
#![no_main]

use flowlab_control::protocol::{Message, ReadMessage};
use flowlab_wire::control::{split_tag, MAX_SMALL_FRAME_LEN};
use flowlab_wire::FrameDecoder;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&split, stream)) = data.split_first() else {
        return;
    };
    // Chunk lengths cycle through 1..=16 starting from a point and step chosen by the first
    // byte: 0x00 feeds one byte at a time, other values mix small and larger pieces.
    let start = usize::from(split & 0x0f);
    let step = usize::from(split >> 4);
    let mut decoder = FrameDecoder::new();
    if split & 1 == 1 {
        decoder.set_max_len(MAX_SMALL_FRAME_LEN);
    }
    let mut rest = stream;
    let mut i = 0usize;
    while !rest.is_empty() {
        let len = ((start + i * step) % 16 + 1).min(rest.len());
        let (chunk, tail) = rest.split_at(len);
        rest = tail;
        i += 1;
        decoder.push(chunk);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => check(&frame),
                Ok(None) => break,
                // The stream is out of step after an error; a real peer drops the connection.
                Err(_) => return,
            }
        }
    }
});

fn check(frame: &[u8]) {
    if let Some((content, _tag)) = split_tag(frame) {
        let _ = Message::decode(content);
    }
    if let Ok(message) = Message::decode(frame) {
        if let Message::HostFacts { facts } = &message {
            let _ = facts.check();
        }
        let encoded = message.encode();
        let mut fresh = FrameDecoder::new();
        fresh.push(&encoded);
        assert_eq!(fresh.next_message(), Ok(Some(message)));
        assert_eq!(fresh.next_message(), Ok(None));
    }
}
