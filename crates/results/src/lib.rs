//! The result data model: what one end of a test measured, as plain serialisable data.
//!
//! These types cross the control connection (the agent reports its side to the client) and end
//! up in the client's JSON document (see docs/results-format.md). They hold only finite numbers
//! so that JSON output is always valid.

pub mod meter;
pub mod packet_log;
pub mod schedule_book;
pub mod schedule_watch;

use flowlab_stats::{LatencySummary, LossPeriods, SeqCounts, Summary};
use flowlab_units::format_duration_ns;
use serde::{Deserialize, Serialize};

/// Which part an end played in a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Sender,
    Receiver,
    /// Agent in a loopback test: receives and sends every packet back.
    Echo,
    /// Client of a request/response test.
    Requester,
    /// Agent of a request/response test.
    Responder,
}

/// CPU load of the whole flowlab process and of its host, over the same time as the role's
/// threads ([`RoleCpu`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLoad {
    /// Percent of one core spent by the flowlab process in user mode.
    pub process_user_pct: f64,
    /// Percent of one core spent by the flowlab process in the kernel.
    pub process_system_pct: f64,
    /// Busy share of all cores of the host, 0 to 100.
    pub host_pct: f64,
    /// Softirq share of all cores of the host, 0 to 100: host-wide, whoever's packets it
    /// served. Absent from documents written before it was reported: 0.
    #[serde(default)]
    pub host_softirq_pct: f64,
    /// Softirq share of each CPU of the host, 0 to 100 (empty if CPUs came or went).
    #[serde(default)]
    pub host_softirq_per_cpu_pct: Vec<f64>,
    pub cores: u32,
    /// Largest resident memory of the flowlab process since it started, bytes (ru_maxrss).
    /// Absent from documents written before it was reported: 0.
    #[serde(default)]
    pub process_max_rss_bytes: u64,
}

/// CPU time of the threads that carried an end's role (sender, receiver, echoer, and any
/// worker threads they started), as a share of one core over the role's run: unlike process
/// figures, this separates a client and an agent that share one process (`flowlab demo`).
/// The role's CPU is `user_pct + system_pct` ([`RoleCpu::total_pct`]), pacing spin included.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RoleCpu {
    pub user_pct: f64,
    pub system_pct: f64,
    /// Of the role's CPU, the busy-wait of precise pacing (see `SenderReport::pacing_spin_ns`);
    /// shown apart, never subtracted.
    pub pacing_spin_pct: f64,
    /// The role's CPU time (user + system), ns. Absent from older documents: 0.
    #[serde(default)]
    pub cpu_ns: u64,
    /// The role's run, ns: the denominator of the percentages. Absent from older documents: 0.
    #[serde(default)]
    pub wall_ns: u64,
    /// `cpu_ns` over the test packets the role handled (sent, else received, else echoed;
    /// transactions or responses for request/response roles); null when it handled none.
    #[serde(default)]
    pub ns_per_packet: Option<f64>,
}

impl RoleCpu {
    /// The role's CPU, percent of one core: user + system, pacing spin included.
    pub fn total_pct(&self) -> f64 {
        self.user_pct + self.system_pct
    }
}

/// Packets the sender could not send on time or at all, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostBySender {
    /// The socket's send buffer or the device queue was full (EAGAIN, ENOBUFS).
    pub send_buffer_full: u64,
    /// The sender woke too late for the packet's slot and skipped it to keep the schedule.
    pub missed_slots: u64,
    /// Any other send error.
    pub send_errors: u64,
}

impl LostBySender {
    pub fn total(&self) -> u64 {
        self.send_buffer_full + self.missed_slots + self.send_errors
    }
}

/// How packets were handed to the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Batching {
    pub syscalls: u64,
    pub mean_batch: f64,
    pub max_batch: u64,
    /// UDP generic segmentation offload in use.
    pub gso: bool,
    /// Datagrams left as whole frames through a packet socket (`--packet-socket`), past the
    /// kernel's UDP and IP send path.
    #[serde(default)]
    pub packet_socket: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SenderReport {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub lost_by_sender: LostBySender,
    /// From the first to the last packet handed to the kernel.
    pub duration_ns: u64,
    /// Actual minus scheduled send time of each packet ("pacing fidelity"); absent at max rate.
    pub schedule_error: Option<LatencySummary>,
    /// Kernel transmit timestamp minus scheduled time, per packet (`--tx-timestamps`): when
    /// packets really left the stack, not when the application handed them over.
    pub departure_error: Option<LatencySummary>,
    /// Of those, packets the NIC stamped too (hardware timestamps).
    pub hardware_departures: u64,
    pub batching: Batching,
    /// CPU time spent busy-waiting the last microseconds before each deadline: the cost of
    /// precise pacing, included in the CPU figures, reported apart so it can be discounted.
    pub pacing_spin_ns: u64,
    /// How the sender waited for its deadlines and what that cost (paced flows; absent
    /// from documents written before `--pacing`).
    #[serde(default)]
    pub pacing: Option<PacingReport>,
    /// Per-flow figures when the test carried more than one flow.
    pub flows: Vec<FlowSenderSummary>,
    /// Flows shaped to a token-bucket contract: how they stood against it.
    pub contract: Option<ContractConformance>,
}

