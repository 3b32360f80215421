//! The client's result document: both sides' reports, the combined figures a person reads
//! first, live intervals, and what went wrong. Documented in docs/results-format.md.

use flowlab_results::{
    CpuLoad, IntervalReport, ReceiverReport, Role, RoleCpu, SideReport, TransactionReport,
};
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_stats::{rate_over_span, LatencySummary, LossPeriods, SeqCounts, Summary};
use serde::{Deserialize, Serialize};

/// Version of the result document's layout; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Bytes of headers below the payload counted in "wire" throughput: UDP 8 or TCP 20 + 12
/// (timestamps option), IP 20 (v4) or 40 (v6), Ethernet 14 + FCS 4.
const ETHERNET_OVERHEAD: u64 = 18;

/// Most datagrams the kernel coalesces into one GRO buffer (UDP_GRO_CNT_MAX).
pub const GRO_MAX_SEGMENTS: u64 = 64;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    pub schema_version: u32,
    pub flowlab_version: String,
    /// Unix time of the start, in ns.
    pub started_at_ns: u64,
    /// The agent as the user named it, and the address it resolved to.
    pub target: String,
    pub agent_address: String,
    pub spec: TestSpec,
    pub summary: Summary2,
    pub client: Option<SideReport>,
    pub agent: Option<SideReport>,
    /// Live intervals of the receiving end (the echo-receiving client in loopback tests).
    pub intervals: Vec<IntervalReport>,
    /// The user stopped the test (Ctrl-C): the figures cover what ran.
    pub interrupted: bool,
    /// Why the test ended early, if it did; the figures cover what was measured before.
    pub error: Option<String>,
}

/// Where a test ran: the agent as the user named it and as it was reached, and when.
pub struct Origin {
    pub target: String,
    pub agent_address: String,
    /// The test ran over IPv6 (the summary's header overhead).
    pub ipv6: bool,
    /// Unix time of the start, in ns.
    pub started_at_ns: u64,
}

impl TestResult {
    /// The result of a test from its ends' reports, with the summary combined from them:
    /// no intervals, not interrupted, and the first end's error, until the caller says more.
    pub fn new(
        spec: TestSpec,
        origin: Origin,
        client: Option<SideReport>,
        agent: Option<SideReport>,
    ) -> TestResult {
        let summary = Summary2::combine(&spec, client.as_ref(), agent.as_ref(), origin.ipv6);
        let error = [&client, &agent]
            .into_iter()
            .find_map(|end| end.as_ref().and_then(|e| e.error.clone()));
        TestResult {
            schema_version: SCHEMA_VERSION,
            flowlab_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at_ns: origin.started_at_ns,
            target: origin.target,
            agent_address: origin.agent_address,
            spec,
            summary,
            client,
            agent,
            intervals: Vec::new(),
            interrupted: false,
            error,
        }
    }
}

