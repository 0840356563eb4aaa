//! CUDA backend (feature `cuda`): [`CudaExecutor`] runs a `mercury_plan::Plan` with N
//! virtual ranks on one GPU (each rank its own slots, compute stream and transfer stream;
//! stages ordered by events, a full barrier or point-to-point waits ([`StageSync`]), never by
//! the host; transfers through a swappable [`Transport`]).
//!
//! Module map: `layout` and `schedule` are pure host logic (unit-tested without a GPU);
//! `mem` holds addresses, scratch and the copy engine; `ops` resolves and launches compute
//! ops; `transport` moves messages and collectives; `device_kernels` loads the compiler's
//! PTX; `ring` builds the RingAttention benchmark plan; `bench` holds the GPU benchmarks.

pub mod bench;
pub mod device_kernels;
pub mod error;
pub mod executor;
pub mod layout;
pub mod mem;
pub mod ops;
pub mod ring;
pub mod schedule;
pub mod transport;

pub use device_kernels::DeviceKernels;
pub use error::{Result, RuntimeError};
pub use executor::{CudaExecutor, ExecOptions, HostData, RunTiming};
pub use schedule::StageSync;
pub use transport::{Transport, VirtualTransport};
