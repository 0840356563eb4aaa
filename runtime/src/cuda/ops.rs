//! Compute-stream operations: resolution of a plan's `ComputeOp`s against the slot addresses
//! (shapes, dtypes, strides and alignment are checked once, before anything runs), and their
//! launch on a rank's compute stream.

use super::device_kernels::{AttnAcc, DeviceKernels};
use super::error::{Result, RuntimeError};
use super::layout::as_matrix;
use super::mem::{copy, operand, write_back, CopyCx, Loc, MemTable};
use cudarc::driver::CudaStream;
use mercury_kernels::cpu::{AttnDims, AttnParams};
use mercury_kernels::cuda::cudnn::IoType;
use mercury_kernels::cuda::{
    AttentionPatch, AttnLaunch, CudnnAttention, ElemType, GemmPatch, GemmSpec, GemmWorkspace,
    SdpaCall, Strided3, Tensor4,
};
use mercury_plan::{CombineKind, ComputeOp, DType, PatchKind, View};

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
}

/// A deferred block's place in its group's part buffer. Parts are `[b, hq, sq, d]` bf16 O and
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
        dv: d.d,
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
        o: Tensor4::dense(0, [d.b, d.hq, rows, d.d]),
        stats: Tensor4::dense(0, [d.b, d.hq, rows, 1]),
        scale: p.scale as f32,
        causal_delta: p.causal.then_some(delta + masked as i64),
    });
    let acc = AttnAcc {
        o: l.o.ptr,
        lse: l.lse.ptr,
        b: d.b,
        hq: d.hq,
        sq: d.sq,
        d: d.d,
        o_strides: [l.o.sb, l.o.sh, l.o.sr],
        lse_strides: [l.lse.sb, l.lse.sh],
    };
    acc.check()?;
    Ok(CudnnSplit {
        masked,
        call,
        acc,
        part: None,
    })
}

/// Whether the cuDNN patch computes `launch`: its split, or why not.
pub fn cudnn_choice(
    cudnn: &CudnnAttention,
    launch: &AttnLaunch,
) -> std::result::Result<CudnnSplit, String> {
    let split = cudnn_split(launch).map_err(|e| e.to_string())?;
    if let Some(call) = &split.call {
        // Stand-in scratch addresses (256-byte aligned, like the scratch allocator's).
        let mut probe = *call;
        probe.o.ptr = 256;
        probe.stats.ptr = 256;
        cudnn.support(&probe)?;
    }
    Ok(split)
}

