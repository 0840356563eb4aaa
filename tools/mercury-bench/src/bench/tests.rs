use super::*;

#[test]
fn selfcheck_plans_verify_and_schedule() {
    let cases = [
        selfcheck_allgather(),
        selfcheck_allreduce(DType::F32),
        selfcheck_allreduce(DType::BF16),
        selfcheck_reduce_scatter(),
        selfcheck_reduce(DType::F32),
        selfcheck_reduce(DType::BF16),
        selfcheck_all_to_all(),
        selfcheck_broadcast(),
        selfcheck_allreduce_lse(),
        selfcheck_sendrecv(),
        selfcheck_gemm(),
        selfcheck_gemm_accumulate(),
        selfcheck_ring(true),
        selfcheck_ring(false),
        selfcheck_attention_masked_rows(),
    ];
    for c in &cases {
        mercury_plan::verify(&c.plan).unwrap_or_else(|e| panic!("{}: {e}", c.plan.name));
        mercury_runtime::cuda::schedule::build(&c.plan)
            .unwrap_or_else(|e| panic!("{}: {e}", c.plan.name));
    }
}

#[test]
fn selfcheck_expectations_are_sized() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for c in [
        selfcheck_allgather(),
        selfcheck_all_to_all(),
        selfcheck_reduce_scatter(),
        selfcheck_reduce(DType::F32),
        selfcheck_sendrecv(),
        selfcheck_gemm(),
        selfcheck_allreduce_lse(),
        selfcheck_gemm_accumulate(),
        selfcheck_ring(true),
    ] {
        let inputs: Vec<Vec<f64>> = c
            .plan
            .buffers
            .iter()
            .map(|b| {
                if b.role == Role::Input {
                    (0..b.shape.iter().product::<usize>())
                        .map(|_| rng.gen_range(-1.0..1.0))
                        .collect()
                } else {
                    Vec::new()
                }
            })
            .collect();
        let want = (c.expect)(&inputs);
        let n: usize = c.plan.buffers[c.output].shape.iter().product();
        assert_eq!(want.len(), n, "{}", c.plan.name);
    }
}

/// The reduce self-check's expectation is what the CPU executor computes from its plan
/// (f64 and stored in its dtype), so a GPU mismatch is the GPU's.
#[test]
fn selfcheck_reduce_matches_the_cpu_executor() {
    use mercury_runtime::cpu::{execute_with, Storage};
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for dtype in [DType::F32, DType::BF16] {
        let c = selfcheck_reduce(dtype);
        let x: Vec<f64> = (0..4 * 6 * 8)
            .map(|_| mercury_runtime::cpu::round_to(dtype, rng.gen_range(-1.0..1.0)))
            .collect();
        let want = (c.expect)(&[x.clone(), Vec::new()]);
        let inputs = std::collections::HashMap::from([("x".to_string(), x)]);
        for storage in [Storage::F64, Storage::Dtype] {
            let got = execute_with(&c.plan, &inputs, storage).unwrap();
            let err = got["y"]
                .iter()
                .zip(&want)
                .map(|(g, w)| (g - w).abs())
                .fold(0.0, f64::max);
            let tol = if storage == Storage::F64 {
                1e-12
            } else {
                c.tol
            };
            assert!(err <= tol, "{dtype:?} {storage:?}: error {err}");
        }
    }
}

/// The stand-in device kernels compile (where libnvrtc loads; no GPU needed) and define
/// every entry point the executor needs.
#[test]
fn standin_device_kernels_compile() {
    use mercury_kernels::cuda::{nvrtc, probe, Library};
    if let Err(e) = probe(Library::Nvrtc) {
        eprintln!("skipping: {e}");
        return;
    }
    let ptx = nvrtc::compile_ptx(STANDIN_DEVICE_KERNELS_CU, (9, 0), "stand-in")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(mercury_runtime::cuda::device_kernels::missing_entries(&ptx).is_empty());
}

/// On a machine with a GPU, runs the P0 executor self-checks; skips (passes) otherwise.
#[test]
fn gpu_executor_selfchecks_or_skip() {
    use mercury_kernels::cuda::{probe, Library};
    if let Err(e) = probe(Library::Driver).and(probe(Library::Nvrtc)) {
        eprintln!("skipping GPU test: {e}");
        return;
    }
    let ctx = match mercury_kernels::cuda::open_context(0) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("skipping GPU test: {e}");
            return;
        }
    };
    let mut b = Bench::new(ctx, BenchOptions::default(), None).unwrap_or_else(|e| panic!("{e}"));
    b.p0_executor().unwrap_or_else(|e| panic!("{e}"));
    for r in b.rows() {
        assert!(r.pass, "{}: {}", r.id, r.check);
    }
}

#[test]
fn regimes_parse_or_are_refused() {
    let r = |idle_ms, sustained_ms| {
        Ok(Regime {
            idle_ms,
            sustained_ms,
        })
    };
    assert_eq!("back-to-back".parse(), Ok(Regime::default()));
    assert_eq!("sustained=1500".parse(), r(0.0, 1500.0));
    assert_eq!("idle=0".parse(), r(0.0, 0.0));
    assert_eq!("idle=3000,sustained=5000".parse(), r(3000.0, 5000.0));
    for bad in [
        "sustained",
        "idle=-1",
        "idle=NaN",
        "warm=5",
        "sustained=1e9",
        "",
        "sustained=1,idle=2",
        "idle=1,idle=2",
        "idle=1,sustained=2,idle=3",
    ] {
        assert!(bad.parse::<Regime>().is_err(), "{bad}");
    }
}

#[test]
fn flops_convention() {
    assert_eq!(attn_flops(1, 1, 2, 2, 4, false), 64.0);
    assert_eq!(attn_flops(1, 1, 2, 2, 4, true), 32.0);
    assert_eq!(median_min(vec![3.0, 1.0, 2.0]), (2.0, 1.0));
}
