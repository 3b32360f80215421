//! tcpdump in a test's namespace, read back as packets: the independent observer that the
//! cross-check and safety tests hold flowlab's figures against.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};

/// True when tcpdump can run; otherwise says the test was skipped (and fails in CI, which
/// must install it).
pub fn tcpdump_or_skip(test: &str) -> bool {
    if Command::new("tcpdump").arg("--version").output().is_ok() {
        return true;
    }
    eprintln!("{test}: skipped: tcpdump is not installed");
    assert!(std::env::var_os("CI").is_none(), "CI must install tcpdump");
    false
}

/// One captured IP packet.
#[derive(Debug, Clone)]
pub struct Packet {
    /// Kernel capture time, CLOCK_REALTIME, ns.
    pub at_ns: u64,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol number (6 TCP, 17 UDP, 1 ICMP, ...).
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
    /// IPv4 TOS or IPv6 traffic class.
    pub tos: u8,
    /// The transport payload, as far as it was captured. A GSO or GRO packet (one skb of
    /// several segments, as a veth carries them) holds all its segments' payloads end to end.
    pub payload: Vec<u8>,
    /// TCP only: sequence number and flags byte.
    pub tcp: Option<(u32, u8)>,
}

/// What a capture saw, and how much the kernel dropped before tcpdump could read it.
pub struct Captured {
    pub packets: Vec<Packet>,
    pub kernel_drops: u64,
}

/// A running tcpdump; [`Capture::stop`] ends it and reads the file.
pub struct Capture {
    child: Child,
    file: PathBuf,
    stderr: mpsc::Receiver<String>,
}

impl Capture {
    /// Captures whole frames on `dev` inside `ns` that match the pcap `filter`, with
    /// nanosecond stamps; returns once tcpdump is listening.
    pub fn start(ns: &str, dev: &str, filter: &str) -> Capture {
        Capture::start_with(ns, dev, filter, 0)
    }

    /// Captures the first `snaplen` bytes of each frame (0: whole frames): a long, busy
    /// capture keeps up where whole frames would overflow tcpdump's buffer.
    pub fn start_with(ns: &str, dev: &str, filter: &str, snaplen: u32) -> Capture {
        let file = std::env::temp_dir().join(format!(
            "flowlab-capture-{}-{ns}-{dev}.pcap",
            std::process::id()
        ));
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "tcpdump",
                "-i",
                dev,
                "-n",
                "-U",
                "--immediate-mode",
            ])
            .args(["-s", &snaplen.to_string(), "-B", "65536"])
            .args(["--time-stamp-precision=nano", "-w"])
            .arg(&file)
            .args(filter.split_whitespace())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tcpdump");
        let (tx, stderr) = mpsc::channel();
        let lines = BufReader::new(child.stderr.take().expect("tcpdump's stderr")).lines();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        loop {
            match stderr.recv_timeout(Duration::from_secs(10)) {
                Ok(line) if line.contains("listening on") => break,
                Ok(_) => {}
                Err(e) => panic!("tcpdump on {ns}/{dev} did not start: {e}"),
            }
        }
        Capture {
            child,
            file,
            stderr,
        }
    }

    /// Stops tcpdump (it flushes and prints its counts on SIGINT) and parses the capture.
    pub fn stop(mut self) -> Captured {
        // `ip netns exec` execs tcpdump: the child's pid is tcpdump's.
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let kernel_drops = self
            .stderr
            .iter()
            .find(|l| l.contains("dropped by kernel"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .expect("tcpdump's drop count");
        let bytes = std::fs::read(&self.file).expect("the capture file");
        let _ = std::fs::remove_file(&self.file);
        Captured {
            packets: parse_pcap(&bytes),
            kernel_drops,
        }
    }
}

/// The IP packets of a pcap of Ethernet frames, in capture order. Raw records: pcap-file's
/// checked ones refuse a frame longer than the snap length, which is what a snap length makes.
pub fn parse_pcap(bytes: &[u8]) -> Vec<Packet> {
    let mut reader = pcap_file::pcap::PcapReader::new(bytes).expect("a pcap file");
    let frac_ns = match reader.header().ts_resolution {
        pcap_file::TsResolution::NanoSecond => 1,
        pcap_file::TsResolution::MicroSecond => 1_000,
    };
    let mut out = Vec::new();
    while let Some(frame) = reader.next_raw_packet() {
        let frame = frame.expect("a whole pcap record");
        let at_ns = u64::from(frame.ts_sec) * 1_000_000_000 + u64::from(frame.ts_frac) * frac_ns;
        if let Some(packet) = parse_frame(at_ns, &frame.data) {
            out.push(packet);
        }
    }
    out
}

fn parse_frame(at_ns: u64, data: &[u8]) -> Option<Packet> {
    let sliced = LaxSlicedPacket::from_ethernet(data).ok()?;
    let (src, dst, proto, tos) = match sliced.net? {
        LaxNetSlice::Ipv4(ip) => {
            let h = ip.header();
            let (s, d) = (h.source_addr(), h.destination_addr());
            (
                s.into(),
                d.into(),
                h.protocol().0,
                h.dcp().value() << 2 | h.ecn().value(),
            )
        }
        LaxNetSlice::Ipv6(ip) => {
            let h = ip.header();
            let (s, d) = (h.source_addr(), h.destination_addr());
            (
                s.into(),
                d.into(),
                ip.payload().ip_number.0,
                h.traffic_class(),
            )
        }
        _ => return None,
    };
    let (sport, dport, payload, tcp) = match sliced.transport {
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port(), u.payload(), None),
        Some(TransportSlice::Tcp(t)) => {
            let flags = t.slice()[13];
            let seq = t.sequence_number();
            (
                t.source_port(),
                t.destination_port(),
                t.payload(),
                Some((seq, flags)),
            )
        }
        _ => (0, 0, &[][..], None),
    };
    Some(Packet {
        at_ns,
        src,
        dst,
        proto,
        sport,
        dport,
        tos,
        payload: payload.to_vec(),
        tcp,
    })
}

/// Bytes a TCP connection's captured segments carried once each: the highest sequence seen
/// past the SYN's (retransmissions counted once).
pub fn tcp_stream_bytes(segments: &[&Packet]) -> u64 {
    let isn = segments
        .iter()
        .find_map(|p| {
            p.tcp
                .filter(|(_, flags)| flags & 0x02 != 0)
                .map(|(seq, _)| seq)
        })
        .expect("the capture holds the connection's SYN");
    segments
        .iter()
        .filter_map(|p| {
            p.tcp
                .map(|(seq, _)| seq.wrapping_sub(isn) as u64 + p.payload.len() as u64)
        })
        .max()
        .map_or(0, |end| end.saturating_sub(1))
}
