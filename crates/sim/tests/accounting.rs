//! The simulator's accounting: every packet sent is delivered, lost to a drop, or still in
//! flight at the end, and rates never exceed what the links can carry.

use flowlab_sim::{load, run};

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
}
