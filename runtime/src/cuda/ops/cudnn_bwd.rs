//! The attention backward on the GPU: one `attention_bwd` patch instance
//! ([`mercury_plan::PatchKind::AttentionBwd`]) as cuDNN's fused backward
//! (`CudnnAttention::backward_ws`), then its gradients into the f32 outputs.
//!
//! Inputs cuDNN can read in place (bf16 tensors whose strides keep rows 16-byte aligned, an f32
//! lse `[b, hq, sq]` of unit row stride) are passed as they lie; any other (an f32 O or dO, odd
//! strides) is converted into dense bf16 scratch first. The leading query rows of a causal block
//! that see no key (`q_offset < k_offset`) are not given to cuDNN: their dQ is zero (written
//! when the patch overwrites) and they add nothing to dK, dV. The gradients come back as dense
//! bf16 parts and are added into the outputs (`accumulate`) or written to them (converted),
//! through the combine kernels, strided outputs included; a bf16 output the block overwrites
//! (a shift-reduce partial on its way to its owner) is cuDNN's output itself when it is dense.
//! cuDNN 9.19 cannot accumulate into f32 outputs itself, nor write f32 gradients
//! (`kernels/src/cuda/cudnn/bwd_graph.rs`).

use super::combine::enqueue_add;
use super::resolve::unsupported;
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::layout::as_rank;
use crate::cuda::mem::{copy, fill_pattern, CopyCx, Loc, MemTable};
use mercury_kernels::cuda::cudnn::{IoType, SdpaBwdCall, Tensor4};
use mercury_kernels::cuda::CudnnAttention;
use mercury_plan::{DType, View};

/// The words every refusal of an attention backward block carries.
pub const ATTENTION_BWD_REFUSED: &str = "the GPU attention backward (cuDNN) cannot compute it";

/// One input of the backward: where it lies, and the tensor cuDNN reads in place (`None`: it
/// is converted into dense scratch first, bf16, or f32 for the lse).
#[derive(Debug, Clone, PartialEq)]
pub struct BwdOperand {
    pub loc: Loc,
    pub direct: Option<Tensor4>,
    /// `[b, h, s, d]` (`d = 1` for the lse).
    pub dims: [usize; 4],
}

/// A resolved `attention_bwd` instance.
#[derive(Debug, Clone, PartialEq)]
pub struct AttnBwdLaunch {
    pub b: usize,
    pub hq: usize,
    pub hk: usize,
    /// Query rows given to cuDNN (the instance's, less the masked ones).
    pub rows: usize,
    pub sk: usize,
    pub dqk: usize,
    pub dv: usize,
    pub scale: f32,
    /// Causal shift of the rows given to cuDNN (key j visible to row r when r + delta >= j).
    pub causal_delta: Option<i64>,
    /// q, k, v, o, do, lse (q, o, do and lse restricted to the rows given to cuDNN).
    pub inputs: [BwdOperand; 6],
    /// dQ over the rows given to cuDNN, dK, dV (f32).
    pub outputs: [Loc; 3],
    /// dQ over the masked rows (zeroed when the instance overwrites).
    pub dq_masked: Option<Loc>,
    pub accumulate: bool,
}

impl AttnBwdLaunch {
    /// The shape as refusals name it: `b1 hq8 hk2 sq512 sk512 d_qk64 d_v64 causal`.
    pub fn shape(&self) -> String {
        format!(
            "b{} hq{} hk{} sq{} sk{} d_qk{} d_v{}{}",
            self.b,
            self.hq,
            self.hk,
            self.rows,
            self.sk,
            self.dqk,
            self.dv,
            if self.causal_delta.is_some() {
                " causal"
            } else {
                ""
            }
        )
    }

