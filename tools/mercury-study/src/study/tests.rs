use super::tables::why_not;
use super::*;

/// The factor rewriting is the identity at the shape the `.sched` files are written for.
#[test]
fn schedules_are_the_files_at_2x4() {
    let v = attention_schedules(2, 4, "h");
    let script = |l: &str| v.iter().find(|s| s.label == l).unwrap().script.clone();
    assert_eq!(script("Ring"), sources::RING_ATTENTION);
    assert_eq!(script("Ulysses"), sources::ULYSSES);
    assert_eq!(script("USP"), sources::USP);
    let g = attention_schedules(2, 2, "hk");
    let usp = &g.iter().find(|s| s.label == "USP").unwrap().script;
    assert!(usp.contains("tile{axis=hk factor=2 ") && usp.contains("tile{axis=i factor=2 "));
    let f = with_factors(
        "tile{axis=a factor=4 }tile{axis=b factor=2 }",
        &[(4, 2), (2, 4)],
    );
    assert_eq!(f, "tile{axis=a factor=2 }tile{axis=b factor=4 }");
}

#[test]
fn extents_are_rewritten() {
    let op = attention_operator(&attn(16, 8, 4096)).unwrap();
    assert!(op.text.contains("commir.axis @b = 16 spatial"));
    assert!(op.text.contains("commir.axis @g = 4 spatial"));
    assert!(op.text.contains("commir.axis @j = 4096 managed min 128"));
    assert_eq!(op.head_axis, "hk");
    assert!(with_extent(&op.text, "zz", 1).is_none());
}

/// The known schedules and the search's equivalent candidates lower to plans the model
/// prices identically; the search's best is no slower than any known schedule.
#[test]
fn known_schedules_match_search_candidates() {
    let topo = Topology::preset("h100-2x4").unwrap().unwrap();
    let case = attention_case(&attn(1, 8, 8192), &topo).unwrap();
    let search = |n: &str| {
        case.search
            .iter()
            .find(|e| e.candidate.name == n)
            .and_then(|e| e.latency())
            .unwrap_or_else(|| panic!("{n} missing"))
    };
    for (label, name) in [
        ("Ring", "mesh 8: L0=ring"),
        ("2-level ring", "mesh 2x4: L0=ring L1=ring"),
        ("Ulysses", "mesh 8: L0=heads"),
        ("USP", "mesh 2x4: L0=ring L1=heads"),
        ("CP (all-gather KV)", "mesh 8: L0=gather"),
        ("Tree", "mesh 8: L0=tree"),
    ] {
        let l = case
            .latency(label)
            .unwrap_or_else(|| panic!("{label}: {:?}", why_not(&case, label)));
        assert!((l / search(name) - 1.0).abs() < 1e-9, "{label} vs {name}");
    }
    let best = case.best().unwrap().latency().unwrap();
    for (_, e) in &case.named {
        assert!(best <= e.as_ref().unwrap().latency().unwrap() * (1.0 + 1e-12));
    }
    let mut cost = Cost::default();
    let t = fig9_table(
        &topo,
        &[Fig9Case {
            label: "GQA BS1 8K",
            shape: attn(1, 8, 8192),
            paper: [1.0, 2.0, 3.0],
        }],
        &mut cost,
    );
    let row = t.lines().find(|l| l.starts_with("| GQA BS1 8K")).unwrap();
    assert!(
        row.contains("/ 2.00)") && row.ends_with("/ 3.00) |"),
        "{row}"
    );
    assert_eq!(cost.cases, 1);
}

#[test]
fn memory_table_at_2m_tokens_marks_what_does_not_fit() {
    let topo = Topology::preset("h200-1x8").unwrap().unwrap();
    let t = memory_table(&topo, &attn(4, 8, 2 << 20), &mut Cost::default());
    let line = |name: &str| {
        t.lines()
            .find(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("{name} missing:\n{t}"))
            .to_string()
    };
    assert!(line("Ring").contains("| yes |"), "{t}");
    assert!(line("Tree").contains("| no |"), "{t}");
    assert!(t.contains("search, Pareto frontier"), "{t}");
}

/// The lowering delivers every output in its declared placement: a GEMM schedule that
/// distributes the rows of a column-sharded output pays for moving it, and no candidate is
/// flagged by the layout check.
#[test]
fn output_layout_is_checked() {
    let topo = Topology::preset("h100-1x8").unwrap().unwrap();
    let case = run_case(
        gemm_operator(false, 1024, 1024, 1024),
        gemm_schedules(false, 8),
        &topo,
    )
    .unwrap();
    assert!(
        case.moved_output.is_empty(),
        "{:?}",
        case.moved_output.keys().collect::<Vec<_>>()
    );
}

/// Every search candidate and known schedule of a tiny attention (MHA and GQA) on
/// `2 x 4` computes the unscheduled operator on the CPU executor.
#[test]
fn search_candidates_compute_attention() {
    let reg = mercury_commir::registry();
    let topo = Topology::preset("h100-2x4").unwrap().unwrap();
    for (base, head, heads) in [
        (sources::ATTENTION, "h", [("h", 8), ("b", 2)]),
        (sources::ATTENTION_GQA, "hk", [("hk", 8), ("g", 2)]),
    ] {
        let text = with_extents(base, &[heads[0], heads[1], ("i", 32), ("j", 32)])
            .unwrap()
            .replace(" min 128", "")
            .replace(", 128]", ", 4]");
        let m = mercury_ir::parse_str(&reg, "tiny", &text).unwrap();
        let reference = mercury_conversion::lower_module(&m, None).unwrap();
        let inputs = mercury_runtime::cpu::random_inputs(&reference, 7);
        let want = mercury_runtime::cpu::execute(&reference, &inputs).unwrap();
        let mut src = CommirSource::from_text(&text, "tiny", None).unwrap();
        let mut plans: Vec<Candidate> = attention_schedules(2, 4, head)
            .iter()
            .map(|s| src.scheduled(s.label, &s.script, Some(&s.mesh)).unwrap())
            .collect();
        plans.extend(src.candidates(&topo).unwrap().filter_map(Result::ok));
        assert!(plans.len() > 90, "{}", plans.len());
        for c in &plans {
            let got = mercury_runtime::cpu::execute(&c.plan, &inputs)
                .unwrap_or_else(|e| panic!("{head} {}: {e}", c.name));
            let err = mercury_runtime::cpu::relative_error(&got, &want);
            assert!(err < 1e-9, "{head} {}: relative error {err}", c.name);
        }
    }
}
