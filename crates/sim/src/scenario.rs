//! Scenario files: TOML text → a validated [`Scenario`], or a [`ScenarioError`] that names
//! the line.
//!
//! The file is read as a spanned tree (`flowlab-spanned`), so each check after parsing (an
//! unknown node, SCR above PCR, no path) can still point at the line that caused it. The whole
//! file, every sweep point included, is checked before anything runs.

use flowlab_atm::VcLimits;
use flowlab_atm::{PolicingAction, ServiceCategory};
use flowlab_link::atm::{
    read_contract, read_port, read_service, read_vc_limits, ContractSpec, PortSpec, POLICING,
};
use flowlab_link::config::{read_cell_loss, read_impair, IMPAIR_KEYS};
use flowlab_link::diffserv::{dscp_of, queue_limit, read_sched, SchedSpec, DEFAULT_LIMIT};
use flowlab_link::impair::ImpairConfig;
use flowlab_link::loss::LossModel;
use flowlab_spanned::{count_values, expand_values, FileError, Item, Reader, SweepValue, Unit};

use crate::endsys::{read_endsys, EndSystem, SocketSpec, ENDSYS_KEYS};
use crate::limits::{MAX_SIM_NS, MAX_SWEEP_VALUES, MAX_TABLES};
use crate::sender::{parse_traffic, SendSpec};

/// A scenario that failed to load: a message and, where known, the line it is about
/// (displayed as `line N: message`, or `FILE:LINE: message` after `with_file`).
pub type ScenarioError = FileError;

const SECTIONS: &[&str] = &["sim", "node", "link", "flow", "background", "sweep"];
const SIM_KEYS: &[&str] = &["duration", "drain", "seed", "description", "start_spread"];
const NODE_KEYS: &[&str] = &["name", "kind"];
/// With flowlab_link's `IMPAIR_KEYS` (`delay`, `jitter`, `loss` ...), read by its reader.
const LINK_KEYS: &[&str] = &[
    "name",
    "from",
    "to",
    "phy",
    "rate",
    "buffer_cells",
    "host_buffer_cells",
    "cell_loss",
    "cell_loss_burst",
    "cell_gemodel",
    "epd",
    "ppd",
    "clp_threshold",
    "queues",
    "vc_buffer_cells",
    "vc_epd",
    "encap",
    "mtu",
    "buffer",
    "buffer_packets",
    "scheduler",
    "classes",
    "tx_ring",
];
const FLOW_KEYS: &[&str] = &[
    "name",
    "from",
    "to",
    "path",
    "protocol",
    "rate",
    "size",
    "count",
    "interval",
    "start",
    "start_spread",
    "duration",
    "service",
    "pcr",
    "cdvt",
    "scr",
    "mbs",
    "police",
    "shape",
    "dscp",
    "window",
    "send_buffer",
    "mss",
    "window_scaling",
    "bytes",
    "delayed_ack",
    "min_rto",
    "pace",
    "vc_buffer_cells",
    "vc_epd",
    "traffic",
    "leaves",
    "recv_buffer",
    "read_rate",
    "read_rate_from",
    "loopback",
];
const BACKGROUND_KEYS: &[&str] = &[
    "name",
    "from",
    "to",
    "rate",
    "pattern",
    "passes",
    "loop_delay",
    "cells_per_frame",
    "service",
    "clp",
    "start",
    "duration",
    "traffic",
    "sar_rate",
];
const NOT_MAX: &str = "'max' is not a rate here";
const NODE_KINDS: &[(&str, NodeKind)] = &[
    ("host", NodeKind::Host),
    ("atm-switch", NodeKind::AtmSwitch),
    ("ip-router", NodeKind::IpRouter),
    ("router", NodeKind::IpRouter),
];
// `ttcp` is read apart (a bulk TCP transfer between hosts), named here for the error text.
const PATTERNS: &[(&str, bool)] = &[("cbr", false), ("poisson", true), ("ttcp", false)];

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeKind {
    Host,
    AtmSwitch,
    IpRouter,
}

#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    pub name: String,
    pub kind: NodeKind,
    pub endsys: EndSystem,
}

/// The ATM side of a link: the port every link shares with emulated ones, and the buffer of
/// a host's adapter.
#[derive(Debug, Clone)]
pub(crate) struct AtmSpec {
    pub port: PortSpec,
    pub host_buffer_cells: usize,
    /// Cells lost on the line, each direction on its own (`cell_loss` ...).
    pub cell_loss: LossModel,
}