    /// The cuDNN call, with `ptrs` for the operands that are not read in place and the
    /// gradient parts (q, k, v, o, do, lse, dq, dk, dv).
    fn call(&self, ptrs: [u64; 9]) -> SdpaBwdCall {
        let t = |i: usize| {
            self.inputs[i]
                .direct
                .unwrap_or_else(|| Tensor4::dense(ptrs[i], self.inputs[i].dims))
        };
        SdpaBwdCall {
            io: IoType::Bf16,
            b: self.b,
            hq: self.hq,
            hk: self.hk,
            sq: self.rows,
            sk: self.sk,
            dqk: self.dqk,
            dv: self.dv,
            q: t(0),
            k: t(1),
            v: t(2),
            o: t(3),
            d_o: t(4),
            stats: t(5),
            grad_q: Tensor4::dense(ptrs[6], [self.b, self.hq, self.rows, self.dqk]),
            grad_k: Tensor4::dense(ptrs[7], [self.b, self.hk, self.sk, self.dqk]),
            grad_v: Tensor4::dense(ptrs[8], [self.b, self.hk, self.sk, self.dv]),
            scale: self.scale,
            causal_delta: self.causal_delta,
            route: None,
        }
    }

    fn empty(&self) -> bool {
        self.b == 0 || self.hq == 0 || self.rows == 0 || self.sk == 0
    }
}

/// `view` without its first `skip` positions along the dimension `from_end` places before the
/// last (0: the last).
fn skip_rows(view: &View, from_end: usize, skip: usize) -> View {
    let mut v = view.clone();
    let i = v.region.extent.len() - 1 - from_end;
    v.region.offset[i] += skip;
    v.region.extent[i] -= skip;
    v
}

