//! Ctrl-C / SIGTERM handling that lets tests stop cleanly and still report.
//!
//! signal-hook installs its handlers with SA_RESTART, so a blocking call without a timeout is
//! resumed rather than failing with EINTR. Nothing here waits on that: the signal reaches an
//! arbitrary thread of the process anyway, so every loop that must notice it already polls the
//! flag between bounded waits (socket timeouts, poll, epoll and `clock_nanosleep`, which the
//! kernel never restarts).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Installs (once) SIGINT and SIGTERM handlers that set the returned flag.
///
/// Installation errors are ignored (the flag then simply never gets set).
pub fn interrupt_flag() -> &'static AtomicBool {
    INTERRUPTED.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            let _ = signal_hook::flag::register(sig, flag.clone());
        }
        flag
    })
}

/// Whether SIGINT/SIGTERM arrived; false if handlers were never installed.
pub fn is_interrupted() -> bool {
    INTERRUPTED
        .get()
        .is_some_and(|flag| flag.load(Ordering::SeqCst))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_sets_flag() {
        let flag = interrupt_flag();
        assert!(std::ptr::eq(flag, interrupt_flag()));
        assert!(!is_interrupted());
        // The handler is installed, so the process is not terminated.
        signal_hook::low_level::raise(signal_hook::consts::SIGTERM).unwrap();
        assert!(flag.load(Ordering::SeqCst));
        assert!(is_interrupted());
        flag.store(false, Ordering::SeqCst);
    }
}
