//! Experiment files: TOML text → a validated [`Experiment`], or an [`ExperimentError`] naming
//! the line.
//!
//! The file is read as a spanned tree (`flowlab-spanned`), so every later check (an unknown
//! host, a cycle between blocks, a bad rate in the third sweep value) still points at the line
//! that caused it. Variables are substituted into string values first, sweeps are expanded
//! into points, and every point is validated before anything runs: a typo in the last point
//! must not be found an hour into the experiment.

mod blocks;
mod point;
mod search;
mod sweep;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use flowlab_spanned::{FileError, Item as TomlItem, Reader};
use flowlab_spec::TestSpec;

use crate::limits::{
    hours, MAX_DEFINITIONS, MAX_FLOW_RUNS, MAX_PLANNED_NS, MAX_REPEAT, MAX_STEPS, MAX_STEP_FLOWS,
};

pub use point::DEFAULT_AGENT_PORT;

/// A file that failed to load: one line of message and, where known, the line it is about.
pub type ExperimentError = FileError;

/// A host running an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub name: String,
    /// `HOST:PORT` (IPv6 in brackets), the default port added when the file gave none.
    pub address: String,
    pub line: usize,
}

/// One flow: the test it runs and what only an experiment knows about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    pub name: String,
    /// The host that runs the flowlab client (and sends, for `oneway`).
    pub from: String,
    /// The host whose agent serves the test.
    pub to: String,
    /// Offset from the start of its step.
    pub start_ns: u64,
    pub line: usize,
    /// The test, validated; its seed is set per step by the planner.
    pub spec: TestSpec,
}

