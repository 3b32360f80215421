//! A sending thread's waits for its deadlines: the [`PacingPlanner`] of `flowlab-traffic`
//! picks the strategy, this sleeps and spins on the monotonic clock, feeds the planner the
//! wake-up latency it saw, and counts what the waits cost. Every paced sender waits here: the
//! engine's UDP and TCP senders, STAMP sessions, and flows in other tools' datagrams.

use std::time::Duration;

use flowlab_results::PacingReport;
use flowlab_spec::TestSpec;
use flowlab_sys::{clock, cpu};
use flowlab_traffic::pacing::{PacingPlanner, Strategy};
use flowlab_traffic::PacingMode;

/// The longest single wait, so a sender notices a stop request this soon.
pub const MAX_WAIT: Duration = Duration::from_millis(50);

/// The spacing assumed for a traffic model's deadlines until some are seen.
const MODEL_SPACING_GUESS_NS: u64 = 1_000_000;

/// The CPU of one sleep in this many is measured: reading a thread's CPU clock is a system
/// call (about 1.2 µs on the 2-core VM of docs/benchmarks.md, two a sleep), a sixth of what
/// a sleep itself costs there, and 1000 flows' sender sleeps 10k times a second.
const SLEEP_CPU_SAMPLE_EVERY: u64 = 8;

/// What one wait did.
pub struct Waited {
    /// ns spent busy-spinning.
    pub spun_ns: u64,
    /// The time to poll the sender core at: now, or the deadline itself when the kernel holds
    /// the packets until their transmit time.
    pub poll_at_ns: u64,
}

/// One sending thread's pacing.
pub struct Waiter {
    planner: PacingPlanner,
    /// The test has a schedule (a rate or a model); at max rate only a rate cap waits.
    scheduled: bool,
    started_ns: u64,
    waits: u64,
    sleeps: u64,
    /// ns spun, in every wait.
    spun_ns: u64,
    /// The sleeps whose CPU was measured, and what it was (their spins left out).
    sampled_sleeps: u64,
    sampled_sleep_cpu_ns: u64,
    /// Waits per strategy, in the order of [`STRATEGIES`].
    by_strategy: [u64; 4],
    last: Strategy,
}

/// The strategies' names, in the order of `Waiter::by_strategy`.
const STRATEGIES: [&str; 4] = ["spin", "sleep_spin", "sleep", "kernel_txtime"];

fn strategy_index(s: Strategy) -> usize {
    STRATEGIES.iter().position(|&n| n == s.name()).unwrap_or(0)
}

impl Waiter {
    /// The waits of a thread sending `flows` flows of `spec`; `kernel_timed`: its sockets
    /// hand packets to a qdisc that sends them at their transmit time.
    pub fn new(spec: &TestSpec, flows: usize, kernel_timed: bool) -> Self {
        let spacing = spec
            .packet_interval_ns()
            .map_or(MODEL_SPACING_GUESS_NS, |i| i / flows.max(1) as u64);
        Self::with_planner(
            PacingPlanner::new(spec.pacing, spacing, kernel_timed),
            spec.paced(),
        )
    }

    /// The waits of a sender whose deadlines are `spacing_ns` apart, paced as `mode` says.
    pub fn for_schedule(mode: PacingMode, spacing_ns: u64) -> Self {
        Self::with_planner(PacingPlanner::new(mode, spacing_ns, false), true)
    }

    fn with_planner(planner: PacingPlanner, scheduled: bool) -> Self {
        Waiter {
            last: planner.current(),
            planner,
            scheduled,
            started_ns: clock::monotonic_ns(),
            waits: 0,
            sleeps: 0,
            spun_ns: 0,
            sampled_sleeps: 0,
            sampled_sleep_cpu_ns: 0,
            by_strategy: [0; 4],
        }
    }

    /// How long before `until_ns` a thread that also reads sockets should stop waiting on
    /// them and [`Waiter::wait`] instead.
    pub fn margin_ns(&mut self, until_ns: u64) -> u64 {
        match self.planner.strategy(until_ns) {
            Strategy::Spin => u64::MAX,
            s => s.margin_ns(),
        }
    }

