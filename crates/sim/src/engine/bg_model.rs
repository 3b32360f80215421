//! A background source driven by a traffic model (`[[background]] traffic = ...`): the same
//! sender core and models a flow sends (on/off, bursts, TCP-like message rounds ...), each
//! packet an AAL5 frame whose cells reach the loaded port one cell time apart, as a host
//! adapter's line delivers them (so a big datagram is a burst of back-to-back cells), or at
//! the slower `sar_rate` of an adapter that segments no faster.

use std::collections::VecDeque;

use flowlab_atm::{cells_per_packet, Encapsulation};
use flowlab_traffic::EndCondition;

use crate::scenario::BackgroundSpec;
use crate::sender::{FlowSender, SendSpec, Transmit};

/// A background model's packets on their way in, cell by cell.
pub(super) struct ModelSource {
    sender: FlowSender,
    header_bytes: u32,
    encap: Encapsulation,
    cell_ns: f64,
    /// When the input line has sent every cell given to it so far.
    line_free_ns: f64,
    /// Cells not yet arrived: (arrival, frame, last of its frame).
    pending: VecDeque<(u64, u32, bool)>,
    next_poll: Option<u64>,
    frame: u32,
    due: Vec<Transmit>,
}

impl ModelSource {
    /// The source of `spec`'s model (if it has one), its cells `cell_bit_rate` apart.
    pub(super) fn new(
        b: &BackgroundSpec,
        model: &SendSpec,
        seed: u64,
        encap: Encapsulation,
        cell_bit_rate: f64,
    ) -> Option<ModelSource> {
        let end = EndCondition {
            until_ns: Some(b.stop_ns),
            count: None,
        };
        let sender = FlowSender::new(model, b.start_ns, end, seed).ok()?;
        Some(ModelSource {
            sender,
            header_bytes: model.header_bytes,
            encap,
            cell_ns: 424e9 / cell_bit_rate.max(1.0),
            line_free_ns: 0.0,
            pending: VecDeque::new(),
            next_poll: Some(b.start_ns),
            frame: 0,
            due: Vec::new(),
        })
    }

    /// When something next happens: a packet due, or a cell arriving.
    pub(super) fn next_ns(&self) -> Option<u64> {
        let cell = self.pending.front().map(|c| c.0);
        match (self.next_poll, cell) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Appends the cells arriving by `now` to `out` as (frame, last of its frame).
    pub(super) fn cells_due(&mut self, now: u64, out: &mut Vec<(u32, bool)>) {
        if self.next_poll.is_some_and(|t| t <= now) {
            self.next_poll = self.sender.poll(now, &mut self.due);
            for t in std::mem::take(&mut self.due) {
                self.line_up(t);
            }
        }
        while let Some(&(at, frame, last)) = self.pending.front() {
            if at > now {
                break;
            }
            self.pending.pop_front();
            out.push((frame, last));
        }
    }

    /// Packet `t`'s cells on the input line, after those before it.
    fn line_up(&mut self, t: Transmit) {
        let size = t.payload.saturating_add(self.header_bytes) as usize;
        let n = cells_per_packet(size, self.encap).max(1);
        let start = self.line_free_ns.max(t.deadline_ns as f64);
        for j in 0..n {
            let at = (start + j as f64 * self.cell_ns).round() as u64;
            self.pending.push_back((at, self.frame, j + 1 == n));
        }
        self.line_free_ns = start + n as f64 * self.cell_ns;
        self.frame = self.frame.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Sim;

    /// 8 KiB datagrams recirculated twice through an idle OC-3c port, their cells at the
    /// line's rate or at `sar_rate`.
    fn loop_port(sar_rate: &str) -> String {
        format!(
            r#"
[sim]
duration = "200ms"
[[node]]
name = "sw"
kind = "atm-switch"
[[node]]
name = "h"
kind = "host"
[[link]]
from = "sw"
to = "h"
phy = "OC-3c"
buffer_cells = 1024
[[background]]
name = "loops"
from = "sw"
to = "h"
traffic = "poisson:pps=50,size=8192"
passes = 2
loop_delay = "20us"
{sar_rate}
"#
        )
    }

    fn port_after(text: &str) -> crate::report::PortReport {
        let scenario = crate::load(text).expect("scenario loads");
        let out = Sim::new(&scenario.variants[0].model, 1).run();
        out.ports
            .into_iter()
            .find(|p| p.name == "sw->h")
            .expect("port")
    }

    #[test]
    fn a_background_adapter_slower_than_the_line_spaces_its_cells() {
        // At the line's rate each datagram's 172 cells arrive back to back, and their second
        // pass comes back while the first is still arriving: two cells a slot, a queue.
        let bursts = port_after(&loop_port(""));
        assert!(bursts.max_occupancy_cells > 100, "{bursts:?}");
        // A quarter of the line's rate: both passes together fill half the slots.
        let spaced = port_after(&loop_port("sar_rate = \"37.44M\""));
        assert!(spaced.max_occupancy_cells <= 2, "{spaced:?}");
        assert_eq!(spaced.cells_dropped, 0);
        assert!(spaced.cells_in > 1000, "{spaced:?}");
        // The same datagrams either way (the model's draws do not depend on cell times).
        assert_eq!(spaced.cells_in, bursts.cells_in);
    }
}
