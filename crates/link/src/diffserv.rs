//! The IP side of a link: a DSCP classifier, a meter and marker per class (`marker`), a scheduler
//! (FIFO, PQ, WFQ, DRR, PQ-WFQ) and a transmit ring serialising onto a line, as on a
//! DiffServ edge router. [`DiffServPort`] is what every IP interface of the simulator runs;
//! [`DiffServEdge`] wraps it as one stage of an emulated link. [`read_sched`] reads the
//! keys both file formats share (`scheduler`, `classes`, `buffer`, `buffer_packets`).

use std::collections::{HashMap, VecDeque};

use flowlab_atm::cell::CELL_LEN;
use flowlab_atm::{cells_per_packet, Encapsulation, LineRate};
use flowlab_qos::classify::{Classifier, Rule};
use flowlab_qos::sched::{
    ClassSpec as WeightedClass, Departure, Drr, Fifo, Port, PqWfq, QueueLimit, Scheduler,
    StrictPriority, Wfq,
};
use flowlab_qos::PacketMeta;
use flowlab_spanned::{FileError, Item, Reader, Value};

use crate::marker::{read_meter, Action, Marker, MeterSpec, METER_KEYS};
use crate::{ClassReport, Event, Frame, LinkModel, StageReport, Verdict};

/// Keys of one entry of `classes`, besides the meter's (`marker::METER_KEYS`).
pub const CLASS_KEYS: &[&str] = &[
    "name",
    "dscp",
    "weight",
    "priority",
    "buffer",
    "buffer_packets",
    "default",
];
const SCHEDULERS: &[(&str, SchedKind)] = &[
    ("fifo", SchedKind::Fifo),
    ("priority", SchedKind::Priority),
    ("pq", SchedKind::Priority),
    ("wfq", SchedKind::Wfq),
    ("drr", SchedKind::Drr),
    ("pq-wfq", SchedKind::PqWfq),
];
/// A class buffer when the file names none (a router's usual 1000-packet queue).
pub const DEFAULT_LIMIT: QueueLimit = QueueLimit::Packets(1000);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchedKind {
    Fifo,
    Priority,
    Wfq,
    Drr,
    PqWfq,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ClassSpec {
    pub name: String,
    pub dscps: Vec<u8>,
    pub weight: u32,
    pub priority: bool,
    pub limit: QueueLimit,
    pub meter: Option<MeterSpec>,
}

/// A scheduler with its classes; frames whose DSCP no class names go to `default_class`.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedSpec {
    pub kind: SchedKind,
    pub classes: Vec<ClassSpec>,
    pub default_class: usize,
}

impl SchedSpec {
    /// One FIFO class holding `limit`.
    pub fn fifo(limit: QueueLimit) -> SchedSpec {
        SchedSpec {
            kind: SchedKind::Fifo,
            classes: vec![ClassSpec {
                name: "all".into(),
                dscps: Vec::new(),
                weight: 1,
                priority: false,
                limit,
                meter: None,
            }],
            default_class: 0,
        }
    }

    /// The classifier: each class's code points to it.
    pub fn classifier(&self) -> Classifier {
        let mut classifier = Classifier::new(self.default_class);
        for (i, c) in self.classes.iter().enumerate() {
            for &d in &c.dscps {
                classifier.push(Rule::to_class(i).dscp(d));
            }
        }
        classifier
    }

