//! Helper kernels for checks and benchmarks (`check.cu`, NVRTC): device-side random inputs,
//! non-finite counts, and plain f32 references for GEMM entries and attention rows; plus the
//! host-side error measures used by the checks.

use super::attention::AttnLaunch;
use super::cudnn::{IoType, SdpaCall};
use super::error::{ensure, KernelError, Result};
use super::gemm::{ElemType, GemmSpec};
use super::nvrtc::compile_and_load;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DevicePtr, DeviceRepr, LaunchConfig,
    PushKernelArg, ValidAsZeroBits,
};
use std::sync::Arc;

/// CUDA C++ source of the helper kernels.
pub const CHECK_SOURCE: &str = include_str!("check.cu");

/// The compiled helper kernels of one context.
pub struct CheckKernels {
    _module: Arc<CudaModule>,
    rand_bf16: CudaFunction,
    rand_f32: CudaFunction,
    nonfinite_f32: CudaFunction,
    nonfinite_bf16: CudaFunction,
    ref_gemm: CudaFunction,
    gather_f32: CudaFunction,
    gather_bf16: CudaFunction,
    ref_sdpa: CudaFunction,
    rand_f16: CudaFunction,
}

/// What the reference rows kernel computes: head dims up to 256, `hq` a multiple of `hk`.
fn ref_dims(dqk: usize, dv: usize, hq: usize, hk: usize) -> Result<()> {
    ensure(dqk <= 256 && dv <= 256, || {
        format!("reference: head dims {dqk} / {dv} above 256")
    })?;
    ensure(hk > 0 && hq.is_multiple_of(hk), || {
        format!("reference: h_q {hq} not a multiple of h_k {hk}")
    })
}

/// Kernel parameter block of `mercury_check_ref_sdpa_rows`; must match `struct SdpaRefArgs` in
/// `check.cu`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct SdpaRefArgsDev {
    q: u64,
    k: u64,
    v: u64,
    o: u64,
    stats: u64,
    q_s: [i64; 3],
    k_s: [i64; 3],
    v_s: [i64; 3],
    o_s: [i64; 3],
    st_s: [i64; 2],
    delta: i64,
    b: i32,
    hq: i32,
    hk: i32,
    sq: i32,
    sk: i32,
    dqk: i32,
    dv: i32,
    causal: i32,
    io: i32,
    o_f32: i32,
    scale: f32,
}

// SAFETY: `#[repr(C)]` of 8-byte and 4-byte scalars in the order of the C struct, which has the
// same natural layout (checked by `sdpa_ref_args_layout`).
unsafe impl DeviceRepr for SdpaRefArgsDev {}