/// Resolves one `attention_bwd` instance of `rank` (see the module docs); `params` is
/// `(causal, scale, q_offset, k_offset, accumulate)`.
pub fn resolve_attention_bwd(
    mem: &MemTable,
    rank: usize,
    inputs: &[View],
    outputs: &[View],
    (causal, scale, q_offset, k_offset, accumulate): (bool, f64, usize, usize, bool),
) -> Result<AttnBwdLaunch> {
    let [q, k, v, o, d_o, lse] = inputs else {
        return Err(RuntimeError::Schedule(format!(
            "attention_bwd takes [q, k, v, o, do, lse], got {} inputs",
            inputs.len()
        )));
    };
    let [dq, dk, dv] = outputs else {
        return Err(RuntimeError::Schedule(format!(
            "attention_bwd gives [dq, dk, dv], got {} outputs",
            outputs.len()
        )));
    };
    let shape_of = |view: &View, what: &str| -> Result<[usize; 4]> {
        let s = mem.slot(rank, view.slot)?;
        as_rank::<4>(&s.shape, &view.region)
            .map(|(_, e, _)| e)
            .ok_or_else(|| {
                unsupported(format!(
                    "attention_bwd {what} view {} of slot shape {:?} is not a [b, h, s, d] tensor",
                    view.region, s.shape
                ))
            })
    };
    let [b, hq, sq, dqk] = shape_of(q, "q")?;
    let [_, hk, sk, _] = shape_of(k, "k")?;
    let dvd = shape_of(v, "v")?[3];
    let scale32 = scale as f32;
    if !scale32.is_finite() {
        return Err(unsupported(format!("scale {scale} not finite in f32")));
    }
    let i = |x: usize| {
        i64::try_from(x).map_err(|_| unsupported(format!("attention offset {x} too large")))
    };
    let delta = i(q_offset)? - i(k_offset)?;
    // Leading rows that see no key (all of them without keys).
    let masked = if sk == 0 {
        sq
    } else if causal && delta < 0 {
        usize::try_from(-delta).unwrap_or(usize::MAX).min(sq)
    } else {
        0
    };
    let rows = sq - masked;
    // Rows the inputs cover (all of them when none is computed: nothing is read then).
    let skip = if rows == 0 { 0 } else { masked };
    let in_rows = sq - skip;
    let operand = |view: &View, what: &str, lse: bool| -> Result<BwdOperand> {
        let view = &skip_rows(view, if lse { 0 } else { 1 }, skip);
        let s = mem.slot(rank, view.slot)?;
        let loc = mem.loc(rank, view)?;
        let (dims, direct) = if lse {
            let (off, e, st) = as_rank::<3>(&s.shape, &view.region).ok_or_else(|| {
                unsupported(format!(
                    "attention_bwd {what} view {} of slot shape {:?} is not a [b, h, s] tensor",
                    view.region, s.shape
                ))
            })?;
            let ptr = s.ptr + (off * 4) as u64;
            let direct =
                (s.dtype == DType::F32 && st[2] == 1 && ptr.is_multiple_of(4)).then_some(Tensor4 {
                    ptr,
                    strides: [st[0] as i64, st[1] as i64, 1, 1],
                });
            ([e[0], e[1], e[2], 1], direct)
        } else {
            let (off, e, st) = as_rank::<4>(&s.shape, &view.region).ok_or_else(|| {
                unsupported(format!(
                    "attention_bwd {what} view {} of slot shape {:?} is not a [b, h, s, d] tensor",
                    view.region, s.shape
                ))
            })?;
            let ptr = s.ptr + (off * 2) as u64;
            let aligned = st[..3].iter().all(|x| x % 8 == 0) && ptr.is_multiple_of(16);
            let direct = (s.dtype == DType::BF16 && st[3] == 1 && aligned).then_some(Tensor4 {
                ptr,
                strides: st.map(|x| x as i64),
            });
            (e, direct)
        };
        if !matches!(loc.dtype, DType::BF16 | DType::F32) {
            return Err(unsupported(format!(
                "attention_bwd {what}: {ATTENTION_BWD_REFUSED}: {} operands (bf16 or f32 only)",
                loc.dtype.name()
            )));
        }
        Ok(BwdOperand { loc, direct, dims })
    };
    let ins = [
        operand(q, "q", false)?,
        operand(k, "k", false)?,
        operand(v, "v", false)?,
        operand(o, "o", false)?,
        operand(d_o, "do", false)?,
        operand(lse, "lse", true)?,
    ];
    let out = |view: &View, what: &str| -> Result<Loc> {
        let loc = mem.loc(rank, view)?;
        // f32 accumulators, or (written, not summed) a bf16 partial: cuDNN's own io type.
        let bf16_part = loc.dtype == DType::BF16 && !accumulate;
        if loc.dtype != DType::F32 && !bf16_part {
            return Err(unsupported(format!(
                "attention_bwd {what}: {ATTENTION_BWD_REFUSED}: the gradients are f32 accumulators (or bf16 parts the block writes), got {}",
                loc.dtype.name()
            )));
        }
        Ok(loc)
    };
    let outputs = [
        out(&skip_rows(dq, 1, skip), "dq")?,
        out(dk, "dk")?,
        out(dv, "dv")?,
    ];
    let dq_masked = if skip > 0 {
        let mut v = dq.clone();
        let n = v.region.extent.len();
        v.region.extent[n - 2] = skip;
        Some(out(&v, "dq")?)
    } else {
        None
    };
    // Shapes agree (the plan verifier checked the views; the slots may still disagree).
    let [_, _, _, dd] = ins[1].dims;
    let dims_ok = ins[1].dims[..3] == ins[2].dims[..3]
        && dd == dqk
        && ins[3].dims == [b, hq, in_rows, dvd]
        && ins[4].dims == [b, hq, in_rows, dvd]
        && ins[5].dims == [b, hq, in_rows, 1]
        && outputs[0].reg.numel() == b * hq * in_rows * dqk
        && outputs[1].reg.numel() == b * hk * sk * dqk
        && outputs[2].reg.numel() == b * hk * sk * dvd;
    if !dims_ok {
        return Err(RuntimeError::Schedule(format!(
            "attention_bwd shapes disagree: q {:?} k {:?} v {:?} o {:?} do {:?} lse {:?}",
            [b, hq, sq, dqk],
            ins[1].dims,
            ins[2].dims,
            ins[3].dims,
            ins[4].dims,
            ins[5].dims
        )));
    }
    Ok(AttnBwdLaunch {
        b,
        hq,
        hk,
        rows,
        sk,
        dqk,
        dv: dvd,
        scale: scale32,
        causal_delta: causal.then_some(delta + masked as i64),
        inputs: ins,
        outputs,
        dq_masked,
        accumulate,
    })
}

/// Whether cuDNN computes `l` (its plan is built and cached): `Err` names the shape and
/// cuDNN's reason.
pub fn attention_bwd_support(
    cudnn: &CudnnAttention,
    l: &AttnBwdLaunch,
) -> std::result::Result<(), String> {
    if l.empty() {
        return Ok(());
    }
    // Stand-in scratch addresses (256-byte aligned, like the scratch allocator's).
    cudnn
        .support_backward(&l.call([256; 9]))
        .map(|_| ())
        .map_err(|e| format!("attention_bwd {}: {ATTENTION_BWD_REFUSED}: {e}", l.shape()))
}

