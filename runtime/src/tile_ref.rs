//! The f64 reference of the plan's tile compute ops ([`mercury_plan::TileOp`]): batched matmul
//! with transposes and grouped batch broadcasting, row reductions, and fused elementwise
//! programs with row operands (shapes in `mercury_plan::tile`). The CPU executor runs every
//! `ComputeOp::Tile` through [`run_tile_with`]; the CUDA backend's `--check` recomputes with
//! [`run_tile`].

use crate::cpu::{round_to, Storage};
use mercury_plan::tile::{matmul_shape, Instr, RowReduceKind};
use mercury_plan::TileOp;

/// Runs `op` on row-major `inputs` of shapes `shapes`, giving the output of shape `out`
/// (row-major), in f64 throughout (a cast keeps its value). `Err` when the shapes do not fit
/// the op ([`TileOp::check`]).
pub fn run_tile(
    op: &TileOp,
    inputs: &[Vec<f64>],
    shapes: &[Vec<usize>],
    out: &[usize],
) -> Result<Vec<f64>, String> {
    run_tile_with(op, inputs, shapes, out, Storage::F64)
}

/// [`run_tile`]; under [`Storage::Dtype`] a cast inside an elementwise program rounds to its
/// type, as the device's generated kernel does (the executor rounds the output to its slot's
/// type where it stores it).
pub fn run_tile_with(
    op: &TileOp,
    inputs: &[Vec<f64>],
    shapes: &[Vec<usize>],
    out: &[usize],
    storage: Storage,
) -> Result<Vec<f64>, String> {
    op.check(shapes, out)?;
    let n: usize = out.iter().product();
    match op {
        TileOp::Matmul {
            transpose_a,
            transpose_b,
        } => Ok(matmul(
            &inputs[0],
            &shapes[0],
            &inputs[1],
            &shapes[1],
            *transpose_a,
            *transpose_b,
        )?),
        TileOp::RowReduce { reduce } => {
            let last = shapes[0].last().copied().unwrap_or(1).max(1);
            Ok(inputs[0]
                .chunks(last)
                .map(|row| match reduce {
                    RowReduceKind::Max => row.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    RowReduceKind::Sum => row.iter().sum(),
                })
                .collect())
        }
        TileOp::Elementwise { program } => {
            let cols = out.last().copied().unwrap_or(1).max(1);
            let rows_last2 = out.len().checked_sub(2).map_or(1, |d| out[d]).max(1);
            let mut vals = vec![0.0; inputs.len() + program.len()];
            let mut res = Vec::with_capacity(n);
            for e in 0..n {
                for (i, x) in inputs.iter().enumerate() {
                    vals[i] = if x.len() == n { x[e] } else { x[e / cols] };
                }
                for (k, ins) in program.iter().enumerate() {
                    vals[inputs.len() + k] = match *ins {
                        Instr::Unary { f, x } => f.apply(vals[x]),
                        Instr::Binary { f, a, b } => f.apply(vals[a], vals[b]),
                        Instr::Scale { by, x } => vals[x] * by,
                        Instr::Cast { x, to } => match storage {
                            Storage::F64 => vals[x],
                            Storage::Dtype => round_to(to, vals[x]),
                        },
                        Instr::CausalMask {
                            x,
                            row_offset,
                            col_offset,
                        } => {
                            let (r, c) = ((e / cols) % rows_last2, e % cols);
                            if col_offset + c > row_offset + r {
                                f64::NEG_INFINITY
                            } else {
                                vals[x]
                            }
                        }
                    };
                }
                res.push(vals[vals.len() - 1]);
            }
            Ok(res)
        }
    }
}

