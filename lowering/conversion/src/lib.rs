//! Conversion of a scheduled CommIR kernel into a per-rank execution plan.
//!
//! The loop nest is executed symbolically for every rank (parallel loops take the rank's mesh
//! coordinate, sequential loops iterate); each iteration of an innermost sequential loop is one
//! plan stage. Buffers stay where their sharding puts them and move only when a consumer needs
//! them:
//! - a tile inside the rank's shard is read in place;
//! - a shifted read (index `(j + p) mod J`) not held locally is received during the previous
//!   stage from a rank that holds it then, preferring the peer on the fastest link that used it
//!   in that stage (a ring, double-buffered), else its owner;
//! - any other read of remote data gathers the buffer first (AllGather in the prologue);
//! - a `commir.reshard` becomes an AllToAll (levels move to another dimension), an AllGather
//!   (sharded to replicated) or a local slice;
//! - reductions accumulate locally (add, or the softmax log-sum-exp merge); partial results of
//!   one output tile held by several ranks are combined by AllReduce, or ReduceScatter when the
//!   output is sharded over those ranks; a shifted reduction sends each partial tile to the
//!   tile's owner in the next stage (shift-reduce), overlapped with the next computation.
//!
//! A schedule that needs data nothing brings is a lowering error, so a wrong annotation cannot
//! silently produce a plan.

// Bookkeeping maps keyed by (buffer, tile) read clearer spelled out than behind aliases.
#![allow(clippy::type_complexity)]

use mercury_commir::{DimBinding, IndexExpr, Kernel, ReduceKind, Role, Stmt};
use mercury_ir::{Attribute, Diagnostic, Location, Operation, ValueId};
use mercury_plan::*;
use std::collections::{BTreeMap, HashMap};

pub mod report;

/// Upper bound on iterations a rank executes symbolically.
const MAX_EVENTS: usize = 1 << 20;

#[derive(Debug, Clone)]
enum Event {
    Load {
        buffer: String,
        bx: Region,
        value: ValueId,
        shifted: bool,
        loc: Location,
    },
    Patch {
        kernel: String,
        inputs: Vec<ValueId>,
        outputs: Vec<ValueId>,
        attrs: Vec<(String, Attribute)>,
        loc: Location,
    },
    Reduce {
        kind: ReduceKind,
        values: Vec<ValueId>,
        buffer: String,
        bx: Region,
        shifted: bool,
    },
    Store {
        value: ValueId,
        buffer: String,
        bx: Region,
        loc: Location,
    },
}

fn err(loc: &Location, msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(loc.clone(), msg)
}

/// Shape of a buffer under the kernel's axes.
fn shape_of(k: &Kernel, buffer: &str) -> Vec<usize> {
    k.buffer(buffer).map(|b| k.shape(b)).unwrap_or_default()
}

/// The box an access touches for the loop variables in `env`.
fn access_box(
    k: &Kernel,
    buffer: &str,
    indices: &[IndexExpr],
    env: &HashMap<String, i64>,
    loc: &Location,
) -> Result<(Region, bool), Diagnostic> {
    let b = k
        .buffer(buffer)
        .ok_or_else(|| err(loc, format!("unknown buffer '@{buffer}'")))?;
    let mut offset = Vec::new();
    let mut extent = Vec::new();
    let mut slot = 0;
    let mut shifted = false;
    for d in &b.dims {
        match d {
            DimBinding::Fixed(n) => {
                offset.push(0);
                extent.push(*n as usize);
            }
            DimBinding::Axes(axes) => {
                let exts: Vec<usize> = axes.iter().map(|a| k.extent(a)).collect();
                let mut off = 0usize;
                let mut ext = exts.iter().product::<usize>();
                for (pos, _a) in axes.iter().enumerate() {
                    let e = &indices[slot];
                    slot += 1;
                    let looped =
                        e.axes().iter().all(|x| env.contains_key(*x)) && !e.axes().is_empty();
                    if looped {
                        shifted |= e.as_axis().is_none();
                        let v = e.eval(env).ok_or_else(|| {
                            err(loc, format!("cannot evaluate index '{}'", e.to_custom()))
                        })?;
                        let stride: usize = exts[pos + 1..].iter().product();
                        if v < 0 || v as usize >= exts[pos] {
                            return Err(err(
                                loc,
                                format!(
                                    "index '{}' = {v} is out of range 0..{}",
                                    e.to_custom(),
                                    exts[pos]
                                ),
                            ));
                        }
                        off += v as usize * stride;
                        ext = stride;
                    }
                }
                offset.push(off);
                extent.push(ext);
            }
        }
    }
    Ok((Region { offset, extent }, shifted))
}

/// Executes the loop nest symbolically for one rank; events are tagged with their stage
/// (1-based; stage 0 is the prologue).
fn trace(k: &Kernel, coords: &[usize]) -> Result<(Vec<(usize, Event)>, usize), Diagnostic> {
    fn walk(
        k: &Kernel,
        stmts: &[Stmt],
        coords: &[usize],
        env: &mut HashMap<String, i64>,
        stage: &mut usize,
        out: &mut Vec<(usize, Event)>,
    ) -> Result<(), Diagnostic> {
        for s in stmts {
            if out.len() > MAX_EVENTS {
                return Err(err(
                    &k.loc,
                    "the loop nest has too many iterations to lower (tile coarser)",
                ));
            }
            match s {
                Stmt::For(l) => {
                    if let Some(level) = l.parallel {
                        env.insert(l.axis.clone(), coords[level] as i64);
                        walk(k, &l.body, coords, env, stage, out)?;
                        env.remove(&l.axis);
                    } else {
                        let innermost = !l.body.iter().any(contains_sequential);
                        for t in 0..k.extent(&l.axis) {
                            env.insert(l.axis.clone(), t as i64);
                            walk(k, &l.body, coords, env, stage, out)?;
                            if innermost {
                                *stage += 1;
                            }
                        }
                        env.remove(&l.axis);
                    }
                }
                Stmt::Load { result, access } => {
                    let (bx, shifted) =
                        access_box(k, &access.buffer, &access.indices, env, &access.loc)?;
                    out.push((
                        *stage,
                        Event::Load {
                            buffer: access.buffer.clone(),
                            bx,
                            value: *result,
                            shifted,
                            loc: access.loc.clone(),
                        },
                    ));
                }
                Stmt::Patch {
                    kernel,
                    inputs,
                    outputs,
                    attrs,
                    loc,
                } => out.push((
                    *stage,
                    Event::Patch {
                        kernel: kernel.clone(),
                        inputs: inputs.clone(),
                        outputs: outputs.clone(),
                        attrs: attrs.iter().map(|(a, b)| (a.clone(), b.clone())).collect(),
                        loc: loc.clone(),
                    },
                )),
                Stmt::Reduce {
                    kind,
                    values,
                    access,
                } => {
                    let (bx, shifted) =
                        access_box(k, &access.buffer, &access.indices, env, &access.loc)?;
                    out.push((
                        *stage,
                        Event::Reduce {
                            kind: *kind,
                            values: values.clone(),
                            buffer: access.buffer.clone(),
                            bx,
                            shifted,
                        },
                    ));
                }
                Stmt::Store { value, access } => {
                    let (bx, _) = access_box(k, &access.buffer, &access.indices, env, &access.loc)?;
                    out.push((
                        *stage,
                        Event::Store {
                            value: *value,
                            buffer: access.buffer.clone(),
                            bx,
                            loc: access.loc.clone(),
                        },
                    ));
                }
                Stmt::Reshard { .. } => {}
            }
        }
        Ok(())
    }
    fn contains_sequential(s: &Stmt) -> bool {
        match s {
            Stmt::For(l) => l.parallel.is_none() || l.body.iter().any(contains_sequential),
            _ => false,
        }
    }
    let mut out = Vec::new();
    let mut stage = 1;
    let mut env = HashMap::new();
    walk(k, &k.body, coords, &mut env, &mut stage, &mut out)?;
    let last = out.iter().map(|(s, _)| *s).max().unwrap_or(1);
    Ok((out, last))
}

