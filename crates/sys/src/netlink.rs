//! What the kernel's routing tables say about a peer, read over rtnetlink: the interface that
//! carries traffic to it and that interface's queueing disciplines (the kernel paces UDP only
//! under fq or etf, so a report says which qdisc the path has instead of assuming), and for a
//! peer on the same link, its hardware address from the neighbour table (native frames go
//! there and nowhere else); and a veth's peer's transmit drops, in whichever namespace the
//! peer is (the frames a veth drops when its peer's ring is full).

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDR_LEN: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const RTM_NEWNEIGH: u16 = 28;
const RTM_GETNEIGH: u16 = 30;
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const RTMSG_LEN: usize = 12;
const TCMSG_LEN: usize = 20;
const NDMSG_LEN: usize = 12;
const IFINFOMSG_LEN: usize = 16;
/// The index of a link's peer (a veth's other end), in the peer's namespace.
const IFLA_LINK: u16 = 5;
/// `struct rtnl_link_stats64`: u64 counters, `tx_dropped` the eighth.
const IFLA_STATS64: u16 = 23;
const STATS64_TX_DROPPED: usize = 7 * 8;
/// The namespace (as an id seen from ours) that holds a link's peer.
const IFLA_LINK_NETNSID: u16 = 37;
/// In a request: look the interface up in the namespace with this id.
const IFLA_TARGET_NETNSID: u16 = 46;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// Neighbour states without a usable hardware address: still resolving, or failed.
const NUD_INCOMPLETE: u16 = 0x01;
const NUD_FAILED: u16 = 0x20;
const TCA_KIND: u16 = 1;
/// `struct tc_stats` (legacy): drops are the u32 at offset 12.
const TCA_STATS: u16 = 3;
/// Nested statistics; inside, TCA_STATS_QUEUE (`gnet_stats_queue`) has drops at offset 8.
const TCA_STATS2: u16 = 7;
const TCA_STATS_QUEUE: u16 = 3;
/// The parent of a root qdisc.
const TC_H_ROOT: u32 = 0xFFFF_FFFF;

/// The egress side of the path to an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// Interface name, as `ip link` shows it.
    pub interface: String,
    /// Kind of the root qdisc ("noqueue", "tbf", "mq", ...), if the kernel listed one.
    pub root: Option<String>,
    /// Kinds of every qdisc on the interface, root first.
    pub kinds: Vec<String>,
    /// Packets the root qdisc has dropped since it was set up (a tree's drops are counted at
    /// its root too); `None` without a root qdisc that counts.
    pub root_drops: Option<u64>,
}

impl Egress {
    /// Whether a qdisc on the path honours per-socket pacing rates and transmit times.
    pub fn paces_udp(&self) -> bool {
        self.kinds.iter().any(|k| k == "fq" || k == "etf")
    }
}

/// One message of an rtnetlink reply that flowlab reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A route.
    Route {
        /// Its output interface index.
        oif: Option<u32>,
        /// The gateway it goes through, if the peer is not on the link.
        gateway: Option<IpAddr>,
    },
    /// A neighbour table entry.
    Neighbour {
        /// The interface it is on.
        ifindex: u32,
        /// NUD_* state bits.
        state: u16,
        /// Its IP address.
        dst: Option<IpAddr>,
        /// Its hardware address, if the entry has an Ethernet one.
        mac: Option<[u8; 6]>,
    },
    /// A qdisc.
    Qdisc {
        /// The interface it is on.
        ifindex: u32,
        /// Its parent's handle (0xFFFF_FFFF for a root qdisc).
        parent: u32,
        /// "fq", "tbf", ...
        kind: Option<String>,
        /// Packets it dropped, from its statistics attributes.
        drops: Option<u32>,
    },
    /// A network interface.
    Link {
        /// Its index.
        ifindex: u32,
        /// Its peer's index (`IFLA_LINK`), for a veth.
        peer: Option<u32>,
        /// The id of the namespace holding the peer, when it is another one.
        peer_netnsid: Option<i32>,
        /// Frames it dropped on transmit.
        tx_dropped: Option<u64>,
    },
    /// The kernel's answer to a request: 0 is an acknowledgement, otherwise minus an errno.
    Error(i32),
    /// End of a dump.
    Done,
    /// Any other message type.
    Other(u16),
}

