//! Simulated networks (`flowlab run FILE --sim NETWORK.toml`): parsing and validating any
//! text never panics, and an error is one line. Loading only, as for scenarios.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Err(err) = flowlab_sim::SimNetwork::load(&text) {
        assert!(!err.to_string().contains('\n'), "{err}");
    }
});
