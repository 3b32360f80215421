//! The controller's side of the control protocol (`flowlab run`): clock probes, and tests an
//! agent runs as a client towards another agent.

use std::time::{Duration, Instant};

use crate::protocol::Message;
use flowlab_spec::TestSpec;

use crate::client::{connect_agent, resolve, ClientError};
use crate::conn::Conn;
use crate::host_facts::HostFacts;
use crate::result::TestResult;

/// One NTP-style exchange: controller send (t1), agent receive (t2) and reply (t3),
/// controller receive (t4); CLOCK_REALTIME ns at each end.
pub type TimeExchange = (u64, u64, u64, u64);

/// How long a probe's answer may take: a later one is no use for timing, and waiting longer
/// for one silent agent would keep the others' connections idle past the agent's timeout.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// A control connection to an agent that answers clock probes for as long as it is held
/// (the agent waits up to 10 s between probes): an experiment re-probes on it every few
/// seconds instead of connecting anew. Dropping it says goodbye.
pub struct ClockProbe {
    conn: Conn,
}

impl ClockProbe {
    /// Checks an agent (reachable, same protocol version, key) and opens the connection.
    pub fn connect(target: &str, key: Option<&[u8]>) -> Result<ClockProbe, ClientError> {
        let addr = resolve(target)?;
        Ok(ClockProbe {
            conn: connect_agent(addr, key, None)?,
        })
    }

    /// Takes `probes` exchanges, 5 ms apart.
    pub fn exchange(&mut self, probes: usize) -> Result<Vec<TimeExchange>, ClientError> {
        let setup = |e: crate::conn::ConnError| ClientError::Setup(e.to_string());
        let mut exchanges = Vec::with_capacity(probes);
        for i in 0..probes {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
            let t1_ns = flowlab_sys::clock::realtime_ns();
            self.conn
                .send(&Message::TimeProbe { t1_ns })
                .map_err(setup)?;
            match self.conn.recv(PROBE_TIMEOUT).map_err(setup)? {
                Message::TimeReply {
                    t1_ns: echoed,
                    t2_ns,
                    t3_ns,
                } if echoed == t1_ns => {
                    exchanges.push((t1_ns, t2_ns, t3_ns, flowlab_sys::clock::realtime_ns()));
                }
                Message::Refused { reason } => return Err(ClientError::Refused(reason)),
                other => {
                    return Err(ClientError::Setup(format!(
                        "unexpected '{}' to a time probe",
                        other.kind()
                    )))
                }
            }
        }
        Ok(exchanges)
    }
}

/// Asks the agent at `target` for its tuning facts on the path to this host, checked.
pub fn host_facts(target: &str, key: Option<&[u8]>) -> Result<HostFacts, ClientError> {
    let mut conn = connect_agent(resolve(target)?, key, None)?;
    let setup = |e: crate::conn::ConnError| ClientError::Setup(e.to_string());
    conn.send(&Message::HostQuery).map_err(setup)?;
    match conn.recv(PROBE_TIMEOUT).map_err(setup)? {
        Message::HostFacts { facts } => match facts.check() {
            Ok(()) => Ok(*facts),
            Err(e) => Err(ClientError::Setup(format!("the agent's host facts: {e}"))),
        },
        Message::Refused { reason } => Err(ClientError::Refused(reason)),
        other => Err(ClientError::Setup(format!(
            "unexpected '{}' to a host query",
            other.kind()
        ))),
    }
}

impl Drop for ClockProbe {
    fn drop(&mut self) {
        let _ = self.conn.send(&Message::Finish);
    }
}

/// Has the agent at `agent` run `spec` as a client towards `target`, starting at
/// `start_at_ns` (Unix time), waiting `drain` after the last packet for packets in flight
/// (the agent's default when `None`), and returns the result. `timeout` bounds the whole
/// test.
pub fn relay(
    agent: &str,
    key: Option<&[u8]>,
    target: &str,
    spec: TestSpec,
    start_at_ns: Option<u64>,
    drain: Option<Duration>,
    timeout: Duration,
) -> Result<TestResult, String> {
    let addr = resolve(agent).map_err(|e| e.to_string())?;
    let mut conn = connect_agent(addr, key, None).map_err(|e| e.to_string())?;
    conn.send(&Message::RunTest {
        target: target.to_string(),
        spec,
        start_at_ns,
        drain_ns: drain.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
    })
    .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "agent {agent} gave no result in {:.0} s",
                timeout.as_secs_f64()
            ));
        }
        match conn.poll(left.min(Duration::from_secs(1))) {
            Ok(Some(Message::TestDone { result })) => {
                return serde_json::from_value(result)
                    .map_err(|e| format!("agent {agent} sent a bad result: {e}"))
            }
            Ok(Some(Message::Refused { reason })) => {
                return Err(format!("agent {agent} refused: {reason}"))
            }
            Ok(Some(Message::Error { message })) => {
                return Err(format!("agent {agent}: {message}"))
            }
            Ok(Some(other)) => {
                return Err(format!("unexpected '{}' from agent {agent}", other.kind()))
            }
            Ok(None) => {}
            Err(e) => return Err(format!("agent {agent} lost: {e}")),
        }
    }
}
