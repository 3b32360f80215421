//! What an agent allows and how long it waits: its limits, configuration, counters and
//! timeouts.

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::time::Duration;

use crate::admission::ConnLimits;

/// What one test may ask for. The defaults bound what a stranger can make an agent do; an
/// operator lifts each explicitly (`flowlab serve --max-rate unlimited`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_duration: Duration,
    /// Most bit/s of one test, all flows together, held while sending; `None`: no limit.
    pub max_rate_bps: Option<u64>,
    pub max_tests: usize,
    /// Most flows in one test.
    pub max_flows: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_duration: Duration::from_secs(300),
            max_rate_bps: Some(DEFAULT_MAX_RATE_BPS),
            max_tests: 16,
            max_flows: 1024,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    pub limits: Limits,
    /// Pre-shared key: when set, clients must answer the HMAC challenge first.
    pub key: Option<Vec<u8>>,
    /// Whether a controller may have this agent run tests towards other agents (`flowlab
    /// run`); off by default, as it makes this host send to an address the controller names.
    pub allow_relay: bool,
    /// Connections in setup (hello to start), in total and per source.
    pub connections: ConnLimits,
}

/// Counters the agent keeps across sessions.
#[derive(Debug, Default)]
pub struct AgentStats {
    pub sessions: AtomicU64,
    pub tests_run: AtomicU64,
    pub refused: AtomicU64,
    /// Control connections that did not speak the protocol (bad hello, bad frames).
    pub malformed_control: AtomicU64,
    pub active_tests: AtomicUsize,
    /// Connections closed at once: over the caps on connections in setup.
    pub turned_away: AtomicU64,
    /// Test payload bytes the agent's roles sent and received, over finished tests.
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Summaries of the last tests, for the metrics (bounded).
    pub recent: crate::metrics::RecentTests,
}

impl AgentStats {
    /// Counts a finished test's bytes and keeps its summary.
    pub fn record(&self, summary: crate::metrics::TestSummary) {
        use std::sync::atomic::Ordering::Relaxed;
        self.bytes_sent.fetch_add(summary.bytes_sent, Relaxed);
        self.bytes_received
            .fetch_add(summary.bytes_received, Relaxed);
        self.recent.push(summary);
    }
}

/// The default `--max-rate`: a fast host's link, not a data centre's aggregate.
pub const DEFAULT_MAX_RATE_BPS: u64 = 10_000_000_000;
/// How often the agent shows it is alive during a test.
pub(super) const HEARTBEAT: Duration = Duration::from_millis(500);
/// A test ends when its client has sent nothing (it heartbeats) for this long while the
/// agent sends to it or echoes its packets.
pub(super) const CLIENT_SILENCE: Duration = Duration::from_secs(3);
/// The same while the agent only receives or answers requests: nothing goes to a client that
/// has gone, and its heartbeats may queue behind its own traffic on a congested path (TCP's
/// backoff over a full queue takes seconds). The duration limit still ends the test.
pub(super) const CLIENT_SILENCE_RECEIVING: Duration = Duration::from_secs(15);
/// How long a connecting peer may take for each setup step.
pub(super) const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// From connecting to the request, all steps together: a peer dripping bytes holds no
/// connection longer.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// From `accepted` to the client's `start`: an accepted test holds its slot no longer.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);
/// Past its duration limit a test gets this long to finish before the agent stops it.
pub(super) const OVERRUN_GRACE: Duration = Duration::from_secs(5);