/// Enqueues the cuDNN form of an attention launch (see [`CudnnSplit`]).
///
/// # Safety
/// The launch's tensors must be live device memory of the stream's context.
unsafe fn enqueue_cudnn_attention(
    cx: &mut CopyCx<'_>,
    cudnn: &CudnnAttention,
    split: &CudnnSplit,
    accumulate: bool,
) -> Result<()> {
    let acc = &split.acc;
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
        if let Some(call) = &split.call {
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
    if let Some(call) = &split.call {
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

fn unsupported(msg: String) -> RuntimeError {
    RuntimeError::Unsupported(msg)
}

fn elem_type(d: DType, what: &str) -> Result<ElemType> {
    match d {
        DType::BF16 => Ok(ElemType::BF16),
        DType::F16 => Ok(ElemType::F16),
        DType::F32 => Ok(ElemType::F32),
        DType::F64 => Err(unsupported(format!("{what}: f64 operands on the GPU"))),
    }
}

fn mat_operand(mem: &MemTable, rank: usize, view: &View) -> Result<MatOperand> {
    let s = mem.slot(rank, view.slot)?;
    let loc = mem.loc(rank, view)?;
    if let Some(m) = as_matrix(&s.shape, &view.region) {
        return Ok(MatOperand {
            ptr: Some(s.ptr + (m.offset * s.dtype.size_bytes()) as u64),
            rows: m.rows,
            cols: m.cols,
            ld: m.ld,
            loc,
        });
    }
    let ext = &view.region.extent;
    let first = ext
        .iter()
        .take_while(|e| **e == 1)
        .count()
        .min(ext.len() - 2.min(ext.len()));
    let logical = &ext[first..];
    if logical.len() != 2 {
        return Err(unsupported(format!(
            "gemm view {} of slot shape {:?} is not 2-D after dropping leading unit dims",
            view.region, s.shape
        )));
    }
    Ok(MatOperand {
        ptr: None,
        rows: logical[0],
        cols: logical[1],
        ld: logical[1],
        loc,
    })
}

fn strided<const R: usize>(
    mem: &MemTable,
    rank: usize,
    view: &View,
    what: &str,
) -> Result<([usize; R], Strided3, DType)> {
    let s = mem.slot(rank, view.slot)?;
    let (off, e, st) = super::layout::as_rank::<R>(&s.shape, &view.region).ok_or_else(|| {
        unsupported(format!(
            "attention {what} view {} of slot shape {:?} is not a rank-{R} tensor",
            view.region, s.shape
        ))
    })?;
    let t = Strided3 {
        ptr: s.ptr + (off * s.dtype.size_bytes()) as u64,
        sb: st[0] as i64,
        sh: st[1] as i64,
        sr: st[2] as i64,
    };
    Ok((e, t, s.dtype))
}

/// Resolves one compute op of `rank`.
pub fn resolve(mem: &MemTable, rank: usize, op: &ComputeOp) -> Result<ComputeLaunch> {
    match op {
        ComputeOp::Patch {
            patch,
            inputs,
            outputs,
        } => match patch {
            PatchKind::Gemm { accumulate } => {
                if inputs.len() != 2 || outputs.len() != 1 {
                    return Err(RuntimeError::Schedule(format!(
                        "gemm takes 2 inputs and 1 output, got {} / {}",
                        inputs.len(),
                        outputs.len()
                    )));
                }
                let a = mat_operand(mem, rank, &inputs[0])?;
                let b = mat_operand(mem, rank, &inputs[1])?;
                let c = mat_operand(mem, rank, &outputs[0])?;
                if a.cols != b.rows || c.rows != a.rows || c.cols != b.cols {
                    return Err(RuntimeError::Schedule(format!(
                        "gemm shapes disagree: a {}x{}, b {}x{}, c {}x{}",
                        a.rows, a.cols, b.rows, b.cols, c.rows, c.cols
                    )));
                }
                if a.loc.dtype != b.loc.dtype {
                    return Err(unsupported(format!(
                        "gemm with a {} and b {}",
                        a.loc.dtype.name(),
                        b.loc.dtype.name()
                    )));
                }
                let spec = GemmSpec {
                    m: a.rows,
                    n: b.cols,
                    k: a.cols,
                    lda: a.ld,
                    ldb: b.ld,
                    ldc: c.ld,
                    in_type: elem_type(a.loc.dtype, "gemm")?,
                    out_type: elem_type(c.loc.dtype, "gemm")?,
                    accumulate: *accumulate,
                };
                spec.validate()?;
                Ok(ComputeLaunch::Gemm { spec, a, b, c })
            }
            PatchKind::Attention {
                causal,
                scale,
                q_offset,
                k_offset,
                accumulate,
            } => {
                if inputs.len() != 3 || outputs.len() != 2 {
                    return Err(RuntimeError::Schedule(format!(
                        "attention takes [q, k, v] -> [o, lse], got {} / {}",
                        inputs.len(),
                        outputs.len()
                    )));
                }
                let (qe, q, qt) = strided::<4>(mem, rank, &inputs[0], "q")?;
                let (ke, k, kt) = strided::<4>(mem, rank, &inputs[1], "k")?;
                let (ve, v, vt) = strided::<4>(mem, rank, &inputs[2], "v")?;
                let (oe, o, ot) = strided::<4>(mem, rank, &outputs[0], "o")?;
                let (le, lse, lt) = strided::<3>(mem, rank, &outputs[1], "lse")?;
                if [qt, kt, vt] != [DType::BF16; 3] || ot != DType::F32 || lt != DType::F32 {
                    return Err(unsupported(format!(
                        "attention patch needs bf16 q/k/v and f32 o/lse, got {}/{}/{} -> {}/{}",
                        qt.name(),
                        kt.name(),
                        vt.name(),
                        ot.name(),
                        lt.name()
                    )));
                }
                if ke != ve
                    || oe != qe
                    || ke[0] != qe[0]
                    || ke[3] != qe[3]
                    || le != [qe[0], qe[1], qe[2]]
                {
                    return Err(RuntimeError::Schedule(format!(
                        "attention shapes disagree: q {qe:?} k {ke:?} v {ve:?} o {oe:?} lse {le:?}"
                    )));
                }
                let launch = AttnLaunch {
                    dims: AttnDims {
                        b: qe[0],
                        hq: qe[1],
                        hk: ke[1],
                        sq: qe[2],
                        sk: ke[2],
                        d: qe[3],
                    },
                    params: AttnParams {
                        causal: *causal,
                        scale: *scale,
                        q_offset: *q_offset,
                        k_offset: *k_offset,
                    },
                    q,
                    k,
                    v,
                    o,
                    lse,
                    // The kernel merges into (o, lse) in its epilogue: no LseMerge pass, no
                    // temporary.
                    accumulate: *accumulate,
                };
                launch.validate()?;
                Ok(ComputeLaunch::Attention {
                    launch,
                    via: AttnVia::Undecided,
                })
            }
        },
        ComputeOp::Combine { kind, acc, part } => match kind {
            CombineKind::Add => {
                if acc.len() != part.len() {
                    return Err(RuntimeError::Schedule(format!(
                        "add combine of {} accumulators and {} parts",
                        acc.len(),
                        part.len()
                    )));
                }
                let mut pairs = Vec::with_capacity(acc.len());
                for (a, p) in acc.iter().zip(part) {
                    let (la, lp) = (mem.loc(rank, a)?, mem.loc(rank, p)?);
                    check_f32(&la, "add accumulator")?;
                    check_f32(&lp, "add part")?;
                    if la.reg.numel() != lp.reg.numel() {
                        return Err(RuntimeError::Schedule(format!(
                            "add of {} elements into {}",
                            lp.reg.numel(),
                            la.reg.numel()
                        )));
                    }
                    pairs.push((la, lp));
                }
                Ok(ComputeLaunch::Add(pairs))
            }
            CombineKind::LseMerge => {
                let (o_acc, lse_acc, o_part, lse_part, rows, d) =
                    lse_operands(mem, rank, acc, part)?;
                Ok(ComputeLaunch::LseMerge {
                    o_acc,
                    lse_acc,
                    o_part,
                    lse_part,
                    rows,
                    d,
                })
            }
        },
        ComputeOp::Copy { src, dst } => {
            let (s, d) = (mem.loc(rank, src)?, mem.loc(rank, dst)?);
            check_copy(&s, &d)?;
            Ok(ComputeLaunch::Copy { src: s, dst: d })
        }
        ComputeOp::Tile { .. } => Err(unsupported(
            "generated tile code (compute ops) does not run on the CUDA backend yet".into(),
        )),
    }
}

/// Element count and dtype compatibility of a copy.
pub fn check_copy(s: &Loc, d: &Loc) -> Result<()> {
    if s.reg.numel() != d.reg.numel() {
        return Err(RuntimeError::Schedule(format!(
            "copy of {} elements into {}",
            s.reg.numel(),
            d.reg.numel()
        )));
    }
    let ok = s.dtype == d.dtype
        || matches!(
            (s.dtype, d.dtype),
            (DType::F32, DType::BF16) | (DType::BF16, DType::F32)
        );
    if !ok {
        return Err(unsupported(format!(
            "copy converting {} to {}",
            s.dtype.name(),
            d.dtype.name()
        )));
    }
    Ok(())
}

/// Requires an f32 location.
pub fn check_f32(l: &Loc, what: &str) -> Result<()> {
    if l.dtype != DType::F32 {
        return Err(unsupported(format!(
            "{what} is {}, combine kernels are f32",
            l.dtype.name()
        )));
    }
    Ok(())
}

/// The four locations of an lse merge (`[o, lse]` each) plus rows and row width.
pub fn lse_operands(
    mem: &MemTable,
    rank: usize,
    acc: &[View],
    part: &[View],
) -> Result<(Loc, Loc, Loc, Loc, usize, usize)> {
    if acc.len() != 2 || part.len() != 2 {
        return Err(RuntimeError::Schedule(
            "lse merge needs [o, lse] for the accumulator and the part".into(),
        ));
    }
    let o_acc = mem.loc(rank, &acc[0])?;
    let lse_acc = mem.loc(rank, &acc[1])?;
    let o_part = mem.loc(rank, &part[0])?;
    let lse_part = mem.loc(rank, &part[1])?;
    lse_shape(&o_acc, &lse_acc, &o_part, &lse_part)
        .map(|(r, d)| (o_acc, lse_acc, o_part, lse_part, r, d))
}

/// Rows and width of an lse merge, checking types and element counts.
pub fn lse_shape(
    o_acc: &Loc,
    lse_acc: &Loc,
    o_part: &Loc,
    lse_part: &Loc,
) -> Result<(usize, usize)> {
    for (l, w) in [
        (o_acc, "o accumulator"),
        (lse_acc, "lse accumulator"),
        (o_part, "o part"),
        (lse_part, "lse part"),
    ] {
        check_f32(l, w)?;
    }
    let rows = lse_acc.reg.numel();
    if rows == 0 || lse_part.reg.numel() != rows || !o_acc.reg.numel().is_multiple_of(rows) {
        return Err(RuntimeError::Schedule(format!(
            "lse merge: {} lse rows vs {} part rows, {} o elements",
            rows,
            lse_part.reg.numel(),
            o_acc.reg.numel()
        )));
    }
    if o_part.reg.numel() != o_acc.reg.numel() {
        return Err(RuntimeError::Schedule(format!(
            "lse merge: o part has {} elements, accumulator {}",
            o_part.reg.numel(),
            o_acc.reg.numel()
        )));
    }
    Ok((rows, o_acc.reg.numel() / rows))
}

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
        cx.dk.add_f32(cx.stream, a.ptr, p.ptr, acc.reg.numel())?;
        write_back(cx, &a, acc)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::mem::SlotInfo;
    use mercury_plan::Region;

    fn v(slot: usize, off: &[usize], ext: &[usize]) -> View {
        View {
            slot,
            region: Region {
                offset: off.to_vec(),
                extent: ext.to_vec(),
            },
        }
    }

    fn table() -> MemTable {
        let s = |ptr, dtype, shape: &[usize]| SlotInfo {
            ptr,
            dtype,
            shape: shape.to_vec(),
        };
        MemTable {
            ranks: vec![vec![
                s(0x10000, DType::BF16, &[64, 32]),          // 0: a
                s(0x20000, DType::BF16, &[32, 48]),          // 1: b
                s(0x30000, DType::F32, &[2, 64, 48]),        // 2: c (two tiles)
                s(0x40000, DType::BF16, &[1, 4, 256, 128]),  // 3: q
                s(0x80000, DType::BF16, &[1, 2, 512, 128]),  // 4: k
                s(0x100000, DType::BF16, &[1, 2, 512, 128]), // 5: v
                s(0x200000, DType::F32, &[1, 4, 256, 128]),  // 6: o
                s(0x400000, DType::F32, &[1, 4, 256]),       // 7: lse
                s(0x500000, DType::F32, &[4, 100]),          // 8: f32 scratch
            ]],
            ..MemTable::default()
        }
    }

    #[test]
    fn gemm_resolution() {
        let t = table();
        let op = ComputeOp::Patch {
            patch: PatchKind::Gemm { accumulate: true },
            inputs: vec![v(0, &[0, 0], &[64, 32]), v(1, &[0, 0], &[32, 48])],
            outputs: vec![v(2, &[1, 0, 0], &[1, 64, 48])],
        };
        match resolve(&t, 0, &op).unwrap() {
            ComputeLaunch::Gemm { spec, c, .. } => {
                assert_eq!((spec.m, spec.n, spec.k), (64, 48, 32));
                assert_eq!((spec.lda, spec.ldb, spec.ldc), (32, 48, 48));
                assert_eq!(spec.out_type, ElemType::F32);
                assert!(spec.accumulate);
                assert_eq!(c.ptr, Some(0x30000 + 64 * 48 * 4));
            }
            other => panic!("{other:?}"),
        }
        // Column sub-block of b: ldb stays 48.
        let op = ComputeOp::Patch {
            patch: PatchKind::Gemm { accumulate: false },
            inputs: vec![v(0, &[0, 0], &[64, 32]), v(1, &[0, 16], &[32, 16])],
            outputs: vec![v(2, &[0, 0, 0], &[1, 64, 16])],
        };
        match resolve(&t, 0, &op).unwrap() {
            ComputeLaunch::Gemm { spec, b, .. } => {
                assert_eq!((spec.n, spec.ldb, spec.ldc), (16, 48, 48));
                assert_eq!(b.ptr, Some(0x20000 + 16 * 2));
            }
            other => panic!("{other:?}"),
        }
        // Inner dimensions disagree.
        let bad = ComputeOp::Patch {
            patch: PatchKind::Gemm { accumulate: false },
            inputs: vec![v(0, &[0, 0], &[64, 16]), v(1, &[0, 0], &[32, 48])],
            outputs: vec![v(2, &[0, 0, 0], &[1, 64, 48])],
        };
        assert!(matches!(
            resolve(&t, 0, &bad),
            Err(RuntimeError::Schedule(_))
        ));
    }

    #[test]
    fn attention_resolution() {
        let t = table();
        let op = ComputeOp::Patch {
            patch: PatchKind::Attention {
                causal: true,
                scale: 0.088,
                q_offset: 256,
                k_offset: 0,
                accumulate: false,
            },
            inputs: vec![
                v(3, &[0, 0, 128, 0], &[1, 4, 128, 128]),
                v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
                v(5, &[0, 0, 0, 0], &[1, 2, 512, 128]),
            ],
            outputs: vec![
                v(6, &[0, 0, 128, 0], &[1, 4, 128, 128]),
                v(7, &[0, 0, 128], &[1, 4, 128]),
            ],
        };
        match resolve(&t, 0, &op).unwrap() {
            ComputeLaunch::Attention { launch: a, via } => {
                assert_eq!(via, AttnVia::Undecided);
                assert_eq!(
                    (a.dims.hq, a.dims.hk, a.dims.sq, a.dims.sk),
                    (4, 2, 128, 512)
                );
                // Tile view: base moved by 128 rows, head stride of the whole slot.
                assert_eq!(a.q.ptr, 0x40000 + 128 * 128 * 2);
                assert_eq!((a.q.sh, a.q.sr), (256 * 128, 128));
                assert_eq!(a.lse.ptr, 0x400000 + 128 * 4);
                assert_eq!((a.lse.sh, a.lse.sr), (256, 1));
                assert!(a.params.causal);
                assert!(!a.accumulate);
            }
            other => panic!("{other:?}"),
        }
        // Accumulating: the same launch, merging into the outputs.
        let acc = ComputeOp::Patch {
            patch: PatchKind::Attention {
                causal: false,
                scale: 0.088,
                q_offset: 0,
                k_offset: 0,
                accumulate: true,
            },
            inputs: vec![
                v(3, &[0, 0, 0, 0], &[1, 4, 256, 128]),
                v(4, &[0, 0, 256, 0], &[1, 2, 256, 128]),
                v(5, &[0, 0, 256, 0], &[1, 2, 256, 128]),
            ],
            outputs: vec![
                v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
                v(7, &[0, 0, 0], &[1, 4, 256]),
            ],
        };
        match resolve(&t, 0, &acc).unwrap() {
            ComputeLaunch::Attention { launch: a, .. } => {
                assert!(a.accumulate);
                assert_eq!((a.dims.sq, a.dims.sk), (256, 256));
                assert_eq!(a.k.ptr, 0x80000 + 256 * 128 * 2);
                assert_eq!(a.o.ptr, 0x200000);
            }
            other => panic!("{other:?}"),
        }
        // f32 q is rejected with a clear message.
        let bad = ComputeOp::Patch {
            patch: PatchKind::Attention {
                causal: false,
                scale: 1.0,
                q_offset: 0,
                k_offset: 0,
                accumulate: false,
            },
            inputs: vec![
                v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
                v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
                v(5, &[0, 0, 0, 0], &[1, 2, 512, 128]),
            ],
            outputs: vec![
                v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
                v(7, &[0, 0, 0], &[1, 4, 256]),
            ],
        };
        assert!(matches!(
            resolve(&t, 0, &bad),
            Err(RuntimeError::Unsupported(_))
        ));
    }

    /// The cuDNN form of causal blocks: which rows see no key, the shift cuDNN gets, and the
    /// views of q and of the accumulator.
    #[test]
    fn cudnn_split_of_causal_blocks() {
        use mercury_kernels::cpu::{AttnDims, AttnParams};
        let launch = |q_offset: usize, k_offset: usize, causal: bool| AttnLaunch {
            dims: AttnDims {
                b: 2,
                hq: 4,
                hk: 2,
                sq: 100,
                sk: 64,
                d: 128,
            },
            params: AttnParams {
                causal,
                scale: 0.1,
                q_offset,
                k_offset,
            },
            q: Strided3::dense(0x10000, 4, 300, 128),
            k: Strided3::dense(0x20000, 2, 64, 128),
            v: Strided3::dense(0x30000, 2, 64, 128),
            o: Strided3::dense(0x40000, 4, 300, 128),
            lse: Strided3::dense(0x50000, 4, 300, 1),
            accumulate: true,
        };
        // Keys 30 positions after the queries: the first 30 rows see nothing.
        let s = cudnn_split(&launch(0, 30, true)).unwrap();
        assert_eq!(s.masked, 30);
        let c = s.call.unwrap();
        assert_eq!((c.sq, c.causal_delta), (70, Some(0)));
        assert_eq!(c.q.ptr, 0x10000 + 30 * 128 * 2);
        assert_eq!(c.q.strides, [4 * 300 * 128, 300 * 128, 128, 1]);
        assert_eq!(s.acc.skip_rows(30).o, 0x40000 + 30 * 128 * 4);
        assert_eq!(s.acc.skip_rows(30).lse, 0x50000 + 30 * 4);
        // Queries after the keys: a shifted diagonal, nothing masked.
        let s = cudnn_split(&launch(40, 0, true)).unwrap();
        assert_eq!((s.masked, s.call.unwrap().causal_delta), (0, Some(40)));
        // Keys entirely in the future: every row masked, no cuDNN call.
        let s = cudnn_split(&launch(0, 500, true)).unwrap();
        assert_eq!((s.masked, s.call), (100, None));
        // Non-causal: offsets do not matter.
        let s = cudnn_split(&launch(0, 500, false)).unwrap();
        assert_eq!((s.masked, s.call.unwrap().causal_delta), (0, None));
        // A misaligned accumulator is refused (the merge kernels move 16 bytes at a time).
        let mut l = launch(0, 0, false);
        l.o.ptr += 8;
        assert!(cudnn_split(&l).is_err());
    }

    /// The ring's blocks into one accumulator form one deferral group per rank; another
    /// operation touching the accumulator in between cuts the group.
    #[test]
    fn ring_blocks_form_deferral_groups() {
        let plan = crate::cuda::test_plans::ring_attention(4, (1, 4, 2), 800, 128, false);
        for prog in &plan.ranks {
            let g = defer_groups(prog, |_, _| true, MAX_DEFERRED_PARTS);
            assert_eq!(g.len(), 1, "rank {}: {g:?}", prog.rank);
            assert_eq!(g[0].len(), 4);
            // Chunks of at most 3; the single leftover block merges on its own.
            let g = defer_groups(prog, |_, _| true, 3);
            assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![3]);
            // Blocks the executor does not run on cuDNN are not deferred.
            assert!(defer_groups(prog, |si, _| si == 0, 8).is_empty());
        }
        // A copy out of the accumulator between two blocks ends the group there.
        let mut prog = plan.ranks[0].clone();
        let blocks: Vec<usize> = (0..prog.stages.len())
            .filter(|s| {
                matches!(
                    prog.stages[*s].compute.first(),
                    Some(ComputeOp::Patch { .. })
                )
            })
            .collect();
        assert_eq!(blocks.len(), 4);
        let (o, _) = match &prog.stages[blocks[1]].compute[0] {
            ComputeOp::Patch { outputs, .. } => (outputs[0].clone(), outputs[1].clone()),
            other => panic!("{other:?}"),
        };
        prog.stages[blocks[1]].compute.push(ComputeOp::Copy {
            src: o.clone(),
            dst: o,
        });
        let g = defer_groups(&prog, |_, _| true, 8);
        assert_eq!(
            g,
            vec![
                vec![(blocks[0], 0), (blocks[1], 0)],
                vec![(blocks[2], 0), (blocks[3], 0)]
            ]
        );
    }

    #[test]
    fn combine_resolution() {
        let t = table();
        let op = ComputeOp::Combine {
            kind: CombineKind::LseMerge,
            acc: vec![
                v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
                v(7, &[0, 0, 0], &[1, 4, 256]),
            ],
            part: vec![
                v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
                v(7, &[0, 0, 0], &[1, 4, 256]),
            ],
        };
        match resolve(&t, 0, &op).unwrap() {
            ComputeLaunch::LseMerge { rows, d, .. } => assert_eq!((rows, d), (1024, 128)),
            other => panic!("{other:?}"),
        }
        let add_bf16 = ComputeOp::Combine {
            kind: CombineKind::Add,
            acc: vec![v(0, &[0, 0], &[4, 32])],
            part: vec![v(0, &[4, 0], &[4, 32])],
        };
        assert!(matches!(
            resolve(&t, 0, &add_bf16),
            Err(RuntimeError::Unsupported(_))
        ));
        let add = ComputeOp::Combine {
            kind: CombineKind::Add,
            acc: vec![v(8, &[0, 0], &[2, 100])],
            part: vec![v(8, &[2, 0], &[2, 100])],
        };
        assert!(matches!(resolve(&t, 0, &add).unwrap(), ComputeLaunch::Add(p) if p.len() == 1));
        let copy_cast = ComputeOp::Copy {
            src: v(8, &[0, 0], &[1, 100]),
            dst: v(1, &[0, 0], &[2, 48]),
        };
        assert!(resolve(&t, 0, &copy_cast).is_err());
    }
}
