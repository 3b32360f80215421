//! iperf3 interoperation: `flowlab serve --iperf3` answers iperf3 clients, `flowlab test
//! --iperf3` runs against iperf3 servers. The protocol is `flowlab_iperf3` (sans-IO); this
//! is its sockets, with the engine's senders and flowlab's meters on the streams.

pub mod client;
pub mod server;
pub mod streams;

pub use flowlab_iperf3::DEFAULT_PORT;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use flowlab_control::{client::resolve_with_port, AgentConfig};

/// `flowlab serve --iperf3 [[ADDR:]PORT]`: when `at` is given, answers iperf3 clients on
/// it (a bare port on `bind`'s address) beside the agent, with the agent's limits, until
/// Ctrl-C; says where. `quiet` logs only refusals.
pub fn serve_beside(
    at: Option<&str>,
    bind: IpAddr,
    agent: &AgentConfig,
    quiet: bool,
) -> anyhow::Result<()> {
    let Some(at) = at else { return Ok(()) };
    let addr = match at.parse::<u16>() {
        Ok(port) => SocketAddr::new(bind, port),
        Err(_) => resolve_with_port(at, DEFAULT_PORT)?,
    };
    let limits = server::ServerLimits::of_agent(&agent.limits, agent.connections.max_connections);
    let log = Arc::new(move |line: String| {
        if !quiet || line.contains("refused") {
            eprintln!("flowlab: {line}");
        }
    });
    let (_, local) = server::spawn(addr, limits, log)?;
    eprintln!("flowlab: answering iperf3 clients on {local} (TCP and UDP)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::client::{plan_of, run_test};
    use super::server::{serve, ServerLimits};
    use flowlab_iperf3::TestPlan;
    use flowlab_spec::{Direction, Protocol, TestSpec};

    /// A server on a loopback port until the test ends, and the lines it logged.
    fn with_server(test: impl FnOnce(String, &Mutex<Vec<String>>)) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = listener.local_addr().unwrap().to_string();
        let limits = ServerLimits::of_agent(&flowlab_control::Limits::default(), 8);
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let logged = Arc::clone(&lines);
            let log = Arc::new(move |line: String| logged.lock().unwrap().push(line));
            scope.spawn(|| serve(listener, limits, &stop, log));
            // Set even when the test panics, so the scope can join the server and the
            // failure shows instead of a hang.
            let _stop = StopOnDrop(&stop);
            test(target, &lines);
        });
    }

    struct StopOnDrop<'a>(&'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn wait_for_line(lines: &Mutex<Vec<String>>) -> String {
        for _ in 0..200 {
            if let Some(line) = lines.lock().unwrap().pop() {
                return line;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the server logged nothing");
    }

    #[test]
    fn flowlabs_client_and_server_agree_on_a_reverse_udp_test() {
        with_server(|target, lines| {
            let plan = TestPlan {
                udp: true,
                reverse: true,
                streams: 2,
                duration_s: 1,
                block: 200,
                rate_bps: Some(400_000),
                counters_64bit: false,
            };
            let run = run_test(
                &target,
                &plan,
                Duration::from_millis(200),
                &AtomicBool::new(false),
            );
            let summary = run.unwrap().result.summary;
            // 400 kbit/s of 200-byte datagrams is 250 a second per stream.
            assert!((480..=520).contains(&summary.packets_sent), "{summary:?}");
            assert_eq!(summary.packets_received, summary.packets_sent);
            let line = wait_for_line(lines);
            let expected = format!(
                "sent {} B in {} packets",
                summary.bytes_sent, summary.packets_sent
            );
            assert!(line.ends_with(&expected), "{line}");
        });
    }

    #[test]
    fn the_server_refuses_what_its_limits_do_not_allow() {
        with_server(|target, lines| {
            let spec = TestSpec {
                duration_ns: Some(301_000_000_000),
                ..TestSpec::new(Protocol::Tcp, Direction::Oneway)
            };
            let long = plan_of(&spec).unwrap();
            let err = run_test(&target, &long, Duration::ZERO, &AtomicBool::new(false));
            let message = err.unwrap_err().to_string();
            assert_eq!(
                message,
                "the iperf3 server refused the test (iperf3 error number 5)"
            );
            let line = wait_for_line(lines);
            assert!(
                line.ends_with("refused or failed: time 301 is not 0 to 300"),
                "{line}"
            );
        });
    }

    #[test]
    fn a_flowlab_test_becomes_an_iperf3_plan_or_a_clear_refusal() {
        let udp = plan_of(&TestSpec::new(Protocol::Udp, Direction::Reverse)).unwrap();
        assert_eq!((udp.udp, udp.reverse, udp.streams), (true, true, 1));
        let tiny = TestSpec {
            size: 8,
            ..TestSpec::new(Protocol::Tcp, Direction::Oneway)
        };
        let refused = plan_of(&tiny).unwrap_err().to_string();
        assert_eq!(refused, "invalid iperf3 test: len 8 below 32");
        let loopback = plan_of(&TestSpec::new(Protocol::Udp, Direction::Loopback));
        let refused = loopback.unwrap_err().to_string();
        assert_eq!(
            refused,
            "invalid iperf3 test: loopback mode not supported against iperf3"
        );
    }
}
