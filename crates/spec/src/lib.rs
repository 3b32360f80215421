//! The description of a test as a client asks for it and an agent runs it, and its one
//! validation: flags, experiment files and the agent all check a request with
//! [`TestSpec::validate`], so what one end accepts the other does too.

mod derived;

use std::time::Duration;

use flowlab_traffic::{PacingMode, TrafficSpec, TransactionConfig};
use flowlab_units::format_rate;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use flowlab_wire::PROBE_HEADER_LEN;

mod defaults;
pub use defaults::{
    default_rate_bps, default_size, icmp_rate_bps, DEFAULT_DURATION_NS, DEFAULT_ICMP_SIZE,
    DEFAULT_PACED_RATE_BPS, DEFAULT_RAW_SIZE, DEFAULT_TCP_SIZE, DEFAULT_UDP_SIZE,
};
mod param;
pub use param::{Param, ParamValue, ValueKind};
mod path;
pub use path::{EgressPath, CEILING_WITHOUT_LINK_SPEED_BPS, MAX_OVER_LINK_SPEED};

/// Largest UDP payload over IPv4 (65535 - 20 - 8); the IPv6 limit is higher, this one is safe.
pub const MAX_UDP_PAYLOAD: u32 = 65_507;
/// Largest ICMP echo data over IPv4 (65535 - 20 - 8), as ping's -s.
pub const MAX_ICMP_DATA: u32 = 65_507;
/// flowlab's stamp at the start of an echo's data.
const ICMP_STAMP_LEN: usize = flowlab_wire::icmp::STAMP_LEN;
/// Largest TCP message (a request or response of a transaction, or a framed model message).
pub const MAX_TCP_MESSAGE: u32 = flowlab_traffic::rr::MAX_MESSAGE_SIZE;
/// Shortest live-report period: shorter ones report noise and cost a message per few packets.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Longest live-report period.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);
/// Longest test the protocol describes (an agent's `--max-duration` is usually far lower).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
/// Highest rate of one flow: above any interface of today, low enough for exact integer
/// pacing arithmetic.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;
/// Most flows of one test: a socket each at both ends.
pub const MAX_FLOWS: u32 = 65_535;
/// Largest socket buffer or TCP window clamp asked for (the kernel takes an int and doubles it).
pub const MAX_BUFFER: u32 = 1 << 30;
/// Largest `echo_every`: one echo in a million packets is already a sparse probe.
pub const MAX_ECHO_EVERY: u32 = 1_000_000;
/// Longest TCP congestion control name (the kernel's TCP_CA_NAME_MAX less its NUL).
const MAX_CONGESTION_NAME: usize = 15;
/// Longest interface name (IFNAMSIZ less its NUL).
const MAX_INTERFACE_NAME: usize = 15;

/// A limit's duration as an agent's flag takes it; 'unlimited' is the longest test the
/// protocol describes ([`MAX_DURATION`]).
pub fn parse_duration_limit(s: &str) -> Result<Duration, flowlab_units::UnitError> {
    match s {
        "unlimited" => Ok(MAX_DURATION),
        _ => flowlab_units::parse_duration(s),
    }
}

/// Parses a socket buffer size or TCP window clamp as people type it (`4MiB`): 1 B to
/// [`MAX_BUFFER`].
pub fn parse_buffer(s: &str) -> Result<u32, flowlab_units::UnitError> {
    let bytes = flowlab_units::parse_bytes(s)?;
    u32::try_from(bytes)
        .ok()
        .filter(|&b| b > 0 && b <= MAX_BUFFER)
        .ok_or_else(|| flowlab_units::UnitError {
            kind: "size",
            input: s.to_string(),
            expected: "a socket buffer is 1 B to 1 GiB",
        })
}

/// Why a test description cannot run, in one line a user can act on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn refuse<T>(why: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(why.into()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Udp,
    Tcp,
    /// Native link-layer frames (AF_PACKET, flowlab's EtherType): no IP, no UDP.
    Raw,
    /// ICMP echo to any host, no agent needed: `size` is the echo's data bytes (ping's -s),
    /// always a round trip (loopback).
    Icmp,
}

/// Which way the test traffic flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client sends, agent receives.
    Oneway,
    /// Agent sends, client receives.
    Reverse,
    /// Client sends, agent echoes every packet back: round-trip delay.
    Loopback,
}

