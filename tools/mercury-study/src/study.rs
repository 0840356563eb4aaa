//! Predicted-latency tables for `docs/simulation.md` (the `mercury-study` binary).
//!
//! Every attention and GEMM plan here is CommIR-generated: an example operator of `examples/`
//! (its axis extents rewritten to the shape at hand, [`attention_operator`]), scheduled either
//! by a known schedule of `examples/schedules/` (applied with
//! `mercury_passes::schedule_pipeline`, its tile factors rewritten to the mesh,
//! [`attention_schedules`]) or by every candidate of [`CommirSource`] (every factorisation of
//! the device count, one role per level), and lowered by `mercury_conversion::lower_module`.
//! The graph-level table prices its operator configurations with the same generator
//! (`mercury_search::graph`). Only the cross-check against the hand-written plans uses FIXTURE
//! plans ([`crate::fixtures`]); every table heading says where its numbers come from.

use crate::fixtures::{attention_plan, attention_schedules as fixture_schedules};
use mercury_search::commir_source::CommirSource;
use mercury_search::graph::{llama_layer, LlamaDims, OpGraph, Selection, Sharding};
use mercury_search::memory::memory_report;
pub use mercury_search::operator::{
    attention_operator, gemm_operator, with_extent, with_extents, AttentionShape, Operator,
};
use mercury_search::report::fmt_s;
use mercury_search::search::{
    evaluate, pareto_frontier, Candidate, CandidateSource, Evaluated, Status,
};
use mercury_search::Topology;
use std::fmt::Write as _;
use std::time::Instant;

pub mod balance;
pub mod layer;
mod tables;
#[cfg(test)]
mod tests;

pub use tables::{
    crosscheck_table, fig9_table, gemm_table, length_sweep, llama_table, memory_table,
    topology_table,
};

/// The example operators and known schedules the study starts from (the repository's files).
pub mod sources {
    pub use mercury_search::operator::sources::*;
    pub const RING_ATTENTION: &str =
        include_str!("../../../examples/schedules/ring_attention.sched");
    pub const ULYSSES: &str = include_str!("../../../examples/schedules/ulysses.sched");
    pub const USP: &str = include_str!("../../../examples/schedules/usp.sched");
    pub const LOONGTRAIN: &str = include_str!("../../../examples/schedules/loongtrain.sched");
    pub const TREE_ATTENTION: &str =
        include_str!("../../../examples/schedules/tree_attention.sched");
    pub const CONTEXT_PARALLEL: &str =
        include_str!("../../../examples/schedules/context_parallel.sched");
    pub const ASYNCTP_AG_GEMM: &str =
        include_str!("../../../examples/schedules/asynctp_ag_gemm.sched");
    pub const MEGATRON_RS: &str = include_str!("../../../examples/schedules/megatron_rs.sched");
    pub const SHIFT_REDUCE: &str = include_str!("../../../examples/schedules/shift_reduce.sched");
}

/// A known schedule, ready to apply: its script (a `.sched` file with the tile factors
/// rewritten to `mesh`) and the logical mesh the operator is re-shaped to first.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Short name used in the tables: Ring, 2-level ring, Ulysses, USP, Tree, CP, ...
    pub label: &'static str,
    /// Where the script comes from.
    pub source: &'static str,
    pub mesh: Vec<usize>,
    pub script: String,
}

/// Rewrites `factor=A` to `factor=B` for each pair at once (so `4 -> 2, 2 -> 4` works).
pub fn with_factors(script: &str, map: &[(usize, usize)]) -> String {
    let mut s = script.to_string();
    for (i, (a, _)) in map.iter().enumerate() {
        s = s.replace(&format!("factor={a} "), &format!("factor=#{i}# "));
    }
    for (i, (_, b)) in map.iter().enumerate() {
        s = s.replace(&format!("factor=#{i}# "), &format!("factor={b} "));
    }
    s
}

