//! GPU patches (cuBLASLt GEMM, attention).
