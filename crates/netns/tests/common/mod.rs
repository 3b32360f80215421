//! What the root tests share: running commands, and a UDP datagram crossing between two
//! namespaces, carried by this very test binary run inside them (no ping or nc needed).
#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Set for the copy of the test binary that plays sender or receiver.
pub const HELPER_ENV: &str = "FLOWLAB_NETNS_UDP_HELPER";

/// Runs `cmd`, asserts success, returns its stdout.
pub fn output(mut cmd: Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// This test binary's `udp_helper` test, run inside namespace `ns` in `mode`.
fn helper(ns: &str, mode: &str) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns])
        .arg(exe)
        .args(["udp_helper", "--exact", "--nocapture", "--test-threads=1"])
        .env(HELPER_ENV, mode)
        .stdin(Stdio::null());
    cmd
}

/// Asserts that a datagram sent from namespace `from_ns` reaches `dst` in `to_ns`.
pub fn udp_crosses(from_ns: &str, to_ns: &str, dst: SocketAddr) {
    let mut recv = helper(to_ns, &format!("recv {dst}"))
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
    let mut cmd = helper(from_ns, &format!("send {dst}"));
    cmd.stdout(Stdio::null());
    output(cmd);
    let got = lines.map_while(Result::ok).any(|l| l.contains("GOT hello"));
    assert!(recv.wait().unwrap().success());
    assert!(got, "datagram from {from_ns} to {dst} did not arrive");
}

/// The body of each test binary's `udp_helper`: nothing unless [`HELPER_ENV`] is set.
pub fn udp_worker() {
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
            let any: SocketAddr = if addr.is_ipv4() {
                "0.0.0.0:0".parse().unwrap()
            } else {
                "[::]:0".parse().unwrap()
            };
            let sock = UdpSocket::bind(any).unwrap();
            // The receiver is bound; a few copies cover ARP/ND on every hop.
            for _ in 0..5 {
                sock.send_to(b"hello", addr).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        _ => panic!("bad helper mode {mode}"),
    }
}
