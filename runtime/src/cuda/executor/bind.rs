//! Binding global buffers to a caller's memory ([`CudaExecutor::bind_global`]): the slot
//! initialisations read the caller's input tensors where they are (any strides) and the output
//! gather writes the caller's output tensors, instead of copies through buffers of the
//! executor's own. Under a launcher each process binds only its ranks' shards.

use super::{BoundRegion, CudaExecutor, GlobalMem, InitLaunch, UseAt};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::layout::StridedRegion;
use crate::cuda::mem::Loc;
use mercury_plan::{Region, Role};

/// The location of `region` of global buffer `g` (number `buffer`) in the memory bound to it,
/// and the index of the bound region holding it.
///
/// # Errors
/// No bound region holds all of `region` (a rank reads or writes a part of the buffer that
/// this process was not given, or that straddles two of its pieces).
pub(super) fn global_loc(g: &GlobalMem, buffer: usize, region: &Region) -> Result<(Loc, usize)> {
    let Some(i) = g.pieces.iter().position(|p| p.contains(region)) else {
        let held: Vec<String> = g.pieces.iter().map(|p| p.region.to_string()).collect();
        return Err(RuntimeError::Io(format!(
            "region {region} of global buffer #{buffer} is not inside the memory bound to it (it holds {})",
            held.join(", ")
        )));
    };
    let p = &g.pieces[i];
    let offset = (0..region.offset.len())
        .map(|d| (region.offset[d] - p.region.offset[d]) * p.strides[d])
        .sum();
    let loc = Loc {
        base: p.ptr,
        dtype: g.dtype,
        reg: StridedRegion::strided(offset, &region.extent, &p.strides),
        dev: None,
    };
    Ok((loc, i))
}

/// Whether the distinct regions `written` cover every element of `piece`: they are pairwise
/// disjoint (identical writes were merged) and their intersections with `piece` add up to it.
/// A partial overlap among them proves nothing (false).
fn covers(written: &[Region], piece: &Region) -> bool {
    for (i, a) in written.iter().enumerate() {
        if written[..i].iter().any(|b| a.overlaps(b)) {
            return false;
        }
    }
    let inter = |a: &Region| -> usize {
        (0..a.offset.len())
            .map(|d| {
                let lo = a.offset[d].max(piece.offset[d]);
                let hi = (a.offset[d] + a.extent[d]).min(piece.offset[d] + piece.extent[d]);
                hi.saturating_sub(lo)
            })
            .product()
    };
    written.iter().map(inter).sum::<usize>() == piece.numel()
}

impl CudaExecutor {
    /// Binds global buffer `buffer` to the caller's memory `pieces` (one region each: the whole
    /// buffer, or under a launcher the shards this process's ranks read and write): later runs
    /// initialise slots from the pieces of an input and gather an output's pieces into them,
    /// with no copy through memory of the executor's own. Binding the same regions and strides
    /// again only moves the addresses (what a second call with tensors of the same layout
    /// costs: no host work beyond that).
    ///
    /// An output's pieces must be dense (each fills one run of memory: row-major strides of its
    /// extents, in any order of the dimensions) and must not overlap; an input's may have any strides (a transposed view, a slice) but none of 0
    /// where the extent exceeds 1.
    ///
    /// # Errors
    /// A piece outside the buffer, strides of another rank or a null address, an output piece
    /// that is not dense, and a region a local rank reads or writes that no piece holds. On an
    /// error the buffer is left unbound (a run refuses it).
    ///
    /// # Safety
    /// Each piece's memory must be device memory of the main device holding every element its
    /// region and strides address, in the buffer's dtype, valid (and, for outputs, written by
    /// nothing else) until the runs that use this binding have finished on the device (the
    /// caller's stream has passed them, see [`CudaExecutor::launch`]).
    pub unsafe fn bind_global(&mut self, buffer: usize, pieces: Vec<BoundRegion>) -> Result<()> {
        let name = self
            .plan
            .buffers
            .get(buffer)
            .map(|b| b.name.clone())
            .ok_or_else(|| RuntimeError::Io(format!("no global buffer #{buffer}")))?;
        let g = &mut self.globals[buffer];
        let same_layout = g.ready
            && g.pieces.len() == pieces.len()
            && g.pieces
                .iter()
                .zip(&pieces)
                .all(|(a, b)| a.region == b.region && a.strides == b.strides);
        if same_layout {
            for (a, b) in g.pieces.iter_mut().zip(&pieces) {
                a.ptr = b.ptr;
            }
            self.resolve_uses(buffer, true)?;
            return Ok(());
        }
        g.ready = false;
        if pieces.is_empty() {
            return Err(RuntimeError::Io(format!(
                "global buffer '{name}': nothing to bind"
            )));
        }
        for p in &pieces {
            let rank = g.shape.len();
            if p.region.offset.len() != rank
                || p.strides.len() != rank
                || !p.region.fits_in(&g.shape)
            {
                return Err(RuntimeError::Io(format!(
                    "global buffer '{name}' {:?}: a bound region {} with {} strides does not fit it",
                    g.shape,
                    p.region,
                    p.strides.len()
                )));
            }
            if p.ptr == 0 {
                return Err(RuntimeError::Io(format!(
                    "global buffer '{name}': a bound region at address 0"
                )));
            }
            if let Some(d) = (0..rank).find(|d| p.region.extent[*d] > 1 && p.strides[*d] == 0) {
                return Err(RuntimeError::Io(format!(
                    "global buffer '{name}': dimension {d} has stride 0 (an expanded tensor); bind dense memory"
                )));
            }
        }
        if g.role == Role::Output {
            for (i, a) in pieces.iter().enumerate() {
                if let Some(b) = pieces[..i].iter().find(|b| a.region.overlaps(&b.region)) {
                    return Err(RuntimeError::Io(format!(
                        "output buffer '{name}': bound regions {} and {} overlap",
                        a.region, b.region
                    )));
                }
            }
        }
        let poison = if g.role == Role::Output {
            let written = self.written(buffer);
            let mut poison = Vec::with_capacity(pieces.len());
            for p in &pieces {
                let covered = covers(&written, &p.region);
                if !covered && !p.is_dense() {
                    return Err(RuntimeError::Io(format!(
                        "output buffer '{name}': the bound region {} has strides {:?} (not one run of memory) and the plan's writes are not proven to cover it",
                        p.region, p.strides
                    )));
                }
                poison.push(!covered);
            }
            poison
        } else {
            Vec::new()
        };
        let g = &mut self.globals[buffer];
        g.pieces = pieces;
        g.poison = poison;
        self.resolve_uses(buffer, false)?;
        self.globals[buffer].ready = true;
        Ok(())
    }

