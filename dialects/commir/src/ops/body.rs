//! The rules of the body ops: `commir.load`, `commir.patch`, `commir.reduce`,
//! `commir.store` and `commir.reshard`. Each checks itself against its kernel (`Scope`: axes,
//! buffers, mesh, the tiles defined so far) and its enclosing loops (`stack`).

use super::{check_placement, LoadOp, PatchOp, ReduceOp, ReshardOp, StoreOp};
use crate::attrs::{indices_from_attr, DimBinding};
use crate::model::{Access, Buffer, ReduceKind, Role, Scope};
use crate::placement::Placement;
use crate::tiles::{contract, Tile};
use mercury_ir::{Diagnostic, Location, Operation, Type, ValueId};
use mercury_plan::PatchAttr;
use std::ops::Deref;

fn err(loc: &Location, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(loc.clone(), msg)
}

/// The element type of a `!commir.tile<elem>` type.
pub(crate) fn tile_elem(t: &Type) -> Option<&str> {
    match t {
        Type::Dialect {
            dialect,
            name,
            body: Some(b),
        } if dialect == "commir" && name == "tile" => Some(b),
        _ => None,
    }
}

/// The buffer an access or reshard op names.
fn buffer_of<'a>(scope: &Scope<'a>, op: &Operation) -> Result<&'a Buffer, Diagnostic> {
    let name = op
        .attr("buffer")
        .and_then(|a| a.as_symbol())
        .unwrap_or_default();
    scope
        .buffers
        .iter()
        .find(|b| b.name == name)
        .ok_or_else(|| err(&op.loc, format!("'@{name}' is not a buffer of this kernel")))
}

/// The tile an (already checked) access selects.
fn access_tile(
    scope: &Scope,
    buf: &Buffer,
    access: &Access,
    stack: &[(String, Option<usize>)],
) -> Tile {
    let looped: Vec<&str> = stack.iter().map(|(a, _)| a.as_str()).collect();
    Tile::of_access(buf, &access.indices, &looped, scope.axes)
}

/// The rules every access (load, reduce, store) shares: a buffer of the kernel whose role
/// allows the access, one index per bound axis, each index the whole range of its axis or an
/// expression of enclosing loop axes only, and looped axes outermost in their dimension (a tile
/// is a contiguous box).
fn verify_access(
    scope: &Scope,
    op: &Operation,
    stack: &[(String, Option<usize>)],
    reading: bool,
) -> Result<Access, Diagnostic> {
    let buf = buffer_of(scope, op)?;
    let bname = buf.name.clone();
    if reading && buf.role == Role::Out {
        return Err(err(
            &op.loc,
            format!("cannot load from '@{bname}', an 'out' buffer"),
        ));
    }
    if !reading && buf.role == Role::In {
        return Err(err(
            &op.loc,
            format!("cannot write to '@{bname}', an 'in' buffer"),
        ));
    }
    let indices = indices_from_attr(
        op.attr("indices")
            .unwrap_or(&mercury_ir::Attribute::Array(vec![])),
    )
    .map_err(|m| err(&op.loc, m))?;
    let slots = buf.axis_slots();
    if indices.len() != slots.len() {
        return Err(err(
            &op.loc,
            format!(
                "'@{bname}' is indexed by {} axes but {} indices were given",
                slots.len(),
                indices.len()
            ),
        ));
    }
    let looped: Vec<&str> = stack.iter().map(|(a, _)| a.as_str()).collect();
    for ((_, slot_axis), e) in slots.iter().zip(&indices) {
        for a in e.axes() {
            if scope.axes.iter().all(|x| x.name != a) {
                return Err(err(
                    &op.loc,
                    format!("index uses '@{a}', which is not an axis"),
                ));
            }
        }
        let slot_looped = e.axes().iter().any(|a| looped.contains(a));
        if !slot_looped && e.as_axis() != Some(slot_axis.as_str()) {
            return Err(err(
                &op.loc,
                format!("index '{}' of '@{bname}' must be '@{slot_axis}' (whole range) or use an enclosing loop axis", e.to_custom()),
            ));
        }
        if slot_looped && e.axes().iter().any(|a| !looped.contains(a)) {
            return Err(err(
                &op.loc,
                format!(
                    "index '{}' mixes loop axes with axes no enclosing loop iterates",
                    e.to_custom()
                ),
            ));
        }
    }
    // Looped axes of a dimension must be its outermost ones (tiles are contiguous boxes).
    for (d, binding) in buf.dims.iter().enumerate() {
        if let DimBinding::Axes(ax) = binding {
            let mut seen_whole = false;
            for a in ax {
                let Some(pos) = slots.iter().position(|(dd, s)| *dd == d && s == a) else {
                    continue;
                };
                let is_looped =
                    indices[pos].as_axis() != Some(a.as_str()) || looped.contains(&a.as_str());
                if is_looped && seen_whole {
                    return Err(err(&op.loc, format!("dimension {d} of '@{bname}': loop axis '@{a}' is inside a whole-range axis (tile would not be contiguous)")));
                }
                // A whole range of one element is a single position: it keeps the box.
                let extent = scope
                    .axes
                    .iter()
                    .find(|x| &x.name == a)
                    .map_or(1, |x| x.extent);
                seen_whole |= !is_looped && extent > 1;
            }
        }
    }
    Ok(Access {
        buffer: bname,
        indices,
        loc: op.loc.clone(),
    })
}

