//! The vendor attention patch: cuDNN fused flash attention (forward, O plus the softmax
//! statistics) through cuDNN's backend graph API.
//!
//! * [`graph`]: the operation graphs as plain data, and the plan-cache key (no library needed);
//! * [`loader`]: finding cuDNN (`MERCURY_CUDNN_LIB`, the loader's search, the `nvidia-cudnn`
//!   Python package) and its entry points;
//! * [`backend`]: descriptors, heuristics, execution plans, variant packs;
//! * [`CudnnAttention`] (here): one handle per CUDA context, plans cached per [`SdpaKey`],
//!   a workspace per stream, and [`CudnnAttention::forward`] for one block;
//! * [`bwd_graph`] and `bwd.rs`: the backward (dQ, dK, dV from Q, K, V, O, dO and the
//!   forward's Stats), plans cached per [`SdpaBwdKey`], [`CudnnAttention::backward`].
//!
//! Semantics are those of [`crate::cpu::attention`] for rows that see at least one key: O is the
//! softmax-weighted sum of V rows, Stats the natural-log LSE of the scaled (masked) logits, one
//! f32 per query row. A block whose causal shift leaves some query rows with no visible key is
//! refused here (`delta < 0`); the caller splits it (those rows have o = 0, lse = -inf).
//! Source: cudnn-frontend's SDPA nodes and `../shared/docs/cudnn-sdpa-notes.md`.

pub mod backend;
mod bwd;
pub mod bwd_graph;
pub mod graph;
pub mod loader;
pub mod ragged;

pub use backend::{CudnnError, ExecPlan};
pub use bwd::SdpaBwdCall;
pub use bwd_graph::SdpaBwdKey;
pub use graph::{IoType, Mask, Route, SdpaKey, Strides4};
pub use loader::{version_string, CudnnLib};
pub use ragged::{RaggedCall, RaggedKey};

use super::alloc::{alloc_bytes, DeviceBuffer};
use super::error::{KernelError, Result};
use backend::check;
use cudarc::driver::{CudaContext, CudaStream};
use graph::uid;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// A device tensor of 4 dimensions: base pointer and element strides, outermost first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tensor4 {
    pub ptr: u64,
    pub strides: Strides4,
}

impl Tensor4 {
    /// A dense row-major tensor of `dims`.
    pub fn dense(ptr: u64, dims: [usize; 4]) -> Self {
        let [_, h, s, d] = dims.map(|x| x as i64);
        Tensor4 {
            ptr,
            strides: [h * s * d, s * d, d, 1],
        }
    }
}

/// One fused attention forward: Q `[b, hq, sq, dqk]`, K `[b, hk, sk, dqk]`, V `[b, hk, sk, dv]`
/// in `io`, O `[b, hq, sq, dv]` in `io` (or f32 with `o_f32`), Stats `[b, hq, sq, 1]` f32.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SdpaCall {
    pub io: IoType,
    pub o_f32: bool,
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
    pub stats: Tensor4,
    /// Softmax scale applied to `q . k`.
    pub scale: f32,
    /// `None`: every key visible. `Some(delta)`, `delta >= 0`: key `j` visible to query `i`
    /// when `i + delta >= j` (global offsets: `delta = q_offset - k_offset`).
    pub causal_delta: Option<i64>,
}

impl SdpaCall {
    /// The mask this call needs (a shift past the last key needs none).
    pub fn mask(&self) -> Result<Mask> {
        mask_for(self.causal_delta, self.sk)
    }

    /// The plan-cache key of this call on `route`.
    pub fn key(&self, route: Route) -> Result<SdpaKey> {
        let i = |x: usize, what: &str| {
            i64::try_from(x).map_err(|_| KernelError::Invalid(format!("{what} = {x} too large")))
        };
        Ok(SdpaKey {
            route,
            io: self.io,
            o_f32: self.o_f32,
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
            stats: self.stats.strides,
            stats_align: alignment(self.stats.ptr),
            mask: self.mask()?,
        })
    }

    /// FLOPs of the two matrix products over the visible (query, key) pairs.
    pub fn flops(&self) -> f64 {
        let pairs = visible_pairs(self.causal_delta, self.sq, self.sk);
        2.0 * (self.b * self.hq) as f64 * pairs * (self.dqk + self.dv) as f64
    }
}

