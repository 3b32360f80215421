//! The sender's decision loop: given `now`, wait, send a train of due packets, or stop.

use crate::PacedSchedule;

/// When a flow ends: after a time, after a number of packet slots, or whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndCondition {
    /// Absolute end time (same clock as `now`).
    pub until_ns: Option<u64>,
    /// Number of packet slots (sent or lost by the sender).
    pub count: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacerConfig {
    /// `None`: as fast as the path allows.
    pub schedule: Option<PacedSchedule>,
    pub end: EndCondition,
    /// Packets due within this window of `now` leave together as one train (one batched
    /// syscall): below the pacing resolution, separate wake-ups would only add error.
    pub train_window_ns: u64,
    /// Largest train.
    pub max_batch: u64,
    /// A packet later than this behind its slot is skipped and counted as a missed slot, so a
    /// stall does not turn into a catch-up burst that the network would see as a different flow.
    pub max_lateness_ns: u64,
}

/// What the sender does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing due: sleep until then.
    Wait { until_ns: u64 },
    /// Send packets with slot indices `first..first + count` now.
    Send { first: u64, count: u64 },
    /// The flow is over.
    Done,
}

#[derive(Debug, Clone)]
pub struct Pacer {
    config: PacerConfig,
    next: u64,
    missed: u64,
}

impl Pacer {
    pub fn new(config: PacerConfig) -> Self {
        Pacer {
            config: PacerConfig {
                max_batch: config.max_batch.max(1),
                ..config
            },
            next: 0,
            missed: 0,
        }
    }

    /// Slots skipped because the sender was too late for them.
    pub fn missed_slots(&self) -> u64 {
        self.missed
    }

    /// Index of the next slot.
    pub fn next_slot(&self) -> u64 {
        self.next
    }

    /// Scheduled time of slot `k`, for measuring schedule error; `None` at max rate.
    pub fn deadline(&self, k: u64) -> Option<u64> {
        self.config.schedule.map(|s| s.deadline(k))
    }

