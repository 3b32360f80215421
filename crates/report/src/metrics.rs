//! The flat metrics of a test result: the figures people sweep and plot, each a named number
//! with its unit in the name, computed from the `TestResult` JSON so old stored documents work
//! without the code that wrote them.

use serde_json::Value;

use crate::stats::{Estimate, Method};
use crate::ReportError;

/// Short names users type for the most common metrics.
pub const ALIASES: [(&str, &[&str]); 6] = [
    ("rtt", &["rtt_mean_us"]),
    ("delay", &["delay_mean_us"]),
    ("loss", &["loss_pct"]),
    ("cpu", &["cpu_client_pct", "cpu_agent_pct"]),
    ("throughput", &["goodput_bps"]),
    ("jitter", &["jitter_us"]),
];

/// What a metric's number counts, for axis ticks and column headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Bits per second.
    BitsPerSec,
    /// Seconds (time metrics are stored in µs; `Metric::scale` brings them to seconds).
    Seconds,
    /// A percentage, never SI-prefixed.
    Percent,
    /// Per second: packets/s, transactions/s.
    PerSec,
    /// Bytes.
    Bytes,
    /// A plain count.
    Count,
    /// A number in whatever unit its label names ("window (kB)"), never prefixed.
    Plain,
}

impl Unit {
    /// The symbol after an SI prefix on a tick: "350 µs", "2 M" (bit/s is in the axis label).
    pub fn tick_symbol(self) -> &'static str {
        match self {
            Unit::Seconds => "s",
            Unit::Bytes => "B",
            _ => "",
        }
    }

    /// The symbol after a value's SI prefix in a table cell: "9.5 Mbit/s", "250 /s".
    pub fn symbol(self) -> &'static str {
        match self {
            Unit::PerSec => "/s",
            unit => unit.name(),
        }
    }

    /// The unit as a column header or axis label names it, "" when the label says it all.
    pub fn name(self) -> &'static str {
        match self {
            Unit::BitsPerSec => "bit/s",
            Unit::Seconds => "s",
            Unit::Percent => "%",
            Unit::PerSec => "1/s",
            Unit::Bytes => "B",
            Unit::Count | Unit::Plain => "",
        }
    }

    /// Whether ticks take SI prefixes (percentages and plain numbers do not).
    pub fn si(self) -> bool {
        !matches!(self, Unit::Percent | Unit::Plain)
    }
}

/// A metric as people read it: the one description plots, tables and CSV headers share.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: String,
    /// Human label: "mean round-trip time".
    pub label: String,
    pub unit: Unit,
    /// Stored value × scale = value in `unit` (µs metrics: 1e-6).
    pub scale: f64,
}

impl Metric {
    /// The unit of the stored number: "µs" or "ns" for time metrics, else the unit's name.
    pub fn stored_unit(&self) -> &'static str {
        match self.unit {
            Unit::Seconds if self.scale == 1e-6 => "µs",
            Unit::Seconds if self.scale == 1e-9 => "ns",
            unit => unit.name(),
        }
    }

    /// A stored number in the metric's unit, SI-prefixed: "53.5 µs", "9.5 Mbit/s", "0.5 %".
    pub fn format(&self, stored: f64) -> String {
        crate::axis::value(stored * self.scale, self.unit)
    }

    /// A mean over repetitions with its interval, like `fmt_estimate` but in the metric's
    /// unit under one prefix, with the digits the interval's width shows: "53.5 ± 3.5 µs",
    /// "0.200 (0.046–0.981) %" where the interval is lopsided.
    pub fn format_estimate(&self, e: &Estimate) -> String {
        let [mean, low, high] = [e.mean, e.ci_low, e.ci_high].map(|v| v * self.scale);
        let closer = (mean - low).min(high - mean);
        let resolution = if closer > 0.0 { closer } else { high - low };
        let values = [mean, low, high, e.half_width() * self.scale];
        let (n, unit) = crate::axis::shared(&values, resolution, self.unit);
        let unit = if unit.is_empty() {
            unit
        } else {
            format!(" {unit}")
        };
        match e.method {
            Method::None => format!("{}{unit}", n[0]),
            m if m.symmetric() => format!("{} ± {}{unit}", n[0], n[3]),
            _ => format!("{} ({}–{}){unit}", n[0], n[1], n[2]),
        }
    }

    /// A column of stored numbers (tables, CSV): "goodput (bit/s)", "mean round-trip time
    /// (µs)", "packets lost".
    pub fn heading(&self) -> String {
        with_unit(&self.label, self.stored_unit())
    }

    /// An axis label: the unit only where the ticks do not carry it ("goodput (bit/s)", but
    /// "mean round-trip time" beside ticks of "350 µs").
    pub fn axis_label(&self) -> String {
        match self.unit.tick_symbol() {
            "" => with_unit(&self.label, self.unit.name()),
            _ => self.label.clone(),
        }
    }
}

