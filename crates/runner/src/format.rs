//! Every human text flowlab prints, in one place so `test`, `show`, `history`, `sweep` and
//! `run` say things the same way: a test's headline, live lines and result; stored runs;
//! an experiment's steps and trials. Plus the JSON stream lines of `--json-stream`.

use std::fmt::Write as _;

use flowlab_control::{
    AgentConfig, AgentStats, Summary2, TestOptions, TestResult, GRO_MAX_SEGMENTS, SCHEMA_VERSION,
};
use flowlab_experiment::Step;
use flowlab_netns::lab::{DownReport, LabState, LabSummary};
use flowlab_results::{CpuLoad, IntervalReport, RoleCpu, SideReport, TransactionReport};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_stats::LatencySummary;
use flowlab_store::{Run, RunInfo};
use flowlab_units::{format_bytes, format_count, format_duration_ns, format_rate};
use serde::Serialize;
use serde_json::Value;

use crate::observer::ExperimentStart;
use crate::outcome::{FlowOutcome, NetworkKind, OneWay, TrialOutcome};
use crate::sweep::SweepOutcome;

mod flows;
mod params;
mod search;
mod table;

pub use flowlab_units::fit::{self, wrap};
pub use search::search_text;

pub fn protocol_name(p: Protocol) -> &'static str {
    match p {
        Protocol::Udp => "UDP",
        Protocol::Tcp => "TCP",
        Protocol::Raw => "native frames",
        Protocol::Icmp => "ICMP echo",
    }
}

/// The test's direction, or for ICMP echo who answers.
fn mode_name(spec: &TestSpec) -> &'static str {
    match spec.protocol {
        Protocol::Icmp => "round trips, the host's kernel answers",
        _ => direction_name(spec.direction),
    }
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Oneway => "one-way, client to agent",
        Direction::Reverse => "reverse, agent to client",
        Direction::Loopback => "loopback, agent echoes",
    }
}

/// `rr`/`crr` and its sizes, for a request/response test.
fn transactions_text(rr: &flowlab_traffic::TransactionConfig) -> String {
    let dist = |d: &flowlab_traffic::Dist| match d {
        flowlab_traffic::Dist::Const { value } => format_bytes(*value),
        other => other.mean().map_or("a distribution".into(), |m| {
            format!("mean {}", format_bytes(m))
        }),
    };
    format!(
        "{}: requests {}, responses {}",
        if rr.connect_each {
            "CRR (a connection per transaction)"
        } else {
            "RR"
        },
        dist(&rr.request),
        dist(&rr.response)
    )
}

fn offered(spec: &TestSpec) -> String {
    if let Some(rr) = spec.traffic.as_ref().and_then(|t| t.transactions()) {
        let end = match (spec.duration_ns, spec.count) {
            (Some(d), _) => format_duration_ns(d as f64),
            (None, Some(n)) => format!("{n} transactions per flow"),
            (None, None) => "no end".into(),
        };
        return format!(
            "{} for {end}, {} flow(s)",
            transactions_text(rr),
            spec.flows
        );
    }
    if spec.modelled() {
        return model_offered(spec);
    }
    let rate = match (spec.rate_bps, spec.flows) {
        (None, _) => "as fast as possible".to_string(),
        (Some(r), 1) => format_rate(r as f64),
        // The rate is per flow: say so, and what the flows offer together.
        (Some(r), n) => format!(
            "{} × {n} flows ({})",
            format_rate(r as f64),
            format_rate(r as f64 * f64::from(n))
        ),
    };
    let end = match (spec.duration_ns, spec.count) {
        (Some(d), Some(n)) => format!("{} or {n} packets", format_duration_ns(d as f64)),
        (Some(d), None) => format_duration_ns(d as f64),
        (None, Some(n)) => format!("{n} packets"),
        (None, None) => "no end".into(),
    };
    format!("{rate} in {} B packets for {end}", spec.size)
}

/// A traffic model decides rates and sizes, not `--rate` and `--size`: its mean rate over its
/// first 10 s (run ahead, as the agent does), all flows together.
fn model_offered(spec: &TestSpec) -> String {
    let end = match (spec.duration_ns, spec.count) {
        (Some(d), _) => format!(" for {}", format_duration_ns(d as f64)),
        (None, Some(n)) => format!(" for {n} packets per flow"),
        (None, None) => String::new(),
    };
    let flows = match spec.flows {
        1 => String::new(),
        n => format!(" over {n} flows"),
    };
    let unlimited = flowlab_traffic::contract::TokenBucket::new(u64::MAX / 16, u32::MAX);
    match spec.offered_load(10_000_000_000, 200_000, unlimited) {
        Ok(Some(load)) => format!(
            "a traffic model offering {} on average{flows}{end}",
            format_rate(load.mean_bps)
        ),
        _ => format!("a traffic model{flows}{end}"),
    }
}

pub fn headline(options: &TestOptions) -> String {
    fit::wrap(&headline_line(options), 2).trim_end().to_string()
}

/// [`headline`] on one line, for a view that fits it itself.
pub fn headline_line(options: &TestOptions) -> String {
    let s = &options.spec;
    let direction = match s.traffic.as_ref().and_then(|t| t.transactions()) {
        Some(_) => "request/response",
        None => mode_name(s),
    };
    format!(
        "flowlab {}: {} {} to {}, {}",
        env!("CARGO_PKG_VERSION"),
        protocol_name(s.protocol),
        direction,
        options.target,
        offered(s)
    )
}

/// `transactions`: a request/response test, whose interval "packets" are transactions and
/// "delay" their latency.
pub fn interval_header(transactions: bool) -> String {
    let (rate, delay50, delay99) = if transactions {
        ("trans/s", "latency p50", "latency p99")
    } else {
        ("packets/s", "delay p50", "delay p99")
    };
    format!(
        "{:>15}  {:>11}  {:>9}  {:>6}  {:>9}  {:>9}  {:>8}",
        "interval", "throughput", rate, "lost", delay50, delay99, "jitter"
    )
}

fn delay_cell(d: Option<&LatencySummary>, pick: fn(&LatencySummary) -> f64) -> String {
    d.map_or("-".into(), |d| format_duration_ns(pick(d)))
}

/// One interval's line; TCP's own figures on a second line under it, to fit 80 columns.
pub fn interval_line(r: &IntervalReport) -> String {
    let tcp = r.tcp_info.map_or(String::new(), |t| {
        format!(
            "\n{:17}tcp rtt {}  cwnd {}  retransmits {}",
            "",
            format_duration_ns(f64::from(t.rtt_us) * 1e3),
            t.snd_cwnd,
            t.total_retrans
        )
    });
    format!(
        "{:>6.2}-{:<6.2} s  {:>11}  {:>9}  {:>6}  {:>9}  {:>9}  {:>8}{tcp}",
        r.start_ns as f64 / 1e9,
        r.end_ns as f64 / 1e9,
        format_rate(r.throughput_bps),
        format_count(r.packets_per_sec),
        r.lost,
        delay_cell(r.delay.as_ref(), |d| d.p50_ns),
        delay_cell(r.delay.as_ref(), |d| d.p99_ns),
        format_duration_ns(r.jitter_ns),
    )
}

/// One line of `--json-stream`: `{"type": ..., "schema_version": ..., "data": ...}`.
pub fn stream_line(kind: &str, data: &impl Serialize) -> String {
    serde_json::json!({ "type": kind, "schema_version": SCHEMA_VERSION, "data": data }).to_string()
}

