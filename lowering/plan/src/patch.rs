//! One spec per patch (the paper's local library kernels): what every layer needs to know
//! about a patch kind, in one place. The CommIR verifier reads its operand and result arity and
//! attributes, the conversion builds the plan's [`PatchKind`] and the output shapes with it, the
//! plan verifier and the lowering's fusion read whether it accumulates, and the cost model its
//! FLOPs and bytes. Adding a patch kind: its variant and its spec here, its CPU reference
//! (`runtime/src/cpu.rs`), its CUDA launch (`runtime/src/cuda/ops.rs`), and a lit test
//! (`docs/extending.md`).

use crate::mask::AttnMask;
use crate::tile::UnaryFn;
use crate::{CombineKind, DType};
use serde::{Deserialize, Serialize};

/// Local library kernels (the paper's patches).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum PatchKind {
    /// `out[m, n] (=|+=) a[m, k] * b[k, n]`; `(m, n, k)` from the views as [`gemm_dims`] reads
    /// them (`k` is `a`'s last dimension); the GPU backend also needs every view to be a
    /// matrix once its leading unit dimensions are dropped.
    /// With `accumulate`, the product is added to `out`. With `epilogue = f`, `out = f(a * b)`
    /// in the output's type: an elementwise activation the lowering folded into the GEMM
    /// (`lowering/conversion/src/activation.rs`; on the GPU cuBLASLt's epilogue, which has
    /// [`UnaryFn::Gelu`] only, the tanh form). Never together with `accumulate`.
    Gemm {
        accumulate: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        epilogue: Option<UnaryFn>,
    },
    /// Attention forward on one tile: q `[b, hq, sq, d]`, k and v `[b, hk, sk, d]` with
    /// `hq = hk * group`; outputs o `[b, hq, sq, d]` (normalised) and lse `[b, hq, sq]`
    /// (natural log of the softmax denominator, scaled logits). With `causal`, key position
    /// `k_offset + c` is visible to query position `q_offset + r` iff it is not larger.
    /// `mask` adds a sliding window and run-time document boundaries at the same positions
    /// (`crate::mask`). Fully masked rows give o = 0 and lse = -inf. With `accumulate`, the
    /// outputs are an accumulator `[o, lse]` that the tile's result is merged into (as
    /// `CombineKind::LseMerge` would), so a ring step needs no separate merge pass.
    Attention {
        causal: bool,
        scale: f64,
        q_offset: usize,
        k_offset: usize,
        #[serde(default, skip_serializing_if = "AttnMask::is_none")]
        mask: AttnMask,
        #[serde(default)]
        accumulate: bool,
    },
    /// Attention backward on one (query block, key block) tile (FlashAttention-2's backward):
    /// inputs `[q, k, v, o, do, lse]` with q `[b, hq, sq, d]`, k `[b, hk, sk, d]`, v
    /// `[b, hk, sk, dv]`, the forward's output o and its gradient do `[b, hq, sq, dv]`, and
    /// the forward's lse `[b, hq, sq]` over *all* keys of each row (as [`PatchKind::Attention`]
    /// writes it: natural log, scaled logits); outputs `[dq, dk, dv]` of q's, k's and v's
    /// shapes. With `P = exp(scale * q k^T - lse)` (0 where masked, and in a row whose lse is
    /// `-inf`), `D = rowsum(do * o)` (computed inside the patch, once per query row of the
    /// call), `dS = P * (do v^T - D)`: `dv = P^T do`, `dq = scale * dS k`, `dk = scale * dS^T q`,
    /// dk and dv summed over each key/value head's group of query heads. dq is a partial sum
    /// over key blocks and dk, dv over query blocks: a tile's results are summed
    /// ([`CombineKind::Add`]); with `accumulate`, the patch adds them into its outputs (f32
    /// accumulators), otherwise it overwrites them. `causal`, `q_offset` and `k_offset` as the
    /// forward's (global positions of the tile's first query and key), `mask` too. A fully
    /// masked row gives zero gradients, never NaN. The f64 reference is
    /// `mercury_kernels::cpu::attention_bwd`.
    AttentionBwd {
        causal: bool,
        scale: f64,
        q_offset: usize,
        k_offset: usize,
        #[serde(default, skip_serializing_if = "AttnMask::is_none")]
        mask: AttnMask,
        #[serde(default)]
        accumulate: bool,
    },
}