/// One link; it carries traffic both ways, each way with its own output port.
#[derive(Debug, Clone)]
pub(crate) struct LinkSpec {
    pub name: String,
    pub a: usize,
    pub b: usize,
    pub atm: Option<AtmSpec>,
    /// IP links: the bit rate. IP over ATM: the rate a router's scheduler sends at, in bits of
    /// whole cells (the line's cell bit rate unless `rate` shapes the VC lower).
    pub rate_bps: u64,
    /// The propagation delay, when the impairment stage would only delay.
    pub delay_ns: u64,
    /// The impairment stage (the emulator's, same keys) after the port of an IP link, when
    /// it does more than delay: it then holds the delay too.
    pub impair: Option<ImpairConfig>,
    pub mtu: u32,
    pub sched: SchedSpec,
    pub tx_ring: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Protocol {
    Udp(SendSpec),
    Ping { interval_ns: u64 },
    Tcp,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct TcpSpec {
    pub window: u64,
    pub send_buffer: u64,
    pub mss: u32,
    pub window_scaling: bool,
    pub bytes: Option<u64>,
    pub delayed_ack_ns: Option<u64>,
    pub min_rto_ns: u64,
    /// The application writes one MSS at a time at this rate (host pacing); `None`: bulk.
    pub pace_bps: Option<u64>,
}

#[derive(Debug, Clone)]
pub(crate) struct FlowSpec {
    pub name: String,
    pub path: Vec<usize>,
    pub protocol: Protocol,
    pub size: u32,
    pub count: Option<u64>,
    pub start_ns: u64,
    pub stop_ns: u64,
    /// The flow's own `start_spread` (`Model::start_spread_ns` when `None`).
    pub start_spread_ns: Option<u64>,
    pub service: ServiceCategory,
    pub contract: Option<ContractSpec>,
    pub police: Option<PolicingAction>,
    pub shape: bool,
    /// The flow's VCs' share of each switch port's buffer, instead of the link's.
    pub vc_limits: Option<VcLimits>,
    pub dscp: u8,
    pub tcp: TcpSpec,
    /// Native frames (`protocol = "raw"`): each packet is an AAL5 frame of its payload alone,
    /// no IP or UDP headers, sent over ATM links only.
    pub native: bool,
    /// The receiving socket's buffer and its application's reading rate, if modelled.
    pub socket: Option<SocketSpec>,
    /// Header bytes the meters leave out of each packet: none in scenarios (they count IP
    /// bytes), the IP and transport headers where flows report payload as real tests do.
    pub metered_headers: u32,
    /// Lines of the `[[flow]]` table and of its rate (the table's when it has none).
    pub line: usize,
    pub rate_line: usize,
    /// An extra leaf of a point-to-multipoint VC: the root flow's index and the switch
    /// where the copies for this leaf are made.
    pub replica_of: Option<(usize, usize)>,
}

#[derive(Debug, Clone)]
pub(crate) struct BackgroundSpec {
    pub name: String,
    /// The switch and the link (index into `links`) whose output port it loads.
    pub node: usize,
    pub link: usize,
    /// Cell bits per second: the `rate`, or what the `traffic` model offers (estimated).
    pub cells_per_second_num: u64,
    /// A traffic model sending AAL5 frames instead of single cells at `rate`.
    pub model: Option<SendSpec>,
    /// The model's cells reach the port no faster than this (bit/s of cells): the sending
    /// host's adapter, below the line's rate.
    pub sar_rate_bps: Option<u64>,
    pub poisson: bool,
    pub passes: usize,
    pub loop_delay_ns: u64,
    pub cells_per_frame: u32,
    pub service: ServiceCategory,
    pub clp: bool,
    pub start_ns: u64,
    pub stop_ns: u64,
    pub line: usize,
}

/// One fully validated network and workload.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub description: String,
    pub duration_ns: u64,
    pub drain_ns: u64,
    pub seed: u64,
    /// Each flow starts up to this much after its `start`, drawn from the run's seed
    /// (`start::spread_starts`).
    pub start_spread_ns: u64,
    pub nodes: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
    pub flows: Vec<FlowSpec>,
    pub backgrounds: Vec<BackgroundSpec>,
}

/// One point of a sweep (or the only run).
#[derive(Debug, Clone)]
pub(crate) struct Variant {
    pub sweep: Option<(String, String)>,
    pub model: Model,
}

/// A loaded, validated scenario: one run, or one per sweep value.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub(crate) variants: Vec<Variant>,
}

impl Scenario {
    /// How many runs [`crate::run`] will make (sweep points).
    pub fn runs(&self) -> usize {
        self.variants.len()
    }

    /// Sets the simulated duration of every run (e.g. to keep tests short).
    pub fn set_duration_ns(&mut self, ns: u64) {
        for v in &mut self.variants {
            let m = &mut v.model;
            for f in &mut m.flows {
                f.stop_ns = f.stop_ns.min(ns);
            }
            for b in &mut m.backgrounds {
                b.stop_ns = b.stop_ns.min(ns);
            }
            m.duration_ns = ns;
        }
    }

    /// The simulated duration of the first run.
    pub fn duration_ns(&self) -> u64 {
        self.variants.first().map_or(0, |v| v.model.duration_ns)
    }
}

/// Parses and validates a scenario file's text.
pub fn load(text: &str) -> Result<Scenario, ScenarioError> {
    let root = flowlab_spanned::parse(text)?;
    let doc = Reader::of(&root, "")?;
    if let Some(network) = doc.get("network") {
        let why = "this is a network file (for `flowlab run --sim`), not a scenario";
        return Err(network.error(why));
    }
    doc.only_sections(SECTIONS)?;
    let variants = variants(&root)?;
    crate::limits::check_packet_budget(&variants)?;
    Ok(Scenario { variants })
}

