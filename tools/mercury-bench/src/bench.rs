//! GPU benchmarks with numerical checks (used by the `mercury-gpu-bench` binary), one section
//! per file under `bench/`, registered in [`SECTIONS`]:
//!
//! * P0 (`executor.rs`, plans in `selfcheck.rs`): executor self-checks: small plans exercising
//!   every collective, strided views, copies, casts and a GEMM through the plan, compared with
//!   host f64 results.
//! * P1 (`gemm.rs`): the GEMM patch (cuBLASLt) against `cublasGemmEx` at 8192^3 bf16.
//! * P2 (`attention.rs`): the NVRTC attention patch at B1 H32 S32K D128 (causal and not), GQA
//!   32q/8kv S32K and B16 H32 S4K, plus correctness-only odd shapes (ragged sizes, tile views,
//!   fully masked rows).
//! * P2c (`cudnn.rs`): the cuDNN attention patch alone: benchmark shapes beside torch's cuDNN,
//!   and check-only shapes (every head dim, d_v != d_qk, f16, shifted diagonals, views).
//! * P2b (`cudnn_bwd.rs`): the cuDNN attention backward patch.
//! * P3 (`ring_attention.rs`): RingAttention on 8 virtual ranks (the `ring` plan) against the
//!   single-device patch.
//!
//! Every check draws fresh random inputs (seeded from the clock), poisons outputs with NaN,
//! counts non-finite values over the whole output, compares sampled rows/entries with an f32
//! GPU reference (‖out − ref‖ / ‖ref‖) and spot-checks a few against `kernels::cpu` in f64.
//! Timing: CUDA events, warm-up, median of the repetitions.

mod attention;
mod attn_bwd_ref;
pub mod cudnn;
pub mod cudnn_bwd;
mod executor;
mod gemm;
mod rates;
mod ring_attention;
mod selfcheck;
mod standin;
#[cfg(test)]
mod tests;

pub use rates::RateGrid;
pub(crate) use selfcheck::{buffer, fullv, slot, view};
pub use selfcheck::{
    selfcheck_all_to_all, selfcheck_allgather, selfcheck_allreduce, selfcheck_allreduce_lse,
    selfcheck_attention_masked_rows, selfcheck_broadcast, selfcheck_gemm,
    selfcheck_gemm_accumulate, selfcheck_gemm_gelu, selfcheck_reduce, selfcheck_reduce_scatter,
    selfcheck_ring, selfcheck_sendrecv, Expectation, SelfCheck,
};
pub use standin::STANDIN_DEVICE_KERNELS_CU;

use crate::ring::{ring_attention_plan, RingSpec, BUF_K, BUF_LSE, BUF_O, BUF_Q, BUF_V};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
use mercury_kernels::cpu::{self, AttnDims, AttnParams};
use mercury_kernels::cuda::check::{bf16_to_f64, compare, dtoh, ErrStats};
use mercury_kernels::cuda::{
    AttentionPatch, AttnLaunch, AttnVariant, CheckKernels, CublasDirect, CudnnAttention, ElemType,
    GemmPatch, GemmSpec, GemmWorkspace, Strided3, Tensor4,
};
use mercury_plan::tile::UnaryFn;
use mercury_plan::{
    Collective, CombineKind, CommOp, ComputeOp, DType, GlobalBuffer, OutputPiece, PatchKind, Plan,
    RankProgram, Region, Role, Slot, SlotInit, Stage, View,
};
use mercury_runtime::cuda::error::{Result, RuntimeError};
use mercury_runtime::cuda::executor::{AttnBackend, CudaExecutor, ExecOptions};
use mercury_runtime::cuda::schedule::StageSync;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;

/// What a section takes from the command line beside [`BenchOptions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionArgs {
    /// M = N = K of the P1 GEMM.
    pub gemm_size: usize,
    /// Virtual ranks of the P3 ring.
    pub ring_ranks: usize,
    /// Tokens of the P3 ring.
    pub ring_seq: usize,
}

