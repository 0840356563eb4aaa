//! The attention forward patch: a FlashAttention-2 style kernel (`attention.cu`) compiled at
//! run time by NVRTC. Semantics are those of [`crate::cpu::attention_dv`]: bf16 q/k/v, GQA,
//! causal masking with global offsets, f32 normalised output and natural-log lse, fully masked
//! rows give o = 0 and lse = -inf. An [`AttnLaunch`] describes any head dims (`dims.d` for q/k,
//! [`AttnLaunch::dv`] for v/o, as the cuDNN patch takes them); this kernel computes head dim
//! 128 with `dv == d` only ([`AttnLaunch::validate`] says why it refuses a launch).
//!
//! With [`AttnLaunch::accumulate`], o and lse are an accumulator that the tile's result is
//! merged into in the kernel's epilogue (the log-sum-exp merge of [`crate::cpu::lse_merge`]):
//! rows the tile does not reach are left untouched, and an accumulator row with lse = -inf
//! contributes nothing (its o is not read) and receives the tile's row. No extra kernel, no
//! temporary: a ring step is one launch.
//!
//! Tensors are passed as base pointer plus element strides for (batch, head, row); the last
//! dimension is contiguous. A tile view of a larger slot (a sub-range of the sequence, or of
//! the heads) therefore needs no copy.

use super::error::{ensure, KernelError, Result};
use super::gemm::ElemType;
use super::nvrtc::compile_and_load;
use crate::cpu::{AttnDims, AttnParams};
use cudarc::driver::sys::CUfunction_attribute_enum;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// CUDA C++ source of the attention kernel.
pub const ATTENTION_SOURCE: &str =
    concat!(include_str!("attn_args.cuh"), include_str!("attention.cu"));
/// Kernel variants in [`ATTENTION_SOURCE`] (same semantics, different warp tiling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttnVariant {
    /// 8 warps x 16 query rows, Q fragments in registers (`mercury_attn_fwd_bf16_d128`).
    W8,
    /// 4 warps x 32 query rows, each K/V fragment feeds two m-tiles
    /// (`mercury_attn_fwd_bf16_d128_w4`).
    W4,
}

impl AttnVariant {
    /// Both variants.
    pub const ALL: [AttnVariant; 2] = [AttnVariant::W8, AttnVariant::W4];

    /// Kernel entry point (`accumulate`: the entry that merges into its outputs).
    pub fn entry(self, accumulate: bool) -> &'static str {
        match (self, accumulate) {
            (AttnVariant::W8, false) => "mercury_attn_fwd_bf16_d128",
            (AttnVariant::W4, false) => "mercury_attn_fwd_bf16_d128_w4",
            (AttnVariant::W8, true) => "mercury_attn_fwd_bf16_d128_acc",
            (AttnVariant::W4, true) => "mercury_attn_fwd_bf16_d128_w4_acc",
        }
    }

    fn index(self, accumulate: bool) -> usize {
        (match self {
            AttnVariant::W8 => 0,
            AttnVariant::W4 => 1,
        }) + 2 * accumulate as usize
    }

    /// Threads per block.
    pub fn threads(self) -> u32 {
        match self {
            AttnVariant::W8 => 256,
            AttnVariant::W4 => 128,
        }
    }

    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            AttnVariant::W8 => "w8x16",
            AttnVariant::W4 => "w4x32",
        }
    }
}
/// The only head dimension the NVRTC kernel supports (q/k and v/o alike).
pub const HEAD_DIM: usize = 128;
/// Query rows per thread block.
pub const BLOCK_M: usize = 128;
/// Dynamic shared memory per block: the Q tile plus two K and two V tiles of 64 rows.
pub const SMEM_BYTES: u32 = (128 * 256 + 4 * 64 * 256) as u32;

/// A device tensor `[b, h, s, d]` (or `[b, h, s]` for lse): base pointer and element strides
/// of the batch, head and row dimensions; the innermost dimension is contiguous.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strided3 {
    pub ptr: u64,
    pub sb: i64,
    pub sh: i64,
    pub sr: i64,
}

impl Strided3 {
    /// A dense `[b, h, s, d]` tensor (use `d = 1` for lse `[b, h, s]`).
    pub fn dense(ptr: u64, h: usize, s: usize, d: usize) -> Self {
        Strided3 {
            ptr,
            sb: (h * s * d) as i64,
            sh: (s * d) as i64,
            sr: d as i64,
        }
    }
}

