//! The generic cell rate algorithm GCRA(T, τ) (ITU-T I.371, ATM Forum TM 4.0), the traffic
//! contracts built from it, a policer (UPC) and a shaper.
//!
//! GCRA(T, τ) says whether a cell arriving at `ta` conforms to a rate of one cell per `T` with
//! a tolerance `τ`. Its two classic forms, virtual scheduling ([`Gcra`]) and the
//! continuous-state leaky bucket ([`LeakyBucket`]), decide identically. T and τ are exact
//! fractions of a nanosecond ([`ExactNs`]); internally all quantities are integers in units of
//! `1/scale` ns, where `scale` is the common denominator, so that a contract such as VBR with
//! MBS = 20 admits exactly 20 back-to-back cells at PCR, not 19 because of a rounding error.

use thiserror::Error;

use crate::time::ExactNs;

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        let r = a % b;
        a = b;
        b = r;
    }
    a
}

/// T and τ on a common integer scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Scaled {
    increment: u128,
    limit: u128,
    scale: u128,
}

impl Scaled {
    fn new(increment: ExactNs, limit: ExactNs) -> Scaled {
        let (a, b) = (increment.denom(), limit.denom());
        let scale = (a / gcd(a, b).max(1)).saturating_mul(b);
        Scaled {
            increment: increment.numer().saturating_mul(scale / a),
            limit: limit.numer().saturating_mul(scale / b),
            scale,
        }
    }

    fn time(&self, ns: u64) -> u128 {
        u128::from(ns).saturating_mul(self.scale)
    }

    /// `scaled` rounded up to whole nanoseconds.
    fn ceil_ns(&self, scaled: u128) -> u64 {
        u64::try_from(scaled.div_ceil(self.scale)).unwrap_or(u64::MAX)
    }
}

/// GCRA(T, τ), virtual scheduling form: a theoretical arrival time (TAT).
///
/// Arrival times must not decrease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gcra {
    params: Scaled,
    tat: u128,
    increment_ns: ExactNs,
    limit_ns: ExactNs,
}

impl Gcra {
    /// GCRA with increment `T` and limit `τ`.
    pub fn new(increment: ExactNs, limit: ExactNs) -> Gcra {
        Gcra {
            params: Scaled::new(increment, limit),
            tat: 0,
            increment_ns: increment,
            limit_ns: limit,
        }
    }

    /// The increment T.
    pub fn increment(&self) -> ExactNs {
        self.increment_ns
    }

    /// The limit τ.
    pub fn limit(&self) -> ExactNs {
        self.limit_ns
    }

    /// Whether a cell arriving at `ta_ns` would conform (no state change).
    pub fn would_conform(&self, ta_ns: u64) -> bool {
        let ta = self.params.time(ta_ns);
        self.tat <= ta.saturating_add(self.params.limit)
    }

    /// Records a conforming cell at `ta_ns`: TAT = max(TAT, ta) + T.
    pub fn commit(&mut self, ta_ns: u64) {
        let ta = self.params.time(ta_ns);
        self.tat = self.tat.max(ta).saturating_add(self.params.increment);
    }

    /// Checks a cell arriving at `ta_ns` and, if it conforms, records it.
    pub fn arrival(&mut self, ta_ns: u64) -> bool {
        let ok = self.would_conform(ta_ns);
        if ok {
            self.commit(ta_ns);
        }
        ok
    }

    /// Records a cell sent by a shaper at `departure_ns`. When that time is this GCRA's
    /// earliest conforming time rounded up to a whole nanosecond, the cell is booked at the
    /// exact earliest time instead, so that the sub-nanosecond rounding does not accumulate.
    pub fn commit_shaped(&mut self, departure_ns: u64) {
        let earliest = self.tat.saturating_sub(self.params.limit);
        let at = if departure_ns <= self.params.ceil_ns(earliest) {
            earliest
        } else {
            self.params.time(departure_ns)
        };
        self.tat = self.tat.max(at).saturating_add(self.params.increment);
    }

    /// The earliest time (whole ns, rounded up) at which a cell would conform: TAT − τ.
    pub fn earliest_conforming_ns(&self) -> u64 {
        self.params
            .ceil_ns(self.tat.saturating_sub(self.params.limit))
    }
}

/// GCRA(T, τ), continuous-state leaky bucket form: content X, last conformance time LCT.
///
/// Arrival times must not decrease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeakyBucket {
    params: Scaled,
    content: u128,
    last_conformance: u128,
}

