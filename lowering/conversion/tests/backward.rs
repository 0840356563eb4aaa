//! The attention backward under every shipped backward schedule (examples/schedules/*_bwd.sched)
//! and `--shift-shard`, on examples/attention_bwd.mlir's kernels scaled down, computes the
//! unscheduled backward on the CPU executor for fresh random inputs: in f64 within 1e-12 (the
//! forward's tolerance) and stored in the plans' dtypes as schedules.rs holds the forward. A
//! training step (forward keeping its log-sum-exp, then the backward) through the zigzag ring
//! equals the single-device step, and rows the forward saw no key of get zero gradients.

mod common;

use common::{computes, computes_bwd, scaled, scaled_schedule, stored_tolerance};
use mercury_driver::{Compiler, Schedule};
use mercury_plan::Plan;
use mercury_runtime::cpu::{
    assemble, execute, execute_pieces, execute_with, random_inputs, relative_error, Storage,
};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// examples/attention_bwd.mlir scaled down as schedules.rs scales the forward (32 positions,
/// head dim 4, 8 heads; MLA's 192/128 head dims become 6/4 and its 16 heads 8).
fn example() -> String {
    let text = std::fs::read_to_string(format!("{ROOT}/examples/attention_bwd.mlir")).unwrap();
    scaled(&text)
        .replace(", 192]", ", 6]")
        .replace("@h = 16", "@h = 8")
}

/// The plan of `kernel` of `text` under `schedule` (a script of examples/schedules, or
/// `shift-shard`), and its single-device plan.
fn plans(text: &str, kernel: &str, schedule: &str) -> (Plan, Plan) {
    plans_after(text, kernel, "", schedule)
}

/// [`plans`] with the script `prefix` (e.g. `patch`) run before the schedule (`""`: none;
/// the schedule may be `""` too).
fn plans_after(text: &str, kernel: &str, prefix: &str, schedule: &str) -> (Plan, Plan) {
    let c = Compiler::new();
    let m = c
        .parse("attention_bwd.mlir", text)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let base = mercury_conversion::lower_module(&m, Some(kernel))
        .unwrap_or_else(|d| panic!("{kernel}: {}", d.render()));
    let script = match schedule {
        "shift-shard" | "" => String::new(),
        s => scaled_schedule(
            &std::fs::read_to_string(format!("{ROOT}/examples/schedules/{s}")).unwrap(),
        ),
    };
    let mut sched = Schedule::script(&format!("{prefix}\n{script}"));
    sched.shift_shard = (schedule == "shift-shard").then(Vec::new);
    sched.kernel = Some(kernel.to_string());
    let mut m2 = m.clone();
    c.schedule(&mut m2, &sched)
        .unwrap_or_else(|d| panic!("{kernel} {schedule}: {}", d.render()));
    let plan = mercury_conversion::lower_module(&m2, Some(kernel))
        .unwrap_or_else(|d| panic!("{kernel} {schedule}: {}", d.render()));
    (plan, base)
}

/// Every backward schedule on the kernels it is written for, and the comm pattern that makes it
/// what it is.
#[test]
fn backward_schedules_compute_the_backward() {
    let text = example();
    let cases = [
        (
            "attention_bwd",
            "ring_attention_bwd.sched",
            "@dK: partial p2p (shift-reduce)",
        ),
        (
            "attention_bwd_gqa",
            "ring_attention_bwd.sched",
            "@dV: partial p2p (shift-reduce)",
        ),
        (
            "attention_bwd_mla",
            "ring_attention_bwd.sched",
            "@K: ring p2p",
        ),
        (
            "attention_bwd",
            "zigzag_ring_bwd.sched",
            "@LSE: permute p2p",
        ),
        (
            "attention_bwd_gqa",
            "zigzag_ring_bwd.sched",
            "@dK: partial p2p (shift-reduce)",
        ),
        (
            "attention_bwd",
            "striped_ring_bwd.sched",
            "@dQ: p2p (output delivery)",
        ),
        ("attention_bwd", "ulysses_bwd.sched", "@dK: all_to_all"),
        ("attention_bwd_mla", "ulysses_bwd.sched", "@dV: all_to_all"),
        (
            "attention_bwd_gqa_kv4",
            "ulysses_kv_replicated_bwd.sched",
            "@dK: all_reduce(add)",
        ),
        ("attention_bwd", "usp_bwd.sched", "@K: all_to_all"),
        ("attention_bwd", "loongtrain_bwd.sched", "levels [1, 0]"),
        (
            "attention_bwd_gqa",
            "loongtrain_bwd.sched",
            "@dK: partial p2p (shift-reduce)",
        ),
        (
            "attention_bwd",
            "shift-shard",
            "@dK: partial p2p (shift-reduce)",
        ),
        (
            "attention_bwd_gqa",
            "shift-shard",
            "@LSE: permute p2p (reshard)",
        ),
        ("attention_bwd_gqa_kv4", "shift-shard", "@K: ring p2p"),
        ("attention_bwd_mla", "shift-shard", "@V: ring p2p"),
    ];
    for (kernel, schedule, expect) in cases {
        let (plan, base) = plans(&text, kernel, schedule);
        for seed in [1, 2] {
            let case = format!("{kernel} {schedule} (seed {seed})");
            computes_bwd(&case, &plan, &base, seed).unwrap_or_else(|m| panic!("{m}"));
        }
        let report = mercury_conversion::report::comm_plan(&plan, false);
        assert!(
            report.contains(expect),
            "{kernel} {schedule}: expected {expect} in\n{report}"
        );
    }
}

