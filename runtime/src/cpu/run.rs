//! The stage loop of every rank: input shards, then per stage the transfers and collectives
//! and the compute; the outputs as the pieces each rank holds.

use super::collective::run_collective;
use super::compute::run_compute;
use super::mem::{gather, scatter, store, Mem};
use super::{ExecError, Storage};
use mercury_plan::*;
use std::collections::{BTreeMap, HashMap};

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
    let docs = super::documents(plan, inputs)?;
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
                SlotInit::Zero | SlotInit::MaskedZero => vec![0.0; n],
                SlotInit::NegInf | SlotInit::MaskedNegInf => vec![f64::NEG_INFINITY; n],
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
