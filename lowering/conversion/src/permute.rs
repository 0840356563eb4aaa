//! Moves between placements that no collective over mesh levels expresses (contiguous to
//! zigzag, zigzag to striped, an input declared in a placement the lowering's orders do not
//! align): a permutation of positions, point to point. Every rank copies what it already holds
//! of its new shard and receives each other run from one rank holding it (the fastest link
//! first), all in one stage: the data moves once, never through a full gather.

use crate::context::{contains, err, intersect, link_cost, relative, shape_of, Lowering};
use crate::placement::shard_box;
use mercury_commir::Placement;
use mercury_ir::{Diagnostic, Location};
use mercury_plan::{ComputeOp, Region, SlotInit, View};

impl Lowering<'_> {
    /// Whether moving `buffer` to `to` at the kernel's start is a permutation: the buffer is
    /// not held aligned with the lowering's orders yet, or `to` is not aligned with them.
    pub(crate) fn is_permutation(&self, buffer: &str, to: &Placement) -> bool {
        self.pending.contains_key(buffer)
            || !self
                .orders
                .aligned(buffer, to, &shape_of(self.k, buffer), &self.mesh)
    }

    /// Moves input `buffer` towards `to` in stage `stage`, point to point: it ends contiguous
    /// over `to`'s levels in the lowering's orders (exactly `to` when `to` is aligned with
    /// them; otherwise the same share of positions per rank, laid out as the orders need).
    pub(crate) fn permute_to(
        &mut self,
        buffer: &str,
        to: &Placement,
        stage: usize,
        loc: &Location,
    ) -> Result<(), Diagnostic> {
        let from: Vec<Vec<(Region, View)>> = match self.pending.remove(buffer) {
            Some(p) => p,
            None if self.placement[buffer] == to.levels => {
                // Already contiguous over those levels in the orders: nothing moves.
                return Ok(());
            }
            None => self
                .ranks
                .iter()
                .map(|rb| {
                    let (slot, bx) = rb.shard[buffer].clone();
                    vec![(bx, rb.whole(slot))]
                })
                .collect(),
        };
        let shape = shape_of(self.k, buffer);
        for r in 0..self.n {
            let want = shard_box(&shape, &to.levels, &self.mesh, &self.ranks[r].coords);
            let dtype = self.ranks[r].slots[from[r].first().map_or(0, |p| p.1.slot)].dtype;
            let dst = self.ranks[r].slot(
                format!("{buffer}.permuted"),
                dtype,
                want.extent.clone(),
                SlotInit::Uninit,
            );
            let mut sources: Vec<usize> = (0..self.n).filter(|q| *q != r).collect();
            sources.sort_by_key(|q| link_cost(&self.ranks[r].coords, &self.ranks[*q].coords));
            sources.insert(0, r);
            let mut got: Vec<Region> = Vec::new();
            for q in sources {
                for (lb, view) in &from[q] {
                    let Some(part) = intersect(lb, &want) else {
                        continue;
                    };
                    if got.iter().any(|g| contains(g, &part)) {
                        continue;
                    }
                    if got.iter().any(|g| g.overlaps(&part)) {
                        return Err(err(loc, format!("internal error: '@{buffer}' is held in overlapping pieces around {part}")));
                    }
                    got.push(part.clone());
                    let inner = relative(lb, &part);
                    let src = View {
                        slot: view.slot,
                        region: Region {
                            offset: view
                                .region
                                .offset
                                .iter()
                                .zip(&inner.offset)
                                .map(|(a, b)| a + b)
                                .collect(),
                            extent: part.extent.clone(),
                        },
                    };
                    let dst_view = View {
                        slot: dst,
                        region: relative(&want, &part),
                    };
                    if q == r {
                        self.ranks[r]
                            .stage(stage)
                            .compute
                            .push(ComputeOp::Copy { src, dst: dst_view });
                    } else {
                        self.send_recv(stage, q, r, src, dst_view);
                    }
                }
            }
            if got.iter().map(Region::numel).sum::<usize>() != want.numel() {
                return Err(err(
                    loc,
                    format!("internal error: no rank holds all of '@{buffer}' {want}"),
                ));
            }
            self.ranks[r].shard.insert(buffer.to_string(), (dst, want));
        }
        self.placement.insert(buffer.to_string(), to.levels.clone());
        self.real_placement.insert(buffer.to_string(), to.clone());
        Ok(())
    }
}