impl<O: Deref<Target = Operation>> LoadOp<O> {
    /// Checks the read (see the access rules) and that it produces a tile of the buffer's
    /// element type; records the tile in `scope`. Returns (tile, access).
    pub fn verify(
        &self,
        scope: &mut Scope,
        stack: &[(String, Option<usize>)],
    ) -> Result<(ValueId, Access), Diagnostic> {
        let op = self.op();
        let access = verify_access(scope, op, stack, true)?;
        let buf = buffer_of(scope, op)?;
        let result = op
            .results
            .first()
            .ok_or_else(|| err(&op.loc, "load needs a result"))?;
        if tile_elem(&result.ty) != Some(buf.dtype.to_string().as_str()) {
            return Err(err(
                &op.loc,
                format!(
                    "load of '@{}' must produce '!commir.tile<{}>', not '{}'",
                    buf.name, buf.dtype, result.ty
                ),
            ));
        }
        scope.values.insert(result.id, result.ty.clone());
        let tile = access_tile(scope, buf, &access, stack);
        scope.tiles.insert(result.id, tile);
        Ok((result.id, access))
    }
}

impl<O: Deref<Target = Operation>> PatchOp<O> {
    /// Checks the patch against its spec (`mercury_plan::patch`): a known kernel with its
    /// number of operands and results, operands that are tiles defined before, tile results,
    /// and the attributes the spec names (e.g. attention's `causal` a bool, `scale` positive). Records the results in `scope`; returns the kernel name.
    pub fn verify(&self, scope: &mut Scope) -> Result<String, Diagnostic> {
        let op = self.op();
        let kernel = self.kernel().unwrap_or_default();
        let spec = mercury_plan::patch::spec(&kernel).ok_or_else(|| {
            err(
                &op.loc,
                format!(
                    "unknown patch kernel '{kernel}' (known: {})",
                    mercury_plan::patch::known()
                ),
            )
        })?;
        let (nin, nout) = (spec.inputs, spec.outputs);
        if op.operands.len() != nin || op.results.len() != nout {
            return Err(err(
                &op.loc,
                format!(
                    "patch '{kernel}' takes {nin} tiles and produces {nout}, got {} and {}",
                    op.operands.len(),
                    op.results.len()
                ),
            ));
        }
        for v in &op.operands {
            if !scope.values.contains_key(&v.id) || tile_elem(&v.ty).is_none() {
                return Err(err(
                    &op.loc,
                    "patch operands must be tiles produced in this kernel",
                ));
            }
        }
        for r in &op.results {
            if tile_elem(&r.ty).is_none() {
                return Err(err(&op.loc, "patch results must be '!commir.tile<...>'"));
            }
            scope.values.insert(r.id, r.ty.clone());
        }
        // An attribute the patch does not take is refused, not ignored: `{casual = true}`
        // would run the attention without its mask. Dialect attributes (`name.attr`) are
        // discardable, as upstream MLIR's, and pass.
        if let Some(other) = op.attrs.keys().find(|n| {
            *n != "kernel" && !n.contains('.') && !spec.attrs.iter().any(|a| a.name() == n.as_str())
        }) {
            let takes: Vec<&str> = spec.attrs.iter().map(PatchAttr::name).collect();
            return Err(err(
                &op.loc,
                format!(
                    "patch '{kernel}' has no attribute '{other}' (it takes {})",
                    if takes.is_empty() {
                        "none".to_string()
                    } else {
                        takes.join(", ")
                    }
                ),
            ));
        }
        for a in spec.attrs {
            match *a {
                PatchAttr::Bool(name) => {
                    if let Some(c) = op.attr(name) {
                        c.as_bool().ok_or_else(|| {
                            err(&op.loc, format!("'{name}' must be true or false"))
                        })?;
                    }
                }
                PatchAttr::Positive(name) => {
                    if let Some(s) = op.attr(name) {
                        s.as_float().filter(|x| *x > 0.0).ok_or_else(|| {
                            err(&op.loc, format!("'{name}' must be a positive number"))
                        })?;
                    }
                }
                PatchAttr::Window(name) => {
                    if let Some(w) = op.attr(name) {
                        let w = w.as_int_array().ok_or_else(|| {
                            err(&op.loc, format!("'{name}' must be [left, right], two integers (-1 for unbounded)"))
                        })?;
                        mercury_plan::patch::window(&w).map_err(|m| err(&op.loc, m))?;
                    }
                }
                PatchAttr::Documents(name) => match op.attr(name) {
                    Some(d) => {
                        documents_of(scope, op, name, d)?;
                    }
                    None if op.attr("lower_right").and_then(|a| a.as_bool()) == Some(true) => {
                        return Err(err(
                            &op.loc,
                            format!("'lower_right' measures offsets from each document's end: it needs '{name}'"),
                        ))
                    }
                    None => {}
                },
            }
        }
        let inputs: Vec<&Tile> = op
            .operands
            .iter()
            .map(|v| scope.tiles.get(&v.id))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                err(
                    &op.loc,
                    "patch operands must be tiles produced in this kernel",
                )
            })?;
        let outs = contract(&kernel, &inputs).map_err(|m| err(&op.loc, m))?;
        for (r, t) in op.results.iter().zip(outs) {
            scope.tiles.insert(r.id, t);
        }
        for (i, r) in op.results.iter().enumerate() {
            scope.patch_results.insert(r.id, (op.results[0].id, i));
        }
        Ok(kernel)
    }
}

