//! Scenario files: TOML text → a validated [`Scenario`], or a [`ScenarioError`] that names
//! the line.
//!
//! Parsing keeps every value's byte span (`toml::Spanned`), so each check after parsing (an
//! unknown node, SCR above PCR, no path) can still point at the line that caused it. The whole
//! file, every sweep point included, is checked before anything runs.

use std::fmt;

use flowlab_atm::{
    CellMeta, Encapsulation, LineRate, PhysicalLayer, PolicingAction, ServiceCategory,
};
use flowlab_qos::sched::QueueLimit;
use serde::Deserialize;

use crate::limits::{MAX_SIM_NS, MAX_SWEEP_VALUES, MAX_TABLES};
use crate::sender::{parse_traffic, SendSpec};
use toml::{Spanned, Value};

/// A scenario that failed to load: a message and, where known, the line it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// 1-based line, when the error is about a place in the file.
    pub line: Option<usize>,
    /// One line, no trailing period.
    pub message: String,
    file: Option<String>,
}

impl ScenarioError {
    pub(crate) fn new(line: Option<usize>, message: impl Into<String>) -> Self {
        ScenarioError {
            line,
            message: message.into(),
            file: None,
        }
    }

    /// The same error, displayed as `FILE:LINE: message`.
    pub fn with_file(mut self, name: &str) -> Self {
        self.file = Some(name.to_string());
        self
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            (None, Some(line)) => write!(f, "line {line}: {}", self.message),
            (None, None) => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for ScenarioError {}

type Field = Option<Spanned<Value>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    sim: Option<Spanned<RawSim>>,
    #[serde(default)]
    node: Vec<Spanned<RawNode>>,
    #[serde(default)]
    link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
    #[serde(default)]
    background: Vec<Spanned<RawBackground>>,
    sweep: Option<Spanned<RawSweep>>,
    /// Network files only (`crate::network`).
    network: Option<Spanned<toml::Table>>,
    hosts: Option<Spanned<toml::Table>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSim {
    duration: Field,
    drain: Field,
    seed: Field,
    description: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    kind: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: Field,
    from: Spanned<String>,
    to: Spanned<String>,
    phy: Field,
    rate: Field,
    delay: Field,
    buffer_cells: Field,
    host_buffer_cells: Field,
    epd: Field,
    ppd: Field,
    clp_threshold: Field,
    encap: Field,
    mtu: Field,
    buffer: Field,
    buffer_packets: Field,
    scheduler: Field,
    classes: Option<Spanned<Vec<Spanned<RawClass>>>>,
    tx_ring: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClass {
    name: Field,
    dscp: Field,
    weight: Field,
    priority: Field,
    buffer: Field,
    buffer_packets: Field,
    default: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Spanned<String>,
    from: Spanned<String>,
    to: Spanned<String>,
    path: Option<Spanned<Vec<Spanned<String>>>>,
    protocol: Field,
    rate: Field,
    size: Field,
    count: Field,
    interval: Field,
    start: Field,
    duration: Field,
    service: Field,
    pcr: Field,
    cdvt: Field,
    scr: Field,
    mbs: Field,
    police: Field,
    shape: Field,
    dscp: Field,
    window: Field,
    send_buffer: Field,
    mss: Field,
    window_scaling: Field,
    bytes: Field,
    delayed_ack: Field,
    min_rto: Field,
    traffic: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBackground {
    name: Spanned<String>,
    from: Spanned<String>,
    to: Spanned<String>,
    rate: Field,
    pattern: Field,
    passes: Field,
    loop_delay: Field,
    cells_per_frame: Field,
    service: Field,
    clp: Field,
    start: Field,
    duration: Field,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSweep {
    param: Spanned<String>,
    values: Spanned<Vec<Spanned<Value>>>,
}

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SchedKind {
    Fifo,
    Priority,
    Wfq,
    Drr,
    PqWfq,
}

#[derive(Debug, Clone)]
pub(crate) struct ClassSpec {
    pub name: String,
    pub dscps: Vec<u8>,
    pub weight: u32,
    pub priority: bool,
    pub limit: QueueLimit,
}

#[derive(Debug, Clone)]
pub(crate) struct SchedSpec {
    pub kind: SchedKind,
    pub classes: Vec<ClassSpec>,
    pub default_class: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct AtmSpec {
    pub phy: String,
    pub line: LineRate,
    pub buffer_cells: usize,
    pub host_buffer_cells: usize,
    pub epd: Option<usize>,
    pub ppd: bool,
    pub clp_threshold: Option<usize>,
    pub encap: Encapsulation,
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
    pub delay_ns: u64,
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
pub(crate) struct ContractSpec {
    pub pcr_bps: u64,
    pub cdvt_ns: u64,
    pub scr_bps: Option<u64>,
    pub mbs: u32,
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
    pub service: ServiceCategory,
    pub contract: Option<ContractSpec>,
    pub police: Option<PolicingAction>,
    pub shape: bool,
    pub dscp: u8,
    pub tcp: TcpSpec,
    /// Header bytes the meters leave out of each packet: none in scenarios (they count IP
    /// bytes), the IP and transport headers where flows report payload as real tests do.
    pub metered_headers: u32,
    /// Lines of the `[[flow]]` table and of its rate (the table's when it has none).
    pub line: usize,
    pub rate_line: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct BackgroundSpec {
    pub name: String,
    /// The switch and the link (index into `links`) whose output port it loads.
    pub node: usize,
    pub link: usize,
    pub cells_per_second_num: u64,
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

/// Line (1-based) of byte offset `pos` in `text`.
pub(crate) fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Ctx<'a> {
    text: &'a str,
}

impl Ctx<'_> {
    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        msg: impl Into<String>,
    ) -> Result<T, ScenarioError> {
        Err(ScenarioError::new(
            Some(line_of(self.text, span.start)),
            msg,
        ))
    }

    fn str<'v>(
        &self,
        f: &'v Field,
        key: &str,
    ) -> Result<Option<(&'v str, std::ops::Range<usize>)>, ScenarioError> {
        match f {
            None => Ok(None),
            Some(s) => match s.get_ref() {
                Value::String(v) => Ok(Some((v.as_str(), s.span()))),
                _ => self.err(s.span(), format!("{key}: expected a string")),
            },
        }
    }

    /// A unit value given as a string ("64k") or a bare integer.
    fn text_or_int(
        &self,
        f: &Field,
        key: &str,
    ) -> Result<Option<(String, std::ops::Range<usize>)>, ScenarioError> {
        match f {
            None => Ok(None),
            Some(s) => match s.get_ref() {
                Value::String(v) => Ok(Some((v.clone(), s.span()))),
                Value::Integer(i) => Ok(Some((i.to_string(), s.span()))),
                Value::Float(x) => Ok(Some((x.to_string(), s.span()))),
                _ => self.err(s.span(), format!("{key}: expected a string or a number")),
            },
        }
    }

    fn rate(&self, f: &Field, key: &str) -> Result<Option<u64>, ScenarioError> {
        let Some((t, span)) = self.text_or_int(f, key)? else {
            return Ok(None);
        };
        match flowlab_units::parse_rate(&t) {
            Ok(flowlab_units::Rate::BitsPerSec(b)) => Ok(Some(b)),
            Ok(flowlab_units::Rate::Max) => {
                self.err(span, format!("{key}: 'max' is not a rate here"))
            }
            Err(e) => self.err(span, format!("{key}: {e}")),
        }
    }

    fn bytes(&self, f: &Field, key: &str) -> Result<Option<u64>, ScenarioError> {
        let Some((t, span)) = self.text_or_int(f, key)? else {
            return Ok(None);
        };
        flowlab_units::parse_bytes(&t)
            .map(Some)
            .or_else(|e| self.err(span, format!("{key}: {e}")))
    }

    fn duration(&self, f: &Field, key: &str) -> Result<Option<u64>, ScenarioError> {
        let Some((t, span)) = self.text_or_int(f, key)? else {
            return Ok(None);
        };
        match flowlab_units::parse_duration(&t) {
            Ok(d) => match u64::try_from(d.as_nanos()) {
                Ok(ns) => Ok(Some(ns)),
                Err(_) => self.err(span, format!("{key}: too large")),
            },
            Err(e) => self.err(span, format!("{key}: {e}")),
        }
    }

    fn count(&self, f: &Field, key: &str) -> Result<Option<u64>, ScenarioError> {
        let Some((t, span)) = self.text_or_int(f, key)? else {
            return Ok(None);
        };
        flowlab_units::parse_count(&t)
            .map(Some)
            .or_else(|e| self.err(span, format!("{key}: {e}")))
    }

    fn positive(&self, f: &Field, key: &str) -> Result<Option<u64>, ScenarioError> {
        let v = self.count(f, key)?;
        if v == Some(0) {
            if let Some(s) = f {
                return self.err(s.span(), format!("{key}: must be above 0"));
            }
        }
        Ok(v)
    }

    fn bool(&self, f: &Field, key: &str) -> Result<Option<bool>, ScenarioError> {
        match f {
            None => Ok(None),
            Some(s) => match s.get_ref() {
                Value::Boolean(b) => Ok(Some(*b)),
                _ => self.err(s.span(), format!("{key}: expected true or false")),
            },
        }
    }

    fn service(&self, f: &Field) -> Result<Option<ServiceCategory>, ScenarioError> {
        let Some((t, span)) = self.str(f, "service")? else {
            return Ok(None);
        };
        Ok(Some(match t.to_ascii_lowercase().as_str() {
            "cbr" => ServiceCategory::Cbr,
            "rt-vbr" | "rtvbr" => ServiceCategory::RtVbr,
            "nrt-vbr" | "nrtvbr" | "vbr" => ServiceCategory::NrtVbr,
            "ubr" => ServiceCategory::Ubr,
            _ => {
                return self.err(
                    span,
                    format!("service: unknown {t:?}: expected cbr, rt-vbr, nrt-vbr or ubr"),
                )
            }
        }))
    }
}

fn phy_by_name(name: &str) -> Option<PhysicalLayer> {
    let n: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    Some(match n.as_str() {
        "e1" => PhysicalLayer::E1,
        "atm25" => PhysicalLayer::Atm25,
        "ds3" | "ds3plcp" => PhysicalLayer::Ds3Plcp,
        "oc3" | "oc3c" | "stm1" => PhysicalLayer::Oc3c,
        "oc12" | "oc12c" | "stm4" => PhysicalLayer::Oc12c,
        _ => return None,
    })
}

fn encap_by_name(name: &str) -> Option<Encapsulation> {
    Some(match name.to_ascii_lowercase().as_str() {
        "llc-snap" | "llc" | "clip" => Encapsulation::LlcSnapRouted,
        "vc-mux" | "vcmux" | "null" => Encapsulation::VcMuxRouted,
        "llc-bridged" => Encapsulation::LlcBridged8023,
        "vc-mux-bridged" => Encapsulation::VcMuxBridged8023,
        "pppoa-llc" => Encapsulation::PppoaLlc,
        "pppoa" | "pppoa-vc-mux" => Encapsulation::PppoaVcMux,
        "pppoe-llc" | "pppoe" => Encapsulation::PppoeLlc,
        "pppoe-vc-mux" => Encapsulation::PppoeVcMux,
        "lane" => Encapsulation::Lane8023,
        _ => return None,
    })
}

/// Parses and validates a scenario file's text.
pub fn load(text: &str) -> Result<Scenario, ScenarioError> {
    let raw = parse_raw(text)?;
    if let Some(t) = raw.network.as_ref().or(raw.hosts.as_ref()) {
        return Ctx { text }.err(
            t.span(),
            "this is a network file (for `flowlab run --sim`), not a scenario",
        );
    }
    let variants = variants(text, &raw)?;
    crate::limits::check_packet_budget(&variants)?;
    Ok(Scenario { variants })
}

/// Reads a network file's nodes and links (checked as a scenario's) into a model without
/// traffic; `crate::network` reads its `[network]` and `[hosts]` tables.
pub(crate) fn load_topology(text: &str) -> Result<Model, ScenarioError> {
    let mut raw = parse_raw(text)?;
    let c = Ctx { text };
    let traffic = [
        raw.sim.as_ref().map(|t| ("[sim]", t.span())),
        raw.flow.first().map(|t| ("[[flow]]", t.span())),
        raw.background.first().map(|t| ("[[background]]", t.span())),
        raw.sweep.as_ref().map(|t| ("[sweep]", t.span())),
    ];
    if let Some((what, span)) = traffic.into_iter().flatten().next() {
        let why = "a network file has [network], [hosts], [[node]] and [[link]]; traffic and \
                   timing come from the experiment";
        return c.err(span, format!("{what}: {why}"));
    }
    if raw.network.is_none() {
        return Err(ScenarioError::new(
            Some(1),
            "missing [network] table: a network file starts with [network]",
        ));
    }
    raw.sim = Some(Spanned::new(0..0, RawSim::default()));
    build(text, &raw)
}

/// One validated model per sweep value, or the only one.
fn variants(text: &str, raw: &RawFile) -> Result<Vec<Variant>, ScenarioError> {
    match &raw.sweep {
        None => Ok(vec![Variant {
            sweep: None,
            model: build(text, raw)?,
        }]),
        Some(sweep) => {
            let ctx = Ctx { text };
            let param = sweep.get_ref().param.get_ref().clone();
            let pspan = sweep.get_ref().param.span();
            let n = sweep.get_ref().values.get_ref().len();
            if n == 0 {
                return ctx.err(sweep.get_ref().values.span(), "sweep: values is empty");
            }
            if n > MAX_SWEEP_VALUES {
                return ctx.err(
                    sweep.get_ref().values.span(),
                    format!("sweep: {n} values, more than the limit of {MAX_SWEEP_VALUES} runs"),
                );
            }
            let mut variants = Vec::new();
            for v in sweep.get_ref().values.get_ref() {
                let vline = line_of(text, v.span().start);
                let variant_text = substitute(text, &param).and_then(|f| f(v.get_ref()));
                let variant_text = match variant_text {
                    Ok(t) => t,
                    Err(m) => return ctx.err(pspan, format!("sweep: {m}")),
                };
                let label = match v.get_ref() {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let raw_v = parse_raw(&variant_text)?;
                let model = build(&variant_text, &raw_v).map_err(|e| {
                    ScenarioError::new(
                        e.line,
                        format!("{} (sweep value {label} at line {vline})", e.message),
                    )
                })?;
                variants.push(Variant {
                    sweep: Some((param.clone(), label)),
                    model,
                });
            }
            Ok(variants)
        }
    }
}

fn parse_raw(text: &str) -> Result<RawFile, ScenarioError> {
    toml::from_str::<RawFile>(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        let msg = e.message().trim().replace('\n', " ");
        ScenarioError::new(line, msg)
    })
}

type Substituter = Box<dyn Fn(&Value) -> Result<String, String>>;

/// Prepares replacing the value of `param` (`sim.KEY`, `flow.NAME.KEY`, `link.NAME.KEY`,
/// `background.NAME.KEY`) in the text, in place so that line numbers do not move.
fn substitute(text: &str, param: &str) -> Result<Substituter, String> {
    let doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    let parts: Vec<&str> = param.split('.').collect();
    // Check now that the key exists, so a bad param is reported before any value is tried.
    let check =
        |doc: &mut toml_edit::DocumentMut| -> Result<(), String> { slot(doc, &parts).map(|_| ()) };
    let mut probe = doc.clone();
    check(&mut probe)?;
    let parts_owned: Vec<String> = parts.iter().map(|s| s.to_string()).collect();
    Ok(Box::new(move |value: &Value| {
        let mut d = doc.clone();
        let parts: Vec<&str> = parts_owned.iter().map(String::as_str).collect();
        let item = slot(&mut d, &parts)?;
        let new = match value {
            Value::String(s) => toml_edit::value(s.clone()),
            Value::Integer(i) => toml_edit::value(*i),
            Value::Float(x) => toml_edit::value(*x),
            Value::Boolean(b) => toml_edit::value(*b),
            _ => return Err("values must be strings, numbers or booleans".into()),
        };
        let decor = item.as_value().map(|v| v.decor().clone());
        *item = new;
        if let (Some(decor), Some(v)) = (decor, item.as_value_mut()) {
            *v.decor_mut() = decor;
        }
        Ok(d.to_string())
    }))
}

fn slot<'d>(
    doc: &'d mut toml_edit::DocumentMut,
    parts: &[&str],
) -> Result<&'d mut toml_edit::Item, String> {
    let usage = "param must be sim.KEY, flow.NAME.KEY, link.NAME.KEY or background.NAME.KEY";
    match parts {
        ["sim", key] => doc
            .get_mut("sim")
            .and_then(|t| t.get_mut(key))
            .ok_or_else(|| format!("no key {key} in [sim] (the swept key must be in the file)")),
        [section @ ("flow" | "link" | "background"), name, key] => {
            let tables = doc
                .get_mut(section)
                .and_then(|i| i.as_array_of_tables_mut())
                .ok_or_else(|| format!("no [[{section}]] tables"))?;
            for t in tables.iter_mut() {
                let tname = t
                    .get("name")
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
                    .or_else(|| {
                        (*section == "link").then(|| {
                            format!(
                                "{}-{}",
                                t.get("from").and_then(|v| v.as_str()).unwrap_or(""),
                                t.get("to").and_then(|v| v.as_str()).unwrap_or("")
                            )
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

/// Refuses more than [`MAX_TABLES`] tables of a kind, at the first one past the limit.
fn check_table_counts(c: &Ctx, raw: &RawFile) -> Result<(), ScenarioError> {
    let spans = [
        ("[[node]]", raw.node.get(MAX_TABLES).map(Spanned::span)),
        ("[[link]]", raw.link.get(MAX_TABLES).map(Spanned::span)),
        ("[[flow]]", raw.flow.get(MAX_TABLES).map(Spanned::span)),
        (
            "[[background]]",
            raw.background.get(MAX_TABLES).map(Spanned::span),
        ),
    ];
    for (what, span) in spans {
        if let Some(span) = span {
            return c.err(
                span,
                format!("more than {MAX_TABLES} {what} tables, the limit"),
            );
        }
    }
    Ok(())
}

/// The IP and UDP headers: the smallest datagram.
const MIN_UDP: u64 = 28;
/// The IP and TCP headers.
const TCP_HEADERS: u32 = 40;

fn build(text: &str, raw: &RawFile) -> Result<Model, ScenarioError> {
    let c = Ctx { text };
    check_table_counts(&c, raw)?;
    // [sim]
    let (duration_ns, drain_ns, seed, description) = match &raw.sim {
        None => {
            return Err(ScenarioError::new(
                Some(1),
                "missing [sim] table (duration, seed)",
            ))
        }
        Some(s) => {
            let s = s.get_ref();
            let d = match c.duration(&s.duration, "duration")? {
                Some(0) => {
                    return c.err(
                        s.duration.as_ref().map(|x| x.span()).unwrap_or(0..0),
                        "duration: must be above 0",
                    )
                }
                Some(d) => d,
                None => 10_000_000_000,
            };
            let seed = match &s.seed {
                None => 1,
                Some(v) => match v.get_ref() {
                    Value::Integer(i) if *i >= 0 => *i as u64,
                    _ => return c.err(v.span(), "seed: expected a whole number >= 0"),
                },
            };
            let desc = c
                .str(&s.description, "description")?
                .map(|x| x.0.to_string())
                .unwrap_or_default();
            let drain = c.duration(&s.drain, "drain")?.unwrap_or(1_000_000_000);
            if d.saturating_add(drain) > MAX_SIM_NS {
                let span = s
                    .duration
                    .as_ref()
                    .or(s.drain.as_ref())
                    .map_or(0..0, |x| x.span());
                return c.err(
                    span,
                    format!(
                        "duration: {} s plus drain {} s is more than the limit of {} s of simulated time",
                        d / 1_000_000_000,
                        drain / 1_000_000_000,
                        MAX_SIM_NS / 1_000_000_000
                    ),
                );
            }
            (d, drain, seed, desc)
        }
    };

    // Nodes.
    let mut nodes: Vec<NodeSpec> = Vec::new();
    for n in &raw.node {
        let n = n.get_ref();
        let kind = match n.kind.get_ref().as_str() {
            "host" => NodeKind::Host,
            "atm-switch" => NodeKind::AtmSwitch,
            "ip-router" | "router" => NodeKind::IpRouter,
            k => {
                return c.err(
                    n.kind.span(),
                    format!("kind: unknown {k:?}: expected host, atm-switch or ip-router"),
                )
            }
        };
        if nodes.iter().any(|x| x.name == *n.name.get_ref()) {
            return c.err(
                n.name.span(),
                format!("node {:?} is defined twice", n.name.get_ref()),
            );
        }
        nodes.push(NodeSpec {
            name: n.name.get_ref().clone(),
            kind,
        });
    }
    let find = |s: &Spanned<String>| -> Result<usize, ScenarioError> {
        nodes
            .iter()
            .position(|n| n.name == *s.get_ref())
            .map_or_else(
                || c.err(s.span(), format!("unknown node {:?}", s.get_ref())),
                Ok,
            )
    };

    // Links.
    let mut links: Vec<LinkSpec> = Vec::new();
    for l in &raw.link {
        let lspan = l.span();
        let l = l.get_ref();
        let a = find(&l.from)?;
        let b = find(&l.to)?;
        if a == b {
            return c.err(l.to.span(), "a link must join two different nodes");
        }
        let name = c
            .str(&l.name, "name")?
            .map(|x| x.0.to_string())
            .unwrap_or_else(|| format!("{}-{}", l.from.get_ref(), l.to.get_ref()));
        let rate = c.rate(&l.rate, "rate")?;
        let atm = match c.str(&l.phy, "phy")? {
            None => None,
            Some((p, span)) => {
                let phy = match phy_by_name(p) {
                    Some(phy) => phy,
                    None => {
                        return c.err(
                            span,
                            format!("phy: unknown {p:?}: expected E1, ATM25, DS3, OC-3c or OC-12c"),
                        )
                    }
                };
                let encap = match c.str(&l.encap, "encap")? {
                    None => Encapsulation::LlcSnapRouted,
                    Some((e, span)) => match encap_by_name(e) {
                        Some(x) => x,
                        None => return c.err(span, format!("encap: unknown {e:?}: expected llc-snap, vc-mux, llc-bridged, vc-mux-bridged, pppoa, pppoa-llc, pppoe, pppoe-vc-mux or lane")),
                    },
                };
                let buffer_cells =
                    c.positive(&l.buffer_cells, "buffer_cells")?.unwrap_or(1000) as usize;
                let epd = c.count(&l.epd, "epd")?.map(|x| x as usize);
                if let (Some(e), Some(f)) = (epd, &l.epd) {
                    if e >= buffer_cells {
                        return c.err(
                            f.span(),
                            format!("epd: threshold {e} must be below buffer_cells {buffer_cells}"),
                        );
                    }
                }
                Some(AtmSpec {
                    phy: phy.name().to_string(),
                    line: phy.line_rate(),
                    buffer_cells,
                    host_buffer_cells: c
                        .positive(&l.host_buffer_cells, "host_buffer_cells")?
                        .unwrap_or(1 << 16) as usize,
                    epd,
                    ppd: c.bool(&l.ppd, "ppd")?.unwrap_or(false),
                    clp_threshold: c
                        .count(&l.clp_threshold, "clp_threshold")?
                        .map(|x| x as usize),
                    encap,
                })
            }
        };
        let rate_bps = match (&atm, rate) {
            (Some(a), None) => a.line.cell_bit_rate().round() as u64,
            (Some(a), Some(r)) => {
                if r as f64 > a.line.cell_bit_rate() + 0.5 {
                    return c.err(
                        l.rate.as_ref().map(|x| x.span()).unwrap_or(lspan),
                        format!("rate: {r} bit/s is above the {} line's cell rate", a.phy),
                    );
                }
                r
            }
            (None, Some(r)) => r,
            (None, None) => {
                return c.err(
                    lspan,
                    format!("link {name}: give phy (an ATM link) or rate (an IP link)"),
                )
            }
        };
        let mtu = c
            .bytes(&l.mtu, "mtu")?
            .unwrap_or(if atm.is_some() { 9180 } else { 1500 });
        if mtu <= u64::from(TCP_HEADERS) {
            return c.err(
                l.mtu.as_ref().map(|x| x.span()).unwrap_or(lspan),
                format!("mtu: {mtu} bytes is below the 40 bytes of IP and TCP headers"),
            );
        }
        if mtu > 65_535 {
            return c.err(
                l.mtu.as_ref().map(|x| x.span()).unwrap_or(lspan),
                format!("mtu: {mtu} is above the IPv4 maximum 65535"),
            );
        }
        let link_limit = match (
            c.bytes(&l.buffer, "buffer")?,
            c.positive(&l.buffer_packets, "buffer_packets")?,
        ) {
            (Some(b), _) => QueueLimit::Bytes(b),
            (None, Some(p)) => QueueLimit::Packets(p.min(u64::from(u32::MAX)) as u32),
            (None, None) => QueueLimit::Packets(1000),
        };
        let sched = build_sched(&c, l, link_limit, lspan.clone())?;
        let tx_ring = c.positive(&l.tx_ring, "tx_ring")?.unwrap_or(1) as usize;
        if links
            .iter()
            .any(|x: &LinkSpec| (x.a, x.b) == (a, b) || (x.a, x.b) == (b, a))
        {
            return c.err(
                lspan,
                format!(
                    "a link between {} and {} is defined twice",
                    l.from.get_ref(),
                    l.to.get_ref()
                ),
            );
        }
        links.push(LinkSpec {
            name,
            a,
            b,
            atm,
            rate_bps,
            delay_ns: c.duration(&l.delay, "delay")?.unwrap_or(0),
            mtu: mtu as u32,
            sched,
            tx_ring,
        });
    }
    // ATM switches speak only cells.
    for l in &links {
        for end in [l.a, l.b] {
            if nodes[end].kind == NodeKind::AtmSwitch && l.atm.is_none() {
                let raw_l = raw.link.iter().find(|r| {
                    find(&r.get_ref().from).ok() == Some(l.a)
                        && find(&r.get_ref().to).ok() == Some(l.b)
                });
                let span = raw_l.map(|r| r.span()).unwrap_or(0..0);
                return c.err(
                    span,
                    format!("link {}: an ATM switch needs an ATM link (set phy)", l.name),
                );
            }
        }
    }

    let link_between = |x: usize, y: usize| {
        links
            .iter()
            .position(|l| (l.a, l.b) == (x, y) || (l.a, l.b) == (y, x))
    };

    // Flows.
    let mut flows: Vec<FlowSpec> = Vec::new();
    for f in &raw.flow {
        let fspan = f.span();
        let line = line_of(text, fspan.start);
        let f = f.get_ref();
        let name = f.name.get_ref().clone();
        if flows.iter().any(|x| x.name == name) {
            return c.err(f.name.span(), format!("flow {name:?} is defined twice"));
        }
        let from = find(&f.from)?;
        let to = find(&f.to)?;
        for (end, s) in [(from, &f.from), (to, &f.to)] {
            if nodes[end].kind != NodeKind::Host {
                return c.err(
                    s.span(),
                    format!("flow {name}: {:?} is not a host", s.get_ref()),
                );
            }
        }
        if from == to {
            return c.err(
                f.to.span(),
                format!("flow {name}: from and to are the same host"),
            );
        }
        let path = match &f.path {
            Some(p) => {
                let mut ids = Vec::new();
                for s in p.get_ref() {
                    let id = find(s)?;
                    if ids.contains(&id) {
                        return c.err(
                            s.span(),
                            format!(
                                "flow {name}: routing loop: path visits {:?} twice",
                                s.get_ref()
                            ),
                        );
                    }
                    if let Some(&prev) = ids.last() {
                        if link_between(prev, id).is_none() {
                            return c.err(
                                s.span(),
                                format!(
                                    "flow {name}: no link between {:?} and {:?}",
                                    nodes[prev].name,
                                    s.get_ref()
                                ),
                            );
                        }
                    }
                    ids.push(id);
                }
                if ids.first() != Some(&from) || ids.last() != Some(&to) {
                    return c.err(
                        p.span(),
                        format!(
                            "flow {name}: path must start at {} and end at {}",
                            f.from.get_ref(),
                            f.to.get_ref()
                        ),
                    );
                }
                ids
            }
            None => match shortest_path(&nodes, &links, from, to) {
                Some(p) => p,
                None => {
                    return c.err(
                        fspan,
                        format!(
                            "flow {name}: no path from {} to {}",
                            f.from.get_ref(),
                            f.to.get_ref()
                        ),
                    )
                }
            },
        };
        for w in path.windows(3) {
            if nodes[w[1]].kind == NodeKind::Host {
                return c.err(
                    fspan,
                    format!(
                        "flow {name}: path passes through host {} (hosts do not forward)",
                        nodes[w[1]].name
                    ),
                );
            }
        }
        let proto_name = c
            .str(&f.protocol, "protocol")?
            .map(|x| x.0)
            .unwrap_or("udp");
        let start_ns = c.duration(&f.start, "start")?.unwrap_or(0);
        let stop_ns = match c.duration(&f.duration, "duration")? {
            Some(d) => start_ns.saturating_add(d).min(duration_ns),
            None => duration_ns,
        };
        let mut traffic = match c.str(&f.traffic, "traffic")? {
            None => None,
            Some((t, span)) => {
                Some(parse_traffic(t).or_else(|e| c.err(span, format!("traffic: {e}")))?)
            }
        };
        let mut protocol = match proto_name {
            "udp" => Protocol::Udp(match traffic.take() {
                Some(t) => match (&f.rate, SendSpec::model(t)) {
                    (Some(r), _) => return c.err(r.span(), "rate: a traffic model sets its own"),
                    (None, Ok(s)) => s,
                    (None, Err(e)) => return c.err(fspan, format!("traffic: {e}")),
                },
                None => SendSpec::constant(c.rate(&f.rate, "rate")?.map_or_else(
                    || c.err(fspan.clone(), format!("flow {name}: a udp flow needs rate")),
                    Ok,
                )?),
            }),
            "ping" => Protocol::Ping {
                interval_ns: match c.duration(&f.interval, "interval")? {
                    Some(0) => {
                        return c.err(
                            f.interval.as_ref().map(|x| x.span()).unwrap_or(fspan),
                            "interval: must be above 0",
                        )
                    }
                    Some(i) => i,
                    None => 1_000_000_000,
                },
            },
            "tcp" => Protocol::Tcp,
            p => {
                return c.err(
                    f.protocol.as_ref().map(|x| x.span()).unwrap_or(fspan),
                    format!("protocol: unknown {p:?}: expected udp, tcp or ping"),
                )
            }
        };
        if let (Some(t), Some(_)) = (&f.traffic, &traffic) {
            return c.err(t.span(), "traffic: a traffic model runs over udp");
        }
        let path_mtu = path
            .windows(2)
            .filter_map(|w| link_between(w[0], w[1]))
            .map(|l| links[l].mtu)
            .min()
            .unwrap_or(1500);
        let size = c.bytes(&f.size, "size")?;
        let mss = c.positive(&f.mss, "mss")?.map(|m| m as u32);
        let size = match protocol {
            Protocol::Tcp => {
                let mss = mss.unwrap_or(path_mtu - TCP_HEADERS);
                if mss + TCP_HEADERS > path_mtu {
                    return c.err(
                        f.mss.as_ref().map(|x| x.span()).unwrap_or(fspan),
                        format!("mss: {mss} + 40 header bytes is above the path MTU {path_mtu}"),
                    );
                }
                mss + TCP_HEADERS
            }
            Protocol::Udp(ref s) if s.traffic.is_some() => match &f.size {
                Some(v) => return c.err(v.span(), "size: a traffic model sets its own"),
                None => 0,
            },
            _ => {
                let s = size.unwrap_or(if matches!(protocol, Protocol::Ping { .. }) {
                    84
                } else {
                    1000
                });
                let span = f.size.as_ref().map(|x| x.span()).unwrap_or(fspan.clone());
                if s < MIN_UDP {
                    return c.err(
                        span,
                        format!("size: {s} bytes is below the 28 bytes of IP and UDP headers"),
                    );
                }
                if s > u64::from(path_mtu) {
                    return c.err(span, format!("size: {s} bytes is above the path MTU {path_mtu} (fragmentation is not modelled)"));
                }
                s as u32
            }
        };
        if let Protocol::Udp(s) = &mut protocol {
            s.size = size;
        }
        let service = c.service(&f.service)?.unwrap_or(ServiceCategory::Ubr);
        let pcr = c.rate(&f.pcr, "pcr")?;
        let scr = c.rate(&f.scr, "scr")?;
        let contract = match pcr {
            None => {
                if let Some(s) = &f.scr {
                    return c.err(s.span(), "scr: needs pcr");
                }
                None
            }
            Some(pcr_bps) => {
                if let (Some(s), Some(sf)) = (scr, &f.scr) {
                    if s > pcr_bps {
                        return c.err(
                            sf.span(),
                            format!("scr: {s} bit/s is above pcr {pcr_bps} bit/s"),
                        );
                    }
                }
                Some(ContractSpec {
                    pcr_bps,
                    cdvt_ns: c.duration(&f.cdvt, "cdvt")?.unwrap_or(0),
                    scr_bps: scr,
                    mbs: c
                        .positive(&f.mbs, "mbs")?
                        .unwrap_or(1)
                        .min(u64::from(u32::MAX)) as u32,
                })
            }
        };
        let police = match c.str(&f.police, "police")? {
            None => None,
            Some(("drop", _)) => Some(PolicingAction::Drop),
            Some(("tag", _)) => Some(PolicingAction::TagClp),
            Some(("none", _)) => None,
            Some((p, span)) => {
                return c.err(
                    span,
                    format!("police: unknown {p:?}: expected drop, tag or none"),
                )
            }
        };
        let shape = c.bool(&f.shape, "shape")?.unwrap_or(false);
        if (police.is_some() || shape) && contract.is_none() {
            let span = f
                .police
                .as_ref()
                .or(f.shape.as_ref())
                .map(|x| x.span())
                .unwrap_or(fspan.clone());
            return c.err(
                span,
                format!("flow {name}: police and shape need a contract (pcr)"),
            );
        }
        let dscp = match c.str(&f.dscp, "dscp")? {
            None => match &f.dscp {
                Some(v) => match v.get_ref() {
                    Value::Integer(i) if (0..64).contains(i) => *i as u8,
                    _ => {
                        return c.err(
                            v.span(),
                            "dscp: expected a name (ef, af11, cs5, be) or 0..=63",
                        )
                    }
                },
                None => 0,
            },
            Some((d, span)) => match flowlab_qos::classify::parse_dscp(d) {
                Ok(x) => x,
                Err(e) => return c.err(span, format!("dscp: {e}")),
            },
        };
        let window = c.bytes(&f.window, "window")?.unwrap_or(64 * 1024);
        if window == 0 {
            return c.err(
                f.window.as_ref().map(|x| x.span()).unwrap_or(fspan),
                "window: must be above 0",
            );
        }
        let tcp = TcpSpec {
            window,
            send_buffer: c.bytes(&f.send_buffer, "send_buffer")?.unwrap_or(window),
            mss: size.saturating_sub(TCP_HEADERS),
            window_scaling: c
                .bool(&f.window_scaling, "window_scaling")?
                .unwrap_or(window > 65_535),
            bytes: c.bytes(&f.bytes, "bytes")?,
            delayed_ack_ns: c.duration(&f.delayed_ack, "delayed_ack")?,
            min_rto_ns: c.duration(&f.min_rto, "min_rto")?.unwrap_or(1_000_000_000),
        };
        flows.push(FlowSpec {
            name,
            path,
            protocol,
            size,
            count: c.positive(&f.count, "count")?,
            start_ns,
            stop_ns,
            service,
            contract,
            police,
            shape,
            dscp,
            tcp,
            metered_headers: 0,
            line,
            rate_line: f
                .rate
                .as_ref()
                .or(f.traffic.as_ref())
                .map_or(line, |r| line_of(text, r.span().start)),
        });
    }

    // Background cell sources.
    let mut backgrounds = Vec::new();
    for bg in &raw.background {
        let bspan = bg.span();
        let bg = bg.get_ref();
        let node = find(&bg.from)?;
        let to = find(&bg.to)?;
        if nodes[node].kind != NodeKind::AtmSwitch {
            return c.err(
                bg.from.span(),
                format!(
                    "background {}: {:?} is not an atm-switch",
                    bg.name.get_ref(),
                    bg.from.get_ref()
                ),
            );
        }
        let Some(link) = link_between(node, to) else {
            return c.err(
                bg.to.span(),
                format!(
                    "background {}: no link between {} and {}",
                    bg.name.get_ref(),
                    bg.from.get_ref(),
                    bg.to.get_ref()
                ),
            );
        };
        let rate = c
            .rate(&bg.rate, "rate")?
            .map_or_else(|| c.err(bspan.clone(), "background: needs rate"), Ok)?;
        let poisson = match c.str(&bg.pattern, "pattern")? {
            None | Some(("cbr", _)) => false,
            Some(("poisson", _)) => true,
            Some((p, span)) => {
                return c.err(
                    span,
                    format!("pattern: unknown {p:?}: expected cbr or poisson"),
                )
            }
        };
        let start_ns = c.duration(&bg.start, "start")?.unwrap_or(0);
        backgrounds.push(BackgroundSpec {
            name: bg.name.get_ref().clone(),
            node,
            link,
            cells_per_second_num: rate,
            poisson,
            passes: c.positive(&bg.passes, "passes")?.unwrap_or(1).min(1024) as usize,
            loop_delay_ns: c.duration(&bg.loop_delay, "loop_delay")?.unwrap_or(10_000),
            cells_per_frame: c
                .positive(&bg.cells_per_frame, "cells_per_frame")?
                .unwrap_or(1)
                .min(1365) as u32,
            service: c.service(&bg.service)?.unwrap_or(ServiceCategory::Ubr),
            clp: c.bool(&bg.clp, "clp")?.unwrap_or(false),
            start_ns,
            stop_ns: match c.duration(&bg.duration, "duration")? {
                Some(d) => start_ns.saturating_add(d).min(duration_ns),
                None => duration_ns,
            },
            line: line_of(text, bspan.start),
        });
    }
    let _ = CellMeta::user_data;
    let model = Model {
        description,
        duration_ns,
        drain_ns,
        seed,
        nodes,
        links,
        flows,
        backgrounds,
    };
    crate::limits::check_overload(&model)?;
    Ok(model)
}

fn build_sched(
    c: &Ctx<'_>,
    l: &RawLink,
    link_limit: QueueLimit,
    lspan: std::ops::Range<usize>,
) -> Result<SchedSpec, ScenarioError> {
    let kind = match c.str(&l.scheduler, "scheduler")? {
        None | Some(("fifo", _)) => SchedKind::Fifo,
        Some(("priority" | "pq", _)) => SchedKind::Priority,
        Some(("wfq", _)) => SchedKind::Wfq,
        Some(("drr", _)) => SchedKind::Drr,
        Some(("pq-wfq", _)) => SchedKind::PqWfq,
        Some((s, span)) => {
            return c.err(
                span,
                format!("scheduler: unknown {s:?}: expected fifo, priority, wfq, drr or pq-wfq"),
            )
        }
    };
    let mut classes = Vec::new();
    let mut default_class = None;
    if let Some(list) = &l.classes {
        for (i, cl) in list.get_ref().iter().enumerate() {
            let cspan = cl.span();
            let cl = cl.get_ref();
            let mut dscps = Vec::new();
            if let Some(d) = &cl.dscp {
                let items: Vec<Value> = match d.get_ref() {
                    Value::Array(a) => a.clone(),
                    v => vec![v.clone()],
                };
                for item in items {
                    let code = match &item {
                        Value::String(s) => flowlab_qos::classify::parse_dscp(s)
                            .or_else(|e| c.err(d.span(), format!("dscp: {e}")))?,
                        Value::Integer(x) if (0..64).contains(x) => *x as u8,
                        _ => {
                            return c.err(
                                d.span(),
                                "dscp: expected names (ef, af11, cs5, be) or 0..=63",
                            )
                        }
                    };
                    dscps.push(code);
                }
            }
            let weight = c
                .positive(&cl.weight, "weight")?
                .unwrap_or(1)
                .min(u64::from(u32::MAX)) as u32;
            let limit = match (
                c.bytes(&cl.buffer, "buffer")?,
                c.positive(&cl.buffer_packets, "buffer_packets")?,
            ) {
                (Some(b), _) => QueueLimit::Bytes(b),
                (None, Some(p)) => QueueLimit::Packets(p.min(u64::from(u32::MAX)) as u32),
                (None, None) => link_limit,
            };
            let priority = c.bool(&cl.priority, "priority")?.unwrap_or(false);
            if priority
                && kind == SchedKind::PqWfq
                && classes.iter().any(|x: &ClassSpec| !x.priority)
            {
                return c.err(cspan, "classes: priority classes must come first");
            }
            if c.bool(&cl.default, "default")?.unwrap_or(false) {
                default_class = Some(i);
            }
            classes.push(ClassSpec {
                name: c
                    .str(&cl.name, "name")?
                    .map(|x| x.0.to_string())
                    .unwrap_or_else(|| format!("class{i}")),
                dscps,
                weight,
                priority,
                limit,
            });
        }
    }
    if classes.is_empty() {
        if kind != SchedKind::Fifo {
            return c.err(
                l.scheduler.as_ref().map(|x| x.span()).unwrap_or(lspan),
                "scheduler: needs classes",
            );
        }
        classes.push(ClassSpec {
            name: "all".into(),
            dscps: Vec::new(),
            weight: 1,
            priority: false,
            limit: link_limit,
        });
    }
    if kind == SchedKind::PqWfq && classes.iter().all(|x| x.priority) {
        return c.err(
            lspan,
            "pq-wfq: needs at least one class without priority = true",
        );
    }
    let default_class = default_class.unwrap_or(classes.len() - 1);
    Ok(SchedSpec {
        kind,
        classes,
        default_class,
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
