//! The emulator process of a lab: `lab up` copies the lab file into the lab's state
//! directory and starts `flowlab lab emulate DIR` inside the emulator's namespace; it reads
//! the emulated links back from that copy and runs them until SIGINT or SIGTERM (`lab
//! down`). It only reads and writes frames on its own namespace's interfaces, so stopping
//! or losing it leaves every interface as `up` configured.

use std::io::Write;
use std::path::Path;

use flowlab_emu::{EmuLink, EmuReport};

use super::plan::{NodeKind, Plan};
use super::spec::LabSpec;
use super::{io_err, LabError};

/// The lab file's copy in the state directory.
pub const LAB_FILE: &str = "lab.toml";
/// The emulator's report (JSON, rewritten every second) in the state directory.
pub const REPORT_FILE: &str = "emulator.json";
/// What the emulator prints once its interfaces are open.
pub const READY: &str = "emulating";

/// The emulated links of `spec`, with their interfaces in the emulator's namespace.
pub fn emulated_links(spec: &LabSpec, plan: &Plan) -> Vec<EmuLink> {
    spec.links
        .iter()
        .zip(&plan.links)
        .filter_map(|(l, p)| {
            let (node, ia, ib) = p.via?;
            let emu = plan
                .nodes
                .get(node)
                .filter(|n| n.kind == NodeKind::Emulator)?;
            Some(EmuLink {
                name: format!("{}-{}", l.a, l.b),
                a: l.a.clone(),
                b: l.b.clone(),
                iface_a: emu.ifaces.get(ia)?.dev.clone(),
                iface_b: emu.ifaces.get(ib)?.dev.clone(),
                spec: l.emulate.clone()?,
            })
        })
        .collect()
}

/// Runs the emulator of the lab whose state directory is `dir` (from inside the emulator's
/// namespace) until SIGINT or SIGTERM; prints [`READY`] and the links to `out` once the
/// interfaces are open.
pub fn emulate(dir: &Path, out: &mut dyn Write) -> Result<EmuReport, LabError> {
    let path = dir.join(LAB_FILE);
    let text =
        std::fs::read_to_string(&path).map_err(io_err(format!("reading {}", path.display())))?;
    let spec = LabSpec::parse(&text).map_err(|e| e.with_file(&path.display().to_string()))?;
    let links = emulated_links(&spec, &Plan::new(&spec)?);
    if links.is_empty() {
        return Err(LabError::Refused(format!(
            "lab {:?} has no emulated link",
            spec.name
        )));
    }
    let stop = flowlab_sys::signal::interrupt_flag();
    let emulator =
        flowlab_emu::open(&links, spec.capture).map_err(io_err("opening the emulated links"))?;
    if let Some(why) = &emulator.fallback {
        let _ = writeln!(out, "notice: {why}");
    }
    let names: Vec<&str> = links.iter().map(|l| l.name.as_str()).collect();
    let _ = writeln!(out, "{READY} {} ({})", names.join(", "), emulator.capture);
    let _ = out.flush();
    emulator
        .run(stop, &dir.join(REPORT_FILE))
        .map_err(io_err("writing the emulator's report"))
}
