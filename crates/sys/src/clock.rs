//! Clocks and precise pacing.
//!
//! Probe timestamps use `CLOCK_REALTIME` so they are comparable with the
//! kernel's `SO_TIMESTAMPNS` receive stamps; pacing uses `CLOCK_MONOTONIC`
//! so wall-clock steps cannot disturb send schedules.

use std::cell::Cell;
use std::hint::spin_loop;
use std::io;

const NS_PER_SEC: u64 = 1_000_000_000;

pub(crate) fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    // time_t / c_long are narrower than i64 on some targets.
    #[allow(clippy::unnecessary_cast)]
    timespec_to_ns(ts.tv_sec as i64, ts.tv_nsec as i64)
}

/// Converts a (possibly out of range) timespec to ns, clamping instead of panicking.
pub(crate) fn timespec_to_ns(sec: i64, nsec: i64) -> u64 {
    let sec = u64::try_from(sec).unwrap_or(0);
    let nsec = u64::try_from(nsec).unwrap_or(0);
    sec.saturating_mul(NS_PER_SEC).saturating_add(nsec)
}

fn ns_to_timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / NS_PER_SEC).min(i64::MAX as u64) as libc::time_t,
        tv_nsec: (ns % NS_PER_SEC) as libc::c_long,
    }
}

/// `CLOCK_REALTIME` in ns since the epoch; same clock as kernel receive stamps.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// `CLOCK_MONOTONIC` in ns; immune to wall-clock steps, used for pacing.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Sets this thread's timer slack (PR_SET_TIMERSLACK), in ns, minimum 1.
///
/// The default 50 us slack lets the kernel defer wake-ups, which would eat
/// the whole spin margin of [`pace_until`].
pub fn set_thread_timer_slack_ns(ns: u64) -> io::Result<()> {
    let ns = libc::c_ulong::try_from(ns.max(1)).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

thread_local! {
    static SLACK_SET: Cell<bool> = const { Cell::new(false) };
}

/// Sleep with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until
/// `deadline_ns - spin_ns`, then busy-spin until `deadline_ns`.
///
/// Absolute deadlines avoid drift; the final spin hides scheduler wake-up
/// latency. Returns the monotonic time at return. A past deadline returns
/// at once. EINTR resumes the sleep, unless the [`crate::signal`] interrupt
/// flag is set, in which case it returns early (before the deadline) so
/// Ctrl-C is honoured promptly. The first call on a thread lowers that
/// thread's timer slack to 1 ns (see [`set_thread_timer_slack_ns`]).
pub fn pace_until(deadline_ns: u64, spin_ns: u64) -> u64 {
    pace_until_counting_spin(deadline_ns, spin_ns).0
}

/// [`pace_until`], also returning how long it busy-spun (ns): the CPU that precise pacing
/// costs, which a sender reports apart from the CPU its packets cost.
pub fn pace_until_counting_spin(deadline_ns: u64, spin_ns: u64) -> (u64, u64) {
    if !SLACK_SET.with(|s| s.replace(true)) {
        let _ = set_thread_timer_slack_ns(1);
    }
    let mut now = monotonic_ns();
    if now >= deadline_ns {
        return (now, 0);
    }
    let wake_ns = deadline_ns.saturating_sub(spin_ns);
    if now < wake_ns {
        let ts = ns_to_timespec(wake_ns);
        loop {
            // SAFETY: `ts` is a valid timespec; the remainder pointer may be
            // null and is unused with TIMER_ABSTIME.
            let rc = unsafe {
                libc::clock_nanosleep(
                    libc::CLOCK_MONOTONIC,
                    libc::TIMER_ABSTIME,
                    &ts,
                    std::ptr::null_mut(),
                )
            };
            if rc == libc::EINTR {
                if crate::signal::is_interrupted() {
                    return (monotonic_ns(), 0);
                }
                continue;
            }
            // 0, or an unexpected error: either way finish by spinning.
            break;
        }
        now = monotonic_ns();
    }
    let spin_start = now;
    while now < deadline_ns {
        spin_loop();
        now = monotonic_ns();
    }
    (now, now - spin_start)
}

/// `CLOCK_REALTIME - CLOCK_MONOTONIC` in ns, to convert stamps between clocks.
///
/// Takes the tightest of a few bracketed readings to limit the error from
/// preemption between the two clock reads.
pub fn realtime_minus_monotonic_ns() -> i64 {
    let mut best_width = u64::MAX;
    let mut best = 0i64;
    for _ in 0..5 {
        let m1 = monotonic_ns();
        let r = realtime_ns();
        let m2 = monotonic_ns();
        let width = m2.saturating_sub(m1);
        if width < best_width {
            best_width = width;
            let mid = m1.saturating_add(width / 2);
            let diff = i128::from(r) - i128::from(mid);
            best = diff.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
        }
    }
    best
}

/// What the kernel says of `CLOCK_REALTIME`'s discipline (adjtimex, read only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSync {
    /// An NTP or PTP daemon keeps the clock synchronised: `STA_UNSYNC` clear and the clock
    /// state not `TIME_ERROR`.
    pub synchronized: bool,
    /// The kernel's estimated error, ns (`esterror`).
    pub est_error_ns: u64,
    /// The kernel's maximum error, ns (`maxerror`; it grows while nothing disciplines the clock).
    pub max_error_ns: u64,
}

