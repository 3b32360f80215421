//! A stream's IP fragmentation: a datagram larger than a link of its path is sent as
//! fragments, each its own packet record (and AAL5 frame), and put together at the last node.
//!
//! Every record a datagram will ever need is made when it is sent, depth first: the datagram,
//! then, if some link is too small for it, its fragments at the first such link, each followed
//! by its own fragments at a later, smaller link. Frame numbers therefore follow the order in
//! which the pieces travel, so the stream's rule "a delivered packet settles every earlier
//! one" still holds, and a router splits a record by forwarding the records after it.

use super::{Fate, Payload, Pkt, Stream};
use crate::frag::{Arrival, Piece, Reassembler, REASSEMBLY_BOUND_BYTES, REASSEMBLY_TIMEOUT_NS};
use crate::report::FragReport;

/// A record that is part of a fragmented datagram.
#[derive(Debug, Clone, Copy)]
pub(super) struct Frag {
    /// The datagram's first record: its key at the receiver.
    datagram: u32,
    datagram_size: u32,
    piece: Piece,
    /// The hop whose link the piece does not fit: there it is split into its parts.
    split_hop: Option<usize>,
    /// This record and its parts' records, depth first.
    subtree: u32,
}

/// A stream's fragmentation state: the MTU of each hop's link, the receiver's reassembly and
/// the counts the report shows.
#[derive(Debug)]
pub(super) struct Fragmenter {
    mtus: Vec<u32>,
    reasm: Reassembler,
    datagrams_fragmented: u64,
    fragments: u64,
}

impl Fragmenter {
    pub(super) fn new(mtus: Vec<u32>) -> Fragmenter {
        Fragmenter {
            mtus,
            reasm: Reassembler::new(REASSEMBLY_TIMEOUT_NS, REASSEMBLY_BOUND_BYTES),
            datagrams_fragmented: 0,
            fragments: 0,
        }
    }

    /// Whether this stream ever fragmented (a flow of small packets reports nothing).
    fn used(&self) -> bool {
        self.datagrams_fragmented > 0 || self.reasm.reassembled > 0
    }

    /// Gives up what is still incomplete `timeout` after its first fragment, by `now`.
    pub(super) fn expire(&mut self, now: u64) {
        self.reasm.expire(now);
    }
}

/// Adds a piece's record, then its parts' records, depth first.
fn plan(piece: Piece, from_hop: usize, mtus: &[u32], out: &mut Vec<(Piece, Option<usize>, u32)>) {
    let at = out.len();
    let split = (from_hop..mtus.len()).find(|&h| piece.wire_size() > mtus[h]);
    out.push((piece, split, 1));
    if let Some(h) = split {
        for part in piece.fragment(mtus[h]) {
            plan(part, h + 1, mtus, out);
        }
    }
    out[at].2 = (out.len() - at) as u32;
}

impl Stream {
    /// Records a datagram of `size` IP bytes sent at `now` and returns its first frame: one
    /// record if it fits every link, else one per piece it will ever travel as.
    pub(super) fn push_datagram(&mut self, size: u32, now: u64, payload: Payload) -> u32 {
        let first = self.next_frame;
        let mut records = Vec::new();
        plan(Piece::whole(size), 0, &self.frag.mtus, &mut records);
        let fragmented = records.len() > 1;
        for (piece, split_hop, subtree) in records {
            let frag = fragmented.then_some(Frag {
                datagram: first,
                datagram_size: size,
                piece,
                split_hop,
                subtree,
            });
            self.inflight.push_back(Pkt {
                size: piece.wire_size(),
                cells: 0,
                dscp: self.dscp,
                sent_ns: now,
                payload,
                fate: Fate::InFlight,
                frag,
            });
            self.next_frame = self.next_frame.wrapping_add(1);
        }
        first
    }