/// Enqueues one resolved `attention_bwd` instance (see the module docs).
///
/// # Safety
/// The launch must have been resolved against live slot memory of the stream's context.
pub unsafe fn enqueue_attention_bwd(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    l: &AttnBwdLaunch,
) -> Result<()> {
    if !l.accumulate {
        if let Some(m) = &l.dq_masked {
            // SAFETY: per the caller; zero bits are 0.0f32.
            unsafe { fill_pattern(cx.stream, m, 0)? };
        }
    }
    if l.empty() {
        if !l.accumulate {
            for out in &l.outputs {
                // SAFETY: as above.
                unsafe { fill_pattern(cx.stream, out, 0)? };
            }
        }
        return Ok(());
    }
    // Operands cuDNN cannot read in place, converted into dense scratch.
    let mut ptrs = [0u64; 9];
    for (i, op) in l.inputs.iter().enumerate() {
        if op.direct.is_none() {
            let dtype = if i == 5 { DType::F32 } else { DType::BF16 };
            let n = op.loc.reg.numel();
            let t = cx.scratch.take(n * dtype.size_bytes())?;
            // SAFETY: per the caller; `t` holds n elements of `dtype`.
            unsafe { copy(cx, &op.loc, &Loc::dense(t, dtype, n))? };
            ptrs[i] = t;
        }
    }
    let n = [
        l.b * l.hq * l.rows * l.dqk,
        l.b * l.hk * l.sk * l.dqk,
        l.b * l.hk * l.sk * l.dv,
    ];
    // A bf16 output the block overwrites, dense and 16-byte aligned, is cuDNN's own output:
    // written in place, no part and no copy (a shift-reduce partial on its way home).
    let direct: Vec<Option<u64>> = l
        .outputs
        .iter()
        .map(|o| {
            (!l.accumulate && o.dtype == DType::BF16)
                .then(|| o.contiguous_ptr())
                .flatten()
                .filter(|p| p.is_multiple_of(16))
        })
        .collect();
    for ((p, n), d) in ptrs[6..].iter_mut().zip(n).zip(&direct) {
        *p = match d {
            Some(d) => *d,
            None => cx.scratch.take(n * 2)?,
        };
    }
    let call = l.call(ptrs);
    let ws_bytes = cudnn.prepare_backward(&call)?;
    let w = cx.scratch.take(ws_bytes)?;
    // SAFETY: inputs in place or in scratch, the parts and the workspace in this stream's
    // scratch, sized above.
    unsafe { cudnn.backward_ws(cx.stream, &call, w, ws_bytes)? };
    let parts = [
        Loc::dense(ptrs[6], DType::BF16, n[0]),
        Loc::dense(ptrs[7], DType::BF16, n[1]),
        Loc::dense(ptrs[8], DType::BF16, n[2]),
    ];
    for ((out, part), d) in l.outputs.iter().zip(&parts).zip(&direct) {
        if d.is_some() {
            continue;
        }
        // SAFETY: per the caller; the parts are written above on this stream.
        unsafe {
            if l.accumulate {
                enqueue_add(cx, out, part)?;
            } else {
                copy(cx, part, out)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::mem::SlotInfo;
    use mercury_plan::Region;

    fn view(slot: usize, ext: &[usize]) -> View {
        View {
            slot,
            region: Region {
                offset: vec![0; ext.len()],
                extent: ext.to_vec(),
            },
        }
    }

    /// q [1, 4, 256, 128], k/v [1, 2, 512, 128], o/do [1, 4, 256, 128] (o in `o_type`), lse
    /// [1, 4, 256], dq/dk/dv in `grad_type`.
    fn resolve_block(
        o_type: DType,
        grad_type: DType,
        (causal, q_offset, k_offset): (bool, usize, usize),
    ) -> Result<AttnBwdLaunch> {
        resolve_block_as(o_type, grad_type, (causal, q_offset, k_offset, true))
    }

    /// As [`resolve_block`], accumulating or not.
    fn resolve_block_as(
        o_type: DType,
        grad_type: DType,
        (causal, q_offset, k_offset, accumulate): (bool, usize, usize, bool),
    ) -> Result<AttnBwdLaunch> {
        let s = |ptr, dtype, shape: &[usize]| SlotInfo {
            ptr,
            dtype,
            shape: shape.to_vec(),
        };
        let mem = MemTable {
            ranks: vec![vec![
                s(0x100000, DType::BF16, &[1, 4, 256, 128]),
                s(0x200000, DType::BF16, &[1, 2, 512, 128]),
                s(0x300000, DType::BF16, &[1, 2, 512, 128]),
                s(0x400000, o_type, &[1, 4, 256, 128]),
                s(0x500000, DType::BF16, &[1, 4, 256, 128]),
                s(0x600000, DType::F32, &[1, 4, 256]),
                s(0x700000, grad_type, &[1, 4, 256, 128]),
                s(0x800000, grad_type, &[1, 2, 512, 128]),
                s(0x900000, grad_type, &[1, 2, 512, 128]),
            ]],
            ..MemTable::default()
        };
        let q = [1, 4, 256, 128];
        let k = [1, 2, 512, 128];
        resolve_attention_bwd(
            &mem,
            0,
            &[
                view(0, &q),
                view(1, &k),
                view(2, &k),
                view(3, &q),
                view(4, &q),
                view(5, &[1, 4, 256]),
            ],
            &[view(6, &q), view(7, &k), view(8, &k)],
            (causal, 0.125, q_offset, k_offset, accumulate),
        )
    }

    #[test]
    fn dense_bf16_inputs_are_read_in_place() {
        let l = resolve_block(DType::BF16, DType::F32, (false, 0, 0)).unwrap();
        assert!(l.inputs.iter().all(|i| i.direct.is_some()));
        assert_eq!(
            (l.b, l.hq, l.hk, l.rows, l.sk, l.dqk, l.dv),
            (1, 4, 2, 256, 512, 128, 128)
        );
        let c = l.call([256; 9]);
        assert_eq!(c.q.ptr, 0x100000);
        assert_eq!(c.stats.strides, [1024, 256, 1, 1]);
        assert_eq!(c.causal_delta, None);
        assert!(l.dq_masked.is_none());
        assert_eq!(l.outputs[1].reg.numel(), 2 * 512 * 128);
    }

    #[test]
    fn an_f32_output_of_the_forward_is_converted() {
        let l = resolve_block(DType::F32, DType::F32, (true, 512, 0)).unwrap();
        assert!(l.inputs[3].direct.is_none());
        assert_eq!(l.inputs[3].dims, [1, 4, 256, 128]);
        assert_eq!(l.call([256; 9]).o.ptr, 256);
        assert_eq!(l.causal_delta, Some(512));
    }

    #[test]
    fn rows_that_see_no_key_are_left_out() {
        // Queries at 0..256, keys at 100..612: rows 0..100 see nothing.
        let l = resolve_block(DType::BF16, DType::F32, (true, 0, 100)).unwrap();
        assert_eq!(l.rows, 156);
        assert_eq!(l.causal_delta, Some(0));
        let c = l.call([256; 9]);
        assert_eq!(c.q.ptr, 0x100000 + 100 * 128 * 2);
        assert_eq!(c.stats.ptr, 0x600000 + 100 * 4);
        assert_eq!(l.outputs[0].reg.numel(), 4 * 156 * 128);
        assert_eq!(l.dq_masked.as_ref().unwrap().reg.numel(), 4 * 100 * 128);
        // Every row masked: nothing for cuDNN.
        let l = resolve_block(DType::BF16, DType::F32, (true, 0, 256)).unwrap();
        assert!(l.empty());
    }

    #[test]
    fn accumulated_gradients_must_be_f32() {
        // `resolve_block` accumulates: a bf16 accumulator would round every sum.
        let e = resolve_block(DType::BF16, DType::BF16, (false, 0, 0)).unwrap_err();
        assert!(e.to_string().contains(ATTENTION_BWD_REFUSED), "{e}");
        // Overwritten (a partial sent to its owner), bf16 is cuDNN's own output type.
        let l = resolve_block_as(DType::BF16, DType::BF16, (false, 0, 0, false)).unwrap();
        assert!(!l.accumulate && l.outputs.iter().all(|o| o.dtype == DType::BF16));
        assert_eq!(l.outputs[0].contiguous_ptr(), Some(0x700000));
    }
}
