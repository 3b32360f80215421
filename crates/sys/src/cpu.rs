//! Process and host CPU accounting, so reports can show whether the tester
//! itself was the bottleneck.

use std::io;

use serde::{Deserialize, Serialize};

use crate::clock::monotonic_ns;

/// Jiffies of one `cpu` line of /proc/stat (the aggregate or one `cpuN`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuJiffies {
    /// user + nice + system + irq + softirq + steal.
    pub busy: u64,
    /// Serving softirqs (network receive and transmit processing among them).
    pub softirq: u64,
    /// Busy plus idle + iowait.
    pub total: u64,
}

impl CpuJiffies {
    /// Parses the numbers after a `cpu` label; `None` with fewer than four.
    ///
    /// guest/guest_nice are ignored because the kernel already counts them in
    /// user/nice. Junk numbers count 0 rather than failing.
    fn parse<'a>(fields: impl Iterator<Item = &'a str>) -> Option<CpuJiffies> {
        let vals: Vec<u64> = fields.map(|f| f.parse::<u64>().unwrap_or(0)).collect();
        if vals.len() < 4 {
            return None;
        }
        let get = |i: usize| vals.get(i).copied().unwrap_or(0);
        let (user, nice, system, idle) = (get(0), get(1), get(2), get(3));
        let (iowait, irq, softirq, steal) = (get(4), get(5), get(6), get(7));
        let busy = [user, nice, system, irq, softirq, steal]
            .into_iter()
            .fold(0u64, u64::saturating_add);
        Some(CpuJiffies {
            busy,
            softirq,
            total: busy.saturating_add(idle).saturating_add(iowait),
        })
    }

    fn since(&self, start: &CpuJiffies) -> CpuJiffies {
        CpuJiffies {
            busy: self.busy.saturating_sub(start.busy),
            softirq: self.softirq.saturating_sub(start.softirq),
            total: self.total.saturating_sub(start.total),
        }
    }
}

/// Host-wide CPU time counters from /proc/stat.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostCpuTimes {
    /// The aggregate `cpu` line: all cores together.
    pub all: CpuJiffies,
    /// Each `cpuN` line (online CPUs), in the file's order.
    pub per_cpu: Vec<CpuJiffies>,
    /// Number of per-CPU `cpuN` lines.
    pub cores: u32,
}

/// Parses /proc/stat text. Pure so it can be tested on sample text.
///
/// Returns `None` if there is no usable aggregate `cpu` line.
pub fn parse_proc_stat(text: &str) -> Option<HostCpuTimes> {
    let mut all: Option<CpuJiffies> = None;
    let mut per_cpu = Vec::new();
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(label) = fields.next() else {
            continue;
        };
        if label == "cpu" {
            all = Some(CpuJiffies::parse(fields)?);
        } else if label
            .strip_prefix("cpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            per_cpu.push(CpuJiffies::parse(fields).unwrap_or_default());
        }
    }
    Some(HostCpuTimes {
        all: all?,
        cores: u32::try_from(per_cpu.len()).unwrap_or(u32::MAX),
        per_cpu,
    })
}

/// A point-in-time CPU reading; two of them give a [`CpuUsage`].
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    /// Process user time (getrusage RUSAGE_SELF), ns.
    pub process_user_ns: u64,
    /// Process system time (getrusage RUSAGE_SELF), ns.
    pub process_system_ns: u64,
    /// Largest resident set of the process since it started (ru_maxrss), bytes.
    pub process_max_rss_bytes: u64,
    /// Host counters from /proc/stat.
    pub host: HostCpuTimes,
    /// Monotonic wall time of the reading, ns.
    pub wall_ns: u64,
}

fn timeval_ns(tv: libc::timeval) -> u64 {
    let sec = u64::try_from(tv.tv_sec).unwrap_or(0);
    let usec = u64::try_from(tv.tv_usec).unwrap_or(0);
    sec.saturating_mul(1_000_000_000)
        .saturating_add(usec.saturating_mul(1_000))
}

