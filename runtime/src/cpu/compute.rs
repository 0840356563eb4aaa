//! One compute op of one rank: the patches (through their f64 references,
//! `mercury_kernels::cpu`), combines, copies and tile ops.

use super::mem::Mem;
use mercury_kernels::cpu as k;
use mercury_plan::*;

pub(super) fn combine(kind: CombineKind, acc: &mut [Vec<f64>], part: &[Vec<f64>]) {
    match kind {
        CombineKind::Add => k::add(&mut acc[0], &part[0]),
        CombineKind::LseMerge => {
            let d = acc[0].len() / acc[1].len().max(1);
            let (o, rest) = acc.split_at_mut(1);
            k::lse_merge(&mut o[0], &mut rest[0], &part[0], &part[1], d);
        }
    }
}

/// The kernel dimensions of attention views `q` and `k` made 4-D
/// (`mercury_plan::patch::attention_shapes`).
pub(super) fn attn_dims(qs: [usize; 4], ks: [usize; 4]) -> k::AttnDims {
    k::AttnDims {
        b: qs[0],
        hq: qs[1],
        hk: ks[1],
        sq: qs[2],
        sk: ks[2],
        d: qs[3],
    }
}

/// The tile-relative keys query row `r` of a patch sees under `m`: its first query at position
/// `q_offset`, its first key at `k_offset`.
fn tile_keys(
    m: &mask::MaskCx,
    q_offset: usize,
    k_offset: usize,
    r: usize,
) -> std::ops::Range<usize> {
    let ks = m.keys(q_offset + r);
    ks.start.max(k_offset) - k_offset..ks.end.max(k_offset) - k_offset
}

pub(super) fn run_compute(
    plan: &Plan,
    mem: &mut Mem,
    r: usize,
    op: &ComputeOp,
    docs: &[mask::Boundaries],
) -> Result<(), String> {
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
                let (m, n, kd) = mercury_plan::patch::gemm_dims(
                    &inputs[0].region.extent,
                    &inputs[1].region.extent,
                    &outputs[0].region.extent,
                )?;
                let a = mem.read(plan, r, &inputs[0]);
                let b = mem.read(plan, r, &inputs[1]);
                let mut c = if *accumulate {
                    mem.read(plan, r, &outputs[0])
                } else {
                    vec![0.0; m * n]
                };
                k::gemm(m, n, kd, &a, &b, &mut c, *accumulate);
                if let Some(f) = epilogue {
                    c.iter_mut().for_each(|x| *x = f.apply(*x));
                }
                mem.write(plan, r, &outputs[0], &c);
            }
            PatchKind::Attention {
                causal,
                scale,
                q_offset,
                k_offset,
                mask,
                accumulate,
            } => {
                let m = mask::MaskCx::new(*causal, mask, docs)?;
                // q [b, hq, sq, d], k [b, hk, sk, d], v [b, hk, sk, dv], o [b, hq, sq, dv],
                // lse [b, hq, sq] (3-D tiles have a batch of one).
                let [qs, ks, vs, _] = mercury_plan::patch::attention_views(inputs, outputs)?;
                let dims = attn_dims(qs, ks);
                let (q, kk, v) = (
                    mem.read(plan, r, &inputs[0]),
                    mem.read(plan, r, &inputs[1]),
                    mem.read(plan, r, &inputs[2]),
                );
                let dv = vs[3];
                let mut o = vec![0.0; q.len() / dims.d.max(1) * dv];
                let mut lse = vec![0.0; q.len() / dims.d.max(1)];
                k::attention_rows(&q, &kk, &v, &mut o, &mut lse, dims, dv, *scale, &|row| {
                    tile_keys(&m, *q_offset, *k_offset, row)
                });
                if *accumulate {
                    let mut acc = vec![
                        mem.read(plan, r, &outputs[0]),
                        mem.read(plan, r, &outputs[1]),
                    ];
                    combine(CombineKind::LseMerge, &mut acc, &[o, lse]);
                    mem.write(plan, r, &outputs[0], &acc[0]);
                    mem.write(plan, r, &outputs[1], &acc[1]);
                } else {
                    mem.write(plan, r, &outputs[0], &o);
                    mem.write(plan, r, &outputs[1], &lse);
                }
            }
            PatchKind::AttentionBwd {
                causal,
                scale,
                q_offset,
                k_offset,
                mask,
                accumulate,
            } => {
                let m = mask::MaskCx::new(*causal, mask, docs)?;
                let [qs, ks, vs, _] = mercury_plan::patch::attention_bwd_views(inputs, outputs)?;
                let dims = attn_dims(qs, ks);
                let x: Vec<Vec<f64>> = inputs.iter().map(|v| mem.read(plan, r, v)).collect();
                let mut g: Vec<Vec<f64>> = if *accumulate {
                    outputs.iter().map(|v| mem.read(plan, r, v)).collect()
                } else {
                    outputs
                        .iter()
                        .map(|v| vec![0.0; v.region.numel()])
                        .collect()
                };
                let [dq, dk, dv] = g.as_mut_slice() else {
                    unreachable!("attention_bwd_views checked three outputs")
                };
                k::attention_bwd_rows(
                    k::AttnBwdInputs {
                        q: &x[0],
                        k: &x[1],
                        v: &x[2],
                        o: &x[3],
                        d_o: &x[4],
                        lse: &x[5],
                    },
                    k::AttnGrads { dq, dk, dv },
                    dims,
                    vs[3],
                    *scale,
                    &|row| tile_keys(&m, *q_offset, *k_offset, row),
                    *accumulate,
                );
                for (v, vals) in outputs.iter().zip(&g) {
                    mem.write(plan, r, v, vals);
                }
            }
        },
        ComputeOp::Combine { kind, acc, part } => {
            let mut a: Vec<Vec<f64>> = acc.iter().map(|v| mem.read(plan, r, v)).collect();
            let p: Vec<Vec<f64>> = part.iter().map(|v| mem.read(plan, r, v)).collect();
            if a.iter().zip(&p).any(|(x, y)| x.len() != y.len()) {
                return Err("combine operands differ in size".into());
            }
            combine(*kind, &mut a, &p);
            for (v, vals) in acc.iter().zip(&a) {
                mem.write(plan, r, v, vals);
            }
        }
        ComputeOp::Copy { src, dst } => {
            let vals = mem.read(plan, r, src);
            if vals.len() != dst.region.numel() {
                return Err("copy between views of different sizes".into());
            }
            mem.write(plan, r, dst, &vals);
        }
        ComputeOp::Tile {
            tile: op,
            inputs,
            output,
        } => {
            let vals: Vec<Vec<f64>> = inputs.iter().map(|v| mem.read(plan, r, v)).collect();
            let shapes: Vec<Vec<usize>> = inputs.iter().map(|v| v.region.extent.clone()).collect();
            let out = crate::tile_ref::run_tile_with(
                op,
                &vals,
                &shapes,
                &output.region.extent,
                mem.storage,
            )?;
            mem.write(plan, r, output, &out);
        }
    }
    Ok(())
}
