//! Tile compute ops: what the CommIR compute ops (`commir.matmul`, `commir.unary`,
//! `commir.binary`, `commir.scale`, `commir.cast`, `commir.mask`, `commir.row_reduce`) become in
//! a plan ([`crate::ComputeOp::Tile`]), and the scalar semantics every backend follows (the f64
//! reference of [`UnaryFn::apply`] and [`BinaryFn::apply`]; the CUDA backend runs the same
//! formulas in f32 in generated kernels, `lowering/gpu/src/elementwise.rs`).
//!
//! Shapes are those of the views (row-major, the extents of the buffer dimensions a tile
//! covers):
//! - [`TileOp::Matmul`]: `a [..batch, m, k]` (`[.., k, m]` with `transpose_a`), `b [..bb, k, n]`
//!   (`[.., n, k]` with `transpose_b`), out `[..batch, m, n]`. `b`'s batch dimensions align
//!   with `a`'s from the right (missing ones count as 1) and each divides `a`'s: batch index
//!   `x` of `a` reads index `x / (a_size / b_size)` of `b` (a broadcast when `b`'s is 1, the
//!   query heads of one key/value head in grouped-query attention otherwise).
//!   `a`'s batch dimensions may also be of one element where `b`'s are not, or all missing:
//!   `a` is then broadcast over them (one projection matrix per head applied to the same
//!   rows), and the output takes `b`'s; an `a` with some but fewer batch dimensions than
//!   `b` is refused. With `outer`, the output's batch dimensions are `a`'s followed by `b`'s
//!   (`a [bt, m, k]` rows of every batch entry times `b [h, k, n]` per-head weights is
//!   `[bt, h, m, n]`): as if `a` had one-element dimensions for `b`'s after its own
//!   ([`matmul_a_shape`]).
//! - [`TileOp::RowReduce`]: `x [.., n]` to out `[..]` (the last dimension reduced).
//! - [`TileOp::Elementwise`]: out has the view's shape; each input has that shape, is a *row*
//!   operand of the shape without its last dimension (one value per row, broadcast along it),
//!   told apart by element count, or, when listed in `trailing`, a *trailing* operand: the
//!   output's last dimensions (as many as its element count covers), broadcast over the
//!   leading ones (a norm's weight over the rows, a rotary table over the heads).

use crate::DType;
use serde::{Deserialize, Serialize};

/// An elementwise function of one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryFn {
    /// `e^x`.
    Exp,
    /// Natural logarithm (`-inf` at 0, NaN below).
    Log,
    /// GeLU, tanh form: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (PyTorch's
    /// `gelu(approximate='tanh')`, Megatron's fused GeLU).
    Gelu,
    /// SiLU (swish): `x / (1 + e^-x)`.
    Silu,
    /// Reciprocal square root `1 / sqrt(x)` (RMSNorm's scale; NaN below 0, `inf` at 0).
    Rsqrt,
}

/// An elementwise function of two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryFn {
    Add,
    Sub,
    Mul,
    Div,
    /// The larger value (NaN if either is NaN).
    Max,
}

/// A reduction along the last dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RowReduceKind {
    /// Largest element (`-inf` for an empty row).
    Max,
    /// Sum of the elements.
    Sum,
}

/// `sqrt(2 / pi)`, GeLU's tanh-form constant.
pub const GELU_C: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of GeLU's tanh form.
pub const GELU_A: f64 = 0.044_715;