/// A CommIR attribute a patch reads, and what the verifier requires of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchAttr {
    /// `name = true|false`.
    Bool(&'static str),
    /// `name = <number > 0>`.
    Positive(&'static str),
    /// `name = [left, right]`: a sliding window, two integers `>= -1` (-1: unbounded).
    Window(&'static str),
    /// `name = @D` or `[@Dq, @Dk]`: run-time document boundaries, `commir.documents`
    /// declarations of the kernel over the query's and the key's positions.
    Documents(&'static str),
}

impl PatchAttr {
    /// The attribute's name.
    pub fn name(&self) -> &'static str {
        match self {
            PatchAttr::Bool(n)
            | PatchAttr::Positive(n)
            | PatchAttr::Window(n)
            | PatchAttr::Documents(n) => n,
        }
    }
}

/// What the conversion knows about one patch instance when it builds the plan's op.
pub struct PatchArgs<'a> {
    /// Extents of the input tiles, in operand order.
    pub shapes: &'a [Vec<usize>],
    /// Sequence offsets (dimension 2) of the first two input tiles in their buffers.
    pub offsets: (usize, usize),
    /// A boolean attribute of the `commir.patch` op, if present.
    pub bool_attr: &'a dyn Fn(&str) -> Option<bool>,
    /// A numeric attribute of the `commir.patch` op, if present.
    pub float_attr: &'a dyn Fn(&str) -> Option<f64>,
    /// An integer array attribute of the `commir.patch` op, if present.
    pub ints_attr: &'a dyn Fn(&str) -> Option<Vec<i64>>,
    /// The plan's document boundaries inputs its `documents` attribute names (queries', keys').
    pub documents: Option<[usize; 2]>,
}

/// A plan patch op and the shapes of its output tiles.
pub type Built = (PatchKind, Vec<Vec<usize>>);

/// Everything the layers need to know about one patch kind.
pub struct PatchSpec {
    /// The name of the CommIR `commir.patch` kernel attribute (`"gemm"`).
    pub name: &'static str,
    /// Number of input tiles.
    pub inputs: usize,
    /// Number of output tiles.
    pub outputs: usize,
    /// Attributes of the `commir.patch` op the patch reads.
    pub attrs: &'static [PatchAttr],
    /// The combine an accumulating instance folds in (`None`: it cannot accumulate).
    pub folds: Option<CombineKind>,
    /// The plan's op (not accumulating) and the output tile shapes, from the input shapes and
    /// attributes; `Err` says why the tiles do not fit the patch.
    pub build: fn(&PatchArgs) -> Result<Built, String>,
    /// Floating-point operations of one instance on tiles of these input shapes.
    pub flops: fn(&PatchKind, &[Vec<usize>]) -> f64,
    /// For each input, the dimensions the patch contracts over (reduces), e.g. gemm's `k`.
    pub contracted: fn(&[Vec<usize>]) -> Vec<Vec<usize>>,
}

/// Every patch kind, in the order of the [`PatchKind`] variants.
pub static PATCHES: &[&PatchSpec] = &[&GEMM, &ATTENTION, &ATTENTION_BWD];

/// The spec of the CommIR patch `name`, if there is one.
pub fn spec(name: &str) -> Option<&'static PatchSpec> {
    PATCHES.iter().copied().find(|s| s.name == name)
}

