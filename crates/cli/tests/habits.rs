//! iperf3 users' habits: short flags, exit statuses, suggestions, completions, the manual page,
//! the agent as a daemon. Loopback only, no root needed.

mod common;
#[path = "../../control/tests/json_schema/mod.rs"]
mod json_schema;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("flowlab-habits-{}-{name}", std::process::id()))
}

/// iperf3's `-t 1 -b 2M -l 500 -u -J -P 2` mean what they mean there.
#[test]
fn iperf3_short_flags_run_a_test() {
    let agent = loopback_agent(&[]);
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-t",
        "1",
        "-b",
        "2M",
        "-l",
        "500",
        "-u",
        "-J",
        "-P",
        "2",
        "--no-store",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["spec"]["duration_ns"], 1_000_000_000u64);
    assert_eq!(v["spec"]["rate_bps"], 2_000_000);
    assert_eq!(v["spec"]["size"], 500);
    assert_eq!(v["spec"]["protocol"], "udp");
    assert_eq!(v["spec"]["flows"], 2);
}

/// `-p` names the agent's port for a bare host, and `-4` keeps to IPv4.
#[test]
fn a_port_flag_and_a_family_reach_the_agent() {
    let agent = loopback_agent(&[]);
    let port = agent.addr.rsplit(':').next().unwrap();
    let o = flowlab(&[
        "test",
        "localhost",
        "-p",
        port,
        "-4",
        "-n",
        "20",
        "-J",
        "--no-store",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o)["spec"]["count"], 20);
    let twice = flowlab(&["test", &agent.addr, "-p", "1", "-n", "20", "--no-store"]);
    assert_one_line_error(&twice, "the port is given twice");
    assert_eq!(twice.status.code(), Some(2));
    let v6 = flowlab(&["test", "127.0.0.1", "-6", "-p", port, "--no-store"]);
    assert_one_line_error(&v6, "host '127.0.0.1' has no IPv6 address");
    assert_eq!(
        v6.status.code(),
        Some(1),
        "a missing address is no usage error"
    );
}

