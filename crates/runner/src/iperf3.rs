//! iperf3 interoperation: `flowlab serve --iperf3` answers iperf3 clients, `flowlab test
//! --iperf3` runs against iperf3 servers. The protocol is `flowlab_iperf3` (sans-IO); this
//! is its sockets, with the engine's senders and flowlab's meters on the streams.

pub mod client;
pub mod server;
pub mod streams;

pub use flowlab_iperf3::DEFAULT_PORT;

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::client::{plan, run_test};
    use super::server::{serve, ServerLimits};

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
            test(target, &lines);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
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
            let second = Some(Duration::from_secs(1));
            let plan = plan(true, true, 2, second, Some(200), Some(400_000)).unwrap();
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
            let long = plan(false, false, 1, Some(Duration::from_secs(301)), None, None).unwrap();
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
    fn a_plan_is_checked_before_it_is_sent() {
        let tiny = plan(false, false, 1, None, Some(8), None).unwrap_err();
        assert_eq!(tiny.to_string(), "invalid iperf3 test: len 8 below 32");
        let udp = plan(true, false, 1, None, None, None).unwrap();
        assert_eq!(
            (udp.block, udp.rate_bps, udp.duration_s),
            (1460, Some(1_048_576), 10)
        );
    }
}