impl LeakyBucket {
    /// A bucket that drains one unit per ns, gains `T` per cell and holds `T + τ`.
    pub fn new(increment: ExactNs, limit: ExactNs) -> LeakyBucket {
        LeakyBucket {
            params: Scaled::new(increment, limit),
            content: 0,
            last_conformance: 0,
        }
    }

    fn drained(&self, ta: u128) -> u128 {
        self.content
            .saturating_sub(ta.saturating_sub(self.last_conformance))
    }

    /// Whether a cell arriving at `ta_ns` would conform (no state change).
    pub fn would_conform(&self, ta_ns: u64) -> bool {
        self.drained(self.params.time(ta_ns)) <= self.params.limit
    }

    /// Checks a cell arriving at `ta_ns` and, if it conforms, records it.
    pub fn arrival(&mut self, ta_ns: u64) -> bool {
        let ta = self.params.time(ta_ns);
        let x = self.drained(ta);
        if x > self.params.limit {
            return false;
        }
        self.content = x.saturating_add(self.params.increment);
        self.last_conformance = self.last_conformance.max(ta);
        true
    }
}

/// Why a contract's parameters are inconsistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ContractError {
    /// A zero cell rate.
    #[error("a cell rate of zero")]
    ZeroRate,
    /// SCR above PCR (the sustained interval shorter than the peak one).
    #[error("SCR above PCR")]
    ScrAbovePcr,
    /// MBS of zero cells.
    #[error("MBS must be at least 1 cell")]
    ZeroMbs,
}

/// A traffic contract: GCRA(1/PCR, CDVT), plus GCRA(1/SCR, BT + CDVT) for VBR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contract {
    peak: Gcra,
    sustained: Option<Gcra>,
}

impl Contract {
    /// CBR (or UBR with a PCR): cells spaced by `peak_interval` (1/PCR), tolerance `cdvt_ns`.
    pub fn cbr(peak_interval: ExactNs, cdvt_ns: u64) -> Result<Contract, ContractError> {
        if peak_interval.is_zero() {
            return Err(ContractError::ZeroRate);
        }
        Ok(Contract {
            peak: Gcra::new(peak_interval, ExactNs::from_ns(cdvt_ns)),
            sustained: None,
        })
    }

    /// CBR at `pcr` cells per second.
    pub fn cbr_per_second(pcr: u64, cdvt_ns: u64) -> Result<Contract, ContractError> {
        Contract::cbr(
            ExactNs::per_rate(pcr).ok_or(ContractError::ZeroRate)?,
            cdvt_ns,
        )
    }

    /// VBR: PCR and CDVT as for CBR, plus SCR and MBS. The burst tolerance is
    /// BT = (MBS − 1)(1/SCR − 1/PCR), and the sustained GCRA's limit is BT + CDVT.
    pub fn vbr(
        peak_interval: ExactNs,
        cdvt_ns: u64,
        sustained_interval: ExactNs,
        mbs: u32,
    ) -> Result<Contract, ContractError> {
        if peak_interval.is_zero() || sustained_interval.is_zero() {
            return Err(ContractError::ZeroRate);
        }
        if mbs == 0 {
            return Err(ContractError::ZeroMbs);
        }
        let spacing_gap = sustained_interval.saturating_sub(peak_interval);
        if spacing_gap.is_zero() && sustained_interval != peak_interval {
            return Err(ContractError::ScrAbovePcr);
        }
        let burst_tolerance = spacing_gap.saturating_mul(u64::from(mbs - 1));
        let cdvt = ExactNs::from_ns(cdvt_ns);
        Ok(Contract {
            peak: Gcra::new(peak_interval, cdvt),
            sustained: Some(Gcra::new(
                sustained_interval,
                burst_tolerance.saturating_add(cdvt),
            )),
        })
    }

    /// VBR with rates in cells per second.
    pub fn vbr_per_second(
        pcr: u64,
        cdvt_ns: u64,
        scr: u64,
        mbs: u32,
    ) -> Result<Self, ContractError> {
        Contract::vbr(
            ExactNs::per_rate(pcr).ok_or(ContractError::ZeroRate)?,
            cdvt_ns,
            ExactNs::per_rate(scr).ok_or(ContractError::ZeroRate)?,
            mbs,
        )
    }

    /// The peak-rate GCRA.
    pub fn peak(&self) -> &Gcra {
        &self.peak
    }

