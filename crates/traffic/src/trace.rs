//! Trace files: text records `time size` and classic pcap captures, parsed into emissions.
//!
//! The model reads no file: the caller passes the file's bytes.

use std::time::Duration;

use etherparse::{EtherType, LaxSlicedPacket, TransportSlice};
use pcap_file::pcap::PcapParser;
use pcap_file::TsResolution;

use crate::{Emission, TrafficError};

/// Unit of the bare times of a text trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeUnit {
    Seconds,
    Nanoseconds,
}

/// Parses a text trace: one record per line, `time size`, separated by spaces, tabs or a
/// comma. Blank lines and `#` comments are skipped. A bare time is in seconds (`0.02`) unless
/// a line `# unit: ns` came before it (`# unit: s` switches back); a time may also carry its
/// own unit (`20ms`, `1500ns`). Sizes are bytes (`1500`, `1.5k`). Times are offsets from the
/// flow's start and must not decrease; errors name the line.
pub fn parse_text(text: &str) -> Result<Vec<Emission>, TrafficError> {
    let mut unit = TimeUnit::Seconds;
    let mut out: Vec<Emission> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |message: String| TrafficError::Line { line, message };
        let (content, comment) = match raw.split_once('#') {
            Some((c, m)) => (c.trim(), Some(m.trim())),
            None => (raw.trim(), None),
        };
        if let Some(directive) = comment.and_then(|m| m.strip_prefix("unit:")) {
            unit = match directive.trim() {
                "s" => TimeUnit::Seconds,
                "ns" => TimeUnit::Nanoseconds,
                other => {
                    return Err(err(format!(
                        "unknown time unit '{other}' (expected s or ns)"
                    )))
                }
            };
        }
        if content.is_empty() {
            continue;
        }
        let fields: Vec<&str> = content
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|f| !f.is_empty())
            .collect();
        if fields.len() != 2 {
            return Err(err(format!(
                "expected 'time size', got {} field(s)",
                fields.len()
            )));
        }
        let at_ns = parse_time(fields[0], unit).map_err(err)?;
        let size = flowlab_units::parse_bytes(fields[1])
            .map_err(|e| err(e.to_string()))
            .and_then(|b| u32::try_from(b).map_err(|_| err(format!("size {b} is too large"))))?;
        if size == 0 {
            return Err(err("size must be above 0 bytes".into()));
        }
        if let Some(prev) = out.last() {
            if at_ns < prev.at_ns {
                return Err(err(format!(
                    "time {} goes back before the previous record's",
                    fields[0]
                )));
            }
        }
        out.push(Emission { at_ns, size });
    }
    Ok(out)
}

fn parse_time(field: &str, unit: TimeUnit) -> Result<u64, String> {
    if field.starts_with('-') {
        return Err(format!("time '{field}' is negative"));
    }
    let bare = field.chars().all(|c| c.is_ascii_digit() || c == '.');
    if bare && unit == TimeUnit::Nanoseconds {
        return field
            .parse::<u64>()
            .map_err(|_| format!("invalid time '{field}' (expected whole nanoseconds)"));
    }
    let d = flowlab_units::parse_duration(field).map_err(|e| e.to_string())?;
    u64::try_from(d.as_nanos()).map_err(|_| format!("time '{field}' is too large"))
}

const PCAP_US: u32 = 0xa1b2_c3d4;
const PCAP_NS: u32 = 0xa1b2_3c4d;
const PCAPNG: u32 = 0x0a0d_0d0a;

/// Does this look like a pcap (or pcapng) file?
pub fn is_pcap(bytes: &[u8]) -> bool {
    let Some(m) = bytes.get(..4) else {
        return false;
    };
    let m = [m[0], m[1], m[2], m[3]];
    [u32::from_le_bytes(m), u32::from_be_bytes(m)]
        .iter()
        .any(|&x| x == PCAP_US || x == PCAP_NS || x == PCAPNG)
}

/// Link types understood.
const LINKTYPE_ETHERNET: u32 = 1;
const LINKTYPE_RAW: u32 = 101;
const LINKTYPE_LINUX_SLL: u32 = 113;
const LINKTYPE_IPV4: u32 = 228;
const LINKTYPE_IPV6: u32 = 229;

