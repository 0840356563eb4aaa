//! Where buffers live: the box a rank holds under a sharding, the rank that owns a tile, the
//! ranks that hold a tile, and the group of ranks a collective over some mesh levels spans.

use crate::context::{shape_of, RankBuild};
use mercury_commir::Kernel;
use mercury_plan::{rank_of, Region};
use std::collections::HashMap;

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

/// The rank that owns tile `bx` of `buffer` under its placement, among ranks that share `me`'s
/// coordinates on the levels the buffer is not sharded over.
pub(crate) fn owner_of(
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

/// The ranks whose current shard of `buffer` contains `bx`, in rank order.
pub(crate) fn shard_holders(ranks: &[RankBuild], buffer: &str, bx: &Region) -> Vec<usize> {
    (0..ranks.len())
        .filter(|q| {
            ranks[*q]
                .shard
                .get(buffer)
                .is_some_and(|(_, b)| crate::context::contains(b, bx))
        })
        .collect()
}

/// Boxes that ranks hold, indexed for the question "which of them contain this box?" without
/// a scan of every rank's boxes: boxes are grouped by extent, so those of the query's extent
/// (the usual case: every rank holds tiles of one size) are found by their offset; larger
/// boxes of other extents are scanned. An entry is `(rank, position)`, the position being the
/// box's index in that rank's own list of boxes.
#[derive(Default)]
pub(crate) struct BoxIndex {
    /// extent -> offset -> entries.
    by_extent: HashMap<Vec<usize>, HashMap<Vec<usize>, Vec<(usize, usize)>>>,
}

impl BoxIndex {
    /// Records that `rank` holds `bx` as its box number `pos`.
    pub fn insert(&mut self, bx: &Region, rank: usize, pos: usize) {
        self.by_extent
            .entry(bx.extent.clone())
            .or_default()
            .entry(bx.offset.clone())
            .or_default()
            .push((rank, pos));
    }

    /// The entries whose box contains `bx`, in no particular order.
    pub fn containing(&self, bx: &Region) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (extent, by_offset) in &self.by_extent {
            if *extent == bx.extent {
                if let Some(v) = by_offset.get(&bx.offset) {
                    out.extend_from_slice(v);
                }
                continue;
            }
            let larger = extent.len() == bx.extent.len()
                && extent.iter().zip(&bx.extent).all(|(a, b)| a >= b);
            if !larger {
                continue;
            }
            for (offset, v) in by_offset {
                let inside = (0..extent.len()).all(|d| {
                    offset[d] <= bx.offset[d]
                        && bx.offset[d] + bx.extent[d] <= offset[d] + extent[d]
                });
                if inside {
                    out.extend_from_slice(v);
                }
            }
        }
        out
    }
}

/// The ranks that share `coords` except on `levels`, ordered by their index over `levels`
/// (the order of the shards a collective over those levels combines or splits). Made by
/// counting over those levels (the slowest first), so its cost is the group's size, not the
/// number of ranks.
pub fn group_of(mesh: &[usize], coords: &[usize], levels: &[usize]) -> Vec<usize> {
    // A level named twice orders nothing more than its first mention.
    let mut lv: Vec<usize> = Vec::new();
    for l in levels {
        if !lv.contains(l) {
            lv.push(*l);
        }
    }
    let size: usize = lv.iter().map(|l| mesh[*l]).product();
    let mut c = coords.to_vec();
    (0..size)
        .map(|i| {
            let mut rest = i;
            for l in lv.iter().rev() {
                c[*l] = rest % mesh[*l];
                rest /= mesh[*l];
            }
            rank_of(mesh, &c)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::coords_of;

    /// `group_of` as a filter of every rank, sorted by the index over the levels.
    fn group_by_scan(mesh: &[usize], coords: &[usize], levels: &[usize]) -> Vec<usize> {
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

    #[test]
    fn group_of_counts_over_the_levels() {
        let meshes: [&[usize]; 4] = [&[8], &[2, 4], &[3, 1, 2], &[2, 3, 4]];
        for mesh in meshes {
            let n: usize = mesh.iter().product();
            let d = mesh.len();
            let mut level_sets: Vec<Vec<usize>> = vec![vec![]];
            for a in 0..d {
                level_sets.push(vec![a]);
                for b in 0..d {
                    level_sets.push(vec![a, b]);
                    for c in 0..d {
                        level_sets.push(vec![a, b, c]);
                    }
                }
            }
            for r in 0..n {
                let coords = coords_of(mesh, r);
                for levels in &level_sets {
                    assert_eq!(
                        group_of(mesh, &coords, levels),
                        group_by_scan(mesh, &coords, levels),
                        "mesh {mesh:?} rank {r} levels {levels:?}"
                    );
                }
            }
        }
    }
}
