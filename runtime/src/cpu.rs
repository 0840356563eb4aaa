//! The CPU reference executor: runs a plan for every rank with f64 arithmetic, moving exactly
//! the data the plan's transfers and collectives move. Uninitialised slots are poisoned with
//! NaN, so a tile that no transfer delivered shows up in the result.
//!
//! [`Storage`] says what a slot holds: f64 whatever its dtype ([`execute`], the exact data
//! flow), or each value rounded to the slot's dtype where it is stored ([`execute_with`]
//! `Storage::Dtype`, the numbers a device holds), which shows where a plan rounds.

use mercury_kernels::cpu as k;
use mercury_plan::*;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExecError {
    #[error("invalid plan: {0}")]
    Plan(#[from] PlanError),
    #[error("input '{0}' is missing or has the wrong size")]
    Input(String),
    #[error("document boundaries '{0}': {1}")]
    Documents(String, String),
    #[error("stage {stage}: {what}")]
    Stage { stage: usize, what: String },
}

/// Row-major strides of a shape.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f(flat index in a tensor of `shape`, position in the region)` for every element of
/// `region`, in row-major order of the region.
fn for_region(shape: &[usize], region: &Region, mut f: impl FnMut(usize, usize)) {
    let st = strides(shape);
    let n = region.numel();
    let rank = region.rank();
    let mut idx = vec![0usize; rank];
    for pos in 0..n {
        let flat: usize = (0..rank).map(|d| (region.offset[d] + idx[d]) * st[d]).sum();
        f(flat, pos);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < region.extent[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

fn gather(data: &[f64], shape: &[usize], region: &Region) -> Vec<f64> {
    let mut out = vec![0.0; region.numel()];
    for_region(shape, region, |flat, pos| out[pos] = data[flat]);
    out
}

fn scatter(data: &mut [f64], shape: &[usize], region: &Region, vals: &[f64]) {
    for_region(shape, region, |flat, pos| data[flat] = vals[pos]);
}

/// What the executor's slots hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Storage {
    /// Every slot holds f64, whatever its dtype: the exact data flow of the plan, the
    /// higher-precision reference a device's result (or a `Dtype` run) is compared with.
    #[default]
    F64,
    /// Every value is rounded to nearest (ties to even) in its slot's dtype wherever it is
    /// stored: a slot's initial load, every compute write (a patch, a combine, a copy, a tile
    /// op), every received message and every collective's landing; an output piece is rounded
    /// to its buffer's dtype as the device's final copy converts it. Arithmetic inside one op
    /// stays f64 (a device sums in f32 or better), so the run holds the numbers a device
    /// stores, and rounding a tile before a later op sums it shows in the result.
    Dtype,
}

/// Rounds every value to `dtype` under [`Storage::Dtype`].
fn store(storage: Storage, dtype: DType, vals: &mut [f64]) {
    if storage == Storage::Dtype && dtype != DType::F64 {
        vals.iter_mut().for_each(|x| *x = round_to(dtype, *x));
    }
}

/// Memory of every rank: one vector per slot.
struct Mem {
    slots: Vec<Vec<Vec<f64>>>,
    storage: Storage,
}

impl Mem {
    fn read(&self, plan: &Plan, r: usize, v: &View) -> Vec<f64> {
        gather(
            &self.slots[r][v.slot],
            &plan.ranks[r].slots[v.slot].shape,
            &v.region,
        )
    }
    /// Stores `vals` into `v`, rounded to the slot's dtype under [`Storage::Dtype`].
    fn write(&mut self, plan: &Plan, r: usize, v: &View, vals: &[f64]) {
        let slot = &plan.ranks[r].slots[v.slot];
        if self.storage == Storage::Dtype && slot.dtype != DType::F64 {
            let mut rounded = vals.to_vec();
            store(self.storage, slot.dtype, &mut rounded);
            scatter(&mut self.slots[r][v.slot], &slot.shape, &v.region, &rounded);
        } else {
            scatter(&mut self.slots[r][v.slot], &slot.shape, &v.region, vals);
        }
    }
}

/// Splits `vals` of `shape` into `n` equal chunks along `axis` (the plan's collective
/// geometry, `Region::chunk`).
fn split(vals: &[f64], shape: &[usize], axis: usize, n: usize) -> Result<Vec<Vec<f64>>, String> {
    let whole = Region::full(shape);
    (0..n)
        .map(|p| Ok(gather(vals, shape, &whole.chunk(axis, n, p)?)))
        .collect()
}

/// Concatenates chunks of `chunk_shape` along `axis`.
fn concat(chunks: &[Vec<f64>], chunk_shape: &[usize], axis: usize) -> Vec<f64> {
    let mut shape = chunk_shape.to_vec();
    shape[axis] *= chunks.len();
    let mut out = vec![0.0; shape.iter().product()];
    let whole = Region::full(&shape);
    for (p, c) in chunks.iter().enumerate() {
        if let Ok(piece) = whole.chunk(axis, chunks.len(), p) {
            scatter(&mut out, &shape, &piece, c);
        }
    }
    out
}

fn combine(kind: CombineKind, acc: &mut [Vec<f64>], part: &[Vec<f64>]) {
    match kind {
        CombineKind::Add => k::add(&mut acc[0], &part[0]),
        CombineKind::LseMerge => {
            let d = acc[0].len() / acc[1].len().max(1);
            let (o, rest) = acc.split_at_mut(1);
            k::lse_merge(&mut o[0], &mut rest[0], &part[0], &part[1], d);
        }
    }
}

/// The kernel dimensions of attention views `q` and `k` made 4-D
/// (`mercury_plan::patch::attention_shapes`).
fn attn_dims(qs: [usize; 4], ks: [usize; 4]) -> k::AttnDims {
    k::AttnDims {
        b: qs[0],
        hq: qs[1],
        hk: ks[1],
        sq: qs[2],
        sk: ks[2],
        d: qs[3],
    }
}

/// The tile-relative keys query row `r` of a patch sees under `m`: its first query at position
/// `q_offset`, its first key at `k_offset`.
fn tile_keys(
    m: &mask::MaskCx,
    q_offset: usize,
    k_offset: usize,
    r: usize,
) -> std::ops::Range<usize> {
    let ks = m.keys(q_offset + r);
    ks.start.max(k_offset) - k_offset..ks.end.max(k_offset) - k_offset
}

fn run_compute(
    plan: &Plan,
    mem: &mut Mem,
    r: usize,
    op: &ComputeOp,
    docs: &[mask::Boundaries],
) -> Result<(), String> {
    match op {
        ComputeOp::Patch {
            patch,
            inputs,
            outputs,
        } => match patch {
            PatchKind::Gemm {
                accumulate,
                epilogue,
            } => {
                let (m, n, kd) = mercury_plan::patch::gemm_dims(
                    &inputs[0].region.extent,
                    &inputs[1].region.extent,
                    &outputs[0].region.extent,
                )?;
                let a = mem.read(plan, r, &inputs[0]);
                let b = mem.read(plan, r, &inputs[1]);
                let mut c = if *accumulate {
                    mem.read(plan, r, &outputs[0])
                } else {
                    vec![0.0; m * n]
                };
                k::gemm(m, n, kd, &a, &b, &mut c, *accumulate);
                if let Some(f) = epilogue {
                    c.iter_mut().for_each(|x| *x = f.apply(*x));
                }
                mem.write(plan, r, &outputs[0], &c);
            }
            PatchKind::Attention {
                causal,
                scale,
                q_offset,
                k_offset,
                mask,
                accumulate,
            } => {
                let m = mask::MaskCx::new(*causal, mask, docs)?;
                // q [b, hq, sq, d], k [b, hk, sk, d], v [b, hk, sk, dv], o [b, hq, sq, dv],
                // lse [b, hq, sq] (3-D tiles have a batch of one).
                let [qs, ks, vs, _] = mercury_plan::patch::attention_views(inputs, outputs)?;
                let dims = attn_dims(qs, ks);
                let (q, kk, v) = (
                    mem.read(plan, r, &inputs[0]),
                    mem.read(plan, r, &inputs[1]),
                    mem.read(plan, r, &inputs[2]),
                );
                let dv = vs[3];
                let mut o = vec![0.0; q.len() / dims.d.max(1) * dv];
                let mut lse = vec![0.0; q.len() / dims.d.max(1)];
                k::attention_rows(&q, &kk, &v, &mut o, &mut lse, dims, dv, *scale, &|row| {
                    tile_keys(&m, *q_offset, *k_offset, row)
                });
                if *accumulate {
                    let mut acc = vec![
                        mem.read(plan, r, &outputs[0]),
                        mem.read(plan, r, &outputs[1]),
                    ];
                    combine(CombineKind::LseMerge, &mut acc, &[o, lse]);
                    mem.write(plan, r, &outputs[0], &acc[0]);
                    mem.write(plan, r, &outputs[1], &acc[1]);
                } else {
                    mem.write(plan, r, &outputs[0], &o);
                    mem.write(plan, r, &outputs[1], &lse);
                }
            }
            PatchKind::AttentionBwd {
                causal,
                scale,
                q_offset,
                k_offset,
                mask,
                accumulate,
            } => {
                let m = mask::MaskCx::new(*causal, mask, docs)?;
                let [qs, ks, vs, _] = mercury_plan::patch::attention_bwd_views(inputs, outputs)?;
                let dims = attn_dims(qs, ks);
                let x: Vec<Vec<f64>> = inputs.iter().map(|v| mem.read(plan, r, v)).collect();
                let mut g: Vec<Vec<f64>> = if *accumulate {
                    outputs.iter().map(|v| mem.read(plan, r, v)).collect()
                } else {
                    outputs
                        .iter()
                        .map(|v| vec![0.0; v.region.numel()])
                        .collect()
                };
                let [dq, dk, dv] = g.as_mut_slice() else {
                    unreachable!("attention_bwd_views checked three outputs")
                };
                k::attention_bwd_rows(
                    k::AttnBwdInputs {
                        q: &x[0],
                        k: &x[1],
                        v: &x[2],
                        o: &x[3],
                        d_o: &x[4],
                        lse: &x[5],
                    },
                    k::AttnGrads { dq, dk, dv },
                    dims,
                    vs[3],
                    *scale,
                    &|row| tile_keys(&m, *q_offset, *k_offset, row),
                    *accumulate,
                );
                for (v, vals) in outputs.iter().zip(&g) {
                    mem.write(plan, r, v, vals);
                }
            }
        },
        ComputeOp::Combine { kind, acc, part } => {
            let mut a: Vec<Vec<f64>> = acc.iter().map(|v| mem.read(plan, r, v)).collect();
            let p: Vec<Vec<f64>> = part.iter().map(|v| mem.read(plan, r, v)).collect();
            if a.iter().zip(&p).any(|(x, y)| x.len() != y.len()) {
                return Err("combine operands differ in size".into());
            }
            combine(*kind, &mut a, &p);
            for (v, vals) in acc.iter().zip(&a) {
                mem.write(plan, r, v, vals);
            }
        }
        ComputeOp::Copy { src, dst } => {
            let vals = mem.read(plan, r, src);
            if vals.len() != dst.region.numel() {
                return Err("copy between views of different sizes".into());
            }
            mem.write(plan, r, dst, &vals);
        }
        ComputeOp::Tile {
            tile: op,
            inputs,
            output,
        } => {
            let vals: Vec<Vec<f64>> = inputs.iter().map(|v| mem.read(plan, r, v)).collect();
            let shapes: Vec<Vec<usize>> = inputs.iter().map(|v| v.region.extent.clone()).collect();
            let out = crate::tile_ref::run_tile_with(
                op,
                &vals,
                &shapes,
                &output.region.extent,
                mem.storage,
            )?;
            mem.write(plan, r, output, &out);
        }
    }
    Ok(())
}

fn run_collective(
    plan: &Plan,
    mem: &mut Mem,
    group: &[usize],
    ops: &[&Collective],
) -> Result<(), String> {
    let n = group.len();
    match ops[0] {
        Collective::AllGather { axis, .. } => {
            let parts: Vec<Vec<f64>> = group
                .iter()
                .zip(ops)
                .map(|(r, c)| {
                    if let Collective::AllGather { src, .. } = c {
                        mem.read(plan, *r, src)
                    } else {
                        vec![]
                    }
                })
                .collect();
            for (r, c) in group.iter().zip(ops) {
                if let Collective::AllGather { src, dst, .. } = c {
                    if dst.region.extent[*axis] != src.region.extent[*axis] * n {
                        return Err("all_gather destination has the wrong size".into());
                    }
                    let full = concat(&parts, &src.region.extent, *axis);
                    mem.write(plan, *r, dst, &full);
                }
            }
        }
        Collective::AllReduce { kind, .. } => {
            let mut acc: Option<Vec<Vec<f64>>> = None;
            for (r, c) in group.iter().zip(ops) {
                if let Collective::AllReduce { bufs, .. } = c {
                    let vals: Vec<Vec<f64>> = bufs.iter().map(|b| mem.read(plan, *r, b)).collect();
                    match acc.as_mut() {
                        None => acc = Some(vals),
                        Some(a) => combine(*kind, a, &vals),
                    }
                }
            }
            let acc = acc.ok_or("empty all_reduce")?;
            for (r, c) in group.iter().zip(ops) {
                if let Collective::AllReduce { bufs, .. } = c {
                    for (b, v) in bufs.iter().zip(&acc) {
                        mem.write(plan, *r, b, v);
                    }
                }
            }
        }
        Collective::ReduceScatter { axis, kind, .. } => {
            let mut acc: Option<Vec<Vec<f64>>> = None;
            let mut shape = vec![];
            for (r, c) in group.iter().zip(ops) {
                if let Collective::ReduceScatter { src, .. } = c {
                    shape = src.region.extent.clone();
                    let vals = vec![mem.read(plan, *r, src)];
                    match acc.as_mut() {
                        None => acc = Some(vals),
                        Some(a) => combine(*kind, a, &vals),
                    }
                }
            }
            let acc = acc.ok_or("empty reduce_scatter")?;
            let chunks = split(&acc[0], &shape, *axis, n)?;
            for ((r, c), chunk) in group.iter().zip(ops).zip(chunks) {
                if let Collective::ReduceScatter { dst, .. } = c {
                    mem.write(plan, *r, dst, &chunk);
                }
            }
        }
        Collective::AllToAll {
            split_axis,
            concat_axis,
            ..
        } => {
            let sent: Vec<Vec<Vec<f64>>> = group
                .iter()
                .zip(ops)
                .map(|(r, c)| {
                    if let Collective::AllToAll { src, .. } = c {
                        split(&mem.read(plan, *r, src), &src.region.extent, *split_axis, n)
                    } else {
                        Ok(vec![])
                    }
                })
                .collect::<Result<_, String>>()?;
            for (q, (r, c)) in group.iter().zip(ops).enumerate() {
                if let Collective::AllToAll { src, dst, .. } = c {
                    let mut chunk_shape = src.region.extent.clone();
                    chunk_shape[*split_axis] /= n;
                    let recv: Vec<Vec<f64>> = (0..n).map(|p| sent[p][q].clone()).collect();
                    let full = concat(&recv, &chunk_shape, *concat_axis);
                    if full.len() != dst.region.numel() {
                        return Err("all_to_all destination has the wrong size".into());
                    }
                    mem.write(plan, *r, dst, &full);
                }
            }
        }
        Collective::Reduce { root, kind, .. } => {
            // Every member's source combined in group order, stored in the root's dst.
            let root_rank = *group.get(*root).ok_or("reduce root outside the group")?;
            if *kind != CombineKind::Add {
                return Err("a reduce with lse merge needs [o, lse] pairs".into());
            }
            let mut acc: Option<Vec<Vec<f64>>> = None;
            let mut dst = None;
            for (r, c) in group.iter().zip(ops) {
                let Collective::Reduce {
                    src,
                    dst: d,
                    root: rt,
                    ..
                } = c
                else {
                    return Err("reduce members disagree".into());
                };
                if rt != root {
                    return Err(format!(
                        "reduce members disagree on the root ({rt} on rank {r}, {root} on rank {})",
                        group[0]
                    ));
                }
                if *r == root_rank {
                    dst = d.as_ref();
                }
                let vals = vec![mem.read(plan, *r, src)];
                if vals[0].len() != acc.as_ref().map_or(vals[0].len(), |a| a[0].len()) {
                    return Err("reduce members' sources differ in size".into());
                }
                match acc.as_mut() {
                    None => acc = Some(vals),
                    Some(a) => combine(*kind, a, &vals),
                }
            }
            let acc = acc.ok_or("empty reduce")?;
            let dst = dst.ok_or("reduce root names no destination")?;
            if dst.region.numel() != acc[0].len() {
                return Err("reduce destination has the wrong size".into());
            }
            mem.write(plan, root_rank, dst, &acc[0]);
        }
        Collective::Broadcast { root, .. } => {
            let root_rank = *group.get(*root).ok_or("broadcast root outside the group")?;
            let pos = group.iter().position(|x| *x == root_rank).unwrap_or(0);
            let vals = if let Collective::Broadcast { buf, .. } = ops[pos] {
                mem.read(plan, root_rank, buf)
            } else {
                vec![]
            };
            for (r, c) in group.iter().zip(ops) {
                if let Collective::Broadcast { buf, .. } = c {
                    mem.write(plan, *r, buf, &vals);
                }
            }
        }
    }
    Ok(())
}

/// Runs `plan` on `inputs` (full tensors by buffer name, row-major) in f64
/// ([`Storage::F64`]) and returns the assembled outputs by name. Elements of an output that no
/// piece provides are NaN.
pub fn execute(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
) -> Result<HashMap<String, Vec<f64>>, ExecError> {
    execute_with(plan, inputs, Storage::F64)
}

/// [`execute`] with the slots holding what `storage` says.
pub fn execute_with(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
    storage: Storage,
) -> Result<HashMap<String, Vec<f64>>, ExecError> {
    Ok(assemble(plan, &execute_pieces_with(plan, inputs, storage)?))
}

/// The outputs by name, assembled from the pieces the ranks hold (a later rank's piece over
/// an earlier one's); elements no piece provides are NaN.
pub fn assemble(plan: &Plan, held: &[HeldPiece]) -> HashMap<String, Vec<f64>> {
    let mut out = HashMap::new();
    for b in plan.buffers.iter().filter(|b| b.role == Role::Output) {
        let mut full = vec![f64::NAN; b.shape.iter().product()];
        for p in held.iter().filter(|p| p.buffer == b.name) {
            scatter(&mut full, &b.shape, &p.region, &p.values);
        }
        out.insert(b.name.clone(), full);
    }
    out
}

/// One output piece a rank holds after a run: the region of the global output buffer it
/// covers (row-major, in the buffer's element positions) and its values.
#[derive(Debug, Clone)]
pub struct HeldPiece {
    /// The rank that holds it.
    pub rank: usize,
    /// The output buffer's name.
    pub buffer: String,
    /// Where in the global buffer.
    pub region: mercury_plan::Region,
    /// The values, row-major over `region`.
    pub values: Vec<f64>,
}

/// Runs `plan` on `inputs` (full tensors by buffer name, row-major) in f64
/// ([`Storage::F64`]) and returns every output piece each rank holds, rank by rank (what
/// `--check` compares with the declared placement).
pub fn execute_pieces(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
) -> Result<Vec<HeldPiece>, ExecError> {
    execute_pieces_with(plan, inputs, Storage::F64)
}

/// [`execute_pieces`] with the slots holding what `storage` says (under [`Storage::Dtype`],
/// each piece rounded to its buffer's dtype).
pub fn execute_pieces_with(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
    storage: Storage,
) -> Result<Vec<HeldPiece>, ExecError> {
    verify(plan)?;
    for b in plan.buffers.iter().filter(|b| b.role == Role::Input) {
        match inputs.get(&b.name) {
            Some(v) if v.len() == b.shape.iter().product::<usize>() => {}
            _ => return Err(ExecError::Input(b.name.clone())),
        }
    }
    let docs = documents(plan, inputs)?;
    let mut mem = Mem {
        slots: Vec::new(),
        storage,
    };
    for r in &plan.ranks {
        let mut slots = Vec::new();
        for s in &r.slots {
            let n: usize = s.shape.iter().product();
            let mut vals = match &s.init {
                SlotInit::Uninit => vec![f64::NAN; n],
                SlotInit::Zero => vec![0.0; n],
                SlotInit::NegInf => vec![f64::NEG_INFINITY; n],
                SlotInit::FromGlobal { buffer, region } => {
                    let b = &plan.buffers[*buffer];
                    gather(&inputs[&b.name], &b.shape, region)
                }
                SlotInit::FromGlobalPieces { buffer, pieces } => {
                    let b = &plan.buffers[*buffer];
                    let mut v = vec![f64::NAN; n];
                    for p in pieces {
                        let vals = gather(&inputs[&b.name], &b.shape, &p.region);
                        scatter(&mut v, &s.shape, &p.at, &vals);
                    }
                    v
                }
            };
            store(storage, s.dtype, &mut vals);
            slots.push(vals);
        }
        mem.slots.push(slots);
    }
    for s in 0..plan.num_stages() {
        let serr = |what: String| ExecError::Stage { stage: s, what };
        // Transfers read their sources before compute writes anything of this stage (the plan
        // verifier guarantees they touch disjoint memory, so the order is not observable).
        let mut messages: HashMap<(usize, usize, u64), Vec<f64>> = HashMap::new();
        for r in &plan.ranks {
            if let Some(st) = r.stages.get(s) {
                for c in &st.comm {
                    if let CommOp::Send { peer, src, tag } = c {
                        messages.insert((r.rank, *peer, *tag), mem.read(plan, r.rank, src));
                    }
                }
            }
        }
        for r in &plan.ranks {
            if let Some(st) = r.stages.get(s) {
                for op in &st.compute {
                    run_compute(plan, &mut mem, r.rank, op, &docs)
                        .map_err(|w| serr(format!("rank {}: {w}", r.rank)))?;
                }
            }
        }
        for r in &plan.ranks {
            if let Some(st) = r.stages.get(s) {
                for c in &st.comm {
                    if let CommOp::Recv { peer, dst, tag } = c {
                        let vals = messages.remove(&(*peer, r.rank, *tag)).ok_or_else(|| {
                            serr(format!(
                                "rank {} receives from {peer} tag {tag}, which nobody sent",
                                r.rank
                            ))
                        })?;
                        mem.write(plan, r.rank, dst, &vals);
                    }
                }
            }
        }
        // Collectives: the k-th collective of a group in each member's list is one instance.
        let mut instances: BTreeMap<(Vec<usize>, usize), Vec<(usize, &Collective)>> =
            BTreeMap::new();
        for r in &plan.ranks {
            let mut seen: HashMap<Vec<usize>, usize> = HashMap::new();
            if let Some(st) = r.stages.get(s) {
                for c in &st.comm {
                    if let CommOp::Collective { group, collective } = c {
                        let k = seen.entry(group.clone()).or_default();
                        instances
                            .entry((group.clone(), *k))
                            .or_default()
                            .push((r.rank, collective));
                        *k += 1;
                    }
                }
            }
        }
        for ((group, _), members) in instances {
            let mut ops = Vec::new();
            for g in &group {
                let c = members.iter().find(|(r, _)| r == g).ok_or_else(|| {
                    serr(format!(
                        "rank {g} does not join the collective of group {group:?}"
                    ))
                })?;
                ops.push(c.1);
            }
            if ops
                .iter()
                .any(|c| std::mem::discriminant(*c) != std::mem::discriminant(ops[0]))
            {
                return Err(serr(format!(
                    "members of group {group:?} disagree on the collective"
                )));
            }
            run_collective(plan, &mut mem, &group, &ops).map_err(serr)?;
        }
    }
    let mut held = Vec::new();
    for r in &plan.ranks {
        for p in &r.outputs {
            let b = &plan.buffers[p.buffer];
            let mut values = mem.read(plan, r.rank, &p.src);
            store(storage, b.dtype, &mut values);
            held.push(HeldPiece {
                rank: r.rank,
                buffer: b.name.clone(),
                region: p.region.clone(),
                values,
            });
        }
    }
    Ok(held)
}

/// The run's document boundaries (`inputs` by the plan's [`Documents`] names), checked
/// (`mask::Boundaries::from_f64`).
pub fn documents(
    plan: &Plan,
    inputs: &HashMap<String, Vec<f64>>,
) -> Result<Vec<mask::Boundaries>, ExecError> {
    plan.documents
        .iter()
        .map(|d| {
            let v = inputs
                .get(&d.name)
                .ok_or_else(|| ExecError::Documents(d.name.clone(), "missing".into()))?;
            mask::Boundaries::from_f64(v, d.positions)
                .map_err(|m| ExecError::Documents(d.name.clone(), m))
        })
        .collect()
}

/// Fresh random document boundaries for every [`Documents`] input of a plan (by name), all
/// with one number of documents (so that any two pair up as a cross-attention's queries' and
/// keys'), deterministic in `seed`: few long documents (longer than a shard), many short ones,
/// or one token each, with empty documents and a padding tail (positions in no document) at
/// times. Values as f64, as [`execute`] takes its inputs.
pub fn random_documents(plan: &Plan, seed: u64) -> HashMap<String, Vec<f64>> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(u64::MAX);
    let Some(fewest) = plan.documents.iter().map(|d| d.positions).min() else {
        return HashMap::new();
    };
    let n = match rng.gen_range(0..10) {
        0..4 => rng.gen_range(1..=4.min(fewest)),
        4..8 => rng.gen_range(1..=fewest),
        _ => fewest,
    };
    plan.documents
        .iter()
        .map(|d| {
            let end = if rng.gen_range(0..4) == 0 {
                rng.gen_range(d.positions / 2..=d.positions)
            } else {
                d.positions
            };
            let mut cuts: Vec<usize> = if n == d.positions && end == n {
                (1..n).collect()
            } else {
                (1..n).map(|_| rng.gen_range(0..=end)).collect()
            };
            cuts.sort_unstable();
            let b: Vec<f64> = std::iter::once(0)
                .chain(cuts)
                .chain(std::iter::once(end))
                .map(|x| x as f64)
                .collect();
            (d.name.clone(), b)
        })
        .collect()
}

/// Fresh random inputs for every input buffer of a plan: uniform in [-1, 1), each value
/// rounded to nearest in its buffer's dtype (so in [-1, 1]), so a device holds exactly these
/// numbers and a reference computed from them in f64 needs no second rounding.
///
/// Deterministic in `seed` alone: element `i` of the `k`-th input buffer (plan order) is
/// drawn from the `i`-th 64-bit word pair of ChaCha8 stream `k`, whatever the number of
/// threads drawing them (the buffers of 512K-token attention hold 2^31 values each and are
/// drawn in parallel chunks, each seeking to its offset). Processes of one launched run that
/// pass the same seed hold the same inputs. A plan's document boundaries are drawn too
/// ([`random_documents`]).
pub fn random_inputs(plan: &Plan, seed: u64) -> HashMap<String, Vec<f64>> {
    let mut out: HashMap<String, Vec<f64>> = plan
        .buffers
        .iter()
        .filter(|b| b.role == Role::Input)
        .enumerate()
        .map(|(k, b)| {
            let mut v = vec![0f64; b.shape.iter().product::<usize>()];
            draw_input(seed, k, &mut v, |x| round_to(b.dtype, x));
            (b.name.clone(), v)
        })
        .collect();
    out.extend(random_documents(plan, seed));
    out
}

/// Fills `out` with the draws of input stream `k` of `seed`, uniform in [-1, 1) before `f`
/// maps each (to its dtype: [`round_to`], or the device's bit pattern): [`random_inputs`]'s
/// values, in parallel chunks that each seek to their offset.
pub fn draw_input<T: Send>(seed: u64, k: usize, out: &mut [T], f: impl Fn(f64) -> T + Sync) {
    use rand::{RngCore, SeedableRng};
    use rayon::prelude::*;
    const CHUNK: usize = 1 << 16;
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, out)| {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(k as u64);
        // One u64 (two 32-bit words) per value.
        rng.set_word_pos(2 * (c * CHUNK) as u128);
        for x in out {
            // 53 random bits: a multiple of 2^-52 in [-1, 1), exact in f64.
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64);
            *x = f(u - 1.0);
        }
    });
}

