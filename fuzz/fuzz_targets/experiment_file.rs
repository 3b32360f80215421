//! Experiment files (`flowlab run FILE`): parsing and validating any text never panics, an
//! error is one line, and loading is quick (every count that multiplies work is capped before
//! anything is expanded); a file that loads also plans without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match flowlab_experiment::load(&text) {
        Ok(e) => {
            let steps = flowlab_experiment::plan(&e);
            assert!(steps.len() as u64 <= flowlab_experiment::limits::MAX_STEPS);
        }
        Err(err) => assert!(!err.to_string().contains('\n'), "{err}"),
    }
});
