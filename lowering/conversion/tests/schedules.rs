//! Every known schedule in examples/schedules, applied to its example scaled down, computes the
//! same result as the unscheduled operator on the CPU executor (fresh random inputs): in f64
//! (the data flow, exactly), and with every value stored in its slot's dtype
//! (`Storage::Dtype`), where it must round where the single-device plan rounds (unless
//! `rounds_otherwise` says why not).

mod common;

use common::{computes, scaled, scaled_schedule};
use mercury_driver::{Compiler, Schedule};
use mercury_runtime::cpu::{execute, random_inputs, relative_error};
use std::collections::BTreeMap;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Where a schedule rounds otherwise than the single-device operator, and why; `None`: it
/// rounds at the same places (every f32 sum finished before its bf16 cast, as the single-device
/// plan does).
fn rounds_otherwise(example: &str, prefix: &str, schedule: Option<&str>) -> Option<&'static str> {
    match (example, prefix, schedule.unwrap_or("")) {
        // A shifted Add reduction sends its partial tiles in the output's dtype (AsyncTP-like,
        // lowering/conversion/src/compute.rs), summed in f32 by their owner.
        ("gemm_rs.mlir", _, "shift_reduce.sched" | "shift_reduce_halves.sched")
        | ("mlp.mlir", _, "mlp_overlap.sched" | "mlp_ag_rs.sched") => {
            Some("partial tiles travel in bf16")
        }
        // Each rank's one GEMM writes its partial sum in bf16 for the reduce-scatter
        // (bf16_partial_sums, lowering/conversion/src/epilogue.rs), summed in f32.
        ("gemm_rs.mlir", _, "megatron_rs.sched") | ("mlp.mlir", _, "mlp_megatron.sched") => {
            Some("partial sums are reduce-scattered in bf16")
        }
        // The same for each row tile's reduce to its owner.
        ("gemm_rs.mlir", _, "chunked_rs.sched") => Some("partial sums are reduced in bf16"),
        // The naive body casts the softmax tile to bf16 before its second matmul: split over
        // key blocks, each block's tile is scaled by its own row maximum before the cast.
        ("attention_naive.mlir", "", "ring_attention.sched" | "tree_attention.sched") => {
            Some("each key block's softmax tile is cast to bf16 against its own maximum")
        }
        // The attention patch does not round its softmax tile; the reference (the naive body,
        // unpatched) casts it to bf16.
        ("attention_naive.mlir", "patch", _) => Some("the patch keeps the softmax tile unrounded"),
        _ => None,
    }
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
        let case = format!("{example} {prefix:?} {schedule:?} (seed {seed})");
        let otherwise = rounds_otherwise(example, prefix, schedule);
        computes(&case, &plan, &base, seed, otherwise).unwrap_or_else(|m| panic!("{m}"));
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
        ("gemm_rs.mlir", "shift_reduce_halves.sched", "partial p2p"),
        ("gemm_rs.mlir", "megatron_rs.sched", "reduce_scatter(add)"),
        ("gemm_rs.mlir", "chunked_rs.sched", "reduce(add)"),
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

/// What the f64 run cannot see and the run in the plan's dtypes does: Megatron's GEMM
/// reduce-scatter with its f32 accumulators turned bf16 (each partial C rounded before the
/// reduce-scatter sums it) still computes the operator exactly in f64, but stored in its dtypes
/// most elements of C are rounded otherwise than the single-device plan rounds them.
#[test]
fn a_partial_sum_rounded_before_its_reduce_scatter_is_seen() {
    // Megatron's row-parallel GEMM with two GEMMs per rank summing into its accumulator: the
    // accumulator stays f32 (bf16_partial_sums needs one GEMM per rank), and so rounds where
    // the single-device plan does.
    let script = "tile{axis=k factor=8 outer=k0 inner=k_t}
parallelize{axis=k0 level=0}
tile{axis=k_t factor=2 outer=k1 inner=k_u}
";
    let c = Compiler::new();
    let text = scaled(&std::fs::read_to_string(format!("{ROOT}/examples/gemm_rs.mlir")).unwrap());
    let m = c.parse("gemm_rs.mlir", &text).unwrap();
    let base = mercury_conversion::lower_module(&m, None).unwrap();
    let mut m2 = m.clone();
    c.schedule(&mut m2, &Schedule::script(script))
        .unwrap_or_else(|d| panic!("{}", d.render()));
    let mut plan = mercury_conversion::lower_module(&m2, None).unwrap();
    computes("two GEMMs per rank", &plan, &base, 1, None).unwrap_or_else(|m| panic!("{m}"));
    let mut narrowed = 0;
    for r in &mut plan.ranks {
        for s in r.slots.iter_mut().filter(|s| s.name == "C.acc") {
            assert_eq!(s.dtype, mercury_plan::DType::F32);
            s.dtype = mercury_plan::DType::BF16;
            narrowed += 1;
        }
    }
    assert_eq!(narrowed, 8, "one f32 accumulator per rank");
    // Exact in f64 (it would say so otherwise); stored in its dtypes, more than one element
    // in a hundred of C is rounded otherwise.
    let e = computes("narrowed", &plan, &base, 1, None).unwrap_err();
    assert!(
        e.starts_with("narrowed, stored in its dtypes: ")
            && e.contains(
                "of the 256 elements of @C are rounded otherwise than the single-device plan"
            ),
        "{e}"
    );
}

