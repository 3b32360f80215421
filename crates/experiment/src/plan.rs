//! From a validated [`Experiment`] to the ordered list of [`Step`]s the controller runs: sweep
//! points outermost, then repetitions of the whole plan, then the plan's blocks. Each step is
//! a set of flows that start together (each at its own offset), every flow resolved to its
//! hosts' agent addresses and a complete [`TestSpec`].

use flowlab_spec::{Direction, TestSpec};
use flowlab_traffic::TrafficSpec;

use crate::file::{Block, BlockKind, Experiment, Flow, Item, SearchKind, SearchSpec, SweepPoint};
use crate::search::{
    BackToBack, BurstSize, LossVsLoad, OfferedLoad, Rfc2544Throughput, SearchError, Trial,
    RFC2544_TRIAL_NS, TRIAL_DRAIN_NS,
};

/// Bound on the steps one sweep point may expand into; `load` checked the whole experiment
/// against the same cap arithmetically, so this only guards a hand-built [`Block`].
const MAX_STEPS: usize = crate::limits::MAX_STEPS as usize;

/// A flow ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedFlow {
    pub name: String,
    /// Host names as in the file: `from` runs the client, `to` the serving agent.
    pub from: String,
    pub to: String,
    /// Agent address (`HOST:PORT`) of the `from` host: where the client side runs.
    pub client_agent: String,
    /// Agent address of the `to` host: the agent the client connects to.
    pub server_agent: String,
    /// Agent address of the host whose packets leave first (`to` for `reverse`).
    pub sender_agent: String,
    /// Agent address of the host that receives the data (the echoer, for `loopback`).
    pub receiver_agent: String,
    /// Start of this flow after the step starts.
    pub start_offset_ns: u64,
    /// The test, from the client's (`from`'s) point of view.
    pub spec: TestSpec,
}

/// Flows that start together.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Position in the whole plan, from 0.
    pub index: usize,
    /// Which sweep point (index into `Experiment::points`).
    pub point: usize,
    /// The sweep values of that point.
    pub labels: Vec<(String, String)>,
    /// Which repetition of the whole plan, from 0.
    pub repetition: u32,
    pub flows: Vec<ResolvedFlow>,
    /// How long receivers wait after the last packet for packets still in flight before
    /// counting: a search's trials wait [`TRIAL_DRAIN_NS`] (RFC 2544 §23); `None` leaves it
    /// to whoever runs the step.
    pub drain_ns: Option<u64>,
}

/// Flows of one step before resolution: (index into the point's flows, offset).
pub(crate) type StepFlows = Vec<(usize, u64)>;

/// Expands a block into steps at one sweep point; the error is (line, message).
pub(crate) fn expand(b: &Block, p: &SweepPoint) -> Result<Vec<StepFlows>, (usize, String)> {
    let once: Vec<StepFlows> = match b.kind {
        BlockKind::Serial => {
            let mut out = Vec::new();
            for it in &b.items {
                out.extend(expand_item(it, p, b.line)?);
                if out.len() > MAX_STEPS {
                    return Err((b.line, format!("the plan has more than {MAX_STEPS} steps")));
                }
            }
            out
        }
        BlockKind::Parallel => {
            let mut merged = Vec::new();
            for it in &b.items {
                let steps = expand_item(it, p, b.line)?;
                if steps.len() == 1 {
                    merged.extend(steps.into_iter().flatten());
                } else {
                    merged.extend(timeline(&steps, p, it, b.line)?);
                }
            }
            vec![merged]
        }
    };
    let mut once = once;
    if let Some(first) = once.first_mut() {
        for f in first.iter_mut() {
            f.1 = f.1.saturating_add(b.start_ns);
        }
    }
    let n = (b.repeat as usize).checked_mul(once.len());
    if n.is_none_or(|n| n > MAX_STEPS) {
        return Err((b.line, format!("the plan has more than {MAX_STEPS} steps")));
    }
    let mut out = Vec::with_capacity(n.unwrap_or(0));
    for _ in 0..b.repeat {
        out.extend(once.iter().cloned());
    }
    Ok(out)
}

fn expand_item(it: &Item, p: &SweepPoint, line: usize) -> Result<Vec<StepFlows>, (usize, String)> {
    match it {
        Item::Flow(n) => match p.flows.iter().position(|f| &f.name == n) {
            Some(i) => Ok(vec![vec![(i, p.flows[i].start_ns)]]),
            None => Err((line, format!("unknown flow '{n}'"))),
        },
        Item::Block(b) => expand(b, p),
    }
}

