//! The GEMM patch: `C[m, n] (+)= A[m, k] * B[k, n]`, row-major, through cuBLASLt (f32
//! accumulate), and the plain `cublasGemmEx` call used only as the benchmark baseline.
//!
//! Row-major operands are handed to the column-major libraries as their transposes:
//! `C^T[n, m] = B^T[n, k] * A^T[k, m]`, where each transpose is the row-major buffer read
//! column-major with the same leading dimension. No data moves.

use super::error::{ensure, KernelError, Result};
use super::nvrtc::{probe, Library};
use cudarc::cublas::{result as blas, sys as blas_sys};
use cudarc::cublaslt::{result as lt, sys as lt_sys};
use cudarc::driver::{CudaContext, CudaStream};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Element type of a GEMM operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElemType {
    BF16,
    F16,
    F32,
}

impl ElemType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            ElemType::BF16 | ElemType::F16 => 2,
            ElemType::F32 => 4,
        }
    }
    fn lt(self) -> lt_sys::cudaDataType {
        match self {
            ElemType::BF16 => lt_sys::cudaDataType::CUDA_R_16BF,
            ElemType::F16 => lt_sys::cudaDataType::CUDA_R_16F,
            ElemType::F32 => lt_sys::cudaDataType::CUDA_R_32F,
        }
    }
    fn blas(self) -> blas_sys::cudaDataType {
        match self {
            ElemType::BF16 => blas_sys::cudaDataType::CUDA_R_16BF,
            ElemType::F16 => blas_sys::cudaDataType::CUDA_R_16F,
            ElemType::F32 => blas_sys::cudaDataType::CUDA_R_32F,
        }
    }
}

/// What cuBLASLt applies to the f32 product before it converts it to C's type
/// (`CUBLASLT_MATMUL_DESC_EPILOGUE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GemmEpilogue {
    /// `C (+)= A B`.
    #[default]
    None,
    /// `C = GeLU(A B)`, `CUBLASLT_EPILOGUE_GELU`: the tanh form
    /// `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (PyTorch's `_addmm_activation` uses
    /// it for `gelu(approximate='tanh')`). Not with `accumulate`.
    Gelu,
}

/// One GEMM call: sizes, row-major leading dimensions (elements) and types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GemmSpec {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Row stride of A (`>= k`).
    pub lda: usize,
    /// Row stride of B (`>= n`).
    pub ldb: usize,
    /// Row stride of C (`>= n`).
    pub ldc: usize,
    /// Type of A and B.
    pub in_type: ElemType,
    /// Type of C.
    pub out_type: ElemType,
    /// `C += A B` instead of `C = A B`.
    pub accumulate: bool,
    /// A is stored transposed: row-major `[k, m]` with row stride `lda >= m`, and the
    /// product uses its transpose (a tile matmul's `transpose_a`).
    pub trans_a: bool,
    /// B is stored transposed: row-major `[n, k]` with row stride `ldb >= k`.
    pub trans_b: bool,
    /// Applied to the product in the epilogue.
    pub epilogue: GemmEpilogue,
}

impl GemmSpec {
    /// Dense (unpadded) operands.
    pub fn dense(
        m: usize,
        n: usize,
        k: usize,
        in_type: ElemType,
        out_type: ElemType,
        accumulate: bool,
    ) -> Self {
        GemmSpec {
            m,
            n,
            k,
            lda: k,
            ldb: n,
            ldc: n,
            in_type,
            out_type,
            accumulate,
            trans_a: false,
            trans_b: false,
            epilogue: GemmEpilogue::None,
        }
    }