impl CpuSnapshot {
    /// Reads process rusage, /proc/stat and the monotonic clock.
    pub fn take() -> io::Result<CpuSnapshot> {
        let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: `ru` points to writable memory large enough for a rusage.
        let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: zeroed is a valid rusage (plain integers) and getrusage
        // succeeded, so it is fully initialised.
        let ru = unsafe { ru.assume_init() };
        let text = std::fs::read_to_string("/proc/stat")?;
        let mut host = parse_proc_stat(&text).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "no 'cpu' line in /proc/stat")
        })?;
        if host.cores == 0 {
            host.per_cpu.clear();
            host.cores = std::thread::available_parallelism()
                .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
                .unwrap_or(1);
        }
        Ok(CpuSnapshot {
            process_user_ns: timeval_ns(ru.ru_utime),
            process_system_ns: timeval_ns(ru.ru_stime),
            // Linux reports ru_maxrss in KiB.
            process_max_rss_bytes: u64::try_from(ru.ru_maxrss)
                .unwrap_or(0)
                .saturating_mul(1024),
            host,
            wall_ns: monotonic_ns(),
        })
    }
}

/// CPU time consumed by the calling thread, ns (CLOCK_THREAD_CPUTIME_ID),
/// so a role can report its own CPU when client and agent share a process.
/// 0 if the clock is unavailable.
pub fn thread_cpu_ns() -> u64 {
    crate::clock::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// (user, system) CPU time of the calling thread, ns (getrusage
/// RUSAGE_THREAD); tick-granular, unlike [`thread_cpu_ns`], but split.
pub fn thread_usage() -> io::Result<(u64, u64)> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `ru` points to writable memory large enough for a rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, ru.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zeroed is a valid rusage (plain integers) and getrusage
    // succeeded, so it is fully initialised.
    let ru = unsafe { ru.assume_init() };
    Ok((timeval_ns(ru.ru_utime), timeval_ns(ru.ru_stime)))
}

/// Pins the calling thread, and every thread it starts afterwards, to `cpus`
/// (sched_setaffinity). Called first thing, it pins the whole process.
pub fn pin_to(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is a plain bit array, so all-zero (the empty set) is valid.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let capacity = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &cpu in cpus {
        if cpu >= capacity {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("CPU {cpu} is beyond the {capacity} a CPU set holds"),
            ));
        }
        // SAFETY: `cpu` is below the set's capacity, checked above.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t and the size passed is its size; pid 0 is this thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the calling thread SCHED_IDLE: it runs only on a core nothing else wants, and any
/// other thread waking there preempts it at once. For bookkeeping that must never delay
/// time-critical threads (an emulator's report, beside a paced sender). Threads it starts
/// afterwards inherit the policy. Lowering a thread's policy needs no privilege.
pub fn set_thread_idle_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param for SCHED_IDLE (priority 0); pid 0 is this thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's scheduling policy (`libc::SCHED_*`).
pub fn thread_policy() -> io::Result<i32> {
    // SAFETY: sched_getscheduler takes a pid and touches no memory; pid 0 is this thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(policy)
}

/// CPU usage over an interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuUsage {
    /// Process user time, percent of one core (may exceed 100 with threads).
    pub process_user_pct: f64,
    /// Process system time, percent of one core.
    pub process_system_pct: f64,
    /// Host busy time across all cores, 0..=100.
    pub host_pct: f64,
    /// Host softirq time across all cores, 0..=100 (whoever's packets it served).
    pub host_softirq_pct: f64,
    /// Softirq share of each CPU, 0..=100, in /proc/stat's order; empty if CPUs came or went.
    pub host_softirq_per_cpu_pct: Vec<f64>,
    /// Number of host cores.
    pub cores: u32,
    /// Largest resident set of the process since it started, bytes.
    pub process_max_rss_bytes: u64,
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    let v = part as f64 * 100.0 / whole as f64;
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

