//! Running a plan on one GPU on a caller's device memory (the Python package's CUDA tensors):
//! the plan's ranks on that GPU (every rank a virtual rank, or under a process group this
//! process's rank), its global buffers bound to the caller's tensors where they are (pointer,
//! strides; no copy through buffers of the executor's own), each run ordered on the caller's
//! stream (PyTorch's current stream) with no host synchronisation: [`DeviceRunner::launch`]
//! returns once the run is enqueued, [`DeviceRunner::wait`] waits for it and reports faults.

use crate::error::Error;
use mercury_plan::{Plan, Region, Role};
use mercury_runtime::cuda::{BoundRegion, CudaExecutor, ExecOptions, RuntimeError};

/// A plan's executor on one GPU, its global buffers bound to the caller's memory.
pub struct DeviceRunner {
    exec: CudaExecutor,
    /// Per global buffer (plan order): the regions, strides and addresses last bound.
    layouts: Vec<Vec<BoundRegion>>,
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

impl DeviceRunner {
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

    /// A runner around an executor built by the caller (`own_globals` off).
    pub fn around(exec: CudaExecutor) -> DeviceRunner {
        let n = exec.plan().buffers.len();
        DeviceRunner {
            exec,
            layouts: vec![Vec::new(); n],
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
        Ok(())
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
            for r in layout.iter_mut() {
                r.ptr = ptrs[at];
                at += 1;
            }
            // SAFETY: per this function's contract.
            let bound = unsafe { self.exec.bind_global(i, layout.clone()) };
            bound.map_err(device_err)?;
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
