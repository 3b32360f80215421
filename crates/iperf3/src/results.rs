//! The result document each end sends the other at EXCHANGE_RESULTS (`send_results`,
//! `get_results`): CPU use, and per stream its bytes, UDP packets, losses and jitter.

use serde::{Deserialize, Serialize};

use crate::frame::MAX_RESULTS_JSON;

/// Figures iperf3 reads as numbers. Version 3.12 sends "not known" (-1) as 2^64 - 1 in a
/// double, so these stay `f64`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// -1 from a receiver; 1 or 0 from a sender that can or cannot read TCP retransmits.
    pub sender_has_retransmits: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResult>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// The stream's id ([`crate::stream_id`]).
    pub id: f64,
    /// Sent by a sender, received by a receiver.
    pub bytes: f64,
    /// TCP retransmits of a sender, else -1.
    pub retransmits: f64,
    /// UDP receiver: RFC 1889 jitter in seconds; else 0.
    pub jitter: f64,
    /// UDP receiver: packets missing from the sequence; else 0.
    pub errors: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted_errors: Option<f64>,
    /// UDP: packets sent, or the highest packet number received.
    pub packets: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted_packets: Option<f64>,
    /// Seconds from the stream's start: 0 and its length.
    pub start_time: f64,
    pub end_time: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResultsError {
    #[error("bad iperf3 results: {0}")]
    Json(String),
    #[error("iperf3 results for {got} streams, {expected} expected")]
    StreamCount { got: usize, expected: usize },
    #[error("iperf3 results with a negative, fractional or non-finite {0}")]
    BadFigure(&'static str),
}

impl Results {
    /// Parses a peer's results for a test of `streams` streams and checks their figures.
    pub fn parse(bytes: &[u8], streams: usize) -> Result<Results, ResultsError> {
        if bytes.len() > MAX_RESULTS_JSON {
            return Err(ResultsError::Json("longer than 1 MiB".to_string()));
        }
        let results: Results =
            serde_json::from_slice(bytes).map_err(|e| ResultsError::Json(e.to_string()))?;
        if results.streams.len() != streams {
            let got = results.streams.len();
            return Err(ResultsError::StreamCount {
                got,
                expected: streams,
            });
        }
        for s in &results.streams {
            let counts = [
                ("bytes", s.bytes),
                ("errors", s.errors),
                ("packets", s.packets),
            ];
            if let Some((name, _)) = counts.iter().find(|(_, v)| !is_count(*v)) {
                return Err(ResultsError::BadFigure(name));
            }
            let times = [
                ("jitter", s.jitter),
                ("start_time", s.start_time),
                ("end_time", s.end_time),
            ];
            if let Some((name, _)) = times.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
                return Err(ResultsError::BadFigure(name));
            }
        }
        Ok(results)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn is_count(v: f64) -> bool {
    v.is_finite() && v >= 0.0 && v.fract() == 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Debian's iperf 3.12 server sent after `iperf3 -c HOST -u -b 1M -t 1` (its
    /// `--debug` output, unformatted): unknown retransmits as 2^64 - 1.
    const SERVER_UDP: &[u8] = br#"{"cpu_util_total":0.017293134625553656,"cpu_util_user":0.017293134625553656,"cpu_util_system":0,"sender_has_retransmits":1.8446744073709552e+19,"streams":[{"id":1,"bytes":131072,"retransmits":1.8446744073709552e+19,"jitter":4.234375e-06,"errors":0,"packets":4,"start_time":0,"end_time":1.000387}]}"#;

    #[test]
    fn a_captured_servers_results_parse() {
        let results = Results::parse(SERVER_UDP, 1).unwrap();
        let s = &results.streams[0];
        assert_eq!(
            (s.id, s.bytes, s.packets, s.errors),
            (1.0, 131072.0, 4.0, 0.0)
        );
        assert_eq!(s.jitter, 4.234375e-06);
        assert_eq!(s.omitted_packets, None);
        let wrong = Results::parse(SERVER_UDP, 2).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "iperf3 results for 1 streams, 2 expected"
        );
    }

    #[test]
    fn results_round_trip_and_bad_figures_are_refused() {
        let mut results = Results::parse(SERVER_UDP, 1).unwrap();
        let again = Results::parse(results.to_json().as_bytes(), 1).unwrap();
        assert_eq!(again, results);
        results.streams[0].errors = -1.0;
        let bad = Results::parse(results.to_json().as_bytes(), 1).unwrap_err();
        assert_eq!(bad, ResultsError::BadFigure("errors"));
        assert!(
            Results::parse(b"{\"streams\":[]}", 0).is_err(),
            "cpu figures are required"
        );
    }
}