/// One section of `mercury-gpu-bench`: the name `--only` takes (any case), a line for
/// `--help`, and what it runs (its rows go into [`Bench::rows`]; an `Err` is recorded as a
/// failed row named after the section).
pub struct Section {
    pub name: &'static str,
    pub about: &'static str,
    pub run: fn(&mut Bench, &SectionArgs) -> Result<()>,
}

impl Section {
    const fn new(
        name: &'static str,
        about: &'static str,
        run: fn(&mut Bench, &SectionArgs) -> Result<()>,
    ) -> Section {
        Section { name, about, run }
    }
}

/// Every section of `mercury-gpu-bench`, in the order they run. **A new bench registers
/// here**: a file under `bench/` with an `impl Bench` method, and one line below.
#[rustfmt::skip]
pub const SECTIONS: &[Section] = &[
    Section::new("P0", "Executor self-checks", |b, _| b.p0_executor()),
    Section::new("P1", "The GEMM patch against cuBLAS", |b, a| b.p1_gemm(a.gemm_size)),
    Section::new("P2", "The NVRTC attention patch", |b, _| b.p2_attention()),
    Section::new("P2c", "The cuDNN attention patch", |b, _| b.p2_cudnn()),
    Section::new("P2b", "The cuDNN attention backward patch", |b, _| b.p2_cudnn_bwd()),
    Section::new("P3", "RingAttention on virtual ranks against the single-device patch",
                 |b, a| b.p3_ring(a.ring_ranks, a.ring_seq)),
];

/// Options of a benchmark session.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub warmup: usize,
    pub reps: usize,
    /// How the GPU is loaded before a case's timed calls ([`Regime`]).
    pub regime: Regime,
    /// P2c: only the timed cases with these ids (no check-only shapes, no ring steps); all
    /// when empty.
    pub p2c_cases: Vec<String>,
    /// Run the numerical checks (on by default).
    pub check: bool,
    /// Base seed of the random inputs (fresh per run unless fixed by the caller).
    pub seed: u64,
}

/// How a case's timed calls find the GPU. An H200 under cuDNN or a large GEMM runs at its
/// power limit, and its clocks fall within about a second of load: the same call timed after
/// an idle gap and after a second of load differs by up to 12%, and after an idle gap the
/// clock controller undershoots its steady state for several seconds of load (docs/perf.md,
/// "Method"). Two measurements are comparable only with the same history:
/// `scripts/sdpa_baseline.py --regime` takes the same values for torch's side.
///
/// Written `back-to-back`, `idle=MS`, `sustained=MS` or `idle=MS,sustained=MS`: first the
/// stream is drained and the host sleeps `idle_ms`, then the warm-up calls run, then the call
/// runs back to back until `sustained_ms` of host time have passed since the warm-up began
/// (synchronising every 4 calls), then the timed calls.
/// The default, `back-to-back`: the warm-up calls, then the timed calls.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Regime {
    /// Milliseconds idle before the warm-up (0: none).
    pub idle_ms: f64,
    /// Milliseconds of load, counted from the warm-up's start, before the timed calls (0: the
    /// warm-up calls only).
    pub sustained_ms: f64,
}

