//! `flowlab test --multicast GROUP[:PORT] --agents A,B,C`: one UDP flow to a group, each
//! agent joined to it as a receiver, and each receiver's loss and delay side by side.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;

use flowlab_control::client::{run_multicast, MulticastOptions};
use flowlab_control::{TestOptions, TestRun};
use flowlab_spec::{MulticastGroup, TestSpec};
use flowlab_units::{format_duration_ns, format_rate};

use crate::test::usage_error;

/// iperf2's port, so `iperf -s -u -B GROUP` hears flowlab's sender as typed.
pub const DEFAULT_PORT: u16 = 5001;

/// A multicast test as the flags give it.
#[derive(Debug, Clone)]
pub struct MulticastRequest {
    /// The test's options as for any test, with the group (`GROUP`, `GROUP:PORT`,
    /// `[GROUP6]:PORT`) as the target and the flow (UDP, one way) it gets as the spec.
    pub test: TestOptions,
    pub agents: Vec<String>,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
}

impl MulticastRequest {
    pub fn new(test: TestOptions, agents: &[String], ttl: u8) -> MulticastRequest {
        MulticastRequest {
            test,
            agents: agents.to_vec(),
            ttl,
        }
    }
}

/// `GROUP`, `GROUP:PORT` or `[GROUP6]:PORT` (port 5001 when none) as a group and port.
pub fn parse_group(text: &str) -> Result<(IpAddr, u16), String> {
    let bad =
        || format!("invalid multicast group '{text}': expected GROUP, GROUP:PORT or [GROUP6]:PORT");
    let (group, port) = match text.parse::<SocketAddr>() {
        Ok(at) => (at.ip(), at.port()),
        Err(_) => (text.parse::<IpAddr>().map_err(|_| bad())?, DEFAULT_PORT),
    };
    match group.is_multicast() {
        true => Ok((group, port)),
        false => Err(format!(
            "invalid multicast group '{text}': {group} is not a multicast address (224.0.0.0/4, ff00::/8)"
        )),
    }
}

/// The request's test: its flow with the group set, validated (a usage error if refused).
pub fn spec_of(request: &MulticastRequest) -> anyhow::Result<TestSpec> {
    let (group, port) = parse_group(&request.test.target).map_err(usage_error)?;
    let spec = TestSpec {
        multicast: Some(MulticastGroup {
            group,
            port,
            hops: request.ttl,
            session: rand::random(),
        }),
        ..request.test.spec.clone()
    };
    spec.validate()
        .map_err(|e| usage_error(format!("invalid test: {e}")))?;
    if request.agents.is_empty() {
        return Err(usage_error(
            "a multicast test needs receivers: --agents A,B,C",
        ));
    }
    Ok(spec)
}

/// Runs the request: one result per receiving agent.
pub fn run(request: &MulticastRequest) -> anyhow::Result<Vec<TestRun>> {
    let options = MulticastOptions {
        agents: request.agents.clone(),
        spec: spec_of(request)?,
        key: request.test.key.clone(),
        drain: request.test.drain,
        bind: request.test.bind,
    };
    flowlab_sys::signal::interrupt_flag();
    Ok(run_multicast(&options)?)
}

/// Runs the request, stores it in `db` (`None`: not at all) as one run with a point per
/// receiver, and prints its results: a JSON array of one document per receiver, or the
/// receivers side by side. Exit status 1 when any receiver's test failed or the store did.
pub fn run_and_print(
    request: &MulticastRequest,
    json: bool,
    db: Option<Option<&Path>>,
) -> anyhow::Result<ExitCode> {
    let runs = run(request)?;
    let stored = db.is_none_or(|db| store(db, request, &runs));
    let text = match json {
        true => {
            let documents: Vec<_> = runs.iter().map(|r| &r.result).collect();
            serde_json::to_string_pretty(&documents)? + "\n"
        }
        false => render(&runs),
    };
    std::io::stdout().write_all(text.as_bytes())?;
    let failed = runs.iter().any(|r| r.result.error.is_some());
    Ok(ExitCode::from(u8::from(failed || !stored)))
}

