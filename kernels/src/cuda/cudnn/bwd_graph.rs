//! The cuDNN operation graphs of the attention backward, as plain data (no library needed).
//!
//! [`SdpaBwdKey`] is everything a backward execution plan depends on; [`sdpa_bwd_graph`]
//! turns it into a [`GraphDesc`]. Two routes, as for the forward (`graph.rs`):
//!
//! * [`Route::Unified`]: one `CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR` op (Q, K, V, O, dO,
//!   Stats, scale in; dQ, dK, dV out), no mask. cuDNN 9.19 refuses it (the operation graph's
//!   finalize: `CUDNN_STATUS_BAD_PARAM`, `outputGraph.buildDAG()`; measured on an H100,
//!   2026-12-07, `mercury-gpu-bench --only P2b`, rows `odd.route_unified.*`), and PyTorch 2.11
//!   never builds it (its backend log on 9.19 has only the composite graph), so it is tried
//!   only when a call asks for it.
//! * [`Route::Composite`]: the graph cudnn-frontend's `CompositeSDPABackwardNode` (1.18, the
//!   one PyTorch 2.11 bundles) gives the backend, which fuses it into its flash backward:
//!
//!   | # | op | in -> out |
//!   |---|----|-----------|
//!   | 1 | MUL | dO, O -> `[b, h_q, s_q, d_v]` |
//!   | 2 | REDUCTION ADD | -> `[b, h_q, s_q, 1]` |
//!   | 3 | MUL | by 1 (by value) -> **softmax_sum** D = rowsum(dO ∘ O), f32, bound scratch |
//!   | 4 | MATMUL | Q, K^T -> S |
//!   | 5 | MUL | S, scale -> S1 |
//!   | 6 | SUB | S1, Stats -> S2 |
//!   | 7 | causal mask | GEN_INDEX row/col, (+ delta), CMP_GE, BINARY_SELECT -inf |
//!   | 8 | EXP | -> P |
//!   | 9 | RESHAPE | P -> P^T (io type) |
//!   | 10 | MATMUL | P^T, dO -> dV (GQA: all query heads, then REDUCTION ADD per group) |
//!   | 11 | MATMUL | dO, V^T -> dP |
//!   | 12 | SUB, MUL, MUL | (dP - D) ∘ P ∘ scale -> dS |
//!   | 13 | RESHAPE | dS -> dS^T (io type) |
//!   | 14 | MATMUL | dS^T, Q -> dK (GQA: then REDUCTION ADD) |
//!   | 15 | RESHAPE | K^T -> K |
//!   | 16 | MATMUL | dS, K -> **dQ_accum** (f32, bound scratch) |
//!   | 17 | IDENTITY | dQ_accum -> dQ |
//!
//!   K and V are bound transposed (`[b, h, d, s_kv]`, last two strides swapped: the same
//!   memory). The mask comes after the Stats subtraction, as the frontend puts it.
//!
//! The gradients are written in the io type, as PyTorch asks for them. Measured on cuDNN 9.19
//! (H100, 2026-12-07): declaring dQ, dK, dV f32 builds a plan for MHA that leaves most of them
//! unwritten and none for causal GQA; an ADD of the outputs' old values before each output
//! (accumulating in place) builds a plan that fails at execution (`nullptr == dq_ptr`) or none;
//! an f32 O (only read for D) gives wrong gradients (relative error 0.04 to 0.6). So a block's
//! f32 accumulation is the caller's: it adds the io-typed parts (the f32 dQ_accum scratch does
//! not hold dQ after the call: see `bwd.rs`).
//!
//! The engines picked (heuristics mode A, the first that finalises) are the ones PyTorch gets
//! for the same graph: global index 6 or 7, knob KERNEL_CFG 26, pattern `SDPA_BWD`.
//!
//! Source: cudnn-frontend `include/cudnn_frontend/node/scaled_dot_product_flash_attention.h`
//! (`CompositeSDPABackwardNode::expand_node`), `node/reshape.h`,
//! `utils/attn_score_modifiers.h` (`sliding_window_mask`); PyTorch
//! `aten/src/ATen/native/cudnn/MHA.cpp`.

