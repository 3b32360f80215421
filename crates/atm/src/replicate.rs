//! Load generation inside a switch: point-to-multipoint replication, recirculation loops, and
//! a constant-rate background cell source.
//!
//! Seed 002 loaded a switch port beyond what one workstation could send by replicating a
//! background stream on a point-to-multipoint connection and looping each copy several times
//! through an external fibre between two ports: every pass crosses the congested output port
//! again, so N passes multiply the load there by N. These helpers reproduce that set-up in a
//! simulation: the driver asks [`RecirculationLoop::next_pass`] what to do with each cell that
//! leaves the port.

use crate::cell::CellRepr;
use crate::switch::{CellMeta, Departure, ServiceCategory, VcId};
use crate::time::ExactNs;

/// A point-to-multipoint connection: one cell in, one copy on each leaf VC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointToMultipoint {
    leaves: Vec<VcId>,
}

impl PointToMultipoint {
    /// A connection with these leaves.
    pub fn new(leaves: Vec<VcId>) -> Self {
        PointToMultipoint { leaves }
    }

    /// The leaves.
    pub fn leaves(&self) -> &[VcId] {
        &self.leaves
    }

    /// The copies of `cell`, one per leaf, identical but for the VC.
    pub fn replicate(&self, cell: CellMeta) -> impl Iterator<Item = CellMeta> + '_ {
        self.leaves.iter().map(move |&vc| CellMeta { vc, ..cell })
    }

    /// The copies of a whole cell, with each leaf's VPI/VCI written into the header.
    pub fn replicate_cell<'a>(
        cell: &'a CellRepr,
        leaves: &'a [(u16, u16)],
    ) -> impl Iterator<Item = CellRepr> + 'a {
        leaves.iter().map(move |&(vpi, vci)| {
            let mut copy = *cell;
            copy.header.vpi = vpi;
            copy.header.vci = vci;
            copy
        })
    }
}

/// What becomes of a cell that left the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopStep {
    /// Re-offer this cell to the port at `arrival_ns` (it went round the loop once more).
    Recirculate {
        /// When it arrives back.
        arrival_ns: u64,
        /// The cell, now on the next pass's VC.
        cell: CellMeta,
    },
    /// The cell has made its last pass (or was never in the loop): it leaves the system.
    Exit,
}

/// A recirculation loop: pass `i` of a cell uses VC `vcs[i]`; when a cell on `vcs[i]` leaves
/// the port it comes back after `loop_delay_ns` on `vcs[i + 1]`, until the last pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecirculationLoop {
    vcs: Vec<VcId>,
    pass_of_vc: Vec<Option<u32>>,
    loop_delay_ns: u64,
}

impl RecirculationLoop {
    /// A loop through the given per-pass VCs (which must be distinct; a repeated VC keeps its
    /// first pass), with `loop_delay_ns` from the end of transmission to arrival back at the
    /// port (fibre propagation plus the input side's latency).
    pub fn new(vcs: Vec<VcId>, loop_delay_ns: u64) -> Self {
        let len = vcs.iter().map(|v| v.0 as usize + 1).max().unwrap_or(0);
        let mut pass_of_vc = vec![None; len];
        for (pass, vc) in vcs.iter().enumerate() {
            let slot = &mut pass_of_vc[vc.0 as usize];
            if slot.is_none() {
                *slot = Some(pass as u32);
            }
        }
        RecirculationLoop {
            vcs,
            pass_of_vc,
            loop_delay_ns,
        }
    }

    /// How many times each injected cell crosses the port: the load multiplication factor.
    pub fn passes(&self) -> usize {
        self.vcs.len()
    }

    /// The VC on which cells are injected (pass 0).
    pub fn first_vc(&self) -> Option<VcId> {
        self.vcs.first().copied()
    }

    /// The loop's VCs, pass by pass.
    pub fn vcs(&self) -> &[VcId] {
        &self.vcs
    }

