//! `tile{axis=i factor=F}`: splits axis `i` (extent E) into an outer axis of F iterations
//! and an inner axis of E/F, binds buffers to both, and adds a loop over the outer axis
//! (innermost in the current nest; an existing loop over `i` becomes two nested loops).

use crate::util::*;
use mercury_commir::kernel_pass;
use mercury_commir::ops::ForOp;
use mercury_commir::pass::{kernel_mut, KernelPass};
use mercury_commir::Kernel;
use mercury_commir::{DimBinding, IndexExpr};
use mercury_ir::{Diagnostic, Operation};

kernel_pass! {
    /// The options of `tile`.
    pub struct Tile = "tile", "Split an axis into outer x inner and loop over the outer part", {
        axis: String => "the axis to split",
        factor: usize => "iterations of the outer axis",
        outer: String = "" => "name of the outer axis (default <axis>_o)",
        inner: String = "" => "name of the inner axis (default <axis>_i)",
    }
}

impl Tile {
    /// The outer and inner axis names: as given, else fresh names from `<axis>_o` and
    /// `<axis>_i`.
    fn names(&self, m: &Kernel) -> (String, String) {
        let or = |n: &str, suffix: &str| {
            if n.is_empty() {
                fresh_name(m, &format!("{}{suffix}", self.axis))
            } else {
                n.to_string()
            }
        };
        let outer = or(&self.outer, "_o");
        let mut inner = or(&self.inner, "_i");
        if inner == outer && self.inner.is_empty() {
            inner = fresh_name(m, &format!("{inner}_i"));
        }
        (outer, inner)
    }
}

impl KernelPass for Tile {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        tile_kernel(kernel_mut(module, &m.name), m, self)
    }
}