/// The GEMM reduce-scatter's K-split with M tiled into `factor` row tiles on 8 ranks (C rows
/// sharded, 2 rows per rank at the scaled size): a tile of several row blocks (factor 2: 4
/// owners), of one (factor 8: summed in place on its owner), or inside one (factor 16: two
/// tiles per owner) is reduced to its owners, one reduce per owner, never all-reduced; and
/// computes the operator (f64 exactly; stored, the bf16 partial sums round elsewhere, as
/// Megatron's). Each tile is reduced in the stage after its GEMM, beside the next tile's. With
/// an extra GEMM per rank summing into each tile the partial sums stay f32.
/// A replicated C keeps the all-reduce; a column-sharded C is one reduce-scatter per row tile.
/// The bytes: (8 - 1) x C over the ranks, as Megatron's reduce-scatter.
#[test]
fn row_tiles_are_reduced_to_their_owners() {
    let c = Compiler::new();
    let example =
        scaled(&std::fs::read_to_string(format!("{ROOT}/examples/gemm_rs.mlir")).unwrap());
    let m = c.parse("gemm_rs.mlir", &example).unwrap();
    let base = mercury_conversion::lower_module(&m, None).unwrap();
    let split = "tile{axis=k factor=8 outer=k0 inner=k_t}\nparallelize{axis=k0 level=0}\n";
    let megatron = {
        let mut m2 = m.clone();
        c.schedule(&mut m2, &Schedule::script(split)).unwrap();
        mercury_conversion::lower_module(&m2, None).unwrap()
    };
    let sent = |p: &mercury_plan::Plan| p.bytes_sent_per_rank().values().sum::<usize>();
    for (factor, two_gemms) in [(2, false), (8, false), (16, false), (8, true)] {
        let mut script = format!("{split}tile{{axis=m factor={factor} outer=m0 inner=m_t}}\n");
        if two_gemms {
            script.push_str("tile{axis=k_t factor=2 outer=k1 inner=k_u}\n");
        }
        let mut m2 = m.clone();
        c.schedule(&mut m2, &Schedule::script(&script))
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let plan = mercury_conversion::lower_module(&m2, None).unwrap();
        let report = mercury_conversion::report::comm_plan(&plan, false);
        let case = format!("factor {factor}, two GEMMs {two_gemms}");
        // One reduce per (tile, owner part) on each of the 8 ranks, each tile's in the stage
        // after its GEMMs (beside the next tile's): `factor` stages of reduces, and the plan
        // one stage longer than its GEMMs (stage 0 is the inputs').
        let ops = 8 * factor.max(8);
        assert!(
            report.contains(&format!("@C: reduce(add), {ops} ops in {factor} stages"))
                && !report.contains("all_reduce"),
            "{case}: {report}"
        );
        let gemm_stages = factor * if two_gemms { 2 } else { 1 };
        assert_eq!(plan.num_stages(), gemm_stages + 2, "{case}: {report}");
        let partial = plan
            .ranks
            .iter()
            .flat_map(|r| &r.slots)
            .filter(|s| s.name.starts_with("C.") && s.dtype == mercury_plan::DType::BF16)
            .count();
        let otherwise = if two_gemms {
            assert_eq!(partial, 0, "{case}: the partial sums stay f32");
            None
        } else {
            assert!(partial > 0, "{case}: bf16 partial sums");
            // Megatron's plan sends its bf16 partial sums too: the same bytes.
            assert_eq!(sent(&plan), sent(&megatron), "{case}");
            Some("partial sums are reduced in bf16")
        };
        for seed in [1, 2] {
            computes(
                &format!("{case} (seed {seed})"),
                &plan,
                &base,
                seed,
                otherwise,
            )
            .unwrap_or_else(|m| panic!("{m}"));
        }
    }
    // C placed otherwise, the same schedule (M in 8 tiles): (its plan, the single-device
    // plan, the comm report).
    let placed = |sharding: &str| {
        let text = example.replace(
            "@C : [@m, @n] bf16 out sharding [S(0), R]",
            &format!("@C : [@m, @n] bf16 out sharding {sharding}"),
        );
        assert_ne!(text, example);
        let m = c.parse("gemm_rs.mlir", &text).unwrap();
        let base = mercury_conversion::lower_module(&m, None).unwrap();
        let mut m2 = m.clone();
        let script = format!("{split}tile{{axis=m factor=8 outer=m0 inner=m_t}}\n");
        c.schedule(&mut m2, &Schedule::script(&script)).unwrap();
        let plan = mercury_conversion::lower_module(&m2, None).unwrap();
        let report = mercury_conversion::report::comm_plan(&plan, false);
        (plan, base, report)
    };
    // A replicated C: every rank keeps the whole sum, the all-reduce stays.
    let (plan, base, report) = placed("[R, R]");
    assert!(
        report.contains("all_reduce(add)") && !report.contains(": reduce(add)"),
        "{report}"
    );
    computes(
        "replicated C",
        &plan,
        &base,
        1,
        Some("partial sums are all-reduced in bf16"),
    )
    .unwrap_or_else(|m| panic!("{m}"));
    // A column-sharded C: each row tile crosses every rank's columns, every member owns one
    // column part of it, so each tile is one reduce-scatter along the columns (it was one
    // reduce per owner: 8 calls per tile for the same bytes).
    let (plan, base, report) = placed("[R, S(0)]");
    assert!(
        report.contains("@C: reduce_scatter(add), 64 ops in 8 stages")
            && !report.contains(": reduce(add)"),
        "{report}"
    );
    assert_eq!(
        sent(&plan),
        sent(&megatron),
        "column-sharded C: Megatron's bytes"
    );
    for seed in [1, 2] {
        computes(
            &format!("column-sharded C (seed {seed})"),
            &plan,
            &base,
            seed,
            Some("partial sums are reduced in bf16"),
        )
        .unwrap_or_else(|m| panic!("{m}"));
    }
}

