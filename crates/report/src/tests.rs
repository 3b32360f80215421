use super::*;
use flowlab_store::Environment;
use serde_json::json;

fn sweep() -> (Store, Run) {
    let mut s = Store::open_in_memory().unwrap();
    let run = s
        .begin_run("sweep", &json!({}), &Environment::default())
        .unwrap();
    for (size, proto, rep, rtt) in [
        (100, "udp", 0, 10.0),
        (100, "udp", 1, 12.0),
        (200, "udp", 0, 20.0),
        (100, "tcp", 0, 30.0),
    ] {
        s.add_point(
            run,
            &json!({"size": size, "proto": proto}),
            rep,
            &json!({}),
            &[("rtt_mean_us".into(), rtt)],
            None,
        )
        .unwrap();
    }
    let r = s.load_run(run).unwrap();
    (s, r)
}

#[test]
fn aggregates_repetitions_in_point_order() {
    let (_, run) = sweep();
    assert_eq!(swept_params(&run), vec!["proto", "size"]);
    let rows = aggregate(&run, &[]);
    assert_eq!(rows.len(), 3);
    let e = rows[1].estimates[0].1;
    assert_eq!((e.n, e.mean), (2, 11.0));
    // Sorted by proto, then size.
    assert_eq!(rows[0].params, json!({"size": 100, "proto": "tcp"}));
    assert_eq!(rows[1].params, json!({"size": 100, "proto": "udp"}));
    let t = text_table(&run, &[]);
    assert!(t.lines().next().unwrap().contains("rtt_mean_us"), "{t}");
    // RTT cannot be negative: Student's 11.00 ± 12.71 stops at 0.
    assert!(t.contains("11.00 (0–23.71)"), "{t}");
    assert!(
        t.contains("95 % intervals: Student t cut at the range (rtt_mean_us)"),
        "{t}"
    );
}

#[test]
fn fmt_num_keeps_four_digits() {
    assert_eq!(fmt_num(12.706), "12.71");
    assert_eq!(fmt_num(0.5), "0.5000");
    assert_eq!(fmt_num(2_000_000.0), "2000000");
    assert_eq!(fmt_num(0.0), "0");
    assert_eq!(fmt_num(1e12), "1.000e12");
}

#[test]
fn plotting_unknown_things_says_what_exists() {
    let (s, run) = sweep();
    let req = |kind, x: Option<&str>, y: &str| PlotRequest {
        kind,
        x: x.map(String::from),
        ys: vec![y.to_string()],
        by: Vec::new(),
        point: None,
        scales: Scales::default(),
    };
    let e = plot(&s, &run, &req(PlotKind::Lines, Some("size"), "loss")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the run has no metric 'loss'; it has: rtt_mean_us"
    );
    let e = plot(&s, &run, &req(PlotKind::Lines, Some("rate"), "rtt")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the run has no parameter 'rate'; its points vary: proto, size"
    );
    let e = plot(&s, &run, &req(PlotKind::Lines, Some("proto"), "rtt")).unwrap_err();
    assert!(e.to_string().contains("not numeric"), "{e}");
    let e = plot(&s, &run, &req(PlotKind::Histogram, None, "rtt")).unwrap_err();
    assert!(e.to_string().contains("no packet log"), "{e}");
    let e = plot(&s, &run, &req(PlotKind::TimeSeries, None, "rtt")).unwrap_err();
    assert!(e.to_string().contains("no live intervals"), "{e}");
    // Default x: the first numeric swept parameter.
    let figure = plot(&s, &run, &req(PlotKind::Lines, None, "rtt")).unwrap();
    assert!(figure.svg().unwrap().starts_with("<svg"));
}

#[test]
fn plot_kinds_by_the_names_people_type() {
    assert_eq!("loss-index".parse::<PlotKind>(), Ok(PlotKind::LossIndex));
    assert_eq!("timeseries".parse::<PlotKind>(), Ok(PlotKind::TimeSeries));
    for (kind, name, _) in PlotKind::ALL {
        assert_eq!(name.parse::<PlotKind>(), Ok(kind));
    }
    let e = "pie".parse::<PlotKind>().unwrap_err();
    assert!(
        e.starts_with("unknown plot kind 'pie' (expected lines, timeseries"),
        "{e}"
    );
}