/// One validated model per sweep value, or the only one.
fn variants(root: &Item) -> Result<Vec<Variant>, ScenarioError> {
    let doc = Reader::of(root, "")?;
    let Some(sweep) = doc.get("sweep") else {
        return Ok(vec![Variant {
            sweep: None,
            model: build(&doc)?,
        }]);
    };
    let sweep = Reader::of(sweep, "sweep")?;
    sweep.only(&["param", "values"])?;
    let param_item = sweep.required("param")?;
    let param_line = param_item.line();
    let params = swept_keys(param_item)?;
    let param = params.join(",");
    let keys: Vec<Vec<&str>> = params.iter().map(|p| p.split('.').collect()).collect();
    let values_item = sweep.required("values")?;
    let Some(values) = values_item.as_array() else {
        return Err(values_item.error("sweep: values: expected an array"));
    };
    let unit = swept_unit(&keys).map_err(|m| FileError::at(param_line, format!("sweep: {m}")))?;
    let max = MAX_SWEEP_VALUES as u64;
    let values = SweepValue::read_all(values.to_vec(), unit, max, "sweep")?;
    match count_values(&values) {
        0 => return Err(values_item.error("sweep: values is empty")),
        n if n > max => {
            return Err(values_item.error(format!(
                "sweep: {n} values, more than the limit of {MAX_SWEEP_VALUES} runs"
            )))
        }
        _ => {}
    }
    // A bad param is reported before any value is tried.
    let mut probe = root.clone();
    for parts in &keys {
        slot(&mut probe, parts).map_err(|m| FileError::at(param_line, format!("sweep: {m}")))?;
    }
    let mut variants = Vec::new();
    for v in expand_values(values) {
        let Some(label) = v.scalar_text() else {
            return Err(v.error("sweep: values must be strings, numbers or booleans"));
        };
        // In place: errors still name the line of the swept key.
        let mut variant = root.clone();
        for parts in &keys {
            let slot = slot(&mut variant, parts).map_err(|m| FileError::at(param_line, m))?;
            *slot = Item::new(slot.line(), v.value().clone());
        }
        let model = build(&Reader::of(&variant, "")?)
            .map_err(|e| e.note(format!("(sweep value {label} at line {})", v.line())))?;
        variants.push(Variant {
            sweep: Some((param.clone(), label)),
            model,
        });
    }
    Ok(variants)
}

/// The sweep's `param`: one key, or a list of keys that all take each value (e.g. the same
/// pacing rate for several flows).
fn swept_keys(item: &Item) -> Result<Vec<&str>, FileError> {
    let bad = || item.error("sweep: param: expected a key or a list of keys");
    let keys: Vec<&str> = match item.as_array() {
        Some(list) => list
            .iter()
            .map(|k| k.as_str().ok_or_else(bad))
            .collect::<Result<_, _>>()?,
        None => vec![item.as_str().ok_or_else(bad)?],
    };
    if keys.is_empty() {
        return Err(bad());
    }
    Ok(keys)
}

/// The unit all swept keys share (their values are read once, for every key).
fn swept_unit(keys: &[Vec<&str>]) -> Result<Option<Unit>, String> {
    let unit = |parts: &Vec<&str>| parts.last().and_then(|k| unit_of(k));
    let first = unit(&keys[0]);
    match keys.iter().find(|k| unit(k) != first) {
        Some(k) => Err(format!(
            "{} and {} take different units",
            keys[0].join("."),
            k.join(".")
        )),
        None => Ok(first),
    }
}

/// How a swept key's range bounds are read; `None` for keys that are not numbers.
fn unit_of(key: &str) -> Option<Unit> {
    Some(match key {
        "rate" | "pcr" | "scr" | "pace" | "read_rate" | "sar_rate" => Unit::Rate,
        "size" | "mtu" | "buffer" | "window" | "send_buffer" | "bytes" | "recv_buffer" => {
            Unit::Bytes
        }
        "duration" | "drain" | "delay" | "jitter" | "start" | "interval" | "cdvt"
        | "delayed_ack" | "min_rto" | "loop_delay" | "read_rate_from" => Unit::Duration,
        "count" | "seed" | "buffer_cells" | "host_buffer_cells" | "epd" | "clp_threshold"
        | "vc_buffer_cells" | "vc_epd" | "buffer_packets" | "tx_ring" | "mbs" | "mss"
        | "passes" | "cells_per_frame" | "limit" => Unit::Count,
        _ => return None,
    })
}

/// The value that `param`'s `parts` (`sim.KEY`, `flow.NAME.KEY`, `link.NAME.KEY`,
/// `background.NAME.KEY`) name; the key must be in the file.
fn slot<'d>(root: &'d mut Item, parts: &[&str]) -> Result<&'d mut Item, String> {
    let usage = "param must be sim.KEY, flow.NAME.KEY, link.NAME.KEY or background.NAME.KEY";
    let root = root.as_table_mut().ok_or(usage)?;
    match parts {
        ["sim", key] => root
            .get_mut("sim")
            .and_then(Item::as_table_mut)
            .and_then(|t| t.get_mut(key))
            .ok_or_else(|| format!("no key {key} in [sim] (the swept key must be in the file)")),
        [section @ ("flow" | "link" | "background"), name, key] => {
            let tables = root
                .get_mut(section)
                .and_then(Item::as_array_mut)
                .ok_or_else(|| format!("no [[{section}]] tables"))?;
            for t in tables.iter_mut().filter_map(Item::as_table_mut) {
                let text = |k: &str| t.get(k).and_then(Item::as_str).map(str::to_string);
                let tname = text("name").or_else(|| {
                    (*section == "link").then(|| {
                        let (from, to) = (text("from"), text("to"));
                        format!("{}-{}", from.unwrap_or_default(), to.unwrap_or_default())
                    })
                });
                if tname.as_deref() == Some(*name) {
                    return t.get_mut(key).ok_or_else(|| {
                        format!("[[{section}]] {name} has no key {key} (the swept key must be in the file)")
                    });
                }
            }
            Err(format!("no [[{section}]] named {name}"))
        }
        _ => Err(usage.to_string()),
    }
}

/// The IP and UDP headers: the smallest datagram.
const MIN_UDP: u64 = 28;
/// The IP and TCP headers.
const TCP_HEADERS: u32 = 40;

/// `[[key]]` tables, at most [`MAX_TABLES`].
pub(crate) fn tables<'t>(doc: &Reader<'t>, key: &str) -> Result<Vec<Reader<'t>>, FileError> {
    let list = doc.tables(key)?;
    match list.get(MAX_TABLES) {
        Some(t) => Err(FileError::at(
            t.line(),
            format!("more than {MAX_TABLES} [[{key}]] tables, the limit"),
        )),
        None => Ok(list),
    }
}

