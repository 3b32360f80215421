//! Point-to-multipoint VCs (`leaves = [...]` on a UDP flow over ATM): the flow's cells cross
//! the shared links once and an ATM switch copies them onto each leaf's branch, as
//! `flowlab_atm::replicate::PointToMultipoint` does. Each extra leaf is reported as a flow of
//! its own, `NAME>LEAF`, with the sender's figures of the root.

use flowlab_spanned::{FileError, Reader};

use super::{find_node, shortest_path, FlowSpec, Net, NodeKind, Protocol, ScenarioError};

/// The flows of the extra leaves of flow `root` (at index `root_index`), each a copy of it
/// to its leaf, branching at the last switch its path shares with the root's.
pub(super) fn leaves(
    f: &Reader,
    root: &FlowSpec,
    root_index: usize,
    net: &Net,
) -> Result<Vec<FlowSpec>, ScenarioError> {
    let Some(item) = f.get("leaves") else {
        return Ok(Vec::new());
    };
    let udp = matches!(&root.protocol, Protocol::Udp(s) if !s.echo);
    if !udp {
        return Err(f.error(item, "leaves", "a point-to-multipoint VC carries udp"));
    }
    let list = item
        .as_array()
        .ok_or_else(|| f.error(item, "leaves", "expected an array of host names"))?;
    let mut out: Vec<FlowSpec> = Vec::new();
    for leaf in list {
        let name = leaf
            .as_str()
            .ok_or_else(|| leaf.error("leaves: expected a host name"))?;
        let node = find_node(leaf, name, &net.nodes)?;
        let taken =
            root.path.last() == Some(&node) || out.iter().any(|l| l.path.last() == Some(&node));
        if net.nodes[node].kind != NodeKind::Host || taken {
            return Err(leaf.error(format!("leaves: {name:?} is not another host")));
        }
        let from = root.path[0];
        let path = shortest_path(&net.nodes, &net.links, from, node)
            .ok_or_else(|| leaf.error(format!("leaves: no path to {name}")))?;
        let branch = branch_node(&root.path, &path, net)
            .map_err(|m| FileError::at(leaf.line(), format!("leaves: {name}: {m}")))?;
        out.push(FlowSpec {
            name: format!("{}>{name}", root.name),
            path,
            replica_of: Some((root_index, branch)),
            police: None,
            shape: false,
            ..root.clone()
        });
    }
    Ok(out)
}

/// The last node the two paths share: it must be an ATM switch, and every link of the leaf's
/// path ATM, since the copies are cells.
fn branch_node(root: &[usize], leaf: &[usize], net: &Net) -> Result<usize, String> {
    let shared = root.iter().zip(leaf).take_while(|(a, b)| a == b).count();
    let branch = leaf[shared - 1];
    if net.nodes[branch].kind != NodeKind::AtmSwitch {
        let at = &net.nodes[branch].name;
        return Err(format!("the paths part at {at}, not at an atm-switch"));
    }
    for w in leaf.windows(2) {
        let l = net.link_between(w[0], w[1]).map(|l| &net.links[l]);
        if l.is_some_and(|l| l.atm.is_none()) {
            return Err("every link to a leaf must be ATM".into());
        }
    }
    Ok(branch)
}