fn latency_line(label: &str, d: &LatencySummary) -> String {
    let f = |ns: f64| format_duration_ns(ns);
    format!(
        "  {label:<18} min {}  mean {}  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  stddev {}\n",
        f(d.min_ns),
        f(d.mean_ns),
        f(d.p50_ns),
        f(d.p90_ns),
        f(d.p99_ns),
        f(d.p999_ns),
        f(d.max_ns),
        f(d.stddev_ns)
    )
}

/// An end's CPU: its role's threads first (the one figure sweeps and JSON call the role's
/// CPU), then its whole process and its host over the same time. The process's user/system
/// split is left out: the kernel keeps it monotonic over the process's life, so over one test
/// it can put everything in one column (docs/results-format.md, CPU).
fn cpu_lines(label: &str, cpu: Option<&CpuLoad>, role: Option<&RoleCpu>) -> String {
    let role_line = role.map_or("test threads unknown".into(), |c| {
        let spin = match c.pacing_spin_pct {
            0.0 => String::new(),
            spin => format!(", of which pacing spin {spin:.1}%"),
        };
        let per_packet = c.ns_per_packet.map_or(String::new(), |ns| {
            format!("; {} CPU per packet", format_duration_ns(ns))
        });
        format!(
            "{:.1}% of one core in its test threads ({:.1}% user + {:.1}% system){spin}{per_packet}",
            c.total_pct(),
            c.user_pct,
            c.system_pct
        )
    });
    let mut out = format!("  {label:<19}{role_line}\n");
    if let Some(c) = cpu {
        let busiest = c
            .host_softirq_per_cpu_pct
            .iter()
            .copied()
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        let _ = writeln!(
            out,
            "  {:<19}process {:.1}%, peak memory {:.1} MiB; host {:.1}% busy of {} cores, softirq {:.1}%{} (host-wide)",
            "",
            c.process_user_pct + c.process_system_pct,
            c.process_max_rss_bytes as f64 / f64::from(1u32 << 20),
            c.host_pct,
            c.cores,
            c.host_softirq_pct,
            busiest.map_or(String::new(), |b| format!(", busiest CPU {b:.1}%"))
        );
    }
    out
}

/// Packets dropped at the receiving socket: exact, or bounds when GRO buffers were dropped.
fn socket_drops_text(s: &Summary2) -> String {
    match (
        s.lost_at_receiver_socket,
        s.receive_buffers_dropped,
        s.lost_at_receiver_socket_max,
    ) {
        (Some(n), _, _) => n.to_string(),
        (None, Some(least), Some(most)) => format!(
            "{least} to {most} ({least} GRO receive buffers of up to {GRO_MAX_SEGMENTS} datagrams)"
        ),
        _ => "unknown (the kernel does not tell)".into(),
    }
}

/// Where the lost packets were lost, when some were and the sender's qdisc was read: "3 in
/// the sending host's qdisc (tbf on veth0), 0 beyond it".
fn loss_attribution_text(r: &TestResult) -> Option<String> {
    let s = &r.summary;
    let (at_host, beyond) = (s.lost_in_sender_qdisc?, s.lost_beyond_sender?);
    if s.packets_lost == 0 {
        return None;
    }
    let qdiscs: Vec<String> = [&r.client, &r.agent]
        .iter()
        .filter_map(|side| side.as_ref()?.host_qdisc_drops.as_ref())
        .map(|d| format!("{} on {}", d.qdisc, d.interface))
        .collect();
    Some(format!(
        "{at_host} in the sending host's qdisc ({}), {beyond} beyond it",
        qdiscs.join(", ")
    ))
}

fn side_name(r: Option<&SideReport>) -> String {
    r.map_or("unknown host".into(), |r| r.host.clone())
}

/// The figures of a request/response test.
fn render_transactions(r: &TestResult, t: &TransactionReport, out: &mut String) {
    let _ = writeln!(
        out,
        "  transactions       {} in {:.3} s: {} transactions/s over {} flow(s)",
        t.transactions,
        t.duration_ns as f64 / 1e9,
        format_count(t.transactions_per_sec),
        r.spec.flows
    );
    if let Some(d) = &t.latency {
        out.push_str(&latency_line("latency", d));
    }
    if let Some(d) = &t.connect {
        out.push_str(&latency_line("connect", d));
        let _ = writeln!(
            out,
            "  {:<18} {} connections; the latency above includes each connect",
            "", t.connects
        );
    }
    let _ = writeln!(
        out,
        "  bytes              requests {}, responses {}",
        format_bytes(t.request_bytes as f64),
        format_bytes(t.response_bytes as f64)
    );
    let _ = writeln!(
        out,
        "  failed             {} timed out or cut off at the end, {} errors",
        t.timeouts, t.errors
    );
    if let Some(a) = r.agent.as_ref().and_then(|a| a.responder.as_ref()) {
        // UDP transactions have no connections to count.
        let on = match a.connections {
            0 => String::new(),
            1 => " on 1 connection".to_string(),
            n => format!(" on {n} connections"),
        };
        let _ = writeln!(
            out,
            "  agent              answered {} of {} requests{on}; {} malformed",
            a.responses, a.requests, a.malformed
        );
    }
}

/// A contract and how the shaped flows stood against it.
fn contract_text(c: &flowlab_results::ContractConformance) -> String {
    let k = &c.contract;
    let as_sent = match c.max_excess_bytes {
        0 => "conforming".to_string(),
        b => format!("exceeds it by at most {}", format_bytes(b as f64)),
    };
    format!(
        "PR {}, SR {}, BS {} ({} flow(s)): {} packets, {} held back by the shaper (at most {}), {} the unshaped source would have broken; as sent: {as_sent}",
        format_rate(k.peak_rate_bps as f64),
        format_rate(k.sustained_rate_bps as f64),
        format_bytes(f64::from(k.bucket_bytes)),
        c.flows,
        c.shaper.packets,
        c.shaper.delayed,
        format_duration_ns(c.shaper.max_delay_ns as f64),
        c.shaper.would_violate
    )
}

