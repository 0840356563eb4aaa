//! `patch{kernel=attention|gemm on=K}`: the paper's `patch` primitive. Replaces a piece of a
//! loop body that computes what a library kernel computes by that kernel (`commir.patch`):
//!
//! - **attention**: the naive softmax attention of `q`, `k`, `v` tiles,
//!   ```text
//!   s = matmul q, k transpose_b      (optionally scaled by c and causally masked, either order)
//!   m = row_reduce max s;  p = exp(s - m);  l = row_reduce sum p
//!   o = matmul p, v  / l            (p optionally cast first)
//!   lse = m + log l                  (optional)
//!   ```
//!   becomes `o, lse = commir.patch "attention" (q, k, v) {causal, scale = c}` (no `scale`
//!   when c is the kernel's default `1/sqrt(d)`). Every intermediate must be used only by the
//!   pattern, and the tiles must be attention's roles (the patch's tile contract: q `[b, hq,
//!   i, d]`, k/v `[b, hk, j, d]` sharing batch, key/value heads and key positions, q's heads
//!   a multiple of k's for grouped-query attention, the head dim whole).
//! - **gemm**: `c = matmul a, b` without transposes whose `b` is a matrix `[k, n..]`
//!   (`C[m.., n..] = A[m.., k] B[k, n..]`, the gemm contract) becomes
//!   `c = commir.patch "gemm" (a, b)`; an accumulating `commir.reduce add` after it is fused
//!   into the patch by the lowering.
//!
//! Without `kernel` every piece that matches is patched (attention first) and the rest is left
//! to generated code. With `kernel`, only that kernel is matched, and the body must contain it
//! (already patched counts, so patching twice is patching once):
//! when nothing matches, the pass is refused with an error at the op where the first candidate
//! stops matching, saying what the kernel computes. `on` names the `commir.kernel` (every one
//! by default).

mod backward;

use mercury_commir::ops::{
    BinaryOp, CastOp, MaskOp, MatmulOp, PatchOp, RowReduceOp, ScaleOp, UnaryOp,
};
use mercury_commir::pass::{kernel_mut, KernelPass, OnKernels};
use mercury_commir::tiles::{contract, Tile};
use mercury_commir::Kernel;
use mercury_ir::pass::PassInfo;
use mercury_ir::{Attribute, Diagnostic, Location, Operation, Type, Value, ValueId};
use mercury_plan::tile::{BinaryFn, RowReduceKind, UnaryFn};
use std::collections::{HashMap, HashSet};

mercury_ir::pass_options! {
    /// The options of `patch`.
    pub struct Patch {
        kernel: String = "" => "the library kernel to match: attention, attention_bwd or gemm (default: every one that matches)",
        on: String = "" => "the commir.kernel to rewrite (every kernel when not given)",
    }
}

/// The pass's registration.
pub static INFO: PassInfo = PassInfo {
    name: "patch",
    summary: "Replace loop-body computations that match a library kernel (attention, its backward, gemm) by that kernel",
    options: Patch::OPTIONS,
    target: Some("on"),
    create: |o| {
        let p = Patch::from_options(o)?;
        if !["", "attention", "attention_bwd", "gemm"].contains(&p.kernel.as_str()) {
            return Err(format!(
                "patch: unknown kernel '{}' (known: attention, attention_bwd, gemm)",
                p.kernel
            ));
        }
        Ok(Box::new(OnKernels {
            kernel: p.on.clone(),
            pass: p,
        }))
    },
};

impl KernelPass for Patch {
    fn apply(&self, module: &mut Operation, m: &Kernel) -> Result<(), Diagnostic> {
        let k = kernel_mut(module, &m.name);
        let uses = use_counts(k);
        // Patches already there count: patching twice is patching once.
        let mut found = Found::default();
        k.walk(
            &mut |o| match PatchOp::cast(o).and_then(|p| p.kernel()).as_deref() {
                Some("attention") => found.attention += 1,
                Some("attention_bwd") => found.backward += 1,
                Some("gemm") => found.gemm += 1,
                _ => {}
            },
        );
        let mut first_miss = None;
        patch_blocks(k, self, m, &uses, &mut found, &mut first_miss)?;
        let missing = match self.kernel.as_str() {
            "attention" => found.attention == 0,
            "attention_bwd" => found.backward == 0,
            "gemm" => found.gemm == 0,
            _ => false,
        };
        if missing {
            return Err(first_miss.unwrap_or_else(|| {
                Diagnostic::error(
                    m.loc.clone(),
                    format!(
                        "patch{{kernel={}}}: '@{}' has no commir.matmul to start from ({})",
                        self.kernel,
                        m.name,
                        what(&self.kernel)
                    ),
                )
            }));
        }
        Ok(())
    }
}