use super::graph::{
    dense, uid, validate_sizes, validate_stats, Builder, DataType, GraphDesc, IoType, Mask, OpDesc,
    PwMode, RedOp, Route, Strides4,
};
use std::fmt;

/// Unique ids of the backward graph's bound tensors (beyond the forward's Q, K, V, O, STATS,
/// SCALE, FILL, DELTA of [`uid`]).
pub mod bwd_uid {
    pub const DO: i64 = 20;
    pub const DQ: i64 = 21;
    pub const DK: i64 = 22;
    pub const DV: i64 = 23;
    /// f32 `[b, h_q, s_q, 1]` scratch: D = rowsum(dO ∘ O).
    pub const SOFTMAX_SUM: i64 = 24;
    /// f32 `[b, h_q, s_q, d_qk]` scratch: dQ before its cast.
    pub const DQ_ACCUM: i64 = 25;
    /// By-value f32 1.0 (the frontend's dropout-free scale of D).
    pub const ONE: i64 = 26;
}

/// Everything a backward execution plan depends on; pointers, the scale and the causal shift
/// are per-call values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SdpaBwdKey {
    pub route: Route,
    pub io: IoType,
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
    pub d_o: Strides4,
    pub dq: Strides4,
    pub dk: Strides4,
    pub dv_: Strides4,
    /// Stats `[b, h_q, s_q, 1]` f32: the last two strides are 1.
    pub stats: Strides4,
    /// Byte alignment declared for the Stats base pointer (4, 8 or 16).
    pub stats_align: i64,
    pub mask: Mask,
}

impl fmt::Display for SdpaBwdKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "backward {:?} {} b{} hq{} hk{} sq{} sk{} d_qk{} d_v{} {:?}",
            self.route,
            self.io.name(),
            self.b,
            self.hq,
            self.hk,
            self.sq,
            self.sk,
            self.dqk,
            self.dv,
            self.mask
        )
    }
}

impl SdpaBwdKey {
    /// Checks what the fused backward requires (cudnn-frontend's `CompositeSDPABackwardNode`
    /// validation for Hopper): the sizes of [`super::graph::validate_sizes`], not
    /// `s_q = s_kv = 1`, unit innermost strides, rows 16-byte aligned, Stats strides
    /// `[sb, sh, 1, 1]`, no mask on the unified route. Errors name the offending value.
    pub fn validate(&self) -> Result<(), String> {
        validate_sizes([
            self.b, self.hq, self.hk, self.sq, self.sk, self.dqk, self.dv,
        ])?;
        if self.sq == 1 && self.sk == 1 {
            return Err("s_q = s_kv = 1 is not supported by cuDNN's fused backward".into());
        }
        for (n, s) in [
            ("q", self.q),
            ("k", self.k),
            ("v", self.v),
            ("o", self.o),
            ("dO", self.d_o),
            ("dQ", self.dq),
            ("dK", self.dk),
            ("dV", self.dv_),
        ] {
            if s[3] != 1 {
                return Err(format!("{n} innermost stride {} is not 1", s[3]));
            }
            if s.iter().any(|x| *x < 0) {
                return Err(format!("{n} has a negative stride {s:?}"));
            }
            if s[..3].iter().any(|x| x % 8 != 0) {
                return Err(format!(
                    "{n} strides {s:?} are not multiples of 8 elements (16 bytes)"
                ));
            }
        }
        validate_stats(self.stats, self.stats_align)?;
        if self.route == Route::Unified && self.mask != Mask::None {
            return Err("the unified SDPA backward operation takes no mask on this cuDNN".into());
        }
        Ok(())
    }

    /// Bytes of the f32 scratch tensors the composite graph binds: D (`[b, h_q, s_q]`) and
    /// dQ_accum (`[b, h_q, s_q, d_qk]`), each rounded up to 256 bytes; 0 on the unified route.
    pub fn scratch_bytes(&self) -> (usize, usize) {
        if self.route == Route::Unified {
            return (0, 0);
        }
        let round = |x: i64| (x as usize * 4).div_ceil(256) * 256;
        (
            round(self.b * self.hq * self.sq),
            round(self.b * self.hq * self.sq * self.dqk),
        )
    }
}