/// How a paced sender waited for its deadlines (`--pacing`): the strategy its planner chose
/// from the deadlines' spacing and its sleeps' wake-up latency, and the CPU the waits took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacingReport {
    pub mode: flowlab_traffic::PacingMode,
    /// The strategy of most waits: `spin`, `sleep_spin`, `sleep` or `kernel_txtime`.
    pub strategy: String,
    /// The spin margin (or the kernel's lead) the planner settled on last, ns.
    pub margin_ns: u64,
    /// Waits for a deadline, and of them the ones that slept.
    pub waits: u64,
    pub sleeps: u64,
    /// Wake-up latency of the sleeps (how late a sleep ended), median and 99th percentile of
    /// the last ones, ns; null if none slept.
    pub wake_latency_p50_ns: Option<u64>,
    pub wake_latency_p99_ns: Option<u64>,
    /// CPU time of the waits (the sleeps' system calls and the spins), ns, and as a share of
    /// one core over the sender's run.
    pub cpu_ns: u64,
    pub cpu_pct: f64,
}

impl PacingReport {
    /// Adds another event loop's pacing (a sender with many flows runs several side by side):
    /// waits and CPU add up, the latencies are the worse loop's, the strategy the busier one's.
    pub fn merge(&mut self, other: &PacingReport) {
        if other.waits > self.waits {
            self.strategy.clone_from(&other.strategy);
            self.margin_ns = other.margin_ns;
        }
        self.waits += other.waits;
        self.sleeps += other.sleeps;
        self.wake_latency_p50_ns = self.wake_latency_p50_ns.max(other.wake_latency_p50_ns);
        self.wake_latency_p99_ns = self.wake_latency_p99_ns.max(other.wake_latency_p99_ns);
        self.cpu_ns += other.cpu_ns;
        self.cpu_pct += other.cpu_pct;
    }
}

/// The mode, the strategy its planner chose and what the waits cost, as a person reads it:
/// "auto: sleep, then spin the last 45.0 µs (wake-up p50 12.0 µs, p99 40.0 µs); waits 1.2% of
/// one core".
impl std::fmt::Display for PacingReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let margin = format_duration_ns(self.margin_ns as f64);
        let how = match self.strategy.as_str() {
            "spin" => "spin to each deadline".to_string(),
            "sleep_spin" => format!("sleep, then spin the last {margin}"),
            "sleep" => "sleep to each deadline".to_string(),
            "kernel_txtime" => format!("wake {margin} early, the kernel sends on time"),
            other => other.to_string(),
        };
        write!(f, "{}: {how}", self.mode)?;
        if let (Some(p50), Some(p99)) = (self.wake_latency_p50_ns, self.wake_latency_p99_ns) {
            write!(
                f,
                " (wake-up p50 {}, p99 {})",
                format_duration_ns(p50 as f64),
                format_duration_ns(p99 as f64)
            )?;
        }
        write!(f, "; waits {:.1}% of one core", self.cpu_pct)
    }
}

/// How a sender's contract-shaped flows stood against their contract.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ContractConformance {
    pub contract: flowlab_traffic::ContractParams,
    /// Flows held to it (each with its own buckets).
    pub flows: u32,
    /// What the shapers did, summed over those flows: packets, those held back to conform and
    /// the longest hold, and packets of the unshaped sources a policer would have refused.
    pub shaper: flowlab_traffic::ContractReport,
    /// Measured on the application's send times, per flow: the largest excess, in bytes, of
    /// any run of sent packets over a bucket's depth plus its rate times the run's span.
    /// 0: the flow as sent conformed; a few bytes: send-time jitter.
    pub max_excess_bytes: u64,
}

/// One flow's share of a multi-flow sender.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowSenderSummary {
    pub flow: u32,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub lost_by_sender: LostBySender,
    pub duration_ns: u64,
}

