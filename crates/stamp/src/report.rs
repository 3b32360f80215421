//! The result document of a STAMP session (`flowlab test --stamp --json`) and its human form.
//! docs/stamp.md describes every field.

use std::fmt::Write as _;

use flowlab_results::SenderReport;
use flowlab_stats::LatencySummary;
use flowlab_units::{format_count, format_duration_ns, format_rate};
use serde::{Deserialize, Serialize};

use crate::session::SessionReport;

/// Version of this document's layout; bumped on an incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// One STAMP session, as `--json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StampResult {
    pub schema_version: u32,
    /// Always "stamp": tells this document from a flowlab test's.
    pub kind: String,
    /// The reflector's address and port.
    pub reflector: String,
    /// "unauthenticated" or "authenticated".
    pub mode: String,
    /// The Session-Sender Identifier (RFC 8972) the packets carried.
    pub ssid: u16,
    /// UDP payload bytes of each test packet (and of each reply).
    pub packet_size: u32,
    pub rate_bps: u64,
    pub packets_per_sec: f64,
    /// CLOCK_REALTIME when the session started, ns since the Unix epoch.
    pub started_unix_ns: u64,
    /// The sending side: packets sent, schedule error, packets the sender could not send.
    pub sender: SenderReport,
    #[serde(flatten)]
    pub session: SessionReport,
    pub interrupted: bool,
    pub error: Option<String>,
}

fn delay_line(out: &mut String, label: &str, d: &Option<LatencySummary>) {
    let Some(d) = d else {
        let _ = writeln!(out, "  {label:<20} no replies");
        return;
    };
    let f = format_duration_ns;
    let _ = writeln!(
        out,
        "  {label:<20} min {}  mean {}  p50 {}  p99 {}  max {}  (stddev {})",
        f(d.min_ns),
        f(d.mean_ns),
        f(d.p50_ns),
        f(d.p99_ns),
        f(d.max_ns),
        f(d.stddev_ns)
    );
}

/// The result as a person reads it.
pub fn render(r: &StampResult) -> String {
    let mut out = String::new();
    let s = &r.session;
    let _ = writeln!(
        out,
        "STAMP session to {} ({}, SSID {:#06x}): {} packets of {} B at {} packets/s ({})",
        r.reflector,
        r.mode,
        r.ssid,
        s.loss.sent,
        r.packet_size,
        format_count(r.packets_per_sec),
        format_rate(r.rate_bps as f64)
    );
    let _ = writeln!(
        out,
        "  replies              {} of {} ({} lost, {:.2} %; {} duplicate, {} reordered)",
        s.replies.unique,
        s.loss.sent,
        s.loss.round_trip_lost,
        s.loss.round_trip_loss_pct,
        s.replies.duplicates,
        s.replies.reordered
    );
    let _ = match (s.loss.forward_lost, s.loss.backward_lost) {
        (Some(f), Some(b)) => writeln!(
            out,
            "  loss by direction    {f} on the way there, {b} on the way back (stateful reflector)"
        ),
        _ => writeln!(
            out,
            "  loss by direction    unknown: the reflector echoes the sender's sequence numbers (stateless)"
        ),
    };
    delay_line(&mut out, "two-way delay", &s.two_way_delay);
    delay_line(&mut out, "round trip", &s.round_trip);
    delay_line(&mut out, "reflector residence", &s.reflector_residence);
    let one_way = &s.one_way;
    let verdict = if one_way.valid { "valid" } else { "NOT valid" };
    let bound = one_way
        .error_bound_ns
        .map(|b| format!(", clock error up to {}", format_duration_ns(b as f64)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "  one-way delays       {verdict}: {}{bound}",
        one_way.reason
    );
    delay_line(&mut out, "one-way forward", &one_way.forward);
    delay_line(&mut out, "one-way backward", &one_way.backward);
    if let Some(ttl) = s.sender_ttl {
        let _ = writeln!(out, "  TTL at reflector     {}..{}", ttl.min, ttl.max);
    }
    let rej = &s.rejected;
    if rej.malformed + rej.bad_hmac + rej.foreign > 0 {
        let _ = writeln!(
            out,
            "  ignored datagrams    {} malformed, {} failed the HMAC, {} not of this session",
            rej.malformed, rej.bad_hmac, rej.foreign
        );
    }
    let lost = r.sender.lost_by_sender;
    if lost.total() > 0 {
        let _ = writeln!(
            out,
            "  not sent             {} (send buffer full {}, missed slots {}, errors {})",
            lost.total(),
            lost.send_buffer_full,
            lost.missed_slots,
            lost.send_errors
        );
    }
    if let Some(pacing) = &r.sender.pacing {
        let _ = writeln!(out, "  pacing               {pacing}");
    }
    flowlab_units::fit::fit_at(&out, TEXT_COLUMN)
}

/// Where each line's text starts after its label.
const TEXT_COLUMN: usize = 23;
