//! The generated tile kernels: their PTX, and their bodies JIT-compiled for the host and run
//! on strided random operands against the CPU executor's f64 reference
//! (`mercury_runtime::tile_ref::run_tile`), for every `Instr` kind, both row reductions and
//! bf16 / f16 / f32 operands. Outputs are poisoned (NaN) first; the gaps between a strided
//! output's elements must still be NaN afterwards.

use crate::compile::{parse_module, run_pipeline, with_context};
use crate::*;
use half::{bf16, f16};
use melior::ExecutionEngine;
use mercury_plan::tile::{BinaryFn, Instr, RowReduceKind, UnaryFn};
use mercury_plan::tile_kernel::TileParam;
use mercury_plan::{DType, TileOp};
use mercury_runtime::tile_ref::run_tile;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A strided operand in host memory: its storage (f32 or 16-bit words) and strides.
struct Buf {
    dt: DType,
    f: Vec<f32>,
    h: Vec<u16>,
    strides: [usize; 3],
}

impl Buf {
    /// Storage for `dims` (`[d0, d1, cols]`, cols 1 for a row operand) with these strides,
    /// filled with NaN.
    fn new(dt: DType, dims: [usize; 3], strides: [usize; 3]) -> Buf {
        let len = (0..3)
            .map(|k| dims[k].saturating_sub(1) * strides[k])
            .sum::<usize>()
            + 1;
        let nan16 = match dt {
            DType::BF16 => 0x7FC0,
            _ => 0x7E00,
        };
        Buf {
            dt,
            f: if dt == DType::F32 {
                vec![f32::NAN; len]
            } else {
                vec![]
            },
            h: if dt == DType::F32 {
                vec![]
            } else {
                vec![nan16; len]
            },
            strides,
        }
    }
    fn at(&self, i: [usize; 3]) -> usize {
        i[0] * self.strides[0] + i[1] * self.strides[1] + i[2] * self.strides[2]
    }
    fn get(&self, k: usize) -> f64 {
        match self.dt {
            DType::BF16 => f64::from(bf16::from_bits(self.h[k])),
            DType::F16 => f64::from(f16::from_bits(self.h[k])),
            _ => f64::from(self.f[k]),
        }
    }
    /// Stores `v` rounded to the type; returns the stored value.
    fn set(&mut self, k: usize, v: f64) -> f64 {
        match self.dt {
            DType::BF16 => self.h[k] = bf16::from_f64(v).to_bits(),
            DType::F16 => self.h[k] = f16::from_f64(v).to_bits(),
            _ => self.f[k] = v as f32,
        }
        self.get(k)
    }
    fn ptr(&mut self) -> u64 {
        if self.dt == DType::F32 {
            self.f.as_mut_ptr() as u64
        } else {
            self.h.as_mut_ptr() as u64
        }
    }
    fn is_nan(&self, k: usize) -> bool {
        self.get(k).is_nan()
    }
    fn len(&self) -> usize {
        self.f.len().max(self.h.len())
    }
}

/// Calls kernel `k` of the JIT with `args` (one u64 per parameter: a pointer or an i64).
fn call(engine: &ExecutionEngine, k: &TileKernel, args: &[u64]) {
    assert_eq!(args.len(), k.params().len(), "{}", k.name());
    let mut storage = args.to_vec();
    let mut packed: Vec<*mut ()> = storage
        .iter_mut()
        .map(|s| (s as *mut u64).cast::<()>())
        .collect();
    // SAFETY: the packed wrapper reads one 8-byte value per parameter from `packed` (all in
    // `storage`); the pointers point to live buffers that cover every element the kernel
    // addresses for the given dims and strides (`Buf::new` sizes them so).
    unsafe { engine.invoke_packed(&k.name(), &mut packed) }
        .unwrap_or_else(|e| panic!("{}: {e}", k.name()));
}

fn with_jit(tiles: &[TileKernel], threads: u32, f: impl FnOnce(&ExecutionEngine)) {
    let text = host_module_mlir_with(&[], tiles, threads);
    with_context(|context, diagnostics| {
        let mut module = parse_module(context, diagnostics, &text)
            .unwrap_or_else(|e| panic!("host module: {e}\n{text}"));
        run_pipeline(
            context,
            diagnostics,
            &mut module,
            "builtin.module(convert-scf-to-cf, convert-to-llvm, reconcile-unrealized-casts)",
        )
        .expect("host lowering");
        let engine = ExecutionEngine::new(&module, 2, &[], false, false);
        for t in tiles {
            assert!(
                !engine.lookup(&t.name()).is_null(),
                "{} not in the JIT",
                t.name()
            );
        }
        f(&engine);
    });
}

