//! The user-space link emulator between lab hosts: real frames through the simulator's
//! models. Root and iproute2 are needed; without them each test says it was skipped.

mod common;

use std::process::Command;

use common::lab::Lab;
use common::*;

/// One emulated lab at a time: an emulator spins before each release, and two of them (and
/// their traffic) on this 2-core machine would mostly measure each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A two-host lab whose one link is `emulate = { EMULATE }`, torn down when dropped.
struct EmuLab {
    lab: Lab,
    _turn: std::sync::MutexGuard<'static, ()>,
}

impl EmuLab {
    fn up(tag: &str, emulate: &str) -> EmuLab {
        EmuLab::up_with(tag, "", emulate)
    }

    /// As [`EmuLab::up`], with `lab_keys` in the `[lab]` table.
    fn up_with(tag: &str, lab_keys: &str, emulate: &str) -> EmuLab {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let name = format!("e{tag}{}", std::process::id() % 100_000);
        let text = format!(
            "[lab]\nname = \"{name}\"\n{lab_keys}\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
             [[link]]\na = \"a\"\nb = \"b\"\nemulate = {{ {emulate} }}\n"
        );
        EmuLab {
            lab: Lab::from_text(name, &text),
            _turn: turn,
        }
    }

    /// `flowlab test` from host a to b's agent (10.77.0.2), as JSON.
    fn test_a_to_b(&self, args: &[&str]) -> serde_json::Value {
        let o = Command::new(FLOWLAB)
            .args([
                "lab",
                "exec",
                "--lab",
                &self.lab.name,
                "a",
                "--",
                FLOWLAB,
                "test",
            ])
            .arg("10.77.0.2")
            .args(args)
            .arg("--json")
            .env("FLOWLAB_LAB_DIR", &self.lab.dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "test: {}", stderr(&o));
        json(&o)
    }

