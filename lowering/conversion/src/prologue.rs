//! The start of a plan: the operator's global buffers, every rank's trace, the input shards,
//! then the prologue stages: reshards at the kernel's start, and gathers of buffers read
//! remotely without a shift (AllGather, one dimension per stage).

use crate::context::{contains, to_dtype, Event, Lowering, RankBuild, Sharding};
use crate::placement::shard_box;
use crate::reshard::{reshard, reshard_stages};
use crate::trace::trace;
use mercury_commir::{Kernel, Role, Stmt};
use mercury_ir::{Diagnostic, Location};
use mercury_plan::{coords_of, GlobalBuffer, SlotInit};
use std::collections::HashMap;

/// A `commir.reshard`: buffer, target placement, location.
pub(crate) type ReshardAt = (String, Sharding, Location);

impl<'k> Lowering<'k> {
    /// The context for `k`: its global buffers, every rank's trace, and the declared
    /// placements.
    pub(crate) fn new(k: &'k Kernel) -> Result<Lowering<'k>, Diagnostic> {
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
        let mut traces = Vec::new();
        let mut last_stage = 1;
        for r in 0..n {
            let (t, last) = trace(k, &coords_of(&mesh, r))?;
            last_stage = last_stage.max(last);
            traces.push(t);
        }
        let placement: HashMap<String, Sharding> = k
            .buffers
            .iter()
            .map(|b| (b.name.clone(), b.sharding.clone()))
            .collect();
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
            placement,
            ranks,
            tag: 0,
            sent_values: HashMap::new(),
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
            if let Stmt::Reshard {
                buffer,
                sharding,
                loc,
            } = s
            {
                let r = (buffer.clone(), sharding.clone(), loc.clone());
                if i < first_loop {
                    begin.push(r);
                } else {
                    end.push(r);
                }
            }
        }
        (begin, end)
    }

    /// Every rank's shard of every input, initialised from the global buffer.
    pub(crate) fn place_inputs(&mut self) {
        let k = self.k;
        for b in k
            .buffers
            .iter()
            .filter(|b| matches!(b.role, Role::In | Role::InOut))
        {
            let shape = k.shape(b);
            let gi = self.global(&b.name);
            for rb in self.ranks.iter_mut() {
                let bx = shard_box(&shape, &b.sharding, &self.mesh, &rb.coords);
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
    }

    /// Prologue stage 0 on: the reshards at the start, then gathers for non-shifted remote
    /// reads. Returns the number of prologue stages used (the compute stages' base).
    pub(crate) fn prologue(&mut self, begin: &[ReshardAt]) -> Result<usize, Diagnostic> {
        let k = self.k;
        let mut stage = 0usize;
        for (buffer, to, loc) in begin {
            let b = k.buffer(buffer).expect("buffer");
            if !matches!(b.role, Role::In | Role::InOut) {
                // An output resharded at the start is written in that placement.
                self.placement.insert(buffer.clone(), to.clone());
                continue;
            }
            let from = self.placement[buffer].clone();
            reshard(
                k,
                &mut self.ranks,
                &self.mesh,
                buffer,
                &from,
                to,
                stage,
                loc,
            )?;
            self.placement.insert(buffer.clone(), to.clone());
            stage += reshard_stages(&from, to);
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
                    let servable = *shifted
                        && self
                            .ranks
                            .iter()
                            .any(|q| q.shard.get(buffer).is_some_and(|(_, b)| contains(b, bx)));
                    if !contains(sb, bx) && !servable && !gather.contains(buffer) {
                        gather.push(buffer.clone());
                    }
                }
            }
        }
        gather
    }
}