/// The known attention schedules for `nodes x gpus` devices. The `.sched` files are written
/// for 8 devices (`2 x 4` for the two-level ones); their factors are rewritten, and the head
/// axis `h` becomes `head_axis` (GQA tiles the key/value heads `hk`). Two-level schedules are
/// only given when both levels have more than one device.
pub fn attention_schedules(nodes: usize, gpus: usize, head_axis: &str) -> Vec<Schedule> {
    let n = nodes * gpus;
    let heads = |s: &str| s.replace("axis=h ", &format!("axis={head_axis} "));
    let two = nodes > 1 && gpus > 1;
    let mut v = vec![Schedule {
        label: "Ring",
        source: "ring_attention.sched",
        mesh: vec![n],
        script: with_factors(sources::RING_ATTENTION, &[(8, n)]),
    }];
    if two {
        v.push(Schedule {
            label: "2-level ring",
            source: "shift-shard on a 2-level mesh (= loongtrain.sched)",
            mesh: vec![nodes, gpus],
            script: "shift-shard\n".into(),
        });
    }
    v.push(Schedule {
        label: "Ulysses",
        source: "ulysses.sched",
        mesh: vec![n],
        script: heads(&with_factors(sources::ULYSSES, &[(8, n)])),
    });
    if two {
        v.push(Schedule {
            label: "USP",
            source: "usp.sched",
            mesh: vec![nodes, gpus],
            script: heads(&with_factors(sources::USP, &[(4, gpus), (2, nodes)])),
        });
    }
    v.push(Schedule {
        label: "Tree",
        source: "tree_attention.sched",
        mesh: vec![n],
        script: with_factors(sources::TREE_ATTENTION, &[(8, n)]),
    });
    v.push(Schedule {
        label: "CP (all-gather KV)",
        source: "context_parallel.sched",
        mesh: vec![n],
        script: with_factors(sources::CONTEXT_PARALLEL, &[(8, n)]),
    });
    v
}

/// The known GEMM schedules on `n` devices: the cuBLAS + NCCL baselines and the overlapped
/// ones of the paper.
pub fn gemm_schedules(reduce_scatter: bool, n: usize) -> Vec<Schedule> {
    if reduce_scatter {
        vec![
            Schedule {
                label: "GEMM + reduce-scatter",
                source: "megatron_rs.sched",
                mesh: vec![n],
                script: with_factors(sources::MEGATRON_RS, &[(8, n)]),
            },
            Schedule {
                label: "shift-reduce",
                source: "shift_reduce.sched",
                mesh: vec![n],
                script: with_factors(sources::SHIFT_REDUCE, &[(8, n)]),
            },
        ]
    } else {
        // The all-gather baseline is the first two lines of the AsyncTP script: distribute the
        // columns, and the lowering all-gathers A before the GEMM.
        let ag: String = sources::ASYNCTP_AG_GEMM
            .lines()
            .filter(|l| !l.starts_with('#'))
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect();
        vec![
            Schedule {
                label: "all-gather + GEMM",
                source: "asynctp_ag_gemm.sched, first two lines",
                mesh: vec![n],
                script: with_factors(&ag, &[(8, n)]),
            },
            Schedule {
                label: "AsyncTP",
                source: "asynctp_ag_gemm.sched",
                mesh: vec![n],
                script: with_factors(sources::ASYNCTP_AG_GEMM, &[(8, n)]),
            },
        ]
    }
}

/// Evaluates every candidate; ranked ones first, fastest first; among equally fast ones, the
/// one on the fewest mesh levels first (the search enumerates `2x2x2: ring heads heads` as
/// well as `2x4: ring heads`, which lower to the same plan).
pub fn rank(cands: Vec<Candidate>, topo: &Topology) -> Vec<Evaluated> {
    let mut v: Vec<Evaluated> = cands.into_iter().map(|c| evaluate(c, topo)).collect();
    let levels = |e: &Evaluated| e.candidate.name.matches('x').count();
    v.sort_by(|a, b| {
        (a.status != Status::Ranked)
            .cmp(&(b.status != Status::Ranked))
            .then(
                a.latency()
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&b.latency().unwrap_or(f64::INFINITY)),
            )
            .then(levels(a).cmp(&levels(b)))
    });
    v
}

