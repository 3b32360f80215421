use super::*;
use flowlab_emu::report::{DepthSample, SCHEMA_VERSION};
use flowlab_emu::DirectionReport;
use flowlab_link::StageReport;

fn report(received: u64, dropped: &[(&str, u64)], max_depth: u64, samples: &[u64]) -> EmuReport {
    let mut d = DirectionReport::new("a-b", "a", "b");
    d.frames_received = received;
    d.frames_sent = received / 2;
    d.emulator_drops.store_full = received / 10;
    d.stages.push(StageReport {
        stage: "atm".into(),
        frames_in: received,
        dropped: dropped.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        max_depth,
        ..StageReport::default()
    });
    d.depth = samples
        .iter()
        .map(|&t_ms| DepthSample {
            t_ms,
            depth: vec![t_ms / 100],
        })
        .collect();
    EmuReport::from_directions([d])
}

#[test]
fn a_run_keeps_what_it_added_and_its_own_depth_samples() {
    let start = report(10, &[("loss", 2)], 5, &[100, 200]);
    let end = report(
        30,
        &[("loss", 5), ("queue_full", 1)],
        7,
        &[100, 200, 300, 400],
    );
    let share = run_share(end, &start);
    let d = &share.links[0].directions[0];
    assert_eq!((d.frames_received, d.frames_sent), (20, 10));
    assert_eq!(d.emulator_drops.store_full, 2);
    let stage = &d.stages[0];
    assert_eq!(stage.frames_in, 20);
    assert_eq!(stage.dropped["loss"], 3);
    assert_eq!(stage.dropped["queue_full"], 1);
    // Not counts: the largest depth stays, samples are the run's.
    assert_eq!(stage.max_depth, 7);
    let times: Vec<u64> = d.depth.iter().map(|s| s.t_ms).collect();
    assert_eq!(times, [300, 400]);
    assert_eq!(d.depth[0].depth, [3]);
    assert_eq!(share.schema_version, SCHEMA_VERSION);
}

#[test]
fn the_watch_reads_the_report_written_after_the_run() {
    let dir = std::env::temp_dir().join(format!("flowlab-emuwatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("emulator.json");
    assert!(
        EmulatorWatch::start(&path).finish().is_err(),
        "no report at all"
    );
    report(10, &[], 1, &[100]).write(&path).unwrap();
    let watch = EmulatorWatch::start(&path);
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            report(25, &[], 1, &[100, 200]).write(&path).unwrap();
        })
    };
    let share = watch.finish().unwrap();
    writer.join().unwrap();
    assert_eq!(share.links[0].directions[0].frames_received, 15);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn show_prints_the_kept_counters_apart_from_the_params() {
    use flowlab_store::{Environment, Run, RunInfo, RunStatus};
    let mut kept = report(20, &[("queue_full", 4)], 9, &[100, 200]);
    kept.links[0].directions[0].stages[0].cells = Some(flowlab_link::CellReport {
        cells_in: 440,
        dropped_buffer_full: 30,
        ..Default::default()
    });
    kept.links[0].directions[0].emulator_drops.veth_dropped = 7;
    let run = |emulator: Value| Run {
        info: RunInfo {
            id: 5,
            kind: "experiment".into(),
            created_at_ns: 0,
            finished_at_ns: None,
            status: RunStatus::Complete,
            params: serde_json::json!({ "experiment": "x", "emulator": emulator }),
            env: Environment::default(),
            points: 0,
        },
        points: Vec::new(),
    };
    let text = crate::format::show_run(&run(serde_json::to_value(&kept).unwrap()), &[]);
    assert!(text.contains("params    experiment x\n"), "{text}");
    assert!(
        text.contains(
            "a-b a → b: frames 20 in, 10 out, 0 late, 2 dropped by the emulator, 7 by the veth \
             before it read them"
        ),
        "{text}"
    );
    assert!(
        text.contains("atm: frames 20 in, 0 out, dropped [queue_full 4], deepest 9"),
        "{text}"
    );
    assert!(
        text.contains("cells 440 in, 0 out, dropped: policer 0, buffer full 30"),
        "{text}"
    );
    assert!(
        text.contains("depth: 2 samples to 0.2 s, deepest [2]"),
        "{text}"
    );
    let failed = crate::format::show_run(&run(serde_json::json!({"error": "no report"})), &[]);
    assert!(
        failed.contains("emulator  counters not kept: no report"),
        "{failed}"
    );
}
