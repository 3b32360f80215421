//! Authenticated test packets (TWAMP's authenticated mode, for flowlab's probes): a 16-byte
//! tag after the probe header, HMAC-SHA256 over the header under the session's test-packet
//! key, truncated. The sender seals each packet; the receiver drops and counts any whose tag
//! is missing or wrong, so a forged or altered packet never enters the figures.

use flowlab_wire::probe::{auth_tag_range, FLAG_AUTH, PROBE_HEADER_LEN, PROBE_TAG_LEN};
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// A session's test-packet key, keyed once; each packet clones the keyed state.
#[derive(Clone)]
pub struct PacketAuth {
    keyed: HmacSha256,
}

impl std::fmt::Debug for PacketAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PacketAuth(..)")
    }
}

impl PacketAuth {
    pub fn new(test_key: &[u8; 32]) -> Self {
        PacketAuth {
            keyed: HmacSha256::new_from_slice(test_key).expect("HMAC takes any key length"),
        }
    }

    fn tag(&self, header: &[u8]) -> [u8; PROBE_TAG_LEN] {
        let mut mac = self.keyed.clone();
        mac.update(header);
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; PROBE_TAG_LEN];
        tag.copy_from_slice(&full[..PROBE_TAG_LEN]);
        tag
    }

    /// Sets the header's authenticated flag and writes the tag after it; false (leaving the
    /// packet as it was) when the packet cannot hold a tag.
    pub fn seal(&self, packet: &mut [u8]) -> bool {
        let Some(range) = auth_tag_range(packet) else {
            return false;
        };
        packet[3] |= FLAG_AUTH;
        let tag = self.tag(&packet[..PROBE_HEADER_LEN]);
        packet[range].copy_from_slice(&tag);
        true
    }

    /// Whether the packet carries the authenticated flag and a right tag (compared in constant
    /// time).
    pub fn verify(&self, packet: &[u8]) -> bool {
        let Some(range) = auth_tag_range(packet) else {
            return false;
        };
        if packet[3] & FLAG_AUTH == 0 {
            return false;
        }
        let mut mac = self.keyed.clone();
        mac.update(&packet[..PROBE_HEADER_LEN]);
        mac.verify_truncated_left(&packet[range]).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_wire::ProbeRepr;

    fn packet(seq: u64) -> Vec<u8> {
        let mut p = vec![0u8; 64];
        let probe = ProbeRepr {
            flags: 0,
            session: 7,
            seq,
            sent_ns: 1_000,
            echoed_ns: 0,
        };
        assert!(probe.emit(&mut p));
        p
    }

    /// HMAC-SHA256 with key 32 × 0x0b over the header, truncated to 16 bytes: computed once
    /// with Python's `hmac` module, so a change of key use, coverage or truncation shows.
    #[test]
    fn tag_vector() {
        let auth = PacketAuth::new(&[0x0b; 32]);
        let mut p = packet(42);
        assert!(auth.seal(&mut p));
        assert_eq!(p[3], FLAG_AUTH);
        assert_eq!(hex(&p[32..48]), TAG_OF_SEQ_42);
        assert!(auth.verify(&p));
    }

    const TAG_OF_SEQ_42: &str = "21dae8ae9e50bdacdf36fa5a11ef74a9";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn any_change_or_other_key_fails() {
        let auth = PacketAuth::new(&[1; 32]);
        let mut p = packet(1);
        auth.seal(&mut p);
        for i in 0..48 {
            let mut altered = p.clone();
            altered[i] ^= 0x01;
            assert!(!auth.verify(&altered), "byte {i} altered, still verified");
        }
        // The padding after the tag is not covered (as in TWAMP): it carries no figures.
        let mut padded = p.clone();
        padded[60] ^= 0xff;
        assert!(auth.verify(&padded));
        assert!(!PacketAuth::new(&[2; 32]).verify(&p));
        assert!(!auth.verify(&packet(1)), "an unsealed packet is refused");
        let mut short = packet(1)[..47].to_vec();
        assert!(!auth.seal(&mut short));
        assert!(!auth.verify(&short));
    }
}
