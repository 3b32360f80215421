//! What follows from a traffic model when the flags do not say, beside the defaults of
//! [`TestSpec::new`](flowlab_spec::TestSpec::new): its protocol and its flows.

use flowlab_spec::Protocol;
use flowlab_traffic::TrafficSpec;

/// The protocol of a traffic model: TCP for a TCP application's (rr, crr, the TCP presets).
pub fn protocol(traffic: Option<&TrafficSpec>) -> Protocol {
    match traffic {
        Some(t) if t.prefers_tcp() => Protocol::Tcp,
        _ => Protocol::Udp,
    }
}

/// A traffic model's flows: each sub-flow of a preset (audio, video) is a flow of its own.
pub fn model_flows(traffic: &TrafficSpec, seed: u64) -> u32 {
    traffic
        .build(seed, &|p: &str| Err(format!("{p} not embedded")))
        .map(|sources| sources.len().max(1) as u32)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_gives_its_protocol_and_flows() {
        let voip = TrafficSpec::parse("preset:videoconf-1998").unwrap();
        assert_eq!(protocol(Some(&voip)), Protocol::Udp);
        assert_eq!(model_flows(&voip, 1), 2, "audio and video");
        let rr = TrafficSpec::parse("rr:request=64,response=1k").unwrap();
        assert_eq!(protocol(Some(&rr)), Protocol::Tcp);
        assert_eq!(protocol(None), Protocol::Udp);
    }
}
