//! A search's result as `flowlab run` and `flowlab show` print it: a sentence saying what
//! was found, then a table of the trials it rests on, in SI units with units in the header.

use std::fmt::Write as _;

use flowlab_experiment::{
    BackToBackResult, BufferEstimate, FrameLevelMetrics, LoadPoint, ThroughputFlag,
    ThroughputResult,
};
use flowlab_units::{format_bytes, format_duration_ns, format_rate};
use serde_json::Value;

use flowlab_report::Unit;
use flowlab_units::fit::wrap;

use super::table::{print_columns, value_column, Column};

/// The result of each kind of search, told apart by the fields each has (the stored document
/// carries no kind).
enum Found {
    Throughput(ThroughputResult),
    BackToBack(BackToBackResult),
    OfferedLoad(FrameLevelMetrics),
    BurstSize(BufferEstimate),
    LossVsLoad(Vec<LoadPoint>),
}

impl Found {
    fn of(result: &Value) -> Option<Found> {
        let has = |key: &str| result.get(key).is_some();
        Some(if has("trials") {
            Found::Throughput(decode(result)?)
        } else if has("per_search") {
            Found::BackToBack(decode(result)?)
        } else if has("peak_bps") {
            Found::OfferedLoad(decode(result)?)
        } else if has("knee_bytes") {
            Found::BurstSize(decode(result)?)
        } else {
            Found::LossVsLoad(decode(result)?)
        })
    }
}

fn decode<T: serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
    serde_json::from_value(v.clone()).ok()
}

/// A search's result: a sentence and a table, then for an RFC 2544 throughput one line per
/// reason to doubt it; a document of no known kind as it is.
pub fn search_text(result: &Value) -> String {
    let Some(found) = Found::of(result) else {
        return format!("search result: {result}\n");
    };
    let (sentence, table) = match &found {
        Found::Throughput(t) => (throughput_sentence(t), throughput_table(t)),
        Found::BackToBack(b) => (back_to_back_sentence(b), back_to_back_table(b)),
        Found::OfferedLoad(m) => (offered_load_sentence(m), load_table(&m.points)),
        Found::BurstSize(e) => (burst_sentence(e), burst_table(e)),
        Found::LossVsLoad(points) => (loss_vs_load_sentence(points), load_table(points)),
    };
    let mut out = wrap(&sentence, 0);
    out.push_str(&table);
    if let Found::Throughput(t) = &found {
        out.push_str(&throughput_warnings(t));
    }
    out
}

fn throughput_sentence(t: &ThroughputResult) -> String {
    let trial = format_duration_ns(t.trial_s * 1e9);
    let Some(found) = t.rate_bps else {
        return format!(
            "RFC 2544 throughput: none: even the lowest rate lost packets ({} trials of {trial}).",
            t.trials.len()
        );
    };
    let mut s = format!(
        "RFC 2544 throughput: {} offered passed with no loss ({} came through)",
        format_rate(found as f64),
        format_rate(t.throughput_bps.unwrap_or(0.0))
    );
    if let Some(failed) = t.failed_bps {
        let _ = write!(s, "; {} lost packets", format_rate(failed as f64));
    }
    let _ = write!(s, ". {} trials of {trial}", t.trials.len());
    if let Some(v) = &t.verification {
        let _ = write!(
            s,
            ", then {} at {}: loss {:.3} %",
            format_duration_ns(v.trial_s * 1e9),
            format_rate(v.rate_bps as f64),
            v.loss_ratio * 100.0
        );
    }
    s + "."
}

/// The bisection's trials by offered rate, so that they read as a curve.
fn throughput_table(t: &ThroughputResult) -> String {
    let mut trials = t.trials.clone();
    trials.sort_by_key(|&(offered, _, _)| offered);
    let offered: Vec<_> = trials.iter().map(|t| Some(t.0 as f64)).collect();
    let loss: Vec<_> = trials.iter().map(|t| Some(t.1 * 100.0)).collect();
    let through: Vec<_> = trials.iter().map(|t| Some(t.2)).collect();
    table(&[
        value_column("offered", Unit::BitsPerSec, &offered),
        value_column("loss", Unit::Percent, &loss),
        value_column("throughput", Unit::BitsPerSec, &through),
    ])
}

