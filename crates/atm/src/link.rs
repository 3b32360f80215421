//! Physical layers, their cell rates, and propagation delay.
//!
//! What matters to the models is the **cell time**: how long one cell occupies the line. It is
//! an exact fraction of a nanosecond ([`ExactNs`]), so that the k-th cell of a busy line departs
//! at exactly `start + ⌊k · cell_time⌋` however long the simulation runs.

use crate::cell::{CELL_LEN, PAYLOAD_LEN};
use crate::time::ExactNs;

/// Approximate propagation delay in optical fibre (refractive index about 1.5): 5 µs per km.
pub const FIBER_NS_PER_KM: u64 = 5_000;

/// The cell rate of a line, as the exact time one cell takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LineRate {
    cell_time: ExactNs,
}

impl LineRate {
    /// A line whose cells each take `cell_time`; `None` if it is zero.
    pub fn from_cell_time(cell_time: ExactNs) -> Option<LineRate> {
        (!cell_time.is_zero()).then_some(LineRate { cell_time })
    }

    /// A line carrying `cells_per_second` cells per second; `None` for zero.
    pub fn from_cells_per_second(cells_per_second: u64) -> Option<LineRate> {
        LineRate::from_cell_time(ExactNs::per_rate(cells_per_second)?)
    }

    /// A line whose cell stream (53-byte cells back to back) runs at `bits_per_second`.
    pub fn from_cell_bit_rate(bits_per_second: u64) -> Option<LineRate> {
        LineRate::from_cell_time(ExactNs::new(
            (CELL_LEN as u128) * 8 * crate::time::NS_PER_SECOND,
            u128::from(bits_per_second),
        )?)
    }

    /// The time one cell occupies the line.
    pub fn cell_time(&self) -> ExactNs {
        self.cell_time
    }

    /// Cell time in nanoseconds, rounded to a float.
    pub fn cell_time_ns_f64(&self) -> f64 {
        self.cell_time.as_f64()
    }

    /// Cells per second.
    pub fn cells_per_second(&self) -> f64 {
        self.cell_time.rate_per_second_f64().unwrap_or(0.0)
    }

    /// Bits per second of whole cells (53 bytes each).
    pub fn cell_bit_rate(&self) -> f64 {
        self.cells_per_second() * (CELL_LEN * 8) as f64
    }

    /// Bits per second of cell payload (48 bytes each): the most AAL5 can carry, before the
    /// trailer and padding.
    pub fn payload_bit_rate(&self) -> f64 {
        self.cells_per_second() * (PAYLOAD_LEN * 8) as f64
    }

    /// When cell `k` (counting from 0) of a back-to-back train starting at `start_ns` begins:
    /// `start + ⌊k · cell_time⌋`, exact (saturating at `u64::MAX`).
    pub fn cell_start_ns(&self, start_ns: u64, k: u64) -> u64 {
        start_ns.saturating_add(self.cell_time.times_floor(k))
    }

    /// When cell `k` of that train has been sent completely: the start of cell `k + 1`.
    pub fn cell_departure_ns(&self, start_ns: u64, k: u64) -> u64 {
        self.cell_start_ns(start_ns, k.saturating_add(1))
    }

    /// The index of the first cell slot (of a slot grid starting at `epoch_ns`) that begins at
    /// or after `t_ns`.
    pub fn first_slot_at_or_after(&self, epoch_ns: u64, t_ns: u64) -> u64 {
        let elapsed = u128::from(t_ns.saturating_sub(epoch_ns));
        let num = self.cell_time.numer();
        let den = self.cell_time.denom();
        // Smallest k with ⌊k·num/den⌋ ≥ elapsed, i.e. k·num ≥ elapsed·den.
        let k = (elapsed * den).div_ceil(num);
        u64::try_from(k).unwrap_or(u64::MAX)
    }

