//! `[search]`: which search, over which flows, with its bounds; refused when its trials
//! would pass the caps.

use flowlab_spanned::{
    count_values, expand_values, FileError, Item as TomlItem, Reader, SweepValue, Unit,
};
use flowlab_spec::Protocol;

use super::{capped, substitute, substitute_table, Flow, SearchKind, SearchSpec, SweepPoint, Vars};
use crate::limits::{hours, MAX_PLANNED_NS, MAX_POINTS, MAX_REPEAT, MAX_TRIALS};
use crate::search::RFC2544_TRIAL_NS;

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
const NOT_MAX: &str = "needs a number of bit/s, not 'max'";

/// The `[search]` table, variables substituted, and the base point's flows it names.
struct Search<'a> {
    r: Reader<'a>,
    vars: &'a Vars,
    flows: Vec<String>,
    base: &'a SweepPoint,
}

pub(super) fn read_search(
    v: &TomlItem,
    vars: &Vars,
    base: &SweepPoint,
) -> Result<SearchSpec, FileError> {
    let table = substitute_table(Reader::of(v, "search")?.table(), vars)?;
    let r = Reader::new(&table, v.line(), "search");
    r.only(SEARCH_KEYS)?;
    let mut s = Search {
        r,
        vars,
        flows: Vec::new(),
        base,
    };
    s.flows = s.flow_names()?;
    let kind_item = s.r.required("kind")?;
    let kind = match s.r.required_string("kind")? {
        "rfc2544-throughput" => s.throughput()?,
        "rfc2544-back-to-back" => s.back_to_back()?,
        "rfc2544-loss" => s.loss()?,
        "offered-load" => s.offered_load()?,
        "burst-size" => s.burst_size()?,
        other => {
            return Err(s.r.error(
                kind_item,
                "kind",
                format!("'{other}' is not rfc2544-throughput, rfc2544-back-to-back, rfc2544-loss, offered-load or burst-size"),
            ))
        }
    };
    // RFC 2544 §24: trials of at least 60 s, unless the file says otherwise.
    let rfc2544_trial = match kind {
        SearchKind::Rfc2544Throughput { .. } | SearchKind::LossVsLoad { .. } => {
            Some(RFC2544_TRIAL_NS)
        }
        _ => None,
    };
    let spec = SearchSpec {
        kind,
        flows: s.flows,
        trial_ns: s.r.duration_ns("trial")?.or(rfc2544_trial),
        line: v.line(),
    };
    check_search_size(&spec, base)?;
    Ok(spec)
}

