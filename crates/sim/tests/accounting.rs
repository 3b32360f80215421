//! The simulator's accounting: every packet sent is delivered, lost to a drop, or still in
//! flight at the end, and rates never exceed what the links can carry.

use flowlab_sim::{load, render_human, run};

/// Two hosts joined directly by one ATM link, and `flow`.
fn direct_atm(flow: &str) -> String {
    format!(
        "[sim]\nduration = \"1s\"\n\
         [[node]]\nname = \"a\"\nkind = \"host\"\n\
         [[node]]\nname = \"b\"\nkind = \"host\"\n\
         [[link]]\nfrom = \"a\"\nto = \"b\"\nphy = \"OC-3c\"\n{flow}"
    )
}

/// A host's adapter holding one cell defers its wake-up; the next packet's `forward` replayed
/// it after choosing the packet's slot among those in flight, so the delivery it replayed
/// shifted the slots and every other packet was reported lost with no cell dropped.
#[test]
fn a_direct_atm_link_delivers_every_packet() {
    let flow = "[[flow]]\nname = \"u\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"udp\"\n\
                rate = \"1M\"\nsize = \"1000B\"\n";
    let r = run(&load(&direct_atm(flow)).unwrap(), None);
    let f = &r.runs[0].flows[0];
    assert_eq!(f.sender.packets_sent, 125);
    assert_eq!(f.receiver.packets.unique, 125, "{:?}", f.receiver.packets);
    assert_eq!(f.loss_ratio, 0.0);
    assert!(r.runs[0].ports.iter().all(|p| p.cells_dropped == 0));
    // Simulated arrivals are stamped by the virtual clock, not the kernel.
    assert_eq!(f.receiver.arrival_clock, "virtual");
}

/// A TCP flow shaped to 6 Mb/s with a 1 MiB window keeps about a window of segments in its
/// shaper's queue: at the end they are in flight, not lost.
#[test]
fn segments_queued_at_the_end_are_in_flight_not_lost() {
    let text = "[sim]\nduration = \"3s\"\ndrain = \"10ms\"\n\
        [[node]]\nname = \"a\"\nkind = \"host\"\n\
        [[node]]\nname = \"s\"\nkind = \"atm-switch\"\n\
        [[node]]\nname = \"b\"\nkind = \"host\"\n\
        [[link]]\nfrom = \"a\"\nto = \"s\"\nphy = \"OC-3c\"\n\
        [[link]]\nfrom = \"s\"\nto = \"b\"\nphy = \"OC-3c\"\ndelay = \"20ms\"\n\
        [[flow]]\nname = \"t\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"tcp\"\n\
        window = \"1MiB\"\nmss = 9140\npcr = \"6M\"\nshape = true\n";
    let r = run(&load(text).unwrap(), None);
    let f = &r.runs[0].flows[0];
    let tcp = f.tcp.unwrap();
    assert_eq!(tcp.retransmitted_segments, 0);
    // Most of the window (115 segments of 9140 B) waits in the shaper.
    assert!(f.in_flight_at_end > 50, "{}", f.in_flight_at_end);
    let text = render_human(&r);
    assert!(
        text.contains(&format!("in flight at end {}", f.in_flight_at_end)),
        "{text}"
    );
    assert_eq!(f.loss_ratio, 0.0);
    assert_eq!(f.receiver.packets.lost, 0);
    assert_eq!(
        f.receiver.packets.unique + f.in_flight_at_end,
        tcp.segments_sent
    );
}

/// Drops are still losses: a UDP flow at twice an IP link's rate loses about half its
/// packets at the link's queue, and after the drain nothing is left in flight.
#[test]
fn drops_are_lost_and_nothing_is_left_in_flight_after_a_drain() {
    let text = "[sim]\nduration = \"1s\"\n\
        [[node]]\nname = \"a\"\nkind = \"host\"\n\
        [[node]]\nname = \"b\"\nkind = \"host\"\n\
        [[link]]\nfrom = \"a\"\nto = \"b\"\nrate = \"1M\"\nbuffer_packets = 10\n\
        [[flow]]\nname = \"u\"\nfrom = \"a\"\nto = \"b\"\nprotocol = \"udp\"\n\
        rate = \"2M\"\nsize = \"1000B\"\n";
    let r = run(&load(text).unwrap(), None);
    let f = &r.runs[0].flows[0];
    assert_eq!(f.in_flight_at_end, 0);
    assert_eq!(f.sender.packets_sent, 250);
    let p = f.receiver.packets;
    assert_eq!(p.unique + p.lost, 250);
    assert_eq!(p.lost, r.runs[0].ports[0].dropped_buffer_full);
    assert!((f.loss_ratio - 0.5).abs() < 0.05, "{}", f.loss_ratio);
}
