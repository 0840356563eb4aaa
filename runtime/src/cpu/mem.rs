//! The ranks' memory: one f64 vector per slot, read and written through regions, rounded to
//! the slot's dtype where a value is stored under [`Storage::Dtype`].

use super::{round_to, Storage};
use mercury_plan::*;

/// Row-major strides of a shape.
pub(super) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Calls `f(flat index in a tensor of `shape`, position in the region)` for every element of
/// `region`, in row-major order of the region.
pub(super) fn for_region(shape: &[usize], region: &Region, mut f: impl FnMut(usize, usize)) {
    let st = strides(shape);
    let n = region.numel();
    let rank = region.rank();
    let mut idx = vec![0usize; rank];
    for pos in 0..n {
        let flat: usize = (0..rank).map(|d| (region.offset[d] + idx[d]) * st[d]).sum();
        f(flat, pos);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < region.extent[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

pub(super) fn gather(data: &[f64], shape: &[usize], region: &Region) -> Vec<f64> {
    let mut out = vec![0.0; region.numel()];
    for_region(shape, region, |flat, pos| out[pos] = data[flat]);
    out
}

pub(super) fn scatter(data: &mut [f64], shape: &[usize], region: &Region, vals: &[f64]) {
    for_region(shape, region, |flat, pos| data[flat] = vals[pos]);
}

/// Rounds every value to `dtype` under [`Storage::Dtype`].
pub(super) fn store(storage: Storage, dtype: DType, vals: &mut [f64]) {
    if storage == Storage::Dtype && dtype != DType::F64 {
        vals.iter_mut().for_each(|x| *x = round_to(dtype, *x));
    }
}

/// Memory of every rank: one vector per slot.
pub(super) struct Mem {
    pub(super) slots: Vec<Vec<Vec<f64>>>,
    pub(super) storage: Storage,
}

impl Mem {
    pub(super) fn read(&self, plan: &Plan, r: usize, v: &View) -> Vec<f64> {
        gather(
            &self.slots[r][v.slot],
            &plan.ranks[r].slots[v.slot].shape,
            &v.region,
        )
    }
    /// Stores `vals` into `v`, rounded to the slot's dtype under [`Storage::Dtype`].
    pub(super) fn write(&mut self, plan: &Plan, r: usize, v: &View, vals: &[f64]) {
        let slot = &plan.ranks[r].slots[v.slot];
        if self.storage == Storage::Dtype && slot.dtype != DType::F64 {
            let mut rounded = vals.to_vec();
            store(self.storage, slot.dtype, &mut rounded);
            scatter(&mut self.slots[r][v.slot], &slot.shape, &v.region, &rounded);
        } else {
            scatter(&mut self.slots[r][v.slot], &slot.shape, &v.region, vals);
        }
    }
}

/// Splits `vals` of `shape` into `n` equal chunks along `axis` (the plan's collective
/// geometry, `Region::chunk`).
pub(super) fn split(
    vals: &[f64],
    shape: &[usize],
    axis: usize,
    n: usize,
) -> Result<Vec<Vec<f64>>, String> {
    let whole = Region::full(shape);
    (0..n)
        .map(|p| Ok(gather(vals, shape, &whole.chunk(axis, n, p)?)))
        .collect()
}

/// Concatenates chunks of `chunk_shape` along `axis`.
pub(super) fn concat(chunks: &[Vec<f64>], chunk_shape: &[usize], axis: usize) -> Vec<f64> {
    let mut shape = chunk_shape.to_vec();
    shape[axis] *= chunks.len();
    let mut out = vec![0.0; shape.iter().product()];
    let whole = Region::full(&shape);
    for (p, c) in chunks.iter().enumerate() {
        if let Ok(piece) = whole.chunk(axis, chunks.len(), p) {
            scatter(&mut out, &shape, &piece, c);
        }
    }
    out
}
