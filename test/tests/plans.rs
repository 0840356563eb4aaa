//! The guard of every behaviour-preserving change to the compiler: insta snapshots of the
//! per-rank `Plan` JSON (exactly what `mercury-opt --emit=plan` prints) for every example ×
//! {no schedule, `--shift-shard`, each schedule in `examples/schedules/`}. A combination the
//! compiler refuses snapshots its rendered diagnostic instead, so refusals are guarded too.
//!
//! The snapshots live in `tests/snapshots/plans/`; a plan over 1 MiB of JSON is kept as its
//! size, hash and comm plan. A refactoring must leave every one of them
//! byte-identical; an intended change of the plans is reviewed with `cargo insta review`.

use mercury_driver::{Compiler, Schedule};
use mercury_ir::Diagnostic;
use mercury_plan::verify::{comm_access, compute_access};
use mercury_plan::{fnv1a, Collective, CommOp, ComputeOp, DType, Plan, View};
use mercury_tests::repo;
use std::collections::BTreeMap;
use std::path::Path;

/// The `.mlir` files of `examples/` and `examples/small/`, repository-relative, sorted.
fn examples() -> Vec<String> {
    let mut out = Vec::new();
    for dir in ["examples", "examples/small"] {
        for entry in std::fs::read_dir(repo().join(dir)).expect("examples/") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "mlir") {
                let file = path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .to_string();
                out.push(format!("{dir}/{file}"));
            }
        }
    }
    out.sort();
    out
}

/// `None` (the operator as written), `shift-shard`, then every schedule script, sorted.
fn schedules() -> Vec<Option<String>> {
    let mut scripts: Vec<String> = std::fs::read_dir(repo().join("examples/schedules"))
        .expect("examples/schedules/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sched"))
        .map(|p| p.file_name().expect("name").to_string_lossy().to_string())
        .collect();
    scripts.sort();
    let mut out = vec![None, Some("shift-shard".to_string())];
    out.extend(scripts.into_iter().map(Some));
    out
}

/// Plans larger than this are kept as a digest: their size, an FNV-1a hash of the JSON and the
/// comm plan (striped placements make plans of megabytes: a piece per run of positions).
const LARGEST_KEPT: usize = 1 << 20;

/// Parse, verify, schedule and lower `example` as `mercury-opt [schedule] --emit=plan` does
/// (through the compile path, `mercury_driver`).
fn compile(
    example: &str,
    kernel: Option<&str>,
    schedule: Option<&str>,
) -> Result<Plan, Diagnostic> {
    let text = std::fs::read_to_string(repo().join(example)).expect("example");
    let mut schedule = match schedule {
        None => Schedule::default(),
        Some("shift-shard") => Schedule::shift_shard(),
        Some(script) => {
            let path = repo().join("examples/schedules").join(script);
            Schedule {
                script_name: Some(format!("examples/schedules/{script}")),
                ..Schedule::script(&std::fs::read_to_string(path).expect("schedule"))
            }
        }
    };
    schedule.kernel = kernel.map(str::to_string);
    Compiler::new().compile(example, &text, &schedule)
}

/// The kernels of `example` (`None` for an example of one kernel; several are each scheduled
/// and lowered on their own, as `--kernel NAME` does), each with whether it is an attention
/// backward: the `_bwd` scripts are written for those, the others for the rest.
fn kernels_of(example: &str) -> Vec<(Option<String>, bool)> {
    let text = std::fs::read_to_string(repo().join(example)).expect("example");
    let module = Compiler::new()
        .parse(example, &text)
        .expect("example parses");
    let kernels = mercury_commir::kernels(&module).expect("example verifies");
    let several = kernels.len() > 1;
    kernels
        .into_iter()
        .map(|k| {
            // A backward patch, or a kernel named as one (the naive backward's tile ops).
            let mut bwd = k.name.contains("bwd");
            k.walk(&mut |s, _| {
                bwd |= matches!(s, mercury_commir::Stmt::Patch { kernel, .. } if kernel == "attention_bwd");
            });
            (several.then_some(k.name), bwd)
        })
        .collect()
}

