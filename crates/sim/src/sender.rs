//! What a simulated UDP flow sends, and when: the engine's sans-IO sender core
//! (`flowlab_traffic::sender::SenderCore`) over the same pacers, built from the same
//! `TrafficSpec` (or constant rate) and seed, here driven in virtual time. This is the one
//! place the simulator drives a sender.

use flowlab_results::meter::SenderMeter;
use flowlab_traffic::sender::{Poll, SendPolicy, SenderCore};
use flowlab_traffic::{
    preset, EndCondition, PacedSchedule, Pacer, PacerConfig, Source, TrafficSpec,
};

/// The smallest payload the engine sends (its probe header), and the largest (a UDP datagram
/// over IPv4): model sizes outside are clamped, as the engine does.
const MIN_PAYLOAD: u32 = flowlab_wire::PROBE_HEADER_LEN as u32;
const MAX_PAYLOAD: u32 = 65_507;
/// IPv4 and UDP headers.
pub(crate) const UDP_HEADERS: u32 = 28;
/// The fewest emissions of each sub-flow run ahead to estimate a model's load.
const MIN_PROBE: u64 = 100;
/// Largest train the core lists at once (as the engine's); virtual time sends it at once.
const MAX_TRAIN: u64 = 64;

/// What a simulated UDP flow sends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SendSpec {
    /// A traffic model; `None`: the constant schedule of `rate_bps` and `size`.
    pub traffic: Option<TrafficSpec>,
    /// Per sub-flow, in bits of `size`-byte packets.
    pub rate_bps: u64,
    pub size: u32,
    /// Sub-flows, each paced on its own with its own sequence numbers (a preset's audio and
    /// video, a test's parallel flows).
    pub subflows: u32,
    /// Seed of the model; `None`: derived from the run's seed and the flow's index.
    pub seed: Option<u64>,
    /// Bytes a packet carries on the wire beyond its payload: the IP and UDP headers, or 0
    /// where `size` counts them already (a scenario's constant-rate flow).
    pub header_bytes: u32,
    /// The far end sends every packet back (loopback).
    pub echo: bool,
}

impl SendSpec {
    /// A scenario's constant-rate flow: `rate_bps` of packets whose size (set later) counts
    /// their IP bytes.
    pub(crate) fn constant(rate_bps: u64) -> SendSpec {
        SendSpec {
            traffic: None,
            rate_bps,
            size: 0,
            subflows: 1,
            seed: None,
            header_bytes: 0,
            echo: false,
        }
    }

    /// The model's seed in a run seeded `run_seed`, for the flow at `flow_index`.
    pub(crate) fn seed_for(&self, run_seed: u64, flow_index: usize) -> u64 {
        self.seed
            .unwrap_or_else(|| flowlab_traffic::derive_seed(run_seed, flow_index as u64))
    }

    /// A scenario's traffic model: a sub-flow per part (a preset's audio and video), its
    /// sizes UDP payloads as on the command line, seeded from the run.
    pub(crate) fn model(traffic: TrafficSpec) -> Result<SendSpec, String> {
        Ok(SendSpec {
            subflows: sources_of(&traffic, 0)?,
            traffic: Some(traffic),
            header_bytes: UDP_HEADERS,
            ..SendSpec::constant(0)
        })
    }
}

/// One packet due now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Transmit {
    pub sub: u32,
    pub seq: u64,
    pub payload: u32,
    pub deadline_ns: u64,
}

/// The sender core of one flow's sub-flows (a sub-flow is one of the core's flows).
pub(crate) struct FlowSender {
    core: SenderCore,
}

fn no_files(path: &str) -> Result<Vec<u8>, String> {
    Err(format!(
        "file {path}: the simulator reads no files (embed the trace in the test)"
    ))
}

/// A scenario's `traffic` value: a preset's bare name (`videoconf-1998`) or any `--traffic`
/// string, which the simulator can run.
pub(crate) fn parse_traffic(text: &str) -> Result<TrafficSpec, String> {
    let name = text.trim();
    let spec = if preset::names().any(|n| n == name) {
        TrafficSpec::Preset {
            name: name.to_string(),
        }
    } else {
        TrafficSpec::parse(name).map_err(|e| e.to_string())?
    };
    check_simulated(&spec)?;
    Ok(spec)
}