/// The model of one file (or one sweep value's copy of it).
fn build(doc: &Reader) -> Result<Model, ScenarioError> {
    let tables = |key: &str| tables(doc, key);
    let (node_t, link_t, flow_t, bg_t) = (
        tables("node")?,
        tables("link")?,
        tables("flow")?,
        tables("background")?,
    );
    let sim = read_sim(doc)?;
    let nodes = read_nodes(&node_t)?;
    let net = Net {
        links: read_links(&link_t, &nodes)?,
        nodes,
    };
    let mut flows: Vec<FlowSpec> = Vec::new();
    let mut backgrounds = Vec::new();
    let ttcp = bg_t.iter().filter_map(|b| match background::is_ttcp(b) {
        Ok(true) => Some(background::ttcp_flow(b, &net, sim.duration_ns).map(|f| (b, f))),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    });
    let read = flow_t.iter().map(|f| {
        let flow = read_flow(f, &net, sim.duration_ns)?;
        // The extra leaves of a point-to-multipoint VC follow their root.
        let mut leaves = p2mp::leaves(f, &flow, 0, &net)?;
        leaves.insert(0, flow);
        Ok((f, leaves))
    });
    let ttcp = ttcp.map(|r| r.map(|(b, f)| (b, vec![f])));
    for r in read.chain(ttcp) {
        let (table, group) = r?;
        let root = flows.len();
        for mut flow in group {
            if flows.iter().any(|x| x.name == flow.name) {
                let item = table.required("name")?;
                return Err(item.error(format!("flow {:?} is defined twice", flow.name)));
            }
            if let Some((_, branch)) = flow.replica_of {
                flow.replica_of = Some((root, branch));
            }
            flows.push(flow);
        }
    }
    for b in &bg_t {
        if !background::is_ttcp(b)? {
            backgrounds.push(read_background(b, &net, sim.duration_ns)?);
        }
    }
    let model = Model {
        description: sim.description,
        duration_ns: sim.duration_ns,
        drain_ns: sim.drain_ns,
        seed: sim.seed,
        start_spread_ns: sim.start_spread_ns,
        nodes: net.nodes,
        links: net.links,
        flows,
        backgrounds,
    };
    crate::limits::check_overload(&model)?;
    Ok(model)
}

/// `[sim]`, read.
struct Sim {
    duration_ns: u64,
    drain_ns: u64,
    seed: u64,
    start_spread_ns: u64,
    description: String,
}

fn read_sim(doc: &Reader) -> Result<Sim, ScenarioError> {
    let item = doc
        .get("sim")
        .ok_or_else(|| FileError::at(1, "missing [sim] table (duration, seed)"))?;
    let s = Reader::of(item, "")?;
    s.only(SIM_KEYS)?;
    let duration_ns = match s.duration_ns("duration")? {
        Some(0) => return Err(s.error(s.required("duration")?, "duration", "must be above 0")),
        Some(d) => d,
        None => 10_000_000_000,
    };
    let drain_ns = s.duration_ns("drain")?.unwrap_or(1_000_000_000);
    if duration_ns.saturating_add(drain_ns) > MAX_SIM_NS {
        let line = s
            .get("duration")
            .or(s.get("drain"))
            .map_or(item.line(), Item::line);
        return Err(FileError::at(
            line,
            format!(
                "duration: {} s plus drain {} s is more than the limit of {} s of simulated time",
                duration_ns / 1_000_000_000,
                drain_ns / 1_000_000_000,
                MAX_SIM_NS / 1_000_000_000
            ),
        ));
    }
    Ok(Sim {
        duration_ns,
        drain_ns,
        seed: s.uint("seed")?.unwrap_or(1),
        start_spread_ns: start::read_spread(&s)?.unwrap_or(0),
        description: s.string("description")?.unwrap_or_default().to_string(),
    })
}

pub(crate) fn read_nodes(tables: &[Reader]) -> Result<Vec<NodeSpec>, ScenarioError> {
    let mut nodes: Vec<NodeSpec> = Vec::new();
    for n in tables {
        let n = n.named("node");
        n.only(&[NODE_KEYS, ENDSYS_KEYS].concat())?;
        let name = n.required_string("name")?.to_string();
        n.required("kind")?;
        let kind = n.choice("kind", NODE_KINDS)?.unwrap_or(NodeKind::Host);
        if nodes.iter().any(|x| x.name == name) {
            let item = n.required("name")?;
            return Err(item.error(format!("node {name:?} is defined twice")));
        }
        let endsys = read_endsys(&n, kind)?;
        nodes.push(NodeSpec { name, kind, endsys });
    }
    Ok(nodes)
}

/// The network: nodes and the links between them.
struct Net {
    nodes: Vec<NodeSpec>,
    links: Vec<LinkSpec>,
}

impl Net {
    fn link_between(&self, x: usize, y: usize) -> Option<usize> {
        link_between(&self.links, x, y)
    }
}

fn link_between(links: &[LinkSpec], x: usize, y: usize) -> Option<usize> {
    links
        .iter()
        .position(|l| (l.a, l.b) == (x, y) || (l.a, l.b) == (y, x))
}

/// The node a key names.
fn node_ref(r: &Reader, key: &str, nodes: &[NodeSpec]) -> Result<usize, ScenarioError> {
    let name = r.required_string(key)?;
    find_node(r.required(key)?, name, nodes)
}

fn find_node(item: &Item, name: &str, nodes: &[NodeSpec]) -> Result<usize, ScenarioError> {
    nodes
        .iter()
        .position(|n| n.name == name)
        .ok_or_else(|| item.error(format!("unknown node {name:?}")))
}

