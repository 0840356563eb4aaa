//! The compiler-generated device kernels (lse merge, add, casts, 2-D copies, fill). Their PTX
//! comes from `mercury_lowering::device_kernels_ptx` and is handed in as a string, so the
//! runtime does not link MLIR. Entry points and parameters (pointers are device pointers,
//! counts `i64`, any 1-D launch, grid-stride and bounds-checked):
//!
//! | entry | parameters |
//! | --- | --- |
//! | `mercury_lse_merge_o_f32` | o_acc, lse_acc, o_part, lse_part, rows, d (does not write lse_acc) |
//! | `mercury_lse_merge_lse_f32` | lse_acc, lse_part, rows (launched after the `_o` kernel) |
//! | `mercury_add_f32` | acc, part, n |
//! | `mercury_cast_f32_to_bf16` / `mercury_cast_bf16_to_f32` | dst, src, n |
//! | `mercury_copy_2d_b16` / `mercury_copy_2d_b32` | dst, src, rows, cols, dst_stride, src_stride |
//! | `mercury_fill_f32` | dst, value (f32), n |

use super::error::{Result, RuntimeError};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// Entry points the runtime needs, in a fixed order.
pub const ENTRY_POINTS: [&str; 8] = [
    "mercury_lse_merge_o_f32",
    "mercury_lse_merge_lse_f32",
    "mercury_add_f32",
    "mercury_cast_f32_to_bf16",
    "mercury_cast_bf16_to_f32",
    "mercury_copy_2d_b16",
    "mercury_copy_2d_b32",
    "mercury_fill_f32",
];

/// Entry points of [`ENTRY_POINTS`] that `ptx` does not define (`.entry NAME(` or
/// `.entry NAME (`); pure text inspection, usable without a GPU.
pub fn missing_entries(ptx: &str) -> Vec<&'static str> {
    ENTRY_POINTS
        .iter()
        .copied()
        .filter(|name| {
            !ptx.lines().any(|l| {
                let l = l.trim_start();
                let rest = l
                    .strip_prefix(".visible .entry ")
                    .or_else(|| l.strip_prefix(".entry "))
                    .or_else(|| l.strip_prefix(".weak .entry "));
                rest.is_some_and(|r| {
                    r.strip_prefix(name)
                        .is_some_and(|t| t.trim_start().starts_with('(') || t.is_empty())
                })
            })
        })
        .collect()
}

/// 1-D launch over `items` work items: 256 threads a block, at most 32 blocks per SM (the
/// kernels are grid-stride loops, so any grid is correct).
pub fn launch_dims(items: usize, sm_count: u32) -> (u32, u32) {
    let cap = 32 * sm_count.max(1) as usize;
    (items.div_ceil(256).clamp(1, cap) as u32, 256)
}

/// The loaded device kernels of one context.
pub struct DeviceKernels {
    _module: Arc<CudaModule>,
    f: Vec<CudaFunction>,
    sm_count: u32,
}

