//! The mask helper kernel (`mask.cu`, NVRTC) of attention under per-row key bounds: rows of a
//! cuDNN call that see no key get lse = -inf (cuDNN leaves NaN there), so that the merge
//! kernels, which skip parts whose lse is -inf without reading their O, treat them as empty.

use super::error::{KernelError, Result};
use super::nvrtc::compile_and_load;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// CUDA C++ source of the mask helper kernel.
pub const MASK_SOURCE: &str = include_str!("mask.cu");

/// The compiled mask helper of one context.
pub struct MaskKernels {
    _module: Arc<CudaModule>,
    empty_rows: CudaFunction,
}

impl MaskKernels {
    /// Compiles [`MASK_SOURCE`] for the device of `ctx` and loads it.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let module = compile_and_load(ctx, MASK_SOURCE, "mask kernels")?;
        let empty_rows = module
            .load_function("mercury_mask_empty_rows")
            .map_err(KernelError::driver("load mask function"))?;
        Ok(MaskKernels {
            _module: module,
            empty_rows,
        })
    }

    /// Sets `lse[i, r] = -inf` (dense f32 `[bh, rows]`) for every row `r` whose key bounds
    /// `[lo[r], hi[r])` (INT32, global key positions) miss the keys `[kbase, kend)`.
    ///
    /// # Safety
    /// `lse` must hold `bh * rows` f32 and `lo`, `hi` `rows` INT32 each, device memory of this
    /// context live until the kernel completes on `stream`.
    pub unsafe fn empty_rows(
        &self,
        stream: &CudaStream,
        lse: u64,
        (bh, rows): (usize, usize),
        (lo, hi): (u64, u64),
        (kbase, kend): (i64, i64),
    ) -> Result<()> {
        let n = bh * rows;
        if n == 0 {
            return Ok(());
        }
        let (bh, rows) = (bh as i64, rows as i64);
        let mut b = stream.launch_builder(&self.empty_rows);
        b.arg(&lse)
            .arg(&bh)
            .arg(&rows)
            .arg(&lo)
            .arg(&hi)
            .arg(&kbase)
            .arg(&kend);
        let cfg = LaunchConfig {
            grid_dim: (n.div_ceil(256).clamp(1, 4096) as u32, 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the arguments match the kernel's signature; memory per the caller.
        unsafe { b.launch(cfg) }
            .map(|_| ())
            .map_err(KernelError::driver("launch mask_empty_rows"))
    }
}