/// One attention forward over strided tensors: what the NVRTC kernel ([`AttentionPatch`]) and
/// the cuDNN patch (through the runtime's split) launch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnLaunch {
    /// Sizes; `dims.d` is the query/key head dim.
    pub dims: AttnDims,
    /// Value/output head dim (multi-head latent attention: `dv != dims.d`).
    pub dv: usize,
    pub params: AttnParams,
    /// bf16 `[b, hq, sq, d]`.
    pub q: Strided3,
    /// bf16 `[b, hk, sk, d]`.
    pub k: Strided3,
    /// bf16 `[b, hk, sk, dv]`.
    pub v: Strided3,
    /// f32 `[b, hq, sq, dv]`.
    pub o: Strided3,
    /// f32 `[b, hq, sq]` (`sr` must be 1).
    pub lse: Strided3,
    /// Element type of q, k and v: bf16 for this kernel and the cuDNN patch, f32 for
    /// [`super::AttentionF32Patch`].
    pub elem: ElemType,
    /// Merge into `(o, lse)` (an accumulator) instead of overwriting them.
    pub accumulate: bool,
    /// Per-row key bounds `(lo, hi)` (the NVRTC kernel only): device addresses of `sq` INT32
    /// each, query row `r` seeing only keys at global positions `lo[r] <= k_offset + c <
    /// hi[r]` (sliding windows, packed documents: `mercury_plan::mask`), on top of `causal`.
    pub bounds: Option<(u64, u64)>,
}

/// Kernel parameter block; must match `struct AttnArgs` in `attn_args.cuh` (put before `attention.cu` and `attention_f32.cu`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttnArgsDev {
    q: u64,
    k: u64,
    v: u64,
    o: u64,
    lse: u64,
    lo: u64,
    hi: u64,
    q_sb: i64,
    q_sh: i64,
    q_sr: i64,
    k_sb: i64,
    k_sh: i64,
    k_sr: i64,
    v_sb: i64,
    v_sh: i64,
    v_sr: i64,
    o_sb: i64,
    o_sh: i64,
    o_sr: i64,
    lse_sb: i64,
    lse_sh: i64,
    q_offset: i64,
    k_offset: i64,
    b: i32,
    hq: i32,
    hk: i32,
    sq: i32,
    sk: i32,
    causal: i32,
    bounded: i32,
    pad: i32,
    scale_log2: f32,
    scale: f32,
}

// SAFETY: `AttnArgsDev` is `#[repr(C)]`, made only of 8- and 4-byte scalars laid out exactly as
// the C struct `AttnArgs` of the kernels (checked by `args_layout_matches_cuda`).
unsafe impl DeviceRepr for AttnArgsDev {}

impl AttnLaunch {
    /// FLOPs of the two matrix products over the *visible* (query, key) pairs: `2 (d + dv)`
    /// per pair.
    pub fn flops_visible(&self) -> f64 {
        let d = &self.dims;
        let heads = (d.b * d.hq) as f64;
        let pairs: f64 = if self.params.causal {
            // Row r sees keys c with k_offset + c <= q_offset + r, clamped to [0, sk].
            (0..d.sq)
                .map(|r| {
                    let lim = (self.params.q_offset + r + 1) as i64 - self.params.k_offset as i64;
                    lim.clamp(0, d.sk as i64) as f64
                })
                .sum()
        } else {
            d.sq as f64 * d.sk as f64
        };
        2.0 * heads * pairs * (d.d + self.dv) as f64
    }