fn swap_last(s: Strides4) -> Vec<i64> {
    vec![s[0], s[1], s[3], s[2]]
}

/// The backward graph of `key` (see the module docs).
pub fn sdpa_bwd_graph(key: &SdpaBwdKey) -> GraphDesc {
    let io = DataType::from(key.io);
    let mut g = Builder::new();
    let (b, hq, hk, sq, sk, dqk, dv) = (key.b, key.hq, key.hk, key.sq, key.sk, key.dqk, key.dv);
    let q = g.bound(uid::Q, io, vec![b, hq, sq, dqk], key.q.to_vec());
    let o = g.bound(uid::O, io, vec![b, hq, sq, dv], key.o.to_vec());
    let d_o = g.bound(bwd_uid::DO, io, vec![b, hq, sq, dv], key.d_o.to_vec());
    let stats = g.bound_aligned(
        uid::STATS,
        DataType::F32,
        vec![b, hq, sq, 1],
        key.stats.to_vec(),
        key.stats_align,
    );
    let scale = g.scalar(uid::SCALE, DataType::F32);
    let dq_dims = vec![b, hq, sq, dqk];
    let dk_dims = vec![b, hk, sk, dqk];
    let dv_dims = vec![b, hk, sk, dv];
    if key.route == Route::Unified {
        let k = g.bound(uid::K, io, vec![b, hk, sk, dqk], key.k.to_vec());
        let v = g.bound(uid::V, io, vec![b, hk, sk, dv], key.v.to_vec());
        let dq = g.bound(bwd_uid::DQ, io, dq_dims, key.dq.to_vec());
        let dk = g.bound(bwd_uid::DK, io, dk_dims, key.dk.to_vec());
        let dvt = g.bound(bwd_uid::DV, io, dv_dims, key.dv_.to_vec());
        g.ops.push(OpDesc::SdpaBwd {
            q,
            k,
            v,
            o,
            d_o,
            stats,
            scale,
            dq,
            dk,
            dv: dvt,
        });
        return g.finish();
    }
    let kt = g.bound(uid::K, io, vec![b, hk, dqk, sk], swap_last(key.k));
    let vt = g.bound(uid::V, io, vec![b, hk, dv, sk], swap_last(key.v));
    let full = [b, hq, sq, sk];
    let row = [b, hq, sq, 1];

    // D = rowsum(dO ∘ O) into its f32 scratch.
    let prod = g.virt(DataType::F32, &[b, hq, sq, dv]);
    // The frontend's strides for this product (a virtual tensor; kept as it declares them).
    if let Some(t) = g.tensors.iter_mut().find(|t| t.uid == prod) {
        t.strides = vec![hq * sq * dv, sq * dv, hq * dv, 1];
    }
    g.pw(PwMode::Mul, DataType::F32, d_o, Some(o), prod);
    let rsum = g.virt(DataType::F32, &row);
    g.ops.push(OpDesc::Reduction {
        op: RedOp::Add,
        x: prod,
        y: rsum,
    });
    let one = g.scalar(bwd_uid::ONE, DataType::F32);
    let dsum = g.bound(
        bwd_uid::SOFTMAX_SUM,
        DataType::F32,
        row.to_vec(),
        dense(&row),
    );
    g.pw(PwMode::Mul, DataType::F32, rsum, Some(one), dsum);

    // P = exp(scale * Q K^T - Stats), masked.
    let s = g.virt(DataType::F32, &full);
    g.ops.push(OpDesc::Matmul { a: q, b: kt, c: s });
    let s1 = g.virt(DataType::F32, &full);
    g.pw(PwMode::Mul, DataType::F32, s, Some(scale), s1);
    let s2 = g.virt(DataType::F32, &full);
    g.pw(PwMode::Sub, DataType::F32, s1, Some(stats), s2);
    let s3 = g.causal_mask(s2, key.mask, &full);
    let p = g.virt(DataType::F32, &full);
    g.pw(PwMode::Exp, DataType::F32, s3, None, p);

    // The transposed view of a [b, h_q, s_q, s_kv] tensor, in the io type.
    let transposed = |g: &mut Builder, x: i64| {
        let y = g.virt(io, &[b, hq, sk, sq]);
        if let Some(t) = g.tensors.iter_mut().find(|t| t.uid == y) {
            t.strides = vec![hq * sq * sk, sq * sk, 1, sk];
        }
        g.ops.push(OpDesc::Reshape { x, y });
        y
    };
    // `a @ b` into a gradient output, straight or (GQA) through all query heads and a sum
    // over each group.
    let grad_out =
        |g: &mut Builder, a: i64, bm: i64, uid: i64, dims: Vec<i64>, strides: Strides4| {
            let out = g.bound(uid, io, dims.clone(), strides.to_vec());
            if hq == hk {
                g.ops.push(OpDesc::Matmul { a, b: bm, c: out });
                return;
            }
            let fullhead = g.virt(io, &[b, hq, sk, dims[3]]);
            g.ops.push(OpDesc::Matmul {
                a,
                b: bm,
                c: fullhead,
            });
            g.ops.push(OpDesc::Reduction {
                op: RedOp::Add,
                x: fullhead,
                y: out,
            });
        };

    // dV = P^T dO.
    let pt = transposed(&mut g, p);
    grad_out(&mut g, pt, d_o, bwd_uid::DV, dv_dims, key.dv_);

    // dS = P ∘ (dO V^T - D) ∘ scale.
    let dp = g.virt(DataType::F32, &full);
    g.ops.push(OpDesc::Matmul {
        a: d_o,
        b: vt,
        c: dp,
    });
    let t1 = g.virt(DataType::F32, &full);
    g.pw(PwMode::Sub, DataType::F32, dp, Some(dsum), t1);
    let t2 = g.virt(DataType::F32, &full);
    g.pw(PwMode::Mul, DataType::F32, t1, Some(p), t2);
    let ds = g.virt(DataType::F32, &full);
    g.pw(PwMode::Mul, DataType::F32, t2, Some(scale), ds);

    // dK = dS^T Q.
    let dst = transposed(&mut g, ds);
    grad_out(&mut g, dst, q, bwd_uid::DK, dk_dims, key.dk);

    // dQ = dS K, through the f32 dQ_accum scratch.
    let kr = g.virt(io, &[b, hk, sk, dqk]);
    if let Some(t) = g.tensors.iter_mut().find(|t| t.uid == kr) {
        t.strides = key.k.to_vec();
    }
    g.ops.push(OpDesc::Reshape { x: kt, y: kr });
    let acc_dims = [b, hq, sq, dqk];
    let dq_acc = g.bound(
        bwd_uid::DQ_ACCUM,
        DataType::F32,
        acc_dims.to_vec(),
        dense(&acc_dims),
    );
    g.ops.push(OpDesc::Matmul {
        a: ds,
        b: kr,
        c: dq_acc,
    });
    let out = g.bound(bwd_uid::DQ, io, dq_dims, key.dq.to_vec());
    g.pw(PwMode::Identity, DataType::F32, dq_acc, None, out);
    g.finish()
}

