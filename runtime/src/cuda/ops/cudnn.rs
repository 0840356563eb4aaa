//! The cuDNN attention path: the split of an attention launch into masked rows and one cuDNN
//! call ([`CudnnSplit`]), the groups of ring steps whose merges are deferred
//! ([`defer_groups`]), and its enqueue.

use super::resolve::unsupported;
use crate::cuda::device_kernels::AttnAcc;
use crate::cuda::error::Result;
use crate::cuda::mem::CopyCx;
use mercury_kernels::cuda::cudnn::{IoType, Route};
use mercury_kernels::cuda::{AttnLaunch, CudnnAttention, ElemType, SdpaCall, Strided3, Tensor4};
use mercury_plan::{ComputeOp, PatchKind, View};

/// An attention launch as the cuDNN patch computes it: the leading query rows of every
/// (batch, head) that see no key (a causal block whose keys start after them) are not given
/// to cuDNN (they would have no softmax); the rest is one cuDNN call into dense scratch, merged
/// into (or, without `accumulate`, written to) the launch's `o` / `lse` by the MLIR merge
/// kernels. The masked rows get o = 0, lse = -inf without `accumulate` and are left alone
/// with it (`kernels::cpu::attention` semantics).
#[derive(Debug, Clone, PartialEq)]
pub struct CudnnSplit {
    /// Leading rows per (batch, head) that see no key.
    pub masked: usize,
    /// The cuDNN call over the other rows; its O and Stats addresses are 0 until the executor
    /// points them at scratch (dense bf16 O, dense f32 Stats).
    pub call: Option<SdpaCall>,
    /// The launch's output and lse.
    pub acc: AttnAcc,
    /// Set when the block's merge is deferred (see [`defer_groups`]): its part goes to a
    /// buffer kept for its group, and the group's last block merges every part at once.
    pub part: Option<PartSlot>,
    /// Set per run by the executor's direct binding (`executor/direct.rs`): the call reads
    /// q/k/v (and, with `writes_output`, writes O and Stats) where the global buffers are
    /// bound, instead of the slots.
    pub direct: Option<Box<DirectCall>>,
}

/// A cuDNN call bound to global buffers' memory (see [`CudnnSplit::direct`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DirectCall {
    /// The call: q/k/v where they are read; with `writes_output`, O (bf16) and Stats (f32)
    /// where the block's output and lse buffers are bound.
    pub call: SdpaCall,
    /// The call writes the launch's output itself: no merge into the accumulator (the
    /// executor skips the output gather of the accumulator).
    pub writes_output: bool,
    /// With `writes_output`: the lse is not an output; Stats go to scratch.
    pub stats_scratch: bool,
}

/// A deferred block's place in its group's part buffer. Parts are `[b, hq, sq, dv]` bf16 O and
/// `[b, hq, sq]` f32 lse over the accumulator's full rows (rows that see no key keep lse -inf).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartSlot {
    pub index: usize,
    /// On the group's last block: merge this many parts, replacing the accumulator when the
    /// group's first block does not accumulate.
    pub merge: Option<(usize, bool)>,
    pub o_base: u64,
    pub l_base: u64,
    /// Elements between two parts' O / lse.
    pub o_stride: usize,
    pub l_stride: usize,
}

impl PartSlot {
    /// O and lse addresses of this block's part.
    pub fn addrs(&self) -> (u64, u64) {
        (
            self.o_base + (self.index * self.o_stride * 2) as u64,
            self.l_base + (self.index * self.l_stride * 4) as u64,
        )
    }
}

/// Largest number of ring steps whose parts are merged in one pass.
pub const MAX_DEFERRED_PARTS: usize = 8;

