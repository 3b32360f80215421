//! From a [`LabSpec`] to a [`Plan`]: namespace and interface names, addresses, shaping and
//! routes. Pure computation, so the whole layout is unit-tested without root; the plan is
//! also what `state.json` records, so `down` and `status` need not re-read the file.
//!
//! Addressing: point-to-point link *j* (between two hosts, in file order) gets the /30
//! `10.77.(j/64).(4·(j%64))` and the /64 `fd77:0:0:j::/64`; switch *i* gets the /24
//! `10.77.(64+i).0` and the /64 `fd77:0:0:(4096+i)::/64`, its hosts numbered from .1 in link
//! order. Everything lives inside the lab's own namespaces, so the range never meets the
//! host's network.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Deserialize, Serialize};

use super::spec::{LabSpec, SpecError, MIN_FRAME};

/// Prefix of every lab namespace: `fl-<lab>-<node>`.
pub const LAB_NS_PREFIX: &str = "fl-";
/// Most point-to-point links (10.77.0.0/18 in /30s).
pub const MAX_P2P_LINKS: usize = 4096;
/// Most switches (10.77.64.0 ... 10.77.255.0).
pub const MAX_SWITCHES: usize = 192;
/// Most hosts on one switch (a /24).
pub const MAX_SWITCH_PORTS: usize = 253;
/// Name of the bridge inside a switch's namespace.
pub const BRIDGE: &str = "br0";

/// Namespace of `node` in lab `lab`.
pub fn ns_of(lab: &str, node: &str) -> String {
    format!("{LAB_NS_PREFIX}{lab}-{node}")
}

/// Prefix shared by every namespace of lab `lab`.
pub fn lab_prefix(lab: &str) -> String {
    format!("{LAB_NS_PREFIX}{lab}-")
}

/// The lab a namespace name belongs to (`fl-<lab>-...`), if it is a lab namespace.
pub fn lab_of_ns(ns: &str) -> Option<&str> {
    let rest = ns.strip_prefix(LAB_NS_PREFIX)?;
    let (lab, node) = rest.split_once('-')?;
    (!lab.is_empty() && !node.is_empty()).then_some(lab)
}

/// Whether a node is a host (runs an agent, may route), a switch (a bridge) or the
/// emulator's namespace (the middle of every emulated link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Host,
    Switch,
    Emulator,
}

/// The emulator's node: a name no host or switch can have (they start with a letter or
/// digit), so its namespace `fl-<lab>-_emu` never clashes.
pub const EMULATOR_NODE: &str = "_emu";

/// One namespace of the lab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodePlan {
    pub name: String,
    pub ns: String,
    pub kind: NodeKind,
    /// A host with more than one link forwards packets (ip_forward on).
    pub router: bool,
    pub ifaces: Vec<IfacePlan>,
    pub routes: Vec<RoutePlan>,
}

impl NodePlan {
    /// All addresses of the node (IPv4 then IPv6), without prefix lengths.
    pub fn addresses(&self) -> Vec<String> {
        let v4 = self
            .ifaces
            .iter()
            .filter_map(|i| i.addr4.map(|a| a.to_string()));
        let v6 = self
            .ifaces
            .iter()
            .filter_map(|i| i.addr6.map(|a| a.to_string()));
        v4.chain(v6).collect()
    }
}

/// One veth end inside a node's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfacePlan {
    /// `to-<peer>`.
    pub dev: String,
    pub peer: String,
    pub addr4: Option<Ipv4Addr>,
    pub prefix4: u8,
    pub addr6: Option<Ipv6Addr>,
    pub prefix6: u8,
    /// Egress shaping of this end (each direction of a link is shaped at its sender).
    pub shaping: Option<Shaping>,
}

/// Egress queueing of one veth end: tbf for the rate, netem for the delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shaping {
    pub rate_bps: Option<u64>,
    pub burst_bytes: u64,
    /// tbf `limit`; `None`: tbf `latency 50ms`.
    pub buffer_bytes: Option<u64>,
    pub delay_ns: Option<u64>,
}