/// Parses a classic pcap capture (microsecond or nanosecond timestamps, either byte order)
/// with pcap-file. Each record becomes an emission at its timestamp minus the first record's,
/// sized by the UDP payload when the packet is (Ethernet, Linux cooked or raw) IPv4/IPv6
/// carrying UDP (the UDP length field, so truncated captures still count the full payload),
/// and by the original frame length otherwise. Timestamps must not decrease.
pub fn parse_pcap(bytes: &[u8]) -> Result<Vec<Emission>, TrafficError> {
    let err = |m: String| TrafficError::Pcap(m);
    if bytes.len() < 24 {
        return Err(err(format!(
            "file too short for a pcap header ({} bytes, need 24)",
            bytes.len()
        )));
    }
    let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    if magic == PCAPNG {
        return Err(err(
            "pcapng is not supported; convert it with 'editcap -F pcap IN OUT'".into(),
        ));
    }
    let (mut rest, parser) = PcapParser::new(bytes)
        .map_err(|_| err(format!("not a pcap file (magic {magic:#010x})")))?;
    let header = parser.header();
    let linktype = u32::from(header.datalink) & 0x0fff_ffff;
    let mut out: Vec<Emission> = Vec::new();
    let mut first: Option<Duration> = None;
    let mut last = Duration::ZERO;
    let mut record = 0usize;
    while !rest.is_empty() {
        record += 1;
        let at_byte = bytes.len() - rest.len();
        let (after, raw) = parser.next_raw_packet(rest).map_err(|_| {
            err(if rest.len() < 16 {
                format!("record {record}: truncated record header at byte {at_byte}")
            } else {
                format!("record {record}: captured length runs past the end of the file")
            })
        })?;
        let frac = raw.ts_frac;
        let unit = match header.ts_resolution {
            TsResolution::MicroSecond => "microseconds",
            TsResolution::NanoSecond => "nanoseconds",
        };
        let captured_more_than_sent = raw.incl_len > raw.orig_len;
        // No snap length check: a truncated capture's original length exceeds it, and the
        // original length is what a record counts.
        let packet = raw
            .try_into_pcap_packet(header.ts_resolution, u32::MAX)
            .map_err(|_| {
                err(if captured_more_than_sent {
                    format!("record {record}: captured length above the original length")
                } else {
                    format!("record {record}: {unit} {frac} out of range")
                })
            })?;
        if packet.timestamp < last {
            return Err(err(format!(
                "record {record}: timestamp goes back before the previous record's"
            )));
        }
        last = packet.timestamp;
        let base = *first.get_or_insert(packet.timestamp);
        let at_ns = u64::try_from((packet.timestamp - base).as_nanos()).unwrap_or(u64::MAX);
        let size = udp_payload(linktype, &packet.data).unwrap_or(packet.orig_len);
        out.push(Emission { at_ns, size });
        rest = after;
    }
    Ok(out)
}

