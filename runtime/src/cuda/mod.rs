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
//! deadlines, the watchdog and fault injection; `device_kernels` loads the compiler's PTX. The
//! GPU benchmarks (with their hand-written RingAttention plan), the multi-device self-checks
//! and the link measurements are in `tools/mercury-bench`.

pub mod device_kernels;
pub mod error;
pub mod executor;
pub mod fault;
pub mod launcher;
pub mod layout;
pub mod mem;
pub mod nccl;
pub mod ops;
pub mod placement;
pub mod schedule;
pub mod transport;

pub use device_kernels::DeviceKernels;
pub use error::{Result, RuntimeError};
pub use executor::{
    AttnBackend, BoundRegion, CudaExecutor, ExecOptions, HostBuffer, HostData, Placement,
    RunTiming, TransportChoice,
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

/// Plans for the unit tests, compiled by the compiler (`mercury_driver`).
#[cfg(test)]
pub(crate) mod test_plans {
    /// RingAttention over `ranks` ranks (queries sharded by sequence, the key/value shards
    /// shifted around the ring), compiled from a CommIR attention operator with
    /// `examples/schedules/ring_attention.sched`'s primitives: q `[b, hq, seq, d]`, k/v
    /// `[b, hk, seq, d]` (bf16), o f32.
    pub fn ring_attention(
        ranks: usize,
        (b, hq, hk): (usize, usize, usize),
        seq: usize,
        d: usize,
        causal: bool,
    ) -> mercury_plan::Plan {
        let g = hq / hk;
        let text = format!(
            "commir.mesh @mesh shape [{ranks}]
commir.kernel @attention on @mesh {{
  commir.axis @b = {b} spatial
  commir.axis @hk = {hk} spatial
  commir.axis @g = {g} spatial
  commir.axis @i = {seq} spatial
  commir.axis @j = {seq} managed
  commir.buffer @Q : [@b, @hk * @g, @i, {d}] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @hk, @j, {d}] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @hk, @j, {d}] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @hk * @g, @i, {d}] f32 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @hk, @g, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @hk, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @hk, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch \"attention\" (%q, %k, %v) {{causal = {causal}}} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @hk, @g, @i] : !commir.tile<f32>, !commir.tile<f32>
}}
"
        );
        let script = format!(
            "tile{{axis=i factor={ranks} outer=i0 inner=i_t}}
parallelize{{axis=i0 level=0}}
tile{{axis=j factor={ranks} outer=j0 inner=j_t}}
shift{{axis=j0 by=i0}}
shard{{buffer=K axis=j0}}
shard{{buffer=V axis=j0}}
"
        );
        mercury_driver::Compiler::new()
            .compile(
                "ring.mlir",
                &text,
                &mercury_driver::Schedule::script(&script),
            )
            .unwrap_or_else(|d| panic!("{}", d.render()))
    }
}
