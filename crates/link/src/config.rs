//! The `emulate` table of a lab link: which stages a link direction has and their
//! settings, read with line numbers, and built into a [`Chain`]. The ATM and DiffServ keys
//! are the simulator's link keys (one reader for both formats); the impairment keys follow
//! netem's names. docs/emulation.md lists them with examples.

use flowlab_spanned::{FileError, Reader};

use crate::atm::{read_contract, read_port, read_service, AtmLink, AtmSpec, VcSpec, POLICING};
use crate::chain::Chain;
use crate::diffserv::{
    dscp_of, queue_limit, read_sched, DiffServEdge, OntoAtm, SchedSpec, DEFAULT_LIMIT,
};
use crate::impair::{Distribution, ImpairConfig, Impairments};
use crate::loss::LossModel;
use crate::LinkModel;

/// Every key of `emulate`.
pub const KEYS: &[&str] = &[
    // ATM
    "phy",
    "encap",
    "buffer_cells",
    "epd",
    "ppd",
    "clp_threshold",
    "queues",
    "vc_buffer_cells",
    "vc_epd",
    "cell_loss",
    "cell_loss_burst",
    "cell_gemodel",
    "vcs",
    // IP port
    "rate",
    "buffer",
    "buffer_packets",
    "scheduler",
    "classes",
    "tx_ring",
    // impairments: IMPAIR_KEYS
    "delay",
    "jitter",
    "distribution",
    "loss",
    "loss_burst",
    "gemodel",
    "duplicate",
    "reorder",
    "limit",
    "seed",
];
/// The impairment stage's keys, which a simulated link takes too (see [`read_impair`]).
pub const IMPAIR_KEYS: &[&str] = &[
    "delay",
    "jitter",
    "distribution",
    "loss",
    "loss_burst",
    "gemodel",
    "duplicate",
    "reorder",
    "limit",
];
const VC_KEYS: &[&str] = &[
    "name", "dscp", "service", "pcr", "cdvt", "scr", "mbs", "police",
];
const GEMODEL_KEYS: &[&str] = &["p", "r", "loss_bad", "loss_good"];
const DISTRIBUTIONS: &[(&str, Distribution)] = &[
    ("uniform", Distribution::Uniform),
    ("normal", Distribution::Normal),
    ("pareto", Distribution::Pareto),
];
/// The seed when the file names none, so two runs of one lab decide alike.
pub const DEFAULT_SEED: u64 = 1;

/// The IP port in front of a link: a scheduler on a line of `rate_bps`.
#[derive(Debug, Clone, PartialEq)]
pub struct IpPortSpec {
    pub sched: SchedSpec,
    pub rate_bps: u64,
    pub tx_ring: usize,
}

/// One emulated link (both directions alike): its stages, in chain order.
#[derive(Debug, Clone, PartialEq)]
pub struct EmulateSpec {
    pub ip: Option<IpPortSpec>,
    pub atm: Option<AtmSpec>,
    pub impair: Option<ImpairConfig>,
    pub seed: u64,
}

impl EmulateSpec {
    /// The chain of one direction; `direction` (0 or 1) varies the random choices.
    pub fn build(&self, direction: u64) -> Chain {
        let seed = self.seed ^ direction.wrapping_mul(0xa076_1d64_78bd_642f);
        let mut stages: Vec<Box<dyn LinkModel>> = Vec::new();
        if let Some(ip) = &self.ip {
            let onto_atm = self.atm.as_ref().map(|a| OntoAtm {
                encap: a.port.encap,
                line: a.port.line,
            });
            stages.push(Box::new(DiffServEdge::new(
                &ip.sched,
                ip.rate_bps,
                ip.tx_ring,
                onto_atm,
            )));
        }
        if let Some(atm) = &self.atm {
            stages.push(Box::new(AtmLink::new(atm.clone(), seed)));
        }
        if let Some(imp) = &self.impair {
            stages.push(Box::new(Impairments::new(imp.clone(), seed)));
        }
        Chain::new(stages)
    }

    /// The one-way delay every frame gets at least.
    pub fn delay_ns(&self) -> u64 {
        self.impair.as_ref().map_or(0, |i| i.delay_ns)
    }
}

