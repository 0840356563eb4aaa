//! Structural verification from op definitions, symbol tables, SSA dominance, and each op's
//! own verifier.

use crate::attributes::Attribute;
use crate::diag::{Diagnostic, Location};
use crate::ir::{Operation, ValueId};
use crate::registry::{AttrKind, OpDef, Registry, Trait, VerifyContext};
use std::collections::{HashMap, HashSet};

/// Verifies `op` and everything nested in it; returns the first error.
pub fn verify(registry: &Registry, op: &Operation) -> Result<(), Diagnostic> {
    let mut ctx = VerifyContext {
        registry,
        symbols: Vec::new(),
        parents: Vec::new(),
    };
    let mut defined = Scopes {
        visible: vec![HashSet::new()],
        hidden: Vec::new(),
        isolated: Vec::new(),
    };
    verify_op(op, &mut ctx, &mut defined)
}

/// The values an op may use: those of the enclosing blocks that dominate it (`visible`, one
/// set a block, innermost last), and those beyond an enclosing op isolated from above
/// (`hidden`: a use of one is refused as upstream refuses it).
struct Scopes {
    visible: Vec<HashSet<ValueId>>,
    hidden: Vec<HashSet<ValueId>>,
    /// The enclosing ops isolated from above, innermost last.
    isolated: Vec<Location>,
}

/// Checks that an attribute value has the shape its definition's kind requires.
pub fn check_attr_kind(kind: AttrKind, a: &Attribute) -> Result<(), String> {
    let ok = match kind {
        AttrKind::SymbolName | AttrKind::String => matches!(a, Attribute::String(_)),
        AttrKind::SymbolRef => matches!(a, Attribute::SymbolRef(_)),
        // The custom forms print an integer without its type, which reads back as i64 (MLIR's
        // default): another width would not survive the round trip, so it is refused here.
        AttrKind::Int => is_i64(a),
        AttrKind::Float => matches!(a, Attribute::Float { .. }),
        AttrKind::Bool => matches!(a, Attribute::Bool(_)),
        AttrKind::Unit => matches!(a, Attribute::Unit),
        AttrKind::Keyword(allowed) => {
            return match a {
                Attribute::String(s) if allowed.contains(&s.as_str()) => Ok(()),
                _ => Err(format!("must be one of {}", allowed.join(", "))),
            }
        }
        AttrKind::IntArray => a.as_array().is_some_and(|v| v.iter().all(is_i64)),
        AttrKind::SymbolArray => a
            .as_array()
            .is_some_and(|v| v.iter().all(|x| matches!(x, Attribute::SymbolRef(_)))),
        AttrKind::Type => matches!(a, Attribute::Type(_)),
        AttrKind::Any => true,
        AttrKind::Custom(c) => return (c.check)(a),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "has the wrong kind of value '{a}' (expected {})",
            kind_name(kind)
        ))
    }
}

/// An integer attribute of MLIR's default type, i64 (written `8` or `8 : i64`).
fn is_i64(a: &Attribute) -> bool {
    matches!(a, Attribute::Integer { ty, .. } if *ty == crate::Type::i(64))
}

fn kind_name(kind: AttrKind) -> &'static str {
    match kind {
        AttrKind::SymbolName => "a symbol name string",
        AttrKind::SymbolRef => "a symbol reference",
        AttrKind::Int => "an integer of type i64, written without a type or with ': i64'",
        AttrKind::Float => "a float",
        AttrKind::String => "a string",
        AttrKind::Bool => "a boolean",
        AttrKind::Unit => "a unit attribute",
        AttrKind::Keyword(_) => "a keyword",
        AttrKind::IntArray => "an array of i64 integers",
        AttrKind::SymbolArray => "an array of symbols",
        AttrKind::Type => "a type",
        AttrKind::Any => "any attribute",
        AttrKind::Custom(c) => c.name,
    }
}