    /// What to do with a cell that has just left the port.
    pub fn next_pass(&self, departure: &Departure) -> LoopStep {
        let pass = self
            .pass_of_vc
            .get(departure.cell.vc.0 as usize)
            .copied()
            .flatten();
        match pass.and_then(|p| self.vcs.get(p as usize + 1)) {
            Some(&vc) => LoopStep::Recirculate {
                arrival_ns: departure.tx_end_ns.saturating_add(self.loop_delay_ns),
                cell: CellMeta {
                    vc,
                    ..departure.cell
                },
            },
            None => LoopStep::Exit,
        }
    }
}

/// A background source: cells at a constant rate on one VC, in frames of a fixed number of
/// cells (1 = every cell ends a frame), like a CBR tester or a ttcp stream segmented by AAL5.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConstantCellSource {
    vc: VcId,
    category: ServiceCategory,
    interval: ExactNs,
    start_ns: u64,
    cells_per_frame: u32,
    next_index: u64,
    limit: Option<u64>,
    clp: bool,
}

impl ConstantCellSource {
    /// Cells on `vc` every `interval` from `start_ns`, single-cell frames, UBR, CLP 0, forever.
    /// `None` for a zero interval.
    pub fn new(vc: VcId, interval: ExactNs, start_ns: u64) -> Option<Self> {
        (!interval.is_zero()).then_some(ConstantCellSource {
            vc,
            category: ServiceCategory::Ubr,
            interval,
            start_ns,
            cells_per_frame: 1,
            next_index: 0,
            limit: None,
            clp: false,
        })
    }

    /// The same source at `cells_per_second`.
    pub fn per_second(vc: VcId, cells_per_second: u64, start_ns: u64) -> Option<Self> {
        ConstantCellSource::new(vc, ExactNs::per_rate(cells_per_second)?, start_ns)
    }

    /// Sets the service category the VC should be set up with (UBR by default).
    pub fn with_category(mut self, category: ServiceCategory) -> Self {
        self.category = category;
        self
    }

    /// Groups cells into AAL5 frames of `cells` cells (at least 1).
    pub fn with_cells_per_frame(mut self, cells: u32) -> Self {
        self.cells_per_frame = cells.max(1);
        self
    }

    /// Stops after `cells` cells.
    pub fn with_limit(mut self, cells: u64) -> Self {
        self.limit = Some(cells);
        self
    }

    /// Sends every cell with CLP = 1 (low-priority background).
    pub fn with_clp(mut self, clp: bool) -> Self {
        self.clp = clp;
        self
    }

    /// The category to set the VC up with.
    pub fn category(&self) -> ServiceCategory {
        self.category
    }

    /// The VC.
    pub fn vc(&self) -> VcId {
        self.vc
    }

    /// Cells emitted so far.
    pub fn emitted(&self) -> u64 {
        self.next_index
    }

