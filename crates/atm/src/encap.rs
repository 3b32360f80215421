//! Carrying IP over AAL5: RFC 2684 encapsulations, Classical IP and LANE, and the cell cost of
//! a packet.
//!
//! Whatever sits in front of the IP packet inside the AAL5 frame (an LLC/SNAP header, a MAC
//! header, nothing) plus the 8-byte AAL5 trailer is the per-packet overhead that decides how
//! many cells a packet takes; Linux's `tc stab` and `sch_cake` call it `overhead`. This module
//! gives those byte counts, the header bytes, a checked parser for LLC-encapsulated frames, and
//! IPv4 fragmentation for packets above an MTU.

use thiserror::Error;

use crate::aal5::{cells_for_payload, TRAILER_LEN};
use crate::cell::CELL_LEN;

/// RFC 2684 LLC/SNAP header in front of a routed IPv4 packet.
pub const LLC_SNAP_IPV4: [u8; 8] = [0xAA, 0xAA, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00];
/// RFC 2684 LLC/SNAP header and 2 pad bytes in front of a bridged 802.3 frame without FCS.
pub const LLC_BRIDGED_8023: [u8; 10] = [0xAA, 0xAA, 0x03, 0x00, 0x80, 0xC2, 0x00, 0x07, 0x00, 0x00];
/// RFC 2684 LLC/NLPID header of PPP over ATM (RFC 2364).
pub const LLC_NLPID_PPP: [u8; 4] = [0xFE, 0xFE, 0x03, 0xCF];
/// Default MTU of Classical IP over ATM (RFC 2225, from RFC 1626).
pub const CLASSICAL_IP_MTU: usize = 9180;
/// LANE 802.3 data frame header: 2-byte LE header (LECID) and the 14-byte MAC header.
pub const LANE_8023_HEADER_LEN: usize = 16;
/// Ethernet MAC header without FCS.
pub const MAC_HEADER_LEN: usize = 14;
/// IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Largest IPv4 datagram.
pub const IPV4_MAX_LEN: usize = 65_535;

/// How an IP packet is placed into an AAL5 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encapsulation {
    /// RFC 2684 LLC/SNAP, routed IPv4 (Classical IP, RFC 2225): 8 bytes.
    LlcSnapRouted,
    /// RFC 2684 VC multiplexing, routed: nothing in front of the packet.
    VcMuxRouted,
    /// RFC 2684 LLC/SNAP bridged 802.3 without FCS: 10 bytes then the 14-byte MAC header.
    LlcBridged8023,
    /// RFC 2684 VC-mux bridged 802.3 without FCS: 2 pad bytes then the MAC header.
    VcMuxBridged8023,
    /// PPP over ATM (RFC 2364) with LLC: NLPID header (4) and PPP protocol (2).
    PppoaLlc,
    /// PPP over ATM (RFC 2364) with VC-mux: PPP protocol (2).
    PppoaVcMux,
    /// PPPoE (RFC 2516) over bridged LLC: 10 + MAC 14 + PPPoE 6 + PPP 2.
    PppoeLlc,
    /// PPPoE over bridged VC-mux: 2 + MAC 14 + PPPoE 6 + PPP 2.
    PppoeVcMux,
    /// LAN Emulation 802.3: LE header (2) and MAC header (14).
    Lane8023,
}

impl Encapsulation {
    /// Every encapsulation, for tables and tests.
    pub const ALL: [Encapsulation; 9] = [
        Encapsulation::LlcSnapRouted,
        Encapsulation::VcMuxRouted,
        Encapsulation::LlcBridged8023,
        Encapsulation::VcMuxBridged8023,
        Encapsulation::PppoaLlc,
        Encapsulation::PppoaVcMux,
        Encapsulation::PppoeLlc,
        Encapsulation::PppoeVcMux,
        Encapsulation::Lane8023,
    ];