/// Whether `schedule` is written for a backward kernel (a `_bwd` script) or for the others;
/// `None` (no schedule) and `shift-shard` are for every kernel.
fn schedule_for(schedule: Option<&str>, backward: bool) -> bool {
    match schedule {
        None | Some("shift-shard") => true,
        Some(s) => s.ends_with("_bwd.sched") == backward,
    }
}

/// Backward plans larger than this are kept as a digest: nine buffers and their causal blocks
/// make hundreds of KiB of JSON per plan; each is checked numerically in
/// lowering/conversion/tests/backward.rs, and the digest guards that it does not change.
const LARGEST_KEPT_BACKWARD: usize = 64 << 10;

/// Whether `plan` runs an attention backward.
fn backward(plan: &Plan) -> bool {
    plan.ranks.iter().flat_map(|r| &r.stages).any(|st| {
        st.compute.iter().any(|op| {
            matches!(
                op,
                ComputeOp::Patch {
                    patch: mercury_plan::PatchKind::AttentionBwd { .. },
                    ..
                }
            )
        })
    })
}

/// The plan's JSON, or its digest when it is over [`LARGEST_KEPT`] bytes
/// ([`LARGEST_KEPT_BACKWARD`] for a backward).
fn plan_json(plan: &Plan) -> String {
    let json = plan.to_json() + "\n";
    let largest = if backward(plan) {
        LARGEST_KEPT_BACKWARD
    } else {
        LARGEST_KEPT
    };
    if json.len() <= largest {
        return json;
    }
    format!(
        "plan JSON of {} bytes (over {largest}, kept as a digest), FNV-1a 64 {:016x}\n{}",
        json.len(),
        fnv1a(json.as_bytes()),
        mercury_conversion::report::comm_plan(plan, false)
    )
}

/// The members of one collective instance: each rank with its part.
type Members<'a> = Vec<(usize, &'a Collective)>;

/// Whether two views share an element.
fn touch(a: &View, b: &View) -> bool {
    a.slot == b.slot && a.region.overlaps(&b.region)
}

