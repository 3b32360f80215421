//! Loss patterns (RFC 3357): how losses cluster, not only how many there are. Fed each
//! sequence number's final fate in sequence order, it measures loss periods (runs of
//! consecutive lost packets) and loss distance (the difference in sequence number between a
//! lost packet and the previous lost one: 1 inside a burst).

use serde::{Deserialize, Serialize};

/// Accumulates fates in sequence order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LossRuns {
    /// Sequence numbers classified so far (the next one's number).
    classified: u64,
    /// Length of the loss period under way; 0 outside one.
    current: u64,
    periods: u64,
    lost: u64,
    longest: u64,
    last_lost: Option<u64>,
    distance_sum: u64,
    distances: u64,
}

/// RFC 3357's figures for one or more flows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LossPeriods {
    /// Loss periods: maximal runs of consecutive lost packets.
    pub periods: u64,
    /// Packets lost, all periods together.
    pub lost: u64,
    pub mean_length: f64,
    pub max_length: u64,
    /// Mean loss distance; 1 when every loss is part of one burst. `None` with a single loss.
    pub mean_distance: Option<f64>,
}

impl LossRuns {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next `n` sequence numbers arrived.
    pub fn received(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.close_period();
        self.classified += n;
    }

    /// The next `n` sequence numbers were lost.
    pub fn lost(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        if let Some(last) = self.last_lost {
            self.distance_sum += self.classified - last;
            self.distances += 1;
        }
        // Inside the run, each loss is 1 from the one before it.
        self.distance_sum += n - 1;
        self.distances += n - 1;
        self.last_lost = Some(self.classified + n - 1);
        self.current += n;
        self.lost += n;
        self.classified += n;
    }

    fn close_period(&mut self) {
        if self.current > 0 {
            self.periods += 1;
            self.longest = self.longest.max(self.current);
            self.current = 0;
        }
    }

    /// Sequence numbers classified so far.
    pub fn classified(&self) -> u64 {
        self.classified
    }

    /// The figures so far (a period under way counts); `None` without a loss.
    pub fn summary(&self) -> Option<LossPeriods> {
        let mut done = *self;
        done.close_period();
        (done.lost > 0).then(|| LossPeriods {
            periods: done.periods,
            lost: done.lost,
            mean_length: done.lost as f64 / done.periods as f64,
            max_length: done.longest,
            mean_distance: (done.distances > 0)
                .then(|| done.distance_sum as f64 / done.distances as f64),
        })
    }

    /// Several flows' figures as one (each flow's periods and distances are its own).
    pub fn combine(all: &[LossRuns]) -> Option<LossPeriods> {
        let mut total = LossRuns::new();
        for runs in all {
            let mut done = *runs;
            done.close_period();
            total.periods += done.periods;
            total.lost += done.lost;
            total.longest = total.longest.max(done.longest);
            total.distance_sum += done.distance_sum;
            total.distances += done.distances;
        }
        total.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3357's own example shape: received, 2 lost, received ×3, 1 lost, received.
    #[test]
    fn periods_and_distances() {
        let mut runs = LossRuns::new();
        runs.received(1);
        runs.lost(2);
        runs.received(3);
        runs.lost(1);
        runs.received(1);
        let s = runs.summary().unwrap();
        assert_eq!((s.periods, s.lost, s.max_length), (2, 3, 2));
        assert_eq!(s.mean_length, 1.5);
        // Lost numbers 1, 2 and 6: distances 1 and 4.
        assert_eq!(s.mean_distance, Some(2.5));
        assert_eq!(runs.classified(), 8);
    }

    #[test]
    fn no_loss_no_figures_and_a_trailing_period_counts() {
        let mut runs = LossRuns::new();
        runs.received(10);
        assert_eq!(runs.summary(), None);
        runs.lost(4);
        let s = runs.summary().unwrap();
        assert_eq!((s.periods, s.lost, s.max_length), (1, 4, 4));
        assert_eq!(s.mean_distance, Some(1.0));
        let mut one = LossRuns::new();
        one.lost(1);
        assert_eq!(one.summary().unwrap().mean_distance, None);
    }

    #[test]
    fn flows_combine() {
        let mut a = LossRuns::new();
        a.lost(3);
        let mut b = LossRuns::new();
        b.received(5);
        b.lost(1);
        b.received(1);
        b.lost(1);
        let s = LossRuns::combine(&[a, b]).unwrap();
        assert_eq!((s.periods, s.lost, s.max_length), (3, 5, 3));
        // a: 1, 1; b: 2.
        assert_eq!(s.mean_distance, Some(4.0 / 3.0));
    }
}