/// The names of every patch kind, comma separated (for messages).
pub fn known() -> String {
    PATCHES
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl PatchKind {
    /// The spec of this patch kind.
    pub fn spec(&self) -> &'static PatchSpec {
        match self {
            PatchKind::Gemm { .. } => &GEMM,
            PatchKind::Attention { .. } => &ATTENTION,
            PatchKind::AttentionBwd { .. } => &ATTENTION_BWD,
        }
    }
    /// Whether the op adds its result into its outputs (it reads them too).
    pub fn accumulates(&self) -> bool {
        match self {
            PatchKind::Gemm { accumulate, .. }
            | PatchKind::Attention { accumulate, .. }
            | PatchKind::AttentionBwd { accumulate, .. } => *accumulate,
        }
    }
    /// Makes the op fold a `kind` combine into its outputs; false when it cannot (a GEMM with
    /// an epilogue cannot: `f(a b) + c` is not `f(a b + c)`).
    pub fn fold(&mut self, kind: CombineKind) -> bool {
        if self.spec().folds != Some(kind)
            || matches!(
                self,
                PatchKind::Gemm {
                    epilogue: Some(_),
                    ..
                }
            )
        {
            return false;
        }
        match self {
            PatchKind::Gemm { accumulate, .. }
            | PatchKind::Attention { accumulate, .. }
            | PatchKind::AttentionBwd { accumulate, .. } => *accumulate = true,
        }
        true
    }
    /// Whether the instance does no work at all (a causal block entirely above the
    /// diagonal); `q_rows` is the query tile's sequence length.
    pub fn is_empty(&self, q_rows: usize) -> bool {
        self.causal_offsets()
            .is_some_and(|(q_offset, k_offset)| k_offset >= q_offset + q_rows)
    }
    /// The mask of an attention patch (forward or backward) beyond `causal`; `None` for any
    /// other patch.
    pub fn mask(&self) -> Option<&AttnMask> {
        match self {
            PatchKind::Attention { mask, .. } | PatchKind::AttentionBwd { mask, .. } => Some(mask),
            PatchKind::Gemm { .. } => None,
        }
    }
    /// The band of an attention patch (forward or backward) at its positions: `causal` and the
    /// mask's window ([`AttnMask::band`]), with its first query and key positions
    /// `(q_offset, k_offset)`; `None` for any other patch.
    pub fn attention_band(&self) -> Option<(crate::mask::Band, usize, usize)> {
        match self {
            PatchKind::Attention {
                causal,
                q_offset,
                k_offset,
                mask,
                ..
            }
            | PatchKind::AttentionBwd {
                causal,
                q_offset,
                k_offset,
                mask,
                ..
            } => Some((mask.band(*causal), *q_offset, *k_offset)),
            PatchKind::Gemm { .. } => None,
        }
    }
    /// The `(q_offset, k_offset)` of a causal attention patch (forward or backward); `None`
    /// for any other patch.
    pub fn causal_offsets(&self) -> Option<(usize, usize)> {
        match self {
            PatchKind::Attention {
                causal: true,
                q_offset,
                k_offset,
                ..
            }
            | PatchKind::AttentionBwd {
                causal: true,
                q_offset,
                k_offset,
                ..
            } => Some((*q_offset, *k_offset)),
            _ => None,
        }
    }
}

/// Whether a `gemm` patch with operands of element type `input` may write `output`: its
/// operands' type or f32, what the executors' GEMMs write (cuBLASLt with f32 compute,
/// `kernels/src/cuda/gemm.rs`: bf16 or f16 operands write their type or f32, f32 operands
/// f32; the CPU executor computes in f64 and rounds the same way; the CUDA backend has no f64
/// GEMM and says so when it resolves one). The plan verifier refuses any other pair, and the
/// lowering asks here before it lets a GEMM write a narrower partial sum.
pub fn gemm_writes(input: DType, output: DType) -> bool {
    output == input || output == DType::F32
}

