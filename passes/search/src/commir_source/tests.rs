use super::*;

/// The level bound keeps every mesh of up to 16 devices (a GEMM's 10 roles on 16: all 4
/// levels; causal grouped-query attention) and bounds the large ones: attention's 5 roles on 32 devices to 4 levels, on 64
/// to 2, on 512 to 1.
#[test]
fn level_bound_keeps_small_meshes_and_bounds_large_ones() {
    let bound =
        |n: usize, roles: usize| level_bound(&factorisations(n), |s| roles.pow(s.len() as u32), n);
    assert_eq!(bound(16, 10), 4);
    // Causal grouped-query attention: 6 roles, each schedule also zigzag.
    let gqa = level_bound(&factorisations(16), |s| 2 * 6usize.pow(s.len() as u32), 16);
    assert_eq!(gqa, 4);
    assert_eq!(bound(8, 10), 3);
    assert_eq!(bound(32, 5), 4);
    assert_eq!(bound(64, 5), 2);
    assert_eq!(bound(512, 5), 1);
}

/// A bounded enumeration says what it left out; an unbounded one says nothing.
#[test]
fn left_out_meshes_are_reported() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/attention.mlir"
    ))
    .unwrap();
    let topo = Topology::preset("h100-2x4").unwrap().unwrap();
    let mut all = CommirSource::from_text(&text, "attention.mlir", None).unwrap();
    let n_all = all.candidates(&topo).unwrap().count();
    assert_eq!(n_all, 5 + 2 * 25 + 125);
    assert_eq!(all.left_out(), None);
    let mut one = CommirSource::from_text(&text, "attention.mlir", None)
        .unwrap()
        .with_max_levels(1);
    assert_eq!(one.candidates(&topo).unwrap().count(), 5);
    let w = one.left_out().unwrap();
    assert!(
            w.starts_with("meshes of more than 1 level(s) were not tried (as asked): 175 candidate(s) on 3 mesh shape(s)"),
            "{w}"
        );
}

#[test]
fn factorisations_of_8() {
    assert_eq!(
        factorisations(8),
        vec![vec![2, 2, 2], vec![2, 4], vec![4, 2], vec![8]]
    );
}

#[test]
fn attention_candidates_lower_and_include_ring_and_ulysses() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/attention.mlir"
    ))
    .unwrap();
    let mut src = CommirSource::from_text(&text, "attention.mlir", None).unwrap();
    let topo = Topology::preset("h100-2x4").unwrap().unwrap();
    let (mut ok, mut bad) = (Vec::new(), 0);
    for c in src.candidates(&topo).unwrap() {
        match c {
            Ok(c) => ok.push(c),
            Err(_) => bad += 1,
        }
    }
    assert!(
        ok.len() >= 20,
        "only {} candidates ({bad} refused)",
        ok.len()
    );
    assert!(ok.iter().any(|c| c.name == "mesh 8: L0=ring"));
    assert!(ok.iter().any(|c| c.name == "mesh 8: L0=heads"));
    assert!(ok.iter().any(|c| c.name == "mesh 2x4: L0=ring L1=heads"));
    for c in &ok {
        mercury_plan::verify(&c.plan).unwrap();
        assert_eq!(c.plan.num_ranks(), 8);
    }
}

/// The GEMM candidates `k+shift(m)` and `k+shift-halves(m)` are the plans of
/// shift_reduce.sched and shift_reduce_halves.sched (their templates).
#[test]
fn shift_reduce_candidates_are_their_known_schedules() {
    let read = |f: &str| {
        std::fs::read_to_string(format!("{}/../../examples/{f}", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
    };
    let text = read("gemm_rs.mlir");
    let mut src = CommirSource::from_text(&text, "gemm_rs.mlir", None).unwrap();
    let topo = Topology::preset("h200-1x8").unwrap().unwrap();
    let ok: Vec<Candidate> = src.candidates(&topo).unwrap().flatten().collect();
    let compiler = mercury_driver::Compiler::new();
    for (name, sched) in [
        ("mesh 8: L0=k+shift(m)", "shift_reduce.sched"),
        ("mesh 8: L0=k+shift-halves(m)", "shift_reduce_halves.sched"),
    ] {
        let c = ok
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        let mut m = compiler.parse("gemm_rs.mlir", &text).unwrap();
        let script = read(&format!("schedules/{sched}"));
        compiler
            .schedule(&mut m, &mercury_driver::Schedule::script(&script))
            .unwrap();
        let plan = mercury_conversion::lower_module(&m, None).unwrap();
        assert_eq!(plan.num_stages(), c.plan.num_stages(), "{name}");
        assert_eq!(
            plan.bytes_sent_per_rank(),
            c.plan.bytes_sent_per_rank(),
            "{name}"
        );
        assert!(
            crate::templates::template_of(name).is_some_and(|t| t.contains(sched)),
            "{name}"
        );
    }
}

/// The naive attention (tile ops) is patched first: the same candidates and plans as the
/// hand-patched example, transforms that start with `patch`, another cache signature.
#[test]
fn naive_attention_is_patched_first() {
    let read = |f: &str| {
        std::fs::read_to_string(format!("{}/../../examples/{f}", env!("CARGO_MANIFEST_DIR")))
            .unwrap()
    };
    let mut naive =
        CommirSource::from_text(&read("attention_naive.mlir"), "naive.mlir", None).unwrap();
    let mut patched =
        CommirSource::from_text(&read("attention.mlir"), "attention.mlir", None).unwrap();
    let topo = Topology::preset("h100-1x8").unwrap().unwrap();
    let a = naive.default_candidate(&topo).unwrap();
    let b = patched.default_candidate(&topo).unwrap();
    assert_eq!(a.name, b.name);
    assert_eq!(a.plan, b.plan);
    let lines: Vec<&str> = a.transform_script.lines().collect();
    assert_eq!(lines[2], "patch", "{}", a.transform_script);
    assert_eq!(
        lines[3..],
        b.transform_script.lines().collect::<Vec<_>>()[2..]
    );
    assert_ne!(naive.signature(), patched.signature());
}

/// Causal attention: the search tries the ring with zigzag placements too, and the cost
/// model, which prices every rank's causal work, ranks it faster than the contiguous ring
/// (where rank 7 works at every step while rank 0 idles after its first).
#[test]
fn zigzag_ring_is_a_candidate_and_priced_faster_for_causal_attention() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/attention_causal.mlir"
    ))
    .unwrap();
    let src = CommirSource::from_text(&text, "attention_causal.mlir", None).unwrap();
    let topo = Topology::preset("h200-1x8").unwrap().unwrap();
    let (op, ax) = src.op().unwrap();
    let predict = |zigzag: bool| {
        let c = src.attempt(&[8], &["ring"], op, &ax, zigzag).unwrap();
        if zigzag {
            assert_eq!(c.name, "mesh 8: L0=ring zigzag");
            assert!(c.transform_script.contains("balance-causal"));
        }
        src.check_output_layout(&c.plan).unwrap();
        crate::search::evaluate(c, &topo).predicted_s.unwrap()
    };
    let (zigzag, contiguous) = (predict(true), predict(false));
    assert!(
        zigzag < 0.8 * contiguous,
        "zigzag ring {zigzag} s, contiguous ring {contiguous} s"
    );
}
