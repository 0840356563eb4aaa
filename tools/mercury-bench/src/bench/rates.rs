//! Rate tables for the cost model: the two vendor patches the executor runs, timed alone at a
//! grid of shapes on one GPU (`mercury-mgpu links --measure-rates` writes them into the
//! topology file as `[[device.rates.gemm_points]]` and `[[device.rates.attention_points]]`;
//! docs/topology.md).
//!
//! - GEMM: the cuBLASLt patch as ring and shift-reduce tiles run it, `C[m, n] += A[m, k]
//!   B[k, n]` with bf16 operands and an f32 accumulator (random values), for every `m` in
//!   [`RateGrid::gemm_m`] and every `n`, `k` in [`RateGrid::gemm_nk`]. TFLOP/s count `2 m n k`.
//! - Attention: the cuDNN fused attention patch into a bf16 part and its LSE, as a ring step
//!   calls it (the merge into the accumulator is priced separately by the model), q/k/v
//!   `[1, heads, s, d]` with `sq = sk = s` for every `s` in [`RateGrid::attention_seq`], with
//!   no mask and with the causal mask on the diagonal. TFLOP/s per visible FLOP (`4 heads d
//!   visible`, visible = `s^2` or `s (s + 1) / 2`).
//!
//! How a point is timed matters as much as the shape (docs/perf.md, "Method"):
//! on an H200 the 8192^3 GEMM runs at 658 TFLOP/s timed back to back (power-limited clocks),
//! 749 with 2 ms of idle before each call, 781 inside a plan run; a 0.05 ms GEMM falls from
//! 646 to 397 with the idle gap. By default a point is timed as one run of a plan sees the
//! kernel: bursts of back-to-back calls filling [`RateGrid::burst_ms`] (5 ms), each after
//! [`RateGrid::gap_ms`] (20 ms) idle, the median per call over the bursts that fill
//! [`RateGrid::min_ms_per_point`] of calls (at least `BenchOptions::reps` bursts); that
//! regime priced the 2-GPU suite best (median error 3.3%). `gap_ms = 0` times the calls back
//! to back instead, and [`RateGrid::warm_s`] seconds of 8192^3 GEMMs can precede the grid. Inputs are fresh random values. Outputs are
//! checked finite (the attention output poisoned before the call; the accumulator filled with
//! random values, which a NaN or an overflow would spoil); the values of both patches are
//! checked against references by P1 and P2c.

use super::cudnn::case;
use super::{dev_alloc, Bench};
use cudarc::driver::sys::CUevent_flags;
use mercury_kernels::cuda::{ElemType, GemmPatch, GemmSpec, GemmWorkspace};
use mercury_plan::DType;
use mercury_runtime::cuda::error::{Result, RuntimeError};
use mercury_search::topology::{AttentionPoint, GemmPoint};

/// The shapes [`Bench::measure_rates`] times.
#[derive(Debug, Clone, PartialEq)]
pub struct RateGrid {
    /// GEMM rows (tokens of one tile).
    pub gemm_m: Vec<usize>,
    /// GEMM output columns and contracted lengths, each combination.
    pub gemm_nk: Vec<usize>,
    /// Attention block lengths (`sq = sk`).
    pub attention_seq: Vec<usize>,
    /// Batch x heads of the attention calls, each with the block lengths of `attention_seq` up
    /// to its limit (a call of many heads runs longer per launch, and faster per FLOP).
    pub heads: Vec<(usize, usize)>,
    /// Head dim of the attention calls.
    pub d: usize,
    /// Seconds of 8192^3 GEMMs before the first point (default 0).
    pub warm_s: f64,
    /// Timed calls per point: enough to fill this many milliseconds (at least the bench's
    /// `reps`, at most 2000).
    pub min_ms_per_point: f64,
    /// Idle milliseconds before each timed burst (the stream drained, then a host sleep); 0:
    /// the calls run back to back, no bursts.
    pub gap_ms: f64,
    /// With `gap_ms`: a burst is as many back-to-back calls as fill this many milliseconds (at
    /// least one), timed together: a kernel as it runs inside one run of a plan, after the
    /// host's work between runs.
    pub burst_ms: f64,
}