/// A GEMM patch's `(m, n, k)` from its views' extents, the one reading of them every backend
/// and the cost model share: `k` is `a`'s last dimension and `m` the product of `a`'s others;
/// `b` is laid out `[k, n..]`, so some leading dimensions of `b` hold exactly `k` elements (the
/// tile contract's rule, `dialects/commir/src/tiles.rs`) and `n` is the product of the rest;
/// `out` is `[m.., n..]`: some leading dimensions of it hold `m` elements and the rest `n`.
///
/// # Errors
/// A zero or missing `k`, a `b` whose leading dimensions do not multiply to `k`, or an `out`
/// that is not `m x n`, with the three extents.
pub fn gemm_dims(a: &[usize], b: &[usize], out: &[usize]) -> Result<(usize, usize, usize), String> {
    let numel = |e: &[usize]| e.iter().fold(1usize, |p, d| p.saturating_mul(*d));
    // Whether some leading dimensions of `e` multiply to exactly `want`.
    let leading = |e: &[usize], want: usize| (0..=e.len()).any(|i| numel(&e[..i]) == want);
    let bad = |why: String| {
        Err(format!(
            "gemm shapes do not agree: a {a:?}, b {b:?}, out {out:?} ({why})"
        ))
    };
    let k = *a.last().unwrap_or(&0);
    if k == 0 {
        return bad("k, a's last dimension, is zero or missing".into());
    }
    if !leading(b, k) {
        return bad(format!(
            "b's leading dimensions do not hold k = {k} elements: b must be laid out [k, n]"
        ));
    }
    let (m, n) = (numel(a) / k, numel(b) / k);
    if numel(out) != m.saturating_mul(n) || !leading(out, m) {
        return bad(format!("out must be m x n = {m} x {n}"));
    }
    Ok((m, n, k))
}

/// An attention tile's extent as `[b, h, s, d]`: `[h, s, d]` has a batch of one. `None` for
/// any other rank.
pub fn attention_bhsd(e: &[usize]) -> Option<[usize; 4]> {
    match *e {
        [h, s, d] => Some([1, h, s, d]),
        [b, h, s, d] => Some([b, h, s, d]),
        _ => None,
    }
}

/// The extents of an attention patch's views, made 4-D ([`attention_bhsd`]): q `[b, hq, sq, d]`,
/// k `[b, hk, sk, d]`, v `[b, hk, sk, dv]`, o `[b, hq, sq, dv]`, lse of `b * hq * sq`
/// elements, `hq` a multiple of `hk`. Returns `[q, k, v, o]`; `Err` names every shape. The
/// plan verifier and the CPU executor hold a patch to it (a plan given as JSON whose q had 0
/// rows and o 32 was accepted: new-user pass, 2026-12-03).
pub fn attention_shapes(
    q: &[usize],
    k: &[usize],
    v: &[usize],
    o: &[usize],
    lse: &[usize],
) -> Result<[[usize; 4]; 4], String> {
    let bad = || {
        format!("attention shapes do not agree: q {q:?}, k {k:?}, v {v:?}, o {o:?}, lse {lse:?}")
    };
    let (Some(qs), Some(ks), Some(vs), Some(os)) = (
        attention_bhsd(q),
        attention_bhsd(k),
        attention_bhsd(v),
        attention_bhsd(o),
    ) else {
        return Err(bad());
    };
    let rows = qs[..3].iter().try_fold(1usize, |a, x| a.checked_mul(*x));
    let agree = ks[1] != 0
        && qs[1] % ks[1] == 0
        && qs[0] == ks[0]
        && qs[3] == ks[3]
        && vs[..3] == ks[..3]
        && os[..3] == qs[..3]
        && os[3] == vs[3]
        && rows.is_some()
        && lse.iter().try_fold(1usize, |a, x| a.checked_mul(*x)) == rows;
    if agree {
        Ok([qs, ks, vs, os])
    } else {
        Err(bad())
    }
}

/// [`attention_shapes`] of an attention patch's views (`inputs` q, k, v; `outputs` o, lse);
/// `Err` also for a wrong number of views.
pub fn attention_views(
    inputs: &[crate::View],
    outputs: &[crate::View],
) -> Result<[[usize; 4]; 4], String> {
    match (inputs, outputs) {
        ([q, k, v], [o, lse]) => attention_shapes(
            &q.region.extent,
            &k.region.extent,
            &v.region.extent,
            &o.region.extent,
            &lse.region.extent,
        ),
        _ => Err(format!(
            "an attention patch takes 3 inputs and 2 outputs, not {} and {}",
            inputs.len(),
            outputs.len()
        )),
    }
}

