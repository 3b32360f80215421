//! One test against an agent, its live reports passed to the observer, and its result and
//! packet log written where asked.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use flowlab_control::{ClientError, TestOptions, TestRun};
use flowlab_spec::{EgressPath, TestSpec};
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

/// A rate refused as far beyond the path: a usage error (exit status 2).
#[derive(Debug)]
pub struct RateRefused(String);

impl std::fmt::Display for RateRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RateRefused {}

/// Refuses a rate far beyond the path to the agent at `target` (`TestSpec::check_rate_on`),
/// for each of `specs` (a test, or a sweep's points): the interface the kernel routes the
/// agent's address through, and its link speed. `force` (`--force-rate`) skips the check.
pub fn check_path_rate<'a>(
    target: &str,
    specs: impl IntoIterator<Item = &'a TestSpec>,
    force: bool,
) -> anyhow::Result<()> {
    if force {
        return Ok(());
    }
    let addr = flowlab_control::client::resolve(target)?;
    let path = egress_path(addr.ip());
    specs.into_iter().try_for_each(|spec| {
        spec.check_rate_on(&path)
            .map_err(|e| RateRefused(e.0).into())
    })
}

/// The exit status of a command that failed with `e`: 0 for a closed pipe (`flowlab test ...
/// | head` is no error), 2 for a usage error, 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let closed_pipe = e
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe);
    match (closed_pipe, e.is::<RateRefused>()) {
        (true, _) => 0,
        (false, true) => 2,
        (false, false) => 1,
    }
}

/// The egress interface towards `peer` and its link speed; an unreadable route is a path
/// without a known speed (held to the per-flow ceiling).
fn egress_path(peer: std::net::IpAddr) -> EgressPath {
    match flowlab_sys::netlink::egress(peer) {
        Ok(e) => EgressPath {
            link_speed_bps: flowlab_sys::host::link_speed_bps(&e.interface),
            interface: e.interface,
        },
        Err(_) => EgressPath {
            interface: "the path (route unreadable)".into(),
            link_speed_bps: None,
        },
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rate_bps: u64) -> TestSpec {
        TestSpec {
            rate_bps: Some(rate_bps),
            ..TestSpec::new(flowlab_spec::Protocol::Udp, flowlab_spec::Direction::Oneway)
        }
    }

    #[test]
    fn loopback_takes_the_per_flow_ceiling() {
        let lo = "127.0.0.1:9";
        check_path_rate(lo, [&spec(10_000_000_000)], false).unwrap();
        // A sweep is refused for its one absurd point.
        let points = [spec(1_000_000), spec(5_000_000_000_000)];
        let e = check_path_rate(lo, &points, false).unwrap_err();
        assert!(e.to_string().contains("--force-rate"), "{e}");
        assert!(e.to_string().contains("no link speed"), "{e}");
        assert_eq!(exit_code(&e), 2);
        check_path_rate(lo, &points, true).unwrap();
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert_eq!(exit_code(&pipe.into()), 0);
        assert_eq!(exit_code(&anyhow::anyhow!("no agent")), 1);
    }
}