fn with_unit(label: &str, unit: &str) -> String {
    match unit {
        "" => label.to_string(),
        unit => format!("{label} ({unit})"),
    }
}

/// Metrics, and the numeric parameters sweeps store (rates in bit/s, sizes in bytes,
/// durations in seconds), named one by one: name, label, unit.
const NAMED: &[(&str, &str, Unit)] = &[
    ("loss_pct", "packet loss", Unit::Percent),
    ("packets_sent", "packets sent", Unit::Count),
    ("packets_received", "packets received", Unit::Count),
    ("packets_lost", "packets lost", Unit::Count),
    ("lost_by_sender", "packets lost by the sender", Unit::Count),
    ("reordered", "packets reordered", Unit::Count),
    ("duplicates", "duplicate packets", Unit::Count),
    (
        "sender_throughput_bps",
        "sender throughput",
        Unit::BitsPerSec,
    ),
    ("goodput_bps", "goodput", Unit::BitsPerSec),
    (
        "wire_throughput_bps",
        "throughput on the wire",
        Unit::BitsPerSec,
    ),
    ("packets_per_sec", "packet rate", Unit::PerSec),
    ("jitter_us", "jitter (RFC 3550)", Unit::Seconds),
    ("loss_periods", "loss periods", Unit::Count),
    ("loss_period_mean", "mean loss period", Unit::Count),
    ("loss_period_max", "longest loss period", Unit::Count),
    ("echoes", "echoes", Unit::Count),
    ("echoes_lost", "echoes lost", Unit::Count),
    ("transactions", "transactions", Unit::Count),
    ("transactions_per_sec", "transaction rate", Unit::PerSec),
    ("transaction_timeouts", "transaction timeouts", Unit::Count),
    ("transaction_errors", "transaction errors", Unit::Count),
    ("request_bytes", "request bytes", Unit::Bytes),
    ("response_bytes", "response bytes", Unit::Bytes),
    ("cpu_client_pct", "client CPU", Unit::Percent),
    ("cpu_agent_pct", "agent CPU", Unit::Percent),
    (
        "cpu_pacing_spin_client_pct",
        "client pacing spin CPU",
        Unit::Percent,
    ),
    (
        "cpu_pacing_spin_agent_pct",
        "agent pacing spin CPU",
        Unit::Percent,
    ),
    (
        "cpu_ns_per_packet_client",
        "client CPU per packet",
        Unit::Seconds,
    ),
    (
        "cpu_ns_per_packet_agent",
        "agent CPU per packet",
        Unit::Seconds,
    ),
    ("host_cpu_client_pct", "client host CPU", Unit::Percent),
    ("host_cpu_agent_pct", "agent host CPU", Unit::Percent),
    (
        "host_cpu_softirq_client_pct",
        "client host softirq CPU",
        Unit::Percent,
    ),
    (
        "host_cpu_softirq_agent_pct",
        "agent host softirq CPU",
        Unit::Percent,
    ),
    ("rate_bps", "offered load", Unit::BitsPerSec),
    ("offered_bps", "total offered load", Unit::BitsPerSec),
    ("throughput_bps", "throughput", Unit::BitsPerSec),
    ("rate", "offered rate", Unit::BitsPerSec),
    ("size", "packet size", Unit::Bytes),
    ("duration", "test duration", Unit::Seconds),
];