impl Shaping {
    /// Default bucket: 1 ms of traffic at the rate, at least two full frames (so a
    /// back-to-back pair passes and slow links still pass one MTU).
    pub fn default_burst(rate_bps: u64) -> u64 {
        (rate_bps / 8 / 1000).max(2 * MIN_FRAME)
    }

    /// The `tc` argument lists (without `tc`) that install this shaping on `dev` in `ns`.
    pub fn tc_commands(&self, ns: &str, dev: &str) -> Vec<Vec<String>> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let tbf = |rate: u64| {
            let mut v = s(&["tbf", "rate"]);
            v.push(format!("{rate}bit"));
            v.push("burst".into());
            v.push(self.burst_bytes.to_string());
            match self.buffer_bytes {
                Some(b) => v.extend(["limit".to_string(), b.to_string()]),
                None => v.extend(s(&["latency", "50ms"])),
            }
            v
        };
        let delay = |ns_: u64| vec!["delay".to_string(), format!("{}us", ns_.div_ceil(1000))];
        let base = s(&["-n", ns, "qdisc", "replace", "dev", dev, "root"]);
        match (self.rate_bps, self.delay_ns) {
            (Some(r), None) => vec![[base, tbf(r)].concat()],
            (None, Some(d)) => vec![[base, s(&["netem"]), delay(d)].concat()],
            (Some(r), Some(d)) => vec![
                [base, s(&["handle", "1:", "netem"]), delay(d)].concat(),
                [
                    s(&[
                        "-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
                    ]),
                    tbf(r),
                ]
                .concat(),
            ],
            (None, None) => Vec::new(),
        }
    }
}

/// A route in a host's namespace towards a subnet that is not directly attached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutePlan {
    pub dest4: Ipv4Addr,
    pub prefix4: u8,
    pub via4: Ipv4Addr,
    pub dest6: Ipv6Addr,
    pub prefix6: u8,
    pub via6: Ipv6Addr,
    pub dev: String,
    /// Hops (routers passed + 1) to the destination subnet, for people reading state.json.
    pub hops: u32,
}

/// A link to create: node index and interface index at each end. An emulated link is two
/// veth pairs through the emulator's node: `a` to its interface `via.1`, its interface
/// `via.2` to `b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkPlan {
    pub a: (usize, usize),
    pub b: (usize, usize),
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<(usize, usize, usize)>,
}

/// Everything `lab up` creates, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub lab: String,
    /// Hosts (file order), then switches, then the emulator if a link is emulated.
    pub nodes: Vec<NodePlan>,
    pub links: Vec<LinkPlan>,
}

/// Adds the emulator's interfaces for one more emulated link (`e<k>a` towards `a`, `e<k>b`
/// towards `b`), and the emulator's node first if needed: (node, iface a, iface b).
fn emulator_ends(lab: &str, nodes: &mut Vec<NodePlan>, a: &str, b: &str) -> (usize, usize, usize) {
    let e = match nodes.iter().position(|n| n.kind == NodeKind::Emulator) {
        Some(e) => e,
        None => {
            nodes.push(NodePlan {
                name: EMULATOR_NODE.into(),
                ns: ns_of(lab, EMULATOR_NODE),
                kind: NodeKind::Emulator,
                router: false,
                ifaces: Vec::new(),
                routes: Vec::new(),
            });
            nodes.len() - 1
        }
    };
    let k = nodes[e].ifaces.len() / 2;
    for (side, peer) in [("a", a), ("b", b)] {
        nodes[e].ifaces.push(IfacePlan {
            dev: format!("e{k}{side}"),
            peer: peer.to_string(),
            addr4: None,
            prefix4: 0,
            addr6: None,
            prefix6: 0,
            shaping: None,
        });
    }
    (e, 2 * k, 2 * k + 1)
}

