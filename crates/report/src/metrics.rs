//! The flat metrics of a test result: the figures people sweep and plot, each a named number
//! with its unit in the name, computed from the `TestResult` JSON so old stored documents work
//! without the code that wrote them.

use serde_json::Value;

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
        for (stat, key) in [
            ("mean", "mean_ns"),
            ("min", "min_ns"),
            ("max", "max_ns"),
            ("stddev", "stddev_ns"),
            ("p50", "p50_ns"),
            ("p90", "p90_ns"),
            ("p99", "p99_ns"),
            ("p999", "p999_ns"),
        ] {
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
