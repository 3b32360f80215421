//! One direction of one emulated link, on its own thread: read what arrived, run it through
//! the chain, release what is due, wait for the next departure or arrival.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use flowlab_link::chain::Chain;
use flowlab_link::{Event, LinkModel, Verdict};
use flowlab_sys::clock::{monotonic_ns, pace_until, realtime_minus_monotonic_ns};

use crate::capture::{Arrival, Egress, Ingress, BATCH};
use crate::frame::{describe, Store};
use crate::handoff::{lock, Handoff, Samples};
use crate::outbox::{next_due, Call, Due, Outbox, SEND_BATCH};
use crate::report::{DepthSample, DirectionReport};
use crate::rest::Rest;
use crate::spin::SpinSlots;
use crate::timing::Turn;

/// A frame released later than this after its departure time counts as late.
pub const LATE_NS: u64 = 50_000;
/// How early a departure may leave with the batch of one due now: a tenth of the 50 µs
/// release-error target, and half the 10 µs between frames at 100k frames/s, so paced
/// frames at that rate still leave one by one on time, while a flood (64 B frames through
/// ATM OC-12c depart 1.4 µs apart) shares each call among about four.
pub const RELEASE_AHEAD_NS: u64 = 5_000;

/// Sleep until this long before a departure, then spin. Measured on this 2-core machine
/// under load (docs/emulation.md): a sleeping emulator thread wakes 70 µs late at the median,
/// so a 30 µs spin left most frames late (release error p50 70 µs at 10k frames/s, 410 µs at
/// 100k); with 200 µs, p50 22 µs and 85 µs, for up to a fifth of a core spent spinning.
pub const SPIN_NS: u64 = 200_000;
/// While spinning to a departure, read arrivals as long as more than this remains: a full
/// read (64 frames, about 1.4 µs each to read and model) fits before the departure.
pub const READ_SLACK_NS: u64 = 100_000;
/// Frames held per direction (about 100 MB of 1500-byte frames): above the impairments'
/// default limit, so the model's limit decides first.
pub const STORE_LIMIT: usize = 65_536;
/// Depth samples kept (100 ms apart: the last 16 minutes).
pub const DEPTH_SAMPLES: usize = 10_000;
const SAMPLE_EVERY_NS: u64 = 100_000_000;
/// Longest sleep without a departure due, so a stop request is seen.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// Reads per turn of the loop at most, so that a flood of arrivals cannot hold back the
/// departures due meanwhile (the kernel drops what its socket buffer cannot hold, counted);
/// after the first, a read is made only while no departure is due.
const READS_PER_TURN: usize = 4;
/// How often (in depth samples) the thread checks whether it runs real-time, and so must
/// rest ([`crate::rest`]): every second.
const LIMIT_EVERY: u64 = 10;

/// The two interfaces of a direction, on the capture path: frames come in on one and leave
/// by the other.
pub struct Endpoints {
    pub ingress: Ingress,
    pub egress: Egress,
}

/// A direction's state; [`Direction::run`] drives it until stopped.
pub struct Direction {
    ends: Endpoints,
    chain: Chain,
    store: Store,
    outbox: Outbox,
    /// Counters; the reporting thread keeps the distributions and depth history.
    report: DirectionReport,
    shared: Arc<Mutex<Handoff>>,
    /// Timings, read lags and depth samples not yet handed over.
    samples: Samples,
    /// The current turn of the loop, for the release error's parts.
    turn: Turn,
    /// Frames the current turn's release has sent so far.
    sent_in_release: u32,
    rest: Rest,
    spinners: Arc<SpinSlots>,
    /// The model's clock: never goes back.
    model_ns: u64,
    realtime_offset_ns: i64,
    start_ns: u64,
    next_sample_ns: u64,
    samples_taken: u64,
}

impl Direction {
    pub fn new(
        ends: Endpoints,
        chain: Chain,
        shared: Arc<Mutex<Handoff>>,
        spinners: Arc<SpinSlots>,
    ) -> Direction {
        let report = lock(&shared).counters.clone();
        let start_ns = monotonic_ns();
        Direction {
            ends,
            chain,
            store: Store::new(STORE_LIMIT),
            outbox: Outbox::new(),
            report,
            shared,
            samples: Samples::default(),
            turn: Turn::default(),
            sent_in_release: 0,
            rest: Rest::new(start_ns),
            spinners,
            model_ns: start_ns,
            realtime_offset_ns: realtime_minus_monotonic_ns(),
            start_ns,
            next_sample_ns: start_ns,
            samples_taken: 0,
        }
    }

