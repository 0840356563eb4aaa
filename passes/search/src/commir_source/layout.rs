//! Whether a candidate's plan leaves every output where the operator declares it.

use super::CommirSource;

impl CommirSource {
    /// Whether `plan` leaves every output where the operator declares it. Checked for outputs
    /// sharded along one dimension `d` over all mesh levels (the examples' placements, kept by
    /// [`Self::reshaped`]). Block `i` of `d` (whole in the other dimensions) is *held* by a
    /// rank when the pieces that rank writes cover it. A rank may cover no block or whole
    /// blocks only; a rank holding exactly one block must hold its own block `r`; every
    /// block must be held. A rank holding several blocks has a (partly) replicated result,
    /// e.g. after an all-reduce, which the plan writes from one of the ranks holding it:
    /// accepted. The lowering writes outputs from wherever the schedule computed them, so a
    /// schedule that distributes another axis (a GEMM's rows for a column-sharded output)
    /// silently returns a different layout; `Err` says which.
    pub fn check_output_layout(&self, plan: &mercury_plan::Plan) -> Result<(), String> {
        let n = plan.ranks.len();
        let levels = self.kernel.mesh.shape.len();
        for b in self
            .kernel
            .buffers
            .iter()
            .filter(|b| b.role != mercury_commir::Role::In)
        {
            if !b.placement().is_contiguous() {
                check_runs_held(&self.kernel, b, plan)?;
                continue;
            }
            let sharded: Vec<usize> = (0..b.sharding.len())
                .filter(|&d| !b.sharding[d].is_empty())
                .collect();
            let [d] = sharded.as_slice() else { continue };
            let d = *d;
            if b.sharding[d] != (0..levels).collect::<Vec<_>>() {
                continue;
            }
            let Some(gi) = plan.buffers.iter().position(|g| g.name == b.name) else {
                return Err(format!("the plan has no output '{}'", b.name));
            };
            let shape = &plan.buffers[gi].shape;
            if !shape[d].is_multiple_of(n) {
                continue;
            }
            let block = shape[d] / n;
            let whole: usize = shape.iter().product::<usize>() / n;
            let mut held = vec![false; n];
            for r in &plan.ranks {
                let pieces: Vec<&mercury_plan::Region> = r
                    .outputs
                    .iter()
                    .filter(|o| o.buffer == gi)
                    .map(|o| &o.region)
                    .collect();
                let mut mine = Vec::new();
                for (i, h) in held.iter_mut().enumerate() {
                    // Volume of block i the rank's pieces cover (pieces do not overlap).
                    let covered: usize = pieces
                        .iter()
                        .map(|p| {
                            (0..shape.len())
                                .map(|k| {
                                    let (lo, hi) = if k == d {
                                        (i * block, (i + 1) * block)
                                    } else {
                                        (0, shape[k])
                                    };
                                    let a = p.offset[k].max(lo);
                                    (p.offset[k] + p.extent[k]).min(hi).saturating_sub(a)
                                })
                                .product::<usize>()
                        })
                        .sum();
                    if covered == whole {
                        mine.push(i);
                        *h = true;
                    } else if covered > 0 {
                        return Err(format!(
                            "rank {} writes {:.0}% of block {i} of '@{}' (declared sharded in dimension {d}): the output is split another way",
                            r.rank,
                            100.0 * covered as f64 / whole as f64,
                            b.name
                        ));
                    }
                }
                if let [i] = mine.as_slice() {
                    if *i != r.rank {
                        return Err(format!(
                            "rank {} holds block {i} of '@{}', declared block {}",
                            r.rank, b.name, r.rank
                        ));
                    }
                }
            }
            if let Some(i) = held.iter().position(|w| !w) {
                return Err(format!("no rank writes block {i} of '@{}'", b.name));
            }
        }
        Ok(())
    }
}

/// Whether every rank of `plan` writes exactly its part of output `b` under `b`'s zigzag or
/// striped placement (the runs of positions it holds in each dimension). `Err` says which rank
/// writes what else.
fn check_runs_held(
    k: &mercury_commir::Kernel,
    b: &mercury_commir::Buffer,
    plan: &mercury_plan::Plan,
) -> Result<(), String> {
    let Some(gi) = plan.buffers.iter().position(|g| g.name == b.name) else {
        return Err(format!("the plan has no output '{}'", b.name));
    };
    let p = b.placement();
    let shape = k.shape(b);
    for r in &plan.ranks {
        let runs: Vec<Vec<(usize, usize)>> = (0..shape.len())
            .map(|d| {
                mercury_commir::placement::dim_runs(shape[d], &p.dim(d), &k.mesh.shape, &r.coords)
            })
            .collect();
        let want: usize = runs
            .iter()
            .map(|v| v.iter().map(|x| x.1).sum::<usize>())
            .product();
        let mut inside = 0;
        let mut total = 0;
        for o in r.outputs.iter().filter(|o| o.buffer == gi) {
            total += o.region.numel();
            inside += (0..shape.len())
                .map(|d| {
                    let (lo, hi) = (o.region.offset[d], o.region.offset[d] + o.region.extent[d]);
                    runs[d]
                        .iter()
                        .map(|(s, l)| (s + l).min(hi).saturating_sub((*s).max(lo)))
                        .sum::<usize>()
                })
                .product::<usize>();
        }
        if inside != want || total != want {
            return Err(format!(
                "rank {} writes {total} elements of '@{}', {inside} of them in its {want} under {}",
                r.rank,
                b.name,
                p.to_custom()
            ));
        }
    }
    Ok(())
}
