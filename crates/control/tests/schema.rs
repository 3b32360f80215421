//! The result document against its published schema, docs/results.schema.json.
//!
//! Builds TestResult values directly (every direction, with and without the agent's report,
//! with an error, interrupted), runs real short tests against an agent in this process on
//! 127.0.0.1, and validates the JSON of each against the schema with the `jsonschema` crate
//! (`json_schema`), under the draft the schema declares.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use flowlab_control::{run_test, Summary2, TestOptions, TestResult, SCHEMA_VERSION};
use flowlab_results::{
    Batching, CpuLoad, EchoReport, FlowReceiverSummary, FlowSenderSummary, IntervalReport,
    LostBySender, PacingReport, ReceiverReport, Role, SenderReport, SideReport, TcpInfoReport,
};
use flowlab_spec::{Direction, Protocol, SocketOptions, TestSpec};
use flowlab_stats::{LatencySummary, LossPeriods, SeqCounts, Summary};
use flowlab_traffic::PacingMode;
use serde_json::{json, Value};

mod json_schema;

use json_schema::{schema, Validator};

// ---------------------------------------------------------------------------------------------
// Checks shared by every document.

/// Serialises `result` and checks it against the schema and the format's guarantees.
fn check_document(validator: &mut Validator, result: &TestResult) -> Value {
    let text = serde_json::to_string(result).expect("a result document always serialises");
    for bad in ["NaN", "Infinity"] {
        assert!(!text.contains(bad), "{bad} in {text}");
    }
    let value: Value = serde_json::from_str(&text).expect("the document is valid JSON");
    serde_json::from_str::<NoDuplicateKeys>(&text).expect("no object repeats a key");
    assert_eq!(value["schema_version"], json!(SCHEMA_VERSION));
    let errors = validator.check(None, &value);
    assert!(errors.is_empty(), "schema errors: {errors:#?}\nin {text}");
    // The document reads back; floats may differ in the last bit (serde_json parses them
    // without the float_roundtrip feature), so compare what is exact.
    let back: TestResult = serde_json::from_value(value.clone()).expect("reads back");
    assert_eq!(back.spec, result.spec);
    assert_eq!(back.intervals.len(), result.intervals.len());
    assert_eq!(back.summary.packets_lost, result.summary.packets_lost);
    value
}

/// Deserialises any JSON and fails on an object that repeats a key (which `Value` would hide).
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicateKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeys {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(self)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(serde::de::Error::custom(format!("duplicate key '{key}'")));
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(self)
    }
}

// ---------------------------------------------------------------------------------------------
// Realistic values built by hand, no network.

fn latency(count: u64, min: f64, max: f64) -> LatencySummary {
    LatencySummary {
        count,
        min_ns: min,
        mean_ns: (min + max) / 2.0,
        max_ns: max,
        variance_ns2: 2.5e7,
        stddev_ns: 5e3,
        p50_ns: (min + max) / 2.0,
        p90_ns: min + 0.9 * (max - min),
        p99_ns: min + 0.99 * (max - min),
        p999_ns: max,
        peak_to_peak_ns: max - min,
    }
}

fn cpu(user: f64) -> CpuLoad {
    CpuLoad {
        process_user_pct: user,
        process_system_pct: 3.5,
        host_pct: 21.0,
        host_softirq_pct: 1.25,
        host_softirq_per_cpu_pct: vec![2.5, 0.0],
        cores: 2,
        process_max_rss_bytes: 15 << 20,
    }
}

fn spec(protocol: Protocol, direction: Direction) -> TestSpec {
    TestSpec {
        protocol,
        direction,
        rate_bps: Some(1_000_000),
        size: 1200,
        duration_ns: Some(1_000_000_000),
        count: None,
        interval_ns: Some(500_000_000),
        flows: 1,
        client_udp_ports: if protocol == Protocol::Udp {
            vec![40_000]
        } else {
            Vec::new()
        },
        raw: None,
        busy_poll: false,
        packet_log: false,
        socket: Default::default(),
        traffic: None,
        seed: 1,
        authenticated_packets: false,
        echo_every: None,
        omit_ns: None,
        pacing: Default::default(),
        multicast: None,
    }
}

