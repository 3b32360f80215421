//! The checks of a request before an agent runs it: the one validation of a test, the
//! agent's limits (duration, flows, the offered load against `--max-rate`), the client's UDP
//! ports, and for native frames that the path leads to the control peer.

use std::net::IpAddr;
use std::time::Duration;

use flowlab_spec::{format_mac, parse_mac, Protocol, TestSpec};
use flowlab_sys::{netlink, raw};
use flowlab_traffic::contract::TokenBucket;
use flowlab_traffic::sender::SendCap;
use flowlab_units::format_rate;

use super::config::Limits;

/// Checks a request against the protocol's bounds and the agent's limits.
pub fn check_request(spec: &TestSpec, limits: &Limits) -> Result<(), String> {
    check_limits(spec, limits)?;
    let ports_given = spec.client_udp_ports.len() == spec.flows as usize
        && spec.client_udp_ports.iter().all(|&p| p != 0);
    // A multicast receiver hears the group; it never sends to the client.
    if spec.protocol == Protocol::Udp && spec.multicast.is_none() && !ports_given {
        return Err("a UDP test needs the client's UDP port for each flow".into());
    }
    Ok(())
}

/// The protocol's bounds and the agent's limits, for its own tests and relayed ones alike.
pub(super) fn check_limits(spec: &TestSpec, limits: &Limits) -> Result<(), String> {
    spec.validate().map_err(|e| e.to_string())?;
    if let Some(d) = spec.duration_ns {
        if d > limits.max_duration.as_nanos() as u64 {
            return Err(format!(
                "duration {:.1} s exceeds the agent's limit of {:.1} s (--max-duration)",
                d as f64 / 1e9,
                limits.max_duration.as_secs_f64()
            ));
        }
    }
    if let Some(max) = limits.max_rate_bps {
        check_load(spec, max)?;
    }
    if spec.flows as usize > limits.max_flows {
        return Err(format!(
            "{} flows exceed the agent's limit of {} (--max-flows)",
            spec.flows, limits.max_flows
        ));
    }
    Ok(())
}

/// How far ahead a traffic model is run to find its load, and how many of its packets at most.
const LOAD_HORIZON: Duration = Duration::from_secs(10);
const LOAD_MAX_PACKETS: usize = 1_000_000;

/// The test's offered load against the agent's `--max-rate`, over all its flows. A constant
/// rate is its rate times its flows. A traffic model is run ahead (its own sources, no clock)
/// over its first seconds, and every packet must fit a token bucket of the limit: a model's
/// peak where it has one, else its mean with a bounded burst. `--rate max` and transactions
/// run held to the limit, which the agent also enforces while sending.
fn check_load(spec: &TestSpec, max: u64) -> Result<(), String> {
    let flows = u64::from(spec.flows);
    let limit = || {
        format!(
            "the agent's limit of {} (--max-rate)",
            format_rate(max as f64)
        )
    };
    let Some(traffic) = &spec.traffic else {
        let rate = spec.rate_bps.unwrap_or(0);
        let total = rate.saturating_mul(flows);
        let asked = match flows {
            1 => format!("rate {}", format_rate(rate as f64)),
            _ => format!(
                "{flows} flows x {} = {}",
                format_rate(rate as f64),
                format_rate(total as f64)
            ),
        };
        return match total > max {
            true => Err(format!("{asked} exceeds {}", limit())),
            false => Ok(()),
        };
    };
    if traffic.transactions().is_some() {
        return Ok(());
    }
    let horizon = spec
        .duration_ns
        .map_or(LOAD_HORIZON, Duration::from_nanos)
        .min(LOAD_HORIZON);
    let bucket = TokenBucket::new(max, SendCap::burst_bytes(max));
    let Some(load) = spec.offered_load(horizon.as_nanos() as u64, LOAD_MAX_PACKETS, bucket)? else {
        return Ok(());
    };
    match load.first_excess_ns {
        Some(at) => Err(format!(
            "the traffic model offers {} over {flows} flow(s) and passes {} {:.0} ms in",
            format_rate(load.mean_bps),
            limit(),
            at as f64 / 1e6
        )),
        None => Ok(()),
    }
}

