//! Caps on a scenario's work, checked at load: the simulator moves every packet and cell one
//! event at a time, so a typo (`rate = "100G"` on an OC-3c, a sweep of 200,000 values) would
//! otherwise run for hours and queue gigabytes. docs/simulation.md ("Limits") lists them.

use crate::scenario::{FlowSpec, LinkSpec, Model, Protocol, ScenarioError, Variant};
use crate::sender::{offered, Offered};

/// Most values of a `[sweep]`: each is a whole run (the papers' sweeps have ten).
pub const MAX_SWEEP_VALUES: usize = 1_000;
/// Most `[[node]]`, `[[link]]`, `[[flow]]` and `[[background]]` tables, each.
pub const MAX_TABLES: usize = 1_000;
/// Longest simulated time of one run, `duration` plus `drain`: the papers run for seconds to
/// a minute.
pub const MAX_SIM_NS: u64 = 24 * 3600 * 1_000_000_000;
/// Most a flow (or the flows sharing it) may offer a first link, as a multiple of its rate.
/// The overloads the papers study are around 2×; far beyond, every packet is dropped at the
/// sender and the run only measures how long the simulator takes to drop them.
pub const MAX_OVERLOAD: u64 = 10;
/// Most packets (cells, for background sources) a scenario may simulate over all its runs:
/// minutes of simulating at most (tens of millions of cell events a second), and a bound on
/// what queues and in-flight records can hold.
pub const MAX_PACKETS: u64 = 200_000_000;
/// Emissions of a run's traffic models run ahead to estimate their load, shared by its model
/// flows (at least 100 a sub-flow), the rest extrapolated: checked at every sweep point, so
/// the estimate is cheap and only right within these limits' margins.
pub const PROBE_EMISSIONS: u64 = 20_000;

/// What a UDP flow (a constant rate or a traffic model, run ahead) offers in one run.
fn udp_load(m: &Model, index: usize, f: &FlowSpec) -> Option<Offered> {
    let Protocol::Udp(s) = &f.protocol else {
        return None;
    };
    let active_ns = f.stop_ns.saturating_sub(f.start_ns);
    let models = m
        .flows
        .iter()
        .filter(|g| matches!(&g.protocol, Protocol::Udp(s) if s.traffic.is_some()))
        .count() as u64;
    let probe = PROBE_EMISSIONS / models.max(1);
    Some(offered(
        s,
        s.seed_for(m.seed, index),
        active_ns,
        f.count,
        probe,
    ))
}

/// What each flow offers its first link in bit/s; `None` for TCP, which its window paces.
fn offered_bps(m: &Model) -> Vec<Option<u64>> {
    let one = |(i, f): (usize, &FlowSpec)| match f.protocol {
        Protocol::Udp(_) => udp_load(m, i, f).map(|o| o.wire_bps),
        Protocol::Ping { interval_ns } => Some(
            (u128::from(f.size) * 8 * 1_000_000_000 / u128::from(interval_ns.max(1)))
                .try_into()
                .unwrap_or(u64::MAX),
        ),
        Protocol::Tcp => None,
    };
    m.flows.iter().enumerate().map(one).collect()
}

/// The index of the link `f` crosses first.
fn first_link(links: &[LinkSpec], f: &FlowSpec) -> Option<usize> {
    let (a, b) = (*f.path.first()?, *f.path.get(1)?);
    links
        .iter()
        .position(|l| (l.a, l.b) == (a, b) || (l.a, l.b) == (b, a))
}

/// Refuses a flow, or flows leaving a host over the same link, offering more than
/// [`MAX_OVERLOAD`] times the link's rate: an impossible load, not an overload.
pub(crate) fn check_overload(m: &Model) -> Result<(), ScenarioError> {
    let offered = offered_bps(m);
    for (i, f) in m.flows.iter().enumerate() {
        let (Some(rate), Some(l)) = (offered[i], first_link(&m.links, f)) else {
            continue;
        };
        // A point-to-multipoint leaf's packets are its root's.
        if f.replica_of.is_some() {
            continue;
        }
        let link = &m.links[l];
        let cap = link.rate_bps.saturating_mul(MAX_OVERLOAD);
        if rate > cap {
            return Err(overload(
                f,
                &format!("flow {} offers {rate} bit/s", f.name),
                link,
            ));
        }
        // The flows before this one leaving the same host over the same link, and this one.
        let shared: Vec<(usize, &FlowSpec)> = m.flows[..=i]
            .iter()
            .enumerate()
            .filter(|(_, g)| g.replica_of.is_none())
            .filter(|(_, g)| g.path.first() == f.path.first() && first_link(&m.links, g) == Some(l))
            .collect();
        let sum = shared
            .iter()
            .filter_map(|(j, _)| offered[*j])
            .fold(0u64, u64::saturating_add);
        if sum > cap {
            let names: Vec<&str> = shared.iter().map(|(_, g)| g.name.as_str()).collect();
            let what = format!("flows {} offer {sum} bit/s together", names.join(", "));
            return Err(overload(f, &what, link));
        }
    }
    for b in &m.backgrounds {
        let link = &m.links[b.link];
        if b.cells_per_second_num > link.rate_bps.saturating_mul(MAX_OVERLOAD) {
            let what = format!(
                "background {} offers {} bit/s",
                b.name, b.cells_per_second_num
            );
            return Err(ScenarioError::new(Some(b.line), overload_text(&what, link)));
        }
    }
    Ok(())
}

