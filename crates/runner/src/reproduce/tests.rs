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

/// Seed 002's Table 2: the 2048-byte ping leaves the 1500-byte MTU as two fragments.
#[test]
fn the_fragmented_ping_counts_the_cells_of_both_fragments() {
    let rows = outcomes(&["002"], |r| {
        r.item == "Table 2: cells per ping, 2048 bytes"
    })
    .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].simulated, Some(45.0));
    assert_eq!(rows[0].verdict, Verdict::Exact);
}

/// Seed 002's Table 1: with loops on the echoes' port too, every size loses more pings than
/// with the requests' port loaded alone (the requests meet the same cells in both runs).
#[test]
fn pings_lose_more_with_loops_in_both_directions() {
    let rows = outcomes(&["002"], |r| r.item.starts_with("Table 1: ping loss")).unwrap();
    let loss = |bytes: &str, loops: &str| {
        let item = format!("Table 1: ping loss, {bytes} bytes, loops in {loops}");
        let row = rows.iter().find(|o| o.row.item == item);
        row.and_then(|o| o.simulated).expect(&item)
    };
    for bytes in ["64", "128", "256", "512", "1024", "2048", "4096"] {
        let (one, both) = (loss(bytes, "one direction"), loss(bytes, "both directions"));
        assert!(both > one, "{bytes} bytes: {one} % one way, {both} % both");
    }
}

/// The 1 MiB window's goodput stays under what a 6 Mb/s PCR can carry: 9140 bytes of TCP
/// payload per 192 cells of 53 bytes.
#[test]
fn the_6_mbps_pvc_never_carries_more_than_its_aal5_ceiling() {
    let ceiling = 6.0 * 9140.0 / (192.0 * 53.0);
    let rows = outcomes(&["001"], |r| r.item == published::ONE_MIB).unwrap();
    let got = rows[0].simulated.unwrap();
    assert!(
        got <= ceiling && got > 0.9 * ceiling,
        "{got} against {ceiling}"
    );
}

/// Flow (or host) `name`'s `metric` in run 0 of a test's one scenario, `t`.
fn probe(name: &'static str, metric: Metric) -> Probe {
    Probe {
        scenario: "t",
        run: 0,
        name,
        metric,
    }
}

/// 1000-byte frames every 1 ms into a 4000-byte socket read at 3 Mb/s; the sender's CPU
/// pays 250 µs a frame, a quarter of the run.
#[test]
fn host_and_socket_metrics_read_their_reports() {
    let text = "[sim]\nduration = \"1s\"\n\
        [[node]]\nname = \"a\"\nkind = \"host\"\nsend_cost = \"250us\"\n\
        [[node]]\nname = \"s\"\nkind = \"atm-switch\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\
        [[link]]\nfrom = \"a\"\nto = \"s\"\nphy = \"OC-3c\"\n\
        [[link]]\nfrom = \"s\"\nto = \"b\"\nphy = \"OC-3c\"\n\
        [[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"raw\"\nrate = \"8M\"\n\
        size = 1000\nrecv_buffer = 4000\nread_rate = \"3M\"\n";
    let report = flowlab_sim::run(&flowlab_sim::load(text).unwrap(), None);
    let cpu = read(&report, &probe("a", Metric::HostCpuPercent)).unwrap();
    assert!((cpu - 25.0).abs() < 1e-9, "{cpu}");
    assert!(
        read(&report, &probe("b", Metric::HostCpuPercent)).is_err(),
        "no costs"
    );
    let before = read(&report, &probe("f", Metric::PacketsBeforeOverflow)).unwrap();
    // Frame k arrives k ms after the first, each is read in 2.67 ms: frame 5 finds five
    // taken and one read, 4000 bytes held.
    assert_eq!(before, 5.0);
    let fill = socket_fill(&report, &probe("f", Metric::MaxDelayMs)).unwrap();
    assert_eq!(fill[0].0, 0.1, "the first sample ends at 100 ms");
    assert!(fill.iter().take(9).all(|&(_, kb)| kb >= 3.0), "{fill:?}");
}

/// A TCP transfer of 146000 bytes done early in a 2 s run: its goodput over the run is its
/// bytes over the 2 s, far below the rate over its receiving span; a UDP flow has no TCP
/// delivery count to read.
#[test]
fn run_goodput_averages_a_tcp_flows_bytes_over_the_whole_run() {
    let text = "[sim]\nduration = \"2s\"\n\
        [[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\
        [[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"10M\"\n\
        [[flow]]\nname = \"t\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"tcp\"\nbytes = 146000\n\
        [[flow]]\nname = \"u\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"udp\"\nrate = \"1M\"\nsize = 1000\n";
    let report = flowlab_sim::run(&flowlab_sim::load(text).unwrap(), None);
    let run = read(&report, &probe("t", Metric::RunGoodputKbps)).unwrap();
    assert!((run - 146_000.0 * 8.0 / 2.0 / 1e3).abs() < 1e-9, "{run}");
    let span = read(&report, &probe("t", Metric::GoodputKbps)).unwrap();
    assert!(span > 5.0 * run, "{span} against {run}");
    assert!(read(&report, &probe("u", Metric::RunGoodputKbps)).is_err());
}