/// The box of a buffer a rank holds under a sharding.
pub fn shard_box(
    shape: &[usize],
    sharding: &[Vec<usize>],
    mesh: &[usize],
    coords: &[usize],
) -> Region {
    let mut offset = Vec::new();
    let mut extent = Vec::new();
    for (d, levels) in sharding.iter().enumerate() {
        let parts: usize = levels.iter().map(|l| mesh[*l]).product();
        let idx = levels.iter().fold(0, |acc, l| acc * mesh[*l] + coords[*l]);
        let chunk = shape[d] / parts.max(1);
        offset.push(idx * chunk);
        extent.push(chunk);
    }
    Region { offset, extent }
}

fn contains(outer: &Region, inner: &Region) -> bool {
    (0..outer.rank()).all(|d| {
        inner.offset[d] >= outer.offset[d]
            && inner.offset[d] + inner.extent[d] <= outer.offset[d] + outer.extent[d]
    })
}

fn relative(outer: &Region, inner: &Region) -> Region {
    Region {
        offset: inner
            .offset
            .iter()
            .zip(&outer.offset)
            .map(|(a, b)| a - b)
            .collect(),
        extent: inner.extent.clone(),
    }
}

fn to_dtype(t: &mercury_ir::Type) -> DType {
    match t {
        mercury_ir::Type::F64 => DType::F64,
        mercury_ir::Type::F16 => DType::F16,
        mercury_ir::Type::BF16 => DType::BF16,
        _ => DType::F32,
    }
}

struct RankBuild {
    coords: Vec<usize>,
    slots: Vec<Slot>,
    stages: BTreeMap<usize, Stage>,
    /// buffer -> (slot, box) of the rank's copy of that buffer under the current placement.
    shard: HashMap<String, (usize, Region)>,
    /// Tiles received for a stage: (stage, buffer) -> [(box, slot)].
    received: HashMap<(usize, String), Vec<(Region, usize)>>,
    /// Ring slots: (buffer, parity, k) -> slot.
    ring: HashMap<(String, usize, usize), usize>,
    /// Temporaries for patch results: (value, parity) -> slot.
    temps: HashMap<(ValueId, usize), usize>,
    /// Accumulators: (buffer, box) -> slots ([o] or [o, lse]).
    acc: BTreeMap<(String, Vec<usize>), (Region, Vec<usize>, ReduceKind)>,
    /// Receive slots of owner-pushed partials: (buffer, box, parity) -> slots.
    push_recv: HashMap<(String, Vec<usize>, usize), Vec<usize>>,
    /// Stored outputs: (buffer, box) -> slot.
    stored: BTreeMap<(String, Vec<usize>), (Region, usize)>,
}

impl RankBuild {
    fn slot(&mut self, name: String, dtype: DType, shape: Vec<usize>, init: SlotInit) -> usize {
        self.slots.push(Slot {
            name,
            dtype,
            shape,
            init,
        });
        self.slots.len() - 1
    }
    fn stage(&mut self, s: usize) -> &mut Stage {
        self.stages.entry(s).or_default()
    }
    fn whole(&self, slot: usize) -> View {
        View {
            slot,
            region: Region::full(&self.slots[slot].shape),
        }
    }
}

fn key(bx: &Region) -> Vec<usize> {
    bx.offset.iter().chain(&bx.extent).copied().collect()
}

/// The common part of two boxes, if any.
fn intersect(a: &Region, b: &Region) -> Option<Region> {
    let mut offset = Vec::new();
    let mut extent = Vec::new();
    for d in 0..a.rank() {
        let lo = a.offset[d].max(b.offset[d]);
        let hi = (a.offset[d] + a.extent[d]).min(b.offset[d] + b.extent[d]);
        if hi <= lo {
            return None;
        }
        offset.push(lo);
        extent.push(hi - lo);
    }
    Some(Region { offset, extent })
}

/// Rank whose coordinates differ from `a`'s: (number of the slowest differing level, reversed so
/// that faster is better; number of differing levels).
fn link_cost(a: &[usize], b: &[usize]) -> (usize, usize) {
    let first = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len());
    (
        a.len() - first,
        a.iter().zip(b).filter(|(x, y)| x != y).count(),
    )
}

