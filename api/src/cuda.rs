//! Running a plan on one GPU on a caller's device memory (the Python package's CUDA tensors):
//! the plan's ranks on that GPU (every rank a virtual rank, or under a process group this
//! process's rank), its global buffers bound to the caller's tensors where they are (pointer,
//! strides; no copy through buffers of the executor's own), each run ordered on the caller's
//! stream (PyTorch's current stream) with no host synchronisation: [`DeviceRunner::launch`]
//! returns once the run is enqueued, [`DeviceRunner::wait`] waits for it and reports faults.

use crate::error::Error;
use mercury_plan::{Plan, Region, Role};
use mercury_runtime::cuda::launcher::{self, IdSource, LaunchEnv, World};
use mercury_runtime::cuda::{
    BoundRegion, CudaExecutor, DeviceMap, ExecOptions, Placement, RuntimeError, TransportChoice,
};
use std::sync::Arc;

/// A plan's executor on one GPU, its global buffers bound to the caller's memory.
pub struct DeviceRunner {
    exec: CudaExecutor,
    /// Per global buffer (plan order): the regions, strides and addresses last bound.
    layouts: Vec<Vec<BoundRegion>>,
    /// Per global buffer: bound with its current layout (a later launch only moves the
    /// addresses).
    bound: Vec<bool>,
}

// SAFETY: the executor's CUDA handles (contexts, streams, events, device allocations) are
// usable from any thread once the context is bound, which every entry point does first; the
// Python package calls a runner from one thread at a time (it holds a lock around it).
unsafe impl Send for DeviceRunner {}

fn device_err(e: RuntimeError) -> Error {
    match e {
        RuntimeError::Io(m) => Error::Input(m),
        e => Error::Device(e.to_string()),
    }
}

/// The NCCL communicator of one process of a process group (the Python package makes one per
/// torch group): process `rank` of `size`, on GPU `ordinal`, joined through a unique id the
/// caller shared (rank 0 makes it with [`GroupComm::unique_id`], the group broadcasts it).
/// Each executor built in the group ([`DeviceRunner::in_group`]) takes a duplicate of it
/// (`ncclCommSplit`), so every process must build its executors in the same order.
pub struct GroupComm {
    world: World,
    ctx: Arc<cudarc::driver::CudaContext>,
    rank: usize,
    size: usize,
}

impl std::fmt::Debug for GroupComm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GroupComm(rank {} of {}, GPU {})",
            self.rank,
            self.size,
            self.ctx.ordinal()
        )
    }
}

/// Checks what [`GroupComm::new`] is given before anything touches NCCL: `rank` inside
/// `size`, the id 256 hex digits ([`launcher::id_to_hex`]). Returns the id.
///
/// # Errors
/// [`Error::Input`] saying which.
pub fn check_group(
    id_hex: &str,
    rank: usize,
    size: usize,
) -> Result<[std::ffi::c_char; 128], Error> {
    if size == 0 || rank >= size {
        return Err(Error::Input(format!(
            "process group: rank {rank} is outside a group of size {size}"
        )));
    }
    launcher::id_from_hex(id_hex).map_err(|e| Error::Input(format!("process group: {e}")))
}

/// Where the NCCL library this process uses was loaded from: `$MERCURY_NCCL_LIB`, else the
/// `libnccl.so*` already loaded in the process (inside PyTorch, torch's), else the dynamic
/// loader's `libnccl.so.2` (`mercury_runtime::cuda::nccl::lib`). Loads it on first use.
///
/// # Errors
/// [`Error::NoDevice`] when no usable NCCL library is found (the message lists every place
/// tried).
pub fn nccl_library() -> Result<String, Error> {
    mercury_runtime::cuda::nccl::lib::load()
        .map(|l| l.origin.clone())
        .map_err(Error::NoDevice)
}

impl GroupComm {
    /// A fresh NCCL unique id (256 hex digits) for the group's rank 0 to share, from the NCCL
    /// this process loaded (inside PyTorch, torch's `libnccl.so.2`).
    ///
    /// # Errors
    /// [`Error::NoDevice`] without a usable NCCL library (saying where it looked);
    /// [`Error::Device`] when NCCL fails.
    pub fn unique_id() -> Result<String, Error> {
        launcher::fresh_unique_id().map_err(|e| match e {
            RuntimeError::Unsupported(m) => Error::NoDevice(m),
            e => Error::Device(e.to_string()),
        })
    }

