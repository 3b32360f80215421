//! A background source's traffic model (`traffic = ...`): any model a flow takes, its
//! packets sent as AAL5 frames into the loaded port.

use flowlab_spanned::{Item, Reader};

use super::ScenarioError;
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
