//! Peer access between the GPUs of a placed executor.

use crate::cuda::error::{check, Result, RuntimeError};
use crate::cuda::placement::PeerMatrix;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Enables peer access between every pair of `ctxs` that `cuDeviceCanAccessPeer` allows, both
/// ways (contexts, and the default memory pools the slots come from); returns the matrix and a
/// warning per pair left to host-staged copies. `cuda::links` measures through it, so that its
/// figures are what the executor's transfers reach.
///
/// # Errors
/// CUDA failures of the queries or of enabling.
pub fn enable_peer_access(all: &[Arc<CudaContext>]) -> Result<(PeerMatrix, Vec<String>)> {
    use cudarc::driver::sys;
    // One context per GPU (device ids may alias a GPU).
    let mut ctxs: Vec<Arc<CudaContext>> = Vec::new();
    for c in all {
        if !ctxs.iter().any(|x| x.ordinal() == c.ordinal()) {
            ctxs.push(c.clone());
        }
    }
    let ctxs = &ctxs[..];
    let ordinals: Vec<usize> = ctxs.iter().map(|c| c.ordinal()).collect();
    let dev_of = |o: usize| {
        ctxs.iter()
            .find(|c| c.ordinal() == o)
            .map(|c| c.cu_device())
    };
    let mut failed: Option<RuntimeError> = None;
    let matrix = PeerMatrix::build(&ordinals, |a, b| {
        let (Some(da), Some(db)) = (dev_of(a), dev_of(b)) else {
            return false;
        };
        let mut can = 0i32;
        // SAFETY: `can` is a valid out-pointer; both handles are devices of live contexts.
        let r = unsafe { sys::cuDeviceCanAccessPeer(&mut can, da, db) };
        if let Err(e) = r.result() {
            failed.get_or_insert(RuntimeError::driver("cuDeviceCanAccessPeer")(e));
            return false;
        }
        can != 0
    });
    if let Some(e) = failed {
        return Err(e);
    }
    for a in ctxs {
        for b in ctxs {
            if a.ordinal() == b.ordinal() || !matrix.can_access(a.ordinal(), b.ordinal()) {
                continue;
            }
            a.bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            // SAFETY: `a` is current; `b`'s context is live. Grants `a` access to `b`'s
            // cuMemAlloc memory; enabling twice answers PEER_ACCESS_ALREADY_ENABLED.
            let r = unsafe { sys::cuCtxEnablePeerAccess(b.cu_ctx(), 0) };
            if r != sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
                check(r, "cuCtxEnablePeerAccess")?;
            }
            // Slots and scratch come from the stream-ordered allocator (the device's default
            // pool), which peer access to the context does not cover.
            let pools = b
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)
                .map_err(RuntimeError::driver("memory pools supported"))?;
            if pools > 0 {
                let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
                // SAFETY: `pool` is a valid out-pointer.
                check(
                    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, b.cu_device()) },
                    "cuDeviceGetDefaultMemPool",
                )?;
                // SAFETY: a zeroed descriptor is a valid starting point (plain C struct);
                // every field that matters is set below.
                let mut desc: sys::CUmemAccessDesc = unsafe { std::mem::zeroed() };
                desc.location.type_ = sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE;
                desc.location.id = a.ordinal() as i32;
                desc.flags = sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
                // SAFETY: `pool` is `b`'s default pool; one descriptor is passed.
                check(
                    unsafe { sys::cuMemPoolSetAccess(pool, &desc, 1) },
                    "cuMemPoolSetAccess",
                )?;
            }
        }
    }
    let warnings = matrix
        .staged_pairs()
        .into_iter()
        .map(|(a, b)| {
            format!(
                "GPU {a} cannot access GPU {b} directly (cuDeviceCanAccessPeer = 0): copies between them are staged through host memory by the driver and will be slow"
            )
        })
        .collect();
    Ok((matrix, warnings))
}
