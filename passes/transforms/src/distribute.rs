//! `distribute{axis=i}`: loop distribution (fission; Kennedy & Allen, *Optimizing Compilers
//! for Modern Architectures*, 2001, section 5.4). The loop over `i`, with the loops perfectly
//! nested inside it, becomes one loop nest per *piece* of the innermost body, in the body's
//! order. The body is cut at every point that no SSA value crosses, so a piece only passes
//! data to a later one through a buffer.
//!
//! Every loop then runs its own iteration order: after distributing the tensor-parallel MLP
//! (all-gather GEMM, activation into a rank-local temp, GEMM reduce-scatter), `shift` can start
//! the first nest with the rank's own rows (no wait for data) and the second with a peer's
//! (`offset=1`, so every partial result travels while the next one is computed). The loops
//! share their axis; a pass that names it picks one with `nth=` (shift) or is refused.
//!
//! Refused, with a located error:
//! - there is no loop over `i`, or several;
//! - the body is one piece (every statement feeds the next through values);
//! - a buffer that one piece writes (store or reduce) and another accesses is not accessed
//!   identically by all of them, or its index list leaves out a loop of the nest. Then iteration
//!   t of one piece could touch what another iteration of another piece touches, and running
//!   all of one piece first could reverse that dependence. Likewise when an index could give two
//!   iterations the same tile: each index that names a loop of the nest must be that loop's axis
//!   or `(axis + c) mod extent` with `c` constants and loops outside the nest (what `shift`
//!   writes). With identical one-to-one accesses that index every loop, iteration t of every
//!   piece touches the same tile and no other iteration does.
//!
//! Buffers that the pieces only reduce into, all with the same reduction, pass nothing between
//! them (the reductions commute), so they are not checked.

use crate::util::*;
use mercury_commir::deps;
use mercury_commir::kernel_pass;
use mercury_commir::ops::{AccessOp, ForOp};
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::{IndexExpr, Kernel, ReduceKind};
use mercury_ir::{Diagnostic, Location, Operation, ValueId};
use std::collections::{BTreeMap, HashSet};

kernel_pass! {
    /// The options of `distribute`.
    pub struct Distribute = "distribute", "Split a loop nest into one nest per independent piece of its body (loop fission)", {
        axis: String => "the outermost loop of the nest to split",
    }
}

/// One access of a piece: buffer, index list, whether it writes, the reduction if it is one,
/// where it is.
struct Access {
    buffer: String,
    indices: Vec<IndexExpr>,
    writes: bool,
    reduction: Option<ReduceKind>,
    loc: Location,
}

/// Values an op (with everything nested in it) defines and uses.
fn defs_uses(op: &Operation, defs: &mut HashSet<ValueId>, uses: &mut HashSet<ValueId>) {
    op.walk(&mut |o| {
        defs.extend(o.results.iter().map(|v| v.id));
        uses.extend(o.operands.iter().map(|v| v.id));
    });
}

/// The accesses of `ops` and everything nested in them.
fn accesses(ops: &[Operation]) -> Vec<Access> {
    let mut out = Vec::new();
    for op in ops {
        op.walk(&mut |o| {
            if let Some(a) = AccessOp::cast(o) {
                out.push(Access {
                    buffer: a.buffer().unwrap_or_default(),
                    indices: a.indices().unwrap_or_default(),
                    writes: !matches!(a, AccessOp::Load(_)),
                    reduction: match &a {
                        AccessOp::Reduce(r) => r.kind(),
                        _ => None,
                    },
                    loc: o.loc.clone(),
                });
            }
        });
    }
    out
}

/// Where the body is cut: the start of every piece but the first (no value defined before the
/// cut is used after it).
fn cuts(body: &[Operation]) -> Vec<usize> {
    let sets: Vec<(HashSet<ValueId>, HashSet<ValueId>)> = body
        .iter()
        .map(|op| {
            let (mut d, mut u) = (HashSet::new(), HashSet::new());
            defs_uses(op, &mut d, &mut u);
            (d, u)
        })
        .collect();
    (1..body.len())
        .filter(|&c| {
            let defined: HashSet<ValueId> = sets[..c].iter().flat_map(|s| s.0.clone()).collect();
            sets[c..].iter().all(|s| s.1.is_disjoint(&defined))
        })
        .collect()
}

/// The body (ops) of the innermost loop of the perfect nest rooted at `op`, and the axes of
/// the nest, outermost first.
fn nest_body<'a>(op: &'a Operation, axes: &mut Vec<String>) -> &'a [Operation] {
    axes.push(ForOp::cast(op).and_then(|f| f.axis()).unwrap_or_default());
    let body = &op.regions[0].blocks[0].ops;
    match body.as_slice() {
        [inner] if ForOp::cast(inner).is_some() => nest_body(inner, axes),
        _ => body,
    }
}

/// A copy of the perfect nest rooted at `op` with `body` as its innermost body.
fn rebuild(op: &Operation, body: Vec<Operation>) -> Operation {
    let mut copy = op.clone();
    let inner = copy.body_mut(0);
    match inner.as_mut_slice() {
        [only] if ForOp::cast(&*only).is_some() => {
            let nested = rebuild(only, body);
            *only = nested;
        }
        _ => *inner = body,
    }
    copy
}