/// A finished f32 tile of a bf16 output that is not an accumulator (a reduce-scatter's result)
/// is cast to bf16 before its end reshard moves it; an f16 output's is not (the executors'
/// copies convert f32 <-> bf16 only). The GEMM reduce-scatter with C column-sharded while it
/// is computed and returned to its declared rows at the end: each rank's reduce-scatter leaves
/// it an f32 column block `C.rs`, which the end all-to-all moves.
#[test]
fn a_reduce_scatter_result_is_narrowed_for_a_bf16_output_only() {
    // Two GEMMs per rank sum into the accumulator, so the reduce-scatter's result is f32
    // (with one, the partial sums would already be bf16: bf16_partial_sums).
    let script = "reshard{buffer=C sharding=R,S(0)}
tile{axis=k factor=8 outer=k0 inner=k_t}
parallelize{axis=k0 level=0}
tile{axis=k_t factor=2 outer=k1 inner=k_u}
reshard{buffer=C sharding=S(0),R at=end}
";
    let c = Compiler::new();
    let example =
        scaled(&std::fs::read_to_string(format!("{ROOT}/examples/gemm_rs.mlir")).unwrap());
    for dtype in [mercury_plan::DType::BF16, mercury_plan::DType::F16] {
        let text = example.replace(
            "@C : [@m, @n] bf16 out",
            &format!("@C : [@m, @n] {} out", dtype.name()),
        );
        assert!(text.contains(&format!("{} out", dtype.name())));
        let m = c.parse("gemm_rs.mlir", &text).unwrap();
        let base = mercury_conversion::lower_module(&m, None).unwrap();
        let mut m2 = m.clone();
        c.schedule(&mut m2, &Schedule::script(script))
            .unwrap_or_else(|d| panic!("{}", d.render()));
        let plan = mercury_conversion::lower_module(&m2, None).unwrap();
        let report = mercury_conversion::report::comm_plan(&plan, false);
        assert!(
            report.contains("reduce_scatter(add)") && report.contains("all_to_all"),
            "{report}"
        );
        for seed in [1, 2] {
            computes(&format!("C in {dtype:?}"), &plan, &base, seed, None)
                .unwrap_or_else(|m| panic!("{m}"));
        }
        for r in &plan.ranks {
            let name = |v: &mercury_plan::View| r.slots[v.slot].name.as_str();
            let dtype_of = |v: &mercury_plan::View| r.slots[v.slot].dtype;
            // The casts of the reduce-scatter's result.
            let casts: Vec<&mercury_plan::View> = r
                .stages
                .iter()
                .flat_map(|st| &st.compute)
                .filter_map(|op| match op {
                    mercury_plan::ComputeOp::Copy { src, dst }
                        if name(src) == "C.rs" && dtype_of(dst) != dtype_of(src) =>
                    {
                        Some(dst)
                    }
                    _ => None,
                })
                .collect();
            // What the end all-to-all sends.
            let moved: Vec<&mercury_plan::View> = r
                .stages
                .iter()
                .flat_map(|st| &st.comm)
                .filter_map(|op| match op {
                    mercury_plan::CommOp::Collective {
                        collective: mercury_plan::Collective::AllToAll { src, .. },
                        ..
                    } => Some(src),
                    _ => None,
                })
                .collect();
            assert_eq!(moved.len(), 1, "rank {}: {moved:?}", r.rank);
            assert!(
                r.slots
                    .iter()
                    .any(|s| s.name == "C.rs" && s.dtype == mercury_plan::DType::F32),
                "rank {}: no f32 C.rs",
                r.rank
            );
            if dtype == mercury_plan::DType::BF16 {
                assert_eq!(casts.len(), 1, "rank {}", r.rank);
                assert_eq!(name(casts[0]), "C.narrow");
                assert_eq!(dtype_of(casts[0]), mercury_plan::DType::BF16);
                assert_eq!(moved[0].slot, casts[0].slot, "rank {}", r.rank);
            } else {
                assert!(casts.is_empty(), "rank {}: {casts:?}", r.rank);
                assert!(
                    r.slots
                        .iter()
                        .filter(|s| s.name.starts_with("C."))
                        .all(|s| s.dtype == mercury_plan::DType::F32),
                    "rank {}: a narrowed slot for an f16 output",
                    r.rank
                );
                assert_eq!(name(moved[0]), "C.rs", "rank {}", r.rank);
            }
        }
    }
}