fn tolerance(dts: &[DType], program: &[Instr]) -> f64 {
    let casts = program.iter().filter_map(|i| match i {
        Instr::Cast { to, .. } => Some(*to),
        _ => None,
    });
    let all: Vec<DType> = dts.iter().copied().chain(casts).collect();
    if all.contains(&DType::BF16) {
        2e-2
    } else if all.contains(&DType::F16) {
        4e-3
    } else {
        2e-5
    }
}

/// How an input of a case is shaped against the output.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Opd {
    /// The output's shape.
    Full,
    /// One value per row.
    Row,
    /// The output's last dimension only, broadcast over the others (a trailing operand).
    Trail,
}
use Opd::{Full, Row, Trail};

/// One elementwise case: `program` over `inputs` (their types and shapes) into an `out`-typed
/// output of view shape `shape`.
#[allow(clippy::too_many_arguments)]
fn run_case(
    engine: &ExecutionEngine,
    rng: &mut ChaCha8Rng,
    program: &[Instr],
    inputs: &[(DType, Opd)],
    out: DType,
    shape: &[usize],
    range: (f64, f64),
    masks: &[(usize, usize)],
) {
    let [d0, d1, cols] = mercury_plan::tile_kernel::geometry(shape);
    let trailing: Vec<usize> = (0..inputs.len())
        .filter(|i| inputs[*i].1 == Trail)
        .collect();
    let op = TileOp::Elementwise {
        program: program.to_vec(),
        trailing: trailing.clone(),
    };
    let dts: Vec<DType> = inputs.iter().map(|i| i.0).collect();
    let k = TileKernel::of(&op, &dts, out).unwrap();
    // The program's mask offsets are launch parameters (the kernel is the same for all).
    let mut prog = program.to_vec();
    let mut mi = 0;
    for ins in &mut prog {
        if let Instr::CausalMask {
            row_offset,
            col_offset,
            ..
        } = ins
        {
            (*row_offset, *col_offset) = masks[mi];
            mi += 1;
        }
    }
    let mut bufs = Vec::new();
    let mut vals = Vec::new();
    let mut shapes = Vec::new();
    for (n, &(dt, kind)) in inputs.iter().enumerate() {
        let (e0, e1, c) = match kind {
            Row => (d0, d1, 1),
            Full => (d0, d1, cols),
            Trail => (1, 1, cols),
        };
        // Padded, transposed (column-major within a batch) or broadcast strides.
        let strides = match (kind, n % 2) {
            (Row, _) => [d1 + 3, 1, 0],
            (Trail, _) => [0, 0, 2],
            (Full, 0) => [d1 * (cols + 2) + 5, cols + 2, 1],
            (Full, _) => [d1 * cols + 1, 1, d1],
        };
        let mut b = Buf::new(dt, [d0, d1, c], strides);
        let mut v = Vec::new();
        for i0 in 0..e0 {
            for i1 in 0..e1 {
                for i2 in 0..c {
                    let k = b.at([i0, i1, i2]);
                    v.push(b.set(k, rng.gen_range(range.0..range.1)));
                }
            }
        }
        let mut s = shape.to_vec();
        match kind {
            Row => {
                s.pop();
            }
            Trail => s = vec![cols],
            Full => {}
        }
        shapes.push(s);
        vals.push(v);
        bufs.push(b);
    }
    let want = run_tile(
        &TileOp::Elementwise {
            program: prog,
            trailing,
        },
        &vals,
        &shapes,
        shape,
    )
    .unwrap();
    let mut o = Buf::new(out, [d0, d1, cols], [d1 * (cols + 1) + 2, cols + 1, 1]);
    let mut args = vec![o.ptr()];
    for b in &mut bufs {
        args.push(b.ptr());
    }
    args.extend([d0, d1, cols].map(|x| x as u64));
    args.extend(o.strides.map(|x| x as u64));
    for b in &bufs {
        args.extend(b.strides.map(|x| x as u64));
    }
    for (r, c) in masks {
        args.extend([*r as u64, *c as u64]);
    }
    call(engine, &k, &args);
    let tol = tolerance(&[dts.clone(), vec![out]].concat(), program);
    let scale = range.0.abs().max(range.1.abs());
    let mut e = 0;
    let mut written = vec![false; o.len()];
    for i0 in 0..d0 {
        for i1 in 0..d1 {
            for i2 in 0..cols {
                let kk = o.at([i0, i1, i2]);
                written[kk] = true;
                let (got, w) = (o.get(kk), want[e]);
                e += 1;
                let ok = if w.is_nan() {
                    got.is_nan()
                } else if w.is_infinite() || got.is_infinite() {
                    got == w || (w.abs() > 1e30 && got.abs() > 1e30 && got.signum() == w.signum())
                } else {
                    (got - w).abs() <= tol * (1.0 + w.abs() + scale)
                };
                assert!(
                    ok,
                    "{} {:?} {inputs:?} -> {out:?} {shape:?} at {:?}: got {got}, want {w}",
                    k.name(),
                    program,
                    [i0, i1, i2]
                );
            }
        }
    }
    for (kk, w) in written.iter().enumerate() {
        assert!(
            *w || o.is_nan(kk),
            "{}: wrote outside the view at {kk}",
            k.name()
        );
    }
}

