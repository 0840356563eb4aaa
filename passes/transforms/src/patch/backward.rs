//! The naive attention backward `patch` recognises (`patch{kernel=attention_bwd}`, or every
//! kernel): FlashAttention-2's backward written with tile ops on the forward's q, k, v, its
//! output o, the loss's gradient do and the forward's log-sum-exp lse,
//!
//! ```text
//! s = matmul q, k transpose_b      (optionally scaled by c and causally masked, either order)
//! p = exp(s - lse)                 (the probabilities, exact in every key block)
//! dv = matmul p, do transpose_a    (p optionally cast first)
//! dp = matmul do, v transpose_b
//! D = row_reduce sum (do * o)
//! ds = p * (dp - D)                (scaled by c when the scores are; optionally cast)
//! dq = matmul ds, k;  dk = matmul ds, q transpose_a
//! ```
//!
//! becomes `dq, dk, dv = commir.patch "attention_bwd" (q, k, v, o, do, lse) {causal, scale =
//! c}`. Every intermediate must be used only by the pattern, and the tiles must have the
//! backward patch's roles (`contract("attention_bwd", ..)`). Multi-head attention only: the
//! naive form has no op that sums dk and dv over a group's query heads, so grouped-query
//! attention is written with the patch.

use super::{result, tile, Uses};
use mercury_commir::ops::UnaryOp;
use mercury_commir::ops::{BinaryOp, CastOp, MaskOp, MatmulOp, RowReduceOp, ScaleOp};
use mercury_commir::tiles::contract;
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Location, Operation, Value, ValueId};
use mercury_plan::tile::{BinaryFn, RowReduceKind, UnaryFn};
use std::collections::HashMap;

/// What the backward computes, for messages.
pub(super) const WHAT: &str = "attention_bwd computes s = matmul q, k transpose_b; p = exp(s - lse); dv = matmul p, do transpose_a; dp = matmul do, v transpose_b; D = row_reduce sum (do * o); ds = p * (dp - D); dq = matmul ds, k; dk = matmul ds, q transpose_a";

/// A proven backward match: the ops to remove (block indices) and the patch to insert.
pub(super) struct BackwardMatch {
    ops: Vec<usize>,
    /// q, k, v, o, do, lse.
    inputs: [Value; 6],
    /// dq, dk, dv.
    outputs: [Value; 3],
    causal: bool,
    scale: f64,
    loc: Location,
}

/// The first naive backward in `ops`, if any: `Ok(None)` when no `matmul q, k transpose_b`
/// starts one, `Err` at the op where the first candidate stops matching.
pub(super) fn find(
    ops: &[Operation],
    m: &Kernel,
    counts: &HashMap<ValueId, usize>,
) -> Result<Option<BackwardMatch>, Diagnostic> {
    super::first_scores_match(ops, |i| matches(ops, i, m, counts))
}

/// Whether op `x` is a matmul with these transposes.
fn matmul(ops: &[Operation], x: usize, ta: bool, tb: bool) -> bool {
    MatmulOp::cast(&ops[x]).is_some_and(|mm| {
        mm.transpose_a().unwrap_or(false) == ta && mm.transpose_b().unwrap_or(false) == tb
    })
}

/// Whether op `x` is `binary f`.
fn binary(ops: &[Operation], x: usize, f: BinaryFn) -> bool {
    BinaryOp::cast(&ops[x]).and_then(|b| b.kind()) == Some(f)
}

/// The other operand of the binary op `x` whose one operand is `v`.
fn other(ops: &[Operation], x: usize, v: &Value) -> Option<Value> {
    match ops[x].operands.as_slice() {
        [a, b] if a.id == v.id => Some(b.clone()),
        [a, b] if b.id == v.id => Some(a.clone()),
        _ => None,
    }
}

/// `v`'s value before a cast (and the cast's op), or `v` itself.
fn uncast(ops: &[Operation], u: &Uses, v: &Value) -> (Value, Option<usize>) {
    match u.def(v) {
        Some(c) if CastOp::cast(&ops[c]).is_some() => (ops[c].operands[0].clone(), Some(c)),
        _ => (v.clone(), None),
    }
}

