//! Durations of compute-stream operations: a roofline per kernel with a launch cost and,
//! for attention, wave quantisation of the thread blocks over the SMs.
//!
//! Rates come from the topology: the measured point nearest the op's shape where the file has
//! rate tables (`Topology::gemm_rate_for`, `attention_rate_for`), else its single figures.
//!
//! - GEMM `out[m,n] (+)= a[m,k] b[k,n]`: `2mnk` FLOPs at the GEMM rate; bytes = operands +
//!   result (+ result again when accumulating). cuBLAS uses stream-K on Hopper, so only GEMMs
//!   with fewer 128x128 tiles than SMs lose efficiency.
//! - Attention q `[b,hq,sq,d]`, k/v `[b,hk,sk,d]`: `4*b*hq*d*visible` FLOPs where `visible`
//!   counts the (query, key) pairs the causal mask leaves (all `sq*sk` without a mask; about
//!   half on a diagonal tile; none on a tile fully above the diagonal, which kernels skip).
//!   Blocks of 128 query rows per head are spread over the SMs in waves.
//!   An accumulating tile (`accumulate`) merges into its outputs in the epilogue: the same
//!   FLOPs, and it reads the accumulator as well as writing it.
//! - Attention backward (`attention_bwd`, q, k, v, o, do, lse -> dq, dk, dv): the patch's FLOPs
//!   (`2 (3 d_qk + 2 d_v)` per visible pair, 2.5x the forward's) at the backward rate
//!   (`Topology::attention_bwd_rate_for`: the forward's times the measured backward/forward
//!   ratio unless the topology gives its own), the forward's waves; the vendor patch's bf16
//!   parts of all three gradients are added into their f32 outputs by one more pass each. The
//!   dK/dV partials' way home (shift-reduce, or accumulators carried around the ring) is in
//!   the plan's transfers and combines, priced like any other.
//! - Combine (`Add`, `LseMerge`) and `Copy` are memory-bound: bytes / HBM bandwidth.

use super::SimError;
use crate::topology::Topology;
use mercury_plan::{CombineKind, ComputeOp, DType, PatchKind, RankProgram, View};

/// Cost of one compute op.
#[derive(Debug, Clone, PartialEq)]
pub struct OpCost {
    pub seconds: f64,
    pub flops: f64,
    pub bytes: f64,
    pub label: String,
}

pub(crate) fn view_elems(v: &View) -> f64 {
    v.region.extent.iter().map(|&e| e as f64).product()
}

pub(crate) fn view_bytes(r: &RankProgram, v: &View) -> Result<f64, String> {
    let slot = r
        .slots
        .get(v.slot)
        .ok_or_else(|| format!("view names slot {} of {}", v.slot, r.slots.len()))?;
    Ok(view_elems(v) * slot.dtype.size_bytes() as f64)
}

pub use mercury_plan::patch::visible_pairs;

fn waves_efficiency(blocks: f64, sms: usize) -> f64 {
    if sms == 0 || blocks <= 0.0 {
        return 1.0;
    }
    let sms = sms as f64;
    let waves = (blocks / sms).ceil();
    blocks / (waves * sms)
}

/// Fraction of the SMs busy for a GEMM of `m x n` outputs in 128 x 128 tiles: cuBLAS uses
/// stream-K on Hopper, so only GEMMs with fewer tiles than SMs lose (1 with `sms` = 0).
fn gemm_tiles_efficiency(m: usize, n: usize, sms: usize) -> f64 {
    if sms == 0 {
        return 1.0;
    }
    let tiles = (m as f64 / 128.0).ceil() * (n as f64 / 128.0).ceil();
    (tiles / sms as f64).min(1.0)
}

