//! The real-time link emulator: frames read from one veth end of an emulated lab link run
//! through the link's model chain (`flowlab-link`, the simulator's models) and are written
//! to the other end at their modelled departure times.
//!
//! Each direction of each link is a thread ([`direction`]): it reads the frames waiting on
//! its ingress interface (on the [`capture`] path: AF_XDP by default, or AF_PACKET; XDP
//! program or kernel receive stamps as arrival times), offers them to
//! the chain, holds their bytes in a bounded store, sleeps until shortly before the next
//! departure, spins the rest, and sends. A frame already late is sent at once and counted;
//! a frame the emulator itself cannot hold (store full, interface queue full) is counted
//! apart from the model's losses. The emulator's own error (release time minus modelled
//! departure), cut into the loop's steps for late frames ([`timing`]), is reported as
//! percentiles with the model's counters ([`report`]); a reporting thread of the lowest
//! priority builds the report from what the directions hand over ([`handoff`]), so they
//! never stall for it and it never delays another thread.
//!
//! The emulator changes nothing on any interface but, on AF_XDP, the XDP program it attaches
//! to its own namespace's veth ends through BPF links, which the kernel detaches when the
//! emulator exits or dies: a crash leaves the lab as configured (its emulated links then
//! carry nothing).

#![forbid(unsafe_code)]

pub mod capture;
mod checksum;
pub mod direction;
mod frame;
pub mod handoff;
mod outbox;
pub mod report;
mod rest;
pub mod spin;
pub mod timing;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flowlab_link::config::EmulateSpec;

pub use capture::CapturePath;
pub use direction::{Direction, Endpoints};
use handoff::{Handoff, Tally};
pub use report::{DirectionReport, EmuReport, LinkReport, LoopProfile, ReleaseParts};
use spin::SpinSlots;

/// One emulated link: its two interfaces in the emulator's namespace (towards `a`, towards
/// `b`) and its model.
#[derive(Debug, Clone)]
pub struct EmuLink {
    /// `a-b`.
    pub name: String,
    pub a: String,
    pub b: String,
    pub iface_a: String,
    pub iface_b: String,
    pub spec: EmulateSpec,
}

/// How often the report file is rewritten while running.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// How often the directions' samples are taken and folded in (they hand them over every
/// 100 ms): often enough that their buffers stay small.
const TAKE_EVERY: Duration = Duration::from_millis(50);
/// The reporting thread's sleep between two chunks of samples
/// ([`FOLD_CHUNK`](handoff::FOLD_CHUNK)): 5,000 frames' samples a take then fold in about
/// 6 ms, well within [`TAKE_EVERY`].
const FOLD_PAUSE: Duration = Duration::from_micros(100);

/// The emulator of some links, their interfaces open.
pub struct Emulator {
    dirs: Vec<(Direction, Tally, Arc<Mutex<Handoff>>)>,
    /// The capture path in use.
    pub capture: CapturePath,
    /// Why it is not the one asked for, in one line.
    pub fallback: Option<String>,
}

/// Opens both interfaces of every link on the `capture` path (and fails, changing nothing,
/// if one cannot be opened). Where AF_XDP is not available (kernel, privileges, an XDP
/// program already on an interface), falls back to AF_PACKET and says why.
pub fn open(links: &[EmuLink], capture: CapturePath) -> std::io::Result<Emulator> {
    match open_on(links, capture) {
        Err(e) if capture == CapturePath::AfXdp => {
            let mut emulator = open_on(links, CapturePath::AfPacket)?;
            emulator.fallback = Some(format!("AF_XDP unavailable ({e}); using AF_PACKET"));
            Ok(emulator)
        }
        opened => opened,
    }
}