/// `x` rounded to nearest (ties to even) in `dtype`, as f64.
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F64 => x,
        DType::F32 => x as f32 as f64,
        DType::BF16 => half::bf16::from_f64(x).to_f64(),
        DType::F16 => half::f16::from_f64(x).to_f64(),
    }
}

/// Largest relative error ‖a − b‖ / ‖b‖ over the outputs; NaN anywhere gives infinity.
pub fn relative_error(a: &HashMap<String, Vec<f64>>, b: &HashMap<String, Vec<f64>>) -> f64 {
    let mut worst: f64 = 0.0;
    for (name, x) in a {
        let Some(y) = b.get(name) else {
            return f64::INFINITY;
        };
        if x.len() != y.len() || x.iter().chain(y).any(|v| !v.is_finite()) {
            return f64::INFINITY;
        }
        let num: f64 = x
            .iter()
            .zip(y)
            .map(|(p, q)| (p - q) * (p - q))
            .sum::<f64>()
            .sqrt();
        let den: f64 = y.iter().map(|q| q * q).sum::<f64>().sqrt().max(1e-300);
        worst = worst.max(num / den);
    }
    worst
}

/// How many elements of the outputs `a` holds differ from `b`'s by more than summing f32 values
/// in another order can explain: by more than 2^-16 of the root mean square of `b`'s output
/// (an f32 sum in another order moves an element by about 2^-24 of its addends; a bf16 or f16
/// element rounded the other way moves by at least 2^-11 of itself). Two [`Storage::Dtype`]
/// runs of plans that round at the same places differ in a handful of elements (the f32 values
/// that lay next to a rounding boundary); a plan that rounds somewhere else (a partial sum, a
/// softmax tile) in a large part of them. An output `b` lacks, or of another length, counts
/// whole; a non-finite value counts.
pub fn rounded_otherwise(a: &HashMap<String, Vec<f64>>, b: &HashMap<String, Vec<f64>>) -> usize {
    a.iter()
        .map(|(name, x)| rounded_otherwise_in(x, b.get(name).map(Vec::as_slice)))
        .sum()
}