/// What a kernel computes, for messages.
fn what(kernel: &str) -> &'static str {
    match kernel {
        "attention" => "attention computes s = matmul q, k transpose_b; m = row_reduce max s; p = exp(s - m); l = row_reduce sum p; o = matmul(p, v) / l; lse = m + log l",
        "attention_bwd" => backward::WHAT,
        _ => "gemm computes C[m.., n..] = A[m.., k] B[k, n..]: a matmul without transposes whose right operand is a matrix",
    }
}

/// The patches a body holds or got, per kernel.
#[derive(Default)]
struct Found {
    attention: usize,
    backward: usize,
    gemm: usize,
}

/// How many ops read each value, anywhere in the kernel.
fn use_counts(k: &Operation) -> HashMap<ValueId, usize> {
    let mut out = HashMap::new();
    k.walk(&mut |op| {
        for v in &op.operands {
            *out.entry(v.id).or_insert(0) += 1;
        }
    });
    out
}

/// Patches every block of `op`'s regions, innermost loops included; `found` counts the
/// attention and gemm patches made, `miss` keeps the first candidate that did not match (the
/// error when the named kernel is found nowhere).
fn patch_blocks(
    op: &mut Operation,
    p: &Patch,
    m: &Kernel,
    uses: &HashMap<ValueId, usize>,
    found: &mut Found,
    miss: &mut Option<Diagnostic>,
) -> Result<(), Diagnostic> {
    for region in &mut op.regions {
        for block in &mut region.blocks {
            if p.kernel.is_empty() || p.kernel == "attention" {
                loop {
                    match find_attention(&block.ops, m, uses) {
                        Ok(Some(a)) => {
                            rewrite_attention(&mut block.ops, a, m);
                            found.attention += 1;
                        }
                        Ok(None) => break,
                        Err(d) => {
                            if p.kernel == "attention" {
                                miss.get_or_insert(d);
                            }
                            break;
                        }
                    }
                }
            }
            if p.kernel.is_empty() || p.kernel == "attention_bwd" {
                loop {
                    match backward::find(&block.ops, m, uses) {
                        Ok(Some(b)) => {
                            backward::rewrite(&mut block.ops, b, m)?;
                            found.backward += 1;
                        }
                        Ok(None) => break,
                        Err(d) => {
                            if p.kernel == "attention_bwd" {
                                miss.get_or_insert(d);
                            }
                            break;
                        }
                    }
                }
            }
            if p.kernel.is_empty() || p.kernel == "gemm" {
                let probabilities = softmax_probabilities(&block.ops);
                for o in &mut block.ops {
                    if MatmulOp::cast(&*o).is_none() {
                        continue;
                    }
                    match gemm_fits(o, m, &probabilities) {
                        Ok(()) => {
                            to_gemm(o);
                            found.gemm += 1;
                        }
                        Err(d) => {
                            if p.kernel == "gemm" {
                                miss.get_or_insert(d);
                            }
                        }
                    }
                }
            }
            for o in &mut block.ops {
                if !o.regions.is_empty() {
                    patch_blocks(o, p, m, uses, found, miss)?;
                }
            }
        }
    }
    Ok(())
}

fn tile<'a>(m: &'a Kernel, v: &Value) -> Option<&'a Tile> {
    m.tiles.get(&v.id)
}

// ---- gemm ----------------------------------------------------------------------------------

/// The values of a block that are a softmax's probabilities: exponentials (`unary exp`) whose
/// row sum the block takes (`row_reduce sum`), and casts of them. Their product with the values
/// is attention's second matmul; an exponential nothing sums (`exp(X) W`) is no softmax.
fn softmax_probabilities(ops: &[Operation]) -> HashSet<ValueId> {
    let summed: HashSet<ValueId> = ops
        .iter()
        .filter(|o| RowReduceOp::cast(*o).and_then(|r| r.kind()) == Some(RowReduceKind::Sum))
        .filter_map(|o| o.operands.first().map(|v| v.id))
        .collect();
    let mut out = HashSet::new();
    for o in ops {
        let exp = UnaryOp::cast(o).and_then(|x| x.kind()) == Some(UnaryFn::Exp)
            && summed.contains(&result(o).id);
        let cast = CastOp::cast(o).is_some() && out.contains(&o.operands[0].id);
        if exp || cast {
            out.insert(result(o).id);
        }
    }
    out
}

