//! A DiffServ class's meter and marker at an edge: a token bucket (single rate), srTCM
//! (RFC 2697) or trTCM (RFC 2698) colours each frame, colour-blind, and the class's action for
//! that colour keeps it, drops it or re-marks its DSCP. [`read_meter`] reads the keys of a
//! `classes` entry that scenarios, network files and lab `emulate` tables share.

use flowlab_qos::meter::{Color, SingleRateMeter, SrTcm, TrTcm};
use flowlab_spanned::{FileError, Item, Reader, Value};

/// The keys of a `classes` entry read here.
pub const METER_KEYS: &[&str] = &[
    "meter",
    "meter_rate",
    "meter_burst",
    "meter_excess_burst",
    "meter_peak_rate",
    "meter_peak_burst",
    "yellow",
    "red",
];
const KINDS: &[(&str, Kind)] = &[
    ("single", Kind::Single),
    ("srtcm", Kind::SrTcm),
    ("trtcm", Kind::TrTcm),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Single,
    SrTcm,
    TrTcm,
}

/// Which meter, with its buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeterKind {
    /// One bucket: green or red.
    Single,
    /// RFC 2697: an excess bucket of `ebs_bytes` fed by what overflows the committed one.
    SrTcm { ebs_bytes: u64 },
    /// RFC 2698: a peak bucket of `pbs_bytes` at `pir_bps`.
    TrTcm { pir_bps: u64, pbs_bytes: u64 },
}

/// What becomes of a frame of one colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Keep,
    Drop,
    /// Re-marked with this DSCP (and classified again by it).
    Remark(u8),
}

/// A class's meter: committed rate and burst, the kind, and the yellow and red actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterSpec {
    pub rate_bps: u64,
    pub burst_bytes: u64,
    pub kind: MeterKind,
    pub yellow: Action,
    pub red: Action,
}

impl MeterSpec {
    /// A single-rate policer that drops what is out of profile.
    pub fn policer(rate_bps: u64, burst_bytes: u64) -> MeterSpec {
        MeterSpec {
            rate_bps,
            burst_bytes,
            kind: MeterKind::Single,
            yellow: Action::Keep,
            red: Action::Drop,
        }
    }
}

/// A running meter (buckets start full at time 0).
#[derive(Debug, Clone)]
pub struct Marker {
    meter: Meter,
    yellow: Action,
    red: Action,
}

#[derive(Debug, Clone)]
enum Meter {
    Single(SingleRateMeter),
    SrTcm(SrTcm),
    TrTcm(TrTcm),
}

impl Marker {
    /// The meter of `spec`, or `None` if its parameters are invalid (a validated spec never
    /// is).
    pub fn new(spec: &MeterSpec) -> Option<Marker> {
        let (cir, cbs) = (spec.rate_bps, spec.burst_bytes);
        let meter = match spec.kind {
            MeterKind::Single => Meter::Single(SingleRateMeter::new(cir, cbs, 0).ok()?),
            MeterKind::SrTcm { ebs_bytes } => {
                Meter::SrTcm(SrTcm::new(cir, cbs, ebs_bytes, 0).ok()?)
            }
            MeterKind::TrTcm { pir_bps, pbs_bytes } => {
                Meter::TrTcm(TrTcm::new(cir, cbs, pir_bps, pbs_bytes, 0).ok()?)
            }
        };
        Some(Marker {
            meter,
            yellow: spec.yellow,
            red: spec.red,
        })
    }

    /// Colours a frame of `bytes` arriving at `now_ns` and returns its action.
    pub fn mark(&mut self, now_ns: u64, bytes: u32) -> (Color, Action) {
        let color = match &mut self.meter {
            Meter::Single(m) => m.meter(now_ns, bytes),
            Meter::SrTcm(m) => m.meter(now_ns, bytes),
            Meter::TrTcm(m) => m.meter(now_ns, bytes),
        };
        let action = match color {
            Color::Green => Action::Keep,
            Color::Yellow => self.yellow,
            Color::Red => self.red,
        };
        (color, action)
    }
}