/// An IP subnet shared by some hosts: a point-to-point link or a switch.
struct Segment {
    net4: Ipv4Addr,
    prefix4: u8,
    net6: Ipv6Addr,
    /// (node, iface) of each host attached.
    members: Vec<(usize, usize)>,
}

fn v6(subnet: u16, host: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd77, 0, 0, subnet, 0, 0, 0, host)
}

impl Plan {
    /// Lays out `spec`: names, addresses, shaping, and shortest-path routes so that every
    /// host reaches every address of every other host it is connected to.
    pub fn new(spec: &LabSpec) -> Result<Plan, SpecError> {
        let lab = &spec.name;
        let mut nodes: Vec<NodePlan> = spec
            .hosts
            .iter()
            .map(|h| (h, NodeKind::Host))
            .chain(spec.switches.iter().map(|s| (s, NodeKind::Switch)))
            .map(|(n, kind)| NodePlan {
                name: n.name.clone(),
                ns: ns_of(lab, &n.name),
                kind,
                router: false,
                ifaces: Vec::new(),
                routes: Vec::new(),
            })
            .collect();
        let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let index = |name: &str| names.iter().position(|n| n == name).expect("validated");
        let switch_base = spec.hosts.len();
        if spec.switches.len() > MAX_SWITCHES {
            return Err(SpecError::new(
                Some(spec.switches[MAX_SWITCHES].line),
                format!("at most {MAX_SWITCHES} switches"),
            ));
        }
        let mut segments: Vec<Segment> = (0..spec.switches.len())
            .map(|i| Segment {
                net4: Ipv4Addr::new(10, 77, 64 + i as u8, 0),
                prefix4: 24,
                net6: v6(4096 + i as u16, 0),
                members: Vec::new(),
            })
            .collect();
        let mut links = Vec::new();
        let mut p2p = 0usize;
        for l in &spec.links {
            let (ia, ib) = (index(&l.a), index(&l.b));
            let shaping = (l.rate_bps.is_some() || l.delay_ns.is_some()).then(|| Shaping {
                rate_bps: l.rate_bps,
                burst_bytes: l
                    .burst_bytes
                    .unwrap_or_else(|| Shaping::default_burst(l.rate_bps.unwrap_or(0))),
                buffer_bytes: l.buffer_bytes,
                delay_ns: l.delay_ns,
            });
            let mk = |peer: &str| IfacePlan {
                dev: format!("to-{peer}"),
                peer: peer.to_string(),
                addr4: None,
                prefix4: 0,
                addr6: None,
                prefix6: 0,
                shaping,
            };
            let (fa, fb) = (nodes[ia].ifaces.len(), nodes[ib].ifaces.len());
            nodes[ia].ifaces.push(mk(&l.b));
            nodes[ib].ifaces.push(mk(&l.a));
            let via = l
                .emulate
                .as_ref()
                .map(|_| emulator_ends(lab, &mut nodes, &l.a, &l.b));
            links.push(LinkPlan {
                a: (ia, fa),
                b: (ib, fb),
                via,
            });
            let addr = |nodes: &mut Vec<NodePlan>, (n, f): (usize, usize), a4, a6, p4| {
                let i = &mut nodes[n].ifaces[f];
                (i.addr4, i.prefix4, i.addr6, i.prefix6) = (Some(a4), p4, Some(a6), 64);
            };
            match (ia >= switch_base, ib >= switch_base) {
                (false, false) => {
                    if p2p >= MAX_P2P_LINKS {
                        return Err(SpecError::new(
                            Some(l.line),
                            format!("at most {MAX_P2P_LINKS} host-to-host links"),
                        ));
                    }
                    let base = u32::from(Ipv4Addr::new(10, 77, 0, 0)) + 4 * p2p as u32;
                    addr(
                        &mut nodes,
                        (ia, fa),
                        Ipv4Addr::from(base + 1),
                        v6(p2p as u16, 1),
                        30,
                    );
                    addr(
                        &mut nodes,
                        (ib, fb),
                        Ipv4Addr::from(base + 2),
                        v6(p2p as u16, 2),
                        30,
                    );
                    segments.push(Segment {
                        net4: Ipv4Addr::from(base),
                        prefix4: 30,
                        net6: v6(p2p as u16, 0),
                        members: vec![(ia, fa), (ib, fb)],
                    });
                    p2p += 1;
                }
                (a_sw, _) => {
                    let (host, sw) = if a_sw {
                        ((ib, fb), ia - switch_base)
                    } else {
                        ((ia, fa), ib - switch_base)
                    };
                    let seg = &mut segments[sw];
                    if seg.members.len() >= MAX_SWITCH_PORTS {
                        return Err(SpecError::new(
                            Some(l.line),
                            format!("at most {MAX_SWITCH_PORTS} hosts on one switch"),
                        ));
                    }
                    let k = seg.members.len() as u32 + 1;
                    let a4 = Ipv4Addr::from(u32::from(seg.net4) + k);
                    let a6 = v6(4096 + sw as u16, k as u16);
                    seg.members.push(host);
                    addr(&mut nodes, host, a4, a6, 24);
                }
            }
        }
        for n in nodes.iter_mut() {
            n.router = n.kind == NodeKind::Host && n.ifaces.len() > 1;
        }
        let hosts = spec.hosts.len();
        for h in 0..hosts {
            nodes[h].routes = routes_from(h, hosts, &segments, &nodes);
        }
        Ok(Plan {
            lab: lab.clone(),
            nodes,
            links,
        })
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Every namespace of the lab, in creation order.
    pub fn namespaces(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.ns.clone()).collect()
    }
}

