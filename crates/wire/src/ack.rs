//! The return-routability datagram of a reverse UDP test. The agent sends a flow's traffic
//! only while the client's data socket of that flow keeps sending it the session's cookie
//! (from the agent's `accepted` message): a port that never asked, or stopped asking, gets
//! nothing, so a request cannot aim the agent at a port that does not want the traffic.
//!
//! Layout, 16 bytes: the magic `FLOWACK\0`, then the cookie as a big-endian `u64`.

/// Bytes of an acknowledgement.
pub const ACK_LEN: usize = 16;
/// Its first eight bytes.
pub const ACK_MAGIC: [u8; 8] = *b"FLOWACK\0";

/// The acknowledgement carrying `cookie`.
pub fn emit_ack(cookie: u64) -> [u8; ACK_LEN] {
    let mut out = [0u8; ACK_LEN];
    out[..8].copy_from_slice(&ACK_MAGIC);
    out[8..].copy_from_slice(&cookie.to_be_bytes());
    out
}

/// Whether `bytes` is exactly the acknowledgement of `cookie`.
pub fn is_ack(bytes: &[u8], cookie: u64) -> bool {
    bytes == emit_ack(cookie)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_vector() {
        let bytes = emit_ack(0x0102_0304_0506_0708);
        assert_eq!(&bytes, b"FLOWACK\0\x01\x02\x03\x04\x05\x06\x07\x08");
        assert!(is_ack(&bytes, 0x0102_0304_0506_0708));
        assert!(!is_ack(&bytes, 0x0102_0304_0506_0709));
        assert!(!is_ack(&bytes[..15], 0x0102_0304_0506_0708));
    }
}
