//! Masked attention blocks (sliding windows, packed documents; `ops::MaskedSplit`): their
//! preparation when the executor is built (the NVRTC attention kernel, the bounds memory) and
//! the run-time document boundaries ([`CudaExecutor::set_documents`]).

use super::{alloc, CudaExecutor, DeviceRes, ExecOptions};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::ops::{self, AttnVia, ComputeLaunch, MaskedSplit};
use cudarc::driver::CudaContext;
use mercury_kernels::cuda::{AttnLaunch, DeviceBuffer};
use mercury_plan::mask::Boundaries;
use std::sync::Arc;

/// Prepares one masked block of a rank on `dev`: compiles the NVRTC attention kernel (the
/// patch that computes it), allocates the block's row bounds (returned: the rank keeps them),
/// and for a mask without documents fills them now.
pub(super) fn prepare_masked(
    dev: &mut DeviceRes,
    launch: &AttnLaunch,
    split: &mut MaskedSplit,
    opts: &ExecOptions,
) -> Result<DeviceBuffer> {
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
    if !split.needs_documents() {
        let (bounds, empty) = split.for_run(launch, &[]).map_err(|e| {
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
    Ok(buf)
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
                let (bounds, empty) = split
                    .for_run(launch, docs)
                    .map_err(|e| RuntimeError::Io(format!("documents: {e}")))?;
                upload(&ctx, split.bounds, &bounds)?;
                split.empty = Some(empty);
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