/// The combined figures, from the sending and receiving ends together.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename = "Summary")]
pub struct Summary2 {
    /// Which end sent the flow: "client" or "agent".
    pub sender: String,
    pub duration_s: f64,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub lost_by_sender: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    /// Lost between the sender's socket and the receiving application: sent minus received.
    pub packets_lost: u64,
    pub loss_pct: f64,
    pub reordered: u64,
    pub duplicates: u64,
    /// Of the lost packets, those dropped at a receiving socket's buffer (in loopback tests
    /// the agent's echo socket too): exact, null when unknown (TCP, the kernel did not tell,
    /// or GRO buffers were dropped: see the bounds below).
    pub lost_at_receiver_socket: Option<u64>,
    /// Receive buffers those sockets dropped, as the kernel counts them (SO_MEMINFO, the
    /// SO_RXQ_OVFL counter): a datagram each, or up to [`GRO_MAX_SEGMENTS`] under GRO, so
    /// the least number of packets dropped there.
    pub receive_buffers_dropped: Option<u64>,
    /// The most packets those buffers can have held: `lost_at_receiver_socket` when that is
    /// known, else [`GRO_MAX_SEGMENTS`] per buffer, at most the packets lost.
    pub lost_at_receiver_socket_max: Option<u64>,
    /// UDP and native frames: of the lost packets, those the sending host's own egress qdisc
    /// dropped (its drop counter over the test, at most `packets_lost`; see
    /// `SideReport::host_qdisc_drops`), and the rest, lost beyond the sending host. `None`
    /// where the sender's qdisc could not be read.
    #[serde(default)]
    pub lost_in_sender_qdisc: Option<u64>,
    #[serde(default)]
    pub lost_beyond_sender: Option<u64>,
    /// TCP only: messages written by the sender but still in socket buffers or in flight when
    /// the test stopped (TCP loses nothing; these simply were not delivered in time).
    pub tcp_unreceived_at_end: Option<u64>,
    pub sender_throughput_bps: f64,
    pub sender_packets_per_sec: f64,
    /// Payload (goodput) and on-the-wire throughput at the receiver; see `wire_headers`.
    pub receiver_goodput_bps: f64,
    pub receiver_wire_throughput_bps: f64,
    pub receiver_packets_per_sec: f64,
    /// Which headers `receiver_wire_throughput_bps` counts.
    pub wire_headers: String,
    pub relative_one_way_delay: Option<LatencySummary>,
    /// Loopback: every packet's round trip; `--echo-every`: the echoed packets'. Timed from
    /// each packet's actual departure.
    pub round_trip: Option<LatencySummary>,
    /// The same round trips timed from each packet's scheduled send time, so a late send
    /// counts its lateness (coordinated omission); absent at max rate.
    #[serde(default)]
    pub round_trip_from_schedule: Option<LatencySummary>,
    /// `--echo-every N`: the echoes the client was due and got, numbered by echo (echo k is
    /// packet k·N).
    #[serde(default)]
    pub echoes: Option<SeqCounts>,
    pub jitter_ns: Option<f64>,
    pub inter_arrival: Option<Summary>,
    #[serde(default)]
    pub inter_arrival_distribution: Option<LatencySummary>,
    /// RFC 3393 IPDV of consecutive packets (see `ReceiverReport::ipdv`).
    #[serde(default)]
    pub ipdv: Option<LatencySummary>,
    /// RFC 3357 loss periods.
    #[serde(default)]
    pub loss_periods: Option<LossPeriods>,
    pub arrival_clock: Option<String>,
    pub schedule_error: Option<LatencySummary>,
    pub client_cpu: Option<CpuLoad>,
    pub agent_cpu: Option<CpuLoad>,
    /// CPU of the threads that ran each end's role (separates ends that share a process).
    pub client_role_cpu: Option<RoleCpu>,
    pub agent_role_cpu: Option<RoleCpu>,
    /// Request/response tests: the client's transactions (see docs/results-format.md).
    pub transactions: Option<TransactionReport>,
}

/// Header bytes below the payload per packet, and how they are named.
/// Header bytes per message on the wire, and which headers: `mean_message` is the mean
/// application message (the model's messages, not the `--size` default, when a traffic model
/// decides sizes).
fn header_overhead(
    spec: &TestSpec,
    mean_message: f64,
    ipv6: bool,
    mss: Option<u32>,
) -> (f64, String) {
    let ip = if ipv6 { 40 } else { 20 };
    let ip_name = if ipv6 { "IPv6 40" } else { "IPv4 20" };
    match spec.protocol {
        Protocol::Raw => (
            ETHERNET_OVERHEAD as f64,
            "Ethernet 14 + FCS 4 bytes per frame (native frames: no IP, no UDP)".to_string(),
        ),
        Protocol::Icmp => (
            (8 + ip + ETHERNET_OVERHEAD) as f64,
            format!("ICMP 8 + {ip_name} + Ethernet 14 + FCS 4 bytes per echo (IP fragments not counted)"),
        ),
        Protocol::Udp => (
            (8 + ip + ETHERNET_OVERHEAD) as f64,
            format!("UDP 8 + {ip_name} + Ethernet 14 + FCS 4 bytes per datagram (IP fragments not counted)"),
        ),
        Protocol::Tcp => {
            let mss = f64::from(mss.filter(|&m| m > 0).unwrap_or(1448));
            let segments_per_message = (mean_message / mss).ceil().max(1.0);
            (
                segments_per_message * (32 + ip + ETHERNET_OVERHEAD) as f64,
                format!("TCP 32 + {ip_name} + Ethernet 14 + FCS 4 bytes per segment of MSS {mss} bytes"),
            )
        }
    }
}

