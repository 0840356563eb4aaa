//! Human-readable summaries of a plan: the communication plan and per-rank memory.

use mercury_commir::{Kernel, Stmt};
use mercury_plan::{
    collective_send_bytes, Collective, CombineKind, CommOp, ComputeOp, Plan, RankProgram, View,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
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

fn buffer_of<'p>(r: &'p RankProgram, v: &View) -> &'p str {
    r.slots[v.slot].name.split('.').next().unwrap_or("?")
}

fn view_bytes(r: &RankProgram, v: &View) -> usize {
    v.region.numel() * r.slots[v.slot].dtype.size_bytes()
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
    let mut summary: BTreeMap<(&str, &str), (usize, usize, BTreeSet<usize>, Vec<usize>)> =
        BTreeMap::new();
    // The slot each receive lands in: (stage, receiver, sender, tag) -> the first such
    // receive's slot name (looked up once per send, not by a scan of the receiver's stage).
    let mut landing: HashMap<(usize, usize, usize, u64), &str> = HashMap::new();
    for r in &plan.ranks {
        for (si, st) in r.stages.iter().enumerate() {
            for c in &st.comm {
                if let CommOp::Recv { peer, dst, tag } = c {
                    landing
                        .entry((si, r.rank, *peer, *tag))
                        .or_insert(&r.slots[dst.slot].name);
                }
            }
        }
    }
    let mut lines = Vec::new();
    for r in &plan.ranks {
        for (si, st) in r.stages.iter().enumerate() {
            for c in &st.comm {
                match c {
                    CommOp::Send { peer, src, tag } => {
                        // Named after where it lands: the receiver's slot says which buffer
                        // (and whether it is a partial result).
                        let dst_name = landing
                            .get(&(si, *peer, r.rank, *tag))
                            .copied()
                            .unwrap_or(&r.slots[src.slot].name);
                        let b = dst_name.split('.').next().unwrap_or("?");
                        let kind = if dst_name.contains(".partial") {
                            "partial p2p (shift-reduce)"
                        } else if dst_name.contains(".carry") {
                            "carried accumulator p2p (ring-flash-attn)"
                        } else if dst_name.contains(".permuted") {
                            "permute p2p (reshard)"
                        } else if dst_name.contains(".moved") {
                            "p2p (reshard)"
                        } else if dst_name.contains(".delivered") {
                            "p2p (output delivery)"
                        } else {
                            "ring p2p"
                        };
                        let e = summary.entry((b, kind)).or_default();
                        e.0 += 1;
                        e.1 += view_bytes(r, src);
                        e.2.insert(si);
                        let lv = level(plan, r.rank, *peer);
                        if !e.3.contains(&lv) {
                            e.3.push(lv);
                        }
                        if detail {
                            // The region is in the sender's slot (a ring slot holds a tile
                            // received earlier, not the rank's shard): said with the slot's
                            // name, not as coordinates of the buffer.
                            lines.push(format!(
                                "//   stage {si}: rank {} -> rank {peer} @{b} from {}{} {} (level {lv})",
                                r.rank,
                                r.slots[src.slot].name,
                                src.region,
                                bytes(view_bytes(r, src))
                            ));
                        }
                    }
                    CommOp::Recv { .. } => {}
                    CommOp::Collective { group, collective } => {
                        let (b, name) = match collective {
                            Collective::AllGather { src, .. } => (buffer_of(r, src), "all_gather"),
                            Collective::AllReduce { bufs, kind } => (
                                buffer_of(r, &bufs[0]),
                                match kind {
                                    CombineKind::Add => "all_reduce(add)",
                                    CombineKind::LseMerge => "all_reduce(lse_merge)",
                                },
                            ),
                            Collective::ReduceScatter { src, kind, .. } => (
                                buffer_of(r, src),
                                match kind {
                                    CombineKind::Add => "reduce_scatter(add)",
                                    CombineKind::LseMerge => "reduce_scatter(lse_merge)",
                                },
                            ),
                            Collective::Reduce { src, kind, .. } => (
                                buffer_of(r, src),
                                match kind {
                                    CombineKind::Add => "reduce(add)",
                                    CombineKind::LseMerge => "reduce(lse_merge)",
                                },
                            ),
                            Collective::AllToAll { src, .. } => (buffer_of(r, src), "all_to_all"),
                            Collective::Broadcast { buf, .. } => (buffer_of(r, buf), "broadcast"),
                        };
                        let e = summary.entry((b, name)).or_default();
                        e.0 += 1;
                        e.1 += collective_send_bytes(r, group.len(), collective);
                        e.2.insert(si);
                        if detail && group.first() == Some(&r.rank) {
                            let to = match collective {
                                Collective::Reduce { root, .. } => group
                                    .get(*root)
                                    .map(|q| format!(" to rank {q}"))
                                    .unwrap_or_default(),
                                _ => String::new(),
                            };
                            lines.push(format!(
                                "//   stage {si}: {name} @{b} over ranks {group:?}{to}"
                            ));
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

/// The buffers of `k` placed other than in contiguous blocks (zigzag, striped) during the
/// compute, one line each: that placement, and the declared one (or the one at the end) where
/// it differs, so a reader sees where the positions are permuted.
pub fn placements(k: &Kernel) -> String {
    let mut out = String::new();
    for b in &k.buffers {
        let declared = b.placement();
        let mut during = declared.clone();
        let mut end = None;
        let mut begun = true;
        for s in &k.body {
            match s {
                Stmt::Reshard { buffer, to, .. } if buffer == &b.name => {
                    if begun {
                        during = to.clone();
                    } else {
                        end = Some(to.clone());
                    }
                }
                Stmt::Reshard { .. } => {}
                _ => begun = false,
            }
        }
        if during.is_contiguous() {
            continue;
        }
        let mut line = format!("//   @{}: placed {}", b.name, during.to_custom());
        if during != declared {
            let moved = if b.role.is_read() && b.role != mercury_commir::Role::Temp {
                " (moved at the start)"
            } else {
                ""
            };
            let _ = write!(line, ", declared {}{moved}", declared.to_custom());
        }
        if let Some(e) = end.filter(|e| *e != during) {
            let _ = write!(line, ", ends {} (permuted at the end)", e.to_custom());
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

/// Attention work of every rank at every stage: the query-key pairs the patches' masks leave,
/// summed over heads and batch (`[rank][stage]`). A mask with documents counts its band only
/// (the documents are known at run time: [`attention_work_for`]).
pub fn attention_work(plan: &Plan) -> Vec<Vec<f64>> {
    attention_work_for(plan, None)
}

/// [`attention_work`] for one batch of document boundaries (`docs`: the plan's
/// [`mercury_plan::Documents`] inputs in order, `mercury_plan::mask::Boundaries`): the pairs
/// the masks leave for that batch.
pub fn attention_work_for(
    plan: &Plan,
    docs: Option<&[mercury_plan::mask::Boundaries]>,
) -> Vec<Vec<f64>> {
    plan.ranks
        .iter()
        .map(|r| {
            r.stages
                .iter()
                .map(|st| st.compute.iter().map(|op| pairs(op, docs)).sum())
                .collect()
        })
        .collect()
}

/// The query-key pairs an attention patch (forward or backward) computes (0 for other ops):
/// its mask's band, and with `docs` its documents too.
fn pairs(op: &ComputeOp, docs: Option<&[mercury_plan::mask::Boundaries]>) -> f64 {
    let ComputeOp::Patch { patch, inputs, .. } = op else {
        return 0.0;
    };
    let (Some((band, q0, k0)), Some(mask)) = (patch.attention_band(), patch.mask()) else {
        return 0.0;
    };
    let (q, k) = (&inputs[0].region.extent, &inputs[1].region.extent);
    let (sq, sk) = (q[q.len() - 2], k[k.len() - 2]);
    let rows = q[..q.len() - 2].iter().product::<usize>() as f64;
    let (qr, kr) = (q0..q0 + sq, k0..k0 + sk);
    let causal = patch.causal_offsets().is_some();
    let visible = match docs.and_then(|d| mercury_plan::mask::MaskCx::new(causal, mask, d).ok()) {
        Some(m) => m.pairs(qr, kr),
        None => band.pairs(qr, kr, 0),
    };
    rows * visible as f64
}

/// Busiest rank / mean of `work` (`[rank][stage]`): over the whole plan, and in the worst
/// stage.
pub fn balance_of(work: &[Vec<f64>]) -> (f64, f64) {
    let ratio = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let max = v.iter().copied().fold(0.0, f64::max);
        if mean > 0.0 {
            max / mean
        } else {
            1.0
        }
    };
    let totals: Vec<f64> = work.iter().map(|w| w.iter().sum()).collect();
    let stages = work.iter().map(Vec::len).max().unwrap_or(0);
    let worst = (0..stages)
        .map(|s| {
            let col: Vec<f64> = work
                .iter()
                .map(|w| w.get(s).copied().unwrap_or(0.0))
                .collect();
            ratio(&col)
        })
        .fold(1.0, f64::max);
    (ratio(&totals), worst)
}

/// Masked attention work per rank ([`attention_work`]): how the busiest rank compares with
/// the mean over the whole plan and in the worst stage. `None` without causal attention or a
/// mask beyond it; a mask with documents is counted by its band (`documents at run time`).
pub fn causal_balance(plan: &Plan) -> Option<String> {
    let patches = || {
        plan.ranks
            .iter()
            .flat_map(|r| &r.stages)
            .flat_map(|st| &st.compute)
            .filter_map(|op| match op {
                ComputeOp::Patch { patch, .. } => Some(patch),
                _ => None,
            })
    };
    let masked = patches().any(|p| p.mask().is_some_and(|m| !m.is_none()));
    if !masked && !patches().any(|p| p.causal_offsets().is_some()) {
        return None;
    }
    let docs = patches().any(|p| p.mask().is_some_and(|m| m.documents.is_some()));
    let (total, worst) = balance_of(&attention_work(plan));
    let what = match (masked, docs) {
        (false, _) => "causal attention work",
        (true, false) => "masked attention work",
        (true, true) => "masked attention work (band only: the documents are known at run time)",
    };
    Some(format!(
        "//   {what}: busiest rank {total:.2}x the mean, {worst:.2}x in the worst stage\n"
    ))
}

/// Per-rank memory: every slot grouped by buffer (op results, which belong to none, together),
/// with the largest rank's total.
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
            // A patch's or compute op's result (`gemm.out0.1`, `matmul.out.0`) belongs to no
            // buffer: listed as op results, not as a `@gemm` the kernel does not have.
            let mut parts = s.name.split('.');
            let head = parts.next().unwrap_or("?");
            let group = if parts.next().is_some_and(|p| p.starts_with("out")) {
                "op results".to_string()
            } else {
                format!("@{head}")
            };
            let e = by.entry(group).or_default();
            e.0 += s.bytes();
            e.1.push(format!("{} {:?} {}", s.name, s.shape, s.dtype.name()));
        }
        for (b, (total, slots)) in by {
            let _ = writeln!(
                out,
                "//   rank {}: {b}: {} ({})",
                r.rank,
                bytes(total),
                slots.join(", ")
            );
        }
    }
    out
}