/// Where `plan` rounds a tile that is not finished. A narrowing is a compute `Copy` from an
/// f32 slot into a bf16 one (the lowering's cast of a finished output tile before it moves).
/// Its source must be final: no later op of the rank writes it. Its values, wherever copies,
/// sends, all-gathers, all-to-alls and broadcasts take them, must never be summed again: no
/// `Combine` reads them, no accumulating patch accumulates into them, no `AllReduce` or
/// `ReduceScatter` reduces them (reading them as a GEMM operand or delivering them is fine).
/// Returns one line per violation and the number of narrowings.
fn narrowing_violations(plan: &Plan) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut narrowings = 0;
    let dtype = |r: usize, v: &View| plan.ranks[r].slots.get(v.slot).map(|s| s.dtype);
    let name = |r: usize, v: &View| {
        plan.ranks[r]
            .slots
            .get(v.slot)
            .map_or("?".to_string(), |s| s.name.clone())
    };
    let is_narrowing = |r: usize, op: &ComputeOp| match op {
        ComputeOp::Copy { src, dst } => {
            dtype(r, src) == Some(DType::F32) && dtype(r, dst) == Some(DType::BF16)
        }
        _ => false,
    };
    // (a) The source of a narrowing is final.
    for (r, rank) in plan.ranks.iter().enumerate() {
        for (s, st) in rank.stages.iter().enumerate() {
            for (i, op) in st.compute.iter().enumerate() {
                let ComputeOp::Copy { src, .. } = op else {
                    continue;
                };
                if !is_narrowing(r, op) {
                    continue;
                }
                narrowings += 1;
                let later_compute = rank.stages[s..].iter().enumerate().flat_map(|(t, st)| {
                    let skip = if t == 0 { i + 1 } else { 0 };
                    st.compute
                        .iter()
                        .skip(skip)
                        .flat_map(|op| compute_access(op).1)
                        .map(move |w| (s + t, w))
                });
                let later_comm = rank.stages[s..].iter().enumerate().flat_map(|(t, st)| {
                    st.comm
                        .iter()
                        .flat_map(|op| comm_access(op).1)
                        .map(move |w| (s + t, w))
                });
                if let Some((t, _)) = later_compute.chain(later_comm).find(|(_, w)| touch(w, src)) {
                    bad.push(format!(
                        "rank {r}: stage {s} narrows '{}' {} to bf16, and stage {t} writes it again",
                        name(r, src),
                        src.region
                    ));
                }
            }
        }
    }
    // (b) The narrowed values are never summed, wherever they travel.
    let mut narrowed: Vec<Vec<View>> = vec![Vec::new(); plan.ranks.len()];
    let hit = |narrowed: &[View], v: &View| narrowed.iter().any(|n| touch(n, v));
    for s in 0..plan.num_stages() {
        for (r, rank) in plan.ranks.iter().enumerate() {
            let Some(st) = rank.stages.get(s) else {
                continue;
            };
            for op in &st.compute {
                let summed: Vec<&View> = match op {
                    ComputeOp::Combine { acc, part, .. } => acc.iter().chain(part).collect(),
                    ComputeOp::Patch { patch, outputs, .. } if patch.accumulates() => {
                        outputs.iter().collect()
                    }
                    _ => vec![],
                };
                if let Some(v) = summed.into_iter().find(|v| hit(&narrowed[r], v)) {
                    bad.push(format!(
                        "rank {r}: stage {s} sums narrowed values in '{}' {}",
                        name(r, v),
                        v.region
                    ));
                }
                if let ComputeOp::Copy { src, dst } = op {
                    if is_narrowing(r, op) || hit(&narrowed[r], src) {
                        narrowed[r].push(dst.clone());
                    }
                }
            }
        }
        // Transfers of the stage: what lands where (messages by (from, to, tag); a collective
        // instance is the k-th one of its group in each member's list).
        let mut landed: Vec<(usize, View)> = Vec::new();
        let mut sent = std::collections::HashSet::new();
        let mut instances: BTreeMap<(Vec<usize>, usize), Members> = BTreeMap::new();
        for (r, rank) in plan.ranks.iter().enumerate() {
            let mut seen: BTreeMap<&Vec<usize>, usize> = BTreeMap::new();
            for op in rank.stages.get(s).map_or(&[][..], |st| &st.comm[..]) {
                match op {
                    CommOp::Send { peer, src, tag } if hit(&narrowed[r], src) => {
                        sent.insert((r, *peer, *tag));
                    }
                    CommOp::Collective { group, collective } => {
                        let k = seen.entry(group).or_default();
                        instances
                            .entry((group.clone(), *k))
                            .or_default()
                            .push((r, collective));
                        *k += 1;
                    }
                    _ => {}
                }
            }
        }
        for (r, rank) in plan.ranks.iter().enumerate() {
            for op in rank.stages.get(s).map_or(&[][..], |st| &st.comm[..]) {
                if let CommOp::Recv { peer, dst, tag } = op {
                    if sent.contains(&(*peer, r, *tag)) {
                        landed.push((r, dst.clone()));
                    }
                }
            }
        }
        for members in instances.values() {
            let mut moves = false;
            for (r, c) in members {
                match c {
                    Collective::AllReduce { bufs: read, .. } => {
                        if let Some(v) = read.iter().find(|v| hit(&narrowed[*r], v)) {
                            bad.push(format!(
                                "rank {r}: stage {s} all-reduces narrowed values in '{}' {}",
                                name(*r, v),
                                v.region
                            ));
                        }
                    }
                    Collective::ReduceScatter { src, .. } if hit(&narrowed[*r], src) => {
                        bad.push(format!(
                            "rank {r}: stage {s} reduce-scatters narrowed values in '{}' {}",
                            name(*r, src),
                            src.region
                        ));
                    }
                    Collective::Reduce { src, .. } if hit(&narrowed[*r], src) => {
                        bad.push(format!(
                            "rank {r}: stage {s} reduces narrowed values in '{}' {}",
                            name(*r, src),
                            src.region
                        ));
                    }
                    Collective::AllGather { src, .. } | Collective::AllToAll { src, .. } => {
                        moves |= hit(&narrowed[*r], src);
                    }
                    Collective::Broadcast { buf, .. } => moves |= hit(&narrowed[*r], buf),
                    Collective::ReduceScatter { .. } | Collective::Reduce { .. } => {}
                }
            }
            if moves {
                for (r, c) in members {
                    match c {
                        Collective::AllGather { dst, .. } | Collective::AllToAll { dst, .. } => {
                            landed.push((*r, dst.clone()))
                        }
                        Collective::Broadcast { buf, .. } => landed.push((*r, buf.clone())),
                        _ => {}
                    }
                }
            }
        }
        for (r, v) in landed {
            narrowed[r].push(v);
        }
    }
    (bad, narrowings)
}

