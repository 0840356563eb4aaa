//! The rules of the compute ops (`commir.matmul`, `commir.unary`, `commir.binary`,
//! `commir.scale`, `commir.cast`, `commir.mask`, `commir.row_reduce`): operands that are tiles
//! of this kernel, element types, and the tile each result holds (`tiles.rs`), including over
//! which loops it is only a partial result.
//!
//! Shapes: a matmul contracts `a`'s last dimension (second to last with `transpose_a`) with
//! `b`'s second to last (last with `transpose_b`), which must cover the same elements at the
//! same block; the batch dimensions align from the right: each of `b`'s is `a`'s, a leading
//! part of it (grouped-query heads) or of one element, or `a`'s is of one element (or missing)
//! and the product takes `b`'s (rows times one weight matrix per head). Elementwise ops take
//! tiles of one shape, a tile and a *row* tile (the other without its last dimension, e.g. a
//! row maximum), broadcast along the row, or a tile and a *trailing* tile (the other's last
//! dimensions, e.g. a norm's weight or a rotary table), broadcast over the leading ones. A row
//! reduction drops the last dimension; `rotate_half` needs the last dimension whole and even.
//!
//! Partial results (`Tile::partial`): a contraction (matmul) or a row sum split by a loop gives
//! a partial sum (`add`): linear ops keep it (scale, cast, sums of partials over the same loops,
//! products and quotients by a complete tile, row sums, matmuls), anything else is refused (a
//! partial sum must be reduced first). A row maximum split by a loop gives a block-local value
//! (the blockwise softmax of naive attention); whatever is computed from it is block-local too
//! and can only leave through `commir.reduce lse_merge`, which merges blockwise (o, lse) pairs.

use super::body::tile_elem;
use super::{
    AddScalarOp, BinaryOp, CastOp, MaskOp, MatmulOp, RotateHalfOp, RowReduceOp, ScaleOp, UnaryOp,
};
use crate::expr::axis_ref;
use crate::model::{Compute, ReduceKind, Scope, Stmt};
use crate::tiles::{atoms_match, same_dim, At, Atom, Tile, TileDim};
use mercury_ir::{Diagnostic, Operation, Type};
use mercury_plan::tile::{BinaryFn, RowReduceKind, UnaryFn};

type Partial = Vec<(String, ReduceKind)>;

fn err(op: &Operation, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(op.loc.clone(), msg)
}

/// The statement of a compute op, checked, with its result recorded in `scope`; `None` when
/// `op` is not a compute op.
pub fn compute_stmt(scope: &mut Scope, op: &Operation) -> Result<Option<Stmt>, Diagnostic> {
    let compute = if let Some(m) = MatmulOp::cast(op) {
        Compute::Matmul {
            transpose_a: m.transpose_a().unwrap_or(false),
            transpose_b: m.transpose_b().unwrap_or(false),
        }
    } else if let Some(u) = UnaryOp::cast(op) {
        Compute::Unary(u.kind().ok_or_else(|| err(op, "unknown unary function"))?)
    } else if let Some(b) = BinaryOp::cast(op) {
        Compute::Binary(b.kind().ok_or_else(|| err(op, "unknown binary function"))?)
    } else if let Some(s) = ScaleOp::cast(op) {
        let f = s
            .factor()
            .filter(|f| f.is_finite())
            .ok_or_else(|| err(op, "'factor' must be a finite number"))?;
        Compute::Scale(f)
    } else if let Some(s) = AddScalarOp::cast(op) {
        let v = s
            .value()
            .filter(|f| f.is_finite())
            .ok_or_else(|| err(op, "'value' must be a finite number"))?;
        Compute::AddScalar(v)
    } else if RotateHalfOp::cast(op).is_some() {
        Compute::RotateHalf
    } else if CastOp::cast(op).is_some() {
        Compute::Cast
    } else if let Some(m) = MaskOp::cast(op) {
        Compute::Mask(m.kind().ok_or_else(|| err(op, "unknown mask"))?)
    } else if let Some(r) = RowReduceOp::cast(op) {
        Compute::RowReduce(r.kind().ok_or_else(|| err(op, "unknown row reduction"))?)
    } else {
        return Ok(None);
    };
    let mut tiles = Vec::new();
    for v in &op.operands {
        let t = scope
            .tiles
            .get(&v.id)
            .filter(|_| tile_elem(&v.ty).is_some());
        tiles.push(t.ok_or_else(|| {
            err(
                op,
                format!(
                    "operands of '{}' must be tiles produced in this kernel",
                    op.name
                ),
            )
        })?);
    }
    let result = op
        .results
        .first()
        .ok_or_else(|| err(op, format!("'{}' needs a result", op.name)))?;
    let elem = tile_elem(&result.ty)
        .ok_or_else(|| err(op, format!("the result of '{}' must be a tile", op.name)))?;
    if !matches!(elem, "f64" | "f32" | "f16" | "bf16") {
        return Err(err(
            op,
            format!("'{}' computes on float tiles, not '{elem}'", op.name),
        ));
    }
    if let Compute::Matmul { .. } = compute {
        if op.operands[0].ty != op.operands[1].ty {
            return Err(err(
                op,
                format!(
                    "matmul operands must share an element type, got '{}' and '{}'",
                    op.operands[0].ty, op.operands[1].ty
                ),
            ));
        }
    }
    let tile = result_tile(&compute, &tiles).map_err(|m| err(op, format!("{}: {m}", op.name)))?;
    scope.values.insert(result.id, result.ty.clone());
    scope.tiles.insert(result.id, tile);
    scope.defs.insert(
        result.id,
        (compute.clone(), op.operands.iter().map(|v| v.id).collect()),
    );
    Ok(Some(Stmt::Compute {
        op: compute,
        inputs: op.operands.iter().map(|v| v.id).collect(),
        output: result.id,
        ty: elem_type(elem),
        loc: op.loc.clone(),
    }))
}

