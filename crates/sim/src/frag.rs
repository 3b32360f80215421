//! IPv4 fragmentation (RFC 791) and reassembly with its timeout and memory bound, as a
//! simulated host or router does it. Only sizes and offsets are modelled, not bytes.

use std::collections::BTreeMap;

/// The IPv4 header without options, repeated on every fragment.
pub(crate) const IP_HEADER: u32 = 20;
/// Linux's `net.ipv4.ipfrag_time`: an incomplete datagram is given up 30 s after its first
/// fragment arrived.
pub(crate) const REASSEMBLY_TIMEOUT_NS: u64 = 30_000_000_000;
/// Linux's `net.ipv4.ipfrag_high_thresh` (4 MiB): fragments that would make a receiver hold
/// more data than this are dropped.
pub(crate) const REASSEMBLY_BOUND_BYTES: u64 = 4 << 20;

/// Part of a datagram's data: `offset` and `len` in bytes of the data after the IP header,
/// `more` the MF flag (false on the last part, and on a whole datagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece {
    pub offset: u32,
    pub len: u32,
    pub more: bool,
}

impl Piece {
    /// A whole datagram of `size` IP bytes.
    pub(crate) fn whole(size: u32) -> Piece {
        Piece {
            offset: 0,
            len: size.saturating_sub(IP_HEADER),
            more: false,
        }
    }

    /// IP bytes on the wire: the data and its own header.
    pub(crate) fn wire_size(&self) -> u32 {
        self.len + IP_HEADER
    }

    /// The fragments a node sends of this piece on a link of `mtu` bytes: itself if it fits,
    /// else parts of the most data a multiple of 8 bytes allows, the last with the piece's MF.
    /// An MTU below 28 bytes (8 data bytes) is refused at load, so every part carries data.
    pub(crate) fn fragment(&self, mtu: u32) -> Vec<Piece> {
        if self.wire_size() <= mtu {
            return vec![*self];
        }
        let step = (mtu.saturating_sub(IP_HEADER) / 8 * 8).max(8);
        let mut parts = Vec::with_capacity(self.len.div_ceil(step) as usize);
        let mut done = 0;
        while done < self.len {
            let len = step.min(self.len - done);
            parts.push(Piece {
                offset: self.offset + done,
                len,
                more: self.more || done + len < self.len,
            });
            done += len;
        }
        parts
    }
}

/// What a fragment's arrival did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// The datagram is whole: its data length.
    Complete(u32),
    /// More fragments are awaited.
    Pending,
    /// Dropped: holding it would pass the memory bound.
    Refused,
}

/// One datagram being put together.
#[derive(Debug)]
struct Partial {
    first_ns: u64,
    /// Data length, known once the last fragment (MF clear) arrived.
    total: Option<u32>,
    /// Received ranges (start → end), disjoint and not touching.
    have: BTreeMap<u32, u32>,
    bytes: u64,
}

impl Partial {
    /// Records `[start, end)`; returns the bytes it added (overlaps count once).
    fn add(&mut self, start: u32, end: u32) -> u64 {
        let (mut s, mut e) = (start, end);
        let touching: Vec<(u32, u32)> = self
            .have
            .range(..=end)
            .filter(|&(_, &re)| re >= start)
            .map(|(&rs, &re)| (rs, re))
            .collect();
        let mut before = 0;
        for (rs, re) in touching {
            self.have.remove(&rs);
            before += u64::from(re - rs);
            s = s.min(rs);
            e = e.max(re);
        }
        self.have.insert(s, e);
        let added = u64::from(e - s) - before;
        self.bytes += added;
        added
    }

    fn complete(&self) -> Option<u32> {
        let total = self.total?;
        let whole = self.have.len() == 1 && self.have.get(&0) == Some(&total);
        whole.then_some(total)
    }
}

/// A receiver's reassembly queues, keyed by datagram, with Linux's timeout and bound.
#[derive(Debug)]
pub(crate) struct Reassembler {
    timeout_ns: u64,
    bound_bytes: u64,
    held_bytes: u64,
    partial: BTreeMap<u64, Partial>,
    /// Datagrams put together.
    pub reassembled: u64,
    /// Datagrams given up after the timeout (a fragment never came).
    pub timed_out: u64,
    /// Fragments dropped at the memory bound.
    pub refused: u64,
}

impl Reassembler {
    pub(crate) fn new(timeout_ns: u64, bound_bytes: u64) -> Reassembler {
        Reassembler {
            timeout_ns,
            bound_bytes,
            held_bytes: 0,
            partial: BTreeMap::new(),
            reassembled: 0,
            timed_out: 0,
            refused: 0,
        }
    }

    /// Datagrams incomplete now.
    pub(crate) fn pending(&self) -> u64 {
        self.partial.len() as u64
    }

    /// Fragment `piece` of datagram `key` arrives at `now`.
    pub(crate) fn arrive(&mut self, now: u64, key: u64, piece: Piece) -> Arrival {
        self.expire(now);
        let new_bytes = u64::from(piece.len);
        if self.held_bytes + new_bytes > self.bound_bytes {
            self.refused += 1;
            return Arrival::Refused;
        }
        let p = self.partial.entry(key).or_insert_with(|| Partial {
            first_ns: now,
            total: None,
            have: BTreeMap::new(),
            bytes: 0,
        });
        if !piece.more {
            p.total = Some(piece.offset + piece.len);
        }
        self.held_bytes += p.add(piece.offset, piece.offset + piece.len);
        let Some(total) = p.complete() else {
            return Arrival::Pending;
        };
        let held = p.bytes;
        self.partial.remove(&key);
        self.held_bytes -= held;
        self.reassembled += 1;
        Arrival::Complete(total)
    }

    /// Gives up every datagram whose first fragment came `timeout` or longer before `now`.
    pub(crate) fn expire(&mut self, now: u64) {
        let timeout = self.timeout_ns;
        let before = self.partial.len();
        let mut freed = 0;
        self.partial.retain(|_, p| {
            let keep = now.saturating_sub(p.first_ns) < timeout;
            if !keep {
                freed += p.bytes;
            }
            keep
        });
        self.held_bytes -= freed;
        self.timed_out += (before - self.partial.len()) as u64;
    }
}

#[cfg(test)]
mod tests;