/// A UDP flow into a 1 Mb/s link at 0.5, 0.9, 2 and again 0.5 Mb/s: the knee is the last
/// rate before the first loss, the lossless total the most carried without loss, the peak
/// the most carried at all.
#[test]
fn sweep_metrics_read_every_run() {
    let text = "[sim]\nduration = \"2s\"\n\
        [[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\
        [[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nbuffer_packets = 10\n\
        [[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"udp\"\nrate = \"1M\"\nsize = 1000\n\
        [sweep]\nparam = \"flow.f.rate\"\nvalues = [\"0.5M\", \"0.9M\", \"2M\", \"0.5M\"]\n";
    let report = flowlab_sim::run(&flowlab_sim::load(text).unwrap(), None);
    let probe = |metric| Probe {
        scenario: "t",
        run: 0,
        name: "f",
        metric,
    };
    let knee = read(&report, &probe(Metric::LosslessKnee(&[0.5, 0.9, 2.0, 0.5]))).unwrap();
    assert_eq!(knee, 0.9);
    let from = read(&report, &probe(Metric::LosslessFrom(&[0.5, 0.9, 2.0, 0.5]))).unwrap();
    assert_eq!(from, 0.5, "lossless again only in the last run");
    let lossless = read(&report, &probe(Metric::LosslessTotalGoodputMbps)).unwrap();
    // Goodput counts the UDP payload: 972 of each 1000 IP bytes.
    assert!((lossless - 0.9 * 0.972).abs() < 0.01, "{lossless}");
    let peak = read(&report, &probe(Metric::PeakTotalGoodputMbps)).unwrap();
    assert!(peak > lossless && peak <= 0.972, "{peak}");
}

/// Two loopback flows across one 1 Mb/s link, 1000 and then 1400-byte packets: the round
/// trip is both ways' serialisation, so it grows by 2 × 400 bytes at 1 Mb/s (6.4 ms), and
/// the flow whose sender costs 1 ms a packet to send is 1 ms above the other.
#[test]
fn round_trip_metrics_read_the_echoes() {
    let text = "[sim]\nduration = \"2s\"\n\
        [[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\
        [[node]]\nname = \"c\"\nkind = \"host\"\nsend_cost = \"1ms\"\n\
        [[node]]\nname = \"d\"\nkind = \"host\"\n\
        [[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\n\
        [[link]]\nfrom = \"c\"\nto = \"d\"\nrate = \"1M\"\n\
        [[flow]]\nname = \"f\"\nfrom = \"a\"\nto = \"b\"\nrate = \"100k\"\nsize = 1000\nloopback = true\n\
        [[flow]]\nname = \"g\"\nfrom = \"c\"\nto = \"d\"\nrate = \"100k\"\nsize = 1000\nloopback = true\n\
        [sweep]\nparam = [\"flow.f.size\", \"flow.g.size\"]\nvalues = [\"1000B\", \"1400B\"]\n";
    let report = flowlab_sim::run(&flowlab_sim::load(text).unwrap(), None);
    let probe = |run, metric| Probe {
        scenario: "t",
        run,
        name: "g",
        metric,
    };
    let rtt = read(&report, &probe(0, Metric::RoundTripMs)).unwrap();
    assert!(
        (rtt - 17.0).abs() < 0.01,
        "16 ms on the wire, 1 ms sending: {rtt}"
    );
    let rise = read(&report, &probe(0, Metric::RoundTripRiseMs(0, 1))).unwrap();
    assert!((rise - 6.4).abs() < 0.01, "{rise}");
    let above = read(&report, &probe(1, Metric::RoundTripAboveMs("f"))).unwrap();
    assert!((above - 1.0).abs() < 0.01, "{above}");
    let no_echo = Probe {
        name: "nothing",
        ..probe(0, Metric::RoundTripMs)
    };
    assert!(read(&report, &no_echo).is_err());
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
    let fig = FIGURES.iter().find(|f| f.file == "003-tcp-cdvt").unwrap();
    let Curve::Sweep([probe, ..], xs) = fig.curve else {
        panic!("swept curves");
    };
    let report = run(probe.scenario).unwrap();
    let curve = sweep_curve(&report, probe, xs).unwrap();
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
    let o = |emulated| Outcome {
        row: &TWO,
        simulated: None,
        verdict: Verdict::NotReproduced,
        emulated,
    };
    assert_eq!(difference(Some(2.5), TWO.published), "+0.5");
    assert_eq!(difference(Some(1.5), TWO.published), "-0.5");
    assert_eq!(difference(None, TWO.published), "–");
    let range = Published::Range(1.0, 2.0);
    assert_eq!(difference(Some(2.5), range), "+0.5");
    assert_eq!(difference(Some(1.5), range), "0 (inside)");
    assert_eq!(
        emulated_cell(&o(Some(MeasuredCell::of("two", vec![1.75])))),
        "1.75 (-0.25)"
    );
    assert_eq!(
        emulated_cell(&o(None)),
        "no lab",
        "no lab answers row `two`"
    );
}

