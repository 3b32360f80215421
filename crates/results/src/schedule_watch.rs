//! A running sender's schedule error, shared with the thread that reports live intervals, so
//! each interval can show how far departures drifted from their slots meanwhile.
//!
//! The sender keeps its samples in a [`ScheduleWindow`] of its own and hands them over every
//! [`FLUSH_NS`] of its clock (and when it stops), so the hot path takes no lock per packet.

use std::sync::{Arc, Mutex, PoisonError};

use flowlab_stats::{LatencyStats, LatencySummary};

/// How much of the sender's time a window covers before it is handed over.
pub const FLUSH_NS: u64 = 10_000_000;

/// The schedule errors handed over since the last [`ScheduleWatch::take`].
#[derive(Debug, Default)]
pub struct ScheduleWatch {
    errors: Mutex<LatencyStats>,
}

impl ScheduleWatch {
    /// The errors since the last call (`None`: no paced packet left meanwhile), and a fresh start.
    pub fn take(&self) -> Option<LatencySummary> {
        let mut errors = self.errors.lock().unwrap_or_else(PoisonError::into_inner);
        std::mem::take(&mut *errors).summary()
    }

    fn absorb(&self, window: &LatencyStats) {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .merge(window);
    }
}

/// One sender thread's samples not yet handed to its [`ScheduleWatch`].
#[derive(Debug)]
pub struct ScheduleWindow {
    watch: Arc<ScheduleWatch>,
    pending: LatencyStats,
    opened_ns: Option<u64>,
}

impl ScheduleWindow {
    pub fn new(watch: Arc<ScheduleWatch>) -> ScheduleWindow {
        ScheduleWindow {
            watch,
            pending: LatencyStats::new(),
            opened_ns: None,
        }
    }

    /// A packet that left `error_ns` after its slot, at `now_ns` on the sender's clock.
    pub fn push(&mut self, error_ns: i64, now_ns: u64) {
        self.pending.push(error_ns);
        let opened = *self.opened_ns.get_or_insert(now_ns);
        if now_ns.saturating_sub(opened) >= FLUSH_NS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.pending.count() > 0 {
            self.watch.absorb(&self.pending);
            self.pending = LatencyStats::new();
        }
        self.opened_ns = None;
    }
}

impl Drop for ScheduleWindow {
    /// A stopping sender's last samples still reach the last interval.
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_handed_over_per_window_and_taken_once() {
        let watch = Arc::new(ScheduleWatch::default());
        let mut window = ScheduleWindow::new(watch.clone());
        window.push(1_000, 0);
        window.push(3_000, FLUSH_NS - 1);
        assert_eq!(watch.take(), None, "the window is still open");
        window.push(5_000, FLUSH_NS);
        let taken = watch.take().unwrap();
        assert_eq!((taken.count, taken.min_ns, taken.max_ns), (3, 1e3, 5e3));
        assert_eq!(watch.take(), None, "taking starts afresh");
        window.push(-2_000, FLUSH_NS + 1);
        drop(window);
        let last = watch.take().unwrap();
        assert_eq!((last.count, last.min_ns), (1, -2e3), "flushed when dropped");
    }

    #[test]
    fn several_senders_share_one_watch() {
        let watch = Arc::new(ScheduleWatch::default());
        let mut a = ScheduleWindow::new(watch.clone());
        let mut b = ScheduleWindow::new(watch.clone());
        a.push(100, 0);
        b.push(300, 0);
        drop((a, b));
        let both = watch.take().unwrap();
        assert_eq!((both.count, both.mean_ns), (2, 200.0));
    }
}
