//! The contract of the compiler-generated device kernels of tile ops (`lowering/gpu`
//! generates them through MLIR, the CUDA executor launches them): which kernel a
//! [`TileOp`] needs, its entry name and its parameters. Pure data, no MLIR and no CUDA, so
//! both sides agree without linking each other.
//!
//! # Geometry
//! A tile op's output view is read as a 3-D index space `[d0, d1, cols]`: `cols` is the
//! last extent of the output view, `d1` the one before (1 when there is none), `d0` the
//! product of the others. Every pointer operand is addressed as
//! `ptr[i0 * s0 + i1 * s1 + i2 * s2]` with its own element strides (`i64`, non-negative):
//! a row operand of an elementwise program (one value per row) has `s2 = 0`, and a trailing
//! operand (`TileOp::Elementwise::trailing`: the output's last dimensions) has `s0 = 0` (and
//! `s1 = 0` when it covers the last dimension only), which is all the broadcasting there is.
//! An [`Instr::RotateHalf`] of input `x` loads `x` a second time at column
//! `(i2 + cols/2) mod cols`. The runtime passes the strides of a view in its slot when the
//! view has that form, and packs the view into scratch (dense strides) otherwise.
//!
//! | kernel | parameters, in order | work items | effect |
//! | --- | --- | --- | --- |
//! | elementwise (`mercury_ew_<hash>`) | `out`, `in0` .. `in{n-1}`, `d0`, `d1`, `cols`, `out_s0`, `out_s1`, `out_s2`, then `in{i}_s0`, `in{i}_s1`, `in{i}_s2` per input, then `mask{j}_row`, `mask{j}_col` per [`Instr::CausalMask`] in program order | `d0*d1*cols` | the program on the inputs (loaded as f32), result stored in the output's type |
//! | row reduce (`mercury_row_<max\|sum>_<in>_<out>`) | `out`, `x`, `d0`, `d1`, `cols`, `out_s0`, `out_s1`, `x_s0`, `x_s1`, `x_s2` | `d0*d1` | `out[i0, i1] = reduce_{i2 < cols} x[i0, i1, i2]` in f32 |
//!
//! Pointers are device pointers (`f32`, or 16-bit integers holding bf16 / f16); every count
//! and stride is an `i64` in elements. Launch is 1-D with any grid and block size (a
//! grid-stride loop); the index arithmetic is 32-bit, so the host requires
//! [`MAX_WORK_ITEMS`] or fewer work items (addresses are 64-bit).
//!
//! Numerics: f32 throughout; `exp(x) = 2^(x log2 e)` and `ln x = log2(x) ln 2` on the PTX
//! `ex2.approx.f32` / `lg2.approx.f32` instructions; GeLU's `tanh(y) = 1 - 2 / (e^(2y) + 1)`
//! (the tanh form of [`UnaryFn::Gelu`], the same as the f64 reference); `max` propagates NaN
//! as [`BinaryFn::Max`] does; a row max ignores NaN as the f64 reference's fold does; a
//! [`Instr::Cast`] to bf16 rounds to nearest even, to f16 as the hardware conversion does;
//! the bf16 output store rounds to nearest even (NaN stays NaN).
//!
//! [`UnaryFn::Gelu`]: crate::tile::UnaryFn::Gelu
//! [`BinaryFn::Max`]: crate::tile::BinaryFn::Max

use crate::tile::{Instr, RowReduceKind};
use crate::{DType, TileOp};

/// The most work items one tile kernel launch covers (32-bit index arithmetic).
pub const MAX_WORK_ITEMS: usize = (1 << 31) - 1;

/// A generated device kernel, identified by what it computes (everything a launch does not
/// pass as a parameter): the program with its causal-mask offsets cleared (they are launch
/// parameters), and the element types.
#[derive(Debug, Clone, PartialEq)]
pub enum TileKernel {
    /// A fused elementwise program.
    Elementwise {
        /// The program, every [`Instr::CausalMask`] with offsets 0.
        program: Vec<Instr>,
        /// Element type of each input.
        inputs: Vec<DType>,
        /// Element type of the output.
        output: DType,
    },
    /// A row reduction.
    RowReduce {
        reduce: RowReduceKind,
        input: DType,
        output: DType,
    },
}

