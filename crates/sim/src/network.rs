//! Simulated networks for experiments (`flowlab run FILE --sim NETWORK.toml`).
//!
//! A network file describes nodes and links as a scenario does (`[[node]]`, `[[link]]`: IP
//! links with rate, delay and queue, ATM links, routers and switches), under a `[network]`
//! table, and maps the experiment's host names to its host nodes (`[hosts]`; a name not
//! listed is the host node of that name). [`run_step`] runs the flows of one experiment step,
//! each the `TestSpec` a real run would send, on the network in virtual time and reports each
//! flow's two ends as the `SideReport`s a real test's client and agent produce, so simulated
//! runs are stored and reported as real ones. See docs/simulation.md ("Network files").

use std::collections::BTreeMap;
use std::fmt;

use flowlab_atm::ServiceCategory;
use flowlab_link::atm::PortSpec;
use flowlab_link::diffserv::SchedSpec;
use flowlab_link::impair::ImpairConfig;
use flowlab_results::{EchoReport, Role, SideReport};
use flowlab_spanned::{FileError, Reader};
use flowlab_spec::{Direction, Protocol as TestProtocol, TestSpec};

use crate::endsys::SocketSpec;
use crate::engine::Sim;
use crate::report::FlowReport;
use crate::scenario::{
    read_links, read_nodes, shortest_path, tables, FlowSpec, Model, NodeKind, Protocol,
    ScenarioError, TcpSpec, Variant,
};
use crate::sender::{check_simulated, SendSpec, UDP_HEADERS};

/// IPv4 and TCP headers.
const TCP_HEADERS: u32 = 40;
/// A simulated TCP receiver's window when the test sets none: Linux's largest autotuned
/// receive buffer (tcp_rmem) is 6 MiB, half of it window.
const DEFAULT_TCP_WINDOW: u64 = 3 << 20;
/// Linux's least retransmission timeout (TCP_RTO_MIN).
const TCP_MIN_RTO_NS: u64 = 200_000_000;
/// Time after the last flow's end for packets in flight to arrive, unless `drain` says.
const DEFAULT_DRAIN_NS: u64 = 1_000_000_000;

/// A loaded network file.
#[derive(Debug, Clone)]
pub struct SimNetwork {
    name: String,
    /// Nodes and links; flows are added per step.
    model: Model,
    /// Experiment host name → node, from `[hosts]`.
    hosts: BTreeMap<String, usize>,
}

/// Why a step cannot run on the simulated network: one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError(pub String);

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimError {}

/// One flow of an experiment step, as a real run would start it.
#[derive(Debug, Clone, PartialEq)]
pub struct SimFlow {
    pub name: String,
    /// The experiment's host names: `from` runs the client, `to` the agent it asks.
    pub from: String,
    pub to: String,
    /// Start after the step starts.
    pub start_offset_ns: u64,
    pub spec: TestSpec,
}

/// A flow's two ends, as a real run's client and agent report them.
#[derive(Debug, Clone, PartialEq)]
pub struct SimFlowResult {
    pub name: String,
    pub client: SideReport,
    pub agent: SideReport,
}

impl SimFlowResult {
    /// The end whose packets left first (the agent, for `reverse`).
    pub fn sender(&self) -> &SideReport {
        match self.agent.role {
            Role::Sender => &self.agent,
            _ => &self.client,
        }
    }

    /// The end that measured arrivals (the client, for `reverse` and `loopback`).
    pub fn receiver(&self) -> &SideReport {
        match self.agent.role {
            Role::Receiver => &self.agent,
            _ => &self.client,
        }
    }
}

/// One link of a network file, as a lab's twin is checked (`SimNetwork::links`).
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkLink<'n> {
    /// The nodes it joins, as the file names them.
    pub a: &'n str,
    pub b: &'n str,
    /// IP links: the line rate; ATM links: a router's sending rate in cell bits (the
    /// line's cell rate unless `rate` shapes it lower).
    pub rate_bps: u64,
    /// The least one-way delay (propagation, or the impairment stage's delay).
    pub delay_ns: u64,
    /// The impairment stage, when it does more than delay.
    pub impair: Option<&'n ImpairConfig>,
    /// The ATM port (PHY, encapsulation, buffer) of an ATM link.
    pub atm: Option<&'n PortSpec>,
    /// A router's packet scheduler on the link.
    pub sched: &'n SchedSpec,
}

