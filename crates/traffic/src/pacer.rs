//! The sender's decision loop: given `now`, wait, send a train of due packets, or stop.

use std::collections::VecDeque;

use crate::{Emission, PacedSchedule, Source};

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

/// Emissions of a [`Source`] buffered from the next unsent slot on, so slot `k` has a deadline
/// and a size as long as it has not been advanced past.
struct EmissionSlots {
    source: Box<dyn Source>,
    start_ns: u64,
    /// Slot index of `buffered[0]`.
    first: u64,
    buffered: VecDeque<Emission>,
    exhausted: bool,
}

impl EmissionSlots {
    /// Buffers emissions until slot `k` is known or the source ends; whether it is known.
    fn fill_to(&mut self, k: u64) -> bool {
        while !self.exhausted && self.first + self.buffered.len() as u64 <= k {
            match self.source.next_emission() {
                Some(e) => self.buffered.push_back(e),
                None => self.exhausted = true,
            }
        }
        k < self.first + self.buffered.len() as u64
    }

    fn get(&self, k: u64) -> Option<&Emission> {
        self.buffered
            .get(usize::try_from(k.checked_sub(self.first)?).ok()?)
    }

    fn deadline(&self, k: u64) -> Option<u64> {
        self.get(k).map(|e| self.start_ns.saturating_add(e.at_ns))
    }

    /// Slots from `from` on (at most `limit`) due at or before `now_ns`.
    fn due_by(&mut self, from: u64, now_ns: u64, limit: u64) -> u64 {
        let mut k = from;
        while k < limit && self.fill_to(k) && self.deadline(k).is_some_and(|d| d <= now_ns) {
            k += 1;
        }
        k
    }

    fn release_before(&mut self, k: u64) {
        while self.first < k && self.buffered.pop_front().is_some() {
            self.first += 1;
        }
    }
}

impl std::fmt::Debug for EmissionSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmissionSlots")
            .field("first", &self.first)
            .field("buffered", &self.buffered.len())
            .finish()
    }
}

/// Where slot times come from.
#[derive(Debug)]
enum Slots {
    /// As fast as possible.
    Unpaced,
    Paced(PacedSchedule),
    Source(EmissionSlots),
}

#[derive(Debug)]
pub struct Pacer {
    config: PacerConfig,
    slots: Slots,
    next: u64,
    missed: u64,
}

impl Pacer {
    pub fn new(config: PacerConfig) -> Self {
        let config = PacerConfig {
            max_batch: config.max_batch.max(1),
            ..config
        };
        Pacer {
            slots: config.schedule.map_or(Slots::Unpaced, Slots::Paced),
            config,
            next: 0,
            missed: 0,
        }
    }

    /// A pacer whose slots are the emissions of `source`, offset by `start_ns`; `config`'s
    /// schedule is ignored.
    pub fn from_source(source: Box<dyn Source>, start_ns: u64, config: PacerConfig) -> Self {
        let mut pacer = Pacer::new(PacerConfig {
            schedule: None,
            ..config
        });
        pacer.slots = Slots::Source(EmissionSlots {
            source,
            start_ns,
            first: 0,
            buffered: VecDeque::new(),
            exhausted: false,
        });
        pacer
    }

    /// Slots skipped because the sender was too late for them.
    pub fn missed_slots(&self) -> u64 {
        self.missed
    }

    /// Index of the next slot.
    pub fn next_slot(&self) -> u64 {
        self.next
    }

    /// Scheduled time of slot `k` (not yet advanced past); `None` at max rate.
    pub fn deadline(&self, k: u64) -> Option<u64> {
        match &self.slots {
            Slots::Unpaced => None,
            Slots::Paced(s) => Some(s.deadline(k)),
            Slots::Source(e) => e.deadline(k),
        }
    }

    /// Payload size of slot `k` for a source-driven pacer (not yet advanced past).
    pub fn size(&self, k: u64) -> Option<u32> {
        match &self.slots {
            Slots::Source(e) => e.get(k).map(|e| e.size),
            _ => None,
        }
    }

    /// The contract the flow's source is shaped to, if any.
    pub fn contract(&self) -> Option<crate::ContractParams> {
        match &self.slots {
            Slots::Source(e) => e.source.contract(),
            _ => None,
        }
    }

    /// How the flow's source stood against its contract so far.
    pub fn contract_report(&self) -> Option<crate::ContractReport> {
        match &self.slots {
            Slots::Source(e) => e.source.contract_report(),
            _ => None,
        }
    }