    /// How late a wait ends as a rule under the current plan (the traffic crate's
    /// `PacingPlanner::expected_lateness_ns`).
    pub fn expected_lateness_ns(&self) -> u64 {
        self.planner.expected_lateness_ns()
    }

    /// Waits for `until_ns` on the monotonic clock as the planner says, at most
    /// [`MAX_WAIT`] so a stop is noticed.
    pub fn wait(&mut self, until_ns: u64) -> Waited {
        let before = clock::monotonic_ns();
        let target = until_ns.min(before + MAX_WAIT.as_nanos() as u64);
        self.planner.on_wait(until_ns.saturating_sub(before));
        let strategy = self.planner.strategy(until_ns);
        self.last = strategy;
        self.waits += 1;
        self.by_strategy[strategy_index(strategy)] += 1;
        let (wake_at, spin_to) = match strategy {
            Strategy::Spin => (before, target),
            Strategy::SleepSpin { margin_ns } => (target.saturating_sub(margin_ns), target),
            Strategy::Sleep => (target, target),
            Strategy::KernelTime { lead_ns } => {
                let wake = target.saturating_sub(lead_ns);
                (wake, wake)
            }
        };
        if wake_at <= before {
            let (now, spun_ns) =
                clock::pace_until_counting_spin(spin_to, spin_to.saturating_sub(before));
            self.spun_ns += spun_ns;
            return self.waited(strategy, until_ns, target, now, spun_ns);
        }
        let cpu_before =
            (self.sleeps.is_multiple_of(SLEEP_CPU_SAMPLE_EVERY)).then(cpu::thread_cpu_ns);
        let (now, spun_ns) = clock::pace_until_counting_spin(spin_to, spin_to - wake_at);
        let sleep_cpu_ns = cpu_before.map(|before| {
            let cpu_ns = cpu::thread_cpu_ns().saturating_sub(before);
            cpu_ns.saturating_sub(spun_ns)
        });
        if let Some(cpu_ns) = sleep_cpu_ns {
            self.sampled_sleeps += 1;
            self.sampled_sleep_cpu_ns += cpu_ns;
        }
        self.spun_ns += spun_ns;
        self.sleeps += 1;
        let late_ns = (now - spun_ns).saturating_sub(wake_at);
        self.planner.on_wake(late_ns, sleep_cpu_ns);
        self.waited(strategy, until_ns, target, now, spun_ns)
    }

    /// The waits' CPU: every spin, and the sleeps' at the mean of those measured.
    fn cpu_ns(&self) -> u64 {
        let sleeps = match self.sampled_sleeps {
            0 => 0,
            n => (self.sampled_sleep_cpu_ns as u128 * self.sleeps as u128 / n as u128) as u64,
        };
        self.spun_ns + sleeps
    }

    fn waited(&self, strategy: Strategy, until: u64, target: u64, now: u64, spun: u64) -> Waited {
        let kernel_holds = matches!(strategy, Strategy::KernelTime { .. }) && target == until;
        Waited {
            spun_ns: spun,
            poll_at_ns: if kernel_holds { now.max(until) } else { now },
        }
    }