    /// The emulator's report (rewritten every second; waits for the next one).
    fn report(&self) -> serde_json::Value {
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let path = self.lab.dir.join(&self.lab.name).join("emulator.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }
}

/// The a → b direction of the only link in a report.
fn a_to_b(report: &serde_json::Value) -> &serde_json::Value {
    let dirs = report["links"][0]["directions"].as_array().unwrap();
    dirs.iter().find(|d| d["from"] == "a").unwrap()
}

#[test]
fn a_delay_only_link_adds_its_delay() {
    if !flowlab_netns::netns_or_skip("a_delay_only_link_adds_its_delay") {
        return;
    }
    let lab = EmuLab::up("d", r#"delay = "10ms""#);
    // Each datagram goes to b and back: 10 ms each way through the emulator. flowlab's
    // one-way figures are relative (no clock sync assumed), so the added delay shows in the
    // round trip: twice the delay, plus the path's own tens of microseconds and the
    // emulator's release error (this machine is shared, so allow 1.5 ms for a p50).
    let v = lab.test_a_to_b(&[
        "--mode", "loopback", "--rate", "1M", "--size", "200", "-d", "2s",
    ]);
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
    let min = f64_at(&v, "/summary/round_trip/min_ns");
    let p50 = f64_at(&v, "/summary/round_trip/p50_ns");
    assert!(min >= 20e6, "min {min}");
    assert!(p50 <= 21.5e6, "p50 {p50}");
    let r = lab.report();
    let d = a_to_b(&r);
    // Every request crossed the emulator (a loaded machine may skip some slots at the
    // sender, so count what was sent).
    let sent = f64_at(&v, "/summary/packets_sent");
    assert!(d["frames_sent"].as_f64().unwrap() >= sent, "{d}");
    // The emulator reports its own timing error for the run; on a shared machine a test
    // only checks that it is there and sane (its tail is not a target here).
    assert!(d["release_error"]["p50_ns"].as_f64().unwrap() < 1e6, "{d}");
    assert!(d["release_error"]["count"].as_f64().unwrap() >= sent);
    assert_eq!(d["stages"][0]["stage"], "impair");
}

#[test]
fn an_af_xdp_emulator_carries_frames_both_ways() {
    if !flowlab_netns::netns_or_skip("an_af_xdp_emulator_carries_frames_both_ways") {
        return;
    }
    let lab = EmuLab::up_with("x", r#"emulator_capture = "af_xdp""#, r#"delay = "1ms""#);
    let log = std::fs::read_to_string(lab.lab.dir.join(&lab.lab.name).join("emulator.log"));
    let log = log.unwrap_or_default();
    if log.contains("notice: AF_XDP unavailable") {
        eprintln!("an_af_xdp_emulator_carries_frames_both_ways skipped: {log}");
        return;
    }
    assert!(log.contains("(af_xdp)"), "{log}");
    // UDP to b and back (its checksums completed by the emulator, or b's stack would drop
    // them), over the test's TCP control connection.
    let v = lab.test_a_to_b(&[
        "--mode", "loopback", "--rate", "1M", "--size", "1200", "-d", "2s",
    ]);
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0);
    assert!(f64_at(&v, "/summary/round_trip/min_ns") >= 2e6);
    let r = lab.report();
    let d = a_to_b(&r);
    let sent = f64_at(&v, "/summary/packets_sent");
    assert!(d["frames_sent"].as_f64().unwrap() >= sent, "{d}");
    assert!(d["read_lag"]["count"].as_f64().unwrap() >= sent, "{d}");
    assert_eq!(d["emulator_drops"]["ingress_overflow"], 0, "{d}");
}

#[test]
fn a_rate_limited_link_holds_its_rate() {
    if !flowlab_netns::netns_or_skip("a_rate_limited_link_holds_its_rate") {
        return;
    }
    let lab = EmuLab::up("r", r#"rate = "20M""#);
    // A quarter over the link's rate: enough to fill its queue, not so much that the control
    // connection, which shares the queue, loses half its segments (on a loaded machine that
    // stalled it past the 2.5 s silence limit).
    let v = lab.test_a_to_b(&["--rate", "25M", "--size", "1400", "-d", "3s"]);
    // The link serialises IP packets (1428 B for 1400 B of payload) at 20 Mbit/s.
    let want = 20e6 * 1400.0 / 1428.0;
    let goodput = f64_at(&v, "/summary/receiver_goodput_bps");
    assert!((goodput - want).abs() <= 0.05 * want, "goodput {goodput}");
    let r = lab.report();
    let stage = &a_to_b(&r)["stages"][0];
    assert_eq!(stage["stage"], "diffserv");
    assert!(stage["dropped"]["queue_full"].as_f64().unwrap() > 0.0);
}

/// The simulator's goodput for one UDP flow of `rate` and IP `size` over one link `link`.
fn simulated_goodput(link: &str, rate: &str, size: &str) -> f64 {
    let dir = std::env::temp_dir().join(format!("flowlab-emu-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("link.toml");
    let text = format!(
        "[sim]\nduration = \"3s\"\ndrain = \"0s\"\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\n\
         name = \"b\"\nkind = \"host\"\n[[link]]\nfrom = \"a\"\nto = \"b\"\n{link}\n[[flow]]\n\
         name = \"f\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"udp\"\nrate = \"{rate}\"\n\
         size = \"{size}\"\n"
    );
    std::fs::write(&file, text).unwrap();
    let o = Command::new(FLOWLAB)
        .arg("sim")
        .arg(&file)
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "sim: {}", stderr(&o));
    let _ = std::fs::remove_dir_all(&dir);
    f64_at(&json(&o), "/runs/0/flows/0/goodput_bps")
}

#[test]
fn an_atm_links_throughput_matches_the_simulators() {
    if !flowlab_netns::netns_or_skip("an_atm_links_throughput_matches_the_simulators") {
        return;
    }
    // A DS-3 (96,000 cells/s) offered more than it carries: 1500-byte IP packets take 32
    // cells, so both carry 3,000 packets/s, 35.3 Mbit/s of UDP payload. A tenth over, not
    // more: the control connection shares the overloaded queue.
    let lab = EmuLab::up("a", r#"phy = "DS3", buffer_cells = 2000, epd = 1500"#);
    let v = lab.test_a_to_b(&["--rate", "39M", "--size", "1472", "-d", "3s"]);
    let emulated = f64_at(&v, "/summary/receiver_goodput_bps");
    let simulated = simulated_goodput(r#"phy = "DS3""#, "39M", "1500B");
    assert!(
        (emulated - simulated).abs() <= 0.05 * simulated,
        "emulated {emulated}, simulated {simulated}"
    );
    assert!((simulated - 3000.0 * 1472.0 * 8.0).abs() < 0.01 * simulated);
    let r = lab.report();
    let cells = &a_to_b(&r)["stages"][0]["cells"];
    assert!(cells["dropped_epd"].as_f64().unwrap() > 0.0, "{cells}");
}

/// The kernel threads named `napi/DEV-*`, by process id.
fn napi_threads(dev: &str) -> Vec<u32> {
    let prefix = format!("napi/{dev}-");
    let entries = std::fs::read_dir("/proc").unwrap().flatten();
    let pids = entries.filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter(|pid| {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        comm.starts_with(&prefix)
    })
    .collect()
}

/// `counts` (frames read, dropped by the veth, dropped at the socket) of a → b.
fn ingress_counts(report: &serde_json::Value) -> [u64; 3] {
    let d = a_to_b(report);
    let drops = &d["emulator_drops"];
    [
        &d["frames_received"],
        &drops["veth_dropped"],
        &drops["ingress_overflow"],
    ]
    .map(|v| v.as_u64().unwrap_or_else(|| panic!("not a count: {d}")))
}

#[test]
fn frames_the_veth_drops_before_the_emulator_are_counted() {
    if !flowlab_netns::netns_or_skip("frames_the_veth_drops_before_the_emulator_are_counted") {
        return;
    }
    let lab = EmuLab::up_with("v", r#"emulator_capture = "af_xdp""#, r#"delay = "1ms""#);
    let emu_ns = format!("fl-{}-_emu", lab.lab.name);
    // The veth end the emulator reads a's frames from polls its ring in a kernel thread
    // (threaded NAPI) on CPU 0, where a real-time sender then keeps it from running: the
    // ring (256 frames) fills and the veth drops the rest of the burst before XDP.
    let before = napi_threads("e0a");
    let threaded = Command::new("ip")
        .args(["netns", "exec", &emu_ns, "sh", "-c"])
        .arg("echo 1 > /sys/class/net/e0a/threaded")
        .status()
        .unwrap();
    let napi: Vec<u32> = napi_threads("e0a")
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    if !threaded.success() || napi.len() != 1 {
        eprintln!(
            "frames_the_veth_drops_before_the_emulator_are_counted skipped: no threaded NAPI"
        );
        return;
    }
    let pinned = Command::new("taskset")
        .args(["-p", "-c", "0"])
        .arg(napi[0].to_string())
        .output()
        .unwrap();
    assert!(pinned.status.success(), "{}", stderr(&pinned));
    let start = ingress_counts(&lab.report());
    const BURST: u64 = 20_000;
    let send = format!(
        "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         print(sum(s.sendto(b'x' * 18, ('10.77.0.2', 9)) > 0 for _ in range({BURST})))"
    );
    let o = Command::new(FLOWLAB)
        .args(["lab", "exec", "--lab", &lab.lab.name, "a", "--"])
        .args([
            "chrt", "-f", "5", "taskset", "-c", "0", "python3", "-c", &send,
        ])
        .env("FLOWLAB_LAB_DIR", &lab.lab.dir)
        .output()
        .unwrap();
    if !o.status.success() {
        eprintln!(
            "frames_the_veth_drops_before_the_emulator_are_counted skipped: {}",
            stderr(&o)
        );
        return;
    }
    let sent: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert_eq!(sent, BURST);
    let end = ingress_counts(&lab.report());
    let [read, veth, overflow] = [0, 1, 2].map(|k| end[k] - start[k]);
    assert!(veth > 0, "read {read}, veth {veth}, socket {overflow}");
    // Every frame sent was read or dropped before the emulator, counted: but for a's own
    // few frames meanwhile (neighbour discovery), which also cross the veth.
    let accounted = read + veth + overflow;
    assert!(
        (sent..=sent + 3).contains(&accounted),
        "sent {sent}: read {read}, veth {veth}, socket {overflow}"
    );
}