/// UDP payload length of a captured frame, from the UDP header's length field, if it is
/// IPv4/IPv6 UDP and not fragmented (etherparse's lax slicing accepts truncated frames).
fn udp_payload(linktype: u32, frame: &[u8]) -> Option<u32> {
    let packet = match linktype {
        LINKTYPE_ETHERNET => LaxSlicedPacket::from_ethernet(frame).ok()?,
        LINKTYPE_LINUX_SLL => {
            let protocol = frame.get(14..16)?;
            let protocol = EtherType(u16::from_be_bytes([protocol[0], protocol[1]]));
            LaxSlicedPacket::from_ether_type(protocol, frame.get(16..)?)
        }
        LINKTYPE_RAW | LINKTYPE_IPV4 | LINKTYPE_IPV6 => LaxSlicedPacket::from_ip(frame).ok()?,
        _ => return None,
    };
    match packet.transport? {
        TransportSlice::Udp(udp) => udp.length().checked_sub(8).map(u32::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_trace_in_seconds_and_nanoseconds() {
        let t = "# a trace\n0 160\n0.02 160\n\n0.04\t1.5k # comment\n# unit: ns\n50000000 100\n60ms 90\n";
        let e = parse_text(t).unwrap();
        let got: Vec<(u64, u32)> = e.iter().map(|x| (x.at_ns, x.size)).collect();
        assert_eq!(
            got,
            [
                (0, 160),
                (20_000_000, 160),
                (40_000_000, 1500),
                (50_000_000, 100),
                (60_000_000, 90)
            ]
        );
    }

    #[test]
    fn text_trace_errors_name_the_line() {
        let cases = [
            ("0 100\n1 100\n0.5 100\n", "line 3: time 0.5 goes back"),
            ("0 100\n\nabc 100\n", "line 3: invalid duration 'abc'"),
            ("0 100 7\n", "line 1: expected 'time size', got 3 field(s)"),
            ("0 0\n", "line 1: size must be above 0 bytes"),
            ("0 x\n", "line 1: invalid size 'x'"),
            ("-1 10\n", "line 1: time '-1' is negative"),
            ("# unit: ms\n", "line 1: unknown time unit 'ms'"),
            ("0 99999999999\n", "line 1: size 99999999999 is too large"),
            ("# unit: ns\n1.5 10\n", "line 2: invalid time '1.5'"),
        ];
        for (text, want) in cases {
            let e = parse_text(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
            assert!(!e.contains('\n'));
        }
    }

    /// Builds a pcap file: header then records of (sec, frac, frame, orig_len).
    fn pcap(
        magic: u32,
        little: bool,
        linktype: u32,
        records: &[(u32, u32, Vec<u8>, u32)],
    ) -> Vec<u8> {
        let w32 = |v: u32| {
            if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let w16 = |v: u16| {
            if little {
                v.to_le_bytes()
            } else {
                v.to_be_bytes()
            }
        };
        let mut b = Vec::new();
        b.extend(w32(magic));
        b.extend(w16(2));
        b.extend(w16(4));
        b.extend(w32(0));
        b.extend(w32(0));
        b.extend(w32(65535));
        b.extend(w32(linktype));
        for (sec, frac, frame, orig) in records {
            b.extend(w32(*sec));
            b.extend(w32(*frac));
            b.extend(w32(frame.len() as u32));
            b.extend(w32(*orig));
            b.extend(frame);
        }
        b
    }

    fn ethernet_ipv4_udp(payload: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x00]);
        let total = 20 + 8 + payload;
        f.extend([
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            17,
            0,
            0,
        ]);
        f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
        let ulen = 8 + payload;
        f.extend([0x30, 0x39, 0x13, 0x88, (ulen >> 8) as u8, ulen as u8, 0, 0]);
        f.extend(vec![0xab; usize::from(payload.min(16))]); // truncated capture
        f
    }

    fn ethernet_vlan_ipv6_udp(payload: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x81, 0x00, 0x00, 0x05, 0x86, 0xdd]);
        let ulen = 8 + payload;
        f.extend([0x60, 0, 0, 0, (ulen >> 8) as u8, ulen as u8, 17, 64]);
        f.extend([0u8; 32]);
        f.extend([0x30, 0x39, 0x13, 0x88, (ulen >> 8) as u8, ulen as u8, 0, 0]);
        f
    }

    fn ethernet_arp() -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x06]);
        f.extend([0u8; 28]);
        f
    }

    #[test]
    fn tiny_pcaps_parse_in_every_flavour() {
        for (magic, little, per_us) in [
            (PCAP_US, true, 1u32),
            (PCAP_US, false, 1),
            (PCAP_NS, true, 1000),
            (PCAP_NS, false, 1000),
        ] {
            let records = vec![
                (
                    1_700_000_000,
                    500_000 * per_us,
                    ethernet_ipv4_udp(1119),
                    1161,
                ),
                (
                    1_700_000_000,
                    900_000 * per_us,
                    ethernet_vlan_ipv6_udp(160),
                    226,
                ),
                (1_700_000_001, 0, ethernet_arp(), 60),
            ];
            let b = pcap(magic, little, LINKTYPE_ETHERNET, &records);
            assert!(is_pcap(&b));
            let e = parse_pcap(&b).unwrap();
            let got: Vec<(u64, u32)> = e.iter().map(|x| (x.at_ns, x.size)).collect();
            assert_eq!(
                got,
                [(0, 1119), (400_000_000, 160), (500_000_000, 60)],
                "magic {magic:#x} little {little}"
            );
        }
    }

    #[test]
    fn raw_ip_linktype() {
        let frame = ethernet_ipv4_udp(500)[14..].to_vec();
        let b = pcap(PCAP_US, true, LINKTYPE_RAW, &[(0, 0, frame, 528)]);
        assert_eq!(parse_pcap(&b).unwrap()[0].size, 500);
    }

    #[test]
    fn malformed_pcaps_give_clear_errors() {
        let good = pcap(
            PCAP_US,
            true,
            1,
            &[
                (0, 0, ethernet_ipv4_udp(100), 142),
                (0, 10, ethernet_arp(), 60),
            ],
        );
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![1, 2, 3], "pcap: file too short"),
            (vec![0u8; 24], "pcap: not a pcap file"),
            (
                {
                    let mut b = good.clone();
                    b[..4].copy_from_slice(&PCAPNG.to_le_bytes());
                    b
                },
                "pcap: pcapng is not supported",
            ),
            (
                good[..good.len() - 3].to_vec(),
                "pcap: record 2: captured length",
            ),
            (
                good[..24 + 10].to_vec(),
                "pcap: record 1: truncated record header",
            ),
            (
                pcap(PCAP_US, true, 1, &[(5, 0, vec![], 0), (4, 0, vec![], 0)]),
                "pcap: record 2: timestamp goes back",
            ),
            (
                pcap(PCAP_US, true, 1, &[(5, 1_000_000, vec![], 0)]),
                "pcap: record 1: microseconds",
            ),
        ];
        for (bytes, want) in cases {
            let e = parse_pcap(&bytes).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
        }
        assert_eq!(parse_pcap(&good).unwrap().len(), 2);
    }

    /// Linux cooked captures are read through their protocol field; a fragment of a datagram
    /// is not a whole UDP payload and counts its original frame length.
    #[test]
    fn cooked_captures_and_fragments() {
        let mut cooked = vec![0u8; 14];
        cooked.extend([0x08, 0x00]);
        cooked.extend(&ethernet_ipv4_udp(300)[14..]);
        let b = pcap(PCAP_US, true, LINKTYPE_LINUX_SLL, &[(0, 0, cooked, 344)]);
        assert_eq!(parse_pcap(&b).unwrap()[0].size, 300);
        let mut fragment = ethernet_ipv4_udp(300);
        fragment[14 + 6] |= 0x20; // more fragments
        let b = pcap(PCAP_US, true, LINKTYPE_ETHERNET, &[(0, 0, fragment, 342)]);
        assert_eq!(parse_pcap(&b).unwrap()[0].size, 342);
    }

    /// A capture cut at a small snap length (tcpdump -s 64) keeps each record's original
    /// length; a record claiming more bytes than were sent is refused.
    #[test]
    fn snap_length_does_not_limit_the_original_length() {
        let mut b = pcap(PCAP_US, true, 1, &[(0, 0, ethernet_ipv4_udp(1400), 1442)]);
        b[16..20].copy_from_slice(&64u32.to_le_bytes());
        assert_eq!(parse_pcap(&b).unwrap()[0].size, 1400);
        let b = pcap(PCAP_US, true, 1, &[(0, 0, ethernet_arp(), 10)]);
        let e = parse_pcap(&b).unwrap_err().to_string();
        assert_eq!(
            e,
            "pcap: record 1: captured length above the original length"
        );
    }

    #[test]
    fn pcap_parser_never_panics_on_garbage() {
        let good = pcap(PCAP_NS, false, 1, &[(0, 0, ethernet_vlan_ipv6_udp(9), 80)]);
        for cut in 0..good.len() {
            let _ = parse_pcap(&good[..cut]);
        }
        let mut x: u32 = 1;
        for _ in 0..2000 {
            let mut b = good.clone();
            for _ in 0..4 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                let i = x as usize % b.len();
                b[i] = (x >> 8) as u8;
            }
            let _ = parse_pcap(&b);
        }
    }
}