/// `--shift-shard` on a causal backward is the balanced zigzag ring: every buffer with query
/// or key positions permuted to zigzag (the gradients back), and every rank doing the same
/// causal work at every step after the first, one patch per step.
#[test]
fn shift_shard_balances_the_causal_backward() {
    let (plan, _) = plans(&example(), "attention_bwd", "shift-shard");
    let report = mercury_conversion::report::comm_plan(&plan, false);
    for b in ["Q", "K", "V", "O", "dO", "LSE"] {
        assert!(
            report.contains(&format!("@{b}: permute p2p (reshard)")),
            "{b}: {report}"
        );
    }
    for b in ["dQ", "dK", "dV"] {
        assert!(
            report.contains(&format!("@{b}: p2p (output delivery)")),
            "{b}: {report}"
        );
    }
    let work = mercury_conversion::report::attention_work(&plan);
    let steps: Vec<usize> = (0..plan.num_stages())
        .filter(|s| work.iter().any(|w| w[*s] > 0.0))
        .collect();
    assert_eq!(steps.len(), 8, "{work:?}");
    for s in &steps {
        let col: Vec<f64> = work.iter().map(|w| w[*s]).collect();
        assert!(col.iter().all(|x| *x == col[0]), "stage {s}: {col:?}");
    }
}

/// A training step: the causal forward keeps its log-sum-exp, the backward reads it with O;
/// both through `--shift-shard` (zigzag rings) equal the single-device step.
#[test]
fn training_step_through_zigzag_rings() {
    let text =
        std::fs::read_to_string(format!("{ROOT}/examples/small/attention_train.mlir")).unwrap();
    let (fwd, fwd_base) = plans(&text, "attention", "shift-shard");
    let (bwd, bwd_base) = plans(&text, "attention_bwd", "shift-shard");
    let inputs = random_inputs(&fwd_base, 7);
    let step = |f: &Plan, b: &Plan| {
        let out = execute(f, &inputs).unwrap();
        let mut bin = random_inputs(b, 8);
        for (name, v) in bin.iter_mut() {
            if let Some(x) = inputs.get(name).or_else(|| out.get(name)) {
                if !name.starts_with('d') {
                    *v = x.clone();
                }
            }
        }
        (out, execute(b, &bin).unwrap())
    };
    let (fo, bo) = step(&fwd, &bwd);
    let (fw, bw) = step(&fwd_base, &bwd_base);
    assert!(relative_error(&fo, &fw) < 1e-12, "forward");
    let e = relative_error(&bo, &bw);
    assert!(e < 1e-12, "backward: relative error {e}");
    assert!(bo.values().flatten().all(|x| x.is_finite()));
}

/// Rows the forward saw no key of (log-sum-exp -inf, output 0) get zero gradients, never NaN,
/// whatever the schedule: the ring and the zigzag ring, ranks holding such rows among others.
#[test]
fn fully_masked_rows_give_zero_gradients() {
    let text = example();
    for schedule in ["ring_attention_bwd.sched", "zigzag_ring_bwd.sched"] {
        let (plan, base) = plans(&text, "attention_bwd", schedule);
        let mut inputs = random_inputs(&base, 3);
        // Every fifth row of every head: lse = -inf, o = 0 (what the forward writes for them).
        let rows = inputs["LSE"].len();
        let dv = inputs["O"].len() / rows;
        let masked: Vec<usize> = (0..rows).filter(|r| r % 5 == 0).collect();
        for r in &masked {
            inputs.get_mut("LSE").unwrap()[*r] = f64::NEG_INFINITY;
            inputs.get_mut("O").unwrap()[r * dv..(r + 1) * dv].fill(0.0);
        }
        let got = assemble(&plan, &execute_pieces(&plan, &inputs).unwrap());
        let want = execute(&base, &inputs).unwrap();
        for (name, v) in &got {
            assert!(
                v.iter().all(|x| x.is_finite()),
                "{schedule}: @{name} has NaN or inf"
            );
        }
        let d = got["dQ"].len() / rows;
        for r in &masked {
            assert!(
                got["dQ"][r * d..(r + 1) * d].iter().all(|x| *x == 0.0),
                "{schedule}: row {r} of dQ is not zero"
            );
        }
        let e = relative_error(&got, &want);
        assert!(e < 1e-12, "{schedule}: relative error {e}");
    }
}