pub(crate) fn read_links(
    tables: &[Reader],
    nodes: &[NodeSpec],
) -> Result<Vec<LinkSpec>, ScenarioError> {
    let mut links: Vec<LinkSpec> = Vec::new();
    for l in tables {
        let link = read_link(&l.named("link"), nodes)?;
        if link_between(&links, link.a, link.b).is_some() {
            return Err(FileError::at(
                l.line(),
                format!(
                    "a link between {} and {} is defined twice",
                    nodes[link.a].name, nodes[link.b].name
                ),
            ));
        }
        // ATM switches speak only cells.
        if link.atm.is_none()
            && [link.a, link.b]
                .iter()
                .any(|&e| nodes[e].kind == NodeKind::AtmSwitch)
        {
            return Err(FileError::at(
                l.line(),
                format!(
                    "link {}: an ATM switch needs an ATM link (set phy)",
                    link.name
                ),
            ));
        }
        links.push(link);
    }
    Ok(links)
}

fn read_link(l: &Reader, nodes: &[NodeSpec]) -> Result<LinkSpec, ScenarioError> {
    let keys: Vec<&str> = LINK_KEYS.iter().chain(IMPAIR_KEYS).copied().collect();
    l.only(&keys)?;
    let a = node_ref(l, "from", nodes)?;
    let b = node_ref(l, "to", nodes)?;
    if a == b {
        return Err(l
            .required("to")?
            .error("a link must join two different nodes"));
    }
    let name = match l.string("name")? {
        Some(n) => n.to_string(),
        None => format!("{}-{}", nodes[a].name, nodes[b].name),
    };
    let l = l.named(format!("link {name}"));
    let atm = read_atm(&l)?;
    let rate = l.bit_rate("rate", NOT_MAX)?;
    let rate_bps = match (&atm, rate) {
        (Some(a), None) => a.port.line.cell_bit_rate().round() as u64,
        (Some(a), Some(r)) if r as f64 > a.port.line.cell_bit_rate() + 0.5 => {
            let msg = format!("{r} bit/s is above the {} line's cell rate", a.port.phy);
            return Err(l.error(l.required("rate")?, "rate", msg));
        }
        (_, Some(r)) => r,
        (None, None) => return Err(l.table_error("give phy (an ATM link) or rate (an IP link)")),
    };
    let mtu = l
        .bytes("mtu")?
        .unwrap_or(if atm.is_some() { 9180 } else { 1500 });
    let mtu_error = |m: String| match l.get("mtu") {
        Some(item) => Err(l.error(item, "mtu", m)),
        None => Err(l.table_error(format!("mtu: {m}"))),
    };
    if mtu <= u64::from(TCP_HEADERS) {
        return mtu_error(format!(
            "{mtu} bytes is below the 40 bytes of IP and TCP headers"
        ));
    }
    if mtu > 65_535 {
        return mtu_error(format!("{mtu} is above the IPv4 maximum 65535"));
    }
    let link_limit = queue_limit(&l)?.unwrap_or(DEFAULT_LIMIT);
    let (delay_ns, impair) = read_link_impair(&l, atm.is_some())?;
    Ok(LinkSpec {
        sched: read_sched(&l, link_limit)?,
        tx_ring: l.positive("tx_ring")?.unwrap_or(1) as usize,
        name,
        a,
        b,
        atm,
        rate_bps,
        delay_ns,
        impair,
        mtu: mtu as u32,
    })
}

/// The link's impairment keys, read as a lab's `emulate` table reads them: a propagation
/// delay, or a whole stage. Cells of an ATM link are not lost, copied or delayed apart one by
/// one here, so an ATM link takes `delay` only.
fn read_link_impair(l: &Reader, atm: bool) -> Result<(u64, Option<ImpairConfig>), ScenarioError> {
    let Some(config) = read_impair(l)? else {
        return Ok((0, None));
    };
    if config.is_fixed_delay() {
        return Ok((config.delay_ns, None));
    }
    if atm {
        let key = IMPAIR_KEYS
            .iter()
            .find(|&&k| k != "delay" && l.get(k).is_some())
            .copied()
            .unwrap_or("delay");
        let msg = "the impairment stage runs on IP links; an ATM link takes delay only";
        return Err(l.error(l.required(key)?, key, msg));
    }
    Ok((0, Some(config)))
}

/// The ATM side of a link with a `phy`.
fn read_atm(l: &Reader) -> Result<Option<AtmSpec>, ScenarioError> {
    let Some(port) = read_port(l)? else {
        for key in ["cell_loss", "cell_loss_burst", "cell_gemodel"] {
            if let Some(item) = l.get(key) {
                let msg = "needs phy (an ATM link); an IP link takes loss";
                return Err(l.error(item, key, msg));
            }
        }
        if let Some(item) = l.get("queues") {
            let msg = "needs phy (an ATM link); an IP link's queues are its classes";
            return Err(l.error(item, "queues", msg));
        }
        return Ok(None);
    };
    Ok(Some(AtmSpec {
        port,
        host_buffer_cells: l.positive("host_buffer_cells")?.unwrap_or(1 << 16) as usize,
        cell_loss: read_cell_loss(l)?,
    }))
}

/// When a source stops: `start + duration`, at most the end of the run.
fn stop_ns(r: &Reader, start_ns: u64, run_ns: u64) -> Result<u64, ScenarioError> {
    Ok(match r.duration_ns("duration")? {
        Some(d) => start_ns.saturating_add(d).min(run_ns),
        None => run_ns,
    })
}