/// Lays several steps out one after another inside a single step, each starting when the
/// previous one's longest flow ends: a serial block inside a parallel one. Needs every
/// flow's length in advance.
fn timeline(
    steps: &[StepFlows],
    p: &SweepPoint,
    it: &Item,
    line: usize,
) -> Result<StepFlows, (usize, String)> {
    let at = match it {
        Item::Block(b) => b.line,
        Item::Flow(_) => line,
    };
    let mut t: u64 = 0;
    let mut out = Vec::new();
    for s in steps {
        let mut end = t;
        for &(i, off) in s {
            let f = &p.flows[i];
            let len = f.known_length_ns().ok_or_else(|| {
                (
                    at,
                    format!(
                        "a sequence inside a parallel block needs each flow's length in advance, \
                         and flow '{}' has none (give it a duration, or a count with a constant rate)",
                        f.name
                    ),
                )
            })?;
            out.push((i, t.saturating_add(off)));
            end = end.max(t.saturating_add(off).saturating_add(len));
        }
        t = end;
    }
    Ok(out)
}

fn resolve(p: &SweepPoint, f: &Flow, offset: u64, seed: u64) -> ResolvedFlow {
    let addr = |h: &str| p.host(h).map(|h| h.address.clone()).unwrap_or_default();
    let (client, server) = (addr(&f.from), addr(&f.to));
    let (sender, receiver) = match f.spec.direction {
        Direction::Reverse => (server.clone(), client.clone()),
        Direction::Oneway | Direction::Loopback => (client.clone(), server.clone()),
    };
    ResolvedFlow {
        name: f.name.clone(),
        from: f.from.clone(),
        to: f.to.clone(),
        client_agent: client,
        server_agent: server,
        sender_agent: sender,
        receiver_agent: receiver,
        start_offset_ns: offset,
        spec: TestSpec {
            seed,
            ..f.spec.clone()
        },
    }
}

/// Every step of the experiment, in order: for each sweep point, `repeat` runs of the plan.
/// Each step's seed is the experiment's seed plus the step's index. A search replaces the
/// plan: a file with one has no plan steps, only the search's trials ([`trial_step`]).
pub fn plan(e: &Experiment) -> Vec<Step> {
    let mut steps = Vec::new();
    if e.search.is_some() {
        return steps;
    }
    for (pi, p) in e.points.iter().enumerate() {
        // `load` expanded every point already; an error here cannot happen for a loaded file.
        let Ok(blocks) = expand(&e.plan, p) else {
            continue;
        };
        for rep in 0..e.repeat {
            for sf in &blocks {
                let index = steps.len();
                let seed = e.seed.wrapping_add(index as u64);
                steps.push(Step {
                    index,
                    point: pi,
                    labels: p.labels.clone(),
                    repetition: rep,
                    flows: sf
                        .iter()
                        .map(|&(i, off)| resolve(p, &p.flows[i], off, seed))
                        .collect(),
                    drain_ns: None,
                });
            }
        }
    }
    steps
}

/// A search's state machine, chosen by the file's `[search] kind`.
#[derive(Debug, Clone)]
pub enum SearchMachine {
    Throughput(Rfc2544Throughput),
    BackToBack(BackToBack),
    LossVsLoad(LossVsLoad),
    OfferedLoad(OfferedLoad),
    BurstSize(BurstSize),
}

impl SearchSpec {
    /// A fresh machine for this search over `e`'s flows.
    pub fn machine(&self, e: &Experiment) -> Result<SearchMachine, SearchError> {
        let flows: Vec<&Flow> = match e.points.first() {
            Some(p) => self.flows.iter().filter_map(|n| p.flow(n)).collect(),
            None => Vec::new(),
        };
        Ok(match &self.kind {
            SearchKind::Rfc2544Throughput {
                min_bps,
                max_bps,
                resolution_bps,
                loss_tolerance,
            } => SearchMachine::Throughput(Rfc2544Throughput::new(
                *min_bps,
                *max_bps,
                *resolution_bps,
                *loss_tolerance,
                self.trial_ns.unwrap_or(RFC2544_TRIAL_NS),
            )?),
            SearchKind::BackToBack {
                line_rate_bps,
                min_packets,
                max_packets,
                resolution_packets,
                repeat,
            } => SearchMachine::BackToBack(BackToBack::new(
                *line_rate_bps,
                *min_packets,
                *max_packets,
                *resolution_packets,
                *repeat,
            )?),
            SearchKind::LossVsLoad { max_bps, step_pct } => {
                SearchMachine::LossVsLoad(LossVsLoad::new(*max_bps, *step_pct)?)
            }
            SearchKind::OfferedLoad { loads_pct } => SearchMachine::OfferedLoad(OfferedLoad::new(
                flows.iter().map(|f| f.spec.rate_bps.unwrap_or(0)).collect(),
                loads_pct,
            )?),
            SearchKind::BurstSize {
                rate_bps,
                peak_bps,
                capacity_bps,
                bursts_bytes,
            } => {
                let size = flows.first().map_or(1000, |f| f.spec.size);
                SearchMachine::BurstSize(BurstSize::new(
                    *rate_bps,
                    size,
                    *peak_bps,
                    *capacity_bps,
                    bursts_bytes,
                )?)
            }
        })
    }
}

