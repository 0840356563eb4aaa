//! Unit tests: PTX generation (device) and numerics of the same kernel bodies
//! JIT-compiled for the host with melior's ExecutionEngine.

use crate::compile::{parse_module, run_pipeline, with_context};
use crate::*;
use half::bf16;
use melior::ExecutionEngine;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

// ---------------------------------------------------------------- device ---

fn all_ptx() -> String {
    device_kernels_ptx(&TargetOptions::default()).expect("PTX for all kernels")
}

/// The `.param` declarations of `.entry name(...)`.
fn entry_params(ptx: &str, name: &str) -> Option<Vec<String>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let end = rest.find(')')?;
    Some(
        rest[..end]
            .lines()
            .skip(1)
            .map(str::trim)
            .filter(|l| l.starts_with(".param"))
            .map(str::to_string)
            .collect(),
    )
}

#[test]
fn ptx_has_target_version_and_every_entry_with_the_contract_params() {
    let ptx = all_ptx();
    // For gpu-check/check_ptx.py (runs this PTX on a real GPU).
    if let Some(path) = std::env::var_os("MERCURY_LOWERING_DUMP_PTX") {
        std::fs::write(path, &ptx).expect("write the PTX dump");
    }
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert!(ptx.contains(".version 8.0"), "{ptx}");
    assert!(ptx.contains(".address_size 64"));
    assert!(!ptx.contains("__nv_"), "libdevice call left in PTX");
    assert!(!ptx.contains(".extern"), "external declaration left in PTX");
    for kernel in DeviceKernel::ALL {
        let params = entry_params(&ptx, kernel.name())
            .unwrap_or_else(|| panic!("no .entry for {kernel}:\n{ptx}"));
        assert_eq!(params.len(), kernel.params().len(), "{kernel}: {params:?}");
        for (decl, param) in params.iter().zip(kernel.params()) {
            let want = match param.ty {
                ParamType::F32 => ".param .f32",
                _ => ".param .u64",
            };
            assert!(decl.starts_with(want), "{kernel}.{}: {decl}", param.name);
            assert_eq!(
                param.ty.is_pointer(),
                decl.contains(".ptr .global"),
                "{kernel}.{}: {decl}",
                param.name
            );
        }
    }
    // The LSE kernels use the approximate PTX transcendental instructions.
    assert!(ptx.contains("ex2.approx.f32"));
    assert!(ptx.contains("lg2.approx.f32"));
    // Grid-stride loop: the kernels read the launch geometry.
    for sreg in ["%tid.x", "%ntid.x", "%ctaid.x", "%nctaid.x"] {
        assert!(ptx.contains(sreg), "{sreg}");
    }
}

#[test]
fn emitted_mlir_is_one_gpu_module_of_kernels() {
    let text = gpu_module_mlir(&DeviceKernel::ALL);
    assert_eq!(text, emit_gpu_mlir(&DeviceKernel::ALL));
    assert!(text.contains("gpu.container_module"));
    assert_eq!(text.matches("gpu.module @mercury_kernels").count(), 1);
    assert_eq!(text.matches(") kernel {").count(), DeviceKernel::ALL.len());
    assert!(text.contains("!llvm.ptr<1>"));
    // Duplicates are emitted once; a subset gives only its kernels.
    let some = gpu_module_mlir(&[DeviceKernel::AddF32, DeviceKernel::AddF32]);
    assert_eq!(some.matches(") kernel {").count(), 1);
    let ptx = compile_to_ptx(&some, &TargetOptions::default()).unwrap();
    assert!(ptx.contains(".entry mercury_add_f32("));
    assert!(!ptx.contains(".entry mercury_fill_f32("));
}

#[test]
fn kernel_table_is_consistent() {
    for kernel in DeviceKernel::ALL {
        assert_eq!(DeviceKernel::from_name(kernel.name()), Some(kernel));
        let counts = kernel
            .params()
            .iter()
            .filter(|p| p.ty == ParamType::I64)
            .count();
        assert!(kernel.work_items(&vec![3; counts]).is_some());
        assert!(kernel.work_items(&vec![3; counts + 1]).is_none());
    }
    assert_eq!(DeviceKernel::from_name("nope"), None);
    assert_eq!(DeviceKernel::LseMergeO.work_items(&[4, 128]), Some(512));
    assert_eq!(DeviceKernel::Copy2dB16.work_items(&[4, 3, 8, 3]), Some(12));
    assert_eq!(DeviceKernel::LseMergeLse.work_items(&[4]), Some(4));
    assert_eq!(DeviceKernel::FillF32.params()[1].ty.arg_size(), 4);
    assert_eq!(launch_dims(0, 132), (1, 256));
    assert_eq!(launch_dims(1000, 132), (4, 256));
    assert_eq!(launch_dims(1 << 30, 132), (132 * 32, 256));
    assert_eq!(launch_dims(1 << 30, 0), (32, 256));
}

