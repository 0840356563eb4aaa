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

fn ms(s: f64) -> String {
    format!("{:.2}", s * 1e3)
}

fn opt_ms(s: Option<f64>) -> String {
    s.map(ms).unwrap_or_else(|| "-".into())
}

/// `ms (x ours / paper)` against Ring.
fn vs_ring(l: Option<f64>, ring: Option<f64>, paper: Option<f64>) -> String {
    let p = paper.map(|p| format!(" / {p:.2}")).unwrap_or_default();
    match (l, ring) {
        (Some(l), Some(r)) => format!("{} ({:.2}{p})", ms(l), r / l),
        (Some(l), None) => format!("{} (-{p})", ms(l)),
        (None, _) if paper.is_some() => format!("- (-{p})"),
        (None, _) => "-".into(),
    }
}

/// Why a known schedule has no latency ("n/a: ..." or "over HBM").
fn why_not(c: &Case, label: &str) -> Option<String> {
    let (_, e) = c.named.iter().find(|(s, _)| s.label == label)?;
    match e {
        Err(msg) => Some(format!("n/a ({})", short(msg))),
        Ok(e) => match &e.status {
            Status::Ranked => None,
            Status::OverMemory(_) => Some("over HBM".into()),
            Status::Invalid(m) => Some(format!("invalid ({})", short(m))),
        },
    }
}

fn short(msg: &str) -> String {
    let m = msg.split(": ").skip(1).collect::<Vec<_>>().join(": ");
    let m = if m.is_empty() { msg.to_string() } else { m };
    let m = m.replace('|', "/");
    if m.chars().count() > 90 {
        format!("{}...", m.chars().take(90).collect::<String>())
    } else {
        m
    }
}

fn cell(c: &Case, label: &str, ring: Option<f64>, paper: Option<f64>) -> String {
    match why_not(c, label) {
        Some(w) => w,
        None => vs_ring(c.latency(label), ring, paper),
    }
}

/// Fig. 9-style table: Ring / 2-level ring / Ulysses / USP / the search's best on a 2-level
/// topology, with our speedups over Ring next to the paper's.
pub fn fig9_table(topo: &Topology, cases: &[Fig9Case], cost: &mut Cost) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| case | Ring ms | 2-level ring ms (x ours) | Ulysses ms (x ours / paper) | USP ms (x ours / paper) | search best | best ms (x ours / paper Mercury) |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for c in cases {
        let case = match attention_case(&c.shape, topo) {
            Ok(x) => x,
            Err(e) => {
                let _ = writeln!(s, "| {} | failed: {} | | | | | |", c.label, short(&e));
                continue;
            }
        };
        cost.add(&format!("{} on {}", c.label, topo.name), &case);
        let ring = case.latency("Ring");
        let best = case.best();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            c.label,
            why_not(&case, "Ring").unwrap_or_else(|| opt_ms(ring)),
            cell(&case, "2-level ring", ring, None),
            cell(&case, "Ulysses", ring, Some(c.paper[0])),
            cell(&case, "USP", ring, Some(c.paper[1])),
            case.best_name(),
            vs_ring(best.and_then(|e| e.latency()), ring, Some(c.paper[2])),
        );
    }
    s
}

/// Fig. 10-style table: one shape over several topologies.
pub fn topology_table(topos: &[Topology], shape: &AttentionShape, cost: &mut Cost) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| topology | Ring ms | 2-level ring ms | Ulysses ms | USP ms | search best | best ms | best vs Ring |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut speedups = Vec::new();
    for t in topos {
        let case = match attention_case(shape, t) {
            Ok(x) => x,
            Err(e) => {
                let _ = writeln!(s, "| {} | failed: {} | | | | | | |", t.name, short(&e));
                continue;
            }
        };
        cost.add(&format!("Fig. 10 on {}", t.name), &case);
        let ring = case.latency("Ring");
        let best = case.best();
        let bl = best.and_then(|b| b.latency());
        let sp = match (ring, bl) {
            (Some(r), Some(b)) => {
                speedups.push(r / b);
                format!("{:.2}x", r / b)
            }
            _ => "-".into(),
        };
        let plain =
            |label: &str| why_not(&case, label).unwrap_or_else(|| opt_ms(case.latency(label)));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            t.name,
            plain("Ring"),
            plain("2-level ring"),
            plain("Ulysses"),
            plain("USP"),
            case.best_name(),
            opt_ms(bl),
            sp
        );
    }
    if !speedups.is_empty() {
        let _ = writeln!(
            s,
            "\nAverage best-vs-Ring speedup: {:.2}x (geometric mean {:.2}x; paper: 2.91x).",
            speedups.iter().sum::<f64>() / speedups.len() as f64,
            (speedups.iter().map(|x| x.ln()).sum::<f64>() / speedups.len() as f64).exp()
        );
    }
    s
}

