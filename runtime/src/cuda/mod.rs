//! CUDA backend (feature `cuda`): [`CudaExecutor`] runs a `mercury_plan::Plan` with N
//! ranks, as virtual ranks on one GPU or placed on several GPUs (each rank its own slots,
//! compute stream and transfer stream on its device; stages ordered by events, a full barrier
//! or point-to-point waits ([`StageSync`]), never by the host; transfers through a swappable
//! [`Transport`]: copies and peer copies, or NCCL).
//!
//! Module map: `layout`, `schedule` and `placement` are pure host logic (unit-tested without
//! a GPU); `mem` holds addresses, scratch and the copy engine (peer copies included); `ops`
//! resolves and launches compute ops; `transport` moves messages and collectives by copies;
//! `nccl` by NCCL; `launcher` joins one-process-per-GPU worlds; `device_kernels` loads the
//! compiler's PTX; `ring` builds the hand-written RingAttention plan the unit tests and the
//! benchmarks use. The GPU benchmarks, multi-device self-checks and link measurements are in
//! `tools/mercury-bench`.

pub mod device_kernels;
pub mod error;
pub mod executor;
pub mod launcher;
pub mod layout;
pub mod mem;
pub mod nccl;
pub mod ops;
pub mod placement;
pub mod ring;
pub mod schedule;
pub mod transport;

pub use device_kernels::DeviceKernels;
pub use error::{Result, RuntimeError};
pub use executor::{
    AttnBackend, CudaExecutor, ExecOptions, HostData, Placement, RunTiming, TransportChoice,
};
pub use placement::DeviceMap;
pub use schedule::StageSync;
pub use transport::{CopyTransport, Transport, VirtualTransport};

/// Number of GPUs the driver shows this process (after probing that the driver loads).
pub fn visible_gpus() -> Result<usize> {
    mercury_kernels::cuda::probe(mercury_kernels::cuda::Library::Driver)?;
    cudarc::driver::CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .map_err(RuntimeError::driver("cuDeviceGetCount"))
}
