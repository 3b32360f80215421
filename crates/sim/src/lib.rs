//! flowlab's deterministic network simulator.
//!
//! A scenario file (TOML) describes hosts, ATM switches, IP routers, links and flows; [`load`]
//! validates all of it (with line numbers), [`run`] drives the sans-IO models of
//! `flowlab-atm` (cells, AAL5 cell counts, GCRA policing and shaping, switch output ports) and
//! `flowlab-qos` (classifier, schedulers, Reno TCP) with a virtual clock, and feeds the same
//! `flowlab-results` meters as a real test, so simulated and measured flows report the same
//! metrics. UDP flows send what the real engine's `Pacer` yields for the same traffic model
//! and seed, so every model and preset runs here. A network file ([`SimNetwork`]) describes
//! only nodes and links, and [`run_step`] runs an experiment step's flows (their `TestSpec`s)
//! on it, reporting each end as a real test does (`flowlab run --sim`). Nothing here reads a
//! clock or does I/O: the caller reads the file and passes text.
//! See docs/simulation.md for the format and what is modelled.

#![forbid(unsafe_code)]

#[cfg(test)]
mod accounting_tests;
mod endsys;
mod engine;
mod frag;
pub mod limits;
mod network;
pub mod report;
mod scenario;
mod sender;

pub use network::{run_step, NetworkLink, SimError, SimFlow, SimFlowResult, SimNetwork};
pub use report::{
    render_human, HostReport, RunReport, SimReport, SocketBufferReport, SweepPoint, SCHEMA_VERSION,
};
pub use scenario::{load, Scenario, ScenarioError};

/// Runs every run of the scenario (one per sweep value) and reports them. The same scenario
/// and seed always give the same report, bit for bit.
pub fn run(scenario: &Scenario, seed_override: Option<u64>) -> SimReport {
    let mut runs = Vec::new();
    let mut description = String::new();
    for v in &scenario.variants {
        let seed = seed_override.unwrap_or(v.model.seed);
        description.clone_from(&v.model.description);
        let model = v.model.with_spread_starts(seed);
        let out = engine::Sim::new(&model, seed).run();
        runs.push(RunReport {
            sweep: v.sweep.as_ref().map(|(param, value)| SweepPoint {
                param: param.clone(),
                value: value.clone(),
            }),
            seed,
            duration_ns: v.model.duration_ns,
            events: out.events,
            cells_transmitted: out.cells,
            flows: out.flows,
            ports: out.ports,
            backgrounds: out.backgrounds,
            hosts: out.hosts,
        });
    }
    SimReport {
        schema_version: SCHEMA_VERSION,
        description,
        runs,
    }
}

/// The report as JSON (every number is finite, so this cannot fail in practice).
pub fn to_json(report: &SimReport) -> String {
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