    /// `from>to`, the hosts the frames go between.
    pub fn way(&self) -> String {
        format!("{}>{}", self.report.from, self.report.to)
    }

    /// Serves the direction until `stop` is set, then hands over its last counters.
    pub fn run(mut self, stop: &AtomicBool) {
        let _ = flowlab_sys::clock::set_thread_timer_slack_ns(1);
        let mut woke_ns = monotonic_ns();
        let mut idle_ns = woke_ns;
        while !stop.load(Ordering::Relaxed) {
            self.receive(READS_PER_TURN);
            let release_ns = monotonic_ns();
            self.turn = Turn {
                idle_ns,
                woke_ns,
                release_ns,
            };
            self.release();
            self.sample();
            idle_ns = monotonic_ns();
            let slept = self.wait();
            let now = monotonic_ns();
            let p = &mut self.report.profile;
            p.turns += 1;
            p.receive_ns += release_ns - woke_ns;
            p.release_ns += idle_ns - release_ns;
            if slept {
                p.sleep_ns += now - idle_ns;
                self.rest.slept(now - idle_ns);
            } else {
                p.spin_ns += now - idle_ns;
            }
            woke_ns = now;
        }
        self.publish(true);
    }

    /// Offers the frames waiting on the ingress (up to `reads` batches, the second and later
    /// only while no departure is due) to the chain, each at its arrival stamp.
    fn receive(&mut self, reads: usize) {
        for k in 0..reads {
            if k > 0 && self.departure_due() {
                return;
            }
            let n = match self.ends.ingress.receive() {
                Ok(n) => n,
                Err(_) => return,
            };
            for i in 0..n {
                let read_ns = monotonic_ns();
                let at_ns = self.ends.ingress.arrival(i, self.realtime_offset_ns).at_ns;
                let arrival = at_ns.unwrap_or(read_ns);
                self.model_ns = self.model_ns.max(arrival);
                self.samples.read_lags.push(read_ns.saturating_sub(arrival));
                self.offer(i, read_ns);
            }
            self.report.profile.reads += u64::from(n > 0);
            if n < BATCH {
                return;
            }
        }
    }

    /// Whether the chain has an event due by now (or within [`RELEASE_AHEAD_NS`]).
    fn departure_due(&self) -> bool {
        let next = self.chain.next_event_ns();
        next.is_some_and(|t| t <= monotonic_ns() + RELEASE_AHEAD_NS)
    }

    fn offer(&mut self, i: usize, read_ns: u64) {
        let frame: Arrival = self.ends.ingress.arrival(i, self.realtime_offset_ns);
        let Some(id) = self.store.insert(frame.parts, read_ns) else {
            self.report.emulator_drops.store_full += 1;
            return;
        };
        if frame.needs_checksum {
            self.store.complete_checksum(id);
        }
        self.report.frames_received += 1;
        let bytes = self.store.bytes(id).unwrap_or_default();
        match self.chain.enqueue(self.model_ns, describe(id, bytes)) {
            Verdict::Queued => {}
            Verdict::Duplicated => self.store.add_ref(id),
            Verdict::Dropped(_) => self.store.release(id),
        }
    }

    /// Handles every event due by now, and departures due within [`RELEASE_AHEAD_NS`] with
    /// them: departures are gathered and sent in batches, losses forgotten. The model's clock
    /// moves to the last event taken, so a frame read next enters the model no earlier
    /// (at most the window later than its arrival, as for any frame read after a release).
    fn release(&mut self) {
        let now = monotonic_ns();
        self.model_ns = self.model_ns.max(now);
        let horizon = now + RELEASE_AHEAD_NS;
        self.sent_in_release = 0;
        while let Some(event) = next_due(&mut self.chain, &mut self.model_ns, horizon) {
            match event {
                Event::Depart { frame, at_ns } => {
                    let due = Due {
                        id: frame.id,
                        at_ns,
                        read_ns: self.store.read_ns(frame.id),
                    };
                    if self.outbox.push(due) {
                        self.send();
                    }
                }
                Event::Drop { frame, .. } => self.store.release(frame.id),
                Event::Copy { frame } => self.store.add_ref(frame.id),
            }
        }
        self.send();
    }