/// The mask of a block of `sk` keys with causal shift `causal_delta` (see
/// [`SdpaCall::causal_delta`]): none past the last key, an error below 0 (rows with no visible
/// key: the caller splits the block).
pub fn mask_for(causal_delta: Option<i64>, sk: usize) -> Result<Mask> {
    match causal_delta {
        None => Ok(Mask::None),
        Some(d) if d < 0 => Err(KernelError::Invalid(format!(
            "causal shift {d} < 0 leaves query rows with no visible key; split the block"
        ))),
        Some(d) if d >= sk as i64 - 1 => Ok(Mask::None),
        Some(0) => Ok(Mask::Causal),
        Some(d) if d > i32::MAX as i64 => Err(KernelError::Invalid(format!(
            "causal shift {d} does not fit cuDNN's INT32 index arithmetic"
        ))),
        Some(_) => Ok(Mask::CausalShifted),
    }
}

/// The (query, key) pairs of one (batch, head) that a block of `sq` queries and `sk` keys
/// computes: all of them, or under a causal shift those with `i + delta >= j`.
pub fn visible_pairs(causal_delta: Option<i64>, sq: usize, sk: usize) -> f64 {
    match causal_delta {
        None => sq as f64 * sk as f64,
        Some(delta) => (0..sq as i64)
            .map(|i| (i + delta + 1).clamp(0, sk as i64) as f64)
            .sum(),
    }
}

/// The largest of 16, 8, 4, 2, 1 bytes that divides `ptr`.
pub fn alignment(ptr: u64) -> i64 {
    [16, 8, 4, 2]
        .into_iter()
        .find(|a| ptr.is_multiple_of(*a))
        .unwrap_or(1) as i64
}

/// A cuDNN handle, destroyed on drop.
struct Handle {
    lib: &'static CudnnLib,
    raw: *mut c_void,
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreate, destroyed once.
        unsafe { (self.lib.destroy)(self.raw) };
    }
}

struct State {
    handle: Handle,
    /// Built plans, and keys whose plan failed (with the reason), so no key is tried twice.
    plans: HashMap<SdpaKey, std::result::Result<Arc<ExecPlan>, String>>,
    /// Workspace per stream (`CUstream` address).
    workspaces: HashMap<usize, DeviceBuffer>,
    /// Backward plans, as `plans`.
    bwd_plans: HashMap<SdpaBwdKey, std::result::Result<Arc<ExecPlan>, String>>,
    /// Backward workspace and scratch per stream.
    bwd_workspaces: HashMap<usize, DeviceBuffer>,
    /// Variable-sequence plans ([`ragged`]), as `plans`.
    ragged_plans: HashMap<RaggedKey, std::result::Result<Arc<ExecPlan>, String>>,
    stats: PlanStats,
}

/// The cached plan of `key` in `plans`, built from `graph()` on first use; a failed build is
/// cached too (with its reason), so no key is tried twice.
fn cached_plan<K: std::hash::Hash + Eq + Copy + std::fmt::Display>(
    lib: &'static CudnnLib,
    handle: *mut c_void,
    plans: &mut HashMap<K, std::result::Result<Arc<ExecPlan>, String>>,
    stats: &mut PlanStats,
    key: K,
    graph: impl FnOnce() -> graph::GraphDesc,
) -> std::result::Result<Arc<ExecPlan>, String> {
    if let Some(e) = plans.get(&key) {
        stats.hits += 1;
        return e.clone();
    }
    let built = backend::build_plan(lib, handle, &graph())
        .map(Arc::new)
        .map_err(|e| e.to_string());
    match &built {
        Ok(p) => {
            stats.built += 1;
            tracing::debug!(
                "cuDNN plan for {key}: engine {}, workspace {} B",
                p.engine,
                p.workspace
            );
        }
        Err(e) => {
            stats.failed += 1;
            tracing::debug!("cuDNN plan for {key} failed: {e}");
        }
    }
    plans.insert(key, built.clone());
    built
}

/// Counters of the plan cache (for reports and tests on the GPU).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlanStats {
    pub built: usize,
    pub failed: usize,
    pub hits: usize,
}

/// The cuDNN attention patch of one CUDA context.
pub struct CudnnAttention {
    lib: &'static CudnnLib,
    ctx: Arc<CudaContext>,
    state: Mutex<State>,
}

// SAFETY: the raw handle and plans are only used under the mutex; cuDNN allows a handle to be
// used from any thread as long as calls are not concurrent.
unsafe impl Send for CudnnAttention {}
// SAFETY: as above.
unsafe impl Sync for CudnnAttention {}

fn cudnn_err(e: CudnnError) -> KernelError {
    KernelError::Cudnn(e.to_string())
}