    /// The scheduler. A validated spec always builds; a FIFO is the fallback that keeps the
    /// models panic-free regardless.
    pub fn scheduler(&self) -> Box<dyn Scheduler + Send> {
        let limits: Vec<QueueLimit> = self.classes.iter().map(|c| c.limit).collect();
        let weighted = |cs: &[ClassSpec]| -> Vec<WeightedClass> {
            cs.iter()
                .map(|c| WeightedClass::new(c.weight.max(1), c.limit))
                .collect()
        };
        let built: Option<Box<dyn Scheduler + Send>> = match self.kind {
            SchedKind::Fifo => Fifo::new(
                self.classes.len(),
                limits.first().copied().unwrap_or(QueueLimit::Unlimited),
            )
            .ok()
            .map(|s| Box::new(s) as Box<dyn Scheduler + Send>),
            SchedKind::Priority => StrictPriority::new(&limits)
                .ok()
                .map(|s| Box::new(s) as Box<dyn Scheduler + Send>),
            SchedKind::Wfq => Wfq::new(&weighted(&self.classes))
                .ok()
                .map(|s| Box::new(s) as Box<dyn Scheduler + Send>),
            SchedKind::Drr => Drr::new(&weighted(&self.classes))
                .ok()
                .map(|s| Box::new(s) as Box<dyn Scheduler + Send>),
            SchedKind::PqWfq => {
                let k = self.classes.iter().take_while(|c| c.priority).count();
                PqWfq::new(&limits[..k], &weighted(&self.classes[k..]))
                    .ok()
                    .map(|s| Box::new(s) as Box<dyn Scheduler + Send>)
            }
        };
        built.unwrap_or_else(|| {
            let fifo = Fifo::new(limits.len().max(1), QueueLimit::Unlimited);
            Box::new(fifo.expect("at least one class"))
        })
    }
}

/// `buffer` (bytes) or `buffer_packets`.
pub fn queue_limit(r: &Reader) -> Result<Option<QueueLimit>, FileError> {
    Ok(match (r.bytes("buffer")?, r.positive("buffer_packets")?) {
        (Some(b), _) => Some(QueueLimit::Bytes(b)),
        (None, Some(p)) => Some(QueueLimit::Packets(p.min(u64::from(u32::MAX)) as u32)),
        (None, None) => None,
    })
}

/// `scheduler` and `classes` of a link; `link_limit` is each class's buffer unless it names
/// its own.
pub fn read_sched(l: &Reader, link_limit: QueueLimit) -> Result<SchedSpec, FileError> {
    let kind = l
        .choice("scheduler", SCHEDULERS)?
        .unwrap_or(SchedKind::Fifo);
    let mut classes = Vec::new();
    let mut default_class = None;
    for (i, cl) in l.tables("classes")?.iter().enumerate() {
        let cl = cl.named("");
        cl.only(&[CLASS_KEYS, METER_KEYS].concat())?;
        let priority = cl.bool("priority")?.unwrap_or(false);
        if priority && kind == SchedKind::PqWfq && classes.iter().any(|x: &ClassSpec| !x.priority) {
            return Err(FileError::at(
                cl.line(),
                "classes: priority classes must come first",
            ));
        }
        if cl.bool("default")?.unwrap_or(false) {
            default_class = Some(i);
        }
        classes.push(ClassSpec {
            name: match cl.string("name")? {
                Some(n) => n.to_string(),
                None => format!("class{i}"),
            },
            dscps: class_dscps(&cl)?,
            weight: cl.positive("weight")?.unwrap_or(1).min(u64::from(u32::MAX)) as u32,
            priority,
            limit: queue_limit(&cl)?.unwrap_or(link_limit),
            meter: read_meter(&cl)?,
        });
    }
    if classes.is_empty() {
        if kind != SchedKind::Fifo {
            let item = l.get("scheduler").map_or(l.line(), Item::line);
            return Err(FileError::at(item, "scheduler: needs classes"));
        }
        return Ok(SchedSpec::fifo(link_limit));
    }
    if kind == SchedKind::PqWfq && classes.iter().all(|x| x.priority) {
        return Err(l.table_error("pq-wfq: needs at least one class without priority = true"));
    }
    let default_class = default_class.unwrap_or(classes.len() - 1);
    Ok(SchedSpec {
        kind,
        classes,
        default_class,
    })
}

/// A class's `dscp`: one code point or a list, by name or number.
fn class_dscps(cl: &Reader) -> Result<Vec<u8>, FileError> {
    let Some(d) = cl.get("dscp") else {
        return Ok(Vec::new());
    };
    let items = match d.as_array() {
        Some(a) => a.to_vec(),
        None => vec![d.clone()],
    };
    items
        .iter()
        .map(|item| dscp_of(item).map_err(|m| d.error(format!("dscp: {m}"))))
        .collect()
}

