//! An ATM link as one stage: frames become AAL5 cells with the link's encapsulation, wait in
//! the `flowlab-atm` output port (a shared buffer, strict priority between service
//! categories, EPD/PPD/CLP discard, one cell per slot of the PHY's cell rate), pass the
//! GCRA policer of their VC as they reach the line (drop or tag), may be lost on the line
//! (random or bursty cell loss), and are reassembled at the far end: a frame that lost a
//! cell is lost whole, and one that lost its last cell takes the next frame of its VC with
//! it ([`flowlab_atm::FrameDelimiter`], the simulator's receiver).
//!
//! Frames are mapped to VCs by DSCP; each VC has a service category and, optionally, a
//! traffic contract. [`read_port`], [`read_contract`] and the name tables are the keys the
//! simulator's ATM links and flows share.

use std::collections::VecDeque;

use flowlab_atm::gcra::PolicerVerdict;
use flowlab_atm::{
    cells_per_packet, CategoryLimits, Contract, Encapsulation, ExactNs, FrameDelimiter, LineRate,
    OutputPort, PhysicalLayer, Policer, PolicingAction, PortConfig, ServiceCategory, VcId,
    VcLimits,
};
use flowlab_spanned::{FileError, Item, Reader};
use rand_chacha::ChaCha8Rng;

use crate::loss::{LossModel, LossProcess};
use crate::{Cause, CellReport, Event, Frame, LinkModel, StageReport, VcReport, Verdict};

pub const SERVICES: &[(&str, ServiceCategory)] = &[
    ("cbr", ServiceCategory::Cbr),
    ("rt-vbr", ServiceCategory::RtVbr),
    ("rtvbr", ServiceCategory::RtVbr),
    ("nrt-vbr", ServiceCategory::NrtVbr),
    ("nrtvbr", ServiceCategory::NrtVbr),
    ("vbr", ServiceCategory::NrtVbr),
    ("ubr", ServiceCategory::Ubr),
];
pub const POLICING: &[(&str, Option<PolicingAction>)] = &[
    ("drop", Some(PolicingAction::Drop)),
    ("tag", Some(PolicingAction::TagClp)),
    ("none", None),
];
const NOT_MAX: &str = "'max' is not a rate here";

