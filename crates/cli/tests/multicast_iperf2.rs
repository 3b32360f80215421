//! Multicast with iperf2 (Debian's unmodified `iperf`) at one end, across the lab bridge of
//! `examples/lab/three-hosts.toml`: `iperf -c GROUP -u -T 1` in h3 sends to the agents of h1
//! and h2 (`--iperf2 sender`), and the router's flowlab sends iperf2's datagrams
//! (`--iperf2 receivers`) to `iperf -s -u -B GROUP` in h1 beside h2's agent. Needs root and
//! iproute2; without iperf it says it was skipped (under CI it fails: .ci/run installs it).

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use common::lab::Lab;
use common::*;

/// Whether iperf2 is here, after saying `test` was skipped when not.
fn iperf2_found(test: &str) -> bool {
    let found = Command::new("iperf").arg("-v").output().is_ok();
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "iperf is required when CI is set (.ci/run installs it)"
        );
        eprintln!("{test}: skipped: needs iperf2 (apt-get install iperf)");
    }
    found
}

/// `args` run in the lab's `host`.
fn in_host(lab: &Lab, host: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(FLOWLAB);
    cmd.args(["lab", "exec", "--lab", &lab.name, host, "--"])
        .args(args)
        .env("FLOWLAB_LAB_DIR", &lab.dir);
    cmd
}