    /// The sustained-rate GCRA (VBR only).
    pub fn sustained(&self) -> Option<&Gcra> {
        self.sustained.as_ref()
    }

    /// Whether a cell at `ta_ns` would conform to every GCRA of the contract.
    pub fn would_conform(&self, ta_ns: u64) -> bool {
        self.peak.would_conform(ta_ns)
            && self
                .sustained
                .as_ref()
                .is_none_or(|s| s.would_conform(ta_ns))
    }

    /// Checks a cell at `ta_ns`: it conforms only if every GCRA accepts it, and only then are
    /// they all updated.
    pub fn arrival(&mut self, ta_ns: u64) -> bool {
        if !self.would_conform(ta_ns) {
            return false;
        }
        self.peak.commit(ta_ns);
        if let Some(s) = self.sustained.as_mut() {
            s.commit(ta_ns);
        }
        true
    }

    /// The earliest time at which a cell would conform to the whole contract.
    pub fn earliest_conforming_ns(&self) -> u64 {
        let peak = self.peak.earliest_conforming_ns();
        self.sustained
            .as_ref()
            .map_or(peak, |s| peak.max(s.earliest_conforming_ns()))
    }
}

/// What a policer does with a non-conforming cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PolicingAction {
    /// Discard it.
    #[default]
    Drop,
    /// Set CLP = 1 and let it through (cells already tagged are discarded). A tagged cell
    /// does not update the contract's GCRAs.
    TagClp,
}

/// The fate of one policed cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicerVerdict {
    /// Conforming: forward unchanged.
    Pass,
    /// Non-conforming: forward with CLP = 1.
    Tag,
    /// Non-conforming: discard.
    Drop,
}

/// Counters of a policer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicerCounters {
    /// Conforming cells.
    pub passed: u64,
    /// Cells tagged CLP = 1.
    pub tagged: u64,
    /// Cells discarded.
    pub dropped: u64,
}

/// Usage parameter control: a contract enforced at a network ingress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policer {
    contract: Contract,
    action: PolicingAction,
    counters: PolicerCounters,
}

impl Policer {
    /// Enforces `contract`, treating non-conforming cells with `action`.
    pub fn new(contract: Contract, action: PolicingAction) -> Policer {
        Policer {
            contract,
            action,
            counters: PolicerCounters::default(),
        }
    }

    /// Polices a cell arriving at `now_ns` with cell loss priority `clp`.
    pub fn police(&mut self, now_ns: u64, clp: bool) -> PolicerVerdict {
        let verdict = if self.contract.arrival(now_ns) {
            PolicerVerdict::Pass
        } else if self.action == PolicingAction::TagClp && !clp {
            PolicerVerdict::Tag
        } else {
            PolicerVerdict::Drop
        };
        match verdict {
            PolicerVerdict::Pass => self.counters.passed += 1,
            PolicerVerdict::Tag => self.counters.tagged += 1,
            PolicerVerdict::Drop => self.counters.dropped += 1,
        }
        verdict
    }

    /// The counters so far.
    pub fn counters(&self) -> &PolicerCounters {
        &self.counters
    }
}

/// A sender-side shaper: delays cells just enough that they conform to a contract, in order.
///
/// Departures are whole nanoseconds, rounded up from the exact conforming times, and the
/// rounding is not carried over: the k-th cell of a long burst shaped to T leaves at ⌈k·T⌉.
/// A policer that sees these integer times needs a CDVT of at least 1 ns when T is not a whole
/// number of nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shaper {
    contract: Contract,
    last_departure_ns: u64,
}

impl Shaper {
    /// Shapes to `contract` (typically [`Contract::cbr`] at the PCR with CDVT 0).
    pub fn new(contract: Contract) -> Shaper {
        Shaper {
            contract,
            last_departure_ns: 0,
        }
    }

    /// A cell is ready at `ready_ns`: returns when it may leave (no earlier than `ready_ns`,
    /// nor than the previous cell), and books that departure.
    pub fn departure_ns(&mut self, ready_ns: u64) -> u64 {
        let at = ready_ns
            .max(self.last_departure_ns)
            .max(self.contract.earliest_conforming_ns());
        self.contract.peak.commit_shaped(at);
        if let Some(s) = self.contract.sustained.as_mut() {
            s.commit_shaped(at);
        }
        self.last_departure_ns = at;
        at
    }