    /// FLOPs of one call (2 m n k).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Checks sizes, leading dimensions and the type combination.
    pub fn validate(&self) -> Result<()> {
        ensure(self.m > 0 && self.n > 0 && self.k > 0, || {
            format!("gemm with an empty dimension: {self:?}")
        })?;
        let (a_row, b_row) = (
            if self.trans_a { self.m } else { self.k },
            if self.trans_b { self.k } else { self.n },
        );
        ensure(
            self.lda >= a_row && self.ldb >= b_row && self.ldc >= self.n,
            || format!("gemm leading dimension smaller than a row: {self:?}"),
        )?;
        let lim = i32::MAX as usize;
        ensure(
            [self.m, self.n, self.k, self.lda, self.ldb, self.ldc]
                .iter()
                .all(|x| *x <= lim),
            || format!("gemm dimension exceeds i32: {self:?}"),
        )?;
        ensure(
            !(self.accumulate && self.epilogue != GemmEpilogue::None),
            || {
                format!(
                    "gemm epilogue {:?} with accumulate: {self:?}",
                    self.epilogue
                )
            },
        )?;
        let ok = matches!(
            (self.in_type, self.out_type),
            (ElemType::BF16, ElemType::BF16 | ElemType::F32)
                | (ElemType::F16, ElemType::F16 | ElemType::F32)
                | (ElemType::F32, ElemType::F32)
        );
        ensure(ok, || {
            format!(
                "gemm types {:?} -> {:?} not supported (bf16/f16 in: same or f32 out; f32 in: f32 out)",
                self.in_type, self.out_type
            )
        })
    }
}

/// Device workspace of cuBLASLt. Streams that run GEMMs concurrently need one each.
#[derive(Debug)]
pub struct GemmWorkspace {
    _buf: super::alloc::DeviceBuffer,
    ptr: u64,
    size: usize,
}

impl GemmWorkspace {
    /// 32 MiB, NVIDIA's recommendation for Hopper.
    pub const DEFAULT_BYTES: usize = 32 << 20;

    pub fn new(stream: &Arc<CudaStream>, size: usize) -> Result<Self> {
        let size = size.max(256);
        // SAFETY: the workspace is scratch memory for cuBLASLt; its contents are never read
        // before cuBLASLt writes them.
        let buf = unsafe { super::alloc::alloc_bytes(stream, size, "alloc gemm workspace") }?;
        let ptr = buf.ptr();
        Ok(GemmWorkspace {
            _buf: buf,
            ptr,
            size,
        })
    }

    pub fn bytes(&self) -> usize {
        self.size
    }
}

/// cuBLASLt descriptors and the chosen algorithm for one [`GemmSpec`].
struct LtPlan {
    desc: lt_sys::cublasLtMatmulDesc_t,
    a: lt_sys::cublasLtMatrixLayout_t,
    b: lt_sys::cublasLtMatrixLayout_t,
    c: lt_sys::cublasLtMatrixLayout_t,
    algos: Vec<lt_sys::cublasLtMatmulHeuristicResult_t>,
    chosen: AtomicUsize,
}

// SAFETY: the descriptors are host-side objects that are only read after creation (cuBLASLt
// allows concurrent reads); the algorithm records are plain data.
unsafe impl Send for LtPlan {}
// SAFETY: as above: no method mutates a descriptor after `LtPlan::new` returns.
unsafe impl Sync for LtPlan {}

impl Drop for LtPlan {
    fn drop(&mut self) {
        // SAFETY: each handle was created by `LtPlan::new` and is destroyed exactly once here.
        unsafe {
            let _ = lt::destroy_matrix_layout(self.a);
            let _ = lt::destroy_matrix_layout(self.b);
            let _ = lt::destroy_matrix_layout(self.c);
            let _ = lt::destroy_matmul_desc(self.desc);
        }
    }
}

fn lt_err(what: &'static str) -> impl FnOnce(lt::CublasError) -> KernelError {
    move |e| KernelError::Blas {
        what,
        msg: format!("{:?}", e.0),
    }
}

