//! How a direction's thread hands its counters and samples to the thread that writes the
//! report, so that the releasing thread never builds a report: every 100 ms it copies its
//! counters and swaps its sample buffers under a lock it only tries to take; the reporting
//! thread ([`Tally`]) folds the samples into distributions and keeps the depth history.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use flowlab_stats::LatencyStats;

use crate::direction::{DEPTH_SAMPLES, LATE_NS};
use crate::report::{DepthSample, DirectionReport};
use crate::timing::{FrameTiming, Parts};

/// Samples taken since they were last handed over.
#[derive(Debug, Default)]
pub struct Samples {
    pub depth: Vec<DepthSample>,
    /// One per frame sent.
    pub timings: Vec<FrameTiming>,
    /// One per frame read: its read time minus its arrival stamp.
    pub read_lags: Vec<u64>,
}

impl Samples {
    fn is_empty(&self) -> bool {
        self.depth.is_empty() && self.timings.is_empty() && self.read_lags.is_empty()
    }

    /// Moves these samples to `to`: by swapping buffers if `to` was taken (its buffers
    /// empty, their capacity kept), else, when `append`, by copying; otherwise they wait
    /// here for the next hand-over.
    pub fn hand_over(&mut self, to: &mut Samples, append: bool) {
        if to.is_empty() {
            std::mem::swap(self, to);
        } else if append {
            to.depth.append(&mut self.depth);
            to.timings.append(&mut self.timings);
            to.read_lags.append(&mut self.read_lags);
        }
    }

    fn clear(&mut self) {
        self.depth.clear();
        self.timings.clear();
        self.read_lags.clear();
    }
}

/// What one direction shares with the reporting thread.
#[derive(Debug)]
pub struct Handoff {
    /// Counters only: the distributions and depth samples are the [`Tally`]'s.
    pub counters: DirectionReport,
    pub samples: Samples,
}

impl Handoff {
    pub fn new(counters: DirectionReport) -> Mutex<Handoff> {
        Mutex::new(Handoff {
            counters,
            samples: Samples::default(),
        })
    }
}

/// The lock, also after a thread panicked holding it (the data are counters).
pub fn lock(shared: &Mutex<Handoff>) -> MutexGuard<'_, Handoff> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

/// The kernel's count of frames a veth dropped towards the emulator.
#[derive(Debug, Clone, Copy)]
struct VethDrops {
    /// The emulator's end of the veth, where the direction's frames come in.
    ifindex: u32,
    /// The count when the emulator started.
    at_start: u64,
}

/// Samples folded between two pauses of the reporting thread: about 50 µs of its work (a
/// frame's timing costs it about 0.2 µs).
pub const FOLD_CHUNK: usize = 256;

/// The reporting thread's side of one direction: what its samples add up to.
#[derive(Debug)]
pub struct Tally {
    counters: DirectionReport,
    veth: Option<VethDrops>,
    veth_dropped: u64,
    release_error: LatencyStats,
    read_lag: LatencyStats,
    late_parts: Parts,
    depth: VecDeque<DepthSample>,
    /// Buffers swapped in for the direction's next samples.
    spare: Samples,
}

impl Tally {
    /// A direction's tally; `ingress` is the index of the veth end its frames come in by,
    /// whose drops it counts from now (`None`: not a veth, or not counted).
    pub fn new(counters: DirectionReport, ingress: Option<u32>) -> Tally {
        let veth = ingress.and_then(|ifindex| {
            let at_start = flowlab_sys::netlink::veth_peer_tx_dropped(ifindex).ok()?;
            Some(VethDrops { ifindex, at_start })
        });
        Tally {
            counters,
            veth,
            veth_dropped: 0,
            release_error: LatencyStats::new(),
            read_lag: LatencyStats::new(),
            late_parts: Parts::default(),
            depth: VecDeque::new(),
            spare: Samples::default(),
        }
    }

    /// Takes what the direction handed over (holding its lock only to swap) and folds it in.
    pub fn take(&mut self, shared: &Mutex<Handoff>) {
        self.take_pausing(shared, || {});
    }

    /// [`Tally::take`], calling `pause` after every [`FOLD_CHUNK`] samples folded: the
    /// reporting thread sleeps there, so that on a kernel that does not preempt a
    /// running thread at once it holds back another for tens of µs at most, not a whole fold.
    pub fn take_pausing(&mut self, shared: &Mutex<Handoff>, mut pause: impl FnMut()) {
        {
            let mut h = lock(shared);
            self.counters.clone_from(&h.counters);
            std::mem::swap(&mut h.samples, &mut self.spare);
        }
        self.fold(&mut pause);
        if let Some(v) = self.veth {
            if let Ok(now) = flowlab_sys::netlink::veth_peer_tx_dropped(v.ifindex) {
                self.veth_dropped = now.saturating_sub(v.at_start);
            }
        }
    }