/// The `commir.documents` declarations a patch's `documents` attribute names (`@D`: the
/// queries' and the keys' boundaries; `[@Dq, @Dk]`: one each), checked: each is declared in
/// the kernel and covers as many positions as its operand's buffer has along the sequence
/// dimension (the tile's second from the end; q is operand 0, k operand 1).
pub fn documents_of<'s>(
    scope: &'s Scope,
    op: &Operation,
    name: &str,
    attr: &mercury_ir::Attribute,
) -> Result<[&'s crate::model::DocumentsDecl; 2], Diagnostic> {
    let syms: Vec<&str> = match attr {
        a if a.as_symbol().is_some() => vec![a.as_symbol().unwrap_or_default(); 2],
        mercury_ir::Attribute::Array(v) => v.iter().filter_map(|x| x.as_symbol()).collect(),
        _ => vec![],
    };
    if syms.len() != 2 || matches!(attr, mercury_ir::Attribute::Array(v) if v.len() != 2) {
        return Err(err(
            &op.loc,
            format!("'{name}' must be @D (one set of boundaries for queries and keys) or [@Dq, @Dk]: commir.documents symbols"),
        ));
    }
    let mut out = Vec::new();
    for (i, (s, what)) in syms.iter().zip(["query", "key"]).enumerate() {
        let d = scope
            .documents
            .iter()
            .find(|d| d.name == *s)
            .ok_or_else(|| {
                err(
                    &op.loc,
                    format!("'@{s}' does not name a commir.documents declaration of this kernel"),
                )
            })?;
        let seq = op
            .operands
            .get(i)
            .and_then(|v| scope.tiles.get(&v.id))
            .and_then(|t| t.dims.len().checked_sub(2).map(|x| &t.dims[x]));
        if let Some(dim) = seq {
            let looped = dim.at.iter().fold(1usize, |a, at| {
                a.saturating_mul(
                    scope
                        .axes
                        .iter()
                        .find(|x| x.name == at.slot)
                        .map_or(1, |x| x.extent),
                )
            });
            let positions = looped.saturating_mul(dim.size());
            if positions != d.positions {
                return Err(err(
                    &op.loc,
                    format!(
                        "'@{s}' covers {} positions, and the {what} sequence has {positions}",
                        d.positions
                    ),
                )
                .with_note(d.loc.clone(), "declared here"));
            }
        }
        out.push(d);
    }
    Ok([out[0], out[1]])
}