/// One flow's share of a multi-flow receiver.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowReceiverSummary {
    pub flow: u32,
    pub packets: SeqCounts,
    pub bytes_received: u64,
    pub duration_ns: u64,
    /// Payload bit/s over this flow's own receiving span, as the test's goodput over all flows
    /// (absent from documents of flowlab before 0.16: 0).
    #[serde(default)]
    pub goodput_bps: f64,
    /// Lost packets of this flow in percent of those it was due (received and lost).
    #[serde(default)]
    pub loss_pct: f64,
    pub jitter_ns: f64,
    /// Mean one-way delay of this flow above the smallest delay of any flow.
    pub mean_relative_delay_ns: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiverReport {
    pub packets: SeqCounts,
    pub bytes_received: u64,
    /// Datagrams that were not flowlab probes of this session; ignored.
    pub malformed: u64,
    /// Drops at the receiving socket's buffer (SO_RXQ_OVFL); absent where the kernel does not tell.
    pub socket_buffer_drops: Option<u64>,
    /// From the first to the last arrival.
    pub duration_ns: u64,
    /// Receive minus send timestamp, minus its minimum: valid without synchronised clocks.
    pub relative_delay: Option<LatencySummary>,
    /// The smallest receive-minus-send timestamp itself, ns: the one-way delay plus the offset
    /// between the two ends' clocks. With the offset known (`flowlab run`), it gives absolute
    /// one-way delays.
    pub transit_min_ns: Option<i64>,
    /// Loopback tests at the client: arrival of the echo minus send time, one clock.
    pub round_trip: Option<LatencySummary>,
    /// Loopback tests at the client: arrival of the echo minus when its packet was due, so a
    /// late send counts its lateness (coordinated omission); absent at max rate.
    #[serde(default)]
    pub round_trip_from_schedule: Option<LatencySummary>,
    /// RFC 3550 interarrival jitter.
    pub jitter_ns: f64,
    pub inter_arrival: Option<Summary>,
    /// The inter-arrival gaps' distribution, with percentiles, all flows together.
    #[serde(default)]
    pub inter_arrival_distribution: Option<LatencySummary>,
    /// RFC 3393 IP packet delay variation: D(n+1) − D(n) of consecutive packets of a flow that
    /// arrive in order (the delay variation between neighbours; RFC 5481's PDV, delay above
    /// the minimum, is `relative_delay`).
    #[serde(default)]
    pub ipdv: Option<LatencySummary>,
    /// RFC 3357 loss periods and loss distance, over all flows; `None` without loss.
    #[serde(default)]
    pub loss_periods: Option<LossPeriods>,
    /// "kernel" when arrival times are SO_TIMESTAMPNS receive stamps, "user" when read in the
    /// application, "virtual" when they are a simulator's virtual clock.
    pub arrival_clock: String,
    /// The kernel coalesced datagrams (UDP GRO) on the way up: arrival times are then per
    /// coalesced train.
    pub gro: bool,
    /// Per-flow figures when the test carried more than one flow.
    pub flows: Vec<FlowReceiverSummary>,
    /// `--omit`: what the warm-up left out of every figure above; `None` without one.
    #[serde(default)]
    pub warmup: Option<Warmup>,
}

/// What a test's warm-up (`--omit`) left out of a receiver's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warmup {
    /// Packets that arrived from it, left out.
    pub packets_received: u64,
    /// Sequence numbers it spanned, all flows together: what the sender sent in it, as far as
    /// the receiver can tell. The summary takes them off the packets sent.
    pub packets_sent: u64,
}

/// What the requesting end of a request/response test measured (netperf's RR and CRR).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransactionReport {
    /// Completed transactions: request sent, whole response read.
    pub transactions: u64,
    /// From the first request to the last response, ns.
    pub duration_ns: u64,
    pub transactions_per_sec: f64,
    /// Per transaction: first request byte written to last response byte read (CRR: the
    /// connection's setup not included, see `connect`).
    pub latency: Option<LatencySummary>,
    /// CRR: time to establish each connection (connect() call to established).
    pub connect: Option<LatencySummary>,
    /// CRR: connections established.
    pub connects: u64,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// Transactions whose response did not come within the timeout (UDP: a lost request or
    /// response), or was cut off at the end of the test.
    pub timeouts: u64,
    /// Transactions that failed otherwise (connection refused or reset, a malformed response).
    pub errors: u64,
}

/// What the answering end of a request/response test did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponderReport {
    pub requests: u64,
    pub request_bytes: u64,
    pub responses: u64,
    pub response_bytes: u64,
    /// Data connections accepted (CRR: one per transaction).
    pub connections: u64,
    /// Requests that were not well-formed requests of this session, or asked for a response
    /// outside the limits: counted and not answered.
    pub malformed: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EchoReport {
    pub packets_echoed: u64,
    pub bytes_echoed: u64,
    pub malformed: u64,
    pub socket_buffer_drops: Option<u64>,
}

