//! Runs the FIXTURE plans on the runtime's CPU executor (`mercury_runtime::cpu`, f64,
//! uninitialised slots NaN-poisoned) and compares the outputs with the reference kernels, so
//! the plans the cost model times are real schedules.

use mercury_kernels::cpu;
use mercury_plan::{ComputeOp, Plan};
use mercury_search::operator::{AttentionShape, GemmShape};
use mercury_study::fixtures::{attention_plan, attention_schedules, gemm_plan, GemmSchedule};
use std::collections::{BTreeMap, HashMap};

/// Runs `plan` on the global inputs given by buffer index; returns the outputs by index.
fn execute(plan: &Plan, globals: &BTreeMap<usize, Vec<f64>>) -> BTreeMap<usize, Vec<f64>> {
    let inputs: HashMap<String, Vec<f64>> = globals
        .iter()
        .map(|(i, v)| (plan.buffers[*i].name.clone(), v.clone()))
        .collect();
    let out = mercury_runtime::cpu::execute(plan, &inputs)
        .unwrap_or_else(|e| panic!("{}: {e}", plan.name));
    plan.buffers
        .iter()
        .enumerate()
        .filter_map(|(i, b)| out.get(&b.name).map(|v| (i, v.clone())))
        .collect()
}

fn data(n: usize, seed: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64 + 1.0) * seed).sin()).collect()
}

fn check_attention(shape: AttentionShape, n: usize) -> usize {
    let AttentionShape {
        batch: b,
        heads: hq,
        kv_heads: hk,
        seq: s,
        head_dim: d,
        causal,
    } = shape;
    let q = data(b * hq * s * d, 0.37);
    let k = data(b * hk * s * d, 0.71);
    let v = data(b * hk * s * d, 1.13);
    let mut want = vec![0.0; q.len()];
    let mut lse = vec![0.0; b * hq * s];
    cpu::attention(
        &q,
        &k,
        &v,
        &mut want,
        &mut lse,
        cpu::AttnDims {
            b,
            hq,
            hk,
            sq: s,
            sk: s,
            d,
        },
        cpu::AttnParams {
            causal,
            scale: 1.0 / (d as f64).sqrt(),
            q_offset: 0,
            k_offset: 0,
        },
    );
    let globals: BTreeMap<usize, Vec<f64>> = [(0, q), (1, k), (2, v)].into_iter().collect();
    let scheds = attention_schedules(&shape, n, true);
    for sch in &scheds {
        let plan = attention_plan(&shape, sch).unwrap();
        mercury_plan::verify(&plan).unwrap();
        let got = execute(&plan, &globals);
        let o = &got[&3];
        for (i, (x, y)) in o.iter().zip(&want).enumerate() {
            assert!(
                (x - y).abs() < 1e-10,
                "{} (causal {causal}): element {i}: {x} vs {y}",
                sch.name()
            );
        }
    }
    scheds.len()
}

#[test]
fn attention_fixtures_compute_attention() {
    let base = AttentionShape {
        batch: 2,
        heads: 8,
        kv_heads: 8,
        seq: 64,
        head_dim: 4,
        causal: false,
    };
    let n = check_attention(base, 8);
    assert!(n >= 30, "only {n} schedules checked");
    // GQA and causal masks.
    check_attention(
        AttentionShape {
            kv_heads: 2,
            batch: 1,
            ..base
        },
        8,
    );
    check_attention(
        AttentionShape {
            causal: true,
            kv_heads: 4,
            ..base
        },
        8,
    );
    check_attention(
        AttentionShape {
            causal: true,
            ..base
        },
        4,
    );
}

#[test]
fn gemm_fixtures_compute_gemm() {
    let (m, n, k) = (16, 8, 12);
    let a = data(m * k, 0.3);
    let b = data(k * n, 0.9);
    let mut want = vec![0.0; m * n];
    cpu::gemm(m, n, k, &a, &b, &mut want, false);
    let globals: BTreeMap<usize, Vec<f64>> = [(0, a), (1, b)].into_iter().collect();
    for p in [1, 2, 4] {
        for s in GemmSchedule::ALL {
            let plan = gemm_plan(
                &GemmShape {
                    m,
                    n,
                    k,
                    reduce_scatter: false,
                },
                s,
                p,
            )
            .unwrap();
            let got = execute(&plan, &globals);
            for (x, y) in got[&2].iter().zip(&want) {
                assert!((x - y).abs() < 1e-10, "{} over {p}: {x} vs {y}", s.name());
            }
        }
    }
}

#[test]
fn executor_catches_a_broken_plan() {
    // Drop one ring transfer's receive target: the plan then reads poisoned data.
    let shape = AttentionShape {
        batch: 1,
        heads: 2,
        kv_heads: 2,
        seq: 16,
        head_dim: 2,
        causal: false,
    };
    let sched = attention_schedules(&shape, 4, false)
        .into_iter()
        .find(|s| s.name() == "ring")
        .unwrap();
    let mut plan = attention_plan(&shape, &sched).unwrap();
    // Make rank 1 attend its own chunk twice instead of the received one.
    let st = &mut plan.ranks[1].stages[1];
    if let ComputeOp::Patch { inputs, .. } = &mut st.compute[0] {
        inputs[1].slot = 1; // k_in
        inputs[2].slot = 2; // v_in
    }
    let q = data(2 * 16 * 2, 0.37);
    let k = data(2 * 16 * 2, 0.71);
    let v = data(2 * 16 * 2, 1.13);
    let globals: BTreeMap<usize, Vec<f64>> = [(0, q), (1, k), (2, v)].into_iter().collect();
    let inputs: HashMap<String, Vec<f64>> = globals
        .iter()
        .map(|(i, v)| (plan.buffers[*i].name.clone(), v.clone()))
        .collect();
    let sched_ok = attention_plan(&shape, &sched).unwrap();
    let good = execute(&sched_ok, &globals);
    // The executor refuses the plan (its verifier sees the race), or its output differs.
    let noticed = match mercury_runtime::cpu::execute(&plan, &inputs) {
        Err(_) => true,
        Ok(got) => got["o"]
            .iter()
            .zip(&good[&3])
            .any(|(a, b)| (a - b).abs() > 1e-6 || a.is_nan() != b.is_nan()),
    };
    assert!(noticed, "the check must notice a wrong plan");
}