fn tcp_info() -> TcpInfoReport {
    TcpInfoReport {
        rtt_us: 241,
        rttvar_us: 151,
        snd_cwnd: 14,
        total_retrans: 2,
        pacing_rate_bps: 22_614_450_048,
        delivery_rate_bps: 10_026_105_256,
        snd_mss: 1448,
    }
}

fn sender(sent: u64, paced: bool) -> SenderReport {
    SenderReport {
        packets_sent: sent,
        bytes_sent: sent * 1200,
        lost_by_sender: LostBySender {
            send_buffer_full: 1,
            missed_slots: 2,
            send_errors: 0,
        },
        duration_ns: 998_440_067,
        schedule_error: paced.then(|| latency(sent, 3_186.0, 1_698_235.0)),
        departure_error: paced.then(|| latency(sent, 9_000.0, 1_700_000.0)),
        hardware_departures: 0,
        batching: Batching {
            syscalls: sent,
            mean_batch: 1.0,
            max_batch: 1,
            gso: false,
            packet_socket: false,
        },
        pacing_spin_ns: 61_000_000,
        pacing: paced.then(|| PacingReport {
            mode: PacingMode::Auto,
            strategy: "sleep_spin".into(),
            margin_ns: 45_000,
            waits: sent,
            sleeps: sent - 1,
            wake_latency_p50_ns: Some(12_000),
            wake_latency_p99_ns: Some(40_000),
            cpu_ns: 30_000_000,
            cpu_pct: 3.0,
        }),
        flows: Vec::new(),
        contract: None,
    }
}

fn receiver(unique: u64, sent: u64, round_trip: bool, protocol: Protocol) -> ReceiverReport {
    ReceiverReport {
        packets: SeqCounts {
            received: unique + 1,
            unique,
            lost: sent - unique,
            reordered: 3,
            duplicates: 1,
        },
        bytes_received: unique * 1200,
        malformed: 0,
        socket_buffer_drops: (protocol == Protocol::Udp).then_some(sent - unique),
        duration_ns: 998_449_271,
        relative_delay: Some(latency(unique, 0.0, 71_327.0)),
        transit_min_ns: Some(-1_234_567),
        round_trip: round_trip.then(|| latency(unique, 83_214.0, 3_534_031.0)),
        round_trip_from_schedule: round_trip.then(|| latency(unique, 83_950.0, 3_541_272.0)),
        jitter_ns: 4_099.18,
        inter_arrival: Some(Summary {
            count: unique - 1,
            mean: 9_600_473.76,
            variance: 6.03e10,
            stddev: 245_582.78,
            min: 7_876_869.0,
            max: 11_309_868.0,
        }),
        inter_arrival_distribution: Some(latency(unique - 1, 7_876_869.0, 11_309_868.0)),
        ipdv: Some(latency(unique - 2, -96_000.0, 71_000.0)),
        loss_periods: (sent > unique).then_some(LossPeriods {
            periods: 2,
            lost: sent - unique,
            mean_length: (sent - unique) as f64 / 2.0,
            max_length: sent - unique - 1,
            mean_distance: Some(3.5),
        }),
        arrival_clock: if protocol == Protocol::Udp {
            "kernel"
        } else {
            "user"
        }
        .to_string(),
        gro: false,
        flows: Vec::new(),
        warmup: None,
    }
}

fn interval(index: u64, with_delay: bool, tcp: bool) -> IntervalReport {
    IntervalReport {
        index,
        start_ns: index * 500_000_000,
        end_ns: (index + 1) * 500_000_000,
        packets: 53,
        bytes: 63_600,
        lost: 1,
        reordered: 0,
        throughput_bps: 1_017_600.0,
        packets_per_sec: 106.0,
        delay: with_delay.then(|| latency(53, 0.0, 71_206.0)),
        jitter_ns: 5_456.19,
        tcp_info: tcp.then(tcp_info),
        schedule_error: (!tcp).then(|| latency(53, -800.0, 12_000.0)),
    }
}

