//! Structural checks of a plan: bounds, transfer matching and stage hazards.

use crate::{Collective, CommOp, ComputeOp, Plan, RankProgram, Region, SlotInit, View};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("plan has {got} rank programs but the mesh {mesh:?} has {want} ranks")]
    RankCount {
        got: usize,
        want: usize,
        mesh: Vec<usize>,
    },
    #[error("rank {rank}: {what}")]
    Rank { rank: usize, what: String },
    #[error("stage {stage}: rank {rank}: {what}")]
    Stage {
        stage: usize,
        rank: usize,
        what: String,
    },
}

fn check_view(r: &RankProgram, v: &View) -> Result<(), String> {
    let slot = r
        .slots
        .get(v.slot)
        .ok_or_else(|| format!("view names slot {} of {}", v.slot, r.slots.len()))?;
    if !v.region.fits_in(&slot.shape) {
        return Err(format!(
            "view {} is outside slot '{}' of shape {:?}",
            v.region, slot.name, slot.shape
        ));
    }
    Ok(())
}

/// Views a compute op reads and writes.
pub fn compute_access(op: &ComputeOp) -> (Vec<&View>, Vec<&View>) {
    match op {
        ComputeOp::Patch {
            inputs,
            outputs,
            patch,
        } => {
            let mut reads: Vec<&View> = inputs.iter().collect();
            if patch.accumulates() {
                reads.extend(outputs.iter());
            }
            (reads, outputs.iter().collect())
        }
        ComputeOp::Combine { acc, part, .. } => (
            acc.iter().chain(part.iter()).collect(),
            acc.iter().collect(),
        ),
        ComputeOp::Copy { src, dst } => (vec![src], vec![dst]),
        ComputeOp::Tile { inputs, output, .. } => (inputs.iter().collect(), vec![output]),
    }
}

/// Views a comm op reads and writes on its own rank.
pub fn comm_access(op: &CommOp) -> (Vec<&View>, Vec<&View>) {
    match op {
        CommOp::Send { src, .. } => (vec![src], vec![]),
        CommOp::Recv { dst, .. } => (vec![], vec![dst]),
        CommOp::Collective { collective, .. } => match collective {
            Collective::AllGather { src, dst, .. }
            | Collective::ReduceScatter { src, dst, .. }
            | Collective::AllToAll { src, dst, .. } => (vec![src], vec![dst]),
            Collective::AllReduce { bufs, .. } => (bufs.iter().collect(), bufs.iter().collect()),
            Collective::Broadcast { buf, .. } => (vec![buf], vec![buf]),
        },
    }
}

fn conflict(a: &View, b: &View) -> bool {
    a.slot == b.slot && a.region.overlaps(&b.region)
}