impl Summary2 {
    /// Combines the two sides. `ipv6` tells the header overhead.
    pub fn combine(
        spec: &TestSpec,
        client: Option<&SideReport>,
        agent: Option<&SideReport>,
        ipv6: bool,
    ) -> Summary2 {
        let (sending, receiving, sender_name) = match spec.direction {
            Direction::Oneway => (client, agent, "client"),
            Direction::Reverse => (agent, client, "agent"),
            Direction::Loopback => (client, client, "client"),
        };
        let sent = sending.and_then(|s| s.sender.as_ref());
        let received = receiving.and_then(|r| r.receiver.as_ref());
        let mut s = Summary2 {
            sender: sender_name.to_string(),
            client_cpu: client.and_then(|c| c.cpu.clone()),
            agent_cpu: agent.and_then(|a| a.cpu.clone()),
            client_role_cpu: client.and_then(|c| c.role_cpu),
            agent_role_cpu: agent.and_then(|a| a.role_cpu),
            transactions: client.and_then(|c| c.transactions.clone()),
            ..Summary2::default()
        };
        if let Some(t) = &s.transactions {
            s.duration_s = t.duration_ns as f64 / 1e9;
        }
        if let Some(sent) = sent {
            s.packets_sent = sent.packets_sent;
            s.bytes_sent = sent.bytes_sent;
            s.lost_by_sender = sent.lost_by_sender.total();
            s.sender_throughput_bps =
                rate_over_span(sent.bytes_sent * 8, sent.packets_sent, sent.duration_ns);
            s.sender_packets_per_sec =
                rate_over_span(sent.packets_sent, sent.packets_sent, sent.duration_ns);
            s.schedule_error = sent.schedule_error;
            s.duration_s = sent.duration_ns as f64 / 1e9;
        }
        // `--omit`: loss counts what was sent after the warm-up.
        let warmup = received
            .and_then(|r| r.warmup)
            .map_or(0, |w| w.packets_sent);
        if let Some(r) = received {
            let unique = r.packets.unique;
            s.packets_received = unique;
            s.bytes_received = r.bytes_received;
            let unreceived = s.packets_sent.saturating_sub(warmup + unique);
            s.packets_lost = match (spec.protocol, sent) {
                // TCP delivers everything it accepted: what the receiver lacks at the end was
                // still in buffers when the test stopped, not lost.
                (Protocol::Tcp, _) => {
                    s.tcp_unreceived_at_end = Some(unreceived);
                    r.packets.lost
                }
                (Protocol::Udp | Protocol::Raw | Protocol::Icmp, Some(_)) => unreceived,
                (Protocol::Udp | Protocol::Raw | Protocol::Icmp, None) => r.packets.lost,
            };
            s.reordered = r.packets.reordered;
            s.duplicates = r.packets.duplicates;
            s.set_socket_drops(spec, r, agent);
            if spec.protocol != Protocol::Tcp {
                s.attribute_loss(sending_hosts(spec, client, agent));
            }
            let mss = sending.and_then(|x| x.tcp_info).map(|t| t.snd_mss);
            let mean_message = match unique {
                0 => f64::from(spec.size),
                n => r.bytes_received as f64 / n as f64,
            };
            let (overhead, names) = header_overhead(spec, mean_message, ipv6, mss);
            s.receiver_goodput_bps = rate_over_span(r.bytes_received * 8, unique, r.duration_ns);
            s.receiver_packets_per_sec = rate_over_span(unique, unique, r.duration_ns);
            s.receiver_wire_throughput_bps =
                s.receiver_goodput_bps + s.receiver_packets_per_sec * overhead * 8.0;
            s.wire_headers = names;
            s.relative_one_way_delay = r.relative_delay;
            s.round_trip = r.round_trip;
            s.round_trip_from_schedule = r.round_trip_from_schedule;
            s.jitter_ns = Some(r.jitter_ns);
            s.inter_arrival = r.inter_arrival;
            s.inter_arrival_distribution = r.inter_arrival_distribution;
            s.ipdv = r.ipdv;
            s.loss_periods = r.loss_periods;
            s.arrival_clock = Some(r.arrival_clock.clone());
        }
        // `--echo-every`: the round trips are the client's, of the echoes of its load.
        if spec.echo_every.is_some() {
            let echoes = client.and_then(|c| c.receiver.as_ref());
            s.round_trip = echoes.and_then(|e| e.round_trip);
            s.round_trip_from_schedule = echoes.and_then(|e| e.round_trip_from_schedule);
            s.echoes = echoes.map(|e| e.packets);
        }
        // Without the sender's count (its end was lost), what the receiver saw is the base.
        let offered = s
            .packets_sent
            .saturating_sub(warmup)
            .max(s.packets_received + s.packets_lost);
        if offered > 0 {
            s.loss_pct = 100.0 * s.packets_lost as f64 / offered as f64;
        }
        s
    }
}

