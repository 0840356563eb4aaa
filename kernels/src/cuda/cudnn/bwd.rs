//! The attention backward of the cuDNN patch: [`SdpaBwdCall`] (one block's dQ, dK, dV from Q,
//! K, V, O, dO and the forward's Stats), its plans (cached per [`SdpaBwdKey`]) and
//! [`CudnnAttention::backward`].
//!
//! Semantics (the gradients of [`crate::cpu::attention`] for rows that see at least one key):
//! with P = exp(scale q·k - lse) over the visible keys (lse the forward's Stats) and
//! D = rowsum(dO ∘ O), dV = Pᵀ dO, dS = P ∘ (dO Vᵀ - D), dK = scale dSᵀ Q, dQ = scale dS K; GQA
//! sums dK and dV over each group's query heads. A ring's block gets the *global* O and lse of
//! its query rows, so its dQ is the partial sum over its keys and its dK, dV the partial sums
//! over its queries. Blocks whose causal shift leaves rows with no visible key are refused
//! (`delta < 0`: the caller splits; those rows have zero gradients).

use super::bwd_graph::{bwd_uid, sdpa_bwd_graph, SdpaBwdKey};
use super::graph::{uid, IoType, Mask, Route};
use super::{
    alignment, cached_plan, cudnn_err, mask_for, version_string, visible_pairs, CudnnAttention,
    ExecPlan, State, Tensor4,
};
use crate::cuda::error::{KernelError, Result};
use cudarc::driver::CudaStream;
use std::ffi::c_void;
use std::sync::Arc;

/// One fused attention backward: Q `[b, hq, sq, dqk]`, K `[b, hk, sk, dqk]`, V `[b, hk, sk, dv]`,
/// O and dO `[b, hq, sq, dv]` in `io`; Stats `[b, hq, sq, 1]` f32 (the forward's natural-log
/// LSE of the scaled logits); dQ, dK, dV shaped as Q, K, V, written in `io`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdpaBwdCall {
    pub io: IoType,
    pub b: usize,
    pub hq: usize,
    pub hk: usize,
    pub sq: usize,
    pub sk: usize,
    pub dqk: usize,
    pub dv: usize,
    pub q: Tensor4,
    pub k: Tensor4,
    pub v: Tensor4,
    pub o: Tensor4,
    pub d_o: Tensor4,
    pub stats: Tensor4,
    pub grad_q: Tensor4,
    pub grad_k: Tensor4,
    pub grad_v: Tensor4,
    /// Softmax scale applied to `q . k` in the forward.
    pub scale: f32,
    /// As [`super::SdpaCall::causal_delta`].
    pub causal_delta: Option<i64>,
    /// `None`: the composite graph (the route cuDNN 9.19 takes; see `bwd_graph.rs`). `Some`:
    /// only that one (a probe of the unified operation).
    pub route: Option<Route>,
}

impl SdpaBwdCall {
    /// The mask this call needs.
    pub fn mask(&self) -> Result<Mask> {
        mask_for(self.causal_delta, self.sk)
    }

    /// The plan-cache key of this call on `route`.
    pub fn key(&self, route: Route) -> Result<SdpaBwdKey> {
        let i = |x: usize, what: &str| {
            i64::try_from(x).map_err(|_| KernelError::Invalid(format!("{what} = {x} too large")))
        };
        Ok(SdpaBwdKey {
            route,
            io: self.io,
            b: i(self.b, "b")?,
            hq: i(self.hq, "h_q")?,
            hk: i(self.hk, "h_k")?,
            sq: i(self.sq, "s_q")?,
            sk: i(self.sk, "s_kv")?,
            dqk: i(self.dqk, "d_qk")?,
            dv: i(self.dv, "d_v")?,
            q: self.q.strides,
            k: self.k.strides,
            v: self.v.strides,
            o: self.o.strides,
            d_o: self.d_o.strides,
            dq: self.grad_q.strides,
            dk: self.grad_k.strides,
            dv_: self.grad_v.strides,
            stats: self.stats.strides,
            stats_align: alignment(self.stats.ptr),
            mask: self.mask()?,
        })
    }

    /// FLOPs of the five matrix products over the visible (query, key) pairs (2.5 times the
    /// forward's when `d_qk = d_v`).
    pub fn flops(&self) -> f64 {
        let pairs = visible_pairs(self.causal_delta, self.sq, self.sk);
        2.0 * (self.b * self.hq) as f64 * pairs * (3 * self.dqk + 2 * self.dv) as f64
    }

    fn check_pointers(&self) -> Result<()> {
        for (n, t, a) in [
            ("q", self.q, 16),
            ("k", self.k, 16),
            ("v", self.v, 16),
            ("o", self.o, 16),
            ("dO", self.d_o, 16),
            ("stats", self.stats, 4),
            ("dQ", self.grad_q, 16),
            ("dK", self.grad_k, 16),
            ("dV", self.grad_v, 16),
        ] {
            if t.ptr == 0 || !t.ptr.is_multiple_of(a) {
                return Err(KernelError::Invalid(format!(
                    "cuDNN attention backward: {n} pointer {:#x} is not {a}-byte aligned",
                    t.ptr
                )));
            }
        }
        if !self.scale.is_finite() {
            return Err(KernelError::Invalid(format!(
                "softmax scale {} is not finite",
                self.scale
            )));
        }
        Ok(())
    }
}

