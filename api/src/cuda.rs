//! Running a plan on one GPU on a caller's device memory (the Python package's CUDA tensors):
//! every rank of the plan as a virtual rank on that GPU (`CudaExecutor::new`), inputs copied
//! on the device from the caller's pointers after the work queued on the caller's stream, the
//! outputs copied back to the caller's pointers and the caller's stream made to wait for them.
//!
//! Today the run itself waits on the host once at its end (the executor's completion poll),
//! and the executor owns its slots and global buffers (its own allocations, not the caller's
//! allocator's): the copies in and out are the price of binding (what `docs/python.md` says).

use crate::error::Error;
use mercury_plan::{Plan, Role};
use mercury_runtime::cuda::{CudaExecutor, ExecOptions, RuntimeError};

/// A plan's executor on one GPU, bound to buffers by name.
pub struct DeviceRunner {
    exec: CudaExecutor,
    /// (name, global buffer index) of the inputs and outputs.
    inputs: Vec<(String, usize, usize)>,
    outputs: Vec<(String, usize, usize)>,
}

// SAFETY: the executor's CUDA handles (contexts, streams, events, device allocations) are
// usable from any thread once the context is bound, which every entry point does first; the
// Python package calls a runner from one thread at a time (it holds a lock around it).
unsafe impl Send for DeviceRunner {}

fn device_err(e: RuntimeError) -> Error {
    Error::Device(e.to_string())
}

impl DeviceRunner {
    /// Builds the executor of `plan` (all its ranks as virtual ranks) on GPU `ordinal`, with
    /// the device kernels `ptx` (`mercury-opt --emit=ptx --all-device-kernels`, which must hold
    /// the plan's generated tile kernels if it has any).
    ///
    /// # Errors
    /// [`Error::NoDevice`] without a usable GPU; [`Error::Device`] when the executor cannot be
    /// built (a kernel the PTX lacks, out of memory).
    pub fn new(plan: &Plan, ordinal: usize, ptx: &str) -> Result<DeviceRunner, Error> {
        let ctx = mercury_kernels::cuda::open_context(ordinal)
            .map_err(|e| Error::NoDevice(format!("no usable GPU {ordinal}: {e}")))?;
        let exec = CudaExecutor::new(ctx, plan.clone(), ptx, ExecOptions::default())
            .map_err(device_err)?;
        let bytes = |i: usize| {
            let b = &plan.buffers[i];
            b.shape.iter().product::<usize>() * b.dtype.size_bytes()
        };
        let of = |role| {
            plan.buffers
                .iter()
                .enumerate()
                .filter(|(_, b)| b.role == role)
                .map(|(i, b)| (b.name.clone(), i, bytes(i)))
                .collect()
        };
        Ok(DeviceRunner {
            inputs: of(Role::Input),
            outputs: of(Role::Output),
            exec,
        })
    }

    /// Runs the plan on `inputs` and writes `outputs` (`(name, device address)`, dense
    /// row-major in the buffers' dtypes, every input and output once), ordered after the work
    /// on the caller's `stream` (a `CUstream` as an integer, torch's `cuda_stream`); the
    /// caller's stream waits for the outputs. Returns the run's device time in milliseconds
    /// (its stages, CUDA events).
    ///
    /// # Safety
    /// Every address must point to device memory of the buffer's size on this runner's GPU,
    /// valid until the caller's stream has passed the outputs' copy.
    pub unsafe fn run(
        &mut self,
        inputs: &[(String, u64)],
        outputs: &[(String, u64)],
        stream: u64,
    ) -> Result<f64, Error> {
        let stream = stream as cudarc::driver::sys::CUstream;
        let find = |list: &[(String, u64)], name: &str, what: &str| {
            list.iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| *p)
                .ok_or_else(|| Error::Input(format!("{what} '{name}' is not bound")))
        };
        for (name, i, bytes) in &self.inputs {
            let src = find(inputs, name, "input")?;
            self.exec
                .copy_input_from_device(*i, src, *bytes, stream)
                .map_err(device_err)?;
        }
        let t = self.exec.run().map_err(device_err)?;
        for (name, i, bytes) in &self.outputs {
            let dst = find(outputs, name, "output")?;
            self.exec
                .copy_output_to_device(*i, dst, *bytes, stream)
                .map_err(device_err)?;
        }
        Ok(t.stages_ms as f64)
    }
}
