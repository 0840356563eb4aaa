//! Resolution of a plan's `ComputeOp`s against the slot addresses: shapes, dtypes, strides
//! and alignment are checked once, before anything runs.

use super::{AttnVia, ComputeLaunch, MatOperand, TileLaunch, TileOperand};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::layout::{as_3d, as_matrix};
use crate::cuda::mem::{Loc, MemTable};
use mercury_kernels::cpu::{AttnDims, AttnParams};
use mercury_kernels::cuda::{AttnLaunch, ElemType, GemmEpilogue, GemmSpec, Strided3};
use mercury_plan::tile::{Instr, UnaryFn};
use mercury_plan::tile_kernel::{geometry, TileKernel, MAX_WORK_ITEMS};
use mercury_plan::{CombineKind, ComputeOp, DType, PatchKind, TileOp, View};

pub(super) fn unsupported(msg: String) -> RuntimeError {
    RuntimeError::Unsupported(msg)
}

pub(super) fn elem_type(d: DType, what: &str) -> Result<ElemType> {
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
    let (off, e, st) =
        crate::cuda::layout::as_rank::<R>(&s.shape, &view.region).ok_or_else(|| {
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
            PatchKind::Gemm {
                accumulate,
                epilogue,
            } => {
                if inputs.len() != 2 || outputs.len() != 1 {
                    return Err(RuntimeError::Schedule(format!(
                        "gemm takes 2 inputs and 1 output, got {} / {}",
                        inputs.len(),
                        outputs.len()
                    )));
                }
                let a = mat_operand(mem, rank, &inputs[0])?;
                let mut b = mat_operand(mem, rank, &inputs[1])?;
                let mut c = mat_operand(mem, rank, &outputs[0])?;
                // A matrix-vector product (B[k], C[m]: `mercury_plan::patch::gemm_dims` reads
                // a 1-D B as k x 1): a vector resolves as one row of unit stride; read it as
                // one column (k x 1, ld 1), and its product likewise (m x 1). Unambiguous
                // where k > 1: a 1 x k B fits no A of k > 1 columns otherwise.
                if b.rows == 1 && b.cols == a.cols && a.cols > 1 {
                    (b.rows, b.cols, b.ld) = (a.cols, 1, 1);
                    if c.rows == 1 && c.cols == a.rows {
                        (c.rows, c.cols, c.ld) = (a.rows, 1, 1);
                    }
                }
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
                    trans_a: false,
                    trans_b: false,
                    epilogue: match epilogue {
                        None => GemmEpilogue::None,
                        Some(UnaryFn::Gelu) => GemmEpilogue::Gelu,
                        Some(f) => {
                            return Err(unsupported(format!(
                                "gemm epilogue {f:?}: cuBLASLt's epilogues are GeLU (tanh) only"
                            )))
                        }
                    },
                };
                spec.validate()?;
                Ok(ComputeLaunch::Gemm { spec, a, b, c })
            }
            PatchKind::Attention {
                causal,
                scale,
                q_offset,
                k_offset,
                mask,
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
                // bf16 q/k/v: cuDNN or the bf16 NVRTC kernel; f32: the f32 kernel. Both give
                // f32 o/lse.
                let elem = match ([qt, kt, vt], [ot, lt]) {
                    ([DType::BF16, DType::BF16, DType::BF16], [DType::F32, DType::F32]) => {
                        Some(ElemType::BF16)
                    }
                    ([DType::F32, DType::F32, DType::F32], [DType::F32, DType::F32]) => {
                        Some(ElemType::F32)
                    }
                    _ => None,
                };
                let Some(elem) = elem else {
                    return Err(unsupported(format!(
                        "attention: {}: the GPU patches take bf16 q/k/v (cuDNN, the NVRTC \
                         kernel) or f32 q/k/v (the f32 kernel) and give f32 o/lse, got \
                         {}/{}/{} -> {}/{}",
                        super::ATTENTION_REFUSED,
                        qt.name(),
                        kt.name(),
                        vt.name(),
                        ot.name(),
                        lt.name()
                    )));
                };
                // q [b, hq, sq, d], k [b, hk, sk, d], v [b, hk, sk, dv], o [b, hq, sq, dv],
                // lse [b, hq, sq]: the value head dim may differ (multi-head latent attention).
                if ke[..3] != ve[..3]
                    || oe[..3] != qe[..3]
                    || ke[0] != qe[0]
                    || ke[3] != qe[3]
                    || oe[3] != ve[3]
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
                    dv: ve[3],
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
                    elem,
                    // The kernel merges into (o, lse) in its epilogue: no LseMerge pass, no
                    // temporary.
                    accumulate: *accumulate,
                    bounds: None,
                };
                // Which patch computes it (and whether any does) is decided when the executor
                // is built (`ops::attention_route`): cuDNN where it takes the shape, else the
                // NVRTC kernel where it can. A window or documents go to the masked path
                // (the NVRTC kernel under per-row key bounds, `masked.rs`).
                let via = if mask.is_none() {
                    AttnVia::Undecided
                } else {
                    AttnVia::Masked(Box::new(
                        super::MaskedSplit::new(&launch, *causal, *mask)
                            .map_err(|e| {
                                unsupported(format!(
                                    "attention {}: {}: {e}",
                                    super::attention_shape(&launch),
                                    super::ATTENTION_REFUSED
                                ))
                            })?,
                    ))
                };
                Ok(ComputeLaunch::Attention { launch, via })
            }
            PatchKind::AttentionBwd {
                causal,
                scale,
                q_offset,
                k_offset,
                mask,
                accumulate,
            } if mask.is_none() => super::resolve_attention_bwd(
                mem,
                rank,
                inputs,
                outputs,
                (*causal, *scale, *q_offset, *k_offset, *accumulate),
            )
            .map(|l| ComputeLaunch::AttentionBwd(Box::new(l))),
            PatchKind::AttentionBwd { mask, .. } => Err(unsupported(format!(
                "attention_bwd: a sliding window or document boundaries ({mask:?}) have no CUDA backward patch yet (issue 43 items 5-6; the forward has one); run it on the CPU executor (--backend cpu)"
            ))),
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
                    // A bf16 part is a partial sum that travelled in the output's precision.
                    if lp.dtype != DType::BF16 {
                        check_f32(&lp, "add part")?;
                    }
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
        ComputeOp::Tile {
            tile,
            inputs,
            output,
        } => resolve_tile(mem, rank, tile, inputs, output),
    }
}

