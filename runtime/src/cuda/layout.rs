//! Pure host logic: where a view's elements live in its row-major slot, how a view is copied
//! (one linear copy, paired 2-D copies, or packed through scratch), and how views are read as
//! the matrices and `[b, h, s, d]` tensors of the patches. No CUDA here; unit-tested on CPU.

use mercury_plan::Region;

/// Row-major element strides of `shape`.
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// `rows` runs of `cols` consecutive elements, run `i` starting at `offset + i * stride`
/// (elements, relative to the slot base).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block2D {
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub stride: usize,
}

impl Block2D {
    pub fn numel(&self) -> usize {
        self.rows * self.cols
    }
}

/// A region of a row-major tensor: base offset plus (extent, stride) dimensions, outermost
/// first, with unit dimensions dropped and mergeable neighbours merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StridedRegion {
    pub offset: usize,
    pub dims: Vec<(usize, usize)>,
    numel: usize,
}

impl StridedRegion {
    /// The region `region` of a row-major tensor of `shape`.
    pub fn new(shape: &[usize], region: &Region) -> Result<Self, String> {
        if region.offset.len() != shape.len() || !region.fits_in(shape) {
            return Err(format!("region {region} outside shape {shape:?}"));
        }
        let strides = row_major_strides(shape);
        let offset = region.offset.iter().zip(&strides).map(|(o, s)| o * s).sum();
        Ok(StridedRegion::strided(offset, &region.extent, &strides))
    }

    /// `extents` elements from element `offset` of memory whose dimensions have the element
    /// `strides` (any order, as a PyTorch tensor's: a transposed view, a slice), outermost
    /// dimension first; unit dimensions are dropped and mergeable neighbours merged. Element
    /// order is row-major over `extents`.
    pub fn strided(offset: usize, extents: &[usize], strides: &[usize]) -> Self {
        let numel = extents.iter().product();
        let mut merged: Vec<(usize, usize)> = Vec::new();
        for (e, s) in extents.iter().zip(strides).rev() {
            if *e == 1 {
                continue;
            }
            if let Some(last) = merged.last_mut() {
                if *s == last.0 * last.1 {
                    last.0 *= e;
                    continue;
                }
            }
            merged.push((*e, *s));
        }
        merged.reverse();
        StridedRegion {
            offset,
            dims: merged,
            numel,
        }
    }

    /// The whole tensor.
    pub fn full(shape: &[usize]) -> Self {
        StridedRegion {
            offset: 0,
            dims: vec![(shape.iter().product(), 1)],
            numel: shape.iter().product(),
        }
    }

    /// `len` consecutive elements from `offset`.
    pub fn linear(offset: usize, len: usize) -> Self {
        StridedRegion {
            offset,
            dims: vec![(len, 1)],
            numel: len,
        }
    }

    pub fn numel(&self) -> usize {
        self.numel
    }

    /// True when the elements form one run (in row-major order).
    pub fn is_contiguous(&self) -> bool {
        self.numel <= 1 || (self.dims.len() == 1 && self.dims[0].1 == 1)
    }

    /// One past the largest element index touched, relative to the slot base.
    pub fn end(&self) -> usize {
        if self.numel == 0 {
            return self.offset;
        }
        self.offset + self.dims.iter().map(|(e, s)| (e - 1) * s).sum::<usize>() + 1
    }

