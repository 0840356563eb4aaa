//! Compute-stream operations: resolution of a plan's `ComputeOp`s against the slot addresses
//! (shapes, dtypes, strides and alignment are checked once, before anything runs), and their
//! launch on a rank's compute stream.
//!
//! Files: `resolve.rs` (a `ComputeOp` against the slot addresses), `cudnn.rs` (the cuDNN
//! attention path: [`CudnnSplit`], deferred-merge groups, its enqueue), `cudnn_bwd.rs` (the
//! attention backward: [`AttnBwdLaunch`], its resolution and enqueue), `masked.rs` (masked
//! attention: sliding windows and packed documents, [`MaskedSplit`]), `combine.rs` (the
//! combine kernels: lse merge, add); this file holds the resolved ops and [`enqueue`].

use super::device_kernels::DeviceKernels;
use super::error::Result;
use super::mem::{copy, operand, write_back, CopyCx, Loc, Operand};
use cudarc::driver::CudaStream;
use mercury_kernels::cuda::{
    AttentionF32Patch, AttentionPatch, AttnLaunch, CudnnAttention, ElemType, GemmPatch, GemmSpec,
    GemmWorkspace,
};

mod combine;
mod cudnn;
mod cudnn_bwd;
mod masked;
pub mod ragged;
mod resolve;
#[cfg(test)]
mod tests;

pub use combine::{enqueue_add, enqueue_lse_merge};
use cudnn::enqueue_cudnn_attention;
pub use cudnn::{
    cudnn_choice, cudnn_host_check, cudnn_split, defer_groups, launch_acc, CudnnSplit, DirectCall,
    PartSlot, MAX_DEFERRED_PARTS,
};
pub use cudnn_bwd::{
    attention_bwd_support, enqueue_attention_bwd, resolve_attention_bwd, AttnBwdLaunch, BwdOperand,
    ATTENTION_BWD_REFUSED,
};
pub use masked::{row_bounds, MaskedSplit, RunBounds};
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
    /// An attention backward block (cuDNN only; `ops/cudnn_bwd.rs`).
    AttentionBwd(Box<AttnBwdLaunch>),
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
    /// A generated tile kernel (an elementwise program or a row reduction).
    Tile(Box<TileLaunch>),
}

/// One operand of a generated tile kernel: its location, and its address and element strides
/// over the kernel's index space when the view has that form in its slot (`None`: it is
/// packed into scratch, with the dense strides `packed`).
#[derive(Debug, Clone, PartialEq)]
pub struct TileOperand {
    pub loc: Loc,
    pub direct: Option<(u64, [i64; 3])>,
    pub packed: [i64; 3],
}

/// A resolved launch of a generated tile kernel (`mercury_plan::tile_kernel`'s contract).
#[derive(Debug, Clone, PartialEq)]
pub struct TileLaunch {
    /// The PTX entry.
    pub name: String,
    /// A row reduction (output strides: two; input: three) rather than an elementwise
    /// program.
    pub reduce: bool,
    /// `[d0, d1, cols]`.
    pub dims: [i64; 3],
    /// Work items: `d0*d1*cols` (elementwise) or `d0*d1` (rows), at most 2^31 - 1.
    pub items: usize,
    pub out: TileOperand,
    pub inputs: Vec<TileOperand>,
    /// `(row_offset, col_offset)` of each causal mask, in program order.
    pub masks: Vec<(i64, i64)>,
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
    /// The f32 kernel (f32 q/k/v; merges in its own epilogue).
    F32,
    /// A sliding window or documents: the NVRTC kernel under per-row key bounds
    /// (`masked.rs`); decided when the op is resolved.
    Masked(Box<MaskedSplit>),
}

/// The words every refusal of an attention block by the GPU patches carries (a dtype they do
/// not compute, a shape neither cuDNN nor the NVRTC kernel takes): the tools locate such an
/// error at the operator's attention patch.
pub const ATTENTION_REFUSED: &str = "the GPU attention patches cannot compute it";

/// The shape of an attention launch as refusals and warnings name it:
/// `b1 hq8 hk2 sq512 sk512 d_qk64 d_v64 causal` (with ` f32` for f32 q/k/v).
pub fn attention_shape(l: &AttnLaunch) -> String {
    let d = l.dims;
    format!(
        "b{} hq{} hk{} sq{} sk{} d_qk{} d_v{}{}{}",
        d.b,
        d.hq,
        d.hk,
        d.sq,
        d.sk,
        d.d,
        l.dv,
        if l.params.causal { " causal" } else { "" },
        if l.elem == ElemType::F32 { " f32" } else { "" }
    )
}

/// The patch that computes an attention launch. f32 q/k/v: the f32 kernel (`f32`:
/// [`validate_f32`]'s verdict). bf16: the cuDNN patch where it takes the launch (`cudnn`: its
/// split, or why not, or why no cuDNN patch is loaded), else the NVRTC kernel where it can
/// compute it (`nvrtc`: [`AttnLaunch::validate`]'s verdict; head dim 128 only). Returns the
/// choice and, when cuDNN refused and the NVRTC kernel computes the block, a warning naming the
/// shape and cuDNN's reason. Where none can, the error names the shape and the reasons.
///
/// [`validate_f32`]: mercury_kernels::cuda::validate_f32
pub fn attention_route(
    launch: &AttnLaunch,
    cudnn: std::result::Result<CudnnSplit, String>,
    nvrtc: std::result::Result<(), String>,
    f32: std::result::Result<(), String>,
) -> Result<(AttnVia, Option<String>)> {
    let shape = attention_shape(launch);
    if launch.elem == ElemType::F32 {
        return match f32 {
            Ok(()) => Ok((AttnVia::F32, None)),
            Err(why) => Err(unsupported(format!(
                "attention {shape}: {ATTENTION_REFUSED}: {why}"
            ))),
        };
    }
    let why_cudnn = match cudnn {
        Ok(split) => return Ok((AttnVia::Cudnn(Box::new(split)), None)),
        Err(e) => e,
    };
    match nvrtc {
        Ok(()) => Ok((
            AttnVia::Nvrtc,
            Some(format!(
                "attention {shape}: cuDNN refused ({why_cudnn}); using the NVRTC kernel"
            )),
        )),
        Err(why_nvrtc) => Err(unsupported(format!(
            "attention {shape}: {ATTENTION_REFUSED}: cuDNN refused ({why_cudnn}); {why_nvrtc}"
        ))),
    }
}