impl DeviceKernels {
    /// Loads the PTX (as produced by `mercury_lowering::device_kernels_ptx`) into `ctx`.
    pub fn load(ctx: &Arc<CudaContext>, ptx: &str) -> Result<Self> {
        let missing = missing_entries(ptx);
        if !missing.is_empty() {
            return Err(RuntimeError::DeviceKernels(format!(
                "PTX lacks entry points {missing:?}"
            )));
        }
        if ptx.contains('\0') {
            return Err(RuntimeError::DeviceKernels("PTX contains NUL".into()));
        }
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| RuntimeError::DeviceKernels(format!("cuModuleLoadData: {e}")))?;
        let mut f = Vec::with_capacity(ENTRY_POINTS.len());
        for name in ENTRY_POINTS {
            f.push(
                module
                    .load_function(name)
                    .map_err(|e| RuntimeError::DeviceKernels(format!("{name}: {e}")))?,
            );
        }
        let sm_count = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(RuntimeError::driver("SM count"))? as u32;
        Ok(DeviceKernels {
            _module: module,
            f,
            sm_count,
        })
    }

    fn cfg(&self, items: usize) -> LaunchConfig {
        let (g, b) = launch_dims(items, self.sm_count);
        LaunchConfig {
            grid_dim: (g, 1, 1),
            block_dim: (b, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Softmax merge of `rows` rows of width `d`: `(o_acc, lse_acc) = merge(acc, part)`.
    ///
    /// # Safety
    /// All four pointers must be device f32 arrays of this context (`rows * d` for o,
    /// `rows` for lse), live until the kernels complete.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn lse_merge(
        &self,
        stream: &CudaStream,
        o_acc: u64,
        lse_acc: u64,
        o_part: u64,
        lse_part: u64,
        rows: usize,
        d: usize,
    ) -> Result<()> {
        if rows == 0 || d == 0 {
            return Ok(());
        }
        let (r, dd) = (rows as i64, d as i64);
        let mut b = stream.launch_builder(&self.f[0]);
        b.arg(&o_acc)
            .arg(&lse_acc)
            .arg(&o_part)
            .arg(&lse_part)
            .arg(&r)
            .arg(&dd);
        // SAFETY: arguments match `mercury_lse_merge_o_f32`; memory per the caller.
        unsafe { b.launch(self.cfg(rows * d)) }.map_err(RuntimeError::driver("lse_merge_o"))?;
        let mut b = stream.launch_builder(&self.f[1]);
        b.arg(&lse_acc).arg(&lse_part).arg(&r);
        // SAFETY: arguments match `mercury_lse_merge_lse_f32`; same stream, so it runs after
        // the `_o` kernel read the old lse_acc.
        unsafe { b.launch(self.cfg(rows)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("lse_merge_lse"))
    }

    /// `acc += part` over `n` f32.
    ///
    /// # Safety
    /// Both pointers must be device f32 arrays of `n` elements of this context.
    pub unsafe fn add_f32(&self, stream: &CudaStream, acc: u64, part: u64, n: usize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let nn = n as i64;
        let mut b = stream.launch_builder(&self.f[2]);
        b.arg(&acc).arg(&part).arg(&nn);
        // SAFETY: arguments match `mercury_add_f32`; memory per the caller.
        unsafe { b.launch(self.cfg(n)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("add_f32"))
    }

    /// `dst[i] = bf16(src[i])` (to_bf16) or `dst[i] = f32(src[i])` over `n` elements.
    ///
    /// # Safety
    /// `dst` and `src` must be device arrays of `n` elements of the respective types.
    pub unsafe fn cast(
        &self,
        stream: &CudaStream,
        to_bf16: bool,
        dst: u64,
        src: u64,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let nn = n as i64;
        let mut b = stream.launch_builder(&self.f[if to_bf16 { 3 } else { 4 }]);
        b.arg(&dst).arg(&src).arg(&nn);
        // SAFETY: arguments match the cast kernels; memory per the caller.
        unsafe { b.launch(self.cfg(n)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("cast"))
    }

    /// Strided 2-D copy of 2- or 4-byte elements (strides in elements).
    ///
    /// # Safety
    /// `src`/`dst` must cover `(rows - 1) * stride + cols` elements each.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn copy_2d(
        &self,
        stream: &CudaStream,
        elem_bytes: usize,
        dst: u64,
        src: u64,
        rows: usize,
        cols: usize,
        dst_stride: usize,
        src_stride: usize,
    ) -> Result<()> {
        let f = match elem_bytes {
            2 => &self.f[5],
            4 => &self.f[6],
            _ => {
                return Err(RuntimeError::Unsupported(format!(
                    "2-D copy kernel of {elem_bytes}-byte elements"
                )))
            }
        };
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let a = [
            rows as i64,
            cols as i64,
            dst_stride as i64,
            src_stride as i64,
        ];
        let mut b = stream.launch_builder(f);
        b.arg(&dst)
            .arg(&src)
            .arg(&a[0])
            .arg(&a[1])
            .arg(&a[2])
            .arg(&a[3]);
        // SAFETY: arguments match the copy kernels; memory per the caller.
        unsafe { b.launch(self.cfg(rows * cols)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("copy_2d"))
    }

    /// `dst[i] = value` over `n` f32.
    ///
    /// # Safety
    /// `dst` must be a device f32 array of `n` elements of this context.
    pub unsafe fn fill_f32(
        &self,
        stream: &CudaStream,
        dst: u64,
        value: f32,
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let nn = n as i64;
        let mut b = stream.launch_builder(&self.f[7]);
        b.arg(&dst).arg(&value).arg(&nn);
        // SAFETY: arguments match `mercury_fill_f32`; memory per the caller.
        unsafe { b.launch(self.cfg(n)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("fill_f32"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_detection() {
        let mut ptx = String::from("//\n.version 8.0\n.target sm_90\n");
        for e in ENTRY_POINTS.iter().skip(1) {
            ptx.push_str(&format!(
                ".visible .entry {e}(\n  .param .u64 a\n)\n{{\n}}\n"
            ));
        }
        assert_eq!(missing_entries(&ptx), vec!["mercury_lse_merge_o_f32"]);
        ptx.push_str(".visible .entry mercury_lse_merge_o_f32 (\n)\n");
        assert!(missing_entries(&ptx).is_empty());
        // A longer name with the same prefix does not count.
        let p2 = ".visible .entry mercury_add_f32x(\n";
        assert!(missing_entries(p2).contains(&"mercury_add_f32"));
    }

    #[test]
    fn launch_geometry() {
        assert_eq!(launch_dims(0, 132), (1, 256));
        assert_eq!(launch_dims(1000, 132), (4, 256));
        assert_eq!(launch_dims(1 << 30, 132), (32 * 132, 256));
    }
}
