//! Lab description files: TOML text → a validated [`LabSpec`], or a [`SpecError`] naming the
//! line.
//!
//! The file is read as a spanned tree (`flowlab-spanned`) so that checks made after parsing (an
//! unknown host in a link, a duplicate name, a bad rate) still point at the offending line.
//! Parsing needs neither root nor a kernel; whether the kernel can do what the file asks
//! (netem for `delay`) is checked separately by [`LabSpec::check_kernel`].

use std::collections::HashMap;

use flowlab_emu::CapturePath;
use flowlab_link::config::EmulateSpec;
use flowlab_spanned::{FileError, Item, Reader};

/// Longest lab, host or switch name: a node's interfaces are called `to-<peer>`, and
/// interface names have at most 15 bytes.
pub const MAX_NAME_LEN: usize = 12;
/// Most hosts and switches in one lab; each is a namespace, so keep a lab bounded.
pub const MAX_NODES: usize = 200;
/// Smallest tbf burst or buffer: one full Ethernet frame, or nothing ever passes.
pub const MIN_FRAME: u64 = 1514;

/// A lab file that failed to load: a message and, where known, the line it is about.
pub type SpecError = FileError;

const SECTIONS: &[&str] = &["lab", "host", "switch", "link"];
const LINK_KEYS: &[&str] = &["a", "b", "rate", "burst", "buffer", "delay", "emulate"];

/// A validated lab description.
#[derive(Debug, Clone, PartialEq)]
pub struct LabSpec {
    pub name: String,
    /// The file's text, kept for the emulator (which reads its links' models from it).
    pub source: String,
    pub hosts: Vec<NodeSpec>,
    pub switches: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
    /// How the emulator reads and writes its links' frames (`[lab] emulator_capture`).
    pub capture: CapturePath,
}

/// A `[[host]]` or `[[switch]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    /// Line of its `name`, for later messages.
    pub line: usize,
}

/// A `[[link]]` between two hosts, or a host and a switch (then `a` or `b` is the switch).
#[derive(Debug, Clone, PartialEq)]
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
    /// The link runs through the user-space emulator with these models (each direction
    /// alike) instead of tbf and netem.
    pub emulate: Option<EmulateSpec>,
    pub line: usize,
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

/// `[[host]]` or `[[switch]]` tables (`what`), their names checked and recorded in `seen`.
fn read_nodes(
    doc: &Reader,
    what: &str,
    seen: &mut HashMap<String, usize>,
) -> Result<Vec<NodeSpec>, SpecError> {
    let mut out = Vec::new();
    for n in doc.tables(what)? {
        n.only(&["name"])?;
        let line = n.required("name")?.line();
        let name = n.required_string("name")?.to_string();
        check_name(&name, what, line)?;
        if let Some(first) = seen.insert(name.clone(), line) {
            return Err(SpecError::at(
                line,
                format!("duplicate name {name:?} (first defined on line {first})"),
            ));
        }
        out.push(NodeSpec { name, line });
    }
    Ok(out)
}

