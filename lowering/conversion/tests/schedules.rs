//! Every known schedule in examples/schedules, applied to its example scaled down, computes the
//! same result as the unscheduled operator on the CPU executor (fresh random inputs).

use mercury_driver::{Compiler, Schedule};
use mercury_runtime::cpu::{execute, random_inputs, relative_error};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The example with Llama-scale extents replaced by small ones that divide the same way.
pub fn scaled(text: &str) -> String {
    let mut t = text.to_string();
    for (a, b) in [
        (" min 128", ""),
        ("2097152", "64"),
        ("131072", "64"),
        ("32768", "32"),
        ("8192", "16"),
        ("4096", "16"),
        (", 128]", ", 4]"),
        ("@h = 32", "@h = 8"),
        ("@b = 16", "@b = 2"),
    ] {
        t = t.replace(a, b);
    }
    t
}

/// A schedule script scaled like [`scaled`]: striped blocks of 128 positions become 1.
fn scaled_schedule(text: &str) -> String {
    text.replace(";128)", ";1)")
}

fn check(example: &str, schedule: Option<&str>) -> String {
    check_with(example, "", schedule).0
}

/// [`check`], also returning the plan.
fn check_plan(example: &str, schedule: Option<&str>) -> (String, mercury_plan::Plan) {
    check_with(example, "", schedule)
}

/// [`check_plan`] with `prefix` (schedule lines, e.g. `patch`) run before the schedule.
fn check_with(example: &str, prefix: &str, schedule: Option<&str>) -> (String, mercury_plan::Plan) {
    let c = Compiler::new();
    let text = scaled(&std::fs::read_to_string(format!("{ROOT}/examples/{example}")).unwrap())
        .replace("14336", "24");
    let m = c
        .parse(example, &text)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let base = mercury_conversion::lower_module(&m, None)
        .unwrap_or_else(|d| panic!("{example}: {}", d.render()));
    let mut m2 = m.clone();
    if !prefix.is_empty() {
        c.schedule(&mut m2, &Schedule::script(prefix))
            .unwrap_or_else(|d| panic!("{example} {prefix}: {}", d.render()));
    }
    let sched = match schedule {
        Some(s) => Schedule::script(&scaled_schedule(
            &std::fs::read_to_string(format!("{ROOT}/examples/schedules/{s}")).unwrap(),
        )),
        None => Schedule::shift_shard(),
    };
    c.schedule(&mut m2, &sched)
        .unwrap_or_else(|d| panic!("{example} {schedule:?}: {}", d.render()));
    let plan = mercury_conversion::lower_module(&m2, None)
        .unwrap_or_else(|d| panic!("{example} {schedule:?}: {}", d.render()));
    for seed in [1, 2] {
        let inputs = random_inputs(&base, seed);
        let a = execute(&base, &inputs).unwrap();
        let b = execute(&plan, &inputs).unwrap();
        let e = relative_error(&b, &a);
        assert!(e < 1e-12, "{example} with {schedule:?}: relative error {e}");
    }
    (mercury_conversion::report::comm_plan(&plan, false), plan)
}

#[test]
fn known_schedules_compute_the_operator() {
    let cases = [
        ("attention.mlir", "context_parallel.sched", "all_gather"),
        ("attention.mlir", "ring_attention.sched", "ring p2p"),
        ("attention_causal.mlir", "ring_attention.sched", "ring p2p"),
        ("attention_2x4.mlir", "loongtrain.sched", "ring p2p"),
        (
            "attention.mlir",
            "tree_attention.sched",
            "all_reduce(lse_merge)",
        ),
        ("attention.mlir", "ulysses.sched", "all_to_all"),
        ("attention_2x4.mlir", "usp.sched", "all_to_all"),
        ("gemm_rs.mlir", "shift_reduce.sched", "partial p2p"),
        ("gemm_rs.mlir", "megatron_rs.sched", "reduce_scatter(add)"),
        ("ag_gemm.mlir", "asynctp_ag_gemm.sched", "ring p2p"),
        ("attention_causal.mlir", "zigzag_ring.sched", "permute p2p"),
        ("attention_causal.mlir", "striped_ring.sched", "permute p2p"),
        (
            "attention_causal_zigzag.mlir",
            "ring_attention.sched",
            "ring p2p",
        ),
        (
            "attention_causal_zigzag.mlir",
            "context_parallel.sched",
            "all_gather",
        ),
        (
            "attention_causal_zigzag.mlir",
            "tree_attention.sched",
            "all_gather",
        ),
    ];
    for (ex, s, expect) in cases {
        let report = check(ex, Some(s));
        assert!(
            report.contains(expect),
            "{ex} {s}: expected {expect} in\n{report}"
        );
    }
    // Ulysses as written returns the output contiguous; an output declared zigzag keeps its
    // contract, so the schedule is refused naming the output and both placements.
    let c = Compiler::new();
    let ex = "attention_causal_zigzag.mlir";
    let text = scaled(&std::fs::read_to_string(format!("{ROOT}/examples/{ex}")).unwrap());
    let mut m = c.parse(ex, &text).unwrap();
    let script =
        std::fs::read_to_string(format!("{ROOT}/examples/schedules/ulysses.sched")).unwrap();
    let e = c.schedule(&mut m, &Schedule::script(&script)).unwrap_err();
    assert!(
        e.message
            .contains("'@O' is an output declared as 'sharding [R, R, S(zigzag(0)), R]'")
            && e.message
                .contains("deliver it as 'sharding [R, R, S(0), R]'"),
        "{}",
        e.render()
    );
}

