//! What a run reports: per flow the same sender/receiver reports as a real test, plus what
//! only a simulator can know exactly (absolute one-way delay, per-port and per-VC counters).

use std::fmt::Write as _;

use flowlab_link::StageReport;
use flowlab_results::{ReceiverReport, SenderReport};
use flowlab_stats::LatencySummary;
use serde::Serialize;

pub use crate::endsys::SocketBufferReport;

/// Bumped when a field changes meaning or disappears. 2: `throughput_bps` and `goodput_bps`
/// over the receiving span, `loss_ratio` without packets in flight at the end.
pub const SCHEMA_VERSION: u32 = 2;

/// The result of [`crate::run`]: one run, or one per sweep value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    pub schema_version: u32,
    pub description: String,
    pub runs: Vec<RunReport>,
}

/// The swept parameter and its value in this run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub param: String,
    pub value: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub sweep: Option<SweepPoint>,
    pub seed: u64,
    pub duration_ns: u64,
    /// Events the engine processed (a measure of work, not of the network).
    pub events: u64,
    /// Cells put on a line by any port, background cells included.
    pub cells_transmitted: u64,
    pub flows: Vec<FlowReport>,
    pub ports: Vec<PortReport>,
    pub backgrounds: Vec<BackgroundReport>,
    /// Hosts whose CPU the end-system model charges (absent when none does).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostReport>,
}

/// A host's modelled CPU over a run: the time its send and receive costs kept it busy
/// within the run's duration, and their sum over the duration (as WS2NetTest's mean CPU
/// load; the application's reading at a socket's `read_rate` is not counted).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostReport {
    pub name: String,
    pub send_busy_ns: u64,
    pub receive_busy_ns: u64,
    pub cpu_ratio: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    pub name: String,
    pub protocol: String,
    pub path: Vec<String>,
    pub service: String,
    pub dscp: u8,
    /// IP bytes per packet (TCP: a full segment).
    pub packet_bytes: u32,
    /// Cells per packet on the first hop, when it is ATM (of all its fragments, when that
    /// link's MTU splits it).
    pub cells_per_packet: Option<u64>,
    /// Absolute one-way delay (ping: of the requests): the simulated clock is perfect.
    pub one_way_delay: Option<LatencySummary>,
    /// Peak-to-peak one-way delay variation (max − min), exact in simulation.
    pub delay_variation_ns: f64,
    /// Packets dropped on the way (ping: a request or its echo), over packets sent less
    /// those still in flight at the end.
    pub loss_ratio: f64,
    /// IP bytes received per second over the receiving span (first to last arrival,
    /// `count - 1` gaps), as a real test's receiver measures goodput.
    pub throughput_bps: f64,
    /// Application bytes delivered (TCP: in order, once) per second over the same span.
    pub goodput_bps: f64,
    pub policer: Option<PolicerReport>,
    pub tcp: Option<TcpReport>,
    /// Packets neither delivered nor dropped when the run ended: in a shaper's queue, a
    /// port's buffer or on a link (ping: requests and echoes). Not counted as lost.
    pub in_flight_at_end: u64,
    /// IP fragmentation, when a datagram was larger than a link of the path (both ways for
    /// ping): absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fragmentation: Option<FragReport>,
    /// The receiving socket's buffer, when the flow has one (`recv_buffer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_buffer: Option<SocketBufferReport>,
    pub sender: SenderReport,
    pub receiver: ReceiverReport,
}

/// What fragmentation and reassembly did to a flow's datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct FragReport {
    /// Datagrams sent as fragments (by the host or a router).
    pub datagrams_fragmented: u64,
    /// Fragments made (a fragment split again by a router counts its parts too).
    pub fragments: u64,
    /// Datagrams put together at the receiver.
    pub reassembled: u64,
    /// Incomplete datagrams given up 30 s (Linux's `ipfrag_time`) after their first fragment.
    pub reassembly_timeouts: u64,
    /// Fragments dropped because the receiver held 4 MiB (`ipfrag_high_thresh`) already.
    pub fragments_refused: u64,
    /// Datagrams still incomplete when the run ended, less than 30 s after their first
    /// fragment (lost already if one of their fragments was dropped).
    pub awaiting_reassembly_at_end: u64,
}

impl FragReport {
    fn add(self, o: FragReport) -> FragReport {
        FragReport {
            datagrams_fragmented: self.datagrams_fragmented + o.datagrams_fragmented,
            fragments: self.fragments + o.fragments,
            reassembled: self.reassembled + o.reassembled,
            reassembly_timeouts: self.reassembly_timeouts + o.reassembly_timeouts,
            fragments_refused: self.fragments_refused + o.fragments_refused,
            awaiting_reassembly_at_end: self.awaiting_reassembly_at_end
                + o.awaiting_reassembly_at_end,
        }
    }

