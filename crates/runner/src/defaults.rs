//! What a test is when its flags do not say: the values `flowlab test` chooses, and a sweep
//! point's test follows when the point changes what they depend on.

use flowlab_spec::Protocol;
use flowlab_traffic::TrafficSpec;

/// A test without a duration or a count runs this long.
pub const DURATION_NS: u64 = 10_000_000_000;

/// bit/s; `None`: as fast as the path allows (TCP, and transactions back to back).
pub fn rate_bps(protocol: Protocol, transactions: bool) -> Option<u64> {
    match protocol {
        _ if transactions => None,
        Protocol::Udp | Protocol::Raw => Some(1_000_000),
        Protocol::Tcp => None,
    }
}

/// Bytes per packet (UDP datagram, native frame, or TCP write).
pub fn size(protocol: Protocol) -> u32 {
    match protocol {
        Protocol::Udp => 1200,
        Protocol::Raw => 1000,
        // Measured on a veth, one connection: 256 kB writes gave 18-25 Gbit/s where 128 KiB
        // and 256 KiB gave 12-15 (iperf3's 128 KiB: 14-16), and 500 kB or 1 MB 15-21.
        Protocol::Tcp => 256_000,
    }
}

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
    fn defaults_follow_the_protocol_and_model() {
        assert_eq!(
            (size(Protocol::Udp), rate_bps(Protocol::Udp, false)),
            (1200, Some(1_000_000))
        );
        assert_eq!(
            (size(Protocol::Tcp), rate_bps(Protocol::Tcp, false)),
            (256_000, None)
        );
        assert_eq!(rate_bps(Protocol::Udp, true), None);
        let voip = TrafficSpec::parse("preset:videoconf-1998").unwrap();
        assert_eq!(protocol(Some(&voip)), Protocol::Udp);
        assert_eq!(model_flows(&voip, 1), 2, "audio and video");
        let rr = TrafficSpec::parse("rr:request=64,response=1k").unwrap();
        assert_eq!(protocol(Some(&rr)), Protocol::Tcp);
    }
}