pub fn op_cost(r: &RankProgram, op: &ComputeOp, topo: &Topology) -> Result<OpCost, SimError> {
    let err = |what: String| SimError::Op { rank: r.rank, what };
    let launch = topo.launch_overhead();
    let hbm = topo.hbm_bandwidth();
    let bytes_of = |v: &View| view_bytes(r, v).map_err(err);
    match op {
        ComputeOp::Patch {
            patch,
            inputs,
            outputs,
        } => match patch {
            PatchKind::Gemm { accumulate, .. } if patch.spec().name == "gemm" => {
                let (Some(a), Some(b), Some(o)) = (inputs.first(), inputs.get(1), outputs.first())
                else {
                    return Err(err("gemm needs inputs [a, b] and output [out]".into()));
                };
                let (m, n, k) = mercury_plan::patch::gemm_dims(
                    &a.region.extent,
                    &b.region.extent,
                    &o.region.extent,
                )
                .map_err(err)?;
                let shapes: Vec<Vec<usize>> =
                    inputs.iter().map(|v| v.region.extent.clone()).collect();
                let flops = (patch.spec().flops)(patch, &shapes);
                let mut bytes = bytes_of(a)? + bytes_of(b)? + bytes_of(o)?;
                if *accumulate {
                    bytes += bytes_of(o)?;
                }
                let sms = topo.device.sm_count;
                let (rate, point) = topo.gemm_rate_for(m, n, k);
                // A measured point already holds its own tile quantisation: only the
                // difference between the shape and the point is applied.
                let eff = gemm_tiles_efficiency(m, n, sms)
                    / point.map_or(1.0, |p| gemm_tiles_efficiency(p.m, p.n, sms));
                let t = (flops / (rate * eff)).max(bytes / hbm);
                Ok(OpCost {
                    seconds: launch + t,
                    flops,
                    bytes,
                    label: format!("gemm {m}x{n}x{k}"),
                })
            }
            PatchKind::Attention {
                causal, accumulate, ..
            }
            | PatchKind::AttentionBwd {
                causal, accumulate, ..
            } => {
                let bwd = matches!(patch, PatchKind::AttentionBwd { .. });
                let (Some(q), Some(k), Some(_)) = (inputs.first(), inputs.get(1), inputs.get(2))
                else {
                    return Err(err("attention needs inputs [q, k, v]".into()));
                };
                let (qe, ke) = (&q.region.extent, &k.region.extent);
                let bhsd = mercury_plan::patch::attention_bhsd;
                let (Some([b, hq, sq, d]), Some([b2, hk, sk, d2])) = (bhsd(qe), bhsd(ke)) else {
                    return Err(err(format!(
                        "attention views must be [b, h, s, d] or [h, s, d]: q {qe:?}, k {ke:?}"
                    )));
                };
                if b != b2 || d != d2 || hk == 0 || hq % hk != 0 {
                    return Err(err(format!(
                        "attention shapes do not agree: q {qe:?}, k {ke:?}"
                    )));
                }
                // The pairs its causal mask and window leave (a window's empty tiles cost a
                // launch only).
                let pairs = patch
                    .attention_band()
                    .map_or(sq as f64 * sk as f64, |(band, q0, k0)| {
                        band.pairs(q0..q0 + sq, k0..k0 + sk, 0) as f64
                    });
                let shapes: Vec<Vec<usize>> =
                    inputs.iter().map(|v| v.region.extent.clone()).collect();
                let flops = (patch.spec().flops)(patch, &shapes);
                // The backward also reads o, do and the lse.
                let mut bytes = 0.0;
                for x in inputs {
                    bytes += bytes_of(x)?;
                }
                for o in outputs {
                    // An accumulating tile also reads the accumulator it merges into.
                    bytes += bytes_of(o)? * if *accumulate { 2.0 } else { 1.0 };
                }
                if pairs == 0.0 {
                    // Kernels skip fully masked tiles: only the (empty) output is written.
                    return Ok(OpCost {
                        seconds: launch,
                        flops: 0.0,
                        bytes: 0.0,
                        label: format!("{} {sq}x{sk} (masked out)", patch.spec().name),
                    });
                }
                let sms = topo.device.sm_count;
                let blocks = |heads: usize, sq: usize| heads as f64 * (sq as f64 / 128.0).ceil();
                let (rate, point) = if bwd {
                    topo.attention_bwd_rate_for(b * hq, sq, sk, d, *causal)
                } else {
                    topo.attention_rate_for(b * hq, sq, sk, d, *causal)
                };
                // As for GEMMs: a measured point holds its own wave quantisation.
                let eff = waves_efficiency(blocks(b * hq, sq), sms)
                    / point.map_or(1.0, |p| waves_efficiency(blocks(p.heads, p.sq), sms));
                let t = (flops / (rate * eff)).max(bytes / hbm);
                // The vendor (cuDNN) patch writes a bf16 part that the MLIR merge kernels then
                // fold into the f32 accumulator (or widen into the output): one more pass over
                // the output, 2 + 8 (or 2 + 4) bytes per element. The executor merges
                // consecutive ring steps together, which this per-block price overstates.
                // (A bf16 output is written by the patch directly.)
                // The backward's patch writes its three gradients (dq, dk, dv) as bf16 parts
                // and adds each into its f32 output the same way (`cudnn_bwd.rs`).
                let merged = if bwd {
                    &outputs[..]
                } else {
                    &outputs[..outputs.len().min(1)]
                };
                let mut merge = 0.0;
                for o in merged {
                    if r.slots.get(o.slot).is_some_and(|s| s.dtype == DType::F32) {
                        merge +=
                            o.region.numel() as f64 * if *accumulate { 10.0 } else { 6.0 } / hbm;
                    }
                }
                Ok(OpCost {
                    seconds: launch + t + merge,
                    flops,
                    bytes,
                    label: format!(
                        "{} b{b} hq{hq} hk{hk} {sq}x{sk}{}",
                        patch.spec().name,
                        if *causal { " causal" } else { "" }
                    ),
                })
            }
            // Any other patch kind: a roofline from its spec's FLOPs and the bytes of its views
            // (at the GEMM rate, as a tensor-core kernel), until it gets a model of its own.
            _ => {
                let shapes: Vec<Vec<usize>> =
                    inputs.iter().map(|v| v.region.extent.clone()).collect();
                let flops = (patch.spec().flops)(patch, &shapes);
                let mut bytes = 0.0;
                for v in inputs.iter().chain(outputs) {
                    bytes += bytes_of(v)?;
                }
                Ok(OpCost {
                    seconds: launch + (flops / topo.gemm_rate()).max(bytes / hbm),
                    flops,
                    bytes,
                    label: patch.spec().name.to_string(),
                })
            }
        },
        ComputeOp::Combine { kind, acc, part } => {
            let mut bytes = 0.0;
            for v in acc {
                bytes += 2.0 * bytes_of(v)?; // read + write the accumulator
            }
            for v in part {
                bytes += bytes_of(v)?;
            }
            let name = match kind {
                CombineKind::Add => "add",
                CombineKind::LseMerge => "lse_merge",
            };
            Ok(OpCost {
                seconds: launch + bytes / hbm,
                flops: 0.0,
                bytes,
                label: format!("combine {name}"),
            })
        }
        ComputeOp::Copy { src, dst } => {
            let bytes = bytes_of(src)? + bytes_of(dst)?;
            Ok(OpCost {
                seconds: launch + bytes / hbm,
                flops: 0.0,
                bytes,
                label: "copy".into(),
            })
        }
        // Generated tile code: a roofline from its FLOPs and the bytes of its views; a matmul
        // at the GEMM rate (what the `patch` pass would give it), the rest at the SIMT rate of
        // an elementwise kernel, which is memory bound.
        ComputeOp::Tile {
            tile: op,
            inputs,
            output,
        } => {
            let shapes: Vec<Vec<usize>> = inputs.iter().map(|v| v.region.extent.clone()).collect();
            let flops = op.flops(&shapes, &output.region.extent);
            let mut bytes = bytes_of(output)?;
            for v in inputs {
                bytes += bytes_of(v)?;
            }
            let (rate, label) = match op {
                mercury_plan::TileOp::Matmul { .. } => (topo.gemm_rate(), "matmul"),
                mercury_plan::TileOp::RowReduce { .. } => (topo.gemm_rate() / 16.0, "row_reduce"),
                mercury_plan::TileOp::Elementwise { .. } => {
                    (topo.gemm_rate() / 16.0, "elementwise")
                }
            };
            Ok(OpCost {
                seconds: launch + (flops / rate).max(bytes / hbm),
                flops,
                bytes,
                label: label.into(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brute(sq: usize, sk: usize, qo: usize, ko: usize) -> f64 {
        let mut c = 0;
        for r in 0..sq {
            for k in 0..sk {
                if ko + k <= qo + r {
                    c += 1;
                }
            }
        }
        c as f64
    }

    #[test]
    fn visible_pairs_matches_brute_force() {
        for (sq, sk, qo, ko) in [
            (4, 4, 0, 0),
            (4, 4, 4, 0),
            (4, 4, 0, 4),
            (3, 7, 2, 0),
            (7, 3, 0, 2),
            (5, 5, 2, 3),
            (1, 9, 8, 0),
            (6, 2, 0, 9),
        ] {
            assert_eq!(
                visible_pairs(sq, sk, qo, ko),
                brute(sq, sk, qo, ko),
                "{sq} {sk} {qo} {ko}"
            );
        }
        // Diagonal tile is about half, a tile below the diagonal is full.
        assert_eq!(visible_pairs(1024, 1024, 0, 0), 1024.0 * 1025.0 / 2.0);
        assert_eq!(visible_pairs(1024, 1024, 1024, 0), 1024.0 * 1024.0);
        assert_eq!(visible_pairs(1024, 1024, 0, 1024), 0.0);
    }

    #[test]
    fn wave_quantisation() {
        assert_eq!(waves_efficiency(132.0, 132), 1.0);
        assert!((waves_efficiency(133.0, 132) - 133.0 / 264.0).abs() < 1e-12);
        assert!((waves_efficiency(32.0, 132) - 32.0 / 132.0).abs() < 1e-12);
        assert_eq!(waves_efficiency(10.0, 0), 1.0);
    }
}