/// One operator on one topology: the known schedules and the search's candidates, judged.
pub struct Case {
    pub operator: Operator,
    /// The known schedules, each evaluated or refused by a primitive / the lowering.
    pub named: Vec<(Schedule, Result<Evaluated, String>)>,
    /// Every candidate of [`CommirSource`], ranked ([`rank`]).
    pub search: Vec<Evaluated>,
    /// Candidates the primitives or the lowering refused.
    pub refused: Vec<String>,
    /// Plans (known or search) whose outputs are not where the operator declares them, with
    /// why ([`CommirSource::check_output_layout`]).
    pub moved_output: std::collections::BTreeMap<String, String>,
    /// Wall time of applying the schedules and lowering every plan, and of judging them.
    pub lower_s: f64,
    pub judge_s: f64,
}

impl Case {
    pub fn named(&self, label: &str) -> Option<&Evaluated> {
        self.named
            .iter()
            .find(|(s, _)| s.label == label)
            .and_then(|(_, e)| e.as_ref().ok())
    }
    pub fn latency(&self, label: &str) -> Option<f64> {
        self.named(label).and_then(|e| e.latency())
    }
    /// The search's winner: its fastest candidate that fits and leaves the output where the
    /// operator declares it (what every known schedule does).
    pub fn best(&self) -> Option<&Evaluated> {
        self.search.iter().find(|e| {
            e.status == Status::Ranked && !self.moved_output.contains_key(&e.candidate.name)
        })
    }
    /// The fastest candidate that fits, whatever layout it leaves the output in.
    pub fn best_any(&self) -> Option<&Evaluated> {
        self.search.first().filter(|e| e.status == Status::Ranked)
    }
    /// The search's best with the known schedule it prices identically to (same predicted
    /// latency and footprint), if any: `mesh 2x4: L0=ring L1=heads (= USP)`.
    pub fn best_name(&self) -> String {
        let Some(b) = self.best() else {
            return "none fits".into();
        };
        let same = self.named.iter().find_map(|(s, e)| {
            let e = e.as_ref().ok()?;
            let (x, y) = (e.latency()?, b.latency()?);
            ((x / y - 1.0).abs() < 1e-9 && e.peak_bytes() == b.peak_bytes()).then_some(s.label)
        });
        match same {
            Some(l) => format!("{} (= {l})", b.candidate.name),
            None => b.candidate.name.clone(),
        }
    }
    pub fn plans(&self) -> usize {
        self.named.len() + self.search.len() + self.refused.len()
    }
}

/// Builds and judges the known schedules and every search candidate of `op` on `topo`.
pub fn run_case(op: Operator, schedules: Vec<Schedule>, topo: &Topology) -> Result<Case, String> {
    let t0 = Instant::now();
    let mut src = CommirSource::from_text(&op.text, &op.origin, None).map_err(|e| e.message)?;
    let mut named_c = Vec::new();
    for s in schedules {
        let c = src.scheduled(s.label, &s.script, Some(&s.mesh));
        named_c.push((s, c.map_err(|e| e.message)));
    }
    let (mut cands, mut refused) = (Vec::new(), Vec::new());
    for c in src.candidates(topo).map_err(|e| e.message)? {
        match c {
            Ok(c) => cands.push(c),
            Err(e) => refused.push(e.message),
        }
    }
    let mut moved_output = std::collections::BTreeMap::new();
    for c in named_c
        .iter()
        .filter_map(|(_, c)| c.as_ref().ok())
        .chain(cands.iter())
    {
        if let Err(e) = src.check_output_layout(&c.plan) {
            moved_output.insert(c.name.clone(), e);
        }
    }
    let lower_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let named = named_c
        .into_iter()
        .map(|(s, c)| (s, c.map(|c| evaluate(c, topo))))
        .collect();
    let search = rank(cands, topo);
    Ok(Case {
        operator: op,
        named,
        search,
        refused,
        moved_output,
        lower_s,
        judge_s: t1.elapsed().as_secs_f64(),
    })
}

