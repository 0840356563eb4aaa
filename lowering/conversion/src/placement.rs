//! Where buffers live: the box a rank holds under a sharding, the rank that owns a tile, and
//! the group of ranks a collective over some mesh levels spans.

use crate::context::shape_of;
use mercury_commir::Kernel;
use mercury_plan::{coords_of, rank_of, Region};
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
