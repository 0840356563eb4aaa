//! mercury-lowering: compiler-generated GPU kernels and their in-process
//! MLIR -> PTX compilation (melior 0.27 / MLIR 22, no external tools, no
//! CUDA toolkit needed).
//!
//! * [`gpu_module_mlir`] (alias [`emit_gpu_mlir`]) emits one MLIR module
//!   (`gpu.container_module`, `gpu.module @mercury_kernels`) with one
//!   `gpu.func ... kernel` per [`DeviceKernel`], written in the `gpu`, `arith`,
//!   `scf` and `llvm` dialects (pointers are `!llvm.ptr<1>`).
//! * [`compile_to_ptx`] runs
//!   `builtin.module(nvvm-attach-target{chip=.. features=.. O=..},
//!   gpu.module(convert-scf-to-cf, convert-gpu-to-nvvm, reconcile-unrealized-casts),
//!   gpu-module-to-binary{format=isa})` and returns the PTX text;
//!   [`device_kernels_ptx`] does it for every kernel; [`lower_to_nvvm_mlir`]
//!   returns the IR after the NVVM conversion (debugging).
//! * Generated kernels for the plan's tile ops (`elementwise.rs`): one per distinct
//!   elementwise program and element types, one per row reduction
//!   ([`TileKernel`], whose contract is `mercury_plan::tile_kernel`'s), emitted into the same
//!   `gpu.module` by [`gpu_module_mlir_with`] and compiled with the fixed kernels by
//!   [`plan_kernels_ptx`].
//! * [`host_module_mlir`] instantiates the *same* kernel bodies for the CPU
//!   (the unit tests JIT them and compare with an f64 reference).
//!
//! # Kernel contract (the interface with the CUDA runtime)
//!
//! All kernels live in one PTX module and are launched by name with exactly
//! these parameters, in this order. Pointers are device pointers (64-bit) to
//! contiguous row-major data; every count/length/stride is an `i64` (in
//! elements, not bytes); bf16 data is stored as 16-bit integers. Launch is
//! 1-D with **any** block size and **any** grid size: each kernel runs a
//! grid-stride loop (`for e = blockIdx.x*blockDim.x + threadIdx.x; e < N;
//! e += gridDim.x*blockDim.x`), so elements past `N` are never touched and a
//! grid of `ceil(N / block)` blocks gives one element per thread.
//! Consecutive threads handle consecutive elements (coalesced). `N`
//! ("work items") is also given by [`DeviceKernel::work_items`];
//! [`launch_dims`] gives a fast launch (256 threads, grid capped at 32 blocks
//! per SM, which the grid-stride loop makes correct).
//!
//! | kernel (`.entry`) | parameters | work items `N` | effect, for each work item |
//! | --- | --- | --- | --- |
//! | `mercury_lse_merge_o_f32` | `o_acc: *f32, lse_acc: *f32, o_part: *f32, lse_part: *f32, rows: i64, d: i64` | `rows*d` | element `e`, row `r = e / d`, `la = lse_acc[r]`, `lp = lse_part[r]`, `m = max(la, lp)`: if `m == -inf` nothing; else `new = m + ln(exp(la-m) + exp(lp-m))`, `o_acc[e] = o_acc[e]*exp(la-new) + o_part[e]*exp(lp-new)` (a side whose lse is `-inf` contributes exactly 0, whatever its `o` holds). Does **not** write `lse_acc`. |
//! | `mercury_lse_merge_lse_f32` | `lse_acc: *f32, lse_part: *f32, rows: i64` | `rows` | `lse_acc[r] = m + ln(exp(la-m) + exp(lp-m))`, unchanged when both are `-inf`. Launch **after** `mercury_lse_merge_o_f32` (which reads the old `lse_acc`). |
//! | `mercury_add_f32` | `acc: *f32, part: *f32, n: i64` | `n` | `acc[i] += part[i]` |
//! | `mercury_sum_bf16` | `dst: *bf16, p0..p7: *bf16, n: i64, nparts: i64` | `n` | `dst[i] = bf16(p0[i] + ... + p{nparts-1}[i])`: widened, summed in f32 in part order, rounded to nearest even once (as `mercury_cast_f32_to_bf16`); `1 <= nparts <= 8`, parts past `nparts` are not read (may be null) |
//! | `mercury_cast_f32_to_bf16` | `dst: *bf16 (u16), src: *f32, n: i64` | `n` | `dst[i] = bf16(src[i])`, round to nearest even; NaN stays a (quiet) NaN, overflow gives ±inf |
//! | `mercury_cast_bf16_to_f32` | `dst: *f32, src: *bf16 (u16), n: i64` | `n` | `dst[i] = f32(src[i])` (exact) |
//! | `mercury_copy_2d_b16` | `dst: *u16, src: *u16, rows: i64, cols: i64, dst_stride: i64, src_stride: i64` | `rows*cols` | `r = e / cols, c = e % cols`: `dst[r*dst_stride + c] = src[r*src_stride + c]` (pack/unpack of 16-bit elements, bit exact) |
//! | `mercury_copy_2d_b32` | `dst: *u32, src: *u32, rows: i64, cols: i64, dst_stride: i64, src_stride: i64` | `rows*cols` | same, 32-bit elements |
//! | `mercury_fill_f32` | `dst: *f32, value: f32, n: i64` | `n` | `dst[i] = value` (e.g. `-inf` to initialise an lse accumulator) |
//!
//! Numerics on the device: `exp`/`ln` in the two LSE kernels use the PTX
//! `ex2.approx.f32` / `lg2.approx.f32` instructions (as CUDA's fast-math
//! `__expf`/`__logf`; relative error about 2^-22 per call), the output merge is
//! computed as `(o_acc*wa + o_part*wp) / (wa + wp)` with `wa = 2^((la-m)*log2 e)`
//! etc., which equals the formula above. No libdevice is needed: the PTX has no
//! external calls ([`compile_to_ptx`] rejects PTX that has).
//!
//! Compilation is serialised by a global lock (each call uses its own MLIR
//! context), so the functions can be called from any thread.

