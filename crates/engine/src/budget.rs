//! The agent's rate limit, enforced while sending: one token bucket shared by every flow of
//! a role, so a test cannot pass `--max-rate` whatever its flows or traffic model ask for.

use std::sync::Mutex;

use flowlab_traffic::contract::TokenBucket;

/// Shortest burst a capped sender may send at once: one GSO train of 64 KiB, with room.
const MIN_BURST_BYTES: u64 = 256 * 1024;
/// Otherwise the burst is this long at the capped rate.
const BURST_NS: u64 = 5_000_000;

/// Tokens for the bytes all flows of one role may send; `None` inside when unlimited.
#[derive(Debug)]
pub struct SendBudget(Option<Mutex<TokenBucket>>);

impl SendBudget {
    /// The budget of a role carrying `flow`, starting full now.
    pub fn of(flow: &crate::FlowParams) -> SendBudget {
        SendBudget::new(flow.send_cap_bps, crate::clock::monotonic_ns())
    }

    /// A budget of `cap_bps` over every flow, starting full at `now_ns`.
    pub fn new(cap_bps: Option<u64>, now_ns: u64) -> SendBudget {
        SendBudget(cap_bps.map(|rate| {
            let mut bucket = TokenBucket::new(rate, Self::burst_bytes(rate));
            bucket.take(now_ns, 0);
            Mutex::new(bucket)
        }))
    }

    /// The burst a limit of `rate_bps` allows: 5 ms of it, at least 256 KiB.
    pub fn burst_bytes(rate_bps: u64) -> u32 {
        let burst = (u128::from(rate_bps) / 8 * u128::from(BURST_NS) / 1_000_000_000)
            .max(u128::from(MIN_BURST_BYTES));
        u32::try_from(burst).unwrap_or(u32::MAX)
    }

    /// How many of the `count` packets sized by `size(k)` may leave at `now_ns` (their tokens
    /// are taken), or, when not even the first may, the time it can.
    pub fn admit(
        &self,
        now_ns: u64,
        count: usize,
        size: impl Fn(usize) -> u32,
    ) -> Result<usize, u64> {
        let Some(bucket) = &self.0 else {
            return Ok(count);
        };
        let mut bucket = bucket.lock().unwrap_or_else(|e| e.into_inner());
        // A whole train that fits is taken at once; packet by packet only at the edge.
        let train: u64 = (0..count).map(|k| u64::from(size(k))).sum();
        if let Ok(train) = u32::try_from(train) {
            if bucket.conforms(now_ns, train) {
                bucket.take(now_ns, train);
                return Ok(count);
            }
        }
        let admitted = (0..count)
            .take_while(|&k| {
                let fits = bucket.conforms(now_ns, size(k));
                if fits {
                    bucket.take(now_ns, size(k));
                }
                fits
            })
            .count();
        match admitted {
            0 if count > 0 => Err(bucket.earliest(now_ns, size(0)).max(now_ns + 1)),
            n => Ok(n),
        }
    }
}

impl SendBudget {
    /// Waits until one packet of `size` bytes may leave and takes its tokens (responders,
    /// which answer one request at a time).
    pub fn hold(&self, size: u32) {
        while let Err(until_ns) = self.admit(crate::clock::monotonic_ns(), 1, |_| size) {
            crate::wait_until(until_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unlimited_admits_everything() {
        assert_eq!(SendBudget::new(None, 0).admit(0, 64, |_| 65_000), Ok(64));
    }

    #[test]
    fn a_capped_budget_holds_the_long_run_rate() {
        // 8 Mbit/s = 1 MB/s: over 10 s of asking for 1000 B packets back to back, about
        // 10 MB leave (plus the 256 KiB burst), never more.
        let budget = SendBudget::new(Some(8_000_000), 0);
        let (mut now, mut sent) = (0u64, 0u64);
        while now < 10_000_000_000 {
            match budget.admit(now, 64, |_| 1000) {
                Ok(n) => {
                    sent += n as u64 * 1000;
                    now += 10_000;
                }
                Err(until) => now = until,
            }
        }
        let most = 10_000_000 + MIN_BURST_BYTES + 1000;
        assert!(sent <= most && sent > 9_900_000, "sent {sent} B");
    }
}