/// Lowers one kernel to a plan.
pub fn lower_kernel(k: &Kernel) -> Result<Plan, Diagnostic> {
    let mesh = k.mesh.shape.clone();
    let n = mesh.iter().product::<usize>();
    let buffers: Vec<GlobalBuffer> = k
        .buffers
        .iter()
        .filter(|b| b.role != Role::Temp)
        .map(|b| GlobalBuffer {
            name: b.name.clone(),
            shape: k.shape(b),
            dtype: to_dtype(&b.dtype),
            role: if b.role == Role::In {
                mercury_plan::Role::Input
            } else {
                mercury_plan::Role::Output
            },
        })
        .collect();
    let gidx = |name: &str| buffers.iter().position(|b| b.name == name);
    let mut traces = Vec::new();
    let mut last_stage = 1;
    for r in 0..n {
        let (t, last) = trace(k, &coords_of(&mesh, r))?;
        last_stage = last_stage.max(last);
        traces.push(t);
    }
    // Placement of every buffer after the kernel-start reshards, and the reshards at the end.
    let mut placement: HashMap<String, Vec<Vec<usize>>> = k
        .buffers
        .iter()
        .map(|b| (b.name.clone(), b.sharding.clone()))
        .collect();
    let first_loop = k
        .body
        .iter()
        .position(|s| !matches!(s, Stmt::Reshard { .. }))
        .unwrap_or(k.body.len());
    let mut begin_reshards = Vec::new();
    let mut end_reshards = Vec::new();
    for (i, s) in k.body.iter().enumerate() {
        if let Stmt::Reshard {
            buffer,
            sharding,
            loc,
        } = s
        {
            if i < first_loop {
                begin_reshards.push((buffer.clone(), sharding.clone(), loc.clone()));
            } else {
                end_reshards.push((buffer.clone(), sharding.clone(), loc.clone()));
            }
        }
    }
    let mut ranks: Vec<RankBuild> = (0..n)
        .map(|r| RankBuild {
            coords: coords_of(&mesh, r),
            slots: vec![],
            stages: BTreeMap::new(),
            shard: HashMap::new(),
            received: HashMap::new(),
            ring: HashMap::new(),
            temps: HashMap::new(),
            acc: BTreeMap::new(),
            push_recv: HashMap::new(),
            stored: BTreeMap::new(),
        })
        .collect();
    // Input shards.
    for b in k
        .buffers
        .iter()
        .filter(|b| matches!(b.role, Role::In | Role::InOut))
    {
        let shape = k.shape(b);
        let gi = gidx(&b.name).expect("global buffer");
        for rb in ranks.iter_mut() {
            let bx = shard_box(&shape, &b.sharding, &mesh, &rb.coords);
            let s = rb.slot(
                format!("{}.shard", b.name),
                to_dtype(&b.dtype),
                bx.extent.clone(),
                SlotInit::FromGlobal {
                    buffer: gi,
                    region: bx.clone(),
                },
            );
            rb.shard.insert(b.name.clone(), (s, bx));
        }
    }
    // Prologue stage 0: reshards at the start, then gathers for non-shifted remote reads.
    let mut prologue_stage = 0usize;
    let mut stage_offset = 0usize;
    for (buffer, to, loc) in &begin_reshards {
        let b = k.buffer(buffer).expect("buffer");
        if !matches!(b.role, Role::In | Role::InOut) {
            // An output resharded at the start is written in that placement.
            placement.insert(buffer.clone(), to.clone());
            continue;
        }
        let from = placement[buffer].clone();
        reshard(k, &mut ranks, &mesh, buffer, &from, to, prologue_stage, loc)?;
        placement.insert(buffer.clone(), to.clone());
        let used = reshard_stages(&from, to);
        prologue_stage += used;
        stage_offset += used;
    }
    // Buffers read remotely without a shift are gathered to every rank.
    let mut gather: Vec<String> = Vec::new();
    for (r, t) in traces.iter().enumerate() {
        for (_, e) in t {
            if let Event::Load {
                buffer,
                bx,
                shifted,
                ..
            } = e
            {
                let (_, sb) = &ranks[r].shard[buffer];
                // A shifted read travels from the rank that holds the tile; a tile no single
                // rank holds (or any unshifted remote read) needs the buffer gathered first.
                let servable = *shifted && ranks.iter().any(|q| contains(&q.shard[buffer].1, bx));
                if !contains(sb, bx) && !servable && !gather.contains(buffer) {
                    gather.push(buffer.clone());
                }
            }
        }
    }
    for buffer in &gather {
        let from = placement[buffer].clone();
        let dims_sharded: Vec<usize> = (0..from.len()).filter(|d| !from[*d].is_empty()).collect();
        let mut cur = from.clone();
        for d in dims_sharded {
            let mut to = cur.clone();
            to[d].clear();
            reshard(
                k,
                &mut ranks,
                &mesh,
                buffer,
                &cur,
                &to,
                prologue_stage,
                &k.loc,
            )?;
            cur = to;
            prologue_stage += 1;
            stage_offset += 1;
        }
        placement.insert(buffer.clone(), cur);
    }
    let base = stage_offset;
    // Compute stages: the trace's stage s becomes plan stage base + s (stage base is the last
    // prologue stage, where first-stage prefetches go).
    let total_compute = last_stage;
    // Patch results that a shifted reduction may send to another rank live two stages, so they
    // are double-buffered; the others are consumed in their stage.
    let mut sent_values: std::collections::HashSet<ValueId> = std::collections::HashSet::new();
    for t in &traces {
        for (_, e) in t {
            if let Event::Reduce {
                values,
                shifted: true,
                ..
            } = e
            {
                sent_values.extend(values.iter().copied());
            }
        }
    }
    let mut tag = 0u64;
    for s in 1..=total_compute {
        let ps = base + s;
        for r in 0..n {
            let events: Vec<Event> = traces[r]
                .iter()
                .filter(|(st, _)| *st == s)
                .map(|(_, e)| e.clone())
                .collect();
            let mut values: HashMap<ValueId, View> = HashMap::new();
            let mut q_offsets: HashMap<ValueId, usize> = HashMap::new();
            let mut remote_count: HashMap<String, usize> = HashMap::new();
            for e in &events {
                match e {
                    Event::Load {
                        buffer,
                        bx,
                        value,
                        shifted,
                        loc,
                    } => {
                        let (slot, sb) = ranks[r].shard[buffer].clone();
                        let seq_off = bx.offset.get(2).copied().unwrap_or(0);
                        q_offsets.insert(*value, seq_off);
                        if contains(&sb, bx) {
                            values.insert(
                                *value,
                                View {
                                    slot,
                                    region: relative(&sb, bx),
                                },
                            );
                            continue;
                        }
                        if !*shifted {
                            return Err(err(
                                loc,
                                format!("rank {r} reads '@{buffer}' {bx} which it does not hold"),
                            ));
                        }
                        // Already received for this stage (another load of the same tile)?
                        if let Some((rb, rs)) = ranks[r]
                            .received
                            .get(&(ps, buffer.clone()))
                            .and_then(|v| v.iter().find(|(b, _)| contains(b, bx)).cloned())
                        {
                            values.insert(
                                *value,
                                View {
                                    slot: rs,
                                    region: relative(&rb, bx),
                                },
                            );
                            continue;
                        }
                        // Find a source holding the tile during the previous stage.
                        let prev = ps - 1;
                        let mut best: Option<((usize, usize, usize, usize), usize, View)> = None;
                        for q in (0..n).filter(|q| *q != r) {
                            let (qs, qb) = &ranks[q].shard[buffer];
                            let mut cands = Vec::new();
                            if contains(qb, bx) {
                                cands.push((
                                    1usize,
                                    View {
                                        slot: *qs,
                                        region: relative(qb, bx),
                                    },
                                ));
                            }
                            if let Some(v) = ranks[q].received.get(&(prev, buffer.clone())) {
                                if let Some((rb, rs)) = v.iter().find(|(b, _)| contains(b, bx)) {
                                    cands.push((
                                        0usize,
                                        View {
                                            slot: *rs,
                                            region: relative(rb, bx),
                                        },
                                    ));
                                }
                            }
                            let used_prev = traces[q].iter().any(|(st, ev)| base + *st == prev && matches!(ev, Event::Load { buffer: b2, bx: x2, .. } if b2 == buffer && contains(x2, bx)));
                            for (owner_rank, view) in cands {
                                let (fast, ndiff) = link_cost(&ranks[r].coords, &ranks[q].coords);
                                let pref = (
                                    fast,
                                    ndiff,
                                    usize::from(!used_prev) * 2 + owner_rank,
                                    (q + n - r) % n,
                                );
                                if best.as_ref().is_none_or(|(p, _, _)| pref < *p) {
                                    best = Some((pref, q, view));
                                }
                            }
                        }
                        let Some((_, q, src)) = best else {
                            return Err(err(loc, format!("rank {r} needs '@{buffer}' {bx} at stage {ps}, but no rank holds it in the stage before")));
                        };
                        let parity = ps % 2;
                        let kth = remote_count.entry(buffer.clone()).or_default();
                        let key_ring = (buffer.clone(), parity, *kth);
                        *kth += 1;
                        let dtype = ranks[q].slots[src.slot].dtype;
                        let rs = match ranks[r].ring.get(&key_ring) {
                            Some(s) if ranks[r].slots[*s].shape == bx.extent => *s,
                            _ => {
                                let s = ranks[r].slot(
                                    format!("{buffer}.ring{parity}.{}", key_ring.2),
                                    dtype,
                                    bx.extent.clone(),
                                    SlotInit::Uninit,
                                );
                                ranks[r].ring.insert(key_ring, s);
                                s
                            }
                        };
                        tag += 1;
                        ranks[q]
                            .stage(prev)
                            .comm
                            .push(CommOp::Send { peer: r, src, tag });
                        let dst = ranks[r].whole(rs);
                        ranks[r].stage(prev).comm.push(CommOp::Recv {
                            peer: q,
                            dst: dst.clone(),
                            tag,
                        });
                        ranks[r]
                            .received
                            .entry((ps, buffer.clone()))
                            .or_default()
                            .push((bx.clone(), rs));
                        values.insert(*value, dst);
                    }
                    Event::Patch {
                        kernel,
                        inputs,
                        outputs,
                        attrs,
                        loc,
                    } => {
                        let views: Vec<View> = inputs
                            .iter()
                            .map(|v| {
                                values
                                    .get(v)
                                    .cloned()
                                    .ok_or_else(|| err(loc, "patch input is not available"))
                            })
                            .collect::<Result<_, _>>()?;
                        let shapes: Vec<Vec<usize>> =
                            views.iter().map(|v| v.region.extent.clone()).collect();
                        let parity = ps % 2;
                        let (patch, out_shapes) = match kernel.as_str() {
                            "gemm" => {
                                let kd = *shapes[0].last().unwrap_or(&1);
                                let m = shapes[0].iter().product::<usize>() / kd.max(1);
                                let nn = shapes[1].iter().product::<usize>() / kd.max(1);
                                (PatchKind::Gemm { accumulate: false }, vec![vec![m, nn]])
                            }
                            "attention" => {
                                let q = &shapes[0];
                                if !(q.len() == 4 && shapes[1].len() == 4
                                    || q.len() == 3 && shapes[1].len() == 3)
                                {
                                    return Err(err(loc, "attention tiles must be [batch, heads, sequence, head_dim] or [heads, sequence, head_dim]"));
                                }
                                let d = *q.last().unwrap_or(&1);
                                let causal = attrs
                                    .iter()
                                    .any(|(a, v)| a == "causal" && v.as_bool() == Some(true));
                                let scale = attrs
                                    .iter()
                                    .find(|(a, _)| a == "scale")
                                    .and_then(|(_, v)| v.as_float())
                                    .unwrap_or(1.0 / (d as f64).sqrt());
                                let q_offset = q_offsets.get(&inputs[0]).copied().unwrap_or(0);
                                let k_offset = q_offsets.get(&inputs[1]).copied().unwrap_or(0);
                                (
                                    PatchKind::Attention {
                                        causal,
                                        scale,
                                        q_offset,
                                        k_offset,
                                        accumulate: false,
                                    },
                                    vec![q.clone(), q[..q.len() - 1].to_vec()],
                                )
                            }
                            other => {
                                return Err(err(
                                    loc,
                                    format!("no patch implementation for '{other}'"),
                                ))
                            }
                        };
                        // Causal blocks entirely above the diagonal are skipped.
                        if let PatchKind::Attention {
                            causal: true,
                            q_offset,
                            k_offset,
                            ..
                        } = patch
                        {
                            if k_offset >= q_offset + shapes[0][2] {
                                for o in outputs {
                                    values.remove(o);
                                }
                                continue;
                            }
                        }
                        let mut outs = Vec::new();
                        for (o, sh) in outputs.iter().zip(out_shapes) {
                            let parity = if sent_values.contains(o) { parity } else { 0 };
                            let s = match ranks[r].temps.get(&(*o, parity)) {
                                Some(s) => *s,
                                None => {
                                    let s = ranks[r].slot(
                                        format!("{kernel}.out{}.{parity}", outs.len()),
                                        DType::F32,
                                        sh,
                                        SlotInit::Uninit,
                                    );
                                    ranks[r].temps.insert((*o, parity), s);
                                    s
                                }
                            };
                            let v = ranks[r].whole(s);
                            values.insert(*o, v.clone());
                            outs.push(v);
                        }
                        ranks[r].stage(ps).compute.push(ComputeOp::Patch {
                            patch,
                            inputs: views,
                            outputs: outs,
                        });
                    }
                    Event::Reduce {
                        kind,
                        values: vals,
                        buffer,
                        bx,
                        shifted,
                    } => {
                        let Some(parts) = vals
                            .iter()
                            .map(|v| values.get(v).cloned())
                            .collect::<Option<Vec<View>>>()
                        else {
                            // A skipped (fully masked) causal block contributes nothing.
                            continue;
                        };
                        let owner = owner_of(k, &placement, buffer, bx, &mesh, &ranks[r].coords);
                        let target = if *shifted { owner } else { r };
                        if target == r {
                            let acc = ensure_acc(&mut ranks[r], buffer, bx, *kind);
                            let ck = if *kind == ReduceKind::Add {
                                CombineKind::Add
                            } else {
                                CombineKind::LseMerge
                            };
                            // The patch that produced the parts merges straight into the
                            // accumulator when nothing else reads its results.
                            let single_use = vals.iter().all(|v| {
                                events
                                    .iter()
                                    .filter(|e| match e {
                                        Event::Reduce { values, .. } => values.contains(v),
                                        Event::Store { value, .. } => value == v,
                                        Event::Patch { inputs, .. } => inputs.contains(v),
                                        _ => false,
                                    })
                                    .count()
                                    == 1
                            });
                            let fused = single_use
                                && match ranks[r].stage(ps).compute.last_mut() {
                                    Some(ComputeOp::Patch { patch, outputs, .. })
                                        if *outputs == parts =>
                                    {
                                        let ok = match patch {
                                            PatchKind::Gemm { accumulate }
                                                if ck == CombineKind::Add =>
                                            {
                                                *accumulate = true;
                                                true
                                            }
                                            PatchKind::Attention { accumulate, .. }
                                                if ck == CombineKind::LseMerge =>
                                            {
                                                *accumulate = true;
                                                true
                                            }
                                            _ => false,
                                        };
                                        if ok {
                                            *outputs = acc.clone();
                                        }
                                        ok
                                    }
                                    _ => false,
                                };
                            if !fused {
                                ranks[r].stage(ps).compute.push(ComputeOp::Combine {
                                    kind: ck,
                                    acc,
                                    part: parts,
                                });
                            }
                        } else {
                            // Shift-reduce: send the partial tile to its owner in the next stage,
                            // the owner merges it the stage after.
                            let send_stage = ps + 1;
                            let parity = send_stage % 2;
                            let rkey = (buffer.clone(), key(bx), parity);
                            let recv_slots = match ranks[target].push_recv.get(&rkey) {
                                Some(s) => s.clone(),
                                None => {
                                    let s: Vec<usize> = parts
                                        .iter()
                                        .enumerate()
                                        .map(|(i, p)| {
                                            ranks[target].slot(
                                                format!("{buffer}.partial{parity}.{i}"),
                                                DType::F32,
                                                p.region.extent.clone(),
                                                SlotInit::Uninit,
                                            )
                                        })
                                        .collect();
                                    ranks[target].push_recv.insert(rkey, s.clone());
                                    s
                                }
                            };
                            let mut recv_views = Vec::new();
                            for (p, rs) in parts.iter().zip(&recv_slots) {
                                tag += 1;
                                ranks[r].stage(send_stage).comm.push(CommOp::Send {
                                    peer: target,
                                    src: p.clone(),
                                    tag,
                                });
                                let dst = ranks[target].whole(*rs);
                                ranks[target].stage(send_stage).comm.push(CommOp::Recv {
                                    peer: r,
                                    dst: dst.clone(),
                                    tag,
                                });
                                recv_views.push(dst);
                            }
                            let acc = ensure_acc(&mut ranks[target], buffer, bx, *kind);
                            let ck = if *kind == ReduceKind::Add {
                                CombineKind::Add
                            } else {
                                CombineKind::LseMerge
                            };
                            ranks[target]
                                .stage(send_stage + 1)
                                .compute
                                .push(ComputeOp::Combine {
                                    kind: ck,
                                    acc,
                                    part: recv_views,
                                });
                        }
                    }
                    Event::Store {
                        value,
                        buffer,
                        bx,
                        loc,
                    } => {
                        let src = values
                            .get(value)
                            .cloned()
                            .ok_or_else(|| err(loc, "stored value is not available"))?;
                        let s = match ranks[r].stored.get(&(buffer.clone(), key(bx))) {
                            Some((_, s)) => *s,
                            None => {
                                let s = ranks[r].slot(
                                    format!("{buffer}.out"),
                                    DType::F32,
                                    bx.extent.clone(),
                                    SlotInit::Uninit,
                                );
                                ranks[r]
                                    .stored
                                    .insert((buffer.clone(), key(bx)), (bx.clone(), s));
                                s
                            }
                        };
                        let dst = ranks[r].whole(s);
                        ranks[r]
                            .stage(ps)
                            .compute
                            .push(ComputeOp::Copy { src, dst });
                    }
                }
            }
        }
    }
    // Epilogue: combine partial results of the same tile held by several ranks.
    let mut epi = ranks
        .iter()
        .flat_map(|r| r.stages.keys().copied())
        .max()
        .unwrap_or(0)
        + 1;
    // Reduction levels per output buffer: parallel loops around its reductions whose axis the
    // output does not use. Ranks that differ only there hold different partial results; ranks
    // that differ elsewhere hold copies of the same result.
    let mut red_levels: HashMap<String, Vec<usize>> = HashMap::new();
    k.walk(&mut |s, stack| {
        if let Stmt::Reduce { access, .. } = s {
            let b = k.buffer(&access.buffer).expect("buffer");
            let e = red_levels.entry(access.buffer.clone()).or_default();
            for l in stack
                .iter()
                .filter(|l| l.parallel.is_some() && !b.uses_axis(&l.axis))
            {
                let lv = l.parallel.expect("parallel");
                if !e.contains(&lv) {
                    e.push(lv);
                }
            }
        }
    });
    let mut holders: BTreeMap<(String, Vec<usize>), Vec<usize>> = BTreeMap::new();
    for (r, rb) in ranks.iter().enumerate() {
        for key in rb.acc.keys() {
            holders.entry(key.clone()).or_default().push(r);
        }
    }
    let mut any_collective = false;
    for ((buffer, kk), all) in &holders {
        let levels = red_levels.get(buffer).cloned().unwrap_or_default();
        if levels.is_empty() {
            continue;
        }
        for &r in all {
            let me = coords_of(&mesh, r);
            let group: Vec<usize> = group_of(&mesh, &me, &levels)
                .into_iter()
                .filter(|q| all.contains(q))
                .collect();
            if group.len() < 2 {
                continue;
            }
            any_collective = true;
            let (_, slots, kind) = ranks[r].acc[&(buffer.clone(), kk.clone())].clone();
            let bufs: Vec<View> = slots.iter().map(|s| ranks[r].whole(*s)).collect();
            let ck = if kind == ReduceKind::Add {
                CombineKind::Add
            } else {
                CombineKind::LseMerge
            };
            ranks[r].stage(epi).comm.push(CommOp::Collective {
                group,
                collective: Collective::AllReduce { bufs, kind: ck },
            });
        }
    }
    if any_collective {
        epi += 1;
    }
    // ReduceScatter instead of AllReduce where the output is sharded over the group: rewrite.
    reduce_scatter_where_sharded(k, &mut ranks, &placement, &mesh);
    // Reshards at the end move finished outputs: every rank must hold exactly its shard of the
    // current placement.
    for (buffer, to, loc) in &end_reshards {
        let from = placement[buffer].clone();
        let shape = shape_of(k, buffer);
        // A collective move needs every rank to hold its shard of the current placement; when
        // the schedule left the output elsewhere, the final delivery moves it point to point.
        let holds_shard = ranks.iter().all(|rb| {
            let mine = shard_box(&shape, &from, &mesh, &rb.coords);
            rb.acc
                .iter()
                .filter(|((b, _), _)| b == buffer)
                .map(|(_, (bx, _, _))| bx)
                .chain(
                    rb.stored
                        .iter()
                        .filter(|((b, _), _)| b == buffer)
                        .map(|(_, (bx, _))| bx),
                )
                .any(|bx| contains(bx, &mine))
        });
        if !holds_shard {
            placement.insert(buffer.clone(), to.clone());
            continue;
        }
        let mut sliced = false;
        for rb in ranks.iter_mut() {
            let mine = shard_box(&shape, &from, &mesh, &rb.coords);
            let held = rb
                .acc
                .iter()
                .filter(|((b, _), _)| b == buffer)
                .map(|(kk, (bx, slots, _))| (kk.clone(), bx.clone(), slots[0], true))
                .chain(
                    rb.stored
                        .iter()
                        .filter(|((b, _), _)| b == buffer)
                        .map(|(kk, (bx, s))| (kk.clone(), bx.clone(), *s, false)),
                )
                .find(|(_, bx, _, _)| contains(bx, &mine));
            let Some((kk, bx, slot, is_acc)) = held else {
                return Err(err(loc, format!("reshard of '@{buffer}' at the end: rank {:?} does not hold its shard {mine} of the current placement", rb.coords)));
            };
            if is_acc {
                rb.acc.remove(&kk);
            } else {
                rb.stored.remove(&kk);
            }
            if bx == mine {
                rb.shard.insert(buffer.clone(), (slot, bx));
            } else {
                sliced = true;
                // The rank holds more than its shard (e.g. after an all-reduce): slice it.
                let dst = rb.slot(
                    format!("{buffer}.slice"),
                    rb.slots[slot].dtype,
                    mine.extent.clone(),
                    SlotInit::Uninit,
                );
                let (src_view, dst_view) = (
                    View {
                        slot,
                        region: relative(&bx, &mine),
                    },
                    rb.whole(dst),
                );
                rb.stage(epi).compute.push(ComputeOp::Copy {
                    src: src_view,
                    dst: dst_view,
                });
                rb.shard.insert(buffer.clone(), (dst, mine));
            }
        }
        // The slices (if any) run in stage `epi`; the move starts after them.
        if sliced {
            epi += 1;
        }
        reshard(k, &mut ranks, &mesh, buffer, &from, to, epi, loc)?;
        for rb in ranks.iter_mut() {
            let (slot, bx) = rb.shard[buffer].clone();
            rb.stored.insert((buffer.clone(), key(&bx)), (bx, slot));
        }
        placement.insert(buffer.clone(), to.clone());
        epi += reshard_stages(&from, to);
    }
    // Outputs end in their declared placement: every rank holds its shard of each output (all
    // of it when replicated). Its own finished tiles serve in place (as views); the rest is
    // received from ranks holding it, in one final stage.
    let mut plan_ranks = Vec::new();
    let mut pieces: Vec<(usize, OutputPiece)> = Vec::new();
    let deliver = ranks
        .iter()
        .flat_map(|r| r.stages.keys().copied())
        .max()
        .unwrap_or(0)
        + 1;
    for b in k
        .buffers
        .iter()
        .filter(|b| matches!(b.role, Role::Out | Role::InOut))
    {
        let gi = gidx(&b.name).expect("buffer");
        let shape = k.shape(b);
        // Finished tiles per rank, as disjoint sets (a tile inside a larger one on the same
        // rank holds the same values and is dropped).
        let tiles: Vec<Vec<(Region, usize)>> = ranks
            .iter()
            .map(|rb| {
                let mut t: Vec<(Region, usize)> = rb
                    .acc
                    .iter()
                    .filter(|((bn, _), _)| *bn == b.name)
                    .map(|(_, (bx, slots, _))| (bx.clone(), slots[0]))
                    .chain(
                        rb.stored
                            .iter()
                            .filter(|((bn, _), _)| *bn == b.name)
                            .map(|(_, (bx, s))| (bx.clone(), *s)),
                    )
                    .collect();
                t.sort_by_key(|(bx, _)| std::cmp::Reverse(bx.numel()));
                let mut kept: Vec<(Region, usize)> = Vec::new();
                for (bx, s) in t {
                    if !kept.iter().any(|(c, _)| contains(c, &bx)) {
                        kept.push((bx, s));
                    }
                }
                kept
            })
            .collect();
        for r in 0..n {
            let want = shard_box(&shape, &placement[&b.name], &mesh, &ranks[r].coords);
            let mut got: Vec<Region> = Vec::new();
            let add = |got: &mut Vec<Region>, part: &Region| -> Result<bool, Diagnostic> {
                if got.iter().any(|g| contains(g, part)) {
                    return Ok(false);
                }
                if got.iter().any(|g| g.overlaps(part)) {
                    return Err(err(&b.loc, format!("'@{}' is held in overlapping, different tiles around {part}; the schedule writes it ambiguously", b.name)));
                }
                got.push(part.clone());
                Ok(true)
            };
            // Own tiles first.
            for (bx, slot) in &tiles[r] {
                if let Some(part) = intersect(bx, &want) {
                    if add(&mut got, &part)? {
                        pieces.push((
                            r,
                            OutputPiece {
                                buffer: gi,
                                region: part.clone(),
                                src: View {
                                    slot: *slot,
                                    region: relative(bx, &part),
                                },
                            },
                        ));
                    }
                }
            }
            if got.iter().map(Region::numel).sum::<usize>() == want.numel() {
                continue;
            }
            // Then from the other ranks, fastest link first.
            let mut others: Vec<usize> = (0..n).filter(|q| *q != r).collect();
            others.sort_by_key(|q| link_cost(&ranks[r].coords, &ranks[*q].coords));
            let mut dst_slot = None;
            for q in others {
                for (bx, slot) in tiles[q].clone() {
                    let Some(part) = intersect(&bx, &want) else {
                        continue;
                    };
                    if !add(&mut got, &part)? {
                        continue;
                    }
                    let dst = *dst_slot.get_or_insert_with(|| {
                        ranks[r].slot(
                            format!("{}.delivered", b.name),
                            DType::F32,
                            want.extent.clone(),
                            SlotInit::Uninit,
                        )
                    });
                    tag += 1;
                    let src = View {
                        slot,
                        region: relative(&bx, &part),
                    };
                    let dst_view = View {
                        slot: dst,
                        region: relative(&want, &part),
                    };
                    ranks[q]
                        .stage(deliver)
                        .comm
                        .push(CommOp::Send { peer: r, src, tag });
                    ranks[r].stage(deliver).comm.push(CommOp::Recv {
                        peer: q,
                        dst: dst_view.clone(),
                        tag,
                    });
                    pieces.push((
                        r,
                        OutputPiece {
                            buffer: gi,
                            region: part,
                            src: dst_view,
                        },
                    ));
                }
            }
            let have: usize = got.iter().map(Region::numel).sum();
            if have != want.numel() {
                return Err(err(&b.loc, format!("the schedule produces {have} of the {} elements of rank {:?}'s part {want} of '@{}'", want.numel(), ranks[r].coords, b.name)));
            }
        }
    }
    for (r, rb) in ranks.iter_mut().enumerate() {
        let mine: Vec<&mut OutputPiece> = pieces
            .iter_mut()
            .filter(|(pr, _)| *pr == r)
            .map(|(_, p)| p)
            .collect();
        prune_slots(rb, mine);
    }
    let num_stages = ranks
        .iter()
        .flat_map(|r| r.stages.keys().copied())
        .max()
        .map_or(0, |m| m + 1);
    for (r, rb) in ranks.into_iter().enumerate() {
        let mut stages = vec![Stage::default(); num_stages];
        for (s, st) in rb.stages {
            stages[s] = st;
        }
        plan_ranks.push(RankProgram {
            rank: r,
            coords: rb.coords,
            slots: rb.slots,
            stages,
            outputs: pieces
                .iter()
                .filter(|(pr, _)| *pr == r)
                .map(|(_, p)| p.clone())
                .collect(),
        });
    }
    let plan = Plan {
        name: k.name.clone(),
        mesh,
        buffers,
        ranks: plan_ranks,
    };
    verify(&plan).map_err(|e| {
        err(
            &k.loc,
            format!("internal error: the lowered plan is invalid: {e}"),
        )
    })?;
    Ok(plan)
}

