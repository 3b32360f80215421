//! A DiffServ multi-field classifier: the edge function that splits LAN traffic into network
//! services before the scheduler (AQUILA's "classification table", RFC 2475 MF classifier).
//!
//! Rules are tried in order; the first rule whose every present criterion matches gives the
//! class index. A packet no rule matches goes to the default class. An IPv4 prefix never
//! matches an IPv6 address and vice versa (IPv4-mapped IPv6 addresses are not unmapped).

use std::net::IpAddr;
use std::str::FromStr;

use crate::{PacketMeta, QosError};

/// Expedited Forwarding (RFC 3246).
pub const EF: u8 = 46;
/// Default (best effort) forwarding.
pub const BE: u8 = 0;

/// The DSCP of AFxy (RFC 2597): class `x` in 1..=4, drop precedence `y` in 1..=3.
/// Returns `None` outside those ranges.
pub const fn af(x: u8, y: u8) -> Option<u8> {
    match (x, y) {
        (1..=4, 1..=3) => Some(8 * x + 2 * y),
        _ => None,
    }
}

/// Parses a DSCP as people write it: `ef`, `af11`..`af43`, `cs0`..`cs7`, `be`/`df`/`default`
/// (any case), or a decimal number 0..=63.
pub fn parse_dscp(s: &str) -> Result<u8, QosError> {
    let t = s.trim().to_ascii_lowercase();
    let unknown = || QosError::UnknownDscp(s.to_string());
    if let Ok(n) = t.parse::<u8>() {
        return if n <= 63 { Ok(n) } else { Err(unknown()) };
    }
    match t.as_str() {
        "ef" => return Ok(EF),
        "be" | "df" | "default" => return Ok(BE),
        _ => {}
    }
    let b = t.as_bytes();
    if b.len() == 4 && t.starts_with("af") {
        let (x, y) = (b[2].wrapping_sub(b'0'), b[3].wrapping_sub(b'0'));
        return af(x, y).ok_or_else(unknown);
    }
    if b.len() == 3 && t.starts_with("cs") {
        let n = b[2].wrapping_sub(b'0');
        return if n <= 7 { Ok(n * 8) } else { Err(unknown()) };
    }
    Err(unknown())
}

/// The conventional name of a DSCP (`ef`, `af11`, `cs3`, `be`), or `None` for unnamed values.
pub fn dscp_name(dscp: u8) -> Option<String> {
    match dscp {
        BE => Some("be".into()),
        EF => Some("ef".into()),
        d if d <= 63 && d % 8 == 0 => Some(format!("cs{}", d / 8)),
        d if (10..=38).contains(&d) && d % 2 == 0 && (d % 8) / 2 >= 1 && (d % 8) / 2 <= 3 => {
            Some(format!("af{}{}", d / 8, (d % 8) / 2))
        }
        _ => None,
    }
}

/// An address prefix, IPv4 or IPv6 (`10.0.0.0/8`, `2001:db8::/32`; a bare address is a host
/// prefix). Bits past the length are ignored when matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

impl Prefix {
    /// A prefix of `len` bits; errors if `len` exceeds the address width (32 or 128).
    pub fn new(addr: IpAddr, len: u8) -> Result<Prefix, QosError> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(QosError::BadPrefix(format!("{addr}/{len}")));
        }
        Ok(Prefix { addr, len })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for `/0`, which matches every address of its family.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `ip` lies inside the prefix (same family, same leading `len` bits).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                u32::from(p) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                u128::from(p) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Prefix {
    type Err = QosError;

    fn from_str(s: &str) -> Result<Prefix, QosError> {
        let bad = || QosError::BadPrefix(s.to_string());
        let (a, l) = match s.trim().split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s.trim(), None),
        };
        let addr: IpAddr = a.parse().map_err(|_| bad())?;
        let len = match l {
            Some(l) => l.parse::<u8>().map_err(|_| bad())?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        Prefix::new(addr, len).map_err(|_| bad())
    }
}

/// An inclusive range of ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    /// `lo..=hi`; errors if `lo > hi`.
    pub fn new(lo: u16, hi: u16) -> Result<PortRange, QosError> {
        if lo > hi {
            return Err(QosError::BadPortRange(format!("{lo}-{hi}")));
        }
        Ok(PortRange { lo, hi })
    }

    pub fn single(port: u16) -> PortRange {
        PortRange { lo: port, hi: port }
    }

    pub fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }
}

impl FromStr for PortRange {
    type Err = QosError;

