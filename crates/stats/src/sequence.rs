//! Loss, reordering and duplicate accounting from datagram sequence numbers.

use serde::{Deserialize, Serialize};

use crate::LossRuns;

const DEFAULT_WINDOW: u64 = 65_536;
/// Caps the bitmap at 2 MiB so a careless window cannot exhaust memory.
const MAX_WINDOW: u64 = 1 << 24;
const BITS_PER_WORD: u64 = 64;

/// How one datagram relates to those seen before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The next expected sequence number.
    InOrder,
    /// Jumped ahead, leaving `missing` sequence numbers not (yet) received.
    Gap {
        missing: u64,
    },
    /// Filled an earlier gap: reordered.
    Late,
    Duplicate,
    /// Older than the tracking window; counted as reordered, though it could be a
    /// duplicate nobody can tell apart any more.
    TooOld,
}

/// Totals so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqCounts {
    /// All datagrams, duplicates included.
    pub received: u64,
    pub unique: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
}

/// Sequence accounting for one flow; sequence numbers start at 0.
///
/// A bitmap of the last `window` sequence numbers (a ring indexed by `seq % window`)
/// tells a late arrival from a duplicate in constant memory.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    window: u64,
    seen: Vec<u64>,
    highest_seen: Option<u64>,
    received: u64,
    unique: u64,
    reordered: u64,
    duplicates: u64,
    /// Fates of the numbers that have left the window, in order (RFC 3357 loss periods).
    runs: LossRuns,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    /// Tracks the last 65536 sequence numbers.
    pub fn new() -> Self {
        Self::with_window(DEFAULT_WINDOW)
    }

    /// `window` is rounded up to a multiple of 64 and clamped to 64..=2^24.
    pub fn with_window(window: u64) -> Self {
        let words = window
            .clamp(BITS_PER_WORD, MAX_WINDOW)
            .div_ceil(BITS_PER_WORD);
        Self {
            window: words * BITS_PER_WORD,
            seen: vec![0; words as usize],
            highest_seen: None,
            received: 0,
            unique: 0,
            reordered: 0,
            duplicates: 0,
            runs: LossRuns::new(),
        }
    }

    pub fn on_packet(&mut self, seq: u64) -> Arrival {
        self.received = self.received.saturating_add(1);
        let Some(highest) = self.highest_seen else {
            self.retire(seq);
            self.highest_seen = Some(seq);
            self.mark_new(seq);
            return if seq == 0 {
                Arrival::InOrder
            } else {
                Arrival::Gap { missing: seq }
            };
        };
        if seq > highest {
            self.retire(seq);
            self.clear_range_after(highest, seq);
            self.highest_seen = Some(seq);
            self.mark_new(seq);
            let missing = seq - highest - 1;
            return if missing == 0 {
                Arrival::InOrder
            } else {
                Arrival::Gap { missing }
            };
        }
        if highest - seq >= self.window {
            self.unique = self.unique.saturating_add(1);
            self.reordered = self.reordered.saturating_add(1);
            return Arrival::TooOld;
        }
        if self.is_seen(seq) {
            self.duplicates = self.duplicates.saturating_add(1);
            return Arrival::Duplicate;
        }
        self.mark_new(seq);
        self.reordered = self.reordered.saturating_add(1);
        Arrival::Late
    }

    /// `count` consecutive numbers from `first`, all above any seen so far (a GSO train):
    /// the same as `count` calls of [`Self::on_packet`], in a few word operations. Returns the
    /// numbers skipped before the run (a gap), or `None`, changing nothing, when the run is
    /// not wholly ahead of what was seen: then the caller goes number by number.
    pub fn on_run_ahead(&mut self, first: u64, count: u64) -> Option<u64> {
        let last = first.checked_add(count.checked_sub(1)?)?;
        let missing = match self.highest_seen {
            None => first,
            Some(highest) if first > highest => first - highest - 1,
            Some(_) => return None,
        };
        if count > self.window {
            return None;
        }
        self.retire(last);
        // Nothing seen yet: the bitmap is still empty.
        if let Some(highest) = self.highest_seen.filter(|&h| first - 1 > h) {
            self.clear_range_after(highest, first - 1);
        }
        // Slots of the run are set outright: whatever older number they held is forgotten,
        // as clear_range_after would. The window is a whole number of words, so a chunk of
        // one word never wraps.
        let mut seq = first;
        while seq <= last {
            let slot = seq % self.window;
            let offset = slot % BITS_PER_WORD;
            let n = (BITS_PER_WORD - offset).min(last - seq + 1);
            let mask = if n == BITS_PER_WORD {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << offset
            };
            if let Some(bits) = self.seen.get_mut((slot / BITS_PER_WORD) as usize) {
                *bits |= mask;
            }
            seq += n;
        }
        self.highest_seen = Some(last);
        self.received = self.received.saturating_add(count);
        self.unique = self.unique.saturating_add(count);
        Some(missing)
    }

    /// Lost = (highest_seen + 1) - unique: gaps not (yet) filled; tail losses are
    /// invisible here, see [`Self::counts_with_sent`].
    pub fn counts(&self) -> SeqCounts {
        let expected = self
            .highest_seen
            .map_or(0, |highest| highest.saturating_add(1));
        self.counts_with_expected(expected)
    }

    /// When the sender's total is known, lost = sent - unique, which also counts
    /// datagrams lost after the last one received.
    pub fn counts_with_sent(&self, sent: u64) -> SeqCounts {
        self.counts_with_expected(sent)
    }

    fn counts_with_expected(&self, expected: u64) -> SeqCounts {
        SeqCounts {
            received: self.received,
            unique: self.unique,
            lost: expected.saturating_sub(self.unique),
            reordered: self.reordered,
            duplicates: self.duplicates,
        }
    }

    /// Loss periods over every number up to `expected` (the sender's count, when known: tail
    /// losses count), or up to the highest seen. A number that arrives later than the window
    /// stays in the loss period it was counted in.
    pub fn loss_runs(&self, expected: Option<u64>) -> LossRuns {
        let mut runs = self.runs;
        let end = self.highest_seen.map_or(0, |h| h.saturating_add(1));
        self.classify(&mut runs, end);
        if let Some(expected) = expected.filter(|&e| e > runs.classified()) {
            runs.lost(expected - runs.classified());
        }
        runs
    }

    /// Settles the fate of the numbers that leave the window when `new_highest` arrives,
    /// before their slots are reused.
    fn retire(&mut self, new_highest: u64) {
        let until = new_highest.saturating_add(1).saturating_sub(self.window);
        if until > self.runs.classified() {
            let mut runs = self.runs;
            self.classify(&mut runs, until);
            self.runs = runs;
        }
    }

    /// Classifies `[runs.classified(), until)` from the bitmap as it is: a number within the
    /// window whose bit is set arrived, any other was lost. A word at a time where it can.
    fn classify(&self, runs: &mut LossRuns, until: u64) {
        while runs.classified() < until {
            let seq = runs.classified();
            let Some(highest) = self.highest_seen.filter(|&h| seq <= h) else {
                // Beyond everything seen.
                runs.lost(until - seq);
                continue;
            };
            let window_start = highest.saturating_add(1).saturating_sub(self.window);
            if seq < window_start {
                // Slots since reused (not reached when retiring in order): never seen.
                runs.lost(until.min(window_start) - seq);
                continue;
            }
            let (word, _) = self.position(seq);
            let offset = (seq % self.window) % BITS_PER_WORD;
            let n = (BITS_PER_WORD - offset)
                .min(until - seq)
                .min((highest - seq).saturating_add(1));
            let mask = if n == BITS_PER_WORD {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << offset
            };
            let bits = self.seen.get(word).copied().unwrap_or(0) & mask;
            match u64::from(bits.count_ones()) {
                all if all == n => runs.received(n),
                0 => runs.lost(n),
                _ => (0..n).for_each(|i| match bits & (1 << (offset + i)) {
                    0 => runs.lost(1),
                    _ => runs.received(1),
                }),
            }
        }
    }

    fn mark_new(&mut self, seq: u64) {
        self.unique = self.unique.saturating_add(1);
        let (word, bit) = self.position(seq);
        if let Some(bits) = self.seen.get_mut(word) {
            *bits |= bit;
        }
    }

    fn is_seen(&self, seq: u64) -> bool {
        let (word, bit) = self.position(seq);
        self.seen.get(word).is_some_and(|bits| bits & bit != 0)
    }

    /// Forgets the slots that `highest + 1 ..= new_highest` reuse from older numbers.
    fn clear_range_after(&mut self, highest: u64, new_highest: u64) {
        if new_highest - highest >= self.window {
            self.seen.fill(0);
            return;
        }
        for seq in highest + 1..=new_highest {
            let (word, bit) = self.position(seq);
            if let Some(bits) = self.seen.get_mut(word) {
                *bits &= !bit;
            }
        }
    }

    fn position(&self, seq: u64) -> (usize, u64) {
        let slot = seq % self.window;
        ((slot / BITS_PER_WORD) as usize, 1 << (slot % BITS_PER_WORD))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn counts(received: u64, unique: u64, lost: u64, reordered: u64, duplicates: u64) -> SeqCounts {
        SeqCounts {
            received,
            unique,
            lost,
            reordered,
            duplicates,
        }
    }

    proptest! {
        /// A run ahead of everything seen is accounted as number-by-number arrivals are,
        /// and leaves the tracker in the same state for what comes after.
        #[test]
        fn a_run_ahead_equals_its_packets(
            before in proptest::collection::vec(0u64..300, 0..40),
            gap in 0u64..200,
            count in 1u64..130,
            after in proptest::collection::vec(0u64..600, 0..40),
        ) {
            let mut one = SeqTracker::with_window(128);
            let mut run = SeqTracker::with_window(128);
            for &seq in &before {
                one.on_packet(seq);
                run.on_packet(seq);
            }
            let first = one.highest_seen.map_or(0, |h| h + 1) + gap;
            match run.on_run_ahead(first, count) {
                Some(missing) => {
                    let mut gaps = 0;
                    for seq in first..first + count {
                        if let Arrival::Gap { missing } = one.on_packet(seq) {
                            gaps += missing;
                        }
                    }
                    prop_assert_eq!(missing, gaps);
                }
                None => prop_assert!(count > run.window, "refused only when longer than the window"),
            }
            for &seq in &after {
                prop_assert_eq!(one.on_packet(seq), run.on_packet(seq));
            }
            prop_assert_eq!(one.counts(), run.counts());
        }
    }

    /// Loss periods from the tracker equal those of the final set of arrivals, whatever the
    /// drops, the local reordering (less than the window) and the trains.
    #[test]
    fn loss_runs_match_the_arrivals() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |bound: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % bound
        };
        for case in 0..300 {
            let total = 1 + next(2_000);
            let keep: Vec<bool> = (0..total).map(|_| next(10) >= case % 7).collect();
            let mut order: Vec<u64> = (0..total).filter(|&s| keep[s as usize]).collect();
            // Local reordering: each number at most 50 places from its own, under the window.
            let jitter: Vec<u64> = (0..total).map(|_| next(4) / 3 * next(50)).collect();
            order.sort_by_key(|&s| s + jitter[s as usize]);
            let mut tracker = SeqTracker::with_window(128);
            let mut i = 0;
            while i < order.len() {
                let run = order[i..]
                    .windows(2)
                    .take_while(|w| w[1] == w[0] + 1)
                    .count()
                    + 1;
                let ahead = tracker.highest_seen.is_none_or(|h| order[i] > h);
                if run > 1 && ahead && next(2) == 0 {
                    tracker.on_run_ahead(order[i], run as u64).unwrap();
                    i += run;
                } else {
                    tracker.on_packet(order[i]);
                    i += 1;
                }
            }
            let mut reference = LossRuns::new();
            for &kept in &keep {
                if kept {
                    reference.received(1);
                } else {
                    reference.lost(1);
                }
            }
            assert_eq!(tracker.loss_runs(Some(total)), reference, "case {case}");
        }
    }

    #[test]
    fn a_run_behind_is_left_to_the_caller() {
        let mut tracker = SeqTracker::new();
        tracker.on_packet(10);
        assert_eq!(tracker.on_run_ahead(5, 3), None);
        assert_eq!(tracker.on_run_ahead(10, 1), None);
        assert_eq!(tracker.on_run_ahead(11, 0), None);
        assert_eq!(tracker.counts(), counts(1, 1, 10, 0, 0));
        assert_eq!(tracker.on_run_ahead(11, 3), Some(0));
        assert_eq!(tracker.on_run_ahead(20, 2), Some(6));
        assert_eq!(tracker.counts(), counts(6, 6, 16, 0, 0));
    }

    #[test]
    fn in_order() {
        let mut tracker = SeqTracker::new();
        for seq in 0..10 {
            assert_eq!(tracker.on_packet(seq), Arrival::InOrder);
        }
        assert_eq!(tracker.counts(), counts(10, 10, 0, 0, 0));
        assert_eq!(SeqTracker::new().counts(), SeqCounts::default());
    }

    #[test]
    fn loss_with_gap() {
        let mut tracker = SeqTracker::new();
        assert_eq!(tracker.on_packet(0), Arrival::InOrder);
        assert_eq!(tracker.on_packet(1), Arrival::InOrder);
        assert_eq!(tracker.on_packet(5), Arrival::Gap { missing: 3 });
        assert_eq!(tracker.on_packet(6), Arrival::InOrder);
        assert_eq!(tracker.counts(), counts(4, 4, 3, 0, 0));
    }

    #[test]
    fn first_packet_after_zero_is_a_gap() {
        let mut tracker = SeqTracker::new();
        assert_eq!(tracker.on_packet(2), Arrival::Gap { missing: 2 });
        assert_eq!(tracker.on_packet(0), Arrival::Late);
        assert_eq!(tracker.counts(), counts(2, 2, 1, 1, 0));
    }

    #[test]
    fn reorder_filling_gap_moves_loss_to_reordered() {
        let mut tracker = SeqTracker::new();
        tracker.on_packet(0);
        tracker.on_packet(3);
        let before = tracker.counts();
        assert_eq!(before, counts(2, 2, 2, 0, 0));
        assert_eq!(tracker.on_packet(1), Arrival::Late);
        let after = tracker.counts();
        assert_eq!(after.lost, before.lost - 1);
        assert_eq!(after.reordered, before.reordered + 1);
        assert_eq!(tracker.on_packet(2), Arrival::Late);
        assert_eq!(tracker.counts(), counts(4, 4, 0, 2, 0));
    }

    #[test]
    fn duplicates() {
        let mut tracker = SeqTracker::new();
        tracker.on_packet(0);
        tracker.on_packet(1);
        assert_eq!(tracker.on_packet(1), Arrival::Duplicate);
        assert_eq!(tracker.on_packet(0), Arrival::Duplicate);
        tracker.on_packet(3);
        assert_eq!(tracker.on_packet(3), Arrival::Duplicate);
        assert_eq!(tracker.counts(), counts(6, 3, 1, 0, 3));
    }

    #[test]
    fn too_old() {
        let mut tracker = SeqTracker::with_window(64);
        tracker.on_packet(0);
        tracker.on_packet(100);
        assert_eq!(tracker.on_packet(36), Arrival::TooOld);
        assert_eq!(tracker.on_packet(37), Arrival::Late);
        assert_eq!(tracker.on_packet(37), Arrival::Duplicate);
        assert_eq!(tracker.counts(), counts(5, 4, 97, 2, 1));
    }

    #[test]
    fn window_slots_are_reused_cleanly() {
        let mut tracker = SeqTracker::with_window(1);
        for seq in 0..200 {
            assert_eq!(tracker.on_packet(seq), Arrival::InOrder);
        }
        assert_eq!(tracker.on_packet(1_000), Arrival::Gap { missing: 800 });
        assert_eq!(tracker.on_packet(999), Arrival::Late);
        // 1064 reuses the slot of 1000, which thereby leaves the window.
        assert_eq!(tracker.on_packet(1_064), Arrival::Gap { missing: 63 });
        assert_eq!(tracker.on_packet(1_001), Arrival::Late);
        assert_eq!(tracker.on_packet(1_000), Arrival::TooOld);
    }

    #[test]
    fn counts_with_sent_includes_tail_loss() {
        let mut tracker = SeqTracker::new();
        for seq in 0..5 {
            tracker.on_packet(seq);
        }
        assert_eq!(tracker.counts().lost, 0);
        assert_eq!(tracker.counts_with_sent(8), counts(5, 5, 3, 0, 0));
        assert_eq!(tracker.counts_with_sent(2).lost, 0);
    }

    #[test]
    fn extreme_sequence_numbers_do_not_panic() {
        let mut tracker = SeqTracker::with_window(u64::MAX);
        assert_eq!(
            tracker.on_packet(u64::MAX),
            Arrival::Gap { missing: u64::MAX }
        );
        assert_eq!(tracker.on_packet(0), Arrival::TooOld);
        assert_eq!(tracker.on_packet(u64::MAX), Arrival::Duplicate);
        assert_eq!(tracker.counts().lost, u64::MAX - 2);
    }

    proptest! {
        #[test]
        fn unique_plus_lost_is_sent(
            (sent, arrivals) in (1u64..300).prop_flat_map(|n| {
                let keep = prop::collection::vec(any::<bool>(), n as usize);
                let copies = prop::collection::vec(1usize..4, n as usize);
                (Just(n), keep, copies, any::<u64>())
            }).prop_map(|(n, keep, copies, shuffle_seed)| {
                let mut arrivals: Vec<u64> = (0..n)
                    .filter(|&seq| keep[seq as usize])
                    .flat_map(|seq| vec![seq; copies[seq as usize]])
                    .collect();
                shuffle(&mut arrivals, shuffle_seed);
                (n, arrivals)
            })
        ) {
            let mut tracker = SeqTracker::new();
            for &seq in &arrivals {
                tracker.on_packet(seq);
            }
            let mut distinct = arrivals.clone();
            distinct.sort_unstable();
            distinct.dedup();
            let result = tracker.counts_with_sent(sent);
            prop_assert_eq!(result.unique + result.lost, sent);
            prop_assert_eq!(result.unique, distinct.len() as u64);
            prop_assert_eq!(result.duplicates, (arrivals.len() - distinct.len()) as u64);
            prop_assert_eq!(result.received, arrivals.len() as u64);
        }
    }

    /// Deterministic Fisher-Yates with a xorshift generator seeded by proptest.
    fn shuffle(items: &mut [u64], seed: u64) {
        let mut state = seed | 1;
        for i in (1..items.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            items.swap(i, (state % (i as u64 + 1)) as usize);
        }
    }
}