fn throughput_warnings(t: &ThroughputResult) -> String {
    let mut out = String::new();
    let found = t.rate_bps.map_or(0.0, |r| r as f64);
    for &flag in &t.flags {
        let detail = match flag {
            ThroughputFlag::ShortTrial => format!(
                "{}: a queue can hide a rate above capacity",
                format_duration_ns(t.trial_s * 1e9)
            ),
            ThroughputFlag::AboveCapacity => format!(
                "{} > {}",
                format_rate(found),
                format_rate(t.capacity_bps.unwrap_or(0.0))
            ),
            ThroughputFlag::LossAtLongerTrial => {
                t.verification.as_ref().map_or_else(String::new, |v| {
                    format!(
                        "{:.3}% over {}",
                        v.loss_ratio * 100.0,
                        format_duration_ns(v.trial_s * 1e9)
                    )
                })
            }
        };
        out.push_str(&wrap(
            &format!("warning: {} ({detail})", flag.describe()),
            9,
        ));
    }
    out
}

fn back_to_back_sentence(b: &BackToBackResult) -> String {
    format!(
        "RFC 2544 back-to-back: bursts of {:.1} packets on average at line rate without loss \
         (the mean of {} searches).",
        b.mean_packets,
        b.per_search.len()
    )
}

fn back_to_back_table(b: &BackToBackResult) -> String {
    let search: Vec<_> = (1..=b.per_search.len()).map(|i| Some(i as f64)).collect();
    let packets: Vec<_> = b.per_search.iter().map(|&p| Some(p as f64)).collect();
    table(&[
        value_column("search", Unit::Count, &search),
        value_column("longest lossless burst", Unit::Count, &packets),
    ])
}

fn offered_load_sentence(m: &FrameLevelMetrics) -> String {
    let lossless = match (m.lossless_bps, m.lossless_offered_bps) {
        (Some(through), Some(offered)) => format!(
            "throughput {} without loss (at {} offered)",
            format_rate(through),
            format_rate(offered as f64)
        ),
        _ => "every load lost packets".into(),
    };
    let full = (m.full_load_bps).map_or(String::new(), |f| {
        format!(", {} at full load", format_rate(f))
    });
    format!(
        "Offered load: {lossless}; {} at most{full}.",
        format_rate(m.peak_bps)
    )
}

fn loss_vs_load_sentence(points: &[LoadPoint]) -> String {
    let lossy = points.iter().filter(|p| p.loss_ratio > 0.0).count();
    match points.first() {
        None => "RFC 2544 frame loss rate: no trial ran.".into(),
        Some(top) => format!(
            "RFC 2544 frame loss rate: {:.3} % lost at {} ({:.0} % load); {lossy} of {} loads lost packets.",
            top.loss_ratio * 100.0,
            format_rate(top.rate_bps as f64),
            top.load_pct,
            points.len()
        ),
    }
}

/// Loss and throughput against offered load, one row per load.
fn load_table(points: &[LoadPoint]) -> String {
    let column = |head, unit, pick: fn(&LoadPoint) -> f64| {
        let values: Vec<_> = points.iter().map(|p| Some(pick(p))).collect();
        value_column(head, unit, &values)
    };
    table(&[
        column("load", Unit::Percent, |p| p.load_pct),
        column("offered", Unit::BitsPerSec, |p| p.rate_bps as f64),
        column("loss", Unit::Percent, |p| p.loss_ratio * 100.0),
        column("throughput", Unit::BitsPerSec, |p| p.throughput_bps),
    ])
}

fn burst_sentence(e: &BufferEstimate) -> String {
    let bytes = |b: Option<f64>| b.map_or("?".into(), format_bytes);
    match (e.knee_bytes, e.first_loss_bytes) {
        (Some(knee), Some(first)) => format!(
            "Burst size: no loss up to bursts of {}, loss from {}: the buffer holds at least {} \
             and less than {}.",
            format_bytes(knee as f64),
            format_bytes(first as f64),
            bytes(e.buffer_bytes),
            bytes(e.buffer_upper_bytes)
        ),
        (Some(knee), None) => format!(
            "Burst size: no burst lost packets (up to {}): the buffer holds at least {}.",
            format_bytes(knee as f64),
            bytes(e.buffer_bytes)
        ),
        (None, _) => "Burst size: even the smallest burst lost packets.".into(),
    }
}

fn burst_table(e: &BufferEstimate) -> String {
    let column = |head, unit, pick: &dyn Fn(&flowlab_experiment::BurstPoint) -> f64| {
        let values: Vec<_> = e.points.iter().map(|p| Some(pick(p))).collect();
        value_column(head, unit, &values)
    };
    table(&[
        column("burst", Unit::Bytes, &|p| p.burst_bytes as f64),
        column("packets", Unit::Count, &|p| p.burst_packets as f64),
        column("loss", Unit::Percent, &|p| p.loss_ratio * 100.0),
        column("throughput", Unit::BitsPerSec, &|p| p.throughput_bps),
    ])
}

