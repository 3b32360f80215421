//! Arbitrary bytes through the cell parsers: views, header parsing, HEC checks and
//! re-emission must never panic, and what parses must re-emit to the same bytes.
#![no_main]

use flowlab_atm::{Cell, CellRepr, HeaderFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [HeaderFormat::Uni, HeaderFormat::Nni] {
        if let Ok(cell) = Cell::new_checked(data) {
            let _ = (
                cell.vci(),
                cell.vpi(format),
                cell.payload_type(),
                cell.clp(),
                cell.check_hec(),
            );
            let _ = cell.payload().len();
        }
        if let Ok(repr) = CellRepr::parse_bytes(data, format) {
            let bytes = repr.to_bytes().expect("a parsed cell re-emits");
            assert_eq!(&bytes[..], &data[..53]);
        }
    }
});
