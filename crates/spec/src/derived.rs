//! What follows from a test description for whoever runs it, the real-time engine or a
//! simulator: packet rates, the traffic model's sources, the pacers and the sender core.

use std::ops::Range;

use flowlab_traffic::contract::TokenBucket;
use flowlab_traffic::load::{offered_load, OfferedLoad};
use flowlab_traffic::sender::{Batching, SendPolicy, SenderCore};
use flowlab_traffic::{EndCondition, PacedSchedule, Pacer, PacerConfig, Source, TransactionConfig};

use crate::TestSpec;

impl TestSpec {
    /// Time between packets, when paced at a constant rate.
    pub fn packet_interval_ns(&self) -> Option<u64> {
        let rate = self.rate_bps.filter(|&r| r > 0)?;
        Some((u128::from(self.size) * 8 * 1_000_000_000 / u128::from(rate)) as u64)
    }

    /// Packets per second, when paced at a constant rate.
    pub fn packets_per_sec(&self) -> Option<f64> {
        self.rate_bps
            .map(|r| r as f64 / (f64::from(self.size.max(1)) * 8.0))
    }

    /// Whether a traffic model, not the constant rate, decides packet times and sizes.
    pub fn modelled(&self) -> bool {
        self.traffic.is_some()
    }

    /// The request/response workload, for `rr` and `crr` tests.
    pub fn transactions(&self) -> Option<&TransactionConfig> {
        self.traffic.as_ref().and_then(|t| t.transactions())
    }

    /// Whether packets leave on a schedule (a rate or a model), not as fast as possible.
    pub fn paced(&self) -> bool {
        self.rate_bps.is_some() || self.modelled()
    }

    /// The traffic model's source of flow `index` (sub-flow `index` of a preset, or the model
    /// seeded for this flow); `None` for the constant-rate schedule.
    pub fn source_for(&self, index: usize) -> Result<Option<Box<dyn Source>>, String> {
        let Some(spec) = &self.traffic else {
            return Ok(None);
        };
        let no_files = |path: &str| Err(format!("file {path} was not embedded in the test"));
        spec.source_for(self.seed, index as u64, &no_files)
            .map(Some)
            .map_err(|e| e.to_string())
    }

    /// The load every flow's model offers together over its first `horizon_ns` (at most
    /// `max_packets`), each packet checked against `bucket`: what an agent admits and what a
    /// headline announces. `None` without a model.
    pub fn offered_load(
        &self,
        horizon_ns: u64,
        max_packets: usize,
        bucket: TokenBucket,
    ) -> Result<Option<OfferedLoad>, String> {
        if !self.modelled() {
            return Ok(None);
        }
        let sources = (0..self.flows as usize)
            .filter_map(|i| self.source_for(i).transpose())
            .collect::<Result<Vec<_>, String>>()?;
        Ok(Some(offered_load(sources, horizon_ns, max_packets, bucket)))
    }

    /// The schedule and end of a flow starting at `start_ns`.
    pub fn pacer_config(&self, start_ns: u64, batching: Batching) -> PacerConfig {
        let schedule = self
            .rate_bps
            .and_then(|rate| PacedSchedule::new(start_ns, rate, self.size).ok());
        PacerConfig {
            schedule,
            end: EndCondition {
                until_ns: self.duration_ns.map(|d| start_ns.saturating_add(d)),
                count: self.count,
            },
            train_window_ns: batching.train_window_ns,
            max_batch: batching.max_batch,
            max_lateness_ns: batching.max_lateness_ns,
        }
    }

    /// The pacer of flow `index` starting at `start_ns`: the constant-rate schedule, or the
    /// flow's traffic model.
    pub fn pacer_for(
        &self,
        index: usize,
        start_ns: u64,
        batching: Batching,
    ) -> Result<Pacer, String> {
        let config = self.pacer_config(start_ns, batching);
        match self.source_for(index)? {
            Some(source) => Ok(Pacer::from_source(source, start_ns, config)),
            None => Ok(Pacer::new(config)),
        }
    }

