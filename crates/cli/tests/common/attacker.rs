//! A control-protocol peer made by hand, as an attacker would: raw hello bytes and JSON frames
//! with any field set to anything, no validation on this side.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

/// The hello of protocol version 1 with no flags.
pub const HELLO: [u8; 16] = *b"FLOWLAB\0\x00\x01\x00\x00\x00\x00\x00\x00";

pub struct ControlPeer {
    pub stream: TcpStream,
}

impl ControlPeer {
    /// Connects and exchanges hellos; returns the agent's hello flags too.
    pub fn connect(addr: &str) -> ControlPeer {
        let stream = TcpStream::connect(addr).expect("connect to the agent");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut peer = ControlPeer { stream };
        peer.stream.write_all(&HELLO).unwrap();
        let mut hello = [0u8; 16];
        peer.stream.read_exact(&mut hello).expect("agent hello");
        assert_eq!(&hello[..8], b"FLOWLAB\0");
        peer
    }

    pub fn send(&mut self, message: &Value) {
        let body = serde_json::to_vec(message).unwrap();
        let mut frame = ((body.len() + 1) as u32).to_be_bytes().to_vec();
        frame.push(1);
        frame.extend_from_slice(&body);
        self.stream.write_all(&frame).unwrap();
    }

    /// The next frame's JSON, or `None` when the agent closed the connection.
    pub fn recv(&mut self) -> Option<Value> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).ok()?;
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut frame).ok()?;
        serde_json::from_slice(&frame[1..]).ok()
    }

    /// Sends a request and returns the agent's answer.
    pub fn request(&mut self, spec: Value) -> Value {
        self.send(&json!({"type": "request", "spec": spec}));
        self.recv().expect("an answer to the request")
    }
}

/// A valid one-way UDP request, for attacks to change one field of.
pub fn udp_request(port: u16) -> Value {
    json!({
        "protocol": "udp", "direction": "oneway", "rate_bps": 1_000_000, "size": 500,
        "duration_ns": 1_000_000_000u64, "count": null, "interval_ns": null, "flows": 1,
        "client_udp_ports": [port], "raw": null, "busy_poll": false, "packet_log": false,
        "socket": {"send_buffer": null, "recv_buffer": null, "kernel_pacing": false,
            "zerocopy": false, "congestion": null, "tx_timestamps": false, "dscp": null,
            "priority": null, "mark": null, "nodelay": null, "mss": null,
            "window_clamp": null, "read_rate_bps": null},
        "traffic": null, "seed": 1
    })
}

/// The reason of a `refused` answer; panics on any other answer.
pub fn refusal(answer: &Value) -> String {
    assert_eq!(
        answer["type"], "refused",
        "expected a refusal, got {answer}"
    );
    answer["reason"].as_str().unwrap_or_default().to_string()
}