    /// `80` or `5000-5100`.
    fn from_str(s: &str) -> Result<PortRange, QosError> {
        let bad = || QosError::BadPortRange(s.to_string());
        let p = |x: &str| x.trim().parse::<u16>().map_err(|_| bad());
        match s.split_once('-') {
            Some((lo, hi)) => PortRange::new(p(lo)?, p(hi)?).map_err(|_| bad()),
            None => Ok(PortRange::single(p(s)?)),
        }
    }
}

/// One classification rule: every criterion that is set must match. A rule with no criteria
/// matches everything. Build with [`Rule::to_class`] and the chaining setters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    class: usize,
    /// Bit `d` set = DSCP `d` matches; 0 = any DSCP.
    dscp_set: u64,
    src: Option<Prefix>,
    dst: Option<Prefix>,
    src_port: Option<PortRange>,
    dst_port: Option<PortRange>,
    proto: Option<u8>,
}

impl Rule {
    /// A rule (matching everything until criteria are added) that sends packets to `class`.
    pub fn to_class(class: usize) -> Rule {
        Rule {
            class,
            dscp_set: 0,
            src: None,
            dst: None,
            src_port: None,
            dst_port: None,
            proto: None,
        }
    }

    /// Also accept this DSCP (call several times for a set). Masked to six bits.
    pub fn dscp(mut self, dscp: u8) -> Rule {
        self.dscp_set |= 1u64 << (dscp & 0x3f);
        self
    }

    pub fn src(mut self, prefix: Prefix) -> Rule {
        self.src = Some(prefix);
        self
    }

    pub fn dst(mut self, prefix: Prefix) -> Rule {
        self.dst = Some(prefix);
        self
    }

    pub fn src_port(mut self, ports: PortRange) -> Rule {
        self.src_port = Some(ports);
        self
    }

    pub fn dst_port(mut self, ports: PortRange) -> Rule {
        self.dst_port = Some(ports);
        self
    }

    pub fn proto(mut self, proto: u8) -> Rule {
        self.proto = Some(proto);
        self
    }

    pub fn class(&self) -> usize {
        self.class
    }

    /// Whether every criterion of the rule matches the packet.
    pub fn matches(&self, p: &PacketMeta) -> bool {
        (self.dscp_set == 0 || self.dscp_set & (1u64 << (p.dscp & 0x3f)) != 0)
            && self.src.is_none_or(|x| x.contains(p.src))
            && self.dst.is_none_or(|x| x.contains(p.dst))
            && self.src_port.is_none_or(|x| x.contains(p.src_port))
            && self.dst_port.is_none_or(|x| x.contains(p.dst_port))
            && self.proto.is_none_or(|x| x == p.proto)
    }
}

/// Ordered rules and a default class. Classification is a linear scan with no allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classifier {
    rules: Vec<Rule>,
    default_class: usize,
}

impl Classifier {
    /// A classifier with no rules: everything goes to `default_class`.
    pub fn new(default_class: usize) -> Classifier {
        Classifier {
            rules: Vec::new(),
            default_class,
        }
    }

    /// Appends a rule; earlier rules win.
    pub fn push(&mut self, rule: Rule) {
        self.rules.push(rule);
    }

