//! Arbitrary bytes cut into 53-byte cells and pushed into AAL5 reassemblers: every frame is
//! delivered or counted as an error, never a panic, and memory stays bounded.
#![no_main]

use flowlab_atm::aal5::VcReassemblers;
use flowlab_atm::{CellRepr, HeaderFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rx = VcReassemblers::new(8, 65_535);
    for chunk in data.chunks(53) {
        if let Ok(cell) = CellRepr::parse_bytes(chunk, HeaderFormat::Uni) {
            if let Some((_, Ok(pdu))) = rx.push(&cell) {
                assert!(pdu.payload.len() <= 65_535);
            }
        }
    }
    let _ = rx.total_counters();
});