/// A `[[link]]`: its ends known nodes (not two switches), its tbf and netem settings.
fn read_link(l: &Reader, hosts: &[NodeSpec], switches: &[NodeSpec]) -> Result<LinkSpec, SpecError> {
    l.only(LINK_KEYS)?;
    let line = l.required("a")?.line();
    let (a, b) = (l.required_string("a")?, l.required_string("b")?);
    let names = |list: &[NodeSpec]| {
        list.iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let is = |list: &[NodeSpec], n: &str| list.iter().any(|x| x.name == n);
    for end in ["a", "b"] {
        let name = l.required_string(end)?;
        if !is(hosts, name) && !is(switches, name) {
            let mut m = format!("link: unknown host {name:?} (hosts: {}", names(hosts));
            if !switches.is_empty() {
                m += &format!("; switches: {}", names(switches));
            }
            m.push(')');
            return Err(l.required(end)?.error(m));
        }
    }
    if a == b {
        return Err(SpecError::at(line, format!("link: {a:?} linked to itself")));
    }
    if is(switches, a) && is(switches, b) {
        return Err(SpecError::at(
            line,
            format!(
                "link: {a:?} and {b:?} are both switches; join their hosts to one switch instead"
            ),
        ));
    }
    // Field errors start with the key alone: `rate: invalid rate '10Q'`.
    let f = l.named("");
    let unlimited = "'max' is not a limit; leave rate out for an unlimited link";
    let rate_bps = f.bit_rate("rate", unlimited)?;
    let bytes = |key: &str| -> Result<Option<u64>, SpecError> {
        let Some(n) = f.bytes(key)? else {
            return Ok(None);
        };
        let item: &Item = l.required(key)?;
        if rate_bps.is_none() {
            let m =
                format!("{key}: only meaningful with a rate (it sizes the link's token bucket)");
            return Err(item.error(m));
        }
        if n < MIN_FRAME {
            let m = format!("{key}: {n} B is less than one full frame ({MIN_FRAME} B)");
            return Err(item.error(m));
        }
        Ok(Some(n))
    };
    let delay_ns = match f.duration_ns("delay")? {
        Some(d) if d == 0 || d / 1_000_000_000 > 60 => {
            return Err(l
                .required("delay")?
                .error("delay: must be above 0 and at most 60s"))
        }
        d => d,
    };
    Ok(LinkSpec {
        a: a.to_string(),
        b: b.to_string(),
        rate_bps,
        burst_bytes: bytes("burst")?,
        buffer_bytes: bytes("buffer")?,
        delay_ns,
        emulate: read_emulate(l)?,
        line,
    })
}

/// A link's `emulate` table: the emulator replaces tbf and netem on that link, so their
/// keys may not sit beside it.
fn read_emulate(l: &Reader) -> Result<Option<EmulateSpec>, SpecError> {
    let Some(item) = l.get("emulate") else {
        return Ok(None);
    };
    if let Some(key) = ["rate", "burst", "buffer", "delay"]
        .into_iter()
        .find(|k| l.get(k).is_some())
    {
        let m = format!("{key}: an emulated link takes its {key} inside `emulate`");
        return Err(l.required(key)?.error(m));
    }
    let e = Reader::of(item, "emulate")?;
    flowlab_link::config::read(&e).map(Some)
}

impl LabSpec {
    /// Parses and validates a lab file's text.
    pub fn parse(text: &str) -> Result<LabSpec, SpecError> {
        let root = flowlab_spanned::parse(text)?;
        let doc = Reader::of(&root, "")?;
        doc.only_sections(SECTIONS)?;
        let lab = doc
            .get("lab")
            .ok_or_else(|| SpecError::new(None, "missing [lab] with name = \"...\""))?;
        let lab = Reader::of(lab, "lab")?;
        lab.only(&["name", "description", "emulator_capture"])?;
        let name = lab.required_string("name")?.to_string();
        check_name(&name, "lab", lab.required("name")?.line())?;
        lab.string("description")?; // free text for people reading the file
        let capture = match (lab.get("emulator_capture"), lab.string("emulator_capture")?) {
            (Some(item), Some(name)) => name
                .parse()
                .map_err(|e| lab.error(item, "emulator_capture", e))?,
            _ => CapturePath::default(),
        };

        // Hosts and switches share one namespace of names (and of network namespaces).
        let mut seen: HashMap<String, usize> = HashMap::new();
        let hosts = read_nodes(&doc, "host", &mut seen)?;
        let switches = read_nodes(&doc, "switch", &mut seen)?;
        if hosts.is_empty() {
            return Err(SpecError::new(None, "no [[host]]: a lab needs hosts"));
        }
        if hosts.len() + switches.len() > MAX_NODES {
            return Err(SpecError::new(
                None,
                format!("at most {MAX_NODES} hosts and switches in one lab"),
            ));
        }
        let mut links = Vec::new();
        let mut pairs: HashMap<(String, String), usize> = HashMap::new();
        for l in doc.tables("link")? {
            let link = read_link(&l.named("link"), &hosts, &switches)?;
            let (a, b) = (&link.a, &link.b);
            let key = if a < b {
                (a.clone(), b.clone())
            } else {
                (b.clone(), a.clone())
            };
            if let Some(first) = pairs.insert(key, link.line) {
                return Err(SpecError::at(
                    link.line,
                    format!("link: {a:?} and {b:?} are already linked on line {first}"),
                ));
            }
            links.push(link);
        }
        Ok(LabSpec {
            name,
            source: text.to_string(),
            hosts,
            switches,
            links,
            capture,
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
        assert!(e.message.contains("unknown key 'colour'"), "{e}");
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