/// Groups of a rank's attention blocks whose merges can be deferred and done in one pass: runs
/// of blocks (in program order: stage by stage, compute before transfers) that `eligible`
/// accepts, write the same output and lse views, accumulate after the first, and with no other
/// operation, compute or transfer, touching those views in between. Runs are cut into chunks of
/// at most `max_parts`; chunks of one block are not returned. Each entry is (stage, op) indices.
pub fn defer_groups(
    prog: &mercury_plan::RankProgram,
    eligible: impl Fn(usize, usize) -> bool,
    max_parts: usize,
) -> Vec<Vec<(usize, usize)>> {
    use mercury_plan::verify::{comm_access, compute_access};
    type Key = (View, View);
    let overlaps = |a: &View, b: &View| a.slot == b.slot && a.region.overlaps(&b.region);
    let touches = |key: &Key, v: &View| overlaps(&key.0, v) || overlaps(&key.1, v);
    let mut open: Vec<(Key, Vec<(usize, usize)>)> = Vec::new();
    let mut done: Vec<Vec<(usize, usize)>> = Vec::new();
    type Groups = Vec<(Key, Vec<(usize, usize)>)>;
    // Closes every open group whose views one of `views` touches.
    let close_touched =
        |open: &mut Groups, done: &mut Vec<Vec<(usize, usize)>>, views: &[&View]| {
            let (hit, keep): (Groups, Groups) = std::mem::take(open)
                .into_iter()
                .partition(|(k, _)| views.iter().any(|v| touches(k, v)));
            *open = keep;
            for (_, g) in hit {
                done.extend(
                    g.chunks(max_parts.max(1))
                        .filter(|c| c.len() >= 2)
                        .map(<[(usize, usize)]>::to_vec),
                );
            }
        };
    for (si, st) in prog.stages.iter().enumerate() {
        for (oi, op) in st.compute.iter().enumerate() {
            let member = match op {
                ComputeOp::Patch {
                    patch: PatchKind::Attention { accumulate, .. },
                    outputs,
                    ..
                } if outputs.len() == 2 && eligible(si, oi) => {
                    Some(((outputs[0].clone(), outputs[1].clone()), *accumulate))
                }
                _ => None,
            };
            match member {
                Some((key, true)) if open.iter().any(|(k, _)| *k == key) => {
                    if let Some((_, g)) = open.iter_mut().find(|(k, _)| *k == key) {
                        g.push((si, oi));
                    }
                }
                Some((key, _)) => {
                    // A block that starts afresh (or a new accumulator) ends every open group
                    // its views touch, its own included.
                    close_touched(&mut open, &mut done, &[&key.0, &key.1]);
                    open.push((key, vec![(si, oi)]));
                }
                None => {
                    let (reads, writes) = compute_access(op);
                    let views: Vec<&View> = reads.into_iter().chain(writes).collect();
                    close_touched(&mut open, &mut done, &views);
                }
            }
        }
        for op in &st.comm {
            let (reads, writes) = comm_access(op);
            let views: Vec<&View> = reads.into_iter().chain(writes).collect();
            close_touched(&mut open, &mut done, &views);
        }
    }
    let all: Vec<View> = open
        .iter()
        .flat_map(|(k, _)| [k.0.clone(), k.1.clone()])
        .collect();
    close_touched(&mut open, &mut done, &all.iter().collect::<Vec<_>>());
    done.sort();
    done
}

