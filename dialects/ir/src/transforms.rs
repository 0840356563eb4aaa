//! Dialect-independent passes: `symbol-dce` and `canonicalize`.

use crate::attributes::Attribute;
use crate::diag::Diagnostic;
use crate::ir::{Operation, ValueId};
use crate::pass::{Pass, PassInfo, PassOptions};
use crate::registry::{Registry, Trait};
use std::collections::HashSet;

/// Removes private symbols (`sym_visibility = "private"`) that nothing references.
pub static SYMBOL_DCE: PassInfo = PassInfo {
    name: "symbol-dce",
    summary: "Remove private symbols that are never referenced",
    options: &[],
    target: None,
    create: |_: &PassOptions| Ok(Box::new(SymbolDce)),
};

struct SymbolDce;

fn collect_refs(a: &Attribute, out: &mut HashSet<String>) {
    match a {
        Attribute::SymbolRef(p) => {
            out.extend(p.iter().cloned());
        }
        Attribute::Array(items) => items.iter().for_each(|x| collect_refs(x, out)),
        Attribute::Dict(d) => d.values().for_each(|x| collect_refs(x, out)),
        _ => {}
    }
}

impl Pass for SymbolDce {
    fn run(&self, module: &mut Operation, registry: &Registry) -> Result<(), Diagnostic> {
        loop {
            let mut refs = HashSet::new();
            module.walk(&mut |op| op.attrs.values().for_each(|a| collect_refs(a, &mut refs)));
            let mut removed = false;
            module.walk_mut(&mut |op| {
                let is_table = registry
                    .lookup(&op.name)
                    .is_some_and(|r| r.def.has_trait(Trait::SymbolTable));
                if !is_table {
                    return;
                }
                for region in &mut op.regions {
                    for block in &mut region.blocks {
                        let before = block.ops.len();
                        block.ops.retain(|o| {
                            let private = o.attr("sym_visibility").and_then(|a| a.as_str())
                                == Some("private");
                            !(private && o.symbol_name().is_some_and(|n| !refs.contains(n)))
                        });
                        removed |= block.ops.len() != before;
                    }
                }
            });
            if !removed {
                return Ok(());
            }
        }
    }
}

/// Removes side-effect-free ops whose results are unused, until nothing changes.
pub static CANONICALIZE: PassInfo = PassInfo {
    name: "canonicalize",
    summary: "Remove unused side-effect-free operations",
    options: &[],
    target: None,
    create: |_: &PassOptions| Ok(Box::new(Canonicalize)),
};

struct Canonicalize;

impl Pass for Canonicalize {
    fn run(&self, module: &mut Operation, registry: &Registry) -> Result<(), Diagnostic> {
        loop {
            let mut used: HashSet<ValueId> = HashSet::new();
            module.walk(&mut |op| used.extend(op.operands.iter().map(|v| v.id)));
            let mut removed = false;
            module.walk_mut(&mut |op| {
                for region in &mut op.regions {
                    for block in &mut region.blocks {
                        let before = block.ops.len();
                        block.ops.retain(|o| {
                            let pure = registry
                                .lookup(&o.name)
                                .is_some_and(|r| r.def.has_trait(Trait::Pure));
                            !(pure
                                && !o.results.is_empty()
                                && o.results.iter().all(|r| !used.contains(&r.id)))
                        });
                        removed |= block.ops.len() != before;
                    }
                }
            });
            if !removed {
                return Ok(());
            }
        }
    }
}
