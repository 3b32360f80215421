//! Drops in the sending host's own queueing disciplines: a UDP datagram a local qdisc (a tbf
//! on the sender's interface, a full fq_codel) drops was still "sent" for the socket, so
//! without this count it shows as loss in the network (issue 12).

use std::net::IpAddr;

use flowlab_results::HostQdiscDrops;
use flowlab_sys::netlink;

/// The egress interface's drop counter at the start of a test.
#[derive(Debug)]
pub struct QdiscWatch {
    interface: String,
    qdisc: String,
    before: u64,
}

impl QdiscWatch {
    /// Reads the drop counter of the root qdisc on the interface that routes `peer` (a tree
    /// counts its children's drops at the root; a qdisc counts skbs, so a GSO train dropped
    /// whole counts once). `None` where rtnetlink cannot say or the root has no counter.
    pub fn start(peer: IpAddr) -> Option<QdiscWatch> {
        let egress = netlink::egress(peer).ok()?;
        Some(QdiscWatch {
            before: egress.root_drops?,
            qdisc: egress.root?,
            interface: egress.interface,
        })
    }

    /// The drops since [`QdiscWatch::start`], read again now; `None` if the counter is gone
    /// (the qdisc was replaced meanwhile).
    pub fn finish(self, peer: IpAddr) -> Option<HostQdiscDrops> {
        let egress = netlink::egress(peer).ok()?;
        if egress.interface != self.interface || egress.root.as_ref() != Some(&self.qdisc) {
            return None;
        }
        let after = egress.root_drops?;
        Some(HostQdiscDrops {
            interface: self.interface,
            qdisc: self.qdisc,
            drops: after.checked_sub(self.before)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_watched_on_lo() {
        // Where rtnetlink answers, the route to 127.0.0.1 leaves by lo, read twice alike.
        let lo: IpAddr = "127.0.0.1".parse().unwrap();
        if let Some(watch) = QdiscWatch::start(lo) {
            let drops = watch.finish(lo).expect("the same qdisc");
            assert_eq!(drops.interface, "lo");
        }
    }
}