#[test]
fn plans_of_every_example_and_schedule() {
    let mut compiled = 0;
    let mut cases = 0;
    let (mut violations, mut narrowings) = (Vec::new(), 0);
    for example in examples() {
        for (kernel, schedule) in kernels_of(&example).into_iter().flat_map(|(k, bwd)| {
            schedules()
                .into_iter()
                .filter(move |s| schedule_for(s.as_deref(), bwd))
                .map(move |s| (k.clone(), s))
        }) {
            let stem = |p: &str| {
                Path::new(p)
                    .file_stem()
                    .expect("stem")
                    .to_string_lossy()
                    .to_string()
            };
            let ex = example.trim_start_matches("examples/").replace('/', "_");
            let name = format!(
                "{}{}__{}",
                stem(&ex),
                kernel.as_deref().map_or(String::new(), |k| format!(".{k}")),
                schedule.as_deref().map_or("none".to_string(), stem)
            );
            let snapshot = match compile(&example, kernel.as_deref(), schedule.as_deref()) {
                Ok(plan) => {
                    compiled += 1;
                    let (bad, n) = narrowing_violations(&plan);
                    violations.extend(bad.into_iter().map(|b| format!("{name}: {b}")));
                    narrowings += n;
                    plan_json(&plan)
                }
                Err(d) => format!("error\n{}", d.render()),
            };
            cases += 1;
            insta::with_settings!({snapshot_path => "snapshots/plans", prepend_module_to_snapshot => false}, {
                insta::assert_snapshot!(name, snapshot);
            });
        }
    }
    // The examples and schedules exist, and most combinations compile.
    assert!(cases >= 100, "only {cases} combinations");
    assert!(compiled >= 40, "only {compiled} plans compiled");
    // Every bf16 cast of an f32 tile rounds a finished value (the large plans, kept only as a
    // digest, too); the bf16 outputs of the examples make such casts.
    assert!(violations.is_empty(), "{}", violations.join("\n"));
    assert!(narrowings >= 100, "only {narrowings} narrowing copies");
}