/// A DSCP by name (`ef`, `af11`, `cs5`, `be`) or number 0..=63.
pub fn dscp_of(item: &Item) -> Result<u8, String> {
    match item.value() {
        Value::String(s) => flowlab_qos::classify::parse_dscp(s).map_err(|e| e.to_string()),
        Value::Integer(x) if (0..64).contains(x) => Ok(*x as u8),
        _ => Err("expected a name (ef, af11, cs5, be) or 0..=63".into()),
    }
}

/// Why a [`DiffServPort`] refused a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    QueueFull,
    OutOfProfile,
}

/// Meters, classifier, scheduler, transmit ring and line: one IP output interface.
pub struct DiffServPort {
    port: Port<Box<dyn Scheduler + Send>>,
    markers: Vec<Option<Marker>>,
    out_of_profile: Vec<u64>,
    remarked: Vec<u64>,
    names: Vec<String>,
}

impl DiffServPort {
    /// The interface of `spec` on a line of `rate_bps` (at least 1) with a transmit ring of
    /// `tx_ring` packets.
    pub fn new(spec: &SchedSpec, rate_bps: u64, tx_ring: usize) -> DiffServPort {
        let port = Port::new(rate_bps.max(1), spec.scheduler(), spec.classifier())
            .expect("a rate of at least 1 bit/s")
            .with_tx_ring(tx_ring);
        let markers = spec
            .classes
            .iter()
            .map(|c| c.meter.as_ref().and_then(Marker::new))
            .collect();
        DiffServPort {
            port,
            markers,
            out_of_profile: vec![0; spec.classes.len()],
            remarked: vec![0; spec.classes.len()],
            names: spec.classes.iter().map(|c| c.name.clone()).collect(),
        }
    }

    /// Classifies, meters, marks and queues `packet` (its `size` is what the line and meter
    /// charge). A re-marked packet is classified again by its new DSCP (and not metered
    /// again); it leaves with that DSCP.
    pub fn enqueue(&mut self, now_ns: u64, packet: PacketMeta) -> Result<(), Refused> {
        let mut packet = packet;
        let mut class = self.port.classifier().classify(&packet);
        if let Some(Some(marker)) = self.markers.get_mut(class) {
            match marker.mark(now_ns, packet.size).1 {
                Action::Keep => {}
                Action::Drop => {
                    self.out_of_profile[class] += 1;
                    return Err(Refused::OutOfProfile);
                }
                Action::Remark(dscp) => {
                    if dscp != packet.dscp {
                        self.remarked[class] += 1;
                        packet = packet.with_dscp(dscp);
                        class = self.port.classifier().classify(&packet);
                    }
                }
            }
        }
        match self.port.enqueue_class(now_ns, class, packet) {
            flowlab_qos::Verdict::Queued => Ok(()),
            flowlab_qos::Verdict::Dropped(_) => Err(Refused::QueueFull),
        }
    }

    /// The next packet whose last bit left by `now_ns`.
    pub fn poll_transmit(&mut self, now_ns: u64) -> Option<Departure> {
        self.port.poll_transmit(now_ns)
    }

    /// When the packet on the line ends.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.port.poll_timeout()
    }

    /// Packets held.
    pub fn backlog_packets(&self) -> usize {
        self.port.backlog_packets()
    }

    /// Counters per class, named.
    pub fn classes(&self) -> Vec<ClassReport> {
        let sched = self.port.scheduler();
        (0..self.names.len())
            .filter_map(|k| {
                sched.counters(k).map(|c| ClassReport {
                    name: self.names[k].clone(),
                    enqueued: c.enqueued,
                    sent: c.sent,
                    sent_bytes: c.sent_bytes,
                    dropped: c.dropped,
                    out_of_profile: self.out_of_profile[k],
                    remarked: self.remarked[k],
                })
            })
            .collect()
    }
}

/// The ATM stage a [`DiffServEdge`] feeds: the encapsulation its frames become cells with,
/// and the line those cells take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OntoAtm {
    pub encap: Encapsulation,
    pub line: LineRate,
}

