//! Departures due now, gathered so that one `sendmmsg` releases them all: at a high frame
//! rate several frames fall due between two turns of the loop, and one system call per
//! frame was the emulator's largest cost. Departures due within
//! [`RELEASE_AHEAD_NS`](crate::direction::RELEASE_AHEAD_NS) join
//! the batch early ([`next_due`]), so that frames a few µs apart share a call.

use flowlab_link::{Event, LinkModel};
use flowlab_sys::packet::BatchSent;

use crate::report::DirectionReport;
use crate::timing::{FrameTiming, Turn};

/// Frames released by one system call at most (sendmmsg's batch in `flowlab_sys`).
pub const SEND_BATCH: usize = 64;

/// The chain's next event due by `horizon_ns`: first whatever is due by `clock_ns`, then
/// the next one at its own time, moving `clock_ns` (the model's clock) only that far.
pub fn next_due(chain: &mut dyn LinkModel, clock_ns: &mut u64, horizon_ns: u64) -> Option<Event> {
    loop {
        if let Some(event) = chain.dequeue(*clock_ns) {
            return Some(event);
        }
        match chain.next_event_ns() {
            Some(t) if t > *clock_ns && t <= horizon_ns => *clock_ns = t,
            _ => return None,
        }
    }
}

/// A frame due to leave: its id in the store, its modelled departure time, and when the
/// emulator read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    pub id: u64,
    pub at_ns: u64,
    pub read_ns: u64,
}