impl<O: Deref<Target = Operation>> ReduceOp<O> {
    /// Checks the reduction: a known kind with its number of values (add: 1; lse_merge: the
    /// output and its log-sum-exp), values defined before, and the access rules.
    pub fn verify(
        &self,
        scope: &Scope,
        stack: &[(String, Option<usize>)],
    ) -> Result<(ReduceKind, Access, Option<Access>), Diagnostic> {
        let op = self.op();
        let kind = self
            .read_kind()
            .map_err(|other| err(&op.loc, format!("unknown reduction {other}")))?
            .ok_or_else(|| err(&op.loc, "unknown reduction None"))?;
        if kind != ReduceKind::Add && self.carry() == Some(true) {
            return Err(err(
                &op.loc,
                format!(
                    "reduce {}: only a sum ('add') can carry its accumulator along a ring",
                    kind.keyword()
                ),
            ));
        }
        let want = if kind == ReduceKind::Add { 1 } else { 2 };
        if op.operands.len() != want {
            return Err(err(
                &op.loc,
                format!(
                    "reduction '{}' takes {want} value(s), got {}",
                    kind.keyword(),
                    op.operands.len()
                ),
            ));
        }
        for v in &op.operands {
            if !scope.values.contains_key(&v.id) {
                return Err(err(
                    &op.loc,
                    "reduced values must be tiles produced in this kernel",
                ));
            }
        }
        let access = verify_access(scope, op, stack, false)?;
        let buf = buffer_of(scope, op)?;
        let dest = access_tile(scope, buf, &access, stack);
        let values: Vec<&Tile> = op
            .operands
            .iter()
            .filter_map(|v| scope.tiles.get(&v.id))
            .collect();
        check_reduce(kind, &values, &dest, &access).map_err(|m| err(&op.loc, m))?;
        if kind == ReduceKind::LseMerge {
            let ids: Vec<ValueId> = op.operands.iter().map(|v| v.id).collect();
            softmax_pair(scope, ids[0], ids[1]).map_err(|m| {
                err(
                    &op.loc,
                    format!(
                        "lse_merge merges blockwise softmax pairs (o, lse) = (u / l, m + log l), with p = exp(t - m), l = row_reduce sum p and u = matmul p, v (the same m and p): {m}"
                    ),
                )
            })?;
        }
        let lse = self.verify_lse(scope, stack, kind, buf, &access)?;
        Ok((kind, access, lse))
    }

