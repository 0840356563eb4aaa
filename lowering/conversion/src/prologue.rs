//! The start of a plan: the operator's global buffers, every rank's trace, the input shards,
//! then the prologue stages: reshards at the kernel's start, and gathers of buffers read
//! remotely without a shift (AllGather, one dimension per stage).

use crate::context::{contains, err, key, to_dtype, Event, Lowering, RankBuild, Sharding};
use crate::order::{begin_placements, check_runs, Orders};
use crate::placement::{shard_box, shard_holders};
use crate::reshard::{reshard, reshard_stages};
use crate::trace::{stage_starts, trace};
use mercury_commir::{Kernel, Placement, Role, Stmt};
use mercury_ir::{Diagnostic, Location};
use mercury_plan::{coords_of, GlobalBuffer, InputPiece, SlotInit, View};
use std::collections::{HashMap, HashSet};

/// A `commir.reshard`: buffer, target placement, location.
pub(crate) type ReshardAt = (String, Placement, Location);

impl<'k> Lowering<'k> {
    /// The context for `k`: its global buffers, every rank's trace, and the declared
    /// placements.
    pub(crate) fn new(k: &'k Kernel) -> Result<Lowering<'k>, Diagnostic> {
        let mesh = k.mesh.shape.clone();
        let n = mesh.iter().product::<usize>();
        check_runs(k)?;
        check_parallel_loops(k)?;
        let red_levels = crate::epilogue::reduction_levels(k)?;
        // A plan buffer is an input or an output: an `inout` buffer would be delivered as an
        // output whose initial values nothing uploads (the executors poison outputs first).
        if let Some(b) = k.buffers.iter().find(|b| b.role == Role::InOut) {
            return Err(err(
                &b.loc,
                format!("'@{}' is inout: the lowering has no in-place buffers yet; declare an 'in' buffer and an 'out' buffer instead", b.name),
            ));
        }
        // An operator with no output computes nothing: the user's input, refused at the
        // kernel (the plan verifier, which requires an output, would call it an internal error).
        if !k.buffers.iter().any(|b| b.role == Role::Out) {
            return Err(err(
                &k.loc,
                format!(
                    "kernel '@{}' has no output: nothing to compute; declare a buffer 'out' and store or reduce into it",
                    k.name
                ),
            ));
        }
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
        let mut traces = Vec::new();
        let mut last_stage = 1;
        for r in 0..n {
            let (t, last) = trace(k, &coords_of(&mesh, r))?;
            last_stage = last_stage.max(last);
            traces.push(t);
        }
        let stage_starts = traces.iter().map(|t| stage_starts(t, last_stage)).collect();
        let placement: HashMap<String, Sharding> = k
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.sharding.clone()))
            .collect();
        let real_placement = k
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.placement()))
            .collect();
        let orders = Orders::choose(k, &begin_placements(k));
        let ranks = (0..n)
            .map(|r| RankBuild::new(coords_of(&mesh, r)))
            .collect();
        Ok(Lowering {
            k,
            mesh,
            n,
            buffers,
            traces,
            last_stage,
            stage_starts,
            placement,
            orders,
            real_placement,
            pending: HashMap::new(),
            ranks,
            tag: 0,
            sent_values: HashMap::new(),
            part_dtype: HashMap::new(),
            red_levels,
            holders: Default::default(),
            carry_chains: HashMap::new(),
            carry_at: HashMap::new(),
        })
    }

    /// The reshards at the kernel's start and those at its end.
    pub(crate) fn split_reshards(&self) -> (Vec<ReshardAt>, Vec<ReshardAt>) {
        let body = &self.k.body;
        let first_loop = body
            .iter()
            .position(|s| !matches!(s, Stmt::Reshard { .. }))
            .unwrap_or(body.len());
        let mut begin = Vec::new();
        let mut end = Vec::new();
        for (i, s) in body.iter().enumerate() {
            if let Stmt::Reshard { buffer, to, loc } = s {
                let r = (buffer.clone(), to.clone(), loc.clone());
                if i < first_loop {
                    begin.push(r);
                } else {
                    end.push(r);
                }
            }
        }
        (begin, end)
    }

    /// Every rank's shard of every input, initialised from the global buffer (several runs of
    /// it side by side under a zigzag or striped placement). An input whose placement is not
    /// aligned with the lowering's orders is held as declared until the prologue moves it.
    pub(crate) fn place_inputs(&mut self) {
        let k = self.k;
        for b in k
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::In | Role::InOut))
        {
            let shape = k.shape(b);
            let gi = self.global(&b.name);
            let p = b.placement();
            let aligned = self.orders.aligned(&b.name, &p, &shape, &self.mesh);
            let mut pending = Vec::new();
            for rb in self.ranks.iter_mut() {
                let (pieces, slot_shape, bx) = if aligned {
                    let bx = shard_box(&shape, &b.sharding, &self.mesh, &rb.coords);
                    let pieces = self.orders.global_pieces(&b.name, &bx);
                    (pieces, bx.extent.clone(), Some(bx))
                } else {
                    let (pieces, slot_shape) = self
                        .orders
                        .shard_pieces(&b.name, &p, &shape, &self.mesh, &rb.coords);
                    (pieces, slot_shape, None)
                };
                let init = match pieces.as_slice() {
                    [one] if one.at.extent == slot_shape => SlotInit::FromGlobal {
                        buffer: gi,
                        region: one.global.clone(),
                    },
                    _ => SlotInit::FromGlobalPieces {
                        buffer: gi,
                        pieces: pieces
                            .iter()
                            .map(|p| InputPiece {
                                region: p.global.clone(),
                                at: p.at.clone(),
                            })
                            .collect(),
                    },
                };
                let s = rb.slot(
                    format!("{}.shard", b.name),
                    to_dtype(&b.dtype),
                    slot_shape,
                    init,
                );
                match bx {
                    Some(bx) => {
                        rb.shard.insert(b.name.clone(), (s, bx));
                    }
                    None => pending.push(
                        pieces
                            .into_iter()
                            .map(|p| {
                                let v = View {
                                    slot: s,
                                    region: p.at,
                                };
                                (p.logical, v)
                            })
                            .collect(),
                    ),
                }
            }
            if !aligned {
                self.pending.insert(b.name.clone(), pending);
            }
        }
    }

    /// Prologue stage 0 on: inputs whose placement the orders do not align, and the first
    /// reshard of an input when it is such a move, go point to point, all in the first stage;
    /// then the other reshards at the start, then gathers for non-shifted remote reads.
    /// Returns the number of prologue stages used (the compute stages' base).
    pub(crate) fn prologue(&mut self, begin: &[ReshardAt]) -> Result<usize, Diagnostic> {
        let k = self.k;
        let mut stage = 0usize;
        let mut first_done: HashSet<usize> = HashSet::new();
        for b in k
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::In | Role::InOut))
        {
            let first = begin.iter().position(|(n, _, _)| *n == b.name);
            let (to, loc) = match first {
                Some(i) if self.is_permutation(&b.name, &begin[i].1) => {
                    first_done.insert(i);
                    (begin[i].1.clone(), begin[i].2.clone())
                }
                _ if self.pending.contains_key(&b.name) => (b.placement(), b.loc.clone()),
                _ => continue,
            };
            self.permute_to(&b.name, &to, 0, &loc)?;
            stage = 1;
        }
        for (i, (buffer, to, loc)) in begin.iter().enumerate() {
            let b = k.buffer(buffer).expect("buffer");
            if !matches!(b.role, Role::In | Role::InOut) {
                // An output resharded at the start is written in that placement.
                self.placement.insert(buffer.clone(), to.levels.clone());
                self.real_placement.insert(buffer.clone(), to.clone());
                continue;
            }
            if first_done.contains(&i) {
                continue;
            }
            if self.is_permutation(buffer, to) {
                self.permute_to(buffer, to, stage, loc)?;
                stage += 1;
                continue;
            }
            let from = self.placement[buffer].clone();
            reshard(
                k,
                &mut self.ranks,
                &self.mesh,
                buffer,
                &from,
                &to.levels,
                stage,
                loc,
                &mut self.tag,
            )?;
            self.placement.insert(buffer.clone(), to.levels.clone());
            self.real_placement.insert(buffer.clone(), to.clone());
            stage += reshard_stages(&from, &to.levels);
        }
        for buffer in self.gathered() {
            let from = self.placement[&buffer].clone();
            let dims_sharded: Vec<usize> =
                (0..from.len()).filter(|d| !from[*d].is_empty()).collect();
            let mut cur = from.clone();
            for d in dims_sharded {
                let mut to = cur.clone();
                to[d].clear();
                reshard(
                    k,
                    &mut self.ranks,
                    &self.mesh,
                    &buffer,
                    &cur,
                    &to,
                    stage,
                    &k.loc,
                    &mut self.tag,
                )?;
                cur = to;
                stage += 1;
            }
            self.placement.insert(buffer.clone(), cur);
        }
        Ok(stage)
    }

    /// Buffers read remotely without a shift, in order of first such read: they are gathered
    /// to every rank. A shifted read travels from the rank that holds the tile; a tile no
    /// single rank holds (or any unshifted remote read) needs the buffer gathered first.
    fn gathered(&self) -> Vec<String> {
        let mut gather: Vec<String> = Vec::new();
        // (buffer, box key) -> whether some rank's shard contains that box.
        let mut held: HashMap<(String, Vec<usize>), bool> = HashMap::new();
        for (r, t) in self.traces.iter().enumerate() {
            for (_, e) in t {
                if let Event::Load {
                    buffer,
                    bx,
                    shifted,
                    ..
                } = e
                {
                    // Temporaries are read where they were stored (`load.rs`).
                    let Some((_, sb)) = self.ranks[r].shard.get(buffer) else {
                        continue;
                    };
                    if contains(sb, bx) || gather.contains(buffer) {
                        continue;
                    }
                    let servable = *shifted
                        && *held
                            .entry((buffer.clone(), key(bx)))
                            .or_insert_with(|| !shard_holders(&self.ranks, buffer, bx).is_empty());
                    if !servable {
                        gather.push(buffer.clone());
                    }
                }
            }
        }
        gather
    }
}