/// A network file's sections, and the scenario sections it refuses.
const SECTIONS: &[&str] = &["network", "hosts", "node", "link"];
const TRAFFIC_SECTIONS: &[&str] = &["sim", "flow", "background", "sweep"];

impl SimNetwork {
    /// Parses and validates a network file's text; errors name the line.
    pub fn load(text: &str) -> Result<SimNetwork, ScenarioError> {
        let root = flowlab_spanned::parse(text)?;
        let doc = Reader::of(&root, "")?;
        if let Some((key, item)) = doc
            .table()
            .iter()
            .find(|(k, _)| TRAFFIC_SECTIONS.contains(&k.name.as_str()))
        {
            let section = match item.as_array() {
                Some(_) => format!("[[{}]]", key.name),
                None => format!("[{}]", key.name),
            };
            return Err(item.error(format!(
                "{section}: a network file has [network], [hosts], [[node]] and [[link]]; \
                 traffic and timing come from the experiment"
            )));
        }
        doc.only_sections(SECTIONS)?;
        let net = doc.get("network").ok_or_else(|| {
            FileError::at(
                1,
                "missing [network] table: a network file starts with [network]",
            )
        })?;
        let net = Reader::of(net, "network")?;
        net.only(&["name", "description", "drain", "start_spread"])?;
        let nodes = read_nodes(&tables(&doc, "node")?)?;
        let links = read_links(&tables(&doc, "link")?, &nodes)?;
        let drain_ns = net.duration_ns("drain")?.unwrap_or(DEFAULT_DRAIN_NS);
        if drain_ns > crate::limits::MAX_SIM_NS / 2 {
            let item = net.required("drain")?;
            return Err(net.error(item, "drain", "more than 12 h"));
        }
        let model = Model {
            description: net.string("description")?.unwrap_or_default().to_string(),
            duration_ns: 0,
            drain_ns,
            seed: 1,
            start_spread_ns: crate::scenario::start::read_spread(&net)?.unwrap_or(0),
            nodes,
            links,
            flows: Vec::new(),
            backgrounds: Vec::new(),
        };
        let hosts = match doc.get("hosts") {
            None => BTreeMap::new(),
            Some(item) => host_map(&Reader::of(item, "hosts")?, &model)?,
        };
        Ok(SimNetwork {
            name: net.string("name")?.unwrap_or_default().to_string(),
            model,
            hosts,
        })
    }

    /// The network's `name` (empty if the file gives none).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> &str {
        &self.model.description
    }

    /// The links, to check the network against the lab it stands for.
    pub fn links(&self) -> Vec<NetworkLink<'_>> {
        let nodes = &self.model.nodes;
        self.model
            .links
            .iter()
            .map(|l| NetworkLink {
                a: &nodes[l.a].name,
                b: &nodes[l.b].name,
                rate_bps: l.rate_bps,
                delay_ns: l.impair.as_ref().map_or(l.delay_ns, |i| i.delay_ns),
                impair: l.impair.as_ref(),
                atm: l.atm.as_ref().map(|a| &a.port),
                sched: &l.sched,
            })
            .collect()
    }

    /// Whether experiment host `host` can run flows here (a host node, by `[hosts]` or by
    /// its own name); the error says what is wrong in one line.
    pub fn check_host(&self, host: &str) -> Result<(), SimError> {
        self.node_of(host).map(|_| ())
    }

    /// The node experiment host `host` runs on.
    fn node_of(&self, host: &str) -> Result<usize, SimError> {
        if let Some(&n) = self.hosts.get(host) {
            return Ok(n);
        }
        let nodes = &self.model.nodes;
        match nodes.iter().position(|n| n.name == host) {
            Some(i) if nodes[i].kind == NodeKind::Host => Ok(i),
            Some(_) => Err(SimError(format!(
                "host {host} is a router or switch in the network, not a host"
            ))),
            None => Err(SimError(format!(
                "host {host} is not in the network (add it to [hosts] or as a host node)"
            ))),
        }
    }
}

/// `[hosts]`: experiment host name = host node.
fn host_map(hosts: &Reader, model: &Model) -> Result<BTreeMap<String, usize>, ScenarioError> {
    let mut map = BTreeMap::new();
    for (key, item) in hosts.table().iter() {
        let node = item
            .as_str()
            .ok_or_else(|| hosts.error(item, &key.name, "expected a node's name"))?;
        match model.nodes.iter().position(|n| n.name == node) {
            Some(i) if model.nodes[i].kind == NodeKind::Host => {
                map.insert(key.name.clone(), i);
            }
            _ => return Err(hosts.error(item, &key.name, format!("{node:?} is not a host node"))),
        }
    }
    Ok(map)
}

