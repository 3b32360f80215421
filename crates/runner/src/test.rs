//! One test against an agent, its live reports passed to the observer, and its result and
//! packet log written where asked.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use flowlab_control::{ClientError, TestOptions, TestRun};
use flowlab_traffic::TrafficSpec;

use crate::observer::{Event, Observer};

/// Runs the test `options` describe.
pub fn run_test(
    options: &TestOptions,
    observer: &mut dyn Observer,
) -> Result<TestRun, ClientError> {
    observer.on(Event::TestStarted(options));
    let transactions = options
        .spec
        .traffic
        .as_ref()
        .is_some_and(|t| t.transactions().is_some());
    flowlab_control::run_test(options, &mut |report| {
        observer.on(Event::Interval {
            report,
            transactions,
        })
    })
}

/// Writes the result JSON to `output` and the packet log (CSV) to `packet_log`, where given.
pub fn save(run: &TestRun, output: Option<&Path>, packet_log: Option<&Path>) -> anyhow::Result<()> {
    if let Some(path) = output {
        let json = serde_json::to_string_pretty(&run.result)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = packet_log {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut w = std::io::BufWriter::new(file);
        flowlab_results::packet_log::write_csv(&run.packets, &mut w)
            .and_then(|_| w.flush())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// A traffic model with the files it names read and embedded, so the agent needs none;
/// checked.
pub fn embed_files(traffic: &TrafficSpec) -> anyhow::Result<TrafficSpec> {
    let read = |path: &str| std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"));
    let t = traffic.resolve_files(&read)?;
    t.validate()?;
    Ok(t)
}
