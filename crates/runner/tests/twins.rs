//! Every lab in examples/lab with a network file of the same base name in examples/sim (its
//! twin, for `flowlab run --sim`) describes the same links: the same nodes joined, and on
//! each link the same rate, delay, ATM PHY and encapsulation, losses and jitter, the same
//! scheduler where the lab's link has one (its classes' meters, the policers before the
//! port, included), and where it has VCs by DSCP, the twin's classes
//! queued as its VCs are (apart or sharing one buffer, as many packets each). So an
//! experiment run on both compares the emulator (or tbf) with the simulator, not two
//! different networks.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use flowlab_link::atm::AtmSpec;
use flowlab_link::diffserv::{SchedKind, SchedSpec};
use flowlab_link::impair::ImpairConfig;
use flowlab_link::loss::LossModel;
use flowlab_netns::lab::{LabSpec, LinkSpec};
use flowlab_sim::{NetworkLink, SimNetwork};

/// A plain veth in a lab is a link at least this fast in its twin (docs/simulation.md).
const VETH_BPS: u64 = 10_000_000_000;
/// The seeds' testbeds (issue 14): each must have a twin.
const SEED_LABS: &[&str] = &["transatlantic", "aquila-atm", "aquila-ip", "bagnet-loop"];

fn examples(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(dir)
}

/// What both files must agree on for one link.
#[derive(Debug, PartialEq)]
struct Facts {
    /// None: as fast as a veth.
    rate_bps: Option<u64>,
    delay_ns: u64,
    phy: Option<String>,
    encap: Option<String>,
    /// The impairments' loss model and jitter.
    loss: String,
    jitter_ns: u64,
}

fn lab_facts(l: &LinkSpec) -> Facts {
    let Some(e) = &l.emulate else {
        return Facts {
            rate_bps: l.rate_bps,
            delay_ns: l.delay_ns.unwrap_or(0),
            phy: None,
            encap: None,
            loss: loss_of(None),
            jitter_ns: 0,
        };
    };
    let atm = e.atm.as_ref().map(|a| &a.port);
    let cell_rate = atm.map(|p| p.line.cell_bit_rate().round() as u64);
    Facts {
        rate_bps: e.ip.as_ref().map(|ip| ip.rate_bps).or(cell_rate),
        delay_ns: e.delay_ns(),
        phy: atm.map(|p| p.phy.clone()),
        encap: atm.map(|p| format!("{:?}", p.encap)),
        loss: loss_of(e.impair.as_ref()),
        jitter_ns: e.impair.as_ref().map_or(0, |i| i.jitter_ns),
    }
}

fn loss_of(impair: Option<&ImpairConfig>) -> String {
    format!("{:?}", impair.map_or(&LossModel::None, |i| &i.loss))
}

fn sim_facts(l: &NetworkLink) -> Facts {
    Facts {
        rate_bps: (l.atm.is_some() || l.rate_bps < VETH_BPS).then_some(l.rate_bps),
        delay_ns: l.delay_ns,
        phy: l.atm.map(|p| p.phy.clone()),
        encap: l.atm.map(|p| format!("{:?}", p.encap)),
        loss: loss_of(l.impair),
        jitter_ns: l.impair.map_or(0, |i| i.jitter_ns),
    }
}

/// Queues are compared in packets of this many bytes (a lab's VC buffers count cells).
const MTU: usize = 1500;

/// How a link's VCs (the lab's) or classes (the twin's) hold their backlog, in MTU-sized
/// packets: one buffer for all, or one apart for each (its DSCPs, highest priority first).
#[derive(Debug, PartialEq)]
enum Queues {
    Shared(usize),
    Apart(Vec<(Vec<u8>, usize)>),
}

fn sorted(dscps: &[u8]) -> Vec<u8> {
    let mut d = dscps.to_vec();
    d.sort_unstable();
    d
}

/// A lab ATM link's VCs, if it has several: apart when every VC's share of the port fits
/// beside the others'.
fn lab_queues(atm: &AtmSpec) -> Option<Queues> {
    let port = &atm.port;
    let packets = |cells: usize| cells / port.cells_of(MTU);
    let share = port.vc_limits.buffer_cells.unwrap_or(port.buffer_cells);
    if atm.vcs.len() < 2 {
        return None;
    }
    if share * atm.vcs.len() > port.buffer_cells {
        return Some(Queues::Shared(packets(port.buffer_cells)));
    }
    let mut vcs: Vec<_> = atm.vcs.iter().collect();
    vcs.sort_by_key(|v| v.service.priority());
    let each = packets(share);
    Some(Queues::Apart(
        vcs.iter().map(|v| (sorted(&v.dscps), each)).collect(),
    ))
}