/// Breadth-first search over hosts (adjacent when they share a segment) from host `h`;
/// for each segment `h` is not on, a route via the first hop towards the nearest member.
/// Ties go to the earlier segment and member in file order, so plans are deterministic.
fn routes_from(h: usize, hosts: usize, segments: &[Segment], nodes: &[NodePlan]) -> Vec<RoutePlan> {
    // first[x] = (segment, member index in it) of the first hop from h towards host x.
    let mut dist = vec![u32::MAX; hosts];
    let mut first: Vec<Option<(usize, usize)>> = vec![None; hosts];
    dist[h] = 0;
    let mut queue = VecDeque::from([h]);
    while let Some(x) = queue.pop_front() {
        for (s, seg) in segments.iter().enumerate() {
            if !seg.members.iter().any(|&(n, _)| n == x) {
                continue;
            }
            for (m, &(y, _)) in seg.members.iter().enumerate() {
                if dist[y] == u32::MAX {
                    dist[y] = dist[x] + 1;
                    first[y] = if x == h { Some((s, m)) } else { first[x] };
                    queue.push_back(y);
                }
            }
        }
    }
    let mut routes = Vec::new();
    for seg in segments {
        if seg.members.is_empty() || seg.members.iter().any(|&(n, _)| n == h) {
            continue;
        }
        let Some(&(target, _)) = seg
            .members
            .iter()
            .filter(|&&(n, _)| dist[n] != u32::MAX)
            .min_by_key(|&&(n, _)| dist[n])
        else {
            continue; // not connected to h: no route
        };
        let (s, m) = first[target].expect("reachable host has a first hop");
        let (via_node, via_if) = segments[s].members[m];
        let via = &nodes[via_node].ifaces[via_if];
        let own = segments[s]
            .members
            .iter()
            .find(|&&(n, _)| n == h)
            .expect("h is on its first hop's segment");
        routes.push(RoutePlan {
            dest4: seg.net4,
            prefix4: seg.prefix4,
            via4: via.addr4.expect("host ends have addresses"),
            dest6: seg.net6,
            prefix6: 64,
            via6: via.addr6.expect("host ends have addresses"),
            dev: nodes[h].ifaces[own.1].dev.clone(),
            hops: dist[target] + 1,
        });
    }
    routes
}