/// `narrowing_violations` on hand-built plans: a narrowed accumulator written again, narrowed
/// values combined on the rank, or sent and combined on another, all-reduced or
/// reduce-scattered, are found; narrowed values only moved and delivered are not.
#[test]
fn narrowing_violations_are_found() {
    use mercury_plan::{
        CombineKind, GlobalBuffer, OutputPiece, RankProgram, Region, Role, Slot, SlotInit, Stage,
    };
    let slot = |name: &str, dtype| Slot {
        name: name.into(),
        dtype,
        shape: vec![4],
        init: SlotInit::Zero,
    };
    let v = |slot: usize| View {
        slot,
        region: Region::full(&[4]),
    };
    // Slots of both ranks: 0 `acc` (f32), 1 `narrow` (bf16), 2 `part` (f32), 3 `moved` (bf16).
    let rank = |r: usize, stages: Vec<Stage>| RankProgram {
        rank: r,
        coords: vec![r],
        slots: vec![
            slot("acc", DType::F32),
            slot("narrow", DType::BF16),
            slot("part", DType::F32),
            slot("moved", DType::BF16),
        ],
        stages,
        outputs: vec![OutputPiece {
            buffer: 0,
            region: Region {
                offset: vec![4 * r],
                extent: vec![4],
            },
            src: v(3),
        }],
    };
    let narrow = ComputeOp::Copy {
        src: v(0),
        dst: v(1),
    };
    let add = |acc: usize, part: usize| ComputeOp::Combine {
        kind: CombineKind::Add,
        acc: vec![v(acc)],
        part: vec![v(part)],
    };
    let stage = |compute: Vec<ComputeOp>, comm: Vec<CommOp>| Stage { compute, comm };
    let both = |comm: CommOp| CommOp::Collective {
        group: vec![0, 1],
        collective: match comm {
            CommOp::Collective { collective, .. } => collective,
            _ => unreachable!("a collective"),
        },
    };
    let collective = |c: Collective| {
        both(CommOp::Collective {
            group: vec![],
            collective: c,
        })
    };
    let plan = |r0: Vec<Stage>, r1: Vec<Stage>| Plan {
        name: "k".into(),
        mesh: vec![2],
        buffers: vec![GlobalBuffer {
            name: "C".into(),
            shape: vec![8],
            dtype: DType::BF16,
            role: Role::Output,
        }],
        documents: vec![],
        ranks: vec![rank(0, r0), rank(1, r1)],
    };
    let send = CommOp::Send {
        peer: 1,
        src: v(1),
        tag: 7,
    };
    let recv = CommOp::Recv {
        peer: 0,
        dst: v(3),
        tag: 7,
    };
    let found = |p: &Plan| narrowing_violations(p).0;
    // Moved to rank 1 and delivered there: fine.
    let fine = plan(
        vec![
            stage(vec![narrow.clone()], vec![]),
            stage(vec![], vec![send.clone()]),
        ],
        vec![stage(vec![], vec![]), stage(vec![], vec![recv.clone()])],
    );
    assert_eq!(narrowing_violations(&fine), (vec![], 1));
    // The accumulator is added to after its narrowing.
    let e = found(&plan(
        vec![
            stage(vec![narrow.clone()], vec![]),
            stage(vec![add(0, 2)], vec![]),
        ],
        vec![],
    ));
    assert_eq!(
        e,
        ["rank 0: stage 0 narrows 'acc' [0:4] to bf16, and stage 1 writes it again"]
    );
    // The narrowed values are added into an f32 accumulator.
    let e = found(&plan(
        vec![stage(vec![narrow.clone(), add(2, 1)], vec![])],
        vec![],
    ));
    assert_eq!(
        e,
        ["rank 0: stage 0 sums narrowed values in 'narrow' [0:4]"]
    );
    // ... on another rank, after a copy there.
    let e = found(&plan(
        vec![
            stage(vec![narrow.clone()], vec![]),
            stage(vec![], vec![send]),
        ],
        vec![
            stage(vec![], vec![]),
            stage(vec![], vec![recv]),
            stage(
                vec![
                    ComputeOp::Copy {
                        src: v(3),
                        dst: v(1),
                    },
                    add(2, 1),
                ],
                vec![],
            ),
        ],
    ));
    assert_eq!(
        e,
        ["rank 1: stage 2 sums narrowed values in 'narrow' [0:4]"]
    );
    // All-gathered, then all-reduced over the group.
    let gather = collective(Collective::AllGather {
        src: View {
            slot: 1,
            region: Region {
                offset: vec![0],
                extent: vec![2],
            },
        },
        dst: v(3),
        axis: 0,
    });
    let reduce = collective(Collective::AllReduce {
        bufs: vec![v(3)],
        kind: CombineKind::Add,
    });
    let gathered = |r: usize| {
        let first = if r == 0 { vec![narrow.clone()] } else { vec![] };
        vec![
            stage(first, vec![]),
            stage(vec![], vec![gather.clone()]),
            stage(vec![], vec![reduce.clone()]),
        ]
    };
    let e = found(&plan(gathered(0), gathered(1)));
    assert_eq!(
        e,
        [
            "rank 0: stage 2 all-reduces narrowed values in 'moved' [0:4]",
            "rank 1: stage 2 all-reduces narrowed values in 'moved' [0:4]"
        ]
    );
    // Reduce-scattered where it was narrowed.
    let scatter = collective(Collective::ReduceScatter {
        src: v(1),
        dst: View {
            slot: 3,
            region: Region {
                offset: vec![0],
                extent: vec![2],
            },
        },
        axis: 0,
        kind: CombineKind::Add,
    });
    let e = found(&plan(
        vec![
            stage(vec![narrow], vec![]),
            stage(vec![], vec![scatter.clone()]),
        ],
        vec![stage(vec![], vec![]), stage(vec![], vec![scatter])],
    ));
    assert_eq!(
        e,
        ["rank 0: stage 1 reduce-scatters narrowed values in 'narrow' [0:4]"]
    );
}