    /// The test's sending policy: its packet size, and at a constant rate what a socket
    /// refuses is lost. A driver narrows the sizes to its transport's and adds
    /// acknowledgements where its flows need them.
    pub fn send_policy(&self) -> SendPolicy {
        SendPolicy {
            size: self.size,
            min_size: 0,
            max_size: u32::MAX,
            drop_refused: self.rate_bps.is_some(),
            ack_timeout_ns: None,
        }
    }

    /// The sender core of the test's flows `flows` (their indices pick each flow's model
    /// source and seed), starting at `start_ns`. The flows start spread over one packet
    /// interval, so they do not all leave in lockstep.
    pub fn sender_core(
        &self,
        flows: Range<usize>,
        start_ns: u64,
        batching: Batching,
        policy: SendPolicy,
    ) -> Result<SenderCore, String> {
        let stagger = self
            .packet_interval_ns()
            .map_or(0, |i| i / flows.len().max(1) as u64);
        let pacers = flows
            .enumerate()
            .map(|(j, index)| {
                let start = start_ns + stagger * j as u64;
                Ok((self.pacer_for(index, start, batching)?, start))
            })
            .collect::<Result<Vec<_>, String>>()
            .map_err(|e| format!("traffic model: {e}"))?;
        Ok(SenderCore::new(pacers, policy))
    }
}

#[cfg(test)]
mod tests {
    use flowlab_traffic::sender::Poll;
    use flowlab_traffic::TrafficSpec;

    use crate::{Direction, Protocol, TestSpec};

    use super::*;

    fn spec() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Oneway,
            rate_bps: Some(8_000_000),
            size: 1000,
            duration_ns: Some(10_000_000),
            count: None,
            interval_ns: None,
            flows: 2,
            client_udp_ports: vec![],
            raw: None,
            busy_poll: false,
            packet_log: false,
            socket: Default::default(),
            traffic: None,
            seed: 7,
            authenticated_packets: false,
            echo_every: None,
            omit_ns: None,
            pacing: Default::default(),
            multicast: None,
        }
    }

    const BATCHING: Batching = Batching {
        train_window_ns: 0,
        max_batch: 64,
        max_lateness_ns: u64::MAX,
    };

    #[test]
    fn a_constant_rate_gives_the_packet_interval() {
        let s = spec();
        assert_eq!(s.packet_interval_ns(), Some(1_000_000));
        assert_eq!(s.packets_per_sec(), Some(1000.0));
        assert!(s.paced() && !s.modelled());
        let max = TestSpec {
            rate_bps: None,
            ..spec()
        };
        assert_eq!((max.packet_interval_ns(), max.paced()), (None, false));
    }

    #[test]
    fn flows_of_a_core_start_staggered_and_end_with_the_duration() {
        let mut core = spec()
            .sender_core(0..2, 0, BATCHING, spec().send_policy())
            .unwrap();
        let mut sent = Vec::new();
        let mut now = 0;
        loop {
            match core.poll(now) {
                Poll::Done => break,
                Poll::Wait { until_ns } => now = until_ns,
                Poll::Transmit { flow } => {
                    sent.push((flow, core.train()[0].due_ns.unwrap()));
                    core.handle_sent(core.train().len());
                }
            }
        }
        // 10 packets per flow in 10 ms, flow 1 half an interval behind flow 0.
        assert_eq!(sent.len(), 20);
        assert_eq!(&sent[..3], &[(0, 0), (1, 500_000), (0, 1_000_000)]);
    }

    #[test]
    fn a_preset_gives_each_flow_its_own_source() {
        let s = TestSpec {
            rate_bps: None,
            traffic: Some(TrafficSpec::parse("preset:videoconf-1998").unwrap()),
            ..spec()
        };
        assert!(s.modelled());
        let first = |index| {
            let mut source = s.source_for(index).unwrap().unwrap();
            source.next_emission()
        };
        assert!(first(0).is_some());
        assert_ne!(first(0), first(1), "sub-flows differ");
        assert!(spec().source_for(0).unwrap().is_none());
    }
}
