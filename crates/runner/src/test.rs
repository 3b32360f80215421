//! One test against an agent, its live reports passed to the observer, and its result and
//! packet log written where asked.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use flowlab_control::client::Family;
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

/// A usage error (exit status 2): a flag's value refused, such as `--size 0`, a malformed
/// `--traffic`, or a rate far beyond the path.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Marks an error as a usage error, keeping its message (with its causes).
pub fn usage_error(e: impl std::fmt::Display) -> anyhow::Error {
    UsageError(format!("{e:#}")).into()
}

/// A library's one-line error: a usage error when it says the test is invalid (as
/// `flowlab_stamp`'s "invalid test: ..."), any other error else.
pub fn usage_error_if_invalid(e: String) -> anyhow::Error {
    match e.starts_with("invalid test") {
        true => usage_error(e),
        false => anyhow::anyhow!(e),
    }
}

/// The target as typed, or the address `-p` and `-4`/`-6` pin it to (see [`resolve_agent`]).
pub fn pinned_target(target: &str, port: Option<u16>, family: Family) -> anyhow::Result<String> {
    if port.is_none() && family == Family::Any {
        return Ok(target.to_string());
    }
    let addr = resolve_agent(target, port, family, flowlab_control::DEFAULT_PORT)?;
    Ok(addr.to_string())
}

/// The agent's address for a target as typed, with iperf3's `-p` (`port`, for a target that
/// names none; a different one named twice is a usage error) and `-4`/`-6` (`family`).
pub fn resolve_agent(
    target: &str,
    port: Option<u16>,
    family: Family,
    default_port: u16,
) -> anyhow::Result<SocketAddr> {
    let (host, named) = flowlab_control::client::split_target(target)?;
    let port = match (named, port) {
        (Some(a), Some(b)) if a != b => {
            return Err(usage_error(format!(
                "the port is given twice: {a} in '{target}' and {b} by --port"
            )))
        }
        (named, port) => named.or(port).unwrap_or(default_port),
    };
    Ok(flowlab_control::client::resolve_host(&host, port, family)?)
}

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
            .map_err(|e| UsageError(e.0).into())
    })
}

/// The exit status of a command that failed with `e`: 0 for a closed pipe (`flowlab test ...
/// | head` is no error), 2 for a usage error, 1 otherwise.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let closed_pipe = e
        .downcast_ref::<std::io::Error>()
        .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe);
    match (closed_pipe, e.is::<UsageError>()) {
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

    #[test]
    fn a_port_and_family_pin_the_agents_address() {
        let at = |t, p| resolve_agent(t, p, Family::Any, 9470).map(|a| a.to_string());
        assert_eq!(at("127.0.0.1", None).unwrap(), "127.0.0.1:9470");
        assert_eq!(at("127.0.0.1", Some(5201)).unwrap(), "127.0.0.1:5201");
        assert_eq!(at("[::1]:5201", Some(5201)).unwrap(), "[::1]:5201");
        let twice = at("127.0.0.1:9470", Some(5201)).unwrap_err();
        assert_eq!(exit_code(&twice), 2);
        assert_eq!(
            twice.to_string(),
            "the port is given twice: 9470 in '127.0.0.1:9470' and 5201 by --port"
        );
        assert_eq!(pinned_target("host", None, Family::Any).unwrap(), "host");
        let v4 = pinned_target("localhost", Some(5201), Family::V4).unwrap();
        assert_eq!(v4, "127.0.0.1:5201");
        let invalid = usage_error_if_invalid("invalid test: 43 B".into());
        assert_eq!(
            (exit_code(&invalid), invalid.to_string()),
            (2, "invalid test: 43 B".into())
        );
        assert_eq!(exit_code(&usage_error_if_invalid("no route".into())), 1);
        let v6 = resolve_agent("127.0.0.1", None, Family::V6, 1).unwrap_err();
        assert_eq!(exit_code(&v6), 1, "an address missing is no usage error");
    }

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