    /// `lse @L`: the buffer that keeps the merged log-sum-exp of an `lse_merge` (the forward's
    /// statistics a backward reads). `@L` is an `out` buffer of f32 or f64 (a log-sum-exp in
    /// bf16 would shift every probability the backward recomputes from it by up to 3%),
    /// bound to the output's dimensions without the last one; its tile is the output's
    /// without the last dimension, which must be whole (no loop picks a block of it). Returns
    /// its access: the output's indices without those of its last dimension.
    fn verify_lse(
        &self,
        scope: &Scope,
        stack: &[(String, Option<usize>)],
        kind: ReduceKind,
        out: &Buffer,
        access: &Access,
    ) -> Result<Option<Access>, Diagnostic> {
        let op = self.op();
        let Some(name) = self.read_lse().map_err(|m| err(&op.loc, m))? else {
            return Ok(None);
        };
        if kind != ReduceKind::LseMerge {
            return Err(err(&op.loc, format!("'lse @{name}' keeps the log-sum-exp of an lse_merge; a reduction '{}' has none", kind.keyword())));
        }
        let buf = scope
            .buffers
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| err(&op.loc, format!("'@{name}' is not a buffer of this kernel")))?;
        if buf.role != Role::Out {
            return Err(err(&op.loc, format!("'lse @{name}': the log-sum-exp is written into an 'out' buffer, not an '{}' one", buf.role.keyword())));
        }
        if !matches!(buf.dtype, Type::F32 | Type::F64) {
            return Err(err(&op.loc, format!("'lse @{name}' must be f32 or f64, not {} (a log-sum-exp rounded to a 16-bit type shifts every probability exp(s - lse) a backward recomputes from it by up to 3%)", buf.dtype)));
        }
        let Some((last, lead)) = out.dims.split_last() else {
            return Err(err(
                &op.loc,
                format!("'lse @{name}': '@{}' has no dimension", out.name),
            ));
        };
        if buf.dims != lead {
            let dims = |d: &[DimBinding]| crate::attrs::dims_to_custom(d);
            return Err(err(&op.loc, format!("'lse @{name}' must have the dimensions of '@{}' without the last one, {}, not {}", out.name, dims(lead), dims(&buf.dims))));
        }
        let tail = match last {
            DimBinding::Axes(ax) => ax.len(),
            DimBinding::Fixed(_) => 0,
        };
        let keep = access.indices.len() - tail;
        let looped: Vec<&str> = stack.iter().map(|(a, _)| a.as_str()).collect();
        if let Some(e) = access.indices[keep..]
            .iter()
            .find(|e| e.axes().iter().any(|a| looped.contains(a)))
        {
            return Err(err(&op.loc, format!("'lse @{name}': the last dimension of '@{}' is split (index '{}'); the log-sum-exp covers whole rows", out.name, e.to_custom())));
        }
        Ok(Some(Access {
            buffer: name,
            indices: access.indices[..keep].to_vec(),
            loc: op.loc.clone(),
        }))
    }
}

