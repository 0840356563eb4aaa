//! Compute-stream operations: resolution of a plan's `ComputeOp`s against the slot addresses
//! (shapes, dtypes, strides and alignment are checked once, before anything runs), and their
//! launch on a rank's compute stream.
//!
//! Files: `resolve.rs` (a `ComputeOp` against the slot addresses), `cudnn.rs` (the cuDNN
//! attention path: [`CudnnSplit`], deferred-merge groups, its enqueue), `combine.rs` (the
//! combine kernels: lse merge, add); this file holds the resolved ops and [`enqueue`].

use super::device_kernels::DeviceKernels;
use super::error::Result;
use super::mem::{copy, operand, write_back, CopyCx, Loc};
use cudarc::driver::CudaStream;
use mercury_kernels::cuda::{
    AttentionPatch, AttnLaunch, CudnnAttention, GemmPatch, GemmSpec, GemmWorkspace,
};

mod combine;
mod cudnn;
mod resolve;
#[cfg(test)]
mod tests;

pub use combine::{enqueue_add, enqueue_lse_merge};
use cudnn::enqueue_cudnn_attention;
pub use cudnn::{
    cudnn_choice, cudnn_split, defer_groups, CudnnSplit, PartSlot, MAX_DEFERRED_PARTS,
};
use resolve::unsupported;
pub use resolve::{check_copy, check_f32, lse_operands, lse_shape, resolve};

/// A GEMM operand: the matrix geometry and either its own address (`ptr`) or, when the view
/// is not a strided matrix, the region to pack into scratch (`ld` is then `cols`).
#[derive(Debug, Clone, PartialEq)]
pub struct MatOperand {
    pub loc: Loc,
    pub ptr: Option<u64>,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

/// One resolved compute operation.
#[derive(Debug, Clone, PartialEq)]
pub enum ComputeLaunch {
    Gemm {
        spec: GemmSpec,
        a: MatOperand,
        b: MatOperand,
        c: MatOperand,
    },
    Attention {
        launch: AttnLaunch,
        via: AttnVia,
    },
    Add(Vec<(Loc, Loc)>),
    LseMerge {
        o_acc: Loc,
        lse_acc: Loc,
        o_part: Loc,
        lse_part: Loc,
        rows: usize,
        d: usize,
    },
    Copy {
        src: Loc,
        dst: Loc,
    },
}

/// Which implementation runs an attention launch; decided when the executor is built
/// (`resolve` leaves it [`AttnVia::Undecided`]).
#[derive(Debug, Clone, PartialEq)]
pub enum AttnVia {
    Undecided,
    /// The cuDNN patch plus the merge kernels.
    Cudnn(Box<CudnnSplit>),
    /// The NVRTC kernel (merges in its own epilogue).
    Nvrtc,
}

/// The patches and kernels a compute stream launches with.
pub struct Patches<'a> {
    pub dk: &'a DeviceKernels,
    pub gemm: Option<&'a GemmPatch>,
    pub attention: Option<&'a AttentionPatch>,
    pub cudnn: Option<&'a CudnnAttention>,
}

/// Enqueues one resolved op on `cx.stream` (using `ws` for cuBLASLt).
///
/// # Safety
/// The op must have been resolved against the live memory of this executor.
pub unsafe fn enqueue(
    cx: &mut CopyCx<'_>,
    p: &Patches<'_>,
    ws: Option<&GemmWorkspace>,
    op: &ComputeLaunch,
) -> Result<()> {
    cx.scratch.reset();
    let stream: &CudaStream = cx.stream;
    match op {
        ComputeLaunch::Gemm { spec, a, b, c } => {
            let gemm = p
                .gemm
                .ok_or_else(|| unsupported("gemm patch not initialised".into()))?;
            let ws = ws.ok_or_else(|| unsupported("gemm without a workspace".into()))?;
            // SAFETY: operands per the caller; packed ones live in scratch.
            unsafe {
                let pa = match a.ptr {
                    Some(x) => x,
                    None => operand(cx, &a.loc, true)?.ptr,
                };
                let pb = match b.ptr {
                    Some(x) => x,
                    None => operand(cx, &b.loc, true)?.ptr,
                };
                match c.ptr {
                    Some(pc) => gemm.run(stream, ws, spec, pa, pb, pc)?,
                    None => {
                        let oc = operand(cx, &c.loc, spec.accumulate)?;
                        gemm.run(stream, ws, spec, pa, pb, oc.ptr)?;
                        write_back(cx, &oc, &c.loc)?;
                    }
                }
            }
            Ok(())
        }
        ComputeLaunch::Attention { launch, via } => match via {
            AttnVia::Cudnn(split) => {
                let cudnn = p
                    .cudnn
                    .ok_or_else(|| unsupported("cuDNN attention patch not initialised".into()))?;
                // SAFETY: the launch was resolved against live slot memory.
                unsafe { enqueue_cudnn_attention(cx, cudnn, split, launch.accumulate) }
            }
            AttnVia::Nvrtc => {
                let attn = p
                    .attention
                    .ok_or_else(|| unsupported("attention patch not initialised".into()))?;
                // SAFETY: the launch was validated against live slot memory.
                unsafe { attn.launch(stream, launch)? };
                Ok(())
            }
            AttnVia::Undecided => Err(unsupported(
                "attention launch enqueued before the executor chose its patch".into(),
            )),
        },
        ComputeLaunch::Add(pairs) => {
            for (a, q) in pairs {
                // SAFETY: per the caller.
                unsafe { enqueue_add(cx, a, q)? };
            }
            Ok(())
        }
        ComputeLaunch::LseMerge {
            o_acc,
            lse_acc,
            o_part,
            lse_part,
            rows,
            d,
        } => {
            // SAFETY: per the caller.
            unsafe { enqueue_lse_merge(cx, o_acc, lse_acc, o_part, lse_part, *rows, *d) }
        }
        ComputeLaunch::Copy { src, dst } => {
            // SAFETY: per the caller.
            unsafe { copy(cx, src, dst) }
        }
    }
}