    /// Joins the group's communicator as process `rank` of `size` on GPU `ordinal` with the
    /// shared id `id_hex`. Blocks until every process of the group has joined (NCCL's
    /// bootstrap): each must call it at the same point.
    ///
    /// # Errors
    /// [`Error::Input`] for a rank outside the group or a malformed id; [`Error::NoDevice`]
    /// without the GPU or NCCL; [`Error::Device`] when NCCL fails.
    pub fn new(id_hex: &str, rank: usize, size: usize, ordinal: usize) -> Result<GroupComm, Error> {
        let id = check_group(id_hex, rank, size)?;
        let ctx = mercury_kernels::cuda::open_context(ordinal)
            .map_err(|e| Error::NoDevice(format!("no usable GPU {ordinal}: {e}")))?;
        let env = LaunchEnv {
            rank,
            world_size: size,
            local_rank: 0,
            id: IdSource::Given(Box::new(id)),
        };
        let world = World::init(&env, size, std::slice::from_ref(&ctx)).map_err(device_err)?;
        Ok(GroupComm {
            world,
            ctx,
            rank,
            size,
        })
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The group's size.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The GPU this process's rank runs on.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }
}

impl DeviceRunner {
    /// Builds the executor of `plan` for one process of `group`: plan rank `group.rank()` on
    /// the group's GPU, the other ranks in the other processes, messages and collectives
    /// between them over NCCL (a duplicate of the group's communicator). Like
    /// [`DeviceRunner::new`], it allocates no global buffer: each is bound to this process's
    /// shard of it before a run. Every process of the group must build it at the same point
    /// (the communicator splits are collective).
    ///
    /// # Errors
    /// [`Error::Input`] when the plan's rank count is not the group's size (one rank per
    /// process); [`Error::Device`] when the executor cannot be built (a collective NCCL
    /// cannot run between processes, a kernel the PTX lacks, NCCL failures).
    pub fn in_group(plan: &Plan, group: &GroupComm, ptx: &str) -> Result<DeviceRunner, Error> {
        let n = plan.num_ranks();
        if n != group.size {
            return Err(Error::Input(format!(
                "the operator has {n} ranks but the process group {} processes: one rank per process",
                group.size
            )));
        }
        let world = group.world.duplicate().map_err(device_err)?;
        let mut ordinals = vec![0; n];
        ordinals[group.rank] = group.ordinal();
        let opts = ExecOptions {
            own_globals: false,
            ..ExecOptions::default()
        };
        let placement = Placement::new(
            DeviceMap::from_ordinals(ordinals),
            TransportChoice::NcclWorld(world),
        );
        let exec =
            CudaExecutor::new_placed(plan.clone(), ptx, opts, placement).map_err(device_err)?;
        Ok(DeviceRunner::around(exec))
    }

    /// Builds the executor of `plan` on GPU `ordinal`, every rank a virtual rank there, with
    /// the device kernels `ptx` (`mercury-opt --emit=ptx --all-device-kernels`, which must hold
    /// the plan's generated tile kernels if it has any). It allocates no global buffer: each is
    /// bound to the caller's memory before a run ([`DeviceRunner::set_layout`]).
    ///
    /// # Errors
    /// [`Error::NoDevice`] without a usable GPU; [`Error::Device`] when the executor cannot be
    /// built (a kernel the PTX lacks, out of memory).
    pub fn new(plan: &Plan, ordinal: usize, ptx: &str) -> Result<DeviceRunner, Error> {
        let ctx = mercury_kernels::cuda::open_context(ordinal)
            .map_err(|e| Error::NoDevice(format!("no usable GPU {ordinal}: {e}")))?;
        let opts = ExecOptions {
            own_globals: false,
            ..ExecOptions::default()
        };
        let exec = CudaExecutor::new(ctx, plan.clone(), ptx, opts).map_err(device_err)?;
        Ok(DeviceRunner::around(exec))
    }

