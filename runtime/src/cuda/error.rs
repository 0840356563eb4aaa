//! Errors of the CUDA executor: every failure of CUDA, cuBLAS, NVRTC, of the plan or of the
//! inputs ends the run with one of these (never a panic).

use cudarc::driver::DriverError;
use mercury_kernels::cuda::KernelError;
use mercury_plan::PlanError;

/// Result alias of the CUDA backend.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A patch (GEMM, attention) or a library failed.
    #[error(transparent)]
    Kernel(#[from] KernelError),
    /// A CUDA driver call of the executor failed.
    #[error("CUDA driver error in {what}: {err}")]
    Driver {
        what: &'static str,
        err: DriverError,
    },
    /// The plan does not verify.
    #[error("invalid plan: {0}")]
    Plan(#[from] PlanError),
    /// The plan verifies but pairs its transfers or collectives inconsistently.
    #[error("plan schedule: {0}")]
    Schedule(String),
    /// The plan uses something this backend does not implement (dtype, view shape, ...).
    #[error("not supported by the CUDA executor: {0}")]
    Unsupported(String),
    /// The device-kernel PTX lacks an entry point or does not load.
    #[error("device kernels: {0}")]
    DeviceKernels(String),
    /// Global inputs or outputs given or asked for wrongly.
    #[error("input/output: {0}")]
    Io(String),
    /// The device did not finish in time (a hang, or a far too small timeout).
    #[error("timed out after {secs:.1} s waiting for {what}")]
    Timeout { what: String, secs: f64 },
    /// A rank stopped making progress or NCCL reported an error (a dead or hung peer, a
    /// device hang); the report names the ranks, the stage and the peers (`cuda::fault`).
    #[error("{0}")]
    Fault(Box<super::fault::FaultReport>),
}

impl RuntimeError {
    /// Builds a closure mapping a driver error to [`RuntimeError::Driver`].
    pub fn driver(what: &'static str) -> impl FnOnce(DriverError) -> RuntimeError {
        move |err| RuntimeError::Driver { what, err }
    }
}

/// Maps a raw `CUresult` to a [`RuntimeError`].
pub fn check(r: cudarc::driver::sys::CUresult, what: &'static str) -> Result<()> {
    r.result().map_err(RuntimeError::driver(what))
}
