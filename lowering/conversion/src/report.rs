//! Human-readable summaries of a plan: the communication plan and per-rank memory.

use mercury_plan::{
    collective_send_bytes, Collective, CombineKind, CommOp, Plan, RankProgram, View,
};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Formats a byte count with a binary unit.
pub fn bytes(n: usize) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[i])
    }
}

fn buffer_of(r: &RankProgram, v: &View) -> String {
    r.slots[v.slot]
        .name
        .split('.')
        .next()
        .unwrap_or("?")
        .to_string()
}

fn view_bytes(r: &RankProgram, v: &View) -> usize {
    v.region.numel() * r.slots[v.slot].dtype.size_bytes()
}

fn kind_name(k: CombineKind) -> &'static str {
    match k {
        CombineKind::Add => "add",
        CombineKind::LseMerge => "lse_merge",
    }
}

/// The mesh level over which two ranks communicate (the slowest level where they differ).
fn level(plan: &Plan, a: usize, b: usize) -> usize {
    let (ca, cb) = (&plan.ranks[a].coords, &plan.ranks[b].coords);
    ca.iter().zip(cb).position(|(x, y)| x != y).unwrap_or(0)
}

/// The communication plan: per buffer a summary, then every transfer of rank 0... as lines.
pub fn comm_plan(plan: &Plan, detail: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "// comm-plan @{}: mesh {:?}, {} ranks, {} stages",
        plan.name,
        plan.mesh,
        plan.num_ranks(),
        plan.num_stages()
    );
    // buffer -> kind -> (ops, bytes, stages, levels)
    let mut summary: BTreeMap<(String, String), (usize, usize, Vec<usize>, Vec<usize>)> =
        BTreeMap::new();
    let mut lines = Vec::new();
    for r in &plan.ranks {
        for (si, st) in r.stages.iter().enumerate() {
            for c in &st.comm {
                match c {
                    CommOp::Send { peer, src, tag } => {
                        // Named after where it lands: the receiver's slot says which buffer
                        // (and whether it is a partial result).
                        let dst_name = plan.ranks[*peer]
                            .stages
                            .get(si)
                            .and_then(|st| {
                                st.comm.iter().find_map(|c| match c {
                                    CommOp::Recv {
                                        peer: from,
                                        dst,
                                        tag: t,
                                    } if *from == r.rank && t == tag => {
                                        Some(plan.ranks[*peer].slots[dst.slot].name.clone())
                                    }
                                    _ => None,
                                })
                            })
                            .unwrap_or_else(|| r.slots[src.slot].name.clone());
                        let b = dst_name.split('.').next().unwrap_or("?").to_string();
                        let kind = if dst_name.contains(".partial") {
                            "partial p2p (shift-reduce)"
                        } else {
                            "ring p2p"
                        };
                        let e = summary.entry((b.clone(), kind.to_string())).or_default();
                        e.0 += 1;
                        e.1 += view_bytes(r, src);
                        if !e.2.contains(&si) {
                            e.2.push(si);
                        }
                        let lv = level(plan, r.rank, *peer);
                        if !e.3.contains(&lv) {
                            e.3.push(lv);
                        }
                        if detail {
                            lines.push(format!(
                                "//   stage {si}: rank {} -> rank {peer} @{b}{} {} (level {lv})",
                                r.rank,
                                src.region,
                                bytes(view_bytes(r, src))
                            ));
                        }
                    }
                    CommOp::Recv { .. } => {}
                    CommOp::Collective { group, collective } => {
                        let (b, name) = match collective {
                            Collective::AllGather { src, .. } => {
                                (buffer_of(r, src), "all_gather".to_string())
                            }
                            Collective::AllReduce { bufs, kind } => (
                                buffer_of(r, &bufs[0]),
                                format!("all_reduce({})", kind_name(*kind)),
                            ),
                            Collective::ReduceScatter { src, kind, .. } => (
                                buffer_of(r, src),
                                format!("reduce_scatter({})", kind_name(*kind)),
                            ),
                            Collective::AllToAll { src, .. } => {
                                (buffer_of(r, src), "all_to_all".to_string())
                            }
                            Collective::Broadcast { buf, .. } => {
                                (buffer_of(r, buf), "broadcast".to_string())
                            }
                        };
                        let e = summary.entry((b.clone(), name.clone())).or_default();
                        e.0 += 1;
                        e.1 += collective_send_bytes(r, group.len(), collective);
                        if !e.2.contains(&si) {
                            e.2.push(si);
                        }
                        if detail && group.first() == Some(&r.rank) {
                            lines
                                .push(format!("//   stage {si}: {name} @{b} over ranks {group:?}"));
                        }
                    }
                }
            }
        }
    }
    if summary.is_empty() {
        let _ = writeln!(out, "//   no communication");
    }
    for ((b, kind), (ops, total, stages, levels)) in &summary {
        let lv = if levels.is_empty() {
            String::new()
        } else {
            format!(", levels {levels:?}")
        };
        let _ = writeln!(
            out,
            "//   @{b}: {kind}, {ops} ops in {} stages, {} sent in total{lv}",
            stages.len(),
            bytes(*total)
        );
    }
    for l in lines {
        let _ = writeln!(out, "{l}");
    }
    out
}

/// Per-rank memory: every slot grouped by buffer, with the largest rank's total.
pub fn memory(plan: &Plan) -> String {
    let mut out = String::new();
    let max = plan
        .ranks
        .iter()
        .map(RankProgram::memory_bytes)
        .max()
        .unwrap_or(0);
    let _ = writeln!(
        out,
        "// memory @{}: {} per rank at most ({} ranks)",
        plan.name,
        bytes(max),
        plan.num_ranks()
    );
    if let Some(r) = plan.ranks.iter().max_by_key(|r| r.memory_bytes()) {
        let mut by: BTreeMap<String, (usize, Vec<String>)> = BTreeMap::new();
        for s in &r.slots {
            let e = by
                .entry(s.name.split('.').next().unwrap_or("?").to_string())
                .or_default();
            e.0 += s.bytes();
            e.1.push(format!("{} {:?} {}", s.name, s.shape, s.dtype.name()));
        }
        for (b, (total, slots)) in by {
            let _ = writeln!(
                out,
                "//   rank {}: @{b}: {} ({})",
                r.rank,
                bytes(total),
                slots.join(", ")
            );
        }
    }
    out
}