impl std::str::FromStr for Regime {
    type Err = String;
    /// `back-to-back`, or `idle=MS`, `sustained=MS` or both (comma-separated, idle first),
    /// each `MS` a finite number of milliseconds in `[0, 60000]`.
    fn from_str(raw: &str) -> Result<Regime, String> {
        let refuse = || {
            format!("'{raw}' is not a regime: back-to-back, idle=MS, sustained=MS or idle=MS,sustained=MS")
        };
        if raw == "back-to-back" {
            return Ok(Regime::default());
        }
        let ms = |v: &str| crate::args::in_range(0.0, 60_000.0, "milliseconds")(v);
        let mut r = Regime::default();
        let parts: Vec<&str> = raw.split(',').collect();
        if parts.len() > 2 {
            return Err(refuse());
        }
        for (i, part) in parts.iter().enumerate() {
            match part.split_once('=') {
                Some(("idle", v)) if i == 0 => r.idle_ms = ms(v)?,
                Some(("sustained", v)) if i + 1 == parts.len() => r.sustained_ms = ms(v)?,
                _ => return Err(refuse()),
            }
        }
        Ok(r)
    }
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            warmup: 2,
            reps: 7,
            regime: Regime::default(),
            p2c_cases: Vec::new(),
            check: true,
            seed: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x5eed),
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchRow {
    /// Section and case, e.g. `P2.b1h32s32k.causal`.
    pub id: String,
    /// Median time (ms); 0 for check-only rows.
    pub median_ms: f64,
    pub min_ms: f64,
    /// Achieved TFLOP/s at the median (0 when not applicable).
    pub tflops: f64,
    /// Numerical check summary ("-" when not checked).
    pub check: String,
    pub pass: bool,
}

/// Median and minimum of a sample.
pub fn median_min(mut v: Vec<f64>) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

/// A device allocation with its address.
struct DevBuf {
    _buf: Alloc,
    ptr: u64,
    bytes: usize,
}

/// Where a bench buffer's memory comes from: the stream-ordered pool (`cuMemAllocAsync`, as
/// the executor allocates its slots), or with `MERCURY_BENCH_ALLOC=sync` `cuMemAlloc`, as
/// PyTorch's caching allocator takes its segments: an experiment on whether the physical
/// placement of the memory moves a kernel's time (docs/perf.md, "Method").
enum Alloc {
    Pool(#[allow(dead_code)] CudaSlice<u8>),
    Sync(u64),
}

impl Drop for Alloc {
    fn drop(&mut self) {
        if let Alloc::Sync(p) = *self {
            // SAFETY: `p` came from `malloc_sync` in this process's context and is freed once;
            // the bench synchronises its stream before buffers go out of scope (every timed
            // or checked call ends with a synchronise).
            let _ = unsafe { cudarc::driver::result::free_sync(p) };
        }
    }
}

fn dev_alloc(stream: &Arc<CudaStream>, bytes: usize) -> Result<DevBuf> {
    if std::env::var("MERCURY_BENCH_ALLOC").is_ok_and(|v| v == "sync") {
        stream
            .synchronize()
            .map_err(RuntimeError::driver("synchronize"))?;
        // SAFETY: a plain device allocation in the current context (the bench binds it);
        // filled before use as below.
        let p = unsafe { cudarc::driver::result::malloc_sync(bytes.max(256)) }
            .map_err(RuntimeError::driver("alloc bench buffer (cuMemAlloc)"))?;
        return Ok(DevBuf {
            _buf: Alloc::Sync(p),
            ptr: p,
            bytes,
        });
    }
    // SAFETY: every benchmark buffer is filled (random values or NaN poison) before use.
    let buf = unsafe { stream.alloc::<u8>(bytes.max(256)) }
        .map_err(RuntimeError::driver("alloc bench buffer"))?;
    let ptr = {
        let (p, _s) = buf.device_ptr(stream);
        p
    };
    Ok(DevBuf {
        _buf: Alloc::Pool(buf),
        ptr,
        bytes,
    })
}

fn fmt_err(name: &str, e: &ErrStats, tol: f64) -> (String, bool) {
    let ok = e.ok(tol);
    (
        format!(
            "{name} rel {:.2e}{}{}",
            e.rel,
            if e.bad > 0 {
                format!(" ({} bad)", e.bad)
            } else {
                String::new()
            },
            if ok { "" } else { " FAIL" }
        ),
        ok,
    )
}

/// Attention FLOPs by the usual convention: 4 B H Sq Sk D, half when causal.
pub fn attn_flops(b: usize, hq: usize, sq: usize, sk: usize, d: usize, causal: bool) -> f64 {
    let f = 4.0 * (b * hq) as f64 * sq as f64 * sk as f64 * d as f64;
    if causal {
        f / 2.0
    } else {
        f
    }
}

/// The benchmark session: one context, one stream, the check kernels, the device kernels.
pub struct Bench {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    check: CheckKernels,
    attention: AttentionPatch,
    opts: BenchOptions,
    rows: Vec<BenchRow>,
    dk_ptx: String,
    dk_origin: String,
    seed_counter: u64,
}

impl Bench {
    /// `device_kernels_ptx`: the lowering's PTX, or `None` for the NVRTC stand-in.
    pub fn new(
        ctx: Arc<CudaContext>,
        opts: BenchOptions,
        device_kernels_ptx: Option<String>,
    ) -> Result<Self> {
        let stream = ctx
            .new_stream()
            .map_err(RuntimeError::driver("create stream"))?;
        let check = CheckKernels::new(&ctx)?;
        let attention = AttentionPatch::new(&ctx)?;
        let (dk_ptx, dk_origin) = match device_kernels_ptx {
            Some(p) => (p, "mercury-lowering PTX".to_string()),
            None => {
                let cc = ctx
                    .compute_capability()
                    .map_err(RuntimeError::driver("compute capability"))?;
                (
                    mercury_kernels::cuda::nvrtc::compile_ptx(
                        STANDIN_DEVICE_KERNELS_CU,
                        cc,
                        "bench stand-in device kernels",
                    )?,
                    "BENCH STAND-IN (NVRTC), not the lowering PTX".to_string(),
                )
            }
        };
        Ok(Bench {
            ctx,
            stream,
            check,
            attention,
            opts,
            rows: Vec::new(),
            dk_ptx,
            dk_origin,
            seed_counter: 0,
        })
    }

