//! The receiving end of the end-system model (`crate::endsys`): a datagram's way from the
//! host's adapter through its receive CPU and socket buffer to the application, native AAL5
//! frames' null encapsulation, and the hosts' CPU figures.

use flowlab_atm::Encapsulation;

use super::Sim;
use crate::endsys::Next;
use crate::report::HostReport;
use crate::scenario::{NodeKind, Protocol};
use crate::sender::UDP_HEADERS;

impl Sim<'_> {
    /// How stream `s` puts its packets into AAL5 frames on interface `i` (`None`: not an
    /// ATM interface): a native flow's frames carry the payload alone (VC-mux null
    /// encapsulation, as native ATM sends it), IP packets the link's encapsulation.
    pub(super) fn encap_of(&self, s: usize, i: usize) -> Option<Encapsulation> {
        let encap = self.ifaces[i].atm_encap?;
        match self.m.flows[self.streams[s].flow].native {
            true => Some(Encapsulation::VcMuxRouted),
            false => Some(encap),
        }
    }

    /// The bytes of packet `frame` of stream `s` its application reads: the UDP payload
    /// (the whole frame of a native flow).
    fn app_bytes(&self, s: usize, frame: u32) -> u32 {
        let f = &self.m.flows[self.streams[s].flow];
        let headers = match f.protocol {
            Protocol::Udp(_) if !f.native => UDP_HEADERS,
            _ => 0,
        };
        self.packet_size(s, frame).saturating_sub(headers)
    }

    /// Packet `frame` of stream `s` reaches its receiving host at `now` through interface
    /// `into`: a flow with a socket buffer holds it there from now until its application
    /// read it (or drops it if it does not fit), and the host's receive CPU, if it costs
    /// anything, processes it first.
    pub(super) fn at_host(&mut self, s: usize, frame: u32, into: Option<usize>, now: u64) {
        let flow = self.streams[s].flow;
        let socket = !self.streams[s].reverse && self.sockets[flow].is_some();
        if socket {
            let bytes = u64::from(self.app_bytes(s, frame));
            if let Some(b) = self.sockets[flow].as_mut() {
                if !b.admit(now, bytes) {
                    self.streams[s].dropped(frame);
                    return;
                }
            }
        }
        let next = if socket { Next::Read } else { Next::Deliver };
        match into.and_then(|i| self.endsys.receive(i)) {
            Some(k) => {
                let size = self.packet_size(s, frame);
                self.hold(k, s, frame, next, size);
            }
            None if socket => self.await_read(s, frame),
            None => self.deliver(s, frame, now),
        }
    }

    /// Packet `frame` of stream `s` waits in its socket for the application's next read
    /// (none before the application starts reading at its rate).
    pub(super) fn await_read(&mut self, s: usize, frame: u32) {
        let flow = self.streams[s].flow;
        let from = self.m.flows[flow].socket.map_or(0, |x| x.read_rate_from_ns);
        let reader = self.endsys.read(flow).filter(|_| self.now >= from);
        match reader {
            Some(k) => {
                let bytes = self.app_bytes(s, frame);
                self.hold(k, s, frame, Next::Deliver, bytes);
            }
            None => self.read(s, frame),
        }
    }

    /// The application reads packet `frame` of stream `s` now: it leaves the socket buffer.
    pub(super) fn read(&mut self, s: usize, frame: u32) {
        let flow = self.streams[s].flow;
        if !self.streams[s].reverse && self.sockets[flow].is_some() {
            let bytes = u64::from(self.app_bytes(s, frame));
            if let Some(b) = self.sockets[flow].as_mut() {
                b.read(self.now, bytes);
            }
        }
        self.deliver(s, frame, self.now)
    }

    /// Each host whose CPU costs anything: its busy time over the run's duration.
    pub(super) fn host_reports(&self) -> Vec<HostReport> {
        let iface_to: Vec<usize> = self.ifaces.iter().map(|i| i.to).collect();
        let run_ns = self.m.duration_ns.max(1);
        (self.m.nodes.iter().enumerate())
            .filter(|(_, n)| n.kind == NodeKind::Host)
            .filter_map(|(node, n)| {
                let (send, receive) = self.endsys.cpu_busy_ns(node, &iface_to);
                let e = &n.endsys;
                let costs = [
                    e.send_cost_ns,
                    e.send_byte_cost_ns,
                    e.receive_cost_ns,
                    e.receive_byte_cost_ns,
                ];
                costs.iter().any(|&c| c > 0).then(|| HostReport {
                    name: n.name.clone(),
                    send_busy_ns: send,
                    receive_busy_ns: receive,
                    cpu_ratio: (send + receive) as f64 / run_ns as f64,
                })
            })
            .collect()
    }
}