#[test]
fn chip_option_changes_the_target() {
    let opts = TargetOptions {
        chip: "sm_80".into(),
        features: "+ptx70".into(),
        opt_level: 2,
    };
    let ptx = device_kernels_ptx(&opts).unwrap();
    assert!(ptx.contains(".target sm_80"), "{ptx}");
    assert!(ptx.contains(".version 7.0"));
    assert!(!ptx.contains("__nv_"));

    let ptx = device_kernels_ptx(&TargetOptions::for_chip("sm_90a").unwrap()).unwrap();
    assert!(ptx.contains(".target sm_90a"));
    let opts = TargetOptions::for_chip("sm_100").unwrap();
    assert_eq!(opts.features, "+ptx86");
    let ptx = device_kernels_ptx(&opts).unwrap();
    assert!(ptx.contains(".target sm_100"));
    assert!(ptx.contains(".version 8.6"));
    // An older chip, where max.NaN is not native, still compiles.
    let ptx = device_kernels_ptx(&TargetOptions::for_chip("sm_70").unwrap()).unwrap();
    assert!(ptx.contains(".target sm_70"));
}

#[test]
fn invalid_target_options_are_errors_not_aborts() {
    let bad = |chip: &str, features: &str, opt_level: u8| {
        let opts = TargetOptions {
            chip: chip.into(),
            features: features.into(),
            opt_level,
        };
        let err = device_kernels_ptx(&opts).unwrap_err();
        assert!(
            matches!(err, LoweringError::InvalidTarget(_)),
            "{chip} {features} {opt_level}: {err}"
        );
    };
    bad("sm_999", "+ptx80", 3); // LLVM would ignore it and print a warning
    bad("foo", "+ptx80", 3);
    bad("", "+ptx80", 3);
    bad("sm_100", "+ptx80", 3); // LLVM would abort the process
    bad("sm_90", "+ptx60", 3); // LLVM would abort the process
    bad("sm_90", "+bogus", 3);
    bad("sm_90", "", 3);
    bad("sm_90", "+ptx99", 3);
    bad("sm_90", "+ptx80", 4);
    bad("sm_90 features=+ptx80", "+ptx80", 3); // no pipeline injection
    assert!(TargetOptions::for_chip("sm_1").is_err());
    // Several features: the highest PTX version counts.
    let opts = TargetOptions {
        chip: "sm_90a".into(),
        features: "+ptx78,+ptx80".into(),
        opt_level: 3,
    };
    assert!(opts.validate().is_ok());
}

#[test]
fn invalid_mlir_is_an_error() {
    let opts = TargetOptions::default();
    let err = compile_to_ptx("this is not MLIR", &opts).unwrap_err();
    assert!(
        matches!(err, LoweringError::Parse(ref m) if !m.is_empty()),
        "{err}"
    );

    // Parses, but an op is used wrongly (type mismatch) -> parse/verify error.
    let text = gpu_module_mlir(&[DeviceKernel::AddF32]).replace(
        "%s = arith.addf %a, %b : f32",
        "%s = arith.addi %a, %b : f32",
    );
    let err = compile_to_ptx(&text, &opts).unwrap_err();
    assert!(
        matches!(err, LoweringError::Parse(_) | LoweringError::Verify(_)),
        "{err}"
    );

    // Well-formed, but not a GPU module: nothing to serialise.
    let err = compile_to_ptx("module {}", &opts).unwrap_err();
    assert!(matches!(err, LoweringError::Ptx(_)), "{err}");

    // math.exp lowers to a libdevice call (__nv_expf) that is not linked:
    // the result must be an error, never PTX with a dangling call.
    let text = r#"
module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f(%p: !llvm.ptr<1>) kernel {
      %v = llvm.load %p : !llvm.ptr<1> -> f32
      %e = math.exp %v : f32
      llvm.store %e, %p : f32, !llvm.ptr<1>
      gpu.return
    }
  }
}"#;
    assert_eq!(
        compile_to_ptx(text, &opts),
        Err(LoweringError::UnresolvedSymbols(vec![
            "__nv_expf".to_string()
        ]))
    );
    // Still works after the errors.
    assert!(all_ptx().contains(".entry mercury_fill_f32("));
}