    /// Builder form of [`Classifier::push`].
    pub fn rule(mut self, rule: Rule) -> Classifier {
        self.push(rule);
        self
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    pub fn default_class(&self) -> usize {
        self.default_class
    }

    /// The class of the first matching rule, else the default class.
    pub fn classify(&self, p: &PacketMeta) -> usize {
        self.rules
            .iter()
            .find(|r| r.matches(p))
            .map_or(self.default_class, |r| r.class)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dscp_names() {
        let cases = [
            ("ef", 46),
            ("EF", 46),
            ("be", 0),
            ("df", 0),
            ("af11", 10),
            ("af12", 12),
            ("af13", 14),
            ("af21", 18),
            ("af31", 26),
            ("af41", 34),
            ("af43", 38),
            ("cs0", 0),
            ("cs1", 8),
            ("cs5", 40),
            ("cs7", 56),
            ("0", 0),
            ("63", 63),
            (" 46 ", 46),
        ];
        for (s, want) in cases {
            assert_eq!(parse_dscp(s), Ok(want), "{s}");
        }
        for bad in [
            "", "af44", "af10", "af51", "cs8", "64", "256", "-1", "efx", "af1", "xyz",
        ] {
            let e = parse_dscp(bad).unwrap_err();
            assert!(matches!(e, QosError::UnknownDscp(_)), "{bad}");
        }
    }

    #[test]
    fn dscp_name_round_trips() {
        for d in 0..=63u8 {
            if let Some(n) = dscp_name(d) {
                assert_eq!(parse_dscp(&n), Ok(d), "{n}");
            }
        }
        assert_eq!(dscp_name(46).as_deref(), Some("ef"));
        assert_eq!(dscp_name(26).as_deref(), Some("af31"));
        assert_eq!(dscp_name(1), None);
    }

    #[test]
    fn prefixes() {
        let p: Prefix = "10.1.0.0/16".parse().unwrap();
        assert!(p.contains("10.1.200.3".parse().unwrap()));
        assert!(!p.contains("10.2.0.1".parse().unwrap()));
        assert!(!p.contains("::ffff:10.1.0.1".parse().unwrap()));
        let any: Prefix = "0.0.0.0/0".parse().unwrap();
        assert!(any.contains("255.1.2.3".parse().unwrap()));
        let host: Prefix = "192.0.2.7".parse().unwrap();
        assert_eq!(host.len(), 32);
        let v6: Prefix = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains("2001:db9::5".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        let all6: Prefix = "::/0".parse().unwrap();
        assert!(all6.contains("fe80::1".parse().unwrap()));
        for bad in [
            "10.0.0.0/33",
            "::/129",
            "10.0.0/8",
            "x/1",
            "10.0.0.0/-1",
            "",
        ] {
            assert!(bad.parse::<Prefix>().is_err(), "{bad}");
        }
    }

    #[test]
    fn port_ranges() {
        assert_eq!("80".parse(), Ok(PortRange::single(80)));
        let r: PortRange = "5000-5100".parse().unwrap();
        assert!(r.contains(5000) && r.contains(5100) && !r.contains(5101));
        assert!("9-1".parse::<PortRange>().is_err());
        assert!("70000".parse::<PortRange>().is_err());
    }

    /// The AQUILA edge of the IP QoS scenario: VoIP (EF) to premium CBR, e-mail to premium
    /// mission critical, FTP to premium multimedia, the rest to STD.
    #[test]
    fn first_match_wins_and_default_applies() {
        let c = Classifier::new(4)
            .rule(Rule::to_class(0).dscp(EF))
            .rule(
                Rule::to_class(3)
                    .src("10.0.0.1/32".parse().unwrap())
                    .proto(6)
                    .dst_port("25".parse().unwrap()),
            )
            .rule(
                Rule::to_class(2)
                    .proto(6)
                    .dst_port("20-21".parse().unwrap()),
            )
            .rule(
                Rule::to_class(1)
                    .dscp(af(1, 1).unwrap())
                    .dscp(af(1, 2).unwrap()),
            );
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let base = PacketMeta::new(0, 0, 100, 0);
        assert_eq!(c.classify(&base.with_dscp(EF)), 0);
        let mail = base.with_five_tuple(ip("10.0.0.1"), 40000, ip("10.9.0.1"), 25, 6);
        assert_eq!(c.classify(&mail), 3);
        // EF beats the mail rule because it comes first.
        assert_eq!(c.classify(&mail.with_dscp(EF)), 0);
        let ftp = base.with_five_tuple(ip("10.0.0.2"), 40000, ip("10.9.0.1"), 21, 6);
        assert_eq!(c.classify(&ftp), 2);
        assert_eq!(c.classify(&ftp.with_dscp(12)), 2);
        assert_eq!(c.classify(&base.with_dscp(12)), 1);
        assert_eq!(c.classify(&base.with_dscp(14)), 4);
        let udp21 = base.with_five_tuple(ip("10.0.0.2"), 1, ip("10.9.0.1"), 21, 17);
        assert_eq!(c.classify(&udp21), 4);
    }

    proptest! {
        #[test]
        fn prefix_matches_iff_leading_bits_agree(a in any::<u32>(), b in any::<u32>(), len in 0u8..=32) {
            let p = Prefix::new(IpAddr::V4(a.into()), len).unwrap();
            let same = len == 0 || (a ^ b) >> (32 - u32::from(len)) == 0;
            prop_assert_eq!(p.contains(IpAddr::V4(b.into())), same);
        }

        #[test]
        fn v6_prefix_matches_iff_leading_bits_agree(a in any::<u128>(), b in any::<u128>(), len in 0u8..=128) {
            let p = Prefix::new(IpAddr::V6(a.into()), len).unwrap();
            let same = len == 0 || (a ^ b) >> (128 - u32::from(len)) == 0;
            prop_assert_eq!(p.contains(IpAddr::V6(b.into())), same);
        }

        #[test]
        fn parse_dscp_never_panics(s in ".{0,8}") {
            let _ = parse_dscp(&s);
            let _ = s.parse::<Prefix>();
            let _ = s.parse::<PortRange>();
        }
    }
}