fn malformed(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("malformed rtnetlink reply: {what}"),
    )
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Route attributes or qdisc attributes: (type, payload) pairs, each padded to 4 bytes.
fn attributes(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        let len = usize::from(u16_at(b, 0)?);
        let kind = u16_at(b, 2)?;
        let payload = b.get(4..len)?;
        b = b.get(len.next_multiple_of(4)..).unwrap_or(&[]);
        Some((kind & 0x3fff, payload))
    })
}

/// Splits a datagram read from a NETLINK_ROUTE socket into the messages flowlab reads.
/// Truncated or inconsistent lengths are an error, never a panic.
pub fn parse_replies(mut buf: &[u8]) -> io::Result<Vec<Reply>> {
    let mut replies = Vec::new();
    while !buf.is_empty() {
        let len = u32_at(buf, 0).ok_or_else(|| malformed("short header"))? as usize;
        let kind = u16_at(buf, 4).ok_or_else(|| malformed("short header"))?;
        if len < NLMSG_HDR_LEN || len > buf.len() {
            return Err(malformed("message length out of bounds"));
        }
        let body = &buf[NLMSG_HDR_LEN..len];
        replies.push(match kind {
            NLMSG_DONE => Reply::Done,
            NLMSG_ERROR => Reply::Error(
                u32_at(body, 0).ok_or_else(|| malformed("short error message"))? as i32,
            ),
            RTM_NEWROUTE => {
                let attrs = body
                    .get(RTMSG_LEN..)
                    .ok_or_else(|| malformed("short route"))?;
                Reply::Route {
                    oif: attributes(attrs)
                        .find(|&(t, _)| t == RTA_OIF)
                        .and_then(|(_, p)| u32_at(p, 0)),
                    gateway: attributes(attrs)
                        .find(|&(t, _)| t == RTA_GATEWAY)
                        .and_then(|(_, p)| ip_of(p)),
                }
            }
            RTM_NEWNEIGH => parse_neighbour(body)?,
            RTM_NEWLINK => parse_link(body)?,
            RTM_NEWQDISC => {
                let ifindex = u32_at(body, 4).ok_or_else(|| malformed("short qdisc"))?;
                let parent = u32_at(body, 12).ok_or_else(|| malformed("short qdisc"))?;
                let attrs = body
                    .get(TCMSG_LEN..)
                    .ok_or_else(|| malformed("short qdisc"))?;
                let kind = attributes(attrs)
                    .find(|&(t, _)| t == TCA_KIND)
                    .map(|(_, p)| {
                        let name = p.split(|&c| c == 0).next().unwrap_or_default();
                        String::from_utf8_lossy(name).into_owned()
                    });
                Reply::Qdisc {
                    ifindex,
                    parent,
                    kind,
                    drops: qdisc_drops(attrs),
                }
            }
            other => Reply::Other(other),
        });
        buf = buf.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    Ok(replies)
}

/// An ndmsg (family, pads, ifindex, state, flags, type) and its attributes.
/// A qdisc's drop counter: from TCA_STATS2's queue statistics, else from the legacy TCA_STATS.
fn qdisc_drops(attrs: &[u8]) -> Option<u32> {
    let queue = attributes(attrs)
        .find(|&(t, _)| t == TCA_STATS2)
        .and_then(|(_, nested)| attributes(nested).find(|&(t, _)| t == TCA_STATS_QUEUE))
        .and_then(|(_, q)| u32_at(q, 8));
    queue.or_else(|| {
        attributes(attrs)
            .find(|&(t, _)| t == TCA_STATS)
            .and_then(|(_, s)| u32_at(s, 12))
    })
}

/// An ifinfomsg (family, pad, type, index, flags, change) and its attributes.
fn parse_link(body: &[u8]) -> io::Result<Reply> {
    let ifindex = u32_at(body, 4).ok_or_else(|| malformed("short link"))?;
    let attrs = body
        .get(IFINFOMSG_LEN..)
        .ok_or_else(|| malformed("short link"))?;
    let find = |kind| attributes(attrs).find(|&(t, _)| t == kind).map(|(_, p)| p);
    Ok(Reply::Link {
        ifindex,
        peer: find(IFLA_LINK).and_then(|p| u32_at(p, 0)),
        peer_netnsid: find(IFLA_LINK_NETNSID).and_then(|p| u32_at(p, 0).map(|v| v as i32)),
        tx_dropped: find(IFLA_STATS64).and_then(|p| u64_at(p, STATS64_TX_DROPPED)),
    })
}

/// An address attribute: 4 bytes IPv4, 16 bytes IPv6.
fn ip_of(p: &[u8]) -> Option<IpAddr> {
    match p.len() {
        4 => <[u8; 4]>::try_from(p).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(p).ok().map(IpAddr::from),
        _ => None,
    }
}

fn parse_neighbour(body: &[u8]) -> io::Result<Reply> {
    let short = || malformed("short neighbour");
    let ifindex = u32_at(body, 4).ok_or_else(short)?;
    let state = u16_at(body, 8).ok_or_else(short)?;
    let attrs = body.get(NDMSG_LEN..).ok_or_else(short)?;
    let dst = attributes(attrs)
        .find(|&(t, _)| t == NDA_DST)
        .and_then(|(_, p)| ip_of(p));
    let mac = attributes(attrs)
        .find(|&(t, _)| t == NDA_LLADDR)
        .and_then(|(_, p)| <[u8; 6]>::try_from(p).ok());
    Ok(Reply::Neighbour {
        ifindex,
        state,
        dst,
        mac,
    })
}

fn header(total: usize, kind: u16, flags: u16, seq: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m
}

/// RTM_GETROUTE for `dst`: which route (and interface) the kernel would use.
fn route_request(dst: IpAddr, seq: u32) -> Vec<u8> {
    let (family, addr): (u8, Vec<u8>) = match dst {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    let attr_len = 4 + addr.len();
    let total = NLMSG_HDR_LEN + RTMSG_LEN + attr_len;
    let mut m = header(total, RTM_GETROUTE, NLM_F_REQUEST, seq);
    // rtmsg: family, dst_len, then zeros (src_len, tos, table, protocol, scope, type, flags).
    m.extend_from_slice(&[family, (addr.len() * 8) as u8]);
    m.extend_from_slice(&[0; RTMSG_LEN - 2]);
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&RTA_DST.to_ne_bytes());
    m.extend_from_slice(&addr);
    m
}

/// RTM_GETLINK for interface `ifindex`, in the namespace with id `netnsid` if given.
fn link_request(ifindex: u32, netnsid: Option<i32>, seq: u32) -> Vec<u8> {
    let attr_len = if netnsid.is_some() { 8 } else { 0 };
    let total = NLMSG_HDR_LEN + IFINFOMSG_LEN + attr_len;
    let mut m = header(total, RTM_GETLINK, NLM_F_REQUEST, seq);
    m.extend_from_slice(&[libc::AF_UNSPEC as u8, 0, 0, 0]);
    m.extend_from_slice(&ifindex.to_ne_bytes());
    m.extend_from_slice(&[0; 8]);
    if let Some(id) = netnsid {
        m.extend_from_slice(&8u16.to_ne_bytes());
        m.extend_from_slice(&IFLA_TARGET_NETNSID.to_ne_bytes());
        m.extend_from_slice(&id.to_ne_bytes());
    }
    m
}

/// RTM_GETNEIGH dump of one address family's neighbour table.
fn neighbour_dump_request(family: u8, seq: u32) -> Vec<u8> {
    let total = NLMSG_HDR_LEN + NDMSG_LEN;
    let mut m = header(total, RTM_GETNEIGH, NLM_F_REQUEST | NLM_F_DUMP, seq);
    m.push(family);
    m.extend_from_slice(&[0; NDMSG_LEN - 1]);
    m
}

/// RTM_GETQDISC dump of every interface's qdiscs.
fn qdisc_dump_request(seq: u32) -> Vec<u8> {
    let total = NLMSG_HDR_LEN + TCMSG_LEN;
    let mut m = header(total, RTM_GETQDISC, NLM_F_REQUEST | NLM_F_DUMP, seq);
    m.extend_from_slice(&[0; TCMSG_LEN]);
    m
}

struct Netlink(OwnedFd);

impl Netlink {
    fn open() -> io::Result<Netlink> {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // A kernel that never answers must not hang the test: give up after a second.
        crate::sockopt::set_read_timeout(fd.as_fd(), std::time::Duration::from_secs(1))?;
        Ok(Netlink(fd))
    }

    fn send(&self, message: &[u8]) -> io::Result<()> {
        // SAFETY: `message` is valid for reads of its length for the whole call; the kernel
        // is the destination (no address: a netlink socket sends to the kernel by default).
        let rc = unsafe {
            libc::send(
                self.0.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads replies until `done` says the answer is complete.
    fn exchange(
        &self,
        request: &[u8],
        mut done: impl FnMut(Reply) -> io::Result<bool>,
    ) -> io::Result<()> {
        self.send(request)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: `buf` is writable for its length for the whole call.
            let n =
                unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            for reply in parse_replies(&buf[..n as usize])? {
                if let Reply::Error(e) = reply {
                    if e != 0 {
                        return Err(io::Error::from_raw_os_error(-e));
                    }
                }
                if done(reply)? {
                    return Ok(());
                }
            }
        }
    }
}

/// The interface `ifindex` (in the namespace `netnsid`, or ours).
fn link(netlink: &Netlink, ifindex: u32, netnsid: Option<i32>) -> io::Result<Reply> {
    let mut found = None;
    netlink.exchange(&link_request(ifindex, netnsid, 1), |reply| {
        let done = matches!(reply, Reply::Link { .. });
        if done {
            found = Some(reply);
        }
        Ok(done)
    })?;
    found.ok_or_else(|| malformed("no link in the reply"))
}

/// The frames the peer of veth `ifindex` dropped on transmit, so far (its `tx_dropped`, read
/// in whichever namespace holds it): a veth whose receiving end runs an XDP program drops
/// what its peer sends while that end's ring is full, before the program sees it.
pub fn veth_peer_tx_dropped(ifindex: u32) -> io::Result<u64> {
    let netlink = Netlink::open()?;
    let Reply::Link {
        peer: Some(peer),
        peer_netnsid,
        ..
    } = link(&netlink, ifindex, None)?
    else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface {ifindex} has no peer"),
        ));
    };
    match link(&netlink, peer, peer_netnsid)? {
        Reply::Link {
            tx_dropped: Some(dropped),
            ..
        } => Ok(dropped),
        _ => Err(malformed("link without statistics")),
    }
}