#[test]
fn nvvm_ir_is_available_for_debugging() {
    let ir = lower_to_nvvm_mlir(
        &gpu_module_mlir(&[DeviceKernel::LseMergeLse]),
        &TargetOptions::default(),
    )
    .unwrap();
    assert!(ir.contains("llvm.func @mercury_lse_merge_lse_f32"), "{ir}");
    assert!(ir.contains("nvvm.read.ptx.sreg.tid.x"));
    assert!(ir.contains("#nvvm.target<O = 3, chip = \"sm_90\", features = \"+ptx80\">"));
    assert!(!ir.contains("scf."));
    assert!(ptx_pipeline(&TargetOptions::default()).contains("gpu-module-to-binary{format=isa}"));
}

#[test]
fn compilation_is_thread_safe() {
    let handles: Vec<_> = (0..3)
        .map(|i| {
            std::thread::spawn(move || {
                let k = DeviceKernel::ALL[i];
                compile_to_ptx(&gpu_module_mlir(&[k]), &TargetOptions::default())
                    .map(|ptx| ptx.contains(&format!(".entry {}(", k.name())))
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), Ok(true));
    }
}

// ------------------------------------------------------------------ host ---

/// One launch argument for the host instantiation.
enum Arg {
    Ptr(*mut u8),
    I64(i64),
    F32(f32),
}

fn ptr<T>(v: &mut [T]) -> Arg {
    Arg::Ptr(v.as_mut_ptr().cast())
}

struct Jit<'a> {
    engine: &'a ExecutionEngine,
}

impl Jit<'_> {
    fn call(&self, kernel: DeviceKernel, args: &[Arg]) {
        let params = kernel.params();
        assert_eq!(args.len(), params.len(), "{kernel}");
        let mut storage: Vec<u64> = args
            .iter()
            .zip(params)
            .map(|(arg, param)| match (arg, param.ty) {
                (Arg::Ptr(p), t) if t.is_pointer() => *p as u64,
                (Arg::I64(v), ParamType::I64) => *v as u64,
                (Arg::F32(v), ParamType::F32) => u64::from(v.to_bits()),
                _ => panic!("{kernel}: wrong argument kind for {}", param.name),
            })
            .collect();
        // Each packed argument is a pointer to the argument's value; a u64
        // slot holds a pointer or an i64, and an f32 in its low 4 bytes
        // (little-endian host).
        let mut packed: Vec<*mut ()> = storage
            .iter_mut()
            .map(|slot| (slot as *mut u64).cast::<()>())
            .collect();
        // SAFETY: the packed wrapper of `kernel` reads one value per parameter
        // from the pointers in `packed` (all live in `storage`, 8-byte
        // aligned, large enough for i64/ptr/f32). The pointer arguments point
        // to live buffers sized by the caller for the given counts (checked by
        // the kernels' bounds, which the tests exercise).
        unsafe { self.engine.invoke_packed(kernel.name(), &mut packed) }
            .unwrap_or_else(|e| panic!("{kernel}: {e}"));
    }
}

/// JIT-compiles the host instantiation of every kernel, simulating `threads`
/// GPU threads, and runs `f` with it.
fn with_host_kernels(threads: u32, f: impl FnOnce(&Jit)) {
    let text = host_module_mlir(&DeviceKernel::ALL, threads);
    with_context(|context, diagnostics| {
        let mut module = parse_module(context, diagnostics, &text).expect("host module parses");
        run_pipeline(
            context,
            diagnostics,
            &mut module,
            "builtin.module(convert-scf-to-cf, convert-to-llvm, reconcile-unrealized-casts)",
        )
        .expect("host lowering");
        let engine = ExecutionEngine::new(&module, 2, &[], false, false);
        for k in DeviceKernel::ALL {
            assert!(!engine.lookup(k.name()).is_null(), "{k} not in the JIT");
        }
        f(&Jit { engine: &engine });
    });
}

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(0x006d_6572_6375_7279)
}

