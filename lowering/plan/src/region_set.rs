//! A set of boxes that says which of its members share an element with a given box, without
//! comparing that box with every member: what the plan verifier's hazard checks and the
//! lowering's output delivery ask once per transfer, where a stage can hold a transfer per
//! rank (a replicated output delivered to every rank), so that a scan of all members would
//! make them quadratic per rank.

use crate::Region;
use std::collections::HashMap;

/// Boxes added one by one, each known by its position (0 for the first added, 1 for the
/// next, ...). Members are grouped by extent; inside a group a box is filed under the grid
/// cell of its offset (offset / extent, per dimension), so the members that can overlap a
/// query box lie in the few cells its neighbourhood covers. A query that would visit more
/// cells than its group has members scans the group instead, so no query costs more than a
/// scan of every member. Empty boxes take a position but overlap nothing.
#[derive(Debug, Clone, Default)]
pub struct RegionSet {
    /// extent -> cell -> (position, offset) of the members in that cell.
    groups: HashMap<Vec<usize>, Group>,
    /// Number of boxes added.
    len: usize,
}

#[derive(Debug, Clone, Default)]
struct Group {
    cells: HashMap<Vec<usize>, Vec<(usize, Vec<usize>)>>,
    members: usize,
}

impl RegionSet {
    /// An empty set.
    pub fn new() -> RegionSet {
        RegionSet::default()
    }

    /// Number of boxes added (empty ones included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no box was added.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `bx`; returns its position.
    pub fn insert(&mut self, bx: &Region) -> usize {
        let pos = self.len;
        self.len += 1;
        if bx.numel() > 0 {
            let cell = bx
                .offset
                .iter()
                .zip(&bx.extent)
                .map(|(o, e)| o / e)
                .collect();
            let g = self.groups.entry(bx.extent.clone()).or_default();
            g.cells
                .entry(cell)
                .or_default()
                .push((pos, bx.offset.clone()));
            g.members += 1;
        }
        pos
    }

    /// The positions of the members that share an element with `q` ([`Region::overlaps`]),
    /// in increasing order.
    pub fn overlapping(&self, q: &Region) -> Vec<usize> {
        let mut out = Vec::new();
        if q.numel() == 0 {
            return out;
        }
        for (extent, g) in &self.groups {
            if extent.len() != q.rank() {
                continue;
            }
            let hit = |offset: &[usize]| {
                (0..extent.len()).all(|d| {
                    offset[d] < q.offset[d] + q.extent[d] && q.offset[d] < offset[d] + extent[d]
                })
            };
            // A member overlapping q along d starts in [q.offset + 1 - extent, q.end - 1].
            let range: Vec<(usize, usize)> = (0..extent.len())
                .map(|d| {
                    let lo = (q.offset[d] + 1).saturating_sub(extent[d]);
                    let hi = q.offset[d] + q.extent[d] - 1;
                    (lo / extent[d], hi / extent[d])
                })
                .collect();
            let cells = range
                .iter()
                .try_fold(1usize, |n, (lo, hi)| n.checked_mul(hi - lo + 1));
            if cells.is_none_or(|c| c > g.members) {
                for members in g.cells.values() {
                    out.extend(members.iter().filter(|(_, o)| hit(o)).map(|(p, _)| *p));
                }
                continue;
            }
            let mut cell: Vec<usize> = range.iter().map(|(lo, _)| *lo).collect();
            'cells: loop {
                if let Some(members) = g.cells.get(&cell) {
                    out.extend(members.iter().filter(|(_, o)| hit(o)).map(|(p, _)| *p));
                }
                // The next cell of the range, the last dimension fastest.
                for d in (0..cell.len()).rev() {
                    if cell[d] < range[d].1 {
                        cell[d] += 1;
                        continue 'cells;
                    }
                    cell[d] = range[d].0;
                }
                break;
            }
        }
        out.sort_unstable();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(offset: &[usize], extent: &[usize]) -> Region {
        Region {
            offset: offset.to_vec(),
            extent: extent.to_vec(),
        }
    }

    /// The set answers as a scan of every member would, for boxes of mixed sizes and
    /// alignments.
    #[test]
    fn agrees_with_a_scan() {
        let mut boxes = Vec::new();
        for i in 0..6 {
            for j in 0..5 {
                boxes.push(r(&[i * 3, j * 2], &[3, 2]));
                boxes.push(r(&[i * 2 + 1, j], &[1 + i % 3, 1 + j % 2]));
            }
        }
        boxes.push(r(&[0, 0], &[20, 20]));
        boxes.push(r(&[4, 4], &[0, 3]));
        boxes.push(r(&[2], &[5]));
        let mut set = RegionSet::new();
        for (i, b) in boxes.iter().enumerate() {
            assert_eq!(set.insert(b), i);
        }
        assert_eq!(set.len(), boxes.len());
        let mut queries = boxes.clone();
        queries.push(r(&[100, 100], &[1, 1]));
        queries.push(r(&[5, 0], &[1, 40]));
        queries.push(r(&[2], &[2]));
        for q in &queries {
            let scan: Vec<usize> = (0..boxes.len()).filter(|i| boxes[*i].overlaps(q)).collect();
            assert_eq!(set.overlapping(q), scan, "query {q}");
        }
    }
}
