//! Experiment files: TOML text → a validated [`Experiment`], or an [`ExperimentError`] naming
//! the line.
//!
//! The file is read as a spanned TOML tree (`toml::de::DeTable`), so every later check (an
//! unknown host, a cycle between blocks, a bad rate in the third sweep value) still points at
//! the line that caused it. Variables are substituted into string values first, sweeps are
//! expanded into points, and every point is validated before anything runs: a typo in the
//! last point must not be found an hour into the experiment.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;

use flowlab_spec::{Direction, Protocol};
use flowlab_traffic::TrafficSpec;
use flowlab_units::{parse_bytes, parse_count, parse_duration, parse_rate, Rate};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::limits::{
    hours, MAX_DEFINITIONS, MAX_FLOW_RUNS, MAX_PARALLEL, MAX_PLANNED_NS, MAX_PLAN_ITEMS,
    MAX_POINTS, MAX_POINT_ENTRIES, MAX_REPEAT, MAX_STEPS, MAX_STEP_FLOWS, MAX_TRIALS,
};

/// Port of an agent when a host's address names none (the agent's default).
pub const DEFAULT_AGENT_PORT: u16 = 9470;
const MIN_SIZE: u64 = flowlab_wire::PROBE_HEADER_LEN as u64;
const MAX_UDP_SIZE: u64 = 65_507;

type Span = Range<usize>;

/// A file that failed to load: one line of message and, where known, the line it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExperimentError {
    /// 1-based line.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ExperimentError {}

/// A host running an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    /// `HOST:PORT` (IPv6 in brackets), the default port added when the file gave none.
    pub address: String,
    pub line: usize,
}

/// One flow as the file describes it, units parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    /// The host that runs the flowlab client (and sends, for `oneway`).
    pub from: String,
    /// The host whose agent serves the test.
    pub to: String,
    pub protocol: Protocol,
    pub direction: Direction,
    /// `None`: as fast as the path allows (`rate = "max"`).
    pub rate_bps: Option<u64>,
    pub size: u32,
    pub duration_ns: Option<u64>,
    pub count: Option<u64>,
    pub interval_ns: Option<u64>,
    pub traffic: Option<TrafficSpec>,
    pub dscp: Option<u8>,
    /// Parallel sockets of this flow.
    pub flows: u32,
    /// Offset from the start of its step.
    pub start_ns: u64,
    pub congestion: Option<String>,
    pub send_buffer: Option<u32>,
    pub recv_buffer: Option<u32>,
    pub line: usize,
}

impl Flow {
    /// How long the flow runs, when that is known before running it: its duration, or its
    /// count at a constant rate. Needed to lay a serial block out inside a parallel one.
    pub fn known_length_ns(&self) -> Option<u64> {
        let by_count = match (self.count, self.rate_bps, &self.traffic) {
            (Some(n), Some(r), None) => {
                let ns = u128::from(n) * u128::from(self.size) * 8 * 1_000_000_000 / u128::from(r);
                u64::try_from(ns).ok()
            }
            _ => None,
        };
        match (self.duration_ns, by_count) {
            (Some(d), Some(c)) => Some(d.min(c)),
            (d, c) => d.or(c),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// Items one after another, each in its own step(s).
    Serial,
    /// Items together, in one step.
    Parallel,
}

/// A block of the plan, references to named blocks resolved into a tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    pub name: Option<String>,
    pub kind: BlockKind,
    pub items: Vec<Item>,
    pub repeat: u32,
    pub start_ns: u64,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Flow(String),
    Block(Block),
}

/// One combination of sweep values, with the hosts and flows it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPoint {
    /// (param, value) for each sweep, outermost first; empty without sweeps.
    pub labels: Vec<(String, String)>,
    pub hosts: Vec<Host>,
    pub flows: Vec<Flow>,
}

impl SweepPoint {
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }
    pub fn flow(&self, name: &str) -> Option<&Flow> {
        self.flows.iter().find(|f| f.name == name)
    }
}

/// The search a file asks for instead of (or, for `offered-load`, around) its plan.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSpec {
    pub kind: SearchKind,
    /// The flows each trial runs (together).
    pub flows: Vec<String>,
    /// Length of each trial; `None` keeps each flow's own duration/count.
    pub trial_ns: Option<u64>,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SearchKind {
    Rfc2544Throughput {
        min_bps: u64,
        max_bps: u64,
        resolution_bps: u64,
        loss_tolerance: f64,
    },
    BackToBack {
        line_rate_bps: u64,
        min_packets: u64,
        max_packets: u64,
        resolution_packets: u64,
        repeat: u32,
    },
    LossVsLoad {
        max_bps: u64,
        step_pct: f64,
    },
    /// Each flow's `rate` is its 100 % rate.
    OfferedLoad {
        loads_pct: Vec<f64>,
    },
    BurstSize {
        rate_bps: u64,
        peak_bps: u64,
        capacity_bps: u64,
        bursts_bytes: Vec<u64>,
    },
}

/// A validated experiment file.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    pub name: String,
    pub description: Option<String>,
    pub seed: u64,
    /// Times the whole plan runs at each sweep point.
    pub repeat: u32,
    pub plan: Block,
    /// At least one; one per combination of sweep values.
    pub points: Vec<SweepPoint>,
    pub search: Option<SearchSpec>,
}

// ---------------------------------------------------------------------------------------------
// The raw layer: scalars with their spans, before variables and units.

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
}

/// A scalar as written: its text (strings unquoted) and where it is.
#[derive(Debug, Clone)]
struct Raw {
    text: String,
    kind: Kind,
    span: Span,
}

type Fields = BTreeMap<String, Raw>;

fn line_of(text: &str, pos: usize) -> usize {
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
    fn err<T>(&self, span: &Span, msg: impl Into<String>) -> Result<T, ExperimentError> {
        Err(self.error(span, msg))
    }
    fn error(&self, span: &Span, msg: impl Into<String>) -> ExperimentError {
        ExperimentError {
            line: Some(line_of(self.text, span.start)),
            message: msg.into(),
        }
    }
    fn line(&self, span: &Span) -> usize {
        line_of(self.text, span.start)
    }

    fn scalar(&self, v: &Spanned<DeValue<'_>>, key: &str) -> Result<Raw, ExperimentError> {
        let span = v.span();
        let (text, kind) = match v.get_ref() {
            DeValue::String(s) => (s.to_string(), Kind::Str),
            DeValue::Integer(i) => {
                let digits: String = i.as_str().chars().filter(|&c| c != '_').collect();
                let n = i64::from_str_radix(
                    digits
                        .trim_start_matches("0x")
                        .trim_start_matches("0o")
                        .trim_start_matches("0b"),
                    i.radix(),
                )
                .map_err(|_| self.error(&span, format!("{key}: integer out of range")))?;
                (n.to_string(), Kind::Int)
            }
            DeValue::Float(f) => (f.as_str().replace('_', ""), Kind::Float),
            DeValue::Boolean(b) => (b.to_string(), Kind::Bool),
            other => {
                return self.err(
                    &span,
                    format!("{key}: expected a value, found {}", other.type_str()),
                )
            }
        };
        Ok(Raw { text, kind, span })
    }

    /// A table's scalar fields; any key outside `allowed` (or a nested value) is an error.
    fn fields(
        &self,
        t: &DeTable<'_>,
        what: &str,
        allowed: &[&str],
        nested: &[&str],
    ) -> Result<Fields, ExperimentError> {
        let mut out = Fields::new();
        for (k, v) in t.iter() {
            let key = k.get_ref().as_ref();
            if nested.contains(&key) {
                continue;
            }
            if !allowed.contains(&key) {
                return self.err(
                    &k.span(),
                    format!(
                        "{what}: unknown key '{key}' (expected one of: {})",
                        allowed.join(", ")
                    ),
                );
            }
            out.insert(key.to_string(), self.scalar(v, key)?);
        }
        Ok(out)
    }

    fn table<'t, 'i>(
        &self,
        v: &'t Spanned<DeValue<'i>>,
        what: &str,
    ) -> Result<&'t DeTable<'i>, ExperimentError> {
        v.get_ref()
            .as_table()
            .ok_or_else(|| self.error(&v.span(), format!("{what}: expected a table")))
    }

    /// `[[name]]`: an array of tables.
    fn tables<'t, 'i>(
        &self,
        v: &'t Spanned<DeValue<'i>>,
        what: &str,
    ) -> Result<Vec<(Span, &'t DeTable<'i>)>, ExperimentError> {
        let arr = v.get_ref().as_array().ok_or_else(|| {
            self.error(
                &v.span(),
                format!("{what}: expected an array of tables ([[{what}]])"),
            )
        })?;
        arr.iter()
            .map(|e| Ok((e.span(), self.table(e, what)?)))
            .collect()
    }
}