fn close(got: f32, want: f64, tol: f64) -> bool {
    if want.is_nan() {
        return got.is_nan();
    }
    if want.is_infinite() {
        return f64::from(got) == want;
    }
    (f64::from(got) - want).abs() <= tol * (1.0 + want.abs())
}

#[test]
fn host_lse_merge_matches_f64_reference() {
    let mut rng = rng();
    with_host_kernels(7, |jit| {
        for &(rows, d) in &[(1usize, 1usize), (5, 3), (17, 8), (3, 64), (2, 1)] {
            let ninf = f32::NEG_INFINITY;
            let mut lse_acc: Vec<f32> = (0..rows).map(|_| rng.gen_range(-20.0..20.0)).collect();
            let mut lse_part: Vec<f32> = (0..rows).map(|_| rng.gen_range(-20.0..20.0)).collect();
            // Special rows: empty accumulator, empty part, both empty, equal.
            let specials = [(ninf, 1.5), (2.0, ninf), (ninf, ninf), (3.25, 3.25)];
            for (i, &(a, p)) in specials.iter().enumerate().take(rows) {
                lse_acc[i] = a;
                lse_part[i] = p;
            }
            let mut o_acc: Vec<f32> = (0..rows * d).map(|_| rng.gen_range(-3.0..3.0)).collect();
            let mut o_part: Vec<f32> = (0..rows * d).map(|_| rng.gen_range(-3.0..3.0)).collect();
            // An empty side's o is never used (may be garbage).
            for r in 0..rows {
                for c in 0..d {
                    if lse_acc[r] == ninf && lse_part[r] != ninf {
                        o_acc[r * d + c] = f32::NAN;
                    }
                    if lse_part[r] == ninf {
                        o_part[r * d + c] = f32::NAN;
                    }
                }
            }
            // f64 reference, straight from the contract.
            let mut want_o: Vec<f64> = o_acc.iter().map(|&x| f64::from(x)).collect();
            let mut want_lse: Vec<f64> = lse_acc.iter().map(|&x| f64::from(x)).collect();
            for r in 0..rows {
                let (la, lp) = (f64::from(lse_acc[r]), f64::from(lse_part[r]));
                let m = la.max(lp);
                if m == f64::NEG_INFINITY {
                    continue;
                }
                let new = m + ((la - m).exp() + (lp - m).exp()).ln();
                want_lse[r] = new;
                for c in 0..d {
                    let e = r * d + c;
                    let a = if la == f64::NEG_INFINITY {
                        0.0
                    } else {
                        f64::from(o_acc[e]) * (la - new).exp()
                    };
                    let p = if lp == f64::NEG_INFINITY {
                        0.0
                    } else {
                        f64::from(o_part[e]) * (lp - new).exp()
                    };
                    want_o[e] = a + p;
                }
            }
            let lse_part_before = lse_part.clone();
            let lse_acc_before = lse_acc.clone();
            let (n_rows, n_d) = (rows as i64, d as i64);
            jit.call(
                DeviceKernel::LseMergeO,
                &[
                    ptr(&mut o_acc),
                    ptr(&mut lse_acc),
                    ptr(&mut o_part),
                    ptr(&mut lse_part),
                    Arg::I64(n_rows),
                    Arg::I64(n_d),
                ],
            );
            assert_eq!(
                lse_acc.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                lse_acc_before
                    .iter()
                    .map(|x| x.to_bits())
                    .collect::<Vec<_>>(),
                "the _o kernel must not write lse_acc"
            );
            jit.call(
                DeviceKernel::LseMergeLse,
                &[ptr(&mut lse_acc), ptr(&mut lse_part), Arg::I64(n_rows)],
            );
            assert_eq!(lse_part, lse_part_before);
            for r in 0..rows {
                assert!(
                    close(lse_acc[r], want_lse[r], 1e-6),
                    "rows={rows} d={d} lse[{r}]: {} vs {}",
                    lse_acc[r],
                    want_lse[r]
                );
            }
            for e in 0..rows * d {
                let r = e / d;
                if lse_acc_before[r] == ninf && lse_part_before[r] == ninf {
                    // Untouched, bit for bit.
                    assert!(close(o_acc[e], want_o[e], 0.0), "untouched o[{e}]");
                    continue;
                }
                assert!(
                    close(o_acc[e], want_o[e], 2e-6),
                    "rows={rows} d={d} o[{e}]: {} vs {}",
                    o_acc[e],
                    want_o[e]
                );
            }
        }
    });
}

