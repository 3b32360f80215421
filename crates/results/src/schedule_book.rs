//! When each echoed packet was due: what the round trip from the schedule needs.
//!
//! A packet's probe header carries its actual departure, so a late send's round trip starts
//! when it left. A sender held up (a descheduled thread, a full core) delays every packet
//! behind it, and timing those from their late departures hides the wait, as a closed-loop
//! load generator does ("coordinated omission"). HdrHistogram's corrected recording answers
//! it by counting from when each request should have gone; so does the round trip from the
//! schedule: the echo's arrival minus its packet's scheduled time. The header has no room for
//! that time, so the sender remembers it here until the echo comes back.

/// Schedules remembered over all flows: 16 MiB at most.
const TOTAL_ENTRIES: usize = 1 << 20;
/// Each flow remembers at least this many echoed packets, and at most this many: at a
/// million echoed packets a second, a round trip of 65 ms.
const MIN_PER_FLOW: usize = 16;
const MAX_PER_FLOW: usize = 1 << 16;

/// The scheduled send times of the packets a sender expects echoed, per flow: every packet
/// in a loopback test, every `every`th (by sequence number) with `--echo-every`. Bounded: a
/// ring per flow, so an echo that returns after its flow sent the ring's length of echoed
/// packets more finds its entry overwritten and has no scheduled time.
#[derive(Debug)]
pub struct ScheduleBook {
    every: u64,
    per_flow: usize,
    /// Per flow, lazily allocated: `(seq, scheduled_ns)` at `(seq / every) % per_flow`.
    rings: Vec<Vec<(u64, u64)>>,
}

impl ScheduleBook {
    /// A book of `flows` flows whose packets with a sequence number divisible by `every`
    /// (at least 1) come back as echoes.
    pub fn new(flows: usize, every: u64) -> ScheduleBook {
        let per_flow = (TOTAL_ENTRIES / flows.max(1))
            .clamp(MIN_PER_FLOW, MAX_PER_FLOW)
            .next_power_of_two();
        ScheduleBook {
            every: every.max(1),
            per_flow,
            rings: vec![Vec::new(); flows],
        }
    }

    /// How many packets lie between two echoes.
    pub fn every(&self) -> u64 {
        self.every
    }

    /// The echo a packet's number gives: echoes count 0, 1, 2... in their own sequence
    /// space, so their loss is counted like any flow's. `None`: the packet is not echoed.
    pub fn echo_seq(&self, seq: u64) -> Option<u64> {
        seq.is_multiple_of(self.every).then(|| seq / self.every)
    }

    /// Packet `seq` of `flow` was due at `scheduled_ns` (the clock of its send stamps).
    pub fn on_sent(&mut self, flow: usize, seq: u64, scheduled_ns: u64) {
        let Some(echo) = self.echo_seq(seq) else {
            return;
        };
        let per_flow = self.per_flow;
        let Some(ring) = self.rings.get_mut(flow) else {
            return;
        };
        if ring.is_empty() {
            // Sequence number u64::MAX never matches a remembered packet.
            ring.resize(per_flow, (u64::MAX, 0));
        }
        ring[echo as usize % per_flow] = (seq, scheduled_ns);
    }

    /// When packet `seq` of `flow` was due, if it is still remembered.
    pub fn scheduled(&self, flow: usize, seq: u64) -> Option<u64> {
        let echo = self.echo_seq(seq)?;
        let ring = self.rings.get(flow).filter(|r| !r.is_empty())?;
        let (stored, scheduled) = ring[echo as usize % self.per_flow];
        (stored == seq).then_some(scheduled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_only_the_echoed_packets_of_each_flow() {
        let mut book = ScheduleBook::new(2, 10);
        for seq in 0..25 {
            book.on_sent(1, seq, 1_000 + seq);
        }
        assert_eq!(book.scheduled(1, 20), Some(1_020));
        assert_eq!(book.scheduled(1, 0), Some(1_000));
        assert_eq!(book.scheduled(1, 21), None, "not an echoed packet");
        assert_eq!(book.scheduled(0, 20), None, "another flow");
        assert_eq!(book.scheduled(5, 20), None, "no such flow");
        assert_eq!((book.echo_seq(30), book.echo_seq(31)), (Some(3), None));
    }

    #[test]
    fn a_ring_forgets_what_it_overwrote() {
        let mut book = ScheduleBook::new(TOTAL_ENTRIES, 1);
        assert_eq!(book.per_flow, MIN_PER_FLOW);
        for seq in 0..=MIN_PER_FLOW as u64 {
            book.on_sent(0, seq, seq * 7);
        }
        assert_eq!(book.scheduled(0, 0), None, "overwritten by seq 16");
        assert_eq!(book.scheduled(0, 16), Some(112));
        assert_eq!(book.scheduled(0, 1), Some(7));
        assert_eq!(ScheduleBook::new(1, 1).per_flow, MAX_PER_FLOW);
    }
}
