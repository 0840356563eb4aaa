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
    let c = Compiler::new();
    let text = scaled(&std::fs::read_to_string(format!("{ROOT}/examples/{example}")).unwrap());
    let m = c
        .parse(example, &text)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let base = mercury_conversion::lower_module(&m, None)
        .unwrap_or_else(|d| panic!("{example}: {}", d.render()));
    let mut m2 = m.clone();
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
