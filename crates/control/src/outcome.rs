//! What the roles of one end produced and what they cost: the client and the agent each
//! run roles on threads and report them the same way.

use std::time::Instant;

use flowlab_results::{CpuLoad, PacketRecord, RoleCpu};
use flowlab_sys::cpu::{usage_between, CpuSnapshot};

/// CPU and wall time of the threads that ran a role, with process and host readings taken
/// when the role started and ended: process, host and role figures cover the same time.
#[derive(Debug, Default, Clone)]
pub struct ThreadTime {
    pub user_ns: u64,
    pub system_ns: u64,
    pub wall_ns: u64,
    /// Process and host readings at the role's start and end (none if unreadable).
    window: Option<(CpuSnapshot, CpuSnapshot)>,
}

impl ThreadTime {
    /// Runs `f` on this thread and measures it. The total is the thread's precise CPU clock;
    /// getrusage's user/system split (sampled at ticks) only apportions it.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (T, ThreadTime) {
        let first = CpuSnapshot::take().ok();
        let usage = || flowlab_sys::cpu::thread_usage().unwrap_or((0, 0));
        let (start, start_cpu, wall) = (usage(), flowlab_sys::cpu::thread_cpu_ns(), Instant::now());
        let out = f();
        let (end, end_cpu) = (usage(), flowlab_sys::cpu::thread_cpu_ns());
        let wall_ns = wall.elapsed().as_nanos() as u64;
        let last = CpuSnapshot::take().ok();
        let total = end_cpu.saturating_sub(start_cpu);
        let user_ticks = end.0.saturating_sub(start.0);
        let system_ticks = end.1.saturating_sub(start.1);
        let user_ns = match user_ticks + system_ticks {
            0 => total,
            ticks => (total as u128 * u128::from(user_ticks) / u128::from(ticks)) as u64,
        };
        let time = ThreadTime {
            user_ns,
            system_ns: total - user_ns,
            wall_ns,
            window: first.zip(last),
        };
        (out, time)
    }

    /// Adds the CPU of worker threads a role started (extra flows' threads).
    pub fn with_workers(self, (user_ns, system_ns): (u64, u64)) -> ThreadTime {
        ThreadTime {
            user_ns: self.user_ns + user_ns,
            system_ns: self.system_ns + system_ns,
            ..self
        }
    }

    /// Two threads that ran side by side: their CPU added, over the time either ran.
    pub fn plus(self, other: ThreadTime) -> ThreadTime {
        let window = match (self.window, other.window) {
            (Some(a), Some(b)) => {
                let start = if a.0.wall_ns <= b.0.wall_ns { a.0 } else { b.0 };
                let end = if a.1.wall_ns >= b.1.wall_ns { a.1 } else { b.1 };
                Some((start, end))
            }
            (a, b) => a.or(b),
        };
        let wall_ns = match &window {
            Some((start, end)) => end.wall_ns.saturating_sub(start.wall_ns),
            None => self.wall_ns.max(other.wall_ns),
        };
        ThreadTime {
            user_ns: self.user_ns + other.user_ns,
            system_ns: self.system_ns + other.system_ns,
            wall_ns,
            window,
        }
    }

    /// Shares of one core. `spin_ns` of pacing busy-wait is named apart (it stays in the
    /// total); `packets` the role handled give the CPU per packet.
    pub fn role_cpu(&self, spin_ns: u64, packets: u64) -> Option<RoleCpu> {
        let pct = |ns: u64| 100.0 * ns as f64 / self.wall_ns as f64;
        let cpu_ns = self.user_ns + self.system_ns;
        (self.wall_ns > 0).then(|| RoleCpu {
            user_pct: pct(self.user_ns),
            system_pct: pct(self.system_ns),
            pacing_spin_pct: pct(spin_ns.min(cpu_ns)),
            cpu_ns,
            wall_ns: self.wall_ns,
            ns_per_packet: (packets > 0).then(|| cpu_ns as f64 / packets as f64),
        })
    }

    /// The process's and host's CPU over the role's run.
    pub fn cpu_load(&self) -> Option<CpuLoad> {
        let (start, end) = self.window.as_ref()?;
        let u = usage_between(start, end);
        Some(CpuLoad {
            process_user_pct: u.process_user_pct,
            process_system_pct: u.process_system_pct,
            host_pct: u.host_pct,
            host_softirq_pct: u.host_softirq_pct,
            host_softirq_per_cpu_pct: u.host_softirq_per_cpu_pct,
            cores: u.cores,
            process_max_rss_bytes: u.process_max_rss_bytes,
        })
    }
}