/// The patches and kernels a compute stream launches with.
pub struct Patches<'a> {
    pub dk: &'a DeviceKernels,
    pub gemm: Option<&'a GemmPatch>,
    pub attention: Option<&'a AttentionPatch>,
    pub attention_f32: Option<&'a AttentionF32Patch>,
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
            AttnVia::F32 => {
                let attn = p
                    .attention_f32
                    .ok_or_else(|| unsupported("f32 attention patch not initialised".into()))?;
                // SAFETY: the launch was validated against live slot memory.
                unsafe { attn.launch(stream, launch)? };
                Ok(())
            }
            AttnVia::Masked(split) => {
                let attn = p.attention.ok_or_else(|| {
                    unsupported("masked attention: the attention kernel is not initialised".into())
                })?;
                let empty = split.empty.ok_or_else(|| {
                    unsupported(
                        "masked attention: the row bounds of this run were not uploaded \
                         (CudaExecutor::set_documents)"
                            .into(),
                    )
                })?;
                if let Some((_, ps)) = split.part.as_ref().filter(|_| split.deferred) {
                    let cudnn = p.cudnn.ok_or_else(|| {
                        unsupported("masked attention: the cuDNN patch is not initialised".into())
                    })?;
                    // SAFETY: as below; the part buffer was allocated for the block's group.
                    return unsafe {
                        ragged::enqueue_ragged_part(cx, cudnn, launch, &split.ragged, ps)
                    };
                }
                if empty && launch.accumulate {
                    return Ok(());
                }
                if !split.ragged.is_empty() {
                    let cudnn = p.cudnn.ok_or_else(|| {
                        unsupported("masked attention: the cuDNN patch is not initialised".into())
                    })?;
                    // SAFETY: the launch was resolved against live slot memory; the calls'
                    // arrays were allocated and uploaded for this run by the executor.
                    return unsafe { ragged::enqueue_ragged(cx, cudnn, launch, &split.ragged) };
                }
                // SAFETY: the launch was resolved and validated against live slot memory;
                // its bounds were allocated and uploaded for this run by the executor.
                unsafe { attn.launch(stream, &split.launch(launch))? };
                Ok(())
            }
            AttnVia::Undecided => Err(unsupported(
                "attention launch enqueued before the executor chose its patch".into(),
            )),
        },
        ComputeLaunch::AttentionBwd(l) => {
            let cudnn = p.cudnn.ok_or_else(|| {
                unsupported("cuDNN attention backward patch not initialised".into())
            })?;
            // SAFETY: the launch was resolved against live slot memory.
            unsafe { enqueue_attention_bwd(cx, cudnn, l) }
        }
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
        ComputeLaunch::Tile(t) => {
            // SAFETY: per the caller.
            unsafe { enqueue_tile(cx, t) }
        }
    }
}

/// Launches a generated tile kernel: operands whose views have strides over the kernel's
/// index space are passed in place, the others are packed into scratch first (the output
/// written back afterwards).
///
/// # Safety
/// The launch must have been resolved against the live memory of this executor.
unsafe fn enqueue_tile(cx: &mut CopyCx<'_>, t: &TileLaunch) -> Result<()> {
    if t.items == 0 {
        return Ok(());
    }
    let here = cx.here();
    // (address, strides) of an operand, packing it when needed.
    // A view without strides over the index space, or on another device, goes through a
    // contiguous local copy (`operand` packs it; a contiguous local view has strides, so it
    // never reaches here in place), whose strides are the dense ones.
    let place = |cx: &mut CopyCx<'_>,
                 o: &TileOperand,
                 read: bool|
     -> Result<(u64, [i64; 3], Option<Operand>)> {
        match o.direct {
            Some((p, st)) if o.loc.is_on(here) => Ok((p, st, None)),
            _ => {
                // SAFETY: per the caller; the packed copy lives in the stream's scratch.
                let op = unsafe { operand(cx, &o.loc, read)? };
                Ok((op.ptr, o.packed, Some(op)))
            }
        }
    };
    let mut ins = Vec::with_capacity(t.inputs.len());
    for x in &t.inputs {
        ins.push(place(cx, x, true)?);
    }
    let (optr, ost, opacked) = place(cx, &t.out, false)?;
    let mut args: Vec<i64> = Vec::new();
    args.push(optr as i64);
    args.extend(ins.iter().map(|x| x.0 as i64));
    args.extend(t.dims);
    if t.reduce {
        args.extend(&ost[..2]);
    } else {
        args.extend(ost);
    }
    for x in &ins {
        args.extend(x.1);
    }
    for (r, c) in &t.masks {
        args.extend([*r, *c]);
    }
    // SAFETY: the arguments follow the kernel's contract (pointers of live operands that
    // cover every element the dims and strides address, counts within 2^31 - 1).
    unsafe { cx.dk.tile(cx.stream, &t.name, &args, t.items)? };
    if let Some(op) = opacked {
        // SAFETY: per the caller.
        unsafe { write_back(cx, &op, &t.out.loc)? };
    }
    Ok(())
}