    /// What the waits were and cost, up to now; `None` for a test without a schedule.
    pub fn report(&self) -> Option<PacingReport> {
        if !self.scheduled {
            return None;
        }
        let wall = clock::monotonic_ns().saturating_sub(self.started_ns).max(1);
        let most = (0..STRATEGIES.len()).max_by_key(|&i| self.by_strategy[i]);
        let strategy = match most {
            Some(i) if self.waits > 0 => STRATEGIES[i],
            _ => self.last.name(),
        };
        Some(PacingReport {
            mode: self.planner.mode(),
            strategy: strategy.to_string(),
            margin_ns: match self.last {
                Strategy::Spin => self.planner.spacing_ns(),
                s => s.margin_ns(),
            },
            waits: self.waits,
            sleeps: self.sleeps,
            wake_latency_p50_ns: self.planner.latency_quantile(0.5),
            wake_latency_p99_ns: self.planner.latency_quantile(0.99),
            cpu_ns: self.cpu_ns(),
            cpu_pct: 100.0 * self.cpu_ns() as f64 / wall as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_spec::{Direction, Protocol};
    use flowlab_traffic::pacing::{FIRST_LATENCY_GUESS_NS, SPIN_SLACK_NS};
    use flowlab_traffic::PacingMode;

    /// Keeps the spinning tests from competing with each other for the cores.
    static SPINNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn spec(pacing: PacingMode, rate_bps: u64) -> TestSpec {
        TestSpec {
            pacing,
            rate_bps: Some(rate_bps),
            size: 1000,
            ..TestSpec::new(Protocol::Udp, Direction::Oneway)
        }
    }

    /// Waits at 500 packets/s for 0.2 s; the report.
    fn waits_at_500_pps(pacing: PacingMode) -> PacingReport {
        let mut waiter = Waiter::new(&spec(pacing, 4_000_000), 1, false);
        let start = clock::monotonic_ns();
        for k in 1..=100 {
            let due = start + k * 2_000_000;
            let w = waiter.wait(due);
            assert!(w.poll_at_ns >= due, "woke before the deadline");
        }
        waiter.report().expect("a paced test")
    }

    #[test]
    fn waits_sleep_learn_the_latency_and_count_their_cpu() {
        let _guard = SPINNING.lock().unwrap_or_else(|e| e.into_inner());
        let auto = waits_at_500_pps(PacingMode::Auto);
        assert_eq!(auto.mode, PacingMode::Auto);
        assert_eq!(auto.waits, 100);
        // 2 ms apart, every wait sleeps, unless a busy host woke one past the next deadline.
        assert!(auto.sleeps > 50, "{auto:?}");
        assert_eq!(auto.strategy, "sleep_spin");
        assert!(auto.wake_latency_p99_ns.is_some());
        assert!(auto.cpu_ns > 0);
        // Within budget (5 %) plus the sleeps' own cost, loosely: a loaded host is slower.
        assert!(auto.cpu_pct < 30.0, "{auto:?}");
    }

    #[test]
    fn one_sleep_in_eight_is_costed_and_stands_for_the_rest() {
        let _guard = SPINNING.lock().unwrap_or_else(|e| e.into_inner());
        // 1 ms apart: auto sleeps every wait (but spins one a busy host woke too late for).
        let mut waiter = Waiter::new(&spec(PacingMode::Auto, 8_000_000), 1, false);
        let start = clock::monotonic_ns();
        for k in 1..=20 {
            waiter.wait(start + k * 1_000_000);
        }
        let sleeps = waiter.sleeps;
        assert!(sleeps > 0);
        assert_eq!(
            waiter.sampled_sleeps,
            sleeps.div_ceil(SLEEP_CPU_SAMPLE_EVERY)
        );
        let mean = waiter.sampled_sleep_cpu_ns / waiter.sampled_sleeps;
        let cpu = waiter.report().expect("a paced test").cpu_ns;
        let expected = waiter.spun_ns + mean * sleeps;
        assert!(cpu.abs_diff(expected) <= sleeps, "{cpu} vs {expected}");
    }

    #[test]
    fn kernel_timed_waits_wake_early_and_poll_at_the_deadline() {
        let mut waiter = Waiter::new(&spec(PacingMode::Auto, 4_000_000), 1, true);
        let due = clock::monotonic_ns() + 5_000_000;
        let w = waiter.wait(due);
        // The qdisc holds the packets to their time: the sender polls as if it had come.
        assert!(w.poll_at_ns >= due);
        assert_eq!(w.spun_ns, 0, "no spin: the kernel keeps the time");
        let r = waiter.report().expect("a paced test");
        assert_eq!((r.strategy.as_str(), r.sleeps), ("kernel_txtime", 1));
        assert_eq!(r.margin_ns, FIRST_LATENCY_GUESS_NS + SPIN_SLACK_NS);
    }

    #[test]
    fn dense_precise_deadlines_spin_without_sleeping() {
        let _guard = SPINNING.lock().unwrap_or_else(|e| e.into_inner());
        // 100k packets/s: 10 us apart.
        let mut waiter = Waiter::new(&spec(PacingMode::Precise, 800_000_000), 1, false);
        let start = clock::monotonic_ns();
        for k in 1..=200 {
            waiter.wait(start + k * 10_000);
        }
        let r = waiter.report().expect("a paced test");
        assert_eq!((r.strategy.as_str(), r.sleeps), ("spin", 0), "{r:?}");
    }
}