    /// Bytes in front of the IP packet inside the AAL5 payload.
    pub const fn header_len(self) -> usize {
        match self {
            Encapsulation::LlcSnapRouted => LLC_SNAP_IPV4.len(),
            Encapsulation::VcMuxRouted => 0,
            Encapsulation::LlcBridged8023 => LLC_BRIDGED_8023.len() + MAC_HEADER_LEN,
            Encapsulation::VcMuxBridged8023 => 2 + MAC_HEADER_LEN,
            Encapsulation::PppoaLlc => LLC_NLPID_PPP.len() + 2,
            Encapsulation::PppoaVcMux => 2,
            Encapsulation::PppoeLlc => LLC_BRIDGED_8023.len() + MAC_HEADER_LEN + 6 + 2,
            Encapsulation::PppoeVcMux => 2 + MAC_HEADER_LEN + 6 + 2,
            Encapsulation::Lane8023 => LANE_8023_HEADER_LEN,
        }
    }

    /// Per-packet bytes added to an IP packet before cell rounding: the header plus the AAL5
    /// trailer. This is the `overhead` of `tc stab linklayer atm` and of `sch_cake`.
    pub const fn overhead(self) -> usize {
        self.header_len() + TRAILER_LEN
    }

    /// The `sch_cake` keyword with the same overhead, where there is one.
    pub const fn cake_keyword(self) -> Option<&'static str> {
        match self {
            Encapsulation::LlcSnapRouted => Some("ipoa-llcsnap"),
            Encapsulation::VcMuxRouted => Some("ipoa-vcmux"),
            Encapsulation::LlcBridged8023 => Some("bridged-llcsnap"),
            Encapsulation::VcMuxBridged8023 => Some("bridged-vcmux"),
            Encapsulation::PppoaLlc => Some("pppoa-llc"),
            Encapsulation::PppoaVcMux => Some("pppoa-vcmux"),
            Encapsulation::PppoeLlc => Some("pppoe-llcsnap"),
            Encapsulation::PppoeVcMux => Some("pppoe-vcmux"),
            Encapsulation::Lane8023 => None,
        }
    }

    /// AAL5 payload length of an IP packet of `ip_len` bytes (saturating).
    pub const fn aal5_payload_len(self, ip_len: usize) -> usize {
        ip_len.saturating_add(self.header_len())
    }
}

/// Cells an IP packet of `ip_len` bytes takes, unfragmented: ⌈(ip_len + overhead) / 48⌉.
pub const fn cells_per_packet(ip_len: usize, encapsulation: Encapsulation) -> usize {
    cells_for_payload(encapsulation.aal5_payload_len(ip_len))
}

/// Bytes on the ATM layer (53 per cell) for an IP packet of `ip_len` bytes.
pub const fn atm_bytes_per_packet(ip_len: usize, encapsulation: Encapsulation) -> usize {
    cells_per_packet(ip_len, encapsulation).saturating_mul(CELL_LEN)
}

/// Why a packet cannot be fragmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum FragmentError {
    /// Shorter than an IPv4 header.
    #[error("IPv4 packet of {0} bytes is shorter than its header")]
    PacketTooShort(usize),
    /// Longer than the 16-bit total length allows.
    #[error("IPv4 packet of {0} bytes exceeds 65535")]
    PacketTooLong(usize),
    /// An MTU that cannot carry a header and 8 bytes of data.
    #[error("MTU {0} cannot carry a fragment (need at least 28)")]
    MtuTooSmall(usize),
}

/// Total lengths (header included) of the IPv4 fragments of a packet of `ip_len` bytes sent
/// over a link of `mtu` bytes. Every fragment repeats the 20-byte header; all but the last carry
/// a multiple of 8 data bytes. A packet that fits is one "fragment" of its own length.
pub fn fragment_sizes(ip_len: usize, mtu: usize) -> Result<Vec<usize>, FragmentError> {
    if ip_len < IPV4_HEADER_LEN {
        return Err(FragmentError::PacketTooShort(ip_len));
    }
    if ip_len > IPV4_MAX_LEN {
        return Err(FragmentError::PacketTooLong(ip_len));
    }
    if ip_len <= mtu {
        return Ok(vec![ip_len]);
    }
    if mtu < IPV4_HEADER_LEN + 8 {
        return Err(FragmentError::MtuTooSmall(mtu));
    }
    let per_fragment = (mtu - IPV4_HEADER_LEN) / 8 * 8;
    let mut data_left = ip_len - IPV4_HEADER_LEN;
    let mut sizes = Vec::with_capacity(data_left.div_ceil(per_fragment));
    while data_left > 0 {
        let data = data_left.min(per_fragment);
        sizes.push(IPV4_HEADER_LEN + data);
        data_left -= data;
    }
    Ok(sizes)
}