fn tile_kernel(k: &mut Operation, m: &mercury_commir::Kernel, t: &Tile) -> Result<(), Diagnostic> {
    let existing = sole_loop(m, &t.axis, "tile")?;
    let (outer, inner) = t.names(m);
    let loc = k.loc.clone();
    let axis = m.axis(&t.axis).ok_or_else(|| {
        err_at(
            &loc,
            format!("tile: '@{}' is not an axis of '@{}'", t.axis, m.name),
        )
    })?;
    let aloc = axis.loc.clone();
    if t.factor == 0 || axis.extent % t.factor != 0 {
        return Err(Diagnostic::error(
            aloc,
            format!(
                "tile: factor {} does not divide the extent {} of '@{}'",
                t.factor, axis.extent, t.axis
            ),
        ));
    }
    let inner_extent = axis.extent / t.factor;
    if inner_extent < axis.min_block {
        return Err(Diagnostic::error(
            aloc,
            format!(
                "tile: blocks of {inner_extent} along '@{}' are below its minimum block {}",
                t.axis, axis.min_block
            ),
        ));
    }
    if outer == inner {
        return Err(Diagnostic::error(
            aloc,
            format!("tile: the outer and inner axes cannot both be named '@{outer}'"),
        ));
    }
    for (n, opt) in [(&outer, "outer"), (&inner, "inner")] {
        if name_taken(m, n) {
            return Err(Diagnostic::error(
                aloc,
                format!("tile: {opt}={n} names '@{n}', which is already a symbol of '@{}' (choose another name, or leave {opt}= out for a fresh one)", m.name),
            ));
        }
    }
    // Index expressions that do more than name the axis cannot be split.
    let mut bad = None;
    m.walk(&mut |s, _| {
        let acc = match s {
            mercury_commir::Stmt::Load { access, .. }
            | mercury_commir::Stmt::Reduce { access, .. }
            | mercury_commir::Stmt::Store { access, .. } => access,
            _ => return,
        };
        if acc
            .indices
            .iter()
            .any(|e| e.axes().contains(&t.axis.as_str()) && e.as_axis().is_none())
            && bad.is_none()
        {
            bad = Some(acc.loc.clone());
        }
    });
    if let Some(l) = bad {
        return Err(Diagnostic::error(
            l,
            format!(
                "tile: '@{}' is used in a compound index expression here (tile before shifting)",
                t.axis
            ),
        ));
    }
    // A tile of an axis bound after another in one dimension (the query heads `@hk * @g` of
    // grouped-query attention) is a contiguous box only when the axes before it are iterated
    // around the access (or span one position).
    let mut split = None;
    m.walk(&mut |s, loops| {
        let acc = match s {
            mercury_commir::Stmt::Load { access, .. }
            | mercury_commir::Stmt::Reduce { access, .. }
            | mercury_commir::Stmt::Store { access, .. } => access,
            _ => return,
        };
        let Some(buf) = m.buffer(&acc.buffer) else {
            return;
        };
        for (d, b) in buf.dims.iter().enumerate() {
            let DimBinding::Axes(ax) = b else { continue };
            let Some(p) = ax.iter().position(|x| *x == t.axis) else {
                continue;
            };
            for a in &ax[..p] {
                let whole =
                    m.axis(a).is_some_and(|x| x.extent > 1) && !loops.iter().any(|l| l.axis == *a);
                if whole && split.is_none() {
                    split = Some((acc.loc.clone(), buf.name.clone(), d, a.clone()));
                }
            }
        }
    });
    if let Some((l, b, d, a)) = split {
        let ext = m.axis(&a).map_or(0, |x| x.extent);
        return Err(Diagnostic::error(
            l,
            format!(
                "tile: cannot tile '@{}' while '@{a}' (extent {ext}) is a whole-range axis before it in dimension {d} of '@{b}': a tile of '@{}' would not be a contiguous block of that dimension (tile '@{a}' into a loop first, e.g. parallelize it, or join the two axes)",
                t.axis, t.axis
            ),
        ));
    }
    // An axis that two dimensions of one value cover (Q and K both bound to one sequence axis:
    // scores [@i, @i]) is the whole range in each of them; a loop over its blocks would pick the
    // same block for both, computing only the diagonal blocks of that value.
    if let Some((l, what)) = crossed_axis(m, &t.axis) {
        return Err(Diagnostic::error(
            l,
            format!(
                "tile: '@{}' covers two dimensions of {what}: a loop over its blocks would take the same block in both, only the diagonal blocks of the whole product (bind one side, e.g. the keys, to an axis of its own)",
                t.axis
            ),
        ));
    }
    // Without a loop over the axis, the new loop wraps the whole body: a reduction whose value
    // does not depend on the axis would be added once per iteration.
    if existing.is_none() {
        if let Some(l) = repeated_reduction(m, &t.axis) {
            return Err(Diagnostic::error(
                l,
                format!(
                    "tile: the loop over the {} blocks of '@{}' would enclose this reduction, whose value does not depend on '@{}': it would be added {} times (tile an axis every reduction's value uses, or write the independent part as its own kernel)",
                    t.factor, t.axis, t.axis, t.factor
                ),
            ));
        }
    }
    let kind = axis.kind;
    let body = k.body_mut(0);
    let pos = axis_position(body, &t.axis).expect("axis op");
    body.remove(pos);
    body.insert(
        pos,
        new_axis(
            &inner,
            inner_extent,
            kind,
            axis.min_block.min(inner_extent),
            &aloc,
        ),
    );
    body.insert(pos, new_axis(&outer, t.factor, kind, 1, &aloc));
    for mut op in buffers_mut(body) {
        let mut d = dims(&op);
        let mut changed = false;
        for b in d.iter_mut() {
            if let DimBinding::Axes(ax) = b {
                if let Some(p) = ax.iter().position(|x| *x == t.axis) {
                    ax.splice(p..=p, [outer.clone(), inner.clone()]);
                    changed = true;
                }
            }
        }
        if changed {
            op.set_dims(d);
        }
    }
    let axis_name = t.axis.clone();
    rewrite_indices(body, &mut vec![], &mut |ix| {
        let p = ix.iter().position(|e| e.as_axis() == Some(&axis_name))?;
        let mut ix = ix.to_vec();
        ix.splice(p..=p, [IndexExpr::axis(&outer), IndexExpr::axis(&inner)]);
        Some(ix)
    });
    // Loops: an existing loop over the axis becomes outer{inner{..}}, both at the loop's
    // location; otherwise a new loop over the outer axis wraps the innermost loop body, at the
    // axis's location.
    if let Some(f) = find_for_mut(body, &t.axis) {
        let inner_body = std::mem::take(f.body_mut(0));
        let floc = f.loc.clone();
        ForOp::cast(&mut *f).expect("loop").set_axis(outer.as_str());
        f.body_mut(0).push(new_for(&inner, inner_body, &floc));
    } else {
        // Reshards at the start and the end of the kernel stay outside the loops.
        let start = first_stmt(k);
        let body = k.body_mut(0);
        let lead = body[start..].iter().take_while(|o| is_reshard(o)).count();
        let trail = body[start + lead..]
            .iter()
            .rev()
            .take_while(|o| is_reshard(o))
            .count();
        let (from, to) = (start + lead, body.len() - trail);
        let mut target: &mut Vec<Operation> = body;
        let (mut from_at, mut to_at) = (from, to);
        while to_at == from_at + 1 && ForOp::cast(&target[from_at]).is_some() {
            target = target[from_at].body_mut(0);
            from_at = 0;
            to_at = target.len();
        }
        // Loop nests side by side (after `distribute`) each keep their own order; one loop
        // around them all would interleave them.
        if let Some(second) = target[from_at..to_at]
            .iter()
            .filter(|o| ForOp::cast(*o).is_some())
            .nth(1)
        {
            return Err(Diagnostic::error(
                second.loc.clone(),
                format!("tile: '@{}' has no loop, and the loop around the body would enclose several loop nests (as distribute leaves them); tile before distributing", t.axis),
            ));
        }
        // The new loop is made from the axis: later errors about it point at the axis's
        // declaration, not at the kernel.
        let stmts: Vec<Operation> = target.drain(from_at..to_at).collect();
        target.insert(from_at, new_for(&outer, stmts, &aloc));
    }
    Ok(())
}

