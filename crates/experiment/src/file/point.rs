//! Hosts and flows of one sweep point: the file's `[[host]]` and `[[flow]]` tables, variables
//! and the point's sweep values substituted, each flow mapped into a validated `TestSpec`.

use flowlab_spanned::{FileError, Item as TomlItem, Reader, Table};
use flowlab_spec::Param;
use flowlab_spec::{Direction, Protocol, TestSpec};
use flowlab_traffic::TrafficSpec;

use super::sweep::Target;
use super::{capped, read_name, substitute, substitute_table, Flow, Host, SweepPoint, Vars};
use crate::limits::MAX_PARALLEL;

/// Port of an agent when a host's address names none (the agent's default).
pub const DEFAULT_AGENT_PORT: u16 = 9470;

pub(super) const FLOW_KEYS: &[&str] = &[
    "name",
    "from",
    "to",
    "protocol",
    "mode",
    "rate",
    "size",
    "duration",
    "count",
    "interval",
    "traffic",
    "dscp",
    "flows",
    "start",
    "congestion",
    "mss",
    "window_clamp",
    "send_buffer",
    "recv_buffer",
    "echo_every",
    "pacing",
    "packet_socket",
];
const HOST_KEYS: &[&str] = &["name", "address"];
/// The flow keys that set a field of its `TestSpec` (beyond its protocol and mode), in the
/// order they are applied.
const SPEC_KEYS: &[&str] = &[
    "traffic",
    "rate",
    "size",
    "duration",
    "count",
    "interval",
    "dscp",
    "flows",
    "congestion",
    "mss",
    "window_clamp",
    "send_buffer",
    "recv_buffer",
    "echo_every",
    "pacing",
    "packet_socket",
];
const PROTOCOLS: &[(&str, Protocol)] = &[
    ("udp", Protocol::Udp),
    ("tcp", Protocol::Tcp),
    ("icmp", Protocol::Icmp),
];
const MODES: &[(&str, Direction)] = &[
    ("oneway", Direction::Oneway),
    ("loopback", Direction::Loopback),
    ("reverse", Direction::Reverse),
];

/// The file's host and flow tables, and its variables: what every sweep point is built from.
pub(super) struct Definitions<'t, 'r> {
    pub hosts: &'r [Reader<'t>],
    pub flows: &'r [Reader<'t>],
    pub vars: &'r Vars,
}

impl Definitions<'_, '_> {
    /// The hosts and flows with `overrides` (a point's sweep values) in place.
    pub fn point(&self, overrides: &[(Target, TomlItem)]) -> Result<SweepPoint, FileError> {
        let mut vars = self.vars.clone();
        for (t, v) in overrides {
            if let Target::Var(n) = t {
                vars.insert(n.clone(), v.clone());
            }
        }
        let mut hosts: Vec<Host> = Vec::new();
        for h in self.hosts {
            let host = build_host(h, &vars, overrides)?;
            if hosts.iter().any(|o| o.name == host.name) {
                return Err(FileError::at(
                    h.line(),
                    format!("host '{}' is defined twice", host.name),
                ));
            }
            hosts.push(host);
        }
        let mut flows: Vec<Flow> = Vec::new();
        for f in self.flows {
            let mut table = substitute_table(f.table(), &vars)?;
            let name = read_name(&Reader::new(&table, f.line(), "flow"), "name")?;
            if flows.iter().any(|o| o.name == name) {
                return Err(FileError::at(
                    f.line(),
                    format!("flow '{name}' is defined twice"),
                ));
            }
            for (t, v) in overrides {
                if let Target::Flow(n, k) = t {
                    if *n == name {
                        table.insert(k, substitute(v, &vars, k)?);
                    }
                }
            }
            let r = Reader::new(&table, f.line(), format!("flow '{name}'"));
            flows.push(build_flow(&r, name, &hosts)?);
        }
        Ok(SweepPoint {
            labels: Vec::new(),
            hosts,
            flows,
        })
    }
}

fn build_host(
    h: &Reader,
    vars: &Vars,
    overrides: &[(Target, TomlItem)],
) -> Result<Host, FileError> {
    let mut table: Table = substitute_table(h.table(), vars)?;
    let r = Reader::new(&table, h.line(), "host");
    r.only(HOST_KEYS)?;
    let name = read_name(&r, "name")?;
    for (t, v) in overrides {
        if matches!(t, Target::Host(n) if *n == name) {
            table.insert("address", v.clone());
        }
    }
    let r = Reader::new(&table, h.line(), format!("host '{name}'"));
    let item = r.required("address")?;
    let address = normalise_address(r.required_string("address")?)
        .map_err(|m| r.error(item, "address", m))?;
    Ok(Host {
        name,
        address,
        line: h.line(),
    })
}