impl SearchMachine {
    pub fn next_trial(&mut self) -> Option<Trial> {
        match self {
            SearchMachine::Throughput(s) => s.next_trial(),
            SearchMachine::BackToBack(s) => s.next_trial(),
            SearchMachine::LossVsLoad(s) => s.next_trial(),
            SearchMachine::OfferedLoad(s) => s.next_trial(),
            SearchMachine::BurstSize(s) => s.next_trial(),
        }
    }

    /// Records the pending trial's aggregate loss ratio and output throughput.
    pub fn record(
        &mut self,
        trial: &Trial,
        loss_ratio: f64,
        throughput_bps: f64,
    ) -> Result<(), SearchError> {
        let burst = trial.burst_packets.unwrap_or(0);
        match self {
            SearchMachine::Throughput(s) => s.record(trial.rate_bps, loss_ratio, throughput_bps),
            SearchMachine::BackToBack(s) => s.record(burst, loss_ratio),
            SearchMachine::LossVsLoad(s) => s.record(trial.rate_bps, loss_ratio, throughput_bps),
            SearchMachine::OfferedLoad(s) => s.record(trial.rate_bps, loss_ratio, throughput_bps),
            SearchMachine::BurstSize(s) => s.record(burst, loss_ratio, throughput_bps),
        }
    }
}

