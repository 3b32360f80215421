//! Pre-shared-key challenge-response: the agent sends a random nonce, the client returns
//! HMAC-SHA256(key, nonce). The key itself never crosses the network.

use std::path::Path;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

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

pub fn new_nonce() -> String {
    let mut nonce = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut nonce);
    hex(&nonce)
}

fn mac(key: &[u8]) -> HmacSha256 {
    // HMAC takes keys of any length.
    HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
}

pub fn respond(key: &[u8], nonce: &str) -> String {
    let mut m = mac(key);
    m.update(nonce.as_bytes());
    hex(&m.finalize().into_bytes())
}

/// Constant-time check of a client's response.
pub fn verify(key: &[u8], nonce: &str, response: &str) -> bool {
    let Some(tag) = unhex(response) else {
        return false;
    };
    let mut m = mac(key);
    m.update(nonce.as_bytes());
    m.verify_slice(&tag).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4231_case_2() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
        assert_eq!(
            respond(b"Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn verify_accepts_only_the_right_key() {
        let nonce = new_nonce();
        assert_eq!(nonce.len(), 64);
        let good = respond(b"secret", &nonce);
        assert!(verify(b"secret", &nonce, &good));
        assert!(!verify(b"other", &nonce, &good));
        assert!(!verify(b"secret", &nonce, "zz"));
        assert!(!verify(b"secret", &nonce, "abc"));
    }
}