/// [`run_case`] for attention with the known attention schedules of the topology's shape.
pub fn attention_case(shape: &AttentionShape, topo: &Topology) -> Result<Case, String> {
    let op = attention_operator(shape)?;
    let (nodes, gpus) = nodes_gpus(topo);
    let scheds = attention_schedules(nodes, gpus, op.head_axis);
    run_case(op, scheds, topo)
}

fn nodes_gpus(topo: &Topology) -> (usize, usize) {
    match topo.mesh().as_slice() {
        [a, b] => (*a, *b),
        [b] => (1, *b),
        _ => (1, topo.num_devices()),
    }
}

/// Accumulated wall time of the study (lowering, judging) and plan counts.
#[derive(Debug, Default, Clone)]
pub struct Cost {
    pub cases: usize,
    pub plans: usize,
    pub lower_s: f64,
    pub judge_s: f64,
    /// The slowest case to lower: (what, seconds, plans).
    pub slowest: Option<(String, f64, usize)>,
}

impl Cost {
    fn add(&mut self, what: &str, c: &Case) {
        self.cases += 1;
        self.plans += c.plans();
        self.lower_s += c.lower_s;
        self.judge_s += c.judge_s;
        if self.slowest.as_ref().is_none_or(|s| s.1 < c.lower_s) {
            self.slowest = Some((what.to_string(), c.lower_s, c.plans()));
        }
    }
}

/// A case of the Fig. 9 comparison with the paper's speedups over Ring (Ulysses, USP, Mercury).
pub struct Fig9Case {
    pub label: &'static str,
    pub shape: AttentionShape,
    pub paper: [f64; 3],
}

pub fn attn(batch: usize, kv_heads: usize, seq: usize) -> AttentionShape {
    AttentionShape {
        batch,
        heads: 32,
        kv_heads,
        seq,
        head_dim: 128,
        causal: false,
    }
}

/// The paper's Fig. 9 cases for `gpu` ("h100" or "a100"). Shapes are our assumption (the
/// notes give no lengths): batch 1 at 32K tokens, batch 16 at 4K tokens per sequence.
pub fn fig9_cases(gpu: &str) -> Vec<Fig9Case> {
    let p: [[f64; 3]; 4] = if gpu == "a100" {
        [
            [1.35, 1.8, 3.95],
            [2.75, 2.75, 3.9],
            [1.45, 1.9, 3.05],
            [1.15, 2.05, 2.65],
        ]
    } else {
        [
            [2.0, 2.35, 3.75],
            [2.5, 2.5, 3.95],
            [1.45, 2.6, 4.1],
            [1.3, 2.85, 3.6],
        ]
    };
    vec![
        Fig9Case {
            label: "MHA BS1 32K",
            shape: attn(1, 32, 32768),
            paper: p[0],
        },
        Fig9Case {
            label: "MHA BS16 4K",
            shape: attn(16, 32, 4096),
            paper: p[1],
        },
        Fig9Case {
            label: "GQA BS1 32K",
            shape: attn(1, 8, 32768),
            paper: p[2],
        },
        Fig9Case {
            label: "GQA BS16 4K",
            shape: attn(16, 8, 4096),
            paper: p[3],
        },
    ]
}

