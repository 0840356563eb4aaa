//! The simulation study (one-time tables, not product code): the predicted-latency tables of
//! `docs/simulation.md` (`study`, the `mercury-study` binary) and the FIXTURE plans
//! (`fixtures`: hand-written attention and GEMM plans the study cross-checks the lowering
//! against, and the plans of the cost model's closed-form tests in `tests/`). CPU only.
//!
//! The GPU benchmarks and self-checks that `scripts/gpu.sh` runs are in `tools/mercury-bench`.

pub mod fixtures;
pub mod study;
