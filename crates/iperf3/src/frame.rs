//! The control connection's bytes: the cookie, state bytes, a server error's codes, and
//! JSON documents behind a 4-byte big-endian length (`JSON_write`/`JSON_read`).

use thiserror::Error;

/// An iperf3 cookie: 36 characters of [`COOKIE_CHARS`] and a NUL (`make_cookie`).
pub const COOKIE_SIZE: usize = 37;
/// The characters `make_cookie` draws from.
pub const COOKIE_CHARS: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// The longest parameter document iperf3 reads (`MAX_PARAMS_JSON_STRING`).
pub const MAX_PARAMS_JSON: usize = 8 * 1024;
/// The longest result document flowlab reads (iperf3 reads any length; results carry one
/// object per stream, and a server's own output when asked with --get-server-output).
pub const MAX_RESULTS_JSON: usize = 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("not an iperf3 cookie (36 characters a-z, 2-7 and a NUL)")]
    BadCookie,
    #[error("unknown iperf3 state byte {0}")]
    UnknownState(i8),
    #[error("iperf3 JSON document of {len} bytes (1 to {max} allowed)")]
    BadLength { len: u32, max: usize },
}

/// The 37 bytes a client sends first on its control connection and on each TCP stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cookie([u8; COOKIE_SIZE]);

impl Cookie {
    /// A cookie from 36 random bytes, each mapped to a character as `make_cookie` does.
    pub fn from_entropy(random: [u8; COOKIE_SIZE - 1]) -> Cookie {
        let mut bytes = [0u8; COOKIE_SIZE];
        for (out, r) in bytes.iter_mut().zip(random) {
            *out = COOKIE_CHARS[usize::from(r) % COOKIE_CHARS.len()];
        }
        Cookie(bytes)
    }

    /// Checks bytes a peer sent: 36 cookie characters and a NUL.
    pub fn parse(bytes: &[u8; COOKIE_SIZE]) -> Result<Cookie, FrameError> {
        let (text, nul) = bytes.split_at(COOKIE_SIZE - 1);
        let valid = nul == [0] && text.iter().all(|c| COOKIE_CHARS.contains(c));
        valid.then_some(Cookie(*bytes)).ok_or(FrameError::BadCookie)
    }

    pub fn bytes(&self) -> &[u8; COOKIE_SIZE] {
        &self.0
    }
}

/// The control connection's state bytes (`iperf_api.h`), one signed byte each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    TestStart,
    TestRunning,
    TestEnd,
    ParamExchange,
    CreateStreams,
    ServerTerminate,
    ClientTerminate,
    ExchangeResults,
    DisplayResults,
    IperfStart,
    IperfDone,
    AccessDenied,
    ServerError,
}

const STATES: [(State, i8); 13] = [
    (State::TestStart, 1),
    (State::TestRunning, 2),
    (State::TestEnd, 4),
    (State::ParamExchange, 9),
    (State::CreateStreams, 10),
    (State::ServerTerminate, 11),
    (State::ClientTerminate, 12),
    (State::ExchangeResults, 13),
    (State::DisplayResults, 14),
    (State::IperfStart, 15),
    (State::IperfDone, 16),
    (State::AccessDenied, -1),
    (State::ServerError, -2),
];

impl State {
    pub fn byte(self) -> u8 {
        let value = STATES.iter().find(|(s, _)| *s == self).map(|(_, v)| *v);
        value.unwrap_or_default() as u8
    }

    pub fn from_byte(byte: u8) -> Result<State, FrameError> {
        let value = byte as i8;
        let state = STATES.iter().find(|(_, v)| *v == value).map(|(s, _)| *s);
        state.ok_or(FrameError::UnknownState(value))
    }
}

/// `SERVER_ERROR` and what follows it: iperf3's error number (`i_errno`) and the system's
/// `errno`, 4 bytes each, big-endian; the client prints `iperf_strerror(i_errno)`.
pub fn server_error(i_errno: u32, errno: u32) -> [u8; 9] {
    let mut bytes = [0u8; 9];
    bytes[0] = State::ServerError.byte();
    bytes[1..5].copy_from_slice(&i_errno.to_be_bytes());
    bytes[5..].copy_from_slice(&errno.to_be_bytes());
    bytes
}

/// A JSON document as `JSON_write` sends it: its length, 4 bytes big-endian, then the text.
pub fn encode_json(text: &str) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(4 + text.len());
    bytes.extend_from_slice(&(text.len() as u32).to_be_bytes());
    bytes.extend_from_slice(text.as_bytes());
    bytes
}

/// The length a document's 4-byte head announces, refused when empty or above `max`.
pub fn json_length(head: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let len = u32::from_be_bytes(head);
    match len as usize {
        n if n == 0 || n > max => Err(FrameError::BadLength { len, max }),
        n => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cookie Debian's iperf 3.12 sent (captured on loopback: the first 37 bytes of
    /// the control connection).
    const CAPTURED: &[u8; COOKIE_SIZE] = b"t2nkmmp2yf6ug3fp32lntcljhob2sqvxh6sn\0";

    #[test]
    fn cookies_are_36_characters_and_a_nul() {
        assert_eq!(Cookie::parse(CAPTURED).unwrap().bytes(), CAPTURED);
        let made = Cookie::from_entropy([0; 36]);
        assert_eq!(&made.bytes()[..], b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\0");
        // 31 % 32 = '7', 32 % 32 = 'a', 255 % 32 = '7': make_cookie's modulo.
        let mut random = [32u8; 36];
        random[0] = 31;
        random[1] = 255;
        assert_eq!(&Cookie::from_entropy(random).bytes()[..3], b"77a");
        let mut no_nul = *CAPTURED;
        no_nul[36] = b'a';
        assert_eq!(Cookie::parse(&no_nul), Err(FrameError::BadCookie));
        let mut upper = *CAPTURED;
        upper[0] = b'X';
        assert_eq!(Cookie::parse(&upper), Err(FrameError::BadCookie));
    }

    #[test]
    fn state_bytes_are_iperf_api_h_values() {
        let bytes: Vec<u8> = STATES.iter().map(|(s, _)| s.byte()).collect();
        assert_eq!(bytes, [1, 2, 4, 9, 10, 11, 12, 13, 14, 15, 16, 0xff, 0xfe]);
        for (state, _) in STATES {
            assert_eq!(State::from_byte(state.byte()), Ok(state));
        }
        assert_eq!(State::from_byte(3), Err(FrameError::UnknownState(3)));
        assert_eq!(State::from_byte(0x80), Err(FrameError::UnknownState(-128)));
    }

    #[test]
    fn server_errors_carry_two_big_endian_codes() {
        // IEDURATION (5), errno 0, as `iperf_set_send_state(SERVER_ERROR)` then two Nwrites.
        assert_eq!(server_error(5, 0), [0xfe, 0, 0, 0, 5, 0, 0, 0, 0]);
    }

    #[test]
    fn json_documents_follow_their_big_endian_length() {
        assert_eq!(encode_json("{\"tcp\":true}"), b"\0\0\0\x0c{\"tcp\":true}");
        assert_eq!(json_length([0, 0, 0x20, 0], MAX_PARAMS_JSON), Ok(8192));
        let too_long = json_length([0, 0, 0x20, 1], MAX_PARAMS_JSON);
        assert_eq!(
            too_long,
            Err(FrameError::BadLength {
                len: 8193,
                max: 8192
            })
        );
        assert!(json_length([0; 4], MAX_PARAMS_JSON).is_err());
    }
}