/// Cells for a packet of `ip_len` bytes sent over an interface of `mtu` bytes, fragmenting
/// first when it does not fit.
pub fn cells_per_packet_with_mtu(
    ip_len: usize,
    mtu: usize,
    encapsulation: Encapsulation,
) -> Result<usize, FragmentError> {
    Ok(fragment_sizes(ip_len, mtu)?
        .iter()
        .map(|&len| cells_per_packet(len, encapsulation))
        .sum())
}

/// Why an LLC-encapsulated AAL5 payload could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EncapError {
    /// Too short for the header it starts with.
    #[error("LLC frame truncated: {len} bytes")]
    Truncated {
        /// Bytes available.
        len: usize,
    },
    /// An LLC header other than AA-AA-03 (SNAP) or FE-FE-03 (NLPID).
    #[error("unknown LLC header {0:02x?}")]
    UnknownLlc([u8; 3]),
    /// A SNAP OUI/PID this model does not know.
    #[error("unknown SNAP OUI {oui:06x} PID {pid:#06x}")]
    UnknownSnap {
        /// The organisationally unique identifier.
        oui: u32,
        /// The protocol identifier.
        pid: u16,
    },
}

/// What an RFC 2684 LLC-encapsulated AAL5 payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlcPayload<'a> {
    /// A routed packet: SNAP OUI 00-00-00 and its EtherType (0x0800 for IPv4).
    Routed {
        /// EtherType of the packet.
        ethertype: u16,
        /// The packet.
        packet: &'a [u8],
    },
    /// A bridged 802.3 frame: OUI 00-80-C2, PID 0x0001 (FCS preserved) or 0x0007 (no FCS).
    Bridged8023 {
        /// Whether the frame ends with its LAN FCS.
        fcs_preserved: bool,
        /// The MAC frame, after the 2 pad bytes.
        frame: &'a [u8],
    },
    /// An NLPID-routed payload (FE-FE-03), e.g. NLPID 0xCF for PPP.
    Nlpid {
        /// The network layer protocol identifier.
        nlpid: u8,
        /// What follows it.
        payload: &'a [u8],
    },
}

/// Parses the LLC header of an AAL5 payload received on an LLC-encapsulated VC.
pub fn parse_llc(sdu: &[u8]) -> Result<LlcPayload<'_>, EncapError> {
    let truncated = EncapError::Truncated { len: sdu.len() };
    let llc: [u8; 3] = sdu
        .get(..3)
        .ok_or(truncated)?
        .try_into()
        .map_err(|_| truncated)?;
    match llc {
        [0xAA, 0xAA, 0x03] => {
            let snap = sdu.get(3..8).ok_or(truncated)?;
            let oui = u32::from_be_bytes([0, snap[0], snap[1], snap[2]]);
            let pid = u16::from_be_bytes([snap[3], snap[4]]);
            match (oui, pid) {
                (0x00_0000, ethertype) => Ok(LlcPayload::Routed {
                    ethertype,
                    packet: &sdu[8..],
                }),
                (0x00_80C2, 0x0001 | 0x0007) => Ok(LlcPayload::Bridged8023 {
                    fcs_preserved: pid == 0x0001,
                    frame: sdu.get(10..).ok_or(truncated)?,
                }),
                _ => Err(EncapError::UnknownSnap { oui, pid }),
            }
        }
        [0xFE, 0xFE, 0x03] => Ok(LlcPayload::Nlpid {
            nlpid: *sdu.get(3).ok_or(truncated)?,
            payload: &sdu[4..],
        }),
        other => Err(EncapError::UnknownLlc(other)),
    }
}