/// The first reduction (its access's location) whose values do not depend on `axis`: none of
/// the loads they are computed from (through patches, compute ops, and buffers the body
/// stores or reduces dependent values into) index `axis` or read such a buffer.
fn repeated_reduction(m: &Kernel, axis: &str) -> Option<mercury_ir::Location> {
    use mercury_commir::Stmt;
    let mut dependent = std::collections::HashSet::new();
    let mut buffers = std::collections::HashSet::new();
    // To a fixed point: a buffer written late in the body may feed a load before it.
    loop {
        let before = (dependent.len(), buffers.len());
        m.walk(&mut |s, _| match s {
            Stmt::Load { result, access }
                if access.indices.iter().any(|e| e.axes().contains(&axis))
                    || buffers.contains(&access.buffer) =>
            {
                dependent.insert(*result);
            }
            Stmt::Patch {
                inputs, outputs, ..
            } if inputs.iter().any(|v| dependent.contains(v)) => {
                dependent.extend(outputs.iter().copied());
            }
            Stmt::Compute { inputs, output, .. }
                if inputs.iter().any(|v| dependent.contains(v)) =>
            {
                dependent.insert(*output);
            }
            Stmt::Store { value, access } if dependent.contains(value) => {
                buffers.insert(access.buffer.clone());
            }
            Stmt::Reduce { values, access, .. } if values.iter().any(|v| dependent.contains(v)) => {
                buffers.insert(access.buffer.clone());
            }
            _ => {}
        });
        if (dependent.len(), buffers.len()) == before {
            break;
        }
    }
    let mut found = None;
    m.walk(&mut |s, _| {
        if let Stmt::Reduce { values, access, .. } = s {
            let uses = access.indices.iter().any(|e| e.axes().contains(&axis))
                || values.iter().any(|v| dependent.contains(v));
            if !uses && found.is_none() {
                found = Some(access.loc.clone());
            }
        }
    });
    found
}

/// The first value of `m` that `axis` crosses, with where it is defined and what it is: a
/// compute or patch result two of whose dimensions cover `axis`, or an attention patch whose
/// queries and keys are both positions of `axis` (its scores would be `[axis, axis]`).
fn crossed_axis(m: &Kernel, axis: &str) -> Option<(mercury_ir::Location, String)> {
    use mercury_commir::tiles::{Atom, TileDim};
    let covers = |d: &TileDim| {
        d.atoms
            .iter()
            .any(|a| matches!(a, Atom::Axis(n, _) if n == axis))
    };
    let twice = |v: &mercury_ir::ValueId| {
        m.tiles
            .get(v)
            .is_some_and(|t| t.dims.iter().filter(|d| covers(d)).count() >= 2)
    };
    let seq = |v: &mercury_ir::ValueId| {
        m.tiles
            .get(v)
            .and_then(|t| t.dims.len().checked_sub(2).map(|i| &t.dims[i]))
            .is_some_and(covers)
    };
    let mut found = None;
    m.walk(&mut |s, _| {
        if found.is_some() {
            return;
        }
        match s {
            mercury_commir::Stmt::Compute { output, loc, .. } if twice(output) => {
                found = Some((loc.clone(), "the value computed here".to_string()));
            }
            mercury_commir::Stmt::Patch {
                kernel,
                inputs,
                outputs,
                loc,
                ..
            } => {
                if outputs.iter().any(twice) {
                    found = Some((loc.clone(), format!("a result of this {kernel} patch")));
                } else if kernel == "attention"
                    && inputs.len() >= 2
                    && seq(&inputs[0])
                    && seq(&inputs[1])
                {
                    found = Some((
                        loc.clone(),
                        "this attention's scores (its queries and keys are both its positions)"
                            .to_string(),
                    ));
                }
            }
            _ => {}
        }
    });
    found
}