/// What the client asks the agent to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    pub protocol: Protocol,
    pub direction: Direction,
    /// Offered rate in bit/s of application payload; `None` sends as fast as the path allows.
    pub rate_bps: Option<u64>,
    /// Application payload bytes per packet (UDP datagram or TCP write), probe header included.
    pub size: u32,
    /// End condition: whichever of duration and count comes first.
    pub duration_ns: Option<u64>,
    pub count: Option<u64>,
    /// Period of live interval reports; `None` for no interval reports.
    pub interval_ns: Option<u64>,
    /// Parallel flows, each on its own socket pair (own 5-tuple); the rate is per flow.
    pub flows: u32,
    /// The client's UDP data ports (on the address it connected from), one per flow.
    pub client_udp_ports: Vec<u16>,
    /// Native frames: the client's MAC address, and the agent's interface if the client
    /// names one (else the agent uses the interface of its control connection).
    pub raw: Option<RawEndpoint>,
    /// Busy-poll the receiving sockets (lower latency, one core spinning).
    pub busy_poll: bool,
    /// Whether the agent keeps and returns per-packet records.
    pub packet_log: bool,
    /// How both ends set up their data sockets.
    pub socket: SocketOptions,
    /// A traffic model instead of the constant rate (UDP): when packets leave and how big they
    /// are. Files it names are embedded by the client, so the agent needs none.
    pub traffic: Option<TrafficSpec>,
    /// Seed of random traffic models: the same seed replays the same traffic.
    pub seed: u64,
    /// Authenticated test packets (as TWAMP's authenticated mode): every probe carries a tag
    /// under a key derived from the session's, and a receiver drops any packet without a right
    /// one. Needs a pre-shared key at both ends; UDP at a constant rate.
    #[serde(default)]
    pub authenticated_packets: bool,
    /// RTT under the flow's own load (`--echo-every N`): in a one-way UDP test the agent
    /// echoes every packet whose sequence number is a multiple of N back to the client, which
    /// measures their round trips while the load runs.
    #[serde(default)]
    pub echo_every: Option<u32>,
    /// Warm-up left out of the results (`--omit`): the receivers' meters skip packets sent in
    /// the first `omit_ns` of the test (by their send stamps), and count the sequence numbers
    /// after them only; the sender's figures still cover the whole test.
    #[serde(default)]
    pub omit_ns: Option<u64>,
    /// How senders wait for their deadlines (`--pacing`): `auto` (the default) spins past
    /// the learned wake-up latency within 5 % of a core, `precise` whatever it costs,
    /// `efficient` within 1 %. Left out of requests when `auto`, so older agents take them.
    #[serde(default, skip_serializing_if = "PacingMode::is_auto")]
    pub pacing: PacingMode,
    /// One-way UDP to a multicast group (`--multicast`): the client sends once to the group,
    /// and each agent asked joins it and only receives.
    #[serde(default)]
    pub multicast: Option<MulticastGroup>,
}

/// A multicast group a test's packets go to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastGroup {
    /// An IPv4 (224.0.0.0/4) or IPv6 (ff00::/8) group address.
    pub group: std::net::IpAddr,
    pub port: u16,
    /// IPv4 TTL or IPv6 hop limit of the packets (`--ttl`): 1 stays on the link.
    pub hops: u8,
    /// The session every probe carries: the client's choice, the same at every receiver.
    pub session: u32,
    /// The datagrams' header: flowlab's probe, or iperf2's (`--iperf2`).
    #[serde(default)]
    pub header: DatagramHeader,
}

/// How a multicast flow's datagrams begin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatagramHeader {
    /// flowlab's probe header, with the test's session.
    #[default]
    Flowlab,
    /// iperf2's `UDP_datagram` (no session: every datagram to the group counts).
    Iperf2,
}

/// Where native link-layer frames go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEndpoint {
    /// `aa:bb:cc:dd:ee:ff`.
    pub client_mac: String,
    pub agent_interface: Option<String>,
}

