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
//! | `mercury_add_bf16_f32` | acc (f32), part (bf16), n |
//! | `mercury_sum_bf16` | dst (bf16), p0..p7 (bf16, those past nparts unread), n, nparts |
//! | `mercury_cast_f32_to_bf16` / `mercury_cast_bf16_to_f32` | dst, src, n |
//! | `mercury_copy_2d_b16` / `mercury_copy_2d_b32` | dst, src, rows, cols, dst_stride, src_stride |
//! | `mercury_fill_f32` | dst, value (f32), n |
//! | `mercury_attn_merge_o_bf16` | o_acc, lse_acc, o_part (bf16), lse_part, rows, d, sq, hq, o_sb, o_sh, o_sr, l_sb, l_sh, overwrite, nparts, part_o_stride, part_l_stride |
//! | `mercury_attn_merge_lse` | lse_acc, lse_part, rows, sq, hq, l_sb, l_sh, overwrite, nparts, part_l_stride (after the `_o` kernel) |
//!
//! The same PTX may hold generated tile kernels (`mercury_ew_<hash>`, `mercury_row_*`: the
//! contract of `mercury_plan::tile_kernel`), which [`DeviceKernels::tile`] launches by name;
//! a plan whose kernels the PTX lacks is refused when the executor is built.

use super::error::{Result, RuntimeError};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Entry points the runtime needs, in a fixed order.
pub const ENTRY_POINTS: [&str; 12] = [
    "mercury_lse_merge_o_f32",
    "mercury_lse_merge_lse_f32",
    "mercury_add_f32",
    "mercury_cast_f32_to_bf16",
    "mercury_cast_bf16_to_f32",
    "mercury_copy_2d_b16",
    "mercury_copy_2d_b32",
    "mercury_fill_f32",
    "mercury_attn_merge_o_bf16",
    "mercury_attn_merge_lse",
    "mercury_add_bf16_f32",
    "mercury_sum_bf16",
];

/// Most parts [`DeviceKernels::sum_bf16`] adds in one launch (`mercury_sum_bf16`'s pointers).
pub const SUM_PARTS: usize = 8;

/// A strided f32 attention accumulator `[b, hq, sq, d]` (element strides of batch, head and
/// row; rows contiguous) with its log-sum-exps `[b, hq, sq]` (strides of batch and head; unit
/// row stride): what [`DeviceKernels::attn_merge`] merges a dense partial result into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttnAcc {
    pub o: u64,
    pub lse: u64,
    pub b: usize,
    pub hq: usize,
    pub sq: usize,
    pub d: usize,
    pub o_strides: [i64; 3],
    pub lse_strides: [i64; 2],
}

impl AttnAcc {
    /// What the merge kernels need: `d % 4 == 0`, a 16-byte aligned `o` with strides that keep
    /// every row 16-byte aligned, a 4-byte aligned `lse`, non-negative strides, and fewer than
    /// 2^31 work items (the kernels index in 32 bits). The error says which does not hold.
    pub fn check(&self) -> Result<()> {
        let rows = self
            .b
            .checked_mul(self.hq)
            .and_then(|x| x.checked_mul(self.sq));
        let items = rows.and_then(|r| r.checked_mul(self.d / 4));
        let why = if !self.d.is_multiple_of(4) || self.d == 0 {
            Some(format!(
                "row width {} is not a positive multiple of 4",
                self.d
            ))
        } else if !self.o.is_multiple_of(16) || self.o_strides.iter().any(|s| *s < 0 || s % 4 != 0)
        {
            Some(format!(
                "accumulator {:#x} with strides {:?} is not 16-byte aligned per row",
                self.o, self.o_strides
            ))
        } else if !self.lse.is_multiple_of(4) || self.lse_strides.iter().any(|s| *s < 0) {
            Some(format!(
                "lse {:#x} / {:?} misaligned",
                self.lse, self.lse_strides
            ))
        } else if items.is_none_or(|n| n >= 1 << 31) || self.sq >= 1 << 31 || self.hq >= 1 << 31 {
            Some("more than 2^31 work items".to_string())
        } else {
            None
        };
        match why {
            Some(w) => Err(RuntimeError::Unsupported(format!("attention merge: {w}"))),
            None => Ok(()),
        }
    }

    /// Rows `[skip, sq)` of every (batch, head) (a view `skip` rows further on).
    pub fn skip_rows(&self, skip: usize) -> AttnAcc {
        AttnAcc {
            o: self.o + (skip as i64 * self.o_strides[2] * 4) as u64,
            lse: self.lse + (skip * 4) as u64,
            sq: self.sq - skip,
            ..*self
        }
    }

    /// Rows `[0, n)` of every (batch, head).
    pub fn first_rows(&self, n: usize) -> AttnAcc {
        AttnAcc { sq: n, ..*self }
    }
}

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

/// Every `.entry` name `ptx` defines (pure text inspection).
pub fn entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix(".visible .entry ")
                .or_else(|| l.strip_prefix(".entry "))
                .or_else(|| l.strip_prefix(".weak .entry "))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
                .collect();
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

