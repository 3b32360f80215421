//! The load a set of sources offers, found ahead of time by running them (sans-IO, no clock):
//! an agent checks a test's traffic model against its rate limit before sending any of it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::contract::TokenBucket;
use crate::Source;

/// What the sources offered over the span they were run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OfferedLoad {
    /// Mean payload rate over the span, bit/s.
    pub mean_bps: f64,
    /// When the first packet beyond the token bucket would have left, ns from the start.
    pub first_excess_ns: Option<u64>,
}

/// Runs `sources` together over their first `horizon_ns` (at most `max_emissions` packets,
/// so a hostile model costs bounded work) and checks every packet against `bucket`.
pub fn offered_load(
    mut sources: Vec<Box<dyn Source>>,
    horizon_ns: u64,
    max_emissions: usize,
    mut bucket: TokenBucket,
) -> OfferedLoad {
    let mut due: BinaryHeap<Reverse<(u64, usize, u32)>> = BinaryHeap::new();
    for (i, source) in sources.iter_mut().enumerate() {
        if let Some(e) = source.next_emission() {
            due.push(Reverse((e.at_ns, i, e.size)));
        }
    }
    let (mut bytes, mut span, mut first_excess_ns) = (0u64, 0u64, None);
    for _ in 0..max_emissions {
        let Some(Reverse((at_ns, i, size))) = due.pop() else {
            break;
        };
        if at_ns > horizon_ns {
            span = horizon_ns;
            break;
        }
        if first_excess_ns.is_none() && !bucket.conforms(at_ns, size) {
            first_excess_ns = Some(at_ns);
        }
        bucket.take(at_ns, size);
        (bytes, span) = (bytes.saturating_add(u64::from(size)), at_ns);
        if let Some(e) = sources[i].next_emission() {
            due.push(Reverse((e.at_ns.max(at_ns), i, e.size)));
        }
    }
    // A source that sent everything at once spans no time: count it over a nanosecond.
    let span_s = span.max(1) as f64 / 1e9;
    OfferedLoad {
        mean_bps: bytes as f64 * 8.0 / span_s,
        first_excess_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TrafficSpec;

    fn sources(text: &str, flows: u64) -> Vec<Box<dyn Source>> {
        let spec = TrafficSpec::parse(text).unwrap();
        (0..flows)
            .flat_map(|i| spec.build(i, &|_| Err("no files".into())).unwrap())
            .collect()
    }

    #[test]
    fn poisson_past_the_limit_is_found() {
        // 200k packets/s of 1400 B: 2.24 Gbit/s against 10 Mbit/s.
        let load = offered_load(
            sources("poisson:pps=200000,size=1400", 1),
            1_000_000_000,
            100_000,
            TokenBucket::new(10_000_000, 256 * 1024),
        );
        assert!(load.mean_bps > 2e9, "{load:?}");
        assert!(load.first_excess_ns.is_some_and(|t| t < 10_000_000));
    }

    #[test]
    fn flows_add_up() {
        // Four 2 Mbit/s flows are 8 Mbit/s: past a 5 Mbit/s limit, within a 10 Mbit/s one.
        let four = || sources("cbr:rate=2M,size=1000", 4);
        let over = offered_load(
            four(),
            5_000_000_000,
            1_000_000,
            TokenBucket::new(5_000_000, 65_536),
        );
        assert!((over.mean_bps - 8e6).abs() < 8e4, "{over:?}");
        assert!(over.first_excess_ns.is_some());
        let within = offered_load(
            four(),
            5_000_000_000,
            1_000_000,
            TokenBucket::new(10_000_000, 65_536),
        );
        assert_eq!(within.first_excess_ns, None);
    }

    #[test]
    fn work_is_bounded() {
        let load = offered_load(
            sources("poisson:pps=1000000000,size=64", 1),
            10_000_000_000,
            1000,
            TokenBucket::new(1_000_000, 65_536),
        );
        assert!(load.mean_bps > 1e9, "{load:?}");
    }
}