    /// Total slots of the flow if the end condition fixes it.
    fn slot_limit(&self) -> Option<u64> {
        let by_time = match (self.config.schedule, self.config.end.until_ns) {
            (Some(s), Some(until)) => Some(s.count_before(until)),
            _ => None,
        };
        match (by_time, self.config.end.count) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Decides the next step at time `now_ns`. The caller must call [`Pacer::advance`] with
    /// the count of a `Send` once it has handed those packets to the kernel (or lost them).
    pub fn poll(&mut self, now_ns: u64) -> Action {
        let limit = self.slot_limit().unwrap_or(u64::MAX);
        let Some(schedule) = self.config.schedule else {
            let past_end = self
                .config
                .end
                .until_ns
                .is_some_and(|until| now_ns >= until);
            if past_end || self.next >= limit {
                return Action::Done;
            }
            let count = self.config.max_batch.min(limit - self.next);
            return Action::Send {
                first: self.next,
                count,
            };
        };
        // Skip slots that are hopelessly late.
        let horizon = now_ns.saturating_sub(self.config.max_lateness_ns);
        let too_late = schedule.due_by(horizon.saturating_sub(1)).min(limit);
        if horizon > 0 && too_late > self.next {
            self.missed += too_late - self.next;
            self.next = too_late;
        }
        if self.next >= limit {
            return Action::Done;
        }
        let next_due = schedule.deadline(self.next);
        if next_due > now_ns {
            return Action::Wait { until_ns: next_due };
        }
        // The head of a train leaves on time; packets due within the window ride with it.
        let due = schedule
            .due_by(now_ns.saturating_add(self.config.train_window_ns))
            .min(limit);
        let count = (due - self.next).min(self.config.max_batch);
        Action::Send {
            first: self.next,
            count,
        }
    }

    /// Marks `count` slots as done (sent, or lost by the sender).
    pub fn advance(&mut self, count: u64) {
        self.next += count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paced(end: EndCondition) -> Pacer {
        Pacer::new(PacerConfig {
            schedule: Some(PacedSchedule::new(1_000, 8_000_000, 1000).unwrap()), // 1 ms apart
            end,
            train_window_ns: 20_000,
            max_batch: 64,
            max_lateness_ns: 5_000_000,
        })
    }

    #[test]
    fn waits_then_sends_each_packet_on_its_slot() {
        let mut p = paced(EndCondition {
            until_ns: None,
            count: Some(3),
        });
        assert_eq!(p.poll(0), Action::Wait { until_ns: 1_000 });
        assert_eq!(p.poll(1_000), Action::Send { first: 0, count: 1 });
        p.advance(1);
        assert_eq!(
            p.poll(1_500),
            Action::Wait {
                until_ns: 1_001_000
            }
        );
        assert_eq!(p.poll(1_001_000), Action::Send { first: 1, count: 1 });
        p.advance(1);
        assert_eq!(p.poll(2_001_000), Action::Send { first: 2, count: 1 });
        p.advance(1);
        assert_eq!(p.poll(3_001_000), Action::Done);
        assert_eq!(p.missed_slots(), 0);
    }

    #[test]
    fn packets_closer_than_the_window_leave_as_a_train() {
        let mut p = Pacer::new(PacerConfig {
            schedule: Some(PacedSchedule::new(0, 800_000_000, 1000).unwrap()), // 10 us apart
            end: EndCondition::default(),
            train_window_ns: 20_000,
            max_batch: 64,
            max_lateness_ns: 5_000_000,
        });
        // Slot 0 at 0, plus slots 1 and 2 due within the 20 us window.
        assert_eq!(p.poll(0), Action::Send { first: 0, count: 3 });
        p.advance(3);
        assert_eq!(p.poll(1), Action::Wait { until_ns: 30_000 });
    }

    #[test]
    fn late_packets_go_as_a_train_and_hopeless_ones_are_skipped() {
        let mut p = paced(EndCondition::default());
        // 3.5 ms after start: slots 0..=3 are due, none older than 5 ms.
        assert_eq!(p.poll(3_501_000), Action::Send { first: 0, count: 4 });
        p.advance(4);
        // 20 ms later: slots 4..=23 due; those due before now-5ms (slots 4..=18) are skipped.
        let now = 23_501_000;
        assert_eq!(
            p.poll(now),
            Action::Send {
                first: 19,
                count: 5
            }
        );
        assert_eq!(p.missed_slots(), 15);
    }

    #[test]
    fn duration_bounds_the_slots() {
        let mut p = paced(EndCondition {
            until_ns: Some(1_000 + 10_000_000),
            count: None,
        });
        let mut sent = 0;
        let mut now = 0;
        loop {
            match p.poll(now) {
                Action::Wait { until_ns } => now = until_ns,
                Action::Send { count, .. } => {
                    sent += count;
                    p.advance(count);
                }
                Action::Done => break,
            }
        }
        assert_eq!(sent, 10);
    }

    #[test]
    fn max_rate_sends_full_batches_until_the_end() {
        let mut p = Pacer::new(PacerConfig {
            schedule: None,
            end: EndCondition {
                until_ns: Some(100),
                count: Some(100),
            },
            train_window_ns: 0,
            max_batch: 64,
            max_lateness_ns: 0,
        });
        assert_eq!(
            p.poll(0),
            Action::Send {
                first: 0,
                count: 64
            }
        );
        p.advance(64);
        assert_eq!(
            p.poll(1),
            Action::Send {
                first: 64,
                count: 36
            }
        );
        p.advance(36);
        assert_eq!(p.poll(2), Action::Done);
        let mut p = Pacer::new(PacerConfig {
            schedule: None,
            end: EndCondition {
                until_ns: Some(100),
                count: None,
            },
            train_window_ns: 0,
            max_batch: 8,
            max_lateness_ns: 0,
        });
        assert_eq!(p.poll(100), Action::Done);
    }
}
