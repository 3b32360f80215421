//! What the simulator's integration tests share.

use flowlab_sim::{load, run, RunReport};

/// The first (only) run of a scenario's text.
pub fn one_run(text: &str) -> RunReport {
    let s = load(text).unwrap_or_else(|e| panic!("{e}"));
    run(&s, None).runs.remove(0)
}