/// Every refused flag value exits 2, whether clap or `TestSpec::validate` refuses it.
#[test]
fn every_invalid_flag_value_exits_2() {
    let cases: &[&[&str]] = &[
        &["test", "127.0.0.1", "--size", "0"],
        &["test", "127.0.0.1", "--traffic", "bogus:x"],
        &["test", "127.0.0.1", "--traffic", "poisson:pps=-1"],
        &["test", "127.0.0.1", "--rate", "2Q"],
        &["test", "127.0.0.1", "--echo-every", "0"],
        &["test", "127.0.0.1", "-4", "-6"],
        &["test", "--stamp", "127.0.0.1", "-P", "2"],
        &["sweep", "127.0.0.1", "--vary", "size=0,100"],
        &["sweep", "127.0.0.1", "--vary", "sise=1"],
        &["sweep", "127.0.0.1", "--vary", "size=100", "--traffic", "x"],
        &["serve", "--max-rate", "fast"],
        &["serve", "--stamp", "host:x", "--port", "0"],
        &["test", "--stamp", "127.0.0.1", "--size", "43"],
        &["man", "nosuchcommand"],
    ];
    for args in cases {
        let o = flowlab(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("flowlab: error: "), "{args:?}");
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn a_mistyped_flag_or_command_is_answered_with_a_suggestion() {
    let o = flowlab(&["test", "127.0.0.1", "--durration", "1s"]);
    assert_one_line_error(&o, "did you mean '--duration'?");
    assert_eq!(o.status.code(), Some(2));
    let o = flowlab(&["tset"]);
    assert_one_line_error(&o, "did you mean 'test'?");
}

#[test]
fn a_bare_flowlab_prints_usage_not_an_error() {
    let o = flowlab(&[]);
    let text = stderr(&o);
    assert!(text.contains("Usage: flowlab <COMMAND>"), "{text}");
    assert!(!text.contains("error"), "{text}");
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn completions_come_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef flowlab"),
        ("fish", "complete -c flowlab"),
    ] {
        let o = flowlab(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let script = String::from_utf8(o.stdout).unwrap();
        assert!(script.contains(marker), "{shell}");
        assert!(
            script.contains("--duration") && script.contains("serve"),
            "{shell}"
        );
    }
    let o = flowlab(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
}

/// The page renders with `man -l` where man is installed; its roff is checked either way.
#[test]
fn the_manual_pages_render() {
    for (args, title, flag) in [
        (&["man"][..], ".TH flowlab 1", "flowlab\\-test(1)"),
        (&["man", "test"][..], ".TH flowlab-test 1", "\\-\\-duration"),
        (&["man", "serve"][..], ".TH flowlab-serve 1", "\\-\\-daemon"),
    ] {
        let o = flowlab(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let roff = String::from_utf8(o.stdout).unwrap();
        assert!(
            roff.contains(title) && roff.contains(".SH SYNOPSIS"),
            "{roff}"
        );
        assert!(roff.contains(flag), "{args:?}");
        let page = temp(&format!("{}.1", args.len()));
        std::fs::write(&page, &roff).unwrap();
        let shown = Command::new("man")
            .args(["-l", page.to_str().unwrap()])
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output();
        let _ = std::fs::remove_file(&page);
        match shown {
            Ok(o) if o.status.success() => {
                let text = String::from_utf8_lossy(&o.stdout);
                assert!(text.contains("SYNOPSIS"), "{text}");
            }
            _ => eprintln!("man not installed here: the roff was checked alone"),
        }
    }
}

/// `--title` prefixes the text result's lines; `--logfile` takes everything printed.
#[test]
fn a_title_and_a_log_file() {
    let agent = loopback_agent(&[]);
    let log = temp("test.log");
    let o = flowlab(&[
        "test",
        &agent.addr,
        "-n",
        "20",
        "-T",
        "run A",
        "--logfile",
        log.to_str().unwrap(),
        "--no-store",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        o.stdout.is_empty() && o.stderr.is_empty(),
        "all went to the log"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let result: Vec<&str> = text.lines().filter(|l| l.starts_with("run A: ")).collect();
    assert!(result.len() >= 3, "{text}");
}

fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// `serve --daemon --pidfile` returns at once, leaves the agent serving in the background,
/// refuses a second agent on the same pid file, and removes the file when stopped.
#[test]
fn the_agent_runs_as_a_daemon() {
    let (pidfile, log) = (temp("agent.pid"), temp("agent.log"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let serve = |port: &str| {
        let args = ["serve", "-B", "127.0.0.1", "-p", port, "-D", "-I"];
        let log_args = ["--logfile", log.to_str().unwrap()];
        flowlab(&[&args[..], &[pidfile.to_str().unwrap()], &log_args].concat())
    };
    let o = serve(&port);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        o.stderr.is_empty(),
        "the banner goes to the log: {}",
        stderr(&o)
    );
    wait_for("the pid file", || pid_in(&pidfile).is_some());
    let pid = pid_in(&pidfile).unwrap();
    let test = flowlab(&[
        "test",
        &format!("127.0.0.1:{port}"),
        "-n",
        "10",
        "--no-store",
    ]);
    assert!(test.status.success(), "{}", stderr(&test));
    let again = serve("0");
    assert_one_line_error(&again, "which is still running");
    let _ = Command::new("kill").arg(pid.to_string()).status();
    wait_for("the agent to stop", || !pidfile.exists());
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(text.contains("listening on 127.0.0.1:"), "{text}");
}

/// The sweep says how long it will take before its first test.
#[test]
fn a_sweep_says_how_long_it_will_take() {
    let agent = loopback_agent(&[]);
    let db = temp("sweep.sqlite3");
    let o = flowlab(&[
        "sweep",
        &agent.addr,
        "--vary",
        "size=100,200",
        "-t",
        "1",
        "-b",
        "100k",
        "--db",
        db.to_str().unwrap(),
    ]);
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
    assert!(o.status.success(), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let first = stdout.lines().next().unwrap_or_default().to_string();
    assert_eq!(first, "flowlab: 2 tests, expected to take about 4 s");
}

fn free_port() -> u16 {
    let probe = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap().port()
}

/// `--bind` and `--cport` place this end's sockets: UDP flow i on cport + i, TCP from cport.
#[test]
fn the_client_binds_where_it_is_told() {
    let agent = loopback_agent(&[]);
    let cport = free_port().min(60_000);
    let udp = flowlab(&[
        "test",
        &agent.addr,
        "--bind",
        "127.0.0.1",
        "--cport",
        &cport.to_string(),
        "-P",
        "2",
        "-n",
        "20",
        "-J",
        "--no-store",
    ]);
    assert!(udp.status.success(), "{}", stderr(&udp));
    let ports = json(&udp)["spec"]["client_udp_ports"].clone();
    assert_eq!(ports, serde_json::json!([cport, cport + 1]));
    let tcp = flowlab(&[
        "test",
        &agent.addr,
        "--tcp",
        "--cport",
        &cport.to_string(),
        "-n",
        "5",
        "--no-store",
    ]);
    assert!(tcp.status.success(), "{}", stderr(&tcp));
    // A port another socket listens on cannot be this end's.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let args = ["test", &agent.addr, "--tcp", "--cport", &port, "-n", "5"];
    assert_one_line_error(&flowlab(&args), "cannot open a TCP data connection from");
    let elsewhere = flowlab(&["test", &agent.addr, "-B", "192.0.2.1", "-n", "5"]);
    assert_one_line_error(&elsewhere, "cannot connect to");
    let high = flowlab(&[
        "test",
        &agent.addr,
        "--cport",
        "65535",
        "-P",
        "2",
        "-n",
        "5",
    ]);
    assert_one_line_error(&high, "--cport 65535 leaves no port for flow 1");
}

/// `-O 1 -t 2`: the first second is left out of what the receiver measured, and loss counts
/// from the packets sent after it; the document still meets the schema.
#[test]
fn a_warmup_is_left_out() {
    let agent = loopback_agent(&[]);
    let args = ["-t", "2", "-b", "400k", "-l", "500", "-J", "--no-store"];
    let o = flowlab(&[&["test", &agent.addr, "-O", "1"][..], &args].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["spec"]["omit_ns"], 1_000_000_000u64);
    let warmup = &v["agent"]["receiver"]["warmup"];
    let (left_out, sent) = (
        f64_at(warmup, "/packets_received"),
        f64_at(&v, "/summary/packets_sent"),
    );
    // 100 packets a second: about 100 in the warm-up, about 100 measured.
    assert!((80.0..=120.0).contains(&left_out), "{warmup}");
    let received = f64_at(&v, "/summary/packets_received");
    assert!((80.0..=120.0).contains(&received), "{received} of {sent}");
    assert_eq!(f64_at(&v, "/summary/packets_lost"), 0.0, "{v:#}");
    let schema = json_schema::schema();
    let errors = json_schema::Validator::new(&schema).check(None, &v);
    assert!(errors.is_empty(), "{errors:#?}");
    let whole = flowlab(&[&["test", &agent.addr][..], &args].concat());
    assert_eq!(
        json(&whole)["agent"]["receiver"]["warmup"],
        serde_json::Value::Null
    );
}