/// Random GEMMs with K split over random mesh levels, C placed by rows and columns over random
/// other (or the same) levels, M and N tiled by random factors, and sometimes M's tiles
/// parallelized over a level K does not use: every output piece every rank holds is the
/// operator's (f64, exactly), whichever sum the lowering picked (a reduce per owner, a
/// reduce-scatter, an all-reduce). Fixed seed; the reduce to owners must be among the picks.
#[test]
fn random_row_and_column_tiles_reduce_to_their_owners() {
    use rand::{Rng, SeedableRng};
    let c = Compiler::new();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x0052_4455_4345);
    let meshes: [&[usize]; 6] = [&[2], &[4], &[8], &[2, 2], &[2, 4], &[4, 2]];
    let levels_text = |ls: &[usize]| {
        if ls.is_empty() {
            "R".to_string()
        } else {
            let l: Vec<String> = ls.iter().map(|l| l.to_string()).collect();
            format!("S({})", l.join(", "))
        }
    };
    let mut picked: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut run, mut refused) = (0, 0);
    for case in 0..160 {
        let mesh = meshes[rng.gen_range(0..meshes.len())];
        let n_levels = mesh.len();
        // K over a nonempty set of levels, in order.
        let k_levels: Vec<usize> = loop {
            let l: Vec<usize> = (0..n_levels).filter(|_| rng.gen_bool(0.6)).collect();
            if !l.is_empty() {
                break l;
            }
        };
        // C's rows and columns over disjoint sets of levels (possibly none).
        let (mut rows, mut cols) = (Vec::new(), Vec::new());
        for l in 0..n_levels {
            match rng.gen_range(0..3) {
                0 => rows.push(l),
                1 => cols.push(l),
                _ => {}
            }
        }
        let size = 32;
        let text = format!(
            "commir.mesh @mesh shape {mesh:?}\n\
             commir.kernel @g on @mesh {{\n\
             \x20 commir.axis @m = {size} spatial\n\
             \x20 commir.axis @k = {size} managed\n\
             \x20 commir.axis @n = {size} spatial\n\
             \x20 commir.buffer @A : [@m, @k] bf16 in sharding [R, R]\n\
             \x20 commir.buffer @B : [@k, @n] bf16 in sharding [R, R]\n\
             \x20 commir.buffer @C : [@m, @n] bf16 out sharding [{}, {}]\n\
             \x20 %a = commir.load @A[@m, @k] : !commir.tile<bf16>\n\
             \x20 %b = commir.load @B[@k, @n] : !commir.tile<bf16>\n\
             \x20 %c = commir.patch \"gemm\" (%a, %b) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>\n\
             \x20 commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>\n\
             }}\n",
            levels_text(&rows),
            levels_text(&cols)
        );
        let m = c
            .parse("g.mlir", &text)
            .unwrap_or_else(|d| panic!("case {case}: {}\n{text}", d.render()));
        let base = mercury_conversion::lower_module(&m, None).unwrap();
        let mut script = String::new();
        let mut k_axis = "k".to_string();
        for (i, l) in k_levels.iter().enumerate() {
            script.push_str(&format!(
                "tile{{axis={k_axis} factor={} outer=k{i} inner=k{i}_t}}\nparallelize{{axis=k{i} level={l}}}\n",
                mesh[*l]
            ));
            k_axis = format!("k{i}_t");
        }
        let free: Vec<usize> = (0..n_levels).filter(|l| !k_levels.contains(l)).collect();
        let m_factor = [1, 2, 4, 8, 16][rng.gen_range(0..5)];
        if m_factor > 1 {
            script.push_str(&format!(
                "tile{{axis=m factor={m_factor} outer=m0 inner=m_t}}\n"
            ));
            if let Some(l) = free.iter().find(|l| mesh[**l] == m_factor) {
                if rng.gen_bool(0.5) {
                    script.push_str(&format!("parallelize{{axis=m0 level={l}}}\n"));
                }
            }
        }
        let n_factor = [1, 1, 2, 4][rng.gen_range(0..4)];
        if n_factor > 1 {
            script.push_str(&format!(
                "tile{{axis=n factor={n_factor} outer=n0 inner=n_t}}\n"
            ));
        }
        let mut m2 = m.clone();
        if let Err(d) = c.schedule(&mut m2, &Schedule::script(&script)) {
            refused += 1;
            assert!(!d.message.is_empty(), "case {case}");
            continue;
        }
        let plan = mercury_conversion::lower_module(&m2, None)
            .unwrap_or_else(|d| panic!("case {case}: {}\n{text}\n{script}", d.render()));
        let inputs = random_inputs(&base, case);
        let want = &execute(&base, &inputs).unwrap()["C"];
        let held = mercury_runtime::cpu::execute_pieces(&plan, &inputs)
            .unwrap_or_else(|e| panic!("case {case}: {e}\n{text}\n{script}"));
        for p in &held {
            let mut i = 0;
            for r in p.region.offset[0]..p.region.offset[0] + p.region.extent[0] {
                for col in p.region.offset[1]..p.region.offset[1] + p.region.extent[1] {
                    let (g, w) = (p.values[i], want[r * size + col]);
                    assert!(
                        (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                        "case {case}: rank {} holds C[{r}, {col}] = {g}, not {w}\n{text}\n{script}",
                        p.rank
                    );
                    i += 1;
                }
            }
        }
        let whole = mercury_runtime::cpu::assemble(&plan, &held);
        assert!(
            whole["C"].iter().all(|x| !x.is_nan()),
            "case {case}: C not covered\n{text}\n{script}"
        );
        let report = mercury_conversion::report::comm_plan(&plan, false);
        for (what, name) in [
            ("reduce", ": reduce(add)"),
            ("reduce-scatter", "reduce_scatter(add)"),
            ("all-reduce", "all_reduce(add)"),
        ] {
            *picked.entry(what).or_default() += usize::from(report.contains(name));
        }
        run += 1;
    }
    eprintln!("random GEMM tiles: {run} run, {refused} schedules refused, sums picked {picked:?}");
    assert!(run >= 100, "{run} of 160 cases ran");
    assert!(picked["reduce"] >= 20, "{picked:?}");
}