impl LtPlan {
    fn new(
        handle: lt_sys::cublasLtHandle_t,
        spec: &GemmSpec,
        ws_bytes: usize,
        max_algos: usize,
    ) -> Result<Self> {
        // Column-major view: D'[n, m] = A'[n, k] * B'[k, m] with A' = B, B' = A. A transposed
        // B (row-major [n, k]) is column-major [k, n], used as op(A') = its transpose; the same
        // for A.
        let (b_rows, b_cols) = if spec.trans_b {
            (spec.k, spec.n)
        } else {
            (spec.n, spec.k)
        };
        let (a_rows, a_cols) = if spec.trans_a {
            (spec.m, spec.k)
        } else {
            (spec.k, spec.m)
        };
        let a = lt::create_matrix_layout(
            spec.in_type.lt(),
            b_rows as u64,
            b_cols as u64,
            spec.ldb as i64,
        )
        .map_err(lt_err("cublasLtMatrixLayoutCreate(B)"))?;
        let mut plan = LtPlan {
            desc: std::ptr::null_mut(),
            a,
            b: std::ptr::null_mut(),
            c: std::ptr::null_mut(),
            algos: Vec::new(),
            chosen: AtomicUsize::new(0),
        };
        plan.b = lt::create_matrix_layout(
            spec.in_type.lt(),
            a_rows as u64,
            a_cols as u64,
            spec.lda as i64,
        )
        .map_err(lt_err("cublasLtMatrixLayoutCreate(A)"))?;
        plan.c = lt::create_matrix_layout(
            spec.out_type.lt(),
            spec.n as u64,
            spec.m as u64,
            spec.ldc as i64,
        )
        .map_err(lt_err("cublasLtMatrixLayoutCreate(C)"))?;
        plan.desc = lt::create_matmul_desc(
            lt_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            lt_sys::cudaDataType::CUDA_R_32F,
        )
        .map_err(lt_err("cublasLtMatmulDescCreate"))?;
        for (on, attr) in [
            (
                spec.trans_b,
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
            ),
            (
                spec.trans_a,
                lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
            ),
        ] {
            if on {
                // The attribute is a cublasOperation_t, an int32_t.
                let op = blas_sys::cublasOperation_t::CUBLAS_OP_T as i32;
                // SAFETY: `plan.desc` is live; the value is passed by address with its size.
                unsafe {
                    lt::set_matmul_desc_attribute(
                        plan.desc,
                        attr,
                        (&op) as *const i32 as *const c_void,
                        std::mem::size_of::<i32>(),
                    )
                }
                .map_err(lt_err("cublasLtMatmulDescSetAttribute(TRANS)"))?;
            }
        }
        if spec.epilogue == GemmEpilogue::Gelu {
            // The attribute is a cublasLtEpilogue_t, a uint32_t.
            let e = lt_sys::cublasLtEpilogue_t::CUBLASLT_EPILOGUE_GELU as u32;
            // SAFETY: `plan.desc` is live; the value is passed by address with its size.
            unsafe {
                lt::set_matmul_desc_attribute(
                    plan.desc,
                    lt_sys::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_EPILOGUE,
                    (&e) as *const u32 as *const c_void,
                    std::mem::size_of::<u32>(),
                )
            }
            .map_err(lt_err("cublasLtMatmulDescSetAttribute(EPILOGUE)"))?;
        }
        let pref = lt::create_matmul_pref().map_err(lt_err("cublasLtMatmulPreferenceCreate"))?;
        // SAFETY: `pref` is a live preference handle; the attribute buffer is a usize as the
        // attribute requires; `pref` is destroyed below on every path.
        let set = unsafe {
            lt::set_matmul_pref_attribute(
                pref,
                lt_sys::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                (&ws_bytes) as *const usize as *const c_void,
                std::mem::size_of::<usize>(),
            )
        };
        let mut results = vec![
            // SAFETY: the heuristic result is a plain C struct; all-zero is a valid value.
            unsafe { std::mem::zeroed::<lt_sys::cublasLtMatmulHeuristicResult_t>() };
            max_algos.max(1)
        ];
        let mut count: i32 = 0;
        let heur = set.and_then(|_| {
            // SAFETY: all descriptors are live; `results` has room for `max_algos` records
            // and `count` receives how many were written.
            unsafe {
                lt_sys::cublasLtMatmulAlgoGetHeuristic(
                    handle,
                    plan.desc,
                    plan.a,
                    plan.b,
                    plan.c,
                    plan.c,
                    pref,
                    results.len() as i32,
                    results.as_mut_ptr(),
                    &mut count,
                )
                .result()
            }
        });
        // SAFETY: `pref` was created above and is not used after this.
        let _ = unsafe { lt::destroy_matmul_pref(pref) };
        heur.map_err(lt_err("cublasLtMatmulAlgoGetHeuristic"))?;
        results.truncate(count.max(0) as usize);
        results.retain(|r| r.state == lt_sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS);
        if results.is_empty() {
            return Err(KernelError::Blas {
                what: "cublasLtMatmulAlgoGetHeuristic",
                msg: format!("no algorithm for {spec:?}"),
            });
        }
        plan.algos = results;
        Ok(plan)
    }
}