/// Reads an `emulate` table.
pub fn read(e: &Reader) -> Result<EmulateSpec, FileError> {
    e.only(KEYS)?;
    let atm = read_atm(e)?;
    let ip = read_ip(e, atm.as_ref())?;
    let impair = read_impair(e)?;
    if ip.is_none() && atm.is_none() && impair.is_none() {
        return Err(e.table_error(
            "nothing to emulate: give phy (ATM), rate or scheduler (IP), or impairments such as delay",
        ));
    }
    Ok(EmulateSpec {
        ip,
        atm,
        impair,
        seed: e.uint("seed")?.unwrap_or(DEFAULT_SEED),
    })
}

fn read_atm(e: &Reader) -> Result<Option<AtmSpec>, FileError> {
    let Some(port) = read_port(e)? else {
        for key in [
            "encap",
            "buffer_cells",
            "epd",
            "ppd",
            "clp_threshold",
            "queues",
            "vc_buffer_cells",
            "vc_epd",
            "cell_loss",
            "cell_loss_burst",
            "cell_gemodel",
            "vcs",
        ] {
            if let Some(item) = e.get(key) {
                return Err(e.error(item, key, "needs phy (an ATM link)"));
            }
        }
        return Ok(None);
    };
    let mut vcs = Vec::new();
    for (i, v) in e.tables("vcs")?.iter().enumerate() {
        let v = v.named("vcs");
        v.only(VC_KEYS)?;
        let dscps = match v.get("dscp") {
            None => Vec::new(),
            Some(d) => match d.as_array() {
                Some(a) => a.iter().map(dscp_of).collect::<Result<Vec<u8>, String>>(),
                None => dscp_of(d).map(|x| vec![x]),
            }
            .map_err(|m| v.error(d, "dscp", m))?,
        };
        let contract = read_contract(&v)?;
        let police = v.choice("police", POLICING)?.flatten();
        if let (Some(_), None, Some(item)) = (police, contract, v.get("police")) {
            return Err(v.error(item, "police", "needs a contract (pcr)"));
        }
        vcs.push(VcSpec {
            name: v.string("name")?.map_or(format!("vc{i}"), str::to_string),
            dscps,
            service: read_service(&v)?.unwrap_or_default(),
            contract: contract.filter(|_| police.is_some()),
            police: police.unwrap_or(flowlab_atm::PolicingAction::Drop),
        });
    }
    let mut spec = AtmSpec::single_vc(port);
    if !vcs.is_empty() {
        spec.vcs = vcs;
    }
    spec.cell_loss = read_cell_loss(e)?;
    Ok(Some(spec))
}

/// The IP port: with `scheduler`, `classes` or `rate`. On an ATM link its line is the
/// PHY's cell rate unless `rate` shapes it lower, and it charges whole cells, as a router's
/// interface onto a VC (the simulator's IP-over-ATM link).
fn read_ip(e: &Reader, atm: Option<&AtmSpec>) -> Result<Option<IpPortSpec>, FileError> {
    let wanted = [
        "rate",
        "scheduler",
        "classes",
        "buffer",
        "buffer_packets",
        "tx_ring",
    ]
    .iter()
    .any(|k| e.get(k).is_some());
    if !wanted {
        return Ok(None);
    }
    let rate = e.bit_rate("rate", "'max' is not a rate here")?;
    let rate_bps = match (atm, rate) {
        (Some(a), None) => a.port.line.cell_bit_rate().round() as u64,
        (Some(a), Some(r)) if r as f64 > a.port.line.cell_bit_rate() + 0.5 => {
            let msg = format!("{r} bit/s is above the {} line's cell rate", a.port.phy);
            return Err(e.error(e.required("rate")?, "rate", msg));
        }
        (_, Some(0)) => return Err(e.error(e.required("rate")?, "rate", "must be above 0")),
        (_, Some(r)) => r,
        (None, None) => return Err(e.table_error("scheduler: needs rate (or phy)")),
    };
    let link_limit = queue_limit(e)?.unwrap_or(DEFAULT_LIMIT);
    Ok(Some(IpPortSpec {
        sched: read_sched(e, link_limit)?,
        rate_bps,
        tx_ring: e.positive("tx_ring")?.unwrap_or(1) as usize,
    }))
}

