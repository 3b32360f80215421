//! CPU figures against an independent observer: the kernel's own accounting of each flowlab
//! process in /proc/PID/stat, read by this test around a paced test on loopback. Also: the
//! text and the JSON show the same role CPU, and socket drops are counted (0, not null).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{f64_at, loopback_agent, test_db, FLOWLAB};
use serde_json::Value;

/// How far a role's CPU may fall short of its whole process's: the process also starts,
/// connects, keeps the control connection and writes its results (debug build, shared host).
const OTHER_WORK_NS: f64 = 100e6;
const OTHER_WORK_SHARE: f64 = 0.1;

/// Clock ticks per second of /proc/PID/stat's times.
fn clock_ticks() -> f64 {
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("CLK_TCK is a number")
}

/// (state, utime + stime in ticks) of a process from /proc/PID/stat.
fn proc_stat(pid: u32) -> (char, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // The command name in parentheses may hold spaces: fields count from its end.
    let rest = &text[text.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields[i].parse::<u64>().expect("ticks");
    let state = fields[0].chars().next().unwrap_or('?');
    // Fields 14 and 15 of the file (utime, stime) are 11 and 12 after the state (field 3).
    (state, ticks(11) + ticks(12))
}

/// Runs `flowlab test` with `args`, reading its /proc/PID/stat up to its exit (unreaped, a
/// zombie keeps its times). Returns the text it printed, its CPU in ns and the JSON it wrote.
fn run_client(args: &[&str], json_path: &Path) -> (String, f64, Value) {
    let child = Command::new(FLOWLAB)
        .arg("test")
        .args(args)
        .arg("-o")
        .arg(json_path)
        .env("FLOWLAB_DB", test_db())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn flowlab test");
    let ticks = loop {
        match proc_stat(child.id()) {
            ('Z', ticks) => break ticks,
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "flowlab test {args:?} failed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let json = std::fs::read_to_string(json_path).expect("result file");
    let v: Value = serde_json::from_str(&json).expect("result JSON");
    (text, ticks as f64 * 1e9 / clock_ticks(), v)
}

/// The role's CPU (ns) agrees with the process's as the kernel counts it: not above it
/// (beyond the ticks' rounding), and short of it only by the process's other work.
fn assert_agrees(end: &str, role_ns: f64, process_ns: f64) {
    let tick_ns = 2.0 * 1e9 / clock_ticks();
    eprintln!(
        "{end}: role {:.1} ms, process {:.1} ms",
        role_ns / 1e6,
        process_ns / 1e6
    );
    assert!(
        role_ns <= process_ns + tick_ns,
        "{end}: role {role_ns} ns above its process's {process_ns} ns"
    );
    let slack = OTHER_WORK_NS + OTHER_WORK_SHARE * process_ns;
    assert!(
        role_ns >= process_ns - slack,
        "{end}: role {role_ns} ns, process {process_ns} ns"
    );
}

/// The percentage the text prints for an end's role CPU, as the JSON rounds it.
fn assert_text_matches_json(text: &str, v: &Value, end: &str) {
    let role = &v["summary"][format!("{end}_role_cpu")];
    let total = f64_at(role, "/user_pct") + f64_at(role, "/system_pct");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("CPU {end} (")))
        .unwrap_or_else(|| panic!("no CPU {end} line in:\n{text}"));
    let shown = line
        .split_once(')')
        .map_or("", |(_, rest)| rest.trim_start());
    assert!(
        shown.starts_with(&format!("{total:.1}% of one core in its test threads")),
        "{line} does not show the JSON's {total:.1}%"
    );
    // The process over the same run did at least what its role's threads did.
    let cpu = &v["summary"][format!("{end}_cpu")];
    let process = f64_at(cpu, "/process_user_pct") + f64_at(cpu, "/process_system_pct");
    assert!(
        process + 1.0 >= total,
        "{end}: process {process}% < role {total}%"
    );
    let softirq = f64_at(cpu, "/host_softirq_pct");
    assert!(
        (0.0..=100.0).contains(&softirq),
        "{end}: softirq {softirq}%"
    );
}

fn json_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowlab-cpu-{name}-{}.json", std::process::id()))
}