    /// The region as 2-D blocks in row-major element order.
    pub fn blocks(&self) -> Vec<Block2D> {
        if self.numel == 0 {
            return Vec::new();
        }
        if self.dims.is_empty() {
            return vec![Block2D {
                offset: self.offset,
                rows: 1,
                cols: 1,
                stride: 1,
            }];
        }
        let n = self.dims.len();
        let (inner_e, inner_s) = self.dims[n - 1];
        let (rows, cols, stride, outer) = if inner_s == 1 {
            if n >= 2 {
                let (re, rs) = self.dims[n - 2];
                (re, inner_e, rs, &self.dims[..n - 2])
            } else {
                (1, inner_e, inner_e, &self.dims[..0])
            }
        } else {
            (inner_e, 1, inner_s, &self.dims[..n - 1])
        };
        let count: usize = outer.iter().map(|(e, _)| e).product();
        let mut out = Vec::with_capacity(count);
        let mut idx = vec![0usize; outer.len()];
        for _ in 0..count {
            let off = self.offset
                + idx
                    .iter()
                    .zip(outer)
                    .map(|(i, (_, s))| i * s)
                    .sum::<usize>();
            out.push(Block2D {
                offset: off,
                rows,
                cols,
                stride,
            });
            for d in (0..outer.len()).rev() {
                idx[d] += 1;
                if idx[d] < outer[d].0 {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }
}

/// How to copy one region into another of the same element count (row-major order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyPlan {
    /// Nothing to copy.
    Empty,
    /// One run of `len` elements.
    Linear { src: usize, dst: usize, len: usize },
    /// Pairs of 2-D copies of equal geometry.
    Blocks(Vec<(Block2D, Block2D)>),
    /// Pack `src` blocks into a contiguous scratch buffer, then unpack into `dst` blocks.
    Staged {
        src: Vec<Block2D>,
        dst: Vec<Block2D>,
    },
}

/// Blocks of a contiguous run at `base` with the geometry of `like`.
fn contiguous_like(like: &[Block2D], base: usize) -> Vec<Block2D> {
    let mut at = base;
    like.iter()
        .map(|b| {
            let out = Block2D {
                offset: at,
                rows: b.rows,
                cols: b.cols,
                stride: b.cols,
            };
            at += b.numel();
            out
        })
        .collect()
}

/// Plans the copy of `src` into `dst` (equal element counts; shapes may differ).
pub fn plan_copy(src: &StridedRegion, dst: &StridedRegion) -> Result<CopyPlan, String> {
    if src.numel() != dst.numel() {
        return Err(format!(
            "copy of {} elements into {} elements",
            src.numel(),
            dst.numel()
        ));
    }
    if src.numel() == 0 {
        return Ok(CopyPlan::Empty);
    }
    match (src.is_contiguous(), dst.is_contiguous()) {
        (true, true) => Ok(CopyPlan::Linear {
            src: src.offset,
            dst: dst.offset,
            len: src.numel(),
        }),
        (false, true) => {
            let s = src.blocks();
            let d = contiguous_like(&s, dst.offset);
            Ok(CopyPlan::Blocks(s.into_iter().zip(d).collect()))
        }
        (true, false) => {
            let d = dst.blocks();
            let s = contiguous_like(&d, src.offset);
            Ok(CopyPlan::Blocks(s.into_iter().zip(d).collect()))
        }
        (false, false) => {
            let s = src.blocks();
            let d = dst.blocks();
            let paired = s.len() == d.len()
                && s.iter()
                    .zip(&d)
                    .all(|(a, b)| a.rows == b.rows && a.cols == b.cols);
            if paired {
                Ok(CopyPlan::Blocks(s.into_iter().zip(d).collect()))
            } else {
                Ok(CopyPlan::Staged { src: s, dst: d })
            }
        }
    }
}

/// A view read as a row-major matrix: `rows x cols`, row stride `ld`, from element `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Matrix {
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub ld: usize,
}

/// Reads a view as a matrix: leading unit dimensions are dropped; more than two remaining
/// dimensions are accepted when the outer ones merge (uniform row stride). `None` when the
/// view has no such form (it must then be packed).
pub fn as_matrix(shape: &[usize], region: &Region) -> Option<Matrix> {
    if !region.fits_in(shape) {
        return None;
    }
    let strides = row_major_strides(shape);
    let offset: usize = region.offset.iter().zip(&strides).map(|(o, s)| o * s).sum();
    let mut first = 0;
    while region.extent.len() - first > 2 && region.extent[first] == 1 {
        first += 1;
    }
    let ext = &region.extent[first..];
    let st = &strides[first..];
    match ext.len() {
        0 => Some(Matrix {
            offset,
            rows: 1,
            cols: 1,
            ld: 1,
        }),
        1 => Some(Matrix {
            offset,
            rows: 1,
            cols: ext[0],
            ld: ext[0].max(1),
        }),
        n => {
            if st[n - 1] != 1 {
                return None;
            }
            let cols = ext[n - 1];
            // Non-unit outer dims must merge into one row dimension of uniform stride.
            let outer: Vec<(usize, usize)> = (0..n - 1)
                .filter(|d| ext[*d] != 1)
                .map(|d| (ext[d], st[d]))
                .collect();
            if outer.windows(2).any(|w| w[0].1 != w[1].0 * w[1].1) {
                return None;
            }
            Some(Matrix {
                offset,
                rows: outer.iter().map(|(e, _)| e).product(),
                cols,
                ld: outer.last().map(|(_, s)| *s).unwrap_or(cols.max(1)),
            })
        }
    }
}

/// A view read as a tensor of rank `R` (the attention layouts `[b, h, s, d]` and `[b, h, s]`):
/// extents and element strides, leading unit dims dropped or added. `None` for more than `R`
/// non-unit leading dims or a non-unit innermost stride.
pub fn as_rank<const R: usize>(
    shape: &[usize],
    region: &Region,
) -> Option<(usize, [usize; R], [usize; R])> {
    if !region.fits_in(shape) || R == 0 {
        return None;
    }
    let strides = row_major_strides(shape);
    let offset: usize = region.offset.iter().zip(&strides).map(|(o, s)| o * s).sum();
    let mut first = 0;
    while region.extent.len() - first > R {
        if region.extent[first] != 1 {
            return None;
        }
        first += 1;
    }
    let ext = &region.extent[first..];
    let st = &strides[first..];
    if ext.is_empty() || st[ext.len() - 1] != 1 {
        return None;
    }
    let pad = R - ext.len();
    let mut e = [1usize; R];
    let mut s = [0usize; R];
    e[pad..].copy_from_slice(ext);
    s[pad..].copy_from_slice(st);
    Some((offset, e, s))
}

/// Reads a view as the 3-D index space `dims` = `[d0, d1, d2]` of a generated tile kernel
/// (`mercury_plan::tile_kernel`): the element at `(i0, i1, i2)` (row-major order of the view)
/// is at `offset + i0*s0 + i1*s1 + i2*s2` of the slot. Each target dimension must be one
/// (merged) dimension of the view or a factor of one, so that its stride is uniform; a
/// target dimension of 1 gets stride 0. `None` when the view has no such form (it must then
/// be packed) or does not hold `d0*d1*d2` elements.
pub fn as_3d(shape: &[usize], region: &Region, dims: [usize; 3]) -> Option<(usize, [usize; 3])> {
    let sr = StridedRegion::new(shape, region).ok()?;
    if sr.numel() != dims.iter().product::<usize>() {
        return None;
    }
    // Merged (extent, stride) dims, innermost last; consumed from the inside out.
    let mut left: Vec<(usize, usize)> = sr.dims.clone();
    let mut strides = [0usize; 3];
    for k in (0..3).rev() {
        let t = dims[k];
        if t == 1 {
            continue;
        }
        let (e, st) = left.pop()?;
        if e == t {
            strides[k] = st;
        } else if e % t == 0 {
            strides[k] = st;
            left.push((e / t, st * t));
        } else {
            return None;
        }
    }
    if left.iter().any(|(e, _)| *e != 1) {
        return None;
    }
    Some((sr.offset, strides))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(offset: &[usize], extent: &[usize]) -> Region {
        Region {
            offset: offset.to_vec(),
            extent: extent.to_vec(),
        }
    }

    #[test]
    fn regions_as_3d() {
        // A [2, 3, 4] block at (1, 1, 2) of a [4, 5, 8] tensor, as [2, 3, 4]: strides 40, 8, 1.
        let shape = [4, 5, 8];
        let r = reg(&[1, 1, 2], &[2, 3, 4]);
        let (off, st) = as_3d(&shape, &r, [2, 3, 4]).unwrap();
        assert_eq!((off, st), (40 + 8 + 2, [40, 8, 1]));
        // Every element agrees with the naive enumeration.
        let want = naive(&shape, &r);
        let mut e = 0;
        for i0 in 0..2 {
            for i1 in 0..3 {
                for i2 in 0..4 {
                    assert_eq!(off + i0 * st[0] + i1 * st[1] + i2 * st[2], want[e]);
                    e += 1;
                }
            }
        }
        // A contiguous view split into [6, 7, 4]; a row operand [d0, d1] with d2 = 1.
        assert_eq!(
            as_3d(&[168], &reg(&[0], &[168]), [6, 7, 4]),
            Some((0, [28, 4, 1]))
        );
        assert_eq!(
            as_3d(&[6, 7], &reg(&[0, 0], &[6, 7]), [6, 7, 1]),
            Some((0, [7, 1, 0]))
        );
        // Leading batch dims merge into d0 only when their strides are uniform.
        assert_eq!(
            as_3d(&[2, 3, 8], &reg(&[0, 0, 0], &[2, 3, 4]), [2, 3, 4]),
            Some((0, [24, 8, 1]))
        );
        assert_eq!(
            as_3d(&[2, 3, 8], &reg(&[0, 0, 0], &[2, 3, 4]), [1, 6, 4]),
            Some((0, [0, 8, 1]))
        );
        assert_eq!(
            as_3d(&[2, 3, 8], &reg(&[0, 0, 0], &[2, 2, 4]), [1, 4, 4]),
            None
        );
        assert_eq!(
            as_3d(&[2, 3, 8], &reg(&[0, 0, 0], &[2, 3, 4]), [2, 2, 6]),
            None
        );
        assert_eq!(as_3d(&[4], &reg(&[0], &[4]), [1, 1, 5]), None);
    }

    /// Element indices of a region enumerated naively (row-major over the region).
    fn naive(shape: &[usize], r: &Region) -> Vec<usize> {
        let st = row_major_strides(shape);
        let mut out = Vec::new();
        let n = r.numel();
        let mut idx = vec![0; shape.len()];
        for _ in 0..n {
            out.push(
                idx.iter()
                    .zip(&r.offset)
                    .zip(&st)
                    .map(|((i, o), s)| (i + o) * s)
                    .sum(),
            );
            for d in (0..shape.len()).rev() {
                idx[d] += 1;
                if idx[d] < r.extent[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        out
    }

    fn from_blocks(b: &[Block2D]) -> Vec<usize> {
        let mut out = Vec::new();
        for b in b {
            for r in 0..b.rows {
                for c in 0..b.cols {
                    out.push(b.offset + r * b.stride + c);
                }
            }
        }
        out
    }

    #[test]
    fn strides_and_merging() {
        assert_eq!(row_major_strides(&[2, 3, 4]), vec![12, 4, 1]);
        // Full rows of a [B, S, D] tile: contiguous.
        let s = StridedRegion::new(&[2, 8, 4], &reg(&[1, 2, 0], &[1, 3, 4])).unwrap();
        assert!(s.is_contiguous());
        assert_eq!(s.offset, 32 + 8);
        assert_eq!(s.end(), 40 + 12);
        // A column block: 3 rows of 2 with stride 4.
        let s = StridedRegion::new(&[8, 4], &reg(&[1, 1], &[3, 2])).unwrap();
        assert!(!s.is_contiguous());
        assert_eq!(s.dims, vec![(3, 4), (2, 1)]);
        // Sequence sub-range of every head of [B, H, S, D]: (b*h) runs of rows*D.
        let s = StridedRegion::new(&[2, 4, 16, 8], &reg(&[0, 0, 4, 0], &[2, 4, 8, 8])).unwrap();
        // Batch and head merge (512 = 4 * 128).
        assert_eq!(s.dims, vec![(8, 128), (64, 1)]);
    }

    #[test]
    fn blocks_enumerate_region_in_order() {
        let cases: Vec<(Vec<usize>, Region)> = vec![
            (vec![8, 4], reg(&[1, 1], &[3, 2])),
            (vec![2, 4, 16, 8], reg(&[1, 1, 4, 0], &[1, 3, 8, 8])),
            (vec![2, 4, 16, 8], reg(&[0, 1, 4, 2], &[2, 3, 5, 4])),
            (vec![5, 6], reg(&[0, 3], &[5, 1])),
            (vec![3, 1, 7], reg(&[0, 0, 0], &[3, 1, 7])),
            (vec![4], reg(&[2], &[1])),
            (vec![4, 4], reg(&[0, 0], &[0, 4])),
        ];
        for (shape, r) in cases {
            let s = StridedRegion::new(&shape, &r).unwrap();
            assert_eq!(from_blocks(&s.blocks()), naive(&shape, &r), "{shape:?} {r}");
            assert_eq!(s.numel(), r.numel());
        }
        assert!(StridedRegion::new(&[4, 4], &reg(&[3, 0], &[2, 4])).is_err());
    }

    #[test]
    fn copy_plans() {
        let a = StridedRegion::new(&[4, 8], &reg(&[1, 0], &[2, 8])).unwrap();
        let b = StridedRegion::new(&[16], &reg(&[0], &[16])).unwrap();
        assert_eq!(
            plan_copy(&a, &b).unwrap(),
            CopyPlan::Linear {
                src: 8,
                dst: 0,
                len: 16
            }
        );
        // Pack a column block into a contiguous buffer.
        let c = StridedRegion::new(&[4, 8], &reg(&[0, 2], &[4, 4])).unwrap();
        let d = StridedRegion::linear(100, 16);
        match plan_copy(&c, &d).unwrap() {
            CopyPlan::Blocks(p) => {
                assert_eq!(p.len(), 1);
                assert_eq!(
                    p[0].0,
                    Block2D {
                        offset: 2,
                        rows: 4,
                        cols: 4,
                        stride: 8
                    }
                );
                assert_eq!(
                    p[0].1,
                    Block2D {
                        offset: 100,
                        rows: 4,
                        cols: 4,
                        stride: 4
                    }
                );
            }
            other => panic!("{other:?}"),
        }
        // Same geometry in two different slots: paired blocks.
        let e = StridedRegion::new(&[8, 6], &reg(&[2, 1], &[4, 4])).unwrap();
        assert!(matches!(plan_copy(&c, &e).unwrap(), CopyPlan::Blocks(_)));
        // Different geometry, both strided: staged.
        let f = StridedRegion::new(&[2, 16], &reg(&[0, 4], &[2, 8])).unwrap();
        assert!(matches!(
            plan_copy(&c, &f).unwrap(),
            CopyPlan::Staged { .. }
        ));
        assert!(plan_copy(&c, &StridedRegion::linear(0, 3)).is_err());
    }

    #[test]
    fn matrices() {
        // [1, 1, m, k] tile of a [2, 3, 64, 32] slot.
        let m = as_matrix(&[2, 3, 64, 32], &reg(&[1, 2, 16, 0], &[1, 1, 8, 32])).unwrap();
        assert_eq!(
            m,
            Matrix {
                offset: (3 + 2) * 64 * 32 + 16 * 32,
                rows: 8,
                cols: 32,
                ld: 32
            }
        );
        // Column sub-block: ld is the slot row length.
        let m = as_matrix(&[64, 32], &reg(&[0, 8], &[64, 16])).unwrap();
        assert_eq!((m.rows, m.cols, m.ld, m.offset), (64, 16, 32, 8));
        // [2, 8, 32] full: rows merge to 16.
        let m = as_matrix(&[2, 8, 32], &reg(&[0, 0, 0], &[2, 8, 32])).unwrap();
        assert_eq!((m.rows, m.cols, m.ld), (16, 32, 32));
        // [2, 4, 32] out of [2, 8, 32]: outer dims do not merge.
        assert!(as_matrix(&[2, 8, 32], &reg(&[0, 0, 0], &[2, 4, 32])).is_none());
        // [2, 1, 32] out of [2, 8, 32]: rows 2 apart by 256 elements.
        let m = as_matrix(&[2, 8, 32], &reg(&[0, 3, 0], &[2, 1, 32])).unwrap();
        assert_eq!((m.rows, m.cols, m.ld, m.offset), (2, 32, 256, 96));
        // Vector.
        let m = as_matrix(&[32], &reg(&[0], &[32])).unwrap();
        assert_eq!((m.rows, m.cols), (1, 32));
    }

    #[test]
    fn attention_layouts() {
        let (off, e, s) =
            as_rank::<4>(&[2, 8, 1024, 128], &reg(&[1, 0, 256, 0], &[1, 8, 128, 128])).unwrap();
        assert_eq!(off, 8 * 1024 * 128 + 256 * 128);
        assert_eq!(e, [1, 8, 128, 128]);
        assert_eq!(s, [8 * 1024 * 128, 1024 * 128, 128, 1]);
        // 2-D [s, d] slot padded to rank 4.
        let (_, e, s) = as_rank::<4>(&[64, 128], &reg(&[0, 0], &[64, 128])).unwrap();
        assert_eq!(e, [1, 1, 64, 128]);
        assert_eq!(&s[2..], &[128, 1]);
        // lse [b, h, s].
        let (off, e, _) = as_rank::<3>(&[1, 4, 100], &reg(&[0, 1, 10], &[1, 2, 50])).unwrap();
        assert_eq!((off, e), (110, [1, 2, 50]));
        // Rank 5 with a non-unit leading dim cannot be read as rank 4.
        assert!(as_rank::<4>(&[2, 1, 2, 4, 8], &reg(&[0; 5], &[2, 1, 2, 4, 8])).is_none());
        // Strip a unit leading dim of rank 5.
        assert!(as_rank::<4>(&[1, 2, 2, 4, 8], &reg(&[0; 5], &[1, 2, 2, 4, 8])).is_some());
    }
}
