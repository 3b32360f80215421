//! The client's parameter document (`send_parameters`/`get_parameters`): every field iperf3
//! sends, each checked before a server acts on it.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use crate::frame::MAX_PARAMS_JSON;

/// iperf3's error numbers (`iperf_api.h`) a refusal names; the client prints their text.
pub mod errno {
    /// "test duration valid values are 0 to 86400 seconds"-style duration refusal.
    pub const DURATION: u32 = 5;
    pub const NUM_STREAMS: u32 = 6;
    pub const BLOCK_SIZE: u32 = 7;
    pub const UNIMPLEMENTED: u32 = 13;
    pub const UDP_BLOCK_SIZE: u32 = 20;
    pub const TOTAL_RATE: u32 = 27;
    pub const RECV_PARAMS: u32 = 114;
}

/// Most bytes in one TCP read or write (`MAX_BLOCKSIZE`).
pub const MAX_TCP_BLOCK: u64 = 1024 * 1024;
/// Most bytes of one UDP datagram's payload (`MAX_UDP_BLOCKSIZE`).
pub const MAX_UDP_BLOCK: u64 = 65535 - 8 - 20;
/// Fewest bytes of a UDP datagram: the header with a 64-bit count (`MIN_UDP_BLOCKSIZE` is
/// 4 + 4 + 8 + 4 in newer iperf3; 16 covers what either header needs).
pub const MIN_UDP_BLOCK: u64 = 16;
/// iperf3's blocks when the client leaves `len` out.
pub const DEFAULT_TCP_BLOCK: u64 = 128 * 1024;
pub const DEFAULT_UDP_BLOCK: u64 = 1460;

/// The document as iperf3 sends it. Numbers stay JSON numbers (cJSON prints large ones in
/// exponent form) until checked into integers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sctp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omit: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_affinity: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockcount: Option<Number>,
    #[serde(rename = "MSS", skip_serializing_if = "Option::is_none")]
    pub mss: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodelay: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reverse: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub len: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fqrate: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing_timer: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso_dg_size: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso_bf_size: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gro: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gro_bf_size: Option<Number>,
    #[serde(rename = "TOS", skip_serializing_if = "Option::is_none")]
    pub tos: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flowlabel: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub get_server_output: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_counters_64bit: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeating_payload: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dont_fragment: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authtoken: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip_rx_copy: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_version: Option<String>,
}

/// Why a server refuses a client's parameters: iperf3's error number for `SERVER_ERROR`,
/// and a line for the server's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub i_errno: u32,
    pub message: String,
}

fn refuse(i_errno: u32, message: impl Into<String>) -> Refusal {
    Refusal {
        i_errno,
        message: message.into(),
    }
}

/// What a server allows one test (the agent's limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamsLimits {
    pub max_duration_s: u64,
    /// All streams together; `None`: no limit.
    pub max_rate_bps: Option<u64>,
    pub max_streams: u64,
    /// Fewest bytes per TCP write the server's sender can fill (iperf3 allows 1).
    pub min_tcp_block: u64,
}

/// The test a checked parameter document asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestPlan {
    pub udp: bool,
    /// The server sends (`-R`).
    pub reverse: bool,
    pub streams: u64,
    pub duration_s: u64,
    /// Bytes per write (TCP) or datagram (UDP).
    pub block: u64,
    /// Per stream; `None`: as fast as it goes (TCP without `-b`).
    pub rate_bps: Option<u64>,
    /// UDP packet counts of 64 bits (`--udp-counters-64bit`).
    pub counters_64bit: bool,
}

/// A JSON number that must be a whole number within `0..=max`.
fn whole(value: &Option<Number>, name: &str, max: u64) -> Result<Option<u64>, Refusal> {
    let Some(v) = value else { return Ok(None) };
    let exact = v.as_u64().or_else(|| {
        let f = v.as_f64()?;
        (f.fract() == 0.0 && (0.0..=max as f64).contains(&f)).then_some(f as u64)
    });
    match exact.filter(|&n| n <= max) {
        Some(n) => Ok(Some(n)),
        None => Err(refuse(
            errno::RECV_PARAMS,
            format!("{name} {v} is not 0 to {max}"),
        )),
    }
}

fn number(n: u64) -> Option<Number> {
    Some(Number::from(n))
}

impl Params {
    /// Parses a document a client sent; unknown fields, wrong types and bad JSON are refused.
    pub fn parse(bytes: &[u8]) -> Result<Params, Refusal> {
        if bytes.len() > MAX_PARAMS_JSON {
            return Err(refuse(errno::RECV_PARAMS, "parameters longer than 8 KiB"));
        }
        serde_json::from_slice(bytes)
            .map_err(|e| refuse(errno::RECV_PARAMS, format!("bad parameters: {e}")))
    }