/// The extents of an attention backward's views, made 4-D ([`attention_bhsd`]): inputs q,
/// k, v, o, do, lse and outputs dq, dk, dv (see [`PatchKind::AttentionBwd`]): q, k, v, o and
/// lse as the forward's ([`attention_shapes`]), do of o's shape, and each gradient of its
/// operand's shape. Returns `[q, k, v, o]`; `Err` names every shape.
pub fn attention_bwd_views(
    inputs: &[crate::View],
    outputs: &[crate::View],
) -> Result<[[usize; 4]; 4], String> {
    let ([q, k, v, o, d_o, lse], [dq, dk, dv]) = (inputs, outputs) else {
        return Err(format!(
            "an attention_bwd patch takes 6 inputs (q, k, v, o, do, lse) and 3 outputs (dq, dk, dv), not {} and {}",
            inputs.len(),
            outputs.len()
        ));
    };
    let e = |v: &crate::View| v.region.extent.clone();
    let bad = || {
        format!(
            "attention_bwd shapes do not agree: q {:?}, k {:?}, v {:?}, o {:?}, do {:?}, lse {:?} -> dq {:?}, dk {:?}, dv {:?}",
            e(q), e(k), e(v), e(o), e(d_o), e(lse), e(dq), e(dk), e(dv)
        )
    };
    let shapes = attention_shapes(&e(q), &e(k), &e(v), &e(o), &e(lse)).map_err(|_| bad())?;
    let same = |a: &crate::View, b: &crate::View| attention_bhsd(&e(a)) == attention_bhsd(&e(b));
    if same(d_o, o) && same(dq, q) && same(dk, k) && same(dv, v) {
        Ok(shapes)
    } else {
        Err(bad())
    }
}

/// `out[m, n] = a[m, k] * b[k, n]`.
pub static GEMM: PatchSpec = PatchSpec {
    name: "gemm",
    inputs: 2,
    outputs: 1,
    attrs: &[],
    folds: Some(CombineKind::Add),
    build: |a| {
        let s = a.shapes;
        let kd = *s[0].last().unwrap_or(&1);
        let m = s[0].iter().product::<usize>() / kd.max(1);
        let nn = s[1].iter().product::<usize>() / kd.max(1);
        Ok((
            PatchKind::Gemm {
                accumulate: false,
                epilogue: None,
            },
            vec![vec![m, nn]],
        ))
    },
    flops: |_, s| {
        let kd = *s[0].last().unwrap_or(&1);
        let m = s[0].iter().product::<usize>() / kd.max(1);
        let n = s[1].iter().product::<usize>() / kd.max(1);
        2.0 * m as f64 * n as f64 * kd as f64
    },
    contracted: |s| vec![vec![s[0].len().saturating_sub(1)], vec![0]],
};

/// Attention forward with the log-sum-exp of each row.
pub static ATTENTION: PatchSpec = PatchSpec {
    name: "attention",
    inputs: 3,
    outputs: 2,
    attrs: ATTENTION_ATTRS,
    folds: Some(CombineKind::LseMerge),
    build: |a| {
        let s = a.shapes;
        let q = &s[0];
        if !(q.len() == 4 && s[1].len() == 4 || q.len() == 3 && s[1].len() == 3) {
            return Err("attention tiles must be [batch, heads, sequence, head_dim] or [heads, sequence, head_dim]".into());
        }
        let (causal, scale, mask) = attention_attrs(a)?;
        Ok((
            PatchKind::Attention {
                causal,
                scale,
                q_offset: a.offsets.0,
                k_offset: a.offsets.1,
                mask,
                accumulate: false,
            },
            {
                // The output takes v's head dim (which may differ from q's).
                let mut o = q.clone();
                if let (Some(last), Some(dv)) = (o.last_mut(), s.get(2).and_then(|v| v.last())) {
                    *last = *dv;
                }
                vec![o, q[..q.len() - 1].to_vec()]
            },
        ))
    },
    flops: |p, s| {
        let (Some(q), Some(k)) = (attention_bhsd(&s[0]), attention_bhsd(&s[1])) else {
            return 0.0;
        };
        let pairs = attention_pairs(p, q[2], k[2]);
        4.0 * q[0] as f64 * q[1] as f64 * q[3] as f64 * pairs
    },
    contracted: |s| {
        vec![
            vec![s[0].len().saturating_sub(1)],
            vec![s[1].len().saturating_sub(2), s[1].len().saturating_sub(1)],
            vec![s[2].len().saturating_sub(2)],
        ]
    },
};