/// Refuses what the simulator cannot send: request/response workloads, and files not
/// embedded.
pub(crate) fn check_simulated(spec: &TrafficSpec) -> Result<(), String> {
    if spec.transactions().is_some() {
        return Err("request/response transactions (rr, crr) are not simulated".into());
    }
    if let Some(path) = spec.required_files().first() {
        return no_files(path).map(|_| ());
    }
    Ok(())
}

/// How many sub-flows `spec` builds (a preset's parts; one for other models).
pub(crate) fn sources_of(spec: &TrafficSpec, seed: u64) -> Result<u32, String> {
    let n = spec
        .build(seed, &no_files)
        .map_err(|e| e.to_string())?
        .len();
    Ok(u32::try_from(n).unwrap_or(u32::MAX).max(1))
}

fn config(schedule: Option<PacedSchedule>, end: EndCondition) -> PacerConfig {
    PacerConfig {
        schedule,
        end,
        // Virtual time is never late and sends each packet on its own deadline.
        train_window_ns: 0,
        max_batch: MAX_TRAIN,
        max_lateness_ns: u64::MAX,
    }
}

impl FlowSender {
    /// The core over `spec`'s sub-flows starting at `start_ns`; `seed` seeds the model
    /// (sub-flow `i` from [`TrafficSpec::source_for`]).
    pub(crate) fn new(
        spec: &SendSpec,
        start_ns: u64,
        end: EndCondition,
        seed: u64,
    ) -> Result<FlowSender, String> {
        let n = u64::from(spec.subflows.max(1));
        let pacers = match &spec.traffic {
            Some(t) => (0..n)
                .map(|i| {
                    let source = t
                        .source_for(seed, i, &no_files)
                        .map_err(|e| e.to_string())?;
                    let pacer = Pacer::from_source(source, start_ns, config(None, end));
                    Ok((pacer, start_ns))
                })
                .collect::<Result<Vec<_>, String>>()?,
            None => {
                let interval = PacedSchedule::new(0, spec.rate_bps, spec.size)
                    .map_err(|e| e.to_string())?
                    .interval_ns();
                // Sub-flows start spread over one packet interval, as in the engine.
                let stagger = (interval / n as f64) as u64;
                (0..n)
                    .map(|i| {
                        let start = start_ns.saturating_add(stagger * i);
                        let s = PacedSchedule::new(start, spec.rate_bps, spec.size)
                            .map_err(|e| e.to_string())?;
                        Ok((Pacer::new(config(Some(s), end)), start))
                    })
                    .collect::<Result<Vec<_>, String>>()?
            }
        };
        let policy = SendPolicy {
            size: spec.size,
            min_size: MIN_PAYLOAD,
            max_size: MAX_PAYLOAD,
            drop_refused: spec.traffic.is_none(),
            ack_timeout_ns: None,
        };
        Ok(FlowSender {
            core: SenderCore::new(pacers, policy),
        })
    }

    /// Appends the packets due by `now_ns` to `out`, train by train as the core hands them
    /// out (the earliest due sub-flow first), and says when the next is due; `None` when
    /// every sub-flow is done. The simulated socket takes every packet (a path too narrow
    /// loses it later, at the sender's interface).
    pub(crate) fn poll(&mut self, now_ns: u64, out: &mut Vec<Transmit>) -> Option<u64> {
        loop {
            match self.core.poll(now_ns) {
                Poll::Done => return None,
                Poll::Wait { until_ns } => return Some(until_ns),
                Poll::Transmit { flow } => {
                    let train = self.core.train();
                    out.extend(train.iter().map(|p| Transmit {
                        sub: flow as u32,
                        seq: p.seq,
                        payload: p.size,
                        deadline_ns: p.due_ns.unwrap_or(now_ns),
                    }));
                    self.core.handle_sent(train.len());
                }
            }
        }
    }

    /// Measures each sub-flow shaped to a contract against it, as the engine does.
    pub(crate) fn hold_to_contracts(&self, meter: &mut SenderMeter) {
        for (i, pacer) in self.core.pacers().enumerate() {
            if let Some(c) = pacer.contract() {
                meter.hold_to_contract(i, c);
            }
        }
    }

    /// Hands the pacers' own figures (missed slots, shaper reports) to `meter` at the end.
    pub(crate) fn finish(&self, meter: &mut SenderMeter) {
        for (i, pacer) in self.core.pacers().enumerate() {
            meter.set_missed_slots(i, pacer.missed_slots());
            if let Some(r) = pacer.contract_report() {
                meter.set_shaper_report(i, r);
            }
        }
    }
}

/// What a flow offers over its active time: packets, and wire bits per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offered {
    pub packets: u64,
    pub wire_bps: u64,
}