/// Sequence-length sweep on one topology: best vs Ring, and Ring's footprint.
pub fn length_sweep(
    topo: &Topology,
    base: &AttentionShape,
    lengths: &[usize],
    cost: &mut Cost,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| tokens | Ring | search best | best | best vs Ring | Ring GB/device (fits?) | best GB/device |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for &len in lengths {
        let shape = AttentionShape { seq: len, ..*base };
        let case = match attention_case(&shape, topo) {
            Ok(x) => x,
            Err(e) => {
                let _ = writeln!(s, "| {} | failed: {} | | | | | |", tokens(len), short(&e));
                continue;
            }
        };
        cost.add(&format!("{} tokens on {}", tokens(len), topo.name), &case);
        let ring = case.named("Ring");
        let rl = ring.and_then(|e| e.latency());
        let best = case.best();
        let bl = best.and_then(|e| e.latency());
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            tokens(len),
            fmt_s(rl),
            case.best_name(),
            fmt_s(bl),
            match (rl, bl) {
                (Some(r), Some(b)) => format!("{:.2}x", r / b),
                _ => "-".into(),
            },
            ring.map(|e| format!(
                "{} ({})",
                gb(e.peak_bytes()),
                if e.status == Status::Ranked {
                    "yes"
                } else {
                    "no"
                }
            ))
            .unwrap_or_else(|| "-".into()),
            best.map(|e| gb(e.peak_bytes()))
                .unwrap_or_else(|| "-".into()),
        );
    }
    s
}

fn gb(b: u64) -> String {
    format!("{:.1}", b as f64 / 1e9)
}

fn tokens(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{}M", n >> 20)
    } else if n >= 1024 && n.is_multiple_of(1024) {
        format!("{}K", n >> 10)
    } else {
        n.to_string()
    }
}

