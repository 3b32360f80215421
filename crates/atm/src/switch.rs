//! An ATM switch output port: a shared cell buffer, strict cell-level priority between service
//! categories, one cell per line cell time, and frame-aware discard (EPD, PPD). Discard
//! thresholds apply to the whole buffer, to each service category's queue
//! ([`CategoryLimits`]) and to each VC ([`VcLimits`]).
//!
//! The port is sans-IO in the quinn style: the driver calls [`OutputPort::enqueue`] when a cell
//! arrives, asks [`OutputPort::poll_timeout`] when the next cell can leave, and calls
//! [`OutputPort::poll_transmit`] at that time to take it. Time is a `u64` of nanoseconds passed
//! in; the port never reads a clock.
//!
//! Cells inside the port are [`CellMeta`] (VC index, PTI, CLP, frame number): 12 bytes instead
//! of 53. Queues are preallocated and counters are indexed by a dense [`VcId`], so the
//! enqueue/transmit path does not allocate.
//!
//! Transmission is slotted: the line is a grid of cell slots (`epoch + ⌊k · cell time⌋`), as on
//! SONET/SDH where idle cells fill the gaps, and the scheduler chooses the highest-priority cell
//! at the start of each slot. [`PortConfig::slotted`] = `false` instead starts a busy period
//! the moment a cell reaches an idle line (an asynchronous interface such as ATM25).

use std::collections::VecDeque;

use thiserror::Error;

use crate::cell::{CellRepr, PayloadType};
use crate::link::LineRate;

/// A dense virtual-channel index (0, 1, 2…) chosen by whoever sets the connections up; it
/// indexes per-VC state, so keep it small.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct VcId(pub u32);

/// Service categories with a real-time priority order (TM 4.0). ABR and GFR are not modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum ServiceCategory {
    /// Constant bit rate: highest priority.
    Cbr = 0,
    /// Real-time variable bit rate.
    RtVbr = 1,
    /// Non-real-time variable bit rate.
    NrtVbr = 2,
    /// Unspecified bit rate: best effort, lowest priority.
    #[default]
    Ubr = 3,
}

impl ServiceCategory {
    /// All categories, highest priority first.
    pub const ALL: [ServiceCategory; 4] = [
        ServiceCategory::Cbr,
        ServiceCategory::RtVbr,
        ServiceCategory::NrtVbr,
        ServiceCategory::Ubr,
    ];

    /// Queue index: 0 is served first.
    pub const fn priority(self) -> usize {
        self as usize
    }
}

/// A cell as the switch models see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CellMeta {
    /// The connection the cell belongs to.
    pub vc: VcId,
    /// A frame number chosen by the source, to tell afterwards which frames lost cells.
    pub frame: u32,
    /// Payload type: user data (with the AAL5 end-of-frame bit and EFCI), OAM or RM.
    pub pti: PayloadType,
    /// Cell loss priority: CLP = 1 cells are discarded first.
    pub clp: bool,
}

impl CellMeta {
    /// A user data cell of `frame` on `vc`; `end_of_frame` marks the frame's last cell.
    pub const fn user_data(vc: VcId, frame: u32, end_of_frame: bool) -> CellMeta {
        CellMeta {
            vc,
            frame,
            pti: PayloadType::UserData {
                congestion: false,
                end_of_frame,
            },
            clp: false,
        }
    }

    /// The metadata of a parsed cell, once its VPI/VCI has been looked up as `vc`.
    pub fn from_repr(repr: &CellRepr, vc: VcId, frame: u32) -> CellMeta {
        CellMeta {
            vc,
            frame,
            pti: repr.header.pti,
            clp: repr.header.clp,
        }
    }

    /// Whether this cell ends an AAL5 frame.
    pub const fn is_end_of_frame(&self) -> bool {
        self.pti.is_end_of_frame()
    }
}

/// Why a cell was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The buffer was full.
    BufferFull,
    /// Early packet discard: the frame's first cell met a queue above the EPD threshold, and
    /// the whole frame goes.
    Epd,
    /// Partial packet discard: an earlier cell of this frame was lost, so the rest goes too.
    Ppd,
    /// A CLP = 1 cell met a queue above the CLP threshold.
    ClpThreshold,
    /// The cell's VC is not set up on this port.
    UnknownVc,
}

/// The outcome of [`OutputPort::enqueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The cell is in the buffer.
    Queued,
    /// The cell was discarded.
    Dropped(DropReason),
}

/// A cell leaving the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Departure {
    /// The cell (EFCI may have been set by the port).
    pub cell: CellMeta,
    /// When it entered the buffer.
    pub enqueued_ns: u64,
    /// When its first bit went on the line.
    pub tx_start_ns: u64,
    /// When its last bit went on the line.
    pub tx_end_ns: u64,
}

/// How a port is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortConfig {
    /// The output line's cell rate.
    pub line: LineRate,
    /// Buffer size in cells, shared by all categories.
    pub buffer_cells: usize,
    /// EPD: discard a whole new frame when the buffer holds more than this many cells as its
    /// first cell arrives. `None` disables EPD.
    pub epd_threshold: Option<usize>,
    /// PPD: once a cell of a frame is lost, discard the rest of the frame except its last cell.
    pub ppd: bool,
    /// Discard CLP = 1 cells when the buffer holds this many cells or more.
    pub clp1_threshold: Option<usize>,
    /// Set EFCI on user data cells accepted while the buffer holds this many cells or more.
    pub efci_threshold: Option<usize>,
    /// Each category's own queue limit and thresholds, indexed by
    /// [`ServiceCategory::priority`]; all unset shares the buffer as one pool.
    pub categories: [CategoryLimits; 4],
    /// Slotted line (cell slots on a fixed grid) or not (see the module doc).
    pub slotted: bool,
    /// How far the line's transmit clock runs off the nominal rate, in parts per million (a
    /// host adapter's own oscillator against the switch's). A busy period keeps the nominal
    /// cell time; one that starts after an idle line starts on the grid displaced by the
    /// offset accumulated since time 0 (modulo a cell time), so the port's slots drift
    /// against every other port's instead of staying in phase with them.
    pub clock_offset_ppm: i32,
}

impl PortConfig {
    /// A plain port: `buffer_cells` of buffer on `line`, no EPD/PPD/CLP/EFCI, slotted.
    pub fn new(line: LineRate, buffer_cells: usize) -> PortConfig {
        PortConfig {
            line,
            buffer_cells,
            epd_threshold: None,
            ppd: false,
            clp1_threshold: None,
            efci_threshold: None,
            categories: [CategoryLimits::default(); 4],
            slotted: true,
            clock_offset_ppm: 0,
        }
    }
}

