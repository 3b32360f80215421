//! Lab description files: TOML text → a validated [`LabSpec`], or a [`SpecError`] naming the
//! line.
//!
//! Values keep their byte spans (`toml::Spanned`) so that checks made after parsing (an
//! unknown host in a link, a duplicate name, a bad rate) still point at the offending line.
//! Parsing needs neither root nor a kernel; whether the kernel can do what the file asks
//! (netem for `delay`) is checked separately by [`LabSpec::check_kernel`].

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use toml::{Spanned, Value};

/// Longest lab, host or switch name: a node's interfaces are called `to-<peer>`, and
/// interface names have at most 15 bytes.
pub const MAX_NAME_LEN: usize = 12;
/// Most hosts and switches in one lab; each is a namespace, so keep a lab bounded.
pub const MAX_NODES: usize = 200;
/// Smallest tbf burst or buffer: one full Ethernet frame, or nothing ever passes.
pub const MIN_FRAME: u64 = 1514;

/// A lab file that failed to load: a message and, where known, the line it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// 1-based line, when the error is about a place in the file.
    pub line: Option<usize>,
    /// One line, no trailing period.
    pub message: String,
    file: Option<String>,
}

impl SpecError {
    pub(crate) fn new(line: Option<usize>, message: impl Into<String>) -> Self {
        SpecError {
            line,
            message: message.into(),
            file: None,
        }
    }

    /// The same error, displayed as `FILE:LINE: message`.
    pub fn with_file(mut self, name: &str) -> Self {
        self.file = Some(name.to_string());
        self
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line}: {}", self.message),
            (Some(file), None) => write!(f, "{file}: {}", self.message),
            (None, Some(line)) => write!(f, "line {line}: {}", self.message),
            (None, None) => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for SpecError {}

/// A validated lab description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSpec {
    pub name: String,
    pub hosts: Vec<NodeSpec>,
    pub switches: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
}

/// A `[[host]]` or `[[switch]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    /// Line of its `name`, for later messages.
    pub line: usize,
}

/// A `[[link]]` between two hosts, or a host and a switch (then `a` or `b` is the switch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSpec {
    pub a: String,
    pub b: String,
    /// tbf rate on each egress direction; `None`: unlimited.
    pub rate_bps: Option<u64>,
    /// tbf bucket size; `None`: a default derived from the rate.
    pub burst_bytes: Option<u64>,
    /// tbf queue limit (`buffer`); `None`: 50 ms worth of queue at the rate.
    pub buffer_bytes: Option<u64>,
    /// One-way delay added on each egress direction (needs netem).
    pub delay_ns: Option<u64>,
    pub line: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    lab: Option<RawLab>,
    #[serde(default)]
    host: Vec<RawNode>,
    #[serde(default)]
    switch: Vec<RawNode>,
    #[serde(default)]
    link: Vec<RawLink>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLab {
    name: Spanned<String>,
    #[allow(dead_code)] // free text for people reading the file
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: Spanned<String>,
    b: Spanned<String>,
    rate: Option<Spanned<Value>>,
    burst: Option<Spanned<Value>>,
    buffer: Option<Spanned<Value>>,
    delay: Option<Spanned<Value>>,
}

/// Line (1-based) of byte offset `pos` in `text`.
fn line_of(text: &str, pos: usize) -> usize {
    text.as_bytes()[..pos.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A unit value given as a string ("10M") or a bare number, with its line.
fn unit_text(text: &str, v: &Spanned<Value>, key: &str) -> Result<(String, usize), SpecError> {
    let line = line_of(text, v.span().start);
    match v.get_ref() {
        Value::String(s) => Ok((s.clone(), line)),
        Value::Integer(i) => Ok((i.to_string(), line)),
        Value::Float(x) => Ok((x.to_string(), line)),
        _ => Err(SpecError::new(
            Some(line),
            format!("{key}: expected a string or a number"),
        )),
    }
}

/// Checks a lab, host or switch name; `lab` names may not contain '-', because the
/// namespaces of lab `a` (`fl-a-...`) must never match the prefix of lab `a-b`.
pub(crate) fn check_name(name: &str, what: &str, line: usize) -> Result<(), SpecError> {
    let err = |m: String| Err(SpecError::new(Some(line), m));
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return err(format!(
            "{what} name {name:?}: must have 1 to {MAX_NAME_LEN} characters"
        ));
    }
    let dash_ok = what != "lab";
    let ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || (dash_ok && c == '-'));
    if !ok {
        let allowed = if dash_ok {
            "letters, digits, '_' and '-'"
        } else {
            "letters, digits and '_'"
        };
        return err(format!(
            "{what} name {name:?}: use {allowed}, starting with a letter or digit"
        ));
    }
    Ok(())
}