/// Whether `(o, lse)` is a blockwise softmax pair, the only values whose blocks `lse_merge`
/// merges exactly (`exp(lse) o` must be `sum_j exp(t_j) v_j` over the block): the outputs of an
/// attention patch, or compute ops written as `o = u / l` (optionally cast), `lse = m + log l`
/// (either order), `l = row_reduce sum p`, `u = matmul p, v` (`p` or a cast of it, not
/// transposed), `p = exp(t - m)`, the same `m` and `p` throughout (or `p = exp(t)` and
/// `lse = log l`: no shift). `Err`: what differs.
fn softmax_pair(scope: &Scope, o: ValueId, lse: ValueId) -> Result<(), String> {
    use crate::model::Compute as C;
    use mercury_plan::tile::{BinaryFn as B, RowReduceKind as R, UnaryFn as U};
    let def = |v: ValueId| scope.defs.get(&v);
    let uncast = |v: ValueId| match def(v) {
        Some((C::Cast, a)) => a[0],
        _ => v,
    };
    // Neither defined by a compute op (o perhaps cast): the outputs of one attention patch (o,
    // then lse), or loads (a pair computed elsewhere, which the kernel takes as given).
    if def(uncast(o)).is_none() && def(lse).is_none() {
        let o = uncast(o);
        let (po, pl) = (scope.patch_results.get(&o), scope.patch_results.get(&lse));
        return match (po, pl) {
            (None, None) => Ok(()),
            (Some((a, 0)), Some((b, 1))) if a == b => Ok(()),
            _ => Err(
                "o and lse are not the output and the log-sum-exp of one attention patch (results 0 and 1 of the same commir.patch)"
                    .into(),
            ),
        };
    }
    let Some((C::Binary(B::Div), ul)) = def(uncast(o)) else {
        return Err("o is not a quotient u / l".into());
    };
    let (u, l) = (ul[0], ul[1]);
    let Some((C::RowReduce(R::Sum), pv)) = def(l) else {
        return Err("the divisor of o is not a row sum l = row_reduce sum p".into());
    };
    let p = pv[0];
    let v = match def(u) {
        Some((
            C::Matmul {
                transpose_a: false, ..
            },
            a,
        )) if uncast(a[0]) == p => a[1],
        _ => return Err("the dividend of o is not u = matmul p, v over the p that l sums".into()),
    };
    let Some((C::Unary(U::Exp), d)) = def(p) else {
        return Err("p is not exp(t - m)".into());
    };
    let is_log_l = |v: ValueId| matches!(def(v), Some((C::Unary(U::Log), x)) if x[0] == l);
    // The scores t and the values v must be the same in every block (complete): the merge
    // undoes any per-block shift m (lse = m + log l), but not scores or values that differ from
    // block to block (t = s / m with m a block's maximum, v scaled by a sum over a split axis),
    // whose blocks would merge into another result.
    let complete = |x: ValueId, what: &str| -> Result<(), String> {
        let Some((loop_, _)) = scope.tiles.get(&x).and_then(|t| t.partial.first()) else {
            return Ok(());
        };
        Err(format!(
            "{what} block-local (over loop '{}'): only scores and values that are the same in every block merge exactly",
            crate::expr::axis_ref(loop_)
        ))
    };
    complete(v, "the values v in u = matmul p, v are")?;
    match def(d[0]) {
        // p = exp(t - m): lse = m + log l.
        Some((C::Binary(B::Sub), tm)) => {
            complete(tm[0], "the scores t in p = exp(t - m) are themselves")?;
            let m = tm[1];
            // Split over keys, each block's shift must be its row maximum: any other m leaves
            // a block whose scores all lie far below it with exp underflowing to 0, l = 0 and
            // o = 0 / 0 (a finite mask fill with m the maximum of the unmasked scores).
            let block_local = scope.tiles.get(&m).is_some_and(|t| !t.partial.is_empty());
            let max_of_t = matches!(def(m), Some((C::RowReduce(R::Max), x)) if x[0] == tm[0]);
            if block_local && !max_of_t {
                return Err("split over keys, the shift m in p = exp(t - m) must be the row maximum of those scores (m = row_reduce max t): another m leaves a block whose exp(t - m) all underflow, with l = 0 and o = 0 / 0".into());
            }
            let Some((C::Binary(B::Add), ab)) = def(lse) else {
                return Err("lse is not a sum m + log l".into());
            };
            if (ab[0] == m && is_log_l(ab[1])) || (ab[1] == m && is_log_l(ab[0])) {
                Ok(())
            } else {
                Err(
                    "lse is not m + log l with the m of p = exp(t - m) and the l that divides o"
                        .into(),
                )
            }
        }
        // p = exp(t), no shift (m = 0): lse = log l.
        _ if is_log_l(lse) => complete(d[0], "the scores t in p = exp(t) are themselves"),
        _ => Err("p = exp(t) has no shift m, so lse must be log l of the l that divides o".into()),
    }
}

impl<O: Deref<Target = Operation>> StoreOp<O> {
    /// Checks the store: a value defined before, and the access rules. Returns (value, access).
    pub fn verify(
        &self,
        scope: &Scope,
        stack: &[(String, Option<usize>)],
    ) -> Result<(ValueId, Access), Diagnostic> {
        let op = self.op();
        let v = op
            .operands
            .first()
            .ok_or_else(|| err(&op.loc, "store needs a value"))?;
        if !scope.values.contains_key(&v.id) {
            return Err(err(
                &op.loc,
                "stored value must be a tile produced in this kernel",
            ));
        }
        let access = verify_access(scope, op, stack, false)?;
        let buf = buffer_of(scope, op)?;
        let dest = access_tile(scope, buf, &access, stack);
        if let Some(t) = scope.tiles.get(&v.id) {
            check_store(t, &dest, &access).map_err(|m| err(&op.loc, m))?;
        }
        Ok((v.id, access))
    }
}