/// A twin's classes, in its scheduler's order (strict priority: first served first).
fn twin_queues(sched: &SchedSpec) -> Queues {
    let packets = |c: &flowlab_link::diffserv::ClassSpec| {
        (0..=1_000_000)
            .find(|&n| !c.limit.admits(n, (n * MTU) as u64, MTU as u32))
            .unwrap_or(usize::MAX)
    };
    match sched.kind {
        SchedKind::Fifo => Queues::Shared(packets(&sched.classes[0])),
        _ => Queues::Apart(
            sched
                .classes
                .iter()
                .map(|c| (sorted(&c.dscps), packets(c)))
                .collect(),
        ),
    }
}

/// Every difference between the lab and its twin, one line each.
fn differences(lab: &LabSpec, net: &SimNetwork) -> Vec<String> {
    let mut out = Vec::new();
    let links = net.links();
    let nodes: BTreeSet<&str> = links.iter().flat_map(|l| [l.a, l.b]).collect();
    for h in lab.hosts.iter().chain(&lab.switches) {
        if !nodes.contains(h.name.as_str()) {
            out.push(format!("{} is on no link of the network", h.name));
        }
    }
    if links.len() != lab.links.len() {
        out.push(format!(
            "{} links, the lab {}",
            links.len(),
            lab.links.len()
        ));
    }
    for l in &lab.links {
        let ends = |s: &NetworkLink| (s.a, s.b) == (&l.a, &l.b) || (s.b, s.a) == (&l.a, &l.b);
        let Some(s) = links.iter().find(|s| ends(s)) else {
            out.push(format!("{}-{}: no such link in the network", l.a, l.b));
            continue;
        };
        let (mine, twin) = (lab_facts(l), sim_facts(s));
        if mine != twin {
            out.push(format!("{}-{}: lab {mine:?}, network {twin:?}", l.a, l.b));
        }
        let ip = l.emulate.as_ref().and_then(|e| e.ip.as_ref());
        if ip.is_some_and(|ip| &ip.sched != s.sched) {
            out.push(format!("{}-{}: the schedulers differ", l.a, l.b));
        }
        let atm = l.emulate.as_ref().and_then(|e| e.atm.as_ref());
        if let Some(vcs) = atm.and_then(lab_queues) {
            let classes = twin_queues(s.sched);
            if vcs != classes {
                let (a, b) = (&l.a, &l.b);
                out.push(format!(
                    "{a}-{b}: lab VCs {vcs:?}, network classes {classes:?}"
                ));
            }
        }
    }
    out
}