fn has_entry(entries: &[String], name: &str) -> bool {
    entries.iter().any(|e| e == name)
}

/// 1-D launch over `items` work items: 256 threads a block, at most 32 blocks per SM (the
/// kernels are grid-stride loops, so any grid is correct).
pub fn launch_dims(items: usize, sm_count: u32) -> (u32, u32) {
    let cap = 32 * sm_count.max(1) as usize;
    (items.div_ceil(256).clamp(1, cap) as u32, 256)
}

/// The loaded device kernels of one context.
pub struct DeviceKernels {
    module: Arc<CudaModule>,
    f: Vec<CudaFunction>,
    sm_count: u32,
    /// Generated tile kernels (`mercury_plan::tile_kernel`) looked up so far, by entry name.
    tiles: Mutex<HashMap<String, CudaFunction>>,
    /// Every `.entry` name of the PTX.
    ptx_entries: Vec<String>,
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
        let ptx_entries = entries(ptx);
        let sm_count = ctx
            .attribute(
                cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )
            .map_err(RuntimeError::driver("SM count"))? as u32;
        Ok(DeviceKernels {
            module,
            f,
            sm_count,
            tiles: Mutex::new(HashMap::new()),
            ptx_entries,
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

    /// Merges a dense bf16 partial output `o_part` `[b, hq, sq, d]` with its f32 log-sum-exps
    /// `lse_part` `[b, hq, sq]` into `acc` (`overwrite`: replaces it, widening to f32; rows whose
    /// part lse is -inf get o = 0). Two launches: o, then lse.
    ///
    /// # Safety
    /// `acc` must be live device memory of this context as described (checked with
    /// [`AttnAcc::check`]); `o_part` / `lse_part` must hold the dense part (o_part is not read
    /// where lse_part is -inf).
    pub unsafe fn attn_merge(
        &self,
        stream: &CudaStream,
        acc: &AttnAcc,
        o_part: u64,
        lse_part: u64,
        overwrite: bool,
    ) -> Result<()> {
        // SAFETY: one part, per the caller.
        unsafe { self.attn_merge_parts(stream, acc, (o_part, lse_part), (1, 0, 0), overwrite) }
    }

    /// As [`DeviceKernels::attn_merge`] for `n` parts in one pass: part `i`'s O starts
    /// `i * o_stride` elements after `parts.0`, its lse `i * l_stride` after `parts.1`
    /// (`(n, o_stride, l_stride)`). Each merge pass reads every part once and the accumulator
    /// once, so merging k ring steps together moves `2k + 8` bytes per element instead of
    /// `10k`.
    ///
    /// # Safety
    /// As [`DeviceKernels::attn_merge`], for every part.
    pub unsafe fn attn_merge_parts(
        &self,
        stream: &CudaStream,
        acc: &AttnAcc,
        parts: (u64, u64),
        (nparts, o_stride, l_stride): (usize, usize, usize),
        overwrite: bool,
    ) -> Result<()> {
        let (o_part, lse_part) = parts;
        acc.check()?;
        let rows = acc.b * acc.hq * acc.sq;
        if rows == 0 {
            return Ok(());
        }
        let i = |x: usize| x as i64;
        let [o_sb, o_sh, o_sr] = acc.o_strides;
        let [l_sb, l_sh] = acc.lse_strides;
        let (n, d, sq, hq, ow) = (
            i(rows),
            i(acc.d),
            i(acc.sq),
            i(acc.hq),
            i64::from(overwrite),
        );
        let (np, pos, pls) = (i(nparts), i(o_stride), i(l_stride));
        let mut b = stream.launch_builder(&self.f[8]);
        b.arg(&acc.o)
            .arg(&acc.lse)
            .arg(&o_part)
            .arg(&lse_part)
            .arg(&n)
            .arg(&d)
            .arg(&sq)
            .arg(&hq)
            .arg(&o_sb)
            .arg(&o_sh)
            .arg(&o_sr)
            .arg(&l_sb)
            .arg(&l_sh)
            .arg(&ow)
            .arg(&np)
            .arg(&pos)
            .arg(&pls);
        // SAFETY: arguments match `mercury_attn_merge_o_bf16`; memory per the caller, geometry
        // checked above.
        unsafe { b.launch(self.cfg(rows * acc.d / 4)) }
            .map_err(RuntimeError::driver("attn_merge_o"))?;
        let mut b = stream.launch_builder(&self.f[9]);
        b.arg(&acc.lse)
            .arg(&lse_part)
            .arg(&n)
            .arg(&sq)
            .arg(&hq)
            .arg(&l_sb)
            .arg(&l_sh)
            .arg(&ow)
            .arg(&np)
            .arg(&pls);
        // SAFETY: arguments match `mercury_attn_merge_lse`; same stream, after the `_o` kernel
        // read the old lse.
        unsafe { b.launch(self.cfg(rows)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("attn_merge_lse"))
    }

    /// `acc += part` over `n` f32.
    ///
    /// # Safety
    /// Both pointers must be device f32 arrays of `n` elements of this context.
    pub unsafe fn add_f32(&self, stream: &CudaStream, acc: u64, part: u64, n: usize) -> Result<()> {
        // SAFETY: per the caller.
        unsafe { self.add(stream, acc, part, n, false) }
    }

    /// `acc += part` over `n` elements: f32 accumulator, f32 part or (`bf16_part`) bf16 part.
    ///
    /// # Safety
    /// `acc` must be a device f32 array of `n` elements of this context, `part` one of `n`
    /// elements of the part's type.
    pub unsafe fn add(
        &self,
        stream: &CudaStream,
        acc: u64,
        part: u64,
        n: usize,
        bf16_part: bool,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let nn = n as i64;
        let mut b = stream.launch_builder(&self.f[if bf16_part { 10 } else { 2 }]);
        b.arg(&acc).arg(&part).arg(&nn);
        // SAFETY: arguments match `mercury_add_f32`; memory per the caller.
        unsafe { b.launch(self.cfg(n)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("add_f32"))
    }

    /// `dst = bf16(parts[0] + parts[1] + ...)` over `n` elements: bf16 parts widened and
    /// summed in f32 in order, rounded to nearest even once (the bits of an f32 accumulator
    /// that starts at `parts[0]`, adds the others and is cast). Errors on 0 or more than
    /// [`SUM_PARTS`] parts.
    ///
    /// # Safety
    /// `dst` and every part must be device bf16 arrays of `n` elements of this context.
    pub unsafe fn sum_bf16(
        &self,
        stream: &CudaStream,
        dst: u64,
        parts: &[u64],
        n: usize,
    ) -> Result<()> {
        if parts.is_empty() || parts.len() > SUM_PARTS {
            return Err(RuntimeError::Unsupported(format!(
                "mercury_sum_bf16 of {} parts (1 to {SUM_PARTS})",
                parts.len()
            )));
        }
        if n == 0 {
            return Ok(());
        }
        let mut ptrs = [0u64; SUM_PARTS];
        ptrs[..parts.len()].copy_from_slice(parts);
        let (nn, np) = (n as i64, parts.len() as i64);
        let mut b = stream.launch_builder(&self.f[11]);
        b.arg(&dst);
        for p in &ptrs {
            b.arg(p);
        }
        b.arg(&nn).arg(&np);
        // SAFETY: arguments match `mercury_sum_bf16` (null pointers past `nparts` are not
        // read); memory per the caller.
        unsafe { b.launch(self.cfg(n)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("sum_bf16"))
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

    /// The generated tile kernel `name` of the loaded PTX (an error naming it when the PTX
    /// was compiled without it).
    pub fn tile_function(&self, name: &str) -> Result<CudaFunction> {
        let mut tiles = self
            .tiles
            .lock()
            .map_err(|_| RuntimeError::DeviceKernels("tile kernel cache poisoned".into()))?;
        if let Some(f) = tiles.get(name) {
            return Ok(f.clone());
        }
        if !has_entry(&self.ptx_entries, name) {
            return Err(RuntimeError::DeviceKernels(format!(
                "the device kernels' PTX has no entry {name}, a generated tile kernel this plan \
                 launches: compile the PTX for this plan (mercury-opt --emit=ptx with the same \
                 input and schedule, or mercury-run built with the `mlir` feature)"
            )));
        }
        let f = self
            .module
            .load_function(name)
            .map_err(|e| RuntimeError::DeviceKernels(format!("{name}: {e}")))?;
        tiles.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// Launches the generated tile kernel `name` over `items` work items with its parameters
    /// `args` in contract order (pointers as their 64-bit addresses, counts and strides as
    /// `i64`).
    ///
    /// # Safety
    /// `args` must match the kernel's parameter list (`mercury_plan::tile_kernel`), every
    /// pointer must cover all the elements its dims and strides address, live on this
    /// context until the kernel completes, and `items` must be the contract's work items.
    pub unsafe fn tile(
        &self,
        stream: &CudaStream,
        name: &str,
        args: &[i64],
        items: usize,
    ) -> Result<()> {
        if items == 0 {
            return Ok(());
        }
        let f = self.tile_function(name)?;
        let mut b = stream.launch_builder(&f);
        for a in args {
            b.arg(a);
        }
        // SAFETY: per the caller.
        unsafe { b.launch(self.cfg(items)) }
            .map(|_| ())
            .map_err(RuntimeError::driver("tile kernel"))
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
        assert_eq!(entries(p2), vec!["mercury_add_f32x".to_string()]);
        assert!(has_entry(&entries(&ptx), "mercury_lse_merge_o_f32"));
        assert!(!has_entry(&entries(&ptx), "mercury_ew_0"));
    }

    #[test]
    fn launch_geometry() {
        assert_eq!(launch_dims(0, 132), (1, 256));
        assert_eq!(launch_dims(1000, 132), (4, 256));
        assert_eq!(launch_dims(1 << 30, 132), (32 * 132, 256));
    }
}
