//! The control protocol's messages: what client and agent say to each other inside the frames
//! of `flowlab_wire::control` (length prefix, message version, JSON body).

use flowlab_results::{IntervalReport, PacketRecord, SideReport};
use flowlab_spec::TestSpec;
use flowlab_wire::control::{ControlError, FrameDecoder, MESSAGE_VERSION};
use serde::{Deserialize, Serialize};

/// One control message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// Agent to client: its nonce (64 hex digits); prove you hold the key.
    AuthChallenge {
        nonce: String,
    },
    /// Client to agent: the client's nonce and its proof over both nonces.
    AuthResponse {
        nonce: String,
        mac: String,
    },
    /// Agent to client: the agent's proof over both nonces. Tagged frames follow.
    AuthOk {
        mac: String,
    },
    Request {
        spec: TestSpec,
    },
    /// The agent's data ports, one per flow; its MAC address for native frames.
    Accepted {
        session: u32,
        data_ports: Vec<u16>,
        agent_mac: Option<String>,
        /// The agent's `--max-rate`: it holds its own sending to it, and asks the client to
        /// hold its sending to it too (a `--rate max` test runs as fast as the limit allows).
        #[serde(default)]
        rate_cap_bps: Option<u64>,
        /// A reverse UDP test's return-routability cookie: the client sends it from each data
        /// socket (`flowlab_wire::ack`), and the agent sends to a socket only while it arrives.
        #[serde(default)]
        cookie: Option<u64>,
    },
    /// Agent refuses a request (limits, bad parameters, failed authentication).
    Refused {
        reason: String,
    },
    /// Client to agent: sockets are ready, begin.
    Start,
    /// Each way while a test runs, so a dead or vanished peer is noticed quickly.
    Heartbeat,
    /// Live interval measured by the agent's side.
    Interval {
        report: IntervalReport,
    },
    /// Agent to client: the agent's sender has sent its last packet.
    SenderDone,
    /// Client to agent: stop (end of test, or the user interrupted) and report.
    Finish,
    /// Per-packet records of the agent's side, in chunks, before its report.
    PacketLog {
        records: Vec<PacketRecord>,
    },
    /// The agent's report for its side of the test; ends the session.
    Report {
        report: Box<SideReport>,
    },
    /// Controller to agent (started with `--allow-relay`): run this test as a client against
    /// the agent at `target`, starting at `start_at_ns` (Unix time), and return the result.
    RunTest {
        target: String,
        spec: TestSpec,
        start_at_ns: Option<u64>,
        /// How long to wait after the last packet for packets in flight before the result
        /// (the relay's default when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        drain_ns: Option<u64>,
    },
    /// Agent to controller: the result document of a `RunTest` (a flowlab test result).
    TestDone {
        result: serde_json::Value,
    },
    /// Clock probe (NTP-style): the controller's send time...
    TimeProbe {
        t1_ns: u64,
    },
    /// ...and the agent's receive and reply times, on its CLOCK_REALTIME.
    TimeReply {
        t1_ns: u64,
        t2_ns: u64,
        t3_ns: u64,
    },
    /// Client to agent (`flowlab doctor`): send your tuning facts on the path to me.
    HostQuery,
    /// Agent to client: its facts, checked field by field on receipt.
    HostFacts {
        facts: Box<crate::host_facts::HostFacts>,
    },
    /// A fatal error; the sender closes the connection after it.
    Error {
        message: String,
    },
}

impl Message {
    /// Encodes one frame: length prefix, message version, JSON body.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising these plain data types cannot fail: no maps with non-string keys.
        let body = serde_json::to_vec(self).unwrap_or_default();
        let mut out = Vec::with_capacity(5 + body.len());
        out.extend_from_slice(&((body.len() + 1) as u32).to_be_bytes());
        out.push(MESSAGE_VERSION);
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a frame's content (after the length prefix).
    pub fn decode(frame: &[u8]) -> Result<Message, ControlError> {
        let (&version, body) = frame.split_first().ok_or(ControlError::EmptyFrame)?;
        if version != MESSAGE_VERSION {
            return Err(ControlError::BadMessageVersion(version));
        }
        serde_json::from_slice(body).map_err(|e| ControlError::Malformed(e.to_string()))
    }