/// The type of one kernel parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TileParam {
    /// Device pointer to elements of this type (bf16 / f16 as 16-bit integers).
    Ptr(DType),
    /// A signed 64-bit count, stride or offset, in elements.
    I64,
}

impl TileKernel {
    /// The kernel a tile op needs with these input and output element types; `None` for a
    /// matmul (a cuBLASLt call, not generated code) and for f64 operands (no f64 on the
    /// device).
    pub fn of(op: &TileOp, inputs: &[DType], output: DType) -> Option<TileKernel> {
        if inputs.contains(&DType::F64) || output == DType::F64 {
            return None;
        }
        match op {
            TileOp::Matmul { .. } => None,
            TileOp::RowReduce { reduce } => Some(TileKernel::RowReduce {
                reduce: *reduce,
                input: *inputs.first()?,
                output,
            }),
            TileOp::Elementwise { program, .. } => Some(TileKernel::Elementwise {
                program: program
                    .iter()
                    .map(|i| match i {
                        Instr::CausalMask { x, .. } => Instr::CausalMask {
                            x: *x,
                            row_offset: 0,
                            col_offset: 0,
                        },
                        other => other.clone(),
                    })
                    .collect(),
                inputs: inputs.to_vec(),
                output,
            }),
        }
    }

    /// A canonical text of what the kernel computes (the input of [`TileKernel::name`]'s hash).
    pub fn key(&self) -> String {
        match self {
            TileKernel::Elementwise {
                program,
                inputs,
                output,
            } => {
                let ins: Vec<&str> = inputs.iter().map(|d| d.name()).collect();
                let mut s = format!("ew({})->{}:", ins.join(","), output.name());
                for i in program {
                    let t = match i {
                        Instr::Unary { f, x } => format!("{}({x})", f.keyword()),
                        Instr::Binary { f, a, b } => format!("{}({a},{b})", f.keyword()),
                        Instr::Scale { by, x } => format!("scale<{:016x}>({x})", by.to_bits()),
                        Instr::AddScalar { value, x } => {
                            format!("add<{:016x}>({x})", value.to_bits())
                        }
                        Instr::RotateHalf { x } => format!("rotate_half({x})"),
                        Instr::Cast { to, x } => format!("cast<{}>({x})", to.name()),
                        Instr::CausalMask { x, .. } => format!("causal({x})"),
                    };
                    s.push_str(&t);
                    s.push(';');
                }
                s
            }
            TileKernel::RowReduce {
                reduce,
                input,
                output,
            } => format!(
                "row_{}({})->{}",
                reduce.keyword(),
                input.name(),
                output.name()
            ),
        }
    }

    /// The PTX entry name: `mercury_ew_<16 hex digits of the FNV-1a hash of the key>` or
    /// `mercury_row_<max|sum>_<in>_<out>`. Stable across runs and builds.
    pub fn name(&self) -> String {
        match self {
            TileKernel::Elementwise { .. } => {
                format!("mercury_ew_{:016x}", crate::fnv1a(self.key().as_bytes()))
            }
            TileKernel::RowReduce {
                reduce,
                input,
                output,
            } => format!(
                "mercury_row_{}_{}_{}",
                reduce.keyword(),
                input.name(),
                output.name()
            ),
        }
    }

    /// Number of [`Instr::CausalMask`] instructions (each takes a row and a column offset).
    pub fn masks(&self) -> usize {
        match self {
            TileKernel::Elementwise { program, .. } => program
                .iter()
                .filter(|i| matches!(i, Instr::CausalMask { .. }))
                .count(),
            TileKernel::RowReduce { .. } => 0,
        }
    }

