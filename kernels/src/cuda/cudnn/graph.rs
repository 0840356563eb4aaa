//! The cuDNN operation graphs of the attention patch, described as plain data.
//!
//! [`SdpaKey`] is everything an execution plan depends on (dtypes, every dimension, every
//! stride, the mask kind and the route); [`sdpa_graph`] turns a key into a [`GraphDesc`]:
//! tensors (unique id, dtype, dims, strides, virtual / by-value) and operations in topological
//! order. `backend.rs` materialises a `GraphDesc` through the backend API; nothing here needs
//! the library or a GPU, so the graphs and the plan-cache keys are unit-tested on any machine.
//!
//! Two routes (see `../shared/docs/cudnn-sdpa-notes.md`, sections 2 and 3):
//!
//! * [`Route::Unified`]: one `CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR` op (cuDNN >= 9.13.1).
//!   No mask before 9.21, so it serves non-causal blocks.
//! * [`Route::Composite`]: the 14-op graph (matmul, scale, index compare + select for the
//!   causal mask, max / sub / exp / sum / log for the softmax statistics, divide, matmul) that
//!   the backend fuses into one flash kernel. Serves causal blocks; with
//!   [`Mask::CausalShifted`] a by-value INT32 `delta` is added to the row index before the
//!   compare (key `j` is visible to query `i` when `i + delta >= j`), so the global offsets of
//!   a ring's blocks need no new plan.
//!
//! Shapes follow cuDNN's 4-D convention: Q `[b, h_q, s_q, d_qk]`, K `[b, h_k, s_kv, d_qk]`,
//! V `[b, h_k, s_kv, d_v]`, O `[b, h_q, s_q, d_v]`, Stats `[b, h_q, s_q, 1]` (f32, natural-log
//! LSE of the scaled, masked logits). GQA is `h_k < h_q` with `h_q % h_k == 0`.

use std::fmt;

/// Element type of Q, K, V (and of O unless [`SdpaKey::o_f32`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoType {
    Bf16,
    F16,
}

impl IoType {
    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            IoType::Bf16 => "bf16",
            IoType::F16 => "f16",
        }
    }
}

/// Data types that appear in the graphs (cuDNN's `cudnnDataType_t` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    F32,
    F16,
    Bf16,
    I32,
    Bool,
}

impl From<IoType> for DataType {
    fn from(t: IoType) -> Self {
        match t {
            IoType::Bf16 => DataType::Bf16,
            IoType::F16 => DataType::F16,
        }
    }
}

/// The causal mask of one block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mask {
    /// Every key visible.
    None,
    /// Top-left diagonal: key `j` visible to query `i` when `i >= j`.
    Causal,
    /// Shifted diagonal: visible when `i + delta >= j`, `delta > 0` passed by value at run time.
    CausalShifted,
}

/// Which cuDNN graph computes the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// The unified SDPA forward operation (no mask on cuDNN < 9.21).
    Unified,
    /// The composite matmul / pointwise / reduction graph.
    Composite,
}

/// Element strides of a 4-D tensor, outermost first.
pub type Strides4 = [i64; 4];

/// Everything an execution plan depends on. Two calls with equal keys can share a plan;
/// pointers, the scale and the causal shift are per-call values (the variant pack).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SdpaKey {
    pub route: Route,
    pub io: IoType,
    /// O written in f32 instead of the io type.
    pub o_f32: bool,
    pub b: i64,
    pub hq: i64,
    pub hk: i64,
    pub sq: i64,
    pub sk: i64,
    pub dqk: i64,
    pub dv: i64,
    pub q: Strides4,
    pub k: Strides4,
    pub v: Strides4,
    pub o: Strides4,
    /// Stats `[b, h_q, s_q, 1]`: the last two strides are 1.
    pub stats: Strides4,
    /// Byte alignment declared for the Stats base pointer (4, 8 or 16: a Stats view into a
    /// larger slot may start at any row). Q, K, V and O are always declared 16.
    pub stats_align: i64,
    pub mask: Mask,
}