/// A DiffServ edge as a link stage: the port, then frames leave as their last bit does.
/// Onto an ATM stage, the line and meters charge each frame its AAL5 cells (53 bytes each),
/// as a router's interface onto an ATM VC does, and a frame leaves when its cells must start
/// for the last to end with the port's last bit: the ATM stage serialises them on its line,
/// and handing a frame down at its last bit would serialise it twice.
pub struct DiffServEdge {
    port: DiffServPort,
    onto_atm: Option<OntoAtm>,
    /// Onto an ATM stage: each held frame's own length, by id.
    lens: HashMap<u64, u32>,
    out: VecDeque<Event>,
    report: StageReport,
}

impl DiffServEdge {
    pub fn new(
        spec: &SchedSpec,
        rate_bps: u64,
        tx_ring: usize,
        onto_atm: Option<OntoAtm>,
    ) -> DiffServEdge {
        DiffServEdge {
            port: DiffServPort::new(spec, rate_bps, tx_ring),
            onto_atm,
            lens: HashMap::new(),
            out: VecDeque::new(),
            report: StageReport::new("diffserv", "frames"),
        }
    }

    fn settle(&mut self, now_ns: u64) {
        while let Some(d) = self.port.poll_transmit(now_ns) {
            let p = d.packet;
            let (len, at_ns) = match self.onto_atm {
                Some(atm) => {
                    let cells = u64::from(p.size) / CELL_LEN as u64;
                    let on_line = atm.line.cell_time().times_floor(cells);
                    let at = d.end_ns.saturating_sub(on_line).max(d.start_ns);
                    (self.lens.remove(&p.id).unwrap_or(p.size), at)
                }
                None => (p.size, d.end_ns),
            };
            self.report.frames_out += 1;
            self.report.bytes_out += u64::from(len);
            self.out.push_back(Event::Depart {
                frame: Frame {
                    id: p.id,
                    len,
                    dscp: p.dscp,
                },
                at_ns,
            });
        }
    }
}

impl LinkModel for DiffServEdge {
    fn enqueue(&mut self, now_ns: u64, frame: Frame) -> Verdict {
        self.settle(now_ns);
        self.report.frames_in += 1;
        let charged = match self.onto_atm {
            Some(atm) => (cells_per_packet(frame.len as usize, atm.encap) * CELL_LEN) as u32,
            None => frame.len,
        };
        let packet = PacketMeta::new(frame.id, 0, charged, now_ns).with_dscp(frame.dscp);
        let verdict = match self.port.enqueue(now_ns, packet) {
            Ok(()) => {
                if self.onto_atm.is_some() {
                    self.lens.insert(frame.id, frame.len);
                }
                Verdict::Queued
            }
            Err(Refused::QueueFull) => Verdict::Dropped(crate::Cause::QueueFull),
            Err(Refused::OutOfProfile) => Verdict::Dropped(crate::Cause::Meter),
        };
        if let Verdict::Dropped(c) = verdict {
            self.report.count_drop(c);
        }
        let depth = self.port.backlog_packets() as u64;
        self.report.max_depth = self.report.max_depth.max(depth);
        verdict
    }

    fn next_event_ns(&self) -> Option<u64> {
        match self.out.front() {
            Some(Event::Depart { at_ns, .. }) => Some(*at_ns),
            _ => self.port.poll_timeout(),
        }
    }

    fn dequeue(&mut self, now_ns: u64) -> Option<Event> {
        self.settle(now_ns);
        match self.out.front() {
            Some(Event::Depart { at_ns, .. }) if *at_ns <= now_ns => self.out.pop_front(),
            _ => None,
        }
    }

    fn report(&self, out: &mut Vec<StageReport>) {
        let mut r = self.report.clone();
        r.classes = self.port.classes();
        out.push(r);
    }

    fn depth(&self, out: &mut Vec<u64>) {
        out.push((self.port.backlog_packets() + self.out.len()) as u64);
    }
}

#[cfg(test)]
mod tests;