/// Attention backward: the gradients of q, k and v from the forward's output, its gradient
/// and its log-sum-exp ([`PatchKind::AttentionBwd`]).
pub static ATTENTION_BWD: PatchSpec = PatchSpec {
    name: "attention_bwd",
    inputs: 6,
    outputs: 3,
    attrs: ATTENTION_ATTRS,
    folds: Some(CombineKind::Add),
    build: |a| {
        let s = a.shapes;
        let r = s[0].len();
        let lse_rank = s.get(5).map_or(0, Vec::len);
        if !(r == 3 || r == 4) || s[..5].iter().any(|x| x.len() != r) || lse_rank + 1 != r {
            return Err("attention_bwd tiles must be q, k, v, o, do [batch, heads, sequence, head_dim] (or all without the batch) and lse [batch, heads, sequence]".into());
        }
        let (causal, scale, mask) = attention_attrs(a)?;
        Ok((
            PatchKind::AttentionBwd {
                causal,
                scale,
                q_offset: a.offsets.0,
                k_offset: a.offsets.1,
                mask,
                accumulate: false,
            },
            vec![s[0].clone(), s[1].clone(), s[2].clone()],
        ))
    },
    flops: |p, s| {
        let (Some(q), Some(k), Some(v)) = (
            attention_bhsd(&s[0]),
            attention_bhsd(&s[1]),
            s.get(2).and_then(|v| attention_bhsd(v)),
        ) else {
            return 0.0;
        };
        let pairs = attention_pairs(p, q[2], k[2]);
        // Five products per visible pair: q k^T again (d), do v^T (dv), P^T do (dv),
        // dS k (d), dS^T q (d); the forward's two are 4 d per pair: 2.5x at d = dv.
        2.0 * q[0] as f64 * q[1] as f64 * (3.0 * q[3] as f64 + 2.0 * v[3] as f64) * pairs
    },
    contracted: |s| {
        // The positions (second to last) and the head dim (last).
        let both = |x: &Vec<usize>| vec![x.len().saturating_sub(2), x.len().saturating_sub(1)];
        vec![
            both(&s[0]),
            both(&s[1]),
            both(&s[2]),
            both(&s[3]),
            both(&s[4]),
            vec![],
        ]
    },
};

/// The attributes of an attention patch (forward and backward): `causal` (a bool), `scale` (a
/// positive number), `window = [left, right]` (integers, -1 for unbounded, flash-attn's
/// `window_size`), `documents` (run-time boundaries, `crate::mask`) and `lower_right` (offsets
/// from each document's end).
pub const ATTENTION_ATTRS: &[PatchAttr] = &[
    PatchAttr::Bool("causal"),
    PatchAttr::Positive("scale"),
    PatchAttr::Window("window"),
    PatchAttr::Documents("documents"),
    PatchAttr::Bool("lower_right"),
];

