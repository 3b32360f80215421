//! Lab files (`flowlab lab up FILE`): parsing and validating any text never panics, and an
//! error is one line. Parsing only: nothing here creates a namespace.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(err) = flowlab_netns::lab::LabSpec::parse(&text) {
        assert!(!err.to_string().contains('\n'), "{err}");
    }
});