    /// If record `frame` is split at `hop`, marks it so and returns its parts' frames.
    pub(super) fn split_at(&mut self, frame: u32, hop: usize) -> Vec<u32> {
        let Some(idx) = frame.checked_sub(self.base).map(|d| d as usize) else {
            return Vec::new();
        };
        let Some(p) = self.inflight.get_mut(idx) else {
            return Vec::new();
        };
        let Some(f) = p.frag.filter(|f| f.split_hop == Some(hop)) else {
            return Vec::new();
        };
        if p.fate != Fate::InFlight {
            return Vec::new();
        }
        p.fate = Fate::Split;
        if f.datagram == frame {
            self.frag.datagrams_fragmented += 1;
        }
        let mut parts = Vec::new();
        let mut next = frame.wrapping_add(1);
        let end = frame.wrapping_add(f.subtree);
        while next != end {
            parts.push(next);
            let sub = self
                .inflight
                .get(next.wrapping_sub(self.base) as usize)
                .and_then(|p| p.frag)
                .map_or(1, |f| f.subtree);
            next = next.wrapping_add(sub.max(1));
        }
        self.frag.fragments += parts.len() as u64;
        parts
    }

    /// A delivered record at the last node: the datagram it completes (as one packet of the
    /// datagram's size), itself if it is not a fragment, or nothing yet.
    pub(super) fn reassemble_ip(&mut self, pkt: Pkt, now: u64) -> Option<Pkt> {
        let Some(f) = pkt.frag else {
            return Some(pkt);
        };
        match self.frag.reasm.arrive(now, u64::from(f.datagram), f.piece) {
            Arrival::Complete(_) => Some(Pkt {
                size: f.datagram_size,
                frag: None,
                ..pkt
            }),
            Arrival::Pending | Arrival::Refused => None,
        }
    }

    /// Whether `p` stands for its datagram when counting packets still on the way: a whole
    /// datagram, or the piece carrying its first byte (pieces split further are settled).
    pub(super) fn counts_in_flight(p: &Pkt) -> bool {
        p.fate == Fate::InFlight && p.frag.is_none_or(|f| f.piece.offset == 0)
    }

    /// The fragmentation figures, when the stream fragmented or reassembled anything.
    pub(super) fn frag_report(&self) -> Option<FragReport> {
        let f = &self.frag;
        f.used().then_some(FragReport {
            datagrams_fragmented: f.datagrams_fragmented,
            fragments: f.fragments,
            reassembled: f.reasm.reassembled,
            reassembly_timeouts: f.reasm.timed_out,
            fragments_refused: f.reasm.refused,
            awaiting_reassembly_at_end: f.reasm.pending(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn planned(size: u32, mtus: &[u32]) -> Vec<(u32, Option<usize>, u32)> {
        let mut out = Vec::new();
        plan(Piece::whole(size), 0, mtus, &mut out);
        out.iter()
            .map(|(p, h, n)| (p.wire_size(), *h, *n))
            .collect()
    }

    #[test]
    fn a_datagram_that_fits_is_one_record() {
        assert_eq!(planned(1500, &[9180, 1500]), [(1500, None, 1)]);
    }

    #[test]
    fn the_host_and_then_a_router_fragment_depth_first() {
        // 4124 B over a 9180 B link, a router, then a 1500 B link: the router splits it.
        assert_eq!(
            planned(4124, &[9180, 1500]),
            [
                (4124, Some(1), 4),
                (1500, None, 1),
                (1500, None, 1),
                (1164, None, 1)
            ]
        );
        // 20000 B: the host splits at 9180, the router splits each 9180 B piece again.
        let p = planned(20_000, &[9180, 1500]);
        assert_eq!(p[0], (20_000, Some(0), p.len() as u32));
        assert_eq!(p[1], (9180, Some(1), 8));
        assert_eq!(p[2], (1500, None, 1));
        let leaves: u32 = p.iter().filter(|r| r.1.is_none()).map(|r| r.0 - 20).sum();
        assert_eq!(leaves, 20_000 - 20);
    }
}