fn open_on(links: &[EmuLink], capture: CapturePath) -> std::io::Result<Emulator> {
    let index = |name: &str| flowlab_sys::raw::interface_named(name).map(|i| i.index);
    let mut dirs = Vec::new();
    let spinners = Arc::new(SpinSlots::for_this_machine());
    for l in links {
        let ifindex = [index(&l.iface_a)?, index(&l.iface_b)?];
        let ends = capture::open_link(capture, ifindex[0], ifindex[1])?;
        let ways = [(&l.a, &l.b), (&l.b, &l.a)];
        for (k, ((from, to), (ingress, egress))) in ways.into_iter().zip(ends).enumerate() {
            let counters = DirectionReport::new(&l.name, from, to);
            let tally = Tally::new(counters.clone(), Some(ifindex[k]));
            let shared = Arc::new(Handoff::new(counters));
            let chain = l.spec.build(k as u64);
            let ends = Endpoints { ingress, egress };
            let direction = Direction::new(ends, chain, shared.clone(), spinners.clone());
            dirs.push((direction, tally, shared));
        }
    }
    Ok(Emulator {
        dirs,
        capture,
        fallback: None,
    })
}

/// Takes every direction's samples, calling `pause` between chunks of them.
fn take_all(tallies: &mut [(Tally, Arc<Mutex<Handoff>>)], mut pause: impl FnMut()) {
    for (tally, shared) in tallies.iter_mut() {
        tally.take_pausing(shared, &mut pause);
    }
}

/// The report of every direction, calling `pause` after each.
fn report(tallies: &[(Tally, Arc<Mutex<Handoff>>)], mut pause: impl FnMut()) -> EmuReport {
    EmuReport::from_directions(tallies.iter().map(|(t, _)| {
        let direction = t.report();
        pause();
        direction
    }))
}

impl Emulator {
    /// Runs every direction on its own thread until `stop` is set, rewriting `report_path`
    /// (JSON) every second and at the end; returns the final report. A reporting thread
    /// builds the report meanwhile, and the calling thread the last.
    pub fn run(self, stop: &AtomicBool, report_path: &Path) -> std::io::Result<EmuReport> {
        let (directions, mut tallies): (Vec<_>, Vec<_>) =
            (self.dirs.into_iter()).map(|(d, t, s)| (d, (t, s))).unzip();
        std::thread::scope(|s| -> std::io::Result<()> {
            for d in directions {
                // Named for /proc/PID/task/TID/comm (15 bytes kept), where a benchmark finds
                // each direction's thread, its CPU time, and pins it.
                let name = format!("emu:{}", d.way());
                std::thread::Builder::new()
                    .name(name)
                    .spawn_scoped(s, move || d.run(stop))
                    // Stops the threads already running, or the scope would wait for them.
                    .inspect_err(|_| stop.store(true, Ordering::Relaxed))?;
            }
            // Started after the directions, which would inherit its policy.
            let tallies = &mut tallies;
            std::thread::Builder::new()
                .name("emu-report".into())
                .spawn_scoped(s, move || keep_reporting(tallies, stop, report_path))
                .inspect_err(|_| stop.store(true, Ordering::Relaxed))?;
            Ok(())
        })?;
        take_all(&mut tallies, || {});
        let last = report(&tallies, || {});
        last.write(report_path)?;
        Ok(last)
    }
}

/// The reporting thread: takes the directions' samples and rewrites the report until `stop`.
/// Its folding (about 20 ms a second at 100k frames/s) ran on whichever core the kernel
/// chose, often a paced sender's, which it then held back by milliseconds at a time
/// (docs/emulation.md); so it runs SCHED_IDLE, taking what that core leaves free, and
/// sleeps between chunks of samples and between directions' reports. Yielding is not
/// enough: the kernel's fair scheduler (EEVDF) may find the preempted sender not yet
/// eligible and run the reporter again, up to a tick (4 ms here) at a time; a sleep hands
/// the core back at once.
fn keep_reporting(
    tallies: &mut [(Tally, Arc<Mutex<Handoff>>)],
    stop: &AtomicBool,
    report_path: &Path,
) {
    let _ = flowlab_sys::cpu::set_thread_idle_policy();
    let pause = || std::thread::sleep(FOLD_PAUSE);
    let mut written = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(TAKE_EVERY);
        take_all(tallies, pause);
        if written.elapsed() >= REPORT_EVERY {
            let _ = report(tallies, pause).write(report_path);
            written = std::time::Instant::now();
        }
    }
}