/// The GEMM patch (cuBLASLt). One instance serves every stream of its context; each
/// concurrently used stream needs its own [`GemmWorkspace`].
pub struct GemmPatch {
    handle: lt_sys::cublasLtHandle_t,
    ctx: Arc<CudaContext>,
    ws_bytes: usize,
    plans: Mutex<HashMap<GemmSpec, Arc<LtPlan>>>,
}

// SAFETY: a cuBLASLt handle may be used from several threads and streams at once (it holds
// no per-call state; workspaces are per stream); the plan cache is behind a mutex.
unsafe impl Send for GemmPatch {}
// SAFETY: as above.
unsafe impl Sync for GemmPatch {}

impl Drop for GemmPatch {
    fn drop(&mut self) {
        if let Ok(mut p) = self.plans.lock() {
            p.clear();
        }
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the handle was created in `new` and is destroyed once.
        let _ = unsafe { lt::destroy_handle(self.handle) };
    }
}

impl GemmPatch {
    /// Creates the cuBLASLt handle. `ws_bytes` is the workspace size every call may use
    /// (the workspaces passed to [`GemmPatch::run`] must be at least this large).
    pub fn new(ctx: &Arc<CudaContext>, ws_bytes: usize) -> Result<Self> {
        probe(Library::CublasLt)?;
        ctx.bind_to_thread()
            .map_err(KernelError::driver("bind context"))?;
        let handle = lt::create_handle().map_err(lt_err("cublasLtCreate"))?;
        Ok(GemmPatch {
            handle,
            ctx: ctx.clone(),
            ws_bytes,
            plans: Mutex::new(HashMap::new()),
        })
    }

    fn plan(&self, spec: &GemmSpec) -> Result<Arc<LtPlan>> {
        let mut plans = self
            .plans
            .lock()
            .map_err(|_| KernelError::Invalid("gemm plan cache poisoned".into()))?;
        if let Some(p) = plans.get(spec) {
            return Ok(p.clone());
        }
        let p = Arc::new(LtPlan::new(self.handle, spec, self.ws_bytes, 8)?);
        plans.insert(*spec, p.clone());
        Ok(p)
    }

    /// Number of heuristic candidates cuBLASLt offers for `spec` (at most 8).
    pub fn candidates(&self, spec: &GemmSpec) -> Result<usize> {
        spec.validate()?;
        Ok(self.plan(spec)?.algos.len())
    }

