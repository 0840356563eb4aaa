//! GPU patches (feature `cuda`): the cuBLASLt GEMM patch (plus a plain cuBLAS baseline), the
//! NVRTC-compiled attention forward patch, and helper kernels for checks and benchmarks.
//!
//! Everything loads CUDA dynamically (cudarc `dynamic-loading`), so this builds on machines
//! without CUDA. Before touching cudarc, call [`probe`] (or rely on the constructors here, which
//! do): a missing library is reported as [`KernelError::LibraryMissing`] instead of cudarc's
//! panic.
//!
//! Memory is passed as raw device pointers (`u64`, `CUdeviceptr`) with explicit element strides:
//! the callers (the plan executor) own allocations and stream ordering.

pub mod attention;
pub mod check;
pub mod error;
pub mod gemm;
pub mod nvrtc;

pub use attention::{AttentionPatch, AttnLaunch, Strided3, ATTENTION_SOURCE};
pub use check::CheckKernels;
pub use error::{KernelError, Result};
pub use gemm::{CublasDirect, ElemType, GemmPatch, GemmSpec, GemmWorkspace};
pub use nvrtc::{probe, Library};