/// A finished test of this kind, as the client would assemble it.
fn built(protocol: Protocol, direction: Direction, with_agent: bool) -> TestResult {
    let spec = spec(protocol, direction);
    let tcp = protocol == Protocol::Tcp;
    let (sent, unique) = (105, 101);
    let side = |role: Role, user: f64| SideReport {
        cpu: Some(cpu(user)),
        role_cpu: Some(flowlab_results::RoleCpu {
            user_pct: user / 2.0,
            system_pct: 1.0,
            pacing_spin_pct: 0.5,
            cpu_ns: 30_000_000,
            wall_ns: 1_000_000_000,
            ns_per_packet: Some(285_714.3),
        }),
        ..SideReport::new(role, "vm".into())
    };
    let (mut client, mut agent) = match direction {
        Direction::Oneway => (side(Role::Sender, 1.4), side(Role::Receiver, 0.5)),
        Direction::Reverse => (side(Role::Receiver, 0.9), side(Role::Sender, 0.7)),
        Direction::Loopback => (side(Role::Sender, 78.3), side(Role::Echo, 0.2)),
    };
    match direction {
        Direction::Oneway => {
            client.sender = Some(sender(sent, true));
            client.tcp_info = tcp.then(tcp_info);
            agent.receiver = Some(receiver(unique, sent, false, protocol));
        }
        Direction::Reverse => {
            agent.sender = Some(sender(sent, false));
            agent.tcp_info = tcp.then(tcp_info);
            client.receiver = Some(receiver(unique, sent, false, protocol));
        }
        Direction::Loopback => {
            client.sender = Some(sender(sent, true));
            client.tcp_info = tcp.then(tcp_info);
            client.receiver = Some(receiver(unique, sent, true, protocol));
            agent.echo = Some(EchoReport {
                packets_echoed: unique,
                bytes_echoed: unique * 1200,
                malformed: 2,
                socket_buffer_drops: None,
            });
        }
    }
    let agent = with_agent.then_some(agent);
    let summary = Summary2::combine(&spec, Some(&client), agent.as_ref(), false);
    TestResult {
        schema_version: SCHEMA_VERSION,
        flowlab_version: "0.1.0".into(),
        started_at_ns: 1_795_331_874_469_519_654,
        target: "127.0.0.1:9600".into(),
        agent_address: "127.0.0.1:9600".into(),
        spec,
        summary,
        client: Some(client),
        agent,
        intervals: vec![interval(0, true, tcp), interval(1, false, tcp)],
        interrupted: false,
        error: (!with_agent).then(|| "agent lost: no word from it for 2.5 s".to_string()),
    }
}