/// The route the kernel takes to `dst`: output interface, and the gateway if any.
fn route(netlink: &Netlink, dst: IpAddr) -> io::Result<(u32, Option<IpAddr>)> {
    let mut found = None;
    netlink.exchange(&route_request(dst, 1), |reply| {
        if let Reply::Route { oif, gateway } = reply {
            found = Some((oif, gateway));
            return Ok(true);
        }
        Ok(false)
    })?;
    match found {
        Some((Some(oif), gateway)) => Ok((oif, gateway)),
        _ => Err(malformed("route without an output interface")),
    }
}

/// A peer on the same link: the interface that reaches it and its hardware address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkPeer {
    /// The interface of the route to the peer.
    pub interface: String,
    /// Its index.
    pub ifindex: u32,
    /// The peer's hardware address.
    pub mac: [u8; 6],
}

/// Where native frames for `peer` must go, from the kernel's own tables: the interface of the
/// route to it and the MAC address of its neighbour entry on that interface. A peer behind a
/// gateway, or without a resolved entry, has none.
pub fn link_peer(peer: IpAddr) -> io::Result<LinkPeer> {
    let peer = peer.to_canonical();
    let netlink = Netlink::open()?;
    let (oif, gateway) = route(&netlink, peer)?;
    if gateway.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{peer} is reached through a gateway, not on a link of this host"),
        ));
    }
    neighbour(&netlink, oif, peer)
}