/// Batched `op(a) op(b)` (see `mercury_plan::tile`): b's batch dimensions align with a's from
/// the right, and batch index `x` of a reads `x / (a_size / b_size)` of b.
pub fn matmul(
    a: &[f64],
    sa: &[usize],
    b: &[f64],
    sb: &[usize],
    ta: bool,
    tb: bool,
) -> Result<Vec<f64>, String> {
    let so = matmul_shape(sa, sb, ta, tb)?;
    let (ra, rb) = (sa.len() - 2, sb.len() - 2);
    let (m, n) = (so[ra], so[ra + 1]);
    let k = if ta { sa[ra] } else { sa[ra + 1] };
    let batches: usize = sa[..ra].iter().product();
    let mut out = vec![0.0; batches * m * n];
    let mut idx = vec![0usize; ra];
    for bi in 0..batches {
        // b's batch offset: its dimensions right-aligned with a's, grouped.
        let mut bo = 0usize;
        for (i, &y) in sb[..rb].iter().enumerate() {
            let x = sa[ra - rb + i];
            bo = bo * y + idx[ra - rb + i] / (x / y);
        }
        let (ab, bb) = (&a[bi * m * k..], &b[bo * k * n..]);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    let x = if ta { ab[p * m + i] } else { ab[i * k + p] };
                    let y = if tb { bb[j * k + p] } else { bb[p * n + j] };
                    s += x * y;
                }
                out[bi * m * n + i * n + j] = s;
            }
        }
        for d in (0..ra).rev() {
            idx[d] += 1;
            if idx[d] < sa[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::tile::{BinaryFn, UnaryFn};

    #[test]
    fn grouped_transposed_matmul() {
        // a: 2 heads of [1, 2]; b: 1 head of [n=2, k=2] transposed; both heads read it.
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [1.0, 0.0, 1.0, 1.0];
        let c = matmul(&a, &[2, 1, 2], &b, &[1, 2, 2], false, true).unwrap();
        assert_eq!(c, vec![1.0, 3.0, 3.0, 7.0]);
        let d = matmul(&[1.0, 2.0, 3.0, 4.0], &[2, 2], &b, &[2, 2], true, false).unwrap();
        // a^T = [[1, 3], [2, 4]]; a^T b = [[4, 3], [6, 4]].
        assert_eq!(d, vec![4.0, 3.0, 6.0, 4.0]);
    }

    #[test]
    fn softmax_rows_through_a_program() {
        let s = vec![0.0, 1.0, 2.0, 3.0, 5.0, 1.0];
        let m = run_tile(
            &TileOp::RowReduce {
                reduce: RowReduceKind::Max,
            },
            std::slice::from_ref(&s),
            &[vec![2, 3]],
            &[2],
        )
        .unwrap();
        assert_eq!(m, vec![2.0, 5.0]);
        let prog = TileOp::Elementwise {
            program: vec![
                Instr::Binary {
                    f: BinaryFn::Sub,
                    a: 0,
                    b: 1,
                },
                Instr::Unary {
                    f: UnaryFn::Exp,
                    x: 2,
                },
                Instr::CausalMask {
                    x: 3,
                    row_offset: 0,
                    col_offset: 0,
                },
            ],
        };
        let p = run_tile(&prog, &[s, m], &[vec![2, 3], vec![2]], &[2, 3]).unwrap();
        assert_eq!(p[0], (-2.0f64).exp());
        assert_eq!(p[1], f64::NEG_INFINITY);
        assert_eq!(p[4], 1.0);
        assert_eq!(p[5], f64::NEG_INFINITY);
    }

    /// A cast inside a program rounds under `Storage::Dtype` only: 1 + 2^-10 is not a bf16,
    /// and the scale after the cast shows which value it kept.
    #[test]
    fn a_cast_rounds_when_stored_in_dtypes() {
        let prog = TileOp::Elementwise {
            program: vec![
                Instr::Cast {
                    to: mercury_plan::DType::BF16,
                    x: 0,
                },
                Instr::Scale { by: 2.0, x: 1 },
            ],
        };
        let x = vec![1.0 + 2f64.powi(-10)];
        let run =
            |storage| run_tile_with(&prog, std::slice::from_ref(&x), &[vec![1]], &[1], storage);
        assert_eq!(run(Storage::F64), Ok(vec![2.0 + 2f64.powi(-9)]));
        assert_eq!(run(Storage::Dtype), Ok(vec![2.0]));
    }
}
