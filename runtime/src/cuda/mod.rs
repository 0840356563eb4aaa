//! CUDA plan executor.