#[cfg(test)]
mod tests {
    use super::super::graph::tests::check_topological;
    use super::*;

    fn key(route: Route, mask: Mask, hk: i64) -> SdpaBwdKey {
        let (b, hq, sq, sk, d, dv) = (2, 8, 256, 384, 128, 64);
        let dense4 = |h: i64, s: i64, d: i64| [h * s * d, s * d, d, 1];
        SdpaBwdKey {
            route,
            io: IoType::Bf16,
            b,
            hq,
            hk,
            sq,
            sk,
            dqk: d,
            dv,
            q: dense4(hq, sq, d),
            k: dense4(hk, sk, d),
            v: dense4(hk, sk, dv),
            o: dense4(hq, sq, dv),
            d_o: dense4(hq, sq, dv),
            dq: dense4(hq, sq, d),
            dk: dense4(hk, sk, d),
            dv_: dense4(hk, sk, dv),
            stats: [hq * sq, sq, 1, 1],
            stats_align: 16,
            mask,
        }
    }

    fn count(g: &GraphDesc, f: impl Fn(&OpDesc) -> bool) -> usize {
        g.ops.iter().filter(|o| f(o)).count()
    }

    #[test]
    fn composite_mha_graph_has_the_frontends_ops() {
        let k = key(Route::Composite, Mask::None, 8);
        k.validate().unwrap();
        let g = sdpa_bwd_graph(&k);
        check_topological(&g);
        // 3 for D, matmul, scale, sub, exp, reshape, dV matmul, dP matmul, sub, mul, mul,
        // reshape, dK matmul, reshape K, dQ matmul, identity.
        assert_eq!(g.ops.len(), 18);
        assert_eq!(count(&g, |o| matches!(o, OpDesc::Matmul { .. })), 5);
        assert_eq!(count(&g, |o| matches!(o, OpDesc::Reshape { .. })), 3);
        assert_eq!(
            g.bound_uids(),
            vec![
                uid::Q,
                uid::K,
                uid::V,
                uid::O,
                uid::STATS,
                uid::SCALE,
                bwd_uid::DO,
                bwd_uid::DQ,
                bwd_uid::DK,
                bwd_uid::DV,
                bwd_uid::SOFTMAX_SUM,
                bwd_uid::DQ_ACCUM,
                bwd_uid::ONE,
            ]
        );
        // K and V bound transposed, the same memory.
        assert_eq!(g.tensor(uid::K).unwrap().dims, vec![2, 8, 128, 384]);
        assert_eq!(g.tensor(uid::V).unwrap().dims, vec![2, 8, 64, 384]);
        assert_eq!(
            g.tensor(uid::V).unwrap().strides,
            vec![8 * 384 * 64, 384 * 64, 1, 64]
        );
        // The gradients in the io type; the scratch in f32.
        assert_eq!(g.tensor(bwd_uid::DQ).unwrap().dtype, DataType::Bf16);
        assert_eq!(g.tensor(bwd_uid::DQ_ACCUM).unwrap().dtype, DataType::F32);
        assert_eq!(k.scratch_bytes(), (2 * 8 * 256 * 4, 2 * 8 * 256 * 128 * 4));
    }