    /// Builds the executor of `plan` over the GPUs `devices` of this process: rank `r` on
    /// `devices[r % devices.len()]` (the global buffers, and so the caller's tensors, on
    /// `devices[0]`), copies between GPUs on the copy engine (peer copies, staged through the
    /// host where peer access is off); an ordinal may repeat, making several device ids on one
    /// GPU (the multi-GPU paths on one GPU, as `mercury-run --alias`). Like
    /// [`DeviceRunner::new`], it allocates no global buffer.
    ///
    /// # Errors
    /// [`Error::Input`] for no device, more devices than ranks, or an ordinal past the
    /// visible GPUs (naming it); [`Error::Device`] when the executor cannot be built.
    pub fn placed(plan: &Plan, devices: &[usize], ptx: &str) -> Result<DeviceRunner, Error> {
        let n = plan.num_ranks();
        if devices.is_empty() || devices.len() > n {
            return Err(Error::Input(format!(
                "devices={devices:?}: give between 1 and {n} GPUs (the operator has {n} ranks; rank r runs on devices[r % len])"
            )));
        }
        let visible =
            mercury_runtime::cuda::visible_gpus().map_err(|e| Error::NoDevice(e.to_string()))?;
        if let Some(d) = devices.iter().find(|d| **d >= visible) {
            return Err(Error::Input(format!(
                "devices={devices:?}: GPU {d} is not visible (this process sees {visible})"
            )));
        }
        let opts = ExecOptions {
            own_globals: false,
            ..ExecOptions::default()
        };
        let map = DeviceMap::round_robin(n, devices.len()).map_err(Error::Input)?;
        let placement = Placement {
            devices: map,
            transport: TransportChoice::Copy,
            physical: Some(devices.to_vec()),
        };
        let exec =
            CudaExecutor::new_placed(plan.clone(), ptx, opts, placement).map_err(device_err)?;
        Ok(DeviceRunner::around(exec))
    }

    /// A runner around an executor built by the caller (`own_globals` off).
    pub fn around(exec: CudaExecutor) -> DeviceRunner {
        let n = exec.plan().buffers.len();
        DeviceRunner {
            exec,
            layouts: vec![Vec::new(); n],
            bound: vec![false; n],
        }
    }

    /// The executor.
    pub fn executor(&self) -> &CudaExecutor {
        &self.exec
    }

    /// Sets the layout of global buffer `buffer`'s memory: the regions of the buffer it holds
    /// (`(offsets, extents, element strides)` each; one region of the whole buffer for a
    /// full tensor, this process's shard under a process group). Later
    /// [`DeviceRunner::launch`]es pass one address per region.
    ///
    /// # Errors
    /// [`Error::Input`] for no such buffer or regions of the wrong rank.
    pub fn set_layout(
        &mut self,
        buffer: usize,
        regions: Vec<(Vec<usize>, Vec<usize>, Vec<usize>)>,
    ) -> Result<(), Error> {
        let b = self
            .exec
            .plan()
            .buffers
            .get(buffer)
            .ok_or_else(|| Error::Input(format!("no buffer #{buffer}")))?;
        let rank = b.shape.len();
        let mut out = Vec::with_capacity(regions.len());
        for (offset, extent, strides) in regions {
            if offset.len() != rank || extent.len() != rank || strides.len() != rank {
                return Err(Error::Input(format!(
                    "buffer '{}' has {rank} dimensions; a region has {}, {} and {} offsets, extents and strides",
                    b.name,
                    offset.len(),
                    extent.len(),
                    strides.len()
                )));
            }
            out.push(BoundRegion {
                region: Region { offset, extent },
                ptr: 0,
                strides,
            });
        }
        self.layouts[buffer] = out;
        self.bound[buffer] = false;
        Ok(())
    }

    /// Sets the document boundaries of the next launches (the plan's `documents` inputs, by
    /// name: prefix sums over the packed tokens, `[0, ..., positions]`), as
    /// [`CudaExecutor::set_documents`] (waits for a launched run first).
    ///
    /// # Errors
    /// [`Error::Input`] for a name the plan does not read, one it reads left out, or
    /// boundaries that do not fit its positions.
    pub fn set_documents(&mut self, docs: &[(String, Vec<usize>)]) -> Result<(), Error> {
        let plan = self.exec.plan();
        for (name, _) in docs {
            if !plan.documents.iter().any(|d| &d.name == name) {
                return Err(Error::Input(format!(
                    "the plan reads no document boundaries named '{name}'"
                )));
            }
        }
        let mut ordered = Vec::with_capacity(plan.documents.len());
        for d in &plan.documents {
            let (_, b) = docs.iter().find(|(n, _)| *n == d.name).ok_or_else(|| {
                Error::Input(format!("document boundaries '{}' not given", d.name))
            })?;
            ordered.push(
                mercury_plan::mask::Boundaries::new(b.clone(), d.positions)
                    .map_err(|e| Error::Input(format!("documents '{}': {e}", d.name)))?,
            );
        }
        self.exec.set_documents(&ordered).map_err(device_err)
    }

