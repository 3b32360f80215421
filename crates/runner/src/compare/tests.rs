use super::*;
use flowlab_store::{Environment, RunInfo, RunStatus};
use serde_json::json;

fn point(params: Value, repetition: u32, metrics: &[(&str, f64)]) -> Point {
    Point {
        id: 1,
        params,
        repetition,
        result: Value::Null,
        metrics: metrics.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
        packets: 0,
    }
}

fn run(id: RunId, network: Value, points: Vec<Point>) -> Run {
    Run {
        info: RunInfo {
            id,
            kind: "experiment".into(),
            created_at_ns: 0,
            finished_at_ns: None,
            status: RunStatus::Complete,
            params: json!({ "experiment": "x", "network": network }),
            env: Environment::default(),
            points: points.len() as u64,
        },
        points,
    }
}

fn bulk(goodput: f64, loss: f64) -> Point {
    point(
        json!({"flow": "bulk", "step": 1}),
        0,
        &[
            ("goodput_bps", goodput),
            ("loss_pct", loss),
            ("cpu_client_pct", 3.0),
        ],
    )
}

#[test]
fn flows_line_up_by_label_and_differ_from_the_first_run() {
    let sim = json!({"kind": "sim", "file": "n.toml", "name": "n", "sha256": "ab"});
    let lab = json!({"kind": "lab", "name": "t"});
    let probe = point(
        json!({"flow": "probe", "step": 1}),
        0,
        &[("delay_p50_us", 95_000.0)],
    );
    let a = run(1, sim, vec![bulk(5_000_000.0, 0.0), probe]);
    let b = run(2, lab, vec![bulk(4_750_000.0, 0.5)]);
    let c = Comparison::of(&[a, b]).unwrap();
    assert_eq!(
        c.runs[0].network.as_deref(),
        Some("sim n.toml (n, sha256 ab)")
    );
    assert_eq!(c.runs[1].network.as_deref(), Some("lab t"));
    assert_eq!(c.flows.len(), 2);
    assert_eq!(c.flows[0].flow, "flow=bulk step=1");
    // Only the compared metrics, in their order: CPU is not one.
    let names: Vec<&str> = c.flows[0]
        .metrics
        .iter()
        .map(|m| m.metric.as_str())
        .collect();
    assert_eq!(names, ["goodput_bps", "loss_pct"]);
    let goodput = &c.flows[0].metrics[0];
    assert_eq!(goodput.values, [Some(5_000_000.0), Some(4_750_000.0)]);
    let d = goodput.differences[0].unwrap();
    assert_eq!(d.absolute, -250_000.0);
    assert_eq!(d.relative_pct, Some(-5.0));
    // Loss from 0: an absolute difference, no relative one.
    let loss = c.flows[0].metrics[1].differences[0].unwrap();
    assert_eq!((loss.absolute, loss.relative_pct), (0.5, None));
    // A flow only the first run has: its value, no difference.
    let delay = &c.flows[1].metrics[0];
    assert_eq!(delay.values, [Some(95_000.0), None]);
    assert_eq!(delay.differences, [None]);
}

#[test]
fn tcp_flows_are_compared_on_goodput_and_loss_only() {
    let tcp = |goodput: f64| {
        let mut p = bulk(goodput, 0.0);
        p.result = json!({"spec": {"protocol": "tcp"}});
        p.metrics.push(("delay_p50_us".into(), 2e6));
        p.metrics.push(("packets_sent".into(), 72.0));
        run(1, Value::Null, vec![p])
    };
    let c = Comparison::of(&[tcp(4.97e6), tcp(4.98e6)]).unwrap();
    assert_eq!(c.flows[0].protocol, "tcp");
    let names: Vec<&str> = c.flows[0]
        .metrics
        .iter()
        .map(|m| m.metric.as_str())
        .collect();
    assert_eq!(names, TCP_METRICS);
}