/// Removes slots no op or output piece references (e.g. patch temporaries that a fused
/// accumulation made unnecessary) and renumbers the views.
fn prune_slots(rb: &mut RankBuild, outputs: Vec<&mut OutputPiece>) {
    let mut used = vec![false; rb.slots.len()];
    let mut mark = |v: &View| used[v.slot] = true;
    for st in rb.stages.values() {
        for op in &st.compute {
            let (r, w) = verify::compute_access(op);
            r.into_iter().chain(w).for_each(&mut mark);
        }
        for op in &st.comm {
            let (r, w) = verify::comm_access(op);
            r.into_iter().chain(w).for_each(&mut mark);
        }
    }
    for o in outputs.iter() {
        mark(&o.src);
    }
    if used.iter().all(|u| *u) {
        return;
    }
    let mut remap = vec![usize::MAX; rb.slots.len()];
    let mut kept = Vec::new();
    for (i, s) in rb.slots.drain(..).enumerate() {
        if used[i] {
            remap[i] = kept.len();
            kept.push(s);
        }
    }
    rb.slots = kept;
    let fix = |v: &mut View| v.slot = remap[v.slot];
    for st in rb.stages.values_mut() {
        for op in &mut st.compute {
            match op {
                ComputeOp::Patch {
                    inputs, outputs, ..
                } => inputs.iter_mut().chain(outputs.iter_mut()).for_each(fix),
                ComputeOp::Combine { acc, part, .. } => {
                    acc.iter_mut().chain(part.iter_mut()).for_each(fix)
                }
                ComputeOp::Copy { src, dst } => {
                    fix(src);
                    fix(dst);
                }
            }
        }
        for op in &mut st.comm {
            match op {
                CommOp::Send { src, .. } => fix(src),
                CommOp::Recv { dst, .. } => fix(dst),
                CommOp::Collective { collective, .. } => match collective {
                    Collective::AllGather { src, dst, .. }
                    | Collective::ReduceScatter { src, dst, .. }
                    | Collective::AllToAll { src, dst, .. } => {
                        fix(src);
                        fix(dst);
                    }
                    Collective::AllReduce { bufs, .. } => bufs.iter_mut().for_each(fix),
                    Collective::Broadcast { buf, .. } => fix(buf),
                },
            }
        }
    }
    for o in outputs {
        fix(&mut o.src);
    }
}