    /// The document a client sends for `plan` (what iperf 3.12 sends for the same flags).
    pub fn for_plan(plan: &TestPlan, version: &str) -> Params {
        Params {
            tcp: (!plan.udp).then_some(true),
            udp: plan.udp.then_some(true),
            omit: number(0),
            time: number(plan.duration_s),
            num: number(0),
            blockcount: number(0),
            parallel: number(plan.streams),
            reverse: plan.reverse.then_some(true),
            len: number(plan.block),
            // Unlimited (-b 0) is left out, as iperf3 does.
            bandwidth: plan.rate_bps.map(Number::from),
            pacing_timer: number(1000),
            udp_counters_64bit: plan.counters_64bit.then(|| Number::from(1)),
            client_version: Some(version.to_string()),
            ..Params::default()
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Checks every field against what flowlab runs and the server's limits.
    pub fn check(&self, limits: &ParamsLimits) -> Result<TestPlan, Refusal> {
        self.check_unsupported()?;
        let udp = match (self.tcp, self.udp) {
            (Some(true), None | Some(false)) => false,
            (None | Some(false), Some(true)) => true,
            _ => return Err(refuse(errno::RECV_PARAMS, "neither or both of tcp and udp")),
        };
        let duration_s = whole(&self.time, "time", limits.max_duration_s)
            .map_err(|e| refuse(errno::DURATION, e.message))?
            .unwrap_or(10);
        if duration_s == 0 {
            return Err(refuse(
                errno::DURATION,
                "time 0 (run until interrupted) refused",
            ));
        }
        let streams = whole(&self.parallel, "parallel", limits.max_streams)
            .map_err(|e| refuse(errno::NUM_STREAMS, e.message))?
            .unwrap_or(1);
        if streams == 0 {
            return Err(refuse(errno::NUM_STREAMS, "parallel 0"));
        }
        let block = self.block(udp, limits)?;
        // No bandwidth (iperf3 -b 0; a UDP client sends its 1 Mbit/s default) is unlimited:
        // UDP is then paced at the server's share of its limit.
        let rate_bps = match whole(&self.bandwidth, "bandwidth", u64::MAX >> 11)? {
            None | Some(0) if udp => limits.max_rate_bps.map(|max| (max / streams).max(1)),
            None | Some(0) => None,
            Some(rate) => Some(rate),
        };
        let total = rate_bps.map(|r| r.saturating_mul(streams));
        if let (Some(total), Some(max)) = (total, limits.max_rate_bps) {
            if total > max {
                return Err(refuse(
                    errno::TOTAL_RATE,
                    format!("{total} bit/s over {max}"),
                ));
            }
        }
        let flag = |v: &Option<Number>, name| whole(v, name, 1).map(|v| v == Some(1));
        Ok(TestPlan {
            udp,
            reverse: self.reverse == Some(true),
            streams,
            duration_s,
            block,
            rate_bps,
            counters_64bit: flag(&self.udp_counters_64bit, "udp_counters_64bit")?,
        })
    }

    fn block(&self, udp: bool, limits: &ParamsLimits) -> Result<u64, Refusal> {
        let (min, max, default, code) = match udp {
            true => (
                MIN_UDP_BLOCK,
                MAX_UDP_BLOCK,
                DEFAULT_UDP_BLOCK,
                errno::UDP_BLOCK_SIZE,
            ),
            false => (
                limits.min_tcp_block.max(1),
                MAX_TCP_BLOCK,
                DEFAULT_TCP_BLOCK,
                errno::BLOCK_SIZE,
            ),
        };
        let len = whole(&self.len, "len", max).map_err(|e| refuse(code, e.message))?;
        match len.unwrap_or(default) {
            n if n < min => Err(refuse(code, format!("len {n} below {min}"))),
            n => Ok(n),
        }
    }

    /// Features flowlab's server does not run, refused rather than silently ignored.
    fn check_unsupported(&self) -> Result<(), Refusal> {
        let set = |v: &Option<Number>| v.as_ref().is_some_and(|v| v.as_f64() != Some(0.0));
        let unsupported = [
            ("sctp", self.sctp == Some(true)),
            ("bidirectional", self.bidirectional == Some(true)),
            ("mptcp", self.mptcp == Some(true)),
            ("omit", set(&self.omit)),
            ("num (-n)", set(&self.num)),
            ("blockcount (-k)", set(&self.blockcount)),
            ("authtoken", self.authtoken.is_some()),
            ("get_server_output", set(&self.get_server_output)),
            ("gso", set(&self.gso)),
            ("gro", set(&self.gro)),
        ];
        match unsupported.iter().find(|(_, on)| *on) {
            Some((name, _)) => Err(refuse(
                errno::UNIMPLEMENTED,
                format!("{name} not supported"),
            )),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Debian's iperf 3.12 sent for `iperf3 -c HOST -u -b 2M -l 1000 -t 3 -P 2`
    /// (captured on loopback: the document after PARAM_EXCHANGE).
    pub const UDP_PARAMS: &[u8] = br#"{"udp":true,"omit":0,"time":3,"num":0,"blockcount":0,"parallel":2,"len":1000,"bandwidth":2000000,"pacing_timer":1000,"client_version":"3.12"}"#;
    /// And for `iperf3 -c HOST -R -t 5`.
    const TCP_REVERSE_PARAMS: &[u8] = br#"{"tcp":true,"omit":0,"time":5,"num":0,"blockcount":0,"parallel":1,"reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#;

    const LIMITS: ParamsLimits = ParamsLimits {
        max_duration_s: 300,
        max_rate_bps: Some(10_000_000_000),
        max_streams: 128,
        min_tcp_block: 32,
    };

    #[test]
    fn captured_documents_become_plans() {
        let udp = Params::parse(UDP_PARAMS).unwrap().check(&LIMITS).unwrap();
        let expected = TestPlan {
            udp: true,
            reverse: false,
            streams: 2,
            duration_s: 3,
            block: 1000,
            rate_bps: Some(2_000_000),
            counters_64bit: false,
        };
        assert_eq!(udp, expected);
        let tcp = Params::parse(TCP_REVERSE_PARAMS)
            .unwrap()
            .check(&LIMITS)
            .unwrap();
        assert_eq!(
            (tcp.udp, tcp.reverse, tcp.block, tcp.rate_bps),
            (false, true, 131072, None)
        );
    }

    #[test]
    fn a_plan_is_sent_as_iperf_3_12_sends_it() {
        let plan = Params::parse(UDP_PARAMS).unwrap().check(&LIMITS).unwrap();
        assert_eq!(
            Params::for_plan(&plan, "3.12").to_json().as_bytes(),
            UDP_PARAMS
        );
    }

    #[test]
    fn fields_outside_the_limits_are_refused_with_iperf3s_error_numbers() {
        let refused = |json: &str| Params::parse(json.as_bytes()).and_then(|p| p.check(&LIMITS));
        let code = |json: &str| refused(json).unwrap_err().i_errno;
        assert_eq!(code(r#"{"tcp":true,"time":301}"#), errno::DURATION);
        assert_eq!(code(r#"{"tcp":true,"time":0}"#), errno::DURATION);
        assert_eq!(code(r#"{"tcp":true,"time":1.5}"#), errno::DURATION);
        assert_eq!(code(r#"{"tcp":true,"parallel":129}"#), errno::NUM_STREAMS);
        assert_eq!(code(r#"{"tcp":true,"len":1048577}"#), errno::BLOCK_SIZE);
        assert_eq!(code(r#"{"tcp":true,"len":31}"#), errno::BLOCK_SIZE);
        assert_eq!(code(r#"{"udp":true,"len":8}"#), errno::UDP_BLOCK_SIZE);
        assert_eq!(code(r#"{"udp":true,"len":65508}"#), errno::UDP_BLOCK_SIZE);
        let fast = r#"{"tcp":true,"bandwidth":6e9,"parallel":2}"#;
        assert_eq!(code(fast), errno::TOTAL_RATE);
        assert_eq!(
            code(r#"{"tcp":true,"bidirectional":true}"#),
            errno::UNIMPLEMENTED
        );
        assert_eq!(code(r#"{"tcp":true,"udp":true}"#), errno::RECV_PARAMS);
        assert_eq!(code(r#"{"tcp":true,"surprise":1}"#), errno::RECV_PARAMS);
        assert_eq!(code(r#"{"tcp":"yes"}"#), errno::RECV_PARAMS);
        assert_eq!(code("not json"), errno::RECV_PARAMS);
        let message = refused(r#"{"tcp":true,"omit":2}"#).unwrap_err().to_string();
        assert_eq!(message, "omit not supported");
    }

    #[test]
    fn unlimited_udp_is_paced_at_the_servers_share_of_its_limit() {
        // iperf3 -u -b 0 -P 4 sends no bandwidth.
        let doc = br#"{"udp":true,"parallel":4}"#;
        let plan = Params::parse(doc).unwrap().check(&LIMITS).unwrap();
        assert_eq!(plan.rate_bps, Some(2_500_000_000));
        let unlimited = ParamsLimits {
            max_rate_bps: None,
            ..LIMITS
        };
        let plan = Params::parse(doc).unwrap().check(&unlimited).unwrap();
        assert_eq!(plan.rate_bps, None);
        assert_eq!(Params::for_plan(&plan, "x").bandwidth, None);
        let tcp = Params::parse(br#"{"tcp":true,"bandwidth":0}"#).unwrap();
        assert_eq!(tcp.check(&LIMITS).unwrap().rate_bps, None);
    }

    #[test]
    fn what_the_client_leaves_out_takes_iperf3s_defaults() {
        let udp = Params::parse(br#"{"udp":true}"#)
            .unwrap()
            .check(&LIMITS)
            .unwrap();
        assert_eq!(
            (udp.duration_s, udp.streams, udp.block),
            (10, 1, DEFAULT_UDP_BLOCK)
        );
        let tcp = Params::parse(br#"{"tcp":true}"#)
            .unwrap()
            .check(&LIMITS)
            .unwrap();
        assert_eq!((tcp.block, tcp.rate_bps), (DEFAULT_TCP_BLOCK, None));
    }
}
