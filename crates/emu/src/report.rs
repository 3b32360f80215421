//! What the emulator reports: per link direction, the model's counters by stage, the
//! emulator's own timing error and its own drops, and queue depths over time. Written as
//! JSON (`emulator.json` in the lab's state directory) while running and at the end.

use std::io;
use std::path::Path;

use flowlab_link::StageReport;
use flowlab_stats::LatencySummary;
use serde::{Deserialize, Serialize};

/// Version of the report's layout.
pub const SCHEMA_VERSION: u32 = 1;

/// Frames the emulator itself lost (apart from the model's losses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmulatorDrops {
    /// The store of held frames was full.
    pub store_full: u64,
    /// The egress interface's queue was full at release.
    pub egress_full: u64,
    /// Sending failed otherwise.
    pub send_errors: u64,
    /// Frames the kernel dropped before the emulator read them (socket buffer full).
    pub ingress_overflow: u64,
    /// Frames the ingress veth dropped before the emulator's socket or XDP program saw them:
    /// its receive ring (AF_XDP) or the backlog (AF_PACKET) full. Its peer's `tx_dropped`
    /// since the emulator started (absent from reports written before it).
    #[serde(default)]
    pub veth_dropped: u64,
}

/// Where a direction's thread spends its time, from its own clock: the emulator's profile
/// (CPU per frame, how often it sleeps), read by the benchmark and for tuning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoopProfile {
    /// Turns of the loop (read, release, wait).
    pub turns: u64,
    /// Receive calls that returned frames.
    pub reads: u64,
    /// Send calls (each a batch of departures due together).
    pub sends: u64,
    /// Reading frames and offering them to the model.
    pub receive_ns: u64,
    /// Taking due events from the model and sending them.
    pub release_ns: u64,
    /// Asleep, waiting for an arrival or the next departure.
    pub sleep_ns: u64,
    /// Spinning to a departure less than [`crate::direction::SPIN_NS`] away (with the reads
    /// made meanwhile, while more than [`crate::direction::READ_SLACK_NS`] remained).
    pub spin_ns: u64,
    /// Sleeps to a departure instead of a spin, owed as rest by a real-time thread (their
    /// time is in `sleep_ns`; absent from reports written before it).
    #[serde(default)]
    pub rests: u64,
    /// Sleeps to a departure instead of a spin, as other directions held every spin slot
    /// ([`crate::spin`]; time in `sleep_ns`; absent from reports written before it).
    #[serde(default)]
    pub spin_slot_sleeps: u64,
}

/// Where frames released more than [`crate::direction::LATE_NS`] late lost their time: each
/// late frame's error cut into the loop's steps (`crate::timing`), one distribution per
/// step over the late frames (each frame's parts add up to its error).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReleaseParts {
    /// Read after its departure: still in the kernel's ring or socket.
    pub unread: LatencySummary,
    /// Due while the loop was still busy with its previous turn (releasing, bookkeeping).
    pub busy: LatencySummary,
    /// Due while the loop waited, and the wait ended late (a sleep or poll woke late, or
    /// the spinning thread was off the CPU).
    pub wake: LatencySummary,
    /// Due while the loop read arrivals before releasing.
    pub reading: LatencySummary,
    /// Behind other frames of the same release (the model's dequeue and earlier sends).
    pub batch: LatencySummary,
    /// In its own send call.
    pub send: LatencySummary,
    /// Frames its release sent before it (in earlier calls and ahead of it in its own).
    pub ahead: Spread,
}

/// A distribution of counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Spread {
    /// The counts kept as a latency distribution (one "ns" a count).
    pub fn of(s: &LatencySummary) -> Spread {
        Spread {
            mean: s.mean_ns,
            p50: s.p50_ns,
            p99: s.p99_ns,
            max: s.max_ns,
        }
    }
}

/// The depth of each stage (frames, or cells for ATM) at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepthSample {
    /// Milliseconds since the emulator started.
    pub t_ms: u64,
    pub depth: Vec<u64>,
}

/// One direction of one link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionReport {
    pub link: String,
    pub from: String,
    pub to: String,
    pub frames_received: u64,
    pub frames_sent: u64,
    /// Frames released more than [`crate::direction::LATE_NS`] after their departure
    /// time (sent at once, never dropped for it).
    pub late: u64,
    /// Frames released before their departure time, with a batch due at most
    /// [`crate::direction::RELEASE_AHEAD_NS`] sooner (absent from reports written before it).
    #[serde(default)]
    pub early: u64,
    pub emulator_drops: EmulatorDrops,
    /// Release time minus modelled departure time, over every frame sent (negative: early).
    pub release_error: Option<LatencySummary>,
    /// Time from a frame's kernel receive stamp (its arrival in the model) to the emulator
    /// reading it, over every frame read: the share of the release error spent before the
    /// emulator could act (absent from reports written before it existed).
    #[serde(default)]
    pub read_lag: Option<LatencySummary>,
    /// Where late frames lost their time (absent until a frame was late, and from reports
    /// written before it existed).
    #[serde(default)]
    pub late_parts: Option<ReleaseParts>,
    /// The model's counters, one entry per stage.
    pub stages: Vec<StageReport>,
    /// Stage depths every 100 ms (the most recent [`crate::direction::DEPTH_SAMPLES`]).
    pub depth: Vec<DepthSample>,
    /// Absent from reports written before it existed.
    #[serde(default)]
    pub profile: LoopProfile,
}

impl DirectionReport {
    pub fn new(link: &str, from: &str, to: &str) -> DirectionReport {
        DirectionReport {
            link: link.into(),
            from: from.into(),
            to: to.into(),
            frames_received: 0,
            frames_sent: 0,
            late: 0,
            early: 0,
            emulator_drops: EmulatorDrops::default(),
            release_error: None,
            read_lag: None,
            late_parts: None,
            stages: Vec::new(),
            depth: Vec::new(),
            profile: LoopProfile::default(),
        }
    }
}

/// One link: its two directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    pub name: String,
    pub directions: Vec<DirectionReport>,
}

/// Everything the emulator of one lab reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmuReport {
    pub schema_version: u32,
    pub links: Vec<LinkReport>,
}

impl EmuReport {
    /// Groups direction reports by link, in the order given.
    pub fn from_directions(dirs: impl IntoIterator<Item = DirectionReport>) -> EmuReport {
        let mut links: Vec<LinkReport> = Vec::new();
        for d in dirs {
            match links.iter_mut().find(|l| l.name == d.link) {
                Some(l) => l.directions.push(d),
                None => links.push(LinkReport {
                    name: d.link.clone(),
                    directions: vec![d],
                }),
            }
        }
        EmuReport {
            schema_version: SCHEMA_VERSION,
            links,
        }
    }

    /// Reads a report written by [`EmuReport::write`].
    pub fn load(path: &Path) -> io::Result<EmuReport> {
        let text = std::fs::read_to_string(path)?;
        serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Writes the report as JSON, atomically (a reader never sees half a file).
    pub fn write(&self, path: &Path) -> io::Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_group_by_link_and_round_trip_through_json() {
        let r = EmuReport::from_directions([
            DirectionReport::new("a-b", "a", "b"),
            DirectionReport::new("c-d", "c", "d"),
            DirectionReport::new("a-b", "b", "a"),
        ]);
        assert_eq!(r.links.len(), 2);
        assert_eq!(r.links[0].directions[1].from, "b");
        let dir = std::env::temp_dir().join(format!("flowlab-emu-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("emulator.json");
        r.write(&path).unwrap();
        assert_eq!(EmuReport::load(&path).unwrap(), r);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