    /// When the next cell could leave if it were ready now.
    pub fn next_opportunity_ns(&self) -> u64 {
        self.last_departure_ns
            .max(self.contract.earliest_conforming_ns())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::PhysicalLayer;
    use proptest::prelude::*;

    fn ns(x: u64) -> ExactNs {
        ExactNs::from_ns(x)
    }

    /// How many cells of a back-to-back train (one per `delta`, from 0) conform before the
    /// first that does not.
    fn back_to_back(t: ExactNs, tau: ExactNs, delta: ExactNs) -> (u64, u64) {
        let mut vs = Gcra::new(t, tau);
        let mut lb = LeakyBucket::new(t, tau);
        let count = |f: &mut dyn FnMut(u64) -> bool| {
            (0..100_000u64)
                .take_while(|&k| f(delta.times_floor(k)))
                .count() as u64
        };
        (
            count(&mut |ta| vs.arrival(ta)),
            count(&mut |ta| lb.arrival(ta)),
        )
    }

    #[test]
    fn back_to_back_cell_count_formula() {
        // (T, τ, δ) in ns: N = 1 + ⌊τ / (T − δ)⌋.
        let cases = [
            (10, 45, 1, 6),
            (10, 0, 1, 1),
            (10, 9, 1, 2),
            (10, 8, 1, 1),
            (100, 1000, 50, 21),
            (67_500, 50_625, 16_875, 2), // ATM25 at a quarter of the line, τ = 3 cell times
            (67_500, 506_250, 16_875, 11), // τ = 30 cell times
        ];
        for (t, tau, delta, expected) in cases {
            assert_eq!(1 + tau / (t - delta), expected);
            let (vs, lb) = back_to_back(ns(t), ns(tau), ns(delta));
            assert_eq!((vs, lb), (expected, expected), "T {t} τ {tau} δ {delta}");
        }
    }

    #[test]
    fn vbr_admits_exactly_mbs_cells_at_pcr() {
        // PCR 100,000 cells/s (T = 10 µs), SCR 30,000 cells/s (Ts = 33.3… µs), MBS 20: the 20th
        // cell hits the limit exactly, which only exact arithmetic gets right.
        let mut c = Contract::vbr_per_second(100_000, 0, 30_000, 20).unwrap();
        let n = (0..1000u64).take_while(|&k| c.arrival(k * 10_000)).count();
        assert_eq!(n, 20);
        // At a PCR whose interval is not a whole number of ns, integer arrival times are up to
        // 1 ns late or early relative to the ideal grid: a CDVT of 1 ns absorbs that.
        for mbs in [1u32, 2, 7, 100] {
            let mut c = Contract::vbr_per_second(353_207, 1, 1_000, mbs).unwrap();
            let pcr = ExactNs::per_rate(353_207).unwrap();
            let n = (0..1000u64)
                .take_while(|&k| c.arrival(pcr.times_ceil(k)))
                .count();
            assert_eq!(n as u32, mbs, "MBS {mbs}");
        }
    }

    #[test]
    fn vbr_updates_neither_gcra_on_a_non_conforming_cell() {
        let mut c = Contract::vbr_per_second(100_000, 0, 10_000, 2).unwrap();
        assert!(c.arrival(0));
        let before = c;
        // Too early for the peak GCRA (T = 10 µs): nothing may change.
        assert!(!c.arrival(5_000));
        assert_eq!(c, before);
        assert!(c.arrival(10_000));
        // Peak would accept at 20 µs, sustained (MBS 2 used up) would not.
        assert!(c.peak().would_conform(20_000));
        let before = c;
        assert!(!c.arrival(20_000));
        assert_eq!(c, before);
    }

    #[test]
    fn contract_errors() {
        assert_eq!(
            Contract::cbr(ExactNs::ZERO, 0),
            Err(ContractError::ZeroRate)
        );
        assert_eq!(Contract::cbr_per_second(0, 0), Err(ContractError::ZeroRate));
        assert_eq!(
            Contract::vbr_per_second(1000, 0, 2000, 10),
            Err(ContractError::ScrAbovePcr)
        );
        assert_eq!(
            Contract::vbr_per_second(1000, 0, 500, 0),
            Err(ContractError::ZeroMbs)
        );
        assert!(Contract::vbr_per_second(1000, 0, 1000, 10).is_ok());
    }

    #[test]
    fn burst_tolerance_value() {
        // BT = (MBS − 1)(1/SCR − 1/PCR) = 19 × (33,333.3… − 10,000) ns = 443,333.3… ns.
        let c = Contract::vbr_per_second(100_000, 250, 30_000, 20).unwrap();
        let s = c.sustained().unwrap();
        assert_eq!(s.limit(), ExactNs::new(1_330_000 + 750, 3).unwrap());
        assert_eq!(c.peak().limit(), ExactNs::from_ns(250));
    }

    #[test]
    fn policer_drops_or_tags() {
        let contract = Contract::cbr_per_second(1_000_000, 0).unwrap(); // T = 1 µs
        let mut drop = Policer::new(contract, PolicingAction::Drop);
        let mut tag = Policer::new(contract, PolicingAction::TagClp);
        let arrivals = [
            (0, false),
            (500, false),
            (1000, false),
            (1200, true),
            (2000, false),
        ];
        let d: Vec<_> = arrivals
            .iter()
            .map(|&(t, clp)| drop.police(t, clp))
            .collect();
        let g: Vec<_> = arrivals
            .iter()
            .map(|&(t, clp)| tag.police(t, clp))
            .collect();
        use PolicerVerdict::*;
        assert_eq!(d, vec![Pass, Drop, Pass, Drop, Pass]);
        assert_eq!(g, vec![Pass, Tag, Pass, Drop, Pass]);
        assert_eq!(
            *tag.counters(),
            PolicerCounters {
                passed: 3,
                tagged: 1,
                dropped: 1
            }
        );
    }

    #[test]
    fn shaper_spaces_a_burst_at_the_pcr_without_drift() {
        // Shape to OC-3c line rate / 3 (T = 3 cell times, not a whole number of ns).
        let cell = PhysicalLayer::Oc3c.line_rate().cell_time();
        let t = cell.saturating_mul(3);
        let mut shaper = Shaper::new(Contract::cbr(t, 0).unwrap());
        let departures: Vec<u64> = (0..1_000_000).map(|_| shaper.departure_ns(0)).collect();
        for (k, &d) in departures.iter().enumerate() {
            assert_eq!(d, t.times_ceil(k as u64));
        }
        // A cell ready late leaves when ready.
        let late = departures[999_999] + 1_000_000;
        assert_eq!(shaper.departure_ns(late), late);
        assert!(shaper.next_opportunity_ns() > late);
    }

    proptest! {
        #[test]
        fn both_gcra_forms_decide_the_same(
            t_num in 1u64..100_000, t_den in 1u64..1000,
            tau_num in 0u64..1_000_000, tau_den in 1u64..1000,
            gaps in proptest::collection::vec(0u64..5_000, 1..400),
        ) {
            let t = ExactNs::new(t_num.into(), t_den.into()).unwrap();
            let tau = ExactNs::new(tau_num.into(), tau_den.into()).unwrap();
            let mut vs = Gcra::new(t, tau);
            let mut lb = LeakyBucket::new(t, tau);
            let mut ta = 0u64;
            for gap in gaps {
                ta += gap;
                prop_assert_eq!(vs.would_conform(ta), lb.would_conform(ta));
                prop_assert_eq!(vs.arrival(ta), lb.arrival(ta));
            }
        }

        #[test]
        fn back_to_back_formula_holds(t in 2u64..10_000, delta_frac in 0.0f64..1.0, tau in 0u64..200_000) {
            let delta = ((t - 1) as f64 * delta_frac) as u64;
            let (vs, lb) = back_to_back(ns(t), ns(tau), ns(delta));
            let expected = if delta == 0 { 1 + tau / t } else { 1 + tau / (t - delta) };
            prop_assert_eq!(vs, expected);
            prop_assert_eq!(lb, expected);
        }

        #[test]
        fn shaped_cells_always_conform(
            pcr in 1_000u64..400_000, scr_div in 1u64..10, mbs in 1u32..50,
            readies in proptest::collection::vec(0u64..100_000, 1..300),
        ) {
            let contract = Contract::vbr_per_second(pcr, 0, (pcr / scr_div).max(1), mbs).unwrap();
            let mut shaper = Shaper::new(contract);
            // The policer sees whole-ns times: 1 ns of CDVT absorbs the rounding.
            let mut police = Contract::vbr_per_second(pcr, 1, (pcr / scr_div).max(1), mbs).unwrap();
            let mut ready = 0u64;
            let mut last = 0u64;
            for gap in readies {
                ready += gap;
                let d = shaper.departure_ns(ready);
                prop_assert!(d >= ready && d >= last);
                prop_assert!(police.arrival(d));
                last = d;
            }
        }
    }
}