/// `ALL`, `KEYWORDS` (the CommIR spelling, in the same order), `keyword` and `from_keyword`
/// of a keyword enum (also the CommIR dialect's keyword attributes use it).
#[macro_export]
macro_rules! keywords {
    ($ty:ident { $($variant:ident = $kw:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// The CommIR keywords, in the order of [`Self::ALL`].
            pub const KEYWORDS: &'static [&'static str] = &[$($kw),+];
            /// The CommIR keyword.
            pub fn keyword(self) -> &'static str {
                match self {
                    $($ty::$variant => $kw),+
                }
            }
            /// The value a keyword names.
            pub fn from_keyword(s: &str) -> Option<$ty> {
                match s {
                    $($kw => Some($ty::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

keywords!(UnaryFn {
    Exp = "exp",
    Log = "log",
    Gelu = "gelu",
    Silu = "silu",
    Rsqrt = "rsqrt",
});
keywords!(BinaryFn {
    Add = "add",
    Sub = "sub",
    Mul = "mul",
    Div = "div",
    Max = "max",
});
keywords!(RowReduceKind {
    Max = "max",
    Sum = "sum",
});

impl UnaryFn {
    /// The f64 reference.
    pub fn apply(self, x: f64) -> f64 {
        match self {
            UnaryFn::Exp => x.exp(),
            UnaryFn::Log => x.ln(),
            UnaryFn::Gelu => 0.5 * x * (1.0 + (GELU_C * (x + GELU_A * x * x * x)).tanh()),
            UnaryFn::Silu => x / (1.0 + (-x).exp()),
            UnaryFn::Rsqrt => 1.0 / x.sqrt(),
        }
    }
}

impl BinaryFn {
    /// Whether `f(a, b) == f(b, a)`.
    pub fn commutes(self) -> bool {
        matches!(self, BinaryFn::Add | BinaryFn::Mul | BinaryFn::Max)
    }
    /// The f64 reference.
    pub fn apply(self, a: f64, b: f64) -> f64 {
        match self {
            BinaryFn::Add => a + b,
            BinaryFn::Sub => a - b,
            BinaryFn::Mul => a * b,
            BinaryFn::Div => a / b,
            BinaryFn::Max => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
        }
    }
}

/// One instruction of an elementwise program. Operands are value numbers: the program's
/// inputs first (`0..inputs`), then the result of each instruction in order; the last
/// instruction's result is the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Instr {
    Unary {
        f: UnaryFn,
        x: usize,
    },
    Binary {
        f: BinaryFn,
        a: usize,
        b: usize,
    },
    /// `x * by`.
    Scale {
        by: f64,
        x: usize,
    },
    /// `x + value` (RMSNorm's epsilon).
    AddScalar {
        value: f64,
        x: usize,
    },
    /// The rotation of rotary position embeddings (`rotate_half` of the Llama and GPT-NeoX
    /// code): element `c` of a row of `n` is `-x[c + n/2]` for `c < n/2` and `x[c - n/2]`
    /// after. `x` must be a program input of the output's shape (it reads another element of
    /// the row), and `n` even.
    RotateHalf {
        x: usize,
    },
    /// Rounds to `to` on a device (the CPU executor's f64 run keeps full precision, its run in
    /// the plan's dtypes rounds; a backend stores the output in its slot's type either way).
    Cast {
        to: DType,
        x: usize,
    },
    /// Causal mask over the last two dimensions of the output shape: element `(r, c)` becomes
    /// `-inf` when key position `col_offset + c` is after query position `row_offset + r`.
    CausalMask {
        x: usize,
        row_offset: usize,
        col_offset: usize,
    },
}

impl Instr {
    /// The value numbers the instruction reads.
    pub fn operands(&self) -> Vec<usize> {
        match self {
            Instr::Unary { x, .. }
            | Instr::Scale { x, .. }
            | Instr::AddScalar { x, .. }
            | Instr::RotateHalf { x }
            | Instr::Cast { x, .. }
            | Instr::CausalMask { x, .. } => vec![*x],
            Instr::Binary { a, b, .. } => vec![*a, *b],
        }
    }
    /// The instruction with every operand renumbered by `f`.
    pub fn map_operands(&self, f: impl Fn(usize) -> usize) -> Instr {
        let mut i = self.clone();
        match &mut i {
            Instr::Unary { x, .. }
            | Instr::Scale { x, .. }
            | Instr::AddScalar { x, .. }
            | Instr::RotateHalf { x }
            | Instr::Cast { x, .. }
            | Instr::CausalMask { x, .. } => *x = f(*x),
            Instr::Binary { a, b, .. } => {
                *a = f(*a);
                *b = f(*b);
            }
        }
        i
    }
}

/// A local computation on tiles (see the module docs for shapes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum TileOp {
    /// Batched matrix product `out = op(a) op(b)`.
    Matmul {
        #[serde(default, skip_serializing_if = "is_false")]
        transpose_a: bool,
        #[serde(default, skip_serializing_if = "is_false")]
        transpose_b: bool,
        /// The output's batch dimensions are `a`'s, then `b`'s (see the module docs).
        #[serde(default, skip_serializing_if = "is_false")]
        outer: bool,
    },
    /// A reduction of every row (the last dimension).
    RowReduce { reduce: RowReduceKind },
    /// A fused elementwise program over inputs of the output's shape, row operands and the
    /// trailing operands `trailing` lists (input indices, increasing).
    Elementwise {
        program: Vec<Instr>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        trailing: Vec<usize>,
    },
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl TileOp {
    /// The op's name in reports and errors: `matmul`, `row_reduce` or `elementwise`.
    pub fn name(&self) -> &'static str {
        match self {
            TileOp::Matmul { .. } => "matmul",
            TileOp::RowReduce { .. } => "row_reduce",
            TileOp::Elementwise { .. } => "elementwise",
        }
    }

    /// Checks the op against the element counts and shapes of its views: inputs, then the
    /// output. `Err` says what does not fit.
    pub fn check(&self, inputs: &[Vec<usize>], output: &[usize]) -> Result<(), String> {
        let numel = |s: &[usize]| s.iter().product::<usize>();
        match self {
            TileOp::Matmul {
                transpose_a,
                transpose_b,
                outer,
            } => {
                let [a, b] = inputs else {
                    return Err(format!("matmul takes 2 tiles, got {}", inputs.len()));
                };
                let want =
                    matmul_shape(&matmul_a_shape(a, b, *outer), b, *transpose_a, *transpose_b)?;
                if numel(&want) != numel(output) {
                    return Err(format!(
                        "matmul of {a:?} and {b:?} gives {want:?}, the output is {output:?}"
                    ));
                }
                Ok(())
            }
            TileOp::RowReduce { .. } => {
                let [x] = inputs else {
                    return Err(format!("row_reduce takes 1 tile, got {}", inputs.len()));
                };
                let last = x.last().copied().unwrap_or(1);
                if last == 0 || numel(x) / last != numel(output) {
                    return Err(format!(
                        "row_reduce of {x:?} gives {} values, the output has {}",
                        numel(x) / last.max(1),
                        numel(output)
                    ));
                }
                Ok(())
            }
            TileOp::Elementwise { program, trailing } => {
                let n = numel(output);
                let row = n / output.last().copied().unwrap_or(1).max(1);
                if trailing.iter().any(|&i| i >= inputs.len()) {
                    return Err(format!(
                        "elementwise: trailing operand {trailing:?} of {} inputs",
                        inputs.len()
                    ));
                }
                for (i, x) in inputs.iter().enumerate() {
                    if trailing.contains(&i) {
                        if trailing_dims(output, numel(x)).is_none() {
                            return Err(format!(
                                "elementwise input {i} {x:?} is listed as trailing but covers no run of the last dimensions of the output {output:?}"
                            ));
                        }
                    } else if numel(x) != n && numel(x) != row {
                        return Err(format!(
                            "elementwise input {i} {x:?} is neither the output's shape {output:?} nor one value per row"
                        ));
                    }
                }
                if program.is_empty() {
                    return Err("empty elementwise program".into());
                }
                for (k, ins) in program.iter().enumerate() {
                    if ins.operands().iter().any(|&v| v >= inputs.len() + k) {
                        return Err(format!(
                            "elementwise instruction {k} reads a value not defined before it"
                        ));
                    }
                    if let Instr::RotateHalf { x } = ins {
                        let cols = output.last().copied().unwrap_or(1);
                        if *x >= inputs.len() || trailing.contains(x) || numel(&inputs[*x]) != n {
                            return Err(format!(
                                "elementwise instruction {k}: rotate_half reads value {x}, which is not an input of the output's shape"
                            ));
                        }
                        if cols % 2 != 0 {
                            return Err(format!(
                                "elementwise instruction {k}: rotate_half needs rows of an even length, the output's are {cols}"
                            ));
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Floating-point operations of one instance on these input shapes (the cost model's
    /// roofline): `2 m n k` per batch for a matmul, one per element otherwise (transcendental
    /// functions count as one).
    pub fn flops(&self, inputs: &[Vec<usize>], output: &[usize]) -> f64 {
        let numel = |s: &[usize]| s.iter().product::<usize>() as f64;
        match self {
            TileOp::Matmul { transpose_a, .. } => {
                let a = inputs.first().map(Vec::as_slice).unwrap_or(&[]);
                let k = if *transpose_a {
                    a.len().checked_sub(2).map_or(1, |d| a[d])
                } else {
                    a.last().copied().unwrap_or(1)
                };
                2.0 * numel(output) * k as f64
            }
            TileOp::RowReduce { .. } => inputs.first().map_or(0.0, |x| numel(x)),
            TileOp::Elementwise { program, .. } => numel(output) * program.len() as f64,
        }
    }
}

/// How many of the last dimensions of `output` an operand of `numel` elements covers (the
/// fewest whose product is `numel`; 0 for a single value), or `None` when no run does.
pub fn trailing_dims(output: &[usize], numel: usize) -> Option<usize> {
    let mut p = 1usize;
    if numel == 1 {
        return Some(0);
    }
    for (k, e) in output.iter().rev().enumerate() {
        p = p.saturating_mul(*e);
        if p == numel {
            return Some(k + 1);
        }
        if p > numel {
            return None;
        }
    }
    None
}

/// The batch dimensions of a matmul's output and, per output batch dimension, how `a` and
/// `b` index theirs: `(out, a_div, b_div)` where output batch index `x` along a dimension
/// reads index `x / a_div` of `a` (`usize::MAX`: `a` has no such dimension or one element,
/// index 0) and `x / b_div` of `b` (likewise). Shapes are the batch dimensions only,
/// aligned from the right.
pub fn matmul_batches(a: &[usize], b: &[usize]) -> Result<Vec<(usize, usize, usize)>, String> {
    // `a` broadcast over `b`'s batch dimensions (rows times per-head weights) has one
    // element in each or none at all. An `a` with some but fewer batch dimensions than
    // `b` is refused: a tile that lost a dimension would be misread as a broadcast.
    if !a.is_empty() && a.len() < b.len() {
        return Err(format!(
            "matmul: b {b:?} has more batch dimensions than a {a:?}"
        ));
    }
    let n = a.len().max(b.len());
    let mut out = Vec::with_capacity(n);
    for d in 0..n {
        let x = (d + a.len()).checked_sub(n).map(|i| a[i]);
        let y = (d + b.len()).checked_sub(n).map(|i| b[i]);
        let (xv, yv) = (x.unwrap_or(1), y.unwrap_or(1));
        if yv == 0 || xv == 0 {
            return Err(format!("matmul: empty batch dimension ({xv} and {yv})"));
        }
        if xv % yv == 0 {
            // b's dimension is a's, a leading part of it (grouped heads) or one element.
            let b_div = if yv == 1 { usize::MAX } else { xv / yv };
            out.push((xv, 1, b_div));
        } else if xv == 1 {
            // a is broadcast over b's dimension.
            out.push((yv, usize::MAX, 1));
        } else {
            return Err(format!(
                "matmul: batch dimension of size {yv} of b neither divides {xv} of a nor meets one element of a"
            ));
        }
    }
    Ok(out)
}

/// The shape a matmul reads `a` as: `a` itself, or under `outer` with one-element dimensions
/// for `b`'s batch dimensions inserted after `a`'s own (so the right-aligned rule broadcasts
/// `a` over them).
pub fn matmul_a_shape(a: &[usize], b: &[usize], outer: bool) -> Vec<usize> {
    if !outer {
        return a.to_vec();
    }
    let (ra, rb) = (a.len().saturating_sub(2), b.len().saturating_sub(2));
    let mut s = a[..ra].to_vec();
    s.extend(std::iter::repeat_n(1, rb));
    s.extend_from_slice(&a[ra..]);
    s
}

/// The output shape of a batched matmul (see the module docs), or why the operands do not fit.
pub fn matmul_shape(a: &[usize], b: &[usize], ta: bool, tb: bool) -> Result<Vec<usize>, String> {
    if a.len() < 2 || b.len() < 2 {
        return Err(format!(
            "matmul operands need two dimensions, got {a:?} and {b:?}"
        ));
    }
    let (ra, rb) = (a.len() - 2, b.len() - 2);
    let (m, ka) = if ta {
        (a[ra + 1], a[ra])
    } else {
        (a[ra], a[ra + 1])
    };
    let (kb, n) = if tb {
        (b[rb + 1], b[rb])
    } else {
        (b[rb], b[rb + 1])
    };
    if ka != kb {
        return Err(format!(
            "matmul contracts {ka} elements of {a:?} with {kb} of {b:?}"
        ));
    }
    let mut out: Vec<usize> = matmul_batches(&a[..ra], &b[..rb])
        .map_err(|e| format!("{e} ({a:?} and {b:?})"))?
        .into_iter()
        .map(|(o, _, _)| o)
        .collect();
    out.extend([m, n]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalar_references() {
        assert_eq!(BinaryFn::Max.apply(1.0, 2.0), 2.0);
        assert!(BinaryFn::Max.apply(f64::NAN, 2.0).is_nan());
        assert!((UnaryFn::Gelu.apply(1.0) - 0.841_191_990).abs() < 1e-8);
        assert!((UnaryFn::Silu.apply(1.0) - 0.731_058_579).abs() < 1e-8);
        assert_eq!(UnaryFn::Rsqrt.apply(4.0), 0.5);
        assert_eq!(UnaryFn::Log.apply(0.0), f64::NEG_INFINITY);
    }

    #[test]
    fn matmul_shapes_broadcast_batches() {
        assert_eq!(
            matmul_shape(&[1, 8, 4, 16], &[1, 2, 6, 16], false, true).unwrap(),
            vec![1, 8, 4, 6]
        );
        assert_eq!(
            matmul_shape(&[3, 4, 5], &[5, 7], false, false).unwrap(),
            vec![3, 4, 7]
        );
        assert!(matmul_shape(&[1, 6, 4, 16], &[1, 4, 16, 6], false, false).is_err());
        assert!(matmul_shape(&[4, 5], &[6, 7], false, false).is_err());
        // a broadcast over b's heads: rows [1, i, e] times per-head weights [h, e, d].
        assert_eq!(
            matmul_shape(&[1, 4, 5], &[3, 5, 2], false, false).unwrap(),
            vec![3, 4, 2]
        );
        assert_eq!(
            matmul_shape(&[4, 5], &[2, 3, 5, 2], false, false).unwrap(),
            vec![2, 3, 4, 2]
        );
        assert!(matmul_shape(&[2, 4, 5], &[3, 5, 2], false, false).is_err());
        let op = TileOp::Elementwise {
            program: vec![Instr::Binary {
                f: BinaryFn::Sub,
                a: 0,
                b: 1,
            }],
            trailing: vec![],
        };
        assert!(op.check(&[vec![2, 3], vec![2]], &[2, 3]).is_ok());
        assert!(op.check(&[vec![2, 3], vec![3]], &[2, 3]).is_err());
        let t = TileOp::Elementwise {
            program: vec![Instr::Binary {
                f: BinaryFn::Mul,
                a: 0,
                b: 1,
            }],
            trailing: vec![1],
        };
        assert!(t.check(&[vec![2, 3, 4], vec![3, 4]], &[2, 3, 4]).is_ok());
        assert!(t.check(&[vec![2, 3, 4], vec![5]], &[2, 3, 4]).is_err());
        assert_eq!(trailing_dims(&[2, 3, 4], 4), Some(1));
        assert_eq!(trailing_dims(&[2, 3, 4], 12), Some(2));
        assert_eq!(trailing_dims(&[2, 3, 4], 6), None);
        let rot = TileOp::Elementwise {
            program: vec![Instr::RotateHalf { x: 0 }],
            trailing: vec![],
        };
        assert!(rot.check(&[vec![2, 4]], &[2, 4]).is_ok());
        assert!(rot.check(&[vec![2, 3]], &[2, 3]).is_err());
        let rot_row = TileOp::Elementwise {
            program: vec![Instr::RotateHalf { x: 0 }],
            trailing: vec![],
        };
        assert!(rot_row.check(&[vec![2]], &[2, 4]).is_err());
    }
}