/// The packet figures of a flow test: sender, receiver, loss, delays.
fn render_packets(r: &TestResult, out: &mut String) {
    let s = &r.summary;
    let (sender_end, receiver_end) = match r.spec.direction {
        Direction::Oneway => ("client", "agent"),
        Direction::Reverse => ("agent", "client"),
        Direction::Loopback => ("client", "client"),
    };
    let _ = writeln!(
        out,
        "  {:<19}{} packets, {} in {:.3} s: {}, {} packets/s",
        format!("sender ({sender_end})"),
        s.packets_sent,
        format_bytes(s.bytes_sent as f64),
        s.duration_s,
        format_rate(s.sender_throughput_bps),
        format_count(s.sender_packets_per_sec)
    );
    let lost = r
        .agent
        .iter()
        .chain(r.client.iter())
        .find_map(|x| x.sender.as_ref())
        .map(|x| x.lost_by_sender);
    if let Some(l) = lost {
        let _ = writeln!(
            out,
            "  lost by sender     {} (send buffer full {}, missed schedule slots {}, send errors {})",
            l.total(),
            l.send_buffer_full,
            l.missed_slots,
            l.send_errors
        );
    }
    if let Some(e) = &s.schedule_error {
        out.push_str(&latency_line("schedule error", e));
    }
    let sender = [&r.client, &r.agent]
        .into_iter()
        .find_map(|side| side.as_ref()?.sender.as_ref());
    if let Some(p) = sender.and_then(|tx| tx.pacing.as_ref()) {
        let _ = writeln!(out, "  pacing             {p}");
    }
    if sender.is_some_and(|tx| tx.batching.packet_socket) {
        let _ = writeln!(
            out,
            "  send path          whole frames through a packet socket ({:.1} a call)",
            sender.map_or(0.0, |tx| tx.batching.mean_batch)
        );
    }
    if let Some(c) = sender.and_then(|tx| tx.contract.as_ref()) {
        let _ = writeln!(out, "  contract           {}", contract_text(c));
    }
    if let Some(tx) = sender {
        if let Some(e) = &tx.departure_error {
            out.push_str(&latency_line("departure error", e));
            let _ = writeln!(
                out,
                "  {:<18} kernel transmit timestamps minus schedule ({} of {} stamped by the NIC)",
                "", tx.hardware_departures, e.count
            );
        }
    }
    let _ = writeln!(
        out,
        "  {:<19}{} packets, {}: goodput {}, on the wire {}, {} packets/s",
        format!("receiver ({receiver_end})"),
        s.packets_received,
        format_bytes(s.bytes_received as f64),
        format_rate(s.receiver_goodput_bps),
        format_rate(s.receiver_wire_throughput_bps),
        format_count(s.receiver_packets_per_sec)
    );
    if !s.wire_headers.is_empty() {
        let _ = writeln!(out, "  wire counts        {}", s.wire_headers);
    }
    let _ = writeln!(
        out,
        "  lost after sending {} of {} ({:.3}%); reordered {}; duplicates {}; at the receiving socket {}",
        s.packets_lost,
        s.packets_sent,
        s.loss_pct,
        s.reordered,
        s.duplicates,
        socket_drops_text(s)
    );
    if let Some(where_lost) = loss_attribution_text(r) {
        let _ = writeln!(out, "  of which          {where_lost}");
    }
    if let Some(n) = s.tcp_unreceived_at_end.filter(|&n| n > 0) {
        let _ = writeln!(
            out,
            "  not yet delivered  {n} messages were still in TCP buffers when the test stopped"
        );
    }
    render_round_trips(r, out);
    if let Some(d) = &s.relative_one_way_delay {
        let label = if r.spec.direction == Direction::Loopback {
            "one-way (out)"
        } else {
            "one-way delay"
        };
        out.push_str(&latency_line(label, d));
        let _ = writeln!(
            out,
            "  {:<18} relative to the smallest delay seen (no clock sync needed); peak-to-peak variation {}",
            "",
            format_duration_ns(d.peak_to_peak_ns)
        );
    }
    if let Some(line) = max_delay_text(r) {
        let _ = writeln!(out, "  max delay          {line}");
    }
    if let Some(j) = s.jitter_ns {
        let _ = writeln!(out, "  jitter (RFC 3550)  {}", format_duration_ns(j));
    }
    if let Some(ia) = &s.inter_arrival {
        let _ = writeln!(
            out,
            "  inter-arrival      mean {}  variance {:.3} ms^2  min {}  max {}",
            format_duration_ns(ia.mean),
            ia.variance / 1e12,
            format_duration_ns(ia.min),
            format_duration_ns(ia.max)
        );
    }
    if let Some(clock) = &s.arrival_clock {
        let what = match clock.as_str() {
            "kernel" => "kernel receive timestamps (SO_TIMESTAMPNS, CLOCK_REALTIME)",
            "user" => "read in the application (CLOCK_REALTIME)",
            "virtual" => "the simulator's virtual clock",
            other => other,
        };
        let _ = writeln!(out, "  arrival times      {what}");
    }
}

/// Round trips from each packet's departure and from its schedule, and with `--echo-every`
/// the echoes they come from.
fn render_round_trips(r: &TestResult, out: &mut String) {
    let s = &r.summary;
    if let (Some(e), Some(every)) = (&s.echoes, r.spec.echo_every) {
        let due = e.unique + e.lost;
        let _ = writeln!(
            out,
            "  echoes             {} of {due} due (every {} packet of the load echoed by the agent); {} lost",
            e.unique,
            ordinal(every),
            e.lost
        );
    }
    if let Some(d) = &s.round_trip {
        out.push_str(&latency_line("round trip", d));
    }
    if let Some(d) = &s.round_trip_from_schedule {
        out.push_str(&latency_line("rtt from schedule", d));
        let _ = writeln!(
            out,
            "  {:<18} round trip: from each packet's departure; rtt from schedule: from its slot, so a late send adds its lateness",
            ""
        );
    }
}

/// "10th", "1st", "22nd": which packets an echo comes from.
fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// The largest packet transfer delay: one-way (above the fastest packet, and as timestamps
/// gave it, exact only with synchronised clocks) and round trip.
fn max_delay_text(r: &TestResult) -> Option<String> {
    let s = &r.summary;
    let receiving = match r.spec.direction {
        Direction::Oneway => r.agent.as_ref(),
        Direction::Reverse | Direction::Loopback => r.client.as_ref(),
    };
    let transit_min = receiving.and_then(|x| x.receiver.as_ref()?.transit_min_ns);
    let one_way = s.relative_one_way_delay.map(|d| {
        let stamped = transit_min
            .map(|min| {
                let max = min as f64 + d.max_ns;
                format!(
                    " ({} by the timestamps: the absolute maximum when the clocks agree)",
                    format_duration_ns(max)
                )
            })
            .unwrap_or_default();
        let path = match r.spec.direction {
            Direction::Loopback => "one-way out",
            Direction::Oneway | Direction::Reverse => "one-way",
        };
        format!(
            "{path} {} above the fastest packet{stamped}",
            format_duration_ns(d.max_ns)
        )
    });
    let round_trip = s
        .round_trip
        .map(|d| format!("round trip {}", format_duration_ns(d.max_ns)));
    let parts: Vec<String> = one_way.into_iter().chain(round_trip).collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The final report, as a person reads it.
pub fn render(r: &TestResult) -> String {
    let s = &r.summary;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nResult ({} {}, {}):",
        protocol_name(r.spec.protocol),
        match &s.transactions {
            Some(_) => "request/response",
            None => mode_name(&r.spec),
        },
        r.agent_address
    );
    match &s.transactions {
        Some(t) => render_transactions(r, t, &mut out),
        None => {
            render_packets(r, &mut out);
            flows::render_flows(r, &mut out);
        }
    }
    out += &cpu_lines(
        &format!("CPU client ({})", side_name(r.client.as_ref())),
        s.client_cpu.as_ref(),
        s.client_role_cpu.as_ref(),
    );
    if r.spec.protocol != Protocol::Icmp {
        out += &cpu_lines(
            &format!("CPU agent ({})", side_name(r.agent.as_ref())),
            s.agent_cpu.as_ref(),
            s.agent_role_cpu.as_ref(),
        );
    }
    let sending = match r.spec.direction {
        Direction::Reverse => r.agent.as_ref(),
        Direction::Oneway | Direction::Loopback => r.client.as_ref(),
    };
    if let Some(t) = sending.and_then(|x| x.tcp_info) {
        let _ = writeln!(
            out,
            "  TCP at the sender  rtt {}, cwnd {} segments, retransmits {}, mss {} B",
            format_duration_ns(f64::from(t.rtt_us) * 1e3),
            t.snd_cwnd,
            t.total_retrans,
            t.snd_mss
        );
    }
    for (end, side) in [("client", &r.client), ("agent", &r.agent)] {
        for note in side.iter().flat_map(|x| x.notes.iter()) {
            let _ = writeln!(out, "  note ({end}){:pad$}{note}", "", pad = 12 - end.len());
        }
    }
    fit::fit(&out)
}

