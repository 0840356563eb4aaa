//! Plan execution backends: the CPU reference executor (always built) and the CUDA backend
//! (feature `cuda`; loads CUDA dynamically, so it builds on machines without CUDA).

// Bookkeeping maps keyed by (buffer, tile) read clearer spelled out than behind aliases.
#![allow(clippy::type_complexity)]

pub mod check;
pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod tile_ref;
