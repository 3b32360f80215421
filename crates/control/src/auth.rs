//! Pre-shared-key authentication, mutual, and the tags of every later frame.
//!
//! The agent sends a nonce, the client its own nonce and HMAC-SHA256(key, "flowlab client" ||
//! client nonce || agent nonce), the agent HMAC-SHA256(key, "flowlab agent" || ...). Both then
//! derive the session key HMAC-SHA256(key, "flowlab session" || client nonce || agent nonce)
//! and tag each frame with HMAC-SHA256(session key, direction || sequence || frame). The key
//! itself never crosses the network; fresh nonces on both sides make every session's key new.

use std::path::Path;

use flowlab_wire::control::{split_tag, FRAME_TAG_LEN};
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// The key of a session's authenticated test packets, derived from its session key so the
/// control frames' key never tags anything an observer of the data path can collect.
pub fn test_packet_key(session_key: &[u8; 32]) -> [u8; 32] {
    let mut mac = HmacSha256::new_from_slice(session_key).expect("HMAC takes any key length");
    mac.update(b"flowlab test packets");
    mac.finalize().into_bytes().into()
}

/// Bytes of each side's nonce (sent as hex).
pub const NONCE_LEN: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("cannot read key file {path}: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("key file {0} is empty")]
    Empty(String),
}

/// Reads a key file; surrounding white space (a trailing newline) is not part of the key.
pub fn load_key(path: &Path) -> Result<Vec<u8>, AuthError> {
    let bytes = std::fs::read(path).map_err(|e| AuthError::Unreadable {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let key = bytes.trim_ascii().to_vec();
    if key.is_empty() {
        return Err(AuthError::Empty(path.display().to_string()));
    }
    Ok(key)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A fresh random nonce, as hex.
pub fn new_nonce() -> String {
    let mut nonce = [0u8; NONCE_LEN];
    rand::thread_rng().fill_bytes(&mut nonce);
    hex(&nonce)
}

fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length.
    HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
}

/// The nonces of one session, checked to be [`NONCE_LEN`] bytes each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nonces {
    pub client: [u8; NONCE_LEN],
    pub agent: [u8; NONCE_LEN],
}

impl Nonces {
    /// Parses both hex nonces; `None` when either is not 32 bytes of hex.
    pub fn parse(client: &str, agent: &str) -> Option<Nonces> {
        Some(Nonces {
            client: unhex(client)?.try_into().ok()?,
            agent: unhex(agent)?.try_into().ok()?,
        })
    }

    fn keyed(&self, key: &[u8], label: &[u8]) -> HmacSha256 {
        let mut m = mac(key);
        m.update(label);
        m.update(&self.client);
        m.update(&self.agent);
        m
    }

    /// The client's proof (hex).
    pub fn client_proof(&self, key: &[u8]) -> String {
        hex(&self.keyed(key, b"flowlab client").finalize().into_bytes())
    }

    /// The agent's proof (hex).
    pub fn agent_proof(&self, key: &[u8]) -> String {
        hex(&self.keyed(key, b"flowlab agent").finalize().into_bytes())
    }

    /// Constant-time check of the client's proof.
    pub fn verify_client(&self, key: &[u8], proof: &str) -> bool {
        verify(self.keyed(key, b"flowlab client"), proof)
    }

    /// Constant-time check of the agent's proof.
    pub fn verify_agent(&self, key: &[u8], proof: &str) -> bool {
        verify(self.keyed(key, b"flowlab agent"), proof)
    }

    pub fn session_key(&self, key: &[u8]) -> [u8; 32] {
        self.keyed(key, b"flowlab session")
            .finalize()
            .into_bytes()
            .into()
    }
}

fn verify(m: HmacSha256, proof: &str) -> bool {
    unhex(proof).is_some_and(|tag| m.verify_slice(&tag).is_ok())
}

/// Which end of the control connection this is: each direction has its own sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Client,
    Agent,
}

impl End {
    fn byte(self) -> u8 {
        match self {
            End::Client => b'C',
            End::Agent => b'A',
        }
    }

    fn other(self) -> End {
        match self {
            End::Client => End::Agent,
            End::Agent => End::Client,
        }
    }
}

/// A frame whose tag did not match: altered, replayed, reordered, or another key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a control frame failed authentication (altered, replayed or reordered on the way)")]
pub struct BadTag;

/// Tags frames sent and checks frames received, each direction numbered from 0.
pub struct FrameTags {
    key: [u8; 32],
    end: End,
    sent: u64,
    received: u64,
}

impl FrameTags {
    pub fn new(session_key: [u8; 32], end: End) -> Self {
        FrameTags {
            key: session_key,
            end,
            sent: 0,
            received: 0,
        }
    }

    fn tagger(&self, from: End, seq: u64, len: usize, content: &[u8]) -> HmacSha256 {
        let mut m = mac(&self.key);
        m.update(&[from.byte()]);
        m.update(&seq.to_be_bytes());
        m.update(&(len as u32).to_be_bytes());
        m.update(content);
        m
    }

