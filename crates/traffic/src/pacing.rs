//! How a sender waits for its next deadline, chosen per flow (per event loop) from the
//! deadlines' spacing and the wake-up latency its sleeps have shown, within a CPU budget.
//!
//! A sleep ends late by the scheduler's wake-up latency. Spinning the last part of the wait
//! hides that latency but costs the CPU of the spin; a spin margin at a high percentile of the
//! learned latency makes nearly every deadline, and at a few hundred packets a second costs
//! little. The [`PacingPlanner`] learns the latency and the spacing; [`choose`] is the rule.
//! Sans-IO: times are nanoseconds passed in.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What the user asked of pacing (`--pacing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PacingMode {
    /// The fewest late packets, whatever the CPU: spin past the worst wake-ups.
    Precise,
    /// Little CPU (1 % of a core at most on waiting): sleep, spin only a short tail.
    Efficient,
    /// Precise within 5 % of a core spent on waiting (the default).
    #[default]
    Auto,
}

impl PacingMode {
    pub const ALL: [PacingMode; 3] = [PacingMode::Precise, PacingMode::Efficient, PacingMode::Auto];

    pub fn name(self) -> &'static str {
        match self {
            PacingMode::Precise => "precise",
            PacingMode::Efficient => "efficient",
            PacingMode::Auto => "auto",
        }
    }

    pub fn is_auto(&self) -> bool {
        *self == PacingMode::Auto
    }

    /// Share of one core the waits may spin away.
    pub fn cpu_budget(self) -> f64 {
        match self {
            PacingMode::Precise => 1.0,
            PacingMode::Auto => 0.05,
            PacingMode::Efficient => 0.01,
        }
    }

    /// The window within which flows that share a socket send their packets together (see
    /// [`GroupWindow`]). Its half is the error it adds either way, chosen from the 100 µs
    /// that a schedule error's 99th percentile may reach (issue 18): auto's 20 µs leaves 80
    /// µs for wake-ups' lateness and stalls (a half of 40 µs put p99 at 116 µs to 1.3 ms on a
    /// quiet 2-core VM: docs/benchmarks.md § e); efficient's 80 µs spends that margin on a
    /// quarter of auto's wake-ups; precise never sends a packet early.
    pub fn group_window(self) -> GroupWindow {
        GroupWindow::new(match self {
            PacingMode::Precise => 0,
            PacingMode::Auto => 40_000,
            PacingMode::Efficient => 160_000,
        })
    }

    /// The percentile of the learned wake-up latency the spin margin covers.
    pub fn latency_quantile(self) -> f64 {
        match self {
            PacingMode::Precise => 0.999,
            PacingMode::Auto => 0.99,
            PacingMode::Efficient => 0.5,
        }
    }
}

impl fmt::Display for PacingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PacingMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PacingMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("pacing is precise, efficient or auto, not '{s}'"))
    }
}

/// Where flows that share a socket release their packets together: one send takes every
/// packet due within a window `width_ns` wide, centred on the send. The send is due half a
/// window after the first packet's deadline, so no packet leaves more than half a window
/// early or (apart from the wake-up's lateness) late: the same batching as a window that
/// starts at the first deadline, for half its worst error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupWindow {
    width_ns: u64,
}

impl GroupWindow {
    pub fn new(width_ns: u64) -> Self {
        GroupWindow { width_ns }
    }

    pub fn width_ns(self) -> u64 {
        self.width_ns
    }

    /// The most a packet leaves before or after its deadline because of the grouping.
    pub fn half_ns(self) -> u64 {
        self.width_ns / 2
    }

    /// When to send the group whose earliest deadline is `first_due_ns`.
    pub fn release_at(self, first_due_ns: u64) -> u64 {
        first_due_ns.saturating_add(self.half_ns())
    }

    /// When to wake for that send, where a wake-up ends `lateness_ns` late as a rule (see
    /// [`PacingPlanner::expected_lateness_ns`]): early by that, up to half a window, so the
    /// send itself lands near the middle.
    pub fn wake_at(self, first_due_ns: u64, lateness_ns: u64) -> u64 {
        self.release_at(first_due_ns) - lateness_ns.min(self.half_ns())
    }