fn ensure_acc(rb: &mut RankBuild, buffer: &str, bx: &Region, kind: ReduceKind) -> Vec<View> {
    let k = (buffer.to_string(), key(bx));
    if !rb.acc.contains_key(&k) {
        let o = rb.slot(
            format!("{buffer}.acc"),
            DType::F32,
            bx.extent.clone(),
            SlotInit::Zero,
        );
        let mut slots = vec![o];
        if kind == ReduceKind::LseMerge {
            let lse_shape = bx.extent[..bx.extent.len().saturating_sub(1)].to_vec();
            slots.push(rb.slot(
                format!("{buffer}.lse"),
                DType::F32,
                lse_shape,
                SlotInit::NegInf,
            ));
        }
        rb.acc.insert(k.clone(), (bx.clone(), slots, kind));
    }
    rb.acc[&k].1.iter().map(|s| rb.whole(*s)).collect()
}

/// The rank that owns tile `bx` of `buffer` under its placement, among ranks that share `me`'s
/// coordinates on the levels the buffer is not sharded over.
fn owner_of(
    k: &Kernel,
    placement: &HashMap<String, Vec<Vec<usize>>>,
    buffer: &str,
    bx: &Region,
    mesh: &[usize],
    me: &[usize],
) -> usize {
    let shape = shape_of(k, buffer);
    let sh = &placement[buffer];
    let mut coords = me.to_vec();
    for (d, levels) in sh.iter().enumerate() {
        if levels.is_empty() {
            continue;
        }
        let parts: usize = levels.iter().map(|l| mesh[*l]).product();
        let chunk = shape[d] / parts;
        let mut idx = bx.offset[d] / chunk;
        for l in levels.iter().rev() {
            coords[*l] = idx % mesh[*l];
            idx /= mesh[*l];
        }
    }
    rank_of(mesh, &coords)
}