    /// Moves global `buffer`'s bound pieces to the addresses `ptrs` (one per piece, in the
    /// order they were bound), their regions and strides unchanged: what a call with tensors
    /// of the layout bound before costs ([`CudaExecutor::bind_global`] with the same pieces
    /// does the same after comparing them). Returns false, changing nothing, when the buffer
    /// is not bound or holds another number of pieces.
    ///
    /// # Errors
    /// A null address (the buffer is then left unbound).
    ///
    /// # Safety
    /// As [`CudaExecutor::bind_global`], for the memory at the new addresses.
    pub unsafe fn rebind_addresses(&mut self, buffer: usize, ptrs: &[u64]) -> Result<bool> {
        let Some(g) = self.globals.get_mut(buffer) else {
            return Ok(false);
        };
        if !g.ready || g.own.is_some() || g.pieces.len() != ptrs.len() {
            return Ok(false);
        }
        if ptrs.contains(&0) {
            g.ready = false;
            return Err(RuntimeError::Io(format!(
                "global buffer '{}': a bound region at address 0",
                self.plan.buffers[buffer].name
            )));
        }
        for (p, ptr) in g.pieces.iter_mut().zip(ptrs) {
            p.ptr = *ptr;
        }
        self.resolve_uses(buffer, true)?;
        Ok(true)
    }

    /// The distinct regions of global `buffer` the local ranks' output gathers write.
    fn written(&self, buffer: usize) -> Vec<Region> {
        let mut out: Vec<Region> = Vec::new();
        for r in self.ranks.iter().filter(|r| r.local) {
            for u in r.uses.iter().filter(|u| u.buffer == buffer) {
                if matches!(u.at, UseAt::Output(_)) && !out.contains(&u.region) {
                    out.push(u.region.clone());
                }
            }
        }
        out
    }