/// Runs the flows of one experiment step together on `network` (each from its start offset)
/// and reports each flow's two ends. The same flows (specs and seeds) give the same results.
pub fn run_step(network: &SimNetwork, flows: &[SimFlow]) -> Result<Vec<SimFlowResult>, SimError> {
    let mut model = network.model.clone();
    model.duration_ns = 0;
    // The step's seed (its flows share it): repetitions draw their own impairments.
    model.seed = flows.first().map_or(model.seed, |f| f.spec.seed);
    for f in flows {
        let spec = network
            .flow_spec(f)
            .map_err(|SimError(e)| SimError(format!("flow {}: {e}", f.name)))?;
        model.duration_ns = model.duration_ns.max(spec.stop_ns);
        model.flows.push(spec);
    }
    if model.duration_ns.saturating_add(model.drain_ns) > crate::limits::MAX_SIM_NS {
        return Err(SimError(
            "the step lasts longer than the simulator's limit of 24 h".into(),
        ));
    }
    let limit = |e: ScenarioError| SimError(e.message);
    crate::limits::check_overload(&model).map_err(limit)?;
    let variants = [Variant { sweep: None, model }];
    crate::limits::check_packet_budget(&variants).map_err(limit)?;
    let model = &variants[0].model;
    let model = model.with_spread_starts(model.seed);
    let out = Sim::new(&model, model.seed).run();
    Ok(flows
        .iter()
        .zip(out.flows)
        .zip(out.echoes)
        .map(|((f, report), echo)| network.sides(f, report, echo))
        .collect())
}

impl SimNetwork {
    /// The simulator's flow for `f`: its path, its sender, its end.
    fn flow_spec(&self, f: &SimFlow) -> Result<FlowSpec, SimError> {
        let spec = &f.spec;
        spec.validate().map_err(|e| SimError(e.to_string()))?;
        let (client, agent) = (self.node_of(&f.from)?, self.node_of(&f.to)?);
        if client == agent {
            return Err(SimError(format!(
                "{} and {} are the same node",
                f.from, f.to
            )));
        }
        let (src, dst) = match spec.direction {
            Direction::Reverse => (agent, client),
            Direction::Oneway | Direction::Loopback => (client, agent),
        };
        let m = &self.model;
        let path = shortest_path(&m.nodes, &m.links, src, dst)
            .ok_or_else(|| SimError(format!("no path from {} to {}", f.from, f.to)))?;
        let (mtu, first_rate) = path_links(m, &path);
        let (protocol, size, metered_headers) = match spec.protocol {
            TestProtocol::Udp => {
                let send = udp_send(spec, mtu, first_rate)?;
                (Protocol::Udp(send), spec.size + UDP_HEADERS, UDP_HEADERS)
            }
            TestProtocol::Tcp => {
                check_tcp(spec)?;
                (Protocol::Tcp, tcp_mss(spec, mtu) + TCP_HEADERS, TCP_HEADERS)
            }
            TestProtocol::Raw => {
                let send = native_send(spec, m, &path, first_rate)?;
                (Protocol::Udp(send), spec.size, 0)
            }
            TestProtocol::Icmp => {
                return Err(SimError("ICMP echoes are not simulated".into()));
            }
        };
        let start_ns = f.start_offset_ns;
        Ok(FlowSpec {
            name: f.name.clone(),
            path,
            stop_ns: start_ns.saturating_add(active_ns(spec, &protocol)?),
            protocol,
            size,
            count: spec.count,
            start_ns,
            start_spread_ns: None,
            service: ServiceCategory::Ubr,
            contract: None,
            police: None,
            shape: false,
            vc_limits: None,
            dscp: spec.socket.dscp.unwrap_or(0),
            tcp: tcp_spec(spec, size.saturating_sub(TCP_HEADERS)),
            native: spec.protocol == TestProtocol::Raw,
            socket: socket_spec(spec),
            metered_headers,
            replica_of: None,
            line: 0,
            rate_line: 0,
        })
    }

