//! Where a released frame's time went, from timestamps the loop takes anyway: the release
//! error (send returned minus modelled departure) cut into consecutive parts, each the time
//! from the departure (or the end of the part before) to the next step the frame waited on.
//! Sans-IO: the direction's thread records a [`FrameTiming`] per frame sent, the reporting
//! thread folds them into distributions ([`Parts`]), off the releasing thread.

use flowlab_stats::LatencyStats;

use crate::report::{ReleaseParts, Spread};

/// One turn of a direction's loop (CLOCK_MONOTONIC ns): it went idle (began its wait),
/// woke, read what had arrived, then began releasing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Turn {
    /// The wait began (the previous turn's release and bookkeeping done).
    pub idle_ns: u64,
    /// The wait ended (timer, arrival, or the end of a spin).
    pub woke_ns: u64,
    /// Reading done, releasing began.
    pub release_ns: u64,
}

/// One frame sent: its modelled departure and the loop's steps that led to its release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameTiming {
    pub depart_ns: u64,
    /// When the emulator read it.
    pub read_ns: u64,
    /// The turn that released it.
    pub turn: Turn,
    /// Frames that turn's release sent before it (its place in the release).
    pub ahead: u32,
    /// Its send call began.
    pub send_ns: u64,
    /// Its send call returned: the release time.
    pub sent_ns: u64,
}

/// The parts of a release error, in the order they happen (each ≥ 0; on a late frame they
/// add up to its error).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Split {
    /// Read after its departure: waiting in the kernel's ring (or the socket).
    pub unread_ns: u64,
    /// Due while the loop was still busy with its previous turn (releasing, bookkeeping).
    pub busy_ns: u64,
    /// Due while the loop waited, which ended late (sleep or poll woke late, or the spin
    /// was held off the CPU).
    pub wake_ns: u64,
    /// Due while the loop read arrivals before releasing.
    pub reading_ns: u64,
    /// Behind other frames of the same release (the model's dequeue and earlier sends).
    pub batch_ns: u64,
    /// In its own send call.
    pub send_ns: u64,
}

impl FrameTiming {
    /// Signed: negative for a frame sent early with an earlier departure's batch.
    pub fn error_ns(&self) -> i64 {
        let e = i128::from(self.sent_ns) - i128::from(self.depart_ns);
        e.clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    /// The error cut at each step: every part runs from the latest of the departure and the
    /// steps before, to its own step.
    pub fn split(&self) -> Split {
        let t = &self.turn;
        let mut since = self.depart_ns;
        let mut part = |step: u64| {
            let p = step.saturating_sub(since);
            since = since.max(step);
            p
        };
        Split {
            unread_ns: part(self.read_ns),
            busy_ns: part(t.idle_ns),
            wake_ns: part(t.woke_ns),
            reading_ns: part(t.release_ns),
            batch_ns: part(self.send_ns),
            send_ns: part(self.sent_ns),
        }
    }
}

/// The parts of late frames' errors, as distributions.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    unread: LatencyStats,
    busy: LatencyStats,
    wake: LatencyStats,
    reading: LatencyStats,
    batch: LatencyStats,
    send: LatencyStats,
    ahead: LatencyStats,
}

impl Parts {
    /// A late frame: its error's parts and its place in its release.
    pub fn push(&mut self, t: &FrameTiming) {
        let s = t.split();
        let ns = |v: u64| v.min(i64::MAX as u64) as i64;
        self.unread.push(ns(s.unread_ns));
        self.busy.push(ns(s.busy_ns));
        self.wake.push(ns(s.wake_ns));
        self.reading.push(ns(s.reading_ns));
        self.batch.push(ns(s.batch_ns));
        self.send.push(ns(s.send_ns));
        self.ahead.push(i64::from(t.ahead));
    }

