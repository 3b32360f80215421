//! Spin slots: how many of the emulator's direction threads may spin to a departure at once.
//! Each busy direction spins up to [`crate::direction::SPIN_NS`] before every departure, and
//! on a lab of several loaded links they outnumber the cores: on this 2-core machine the
//! four loaded directions of examples/lab/bagnet-loop.toml spun 15 s of every 12 s of the
//! run between them, holding the senders, the receivers and each other off the CPU (release
//! error p99 1.2-1.9 ms). One core is left for them, so a 2-core machine has one slot; a
//! direction that finds none sleeps to its departure.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The emulator's spin slots, shared by its direction threads.
#[derive(Debug)]
pub struct SpinSlots {
    taken: AtomicUsize,
    slots: usize,
}

impl SpinSlots {
    /// `slots` at once (at least one).
    pub fn new(slots: usize) -> SpinSlots {
        SpinSlots {
            taken: AtomicUsize::new(0),
            slots: slots.max(1),
        }
    }

    /// One slot for every core this process may run on but one.
    pub fn for_this_machine() -> SpinSlots {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        SpinSlots::new(cores.saturating_sub(1))
    }

    /// Takes a slot if one is free; give it back with [`SpinSlots::give_back`].
    pub fn take(&self) -> bool {
        self.taken
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |n| {
                (n < self.slots).then_some(n + 1)
            })
            .is_ok()
    }

    pub fn give_back(&self) {
        self.taken.fetch_sub(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_more_spin_at_once_than_there_are_slots() {
        let slots = SpinSlots::new(2);
        assert!(slots.take() && slots.take());
        assert!(!slots.take());
        slots.give_back();
        assert!(slots.take());
        let one = SpinSlots::new(0);
        assert!(one.take() && !one.take());
    }

    #[test]
    fn a_machine_has_at_least_one_slot() {
        assert!(SpinSlots::for_this_machine().take());
    }
}