impl<O: Deref<Target = Operation>> ReshardOp<O> {
    /// Checks the reshard: at the top of the kernel, of a buffer of the kernel, to a placement
    /// that fits it. Returns (buffer, placement).
    pub fn verify(
        &self,
        scope: &Scope,
        stack: &[(String, Option<usize>)],
    ) -> Result<(String, Placement), Diagnostic> {
        let op = self.op();
        if !stack.is_empty() {
            return Err(err(
                &op.loc,
                "'commir.reshard' must be at the top of the kernel",
            ));
        }
        let buf = buffer_of(scope, op)?;
        let bname = buf.name.clone();
        let placement = self
            .read_sharding()
            .map_err(|m| err(&op.loc, m))?
            .unwrap_or_default();
        let shape: Vec<usize> = buf.dims.iter().map(|d| scope.dim_size(d)).collect();
        check_placement(&bname, &placement, &shape, scope.mesh).map_err(|m| err(&op.loc, m))?;
        Ok((bname, placement))
    }
}

/// The destination of an access, as messages name it: `'@C'[@i, @j]`.
fn dest_name(access: &Access) -> String {
    let ix: Vec<String> = access.indices.iter().map(|e| e.to_custom()).collect();
    format!(
        "'{}'[{}]",
        crate::expr::axis_ref(&access.buffer),
        ix.join(", ")
    )
}

/// A reduction puts values of the destination's shape (lse_merge: the output, and its
/// log-sum-exp without the head dim) into it, with the reduction their partial results need.
fn check_reduce(
    kind: ReduceKind,
    values: &[&Tile],
    dest: &Tile,
    access: &Access,
) -> Result<(), String> {
    let want = [dest.clone(), dest.without_last()];
    for (i, (v, w)) in values.iter().zip(&want).enumerate() {
        if !v.same_shape(w) {
            let what = match (kind, i) {
                (ReduceKind::LseMerge, 1) => "the log-sum-exp value",
                (ReduceKind::LseMerge, _) => "the output value",
                _ => "the value",
            };
            let target = if i == 1 {
                format!(
                    "{w}, the tile of {} without its last dimension",
                    dest_name(access)
                )
            } else {
                format!("{w} of {}", dest_name(access))
            };
            return Err(format!(
                "reduce {}: {what} is a {v} tile, which does not match the tile {target}",
                kind.keyword()
            ));
        }
        if let Some((l, k)) = v.partial.iter().find(|(_, k)| *k != kind) {
            return Err(format!(
                "reduce {}: the value is a partial result over loop '{}' that must be combined with {}, not {}",
                kind.keyword(),
                crate::expr::axis_ref(l),
                k.keyword(),
                kind.keyword()
            ));
        }
    }
    // An (o, lse) pair is one block's: both block-local over the same loops. An o that is
    // block-local over a loop its lse is not would be averaged over that loop's blocks.
    if let [o, lse] = values {
        let loops = |t: &Tile| {
            let mut v: Vec<String> = t
                .partial
                .iter()
                .map(|(l, _)| crate::expr::axis_ref(l))
                .collect();
            v.sort();
            v
        };
        let (lo, ll) = (loops(o), loops(lse));
        if lo != ll {
            return Err(format!(
                "reduce lse_merge: the output is block-local over loops [{}] but its log-sum-exp over [{}]; a pair is one block's, both over the same loops",
                lo.join(", "),
                ll.join(", ")
            ));
        }
    }
    Ok(())
}

/// A store writes a value of the destination's shape that is a complete result: a partial
/// result (a contraction split over a loop) needs a reduction.
fn check_store(value: &Tile, dest: &Tile, access: &Access) -> Result<(), String> {
    if !value.same_shape(dest) {
        return Err(format!(
            "store: the value is a {value} tile, which does not match the tile {dest} of {}",
            dest_name(access)
        ));
    }
    if let Some((l, k)) = value.partial.first() {
        let l = crate::expr::axis_ref(l);
        return Err(match k {
            ReduceKind::Add => format!(
                "store: the value is only a partial result (its contraction is split by loop '{l}'); write it with 'commir.reduce add'"
            ),
            // A max or softmax over a split axis: block-local, and only an (o, lse) pair merges.
            ReduceKind::LseMerge => format!(
                "store: the value is block-local (a max or softmax over an axis split by loop '{l}'); only an attention output and its log-sum-exp merge across blocks ('commir.reduce lse_merge %o, %lse'): keep that axis whole (no loop over it), or compute the (o, lse) pair"
            ),
        });
    }
    Ok(())
}