/// Every parallel loop's iterations run on different devices at once, so none may carry a
/// dependence (`mercury_commir::deps`): hand-written `parallel(L)` loops are held to what
/// `parallelize` checks. A store every iteration makes to one tile (the last iteration wins
/// in the loop's order) would otherwise lower to a plan in which each rank keeps its own.
///
/// Likewise a shifted loop runs its iterations in another order on each rank, so none of its
/// own accesses may carry a dependence: hand-written `shift(@p)` loops are held to what
/// `shift` checks.
fn check_parallel_loops(k: &Kernel) -> Result<(), Diagnostic> {
    let mut g = None;
    for (i, l) in k.loops().into_iter().enumerate() {
        if let Some(level) = l.parallel {
            let g = g.get_or_insert_with(|| mercury_commir::deps::build(k));
            if let Some(dep) = mercury_commir::deps::carried_by(g, k, &l.axis) {
                let lead = format!(
                    "the loop over '@{}' is parallel over mesh level {level}, but ",
                    l.axis
                );
                return Err(mercury_commir::deps::race_error(&lead, &l.axis, dep));
            }
        }
        if let Some(by) = &l.shift {
            let g = g.get_or_insert_with(|| mercury_commir::deps::build(k));
            if let Some(dep) = mercury_commir::deps::carried_within(g, k, &l.axis, i) {
                let lead = format!("the loop over '@{}' is shifted by '@{by}', but ", l.axis);
                return Err(mercury_commir::deps::order_error(&lead, &l.axis, dep));
            }
        }
    }
    Ok(())
}