/// Replaces AllReduce(add) of a tile by ReduceScatter when the output buffer is sharded (along
/// one dimension) over exactly the ranks of the group: each rank then keeps only its shard.
fn reduce_scatter_where_sharded(
    k: &Kernel,
    ranks: &mut [RankBuild],
    placement: &HashMap<String, Vec<Vec<usize>>>,
    mesh: &[usize],
) {
    for r in 0..ranks.len() {
        let accs: Vec<((String, Vec<usize>), (Region, Vec<usize>, ReduceKind))> = ranks[r]
            .acc
            .iter()
            .map(|(a, b)| (a.clone(), b.clone()))
            .collect();
        for ((buffer, kk), (bx, slots, kind)) in accs {
            if kind != ReduceKind::Add {
                continue;
            }
            let sh = &placement[&buffer];
            let shape = shape_of(k, &buffer);
            let mine = shard_box(&shape, sh, mesh, &ranks[r].coords);
            // Sharded along exactly one dimension, and the tile spans several shards there.
            let dims: Vec<usize> = (0..sh.len())
                .filter(|d| !sh[*d].is_empty() && bx.extent[*d] > mine.extent[*d])
                .collect();
            if dims.len() != 1 {
                continue;
            }
            let d = dims[0];
            let acc_view = View {
                slot: slots[0],
                region: Region::full(&bx.extent),
            };
            let mut found = None;
            for (si, st) in ranks[r].stages.iter() {
                for (ci, c) in st.comm.iter().enumerate() {
                    if let CommOp::Collective {
                        group,
                        collective: Collective::AllReduce { bufs, .. },
                    } = c
                    {
                        if bufs.len() == 1 && bufs[0] == acc_view {
                            found = Some((*si, ci, group.clone()));
                        }
                    }
                }
            }
            let Some((si, ci, group)) = found else {
                continue;
            };
            // Group order must be the shard order along d, and the group must be exactly the
            // holders of the shards of this tile.
            let parts = bx.extent[d] / mine.extent[d];
            if group.len() != parts {
                continue;
            }
            let mut ordered = group.clone();
            ordered.sort_by_key(|q| shard_box(&shape, sh, mesh, &ranks[*q].coords).offset[d]);
            // Every member must find its own shard in this tile, the shards side by side along
            // d covering it: a property of (group, tile), so all members decide alike.
            let shards: Vec<Region> = ordered
                .iter()
                .map(|q| shard_box(&shape, sh, mesh, &ranks[*q].coords))
                .collect();
            let tiles_it = shards.iter().all(|m| contains(&bx, m))
                && shards
                    .windows(2)
                    .all(|w| w[0].offset[d] + w[0].extent[d] == w[1].offset[d])
                && shards.iter().map(|m| m.extent[d]).sum::<usize>() == bx.extent[d];
            if !tiles_it {
                continue;
            }
            let mut dst_shape = bx.extent.clone();
            dst_shape[d] = mine.extent[d];
            let dst = ranks[r].slot(
                format!("{buffer}.rs"),
                DType::F32,
                dst_shape,
                SlotInit::Uninit,
            );
            let dst_view = ranks[r].whole(dst);
            ranks[r].stages.get_mut(&si).expect("stage").comm[ci] = CommOp::Collective {
                group: ordered,
                collective: Collective::ReduceScatter {
                    src: acc_view,
                    dst: dst_view,
                    axis: d,
                    kind: CombineKind::Add,
                },
            };
            // The rank's output tile is now its shard in the scatter destination.
            ranks[r].acc.remove(&(buffer.clone(), kk));
            let mine_tile = Region {
                offset: bx
                    .offset
                    .iter()
                    .enumerate()
                    .map(|(i, o)| if i == d { mine.offset[d] } else { *o })
                    .collect(),
                extent: ranks[r].slots[dst].shape.clone(),
            };
            ranks[r]
                .stored
                .insert((buffer.clone(), key(&mine_tile)), (mine_tile, dst));
        }
    }
}