/// Stores the receivers' results as the points of one run; says where, or why not.
fn store(db: Option<&Path>, request: &MulticastRequest, runs: &[TestRun]) -> bool {
    let spec = runs.first().map(|r| &r.result.spec);
    let params = serde_json::json!({ "group": request.test.target, "spec": spec });
    let points: Vec<_> = runs
        .iter()
        .map(|r| (serde_json::json!({ "receiver": r.result.target }), 0, r))
        .collect();
    match crate::record::store_test_run(db, "multicast", &params, &points) {
        Ok(id) => {
            eprintln!("flowlab: stored as run {id} (flowlab show {id})");
            true
        }
        Err(e) => {
            eprintln!("flowlab: error: result not stored: {e:#}");
            false
        }
    }
}

/// The receivers side by side: what each got of what was sent, and its delay.
pub fn render(runs: &[TestRun]) -> String {
    let mut out = String::new();
    let Some(first) = runs.first() else {
        return out;
    };
    let s = &first.result.summary;
    let (group, hops) = first
        .result
        .spec
        .multicast
        .as_ref()
        .map_or((String::new(), 0), |m| {
            (SocketAddr::new(m.group, m.port).to_string(), m.hops)
        });
    let _ = writeln!(
        out,
        "Multicast to {group} (TTL {hops}): {} packets, {} sent at {}",
        s.packets_sent,
        flowlab_units::format_bytes(s.bytes_sent as f64),
        format_rate(s.sender_throughput_bps)
    );
    let _ = writeln!(
        out,
        "  {:<22} {:>9} {:>7} {:>8} {:>10} {:>10}",
        "receiver", "received", "lost", "loss", "delay p50", "delay max"
    );
    for run in runs {
        out.push_str(&receiver_line(run));
    }
    out.push_str("  delay: one-way, relative to each receiver's fastest packet (no clock sync)\n");
    out
}

fn receiver_line(run: &TestRun) -> String {
    let r = &run.result;
    let s = &r.summary;
    let delay = |pick: fn(&flowlab_stats::LatencySummary) -> f64| {
        s.relative_one_way_delay
            .as_ref()
            .map_or("-".to_string(), |d| format_duration_ns(pick(d)))
    };
    let mut line = format!(
        "  {:<22} {:>9} {:>7} {:>7.3}% {:>10} {:>10}\n",
        r.target,
        s.packets_received,
        s.packets_lost,
        s.loss_pct,
        delay(|d| d.p50_ns),
        delay(|d| d.max_ns),
    );
    if let Some(e) = &r.error {
        let _ = writeln!(line, "    error: {e}");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_as_people_type_them() {
        let v4: IpAddr = "239.1.2.3".parse().unwrap();
        assert_eq!(parse_group("239.1.2.3"), Ok((v4, DEFAULT_PORT)));
        assert_eq!(parse_group("239.1.2.3:6000"), Ok((v4, 6000)));
        let v6: IpAddr = "ff15::1".parse().unwrap();
        assert_eq!(parse_group("[ff15::1]:6000"), Ok((v6, 6000)));
        assert_eq!(parse_group("ff15::1"), Ok((v6, DEFAULT_PORT)));
        assert_eq!(
            parse_group("10.0.0.1"),
            Err("invalid multicast group '10.0.0.1': 10.0.0.1 is not a multicast address (224.0.0.0/4, ff00::/8)".into())
        );
        assert!(parse_group("239.1.2.3:x")
            .unwrap_err()
            .contains("expected GROUP"));
    }

    #[test]
    fn a_request_needs_receivers_and_a_valid_flow() {
        let test = TestOptions {
            target: "239.1.2.3:6000".into(),
            spec: TestSpec::new(flowlab_spec::Protocol::Udp, flowlab_spec::Direction::Oneway),
            key: None,
            drain: std::time::Duration::ZERO,
            interface: None,
            agent_interface: None,
            bind: None,
            cport: None,
        };
        let request = MulticastRequest::new(test, &["10.0.0.2".to_string()], 3);
        let spec = spec_of(&request).unwrap();
        let m = spec.multicast.unwrap();
        assert_eq!((m.port, m.hops), (6000, 3));
        let alone = MulticastRequest {
            agents: Vec::new(),
            ..request.clone()
        };
        let e = spec_of(&alone).unwrap_err();
        assert!(e.is::<crate::test::UsageError>());
        assert_eq!(
            e.to_string(),
            "a multicast test needs receivers: --agents A,B,C"
        );
    }
}