/// Where a backward's workspace bytes go: the plan's own, then the f32 scratch the composite
/// graph binds, D (`[b, hq, sq]`) and dQ_accum (`[b, hq, sq, dqk]`). dQ_accum does not hold
/// dQ after the call (measured on cuDNN 9.19, H100, 2026-12-07: relative difference 1.2 from
/// the f64 dQ, whose io-typed output is right), so only the io-typed dQ is an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Layout {
    bytes: usize,
    plan: usize,
    dsum: usize,
}

impl Layout {
    fn new(plan: &ExecPlan, key: &SdpaBwdKey) -> Self {
        let (dsum, dq_accum) = key.scratch_bytes();
        let plan = plan.workspace.div_ceil(256) * 256;
        Layout {
            bytes: (plan + dsum + dq_accum).max(256),
            plan,
            dsum,
        }
    }
}

impl CudnnAttention {
    /// The backward plan for `call` (built and cached on first use), and its key.
    fn bwd_plan(&self, st: &mut State, call: &SdpaBwdCall) -> Result<(Arc<ExecPlan>, SdpaBwdKey)> {
        let mut reasons = Vec::new();
        let routes = [call.route.unwrap_or(Route::Composite)];
        for &route in &routes {
            let key = call.key(route)?;
            key.validate().map_err(|m| {
                KernelError::Invalid(format!("cuDNN attention backward {key}: {m}"))
            })?;
            match cached_plan(
                self.lib,
                st.handle.raw,
                &mut st.bwd_plans,
                &mut st.stats,
                key,
                || sdpa_bwd_graph(&key),
            ) {
                Ok(p) => return Ok((p, key)),
                Err(e) => reasons.push(format!("{route:?}: {e}")),
            }
        }
        Err(KernelError::Cudnn(format!(
            "no cuDNN {} plan for {}: {}",
            version_string(self.lib.version),
            call.key(routes[routes.len() - 1])?,
            reasons.join("; ")
        )))
    }

    /// Whether the patch computes the backward `call` (the plan is built and cached), else
    /// the reason: an unsupported shape or the library's refusal, naming the shape.
    pub fn support_backward(&self, call: &SdpaBwdCall) -> std::result::Result<Route, String> {
        let mut st = self.lock().map_err(|e| e.to_string())?;
        call.check_pointers().map_err(|e| e.to_string())?;
        self.bwd_plan(&mut st, call)
            .map(|(_, k)| k.route)
            .map_err(|e| e.to_string())
    }

    /// Builds (or finds) the backward plan for `call` and returns the bytes of workspace it
    /// needs: the plan's plus the f32 scratch of the composite graph (`4 b hq sq (1 + dqk)`
    /// bytes, rounded). Call it ahead of timing.
    pub fn prepare_backward(&self, call: &SdpaBwdCall) -> Result<usize> {
        let mut st = self.lock()?;
        let (plan, key) = self.bwd_plan(&mut st, call)?;
        Ok(Layout::new(&plan, &key).bytes)
    }

    /// Enqueues one fused attention backward on `stream`, with a workspace allocated once per
    /// stream (and grown when a larger call comes) by the patch.
    ///
    /// # Safety
    /// Every pointer of `call` must be device memory of this context covering every element
    /// its strides address (16-byte aligned, Stats 4-byte), live until the work completes on
    /// `stream`; dQ, dK, dV must not overlap each other or the inputs.
    pub unsafe fn backward(&self, stream: &Arc<CudaStream>, call: &SdpaBwdCall) -> Result<()> {
        if call.b == 0 || call.hq == 0 || call.sq == 0 {
            return Ok(());
        }
        let need = self.prepare_backward(call)?;
        let ws = {
            let mut st = self.lock()?;
            let sid = stream.cu_stream() as usize;
            if st.bwd_workspaces.get(&sid).is_none_or(|w| w.len() < need) {
                // Free the old one first: the scratch of a long sequence is large.
                st.bwd_workspaces.remove(&sid);
                // SAFETY: scratch for cuDNN; never read before cuDNN writes it.
                let buf = unsafe {
                    crate::cuda::alloc::alloc_bytes(stream, need, "alloc cuDNN backward workspace")
                }?;
                st.bwd_workspaces.insert(sid, buf);
            }
            st.bwd_workspaces[&sid].ptr()
        };
        // SAFETY: per the caller; the workspace holds `need` bytes of this stream's memory.
        unsafe { self.backward_ws(stream, call, ws, need) }
    }