#[test]
fn shift_shard_on_every_example() {
    for ex in [
        "attention.mlir",
        "attention_causal.mlir",
        "attention_b16.mlir",
        "attention_gqa.mlir",
        "attention_2x4.mlir",
        "weighted_sum.mlir",
        "ag_gemm.mlir",
        "attention_causal_zigzag.mlir",
        "2gpu/attention_causal_s32k.mlir",
        "2gpu/attention_causal_s128k.mlir",
        "2gpu/attention_gqa_causal_s128k.mlir",
    ] {
        let report = check(ex, None);
        assert!(report.contains("ring p2p"), "{ex}: {report}");
    }
}

/// Causal attention work of every rank at every step (query-key pairs the masks leave).
fn causal_work(plan: &mercury_plan::Plan) -> Vec<Vec<usize>> {
    mercury_conversion::report::attention_work(plan)
        .into_iter()
        .map(|r| r.into_iter().map(|x| x as usize).collect())
        .collect()
}

/// A zigzag ring gives every rank the same causal work at every step after the first (the
/// first: the diagonal chunks), one patch per step and 7 transfer stages on 8 ranks; the
/// contiguous ring leaves all but one rank idle at its second step.
#[test]
fn zigzag_ring_balances_causal_work() {
    let (report, plan) = check_plan("attention_causal.mlir", Some("zigzag_ring.sched"));
    assert!(
        report.contains("@K: ring p2p, 56 ops in 7 stages"),
        "{report}"
    );
    assert!(
        report.contains("@K: permute p2p (reshard), 14 ops in 1 stages"),
        "{report}"
    );
    let work = causal_work(&plan);
    let steps: Vec<usize> = (0..plan.num_stages())
        .filter(|s| work.iter().any(|w| w[*s] > 0))
        .collect();
    assert_eq!(steps.len(), 8, "{work:?}");
    for s in &steps {
        let col: Vec<usize> = work.iter().map(|w| w[*s]).collect();
        assert!(col.iter().all(|x| *x == col[0]), "stage {s}: {col:?}");
    }
    let patches = |r: &mercury_plan::RankProgram| {
        r.stages
            .iter()
            .map(|st| {
                st.compute
                    .iter()
                    .filter(|op| matches!(op, mercury_plan::ComputeOp::Patch { .. }))
                    .count()
            })
            .max()
            .unwrap_or(0)
    };
    assert!(plan.ranks.iter().all(|r| patches(r) == 1));
    // The declared-zigzag operator needs no permutation at all.
    let (report, plan) = check_plan("attention_causal_zigzag.mlir", Some("ring_attention.sched"));
    assert!(!report.contains("permute"), "{report}");
    let busy = |w: &[Vec<usize>]| -> Vec<Vec<usize>> {
        w.iter()
            .map(|r| r.iter().copied().filter(|x| *x > 0).collect())
            .collect()
    };
    assert_eq!(busy(&causal_work(&plan)), busy(&work));
    let (_, contiguous) = check_plan("attention_causal.mlir", Some("ring_attention.sched"));
    let work = causal_work(&contiguous);
    let second: Vec<usize> = work.iter().map(|w| w[2]).collect();
    assert_eq!(second.iter().filter(|x| **x > 0).count(), 1, "{second:?}");
}

/// Bodies written with compute ops compute what they compute patched: the naive attention
/// (as written and causal) under the attention schedules, unpatched and after `patch`, and the
/// MLP (generated GeLU between two matmuls, a temp buffer) under its schedules, against the
/// unscheduled, unpatched operator.
#[test]
fn naive_bodies_agree_with_their_patched_forms() {
    let causal = |text: &str| {
        text.replace(
            "  %m = commir.row_reduce max %t ",
            "  %tm = commir.mask causal %t : !commir.tile<f32>\n  %m = commir.row_reduce max %tm ",
        )
        .replace("sub %t, %m", "sub %tm, %m")
    };
    for (ex, schedules) in [
        (
            "attention_naive.mlir",
            vec![
                ("context_parallel.sched", "all_gather"),
                ("ring_attention.sched", "ring p2p"),
                ("tree_attention.sched", "all_reduce(lse_merge)"),
                ("ulysses.sched", "all_to_all"),
            ],
        ),
        (
            "mlp.mlir",
            vec![
                ("mlp_megatron.sched", "reduce_scatter(add)"),
                ("mlp_overlap.sched", "partial p2p"),
                ("mlp_ag_rs.sched", "partial p2p"),
            ],
        ),
    ] {
        for (s, expect) in schedules {
            for prefix in ["", "patch"] {
                let (report, _) = check_with(ex, prefix, Some(s));
                assert!(report.contains(expect), "{ex} {prefix} {s}: {report}");
            }
        }
    }
    // The causal variant (a mask after the scale): its blocks above the diagonal are skipped.
    let text =
        causal(&std::fs::read_to_string(format!("{ROOT}/examples/attention_naive.mlir")).unwrap());
    assert!(text.contains("mask causal"));
    let c = Compiler::new();
    let m = c.parse("causal.mlir", &scaled(&text)).unwrap();
    let base = mercury_conversion::lower_module(&m, None).unwrap();
    for prefix in ["", "patch{kernel=attention}\n"] {
        let ring =
            std::fs::read_to_string(format!("{ROOT}/examples/schedules/ring_attention.sched"))
                .unwrap();
        let mut m2 = m.clone();
        c.schedule(&mut m2, &Schedule::script(&format!("{prefix}{ring}")))
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let plan = mercury_conversion::lower_module(&m2, None).unwrap();
        let inputs = random_inputs(&base, 3);
        let e = relative_error(
            &execute(&plan, &inputs).unwrap(),
            &execute(&base, &inputs).unwrap(),
        );
        assert!(
            e < 1e-12,
            "causal naive attention {prefix:?}: relative error {e}"
        );
    }
}