#[test]
fn built_documents_match_the_schema() {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    for protocol in [Protocol::Udp, Protocol::Tcp] {
        for direction in [Direction::Oneway, Direction::Reverse, Direction::Loopback] {
            for with_agent in [true, false] {
                let result = built(protocol, direction, with_agent);
                let value = check_document(&mut validator, &result);
                assert_eq!(value["agent"].is_null(), !with_agent);
            }
        }
    }
    // Interrupted, with an error of the client's own side, at max rate, a count and no
    // intervals: every optional field of the spec takes its other form.
    let mut result = built(Protocol::Udp, Direction::Oneway, true);
    result.interrupted = true;
    result.spec.rate_bps = None;
    result.spec.duration_ns = None;
    result.spec.count = Some(20);
    result.spec.interval_ns = None;
    result.spec.packet_log = true;
    result.intervals.clear();
    let client = result.client.as_mut().unwrap();
    client.error = Some("UDP send failed: Network is unreachable (os error 101)".into());
    client.cpu = None;
    result.error = client.error.clone();
    check_document(&mut validator, &result);
    // Two flows after a warm-up: per-flow tables on both ends, what the warm-up left out.
    let mut result = built(Protocol::Udp, Direction::Oneway, true);
    result.spec.flows = 2;
    result.spec.omit_ns = Some(500_000_000);
    result.spec.client_udp_ports = vec![40_000, 40_001];
    result.spec.busy_poll = true;
    let client = result.client.as_mut().unwrap();
    let sent = client.sender.as_mut().unwrap();
    sent.batching.gso = true;
    sent.batching.packet_socket = true;
    sent.flows = (0..2)
        .map(|flow| FlowSenderSummary {
            flow,
            packets_sent: 52 + u64::from(flow),
            bytes_sent: (52 + u64::from(flow)) * 1200,
            lost_by_sender: LostBySender::default(),
            duration_ns: 998_000_000,
        })
        .collect();
    let received = result.agent.as_mut().unwrap().receiver.as_mut().unwrap();
    received.gro = true;
    received.warmup = Some(flowlab_results::Warmup {
        packets_received: 48,
        packets_sent: 50,
    });
    received.flows = (0..2)
        .map(|flow| FlowReceiverSummary {
            flow,
            packets: SeqCounts {
                received: 50,
                unique: 50,
                lost: 2 + u64::from(flow),
                reordered: 0,
                duplicates: 0,
            },
            bytes_received: 60_000,
            duration_ns: 997_000_000,
            goodput_bps: 472_942.8,
            loss_pct: 100.0 * (2.0 + f64::from(flow)) / (52.0 + f64::from(flow)),
            jitter_ns: 4_000.0,
            mean_relative_delay_ns: 12_500.0 * f64::from(flow),
        })
        .collect();
    check_document(&mut validator, &result);
    // Nothing arrived: no receiver figures at all.
    let mut result = built(Protocol::Udp, Direction::Reverse, false);
    result.client.as_mut().unwrap().receiver = None;
    result.summary = Summary2::combine(&result.spec, result.client.as_ref(), None, true);
    check_document(&mut validator, &result);
    // Neither side's report: the client's own side failed to start.
    let mut result = built(Protocol::Tcp, Direction::Oneway, false);
    result.client = None;
    result.summary = Summary2::combine(&result.spec, None, None, false);
    check_document(&mut validator, &result);

    // A contract-shaped flow reports its conformance.
    let mut result = built(Protocol::Tcp, Direction::Oneway, true);
    let contract = flowlab_traffic::preset::AQUILA_CONTRACT;
    result.spec.traffic = Some(flowlab_traffic::TrafficSpec::Preset {
        name: "aquila-flow2".into(),
    });
    result
        .client
        .as_mut()
        .unwrap()
        .sender
        .as_mut()
        .unwrap()
        .contract = Some(flowlab_results::ContractConformance {
        contract,
        flows: 1,
        shaper: flowlab_traffic::ContractReport {
            packets: 30,
            bytes: 45_000,
            delayed: 24,
            max_delay_ns: 840_000_000,
            total_delay_ns: 9_000_000_000,
            would_violate: 20,
            oversize: 0,
        },
        max_excess_bytes: 1,
    });
    check_document(&mut validator, &result);

    // A request/response test: transactions at the client, answers at the agent.
    let mut result = built(Protocol::Tcp, Direction::Oneway, true);
    result.spec.rate_bps = None;
    result.spec.traffic =
        Some(flowlab_traffic::TrafficSpec::parse("crr:request=64,response=1k").unwrap());
    let client = result.client.as_mut().unwrap();
    client.role = Role::Requester;
    client.sender = None;
    client.transactions = Some(flowlab_results::TransactionReport {
        transactions: 950,
        duration_ns: 1_000_000_000,
        transactions_per_sec: 950.0,
        latency: Some(latency(950, 250_000.0, 1_200_000.0)),
        connect: Some(latency(950, 40_000.0, 300_000.0)),
        connects: 950,
        request_bytes: 950 * 64,
        response_bytes: 950 * 1024,
        timeouts: 0,
        errors: 1,
    });
    let agent = result.agent.as_mut().unwrap();
    agent.role = Role::Responder;
    agent.receiver = None;
    agent.responder = Some(flowlab_results::ResponderReport {
        requests: 951,
        request_bytes: 951 * 64,
        responses: 951,
        response_bytes: 951 * 1024,
        connections: 951,
        malformed: 0,
    });
    result.summary = Summary2::combine(
        &result.spec,
        result.client.as_ref(),
        result.agent.as_ref(),
        false,
    );
    check_document(&mut validator, &result);

    // RTT under load: the client takes every tenth packet's echo.
    let mut result = built(Protocol::Udp, Direction::Oneway, true);
    result.spec.echo_every = Some(10);
    result.client.as_mut().unwrap().receiver = Some(receiver(10, 12, true, Protocol::Udp));
    result.agent.as_mut().unwrap().echo = Some(EchoReport {
        packets_echoed: 11,
        bytes_echoed: 11 * 1200,
        malformed: 0,
        socket_buffer_drops: None,
    });
    result.summary = Summary2::combine(
        &result.spec,
        result.client.as_ref(),
        result.agent.as_ref(),
        false,
    );
    assert_eq!(result.summary.echoes.map(|e| e.lost), Some(2));
    assert!(result.summary.round_trip_from_schedule.is_some());
    check_document(&mut validator, &result);

    // Native frames name the client's MAC address.
    let mut result = built(Protocol::Raw, Direction::Oneway, true);
    result.spec.raw = Some(flowlab_spec::RawEndpoint {
        client_mac: "02:00:00:00:00:01".into(),
        agent_interface: Some("eth1".into()),
    });
    check_document(&mut validator, &result);

    // Multicast: the group each receiving agent joined.
    let mut result = built(Protocol::Udp, Direction::Oneway, true);
    result.spec.multicast = Some(flowlab_spec::MulticastGroup {
        group: "239.1.2.3".parse().unwrap(),
        port: 5001,
        hops: 1,
        session: 7,
        header: flowlab_spec::DatagramHeader::Iperf2,
    });
    check_document(&mut validator, &result);

    // ICMP echo: no agent, the client's side both ways, don't-fragment set.
    let mut result = built(Protocol::Icmp, Direction::Loopback, false);
    result.spec.socket.dont_fragment = true;
    check_document(&mut validator, &result);

    // Every type of the document was exercised by a non-null value.
    let defined: BTreeSet<&str> = schema["$defs"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|name| !["StreamLine", "DemoDocument", "TestResult"].contains(name))
        .collect();
    let unused: Vec<&&str> = defined
        .iter()
        .filter(|name| !validator.used.contains(**name))
        .collect();
    assert!(unused.is_empty(), "never exercised: {unused:?}");
}