impl CudnnAttention {
    /// Loads cuDNN (see [`loader`]) and creates a handle on `ctx`'s device.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let lib = loader::load().map_err(KernelError::Cudnn)?;
        ctx.bind_to_thread()
            .map_err(KernelError::driver("bind context for cuDNN"))?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the context is current on this thread.
        let s = unsafe { (lib.create)(&mut raw) };
        check(lib, s, || "cudnnCreate".into()).map_err(cudnn_err)?;
        Ok(CudnnAttention {
            lib,
            ctx: ctx.clone(),
            state: Mutex::new(State {
                handle: Handle { lib, raw },
                plans: HashMap::new(),
                workspaces: HashMap::new(),
                bwd_plans: HashMap::new(),
                bwd_workspaces: HashMap::new(),
                ragged_plans: HashMap::new(),
                stats: PlanStats::default(),
            }),
        })
    }

    /// The loaded library (version, origin).
    pub fn library(&self) -> &'static CudnnLib {
        self.lib
    }

    /// Plan-cache counters.
    pub fn plan_stats(&self) -> PlanStats {
        self.state.lock().map(|s| s.stats).unwrap_or_default()
    }

    /// The routes tried for a mask, in order.
    fn routes(&self, mask: Mask) -> &'static [Route] {
        if mask == Mask::None && self.lib.version >= loader::UNIFIED_SDPA_VERSION {
            &[Route::Unified, Route::Composite]
        } else {
            &[Route::Composite]
        }
    }

    /// The plan for `call` (built and cached on first use), and its key.
    fn plan(&self, st: &mut State, call: &SdpaCall) -> Result<(Arc<ExecPlan>, SdpaKey)> {
        let mask = call.mask()?;
        let mut reasons = Vec::new();
        for &route in self.routes(mask) {
            let key = call.key(route)?;
            key.validate()
                .map_err(|m| KernelError::Invalid(format!("cuDNN attention {key}: {m}")))?;
            let entry = cached_plan(
                self.lib,
                st.handle.raw,
                &mut st.plans,
                &mut st.stats,
                key,
                || graph::sdpa_graph(&key),
            );
            match entry {
                Ok(p) => return Ok((p, key)),
                Err(e) => reasons.push(format!("{route:?}: {e}")),
            }
        }
        Err(KernelError::Cudnn(format!(
            "no cuDNN {} plan for {}: {}",
            version_string(self.lib.version),
            call.key(Route::Composite)?,
            reasons.join("; ")
        )))
    }

    /// Whether the patch computes `call`: `Ok(())` when a plan exists or can be built (it is
    /// built and cached), else the reason (an unsupported shape, or the library's refusal).
    pub fn support(&self, call: &SdpaCall) -> std::result::Result<(), String> {
        let mut st = self.lock().map_err(|e| e.to_string())?;
        Self::check_call(call).map_err(|e| e.to_string())?;
        self.plan(&mut st, call)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// Builds (or finds) the plan for `call` and returns the workspace bytes it needs. Call it
    /// ahead of time (e.g. when an executor is built) so that no plan is built while timing.
    pub fn prepare(&self, call: &SdpaCall) -> Result<usize> {
        let mut st = self.lock()?;
        Ok(self.plan(&mut st, call)?.0.workspace)
    }

    /// Binds this context to the thread and the handle of `st` to `stream` (before an
    /// execute on that stream).
    fn bind_stream(&self, st: &State, stream: &CudaStream) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(KernelError::driver("bind context for cuDNN"))?;
        // SAFETY: a live handle and a stream of this context.
        let s = unsafe { (self.lib.set_stream)(st.handle.raw, stream.cu_stream() as *mut c_void) };
        check(self.lib, s, || "cudnnSetStream".into()).map_err(cudnn_err)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| KernelError::Cudnn("poisoned lock".into()))
    }

    fn check_call(call: &SdpaCall) -> Result<()> {
        for (n, t, a) in [
            ("q", call.q, 16),
            ("k", call.k, 16),
            ("v", call.v, 16),
            ("o", call.o, 16),
            ("stats", call.stats, 4),
        ] {
            if t.ptr == 0 || !t.ptr.is_multiple_of(a) {
                return Err(KernelError::Invalid(format!(
                    "cuDNN attention: {n} pointer {:#x} is not {a}-byte aligned",
                    t.ptr
                )));
            }
        }
        if !call.scale.is_finite() {
            return Err(KernelError::Invalid(format!(
                "softmax scale {} is not finite",
                call.scale
            )));
        }
        Ok(())
    }

    /// Enqueues one fused attention forward on `stream`, with a workspace allocated once per
    /// stream by the patch.
    ///
    /// # Safety
    /// Every pointer of `call` must be device memory of this context covering every element
    /// its strides address for the given dims (Q, K, V, O 16-byte aligned, Stats 4-byte),
    /// live until the work completes on `stream`; O and Stats must not overlap Q, K, V or
    /// each other.
    pub unsafe fn forward(&self, stream: &Arc<CudaStream>, call: &SdpaCall) -> Result<()> {
        if call.b == 0 || call.hq == 0 || call.sq == 0 {
            return Ok(());
        }
        let need = self.prepare(call)?.max(256);
        let ws = {
            let mut st = self.lock()?;
            let sid = stream.cu_stream() as usize;
            if st.workspaces.get(&sid).is_none_or(|w| w.len() < need) {
                // SAFETY: scratch for cuDNN; never read before cuDNN writes it.
                let buf = unsafe { alloc_bytes(stream, need, "alloc cuDNN workspace") }?;
                st.workspaces.insert(sid, buf);
            }
            st.workspaces[&sid].ptr()
        };
        // SAFETY: per the caller; the workspace holds `need` bytes of this stream's memory.
        unsafe { self.forward_ws(stream, call, ws, need) }
    }

    /// As [`CudnnAttention::forward`] with a caller-provided workspace of `ws_bytes` at `ws`
    /// (at least [`CudnnAttention::prepare`]'s answer).
    ///
    /// # Safety
    /// As [`CudnnAttention::forward`]; `ws` must be `ws_bytes` bytes of device memory of this
    /// context, unused by other work until this call's work completes on `stream`.
    pub unsafe fn forward_ws(
        &self,
        stream: &CudaStream,
        call: &SdpaCall,
        ws: u64,
        ws_bytes: usize,
    ) -> Result<()> {
        if call.b == 0 || call.hq == 0 || call.sq == 0 {
            return Ok(());
        }
        Self::check_call(call)?;
        let mut st = self.lock()?;
        let (plan, key) = self.plan(&mut st, call)?;
        if ws_bytes < plan.workspace {
            return Err(KernelError::Invalid(format!(
                "cuDNN attention needs a {} B workspace, got {ws_bytes} B",
                plan.workspace
            )));
        }
        self.bind_stream(&st, stream)?;
        let mut scale = call.scale;
        let mut fill = f32::NEG_INFINITY;
        let mut delta = call.causal_delta.unwrap_or(0) as i32;
        let dev = |p: u64| p as *mut c_void;
        let mut bindings = vec![
            (uid::Q, dev(call.q.ptr)),
            (uid::K, dev(call.k.ptr)),
            (uid::V, dev(call.v.ptr)),
            (uid::O, dev(call.o.ptr)),
            (uid::STATS, dev(call.stats.ptr)),
            (uid::SCALE, (&mut scale as *mut f32).cast()),
        ];
        if key.mask != Mask::None {
            bindings.push((uid::FILL, (&mut fill as *mut f32).cast()));
        }
        if key.mask == Mask::CausalShifted {
            bindings.push((uid::DELTA, (&mut delta as *mut i32).cast()));
        }
        // SAFETY: device pointers per the caller, host scalars live through this call (cuDNN
        // copies by-value scalars into the launch), the workspace is at least `plan.workspace`
        // bytes of this stream's memory.
        unsafe { plan.execute(self.lib, st.handle.raw, &bindings, dev(ws)) }.map_err(cudnn_err)
    }
}