/// The body holding the loop over `axis`, and the loop's position in it.
fn parent_of<'a>(
    ops: &'a mut Vec<Operation>,
    axis: &str,
) -> Option<(&'a mut Vec<Operation>, usize)> {
    let here = ops
        .iter()
        .position(|o| ForOp::cast(o).and_then(|f| f.axis()).as_deref() == Some(axis));
    if let Some(i) = here {
        return Some((ops, i));
    }
    for op in ops.iter_mut() {
        if ForOp::cast(&*op).is_some() {
            if let Some(found) = parent_of(op.body_mut(0), axis) {
                return Some(found);
            }
        }
    }
    None
}

/// Whether index `e` takes distinct values for distinct values of the nest's loop it names,
/// whatever the loops outside the nest are: it names no loop of the nest, or it is a loop's
/// axis `@x`, or `(@x + c) mod E` with E at least the extent of x and c a sum of constants and
/// axes of loops outside the nest (what `shift` writes): [`deps::determines`] with the axes
/// outside the nest fixed.
fn one_to_one(e: &IndexExpr, nest: &[String], m: &Kernel) -> bool {
    let in_nest = |a: &str| nest.iter().any(|n| n == a);
    let (looped, fixed): (Vec<&str>, Vec<&str>) = e.axes().into_iter().partition(|a| in_nest(a));
    match looped.as_slice() {
        [] => true,
        [x] => deps::determines(e, x, &fixed, m),
        _ => false,
    }
}

/// Checks that splitting into `pieces` keeps every dependence through a buffer (module doc).
fn check_buffers(pieces: &[&[Operation]], nest: &[String], m: &Kernel) -> Result<(), Diagnostic> {
    let per_piece: Vec<Vec<Access>> = pieces.iter().map(|p| accesses(p)).collect();
    let mut by_buffer: BTreeMap<&str, Vec<(usize, &Access)>> = BTreeMap::new();
    for (i, acc) in per_piece.iter().enumerate() {
        for a in acc {
            by_buffer.entry(a.buffer.as_str()).or_default().push((i, a));
        }
    }
    for (buffer, all) in by_buffer {
        let shared = all.iter().any(|(i, _)| *i != all[0].0);
        let written = all.iter().any(|(_, a)| a.writes);
        // Reductions of one kind only: they commute, nothing passes between the pieces.
        let first_kind = all[0].1.reduction;
        let commuting = first_kind.is_some() && all.iter().all(|(_, a)| a.reduction == first_kind);
        if !shared || !written || commuting {
            continue;
        }
        let first = all[0].1;
        if let Some((_, a)) = all.iter().find(|(_, a)| a.indices != first.indices) {
            return Err(Diagnostic::error(
                a.loc.clone(),
                format!("distribute: '@{buffer}' is written by one piece of the loop body and accessed by another, but not at the same tile (a dependence between iterations could be reversed)"),
            )
            .with_note(first.loc.clone(), "the other access is here"));
        }
        if let Some(e) = first.indices.iter().find(|e| !one_to_one(e, nest, m)) {
            return Err(Diagnostic::error(
                first.loc.clone(),
                format!("distribute: '@{buffer}' passes data between pieces of the loop body, but its index '{}' may give two iterations of the nest the same tile (an index must be a loop's axis, or (axis + c) mod its extent with c loops outside the nest or constants)", e.to_custom()),
            ));
        }
        let indexed: HashSet<&str> = first.indices.iter().flat_map(|e| e.axes()).collect();
        if let Some(missing) = nest.iter().find(|a| !indexed.contains(a.as_str())) {
            return Err(Diagnostic::error(
                first.loc.clone(),
                format!("distribute: '@{buffer}' passes data between pieces of the loop body, but its index list leaves out the loop over '@{missing}' (every iteration would touch the same tile)"),
            ));
        }
    }
    Ok(())
}

impl KernelPass for Distribute {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        if let [first, second, ..] = loops_over(m, &self.axis).as_slice() {
            return Err(Diagnostic::error(
                second.loc.clone(),
                format!(
                    "distribute: '@{}' is already distributed (several loops iterate it); distribute one of the loops inside them instead",
                    self.axis
                ),
            )
            .with_note(first.loc.clone(), "the first loop is here"));
        }
        // At most one loop iterates the axis now (refused above otherwise).
        let lp = loops_over(m, &self.axis).first().copied().ok_or_else(|| {
            err_at(
                &m.loc,
                format!("distribute: there is no loop over '@{}'", self.axis),
            )
        })?;
        let loc = lp.loc.clone();
        let k = kernel_mut(module, &m.name);
        let (parent, at) = parent_of(k.body_mut(0), &self.axis).expect("loop");
        let mut nest = Vec::new();
        let body = nest_body(&parent[at], &mut nest);
        let cut = cuts(body);
        if cut.is_empty() {
            return Err(Diagnostic::error(
                loc,
                format!("distribute: the body of the loop over '@{}' is one piece (each statement uses a value of the one before); nothing to distribute", self.axis),
            ));
        }
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(cut.iter().copied())
            .chain(std::iter::once(body.len()))
            .collect();
        let pieces: Vec<&[Operation]> = bounds.windows(2).map(|w| &body[w[0]..w[1]]).collect();
        check_buffers(&pieces, &nest, m)?;
        let nests: Vec<Operation> = pieces
            .iter()
            .map(|p| rebuild(&parent[at], p.to_vec()))
            .collect();
        parent.splice(at..=at, nests);
        Ok(())
    }
}