/// Data-socket settings, applied at both ends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocketOptions {
    /// SO_SNDBUF / SO_RCVBUF in bytes; `None` keeps the kernel's default (and autotuning).
    pub send_buffer: Option<u32>,
    pub recv_buffer: Option<u32>,
    /// Also ask the kernel to pace at the test rate (SO_MAX_PACING_RATE): TCP paces itself;
    /// UDP only under the fq qdisc.
    pub kernel_pacing: bool,
    /// TCP: send with MSG_ZEROCOPY.
    pub zerocopy: bool,
    /// TCP congestion control algorithm (TCP_CONGESTION), e.g. "cubic", "reno", "bbr".
    pub congestion: Option<String>,
    /// UDP: take kernel transmit timestamps (SO_TIMESTAMPING, software and, where the NIC
    /// has them, hardware) to measure when packets really left.
    pub tx_timestamps: bool,
    /// DiffServ code point (0..=63) in the IP header (IP_TOS / IPV6_TCLASS, ECN bits 0).
    pub dscp: Option<u8>,
    /// SO_PRIORITY: the queueing priority of the sender's packets on its host.
    pub priority: Option<u32>,
    /// SO_MARK (needs CAP_NET_ADMIN): a firewall/routing mark.
    pub mark: Option<u32>,
    /// TCP_NODELAY at the sender; `None`: on for paced flows, off at max rate.
    pub nodelay: Option<bool>,
    /// TCP_MAXSEG and TCP_WINDOW_CLAMP.
    pub mss: Option<u32>,
    pub window_clamp: Option<u32>,
    /// The receiving application reads at most this many bit/s (a slow reader): its socket
    /// buffer fills, delay grows by the buffer's worth, then the buffer drops packets.
    pub read_rate_bps: Option<u64>,
    /// ICMP echo: set don't-fragment, so the kernel refuses requests above the path MTU
    /// rather than fragmenting them (ping's `-M do`).
    #[serde(default)]
    pub dont_fragment: bool,
    /// One-way UDP: the client sends its datagrams as whole frames through a packet socket
    /// (needs CAP_NET_RAW), past the kernel's UDP and IP send path; the interface's qdisc
    /// still applies.
    #[serde(default)]
    pub packet_socket: bool,
}