    /// Points every local use of global `buffer` at its bound memory: only the addresses
    /// (`rebase`: the regions and strides are those the uses were resolved against), or
    /// resolved anew.
    fn resolve_uses(&mut self, buffer: usize, rebase: bool) -> Result<()> {
        let g = &self.globals[buffer];
        for rank in self.ranks.iter_mut().filter(|r| r.local) {
            for u in rank.uses.iter_mut().filter(|u| u.buffer == buffer) {
                let loc = match u.at {
                    UseAt::Init(slot, piece) => match (&mut rank.init[slot], piece) {
                        (InitLaunch::Copy { src, .. }, None) => src,
                        (InitLaunch::Copies(c), Some(i)) => &mut c[i].0,
                        _ => {
                            return Err(RuntimeError::Io(format!(
                                "slot {slot}: its initialisation does not read buffer #{buffer}"
                            )))
                        }
                    },
                    UseAt::Output(i) => &mut rank.outputs[i].1,
                };
                if rebase {
                    loc.base = g.pieces[u.piece].ptr;
                } else {
                    let (l, piece) = global_loc(g, buffer, &u.region)?;
                    *loc = l.on(self.main_dev);
                    u.piece = piece;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::DType;

    fn reg(offset: &[usize], extent: &[usize]) -> Region {
        Region {
            offset: offset.to_vec(),
            extent: extent.to_vec(),
        }
    }

    fn bound(region: Region, ptr: u64, strides: &[usize]) -> BoundRegion {
        BoundRegion {
            region,
            ptr,
            strides: strides.to_vec(),
        }
    }

    #[test]
    fn a_bshd_tensor_read_as_its_bhsd_buffer() {
        // q [b=2, s=4, h=3, d=5] in bshd memory, the buffer [b, h, s, d]: strides (60, 5, 15, 1).
        let g = GlobalMem {
            own: None,
            pieces: vec![bound(reg(&[0; 4], &[2, 3, 4, 5]), 0x1000, &[60, 5, 15, 1])],
            dtype: DType::BF16,
            shape: vec![2, 3, 4, 5],
            role: Role::Input,
            ready: true,
            poison: Vec::new(),
        };
        let (loc, piece) = global_loc(&g, 0, &reg(&[1, 2, 1, 0], &[1, 1, 3, 5])).unwrap();
        assert_eq!(piece, 0);
        assert_eq!(loc.base, 0x1000);
        // Element (1, 2, 1, 0): 60 + 2 * 5 + 15 = 85; rows of 5 every 15 elements.
        assert_eq!(loc.reg.offset, 85);
        assert_eq!(loc.reg.dims, vec![(3, 15), (5, 1)]);
        assert_eq!(loc.reg.numel(), 15);
        let whole = global_loc(&g, 0, &Region::full(&[2, 3, 4, 5])).unwrap().0;
        assert_eq!(whole.reg.dims, vec![(2, 60), (3, 5), (4, 15), (5, 1)]);
    }

    #[test]
    fn a_shard_holds_only_its_region() {
        // Rank 1 of 2 holds sequence rows 4..8 of [1, 2, 8, 4], its tensor dense [1, 2, 4, 4].
        let g = GlobalMem {
            own: None,
            pieces: vec![bound(
                reg(&[0, 0, 4, 0], &[1, 2, 4, 4]),
                0x2000,
                &[32, 16, 4, 1],
            )],
            dtype: DType::F32,
            shape: vec![1, 2, 8, 4],
            role: Role::Input,
            ready: true,
            poison: Vec::new(),
        };
        let (loc, _) = global_loc(&g, 3, &reg(&[0, 1, 6, 0], &[1, 1, 2, 4])).unwrap();
        assert_eq!(loc.reg.offset, 16 + 2 * 4);
        assert_eq!(loc.reg.dims, vec![(8, 1)]);
        let e = global_loc(&g, 3, &reg(&[0, 0, 2, 0], &[1, 2, 4, 4]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not inside the memory bound to it"), "{e}");
        assert!(e.contains("#3"), "{e}");
    }

    #[test]
    fn dense_means_one_run_in_any_dimension_order() {
        let full = |e: &[usize], s: &[usize]| bound(reg(&vec![0; e.len()], e), 1, s);
        assert!(full(&[2, 3, 4], &[12, 4, 1]).is_dense());
        // A transposed dense tensor (bshd memory read as bhsd).
        assert!(full(&[2, 3, 4, 5], &[60, 5, 15, 1]).is_dense());
        // Unit dimensions take any stride.
        assert!(full(&[1, 3, 4], &[999, 4, 1]).is_dense());
        // Half of a sequence dimension: gaps between the rows of each head.
        assert!(!full(&[1, 2, 4, 4], &[64, 32, 4, 1]).is_dense());
        assert!(!full(&[4, 4], &[8, 1]).is_dense());
        assert!(!full(&[2, 4], &[0, 1]).is_dense());
    }

    #[test]
    fn coverage_counts_distinct_disjoint_writes() {
        let piece = reg(&[0, 4], &[2, 4]);
        let halves = [reg(&[0, 4], &[1, 4]), reg(&[1, 4], &[1, 4])];
        assert!(covers(&halves, &piece));
        assert!(!covers(&halves[..1], &piece));
        // Writes outside the piece count only where they meet it.
        let wide = [reg(&[0, 0], &[2, 6]), reg(&[0, 6], &[2, 2])];
        assert!(covers(&wide, &piece));
        // A partial overlap proves nothing.
        let overlap = [reg(&[0, 4], &[2, 3]), reg(&[0, 6], &[2, 2])];
        assert!(!covers(&overlap, &piece));
    }
}