/// The cuDNN form of an attention launch (pure index arithmetic; see [`CudnnSplit`]).
/// Visible keys of row `r` (global positions): `k_offset + c <= q_offset + r`, i.e. the shift
/// `delta = q_offset - k_offset`; the first `-delta` rows see nothing when it is negative.
pub fn cudnn_split(l: &AttnLaunch) -> Result<CudnnSplit> {
    let d = l.dims;
    let p = l.params;
    let i = |x: usize| {
        i64::try_from(x).map_err(|_| unsupported(format!("attention offset {x} too large")))
    };
    if l.elem != ElemType::BF16 {
        return Err(unsupported(format!(
            "the cuDNN patch takes bf16 q/k/v, got {:?}",
            l.elem
        )));
    }
    if !(p.scale as f32).is_finite() {
        return Err(unsupported(format!("scale {} not finite in f32", p.scale)));
    }
    if l.lse.sr != 1 {
        return Err(unsupported(format!(
            "lse row stride {} (the merge kernels take unit row strides)",
            l.lse.sr
        )));
    }
    let delta = i(p.q_offset)? - i(p.k_offset)?;
    let masked = if d.sk == 0 {
        d.sq
    } else if p.causal && delta < 0 {
        usize::try_from(-delta).unwrap_or(usize::MAX).min(d.sq)
    } else {
        0
    };
    let rows = d.sq - masked;
    let st = |t: &Strided3| [t.sb, t.sh, t.sr, 1];
    let call = (rows > 0).then(|| SdpaCall {
        io: IoType::Bf16,
        o_f32: false,
        b: d.b,
        hq: d.hq,
        hk: d.hk,
        sq: rows,
        sk: d.sk,
        dqk: d.d,
        dv: l.dv,
        q: Tensor4 {
            ptr: l.q.ptr + (masked as i64 * l.q.sr * 2) as u64,
            strides: st(&l.q),
        },
        k: Tensor4 {
            ptr: l.k.ptr,
            strides: st(&l.k),
        },
        v: Tensor4 {
            ptr: l.v.ptr,
            strides: st(&l.v),
        },
        o: Tensor4::dense(0, [d.b, d.hq, rows, l.dv]),
        stats: Tensor4::dense(0, [d.b, d.hq, rows, 1]),
        scale: p.scale as f32,
        causal_delta: p.causal.then_some(delta + masked as i64),
    });
    let acc = launch_acc(l)?;
    Ok(CudnnSplit {
        masked,
        call,
        acc,
        part: None,
        direct: None,
    })
}

/// The output and lse of `l` as the merge kernels take them (checked: [`AttnAcc::check`]).
pub fn launch_acc(l: &AttnLaunch) -> Result<AttnAcc> {
    let d = l.dims;
    let acc = AttnAcc {
        o: l.o.ptr,
        lse: l.lse.ptr,
        b: d.b,
        hq: d.hq,
        sq: d.sq,
        d: l.dv,
        o_strides: [l.o.sb, l.o.sh, l.o.sr],
        lse_strides: [l.lse.sb, l.lse.sh],
    };
    acc.check()?;
    Ok(acc)
}

/// What can be known without the library of whether the cuDNN patch computes `launch`: its
/// split, whose call (with stand-in scratch addresses, 256-byte aligned like the scratch
/// allocator's) passes the fused kernels' checks ([`SdpaKey::validate`]: head dims multiples
/// of 8 up to 256, GQA, strides); or why not. Whether the loaded library builds a plan for it
/// is [`cudnn_choice`]'s question.
///
/// [`SdpaKey::validate`]: mercury_kernels::cuda::cudnn::SdpaKey::validate
pub fn cudnn_host_check(launch: &AttnLaunch) -> std::result::Result<CudnnSplit, String> {
    let split = cudnn_split(launch).map_err(|e| e.to_string())?;
    if let Some(call) = &split.call {
        let key = probe(call)
            .key(Route::Composite)
            .map_err(|e| e.to_string())?;
        key.validate()
            .map_err(|m| format!("cuDNN attention {key}: {m}"))?;
    }
    Ok(split)
}

/// `call` with stand-in O and Stats addresses (the executor points them at scratch later).
fn probe(call: &SdpaCall) -> SdpaCall {
    let mut p = *call;
    p.o.ptr = 256;
    p.stats.ptr = 256;
    p
}

/// Whether the cuDNN patch computes `launch`: its split, or why not ([`cudnn_host_check`],
/// then the loaded library's plan for it, built and cached here).
pub fn cudnn_choice(
    cudnn: &CudnnAttention,
    launch: &AttnLaunch,
) -> std::result::Result<CudnnSplit, String> {
    let split = cudnn_host_check(launch)?;
    if let Some(call) = &split.call {
        cudnn.support(&probe(call))?;
    }
    Ok(split)
}