/// Families of time metrics, `{prefix}_{stat}_us`: prefix and what it measures.
const TIMES: [(&str, &str); 8] = [
    ("rtt", "round-trip time"),
    ("rtt_from_schedule", "round-trip time from the schedule"),
    ("delay", "relative one-way delay"),
    ("schedule_error", "schedule error"),
    ("transaction", "transaction latency"),
    ("connect", "connect time"),
    ("ipdv", "IPDV"),
    ("inter_arrival", "inter-arrival time"),
];

/// Statistics of a time family: key in the name, the JSON field, and the label's word.
const STATS: [(&str, &str, &str); 8] = [
    ("mean", "mean_ns", "mean"),
    ("min", "min_ns", "minimum"),
    ("max", "max_ns", "maximum"),
    ("stddev", "stddev_ns", "std. dev. of"),
    ("p50", "p50_ns", "median"),
    ("p90", "p90_ns", "90th percentile"),
    ("p99", "p99_ns", "99th percentile"),
    ("p999", "p999_ns", "99.9th percentile"),
];

/// Stored value × this = seconds, for time metrics: their names say µs (`_us`) or ns
/// (`_ns`, `_ns_per_...`).
fn stored_scale(name: &str) -> f64 {
    if name.ends_with("_us") {
        1e-6
    } else if name.ends_with("_ns") || name.contains("_ns_per_") {
        1e-9
    } else {
        1.0
    }
}

/// The description of a metric (or numeric parameter) by its name; an unknown name is its
/// own label, a plain count.
pub fn describe(name: &str) -> Metric {
    let metric = |label: String, unit, scale| Metric {
        name: name.to_string(),
        label,
        unit,
        scale,
    };
    if let Some((_, label, unit)) = NAMED.iter().find(|(n, _, _)| *n == name) {
        return metric(label.to_string(), *unit, stored_scale(name));
    }
    let time = name.strip_suffix("_us").and_then(|stem| {
        // The longest family first: "rtt_from_schedule" before "rtt".
        TIMES
            .iter()
            .filter_map(|(prefix, what)| {
                let stat = stem.strip_prefix(prefix)?.strip_prefix('_')?;
                let (_, _, word) = STATS.iter().find(|(key, _, _)| *key == stat)?;
                Some((prefix.len(), format!("{word} {what}")))
            })
            .max_by_key(|(len, _)| *len)
    });
    match time {
        Some((_, label)) => metric(label, Unit::Seconds, 1e-6),
        None => metric(name.replace('_', " "), Unit::Count, 1.0),
    }
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut v = v;
    for k in path {
        v = v.get(k)?;
    }
    v.as_f64().filter(|x| x.is_finite())
}