    /// Which device kernels the executor runs with.
    pub fn device_kernels_origin(&self) -> &str {
        &self.dk_origin
    }

    /// The attention variant used by P3 (the faster correct one after P2).
    pub fn attention_variant(&self) -> AttnVariant {
        self.attention.variant()
    }

    /// The report so far.
    pub fn rows(&self) -> &[BenchRow] {
        &self.rows
    }

    /// Records a section that failed with an error.
    pub fn record_error(&mut self, id: &str, e: &RuntimeError) {
        self.rows.push(BenchRow {
            id: id.to_string(),
            median_ms: 0.0,
            min_ms: 0.0,
            tflops: 0.0,
            check: format!("ERROR: {e}"),
            pass: false,
        });
    }

    fn push(&mut self, id: &str, times: Option<(f64, f64)>, flops: f64, check: (String, bool)) {
        let (median_ms, min_ms) = times.unwrap_or((0.0, 0.0));
        let tflops = if median_ms > 0.0 && flops > 0.0 {
            flops / (median_ms * 1e-3) / 1e12
        } else {
            0.0
        };
        crate::outln!(
            "  {id:<34} {:>10.3} ms {:>8.1} TFLOP/s  {}",
            median_ms,
            tflops,
            check.0
        );
        self.rows.push(BenchRow {
            id: id.to_string(),
            median_ms,
            min_ms,
            tflops,
            check: check.0,
            pass: check.1,
        });
    }