fn elem_type(e: &str) -> Type {
    match e {
        "f64" => Type::F64,
        "f16" => Type::F16,
        "bf16" => Type::BF16,
        _ => Type::F32,
    }
}

/// The tile of a compute op's result (see the module docs).
fn result_tile(c: &Compute, t: &[&Tile]) -> Result<Tile, String> {
    match c {
        Compute::Matmul {
            transpose_a,
            transpose_b,
        } => matmul(t[0], t[1], *transpose_a, *transpose_b),
        Compute::Unary(f) => {
            // The log of a row sum split by keys is the unshifted softmax's lse: say why not.
            let hint = if *f == UnaryFn::Log { UNSHIFTED } else { "" };
            no_sum(t[0], &format!("'{}'", f.keyword()), hint)?;
            Ok(t[0].clone())
        }
        Compute::Mask(_) => {
            if t[0].dims.len() < 2 {
                return Err(format!("a mask needs [.., query, key] tiles, got {}", t[0]));
            }
            no_sum(t[0], "a mask", "")?;
            Ok(t[0].clone())
        }
        Compute::Scale(_) | Compute::Cast => Ok(t[0].clone()),
        Compute::AddScalar(_) => {
            no_sum(t[0], "a constant added to it", "")?;
            Ok(t[0].clone())
        }
        Compute::RotateHalf => {
            let last = t[0]
                .dims
                .last()
                .ok_or_else(|| format!("rotate_half needs a tile with dimensions, got {}", t[0]))?;
            if let Some(a) = last.at.first() {
                return Err(format!(
                    "rotate_half pairs the two halves of each row, and the last dimension ({last}) is split by the index '{}': keep it whole",
                    a.index
                ));
            }
            if last.size() % 2 != 0 {
                return Err(format!(
                    "rotate_half needs rows of an even length; the last dimension covers {last} ({} elements)",
                    last.size()
                ));
            }
            Ok(t[0].clone())
        }
        Compute::Binary(f) => binary(*f, t[0], t[1]),
        Compute::RowReduce(k) => row_reduce(*k, t[0]),
    }
}

/// Refuses a partial sum as the operand of a nonlinear op (`hint`: appended to the message).
fn no_sum(t: &Tile, what: &str, hint: &str) -> Result<(), String> {
    match t.partial.iter().find(|(_, k)| *k == ReduceKind::Add) {
        Some((l, _)) => Err(format!(
            "the operand is only a partial sum (its contraction is split by loop '{}'), and {what} of a partial sum is not a partial result: reduce it first{hint}",
            axis_ref(l)
        )),
        None => Ok(()),
    }
}

/// Why the softmax without the max shift (`p = exp(t)`, `o = u / l`, `lse = log l`) is not
/// split over its keys although its blocks would merge exactly in exact arithmetic: a key block
/// whose `exp(t)` all underflow (a finite mask fill, padding, scores far below the row's
/// maximum) has `l = 0`, and its `0 / 0` poisons the merge (the sixteenth new-user pass).
const UNSHIFTED: &str = " (a softmax without the max shift cannot be split over its keys: a key block whose exp(t) all underflow gives 0 / 0; subtract the row maximum, m = row_reduce max t, p = exp(t - m), lse = m + log l, or make it the attention patch with --patch)";