    /// The latest deadline a send at `now_ns` takes.
    pub fn gathers_until(self, now_ns: u64) -> u64 {
        now_ns.saturating_add(self.half_ns())
    }
}

/// How to wait for one deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Deadlines closer together than a wake-up takes: never sleep.
    Spin,
    /// Sleep until `margin_ns` before the deadline, then spin to it.
    SleepSpin { margin_ns: u64 },
    /// Sleep to the deadline; the packet is late by the wake-up latency.
    Sleep,
    /// Wake `lead_ns` early and hand the packets over with their transmit time (SO_TXTIME):
    /// the kernel's qdisc releases them.
    KernelTime { lead_ns: u64 },
}

impl Strategy {
    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Spin => "spin",
            Strategy::SleepSpin { .. } => "sleep_spin",
            Strategy::Sleep => "sleep",
            Strategy::KernelTime { .. } => "kernel_txtime",
        }
    }

    /// How long before the deadline a sleep ends (the spin margin or the kernel's lead); 0
    /// for [`Strategy::Spin`], which never sleeps.
    pub fn margin_ns(self) -> u64 {
        match self {
            Strategy::Spin | Strategy::Sleep => 0,
            Strategy::SleepSpin { margin_ns } => margin_ns,
            Strategy::KernelTime { lead_ns } => lead_ns,
        }
    }
}

/// A spin shorter than this is not worth its setup: sleep instead.
pub const MIN_SPIN_NS: u64 = 2_000;
/// Added to a latency percentile: the spin's own start-up and clock reads.
pub const SPIN_SLACK_NS: u64 = 5_000;
/// A spin never exceeds this (a host whose wake-ups take longer is too busy to pace).
pub const MAX_SPIN_NS: u64 = 1_000_000;

/// What the rule weighs, all learned by the [`PacingPlanner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conditions {
    /// Mean time between deadlines.
    pub spacing_ns: u64,
    /// Mean time a wait had to cover (its deadline less when it began): what spinning
    /// instead of sleeping would cost. Below the spacing where sending fills most of a gap.
    pub wait_ns: u64,
    /// The wake-up latency at the mode's percentile.
    pub latency_ns: u64,
    /// CPU one sleep costs (the calls and the switches; 0 until measured).
    pub sleep_cpu_ns: u64,
    /// The socket hands packets to a qdisc that sends each at its transmit time (SO_TXTIME
    /// under fq).
    pub kernel_timed: bool,
}

/// The rule. Where a measured sleep costs more CPU than spinning through the wait it
/// replaces (or the gap between deadlines, if shorter), spin (cheaper and exact); else sleep, and spin a margin that covers the latency as far as the
/// mode's budget pays for it after the sleep's own cost.
pub fn choose(mode: PacingMode, c: &Conditions) -> Strategy {
    if c.sleep_cpu_ns > 0 && c.sleep_cpu_ns >= c.wait_ns.min(c.spacing_ns) {
        return Strategy::Spin;
    }
    let wanted = (c.latency_ns + SPIN_SLACK_NS).min(MAX_SPIN_NS);
    if c.kernel_timed && mode != PacingMode::Precise {
        return Strategy::KernelTime { lead_ns: wanted };
    }
    if mode == PacingMode::Precise && c.spacing_ns <= wanted {
        return Strategy::Spin;
    }
    let affordable =
        ((mode.cpu_budget() * c.spacing_ns as f64) as u64).saturating_sub(c.sleep_cpu_ns);
    match wanted.min(affordable) {
        margin if margin < MIN_SPIN_NS => Strategy::Sleep,
        margin_ns => Strategy::SleepSpin { margin_ns },
    }
}

