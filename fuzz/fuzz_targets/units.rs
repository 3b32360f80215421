//! Command-line unit parsers: must never panic on any string.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = flowlab_units::parse_rate(&s);
    let _ = flowlab_units::parse_bytes(&s);
    let _ = flowlab_units::parse_duration(&s);
    let _ = flowlab_units::parse_count(&s);
    if let Ok(cpus) = flowlab_units::parse_cpu_list(&s) {
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
    }
});