/// Checks the plan; returns the first problem found.
pub fn verify(plan: &Plan) -> Result<(), PlanError> {
    let n = plan.num_ranks();
    if plan.ranks.len() != n {
        return Err(PlanError::RankCount {
            got: plan.ranks.len(),
            want: n,
            mesh: plan.mesh.clone(),
        });
    }
    // Point-to-point messages per stage: (stage, from, to, tag) -> element count.
    let mut sends: BTreeMap<(usize, usize, usize, u64), usize> = BTreeMap::new();
    let mut recvs: BTreeMap<(usize, usize, usize, u64), usize> = BTreeMap::new();
    for (idx, r) in plan.ranks.iter().enumerate() {
        let rank_err = |what: String| PlanError::Rank { rank: r.rank, what };
        if r.rank != idx {
            return Err(rank_err(format!(
                "program at position {idx} says rank {}",
                r.rank
            )));
        }
        for s in &r.slots {
            let (buffer, regions): (usize, Vec<&Region>) = match &s.init {
                SlotInit::FromGlobal { buffer, region } => (*buffer, vec![region]),
                SlotInit::FromGlobalPieces { buffer, pieces } => {
                    (*buffer, pieces.iter().map(|p| &p.region).collect())
                }
                _ => continue,
            };
            let b = plan
                .buffers
                .get(buffer)
                .ok_or_else(|| rank_err(format!("slot '{}' reads buffer #{buffer}", s.name)))?;
            if let Some(region) = regions.iter().find(|g| !g.fits_in(&b.shape)) {
                return Err(rank_err(format!(
                    "slot '{}' reads {} outside '{}' {:?}",
                    s.name, region, b.name, b.shape
                )));
            }
            if let SlotInit::FromGlobalPieces { pieces, .. } = &s.init {
                for (i, p) in pieces.iter().enumerate() {
                    if !p.at.fits_in(&s.shape) || p.at.extent != p.region.extent {
                        return Err(rank_err(format!(
                            "slot '{}' of shape {:?}: piece {} does not land at {}",
                            s.name, s.shape, p.region, p.at
                        )));
                    }
                    if pieces[..i].iter().any(|q| q.at.overlaps(&p.at)) {
                        return Err(rank_err(format!(
                            "slot '{}': two pieces land on {}",
                            s.name, p.at
                        )));
                    }
                }
            }
            let covered: usize = regions.iter().map(|g| g.numel()).sum();
            if covered != s.shape.iter().product::<usize>() {
                return Err(rank_err(format!(
                    "slot '{}' of shape {:?} initialised from {covered} elements",
                    s.name, s.shape
                )));
            }
        }
        for o in &r.outputs {
            check_view(r, &o.src).map_err(rank_err)?;
            let b = plan
                .buffers
                .get(o.buffer)
                .ok_or_else(|| rank_err(format!("output names buffer #{}", o.buffer)))?;
            if !o.region.fits_in(&b.shape) || o.region.numel() != o.src.region.numel() {
                return Err(rank_err(format!(
                    "output piece {} does not fit '{}'",
                    o.region, b.name
                )));
            }
        }
        for (si, st) in r.stages.iter().enumerate() {
            let err = |what: String| PlanError::Stage {
                stage: si,
                rank: r.rank,
                what,
            };
            let mut compute_reads = Vec::new();
            let mut compute_writes = Vec::new();
            for op in &st.compute {
                let (rd, wr) = compute_access(op);
                for v in rd.iter().chain(wr.iter()) {
                    check_view(r, v).map_err(err)?;
                }
                if let ComputeOp::Patch {
                    patch:
                        crate::PatchKind::Gemm {
                            accumulate: true,
                            epilogue: Some(f),
                        },
                    ..
                } = op
                {
                    return Err(err(format!(
                        "a gemm cannot both accumulate and apply the epilogue {f:?}"
                    )));
                }
                if let ComputeOp::Tile {
                    tile: op,
                    inputs,
                    output,
                } = op
                {
                    let shapes: Vec<Vec<usize>> =
                        inputs.iter().map(|v| v.region.extent.clone()).collect();
                    op.check(&shapes, &output.region.extent).map_err(err)?;
                }
                compute_reads.extend(rd);
                compute_writes.extend(wr);
            }
            let mut comm_writes: Vec<&View> = Vec::new();
            for op in &st.comm {
                let (rd, wr) = comm_access(op);
                for v in rd.iter().chain(wr.iter()) {
                    check_view(r, v).map_err(err)?;
                }
                // Hazards: a transfer may not read what compute writes in the same stage, nor
                // write what compute reads or writes.
                for v in &rd {
                    if let Some(w) = compute_writes.iter().find(|w| conflict(v, w)) {
                        return Err(err(format!(
                            "transfer reads slot '{}' {} while compute writes {}",
                            r.slots[v.slot].name, v.region, w.region
                        )));
                    }
                }
                for v in &wr {
                    if let Some(c) = compute_reads
                        .iter()
                        .chain(compute_writes.iter())
                        .find(|c| conflict(v, c))
                    {
                        return Err(err(format!(
                            "transfer writes slot '{}' {} while compute uses {}",
                            r.slots[v.slot].name, v.region, c.region
                        )));
                    }
                    if let Some(c) = comm_writes.iter().find(|c| conflict(v, c)) {
                        return Err(err(format!(
                            "two transfers write slot '{}' {}",
                            r.slots[v.slot].name, c.region
                        )));
                    }
                }
                comm_writes.extend(wr);
                match op {
                    CommOp::Send { peer, src, tag } => {
                        if *peer >= n || *peer == r.rank {
                            return Err(err(format!("send to invalid peer {peer}")));
                        }
                        if sends
                            .insert((si, r.rank, *peer, *tag), src.region.numel())
                            .is_some()
                        {
                            return Err(err(format!("duplicate send to {peer} tag {tag}")));
                        }
                    }
                    CommOp::Recv { peer, dst, tag } => {
                        if *peer >= n || *peer == r.rank {
                            return Err(err(format!("receive from invalid peer {peer}")));
                        }
                        if recvs
                            .insert((si, *peer, r.rank, *tag), dst.region.numel())
                            .is_some()
                        {
                            return Err(err(format!("duplicate receive from {peer} tag {tag}")));
                        }
                    }
                    CommOp::Collective { group, .. } => {
                        if !group.contains(&r.rank) || group.iter().any(|g| *g >= n) {
                            return Err(err(format!(
                                "collective group {group:?} is invalid for this rank"
                            )));
                        }
                    }
                }
            }
        }
    }
    for (key, count) in &sends {
        match recvs.get(key) {
            None => {
                return Err(PlanError::Stage {
                    stage: key.0,
                    rank: key.1,
                    what: format!("send to {} tag {} has no matching receive", key.2, key.3),
                })
            }
            Some(c) if c != count => {
                return Err(PlanError::Stage {
                    stage: key.0,
                    rank: key.1,
                    what: format!("send of {count} elements to {} is received as {c}", key.2),
                })
            }
            _ => {}
        }
    }
    if let Some(key) = recvs.keys().find(|k| !sends.contains_key(k)) {
        return Err(PlanError::Stage {
            stage: key.0,
            rank: key.2,
            what: format!("receive from {} tag {} has no matching send", key.1, key.3),
        });
    }
    Ok(())
}
