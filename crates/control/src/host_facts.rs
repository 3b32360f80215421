//! One end's tuning facts for `flowlab doctor`: what limits a test on this host towards a
//! peer. Each end gathers its own; the agent sends its facts in a `host_facts` message, which
//! the client checks field by field ([`HostFacts::check`]) before believing any of it.

use std::net::IpAddr;

use flowlab_sys::tuning::{self, SocketLimits};
use serde::{Deserialize, Serialize};

/// The egress side of the path to the peer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressFacts {
    pub interface: String,
    pub mtu: Option<u32>,
    pub link_speed_bps: Option<u64>,
    /// Kinds of the interface's qdiscs, root first.
    pub qdiscs: Vec<String>,
    /// Packets the root qdisc dropped since it was set up.
    pub qdisc_drops: Option<u64>,
    /// Whether a qdisc there honours per-socket pacing (fq, etf).
    pub paces: bool,
}

/// Socket buffer and TCP window limits (sysctl), as [`SocketLimits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BufferLimits {
    pub rmem_max: Option<u64>,
    pub wmem_max: Option<u64>,
    pub tcp_rmem: Option<[u64; 3]>,
    pub tcp_wmem: Option<[u64; 3]>,
    pub window_scaling: Option<bool>,
}

/// One end's facts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    pub buffers: BufferLimits,
    /// Online CPUs.
    pub cpus: u32,
    pub load_1m: Option<f64>,
    /// Distinct CPU frequency governors (empty: no cpufreq).
    pub governors: Vec<String>,
    /// The realtime clock is disciplined (NTP, PTP), per adjtimex.
    pub clock_synchronized: Option<bool>,
    /// The kernel's maximum clock error, ns.
    pub clock_max_error_ns: Option<u64>,
    pub egress: Option<EgressFacts>,
    /// UDP datagrams dropped at full receive buffers since boot (this namespace).
    pub udp_rcvbuf_errors: Option<u64>,
}

/// Longest name (interface, qdisc kind, governor) a peer's facts may carry.
const MAX_NAME: usize = 32;
/// Most qdiscs or governors a peer's facts may list.
const MAX_NAMES: usize = 16;

impl HostFacts {
    /// This host's facts on the path towards `peer`.
    pub fn gather(peer: IpAddr) -> HostFacts {
        let SocketLimits {
            rmem_max,
            wmem_max,
            tcp_rmem,
            tcp_wmem,
            window_scaling,
        } = tuning::socket_limits();
        let sync = flowlab_sys::clock::realtime_sync().ok();
        HostFacts {
            buffers: BufferLimits {
                rmem_max,
                wmem_max,
                tcp_rmem,
                tcp_wmem,
                window_scaling,
            },
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            load_1m: tuning::load_average(),
            governors: tuning::cpufreq_governors(),
            clock_synchronized: sync.map(|s| s.synchronized),
            clock_max_error_ns: sync.map(|s| s.max_error_ns),
            egress: flowlab_sys::netlink::egress(peer)
                .ok()
                .map(|e| EgressFacts {
                    mtu: tuning::interface_mtu(&e.interface),
                    link_speed_bps: flowlab_sys::host::link_speed_bps(&e.interface),
                    paces: e.paces_udp(),
                    qdisc_drops: e.root_drops,
                    qdiscs: e.kinds,
                    interface: e.interface,
                }),
            udp_rcvbuf_errors: tuning::udp_receive_buffer_errors(),
        }
    }