impl fmt::Display for SdpaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} {} b{} hq{} hk{} sq{} sk{} d_qk{} d_v{} {:?}{}",
            self.route,
            self.io.name(),
            self.b,
            self.hq,
            self.hk,
            self.sq,
            self.sk,
            self.dqk,
            self.dv,
            self.mask,
            if self.o_f32 { " o=f32" } else { "" }
        )
    }
}

/// Largest head dimension the fused kernels take on Hopper (cudnn-frontend's support surface).
pub const MAX_HEAD_DIM: i64 = 256;

impl SdpaKey {
    /// Checks what the fused kernels require (cudnn-frontend's `sdpa_support_surface.h`):
    /// positive sizes, `h_q % h_k == 0`, head dims multiples of 8 and at most 256, unit
    /// innermost strides, strides that keep every row 16-byte aligned, Stats strides
    /// `[sb, sh, 1, 1]`, and no mask on the unified route. Whether the loaded library accepts
    /// a valid key (e.g. `d_v != d_qk`) is only known when its plan is finalised. Errors name
    /// the offending value; nothing is clamped or guessed.
    pub fn validate(&self) -> Result<(), String> {
        validate_sizes([
            self.b, self.hq, self.hk, self.sq, self.sk, self.dqk, self.dv,
        ])?;
        for (n, s) in [("q", self.q), ("k", self.k), ("v", self.v), ("o", self.o)] {
            if s[3] != 1 {
                return Err(format!("{n} innermost stride {} is not 1", s[3]));
            }
            if s.iter().any(|x| *x < 0) {
                return Err(format!("{n} has a negative stride {s:?}"));
            }
        }
        for (n, s) in [("q", self.q), ("k", self.k), ("v", self.v)] {
            if s[..3].iter().any(|x| x % 8 != 0) {
                return Err(format!(
                    "{n} strides {s:?} are not multiples of 8 elements (16 bytes)"
                ));
            }
        }
        if self.o_f32 {
            // Measured on cuDNN 9.19 (H200, 2026-11-30, `mercury-gpu-bench --only P2c`): both
            // routes finalise a plan for an f32 O descriptor and then write wrong values.
            return Err(
                "an f32 O is refused: cuDNN 9.19 accepts it and computes wrong values \
                        (write the io type and widen afterwards)"
                    .into(),
            );
        }
        if self.o[..3].iter().any(|x| x % 8 != 0) {
            return Err(format!(
                "o strides {:?} are not multiples of 8 elements (16 bytes)",
                self.o
            ));
        }
        validate_stats(self.stats, self.stats_align)?;
        if self.route == Route::Unified && self.mask != Mask::None {
            return Err("the unified SDPA operation takes no mask on this cuDNN".into());
        }
        Ok(())
    }
}

/// Sizes `[b, h_q, h_k, s_q, s_kv, d_qk, d_v]`: positive, `h_q % h_k == 0`, head dims
/// multiples of 8 up to [`MAX_HEAD_DIM`] (cudnn-frontend's support surface on Hopper).
pub(super) fn validate_sizes(sizes: [i64; 7]) -> Result<(), String> {
    let names = ["b", "h_q", "h_k", "s_q", "s_kv", "d_qk", "d_v"];
    for (n, v) in names.iter().zip(sizes) {
        if v <= 0 {
            return Err(format!("{n} = {v} must be positive"));
        }
    }
    let [_, hq, hk, _, _, dqk, dv] = sizes;
    if hq % hk != 0 {
        return Err(format!("h_q = {hq} is not a multiple of h_k = {hk}"));
    }
    for (n, d) in [("d_qk", dqk), ("d_v", dv)] {
        if d % 8 != 0 || d > MAX_HEAD_DIM {
            return Err(format!(
                "{n} = {d}: cuDNN fused attention needs a multiple of 8 up to {MAX_HEAD_DIM}"
            ));
        }
    }
    Ok(())
}

/// Stats `[b, h_q, s_q, 1]` strides `[sb, sh, 1, 1]` and a declared alignment of 4, 8 or 16.
pub(super) fn validate_stats(strides: Strides4, align: i64) -> Result<(), String> {
    if ![4, 8, 16].contains(&align) {
        return Err(format!("stats alignment {align} is not 4, 8 or 16 bytes"));
    }
    if strides[2] != 1 || strides[3] != 1 || strides[..2].iter().any(|x| *x < 0) {
        return Err(format!("stats strides {strides:?} must be [sb, sh, 1, 1]"));
    }
    Ok(())
}

