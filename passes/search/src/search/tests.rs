use super::*;

fn eval(name: &str, predicted_s: f64) -> Evaluated {
    Evaluated {
        candidate: Candidate {
            name: name.to_string(),
            transform_script: String::new(),
            annotated_ir: String::new(),
            plan: Plan {
                name: "k".into(),
                mesh: vec![1],
                buffers: vec![],
                documents: vec![],
                ranks: vec![],
            },
        },
        status: Status::Ranked,
        memory: None,
        predicted_s: Some(predicted_s),
        measured_s: None,
        tier_bytes: vec![],
        exposed_comm: 0.0,
        stages: 0,
        detail_dropped: false,
    }
}

/// Only the best `keep` and the Pareto frontier keep their plan and annotated IR; the
/// others keep their figures and stage count.
#[test]
fn drop_details_keeps_the_best_and_the_frontier() {
    let with_mem = |name: &str, s: f64, bytes: u64| {
        let mut e = eval(name, s);
        e.candidate.annotated_ir = "ir".into();
        e.candidate.plan.ranks = vec![mercury_plan::RankProgram {
            rank: 0,
            coords: vec![0],
            slots: vec![],
            stages: vec![],
            outputs: vec![],
        }];
        e.stages = 3;
        e.memory = Some(MemoryReport {
            per_rank: vec![bytes],
            peak_bytes: bytes,
            peak_rank: 0,
            usable_bytes: 1000,
            fits: true,
            largest_slots: vec![],
        });
        e
    };
    // fast/big, slower/smaller (frontier), slowest/biggest (dominated), a dominated one.
    let mut v = vec![
        with_mem("a", 1.0, 100),
        with_mem("b", 2.0, 50),
        with_mem("c", 3.0, 200),
        with_mem("d", 2.5, 60),
    ];
    drop_details(&mut v, 1);
    let kept: Vec<&str> = v
        .iter()
        .filter(|e| !e.detail_dropped)
        .map(|e| e.candidate.name.as_str())
        .collect();
    assert_eq!(kept, ["a", "b"]);
    for e in &v {
        assert_eq!(e.detail_dropped, e.candidate.plan.ranks.is_empty());
        assert_eq!(e.detail_dropped, e.candidate.annotated_ir.is_empty());
        assert_eq!(e.stages, 3);
    }
}

/// Refusals are counted per distinct reason, with the first of each as written.
#[test]
fn refusals_are_summarised() {
    let errors: Vec<String> = (0..1000)
        .map(|i| format!("mesh {i}x2 [\"m\"]: dimension 0 of '@A' does not divide into {i} shards"))
        .chain(["mesh 4 [\"k\"]: something else".to_string()])
        .collect();
    let s = refusal_summary(&errors, "refused");
    assert_eq!(
            s,
            "1001 refused, 2 distinct reason(s):\n  1000 x dimension N of '@A' does not divide into N shards\n      e.g. mesh 0x2 [\"m\"]: dimension 0 of '@A' does not divide into 0 shards\n  1 x something else\n      e.g. mesh 4 [\"k\"]: something else"
        );
}

/// Times that differ only in the rounding of their sums rank by name; a nanosecond apart
/// they rank by time.
#[test]
fn equal_predictions_rank_by_name() {
    let mut v = vec![
        eval("zigzag ring", 7.52e-3),
        eval("ring", 7.52e-3 * (1.0 + 1e-12)),
        eval("tree", 7.52e-3 - 2e-9),
    ];
    sort_ranked(&mut v);
    let names: Vec<&str> = v.iter().map(|e| e.candidate.name.as_str()).collect();
    assert_eq!(names, ["tree", "ring", "zigzag ring"]);
}