    /// Checks element type, sizes, strides and alignment against what the NVRTC kernel needs
    /// (bf16, head dim 128 for q, k, v and o); the error says which does not hold.
    pub fn validate(&self) -> Result<()> {
        let d = &self.dims;
        ensure(self.elem == ElemType::BF16, || {
            format!("the NVRTC kernel takes bf16 q/k/v, got {:?}", self.elem)
        })?;
        ensure(d.d == HEAD_DIM && self.dv == HEAD_DIM, || {
            if self.dv == d.d {
                format!(
                    "the NVRTC kernel computes head dim {HEAD_DIM} only, got {}",
                    d.d
                )
            } else {
                format!(
                    "the NVRTC kernel computes head dim {HEAD_DIM} only, got d_qk {} / d_v {}",
                    d.d, self.dv
                )
            }
        })?;
        ensure(d.hk > 0 && d.hq.is_multiple_of(d.hk), || {
            format!("query heads {} not a multiple of key heads {}", d.hq, d.hk)
        })?;
        ensure(d.b <= 65535 && d.hq <= 65535, || {
            format!("batch {} and heads {} must be <= 65535", d.b, d.hq)
        })?;
        let lim = (i32::MAX as usize) - 2 * BLOCK_M;
        ensure(d.sq <= lim && d.sk <= lim, || {
            format!("sequence lengths {} / {} too large", d.sq, d.sk)
        })?;
        ensure(
            self.params.scale.is_finite() && (self.params.scale as f32).is_finite(),
            || format!("scale {} not finite in f32", self.params.scale),
        )?;
        ensure(
            self.params.q_offset <= i64::MAX as usize / 4
                && self.params.k_offset <= i64::MAX as usize / 4,
            || "offsets too large".to_string(),
        )?;
        for (name, t) in [("q", &self.q), ("k", &self.k), ("v", &self.v)] {
            ensure(t.ptr != 0 && t.ptr.is_multiple_of(16), || {
                format!("{name} pointer {:#x} not 16-byte aligned", t.ptr)
            })?;
            ensure(
                [t.sb, t.sh, t.sr].iter().all(|s| *s >= 0 && s % 8 == 0),
                || format!("{name} strides {t:?} must be non-negative multiples of 8 elements"),
            )?;
            ensure(t.sr >= HEAD_DIM as i64, || {
                format!("{name} row stride {} below head dim", t.sr)
            })?;
        }
        ensure(self.o.ptr != 0 && self.o.ptr.is_multiple_of(8), || {
            format!("o pointer {:#x} not 8-byte aligned", self.o.ptr)
        })?;
        ensure(
            [self.o.sb, self.o.sh, self.o.sr]
                .iter()
                .all(|s| *s >= 0 && s % 2 == 0)
                && self.o.sr >= HEAD_DIM as i64,
            || format!("o strides {:?} must be even and rows >= 128", self.o),
        )?;
        ensure(
            self.lse.ptr != 0 && self.lse.ptr.is_multiple_of(4) && self.lse.sr == 1,
            || {
                format!(
                    "lse {:?} must be 4-byte aligned with unit row stride",
                    self.lse
                )
            },
        )?;
        ensure(self.lse.sb >= 0 && self.lse.sh >= 0, || {
            "negative lse stride".to_string()
        })?;
        if let Some((lo, hi)) = self.bounds {
            ensure(
                [lo, hi].iter().all(|p| *p != 0 && p.is_multiple_of(4)),
                || format!("row bounds {lo:#x} / {hi:#x} not 4-byte aligned"),
            )?;
        }
        Ok(())
    }

    pub(crate) fn to_dev(self) -> AttnArgsDev {
        let d = self.dims;
        let p = self.params;
        AttnArgsDev {
            q: self.q.ptr,
            k: self.k.ptr,
            v: self.v.ptr,
            o: self.o.ptr,
            lse: self.lse.ptr,
            lo: self.bounds.map_or(0, |b| b.0),
            hi: self.bounds.map_or(0, |b| b.1),
            q_sb: self.q.sb,
            q_sh: self.q.sh,
            q_sr: self.q.sr,
            k_sb: self.k.sb,
            k_sh: self.k.sh,
            k_sr: self.k.sr,
            v_sb: self.v.sb,
            v_sh: self.v.sh,
            v_sr: self.v.sr,
            o_sb: self.o.sb,
            o_sh: self.o.sh,
            o_sr: self.o.sr,
            lse_sb: self.lse.sb,
            lse_sh: self.lse.sh,
            q_offset: p.q_offset as i64,
            k_offset: p.k_offset as i64,
            b: d.b as i32,
            hq: d.hq as i32,
            hk: d.hk as i32,
            sq: d.sq as i32,
            sk: d.sk as i32,
            causal: p.causal as i32,
            bounded: i32::from(self.bounds.is_some()),
            pad: 0,
            scale_log2: (p.scale * std::f64::consts::LOG2_E) as f32,
            scale: p.scale as f32,
        }
    }
}

