//! What an agent does for a controller (`flowlab run`, `flowlab doctor`): answers clock probes
//! and host queries, and with `--allow-relay` runs a test as a client towards another agent.

use std::time::Duration;

use flowlab_spec::TestSpec;

use super::config::{AgentConfig, SETUP_TIMEOUT};
use crate::client::{ClientError, TestOptions};
use crate::conn::{Conn, ConnError};
use crate::protocol::Message;

/// Sends this host's tuning facts on the path towards `peer` (the control connection's
/// other end: a query names no address).
pub(super) fn answer_host_query(conn: &mut Conn, peer: std::net::IpAddr) -> Result<(), String> {
    let facts = Box::new(crate::host_facts::HostFacts::gather(peer));
    conn.send(&Message::HostFacts { facts })
        .map_err(|e| e.to_string())
}

/// Answers clock probes until the controller hangs up: each reply carries the receive and
/// send times of this host's CLOCK_REALTIME. An experiment's controller holds this connection
/// for the whole run and re-probes every few seconds (at most `SETUP_TIMEOUT` apart); it
/// keeps its admission place meanwhile, so probe sessions stay capped per source.
pub(super) fn answer_time_probes(conn: &mut Conn, first_t1: u64) -> Result<(), String> {
    let mut t1_ns = first_t1;
    loop {
        let t2_ns = flowlab_sys::clock::realtime_ns();
        let t3_ns = flowlab_sys::clock::realtime_ns();
        conn.send(&Message::TimeReply {
            t1_ns,
            t2_ns,
            t3_ns,
        })
        .map_err(|e| e.to_string())?;
        match conn.recv(SETUP_TIMEOUT) {
            Ok(Message::TimeProbe { t1_ns: next }) => t1_ns = next,
            Ok(Message::Finish) | Err(ConnError::Closed) => return Ok(()),
            Ok(other) => return Err(format!("expected a time probe, got '{}'", other.kind())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// A relayed test waits this long for packets in flight unless the controller says.
const RELAY_DRAIN: Duration = Duration::from_millis(500);
/// The longest wait for packets in flight a controller may ask of a relayed test.
const MAX_RELAY_DRAIN: Duration = Duration::from_secs(10);

/// The wait for packets in flight a controller asked for (`None`: the default), refused
/// above [`MAX_RELAY_DRAIN`].
pub(super) fn relay_drain(drain_ns: Option<u64>) -> Result<Duration, String> {
    let drain = drain_ns.map_or(RELAY_DRAIN, Duration::from_nanos);
    if drain > MAX_RELAY_DRAIN {
        return Err(format!(
            "a wait of {:.1} s for packets in flight is above the limit of {} s",
            drain.as_secs_f64(),
            MAX_RELAY_DRAIN.as_secs()
        ));
    }
    Ok(drain)
}

/// Runs a controller's test as a client towards another agent from `start_at_ns`, waiting
/// `drain` after the last packet, and returns its result. The traffic goes between the two
/// agents only: each sends to the end that connected to it.
pub(super) fn relay_test(
    conn: &mut Conn,
    config: &AgentConfig,
    target: &str,
    spec: TestSpec,
    (start_at_ns, drain): (Option<u64>, Duration),
    log: &dyn Fn(String),
) -> Result<(), String> {
    if let Some(at) = start_at_ns {
        let wait = at.saturating_sub(flowlab_sys::clock::realtime_ns());
        std::thread::sleep(Duration::from_nanos(wait.min(60_000_000_000)));
    }
    log(format!("relayed test towards {target}"));
    let options = TestOptions {
        target: target.to_string(),
        spec,
        key: config.key.clone(),
        drain,
        interface: None,
        agent_interface: None,
        bind: None,
        cport: None,
    };
    let result = match crate::client::run_test(&options, &mut |_| {}) {
        Ok(run) => serde_json::to_value(&run.result).map_err(|e| e.to_string())?,
        Err(e) => {
            let _ = conn.send(&Message::Error {
                message: relay_error(&e),
            });
            return Err(format!("relayed test failed: {e}"));
        }
    };
    conn.send(&Message::TestDone { result })
        .map_err(|e| e.to_string())
}

/// What a controller learns of a relayed test that failed. A target that never spoke flowlab
/// gets one answer whatever it was (closed, open, filtered or keyed port, unresolvable), so
/// a relay cannot be used as a port scanner.
fn relay_error(e: &ClientError) -> String {
    match e {
        ClientError::Target(_) | ClientError::Connect { .. } | ClientError::NotAnAgent { .. } => {
            "the target did not answer as a flowlab agent".into()
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_controller_may_ask_a_longer_wait_within_the_limit() {
        assert_eq!(relay_drain(None), Ok(RELAY_DRAIN));
        assert_eq!(relay_drain(Some(2_000_000_000)), Ok(Duration::from_secs(2)));
        assert_eq!(
            relay_drain(Some(3_600_000_000_000)).unwrap_err(),
            "a wait of 3600.0 s for packets in flight is above the limit of 10 s"
        );
    }
}
