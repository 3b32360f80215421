//! `flowlab test --multicast GROUP[:PORT] --agents A,B,C`: one UDP flow to a group, each
//! agent joined to it as a receiver, and each receiver's loss and delay side by side.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::process::ExitCode;

use flowlab_control::client::{run_multicast, MulticastOptions, MulticastOutcome};
use flowlab_control::{TestOptions, TestRun};
use flowlab_results::SideReport;
use flowlab_spec::{DatagramHeader, MulticastGroup, TestSpec};
use flowlab_units::{format_duration_ns, format_rate};

use crate::test::usage_error;

mod iperf2;

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
    /// `--iperf2`: which end is iperf2's; the datagrams then carry its header.
    pub iperf2: Option<Iperf2Peer>,
}

/// The end of a multicast test that iperf2 (Debian's `iperf`) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Iperf2Peer {
    /// `iperf -c GROUP -u -T 1` sends: flowlab's agents receive for the test's duration.
    Sender,
    /// `iperf -s -u -B GROUP` receives (and any agents given): flowlab sends.
    Receivers,
}

impl MulticastRequest {
    pub fn new(
        test: TestOptions,
        agents: &[String],
        ttl: u8,
        iperf2: Option<Iperf2Peer>,
    ) -> MulticastRequest {
        MulticastRequest {
            test,
            agents: agents.to_vec(),
            ttl,
            iperf2,
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
            header: match request.iperf2 {
                Some(_) => DatagramHeader::Iperf2,
                None => DatagramHeader::Flowlab,
            },
        }),
        ..request.test.spec.clone()
    };
    spec.validate()
        .map_err(|e| usage_error(format!("invalid test: {e}")))?;
    match request.iperf2 {
        // iperf2's receivers may be the only ones.
        Some(Iperf2Peer::Receivers) => {}
        _ if request.agents.is_empty() => {
            return Err(usage_error(
                "a multicast test needs receivers: --agents A,B,C",
            ))
        }
        Some(Iperf2Peer::Sender) if spec.duration_ns.is_none() => {
            return Err(usage_error(
                "--iperf2 sender: the agents listen for a --duration, not a --count",
            ))
        }
        _ => {}
    }
    Ok(spec)
}

/// Runs the request: the sender's side and one result per receiving agent.
pub fn run(request: &MulticastRequest) -> anyhow::Result<MulticastOutcome> {
    let spec = spec_of(request)?;
    let options = MulticastOptions {
        agents: request.agents.clone(),
        spec: spec.clone(),
        key: request.test.key.clone(),
        drain: request.test.drain,
        bind: request.test.bind,
    };
    flowlab_sys::signal::interrupt_flag();
    let outcome = match request.iperf2 {
        None => run_multicast(&options, None),
        Some(Iperf2Peer::Receivers) => run_multicast(
            &options,
            Some(&|socket, stop| iperf2::send(socket, &spec, stop)),
        ),
        Some(Iperf2Peer::Sender) => {
            run_multicast(&options, Some(&|_, stop| iperf2::await_sender(&spec, stop)))
        }
    };
    Ok(outcome?)
}