fn build_flow(r: &Reader, name: String, hosts: &[Host]) -> Result<Flow, FileError> {
    r.only(FLOW_KEYS)?;
    let from = host_ref(r, "from", hosts)?;
    let to = host_ref(r, "to", hosts)?;
    // A TCP application's model (a TCP preset) runs over TCP unless the file says otherwise.
    let tcp_by_default = read_traffic(r)?.is_some_and(|t| t.prefers_tcp());
    let protocol = r
        .choice("protocol", PROTOCOLS)?
        .unwrap_or(match tcp_by_default {
            true => Protocol::Tcp,
            false => Protocol::Udp,
        });
    // An echo is a round trip.
    let direction = r.choice("mode", MODES)?.unwrap_or(match protocol {
        Protocol::Icmp => Direction::Loopback,
        _ => Direction::Oneway,
    });
    let mut spec = TestSpec::new(protocol, direction);
    for key in SPEC_KEYS {
        apply(r, &mut spec, key)?;
    }
    // As with `flowlab test`: echo requests one a second at any size unless a rate is given.
    if protocol == Protocol::Icmp && r.get("rate").is_none() {
        spec.rate_bps = Some(flowlab_spec::icmp_rate_bps(spec.size));
    }
    // As with `flowlab test`: a count alone ends the flow, no default duration beside it.
    if r.get("duration").is_none() && spec.count.is_some() {
        spec.duration_ns = None;
    }
    validate(r, &spec)?;
    Ok(Flow {
        name,
        from,
        to,
        start_ns: r.duration_ns("start")?.unwrap_or(0),
        line: r.line(),
        spec,
    })
}

/// Sets the field of `spec` that the flow key `key` names, when the file gives it: the one
/// place where TOML keys map into the test description.
fn apply(r: &Reader, spec: &mut TestSpec, key: &str) -> Result<(), FileError> {
    let Some(item) = r.get(key) else {
        return Ok(());
    };
    // A model's files are read relative to the experiment file.
    if key == "traffic" {
        spec.traffic = read_traffic(r)?;
        return Ok(());
    }
    // `flows` has the file's own cap (a plan multiplies it).
    if key == "flows" {
        spec.flows = capped(r, key, MAX_PARALLEL)?.unwrap_or(1);
        return Ok(());
    }
    // Every other key is a parameter: the same typed `set` as sweeps and the CLI's points.
    let text = item.scalar_text().unwrap_or_default();
    let param: Param = key
        .parse()
        .map_err(|e: flowlab_spec::SpecError| r.error(item, key, e))?;
    let value = param
        .parse_value(&text)
        .map_err(|e| r.error(item, key, e))?;
    spec.set(param, value).map_err(|e| r.error(item, key, e))
}

/// `TestSpec::validate`, its refusal put at the line of the key that caused it: the first
/// whose value, applied in order to the defaults, makes the test invalid.
fn validate(r: &Reader, spec: &TestSpec) -> Result<(), FileError> {
    let Err(refusal) = spec.validate() else {
        return Ok(());
    };
    let mut partial = TestSpec::new(spec.protocol, spec.direction);
    for key in SPEC_KEYS {
        apply(r, &mut partial, key)?;
        if let (Err(e), Some(item)) = (partial.validate(), r.get(key)) {
            return Err(r.error(item, key, e));
        }
    }
    Err(r.table_error(refusal))
}

fn read_traffic(r: &Reader) -> Result<Option<TrafficSpec>, FileError> {
    let Some(text) = r.string("traffic")? else {
        return Ok(None);
    };
    let item = r.required("traffic")?;
    match TrafficSpec::parse(text) {
        Ok(spec) if spec.transactions().is_some() => Err(r.error(
            item,
            "traffic",
            "request/response (rr, crr) runs with `flowlab test`; experiment flows are streams",
        )),
        Ok(spec) => Ok(Some(spec)),
        Err(e) => Err(r.error(item, "traffic", e)),
    }
}

fn host_ref(r: &Reader, key: &str, hosts: &[Host]) -> Result<String, FileError> {
    let name = r.required_string(key)?;
    if hosts.iter().any(|h| h.name == name) {
        return Ok(name.to_string());
    }
    let known: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    let known = match known.is_empty() {
        true => "none defined".to_string(),
        false => known.join(", "),
    };
    Err(r.error(
        r.required(key)?,
        key,
        format!("unknown host '{name}' (hosts: {known})"),
    ))
}

/// `HOST[:PORT]` → `HOST:PORT`, brackets around IPv6, the default port when none is given.
pub(super) fn normalise_address(s: &str) -> Result<String, String> {
    let s = s.trim();
    let bad = || format!("'{s}' is not HOST[:PORT] (10.77.1.1, agent.lab:9470, [fd00::2]:9470)");
    if s.is_empty() || s.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let port_ok = |p: &str| p.parse::<u16>().ok().filter(|&p| p > 0);
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        if host.is_empty() {
            return Err(bad());
        }
        return match after {
            "" => Ok(format!("[{host}]:{DEFAULT_AGENT_PORT}")),
            p => match p.strip_prefix(':').and_then(port_ok) {
                Some(port) => Ok(format!("[{host}]:{port}")),
                None => Err(bad()),
            },
        };
    }
    match s.matches(':').count() {
        0 => Ok(format!("{s}:{DEFAULT_AGENT_PORT}")),
        1 => {
            let (host, p) = s.split_once(':').ok_or_else(bad)?;
            match port_ok(p) {
                Some(port) if !host.is_empty() => Ok(format!("{host}:{port}")),
                _ => Err(bad()),
            }
        }
        // A bare IPv6 address: no port possible without brackets.
        _ if s.parse::<std::net::Ipv6Addr>().is_ok() => Ok(format!("[{s}]:{DEFAULT_AGENT_PORT}")),
        _ => Err(bad()),
    }
}