/// Wake-up latencies remembered: the planner's window.
const WINDOW: usize = 256;
/// The plan is remade after this many new samples (a sort of the window each time).
const REPLAN_EVERY: u32 = 32;
/// ... or after this many waits, so a plan whose spin margin outgrew the gaps (chosen while
/// the host was busy and the waits far apart) is looked at again though nothing sleeps.
const REPLAN_WAITS: u32 = 4 * REPLAN_EVERY;
/// The latency assumed before any sleep was measured.
pub const FIRST_LATENCY_GUESS_NS: u64 = 60_000;
/// Weight of a new gap in the mean spacing of deadlines, and of a new wait in theirs.
const SPACING_WEIGHT: f64 = 1.0 / 64.0;
/// Weight of a new sleep's CPU in its mean.
const SLEEP_CPU_WEIGHT: f64 = 1.0 / 16.0;

/// One sender's pacing: the mode, the latency its sleeps showed lately and the spacing of
/// its deadlines, turned into a [`Strategy`] every [`REPLAN_EVERY`] sleeps or
/// [`REPLAN_WAITS`] waits.
#[derive(Debug, Clone)]
pub struct PacingPlanner {
    mode: PacingMode,
    kernel_timed: bool,
    samples: Vec<u64>,
    next_sample: usize,
    since_plan: u32,
    waits_since_plan: u32,
    spacing_ns: f64,
    last_deadline_ns: Option<u64>,
    /// Mean length of the waits (`on_wait`); `None` before the first.
    wait_ns: Option<f64>,
    sleep_cpu_ns: Option<f64>,
    /// The median wake-up latency at the last plan.
    median_latency_ns: u64,
    strategy: Strategy,
}

impl PacingPlanner {
    /// A planner for deadlines expected `spacing_ns` apart (the packet interval of the loop's
    /// flows together; the first gaps measured replace the guess).
    pub fn new(mode: PacingMode, spacing_ns: u64, kernel_timed: bool) -> Self {
        let mut planner = PacingPlanner {
            mode,
            kernel_timed,
            samples: Vec::with_capacity(WINDOW),
            next_sample: 0,
            since_plan: 0,
            waits_since_plan: 0,
            spacing_ns: spacing_ns.max(1) as f64,
            last_deadline_ns: None,
            wait_ns: None,
            sleep_cpu_ns: None,
            median_latency_ns: 0,
            strategy: Strategy::Spin,
        };
        planner.strategy = choose(mode, &planner.conditions());
        planner
    }

    pub fn mode(&self) -> PacingMode {
        self.mode
    }

    /// The strategy of the latest plan.
    pub fn current(&self) -> Strategy {
        self.strategy
    }

    /// How late a wait under the current plan ends as a rule: the median wake-up latency
    /// where it sleeps to the deadline, 0 where a spin covers it (or before any sleep).
    pub fn expected_lateness_ns(&self) -> u64 {
        match self.strategy {
            Strategy::Sleep => self.median_latency_ns,
            _ => 0,
        }
    }

    /// The strategy for a wait until `deadline_ns`, learning the deadlines' spacing.
    pub fn strategy(&mut self, deadline_ns: u64) -> Strategy {
        match self.last_deadline_ns {
            Some(last) if deadline_ns > last => {
                let gap = (deadline_ns - last) as f64;
                self.spacing_ns += (gap - self.spacing_ns) * SPACING_WEIGHT;
                self.last_deadline_ns = Some(deadline_ns);
            }
            None => self.last_deadline_ns = Some(deadline_ns),
            _ => {}
        }
        self.waits_since_plan += 1;
        if self.waits_since_plan >= REPLAN_WAITS {
            self.replan();
        }
        self.strategy
    }

    /// A wait began `wait_ns` before its deadline (0 when the deadline had passed).
    pub fn on_wait(&mut self, wait_ns: u64) {
        let mean = self.wait_ns.get_or_insert(wait_ns as f64);
        *mean += (wait_ns as f64 - *mean) * SPACING_WEIGHT;
    }

    /// A sleep asked to end at some time ended `late_ns` after it, and cost `cpu_ns` (the
    /// thread's CPU over the sleep, its spin left out), where the driver measured it.
    pub fn on_wake(&mut self, late_ns: u64, cpu_ns: Option<u64>) {
        if let Some(cpu) = cpu_ns.map(|c| c as f64) {
            let mean = self.sleep_cpu_ns.get_or_insert(cpu);
            *mean += (cpu - *mean) * SLEEP_CPU_WEIGHT;
        }
        if self.samples.len() < WINDOW {
            self.samples.push(late_ns);
        } else {
            self.samples[self.next_sample] = late_ns;
        }
        self.next_sample = (self.next_sample + 1) % WINDOW;
        self.since_plan += 1;
        if self.since_plan >= REPLAN_EVERY {
            self.replan();
        }
    }

