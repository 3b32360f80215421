//! Tests that need root and iproute2; they print "skipped: ..." otherwise
//! (and fail when the CI environment variable is set).

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use flowlab_netns::{netns_available, qdisc_available, Side, VethPair};

const HELPER_ENV: &str = "FLOWLAB_NETNS_UDP_HELPER";

fn output(mut cmd: Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn netns_list() -> String {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "list"]);
    output(cmd)
}

#[test]
fn pair_is_configured_and_removed_on_drop() {
    let Some(pair) = flowlab_netns::skip_unless_netns("pair_is_configured_and_removed_on_drop")
    else {
        return;
    };
    let mut cmd = pair.command_in(&pair.ns_a, "ip");
    cmd.args(["-4", "addr"]);
    assert!(output(cmd).contains("10.99.0.1/24"));

    let mut cmd = pair.command_on(Side::B, "ip");
    cmd.args(["-6", "addr", "show", "dev", &pair.dev_b, "scope", "global"]);
    let v6 = output(cmd);
    assert!(v6.contains("fd99::2/64"), "{v6}");
    assert!(!v6.contains("tentative"), "{v6}");

    let mut cmd = pair.command_in(&pair.ns_a, "ip");
    cmd.args(["route", "get", "10.99.0.2"]);
    let route = output(cmd);
    assert!(route.contains(&format!("dev {}", pair.dev_a)), "{route}");

    let mut cmd = pair.command_in(&pair.ns_b, "ip");
    cmd.args(["link", "show", "lo"]);
    assert!(output(cmd).contains("UP"));

    let list = netns_list();
    assert!(
        list.contains(&pair.ns_a) && list.contains(&pair.ns_b),
        "{list}"
    );
    let (a, b) = (pair.ns_a.clone(), pair.ns_b.clone());
    drop(pair);
    let list = netns_list();
    assert!(!list.contains(&a) && !list.contains(&b), "{list}");
}

/// Runs this test binary's `udp_helper` inside `side`'s namespace.
fn helper(pair: &VethPair, side: Side, mode: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = pair.command_on(side, exe.to_str().unwrap());
    cmd.args(["udp_helper", "--exact", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, mode)
        .stdin(Stdio::null());
    cmd
}

fn udp_crosses(pair: &VethPair, dst: SocketAddr) {
    let mut recv = helper(pair, Side::B, &format!("recv {dst}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(recv.stdout.take().unwrap()).lines();
    // Wait until the receiver is bound before sending.
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.ends_with("READY")),
        "receiver never got ready"
    );
    let mut cmd = helper(pair, Side::A, &format!("send {dst}"));
    cmd.stdout(Stdio::null());
    output(cmd);
    let got = lines.map_while(Result::ok).any(|l| l.contains("GOT hello"));
    assert!(recv.wait().unwrap().success());
    assert!(got, "datagram to {dst} did not arrive");
}

#[test]
fn udp_datagram_crosses_v4_and_v6() {
    let Some(pair) = flowlab_netns::skip_unless_netns("udp_datagram_crosses_v4_and_v6") else {
        return;
    };
    udp_crosses(&pair, SocketAddr::new(VethPair::ADDR_B.into(), 47001));
    udp_crosses(&pair, SocketAddr::new(VethPair::ADDR6_B.into(), 47002));
}

/// Not a real test: the worker that `udp_crosses` runs inside a namespace.
/// Without the environment variable it does nothing.
#[test]
fn udp_helper() {
    let Ok(mode) = std::env::var(HELPER_ENV) else {
        return;
    };
    let (op, addr) = mode.split_once(' ').unwrap();
    let addr: SocketAddr = addr.parse().unwrap();
    match op {
        "recv" => {
            let sock = UdpSocket::bind(addr).unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            println!("READY");
            let mut buf = [0u8; 64];
            let (n, _) = sock.recv_from(&mut buf).unwrap();
            println!("GOT {}", String::from_utf8_lossy(&buf[..n]));
        }
        "send" => {
            let unspecified: SocketAddr = if addr.is_ipv4() {
                "0.0.0.0:0".parse().unwrap()
            } else {
                "[::]:0".parse().unwrap()
            };
            let sock = UdpSocket::bind(unspecified).unwrap();
            // The receiver is already bound; a few copies cover ARP/ND delays.
            for _ in 0..3 {
                sock.send_to(b"hello", addr).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        _ => panic!("bad helper mode {mode}"),
    }
}

#[test]
fn rate_limit_applies_tbf() {
    let Some(pair) = flowlab_netns::skip_unless_netns("rate_limit_applies_tbf") else {
        return;
    };
    pair.limit_rate(Side::A, 10_000_000, 15_000, 20).unwrap();
    let mut cmd = pair.command_on(Side::A, "tc");
    cmd.args(["qdisc", "show", "dev", &pair.dev_a]);
    let shown = output(cmd);
    assert!(shown.contains("tbf") && shown.contains("10Mbit"), "{shown}");
    // Replacing works too.
    pair.limit_rate(Side::A, 1_000_000, 15_000, 20).unwrap();
}

#[test]
fn qdisc_detection() {
    if let Err(reason) = netns_available() {
        if std::env::var_os("CI").is_some() {
            panic!("qdisc_detection: netns unavailable in CI: {reason}");
        }
        eprintln!("qdisc_detection: skipped: needs root and iproute2 ({reason})");
        assert!(!qdisc_available("tbf"));
        return;
    }
    assert!(qdisc_available("tbf"));
    assert!(qdisc_available("htb"));
    assert!(qdisc_available("ingress"));
    assert!(qdisc_available("u32"));
    // Present or not depending on the kernel; must just answer.
    let netem = qdisc_available("netem");
    let fq = qdisc_available("fq");
    eprintln!("netem available: {netem}, fq available: {fq}");
    assert!(!qdisc_available("no_such_qdisc"));
    // Probes leave nothing behind.
    let mine = format!("flt-{}-", std::process::id());
    let list = netns_list();
    assert!(
        !list
            .lines()
            .any(|l| l.starts_with(&mine) && l.contains("-q")),
        "{list}"
    );
}

#[test]
fn require_netns_macro() {
    fn inner(ran: &mut bool) {
        let pair = flowlab_netns::require_netns!("require_netns_macro");
        assert!(pair.ns_a.starts_with("flt-"));
        *ran = true;
    }
    let mut ran = false;
    inner(&mut ran);
    if netns_available().is_err() {
        assert!(!ran, "macro must return early when skipping");
    }
}