/// The load `spec` offers over `active_ns` (at most `count` packets a sub-flow), from the
/// constant schedule or by running the model's sources ahead (`probe` emissions in all, at
/// least `MIN_PROBE` a sub-flow, then extrapolated): the work limits check it before
/// simulating.
pub(crate) fn offered(
    spec: &SendSpec,
    seed: u64,
    active_ns: u64,
    count: Option<u64>,
    probe: u64,
) -> Offered {
    let subflows = u64::from(spec.subflows.max(1));
    let probe = (probe / subflows).max(MIN_PROBE);
    // Packets, and wire bit/s.
    let (mut packets, mut bits) = (0u128, 0u128);
    for i in 0..subflows {
        let (n, payload) = match &spec.traffic {
            None => {
                let n = PacedSchedule::new(0, spec.rate_bps, spec.size)
                    .map_or(0, |s| s.count_before(active_ns));
                let n = count.map_or(n, |c| n.min(c));
                // The schedule's own rate, exactly, with the headers.
                let wire = u128::from(spec.size) + u128::from(spec.header_bytes);
                bits += u128::from(spec.rate_bps) * wire / u128::from(spec.size.max(1));
                packets += u128::from(n);
                continue;
            }
            Some(t) => match t.source_for(seed, i, &no_files) {
                Ok(source) => run_ahead(source, active_ns, count, probe),
                Err(_) => (0, 0),
            },
        };
        packets += n;
        let wire_bits = (payload + n * u128::from(spec.header_bytes)) * 8;
        bits += wire_bits * 1_000_000_000 / u128::from(active_ns.max(1));
    }
    Offered {
        packets: u64::try_from(packets).unwrap_or(u64::MAX),
        wire_bps: u64::try_from(bits).unwrap_or(u64::MAX),
    }
}