fn same_tile(a: &Tile, b: &Tile) -> bool {
    let (da, db) = (non_unit(a), non_unit(b));
    da.len() == db.len() && da.iter().zip(&db).all(|(x, y)| same_dim(x, y))
}

/// Whether `t` enters an elementwise op whose result is `of` as a *trailing* operand (the
/// result's last dimensions, broadcast over its leading ones) rather than a row operand or
/// one of the result's shape: what the lowering records for the generated kernels.
pub fn trailing_operand(t: &Tile, of: &Tile) -> bool {
    let row = !of.dims.is_empty() && same_tile(&of.without_last(), t);
    !row && !same_tile(t, of) && trailing_of(t, of)
}

/// Whether `t` is a *trailing* tile of `of`: the last non-unit dimensions of `of`, fewer
/// than all of them (a norm's weight `[e]` of rows `[b, i, e]`, a rotary table `[i, d]` of
/// heads `[h, i, d]`), and a complete value (a partial sum broadcast would be added once per
/// leading element).
fn trailing_of(t: &Tile, of: &Tile) -> bool {
    let (dt, dof) = (non_unit(t), non_unit(of));
    !dt.is_empty()
        && dt.len() < dof.len()
        && dt
            .iter()
            .zip(&dof[dof.len() - dt.len()..])
            .all(|(x, y)| same_dim(x, y))
        && t.partial.is_empty()
}

/// The dimensions of more than one element, or with a block.
fn non_unit(t: &Tile) -> Vec<&TileDim> {
    t.dims
        .iter()
        .filter(|d| d.size() != 1 || !d.at.is_empty())
        .collect()
}

/// The loop blocks a tile's dimensions are taken at, for messages where two tiles print alike
/// (` at blocks [@m0; -]`), or nothing when no dimension is blocked.
fn blocks_text(t: &Tile) -> String {
    if t.dims.iter().all(|d| d.at.is_empty()) {
        return String::new();
    }
    let per_dim: Vec<String> = t
        .dims
        .iter()
        .map(|d| match at_text(&d.at) {
            x if x.is_empty() => "-".to_string(),
            x => x,
        })
        .collect();
    format!(" at blocks [{}]", per_dim.join("; "))
}