mod compile;
mod elementwise;
mod kernels;

pub use compile::{
    compile_to_ptx, device_kernels_ptx, lower_to_nvvm_mlir, plan_kernels_ptx, ptx_pipeline,
    TargetOptions,
};
pub use kernels::{
    emit_gpu_mlir, gpu_module_mlir, gpu_module_mlir_with, host_module_mlir, host_module_mlir_with,
    launch_dims, DeviceKernel, KernelParam, ParamType, BLOCKS_PER_SM, DEFAULT_BLOCK,
};
pub use mercury_plan::tile_kernel::TileKernel;

/// Errors of the lowering; none of them aborts the process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoweringError {
    /// Chip, features or optimisation level not accepted (checked before LLVM
    /// sees them, because LLVM would ignore or abort on some of them).
    #[error("invalid NVPTX target options: {0}")]
    InvalidTarget(String),
    /// The MLIR text does not parse.
    #[error("cannot parse the MLIR module: {0}")]
    Parse(String),
    /// The MLIR module parses but does not verify.
    #[error("the MLIR module does not verify: {0}")]
    Verify(String),
    /// The pass pipeline text was rejected.
    #[error("invalid pass pipeline: {0}")]
    PassPipeline(String),
    /// A pass failed.
    #[error("lowering failed: {0}")]
    Pass(String),
    /// No usable PTX came out of `gpu-module-to-binary`.
    #[error("no PTX produced: {0}")]
    Ptx(String),
    /// The PTX calls functions it does not define (e.g. libdevice `__nv_*`).
    #[error("the PTX has unresolved external functions: {0:?}")]
    UnresolvedSymbols(Vec<String>),
}

#[cfg(test)]
mod tests;