impl Search<'_> {
    fn error(&self, message: impl Into<String>) -> FileError {
        FileError::at(self.r.line(), message)
    }

    /// `flow = "..."` and/or `flows = [...]`, each a flow of the file.
    fn flow_names(&self) -> Result<Vec<String>, FileError> {
        let mut flows: Vec<String> = self
            .r
            .string("flow")?
            .map(str::to_string)
            .into_iter()
            .collect();
        if let Some(fs) = self.list("flows", None)? {
            flows.extend(fs.iter().filter_map(TomlItem::scalar_text));
        }
        if flows.is_empty() {
            return Err(
                self.error("search: name the flow(s) it varies: flow = \"...\" or flows = [...]")
            );
        }
        match flows.iter().find(|f| self.base.flow(f).is_none()) {
            Some(f) => Err(self.error(format!("search: unknown flow '{f}'"))),
            None => Ok(flows),
        }
    }

    /// A list (an array, or one value; ranges in `unit`), variables substituted, within
    /// [`MAX_POINTS`] values.
    fn list(&self, key: &str, unit: Option<Unit>) -> Result<Option<Vec<TomlItem>>, FileError> {
        let Some(lv) = self.r.get(key) else {
            return Ok(None);
        };
        // A single value was substituted with the table; an array's values are not yet.
        let items = match lv.as_array() {
            Some(a) => a
                .iter()
                .map(|x| substitute(x, self.vars, key))
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![lv.clone()],
        };
        let values = SweepValue::read_all(items, unit, MAX_POINTS, &format!("search {key}"))?;
        match count_values(&values) {
            0 => Err(lv.error(format!("search {key}: empty"))),
            n if n > MAX_POINTS => Err(lv.error(format!(
                "search {key}: {n} values, more than the limit of {MAX_POINTS}"
            ))),
            _ => Ok(Some(expand_values(values))),
        }
    }

    fn need_rate(&self, key: &str) -> Result<u64, FileError> {
        self.r.required(key)?;
        Ok(self.r.bit_rate(key, NOT_MAX)?.unwrap_or(0))
    }

    fn below_min(&self) -> Result<SearchKind, FileError> {
        Err(self.r.error(self.r.required("max")?, "max", "is below min"))
    }

    fn throughput(&self) -> Result<SearchKind, FileError> {
        let max_bps = self.need_rate("max")?;
        let min_bps = self.r.bit_rate("min", NOT_MAX)?.unwrap_or(1_000);
        if min_bps > max_bps {
            return self.below_min();
        }
        let resolution_bps = self
            .r
            .bit_rate("resolution", NOT_MAX)?
            .unwrap_or_else(|| (max_bps / 1000).max(1));
        let loss_tolerance = self.r.float("loss")?.unwrap_or(0.0);
        if !(0.0..1.0).contains(&loss_tolerance) {
            let item = self.r.required("loss")?;
            return Err(self.r.error(item, "loss", "a loss ratio is in [0, 1)"));
        }
        Ok(SearchKind::Rfc2544Throughput {
            min_bps,
            max_bps,
            resolution_bps,
            loss_tolerance,
        })
    }

    fn back_to_back(&self) -> Result<SearchKind, FileError> {
        let line_rate_bps = self.need_rate("rate")?;
        let min_packets = self.r.count("min")?.unwrap_or(1).max(1);
        let max_packets = self.r.count("max")?.unwrap_or(100_000);
        if min_packets > max_packets {
            return self.below_min();
        }
        Ok(SearchKind::BackToBack {
            line_rate_bps,
            min_packets,
            max_packets,
            resolution_packets: self.r.count("resolution")?.unwrap_or(1).max(1),
            repeat: capped(&self.r, "repeat", MAX_REPEAT)?.unwrap_or(50),
        })
    }

    fn loss(&self) -> Result<SearchKind, FileError> {
        let step_pct = self.r.float("step")?.unwrap_or(10.0);
        if !(step_pct > 0.0 && step_pct <= 100.0) {
            let item = self.r.required("step")?;
            return Err(self.r.error(item, "step", "a step is in (0, 100] %"));
        }
        Ok(SearchKind::LossVsLoad {
            max_bps: self.need_rate("max")?,
            step_pct,
        })
    }

    fn offered_load(&self) -> Result<SearchKind, FileError> {
        let loads_pct = match self.list("loads", Some(Unit::Count))? {
            None => (1..=10).map(|i| f64::from(i) * 10.0).collect(),
            Some(ls) => ls.iter().map(load_pct).collect::<Result<_, _>>()?,
        };
        for f in &self.flows {
            if self.base.flow(f).and_then(|x| x.spec.rate_bps).is_none() {
                return Err(self.error(format!(
                    "search: flow '{f}' needs a rate in bit/s: it is its 100 % load"
                )));
            }
        }
        Ok(SearchKind::OfferedLoad { loads_pct })
    }

    fn burst_size(&self) -> Result<SearchKind, FileError> {
        let Some(bs) = self.list("bursts", Some(Unit::Bytes))? else {
            return Err(
                self.error("search: burst-size needs bursts = [...] or \"START..END:STEP\"")
            );
        };
        let mut bursts_bytes = Vec::new();
        for b in bs {
            let text = b.scalar_text().unwrap_or_default();
            match flowlab_units::parse_bytes(&text) {
                Ok(n) if n > 0 => bursts_bytes.push(n),
                Ok(_) => return Err(b.error("search bursts: a burst is above 0 B")),
                Err(e) => return Err(b.error(format!("search bursts: {e}"))),
            }
        }
        let rate_bps = self.need_rate("rate")?;
        let peak_bps = self.need_rate("peak")?;
        let capacity_bps = self.need_rate("capacity")?;
        let not_udp = |f: &String| {
            self.base
                .flow(f)
                .is_some_and(|x| x.spec.protocol != Protocol::Udp)
        };
        if self.flows.iter().any(not_udp) {
            return Err(self.error("search: burst-size sends bursts, which needs udp flows"));
        }
        Ok(SearchKind::BurstSize {
            rate_bps,
            peak_bps,
            capacity_bps,
            bursts_bytes,
        })
    }
}

/// A load in (0, 100] %: `50`, `"50"` or `"50%"`.
fn load_pct(l: &TomlItem) -> Result<f64, FileError> {
    let text = l.scalar_text().unwrap_or_default();
    match text.trim().trim_end_matches('%').parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 100.0 => Ok(x),
        _ => Err(l.error(format!(
            "search loads: '{text}' is not a load in (0, 100] %"
        ))),
    }
}

/// Refuses a search with more than [`MAX_TRIALS`] trials, or more than a day of them.
fn check_search_size(spec: &SearchSpec, base: &SweepPoint) -> Result<(), FileError> {
    let trials = crate::limits::search_trials(&spec.kind);
    if trials > MAX_TRIALS {
        return Err(FileError::at(
            spec.line,
            format!("search: up to {trials} trials, more than the limit of {MAX_TRIALS}: raise the step or resolution, or repeat less"),
        ));
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
        return Err(FileError::at(
            spec.line,
            format!(
                "search: up to {trials} trials × {:.3} s = {}, more than the limit of {}: shorten the trials",
                trial_ns as f64 / 1e9,
                hours(total),
                hours(MAX_PLANNED_NS)
            ),
        ));
    }
    Ok(())
}