impl LabSpec {
    /// Parses and validates a lab file's text.
    pub fn parse(text: &str) -> Result<LabSpec, SpecError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            SpecError::new(line, e.message().trim().replace('\n', " "))
        })?;
        let lab = raw
            .lab
            .ok_or_else(|| SpecError::new(None, "missing [lab] with name = \"...\""))?;
        let name = lab.name.get_ref().clone();
        check_name(&name, "lab", line_of(text, lab.name.span().start))?;

        // Hosts and switches share one namespace of names (and of network namespaces).
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut nodes = |list: &[RawNode], what: &str| -> Result<Vec<NodeSpec>, SpecError> {
            let mut out = Vec::new();
            for n in list {
                let line = line_of(text, n.name.span().start);
                let name = n.name.get_ref().clone();
                check_name(&name, what, line)?;
                if let Some(first) = seen.insert(name.clone(), line) {
                    return Err(SpecError::new(
                        Some(line),
                        format!("duplicate name {name:?} (first defined on line {first})"),
                    ));
                }
                out.push(NodeSpec { name, line });
            }
            Ok(out)
        };
        let hosts = nodes(&raw.host, "host")?;
        let switches = nodes(&raw.switch, "switch")?;
        if hosts.is_empty() {
            return Err(SpecError::new(None, "no [[host]]: a lab needs hosts"));
        }
        if hosts.len() + switches.len() > MAX_NODES {
            return Err(SpecError::new(
                None,
                format!("at most {MAX_NODES} hosts and switches in one lab"),
            ));
        }
        let is_switch = |n: &str| switches.iter().any(|s| s.name == n);
        let known = |n: &str| seen.contains_key(n);
        let names = |list: &[NodeSpec]| {
            list.iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };

        let mut links = Vec::new();
        let mut pairs: HashMap<(String, String), usize> = HashMap::new();
        for l in &raw.link {
            let line = line_of(text, l.a.span().start);
            let (a, b) = (l.a.get_ref().clone(), l.b.get_ref().clone());
            for end in [&l.a, &l.b] {
                if !known(end.get_ref()) {
                    let mut m = format!(
                        "link: unknown host {:?} (hosts: {}",
                        end.get_ref(),
                        names(&hosts)
                    );
                    if !switches.is_empty() {
                        m += &format!("; switches: {}", names(&switches));
                    }
                    m.push(')');
                    return Err(SpecError::new(Some(line_of(text, end.span().start)), m));
                }
            }
            if a == b {
                return Err(SpecError::new(
                    Some(line),
                    format!("link: {a:?} linked to itself"),
                ));
            }
            if is_switch(&a) && is_switch(&b) {
                return Err(SpecError::new(
                    Some(line),
                    format!("link: {a:?} and {b:?} are both switches; join their hosts to one switch instead"),
                ));
            }
            let key = if a < b {
                (a.clone(), b.clone())
            } else {
                (b.clone(), a.clone())
            };
            if let Some(first) = pairs.insert(key, line) {
                return Err(SpecError::new(
                    Some(line),
                    format!("link: {a:?} and {b:?} are already linked on line {first}"),
                ));
            }

            let mut rate_bps = None;
            if let Some(v) = &l.rate {
                let (t, line) = unit_text(text, v, "rate")?;
                rate_bps = Some(match flowlab_units::parse_rate(&t) {
                    Ok(flowlab_units::Rate::BitsPerSec(b)) => b,
                    Ok(flowlab_units::Rate::Max) => {
                        return Err(SpecError::new(
                            Some(line),
                            "rate: 'max' is not a limit; leave rate out for an unlimited link",
                        ))
                    }
                    Err(e) => return Err(SpecError::new(Some(line), format!("rate: {e}"))),
                });
            }
            let bytes = |f: &Option<Spanned<Value>>, key: &str| -> Result<_, SpecError> {
                let Some(v) = f else { return Ok(None) };
                let (t, line) = unit_text(text, v, key)?;
                let n = flowlab_units::parse_bytes(&t)
                    .map_err(|e| SpecError::new(Some(line), format!("{key}: {e}")))?;
                if rate_bps.is_none() {
                    return Err(SpecError::new(
                        Some(line),
                        format!(
                            "{key}: only meaningful with a rate (it sizes the link's token bucket)"
                        ),
                    ));
                }
                if n < MIN_FRAME {
                    return Err(SpecError::new(
                        Some(line),
                        format!("{key}: {n} B is less than one full frame ({MIN_FRAME} B)"),
                    ));
                }
                Ok(Some(n))
            };
            let burst_bytes = bytes(&l.burst, "burst")?;
            let buffer_bytes = bytes(&l.buffer, "buffer")?;
            let mut delay_ns = None;
            if let Some(v) = &l.delay {
                let (t, line) = unit_text(text, v, "delay")?;
                let d = flowlab_units::parse_duration(&t)
                    .map_err(|e| SpecError::new(Some(line), format!("delay: {e}")))?;
                if d.is_zero() || d.as_secs() > 60 {
                    return Err(SpecError::new(
                        Some(line),
                        "delay: must be above 0 and at most 60s",
                    ));
                }
                delay_ns = Some(d.as_nanos() as u64);
            }
            links.push(LinkSpec {
                a,
                b,
                rate_bps,
                burst_bytes,
                buffer_bytes,
                delay_ns,
                line,
            });
        }
        Ok(LabSpec {
            name,
            hosts,
            switches,
            links,
        })
    }

    /// Checks that the kernel has the qdiscs the file asks for; `available` is
    /// [`crate::qdisc_available`] outside tests. `delay` needs netem, which many
    /// minimal kernels lack.
    pub fn check_kernel(&self, available: impl Fn(&str) -> bool) -> Result<(), SpecError> {
        if let Some(l) = self.links.iter().find(|l| l.delay_ns.is_some()) {
            if !available("netem") {
                return Err(SpecError::new(
                    Some(l.line),
                    "delay: this kernel has no netem qdisc (try `modprobe sch_netem`), so links cannot add delay; remove `delay`",
                ));
            }
        }
        if self.links.iter().any(|l| l.rate_bps.is_some()) && !available("tbf") {
            let l = self
                .links
                .iter()
                .find(|l| l.rate_bps.is_some())
                .expect("found");
            return Err(SpecError::new(
                Some(l.line),
                "rate: this kernel has no tbf qdisc (try `modprobe sch_tbf`)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREE: &str = r#"
[lab]
name = "three"

[[host]]
name = "h1"
[[host]]
name = "h2"
[[host]]
name = "r"
[[switch]]
name = "s1"

[[link]]
a = "h1"
b = "s1"
[[link]]
a = "h2"
b = "s1"
[[link]]
a = "r"
b = "s1"
[[link]]
a = "r"
b = "h2x"
rate = "10M"
"#;

    fn err(text: &str) -> SpecError {
        LabSpec::parse(text).unwrap_err()
    }

    #[test]
    fn parses_a_lab() {
        let text = THREE
            .replace("h2x", "sink")
            .replace("[[switch]]", "[[host]]\nname = \"sink\"\n[[switch]]");
        let spec = LabSpec::parse(&text).unwrap();
        assert_eq!(spec.name, "three");
        assert_eq!(spec.hosts.len(), 4);
        assert_eq!(spec.switches[0].name, "s1");
        assert_eq!(spec.links.len(), 4);
        assert_eq!(spec.links[3].rate_bps, Some(10_000_000));
        assert_eq!(spec.links[3].buffer_bytes, None);
    }

    #[test]
    fn unknown_host_in_link_names_its_line() {
        let e = err(THREE);
        assert_eq!(e.line, Some(25), "{e}");
        assert!(e.message.contains("unknown host \"h2x\""), "{e}");
        assert!(e.message.contains("hosts: h1, h2, r; switches: s1"), "{e}");
        assert_eq!(
            e.clone().with_file("x.toml").to_string(),
            format!("x.toml:25: {}", e.message)
        );
    }

    #[test]
    fn duplicate_names() {
        let e = err("[lab]\nname = \"d\"\n[[host]]\nname = \"a\"\n[[switch]]\nname = \"a\"\n");
        assert_eq!(e.line, Some(6));
        assert_eq!(e.message, "duplicate name \"a\" (first defined on line 4)");
        let e = err("[lab]\nname = \"d\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n[[link]]\na = \"b\"\nb = \"a\"\n");
        assert_eq!(e.line, Some(11));
        assert!(e.message.contains("already linked on line 8"), "{e}");
    }

    #[test]
    fn bad_values() {
        let base = "[lab]\nname = \"d\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n";
        let e = err(&format!("{base}rate = \"10Q\"\n"));
        assert_eq!(e.line, Some(10));
        assert!(e.message.starts_with("rate: invalid rate '10Q'"), "{e}");
        let e = err(&format!("{base}rate = \"max\"\n"));
        assert!(e.message.contains("'max' is not a limit"), "{e}");
        let e = err(&format!("{base}buffer = \"64KiB\"\n"));
        assert!(e.message.contains("only meaningful with a rate"), "{e}");
        let e = err(&format!("{base}rate = \"1M\"\nbuffer = 100\n"));
        assert_eq!(e.line, Some(11));
        assert!(e.message.contains("less than one full frame"), "{e}");
        let e = err(&format!("{base}rate = \"1M\"\ncolour = \"red\"\n"));
        assert_eq!(e.line, Some(11));
        assert!(e.message.contains("unknown field `colour`"), "{e}");
        let e = err(&format!("{base}delay = \"soon\"\n"));
        assert!(e.message.starts_with("delay: invalid duration"), "{e}");
        let ok = LabSpec::parse(&format!(
            "{base}rate = 10_000_000\nbuffer = \"64KiB\"\nburst = \"3KiB\"\ndelay = \"5ms\"\n"
        ))
        .unwrap();
        let l = &ok.links[0];
        assert_eq!(
            (l.rate_bps, l.buffer_bytes, l.burst_bytes, l.delay_ns),
            (Some(10_000_000), Some(65536), Some(3072), Some(5_000_000))
        );
        let e = ok.check_kernel(|k| k != "netem").unwrap_err();
        assert_eq!(e.line, Some(8));
        assert!(e.message.contains("no netem qdisc"), "{e}");
        ok.check_kernel(|_| true).unwrap();
    }

    #[test]
    fn bad_names_and_shapes() {
        let e = err("[lab]\nname = \"a-b\"\n[[host]]\nname = \"a\"\n");
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("letters, digits and '_'"), "{e}");
        let e = err("[lab]\nname = \"x\"\n[[host]]\nname = \"thirteen_char\"\n");
        assert!(e.message.contains("1 to 12 characters"), "{e}");
        let e = err("[lab]\nname = \"x\"\n");
        assert_eq!(e.to_string(), "no [[host]]: a lab needs hosts");
        let e = err("[[host]]\nname = \"a\"\n");
        assert!(e.message.contains("missing [lab]"), "{e}");
        let e = err("[lab]\nname = \"x\"\n[[host]]\nname = \"a\"\n[[switch]]\nname = \"s\"\n[[switch]]\nname = \"t\"\n[[link]]\na = \"s\"\nb = \"t\"\n");
        assert!(e.message.contains("both switches"), "{e}");
        let e =
            err("[lab]\nname = \"x\"\n[[host]]\nname = \"a\"\n[[link]]\na = \"a\"\nb = \"a\"\n");
        assert!(e.message.contains("linked to itself"), "{e}");
        let e = err("[lab]\nname = \"x\"\n[[host]\n");
        assert_eq!(e.line, Some(3));
    }
}