/// The `causal`, `scale` and mask attributes of an attention patch (forward or backward): not
/// causal, `1/sqrt(d)` of q's head dim and no mask by default. `Err` for a malformed window
/// and for `lower_right` without documents (whose anchors are the documents' ends).
fn attention_attrs(a: &PatchArgs) -> Result<(bool, f64, AttnMask), String> {
    let d = a
        .shapes
        .first()
        .and_then(|q| q.last())
        .copied()
        .unwrap_or(1);
    let causal = (a.bool_attr)("causal") == Some(true);
    let (left, right) = match (a.ints_attr)("window") {
        None => (None, None),
        Some(w) => window(&w)?,
    };
    let lower_right = (a.bool_attr)("lower_right") == Some(true);
    if lower_right && a.documents.is_none() {
        return Err(
            "'lower_right' measures offsets from each document's end: it needs 'documents'".into(),
        );
    }
    let mask = AttnMask {
        left,
        right,
        documents: a.documents,
        lower_right,
    };
    Ok((
        causal,
        (a.float_attr)("scale").unwrap_or(1.0 / (d as f64).sqrt()),
        mask,
    ))
}

/// A window attribute `[left, right]` (flash-attn's `window_size`: -1 unbounded) as the mask's
/// bounds. `Err` unless it is two integers `>= -1`.
pub fn window(w: &[i64]) -> Result<(Option<usize>, Option<usize>), String> {
    let side = |x: i64| match x {
        -1 => Ok(None),
        x if x >= 0 => Ok(Some(x as usize)),
        x => Err(format!("a window bound is -1 (unbounded) or >= 0, not {x}")),
    };
    match w {
        [l, r] => Ok((side(*l)?, side(*r)?)),
        _ => Err(format!(
            "'window' is [left, right] (two integers, -1 for unbounded), not {} of them",
            w.len()
        )),
    }
}

/// The query/key pairs an attention patch (forward or backward) on `sq` queries and `sk` keys
/// computes: all of them, or those its causal mask and window leave visible (documents are
/// known only at run time: this counts the band's pairs, at most the batch's).
fn attention_pairs(p: &PatchKind, sq: usize, sk: usize) -> f64 {
    match p.attention_band() {
        Some((band, q0, k0)) => band.pairs(q0..q0 + sq, k0..k0 + sk, 0) as f64,
        None => sq as f64 * sk as f64,
    }
}

