//! A simulated network as a [`StepRunner`] (`flowlab run FILE --sim NETWORK.toml`): each
//! step's flows run together in the simulator (`flowlab_sim::network`) in virtual time, and
//! each flow's two ends become the `TestResult` a real run's client makes of its own and its
//! agent's reports, so simulated runs are stored, searched and reported as real ones. And
//! a scenario file run alone ([`run_scenario`], `flowlab sim FILE`).

use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, Context};
use flowlab_control::{Origin, TestResult};
use flowlab_experiment::{Experiment, ResolvedFlow, Step};
use flowlab_sim::{SimFlow, SimFlowResult, SimNetwork, SimReport};
use sha2::{Digest, Sha256};

use crate::experiment::StepRunner;
use crate::outcome::{ClockOffset, Clocks, NetworkKind};

/// Runs the scenario file at `path`; `seed` and the simulated `duration` override the
/// file's.
pub fn run_scenario(
    path: &Path,
    seed: Option<u64>,
    duration: Option<Duration>,
) -> anyhow::Result<SimReport> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {name}"))?;
    let mut scenario = flowlab_sim::load(&text).map_err(|e| anyhow!("{}", e.with_file(&name)))?;
    if let Some(d) = duration {
        if d.is_zero() {
            anyhow::bail!("invalid duration: must be above 0 s");
        }
        scenario.set_duration_ns(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }
    Ok(flowlab_sim::run(&scenario, seed))
}

/// A network file loaded for one experiment.
pub struct SimulatedNetwork {
    network: SimNetwork,
    kind: NetworkKind,
    /// Every host's agent on the one virtual clock: offset 0, known exactly, so one-way
    /// delays are the simulated ones.
    clocks: Clocks,
}

impl SimulatedNetwork {
    /// Reads the network file at `path` for `experiment` (see [`SimulatedNetwork::new`]).
    pub fn for_experiment(path: &Path, experiment: &Experiment) -> anyhow::Result<Self> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {file}"))?;
        SimulatedNetwork::new(&file, &text, experiment)
    }

    /// The network file `file` with `text`, for `experiment`: every host the experiment
    /// declares must run on one of the network's host nodes.
    pub fn new(file: &str, text: &str, experiment: &Experiment) -> anyhow::Result<Self> {
        let network = SimNetwork::load(text).map_err(|e| anyhow!("{}", e.with_file(file)))?;
        let exact = ClockOffset::fixed(0, 0);
        let mut clocks = Clocks::new();
        for host in experiment.points.iter().flat_map(|p| &p.hosts) {
            network
                .check_host(&host.name)
                .map_err(|e| anyhow!("{file}: {e}"))?;
            clocks.insert(host.address.clone(), exact);
        }
        let kind = NetworkKind::Sim {
            file: file.to_string(),
            name: network.name().to_string(),
            sha256: sha256_hex(text),
        };
        Ok(SimulatedNetwork {
            network,
            kind,
            clocks,
        })
    }
}

impl StepRunner for SimulatedNetwork {
    fn network(&self) -> &NetworkKind {
        &self.kind
    }

    fn clocks(&self) -> &Clocks {
        &self.clocks
    }

    /// The step's flows together, from their offsets. The simulator runs a step whole, so
    /// a flow it refuses fails every flow of the step (the error names that flow).
    fn run_step(&mut self, step: &Step) -> Vec<Result<TestResult, String>> {
        let started_at_ns = flowlab_sys::clock::realtime_ns();
        let flows: Vec<SimFlow> = step.flows.iter().map(sim_flow).collect();
        match flowlab_sim::run_step(&self.network, &flows) {
            Ok(results) => results
                .into_iter()
                .zip(&step.flows)
                .map(|(sides, f)| Ok(test_result(f, sides, started_at_ns)))
                .collect(),
            Err(e) => vec![Err(format!("simulation: {e}")); step.flows.len()],
        }
    }
}

fn sim_flow(f: &ResolvedFlow) -> SimFlow {
    SimFlow {
        name: f.name.clone(),
        from: f.from.clone(),
        to: f.to.clone(),
        start_offset_ns: f.start_offset_ns,
        spec: f.spec.clone(),
    }
}

/// The result document a real client writes, from the simulated ends' reports: the agent is
/// named as the experiment names it (`target`) and answers from its node (`agent_address`);
/// the simulated packets carry IPv4 headers.
fn test_result(flow: &ResolvedFlow, sides: SimFlowResult, step_started_ns: u64) -> TestResult {
    let SimFlowResult { client, agent, .. } = sides;
    let origin = Origin {
        target: flow.server_agent.clone(),
        agent_address: agent.host.clone(),
        ipv6: false,
        started_at_ns: step_started_ns + flow.start_offset_ns,
    };
    TestResult::new(flow.spec.clone(), origin, Some(client), Some(agent))
}

/// The SHA-256 of `text`, in hex.
fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests;