/// Extracts the metrics of one `TestResult` document. Absent figures are left out.
pub fn extract(result: &Value) -> Vec<(String, f64)> {
    let s = result.get("summary").unwrap_or(&Value::Null);
    let mut out: Vec<(String, f64)> = Vec::new();
    let mut put = |name: &str, v: Option<f64>| {
        if let Some(v) = v {
            out.push((name.to_string(), v));
        }
    };
    for (name, field) in [
        ("loss_pct", "loss_pct"),
        ("packets_sent", "packets_sent"),
        ("packets_received", "packets_received"),
        ("packets_lost", "packets_lost"),
        ("lost_by_sender", "lost_by_sender"),
        ("reordered", "reordered"),
        ("duplicates", "duplicates"),
        ("sender_throughput_bps", "sender_throughput_bps"),
        ("goodput_bps", "receiver_goodput_bps"),
        ("wire_throughput_bps", "receiver_wire_throughput_bps"),
        ("packets_per_sec", "receiver_packets_per_sec"),
    ] {
        put(name, num(s, &[field]));
    }
    put("jitter_us", num(s, &["jitter_ns"]).map(|x| x / 1e3));
    let periods = s.get("loss_periods").unwrap_or(&Value::Null);
    put("loss_periods", num(periods, &["periods"]));
    put("loss_period_mean", num(periods, &["mean_length"]));
    put("loss_period_max", num(periods, &["max_length"]));
    put("echoes", num(s, &["echoes", "unique"]));
    put("echoes_lost", num(s, &["echoes", "lost"]));
    let t = s.get("transactions").unwrap_or(&Value::Null);
    for (name, field) in [
        ("transactions", "transactions"),
        ("transactions_per_sec", "transactions_per_sec"),
        ("transaction_timeouts", "timeouts"),
        ("transaction_errors", "errors"),
        ("request_bytes", "request_bytes"),
        ("response_bytes", "response_bytes"),
    ] {
        put(name, num(t, &[field]));
    }
    // The families of `TIMES`, where each is in the document.
    for (prefix, parent, field) in [
        ("rtt", s, "round_trip"),
        ("rtt_from_schedule", s, "round_trip_from_schedule"),
        ("delay", s, "relative_one_way_delay"),
        ("schedule_error", s, "schedule_error"),
        ("transaction", t, "latency"),
        ("connect", t, "connect"),
        ("ipdv", s, "ipdv"),
        ("inter_arrival", s, "inter_arrival_distribution"),
    ] {
        for (stat, key, _) in STATS {
            put(
                &format!("{prefix}_{stat}_us"),
                num(parent, &[field, key]).map(|x| x / 1e3),
            );
        }
    }
    // A role's CPU is user + system of its threads, pacing spin included (shown apart).
    for (end, role_cpu, cpu) in [
        ("client", "client_role_cpu", "client_cpu"),
        ("agent", "agent_role_cpu", "agent_cpu"),
    ] {
        let role = s.get(role_cpu).filter(|c| !c.is_null());
        let total = role
            .map(|c| num(c, &["user_pct"]).unwrap_or(0.0) + num(c, &["system_pct"]).unwrap_or(0.0));
        put(&format!("cpu_{end}_pct"), total);
        put(
            &format!("cpu_pacing_spin_{end}_pct"),
            role.and_then(|c| num(c, &["pacing_spin_pct"])),
        );
        put(
            &format!("cpu_ns_per_packet_{end}"),
            role.and_then(|c| num(c, &["ns_per_packet"])),
        );
        put(&format!("host_cpu_{end}_pct"), num(s, &[cpu, "host_pct"]));
        put(
            &format!("host_cpu_softirq_{end}_pct"),
            num(s, &[cpu, "host_softirq_pct"]),
        );
    }
    out
}

/// Metrics of one live interval (`IntervalReport` JSON), for time series.
pub fn interval_metrics(interval: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for (name, field, scale) in [
        ("goodput_bps", "throughput_bps", 1.0),
        ("packets_per_sec", "packets_per_sec", 1.0),
        ("packets_lost", "lost", 1.0),
        ("reordered", "reordered", 1.0),
        ("jitter_us", "jitter_ns", 1e-3),
    ] {
        if let Some(v) = num(interval, &[field]) {
            out.push((name.to_string(), v * scale));
        }
    }
    for (stat, key) in [
        ("mean", "mean_ns"),
        ("p50", "p50_ns"),
        ("p99", "p99_ns"),
        ("max", "max_ns"),
    ] {
        if let Some(v) = num(interval, &["delay", key]) {
            out.push((format!("delay_{stat}_us"), v / 1e3));
        }
    }
    out
}

