//! `flowlab reproduce --emulated`: a row measured on its lab through real sockets and the
//! emulator. Root and iproute2 are needed; without them the test says it was skipped.

mod common;

use common::FLOWLAB;
use flowlab_runner::reproduce::{self, emulated};

/// Seed 001's RFC 1323 row on the transatlantic lab (its experiment: three TCP trials of
/// 10 s over the 6 Mb/s, 190 ms PVC, run three times) lands, as the median of its three
/// runs, within its tolerance of the simulated value.
#[test]
fn an_emulated_row_lands_within_its_tolerance_of_the_simulated_value() {
    if !flowlab_netns::netns_or_skip("an_emulated_row_lands_within_its_tolerance") {
        return;
    }
    let item = "Table 1: RFC 1323 TCP, 140000-byte buffer, 6 Mb/s PVC";
    let plan = emulated::planned(|i| i == item);
    assert_eq!(plan.len(), 1, "one lab answers the row");
    let run_dir = std::env::temp_dir().join(format!("flowlab-repro-{}", std::process::id()));
    let how = emulated::Emulation {
        exe: FLOWLAB.into(),
        run_dir: run_dir.clone(),
        tag: (std::process::id() % 1000).to_string(),
    };
    let measured = emulated::measure(&plan, &how, &mut |_| {}).unwrap();
    let _ = std::fs::remove_dir_all(run_dir);
    assert!(measured.failures.is_empty(), "{:?}", measured.failures);
    let data = measured.data;
    let cell = data.cell(item).expect("the row measured");
    assert_eq!(cell.runs.len(), 3, "one value per repetition");
    let lab = cell.value;
    let rows = reproduce::outcomes(&["001"], |r| r.item == item).unwrap();
    let simulated = rows[0].simulated.unwrap();
    let probe = plan[0].1[0];
    assert_eq!(
        probe.agrees(lab, simulated),
        Some(true),
        "emulated {lab} Mb/s against simulated {simulated} Mb/s"
    );
    assert_eq!(data.runs.len(), 1);
}