/// A paced sender at each end in turn: the client sends (its process read at exit), then the
/// agent (its process read before and after the test).
#[test]
fn paced_role_cpu_agrees_with_proc_stat_and_text_with_json() {
    let agent = loopback_agent(&[]);
    // Precise pacing spins at any load; auto may choose to sleep only on a busy machine.
    let common = [
        "--rate",
        "20M",
        "--size",
        "1200",
        "--duration",
        "2s",
        "--pacing",
        "precise",
    ];

    let path = json_path("oneway");
    let args: Vec<&str> = [agent.addr.as_str()].into_iter().chain(common).collect();
    let (text, client_ns, v) = run_client(&args, &path);
    let role = &v["summary"]["client_role_cpu"];
    assert_agrees("client", f64_at(role, "/cpu_ns"), client_ns);
    let sent = f64_at(&v, "/summary/packets_sent");
    let per_packet = f64_at(role, "/cpu_ns") / sent;
    assert!((f64_at(role, "/ns_per_packet") - per_packet).abs() < 1e-6 * per_packet);
    // The spin is part of the role's CPU, shown apart.
    let spin = f64_at(role, "/pacing_spin_pct");
    let total = f64_at(role, "/user_pct") + f64_at(role, "/system_pct");
    assert!(
        spin > 0.0 && spin <= total + 1e-9,
        "spin {spin}% of {total}%"
    );
    for end in ["client", "agent"] {
        assert_text_matches_json(&text, &v, end);
    }
    // Drops at the receiving socket are counted: 0 when none, never null for UDP.
    let drops = f64_at(&v, "/summary/lost_at_receiver_socket");
    assert_eq!(drops, f64_at(&v, "/summary/receive_buffers_dropped"));
    assert!(drops <= f64_at(&v, "/summary/packets_lost"));

    let path = json_path("reverse");
    let before = proc_stat(agent.child.id()).1;
    let args: Vec<&str> = [agent.addr.as_str(), "--reverse"]
        .into_iter()
        .chain(common)
        .collect();
    let (text, _, v) = run_client(&args, &path);
    let agent_ns = (proc_stat(agent.child.id()).1 - before) as f64 * 1e9 / clock_ticks();
    let role = &v["summary"]["agent_role_cpu"];
    assert_agrees("agent", f64_at(role, "/cpu_ns"), agent_ns);
    assert!(f64_at(role, "/pacing_spin_pct") > 0.0);
    // The receiving client's threads are measured too.
    assert!(f64_at(&v, "/summary/client_role_cpu/ns_per_packet") > 0.0);
    for end in ["client", "agent"] {
        assert_text_matches_json(&text, &v, end);
    }
    let _ = std::fs::remove_file(json_path("oneway"));
    let _ = std::fs::remove_file(path);
}

/// Issue 12: under GRO the kernel counts dropped receive buffers, each a train of datagrams.
/// A max-rate sender into a small receive buffer on loopback, where every loss is a socket
/// drop: the packets lost lie within the bounds the buffers give.
#[test]
fn gro_socket_drops_bound_the_packets_lost() {
    let agent = loopback_agent(&[]);
    let path = json_path("gro");
    let args = [
        agent.addr.as_str(),
        "--rate",
        "max",
        "--duration",
        "1s",
        "--recv-buffer",
        "64KiB",
    ];
    let (_, _, v) = run_client(&args, &path);
    let _ = std::fs::remove_file(&path);
    let s = &v["summary"];
    let buffers = f64_at(s, "/receive_buffers_dropped");
    let lost = f64_at(s, "/packets_lost");
    if v["agent"]["receiver"]["gro"] == true && buffers > 0.0 {
        assert!(s["lost_at_receiver_socket"].is_null(), "{s}");
        let most = f64_at(s, "/lost_at_receiver_socket_max");
        assert!(
            buffers <= lost && lost <= most,
            "{buffers} <= {lost} <= {most}"
        );
        assert!(most <= 64.0 * buffers, "{most} for {buffers} buffers");
    } else {
        // Nothing dropped, or one datagram a buffer: exact.
        assert_eq!(f64_at(s, "/lost_at_receiver_socket"), buffers, "{s}");
    }
}
