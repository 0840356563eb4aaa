//! Masked attention blocks (sliding windows, packed documents; `ops::MaskedSplit`): their
//! preparation when the executor is built (the cuDNN row-bounds plan, the bounds memory, the
//! mask helper kernel) and the run-time document boundaries ([`CudaExecutor::set_documents`]).

use super::{alloc, CudaExecutor, DeviceRes, ExecOptions};
use crate::cuda::error::{Result, RuntimeError};
use crate::cuda::ops::{self, AttnVia, ComputeLaunch, MaskedSplit};
use cudarc::driver::CudaContext;
use mercury_kernels::cuda::{AttnLaunch, DeviceBuffer, MaskKernels};
use mercury_plan::mask::Boundaries;
use std::sync::Arc;

/// The mask helper kernel of `ctx`, compiled once per process and context.
fn mask_kernels(ctx: &Arc<CudaContext>) -> Result<Arc<MaskKernels>> {
    type Cache = Vec<(usize, Arc<MaskKernels>)>;
    static CACHE: std::sync::Mutex<Cache> = std::sync::Mutex::new(Vec::new());
    let key = ctx.cu_ctx() as usize;
    let mut cache = CACHE
        .lock()
        .map_err(|_| RuntimeError::Unsupported("mask kernel cache poisoned".into()))?;
    if let Some((_, k)) = cache.iter().find(|(c, _)| *c == key) {
        return Ok(k.clone());
    }
    let k = Arc::new(MaskKernels::new(ctx)?);
    cache.push((key, k.clone()));
    Ok(k)
}

/// Prepares one masked block of a rank on `dev`: checks that the loaded cuDNN builds the
/// row-bounds plan (else the block is refused, naming the shape and cuDNN's reason: no other
/// patch computes it), allocates the block's bounds (returned: the rank keeps them), compiles
/// the mask kernel, and for a mask without documents fills the bounds and the calls now.
pub(super) fn prepare_masked(
    dev: &mut DeviceRes,
    launch: &AttnLaunch,
    split: &mut MaskedSplit,
    opts: &ExecOptions,
) -> Result<DeviceBuffer> {
    let refuse = |why: String| {
        RuntimeError::Unsupported(format!(
            "attention {} with {:?}: {}: {why}",
            ops::attention_shape(launch),
            split.mask,
            ops::ATTENTION_REFUSED
        ))
    };
    split.chunk = (opts.mask_chunk.max(4) / 4) * 4;
    let cudnn = dev.cudnn.clone().ok_or_else(|| {
        refuse(match opts.attention {
            super::AttnBackend::Nvrtc => {
                "a sliding window or documents need the cuDNN patch (--attention nvrtc asked \
                 for the NVRTC kernel, which computes causal only)"
                    .into()
            }
            _ => format!(
                "a sliding window or documents need the cuDNN patch, which did not load ({})",
                super::attention::cudnn_patch(&dev.ctx)
                    .err()
                    .unwrap_or_else(|| "not loaded".into())
            ),
        })
    })?;
    cudnn.support(&split.probe(launch)).map_err(refuse)?;
    if dev.masks.is_none() {
        dev.masks = Some(mask_kernels(&dev.ctx)?);
    }
    let (buf, ptr) = alloc(&dev.stream, split.bounds_bytes())?;
    dev.stream
        .synchronize()
        .map_err(RuntimeError::driver("synchronize bounds allocation"))?;
    split.bounds = ptr;
    if !split.needs_documents() {
        let (bounds, pieces) = split.for_run(launch, &[]).map_err(refuse)?;
        upload(&dev.ctx, ptr, &bounds)?;
        split.pieces = Some(pieces);
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
    /// block's row bounds and decides its cuDNN calls for this batch (blocks the batch leaves
    /// empty launch none). Waits for a launched run first. Host cost: one pass over each
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
                let (bounds, pieces) = split
                    .for_run(launch, docs)
                    .map_err(|e| RuntimeError::Io(format!("documents: {e}")))?;
                upload(&ctx, split.bounds, &bounds)?;
                split.pieces = Some(pieces);
            }
        }
        Ok(())
    }

    /// The first masked block whose calls wait for the run's documents
    /// ([`CudaExecutor::set_documents`]), as an error.
    pub(super) fn check_documents(&self) -> Result<()> {
        let missing = self.ranks.iter().filter(|r| r.local).any(|r| {
            r.stages.iter().flatten().any(|op| {
                matches!(op, ComputeLaunch::Attention { via: AttnVia::Masked(s), .. } if s.pieces.is_none())
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
