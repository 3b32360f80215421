//! Lab layout and command sequences, checked without root through a fake [`Runner`].

use super::*;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

type Responder = dyn Fn(&str) -> Result<String, NetnsError> + Send + Sync;

/// Records every command line; answers through `respond`.
#[derive(Clone)]
struct Fake {
    log: Arc<Mutex<Vec<String>>>,
    respond: Arc<Responder>,
}

impl Fake {
    fn with(f: impl Fn(&str) -> Result<String, NetnsError> + Send + Sync + 'static) -> Self {
        Fake {
            log: Arc::default(),
            respond: Arc::new(f),
        }
    }
    fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

impl Runner for Fake {
    fn run(&self, program: &str, args: &[&str]) -> Result<String, NetnsError> {
        let line = crate::command_line(program, args);
        self.log.lock().unwrap().push(line.clone());
        (self.respond)(&line)
    }
}

fn example(name: &str) -> LabSpec {
    let path = format!("{}/../../examples/lab/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(&path).unwrap();
    LabSpec::parse(&text)
        .map_err(|e| e.with_file(&path))
        .unwrap()
}

fn scratch_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("flowlab-lab-test-{}-{tag}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

#[test]
fn examples_parse_and_plan() {
    for f in ["three-hosts.toml", "five-pairs.toml", "bottleneck.toml"] {
        let spec = example(f);
        let plan = Plan::new(&spec).unwrap();
        // Every host has a route to every subnet it is not on (all examples are connected).
        let subnets: std::collections::BTreeSet<_> = plan
            .nodes
            .iter()
            .flat_map(|n| n.ifaces.iter())
            .filter_map(|i| {
                i.addr4
                    .map(|a| (u32::from(a) >> (32 - i.prefix4), i.prefix4))
            })
            .collect();
        for n in plan.nodes.iter().filter(|n| n.kind == NodeKind::Host) {
            let own: std::collections::BTreeSet<_> = n
                .ifaces
                .iter()
                .filter_map(|i| {
                    i.addr4
                        .map(|a| (u32::from(a) >> (32 - i.prefix4), i.prefix4))
                })
                .collect();
            assert_eq!(n.routes.len() + own.len(), subnets.len(), "{f}: {}", n.name);
        }
    }
}

#[test]
fn three_hosts_layout() {
    let plan = Plan::new(&example("three-hosts.toml")).unwrap();
    let node = |n: &str| plan.node(n).unwrap();
    assert_eq!(node("h1").ns, "fl-three-h1");
    assert_eq!(node("s1").kind, NodeKind::Switch);
    assert!(node("r").router && !node("h1").router);
    assert_eq!(node("h1").addresses(), ["10.77.64.1", "fd77:0:0:1000::1"]);
    assert_eq!(
        node("r").ifaces[0].addr4,
        Some(Ipv4Addr::new(10, 77, 64, 4))
    );
    let r_sink = &node("r").ifaces[1];
    assert_eq!(
        (r_sink.dev.as_str(), r_sink.addr4, r_sink.prefix4),
        ("to-sink", Some(Ipv4Addr::new(10, 77, 0, 1)), 30)
    );
    assert_eq!(node("sink").addresses(), ["10.77.0.2", "fd77::2"]);
    // The switch's ports have no addresses; the bottleneck is shaped at both ends.
    assert!(node("s1").ifaces.iter().all(|i| i.addr4.is_none()));
    let sh = r_sink.shaping.unwrap();
    assert_eq!(
        (sh.rate_bps, sh.buffer_bytes, sh.burst_bytes),
        (Some(10_000_000), Some(65536), 3028)
    );
    assert_eq!(node("sink").ifaces[0].shaping, Some(sh));
    assert_eq!(node("h1").ifaces[0].shaping, None);
    // h1 reaches the sink's /30 through r; the sink reaches the switch's /24 through r.
    let rt = &node("h1").routes;
    assert_eq!(rt.len(), 1);
    assert_eq!(
        (rt[0].dest4, rt[0].prefix4, rt[0].via4, rt[0].dev.as_str()),
        (
            Ipv4Addr::new(10, 77, 0, 0),
            30,
            Ipv4Addr::new(10, 77, 64, 4),
            "to-s1"
        )
    );
    assert_eq!(rt[0].via6.to_string(), "fd77:0:0:1000::4");
    let rt = &node("sink").routes;
    assert_eq!(
        (rt[0].dest4, rt[0].via4, rt[0].hops),
        (Ipv4Addr::new(10, 77, 64, 0), Ipv4Addr::new(10, 77, 0, 1), 2)
    );
    assert!(node("r").routes.is_empty());
}

#[test]
fn five_pairs_routes_go_through_the_chain() {
    let plan = Plan::new(&example("five-pairs.toml")).unwrap();
    let src1 = plan.node("src1").unwrap();
    let dst1 = plan.node("dst1").unwrap();
    let r1 = plan.node("r1").unwrap();
    let dst1_net = dst1.ifaces[0].addr4.unwrap();
    let route = src1
        .routes
        .iter()
        .find(|r| u32::from(r.dest4) == u32::from(dst1_net) & !3)
        .unwrap();
    let r1_src1 = r1.ifaces.iter().find(|i| i.peer == "src1").unwrap();
    assert_eq!(route.via4, r1_src1.addr4.unwrap(), "src1 → r1");
    assert_eq!(route.hops, 4); // r1, r2, r3, dst1's link
    let to_dst1 = r1.routes.iter().find(|r| r.dest4 == route.dest4).unwrap();
    assert_eq!(to_dst1.dev, "to-r2");
}

#[test]
fn tc_commands_for_each_shaping() {
    let tbf = Shaping {
        rate_bps: Some(10_000_000),
        burst_bytes: 3028,
        buffer_bytes: None,
        delay_ns: None,
    };
    let line = |s: Shaping| {
        s.tc_commands("fl-x-a", "to-b")
            .iter()
            .map(|c| c.join(" "))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        line(tbf),
        ["-n fl-x-a qdisc replace dev to-b root tbf rate 10000000bit burst 3028 latency 50ms"]
    );
    let both = Shaping {
        buffer_bytes: Some(65536),
        delay_ns: Some(5_000_000),
        ..tbf
    };
    assert_eq!(
        line(both),
        [
            "-n fl-x-a qdisc replace dev to-b root handle 1: netem delay 5000us",
            "-n fl-x-a qdisc add dev to-b parent 1:1 handle 10: tbf rate 10000000bit burst 3028 limit 65536",
        ]
    );
    assert_eq!(Shaping::default_burst(1_000_000_000), 125_000);
    assert_eq!(Shaping::default_burst(1_000_000), 3028);
}

#[test]
fn up_runs_the_plan_then_down_removes_it() {
    let created = Arc::new(Mutex::new(Vec::<String>::new()));
    let fake = Fake::with({
        let created = created.clone();
        move |l| {
            let mut c = created.lock().unwrap();
            if let Some(ns) = l.strip_prefix("ip netns add ") {
                c.push(ns.to_string());
            } else if let Some(ns) = l.strip_prefix("ip netns del ") {
                c.retain(|n| n != ns);
            } else if l == "ip netns list" {
                return Ok(c.iter().map(|n| format!("{n}\n")).collect());
            } else if l == "ip netns pids fl-three-sink" && !c.iter().any(|n| n == "killed") {
                return Ok("4242\n".into());
            } else if l.starts_with("kill ") {
                c.push("killed".into());
            }
            Ok(String::new())
        }
    });
    let dir = scratch_dir("up");
    let spec = example("three-hosts.toml");
    let state = up_with(&fake, &spec, &UpOptions::new(dir.clone())).unwrap();
    assert!(state.complete);
    let saved = LabState::load(&dir, "three").unwrap().unwrap();
    assert_eq!(saved, state);
    let log = fake.log();
    for expected in [
        "ip netns add fl-three-h1",
        "ip netns add fl-three-s1",
        "ip netns exec fl-three-r sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1 net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0",
        "ip -n fl-three-s1 link add br0 type bridge",
        "ip -n fl-three-h1 link add to-s1 type veth peer name to-h1 netns fl-three-s1",
        "ip -n fl-three-s1 link set to-h1 master br0",
        "ip -n fl-three-h1 addr add 10.77.64.1/24 dev to-s1",
        "ip -n fl-three-h1 addr add fd77:0:0:1000::1/64 dev to-s1 nodad",
        "tc -n fl-three-r qdisc replace dev to-sink root tbf rate 10000000bit burst 3028 limit 65536",
        "tc -n fl-three-sink qdisc replace dev to-r root tbf rate 10000000bit burst 3028 limit 65536",
        "ip -n fl-three-h1 route add 10.77.0.0/30 via 10.77.64.4 dev to-s1",
        "ip -n fl-three-h1 -6 route add fd77::/64 via fd77:0:0:1000::4 dev to-s1",
    ] {
        assert!(log.iter().any(|l| l == expected), "missing {expected}");
    }
    assert!(!log
        .iter()
        .any(|l| l.contains("sysctl") && l.contains("fl-three-h1")));

    // A second `up` of the same lab is refused, and changes nothing.
    let n = fake.log().len();
    let e = up_with(&fake, &spec, &UpOptions::new(dir.clone())).unwrap_err();
    assert!(
        e.to_string().contains("already up") && e.to_string().contains("lab down three"),
        "{e}"
    );
    assert!(fake.log()[n..].iter().all(|l| l == "ip netns list"));

    let report = down_with(&fake, Some("three"), &dir).unwrap();
    assert_eq!(report.labs, ["three"]);
    assert_eq!(report.namespaces.len(), 6);
    assert_eq!(report.processes, 1);
    assert!(fake.log().iter().any(|l| l == "kill -TERM 4242"));
    assert_eq!(*created.lock().unwrap(), ["killed"]);
    assert!(!dir.join("three").exists());
    let e = down_with(&fake, Some("three"), &dir).unwrap_err();
    assert!(e.to_string().starts_with("no lab \"three\""), "{e}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn failed_up_undoes_everything() {
    let created = Arc::new(Mutex::new(Vec::<String>::new()));
    let fake = Fake::with({
        let created = created.clone();
        move |l| {
            let mut c = created.lock().unwrap();
            if l.starts_with("tc ") {
                return Err(NetnsError::Command {
                    command: l.into(),
                    stderr: "Error: Specified qdisc kind is unknown.".into(),
                });
            }
            if let Some(ns) = l.strip_prefix("ip netns add ") {
                c.push(ns.to_string());
            } else if let Some(ns) = l.strip_prefix("ip netns del ") {
                c.retain(|n| n != ns);
            } else if l == "ip netns list" {
                return Ok(c.iter().map(|n| format!("{n}\n")).collect());
            }
            Ok(String::new())
        }
    });
    let dir = scratch_dir("fail");
    let e = up_with(
        &fake,
        &example("bottleneck.toml"),
        &UpOptions::new(dir.clone()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("qdisc kind is unknown"), "{e}");
    assert!(!e.to_string().contains('\n'));
    assert!(created.lock().unwrap().is_empty(), "namespaces left");
    assert!(!dir.join("bottleneck").exists());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn leftovers_without_state_are_found() {
    let fake = Fake::with(|l| match l {
        "ip netns list" => Ok("fl-old-a (id: 1)\nfl-old-b\nflt-1-2-a\nflb-a\nfl-x\n".into()),
        _ => Ok(String::new()),
    });
    let dir = scratch_dir("left");
    assert_eq!(known_labs(&fake, &dir).unwrap(), ["old"]);
    let st = status_with(&fake, &dir).unwrap();
    assert_eq!(st.len(), 1);
    assert!(st[0].problem.as_deref().unwrap().contains("without state"));
    let report = down_with(&fake, None, &dir).unwrap();
    assert_eq!(report.namespaces, ["fl-old-a", "fl-old-b"]);
    let log = fake.log();
    assert!(!log
        .iter()
        .any(|l| l.contains("del flt-") || l.contains("del flb-")));
    assert_eq!(find_node_with(&fake, &dir, None, "b").unwrap(), "fl-old-b");
    assert!(find_node_with(&fake, &dir, Some("new"), "b")
        .unwrap_err()
        .to_string()
        .contains("no lab \"new\""));
    let e = down_with(&fake, Some("../etc"), &dir).unwrap_err();
    assert!(e.to_string().contains("lab name"), "{e}");
}

#[test]
fn namespace_names() {
    assert_eq!(lab_of_ns("fl-three-h1"), Some("three"));
    assert_eq!(lab_of_ns("fl-three-with-dash"), Some("three"));
    assert_eq!(lab_of_ns("flt-1-2-a"), None);
    assert_eq!(lab_of_ns("fl-x"), None);
    let rows = [
        ["A".to_string(), "BB".into()],
        ["CCC".to_string(), "D".into()],
    ];
    assert_eq!(format_table(&rows), "A    BB\nCCC  D\n");
}

#[test]
fn emulated_links_go_through_the_emulators_namespace() {
    let spec = example("emulated.toml");
    assert!(spec.links.iter().all(|l| l.emulate.is_some()));
    let plan = Plan::new(&spec).unwrap();
    let emu = plan.nodes.last().unwrap();
    assert_eq!(
        (emu.kind, emu.ns.as_str()),
        (NodeKind::Emulator, "fl-emulated-_emu")
    );
    let devs: Vec<&str> = emu.ifaces.iter().map(|i| i.dev.as_str()).collect();
    assert_eq!(devs, ["e0a", "e0b", "e1a", "e1b"]);
    assert!(emu
        .ifaces
        .iter()
        .all(|i| i.addr4.is_none() && i.shaping.is_none()));
    let e = plan.nodes.len() - 1;
    assert_eq!(plan.links[1].via, Some((e, 2, 3)));
    // The hosts keep their addresses and routes as on a plain link.
    assert_eq!(
        plan.node("b").unwrap().ifaces[0].addr4,
        Some(Ipv4Addr::new(10, 77, 0, 6))
    );
    let links = emulate::emulated_links(&spec, &plan);
    let names: Vec<(&str, &str, &str)> = links
        .iter()
        .map(|l| (l.name.as_str(), l.iface_a.as_str(), l.iface_b.as_str()))
        .collect();
    assert_eq!(names, [("a-r", "e0a", "e0b"), ("r-b", "e1a", "e1b")]);
}

#[test]
fn an_emulated_link_is_two_veth_pairs_without_gso_and_no_qdisc() {
    let spec = LabSpec::parse(
        "[lab]\nname = \"em\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n\
         [[link]]\na = \"a\"\nb = \"b\"\nemulate = { delay = \"1ms\" }\n",
    )
    .unwrap();
    let fake = Fake::with(|_| Ok(String::new()));
    create(&fake, &Plan::new(&spec).unwrap()).unwrap();
    let log = fake.log().join("\n");
    for want in [
        "ip netns add fl-em-_emu",
        "ip -n fl-em-a link add to-b type veth peer name e0a netns fl-em-_emu",
        "ip -n fl-em-_emu link add e0b type veth peer name to-a netns fl-em-b",
        "ip -n fl-em-a link set dev to-b gso_max_segs 1",
        "ip -n fl-em-b link set dev to-a gso_max_segs 1",
        "net.ipv6.conf.all.disable_ipv6=1",
    ] {
        assert!(log.contains(want), "missing {want:?} in\n{log}");
    }
    assert!(!log.contains("tc "), "{log}");
}

#[test]
fn emulate_keys_are_checked_with_lines() {
    let text = |link: &str| {
        format!("[lab]\nname = \"em\"\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\n{link}\n")
    };
    for (link, want) in [
        (
            "rate = \"1M\"\nemulate = { delay = \"1ms\" }",
            "line 10: rate: an emulated link takes its rate inside `emulate`",
        ),
        ("emulate = { delay = \"1ms\", colour = 2 }", "colour"),
        (
            "emulate = { phy = \"E1\", epd = 5000 }",
            "below buffer_cells",
        ),
        ("emulate = 3", "emulate"),
    ] {
        let e = LabSpec::parse(&text(link)).unwrap_err().to_string();
        assert!(e.contains(want), "{link}: {e}");
    }
    // Emulated links need no qdisc from the kernel.
    let spec = LabSpec::parse(&text("emulate = { delay = \"5ms\" }")).unwrap();
    spec.check_kernel(|_| false).unwrap();
}

#[test]
fn the_emulators_capture_path_is_af_xdp_unless_the_lab_asks() {
    let text = |extra: &str| {
        format!("[lab]\nname = \"em\"\n{extra}\n[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\na = \"a\"\nb = \"b\"\nemulate = {{ delay = \"1ms\" }}\n")
    };
    let capture = |extra: &str| LabSpec::parse(&text(extra)).map(|s| s.capture);
    assert_eq!(capture(""), Ok(flowlab_emu::CapturePath::AfXdp));
    assert_eq!(
        capture("emulator_capture = \"af_packet\""),
        Ok(flowlab_emu::CapturePath::AfPacket)
    );
    let e = capture("emulator_capture = \"tun\"")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("line 3") && e.contains("unknown capture path \"tun\""),
        "{e}"
    );
}