/// Time keeps a linear axis by default even when it spans decades; asked for, it is log.
#[test]
fn time_is_linear_unless_asked() {
    let mut s = Store::open_in_memory().unwrap();
    let run = s
        .begin_run("test", &json!({}), &Environment::default())
        .unwrap();
    let intervals: Vec<_> = [1u64, 60]
        .iter()
        .map(|t| json!({"end_ns": t * 1_000_000_000, "throughput_bps": 1e6}))
        .collect();
    s.add_point(
        run,
        &json!({}),
        0,
        &json!({ "intervals": intervals }),
        &[],
        None,
    )
    .unwrap();
    let run = s.load_run(run).unwrap();
    let ys = ["goodput_bps".to_string()];
    let auto = plot::timeseries(&run, &ys, Scales::default()).unwrap();
    assert_eq!(auto.x.scale, Scale::Linear);
    let asked = Scales::from_flags(Scale::Auto, true, false);
    assert_eq!(
        plot::timeseries(&run, &ys, asked).unwrap().x.scale,
        Scale::Log
    );
}

/// Without `--by`, each test is its own line: UDP's two repetitions at 100 B are averaged,
/// TCP's point is not mixed into them.
#[test]
fn lines_without_by_keep_tests_apart() {
    let (_, run) = sweep();
    assert_eq!(plot::default_by(&run, "size"), vec!["proto"]);
    let figure = plot::lines(&run, "size", &["rtt".into()], &[], Scales::default()).unwrap();
    let series: Vec<(&str, &[(f64, f64)])> = figure.panels[0]
        .series
        .iter()
        .map(|s| (s.label.as_str(), s.points.as_slice()))
        .collect();
    let us = 1e-6;
    assert_eq!(
        series,
        vec![
            ("proto=tcp", &[(100.0, 30.0 * us)][..]),
            ("proto=udp", &[(100.0, 11.0 * us), (200.0, 20.0 * us)][..]),
        ]
    );
}

/// A parameter with one value per x (a step's label beside its load) makes no lines of its own.
#[test]
fn parameters_that_follow_x_make_no_lines() {
    let mut s = Store::open_in_memory().unwrap();
    let id = s
        .begin_run("experiment", &json!({}), &Environment::default())
        .unwrap();
    for (load, step, flow) in [
        (1, "a", "f1"),
        (2, "b", "f1"),
        (1, "a", "f2"),
        (2, "b", "f2"),
    ] {
        let params = json!({"load": load, "step": step, "flow": flow});
        s.add_point(
            id,
            &params,
            0,
            &json!({}),
            &[("loss_pct".into(), 1.0)],
            None,
        )
        .unwrap();
    }
    let run = s.load_run(id).unwrap();
    assert_eq!(plot::default_by(&run, "load"), vec!["flow"]);
}

#[test]
fn the_interval_note_names_each_metric_once() {
    let estimate = |method| Estimate {
        n: 3,
        mean: 1.0,
        stddev: 1.0,
        ci_low: 0.0,
        ci_high: 2.0,
        method,
    };
    let row = |methods: [(&str, stats::Method); 3]| PointStats {
        params: json!({}),
        estimates: methods
            .iter()
            .map(|&(name, m)| (name.to_string(), estimate(m)))
            .collect(),
    };
    use stats::Method::{StudentT, StudentTCut, Wilson};
    let rows = [
        row([("rtt", StudentT), ("cpu", StudentTCut), ("loss", Wilson)]),
        row([("rtt", StudentTCut), ("cpu", StudentTCut), ("loss", Wilson)]),
        row([
            ("rtt", StudentT),
            ("cpu", StudentTCut),
            ("goodput", StudentT),
        ]),
    ];
    assert_eq!(
        interval_note(&rows).unwrap(),
        "95 % intervals: Student t, cut at the range in some rows (rtt); Student t cut at \
         the range (cpu); Wilson on pooled counts (loss); Student t (goodput)"
    );
}