fn verify_against_def(op: &Operation, def: &OpDef) -> Result<(), Diagnostic> {
    let err = |m: String| Diagnostic::error(op.loc.clone(), m);
    // The counts in upstream's words (OpDefinition.cpp's verifyZeroOperands, verifyNOperands,
    // verifyAtLeastNOperands and their result and region kin), so that upstream test files'
    // expected errors match; checked against mlir-opt-22.
    let count = |what: &str, want: usize, at_least: bool, got: usize| -> Option<String> {
        if at_least {
            return (got < want).then(|| {
                let found = if what == "operand" {
                    format!(", but found {got}")
                } else {
                    String::new()
                };
                format!("expected {want} or more {what}s{found}")
            });
        }
        if got == want {
            return None;
        }
        Some(match (what, want) {
            (_, 0) => format!("requires zero {what}s"),
            ("operand", 1) => "requires a single operand".to_string(),
            (_, 1) => format!("requires one {what}"),
            ("operand", _) => format!("expected {want} operands, but found {got}"),
            _ => format!("expected {want} {what}s"),
        })
    };
    let fixed = def.operands.iter().filter(|a| !a.variadic).count();
    let variadic = def.operands.iter().any(|a| a.variadic);
    let rfixed = def.results.iter().filter(|a| !a.variadic).count();
    let rvariadic = def.results.iter().any(|a| a.variadic);
    // In upstream's order of an op's traits: regions, results, operands.
    if let Some(m) = count("region", def.regions.len(), false, op.regions.len())
        .or_else(|| count("result", rfixed, rvariadic, op.results.len()))
        .or_else(|| count("operand", fixed, variadic, op.operands.len()))
    {
        return Err(err(format!("'{}' op {m}", op.name)));
    }
    // A block carries no location: a diagnostic about one points at its first op, if any.
    let at_block = |b: &crate::Block| b.ops.first().map_or(op.loc.clone(), |o| o.loc.clone());
    for (i, region) in op.regions.iter().enumerate() {
        if def.traits.contains(&Trait::SingleBlock) && region.blocks.len() > 1 {
            return Err(Diagnostic::error(
                at_block(&region.blocks[1]),
                format!(
                    "'{}' expects region #{i} to have 0 or 1 blocks, got {} (this is block #1)",
                    op.name,
                    region.blocks.len()
                ),
            ));
        }
        if def.traits.contains(&Trait::NoRegionArguments) {
            if let Some(b) = region.blocks.iter().find(|b| !b.args.is_empty()) {
                return Err(Diagnostic::error(
                    at_block(b),
                    format!("'{}' region #{i} should have no arguments", op.name),
                ));
            }
        }
    }
    if def.traits.contains(&Trait::SameOperandsAndResultType) {
        if let Some(first) = op.operands.first().or(op.results.first()) {
            if let Some(v) = op
                .operands
                .iter()
                .chain(&op.results)
                .find(|v| v.ty != first.ty)
            {
                return Err(err(format!(
                    "'{}' requires every operand and result to have the same type, got '{}' and '{}'",
                    op.name, first.ty, v.ty
                )));
            }
        }
    }
    for a in def.attrs {
        match op.attr(a.name) {
            None if !a.optional => {
                return Err(err(format!(
                    "'{}' op requires attribute '{}'",
                    op.name, a.name
                )))
            }
            None => {}
            Some(v) => check_attr_kind(a.kind, v)
                .map_err(|m| err(format!("'{}' attribute '{}' {m}", op.name, a.name)))?,
        }
    }
    Ok(())
}