/// Writes the AAL5 payload of a routed IPv4 packet (LLC/SNAP or VC-mux) into `out`.
/// Returns `false` (and writes nothing) for encapsulations that need a MAC header.
pub fn encapsulate_routed_ipv4(
    encapsulation: Encapsulation,
    packet: &[u8],
    out: &mut Vec<u8>,
) -> bool {
    match encapsulation {
        Encapsulation::LlcSnapRouted => out.extend_from_slice(&LLC_SNAP_IPV4),
        Encapsulation::VcMuxRouted => {}
        _ => return false,
    }
    out.extend_from_slice(packet);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `sch_cake`'s `cake_calc_overhead()` in `atm` mode, the reference oracle.
    fn cake_atm_len(len: usize, overhead: usize) -> usize {
        (len + overhead).div_ceil(48) * 53
    }

    #[test]
    fn overheads_match_the_cake_keywords_and_tc_stab_table() {
        let table = [
            ("ipoa-llcsnap", 16),
            ("ipoa-vcmux", 8),
            ("bridged-llcsnap", 32),
            ("bridged-vcmux", 24),
            ("pppoa-llc", 14),
            ("pppoa-vcmux", 10),
            ("pppoe-llcsnap", 40),
            ("pppoe-vcmux", 32),
        ];
        for encap in Encapsulation::ALL {
            if let Some(keyword) = encap.cake_keyword() {
                let (_, overhead) = table.iter().find(|(k, _)| *k == keyword).unwrap();
                assert_eq!(encap.overhead(), *overhead, "{keyword}");
            }
        }
        assert_eq!(Encapsulation::Lane8023.overhead(), 24);
    }

    // The oracle is written as cake and tc write it, `(len + overhead + 47) / 48`.
    #[allow(clippy::manual_div_ceil)]
    #[test]
    fn ipoa_llcsnap_cells_equal_the_cake_oracle_for_every_length_up_to_the_cip_mtu() {
        for ip_len in 1..=CLASSICAL_IP_MTU {
            let cells = cells_per_packet(ip_len, Encapsulation::LlcSnapRouted);
            assert_eq!(cells, (ip_len + 16 + 47) / 48, "ip_len {ip_len}");
            assert_eq!(
                atm_bytes_per_packet(ip_len, Encapsulation::LlcSnapRouted),
                cake_atm_len(ip_len, 16)
            );
            let vcmux = cells_per_packet(ip_len, Encapsulation::VcMuxRouted);
            assert_eq!(vcmux, (ip_len + 8 + 47) / 48, "ip_len {ip_len}");
            assert_eq!(
                atm_bytes_per_packet(ip_len, Encapsulation::VcMuxRouted),
                cake_atm_len(ip_len, 8)
            );
        }
    }

    #[test]
    fn every_encapsulation_equals_the_cake_oracle() {
        for encap in Encapsulation::ALL {
            for ip_len in 1..=2000 {
                assert_eq!(
                    atm_bytes_per_packet(ip_len, encap),
                    cake_atm_len(ip_len, encap.overhead())
                );
            }
        }
    }

    #[test]
    fn tc_stab_man_page_example() {
        // "a 100 byte long packet requires three 48-byte payloads, so the final size would
        // require 3 ATM cells - 159 bytes" (tc-stab(8)); true with either IPoA overhead.
        assert_eq!(cake_atm_len(100, 0), 159);
        assert_eq!(cells_per_packet(100, Encapsulation::LlcSnapRouted), 3);
        assert_eq!(atm_bytes_per_packet(100, Encapsulation::LlcSnapRouted), 159);
        assert_eq!(atm_bytes_per_packet(100, Encapsulation::VcMuxRouted), 159);
    }

    #[test]
    fn well_known_sizes() {
        // Classical IP at its MTU: 9188-byte AAL5 payload, 192 cells.
        assert_eq!(cells_per_packet(9180, Encapsulation::LlcSnapRouted), 192);
        // 1500-byte packet: 32 cells with LLC/SNAP (1516 bytes of AAL5 payload).
        assert_eq!(cells_per_packet(1500, Encapsulation::LlcSnapRouted), 32);
        // LANE: 1500-byte MTU gives a 1516-byte frame.
        assert_eq!(Encapsulation::Lane8023.aal5_payload_len(1500), 1516);
        // A 40-byte TCP ACK fits one cell VC-muxed, takes two with LLC/SNAP.
        assert_eq!(cells_per_packet(40, Encapsulation::VcMuxRouted), 1);
        assert_eq!(cells_per_packet(40, Encapsulation::LlcSnapRouted), 2);
    }

    #[test]
    fn fragmentation_examples() {
        assert_eq!(fragment_sizes(1500, 1500).unwrap(), vec![1500]);
        // 9180-byte CIP packet onto a 1500-byte MTU: 1480 data bytes per fragment.
        assert_eq!(
            fragment_sizes(9180, 1500).unwrap(),
            vec![1500, 1500, 1500, 1500, 1500, 1500, 300]
        );
        // MTU 1006: data per fragment rounds down to 984.
        assert_eq!(fragment_sizes(2000, 1006).unwrap(), vec![1004, 1004, 32]);
        assert_eq!(
            fragment_sizes(19, 1500),
            Err(FragmentError::PacketTooShort(19))
        );
        assert_eq!(
            fragment_sizes(70_000, 1500),
            Err(FragmentError::PacketTooLong(70_000))
        );
        assert_eq!(fragment_sizes(100, 27), Err(FragmentError::MtuTooSmall(27)));
        assert_eq!(
            cells_per_packet_with_mtu(9180, 1500, Encapsulation::LlcSnapRouted).unwrap(),
            6 * 32 + cells_per_packet(300, Encapsulation::LlcSnapRouted)
        );
    }

    #[test]
    fn llc_headers_parse() {
        let mut sdu = Vec::new();
        assert!(encapsulate_routed_ipv4(
            Encapsulation::LlcSnapRouted,
            &[0x45, 0, 0, 20],
            &mut sdu
        ));
        assert_eq!(&sdu[..8], &LLC_SNAP_IPV4);
        assert_eq!(
            parse_llc(&sdu),
            Ok(LlcPayload::Routed {
                ethertype: 0x0800,
                packet: &[0x45, 0, 0, 20]
            })
        );
        let mut bridged = LLC_BRIDGED_8023.to_vec();
        bridged.extend_from_slice(&[1; 14]);
        assert_eq!(
            parse_llc(&bridged),
            Ok(LlcPayload::Bridged8023 {
                fcs_preserved: false,
                frame: &[1; 14]
            })
        );
        let ppp = [0xFE, 0xFE, 0x03, 0xCF, 0x00, 0x21];
        assert_eq!(
            parse_llc(&ppp),
            Ok(LlcPayload::Nlpid {
                nlpid: 0xCF,
                payload: &[0x00, 0x21]
            })
        );
        assert_eq!(
            parse_llc(&[0xAA, 0xAA]),
            Err(EncapError::Truncated { len: 2 })
        );
        assert_eq!(
            parse_llc(&[1, 2, 3, 4]),
            Err(EncapError::UnknownLlc([1, 2, 3]))
        );
        assert!(matches!(
            parse_llc(&[0xAA, 0xAA, 0x03, 0x00, 0x80, 0xC2, 0x00, 0x0E]),
            Err(EncapError::UnknownSnap { .. })
        ));
        assert!(!encapsulate_routed_ipv4(
            Encapsulation::Lane8023,
            &[0; 20],
            &mut Vec::new()
        ));
    }

    proptest! {
        #[test]
        fn parse_llc_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..32)) {
            let _ = parse_llc(&bytes);
        }

        #[test]
        fn fragments_cover_the_packet(ip_len in 20usize..=65_535, mtu in 28usize..20_000) {
            let sizes = fragment_sizes(ip_len, mtu).unwrap();
            let data: usize = sizes.iter().map(|s| s - IPV4_HEADER_LEN).sum();
            prop_assert_eq!(data, ip_len - IPV4_HEADER_LEN);
            for (i, &s) in sizes.iter().enumerate() {
                if sizes.len() == 1 {
                    prop_assert!(s == ip_len && ip_len <= mtu);
                } else {
                    prop_assert!(s <= mtu);
                }
                if i + 1 < sizes.len() {
                    prop_assert_eq!((s - IPV4_HEADER_LEN) % 8, 0);
                }
            }
        }
    }
}