impl Default for RateGrid {
    /// Covers the tiles of the side-by-side suite on 2 to 8 GPUs: GEMM rows 512..16K, hidden
    /// sizes 4K..28K (Llama-3 8B and 70B: 4096, 8192, 14336, 28672), attention blocks 1K..64K
    /// at 32 heads of 128 (longer blocks take the 64K rate) and 1K..16K at 256 heads (B16 x 16).
    fn default() -> Self {
        RateGrid {
            gemm_m: vec![512, 1024, 2048, 4096, 8192, 16384],
            gemm_nk: vec![4096, 8192, 14336, 28672],
            attention_seq: vec![1024, 2048, 4096, 8192, 16384, 32768, 65536],
            heads: vec![(32, 65536), (256, 16384)],
            d: 128,
            warm_s: 0.0,
            min_ms_per_point: 200.0,
            gap_ms: 20.0,
            burst_ms: 5.0,
        }
    }
}

impl Bench {
    /// Times the GEMM and attention patches at every shape of `grid` (module docs). Rows
    /// `R.gemm.MxNxK` and `R.attention.sS[.causal]` go into the report; the points are
    /// returned for the topology file.
    ///
    /// A shape whose output is not finite gets a failed row and no point.
    ///
    /// # Errors
    /// A failed allocation, launch or library call (cuDNN missing, say).
    pub fn measure_rates(
        &mut self,
        grid: &RateGrid,
    ) -> Result<(Vec<GemmPoint>, Vec<AttentionPoint>)> {
        self.warm_up(grid.warm_s)?;
        let gemm = self.measure_gemm_rates(grid)?;
        let attention = self.measure_attention_rates(grid)?;
        Ok((gemm, attention))
    }

    /// 8192^3 bf16 GEMMs for `secs` seconds (host clock, synchronising every 50 calls).
    fn warm_up(&mut self, secs: f64) -> Result<()> {
        if secs <= 0.0 {
            return Ok(());
        }
        let n = 8192;
        let s = self.stream.clone();
        let a = dev_alloc(&s, n * n * 2)?;
        let c = dev_alloc(&s, n * n * 2)?;
        self.fill_bf16(&a, -1.0, 1.0)?;
        let patch = GemmPatch::new(&self.ctx, GemmWorkspace::DEFAULT_BYTES)?;
        let ws = GemmWorkspace::new(&s, GemmWorkspace::DEFAULT_BYTES)?;
        let spec = GemmSpec::dense(n, n, n, ElemType::BF16, ElemType::BF16, false);
        let t0 = std::time::Instant::now();
        while t0.elapsed().as_secs_f64() < secs {
            for _ in 0..50 {
                // SAFETY: a holds n * n bf16 (used as both operands), c n * n bf16.
                unsafe { patch.run(&s, &ws, &spec, a.ptr, a.ptr, c.ptr)? };
            }
            s.synchronize()
                .map_err(RuntimeError::driver("synchronize"))?;
        }
        crate::outln!("  (rates: GPU kept busy with 8192^3 GEMMs for {secs:.0} s first)");
        Ok(())
    }

    /// `time` with as many timed calls as fill `min_ms` (at least the bench's `reps`).
    fn time_window(
        &mut self,
        min_ms: f64,
        gap_ms: f64,
        burst_ms: f64,
        mut f: impl FnMut() -> Result<()>,
    ) -> Result<(f64, f64)> {
        let (once, _) = self.time_n(1, &mut f)?;
        let reps = ((min_ms / once.max(1e-3)).ceil() as usize).clamp(self.opts.reps.max(1), 2000);
        if gap_ms <= 0.0 {
            return self.time_n(reps, f);
        }
        let burst = ((burst_ms / once.max(1e-3)).ceil() as usize).clamp(1, 1000);
        let reps = reps.div_ceil(burst).max(self.opts.reps.max(1));
        let mut t = Vec::with_capacity(reps);
        for _ in 0..reps {
            self.stream
                .synchronize()
                .map_err(RuntimeError::driver("synchronize"))?;
            std::thread::sleep(std::time::Duration::from_secs_f64(gap_ms * 1e-3));
            let ev = || {
                self.ctx
                    .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(RuntimeError::driver("event"))
            };
            let (e0, e1) = (ev()?, ev()?);
            e0.record(&self.stream)
                .map_err(RuntimeError::driver("record"))?;
            for _ in 0..burst {
                f()?;
            }
            e1.record(&self.stream)
                .map_err(RuntimeError::driver("record"))?;
            e1.synchronize()
                .map_err(RuntimeError::driver("synchronize"))?;
            let ms = e0
                .elapsed_ms(&e1)
                .map_err(RuntimeError::driver("elapsed"))? as f64;
            t.push(ms / burst as f64);
        }
        Ok(super::median_min(t))
    }