#[test]
fn host_add_fill_and_bounds() {
    let mut rng = rng();
    // threads > n and threads < n: both exercise the grid-stride loop bounds.
    for threads in [1, 7, 64] {
        with_host_kernels(threads, |jit| {
            for n in [0usize, 1, 5, 33] {
                // One extra guard element checks that nothing past n is written.
                let mut acc: Vec<f32> = (0..=n).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let mut part: Vec<f32> = (0..=n).map(|_| rng.gen_range(-1.0..1.0)).collect();
                let want: Vec<f32> = (0..=n)
                    .map(|i| if i < n { acc[i] + part[i] } else { acc[i] })
                    .collect();
                jit.call(
                    DeviceKernel::AddF32,
                    &[ptr(&mut acc), ptr(&mut part), Arg::I64(n as i64)],
                );
                assert_eq!(acc, want, "add n={n} threads={threads}");

                let mut dst = vec![7.0f32; n + 1];
                jit.call(
                    DeviceKernel::FillF32,
                    &[
                        ptr(&mut dst),
                        Arg::F32(f32::NEG_INFINITY),
                        Arg::I64(n as i64),
                    ],
                );
                assert!(dst[..n].iter().all(|&x| x == f32::NEG_INFINITY));
                assert_eq!(dst[n], 7.0, "fill wrote past n");
            }
        });
    }
}

#[test]
fn host_bf16_casts_round_to_nearest_even() {
    let mut rng = rng();
    let mut src: Vec<f32> = vec![
        0.0,
        -0.0,
        1.0,
        -1.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7f80_0001), // signalling NaN that rounding would make inf
        f32::from_bits(0xff80_0001),
        f32::MAX, // rounds up to inf
        f32::MIN,
        f32::MIN_POSITIVE,
        f32::from_bits(0x0000_0001), // smallest subnormal
        f32::from_bits(0x3f80_8000), // tie, even below: stays 0x3f80
        f32::from_bits(0x3f81_8000), // tie, odd below: rounds up to 0x3f82
        f32::from_bits(0x3f80_8001), // just above the tie: rounds up
        f32::from_bits(0x3f80_7fff), // just below the tie: rounds down
        f32::from_bits(0x7f7f_8000), // tie at the top: rounds to inf
    ];
    for _ in 0..2000 {
        src.push(f32::from_bits(rng.gen()));
        src.push(rng.gen_range(-1e4f32..1e4));
    }
    let n = src.len();
    with_host_kernels(7, |jit| {
        let mut dst = vec![0xabcdu16; n + 1];
        jit.call(
            DeviceKernel::CastF32ToBf16,
            &[ptr(&mut dst), ptr(&mut src), Arg::I64(n as i64)],
        );
        assert_eq!(dst[n], 0xabcd, "wrote past n");
        for i in 0..n {
            let want = bf16::from_f32(src[i]);
            if src[i].is_nan() {
                let got = bf16::from_bits(dst[i]);
                assert!(got.is_nan(), "NaN {:#x} -> {:#x}", src[i].to_bits(), dst[i]);
                assert_eq!(got.is_sign_negative(), src[i].is_sign_negative());
            } else {
                assert_eq!(
                    dst[i],
                    want.to_bits(),
                    "f32 {:#010x} ({})",
                    src[i].to_bits(),
                    src[i]
                );
            }
        }

        // bf16 -> f32 is exact, for every bit pattern.
        let mut bits: Vec<u16> = (0..=u16::MAX).collect();
        let mut wide = vec![0.5f32; bits.len() + 1];
        jit.call(
            DeviceKernel::CastBf16ToF32,
            &[ptr(&mut wide), ptr(&mut bits), Arg::I64(bits.len() as i64)],
        );
        for (&b, &w) in bits.iter().zip(&wide) {
            assert_eq!(w.to_bits(), u32::from(b) << 16);
        }
        assert_eq!(wide[bits.len()], 0.5);
    });
}

