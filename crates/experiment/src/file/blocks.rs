//! `[plan]` and `[[plan.block]]`: serial and parallel blocks, names resolved into a tree.

use std::collections::{BTreeMap, BTreeSet};

use flowlab_spanned::{FileError, Reader, Value};

use super::{capped, read_name, Block, BlockKind, Item};
use crate::limits::{MAX_PLAN_ITEMS, MAX_REPEAT};

const BLOCK_KEYS: &[&str] = &["serial", "parallel", "repeat", "start"];

/// A block as written: its items are names or inline blocks, not yet resolved.
struct RawBlock {
    name: Option<String>,
    kind: BlockKind,
    items: Vec<RawItem>,
    repeat: u32,
    start_ns: u64,
    line: usize,
}

enum RawItem {
    /// A flow or block name, and its line.
    Name(String, usize),
    Inline(RawBlock),
}

/// What kind of block a table is: the plan, a named block, or an inline one.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Plan,
    Named,
    Inline,
}

fn read_block(t: &Reader, role: Role) -> Result<RawBlock, FileError> {
    let extra: &[&str] = match role {
        Role::Plan => &["block"],
        Role::Named => &["name"],
        Role::Inline => &[],
    };
    t.only(&[BLOCK_KEYS, extra].concat())?;
    let name = match role {
        Role::Named => Some(read_name(t, "name")?),
        Role::Plan | Role::Inline => None,
    };
    let what = match &name {
        Some(n) => format!("block '{n}'"),
        None => t.what().to_string(),
    };
    let (kind, list) = match (t.get("serial"), t.get("parallel")) {
        (Some(v), None) => (BlockKind::Serial, v),
        (None, Some(v)) => (BlockKind::Parallel, v),
        (Some(v), Some(_)) => {
            return Err(v.error(format!("{what}: give serial or parallel, not both")))
        }
        (None, None) => {
            return Err(FileError::at(
                t.line(),
                format!("{what}: needs serial = [...] or parallel = [...]"),
            ))
        }
    };
    let arr = list
        .as_array()
        .ok_or_else(|| list.error(format!("{what}: expected an array of flow or block names")))?;
    if arr.is_empty() {
        return Err(list.error(format!("{what}: the block is empty")));
    }
    let mut items = Vec::new();
    for v in arr {
        items.push(match v.value() {
            Value::String(s) => RawItem::Name(s.clone(), v.line()),
            Value::Table(_) => {
                RawItem::Inline(read_block(&Reader::of(v, what.as_str())?, Role::Inline)?)
            }
            _ => {
                return Err(v.error(format!(
                "{what}: an item is a flow or block name or an inline {{ serial = [...] }}, not {}",
                v.type_name()
            )))
            }
        });
    }
    Ok(RawBlock {
        name,
        kind,
        items,
        repeat: capped(t, "repeat", MAX_REPEAT)?.unwrap_or(1),
        start_ns: t.duration_ns("start")?.unwrap_or(0),
        line: t.line(),
    })
}

/// The plan's block tree; `flows` are the names of the file's flows.
pub(super) fn read_plan(plan: &Reader, flows: &BTreeSet<&str>) -> Result<Block, FileError> {
    let root = read_block(plan, Role::Plan)?;
    let mut named: BTreeMap<String, RawBlock> = BTreeMap::new();
    for bt in plan.tables("block")? {
        let b = read_block(&bt.named("plan.block"), Role::Named)?;
        let n = b.name.clone().unwrap_or_default();
        if flows.contains(n.as_str()) {
            return Err(FileError::at(
                b.line,
                format!("block '{n}' has the name of a flow"),
            ));
        }
        if named.contains_key(&n) {
            return Err(FileError::at(
                b.line,
                format!("block '{n}' is defined twice"),
            ));
        }
        named.insert(n, b);
    }
    let mut walk = Walk {
        stack: Vec::new(),
        items: 0,
    };
    resolve(&root, &named, flows, &mut walk)
}

/// State of [`resolve`]: the named blocks being resolved, so a block reached again through
/// itself is a cycle, and the items made so far, so copies cannot multiply without bound.
struct Walk {
    stack: Vec<String>,
    items: u64,
}

/// Resolves names into flows and copies of named blocks.
fn resolve(
    b: &RawBlock,
    named: &BTreeMap<String, RawBlock>,
    flows: &BTreeSet<&str>,
    walk: &mut Walk,
) -> Result<Block, FileError> {
    walk.items += 1 + b.items.len() as u64;
    if walk.items > MAX_PLAN_ITEMS {
        return Err(FileError::at(
            b.line,
            format!(
                "the plan has more than {MAX_PLAN_ITEMS} items once named blocks are copied \
                 where they are used, the limit"
            ),
        ));
    }
    let mut items = Vec::new();
    for it in &b.items {
        match it {
            RawItem::Inline(inner) => items.push(Item::Block(resolve(inner, named, flows, walk)?)),
            RawItem::Name(n, _) if flows.contains(n.as_str()) => items.push(Item::Flow(n.clone())),
            RawItem::Name(n, line) => {
                let Some(nb) = named.get(n) else {
                    return Err(FileError::at(
                        *line,
                        format!("'{n}' is neither a flow nor a block"),
                    ));
                };
                if let Some(from) = walk.stack.iter().position(|x| x == n) {
                    let path = [&walk.stack[from..], std::slice::from_ref(n)].concat();
                    return Err(FileError::at(
                        *line,
                        format!("blocks form a cycle: {}", path.join(" -> ")),
                    ));
                }
                walk.stack.push(n.clone());
                items.push(Item::Block(resolve(nb, named, flows, walk)?));
                walk.stack.pop();
            }
        }
    }
    Ok(Block {
        name: b.name.clone(),
        kind: b.kind,
        items,
        repeat: b.repeat,
        start_ns: b.start_ns,
        line: b.line,
    })
}