/// [`rounded_otherwise`] for one output: `x` against `y` (all of `x` when `y` is missing or of
/// another length).
pub fn rounded_otherwise_in(x: &[f64], y: Option<&[f64]>) -> usize {
    let Some(y) = y.filter(|y| y.len() == x.len()) else {
        return x.len();
    };
    let finite = y.iter().filter(|q| q.is_finite());
    let rms = (finite.clone().map(|q| q * q).sum::<f64>() / finite.count().max(1) as f64).sqrt();
    let apart = rms * 2f64.powi(-16);
    x.iter()
        .zip(y)
        .filter(|(p, q)| {
            !crate::check::same_nonfinite(**p, **q)
                && (!p.is_finite() || !q.is_finite() || (*p - *q).abs() > apart)
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_driver::{Compiler, Schedule};

    /// A GEMM with a bf16, an f16 and an f32 input: 3 x 100000 values (more than one chunk).
    const KERNEL: &str = "commir.mesh @m shape [1]
commir.kernel @g on @m {
  commir.axis @i = 1000 spatial
  commir.axis @j = 100 managed
  commir.buffer @A : [@i, @j] bf16 in
  commir.buffer @B : [@i, @j] f16 in
  commir.buffer @D : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<bf16>
  %d = commir.load @D[@j] : !commir.tile<f32>
  %c = commir.patch \"gemm\" (%a, %d) : (!commir.tile<bf16>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
";

    #[test]
    fn random_inputs_are_rounded_seekable_and_seeded() {
        use rand::{RngCore, SeedableRng};
        let plan = Compiler::new()
            .compile("g.mlir", KERNEL, &Schedule::default())
            .unwrap();
        let a = random_inputs(&plan, 3);
        for b in plan.buffers.iter().filter(|b| b.role == Role::Input) {
            let v = &a[&b.name];
            assert_eq!(v.len(), b.shape.iter().product::<usize>());
            assert!(v.iter().all(|x| (-1.0..=1.0).contains(x)));
            // Exactly representable in the buffer's dtype: the device holds these numbers.
            assert!(v.iter().all(|x| round_to(b.dtype, *x) == *x), "{}", b.name);
        }
        // Stream k is the k-th input buffer, drawn sequentially: the chunks seek right.
        let k = plan
            .buffers
            .iter()
            .filter(|b| b.role == Role::Input)
            .position(|b| b.name == "A")
            .unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        rng.set_stream(k as u64);
        let seq: Vec<f64> = (0..100_000)
            .map(|_| {
                let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64);
                round_to(DType::BF16, u - 1.0)
            })
            .collect();
        assert_eq!(a["A"], seq);
        assert_eq!(random_inputs(&plan, 3), a);
        let b = random_inputs(&plan, 4);
        assert_ne!(b["A"], a["A"]);
        assert_ne!(a["A"][..50], a["B"][..50]);
    }

    fn whole(slot: usize, n: usize) -> View {
        View {
            slot,
            region: Region::full(&[n]),
        }
    }

    fn slot(name: &str, dtype: DType, n: usize, init: SlotInit) -> Slot {
        Slot {
            name: name.into(),
            dtype,
            shape: vec![n],
            init,
        }
    }

    /// Two ranks: rank 0 loads X into an f32 slot and copies it into a bf16 one, rank 1
    /// receives rank 0's f32 slot into a bf16 one; Y gathers both bf16 slots, Z (bf16) is read
    /// straight from rank 0's f32 slot.
    fn rounding_plan() -> Plan {
        let x = SlotInit::FromGlobal {
            buffer: 0,
            region: Region::full(&[4]),
        };
        let buffer = |name: &str, n: usize, dtype: DType, role: Role| GlobalBuffer {
            name: name.into(),
            shape: vec![n],
            dtype,
            role,
        };
        let piece = |buffer: usize, offset: usize, src: View| OutputPiece {
            buffer,
            region: Region {
                offset: vec![offset],
                extent: vec![4],
            },
            src,
        };
        Plan {
            name: "rounding".into(),
            mesh: vec![2],
            buffers: vec![
                buffer("X", 4, DType::F32, Role::Input),
                buffer("Y", 8, DType::F32, Role::Output),
                buffer("Z", 4, DType::BF16, Role::Output),
            ],
            documents: vec![],
            ranks: vec![
                RankProgram {
                    rank: 0,
                    coords: vec![0],
                    slots: vec![
                        slot("x", DType::F32, 4, x.clone()),
                        slot("x.narrow", DType::BF16, 4, SlotInit::Uninit),
                    ],
                    stages: vec![Stage {
                        compute: vec![ComputeOp::Copy {
                            src: whole(0, 4),
                            dst: whole(1, 4),
                        }],
                        comm: vec![CommOp::Send {
                            peer: 1,
                            src: whole(0, 4),
                            tag: 0,
                        }],
                    }],
                    outputs: vec![piece(1, 0, whole(1, 4)), piece(2, 0, whole(0, 4))],
                },
                RankProgram {
                    rank: 1,
                    coords: vec![1],
                    slots: vec![slot("x.received", DType::BF16, 4, SlotInit::Uninit)],
                    stages: vec![Stage {
                        compute: vec![],
                        comm: vec![CommOp::Recv {
                            peer: 0,
                            dst: whole(0, 4),
                            tag: 0,
                        }],
                    }],
                    outputs: vec![piece(1, 4, whole(0, 4))],
                },
            ],
        }
    }

    /// Three ranks over the group [2, 0, 1] each hold X[4r..4r + 4] and reduce (add) it in two
    /// halves: elements 0..2 to member 1 (rank 0), in place, and elements 2..4 to member 0
    /// (rank 2) into a bf16 slot; rank 1 only sends. Y[i] is the sum over ranks, each half
    /// output by its root, the second rounded to bf16 when stored in its dtype.
    #[test]
    fn reduce_sums_into_the_root_only() {
        let group = vec![2, 0, 1];
        let half = |slot: usize, at: usize| View {
            slot,
            region: Region {
                offset: vec![at],
                extent: vec![2],
            },
        };
        let ranks = (0..3)
            .map(|r| {
                let mut slots = vec![slot(
                    "x",
                    DType::F32,
                    4,
                    SlotInit::FromGlobal {
                        buffer: 0,
                        region: Region {
                            offset: vec![4 * r],
                            extent: vec![4],
                        },
                    },
                )];
                let mut outputs = Vec::new();
                let first = (r == 0).then(|| half(0, 0));
                let second = (r == 2).then(|| {
                    slots.push(slot("y.reduced", DType::BF16, 2, SlotInit::Uninit));
                    whole(1, 2)
                });
                for (at, dst) in [(0, &first), (2, &second)] {
                    if let Some(d) = dst {
                        outputs.push(OutputPiece {
                            buffer: 1,
                            region: Region {
                                offset: vec![at],
                                extent: vec![2],
                            },
                            src: d.clone(),
                        });
                    }
                }
                let reduce = |src: View, dst: Option<View>, root: usize| CommOp::Collective {
                    group: group.clone(),
                    collective: Collective::Reduce {
                        src,
                        dst,
                        root,
                        kind: CombineKind::Add,
                    },
                };
                RankProgram {
                    rank: r,
                    coords: vec![r],
                    slots,
                    stages: vec![Stage {
                        compute: vec![],
                        comm: vec![reduce(half(0, 0), first, 1), reduce(half(0, 2), second, 0)],
                    }],
                    outputs,
                }
            })
            .collect();
        let plan = Plan {
            name: "reduce".into(),
            mesh: vec![3],
            buffers: vec![
                GlobalBuffer {
                    name: "X".into(),
                    shape: vec![12],
                    dtype: DType::F32,
                    role: Role::Input,
                },
                GlobalBuffer {
                    name: "Y".into(),
                    shape: vec![4],
                    dtype: DType::F32,
                    role: Role::Output,
                },
            ],
            documents: vec![],
            ranks,
        };
        // Rank r holds (r + 1) + i 2^-9: the sums are 6 + 3 i 2^-9, f32 numbers; bf16 (an
        // ulp of 2^-5 there) rounds the last two to 6 and 6 + 2^-5.
        let x: Vec<f64> = (0..12)
            .map(|e| (e / 4 + 1) as f64 + (e % 4) as f64 * 2f64.powi(-9))
            .collect();
        let inputs = HashMap::from([("X".to_string(), x)]);
        let sum = |i: usize| 6.0 + 3.0 * i as f64 * 2f64.powi(-9);
        let exact: Vec<f64> = (0..4).map(sum).collect();
        assert_eq!(execute(&plan, &inputs).unwrap()["Y"], exact);
        let stored = execute_with(&plan, &inputs, Storage::Dtype).unwrap();
        assert_eq!(stored["Y"], vec![sum(0), sum(1), 6.0, 6.0 + 2f64.powi(-5)]);
        // A root that names no destination is refused (by the verifier, located).
        let mut bad = plan.clone();
        if let CommOp::Collective {
            collective: Collective::Reduce { dst, .. },
            ..
        } = &mut bad.ranks[2].stages[0].comm[1]
        {
            *dst = None;
        }
        let e = execute(&bad, &inputs).unwrap_err().to_string();
        assert!(
            e.contains("rank 2") && e.contains("names no destination"),
            "{e}"
        );
    }

    /// Under `Storage::Dtype` every store rounds to its slot's dtype (the initial load to f32,
    /// the copy and the received message to bf16) and an output piece to its buffer's dtype;
    /// under `Storage::F64` nothing is rounded.
    #[test]
    fn dtype_storage_rounds_every_store() {
        let plan = rounding_plan();
        // 1 + 2^-30 is not an f32; 1 + 2^-10 and 3 + 2^-20 are f32s but not bf16s.
        let x = vec![
            1.0 + 2f64.powi(-30),
            1.0 + 2f64.powi(-10),
            3.0 + 2f64.powi(-20),
            0.5,
        ];
        let inputs = HashMap::from([("X".to_string(), x.clone())]);
        let exact = execute(&plan, &inputs).unwrap();
        assert_eq!(exact["Y"], [x.clone(), x.clone()].concat());
        assert_eq!(exact["Z"], x);
        let stored = execute_with(&plan, &inputs, Storage::Dtype).unwrap();
        let bf16: Vec<f64> = x.iter().map(|v| round_to(DType::BF16, *v)).collect();
        assert_eq!(bf16, [1.0, 1.0, 3.0, 0.5]);
        assert_eq!(stored["Y"], [bf16.clone(), bf16.clone()].concat());
        assert_eq!(stored["Z"], bf16);
        // The f32 load alone: the rank-0 slot read as an f64 output.
        let mut f32_out = plan.clone();
        f32_out.buffers[2].dtype = DType::F64;
        let got = execute_with(&f32_out, &inputs, Storage::Dtype).unwrap();
        assert_eq!(got["Z"], [1.0, x[1], x[2], 0.5]);
    }

    /// An attention patch whose output view has the wrong rank is refused with an error (it
    /// used to panic slicing the output's extent).
    #[test]
    fn attention_with_a_malformed_output_view_is_an_error() {
        let four = |name: &str, init: SlotInit| Slot {
            name: name.into(),
            dtype: DType::F32,
            shape: vec![1, 1, 2, 4],
            init,
        };
        let view4 = |slot: usize| View {
            slot,
            region: Region::full(&[1, 1, 2, 4]),
        };
        let plan = Plan {
            name: "attn".into(),
            mesh: vec![1],
            buffers: vec![],
            documents: vec![],
            ranks: vec![RankProgram {
                rank: 0,
                coords: vec![0],
                slots: vec![
                    four("q", SlotInit::Zero),
                    four("k", SlotInit::Zero),
                    four("v", SlotInit::Zero),
                    slot("o", DType::F32, 8, SlotInit::Zero),
                    slot("lse", DType::F32, 2, SlotInit::Zero),
                ],
                stages: vec![Stage {
                    compute: vec![ComputeOp::Patch {
                        patch: PatchKind::Attention {
                            causal: false,
                            scale: 0.5,
                            q_offset: 0,
                            k_offset: 0,
                            mask: Default::default(),
                            accumulate: false,
                        },
                        inputs: vec![view4(0), view4(1), view4(2)],
                        outputs: vec![whole(3, 8), whole(4, 2)],
                    }],
                    comm: vec![],
                }],
                outputs: vec![],
            }],
        };
        let e = execute(&plan, &HashMap::new()).unwrap_err();
        assert!(
            e.to_string().contains("attention shapes do not agree"),
            "{e}"
        );
    }

    /// Elements apart by more than 2^-16 of the reference's root mean square count; f32-level
    /// differences, a missing output and non-finite values as the doc says.
    #[test]
    fn rounded_otherwise_counts_elements_rounded_apart() {
        let out = |v: Vec<f64>| HashMap::from([("C".to_string(), v)]);
        let want = out(vec![1.0; 8]);
        let mut got = want["C"].clone();
        got[0] += 2f64.powi(-20);
        assert_eq!(rounded_otherwise(&out(got.clone()), &want), 0);
        got[1] += 2f64.powi(-8);
        got[2] = f64::NAN;
        assert_eq!(rounded_otherwise(&out(got), &want), 2);
        assert_eq!(rounded_otherwise(&out(vec![1.0; 8]), &HashMap::new()), 8);
    }
}