/// Whether the matmul `o` is what the gemm patch computes; the error says why not. A product of
/// softmax probabilities (`probabilities`) is not: it is attention's `matmul p, v`, which only
/// the attention patch takes whole (a gemm of it alone would leave the softmax pair `o = u / l`
/// without its `u`, and the gemm patch does not merge the blockwise results a split key axis
/// gives).
fn gemm_fits(
    o: &Operation,
    m: &Kernel,
    probabilities: &HashSet<ValueId>,
) -> Result<(), Diagnostic> {
    let mm = MatmulOp::cast(o).expect("matmul");
    let fail = |why: String| {
        Diagnostic::error(
            o.loc.clone(),
            format!(
                "patch{{kernel=gemm}}: this matmul is not what gemm computes: {why} ({})",
                what("gemm")
            ),
        )
    };
    if mm.transpose_a().unwrap_or(false) || mm.transpose_b().unwrap_or(false) {
        return Err(fail("it transposes an operand".into()));
    }
    if probabilities.contains(&o.operands[0].id) {
        return Err(fail(
            "its left operand is a softmax's probabilities (an exp whose row sum the body takes): it is attention's matmul p, v, which the attention patch takes with the rest of the softmax".into(),
        ));
    }
    let (Some(a), Some(b)) = (tile(m, &o.operands[0]), tile(m, &o.operands[1])) else {
        return Err(fail("its operands have no tile".into()));
    };
    let batched: Vec<String> = b.dims[..b.dims.len().saturating_sub(2)]
        .iter()
        .filter(|d| d.size() != 1 || !d.at.is_empty())
        .map(|d| d.to_string())
        .collect();
    if !batched.is_empty() {
        return Err(fail(format!(
            "it is batched over the right operand's leading dimensions [{}]",
            batched.join(", ")
        )));
    }
    contract("gemm", &[a, b]).map_err(fail)?;
    Ok(())
}

/// Rewrites the matmul `o` into the gemm patch in place (same operands and result).
fn to_gemm(o: &mut Operation) {
    o.name = PatchOp::<&Operation>::NAME.to_string();
    o.attrs.clear();
    PatchOp::cast(o).expect("patch").set_kernel("gemm");
}

// ---- attention -----------------------------------------------------------------------------

/// A proven attention match: the ops to remove (block indices) and the patch to insert.
struct AttentionMatch {
    ops: Vec<usize>,
    q: Value,
    k: Value,
    v: Value,
    o: Value,
    lse: Option<Value>,
    causal: bool,
    scale: f64,
    loc: Location,
}

/// The first attention in `ops`, if any: `Ok(None)` when no matmul with `transpose_b` starts
/// one, `Err` at the op where the first candidate stops matching.
fn find_attention(
    ops: &[Operation],
    m: &Kernel,
    uses: &HashMap<ValueId, usize>,
) -> Result<Option<AttentionMatch>, Diagnostic> {
    first_scores_match(ops, |i| match_attention(ops, i, m, uses))
}

/// The first match `at` makes of a scores matmul of `ops` (`matmul q, k transpose_b`, the root
/// of attention and of its backward): `Ok(None)` when there is no such matmul, `Err` (where
/// the first candidate stops matching) when none matches.
fn first_scores_match<T>(
    ops: &[Operation],
    mut at: impl FnMut(usize) -> Result<T, Diagnostic>,
) -> Result<Option<T>, Diagnostic> {
    let mut first_err = None;
    for (i, o) in ops.iter().enumerate() {
        let Some(mm) = MatmulOp::cast(o) else {
            continue;
        };
        if !mm.transpose_b().unwrap_or(false) || mm.transpose_a().unwrap_or(false) {
            continue;
        }
        match at(i) {
            Ok(a) => return Ok(Some(a)),
            Err(d) => {
                first_err.get_or_insert(d);
            }
        }
    }
    first_err.map_or(Ok(None), Err)
}