    /// As [`CudnnAttention::backward`] with a caller-provided workspace of `ws_bytes` at `ws`
    /// (at least [`CudnnAttention::prepare_backward`]'s bytes, 256-byte aligned).
    ///
    /// # Safety
    /// As [`CudnnAttention::backward`]; `ws` must be `ws_bytes` bytes of device memory of this
    /// context, unused by other work until this call's work completes on `stream`.
    pub unsafe fn backward_ws(
        &self,
        stream: &CudaStream,
        call: &SdpaBwdCall,
        ws: u64,
        ws_bytes: usize,
    ) -> Result<()> {
        if call.b == 0 || call.hq == 0 || call.sq == 0 {
            return Ok(());
        }
        call.check_pointers()?;
        let mut st = self.lock()?;
        let (plan, key) = self.bwd_plan(&mut st, call)?;
        let layout = Layout::new(&plan, &key);
        if ws_bytes < layout.bytes || !ws.is_multiple_of(256) {
            return Err(KernelError::Invalid(format!(
                "cuDNN attention backward needs a 256-byte aligned workspace of {} B, got {ws_bytes} B at {ws:#x}",
                layout.bytes
            )));
        }
        self.bind_stream(&st, stream)?;
        let mut scale = call.scale;
        let mut one = 1.0f32;
        let mut fill = f32::NEG_INFINITY;
        let mut delta = call.causal_delta.unwrap_or(0) as i32;
        let dev = |p: u64| p as *mut c_void;
        let dsum = ws + layout.plan as u64;
        let dq_accum = dsum + layout.dsum as u64;
        let bindings = [
            (uid::Q, dev(call.q.ptr)),
            (uid::K, dev(call.k.ptr)),
            (uid::V, dev(call.v.ptr)),
            (uid::O, dev(call.o.ptr)),
            (uid::STATS, dev(call.stats.ptr)),
            (uid::SCALE, (&mut scale as *mut f32).cast()),
            (uid::FILL, (&mut fill as *mut f32).cast()),
            (uid::DELTA, (&mut delta as *mut i32).cast()),
            (bwd_uid::DO, dev(call.d_o.ptr)),
            (bwd_uid::DQ, dev(call.grad_q.ptr)),
            (bwd_uid::DK, dev(call.grad_k.ptr)),
            (bwd_uid::DV, dev(call.grad_v.ptr)),
            (bwd_uid::SOFTMAX_SUM, dev(dsum)),
            (bwd_uid::DQ_ACCUM, dev(dq_accum)),
            (bwd_uid::ONE, (&mut one as *mut f32).cast()),
        ];
        // SAFETY: device pointers per the caller, host scalars live through this call (cuDNN
        // copies by-value scalars into the launch), the workspace holds the plan's bytes and
        // the scratch behind them. Only the ids the plan binds are passed to cuDNN.
        unsafe { plan.execute(self.lib, st.handle.raw, &bindings, dev(ws)) }.map_err(cudnn_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(delta: Option<i64>, hk: usize) -> SdpaBwdCall {
        let t = |p: u64, dims: [usize; 4]| Tensor4::dense(p, dims);
        SdpaBwdCall {
            io: IoType::Bf16,
            b: 1,
            hq: 4,
            hk,
            sq: 256,
            sk: 512,
            dqk: 128,
            dv: 64,
            q: t(0x1000, [1, 4, 256, 128]),
            k: t(0x2000, [1, hk, 512, 128]),
            v: t(0x3000, [1, hk, 512, 64]),
            o: t(0x4000, [1, 4, 256, 64]),
            d_o: t(0x5000, [1, 4, 256, 64]),
            stats: t(0x6000, [1, 4, 256, 1]),
            grad_q: t(0x7000, [1, 4, 256, 128]),
            grad_k: t(0x8000, [1, hk, 512, 128]),
            grad_v: t(0x9000, [1, hk, 512, 64]),
            scale: 0.125,
            causal_delta: delta,
            route: None,
        }
    }

    #[test]
    fn keys_follow_the_shift_and_are_valid() {
        let c = call(Some(0), 2);
        let k = c.key(Route::Composite).unwrap();
        k.validate().unwrap();
        assert_eq!(k.mask, Mask::Causal);
        // Two shifted blocks share a plan; past the last key nothing is masked.
        assert_eq!(
            call(Some(3), 2).key(Route::Composite).unwrap(),
            call(Some(99), 2).key(Route::Composite).unwrap()
        );
        assert_eq!(call(Some(511), 2).mask().unwrap(), Mask::None);
        assert!(call(Some(-1), 2).mask().is_err());
        // A different output layout is a different plan.
        let mut d = call(Some(0), 2);
        d.grad_q.strides[1] += 128;
        assert_ne!(d.key(Route::Composite).unwrap(), k);
    }

    #[test]
    fn flops_are_five_products() {
        let c = call(None, 4);
        assert_eq!(
            c.flops(),
            2.0 * 4.0 * 256.0 * 512.0 * (3.0 * 128.0 + 2.0 * 64.0)
        );
    }

    #[test]
    fn pointers_must_be_aligned() {
        let mut c = call(None, 4);
        c.grad_k.ptr += 8;
        assert!(c.check_pointers().unwrap_err().to_string().contains("dK"));
    }
}