    #[test]
    fn gqa_sums_each_group_and_causal_masks_after_the_stats() {
        let k = key(Route::Composite, Mask::CausalShifted, 2);
        k.validate().unwrap();
        let g = sdpa_bwd_graph(&k);
        check_topological(&g);
        // Two group sums (dK, dV) besides the row sum of D.
        assert_eq!(count(&g, |o| matches!(o, OpDesc::Reduction { .. })), 3);
        assert!(g.bound_uids().contains(&uid::DELTA));
        // The mask's compare reads the Stats-subtracted logits: the SUB precedes GEN_INDEX.
        let pos = |m: PwMode| {
            g.ops
                .iter()
                .position(|o| matches!(o, OpDesc::Pointwise { mode, .. } if *mode == m))
                .unwrap()
        };
        assert!(pos(PwMode::Sub) < pos(PwMode::GenIndex));
        assert!(pos(PwMode::BinarySelect) < pos(PwMode::Exp));
    }

    #[test]
    fn unified_graph_is_one_op_and_takes_no_mask() {
        let k = key(Route::Unified, Mask::None, 2);
        k.validate().unwrap();
        let g = sdpa_bwd_graph(&k);
        check_topological(&g);
        assert_eq!(g.ops.len(), 1);
        assert_eq!(k.scratch_bytes(), (0, 0));
        assert!(key(Route::Unified, Mask::Causal, 2).validate().is_err());
    }

    #[test]
    fn validation_names_the_shape() {
        let mut k = key(Route::Composite, Mask::None, 8);
        k.dv = 264;
        assert!(k.validate().unwrap_err().contains("d_v = 264"));
        let mut k = key(Route::Composite, Mask::None, 3);
        k.hk = 3;
        assert!(k.validate().unwrap_err().contains("h_k = 3"));
        let mut k = key(Route::Composite, Mask::None, 8);
        k.sq = 1;
        k.sk = 1;
        assert!(k.validate().unwrap_err().contains("s_q = s_kv = 1"));
        let mut k = key(Route::Composite, Mask::None, 8);
        k.dq[2] = 132; // rows of 132 bf16: not 16-byte aligned
        assert!(k.validate().unwrap_err().contains("dQ strides"));
    }
}