/// Memory table: every known schedule and the search's latency/memory frontier, with peak
/// bytes per device against the usable HBM and the predicted latency of those that fit.
pub fn memory_table(topo: &Topology, shape: &AttentionShape, cost: &mut Cost) -> String {
    let mut s = String::new();
    // On one node, the two-level schedules (2-level ring, USP) run on a logical 2 x n/2 mesh.
    let case = attention_operator(shape).and_then(|op| {
        let (nodes, gpus) = nodes_gpus(topo);
        let mut scheds = attention_schedules(nodes, gpus, op.head_axis);
        if nodes == 1 && gpus > 2 && gpus.is_multiple_of(2) {
            let two = attention_schedules(2, gpus / 2, op.head_axis);
            let extra = two.into_iter().filter(|x| x.mesh.len() == 2);
            let at = scheds.iter().position(|x| x.label == "Tree").unwrap_or(0);
            scheds.splice(at..at, extra);
        }
        run_case(op, scheds, topo)
    });
    let case = match case {
        Ok(x) => x,
        Err(e) => return format!("{}: failed: {e}\n", shape.signature()),
    };
    cost.add(&format!("{} on {}", shape.signature(), topo.name), &case);
    let frontier = pareto_frontier(&case.search);
    let _ = writeln!(
        s,
        "{} from {} on {} (usable {:.0} GB per device):\n",
        shape.signature(),
        case.operator.origin,
        topo.name,
        topo.usable_hbm_bytes() as f64 / 1e9
    );
    let _ = writeln!(s, "| schedule | from | peak GB/device | fits | predicted |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    let row = |s: &mut String, name: &str, from: &str, e: &Evaluated| {
        let _ = writeln!(
            s,
            "| {name} | {from} | {} | {} | {} |",
            gb(e.peak_bytes()),
            match e.status {
                Status::Ranked => "yes",
                Status::OverMemory(_) => "no",
                Status::Invalid(_) => "invalid",
            },
            fmt_s(e.latency())
        );
    };
    for (sc, e) in &case.named {
        let mesh = sc
            .mesh
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>()
            .join("x");
        match e {
            Ok(e) => row(&mut s, sc.label, &format!("{} on [{mesh}]", sc.source), e),
            Err(m) => {
                let _ = writeln!(
                    s,
                    "| {} | {} on [{mesh}] | - | refused: {} | - |",
                    sc.label,
                    sc.source,
                    short(m)
                );
            }
        }
    }
    let smallest = (0..case.search.len()).min_by_key(|&i| case.search[i].peak_bytes());
    let mut rows: Vec<usize> = frontier.clone();
    if let Some(i) = smallest.filter(|i| !frontier.contains(i)) {
        rows.push(i);
    }
    rows.sort_by_key(|&i| case.search[i].peak_bytes());
    for i in rows {
        let e = &case.search[i];
        let tag = if frontier.contains(&i) {
            "search, Pareto frontier"
        } else {
            "search, smallest"
        };
        row(&mut s, &e.candidate.name, tag, e);
    }
    // Where the bytes of the smallest plan go.
    if let Some(e) = smallest.map(|i| &case.search[i]) {
        let mem = memory_report(&e.candidate.plan, topo);
        let _ = writeln!(
            s,
            "\nLargest slots of the smallest plan ({}, rank {}): {}.",
            e.candidate.name,
            mem.peak_rank,
            mem.largest_slots
                .iter()
                .take(6)
                .map(|(n, b)| format!("{n} {} GB", gb(*b)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let fits = case
        .search
        .iter()
        .filter(|e| e.status == Status::Ranked)
        .count();
    let _ = writeln!(
        s,
        "\nSearch: {fits} of {} lowered candidates fit ({} refused by the primitives or the lowering); lowering all {} plans took {:.0} ms.",
        case.search.len(),
        case.refused.len(),
        case.plans() - case.refused.len(),
        case.lower_s * 1e3,
    );
    s
}

/// The same schedules as CommIR plans and as FIXTURE plans (the accumulating `+fused`
/// variants, which is what the lowering emits): latency and footprint side by side.
pub fn crosscheck_table(topo: &Topology, cases: &[Fig9Case], cost: &mut Cost) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| case | schedule | CommIR ms | FIXTURE ms | CommIR GB/device | FIXTURE GB/device |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
    let (nodes, gpus) = nodes_gpus(topo);
    for c in cases {
        let Ok(case) = attention_case(&c.shape, topo) else {
            continue;
        };
        cost.add(&format!("cross-check {} on {}", c.label, topo.name), &case);
        let fixtures: Vec<Evaluated> = fixture_schedules(&c.shape, topo.num_devices(), true)
            .into_iter()
            .filter_map(|sc| {
                attention_plan(&c.shape, &sc).ok().map(|plan| Candidate {
                    name: sc.name(),
                    transform_script: String::new(),
                    annotated_ir: String::new(),
                    plan,
                })
            })
            .map(|c| evaluate(c, topo))
            .collect();
        let fx = |n: &str| fixtures.iter().find(|e| e.candidate.name == n);
        for (label, fname) in [
            ("Ring", "ring+fused".to_string()),
            (
                "2-level ring",
                format!("loongtrain[r{nodes}.r{gpus}]+fused"),
            ),
            ("Ulysses", "ulysses+fused".to_string()),
            ("USP", format!("usp[r{nodes}.u{gpus}]+fused")),
            ("CP (all-gather KV)", "cp-allgather+fused".to_string()),
        ] {
            let (ours, f) = (case.named(label), fx(&fname));
            let _ = writeln!(
                s,
                "| {} | {label} / {fname} | {} | {} | {} | {} |",
                c.label,
                opt_ms(ours.and_then(|e| e.latency())),
                opt_ms(f.and_then(|e| e.latency())),
                ours.map(|e| gb(e.peak_bytes())).unwrap_or_default(),
                f.map(|e| gb(e.peak_bytes())).unwrap_or_default(),
            );
        }
        let fbest = fixtures
            .iter()
            .filter(|e| e.status == Status::Ranked)
            .min_by(|a, b| {
                a.latency()
                    .unwrap_or(f64::INFINITY)
                    .total_cmp(&b.latency().unwrap_or(f64::INFINITY))
            });
        let best = case.best();
        let _ = writeln!(
            s,
            "| {} | best: {} / {} | {} | {} | {} | {} |",
            c.label,
            case.best_name(),
            fbest.map(|e| e.candidate.name.as_str()).unwrap_or("-"),
            opt_ms(best.and_then(|e| e.latency())),
            opt_ms(fbest.and_then(|e| e.latency())),
            best.map(|e| gb(e.peak_bytes())).unwrap_or_default(),
            fbest.map(|e| gb(e.peak_bytes())).unwrap_or_default(),
        );
    }
    s
}

/// GEMM with collectives: the cuBLAS + NCCL baseline, the paper's overlapped schedule and the
/// search's best, all CommIR plans.
pub fn gemm_table(
    topos: &[Topology],
    shapes: &[(usize, usize, usize)],
    reduce_scatter: bool,
    cost: &mut Cost,
) -> String {
    let mut s = String::new();
    let scheds = gemm_schedules(reduce_scatter, 8);
    let _ = writeln!(
        s,
        "| topology | m x n x k | {} ms | {} ms (x) | search best | best ms (x) | fastest with another output layout |",
        scheds[0].label, scheds[1].label
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for t in topos {
        for &(m, n, k) in shapes {
            let op = gemm_operator(reduce_scatter, m, n, k);
            let scheds = gemm_schedules(reduce_scatter, t.num_devices());
            let (l0, l1) = (scheds[0].label, scheds[1].label);
            let case = match run_case(op, scheds, t) {
                Ok(c) => c,
                Err(e) => {
                    let _ = writeln!(
                        s,
                        "| {} | {m}x{n}x{k} | failed: {} | | | | |",
                        t.name,
                        short(&e)
                    );
                    continue;
                }
            };
            cost.add(&format!("GEMM {m}x{n}x{k} on {}", t.name), &case);
            let base = case.latency(l0);
            let best = case.best();
            let bl = best.and_then(|e| e.latency());
            // The fastest candidate that leaves C elsewhere, when it beats the best.
            let moved = case
                .search
                .iter()
                .find(|e| e.status == Status::Ranked)
                .filter(|e| case.moved_output.contains_key(&e.candidate.name))
                .filter(|e| e.latency() < bl);
            let _ = writeln!(
                s,
                "| {} | {m}x{n}x{k} | {} | {} | {} | {} | {} |",
                t.name,
                why_not(&case, l0).unwrap_or_else(|| opt_ms(base)),
                cell(&case, l1, base, None),
                case.best_name(),
                vs_ring(bl, base, None),
                moved
                    .map(|e| format!("{}: {}", e.candidate.name, vs_ring(e.latency(), base, None)))
                    .unwrap_or_else(|| "-".into()),
            );
        }
    }
    s
}

/// Graph level: exact (DP) vs greedy vs Megatron-style tensor parallelism on one layer (each
/// operator configuration priced by the CommIR generator's fastest candidate for its layout).
pub fn llama_table(topos: &[Topology], tokens_list: &[usize]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| topology | tokens | exact (DP) | greedy | Megatron TP | exact / Megatron | exact choice |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for t in topos {
        for &tok in tokens_list {
            let g = llama_layer(t, &LlamaDims::LLAMA3_8B, tok);
            let (Ok(ex), Ok(gr)) = (g.select_exact(), g.select_greedy()) else {
                continue;
            };
            let mega = megatron(&g);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} |",
                t.name,
                tokens(tok),
                fmt_s(Some(ex.total())),
                fmt_s(Some(gr.total())),
                fmt_s(mega.as_ref().map(|m| m.total())),
                mega.as_ref()
                    .map(|m| format!("{:.2}", ex.total() / m.total()))
                    .unwrap_or_else(|| "-".into()),
                g.describe(&ex)
                    .iter()
                    .map(|d| d.split(" (").next().unwrap_or("").to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    s
}

/// Megatron TP on the layer: column-parallel qkv and ffn_up, head-parallel attention,
/// row-parallel + all-reduce o_proj and ffn_down, replicated layer input.
fn megatron(g: &OpGraph) -> Option<Selection> {
    let pick = |node: &str, cfg: &str| -> Option<usize> {
        let v = g.graph.node_indices().find(|&v| g.graph[v].name == node)?;
        g.graph[v].configs.iter().position(|c| c.name == cfg)
    };
    let mut configs = vec![0; g.graph.node_count()];
    for (node, cfg) in [
        ("qkv", "column-parallel"),
        ("attention", "head-parallel"),
        ("o_proj", "all-reduce"),
        ("ffn_up", "column-parallel"),
        ("ffn_down", "all-reduce"),
    ] {
        let v = g.graph.node_indices().find(|&v| g.graph[v].name == node)?;
        configs[v.index()] = pick(node, cfg)?;
    }
    g.evaluate(&configs, Some(Sharding::Replicated))
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

#[cfg(test)]
mod tests {
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
}
