//! What the emulator reads from a frame's bytes, and the bounded store holding the bytes of
//! frames inside the model.

use flowlab_link::Frame;
use flowlab_sys::packet::VNET_HDR_LEN;

/// Ethernet header without VLAN tags.
const ETH_HEADER: usize = 14;

/// A frame's model view: its network-layer length and DSCP (IPv4 TOS or IPv6 traffic
/// class; 0 for anything else). `raw` starts with the socket's vnet header.
pub fn describe(id: u64, raw: &[u8]) -> Frame {
    let bytes = raw.get(VNET_HDR_LEN..).unwrap_or_default();
    let dscp = match (bytes.get(12..14), bytes.get(14), bytes.get(15)) {
        (Some([0x08, 0x00]), _, Some(tos)) => tos >> 2,
        (Some([0x86, 0xdd]), Some(b0), Some(b1)) => (((b0 & 0x0f) << 4) | (b1 >> 4)) >> 2,
        _ => 0,
    };
    Frame {
        id,
        len: bytes.len().saturating_sub(ETH_HEADER) as u32,
        dscp,
    }
}

struct Slot {
    bytes: Vec<u8>,
    /// Events still to come about the frame (a duplicated frame has two).
    refs: u8,
    /// When the emulator read it (CLOCK_MONOTONIC ns), for the release error's parts.
    read_ns: u64,
}

/// Frames held, by id (the slot index); freed slots keep their buffers for reuse.
pub struct Store {
    slots: Vec<Slot>,
    free: Vec<usize>,
    limit: usize,
    held: usize,
}

impl Store {
    /// A store of at most `limit` frames.
    pub fn new(limit: usize) -> Store {
        Store {
            slots: Vec::new(),
            free: Vec::new(),
            limit,
            held: 0,
        }
    }

    /// Keeps a copy of the frame made of `parts`, read at `read_ns`; its id, or `None` when
    /// the store is full.
    pub fn insert(&mut self, parts: [&[u8]; 2], read_ns: u64) -> Option<u64> {
        if self.held >= self.limit {
            return None;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    bytes: Vec::new(),
                    refs: 0,
                    read_ns: 0,
                });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[i];
        slot.bytes.clear();
        slot.bytes.extend_from_slice(parts[0]);
        slot.bytes.extend_from_slice(parts[1]);
        slot.refs = 1;
        slot.read_ns = read_ns;
        self.held += 1;
        Some(i as u64)
    }

    pub fn bytes(&self, id: u64) -> Option<&[u8]> {
        self.slots
            .get(id as usize)
            .filter(|s| s.refs > 0)
            .map(|s| s.bytes.as_slice())
    }

    /// When frame `id` was read (0 once freed).
    pub fn read_ns(&self, id: u64) -> u64 {
        self.slots
            .get(id as usize)
            .filter(|s| s.refs > 0)
            .map_or(0, |s| s.read_ns)
    }

    /// Completes the transport checksum of frame `id` (which starts with a vnet header).
    pub fn complete_checksum(&mut self, id: u64) {
        if let Some(s) = self.slots.get_mut(id as usize).filter(|s| s.refs > 0) {
            crate::checksum::complete(s.bytes.get_mut(VNET_HDR_LEN..).unwrap_or_default());
        }
    }

    /// One more event will come about `id`.
    pub fn add_ref(&mut self, id: u64) {
        if let Some(s) = self.slots.get_mut(id as usize).filter(|s| s.refs > 0) {
            s.refs = s.refs.saturating_add(1);
        }
    }

    /// An event about `id` came: frees it after its last.
    pub fn release(&mut self, id: u64) {
        let Some(s) = self.slots.get_mut(id as usize).filter(|s| s.refs > 0) else {
            return;
        };
        s.refs -= 1;
        if s.refs == 0 {
            self.free.push(id as usize);
            self.held -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `eth` (from the Ethernet header on) behind an empty vnet header.
    fn raw(eth: &[u8]) -> Vec<u8> {
        [&[0u8; VNET_HDR_LEN][..], eth].concat()
    }

    #[test]
    fn dscp_and_length_from_ipv4_and_ipv6_frames() {
        let mut v4 = vec![0u8; 14 + 20];
        v4[12..14].copy_from_slice(&[0x08, 0x00]);
        v4[15] = 46 << 2; // EF
        assert_eq!(
            describe(1, &raw(&v4)),
            Frame {
                id: 1,
                len: 20,
                dscp: 46
            }
        );
        let mut v6 = vec![0u8; 14 + 40];
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        // Version 6, traffic class 0x28 (AF11 = 10 << 2).
        v6[14] = 0x60 | (0x28 >> 4);
        v6[15] = (0x28 & 0x0f) << 4;
        assert_eq!(describe(2, &raw(&v6)).dscp, 10);
        assert_eq!(describe(3, &raw(&[0u8; 5])).len, 0);
        assert_eq!(
            describe(3, &[0u8; 5]),
            Frame {
                id: 3,
                len: 0,
                dscp: 0
            }
        );
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(describe(4, &raw(&arp)).dscp, 0);
    }

    #[test]
    fn the_store_is_bounded_and_frees_after_the_last_event() {
        let mut s = Store::new(2);
        let a = s.insert([b"aa", b""], 7).unwrap();
        let b = s.insert([b"b", b"bb"], 8).unwrap();
        assert_eq!(s.insert([b"c", b""], 9), None);
        assert_eq!((s.read_ns(a), s.read_ns(b)), (7, 8));
        s.add_ref(a);
        s.release(a);
        assert_eq!(s.bytes(a), Some(&b"aa"[..]));
        s.release(a);
        assert_eq!(s.bytes(a), None);
        assert_eq!(s.read_ns(a), 0);
        let c = s.insert([b"cc", b""], 10).unwrap();
        assert_eq!(c, a, "the slot is reused");
        assert_eq!(s.bytes(b), Some(&b"bbb"[..]));
        assert_eq!(s.read_ns(c), 10);
        assert_eq!(s.insert([b"d", b""], 11), None, "still full");
    }
}