/// Replaces every `${name}` by its variable; `$$` is a literal `$`.
fn substitute(
    ctx: &Ctx,
    raw: &Raw,
    vars: &BTreeMap<String, Raw>,
    key: &str,
) -> Result<Raw, ExperimentError> {
    if raw.kind != Kind::Str || !raw.text.contains('$') {
        return Ok(raw.clone());
    }
    let mut out = String::new();
    let mut rest = raw.text.as_str();
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(a) = after.strip_prefix('{') {
            let Some(end) = a.find('}') else {
                return ctx.err(&raw.span, format!("{key}: '${{' without a closing '}}'"));
            };
            let name = &a[..end];
            match vars.get(name) {
                Some(v) => out.push_str(&v.text),
                None => {
                    return ctx.err(
                        &raw.span,
                        format!("{key}: unknown variable '{name}' (define it in [vars])"),
                    )
                }
            }
            rest = &a[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(Raw {
        text: out,
        kind: Kind::Str,
        span: raw.span.clone(),
    })
}

// ---------------------------------------------------------------------------------------------
// Typed readers over (substituted) raw fields.

struct Reader<'a, 'c> {
    ctx: &'c Ctx<'a>,
    fields: Fields,
    what: String,
    /// Span of the table, for "missing key" errors.
    span: Span,
}

impl Reader<'_, '_> {
    fn get(&self, k: &str) -> Option<&Raw> {
        self.fields.get(k)
    }
    fn err<T>(&self, r: &Raw, k: &str, msg: impl fmt::Display) -> Result<T, ExperimentError> {
        self.ctx.err(&r.span, format!("{} {k}: {msg}", self.what))
    }
    fn required(&self, k: &str) -> Result<&Raw, ExperimentError> {
        self.get(k).ok_or_else(|| {
            self.ctx
                .error(&self.span, format!("{}: missing key '{k}'", self.what))
        })
    }
    fn string(&self, k: &str) -> Result<Option<String>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) if r.kind == Kind::Str => Ok(Some(r.text.clone())),
            Some(r) => self.err(r, k, "expected a string"),
        }
    }
    fn name(&self, k: &str) -> Result<String, ExperimentError> {
        let r = self.required(k)?;
        if r.kind != Kind::Str {
            return self.err(r, k, "expected a string");
        }
        let ok = !r.text.is_empty()
            && r.text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return self.err(
                r,
                k,
                format!("'{}' is not a name (letters, digits, - and _)", r.text),
            );
        }
        Ok(r.text.clone())
    }
    fn uint(&self, k: &str) -> Result<Option<u64>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) => match r.text.trim().parse::<u64>() {
                Ok(n) if r.kind != Kind::Float && r.kind != Kind::Bool => Ok(Some(n)),
                _ => self.err(
                    r,
                    k,
                    format!("expected a whole number >= 0, got '{}'", r.text),
                ),
            },
        }
    }
    fn positive_u32(&self, k: &str) -> Result<Option<u32>, ExperimentError> {
        match self.uint(k)? {
            None => Ok(None),
            Some(n) => match u32::try_from(n) {
                Ok(v) if v > 0 => Ok(Some(v)),
                _ => self.err(
                    self.get(k).unwrap_or(&dummy()),
                    k,
                    "must be 1 to 4294967295",
                ),
            },
        }
    }
    /// A count from 1 to `max`, a cap on work (see [`crate::limits`]).
    fn capped_u32(&self, k: &str, max: u32) -> Result<Option<u32>, ExperimentError> {
        match self.positive_u32(k)? {
            Some(n) if n > max => self.err(
                self.get(k).unwrap_or(&dummy()),
                k,
                format!("{n} is above the limit of {max} (see Limits in docs/experiments.md)"),
            ),
            n => Ok(n),
        }
    }
    fn float(&self, k: &str) -> Result<Option<f64>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) => match r.text.trim().trim_end_matches('%').parse::<f64>() {
                Ok(x) if x.is_finite() && r.kind != Kind::Bool => Ok(Some(x)),
                _ => self.err(r, k, format!("expected a number, got '{}'", r.text)),
            },
        }
    }
    /// `Some(None)` for `max`.
    fn rate(&self, k: &str) -> Result<Option<Option<u64>>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) => match parse_rate(&r.text) {
                Ok(Rate::Max) => Ok(Some(None)),
                Ok(Rate::BitsPerSec(b)) => Ok(Some(Some(b))),
                Err(e) => self.err(r, k, e),
            },
        }
    }
    fn fixed_rate(&self, k: &str) -> Result<Option<u64>, ExperimentError> {
        match self.rate(k)? {
            None => Ok(None),
            Some(Some(b)) => Ok(Some(b)),
            Some(None) => self.err(
                self.get(k).unwrap_or(&dummy()),
                k,
                "needs a number of bit/s, not 'max'",
            ),
        }
    }
    fn bytes(&self, k: &str) -> Result<Option<u64>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) => parse_bytes(&r.text)
                .map(Some)
                .or_else(|e| self.err(r, k, e)),
        }
    }
    fn duration(&self, k: &str) -> Result<Option<u64>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) => match parse_duration(&r.text) {
                Ok(d) => match u64::try_from(d.as_nanos()) {
                    Ok(ns) => Ok(Some(ns)),
                    Err(_) => self.err(r, k, "too long"),
                },
                Err(e) => self.err(r, k, e),
            },
        }
    }
    fn count(&self, k: &str) -> Result<Option<u64>, ExperimentError> {
        match self.get(k) {
            None => Ok(None),
            Some(r) => parse_count(&r.text)
                .map(Some)
                .or_else(|e| self.err(r, k, e)),
        }
    }
}

fn dummy() -> Raw {
    Raw {
        text: String::new(),
        kind: Kind::Str,
        span: 0..0,
    }
}

// ---------------------------------------------------------------------------------------------
// The parsed file before sweeps: raw fields per section.

struct RawHost {
    span: Span,
    fields: Fields,
}

struct RawFlow {
    span: Span,
    fields: Fields,
}

struct RawSweep {
    param: Raw,
    values: Vec<Raw>,
}

const EXPERIMENT_KEYS: &[&str] = &["name", "description", "seed", "repeat"];
const HOST_KEYS: &[&str] = &["name", "address"];
const FLOW_KEYS: &[&str] = &[
    "name",
    "from",
    "to",
    "protocol",
    "mode",
    "rate",
    "size",
    "duration",
    "count",
    "interval",
    "traffic",
    "dscp",
    "flows",
    "start",
    "congestion",
    "send_buffer",
    "recv_buffer",
];
const BLOCK_KEYS: &[&str] = &["name", "serial", "parallel", "repeat", "start"];
const SEARCH_KEYS: &[&str] = &[
    "kind",
    "flow",
    "flows",
    "trial",
    "min",
    "max",
    "resolution",
    "loss",
    "rate",
    "peak",
    "capacity",
    "bursts",
    "loads",
    "step",
    "repeat",
];

/// Parses and validates an experiment file's text.
pub fn load(text: &str) -> Result<Experiment, ExperimentError> {
    let ctx = Ctx { text };
    let doc = DeTable::parse(text).map_err(|e| ExperimentError {
        line: e.span().map(|s| line_of(text, s.start)),
        message: e.message().trim().replace('\n', " "),
    })?;
    let root = doc.get_ref();
    for k in root.keys() {
        let key: &str = k.get_ref().as_ref();
        if !matches!(
            key,
            "experiment" | "vars" | "host" | "flow" | "plan" | "sweep" | "search"
        ) {
            return ctx.err(
                &k.span(),
                format!(
                    "unknown section '{key}' (expected experiment, vars, host, flow, plan, sweep, search)"
                ),
            );
        }
    }

    // [vars]: scalars, not substituted themselves.
    let mut vars: BTreeMap<String, Raw> = BTreeMap::new();
    if let Some(v) = root.get("vars") {
        for (k, val) in ctx.table(v, "vars")?.iter() {
            let key: &str = k.get_ref().as_ref();
            vars.insert(key.to_string(), ctx.scalar(val, key)?);
        }
    }

    // [experiment]
    let exp_v = root.get("experiment").ok_or_else(|| ExperimentError {
        line: None,
        message: "missing [experiment] section (name, seed, repeat)".into(),
    })?;
    let exp_fields = ctx.fields(
        ctx.table(exp_v, "experiment")?,
        "experiment",
        EXPERIMENT_KEYS,
        &[],
    )?;
    let exp = Reader {
        ctx: &ctx,
        fields: subst_all(&ctx, &exp_fields, &vars)?,
        what: "experiment".into(),
        span: exp_v.span(),
    };
    let name = exp.name("name")?;
    let description = exp.string("description")?;
    let seed = exp.uint("seed")?.unwrap_or(0);
    let repeat = exp.capped_u32("repeat", MAX_REPEAT)?.unwrap_or(1);

    // [[host]] and [[flow]], raw.
    let mut hosts = Vec::new();
    if let Some(v) = root.get("host") {
        for (span, t) in ctx.tables(v, "host")? {
            hosts.push(RawHost {
                span,
                fields: ctx.fields(t, "host", HOST_KEYS, &[])?,
            });
        }
    }
    let mut flows = Vec::new();
    if let Some(v) = root.get("flow") {
        for (span, t) in ctx.tables(v, "flow")? {
            flows.push(RawFlow {
                span,
                fields: ctx.fields(t, "flow", FLOW_KEYS, &[])?,
            });
        }
    }
    if flows.is_empty() {
        return Err(ExperimentError {
            line: None,
            message: "no [[flow]]: an experiment needs at least one flow".into(),
        });
    }
    for (what, spans) in [
        (
            "[[host]]",
            hosts.iter().map(|h| &h.span).collect::<Vec<_>>(),
        ),
        ("[[flow]]", flows.iter().map(|f| &f.span).collect()),
    ] {
        if let Some(span) = spans.get(MAX_DEFINITIONS) {
            return ctx.err(
                span,
                format!("more than {MAX_DEFINITIONS} {what} tables, the limit"),
            );
        }
    }

    // [[sweep]]
    let mut sweeps = Vec::new();
    if let Some(v) = root.get("sweep") {
        for (span, t) in ctx.tables(v, "sweep")? {
            sweeps.push(parse_sweep(&ctx, span, t)?);
        }
    }

    // The base point validates names and gives the plan its flow set.
    let base = build_point(&ctx, &hosts, &flows, &vars, &[])?;
    let flow_names: BTreeSet<&str> = base.flows.iter().map(|f| f.name.as_str()).collect();

    let plan = match root.get("plan") {
        Some(v) => parse_plan(&ctx, ctx.table(v, "plan")?, v.span(), &flow_names)?,
        None => Block {
            name: None,
            kind: BlockKind::Parallel,
            items: base
                .flows
                .iter()
                .map(|f| Item::Flow(f.name.clone()))
                .collect(),
            repeat: 1,
            start_ns: 0,
            line: 1,
        },
    };

    let points = expand_sweeps(&ctx, &hosts, &flows, &vars, &sweeps, &base)?;
    check_plan_size(&ctx, &exp, &plan, repeat, points.len() as u64)?;
    check_planned_time(&ctx, &exp, &plan, repeat, &points)?;
    for p in &points {
        crate::plan::expand(&plan, p).map_err(|(line, message)| ExperimentError {
            line: Some(line),
            message: if p.labels.is_empty() {
                message
            } else {
                format!("{message} (at sweep point {})", label_text(&p.labels))
            },
        })?;
    }

    let search = match root.get("search") {
        None => None,
        Some(v) => {
            if !sweeps.is_empty() {
                return ctx.err(
                    &v.span(),
                    "search: a file with a [search] cannot also have [[sweep]]s (the search chooses the values)",
                );
            }
            Some(parse_search(&ctx, v, &vars, &base)?)
        }
    };

    Ok(Experiment {
        name,
        description,
        seed,
        repeat,
        plan,
        points,
        search,
    })
}