#[test]
fn host_strided_copies_pack_and_unpack() {
    let mut rng = rng();
    with_host_kernels(5, |jit| {
        for &(rows, cols, dst_stride, src_stride) in &[
            (1usize, 1usize, 1usize, 1usize),
            (4, 3, 3, 7),  // pack
            (4, 3, 9, 3),  // unpack
            (6, 5, 8, 11), // both strided
            (0, 4, 4, 4),  // empty
            (3, 0, 2, 2),  // empty
        ] {
            let src_len = rows.saturating_sub(1) * src_stride + cols + 1;
            let dst_len = rows.saturating_sub(1) * dst_stride + cols + 1;
            let args = |dst: Arg, src: Arg| {
                [
                    dst,
                    src,
                    Arg::I64(rows as i64),
                    Arg::I64(cols as i64),
                    Arg::I64(dst_stride as i64),
                    Arg::I64(src_stride as i64),
                ]
            };
            let mut src16: Vec<u16> = (0..src_len).map(|_| rng.gen()).collect();
            let mut dst16 = vec![0x5a5au16; dst_len];
            let mut src32: Vec<u32> = (0..src_len).map(|_| rng.gen()).collect();
            let mut dst32 = vec![0x5a5a_5a5au32; dst_len];
            let mut want16 = dst16.clone();
            let mut want32 = dst32.clone();
            for r in 0..rows {
                for c in 0..cols {
                    want16[r * dst_stride + c] = src16[r * src_stride + c];
                    want32[r * dst_stride + c] = src32[r * src_stride + c];
                }
            }
            jit.call(
                DeviceKernel::Copy2dB16,
                &args(ptr(&mut dst16), ptr(&mut src16)),
            );
            jit.call(
                DeviceKernel::Copy2dB32,
                &args(ptr(&mut dst32), ptr(&mut src32)),
            );
            assert_eq!(dst16, want16, "b16 {rows}x{cols} {dst_stride} {src_stride}");
            assert_eq!(dst32, want32, "b32 {rows}x{cols} {dst_stride} {src_stride}");
        }
    });
}

