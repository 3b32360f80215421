//! What the roles of one end produced and what they cost: the client and the agent each
//! run roles on threads and report them the same way.

use std::time::Instant;

use flowlab_results::PacketRecord;
use flowlab_sys::cpu::CpuSnapshot;

/// Mean CPU load since `start`.
pub fn cpu_load(start: &CpuSnapshot) -> Option<flowlab_results::CpuLoad> {
    let end = CpuSnapshot::take().ok()?;
    let u = flowlab_sys::cpu::usage_between(start, &end);
    Some(flowlab_results::CpuLoad {
        process_user_pct: u.process_user_pct,
        process_system_pct: u.process_system_pct,
        host_pct: u.host_pct,
        cores: u.cores,
        process_max_rss_bytes: u.process_max_rss_bytes,
    })
}

/// CPU and wall time of the threads that ran a role.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadTime {
    pub user_ns: u64,
    pub system_ns: u64,
    pub wall_ns: u64,
}

impl ThreadTime {
    /// Runs `f` on this thread and measures it. The total is the thread's precise CPU clock;
    /// getrusage's tick-granular user/system split only apportions it.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (T, ThreadTime) {
        let usage = || flowlab_sys::cpu::thread_usage().unwrap_or((0, 0));
        let (start, start_cpu, wall) = (usage(), flowlab_sys::cpu::thread_cpu_ns(), Instant::now());
        let out = f();
        let (end, end_cpu) = (usage(), flowlab_sys::cpu::thread_cpu_ns());
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
            wall_ns: wall.elapsed().as_nanos() as u64,
        };
        (out, time)
    }

    /// Adds the CPU of worker threads a role started (extra TCP connections).
    pub fn with_workers(self, (user_ns, system_ns): (u64, u64)) -> ThreadTime {
        ThreadTime {
            user_ns: self.user_ns + user_ns,
            system_ns: self.system_ns + system_ns,
            ..self
        }
    }

    /// Two threads that ran side by side.
    pub fn plus(self, other: ThreadTime) -> ThreadTime {
        ThreadTime {
            user_ns: self.user_ns + other.user_ns,
            system_ns: self.system_ns + other.system_ns,
            wall_ns: self.wall_ns.max(other.wall_ns),
        }
    }

    /// Shares of one core; `spin_ns` of pacing busy-wait is named apart (it is user time).
    pub fn role_cpu(&self, spin_ns: u64) -> Option<flowlab_results::RoleCpu> {
        let pct = |ns: u64| 100.0 * ns as f64 / self.wall_ns as f64;
        (self.wall_ns > 0).then(|| flowlab_results::RoleCpu {
            user_pct: pct(self.user_ns),
            system_pct: pct(self.system_ns),
            pacing_spin_pct: pct(spin_ns.min(self.user_ns)),
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
    pub fn failed(why: &str) -> Self {
        RoleOutcome {
            error: Some(why.to_string()),
            ..RoleOutcome::default()
        }
    }
}