fn table(columns: &[Column]) -> String {
    let rows = columns.first().map_or(0, |c| c.cells.len());
    let mut out = String::new();
    print_columns(&columns.iter().collect::<Vec<_>>(), rows, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fits(text: &str) {
        assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    }

    #[test]
    fn throughput_as_a_sentence_and_trials_by_rate() {
        let found = json!({
            "rate_bps": 9_757_812u64, "throughput_bps": 9_732_945.0, "failed_bps": 9_906_250u64,
            "trials": [[20_000_000u64, 0.5053, 9_732_873.0], [1_000_000u64, 0.0, 1_000_000.0],
                       [9_757_812u64, 0.0, 9_732_945.0]],
            "trial_s": 1.5, "capacity_bps": 9_732_945.0,
            "verification": {"rate_bps": 9_757_812u64, "trial_s": 3.0, "loss_ratio": 0.0,
                             "throughput_bps": 9_730_285.0},
            "flags": ["short_trial", "above_capacity"],
        });
        let text = search_text(&found);
        fits(&text);
        assert!(
            text.starts_with(
                "RFC 2544 throughput: 9.76 Mbit/s offered passed with no loss (9.73 Mbit/s came\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("; 9.91 Mbit/s lost packets. 3 trials of 1.50 s"),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let head = lines
            .iter()
            .position(|l| l.starts_with("  offered"))
            .unwrap();
        assert_eq!(
            lines[head].split_whitespace().collect::<Vec<_>>(),
            ["offered", "loss", "throughput"]
        );
        assert_eq!(
            lines[head + 1].split_whitespace().collect::<Vec<_>>(),
            ["Mbit/s", "%", "Mbit/s"]
        );
        // Sorted by offered rate, not in the bisection's order.
        assert_eq!(
            lines[head + 2].split_whitespace().collect::<Vec<_>>(),
            ["1.00", "0.00", "1.00"]
        );
        assert_eq!(
            lines[head + 4].split_whitespace().collect::<Vec<_>>(),
            ["20.0", "50.5", "9.73"]
        );
        assert!(
            text.contains(
                "warning: above the capacity the search measured (9.76 Mbit/s > 9.73 Mbit/s)\n"
            ),
            "{text}"
        );
        assert!(!text.contains('{'), "{text}");
    }

    #[test]
    fn offered_load_loss_vs_load_and_burst_size() {
        let points = json!([
            {"load_pct": 50.0, "rate_bps": 9_000_000u64, "loss_ratio": 0.0, "throughput_bps": 9e6},
            {"load_pct": 100.0, "rate_bps": 18_000_000u64, "loss_ratio": 0.441, "throughput_bps": 9.74e6},
        ]);
        let offered = json!({
            "lossless_bps": 9e6, "lossless_offered_bps": 9_000_000u64, "peak_bps": 9.74e6,
            "full_load_bps": 9.74e6, "points": points,
        });
        let text = search_text(&offered);
        fits(&text);
        assert!(text.starts_with("Offered load: throughput 9.00 Mbit/s without loss (at 9.00 Mbit/s offered);\n9.74 Mbit/s at most, 9.74 Mbit/s at full load.\n"), "{text}");
        assert!(
            text.contains("   100     18.0  44.1        9.74\n"),
            "{text}"
        );
        let text = search_text(&points);
        fits(&text);
        assert!(
            text.starts_with(
                "RFC 2544 frame loss rate: 0.000 % lost at 9.00 Mbit/s (50 % load); 1 of 2"
            ),
            "{text}"
        );
        let burst = json!({
            "knee_bytes": 64_000u64, "first_loss_bytes": 68_000u64, "buffer_bytes": 45_419.0,
            "buffer_upper_bytes": 48_258.0,
            "points": [{"burst_bytes": 64_000u64, "burst_packets": 54u64, "loss_ratio": 0.0, "throughput_bps": 35e6}],
        });
        let text = search_text(&burst);
        fits(&text);
        assert!(
            text.contains("no loss up to bursts of 64.0 kB, loss from 68.0 kB"),
            "{text}"
        );
        assert!(
            text.contains("  burst  packets  loss  throughput\n"),
            "{text}"
        );
        assert!(
            text.contains("     kB              %      Mbit/s\n"),
            "{text}"
        );
    }

    #[test]
    fn back_to_back_and_unknown_documents() {
        let text = search_text(&json!({"per_search": [40u64, 42u64], "mean_packets": 41.0}));
        assert!(
            text.starts_with("RFC 2544 back-to-back: bursts of 41.0 packets on average"),
            "{text}"
        );
        assert!(
            text.contains("\n          longest lossless\n  search             burst\n       1                40\n       2                42\n"),
            "{text}"
        );
        let odd = json!({"something": 1});
        assert_eq!(search_text(&odd), "search result: {\"something\":1}\n");
    }
}