/// Usage between two snapshots; always finite (0 when no time elapsed).
pub fn usage_between(start: &CpuSnapshot, end: &CpuSnapshot) -> CpuUsage {
    let wall = end.wall_ns.saturating_sub(start.wall_ns);
    let user = end.process_user_ns.saturating_sub(start.process_user_ns);
    let system = end
        .process_system_ns
        .saturating_sub(start.process_system_ns);
    let host = end.host.all.since(&start.host.all);
    let share = |d: CpuJiffies, part: u64| pct(part, d.total).clamp(0.0, 100.0);
    let per_cpu = if start.host.per_cpu.len() == end.host.per_cpu.len() {
        let deltas = end.host.per_cpu.iter().zip(&start.host.per_cpu);
        deltas
            .map(|(e, s)| e.since(s))
            .map(|d| share(d, d.softirq))
            .collect()
    } else {
        Vec::new()
    };
    CpuUsage {
        process_user_pct: pct(user, wall),
        process_system_pct: pct(system, wall),
        host_pct: share(host, host.busy),
        host_softirq_pct: share(host, host.softirq),
        host_softirq_per_cpu_pct: per_cpu,
        cores: end.host.cores,
        process_max_rss_bytes: end.process_max_rss_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_a_thread_and_refuses_impossible_sets() {
        let allowed = std::thread::spawn(|| {
            pin_to(&[0]).unwrap();
            let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
            status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .map(|v| v.trim().to_string())
        })
        .join()
        .unwrap();
        assert_eq!(allowed.as_deref(), Some("0"));
        assert!(pin_to(&[1 << 20]).is_err());
        assert!(
            pin_to(&[]).is_err(),
            "an empty set is refused by the kernel"
        );
    }

    #[test]
    fn a_thread_made_idle_is_idle_and_the_others_are_not() {
        let policy = std::thread::spawn(|| {
            set_thread_idle_policy().unwrap();
            thread_policy().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(policy, libc::SCHED_IDLE);
        assert_ne!(
            thread_policy().unwrap(),
            libc::SCHED_IDLE,
            "only that thread"
        );
    }

    const SAMPLE: &str = "cpu  963 10 1427 47983 163 0 15 20 5 0\n\
cpu0 324 5 579 24347 20 0 3 7 0 0\n\
cpu1 638 5 847 23636 142 0 11 12 0 0\n\
intr 123456 0 0\n\
ctxt 987654\n\
btime 1700000000\n\
processes 4242\n\
procs_running 2\n";

    #[test]
    fn parses_sample() {
        let h = parse_proc_stat(SAMPLE).unwrap();
        let busy = 963 + 10 + 1427 + 15 + 20; // irq column is 0
        assert_eq!(h.all.busy, busy);
        assert_eq!(h.all.softirq, 15);
        assert_eq!(h.all.total, busy + 47983 + 163);
        assert_eq!(h.cores, 2);
        let cpu1 = CpuJiffies {
            busy: 638 + 5 + 847 + 11 + 12,
            softirq: 11,
            total: 638 + 5 + 847 + 11 + 12 + 23636 + 142,
        };
        assert_eq!(h.per_cpu[1], cpu1);
    }

    #[test]
    fn parses_old_kernel_four_fields() {
        let h = parse_proc_stat("cpu 1 2 3 4\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!((h.all.busy, h.all.softirq, h.all.total), (6, 0, 10));
        assert_eq!(h.cores, 1);
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(parse_proc_stat(""), None);
        assert_eq!(parse_proc_stat("cpu 1 2\n"), None);
        assert_eq!(parse_proc_stat("intr 1 2 3 4 5\ncpux 1 2 3 4"), None);
        // Junk numbers become 0 rather than failing.
        let h = parse_proc_stat("cpu x 2 3 4 99999999999999999999999\n").unwrap();
        assert_eq!((h.all.busy, h.all.total), (5, 9));
    }

    #[test]
    fn zero_interval_is_zero_and_finite() {
        let s = CpuSnapshot::take().unwrap();
        let u = usage_between(&s, &s);
        assert_eq!(u.process_user_pct, 0.0);
        assert_eq!(u.process_system_pct, 0.0);
        assert_eq!(u.host_pct, 0.0);
        // Reversed order must not panic or go negative.
        let later = CpuSnapshot::take().unwrap();
        let r = usage_between(&later, &s);
        assert!(r.process_user_pct.is_finite() && r.process_user_pct >= 0.0);
    }

    #[test]
    fn usage_around_spin() {
        let _guard = crate::TEST_CPU_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let start = CpuSnapshot::take().unwrap();
        let t0 = monotonic_ns();
        let mut x = 0u64;
        while monotonic_ns() - t0 < 50_000_000 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let end = CpuSnapshot::take().unwrap();
        let u = usage_between(&start, &end);
        eprintln!("{u:?}");
        let proc_pct = u.process_user_pct + u.process_system_pct;
        assert!(proc_pct > 0.0 && proc_pct.is_finite());
        assert!(u.host_pct.is_finite() && (0.0..=100.0).contains(&u.host_pct));
        assert!(u.cores >= 1);
    }

    /// A snapshot of fixed /proc/stat text at `wall_ns`, the process having used `cpu_ns`.
    fn snapshot(stat: &str, wall_ns: u64, (user, system): (u64, u64)) -> CpuSnapshot {
        CpuSnapshot {
            process_user_ns: user,
            process_system_ns: system,
            process_max_rss_bytes: 1 << 20,
            host: parse_proc_stat(stat).unwrap(),
            wall_ns,
        }
    }

    #[test]
    fn softirq_shares_host_wide_and_per_cpu() {
        let start = snapshot(SAMPLE, 0, (0, 0));
        // One second later (100 jiffies per CPU): cpu0 spent 30 in softirq, cpu1 none.
        let later = "cpu  1003 10 1467 48073 163 0 45 20 5 0\n\
cpu0 334 5 589 24397 20 0 33 7 0 0\n\
cpu1 668 5 877 23676 142 0 11 12 0 0\n";
        let end = snapshot(later, 1_000_000_000, (250_000_000, 500_000_000));
        let u = usage_between(&start, &end);
        assert_eq!(u.host_softirq_pct, 15.0, "30 of 200 jiffies");
        assert_eq!(u.host_softirq_per_cpu_pct, vec![30.0, 0.0]);
        assert_eq!(u.host_pct, 55.0, "110 of 200 jiffies busy");
        assert_eq!((u.process_user_pct, u.process_system_pct), (25.0, 50.0));
        // A CPU gone offline between the readings: no per-CPU figures rather than wrong ones.
        let one_cpu = "cpu  1003 10 1467 48073 163 0 45 20 5 0\n\
cpu0 334 5 589 24397 20 0 33 7 0 0\n";
        let u = usage_between(&start, &snapshot(one_cpu, 1_000_000_000, (0, 0)));
        assert!(u.host_softirq_per_cpu_pct.is_empty());
        assert_eq!(u.host_softirq_pct, 15.0);
    }

    #[test]
    fn usage_serde_roundtrip() {
        let u = CpuUsage {
            process_user_pct: 12.5,
            process_system_pct: 3.25,
            host_pct: 50.0,
            host_softirq_pct: 1.5,
            host_softirq_per_cpu_pct: vec![3.0, 0.0],
            cores: 8,
            process_max_rss_bytes: 14 << 20,
        };
        let json = serde_json::to_string(&u).unwrap();
        assert_eq!(serde_json::from_str::<CpuUsage>(&json).unwrap(), u);
    }

    #[test]
    fn thread_cpu_counts_only_this_thread() {
        let _guard = crate::TEST_CPU_LOCK
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let spin = |ms: u64| {
            let t0 = monotonic_ns();
            let mut x = 0u64;
            while monotonic_ns() - t0 < ms * 1_000_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        };
        let c0 = thread_cpu_ns();
        let (u0, s0) = thread_usage().unwrap();
        spin(60);
        let c1 = thread_cpu_ns();
        let (u1, s1) = thread_usage().unwrap();
        let used = c1 - c0;
        eprintln!(
            "thread cpu {used} ns, rusage user {} sys {}",
            u1 - u0,
            s1 - s0
        );
        // Spinning 60 ms of wall time on a shared 2-core box: well above 5 ms.
        assert!(used > 5_000_000 && used < 2_000_000_000, "{used}");
        assert!(u1 + s1 > u0 + s0);
        // A sleeping thread uses almost none.
        let idle = std::thread::spawn(|| {
            let a = thread_cpu_ns();
            std::thread::sleep(std::time::Duration::from_millis(50));
            thread_cpu_ns() - a
        })
        .join()
        .unwrap();
        assert!(idle < 10_000_000, "{idle}");
    }
}