/// Reads the realtime clock's synchronisation state with `adjtimex` (modes 0: needs no
/// privilege and changes nothing).
pub fn realtime_sync() -> io::Result<ClockSync> {
    // SAFETY: timex is integers only; all-zero (modes 0, a read) is valid.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, writable timex for the duration of the call.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(io::Error::last_os_error());
    }
    let us_to_ns = |us: libc::c_long| u64::try_from(us).unwrap_or(0).saturating_mul(1_000);
    Ok(ClockSync {
        synchronized: state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0,
        est_error_ns: us_to_ns(tx.esterror),
        max_error_ns: us_to_ns(tx.maxerror),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realtime_sync_reads() {
        let sync = realtime_sync().expect("adjtimex read");
        // Whatever the host's state, a synchronised clock has a finite error bound.
        if sync.synchronized {
            assert!(sync.max_error_ns < 16_000_000_000);
        }
    }

    #[test]
    fn clocks_advance_and_realtime_is_sane() {
        let m1 = monotonic_ns();
        let m2 = monotonic_ns();
        assert!(m2 >= m1);
        // After 2020-01-01.
        assert!(realtime_ns() > 1_577_836_800 * NS_PER_SEC);
    }

    #[test]
    fn realtime_offset_converts() {
        let off = realtime_minus_monotonic_ns();
        let converted = monotonic_ns() as i128 + off as i128;
        let rt = realtime_ns() as i128;
        assert!((rt - converted).abs() < 10_000_000, "{rt} vs {converted}");
    }

    #[test]
    fn timespec_conversion_clamps() {
        assert_eq!(timespec_to_ns(-1, 5), 5);
        assert_eq!(timespec_to_ns(i64::MAX, 0), u64::MAX);
        assert_eq!(timespec_to_ns(2, 3), 2_000_000_003);
        let ts = ns_to_timespec(3_000_000_007);
        assert_eq!((ts.tv_sec, ts.tv_nsec), (3, 7));
    }

    #[test]
    fn timer_slack_can_be_set() {
        set_thread_timer_slack_ns(1).unwrap();
        set_thread_timer_slack_ns(0).unwrap();
    }

    #[test]
    fn past_deadline_returns_immediately() {
        let now = monotonic_ns();
        let r = pace_until(now.saturating_sub(1_000_000), 0);
        assert!(r >= now);
        assert!(r - now < 5_000_000);
        assert!(pace_until(0, u64::MAX) > 0);
    }

    #[test]
    fn pace_until_accuracy() {
        const N: usize = 200;
        const STEP: u64 = 100_000;
        // Keep the CPU-spinning tests from competing with each other.
        let _guard = crate::TEST_CPU_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let start = monotonic_ns() + 1_000_000;
        let mut late = Vec::with_capacity(N);
        for i in 0..N as u64 {
            let deadline = start + i * STEP;
            let at = pace_until(deadline, 50_000);
            assert!(at >= deadline);
            late.push(at - deadline);
        }
        late.sort_unstable();
        let mean = late.iter().sum::<u64>() / N as u64;
        let median = late[N / 2];
        let p99 = late[N * 99 / 100];
        eprintln!("pace_until lateness: median {median} ns, mean {mean} ns, p99 {p99} ns");
        // Sanity bound only. The median ignores the occasional preemption a
        // busy shared 2-core machine inflicts, so this cannot flake.
        assert!(median < 200_000, "median lateness {median} ns");
    }
}
