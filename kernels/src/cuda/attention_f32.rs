//! The f32 attention forward patch (`attention_f32.cu`, compiled at run time by NVRTC): the
//! patch for attention whose q, k and v are f32, which neither cuDNN's SDPA nor the bf16 NVRTC
//! kernel ([`super::AttentionPatch`]) computes. Semantics are those of
//! [`crate::cpu::attention_dv`] in f32: head dims `d_qk` and `d_v` each 1 to 256 (multi-head
//! latent attention: `d_v != d_qk`), GQA, causal masking with global offsets, normalised output
//! and natural-log lse; fully masked rows give o = 0 and lse = -inf. With
//! [`AttnLaunch::accumulate`], the row's result is merged into (o, lse) as the bf16 kernel
//! does.
//!
//! One warp per query row, keys 32 at a time, plain FMA (no tensor cores): exact, not fast.
//! A launch takes an [`AttnLaunch`] whose [`AttnLaunch::elem`] is [`ElemType::F32`].

use super::attention::{AttnArgsDev, AttnLaunch};
use super::error::{ensure, KernelError, Result};
use super::gemm::ElemType;
use super::nvrtc::compile_and_load;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// CUDA C++ source of the f32 attention kernel.
pub const ATTENTION_F32_SOURCE: &str = concat!(
    include_str!("attn_args.cuh"),
    include_str!("attention_f32.cu")
);
/// Largest head dim (q/k and v/o alike) the kernel computes.
pub const F32_MAX_HEAD_DIM: usize = 256;
/// Query rows per block (one warp each).
const ROWS_PER_BLOCK: usize = 4;

/// Kernel parameter block; must match `struct AttnF32Args` in `attention_f32.cu`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct AttnF32ArgsDev {
    a: AttnArgsDev,
    dqk: i32,
    dv: i32,
}

// SAFETY: `AttnF32ArgsDev` is `#[repr(C)]`: the 8-byte-aligned `AttnArgsDev` (laid out as the
// C `AttnArgs`, see attention.rs) followed by two i32, as the C struct `AttnF32Args`.
unsafe impl DeviceRepr for AttnF32ArgsDev {}

/// Checks that the f32 kernel computes `l`; the error says what does not hold.
pub fn validate_f32(l: &AttnLaunch) -> Result<()> {
    let d = &l.dims;
    ensure(l.elem == ElemType::F32, || {
        format!("the f32 attention kernel takes f32 q/k/v, got {:?}", l.elem)
    })?;
    ensure(
        (1..=F32_MAX_HEAD_DIM).contains(&d.d) && (1..=F32_MAX_HEAD_DIM).contains(&l.dv),
        || {
            format!(
                "the f32 attention kernel takes head dims 1 to {F32_MAX_HEAD_DIM}, got d_qk {} / d_v {}",
                d.d, l.dv
            )
        },
    )?;
    ensure(d.hk > 0 && d.hq.is_multiple_of(d.hk), || {
        format!("query heads {} not a multiple of key heads {}", d.hq, d.hk)
    })?;
    ensure(d.b <= 65535 && d.hq <= 65535, || {
        format!("batch {} and heads {} must be <= 65535", d.b, d.hq)
    })?;
    ensure(
        d.sq <= i32::MAX as usize && d.sk <= i32::MAX as usize,
        || format!("sequence lengths {} / {} too large", d.sq, d.sk),
    )?;
    ensure((l.params.scale as f32).is_finite(), || {
        format!("scale {} not finite in f32", l.params.scale)
    })?;
    ensure(
        l.params.q_offset <= i64::MAX as usize / 4 && l.params.k_offset <= i64::MAX as usize / 4,
        || "offsets too large".to_string(),
    )?;
    for (name, t) in [
        ("q", &l.q),
        ("k", &l.k),
        ("v", &l.v),
        ("o", &l.o),
        ("lse", &l.lse),
    ] {
        ensure(t.ptr != 0 && t.ptr.is_multiple_of(4), || {
            format!("{name} pointer {:#x} not 4-byte aligned", t.ptr)
        })?;
        ensure([t.sb, t.sh, t.sr].iter().all(|s| *s >= 0), || {
            format!("{name} strides {t:?} must be non-negative")
        })?;
    }
    for (name, t, w) in [
        ("q", &l.q, d.d),
        ("k", &l.k, d.d),
        ("v", &l.v, l.dv),
        ("o", &l.o, l.dv),
    ] {
        ensure(t.sr >= w as i64, || {
            format!("{name} row stride {} below its head dim {w}", t.sr)
        })?;
    }
    ensure(l.lse.sr == 1, || {
        format!("lse {:?} must have unit row stride", l.lse)
    })?;
    Ok(())
}