#[test]
fn host_and_device_share_the_kernel_bodies() {
    // The host text is the device text with only the pointer type, the
    // exp2/log2 intrinsics and the thread-index prologue swapped.
    let host = host_module_mlir(&DeviceKernel::ALL, 3);
    for kernel in DeviceKernel::ALL {
        assert!(host.contains(&format!("func.func @{}(", kernel.name())));
    }
    assert!(!host.contains("!llvm.ptr<1>"));
    assert!(!host.contains("nvvm"));
    let device = gpu_module_mlir(&DeviceKernel::ALL);
    let normalise = |s: &str| {
        s.lines()
            .map(str::trim)
            .filter(|l| l.starts_with('%') || l.starts_with("llvm.store") || l.starts_with("scf."))
            .filter(|l| !l.contains("gpu.") && !l.contains("%h_") && !l.contains("index_castui"))
            .map(|l| {
                l.replace("!llvm.ptr<1>", "!llvm.ptr")
                    .replace("llvm.nvvm.ex2.approx.f32", "llvm.exp2.f32")
                    .replace("llvm.nvvm.lg2.approx.f", "llvm.log2.f32")
            })
            .filter(|l| {
                !l.starts_with("%gbase")
                    && !l.starts_with("%gid =")
                    && !l.starts_with("%stride =")
                    && !l.starts_with("scf.for %gid")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(normalise(&host), normalise(&device));
}

/// `bf16` bits of `x` (round to nearest even), for building test parts.
fn bf16_bits(x: f32) -> u16 {
    bf16::from_f32(x).to_bits()
}

#[test]
fn host_attn_merge_strided_bf16_parts() {
    let mut rng = rng();
    let ninf = f32::NEG_INFINITY;
    // A [b, hq, sq, d] accumulator inside a larger slot: sequence offset 2 of 9 rows, row
    // stride d + 4 (padding that must stay untouched), so no two of b, h, s collapse.
    let (b, hq, sq, d) = (2usize, 3usize, 5usize, 8usize);
    let (s_slot, s0, pad) = (9usize, 2usize, 4usize);
    let o_sr = d + pad;
    let o_sh = s_slot * o_sr;
    let o_sb = hq * o_sh;
    let (l_sh, l_sb) = (s_slot, hq * s_slot);
    let rows = b * hq * sq;
    // Parts lie further apart than their size (a gap of 8 elements / 3 lse values).
    let (pos, pls) = (rows * d + 8, rows + 3);
    for nparts in [1usize, 3] {
        for overwrite in [0i64, 1] {
            for threads in [1u32, 5, 64] {
                let mut o_acc: Vec<f32> = (0..b * o_sb).map(|_| rng.gen_range(-3.0..3.0)).collect();
                let mut lse_acc: Vec<f32> =
                    (0..b * l_sb).map(|_| rng.gen_range(-9.0..9.0)).collect();
                let mut lse_part: Vec<f32> = (0..nparts * pls)
                    .map(|_| rng.gen_range(-9.0..9.0))
                    .collect();
                let mut o_part: Vec<u16> = (0..nparts * pos)
                    .map(|_| bf16_bits(rng.gen_range(-2.0..2.0)))
                    .collect();
                let row_at = |r: usize| {
                    let (s, bh) = (r % sq, r / sq);
                    let (h, bi) = (bh % hq, bh / hq);
                    (
                        bi * o_sb + h * o_sh + (s0 + s) * o_sr,
                        bi * l_sb + h * l_sh + s0 + s,
                    )
                };
                // Special rows: empty accumulator, empty parts, everything empty.
                for (r, (a, p)) in [
                    (0usize, (ninf, 1.0f32)),
                    (4, (2.0, ninf)),
                    (7, (ninf, ninf)),
                ] {
                    let (oi, li) = row_at(r);
                    lse_acc[li] = a;
                    for i in 0..nparts {
                        lse_part[i * pls + r] = p;
                        if p == ninf {
                            o_part[i * pos + r * d..i * pos + (r + 1) * d]
                                .iter_mut()
                                .for_each(|x| *x = 0x7fc0); // NaN: must not be read
                        }
                    }
                    if a == ninf {
                        o_acc[oi..oi + d].iter_mut().for_each(|x| *x = f32::NAN);
                    }
                }
                let before_o = o_acc.clone();
                let before_l = lse_acc.clone();
                let i = |x: usize| Arg::I64(x as i64);
                with_host_kernels(threads, |jit| {
                    // The kernels get the view: the slots' addresses plus the sequence offset.
                    let mut args = vec![
                        ptr(&mut o_acc[s0 * o_sr..]),
                        ptr(&mut lse_acc[s0..]),
                        ptr(&mut o_part),
                        ptr(&mut lse_part),
                    ];
                    args.extend([i(rows), i(d), i(sq), i(hq), i(o_sb), i(o_sh), i(o_sr)]);
                    args.extend([
                        i(l_sb),
                        i(l_sh),
                        Arg::I64(overwrite),
                        i(nparts),
                        i(pos),
                        i(pls),
                    ]);
                    jit.call(DeviceKernel::AttnMergeOBf16, &args);
                    let mut args = vec![ptr(&mut lse_acc[s0..]), ptr(&mut lse_part)];
                    args.extend([i(rows), i(sq), i(hq), i(l_sb), i(l_sh)]);
                    args.extend([Arg::I64(overwrite), i(nparts), i(pls)]);
                    jit.call(DeviceKernel::AttnMergeLse, &args);
                });
                let mut touched = vec![false; o_acc.len()];
                let mut ltouched = vec![false; lse_acc.len()];
                let tag = format!("nparts={nparts} overwrite={overwrite} threads={threads}");
                for r in 0..rows {
                    let (oi, li) = row_at(r);
                    ltouched[li] = true;
                    let la = if overwrite == 1 {
                        f64::NEG_INFINITY
                    } else {
                        f64::from(before_l[li])
                    };
                    let lps: Vec<f64> = (0..nparts)
                        .map(|p| f64::from(lse_part[p * pls + r]))
                        .collect();
                    let m = lps.iter().fold(la, |a, b| a.max(*b));
                    let new = if m == f64::NEG_INFINITY {
                        m
                    } else {
                        m + ((la - m).exp() + lps.iter().map(|l| (l - m).exp()).sum::<f64>()).ln()
                    };
                    for c in 0..d {
                        touched[oi + c] = true;
                        let got = o_acc[oi + c];
                        if m == f64::NEG_INFINITY && overwrite == 1 {
                            assert_eq!(got, 0.0, "{tag} row {r}: no visible key overwrites with 0");
                            continue;
                        }
                        if m == f64::NEG_INFINITY {
                            assert_eq!(got.to_bits(), before_o[oi + c].to_bits(), "{tag} row {r}");
                            continue;
                        }
                        let mut want = if la == f64::NEG_INFINITY {
                            0.0
                        } else {
                            f64::from(before_o[oi + c]) * (la - new).exp()
                        };
                        for (p, lp) in lps.iter().enumerate() {
                            if *lp != f64::NEG_INFINITY {
                                let x = bf16::from_bits(o_part[p * pos + r * d + c]).to_f32();
                                want += f64::from(x) * (lp - new).exp();
                            }
                        }
                        assert!(
                            close(got, want, 4e-6),
                            "{tag} row {r} col {c}: {got} vs {want}"
                        );
                    }
                    let want_l = if m == f64::NEG_INFINITY && overwrite == 0 {
                        f64::from(before_l[li])
                    } else {
                        new
                    };
                    assert!(close(lse_acc[li], want_l, 1e-6), "{tag} lse row {r}");
                }
                for (k, t) in touched.iter().enumerate() {
                    if !t {
                        assert_eq!(o_acc[k].to_bits(), before_o[k].to_bits(), "padding o[{k}]");
                    }
                }
                for (k, t) in ltouched.iter().enumerate() {
                    if !t {
                        assert_eq!(
                            lse_acc[k].to_bits(),
                            before_l[k].to_bits(),
                            "padding lse[{k}]"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn host_add_bf16_part_into_f32() {
    let mut rng = rng();
    for threads in [1u32, 7, 64] {
        let n = 37usize;
        let mut acc: Vec<f32> = (0..n).map(|_| rng.gen_range(-3.0..3.0)).collect();
        let part_f: Vec<f32> = (0..n).map(|_| rng.gen_range(-3.0..3.0)).collect();
        let mut part: Vec<u16> = part_f.iter().map(|x| bf16_bits(*x)).collect();
        let want: Vec<f32> = acc
            .iter()
            .zip(&part)
            .map(|(a, p)| a + bf16::from_bits(*p).to_f32())
            .collect();
        // One element past the end must stay untouched (the kernel's bound).
        acc.push(123.0);
        with_host_kernels(threads, |jit| {
            jit.call(
                DeviceKernel::AddBf16F32,
                &[ptr(&mut acc), ptr(&mut part), Arg::I64(n as i64)],
            );
        });
        assert_eq!(&acc[..n], &want[..], "threads {threads}");
        assert_eq!(acc[n], 123.0);
    }
}

#[test]
fn host_sum_bf16_parts_in_order_rounded_once() {
    let mut rng = rng();
    let n = 37usize;
    for nparts in 1..=8usize {
        for threads in [1u32, 7, 64] {
            let mut parts: Vec<Vec<u16>> = (0..nparts)
                .map(|_| {
                    (0..n)
                        .map(|_| bf16_bits(rng.gen_range(-3.0..3.0)))
                        .collect()
                })
                .collect();
            // f32 sums in part order, one rounding: what the f32 accumulator path gives.
            let want: Vec<u16> = (0..n)
                .map(|i| {
                    let mut s = 0f32;
                    for (j, p) in parts.iter().enumerate() {
                        let x = bf16::from_bits(p[i]).to_f32();
                        s = if j == 0 { x } else { s + x };
                    }
                    bf16_bits(s)
                })
                .collect();
            // One element past the end must stay untouched (the kernel's bound).
            let mut dst = vec![0x7fc1u16; n + 1];
            let mut args = vec![ptr(&mut dst)];
            for j in 0..8 {
                args.push(match parts.get_mut(j) {
                    Some(p) => ptr(p),
                    // Parts past nparts are never read.
                    None => Arg::Ptr(std::ptr::null_mut()),
                });
            }
            args.push(Arg::I64(n as i64));
            args.push(Arg::I64(nparts as i64));
            with_host_kernels(threads, |jit| jit.call(DeviceKernel::SumBf16, &args));
            assert_eq!(&dst[..n], &want[..], "nparts {nparts}, threads {threads}");
            assert_eq!(dst[n], 0x7fc1);
        }
    }
}