    fn seed(&mut self) -> u64 {
        self.seed_counter += 1;
        self.opts
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(self.seed_counter.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    fn fill_bf16(&mut self, b: &DevBuf, lo: f32, hi: f32) -> Result<()> {
        let seed = self.seed();
        // SAFETY: `b` holds `bytes / 2` bf16 values.
        unsafe {
            self.check
                .fill_random_bf16(&self.stream, b.ptr, b.bytes / 2, seed, lo, hi)?
        };
        Ok(())
    }

    fn poison(&self, b: &DevBuf, dtype: DType) -> Result<()> {
        // SAFETY: `b` is a live allocation of `bytes` bytes.
        unsafe { mercury_runtime::cuda::mem::poison(&self.stream, b.ptr, b.bytes, dtype) }
    }

    fn nonfinite(&self, ptr: u64, n: usize, ty: ElemType) -> Result<u64> {
        // SAFETY: callers pass live buffers of `n` elements of `ty`.
        Ok(unsafe { self.check.count_nonfinite(&self.stream, ptr, n, ty)? })
    }

    /// The options' warm-up calls of `f`, in the options' [`Regime`]: after an idle gap, or
    /// followed by calls until the GPU has been loaded for the sustained time.
    fn load_gpu(&self, f: &mut dyn FnMut() -> Result<()>) -> Result<()> {
        let sync = || {
            self.stream
                .synchronize()
                .map_err(RuntimeError::driver("synchronize"))
        };
        let Regime {
            idle_ms,
            sustained_ms,
        } = self.opts.regime;
        if idle_ms > 0.0 {
            sync()?;
            std::thread::sleep(std::time::Duration::from_secs_f64(idle_ms / 1e3));
        }
        let t0 = std::time::Instant::now();
        for _ in 0..self.opts.warmup {
            f()?;
        }
        if sustained_ms > 0.0 {
            // Synchronising every few calls keeps the queue short, so the host clock follows
            // the GPU's.
            while t0.elapsed().as_secs_f64() * 1e3 < sustained_ms {
                for _ in 0..4 {
                    f()?;
                }
                sync()?;
            }
        }
        Ok(())
    }

    /// Median/min milliseconds of `f` on the bench stream (CUDA events, after warm-up).
    fn time(&self, f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
        self.time_n(self.opts.reps, f)
    }

    /// [`Bench::time`] with `reps` timed calls instead of the options' count.
    fn time_n(&self, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<(f64, f64)> {
        self.load_gpu(&mut f)?;
        self.stream
            .synchronize()
            .map_err(RuntimeError::driver("synchronize"))?;
        let mut evs = Vec::with_capacity(reps);
        for _ in 0..reps.max(1) {
            let e0 = self
                .ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(RuntimeError::driver("event"))?;
            let e1 = self
                .ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(RuntimeError::driver("event"))?;
            e0.record(&self.stream)
                .map_err(RuntimeError::driver("record"))?;
            f()?;
            e1.record(&self.stream)
                .map_err(RuntimeError::driver("record"))?;
            evs.push((e0, e1));
        }
        let mut t = Vec::with_capacity(evs.len());
        for (a, b) in &evs {
            t.push(a.elapsed_ms(b).map_err(RuntimeError::driver("elapsed"))? as f64);
        }
        Ok(median_min(t))
    }

    /// Times the calls `fs` in turn, each between two events, `reps` rounds of all of them
    /// after the options' warm-up rounds: the median and minimum of each (ms). The GPU's
    /// clocks fall as it stays loaded (power-limited: on an H200 a 28 ms cuDNN call timed
    /// again a second later took 12% longer), so calls compared with each other are timed in
    /// one alternating loop, not one after the other.
    fn time_alternating(
        &self,
        fs: &mut [&mut dyn FnMut() -> Result<()>],
    ) -> Result<Vec<(f64, f64)>> {
        self.load_gpu(&mut || {
            for f in fs.iter_mut() {
                f()?;
            }
            Ok(())
        })?;
        let event = || {
            self.ctx
                .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(RuntimeError::driver("event"))
        };
        let mut rounds = Vec::with_capacity(self.opts.reps);
        for _ in 0..self.opts.reps.max(1) {
            let mut evs = vec![event()?];
            evs[0]
                .record(&self.stream)
                .map_err(RuntimeError::driver("record"))?;
            for f in fs.iter_mut() {
                f()?;
                let e = event()?;
                e.record(&self.stream)
                    .map_err(RuntimeError::driver("record"))?;
                evs.push(e);
            }
            rounds.push(evs);
        }
        let mut t = vec![Vec::with_capacity(rounds.len()); fs.len()];
        for evs in &rounds {
            for (i, w) in evs.windows(2).enumerate() {
                t[i].push(
                    w[0].elapsed_ms(&w[1])
                        .map_err(RuntimeError::driver("elapsed"))? as f64,
                );
            }
        }
        Ok(t.into_iter().map(median_min).collect())
    }
}