/// `2026-11-22 07:54:05` (UTC) from Unix ns.
pub fn format_time(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What a run was, in a few words: its target or experiment (and the network it ran on),
/// and what it varied.
fn describe(info: &RunInfo) -> String {
    let p = &info.params;
    let mut parts = Vec::new();
    if let Some(t) = p.get("target").and_then(Value::as_str) {
        parts.push(t.to_string());
    }
    if let Some(e) = p.get("experiment").and_then(Value::as_str) {
        match NetworkKind::of_params(p) {
            Some(network) => parts.push(format!("{e} on {network}")),
            None => parts.push(e.to_string()),
        }
    }
    if let Some(v) = p.get("vary").and_then(Value::as_array) {
        let v: Vec<String> = v.iter().map(flowlab_store::plain).collect();
        parts.push(format!("vary {}", v.join(" ")));
    }
    if let Some(d) = p.get("description").and_then(Value::as_str) {
        parts.push(d.to_string());
    }
    parts.join("; ")
}

/// The runs of `flowlab history`, newest first, one line each under a header.
pub fn history_table(runs: &[RunInfo]) -> String {
    let mut out = format!(
        "{:>5}  {:<19}  {:<10} {:<11} {:>6}  what\n",
        "run", "started (UTC)", "kind", "status", "points"
    );
    // One line per run, however long its description: scripts count and grep the lines.
    for r in runs {
        let _ = writeln!(
            out,
            "{:>5}  {:<19}  {:<10} {:<11} {:>6}  {}",
            r.id,
            format_time(r.created_at_ns),
            r.kind,
            r.status.as_str(),
            r.points,
            describe(r)
        );
    }
    out
}

/// One stored run as `flowlab show` prints it: what, when, where, and a table of `metrics`
/// (all of them when empty).
pub fn show_run(run: &Run, metrics: &[String]) -> String {
    let i = &run.info;
    let mut out = format!("run {} ({}), {}\n", i.id, i.kind, i.status);
    let _ = writeln!(out, "started   {} UTC", format_time(i.created_at_ns));
    if let Some(f) = i.finished_at_ns {
        let _ = writeln!(out, "finished  {} UTC", format_time(f));
    }
    let _ = writeln!(
        out,
        "host      {} (kernel {}, {}, clock {}), flowlab {}",
        i.env.hostname, i.env.kernel, i.env.cpu_model, i.env.clock_source, i.env.flowlab_version
    );
    let mut params = i.params.clone();
    let mut take = |key: &str| params.as_object_mut().and_then(|p| p.remove(key));
    // What has its own lines below is left out of the parameters.
    let (emulator, search) = (take("emulator"), take("search"));
    if let Some(network) = NetworkKind::of_params(&i.params) {
        let _ = writeln!(out, "network   {network}");
        take("network");
    }
    out.push_str(&params::params_text(&params));
    if let Some(e) = emulator {
        out.push_str(&emulator_text(&e));
    }
    if let Some(found) = search.filter(|s| !s.is_null()) {
        out.push_str(&search_text(&found));
    }
    let _ = writeln!(out, "points    {}\n", run.points.len());
    if !run.points.is_empty() {
        out.push_str(&table::metrics_table(run, metrics));
    }
    out
}

/// A sweep's end: its table of `metrics` (when it has points), and where it is stored.
pub fn sweep_summary(outcome: &SweepOutcome, metrics: &[String]) -> String {
    let run = &outcome.run;
    let shown = flowlab_report::metrics::resolve_lenient(metrics, &run.metric_names());
    let mut out = String::new();
    if !run.points.is_empty() {
        out.push_str(&table::metrics_table(run, &shown));
    }
    let (id, db) = (outcome.run_id, &outcome.db_path);
    let stored = format!("run {id}: {} stored in {db}", stored_count(run));
    let commands = format!("(flowlab show {id}, flowlab plot {id}, flowlab report {id})");
    // The commands whole, on a line of their own when both do not fit.
    let gap = match stored.chars().count() + 1 + commands.len() <= fit::WIDTH {
        true => " ",
        false => "\n  ",
    };
    out + "\n" + &fit::wrap(&stored, 2).replace('\n', "") + gap + &commands + "\n"
}

/// "6 points × 2 repetitions", or "6 points, 17 tests" when points were repeated unevenly.
fn stored_count(run: &flowlab_store::Run) -> String {
    let stored: Vec<&flowlab_store::Point> = run.points.iter().filter(|p| p.id > 0).collect();
    let mut per_point: Vec<(String, usize)> = Vec::new();
    for p in &stored {
        let key = p.params.to_string();
        match per_point.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => per_point.push((key, 1)),
        }
    }
    let points = plural(per_point.len(), "point");
    let reps = per_point.first().map_or(1, |(_, n)| *n);
    if per_point.iter().any(|(_, n)| *n != reps) {
        format!("{points}, {}", plural(stored.len(), "test"))
    } else if reps > 1 {
        format!("{points} × {}", plural(reps, "repetition"))
    } else {
        points
    }
}

fn plural(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// An experiment's first lines: its size, its network and each host's clock against this
/// one.
pub fn experiment_header(start: &ExperimentStart) -> String {
    let ExperimentStart {
        name,
        steps,
        search,
        network,
        clocks,
    } = start;
    let runs = match search {
        true => "a search".to_string(),
        false => format!("{steps} steps"),
    };
    let agents = clocks.len();
    let mut out = fit::wrap(
        &format!("experiment {name} ({runs}, {agents} agents), network {network}"),
        2,
    );
    for (agent, c) in *clocks {
        let line = format!(
            "  clock of {agent}: offset {} ± {} from this host, {}",
            format_duration_ns(c.offset_ns as f64),
            format_duration_ns(c.bound_ns as f64),
            drift_text(c.drift_ppm.zip(c.drift_bound_ppm))
        );
        out.push_str(&fit::wrap(&line, 4));
    }
    out
}

/// A bound on clock drift above which the estimate says nothing: quartz clocks are within
/// about ±100 ppm, so a wider bound is probes' noise (a congested path), not a measurement.
const DRIFT_BOUND_MEANINGFUL_PPM: f64 = 1000.0;

/// A clock drift and its bound, or why there is none yet.
fn drift_text(drift: Option<(f64, f64)>) -> String {
    match drift {
        Some((_, bound)) if bound > DRIFT_BOUND_MEANINGFUL_PPM => {
            format!("drift not yet known (the probes bound it only to ± {bound:.0} ppm)")
        }
        Some((ppm, bound)) => format!("drift {ppm:+.2} ± {bound:.2} ppm"),
        None => "drift not yet known (re-probed while the experiment runs)".into(),
    }
}

/// A flow's absolute one-way delay, its bound, and how the two clocks drift apart.
fn one_way_text(o: &OneWay) -> String {
    let drift = drift_text(o.clock_drift_ppm.zip(o.clock_drift_bound_ppm));
    if !o.valid {
        let bound = format_duration_ns(o.bound_ns);
        return format!("one-way: relative figures only (clock bound {bound}); clocks {drift}");
    }
    format!(
        "one-way min {} ± {}, p99 {}; clocks {drift}",
        format_duration_ns(o.min_ns),
        format_duration_ns(o.bound_ns),
        format_duration_ns(o.p99_ns)
    )
}

/// A finished step: each flow's goodput, loss and delay, and all flows' goodput.
pub fn step_text(step: &Step, flows: &[FlowOutcome]) -> String {
    let labels: Vec<String> = step
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut out = format!(
        "step {} (repetition {}{}{})\n",
        step.index,
        step.repetition,
        if labels.is_empty() { "" } else { ", " },
        labels.join(" ")
    );
    let mut total = 0.0;
    let width = flows
        .iter()
        .map(|r| r.flow.len())
        .chain([9]) // "all flows"
        .max()
        .unwrap_or(9);
    for r in flows {
        match &r.result {
            Ok(t) => {
                let s = &t.summary;
                total += s.receiver_goodput_bps;
                let delay = s
                    .round_trip
                    .as_ref()
                    .map(|d| format!("rtt p50 {}", format_duration_ns(d.p50_ns)))
                    .or_else(|| {
                        s.relative_one_way_delay
                            .as_ref()
                            .map(|d| format!("delay p99 {}", format_duration_ns(d.p99_ns)))
                    })
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {:<width$} {:>13}  loss {:>7.3}%  {delay}",
                    r.flow,
                    format_rate(s.receiver_goodput_bps),
                    s.loss_pct
                );
                if let Some(o) = &r.one_way {
                    let line = format!("  {:<width$} {}", "", one_way_text(o));
                    out.push_str(&fit::wrap(&line, width + 3));
                }
            }
            Err(e) => {
                let _ = writeln!(out, "  {:<width$} failed: {e}", r.flow);
            }
        }
    }
    let _ = writeln!(out, "  {:<width$} {:>13}", "all flows", format_rate(total));
    out
}

