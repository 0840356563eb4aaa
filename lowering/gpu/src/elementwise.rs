//! Generated device code for the plan's tile ops: one kernel per distinct elementwise program
//! (a `mercury_plan::tile::Instr` list with its element types) and one per row reduction,
//! written in the `arith`, `scf` and `llvm` dialects like the hand-written bodies of
//! `kernels.rs`, and instantiated for the device (`gpu.func`, PTX `ex2.approx` / `lg2.approx`)
//! and for the host (`func.func`, exact `llvm.exp2` / `llvm.log2`, what the tests JIT).
//! The parameters, geometry and numerics are the contract of `mercury_plan::tile_kernel`.
//!
//! Each work item `e < d0*d1*cols` (an elementwise kernel) or row `e < d0*d1` (a reduction)
//! is split into `(i0, i1, i2)` in 32-bit arithmetic (the host keeps the work items below
//! 2^31); each operand's element index `i0*s0 + i1*s1 + i2*s2` is computed in 64 bits.

use crate::kernels::{Flavor, GPU_PROLOGUE};
use mercury_plan::tile::{BinaryFn, Instr, RowReduceKind, UnaryFn, GELU_A, GELU_C};
use mercury_plan::tile_kernel::{TileKernel, TileParam};
use mercury_plan::DType;
use std::fmt::Write as _;

/// `tiles` without repeats (by entry name), in order.
pub(crate) fn dedup_tiles(tiles: &[TileKernel]) -> Vec<TileKernel> {
    let mut out: Vec<TileKernel> = Vec::new();
    for t in tiles {
        if !out.iter().any(|o| o.name() == t.name()) {
            out.push(t.clone());
        }
    }
    out
}