/// Unique ids of the tensors the caller binds (the variant pack).
pub mod uid {
    pub const Q: i64 = 1;
    pub const K: i64 = 2;
    pub const V: i64 = 3;
    pub const O: i64 = 4;
    pub const STATS: i64 = 5;
    /// By-value f32 softmax scale.
    pub const SCALE: i64 = 6;
    /// By-value f32 fill for masked logits (-inf).
    pub const FILL: i64 = 7;
    /// By-value i32 diagonal shift of [`super::Mask::CausalShifted`].
    pub const DELTA: i64 = 8;
    /// First id of the virtual (intermediate) tensors.
    pub const FIRST_VIRTUAL: i64 = 100;
}

/// One tensor of a graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorDesc {
    pub uid: i64,
    pub dtype: DataType,
    pub dims: Vec<i64>,
    pub strides: Vec<i64>,
    /// Intermediate: never bound to memory.
    pub is_virtual: bool,
    /// A host scalar passed by value in the variant pack.
    pub by_value: bool,
    /// Declared byte alignment of the bound pointer.
    pub align: i64,
    /// The unique id of this tensor's ragged-offset tensor (cuDNN's variable-sequence layout:
    /// `CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC`; it must come earlier in the graph's tensors).
    pub ragged: Option<i64>,
}

/// Pointwise modes used by the graphs (`cudnnPointwiseMode_t` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PwMode {
    Add,
    Sub,
    Mul,
    Div,
    Exp,
    Log,
    CmpGe,
    CmpLt,
    LogicalAnd,
    GenIndex,
    BinarySelect,
    /// `y = x` (a cast when the types differ).
    Identity,
}

/// Reduction operators used by the graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedOp {
    Max,
    Add,
}

/// One operation; tensors are referred to by unique id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpDesc {
    /// The unified SDPA forward operation.
    SdpaFwd {
        q: i64,
        k: i64,
        v: i64,
        o: i64,
        stats: i64,
        scale: i64,
    },
    /// `c = a @ b` over the last two dims, batch dims broadcast; f32 compute.
    Matmul { a: i64, b: i64, c: i64 },
    /// As `Matmul`, with the GEMM's `m`, `n` or `k` read per batch entry from INT32
    /// `[b, 1, 1, 1]` tensors (cuDNN's variable sequence lengths).
    MatmulVarlen {
        a: i64,
        b: i64,
        c: i64,
        m: Option<i64>,
        n: Option<i64>,
        k: Option<i64>,
    },
    /// `y = mode(x[, b][, t])` with `prec` math precision; `axis` for `GenIndex`.
    Pointwise {
        mode: PwMode,
        prec: DataType,
        x: i64,
        b: Option<i64>,
        t: Option<i64>,
        y: i64,
        axis: Option<i64>,
    },
    /// `y = reduce(x)` over the dims where `y` has extent 1 (or a divisor of `x`'s: groups
    /// of heads summed); f32 compute.
    Reduction { op: RedOp, x: i64, y: i64 },
    /// `y` is `x` seen with other dims and strides (no data moves; a transpose view).
    Reshape { x: i64, y: i64 },
    /// The unified SDPA backward operation (`CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR`).
    SdpaBwd {
        q: i64,
        k: i64,
        v: i64,
        o: i64,
        d_o: i64,
        stats: i64,
        scale: i64,
        dq: i64,
        dk: i64,
        dv: i64,
    },
}

/// A whole operation graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphDesc {
    pub tensors: Vec<TensorDesc>,
    /// Topological order.
    pub ops: Vec<OpDesc>,
}

impl GraphDesc {
    /// The tensor with unique id `uid`.
    pub fn tensor(&self, uid: i64) -> Option<&TensorDesc> {
        self.tensors.iter().find(|t| t.uid == uid)
    }

    /// Unique ids the variant pack must bind (every non-virtual tensor), in id order.
    pub fn bound_uids(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .tensors
            .iter()
            .filter(|t| !t.is_virtual)
            .map(|t| t.uid)
            .collect();
        v.sort_unstable();
        v
    }
}