fn read_flow(f: &Reader, net: &Net, run_ns: u64) -> Result<FlowSpec, ScenarioError> {
    let f = f.named("flow");
    f.only(FLOW_KEYS)?;
    let name = f.required_string("name")?.to_string();
    let f = f.named(format!("flow {name}"));
    let path = flow_path(&f, &name, net)?;
    let start_ns = f.duration_ns("start")?.unwrap_or(0);
    let mut protocol = flow_protocol(&f, &name)?;
    let native = f.string("protocol")? == Some("raw");
    let size = match native {
        true => native_size(&f, &protocol, &path, net)?,
        false => flow_size(&f, &protocol, &path, net)?,
    };
    if let Protocol::Udp(s) = &mut protocol {
        s.size = size;
        s.echo = read_loopback(&f)?;
    } else if let Some(item) = f.get("loopback") {
        return Err(f.error(
            item,
            "loopback",
            "echoes a udp or raw flow (ping echoes anyway)",
        ));
    }
    let contract = read_contract(&f)?;
    let police = f.choice("police", POLICING)?.flatten();
    let shape = f.bool("shape")?.unwrap_or(false);
    if (police.is_some() || shape) && contract.is_none() {
        let line = f
            .get("police")
            .or(f.get("shape"))
            .map_or(f.line(), Item::line);
        return Err(FileError::at(
            line,
            format!("flow {name}: police and shape need a contract (pcr)"),
        ));
    }
    if let (Some(item), false) = (f.get("pace"), matches!(protocol, Protocol::Tcp)) {
        return Err(f.error(item, "pace", "paces tcp flows (udp sets rate)"));
    }
    let dscp = match f.get("dscp") {
        None => 0,
        Some(item) => dscp_of(item).map_err(|m| f.error(item, "dscp", m))?,
    };
    let socket = read_socket(&f, &protocol)?;
    Ok(FlowSpec {
        path,
        protocol,
        size,
        count: f.positive("count")?,
        start_ns,
        stop_ns: stop_ns(&f, start_ns, run_ns)?,
        start_spread_ns: start::read_spread(&f)?,
        service: read_service(&f)?.unwrap_or(ServiceCategory::Ubr),
        contract,
        police,
        shape,
        vc_limits: read_vc_limits(&f)?,
        dscp,
        tcp: flow_tcp(&f, size)?,
        native,
        socket,
        metered_headers: 0,
        replica_of: None,
        line: f.line(),
        rate_line: f
            .get("rate")
            .or(f.get("traffic"))
            .map_or(f.line(), Item::line),
        name,
    })
}

/// `loopback`: the far end's application sends every datagram back, as WS2NetTest's
/// loopback tests did, through the same hosts' costs and links the other way (default off).
fn read_loopback(f: &Reader) -> Result<bool, ScenarioError> {
    Ok(f.bool("loopback")?.unwrap_or(false))
}

/// The flow's nodes, host to host: its `path`, or the fewest hops.
fn flow_path(f: &Reader, name: &str, net: &Net) -> Result<Vec<usize>, ScenarioError> {
    let nodes = &net.nodes;
    let from = node_ref(f, "from", nodes)?;
    let to = node_ref(f, "to", nodes)?;
    for (end, key) in [(from, "from"), (to, "to")] {
        if nodes[end].kind != NodeKind::Host {
            let msg = format!("flow {name}: {:?} is not a host", nodes[end].name);
            return Err(f.required(key)?.error(msg));
        }
    }
    if from == to {
        let msg = format!("flow {name}: from and to are the same host");
        return Err(f.required("to")?.error(msg));
    }
    let path = match f.get("path") {
        Some(p) => explicit_path(p, name, net, (from, to))?,
        None => shortest_path(nodes, &net.links, from, to).ok_or_else(|| {
            f.table_error(format!(
                "no path from {} to {}",
                nodes[from].name, nodes[to].name
            ))
        })?,
    };
    for w in path.windows(3) {
        if nodes[w[1]].kind == NodeKind::Host {
            return Err(f.table_error(format!(
                "path passes through host {} (hosts do not forward)",
                nodes[w[1]].name
            )));
        }
    }
    Ok(path)
}

/// `path = [...]`: linked nodes, none twice, from `ends.0` to `ends.1`.
fn explicit_path(
    p: &Item,
    name: &str,
    net: &Net,
    ends: (usize, usize),
) -> Result<Vec<usize>, ScenarioError> {
    let list = p
        .as_array()
        .ok_or_else(|| p.error(format!("flow {name} path: expected an array of node names")))?;
    let mut ids = Vec::new();
    for s in list {
        let node = s
            .as_str()
            .ok_or_else(|| s.error(format!("flow {name} path: expected a node name")))?;
        let id = find_node(s, node, &net.nodes)?;
        if ids.contains(&id) {
            return Err(s.error(format!(
                "flow {name}: routing loop: path visits {node:?} twice"
            )));
        }
        if let Some(&prev) = ids.last() {
            if net.link_between(prev, id).is_none() {
                return Err(s.error(format!(
                    "flow {name}: no link between {:?} and {node:?}",
                    net.nodes[prev].name
                )));
            }
        }
        ids.push(id);
    }
    if ids.first() != Some(&ends.0) || ids.last() != Some(&ends.1) {
        return Err(p.error(format!(
            "flow {name}: path must start at {} and end at {}",
            net.nodes[ends.0].name, net.nodes[ends.1].name
        )));
    }
    Ok(ids)
}