/// TCP_INFO of the data connection at the end of the test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TcpInfoReport {
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub snd_cwnd: u32,
    pub total_retrans: u32,
    pub pacing_rate_bps: u64,
    pub delivery_rate_bps: u64,
    pub snd_mss: u32,
}

/// Packets the queueing disciplines of an end's egress interface dropped during the test: the
/// root qdisc's drop counter (a qdisc tree counts its children's drops at its root, as
/// `tc -s qdisc` shows) read over rtnetlink before and after. It counts every packet that
/// interface dropped, the test's and any other traffic's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostQdiscDrops {
    /// The egress interface towards the other end.
    pub interface: String,
    /// Kind of its root qdisc ("tbf", "fq_codel", ...).
    pub qdisc: String,
    pub drops: u64,
}

/// Everything one end measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    pub role: Role,
    pub host: String,
    pub cpu: Option<CpuLoad>,
    pub role_cpu: Option<RoleCpu>,
    pub sender: Option<SenderReport>,
    pub receiver: Option<ReceiverReport>,
    pub echo: Option<EchoReport>,
    /// Request/response tests: the client's transactions and the agent's answers.
    pub transactions: Option<TransactionReport>,
    pub responder: Option<ResponderReport>,
    pub tcp_info: Option<TcpInfoReport>,
    /// Drops in this end's egress qdiscs during the test, where rtnetlink could read them.
    #[serde(default)]
    pub host_qdisc_drops: Option<HostQdiscDrops>,
    /// Why this end stopped early, if it did.
    pub error: Option<String>,
    /// What this end could not set up as asked (socket options the kernel refused, ...).
    pub notes: Vec<String>,
}

impl SideReport {
    /// An end that has measured nothing yet: a driver fills in what its role measures.
    pub fn new(role: Role, host: String) -> Self {
        SideReport {
            role,
            host,
            cpu: None,
            role_cpu: None,
            sender: None,
            receiver: None,
            echo: None,
            transactions: None,
            responder: None,
            tcp_info: None,
            host_qdisc_drops: None,
            error: None,
            notes: Vec::new(),
        }
    }
}

/// One live interval of the receiving (or echo-receiving) end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalReport {
    pub index: u64,
    /// Interval bounds, from the start of the test.
    pub start_ns: u64,
    pub end_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    /// Sequence gaps opened in this interval: packets missing when a later one arrived. A
    /// reordered arrival may fill one later (counted in `reordered` of its own interval), so
    /// the final loss is the summary's, not the sum of these.
    pub lost: u64,
    /// Arrivals in this interval that filled an earlier gap (reordered packets).
    pub reordered: u64,
    pub throughput_bps: f64,
    pub packets_per_sec: f64,
    /// Relative one-way delay, or round-trip delay in loopback tests.
    pub delay: Option<LatencySummary>,
    pub jitter_ns: f64,
    pub tcp_info: Option<TcpInfoReport>,
    /// The sender's actual minus scheduled send times since the previous interval, where the
    /// client sends paced packets (absent from documents written before it was kept).
    #[serde(default)]
    pub schedule_error: Option<LatencySummary>,
}

/// One packet's fate, for `--packet-log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketRecord {
    /// Flow index within the test (0 for single-flow tests).
    pub flow: u32,
    pub seq: u64,
    pub size: u32,
    pub sent_ns: Option<u64>,
    pub received_ns: Option<u64>,
    pub echoed_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_says_the_strategy_the_wake_ups_and_the_cpu() {
        let mut p = PacingReport {
            mode: flowlab_traffic::PacingMode::Auto,
            strategy: "sleep_spin".into(),
            margin_ns: 45_000,
            waits: 5_000,
            sleeps: 4_990,
            wake_latency_p50_ns: Some(12_000),
            wake_latency_p99_ns: Some(40_000),
            cpu_ns: 120_000_000,
            cpu_pct: 1.2,
        };
        assert_eq!(
            p.to_string(),
            "auto: sleep, then spin the last 45.0 µs (wake-up p50 12.0 µs, p99 40.0 µs); \
             waits 1.2% of one core"
        );
        p.strategy = "spin".into();
        (p.wake_latency_p50_ns, p.wake_latency_p99_ns) = (None, None);
        assert_eq!(
            p.to_string(),
            "auto: spin to each deadline; waits 1.2% of one core"
        );
    }
}
