//! Point-to-multipoint VCs: a root stream's packets are recorded on each leaf's stream as
//! they are sent (same frame numbers, so the leaf's AAL5 reassembly knows each frame's
//! cells), and its cells are copied onto a leaf's VC at the switch where the leaf's branch
//! leaves the root's path (`flowlab_atm::replicate::PointToMultipoint`).

use flowlab_atm::replicate::PointToMultipoint;
use flowlab_atm::switch::Verdict as AtmVerdict;
use flowlab_atm::{CellMeta, VcId};

use super::{IfaceKind, Payload, Sim};

impl Sim<'_> {
    /// The root stream `s` just sent the datagram starting at `frame`: each leaf records its
    /// packets as they stand (cells counted, pieces of a fragmented datagram included) and
    /// its sender counts it.
    pub(super) fn copy_to_replicas(
        &mut self,
        s: usize,
        frame: u32,
        payload: Payload,
        size: u32,
        deadline: Option<u64>,
    ) {
        let root = &self.streams[s];
        let first = frame.wrapping_sub(root.base) as usize;
        let records: Vec<_> = root.inflight.iter().skip(first).copied().collect();
        for k in 0..self.streams[s].replicas.len() {
            let leaf = self.streams[s].replicas[k].0;
            let st = &mut self.streams[leaf];
            debug_assert_eq!(st.next_frame, frame, "a leaf's frames follow its root's");
            for p in &records {
                st.inflight.push_back(*p);
                st.next_frame = st.next_frame.wrapping_add(1);
            }
            let flow = st.flow;
            self.count_sent(flow, payload, size, deadline);
        }
    }

    /// Root stream `s`'s `cell` reached switch `node`: the leaves branching here get a copy
    /// each, queued on their own branch's port.
    pub(super) fn replicate_cell(&mut self, s: usize, node: usize, cell: CellMeta, now: u64) {
        let here: Vec<usize> = (self.streams[s].replicas.iter())
            .filter(|&&(_, branch)| branch == node)
            .map(|&(leaf, _)| leaf)
            .collect();
        let leaves = PointToMultipoint::new(here.iter().map(|&l| VcId(l as u32)).collect());
        for copy in leaves.replicate(cell) {
            let leaf = copy.vc.0 as usize;
            let st = &self.streams[leaf];
            let Some(&i) = (st.path.iter().position(|&n| n == node)).and_then(|h| st.ifaces.get(h))
            else {
                continue;
            };
            self.settle(i);
            if let IfaceKind::Atm(port) = &mut self.ifaces[i].kind {
                if port.enqueue(now, copy) != AtmVerdict::Queued {
                    self.streams[leaf].dropped(copy.frame);
                }
            }
            self.ensure_iface(i);
        }
    }
}