impl TestSpec {
    /// Checks every field against the protocol's bounds. The client checks before asking and
    /// the agent again on receipt, with this one function: an agent's own limits come on top.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.check_size()?;
        self.check_end()?;
        self.check_rate()?;
        self.check_flows()?;
        self.check_raw()?;
        self.check_icmp()?;
        self.check_multicast()?;
        self.socket.validate(self.protocol)?;
        self.check_traffic()?;
        self.check_authenticated()?;
        self.check_echo_every()?;
        self.check_omit()?;
        self.check_packet_socket()?;
        self.check_pacing()
    }

    /// A packet socket carries a paced one-way UDP load from the client, and only what its
    /// frames themselves hold.
    fn check_packet_socket(&self) -> Result<(), SpecError> {
        if !self.socket.packet_socket {
            return Ok(());
        }
        let s = &self.socket;
        let why = if self.protocol != Protocol::Udp {
            "sends UDP datagrams only"
        } else if self.direction != Direction::Oneway {
            "sends from the client only (a one-way test)"
        } else if !self.paced() {
            "needs a paced test (a --rate or a --traffic model)"
        } else if self.transactions().is_some() || self.echo_every.is_some() {
            "sends one-way loads only, not echoed packets"
        } else if self.multicast.is_some() {
            "sends to the agent's own address, not to a group"
        } else if s.tx_timestamps || s.kernel_pacing {
            "has no transmit timestamps or kernel pacing (they are a UDP socket's)"
        } else if s.priority.is_some() || s.mark.is_some() {
            "takes no --priority or --mark (they are a UDP socket's)"
        } else {
            return Ok(());
        };
        refuse(format!("--packet-socket {why}"))
    }

    /// A pacing mode other than `auto` needs deadlines to wait for.
    fn check_pacing(&self) -> Result<(), SpecError> {
        if self.pacing.is_auto() || (self.paced() && self.transactions().is_none()) {
            return Ok(());
        }
        refuse(format!(
            "pacing {} needs a paced test (a --rate or a --traffic model): at max rate and in \
             request/response tests no sender waits for a deadline",
            self.pacing
        ))
    }

    /// A warm-up is left out of a test that goes on after it, and only where packets are
    /// metered (not request/response transactions).
    fn check_omit(&self) -> Result<(), SpecError> {
        let Some(omit) = self.omit_ns else {
            return Ok(());
        };
        if omit == 0 {
            return refuse("omit must be above 0 s (leave it out for no warm-up)");
        }
        if let Some(d) = self.duration_ns.filter(|&d| omit >= d) {
            return refuse(format!(
                "omit ({:.3} s) leaves nothing of the {:.3} s test to measure",
                omit as f64 / 1e9,
                d as f64 / 1e9
            ));
        }
        if omit > MAX_DURATION.as_nanos() as u64 {
            return refuse("omit exceeds the longest test");
        }
        if self.transactions().is_some() {
            return refuse("omit applies to packet tests, not request/response ones");
        }
        Ok(())
    }

    fn check_echo_every(&self) -> Result<(), SpecError> {
        let Some(every) = self.echo_every else {
            return Ok(());
        };
        if !(1..=MAX_ECHO_EVERY).contains(&every) {
            return refuse(format!("echo-every must be 1..={MAX_ECHO_EVERY} packets"));
        }
        let one_way_load = self.protocol == Protocol::Udp
            && self.direction == Direction::Oneway
            && self.transactions().is_none();
        if !one_way_load {
            return refuse(
                "echo-every measures RTT inside a one-way UDP load: use --proto udp --mode oneway (loopback already echoes every packet)",
            );
        }
        Ok(())
    }

    fn check_authenticated(&self) -> Result<(), SpecError> {
        if !self.authenticated_packets {
            return Ok(());
        }
        if self.protocol != Protocol::Udp || self.traffic.is_some() {
            return refuse("authenticated test packets are for UDP at a constant rate");
        }
        if (self.size as usize) < flowlab_wire::probe::AUTH_PROBE_LEN {
            return refuse(format!(
                "authenticated test packets need a size of at least {} B (header and tag)",
                flowlab_wire::probe::AUTH_PROBE_LEN
            ));
        }
        Ok(())
    }

    fn check_size(&self) -> Result<(), SpecError> {
        let (max_size, what) = match self.protocol {
            Protocol::Udp => (MAX_UDP_PAYLOAD, "the UDP maximum"),
            Protocol::Tcp => (MAX_TCP_MESSAGE, "the TCP message maximum"),
            Protocol::Raw => (MAX_UDP_PAYLOAD, "the native frame maximum"),
            Protocol::Icmp => (MAX_ICMP_DATA, "the ICMP echo maximum"),
        };
        if self.protocol == Protocol::Icmp && self.size < ICMP_STAMP_LEN as u32 {
            return refuse(format!(
                "echo data of {} B is below flowlab's {ICMP_STAMP_LEN}-byte stamp (send time, sequence)",
                self.size
            ));
        }
        if self.protocol != Protocol::Icmp && self.size < PROBE_HEADER_LEN as u32 {
            return refuse(format!(
                "packet size {} B is below the {PROBE_HEADER_LEN}-byte probe header",
                self.size
            ));
        }
        if self.size > max_size {
            return refuse(format!(
                "packet size {} B exceeds {what} of {max_size} B",
                self.size
            ));
        }
        Ok(())
    }

    fn check_end(&self) -> Result<(), SpecError> {
        let max = MAX_DURATION.as_nanos() as u64;
        match (self.duration_ns, self.count) {
            (None, None) => return refuse("the test has no end: give a duration or a count"),
            (Some(0), _) => return refuse("duration must be above 0 s"),
            (Some(d), _) if d > max => {
                return refuse(format!(
                    "duration {:.0} s exceeds the longest test of {} days",
                    d as f64 / 1e9,
                    MAX_DURATION.as_secs() / 86_400
                ))
            }
            (_, Some(0)) => return refuse("count must be at least 1 packet"),
            _ => {}
        }
        let (min, max) = (
            MIN_INTERVAL.as_nanos() as u64,
            MAX_INTERVAL.as_nanos() as u64,
        );
        match self.interval_ns {
            Some(i) if i < min => refuse(format!(
                "interval must be at least {} ms",
                MIN_INTERVAL.as_millis()
            )),
            Some(i) if i > max => refuse(format!(
                "interval must be at most {} s",
                MAX_INTERVAL.as_secs()
            )),
            _ => Ok(()),
        }
    }

    fn check_rate(&self) -> Result<(), SpecError> {
        match self.rate_bps {
            Some(0) => refuse("rate must be above 0 bit/s"),
            Some(r) if r > MAX_RATE_BPS => refuse(format!(
                "rate {} exceeds the highest rate of {}",
                format_rate(r as f64),
                format_rate(MAX_RATE_BPS as f64)
            )),
            _ => Ok(()),
        }
    }

    fn check_flows(&self) -> Result<(), SpecError> {
        if self.flows == 0 {
            return refuse("a test needs at least one flow");
        }
        if self.flows > MAX_FLOWS {
            return refuse(format!(
                "{} flows exceed the most of {MAX_FLOWS}",
                self.flows
            ));
        }
        if self.protocol == Protocol::Raw && self.flows != 1 {
            return refuse(
                "native frames carry one flow: every socket on an interface sees every frame",
            );
        }
        let ports = &self.client_udp_ports;
        match self.protocol {
            Protocol::Udp if !ports.is_empty() && ports.len() != self.flows as usize => {
                refuse(format!(
                    "{} client UDP ports for {} flows: give one port per flow",
                    ports.len(),
                    self.flows
                ))
            }
            Protocol::Udp if ports.contains(&0) => refuse("client UDP port 0 is not a port"),
            Protocol::Tcp | Protocol::Raw | Protocol::Icmp if !ports.is_empty() => {
                refuse("client UDP ports apply to UDP tests only")
            }
            _ => Ok(()),
        }
    }

    fn check_raw(&self) -> Result<(), SpecError> {
        match (&self.raw, self.protocol) {
            (Some(raw), Protocol::Raw) => raw.validate(),
            (Some(_), _) => refuse("a native-frame endpoint applies to --proto raw only"),
            (None, _) => Ok(()),
        }
    }

    /// ICMP echo: one paced flow of requests, each answered by the host's kernel.
    fn check_icmp(&self) -> Result<(), SpecError> {
        if self.protocol != Protocol::Icmp {
            return match self.socket.dont_fragment {
                true => refuse("--dont-fragment applies to --proto icmp only"),
                false => Ok(()),
            };
        }
        let s = &self.socket;
        let refusal = [
            (
                self.direction != Direction::Loopback,
                "an echo is a round trip: --reverse and --mode oneway do not apply",
            ),
            (
                self.flows != 1,
                "one flow of echo requests: use several tests for more",
            ),
            (
                self.traffic.is_some(),
                "echo requests are paced at --rate: traffic models do not apply",
            ),
            (
                self.rate_bps.is_none(),
                "echo requests are paced: give a --rate, not max",
            ),
            (self.busy_poll, "--busy-poll does not apply"),
            (
                s.kernel_pacing || s.zerocopy || s.tx_timestamps,
                "--kernel-pacing, --zerocopy and --tx-timestamps do not apply",
            ),
            (s.read_rate_bps.is_some(), "--read-rate does not apply"),
        ];
        match refusal.iter().find(|(on, _)| *on) {
            Some((_, why)) => refuse(format!("ICMP echo: {why}")),
            None => Ok(()),
        }
    }

    /// Multicast: one UDP flow the client sends to a group; receivers only receive.
    fn check_multicast(&self) -> Result<(), SpecError> {
        let Some(m) = &self.multicast else {
            return Ok(());
        };
        let refusal = [
            (!m.group.is_multicast(), "the group must be a multicast address (224.0.0.0/4, ff00::/8)"),
            (m.port == 0, "the group needs a port"),
            (m.hops == 0, "a TTL of 0 leaves nothing on the wire: give 1 or more"),
            (self.protocol != Protocol::Udp, "multicast is UDP"),
            (self.direction != Direction::Oneway, "the client sends and the agents receive: --reverse and --mode loopback do not apply"),
            (self.flows != 1, "one flow to one group"),
            (!self.client_udp_ports.is_empty(), "receivers take the group's port, not the client's"),
            (self.echo_every.is_some(), "receivers only receive: --echo-every does not apply"),
            (self.authenticated_packets, "each agent has its own session key: --auth-packets does not apply"),
            (self.transactions().is_some(), "request/response needs a single answering agent"),
        ];
        match refusal.iter().find(|(on, _)| *on) {
            Some((_, why)) => refuse(format!("multicast: {why}")),
            None => Ok(()),
        }
    }

    fn check_traffic(&self) -> Result<(), SpecError> {
        let Some(traffic) = &self.traffic else {
            return Ok(());
        };
        traffic
            .validate()
            .map_err(|e| SpecError(format!("traffic model: {e}")))?;
        match traffic.transactions() {
            Some(rr) => self.check_transactions(rr),
            None if self.protocol == Protocol::Tcp && self.direction == Direction::Loopback => {
                refuse("a traffic model over TCP runs one-way or reverse: the TCP echo returns fixed-size messages")
            }
            None => Ok(()),
        }
    }

    /// A request/response test: over TCP or UDP, client to agent, sizes within the transport's.
    fn check_transactions(&self, rr: &TransactionConfig) -> Result<(), SpecError> {
        let kind = if rr.connect_each { "crr" } else { "rr" };
        match self.protocol {
            Protocol::Raw | Protocol::Icmp => {
                return refuse(format!("{kind} runs over TCP or UDP"))
            }
            Protocol::Udp if rr.connect_each => {
                return refuse(
                    "crr opens a TCP connection per transaction: use --proto tcp (or rr for UDP)",
                )
            }
            Protocol::Udp => {
                for (what, dist) in [("request", &rr.request), ("response", &rr.response)] {
                    if dist.mean().is_some_and(|m| m > f64::from(MAX_UDP_PAYLOAD)) {
                        return refuse(format!(
                            "a UDP {what} is one datagram of at most {MAX_UDP_PAYLOAD} B: use --proto tcp for larger ones"
                        ));
                    }
                }
            }
            Protocol::Tcp => {}
        }
        if self.direction != Direction::Oneway {
            return refuse(format!(
                "{kind}: the client asks and the agent answers; --reverse and --mode loopback do not apply"
            ));
        }
        if self.rate_bps.is_some() {
            return refuse(format!(
                "{kind} runs transactions back to back (or after think=): --rate does not apply"
            ));
        }
        Ok(())
    }
}