    /// When the next cell is due, if any is left.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.limit.is_some_and(|l| self.next_index >= l) {
            return None;
        }
        Some(
            self.start_ns
                .saturating_add(self.interval.times_floor(self.next_index)),
        )
    }

    /// The next cell if it is due at or before `now_ns`, with its due time.
    pub fn poll(&mut self, now_ns: u64) -> Option<(u64, CellMeta)> {
        let due = self.poll_timeout().filter(|&t| t <= now_ns)?;
        let k = self.next_index;
        self.next_index += 1;
        let per = u64::from(self.cells_per_frame);
        let frame = u32::try_from(k / per).unwrap_or(u32::MAX);
        let mut cell = CellMeta::user_data(self.vc, frame, k % per == per - 1);
        cell.clp = self.clp;
        Some((due, cell))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{CellHeader, HeaderFormat};
    use crate::link::LineRate;
    use crate::switch::{OutputPort, PortConfig, Verdict};

    #[test]
    fn point_to_multipoint_copies_to_every_leaf() {
        let p2mp = PointToMultipoint::new(vec![VcId(4), VcId(5)]);
        let copies: Vec<CellMeta> = p2mp
            .replicate(CellMeta::user_data(VcId(0), 7, true))
            .collect();
        assert_eq!(copies.len(), 2);
        assert_eq!((copies[0].vc, copies[1].vc), (VcId(4), VcId(5)));
        assert!(copies.iter().all(|c| c.frame == 7 && c.is_end_of_frame()));
        let mut cell = CellRepr::idle(HeaderFormat::Uni);
        cell.header = CellHeader::user_data(HeaderFormat::Uni, 0, 100, false);
        let leaves = [(1, 200), (2, 300)];
        let copies: Vec<CellRepr> = PointToMultipoint::replicate_cell(&cell, &leaves).collect();
        assert_eq!((copies[1].header.vpi, copies[1].header.vci), (2, 300));
        assert_eq!(copies[0].payload, cell.payload);
        assert_eq!(p2mp.leaves().len(), 2);
    }

    #[test]
    fn constant_source_is_exact_and_frames_cells() {
        let mut s = ConstantCellSource::new(VcId(1), ExactNs::new(10_000, 3).unwrap(), 100)
            .unwrap()
            .with_cells_per_frame(3)
            .with_limit(7);
        assert_eq!(s.category(), ServiceCategory::Ubr);
        let mut cells = Vec::new();
        while let Some(t) = s.poll_timeout() {
            cells.push(s.poll(t).unwrap());
        }
        let times: Vec<u64> = cells.iter().map(|c| c.0).collect();
        assert_eq!(times, vec![100, 3433, 6766, 10_100, 13_433, 16_766, 20_100]);
        let eom: Vec<bool> = cells.iter().map(|c| c.1.is_end_of_frame()).collect();
        assert_eq!(eom, vec![false, false, true, false, false, true, false]);
        assert_eq!(cells[3].1.frame, 1);
        assert!(s.poll(u64::MAX).is_none());
        assert_eq!(s.emitted(), 7);
        assert!(ConstantCellSource::per_second(VcId(0), 0, 0).is_none());
    }

    #[test]
    fn recirculation_multiplies_the_load_on_the_port() {
        // A 1,000 cells/s background stream looped 5 times through a 100,000 cells/s port:
        // the port carries 5,000 cells/s, and each injected cell leaves once per pass.
        let line = LineRate::from_cells_per_second(100_000).unwrap();
        let mut port = OutputPort::new(PortConfig::new(line, 64));
        let loop_vcs: Vec<VcId> = (0..5).map(|_| port.add_vc(ServiceCategory::Ubr)).collect();
        let lp = RecirculationLoop::new(loop_vcs.clone(), 50_000);
        assert_eq!(lp.passes(), 5);
        assert_eq!(lp.first_vc(), Some(VcId(0)));
        let mut source = ConstantCellSource::per_second(lp.first_vc().unwrap(), 1_000, 0)
            .unwrap()
            .with_limit(100);
        // A tiny event loop: pending re-arrivals, the source, and the port.
        let mut pending: std::collections::VecDeque<(u64, CellMeta)> = Default::default();
        let mut exits = 0u64;
        loop {
            let next = [
                source.poll_timeout(),
                pending.front().map(|p| p.0),
                port.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            let Some(now) = next else { break };
            while let Some((t, cell)) = source.poll(now) {
                assert_eq!(port.enqueue(t, cell), Verdict::Queued);
            }
            while pending.front().is_some_and(|p| p.0 <= now) {
                let (t, cell) = pending.pop_front().unwrap();
                assert_eq!(port.enqueue(t, cell), Verdict::Queued);
            }
            while let Some(d) = port.poll_transmit(now) {
                match lp.next_pass(&d) {
                    LoopStep::Recirculate { arrival_ns, cell } => {
                        assert_eq!(arrival_ns, d.tx_end_ns + 50_000);
                        pending.push_back((arrival_ns, cell));
                    }
                    LoopStep::Exit => exits += 1,
                }
            }
        }
        assert_eq!(exits, 100);
        assert_eq!(port.counters().cells_out, 500);
        for vc in &loop_vcs {
            assert_eq!(port.vc_counters(*vc).unwrap().cells_out, 100);
        }
        // A cell on a VC outside the loop just exits.
        let stray = Departure {
            cell: CellMeta::user_data(VcId(99), 0, true),
            enqueued_ns: 0,
            tx_start_ns: 0,
            tx_end_ns: 1,
        };
        assert_eq!(lp.next_pass(&stray), LoopStep::Exit);
    }
}