/// (packets, payload bytes) of `source` before `active_ns`, extrapolated past `probe`
/// emissions.
fn run_ahead(
    mut source: Box<dyn Source>,
    active_ns: u64,
    count: Option<u64>,
    probe: u64,
) -> (u128, u128) {
    let limit = count.unwrap_or(u64::MAX).min(probe);
    let (mut n, mut bytes, mut reached) = (0u64, 0u128, 0u64);
    while n < limit {
        let Some(e) = source.next_emission() else {
            return (u128::from(n), bytes);
        };
        if e.at_ns >= active_ns {
            return (u128::from(n), bytes);
        }
        n += 1;
        bytes += u128::from(e.size.clamp(MIN_PAYLOAD, MAX_PAYLOAD));
        reached = e.at_ns;
    }
    if count.is_some_and(|c| n >= c) {
        return (u128::from(n), bytes);
    }
    // Cut short: scale to the whole active time.
    let scale = |x: u128| x * u128::from(active_ns) / u128::from(reached.max(1));
    let total = scale(u128::from(n)).min(u128::from(count.unwrap_or(u64::MAX)));
    (total, bytes * total / u128::from(n.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str, subflows: u32) -> SendSpec {
        SendSpec {
            traffic: Some(parse_traffic(text).unwrap()),
            rate_bps: 0,
            size: 0,
            subflows,
            seed: None,
            header_bytes: 28,
            echo: false,
        }
    }

    fn until(ns: u64) -> EndCondition {
        EndCondition {
            until_ns: Some(ns),
            count: None,
        }
    }

    /// Every packet of `s` over its first `ns`, polled at each wake-up as the engine does.
    fn drain(s: &mut FlowSender, ns: u64) -> Vec<(u64, Transmit)> {
        let (mut out, mut sent, mut now) = (Vec::new(), Vec::new(), 0);
        while let Some(next) = s.poll(now, &mut out) {
            sent.extend(out.drain(..).map(|t| (now, t)));
            assert!(next > now && next < ns);
            now = next;
        }
        sent.extend(out.drain(..).map(|t| (now, t)));
        sent
    }

    #[test]
    fn a_bare_preset_name_or_a_traffic_string() {
        assert_eq!(
            parse_traffic("videoconf-1998").unwrap(),
            TrafficSpec::Preset {
                name: "videoconf-1998".into()
            }
        );
        assert!(matches!(
            parse_traffic("poisson:pps=10,size=100"),
            Ok(TrafficSpec::Poisson { .. })
        ));
        for (text, why) in [
            ("rr:request=64,response=1k", "not simulated"),
            ("trace:calls.txt", "reads no files"),
            ("nonsense", "unknown traffic kind"),
        ] {
            let e = parse_traffic(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn packets_leave_on_their_deadlines_and_stop_at_the_end() {
        let spec = SendSpec {
            traffic: None,
            rate_bps: 8_000_000,
            size: 1000,
            subflows: 2,
            seed: None,
            header_bytes: 28,
            echo: false,
        };
        // 1 ms apart per sub-flow, the second half a millisecond later.
        let mut s = FlowSender::new(&spec, 5_000, until(10_005_000), 1).unwrap();
        let sent = drain(&mut s, 10_005_000);
        assert_eq!(sent.len(), 20);
        for (now, t) in &sent {
            assert_eq!(*now, t.deadline_ns);
            let due = 5_000 + u64::from(t.sub) * 500_000 + t.seq * 1_000_000;
            assert_eq!(t.deadline_ns, due);
            assert_eq!(t.payload, 1000);
        }
        let o = offered(&spec, 1, 10_000_000, None, 20_000);
        assert_eq!(o.packets, 20);
        assert_eq!(o.wire_bps, 2 * 8_000_000 * 1028 / 1000);
    }

    #[test]
    fn a_burst_longer_than_a_train_leaves_whole_at_its_instant_with_sizes_clamped() {
        // 100 packets back to back every 10 ms, each below the probe header's size.
        let spec = model("burst:n=100,every=10ms,size=10", 1);
        let mut s = FlowSender::new(&spec, 2_000, until(25_000_000), 1).unwrap();
        let mut out = Vec::new();
        assert_eq!(s.poll(1_000, &mut out), Some(2_000));
        assert!(out.is_empty());
        assert_eq!(s.poll(2_000, &mut out), Some(10_002_000));
        assert_eq!(out.len(), 100, "more than one {MAX_TRAIN}-packet train");
        for (k, t) in out.iter().enumerate() {
            assert_eq!((t.sub, t.seq, t.deadline_ns), (0, k as u64, 2_000));
            assert_eq!(t.payload, MIN_PAYLOAD);
        }
        out.clear();
        assert_eq!(s.poll(10_002_000, &mut out), Some(20_002_000));
        assert_eq!(out.first().map(|t| t.seq), Some(100));
        out.clear();
        // The last burst is due before the end; nothing after it.
        assert_eq!(s.poll(20_002_000, &mut out), None);
        assert_eq!(out.len(), 100);
    }

    #[test]
    fn a_model_follows_its_seed_and_its_offered_load_is_known_ahead() {
        let spec = model("poisson:pps=2000,size=1200", 1);
        let run = |seed| {
            drain(
                &mut FlowSender::new(&spec, 0, until(1_000_000_000), seed).unwrap(),
                1_000_000_000,
            )
        };
        let a = run(7);
        assert_eq!(a, run(7));
        assert_ne!(a, run(8));
        assert!((1800..2200).contains(&a.len()), "{}", a.len());
        let o = offered(&spec, 7, 1_000_000_000, None, 20_000);
        assert_eq!(o.packets, a.len() as u64);
        assert_eq!(o.wire_bps, a.len() as u64 * 1228 * 8);
        // Past the probe the count is extrapolated, not run.
        let long = offered(&spec, 7, 3_600_000_000_000, None, 20_000);
        assert!((6_800_000..7_600_000).contains(&long.packets), "{long:?}");
    }

    #[test]
    fn a_preset_sends_each_part_as_a_sub_flow() {
        let spec = model("videoconf-1998", 2);
        assert_eq!(sources_of(spec.traffic.as_ref().unwrap(), 1).unwrap(), 2);
        let mut s = FlowSender::new(&spec, 0, until(10_000_000_000), 3).unwrap();
        let sent = drain(&mut s, 10_000_000_000);
        let audio: Vec<_> = sent.iter().filter(|(_, t)| t.sub == 0).collect();
        // 64 kb/s of 1119-byte packets: 7.15 a second.
        assert!((70..=73).contains(&audio.len()), "{}", audio.len());
        assert!(audio.iter().all(|(_, t)| t.payload == 1119));
        let video_bits: u64 = sent
            .iter()
            .filter(|(_, t)| t.sub == 1)
            .map(|(_, t)| u64::from(t.payload) * 8)
            .sum();
        // Mean 1 Mb/s, 0.5-1.5 Mb/s by scene.
        assert!(
            (5_000_000..15_000_000).contains(&video_bits),
            "{video_bits}"
        );
    }
}
