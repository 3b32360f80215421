//! The agent's rate limit, enforced while sending: one token bucket shared by every flow of
//! a role, so a test cannot pass `--max-rate` whatever its flows or traffic model ask for.
//! The decision is `flowlab_traffic::sender::SendCap`'s; this adds the lock that lets the
//! threads of a role share it.

use std::sync::Mutex;

use flowlab_traffic::sender::SendCap;

use crate::RunContext;

/// Tokens for the bytes all flows of one role may send; `None` inside when unlimited.
#[derive(Debug)]
pub struct SendBudget(Option<Mutex<SendCap>>);

impl SendBudget {
    /// The budget of a role running with `ctx`, starting full now.
    pub fn of(ctx: &RunContext) -> SendBudget {
        SendBudget::new(ctx.send_cap_bps, crate::clock::monotonic_ns())
    }

    /// A budget of `cap_bps` over every flow, starting full at `now_ns`.
    pub fn new(cap_bps: Option<u64>, now_ns: u64) -> SendBudget {
        SendBudget(cap_bps.map(|rate| Mutex::new(SendCap::new(rate, now_ns))))
    }

    /// How many of the `count` packets sized by `size(k)` may leave at `now_ns` (their tokens
    /// are taken), or, when not even the first may, the time it can.
    pub fn admit(
        &self,
        now_ns: u64,
        count: usize,
        size: impl Fn(usize) -> u32,
    ) -> Result<usize, u64> {
        match &self.0 {
            None => Ok(count),
            Some(cap) => cap
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .admit(now_ns, count, size),
        }
    }

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
    fn a_capped_budget_refuses_past_its_burst() {
        // 8 Mbit/s: a 256 KiB burst, then 1 byte per microsecond.
        let budget = SendBudget::new(Some(8_000_000), 0);
        assert_eq!(budget.admit(0, 300, |_| 1000), Ok(262));
        assert_eq!(budget.admit(0, 1, |_| 1000), Err(856_000));
        assert_eq!(budget.admit(856_000, 2, |_| 1000), Ok(1));
    }
}