    /// Appends the tag to an encoded frame (prefix included) and fixes its length prefix.
    pub fn seal(&mut self, frame: &mut Vec<u8>) {
        let len = frame.len() - 4 + FRAME_TAG_LEN;
        frame[..4].copy_from_slice(&(len as u32).to_be_bytes());
        let m = self.tagger(self.end, self.sent, len, &frame[4..]);
        frame.extend_from_slice(&m.finalize().into_bytes());
        self.sent += 1;
    }

    /// Checks a received frame's content (after the prefix) and returns it without its tag.
    pub fn open<'a>(&mut self, frame: &'a [u8]) -> Result<&'a [u8], BadTag> {
        let (content, tag) = split_tag(frame).ok_or(BadTag)?;
        let m = self.tagger(self.end.other(), self.received, frame.len(), content);
        m.verify_slice(tag).map_err(|_| BadTag)?;
        self.received += 1;
        Ok(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonces() -> Nonces {
        Nonces::parse(&"11".repeat(32), &"22".repeat(32)).unwrap()
    }

    #[test]
    fn rfc4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        let mut m = mac(b"Jefe");
        m.update(b"what do ya want for nothing?");
        assert_eq!(
            hex(&m.finalize().into_bytes()),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn derivation_vectors() {
        // Fixed vectors (computed with Python's hmac): key "secret", client nonce 0x11 * 32, agent nonce 0x22 * 32.
        let n = nonces();
        assert_eq!(
            hex(&n.session_key(b"secret")),
            "8f8220c5854b666ae87044cd240472429b207ee6ecb0872eedb1fab18fc40c7c"
        );
        assert_eq!(
            n.client_proof(b"secret"),
            "d420a2178b53715207a9ced76ec0f967e87c5c662b7cd7714a55a62666133f99"
        );
        assert_eq!(
            n.agent_proof(b"secret"),
            "7f8d2bf342632dfea3ef8e13b9bae2bed84b61e1d8c4f164d4ebd3d05795b6eb"
        );
    }

    #[test]
    fn proofs_check_key_side_and_nonces() {
        let n = nonces();
        let client = n.client_proof(b"secret");
        assert!(n.verify_client(b"secret", &client));
        assert!(!n.verify_client(b"other", &client));
        assert!(
            !n.verify_agent(b"secret", &client),
            "a client proof is no agent proof"
        );
        let swapped = Nonces::parse(&"22".repeat(32), &"11".repeat(32)).unwrap();
        assert!(!swapped.verify_client(b"secret", &client));
        assert!(!n.verify_client(b"secret", "zz"));
        assert!(!n.verify_client(b"secret", "abc"));
        assert_eq!(new_nonce().len(), 2 * NONCE_LEN);
        assert!(Nonces::parse("11", &"22".repeat(32)).is_none());
        assert!(Nonces::parse(&"1g".repeat(32), &"22".repeat(32)).is_none());
    }

    fn pair() -> (FrameTags, FrameTags) {
        let key = nonces().session_key(b"secret");
        (
            FrameTags::new(key, End::Client),
            FrameTags::new(key, End::Agent),
        )
    }

    #[test]
    fn tagged_frame_vector() {
        let (mut client, mut agent) = pair();
        let mut frame = crate::protocol::Message::Start.encode();
        client.seal(&mut frame);
        assert_eq!(frame[..4], [0, 0, 0, 17 + 32]);
        assert_eq!(
            hex(&frame[4 + 17..]),
            "c0e0be022ee1dc2368af96e932f5c3e462f18f0b9953150f58d9b4beb8ffd3e6"
        );
        assert_eq!(agent.open(&frame[4..]), Ok(&frame[4..4 + 17]));
    }

    #[test]
    fn tags_refuse_change_replay_reorder_and_reflection() {
        let (mut client, mut agent) = pair();
        let frames: Vec<Vec<u8>> = (0..2)
            .map(|_| {
                let mut f = crate::protocol::Message::Heartbeat.encode();
                client.seal(&mut f);
                f
            })
            .collect();
        let mut flipped = frames[0].clone();
        flipped[10] ^= 1;
        assert_eq!(agent.open(&flipped[4..]), Err(BadTag));
        assert_eq!(agent.open(&frames[1][4..]), Err(BadTag), "reordered");
        assert!(agent.open(&frames[0][4..]).is_ok());
        assert_eq!(agent.open(&frames[0][4..]), Err(BadTag), "replayed");
        assert!(agent.open(&frames[1][4..]).is_ok());
        // The agent's own frame 0 reflected back to it.
        let mut own = crate::protocol::Message::Heartbeat.encode();
        let (mut client, mut agent) = pair();
        agent.seal(&mut own);
        assert_eq!(agent.open(&own[4..]), Err(BadTag));
        assert!(client.open(&own[4..]).is_ok());
        assert_eq!(agent.open(&[0u8; 5]), Err(BadTag));
    }
}