    fn fold(&mut self, pause: &mut dyn FnMut()) {
        for chunk in self.spare.timings.chunks(FOLD_CHUNK) {
            for t in chunk {
                let error = t.error_ns();
                self.release_error.push(error);
                if error > LATE_NS as i64 {
                    self.late_parts.push(t);
                }
            }
            pause();
        }
        for chunk in self.spare.read_lags.chunks(FOLD_CHUNK) {
            for &lag in chunk {
                self.read_lag.push(lag.min(i64::MAX as u64) as i64);
            }
            pause();
        }
        for sample in self.spare.depth.drain(..) {
            if self.depth.len() == DEPTH_SAMPLES {
                self.depth.pop_front();
            }
            self.depth.push_back(sample);
        }
        self.spare.clear();
    }

    /// The direction's report as it stands.
    pub fn report(&self) -> DirectionReport {
        let mut counters = self.counters.clone();
        counters.emulator_drops.veth_dropped = self.veth_dropped;
        DirectionReport {
            release_error: self.release_error.summary(),
            read_lag: self.read_lag.summary(),
            late_parts: self.late_parts.summary(),
            depth: self.depth.iter().cloned().collect(),
            ..counters
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::Turn;

    fn sent(depart_ns: u64, sent_ns: u64) -> FrameTiming {
        FrameTiming {
            depart_ns,
            read_ns: 0,
            turn: Turn {
                idle_ns: depart_ns,
                woke_ns: sent_ns - 10,
                release_ns: sent_ns - 10,
            },
            ahead: 0,
            send_ns: sent_ns - 10,
            sent_ns,
        }
    }

    #[test]
    fn a_hand_over_swaps_buffers_and_waits_while_the_last_is_untaken() {
        let mut mine = Samples::default();
        let mut shared = Samples::default();
        mine.read_lags.push(5);
        mine.hand_over(&mut shared, false);
        assert_eq!((mine.read_lags.len(), shared.read_lags.len()), (0, 1));
        mine.read_lags.push(6);
        mine.hand_over(&mut shared, false);
        assert_eq!(
            mine.read_lags,
            [6],
            "kept until the reporter takes the last"
        );
        mine.hand_over(&mut shared, true);
        assert_eq!(shared.read_lags, [5, 6], "the last hand-over appends");
        assert!(mine.is_empty());
    }

    #[test]
    fn the_tally_folds_samples_into_distributions_and_late_parts() {
        let shared = Handoff::new(DirectionReport::new("a-b", "a", "b"));
        let mut tally = Tally::new(DirectionReport::new("a-b", "a", "b"), None);
        {
            let mut h = lock(&shared);
            h.counters.frames_sent = 3;
            let s = &mut h.samples;
            s.timings.push(sent(1_000_000, 1_005_000));
            s.timings.push(sent(2_000_000, 2_100_000)); // 100 µs late
            s.timings.push(sent(3_000_000, 2_999_000)); // early
            s.read_lags.extend([7_000, 9_000]);
            s.depth.push(DepthSample {
                t_ms: 100,
                depth: vec![4],
            });
        }
        tally.take(&shared);
        assert!(lock(&shared).samples.is_empty());
        let r = tally.report();
        assert_eq!(r.frames_sent, 3);
        let e = r.release_error.unwrap();
        assert_eq!((e.count, e.min_ns, e.max_ns), (3, -1_000.0, 100_000.0));
        assert_eq!(r.read_lag.unwrap().max_ns, 9_000.0);
        let late = r.late_parts.unwrap();
        assert_eq!(late.wake.count, 1, "only the late frame is split");
        assert_eq!(late.wake.max_ns, 99_990.0);
        assert_eq!(late.send.max_ns, 10.0);
        assert_eq!(r.depth.len(), 1);
        // Taken again with nothing new: the same distributions, the depth kept.
        tally.take(&shared);
        assert_eq!(tally.report(), r);
    }

    #[test]
    fn a_pausing_take_pauses_between_chunks_and_folds_the_same() {
        let fill = |shared: &Mutex<Handoff>| {
            let mut h = lock(shared);
            let n = FOLD_CHUNK as u64 * 2 + 1;
            let s = &mut h.samples;
            s.timings
                .extend((1..=n).map(|k| sent(k * 1_000_000, k * 1_000_000 + k * 100)));
            s.read_lags.extend(1..=FOLD_CHUNK as u64);
        };
        let counters = || DirectionReport::new("a-b", "a", "b");
        let (once, chunked) = (Handoff::new(counters()), Handoff::new(counters()));
        fill(&once);
        fill(&chunked);
        let mut whole = Tally::new(counters(), None);
        whole.take(&once);
        let mut pieces = Tally::new(counters(), None);
        let mut pauses = 0;
        pieces.take_pausing(&chunked, || pauses += 1);
        assert_eq!(pauses, 3 + 1, "three chunks of timings, one of read lags");
        assert_eq!(pieces.report(), whole.report());
        assert_eq!(pieces.report().release_error.unwrap().count, 513);
    }
}