/// A search's trial: what was offered, for how long, and what came through.
pub fn trial_line(t: &TrialOutcome) -> String {
    let length = t
        .duration_ns
        .map(|ns| format!(" for {}", format_duration_ns(ns as f64)))
        .unwrap_or_default();
    format!(
        "trial {}: offered {}{length} -> goodput {}, loss {:.3}%",
        t.index,
        format_rate(t.offered_bps as f64),
        format_rate(t.goodput_bps),
        t.loss * 100.0
    )
}

/// The demo's first lines: where its agent listens and what it runs, within 80 columns.
pub fn demo_intro(agent: std::net::SocketAddr) -> String {
    fit::wrap(
        &format!(
            "flowlab demo: an agent on {agent}; WS2NetTest Test 1 (2 Mb/s, sizes 100-8000 B, \
             UDP and TCP, loopback) and Test 3 (round trip at {} packets/s); each row is the \
             mean of {} runs.",
            crate::demo::TEST3_PACKETS_PER_SEC,
            crate::demo::REPETITIONS
        ),
        0,
    )
}

/// The demo's last lines: where its run is stored and its report written.
pub fn demo_stored(run: flowlab_store::RunId, report: &std::path::Path) -> String {
    let text = format!(
        "Stored as run {run}. Report (round trip, loss and CPU against packet size, UDP and TCP, \
         with 95% confidence intervals): {}",
        report.display()
    );
    fit::wrap(&text, 0).trim_end().to_string()
}

/// The head of the demo's table (79 columns, as [`demo_row`]).
pub fn demo_header() -> String {
    format!(
        "{:<6} {:<4} {:>5}  {:>9} {:>9} {:>9}  {:>7}  {:>10} {:>9}",
        "test", "prot", "size", "rtt mean", "rtt p99", "rtt max", "loss", "cpu client", "cpu agent",
    )
}

/// One line of the table: means over a point's repetitions.
pub fn demo_row(name: &str, runs: &[TestResult]) -> String {
    let Some(first) = runs.first() else {
        return format!("{name:<6} (no run finished)");
    };
    let mean = |pick: &dyn Fn(&TestResult) -> Option<f64>| {
        let values: Vec<f64> = runs.iter().filter_map(pick).collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let rtt = |f: fn(&flowlab_stats::LatencySummary) -> f64| {
        mean(&|r: &TestResult| r.summary.round_trip.as_ref().map(f))
            .map_or("-".into(), format_duration_ns)
    };
    let cpu = |f: fn(&TestResult) -> Option<&RoleCpu>| {
        mean(&|r: &TestResult| f(r).map(RoleCpu::total_pct))
            .map_or("-".into(), |v| format!("{v:.1}%"))
    };
    let protocol = protocol_name(first.spec.protocol);
    format!(
        "{:<6} {:<4} {:>5}  {:>9} {:>9} {:>9}  {:>6.2}%  {:>10} {:>9}",
        name,
        protocol,
        first.spec.size,
        rtt(|d| d.mean_ns),
        rtt(|d| d.p99_ns),
        rtt(|d| d.max_ns),
        mean(&|r: &TestResult| Some(r.summary.loss_pct)).unwrap_or(0.0),
        cpu(|r| r.summary.client_role_cpu.as_ref()),
        cpu(|r| r.summary.agent_role_cpu.as_ref()),
    )
}

/// `flowlab lab up`'s report: the lab's hosts, and how to use and remove it.
pub fn lab_up(state: &LabState) -> String {
    format!(
        "lab {} is up:\n{}run commands with `flowlab lab exec HOST -- CMD`; remove it with `flowlab lab down {}`\n",
        state.name,
        state.table(),
        state.name
    )
}

/// `flowlab lab down`'s report: the labs removed and the processes stopped.
pub fn lab_down(report: &DownReport) -> String {
    let mut out = String::new();
    if report.labs.is_empty() {
        out.push_str("no labs\n");
    }
    for l in &report.labs {
        let _ = writeln!(out, "lab {l} is down");
    }
    if report.processes > 0 {
        let _ = writeln!(out, "stopped {} processes", report.processes);
    }
    out
}

/// `flowlab lab status`: each lab, its file, any problem, and its hosts (or namespaces).
pub fn lab_status(labs: &[LabSummary]) -> String {
    let mut out = String::new();
    if labs.is_empty() {
        out.push_str("no labs\n");
    }
    for (i, l) in labs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let file = l
            .state
            .as_ref()
            .and_then(|s| s.file.as_deref())
            .map(|f| format!(" ({f})"))
            .unwrap_or_default();
        let _ = writeln!(out, "lab {}{file}", l.name);
        if let Some(p) = &l.problem {
            let _ = writeln!(out, "  problem: {p}");
        }
        match &l.state {
            Some(s) => out.push_str(&s.table()),
            None => {
                for ns in &l.namespaces {
                    let _ = writeln!(out, "  {ns}");
                }
            }
        }
    }
    out
}

/// What an agent says as it starts: where it listens, and the limits a stranger's test
/// meets.
pub fn agent_banner(local: std::net::SocketAddr, config: &AgentConfig) -> String {
    let limits = &config.limits;
    let rate = limits
        .max_rate_bps
        .map_or("unlimited rate".into(), |r| format_rate(r as f64));
    let c = &config.connections;
    use flowlab_control::agent::{HANDSHAKE_TIMEOUT, START_TIMEOUT};
    format!(
        "flowlab agent {} listening on {local}{}\n\
         limits: {rate} and {} per test, {} flows each, {} tests at once\n  \
         (--max-rate, --max-duration: 'unlimited' lifts; --max-flows, --max-tests)\n\
         connections in setup: {} at once, {} per source; {} s from connecting to the request, \
         {} s from acceptance to start\n  (--max-connections, --max-connections-per-source)\n",
        env!("CARGO_PKG_VERSION"),
        if config.key.is_some() {
            " (key required)"
        } else {
            ""
        },
        format_duration_ns(limits.max_duration.as_nanos() as f64),
        limits.max_flows,
        limits.max_tests,
        c.max_connections,
        c.max_per_source,
        HANDSHAKE_TIMEOUT.as_secs(),
        START_TIMEOUT.as_secs(),
    )
}

