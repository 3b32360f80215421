//! Ctrl-C / SIGTERM handling that lets tests stop cleanly and still report.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static INSTALL: Once = Once::new();

/// Only an atomic store: async-signal-safe.
extern "C" fn on_signal(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

fn install(sig: libc::c_int) -> std::io::Result<()> {
    // SAFETY: sigaction is plain data; all-zero means no flags, empty mask.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // No SA_RESTART: blocking syscalls must return EINTR so loops notice.
    sa.sa_flags = 0;
    // SAFETY: `sa.sa_mask` is a valid, writable sigset_t.
    unsafe { libc::sigemptyset(&mut sa.sa_mask) };
    // SAFETY: `sa` is fully initialised and its handler is async-signal-safe.
    let rc = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Installs (once) SIGINT and SIGTERM handlers that set the returned flag.
///
/// Handlers are installed without SA_RESTART so blocking syscalls return
/// EINTR and callers can check the flag. Installation errors are ignored
/// (the flag then simply never gets set).
pub fn interrupt_flag() -> &'static AtomicBool {
    INSTALL.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            let _ = install(sig);
        }
    });
    &INTERRUPTED
}

/// Whether SIGINT/SIGTERM arrived; false if handlers were never installed.
pub fn is_interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigterm_sets_flag() {
        let flag = interrupt_flag();
        assert!(std::ptr::eq(flag, interrupt_flag()));
        // SAFETY: raise() sends to this thread only; our handler is installed
        // so the process is not terminated.
        let rc = unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(rc, 0);
        assert!(flag.load(Ordering::SeqCst));
        assert!(is_interrupted());
        flag.store(false, Ordering::SeqCst);
    }
}