fn flow_protocol(f: &Reader, name: &str) -> Result<Protocol, ScenarioError> {
    // Native frames are sent as UDP's datagrams are, without its headers.
    let kinds = [("udp", 0), ("tcp", 1), ("ping", 2), ("raw", 0)];
    let kind = f.choice("protocol", &kinds)?.unwrap_or(0);
    if let Some(t) = f.get("traffic") {
        let text = f.required_string("traffic")?;
        let spec = parse_traffic(text).map_err(|m| f.error(t, "traffic", m))?;
        return match (kind, f.get("rate")) {
            (0, None) => SendSpec::model(spec)
                .map(|s| match f.string("protocol") {
                    Ok(Some("raw")) => SendSpec {
                        header_bytes: 0,
                        ..s
                    },
                    _ => s,
                })
                .map(Protocol::Udp)
                .map_err(|m| f.error(t, "traffic", m)),
            (0, Some(r)) => Err(f.error(r, "rate", "a traffic model sets its own")),
            _ => Err(f.error(t, "traffic", "a traffic model runs over udp")),
        };
    }
    Ok(match kind {
        0 => Protocol::Udp(SendSpec::constant(
            f.bit_rate("rate", NOT_MAX)?.ok_or_else(|| {
                FileError::at(f.line(), format!("flow {name}: a udp flow needs rate"))
            })?,
        )),
        1 => Protocol::Tcp,
        _ => Protocol::Ping {
            interval_ns: match f.duration_ns("interval")? {
                Some(0) => {
                    return Err(f.error(f.required("interval")?, "interval", "must be above 0"))
                }
                Some(i) => i,
                None => 1_000_000_000,
            },
        },
    })
}

/// IP bytes of the flow's packets: TCP's from its MSS, UDP's and ping's from `size`, within
/// the path MTU.
fn flow_size(
    f: &Reader,
    protocol: &Protocol,
    path: &[usize],
    net: &Net,
) -> Result<u32, ScenarioError> {
    let path_mtu = path
        .windows(2)
        .filter_map(|w| net.link_between(w[0], w[1]))
        .map(|l| net.links[l].mtu)
        .min()
        .unwrap_or(1500);
    let size = f.bytes("size")?;
    let key_error = |key: &str, m: String| match f.get(key) {
        Some(item) => f.error(item, key, m),
        None => f.table_error(format!("{key}: {m}")),
    };
    match protocol {
        Protocol::Tcp => {
            let mss = f
                .positive("mss")?
                .map_or(path_mtu - TCP_HEADERS, |m| m as u32);
            if u64::from(mss) + u64::from(TCP_HEADERS) > u64::from(path_mtu) {
                let m = format!("{mss} + 40 header bytes is above the path MTU {path_mtu}");
                return Err(key_error("mss", m));
            }
            Ok(mss + TCP_HEADERS)
        }
        // A model's sizes are its own: none here.
        Protocol::Udp(s) if s.traffic.is_some() => match f.get("size") {
            Some(item) => Err(f.error(item, "size", "a traffic model sets its own")),
            None => Ok(0),
        },
        Protocol::Ping { .. } | Protocol::Udp(_) => {
            let ping = matches!(protocol, Protocol::Ping { .. });
            let s = size.unwrap_or(if ping { 84 } else { 1000 });
            if s < MIN_UDP {
                let m = format!("{s} bytes is below the 28 bytes of IP and UDP headers");
                return Err(key_error("size", m));
            }
            // Larger datagrams are fragmented on the way, up to IPv4's largest.
            if s > 65_535 {
                let m = format!("{s} bytes is above the IPv4 maximum of 65535");
                return Err(key_error("size", m));
            }
            Ok(s as u32)
        }
    }
}

/// A native flow's frame bytes (`size`, default 1000; a traffic model sets its own): over
/// ATM links only, at most the path MTU, since an AAL5 frame is never fragmented.
fn native_size(
    f: &Reader,
    protocol: &Protocol,
    path: &[usize],
    net: &Net,
) -> Result<u32, ScenarioError> {
    let links: Vec<&LinkSpec> = path
        .windows(2)
        .filter_map(|w| net.link_between(w[0], w[1]))
        .map(|l| &net.links[l])
        .collect();
    if let Some(ip) = links.iter().find(|l| l.atm.is_none()) {
        let m = format!(
            "native AAL5 frames need ATM links all the way; link {} is IP",
            ip.name
        );
        return Err(f.error(f.required("protocol")?, "protocol", m));
    }
    let path_mtu = links.iter().map(|l| l.mtu).min().unwrap_or(u32::MAX);
    match (protocol, f.get("size")) {
        (Protocol::Udp(s), Some(item)) if s.traffic.is_some() => {
            Err(f.error(item, "size", "a traffic model sets its own"))
        }
        (Protocol::Udp(s), None) if s.traffic.is_some() => Ok(0),
        _ => match f.bytes("size")?.unwrap_or(1000) {
            0 => Err(f.error(f.required("size")?, "size", "must be above 0")),
            s if s > u64::from(path_mtu) => {
                let m = format!(
                    "{s} bytes is above the path MTU {path_mtu} (frames are not fragmented)"
                );
                Err(f.error(f.required("size")?, "size", m))
            }
            s => Ok(s as u32),
        },
    }
}