impl Summary2 {
    /// Drops at the receiving sockets, in packets where the kernel's count of buffers says
    /// exactly, else as bounds. Needs `packets_lost`.
    fn set_socket_drops(
        &mut self,
        spec: &TestSpec,
        received: &ReceiverReport,
        agent: Option<&SideReport>,
    ) {
        let echo_drops = match spec.direction {
            Direction::Loopback => agent
                .and_then(|a| a.echo.as_ref())
                .and_then(|e| e.socket_buffer_drops),
            Direction::Oneway | Direction::Reverse => Some(0),
        };
        let buffers = received.socket_buffer_drops.zip(echo_drops);
        self.receive_buffers_dropped = buffers.map(|(r, e)| r + e);
        (
            self.lost_at_receiver_socket,
            self.lost_at_receiver_socket_max,
        ) = match buffers {
            None => (None, None),
            // Each receive buffer under GRO holds a train of unknown length.
            Some((r, e)) if received.gro && r > 0 => {
                let most = r * GRO_MAX_SEGMENTS + e;
                (None, Some(most.min(self.packets_lost.max(r + e))))
            }
            Some((r, e)) => (Some(r + e), Some(r + e)),
        };
    }

    /// Splits `packets_lost` into the sending hosts' qdisc drops and the rest.
    fn attribute_loss(&mut self, senders: Vec<&SideReport>) {
        let drops: Option<u64> = senders
            .iter()
            .map(|s| s.host_qdisc_drops.as_ref().map(|d| d.drops))
            .sum();
        if let Some(drops) = drops {
            let at_host = drops.min(self.packets_lost);
            self.lost_in_sender_qdisc = Some(at_host);
            self.lost_beyond_sender = Some(self.packets_lost - at_host);
        }
    }
}

/// The ends whose egress carries the flow: the sender, and in loopback tests the echoing
/// agent too (a round trip's loss is either end's).
fn sending_hosts<'a>(
    spec: &TestSpec,
    client: Option<&'a SideReport>,
    agent: Option<&'a SideReport>,
) -> Vec<&'a SideReport> {
    let ends = match spec.direction {
        Direction::Oneway => [client, None],
        Direction::Reverse => [agent, None],
        Direction::Loopback => [client, agent],
    };
    ends.into_iter().flatten().collect()
}