    /// Whole cells the line sends in `duration_ns`.
    pub fn cells_in(&self, duration_ns: u64) -> u64 {
        let k = u128::from(duration_ns) * self.cell_time.denom() / self.cell_time.numer();
        u64::try_from(k).unwrap_or(u64::MAX)
    }
}

/// The physical layers of the era, with their cell rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PhysicalLayer {
    /// ATM25 (af-phy-0040): 25.6 Mb/s, taken as 54 byte-times per cell (one for the
    /// start-of-cell command): 16.875 µs per cell.
    Atm25,
    /// E1 (G.804): 30 of 32 timeslots carry cells, 1.920 Mb/s.
    E1,
    /// DS-3 with PLCP framing: 12 cells every 125 µs, 96,000 cells/s.
    Ds3Plcp,
    /// OC-3c / STM-1: 149.76 Mb/s of SONET payload for cells.
    Oc3c,
    /// OC-12c / STM-4: 599.04 Mb/s of payload for cells.
    Oc12c,
    /// Any other line, given its cell rate.
    Custom(LineRate),
}

impl PhysicalLayer {
    /// The cell rate of the layer.
    pub fn line_rate(self) -> LineRate {
        let cell_time = match self {
            // 54 byte-times at 25.6 Mb/s.
            PhysicalLayer::Atm25 => ExactNs::new(54 * 8 * 1_000_000_000, 25_600_000),
            PhysicalLayer::E1 => ExactNs::new(424 * 1_000_000_000, 1_920_000),
            PhysicalLayer::Ds3Plcp => ExactNs::new(125_000, 12),
            PhysicalLayer::Oc3c => ExactNs::new(424 * 1_000_000_000, 149_760_000),
            PhysicalLayer::Oc12c => ExactNs::new(424 * 1_000_000_000, 599_040_000),
            PhysicalLayer::Custom(rate) => return rate,
        };
        // The constants above have non-zero denominators and numerators.
        match cell_time.and_then(LineRate::from_cell_time) {
            Some(rate) => rate,
            None => LineRate {
                cell_time: ExactNs::from_ns(1),
            },
        }
    }

    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            PhysicalLayer::Atm25 => "ATM25",
            PhysicalLayer::E1 => "E1",
            PhysicalLayer::Ds3Plcp => "DS-3 PLCP",
            PhysicalLayer::Oc3c => "OC-3c",
            PhysicalLayer::Oc12c => "OC-12c",
            PhysicalLayer::Custom(_) => "custom",
        }
    }
}

/// Propagation delay over `distance_m` metres at `ns_per_km` (e.g. [`FIBER_NS_PER_KM`]).
pub fn propagation_delay_ns(distance_m: u64, ns_per_km: u64) -> u64 {
    let ns = u128::from(distance_m) * u128::from(ns_per_km) / 1000;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// A point-to-point link: a line rate and a propagation delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Link {
    /// The cell rate.
    pub rate: LineRate,
    /// One-way propagation delay.
    pub propagation_ns: u64,
}

impl Link {
    /// A link over `layer` with `propagation_ns` of delay.
    pub fn new(layer: PhysicalLayer, propagation_ns: u64) -> Link {
        Link {
            rate: layer.line_rate(),
            propagation_ns,
        }
    }

