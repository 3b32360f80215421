//! The transport checksum of a frame read through AF_XDP, completed in software.
//!
//! A local stack's UDP or TCP frame on a veth usually leaves its checksum to the "device"
//! (CHECKSUM_PARTIAL: the field holds only the pseudo-header's sum). AF_PACKET's vnet header
//! carries that state on to the receiving stack; an XDP program sees bare bytes, so the
//! emulator computes the checksum of every unfragmented IPv4 or IPv6 UDP/TCP frame it reads
//! that way (recomputing a correct checksum changes nothing).

use flowlab_wire::checksum::{add_words, fold};

const ETH_HEADER: usize = 14;
const TCP: u8 = 6;
const UDP: u8 = 17;

/// Where a frame's transport segment lies and what its pseudo-header sums to.
struct Segment {
    proto: u8,
    start: usize,
    end: usize,
    pseudo_sum: u64,
}

/// Completes the checksum of the Ethernet frame `eth` in place when it carries UDP or TCP
/// directly over IPv4 (not a fragment) or IPv6 (no extension header); leaves anything else,
/// including a truncated frame, as it is.
pub fn complete(eth: &mut [u8]) {
    let Some(seg) = segment(eth) else {
        return;
    };
    let field = seg.start + if seg.proto == TCP { 16 } else { 6 };
    if field + 2 > seg.end {
        return;
    }
    eth[field..field + 2].fill(0);
    let mut sum = seg.pseudo_sum + (seg.end - seg.start) as u64;
    sum += add_words(&eth[seg.start..seg.end]);
    let mut c = !fold(sum);
    if c == 0 && seg.proto == UDP {
        c = 0xffff; // 0 means "no checksum" in UDP
    }
    eth[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

fn segment(eth: &[u8]) -> Option<Segment> {
    let ip = eth.get(ETH_HEADER..)?;
    match eth.get(12..14)? {
        [0x08, 0x00] => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
            let fragment = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x3fff != 0;
            let proto = *ip.get(9)?;
            let addrs = ip.get(12..20)?;
            (!fragment && ihl >= 20 && total >= ihl && total <= ip.len()).then_some(())?;
            transport(proto, ETH_HEADER + ihl, ETH_HEADER + total, addrs)
        }
        [0x86, 0xdd] => {
            let payload = usize::from(u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]));
            let addrs = ip.get(8..40)?;
            (40 + payload <= ip.len()).then_some(())?;
            transport(
                *ip.get(6)?,
                ETH_HEADER + 40,
                ETH_HEADER + 40 + payload,
                addrs,
            )
        }
        _ => None,
    }
}

fn transport(proto: u8, start: usize, end: usize, addrs: &[u8]) -> Option<Segment> {
    matches!(proto, TCP | UDP).then(|| Segment {
        proto,
        start,
        end,
        pseudo_sum: add_words(addrs) + u64::from(proto),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 UDP frame 10.77.0.1:40000 → 10.77.0.2:9999 with payload "flowlab!" and its
    /// checksum 0x837b (computed independently, with Python's struct module).
    fn udp4() -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f.extend_from_slice(&[
            0x45, 0, 0, 36, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 77, 0, 1, 10, 77, 0, 2,
        ]);
        f.extend_from_slice(&[0x9c, 0x40, 0x27, 0x0f, 0, 16, 0x83, 0x7b]);
        f.extend_from_slice(b"flowlab!");
        f
    }

    #[test]
    fn a_partial_udp_checksum_is_completed_and_a_full_one_kept() {
        let good = udp4();
        // As a sending stack leaves it: the pseudo-header's folded sum, not inverted.
        let mut partial = good.clone();
        let pseudo = fold(add_words(&good[26..34]) + 17 + 16);
        partial[40..42].copy_from_slice(&pseudo.to_be_bytes());
        complete(&mut partial);
        assert_eq!(partial, good);
        let mut again = good.clone();
        complete(&mut again);
        assert_eq!(again, good);
    }

    #[test]
    fn tcp_over_ipv6_and_odd_lengths() {
        // IPv6 ::1 → ::2, TCP header of 20 bytes and 3 bytes of payload; checksum 0xb0e5
        // (computed independently, as above).
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, 23, 6, 64]);
        f.extend_from_slice(&[0; 15]);
        f.push(1);
        f.extend_from_slice(&[0; 15]);
        f.push(2);
        let mut tcp = vec![0u8; 20];
        tcp[..4].copy_from_slice(&[0x13, 0x88, 0x27, 0x0f]);
        tcp[12] = 5 << 4;
        f.extend_from_slice(&tcp);
        f.extend_from_slice(b"abc");
        complete(&mut f);
        assert_eq!(f[14 + 40 + 16..14 + 40 + 18], [0xb0, 0xe5]);
    }

    #[test]
    fn anything_else_is_left_alone() {
        let mut frag = udp4();
        frag[20] = 0x20; // more fragments
        frag[40] = 0x12;
        let before = frag.clone();
        complete(&mut frag);
        assert_eq!(
            frag, before,
            "a fragment's checksum covers the whole datagram"
        );
        let mut short = udp4();
        short.truncate(30);
        let before = short.clone();
        complete(&mut short);
        assert_eq!(short, before);
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        complete(&mut arp);
        assert_eq!(arp, before);
    }
}