/// Where frames for `dst` go next, from the kernel's own tables: the interface of the route
/// to it and the MAC address of the neighbour entry of its gateway, or of `dst` itself on
/// the link. An unresolved entry is an error (the kernel resolves it when it sends there).
/// The loopback interface has no neighbours: its frames carry the all-zero address it has.
pub fn next_hop(dst: IpAddr) -> io::Result<LinkPeer> {
    let dst = dst.to_canonical();
    let netlink = Netlink::open()?;
    let (oif, gateway) = route(&netlink, dst)?;
    let interface = interface_name(oif);
    if is_loopback(&interface) {
        return Ok(LinkPeer {
            interface,
            ifindex: oif,
            mac: [0; 6],
        });
    }
    neighbour(&netlink, oif, gateway.unwrap_or(dst).to_canonical())
}

/// Whether the interface named `name` is a loopback (IFF_LOOPBACK in its sysfs flags).
fn is_loopback(name: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{name}/flags"))
        .ok()
        .and_then(|f| u32::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|flags| flags & libc::IFF_LOOPBACK as u32 != 0)
}

/// The interface `oif` and the MAC address of its neighbour `ip`.
fn neighbour(netlink: &Netlink, oif: u32, ip: IpAddr) -> io::Result<LinkPeer> {
    let family = if ip.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    } as u8;
    let mut mac = None;
    netlink.exchange(&neighbour_dump_request(family, 2), |reply| match reply {
        Reply::Done => Ok(true),
        Reply::Neighbour {
            ifindex,
            state,
            dst: Some(dst),
            mac: Some(found),
        } if ifindex == oif && dst == ip && state & (NUD_INCOMPLETE | NUD_FAILED) == 0 => {
            mac = Some(found);
            Ok(false)
        }
        _ => Ok(false),
    })?;
    let interface = interface_name(oif);
    let mac = mac.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no neighbour entry with a MAC address for {ip} on {interface}"),
        )
    })?;
    Ok(LinkPeer {
        interface,
        ifindex: oif,
        mac,
    })
}