/// What an agent says as it stops: what it served.
pub fn agent_stopping(stats: &AgentStats) -> String {
    use std::sync::atomic::Ordering::Relaxed;
    format!(
        "flowlab agent stopping: {} connections ({} more turned away), {} tests run, {} refused, {} malformed control connections",
        stats.sessions.load(Relaxed),
        stats.turned_away.load(Relaxed),
        stats.tests_run.load(Relaxed),
        stats.refused.load(Relaxed),
        stats.malformed_control.load(Relaxed)
    )
}

/// An emulated lab's counters kept with a run (`flowlab_emu::EmuReport`, or why they could
/// not be read): per link direction, the emulator's own figures and each stage's.
fn emulator_text(stored: &Value) -> String {
    let report = match serde_json::from_value::<flowlab_emu::EmuReport>(stored.clone()) {
        Ok(r) => r,
        Err(_) => {
            let why = stored["error"].as_str().unwrap_or("an unreadable report");
            return format!("emulator  counters not kept: {why}\n");
        }
    };
    let mut out =
        "emulator  counts over the run (largest depths and release errors since the lab came up)\n"
            .to_string();
    for d in report.links.iter().flat_map(|l| &l.directions) {
        let drops = &d.emulator_drops;
        let own = drops.store_full + drops.egress_full + drops.send_errors + drops.ingress_overflow;
        let _ = write!(
            out,
            "  {} {} → {}: frames {} in, {} out, {} late, {own} dropped by the emulator",
            d.link, d.from, d.to, d.frames_received, d.frames_sent, d.late
        );
        if drops.veth_dropped > 0 {
            let _ = write!(
                out,
                ", {} by the veth before it read them",
                drops.veth_dropped
            );
        }
        if let Some(e) = &d.release_error {
            let _ = write!(
                out,
                "; release error p50 {}, p99 {}, max {}",
                format_duration_ns(e.p50_ns),
                format_duration_ns(e.p99_ns),
                format_duration_ns(e.max_ns)
            );
        }
        out.push('\n');
        for s in &d.stages {
            let _ = writeln!(out, "    {}", stage_text(s));
        }
        if let Some(last) = d.depth.last() {
            let _ = writeln!(
                out,
                "    depth: {} samples to {:.1} s, deepest {:?}",
                d.depth.len(),
                last.t_ms as f64 / 1e3,
                deepest(&d.depth)
            );
        }
    }
    out
}

/// One stage's line: frames, drops by cause, largest backlog, and for ATM its cells and VCs.
fn stage_text(s: &flowlab_link::StageReport) -> String {
    let dropped: Vec<String> = s.dropped.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let mut line = format!(
        "{}: frames {} in, {} out, dropped [{}], deepest {} {}",
        s.stage,
        s.frames_in,
        s.frames_out,
        dropped.join(", "),
        s.max_depth,
        s.depth_unit
    );
    if let Some(c) = &s.cells {
        let _ = write!(
            line,
            "; cells {} in, {} out, dropped: policer {}, buffer full {}, EPD {}, PPD {}, CLP {}, line {}",
            c.cells_in, c.cells_out, c.policed_dropped, c.dropped_buffer_full, c.dropped_epd, c.dropped_ppd, c.dropped_clp, c.lost_on_line
        );
        for vc in &c.vcs {
            let _ = write!(
                line,
                "\n      vc {} ({}): cells {} in, {} out, {} dropped; frames {} in, {} out",
                vc.name,
                vc.service,
                vc.cells_in,
                vc.cells_out,
                vc.cells_dropped,
                vc.frames_in,
                vc.frames_out
            );
        }
    }
    for c in &s.classes {
        let _ = write!(
            line,
            "\n      class {}: {} queued, {} sent, {} dropped, {} out of profile",
            c.name, c.enqueued, c.sent, c.dropped, c.out_of_profile
        );
    }
    line
}

