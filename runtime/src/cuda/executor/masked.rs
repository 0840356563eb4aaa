//! Masked attention blocks (sliding windows, packed documents; `ops::MaskedSplit`): their
//! preparation when the executor is built (the NVRTC attention kernel, the bounds memory, the
//! arrays of cuDNN's variable-sequence path) and the run-time document boundaries
//! ([`CudaExecutor::set_documents`]: the bounds, and the cuDNN calls of each block).

use super::{alloc, AttnBackend, CudaExecutor, DeviceRes, ExecOptions};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::ops::ragged::{self, RaggedSet};
use crate::cuda::ops::{self, AttnVia, ComputeLaunch, MaskedSplit, RunBounds};
use cudarc::driver::CudaContext;
use mercury_kernels::cuda::cudnn::RaggedKey;
use mercury_kernels::cuda::{AttnLaunch, CudnnAttention, DeviceBuffer};
use mercury_plan::mask::Boundaries;
use std::sync::Arc;

/// Prepares one masked block of a rank on `dev`: compiles the NVRTC attention kernel (the
/// patch that computes it, and the fallback of every batch), allocates the block's row bounds
/// and, where cuDNN's variable-sequence path may take it ([`MaskedSplit::ragged_eligible`],
/// a loaded cuDNN, not `--attention nvrtc`), its per-entry arrays (returned: the rank keeps
/// them), and for a mask without documents fills the bounds now.
pub(super) fn prepare_masked(
    dev: &mut DeviceRes,
    launch: &AttnLaunch,
    split: &mut MaskedSplit,
    opts: &ExecOptions,
) -> Result<Vec<DeviceBuffer>> {
    if dev.attention.is_none() {
        dev.attention = Some(super::attention::attention_patch(
            &dev.ctx,
            opts.attention_variant,
        )?);
    }
    let (buf, ptr) = alloc(&dev.stream, MaskedSplit::bounds_bytes(launch.dims.sq))?;
    dev.stream
        .synchronize()
        .map_err(RuntimeError::driver("synchronize bounds allocation"))?;
    split.bounds = ptr;
    let mut bufs = vec![buf];
    if split.ragged_eligible() && dev.cudnn.is_some() && opts.attention != AttnBackend::Nvrtc {
        // Pieces of at least MIN_MEAN_ROWS rows on average (else the NVRTC kernel): at most
        // this many entries per call, bucketed.
        let d = launch.dims;
        let entries = ragged::bucket(d.b * (d.sq / ragged::MIN_MEAN_ROWS).max(1), 1);
        let per_call = RaggedSet::len(entries);
        let (abuf, aptr) = alloc(&dev.stream, 2 * 4 * per_call)?;
        dev.stream
            .synchronize()
            .map_err(RuntimeError::driver("synchronize ragged arrays allocation"))?;
        split.ragged_arrays = Some((aptr, per_call));
        bufs.push(abuf);
    }
    if !split.needs_documents() {
        let RunBounds {
            flat: bounds,
            empty,
            ..
        } = split.for_run(launch, &[]).map_err(|e| {
            RuntimeError::Unsupported(format!(
                "attention {} with {:?}: {}: {e}",
                ops::attention_shape(launch),
                split.mask,
                ops::ATTENTION_REFUSED
            ))
        })?;
        upload(&dev.ctx, ptr, &bounds)?;
        split.empty = Some(empty);
    }
    Ok(bufs)
}

/// This run's cuDNN calls of a masked block (see `ops::ragged`): its rows' pieces, when they
/// are worth a call, the calls' plans built (or found), their arrays uploaded. An empty list
/// (the NVRTC kernel) where the pieces are too small, exceed the arrays, or cuDNN builds no
/// plan; the last case returns the reason too (a warning, once per reason).
fn ragged_calls(
    cudnn: &CudnnAttention,
    ctx: &Arc<CudaContext>,
    launch: &AttnLaunch,
    (base, per_call): (u64, usize),
    rows: &[[i32; 2]],
) -> Result<(Vec<(RaggedKey, u64)>, Option<String>)> {
    let ps = ragged::pieces(rows, launch.params.k_offset, launch.dims.sk);
    if !ragged::worth_it(&ps) {
        return Ok((Vec::new(), None));
    }
    let sets = match ragged::ragged_sets(launch, &ps) {
        Ok(s) => s,
        Err(e) => return Ok((Vec::new(), Some(e))),
    };
    let mut calls = Vec::with_capacity(sets.len());
    for (i, set) in sets.iter().enumerate() {
        if set.host.len() > per_call {
            return Ok((Vec::new(), None));
        }
        if let Err(e) = cudnn.prepare_ragged(&set.key) {
            return Ok((Vec::new(), Some(e.to_string())));
        }
        let at = base + (4 * i * per_call) as u64;
        upload(ctx, at, &set.host)?;
        calls.push((set.key, at));
    }
    Ok((calls, None))
}