/// The interface the kernel routes `dst` through, and its qdiscs.
pub fn egress(dst: IpAddr) -> io::Result<Egress> {
    let netlink = Netlink::open()?;
    let (oif, _) = route(&netlink, dst)?;
    let mut root = None;
    let mut root_drops = None;
    let mut kinds = Vec::new();
    netlink.exchange(&qdisc_dump_request(2), |reply| match reply {
        Reply::Done => Ok(true),
        Reply::Qdisc {
            ifindex,
            parent,
            kind: Some(kind),
            drops,
        } if ifindex == oif => {
            if parent == TC_H_ROOT {
                root = Some(kind.clone());
                root_drops = drops.map(u64::from);
                kinds.insert(0, kind);
            } else {
                kinds.push(kind);
            }
            Ok(false)
        }
        _ => Ok(false),
    })?;
    Ok(Egress {
        interface: interface_name(oif),
        root,
        kinds,
        root_drops,
    })
}

fn interface_name(index: u32) -> String {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `name` has room for IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(index, name.as_mut_ptr()) };
    if p.is_null() {
        return format!("interface {index}");
    }
    crate::host::c_field(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTM_NEWQDISC for "tbf" at the root of interface 3 that has dropped 1234 packets,
    /// then NLMSG_DONE (x86-64 byte order, as the kernel sends it).
    fn qdisc_reply() -> Vec<u8> {
        let mut m = header(16 + 20 + 8 + 28, RTM_NEWQDISC, 2, 7);
        m.extend_from_slice(&[0, 0, 0, 0]); // family, pads
        m.extend_from_slice(&3u32.to_ne_bytes()); // ifindex
        m.extend_from_slice(&0x8001_0000u32.to_ne_bytes()); // handle
        m.extend_from_slice(&TC_H_ROOT.to_ne_bytes()); // parent
        m.extend_from_slice(&1u32.to_ne_bytes()); // info
        m.extend_from_slice(&[8, 0, 1, 0, b't', b'b', b'f', 0]); // TCA_KIND "tbf"
        m.extend_from_slice(&[28, 0, 7, 0]); // TCA_STATS2, nested:
        m.extend_from_slice(&[24, 0, 3, 0]); //   TCA_STATS_QUEUE (gnet_stats_queue)
        for field in [0u32, 0, 1234, 0, 9] {
            m.extend_from_slice(&field.to_ne_bytes()); // qlen, backlog, drops, requeues, overlimits
        }
        m.extend(header(20, NLMSG_DONE, 2, 7));
        m.extend_from_slice(&0u32.to_ne_bytes());
        m
    }

    #[test]
    fn parses_a_qdisc_dump() {
        assert_eq!(
            parse_replies(&qdisc_reply()).unwrap(),
            vec![
                Reply::Qdisc {
                    ifindex: 3,
                    parent: TC_H_ROOT,
                    kind: Some("tbf".into()),
                    drops: Some(1234),
                },
                Reply::Done
            ]
        );
    }

    #[test]
    fn drops_from_the_legacy_statistics_when_stats2_is_absent() {
        let mut attrs = vec![36, 0, 3, 0]; // TCA_STATS: struct tc_stats
        attrs.extend_from_slice(&500u64.to_ne_bytes()); // bytes
        for field in [7u32, 42, 0, 0, 0, 0, 0] {
            attrs.extend_from_slice(&field.to_ne_bytes()); // packets, drops, overlimits, ...
        }
        assert_eq!(qdisc_drops(&attrs), Some(42));
        assert_eq!(
            qdisc_drops(&attrs[..20]),
            None,
            "a truncated attribute is skipped"
        );
        assert_eq!(qdisc_drops(&[]), None);
    }

    #[test]
    fn route_request_bytes() {
        let m = route_request("10.1.2.3".parse().unwrap(), 9);
        assert_eq!(m.len(), 36);
        assert_eq!(u32_at(&m, 0), Some(36));
        assert_eq!(u16_at(&m, 4), Some(RTM_GETROUTE));
        assert_eq!(&m[16..18], &[libc::AF_INET as u8, 32]);
        assert_eq!(&m[28..36], &[8, 0, 1, 0, 10, 1, 2, 3]);
    }

    #[test]
    fn refuses_truncated_and_inconsistent_lengths() {
        let good = qdisc_reply();
        for cut in 1..good.len() {
            // Any prefix either parses (a whole first message) or is refused: no panic.
            let _ = parse_replies(&good[..cut]);
        }
        let mut lying = good.clone();
        lying[0..4].copy_from_slice(&10_000u32.to_ne_bytes());
        assert!(parse_replies(&lying).is_err());
        lying[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert!(parse_replies(&lying).is_err());
    }

    /// An RTM_NEWNEIGH for 10.0.0.1 at 02:00:00:00:00:01 on interface 5, state REACHABLE.
    fn neighbour_reply() -> Vec<u8> {
        let mut m = header(16 + 12 + 8 + 12, RTM_NEWNEIGH, 2, 4);
        m.extend_from_slice(&[libc::AF_INET as u8, 0, 0, 0]); // family, pads
        m.extend_from_slice(&5u32.to_ne_bytes()); // ifindex
        m.extend_from_slice(&0x02u16.to_ne_bytes()); // state
        m.extend_from_slice(&[0, 1]); // flags, type
        m.extend_from_slice(&[8, 0, 1, 0, 10, 0, 0, 1]); // NDA_DST
        m.extend_from_slice(&[10, 0, 2, 0, 2, 0, 0, 0, 0, 1, 0, 0]); // NDA_LLADDR, padded
        m
    }

    #[test]
    fn parses_a_neighbour() {
        assert_eq!(
            parse_replies(&neighbour_reply()).unwrap(),
            vec![Reply::Neighbour {
                ifindex: 5,
                state: 0x02,
                dst: Some("10.0.0.1".parse().unwrap()),
                mac: Some([2, 0, 0, 0, 0, 1]),
            }]
        );
        let request = neighbour_dump_request(libc::AF_INET6 as u8, 3);
        assert_eq!(request.len(), 28);
        assert_eq!(u16_at(&request, 4), Some(RTM_GETNEIGH));
        assert_eq!(request[16], libc::AF_INET6 as u8);
    }

    /// An RTM_NEWLINK for interface 2 whose peer is interface 7 in namespace 3, having
    /// dropped 130821 frames on transmit.
    fn link_reply() -> Vec<u8> {
        let mut stats = vec![0u8; 24 * 8];
        stats[STATS64_TX_DROPPED..STATS64_TX_DROPPED + 8]
            .copy_from_slice(&130_821u64.to_ne_bytes());
        let mut attrs = Vec::new();
        for (kind, payload) in [
            (IFLA_LINK, 7u32.to_ne_bytes().to_vec()),
            (IFLA_STATS64, stats),
            (IFLA_LINK_NETNSID, 3u32.to_ne_bytes().to_vec()),
        ] {
            attrs.extend_from_slice(&(4 + payload.len() as u16).to_ne_bytes());
            attrs.extend_from_slice(&kind.to_ne_bytes());
            attrs.extend_from_slice(&payload);
        }
        let total = NLMSG_HDR_LEN + IFINFOMSG_LEN + attrs.len();
        let mut m = header(total, RTM_NEWLINK, 0, 1);
        m.extend_from_slice(&[0, 0, 1, 0]); // AF_UNSPEC, pad, ARPHRD_ETHER
        m.extend_from_slice(&2u32.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        m.extend_from_slice(&attrs);
        m
    }

    #[test]
    fn parses_a_links_peer_and_transmit_drops() {
        assert_eq!(
            parse_replies(&link_reply()).unwrap(),
            [Reply::Link {
                ifindex: 2,
                peer: Some(7),
                peer_netnsid: Some(3),
                tx_dropped: Some(130_821),
            }]
        );
        let short = link_reply();
        let cut = NLMSG_HDR_LEN + 8;
        let mut truncated = short[..cut].to_vec();
        truncated[..4].copy_from_slice(&(cut as u32).to_ne_bytes());
        assert!(parse_replies(&truncated).is_err());
    }

    #[test]
    fn link_request_bytes() {
        let m = link_request(7, Some(3), 9);
        assert_eq!(m.len(), NLMSG_HDR_LEN + IFINFOMSG_LEN + 8);
        assert_eq!(u16_at(&m, 4), Some(RTM_GETLINK));
        assert_eq!(u32_at(&m, NLMSG_HDR_LEN + 4), Some(7));
        let attr = NLMSG_HDR_LEN + IFINFOMSG_LEN;
        assert_eq!(u16_at(&m, attr + 2), Some(IFLA_TARGET_NETNSID));
        assert_eq!(u32_at(&m, attr + 4), Some(3));
        assert_eq!(
            link_request(7, None, 9).len(),
            NLMSG_HDR_LEN + IFINFOMSG_LEN
        );
    }

    #[test]
    fn loopback_is_no_veth() {
        match veth_peer_tx_dropped(1) {
            Ok(d) => panic!("lo has a peer that dropped {d}"),
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
            Err(e) => eprintln!("skipped: rtnetlink unavailable: {e}"),
        }
    }

    #[test]
    fn loopback_has_no_link_peer() {
        // lo has no neighbour entries: native frames to a loopback peer have nowhere to go.
        match link_peer("127.0.0.1".parse().unwrap()) {
            Ok(p) => panic!("a link peer on loopback: {p:?}"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => eprintln!("skipped: rtnetlink unavailable: {e}"),
        }
    }

    #[test]
    fn loopback_egress_is_lo() {
        // Every network namespace has lo, so this runs anywhere, root or not.
        match egress("127.0.0.1".parse().unwrap()) {
            Ok(e) => assert_eq!(e.interface, "lo"),
            // A sandbox without netlink: nothing to check.
            Err(e) => eprintln!("skipped: rtnetlink unavailable: {e}"),
        }
    }
}