/// A PHY by name, ignoring case and punctuation (`OC-3c`, `oc3`, `STM-1`).
pub fn phy_by_name(name: &str) -> Option<PhysicalLayer> {
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

/// An encapsulation by the names files use.
pub fn encap_by_name(name: &str) -> Option<Encapsulation> {
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

/// Keys of a VC's share of a switch port's buffer (each VC's cells at most, EPD threshold).
pub const VC_LIMIT_KEYS: &[&str] = &["vc_buffer_cells", "vc_epd"];

/// Keys of one entry of a port's `queues`: a service category's own queue.
pub const QUEUE_KEYS: &[&str] = &["service", "buffer_cells", "clp_threshold", "epd"];

/// A link's ATM port: `phy`, `encap`, `buffer_cells`, `epd`, `ppd`, `clp_threshold`, each
/// service category's queue (`queues`) and each VC's limits (`vc_buffer_cells`, `vc_epd`).
#[derive(Debug, Clone, PartialEq)]
pub struct PortSpec {
    /// The PHY's name as printed (`OC-3c`).
    pub phy: String,
    pub line: LineRate,
    pub buffer_cells: usize,
    pub epd: Option<usize>,
    pub ppd: bool,
    pub clp_threshold: Option<usize>,
    pub encap: Encapsulation,
    /// Each service category's queue, indexed by its priority (none: one shared pool).
    pub categories: [CategoryLimits; 4],
    /// Every VC's share of the buffer.
    pub vc_limits: VcLimits,
}

impl PortSpec {
    /// The port's configuration (slotted line).
    pub fn port_config(&self, buffer_cells: usize) -> PortConfig {
        let mut cfg = PortConfig::new(self.line, buffer_cells);
        cfg.epd_threshold = self.epd;
        cfg.ppd = self.ppd;
        cfg.clp1_threshold = self.clp_threshold;
        cfg.categories = self.categories;
        cfg
    }

    /// Cells an IP packet of `ip_len` bytes takes with this port's encapsulation.
    pub fn cells_of(&self, ip_len: usize) -> usize {
        cells_per_packet(ip_len, self.encap)
    }
}

/// The ATM port of a link with a `phy`, `None` without one.
pub fn read_port(l: &Reader) -> Result<Option<PortSpec>, FileError> {
    let Some(p) = l.string("phy")? else {
        return Ok(None);
    };
    let phy = phy_by_name(p).ok_or_else(|| {
        let msg = format!("unknown {p:?}: expected E1, ATM25, DS3, OC-3c or OC-12c");
        l.error(
            l.table().get("phy").unwrap_or(&Item::string(l.line(), "")),
            "phy",
            msg,
        )
    })?;
    let encap = match (l.string("encap")?, l.get("encap")) {
        (Some(e), Some(item)) => encap_by_name(e).ok_or_else(|| {
            let msg = format!("unknown {e:?}: expected llc-snap, vc-mux, llc-bridged, vc-mux-bridged, pppoa, pppoa-llc, pppoe, pppoe-vc-mux or lane");
            l.error(item, "encap", msg)
        })?,
        _ => Encapsulation::LlcSnapRouted,
    };
    let buffer_cells = l.positive("buffer_cells")?.unwrap_or(1000) as usize;
    let epd = l.count("epd")?.map(|x| x as usize);
    if let (Some(e), Some(item)) = (epd, l.get("epd")) {
        if e >= buffer_cells {
            let msg = format!("threshold {e} must be below buffer_cells {buffer_cells}");
            return Err(l.error(item, "epd", msg));
        }
    }
    Ok(Some(PortSpec {
        phy: phy.name().to_string(),
        line: phy.line_rate(),
        buffer_cells,
        epd,
        ppd: l.bool("ppd")?.unwrap_or(false),
        clp_threshold: l.count("clp_threshold")?.map(|x| x as usize),
        encap,
        categories: read_queues(l, buffer_cells)?,
        vc_limits: read_vc_limits(l)?.unwrap_or_default(),
    }))
}

/// `queues`: an array of tables, each a service category's own queue in the port's buffer
/// (`service`, and its `buffer_cells`, `clp_threshold` and `epd`), at most one a category.
/// A category without an entry shares the buffer with no limit of its own.
fn read_queues(l: &Reader, port_cells: usize) -> Result<[CategoryLimits; 4], FileError> {
    let mut categories = [CategoryLimits::default(); 4];
    let mut seen = [false; 4];
    for q in l.tables("queues")? {
        let q = q.named("queues");
        q.only(QUEUE_KEYS)?;
        let service = read_service(&q)?
            .ok_or_else(|| q.table_error("needs service (cbr, rt-vbr, nrt-vbr or ubr)"))?;
        let slot = service.priority();
        if std::mem::replace(&mut seen[slot], true) {
            return Err(q.table_error("a second queue for the same service"));
        }
        let limits = CategoryLimits {
            buffer_cells: q.positive("buffer_cells")?.map(|x| x as usize),
            clp1_threshold: q.count("clp_threshold")?.map(|x| x as usize),
            epd_threshold: q.count("epd")?.map(|x| x as usize),
        };
        if limits == CategoryLimits::default() {
            return Err(q.table_error("needs buffer_cells, clp_threshold or epd"));
        }
        // A queue without a size of its own is bounded by the port's buffer.
        let sized = CategoryLimits {
            buffer_cells: Some(limits.buffer_cells.unwrap_or(port_cells)),
            ..limits
        };
        if let (Some(b), Some(item)) = (limits.buffer_cells, q.get("buffer_cells")) {
            if b > port_cells {
                let msg = format!("{b} cells exceed the port's buffer_cells {port_cells}");
                return Err(q.error(item, "buffer_cells", msg));
            }
        }
        sized.validate().map_err(|e| q.table_error(e))?;
        categories[slot] = limits;
    }
    Ok(categories)
}

/// `vc_buffer_cells` (at least 1) and `vc_epd` (below `vc_buffer_cells`), if either is set.
pub fn read_vc_limits(r: &Reader) -> Result<Option<VcLimits>, FileError> {
    let buffer_cells = r.positive("vc_buffer_cells")?.map(|x| x as usize);
    let epd_threshold = r.count("vc_epd")?.map(|x| x as usize);
    if let (Some(e), Some(b), Some(item)) = (epd_threshold, buffer_cells, r.get("vc_epd")) {
        if e >= b {
            let msg = format!("threshold {e} must be below vc_buffer_cells {b}");
            return Err(r.error(item, "vc_epd", msg));
        }
    }
    Ok(
        (buffer_cells.is_some() || epd_threshold.is_some()).then_some(VcLimits {
            buffer_cells,
            epd_threshold,
        }),
    )
}

/// A traffic contract: `pcr`, `cdvt`, `scr`, `mbs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractSpec {
    pub pcr_bps: u64,
    pub cdvt_ns: u64,
    pub scr_bps: Option<u64>,
    pub mbs: u32,
}

impl ContractSpec {
    /// The GCRA contract (rates in bits of whole 53-byte cells) with `cdvt_ns` of tolerance.
    pub fn contract(&self, cdvt_ns: u64) -> Option<Contract> {
        let peak = ExactNs::new(424 * 1_000_000_000, u128::from(self.pcr_bps))?;
        match self.scr_bps {
            None => Contract::cbr(peak, cdvt_ns).ok(),
            Some(scr) => {
                let sus = ExactNs::new(424 * 1_000_000_000, u128::from(scr))?;
                Contract::vbr(peak, cdvt_ns, sus, self.mbs).ok()
            }
        }
    }
}

/// A contract, if the table has a `pcr`.
pub fn read_contract(f: &Reader) -> Result<Option<ContractSpec>, FileError> {
    let scr = f.bit_rate("scr", NOT_MAX)?;
    let Some(pcr_bps) = f.bit_rate("pcr", NOT_MAX)? else {
        return match f.get("scr") {
            Some(item) => Err(f.error(item, "scr", "needs pcr")),
            None => Ok(None),
        };
    };
    if let (Some(s), Some(item)) = (scr, f.get("scr")) {
        if s > pcr_bps {
            let m = format!("{s} bit/s is above pcr {pcr_bps} bit/s");
            return Err(f.error(item, "scr", m));
        }
    }
    Ok(Some(ContractSpec {
        pcr_bps,
        cdvt_ns: f.duration_ns("cdvt")?.unwrap_or(0),
        scr_bps: scr,
        mbs: f.positive("mbs")?.unwrap_or(1).min(u64::from(u32::MAX)) as u32,
    }))
}

/// `service`, in any case (`CBR`, `rt-VBR`).
pub fn read_service(r: &Reader) -> Result<Option<ServiceCategory>, FileError> {
    let Some(text) = r.string("service")? else {
        return Ok(None);
    };
    let lower = text.to_ascii_lowercase();
    match SERVICES.iter().find(|(name, _)| *name == lower) {
        Some((_, s)) => Ok(Some(*s)),
        None => Err(r.error(
            r.required("service")?,
            "service",
            format!("unknown {text:?}: expected cbr, rt-vbr, nrt-vbr or ubr"),
        )),
    }
}

/// One VC of an emulated ATM link: the frames whose DSCP it lists (the VC without `dscp`
/// takes the rest), its category and its policed contract.
#[derive(Debug, Clone, PartialEq)]
pub struct VcSpec {
    pub name: String,
    pub dscps: Vec<u8>,
    pub service: ServiceCategory,
    pub contract: Option<ContractSpec>,
    pub police: PolicingAction,
}

/// An emulated ATM link direction.
#[derive(Debug, Clone, PartialEq)]
pub struct AtmSpec {
    pub port: PortSpec,
    /// At least one; the last one without `dscp` (or else the last) is the default.
    pub vcs: Vec<VcSpec>,
    pub cell_loss: LossModel,
}

impl AtmSpec {
    /// One UBR VC carrying everything, no cell loss.
    pub fn single_vc(port: PortSpec) -> AtmSpec {
        AtmSpec {
            port,
            vcs: vec![VcSpec {
                name: "vc0".into(),
                dscps: Vec::new(),
                service: ServiceCategory::Ubr,
                contract: None,
                police: PolicingAction::Drop,
            }],
            cell_loss: LossModel::None,
        }
    }
}

/// A frame whose cells are in the port.
#[derive(Debug, Clone, Copy)]
struct Pending {
    frame: Frame,
    no: u32,
    cells: u32,
    queued: u32,
    left: u32,
}

struct Vc {
    dscps: Vec<u8>,
    policer: Option<Policer>,
    receiver: FrameDelimiter,
    next_no: u32,
    /// Frames with cells in the port, in order (a VC's cells leave in order).
    pending: VecDeque<Pending>,
    frames_in: u64,
    frames_out: u64,
}

/// The ATM stage.
pub struct AtmLink {
    spec: AtmSpec,
    port: OutputPort,
    vcs: Vec<Vc>,
    default_vc: usize,
    line_loss: LossProcess,
    rng: ChaCha8Rng,
    lost_on_line: u64,
    out: VecDeque<Event>,
    report: StageReport,
}

impl AtmLink {
    /// The stage; `seed` drives the cell loss.
    pub fn new(spec: AtmSpec, seed: u64) -> AtmLink {
        let mut port = OutputPort::new(spec.port.port_config(spec.port.buffer_cells));
        let vcs: Vec<Vc> = spec
            .vcs
            .iter()
            .enumerate()
            .map(|(i, v)| {
                port.set_vc(VcId(i as u32), v.service);
                port.set_vc_limits(VcId(i as u32), spec.port.vc_limits);
                let contract = v.contract.and_then(|c| c.contract(c.cdvt_ns));
                Vc {
                    dscps: v.dscps.clone(),
                    policer: contract.map(|c| Policer::new(c, v.police)),
                    receiver: FrameDelimiter::default(),
                    next_no: 0,
                    pending: VecDeque::new(),
                    frames_in: 0,
                    frames_out: 0,
                }
            })
            .collect();
        let default_vc = vcs
            .iter()
            .rposition(|v| v.dscps.is_empty())
            .unwrap_or(vcs.len().saturating_sub(1));
        AtmLink {
            line_loss: LossProcess::new(spec.cell_loss),
            rng: crate::stage_rng(seed, 1),
            spec,
            port,
            vcs,
            default_vc,
            lost_on_line: 0,
            out: VecDeque::new(),
            report: StageReport::new("atm", "cells"),
        }
    }

    fn vc_of(&self, dscp: u8) -> usize {
        self.vcs
            .iter()
            .position(|v| v.dscps.contains(&dscp))
            .unwrap_or(self.default_vc)
    }

    /// Moves every cell whose slot began by `now_ns` onto the line.
    fn settle(&mut self, now_ns: u64) {
        while let Some(d) = self.port.poll_transmit(now_ns) {
            let Some(vc) = self.vcs.get_mut(d.cell.vc.0 as usize) else {
                continue;
            };
            let mut cell = d.cell;
            // The policer is the far end's usage parameter control, where the cell arrives.
            let policed = match vc.policer.as_mut().map(|p| p.police(d.tx_end_ns, cell.clp)) {
                Some(PolicerVerdict::Drop) => true,
                Some(PolicerVerdict::Tag) => {
                    cell.clp = true;
                    false
                }
                _ => false,
            };
            let lost = !policed && self.line_loss.lose(&mut self.rng);
            self.lost_on_line += u64::from(lost);
            let closed = (!policed && !lost)
                .then(|| vc.receiver.push(&cell))
                .flatten();
            let Some(front) = vc.pending.front_mut() else {
                continue;
            };
            front.left += 1;
            if front.left < front.queued {
                continue;
            }
            let p = *front;
            vc.pending.pop_front();
            let at_ns = d.tx_end_ns;
            let event = if closed.is_some_and(|c| c.frame == p.no && c.is_intact(p.cells)) {
                vc.frames_out += 1;
                self.report.frames_out += 1;
                self.report.bytes_out += u64::from(p.frame.len);
                Event::Depart {
                    frame: p.frame,
                    at_ns,
                }
            } else {
                self.report.count_drop(Cause::Cells);
                Event::Drop {
                    frame: p.frame,
                    at_ns,
                    cause: Cause::Cells,
                }
            };
            self.out.push_back(event);
        }
    }

    fn event_time(e: &Event) -> u64 {
        match e {
            Event::Depart { at_ns, .. } | Event::Drop { at_ns, .. } => *at_ns,
            Event::Copy { .. } => 0,
        }
    }

    fn cells(&self) -> CellReport {
        let c = self.port.counters();
        let mut policed_dropped = 0;
        let mut policed_tagged = 0;
        let vcs = self
            .spec
            .vcs
            .iter()
            .zip(&self.vcs)
            .enumerate()
            .map(|(i, (spec, vc))| {
                if let Some(p) = &vc.policer {
                    policed_dropped += p.counters().dropped;
                    policed_tagged += p.counters().tagged;
                }
                let vcc = self
                    .port
                    .vc_counters(VcId(i as u32))
                    .copied()
                    .unwrap_or_default();
                VcReport {
                    name: spec.name.clone(),
                    service: format!("{:?}", spec.service).to_lowercase(),
                    cells_in: vcc.cells_in,
                    cells_out: vcc.cells_out,
                    cells_dropped: vcc.cells_dropped,
                    frames_in: vc.frames_in,
                    frames_out: vc.frames_out,
                }
            })
            .collect();
        CellReport {
            cells_in: c.cells_in,
            cells_out: c.cells_out,
            policed_dropped,
            policed_tagged,
            dropped_buffer_full: c.dropped_buffer_full,
            dropped_epd: c.dropped_epd,
            dropped_ppd: c.dropped_ppd,
            dropped_clp: c.dropped_clp,
            lost_on_line: self.lost_on_line,
            frames_epd: c.frames_epd,
            frames_ppd: c.frames_ppd,
            vcs,
        }
    }
}

impl LinkModel for AtmLink {
    fn enqueue(&mut self, now_ns: u64, frame: Frame) -> Verdict {
        self.settle(now_ns);
        self.report.frames_in += 1;
        let v = self.vc_of(frame.dscp);
        let cells = self.spec.port.cells_of(frame.len as usize) as u32;
        let vc = &mut self.vcs[v];
        vc.frames_in += 1;
        let no = vc.next_no;
        vc.next_no = vc.next_no.wrapping_add(1);
        let queued = self.port.enqueue_frame(now_ns, VcId(v as u32), no, cells);
        self.report.max_depth = self.report.max_depth.max(self.port.occupancy() as u64);
        if queued == 0 {
            self.report.count_drop(Cause::Cells);
            return Verdict::Dropped(Cause::Cells);
        }
        vc.pending.push_back(Pending {
            frame,
            no,
            cells,
            queued,
            left: 0,
        });
        Verdict::Queued
    }

    fn next_event_ns(&self) -> Option<u64> {
        if let Some(e) = self.out.front() {
            return Some(Self::event_time(e));
        }
        // A frame's fate is known when its last cell leaves; without an end-of-frame cell
        // queued (one was discarded), wake for the next cell instead.
        self.port
            .next_end_of_frame_ns()
            .or_else(|| self.port.poll_timeout())
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Event> {
        self.settle(now_ns);
        match self.out.front() {
            Some(e) if Self::event_time(e) <= now_ns => self.out.pop_front(),
            _ => None,
        }
    }

    fn report(&self, out: &mut Vec<StageReport>) {
        let mut r = self.report.clone();
        r.cells = Some(self.cells());
        out.push(r);
    }

    fn depth(&self, out: &mut Vec<u64>) {
        out.push(self.port.occupancy() as u64);
    }
}

#[cfg(test)]
mod tests;