/// A row a lab answers shows its measured value, or `not run` until it is measured.
#[test]
fn an_emulated_cell_is_the_labs_value_or_not_run() {
    let row = ROWS.iter().find(|r| r.item == published::ONE_MIB).unwrap();
    let o = |emulated| Outcome {
        row,
        simulated: None,
        verdict: Verdict::NotReproduced,
        emulated,
    };
    assert_eq!(emulated_cell(&o(None)), "not run");
    assert_eq!(
        emulated_cell(&o(Some(MeasuredCell::of(row.item, vec![4.9])))),
        "4.9 (-0.14)"
    );
    let repeated = MeasuredCell::of(row.item, vec![5.01, 3.24, 5.0]);
    assert_eq!(
        emulated_cell(&o(Some(repeated))),
        "5 (-0.04), median of 3: 3.24–5.01"
    );
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
    let outcomes = outcomes(&["003"], |r| r.probe.is_none()).unwrap();
    assert!(!outcomes.is_empty());
    let figures: Vec<&Figure> = FIGURES.iter().collect();
    let md = markdown(&outcomes, &figures, &EmulatedData::default());
    assert!(md.contains("## Seed 003"));
    assert!(!md.contains("## Seed 001"), "only the seeds run");
    // Every row has its emulated column: seed 003 has no lab.
    let rows = md.lines().filter(|l| l.contains("| no lab |")).count();
    assert_eq!(rows, outcomes.len());
    // Every lab run is listed, none measured.
    let runs: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(runs.len(), LAB_RUNS.len(), "{md}");
    assert!(runs.iter().all(|l| l.contains("| not run |")), "{md}");
    let line = format!(
        "| 003 | {} | 0 | 0 | 0 | 0 | {} |",
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
        marks: &[],
        curve: Curve::Rows,
    };
    let svg = plot(&fig, &rows, Vec::new()).unwrap();
    assert!(svg.contains("published") && svg.contains("flowlab (simulated)"));
    assert!(!svg.contains("emulated"), "no lab measured the row");
    let measured = Outcome {
        emulated: Some(MeasuredCell::of("x", vec![130.0])),
        ..rows.into_iter().next().unwrap()
    };
    let svg = plot(&fig, &[measured], Vec::new()).unwrap();
    assert!(svg.contains("flowlab (emulated)"));
}

/// The checked-in docs/reproductions.md is what `flowlab reproduce` writes, as far as can be
/// told without running every scenario (which takes a minute in a debug build): every row
/// with its published value, verdict-independent text and explanation, the exact rows whole,
/// the header, and every figure's plot beside it.
#[test]
fn the_checked_in_document_is_current() {
    let docs = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/");
    let md = std::fs::read_to_string(format!("{docs}reproductions.md")).unwrap();
    assert!(
        md.starts_with(HEADER),
        "the header changed: run flowlab reproduce"
    );
    for r in ROWS {
        let start = format!(
            "| {} | {} | {} |",
            r.item,
            r.unit,
            published_text(r.published)
        );
        let end = format!("| {} |", r.explanation);
        let line = md.lines().find(|l| l.starts_with(&start));
        let line = line.unwrap_or_else(|| panic!("no row {start}: run flowlab reproduce"));
        assert!(
            line.ends_with(&end),
            "{} changed: run flowlab reproduce",
            r.item
        );
    }
    let data = EmulatedData::load(&emulated::data_path(std::path::Path::new(&format!(
        "{docs}reproductions.md"
    ))))
    .unwrap();
    let exact = outcomes(&[], |r| matches!(r.check, Check::Exact { .. })).unwrap();
    let figures: Vec<&Figure> = Vec::new();
    let generated = markdown(&exact, &figures, &data);
    for line in generated.lines().filter(|l| l.contains("| exact |")) {
        assert!(md.contains(line), "{line}: run flowlab reproduce");
    }
    // The emulated values kept beside it, and when each lab ran.
    for run in generated.lines().filter(|l| l.starts_with("| `")) {
        assert!(md.contains(run), "{run}: run flowlab reproduce");
    }
    for r in ROWS {
        let o = Outcome {
            row: r,
            simulated: None,
            verdict: Verdict::NotReproduced,
            emulated: data.cell(r.item).cloned(),
        };
        let line = md
            .lines()
            .find(|l| l.starts_with(&format!("| {} |", r.item)));
        let cell = format!("| {} |", emulated_cell(&o));
        assert!(line.unwrap().contains(&cell), "{}: {cell}", r.item);
    }
    for f in FIGURES {
        let svg = format!("{docs}reproductions/{}.svg", f.file);
        assert!(std::path::Path::new(&svg).exists(), "{svg}");
        assert!(md.contains(&format!("(reproductions/{}.svg)", f.file)));
    }
}