    /// The client's and agent's reports of flow `f`, as a real test's ends give them.
    fn sides(&self, f: &SimFlow, r: FlowReport, echo: EchoReport) -> SimFlowResult {
        let host = |h: &str| {
            self.node_of(h)
                .map_or_else(|_| h.to_string(), |n| self.model.nodes[n].name.clone())
        };
        let (mut client, mut agent) = (
            SideReport::new(Role::Sender, host(&f.from)),
            SideReport::new(Role::Receiver, host(&f.to)),
        );
        match f.spec.direction {
            Direction::Oneway => {
                client.sender = Some(r.sender);
                agent.receiver = Some(r.receiver);
            }
            Direction::Reverse => {
                (client.role, agent.role) = (Role::Receiver, Role::Sender);
                client.receiver = Some(r.receiver);
                agent.sender = Some(r.sender);
            }
            Direction::Loopback => {
                agent.role = Role::Echo;
                client.sender = Some(r.sender);
                client.receiver = Some(r.receiver);
                agent.echo = Some(echo);
            }
        }
        client.notes = not_simulated(&f.spec);
        if r.in_flight_at_end > 0 {
            client.notes.push(format!(
                "simulated: {} packets still in flight at the end, not counted as lost by the receiver",
                r.in_flight_at_end
            ));
        }
        SimFlowResult {
            name: f.name.clone(),
            client,
            agent,
        }
    }
}

/// The smallest MTU along `path`, and the rate of its first link.
fn path_links(m: &Model, path: &[usize]) -> (u32, u64) {
    let links: Vec<_> = path
        .windows(2)
        .filter_map(|w| {
            m.links
                .iter()
                .find(|l| (l.a, l.b) == (w[0], w[1]) || (l.a, l.b) == (w[1], w[0]))
        })
        .collect();
    let mtu = links.iter().map(|l| l.mtu).min().unwrap_or(u32::MAX);
    (mtu, links.first().map_or(0, |l| l.rate_bps))
}

/// A UDP test's sender: its rate (`max`: the first link's rate, shared by its flows) or its
/// traffic model, with its seed.
fn udp_send(spec: &TestSpec, mtu: u32, first_rate: u64) -> Result<SendSpec, SimError> {
    if let Some(t) = &spec.traffic {
        check_simulated(t).map_err(SimError)?;
    } else if spec.size + UDP_HEADERS > mtu {
        return Err(SimError(format!(
            "{} B datagrams and 28 header bytes are above the path MTU of {mtu} B \
             (fragmentation is not simulated)",
            spec.size
        )));
    }
    let wire = u64::from(spec.size + UDP_HEADERS);
    let max_rate = first_rate * u64::from(spec.size) / wire / u64::from(spec.flows.max(1));
    Ok(SendSpec {
        traffic: spec.traffic.clone(),
        rate_bps: spec.rate_bps.unwrap_or(max_rate).max(1),
        size: spec.size,
        subflows: spec.flows,
        seed: Some(spec.seed),
        header_bytes: UDP_HEADERS,
        echo: spec.direction == Direction::Loopback,
    })
}

/// A native-frame test's sender: AAL5 frames of `size` bytes (no IP or UDP headers) at its
/// rate (`max`: the first link's rate), over ATM links only, never above the path MTU.
fn native_send(
    spec: &TestSpec,
    m: &Model,
    path: &[usize],
    first_rate: u64,
) -> Result<SendSpec, SimError> {
    let links = path.windows(2).filter_map(|w| {
        m.links
            .iter()
            .find(|l| (l.a, l.b) == (w[0], w[1]) || (l.a, l.b) == (w[1], w[0]))
    });
    for l in links {
        if l.atm.is_none() {
            return Err(SimError(format!(
                "native frames are simulated as AAL5 frames over ATM links; link {} is IP",
                l.name
            )));
        }
        if spec.size > l.mtu {
            return Err(SimError(format!(
                "{} B native frames are above link {}'s MTU of {} B (frames are not fragmented)",
                spec.size, l.name, l.mtu
            )));
        }
    }
    if spec.direction == Direction::Loopback {
        return Err(SimError("native frames are simulated one-way".into()));
    }
    Ok(SendSpec {
        header_bytes: 0,
        rate_bps: spec.rate_bps.unwrap_or(first_rate).max(1),
        ..udp_send(spec, u32::MAX, first_rate)?
    })
}

/// The receiving socket of a one-way UDP or native test that sets its receive buffer: the
/// slow reader (`read_rate`) drains it.
fn socket_spec(spec: &TestSpec) -> Option<SocketSpec> {
    let one_way = spec.direction != Direction::Loopback;
    let datagrams = matches!(spec.protocol, TestProtocol::Udp | TestProtocol::Raw);
    let buffer_bytes = spec.socket.recv_buffer.filter(|_| one_way && datagrams)?;
    Some(SocketSpec {
        buffer_bytes: u64::from(buffer_bytes),
        read_rate_bps: spec.socket.read_rate_bps,
        read_rate_from_ns: 0,
    })
}