/// The block's def-use view the matcher walks.
struct Uses<'a> {
    ops: &'a [Operation],
    counts: &'a HashMap<ValueId, usize>,
}

impl Uses<'_> {
    /// The ops of the block that read `v`, in order.
    fn users(&self, v: &Value) -> Vec<usize> {
        (0..self.ops.len())
            .filter(|&i| self.ops[i].operands.iter().any(|x| x.id == v.id))
            .collect()
    }
    /// The op of the block that defines `v`, if it is one of them.
    fn def(&self, v: &Value) -> Option<usize> {
        self.ops
            .iter()
            .position(|o| o.results.iter().any(|r| r.id == v.id))
    }
    /// Whether every use of `v` is by the block's ops `allowed`.
    fn only_used_by(&self, v: &Value, allowed: &[usize]) -> bool {
        let inside: usize = allowed
            .iter()
            .map(|&i| self.ops[i].operands.iter().filter(|x| x.id == v.id).count())
            .sum();
        self.counts.get(&v.id).copied().unwrap_or(0) == inside
    }
}

fn result(o: &Operation) -> &Value {
    &o.results[0]
}

/// Matches the block-local softmax attention rooted at the scores matmul `ops[root]`
/// (`s = matmul q, k^T`) in kernel `m`, walking forward through the uses (`counts`: uses per
/// value in the whole body):
///
/// ```text
/// s = matmul q, k^T   [scale f > 0]   [causal mask]      (scale and mask in either order)
/// m = row_reduce max s;  p = unary exp (binary sub s, m);  l = row_reduce sum p
/// u = matmul (p | cast p), v;  o = binary div u, l;  [lse = binary add m, (unary log l)]
/// ```
///
/// or the softmax without the shift, `p = unary exp s` and `[lse = unary log l]`: the same
/// probabilities and log-sum-exp, which the patch computes shifted (exactly, and without the
/// overflow of `exp s` for large scores).
///
/// Every intermediate must be used only inside the pattern, and q, k, v must have the
/// attention patch's tile roles (`contract("attention", ..)`), o its output tile. Errors are
/// located at the op where the body departs from the pattern and say what was expected there.
fn match_attention(
    ops: &[Operation],
    root: usize,
    m: &Kernel,
    counts: &HashMap<ValueId, usize>,
) -> Result<AttentionMatch, Diagnostic> {
    let u = Uses { ops, counts };
    let fail = |at: usize, why: &str| {
        Diagnostic::error(
            ops[at].loc.clone(),
            format!(
                "patch{{kernel=attention}}: {why}; the body does not compute attention ({})",
                what("attention")
            ),
        )
    };
    let only_user = |v: &Value, at: usize, name: &str| -> Result<usize, Diagnostic> {
        match u.users(v).as_slice() {
            [x] if u.only_used_by(v, &[*x]) => Ok(*x),
            _ => Err(fail(at, &format!("{name} must be used by exactly one op"))),
        }
    };
    let mut taken = vec![root];
    let (q, k) = (ops[root].operands[0].clone(), ops[root].operands[1].clone());
    // Scores, then an optional scale and causal mask in either order.
    let mut s = root;
    let (mut scale, mut causal) = (None, false);
    loop {
        let users = u.users(result(&ops[s]));
        let [x] = users.as_slice() else { break };
        if scale.is_none() {
            if let Some(c) = ScaleOp::cast(&ops[*x]) {
                if !u.only_used_by(result(&ops[s]), &[*x]) {
                    break;
                }
                let f = c.factor().unwrap_or(1.0);
                if f <= 0.0 {
                    return Err(fail(*x, "attention scales the scores by a positive number"));
                }
                scale = Some(f);
                s = *x;
                taken.push(s);
                continue;
            }
        }
        if !causal && MaskOp::cast(&ops[*x]).is_some() && u.only_used_by(result(&ops[s]), &[*x]) {
            causal = true;
            s = *x;
            taken.push(s);
            continue;
        }
        break;
    }
    let scores = result(&ops[s]).clone();
    // m = row max of the scores; d = scores - m; p = exp d. Or p = exp(scores), no shift: the
    // same probabilities, and lse = log l below (the patch computes the shifted form).
    let users = u.users(&scores);
    let row_reduce = |users: &[usize], k: RowReduceKind| {
        users
            .iter()
            .copied()
            .find(|&x| RowReduceOp::cast(&ops[x]).and_then(|r| r.kind()) == Some(k))
    };
    let is_exp = |x: usize| UnaryOp::cast(&ops[x]).and_then(|y| y.kind()) == Some(UnaryFn::Exp);
    // The row maximum (its op and value) and the subtraction, when the softmax is shifted.
    let (shift, exp) = match row_reduce(&users, RowReduceKind::Max) {
        Some(rmax) => {
            let mval = result(&ops[rmax]).clone();
            let sub = users.iter().copied().find(|&x| {
                BinaryOp::cast(&ops[x]).and_then(|b| b.kind()) == Some(BinaryFn::Sub)
                    && ops[x].operands[0].id == scores.id
                    && ops[x].operands[1].id == mval.id
            });
            let Some(sub) = sub else {
                return Err(fail(
                    rmax,
                    "the scores minus their row maximum (binary sub %s, %m) is missing",
                ));
            };
            if !u.only_used_by(&scores, &[rmax, sub]) {
                return Err(fail(
                    s,
                    "the scores are used by other ops than their row maximum and the subtraction",
                ));
            }
            let exp = only_user(result(&ops[sub]), sub, "the shifted scores")?;
            if !is_exp(exp) {
                return Err(fail(exp, "the shifted scores must go through 'unary exp'"));
            }
            (Some((rmax, mval, sub)), exp)
        }
        None => match users.as_slice() {
            [x] if is_exp(*x) && u.only_used_by(&scores, &[*x]) => (None, *x),
            _ => {
                return Err(fail(
                    s,
                    "the scores' row maximum (row_reduce max) is missing, and the scores are not only exponentiated (unary exp, a softmax without the shift)",
                ))
            }
        },
    };
    let p = result(&ops[exp]).clone();
    // l = row sum of p; u = matmul(p or cast p, v).
    let users = u.users(&p);
    let Some(rsum) = row_reduce(&users, RowReduceKind::Sum) else {
        return Err(fail(
            exp,
            "the probabilities' row sum (row_reduce sum) is missing",
        ));
    };
    let mut pv_in = p.clone();
    let mut pv_ops = vec![];
    if let Some(c) = users
        .iter()
        .copied()
        .find(|&x| CastOp::cast(&ops[x]).is_some())
    {
        pv_in = result(&ops[c]).clone();
        pv_ops.push(c);
    }
    let pv = u.users(&pv_in).into_iter().find(|&x| {
        MatmulOp::cast(&ops[x]).is_some_and(|mm| {
            !mm.transpose_a().unwrap_or(false) && !mm.transpose_b().unwrap_or(false)
        }) && ops[x].operands[0].id == pv_in.id
    });
    let Some(pv) = pv else {
        return Err(fail(
            exp,
            "the probabilities times the values (matmul %p, %v) is missing",
        ));
    };
    let p_users: Vec<usize> = [rsum]
        .into_iter()
        .chain(pv_ops.iter().copied())
        .chain(if pv_ops.is_empty() { Some(pv) } else { None })
        .collect();
    if !u.only_used_by(&p, &p_users) || (!pv_ops.is_empty() && !u.only_used_by(&pv_in, &[pv])) {
        return Err(fail(
            exp,
            "the probabilities are used by other ops than their row sum and the matmul with v",
        ));
    }
    let v = ops[pv].operands[1].clone();
    // o = u / l.
    let div = only_user(result(&ops[pv]), pv, "the unnormalised output")?;
    let lval = result(&ops[rsum]).clone();
    if BinaryOp::cast(&ops[div]).and_then(|b| b.kind()) != Some(BinaryFn::Div)
        || ops[div].operands[0].id != result(&ops[pv]).id
        || ops[div].operands[1].id != lval.id
    {
        return Err(fail(
            div,
            "the output must be normalised by the row sum (binary div %u, %l)",
        ));
    }
    let o = result(&ops[div]).clone();
    // Optional lse = m + log l (lse = log l without the shift).
    let l_users = u.users(&lval);
    let log = l_users
        .iter()
        .copied()
        .find(|&x| UnaryOp::cast(&ops[x]).and_then(|y| y.kind()) == Some(UnaryFn::Log));
    let mut lse = None;
    let mut lse_ops = vec![];
    if let Some(log) = log {
        let ll = result(&ops[log]).clone();
        match &shift {
            Some((_, mval, _)) => {
                let add = only_user(&ll, log, "the log of the row sum")?;
                let ok = BinaryOp::cast(&ops[add]).and_then(|b| b.kind()) == Some(BinaryFn::Add)
                    && {
                        let ids = [ops[add].operands[0].id, ops[add].operands[1].id];
                        ids == [mval.id, ll.id] || ids == [ll.id, mval.id]
                    };
                if !ok {
                    return Err(fail(add, "the log-sum-exp must be the row maximum plus the log of the row sum (binary add %m, %log_l)"));
                }
                lse = Some(result(&ops[add]).clone());
                lse_ops = vec![log, add];
            }
            None => {
                lse = Some(ll);
                lse_ops = vec![log];
            }
        }
    }
    if !u.only_used_by(
        &lval,
        &[div]
            .into_iter()
            .chain(lse_ops.first().copied())
            .collect::<Vec<_>>(),
    ) {
        return Err(fail(
            rsum,
            "the row sum is used by other ops than the normalisation and the log-sum-exp",
        ));
    }
    if let Some((rmax, mval, sub)) = &shift {
        if !u.only_used_by(
            mval,
            &[*sub]
                .into_iter()
                .chain(lse_ops.get(1).copied())
                .collect::<Vec<_>>(),
        ) {
            return Err(fail(
                *rmax,
                "the row maximum is used by other ops than the subtraction and the log-sum-exp",
            ));
        }
    }
    // The roles: the attention patch's tile contract on q, k, v.
    let (Some(tq), Some(tk), Some(tv)) = (tile(m, &q), tile(m, &k), tile(m, &v)) else {
        return Err(fail(root, "the operands have no tile"));
    };
    let outs = contract("attention", &[tq, tk, tv]).map_err(|why| {
        fail(
            root,
            &format!("q, k and v do not have attention's roles ({why})"),
        )
    })?;
    if tile(m, &o).is_some_and(|t| !t.same_shape(&outs[0])) {
        return Err(fail(
            div,
            "the output is not attention's [b, hq, i, d] tile",
        ));
    }
    let scale = scale.unwrap_or(1.0);
    if let Some((rmax, _, sub)) = shift {
        taken.extend([rmax, sub]);
    }
    taken.extend([exp, rsum, pv, div]);
    taken.extend(pv_ops);
    taken.extend(lse_ops);
    Ok(AttentionMatch {
        ops: taken,
        q,
        k,
        v,
        o,
        lse,
        causal,
        scale,
        loc: ops[root].loc.clone(),
    })
}

