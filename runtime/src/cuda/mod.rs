//! CUDA backend (feature `cuda`): [`CudaExecutor`] runs a `mercury_plan::Plan` with N
//! ranks, as virtual ranks on one GPU or placed on several GPUs (each rank its own slots,
//! compute stream and transfer stream on its device; stages ordered by events, a full barrier
//! or point-to-point waits ([`StageSync`]), never by the host; transfers through a swappable
//! [`Transport`]: copies and peer copies, or NCCL).
//!
//! Module map: `layout`, `schedule` and `placement` are pure host logic (unit-tested without
//! a GPU); `mem` holds addresses, scratch and the copy engine (peer copies included); `ops`
//! resolves and launches compute ops; `transport` moves messages and collectives by copies;
//! `nccl` by NCCL; `launcher` joins one-process-per-GPU worlds; `fault` holds the progress
//! deadlines, the watchdog and fault injection; `device_kernels` loads the
//! compiler's PTX; `ring` builds the RingAttention benchmark plan; `bench` holds the GPU
//! benchmarks; `mgpu` the multi-device self-checks and `links` the link measurements.

pub mod bench;
pub mod device_kernels;
pub mod error;
pub mod executor;
pub mod fault;
pub mod launcher;
pub mod layout;
pub mod links;
pub mod mem;
pub mod mgpu;
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