/// Causal attention with fewer queries than keys (16 and 32 positions, 2 and 4 per rank):
/// the keys after the last query are seen by no query, so every block of their dK/dV tiles is
/// masked and skipped. Those tiles are still outputs: exactly 0 on the ranks that own them,
/// under every schedule that sends them home (they were refused as never produced, and the
/// accumulator they need is one nothing writes, which the plan marks `MaskedZero`).
#[test]
fn keys_no_query_sees_get_zero_gradients() {
    let text = example().replace("@i = 32 spatial", "@i = 16 spatial");
    for (kernel, schedule) in [
        ("attention_bwd", "ring_attention_bwd.sched"),
        ("attention_bwd", "zigzag_ring_bwd.sched"),
        ("attention_bwd", "usp_bwd.sched"),
        ("attention_bwd", "loongtrain_bwd.sched"),
        ("attention_bwd", "shift-shard"),
        ("attention_bwd_gqa", "ring_attention_bwd.sched"),
        ("attention_bwd_gqa_kv4", "zigzag_ring_bwd.sched"),
    ] {
        let (plan, base) = plans(&text, kernel, schedule);
        let case = format!("{kernel} {schedule}");
        computes_bwd(&case, &plan, &base, 5).unwrap_or_else(|m| panic!("{m}"));
        let out = execute(&plan, &random_inputs(&base, 6)).unwrap();
        for name in ["dK", "dV"] {
            let shape = &plan.buffers[plan.buffer_index(name).unwrap()].shape;
            let (keys, d) = (shape[shape.len() - 2], shape[shape.len() - 1]);
            let rows: Vec<&[f64]> = out[name].chunks(d).collect();
            for (r, row) in rows.iter().enumerate() {
                let late = r % keys >= 16;
                assert_eq!(
                    row.iter().all(|x| *x == 0.0),
                    late,
                    "{case}: @{name} row {r} (key {}): {row:?}",
                    r % keys
                );
            }
        }
    }
}

/// The naive backward (examples/attention_bwd_naive.mlir, scaled down) computes what the
/// attention_bwd patch computes: `patch` rewrites its tile ops into the patch, and the patched
/// body, unscheduled and through the ring backward, equals the unpatched body in f64 (stored
/// in bf16 they differ where the naive body casts the probabilities and dS to bf16 before
/// their matmuls and the patch does not); the unpatched body through the ring too (its dK/dV
/// partial sums travel in bf16 there).
#[test]
fn naive_backward_is_the_patch() {
    let text = scaled(
        &std::fs::read_to_string(format!("{ROOT}/examples/attention_bwd_naive.mlir")).unwrap(),
    );
    let why = Some("the patch keeps P and dS unrounded; the naive body casts them to bf16");
    for (prefix, schedule, otherwise) in [
        ("patch", "", why),
        (
            "patch{kernel=attention_bwd}",
            "ring_attention_bwd.sched",
            why,
        ),
        ("", "ring_attention_bwd.sched", None),
    ] {
        let (plan, base) = plans_after(&text, "attention_bwd", prefix, schedule);
        let patched = plan.ranks.iter().flat_map(|r| &r.stages).any(|st| {
            st.compute.iter().any(|op| {
                matches!(
                    op,
                    mercury_plan::ComputeOp::Patch {
                        patch: mercury_plan::PatchKind::AttentionBwd { .. },
                        ..
                    }
                )
            })
        });
        assert_eq!(patched, !prefix.is_empty(), "{prefix:?} {schedule:?}");
        for seed in [1, 2] {
            let case = format!("naive {prefix:?} {schedule:?} (seed {seed})");
            if !patched && !schedule.is_empty() {
                // Unpatched, dK and dV are tile matmuls' partial sums: a shift-reduce sends
                // them in the output's bf16, as any matmul's (gemm_rs.mlir's
                // shift_reduce.sched), while dQ rounds where the single-device body does;
                // the f64 data flow is the same, and stored in bf16 within two units.
                let inputs = random_inputs(&base, seed);
                let run = |p: &Plan, st| execute_with(p, &inputs, st).unwrap();
                let e = relative_error(&run(&plan, Storage::F64), &run(&base, Storage::F64));
                assert!(e < 1e-12, "{case}: relative error {e} in f64");
                let e = relative_error(&run(&plan, Storage::Dtype), &run(&base, Storage::Dtype));
                assert!(
                    e < stored_tolerance(mercury_plan::DType::BF16),
                    "{case}: {e} stored"
                );
                continue;
            }
            computes(&case, &plan, &base, seed, otherwise).unwrap_or_else(|m| panic!("{m}"));
        }
    }
}