/// One service category's queue in a port's buffer: its size and discard thresholds, in
/// cells, beside the port-wide ones (a cell is refused when either refuses it). Switches of
/// the TM 4.0 era kept a queue per category (or per priority) with its own size, CLP = 1
/// threshold and EPD threshold, so that best-effort cells cannot take the buffer of the
/// guaranteed categories, and tagged cells are shed before untagged ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CategoryLimits {
    /// The most cells of this category the buffer holds.
    pub buffer_cells: Option<usize>,
    /// Discard this category's CLP = 1 cells when its queue holds this many cells or more.
    pub clp1_threshold: Option<usize>,
    /// EPD: discard a new frame of this category when its queue holds more than this many.
    pub epd_threshold: Option<usize>,
}

/// A [`CategoryLimits`] whose threshold leaves no room below the queue's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("{name} threshold {threshold} must be below the queue's {buffer_cells} cells")]
pub struct CategoryLimitsError {
    /// `"CLP=1"` or `"EPD"`.
    pub name: &'static str,
    /// The threshold, in cells.
    pub threshold: usize,
    /// The queue's size, in cells.
    pub buffer_cells: usize,
}

impl CategoryLimits {
    /// Checks that each threshold lies below the queue's size (a threshold at or above it
    /// would never act, and CLP = 0 cells keep the room above the CLP = 1 threshold).
    pub fn validate(&self) -> Result<(), CategoryLimitsError> {
        let Some(buffer_cells) = self.buffer_cells else {
            return Ok(());
        };
        for (name, t) in [("CLP=1", self.clp1_threshold), ("EPD", self.epd_threshold)] {
            if let Some(threshold) = t.filter(|&t| t >= buffer_cells) {
                return Err(CategoryLimitsError {
                    name,
                    threshold,
                    buffer_cells,
                });
            }
        }
        Ok(())
    }

    /// Whether a new frame meeting `queued` cells of its category is discarded by EPD.
    fn over_epd(&self, queued: usize) -> bool {
        self.epd_threshold.is_some_and(|t| queued > t)
    }

    /// Whether a cell (CLP = 1 if `clp`) meeting `queued` cells of its category is refused,
    /// and why.
    fn refuses(&self, queued: usize, clp: bool) -> Option<DropReason> {
        if clp && self.clp1_threshold.is_some_and(|t| queued >= t) {
            Some(DropReason::ClpThreshold)
        } else if self.buffer_cells.is_some_and(|b| queued >= b) {
            Some(DropReason::BufferFull)
        } else {
            None
        }
    }

    /// Whether `n` more cells (CLP = 0, a new frame) stay within the queue's size and EPD.
    fn takes(&self, queued: usize, n: usize) -> bool {
        self.buffer_cells.is_none_or(|b| queued + n <= b) && !self.over_epd(queued)
    }
}

/// Port-wide counters, like an ATM switch port's management counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// Cells offered to the port.
    pub cells_in: u64,
    /// Cells transmitted.
    pub cells_out: u64,
    /// Cells lost to a full buffer.
    pub dropped_buffer_full: u64,
    /// Cells discarded by EPD.
    pub dropped_epd: u64,
    /// Cells discarded by PPD.
    pub dropped_ppd: u64,
    /// CLP = 1 cells discarded at the CLP threshold.
    pub dropped_clp: u64,
    /// Cells on VCs not set up on the port.
    pub dropped_unknown_vc: u64,
    /// Frames discarded whole by EPD.
    pub frames_epd: u64,
    /// Frames cut short by PPD.
    pub frames_ppd: u64,
    /// Cells marked with EFCI.
    pub efci_marked: u64,
    /// Largest buffer occupancy seen, in cells.
    pub max_occupancy: u64,
}

impl PortCounters {
    /// Cells discarded for any reason.
    pub fn dropped(&self) -> u64 {
        self.dropped_buffer_full
            + self.dropped_epd
            + self.dropped_ppd
            + self.dropped_clp
            + self.dropped_unknown_vc
    }
}

/// Per-VC counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VcCounters {
    /// Cells offered.
    pub cells_in: u64,
    /// Cells transmitted.
    pub cells_out: u64,
    /// Cells discarded (any reason).
    pub cells_dropped: u64,
    /// Frames discarded whole by EPD.
    pub frames_epd: u64,
    /// Frames cut short by PPD.
    pub frames_ppd: u64,
}

/// Where a VC is in its current AAL5 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum FrameState {
    /// The next user data cell starts a frame.
    #[default]
    BetweenFrames,
    /// Inside a frame whose cells are being accepted (or lost without PPD).
    Accepting,
    /// EPD: discarding the whole frame, its last cell included.
    DiscardingWhole,
    /// PPD: discarding up to, not including, the frame's last cell.
    DiscardingTail,
}

/// One VC's share of a port's buffer, beside the port-wide limits (a VC's cells are refused
/// when either is reached).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VcLimits {
    /// The most cells of this VC the buffer holds.
    pub buffer_cells: Option<usize>,
    /// EPD: discard a new frame of this VC when it has more than this many cells queued.
    pub epd_threshold: Option<usize>,
}

#[derive(Debug, Clone, Copy, Default)]
struct VcState {
    registered: bool,
    category: ServiceCategory,
    frame: FrameState,
    counters: VcCounters,
    limits: VcLimits,
    /// Cells of this VC in the buffer.
    queued: usize,
}

impl VcState {
    fn over_epd(&self) -> bool {
        self.limits.epd_threshold.is_some_and(|t| self.queued > t)
    }

    fn full(&self) -> bool {
        self.limits.buffer_cells.is_some_and(|b| self.queued >= b)
    }

    /// Whether `n` more cells stay within both limits.
    fn takes(&self, n: usize) -> bool {
        self.limits
            .buffer_cells
            .is_none_or(|b| self.queued + n <= b)
            && !self.over_epd()
    }
}

#[derive(Debug, Clone, Copy)]
struct Queued {
    cell: CellMeta,
    enqueued_ns: u64,
}

/// Queues preallocated up to this many cells each; beyond it they grow once and stay grown.
const PREALLOCATE_LIMIT: usize = 1 << 16;

/// One output port of an ATM switch.
#[derive(Debug, Clone)]
pub struct OutputPort {
    config: PortConfig,
    queues: [VecDeque<Queued>; 4],
    nonempty: u8,
    occupancy: usize,
    vcs: Vec<VcState>,
    counters: PortCounters,
    // The slot grid: slot k starts at epoch + ⌊k · num / den⌋. `slot_ns` is the start of the
    // next free slot and `slot_rem` the remainder (k · num) mod den, stepped without division.
    epoch_ns: u64,
    slot_ns: u64,
    slot_rem: u128,
    step_whole: u64,
    step_rem: u128,
    den: u128,
}