fn grid_for(n: usize) -> LaunchConfig {
    let blocks = n.div_ceil(256).clamp(1, 4096) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (256, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Copies `n` elements at device pointer `ptr` to the host (synchronises `stream` first).
///
/// # Safety
/// `ptr` must be device memory of the stream's context holding `n` elements of `T`.
pub unsafe fn dtoh<T: DeviceRepr + Default + Clone>(
    stream: &CudaStream,
    ptr: u64,
    n: usize,
) -> Result<Vec<T>> {
    stream
        .synchronize()
        .map_err(KernelError::driver("synchronize before download"))?;
    let mut out = vec![T::default(); n];
    if n > 0 {
        // SAFETY: the caller guarantees `ptr` holds `n` elements; `out` has room for them.
        unsafe { cudarc::driver::result::memcpy_dtoh_sync(&mut out, ptr) }
            .map_err(KernelError::driver("download"))?;
    }
    Ok(out)
}

fn upload<T: DeviceRepr>(
    stream: &Arc<CudaStream>,
    data: &[T],
) -> Result<cudarc::driver::CudaSlice<T>> {
    stream
        .clone_htod(data)
        .map_err(KernelError::driver("upload"))
}

fn zeros<T: DeviceRepr + ValidAsZeroBits>(
    stream: &Arc<CudaStream>,
    n: usize,
) -> Result<cudarc::driver::CudaSlice<T>> {
    stream
        .alloc_zeros::<T>(n.max(1))
        .map_err(KernelError::driver("alloc"))
}

fn ptr_of<T>(s: &cudarc::driver::CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

/// A dense reference comparison: `rel = ||got - ref|| / ||ref||` over finite reference values,
/// plus counts of non-finite mismatches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ErrStats {
    /// Relative L2 error over positions where the reference is finite.
    pub rel: f64,
    /// Largest absolute difference over those positions.
    pub max_abs: f64,
    /// Positions where `got` is NaN, or finite-ness differs from the reference (an infinite
    /// reference must be matched by the same infinity).
    pub bad: usize,
    /// Number of compared values.
    pub count: usize,
}

impl ErrStats {
    /// True when nothing non-finite went wrong and the relative error is below `tol`.
    pub fn ok(&self, tol: f64) -> bool {
        self.bad == 0 && self.rel.is_finite() && self.rel <= tol
    }
}

/// Compares `got` with `reference` (see [`ErrStats`]).
pub fn compare(got: &[f64], reference: &[f64]) -> ErrStats {
    let mut num = 0.0;
    let mut den = 0.0;
    let mut max_abs: f64 = 0.0;
    let mut bad = got.len().abs_diff(reference.len());
    for (g, r) in got.iter().zip(reference) {
        if g.is_nan() {
            bad += 1;
        } else if r.is_finite() {
            if !g.is_finite() {
                bad += 1;
            } else {
                num += (g - r) * (g - r);
                den += r * r;
                max_abs = max_abs.max((g - r).abs());
            }
        } else if g != r {
            bad += 1;
        }
    }
    let rel = if den > 0.0 {
        (num / den).sqrt()
    } else if num == 0.0 {
        0.0
    } else {
        f64::INFINITY
    };
    ErrStats {
        rel,
        max_abs,
        bad,
        count: got.len().min(reference.len()),
    }
}

/// bf16 bits to f64 (exact).
pub fn bf16_to_f64(x: u16) -> f64 {
    half::bf16::from_bits(x).to_f64()
}

/// Result of [`CheckKernels::attention_rows`]: reference and patch output for each row.
#[derive(Debug, Clone, PartialEq)]
pub struct RowsCheck {
    /// `[rows, d]` reference output (`d` = 128 for the NVRTC patch, `d_v` for cuDNN).
    pub o_ref: Vec<f32>,
    /// `[rows]` reference lse.
    pub lse_ref: Vec<f32>,
    /// `[rows, d]` what the patch wrote.
    pub o_got: Vec<f32>,
    /// `[rows]` what the patch wrote.
    pub lse_got: Vec<f32>,
}

impl RowsCheck {
    /// Error of the output rows.
    pub fn o_err(&self) -> ErrStats {
        let g: Vec<f64> = self.o_got.iter().map(|x| *x as f64).collect();
        let r: Vec<f64> = self.o_ref.iter().map(|x| *x as f64).collect();
        compare(&g, &r)
    }
    /// Error of the lse values.
    pub fn lse_err(&self) -> ErrStats {
        let g: Vec<f64> = self.lse_got.iter().map(|x| *x as f64).collect();
        let r: Vec<f64> = self.lse_ref.iter().map(|x| *x as f64).collect();
        compare(&g, &r)
    }
}

impl CheckKernels {
    /// Compiles [`CHECK_SOURCE`] for the device of `ctx` and loads it.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let module = compile_and_load(ctx, CHECK_SOURCE, "check kernels")?;
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(KernelError::driver("load check function"))
        };
        Ok(CheckKernels {
            rand_bf16: f("mercury_check_fill_random_bf16")?,
            rand_f32: f("mercury_check_fill_random_f32")?,
            nonfinite_f32: f("mercury_check_count_nonfinite_f32")?,
            nonfinite_bf16: f("mercury_check_count_nonfinite_bf16")?,
            ref_gemm: f("mercury_check_ref_gemm_entries")?,
            gather_f32: f("mercury_check_gather_entries_f32")?,
            gather_bf16: f("mercury_check_gather_entries_bf16")?,
            ref_sdpa: f("mercury_check_ref_sdpa_rows")?,
            rand_f16: f("mercury_check_fill_random_f16")?,
            _module: module,
        })
    }

    /// Fills `n` bf16 values at `ptr` with uniform random values in `[lo, hi)` from `seed`.
    ///
    /// # Safety
    /// `ptr` must be device memory of this context with room for `n` bf16 values.
    pub unsafe fn fill_random_bf16(
        &self,
        stream: &CudaStream,
        ptr: u64,
        n: usize,
        seed: u64,
        lo: f32,
        hi: f32,
    ) -> Result<()> {
        let n64 = n as i64;
        let mut b = stream.launch_builder(&self.rand_bf16);
        b.arg(&ptr).arg(&n64).arg(&seed).arg(&lo).arg(&hi);
        // SAFETY: the arguments match the kernel signature; the caller guarantees the memory.
        unsafe { b.launch(grid_for(n)) }
            .map(|_| ())
            .map_err(KernelError::driver("launch fill_random_bf16"))
    }

    /// Fills `n` f16 values at `ptr` with uniform random values in `[lo, hi)` from `seed`.
    ///
    /// # Safety
    /// `ptr` must be device memory of this context with room for `n` f16 values.
    pub unsafe fn fill_random_f16(
        &self,
        stream: &CudaStream,
        ptr: u64,
        n: usize,
        seed: u64,
        lo: f32,
        hi: f32,
    ) -> Result<()> {
        let n64 = n as i64;
        let mut b = stream.launch_builder(&self.rand_f16);
        b.arg(&ptr).arg(&n64).arg(&seed).arg(&lo).arg(&hi);
        // SAFETY: the arguments match the kernel signature; the caller guarantees the memory.
        unsafe { b.launch(grid_for(n)) }
            .map(|_| ())
            .map_err(KernelError::driver("launch fill_random_f16"))
    }

    /// Fills `n` f32 values at `ptr` with uniform random values in `[lo, hi)` from `seed`.
    ///
    /// # Safety
    /// `ptr` must be device memory of this context with room for `n` f32 values.
    pub unsafe fn fill_random_f32(
        &self,
        stream: &CudaStream,
        ptr: u64,
        n: usize,
        seed: u64,
        lo: f32,
        hi: f32,
    ) -> Result<()> {
        let n64 = n as i64;
        let mut b = stream.launch_builder(&self.rand_f32);
        b.arg(&ptr).arg(&n64).arg(&seed).arg(&lo).arg(&hi);
        // SAFETY: the arguments match the kernel signature; the caller guarantees the memory.
        unsafe { b.launch(grid_for(n)) }
            .map(|_| ())
            .map_err(KernelError::driver("launch fill_random_f32"))
    }

    /// Counts NaN and infinite values among `n` elements of type `ty` at `ptr` (synchronises).
    ///
    /// # Safety
    /// `ptr` must be device memory of this context holding `n` elements of `ty`.
    pub unsafe fn count_nonfinite(
        &self,
        stream: &Arc<CudaStream>,
        ptr: u64,
        n: usize,
        ty: ElemType,
    ) -> Result<u64> {
        let count = zeros::<u64>(stream, 1)?;
        let cptr = ptr_of(&count, stream);
        let n64 = n as i64;
        let f = match ty {
            ElemType::F32 => &self.nonfinite_f32,
            ElemType::BF16 => &self.nonfinite_bf16,
            ElemType::F16 => {
                return Err(KernelError::Invalid(
                    "count_nonfinite: f16 not supported".into(),
                ))
            }
        };
        let mut b = stream.launch_builder(f);
        b.arg(&ptr).arg(&n64).arg(&cptr);
        // SAFETY: arguments match the kernel; `count` lives until the download below.
        unsafe { b.launch(grid_for(n)) }.map_err(KernelError::driver("launch count_nonfinite"))?;
        // SAFETY: `count` holds one u64.
        let v = unsafe { dtoh::<u64>(stream, cptr, 1)? };
        drop(count);
        Ok(v[0])
    }

    /// f32 reference values of GEMM entries `idx` (`i * n + j`) and the patch's values of the
    /// same entries of `c` (synchronises). Returns `(reference, got)`.
    ///
    /// # Safety
    /// `a`, `b`, `c` must be the device operands of a GEMM described by `spec` (bf16 inputs).
    pub unsafe fn gemm_entries(
        &self,
        stream: &Arc<CudaStream>,
        spec: &GemmSpec,
        a: u64,
        b: u64,
        c: u64,
        idx: &[i64],
    ) -> Result<(Vec<f32>, Vec<f32>)> {
        ensure(spec.in_type == ElemType::BF16, || {
            "gemm reference supports bf16 inputs only".into()
        })?;
        ensure(
            idx.iter()
                .all(|e| *e >= 0 && (*e as usize) < spec.m * spec.n),
            || "gemm entry index out of range".into(),
        )?;
        if idx.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let d_idx = upload(stream, idx)?;
        let d_ref = zeros::<f32>(stream, idx.len())?;
        let d_got = zeros::<f32>(stream, idx.len())?;
        let (pi, pr, pg) = (
            ptr_of(&d_idx, stream),
            ptr_of(&d_ref, stream),
            ptr_of(&d_got, stream),
        );
        let count = idx.len() as i32;
        let (n, k, lda, ldb, ldc) = (
            spec.n as i64,
            spec.k as i64,
            spec.lda as i64,
            spec.ldb as i64,
            spec.ldc as i64,
        );
        let warps_per_block = 8usize;
        let cfg = LaunchConfig {
            grid_dim: (idx.len().div_ceil(warps_per_block) as u32, 1, 1),
            block_dim: (32 * warps_per_block as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut l = stream.launch_builder(&self.ref_gemm);
        l.arg(&a)
            .arg(&b)
            .arg(&pi)
            .arg(&count)
            .arg(&n)
            .arg(&k)
            .arg(&lda)
            .arg(&ldb)
            .arg(&pr);
        // SAFETY: arguments match `mercury_check_ref_gemm_entries`; buffers live until the
        // downloads below complete.
        unsafe { l.launch(cfg) }.map_err(KernelError::driver("launch ref_gemm"))?;
        let gather = match spec.out_type {
            ElemType::F32 => &self.gather_f32,
            ElemType::BF16 => &self.gather_bf16,
            ElemType::F16 => {
                return Err(KernelError::Invalid(
                    "gemm check: f16 output not supported".into(),
                ))
            }
        };
        let mut l = stream.launch_builder(gather);
        l.arg(&c).arg(&pi).arg(&count).arg(&n).arg(&ldc).arg(&pg);
        // SAFETY: as above for the gather kernel.
        unsafe { l.launch(grid_for(idx.len())) }.map_err(KernelError::driver("launch gather"))?;
        // SAFETY: both buffers hold `idx.len()` f32.
        let r = unsafe { dtoh::<f32>(stream, pr, idx.len())? };
        // SAFETY: as above.
        let g = unsafe { dtoh::<f32>(stream, pg, idx.len())? };
        drop((d_idx, d_ref, d_got));
        Ok((r, g))
    }

    /// Plain f32 attention for the query rows `rows` (`(bi * hq + h) * sq + r`) of the launch
    /// `args`, next to what the patch wrote into `args.o` / `args.lse` for the same rows
    /// (synchronises).
    ///
    /// # Safety
    /// `args` must describe live device tensors (as for `AttentionPatch::launch`) whose
    /// outputs have been written.
    pub unsafe fn attention_rows(
        &self,
        stream: &Arc<CudaStream>,
        args: &AttnLaunch,
        rows: &[i64],
    ) -> Result<RowsCheck> {
        let d = args.dims;
        ref_dims(d.d, args.dv, d.hq, d.hk)?;
        let p = args.params;
        let s3 = |t: &super::attention::Strided3| [t.sb, t.sh, t.sr];
        let dev = SdpaRefArgsDev {
            q: args.q.ptr,
            k: args.k.ptr,
            v: args.v.ptr,
            o: args.o.ptr,
            stats: args.lse.ptr,
            q_s: s3(&args.q),
            k_s: s3(&args.k),
            v_s: s3(&args.v),
            o_s: s3(&args.o),
            st_s: [args.lse.sb, args.lse.sh],
            delta: p.q_offset as i64 - p.k_offset as i64,
            b: d.b as i32,
            hq: d.hq as i32,
            hk: d.hk as i32,
            sq: d.sq as i32,
            sk: d.sk as i32,
            dqk: d.d as i32,
            dv: args.dv as i32,
            causal: p.causal as i32,
            io: 0,
            o_f32: 1,
            scale: p.scale as f32,
        };
        // SAFETY: per the caller.
        unsafe { self.ref_rows(stream, &dev, d.b * d.hq * d.sq, args.dv, rows) }
    }

    /// Plain f32 attention for the query rows `rows` (`(bi * hq + h) * sq + r`) of the cuDNN
    /// call `call` (any head dims up to 256, bf16 or f16, causal shifts), next to what the
    /// patch wrote into its O and Stats for the same rows (synchronises). `o_ref` / `o_got`
    /// are `[rows, dv]`.
    ///
    /// # Safety
    /// `call` must describe live device tensors whose outputs have been written.
    pub unsafe fn sdpa_rows(
        &self,
        stream: &Arc<CudaStream>,
        call: &SdpaCall,
        rows: &[i64],
    ) -> Result<RowsCheck> {
        ref_dims(call.dqk, call.dv, call.hq, call.hk)?;
        let s3 = |s: [i64; 4]| [s[0], s[1], s[2]];
        let dev = SdpaRefArgsDev {
            q: call.q.ptr,
            k: call.k.ptr,
            v: call.v.ptr,
            o: call.o.ptr,
            stats: call.stats.ptr,
            q_s: s3(call.q.strides),
            k_s: s3(call.k.strides),
            v_s: s3(call.v.strides),
            o_s: s3(call.o.strides),
            st_s: [call.stats.strides[0], call.stats.strides[1]],
            delta: call.causal_delta.unwrap_or(0),
            b: call.b as i32,
            hq: call.hq as i32,
            hk: call.hk as i32,
            sq: call.sq as i32,
            sk: call.sk as i32,
            dqk: call.dqk as i32,
            dv: call.dv as i32,
            causal: call.causal_delta.is_some() as i32,
            io: match call.io {
                IoType::Bf16 => 0,
                IoType::F16 => 1,
            },
            o_f32: call.o_f32 as i32,
            scale: call.scale,
        };
        // SAFETY: per the caller.
        unsafe { self.ref_rows(stream, &dev, call.b * call.hq * call.sq, call.dv, rows) }
    }

    /// Runs `mercury_check_ref_sdpa_rows` for `rows` (each below `total`) of width `dv`.
    ///
    /// # Safety
    /// `dev` must describe live device tensors whose outputs have been written.
    unsafe fn ref_rows(
        &self,
        stream: &Arc<CudaStream>,
        dev: &SdpaRefArgsDev,
        total: usize,
        dv: usize,
        rows: &[i64],
    ) -> Result<RowsCheck> {
        ensure(rows.iter().all(|r| *r >= 0 && *r < total as i64), || {
            "attention check row out of range".into()
        })?;
        let nr = rows.len();
        if nr == 0 {
            return Ok(RowsCheck {
                o_ref: Vec::new(),
                lse_ref: Vec::new(),
                o_got: Vec::new(),
                lse_got: Vec::new(),
            });
        }
        let d_rows = upload(stream, rows)?;
        let o_ref = zeros::<f32>(stream, nr * dv)?;
        let lse_ref = zeros::<f32>(stream, nr)?;
        let o_got = zeros::<f32>(stream, nr * dv)?;
        let lse_got = zeros::<f32>(stream, nr)?;
        let ptrs = [
            ptr_of(&d_rows, stream),
            ptr_of(&o_ref, stream),
            ptr_of(&lse_ref, stream),
            ptr_of(&o_got, stream),
            ptr_of(&lse_got, stream),
        ];
        let nrows = nr as i32;
        let cfg = LaunchConfig {
            grid_dim: (nr as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut l = stream.launch_builder(&self.ref_sdpa);
        l.arg(dev)
            .arg(&ptrs[0])
            .arg(&nrows)
            .arg(&ptrs[1])
            .arg(&ptrs[2])
            .arg(&ptrs[3])
            .arg(&ptrs[4]);
        // SAFETY: arguments match `mercury_check_ref_sdpa_rows`; every buffer outlives the
        // downloads below.
        unsafe { l.launch(cfg) }.map_err(KernelError::driver("launch ref_sdpa"))?;
        // SAFETY: the buffers hold the sizes given.
        let out = unsafe {
            RowsCheck {
                o_ref: dtoh(stream, ptrs[1], nr * dv)?,
                lse_ref: dtoh(stream, ptrs[2], nr)?,
                o_got: dtoh(stream, ptrs[3], nr * dv)?,
                lse_got: dtoh(stream, ptrs[4], nr)?,
            }
        };
        drop((d_rows, o_ref, lse_ref, o_got, lse_got));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_measures() {
        let r = [1.0, 2.0, f64::NEG_INFINITY];
        let s = compare(&[1.0, 2.0, f64::NEG_INFINITY], &r);
        assert_eq!((s.rel, s.bad, s.count), (0.0, 0, 3));
        assert!(s.ok(1e-9));
        let s = compare(&[1.0, 2.1, f64::NEG_INFINITY], &r);
        assert!((s.rel - 0.1 / 5f64.sqrt()).abs() < 1e-12);
        let s = compare(&[f64::NAN, 2.0, f64::NEG_INFINITY], &r);
        assert_eq!(s.bad, 1);
        assert!(!s.ok(1.0));
        let s = compare(&[1.0, 2.0, 0.0], &r);
        assert_eq!(s.bad, 1);
        let s = compare(&[1.0, f64::INFINITY, f64::NEG_INFINITY], &r);
        assert_eq!(s.bad, 1);
    }

    #[test]
    fn sdpa_ref_args_layout() {
        // 5 pointers, 14 strides and delta (i64), 10 ints and a float, padded to 8 bytes.
        assert_eq!(
            std::mem::size_of::<SdpaRefArgsDev>(),
            5 * 8 + 15 * 8 + 10 * 4 + 8
        );
        assert!(CHECK_SOURCE.contains("struct SdpaRefArgs {"));
        assert!(CHECK_SOURCE.contains("int causal, io, o_f32;"));
    }

    #[test]
    fn bf16_bits() {
        assert_eq!(bf16_to_f64(0x3f80), 1.0);
        assert_eq!(bf16_to_f64(0xc000), -2.0);
        assert!(bf16_to_f64(0x7fc0).is_nan());
    }
}
