//! Rest for a real-time direction thread. The kernel lets real-time threads use at most
//! `sched_rt_runtime_us` of every `sched_rt_period_us` (by default 950 ms of each second)
//! and then holds them off the CPU for the rest of the period: a SCHED_FIFO thread that
//! spins to every departure (at 100k frames/s it never sleeps) was stopped for up to 54 ms
//! at a time on this machine, every frame due meanwhile late. So while such a thread has
//! slept less than its share of the current window, it sleeps to a departure instead of
//! spinning to it: many short sleeps, each costing a frame the timer's wake-up delay (about
//! 15 µs here), instead of one long stop.

/// The window over which the share of sleep is kept: a tenth of the kernel's default period,
/// so every period holds ten of them.
pub const WINDOW_NS: u64 = 100_000_000;
/// Sleep kept above the kernel's unallowed share (5 % by default), for the other threads on
/// the same core and the kernel's own work in the thread's time.
pub const MARGIN: f64 = 0.03;

/// A thread's account of sleep.
#[derive(Debug, Clone, PartialEq)]
pub struct Rest {
    /// The share of each window to spend asleep; 0 when the thread need not rest.
    share: f64,
    window_start_ns: u64,
    slept_ns: u64,
}

impl Rest {
    pub fn new(now_ns: u64) -> Rest {
        Rest {
            share: 0.0,
            window_start_ns: now_ns,
            slept_ns: 0,
        }
    }

    /// Sets the share of sleep needed: the part of the period the kernel keeps from
    /// real-time threads, plus [`MARGIN`]; none for a thread that is not real-time or a
    /// kernel that does not throttle (runtime −1).
    pub fn set_limit(&mut self, real_time: bool, runtime_us: i64, period_us: i64) {
        self.share = if real_time && runtime_us >= 0 && period_us > 0 && runtime_us < period_us {
            (1.0 - runtime_us as f64 / period_us as f64 + MARGIN).min(1.0)
        } else {
            0.0
        };
    }

    /// The thread slept `ns` (any sleep counts).
    pub fn slept(&mut self, ns: u64) {
        self.slept_ns += ns;
    }

    /// Whether the thread has slept less than its share of the window so far (a new window
    /// begins every [`WINDOW_NS`]).
    pub fn owed(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.window_start_ns);
        if elapsed >= WINDOW_NS {
            self.window_start_ns = now_ns;
            self.slept_ns = 0;
        }
        (self.slept_ns as f64) < self.share * now_ns.saturating_sub(self.window_start_ns) as f64
    }
}

/// Whether the calling thread runs SCHED_FIFO or SCHED_RR (field 41 of
/// `/proc/thread-self/stat`, after the parenthesised name), and the kernel's real-time
/// runtime and period (µs); `None` when any cannot be read.
pub fn read_limit() -> Option<(bool, i64, i64)> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let policy: u32 = policy_field(&stat)?;
    let read = |name: &str| -> Option<i64> {
        let path = format!("/proc/sys/kernel/{name}");
        std::fs::read_to_string(path).ok()?.trim().parse().ok()
    };
    Some((
        policy == 1 || policy == 2,
        read("sched_rt_runtime_us")?,
        read("sched_rt_period_us")?,
    ))
}

/// The scheduling policy in a `/proc/.../stat` line: field 41, the 39th after the `)` that
/// ends the thread's name (which may itself hold spaces and parentheses).
fn policy_field(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(38)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_real_time_thread_owes_the_kernels_share_and_the_margin() {
        let mut r = Rest::new(0);
        assert!(!r.owed(50_000_000), "not real-time: never owed");
        r.set_limit(true, 950_000, 1_000_000);
        // 8 % of the 10 ms since the window began is 0.8 ms.
        r.slept(700_000);
        assert!(r.owed(10_000_000));
        r.slept(200_000);
        assert!(!r.owed(10_000_000));
        // A new window forgets the sleep before it.
        assert!(!r.owed(WINDOW_NS + 1), "nothing owed at the window's start");
        assert!(r.owed(WINDOW_NS + 1_000_000));
    }

    #[test]
    fn no_rest_where_the_kernel_does_not_throttle() {
        let mut r = Rest::new(0);
        r.set_limit(true, -1, 1_000_000);
        assert!(!r.owed(10_000_000));
        r.set_limit(false, 950_000, 1_000_000);
        assert!(!r.owed(10_000_000));
        r.set_limit(true, 1_000_000, 1_000_000);
        assert!(!r.owed(10_000_000));
    }

    #[test]
    fn the_policy_is_read_after_the_threads_name() {
        let fields: Vec<String> = (4..=52).map(|n| n.to_string()).collect();
        let mut line = format!("42 (emu:a) b>(c)) S {}", fields.join(" "));
        // Field 41 holds 41 here; make it SCHED_FIFO.
        line = line.replace(" 41 ", " 1 ");
        assert_eq!(policy_field(&line), Some(1));
        assert_eq!(policy_field("1 (x) S 2"), None);
        let (_, runtime, period) = read_limit().expect("procfs");
        assert!(period > 0 && runtime <= period);
    }
}