/// Coverage counts a type only where it validated a value that was there: a document without
/// the agent's side and with no raw endpoint uses `SideReport` (the client's) but not
/// `RawEndpoint`, and a rejected document adds nothing.
#[test]
fn coverage_counts_only_present_values() {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    let mut doc = serde_json::to_value(built(Protocol::Udp, Direction::Oneway, false)).unwrap();
    assert!(doc["spec"]["raw"].is_null());
    doc["summary"]["packets_sent"] = json!(-1);
    assert!(!validator.check(None, &doc).is_empty());
    assert!(validator.used.is_empty(), "{:?}", validator.used);
    doc["summary"]["packets_sent"] = json!(1);
    assert!(validator.check(None, &doc).is_empty());
    assert!(validator.used.contains("SideReport") && validator.used.contains("TestSpec"));
    assert!(!validator.used.contains("RawEndpoint"));
}

#[test]
fn schema_is_closed_complete_and_versioned() {
    let schema = schema();
    assert_eq!(
        schema["properties"]["schema_version"]["const"],
        json!(SCHEMA_VERSION),
        "bump the schema's schema_version with flowlab_control::SCHEMA_VERSION"
    );
    // serde writes every field of a struct, null or not: every closed object requires all.
    let mut objects = vec![("(root)".to_string(), &schema)];
    for (name, def) in schema["$defs"].as_object().unwrap() {
        objects.push((name.clone(), def));
    }
    for (name, def) in objects {
        if def["type"] != json!("object") {
            continue;
        }
        assert_eq!(def["additionalProperties"], json!(false), "{name} is open");
        let properties: BTreeSet<&str> = def["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let required: BTreeSet<&str> = def["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(
            properties, required,
            "{name}: required differs from properties"
        );
    }
}

#[test]
fn bad_documents_are_rejected() {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    let good = serde_json::to_value(built(Protocol::Udp, Direction::Loopback, true)).unwrap();
    assert_eq!(validator.check(None, &good), Vec::<String>::new());

    let rejected = |v: &mut Validator, doc: &Value, why: &str| {
        let errors = v.check(None, doc);
        assert!(!errors.is_empty(), "accepted a document with {why}");
    };
    let mut doc = good.clone();
    doc["summary"]["packets_per_fortnight"] = json!(3);
    rejected(&mut validator, &doc, "an unknown field in the summary");
    let mut doc = good.clone();
    doc["agent"]["echo"]["surprise"] = json!(true);
    rejected(&mut validator, &doc, "an unknown field deep inside");
    let mut doc = good.clone();
    doc["summary"]["loss_pct"] = json!("0.5%");
    rejected(&mut validator, &doc, "a string for a number");
    let errors = validator.check(None, &doc);
    assert!(
        errors.iter().any(|e| e.starts_with("$/summary/loss_pct: ")),
        "errors name the field: {errors:?}"
    );
    let mut doc = good.clone();
    doc["summary"]["packets_sent"] = json!(-1);
    rejected(&mut validator, &doc, "a negative count");
    let mut doc = good.clone();
    doc["summary"]["packets_sent"] = json!(10.5);
    rejected(&mut validator, &doc, "a fractional count");
    let mut doc = good.clone();
    doc["spec"]["direction"] = json!("sideways");
    rejected(&mut validator, &doc, "an unknown direction");
    let mut doc = good.clone();
    doc["summary"].as_object_mut().unwrap().remove("jitter_ns");
    rejected(&mut validator, &doc, "a missing field");
    let mut doc = good.clone();
    doc["intervals"][0]["delay"] = json!({ "count": 1 });
    rejected(&mut validator, &doc, "an incomplete nested object");
    let mut doc = good.clone();
    doc["schema_version"] = json!(SCHEMA_VERSION + 1);
    rejected(&mut validator, &doc, "another schema version");

    // The duplicate-key check itself.
    assert!(serde_json::from_str::<NoDuplicateKeys>(r#"{"a":{"b":1,"b":2}}"#).is_err());
    assert!(serde_json::from_str::<NoDuplicateKeys>(r#"[{"a":1},{"a":2}]"#).is_ok());

    // A NaN would not reach a reader as NaN: serde_json writes it as null, which the schema
    // refuses where a number is required.
    let mut result = built(Protocol::Udp, Direction::Oneway, true);
    result.summary.loss_pct = f64::NAN;
    result.summary.receiver_goodput_bps = f64::INFINITY;
    let doc: Value = serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
    assert!(doc["summary"]["loss_pct"].is_null());
    rejected(&mut validator, &doc, "a NaN");
}

#[test]
fn stream_lines_and_demo_document_match_the_schema() {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    let result = built(Protocol::Tcp, Direction::Reverse, true);
    // The framing of `flowlab test --json-stream` (crates/cli/src/output.rs).
    let line = |kind: &str, data: Value| {
        let text = json!({ "type": kind, "schema_version": SCHEMA_VERSION, "data": data });
        serde_json::from_str::<Value>(&text.to_string()).unwrap()
    };
    for r in &result.intervals {
        let errors = validator.check(
            Some("StreamLine"),
            &line("interval", serde_json::to_value(r).unwrap()),
        );
        assert!(errors.is_empty(), "{errors:#?}");
    }
    let last = line("result", serde_json::to_value(&result).unwrap());
    assert!(validator.check(Some("StreamLine"), &last).is_empty());
    let wrong = line("interval", serde_json::to_value(&result).unwrap());
    assert!(!validator.check(Some("StreamLine"), &wrong).is_empty());

    let demo = json!({
        "schema_version": SCHEMA_VERSION,
        "demo": "WS2NetTest Test 1 and Test 3 on loopback",
        "tests": [{ "test": "test1", "result": result }],
    });
    let errors = validator.check(Some("DemoDocument"), &demo);
    assert!(errors.is_empty(), "{errors:#?}");
}

// ---------------------------------------------------------------------------------------------
// Real tests against an agent in this process, on 127.0.0.1.

/// Runs `specs` one after another against a fresh agent and returns their results.
fn run_against_local_agent(specs: &[TestSpec]) -> Vec<TestResult> {
    let local = flowlab_control::LocalAgent::start().expect("agent on 127.0.0.1");
    let agent = local.addr();
    let results = specs
        .iter()
        .map(|spec| {
            let options = TestOptions {
                target: agent.to_string(),
                spec: spec.clone(),
                key: None,
                drain: Duration::from_millis(150),
                interface: None,
                agent_interface: None,
                bind: None,
                cport: None,
            };
            let mut streamed = 0;
            let run = run_test(&options, &mut |_| streamed += 1).expect("test runs");
            assert_eq!(streamed, run.result.intervals.len());
            run.result
        })
        .collect();
    local.stop().expect("agent stops cleanly");
    results
}

/// 20 packets of 200 B at 1.6 Mbit/s: 1000 packets/s, 20 ms of traffic.
fn short(protocol: Protocol, direction: Direction) -> TestSpec {
    TestSpec {
        protocol,
        direction,
        rate_bps: Some(1_600_000),
        size: 200,
        duration_ns: Some(2_000_000_000),
        count: Some(20),
        interval_ns: Some(10_000_000),
        flows: 1,
        client_udp_ports: Vec::new(),
        raw: None,
        busy_poll: false,
        packet_log: true,
        socket: SocketOptions {
            send_buffer: Some(256 * 1024),
            ..Default::default()
        },
        traffic: None,
        seed: 7,
        authenticated_packets: false,
        echo_every: None,
        omit_ns: None,
        pacing: Default::default(),
        multicast: None,
    }
}

fn check_real(protocol: Protocol) {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    let directions = [Direction::Oneway, Direction::Reverse, Direction::Loopback];
    let specs: Vec<TestSpec> = directions.iter().map(|&d| short(protocol, d)).collect();
    for (result, direction) in run_against_local_agent(&specs).iter().zip(directions) {
        let value = check_document(&mut validator, result);
        assert_eq!(result.error, None, "{value:#}");
        assert!(!result.interrupted);
        assert_eq!(result.spec.direction, direction);
        // Every slot is sent, or skipped as hopelessly late on a loaded machine.
        let slots = result.summary.packets_sent + result.summary.lost_by_sender;
        assert_eq!(slots, 20, "{value:#}");
        assert!(result.agent.is_some());
        assert_eq!(
            result.summary.round_trip.is_some(),
            direction == Direction::Loopback
        );
        let expected = if direction == Direction::Reverse {
            "agent"
        } else {
            "client"
        };
        assert_eq!(result.summary.sender, expected);
    }
}

#[test]
fn real_udp_tests_match_the_schema() {
    check_real(Protocol::Udp);
}

#[test]
fn real_two_flow_test_matches_the_schema() {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    let mut spec = short(Protocol::Udp, Direction::Oneway);
    spec.flows = 2;
    let result = &run_against_local_agent(&[spec])[0];
    let value = check_document(&mut validator, result);
    assert_eq!(result.error, None, "{value:#}");
    let slots = result.summary.packets_sent + result.summary.lost_by_sender;
    assert_eq!(slots, 40, "{value:#}");
    assert_eq!(result.spec.client_udp_ports.len(), 2);
    let receiver = result.agent.as_ref().unwrap().receiver.as_ref().unwrap();
    assert_eq!(receiver.flows.len(), 2, "{value:#}");
}

#[test]
fn real_tcp_tests_match_the_schema() {
    check_real(Protocol::Tcp);
}

#[test]
fn real_request_response_tests_match_the_schema() {
    let schema = schema();
    let mut validator = Validator::new(&schema);
    let rr = |protocol: Protocol, traffic: &str| TestSpec {
        rate_bps: None,
        count: Some(30),
        interval_ns: None,
        packet_log: false,
        traffic: Some(flowlab_traffic::TrafficSpec::parse(traffic).unwrap()),
        flows: 2,
        ..short(protocol, Direction::Oneway)
    };
    let specs = [
        rr(Protocol::Tcp, "rr:request=100,response=3000"),
        rr(Protocol::Tcp, "crr:request=64,response=1k"),
        rr(Protocol::Udp, "rr:request=64,response=1200"),
    ];
    let response_sizes = [3000, 1000, 1200];
    for ((result, spec), size) in run_against_local_agent(&specs)
        .iter()
        .zip(&specs)
        .zip(response_sizes)
    {
        let value = check_document(&mut validator, result);
        assert_eq!(result.error, None, "{value:#}");
        let t = result.summary.transactions.as_ref().expect("transactions");
        // 30 per flow, 2 flows; UDP on loopback loses nothing either.
        assert_eq!(t.transactions, 60, "{value:#}");
        assert_eq!(t.response_bytes, 60 * size);
        assert_eq!((t.timeouts, t.errors), (0, 0));
        let connect_each = spec
            .traffic
            .as_ref()
            .unwrap()
            .transactions()
            .unwrap()
            .connect_each;
        assert_eq!(t.connect.is_some(), connect_each);
        assert_eq!(t.connects, if connect_each { 60 } else { 0 });
        let answered = result.agent.as_ref().unwrap().responder.unwrap();
        assert_eq!(answered.responses, 60, "{value:#}");
        assert_eq!(answered.malformed, 0);
        let connections = match (spec.protocol, connect_each) {
            (Protocol::Udp, _) => 0,
            (_, true) => 60,
            (_, false) => 2,
        };
        assert_eq!(answered.connections, connections);
    }
}