/// The number after `before` in `text`, e.g. iperf's "Sent 501 datagrams".
fn number_after(text: &str, before: &str) -> Option<f64> {
    let rest = text.split(before).nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

/// The lines `from` prints, as they come.
fn lines_of(from: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    lines
}

/// Waits for the line that `wanted` picks (what it returns), with every line heard so far
/// in the panic message when none comes within `within`.
fn await_line<T>(
    lines: &Receiver<String>,
    within: Duration,
    what: &str,
    wanted: impl Fn(&str) -> Option<T>,
) -> T {
    let until = Instant::now() + within;
    let mut heard = Vec::new();
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no {what} within {within:?}: {heard:#?}"));
        if let Some(found) = wanted(&line) {
            return found;
        }
        heard.push(line);
    }
}

/// Waits until `host` has joined `group` on `device` (`ip maddr`): iperf -s prints its
/// banner just before it joins.
fn await_membership(lab: &Lab, host: &str, device: &str, group: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let o = in_host(lab, host, &["ip", "maddr", "show", "dev", device])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&o.stdout).contains(group) {
            return;
        }
        assert!(Instant::now() < until, "{host} never joined {group}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn iperf2_and_flowlab_each_send_to_the_other_across_a_bridge() {
    let test = "multicast_iperf2";
    if !flowlab_netns::netns_or_skip(test) || !iperf2_found(test) {
        return;
    }
    let lab = Lab::up("three-hosts.toml", "three");
    iperf2_sends_to_two_agents(&lab);
    flowlab_sends_to_iperf_s(&lab);
}

/// Once flowlab says the agents have joined, iperf -c sends 2 s at 2 Mbit/s (about 500
/// datagrams, about half of them dropped by a 1 Mbit/s shaper on h3's way out) while they
/// listen for 8 s: each agent's count (received and lost: the highest id it saw) is at most
/// iperf's sent count and within 1 % of it, and its loss is what the shaper dropped.
fn iperf2_sends_to_two_agents(lab: &Lab) {
    let mut flowlab = in_host(
        lab,
        "r",
        &[
            FLOWLAB,
            "test",
            "--multicast",
            "239.1.2.7:6002",
            "--agents",
            "10.77.64.1,10.77.64.2",
            "--iperf2",
            "sender",
            "-d",
            "8s",
            "--bind",
            "10.77.64.4",
            "--json",
            "--no-store",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let said = lines_of(flowlab.stderr.take().unwrap());
    let ready = "flowlab: the agents have joined 239.1.2.7:6002: start `iperf -c 239.1.2.7 -p 6002 -u -T 1` now";
    await_line(&said, Duration::from_secs(20), "ready line", |l| {
        l.starts_with(ready).then_some(())
    });
    // h3's way out passes 1 Mbit/s of iperf's 2: the rest is dropped there, unseen by iperf.
    let shaper = [
        "tc", "qdisc", "replace", "dev", "to-s1", "root", "tbf", "rate", "1mbit", "burst", "5kb",
        "latency", "20ms",
    ];
    let o = in_host(lab, "h3", &shaper).output().unwrap();
    assert!(o.status.success(), "tc: {}", stderr(&o));
    let iperf = in_host(
        lab,
        "h3",
        &[
            // -B: the lab's hosts have no default route, so no interface for the group.
            "iperf",
            "-c",
            "239.1.2.7",
            "-B",
            "10.77.64.3",
            "-p",
            "6002",
            "-u",
            "-T",
            "1",
            "-b",
            "2M",
            "-l",
            "1000",
            "-t",
            "2",
        ],
    )
    .output()
    .unwrap();
    let told = String::from_utf8_lossy(&iperf.stdout).to_string();
    assert!(iperf.status.success(), "iperf -c: {told}{}", stderr(&iperf));
    // iperf 2.1.8's "Sent" counts two reports beyond its datagrams: its final datagram's
    // (the negative id) and the end of the test's.
    let sent =
        number_after(&told, "Sent ").unwrap_or_else(|| panic!("iperf -c said: {told}")) - 2.0;
    let o = flowlab.wait_with_output().unwrap();
    let rest: Vec<String> = said.try_iter().collect();
    assert!(o.status.success(), "flowlab: {rest:#?}");
    let results = json(&o);
    let results = results.as_array().expect("one document per receiver");
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["error"], serde_json::Value::Null, "{r:#}");
        assert_eq!(r["spec"]["multicast"]["header"], "iperf2");
        let received = f64_at(r, "/summary/packets_received");
        let seen = received + f64_at(r, "/summary/packets_lost");
        // Not iperf's final datagram: the count ends at the last one received.
        assert!(
            seen <= sent && seen >= 0.99 * sent,
            "{seen} of {sent}: {r:#}"
        );
        // What the agents miss is counted: about half, dropped on h3's way out.
        let lost = sent - received;
        assert!(
            (0.1 * sent..=0.8 * sent).contains(&lost),
            "received {received} of {sent}"
        );
        let loss_pct = f64_at(r, "/summary/loss_pct");
        assert!((loss_pct - 100.0 * lost / sent).abs() < 1.0, "{r:#}");
        // iperf's wall-clock stamps give each receiver a one-way delay: the shaper's full
        // queue (7 datagrams of 8 ms at 1 Mbit/s) above the first, unqueued packet's.
        let delay = f64_at(r, "/summary/relative_one_way_delay/max_ns");
        assert!(delay > 1e7 && delay < 2e8, "delay max {delay} ns: {r:#}");
    }
}

/// `LOST/TOTAL` of iperf -s's report line, e.g. "[  1] 0.0000-1.6 sec ... 0/401 (0%)".
fn lost_and_total(line: &str) -> Option<(f64, f64)> {
    line.split_whitespace().find_map(|word| {
        let (lost, total) = word.split_once('/')?;
        Some((lost.parse().ok()?, total.parse().ok()?))
    })
}

/// flowlab sends 400 iperf2 datagrams and the final one to `iperf -s` (which has joined) and
/// h2's agent: iperf -s's one report (no intervals) counts exactly flowlab's sent count and
/// that final datagram, which iperf2 counts (as iperf -c counts its own); h2's agent counts
/// them too.
fn flowlab_sends_to_iperf_s(lab: &Lab) {
    let mut server = in_host(
        lab,
        "h1",
        &[
            // GROUP%DEVICE: the interface to join on (no default route names one).
            "timeout",
            "30",
            "stdbuf",
            "-oL",
            "iperf",
            "-s",
            "-u",
            "-B",
            "239.1.2.8%to-s1",
            "-p",
            "6003",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let report = lines_of(server.stdout.take().unwrap());
    await_membership(lab, "h1", "to-s1", "239.1.2.8");
    let o = in_host(
        lab,
        "r",
        &[
            FLOWLAB,
            "test",
            "--multicast",
            "239.1.2.8:6003",
            "--agents",
            "10.77.64.2",
            "--iperf2",
            "receivers",
            "--bind",
            "10.77.64.4",
            "-r",
            "2M",
            "-s",
            "1000",
            "-n",
            "400",
            "--json",
            "--no-store",
        ],
    )
    .output()
    .unwrap();
    assert!(o.status.success(), "flowlab: {}", stderr(&o));
    let results = json(&o);
    let sent = f64_at(&results[0], "/summary/packets_sent");
    assert!(sent >= 360.0, "flowlab sent {sent} of 400");
    assert!(f64_at(&results[0], "/summary/packets_received") >= 0.98 * sent);
    let (lost, total) = await_line(
        &report,
        Duration::from_secs(10),
        "report from iperf -s",
        lost_and_total,
    );
    assert_eq!(total, sent + 1.0, "iperf -s: {lost}/{total}");
    assert!(lost <= 0.02 * sent, "iperf -s: {lost}/{total}");
    let _ = server.kill();
    let _ = server.wait();
}
