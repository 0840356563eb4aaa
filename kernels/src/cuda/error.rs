//! Errors of the GPU patches. Nothing here panics on bad input: every failure of CUDA, cuBLAS,
//! cuBLASLt or NVRTC, and every invalid argument, comes back as a [`KernelError`].

use cudarc::driver::DriverError;

/// Result alias of this module.
pub type Result<T, E = KernelError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum KernelError {
    /// A CUDA shared library could not be loaded (no driver, or not on `LD_LIBRARY_PATH`).
    #[error("CUDA library {lib} could not be loaded ({hint})")]
    LibraryMissing {
        lib: &'static str,
        hint: &'static str,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver error in {what}: {err}")]
    Driver {
        what: &'static str,
        err: DriverError,
    },
    /// A cuBLAS or cuBLASLt call failed.
    #[error("cuBLAS error in {what}: {msg}")]
    Blas { what: &'static str, msg: String },
    /// NVRTC could not compile one of the run-time compiled sources.
    #[error("NVRTC failed to compile {what}: {msg}")]
    Nvrtc { what: &'static str, msg: String },
    /// The device cannot run a kernel (e.g. compute capability below 8.0).
    #[error("unsupported device: {0}")]
    Unsupported(String),
    /// A cuDNN call failed, or no usable cuDNN was found (the message says where it looked).
    #[error("cuDNN: {0}")]
    Cudnn(String),
    /// Arguments that the patch cannot handle (shapes, strides, alignment, dtypes).
    #[error("invalid argument: {0}")]
    Invalid(String),
}

impl KernelError {
    /// Builds a closure mapping a driver error to [`KernelError::Driver`].
    pub fn driver(what: &'static str) -> impl FnOnce(DriverError) -> KernelError {
        move |err| KernelError::Driver { what, err }
    }
}

/// Fails with [`KernelError::Invalid`] unless `cond` holds.
pub(crate) fn ensure(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(KernelError::Invalid(msg()))
    }
}