    /// Total slots of the flow if the end condition fixes it.
    fn slot_limit(&self) -> Option<u64> {
        let by_time = match (&self.slots, self.config.end.until_ns) {
            (Slots::Paced(s), Some(until)) => Some(s.count_before(until)),
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
        let until = self.config.end.until_ns;
        let window_end = now_ns.saturating_add(self.config.train_window_ns);
        // Slots at or past the end time do not belong to the flow.
        let horizon_end = until.map_or(window_end, |u| window_end.min(u.saturating_sub(1)));
        let max_batch = self.config.max_batch;
        let lateness = self.config.max_lateness_ns;
        let next = self.next;
        match &mut self.slots {
            Slots::Unpaced => {
                let past_end = until.is_some_and(|u| now_ns >= u);
                if past_end || next >= limit {
                    return Action::Done;
                }
                Action::Send {
                    first: next,
                    count: max_batch.min(limit - next),
                }
            }
            Slots::Paced(schedule) => {
                let schedule = *schedule;
                // Skip slots that are hopelessly late.
                let horizon = now_ns.saturating_sub(lateness);
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
                let due = schedule.due_by(window_end).min(limit);
                let count = (due - self.next).min(max_batch);
                Action::Send {
                    first: self.next,
                    count,
                }
            }
            Slots::Source(slots) => {
                let horizon = now_ns.saturating_sub(lateness);
                if horizon > 0 {
                    let too_late = slots.due_by(next, horizon.saturating_sub(1), limit);
                    self.missed += too_late - next;
                    self.next = too_late;
                    slots.release_before(too_late);
                }
                let next = self.next;
                if next >= limit || !slots.fill_to(next) {
                    return Action::Done;
                }
                let next_due = slots.deadline(next).unwrap_or(u64::MAX);
                if until.is_some_and(|u| next_due >= u) {
                    return Action::Done;
                }
                if next_due > now_ns {
                    return Action::Wait { until_ns: next_due };
                }
                let due = slots.due_by(next, horizon_end.max(next_due), limit);
                Action::Send {
                    first: next,
                    count: (due - next).clamp(1, max_batch),
                }
            }
        }
    }

    /// Marks `count` slots as done (sent, or lost by the sender).
    pub fn advance(&mut self, count: u64) {
        self.next += count;
        if let Slots::Source(slots) = &mut self.slots {
            slots.release_before(self.next);
        }
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

    struct Listed(std::vec::IntoIter<Emission>);
    impl Source for Listed {
        fn next_emission(&mut self) -> Option<Emission> {
            self.0.next()
        }
    }

    fn from_list(list: &[(u64, u32)], end: EndCondition) -> Pacer {
        let emissions: Vec<Emission> = list
            .iter()
            .map(|&(at_ns, size)| Emission { at_ns, size })
            .collect();
        Pacer::from_source(
            Box::new(Listed(emissions.into_iter())),
            1_000,
            PacerConfig {
                schedule: None,
                end,
                train_window_ns: 20_000,
                max_batch: 64,
                max_lateness_ns: 5_000_000,
            },
        )
    }

    #[test]
    fn a_source_drives_deadlines_and_sizes() {
        let mut p = from_list(
            &[(0, 100), (10_000, 200), (1_000_000, 300)],
            EndCondition::default(),
        );
        assert_eq!(p.poll(0), Action::Wait { until_ns: 1_000 });
        // Slot 1 is due within the train window of slot 0: they leave together.
        assert_eq!(p.poll(1_000), Action::Send { first: 0, count: 2 });
        assert_eq!((p.size(0), p.size(1)), (Some(100), Some(200)));
        assert_eq!(p.deadline(1), Some(11_000));
        p.advance(2);
        assert_eq!(p.deadline(0), None, "released once advanced past");
        assert_eq!(
            p.poll(2_000),
            Action::Wait {
                until_ns: 1_001_000
            }
        );
        assert_eq!(p.poll(1_001_000), Action::Send { first: 2, count: 1 });
        p.advance(1);
        assert_eq!(p.poll(2_000_000), Action::Done, "the source ended");
    }

    #[test]
    fn a_source_is_cut_by_the_end_condition_and_lateness() {
        let list: Vec<(u64, u32)> = (0..100).map(|k| (k * 1_000_000, 100)).collect();
        let mut p = from_list(
            &list,
            EndCondition {
                until_ns: Some(1_000 + 10_000_000),
                count: None,
            },
        );
        // 8 ms late at the start: slots due more than 5 ms ago are missed.
        assert_eq!(p.poll(8_001_000), Action::Send { first: 3, count: 6 });
        assert_eq!(p.missed_slots(), 3);
        p.advance(6);
        assert_eq!(p.poll(9_001_000), Action::Send { first: 9, count: 1 });
        p.advance(1);
        assert_eq!(
            p.poll(10_001_000),
            Action::Done,
            "slot 10 is at the end time"
        );
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