    /// When a cell whose transmission started at `tx_start_ns` has fully arrived at the far end.
    pub fn arrival_ns(&self, tx_start_ns: u64) -> u64 {
        self.rate
            .cell_departure_ns(tx_start_ns, 0)
            .saturating_add(self.propagation_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal to a relative tolerance (the table is rounded to the digits it prints).
    fn close(a: f64, b: f64, relative: f64) -> bool {
        (a - b).abs() <= relative * b.abs()
    }

    #[test]
    fn a7_table() {
        // (layer, cells/s, µs per cell, cell capacity Mb/s, AAL5 payload max Mb/s), as in the
        // reference notes' table A7, to the digits it gives.
        let table = [
            (PhysicalLayer::Atm25, 59_259.0, 16.875, None, 22.756),
            (PhysicalLayer::E1, 4_528.3, 220.8, Some(1.920), 1.739),
            (
                PhysicalLayer::Ds3Plcp,
                96_000.0,
                10.4167,
                Some(40.704),
                36.864,
            ),
            (PhysicalLayer::Oc3c, 353_207.5, 2.831, Some(149.76), 135.632),
            (
                PhysicalLayer::Oc12c,
                1_412_830.0,
                0.70779,
                Some(599.04),
                542.53,
            ),
        ];
        for (layer, cells, us, capacity, payload) in table {
            let rate = layer.line_rate();
            let name = layer.name();
            assert!(close(rate.cells_per_second(), cells, 2e-4), "{name}");
            assert!(close(rate.cell_time_ns_f64() / 1000.0, us, 2e-4), "{name}");
            if let Some(mbps) = capacity {
                assert!(close(rate.cell_bit_rate() / 1e6, mbps, 1e-6), "{name}");
            }
            assert!(
                close(rate.payload_bit_rate() / 1e6, payload, 2e-4),
                "{name}"
            );
        }
        // ATM25 cell time is a whole number of nanoseconds.
        assert_eq!(
            PhysicalLayer::Atm25.line_rate().cell_time(),
            ExactNs::from_ns(16_875)
        );
    }

    #[test]
    fn departures_do_not_drift() {
        let oc3 = PhysicalLayer::Oc3c.line_rate();
        // 149.76 Mb/s / 424 bits = 353,207.547… cells/s: exactly 18,720,000 cells in 53 s, so
        // the 18,720,000th cell after the start begins exactly on the 53-second mark.
        assert_eq!(oc3.cell_start_ns(0, 18_720_000), 53_000_000_000);
        assert_eq!(oc3.cell_departure_ns(0, 18_719_999), 53_000_000_000);
        assert_eq!(oc3.cell_start_ns(0, 1), 2831);
        assert_eq!(oc3.cells_in(53_000_000_000), 18_720_000);
        assert_eq!(oc3.cells_in(53_000_000_000 - 1), 18_719_999);
        let ds3 = PhysicalLayer::Ds3Plcp.line_rate();
        assert_eq!(ds3.cell_start_ns(5, 12), 125_005);
    }

    #[test]
    fn first_slot_at_or_after() {
        let ds3 = PhysicalLayer::Ds3Plcp.line_rate(); // 10416.67 ns
        assert_eq!(ds3.first_slot_at_or_after(0, 0), 0);
        assert_eq!(ds3.first_slot_at_or_after(0, 1), 1);
        assert_eq!(ds3.first_slot_at_or_after(0, 10_416), 1);
        assert_eq!(ds3.first_slot_at_or_after(0, 10_417), 2);
        assert_eq!(ds3.first_slot_at_or_after(1000, 500), 0);
        for t in [0u64, 1, 9999, 10_416, 10_417, 123_456_789] {
            let k = ds3.first_slot_at_or_after(0, t);
            assert!(ds3.cell_start_ns(0, k) >= t);
            assert!(k == 0 || ds3.cell_start_ns(0, k - 1) < t);
        }
    }

    #[test]
    fn custom_rates_and_propagation() {
        let custom = LineRate::from_cells_per_second(100_000).unwrap();
        assert_eq!(custom.cell_time(), ExactNs::from_ns(10_000));
        assert_eq!(PhysicalLayer::Custom(custom).line_rate(), custom);
        assert!(LineRate::from_cells_per_second(0).is_none());
        assert!(LineRate::from_cell_bit_rate(0).is_none());
        let from_bits = LineRate::from_cell_bit_rate(149_760_000).unwrap();
        assert_eq!(from_bits, PhysicalLayer::Oc3c.line_rate());
        assert_eq!(propagation_delay_ns(6_000_000, FIBER_NS_PER_KM), 30_000_000);
        let link = Link::new(PhysicalLayer::Atm25, 1_000);
        assert_eq!(link.arrival_ns(100), 100 + 16_875 + 1_000);
    }
}