/// One send call of a turn's release: when it began and returned (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub turn: Turn,
    /// Frames the turn's release sent before this call.
    pub sent_before: u32,
    pub send_ns: u64,
    pub sent_ns: u64,
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

    /// Counts what became of the gathered frames, sent (or not) by one `call`, records each
    /// frame's timing, and empties the outbox; returns the ids, for the store to free. The
    /// release error is signed: a frame sent with an earlier batch
    /// ([`RELEASE_AHEAD_NS`](crate::direction::RELEASE_AHEAD_NS)) counts
    /// negative, and as early.
    pub fn settle(
        &mut self,
        outcome: BatchSent,
        call: Call,
        report: &mut DirectionReport,
        timings: &mut Vec<FrameTiming>,
    ) -> std::vec::Drain<'_, Due> {
        report.frames_sent += outcome.sent as u64;
        report.emulator_drops.egress_full += outcome.queue_full as u64;
        report.emulator_drops.send_errors += outcome.failed as u64;
        for (k, d) in self.due.iter().enumerate() {
            let timing = FrameTiming {
                depart_ns: d.at_ns,
                read_ns: d.read_ns,
                turn: call.turn,
                ahead: call.sent_before + k as u32,
                send_ns: call.send_ns,
                sent_ns: call.sent_ns,
            };
            let error = timing.error_ns();
            report.early += u64::from(error < 0);
            report.late += u64::from(error > crate::direction::LATE_NS as i64);
            timings.push(timing);
        }
        self.due.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_link::chain::Chain;
    use flowlab_link::impair::{ImpairConfig, Impairments};
    use flowlab_link::{Frame, Verdict};

    /// A 1 ms delay-only chain holding frames that arrived at `arrivals_ns`.
    fn delayed(arrivals_ns: &[u64]) -> Chain {
        let config = ImpairConfig {
            delay_ns: 1_000_000,
            ..ImpairConfig::default()
        };
        let mut chain = Chain::new(vec![Box::new(Impairments::new(config, 1))]);
        for (id, &t) in arrivals_ns.iter().enumerate() {
            let frame = Frame {
                id: id as u64,
                len: 100,
                dscp: 0,
            };
            assert_eq!(chain.enqueue(t, frame), Verdict::Queued);
        }
        chain
    }

    fn departures(chain: &mut Chain, clock_ns: &mut u64, horizon_ns: u64) -> Vec<(u64, u64)> {
        std::iter::from_fn(|| next_due(chain, clock_ns, horizon_ns))
            .map(|e| match e {
                Event::Depart { frame, at_ns } => (frame.id, at_ns),
                other => panic!("only departures in a delay-only chain: {other:?}"),
            })
            .collect()
    }

    #[test]
    fn departures_within_the_window_join_the_batch_due_now() {
        // Departures at 1.000, 1.002, 1.005, 1.006 and 1.020 ms; now is 1.000 ms.
        let mut chain = delayed(&[0, 2_000, 5_000, 6_000, 20_000]);
        let mut clock = 1_000_000;
        let horizon = clock + crate::direction::RELEASE_AHEAD_NS;
        let got = departures(&mut chain, &mut clock, horizon);
        assert_eq!(got, [(0, 1_000_000), (1, 1_002_000), (2, 1_005_000)]);
        assert_eq!(
            clock, 1_005_000,
            "the model's clock moves only to the last one taken"
        );
        assert_eq!(chain.next_event_ns(), Some(1_006_000));
    }

    #[test]
    fn without_a_window_only_what_is_due_leaves() {
        let mut chain = delayed(&[0, 1_000]);
        let mut clock = 1_000_500;
        assert_eq!(
            departures(&mut chain, &mut clock, 1_000_500),
            [(0, 1_000_000)]
        );
        assert_eq!(clock, 1_000_500);
        // Nothing within the window: the clock stays, nothing is taken.
        let mut empty = delayed(&[50_000]);
        let mut clock = 1_000_000;
        assert!(departures(&mut empty, &mut clock, 1_005_000).is_empty());
        assert_eq!(clock, 1_000_000);
    }

    #[test]
    fn the_outbox_fills_at_the_batch_size() {
        let mut o = Outbox::new();
        let due = |id, at_ns| Due {
            id,
            at_ns,
            read_ns: 0,
        };
        for k in 0..SEND_BATCH as u64 - 1 {
            assert!(!o.push(due(k, k)));
        }
        assert!(o.push(due(99, 0)));
        assert_eq!(o.due().len(), SEND_BATCH);
    }

    #[test]
    fn settling_counts_each_outcome_and_every_release_error() {
        let mut o = Outbox::new();
        let mut report = DirectionReport::new("a-b", "a", "b");
        let mut timings = Vec::new();
        // Due 10 µs, 60 µs and 200 µs before the batch returned at 1 ms, and one 4 µs after
        // it (sent early with the batch).
        for (id, at_ns) in [(3, 990_000), (5, 940_000), (8, 800_000), (9, 1_004_000)] {
            o.push(Due {
                id,
                at_ns,
                read_ns: id * 1000,
            });
        }
        let outcome = BatchSent {
            sent: 2,
            queue_full: 1,
            failed: 1,
        };
        let turn = Turn {
            idle_ns: 500_000,
            woke_ns: 900_000,
            release_ns: 950_000,
        };
        let call = Call {
            turn,
            sent_before: 10,
            send_ns: 960_000,
            sent_ns: 1_000_000,
        };
        let ids: Vec<u64> = o
            .settle(outcome, call, &mut report, &mut timings)
            .map(|d| d.id)
            .collect();
        assert_eq!(ids, [3, 5, 8, 9]);
        assert!(o.due().is_empty());
        assert_eq!(report.frames_sent, 2);
        assert_eq!(report.emulator_drops.egress_full, 1);
        assert_eq!(report.emulator_drops.send_errors, 1);
        assert_eq!(report.late, 2, "60 µs and 200 µs exceed the 50 µs bound");
        assert_eq!(report.early, 1);
        let errors: Vec<i64> = timings.iter().map(FrameTiming::error_ns).collect();
        assert_eq!(
            errors,
            [10_000, 60_000, 200_000, -4_000],
            "early is negative"
        );
        assert_eq!(timings[1].read_ns, 5_000);
        let ahead: Vec<u32> = timings.iter().map(|t| t.ahead).collect();
        assert_eq!(ahead, [10, 11, 12, 13], "after the pass's earlier call");
        assert!(timings
            .iter()
            .all(|t| t.turn == turn && t.send_ns == 960_000));
    }
}