impl RawEndpoint {
    fn validate(&self) -> Result<(), SpecError> {
        match parse_mac(&self.client_mac) {
            None => return refuse(format!("invalid MAC address '{}'", self.client_mac)),
            Some(mac) if mac[0] & 1 != 0 || mac == [0; 6] => {
                return refuse(format!(
                    "client MAC address {} is not a unicast address",
                    self.client_mac
                ))
            }
            Some(_) => {}
        }
        match &self.agent_interface {
            Some(name) if !is_interface_name(name) => {
                refuse(format!("'{name}' is not an interface name"))
            }
            _ => Ok(()),
        }
    }
}

impl SocketOptions {
    fn validate(&self, protocol: Protocol) -> Result<(), SpecError> {
        for (what, value) in [
            ("send buffer", self.send_buffer),
            ("receive buffer", self.recv_buffer),
            ("window clamp", self.window_clamp),
        ] {
            if value.is_some_and(|v| v > MAX_BUFFER) {
                return refuse(format!("{what} exceeds the largest of {MAX_BUFFER} B"));
            }
            if value == Some(0) {
                return refuse(format!("a {what} is at least 1 B"));
            }
        }
        if self.dscp.is_some_and(|d| d > 63) {
            return refuse("a DSCP is 0..=63");
        }
        if self.mss.is_some_and(|m| !(88..=65_535).contains(&m)) {
            return refuse("a TCP MSS is 88..=65535 B");
        }
        if let Some(name) = &self.congestion {
            let valid = name.len() <= MAX_CONGESTION_NAME
                && !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return refuse(format!("'{name}' is not a congestion control name"));
            }
        }
        match self.read_rate_bps {
            Some(_) if protocol == Protocol::Tcp => refuse(
                "--read-rate models a slow UDP reader; TCP's own flow control slows its sender",
            ),
            Some(r) if r == 0 || r > MAX_RATE_BPS => refuse(format!(
                "read rate must be 1 bit/s to {}",
                format_rate(MAX_RATE_BPS as f64)
            )),
            _ => Ok(()),
        }
    }
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut out {
        let part = parts.next()?;
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// What Linux accepts as an interface name: 1 to 15 bytes, no '/', ':' or white space.
fn is_interface_name(name: &str) -> bool {
    (1..=MAX_INTERFACE_NAME).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'/' && b != b':')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icmp_echo_is_one_paced_round_trip_of_stamped_data() {
        let icmp = || TestSpec::new(Protocol::Icmp, Direction::Loopback);
        let refused = |spec: TestSpec| spec.validate().unwrap_err().0;
        icmp().validate().unwrap();
        let big = TestSpec {
            size: 4096,
            socket: SocketOptions {
                dont_fragment: true,
                ..SocketOptions::default()
            },
            ..icmp()
        };
        big.validate().unwrap();
        assert_eq!(
            refused(TestSpec { size: 15, ..icmp() }),
            "echo data of 15 B is below flowlab's 16-byte stamp (send time, sequence)"
        );
        assert_eq!(
            refused(TestSpec {
                size: 65_508,
                ..icmp()
            }),
            "packet size 65508 B exceeds the ICMP echo maximum of 65507 B"
        );
        let oneway = TestSpec {
            direction: Direction::Oneway,
            ..icmp()
        };
        assert!(refused(oneway).starts_with("ICMP echo: an echo is a round trip"));
        assert_eq!(
            refused(TestSpec { flows: 2, ..icmp() }),
            "ICMP echo: one flow of echo requests: use several tests for more"
        );
        assert_eq!(
            refused(TestSpec {
                rate_bps: None,
                ..icmp()
            }),
            "ICMP echo: echo requests are paced: give a --rate, not max"
        );
        let udp_df = TestSpec {
            socket: big.socket.clone(),
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        };
        assert_eq!(
            refused(udp_df),
            "--dont-fragment applies to --proto icmp only"
        );
        assert_eq!(
            Param::Protocol.parse_value("ICMP").unwrap(),
            ParamValue::Protocol(Protocol::Icmp)
        );
    }

    #[test]
    fn multicast_is_one_udp_flow_the_client_sends_to_a_group() {
        let group = |addr: &str| MulticastGroup {
            group: addr.parse().unwrap(),
            port: 5001,
            hops: 1,
            session: 9,
            header: DatagramHeader::Flowlab,
        };
        let to = |addr: &str| TestSpec {
            multicast: Some(group(addr)),
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        };
        to("239.1.2.3").validate().unwrap();
        to("ff15::1234").validate().unwrap();
        let refused = |spec: TestSpec| spec.validate().unwrap_err().0;
        assert_eq!(
            refused(to("10.0.0.1")),
            "multicast: the group must be a multicast address (224.0.0.0/4, ff00::/8)"
        );
        let reverse = TestSpec {
            direction: Direction::Reverse,
            ..to("239.1.2.3")
        };
        assert!(refused(reverse).starts_with("multicast: the client sends and the agents receive"));
        let echo = TestSpec {
            echo_every: Some(10),
            ..to("239.1.2.3")
        };
        assert_eq!(
            refused(echo),
            "multicast: receivers only receive: --echo-every does not apply"
        );
        let ported = TestSpec {
            client_udp_ports: vec![4000],
            ..to("239.1.2.3")
        };
        assert!(refused(ported).starts_with("multicast: receivers take the group's port"));
        let mut silent = to("239.1.2.3");
        silent.multicast.as_mut().unwrap().hops = 0;
        assert!(refused(silent).starts_with("multicast: a TTL of 0"));
        let tcp = TestSpec {
            protocol: Protocol::Tcp,
            ..to("239.1.2.3")
        };
        assert_eq!(refused(tcp), "multicast: multicast is UDP");
    }

    #[test]
    fn a_packet_socket_carries_paced_one_way_udp_and_nothing_a_udp_socket_adds() {
        let with = |protocol, direction, socket: SocketOptions| TestSpec {
            socket: SocketOptions {
                packet_socket: true,
                ..socket
            },
            ..TestSpec::new(protocol, direction)
        };
        let udp = |socket| with(Protocol::Udp, Direction::Oneway, socket);
        udp(SocketOptions::default()).validate().unwrap();
        let dscp = SocketOptions {
            dscp: Some(46),
            ..SocketOptions::default()
        };
        udp(dscp).validate().unwrap();
        let refused = |spec: TestSpec| spec.validate().unwrap_err().0;
        let plain = SocketOptions::default;
        assert!(refused(with(Protocol::Tcp, Direction::Oneway, plain())).contains("UDP"));
        assert!(refused(with(Protocol::Udp, Direction::Reverse, plain())).contains("client"));
        let max_rate = TestSpec {
            rate_bps: None,
            ..udp(plain())
        };
        assert!(refused(max_rate).contains("paced"));
        let stamped = SocketOptions {
            tx_timestamps: true,
            ..plain()
        };
        assert!(refused(udp(stamped)).contains("timestamps"));
        let marked = SocketOptions {
            mark: Some(1),
            ..plain()
        };
        assert!(refused(udp(marked)).starts_with("--packet-socket takes no --priority"));
    }

    /// `--echo-every`: 1 to a million, and only inside a one-way UDP load.
    #[test]
    fn echo_every_is_bounded_and_for_one_way_udp_only() {
        let load = |every: u32| TestSpec {
            echo_every: Some(every),
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        };
        assert_eq!(load(1).validate(), Ok(()));
        assert_eq!(load(MAX_ECHO_EVERY).validate(), Ok(()));
        for every in [0, MAX_ECHO_EVERY + 1] {
            let e = load(every).validate().unwrap_err().to_string();
            assert_eq!(e, "echo-every must be 1..=1000000 packets");
        }
        let loopback = TestSpec {
            direction: Direction::Loopback,
            ..load(10)
        };
        let tcp = TestSpec {
            protocol: Protocol::Tcp,
            rate_bps: None,
            size: 1000,
            ..load(10)
        };
        let rr = TestSpec {
            traffic: Some(TrafficSpec::parse("rr:request=64,response=64").unwrap()),
            rate_bps: None,
            ..load(10)
        };
        for spec in [loopback, tcp, rr] {
            let e = spec.validate().unwrap_err().to_string();
            assert!(
                e.starts_with("echo-every measures RTT inside a one-way UDP load"),
                "{e}"
            );
        }
    }

    /// `--pacing precise|efficient` needs deadlines; `auto` goes anywhere and is left out of
    /// the request, so an agent from before `--pacing` takes it.
    #[test]
    fn pacing_needs_a_paced_test_and_auto_is_not_sent() {
        let paced = |pacing| TestSpec {
            pacing,
            ..TestSpec::new(Protocol::Udp, Direction::Reverse)
        };
        for mode in PacingMode::ALL {
            assert_eq!(paced(mode).validate(), Ok(()));
        }
        let bulk = TestSpec {
            rate_bps: None,
            ..paced(PacingMode::Efficient)
        };
        let e = bulk.validate().unwrap_err().to_string();
        assert!(e.starts_with("pacing efficient needs a paced test"), "{e}");
        assert_eq!(
            TestSpec {
                pacing: PacingMode::Auto,
                ..bulk.clone()
            }
            .validate(),
            Ok(())
        );
        let json = |s: &TestSpec| serde_json::to_value(s).unwrap();
        assert!(json(&paced(PacingMode::Auto)).get("pacing").is_none());
        let precise = json(&paced(PacingMode::Precise));
        assert_eq!(precise["pacing"], "precise");
        let back: TestSpec = serde_json::from_value(precise).unwrap();
        assert_eq!(back.pacing, PacingMode::Precise);
    }

    #[test]
    fn macs_parse_and_print() {
        let mac = [0x02, 0x00, 0x5e, 0x10, 0xab, 0xff];
        assert_eq!(format_mac(&mac), "02:00:5e:10:ab:ff");
        assert_eq!(parse_mac("02:00:5e:10:ab:ff"), Some(mac));
        for bad in [
            "",
            "02:00",
            "02:00:5e:10:ab:ff:00",
            "zz:00:00:00:00:00",
            "2:0:5e:10:ab:ff",
            "+2:00:5e:10:ab:ff",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_duration_limit_may_be_unlimited() {
        assert_eq!(parse_duration_limit("unlimited"), Ok(MAX_DURATION));
        assert_eq!(parse_duration_limit("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration_limit("forever").is_err());
    }

    #[test]
    fn a_warmup_leaves_part_of_a_packet_test_to_measure() {
        let omit = |ns, spec: TestSpec| TestSpec {
            omit_ns: Some(ns),
            ..spec
        };
        let udp = || TestSpec::new(Protocol::Udp, Direction::Oneway);
        assert_eq!(omit(2_000_000_000, udp()).validate(), Ok(()));
        let all = omit(10_000_000_000, udp()).validate().unwrap_err();
        assert_eq!(
            all.to_string(),
            "omit (10.000 s) leaves nothing of the 10.000 s test to measure"
        );
        assert!(omit(0, udp()).validate().is_err());
        let mut rr = udp();
        rr.set(
            Param::Traffic,
            Param::Traffic
                .parse_value("rr:request=64,response=1k")
                .unwrap(),
        )
        .unwrap();
        assert!(omit(1, rr).validate().is_err());
        let mut set = udp();
        set.set(Param::Omit, Param::Omit.parse_value("1.5s").unwrap())
            .unwrap();
        assert_eq!(set.omit_ns, Some(1_500_000_000));
        assert_eq!(
            set.get(Param::Omit),
            Some(ParamValue::Duration(1_500_000_000))
        );
        // A request of before it reads as one without a warm-up.
        let json = serde_json::to_string(&udp()).unwrap();
        assert!(
            json.ends_with(r#""echo_every":null,"omit_ns":null,"multicast":null}"#),
            "{json}"
        );
        let older = json.replace(r#","omit_ns":null"#, "");
        assert_eq!(serde_json::from_str::<TestSpec>(&older).unwrap(), udp());
    }
}