/// The step that runs `trial` of `e`'s search: the search's flows, together, each changed as
/// the trial says, for the trial's length (the search's `trial` unless the trial sets one).
/// `index` numbers the trial (it seeds the traffic like a plan step); receivers wait
/// [`TRIAL_DRAIN_NS`] after the last packet before counting loss.
pub fn trial_step(e: &Experiment, trial: &Trial, index: usize) -> Option<Step> {
    let search = e.search.as_ref()?;
    let p = e.points.first()?;
    let seed = e.seed.wrapping_add(index as u64);
    let mut flows = Vec::new();
    for name in &search.flows {
        let mut f = p.flow(name)?.clone();
        let spec = &mut f.spec;
        if let Some(t) = trial.duration_ns.or(search.trial_ns) {
            spec.duration_ns = Some(t);
            spec.count = None;
        }
        match &search.kind {
            SearchKind::Rfc2544Throughput { .. } | SearchKind::LossVsLoad { .. } => {
                spec.rate_bps = Some(trial.rate_bps);
            }
            SearchKind::OfferedLoad { .. } => {
                let pct = trial.load_pct.unwrap_or(100.0);
                let full = spec.rate_bps.unwrap_or(0) as f64;
                spec.rate_bps = Some(((full * pct / 100.0).round() as u64).max(1));
            }
            SearchKind::BackToBack { .. } => {
                // One burst: `n` packets paced at line rate, i.e. back to back.
                spec.rate_bps = Some(trial.rate_bps);
                spec.count = trial.burst_packets;
                spec.duration_ns = None;
                spec.traffic = None;
            }
            SearchKind::BurstSize { peak_bps, .. } => {
                let n = trial.burst_packets.unwrap_or(1);
                let every = trial.burst_every_ns.unwrap_or(1_000_000_000);
                let text = format!(
                    "burst:n={n},every={every}ns,size={},peak={peak_bps}",
                    spec.size
                );
                spec.traffic = TrafficSpec::parse(&text).ok();
                spec.rate_bps = Some(trial.rate_bps);
            }
        }
        let off = f.start_ns;
        flows.push(resolve(p, &f, off, seed));
    }
    Some(Step {
        index,
        point: 0,
        labels: Vec::new(),
        repetition: 0,
        flows,
        drain_ns: Some(TRIAL_DRAIN_NS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::load;
    use flowlab_spec::Protocol;

    const FIVE: &str = include_str!("../../../examples/experiments/five-pairs.toml");

    #[test]
    fn five_pairs_alone_then_together() {
        let e = load(FIVE).unwrap();
        let steps = plan(&e);
        // (5 alone + 1 together) per repetition, 3 repetitions.
        assert_eq!(steps.len(), 18);
        for (i, s) in steps.iter().enumerate() {
            assert_eq!(s.index, i);
            assert_eq!(s.repetition as usize, i / 6);
            assert!(s.flows.iter().all(|f| f.spec.seed == 42 + i as u64));
        }
        assert_eq!(steps[0].flows.len(), 1);
        assert_eq!(steps[0].flows[0].name, "p1");
        assert_eq!(steps[5].flows.len(), 5);
        let p3 = &steps[2].flows[0];
        assert_eq!(p3.name, "p3");
        assert_eq!(p3.client_agent, "10.77.3.1:9470");
        assert_eq!(p3.server_agent, "10.77.8.1:9470");
        // Reverse: the serving agent's host sends.
        assert_eq!(p3.sender_agent, "10.77.8.1:9470");
        assert_eq!(p3.receiver_agent, "10.77.3.1:9470");
        assert_eq!(p3.spec.direction, Direction::Reverse);
        assert_eq!(p3.spec.protocol, Protocol::Tcp);
        assert_eq!(p3.spec.rate_bps, None);
        assert_eq!(p3.spec.size, 65536);
        assert_eq!(p3.spec.duration_ns, Some(20_000_000_000));
        assert!(p3.spec.client_udp_ports.is_empty());
    }

    const TWO: &str = r#"
[experiment]
name = "two"
seed = 1
[[host]]
name = "a"
address = "a.lab"
[[host]]
name = "b"
address = "b.lab:1234"
[[flow]]
name = "x"
from = "a"
to = "b"
duration = "2s"
start = "500ms"
[[flow]]
name = "y"
from = "b"
to = "a"
rate = "8k"
size = "1000"
count = 10
"#;

    #[test]
    fn serial_inside_parallel_becomes_offsets() {
        let text = format!(
            "{TWO}\n[plan]\nparallel = [\"x\", {{ serial = [\"y\", \"x\"], start = \"1s\" }}]\n"
        );
        let e = load(&text).unwrap();
        let steps = plan(&e);
        assert_eq!(steps.len(), 1);
        let offs: Vec<(&str, u64)> = steps[0]
            .flows
            .iter()
            .map(|f| (f.name.as_str(), f.start_offset_ns))
            .collect();
        // y: 10 packets of 8000 bits at 8 kbit/s = 10 s, so x follows at 1 s + 10 s + 0.5 s.
        assert_eq!(
            offs,
            vec![
                ("x", 500_000_000),
                ("y", 1_000_000_000),
                ("x", 11_500_000_000)
            ]
        );
        // A flow of unknown length cannot be laid out.
        let unknown = text.replace("count = 10", "count = 10\ntraffic = \"poisson:pps=10\"");
        let err = load(&unknown).unwrap_err();
        assert!(err.message.contains("length in advance"), "{err}");
    }

    #[test]
    fn repeats_sweeps_and_block_start() {
        let text = format!(
            "{TWO}\n[plan]\nserial = [\"x\", \"y\"]\nrepeat = 2\nstart = \"3s\"\n\
             [[sweep]]\nparam = \"flow.x.rate\"\nvalues = [\"1M\", \"2M\"]\n"
        );
        let e = load(&text).unwrap();
        let steps = plan(&e);
        assert_eq!(steps.len(), 8);
        assert_eq!(steps[0].flows[0].start_offset_ns, 3_500_000_000);
        assert_eq!(steps[1].flows[0].start_offset_ns, 0);
        assert_eq!(steps[2].flows[0].start_offset_ns, 3_500_000_000);
        assert_eq!(steps[4].point, 1);
        assert_eq!(steps[4].flows[0].spec.rate_bps, Some(2_000_000));
        assert_eq!(steps[7].flows[0].spec.seed, 8);
        assert_eq!(steps[0].flows[0].server_agent, "b.lab:1234");
    }

    fn run_search(text: &str, net: impl Fn(&Step) -> (f64, f64)) -> SearchMachine {
        let e = load(text).unwrap();
        let mut m = e.search.as_ref().unwrap().machine(&e).unwrap();
        let mut i = 0;
        while let Some(t) = m.next_trial() {
            let step = trial_step(&e, &t, i).unwrap();
            let (loss, tput) = net(&step);
            m.record(&t, loss, tput).unwrap();
            i += 1;
            assert!(i < 1000);
        }
        m
    }

    #[test]
    fn three_sources_search_drives_all_flows() {
        let text = include_str!("../../../examples/experiments/three-sources.toml");
        let m = run_search(text, |s| {
            assert_eq!(s.flows.len(), 3);
            let offered: u64 = s.flows.iter().map(|f| f.spec.rate_bps.unwrap()).sum();
            let cap = 30_000_000.0;
            let o = offered as f64;
            if o <= cap {
                (0.0, o)
            } else {
                (1.0 - cap / o, cap)
            }
        });
        let SearchMachine::OfferedLoad(o) = m else {
            panic!("not offered-load")
        };
        let met = o.metrics();
        assert_eq!(met.points.len(), 10);
        assert_eq!(met.lossless_offered_bps, Some(30_000_000));
        assert_eq!(met.full_load_bps, Some(30e6));
    }

    #[test]
    fn burst_size_search_builds_burst_traffic() {
        let text = include_str!("../../../examples/experiments/burst-size.toml");
        let m = run_search(text, |s| {
            let f = &s.flows[0];
            let Some(TrafficSpec::Burst { n, peak_bps, .. }) = &f.spec.traffic else {
                panic!("no burst traffic: {:?}", f.spec.traffic)
            };
            assert_eq!(*peak_bps, Some(155_000_000));
            let bytes = *n as f64 * 1000.0;
            let queue = bytes * (1.0 - 45.0 / 155.0);
            if queue <= 35_000.0 {
                (0.0, 35e6)
            } else {
                ((queue - 35_000.0) / bytes, 30e6)
            }
        });
        let SearchMachine::BurstSize(b) = m else {
            panic!("not burst-size")
        };
        let est = b.estimate();
        assert!(est.buffer_bytes.unwrap() <= 35_000.0);
        assert!(est.buffer_upper_bytes.unwrap() > 35_000.0);
    }

    #[test]
    fn rfc2544_search_through_the_file() {
        let text = format!(
            "{TWO}\n[search]\nkind = \"rfc2544-throughput\"\nflow = \"x\"\nmin = \"1M\"\n\
             max = \"1G\"\nresolution = \"1M\"\ntrial = \"2s\"\n"
        );
        let lengths = std::cell::RefCell::new(Vec::new());
        let m = run_search(&text, |s| {
            lengths
                .borrow_mut()
                .push(s.flows[0].spec.duration_ns.unwrap());
            assert_eq!(s.drain_ns, Some(TRIAL_DRAIN_NS), "RFC 2544 §23's wait");
            let r = s.flows[0].spec.rate_bps.unwrap();
            if r <= 123_456_789 {
                (0.0, r as f64)
            } else {
                (0.1, 123e6)
            }
        });
        let SearchMachine::Throughput(t) = m else {
            panic!("not throughput")
        };
        let found = t.result().rate_bps.unwrap();
        assert!(found <= 123_456_789 && 123_456_789 - found <= 1_000_000);
        let lengths = lengths.into_inner();
        let (last, bisection) = lengths.split_last().unwrap();
        assert!(bisection.iter().all(|&l| l == 2_000_000_000), "{lengths:?}");
        assert_eq!(
            *last, 4_000_000_000,
            "the result re-run at twice the length"
        );
    }

    /// Issue 12: the plan's steps ran before the search (a stray step stored beside trial 0).
    #[test]
    fn a_search_replaces_the_plan_and_trials_last_60_s_by_default() {
        let text = format!(
            "{TWO}\n[plan]\nserial = [\"x\", \"y\"]\n[search]\nkind = \"rfc2544-throughput\"\n\
             flow = \"x\"\nmax = \"1G\"\n"
        );
        let e = load(&text).unwrap();
        assert_eq!(plan(&e), [], "no plan step runs beside the search");
        let mut m = e.search.as_ref().unwrap().machine(&e).unwrap();
        let step = trial_step(&e, &m.next_trial().unwrap(), 0).unwrap();
        assert_eq!(step.flows[0].spec.duration_ns, Some(RFC2544_TRIAL_NS));
        let without = load(&format!("{TWO}\n[plan]\nserial = [\"x\", \"y\"]\n")).unwrap();
        assert_eq!(plan(&without).len(), 2);
        assert!(plan(&without).iter().all(|s| s.drain_ns.is_none()));
    }
}