    /// Checks every field of a peer's facts: names short and printable, lists short,
    /// numbers within what a host can have. The first bad field, in one line.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=65_536).contains(&self.cpus) {
            return Err(format!("cpus {} is not 1..=65536", self.cpus));
        }
        if let Some(load) = self.load_1m.filter(|l| !(0.0..1e6).contains(l)) {
            return Err(format!("load {load} is not 0..1e6"));
        }
        names("governor", &self.governors)?;
        for (key, triple) in [
            ("tcp_rmem", self.buffers.tcp_rmem),
            ("tcp_wmem", self.buffers.tcp_wmem),
        ] {
            if let Some([min, default, max]) = triple.filter(|[a, b, c]| !(a <= b && b <= c)) {
                return Err(format!("{key} {min} {default} {max} is not in order"));
            }
        }
        if let Some(egress) = &self.egress {
            names("interface", std::slice::from_ref(&egress.interface))?;
            names("qdisc", &egress.qdiscs)?;
            if let Some(mtu) = egress.mtu.filter(|m| !(68..=65_536).contains(m)) {
                return Err(format!("mtu {mtu} is not 68..=65536"));
            }
        }
        Ok(())
    }
}

/// A list of at most [`MAX_NAMES`] non-empty printable names of at most [`MAX_NAME`] bytes.
fn names(what: &str, list: &[String]) -> Result<(), String> {
    if list.len() > MAX_NAMES {
        return Err(format!(
            "{} {what} names, more than {MAX_NAMES}",
            list.len()
        ));
    }
    let bad =
        |n: &String| n.is_empty() || n.len() > MAX_NAME || !n.bytes().all(|b| b.is_ascii_graphic());
    match list.iter().find(|n| bad(n)) {
        Some(n) => Err(format!(
            "{what} name {n:?} is not 1 to {MAX_NAME} printable characters"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> HostFacts {
        HostFacts::gather("127.0.0.1".parse().unwrap())
    }

    #[test]
    fn this_host_passes_its_own_check() {
        let local = facts();
        assert_eq!(local.check(), Ok(()));
        assert_eq!(
            local.egress.as_ref().map(|e| e.interface.as_str()),
            Some("lo")
        );
    }

    /// The message as the fuzz seed `control_frames/host_facts` carries it.
    #[test]
    fn host_facts_vector() {
        let seed = include_bytes!("../../../fuzz/seeds/control_frames/host_facts");
        let message = crate::Message::decode(&seed[5..]).expect("the seed decodes");
        let crate::Message::HostFacts { facts } = &message else {
            panic!("{message:?}")
        };
        assert_eq!(facts.buffers.tcp_rmem, Some([4096, 131_072, 6_291_456]));
        assert_eq!(facts.egress.as_ref().map(|e| e.paces), Some(true));
        assert_eq!(facts.check(), Ok(()));
        assert_eq!(message.encode(), seed[1..].to_vec());
        let stray = String::from_utf8_lossy(&seed[5..]).replace("\"cpus\"", "\"cpuz\"");
        let mut framed = vec![1];
        framed.extend_from_slice(stray.as_bytes());
        assert!(
            crate::Message::decode(&framed).is_err(),
            "unknown fields are refused"
        );
    }

    #[test]
    fn every_field_is_checked() {
        let bad = |change: fn(&mut HostFacts)| {
            let mut f = facts();
            change(&mut f);
            f.check().unwrap_err()
        };
        assert_eq!(bad(|f| f.cpus = 0), "cpus 0 is not 1..=65536");
        assert_eq!(
            bad(|f| f.load_1m = Some(f64::NAN)),
            "load NaN is not 0..1e6"
        );
        assert_eq!(
            bad(|f| f.buffers.tcp_rmem = Some([3, 2, 1])),
            "tcp_rmem 3 2 1 is not in order"
        );
        assert_eq!(
            bad(|f| f.governors = vec!["a\u{1b}[2J".into()]),
            "governor name \"a\\u{1b}[2J\" is not 1 to 32 printable characters"
        );
        assert_eq!(
            bad(|f| f.governors = vec!["x".into(); 17]),
            "17 governor names, more than 16"
        );
        assert_eq!(
            bad(|f| f.egress.as_mut().unwrap().mtu = Some(10)),
            "mtu 10 is not 68..=65536"
        );
        assert!(
            bad(|f| f.egress.as_mut().unwrap().qdiscs = vec![String::new()]).starts_with("qdisc")
        );
    }
}