#[test]
fn repetitions_are_flows_of_their_own() {
    let twice = |g: f64| {
        let mut second = bulk(g * 2.0, 0.0);
        second.repetition = 1;
        run(7, Value::Null, vec![bulk(g, 0.0), second])
    };
    let c = Comparison::of(&[twice(1.0), twice(3.0), twice(2.0)]).unwrap();
    let labels: Vec<&str> = c.flows.iter().map(|f| f.flow.as_str()).collect();
    assert_eq!(labels, ["flow=bulk step=1", "flow=bulk step=1 #1"]);
    assert_eq!(
        c.flows[1].metrics[0].values,
        [Some(2.0), Some(6.0), Some(4.0)]
    );
    assert_eq!(c.flows[1].metrics[0].differences.len(), 2);
    assert_eq!(c.runs[0].network, None);
}

#[test]
fn too_few_or_too_many_runs_or_an_empty_one_are_refused() {
    let r = |id| run(id, Value::Null, vec![bulk(1.0, 0.0)]);
    let one = Comparison::of(&[r(1)]).unwrap_err().to_string();
    assert_eq!(one, "compare takes 2 or 3 runs, not 1");
    assert!(Comparison::of(&[r(1), r(2), r(3), r(4)]).is_err());
    let empty = Comparison::of(&[r(1), run(9, Value::Null, vec![])]).unwrap_err();
    assert_eq!(empty.to_string(), "run 9 has no results to compare");
}

#[test]
fn the_table_shows_values_and_differences() {
    let lab = json!({"kind": "lab", "name": "t"});
    let a = run(3, Value::Null, vec![bulk(5_000_000.0, 0.0)]);
    let b = run(4, lab, vec![bulk(4_750_000.0, 0.25)]);
    let text = crate::format::comparison_table(&Comparison::of(&[a, b]).unwrap());
    assert!(
        text.contains("run 3     experiment on network not recorded"),
        "{text}"
    );
    assert!(text.contains("run 4     experiment on lab t"), "{text}");
    assert!(text.contains("4 − 3"), "{text}");
    // Labels and units from the metric table, not the stored names.
    assert!(!text.contains('_'), "{text}");
    let goodput = text.lines().find(|l| l.contains("goodput")).unwrap();
    assert_eq!(
        goodput,
        "  goodput           5 Mbit/s  4.75 Mbit/s     -5.0 %"
    );
    let loss = text.lines().find(|l| l.contains("packet loss")).unwrap();
    assert!(loss.ends_with(" 0 %       0.25 %  +0.250 pt"), "{loss}");
}

/// Three runs with delays fit 80 columns: long labels wrap, times read in µs.
#[test]
fn three_runs_fit_80_columns() {
    let probe = |id: RunId, p50_us: f64, p99_us: f64| {
        let metrics = [("delay_p50_us", p50_us), ("delay_p99_us", p99_us)];
        let params = json!({"flow": "probe"});
        run(id, Value::Null, vec![point(params, 0, &metrics)])
    };
    let runs = [
        probe(1, 52.5, 310.0),
        probe(2, 53.0, 2_480.0),
        probe(3, 0.0, 312.0),
    ];
    let text = crate::format::comparison_table(&Comparison::of(&runs).unwrap());
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    let rows = [
        "  metric                              run 1    run 2   run 3     2 − 1     3 − 1",
        "  median relative one-way delay     52.5 µs    53 µs     0 s    +1.0 %  -100.0 %",
        "  99th percentile relative one-way   310 µs  2.48 ms  312 µs  +700.0 %    +0.6 %",
        "  delay",
    ];
    assert!(text.ends_with(&(rows.join("\n") + "\n")), "{text}");
    assert!(!text.contains(" us"), "{text}");
}

#[test]
fn compares_runs_from_the_database() {
    let dir = std::env::temp_dir().join(format!("flowlab-compare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("h.sqlite3");
    let mut store = crate::record::open_store(Some(&db)).unwrap();
    let mut ids = Vec::new();
    for goodput in [1e6, 2e6] {
        let mut active = store
            .start_run("experiment", &json!({}), &Environment::default())
            .unwrap();
        let id = active.id();
        let metrics = [("goodput_bps".to_string(), goodput)];
        let point = json!({"flow": "f"});
        active
            .add_point(id, &point, 0, &json!({}), &metrics, None)
            .unwrap();
        active.finish(RunStatus::Complete).unwrap();
        ids.push(id);
    }
    drop(store);
    let c = compare(Some(&db), &ids).unwrap();
    assert_eq!(c.flows[0].metrics[0].values, [Some(1e6), Some(2e6)]);
    assert!(compare(Some(&db), &[ids[0], 999]).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}
