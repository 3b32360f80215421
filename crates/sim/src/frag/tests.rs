use proptest::prelude::*;

use super::*;

/// The header's flags-and-fragment-offset field (MF is 0x2000, the offset in 8-byte units),
/// as it would go on the wire.
fn flags_and_offset(p: &Piece) -> u16 {
    let mf = if p.more { 0x2000 } else { 0 };
    mf | (p.offset / 8) as u16
}

fn sizes(size: u32, mtu: u32) -> Vec<u32> {
    Piece::whole(size)
        .fragment(mtu)
        .iter()
        .map(Piece::wire_size)
        .collect()
}

fn fields(size: u32, mtu: u32) -> Vec<[u8; 2]> {
    Piece::whole(size)
        .fragment(mtu)
        .iter()
        .map(|p| flags_and_offset(p).to_be_bytes())
        .collect()
}

#[test]
fn ethernet_mtu_fragments_as_rfc_791() {
    // Seed 002's 2048 and 4096-byte pings (IP 2076 and 4124 bytes) at a 1500-byte MTU.
    assert_eq!(sizes(2076, 1500), [1500, 596]);
    assert_eq!(fields(2076, 1500), [[0x20, 0x00], [0x00, 0xb9]]);
    assert_eq!(sizes(4124, 1500), [1500, 1500, 1164]);
    assert_eq!(
        fields(4124, 1500),
        [[0x20, 0x00], [0x20, 0xb9], [0x01, 0x72]]
    );
    // Fits: unchanged, no MF, offset 0.
    assert_eq!(sizes(1500, 1500), [1500]);
    assert_eq!(fields(1500, 1500), [[0, 0]]);
}

#[test]
fn clip_mtu_fragments_as_rfc_791() {
    // RFC 2225's 9180-byte MTU: 9160 data bytes per fragment (a multiple of 8).
    assert_eq!(sizes(20_000, 9180), [9180, 9180, 1680]);
    assert_eq!(
        fields(20_000, 9180),
        [[0x20, 0x00], [0x24, 0x79], [0x08, 0xf2]]
    );
    assert_eq!(sizes(9180, 9180), [9180]);
    assert_eq!(sizes(9181, 9180), [9180, 21]);
}

#[test]
fn a_router_refragments_a_fragment_keeping_offsets_and_mf() {
    let first = Piece::whole(20_000).fragment(9180)[0];
    let again = first.fragment(1500);
    assert_eq!(again.len(), 7);
    assert!(
        again.iter().all(|p| p.more),
        "a middle fragment's parts all say MF"
    );
    assert_eq!(again[6].offset, 6 * 1480);
    assert_eq!(again.iter().map(|p| p.len).sum::<u32>(), 9160);
}

#[test]
fn a_missing_fragment_times_out() {
    let mut r = Reassembler::new(REASSEMBLY_TIMEOUT_NS, REASSEMBLY_BOUND_BYTES);
    let parts = Piece::whole(4124).fragment(1500);
    assert_eq!(r.arrive(0, 7, parts[0]), Arrival::Pending);
    assert_eq!(r.arrive(1, 7, parts[2]), Arrival::Pending);
    r.expire(REASSEMBLY_TIMEOUT_NS - 1);
    assert_eq!((r.timed_out, r.held_bytes), (0, 1480 + 1144));
    r.expire(REASSEMBLY_TIMEOUT_NS);
    assert_eq!((r.timed_out, r.held_bytes), (1, 0));
    // The late fragment starts a new datagram that never completes.
    assert_eq!(
        r.arrive(REASSEMBLY_TIMEOUT_NS, 7, parts[1]),
        Arrival::Pending
    );
    assert_eq!(r.reassembled, 0);
}

#[test]
fn the_bound_refuses_fragments_and_completion_frees_memory() {
    let mut r = Reassembler::new(REASSEMBLY_TIMEOUT_NS, 3000);
    let parts = Piece::whole(4124).fragment(1500);
    assert_eq!(r.arrive(0, 1, parts[0]), Arrival::Pending);
    assert_eq!(r.arrive(0, 2, parts[0]), Arrival::Pending);
    assert_eq!(r.arrive(0, 1, parts[1]), Arrival::Refused);
    assert_eq!(r.refused, 1);
    r.expire(REASSEMBLY_TIMEOUT_NS);
    for p in &parts[..2] {
        assert_eq!(r.arrive(REASSEMBLY_TIMEOUT_NS, 3, *p), Arrival::Pending);
    }
    assert_eq!(
        r.arrive(REASSEMBLY_TIMEOUT_NS, 3, parts[2]),
        Arrival::Refused
    );
}

proptest! {
    /// Whatever the order, duplicates included, the datagram comes back whole exactly when
    /// its last missing byte arrives, and once.
    #[test]
    fn reassembly_gives_back_the_datagram_in_any_order(
        size in 29u32..65_535,
        mtu in 68u32..9181,
        keys in proptest::collection::vec(any::<u64>(), 1..40),
        dup in any::<bool>(),
    ) {
        let mut parts = Piece::whole(size).fragment(mtu);
        prop_assert!(parts.iter().all(|p| p.wire_size() <= mtu));
        // A whole datagram's copy is a second datagram, not a duplicate fragment.
        if dup && parts.len() > 1 {
            parts.push(parts[0]);
        }
        // Shuffle by the random keys.
        let mut order: Vec<(u64, Piece)> =
            parts.iter().enumerate().map(|(i, p)| (keys[i % keys.len()] ^ i as u64, *p)).collect();
        order.sort_by_key(|(k, _)| *k);
        let mut r = Reassembler::new(REASSEMBLY_TIMEOUT_NS, REASSEMBLY_BOUND_BYTES);
        let mut done = Vec::new();
        for (_, p) in order {
            if let Arrival::Complete(len) = r.arrive(0, 9, p) {
                done.push(len);
            }
        }
        // A duplicate arriving after completion opens a new, incomplete datagram.
        prop_assert_eq!(&done, &vec![size - IP_HEADER]);
        prop_assert_eq!(r.reassembled, 1);
    }

    /// Fragments of many datagrams, some never completed: the receiver never holds more than
    /// its bound, and what it holds is what its incomplete datagrams hold.
    #[test]
    fn reassembly_never_holds_more_than_its_bound(
        arrivals in proptest::collection::vec((0u64..16, 0u32..8, 0u64..5_000_000_000), 1..300),
        bound in 1_000u64..20_000,
    ) {
        let mut r = Reassembler::new(1_000_000_000, bound);
        let mut now = 0;
        for (key, part, gap) in arrivals {
            now += gap / 16;
            let parts = Piece::whole(4124 + key as u32 * 100).fragment(576);
            let piece = parts[part as usize % parts.len()];
            r.arrive(now, key, piece);
            prop_assert!(r.held_bytes <= bound);
            let held: u64 = r.partial.values().map(|p| p.bytes).sum();
            prop_assert_eq!(held, r.held_bytes);
        }
    }
}
