//! A control-protocol peer made by hand, as an attacker would: raw hello bytes and JSON frames
//! with any field set to anything, no validation on this side.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use flowlab_control::auth::{End, FrameTags, Nonces};
use serde_json::{json, Value};

/// The hello of the current protocol version with no flags.
pub const HELLO: [u8; 16] = {
    let v = flowlab_wire::PROTOCOL_VERSION.to_be_bytes();
    let mut hello = *b"FLOWLAB\0\0\0\0\0\0\0\0\0";
    (hello[8], hello[9]) = (v[0], v[1]);
    hello
};

pub struct ControlPeer {
    pub stream: TcpStream,
    /// After [`ControlPeer::authenticate`]: the session's frame tags.
    pub tags: Option<FrameTags>,
    /// After [`ControlPeer::authenticate`]: the session key.
    pub session_key: Option<[u8; 32]>,
}

impl ControlPeer {
    /// Connects and exchanges hellos; returns the agent's hello flags too.
    pub fn connect(addr: &str) -> ControlPeer {
        let stream = TcpStream::connect(addr).expect("connect to the agent");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut peer = ControlPeer {
            stream,
            tags: None,
            session_key: None,
        };
        peer.stream.write_all(&HELLO).unwrap();
        let mut hello = [0u8; 16];
        peer.stream.read_exact(&mut hello).expect("agent hello");
        assert_eq!(&hello[..8], b"FLOWLAB\0");
        peer
    }

    /// A message's frame as it goes on the wire (tagged after authentication).
    pub fn frame(&mut self, message: &Value) -> Vec<u8> {
        let body = serde_json::to_vec(message).unwrap();
        let mut frame = ((body.len() + 1) as u32).to_be_bytes().to_vec();
        frame.push(1);
        frame.extend_from_slice(&body);
        if let Some(tags) = &mut self.tags {
            tags.seal(&mut frame);
        }
        frame
    }

    pub fn send(&mut self, message: &Value) {
        let frame = self.frame(message);
        self.stream.write_all(&frame).unwrap();
    }

    /// The next frame's JSON (its tag checked after authentication), or `None` when the agent
    /// closed the connection.
    pub fn recv(&mut self) -> Option<Value> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).ok()?;
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut frame).ok()?;
        let content = match &mut self.tags {
            Some(tags) => tags.open(&frame).expect("the agent's frame tag"),
            None => &frame,
        };
        serde_json::from_slice(&content[1..]).ok()
    }

    /// Answers the agent's challenge with `key`, checks the agent's proof, and tags frames
    /// from then on, as the real client does.
    pub fn authenticate(&mut self, key: &[u8]) {
        let challenge = self.recv().expect("a challenge");
        let agent_nonce = challenge["nonce"].as_str().expect("a nonce").to_string();
        let client_nonce = "5a".repeat(32);
        let nonces = Nonces::parse(&client_nonce, &agent_nonce).expect("nonces");
        let proof = nonces.client_proof(key);
        self.send(&json!({"type": "auth_response", "nonce": client_nonce, "mac": proof}));
        let ok = self.recv().expect("auth_ok");
        assert!(nonces.verify_agent(key, ok["mac"].as_str().unwrap_or_default()));
        self.tags = Some(FrameTags::new(nonces.session_key(key), End::Client));
        self.session_key = Some(nonces.session_key(key));
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

/// A man in the middle between a client and `agent`: forwards one connection both ways and
/// flips one byte in frame number `frame` (from 0, after the hello) of one direction.
/// Returns the address to give the client.
pub fn tampering_proxy(agent: &str, from_client: bool, frame: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let agent = agent.to_string();
    std::thread::spawn(move || {
        let (client, _) = listener.accept().unwrap();
        let server = TcpStream::connect(&agent).unwrap();
        let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let flip = move |mine: bool| mine.then_some(frame);
        std::thread::spawn(move || relay_frames(s2, c2, flip(!from_client)));
        relay_frames(client, server, flip(from_client));
    });
    addr
}

/// Copies the hello, then frame by frame, changing a byte of frame `flip`.
fn relay_frames(mut from: TcpStream, mut to: TcpStream, flip: Option<usize>) {
    let mut hello = [0u8; 16];
    if from.read_exact(&mut hello).is_err() || to.write_all(&hello).is_err() {
        return;
    }
    for n in 0.. {
        let mut len = [0u8; 4];
        if from.read_exact(&mut len).is_err() {
            break;
        }
        let mut frame = vec![0u8; u32::from_be_bytes(len) as usize];
        if from.read_exact(&mut frame).is_err() {
            break;
        }
        if flip == Some(n) {
            let middle = frame.len() / 2;
            frame[middle] ^= 0x01;
        }
        if to.write_all(&len).is_err() || to.write_all(&frame).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}
