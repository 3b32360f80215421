use super::*;

fn row(published: Published, check: Check) -> Row {
    Row {
        seed: "001",
        item: "an item",
        unit: "Mb/s",
        published,
        probe: None,
        check,
        explanation: "",
    }
}

/// The fast subset: every row that follows from link rates and encapsulation, run now,
/// matches its published value exactly.
#[test]
fn the_exact_rows_match_exactly() {
    let exact = outcomes(&[], |r| matches!(r.check, Check::Exact { .. })).unwrap();
    assert!(exact.len() >= 5, "{} exact rows", exact.len());
    for o in &exact {
        assert_eq!(
            o.verdict,
            Verdict::Exact,
            "{}: {:?}",
            o.row.item,
            o.simulated
        );
    }
}

#[test]
fn the_ping_that_differs_by_a_cell_is_reported_as_differing() {
    let rows = outcomes(&["002"], |r| matches!(r.check, Check::Differs)).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].simulated, Some(44.0));
    assert_eq!(difference(&rows[0]), "-1");
}

#[test]
fn verdicts_follow_the_check() {
    let exact = row(Published::Value(135.1), Check::Exact { decimals: 1 });
    assert_eq!(judge(&exact, Some(135.1019)), Verdict::Exact);
    assert_eq!(judge(&exact, Some(135.0)), Verdict::Differs);
    assert_eq!(judge(&exact, None), Verdict::NotReproduced);
    let host = row(
        Published::Value(5.04),
        Check::Within(Tolerance::Relative(0.1)),
    );
    assert_eq!(judge(&host, Some(5.5)), Verdict::Within);
    assert_eq!(judge(&host, Some(5.6)), Verdict::Outside);
    let ci = row(
        Published::Range(68.9, 73.5),
        Check::Within(Tolerance::Absolute(1.0)),
    );
    assert_eq!(judge(&ci, Some(74.4)), Verdict::Within);
    assert_eq!(judge(&ci, Some(67.8)), Verdict::Outside);
    let starved = row(Published::Text("starved"), Check::Starved);
    assert_eq!(judge(&starved, Some(3.5)), Verdict::Within);
    assert_eq!(judge(&starved, Some(86.0)), Verdict::Outside);
    let ceiling = row(Published::Value(134.1), Check::Ceiling);
    assert_eq!(judge(&ceiling, Some(135.1)), Verdict::Within);
}

#[test]
fn a_swept_figure_has_a_point_per_sweep_value() {
    let fig = FIGURES.iter().find(|f| f.sweep.is_some()).unwrap();
    let (probe, xs) = fig.sweep.unwrap();
    let curve = sweep_curve(&probe, xs).unwrap();
    assert_eq!(curve.len(), xs.len());
    // Policing by dropping with no CDVT lets no back-to-back segment through.
    assert_eq!(curve[0], (0.0, 0.0));
    assert!(curve.iter().any(|&(_, y)| y > 0.0), "{curve:?}");
}

#[test]
fn differences_carry_their_sign() {
    static TWO: Row = Row {
        seed: "001",
        item: "two",
        unit: "",
        published: Published::Value(2.0),
        probe: None,
        check: Check::NotReproduced,
        explanation: "",
    };
    let o = |simulated| Outcome {
        row: &TWO,
        simulated,
        verdict: Verdict::NotReproduced,
    };
    assert_eq!(difference(&o(Some(2.5))), "+0.5");
    assert_eq!(difference(&o(Some(1.5))), "-0.5");
    assert_eq!(difference(&o(None)), "–");
}

#[test]
fn an_unknown_seed_is_one_line() {
    let Err(e) = outcomes(&["005"], |_| true) else {
        panic!("seed 005 accepted");
    };
    assert_eq!(
        e.to_string(),
        "unknown seed 005: expected one of 000, 001, 002, 003, 004"
    );
}

#[test]
fn every_probe_names_a_scenario_and_every_figure_point_a_row() {
    for r in ROWS {
        if let Some(p) = r.probe {
            assert!(SCENARIOS.iter().any(|s| s.key == p.scenario), "{}", r.item);
        }
    }
    for f in FIGURES {
        for (_, item) in f.points {
            assert!(ROWS.iter().any(|r| r.item == *item), "{item}");
        }
    }
}

#[test]
fn the_document_has_a_row_per_published_number_and_the_figures() {
    let outcomes = outcomes(&["000"], |r| r.probe.is_none()).unwrap();
    let figures: Vec<&Figure> = FIGURES.iter().collect();
    let md = markdown(&outcomes, &figures, 3);
    assert!(md.contains("## Seed 000"));
    assert!(!md.contains("## Seed 001"), "only the seeds run");
    // Every row has its emulated column.
    let rows = md.lines().filter(|l| l.contains("| not run |")).count();
    assert_eq!(rows, outcomes.len());
    assert!(md.contains("This run took 3 s."));
    let line = format!(
        "| 000 | {} | 0 | 0 | 0 | 0 | {} |",
        outcomes.len(),
        outcomes.len()
    );
    assert!(
        md.contains(&line),
        "the summary counts every row not reproduced:\n{md}"
    );
}

#[test]
fn a_figure_plots_published_points_over_the_simulated_curve() {
    let rows = outcomes(&["001"], |r| r.item.starts_with("§3.3")).unwrap();
    let fig = Figure {
        seed: "001",
        file: "t",
        title: "t",
        x_label: "x",
        y_label: "y",
        points: &[(
            1.0,
            "§3.3: IP maximum of Classical IP (9180-byte MTU) over OC-3c",
        )],
        sweep: None,
    };
    let svg = plot(&fig, &rows, Vec::new()).unwrap();
    assert!(svg.contains("published") && svg.contains("flowlab (simulated)"));
}