    fn replan(&mut self) {
        self.since_plan = 0;
        self.waits_since_plan = 0;
        self.median_latency_ns = self.latency_quantile(0.5).unwrap_or(0);
        self.strategy = choose(self.mode, &self.conditions());
    }

    /// What the rule weighs now: the guesses until something was learned.
    fn conditions(&self) -> Conditions {
        Conditions {
            spacing_ns: self.spacing_ns as u64,
            wait_ns: self.wait_ns.unwrap_or(self.spacing_ns) as u64,
            latency_ns: self
                .latency_quantile(self.mode.latency_quantile())
                .unwrap_or(FIRST_LATENCY_GUESS_NS),
            sleep_cpu_ns: self.sleep_cpu_ns.unwrap_or(0.0) as u64,
            kernel_timed: self.kernel_timed,
        }
    }

    /// The `q` quantile (0..=1) of the remembered wake-up latencies; `None` before any.
    pub fn latency_quantile(&self, q: f64) -> Option<u64> {
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let last = sorted.len().checked_sub(1)?;
        Some(sorted[((last as f64 * q.clamp(0.0, 1.0)).ceil() as usize).min(last)])
    }

    /// The mean spacing of deadlines seen so far, ns.
    pub fn spacing_ns(&self) -> u64 {
        self.spacing_ns as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;

    /// Deadlines `spacing` apart, wake-ups `latency` late, sleeps free.
    fn at(spacing_ns: u64, latency_ns: u64, kernel_timed: bool) -> Conditions {
        Conditions {
            spacing_ns,
            wait_ns: spacing_ns,
            latency_ns,
            sleep_cpu_ns: 0,
            kernel_timed,
        }
    }

    /// A planner fed `n` latencies drawn from `latencies` in turn, at deadlines `spacing` apart.
    fn learned(mode: PacingMode, spacing: u64, latencies: &[u64], n: usize) -> PacingPlanner {
        let mut p = PacingPlanner::new(mode, spacing, false);
        for i in 0..n {
            p.strategy(1_000_000 + i as u64 * spacing);
            p.on_wake(latencies[i % latencies.len()], Some(0));
        }
        p
    }

    /// Deadlines 10 µs apart (1000 flows of 100 packets/s), grouped as a sender that wakes
    /// on time does: (send time, the deadlines it takes) for the first `sends` groups.
    fn groups(window: GroupWindow, sends: usize) -> Vec<(u64, Vec<u64>)> {
        let mut deadlines = (1..).map(|k| k * 10 * US).peekable();
        (0..sends)
            .map(|_| {
                let first = *deadlines.peek().unwrap();
                let at = window.release_at(first);
                let mut taken = Vec::new();
                while let Some(d) = deadlines.next_if(|&d| d <= window.gathers_until(at)) {
                    taken.push(d);
                }
                (at, taken)
            })
            .collect()
    }

    #[test]
    fn a_centred_window_sends_each_packet_within_half_a_window_of_its_deadline() {
        let window = GroupWindow::new(80 * US);
        let sent = groups(window, 100);
        // The first group: deadlines 10..=90 µs, sent at 50 µs (40 µs late to 40 µs early).
        assert_eq!(sent[0], (50 * US, (1..=9).map(|k| k * 10 * US).collect()));
        let errors = sent
            .iter()
            .flat_map(|(at, taken)| taken.iter().map(move |&d| *at as i64 - d as i64));
        let (early, late) = errors.fold((0, 0), |(e, l), x| (e.min(x), l.max(x)));
        assert_eq!((early, late), (-40_000, 40_000));
        // Every deadline is taken once, 9 a send: 100k packets/s in 11.1k sends a second.
        let taken: Vec<u64> = sent.iter().flat_map(|(_, t)| t.clone()).collect();
        assert_eq!(taken, (1..=900).map(|k| k * 10 * US).collect::<Vec<_>>());
    }

    #[test]
    fn a_window_at_the_first_deadline_would_batch_the_same_for_twice_the_error() {
        // Releasing at the first deadline and taking a whole window ahead (the old
        // placement) groups as the centred window does, all of it early.
        let centred = groups(GroupWindow::new(80 * US), 10);
        let mut deadlines = (1..).map(|k| k * 10 * US).peekable();
        for (at, taken) in centred {
            let first = *deadlines.peek().unwrap();
            let old: Vec<u64> =
                std::iter::from_fn(|| deadlines.next_if(|&d| d <= first + 80 * US)).collect();
            assert_eq!(old, taken);
            assert_eq!(
                old.last().unwrap() - first,
                80 * US,
                "sent at `first`: 80 µs early"
            );
            assert_eq!(at - first, 40 * US, "40 µs late at worst, centred");
        }
    }

    #[test]
    fn a_sender_whose_sleeps_end_late_wakes_that_much_before_the_middle() {
        let window = GroupWindow::new(80 * US);
        assert_eq!(window.wake_at(1_000 * US, 15 * US), 1_025 * US);
        // Never before the first deadline: the send would then leave it out.
        assert_eq!(window.wake_at(1_000 * US, 300 * US), 1_000 * US);
        // The lateness a sleeping plan expects is the median; a spinning one expects none.
        let sleeping = learned(PacingMode::Auto, 30 * US, &[10 * US, 20 * US, 30 * US], 96);
        assert_eq!(sleeping.current(), Strategy::Sleep);
        assert_eq!(sleeping.expected_lateness_ns(), 20 * US);
        let spinning = learned(PacingMode::Precise, 2_000 * US, &[20 * US], 32);
        assert!(matches!(spinning.current(), Strategy::SleepSpin { .. }));
        assert_eq!(spinning.expected_lateness_ns(), 0);
    }

    #[test]
    fn precise_groups_only_what_is_due_at_once_and_never_sends_early() {
        let window = PacingMode::Precise.group_window();
        assert_eq!((window.release_at(7), window.gathers_until(7)), (7, 7));
        assert!(groups(window, 5).iter().all(|(_, t)| t.len() == 1));
        // Auto's half stays well inside the 100 µs target; efficient's within it.
        assert_eq!(PacingMode::Auto.group_window().half_ns(), 20 * US);
        assert_eq!(PacingMode::Efficient.group_window().half_ns(), 80 * US);
    }

    #[test]
    fn modes_parse_by_name_and_refuse_others_in_one_line() {
        for m in PacingMode::ALL {
            assert_eq!(m.name().parse::<PacingMode>(), Ok(m));
        }
        let e = "fast".parse::<PacingMode>().unwrap_err();
        assert_eq!(e, "pacing is precise, efficient or auto, not 'fast'");
        assert_eq!(PacingMode::default(), PacingMode::Auto);
    }

    #[test]
    fn auto_at_500_pps_spins_past_the_p99_wake_up_within_five_percent() {
        // 2 ms apart: 5 % of a core allows 100 us of spin per packet; p99 is 40 us.
        let mut lat = vec![20 * US; 95];
        lat.extend([40 * US; 5]);
        let p = learned(PacingMode::Auto, 2_000 * US, &lat, 256);
        assert_eq!(
            p.strategy,
            Strategy::SleepSpin {
                margin_ns: 40 * US + SPIN_SLACK_NS
            }
        );
    }

    #[test]
    fn auto_holds_its_budget_when_wake_ups_are_slow() {
        // A loaded host: 1 ms wake-ups. 5 % of 2 ms is all auto spends.
        let p = learned(PacingMode::Auto, 2_000 * US, &[1_000 * US], 64);
        assert_eq!(
            p.strategy,
            Strategy::SleepSpin {
                margin_ns: 100 * US
            }
        );
    }

    #[test]
    fn efficient_spins_only_past_the_median_within_one_percent() {
        let lat: Vec<u64> = (1..=64).map(|i| i * US).collect();
        let p = learned(PacingMode::Efficient, 2_000 * US, &lat, 256);
        // The median (33 us) + slack, but 1 % of 2 ms is 20 us.
        assert_eq!(p.strategy, Strategy::SleepSpin { margin_ns: 20 * US });
        // At 100 packets/s the budget no longer binds.
        let p = learned(PacingMode::Efficient, 10_000 * US, &lat, 256);
        assert_eq!(
            p.strategy,
            Strategy::SleepSpin {
                margin_ns: 33 * US + SPIN_SLACK_NS
            }
        );
    }

    #[test]
    fn dense_deadlines_spin_when_precise_and_sleep_otherwise() {
        // 100k packets/s: 10 us apart, wake-ups take 30 us.
        assert_eq!(
            choose(PacingMode::Precise, &at(10 * US, 30 * US, false)),
            Strategy::Spin
        );
        assert_eq!(
            choose(PacingMode::Efficient, &at(10 * US, 30 * US, false)),
            Strategy::Sleep
        );
        // Auto's 5 % of 10 us is 500 ns: not worth spinning.
        assert_eq!(
            choose(PacingMode::Auto, &at(10 * US, 30 * US, false)),
            Strategy::Sleep
        );
    }

    #[test]
    fn sleeps_dearer_than_the_gap_turn_into_spins_and_eat_the_budget() {
        // 100k packets/s where a sleep costs 20 us of CPU: spinning the 10 us is cheaper.
        let dear = Conditions {
            sleep_cpu_ns: 20 * US,
            ..at(10 * US, 30 * US, false)
        };
        for mode in PacingMode::ALL {
            assert_eq!(choose(mode, &dear), Strategy::Spin, "{mode}");
        }
        // 10k packets/s: auto's 5 us of budget is spent on the sleep's 13 us: no spin.
        let ten_k = Conditions {
            sleep_cpu_ns: 13 * US,
            ..at(100 * US, 30 * US, false)
        };
        assert_eq!(choose(PacingMode::Auto, &ten_k), Strategy::Sleep);
        // The planner learns the cost from its sleeps.
        let mut p = PacingPlanner::new(PacingMode::Auto, 10 * US, false);
        for _ in 0..REPLAN_EVERY {
            p.on_wake(30 * US, Some(20 * US));
        }
        assert_eq!(p.current(), Strategy::Spin);
    }

    #[test]
    fn sleeps_dearer_than_the_waits_they_replace_turn_into_spins() {
        // 100k packets/s whose sends fill 8 of every 10 us: a 6 us sleep would replace a
        // 2 us spin (the 2-core VM of docs/benchmarks.md, 2026-12-07: sleeping cost as much
        // CPU as spinning and sent what fell due while asleep as one train).
        let busy = Conditions {
            sleep_cpu_ns: 6 * US,
            wait_ns: 2 * US,
            ..at(10 * US, 30 * US, false)
        };
        for mode in PacingMode::ALL {
            assert_eq!(choose(mode, &busy), Strategy::Spin, "{mode}");
        }
        // Idle gaps longer than a sleep's cost still sleep.
        let idle = Conditions {
            wait_ns: 9 * US,
            ..busy
        };
        assert_eq!(choose(PacingMode::Auto, &idle), Strategy::Sleep);
        // The planner learns the waits' length from the sender.
        let mut p = PacingPlanner::new(PacingMode::Auto, 10 * US, false);
        for _ in 0..REPLAN_EVERY {
            p.on_wait(2 * US);
            p.on_wake(30 * US, Some(6 * US));
        }
        assert_eq!(p.current(), Strategy::Spin);
        for _ in 0..4 * WINDOW {
            p.on_wait(9 * US);
            p.on_wake(30 * US, Some(6 * US));
        }
        assert_eq!(p.current(), Strategy::Sleep);
    }

    #[test]
    fn sleeps_whose_cost_was_not_measured_teach_only_the_latency() {
        let mut p = PacingPlanner::new(PacingMode::Auto, 10 * US, false);
        p.on_wake(30 * US, Some(20 * US));
        for _ in 1..REPLAN_EVERY {
            p.on_wake(40 * US, None);
        }
        // The one measured sleep's cost stands for all: dearer than the gap, so spin.
        assert_eq!(p.current(), Strategy::Spin);
        assert_eq!(p.latency_quantile(1.0), Some(40 * US));
        let mut unmeasured = PacingPlanner::new(PacingMode::Auto, 10 * US, false);
        for _ in 0..REPLAN_EVERY {
            unmeasured.on_wake(30 * US, None);
        }
        assert_eq!(unmeasured.current(), Strategy::Sleep);
    }

    #[test]
    fn a_margin_chosen_while_waits_were_far_apart_shrinks_when_they_close_up_without_sleeps() {
        // A busy host: the sender fell behind and waited every 20 ms, its sleeps 1 ms late.
        let mut p = learned(PacingMode::Auto, 20_000 * US, &[1_000 * US], 64);
        assert_eq!(
            p.current(),
            Strategy::SleepSpin {
                margin_ns: MAX_SPIN_NS
            }
        );
        // Then deadlines 90 µs apart: every wait is inside the margin and spins, nothing
        // sleeps, yet the plan follows the spacing to auto's 5 % of 90 µs.
        for i in 1..=1_000 {
            p.strategy(2_000_000 * US + i * 90 * US);
        }
        let Strategy::SleepSpin { margin_ns } = p.current() else {
            panic!("{:?}", p.current())
        };
        assert!((4_400..=4_600).contains(&margin_ns), "{margin_ns}");
    }

    #[test]
    fn precise_covers_the_worst_tail_whatever_it_costs() {
        let mut lat = vec![10 * US; 255];
        lat.push(300 * US);
        let p = learned(PacingMode::Precise, 2_000 * US, &lat, 256);
        assert_eq!(
            p.strategy,
            Strategy::SleepSpin {
                margin_ns: 300 * US + SPIN_SLACK_NS
            }
        );
        // Never more than the cap.
        assert_eq!(
            choose(PacingMode::Precise, &at(1_000_000 * US, 5_000 * US, false)),
            Strategy::SleepSpin {
                margin_ns: MAX_SPIN_NS
            }
        );
    }

    #[test]
    fn kernel_transmit_times_replace_the_spin_unless_precise() {
        assert_eq!(
            choose(PacingMode::Auto, &at(2_000 * US, 40 * US, true)),
            Strategy::KernelTime {
                lead_ns: 40 * US + SPIN_SLACK_NS
            }
        );
        assert!(matches!(
            choose(PacingMode::Precise, &at(2_000 * US, 40 * US, true)),
            Strategy::SleepSpin { .. }
        ));
    }

    #[test]
    fn the_plan_starts_from_the_guess_and_learns_the_spacing() {
        let mut p = PacingPlanner::new(PacingMode::Auto, 2_000 * US, false);
        assert_eq!(
            p.strategy(0),
            Strategy::SleepSpin {
                margin_ns: FIRST_LATENCY_GUESS_NS + SPIN_SLACK_NS
            }
        );
        assert_eq!(p.latency_quantile(0.5), None);
        // Deadlines really come 100 us apart: the budget shrinks the margin to 5 us.
        for i in 1..=1_000 {
            p.strategy(i * 100 * US);
        }
        assert!(p.spacing_ns() < 110 * US, "{}", p.spacing_ns());
        for _ in 0..REPLAN_EVERY {
            p.on_wake(30 * US, Some(0));
        }
        let Strategy::SleepSpin { margin_ns } = p.strategy(2_000_000 * US) else {
            panic!()
        };
        assert!(margin_ns <= 5_500, "{margin_ns}");
    }

    #[test]
    fn quantiles_read_the_window_only() {
        let mut p = PacingPlanner::new(PacingMode::Auto, 1_000, false);
        for _ in 0..WINDOW {
            p.on_wake(1_000_000, Some(0));
        }
        for _ in 0..WINDOW {
            p.on_wake(7, Some(0));
        }
        assert_eq!(p.latency_quantile(1.0), Some(7));
        assert_eq!(p.latency_quantile(0.0), Some(7));
    }
}