/// What a role produced, whichever role it was.
#[derive(Default)]
pub struct RoleOutcome {
    pub time: ThreadTime,
    /// CPU of worker threads the role started, added to `time` once measured.
    pub worker_cpu_ns: (u64, u64),
    pub sender: Option<flowlab_results::SenderReport>,
    pub receiver: Option<flowlab_results::ReceiverReport>,
    pub echo: Option<flowlab_results::EchoReport>,
    pub transactions: Option<flowlab_results::TransactionReport>,
    pub responder: Option<flowlab_results::ResponderReport>,
    pub tcp_info: Option<flowlab_results::TcpInfoReport>,
    /// Records of the role: received packets, or sent ones for a lone sender.
    pub log: Vec<PacketRecord>,
    /// A loopback client's sent packets, beside the echoes in `log`.
    pub sent_log: Vec<PacketRecord>,
    pub error: Option<String>,
}

impl RoleOutcome {
    /// The test packets this role handled, each once: sent, else received (duplicates
    /// included), else echoed; transactions or responses for request/response roles.
    pub fn packets_handled(&self) -> u64 {
        let counts = [
            self.sender.as_ref().map(|s| s.packets_sent),
            self.receiver.as_ref().map(|r| r.packets.received),
            self.echo.as_ref().map(|e| e.packets_echoed),
            self.transactions.as_ref().map(|t| t.transactions),
            self.responder.as_ref().map(|r| r.responses),
        ];
        counts.into_iter().flatten().next().unwrap_or(0)
    }

    /// The role's CPU figures: the pacing spin apart, CPU per packet handled.
    pub fn role_cpu(&self) -> Option<RoleCpu> {
        let spin = self.sender.as_ref().map_or(0, |s| s.pacing_spin_ns);
        self.time.role_cpu(spin, self.packets_handled())
    }

    pub fn failed(why: &str) -> Self {
        RoleOutcome {
            error: Some(why.to_string()),
            ..RoleOutcome::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spent(user_ns: u64, system_ns: u64, wall_ns: u64) -> ThreadTime {
        ThreadTime {
            user_ns,
            system_ns,
            wall_ns,
            window: None,
        }
    }

    #[test]
    fn role_cpu_keeps_the_spin_in_the_total_and_divides_by_packets() {
        let time = spent(300_000_000, 100_000_000, 1_000_000_000);
        let cpu = time.role_cpu(250_000_000, 1000).unwrap();
        assert_eq!((cpu.user_pct, cpu.system_pct), (30.0, 10.0));
        assert_eq!(cpu.total_pct(), 40.0, "the spin is not subtracted");
        assert_eq!(cpu.pacing_spin_pct, 25.0);
        assert_eq!((cpu.cpu_ns, cpu.wall_ns), (400_000_000, 1_000_000_000));
        assert_eq!(cpu.ns_per_packet, Some(400_000.0));
        // A spin timed longer than the CPU the threads got (preempted) is at most all of it.
        assert_eq!(time.role_cpu(900_000_000, 0).unwrap().pacing_spin_pct, 40.0);
        assert_eq!(time.role_cpu(0, 0).unwrap().ns_per_packet, None);
        assert_eq!(spent(5, 5, 0).role_cpu(0, 1), None, "no run, no share");
    }

    #[test]
    fn threads_side_by_side_add_cpu_over_the_time_either_ran() {
        let (_, a) =
            ThreadTime::measure(|| std::thread::sleep(std::time::Duration::from_millis(20)));
        let (_, b) =
            ThreadTime::measure(|| std::thread::sleep(std::time::Duration::from_millis(20)));
        let (a_cpu, b_cpu) = (a.user_ns + a.system_ns, b.user_ns + b.system_ns);
        let both = a.clone().plus(b.clone());
        assert_eq!(both.user_ns + both.system_ns, a_cpu + b_cpu);
        // One after the other here: the window spans both runs.
        assert!(both.wall_ns >= a.wall_ns + b.wall_ns, "{both:?}");
        let load = both.cpu_load().expect("/proc/stat readable");
        assert!(load.process_user_pct >= 0.0 && load.host_pct <= 100.0);
        assert_eq!(spent(1, 2, 30).plus(spent(3, 4, 50)).wall_ns, 50);
    }

    #[test]
    fn packets_handled_are_the_roles_own() {
        let mut out = RoleOutcome::default();
        assert_eq!(out.packets_handled(), 0);
        out.echo = Some(flowlab_results::EchoReport {
            packets_echoed: 7,
            ..Default::default()
        });
        assert_eq!(out.packets_handled(), 7);
        let mut receiver = flowlab_results::meter::ReceiverMeter::new(1, false, false).report(None);
        receiver.packets.received = 12;
        out.receiver = Some(receiver);
        assert_eq!(out.packets_handled(), 12);
        // A loopback client: per packet sent, its echo's receipt included.
        let mut sender = flowlab_results::meter::SenderMeter::new(1, true, false).report();
        sender.packets_sent = 10;
        out.sender = Some(sender);
        assert_eq!(out.packets_handled(), 10);
    }
}
