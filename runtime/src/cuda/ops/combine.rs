//! Combine kernels on a compute stream: lse merge and add of f32 accumulators.

use crate::cuda::error::Result;
use crate::cuda::mem::{operand, write_back, CopyCx, Loc};
use mercury_plan::DType;

/// Enqueues an lse merge of packed-or-direct operands.
///
/// # Safety
/// All locations must be live device memory of the stream's context.
#[allow(clippy::too_many_arguments)]
pub unsafe fn enqueue_lse_merge(
    cx: &mut CopyCx<'_>,
    o_acc: &Loc,
    lse_acc: &Loc,
    o_part: &Loc,
    lse_part: &Loc,
    rows: usize,
    d: usize,
) -> Result<()> {
    // SAFETY: per the caller; packed copies live in the stream's scratch.
    unsafe {
        let oa = operand(cx, o_acc, true)?;
        let la = operand(cx, lse_acc, true)?;
        let op = operand(cx, o_part, true)?;
        let lp = operand(cx, lse_part, true)?;
        cx.dk
            .lse_merge(cx.stream, oa.ptr, la.ptr, op.ptr, lp.ptr, rows, d)?;
        write_back(cx, &oa, o_acc)?;
        write_back(cx, &la, lse_acc)
    }
}

/// Enqueues `acc += part` of packed-or-direct f32 operands.
///
/// # Safety
/// Both locations must be live device memory of the stream's context.
pub unsafe fn enqueue_add(cx: &mut CopyCx<'_>, acc: &Loc, part: &Loc) -> Result<()> {
    // SAFETY: per the caller.
    unsafe {
        let a = operand(cx, acc, true)?;
        let p = operand(cx, part, true)?;
        cx.dk.add(
            cx.stream,
            a.ptr,
            p.ptr,
            acc.reg.numel(),
            part.dtype == DType::BF16,
        )?;
        write_back(cx, &a, acc)
    }
}