impl CudnnAttention {
    /// The variable-sequence plan of `key` (built and cached on first use; a refusal is cached
    /// too, with the library's reason), and the workspace bytes it needs.
    pub fn prepare_ragged(&self, key: &RaggedKey) -> Result<usize> {
        key.validate()
            .map_err(|m| KernelError::Invalid(format!("cuDNN attention {key}: {m}")))?;
        let mut st = self.lock()?;
        let st = &mut *st;
        cached_plan(
            self.lib,
            st.handle.raw,
            &mut st.ragged_plans,
            &mut st.stats,
            *key,
            || ragged::ragged_graph(key),
        )
        .map(|p| p.workspace)
        .map_err(|e| {
            KernelError::Cudnn(format!(
                "no cuDNN {} plan for {key}: {e}",
                version_string(self.lib.version)
            ))
        })
    }

    /// Enqueues one variable-sequence forward ([`ragged`]) on `stream` with the workspace `ws`
    /// of `ws_bytes` (at least [`CudnnAttention::prepare_ragged`]'s answer).
    ///
    /// # Safety
    /// Every pointer of `call` must be device memory of this context: the per-entry arrays
    /// hold `entries` (lengths) and `entries + 1` (offsets) INT32, every entry's rows lie
    /// inside its tensor's memory at its offset, O and Stats do not overlap Q, K, V or each
    /// other, and all of it stays live until the work completes on `stream`.
    pub unsafe fn forward_ragged(
        &self,
        stream: &CudaStream,
        call: &RaggedCall,
        ws: u64,
        ws_bytes: usize,
    ) -> Result<()> {
        let need = self.prepare_ragged(&call.key)?;
        if ws_bytes < need {
            return Err(KernelError::Invalid(format!(
                "cuDNN ragged attention needs a {need} B workspace, got {ws_bytes} B"
            )));
        }
        for (n, p, a) in [
            ("q", call.q, 16),
            ("k", call.k, 16),
            ("v", call.v, 16),
            ("o", call.o, 16),
            ("stats", call.stats, 4),
        ] {
            if p == 0 || !p.is_multiple_of(a) {
                return Err(KernelError::Invalid(format!(
                    "cuDNN ragged attention: {n} pointer {p:#x} is not {a}-byte aligned"
                )));
            }
        }
        let st = self.lock()?;
        let plan = match st.ragged_plans.get(&call.key) {
            Some(Ok(p)) => p.clone(),
            _ => {
                return Err(KernelError::Cudnn(format!(
                    "no cuDNN plan for {}",
                    call.key
                )))
            }
        };
        self.bind_stream(&st, stream)?;
        let mut scale = call.scale;
        let mut fill = f32::NEG_INFINITY;
        let dev = |p: u64| p as *mut c_void;
        use ragged::ragged_uid as r;
        let bindings = [
            (uid::Q, dev(call.q)),
            (uid::K, dev(call.k)),
            (uid::V, dev(call.v)),
            (uid::O, dev(call.o)),
            (uid::STATS, dev(call.stats)),
            (uid::SCALE, (&mut scale as *mut f32).cast()),
            (uid::FILL, (&mut fill as *mut f32).cast()),
            (r::SEQ_Q, dev(call.seq_q)),
            (r::SEQ_KV, dev(call.seq_kv)),
            (r::Q_OFF, dev(call.offsets[0])),
            (r::K_OFF, dev(call.offsets[1])),
            (r::V_OFF, dev(call.offsets[2])),
            (r::O_OFF, dev(call.offsets[3])),
            (r::STATS_OFF, dev(call.offsets[4])),
        ];
        // SAFETY: device pointers per the caller, host scalars live through this call, the
        // workspace is at least `plan.workspace` bytes of this stream's memory. Bindings the
        // plan does not read (Stats' offset of a padded Stats) are ignored.
        unsafe { plan.execute(self.lib, st.handle.raw, &bindings, dev(ws)) }.map_err(cudnn_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(delta: Option<i64>) -> SdpaCall {
        SdpaCall {
            io: IoType::Bf16,
            o_f32: false,
            b: 1,
            hq: 4,
            hk: 2,
            sq: 256,
            sk: 512,
            dqk: 128,
            dv: 64,
            q: Tensor4::dense(0x1000, [1, 4, 256, 128]),
            k: Tensor4::dense(0x2000, [1, 2, 512, 128]),
            v: Tensor4::dense(0x3000, [1, 2, 512, 64]),
            o: Tensor4::dense(0x4000, [1, 4, 256, 64]),
            stats: Tensor4::dense(0x5000, [1, 4, 256, 1]),
            scale: 0.125,
            causal_delta: delta,
        }
    }

    #[test]
    fn masks_follow_the_shift() {
        assert_eq!(call(None).mask().unwrap(), Mask::None);
        assert_eq!(call(Some(0)).mask().unwrap(), Mask::Causal);
        assert_eq!(call(Some(7)).mask().unwrap(), Mask::CausalShifted);
        // Past the last key: nothing masked.
        assert_eq!(call(Some(511)).mask().unwrap(), Mask::None);
        assert!(call(Some(-1)).mask().is_err());
    }

    #[test]
    fn keys_are_valid_and_distinct() {
        let a = call(None).key(Route::Unified).unwrap();
        a.validate().unwrap();
        let b = call(Some(0)).key(Route::Composite).unwrap();
        b.validate().unwrap();
        assert_ne!(a, b);
        // The shift is a per-call value: two shifted blocks share a key.
        assert_eq!(
            call(Some(3)).key(Route::Composite).unwrap(),
            call(Some(100)).key(Route::Composite).unwrap()
        );
    }

    #[test]
    fn flops_count_visible_pairs() {
        let c = call(None);
        assert_eq!(c.flops(), 2.0 * 4.0 * 256.0 * 512.0 * (128.0 + 64.0));
        let c = call(Some(0));
        let pairs: f64 = (1..=256).map(|x| x as f64).sum();
        assert_eq!(c.flops(), 2.0 * 4.0 * pairs * 192.0);
    }
}