fn at_text(at: &[At]) -> String {
    at.iter()
        .map(|a| a.index.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Unions partial-result loops; a loop that is a partial sum in one and block-local in the
/// other is block-local, and a partial sum meets only another partial sum of the same loops.
fn union(a: &Partial, b: &Partial) -> Partial {
    let mut out = a.clone();
    for (l, k) in b {
        match out.iter_mut().find(|(m, _)| m == l) {
            Some((_, kk)) if *k == ReduceKind::LseMerge => *kk = ReduceKind::LseMerge,
            Some(_) => {}
            None => out.push((l.clone(), *k)),
        }
    }
    out
}

fn sums(p: &Partial) -> Vec<&String> {
    p.iter()
        .filter(|(_, k)| *k == ReduceKind::Add)
        .map(|(l, _)| l)
        .collect()
}

/// Adds the loops that split a reduced (contracted) dimension: a partial sum over each
/// (block-local when `block`), unless already block-local.
fn add_split(p: &mut Partial, at: &[At], block: bool, what: &str) -> Result<(), String> {
    for a in at {
        let Some(l) = &a.step else {
            return Err(format!(
                "{what} is split by the index '{}', which is not a loop over its blocks (the partial results could not be combined)",
                a.index
            ));
        };
        let kind = if block {
            ReduceKind::LseMerge
        } else {
            ReduceKind::Add
        };
        match p.iter_mut().find(|(m, _)| m == l) {
            Some((_, k)) if kind == ReduceKind::LseMerge => *k = kind,
            Some(_) => {}
            None => p.push((l.clone(), kind)),
        }
    }
    Ok(())
}

fn matmul(a: &Tile, b: &Tile, ta: bool, tb: bool) -> Result<Tile, String> {
    let (ra, rb) = (a.dims.len(), b.dims.len());
    if ra < 2 || rb < 2 {
        return Err(format!(
            "operands need two dimensions (rows and columns); got a {a} and b {b}"
        ));
    }
    let (am, ak) = if ta {
        (ra - 1, ra - 2)
    } else {
        (ra - 2, ra - 1)
    };
    let (bk, bn) = if tb {
        (rb - 1, rb - 2)
    } else {
        (rb - 2, rb - 1)
    };
    let (ka, kb) = (&a.dims[ak], &b.dims[bk]);
    if !atoms_match(&ka.atoms, &kb.atoms) {
        return Err(format!(
            "a's contracted dimension covers {ka} but b's covers {kb} (a {a}, b {b}{})",
            if tb {
                ""
            } else {
                "; a [n, k] right operand needs 'transpose_b'"
            }
        ));
    }
    if ka
        .at
        .iter()
        .map(|x| &x.index)
        .ne(kb.at.iter().map(|x| &x.index))
    {
        return Err(format!(
            "a and b pick different blocks of the contracted dimension (a at [{}], b at [{}])",
            at_text(&ka.at),
            at_text(&kb.at)
        ));
    }
    let batch = match aligned_batches(a, b) {
        Ok(batch) => batch,
        // a's batch dimensions and b's cover different axes (rows of every batch entry times
        // a projection per head): the product is over both, a's first.
        Err(_) if outer_batches(a, b) => a.dims[..ra - 2]
            .iter()
            .chain(&b.dims[..rb - 2])
            .cloned()
            .collect(),
        Err(e) => return Err(e),
    };
    let both: Vec<&String> = sums(&a.partial)
        .into_iter()
        .filter(|l| sums(&b.partial).contains(l))
        .collect();
    if let Some(l) = both.first() {
        return Err(format!(
            "both operands are partial sums over loop '{}'; their product is not a partial result of the product",
            axis_ref(l)
        ));
    }
    let mut partial = union(&a.partial, &b.partial);
    let block = a
        .partial
        .iter()
        .chain(&b.partial)
        .any(|(_, k)| *k == ReduceKind::LseMerge);
    add_split(&mut partial, &ka.at, block, "the contracted dimension")?;
    let mut dims: Vec<TileDim> = batch;
    dims.push(a.dims[am].clone());
    dims.push(b.dims[bn].clone());
    Ok(Tile { dims, partial })
}

/// Whether a matmul of `a` and `b` takes the product over both operands' batch dimensions
/// (its output's batch dimensions are a's, then b's): the right-aligned rule does not fit, and
/// no axis of a's batch dimensions is in b's (`[@b, @i, @e]` rows times `[@h, @e, @d]`
/// per-head weights is `[@b, @h, @i, @d]`). The plan's matmul carries it as `outer`.
pub fn outer_batches(a: &Tile, b: &Tile) -> bool {
    let (ra, rb) = (a.dims.len(), b.dims.len());
    if ra < 3 || rb < 3 || aligned_batches(a, b).is_ok() {
        return false;
    }
    // The axes each side's batch dimensions cover, by name: whole axes and the axes a loop or
    // a block picks one position of (`1 at [@h]` in a loop over @h, `@h_t at [@h0]` after
    // tiling); a dimension of one element that no loop picks names none.
    let axes = |dims: &[TileDim]| -> Vec<String> {
        dims.iter()
            .filter(|d| !(d.size() == 1 && d.at.is_empty()))
            .flat_map(|d| {
                d.atoms
                    .iter()
                    .filter_map(|t| match t {
                        Atom::Axis(n, _) => Some(n.clone()),
                        Atom::Fixed(_) => None,
                    })
                    .chain(d.at.iter().map(|x| x.slot.clone()))
            })
            .collect()
    };
    let (xa, ya) = (axes(&a.dims[..ra - 2]), axes(&b.dims[..rb - 2]));
    let shared = xa.iter().any(|x| ya.contains(x));
    !xa.is_empty() && !ya.is_empty() && !shared
}

/// Batch dimensions aligned from the right: b's is a's, a leading part of it (grouped heads)
/// or one element; or a's is one element (or missing) and a is broadcast over b's.
fn aligned_batches(a: &Tile, b: &Tile) -> Result<Vec<TileDim>, String> {
    let (ra, rb) = (a.dims.len(), b.dims.len());
    let nb = (ra - 2).max(rb - 2);
    let mut batch: Vec<TileDim> = Vec::with_capacity(nb);
    for d in 0..nb {
        let x = (d + ra - 2).checked_sub(nb).map(|i| &a.dims[i]);
        let y = (d + rb - 2).checked_sub(nb).map(|i| &b.dims[i]);
        let unit = |t: Option<&TileDim>| t.is_none_or(|t| t.size() == 1 && t.at.is_empty());
        match (x, y) {
            (Some(x), y) if unit(y) => batch.push(x.clone()),
            (x, Some(y)) if unit(x) => batch.push(y.clone()),
            (Some(x), Some(y)) => {
                let xa: Vec<Atom> = x.atoms.iter().filter(|t| t.size() != 1).cloned().collect();
                let ya: Vec<Atom> = y.atoms.iter().filter(|t| t.size() != 1).cloned().collect();
                let lead = ya.len() <= xa.len() && atoms_match(&ya, &xa[..ya.len()]);
                let blocks = y.at.len() <= x.at.len()
                    && y.at.iter().zip(&x.at).all(|(p, q)| p.index == q.index);
                if !(lead && blocks && x.size() % y.size().max(1) == 0) {
                    return Err(format!(
                        "batch dimension {} of b covers {y} at [{}], which is neither a's ({x} at [{}]), a leading part of it (grouped heads), nor one element, and a's is not one element either",
                        d + rb - 2 - nb,
                        at_text(&y.at),
                        at_text(&x.at)
                    ));
                }
                batch.push(x.clone());
            }
            _ => unreachable!("a missing dimension is one element"),
        }
    }
    Ok(batch)
}

fn binary(f: BinaryFn, a: &Tile, b: &Tile) -> Result<Tile, String> {
    let out = if same_tile(a, b)
        || !a.dims.is_empty() && same_tile(&a.without_last(), b)
        || trailing_of(b, a)
    {
        a
    } else if !b.dims.is_empty() && same_tile(&b.without_last(), a) || trailing_of(a, b) {
        b
    } else {
        return Err(format!(
            "operands must have the same tile, one the other's without its last dimension (one value per row), or one the other's last dimensions (broadcast over the leading ones); got {}{} and {}{}",
            a,
            blocks_text(a),
            b,
            blocks_text(b)
        ));
    };
    let (sa, sb) = (sums(&a.partial), sums(&b.partial));
    let ok = match f {
        BinaryFn::Add | BinaryFn::Sub => sa == sb,
        BinaryFn::Mul => sa.is_empty() || sb.is_empty(),
        BinaryFn::Div => sb.is_empty(),
        BinaryFn::Max => sa.is_empty() && sb.is_empty(),
    };
    if !ok {
        return Err(not_partial(f, &sa, &sb));
    }
    Ok(Tile {
        dims: out.dims.clone(),
        partial: union(&a.partial, &b.partial),
    })
}

/// Why `f` of operands that are partial sums over loops `sa` and `sb` (empty: a complete
/// tile) is no partial result of anything, naming each operand's loops.
fn not_partial(f: BinaryFn, sa: &[&String], sb: &[&String]) -> String {
    let loops = |s: &[&String]| {
        let names: Vec<String> = s.iter().map(|l| format!("'{}'", axis_ref(l))).collect();
        format!(
            "loop{} {}",
            if s.len() == 1 { "" } else { "s" },
            names.join(", ")
        )
    };
    let operand = |s: &[&String]| {
        if s.is_empty() {
            "a complete tile".to_string()
        } else {
            format!("a partial sum (split by {})", loops(s))
        }
    };
    let what = match (f, sa.is_empty(), sb.is_empty()) {
        (BinaryFn::Div, _, false) => format!("'div' by {}", operand(sb)),
        (_, false, false) if sa == sb => {
            format!(
                "'{}' of two partial sums, both split by {},",
                f.keyword(),
                loops(sa)
            )
        }
        _ => format!("'{}' of {} and {}", f.keyword(), operand(sa), operand(sb)),
    };
    let hint = if f == BinaryFn::Div && !sb.is_empty() && sa == sb {
        UNSHIFTED
    } else {
        ""
    };
    let them = if sa.is_empty() || sb.is_empty() || f == BinaryFn::Div {
        "it"
    } else {
        "them"
    };
    format!("{what} is not a partial result: reduce {them} first{hint}")
}

fn row_reduce(k: RowReduceKind, t: &Tile) -> Result<Tile, String> {
    let last = t
        .dims
        .last()
        .ok_or_else(|| format!("a row reduction needs a tile with dimensions, got {t}"))?;
    if k == RowReduceKind::Max {
        no_sum(t, "a row maximum", "")?;
    }
    let mut out = t.without_last();
    let block =
        k == RowReduceKind::Max || t.partial.iter().any(|(_, kk)| *kk == ReduceKind::LseMerge);
    add_split(&mut out.partial, &last.at, block, "the reduced dimension")?;
    Ok(out)
}