/// Each stage's largest depth over the samples.
fn deepest(samples: &[flowlab_emu::report::DepthSample]) -> Vec<u64> {
    let stages = samples.iter().map(|s| s.depth.len()).max().unwrap_or(0);
    (0..stages)
        .map(|i| {
            samples
                .iter()
                .filter_map(|s| s.depth.get(i))
                .copied()
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// `flowlab compare`: the runs compared, then per flow a row per metric (its label from the
/// metric table, wrapped to what the figures leave of 80 columns) with each run's value and
/// each later run's difference from the first (relative, in points for percentages).
pub fn comparison_table(c: &crate::compare::Comparison) -> String {
    let mut out = String::new();
    for r in &c.runs {
        let network = r.network.as_deref().unwrap_or("network not recorded");
        out += &fit::wrap(&format!("run {:<5} {} on {network}", r.run, r.kind), 10);
    }
    let first = c.runs.first().map_or(0, |r| r.run);
    let mut head: Vec<String> = c.runs.iter().map(|r| format!("run {}", r.run)).collect();
    head.extend(
        c.runs
            .iter()
            .skip(1)
            .map(|r| format!("{} − {first}", r.run)),
    );
    for f in &c.flows {
        let rows: Vec<(String, Vec<String>)> = f
            .metrics
            .iter()
            .map(|m| {
                let metric = flowlab_report::describe(&m.metric);
                let values = m.values.iter().map(|v| v.map(|v| metric.format(v)));
                let differences = (m.differences.iter()).map(|d| d.map(|d| difference(&metric, d)));
                let cells = values.chain(differences);
                let cells = cells.map(|c| c.unwrap_or("—".into())).collect();
                (metric.label.clone(), cells)
            })
            .collect();
        let _ = writeln!(out, "\n{} ({})", flow_heading(&f.flow), f.protocol);
        out += &comparison_rows(&head, &rows);
    }
    out
}

/// A compared flow's key for people: numeric parameters with a unit by label and in that
/// unit ("offered_bps=1764000.0" reads "total offered load 1.76 Mbit/s"), the rest as they are.
fn flow_heading(key: &str) -> String {
    let words = key.split(' ').map(|word| {
        let Some((name, value)) = word.split_once('=') else {
            return word.to_string();
        };
        let param = flowlab_report::describe(name);
        match value.parse::<f64>() {
            Ok(v) if param.unit != flowlab_report::Unit::Count => {
                format!("{} {}", param.label, param.format(v))
            }
            _ => word.to_string(),
        }
    });
    words.collect::<Vec<_>>().join(", ")
}

/// The rows of one flow under `head`: labels left, wrapped to the width the cells leave.
fn comparison_rows(head: &[String], rows: &[(String, Vec<String>)]) -> String {
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            let cells = rows.iter().map(|(_, cells)| cells[i].chars().count());
            cells.chain([head[i].chars().count()]).max().unwrap_or(0)
        })
        .collect();
    let figures: usize = widths.iter().map(|w| w + 2).sum();
    let longest = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let label_width = longest.min(fit::WIDTH.saturating_sub(2 + figures)).max(16);
    let line = |label: &str, cells: &[String]| {
        let mut text = format!("  {label:<label_width$}");
        for (cell, w) in cells.iter().zip(&widths) {
            let _ = write!(text, "  {cell:>w$}");
        }
        text.trim_end().to_string() + "\n"
    };
    let mut out = line("metric", head);
    for (label, cells) in rows {
        let lines = fit::wrap_to(label, label_width);
        out += &line(&lines[0], cells);
        for more in &lines[1..] {
            out += &line(more, &[]);
        }
    }
    out
}

/// A later run's difference from the first: relative, in points for a percentage, or in the
/// metric's unit where the first value is 0.
fn difference(metric: &flowlab_report::Metric, d: crate::compare::Difference) -> String {
    let sign = if d.absolute < 0.0 { "-" } else { "+" };
    match (metric.unit, d.relative_pct) {
        (flowlab_report::Unit::Percent, _) => format!("{sign}{:.3} pt", d.absolute.abs()),
        (_, Some(r)) => format!("{r:+.1} %"),
        (_, None) => format!("{sign}{}", metric.format(d.absolute.abs())),
    }
}

/// A flag parser's error as one line: its first line without its own `error: ` prefix, the
/// next line too when the first ends in a colon, and its suggestions ("tip: a similar
/// argument exists: '--duration'") as "did you mean ...?".
pub fn one_line_error(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let line = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("error: ");
    let line = match line.ends_with(':') {
        true => format!("{line} {}", lines.next().unwrap_or_default()),
        false => line.to_string(),
    };
    let similar = text.lines().filter_map(|l| {
        let tip = l.trim().strip_prefix("tip: a similar ")?;
        Some(tip.split_once(" exists: ")?.1)
    });
    let similar: Vec<&str> = similar.collect();
    match similar.is_empty() {
        true => line,
        false => format!("{line}: did you mean {}?", similar.join(" or ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_store::{Environment, RunStatus};

    /// A result of `spec` with `summary` and nothing else, as a test of the text wants.
    /// A result whose summary is set by hand, as the formatting under test sees it.
    fn bare_result(spec: TestSpec, summary: flowlab_control::Summary2) -> TestResult {
        let origin = flowlab_control::Origin {
            target: "a".into(),
            agent_address: "127.0.0.1:9470".into(),
            ipv6: false,
            started_at_ns: 0,
        };
        TestResult {
            summary,
            ..TestResult::new(spec, origin, None, None)
        }
    }

    #[test]
    fn a_drift_whose_bound_is_wider_than_any_clock_is_not_shown_as_a_figure() {
        assert_eq!(drift_text(Some((7.49, 12.5))), "drift +7.49 ± 12.50 ppm");
        assert_eq!(
            drift_text(Some((57346.71, 128645.78))),
            "drift not yet known (the probes bound it only to ± 128646 ppm)"
        );
    }

    #[test]
    fn a_compared_flows_parameters_read_in_their_units() {
        assert_eq!(
            flow_heading("flow=premium offered_bps=1764000.0 #2"),
            "flow=premium, total offered load 1.76 Mbit/s, #2"
        );
        assert_eq!(flow_heading("step=3 tag=x"), "step=3, tag=x");
    }

    #[test]
    fn a_parsers_error_in_one_line() {
        let unknown = "error: unexpected argument '--x' found\n\n  tip: ...\n\nUsage: flowlab";
        assert_eq!(one_line_error(unknown), "unexpected argument '--x' found");
        let close = "error: unexpected argument '--durration' found\n\n  tip: a similar argument exists: '--duration'\n\nUsage: flowlab";
        assert_eq!(
            one_line_error(close),
            "unexpected argument '--durration' found: did you mean '--duration'?"
        );
        let listed = "error: the following required arguments were not provided:\n  <TARGET>\n";
        assert_eq!(
            one_line_error(listed),
            "the following required arguments were not provided: <TARGET>"
        );
        assert_eq!(one_line_error(""), "");
    }

    /// The demo's text fits in 80 columns, its rows under its header's columns.
    #[test]
    fn the_demo_fits_in_80_columns() {
        let agent = "127.0.0.1:37567".parse().unwrap();
        let mut spec = TestSpec::new(Protocol::Tcp, Direction::Loopback);
        spec.size = 8000;
        let summary = flowlab_control::Summary2 {
            round_trip: Some(delays(81_600.0, 11_700_000.0)),
            loss_pct: 100.0,
            ..Default::default()
        };
        let result = bare_result(spec, summary);
        let report = std::path::Path::new("/tmp/a/rather/long/directory/name/flowlab-demo.html");
        let header = demo_header();
        let row = demo_row("test1", &[result]);
        let text = [
            demo_intro(agent),
            header.clone(),
            row.clone(),
            demo_stored(7, report),
        ];
        for line in text.join("\n").lines() {
            assert!(line.chars().count() <= 80, "{line}");
        }
        assert!(demo_intro(agent).contains("mean of 3 runs"));
        assert_eq!(
            header.chars().count(),
            row.chars().count(),
            "{header}\n{row}"
        );
        assert!(row.contains("100.00%") && row.contains("11.7 ms"), "{row}");
    }

    #[test]
    fn formats_utc_times() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00");
        assert_eq!(
            format_time(1_795_331_874_473_394_538),
            "2026-11-22 07:17:54"
        );
        assert_eq!(
            format_time(951_782_400 * 1_000_000_000),
            "2000-02-29 00:00:00"
        );
    }

    fn delays(min_ns: f64, max_ns: f64) -> LatencySummary {
        LatencySummary {
            count: 200,
            min_ns,
            mean_ns: (min_ns + max_ns) / 2.0,
            max_ns,
            variance_ns2: 0.0,
            stddev_ns: 0.0,
            p50_ns: min_ns,
            p90_ns: max_ns,
            p99_ns: max_ns,
            p999_ns: max_ns,
            peak_to_peak_ns: max_ns - min_ns,
        }
    }

    /// Issue 12: the largest transfer delay, and with `--echo-every` the echoes' round trips
    /// from departure and from the schedule, each said for what it is.
    #[test]
    fn an_echoed_load_shows_its_round_trips_and_largest_delays() {
        let mut spec = TestSpec::new(Protocol::Udp, Direction::Oneway);
        spec.echo_every = Some(10);
        let summary = flowlab_control::Summary2 {
            relative_one_way_delay: Some(delays(0.0, 1_500_000.0)),
            round_trip: Some(delays(200_000.0, 2_000_000.0)),
            round_trip_from_schedule: Some(delays(210_000.0, 5_000_000.0)),
            echoes: Some(flowlab_stats::SeqCounts {
                received: 199,
                unique: 199,
                lost: 1,
                reordered: 0,
                duplicates: 0,
            }),
            ..Default::default()
        };
        let result = bare_result(spec, summary);
        let text = render(&result);
        // A labelled line with the lines it goes on in.
        let line = |start: &str| {
            let lines: Vec<&str> = text.lines().collect();
            let at = (lines.iter().position(|l| l.trim_start().starts_with(start)))
                .unwrap_or_else(|| panic!("no '{start}' in\n{text}"));
            let going_on = lines[at + 1..].iter().take_while(|l| l.starts_with("    "));
            std::iter::once(lines[at])
                .chain(going_on.map(|l| l.trim_start()))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert!(line("echoes").contains("199 of 200 due (every 10th packet"));
        assert!(line("round trip").contains("max 2.00 ms"), "{text}");
        assert!(line("rtt from schedule").contains("max 5.00 ms"), "{text}");
        assert_eq!(
            line("max delay").trim(),
            "max delay          one-way 1.50 ms above the fastest packet; round trip 2.00 ms"
        );
        assert_eq!(
            [1, 2, 3, 11, 12, 22, 101].map(ordinal),
            ["1st", "2nd", "3rd", "11th", "12th", "22nd", "101st"]
        );
    }

    /// Live interval lines fit 80 columns with their widest figures, TCP's on a line of its own.
    #[test]
    fn interval_lines_fit_80_columns() {
        let slow = 123_456_789.0; // ns: "123 ms"
        let delay = LatencySummary {
            count: 1,
            min_ns: slow,
            mean_ns: slow,
            max_ns: slow,
            variance_ns2: 0.0,
            stddev_ns: 0.0,
            p50_ns: slow,
            p90_ns: slow,
            p99_ns: slow,
            p999_ns: slow,
            peak_to_peak_ns: 0.0,
        };
        let tcp = flowlab_results::TcpInfoReport {
            rtt_us: 123_456,
            rttvar_us: 0,
            snd_cwnd: 1_000_000,
            total_retrans: 1_000_000,
            pacing_rate_bps: 0,
            delivery_rate_bps: 0,
            snd_mss: 1448,
        };
        let r = IntervalReport {
            index: 999,
            start_ns: 99_000_000_000,
            end_ns: 100_000_000_000,
            packets: 0,
            bytes: 0,
            lost: 999_999,
            reordered: 0,
            throughput_bps: 999.9e9,
            packets_per_sec: 999.9e6,
            delay: Some(delay),
            jitter_ns: slow,
            tcp_info: Some(tcp),
            schedule_error: None,
        };
        let text = format!("{}\n{}", interval_header(false), interval_line(&r));
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            text.ends_with("tcp rtt 123 ms  cwnd 1000000  retransmits 1000000"),
            "{text}"
        );
        let header_width = interval_header(false).chars().count();
        let line_width = text.lines().nth(1).unwrap().chars().count();
        assert_eq!(header_width, line_width, "{text}");
    }

    /// Issue 12: `--flows 100 --rate 800k` was announced as "800 kbit/s".
    #[test]
    fn offered_rate_is_per_flow_and_summed() {
        let mut spec = TestSpec::new(flowlab_spec::Protocol::Udp, flowlab_spec::Direction::Oneway);
        spec.rate_bps = Some(800_000);
        spec.flows = 100;
        let text = offered(&spec);
        assert!(
            text.starts_with("800 kbit/s × 100 flows (80.0 Mbit/s) in 1200 B packets"),
            "{text}"
        );
        spec.flows = 1;
        assert!(
            offered(&spec).starts_with("800 kbit/s in"),
            "{}",
            offered(&spec)
        );
    }

    /// Issue 12: `--traffic poisson:pps=2000,...` (12.3 Mbit/s sent) was announced as
    /// "1.00 Mbit/s in 1200 B packets".
    #[test]
    fn a_model_is_announced_by_what_it_offers() {
        let mut spec = TestSpec::new(flowlab_spec::Protocol::Udp, flowlab_spec::Direction::Oneway);
        spec.traffic =
            Some(flowlab_traffic::TrafficSpec::parse("poisson:pps=2000,size=768").unwrap());
        let text = offered(&spec);
        // 2000 packets/s of 768 B: 12.3 Mbit/s, give or take the Poisson draw.
        assert!(text.starts_with("a traffic model offering 12."), "{text}");
        assert!(
            text.ends_with("Mbit/s on average for 10.0 s") || text.contains("on average for 10"),
            "{text}"
        );
        assert!(!text.contains("1200 B"), "{text}");
    }

    /// Issue 12: 6 points × 2 repetitions were announced as "12 points stored".
    #[test]
    fn counts_points_and_repetitions_apart() {
        let run = |reps: &[u32]| flowlab_store::Run {
            info: RunInfo {
                id: 1,
                kind: "sweep".into(),
                created_at_ns: 0,
                finished_at_ns: None,
                status: RunStatus::Complete,
                params: serde_json::json!({}),
                env: Environment::default(),
                points: 0,
            },
            points: reps
                .iter()
                .enumerate()
                .flat_map(|(point, &n)| {
                    (0..n).map(move |rep| flowlab_store::Point {
                        id: 1 + i64::from(rep) + 10 * point as i64,
                        params: serde_json::json!({ "size": point }),
                        repetition: rep,
                        result: serde_json::Value::Null,
                        metrics: Vec::new(),
                        packets: 0,
                    })
                })
                .collect(),
        };
        assert_eq!(stored_count(&run(&[2; 6])), "6 points × 2 repetitions");
        assert_eq!(stored_count(&run(&[1, 1])), "2 points");
        assert_eq!(stored_count(&run(&[1])), "1 point");
        assert_eq!(stored_count(&run(&[3, 2])), "2 points, 5 tests");
    }

    #[test]
    fn describes_sweeps() {
        let info = RunInfo {
            id: 1,
            kind: "sweep".into(),
            created_at_ns: 0,
            finished_at_ns: None,
            status: RunStatus::Complete,
            params: serde_json::json!({"target": "h", "vary": ["size=1..2:1"]}),
            env: Environment::default(),
            points: 0,
        };
        assert_eq!(describe(&info), "h; vary size=1..2:1");
        let table = history_table(&[info]);
        assert_eq!(table.lines().count(), 2, "{table}");
        assert!(table
            .lines()
            .nth(1)
            .unwrap()
            .ends_with("h; vary size=1..2:1"));
    }

    #[test]
    fn describes_experiments_with_their_network() {
        let info = RunInfo {
            id: 2,
            kind: "experiment".into(),
            created_at_ns: 0,
            finished_at_ns: None,
            status: RunStatus::Complete,
            params: serde_json::json!({"experiment": "e", "network": {"kind": "lab", "name": "three"}}),
            env: Environment::default(),
            points: 0,
        };
        assert_eq!(describe(&info), "e on lab three");
        let run = Run {
            info,
            points: Vec::new(),
        };
        assert!(show_run(&run, &[]).contains("\nnetwork   lab three\n"));
    }
    #[test]
    fn cpu_lines_show_the_role_total_with_the_spin_apart_and_the_process_sum() {
        let role = RoleCpu {
            user_pct: 67.04,
            system_pct: 32.9,
            pacing_spin_pct: 68.7,
            cpu_ns: 2_998_000_000,
            wall_ns: 3_000_000_000,
            ns_per_packet: Some(48_000.0),
        };
        let cpu = CpuLoad {
            process_user_pct: 0.0,
            process_system_pct: 101.5,
            host_pct: 53.3,
            host_softirq_pct: 3.25,
            host_softirq_per_cpu_pct: vec![6.1, 0.4],
            cores: 2,
            process_max_rss_bytes: 14 << 20,
        };
        assert_eq!(
            cpu_lines("CPU client (vm)", Some(&cpu), Some(&role)),
            "  CPU client (vm)    99.9% of one core in its test threads (67.0% user + 32.9% system), of which pacing spin 68.7%; 48.0 µs CPU per packet\n\
             \x20                    process 101.5%, peak memory 14.0 MiB; host 53.3% busy of 2 cores, softirq 3.2%, busiest CPU 6.1% (host-wide)\n"
        );
        assert_eq!(
            cpu_lines("CPU agent (b)", None, None),
            "  CPU agent (b)      test threads unknown\n"
        );
    }

    #[test]
    fn socket_drops_are_exact_or_bounded() {
        let drops = |exact, buffers, most| {
            socket_drops_text(&Summary2 {
                lost_at_receiver_socket: exact,
                receive_buffers_dropped: buffers,
                lost_at_receiver_socket_max: most,
                ..Summary2::default()
            })
        };
        assert_eq!(drops(Some(0), Some(0), Some(0)), "0");
        assert_eq!(
            drops(None, Some(3), Some(100)),
            "3 to 100 (3 GRO receive buffers of up to 64 datagrams)"
        );
        assert_eq!(
            drops(None, None, None),
            "unknown (the kernel does not tell)"
        );
    }
}