/// The impairment stage of a table with any of [`IMPAIR_KEYS`]: a lab link's `emulate`
/// table, or a simulated link (one reader, so one description runs on both).
pub fn read_impair(e: &Reader) -> Result<Option<ImpairConfig>, FileError> {
    if !IMPAIR_KEYS.iter().any(|k| e.get(k).is_some()) {
        return Ok(None);
    }
    let delay_ns = e.duration_ns("delay")?.unwrap_or(0);
    if delay_ns > 60_000_000_000 {
        return Err(e.error(e.required("delay")?, "delay", "at most 60s"));
    }
    let jitter_ns = e.duration_ns("jitter")?.unwrap_or(0);
    if jitter_ns > 60_000_000_000 {
        return Err(e.error(e.required("jitter")?, "jitter", "at most 60s"));
    }
    let limit = match e.positive("limit")? {
        Some(n) if n > u64::from(u32::MAX) => {
            return Err(e.error(e.required("limit")?, "limit", "too large"))
        }
        Some(n) => n as u32,
        None => crate::impair::DEFAULT_LIMIT,
    };
    Ok(Some(ImpairConfig {
        delay_ns,
        jitter_ns,
        distribution: e.choice("distribution", DISTRIBUTIONS)?.unwrap_or_default(),
        loss: read_loss(e, "loss", "loss_burst", Some("gemodel"))?,
        duplicate: probability(e, "duplicate")?.unwrap_or(0.0),
        reorder: probability(e, "reorder")?.unwrap_or(0.0),
        limit,
    }))
}

/// Cell loss on an ATM line: `cell_loss` (a probability), with `cell_loss_burst` (Gilbert's
/// model of that mean burst in cells), or the `cell_gemodel` table (Gilbert-Elliott, as
/// `gemodel`). Lab links and simulated ATM links read it here.
pub fn read_cell_loss(e: &Reader) -> Result<LossModel, FileError> {
    read_loss(e, "cell_loss", "cell_loss_burst", Some("cell_gemodel"))
}

/// `key` (a probability), `burst_key` (mean burst length: Gilbert's model with that
/// mean), or the `gemodel` table (Gilbert-Elliott in netem's terms).
fn read_loss(
    e: &Reader,
    key: &str,
    burst_key: &str,
    gemodel: Option<&str>,
) -> Result<LossModel, FileError> {
    if let Some(g) = gemodel.and_then(|k| e.get(k).map(|item| (k, item))) {
        if let Some(item) = e.get(key).or(e.get(burst_key)) {
            return Err(e.error(item, key, format!("give {key} or {}, not both", g.0)));
        }
        let t = flowlab_spanned::Reader::of(g.1, g.0)?;
        t.only(GEMODEL_KEYS)?;
        let need = |k: &str| -> Result<f64, FileError> {
            probability(&t, k)?.ok_or_else(|| t.table_error(format!("{k}: missing")))
        };
        return Ok(LossModel::GilbertElliott {
            p: need("p")?,
            r: need("r")?,
            loss_bad: probability(&t, "loss_bad")?.unwrap_or(1.0),
            loss_good: probability(&t, "loss_good")?.unwrap_or(0.0),
        });
    }
    let p = probability(e, key)?;
    let burst = e.float(burst_key)?;
    match (p, burst) {
        (None, None) => Ok(LossModel::None),
        (None, Some(_)) => Err(e.error(e.required(burst_key)?, burst_key, format!("needs {key}"))),
        (Some(p), None) => Ok(LossModel::Random { p }),
        (Some(_), Some(b)) if b < 1.0 => Err(e.error(
            e.required(burst_key)?,
            burst_key,
            "a mean burst is at least 1",
        )),
        (Some(p), Some(_)) if p >= 1.0 => Ok(LossModel::Random { p }),
        (Some(p), Some(b)) => {
            // Gilbert: bursts of mean 1/r, a loss ratio p_gb / (p_gb + r).
            let r = 1.0 / b;
            Ok(LossModel::GilbertElliott {
                p: p * r / (1.0 - p),
                r,
                loss_good: 0.0,
                loss_bad: 1.0,
            })
        }
    }
}

/// A probability: `0.01`, `"1%"`, in 0..=1.
fn probability(r: &Reader, key: &str) -> Result<Option<f64>, FileError> {
    let Some(item) = r.get(key) else {
        return Ok(None);
    };
    let percent = item.as_str().is_some_and(|s| s.trim().ends_with('%'));
    let x = r.float(key)?.unwrap_or(0.0) / if percent { 100.0 } else { 1.0 };
    if !(0.0..=1.0).contains(&x) {
        return Err(r.error(
            item,
            key,
            "a probability is between 0 and 1 (or 0% and 100%)",
        ));
    }
    Ok(Some(x))
}

#[cfg(test)]
mod tests;
