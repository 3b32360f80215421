//! Background sources beyond single cells: a traffic model (`traffic = ...`, any model a
//! flow takes, its packets sent as AAL5 frames into the loaded port), and `pattern = "ttcp"`,
//! a bulk TCP transfer between two hosts as ttcp makes one.

use flowlab_atm::ServiceCategory;
use flowlab_spanned::{Item, Reader};

use super::{flow_path, flow_size, flow_tcp, stop_ns, FlowSpec, Net, Protocol, ScenarioError};
use crate::limits::PROBE_EMISSIONS;
use crate::sender::{offered, parse_traffic, SendSpec};

/// The model and the cell bit rate it offers over `active_ns` (estimated ahead, with the
/// AAL5 cell tax of 53/48 and no padding: for the work limits only), when `traffic` is set.
pub(super) fn read_model(
    b: &Reader,
    active_ns: u64,
) -> Result<Option<(SendSpec, u64)>, ScenarioError> {
    let Some(item) = b.get("traffic") else {
        return Ok(None);
    };
    for key in ["pattern", "cells_per_frame"] {
        if let Some(other) = b.get(key) {
            let msg = "a traffic model sets its own (each packet is one AAL5 frame)";
            return Err(b.error(other, key, msg));
        }
    }
    let model = traffic(b, item)?;
    let load = offered(
        &model,
        model.seed_for(1, 0),
        active_ns,
        None,
        PROBE_EMISSIONS,
    );
    Ok(Some((model, load.wire_bps.saturating_mul(53) / 48)))
}

fn traffic(b: &Reader, item: &Item) -> Result<SendSpec, ScenarioError> {
    let text = b.required_string("traffic")?;
    parse_traffic(text)
        .and_then(SendSpec::model)
        .map_err(|m| b.error(item, "traffic", m))
}

/// The keys of a ttcp background: where it runs, when, and its TCP settings.
const TTCP_KEYS: &[&str] = &[
    "name",
    "from",
    "to",
    "path",
    "pattern",
    "start",
    "duration",
    "window",
    "send_buffer",
    "mss",
    "bytes",
];

/// Whether a `[[background]]` table is a ttcp transfer (`pattern = "ttcp"`).
pub(super) fn is_ttcp(b: &Reader) -> Result<bool, ScenarioError> {
    Ok(b.string("pattern")? == Some("ttcp"))
}

/// A ttcp background: a bulk TCP transfer (the flows' Reno model, its defaults: 64 KiB
/// window, MSS of the path MTU) from host `from` to host `to`, loading every link on its
/// path and reported among the flows under its name.
pub(super) fn ttcp_flow(b: &Reader, net: &Net, run_ns: u64) -> Result<FlowSpec, ScenarioError> {
    let b = b.named("background");
    b.only(TTCP_KEYS)?;
    let name = b.required_string("name")?.to_string();
    let b = b.named(format!("background {name}"));
    let path = flow_path(&b, &name, net)?;
    let size = flow_size(&b, &Protocol::Tcp, &path, net)?;
    let start_ns = b.duration_ns("start")?.unwrap_or(0);
    Ok(FlowSpec {
        path,
        protocol: Protocol::Tcp,
        size,
        count: None,
        start_ns,
        stop_ns: stop_ns(&b, start_ns, run_ns)?,
        start_spread_ns: None,
        service: ServiceCategory::Ubr,
        contract: None,
        police: None,
        shape: false,
        vc_limits: None,
        dscp: 0,
        tcp: flow_tcp(&b, size)?,
        native: false,
        socket: None,
        metered_headers: 0,
        replica_of: None,
        line: b.line(),
        rate_line: b.line(),
        name,
    })
}