    /// Both directions' figures together (a ping's requests and echoes).
    pub(crate) fn both(a: Option<FragReport>, b: Option<FragReport>) -> Option<FragReport> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.add(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PolicerReport {
    pub passed: u64,
    pub tagged: u64,
    pub dropped: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TcpReport {
    pub segments_sent: u64,
    pub retransmitted_segments: u64,
    pub fast_retransmits: u64,
    pub timeouts: u64,
    pub delivered_bytes: u64,
    /// When a fixed-size transfer was fully acknowledged.
    pub finished_ns: Option<u64>,
    pub window_shift: u8,
    pub final_cwnd: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VcReport {
    pub name: String,
    pub cells_in: u64,
    pub cells_out: u64,
    pub cells_dropped: u64,
    pub frames_epd: u64,
    pub frames_ppd: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassReport {
    pub name: String,
    pub enqueued: u64,
    pub sent: u64,
    pub dropped: u64,
    pub sent_bytes: u64,
    /// Packets the class's meter dropped (out of profile).
    pub out_of_profile: u64,
    /// Packets the class's marker gave another DSCP.
    pub remarked: u64,
}

/// One output port (one direction of a link).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortReport {
    pub name: String,
    /// "atm" (cell port), "ip" or "ip-over-atm" (packet scheduler).
    pub kind: String,
    pub rate_bps: u64,
    pub cells_in: u64,
    pub cells_out: u64,
    pub cells_dropped: u64,
    /// ATM: cells lost to a full buffer; IP: packets tail-dropped.
    pub dropped_buffer_full: u64,
    pub dropped_epd: u64,
    pub dropped_ppd: u64,
    pub dropped_clp: u64,
    pub frames_epd: u64,
    pub frames_ppd: u64,
    pub max_occupancy_cells: u64,
    /// Cells the line lost after the port (`cell_loss`): absent when it loses none.
    #[serde(skip_serializing_if = "is_zero")]
    pub cells_lost_on_line: u64,
    pub vcs: Vec<VcReport>,
    pub classes: Vec<ClassReport>,
    /// The link's impairment stage after this port, when it has one: frames lost by cause,
    /// copies, reorderings, the most it held (the emulator's report of the same stage).
    pub impair: Option<StageReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackgroundReport {
    pub name: String,
    pub cells_injected: u64,
    pub passes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// A plain-text summary for people.
pub fn render_human(r: &SimReport) -> String {
    let mut out = String::new();
    if !r.description.is_empty() {
        let _ = writeln!(out, "{}", r.description);
    }
    for run in &r.runs {
        match &run.sweep {
            Some(p) => {
                let _ = writeln!(
                    out,
                    "== {} = {} (seed {}, {} simulated)",
                    p.param,
                    p.value,
                    run.seed,
                    ms(run.duration_ns as f64)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "== seed {}, {} simulated",
                    run.seed,
                    ms(run.duration_ns as f64)
                );
            }
        }
        for f in &run.flows {
            let _ = write!(
                out,
                "flow {:<12} {:<4} {:<7} sent {:>8} lost {:>6} ({:.2}%)  thr {:>10}  goodput {:>10}",
                f.name,
                f.protocol,
                f.service,
                f.sender.packets_sent,
                f.receiver.packets.lost,
                f.loss_ratio * 100.0,
                flowlab_units::format_rate(f.throughput_bps),
                flowlab_units::format_rate(f.goodput_bps),
            );
            if let Some(d) = &f.one_way_delay {
                let _ = write!(
                    out,
                    "  delay min {} max {} p99 {} pdv {}",
                    ms(d.min_ns),
                    ms(d.max_ns),
                    ms(d.p99_ns),
                    ms(f.delay_variation_ns)
                );
            }
            if f.in_flight_at_end > 0 {
                let _ = write!(out, "  in flight at end {}", f.in_flight_at_end);
            }
            if let Some(rtt) = &f.receiver.round_trip {
                let _ = write!(out, "  rtt mean {}", ms(rtt.mean_ns));
            }
            if let Some(g) = &f.fragmentation {
                let _ = write!(
                    out,
                    "  fragmented {} into {} reassembled {} timed out {}",
                    g.datagrams_fragmented, g.fragments, g.reassembled, g.reassembly_timeouts
                );
            }
            if let Some(p) = &f.policer {
                let _ = write!(
                    out,
                    "  policer pass {} tag {} drop {}",
                    p.passed, p.tagged, p.dropped
                );
            }
            if let Some(t) = &f.tcp {
                let _ = write!(
                    out,
                    "  retx {} timeouts {}",
                    t.retransmitted_segments, t.timeouts
                );
            }
            if let Some(b) = &f.socket_buffer {
                let _ = write!(
                    out,
                    "  socket buffer {} B peak {} B overflows {}",
                    b.size_bytes, b.peak_bytes, b.overflows
                );
            }
            out.push('\n');
        }
        for h in &run.hosts {
            let _ = writeln!(
                out,
                "host {:<16} cpu {:.1}%  sending {}  receiving {}",
                h.name,
                h.cpu_ratio * 100.0,
                ms(h.send_busy_ns as f64),
                ms(h.receive_busy_ns as f64)
            );
        }
        for p in &run.ports {
            if p.kind == "atm" {
                let loss = if p.cells_in > 0 {
                    p.cells_dropped as f64 / p.cells_in as f64 * 100.0
                } else {
                    0.0
                };
                let _ = writeln!(
                    out,
                    "port {:<16} atm  cells in {:>10} out {:>10} dropped {:>8} ({:.3}%) epd frames {} ppd frames {} max occupancy {}",
                    p.name, p.cells_in, p.cells_out, p.cells_dropped, loss, p.frames_epd, p.frames_ppd, p.max_occupancy_cells
                );
            } else {
                let sent: u64 = p.classes.iter().map(|c| c.sent).sum();
                let dropped: u64 = p.classes.iter().map(|c| c.dropped).sum();
                let _ = write!(
                    out,
                    "port {:<16} {}  packets sent {:>8} dropped {:>6}",
                    p.name, p.kind, sent, dropped
                );
                if let Some(st) = &p.impair {
                    let _ = write!(
                        out,
                        "  impairments lost {} duplicated {} reordered {}",
                        st.frames_dropped(),
                        st.duplicated,
                        st.reordered
                    );
                }
                out.push('\n');
            }
        }
    }
    out
}