impl OutputPort {
    /// A port with no VCs set up.
    pub fn new(config: PortConfig) -> OutputPort {
        let cell = config.line.cell_time();
        let (num, den) = (cell.numer(), cell.denom());
        let capacity = config.buffer_cells.min(PREALLOCATE_LIMIT);
        OutputPort {
            config,
            queues: std::array::from_fn(|_| VecDeque::with_capacity(capacity)),
            nonempty: 0,
            occupancy: 0,
            vcs: Vec::new(),
            counters: PortCounters::default(),
            epoch_ns: 0,
            slot_ns: 0,
            slot_rem: 0,
            step_whole: u64::try_from(num / den).unwrap_or(u64::MAX),
            step_rem: num % den,
            den,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PortConfig {
        &self.config
    }

    /// Sets up `vc` in `category` (resetting its state and counters if it was set up).
    pub fn set_vc(&mut self, vc: VcId, category: ServiceCategory) {
        let index = vc.0 as usize;
        if self.vcs.len() <= index {
            self.vcs.resize(index + 1, VcState::default());
        }
        self.vcs[index] = VcState {
            registered: true,
            category,
            ..VcState::default()
        };
    }

    /// Limits `vc`'s share of the buffer (a VC not set up is left alone).
    pub fn set_vc_limits(&mut self, vc: VcId, limits: VcLimits) {
        if let Some(state) = self.vcs.get_mut(vc.0 as usize) {
            state.limits = limits;
        }
    }

    /// Sets up a new VC with the next free index.
    pub fn add_vc(&mut self, category: ServiceCategory) -> VcId {
        let vc = VcId(u32::try_from(self.vcs.len()).unwrap_or(u32::MAX));
        self.set_vc(vc, category);
        vc
    }

    /// Cells in the buffer (not counting one being transmitted).
    pub fn occupancy(&self) -> usize {
        self.occupancy
    }

    /// Cells queued in one category.
    pub fn queue_len(&self, category: ServiceCategory) -> usize {
        self.queues[category.priority()].len()
    }

    /// Port counters.
    pub fn counters(&self) -> &PortCounters {
        &self.counters
    }

    /// Counters of one VC, if it is set up.
    pub fn vc_counters(&self, vc: VcId) -> Option<&VcCounters> {
        self.vcs
            .get(vc.0 as usize)
            .filter(|s| s.registered)
            .map(|s| &s.counters)
    }

    /// Offers a cell arriving at `now_ns`.
    #[inline]
    pub fn enqueue(&mut self, now_ns: u64, cell: CellMeta) -> Verdict {
        self.counters.cells_in += 1;
        let occupancy = self.occupancy;
        let config = &self.config;
        let Some(vc) = self
            .vcs
            .get_mut(cell.vc.0 as usize)
            .filter(|s| s.registered)
        else {
            self.counters.dropped_unknown_vc += 1;
            return Verdict::Dropped(DropReason::UnknownVc);
        };
        vc.counters.cells_in += 1;
        let user = cell.pti.is_user_data();
        let end = cell.is_end_of_frame();
        let category = &config.categories[vc.category.priority()];
        let category_queued = self.queues[vc.category.priority()].len();

        if user {
            match vc.frame {
                FrameState::DiscardingWhole => {
                    if end {
                        vc.frame = FrameState::BetweenFrames;
                    }
                    vc.counters.cells_dropped += 1;
                    self.counters.dropped_epd += 1;
                    return Verdict::Dropped(DropReason::Epd);
                }
                FrameState::DiscardingTail if !end => {
                    vc.counters.cells_dropped += 1;
                    self.counters.dropped_ppd += 1;
                    return Verdict::Dropped(DropReason::Ppd);
                }
                FrameState::DiscardingTail => {
                    // The frame's last cell is kept so that the next frame stays delimited.
                    vc.frame = FrameState::Accepting;
                }
                FrameState::BetweenFrames => {
                    if config.epd_threshold.is_some_and(|t| occupancy > t)
                        || vc.over_epd()
                        || category.over_epd(category_queued)
                    {
                        vc.frame = if end {
                            FrameState::BetweenFrames
                        } else {
                            FrameState::DiscardingWhole
                        };
                        vc.counters.cells_dropped += 1;
                        vc.counters.frames_epd += 1;
                        self.counters.dropped_epd += 1;
                        self.counters.frames_epd += 1;
                        return Verdict::Dropped(DropReason::Epd);
                    }
                }
                FrameState::Accepting => {}
            }
        }

        let refusal = if cell.clp && config.clp1_threshold.is_some_and(|t| occupancy >= t) {
            Some(DropReason::ClpThreshold)
        } else if occupancy >= config.buffer_cells || vc.full() {
            Some(DropReason::BufferFull)
        } else {
            category.refuses(category_queued, cell.clp)
        };
        if let Some(reason) = refusal {
            vc.counters.cells_dropped += 1;
            match reason {
                DropReason::ClpThreshold => self.counters.dropped_clp += 1,
                _ => self.counters.dropped_buffer_full += 1,
            }
            if user {
                vc.frame = if end {
                    FrameState::BetweenFrames
                } else if config.ppd {
                    if vc.frame != FrameState::DiscardingTail {
                        vc.counters.frames_ppd += 1;
                        self.counters.frames_ppd += 1;
                    }
                    FrameState::DiscardingTail
                } else {
                    FrameState::Accepting
                };
            }
            return Verdict::Dropped(reason);
        }

        if user {
            vc.frame = if end {
                FrameState::BetweenFrames
            } else {
                FrameState::Accepting
            };
        }
        let mut cell = cell;
        if user && config.efci_threshold.is_some_and(|t| occupancy >= t) {
            cell.pti = cell.pti.with_congestion();
            self.counters.efci_marked += 1;
        }
        let priority = vc.category.priority();
        vc.queued += 1;
        if occupancy == 0 && self.slot_ns < now_ns {
            self.realign(now_ns);
        }
        self.queues[priority].push_back(Queued {
            cell,
            enqueued_ns: now_ns,
        });
        self.nonempty |= 1 << priority;
        self.occupancy += 1;
        self.counters.max_occupancy = self.counters.max_occupancy.max(self.occupancy as u64);
        Verdict::Queued
    }

    /// Offers the `cells` cells of AAL5 frame `frame` on `vc`, all arriving at `now_ns` (a
    /// host handing a whole packet to its adapter): exactly `cells` calls of
    /// [`OutputPort::enqueue`], the last marked end of frame, but in one step when the whole
    /// frame is accepted untouched. Returns how many cells were queued.
    pub fn enqueue_frame(&mut self, now_ns: u64, vc: VcId, frame: u32, cells: u32) -> u32 {
        let n = cells as usize;
        let occupancy = self.occupancy;
        let config = &self.config;
        let queues = &self.queues;
        // Whole frame fits, no discard or marking threshold is reached: nothing per cell.
        let plain = n > 0
            && occupancy + n <= config.buffer_cells
            && config.epd_threshold.is_none_or(|t| occupancy <= t)
            && config.efci_threshold.is_none_or(|t| occupancy + n <= t);
        let state = self.vcs.get_mut(vc.0 as usize).filter(|s| {
            let priority = s.category.priority();
            s.registered
                && s.frame == FrameState::BetweenFrames
                && s.takes(n)
                && config.categories[priority].takes(queues[priority].len(), n)
        });
        let (true, Some(state)) = (plain, state) else {
            return (0..cells)
                .map(|j| self.enqueue(now_ns, CellMeta::user_data(vc, frame, j + 1 == cells)))
                .filter(|v| *v == Verdict::Queued)
                .count() as u32;
        };
        state.counters.cells_in += u64::from(cells);
        state.queued += n;
        let priority = state.category.priority();
        self.counters.cells_in += u64::from(cells);
        if occupancy == 0 && self.slot_ns < now_ns {
            self.realign(now_ns);
        }
        let queue = &mut self.queues[priority];
        for j in 0..cells {
            queue.push_back(Queued {
                cell: CellMeta::user_data(vc, frame, j + 1 == cells),
                enqueued_ns: now_ns,
            });
        }
        self.nonempty |= 1 << priority;
        self.occupancy += n;
        self.counters.max_occupancy = self.counters.max_occupancy.max(self.occupancy as u64);
        cells
    }

    /// Moves the next free slot to the first slot at or after `now_ns` (idle line).
    fn realign(&mut self, now_ns: u64) {
        if !self.config.slotted {
            self.epoch_ns = now_ns;
            self.slot_ns = now_ns;
            self.slot_rem = 0;
            return;
        }
        // A few steps are cheaper than a 128-bit division when the line was idle briefly.
        for _ in 0..4 {
            if self.slot_ns >= now_ns {
                return;
            }
            self.step_slot();
        }
        if self.slot_ns >= now_ns {
            return;
        }
        let line = self.config.line;
        if self.config.clock_offset_ppm != 0 {
            self.epoch_ns = self.drifted_epoch(now_ns);
        }
        let k = line.first_slot_at_or_after(self.epoch_ns, now_ns);
        let cell = line.cell_time();
        self.slot_ns = line.cell_start_ns(self.epoch_ns, k);
        self.slot_rem = (u128::from(k) * cell.numer()) % cell.denom();
    }

    /// The origin of the slot grid at `now_ns` for a clock `clock_offset_ppm` off: the phase it
    /// has drifted by since time 0, within one cell time (never after `now_ns`).
    fn drifted_epoch(&self, now_ns: u64) -> u64 {
        let drift = i128::from(now_ns) * i128::from(self.config.clock_offset_ppm) / 1_000_000;
        let cell = i128::from(self.step_whole.max(1));
        let phase = drift.rem_euclid(cell) as u64;
        if phase <= now_ns {
            phase
        } else {
            0
        }
    }

    #[inline]
    fn step_slot(&mut self) {
        self.slot_ns = self.slot_ns.saturating_add(self.step_whole);
        self.slot_rem += self.step_rem;
        if self.slot_rem >= self.den {
            self.slot_rem -= self.den;
            self.slot_ns = self.slot_ns.saturating_add(1);
        }
    }

    /// When the next cell will start transmission, if any is queued.
    #[inline]
    pub fn poll_timeout(&self) -> Option<u64> {
        (self.occupancy > 0).then_some(self.slot_ns)
    }

    /// When the next end-of-frame cell will have left if no other cell arrives: the cells
    /// ahead of it in service order (higher categories first, FIFO within one) each take one
    /// slot. `None` if no queued cell ends a frame. A real-time driver sleeps until then
    /// instead of waking for every cell, and asks again after each arrival.
    pub fn next_end_of_frame_ns(&self) -> Option<u64> {
        let mut ahead = 0u64;
        for queue in &self.queues {
            match queue.iter().position(|q| q.cell.is_end_of_frame()) {
                Some(p) => return Some(self.slot_end_after(ahead + p as u64)),
                None => ahead += queue.len() as u64,
            }
        }
        None
    }

    /// The end of the slot `cells_before` slots after the next free one.
    fn slot_end_after(&self, cells_before: u64) -> u64 {
        let steps = u128::from(cells_before) + 1;
        let rem = self.slot_rem + steps * self.step_rem;
        let whole = u128::from(self.step_whole) * steps + rem / self.den;
        self.slot_ns
            .saturating_add(u64::try_from(whole).unwrap_or(u64::MAX))
    }

    /// Takes the cell that starts transmission in the slot beginning at or before `now_ns`,
    /// choosing the highest-priority queue. Call it at [`OutputPort::poll_timeout`] for exact
    /// priority decisions.
    #[inline]
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Departure> {
        if self.nonempty == 0 || self.slot_ns > now_ns {
            return None;
        }
        let priority = self.nonempty.trailing_zeros() as usize;
        let queue = &mut self.queues[priority];
        let queued = queue.pop_front()?;
        if queue.is_empty() {
            self.nonempty &= !(1 << priority);
        }
        self.occupancy -= 1;
        let tx_start_ns = self.slot_ns;
        self.step_slot();
        self.counters.cells_out += 1;
        if let Some(vc) = self.vcs.get_mut(queued.cell.vc.0 as usize) {
            vc.counters.cells_out += 1;
            vc.queued = vc.queued.saturating_sub(1);
        }
        Some(Departure {
            cell: queued.cell,
            enqueued_ns: queued.enqueued_ns,
            tx_start_ns,
            tx_end_ns: self.slot_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cell::{CellHeader, HeaderFormat};
    use crate::link::PhysicalLayer;
    use proptest::prelude::*;

    const CELL: u64 = 10_000; // a 100,000 cells/s line: 10 µs per cell

    fn line() -> LineRate {
        LineRate::from_cells_per_second(100_000).unwrap()
    }

    fn port(buffer: usize) -> OutputPort {
        OutputPort::new(PortConfig::new(line(), buffer))
    }

    /// Drains the port, returning every departure.
    fn drain(p: &mut OutputPort) -> Vec<Departure> {
        let mut out = Vec::new();
        while let Some(t) = p.poll_timeout() {
            out.push(p.poll_transmit(t).unwrap());
        }
        out
    }

    #[test]
    fn serves_one_cell_per_cell_time_on_the_slot_grid() {
        let mut p = port(100);
        let vc = p.add_vc(ServiceCategory::Ubr);
        assert_eq!(p.poll_timeout(), None);
        for _ in 0..3 {
            assert_eq!(
                p.enqueue(25_000, CellMeta::user_data(vc, 0, false)),
                Verdict::Queued
            );
        }
        assert_eq!(p.poll_timeout(), Some(30_000)); // next slot boundary
        assert!(p.poll_transmit(29_999).is_none());
        let d = drain(&mut p);
        let starts: Vec<u64> = d.iter().map(|d| d.tx_start_ns).collect();
        assert_eq!(starts, vec![30_000, 40_000, 50_000]);
        assert_eq!(d[2].tx_end_ns, 60_000);
        assert_eq!(d[0].enqueued_ns, 25_000);
        // A cell arriving while the last one is on the line waits for the end of it.
        p.enqueue(55_000, CellMeta::user_data(vc, 0, false));
        assert_eq!(p.poll_timeout(), Some(60_000));
        drain(&mut p);
        // Long idle: aligned to the grid again.
        p.enqueue(1_000_001, CellMeta::user_data(vc, 0, false));
        assert_eq!(p.poll_timeout(), Some(1_010_000));
    }

    #[test]
    fn an_offset_clock_drifts_against_the_grid_between_busy_periods() {
        let mut config = PortConfig::new(line(), 10);
        config.clock_offset_ppm = 20;
        let mut p = OutputPort::new(config);
        let vc = p.add_vc(ServiceCategory::Ubr);
        // 20 ppm of 1 s is 20 µs, two cell times: back on the nominal grid.
        p.enqueue(1_000_000_000, CellMeta::user_data(vc, 0, false));
        assert_eq!(p.poll_timeout(), Some(1_000_000_000));
        drain(&mut p);
        // 20 ppm of 1.1 s is 22 µs: the grid has moved 2 µs.
        p.enqueue(1_100_000_000, CellMeta::user_data(vc, 0, false));
        p.enqueue(1_100_000_000, CellMeta::user_data(vc, 0, false));
        let d = drain(&mut p);
        assert_eq!(d[0].tx_start_ns, 1_100_002_000);
        assert_eq!(
            d[1].tx_start_ns, 1_100_012_000,
            "a busy period keeps the cell time"
        );
        // Negative offsets drift the other way.
        let mut config = PortConfig::new(line(), 10);
        config.clock_offset_ppm = -20;
        let mut p = OutputPort::new(config);
        let vc = p.add_vc(ServiceCategory::Ubr);
        p.enqueue(1_100_000_000, CellMeta::user_data(vc, 0, false));
        assert_eq!(p.poll_timeout(), Some(1_100_008_000));
    }

    #[test]
    fn unslotted_line_starts_at_once() {
        let mut config = PortConfig::new(line(), 10);
        config.slotted = false;
        let mut p = OutputPort::new(config);
        let vc = p.add_vc(ServiceCategory::Ubr);
        p.enqueue(25_000, CellMeta::user_data(vc, 0, false));
        p.enqueue(25_000, CellMeta::user_data(vc, 0, false));
        let d = drain(&mut p);
        assert_eq!(d[0].tx_start_ns, 25_000);
        assert_eq!(d[1].tx_start_ns, 35_000);
    }

    #[test]
    fn slots_do_not_drift_at_a_fractional_cell_time() {
        let oc3 = PhysicalLayer::Oc3c.line_rate();
        let mut p = OutputPort::new(PortConfig::new(oc3, 1 << 20));
        let vc = p.add_vc(ServiceCategory::Ubr);
        let n = 1_000_000u64;
        for _ in 0..n {
            p.enqueue(0, CellMeta::user_data(vc, 0, true));
        }
        let d = drain(&mut p);
        for (k, dep) in d.iter().enumerate().step_by(9973) {
            assert_eq!(dep.tx_start_ns, oc3.cell_start_ns(0, k as u64));
        }
        assert_eq!(d.last().unwrap().tx_end_ns, oc3.cell_start_ns(0, n));
    }

    #[test]
    fn strict_priority_at_cell_level() {
        let mut p = port(100);
        let ubr = p.add_vc(ServiceCategory::Ubr);
        let nrt = p.add_vc(ServiceCategory::NrtVbr);
        let rt = p.add_vc(ServiceCategory::RtVbr);
        let cbr = p.add_vc(ServiceCategory::Cbr);
        for vc in [ubr, ubr, nrt, rt, cbr] {
            p.enqueue(0, CellMeta::user_data(vc, 0, true));
        }
        // The UBR cell chosen at slot 0 occupies the line; a CBR cell arriving meanwhile waits
        // one cell time at most (non-preemptive at cell granularity).
        let first = p.poll_transmit(0).unwrap();
        assert_eq!(first.cell.vc, cbr);
        p.enqueue(5_000, CellMeta::user_data(cbr, 1, true));
        let order: Vec<VcId> = drain(&mut p).iter().map(|d| d.cell.vc).collect();
        assert_eq!(order, vec![cbr, rt, nrt, ubr, ubr]);
        assert_eq!(p.queue_len(ServiceCategory::Ubr), 0);
    }

    #[test]
    fn buffer_overflow_and_counters() {
        let mut p = port(2);
        let vc = p.add_vc(ServiceCategory::Ubr);
        let verdicts: Vec<Verdict> = (0..4)
            .map(|_| p.enqueue(0, CellMeta::user_data(vc, 0, true)))
            .collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::Queued,
                Verdict::Queued,
                Verdict::Dropped(DropReason::BufferFull),
                Verdict::Dropped(DropReason::BufferFull)
            ]
        );
        assert_eq!(
            p.enqueue(0, CellMeta::user_data(VcId(7), 0, true)),
            Verdict::Dropped(DropReason::UnknownVc)
        );
        drain(&mut p);
        let c = *p.counters();
        assert_eq!((c.cells_in, c.cells_out, c.dropped()), (5, 2, 3));
        assert_eq!(c.max_occupancy, 2);
        let v = *p.vc_counters(vc).unwrap();
        assert_eq!((v.cells_in, v.cells_out, v.cells_dropped), (4, 2, 2));
        assert!(p.vc_counters(VcId(7)).is_none());
    }

    #[test]
    fn ppd_drops_the_tail_but_keeps_the_last_cell() {
        let mut config = PortConfig::new(line(), 2);
        config.ppd = true;
        let mut p = OutputPort::new(config);
        let vc = p.add_vc(ServiceCategory::Ubr);
        // A 5-cell frame into a 2-cell buffer, all at once.
        let v: Vec<Verdict> = (0..5)
            .map(|i| p.enqueue(0, CellMeta::user_data(vc, 1, i == 4)))
            .collect();
        use DropReason::*;
        assert_eq!(
            v,
            vec![
                Verdict::Queued,
                Verdict::Queued,
                Verdict::Dropped(BufferFull),
                Verdict::Dropped(Ppd),
                Verdict::Dropped(BufferFull) // the kept last cell still finds the buffer full
            ]
        );
        // With room again, the EOM survives PPD.
        drain(&mut p);
        p.enqueue(100_000, CellMeta::user_data(vc, 2, false));
        p.enqueue(100_000, CellMeta::user_data(vc, 2, false));
        assert_eq!(
            p.enqueue(100_000, CellMeta::user_data(vc, 2, false)),
            Verdict::Dropped(BufferFull)
        );
        p.poll_transmit(110_000).unwrap();
        assert_eq!(
            p.enqueue(110_000, CellMeta::user_data(vc, 2, false)),
            Verdict::Dropped(Ppd)
        );
        assert_eq!(
            p.enqueue(110_000, CellMeta::user_data(vc, 2, true)),
            Verdict::Queued
        );
        // The next frame is accepted normally.
        p.poll_transmit(120_000).unwrap();
        assert_eq!(
            p.enqueue(120_000, CellMeta::user_data(vc, 3, true)),
            Verdict::Queued
        );
        assert_eq!(p.counters().frames_ppd, 2);
        assert_eq!(p.vc_counters(vc).unwrap().frames_ppd, 2);
    }

    #[test]
    fn a_vc_is_held_to_its_share_of_the_buffer() {
        let mut p = port(100);
        let a = p.add_vc(ServiceCategory::Ubr);
        let b = p.add_vc(ServiceCategory::Ubr);
        let limits = VcLimits {
            buffer_cells: Some(4),
            epd_threshold: Some(2),
        };
        p.set_vc_limits(a, limits);
        // A frame of 6 on `a` starts below its EPD threshold: 4 fit, the rest are refused.
        assert_eq!(p.enqueue_frame(0, a, 1, 6), 4);
        assert_eq!(p.vc_counters(a).unwrap().cells_dropped, 2);
        assert_eq!(p.counters().dropped_buffer_full, 2);
        // `a` holds 4 > 2: its next frame is discarded whole, while `b` still has the buffer.
        assert_eq!(p.enqueue_frame(0, a, 2, 3), 0);
        assert_eq!(p.vc_counters(a).unwrap().frames_epd, 1);
        assert_eq!(p.enqueue_frame(0, b, 1, 50), 50);
        // Once `a`'s cells have left, it is below its limits again.
        drain(&mut p);
        assert_eq!(p.enqueue_frame(10_000_000, a, 3, 3), 3);
    }

    #[test]
    fn epd_discards_whole_frames_above_the_threshold() {
        let mut config = PortConfig::new(line(), 10);
        config.epd_threshold = Some(2);
        let mut p = OutputPort::new(config);
        let a = p.add_vc(ServiceCategory::Ubr);
        let b = p.add_vc(ServiceCategory::Ubr);
        // Frame on `a` starts below the threshold and is accepted whole, even past it.
        for i in 0..5 {
            assert_eq!(
                p.enqueue(0, CellMeta::user_data(a, 1, i == 4)),
                Verdict::Queued
            );
        }
        // Frame on `b` starts above it: all its cells go, EOM included.
        for i in 0..3 {
            assert_eq!(
                p.enqueue(0, CellMeta::user_data(b, 1, i == 2)),
                Verdict::Dropped(DropReason::Epd)
            );
        }
        // Single-cell frame above the threshold.
        assert_eq!(
            p.enqueue(0, CellMeta::user_data(b, 2, true)),
            Verdict::Dropped(DropReason::Epd)
        );
        drain(&mut p);
        assert_eq!(
            p.enqueue(1_000_000, CellMeta::user_data(b, 3, true)),
            Verdict::Queued
        );
        assert_eq!(p.counters().frames_epd, 2);
        assert_eq!(p.vc_counters(b).unwrap().frames_epd, 2);
        assert_eq!(p.counters().dropped_epd, 4);
        // OAM cells are not part of frames.
        let oam = CellMeta {
            pti: PayloadType::OamEndToEnd,
            ..CellMeta::user_data(a, 0, false)
        };
        for _ in 0..3 {
            p.enqueue(1_000_000, oam);
        }
        assert_eq!(p.enqueue(1_000_000, oam), Verdict::Queued);
    }

    #[test]
    fn clp_threshold_and_efci_marking() {
        let mut config = PortConfig::new(line(), 10);
        config.clp1_threshold = Some(2);
        config.efci_threshold = Some(1);
        let mut p = OutputPort::new(config);
        let vc = p.add_vc(ServiceCategory::Ubr);
        let tagged = CellMeta {
            clp: true,
            ..CellMeta::user_data(vc, 0, true)
        };
        assert_eq!(p.enqueue(0, tagged), Verdict::Queued);
        assert_eq!(
            p.enqueue(0, CellMeta::user_data(vc, 1, true)),
            Verdict::Queued
        );
        assert_eq!(
            p.enqueue(0, tagged),
            Verdict::Dropped(DropReason::ClpThreshold)
        );
        assert_eq!(
            p.enqueue(0, CellMeta::user_data(vc, 2, true)),
            Verdict::Queued
        );
        let d = drain(&mut p);
        assert!(!d[0].cell.pti.is_congestion_experienced());
        assert!(d[1].cell.pti.is_congestion_experienced());
        assert!(d[1].cell.is_end_of_frame());
        assert_eq!(p.counters().efci_marked, 2);
        assert_eq!(p.counters().dropped_clp, 1);
    }

    /// A port whose UBR queue holds at most 6 cells, dropping CLP = 1 cells from 3 on.
    fn port_with_a_ubr_queue(epd_threshold: Option<usize>) -> OutputPort {
        let mut config = PortConfig::new(line(), 100);
        config.categories[ServiceCategory::Ubr.priority()] = CategoryLimits {
            buffer_cells: Some(6),
            clp1_threshold: Some(3),
            epd_threshold,
        };
        OutputPort::new(config)
    }

    #[test]
    fn a_category_is_held_to_its_queue_and_sheds_tagged_cells_first() {
        let mut p = port_with_a_ubr_queue(None);
        let ubr = p.add_vc(ServiceCategory::Ubr);
        let cbr = p.add_vc(ServiceCategory::Cbr);
        let tagged = CellMeta {
            clp: true,
            ..CellMeta::user_data(ubr, 0, true)
        };
        // Tagged cells enter below the CLP=1 threshold (3 cells) and are shed from there on.
        for _ in 0..3 {
            assert_eq!(p.enqueue(0, tagged), Verdict::Queued);
        }
        assert_eq!(
            p.enqueue(0, tagged),
            Verdict::Dropped(DropReason::ClpThreshold)
        );
        // Untagged cells keep the room up to the queue's size, and no further.
        assert_eq!(p.enqueue_frame(0, ubr, 1, 5), 3);
        assert_eq!(p.queue_len(ServiceCategory::Ubr), 6);
        assert_eq!(p.counters().dropped_clp, 1);
        assert_eq!(p.counters().dropped_buffer_full, 2);
        // The full UBR queue takes nothing from the other categories' room.
        assert_eq!(p.enqueue_frame(0, cbr, 1, 50), 50);
        drain(&mut p);
        assert_eq!(p.enqueue_frame(10_000_000, ubr, 2, 6), 6);
    }

    #[test]
    fn epd_per_category_discards_new_frames_of_that_category_only() {
        let mut p = port_with_a_ubr_queue(Some(2));
        let a = p.add_vc(ServiceCategory::Ubr);
        let b = p.add_vc(ServiceCategory::Ubr);
        let vbr = p.add_vc(ServiceCategory::NrtVbr);
        // `a`'s frame starts below the UBR queue's EPD threshold and keeps going past it.
        assert_eq!(p.enqueue_frame(0, a, 1, 4), 4);
        // `b` shares the UBR queue: its new frame is discarded whole, EOM included.
        assert_eq!(p.enqueue_frame(0, b, 1, 2), 0);
        assert_eq!(p.vc_counters(b).unwrap().frames_epd, 1);
        assert_eq!(p.counters().dropped_epd, 2);
        // Another category's frame does not see the UBR queue.
        assert_eq!(p.enqueue_frame(0, vbr, 1, 10), 10);
    }

    #[test]
    fn category_limits_are_validated() {
        let limits = |clp1, epd| CategoryLimits {
            buffer_cells: Some(100),
            clp1_threshold: clp1,
            epd_threshold: epd,
        };
        assert_eq!(limits(Some(99), Some(50)).validate(), Ok(()));
        let err = limits(Some(100), None).validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "CLP=1 threshold 100 must be below the queue's 100 cells"
        );
        let err = limits(None, Some(120)).validate().unwrap_err();
        assert_eq!(err.name, "EPD");
        // Without a size of its own, the queue's thresholds only need the port's buffer.
        let unsized_queue = CategoryLimits {
            buffer_cells: None,
            ..limits(Some(5000), None)
        };
        assert_eq!(unsized_queue.validate(), Ok(()));
    }

    #[test]
    fn meta_from_a_parsed_cell() {
        let mut repr = CellRepr::idle(HeaderFormat::Uni);
        repr.header = CellHeader::user_data(HeaderFormat::Uni, 1, 42, true);
        repr.header.clp = true;
        let meta = CellMeta::from_repr(&repr, VcId(3), 9);
        assert_eq!(meta.vc, VcId(3));
        assert!(meta.is_end_of_frame() && meta.clp);
        assert_eq!(meta.frame, 9);
        assert!(std::mem::size_of::<CellMeta>() <= 12);
    }

    #[derive(Debug, Clone)]
    struct Arrival {
        gap_ns: u64,
        vc: u32,
        frame_len: u8,
    }

    fn arrivals() -> impl Strategy<Value = Vec<Arrival>> {
        proptest::collection::vec(
            (0u64..20_000, 0u32..4, 1u8..8).prop_map(|(gap_ns, vc, frame_len)| Arrival {
                gap_ns,
                vc,
                frame_len,
            }),
            1..120,
        )
    }

    /// Feeds frames (cells back to back at `arrival.gap`) into `p`, serving it as time goes,
    /// and returns departures.
    fn run(p: &mut OutputPort, frames: &[Arrival]) -> Vec<Departure> {
        let mut now = 0u64;
        let mut out = Vec::new();
        let mut frame_no = [0u32; 4];
        for f in frames {
            now += f.gap_ns;
            frame_no[f.vc as usize] += 1;
            for i in 0..f.frame_len {
                while let Some(t) = p.poll_timeout().filter(|&t| t <= now) {
                    out.push(p.poll_transmit(t).unwrap());
                }
                let last = i + 1 == f.frame_len;
                let _ = p.enqueue(
                    now,
                    CellMeta::user_data(VcId(f.vc), frame_no[f.vc as usize], last),
                );
                now += 1_000;
            }
        }
        out.extend(drain(p));
        out
    }

    fn category_limits() -> impl Strategy<Value = CategoryLimits> {
        (
            proptest::option::of(1usize..20),
            proptest::option::of(0usize..20),
            proptest::option::of(0usize..20),
        )
            .prop_map(
                |(buffer_cells, clp1_threshold, epd_threshold)| CategoryLimits {
                    buffer_cells,
                    clp1_threshold,
                    epd_threshold,
                },
            )
    }

    /// [`run`] without the final drain: the port keeps what is still queued.
    fn run_without_drain(p: &mut OutputPort, frames: &[Arrival]) {
        let mut now = 0u64;
        for (k, f) in frames.iter().enumerate() {
            now += f.gap_ns;
            for i in 0..f.frame_len {
                while let Some(t) = p.poll_timeout().filter(|&t| t <= now) {
                    p.poll_transmit(t);
                }
                let last = i + 1 == f.frame_len;
                let _ = p.enqueue(now, CellMeta::user_data(VcId(f.vc), k as u32, last));
                now += 1_000;
            }
        }
    }

    proptest! {
        /// With no further arrivals, the predicted end of the next frame is the `tx_end` of
        /// the first end-of-frame cell that leaves, whatever the mix of categories.
        #[test]
        fn next_end_of_frame_predicts_the_departure(frames in arrivals(), cut in 0usize..120, slotted: bool) {
            let mut config = PortConfig::new(LineRate::from_cells_per_second(353_207).unwrap(), 500);
            config.slotted = slotted;
            let mut p = OutputPort::new(config);
            for c in ServiceCategory::ALL {
                p.add_vc(c);
            }
            run_without_drain(&mut p, &frames[..cut.min(frames.len())]);
            let predicted = p.next_end_of_frame_ns();
            let first_end = drain(&mut p).into_iter().find(|d| d.cell.is_end_of_frame());
            prop_assert_eq!(predicted, first_end.map(|d| d.tx_end_ns));
        }
    }

    proptest! {
        #[test]
        fn cells_are_conserved_and_buffer_bounded(frames in arrivals(), buffer in 1usize..20, epd: bool, ppd: bool) {
            let mut config = PortConfig::new(line(), buffer);
            config.ppd = ppd;
            config.epd_threshold = epd.then_some(buffer / 2);
            let mut p = OutputPort::new(config);
            for c in ServiceCategory::ALL {
                p.add_vc(c);
            }
            let out = run(&mut p, &frames);
            let c = *p.counters();
            prop_assert_eq!(c.cells_in, c.cells_out + c.dropped());
            prop_assert_eq!(out.len() as u64, c.cells_out);
            prop_assert!(c.max_occupancy as usize <= buffer);
            // One cell per slot, never overlapping, never before its arrival.
            for w in out.windows(2) {
                prop_assert!(w[1].tx_start_ns >= w[0].tx_end_ns);
            }
            for d in &out {
                prop_assert!(d.tx_start_ns >= d.enqueued_ns);
                prop_assert_eq!(d.tx_end_ns - d.tx_start_ns, CELL);
            }
        }

        #[test]
        fn ppd_delivers_a_prefix_and_the_last_cell(frames in arrivals(), buffer in 1usize..12) {
            let mut config = PortConfig::new(line(), buffer);
            config.ppd = true;
            let mut p = OutputPort::new(config);
            for _ in 0..4 {
                p.add_vc(ServiceCategory::Ubr);
            }
            let out = run(&mut p, &frames);
            // Per VC: within each frame the delivered cells are a prefix, then possibly only
            // the EOM, i.e. after a gap nothing but the EOM arrives.
            let mut frame_no = [0u32; 4];
            let mut expected = std::collections::HashMap::new();
            for f in &frames {
                frame_no[f.vc as usize] += 1;
                expected.insert((f.vc, frame_no[f.vc as usize]), f.frame_len);
            }
            let mut delivered: std::collections::HashMap<(u32, u32), Vec<bool>> = Default::default();
            for d in &out {
                delivered.entry((d.cell.vc.0, d.cell.frame)).or_default().push(d.cell.is_end_of_frame());
            }
            for (key, eoms) in delivered {
                let len = usize::from(expected[&key]);
                let non_eom = eoms.iter().filter(|e| !**e).count();
                prop_assert!(non_eom < len);
                // EOM, if delivered, is last.
                if let Some(pos) = eoms.iter().position(|e| *e) {
                    prop_assert_eq!(pos, eoms.len() - 1);
                }
            }
        }

        #[test]
        fn epd_with_headroom_delivers_only_whole_frames(frames in arrivals()) {
            // Frames are at most 7 cells and there is one VC: with 7 cells of headroom above the
            // threshold, an accepted frame always fits, so no frame is ever delivered in part.
            let mut config = PortConfig::new(line(), 17);
            config.epd_threshold = Some(10);
            let mut p = OutputPort::new(config);
            p.add_vc(ServiceCategory::Ubr);
            let frames: Vec<Arrival> = frames.into_iter().map(|f| Arrival { vc: 0, ..f }).collect();
            let out = run(&mut p, &frames);
            prop_assert_eq!(p.counters().dropped_buffer_full, 0);
            let mut per_frame: std::collections::HashMap<u32, usize> = Default::default();
            for d in &out {
                *per_frame.entry(d.cell.frame).or_default() += 1;
            }
            for (i, f) in frames.iter().enumerate() {
                let got = per_frame.get(&(i as u32 + 1)).copied().unwrap_or(0);
                prop_assert!(got == 0 || got == usize::from(f.frame_len));
            }
        }

        #[test]
        fn a_frame_at_once_is_its_cells_one_by_one(
            frames in arrivals(), buffer in 1usize..40, epd: bool, ppd: bool, efci: bool,
            vc_buffer in proptest::option::of(1usize..20), vc_epd in proptest::option::of(0usize..10),
            category in category_limits(),
        ) {
            let mut config = PortConfig::new(line(), buffer);
            config.ppd = ppd;
            config.epd_threshold = epd.then_some(buffer / 2);
            config.efci_threshold = efci.then_some(buffer / 3);
            config.categories[ServiceCategory::NrtVbr.priority()] = category;
            let mut ports = [OutputPort::new(config), OutputPort::new(config)];
            let mut outs = [Vec::new(), Vec::new()];
            for p in &mut ports {
                // VC 3 is not set up.
                for c in &ServiceCategory::ALL[..3] {
                    p.add_vc(*c);
                }
                let limits = VcLimits { buffer_cells: vc_buffer, epd_threshold: vc_epd };
                p.set_vc_limits(VcId(0), limits);
            }
            let mut now = 0u64;
            for (k, f) in frames.iter().enumerate() {
                now += f.gap_ns;
                for (p, out) in ports.iter_mut().zip(&mut outs) {
                    while let Some(t) = p.poll_timeout().filter(|&t| t <= now) {
                        out.push(p.poll_transmit(t).unwrap());
                    }
                }
                let (vc, frame) = (VcId(f.vc), k as u32);
                // Some frames are empty, some cut short (their VC is left mid-frame).
                let n = u32::from(f.frame_len) - u32::from(k % 4 == 0);
                let [one, whole] = &mut ports;
                if k % 5 == 4 {
                    for p in [one, whole] {
                        for _ in 0..n {
                            p.enqueue(now, CellMeta::user_data(vc, frame, false));
                        }
                    }
                    continue;
                }
                let queued = (0..n)
                    .filter(|&j| {
                        one.enqueue(now, CellMeta::user_data(vc, frame, j + 1 == n)) == Verdict::Queued
                    })
                    .count() as u32;
                prop_assert_eq!(whole.enqueue_frame(now, vc, frame, n), queued);
            }
            for (p, out) in ports.iter_mut().zip(&mut outs) {
                out.extend(drain(p));
            }
            prop_assert_eq!(&outs[0], &outs[1]);
            prop_assert_eq!(ports[0].counters(), ports[1].counters());
            for v in 0..4 {
                prop_assert_eq!(ports[0].vc_counters(VcId(v)), ports[1].vc_counters(VcId(v)));
            }
        }

        /// Every category's queue stays within its size, and an untagged cell is refused
        /// (with no EPD or PPD) only by a full queue or a full buffer: never by the CLP=1
        /// threshold below them.
        #[test]
        fn categories_keep_their_limits_and_spare_untagged_cells(
            frames in arrivals(), tags in proptest::collection::vec(any::<bool>(), 120),
            buffer in 1usize..60, limits in proptest::collection::vec(category_limits(), 4),
        ) {
            let mut config = PortConfig::new(line(), buffer);
            for (c, l) in config.categories.iter_mut().zip(&limits) {
                *c = CategoryLimits { epd_threshold: None, ..*l };
            }
            let mut p = OutputPort::new(config);
            for c in ServiceCategory::ALL {
                p.add_vc(c);
            }
            let mut now = 0u64;
            for (k, f) in frames.iter().enumerate() {
                now += f.gap_ns;
                let category = ServiceCategory::ALL[f.vc as usize];
                let size = config.categories[category.priority()].buffer_cells;
                for i in 0..f.frame_len {
                    while let Some(t) = p.poll_timeout().filter(|&t| t <= now) {
                        p.poll_transmit(t);
                    }
                    let queued = p.queue_len(category);
                    let full = size.is_some_and(|b| queued >= b) || p.occupancy() >= buffer;
                    let cell = CellMeta {
                        clp: tags[k],
                        ..CellMeta::user_data(VcId(f.vc), k as u32, i + 1 == f.frame_len)
                    };
                    let verdict = p.enqueue(now, cell);
                    if !cell.clp {
                        prop_assert_eq!(verdict == Verdict::Queued, !full);
                    }
                    for c in ServiceCategory::ALL {
                        let size = config.categories[c.priority()].buffer_cells;
                        prop_assert!(size.is_none_or(|b| p.queue_len(c) <= b));
                    }
                    now += 1_000;
                }
            }
        }

        #[test]
        fn strict_priority_never_serves_a_lower_queue_first(frames in arrivals()) {
            let mut p = port(1000);
            for c in ServiceCategory::ALL {
                p.add_vc(c);
            }
            // Enqueue everything at once, then check the departure order is by category.
            for f in &frames {
                for i in 0..f.frame_len {
                    p.enqueue(0, CellMeta::user_data(VcId(f.vc), 0, i + 1 == f.frame_len));
                }
            }
            let out = drain(&mut p);
            for w in out.windows(2) {
                prop_assert!(w[0].cell.vc.0 <= w[1].cell.vc.0);
            }
        }
    }
}