    /// `None` until a frame was late.
    pub fn summary(&self) -> Option<ReleaseParts> {
        Some(ReleaseParts {
            unread: self.unread.summary()?,
            busy: self.busy.summary()?,
            wake: self.wake.summary()?,
            reading: self.reading.summary()?,
            batch: self.batch.summary()?,
            send: self.send.summary()?,
            ahead: Spread::of(&self.ahead.summary()?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(depart: u64, read: u64, turn: (u64, u64, u64), send: (u64, u64)) -> FrameTiming {
        FrameTiming {
            depart_ns: depart,
            read_ns: read,
            turn: Turn {
                idle_ns: turn.0,
                woke_ns: turn.1,
                release_ns: turn.2,
            },
            ahead: 3,
            send_ns: send.0,
            sent_ns: send.1,
        }
    }

    fn total(s: &Split) -> u64 {
        s.unread_ns + s.busy_ns + s.wake_ns + s.reading_ns + s.batch_ns + s.send_ns
    }

    #[test]
    fn a_frame_read_in_time_loses_its_time_to_the_late_wake_and_what_follows() {
        // Read at 100, due at 1000; the loop went idle at 900, woke at 1300, read until
        // 1350, released from 1360, its call began at 1400 and returned at 1450.
        let t = timing(1000, 100, (900, 1300, 1360), (1400, 1450));
        let s = t.split();
        assert_eq!(
            s,
            Split {
                unread_ns: 0,
                busy_ns: 0,
                wake_ns: 300,
                reading_ns: 60,
                batch_ns: 40,
                send_ns: 50,
            }
        );
        assert_eq!(total(&s) as i64, t.error_ns());
    }

    #[test]
    fn a_frame_read_late_counts_its_unread_time_once() {
        // Due at 1000 but read at 1200, during the turn's reading (woke at 1100).
        let t = timing(1000, 1200, (800, 1100, 1250), (1260, 1270));
        let s = t.split();
        assert_eq!((s.unread_ns, s.busy_ns, s.wake_ns), (200, 0, 0));
        assert_eq!((s.reading_ns, s.batch_ns, s.send_ns), (50, 10, 10));
        assert_eq!(total(&s) as i64, t.error_ns());
    }

    #[test]
    fn a_frame_due_while_the_loop_was_busy_counts_as_busy() {
        // Due at 1000; the previous turn only went idle at 1500 (a stall), woke at once.
        let t = timing(1000, 10, (1500, 1502, 1503), (1504, 1510));
        let s = t.split();
        assert_eq!((s.busy_ns, s.wake_ns, s.reading_ns), (500, 2, 1));
        assert_eq!(total(&s) as i64, t.error_ns());
    }

    #[test]
    fn an_early_frame_has_a_negative_error_and_only_the_time_past_its_departure() {
        // Sent with a batch due before it: the call returned 300 ns before its departure.
        let t = timing(2000, 10, (100, 1000, 1100), (1200, 1700));
        assert_eq!(t.error_ns(), -300);
        assert_eq!(total(&t.split()), 0);
        // Due during its own send call: only the call's time past the departure counts.
        let t = timing(1500, 10, (100, 1000, 1100), (1200, 1700));
        assert_eq!(t.split().send_ns, 200);
        assert_eq!(total(&t.split()), 200);
    }

    #[test]
    fn parts_summarise_each_step() {
        let mut p = Parts::default();
        assert!(p.summary().is_none());
        p.push(&timing(1000, 100, (900, 1300, 1360), (1400, 1450)));
        p.push(&timing(1000, 1200, (800, 1100, 1250), (1260, 1270)));
        let s = p.summary().unwrap();
        assert_eq!(s.wake.max_ns, 300.0);
        assert_eq!(s.unread.max_ns, 200.0);
        assert_eq!(s.send.count, 2);
        assert_eq!(s.busy.max_ns, 0.0);
        assert_eq!((s.ahead.p50, s.ahead.max), (3.0, 3.0));
    }
}
