//! Point-to-multipoint VCs in scenarios: the root's cells cross the shared link once and the
//! switch copies them to each leaf, which gets every cell not lost on its own branch.

use flowlab_sim::{load, run, RunReport};

/// One-cell datagrams (32 IP bytes) from a through switch s to b, and copied at s to c (and
/// d); each link loses cells as given.
fn tree(extra_leaves: &str, losses: [&str; 3]) -> String {
    let [trunk, to_b, to_c] = losses;
    format!(
        r#"
[sim]
duration = "5s"
[[node]]
name = "a"
kind = "host"
[[node]]
name = "s"
kind = "atm-switch"
[[node]]
name = "b"
kind = "host"
[[node]]
name = "c"
kind = "host"
[[node]]
name = "d"
kind = "host"
[[node]]
name = "r"
kind = "ip-router"
[[link]]
from = "a"
to = "s"
phy = "OC-3c"
cell_loss = {trunk}
[[link]]
from = "s"
to = "b"
phy = "OC-3c"
cell_loss = {to_b}
[[link]]
from = "s"
to = "c"
phy = "OC-3c"
cell_loss = {to_c}
[[link]]
from = "s"
to = "d"
phy = "OC-3c"
[[link]]
from = "a"
to = "r"
rate = "10M"
[[flow]]
name = "f"
from = "a"
to = "b"
rate = "1M"
size = 32
leaves = [{extra_leaves}]
"#
    )
}

fn lost_on(r: &RunReport, port: &str) -> u64 {
    r.ports
        .iter()
        .find(|p| p.name == port)
        .map_or(0, |p| p.cells_lost_on_line)
}

#[test]
fn each_leaf_gets_every_cell_not_lost_on_its_branch() {
    let s = load(&tree("\"c\", \"d\"", ["0.02", "0.01", "0.05"])).unwrap();
    let r = run(&s, None).runs.remove(0);
    let names: Vec<&str> = r.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f", "f>c", "f>d"]);
    let sent = r.flows[0].sender.packets_sent;
    assert!(sent > 19_000, "{sent}");
    let trunk = lost_on(&r, "a->s");
    // One cell a packet: a leaf misses exactly the cells its trunk and its branch lost.
    for (f, branch) in r.flows.iter().zip(["s->b", "s->c", "s->d"]) {
        assert_eq!(f.sender.packets_sent, sent, "{}", f.name);
        let got = f.receiver.packets.received + f.in_flight_at_end;
        assert_eq!(got, sent - trunk - lost_on(&r, branch), "{}", f.name);
    }
    assert!(lost_on(&r, "s->c") > 3 * lost_on(&r, "s->b"));
    // The shared link carried each cell once.
    let a_s = r.ports.iter().find(|p| p.name == "a->s").unwrap();
    assert_eq!(a_s.cells_out, sent);
}

#[test]
fn leaves_are_refused_where_cells_cannot_be_copied() {
    for (leaves, want) in [
        ("\"b\"", "is not another host"),
        ("\"s\"", "is not another host"),
        ("\"nowhere\"", "nowhere"),
        ("\"r\"", "is not another host"),
    ] {
        let e = load(&tree(leaves, ["0", "0", "0"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{leaves}: {e}");
    }
    let ping = tree("\"c\"", ["0", "0", "0"]).replace("rate = \"1M\"", "protocol = \"ping\"");
    let e = load(&ping).unwrap_err().to_string();
    assert!(e.contains("carries udp"), "{e}");
}