fn un(f: UnaryFn, x: usize) -> Instr {
    Instr::Unary { f, x }
}
fn bin(f: BinaryFn, a: usize, b: usize) -> Instr {
    Instr::Binary { f, a, b }
}

#[test]
fn host_elementwise_kernels_match_the_f64_reference() {
    use DType::{BF16, F16, F32};
    type Case = (
        Vec<Instr>,
        Vec<(DType, Opd)>,
        DType,
        (f64, f64),
        Vec<(usize, usize)>,
    );
    let mut cases: Vec<Case> = Vec::new();
    // Every unary function, every input / output type.
    for f in UnaryFn::ALL {
        let range = if *f == UnaryFn::Log {
            (0.01, 8.0)
        } else {
            (-6.0, 6.0)
        };
        for (i, o) in [
            (F32, F32),
            (BF16, BF16),
            (F16, F32),
            (F32, BF16),
            (F32, F16),
        ] {
            cases.push((vec![un(*f, 0)], vec![(i, Full)], o, range, vec![]));
        }
    }
    // Every binary function, full and row operands, mixed types.
    for f in BinaryFn::ALL {
        let range = (-3.0, 3.0);
        cases.push((
            vec![bin(*f, 0, 1)],
            vec![(F32, Full), (F32, Full)],
            F32,
            range,
            vec![],
        ));
        cases.push((
            vec![bin(*f, 0, 1)],
            vec![(BF16, Full), (F32, Row)],
            F32,
            range,
            vec![],
        ));
        cases.push((
            vec![bin(*f, 1, 0)],
            vec![(F16, Full), (BF16, Row)],
            BF16,
            range,
            vec![],
        ));
    }
    // Scale, casts, the causal mask at several offsets, and the MLP epilogue and softmax chains.
    cases.push((
        vec![Instr::Scale { by: 0.088, x: 0 }],
        vec![(F32, Full)],
        F32,
        (-5.0, 5.0),
        vec![],
    ));
    for to in [BF16, F16, F32] {
        cases.push((
            vec![Instr::Cast { to, x: 0 }],
            vec![(F32, Full)],
            F32,
            (-100.0, 100.0),
            vec![],
        ));
    }
    for m in [(0, 0), (3, 0), (0, 5), (16, 9)] {
        cases.push((
            vec![Instr::CausalMask {
                x: 0,
                row_offset: 0,
                col_offset: 0,
            }],
            vec![(F32, Full)],
            F32,
            (-2.0, 2.0),
            vec![m],
        ));
    }
    cases.push((
        vec![un(UnaryFn::Gelu, 0), Instr::Cast { to: BF16, x: 1 }],
        vec![(F32, Full)],
        BF16,
        (-5.0, 5.0),
        vec![],
    ));
    cases.push((
        vec![
            Instr::Scale { by: 0.125, x: 0 },
            Instr::CausalMask {
                x: 2,
                row_offset: 0,
                col_offset: 0,
            },
            bin(BinaryFn::Sub, 3, 1),
            un(UnaryFn::Exp, 4),
        ],
        vec![(F32, Full), (F32, Row)],
        F32,
        (-4.0, 4.0),
        vec![(4, 2)],
    ));
    let tiles: Vec<TileKernel> = cases
        .iter()
        .map(|(p, ins, o, _, _)| {
            let dts: Vec<DType> = ins.iter().map(|i| i.0).collect();
            let op = TileOp::Elementwise {
                program: p.clone(),
                trailing: vec![],
            };
            TileKernel::of(&op, &dts, *o).unwrap()
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(0x7469_6c65);
    with_jit(&tiles, 5, |engine| {
        for (p, ins, o, range, masks) in &cases {
            for shape in [vec![3usize, 7, 9], vec![1, 13], vec![2, 2, 4, 5], vec![6]] {
                run_case(engine, &mut rng, p, ins, *o, &shape, *range, masks);
            }
        }
    });
}

/// The layer's epilogues: RMSNorm's `x * rsqrt(mean + eps) * w` with a row operand and a
/// trailing weight, and rotary embeddings `x cos + rotate_half(x) sin` with trailing tables.
#[test]
fn host_norm_and_rotary_kernels_match_the_f64_reference() {
    use DType::{BF16, F32};
    let norm = vec![
        Instr::Scale { by: 0.25, x: 1 },
        Instr::AddScalar { value: 1e-5, x: 3 },
        un(UnaryFn::Rsqrt, 4),
        bin(BinaryFn::Mul, 0, 5),
        bin(BinaryFn::Mul, 6, 2),
    ];
    let rope = vec![
        bin(BinaryFn::Mul, 0, 1),
        Instr::RotateHalf { x: 0 },
        bin(BinaryFn::Mul, 4, 2),
        bin(BinaryFn::Add, 3, 5),
    ];
    type Case = (Vec<Instr>, Vec<(DType, Opd)>, DType, (f64, f64));
    let cases: Vec<Case> = vec![
        (
            norm.clone(),
            vec![(F32, Full), (F32, Row), (F32, Trail)],
            F32,
            (0.1, 3.0),
        ),
        (
            norm,
            vec![(BF16, Full), (F32, Row), (BF16, Trail)],
            BF16,
            (0.1, 3.0),
        ),
        (
            rope.clone(),
            vec![(F32, Full), (F32, Trail), (F32, Trail)],
            F32,
            (-2.0, 2.0),
        ),
        (
            rope,
            vec![(BF16, Full), (F32, Trail), (F32, Trail)],
            BF16,
            (-2.0, 2.0),
        ),
    ];
    let tiles: Vec<TileKernel> = cases
        .iter()
        .map(|(p, ins, o, _)| {
            let dts: Vec<DType> = ins.iter().map(|i| i.0).collect();
            let op = TileOp::Elementwise {
                program: p.clone(),
                trailing: vec![],
            };
            TileKernel::of(&op, &dts, *o).unwrap()
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(0x726f_7065);
    with_jit(&tiles, 5, |engine| {
        for (p, ins, o, range) in &cases {
            for shape in [vec![3usize, 7, 8], vec![1, 4], vec![2, 2, 4, 6]] {
                run_case(engine, &mut rng, p, ins, *o, &shape, *range, &[]);
            }
        }
    });
}

#[test]
fn host_row_reductions_match_the_f64_reference() {
    use DType::{BF16, F32};
    let mut tiles = Vec::new();
    let mut cases = Vec::new();
    for reduce in [RowReduceKind::Max, RowReduceKind::Sum] {
        for (i, o) in [(F32, F32), (BF16, F32), (F32, BF16)] {
            let op = TileOp::RowReduce { reduce };
            tiles.push(TileKernel::of(&op, &[i], o).unwrap());
            cases.push((op, i, o));
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(0x726f_7773);
    with_jit(&tiles, 3, |engine| {
        for (k, (op, i, o)) in tiles.iter().zip(&cases) {
            for shape in [
                vec![4usize, 5, 33],
                vec![1, 1],
                vec![3, 7],
                vec![2, 3, 2, 9],
            ] {
                let [d0, d1, cols] = mercury_plan::tile_kernel::geometry(&shape);
                let mut x = Buf::new(*i, [d0, d1, cols], [1, d0 * cols + 1, d0]);
                let mut v = Vec::new();
                for i0 in 0..d0 {
                    for i1 in 0..d1 {
                        for i2 in 0..cols {
                            let kk = x.at([i0, i1, i2]);
                            v.push(x.set(kk, rng.gen_range(-50.0..50.0)));
                        }
                    }
                }
                let oshape = shape[..shape.len() - 1].to_vec();
                let want = run_tile(op, &[v], std::slice::from_ref(&shape), &oshape).unwrap();
                let mut out = Buf::new(*o, [d0, d1, 1], [d1 + 2, 1, 0]);
                let mut args = vec![out.ptr(), x.ptr()];
                args.extend([d0, d1, cols].map(|v| v as u64));
                args.extend([out.strides[0] as u64, out.strides[1] as u64]);
                args.extend(x.strides.map(|v| v as u64));
                call(engine, k, &args);
                let tol = if *i == BF16 || *o == BF16 { 1e-2 } else { 1e-5 };
                let mut written = vec![false; out.len()];
                let mut e = 0;
                for i0 in 0..d0 {
                    for i1 in 0..d1 {
                        let kk = out.at([i0, i1, 0]);
                        written[kk] = true;
                        let (got, w) = (out.get(kk), want[e]);
                        e += 1;
                        assert!(
                            (got - w).abs() <= tol * (1.0 + w.abs() + cols as f64),
                            "{} {shape:?}: got {got}, want {w}",
                            k.name()
                        );
                    }
                }
                for (kk, w) in written.iter().enumerate() {
                    assert!(*w || out.is_nan(kk), "{}: wrote outside the view", k.name());
                }
            }
        }
    });
}

#[test]
fn ptx_of_generated_kernels() {
    let gelu = TileKernel::of(
        &TileOp::Elementwise {
            program: vec![
                un(UnaryFn::Gelu, 0),
                Instr::Cast {
                    to: DType::BF16,
                    x: 1,
                },
            ],
            trailing: vec![],
        },
        &[DType::F32],
        DType::BF16,
    )
    .unwrap();
    let rmax = TileKernel::of(
        &TileOp::RowReduce {
            reduce: RowReduceKind::Max,
        },
        &[DType::F16],
        DType::F32,
    )
    .unwrap();
    // Every instruction kind and element type compiles without libdevice calls.
    let mut all = vec![gelu.clone(), rmax.clone(), gelu.clone()];
    let mut progs: Vec<Vec<Instr>> = UnaryFn::ALL.iter().map(|f| vec![un(*f, 0)]).collect();
    progs.extend(BinaryFn::ALL.iter().map(|f| vec![bin(*f, 0, 1)]));
    progs.push(vec![
        Instr::RotateHalf { x: 0 },
        Instr::AddScalar { value: 1e-5, x: 2 },
    ]);
    progs.push(vec![
        Instr::Scale { by: 0.5, x: 0 },
        Instr::Cast {
            to: DType::F16,
            x: 2,
        },
        Instr::Cast {
            to: DType::BF16,
            x: 3,
        },
        Instr::CausalMask {
            x: 4,
            row_offset: 0,
            col_offset: 0,
        },
        bin(BinaryFn::Max, 5, 1),
    ]);
    for p in progs {
        for (i, o) in [(DType::F32, DType::BF16), (DType::F16, DType::F16)] {
            let op = TileOp::Elementwise {
                program: p.clone(),
                trailing: vec![],
            };
            all.push(TileKernel::of(&op, &[i, DType::BF16], o).unwrap());
        }
    }
    for reduce in [RowReduceKind::Max, RowReduceKind::Sum] {
        let op = TileOp::RowReduce { reduce };
        all.push(TileKernel::of(&op, &[DType::BF16], DType::F32).unwrap());
    }
    let ptx = plan_kernels_ptx(&all, &TargetOptions::default()).unwrap();
    for k in &all {
        assert!(
            ptx.contains(&format!(".entry {}(", k.name())),
            "{}",
            k.name()
        );
    }
    for k in [&gelu, &rmax] {
        let start = ptx
            .find(&format!(".entry {}(", k.name()))
            .unwrap_or_else(|| panic!("no entry {}", k.name()));
        let decl = &ptx[start..start + ptx[start..].find(')').unwrap()];
        let params = decl.matches(".param .u64").count();
        assert_eq!(params, k.params().len(), "{decl}");
        let ptrs = k
            .params()
            .iter()
            .filter(|p| matches!(p.1, TileParam::Ptr(_)))
            .count();
        assert_eq!(decl.matches(".ptr .global").count(), ptrs, "{decl}");
    }
    assert_eq!(ptx.matches(&format!(".entry {}(", gelu.name())).count(), 1);
    // The fixed kernels are there too, and nothing external is called.
    for k in DeviceKernel::ALL {
        assert!(ptx.contains(&format!(".entry {}(", k.name())), "{k}");
    }
    assert!(ptx.contains("ex2.approx.f32"));
    assert!(!ptx.contains(".extern"));
}
