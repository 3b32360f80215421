//! Start offsets. Constant-rate flows that start at the same instant keep one phase against
//! each other for the whole run, so at a shared queue one of them can take every loss; real
//! hosts start at unrelated instants. `start_spread` (in `[sim]`, `[network]` or a flow)
//! moves each flow's start later by a uniform draw in `[0, spread]`, from the run's seed: the
//! same seed gives the same offsets. The default, 0, starts every flow exactly at `start`.

use std::borrow::Cow;

use flowlab_spanned::{FileError, Reader};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::Model;

/// Spreads the run's seed over the flows' start draws.
const START_SEED_MIX: u64 = 0x5851_f42d_4c95_7f2d;

/// `start_spread`, a duration, if the table has one.
pub(crate) fn read_spread(r: &Reader) -> Result<Option<u64>, FileError> {
    r.duration_ns("start_spread")
}

impl Model {
    /// The model with each flow's start moved by its draw (borrowed when nothing spreads).
    /// A flow's stop stays where it was.
    pub(crate) fn with_spread_starts(&self, seed: u64) -> Cow<'_, Model> {
        let spread = |i: usize| {
            self.flows[i]
                .start_spread_ns
                .unwrap_or(self.start_spread_ns)
        };
        if (0..self.flows.len()).all(|i| spread(i) == 0) {
            return Cow::Borrowed(self);
        }
        let mut m = self.clone();
        for (i, f) in m.flows.iter_mut().enumerate() {
            f.start_ns = f.start_ns.saturating_add(offset_ns(seed, i, spread(i)));
        }
        Cow::Owned(m)
    }
}

/// Flow `index`'s offset in `[0, spread_ns]`: its own draw, so adding a flow moves no other.
fn offset_ns(seed: u64, index: usize, spread_ns: u64) -> u64 {
    if spread_ns == 0 {
        return 0;
    }
    let flow_seed = seed ^ (index as u64 + 1).wrapping_mul(START_SEED_MIX);
    ChaCha8Rng::seed_from_u64(flow_seed).next_u64() % spread_ns.saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two UDP flows from 1 s; `sim` and `flow_b` are extra lines of `[sim]` and flow b.
    fn scenario(sim: &str, flow_b: &str) -> Result<crate::Scenario, FileError> {
        let flow = |name: &str, extra: &str| {
            format!(
                "[[flow]]\nname = \"{name}\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"udp\"\n\
                 rate = \"1M\"\nsize = \"1000B\"\nstart = \"1s\"\n{extra}\n"
            )
        };
        crate::load(&format!(
            "[sim]\nduration = \"2s\"\n{sim}\n[[node]]\nname = \"a\"\nkind = \"host\"\n\
             [[node]]\nname = \"b\"\nkind = \"host\"\n[[link]]\nfrom = \"a\"\nto = \"b\"\n\
             rate = \"10M\"\n{}{}",
            flow("a", ""),
            flow("b", flow_b)
        ))
    }

    fn starts(s: &crate::Scenario, seed: u64) -> Vec<u64> {
        let m = s.variants[0].model.with_spread_starts(seed);
        m.flows.iter().map(|f| f.start_ns).collect()
    }

    #[test]
    fn offsets_stay_within_the_spread_and_follow_the_seed() {
        let draws: Vec<u64> = (0..64).map(|i| offset_ns(7, i, 1_000_000)).collect();
        assert!(draws.iter().all(|&d| d <= 1_000_000));
        // Unrelated instants: not all alike, and the same again for the same seed.
        assert!(draws.iter().any(|&d| d != draws[0]));
        assert_eq!(
            draws,
            (0..64)
                .map(|i| offset_ns(7, i, 1_000_000))
                .collect::<Vec<_>>()
        );
        assert_ne!(
            draws,
            (0..64)
                .map(|i| offset_ns(8, i, 1_000_000))
                .collect::<Vec<_>>()
        );
        assert_eq!(offset_ns(7, 3, 0), 0);
    }

    #[test]
    fn a_flow_starts_within_its_spread_and_a_flow_of_its_own_keeps_its_start() {
        let s = scenario("start_spread = \"10ms\"", "start_spread = \"0s\"").unwrap();
        let (a, b) = (starts(&s, 4), starts(&s, 4)[1]);
        assert!((1_000_000_000..=1_010_000_000).contains(&a[0]), "{a:?}");
        assert_eq!(b, 1_000_000_000);
        assert_eq!(a, starts(&s, 4), "the same seed, the same starts");
        let other: Vec<u64> = (5..15).map(|seed| starts(&s, seed)[0]).collect();
        assert!(other.iter().any(|&x| x != a[0]), "{other:?}");
        // Reports follow: the same seed gives the same run, bit for bit.
        let json = |seed| crate::to_json(&crate::run(&s, Some(seed)));
        assert_eq!(json(4), json(4));
    }

    #[test]
    fn without_a_spread_every_flow_starts_at_its_start() {
        let s = scenario("", "").unwrap();
        assert!(matches!(
            s.variants[0].model.with_spread_starts(4),
            Cow::Borrowed(_)
        ));
        assert_eq!(starts(&s, 4), [1_000_000_000; 2]);
    }

    #[test]
    fn a_bad_spread_is_a_one_line_error_naming_its_line() {
        for (sim, flow_b) in [("start_spread = \"soon\"", ""), ("", "start_spread = -1")] {
            let e = scenario(sim, flow_b).expect_err(sim).to_string();
            assert!(e.contains("start_spread") && !e.contains('\n'), "{e}");
            assert!(e.starts_with("line "), "{e}");
        }
    }
}