fn label_text(labels: &[(String, String)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn subst_all(
    ctx: &Ctx,
    fields: &Fields,
    vars: &BTreeMap<String, Raw>,
) -> Result<Fields, ExperimentError> {
    fields
        .iter()
        .map(|(k, r)| Ok((k.clone(), substitute(ctx, r, vars, k)?)))
        .collect()
}

/// Where a sweep value goes.
#[derive(Debug, Clone)]
enum Target {
    Var(String),
    Flow(String, String),
    Host(String),
}

fn build_point(
    ctx: &Ctx,
    hosts: &[RawHost],
    flows: &[RawFlow],
    vars: &BTreeMap<String, Raw>,
    overrides: &[(Target, Raw)],
) -> Result<SweepPoint, ExperimentError> {
    let mut vars = vars.clone();
    for (t, v) in overrides {
        if let Target::Var(n) = t {
            vars.insert(n.clone(), v.clone());
        }
    }
    let mut out_hosts: Vec<Host> = Vec::new();
    for h in hosts {
        let mut fields = subst_all(ctx, &h.fields, &vars)?;
        let r = Reader {
            ctx,
            fields: fields.clone(),
            what: "host".into(),
            span: h.span.clone(),
        };
        let name = r.name("name")?;
        for (t, v) in overrides {
            if let Target::Host(n) = t {
                if *n == name {
                    fields.insert("address".into(), v.clone());
                }
            }
        }
        let r = Reader {
            ctx,
            fields,
            what: format!("host '{name}'"),
            span: h.span.clone(),
        };
        if out_hosts.iter().any(|o| o.name == name) {
            return ctx.err(&h.span, format!("host '{name}' is defined twice"));
        }
        let addr_raw = r.required("address")?;
        let address =
            normalise_address(&addr_raw.text).or_else(|m| r.err(addr_raw, "address", m))?;
        out_hosts.push(Host {
            name,
            address,
            line: ctx.line(&h.span),
        });
    }

    let mut out_flows: Vec<Flow> = Vec::new();
    for f in flows {
        let base = Reader {
            ctx,
            fields: subst_all(ctx, &f.fields, &vars)?,
            what: "flow".into(),
            span: f.span.clone(),
        };
        let name = base.name("name")?;
        if out_flows.iter().any(|o| o.name == name) {
            return ctx.err(&f.span, format!("flow '{name}' is defined twice"));
        }
        let mut fields = base.fields;
        for (t, v) in overrides {
            if let Target::Flow(n, k) = t {
                if *n == name {
                    fields.insert(k.clone(), substitute(ctx, v, &vars, k)?);
                }
            }
        }
        let r = Reader {
            ctx,
            fields,
            what: format!("flow '{name}'"),
            span: f.span.clone(),
        };
        out_flows.push(build_flow(&r, name, &out_hosts)?);
    }
    Ok(SweepPoint {
        labels: Vec::new(),
        hosts: out_hosts,
        flows: out_flows,
    })
}

fn build_flow(r: &Reader, name: String, hosts: &[Host]) -> Result<Flow, ExperimentError> {
    let host_ref = |k: &str| -> Result<String, ExperimentError> {
        let v = r.required(k)?;
        if hosts.iter().any(|h| h.name == v.text) {
            Ok(v.text.clone())
        } else {
            let known: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
            r.err(
                v,
                k,
                format!(
                    "unknown host '{}' (hosts: {})",
                    v.text,
                    if known.is_empty() {
                        "none defined".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        }
    };
    let from = host_ref("from")?;
    let to = host_ref("to")?;
    let traffic = match r.get("traffic") {
        None => None,
        Some(t) => match TrafficSpec::parse(&t.text) {
            Ok(spec) if spec.transactions().is_some() => return r.err(
                t,
                "traffic",
                "request/response (rr, crr) runs with `flowlab test`; experiment flows are streams",
            ),
            Ok(spec) => Some(spec),
            Err(e) => return r.err(t, "traffic", e),
        },
    };
    // A TCP application's model (a TCP preset) runs over TCP unless the file says otherwise.
    let tcp_by_default = traffic.as_ref().is_some_and(TrafficSpec::prefers_tcp);
    let protocol = match r.string("protocol")?.as_deref() {
        None if tcp_by_default => Protocol::Tcp,
        None | Some("udp") => Protocol::Udp,
        Some("tcp") => Protocol::Tcp,
        Some(other) => {
            return r.err(
                r.get("protocol").unwrap_or(&dummy()),
                "protocol",
                format!("'{other}' is not udp or tcp"),
            )
        }
    };
    let direction = match r.string("mode")?.as_deref() {
        None | Some("oneway") => Direction::Oneway,
        Some("loopback") => Direction::Loopback,
        Some("reverse") => Direction::Reverse,
        Some(other) => {
            return r.err(
                r.get("mode").unwrap_or(&dummy()),
                "mode",
                format!("'{other}' is not oneway, loopback or reverse"),
            )
        }
    };
    let rate_bps = r.rate("rate")?.unwrap_or(Some(1_000_000));
    let size = r.bytes("size")?.unwrap_or(1000);
    let max_size = match protocol {
        Protocol::Udp => MAX_UDP_SIZE,
        _ => u64::from(u32::MAX),
    };
    if !(MIN_SIZE..=max_size).contains(&size) {
        return r.err(
            r.get("size").unwrap_or(&dummy()),
            "size",
            format!(
                "{size} B is outside {MIN_SIZE}..={max_size} B (probe header .. protocol maximum)"
            ),
        );
    }
    let size = size as u32;
    let mut duration_ns = r.duration("duration")?;
    let count = r.count("count")?;
    if duration_ns == Some(0) {
        return r.err(
            r.get("duration").unwrap_or(&dummy()),
            "duration",
            "must be above 0",
        );
    }
    if count == Some(0) {
        return r.err(
            r.get("count").unwrap_or(&dummy()),
            "count",
            "must be above 0",
        );
    }
    if duration_ns.is_none() && count.is_none() {
        duration_ns = Some(10_000_000_000);
    }
    if let (Some(t), Protocol::Tcp, Direction::Loopback) = (r.get("traffic"), protocol, direction) {
        return r.err(
            t,
            "traffic",
            "a traffic model over TCP runs oneway or reverse: the TCP echo returns fixed-size messages",
        );
    }
    let dscp = match r.get("dscp") {
        None => None,
        Some(d) => match flowlab_qos::classify::parse_dscp(&d.text) {
            Ok(v) => Some(v),
            Err(_) => {
                return r.err(
                    d,
                    "dscp",
                    format!("'{}' is not ef, af11..af43, cs0..cs7, be or 0..63", d.text),
                )
            }
        },
    };
    let flows = r.capped_u32("flows", MAX_PARALLEL)?.unwrap_or(1);
    let start_ns = r.duration("start")?.unwrap_or(0);
    let interval_ns = r.duration("interval")?;
    if interval_ns == Some(0) {
        return r.err(
            r.get("interval").unwrap_or(&dummy()),
            "interval",
            "must be above 0",
        );
    }
    let buffer = |k: &str| -> Result<Option<u32>, ExperimentError> {
        match r.bytes(k)? {
            None => Ok(None),
            Some(b) if b > 0 && b <= i32::MAX as u64 => Ok(Some(b as u32)),
            Some(_) => r.err(
                r.get(k).unwrap_or(&dummy()),
                k,
                "a socket buffer is 1 B to 2 GiB",
            ),
        }
    };
    Ok(Flow {
        from,
        to,
        protocol,
        direction,
        rate_bps,
        size,
        duration_ns,
        count,
        interval_ns,
        traffic,
        dscp,
        flows,
        start_ns,
        congestion: r.string("congestion")?,
        send_buffer: buffer("send_buffer")?,
        recv_buffer: buffer("recv_buffer")?,
        line: r.ctx.line(&r.span),
        name,
    })
}

/// `HOST[:PORT]` → `HOST:PORT`, brackets around IPv6, the default port when none is given.
fn normalise_address(s: &str) -> Result<String, String> {
    let s = s.trim();
    let bad = || format!("'{s}' is not HOST[:PORT] (10.77.1.1, agent.lab:9470, [fd00::2]:9470)");
    if s.is_empty() || s.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let port_ok = |p: &str| p.parse::<u16>().ok().filter(|&p| p > 0);
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        if host.is_empty() {
            return Err(bad());
        }
        return match after {
            "" => Ok(format!("[{host}]:{DEFAULT_AGENT_PORT}")),
            p => match p.strip_prefix(':').and_then(port_ok) {
                Some(port) => Ok(format!("[{host}]:{port}")),
                None => Err(bad()),
            },
        };
    }
    match s.matches(':').count() {
        0 => Ok(format!("{s}:{DEFAULT_AGENT_PORT}")),
        1 => {
            let (host, p) = s.split_once(':').ok_or_else(bad)?;
            match port_ok(p) {
                Some(port) if !host.is_empty() => Ok(format!("{host}:{port}")),
                _ => Err(bad()),
            }
        }
        // A bare IPv6 address: no port possible without brackets.
        _ if s.parse::<std::net::Ipv6Addr>().is_ok() => Ok(format!("[{s}]:{DEFAULT_AGENT_PORT}")),
        _ => Err(bad()),
    }
}

// ---------------------------------------------------------------------------------------------
// Sweeps.

fn parse_sweep(ctx: &Ctx, span: Span, t: &DeTable<'_>) -> Result<RawSweep, ExperimentError> {
    for k in t.keys() {
        let key: &str = k.get_ref().as_ref();
        if key != "param" && key != "values" {
            return ctx.err(
                &k.span(),
                format!("sweep: unknown key '{key}' (expected param, values)"),
            );
        }
    }
    let param = t
        .get("param")
        .ok_or_else(|| ctx.error(&span, "sweep: missing key 'param'"))?;
    let param = ctx.scalar(param, "param")?;
    let values_v = t
        .get("values")
        .ok_or_else(|| ctx.error(&span, "sweep: missing key 'values'"))?;
    let values = match values_v.get_ref() {
        DeValue::Array(a) => {
            let mut out = Vec::new();
            for v in a.iter() {
                out.push(ctx.scalar(v, "values")?);
            }
            out
        }
        _ => vec![ctx.scalar(values_v, "values")?],
    };
    if values.is_empty() {
        return ctx.err(&values_v.span(), "sweep: values is empty");
    }
    Ok(RawSweep { param, values })
}

/// How a parameter's range bounds are read, and its values written back.
#[derive(Clone, Copy)]
enum Unit {
    Rate,
    Bytes,
    Duration,
    Count,
}

fn unit_of(key: &str) -> Unit {
    match key {
        "rate" => Unit::Rate,
        "size" | "send_buffer" | "recv_buffer" => Unit::Bytes,
        "duration" | "start" | "interval" => Unit::Duration,
        _ => Unit::Count,
    }
}

fn parse_unit(unit: Unit, s: &str) -> Result<u64, String> {
    match unit {
        Unit::Rate => match parse_rate(s) {
            Ok(Rate::BitsPerSec(b)) => Ok(b),
            Ok(Rate::Max) => Err("'max' cannot bound a range".into()),
            Err(e) => Err(e.to_string()),
        },
        Unit::Bytes => parse_bytes(s).map_err(|e| e.to_string()),
        Unit::Duration => parse_duration(s)
            .map_err(|e| e.to_string())
            .and_then(|d| u64::try_from(d.as_nanos()).map_err(|_| "too long".to_string())),
        Unit::Count => parse_count(s).map_err(|e| e.to_string()),
    }
}

/// `A..B:STEP` (inclusive) in base units, counted but not yet expanded.
#[derive(Clone, Copy)]
struct RangeSpec {
    start: u64,
    step: u64,
    n: u64,
    unit: Unit,
}

impl RangeSpec {
    fn values(self) -> impl Iterator<Item = String> {
        let suffix = if matches!(self.unit, Unit::Duration) {
            "ns"
        } else {
            ""
        };
        // Never overflows: every value is at most END.
        (0..self.n).map(move |i| format!("{}{suffix}", self.start + i * self.step))
    }
}

/// `A..B:STEP` in the parameter's unit; `None` when the text is not a range.
fn parse_range(unit: Unit, s: &str) -> Option<Result<RangeSpec, String>> {
    let (a, rest) = s.split_once("..")?;
    Some((|| {
        let (b, step) = rest
            .split_once(':')
            .ok_or_else(|| format!("range '{s}' needs a step: START..END:STEP"))?;
        let (a, b, step) = (
            parse_unit(unit, a.trim())?,
            parse_unit(unit, b.trim())?,
            parse_unit(unit, step.trim())?,
        );
        if step == 0 || b < a {
            return Err(format!("range '{s}' needs START <= END and STEP > 0"));
        }
        let n = (b - a) / step + 1;
        if n > MAX_POINTS {
            return Err(format!(
                "range '{s}' has {n} values, more than the limit of {MAX_POINTS}"
            ));
        }
        Ok(RangeSpec {
            start: a,
            step,
            n,
            unit,
        })
    })())
}

/// One value as written: a scalar, or a range standing for many.
enum ValueSpec {
    One(Raw),
    Range(RangeSpec, Span),
}

impl ValueSpec {
    fn count(&self) -> u64 {
        match self {
            ValueSpec::One(_) => 1,
            ValueSpec::Range(r, _) => r.n,
        }
    }
}

/// Reads the ranges among `raws` (strings only) without expanding them; `what` prefixes a
/// bad range's message.
fn value_specs(
    ctx: &Ctx,
    unit: Option<Unit>,
    raws: Vec<Raw>,
    what: &str,
) -> Result<Vec<ValueSpec>, ExperimentError> {
    let mut out = Vec::with_capacity(raws.len());
    for v in raws {
        let range = unit
            .filter(|_| v.kind == Kind::Str)
            .and_then(|u| parse_range(u, &v.text));
        out.push(match range {
            Some(Ok(r)) => ValueSpec::Range(r, v.span),
            Some(Err(m)) => return ctx.err(&v.span, format!("{what}: {m}")),
            None => ValueSpec::One(v),
        });
    }
    Ok(out)
}

/// How many values `specs` stand for, saturating.
fn value_count(specs: &[ValueSpec]) -> u64 {
    specs
        .iter()
        .fold(0u64, |acc, s| acc.saturating_add(s.count()))
}

/// The values themselves; call only once their count is known to be within the caps.
fn expand_values(specs: Vec<ValueSpec>) -> Vec<Raw> {
    let mut out = Vec::new();
    for s in specs {
        match s {
            ValueSpec::One(r) => out.push(r),
            ValueSpec::Range(r, span) => out.extend(r.values().map(|text| Raw {
                text,
                kind: Kind::Str,
                span: span.clone(),
            })),
        }
    }
    out
}

/// One sweep: its parameter, where its values go, and the values (ranges unexpanded).
struct Axis {
    param: String,
    target: Target,
    values: Vec<ValueSpec>,
}

fn sweep_axis(
    ctx: &Ctx,
    s: &RawSweep,
    vars: &BTreeMap<String, Raw>,
    base: &SweepPoint,
) -> Result<Axis, ExperimentError> {
    let p = &s.param;
    let parts: Vec<&str> = p.text.split('.').collect();
    let (target, unit) = match parts.as_slice() {
        ["vars", n] if vars.contains_key(*n) => (Target::Var(n.to_string()), Unit::Count),
        ["vars", n] => return ctx.err(&p.span, format!("sweep: unknown variable '{n}'")),
        ["flow", f, k] => {
            if base.flow(f).is_none() {
                return ctx.err(&p.span, format!("sweep: unknown flow '{f}'"));
            }
            if !FLOW_KEYS.contains(k) || matches!(*k, "name") {
                return ctx.err(
                    &p.span,
                    format!("sweep: '{k}' is not a flow parameter that can vary"),
                );
            }
            (Target::Flow(f.to_string(), k.to_string()), unit_of(k))
        }
        ["host", h, "address"] => {
            if base.host(h).is_none() {
                return ctx.err(&p.span, format!("sweep: unknown host '{h}'"));
            }
            (Target::Host(h.to_string()), Unit::Count)
        }
        _ => {
            return ctx.err(
                &p.span,
                format!(
                    "sweep: param '{}' is not flow.NAME.KEY, host.NAME.address or vars.NAME",
                    p.text
                ),
            )
        }
    };
    Ok(Axis {
        param: p.text.clone(),
        target,
        values: value_specs(ctx, Some(unit), s.values.clone(), "sweep")?,
    })
}

/// The number of sweep points, refused past [`MAX_POINTS`] or when every point's copy of the
/// `definitions` hosts and flows would pass [`MAX_POINT_ENTRIES`]; counted, not expanded.
fn count_points(
    ctx: &Ctx,
    axes: &[Axis],
    sweeps: &[RawSweep],
    definitions: usize,
) -> Result<u64, ExperimentError> {
    let total = axes
        .iter()
        .fold(1u64, |acc, a| acc.saturating_mul(value_count(&a.values)));
    let entries = total.saturating_mul(definitions as u64);
    let message = if total > MAX_POINTS {
        format!(
            "sweeps give {total} points, more than the limit of {MAX_POINTS}: sweep fewer values"
        )
    } else if entries > MAX_POINT_ENTRIES {
        format!(
            "sweeps give {total} points × {definitions} hosts and flows = {entries}, more than \
             the limit of {MAX_POINT_ENTRIES}: sweep fewer values"
        )
    } else {
        return Ok(total);
    };
    Err(ExperimentError {
        line: sweeps.first().map(|s| ctx.line(&s.param.span)),
        message,
    })
}

fn expand_sweeps(
    ctx: &Ctx,
    hosts: &[RawHost],
    flows: &[RawFlow],
    vars: &BTreeMap<String, Raw>,
    sweeps: &[RawSweep],
    base: &SweepPoint,
) -> Result<Vec<SweepPoint>, ExperimentError> {
    let axes = sweeps
        .iter()
        .map(|s| sweep_axis(ctx, s, vars, base))
        .collect::<Result<Vec<_>, _>>()?;
    let total = count_points(ctx, &axes, sweeps, hosts.len() + flows.len())? as usize;
    let axes: Vec<(String, Target, Vec<Raw>)> = axes
        .into_iter()
        .map(|a| (a.param, a.target, expand_values(a.values)))
        .collect();
    let mut points = Vec::with_capacity(total);
    for i in 0..total {
        // Mixed radix, the first sweep outermost.
        let mut rem = i;
        let mut idx = vec![0; axes.len()];
        for (a, slot) in axes.iter().zip(idx.iter_mut()).rev() {
            *slot = rem % a.2.len();
            rem /= a.2.len();
        }
        let labels: Vec<(String, String)> = axes
            .iter()
            .zip(&idx)
            .map(|(a, &j)| (a.0.clone(), a.2[j].text.clone()))
            .collect();
        let overrides: Vec<(Target, Raw)> = axes
            .iter()
            .zip(&idx)
            .map(|(a, &j)| (a.1.clone(), a.2[j].clone()))
            .collect();
        let mut p =
            build_point(ctx, hosts, flows, vars, &overrides).map_err(|e| ExperimentError {
                line: e.line,
                message: format!("{} (at sweep point {})", e.message, label_text(&labels)),
            })?;
        p.labels = labels;
        points.push(p);
    }
    Ok(points)
}

// ---------------------------------------------------------------------------------------------
// The plan.

/// A block as written: its items are names or inline blocks, not yet resolved.
struct RawBlock {
    name: Option<String>,
    kind: BlockKind,
    items: Vec<RawItem>,
    repeat: u32,
    start_ns: u64,
    span: Span,
}

enum RawItem {
    Name(String, Span),
    Inline(RawBlock),
}

fn parse_block(
    ctx: &Ctx,
    t: &DeTable<'_>,
    span: Span,
    what: &str,
    allow_name: bool,
) -> Result<RawBlock, ExperimentError> {
    let mut allowed: Vec<&str> = BLOCK_KEYS.to_vec();
    if !allow_name {
        allowed.retain(|k| *k != "name");
    }
    let nested = ["serial", "parallel", "block"];
    if what == "plan" {
        allowed.push("block");
    }
    let fields = ctx.fields(t, what, &allowed, &nested)?;
    let r = Reader {
        ctx,
        fields,
        what: what.to_string(),
        span: span.clone(),
    };
    let name = if allow_name {
        Some(r.name("name")?)
    } else {
        None
    };
    let what = match &name {
        Some(n) => format!("block '{n}'"),
        None => what.to_string(),
    };
    let (kind, items_v) = match (t.get("serial"), t.get("parallel")) {
        (Some(v), None) => (BlockKind::Serial, v),
        (None, Some(v)) => (BlockKind::Parallel, v),
        (Some(v), Some(_)) => {
            return ctx.err(
                &v.span(),
                format!("{what}: give serial or parallel, not both"),
            )
        }
        (None, None) => {
            return ctx.err(
                &span,
                format!("{what}: needs serial = [...] or parallel = [...]"),
            )
        }
    };
    let arr = items_v.get_ref().as_array().ok_or_else(|| {
        ctx.error(
            &items_v.span(),
            format!("{what}: expected an array of flow or block names"),
        )
    })?;
    if arr.is_empty() {
        return ctx.err(&items_v.span(), format!("{what}: the block is empty"));
    }
    let mut items = Vec::new();
    for v in arr.iter() {
        match v.get_ref() {
            DeValue::String(s) => items.push(RawItem::Name(s.to_string(), v.span())),
            DeValue::Table(it) => {
                items.push(RawItem::Inline(parse_block(ctx, it, v.span(), &what, false)?))
            }
            other => {
                return ctx.err(
                    &v.span(),
                    format!(
                        "{what}: an item is a flow or block name or an inline {{ serial = [...] }}, not {}",
                        other.type_str()
                    ),
                )
            }
        }
    }
    Ok(RawBlock {
        name,
        kind,
        items,
        repeat: r.capped_u32("repeat", MAX_REPEAT)?.unwrap_or(1),
        start_ns: r.duration("start")?.unwrap_or(0),
        span,
    })
}

fn parse_plan(
    ctx: &Ctx,
    t: &DeTable<'_>,
    span: Span,
    flows: &BTreeSet<&str>,
) -> Result<Block, ExperimentError> {
    let root = parse_block(ctx, t, span, "plan", false)?;
    let mut named: BTreeMap<String, RawBlock> = BTreeMap::new();
    if let Some(v) = t.get("block") {
        for (bspan, bt) in ctx.tables(v, "plan.block")? {
            let b = parse_block(ctx, bt, bspan.clone(), "plan.block", true)?;
            let n = b.name.clone().unwrap_or_default();
            if flows.contains(n.as_str()) {
                return ctx.err(&bspan, format!("block '{n}' has the name of a flow"));
            }
            if named.contains_key(&n) {
                return ctx.err(&bspan, format!("block '{n}' is defined twice"));
            }
            named.insert(n, b);
        }
    }
    let mut walk = Walk {
        stack: Vec::new(),
        items: 0,
    };
    resolve(ctx, &root, &named, flows, &mut walk)
}

/// State of [`resolve`]: the named blocks being resolved, so a block reached again through
/// itself is a cycle, and the items made so far, so copies cannot multiply without bound.
struct Walk {
    stack: Vec<String>,
    items: u64,
}

/// Resolves names into flows and copies of named blocks.
fn resolve(
    ctx: &Ctx,
    b: &RawBlock,
    named: &BTreeMap<String, RawBlock>,
    flows: &BTreeSet<&str>,
    walk: &mut Walk,
) -> Result<Block, ExperimentError> {
    walk.items += 1 + b.items.len() as u64;
    if walk.items > MAX_PLAN_ITEMS {
        return ctx.err(
            &b.span,
            format!(
                "the plan has more than {MAX_PLAN_ITEMS} items once named blocks are copied \
                 where they are used, the limit"
            ),
        );
    }
    let mut items = Vec::new();
    for it in &b.items {
        match it {
            RawItem::Inline(inner) => {
                items.push(Item::Block(resolve(ctx, inner, named, flows, walk)?))
            }
            RawItem::Name(n, _) if flows.contains(n.as_str()) => items.push(Item::Flow(n.clone())),
            RawItem::Name(n, span) => {
                let Some(nb) = named.get(n) else {
                    return ctx.err(span, format!("'{n}' is neither a flow nor a block"));
                };
                if let Some(from) = walk.stack.iter().position(|x| x == n) {
                    let path = [&walk.stack[from..], std::slice::from_ref(n)].concat();
                    return ctx.err(span, format!("blocks form a cycle: {}", path.join(" -> ")));
                }
                walk.stack.push(n.clone());
                items.push(Item::Block(resolve(ctx, nb, named, flows, walk)?));
                walk.stack.pop();
            }
        }
    }
    Ok(Block {
        name: b.name.clone(),
        kind: b.kind,
        items,
        repeat: b.repeat,
        start_ns: b.start_ns,
        line: ctx.line(&b.span),
    })
}

/// Refuses a plan whose steps, flow runs or flows in one step, over every repetition and
/// sweep point, pass the caps; computed from the block tree, before anything is expanded.
fn check_plan_size(
    ctx: &Ctx,
    exp: &Reader,
    plan: &Block,
    repeat: u32,
    points: u64,
) -> Result<(), ExperimentError> {
    let s = crate::limits::shape(plan);
    let runs = u64::from(repeat).saturating_mul(points);
    let steps = s.steps.saturating_mul(runs);
    let flow_runs = s.flow_runs.saturating_mul(runs);
    let product = format!("{points} sweep points × repeat {repeat} × ");
    let message = if steps > MAX_STEPS {
        format!(
            "{product}{} steps of the plan = {steps} steps, more than the limit of {MAX_STEPS}",
            s.steps
        )
    } else if flow_runs > MAX_FLOW_RUNS {
        format!(
            "{product}{} flow runs of the plan = {flow_runs} flow runs, more than the limit of \
             {MAX_FLOW_RUNS}",
            s.flow_runs
        )
    } else if s.step_flows > MAX_STEP_FLOWS {
        // The plan alone: repetitions do not widen a step.
        return Err(ExperimentError {
            line: Some(plan.line),
            message: format!(
                "a step of the plan starts {} flows together, more than the limit of \
                 {MAX_STEP_FLOWS} (see Limits in docs/experiments.md)",
                s.step_flows
            ),
        });
    } else {
        return Ok(());
    };
    let line = exp.get("repeat").map_or(plan.line, |r| ctx.line(&r.span));
    Err(ExperimentError {
        line: Some(line),
        message: format!("{message} (see Limits in docs/experiments.md)"),
    })
}

/// Refuses an experiment whose known running time, over every step, passes a day.
fn check_planned_time(
    ctx: &Ctx,
    exp: &Reader,
    plan: &Block,
    repeat: u32,
    points: &[SweepPoint],
) -> Result<(), ExperimentError> {
    let once = points.iter().fold(0u64, |acc, p| {
        acc.saturating_add(crate::limits::planned_ns(plan, p))
    });
    let total = once.saturating_mul(u64::from(repeat));
    if total <= MAX_PLANNED_NS {
        return Ok(());
    }
    // The repeat multiplies; without one, the longest flow is the likely cause.
    let longest = points.first().and_then(|p| {
        p.flows
            .iter()
            .max_by_key(|f| f.known_length_ns().unwrap_or(0))
    });
    let line = match (exp.get("repeat"), longest) {
        (Some(r), _) => ctx.line(&r.span),
        (None, Some(f)) => f.line,
        (None, None) => plan.line,
    };
    Err(ExperimentError {
        line: Some(line),
        message: format!(
            "the plan runs {} in all ({} sweep points × repeat {repeat}), more than the limit \
             of {}: shorten the flows or repeat less",
            hours(total),
            points.len(),
            hours(MAX_PLANNED_NS)
        ),
    })
}

// ---------------------------------------------------------------------------------------------
// The search.

fn parse_search(
    ctx: &Ctx,
    v: &Spanned<DeValue<'_>>,
    vars: &BTreeMap<String, Raw>,
    base: &SweepPoint,
) -> Result<SearchSpec, ExperimentError> {
    let t = ctx.table(v, "search")?;
    let raw = ctx.fields(t, "search", SEARCH_KEYS, &["flows", "bursts", "loads"])?;
    let r = Reader {
        ctx,
        fields: subst_all(ctx, &raw, vars)?,
        what: "search".into(),
        span: v.span(),
    };
    // Lists: flows, bursts, loads (arrays, or for bursts/loads a range string).
    let list = |k: &str, unit: Option<Unit>| -> Result<Option<(Vec<Raw>, Span)>, ExperimentError> {
        let Some(lv) = t.get(k) else { return Ok(None) };
        let items: Vec<Raw> = match lv.get_ref() {
            DeValue::Array(a) => a
                .iter()
                .map(|x| ctx.scalar(x, k).and_then(|x| substitute(ctx, &x, vars, k)))
                .collect::<Result<_, _>>()?,
            _ => vec![substitute(ctx, &ctx.scalar(lv, k)?, vars, k)?],
        };
        let specs = value_specs(ctx, unit, items, &format!("search {k}"))?;
        match value_count(&specs) {
            0 => ctx.err(&lv.span(), format!("search {k}: empty")),
            n if n > MAX_POINTS => ctx.err(
                &lv.span(),
                format!("search {k}: {n} values, more than the limit of {MAX_POINTS}"),
            ),
            _ => Ok(Some((expand_values(specs), lv.span()))),
        }
    };
    let mut flows: Vec<String> = Vec::new();
    if let Some(f) = r.string("flow")? {
        flows.push(f);
    }
    if let Some((fs, _)) = list("flows", None)? {
        flows.extend(fs.into_iter().map(|x| x.text));
    }
    if flows.is_empty() {
        return ctx.err(
            &v.span(),
            "search: name the flow(s) it varies: flow = \"...\" or flows = [...]",
        );
    }
    for f in &flows {
        if base.flow(f).is_none() {
            return ctx.err(&v.span(), format!("search: unknown flow '{f}'"));
        }
    }
    let kind_raw = r.required("kind")?;
    let need_rate = |k: &str| -> Result<u64, ExperimentError> {
        r.required(k)?;
        r.fixed_rate(k).map(|x| x.unwrap_or(0))
    };
    let kind = match kind_raw.text.as_str() {
        "rfc2544-throughput" => {
            let max_bps = need_rate("max")?;
            let min_bps = r.fixed_rate("min")?.unwrap_or(1_000);
            if min_bps > max_bps {
                return r.err(r.required("max")?, "max", "is below min");
            }
            let resolution_bps = r
                .fixed_rate("resolution")?
                .unwrap_or_else(|| (max_bps / 1000).max(1));
            let loss_tolerance = r.float("loss")?.unwrap_or(0.0);
            if !(0.0..1.0).contains(&loss_tolerance) {
                return r.err(r.required("loss")?, "loss", "a loss ratio is in [0, 1)");
            }
            SearchKind::Rfc2544Throughput {
                min_bps,
                max_bps,
                resolution_bps,
                loss_tolerance,
            }
        }
        "rfc2544-back-to-back" => {
            let line_rate_bps = need_rate("rate")?;
            let min_packets = r.count("min")?.unwrap_or(1).max(1);
            let max_packets = r.count("max")?.unwrap_or(100_000);
            if min_packets > max_packets {
                return r.err(r.required("max")?, "max", "is below min");
            }
            SearchKind::BackToBack {
                line_rate_bps,
                min_packets,
                max_packets,
                resolution_packets: r.count("resolution")?.unwrap_or(1).max(1),
                repeat: r.capped_u32("repeat", MAX_REPEAT)?.unwrap_or(50),
            }
        }
        "rfc2544-loss" => {
            let step_pct = r.float("step")?.unwrap_or(10.0);
            if !(step_pct > 0.0 && step_pct <= 100.0) {
                return r.err(r.required("step")?, "step", "a step is in (0, 100] %");
            }
            SearchKind::LossVsLoad {
                max_bps: need_rate("max")?,
                step_pct,
            }
        }
        "offered-load" => {
            let loads = match list("loads", Some(Unit::Count))? {
                None => (1..=10).map(|i| f64::from(i) * 10.0).collect(),
                Some((ls, _)) => {
                    let mut out = Vec::new();
                    for l in ls {
                        match l.text.trim().trim_end_matches('%').parse::<f64>() {
                            Ok(x) if x > 0.0 && x <= 100.0 => out.push(x),
                            _ => {
                                return ctx.err(
                                    &l.span,
                                    format!("search loads: '{}' is not a load in (0, 100] %", l.text),
                                )
                            }
                        }
                    }
                    out
                }
            };
            for f in &flows {
                if base.flow(f).and_then(|x| x.rate_bps).is_none() {
                    return ctx.err(
                        &v.span(),
                        format!("search: flow '{f}' needs a rate in bit/s: it is its 100 % load"),
                    );
                }
            }
            SearchKind::OfferedLoad { loads_pct: loads }
        }
        "burst-size" => {
            let Some((bs, _)) = list("bursts", Some(Unit::Bytes))? else {
                return ctx.err(&v.span(), "search: burst-size needs bursts = [...] or \"START..END:STEP\"");
            };
            let mut bursts_bytes = Vec::new();
            for b in bs {
                match parse_bytes(&b.text) {
                    Ok(n) if n > 0 => bursts_bytes.push(n),
                    Ok(_) => return ctx.err(&b.span, "search bursts: a burst is above 0 B"),
                    Err(e) => return ctx.err(&b.span, format!("search bursts: {e}")),
                }
            }
            let rate_bps = need_rate("rate")?;
            let peak_bps = need_rate("peak")?;
            let capacity_bps = need_rate("capacity")?;
            if flows.iter().any(|f| base.flow(f).is_some_and(|x| x.protocol != Protocol::Udp)) {
                return ctx.err(&v.span(), "search: burst-size sends bursts, which needs udp flows");
            }
            SearchKind::BurstSize {
                rate_bps,
                peak_bps,
                capacity_bps,
                bursts_bytes,
            }
        }
        other => {
            return r.err(
                kind_raw,
                "kind",
                format!("'{other}' is not rfc2544-throughput, rfc2544-back-to-back, rfc2544-loss, offered-load or burst-size"),
            )
        }
    };
    let spec = SearchSpec {
        kind,
        flows,
        trial_ns: r.duration("trial")?,
        line: ctx.line(&v.span()),
    };
    check_search_size(ctx, &v.span(), &spec, base)?;
    Ok(spec)
}

/// Refuses a search with more than [`MAX_TRIALS`] trials, or more than a day of them.
fn check_search_size(
    ctx: &Ctx,
    span: &Span,
    spec: &SearchSpec,
    base: &SweepPoint,
) -> Result<(), ExperimentError> {
    let trials = crate::limits::search_trials(&spec.kind);
    if trials > MAX_TRIALS {
        return ctx.err(
            span,
            format!("search: up to {trials} trials, more than the limit of {MAX_TRIALS}: raise the step or resolution, or repeat less"),
        );
    }
    let trial_ns = spec.trial_ns.unwrap_or_else(|| {
        spec.flows
            .iter()
            .filter_map(|n| base.flow(n).and_then(Flow::known_length_ns))
            .max()
            .unwrap_or(0)
    });
    let total = trial_ns.saturating_mul(trials);
    if total > MAX_PLANNED_NS {
        return ctx.err(
            span,
            format!(
                "search: up to {trials} trials × {:.3} s = {}, more than the limit of {}: shorten the trials",
                trial_ns as f64 / 1e9,
                hours(total),
                hours(MAX_PLANNED_NS)
            ),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const BASE: &str = r#"
[experiment]
name = "t"
seed = 7

[vars]
a1 = "10.0.0.1"

[[host]]
name = "h1"
address = "${a1}"

[[host]]
name = "h2"
address = "[fd00::2]:9000"

[[flow]]
name = "f1"
from = "h1"
to = "h2"
rate = "2M"
size = "500B"
duration = "5s"
"#;

    fn err_of(text: &str) -> ExperimentError {
        match load(text) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e,
        }
    }

    /// The line of the first occurrence of `needle`.
    fn line_with(text: &str, needle: &str) -> usize {
        line_of(text, text.find(needle).unwrap())
    }

    #[test]
    fn a_tcp_preset_runs_over_tcp_unless_the_file_says_udp() {
        let tcp = BASE.replacen("rate = \"2M\"", "traffic = \"preset:aquila-flow3\"", 1);
        let e = load(&tcp).unwrap();
        assert_eq!(e.points[0].flow("f1").unwrap().protocol, Protocol::Tcp);
        let udp = tcp.replacen("duration", "protocol = \"udp\"\nduration", 1);
        let e = load(&udp).unwrap();
        assert_eq!(e.points[0].flow("f1").unwrap().protocol, Protocol::Udp);
        let voip = BASE.replacen("rate = \"2M\"", "traffic = \"preset:aquila-flow1\"", 1);
        let e = load(&voip).unwrap();
        assert_eq!(e.points[0].flow("f1").unwrap().protocol, Protocol::Udp);
    }

    #[test]
    fn loads_a_minimal_file() {
        let e = load(BASE).unwrap();
        assert_eq!(e.name, "t");
        assert_eq!(e.seed, 7);
        assert_eq!(e.repeat, 1);
        assert_eq!(e.points.len(), 1);
        let p = &e.points[0];
        assert_eq!(p.host("h1").unwrap().address, "10.0.0.1:9470");
        assert_eq!(p.host("h2").unwrap().address, "[fd00::2]:9000");
        let f = p.flow("f1").unwrap();
        assert_eq!(f.rate_bps, Some(2_000_000));
        assert_eq!(f.size, 500);
        assert_eq!(f.duration_ns, Some(5_000_000_000));
        assert_eq!(f.protocol, Protocol::Udp);
        assert_eq!(f.direction, Direction::Oneway);
        assert_eq!(e.plan.kind, BlockKind::Parallel);
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, &str, &str)] = &[
            ("to = \"h2\"", "to = \"h9\"", "unknown host 'h9'"),
            ("rate = \"2M\"", "rate = \"2Q\"", "invalid rate"),
            ("size = \"500B\"", "size = \"10B\"", "outside"),
            (
                "duration = \"5s\"",
                "duration = \"5 parsecs\"",
                "invalid duration",
            ),
            (
                "rate = \"2M\"",
                "rate = \"2M\"\ntraffic = \"poisson:pps=oops\"",
                "traffic",
            ),
            (
                "rate = \"2M\"",
                "rate = \"2M\"\nmode = \"sideways\"",
                "not oneway",
            ),
            (
                "rate = \"2M\"",
                "rate = \"2M\"\ncolour = \"red\"",
                "unknown key 'colour'",
            ),
            (
                "address = \"${a1}\"",
                "address = \"${a9}\"",
                "unknown variable 'a9'",
            ),
            (
                "address = \"${a1}\"",
                "address = \"10.0.0.1:99999\"",
                "not HOST[:PORT]",
            ),
            ("rate = \"2M\"", "rate = \"2M\"\ndscp = \"af99\"", "dscp"),
            (
                "rate = \"2M\"",
                "rate = \"2M\"\ntraffic = \"rr:request=64,response=1k\"",
                "flowlab test",
            ),
            (
                "rate = \"2M\"",
                "rate = \"2M\"\nmode = \"loopback\"\nprotocol = \"tcp\"\ntraffic = \"poisson:pps=10,size=100\"",
                "oneway or reverse",
            ),
        ];
        for (from, to, want) in cases {
            let text = BASE.replacen(from, to, 1);
            let e = err_of(&text);
            let needle = to.lines().last().unwrap();
            assert_eq!(e.line, Some(line_with(&text, needle)), "{e} for {to}");
            assert!(e.message.contains(want), "{e} should mention {want}");
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn duplicates_and_missing_sections() {
        let dup = format!("{BASE}\n[[flow]]\nname = \"f1\"\nfrom = \"h1\"\nto = \"h2\"\n");
        let e = err_of(&dup);
        assert!(e.message.contains("defined twice"), "{e}");
        assert_eq!(e.line, Some(dup.lines().count() - 3));
        let dup_host = BASE.replace("name = \"h2\"", "name = \"h1\"");
        assert!(err_of(&dup_host)
            .message
            .contains("host 'h1' is defined twice"));
        assert!(err_of("[experiment]\nname = \"x\"\n")
            .message
            .contains("no [[flow]]"));
        assert!(err_of("[[flow]]\nname = \"x\"\n")
            .message
            .contains("[experiment]"));
        let e = err_of("[experiment]\nname = \"x\"\n[wat]\n");
        assert_eq!(e.line, Some(3));
        let e = err_of("[experiment\nname = 1");
        assert_eq!(e.line, Some(1));
    }

    #[test]
    fn plans_blocks_and_detects_cycles() {
        let text = format!(
            "{BASE}\n[[flow]]\nname = \"f2\"\nfrom = \"h2\"\nto = \"h1\"\nduration = \"1s\"\n\
             [plan]\nserial = [\"a\", {{ parallel = [\"f1\", \"f2\"], repeat = 2 }}]\n\
             [[plan.block]]\nname = \"a\"\nserial = [\"f1\", \"f2\"]\nstart = \"1s\"\n"
        );
        let e = load(&text).unwrap();
        assert_eq!(e.plan.items.len(), 2);
        let cyc = format!(
            "{BASE}\n[plan]\nserial = [\"a\"]\n[[plan.block]]\nname = \"a\"\nserial = [\"b\"]\n\
             [[plan.block]]\nname = \"b\"\nparallel = [\"f1\", \"a\"]\n"
        );
        let err = err_of(&cyc);
        assert!(err.message.contains("cycle: a -> b -> a"), "{err}");
        assert_eq!(
            err.line,
            Some(line_with(&cyc, "parallel = [\"f1\", \"a\"]"))
        );
        let unknown = format!("{BASE}\n[plan]\nserial = [\"f1\", \"nope\"]\n");
        let err = err_of(&unknown);
        assert!(err.message.contains("'nope' is neither"));
        assert_eq!(err.line, Some(line_with(&unknown, "serial = [")));
        let both = format!("{BASE}\n[plan]\nserial = [\"f1\"]\nparallel = [\"f1\"]\n");
        assert!(err_of(&both).message.contains("not both"));
    }

    #[test]
    fn sweeps_expand_and_validate_every_point() {
        let text = format!(
            "{BASE}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1M..3M:1M\"\n\
             [[sweep]]\nparam = \"flow.f1.size\"\nvalues = [100, \"1KiB\"]\n"
        );
        let e = load(&text).unwrap();
        assert_eq!(e.points.len(), 6);
        let rates: Vec<_> = e
            .points
            .iter()
            .map(|p| p.flows[0].rate_bps.unwrap())
            .collect();
        assert_eq!(rates, [1, 1, 2, 2, 3, 3].map(|x| x * 1_000_000));
        assert_eq!(e.points[1].flows[0].size, 1024);
        assert_eq!(
            e.points[1].labels,
            vec![
                ("flow.f1.rate".to_string(), "1000000".to_string()),
                ("flow.f1.size".to_string(), "1KiB".to_string())
            ]
        );
        // A bad value in the last point is found at load, at its own line.
        let bad =
            format!("{BASE}\n[[sweep]]\nparam = \"flow.f1.size\"\nvalues = [100,\n  \"7B\"]\n");
        let err = err_of(&bad);
        assert_eq!(err.line, Some(line_with(&bad, "\"7B\"")));
        assert!(err.message.contains("sweep point"), "{err}");
        let var = format!(
            "{BASE}\n[[sweep]]\nparam = \"vars.a1\"\nvalues = [\"10.0.0.5\", \"10.0.0.6\"]\n"
        );
        let e = load(&var).unwrap();
        assert_eq!(e.points[1].hosts[0].address, "10.0.0.6:9470");
        for (param, want) in [
            ("flow.zz.rate", "unknown flow"),
            ("vars.zz", "unknown variable"),
            ("flow.f1.colour", "not a flow parameter"),
            ("whatever", "is not flow.NAME.KEY"),
        ] {
            let t = format!("{BASE}\n[[sweep]]\nparam = \"{param}\"\nvalues = [1]\n");
            assert!(err_of(&t).message.contains(want), "{param}");
        }
        let huge = format!("{BASE}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1..1G:1\"\n");
        assert!(err_of(&huge).message.contains("more than"));
    }

    #[test]
    fn searches_are_validated() {
        let s = format!(
            "{BASE}\n[search]\nkind = \"rfc2544-throughput\"\nflow = \"f1\"\nmax = \"100M\"\n\
             resolution = \"100k\"\ntrial = \"2s\"\n"
        );
        let e = load(&s).unwrap();
        let sp = e.search.unwrap();
        assert_eq!(sp.trial_ns, Some(2_000_000_000));
        assert!(matches!(
            sp.kind,
            SearchKind::Rfc2544Throughput {
                max_bps: 100_000_000,
                ..
            }
        ));
        let bad = s.replace("rfc2544-throughput", "fastest");
        assert!(err_of(&bad).message.contains("is not rfc2544"));
        let nof = s.replace("flow = \"f1\"", "flow = \"f9\"");
        assert!(err_of(&nof).message.contains("unknown flow 'f9'"));
        let with_sweep = format!("{s}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = [1]\n");
        assert!(err_of(&with_sweep).message.contains("cannot also have"));
    }

    /// Loads `text`, expecting an error that names `want` at the line of `needle`, in well
    /// under a second: a cap checked after expanding would hang here instead.
    fn assert_capped(text: &str, needle: &str, want: &str) {
        let t0 = std::time::Instant::now();
        let e = err_of(text);
        assert!(
            t0.elapsed().as_secs_f64() < 2.0,
            "{e}: took {:?}",
            t0.elapsed()
        );
        assert!(e.message.contains(want), "{e} should mention {want}");
        assert_eq!(e.line, Some(line_with(text, needle)), "{e}");
        assert!(!e.to_string().contains('\n'));
    }

    #[test]
    fn repeats_are_capped() {
        let huge = BASE.replace("seed = 7", "seed = 7\nrepeat = 4000000000");
        assert_capped(&huge, "repeat =", "4000000000 is above the limit of 10000");
        let block = format!("{BASE}\n[plan]\nserial = [\"f1\"]\nrepeat = 20000\n");
        assert_capped(&block, "repeat = 20000", "above the limit of 10000");
        let sockets = BASE.replace("size = \"500B\"", "size = \"500B\"\nflows = 5000");
        assert_capped(&sockets, "flows = 5000", "above the limit of 1024");
    }

    #[test]
    fn sweep_values_are_counted_before_expanding() {
        let many: Vec<String> = (0..200_000).map(|i| i.to_string()).collect();
        let literal = format!(
            "{BASE}\n[[sweep]]\nparam = \"flow.f1.size\"\nvalues = [{}]\n",
            many.join(",")
        );
        assert_capped(
            &literal,
            "param = ",
            "200000 points, more than the limit of 10000",
        );
        let ranges = format!(
            "{BASE}\n[[sweep]]\nparam = \"flow.f1.size\"\nvalues = [\"100..9000:1\", \"100..9000:1\"]\n"
        );
        assert_capped(&ranges, "param = ", "17802 points");
        let nested = format!(
            "{BASE}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1M..100M:1M\"\n\
             [[sweep]]\nparam = \"flow.f1.size\"\nvalues = \"100..199:1\"\n\
             [[sweep]]\nparam = \"flow.f1.duration\"\nvalues = \"1s..100s:1s\"\n"
        );
        assert_capped(&nested, "param = ", "1000000 points");
    }

    #[test]
    fn steps_and_flow_runs_are_capped_as_products() {
        let steps = format!(
            "{}\n[[sweep]]\nparam = \"flow.f1.rate\"\nvalues = \"1M..20M:1M\"\n",
            BASE.replace("seed = 7", "seed = 7\nrepeat = 10000")
                .replace("duration = \"5s\"", "duration = \"10ms\"")
        );
        assert_capped(
            &steps,
            "repeat = 10000",
            "= 200000 steps, more than the limit of 100000",
        );
        let runs = format!(
            "{}\n[plan]\nparallel = [{}]\n",
            BASE.replace("seed = 7", "seed = 7\nrepeat = 10000")
                .replace("duration = \"5s\"", "duration = \"1s\""),
            vec!["\"f1\""; 30].join(", ")
        );
        assert_capped(&runs, "repeat = 10000", "300000 flow runs");
        let wide = format!("{BASE}\n[plan]\nparallel = [{{ serial = [\"f1\"], repeat = 2000 }}]\n");
        assert_capped(&wide, "[plan]", "starts 2000 flows together");
    }

    #[test]
    fn named_blocks_cannot_multiply_without_bound() {
        let mut text = format!("{BASE}\n[plan]\nserial = [\"b0\"]\n");
        for i in 0..40 {
            let next = i + 1;
            text.push_str(&format!(
                "[[plan.block]]\nname = \"b{i}\"\nserial = [\"b{next}\", \"b{next}\"]\n"
            ));
        }
        text.push_str("[[plan.block]]\nname = \"b40\"\nserial = [\"f1\"]\n");
        let e = err_of(&text);
        assert!(e.message.contains("more than 100000 items"), "{e}");
    }

    #[test]
    fn planned_time_and_definitions_are_capped() {
        let long = BASE.replace("duration = \"5s\"", "duration = \"25h\"");
        assert_capped(&long, "[[flow]]", "25.0 h in all");
        let rep = BASE
            .replace("seed = 7", "seed = 7\nrepeat = 9000")
            .replace("duration = \"5s\"", "duration = \"10s\"");
        assert_capped(&rep, "repeat = 9000", "25.0 h in all");
        let mut hosts = BASE.to_string();
        for i in 0..1001 {
            hosts.push_str(&format!("[[host]]\nname = \"x{i}\"\naddress = \"h{i}\"\n"));
        }
        assert_capped(
            &hosts,
            "[[host]]\nname = \"x998\"",
            "more than 1000 [[host]] tables",
        );
    }

    #[test]
    fn search_trials_are_capped() {
        let search = |body: &str| format!("{BASE}\n[search]\nflow = \"f1\"\n{body}\n");
        let b2b =
            search("kind = \"rfc2544-back-to-back\"\nrate = \"1G\"\nmax = 100000\nrepeat = 10000");
        assert_capped(
            &b2b,
            "[search]",
            "190000 trials, more than the limit of 10000",
        );
        let loss = search("kind = \"rfc2544-loss\"\nmax = \"1G\"\nstep = 0.001");
        assert_capped(&loss, "[search]", "100002 trials");
        let long = search("kind = \"rfc2544-throughput\"\nmax = \"1G\"\ntrial = \"10h\"");
        assert_capped(&long, "[search]", "more than the limit of 24.0 h");
        let loads = search(&format!(
            "kind = \"offered-load\"\nloads = [{}]",
            vec!["\"1..100:1\""; 101].join(", ")
        ));
        assert_capped(
            &loads,
            "loads = ",
            "10100 values, more than the limit of 10000",
        );
    }

    #[test]
    fn the_examples_load() {
        for (name, text) in [
            (
                "three-sources",
                include_str!("../../../examples/experiments/three-sources.toml"),
            ),
            (
                "five-pairs",
                include_str!("../../../examples/experiments/five-pairs.toml"),
            ),
            (
                "burst-size",
                include_str!("../../../examples/experiments/burst-size.toml"),
            ),
            // Every example stays within the caps of crate::limits.
            (
                "aquila-mix",
                include_str!("../../../examples/experiments/aquila-mix.toml"),
            ),
            (
                "lab-bottleneck-rfc2544",
                include_str!("../../../examples/experiments/lab-bottleneck-rfc2544.toml"),
            ),
            (
                "lab-three-offered-load",
                include_str!("../../../examples/experiments/lab-three-offered-load.toml"),
            ),
            (
                "lab-three-parallel",
                include_str!("../../../examples/experiments/lab-three-parallel.toml"),
            ),
        ] {
            let e = load(text).unwrap_or_else(|err| panic!("{name}: {err}"));
            assert_eq!(e.name, name);
        }
    }

    #[test]
    fn addresses_normalise() {
        assert_eq!(normalise_address("h").unwrap(), "h:9470");
        assert_eq!(normalise_address("h:1").unwrap(), "h:1");
        assert_eq!(normalise_address("fd00::1").unwrap(), "[fd00::1]:9470");
        assert_eq!(normalise_address("[fd00::1]").unwrap(), "[fd00::1]:9470");
        for bad in [
            "", "a b", "h:", ":1", "h:0", "[x", "[]:1", "a:b:c", "[::1]x",
        ] {
            assert!(normalise_address(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        /// Whatever the text, loading returns (never panics), and errors are one line.
        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
            if let Err(e) = load(&s) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }

        /// Mutating the base file anywhere never panics.
        #[test]
        fn mutated_files_never_panic(pos in 0usize..400, junk in "[\\[\\]{}=\",.$a-z0-9 \n]{0,8}") {
            let mut t = BASE.to_string();
            let p = pos.min(t.len());
            if t.is_char_boundary(p) {
                t.insert_str(p, &junk);
            }
            if let Err(e) = load(&t) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
    }
}