fn verify_op<'a>(
    op: &'a Operation,
    ctx: &mut VerifyContext<'a>,
    defined: &mut Scopes,
) -> Result<(), Diagnostic> {
    for (i, v) in op.operands.iter().enumerate() {
        if defined.hidden.iter().any(|s| s.contains(&v.id)) {
            return Err(Diagnostic::error(
                op.loc.clone(),
                format!("'{}' op using value defined outside the region", op.name),
            )
            .with_note(
                defined
                    .isolated
                    .last()
                    .cloned()
                    .unwrap_or_else(|| op.loc.clone()),
                "required by region isolation constraints",
            ));
        }
        if !defined.visible.iter().any(|s| s.contains(&v.id)) {
            return Err(Diagnostic::error(
                op.loc.clone(),
                format!("operand #{i} does not dominate this use"),
            ));
        }
    }
    let reg = ctx.registry.lookup(&op.name).cloned();
    match &reg {
        Some(r) => {
            verify_against_def(op, &r.def)?;
            verify_symbol_parent(op, &r.def, ctx)?;
        }
        None => {
            let d = op.dialect();
            if !d.is_empty() && ctx.registry.dialect_registered(d) {
                return Err(Diagnostic::error(op.loc.clone(), format!("unregistered operation '{}' found in dialect ('{d}') that does not allow unknown operations", op.name)));
            }
            if !ctx.registry.allow_unregistered {
                return Err(Diagnostic::error(op.loc.clone(), format!("operation '{}' belongs to the unregistered dialect '{d}' (use --allow-unregistered-dialect)", op.name)));
            }
        }
    }
    let is_table = reg
        .as_ref()
        .is_some_and(|r| r.def.has_trait(Trait::SymbolTable));
    if is_table {
        let mut table: HashMap<String, &Operation> = HashMap::new();
        for child in op
            .regions
            .iter()
            .flat_map(|r| &r.blocks)
            .flat_map(|b| &b.ops)
        {
            // Every op with a string `sym_name` is a symbol of the table, registered or not,
            // as upstream's verifySymbolTable and SymbolTable count them.
            if let Some(name) = child.symbol_name() {
                if let Some(prev) = table.insert(name.to_string(), child) {
                    return Err(Diagnostic::error(
                        child.loc.clone(),
                        format!("redefinition of symbol named '{name}'"),
                    )
                    .with_note(prev.loc.clone(), "see existing symbol definition here"));
                }
            }
        }
        ctx.symbols.push(table);
    }
    if let Some(r) = &reg {
        if let Some(f) = r.def.verify {
            f(op, ctx)?;
        }
    }
    let isolated = reg
        .as_ref()
        .is_some_and(|r| r.def.has_trait(Trait::IsolatedFromAbove));
    ctx.parents.push(op);
    let saved = if isolated {
        let n = defined.hidden.len();
        let mut outer = std::mem::take(&mut defined.visible);
        defined.hidden.append(&mut outer);
        defined.isolated.push(op.loc.clone());
        Some(n)
    } else {
        None
    };
    let mut result = Ok(());
    'regions: for region in &op.regions {
        if let Err(e) = verify_blocks(op, reg.as_deref().map(|r| &r.def), region) {
            result = Err(e);
            break;
        }
        // Which values each block sees from the others: a graph region (an unregistered op's)
        // sees every value of the region, a block of a CFG region those of the blocks that
        // dominate it (an unreachable block: every value, as upstream).
        let graph = reg.is_none();
        let visible = visible_from_other_blocks(region, graph);
        for (bi, block) in region.blocks.iter().enumerate() {
            let mut scope: HashSet<ValueId> = block.args.iter().map(|a| a.id).collect();
            for &other in &visible[bi] {
                let b = &region.blocks[other];
                scope.extend(b.args.iter().map(|a| a.id));
                scope.extend(b.ops.iter().flat_map(|o| o.results.iter().map(|r| r.id)));
            }
            if graph {
                scope.extend(
                    block
                        .ops
                        .iter()
                        .flat_map(|o| o.results.iter().map(|r| r.id)),
                );
            }
            defined.visible.push(scope);
            for (i, child) in block.ops.iter().enumerate() {
                let terminator = ctx
                    .registry
                    .lookup(&child.name)
                    .is_some_and(|r| r.def.has_trait(Trait::Terminator));
                if terminator && i + 1 != block.ops.len() {
                    result = Err(Diagnostic::error(
                        child.loc.clone(),
                        format!(
                            "'{}' op must be the last operation in the parent block",
                            child.name
                        ),
                    ));
                }
                if result.is_ok() {
                    result = verify_op(child, ctx, defined);
                }
                if result.is_err() {
                    defined.visible.pop();
                    break 'regions;
                }
                let last = defined.visible.last_mut().expect("scope");
                last.extend(child.results.iter().map(|r| r.id));
            }
            defined.visible.pop();
        }
        // The terminators, once the ops are verified (as upstream's order reports them).
        if result.is_ok() {
            result = verify_terminators(reg.as_deref().map(|r| &r.def), region, ctx.registry);
        }
        if result.is_err() {
            break;
        }
    }
    if let Some(s) = saved {
        defined.visible = defined.hidden.split_off(s);
        defined.isolated.pop();
    }
    ctx.parents.pop();
    if is_table {
        ctx.symbols.pop();
    }
    result
}

/// A symbol's parent op, if registered, is a symbol table (upstream's `SymbolOpInterface`
/// verifier: a symbol inside an unregistered op is not checked, since that op may be a table;
/// an op whose symbol name is optional, `builtin.module`, is a symbol only when named).
fn verify_symbol_parent(
    op: &Operation,
    def: &OpDef,
    ctx: &VerifyContext,
) -> Result<(), Diagnostic> {
    if !def.has_trait(Trait::Symbol) || op.symbol_name().is_none() {
        return Ok(());
    }
    let parent_def = ctx.parent().and_then(|p| ctx.registry.lookup(&p.name));
    if parent_def.is_some_and(|p| !p.def.has_trait(Trait::SymbolTable)) {
        return Err(Diagnostic::error(
            op.loc.clone(),
            format!(
                "'{}' op symbol's parent must have the SymbolTable trait",
                op.name
            ),
        ));
    }
    Ok(())
}