/// Matches the naive backward rooted at the scores matmul `ops[root]` (module docs); errors
/// are located where the body departs from the pattern and say what was expected there.
fn matches(
    ops: &[Operation],
    root: usize,
    m: &Kernel,
    counts: &HashMap<ValueId, usize>,
) -> Result<BackwardMatch, Diagnostic> {
    let u = Uses { ops, counts };
    let fail = |at: usize, why: &str| {
        Diagnostic::error(
            ops[at].loc.clone(),
            format!(
                "patch{{kernel=attention_bwd}}: {why}; the body does not compute the attention backward ({WHAT})"
            ),
        )
    };
    // The one op that reads `v` (and nothing else does).
    let only_user = |v: &Value, at: usize, name: &str| -> Result<usize, Diagnostic> {
        match u.users(v).as_slice() {
            [x] if u.only_used_by(v, &[*x]) => Ok(*x),
            _ => Err(fail(at, &format!("{name} must be used by exactly one op"))),
        }
    };
    // `v` itself, or the cast of it when its one user is a cast: (value, the cast's op).
    let through_cast = |v: Value| -> (Value, Option<usize>) {
        match u.users(&v).as_slice() {
            [c] if CastOp::cast(&ops[*c]).is_some() && u.only_used_by(&v, &[*c]) => {
                (result(&ops[*c]).clone(), Some(*c))
            }
            _ => (v, None),
        }
    };
    let mut taken = vec![root];
    let (q, k) = (ops[root].operands[0].clone(), ops[root].operands[1].clone());
    // Scores, then an optional scale and causal mask in either order.
    let mut s = root;
    let (mut scale, mut causal) = (None, false);
    loop {
        let sv = result(&ops[s]);
        let &[x] = u.users(sv).as_slice() else { break };
        if !u.only_used_by(sv, &[x]) {
            break;
        }
        if let (None, Some(c)) = (scale, ScaleOp::cast(&ops[x])) {
            let f = c.factor().unwrap_or(1.0);
            if f <= 0.0 {
                return Err(fail(x, "the scores are scaled by a positive number"));
            }
            scale = Some(f);
        } else if !causal && MaskOp::cast(&ops[x]).is_some() {
            causal = true;
        } else {
            break;
        }
        s = x;
        taken.push(s);
    }
    let scores = result(&ops[s]).clone();
    // p = exp(scores - lse).
    let sub = only_user(&scores, s, "the scores")?;
    if !binary(ops, sub, BinaryFn::Sub) || ops[sub].operands[0].id != scores.id {
        return Err(fail(
            sub,
            "the scores minus the forward's log-sum-exp (binary sub %s, %lse) is missing",
        ));
    }
    let lse = ops[sub].operands[1].clone();
    let exp = only_user(result(&ops[sub]), sub, "the scores minus the log-sum-exp")?;
    if UnaryOp::cast(&ops[exp]).and_then(|x| x.kind()) != Some(UnaryFn::Exp) {
        return Err(fail(exp, "the probabilities are exp(s - lse) (unary exp)"));
    }
    let p = result(&ops[exp]).clone();
    taken.extend([sub, exp]);
    // dv = matmul (p | cast p), do transpose_a; ds = p * (dp - D).
    let p_users = u.users(&p);
    let cast_p = p_users
        .iter()
        .copied()
        .find(|&x| CastOp::cast(&ops[x]).is_some());
    let pv = cast_p.map_or(p.clone(), |c| result(&ops[c]).clone());
    let dv_op = u
        .users(&pv)
        .into_iter()
        .find(|&x| matmul(ops, x, true, false) && ops[x].operands[0].id == pv.id);
    let Some(dv_op) = dv_op else {
        return Err(fail(
            exp,
            "dv = matmul %p, %do transpose_a (the probabilities' transpose times the output's gradient) is missing",
        ));
    };
    let d_o = ops[dv_op].operands[1].clone();
    let ds_op = p_users
        .iter()
        .copied()
        .find(|&x| binary(ops, x, BinaryFn::Mul));
    let Some(ds_op) = ds_op else {
        return Err(fail(
            exp,
            "ds = p * (dp - D) (binary mul of the probabilities) is missing",
        ));
    };
    let p_allowed: Vec<usize> = [ds_op].into_iter().chain(cast_p.or(Some(dv_op))).collect();
    if !u.only_used_by(&p, &p_allowed) || (cast_p.is_some() && !u.only_used_by(&pv, &[dv_op])) {
        return Err(fail(
            exp,
            "the probabilities are used by other ops than dv's matmul and ds",
        ));
    }
    taken.push(dv_op);
    taken.extend(cast_p);
    // dp - D, with dp = matmul do, v transpose_b and D = row_reduce sum (do * o).
    let dpd = other(ops, ds_op, &p).expect("a binary op");
    let dpd_op = u.def(&dpd);
    let Some(dpd_op) = dpd_op.filter(|&x| binary(ops, x, BinaryFn::Sub)) else {
        return Err(fail(
            ds_op,
            "ds multiplies p by dp - D (binary sub %dp, %D)",
        ));
    };
    let (dp, dd) = (
        ops[dpd_op].operands[0].clone(),
        ops[dpd_op].operands[1].clone(),
    );
    let dp_op = u
        .def(&dp)
        .filter(|&x| matmul(ops, x, false, true) && ops[x].operands[0].id == d_o.id);
    let Some(dp_op) = dp_op else {
        return Err(fail(
            dpd_op,
            "dp = matmul %do, %v transpose_b (the output's gradient times the values' transpose), with the do of dv, is missing",
        ));
    };
    let v = ops[dp_op].operands[1].clone();
    let dd_op = u
        .def(&dd)
        .filter(|&x| RowReduceOp::cast(&ops[x]).and_then(|r| r.kind()) == Some(RowReduceKind::Sum));
    let Some(dd_op) = dd_op else {
        return Err(fail(dpd_op, "D = row_reduce sum (do * o) is missing"));
    };
    let od = ops[dd_op].operands[0].clone();
    let od_op = u.def(&od).filter(|&x| binary(ops, x, BinaryFn::Mul));
    // do * o, either perhaps cast (to f32 from a 16-bit type) first.
    let mut casts = vec![];
    let o = od_op.and_then(|x| {
        let a = uncast(ops, &u, &ops[x].operands[0]);
        let b = uncast(ops, &u, &ops[x].operands[1]);
        let ((_, c1), (o, c2)) = if a.0.id == d_o.id {
            (a, b)
        } else if b.0.id == d_o.id {
            (b, a)
        } else {
            return None;
        };
        casts.extend(c1.into_iter().chain(c2));
        Some(o)
    });
    let (Some(od_op), Some(o)) = (od_op, o) else {
        return Err(fail(
            dd_op,
            "D sums do * o (binary mul %do, %o, either perhaps cast), with the do of dv",
        ));
    };
    for &c in &casts {
        if !u.only_used_by(result(&ops[c]), &[od_op]) {
            return Err(fail(
                c,
                "a cast in do * o must be used by that product alone",
            ));
        }
    }
    taken.extend(casts);
    for (val, user, name) in [
        (&dpd, ds_op, "dp - D"),
        (&dp, dpd_op, "dp"),
        (&dd, dpd_op, "D"),
        (&od, dd_op, "do * o"),
    ] {
        if !u.only_used_by(val, &[user]) {
            return Err(fail(
                user,
                &format!("{name} must be used by exactly one op"),
            ));
        }
    }
    taken.extend([ds_op, dpd_op, dp_op, dd_op, od_op]);
    // ds scaled by the scores' scale (when they are), then optionally cast.
    let mut dsv = result(&ops[ds_op]).clone();
    if let Some(c) = scale {
        let sc = only_user(&dsv, ds_op, "ds")?;
        let f = ScaleOp::cast(&ops[sc]).and_then(|x| x.factor());
        if f.is_none_or(|f| (f - c).abs() > 1e-12 * c) {
            return Err(fail(
                sc,
                &format!("ds must be scaled by the scores' scale {c} (commir.scale %ds by {c})"),
            ));
        }
        dsv = result(&ops[sc]).clone();
        taken.push(sc);
    }
    let (dsv, cast_ds) = through_cast(dsv);
    taken.extend(cast_ds);
    // dq = matmul ds, k;  dk = matmul ds, q transpose_a.
    let users = u.users(&dsv);
    let dq_op = users
        .iter()
        .copied()
        .find(|&x| matmul(ops, x, false, false) && ops[x].operands[1].id == k.id);
    let dk_op = users
        .iter()
        .copied()
        .find(|&x| matmul(ops, x, true, false) && ops[x].operands[1].id == q.id);
    let (Some(dq_op), Some(dk_op)) = (dq_op, dk_op) else {
        return Err(fail(
            ds_op,
            "dq = matmul %ds, %k and dk = matmul %ds, %q transpose_a (with the scores' q and k) are missing",
        ));
    };
    if !u.only_used_by(&dsv, &[dq_op, dk_op]) || ops[dq_op].operands[0].id != dsv.id {
        return Err(fail(
            ds_op,
            "ds is used by other ops than dq's and dk's matmuls",
        ));
    }
    taken.extend([dq_op, dk_op]);
    // The roles: the backward patch's tile contract.
    let inputs = [q, k, v, o, d_o, lse];
    let tiles: Option<Vec<_>> = inputs.iter().map(|x| tile(m, x)).collect();
    let Some(tiles) = tiles else {
        return Err(fail(root, "the operands have no tile"));
    };
    let outs = contract("attention_bwd", &tiles).map_err(|why| {
        fail(
            root,
            &format!("q, k, v, o, do and lse do not have the backward's roles ({why})"),
        )
    })?;
    let outputs = [
        result(&ops[dq_op]).clone(),
        result(&ops[dk_op]).clone(),
        result(&ops[dv_op]).clone(),
    ];
    for ((x, want), (at, name)) in outputs.iter().zip(&outs).zip([
        (dq_op, "dq is not q's tile"),
        (dk_op, "dk is not k's tile (grouped-query attention needs the patch: the naive form cannot sum over a group's query heads)"),
        (dv_op, "dv is not v's tile (grouped-query attention needs the patch: the naive form cannot sum over a group's query heads)"),
    ]) {
        if tile(m, x).is_some_and(|t| !t.same_shape(want)) {
            return Err(fail(at, name));
        }
    }
    Ok(BackwardMatch {
        ops: taken,
        inputs,
        outputs,
        causal,
        scale: scale.unwrap_or(1.0),
        loc: ops[root].loc.clone(),
    })
}