fn overload(f: &FlowSpec, what: &str, link: &LinkSpec) -> ScenarioError {
    ScenarioError::new(Some(f.rate_line), overload_text(what, link))
}

fn overload_text(what: &str, link: &LinkSpec) -> String {
    format!(
        "{what}, more than {MAX_OVERLOAD}× the {} bit/s of link {}: an impossible load, not \
         an overload (lower the rate)",
        link.rate_bps, link.name
    )
}

/// About how many packets flow `index` sends, and their answers (echoes, ACKs), in one run.
fn flow_packets(m: &Model, index: usize, f: &FlowSpec) -> u64 {
    let active_ns = f.stop_ns.saturating_sub(f.start_ns);
    let bits = u128::from(f.size.max(1)) * 8;
    let per_s = |bps: u64| u128::from(bps) * u128::from(active_ns) / bits / 1_000_000_000;
    let (sent, answers) = match &f.protocol {
        Protocol::Udp(s) => {
            let n = udp_load(m, index, f).map_or(0, |o| u128::from(o.packets));
            (n, if s.echo { n } else { 0 })
        }
        Protocol::Ping { interval_ns } => {
            let n = u128::from(active_ns / (*interval_ns).max(1)) + 1;
            (n, n)
        }
        Protocol::Tcp => {
            let line = first_link(&m.links, f).map_or(0, |l| m.links[l].rate_bps);
            let n = per_s(line);
            let n = f
                .tcp
                .bytes
                .map_or(n, |b| n.min(u128::from(b) / u128::from(f.size.max(1)) + 1));
            (n, n)
        }
    };
    let sent = match &f.protocol {
        // A count is per sub-flow, and `offered` holds to it.
        Protocol::Udp(_) => sent,
        _ => f.count.map_or(sent, |c| sent.min(u128::from(c))),
    };
    u64::try_from(sent + answers.min(sent)).unwrap_or(u64::MAX)
}

/// About how many cells the background sources inject in one run, recirculations included.
fn background_cells(m: &Model) -> u64 {
    m.backgrounds
        .iter()
        .map(|b| {
            let active_ns = b.stop_ns.saturating_sub(b.start_ns);
            let cells =
                u128::from(b.cells_per_second_num) * u128::from(active_ns) / 424 / 1_000_000_000;
            u64::try_from(cells * b.passes as u128).unwrap_or(u64::MAX)
        })
        .fold(0, u64::saturating_add)
}

/// Refuses a scenario whose runs together would simulate more than [`MAX_PACKETS`] packets,
/// naming the flow that sends the most.
pub(crate) fn check_packet_budget(variants: &[Variant]) -> Result<(), ScenarioError> {
    let mut total: u64 = 0;
    let mut heaviest: Option<(&FlowSpec, u64)> = None;
    for v in variants {
        let m = &v.model;
        total = total.saturating_add(background_cells(m));
        for (i, f) in m.flows.iter().enumerate() {
            let n = flow_packets(m, i, f);
            total = total.saturating_add(n);
            if heaviest.is_none_or(|(_, h)| n > h) {
                heaviest = Some((f, n));
            }
        }
    }
    if total <= MAX_PACKETS {
        return Ok(());
    }
    let (line, who) = match heaviest {
        Some((f, n)) => (Some(f.line), format!(" (flow {}: {n} in one run)", f.name)),
        None => (None, String::new()),
    };
    Err(ScenarioError::new(
        line,
        format!(
            "the scenario would simulate about {total} packets{who}, more than the limit of \
             {MAX_PACKETS}: shorten duration, lower rates or sweep fewer values"
        ),
    ))
}