/// Where the agent's native frames go: out of the interface the kernel routes the control
/// peer through, to the MAC address of the peer's neighbour entry there. Never to what a
/// request names: a request naming another MAC address or interface is refused.
pub(super) struct RawPath {
    pub(super) local: raw::Interface,
    pub(super) peer_mac: [u8; 6],
}

pub(super) fn raw_path(spec: &TestSpec, peer_ip: IpAddr) -> Result<RawPath, String> {
    let peer = netlink::link_peer(peer_ip)
        .map_err(|e| format!("native frames go only to a client on this host's link: {e}"))?;
    let named = spec.raw.as_ref();
    if let Some(mac) = named.and_then(|r| parse_mac(&r.client_mac)) {
        if mac != peer.mac {
            return Err(format!(
                "the request names client MAC address {}, but {} is {} on {}",
                format_mac(&mac),
                peer_ip.to_canonical(),
                format_mac(&peer.mac),
                peer.interface
            ));
        }
    }
    if let Some(name) = named.and_then(|r| r.agent_interface.as_deref()) {
        if name != peer.interface {
            return Err(format!(
                "the request names interface {name}, but the client is reached on {}",
                peer.interface
            ));
        }
    }
    let local = raw::interface_named(&peer.interface).map_err(|e| e.to_string())?;
    Ok(RawPath {
        local,
        peer_mac: peer.mac,
    })
}

#[cfg(test)]
mod tests {
    use flowlab_spec::Direction;

    use super::*;

    fn spec() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Oneway,
            rate_bps: Some(1_000_000),
            size: 500,
            duration_ns: Some(1_000_000_000),
            count: None,
            interval_ns: None,
            flows: 1,
            client_udp_ports: vec![5000],
            raw: None,
            busy_poll: false,
            packet_log: false,
            socket: Default::default(),
            traffic: None,
            seed: 1,
            authenticated_packets: false,
            echo_every: None,
            omit_ns: None,
            pacing: Default::default(),
            multicast: None,
        }
    }

    #[test]
    fn limits_refuse_with_reasons() {
        let limits = Limits {
            max_duration: Duration::from_secs(10),
            max_rate_bps: Some(5_000_000),
            max_tests: 1,
            max_flows: 4,
        };
        assert_eq!(check_request(&spec(), &limits), Ok(()));
        // --rate max runs held to the limit.
        let max = TestSpec {
            rate_bps: None,
            ..spec()
        };
        assert_eq!(check_request(&max, &limits), Ok(()));
        // RTT under load: the agent echoes every 10th packet of the load.
        let echoed = TestSpec {
            echo_every: Some(10),
            ..spec()
        };
        assert_eq!(check_request(&echoed, &limits), Ok(()));
        let cases = [
            (
                TestSpec { size: 10, ..spec() },
                "packet size 10 B is below the 32-byte probe header",
            ),
            (
                TestSpec {
                    size: 70_000,
                    ..spec()
                },
                "packet size 70000 B exceeds the UDP maximum of 65507 B",
            ),
            (
                TestSpec {
                    rate_bps: Some(6_000_000),
                    ..spec()
                },
                "rate 6.00 Mbit/s exceeds the agent's limit of 5.00 Mbit/s (--max-rate)",
            ),
            (
                TestSpec {
                    flows: 3,
                    client_udp_ports: vec![1, 2, 3],
                    rate_bps: Some(2_000_000),
                    ..spec()
                },
                "3 flows x 2.00 Mbit/s = 6.00 Mbit/s exceeds the agent's limit of 5.00 Mbit/s (--max-rate)",
            ),
            (
                TestSpec {
                    duration_ns: Some(20_000_000_000),
                    ..spec()
                },
                "duration 20.0 s exceeds the agent's limit of 10.0 s (--max-duration)",
            ),
            (
                TestSpec {
                    duration_ns: None,
                    ..spec()
                },
                "the test has no end: give a duration or a count",
            ),
            (
                TestSpec {
                    flows: 5,
                    client_udp_ports: vec![1, 2, 3, 4, 5],
                    ..spec()
                },
                "5 flows exceed the agent's limit of 4 (--max-flows)",
            ),
            (
                TestSpec {
                    client_udp_ports: vec![],
                    ..spec()
                },
                "a UDP test needs the client's UDP port for each flow",
            ),
        ];
        for (spec, reason) in cases {
            assert_eq!(check_request(&spec, &limits), Err(reason.to_string()));
        }
    }
}