/// Replaces the matched ops by the backward patch, placed after the last op that defines one
/// of its operands in this block (before every remaining use of its results); `Err` when a
/// use comes before that point.
pub(super) fn rewrite(
    ops: &mut Vec<Operation>,
    b: BackwardMatch,
    m: &Kernel,
) -> Result<(), Diagnostic> {
    let mut op =
        super::attention_patch("attention_bwd", &b.inputs[0], b.causal, b.scale, &b.loc, m);
    let defined: Vec<ValueId> = b.inputs.iter().map(|v| v.id).collect();
    let produced: Vec<ValueId> = b.outputs.iter().map(|v| v.id).collect();
    // The ops that stay, by index; the patch goes after the last that defines an operand.
    let rest: Vec<usize> = (0..ops.len()).filter(|i| !b.ops.contains(i)).collect();
    let at = rest
        .iter()
        .rposition(|&i| ops[i].results.iter().any(|r| defined.contains(&r.id)))
        .map_or(0, |x| x + 1);
    if let Some(&early) = rest[..at]
        .iter()
        .find(|&&i| ops[i].operands.iter().any(|v| produced.contains(&v.id)))
    {
        return Err(Diagnostic::error(
            ops[early].loc.clone(),
            "patch{kernel=attention_bwd}: this op reads a gradient before the backward's operands are all defined; define q, k, v, o, do and lse first",
        ));
    }
    op.operands = b.inputs.to_vec();
    op.results = b.outputs.to_vec();
    let mut kept: Vec<Operation> = std::mem::take(ops)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !b.ops.contains(i))
        .map(|(_, o)| o)
        .collect();
    kept.insert(at, op);
    *ops = kept;
    Ok(())
}