    /// The parameters, in launch order (see the module docs).
    pub fn params(&self) -> Vec<(String, TileParam)> {
        let mut p = Vec::new();
        let strides = |p: &mut Vec<(String, TileParam)>, name: &str, n: usize| {
            for k in 0..n {
                p.push((format!("{name}_s{k}"), TileParam::I64));
            }
        };
        let dims = |p: &mut Vec<(String, TileParam)>| {
            for d in ["d0", "d1", "cols"] {
                p.push((d.to_string(), TileParam::I64));
            }
        };
        match self {
            TileKernel::Elementwise { inputs, output, .. } => {
                p.push(("out".into(), TileParam::Ptr(*output)));
                for (i, d) in inputs.iter().enumerate() {
                    p.push((format!("in{i}"), TileParam::Ptr(*d)));
                }
                dims(&mut p);
                strides(&mut p, "out", 3);
                for i in 0..inputs.len() {
                    strides(&mut p, &format!("in{i}"), 3);
                }
                for j in 0..self.masks() {
                    p.push((format!("mask{j}_row"), TileParam::I64));
                    p.push((format!("mask{j}_col"), TileParam::I64));
                }
            }
            TileKernel::RowReduce { input, output, .. } => {
                p.push(("out".into(), TileParam::Ptr(*output)));
                p.push(("x".into(), TileParam::Ptr(*input)));
                dims(&mut p);
                strides(&mut p, "out", 2);
                strides(&mut p, "x", 3);
            }
        }
        p
    }
}

/// `[d0, d1, cols]` of an output view's extents (see the module docs).
pub fn geometry(extent: &[usize]) -> [usize; 3] {
    let n = extent.len();
    let cols = extent.last().copied().unwrap_or(1);
    let d1 = if n >= 2 { extent[n - 2] } else { 1 };
    let d0 = extent[..n.saturating_sub(2)].iter().product();
    [d0, d1, cols]
}

/// Every distinct generated kernel `plan` launches (in first-use order).
pub fn plan_tile_kernels(plan: &crate::Plan) -> Vec<TileKernel> {
    let mut out: Vec<TileKernel> = Vec::new();
    for r in &plan.ranks {
        for st in &r.stages {
            for op in &st.compute {
                if let crate::ComputeOp::Tile {
                    tile,
                    inputs,
                    output,
                } = op
                {
                    let dt = |v: &crate::View| r.slots.get(v.slot).map(|s| s.dtype);
                    let ins: Option<Vec<DType>> = inputs.iter().map(dt).collect();
                    if let (Some(ins), Some(o)) = (ins, dt(output)) {
                        if let Some(k) = TileKernel::of(tile, &ins, o) {
                            if !out.contains(&k) {
                                out.push(k);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tile::{BinaryFn, UnaryFn};

    #[test]
    fn names_and_params() {
        let prog = |row: usize| TileOp::Elementwise {
            program: vec![
                Instr::Binary {
                    f: BinaryFn::Sub,
                    a: 0,
                    b: 1,
                },
                Instr::CausalMask {
                    x: 2,
                    row_offset: row,
                    col_offset: 0,
                },
                Instr::Unary {
                    f: UnaryFn::Exp,
                    x: 3,
                },
            ],
            trailing: vec![],
        };
        let a = TileKernel::of(&prog(0), &[DType::F32, DType::F32], DType::BF16).unwrap();
        let b = TileKernel::of(&prog(64), &[DType::F32, DType::F32], DType::BF16).unwrap();
        // Mask offsets are launch parameters: one kernel for every block.
        assert_eq!(a, b);
        assert_eq!(a.name(), b.name());
        assert!(a.name().starts_with("mercury_ew_") && a.name().len() == 27);
        let c = TileKernel::of(&prog(0), &[DType::F32, DType::F32], DType::F32).unwrap();
        assert_ne!(a.name(), c.name());
        let names: Vec<String> = a.params().into_iter().map(|p| p.0).collect();
        assert_eq!(names.len(), 3 + 3 + 3 + 6 + 2);
        assert_eq!(names[0], "out");
        assert_eq!(names[3], "d0");
        assert_eq!(names[15], "mask0_row");
        let r = TileKernel::of(
            &TileOp::RowReduce {
                reduce: RowReduceKind::Max,
            },
            &[DType::F32],
            DType::F32,
        )
        .unwrap();
        assert_eq!(r.name(), "mercury_row_max_f32_f32");
        assert_eq!(r.params().len(), 10);
        assert!(TileKernel::of(&prog(0), &[DType::F64, DType::F32], DType::F32).is_none());
        assert_eq!(geometry(&[2, 3, 4, 5]), [6, 4, 5]);
        assert_eq!(geometry(&[7]), [1, 1, 7]);
    }
}