/// Refuses what the simulated TCP (one Reno connection sending as fast as its window
/// allows) does not model.
fn check_tcp(spec: &TestSpec) -> Result<(), SimError> {
    let refuse = |what: &str| Err(SimError(format!("{what} over TCP is not simulated")));
    if spec.traffic.is_some() {
        return refuse("a traffic model");
    }
    if spec.direction == Direction::Loopback {
        return refuse("loopback");
    }
    if spec.flows > 1 {
        return refuse("more than one connection");
    }
    if spec.rate_bps.is_some() {
        return refuse("a rate (the simulated TCP sends as fast as its window allows: rate = max)");
    }
    Ok(())
}

/// The MSS: the test's, at most what the path MTU carries.
fn tcp_mss(spec: &TestSpec, mtu: u32) -> u32 {
    let path = mtu.saturating_sub(TCP_HEADERS).max(1);
    spec.socket.mss.map_or(path, |m| m.clamp(1, path))
}

fn tcp_spec(spec: &TestSpec, mss: u32) -> TcpSpec {
    let s = &spec.socket;
    let window = s
        .window_clamp
        .or(s.recv_buffer)
        .map_or(DEFAULT_TCP_WINDOW, u64::from);
    TcpSpec {
        window,
        send_buffer: s.send_buffer.map_or(window, u64::from),
        mss,
        window_scaling: true,
        bytes: spec.count.map(|c| c.saturating_mul(u64::from(spec.size))),
        delayed_ack_ns: None,
        min_rto_ns: TCP_MIN_RTO_NS,
        pace_bps: None,
    }
}

/// How long the flow sends: its duration, or for a constant rate the time its count takes.
fn active_ns(spec: &TestSpec, protocol: &Protocol) -> Result<u64, SimError> {
    if let Some(d) = spec.duration_ns {
        return Ok(d);
    }
    match (protocol, spec.count) {
        (Protocol::Udp(s), Some(n)) if s.traffic.is_none() => {
            let bits = u128::from(n) * u128::from(s.size) * 8 * 1_000_000_000;
            let ns = bits.div_ceil(u128::from(s.rate_bps.max(1))) + 1;
            Ok(u64::try_from(ns).unwrap_or(u64::MAX))
        }
        _ => Err(SimError(
            "give a duration: only a constant-rate UDP flow ends by its count alone".into(),
        )),
    }
}

/// What the test asks for that the simulator does not model, for the client's notes.
fn not_simulated(spec: &TestSpec) -> Vec<String> {
    let s = &spec.socket;
    let udp = spec.protocol == TestProtocol::Udp;
    let asked = [
        (spec.interval_ns.is_some(), "live interval reports"),
        (spec.packet_log, "the packet log"),
        (spec.busy_poll, "busy polling"),
        (spec.omit_ns.is_some(), "a warm-up left out (omit)"),
        (
            spec.echo_every.is_some(),
            "echoes inside a load (echo_every)",
        ),
        (s.kernel_pacing, "kernel pacing"),
        (s.zerocopy, "zero-copy sending"),
        (s.tx_timestamps, "transmit timestamps"),
        (
            s.packet_socket,
            "a packet socket (the send path is not modelled)",
        ),
        (
            s.priority.is_some() || s.mark.is_some(),
            "socket priority and mark",
        ),
        (s.nodelay.is_some(), "TCP_NODELAY"),
        (
            s.read_rate_bps.is_some() && socket_spec(spec).is_none(),
            "a slow reader (read_rate) without a receive buffer",
        ),
        (udp && s.send_buffer.is_some(), "UDP send buffers"),
    ];
    let mut notes: Vec<String> = asked
        .iter()
        .filter(|(set, _)| *set)
        .map(|(_, what)| format!("simulated: {what} not modelled"))
        .collect();
    if let Some(cc) = s.congestion.as_deref().filter(|c| *c != "reno") {
        notes.push(format!(
            "simulated: congestion control {cc} not modelled (Reno)"
        ));
    }
    if spec.protocol == TestProtocol::Tcp {
        notes.push("simulated: TCP counted in segments, not messages".into());
    }
    notes
}