/// Upstream's block rules for one region of `op` (`def`: its definition, if registered),
/// checked before its ops: no empty block, unless the region is a single block of an op that
/// needs no terminator (`NoTerminator`, an implicit terminator, or an unregistered op);
/// successors only on the last op of a block; no branch to the entry block.
fn verify_blocks(
    op: &Operation,
    def: Option<&OpDef>,
    region: &crate::ir::Region,
) -> Result<(), Diagnostic> {
    let no_terminator =
        def.is_none_or(|d| d.has_trait(Trait::NoTerminator) || d.implicit_terminator().is_some());
    let may_skip = region.blocks.len() == 1 && no_terminator;
    for block in &region.blocks {
        let Some(last) = block.ops.last() else {
            if may_skip {
                continue;
            }
            return Err(Diagnostic::error(
                op.loc.clone(),
                "empty block: expect at least a terminator",
            ));
        };
        for child in &block.ops[..block.ops.len() - 1] {
            if !child.successors.is_empty() {
                return Err(Diagnostic::error(
                    child.loc.clone(),
                    "operation with block successors must terminate its parent block",
                ));
            }
        }
        if last.successors.contains(&0) {
            return Err(Diagnostic::error(
                op.loc.clone(),
                "entry block of region may not have predecessors",
            ));
        }
    }
    Ok(())
}

/// Every block of a region ends in a terminator, unless the region is one block of an op
/// that needs none.
fn verify_terminators(
    def: Option<&OpDef>,
    region: &crate::ir::Region,
    registry: &Registry,
) -> Result<(), Diagnostic> {
    let no_terminator =
        def.is_none_or(|d| d.has_trait(Trait::NoTerminator) || d.implicit_terminator().is_some());
    let may_skip = region.blocks.len() == 1 && no_terminator;
    for block in &region.blocks {
        let Some(last) = block.ops.last() else {
            continue;
        };
        if !may_skip {
            let is_terminator = registry
                .lookup(&last.name)
                .is_none_or(|r| r.def.has_trait(Trait::Terminator));
            if !is_terminator {
                return Err(Diagnostic::error(
                    last.loc.clone(),
                    format!("block with no terminator, has '{}'", last.name),
                ));
            }
        }
    }
    Ok(())
}

/// For each block, the other blocks whose values it sees: every one in a graph region;
/// otherwise its strict dominators (every block, for a block the entry does not reach).
fn visible_from_other_blocks(region: &crate::ir::Region, graph: bool) -> Vec<Vec<usize>> {
    let n = region.blocks.len();
    if graph {
        return (0..n)
            .map(|b| (0..n).filter(|&o| o != b).collect())
            .collect();
    }
    if n <= 1 {
        return vec![Vec::new(); n];
    }
    let succ: Vec<Vec<usize>> = region
        .blocks
        .iter()
        .map(|b| {
            b.ops
                .last()
                .map(|o| o.successors.clone())
                .unwrap_or_default()
        })
        .collect();
    let mut preds = vec![Vec::new(); n];
    for (b, ss) in succ.iter().enumerate() {
        for &s in ss {
            if s < n {
                preds[s].push(b);
            }
        }
    }
    // Reachability from the entry.
    let mut reach = vec![false; n];
    let mut stack = vec![0];
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut reach[b], true) {
            continue;
        }
        stack.extend(succ[b].iter().copied().filter(|&s| s < n));
    }
    // Iterative dominator sets over the reachable blocks.
    let all: HashSet<usize> = (0..n).filter(|&b| reach[b]).collect();
    let mut dom: Vec<HashSet<usize>> = (0..n)
        .map(|b| {
            if b == 0 {
                HashSet::from([0])
            } else {
                all.clone()
            }
        })
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for b in 1..n {
            if !reach[b] {
                continue;
            }
            let mut new: Option<HashSet<usize>> = None;
            for &p in preds[b].iter().filter(|&&p| reach[p]) {
                new = Some(match new {
                    None => dom[p].clone(),
                    Some(acc) => acc.intersection(&dom[p]).copied().collect(),
                });
            }
            let mut new = new.unwrap_or_default();
            new.insert(b);
            if new != dom[b] {
                dom[b] = new;
                changed = true;
            }
        }
    }
    (0..n)
        .map(|b| {
            if reach[b] {
                dom[b].iter().copied().filter(|&d| d != b).collect()
            } else {
                (0..n).filter(|&o| o != b).collect()
            }
        })
        .collect()
}