#[test]
fn every_lab_and_its_twin_describe_the_same_links() {
    let mut checked = Vec::new();
    for entry in std::fs::read_dir(examples("lab")).unwrap() {
        let path = entry.unwrap().path();
        let twin = examples("sim").join(path.file_name().unwrap());
        if !twin.exists() {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lab = LabSpec::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let text = std::fs::read_to_string(&twin).unwrap();
        let net = SimNetwork::load(&text).unwrap_or_else(|e| panic!("{}: {e}", twin.display()));
        let diffs = differences(&lab, &net);
        assert!(diffs.is_empty(), "{}: {diffs:#?}", path.display());
        checked.push(path.file_stem().unwrap().to_string_lossy().into_owned());
    }
    for seed in SEED_LABS {
        assert!(
            checked.iter().any(|c| c == seed),
            "{seed}: no twin ({checked:?})"
        );
    }
}

/// The differences between a lab of two hosts joined by a link emulating `emulate` and a
/// network of two routers joined by a link with `keys`.
fn two_node_differences(emulate: &str, keys: &str) -> Vec<String> {
    let lab = LabSpec::parse(&format!(
        "[lab]\nname = \"t\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
         [[link]]\na = \"a\"\nb = \"b\"\nemulate = {{ {emulate} }}\n"
    ))
    .unwrap();
    let net = SimNetwork::load(&format!(
        "[network]\n[[node]]\nname = \"a\"\nkind = \"ip-router\"\n[[node]]\nname = \"b\"\n\
         kind = \"ip-router\"\n[[link]]\nfrom = \"b\"\nto = \"a\"\n{keys}"
    ))
    .unwrap();
    differences(&lab, &net)
}

#[test]
fn a_twin_that_disagrees_is_caught() {
    let pvc = r#"phy = "OC-3c", encap = "vc-mux", rate = "6M", delay = "95ms""#;
    let same = "phy = \"OC-3c\"\nencap = \"vc-mux\"\nrate = \"6M\"\ndelay = \"95ms\"\n";
    let radio = r#"rate = "20M", delay = "15ms", loss = "2%", loss_burst = 4"#;
    let radio_twin = "rate = \"20M\"\ndelay = \"15ms\"\nloss = \"2%\"\nloss_burst = 4\n";
    assert_eq!(two_node_differences(pvc, same), Vec::<String>::new());
    assert_eq!(
        two_node_differences(radio, radio_twin),
        Vec::<String>::new()
    );
    let cases = [
        (pvc, same.replace("6M", "7M")),
        (pvc, same.replace("95ms", "90ms")),
        (pvc, same.replace("vc-mux", "llc-snap")),
        (pvc, same.replace("OC-3c", "OC-12c")),
        (pvc, "rate = \"6M\"\ndelay = \"95ms\"\n".to_string()),
        (radio, radio_twin.replace("2%", "3%")),
        (radio, radio_twin.replace("loss_burst = 4\n", "")),
        (radio, format!("{radio_twin}jitter = \"1ms\"\n")),
    ];
    for (emulate, keys) in cases {
        let d = two_node_differences(emulate, &keys);
        assert_eq!(d.len(), 1, "{keys}: {d:?}");
        assert!(d[0].starts_with("a-b: lab Facts"), "{d:?}");
    }
}

#[test]
fn a_twin_whose_classes_are_not_queued_as_the_lab_vcs_is_caught() {
    let vcs = r#"vcs = [{ dscp = "ef", service = "cbr" }, { service = "ubr" }]"#;
    let apart = format!(r#"phy = "E1", buffer_cells = 4000, vc_buffer_cells = 2000, {vcs}"#);
    let twin = "phy = \"E1\"\nscheduler = \"priority\"\nclasses = [\
                { name = \"premium\", dscp = [\"ef\"], buffer_packets = 62 },\
                { name = \"rest\", buffer_packets = 62, default = true }]\n";
    assert_eq!(two_node_differences(&apart, twin), Vec::<String>::new());
    let cases = [
        // One buffer for both VCs, as many cells as the twin's two queues' packets.
        format!(r#"phy = "E1", buffer_cells = 4000, {vcs}"#),
        // Shares that together overbook the port.
        format!(r#"phy = "E1", buffer_cells = 3000, vc_buffer_cells = 2000, {vcs}"#),
        // Half the twin's queue each.
        format!(r#"phy = "E1", buffer_cells = 4000, vc_buffer_cells = 1000, {vcs}"#),
        // The premium VC served after the rest.
        apart
            .replace("\"cbr\"", "\"ubr\"")
            .replace("\"ubr\" }]", "\"cbr\" }]"),
    ];
    for emulate in cases {
        let d = two_node_differences(&emulate, twin);
        assert_eq!(d.len(), 1, "{emulate}: {d:?}");
        assert!(d[0].starts_with("a-b: lab VCs"), "{d:?}");
    }
}

#[test]
fn a_twin_whose_policers_differ_is_caught() {
    let classes = |meter: &str| {
        format!(
            r#"scheduler = "pq-wfq", classes = [{{ name = "ef", dscp = "ef", priority = true }}, {{ name = "af", dscp = "af11", weight = 10{meter} }}, {{ name = "be", default = true }}]"#
        )
    };
    let policed = r#", meter_rate = "100k", meter_burst = "10kB""#;
    let lab = format!(r#"phy = "E1", {}"#, classes(policed));
    let twin = |meter: &str| {
        format!(
            "phy = \"E1\"\n{}\n",
            classes(meter).replace(", classes", "\nclasses")
        )
    };
    assert_eq!(
        two_node_differences(&lab, &twin(policed)),
        Vec::<String>::new()
    );
    let cases = [
        String::new(),
        policed.replace("100k", "200k"),
        policed.replace("10kB", "20kB"),
        format!(r#"{policed}, red = "af13""#),
        format!(r#"{policed}, meter = "srtcm""#),
    ];
    for meter in cases {
        let d = two_node_differences(&lab, &twin(&meter));
        assert_eq!(d, ["a-b: the schedulers differ"], "{meter}");
    }
}

/// The seeds' experiments (file, lab) address each host as the lab numbers it, so they run
/// on the real lab too (with `--lab`, the lab's agents are used whatever the file says).
#[test]
fn the_seed_experiments_name_their_labs_addresses() {
    let pairs = [
        ("transatlantic", "transatlantic"),
        ("aquila-e1", "aquila-atm"),
        ("aquila-e1", "aquila-ip"),
        ("bagnet-loop", "bagnet-loop"),
    ];
    for (experiment, lab) in pairs {
        let text = std::fs::read_to_string(examples("lab").join(format!("{lab}.toml"))).unwrap();
        let plan = flowlab_netns::lab::plan::Plan::new(&LabSpec::parse(&text).unwrap()).unwrap();
        let file = examples("experiments").join(format!("{experiment}.toml"));
        let e = flowlab_experiment::load(&std::fs::read_to_string(file).unwrap()).unwrap();
        let steps = flowlab_runner::experiment::steps(&e, &Default::default());
        for f in steps.iter().flat_map(|s| &s.flows) {
            for (host, agent) in [(&f.from, &f.client_agent), (&f.to, &f.server_agent)] {
                let address = &plan.node(host).unwrap().addresses()[0];
                assert_eq!(
                    agent,
                    &format!("{address}:9470"),
                    "{experiment} on {lab}: {host}"
                );
            }
        }
    }
}
