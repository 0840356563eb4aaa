//! Materialising a [`GraphDesc`] through cuDNN's backend API: descriptors, the operation
//! graph, heuristics, an execution plan, and execution with a variant pack.
//!
//! The flow is the one of `cudnn-sdpa-notes.md`, section 1: tensors, operations (each
//! finalised), the graph, engine configurations from heuristics mode A then FALLBACK, and the
//! first configuration whose plan finalises. Every descriptor made for a plan is kept alive as
//! long as the plan.

use super::graph::{DataType, GraphDesc, OpDesc, PwMode, RedOp};
use super::loader::CudnnLib;
use cudarc::cudnn::sys::{
    cudnnBackendAttributeName_t as A, cudnnBackendAttributeType_t as T,
    cudnnBackendDescriptorType_t as D, cudnnBackendHeurMode_t as H, cudnnDataType_t,
    cudnnPointwiseMode_t as P, cudnnReduceTensorOp_t,
};
use std::collections::HashMap;
use std::ffi::c_void;

/// A cuDNN failure: what was being done and the library's explanation.
#[derive(Debug, Clone)]
pub struct CudnnError {
    pub what: String,
    pub status: u32,
    pub message: String,
}

impl std::fmt::Display for CudnnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuDNN {}: {}", self.what, self.message)
    }
}

/// Status codes 3000-3999: the configuration is not supported (try another one).
pub fn is_not_supported(status: u32) -> bool {
    (3000..4000).contains(&status)
}

pub(crate) fn check(
    lib: &CudnnLib,
    status: u32,
    what: impl FnOnce() -> String,
) -> Result<(), CudnnError> {
    if status == 0 {
        Ok(())
    } else {
        Err(CudnnError {
            what: what(),
            status,
            message: lib.describe(status),
        })
    }
}

/// One backend descriptor, destroyed on drop.
pub(crate) struct Desc<'l> {
    lib: &'l CudnnLib,
    raw: *mut c_void,
    kind: D,
}

impl Drop for Desc<'_> {
    fn drop(&mut self) {
        // SAFETY: `raw` came from cudnnBackendCreateDescriptor and is destroyed once; the
        // status is ignored (nothing to do about a failed destroy on drop).
        unsafe { (self.lib.destroy_descriptor)(self.raw) };
    }
}

// SAFETY: a finalised backend descriptor is an immutable heap object of the library; plans are
// used from one thread at a time (the patch keeps them behind a mutex).
unsafe impl Send for Desc<'_> {}

impl<'l> Desc<'l> {
    pub(crate) fn new(lib: &'l CudnnLib, kind: D) -> Result<Self, CudnnError> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is a valid out-pointer; the type is a cuDNN descriptor type value.
        let s = unsafe { (lib.create_descriptor)(kind as u32, &mut raw) };
        check(lib, s, || format!("create {kind:?}"))?;
        Ok(Desc { lib, raw, kind })
    }

    pub(crate) fn raw(&self) -> *mut c_void {
        self.raw
    }

    /// Sets an attribute from `n` elements at `ptr`.
    ///
    /// # Safety
    /// `ptr` must point to `n` readable elements of the C type `ty` names.
    unsafe fn set_raw(&self, name: A, ty: T, n: i64, ptr: *const c_void) -> Result<(), CudnnError> {
        // SAFETY: per the caller; `raw` is a live descriptor.
        let s = unsafe { (self.lib.set_attribute)(self.raw, name as u32, ty as u32, n, ptr) };
        check(self.lib, s, || format!("set {name:?} on {:?}", self.kind))
    }

    pub(crate) fn set_i64s(&self, name: A, v: &[i64]) -> Result<(), CudnnError> {
        // SAFETY: `v` holds `v.len()` i64s (CUDNN_TYPE_INT64).
        unsafe { self.set_raw(name, T::CUDNN_TYPE_INT64, v.len() as i64, v.as_ptr().cast()) }
    }