/// The receiving socket (`recv_buffer`, `read_rate`) of a one-way UDP or native flow.
fn read_socket(f: &Reader, protocol: &Protocol) -> Result<Option<SocketSpec>, ScenarioError> {
    let read_rate_bps = f.bit_rate("read_rate", "leave read_rate out to read at once")?;
    if let (Some(item), None) = (f.get("read_rate_from"), read_rate_bps) {
        return Err(f.error(item, "read_rate_from", "needs read_rate"));
    }
    let Some(buffer_bytes) = f.bytes("recv_buffer")? else {
        return match f.get("read_rate") {
            Some(item) => {
                Err(f.error(item, "read_rate", "needs recv_buffer (the socket it reads)"))
            }
            None => Ok(None),
        };
    };
    let item = f.required("recv_buffer")?;
    if !matches!(protocol, Protocol::Udp(_)) {
        return Err(f.error(item, "recv_buffer", "models a udp or raw flow's socket"));
    }
    if buffer_bytes == 0 {
        return Err(f.error(item, "recv_buffer", "must be above 0"));
    }
    Ok(Some(SocketSpec {
        buffer_bytes,
        read_rate_bps,
        read_rate_from_ns: f.duration_ns("read_rate_from")?.unwrap_or(0),
    }))
}

/// The ATM traffic contract, when the flow has a `pcr`.
/// The Reno model's settings; `size` is the flow's IP packet size.
fn flow_tcp(f: &Reader, size: u32) -> Result<TcpSpec, ScenarioError> {
    let window = f.bytes("window")?.unwrap_or(64 * 1024);
    if window == 0 {
        return Err(f.error(f.required("window")?, "window", "must be above 0"));
    }
    Ok(TcpSpec {
        window,
        send_buffer: f.bytes("send_buffer")?.unwrap_or(window),
        mss: size.saturating_sub(TCP_HEADERS),
        window_scaling: f.bool("window_scaling")?.unwrap_or(window > 65_535),
        bytes: f.bytes("bytes")?,
        delayed_ack_ns: f.duration_ns("delayed_ack")?,
        min_rto_ns: f.duration_ns("min_rto")?.unwrap_or(1_000_000_000),
        pace_bps: f.bit_rate("pace", "'max' is a bulk sender: leave pace out")?,
    })
}

/// A background cell source on one switch output port.
fn read_background(b: &Reader, net: &Net, run_ns: u64) -> Result<BackgroundSpec, ScenarioError> {
    let b = b.named("background");
    b.only(BACKGROUND_KEYS)?;
    let name = b.required_string("name")?.to_string();
    let b = b.named(format!("background {name}"));
    let node = node_ref(&b, "from", &net.nodes)?;
    let to = node_ref(&b, "to", &net.nodes)?;
    if net.nodes[node].kind != NodeKind::AtmSwitch {
        let msg = format!(
            "background {name}: {:?} is not an atm-switch",
            net.nodes[node].name
        );
        return Err(b.required("from")?.error(msg));
    }
    let Some(link) = net.link_between(node, to) else {
        let msg = format!(
            "background {name}: no link between {} and {}",
            net.nodes[node].name, net.nodes[to].name
        );
        return Err(b.required("to")?.error(msg));
    };
    let start_ns = b.duration_ns("start")?.unwrap_or(0);
    let stop_ns = stop_ns(&b, start_ns, run_ns)?;
    let model = background::read_model(&b, stop_ns.saturating_sub(start_ns))?;
    let rate = match (&model, b.bit_rate("rate", NOT_MAX)?) {
        (Some((_, offered)), None) => *offered,
        (None, Some(r)) => r,
        (Some(_), Some(_)) => {
            return Err(b.error(b.required("rate")?, "rate", "a traffic model sets its own"))
        }
        (None, None) => return Err(FileError::at(b.line(), "background: needs rate")),
    };
    let sar_rate_bps = b.bit_rate("sar_rate", "'max' is the default (the line's rate)")?;
    if let (Some(item), None) = (b.get("sar_rate"), &model) {
        let msg = "spaces a traffic model's cells ('rate' already sets single cells' times)";
        return Err(b.error(item, "sar_rate", msg));
    }
    Ok(BackgroundSpec {
        node,
        link,
        cells_per_second_num: rate,
        model: model.map(|m| m.0),
        sar_rate_bps,
        poisson: b.choice("pattern", PATTERNS)?.unwrap_or(false),
        passes: b.positive("passes")?.unwrap_or(1).min(1024) as usize,
        loop_delay_ns: b.duration_ns("loop_delay")?.unwrap_or(10_000),
        cells_per_frame: b.positive("cells_per_frame")?.unwrap_or(1).min(1365) as u32,
        service: read_service(&b)?.unwrap_or(ServiceCategory::Ubr),
        clp: b.bool("clp")?.unwrap_or(false),
        start_ns,
        stop_ns,
        line: b.line(),
        name,
    })
}

/// Fewest hops from `from` to `to` through switches and routers (hosts do not forward);
/// ties go to the link defined first, so the choice is deterministic.
pub(crate) fn shortest_path(
    nodes: &[NodeSpec],
    links: &[LinkSpec],
    from: usize,
    to: usize,
) -> Option<Vec<usize>> {
    let mut prev: Vec<Option<usize>> = vec![None; nodes.len()];
    let mut seen = vec![false; nodes.len()];
    let mut queue = std::collections::VecDeque::new();
    seen[from] = true;
    queue.push_back(from);
    while let Some(n) = queue.pop_front() {
        if n == to {
            break;
        }
        if n != from && nodes[n].kind == NodeKind::Host {
            continue;
        }
        for l in links {
            let next = if l.a == n {
                l.b
            } else if l.b == n {
                l.a
            } else {
                continue;
            };
            if !seen[next] {
                seen[next] = true;
                prev[next] = Some(n);
                queue.push_back(next);
            }
        }
    }
    if !seen[to] {
        return None;
    }
    let mut path = vec![to];
    let mut n = to;
    while let Some(p) = prev[n] {
        path.push(p);
        n = p;
    }
    path.reverse();
    Some(path)
}

mod background;
mod p2mp;
pub(crate) mod start;
#[cfg(test)]
mod tests;