impl Flow {
    /// How long the flow runs, when that is known before running it: its duration, or its
    /// count at a constant rate. Needed to lay a serial block out inside a parallel one.
    pub fn known_length_ns(&self) -> Option<u64> {
        let s = &self.spec;
        let by_count = match (s.count, s.rate_bps, &s.traffic) {
            (Some(n), Some(r), None) => {
                let ns = u128::from(n) * u128::from(s.size) * 8 * 1_000_000_000 / u128::from(r);
                u64::try_from(ns).ok()
            }
            _ => None,
        };
        match (s.duration_ns, by_count) {
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

const SECTIONS: &[&str] = &[
    "experiment",
    "vars",
    "host",
    "flow",
    "plan",
    "sweep",
    "search",
];
const EXPERIMENT_KEYS: &[&str] = &["name", "description", "seed", "repeat"];

/// `[vars]`: scalars by name, not substituted themselves.
type Vars = BTreeMap<String, TomlItem>;

/// `[experiment]`, read.
struct Header {
    name: String,
    description: Option<String>,
    seed: u64,
    repeat: u32,
    /// Where `repeat` is written: the likely cause when the whole experiment is too big.
    repeat_line: Option<usize>,
}

/// Parses and validates an experiment file's text.
pub fn load(text: &str) -> Result<Experiment, ExperimentError> {
    let root = flowlab_spanned::parse(text)?;
    let doc = Reader::of(&root, "")?;
    doc.only_sections(SECTIONS)?;
    let vars = read_vars(&doc)?;
    let header = read_header(&doc, &vars)?;
    let hosts = doc.tables("host")?;
    let flows = doc.tables("flow")?;
    if flows.is_empty() {
        return Err(FileError::new(
            None,
            "no [[flow]]: an experiment needs at least one flow",
        ));
    }
    for (what, tables) in [("[[host]]", &hosts), ("[[flow]]", &flows)] {
        if let Some(t) = tables.get(MAX_DEFINITIONS) {
            return Err(FileError::at(
                t.line(),
                format!("more than {MAX_DEFINITIONS} {what} tables, the limit"),
            ));
        }
    }
    let sweeps = sweep::read_sweeps(&doc)?;

    // The base point validates names and gives the plan its flow set.
    let definitions = point::Definitions {
        hosts: &hosts,
        flows: &flows,
        vars: &vars,
    };
    let base = definitions.point(&[])?;
    let flow_names: BTreeSet<&str> = base.flows.iter().map(|f| f.name.as_str()).collect();
    let plan = match doc.get("plan") {
        Some(v) => blocks::read_plan(&Reader::of(v, "plan")?, &flow_names)?,
        None => all_in_parallel(&base),
    };
    let points = sweep::expand(&definitions, &sweeps, &base)?;
    check_plan_size(&header, &plan, points.len() as u64)?;
    check_planned_time(&header, &plan, &points)?;
    for p in &points {
        crate::plan::expand(&plan, p).map_err(|(line, message)| {
            let e = FileError::at(line, message);
            match p.labels.is_empty() {
                true => e,
                false => e.note(format!("(at sweep point {})", label_text(&p.labels))),
            }
        })?;
    }
    let search = match doc.get("search") {
        None => None,
        Some(v) if !sweeps.is_empty() => {
            return Err(v.error(
                "search: a file with a [search] cannot also have [[sweep]]s (the search chooses the values)",
            ))
        }
        Some(v) => Some(search::read_search(v, &vars, &base)?),
    };
    Ok(Experiment {
        name: header.name,
        description: header.description,
        seed: header.seed,
        repeat: header.repeat,
        plan,
        points,
        search,
    })
}

fn read_vars(doc: &Reader) -> Result<Vars, FileError> {
    let Some(v) = doc.get("vars") else {
        return Ok(Vars::new());
    };
    let vars = Reader::of(v, "vars")?;
    let mut out = Vars::new();
    for (k, item) in vars.table().iter() {
        if item.scalar_text().is_none() {
            return Err(item.error(format!(
                "vars {}: expected a string, number or boolean, found {}",
                k.name,
                item.type_name()
            )));
        }
        out.insert(k.name.clone(), item.clone());
    }
    Ok(out)
}

fn read_header(doc: &Reader, vars: &Vars) -> Result<Header, FileError> {
    let item = doc
        .get("experiment")
        .ok_or_else(|| FileError::new(None, "missing [experiment] section (name, seed, repeat)"))?;
    let table = substitute_table(Reader::of(item, "experiment")?.table(), vars)?;
    let exp = Reader::new(&table, item.line(), "experiment");
    exp.only(EXPERIMENT_KEYS)?;
    Ok(Header {
        name: read_name(&exp, "name")?,
        description: exp.string("description")?.map(str::to_string),
        seed: exp.uint("seed")?.unwrap_or(0),
        repeat: capped(&exp, "repeat", MAX_REPEAT)?.unwrap_or(1),
        repeat_line: exp.get("repeat").map(TomlItem::line),
    })
}

/// Without `[plan]`: every flow at once, once.
fn all_in_parallel(base: &SweepPoint) -> Block {
    Block {
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
    }
}

fn label_text(labels: &[(String, String)]) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A name: letters, digits, `-` and `_`.
fn read_name(r: &Reader, key: &str) -> Result<String, FileError> {
    let name = r.required_string(key)?;
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        let item = r.required(key)?;
        return Err(r.error(
            item,
            key,
            format!("'{name}' is not a name (letters, digits, - and _)"),
        ));
    }
    Ok(name.to_string())
}

/// A count from 1 to `max`, a cap on work (see [`crate::limits`]).
fn capped(r: &Reader, key: &str, max: u32) -> Result<Option<u32>, FileError> {
    let Some(n) = r.uint(key)? else {
        return Ok(None);
    };
    let item = r.required(key)?;
    match u32::try_from(n) {
        Ok(0) | Err(_) => Err(r.error(item, key, "must be 1 to 4294967295")),
        Ok(n) if n > max => Err(r.error(
            item,
            key,
            format!("{n} is above the limit of {max} (see Limits in docs/experiments.md)"),
        )),
        Ok(n) => Ok(Some(n)),
    }
}

/// Replaces every `${name}` in a string by its variable; `$$` is a literal `$`.
fn substitute(item: &TomlItem, vars: &Vars, key: &str) -> Result<TomlItem, FileError> {
    let Some(text) = item.as_str().filter(|t| t.contains('$')) else {
        return Ok(item.clone());
    };
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(a) = after.strip_prefix('$') {
            out.push('$');
            rest = a;
        } else if let Some(a) = after.strip_prefix('{') {
            let Some(end) = a.find('}') else {
                return Err(item.error(format!("{key}: '${{' without a closing '}}'")));
            };
            let name = &a[..end];
            match vars.get(name).and_then(TomlItem::scalar_text) {
                Some(v) => out.push_str(&v),
                None => {
                    return Err(item.error(format!(
                        "{key}: unknown variable '{name}' (define it in [vars])"
                    )))
                }
            }
            rest = &a[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(TomlItem::string(item.line(), out))
}

/// A copy of `table` with variables substituted into its string values.
fn substitute_table(
    table: &flowlab_spanned::Table,
    vars: &Vars,
) -> Result<flowlab_spanned::Table, FileError> {
    let mut out = table.clone();
    for (k, v) in out.values_mut() {
        *v = substitute(v, vars, &k.name)?;
    }
    Ok(out)
}

/// Refuses a plan whose steps, flow runs or flows in one step, over every repetition and
/// sweep point, pass the caps; computed from the block tree, before anything is expanded.
fn check_plan_size(h: &Header, plan: &Block, points: u64) -> Result<(), FileError> {
    let s = crate::limits::shape(plan);
    let repeat = h.repeat;
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
        return Err(FileError::at(
            plan.line,
            format!(
                "a step of the plan starts {} flows together, more than the limit of \
                 {MAX_STEP_FLOWS} (see Limits in docs/experiments.md)",
                s.step_flows
            ),
        ));
    } else {
        return Ok(());
    };
    Err(FileError::at(
        h.repeat_line.unwrap_or(plan.line),
        format!("{message} (see Limits in docs/experiments.md)"),
    ))
}

/// Refuses an experiment whose known running time, over every step, passes a day.
fn check_planned_time(h: &Header, plan: &Block, points: &[SweepPoint]) -> Result<(), FileError> {
    let once = points.iter().fold(0u64, |acc, p| {
        acc.saturating_add(crate::limits::planned_ns(plan, p))
    });
    let total = once.saturating_mul(u64::from(h.repeat));
    if total <= MAX_PLANNED_NS {
        return Ok(());
    }
    // The repeat multiplies; without one, the longest flow is the likely cause.
    let longest = points.first().and_then(|p| {
        p.flows
            .iter()
            .max_by_key(|f| f.known_length_ns().unwrap_or(0))
    });
    let line = match (h.repeat_line, longest) {
        (Some(l), _) => l,
        (None, Some(f)) => f.line,
        (None, None) => plan.line,
    };
    Err(FileError::at(
        line,
        format!(
            "the plan runs {} in all ({} sweep points × repeat {}), more than the limit \
             of {}: shorten the flows or repeat less",
            hours(total),
            points.len(),
            h.repeat,
            hours(MAX_PLANNED_NS)
        ),
    ))
}