/// Moves a buffer from one placement to another in stage `stage`.
#[allow(clippy::too_many_arguments)]
fn reshard(
    k: &Kernel,
    ranks: &mut [RankBuild],
    mesh: &[usize],
    buffer: &str,
    from: &[Vec<usize>],
    to: &[Vec<usize>],
    stage: usize,
    loc: &Location,
) -> Result<(), Diagnostic> {
    let b = k.buffer(buffer).expect("buffer");
    let shape = k.shape(b);
    let changed: Vec<usize> = (0..from.len()).filter(|d| from[*d] != to[*d]).collect();
    let is_prefix = |a: &[usize], b: &[usize]| b.len() > a.len() && b.starts_with(a);
    match changed.as_slice() {
        [] => Ok(()),
        [d] if is_prefix(&to[*d], &from[*d]) => {
            // Coarser along d: AllGather over the dropped (trailing) levels.
            let levels = from[*d][to[*d].len()..].to_vec();
            let axis = *d;
            move_by_collective(
                ranks,
                buffer,
                &shape,
                to,
                mesh,
                stage,
                &levels,
                "gathered",
                &|src, dst| Collective::AllGather { src, dst, axis },
            );
            Ok(())
        }
        [d] if is_prefix(&from[*d], &to[*d]) => {
            // Finer along d: a local slice.
            slice_to(ranks, buffer, &shape, to, mesh, stage);
            Ok(())
        }
        [d1, d2] => {
            // Trailing levels move from one dimension to the end of another: AllToAll.
            let moved_from = |s: usize, t: usize| -> Option<Vec<usize>> {
                let moved = from[s].strip_prefix(to[s].as_slice())?.to_vec();
                (!moved.is_empty() && to[t].strip_prefix(from[t].as_slice())? == moved.as_slice())
                    .then_some(moved)
            };
            let (src_dim, dst_dim, levels) = match (moved_from(*d1, *d2), moved_from(*d2, *d1)) {
                (Some(m), _) => (*d1, *d2, m),
                (_, Some(m)) => (*d2, *d1, m),
                _ => return general_reshard(k, ranks, mesh, buffer, from, to, stage, loc),
            };
            move_by_collective(
                ranks,
                buffer,
                &shape,
                to,
                mesh,
                stage,
                &levels,
                "a2a",
                &|src, dst| Collective::AllToAll {
                    src,
                    dst,
                    split_axis: dst_dim,
                    concat_axis: src_dim,
                },
            );
            Ok(())
        }
        _ => general_reshard(k, ranks, mesh, buffer, from, to, stage, loc),
    }
}