/// Query/key pairs a causal mask leaves visible in a tile of `sq` queries from position
/// `q_off` and `sk` keys from position `k_off` (key `k_off + c` is visible to query
/// `q_off + r` iff it is not larger).
pub fn visible_pairs(sq: usize, sk: usize, q_off: usize, k_off: usize) -> f64 {
    // For row r the count is clamp(q_off - k_off + 1 + r, 0, sk); sum over a range of x of
    // clamp(x, 0, sk) = G(hi) - G(lo) with G(n) = sum_{x=0}^{n-1} clamp(x, 0, sk).
    let sk_i = sk as i128;
    let g = |n: i128| -> i128 {
        if n <= 0 {
            0
        } else if n <= sk_i + 1 {
            n * (n - 1) / 2
        } else {
            sk_i * (sk_i + 1) / 2 + (n - sk_i - 1) * sk_i
        }
    };
    let lo = q_off as i128 - k_off as i128 + 1;
    let hi = lo + sq as i128;
    (g(hi) - g(lo)) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_and_attention_dims() {
        // k is a's last dimension, b's leading dimensions hold k, out's leading ones m.
        assert_eq!(
            gemm_dims(&[1, 64, 32], &[32, 16], &[64, 16]),
            Ok((64, 16, 32))
        );
        assert_eq!(
            gemm_dims(&[2, 32, 32], &[4, 8, 2, 8], &[2, 32, 16]),
            Ok((64, 16, 32))
        );
        assert_eq!(gemm_dims(&[64, 64], &[64], &[64]), Ok((64, 1, 64)));
        assert_eq!(gemm_dims(&[64], &[64, 8], &[8]), Ok((1, 8, 64)));
        assert_eq!(gemm_dims(&[64, 1], &[1, 8], &[64, 8]), Ok((64, 8, 1)));
        assert!(gemm_dims(&[64, 32], &[16, 16], &[64, 16]).is_err());
        assert!(gemm_dims(&[64, 0], &[0, 16], &[64, 16]).is_err());
        assert!(gemm_dims(&[], &[1], &[1]).is_err());
        // As many elements as [32, 32], but b is not laid out [k, n] with k = 32.
        let e = gemm_dims(&[64, 32], &[16, 64], &[64, 32]).unwrap_err();
        assert!(
            e.contains("b's leading dimensions do not hold k = 32"),
            "{e}"
        );
        // As many elements as [64, 16], but out is not [m, n] with m = 64.
        let e = gemm_dims(&[64, 32], &[32, 16], &[16, 64]).unwrap_err();
        assert!(e.contains("out must be m x n = 64 x 16"), "{e}");
        assert_eq!(attention_bhsd(&[4, 128, 32]), Some([1, 4, 128, 32]));
        assert_eq!(attention_bhsd(&[2, 4, 128, 32]), Some([2, 4, 128, 32]));
        assert_eq!(attention_bhsd(&[128, 32]), None);
    }

    fn view(extent: &[usize]) -> crate::View {
        crate::View {
            slot: 0,
            region: crate::Region::full(extent),
        }
    }

    #[test]
    fn attention_bwd_views_agree() {
        // GQA (4 query heads on 2 key/value heads) with another value head dim (MLA).
        let ins = [
            view(&[1, 4, 8, 16]),
            view(&[1, 2, 6, 16]),
            view(&[1, 2, 6, 8]),
            view(&[1, 4, 8, 8]),
            view(&[1, 4, 8, 8]),
            view(&[1, 4, 8]),
        ];
        let outs = [
            view(&[1, 4, 8, 16]),
            view(&[1, 2, 6, 16]),
            view(&[1, 2, 6, 8]),
        ];
        assert!(attention_bwd_views(&ins, &outs).is_ok());
        // dv of k's head dim instead of v's, a missing lse.
        let bad = [
            view(&[1, 4, 8, 16]),
            view(&[1, 2, 6, 16]),
            view(&[1, 2, 6, 16]),
        ];
        let e = attention_bwd_views(&ins, &bad).unwrap_err();
        assert!(e.contains("dv [1, 2, 6, 16]"), "{e}");
        assert!(attention_bwd_views(&ins[..5], &outs).is_err());
    }

    #[test]
    fn every_kind_has_its_spec() {
        let gemm = PatchKind::Gemm {
            accumulate: false,
            epilogue: None,
        };
        let attn = PatchKind::Attention {
            causal: true,
            scale: 1.0,
            q_offset: 0,
            k_offset: 4,
            mask: Default::default(),
            accumulate: false,
        };
        assert_eq!(gemm.spec().name, "gemm");
        assert_eq!(attn.spec().name, "attention");
        assert!(attn.is_empty(4) && !attn.is_empty(5));
        assert_eq!((GEMM.flops)(&gemm, &[vec![2, 3], vec![3, 4]]), 48.0);
        let mut g = gemm.clone();
        assert!(!g.fold(CombineKind::LseMerge) && g.fold(CombineKind::Add) && g.accumulates());
        assert_eq!(known(), "gemm, attention, attention_bwd");
        // The backward: 2.5x the forward's FLOPs at d = dv, the same causal pairs, folds adds.
        let bwd = PatchKind::AttentionBwd {
            causal: true,
            scale: 1.0,
            q_offset: 0,
            k_offset: 4,
            mask: Default::default(),
            accumulate: false,
        };
        let s = [vec![2, 8, 16], vec![2, 8, 16], vec![2, 8, 16]];
        let fwd = PatchKind::Attention {
            causal: true,
            scale: 1.0,
            q_offset: 0,
            k_offset: 4,
            mask: Default::default(),
            accumulate: false,
        };
        assert_eq!(
            (ATTENTION_BWD.flops)(&bwd, &s),
            2.5 * (ATTENTION.flops)(&fwd, &s)
        );
        assert!(bwd.is_empty(4) && !bwd.is_empty(5));
        let mut b = bwd.clone();
        assert!(!b.fold(CombineKind::LseMerge) && b.fold(CombineKind::Add) && b.accumulates());
        assert!(spec("conv").is_none());
    }
}