    pub(crate) fn set_i64(&self, name: A, v: i64) -> Result<(), CudnnError> {
        self.set_i64s(name, &[v])
    }

    pub(crate) fn set_bool(&self, name: A, v: bool) -> Result<(), CudnnError> {
        // SAFETY: CUDNN_TYPE_BOOLEAN is a 1-byte C bool; Rust's bool has that layout.
        unsafe { self.set_raw(name, T::CUDNN_TYPE_BOOLEAN, 1, (&v as *const bool).cast()) }
    }

    pub(crate) fn set_u32(&self, name: A, ty: T, v: u32) -> Result<(), CudnnError> {
        // SAFETY: enum-typed attributes (data type, pointwise mode, heuristics mode, reduction
        // operator) are C enums, 4-byte integers.
        unsafe { self.set_raw(name, ty, 1, (&v as *const u32).cast()) }
    }

    pub(crate) fn set_f32(&self, name: A, v: f32) -> Result<(), CudnnError> {
        // SAFETY: one f32 (CUDNN_TYPE_FLOAT).
        unsafe { self.set_raw(name, T::CUDNN_TYPE_FLOAT, 1, (&v as *const f32).cast()) }
    }

    pub(crate) fn set_descs(&self, name: A, v: &[&Desc<'_>]) -> Result<(), CudnnError> {
        let raws: Vec<*mut c_void> = v.iter().map(|d| d.raw).collect();
        // SAFETY: an array of live descriptor handles (CUDNN_TYPE_BACKEND_DESCRIPTOR).
        unsafe {
            self.set_raw(
                name,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR,
                raws.len() as i64,
                raws.as_ptr().cast(),
            )
        }
    }

    pub(crate) fn set_handle(&self, name: A, handle: *mut c_void) -> Result<(), CudnnError> {
        // SAFETY: CUDNN_TYPE_HANDLE takes the address of a cudnnHandle_t.
        unsafe {
            self.set_raw(
                name,
                T::CUDNN_TYPE_HANDLE,
                1,
                (&handle as *const *mut c_void).cast(),
            )
        }
    }

    pub(crate) fn set_void_ptrs(&self, name: A, v: &[*mut c_void]) -> Result<(), CudnnError> {
        // SAFETY: an array of pointers (CUDNN_TYPE_VOID_PTR).
        unsafe {
            self.set_raw(
                name,
                T::CUDNN_TYPE_VOID_PTR,
                v.len() as i64,
                v.as_ptr().cast(),
            )
        }
    }

    pub(crate) fn finalize(&self) -> Result<(), CudnnError> {
        // SAFETY: a live descriptor whose required attributes the caller has set.
        let s = unsafe { (self.lib.finalize)(self.raw) };
        check(self.lib, s, || format!("finalize {:?}", self.kind))
    }

    fn get_i64(&self, name: A) -> Result<i64, CudnnError> {
        let (mut v, mut n) = (0i64, 0i64);
        // SAFETY: room for one i64; `n` receives the count.
        let s = unsafe {
            (self.lib.get_attribute)(
                self.raw,
                name as u32,
                T::CUDNN_TYPE_INT64 as u32,
                1,
                &mut n,
                (&mut v as *mut i64).cast(),
            )
        };
        check(self.lib, s, || format!("get {name:?}"))?;
        Ok(v)
    }
}

fn data_type(t: DataType) -> u32 {
    (match t {
        DataType::F32 => cudnnDataType_t::CUDNN_DATA_FLOAT,
        DataType::F16 => cudnnDataType_t::CUDNN_DATA_HALF,
        DataType::Bf16 => cudnnDataType_t::CUDNN_DATA_BFLOAT16,
        DataType::I32 => cudnnDataType_t::CUDNN_DATA_INT32,
        DataType::Bool => cudnnDataType_t::CUDNN_DATA_BOOLEAN,
    }) as u32
}

fn pw_mode(m: PwMode) -> u32 {
    (match m {
        PwMode::Add => P::CUDNN_POINTWISE_ADD,
        PwMode::Sub => P::CUDNN_POINTWISE_SUB,
        PwMode::Mul => P::CUDNN_POINTWISE_MUL,
        PwMode::Div => P::CUDNN_POINTWISE_DIV,
        PwMode::Exp => P::CUDNN_POINTWISE_EXP,
        PwMode::Log => P::CUDNN_POINTWISE_LOG,
        PwMode::CmpGe => P::CUDNN_POINTWISE_CMP_GE,
        PwMode::CmpLt => P::CUDNN_POINTWISE_CMP_LT,
        PwMode::LogicalAnd => P::CUDNN_POINTWISE_LOGICAL_AND,
        PwMode::GenIndex => P::CUDNN_POINTWISE_GEN_INDEX,
        PwMode::BinarySelect => P::CUDNN_POINTWISE_BINARY_SELECT,
        PwMode::Identity => P::CUDNN_POINTWISE_IDENTITY,
    }) as u32
}

fn red_op(r: RedOp) -> u32 {
    (match r {
        RedOp::Max => cudnnReduceTensorOp_t::CUDNN_REDUCE_TENSOR_MAX,
        RedOp::Add => cudnnReduceTensorOp_t::CUDNN_REDUCE_TENSOR_ADD,
    }) as u32
}

/// A finalised execution plan plus everything it was built from.
pub struct ExecPlan {
    // Field order is drop order: the plan first, then the configuration, graph, ops and
    // tensors it refers to.
    plan: Desc<'static>,
    _keep: Vec<Desc<'static>>,
    /// Workspace bytes the plan needs.
    pub workspace: usize,
    /// The engine's global index (for logs).
    pub engine: i64,
    /// Unique ids the variant pack must bind.
    pub uids: Vec<i64>,
}

/// Builds an execution plan for `g` on `handle`: heuristics mode A, then FALLBACK; the first
/// engine configuration whose plan finalises wins. Not-supported statuses (3xxx) move on to the
/// next configuration; the error of the last attempt is returned when none finalises.
pub fn build_plan(
    lib: &'static CudnnLib,
    handle: *mut c_void,
    g: &GraphDesc,
) -> Result<ExecPlan, CudnnError> {
    let mut keep: Vec<Desc<'static>> = Vec::new();
    let mut idx: HashMap<i64, usize> = HashMap::new();
    for t in &g.tensors {
        let d = Desc::new(lib, D::CUDNN_BACKEND_TENSOR_DESCRIPTOR)?;
        d.set_u32(
            A::CUDNN_ATTR_TENSOR_DATA_TYPE,
            T::CUDNN_TYPE_DATA_TYPE,
            data_type(t.dtype),
        )?;
        d.set_i64s(A::CUDNN_ATTR_TENSOR_DIMENSIONS, &t.dims)?;
        d.set_i64s(A::CUDNN_ATTR_TENSOR_STRIDES, &t.strides)?;
        d.set_i64(A::CUDNN_ATTR_TENSOR_UNIQUE_ID, t.uid)?;
        d.set_i64(A::CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, t.align)?;
        d.set_bool(A::CUDNN_ATTR_TENSOR_IS_VIRTUAL, t.is_virtual)?;
        if t.by_value {
            d.set_bool(A::CUDNN_ATTR_TENSOR_IS_BY_VALUE, true)?;
        }
        if let Some(r) = t.ragged {
            let at = *idx.get(&r).ok_or_else(|| CudnnError {
                what: format!("tensor {}", t.uid),
                status: 2000,
                message: format!("its ragged offset tensor {r} is not declared before it"),
            })?;
            d.set_descs(A::CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC, &[&keep[at]])?;
        }
        d.finalize().map_err(|mut e| {
            e.what = format!(
                "{} (tensor {} {:?} dims {:?} strides {:?})",
                e.what, t.uid, t.dtype, t.dims, t.strides
            );
            e
        })?;
        idx.insert(t.uid, keep.len());
        keep.push(d);
    }
    let mut ops = Vec::new();
    for op in &g.ops {
        let t = |uid: i64| &keep[idx[&uid]];
        let d = match op {
            OpDesc::SdpaFwd {
                q,
                k,
                v,
                o,
                stats,
                scale,
            } => {
                let d = Desc::new(lib, D::CUDNN_BACKEND_OPERATION_SDPA_FWD_DESCRIPTOR)?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_SDPA_FWD_QDESC, &[t(*q)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_SDPA_FWD_KDESC, &[t(*k)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_SDPA_FWD_VDESC, &[t(*v)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_SDPA_FWD_ODESC, &[t(*o)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_SDPA_FWD_STATSDESC, &[t(*stats)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_SDPA_FWD_SCALEDESC, &[t(*scale)])?;
                d
            }
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
            } => {
                let d = Desc::new(lib, D::CUDNN_BACKEND_OPERATION_SDPA_BWD_DESCRIPTOR)?;
                for (name, u) in [
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_QDESC, q),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_KDESC, k),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_VDESC, v),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_ODESC, o),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_DODDESC, d_o),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_STATSDESC, stats),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_SCALEDESC, scale),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_DQDESC, dq),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_DKDESC, dk),
                    (A::CUDNN_ATTR_OPERATION_SDPA_BWD_DVDESC, dv),
                ] {
                    d.set_descs(name, &[t(*u)])?;
                }
                d
            }
            OpDesc::Reshape { x, y } => {
                let d = Desc::new(lib, D::CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR)?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_RESHAPE_XDESC, &[t(*x)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_RESHAPE_YDESC, &[t(*y)])?;
                d
            }
            OpDesc::Matmul { a, b, c } | OpDesc::MatmulVarlen { a, b, c, .. } => {
                let mm = Desc::new(lib, D::CUDNN_BACKEND_MATMUL_DESCRIPTOR)?;
                mm.set_u32(
                    A::CUDNN_ATTR_MATMUL_COMP_TYPE,
                    T::CUDNN_TYPE_DATA_TYPE,
                    data_type(DataType::F32),
                )?;
                mm.finalize()?;
                let d = Desc::new(lib, D::CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR)?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_MATMUL_ADESC, &[t(*a)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_MATMUL_BDESC, &[t(*b)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_MATMUL_CDESC, &[t(*c)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_MATMUL_DESC, &[&mm])?;
                if let OpDesc::MatmulVarlen { m, n, k, .. } = op {
                    for (name, u) in [
                        (A::CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, m),
                        (A::CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, n),
                        (A::CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, k),
                    ] {
                        if let Some(u) = u {
                            d.set_descs(name, &[t(*u)])?;
                        }
                    }
                }
                keep.push(mm);
                d
            }
            OpDesc::Pointwise {
                mode,
                prec,
                x,
                b,
                t: cond,
                y,
                axis,
            } => {
                let pw = Desc::new(lib, D::CUDNN_BACKEND_POINTWISE_DESCRIPTOR)?;
                pw.set_u32(
                    A::CUDNN_ATTR_POINTWISE_MODE,
                    T::CUDNN_TYPE_POINTWISE_MODE,
                    pw_mode(*mode),
                )?;
                pw.set_u32(
                    A::CUDNN_ATTR_POINTWISE_MATH_PREC,
                    T::CUDNN_TYPE_DATA_TYPE,
                    data_type(*prec),
                )?;
                if let Some(ax) = axis {
                    pw.set_i64(A::CUDNN_ATTR_POINTWISE_AXIS, *ax)?;
                }
                pw.finalize()?;
                let d = Desc::new(lib, D::CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR)?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, &[&pw])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_POINTWISE_XDESC, &[t(*x)])?;
                if let Some(b) = b {
                    d.set_descs(A::CUDNN_ATTR_OPERATION_POINTWISE_BDESC, &[t(*b)])?;
                }
                if let Some(c) = cond {
                    d.set_descs(A::CUDNN_ATTR_OPERATION_POINTWISE_TDESC, &[t(*c)])?;
                }
                d.set_descs(A::CUDNN_ATTR_OPERATION_POINTWISE_YDESC, &[t(*y)])?;
                if *mode != PwMode::GenIndex {
                    d.set_f32(A::CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.0)?;
                    if b.is_some() {
                        d.set_f32(A::CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.0)?;
                    }
                }
                keep.push(pw);
                d
            }
            OpDesc::Reduction { op, x, y } => {
                let r = Desc::new(lib, D::CUDNN_BACKEND_REDUCTION_DESCRIPTOR)?;
                r.set_u32(
                    A::CUDNN_ATTR_REDUCTION_OPERATOR,
                    T::CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
                    red_op(*op),
                )?;
                r.set_u32(
                    A::CUDNN_ATTR_REDUCTION_COMP_TYPE,
                    T::CUDNN_TYPE_DATA_TYPE,
                    data_type(DataType::F32),
                )?;
                r.finalize()?;
                let d = Desc::new(lib, D::CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR)?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_REDUCTION_XDESC, &[t(*x)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_REDUCTION_YDESC, &[t(*y)])?;
                d.set_descs(A::CUDNN_ATTR_OPERATION_REDUCTION_DESC, &[&r])?;
                keep.push(r);
                d
            }
        };
        d.finalize().map_err(|mut e| {
            e.what = format!("{} ({op:?})", e.what);
            e
        })?;
        ops.push(d);
    }
    let graph = Desc::new(lib, D::CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)?;
    graph.set_descs(
        A::CUDNN_ATTR_OPERATIONGRAPH_OPS,
        &ops.iter().collect::<Vec<_>>(),
    )?;
    graph.set_handle(A::CUDNN_ATTR_OPERATIONGRAPH_HANDLE, handle)?;
    graph.finalize()?;
    keep.extend(ops);

    let mut last_err = None;
    for mode in [H::CUDNN_HEUR_MODE_A, H::CUDNN_HEUR_MODE_FALLBACK] {
        let heur = Desc::new(lib, D::CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)?;
        heur.set_descs(A::CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, &[&graph])?;
        heur.set_u32(
            A::CUDNN_ATTR_ENGINEHEUR_MODE,
            T::CUDNN_TYPE_HEUR_MODE,
            mode as u32,
        )?;
        if let Err(e) = heur.finalize() {
            last_err = Some(e);
            continue;
        }
        let mut count = 0i64;
        // SAFETY: a count query: zero elements requested, null array.
        let s = unsafe {
            (lib.get_attribute)(
                heur.raw(),
                A::CUDNN_ATTR_ENGINEHEUR_RESULTS as u32,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR as u32,
                0,
                &mut count,
                std::ptr::null_mut(),
            )
        };
        check(lib, s, || "count heuristics results".into())?;
        let cfgs: Vec<Desc<'static>> = (0..count.max(0))
            .map(|_| Desc::new(lib, D::CUDNN_BACKEND_ENGINECFG_DESCRIPTOR))
            .collect::<Result<_, _>>()?;
        let mut raws: Vec<*mut c_void> = cfgs.iter().map(|c| c.raw()).collect();
        let mut got = 0i64;
        // SAFETY: `raws` holds `count` freshly created engine-config descriptors for the
        // library to fill.
        let s = unsafe {
            (lib.get_attribute)(
                heur.raw(),
                A::CUDNN_ATTR_ENGINEHEUR_RESULTS as u32,
                T::CUDNN_TYPE_BACKEND_DESCRIPTOR as u32,
                count,
                &mut got,
                raws.as_mut_ptr().cast(),
            )
        };
        check(lib, s, || "get heuristics results".into())?;
        for cfg in cfgs.into_iter().take(got.max(0) as usize) {
            let plan = Desc::new(lib, D::CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)?;
            plan.set_handle(A::CUDNN_ATTR_EXECUTION_PLAN_HANDLE, handle)?;
            plan.set_descs(A::CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, &[&cfg])?;
            match plan.finalize() {
                Ok(()) => {
                    let workspace = plan.get_i64(A::CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)?;
                    let engine = engine_index(lib, &cfg).unwrap_or(-1);
                    keep.push(graph);
                    keep.push(heur);
                    keep.push(cfg);
                    return Ok(ExecPlan {
                        plan,
                        _keep: keep,
                        workspace: workspace.max(0) as usize,
                        engine,
                        uids: g.bound_uids(),
                    });
                }
                Err(e) => last_err = Some(e),
            }
        }
    }
    Err(last_err.unwrap_or(CudnnError {
        what: "build an execution plan".into(),
        status: 3000,
        message: "the heuristics returned no engine configuration".into(),
    }))
}