fn signature(k: &TileKernel, flavor: Flavor) -> String {
    k.params()
        .iter()
        .map(|(n, t)| {
            let ty = match t {
                TileParam::Ptr(_) => flavor.ptr(),
                TileParam::I64 => "i64",
            };
            format!("%{n}: {ty}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `gpu.func ... kernel` of `k` (indented for `gpu.module`).
pub(crate) fn gpu_func(k: &TileKernel) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "    gpu.func @{}({}) kernel {{",
        k.name(),
        signature(k, Flavor::Device)
    );
    out.push_str(GPU_PROLOGUE);
    for line in body(k, Flavor::Device).lines() {
        let _ = writeln!(out, "      {line}");
    }
    out.push_str("      gpu.return\n    }\n");
    out
}

/// The host `func.func` of `k`: the same body for `threads` simulated threads in sequence.
pub(crate) fn host_func(k: &TileKernel, threads: u32) -> String {
    let mut text = String::new();
    for line in body(k, Flavor::Host).lines() {
        let _ = writeln!(text, "      {line}");
    }
    crate::kernels::host_func(&k.name(), &signature(k, Flavor::Host), threads, &text)
}

/// An f32 constant, written as its bit pattern (exact).
fn f32c(x: f64) -> String {
    format!("0x{:08X}", (x as f32).to_bits())
}

/// Emits SSA text with fresh names.
struct Emitter {
    text: String,
    next: usize,
    flavor: Flavor,
}

impl Emitter {
    fn new(flavor: Flavor) -> Self {
        Emitter {
            text: String::new(),
            next: 0,
            flavor,
        }
    }

    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("%t{}", self.next)
    }

    /// Emits `%fresh = rhs` and returns the name.
    fn op(&mut self, rhs: &str) -> String {
        let v = self.fresh();
        let _ = writeln!(self.text, "  {v} = {rhs}");
        v
    }

    fn line(&mut self, l: &str) {
        let _ = writeln!(self.text, "  {l}");
    }

    fn cf(&mut self, x: f64) -> String {
        self.op(&format!("arith.constant {} : f32", f32c(x)))
    }

    fn exp2(&mut self, x: &str) -> String {
        let f = self.flavor.exp2();
        self.op(&format!("llvm.call_intrinsic \"{f}\"({x}) : (f32) -> f32"))
    }

    fn log2(&mut self, x: &str) -> String {
        let f = self.flavor.log2();
        self.op(&format!("llvm.call_intrinsic \"{f}\"({x}) : (f32) -> f32"))
    }

    /// `e^x` as `2^(x log2 e)`.
    fn exp(&mut self, x: &str) -> String {
        let c = self.cf(std::f64::consts::LOG2_E);
        let t = self.op(&format!("arith.mulf {x}, {c} : f32"));
        self.exp2(&t)
    }

    /// Element index `i0*s0 + i1*s1 + i2*s2` (i64) of operand `name`; `dims` is how many
    /// strides it has (2: no `i2`).
    fn index(&mut self, name: &str, dims: usize) -> String {
        let a0 = self.op(&format!("arith.muli %i0, %{name}_s0 : i64"));
        let a1 = self.op(&format!("arith.muli %i1, %{name}_s1 : i64"));
        let s = self.op(&format!("arith.addi {a0}, {a1} : i64"));
        if dims == 2 {
            return s;
        }
        let a2 = self.op(&format!("arith.muli %i2, %{name}_s2 : i64"));
        self.op(&format!("arith.addi {s}, {a2} : i64"))
    }

    /// Loads element `idx` of pointer `%name` of type `dt`, widened to f32.
    fn load(&mut self, name: &str, idx: &str, dt: DType) -> String {
        match dt {
            DType::F32 | DType::F64 => {
                let p = self.op(&format!(
                    "llvm.getelementptr inbounds %{name}[{idx}] : (!P, i64) -> !P, f32"
                ));
                self.op(&format!("llvm.load {p} : !P -> f32"))
            }
            DType::BF16 => {
                let p = self.op(&format!(
                    "llvm.getelementptr inbounds %{name}[{idx}] : (!P, i64) -> !P, i16"
                ));
                let h = self.op(&format!("llvm.load {p} : !P -> i16"));
                self.bf16_bits_to_f32(&h)
            }
            DType::F16 => {
                let p = self.op(&format!(
                    "llvm.getelementptr inbounds %{name}[{idx}] : (!P, i64) -> !P, f16"
                ));
                let h = self.op(&format!("llvm.load {p} : !P -> f16"));
                self.op(&format!("arith.extf {h} : f16 to f32"))
            }
        }
    }

    /// The f32 value of bf16 bits (exact).
    fn bf16_bits_to_f32(&mut self, h: &str) -> String {
        let w = self.op(&format!("arith.extui {h} : i16 to i32"));
        let c16 = self.op("arith.constant 16 : i32");
        let bits = self.op(&format!("arith.shli {w}, {c16} : i32"));
        self.op(&format!("arith.bitcast {bits} : i32 to f32"))
    }

    /// The bf16 bits (i16) of `x` rounded to nearest even; NaN stays a quiet NaN (the
    /// rounding of `CAST_F32_TO_BF16_BODY`).
    fn f32_to_bf16_bits(&mut self, x: &str) -> String {
        let c1 = self.op("arith.constant 1 : i32");
        let c16 = self.op("arith.constant 16 : i32");
        let c7fff = self.op("arith.constant 32767 : i32");
        let cq = self.op("arith.constant 64 : i32");
        let bits = self.op(&format!("arith.bitcast {x} : f32 to i32"));
        let hi = self.op(&format!("arith.shrui {bits}, {c16} : i32"));
        let lsb = self.op(&format!("arith.andi {hi}, {c1} : i32"));
        let bias = self.op(&format!("arith.addi {lsb}, {c7fff} : i32"));
        let r = self.op(&format!("arith.addi {bits}, {bias} : i32"));
        let rhi = self.op(&format!("arith.shrui {r}, {c16} : i32"));
        let q = self.op(&format!("arith.ori {hi}, {cq} : i32"));
        let nan = self.op(&format!("arith.cmpf uno, {x}, {x} : f32"));
        let res = self.op(&format!("arith.select {nan}, {q}, {rhi} : i32"));
        self.op(&format!("arith.trunci {res} : i32 to i16"))
    }

    /// Stores f32 `v` at element `idx` of `%name`, converted to `dt`.
    fn store(&mut self, name: &str, idx: &str, dt: DType, v: &str) {
        match dt {
            DType::F32 | DType::F64 => {
                let p = self.op(&format!(
                    "llvm.getelementptr inbounds %{name}[{idx}] : (!P, i64) -> !P, f32"
                ));
                self.line(&format!("llvm.store {v}, {p} : f32, !P"));
            }
            DType::BF16 => {
                let h = self.f32_to_bf16_bits(v);
                let p = self.op(&format!(
                    "llvm.getelementptr inbounds %{name}[{idx}] : (!P, i64) -> !P, i16"
                ));
                self.line(&format!("llvm.store {h}, {p} : i16, !P"));
            }
            DType::F16 => {
                let h = self.op(&format!("arith.truncf {v} : f32 to f16"));
                let p = self.op(&format!(
                    "llvm.getelementptr inbounds %{name}[{idx}] : (!P, i64) -> !P, f16"
                ));
                self.line(&format!("llvm.store {h}, {p} : f16, !P"));
            }
        }
    }

    fn unary(&mut self, f: UnaryFn, x: &str) -> String {
        match f {
            UnaryFn::Exp => self.exp(x),
            UnaryFn::Log => {
                let l = self.log2(x);
                let c = self.cf(std::f64::consts::LN_2);
                self.op(&format!("arith.mulf {l}, {c} : f32"))
            }
            UnaryFn::Gelu => {
                // 0.5 x (1 + tanh(C (x + A x^3))), tanh(y) = 1 - 2 / (e^(2y) + 1).
                let x2 = self.op(&format!("arith.mulf {x}, {x} : f32"));
                let x3 = self.op(&format!("arith.mulf {x2}, {x} : f32"));
                let a = self.cf(GELU_A);
                let ax3 = self.op(&format!("arith.mulf {a}, {x3} : f32"));
                let s = self.op(&format!("arith.addf {x}, {ax3} : f32"));
                let c2 = self.cf(2.0 * GELU_C);
                let y2 = self.op(&format!("arith.mulf {c2}, {s} : f32"));
                let e = self.exp(&y2);
                let one = self.cf(1.0);
                let two = self.cf(2.0);
                let den = self.op(&format!("arith.addf {e}, {one} : f32"));
                let q = self.op(&format!("arith.divf {two}, {den} : f32"));
                let t = self.op(&format!("arith.subf {one}, {q} : f32"));
                let opt = self.op(&format!("arith.addf {one}, {t} : f32"));
                let half = self.cf(0.5);
                let hx = self.op(&format!("arith.mulf {half}, {x} : f32"));
                self.op(&format!("arith.mulf {hx}, {opt} : f32"))
            }
            UnaryFn::Silu => {
                let neg = self.op(&format!("arith.negf {x} : f32"));
                let e = self.exp(&neg);
                let one = self.cf(1.0);
                let den = self.op(&format!("arith.addf {one}, {e} : f32"));
                self.op(&format!("arith.divf {x}, {den} : f32"))
            }
            UnaryFn::Rsqrt => {
                // 1 / sqrt(x), both correctly rounded (sqrt.rn and rcp.rn on the device).
                let r = self.op(&format!(
                    "llvm.call_intrinsic \"llvm.sqrt.f32\"({x}) : (f32) -> f32"
                ));
                let one = self.cf(1.0);
                self.op(&format!("arith.divf {one}, {r} : f32"))
            }
        }
    }

    fn binary(&mut self, f: BinaryFn, a: &str, b: &str) -> String {
        let op = match f {
            BinaryFn::Add => "arith.addf",
            BinaryFn::Sub => "arith.subf",
            BinaryFn::Mul => "arith.mulf",
            BinaryFn::Div => "arith.divf",
            // NaN if either is NaN, as the f64 reference.
            BinaryFn::Max => "arith.maximumf",
        };
        self.op(&format!("{op} {a}, {b} : f32"))
    }

    /// `x` rounded to `to` and widened back.
    fn cast(&mut self, to: DType, x: &str) -> String {
        match to {
            DType::F32 | DType::F64 => x.to_string(),
            DType::BF16 => {
                let h = self.f32_to_bf16_bits(x);
                self.bf16_bits_to_f32(&h)
            }
            DType::F16 => {
                let h = self.op(&format!("arith.truncf {x} : f32 to f16"));
                self.op(&format!("arith.extf {h} : f16 to f32"))
            }
        }
    }
}

/// Splits `%e` (i64, below 2^31) into `%i0, %i1, %i2` (i64) over `[d0, d1, cols]`; for a
/// reduction (`rows`), `%e` is a row and only `%i0, %i1` are defined.
const SPLIT_ELEMENT: &str = "\
  %e32 = arith.trunci %e : i64 to i32
  %r32 = arith.divui %e32, %cols32 : i32
  %rc32 = arith.muli %r32, %cols32 : i32
  %i2_32 = arith.subi %e32, %rc32 : i32
  %i1_32 = arith.remui %r32, %d1_32 : i32
  %i0_32 = arith.divui %r32, %d1_32 : i32
  %i0 = arith.extui %i0_32 : i32 to i64
  %i1 = arith.extui %i1_32 : i32 to i64
  %i2 = arith.extui %i2_32 : i32 to i64
";

const SPLIT_ROW: &str = "\
  %e32 = arith.trunci %e : i64 to i32
  %i1_32 = arith.remui %e32, %d1_32 : i32
  %i0_32 = arith.divui %e32, %d1_32 : i32
  %i0 = arith.extui %i0_32 : i32 to i64
  %i1 = arith.extui %i1_32 : i32 to i64
";

/// The grid-stride body of `k` (`%gid`, `%stride` and the parameters in scope).
pub(crate) fn body(k: &TileKernel, flavor: Flavor) -> String {
    let mut h = String::new();
    h.push_str("%rows = arith.muli %d0, %d1 : i64\n");
    h.push_str("%cols32 = arith.trunci %cols : i64 to i32\n");
    h.push_str("%d1_32 = arith.trunci %d1 : i64 to i32\n");
    let mut em = Emitter::new(flavor);
    match k {
        TileKernel::Elementwise {
            program,
            inputs,
            output,
        } => {
            h.push_str("%total = arith.muli %rows, %cols : i64\n");
            h.push_str("scf.for %e = %gid to %total step %stride : i64 {\n");
            h.push_str(SPLIT_ELEMENT);
            let mut vals: Vec<String> = Vec::with_capacity(inputs.len() + program.len());
            for (i, dt) in inputs.iter().enumerate() {
                let name = format!("in{i}");
                let idx = em.index(&name, 3);
                vals.push(em.load(&name, &idx, *dt));
            }
            let mut mask = 0;
            let n_inputs = inputs.len();
            for ins in program {
                let v = match *ins {
                    Instr::Unary { f, x } => em.unary(f, &vals[x]),
                    Instr::Binary { f, a, b } => {
                        let (a, b) = (vals[a].clone(), vals[b].clone());
                        em.binary(f, &a, &b)
                    }
                    Instr::Scale { by, x } => {
                        let c = em.cf(by);
                        let x = vals[x].clone();
                        em.op(&format!("arith.mulf {x}, {c} : f32"))
                    }
                    Instr::AddScalar { value, x } => {
                        let c = em.cf(value);
                        let x = vals[x].clone();
                        em.op(&format!("arith.addf {x}, {c} : f32"))
                    }
                    Instr::RotateHalf { x } if x < n_inputs => {
                        // Input x again at column (i2 + cols/2) mod cols, negated in the
                        // first half of the row.
                        let name = format!("in{x}");
                        let c2 = em.op("arith.constant 2 : i64");
                        let half = em.op(&format!("arith.divui %cols, {c2} : i64"));
                        let up = em.op(&format!("arith.addi %i2, {half} : i64"));
                        let wrap = em.op(&format!("arith.cmpi uge, {up}, %cols : i64"));
                        let down = em.op(&format!("arith.subi %i2, {half} : i64"));
                        let col = em.op(&format!("arith.select {wrap}, {down}, {up} : i64"));
                        let a0 = em.op(&format!("arith.muli %i0, %{name}_s0 : i64"));
                        let a1 = em.op(&format!("arith.muli %i1, %{name}_s1 : i64"));
                        let a2 = em.op(&format!("arith.muli {col}, %{name}_s2 : i64"));
                        let s01 = em.op(&format!("arith.addi {a0}, {a1} : i64"));
                        let idx = em.op(&format!("arith.addi {s01}, {a2} : i64"));
                        let v = em.load(&name, &idx, inputs[x]);
                        let neg = em.op(&format!("arith.negf {v} : f32"));
                        em.op(&format!("arith.select {wrap}, {v}, {neg} : f32"))
                    }
                    Instr::RotateHalf { .. } => {
                        // TileOp::check refuses a rotation of a computed value; a kernel of
                        // one would read garbage, so it computes NaN instead.
                        em.cf(f64::NAN)
                    }
                    Instr::Cast { to, x } => {
                        let x = vals[x].clone();
                        em.cast(to, &x)
                    }
                    Instr::CausalMask { x, .. } => {
                        // -inf where key position mask_col + i2 is after query mask_row + i1.
                        let q = em.op(&format!("arith.addi %mask{mask}_row, %i1 : i64"));
                        let kk = em.op(&format!("arith.addi %mask{mask}_col, %i2 : i64"));
                        mask += 1;
                        let after = em.op(&format!("arith.cmpi sgt, {kk}, {q} : i64"));
                        let ninf = em.op("arith.constant 0xFF800000 : f32");
                        let x = vals[x].clone();
                        em.op(&format!("arith.select {after}, {ninf}, {x} : f32"))
                    }
                };
                vals.push(v);
            }
            let idx = em.index("out", 3);
            let last = vals.last().cloned().unwrap_or_default();
            em.store("out", &idx, *output, &last);
            h.push_str(&em.text);
            h.push_str("}\n");
        }
        TileKernel::RowReduce {
            reduce,
            input,
            output,
        } => {
            h.push_str("%r_c0 = arith.constant 0 : i64\n");
            h.push_str("%r_c1 = arith.constant 1 : i64\n");
            let init = match reduce {
                RowReduceKind::Max => "0xFF800000",
                RowReduceKind::Sum => "0x00000000",
            };
            let _ = writeln!(h, "%r_init = arith.constant {init} : f32");
            h.push_str("scf.for %e = %gid to %rows step %stride : i64 {\n");
            h.push_str(SPLIT_ROW);
            let base = em.index("x", 2);
            em.line(
                "%acc = scf.for %i2 = %r_c0 to %cols step %r_c1 iter_args(%a = %r_init) -> (f32) : i64 {",
            );
            let off = em.op("arith.muli %i2, %x_s2 : i64");
            let idx = em.op(&format!("arith.addi {base}, {off} : i64"));
            let v = em.load("x", &idx, *input);
            let n = match reduce {
                // The row max ignores NaN (f64::max in the reference's fold): `v > a ? v : a`
                // with `a` never NaN. (arith.maxnumf would become a libdevice call.)
                RowReduceKind::Max => {
                    let gt = em.op(&format!("arith.cmpf ogt, {v}, %a : f32"));
                    em.op(&format!("arith.select {gt}, {v}, %a : f32"))
                }
                RowReduceKind::Sum => em.op(&format!("arith.addf %a, {v} : f32")),
            };
            em.line(&format!("  scf.yield {n} : f32"));
            em.line("}");
            let oidx = em.index("out", 2);
            em.store("out", &oidx, *output, "%acc");
            h.push_str(&em.text);
            h.push_str("}\n");
        }
    }
    h.replace("!P", flavor.ptr())
}

#[cfg(test)]
mod tests;
