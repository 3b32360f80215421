use super::*;
use crate::reproduce::ROWS;
use flowlab_emu::report::EmulatorDrops;
use flowlab_emu::{DirectionReport, LinkReport, LoopProfile};
use flowlab_link::{CellReport, StageReport};

/// Every lab and experiment is valid, every probe answers a row from a flow of its lab run's
/// experiment (or a link direction of its lab), and the renamed labs fit the name limit.
#[test]
fn every_probe_reads_a_flow_of_its_experiment_for_a_row() {
    for run in LAB_RUNS {
        let spec = LabSpec::parse(run.lab).unwrap();
        assert!(
            spec.hosts.iter().any(|h| h.name == run.controller),
            "{}",
            run.key
        );
        let name = format!("rp{}{}", run.key, 999);
        assert!(name.len() <= lab::spec::MAX_NAME_LEN, "{name}");
        let experiment = flowlab_experiment::load(run.experiment).unwrap();
        let flows: Vec<String> = flowlab_experiment::plan(&experiment)
            .iter()
            .flat_map(|s| s.flows.iter().map(|f| f.name.clone()))
            .collect();
        for p in emulated_probes().filter(|p| p.run == run.key) {
            assert!(ROWS.iter().any(|r| r.item == p.item), "{}", p.item);
            match p.metric {
                Metric::PortCellLossPercent => {
                    let (from, to) = p.name.split_once('>').unwrap();
                    assert!(
                        spec.links.iter().any(|l| l.a == from && l.b == to),
                        "{}",
                        p.name
                    );
                }
                _ => assert!(flows.iter().any(|f| f == p.name), "{}: {}", run.key, p.name),
            }
        }
    }
    for p in emulated_probes() {
        assert!(LAB_RUNS.iter().any(|r| r.key == p.run), "{}", p.run);
    }
}

#[test]
fn a_plan_runs_only_the_labs_of_the_rows_chosen() {
    let plan = planned(|item| item.starts_with("Table 4, IP core"));
    let keys: Vec<&str> = plan.iter().map(|(run, _)| run.key).collect();
    assert_eq!(keys, ["aip"]);
    assert_eq!(
        plan[0].1.len(),
        6,
        "three rows with the background, three without"
    );
    assert!(planned(|_| false).is_empty());
}

fn cell(item: &str, value: f64) -> MeasuredCell {
    MeasuredCell::of(item, vec![value])
}

fn run(key: &str, measured: &str) -> MeasuredRun {
    MeasuredRun {
        key: key.into(),
        measured: measured.into(),
        load_average: Some(6.5),
        release_error_us: Some(ReleaseError {
            p99: 101.0,
            max: 1460.2,
        }),
    }
}

/// A repeated row is the median of its runs, which it keeps in order; one run keeps none.
#[test]
fn a_repeated_rows_value_is_the_median_of_its_runs() {
    let three = MeasuredCell::of("r", vec![5.0, 3.24, 5.01]);
    assert_eq!(
        (three.value, three.runs.as_slice()),
        (5.0, &[3.24, 5.0, 5.01][..])
    );
    assert_eq!(MeasuredCell::of("r", vec![4.0, 2.0]).value, 3.0);
    assert!(MeasuredCell::of("r", vec![4.0]).runs.is_empty());
    let text = serde_json::to_string(&MeasuredCell::of("r", vec![4.0])).unwrap();
    assert_eq!(
        text, r#"{"item":"r","value":4.0}"#,
        "one run: the old format"
    );
}

/// A new measurement replaces the old one's runs and rows and keeps the others, the runs in
/// the order of `LAB_RUNS`; the file round-trips, and a missing file is nothing measured.
#[test]
fn a_measurement_replaces_what_it_measured_again() {
    let mut data = EmulatedData {
        runs: vec![run("aip", "old"), run("atl", "old")],
        cells: vec![cell("a", 1.0), cell("b", 2.0)],
    };
    data.merge(EmulatedData {
        runs: vec![run("aip", "new")],
        cells: vec![cell("b", 3.0)],
    });
    assert_eq!(data.runs, [run("atl", "old"), run("aip", "new")]);
    let value = |item| data.cell(item).map(|c| c.value);
    assert_eq!((value("a"), value("b")), (Some(1.0), Some(3.0)));
    assert_eq!(data.run("aip"), Some(&run("aip", "new")));
    assert_eq!(value("c"), None);
    let dir = std::env::temp_dir().join(format!("flowlab-emulated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(DATA_FILE);
    assert_eq!(EmulatedData::load(&path).unwrap(), EmulatedData::default());
    data.save(&path).unwrap();
    assert_eq!(EmulatedData::load(&path).unwrap(), data);
    std::fs::write(&path, "{").unwrap();
    let e = EmulatedData::load(&path).unwrap_err().to_string();
    assert!(e.ends_with("not an emulated-values file"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

fn direction(from: &str, to: &str, cells: Option<CellReport>) -> DirectionReport {
    let value = serde_json::json!({
        "link": format!("{from}-{to}"), "from": from, "to": to,
        "frames_received": 0, "frames_sent": 0, "late": 0,
        "emulator_drops": EmulatorDrops::default(),
        "stages": [StageReport { cells, ..StageReport::default() }],
        "depth": [], "profile": LoopProfile::default(),
    });
    serde_json::from_value(value).unwrap()
}

#[test]
fn a_ports_cell_loss_counts_every_cause_over_the_cells_offered() {
    let cells = CellReport {
        cells_in: 1000,
        dropped_buffer_full: 30,
        dropped_epd: 10,
        lost_on_line: 2,
        ..CellReport::default()
    };
    let report = EmuReport {
        schema_version: 1,
        links: vec![LinkReport {
            name: "r-ws2".into(),
            directions: vec![
                direction("ws2", "r", None),
                direction("r", "ws2", Some(cells)),
            ],
        }],
    };
    assert_eq!(port_cell_loss(&report, "r>ws2").unwrap(), 4.2);
    let e = port_cell_loss(&report, "ws2>r").unwrap_err().to_string();
    assert_eq!(e, "ws2>r has no ATM stage");
    let e = port_cell_loss(&report, "a>b").unwrap_err().to_string();
    assert_eq!(e, "no emulated link direction a>b");
}