/// The compiled f32 attention kernels of one context.
pub struct AttentionF32Patch {
    _module: Arc<CudaModule>,
    /// Overwriting and accumulating entries.
    funcs: [CudaFunction; 2],
}

impl AttentionF32Patch {
    /// Compiles [`ATTENTION_F32_SOURCE`] with NVRTC for the device of `ctx` and loads it.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let module = compile_and_load(ctx, ATTENTION_F32_SOURCE, "f32 attention patch")?;
        let load = |name: &str| {
            module
                .load_function(name)
                .map_err(KernelError::driver("load f32 attention function"))
        };
        let funcs = [
            load("mercury_attn_fwd_f32")?,
            load("mercury_attn_fwd_f32_acc")?,
        ];
        Ok(AttentionF32Patch {
            _module: module,
            funcs,
        })
    }

    /// Enqueues one f32 attention forward on `stream` (after [`validate_f32`]).
    ///
    /// # Safety
    /// The pointers of `args` must be device memory of this context covering every element
    /// the strides address for the given dims, live until the kernel completes; o and lse must
    /// not overlap q, k or v (nor each other). With `accumulate`, o and lse must hold the
    /// accumulator (lse rows of -inf may have any o).
    pub unsafe fn launch(&self, stream: &CudaStream, args: &AttnLaunch) -> Result<()> {
        validate_f32(args)?;
        let d = args.dims;
        if d.b == 0 || d.hq == 0 || d.sq == 0 {
            return Ok(());
        }
        let dev = AttnF32ArgsDev {
            a: args.to_dev(),
            dqk: d.d as i32,
            dv: args.dv as i32,
        };
        let cfg = LaunchConfig {
            grid_dim: (
                d.sq.div_ceil(ROWS_PER_BLOCK) as u32,
                d.hq as u32,
                d.b as u32,
            ),
            block_dim: (32 * ROWS_PER_BLOCK as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(&self.funcs[args.accumulate as usize]);
        b.arg(&dev);
        // SAFETY: the parameter block matches the kernel signature (one `AttnF32Args` by
        // value); the caller guarantees the memory; the grid covers every query row exactly
        // once (one warp each), so each accumulator row is read and written by one warp only.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(KernelError::driver("launch f32 attention"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::{AttnDims, AttnParams};
    use crate::cuda::Strided3;

    fn launch() -> AttnLaunch {
        AttnLaunch {
            dims: AttnDims {
                b: 1,
                hq: 8,
                hk: 2,
                sq: 64,
                sk: 64,
                d: 24,
            },
            dv: 16,
            params: AttnParams {
                causal: true,
                scale: 0.2,
                q_offset: 0,
                k_offset: 0,
            },
            q: Strided3::dense(0x1000, 8, 64, 24),
            k: Strided3::dense(0x2000, 2, 64, 24),
            v: Strided3::dense(0x3000, 2, 64, 16),
            o: Strided3::dense(0x4000, 8, 64, 16),
            lse: Strided3::dense(0x5000, 8, 64, 1),
            elem: ElemType::F32,
            accumulate: false,
            bounds: None,
        }
    }

    #[test]
    fn args_layout_matches_cuda() {
        assert_eq!(
            std::mem::size_of::<AttnF32ArgsDev>(),
            std::mem::size_of::<AttnArgsDev>() + 8
        );
        assert!(ATTENTION_F32_SOURCE.contains("struct AttnF32Args {"));
        assert!(ATTENTION_F32_SOURCE.contains("int dqk, dv;"));
        for e in ["mercury_attn_fwd_f32(", "mercury_attn_fwd_f32_acc("] {
            assert!(ATTENTION_F32_SOURCE.contains(e), "{e} missing");
        }
    }

    #[test]
    fn validation_names_what_does_not_hold() {
        assert!(validate_f32(&launch()).is_ok());
        let mut bad = launch();
        bad.elem = ElemType::BF16;
        assert!(validate_f32(&bad)
            .unwrap_err()
            .to_string()
            .contains("takes f32 q/k/v"));
        let mut bad = launch();
        bad.dv = 257;
        assert!(validate_f32(&bad)
            .unwrap_err()
            .to_string()
            .contains("d_qk 24 / d_v 257"));
        let mut bad = launch();
        bad.dims.hk = 3;
        assert!(validate_f32(&bad).is_err());
        let mut bad = launch();
        bad.k.ptr += 2;
        assert!(validate_f32(&bad).is_err());
        let mut bad = launch();
        bad.lse.sr = 2;
        assert!(validate_f32(&bad).is_err());
        // Odd strides and head dims are fine (no vector loads).
        let mut ok = launch();
        ok.dims.d = 5;
        ok.q.sr = 7;
        ok.k.sr = 7;
        assert!(validate_f32(&ok).is_ok());
    }
}