    /// Enqueues `C (+)= A B` on `stream`.
    ///
    /// # Safety
    /// `a`, `b` and `c` must be device pointers of this context to at least
    /// `(m-1)*lda + k`, `(k-1)*ldb + n` and `(m-1)*ldc + n` elements of the spec's types, live
    /// until the work completes, and `ws` must not be used by another stream concurrently.
    pub unsafe fn run(
        &self,
        stream: &CudaStream,
        ws: &GemmWorkspace,
        spec: &GemmSpec,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<()> {
        spec.validate()?;
        let plan = self.plan(spec)?;
        self.run_algo(
            stream,
            ws,
            spec,
            &plan,
            plan.chosen.load(Ordering::Relaxed),
            a,
            b,
            c,
        )
    }

    /// Runs algorithm `algo` of `plan` on `stream`: `c = a * b` (or `+=`, per `spec`).
    ///
    /// # Safety
    /// `a`, `b` and `c` are device pointers to live buffers of at least the sizes `spec`
    /// describes, on `stream`'s device, not written by other work while the GEMM runs.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_algo(
        &self,
        stream: &CudaStream,
        ws: &GemmWorkspace,
        spec: &GemmSpec,
        plan: &LtPlan,
        algo: usize,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<()> {
        let h = plan
            .algos
            .get(algo)
            .ok_or_else(|| KernelError::Invalid(format!("gemm algorithm {algo} out of range")))?;
        ensure(h.workspaceSize <= ws.size, || {
            format!(
                "gemm needs {} workspace bytes, workspace has {}",
                h.workspaceSize, ws.size
            )
        })?;
        let alpha: f32 = 1.0;
        let beta: f32 = if spec.accumulate { 1.0 } else { 0.0 };
        self.ctx
            .bind_to_thread()
            .map_err(KernelError::driver("bind context"))?;
        // SAFETY: descriptors are live (held by `plan`); the caller guarantees the operand
        // pointers and workspace; alpha/beta are host f32 as the f32 scale type requires.
        unsafe {
            lt::matmul(
                self.handle,
                plan.desc,
                (&alpha) as *const f32 as *const c_void,
                (&beta) as *const f32 as *const c_void,
                b as *const c_void,
                plan.a,
                a as *const c_void,
                plan.b,
                c as *const c_void,
                plan.c,
                c as *mut c_void,
                plan.c,
                &h.algo,
                ws.ptr as *mut c_void,
                ws.size,
                stream.cu_stream() as lt_sys::cudaStream_t,
            )
        }
        .map_err(lt_err("cublasLtMatmul"))
    }

    /// Times every heuristic candidate for `spec` (`reps` runs each, CUDA events, after one
    /// warm-up) and keeps the fastest for later [`GemmPatch::run`] calls. Returns the median
    /// milliseconds of each candidate in heuristic order.
    ///
    /// # Safety
    /// As [`GemmPatch::run`]; `c` is overwritten (or accumulated into) several times.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn tune(
        &self,
        stream: &Arc<CudaStream>,
        ws: &GemmWorkspace,
        spec: &GemmSpec,
        a: u64,
        b: u64,
        c: u64,
        reps: usize,
    ) -> Result<Vec<f32>> {
        spec.validate()?;
        let plan = self.plan(spec)?;
        let ev = |s: &Arc<CudaStream>| {
            s.context()
                .new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(KernelError::driver("create event"))
        };
        let (e0, e1) = (ev(stream)?, ev(stream)?);
        let mut medians = Vec::with_capacity(plan.algos.len());
        for i in 0..plan.algos.len() {
            // SAFETY: forwarded from the caller.
            if unsafe { self.run_algo(stream, ws, spec, &plan, i, a, b, c) }.is_err() {
                medians.push(f32::INFINITY);
                continue;
            }
            let mut times = Vec::with_capacity(reps.max(1));
            for _ in 0..reps.max(1) {
                e0.record(stream).map_err(KernelError::driver("record"))?;
                // SAFETY: forwarded from the caller.
                unsafe { self.run_algo(stream, ws, spec, &plan, i, a, b, c)? };
                e1.record(stream).map_err(KernelError::driver("record"))?;
                times.push(e0.elapsed_ms(&e1).map_err(KernelError::driver("elapsed"))?);
            }
            times.sort_by(f32::total_cmp);
            medians.push(times[times.len() / 2]);
        }
        let best = medians
            .iter()
            .enumerate()
            .min_by(|x, y| x.1.total_cmp(y.1))
            .map(|(i, _)| i)
            .unwrap_or(0);
        plan.chosen.store(best, Ordering::Relaxed);
        Ok(medians)
    }
}