/// The role each end plays in this test: (client, agent).
pub fn roles(spec: &TestSpec) -> (Role, Role) {
    if spec
        .traffic
        .as_ref()
        .is_some_and(|t| t.transactions().is_some())
    {
        return (Role::Requester, Role::Responder);
    }
    match spec.direction {
        Direction::Oneway => (Role::Sender, Role::Receiver),
        Direction::Reverse => (Role::Receiver, Role::Sender),
        Direction::Loopback => (Role::Sender, Role::Echo),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 12: a TCP model's small messages were counted as 256000-byte ones, 177
    /// segments' headers each ("on the wire 924 kbit/s" for 99.8 kbit/s of goodput).
    #[test]
    fn tcp_headers_follow_the_messages_sent() {
        let spec = TestSpec::new(Protocol::Tcp, Direction::Oneway);
        assert_eq!(spec.size, 256_000);
        let (small, _) = header_overhead(&spec, 120.0, false, Some(1448));
        assert_eq!(small, 70.0, "one segment: TCP 32 + IPv4 20 + Ethernet 18");
        let (bulk, names) = header_overhead(&spec, 256_000.0, true, Some(1448));
        assert_eq!(bulk, 177.0 * 90.0);
        assert!(names.contains("IPv6 40"), "{names}");
    }

    /// Issue 12: socket drops were null for UDP with none, and GRO buffers counted as packets.
    #[test]
    fn socket_drops_are_packets_when_exact_and_bounds_under_gro() {
        let summary = |direction, drops: Option<u64>, gro: bool, echo: Option<u64>, lost: u64| {
            let spec = TestSpec::new(Protocol::Udp, direction);
            let mut received =
                flowlab_results::meter::ReceiverMeter::new(1, false, false).report(None);
            (received.socket_buffer_drops, received.gro) = (drops, gro);
            let mut agent = side(Role::Echo, None);
            agent.echo = Some(flowlab_results::EchoReport {
                socket_buffer_drops: echo,
                ..Default::default()
            });
            let mut s = Summary2 {
                packets_lost: lost,
                ..Summary2::default()
            };
            s.set_socket_drops(&spec, &received, Some(&agent));
            (
                s.lost_at_receiver_socket,
                s.receive_buffers_dropped,
                s.lost_at_receiver_socket_max,
            )
        };
        let exact = |n| (Some(n), Some(n), Some(n));
        assert_eq!(
            summary(Direction::Oneway, Some(0), false, None, 0),
            exact(0)
        );
        assert_eq!(summary(Direction::Oneway, Some(0), true, None, 3), exact(0));
        assert_eq!(
            summary(Direction::Reverse, Some(7), false, None, 9),
            exact(7)
        );
        assert_eq!(
            summary(Direction::Oneway, None, false, None, 9),
            (None, None, None)
        );
        // Three GRO buffers: at least 3 packets, at most 64 each, never more than were lost.
        let gro = |lost| summary(Direction::Oneway, Some(3), true, None, lost);
        assert_eq!(gro(100), (None, Some(3), Some(100)));
        assert_eq!(gro(1000), (None, Some(3), Some(192)));
        assert_eq!(gro(0), (None, Some(3), Some(3)));
        // Loopback: the agent's echo socket is a receiving socket too.
        assert_eq!(
            summary(Direction::Loopback, Some(2), false, Some(1), 5),
            exact(3)
        );
        let echo_unknown = summary(Direction::Loopback, Some(2), false, None, 5);
        assert_eq!(echo_unknown, (None, None, None));
    }

    /// `--omit`: 100 packets sent, 40 of them in the warm-up; 55 of the other 60 arrived.
    #[test]
    fn loss_counts_what_was_sent_after_the_warmup() {
        let spec = TestSpec::new(Protocol::Udp, Direction::Oneway);
        let mut client = side(Role::Sender, None);
        let mut sender = flowlab_results::meter::SenderMeter::new(1, false, false).report();
        sender.packets_sent = 100;
        client.sender = Some(sender);
        let mut agent = side(Role::Receiver, None);
        let mut received = flowlab_results::meter::ReceiverMeter::new(1, false, false).report(None);
        received.packets.unique = 55;
        received.warmup = Some(flowlab_results::Warmup {
            packets_received: 40,
            packets_sent: 40,
        });
        agent.receiver = Some(received);
        let s = Summary2::combine(&spec, Some(&client), Some(&agent), false);
        assert_eq!(
            (s.packets_sent, s.packets_received, s.packets_lost),
            (100, 55, 5)
        );
        assert!(
            (s.loss_pct - 100.0 * 5.0 / 60.0).abs() < 1e-9,
            "{}",
            s.loss_pct
        );
    }

    fn side(role: Role, drops: Option<u64>) -> SideReport {
        SideReport {
            host_qdisc_drops: drops.map(|drops| flowlab_results::HostQdiscDrops {
                interface: "veth0".into(),
                qdisc: "tbf".into(),
                drops,
            }),
            ..SideReport::new(role, "h".into())
        }
    }

    /// Issue 12: a tbf on the sender's own interface dropped packets that were reported as
    /// lost in the network.
    #[test]
    fn loss_is_split_at_the_sending_hosts_qdisc() {
        let attributed = |direction, client: &SideReport, agent: &SideReport, lost| {
            let spec = TestSpec::new(Protocol::Udp, direction);
            let mut s = Summary2 {
                packets_lost: lost,
                ..Summary2::default()
            };
            s.attribute_loss(sending_hosts(&spec, Some(client), Some(agent)));
            (s.lost_in_sender_qdisc, s.lost_beyond_sender)
        };
        let (client, agent) = (side(Role::Sender, Some(40)), side(Role::Receiver, None));
        assert_eq!(
            attributed(Direction::Oneway, &client, &agent, 100),
            (Some(40), Some(60))
        );
        // Other traffic's drops on the interface never make more than the test lost.
        assert_eq!(
            attributed(Direction::Oneway, &client, &agent, 30),
            (Some(30), Some(0))
        );
        // A reverse test's sender is the agent, whose qdisc was not read here.
        assert_eq!(
            attributed(Direction::Reverse, &client, &agent, 100),
            (None, None)
        );
        // A round trip leaves by both ends' qdiscs.
        let echo = side(Role::Echo, Some(5));
        assert_eq!(
            attributed(Direction::Loopback, &client, &echo, 100),
            (Some(45), Some(55))
        );
    }
}