/// Any other change of placement: gather every sharded dimension, then slice the target
/// shard locally (one AllGather per dimension, in consecutive stages starting at `stage`).
#[allow(clippy::too_many_arguments)]
fn general_reshard(
    k: &Kernel,
    ranks: &mut [RankBuild],
    mesh: &[usize],
    buffer: &str,
    from: &[Vec<usize>],
    to: &[Vec<usize>],
    stage: usize,
    loc: &Location,
) -> Result<(), Diagnostic> {
    let mut cur = from.to_vec();
    let mut st = stage;
    for d in 0..cur.len() {
        if !cur[d].is_empty() {
            let mut next = cur.clone();
            next[d].clear();
            reshard(k, ranks, mesh, buffer, &cur, &next, st, loc)?;
            cur = next;
            st += 1;
        }
    }
    // The slice is local: it runs in the stage after the last gather.
    slice_to(ranks, buffer, &shape_of(k, buffer), to, mesh, st);
    Ok(())
}

/// The ranks that share `coords` except on `levels`, ordered by their index over `levels`
/// (the order of the shards a collective over those levels combines or splits).
pub fn group_of(mesh: &[usize], coords: &[usize], levels: &[usize]) -> Vec<usize> {
    let n: usize = mesh.iter().product();
    let mut g: Vec<usize> = (0..n)
        .filter(|q| {
            let c = coords_of(mesh, *q);
            (0..mesh.len()).all(|l| levels.contains(&l) || c[l] == coords[l])
        })
        .collect();
    g.sort_by_key(|q| {
        let c = coords_of(mesh, *q);
        levels.iter().fold(0, |acc, l| acc * mesh[*l] + c[*l])
    });
    g
}

/// Every rank gets its shard under `to` through one collective over the ranks that differ only
/// on `levels` (ordered by their index over those levels), in stage `stage`.
#[allow(clippy::too_many_arguments)]
fn move_by_collective(
    ranks: &mut [RankBuild],
    buffer: &str,
    shape: &[usize],
    to: &[Vec<usize>],
    mesh: &[usize],
    stage: usize,
    levels: &[usize],
    suffix: &str,
    make: &dyn Fn(View, View) -> Collective,
) {
    for rb in ranks.iter_mut() {
        let (src, _) = rb.shard[buffer].clone();
        let newbox = shard_box(shape, to, mesh, &rb.coords);
        let dst = rb.slot(
            format!("{buffer}.{suffix}"),
            rb.slots[src].dtype,
            newbox.extent.clone(),
            SlotInit::Uninit,
        );
        let group = group_of(mesh, &rb.coords, levels);
        let (src_view, dst_view) = (rb.whole(src), rb.whole(dst));
        rb.stage(stage).comm.push(CommOp::Collective {
            group,
            collective: make(src_view, dst_view),
        });
        rb.shard.insert(buffer.to_string(), (dst, newbox));
    }
}

/// Every rank copies its shard under `to` out of the copy it holds (which must contain it),
/// in stage `stage`.
fn slice_to(
    ranks: &mut [RankBuild],
    buffer: &str,
    shape: &[usize],
    to: &[Vec<usize>],
    mesh: &[usize],
    stage: usize,
) {
    for rb in ranks.iter_mut() {
        let (src, sbox) = rb.shard[buffer].clone();
        let newbox = shard_box(shape, to, mesh, &rb.coords);
        let dst = rb.slot(
            format!("{buffer}.slice"),
            rb.slots[src].dtype,
            newbox.extent.clone(),
            SlotInit::Uninit,
        );
        let src_view = View {
            slot: src,
            region: relative(&sbox, &newbox),
        };
        let dst_view = rb.whole(dst);
        rb.stage(stage).compute.push(ComputeOp::Copy {
            src: src_view,
            dst: dst_view,
        });
        rb.shard.insert(buffer.to_string(), (dst, newbox));
    }
}

/// Stages a reshard from `from` to `to` occupies (so callers can reserve them).
fn reshard_stages(from: &[Vec<usize>], to: &[Vec<usize>]) -> usize {
    let changed: Vec<usize> = (0..from.len()).filter(|d| from[*d] != to[*d]).collect();
    let simple = match changed.as_slice() {
        [] => return 0,
        [d] => {
            (to[*d].len() < from[*d].len() && from[*d].starts_with(&to[*d]))
                || (from[*d].len() < to[*d].len() && to[*d].starts_with(&from[*d]))
        }
        [d1, d2] => {
            let mv = |s: usize, t: usize| {
                from[s].strip_prefix(to[s].as_slice()).is_some_and(|m| {
                    !m.is_empty() && to[t].strip_prefix(from[t].as_slice()) == Some(m)
                })
            };
            mv(*d1, *d2) || mv(*d2, *d1)
        }
        _ => false,
    };
    if simple {
        1
    } else {
        from.iter().filter(|l| !l.is_empty()).count() + 1
    }
}

/// Lowers the kernel named `name` (or the only kernel) of a module.
pub fn lower_module(module: &Operation, name: Option<&str>) -> Result<Plan, Diagnostic> {
    let kernels = mercury_commir::kernels(module)?;
    let k = match name {
        Some(n) => kernels
            .iter()
            .find(|k| k.name == n.trim_start_matches('@'))
            .ok_or_else(|| err(&module.loc, format!("no kernel '@{n}'")))?,
        None => match kernels.as_slice() {
            [k] => k,
            [] => return Err(err(&module.loc, "the module has no commir.kernel")),
            _ => return Err(err(&module.loc, "the module has several kernels; name one")),
        },
    };
    lower_kernel(k)
}
