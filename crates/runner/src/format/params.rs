//! A stored run's parameters as `flowlab show` prints them: `key value` pairs in human units
//! instead of the raw JSON, wrapped to 80 columns.

use flowlab_store::plain;
use flowlab_units::{format_bytes, format_duration_ns, format_rate};
use serde_json::Value;

/// A number in the unit its key names (`rate_bps`, `duration_ns`, `send_buffer`).
fn human(key: &str, v: &Value) -> String {
    let Some(x) = v.as_f64() else {
        return match v {
            Value::Array(items) => items.iter().map(plain).collect::<Vec<_>>().join(","),
            other => plain(other),
        };
    };
    if key.ends_with("_bps") {
        format_rate(x)
    } else if key.ends_with("_ns") {
        format_duration_ns(x)
    } else if key == "size" || key.ends_with("_buffer") || key.ends_with("_bytes") {
        format_bytes(x)
    } else {
        plain(v)
    }
}

/// Leaves of `v` as `path value`, nested keys joined with dots (a test's `spec.` left out:
/// it is what every test run has); nothing for nulls and empty lists or tables.
fn leaves(path: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Null => {}
        Value::Object(m) => {
            for (k, child) in m {
                let sub = match path {
                    "" | "spec" => k.clone(),
                    p => format!("{p}.{k}"),
                };
                leaves(&sub, child, out);
            }
        }
        Value::Array(a) if a.is_empty() => {}
        Value::Array(a) if a.iter().any(Value::is_object) => {
            for (i, child) in a.iter().enumerate() {
                leaves(&format!("{path}.{i}"), child, out);
            }
        }
        leaf => {
            let key = path.rsplit('.').next().unwrap_or(path);
            out.push(format!("{path} {}", human(key, leaf)));
        }
    }
}

/// The `params` lines of `flowlab show`: `params    target h, rate_bps 2.00 Mbit/s, ...`,
/// a line broken only between pairs.
pub fn params_text(params: &Value) -> String {
    let mut parts = Vec::new();
    leaves("", params, &mut parts);
    if parts.is_empty() {
        return "params    none\n".into();
    }
    let items = parts.iter().map(String::as_str);
    flowlab_units::fit::pack("params    ", items, ", ", 10) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn in_human_units_within_80_columns() {
        let params = json!({
            "target": "127.0.0.1",
            "spec": {
                "protocol": "udp",
                "rate_bps": 2_000_000,
                "size": 1200,
                "duration_ns": 350_000u64,
                "count": null,
                "client_udp_ports": [],
                "socket": { "send_buffer": 4_194_304, "dscp": null, "zerocopy": false },
                "flows": 4,
            },
            "vary": ["size=100..1000:100", "rate=1M,2M"],
        });
        let text = params_text(&params);
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
        // Broken only between pairs.
        assert!(
            text.lines().rev().skip(1).all(|l| l.ends_with(',')),
            "{text}"
        );
        let one_line = text.replace("\n          ", " ");
        assert!(one_line.starts_with("params    "), "{text}");
        for part in [
            "target 127.0.0.1",
            "rate_bps 2.00 Mbit/s",
            "size 1.20 kB",
            "duration_ns 350 µs",
            "socket.send_buffer 4.19 MB",
            "socket.zerocopy false",
            "flows 4",
            "vary size=100..1000:100,rate=1M,2M",
        ] {
            assert!(one_line.contains(part), "{part} in {text}");
        }
        assert!(
            !one_line.contains("count") && !one_line.contains("dscp"),
            "{text}"
        );
        assert!(!one_line.contains('{'), "{text}");
        assert_eq!(params_text(&json!({})), "params    none\n");
    }
}
