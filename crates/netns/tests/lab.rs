//! Labs on a real kernel: they need root and iproute2 and print "skipped: ..." otherwise
//! (and fail when the CI environment variable is set). Each test uses its own lab name and
//! run directory, so they run in parallel with each other and with any real lab.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use flowlab_netns::lab::{self, LabSpec, LabState, UpOptions};
use flowlab_netns::netns_or_skip;

mod common;

use common::{output, udp_crosses};

fn in_ns(ns: &str, args: &[&str]) -> String {
    let mut cmd = lab::exec_command(ns, &args.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    cmd.stdin(Stdio::null());
    output(cmd)
}

fn lab_namespaces(lab_name: &str) -> Vec<String> {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "list"]);
    flowlab_netns::parse_netns_list(&output(cmd))
        .into_iter()
        .filter(|n| n.starts_with(&lab::lab_prefix(lab_name)))
        .collect()
}

/// A lab name of at most 12 characters unique to this process and test.
fn unique(tag: char) -> String {
    format!("t{}{tag}", std::process::id() % 10_000_000)
}

fn run_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowlab-lab-rt-{name}"))
}

/// An example file with its lab renamed.
fn example(file: &str, name: &str) -> LabSpec {
    let path = format!("{}/../../examples/lab/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("[lab]\nname = \"").unwrap() + "[lab]\nname = \"".len();
    let end = start + text[start..].find('"').unwrap();
    LabSpec::parse(&format!("{}{name}{}", &text[..start], &text[end..])).unwrap()
}

/// Takes the lab down and checks nothing is left: no namespace, no state, no process.
fn down_and_check(state: &LabState, dir: &std::path::Path) {
    let report = lab::down(Some(&state.name), dir).unwrap();
    assert_eq!(report.labs.as_slice(), std::slice::from_ref(&state.name));
    assert!(lab_namespaces(&state.name).is_empty(), "namespaces left");
    assert!(!dir.join(&state.name).exists(), "state left");
    for a in &state.agents {
        assert!(
            !lab::pid_alive(a.pid),
            "agent {} (pid {}) still running",
            a.host,
            a.pid
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Not a real test: the worker that `udp_crosses` runs inside a namespace.
#[test]
fn udp_helper() {
    common::udp_worker();
}

#[test]
fn three_host_lab_routes_shapes_and_goes_down_completely() {
    if !netns_or_skip("three_host_lab") {
        return;
    }
    let name = unique('a');
    let dir = run_dir(&name);
    let spec = example("three-hosts.toml", &name);
    let state = lab::up(&spec, &UpOptions::new(dir.clone())).unwrap();
    let result = std::panic::catch_unwind(|| {
        let ns = |h: &str| lab::ns_of(&name, h);
        assert_eq!(lab_namespaces(&name).len(), 6);
        // h1 reaches the sink across the switch and the router.
        let route = in_ns(&ns("h1"), &["ip", "route", "get", "10.77.0.2"]);
        assert!(route.contains("via 10.77.64.4 dev to-s1"), "{route}");
        let route = in_ns(&ns("h3"), &["ip", "-6", "route", "get", "fd77::2"]);
        assert!(route.contains("via fd77:0:0:1000::4"), "{route}");
        udp_crosses(&ns("h1"), &ns("sink"), "10.77.0.2:47101".parse().unwrap());
        udp_crosses(&ns("sink"), &ns("h2"), "10.77.64.2:47102".parse().unwrap());
        udp_crosses(&ns("h3"), &ns("sink"), "[fd77::2]:47103".parse().unwrap());
        // The bottleneck's tbf, both directions; the switch bridges.
        for (host, dev) in [("r", "to-sink"), ("sink", "to-r")] {
            let q = in_ns(&ns(host), &["tc", "-d", "qdisc", "show", "dev", dev]);
            // tc shows the limit as the latency it allows: 64 KiB at 10 Mb/s, less the
            // 3028 B bucket, is 50 ms.
            assert!(
                q.contains("tbf") && q.contains("rate 10Mbit") && q.contains("lat 50"),
                "{host}: {q}"
            );
        }
        let br = in_ns(&ns("s1"), &["ip", "-o", "link", "show", "master", "br0"]);
        assert_eq!(br.lines().count(), 4, "{br}");
        // The state names it, and a second `up` is refused.
        let status = lab::status(&dir).unwrap();
        assert!(status
            .iter()
            .any(|l| l.name == name && l.problem.is_none() && l.state.is_some()));
        let e = lab::up(&spec, &UpOptions::new(dir.clone())).unwrap_err();
        assert!(e.to_string().contains("already up"), "{e}");
    });
    down_and_check(&state, &dir);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

#[test]
fn crash_leftovers_are_found_and_removed() {
    if !netns_or_skip("crash_leftovers") {
        return;
    }
    let name = unique('b');
    let dir = run_dir(&name);
    // What a crash half-way through `up` leaves: namespaces, a process inside, no state.
    for node in ["x", "y"] {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "add", &lab::ns_of(&name, node)]);
        output(cmd);
    }
    let mut sleeper = Command::new("ip")
        .args(["netns", "exec", &lab::ns_of(&name, "x"), "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let status = lab::status(&dir).unwrap();
    let me = status.iter().find(|l| l.name == name).unwrap();
    assert!(me.problem.as_deref().unwrap().contains("without state"));
    // `up` refuses while they exist.
    let spec = example("bottleneck.toml", &name);
    let e = lab::up(&spec, &UpOptions::new(dir.clone())).unwrap_err();
    assert!(e.to_string().contains("run `flowlab lab down"), "{e}");

    let report = lab::down(Some(&name), &dir).unwrap();
    assert_eq!(report.namespaces.len(), 2);
    assert_eq!(report.processes, 1);
    assert!(lab_namespaces(&name).is_empty());
    let exit = sleeper.wait().unwrap();
    assert!(!exit.success(), "sleep was stopped, not finished");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn agents_start_listen_and_stop() {
    if !netns_or_skip("lab_agents") {
        return;
    }
    let exe = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/flowlab");
    if !exe.exists() {
        eprintln!(
            "lab_agents: skipped: {} is not built (cargo build -p flowlab)",
            exe.display()
        );
        return;
    }
    let name = unique('c');
    let dir = run_dir(&name);
    let spec = example("bottleneck.toml", &name);
    let mut opts = UpOptions::new(dir.clone());
    opts.agent_exe = Some(exe);
    let state = lab::up(&spec, &opts).unwrap();
    let result = std::panic::catch_unwind(|| {
        assert_eq!(state.agents.len(), 2);
        assert_eq!(state.agents[1].addr, "10.77.0.2:9470");
        for a in &state.agents {
            assert!(lab::pid_alive(a.pid));
            let pids = in_ns(&a.ns, &["ip", "netns", "identify", &a.pid.to_string()]);
            assert_eq!(pids.trim(), a.ns);
            let listening = in_ns(&a.ns, &["ss", "-Hltn", "sport = :9470"]);
            assert!(!listening.trim().is_empty(), "{}: nothing on 9470", a.host);
        }
        let q = in_ns(&state.agents[0].ns, &["tc", "qdisc", "show", "dev", "to-b"]);
        assert!(q.contains("burst 3Kb") && q.contains("lat 23.8ms"), "{q}");
        let table = state.table();
        assert!(table.contains("10.77.0.1:9470"), "{table}");
    });
    down_and_check(&state, &dir);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}