    /// Sends the gathered departures in one system call and frees their bytes.
    fn send(&mut self) {
        if self.outbox.due().is_empty() {
            return;
        }
        let mut frames: [&[u8]; SEND_BATCH] = [&[]; SEND_BATCH];
        for (slot, d) in frames.iter_mut().zip(self.outbox.due()) {
            // Every departure's frame is held until this event, so the store has it.
            *slot = self.store.bytes(d.id).unwrap_or_default();
        }
        let send_ns = monotonic_ns();
        let outcome = self
            .ends
            .egress
            .send_batch(&mut frames[..self.outbox.due().len()]);
        let call = Call {
            turn: self.turn,
            sent_before: self.sent_in_release,
            send_ns,
            sent_ns: monotonic_ns(),
        };
        self.report.profile.sends += 1;
        self.sent_in_release += self.outbox.due().len() as u32;
        let timings = &mut self.samples.timings;
        for d in self.outbox.settle(outcome, call, &mut self.report, timings) {
            self.store.release(d.id);
        }
    }

    /// Sleeps until just before the next departure (or an arrival), then spins to it;
    /// whether it slept. A real-time thread owing rest sleeps to the departure instead of
    /// spinning ([`crate::rest`]), as does one that finds no spin slot free
    /// ([`crate::spin`]).
    fn wait(&mut self) -> bool {
        let now = monotonic_ns();
        let timeout = match self.chain.next_event_ns() {
            Some(t) if t <= now => return false,
            Some(t) if t - now <= SPIN_NS && self.rest.owed(now) => {
                self.report.profile.rests += 1;
                pace_until(t, 0);
                return true;
            }
            Some(t) if t - now <= SPIN_NS && self.spinners.take() => {
                self.spin_to(t);
                self.spinners.give_back();
                return false;
            }
            Some(t) if t - now <= SPIN_NS => {
                self.report.profile.spin_slot_sleeps += 1;
                pace_until(t, 0);
                return true;
            }
            Some(t) => Duration::from_nanos(t - now - SPIN_NS).min(IDLE_WAIT),
            None => IDLE_WAIT,
        };
        let _ = flowlab_sys::poll::wait_readable(&[self.ends.ingress.as_fd()], timeout);
        true
    }

    /// Spins until `t`, reading what arrives meanwhile while [`READ_SLACK_NS`] remain, so
    /// that frames are not left in the socket while the thread waits.
    fn spin_to(&mut self, mut t: u64) {
        while t.saturating_sub(monotonic_ns()) > READ_SLACK_NS {
            self.receive(1);
            // An arrival may leave sooner (jitter, reordering).
            t = self.chain.next_event_ns().map_or(t, |next| next.min(t));
        }
        pace_until(t, SPIN_NS);
    }

    /// Every 100 ms: the stages' depths, and the counters for the reporting thread; every
    /// second, whether the thread must rest.
    fn sample(&mut self) {
        let now = monotonic_ns();
        if now < self.next_sample_ns {
            return;
        }
        self.next_sample_ns = now + SAMPLE_EVERY_NS;
        let mut depth = Vec::new();
        self.chain.depth(&mut depth);
        self.samples.depth.push(DepthSample {
            t_ms: (now - self.start_ns) / 1_000_000,
            depth,
        });
        self.realtime_offset_ns = realtime_minus_monotonic_ns();
        if self.samples_taken.is_multiple_of(LIMIT_EVERY) {
            if let Some((real_time, runtime_us, period_us)) = crate::rest::read_limit() {
                self.rest.set_limit(real_time, runtime_us, period_us);
            }
        }
        self.samples_taken += 1;
        self.publish(false);
    }

    /// Hands the counters and samples to the reporting thread: skipped while it holds the
    /// lock (the samples wait for the next time), unless this is the `last`.
    fn publish(&mut self, last: bool) {
        self.report.emulator_drops.ingress_overflow = self.ends.ingress.overflow();
        self.report.stages.clear();
        self.chain.report(&mut self.report.stages);
        let mut shared = match self.shared.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) if last => lock(&self.shared),
            Err(TryLockError::WouldBlock) => return,
        };
        shared.counters.clone_from(&self.report);
        self.samples.hand_over(&mut shared.samples, last);
    }
}
