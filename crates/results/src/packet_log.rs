//! Per-packet records from both ends, merged into one table and written as CSV.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::PacketRecord;

/// Joins the sender's records (send times) with the receiver's (receive and echo times) by
/// sequence number. Packets the receiver never saw keep `received_ns: None`: lost.
pub fn merge(sent: &[PacketRecord], received: &[PacketRecord]) -> Vec<PacketRecord> {
    let mut by_key: HashMap<(u32, u64), &PacketRecord> =
        received.iter().map(|r| ((r.flow, r.seq), r)).collect();
    let mut merged: Vec<PacketRecord> = sent
        .iter()
        .map(|s| match by_key.remove(&(s.flow, s.seq)) {
            Some(r) => PacketRecord {
                received_ns: r.received_ns,
                echoed_ns: r.echoed_ns,
                ..*s
            },
            None => *s,
        })
        .collect();
    // Received packets the sender did not record (its log was capped): keep them too.
    merged.extend(by_key.into_values().copied());
    merged.sort_by_key(|r| (r.flow, r.seq));
    merged
}

fn opt(v: Option<u64>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// CSV with a header row; times in ns (CLOCK_REALTIME of the end that took them), empty when
/// unknown; `lost` is 1 for a packet sent but never received.
pub fn write_csv(records: &[PacketRecord], out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "flow,seq,size,sent_ns,received_ns,echoed_ns,lost")?;
    for r in records {
        let lost = u8::from(r.sent_ns.is_some() && r.received_ns.is_none());
        writeln!(
            out,
            "{},{},{},{},{},{},{}",
            r.flow,
            r.seq,
            r.size,
            opt(r.sent_ns),
            opt(r.received_ns),
            opt(r.echoed_ns),
            lost
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, sent: Option<u64>, received: Option<u64>) -> PacketRecord {
        PacketRecord {
            flow: 0,
            seq,
            size: 100,
            sent_ns: sent,
            received_ns: received,
            echoed_ns: None,
        }
    }

    #[test]
    fn merges_and_marks_losses() {
        let sent = [
            rec(0, Some(10), None),
            rec(1, Some(20), None),
            rec(2, Some(30), None),
        ];
        let received = [
            rec(2, Some(30), Some(35)),
            rec(0, Some(10), Some(15)),
            rec(3, Some(40), Some(45)),
        ];
        let merged = merge(&sent, &received);
        assert_eq!(merged.len(), 4);
        let mut csv = Vec::new();
        write_csv(&merged, &mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "flow,seq,size,sent_ns,received_ns,echoed_ns,lost\n0,0,100,10,15,,0\n0,1,100,20,,,1\n0,2,100,30,35,,0\n0,3,100,40,45,,0\n"
        );
    }
}
