//! Stages in sequence: a frame leaving stage *i* enters stage *i + 1* at its departure
//! time. Internal steps run in time order across stages (a later stage's step first at
//! equal times, so that what it had due happens before the arrival), which keeps the chain
//! exact however late the driver calls.

use std::collections::VecDeque;

use crate::{Event, Frame, LinkModel, StageReport, Verdict};

/// A link direction made of stages (DiffServ edge, ATM, impairments: the order
/// [`crate::config::EmulateSpec::build`] uses).
pub struct Chain {
    stages: Vec<Box<dyn LinkModel>>,
    /// Events of the chain, decided and due.
    out: VecDeque<Event>,
}

impl Chain {
    pub fn new(stages: Vec<Box<dyn LinkModel>>) -> Chain {
        Chain {
            stages,
            out: VecDeque::new(),
        }
    }

    /// The stage with the earliest step due by `now_ns`, later stages first at ties.
    fn next_due(&self, now_ns: u64) -> Option<(u64, usize)> {
        self.stages
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.next_event_ns().map(|t| (t, i)))
            .filter(|&(t, _)| t <= now_ns)
            .min_by_key(|&(t, i)| (t, std::cmp::Reverse(i)))
    }

    /// Runs every step due by `now_ns`, handing departures down the chain.
    fn settle(&mut self, now_ns: u64) {
        while let Some((t, i)) = self.next_due(now_ns) {
            let Some(event) = self.stages[i].dequeue(t) else {
                continue;
            };
            let Some(next) = self.stages.get_mut(i + 1) else {
                self.out.push_back(event);
                continue;
            };
            let Event::Depart { frame, at_ns } = event else {
                self.out.push_back(event);
                continue;
            };
            match next.enqueue(at_ns, frame) {
                Verdict::Queued => {}
                Verdict::Duplicated => self.out.push_back(Event::Copy { frame }),
                Verdict::Dropped(cause) => self.out.push_back(Event::Drop {
                    frame,
                    at_ns,
                    cause,
                }),
            }
        }
    }
}

impl LinkModel for Chain {
    fn enqueue(&mut self, now_ns: u64, frame: Frame) -> Verdict {
        self.settle(now_ns);
        match self.stages.first_mut() {
            Some(s) => s.enqueue(now_ns, frame),
            // No stage: the frame crosses at once.
            None => {
                self.out.push_back(Event::Depart {
                    frame,
                    at_ns: now_ns,
                });
                Verdict::Queued
            }
        }
    }

    fn next_event_ns(&self) -> Option<u64> {
        if let Some(e) = self.out.front() {
            return Some(match e {
                Event::Depart { at_ns, .. } | Event::Drop { at_ns, .. } => *at_ns,
                Event::Copy { .. } => 0,
            });
        }
        self.stages.iter().filter_map(|s| s.next_event_ns()).min()
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Event> {
        self.settle(now_ns);
        self.out.pop_front()
    }

    fn report(&self, out: &mut Vec<StageReport>) {
        for s in &self.stages {
            s.report(out);
        }
    }

    fn depth(&self, out: &mut Vec<u64>) {
        for s in &self.stages {
            s.depth(out);
        }
    }
}