/// A class's meter keys: `meter` (`single`, default, `srtcm` or `trtcm`), `meter_rate` (CIR),
/// `meter_burst` (CBS: default 10 ms at the rate, at least 1500 B), `meter_excess_burst`
/// (srTCM's EBS, default the CBS), `meter_peak_rate` and `meter_peak_burst` (trTCM's PIR,
/// required, and PBS, default 10 ms at the PIR, at least the CBS), `yellow` (`keep`, default,
/// `drop` or a DSCP) and `red` (`drop`, default, `keep` or a DSCP).
pub fn read_meter(cl: &Reader) -> Result<Option<MeterSpec>, FileError> {
    let Some(rate_bps) = cl.bit_rate("meter_rate", "'max' is not a meter rate")? else {
        if let Some((key, item)) = METER_KEYS.iter().find_map(|k| cl.get(k).map(|i| (k, i))) {
            return Err(cl.error(item, key, "needs meter_rate"));
        }
        return Ok(None);
    };
    positive(cl, "meter_rate", rate_bps)?;
    let burst_bytes = match cl.bytes("meter_burst")? {
        Some(b) => positive(cl, "meter_burst", b)?,
        None => default_burst(rate_bps),
    };
    let kind = cl.choice("meter", KINDS)?.unwrap_or(Kind::Single);
    only_for(cl, kind, "meter_excess_burst", Kind::SrTcm)?;
    only_for(cl, kind, "meter_peak_rate", Kind::TrTcm)?;
    only_for(cl, kind, "meter_peak_burst", Kind::TrTcm)?;
    let kind = match kind {
        Kind::Single => {
            if let Some(item) = cl.get("yellow") {
                return Err(cl.error(item, "yellow", "a single-rate meter has no yellow"));
            }
            MeterKind::Single
        }
        Kind::SrTcm => MeterKind::SrTcm {
            ebs_bytes: cl.bytes("meter_excess_burst")?.unwrap_or(burst_bytes),
        },
        Kind::TrTcm => read_peak(cl, rate_bps, burst_bytes)?,
    };
    Ok(Some(MeterSpec {
        rate_bps,
        burst_bytes,
        kind,
        yellow: read_action(cl, "yellow")?.unwrap_or(Action::Keep),
        red: read_action(cl, "red")?.unwrap_or(Action::Drop),
    }))
}

/// 10 ms at `rate_bps`, at least one 1500-byte packet.
fn default_burst(rate_bps: u64) -> u64 {
    (rate_bps / 800).max(1500)
}

fn positive(cl: &Reader, key: &str, v: u64) -> Result<u64, FileError> {
    if v == 0 {
        return Err(cl.error(cl.required(key)?, key, "must be above 0"));
    }
    Ok(v)
}

fn only_for(cl: &Reader, kind: Kind, key: &str, want: Kind) -> Result<(), FileError> {
    match cl.get(key) {
        Some(item) if kind != want => {
            let name = KINDS.iter().find(|k| k.1 == want).map_or("", |k| k.0);
            Err(cl.error(item, key, format!("needs meter = \"{name}\"")))
        }
        _ => Ok(()),
    }
}

/// trTCM's peak bucket: PIR at least the CIR (RFC 2698).
fn read_peak(cl: &Reader, cir: u64, cbs: u64) -> Result<MeterKind, FileError> {
    let Some(pir_bps) = cl.bit_rate("meter_peak_rate", "'max' is not a meter rate")? else {
        return Err(cl.table_error("meter = \"trtcm\" needs meter_peak_rate"));
    };
    if pir_bps < cir {
        let item = cl.required("meter_peak_rate")?;
        let why = format!("{pir_bps} bit/s is below meter_rate ({cir} bit/s)");
        return Err(cl.error(item, "meter_peak_rate", why));
    }
    let pbs_bytes = match cl.bytes("meter_peak_burst")? {
        Some(b) => positive(cl, "meter_peak_burst", b)?,
        None => default_burst(pir_bps).max(cbs),
    };
    Ok(MeterKind::TrTcm { pir_bps, pbs_bytes })
}

/// `keep`, `drop`, or a DSCP to re-mark with.
fn read_action(cl: &Reader, key: &str) -> Result<Option<Action>, FileError> {
    let Some(item) = cl.get(key) else {
        return Ok(None);
    };
    let action = match item.value() {
        Value::String(s) if s == "keep" => Action::Keep,
        Value::String(s) if s == "drop" => Action::Drop,
        _ => Action::Remark(dscp_or(item).map_err(|m| cl.error(item, key, m))?),
    };
    Ok(Some(action))
}

fn dscp_or(item: &Item) -> Result<u8, String> {
    crate::diffserv::dscp_of(item).map_err(|m| format!("keep, drop or a DSCP: {m}"))
}

#[cfg(test)]
mod tests;
