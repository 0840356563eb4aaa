//! Attention patch selection: the per-process caches of the cuDNN and NVRTC patches, the
//! choice of a patch per block, and the part buffers of deferred-merge groups.

use super::{alloc, AttnBackend, DeviceRes, ExecOptions};
use crate::cuda::device_kernels::AttnAcc;
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::ops::{self, AttnVia, ComputeLaunch};
use cudarc::driver::{CudaContext, CudaStream};
use mercury_kernels::cuda::DeviceBuffer;
use mercury_kernels::cuda::{
    validate_f32, AttentionF32Patch, AttentionPatch, AttnVariant, CudnnAttention, Tensor4,
};
use mercury_plan::RankProgram;
use std::sync::Arc;

/// The cuDNN patch of `ctx` (handle and plan cache), made once per process and context: plans
/// take tens of milliseconds to a second to build, and every executor of the process shares
/// them. A failure (no usable cuDNN) is remembered too.
pub(super) fn cudnn_patch(
    ctx: &Arc<CudaContext>,
) -> std::result::Result<Arc<CudnnAttention>, String> {
    type Cache = Vec<(usize, std::result::Result<Arc<CudnnAttention>, String>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut cache = CACHE
        .lock()
        .map_err(|_| "cuDNN patch cache poisoned".to_string())?;
    if let Some((_, p)) = cache.iter().find(|(k, _)| *k == key) {
        return p.clone();
    }
    let p = CudnnAttention::new(ctx)
        .map(Arc::new)
        .map_err(|e| e.to_string());
    cache.push((key, p.clone()));
    p
}

/// The attention patch of `ctx` in variant `v`, compiled once per process: NVRTC compilation
/// and module load of the attention kernels take seconds, and every executor would repeat
/// them (mercury-run builds two, the multi-device checks dozens). The cache keeps the module,
/// hence the context, alive for the life of the process.
pub(super) fn attention_patch(
    ctx: &Arc<CudaContext>,
    v: AttnVariant,
) -> Result<Arc<AttentionPatch>> {
    type Cache = Vec<(usize, AttnVariant, Arc<AttentionPatch>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut cache = CACHE
        .lock()
        .map_err(|_| RuntimeError::Unsupported("attention patch cache poisoned".into()))?;
    if let Some((_, _, p)) = cache.iter().find(|(k, w, _)| *k == key && *w == v) {
        return Ok(p.clone());
    }
    let mut a = AttentionPatch::new(ctx)?;
    a.set_variant(v);
    let a = Arc::new(a);
    cache.push((key, v, a.clone()));
    Ok(a)
}

/// The f32 attention patch of `ctx`, compiled once per process (as [`attention_patch`]).
pub(super) fn attention_f32_patch(ctx: &Arc<CudaContext>) -> Result<Arc<AttentionF32Patch>> {
    type Cache = Vec<(usize, Arc<AttentionF32Patch>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut cache = CACHE
        .lock()
        .map_err(|_| RuntimeError::Unsupported("f32 attention patch cache poisoned".into()))?;
    if let Some((_, p)) = cache.iter().find(|(k, _)| *k == key) {
        return Ok(p.clone());
    }
    let a = Arc::new(AttentionF32Patch::new(ctx)?);
    cache.push((key, a.clone()));
    Ok(a)
}

/// Largest part buffer one deferred merge group may take.
const MAX_PART_BYTES: usize = 4 << 30;

/// The part buffer of a deferred-merge group of `n` blocks into `a`: elements between two
/// parts' O (bf16) and lse (f32), and the bytes; `None` past [`MAX_PART_BYTES`].
fn part_layout(a: &AttnAcc, n: usize) -> Option<(usize, usize, usize)> {
    let round = |x: usize, to: usize| x.div_ceil(to) * to;
    let o_stride = round(a.b * a.hq * a.sq * a.d, 128);
    let l_stride = round(a.b * a.hq * a.sq, 64);
    let bytes = n * (o_stride * 2 + l_stride * 4);
    (bytes <= MAX_PART_BYTES).then_some((o_stride, l_stride, bytes))
}

/// Ring steps of masked blocks that may run on cuDNN's variable-sequence path
/// (`MaskedSplit::ragged_arrays`) into one accumulator: as [`defer_group`], each keeps a part
/// in a buffer of its group and the group's last block merges them all; whether a batch uses
/// the parts is decided per group by `set_documents` (every block on cuDNN or empty). Returns
/// the part buffers.
fn defer_masked(
    stream: &Arc<CudaStream>,
    prog: &RankProgram,
    stages: &mut [Vec<ComputeLaunch>],
) -> Result<Vec<DeviceBuffer>> {
    let member = |stages: &[Vec<ComputeLaunch>], (si, oi): (usize, usize)| match stages
        .get(si)
        .and_then(|st| st.get(oi))
    {
        Some(ComputeLaunch::Attention {
            launch,
            via: AttnVia::Masked(split),
        }) if split.ragged_arrays.is_some() => ops::launch_acc(launch)
            .ok()
            .map(|acc| (launch.accumulate, acc)),
        _ => None,
    };
    let groups = ops::defer_groups(
        prog,
        |si, oi| member(stages, (si, oi)).is_some(),
        ops::MAX_DEFERRED_PARTS,
    );
    let mut bufs = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let Some((first_acc, a)) = member(stages, g[0]) else {
            continue;
        };
        if g.iter().any(|&m| member(stages, m).map(|x| x.1) != Some(a)) {
            continue;
        }
        let n = g.len();
        let Some((o_stride, l_stride, bytes)) = part_layout(&a, n) else {
            continue;
        };
        let (buf, base) = alloc(stream, bytes)?;
        stream
            .synchronize()
            .map_err(RuntimeError::driver("synchronize part allocation"))?;
        for (j, &(si, oi)) in g.iter().enumerate() {
            if let ComputeLaunch::Attention {
                via: AttnVia::Masked(split),
                ..
            } = &mut stages[si][oi]
            {
                split.part = Some((
                    gi,
                    ops::PartSlot {
                        index: j,
                        merge: (j + 1 == n).then_some((n, !first_acc)),
                        o_base: base,
                        l_base: base + (n * o_stride * 2) as u64,
                        o_stride,
                        l_stride,
                    },
                ));
            }
        }
        bufs.push(buf);
    }
    Ok(bufs)
}

/// Points the blocks `members` (stage, op) of one deferral group at a part buffer allocated on
/// `stream`'s device, checking that cuDNN takes every block with its new output; returns the
/// buffer, or `None` (blocks left merging one by one) when the parts would be too large or a
/// plan is refused.
fn defer_group(
    cudnn: &CudnnAttention,
    stream: &Arc<CudaStream>,
    stages: &mut [Vec<ComputeLaunch>],
    members: &[(usize, usize)],
) -> Result<Option<DeviceBuffer>> {
    let split_of = |stages: &[Vec<ComputeLaunch>], (si, oi): (usize, usize)| match &stages[si][oi] {
        ComputeLaunch::Attention {
            launch,
            via: AttnVia::Cudnn(split),
        } => Some((launch.accumulate, (**split).clone())),
        _ => None,
    };
    let Some((first_acc, first)) = split_of(stages, members[0]) else {
        return Ok(None);
    };
    let n = members.len();
    let a = first.acc;
    let Some((o_stride, l_stride, bytes)) = part_layout(&a, n) else {
        return Ok(None);
    };
    let (buf, base) = alloc(stream, bytes)?;
    // The compute streams use the buffer: finish the stream-ordered allocation first.
    stream
        .synchronize()
        .map_err(RuntimeError::driver("synchronize part allocation"))?;
    let (o_base, l_base) = (base, base + (n * o_stride * 2) as u64);
    let mut updated = Vec::with_capacity(n);
    for (j, &m) in members.iter().enumerate() {
        let Some((_, mut split)) = split_of(stages, m) else {
            return Ok(None);
        };
        if split.acc != a {
            return Ok(None);
        }
        let ps = ops::PartSlot {
            index: j,
            merge: (j + 1 == n).then_some((n, !first_acc)),
            o_base,
            l_base,
            o_stride,
            l_stride,
        };
        let (po, pl) = ps.addrs();
        if let Some(call) = &mut split.call {
            let (hq, sq, d, skip) = (a.hq as i64, a.sq as i64, a.d as i64, split.masked as u64);
            call.o = Tensor4 {
                ptr: po + skip * a.d as u64 * 2,
                strides: [hq * sq * d, sq * d, d, 1],
            };
            call.stats = Tensor4 {
                ptr: pl + skip * 4,
                strides: [hq * sq, sq, 1, 1],
            };
            if cudnn.support(call).is_err() {
                return Ok(None);
            }
        }
        split.part = Some(ps);
        updated.push((m, split));
    }
    for ((si, oi), split) in updated {
        if let ComputeLaunch::Attention { via, .. } = &mut stages[si][oi] {
            *via = AttnVia::Cudnn(Box::new(split));
        }
    }
    Ok(Some(buf))
}

/// Picks the patch of each attention block of one rank on `dev` ([`ops::attention_route`]): the
/// cuDNN patch where it takes the block, else the NVRTC kernel where it computes it (compiled
/// on first need; one warning per shape cuDNN refused); a block neither computes is an error.
/// With [`ExecOptions::defer_merges`], ring steps into one accumulator keep each block's part
/// and merge the group in one pass at its last block (reads every part once, the accumulator
/// once); returns the part buffers of those groups.
pub(super) fn choose_attention(
    dev: &mut DeviceRes,
    prog: &RankProgram,
    stages: &mut [Vec<ComputeLaunch>],
    opts: &ExecOptions,
    warnings: &mut Vec<String>,
) -> Result<Vec<DeviceBuffer>> {
    let mut parts = Vec::new();
    for op in stages.iter_mut().flatten() {
        let ComputeLaunch::Attention { launch, via } = op else {
            continue;
        };
        if let AttnVia::Masked(split) = via {
            parts.extend(super::masked::prepare_masked(dev, launch, split, opts)?);
            continue;
        }
        let cudnn = match &dev.cudnn {
            Some(c) => ops::cudnn_choice(c, launch),
            None if opts.attention == AttnBackend::Nvrtc => {
                Err("not used: the NVRTC kernel was asked for (--attention nvrtc)".into())
            }
            // Why the library did not load (the per-context cache keeps the reason).
            None => Err(cudnn_patch(&dev.ctx)
                .err()
                .unwrap_or_else(|| "not loaded".into())),
        };
        let nvrtc = launch.validate().map_err(|e| e.to_string());
        let f32 = validate_f32(launch).map_err(|e| e.to_string());
        let (choice, warning) = ops::attention_route(launch, cudnn, nvrtc, f32)?;
        if choice == AttnVia::Nvrtc && dev.attention.is_none() {
            dev.attention = Some(attention_patch(&dev.ctx, opts.attention_variant)?);
        }
        if choice == AttnVia::F32 && dev.attention_f32.is_none() {
            dev.attention_f32 = Some(attention_f32_patch(&dev.ctx)?);
        }
        if let Some(w) = warning.filter(|w| !warnings.contains(w)) {
            tracing::warn!("{w}");
            warnings.push(w);
        }
        *via = choice;
    }
    // Ring steps into one accumulator: keep each block's part and merge the group in one
    // pass at its last block (reads every part once, the accumulator once).
    if opts.defer_merges {
        parts.extend(defer_masked(&dev.stream, prog, stages)?);
    }
    if let Some(cudnn) = dev.cudnn.clone().filter(|_| opts.defer_merges) {
        let groups = ops::defer_groups(
            prog,
            |si, oi| {
                matches!(
                    stages.get(si).and_then(|st| st.get(oi)),
                    Some(ComputeLaunch::Attention {
                        via: AttnVia::Cudnn(_),
                        ..
                    })
                )
            },
            ops::MAX_DEFERRED_PARTS,
        );
        for g in groups {
            if let Some(buf) = defer_group(&cudnn, &dev.stream, stages, &g)? {
                parts.push(buf);
            }
        }
    }
    Ok(parts)
}