fn engine_index(lib: &'static CudnnLib, cfg: &Desc<'static>) -> Result<i64, CudnnError> {
    let engine = Desc::new(lib, D::CUDNN_BACKEND_ENGINE_DESCRIPTOR)?;
    let mut raw = engine.raw();
    let mut n = 0i64;
    // SAFETY: one freshly created engine descriptor for the library to fill.
    let s = unsafe {
        (lib.get_attribute)(
            cfg.raw(),
            A::CUDNN_ATTR_ENGINECFG_ENGINE as u32,
            T::CUDNN_TYPE_BACKEND_DESCRIPTOR as u32,
            1,
            &mut n,
            (&mut raw as *mut *mut c_void).cast(),
        )
    };
    check(lib, s, || "get the engine of a configuration".into())?;
    engine.get_i64(A::CUDNN_ATTR_ENGINE_GLOBAL_INDEX)
}

impl ExecPlan {
    /// Runs the plan on the handle's stream.
    ///
    /// # Safety
    /// `bindings` must give, for every id in [`ExecPlan::uids`], a device pointer (a host
    /// pointer for by-value scalars) valid for the plan's tensor; `workspace` must point to at
    /// least [`ExecPlan::workspace`] bytes of device memory (or be null when that is 0); all of
    /// it must stay valid until the work completes on the stream.
    pub unsafe fn execute(
        &self,
        lib: &'static CudnnLib,
        handle: *mut c_void,
        bindings: &[(i64, *mut c_void)],
        workspace: *mut c_void,
    ) -> Result<(), CudnnError> {
        let mut uids = Vec::with_capacity(self.uids.len());
        let mut ptrs = Vec::with_capacity(self.uids.len());
        for u in &self.uids {
            let p = bindings
                .iter()
                .find(|(id, _)| id == u)
                .map(|(_, p)| *p)
                .ok_or_else(|| CudnnError {
                    what: "bind the variant pack".into(),
                    status: 2000,
                    message: format!("no pointer for tensor {u}"),
                })?;
            uids.push(*u);
            ptrs.push(p);
        }
        let vp = Desc::new(lib, D::CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)?;
        vp.set_i64s(A::CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, &uids)?;
        vp.set_void_ptrs(A::CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, &ptrs)?;
        vp.set_void_ptrs(A::CUDNN_ATTR_VARIANT_PACK_WORKSPACE, &[workspace])?;
        vp.finalize()?;
        // SAFETY: per the caller; the plan and variant pack are live finalised descriptors.
        let s = unsafe { (lib.execute)(handle, self.plan.raw(), vp.raw()) };
        check(lib, s, || "execute".into())
    }
}
