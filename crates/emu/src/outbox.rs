//! Departures due now, gathered so that one `sendmmsg` releases them all: at a high frame
//! rate several frames fall due between two turns of the loop, and one system call per
//! frame was the emulator's largest cost.

use flowlab_stats::LatencyStats;
use flowlab_sys::packet::BatchSent;

use crate::report::DirectionReport;

/// Frames released by one system call at most (sendmmsg's batch in `flowlab_sys`).
pub const SEND_BATCH: usize = 64;

/// A frame due to leave: its id in the store and its modelled departure time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub id: u64,
    pub at_ns: u64,
}

/// The departures gathered since the last send, at most [`SEND_BATCH`].
#[derive(Debug, Default)]
pub struct Outbox {
    due: Vec<Due>,
}

impl Outbox {
    pub fn new() -> Outbox {
        Outbox {
            due: Vec::with_capacity(SEND_BATCH),
        }
    }

    /// Adds a departure; true once the outbox is full and must be sent.
    pub fn push(&mut self, due: Due) -> bool {
        self.due.push(due);
        self.due.len() >= SEND_BATCH
    }

    pub fn due(&self) -> &[Due] {
        &self.due
    }

    /// Counts what became of the gathered frames, sent (or not) by one batch that returned at
    /// `now_ns`, and empties the outbox; returns the ids, for the store to free.
    pub fn settle(
        &mut self,
        outcome: BatchSent,
        now_ns: u64,
        report: &mut DirectionReport,
        release_error: &mut LatencyStats,
    ) -> std::vec::Drain<'_, Due> {
        report.frames_sent += outcome.sent as u64;
        report.emulator_drops.egress_full += outcome.queue_full as u64;
        report.emulator_drops.send_errors += outcome.failed as u64;
        for d in &self.due {
            let error = now_ns.saturating_sub(d.at_ns);
            release_error.push(error.min(i64::MAX as u64) as i64);
            if error > crate::direction::LATE_NS {
                report.late += 1;
            }
        }
        self.due.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outbox_fills_at_the_batch_size() {
        let mut o = Outbox::new();
        for k in 0..SEND_BATCH as u64 - 1 {
            assert!(!o.push(Due { id: k, at_ns: k }));
        }
        assert!(o.push(Due { id: 99, at_ns: 0 }));
        assert_eq!(o.due().len(), SEND_BATCH);
    }

    #[test]
    fn settling_counts_each_outcome_and_every_release_error() {
        let mut o = Outbox::new();
        let mut report = DirectionReport::new("a-b", "a", "b");
        let mut errors = LatencyStats::new();
        // Due 10 µs, 60 µs and 200 µs before the batch returned at 1 ms.
        for (id, at_ns) in [(3, 990_000), (5, 940_000), (8, 800_000)] {
            o.push(Due { id, at_ns });
        }
        let outcome = BatchSent {
            sent: 1,
            queue_full: 1,
            failed: 1,
        };
        let ids: Vec<u64> = o
            .settle(outcome, 1_000_000, &mut report, &mut errors)
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, [3, 5, 8]);
        assert!(o.due().is_empty());
        assert_eq!(report.frames_sent, 1);
        assert_eq!(report.emulator_drops.egress_full, 1);
        assert_eq!(report.emulator_drops.send_errors, 1);
        assert_eq!(report.late, 2, "60 µs and 200 µs exceed the 50 µs bound");
        let s = errors.summary().unwrap();
        assert_eq!(s.count, 3);
        assert_eq!(s.min_ns, 10_000.0);
        assert_eq!(s.max_ns, 200_000.0);
    }
}
