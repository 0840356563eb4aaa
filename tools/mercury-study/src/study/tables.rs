//! The tables of the study, one function each (every heading says where its numbers come from).

use super::*;

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
pub(super) fn why_not(c: &Case, label: &str) -> Option<String> {
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