/// Enqueues the cuDNN form of an attention launch (see [`CudnnSplit`]).
///
/// # Safety
/// The launch's tensors must be live device memory of the stream's context.
pub(super) unsafe fn enqueue_cudnn_attention(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    split: &CudnnSplit,
    accumulate: bool,
) -> Result<()> {
    let acc = &split.acc;
    if let Some(d) = split.direct.as_deref().filter(|d| d.writes_output) {
        // The output and lse buffers themselves (a block that overwrites, no masked rows).
        let c = &d.call;
        let ws_bytes = cudnn.prepare(c)?.max(256);
        let mut c = *c;
        if d.stats_scratch {
            let rows = c.b * c.hq * c.sq;
            c.stats = Tensor4::dense(cx.scratch.take(rows * 4)?, [c.b, c.hq, c.sq, 1]);
        }
        let ws = cx.scratch.take(ws_bytes)?;
        // SAFETY: q/k/v and O/Stats address bound memory the executor checked
        // (`CudaExecutor::apply_direct`) or this stream's scratch.
        unsafe { cudnn.forward_ws(cx.stream, &c, ws, ws_bytes)? };
        return Ok(());
    }
    // Inputs read where they are bound (O and Stats still go to the part or scratch).
    let call = match split.direct.as_deref() {
        Some(d) => split.call.map(|c| SdpaCall {
            q: d.call.q,
            k: d.call.k,
            v: d.call.v,
            ..c
        }),
        None => split.call,
    };
    let call = call.as_ref();
    if let Some(ps) = &split.part {
        let (_, part_l) = ps.addrs();
        if split.masked > 0 {
            // Rows that see no key keep lse -inf in the part (cuDNN writes the others).
            // SAFETY: the part's lse holds b * hq * sq f32.
            unsafe {
                cx.dk.fill_f32(
                    cx.stream,
                    part_l,
                    f32::NEG_INFINITY,
                    acc.b * acc.hq * acc.sq,
                )?
            };
        }
        if let Some(call) = call {
            let ws_bytes = cudnn.prepare(call)?.max(256);
            let ws = cx.scratch.take(ws_bytes)?;
            // SAFETY: q/k/v per the caller; O and Stats address the part (set when the
            // executor was built), sized for the accumulator's rows.
            unsafe { cudnn.forward_ws(cx.stream, call, ws, ws_bytes)? };
        }
        if let Some((n, overwrite)) = ps.merge {
            // SAFETY: every part of the group was written by the blocks before this one on
            // this stream (parts of blocks that saw no key hold lse -inf).
            unsafe {
                cx.dk.attn_merge_parts(
                    cx.stream,
                    acc,
                    (ps.o_base, ps.l_base),
                    (n, ps.o_stride, ps.l_stride),
                    overwrite,
                )?
            };
        }
        return Ok(());
    }
    if let Some(call) = call {
        let rows = acc.b * acc.hq * (acc.sq - split.masked);
        let ws_bytes = cudnn.prepare(call)?.max(256);
        let o_part = cx.scratch.take(rows * acc.d * 2)?;
        let lse_part = cx.scratch.take(rows * 4)?;
        let ws = cx.scratch.take(ws_bytes)?;
        let mut c = *call;
        c.o.ptr = o_part;
        c.stats.ptr = lse_part;
        // SAFETY: q/k/v per the caller, O and Stats dense in this stream's scratch, sized above.
        unsafe {
            cudnn.forward_ws(cx.stream, &c, ws, ws_bytes)?;
            cx.dk.attn_merge(
                cx.stream,
                &acc.skip_rows(split.masked),
                o_part,
                lse_part,
                !accumulate,
            )?;
        }
    }
    if split.masked > 0 && !accumulate {
        let n = acc.b * acc.hq * split.masked;
        let ninf = cx.scratch.take(n * 4)?;
        // SAFETY: `ninf` holds n f32 of scratch; with lse_part = -inf the merge writes o = 0
        // and lse = -inf without reading o_part.
        unsafe {
            cx.dk.fill_f32(cx.stream, ninf, f32::NEG_INFINITY, n)?;
            cx.dk
                .attn_merge(cx.stream, &acc.first_rows(split.masked), ninf, ninf, true)?;
        }
    }
    Ok(())
}