/// The whole table section of `docs/simulation.md`. With `timing`, a last section gives the
/// wall time spent lowering and judging (it varies from run to run).
pub fn full_study(timing: bool) -> String {
    let t0 = Instant::now();
    let t = |n: &str| Topology::preset(n).and_then(|r| r.ok());
    let mut cost = Cost::default();
    let mut s = String::new();
    for (name, gpu) in [("h100-2x4", "h100"), ("a100-2x4", "a100")] {
        if let Some(topo) = t(name) {
            let _ = writeln!(s, "### Fig. 9 analogue on {name} (CommIR plans)\n");
            s.push_str(&fig9_table(&topo, &fig9_cases(gpu), &mut cost));
            s.push('\n');
        }
    }
    if let Some(mut topo) = t("h100-2x4") {
        // Sensitivity: one 100 Gb/s NIC per GPU instead of one per node.
        topo.levels[0].ports = None;
        topo.name = "h100-2x4, one NIC per GPU".into();
        let _ = writeln!(
            s,
            "### Fig. 9 analogue on h100-2x4 with one NIC per GPU (sensitivity, CommIR plans)\n"
        );
        s.push_str(&fig9_table(&topo, &fig9_cases("h100"), &mut cost));
        s.push('\n');
    }
    if let Some(topo) = t("h100-2x4") {
        let _ = writeln!(
            s,
            "### Cross-check: CommIR plans against the FIXTURE plans of the same schedules (h100-2x4)\n"
        );
        s.push_str(&crosscheck_table(&topo, &fig9_cases("h100"), &mut cost));
        s.push('\n');
    }
    let fig10: Vec<Topology> = [
        "h100-1x4", "h100-2x2", "h100-4x1", "h100-1x8", "h100-2x4", "h100-4x2", "h100-4x4",
        "h100-2x8",
    ]
    .iter()
    .filter_map(|n| t(n))
    .collect();
    let _ = writeln!(
        s,
        "### Fig. 10 analogue: MHA BS1, 32K tokens in total (CommIR plans)\n"
    );
    s.push_str(&topology_table(&fig10, &attn(1, 32, 32768), &mut cost));
    s.push('\n');
    if let Some(topo) = t("h100-2x4") {
        let _ = writeln!(
            s,
            "### Fig. 11 analogue: MHA BS1 on h100-2x4 by length (CommIR plans)\n"
        );
        s.push_str(&length_sweep(
            &topo,
            &attn(1, 32, 32768),
            &[32768, 131072, 262144, 1 << 20, 2 << 20],
            &mut cost,
        ));
        s.push('\n');
    }
    if let Some(topo) = t("h200-1x8") {
        let _ = writeln!(
            s,
            "### 2M tokens on h200-1x8: which schedules fit (CommIR plans)\n"
        );
        for shape in [
            attn(1, 32, 2 << 20),
            attn(1, 8, 2 << 20),
            attn(16, 32, 2 << 20),
            attn(16, 8, 2 << 20),
        ] {
            s.push_str(&memory_table(&topo, &shape, &mut cost));
            s.push('\n');
        }
    }
    let gemm_topos: Vec<Topology> = ["h100-2x4", "a100-2x4", "h100-1x8"]
        .iter()
        .filter_map(|n| t(n))
        .collect();
    let shapes = [(8192, 8192, 8192), (65536, 8192, 8192)];
    let _ = writeln!(s, "### All-gather GEMM (CommIR plans)\n");
    s.push_str(&gemm_table(&gemm_topos, &shapes, false, &mut cost));
    s.push('\n');
    let _ = writeln!(s, "### GEMM reduce-scatter (CommIR plans)\n");
    s.push_str(&gemm_table(&gemm_topos, &shapes, true, &mut cost));
    s.push('\n');
    let topos: Vec<Topology> = ["h100-2x4", "h100-1x8"]
        .iter()
        .filter_map(|n| t(n))
        .collect();
    let _ = writeln!(s, "### Graph level: one Llama-3 8B layer (CommIR plans)\n");
    s.push_str(&llama_table(&topos, &[4096, 32768]));
    if timing {
        let _ = writeln!(
            s,
            "\n### Cost of this study (wall time, varies by machine)\n"
        );
        let _ = writeln!(
            s,
            "{} cases, {} plans built (known schedules + search candidates, refused ones included): applying schedules and lowering {:.2} s, memory model and simulation {:.2} s, all tables {:.2} s.",
            cost.cases,
            cost.plans,
            cost.lower_s,
            cost.judge_s,
            t0.elapsed().as_secs_f64()
        );
        if let Some((what, sec, n)) = &cost.slowest {
            let _ = writeln!(
                s,
                "Slowest case to lower: {what}, {n} plans in {:.0} ms.",
                sec * 1e3
            );
        }
    }
    s
}