/// A `commir.patch` of `kernel` (attention or its backward) with q's tile `q`, `causal`, and
/// `scale` when it is not the kernel's default `1/sqrt(d)`; operands and results to be set.
fn attention_patch(
    kernel: &str,
    q: &Value,
    causal: bool,
    scale: f64,
    loc: &Location,
    m: &Kernel,
) -> Operation {
    let d = m
        .tiles
        .get(&q.id)
        .and_then(|t| t.dims.last())
        .map_or(1, |x| x.size());
    let mut op = Operation::new(PatchOp::<&Operation>::NAME).with_loc(loc.clone());
    PatchOp::cast(&mut op).expect("patch").set_kernel(kernel);
    op.set_attr("causal", Attribute::Bool(causal));
    let default = 1.0 / (d as f64).sqrt();
    if (scale - default).abs() > 1e-12 * default {
        op.set_attr(
            "scale",
            Attribute::Float {
                value: scale,
                ty: Type::F64,
            },
        );
    }
    op
}

/// Replaces the matched ops by the attention patch, at the position of the last of them.
fn rewrite_attention(ops: &mut Vec<Operation>, a: AttentionMatch, m: &Kernel) {
    let at = *a.ops.iter().max().expect("ops");
    let mut op = attention_patch("attention", &a.q, a.causal, a.scale, &a.loc, m);
    op.operands = vec![a.q, a.k, a.v];
    let lse = a
        .lse
        .unwrap_or_else(|| Value::new(a.o.ty.clone(), Some("lse")));
    op.results = vec![a.o, lse];
    let mut out = Vec::with_capacity(ops.len());
    for (i, o) in std::mem::take(ops).into_iter().enumerate() {
        if i == at {
            out.push(op.clone());
        } else if !a.ops.contains(&i) {
            out.push(o);
        }
    }
    *ops = out;
}
