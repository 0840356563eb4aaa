//! Local kernels ("patches"): f64 CPU references, and GPU implementations behind `cuda`.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