/// `cublasGemmEx` with default algorithm selection: the baseline the patch is measured against.
pub struct CublasDirect {
    handle: blas_sys::cublasHandle_t,
    ctx: Arc<CudaContext>,
}

// SAFETY: the handle is only used through `&self` methods that set the stream and enqueue;
// callers must not use one `CublasDirect` from two threads at once (it is not `Sync`).
unsafe impl Send for CublasDirect {}

impl Drop for CublasDirect {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { blas::destroy_handle(self.handle) };
    }
}

impl CublasDirect {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        probe(Library::Cublas)?;
        ctx.bind_to_thread()
            .map_err(KernelError::driver("bind context"))?;
        let handle = blas::create_handle().map_err(|e| KernelError::Blas {
            what: "cublasCreate",
            msg: format!("{:?}", e.0),
        })?;
        Ok(CublasDirect {
            handle,
            ctx: ctx.clone(),
        })
    }

    /// Enqueues `C (+)= A B` (row-major, as [`GemmPatch::run`]) with `cublasGemmEx`.
    ///
    /// # Safety
    /// As [`GemmPatch::run`].
    pub unsafe fn run(
        &self,
        stream: &CudaStream,
        spec: &GemmSpec,
        a: u64,
        b: u64,
        c: u64,
    ) -> Result<()> {
        spec.validate()?;
        ensure(!spec.trans_a && !spec.trans_b, || {
            format!("the cublasGemmEx baseline takes no transposes: {spec:?}")
        })?;
        ensure(spec.epilogue == GemmEpilogue::None, || {
            format!("cublasGemmEx has no epilogue: {spec:?}")
        })?;
        let err = |what: &'static str| {
            move |e: blas::CublasError| KernelError::Blas {
                what,
                msg: format!("{:?}", e.0),
            }
        };
        self.ctx
            .bind_to_thread()
            .map_err(KernelError::driver("bind context"))?;
        // SAFETY: the handle is live; the stream belongs to this context.
        unsafe { blas::set_stream(self.handle, stream.cu_stream() as blas_sys::cudaStream_t) }
            .map_err(err("cublasSetStream"))?;
        let alpha: f32 = 1.0;
        let beta: f32 = if spec.accumulate { 1.0 } else { 0.0 };
        // SAFETY: the caller guarantees the operands; alpha/beta are host f32 matching the
        // f32 compute type.
        unsafe {
            blas::gemm_ex(
                self.handle,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                spec.n as i32,
                spec.m as i32,
                spec.k as i32,
                (&alpha) as *const f32 as *const c_void,
                b as *const c_void,
                spec.in_type.blas(),
                spec.ldb as i32,
                a as *const c_void,
                spec.in_type.blas(),
                spec.lda as i32,
                (&beta) as *const f32 as *const c_void,
                c as *mut c_void,
                spec.out_type.blas(),
                spec.ldc as i32,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        }
        .map_err(err("cublasGemmEx"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_validation() {
        let ok = GemmSpec::dense(64, 32, 16, ElemType::BF16, ElemType::F32, false);
        assert!(ok.validate().is_ok());
        assert_eq!(ok.flops(), 2.0 * 64.0 * 32.0 * 16.0);
        let bad_ld = GemmSpec { lda: 8, ..ok };
        assert!(bad_ld.validate().is_err());
        let bad_ty = GemmSpec {
            in_type: ElemType::F32,
            out_type: ElemType::BF16,
            ..ok
        };
        assert!(bad_ty.validate().is_err());
        let empty = GemmSpec { m: 0, ..ok };
        assert!(empty.validate().is_err());
        let gelu = GemmSpec {
            epilogue: GemmEpilogue::Gelu,
            ..ok
        };
        assert!(gelu.validate().is_ok());
        let gelu_acc = GemmSpec {
            accumulate: true,
            ..gelu
        };
        assert!(gelu_acc.validate().is_err());
    }
}