/// The compiled attention kernels of one context; launches use the selected variant.
pub struct AttentionPatch {
    _module: Arc<CudaModule>,
    /// Indexed by [`AttnVariant::index`]: W8, W4, W8 accumulating, W4 accumulating.
    funcs: [CudaFunction; 4],
    variant: AttnVariant,
}

impl AttentionPatch {
    /// Compiles [`ATTENTION_SOURCE`] with NVRTC for the device of `ctx` and loads it.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let module = compile_and_load(ctx, ATTENTION_SOURCE, "attention patch")?;
        let load = |v: AttnVariant, acc: bool| -> Result<CudaFunction> {
            let f = module
                .load_function(v.entry(acc))
                .map_err(KernelError::driver("load attention function"))?;
            f.set_attribute(
                CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                SMEM_BYTES as i32,
            )
            .map_err(KernelError::driver("raise attention shared-memory limit"))?;
            Ok(f)
        };
        let funcs = [
            load(AttnVariant::W8, false)?,
            load(AttnVariant::W4, false)?,
            load(AttnVariant::W8, true)?,
            load(AttnVariant::W4, true)?,
        ];
        Ok(AttentionPatch {
            _module: module,
            funcs,
            // Measured faster on an H200 at every benchmark shape (317 vs 305 TFLOP/s at
            // B1 H32 S32K; docs/perf.md); both pass the same checks.
            variant: AttnVariant::W4,
        })
    }

    fn func(&self, v: AttnVariant, accumulate: bool) -> &CudaFunction {
        &self.funcs[v.index(accumulate)]
    }

    /// The variant [`AttentionPatch::launch`] uses.
    pub fn variant(&self) -> AttnVariant {
        self.variant
    }

    /// Selects the variant [`AttentionPatch::launch`] uses.
    pub fn set_variant(&mut self, v: AttnVariant) {
        self.variant = v;
    }

    /// Registers per thread and local (spill) bytes per thread of a variant (its
    /// accumulating entry with `accumulate`).
    pub fn resources(&self, v: AttnVariant, accumulate: bool) -> Result<(i32, i32)> {
        let f = self.func(v, accumulate);
        Ok((
            f.num_regs()
                .map_err(KernelError::driver("attention num_regs"))?,
            f.local_size_bytes()
                .map_err(KernelError::driver("attention local bytes"))?,
        ))
    }

    /// Enqueues one attention forward on `stream`.
    ///
    /// # Safety
    /// The pointers of `args` must be device memory of this context covering every element
    /// the strides address for the given dims, live until the kernel completes; o and lse must
    /// not overlap q, k or v (nor each other). With `accumulate`, o and lse must hold the
    /// accumulator (lse rows of -inf may have any o).
    pub unsafe fn launch(&self, stream: &CudaStream, args: &AttnLaunch) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.launch_variant(stream, args, self.variant) }
    }

    /// As [`AttentionPatch::launch`] with an explicit variant.
    ///
    /// # Safety
    /// As [`AttentionPatch::launch`].
    pub unsafe fn launch_variant(
        &self,
        stream: &CudaStream,
        args: &AttnLaunch,
        variant: AttnVariant,
    ) -> Result<()> {
        args.validate()?;
        let d = args.dims;
        if d.b == 0 || d.hq == 0 || d.sq == 0 {
            return Ok(());
        }
        let dev = args.to_dev();
        let cfg = LaunchConfig {
            grid_dim: (d.sq.div_ceil(BLOCK_M) as u32, d.hq as u32, d.b as u32),
            block_dim: (variant.threads(), 1, 1),
            shared_mem_bytes: SMEM_BYTES,
        };
        let mut b = stream.launch_builder(self.func(variant, args.accumulate));
        b.arg(&dev);
        // SAFETY: the parameter block matches the kernel signature (one `AttnArgs` by value,
        // the same for the accumulating entries); the caller guarantees the memory; the grid
        // covers every query row exactly once, so each accumulator row is read and written by
        // one block only.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(KernelError::driver("launch attention"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(causal: bool) -> AttnLaunch {
        let dims = AttnDims {
            b: 2,
            hq: 8,
            hk: 2,
            sq: 300,
            sk: 333,
            d: 128,
        };
        AttnLaunch {
            dims,
            dv: 128,
            params: AttnParams {
                causal,
                scale: 0.125,
                q_offset: 40,
                k_offset: 7,
            },
            q: Strided3::dense(0x1000, 8, 300, 128),
            k: Strided3::dense(0x2000, 2, 333, 128),
            v: Strided3::dense(0x3000, 2, 333, 128),
            o: Strided3::dense(0x4000, 8, 300, 128),
            lse: Strided3::dense(0x5000, 8, 300, 1),
            elem: ElemType::BF16,
            accumulate: false,
            bounds: None,
        }
    }

    #[test]
    fn args_layout_matches_cuda() {
        // 7 pointers + 16 i64 + 8 i32 + 2 f32 (the C struct has no padding either).
        assert_eq!(
            std::mem::size_of::<AttnArgsDev>(),
            7 * 8 + 16 * 8 + 8 * 4 + 2 * 4
        );
        assert!(ATTENTION_SOURCE.contains("u64 lo, hi;"));
        assert!(ATTENTION_SOURCE.contains("int bounded, pad;"));
        assert_eq!(std::mem::align_of::<AttnArgsDev>(), 8);
        assert!(ATTENTION_SOURCE.contains("struct AttnArgs {"));
        assert!(ATTENTION_SOURCE.contains("i64 q_offset, k_offset;"));
        assert!(ATTENTION_SOURCE.contains("int b, hq, hk, sq, sk;"));
    }

    #[test]
    fn validation() {
        assert!(launch(true).validate().is_ok());
        let mut bad = launch(false);
        bad.dims.d = 64;
        bad.dv = 64;
        assert!(bad.validate().unwrap_err().to_string().contains("got 64"));
        let mut bad = launch(false);
        bad.dv = 64;
        assert!(bad
            .validate()
            .unwrap_err()
            .to_string()
            .contains("d_qk 128 / d_v 64"));
        let mut bad = launch(false);
        bad.dims.hk = 3;
        assert!(bad.validate().is_err());
        let mut bad = launch(false);
        bad.q.ptr += 2;
        assert!(bad.validate().is_err());
        let mut bad = launch(false);
        bad.k.sr = 130;
        assert!(bad.validate().is_err());
        let mut bad = launch(false);
        bad.lse.sr = 2;
        assert!(bad.validate().is_err());
        let mut bad = launch(false);
        bad.params.scale = f64::NAN;
        assert!(bad.validate().is_err());
    }

    #[test]
    fn visible_flops() {
        let mut l = launch(false);
        assert_eq!(l.flops_visible(), 4.0 * 16.0 * 300.0 * 333.0 * 128.0);
        // Square causal without offsets: S (S + 1) / 2 pairs.
        l.params = AttnParams {
            causal: true,
            scale: 1.0,
            q_offset: 0,
            k_offset: 0,
        };
        l.dims.sq = 64;
        l.dims.sk = 64;
        assert_eq!(l.flops_visible(), 4.0 * 16.0 * (64.0 * 65.0 / 2.0) * 128.0);
        // MLA: the value product is dv wide.
        l.dv = 64;
        assert_eq!(
            l.flops_visible(),
            2.0 * 16.0 * (64.0 * 65.0 / 2.0) * (128.0 + 64.0)
        );
        // Keys entirely in the future: nothing visible.
        l.params.k_offset = 1000;
        assert_eq!(l.flops_visible(), 0.0);
    }

    #[test]
    fn entries_exist_in_source() {
        for v in AttnVariant::ALL {
            for acc in [false, true] {
                let e = v.entry(acc);
                assert!(
                    ATTENTION_SOURCE.contains(&format!("{e}(const AttnArgs p)")),
                    "{e} missing"
                );
            }
        }
        let idx: Vec<usize> = AttnVariant::ALL
            .iter()
            .flat_map(|v| [v.index(false), v.index(true)])
            .collect();
        let mut sorted = idx.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
    }

    #[test]
    fn dev_args_scale() {
        let a = launch(true).to_dev();
        assert!((a.scale_log2 - (0.125 * std::f64::consts::LOG2_E) as f32).abs() < 1e-7);
        assert_eq!(a.causal, 1);
        assert_eq!(a.q_sr, 128);
        assert_eq!(a.k_sh, 333 * 128);
    }
}
