//! `[[sweep]]`s: where each sweep's values go, counted before anything is expanded, then one
//! [`SweepPoint`] per combination.

use flowlab_spanned::{
    count_values, expand_values, FileError, Item as TomlItem, Reader, SweepValue, Unit,
};

use super::point::{Definitions, FLOW_KEYS};
use super::{label_text, SweepPoint};
use crate::limits::{MAX_POINTS, MAX_POINT_ENTRIES};

/// Where a sweep value goes.
#[derive(Debug, Clone)]
pub(super) enum Target {
    Var(String),
    /// (flow, key): the value replaces the key in the flow's table.
    Flow(String, String),
    Host(String),
}

/// A `[[sweep]]` as written.
pub(super) struct RawSweep {
    param: String,
    line: usize,
    values: Vec<TomlItem>,
}

pub(super) fn read_sweeps(doc: &Reader) -> Result<Vec<RawSweep>, FileError> {
    let mut out = Vec::new();
    for s in doc.tables("sweep")? {
        s.only(&["param", "values"])?;
        let param = s.required_string("param")?.to_string();
        let line = s.required("param")?.line();
        let values_item = s.required("values")?;
        let values = match values_item.as_array() {
            Some(a) => a.to_vec(),
            None => vec![values_item.clone()],
        };
        if values.is_empty() {
            return Err(values_item.error("sweep: values is empty"));
        }
        if let Some(v) = values.iter().find(|v| v.scalar_text().is_none()) {
            return Err(v.error(format!(
                "sweep values: expected a string, number or boolean, found {}",
                v.type_name()
            )));
        }
        out.push(RawSweep {
            param,
            line,
            values,
        });
    }
    Ok(out)
}

/// How a flow key's range bounds are read.
fn unit_of(key: &str) -> Unit {
    match key {
        "rate" => Unit::Rate,
        "size" | "send_buffer" | "recv_buffer" | "mss" | "window_clamp" => Unit::Bytes,
        "duration" | "start" | "interval" => Unit::Duration,
        _ => Unit::Count,
    }
}

/// One sweep: its parameter, where its values go, and the values (ranges unexpanded).
struct Axis {
    param: String,
    target: Target,
    values: Vec<SweepValue>,
}

fn axis(s: &RawSweep, defs: &Definitions, base: &SweepPoint) -> Result<Axis, FileError> {
    let err = |m: String| Err(FileError::at(s.line, format!("sweep: {m}")));
    let parts: Vec<&str> = s.param.split('.').collect();
    let (target, unit) = match parts.as_slice() {
        ["vars", n] if defs.vars.contains_key(*n) => (Target::Var(n.to_string()), Unit::Count),
        ["vars", n] => return err(format!("unknown variable '{n}'")),
        ["flow", f, _] if base.flow(f).is_none() => return err(format!("unknown flow '{f}'")),
        ["flow", _, k] if !FLOW_KEYS.contains(k) || *k == "name" => {
            return err(format!("'{k}' is not a flow parameter that can vary"))
        }
        ["flow", f, k] => (Target::Flow(f.to_string(), k.to_string()), unit_of(k)),
        ["host", h, "address"] if base.host(h).is_none() => {
            return err(format!("unknown host '{h}'"))
        }
        ["host", h, "address"] => (Target::Host(h.to_string()), Unit::Count),
        _ => {
            return err(format!(
                "param '{}' is not flow.NAME.KEY, host.NAME.address or vars.NAME",
                s.param
            ))
        }
    };
    Ok(Axis {
        param: s.param.clone(),
        target,
        values: SweepValue::read_all(s.values.clone(), Some(unit), MAX_POINTS, "sweep")?,
    })
}

/// The number of sweep points, refused past [`MAX_POINTS`] or when every point's copy of the
/// `definitions` hosts and flows would pass [`MAX_POINT_ENTRIES`]; counted, not expanded.
fn count_points(axes: &[Axis], sweeps: &[RawSweep], definitions: usize) -> Result<u64, FileError> {
    let total = axes
        .iter()
        .fold(1u64, |acc, a| acc.saturating_mul(count_values(&a.values)));
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
    Err(FileError::new(sweeps.first().map(|s| s.line), message))
}

/// Every sweep point, the first sweep outermost; the base point alone without sweeps.
pub(super) fn expand(
    defs: &Definitions,
    sweeps: &[RawSweep],
    base: &SweepPoint,
) -> Result<Vec<SweepPoint>, FileError> {
    let axes = sweeps
        .iter()
        .map(|s| axis(s, defs, base))
        .collect::<Result<Vec<_>, _>>()?;
    let total = count_points(&axes, sweeps, defs.hosts.len() + defs.flows.len())? as usize;
    let axes: Vec<(String, Target, Vec<TomlItem>)> = axes
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
        let chosen: Vec<(&String, &Target, &TomlItem)> = axes
            .iter()
            .zip(&idx)
            .map(|(a, &j)| (&a.0, &a.1, &a.2[j]))
            .collect();
        let labels: Vec<(String, String)> = chosen
            .iter()
            .map(|(p, _, v)| ((*p).clone(), v.scalar_text().unwrap_or_default()))
            .collect();
        let overrides: Vec<(Target, TomlItem)> = chosen
            .iter()
            .map(|(_, t, v)| ((*t).clone(), (*v).clone()))
            .collect();
        let mut p = defs
            .point(&overrides)
            .map_err(|e| e.note(format!("(at sweep point {})", label_text(&labels))))?;
        p.labels = labels;
        points.push(p);
    }
    Ok(points)
}