    fn measure_gemm_rates(&mut self, grid: &RateGrid) -> Result<Vec<GemmPoint>> {
        let (Some(&mm), Some(&nk)) = (grid.gemm_m.iter().max(), grid.gemm_nk.iter().max()) else {
            return Ok(Vec::new());
        };
        let s = self.stream.clone();
        let a = dev_alloc(&s, mm * nk * 2)?;
        let b = dev_alloc(&s, nk * nk * 2)?;
        let c = dev_alloc(&s, mm * nk * 4)?;
        self.fill_bf16(&a, -1.0, 1.0)?;
        self.fill_bf16(&b, -1.0, 1.0)?;
        let patch = GemmPatch::new(&self.ctx, GemmWorkspace::DEFAULT_BYTES)?;
        let ws = GemmWorkspace::new(&s, GemmWorkspace::DEFAULT_BYTES)?;
        let mut out = Vec::new();
        for &m in &grid.gemm_m {
            for &n in &grid.gemm_nk {
                for &k in &grid.gemm_nk {
                    let spec = GemmSpec::dense(m, n, k, ElemType::BF16, ElemType::F32, true);
                    let seed = self.seed();
                    // SAFETY: `c` holds at least m * n f32 (mm * nk); a and b at least m * k
                    // and k * n bf16 (the largest of the grid).
                    unsafe {
                        self.check
                            .fill_random_f32(&s, c.ptr, m * n, seed, -1.0, 1.0)?;
                        patch.run(&s, &ws, &spec, a.ptr, b.ptr, c.ptr)?;
                    }
                    let bad = self.nonfinite(c.ptr, m * n, ElemType::F32)?;
                    let id = format!("R.gemm.{m}x{n}x{k}");
                    if bad != 0 {
                        let msg = format!("{bad} non-finite accumulator entries");
                        self.push(&id, None, 0.0, (msg, false));
                        continue;
                    }
                    let t = self.time_window(
                        grid.min_ms_per_point,
                        grid.gap_ms,
                        grid.burst_ms,
                        || {
                            // SAFETY: as above.
                            unsafe { Ok(patch.run(&s, &ws, &spec, a.ptr, b.ptr, c.ptr)?) }
                        },
                    )?;
                    let flops = spec.flops();
                    self.push(&id, Some(t), flops, ("finite".into(), true));
                    out.push(GemmPoint {
                        m,
                        n,
                        k,
                        tflops: round1(flops / (t.0 * 1e-3) / 1e12),
                    });
                }
            }
        }
        Ok(out)
    }

    fn measure_attention_rates(&mut self, grid: &RateGrid) -> Result<Vec<AttentionPoint>> {
        let cudnn = mercury_kernels::cuda::CudnnAttention::new(&self.ctx)?;
        let s = self.stream.clone();
        let mut out = Vec::new();
        for (heads, seq) in grid.heads.iter().flat_map(|&(h, max)| {
            grid.attention_seq
                .iter()
                .filter(move |&&s| s <= max)
                .map(move |&s| (h, s))
        }) {
            for causal in [false, true] {
                let c = case(
                    "",
                    (1, heads, heads, seq, seq),
                    (grid.d, grid.d),
                    causal.then_some(0),
                    true,
                );
                let bufs = self.cudnn_bufs(&c)?;
                let call = bufs.call;
                self.poison(&bufs.o, DType::BF16)?;
                // SAFETY: the buffers are sized for the call (`cudnn_bufs`).
                unsafe { cudnn.forward(&s, &call)? };
                let id = format!(
                    "R.attention.h{heads}.s{seq}{}",
                    if causal { ".causal" } else { "" }
                );
                let bad = self.nonfinite(bufs.o.ptr, bufs.o.bytes / 2, ElemType::BF16)?;
                if bad != 0 {
                    self.push(&id, None, 0.0, (format!("{bad} non-finite outputs"), false));
                    continue;
                }
                let t =
                    self.time_window(grid.min_ms_per_point, grid.gap_ms, grid.burst_ms, || {
                        // SAFETY: as above.
                        unsafe { cudnn.forward(&s, &call) }.map_err(RuntimeError::from)
                    })?;
                let flops = call.flops();
                self.push(&id, Some(t), flops, ("finite".into(), true));
                out.push(AttentionPoint {
                    heads,
                    sq: seq,
                    sk: seq,
                    d: grid.d,
                    causal,
                    tflops: round1(flops / (t.0 * 1e-3) / 1e12),
                });
            }
        }
        Ok(out)
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