/// Runs the request, stores it in `db` (`None`: not at all) as one run with a point per
/// receiving agent (none: not stored), and prints its results: a JSON array of one document per receiver, or the
/// receivers side by side. Exit status 1 when any receiver's test failed or the store did.
pub fn run_and_print(
    request: &MulticastRequest,
    json: bool,
    db: Option<Option<&Path>>,
) -> anyhow::Result<ExitCode> {
    let outcome = run(request)?;
    let runs = &outcome.receivers;
    // No flowlab receiver (iperf2's alone), no result to keep: its report is iperf's.
    let stored = runs.is_empty() || db.is_none_or(|db| store(db, request, runs));
    let text = match json {
        true => {
            let documents: Vec<_> = runs.iter().map(|r| &r.result).collect();
            serde_json::to_string_pretty(&documents)? + "\n"
        }
        false => render(request, &outcome),
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
pub fn render(request: &MulticastRequest, outcome: &MulticastOutcome) -> String {
    let mut out = String::new();
    let group = parse_group(&request.test.target)
        .map_or(request.test.target.clone(), |(ip, port)| {
            SocketAddr::new(ip, port).to_string()
        });
    let _ = writeln!(out, "{}", sender_line(request, &group, &outcome.sender));
    if outcome.receivers.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "  {:<22} {:>9} {:>7} {:>8} {:>10} {:>10}",
        "receiver", "received", "lost", "loss", "delay p50", "delay max"
    );
    for run in &outcome.receivers {
        out.push_str(&receiver_line(run));
    }
    out.push_str(match request.iperf2 {
        Some(Iperf2Peer::Sender) => "  delay: one-way, from iperf's send stamps to each receiver's clock, relative to its fastest packet\n",
        _ => "  delay: one-way, relative to each receiver's fastest packet (no clock sync)\n",
    });
    out
}

/// Who sent what to the group.
fn sender_line(request: &MulticastRequest, group: &str, sender: &SideReport) -> String {
    let ttl = request.ttl;
    let mut line = match (request.iperf2, sender.sender.as_ref()) {
        (Some(Iperf2Peer::Sender), _) => format!("Multicast from iperf2 (iperf -c) to {group}"),
        (_, None) => format!("Multicast to {group} (TTL {ttl})"),
        (peer, Some(sent)) => {
            let seconds = sent.duration_ns as f64 / 1e9;
            let rate = match seconds > 0.0 {
                true => sent.bytes_sent as f64 * 8.0 / seconds,
                false => 0.0,
            };
            let bytes = flowlab_units::format_bytes(sent.bytes_sent as f64);
            let (what, after) = match peer {
                Some(_) => ("iperf2 datagrams", ", then its final datagram"),
                None => ("packets", ""),
            };
            format!(
                "Multicast to {group} (TTL {ttl}): {} {what}, {bytes} sent at {}{after}",
                sent.packets_sent,
                format_rate(rate)
            )
        }
    };
    if let Some(e) = &sender.error {
        let _ = write!(line, "\n  sender error: {e}");
    }
    line
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

    /// One-way UDP options to `target`, nothing else set.
    fn udp_to(target: &str) -> TestOptions {
        TestOptions {
            target: target.into(),
            spec: TestSpec::new(flowlab_spec::Protocol::Udp, flowlab_spec::Direction::Oneway),
            key: None,
            drain: std::time::Duration::ZERO,
            interface: None,
            agent_interface: None,
            bind: None,
            cport: None,
        }
    }

    #[test]
    fn a_request_needs_receivers_and_a_valid_flow() {
        let test = udp_to("239.1.2.3:6000");
        let request = MulticastRequest::new(test, &["10.0.0.2".to_string()], 3, None);
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

    #[test]
    fn iperf2_at_either_end_sets_the_header_and_who_must_be_there() {
        let test = udp_to("239.1.2.3");
        let header = |r: &MulticastRequest| spec_of(r).map(|s| s.multicast.unwrap().header);
        let receivers = MulticastRequest::new(test.clone(), &[], 1, Some(Iperf2Peer::Receivers));
        assert_eq!(header(&receivers).unwrap(), DatagramHeader::Iperf2);
        let agents = ["10.0.0.2".to_string()];
        let sender = MulticastRequest::new(test.clone(), &agents, 1, Some(Iperf2Peer::Sender));
        assert_eq!(header(&sender).unwrap(), DatagramHeader::Iperf2);
        let plain = MulticastRequest::new(test.clone(), &agents, 1, None);
        assert_eq!(header(&plain).unwrap(), DatagramHeader::Flowlab);
        let alone = MulticastRequest::new(test.clone(), &[], 1, Some(Iperf2Peer::Sender));
        assert!(header(&alone).unwrap_err().to_string().contains("--agents"));
        let mut counted = sender.clone();
        counted.test.spec.duration_ns = None;
        counted.test.spec.count = Some(100);
        assert_eq!(
            header(&counted).unwrap_err().to_string(),
            "--iperf2 sender: the agents listen for a --duration, not a --count"
        );
    }
}