pub(super) fn dense(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Builds a [`GraphDesc`]: tensors with fresh virtual ids, operations in program order.
pub(super) struct Builder {
    pub(super) tensors: Vec<TensorDesc>,
    pub(super) ops: Vec<OpDesc>,
    pub(super) next: i64,
}

impl Builder {
    pub(super) fn new() -> Self {
        Builder {
            tensors: Vec::new(),
            ops: Vec::new(),
            next: uid::FIRST_VIRTUAL,
        }
    }

    pub(super) fn finish(self) -> GraphDesc {
        GraphDesc {
            tensors: self.tensors,
            ops: self.ops,
        }
    }

    pub(super) fn bound(
        &mut self,
        uid: i64,
        dtype: DataType,
        dims: Vec<i64>,
        strides: Vec<i64>,
    ) -> i64 {
        self.bound_aligned(uid, dtype, dims, strides, 16)
    }

    pub(super) fn bound_aligned(
        &mut self,
        uid: i64,
        dtype: DataType,
        dims: Vec<i64>,
        strides: Vec<i64>,
        align: i64,
    ) -> i64 {
        self.tensors.push(TensorDesc {
            uid,
            dtype,
            dims,
            strides,
            is_virtual: false,
            by_value: false,
            align,
            ragged: None,
        });
        uid
    }

    pub(super) fn scalar(&mut self, uid: i64, dtype: DataType) -> i64 {
        self.tensors.push(TensorDesc {
            uid,
            dtype,
            dims: vec![1; 4],
            strides: vec![1; 4],
            is_virtual: false,
            by_value: true,
            align: 16,
            ragged: None,
        });
        uid
    }

    pub(super) fn virt(&mut self, dtype: DataType, dims: &[i64]) -> i64 {
        let uid = self.next;
        self.next += 1;
        self.tensors.push(TensorDesc {
            uid,
            dtype,
            dims: dims.to_vec(),
            strides: dense(dims),
            is_virtual: true,
            by_value: false,
            align: 16,
            ragged: None,
        });
        uid
    }

    pub(super) fn pw(&mut self, mode: PwMode, prec: DataType, x: i64, b: Option<i64>, y: i64) {
        self.ops.push(OpDesc::Pointwise {
            mode,
            prec,
            x,
            b,
            t: None,
            y,
            axis: None,
        });
    }
}

impl Builder {
    /// The by-value -inf fill of masked logits ([`uid::FILL`]), declared once per graph.
    pub(super) fn fill(&mut self) -> i64 {
        if self.tensors.iter().all(|t| t.uid != uid::FILL) {
            self.scalar(uid::FILL, DataType::F32);
        }
        uid::FILL
    }

    /// `x` with the logits `mask` hides set to the by-value fill ([`uid::FILL`], -inf): row and
    /// column indices (GEN_INDEX on axes 2 and 3), the row shifted by the by-value INT32
    /// [`uid::DELTA`] for [`Mask::CausalShifted`], `row >= col` kept (BINARY_SELECT).
    /// `Mask::None` returns `x` itself.
    pub(super) fn causal_mask(&mut self, x: i64, mask: Mask, full: &[i64]) -> i64 {
        if mask == Mask::None {
            return x;
        }
        let fill = self.fill();
        let index = |g: &mut Builder, axis: i64| {
            let y = g.virt(DataType::I32, full);
            g.ops.push(OpDesc::Pointwise {
                mode: PwMode::GenIndex,
                prec: DataType::F32,
                x,
                b: None,
                t: None,
                y,
                axis: Some(axis),
            });
            y
        };
        let r = index(self, 2);
        let c = index(self, 3);
        let r = if mask == Mask::CausalShifted {
            let delta = self.scalar(uid::DELTA, DataType::I32);
            let rs = self.virt(DataType::I32, full);
            self.pw(PwMode::Add, DataType::I32, r, Some(delta), rs);
            rs
        } else {
            r
        };
        let keep = self.virt(DataType::Bool, full);
        self.pw(PwMode::CmpGe, DataType::Bool, r, Some(c), keep);
        let y = self.virt(DataType::F32, full);
        self.ops.push(OpDesc::Pointwise {
            mode: PwMode::BinarySelect,
            prec: DataType::F32,
            x,
            b: Some(fill),
            t: Some(keep),
            y,
            axis: None,
        });
        y
    }
}

impl Builder {
    /// The composite graph's tail (cudnn-frontend's `softmax` node with Stats, then bmm2):
    /// `Stats = max + ln(sum(exp(logits - max)))` into `stats`, `P = exp(..) / sum` in the io
    /// type `io`, `o = P @ v`; `varlen` gives bmm2's per-entry M and K overrides (`seq_q`,
    /// `seq_kv`). `full` is the logits' shape `[b, h_q, s_q, s_kv]`.
    pub(super) fn softmax_pv(
        &mut self,
        logits: i64,
        (stats, v, o): (i64, i64, i64),
        io: DataType,
        full: &[i64],
        varlen: Option<(i64, i64)>,
    ) {
        let row = [full[0], full[1], full[2], 1];
        let m = self.virt(DataType::F32, &row);
        self.ops.push(OpDesc::Reduction {
            op: RedOp::Max,
            x: logits,
            y: m,
        });
        let d = self.virt(DataType::F32, full);
        self.pw(PwMode::Sub, DataType::F32, logits, Some(m), d);
        let e = self.virt(DataType::F32, full);
        self.pw(PwMode::Exp, DataType::F32, d, None, e);
        let z = self.virt(DataType::F32, &row);
        self.ops.push(OpDesc::Reduction {
            op: RedOp::Add,
            x: e,
            y: z,
        });
        let lnz = self.virt(DataType::F32, &row);
        self.pw(PwMode::Log, DataType::F32, z, None, lnz);
        self.pw(PwMode::Add, DataType::F32, m, Some(lnz), stats);
        // P carries the io type: the second matmul's A operand must (cudnn-frontend's
        // "bmm2 aType").
        let p = self.virt(io, full);
        self.pw(PwMode::Div, DataType::F32, e, Some(z), p);
        self.ops.push(match varlen {
            None => OpDesc::Matmul { a: p, b: v, c: o },
            Some((seq_q, seq_kv)) => OpDesc::MatmulVarlen {
                a: p,
                b: v,
                c: o,
                m: Some(seq_q),
                n: None,
                k: Some(seq_kv),
            },
        });
    }
}

/// The graph that computes `key` (see the module docs for the two routes).
pub fn sdpa_graph(key: &SdpaKey) -> GraphDesc {
    let io = DataType::from(key.io);
    let o_type = if key.o_f32 { DataType::F32 } else { io };
    let mut g = Builder::new();
    let (b, hq, hk, sq, sk, dqk, dv) = (key.b, key.hq, key.hk, key.sq, key.sk, key.dqk, key.dv);
    let q = g.bound(uid::Q, io, vec![b, hq, sq, dqk], key.q.to_vec());
    let v = g.bound(uid::V, io, vec![b, hk, sk, dv], key.v.to_vec());
    let o = g.bound(uid::O, o_type, vec![b, hq, sq, dv], key.o.to_vec());
    let stats = g.bound_aligned(
        uid::STATS,
        DataType::F32,
        vec![b, hq, sq, 1],
        key.stats.to_vec(),
        key.stats_align,
    );
    let scale = g.scalar(uid::SCALE, DataType::F32);
    match key.route {
        Route::Unified => {
            let k = g.bound(uid::K, io, vec![b, hk, sk, dqk], key.k.to_vec());
            g.ops.push(OpDesc::SdpaFwd {
                q,
                k,
                v,
                o,
                stats,
                scale,
            });
        }
        Route::Composite => {
            // K^T is the same memory as K: dims [b, h_k, d, s_kv], last two strides swapped.
            let kt = g.bound(
                uid::K,
                io,
                vec![b, hk, dqk, sk],
                vec![key.k[0], key.k[1], key.k[3], key.k[2]],
            );
            let full = [b, hq, sq, sk];
            let s = g.virt(DataType::F32, &full);
            g.ops.push(OpDesc::Matmul { a: q, b: kt, c: s });
            let s1 = g.virt(DataType::F32, &full);
            g.pw(PwMode::Mul, DataType::F32, s, Some(scale), s1);
            let logits = g.causal_mask(s1, key.mask, &full);
            g.softmax_pv(logits, (stats, v, o), io, &full, None);
        }
    }
    g.finish()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::collections::HashSet;

    fn key(route: Route, mask: Mask) -> SdpaKey {
        let (b, hq, hk, sq, sk, d) = (2, 8, 2, 256, 384, 128);
        SdpaKey {
            route,
            io: IoType::Bf16,
            o_f32: false,
            b,
            hq,
            hk,
            sq,
            sk,
            dqk: d,
            dv: d,
            q: [hq * sq * d, sq * d, d, 1],
            k: [hk * sk * d, sk * d, d, 1],
            v: [hk * sk * d, sk * d, d, 1],
            o: [hq * sq * d, sq * d, d, 1],
            stats: [hq * sq, sq, 1, 1],
            stats_align: 16,
            mask,
        }
    }

    /// Every op reads tensors defined earlier (bound or written by an earlier op), writes a
    /// tensor nobody else writes, and every virtual tensor is written before it is read.
    pub(in crate::cuda::cudnn) fn check_topological(g: &GraphDesc) {
        let mut defined: HashSet<i64> = g
            .tensors
            .iter()
            .filter(|t| !t.is_virtual)
            .map(|t| t.uid)
            .collect();
        let mut written = HashSet::new();
        for op in &g.ops {
            let (ins, outs): (Vec<i64>, Vec<i64>) = match op {
                OpDesc::SdpaFwd {
                    q,
                    k,
                    v,
                    o,
                    stats,
                    scale,
                } => (vec![*q, *k, *v, *scale], vec![*o, *stats]),
                OpDesc::Matmul { a, b, c } => (vec![*a, *b], vec![*c]),
                OpDesc::MatmulVarlen { a, b, c, m, n, k } => {
                    let mut i = vec![*a, *b];
                    i.extend(m.iter().chain(n.iter()).chain(k.iter()));
                    (i, vec![*c])
                }
                OpDesc::Pointwise { x, b, t, y, .. } => {
                    let mut i = vec![*x];
                    i.extend(b.iter().chain(t.iter()));
                    (i, vec![*y])
                }
                OpDesc::Reduction { x, y, .. } | OpDesc::Reshape { x, y } => (vec![*x], vec![*y]),
                OpDesc::SdpaBwd {
                    q,
                    k,
                    v,
                    o,
                    d_o,
                    stats,
                    scale,
                    dq,
                    dk,
                    dv,
                } => (
                    vec![*q, *k, *v, *o, *d_o, *stats, *scale],
                    vec![*dq, *dk, *dv],
                ),
            };
            for i in ins {
                assert!(defined.contains(&i), "{op:?} reads {i} before it exists");
                assert!(g.tensor(i).is_some());
            }
            for o in outs {
                assert!(written.insert(o), "{o} written twice");
                defined.insert(o);
            }
        }
        for (i, t) in g.tensors.iter().enumerate() {
            if let Some(r) = t.ragged {
                let at = g.tensors.iter().position(|x| x.uid == r);
                assert!(
                    at.is_some_and(|at| at < i),
                    "ragged offset {r} of {} not declared before it",
                    t.uid
                );
            }
            if t.is_virtual {
                assert!(written.contains(&t.uid), "virtual {} never written", t.uid);
            }
            assert_eq!(t.dims.len(), t.strides.len());
        }
        let uids: HashSet<i64> = g.tensors.iter().map(|t| t.uid).collect();
        assert_eq!(uids.len(), g.tensors.len(), "duplicate unique ids");
    }

    #[test]
    fn unified_graph_is_one_op() {
        let k = key(Route::Unified, Mask::None);
        k.validate().unwrap();
        let g = sdpa_graph(&k);
        check_topological(&g);
        assert_eq!(g.ops.len(), 1);
        assert_eq!(
            g.bound_uids(),
            vec![uid::Q, uid::K, uid::V, uid::O, uid::STATS, uid::SCALE]
        );
        let kt = g.tensor(uid::K).unwrap();
        assert_eq!(kt.dims, vec![2, 2, 384, 128]);
        assert_eq!(g.tensor(uid::STATS).unwrap().dtype, DataType::F32);
    }

    #[test]
    fn composite_causal_graph_has_the_fourteen_ops() {
        let k = key(Route::Composite, Mask::Causal);
        k.validate().unwrap();
        let g = sdpa_graph(&k);
        check_topological(&g);
        assert_eq!(g.ops.len(), 14);
        // K^T: the same memory with the last two dims and strides swapped.
        let kt = g.tensor(uid::K).unwrap();
        assert_eq!(kt.dims, vec![2, 2, 128, 384]);
        assert_eq!(kt.strides, vec![2 * 384 * 128, 384 * 128, 1, 128]);
        // P carries the io type, the statistics are f32 and bound.
        let p_writer = g
            .ops
            .iter()
            .find_map(|op| match op {
                OpDesc::Pointwise {
                    mode: PwMode::Div,
                    y,
                    ..
                } => Some(*y),
                _ => None,
            })
            .unwrap();
        assert_eq!(g.tensor(p_writer).unwrap().dtype, DataType::Bf16);
        assert!(!g.tensor(uid::STATS).unwrap().is_virtual);
        assert_eq!(
            g.bound_uids(),
            vec![
                uid::Q,
                uid::K,
                uid::V,
                uid::O,
                uid::STATS,
                uid::SCALE,
                uid::FILL
            ]
        );
    }

    #[test]
    fn shifted_mask_adds_the_delta() {
        let g = sdpa_graph(&key(Route::Composite, Mask::CausalShifted));
        check_topological(&g);
        assert_eq!(g.ops.len(), 15);
        assert!(g.bound_uids().contains(&uid::DELTA));
        assert_eq!(g.tensor(uid::DELTA).unwrap().dtype, DataType::I32);
        assert!(g.tensor(uid::DELTA).unwrap().by_value);
        let unmasked = sdpa_graph(&key(Route::Composite, Mask::None));
        check_topological(&unmasked);
        assert_eq!(unmasked.ops.len(), 10);
    }

    #[test]
    fn keys_distinguish_strides_and_masks() {
        use std::collections::HashMap;
        let a = key(Route::Composite, Mask::Causal);
        let mut b = a;
        b.q[1] += 8; // a view into a wider slot
        let c = key(Route::Composite, Mask::CausalShifted);
        let mut cache = HashMap::new();
        for (i, k) in [a, b, c, a].iter().enumerate() {
            cache.entry(*k).or_insert(i);
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache[&a], 0);
    }

    #[test]
    fn validation_names_the_shape() {
        let mut k = key(Route::Unified, Mask::None);
        k.dqk = 100;
        assert!(k.validate().unwrap_err().contains("d_qk = 100"));
        let mut k = key(Route::Unified, Mask::None);
        k.dv = 264;
        assert!(k.validate().unwrap_err().contains("d_v = 264"));
        let mut k = key(Route::Unified, Mask::None);
        k.hk = 3;
        assert!(k.validate().unwrap_err().contains("h_k = 3"));
        let mut k = key(Route::Unified, Mask::None);
        k.q[2] = 132;
        assert!(k.validate().unwrap_err().contains("multiples of 8"));
        let mut k = key(Route::Unified, Mask::None);
        k.v[3] = 2;
        assert!(k.validate().is_err());
        assert!(key(Route::Unified, Mask::Causal).validate().is_err());
        let mut k = key(Route::Unified, Mask::None);
        k.o_f32 = true;
        assert!(k.validate().unwrap_err().contains("f32 O is refused"));
        let mut k = key(Route::Unified, Mask::None);
        k.stats_align = 2;
        assert!(k.validate().is_err());
        k.stats_align = 8;
        k.validate().unwrap();
        let mut k = key(Route::Composite, Mask::None);
        k.dv = 64; // MLA-style d_v != d_qk is a valid key
        k.v = [2 * 384 * 64, 384 * 64, 64, 1];
        k.o = [8 * 256 * 64, 256 * 64, 64, 1];
        k.validate().unwrap();
    }
}
