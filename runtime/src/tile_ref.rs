//! The f64 reference of the plan's tile compute ops ([`mercury_plan::TileOp`]): batched matmul
//! with transposes and grouped batch broadcasting, row reductions, and fused elementwise
//! programs with row operands (shapes in `mercury_plan::tile`). The CPU executor runs every
//! `ComputeOp::Tile` through [`run_tile_with`]; the CUDA backend's `--check` recomputes with
//! [`run_tile`].

use crate::cpu::{round_to, Storage};
use mercury_plan::tile::{
    matmul_a_shape, matmul_batches, matmul_shape, trailing_dims, Instr, RowReduceKind,
};
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
            outer,
        } => Ok(matmul(
            &inputs[0],
            &matmul_a_shape(&shapes[0], &shapes[1], *outer),
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
        TileOp::Elementwise { program, trailing } => {
            let cols = out.last().copied().unwrap_or(1).max(1);
            let rows_last2 = out.len().checked_sub(2).map_or(1, |d| out[d]).max(1);
            // Element `e` of the output reads element `e % span` of a trailing operand.
            let span: Vec<usize> = inputs
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    if trailing.contains(&i) {
                        let k = trailing_dims(out, x.len()).unwrap_or(0);
                        out[out.len() - k..].iter().product::<usize>().max(1)
                    } else {
                        0
                    }
                })
                .collect();
            let fetch = |i: usize, e: usize| {
                let x = &inputs[i];
                if span[i] > 0 {
                    x[e % span[i]]
                } else if x.len() == n {
                    x[e]
                } else {
                    x[e / cols]
                }
            };
            let mut vals = vec![0.0; inputs.len() + program.len()];
            let mut res = Vec::with_capacity(n);
            for e in 0..n {
                for (i, v) in vals.iter_mut().enumerate().take(inputs.len()) {
                    *v = fetch(i, e);
                }
                for (k, ins) in program.iter().enumerate() {
                    vals[inputs.len() + k] = match *ins {
                        Instr::Unary { f, x } => f.apply(vals[x]),
                        Instr::Binary { f, a, b } => f.apply(vals[a], vals[b]),
                        Instr::Scale { by, x } => vals[x] * by,
                        Instr::AddScalar { value, x } => vals[x] + value,
                        Instr::RotateHalf { x } => {
                            let (c, half) = (e % cols, cols / 2);
                            if c < half {
                                -fetch(x, e + half)
                            } else {
                                fetch(x, e - half)
                            }
                        }
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

/// Batched `op(a) op(b)` (see `mercury_plan::tile`): the batch dimensions align from the
/// right; batch index `x` of the output reads `x / (a_size / b_size)` of b (grouped heads),
/// and index 0 of an operand whose dimension is missing or of one element (broadcast).
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
    let dims = matmul_batches(&sa[..ra], &sb[..rb])?;
    let nb = dims.len();
    let (m, n) = (so[nb], so[nb + 1]);
    let k = if ta { sa[ra] } else { sa[ra + 1] };
    let batches: usize = so[..nb].iter().product();
    let mut out = vec![0.0; batches * m * n];
    let mut idx = vec![0usize; nb];
    for bi in 0..batches {
        // Each operand's batch offset: its dimensions right-aligned with the output's.
        let offset = |shape: &[usize], div: &dyn Fn(usize) -> usize| {
            let r = shape.len();
            (0..r).fold(0usize, |o, i| {
                let d = nb - r + i;
                let x = match div(d) {
                    usize::MAX => 0,
                    q => idx[d] / q,
                };
                o * shape[i] + x
            })
        };
        let ao = offset(&sa[..ra], &|d| dims[d].1);
        let bo = offset(&sb[..rb], &|d| dims[d].2);
        let (ab, bb) = (&a[ao * m * k..], &b[bo * k * n..]);
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
        for d in (0..nb).rev() {
            idx[d] += 1;
            if idx[d] < so[d] {
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
        // One row [1, 2] against two heads' [2, 1] weights: a broadcast over b's heads.
        let e = matmul(
            &[1.0, 2.0],
            &[1, 1, 2],
            &[1.0, 1.0, 0.0, 3.0],
            &[2, 2, 1],
            false,
            false,
        )
        .unwrap();
        assert_eq!(e, vec![3.0, 6.0]);
    }

    /// RMSNorm's weight and a rotary table broadcast over the leading dimensions; the rotation
    /// reads the other half of each row, negated in the first half.
    #[test]
    fn trailing_operands_and_rotate_half() {
        let x = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let w = vec![10.0, 100.0, 1000.0, 10000.0];
        let prog = TileOp::Elementwise {
            program: vec![
                Instr::RotateHalf { x: 0 },
                Instr::Binary {
                    f: BinaryFn::Mul,
                    a: 2,
                    b: 1,
                },
                Instr::AddScalar { value: 0.5, x: 3 },
            ],
            trailing: vec![1],
        };
        let y = run_tile(&prog, &[x, w], &[vec![2, 4], vec![4]], &[2, 4]).unwrap();
        assert_eq!(
            y,
            vec![
                -29.5,
                -400.0 + 0.5,
                1000.5,
                20000.5,
                -69.5,
                -800.0 + 0.5,
                5000.5,
                60000.5
            ]
        );
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
            trailing: vec![],
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
            trailing: vec![],
        };
        let x = vec![1.0 + 2f64.powi(-10)];
        let run =
            |storage| run_tile_with(&prog, std::slice::from_ref(&x), &[vec![1]], &[1], storage);
        assert_eq!(run(Storage::F64), Ok(vec![2.0 + 2f64.powi(-9)]));
        assert_eq!(run(Storage::Dtype), Ok(vec![2.0]));
    }
}
