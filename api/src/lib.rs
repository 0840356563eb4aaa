//! Mercury-rs as a library: one face over the compile path (`mercury-driver`), the search
//! (`mercury-search`) and the executors (`mercury-runtime`), which `mercury-run`,
//! `mercury-tune` and the Python package (`python/`) all use.
//!
//! - [`compile()`]: parse, verify, choose the kernel, apply a schedule ([`compile::Compiled`]);
//! - [`auto`]: `schedule="auto"`, the search's pick (cost model, schedule cache), and the
//!   candidate source of every tuning run ([`auto::operator_source`]);
//! - [`Operator`]: a compiled operator with its plan, schedule and reports;
//! - [`cpu`]: binding full tensors to a plan and running it on the CPU reference executor;
//! - `cuda` (feature `cuda`): running a plan on one GPU on a caller's device memory;
//! - [`ops`]: the distributed operators of the Python package (attention, all-gather GEMM,
//!   GEMM reduce-scatter) written as CommIR for a shape, a dtype and a world size.

pub mod auto;
pub mod compile;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod error;
pub mod operator;
pub mod ops;

pub use compile::{compile, single_device, Compiled};
pub use error::{diag, Error};
pub use operator::{AutoOptions, Operator, ScheduleSpec};
