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

fn check(example: &str, schedule: Option<&str>) -> String {
    check_with(example, "", schedule)
}

/// [`check`] with `prefix` (schedule lines, e.g. `patch`) run before the schedule.
fn check_with(example: &str, prefix: &str, schedule: Option<&str>) -> String {
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
        Some(s) => Schedule::script(
            &std::fs::read_to_string(format!("{ROOT}/examples/schedules/{s}")).unwrap(),
        ),
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
    mercury_conversion::report::comm_plan(&plan, false)
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
    ];
    for (ex, s, expect) in cases {
        let report = check(ex, Some(s));
        assert!(
            report.contains(expect),
            "{ex} {s}: expected {expect} in\n{report}"
        );
    }
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
    ] {
        let report = check(ex, None);
        assert!(report.contains("ring p2p"), "{ex}: {report}");
    }
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
            ],
        ),
    ] {
        for (s, expect) in schedules {
            for prefix in ["", "patch"] {
                let report = check_with(ex, prefix, Some(s));
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