    /// Binds every global buffer to `ptrs` (one device address per region of the layouts set,
    /// buffers in plan order) and enqueues a run ordered after the work on the caller's
    /// `stream` (a `CUstream` as an integer, PyTorch's `cuda_stream`), which then waits for the
    /// run: no host synchronisation. Faults of earlier runs the device has reported surface
    /// here; the rest at [`DeviceRunner::wait`].
    ///
    /// # Errors
    /// [`Error::Input`] for a buffer without a layout, a wrong number of addresses, memory the
    /// plan cannot read or write as bound; [`Error::Device`] for device faults.
    ///
    /// # Safety
    /// Each address must be device memory on this runner's GPU holding every element its
    /// region and strides address, in the buffer's dtype (outputs dense and not aliased),
    /// valid until `stream` has passed the run (the caller keeps the tensors alive and frees
    /// them only on that stream or after it).
    pub unsafe fn launch(&mut self, ptrs: &[u64], stream: u64) -> Result<(), Error> {
        let want: usize = self.layouts.iter().map(Vec::len).sum();
        if ptrs.len() != want {
            return Err(Error::Input(format!(
                "{} addresses for {want} bound regions",
                ptrs.len()
            )));
        }
        let mut at = 0;
        for (i, layout) in self.layouts.iter_mut().enumerate() {
            if layout.is_empty() {
                return Err(Error::Input(format!(
                    "buffer '{}' has no layout: set one first",
                    self.exec.plan().buffers[i].name
                )));
            }
            let mine = &ptrs[at..at + layout.len()];
            at += layout.len();
            if self.bound[i] {
                // SAFETY: per this function's contract.
                let moved = unsafe { self.exec.rebind_addresses(i, mine) };
                if moved.map_err(|e| {
                    self.bound[i] = false;
                    device_err(e)
                })? {
                    continue;
                }
            }
            for (r, p) in layout.iter_mut().zip(mine) {
                r.ptr = *p;
            }
            self.bound[i] = false;
            // SAFETY: per this function's contract.
            let bound = unsafe { self.exec.bind_global(i, layout.clone()) };
            bound.map_err(device_err)?;
            self.bound[i] = true;
        }
        self.exec
            .launch(stream as cudarc::driver::sys::CUstream)
            .map_err(device_err)
    }

    /// Waits for the last launched run (polling its progress events: a stall or a device
    /// fault is an error) and returns its device time in milliseconds (its stages, CUDA
    /// events).
    ///
    /// # Errors
    /// [`Error::Device`]: a fault of the run, or no run launched.
    pub fn wait(&mut self) -> Result<f64, Error> {
        self.exec
            .wait()
            .map(|t| t.stages_ms as f64)
            .map_err(device_err)
    }

    /// Host time of the executor's last launch in microseconds (deciding the direct
    /// bindings and enqueueing the run; binding the addresses aside): what a call costs below
    /// the Python package.
    pub fn last_enqueue_us(&self) -> f64 {
        self.exec.last_enqueue_time().as_secs_f64() * 1e6
    }

    /// Index, name and role of every global buffer, in plan order.
    pub fn buffers(&self) -> Vec<(usize, String, Role)> {
        self.exec
            .plan()
            .buffers
            .iter()
            .enumerate()
            .map(|(i, b)| (i, b.name.clone(), b.role))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_checked_before_nccl() {
        let id = "ab".repeat(128);
        assert_eq!(check_group(&id, 1, 2).unwrap()[0] as u8, 0xab);
        let e = check_group(&id, 2, 2).unwrap_err();
        assert!(
            e.message().contains("rank 2 is outside a group of size 2"),
            "{e:?}"
        );
        assert!(check_group(&id, 0, 0).is_err());
        let e = check_group("abc", 0, 2).unwrap_err();
        assert!(e.message().contains("256 hex digits"), "{e:?}");
    }
}
