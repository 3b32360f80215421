//! Simulator scenarios (`flowlab sim FILE`): parsing and validating any text never panics,
//! and an error is one line. Loading only: a loaded scenario is not run (its packet budget
//! allows minutes of simulating, too slow for a fuzzer).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(err) = flowlab_sim::load(&text) {
        assert!(!err.to_string().contains('\n'), "{err}");
    }
});
