//! The Internet checksum (RFC 1071) in its parts: a raw sum of 16-bit words that callers add
//! up piece by piece (a pseudo-header, a header, a payload), then fold.

/// The raw sum of `bytes` as big-endian 16-bit words, an odd last byte padded with zero: add
/// sums of pieces that start at even offsets, then [`fold`] once.
pub fn add_words(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(2);
    let mut sum: u64 = chunks
        .by_ref()
        .map(|w| u64::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    if let [last] = chunks.remainder() {
        sum += u64::from(*last) << 8;
    }
    sum
}

/// A raw sum folded to 16 bits with end-around carries (not inverted: what a checksum
/// field left to the device holds for its pseudo-header).
pub fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum of `bytes`: the ones' complement of their folded sum.
pub fn internet(bytes: &[u8]) -> u16 {
    !fold(add_words(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_1071_example() {
        // RFC 1071 § 3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add_words(&bytes)), 0xddf2);
        assert_eq!(internet(&bytes), !0xddf2);
    }

    #[test]
    fn an_odd_last_byte_counts_as_the_high_half_of_a_word() {
        assert_eq!(add_words(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn sums_of_pieces_at_even_offsets_add_up() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let whole = fold(add_words(&bytes));
        let parts = fold(add_words(&bytes[..500]) + add_words(&bytes[500..]));
        assert_eq!(whole, parts);
    }
}