    /// Short name for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Message::AuthChallenge { .. } => "auth_challenge",
            Message::AuthResponse { .. } => "auth_response",
            Message::AuthOk { .. } => "auth_ok",
            Message::Request { .. } => "request",
            Message::Accepted { .. } => "accepted",
            Message::Refused { .. } => "refused",
            Message::Start => "start",
            Message::Heartbeat => "heartbeat",
            Message::Interval { .. } => "interval",
            Message::SenderDone => "sender_done",
            Message::Finish => "finish",
            Message::PacketLog { .. } => "packet_log",
            Message::Report { .. } => "report",
            Message::RunTest { .. } => "run_test",
            Message::TestDone { .. } => "test_done",
            Message::TimeProbe { .. } => "time_probe",
            Message::TimeReply { .. } => "time_reply",
            Message::HostQuery => "host_query",
            Message::HostFacts { .. } => "host_facts",
            Message::Error { .. } => "error",
        }
    }
}

/// Whole messages out of a [`FrameDecoder`].
pub trait ReadMessage {
    /// Next whole message, `Ok(None)` when more bytes are needed. After an error the stream is
    /// out of step and the connection must be dropped.
    fn next_message(&mut self) -> Result<Option<Message>, ControlError>;
}

impl ReadMessage for FrameDecoder {
    fn next_message(&mut self) -> Result<Option<Message>, ControlError> {
        match self.next_frame()? {
            Some(frame) => Message::decode(&frame).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flowlab_spec::{Direction, Protocol, SocketOptions};
    use flowlab_wire::control::MAX_FRAME_LEN;
    use proptest::prelude::*;
    #[test]
    fn frame_vector() {
        let bytes = Message::Start.encode();
        assert_eq!(bytes, b"\x00\x00\x00\x11\x01{\"type\":\"start\"}".to_vec());
        let query = Message::HostQuery.encode();
        assert_eq!(
            query,
            b"\x00\x00\x00\x16\x01{\"type\":\"host_query\"}".to_vec()
        );
        let refused = Message::Refused {
            reason: "rate".into(),
        };
        assert_eq!(
            refused.encode(),
            b"\x00\x00\x00\x23\x01{\"type\":\"refused\",\"reason\":\"rate\"}".to_vec()
        );
    }

    fn spec() -> TestSpec {
        TestSpec {
            protocol: Protocol::Udp,
            direction: Direction::Loopback,
            rate_bps: Some(2_000_000),
            size: 500,
            duration_ns: Some(3_000_000_000),
            count: None,
            interval_ns: Some(1_000_000_000),
            flows: 1,
            client_udp_ports: vec![40000],
            raw: None,
            busy_poll: false,
            packet_log: false,
            socket: SocketOptions::default(),
            traffic: None,
            seed: 1,
            authenticated_packets: false,
            echo_every: None,
            omit_ns: None,
            pacing: Default::default(),
            multicast: None,
        }
    }

    #[test]
    fn request_vector_and_round_trip() {
        let m = Message::Request { spec: spec() };
        let encoded = m.encode();
        let body = std::str::from_utf8(&encoded[5..]).unwrap();
        assert_eq!(
            body,
            r#"{"type":"request","spec":{"protocol":"udp","direction":"loopback","rate_bps":2000000,"size":500,"duration_ns":3000000000,"count":null,"interval_ns":1000000000,"flows":1,"client_udp_ports":[40000],"raw":null,"busy_poll":false,"packet_log":false,"socket":{"send_buffer":null,"recv_buffer":null,"kernel_pacing":false,"zerocopy":false,"congestion":null,"tx_timestamps":false,"dscp":null,"priority":null,"mark":null,"nodelay":null,"mss":null,"window_clamp":null,"read_rate_bps":null,"dont_fragment":false,"packet_socket":false},"traffic":null,"seed":1,"authenticated_packets":false,"echo_every":null,"omit_ns":null,"multicast":null}}"#
        );
        // A request of an earlier client, without don't-fragment and multicast, reads the same.
        let older = body
            .replace(r#","dont_fragment":false"#, "")
            .replace(r#","multicast":null"#, "");
        let older: Message = serde_json::from_str(&older).unwrap();
        assert_eq!(older, m);
        let mut d = FrameDecoder::new();
        d.push(&encoded[..7]);
        assert_eq!(d.next_message(), Ok(None));
        d.push(&encoded[7..]);
        assert_eq!(d.next_message(), Ok(Some(m)));
        assert_eq!(d.next_message(), Ok(None));
    }

    #[test]
    fn run_test_vector_with_and_without_a_drain() {
        let without = r#"{"type":"run_test","target":"b:9470","spec":SPEC,"start_at_ns":7}"#;
        let spec_json = serde_json::to_string(&spec()).unwrap();
        let without = without.replace("SPEC", &spec_json);
        let mut m = Message::RunTest {
            target: "b:9470".into(),
            spec: spec(),
            start_at_ns: Some(7),
            drain_ns: None,
        };
        assert_eq!(
            &m.encode()[5..],
            without.as_bytes(),
            "as before drains were asked"
        );
        assert_eq!(Message::decode(&m.encode()[4..]), Ok(m.clone()));
        if let Message::RunTest { drain_ns, .. } = &mut m {
            *drain_ns = Some(2_000_000_000);
        }
        let with = without.replace(
            "\"start_at_ns\":7}",
            "\"start_at_ns\":7,\"drain_ns\":2000000000}",
        );
        assert_eq!(&m.encode()[5..], with.as_bytes());
        assert_eq!(Message::decode(&m.encode()[4..]), Ok(m));
    }

    #[test]
    fn auth_vectors() {
        let response = Message::AuthResponse {
            nonce: "00".repeat(32),
            mac: "ab".into(),
        };
        let body = format!(
            "{{\"type\":\"auth_response\",\"nonce\":\"{}\",\"mac\":\"ab\"}}",
            "00".repeat(32)
        );
        assert_eq!(&response.encode()[5..], body.as_bytes());
        let ok = Message::AuthOk { mac: "cd".into() };
        assert_eq!(
            ok.encode(),
            b"\x00\x00\x00\x1e\x01{\"type\":\"auth_ok\",\"mac\":\"cd\"}".to_vec()
        );
    }

    #[test]
    fn decoder_cap_applies_from_the_next_frame() {
        let start = Message::Start.encode();
        let mut d = FrameDecoder::new();
        d.set_max_len(16);
        d.push(&start);
        assert_eq!(
            d.next_message(),
            Err(ControlError::FrameTooLong { len: 17, max: 16 })
        );
        let mut d = FrameDecoder::new();
        d.set_max_len(17);
        d.push(&start);
        assert_eq!(d.next_message(), Ok(Some(Message::Start)));
        d.set_max_len(usize::MAX);
        d.push(&(MAX_FRAME_LEN as u32 + 1).to_be_bytes());
        assert!(d.next_frame().is_err(), "never above MAX_FRAME_LEN");
    }

    #[test]
    fn decoder_rejects_garbage() {
        let mut d = FrameDecoder::new();
        d.push(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            d.next_message(),
            Err(ControlError::FrameTooLong { .. })
        ));
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x03\x01{}");
        assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x00");
        assert_eq!(d.next_message(), Err(ControlError::EmptyFrame));
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x01\x07");
        assert_eq!(d.next_message(), Err(ControlError::BadMessageVersion(7)));
        // Unknown fields are refused, not silently dropped.
        let mut d = FrameDecoder::new();
        d.push(b"\x00\x00\x00\x2a\x01{\"type\":\"refused\",\"reason\":\"x\",\"extra\":1}");
        assert!(matches!(d.next_message(), Err(ControlError::Malformed(_))));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8)) {
            let mut d = FrameDecoder::new();
            for c in chunks {
                d.push(&c);
                while let Ok(Some(_)) = d.next_message() {}
            }
        }

        #[test]
        fn messages_round_trip(reason in ".{0,40}", session: u32, port: u16) {
            for m in [Message::Refused { reason: reason.clone() }, Message::Accepted { session, data_ports: vec![port, port.wrapping_add(1)], agent_mac: None, rate_cap_bps: Some(1), cookie: Some(7) }, Message::Error { message: reason.clone() }] {
                let mut d = FrameDecoder::new();
                d.push(&m.encode());
                prop_assert_eq!(d.next_message(), Ok(Some(m)));
            }
        }
    }
}