/// Copies `bounds` to device address `ptr` of `ctx` (synchronous).
fn upload(ctx: &Arc<CudaContext>, ptr: u64, bounds: &[i32]) -> Result<()> {
    ctx.bind_to_thread()
        .map_err(RuntimeError::driver("bind context"))?;
    // SAFETY: `ptr` is a live allocation of `ctx` of `bounds.len()` INT32 (the split's
    // `bounds_bytes`); no run uses it now (the caller waited); the copy is synchronous.
    unsafe { cudarc::driver::result::memcpy_htod_sync(ptr, bounds) }
        .map_err(RuntimeError::driver("upload mask bounds"))
}

impl CudaExecutor {
    /// Sets the document boundaries of the next runs (the plan's `documents` inputs in order,
    /// checked with [`Boundaries::new`] against each one's positions): fills every masked
    /// block's row bounds for this batch (accumulating blocks the batch leaves empty launch
    /// nothing). Waits for a launched run first. Host cost: one pass over each
    /// block's query rows. A plan whose attention reads documents refuses to run until this
    /// is called.
    ///
    /// # Errors
    /// A count of boundaries other than the plan's, boundaries of other lengths than their
    /// input's positions, query and key boundaries that do not pair up.
    pub fn set_documents(&mut self, docs: &[Boundaries]) -> Result<()> {
        let want = &self.plan.documents;
        if docs.len() != want.len() {
            return Err(RuntimeError::Io(format!(
                "the plan reads {} document boundaries inputs, {} were given",
                want.len(),
                docs.len()
            )));
        }
        for (d, b) in want.iter().zip(docs) {
            Boundaries::new(b.as_slice().to_vec(), d.positions)
                .map_err(|e| RuntimeError::Io(format!("documents @{}: {e}", d.name)))?;
        }
        if self.pending.is_some() {
            self.wait()?;
        }
        for r in self.ranks.iter_mut().filter(|r| r.local) {
            let ctx = self.devs[r.dev].ctx.clone();
            let cudnn = self.devs[r.dev].cudnn.clone();
            // Groups (by index) with a block that merges on its own this run.
            let mut alone = std::collections::HashSet::new();
            for op in r.stages.iter_mut().flatten() {
                let ComputeLaunch::Attention {
                    launch,
                    via: AttnVia::Masked(split),
                } = op
                else {
                    continue;
                };
                if !split.needs_documents() {
                    continue;
                }
                let run = split
                    .for_run(launch, docs)
                    .map_err(|e| RuntimeError::Io(format!("documents: {e}")))?;
                upload(&ctx, split.bounds, &run.flat)?;
                split.empty = Some(run.empty);
                split.ragged.clear();
                if let (Some(arrays), Some(cudnn)) = (split.ragged_arrays, &cudnn) {
                    let (calls, why) = ragged_calls(cudnn, &ctx, launch, arrays, &run.rows)?;
                    split.ragged = calls;
                    if let Some(why) = why {
                        let w = format!(
                            "attention {} with documents: cuDNN's variable-sequence path refused \
                             ({why}); using the NVRTC kernel",
                            ops::attention_shape(launch)
                        );
                        if !self.warnings.contains(&w) {
                            tracing::warn!("{w}");
                            self.warnings.push(w);
                        }
                    }
                }
                if let Some((g, _)) = split.part {
                    if split.ragged.is_empty() && !run.empty {
                        alone.insert(g);
                    }
                }
            }
            // A group defers its merges only when each block writes its part (cuDNN) or has
            // none (sees nothing); otherwise every block merges on its own, as without groups.
            for op in r.stages.iter_mut().flatten() {
                if let ComputeLaunch::Attention {
                    via: AttnVia::Masked(split),
                    ..
                } = op
                {
                    split.deferred = split.part.is_some_and(|(g, _)| !alone.contains(&g));
                }
            }
        }
        Ok(())
    }

    /// The first masked block whose calls wait for the run's documents
    /// ([`CudaExecutor::set_documents`]), as an error.
    pub(super) fn check_documents(&self) -> Result<()> {
        let missing = self.ranks.iter().filter(|r| r.local).any(|r| {
            r.stages.iter().flatten().any(|op| {
                matches!(op, ComputeLaunch::Attention { via: AttnVia::Masked(s), .. } if s.empty.is_none())
            })
        });
        if missing {
            let names: Vec<&str> = self
                .plan
                .documents
                .iter()
                .map(|d| d.name.as_str())
                .collect();
            return Err(RuntimeError::Io(format!(
                "the plan's attention reads document boundaries ({}): give them with \
                 CudaExecutor::set_documents before a run",
                names.join(", ")
            )));
        }
        Ok(())
    }
}