/// Resolves what a user asked for (`rtt,loss,cpu`, or exact names) against the metrics a run
/// has; an unknown one is an error listing what is available.
pub fn resolve(requested: &[String], available: &[String]) -> Result<Vec<String>, ReportError> {
    let mut out = Vec::new();
    for r in requested {
        let r = r.trim();
        let candidates: Vec<String> = match ALIASES.iter().find(|(a, _)| *a == r) {
            Some((_, names)) if !available.iter().any(|a| a == r) => names
                .iter()
                .filter(|n| available.iter().any(|a| a == *n))
                .map(|n| n.to_string())
                .collect(),
            _ => available.iter().filter(|a| *a == r).cloned().collect(),
        };
        if candidates.is_empty() {
            return Err(ReportError::NoSuchMetric {
                name: r.to_string(),
                available: available.join(", "),
            });
        }
        for c in candidates {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// Like `resolve`, but skips what the run lacks: for default metric lists shown when present.
pub fn resolve_lenient(requested: &[String], available: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for r in requested {
        for name in resolve(std::slice::from_ref(r), available).unwrap_or_default() {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extracts_summary_figures() {
        let r = json!({"summary": {
            "loss_pct": 1.5, "packets_sent": 100, "jitter_ns": 2000.0,
            "round_trip": {"mean_ns": 50000.0, "p99_ns": 90000.0},
            "round_trip_from_schedule": {"max_ns": 3000000.0},
            "echoes": {"unique": 199, "lost": 1},
            "relative_one_way_delay": null,
            "client_role_cpu": {"user_pct": 10.0, "system_pct": 5.0, "pacing_spin_pct": 4.0,
                "cpu_ns": 150000000, "wall_ns": 1000000000, "ns_per_packet": 1500.0},
            "agent_role_cpu": null,
            "client_cpu": {"process_user_pct": 12.0, "process_system_pct": 6.0,
                "host_pct": 30.0, "host_softirq_pct": 2.5, "cores": 2},
            "transactions": {"transactions": 500, "transactions_per_sec": 250.0,
                "latency": {"p50_ns": 3000.0}, "connect": null}
        }});
        let m = extract(&r);
        let get = |n: &str| m.iter().find(|(k, _)| k == n).map(|(_, v)| *v);
        assert_eq!(get("loss_pct"), Some(1.5));
        assert_eq!(get("packets_sent"), Some(100.0));
        assert_eq!(get("jitter_us"), Some(2.0));
        assert_eq!(get("rtt_mean_us"), Some(50.0));
        assert_eq!(get("rtt_p99_us"), Some(90.0));
        assert_eq!(get("rtt_from_schedule_max_us"), Some(3000.0));
        assert_eq!(
            (get("echoes"), get("echoes_lost")),
            (Some(199.0), Some(1.0))
        );
        assert_eq!(get("delay_mean_us"), None);
        // The role's CPU includes the pacing spin, which is shown apart, never subtracted.
        assert_eq!(get("cpu_client_pct"), Some(15.0));
        assert_eq!(get("cpu_pacing_spin_client_pct"), Some(4.0));
        assert_eq!(get("cpu_ns_per_packet_client"), Some(1500.0));
        assert_eq!(get("host_cpu_client_pct"), Some(30.0));
        assert_eq!(get("host_cpu_softirq_client_pct"), Some(2.5));
        assert_eq!(get("cpu_agent_pct"), None);
        assert_eq!(get("cpu_ns_per_packet_agent"), None);
        assert_eq!(get("transactions_per_sec"), Some(250.0));
        assert_eq!(get("transaction_p50_us"), Some(3.0));
        assert_eq!(get("connect_p50_us"), None);
        assert!(extract(&json!({})).is_empty());
        // Each figure extracted is in the metric table, none labelled by its raw name.
        for (name, _) in &m {
            assert!(
                !describe(name).label.contains('_'),
                "{name} is not in the table"
            );
        }
    }

    #[test]
    fn the_metric_table_names_label_unit_and_scale() {
        let rtt = describe("rtt_mean_us");
        assert_eq!(
            (rtt.label.as_str(), rtt.unit, rtt.scale),
            ("mean round-trip time", Unit::Seconds, 1e-6)
        );
        assert_eq!(
            describe("rtt_from_schedule_p99_us").label,
            "99th percentile round-trip time from the schedule"
        );
        assert_eq!(describe("jitter_us").scale, 1e-6);
        let per_packet = describe("cpu_ns_per_packet_client");
        assert_eq!(per_packet.heading(), "client CPU per packet (ns)");
        assert_eq!(per_packet.scale, 1e-9);
        assert_eq!(describe("goodput_bps").heading(), "goodput (bit/s)");
        assert_eq!(rtt.heading(), "mean round-trip time (µs)");
        assert_eq!(rtt.axis_label(), "mean round-trip time");
        assert_eq!(describe("goodput_bps").axis_label(), "goodput (bit/s)");
        assert_eq!(describe("duration").heading(), "test duration (s)");
        assert_eq!(describe("loss_pct").heading(), "packet loss (%)");
        assert_eq!(describe("packets_lost").heading(), "packets lost");
        assert_eq!(describe("size").unit, Unit::Bytes);
        assert_eq!(rtt.format(53.5), "53.5 µs");
        assert_eq!(describe("goodput_bps").format(9.5e6), "9.5 Mbit/s");
        assert_eq!(per_packet.format(1500.0), "1.5 µs");
        assert_eq!(describe("rtt_bogus_us").label, "rtt bogus us");
        // Every metric a result yields is in the table, none falls back to its raw name.
        for name in [
            "rtt",
            "rtt_from_schedule",
            "delay",
            "schedule_error",
            "transaction",
        ]
        .iter()
        .flat_map(|p| STATS.map(|(s, _, _)| format!("{p}_{s}_us")))
        .chain(NAMED.iter().map(|(n, _, _)| n.to_string()))
        {
            let m = describe(&name);
            assert!(!m.label.contains('_') && !m.label.contains(" us"), "{name}");
        }
    }

    #[test]
    fn estimates_read_in_the_metric_unit() {
        let e = |mean, ci_low, ci_high, method| Estimate {
            n: 3,
            mean,
            stddev: 1.0,
            ci_low,
            ci_high,
            method,
        };
        let rtt = describe("rtt_mean_us");
        assert_eq!(
            rtt.format_estimate(&e(53.5, 50.0, 57.0, Method::StudentT)),
            "53.5 ± 3.5 µs"
        );
        assert_eq!(
            describe("loss_pct").format_estimate(&e(0.2, 0.0458, 0.981, Method::Wilson)),
            "0.200 (0.046–0.981) %"
        );
        assert_eq!(
            rtt.format_estimate(&e(900.0, 900.0, 900.0, Method::None)),
            "900 µs"
        );
        let goodput = describe("goodput_bps");
        assert_eq!(
            goodput.format_estimate(&e(2.0e6, 1.9998e6, 2.0008e6, Method::Bootstrap)),
            "2.0000 (1.9998–2.0008) Mbit/s"
        );
        let lost = describe("packets_lost");
        assert_eq!(
            lost.format_estimate(&e(0.0, 0.0, 0.0, Method::StudentT)),
            "0 ± 0"
        );
    }

    #[test]
    fn resolves_aliases_and_lists_metrics_on_error() {
        let have: Vec<String> = ["loss_pct", "rtt_mean_us", "cpu_client_pct", "cpu_agent_pct"]
            .map(String::from)
            .to_vec();
        let want: Vec<String> = ["rtt", "loss", "cpu"].map(String::from).to_vec();
        assert_eq!(
            resolve(&want, &have).unwrap(),
            vec!["rtt_mean_us", "loss_pct", "cpu_client_pct", "cpu_agent_pct"]
        );
        assert_eq!(
            resolve_lenient(&["jitter".to_string(), "loss".to_string()], &have),
            vec!["loss_pct"]
        );
        let e = resolve(&["goodput".to_string()], &have).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the run has no metric 'goodput'; it has: loss_pct, rtt_mean_us, cpu_client_pct, cpu_agent_pct"
        );
    }
}
