//! Plan execution backends: the CPU reference executor (always built) and the CUDA backend
//! (feature `cuda`; loads CUDA dynamically, so it builds on machines without CUDA).

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
