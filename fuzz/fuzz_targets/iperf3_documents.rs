//! iperf3's untrusted inputs as flowlab's server and client read them: the parameter and
//! result documents, the UDP header, cookies, state bytes and JSON length heads. Never a
//! panic; what parses re-encodes to something that parses back the same.
#![no_main]

use flowlab_iperf3::frame::{json_length, MAX_PARAMS_JSON};
use flowlab_iperf3::udp::UdpHeader;
use flowlab_iperf3::{Cookie, Params, ParamsLimits, Results, State, COOKIE_SIZE};
use libfuzzer_sys::fuzz_target;

const LIMITS: ParamsLimits = ParamsLimits {
    max_duration_s: 300,
    max_rate_bps: Some(10_000_000_000),
    max_streams: 1024,
    min_tcp_block: 32,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(params) = Params::parse(data) {
        if let Ok(plan) = params.check(&LIMITS) {
            let again = Params::for_plan(&plan, "fuzz").to_json();
            assert_eq!(
                Params::parse(again.as_bytes()).and_then(|p| p.check(&LIMITS)),
                Ok(plan)
            );
        }
    }
    for streams in [0, 1, 2] {
        if let Ok(results) = Results::parse(data, streams) {
            assert_eq!(
                Results::parse(results.to_json().as_bytes(), streams),
                Ok(results)
            );
        }
    }
    for wide in [false, true] {
        if let Some(header) = UdpHeader::parse(data, wide) {
            let mut out = vec![0u8; UdpHeader::len(wide)];
            header.emit(&mut out, wide);
            assert_eq!(UdpHeader::parse(&out, wide), Some(header));
            let _ = header.sent_ns();
        }
    }
    if let Some(cookie) = data
        .get(..COOKIE_SIZE)
        .and_then(|c| <&[u8; COOKIE_SIZE]>::try_from(c).ok())
    {
        let _ = Cookie::parse(cookie);
    }
    if let Some(&byte) = data.first() {
        if let Ok(state) = State::from_byte(byte) {
            assert_eq!(state.byte(), byte);
        }
    }
    if let Some(head) = data.get(..4).and_then(|h| <[u8; 4]>::try_from(h).ok()) {
        let _ = json_length(head, MAX_PARAMS_JSON);
    }
});