/// A tile op: a matmul becomes a cuBLASLt GEMM (the GEMM patch's path, with the transposes),
/// an elementwise program or a row reduction a generated kernel over strided views. What has
/// no device code (a batched matmul, f64 operands, more than 2^31 work items, an output
/// overlapping an input it is not identical to) is refused here, before anything runs.
fn resolve_tile(
    mem: &MemTable,
    rank: usize,
    tile: &TileOp,
    inputs: &[View],
    output: &View,
) -> Result<ComputeLaunch> {
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|v| v.region.extent.clone()).collect();
    tile.check(&shapes, &output.region.extent)
        .map_err(|e| RuntimeError::Schedule(format!("tile op {}: {e}", tile.name())))?;
    if let TileOp::Matmul {
        transpose_a,
        transpose_b,
        outer,
    } = tile
    {
        if *outer {
            return Err(unsupported(
                "tile op matmul over both operands' batch dimensions (rows of every batch entry times per-head weights): no device code; run it on the CPU executor".to_string(),
            ));
        }
        return resolve_tile_matmul(mem, rank, inputs, output, *transpose_a, *transpose_b);
    }
    let mut dts = Vec::with_capacity(inputs.len());
    for v in inputs {
        dts.push(mem.slot(rank, v.slot)?.dtype);
    }
    let out_dt = mem.slot(rank, output.slot)?.dtype;
    let kernel = TileKernel::of(tile, &dts, out_dt).ok_or_else(|| {
        unsupported(format!(
            "tile op {} on {:?} -> {}: no device code for f64 operands",
            tile.name(),
            dts.iter().map(|d| d.name()).collect::<Vec<_>>(),
            out_dt.name()
        ))
    })?;
    let (dims, items) = match tile {
        TileOp::RowReduce { .. } => {
            let x = &inputs[0].region.extent;
            let g = geometry(x);
            (g, g[0] * g[1])
        }
        _ => {
            let g = geometry(&output.region.extent);
            (g, g[0] * g[1] * g[2])
        }
    };
    if items > MAX_WORK_ITEMS {
        return Err(unsupported(format!(
            "tile op {} over {items} work items: the generated kernels index in 32 bits \
             (at most {MAX_WORK_ITEMS}); tile the loop further",
            tile.name()
        )));
    }
    let [d0, d1, cols] = dims;
    // `target`: the operand's extents over the kernel's `[d0, d1, cols]`; a dimension of 1
    // where the kernel's is longer is broadcast (stride 0: a row operand's columns, a
    // trailing operand's leading dimensions).
    let operand = |v: &View, target: [usize; 3]| -> Result<TileOperand> {
        let loc = mem.loc(rank, v)?;
        let s = mem.slot(rank, v.slot)?;
        let direct = as_3d(&s.shape, &v.region, target).map(|(off, st)| {
            (
                s.ptr + (off * s.dtype.size_bytes()) as u64,
                st.map(|x| x as i64),
            )
        });
        // Dense strides of a packed copy (row-major over the target).
        let dense = [(target[1] * target[2]) as i64, target[2] as i64, 1];
        let packed = [0, 1, 2].map(|k| if target[k] == 1 { 0 } else { dense[k] });
        Ok(TileOperand {
            loc,
            direct,
            packed,
        })
    };
    let (out, ins) = match tile {
        TileOp::RowReduce { .. } => (
            operand(output, [d0, d1, 1])?,
            vec![operand(&inputs[0], dims)?],
        ),
        _ => {
            let trailing: &[usize] = match tile {
                TileOp::Elementwise { trailing, .. } => trailing,
                _ => &[],
            };
            let mut ins = Vec::with_capacity(inputs.len());
            for (i, v) in inputs.iter().enumerate() {
                let n = v.region.numel();
                let target = if trailing.contains(&i) {
                    if n == cols {
                        [1, 1, cols]
                    } else if n == d1 * cols {
                        [1, d1, cols]
                    } else if n == d0 * d1 * cols {
                        dims
                    } else {
                        return Err(unsupported(format!(
                            "tile op {}: trailing operand {i} of {n} elements spans more than the last two dimensions of the output {:?}; the generated kernels broadcast over at most the leading ones",
                            tile.name(),
                            output.region.extent
                        )));
                    }
                } else if n != d0 * d1 * cols {
                    [d0, d1, 1]
                } else {
                    dims
                };
                ins.push(operand(v, target)?);
            }
            (operand(output, dims)?, ins)
        }
    };
    // An output that overlaps an input is only safe when it is the same view (each element
    // is read and written by the same work item).
    for (i, x) in ins.iter().enumerate() {
        if x.loc.base == out.loc.base
            && x.loc.dev == out.loc.dev
            && x.loc.reg != out.loc.reg
            && x.loc.reg.offset < out.loc.reg.end()
            && out.loc.reg.offset < x.loc.reg.end()
        {
            return Err(unsupported(format!(
                "tile op {}: the output view overlaps input {i} without being the same view",
                tile.name()
            )));
        }
    }
    let masks = match tile {
        TileOp::Elementwise { program, .. } => program
            .iter()
            .filter_map(|i| match i {
                Instr::CausalMask {
                    row_offset,
                    col_offset,
                    ..
                } => Some((*row_offset as i64, *col_offset as i64)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(ComputeLaunch::Tile(Box::new(TileLaunch {
        name: kernel.name(),
        reduce: matches!(tile, TileOp::RowReduce { .. }),
        dims: dims.map(|x| x as i64),
        items,
        out,
        inputs: ins,
        masks,
    })))
}

/// A tile matmul on cuBLASLt: `a` and `b` (after dropping leading unit dimensions) must be
/// matrices, except that a non-transposed `a` may carry batch dimensions that merge into its
/// rows (a 2-D `b` is shared by every batch).
fn resolve_tile_matmul(
    mem: &MemTable,
    rank: usize,
    inputs: &[View],
    output: &View,
    ta: bool,
    tb: bool,
) -> Result<ComputeLaunch> {
    let logical = |v: &View| -> Vec<usize> {
        let e = &v.region.extent;
        let first = e
            .iter()
            .take_while(|x| **x == 1)
            .count()
            .min(e.len().saturating_sub(2));
        e[first..].to_vec()
    };
    let (la, lb) = (logical(&inputs[0]), logical(&inputs[1]));
    if lb.len() > 2 || (ta && la.len() > 2) {
        return Err(unsupported(format!(
            "tile matmul of {:?} and {:?}{}{}: batched operands have no device code yet \
             (only a batched non-transposed a against a 2-D b); patch the body or run it on \
             the CPU executor",
            inputs[0].region.extent,
            inputs[1].region.extent,
            if ta { " (a transposed)" } else { "" },
            if tb { " (b transposed)" } else { "" },
        )));
    }
    let a = mat_operand(mem, rank, &inputs[0])?;
    let b = mat_operand(mem, rank, &inputs[1])?;
    let c = mat_operand(mem, rank, output)?;
    let (m, ka) = if ta {
        (a.cols, a.rows)
    } else {
        (a.rows, a.cols)
    };
    let (kb, n) = if tb {
        (b.cols, b.rows)
    } else {
        (b.rows, b.cols)
    };
    if ka != kb || c.rows != m || c.cols != n {
        return Err(RuntimeError::Schedule(format!(
            "tile matmul shapes disagree: a {}x{}{}, b {}x{}{}, c {}x{}",
            a.rows,
            a.cols,
            if ta { "^T" } else { "" },
            b.rows,
            b.cols,
            if tb { "^T" } else { "" },
            c.rows,
            c.cols
        )));
    }
    if a.loc.dtype != b.loc.dtype {
        return Err(unsupported(format!(
            "tile matmul with a {} and b {}",
            a.loc.dtype.name(),
            b.loc.dtype.name()
        )));
    }
    let spec = GemmSpec {
        m,
        n,
        k: ka,
        lda: a.ld,
        ldb: b.ld,
        ldc: c.ld,
        in_type: elem_type(a.loc.dtype, "tile matmul")?,
        out_type: elem_type(c.loc.dtype, "tile matmul")?,
        accumulate: false,
        trans_a: ta,
        trans_b: tb,
        epilogue: GemmEpilogue::None,
    };
    spec.validate()?;
    Ok(ComputeLaunch::Gemm { spec, a, b, c })
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
