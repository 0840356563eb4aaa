//! P2c: the cuDNN attention patch ([`CudnnAttention`]) alone: timed at the benchmark shapes
//! (same ids as `scripts/sdpa_baseline.py`, so the report puts torch's cuDNN time beside
//! ours), and checked on fresh random inputs against the f32 GPU reference
//! (`mercury_check_ref_sdpa_rows`), f64 rows on the CPU, and for head dim 128 bf16 against
//! the NVRTC patch on the same inputs (differential). Outputs are poisoned before every call.

use super::{dev_alloc, fmt_err, Bench, DevBuf};
use mercury_kernels::cpu::{AttnDims, AttnParams};
use mercury_kernels::cuda::check::{compare, dtoh, ErrStats};
use mercury_kernels::cuda::cudnn::{IoType, SdpaCall, Tensor4};
use mercury_kernels::cuda::{AttnLaunch, CudnnAttention, ElemType, Strided3};
use mercury_plan::DType;
use mercury_runtime::cuda::device_kernels::{AttnAcc, DeviceKernels};
use mercury_runtime::cuda::error::{Result, RuntimeError};

/// One P2c case: shape, io type, mask and layout.
#[derive(Debug, Clone, Copy)]
pub(super) struct Case {
    pub id: &'static str,
    pub b: usize,
    pub hq: usize,
    pub hk: usize,
    pub sq: usize,
    pub sk: usize,
    pub dqk: usize,
    pub dv: usize,
    pub io: IoType,
    /// `Some(delta)`: causal, key c visible to query r when r + delta >= c.
    pub causal: Option<i64>,
    /// Q/O are rows `[pad, pad + sq)` of slots with `sq + 2 pad` rows (a tile view).
    pub pad: usize,
    /// `[b, s, h, d]` memory order (BSHD) instead of `[b, h, s, d]`.
    pub bshd: bool,
    pub o_f32: bool,
    /// Timed (else check only).
    pub timed: bool,
}

pub(super) const fn case(
    id: &'static str,
    (b, hq, hk, sq, sk): (usize, usize, usize, usize, usize),
    (dqk, dv): (usize, usize),
    causal: Option<i64>,
    timed: bool,
) -> Case {
    Case {
        id,
        b,
        hq,
        hk,
        sq,
        sk,
        dqk,
        dv,
        io: IoType::Bf16,
        causal,
        pad: 0,
        bshd: false,
        o_f32: false,
        timed,
    }
}

/// The ids of P2c's timed cases, as `--p2c-cases` names them (and `scripts/sdpa_baseline.py`).
pub fn timed_ids() -> Vec<&'static str> {
    PERF.iter().map(|c| c.id).collect()
}

/// The timed shapes (ids as in `scripts/sdpa_baseline.py`).
pub(super) const PERF: &[Case] = &[
    case(
        "b1h32s32k.causal",
        (1, 32, 32, 32768, 32768),
        (128, 128),
        Some(0),
        true,
    ),
    case(
        "b1h32s32k.noncausal",
        (1, 32, 32, 32768, 32768),
        (128, 128),
        None,
        true,
    ),
    case(
        "gqa32q8kv.s32k.noncausal",
        (1, 32, 8, 32768, 32768),
        (128, 128),
        None,
        true,
    ),
    case(
        "gqa32q8kv.s32k.causal",
        (1, 32, 8, 32768, 32768),
        (128, 128),
        Some(0),
        true,
    ),
    case(
        "b16h32s4k.noncausal",
        (16, 32, 32, 4096, 4096),
        (128, 128),
        None,
        true,
    ),
    case(
        "b16h32s4k.causal",
        (16, 32, 32, 4096, 4096),
        (128, 128),
        Some(0),
        true,
    ),
    case(
        "b1h32s32k.d64.noncausal",
        (1, 32, 32, 32768, 32768),
        (64, 64),
        None,
        true,
    ),
    case(
        "b1h32s32k.d64.causal",
        (1, 32, 32, 32768, 32768),
        (64, 64),
        Some(0),
        true,
    ),
    case(
        "b1h32s32k.d256.noncausal",
        (1, 32, 32, 32768, 32768),
        (256, 256),
        None,
        true,
    ),
    case(
        "b1h32s32k.d256.causal",
        (1, 32, 32, 32768, 32768),
        (256, 256),
        Some(0),
        true,
    ),
    // One ring block of 8 ranks at S32K (the P3 shape), for the ring-step rows.
    case(
        "b1h32s4kx4k.noncausal",
        (1, 32, 32, 4096, 4096),
        (128, 128),
        None,
        true,
    ),
];

/// Check-only shapes: every head dim, d_v != d_qk, GQA, f16, odd lengths, shifted diagonals,
/// tile views, BSHD strides, f32 output.
pub(super) fn odd_cases() -> Vec<Case> {
    let mut v = Vec::new();
    for (id, d) in [("d64", 64), ("d96", 96), ("d128", 128), ("d256", 256)] {
        for (suffix, causal) in [("noncausal", None), ("causal", Some(0))] {
            let mut c = case("", (2, 8, 2, 777, 1000), (d, d), causal, false);
            c.id = Box::leak(format!("odd.{id}.gqa.s777x1000.{suffix}").into_boxed_str());
            v.push(c);
        }
    }
    let mut mla = case(
        "odd.mla.dqk192.dv128.causal",
        (1, 8, 8, 512, 512),
        (192, 128),
        Some(0),
        false,
    );
    v.push(mla);
    mla = case(
        "odd.dqk128.dv64.noncausal",
        (1, 8, 4, 300, 333),
        (128, 64),
        None,
        false,
    );
    v.push(mla);
    let mut f16 = case(
        "odd.f16.d128.causal_shift37",
        (2, 8, 2, 300, 333),
        (128, 128),
        Some(37),
        false,
    );
    f16.io = IoType::F16;
    v.push(f16);
    v.push(case(
        "odd.shift37.s300x333.causal",
        (2, 8, 2, 300, 333),
        (128, 128),
        Some(37),
        false,
    ));
    v.push(case(
        "odd.shift_past_end.causal",
        (1, 4, 4, 128, 256),
        (128, 128),
        Some(300),
        false,
    ));
    let mut view = case(
        "odd.tile_view.pad150.causal",
        (2, 8, 2, 300, 300),
        (128, 128),
        Some(0),
        false,
    );
    view.pad = 150;
    v.push(view);
    let mut bshd = case(
        "odd.bshd.noncausal",
        (2, 8, 2, 256, 384),
        (128, 128),
        None,
        false,
    );
    bshd.bshd = true;
    v.push(bshd);
    let mut of32 = case(
        "odd.o_f32.noncausal",
        (1, 8, 8, 256, 256),
        (128, 128),
        None,
        false,
    );
    of32.o_f32 = true;
    v.push(of32);
    let mut of32c = of32;
    of32c.id = "odd.o_f32.causal";
    of32c.causal = Some(0);
    v.push(of32c);
    v
}

/// Device buffers of one case.
pub(super) struct Bufs {
    pub(super) q: DevBuf,
    pub(super) k: DevBuf,
    pub(super) v: DevBuf,
    pub(super) o: DevBuf,
    pub(super) stats: DevBuf,
    pub(super) call: SdpaCall,
}

/// Element strides of `[b, h, s, d]` in the case's memory order, for slots of `s_total` rows.
fn strides(c: &Case, h: usize, s_total: usize, d: usize) -> [i64; 4] {
    let (h, s, d) = (h as i64, s_total as i64, d as i64);
    if c.bshd {
        [s * h * d, d, h * d, 1]
    } else {
        [h * s * d, s * d, d, 1]
    }
}

impl Bench {
    pub(super) fn cudnn_bufs(&mut self, c: &Case) -> Result<Bufs> {
        let s = self.stream.clone();
        let st = c.sq + 2 * c.pad;
        let esz = 2;
        let osz = if c.o_f32 { 4 } else { 2 };
        let q = dev_alloc(&s, c.b * c.hq * st * c.dqk * esz)?;
        let k = dev_alloc(&s, c.b * c.hk * c.sk * c.dqk * esz)?;
        let v = dev_alloc(&s, c.b * c.hk * c.sk * c.dv * esz)?;
        let o = dev_alloc(&s, c.b * c.hq * st * c.dv * osz)?;
        let stats = dev_alloc(&s, c.b * c.hq * st * 4)?;
        // The value ranges of scripts/sdpa_baseline.py's inputs: under the H200's power limit
        // the clocks depend on what the kernel draws, so both sides run on alike data.
        for (buf, lo, hi) in [(&q, -1.5, 1.5), (&k, -1.5, 1.5), (&v, -1.0, 1.0)] {
            let seed = self.seed();
            // SAFETY: each buffer holds `bytes / 2` 2-byte values.
            unsafe {
                match c.io {
                    IoType::Bf16 => {
                        self.check
                            .fill_random_bf16(&s, buf.ptr, buf.bytes / 2, seed, lo, hi)?
                    }
                    IoType::F16 => {
                        self.check
                            .fill_random_f16(&s, buf.ptr, buf.bytes / 2, seed, lo, hi)?
                    }
                }
            }
        }
        let qs = strides(c, c.hq, st, c.dqk);
        let os = strides(c, c.hq, st, c.dv);
        let row_off = |s: &[i64; 4]| (c.pad as i64 * s[2]) as u64;
        let call = SdpaCall {
            io: c.io,
            o_f32: c.o_f32,
            b: c.b,
            hq: c.hq,
            hk: c.hk,
            sq: c.sq,
            sk: c.sk,
            dqk: c.dqk,
            dv: c.dv,
            q: Tensor4 {
                ptr: q.ptr + row_off(&qs) * esz as u64,
                strides: qs,
            },
            k: Tensor4 {
                ptr: k.ptr,
                strides: strides(c, c.hk, c.sk, c.dqk),
            },
            v: Tensor4 {
                ptr: v.ptr,
                strides: strides(c, c.hk, c.sk, c.dv),
            },
            o: Tensor4 {
                ptr: o.ptr + row_off(&os) * osz as u64,
                strides: os,
            },
            stats: Tensor4 {
                ptr: stats.ptr + (c.pad * 4) as u64,
                strides: [(c.hq * st) as i64, st as i64, 1, 1],
            },
            scale: 1.0 / (c.dqk as f32).sqrt(),
            causal_delta: c.causal,
        };
        Ok(Bufs {
            q,
            k,
            v,
            o,
            stats,
            call,
        })
    }

    /// Query rows to check: all of a small case, a sample of a large one (always the first
    /// and last rows of each (batch, head) corner).
    fn cudnn_rows(&mut self, c: &Case) -> Vec<i64> {
        let n = c.b * c.hq * c.sq;
        if n <= 20_000 {
            return (0..n as i64).collect();
        }
        self.sample_rows(c.b, c.hq, c.sq, 96)
    }

    /// f64 rows on the CPU from the host copies of q, k, v (dense BHSD, no pad only).
    fn cudnn_f64_rows(&self, c: &Case, bufs: &Bufs, rows: &[i64]) -> Result<(Vec<f64>, Vec<f64>)> {
        let s = &self.stream;
        let to_f64 = |bits: u16| match c.io {
            IoType::Bf16 => mercury_kernels::cuda::check::bf16_to_f64(bits),
            IoType::F16 => half::f16::from_bits(bits).to_f64(),
        };
        let load = |b: &DevBuf| -> Result<Vec<f64>> {
            // SAFETY: the buffer holds bytes / 2 16-bit values.
            let h: Vec<u16> = unsafe { dtoh(s, b.ptr, b.bytes / 2)? };
            Ok(h.into_iter().map(to_f64).collect())
        };
        let (q, k, v) = (load(&bufs.q)?, load(&bufs.k)?, load(&bufs.v)?);
        let (mut o, mut l) = (Vec::new(), Vec::new());
        let group = c.hq / c.hk;
        let scale = bufs.call.scale as f64;
        for &flat in rows {
            let flat = flat as usize;
            let (r, h, bi) = (flat % c.sq, (flat / c.sq) % c.hq, flat / (c.sq * c.hq));
            let kh = h / group;
            let qrow = &q[((bi * c.hq + h) * c.sq + r) * c.dqk..][..c.dqk];
            let nvis = match c.causal {
                None => c.sk,
                Some(delta) => (r as i64 + delta + 1).clamp(0, c.sk as i64) as usize,
            };
            let logits: Vec<f64> = (0..nvis)
                .map(|j| {
                    let krow = &k[((bi * c.hk + kh) * c.sk + j) * c.dqk..][..c.dqk];
                    scale * qrow.iter().zip(krow).map(|(a, b)| a * b).sum::<f64>()
                })
                .collect();
            let m = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = logits.iter().map(|x| (x - m).exp()).collect();
            let z: f64 = w.iter().sum();
            for dd in 0..c.dv {
                o.push(
                    (0..nvis)
                        .map(|j| w[j] * v[((bi * c.hk + kh) * c.sk + j) * c.dv + dd])
                        .sum::<f64>()
                        / z,
                );
            }
            l.push(m + z.ln());
        }
        Ok((o, l))
    }

    /// Runs and checks one case; times it when the case says so.
    fn cudnn_case(&mut self, cudnn: &CudnnAttention, c: &Case) -> Result<()> {
        let id = format!("P2c.{}", c.id);
        let bufs = self.cudnn_bufs(c)?;
        let call = bufs.call;
        let support = cudnn.support(&call);
        if c.o_f32 {
            // cuDNN 9.19 builds a plan for an f32 O and writes wrong values (measured): the
            // patch must refuse it.
            let ok = support.is_err();
            let msg = match support {
                Err(e) => format!("refused as it must be: {e}"),
                Ok(()) => "ACCEPTED an f32 O (wrong values were measured) FAIL".into(),
            };
            self.push(&id, None, 0.0, (msg, ok));
            return Ok(());
        }
        if let Err(e) = support {
            self.push(&id, None, 0.0, (format!("REFUSED: {e} FAIL"), false));
            return Ok(());
        }
        let s = self.stream.clone();
        let odt = if c.o_f32 { DType::F32 } else { DType::BF16 };
        self.poison(&bufs.o, odt)?;
        self.poison(&bufs.stats, DType::F32)?;
        // SAFETY: the buffers cover the views of `call`.
        unsafe { cudnn.forward(&s, &call)? };
        let mut msgs = Vec::new();
        let mut ok = true;
        if self.opts.check {
            let rows = self.cudnn_rows(c);
            // SAFETY: the call's tensors are live and written.
            let rc = unsafe { self.check.sdpa_rows(&s, &call, &rows)? };
            let (m1, ok1) = fmt_err("o", &rc.o_err(), 2e-2);
            let (m2, ok2) = fmt_err("lse", &rc.lse_err(), 1e-3);
            msgs.push(format!("{m1}; {m2}"));
            ok &= ok1 && ok2;
            // Non-finite values anywhere in the written rows of O.
            let o_elems = c.b * c.hq * (c.sq + 2 * c.pad) * c.dv;
            if c.pad == 0 && !c.o_f32 && c.io == IoType::Bf16 {
                let bad =
                    self.nonfinite(bufs.o.ptr, o_elems, mercury_kernels::cuda::ElemType::BF16)?;
                msgs.push(format!("non-finite O {bad}"));
                ok &= bad == 0;
            }
            // f64 spot rows (dense BHSD layouts).
            if c.pad == 0 && !c.bshd {
                let n = (c.b * c.hq * c.sq) as i64;
                let spot = [0, n / 3, n / 2 + 1, n - 1];
                let (wo, wl) = self.cudnn_f64_rows(c, &bufs, &spot)?;
                // SAFETY: live, written.
                let got = unsafe { self.check.sdpa_rows(&s, &call, &spot)? };
                let g: Vec<f64> = got.o_got.iter().map(|x| *x as f64).collect();
                let gl: Vec<f64> = got.lse_got.iter().map(|x| *x as f64).collect();
                let (m3, ok3) = fmt_err("f64 o", &compare(&g, &wo), 2e-2);
                let (m4, ok4) = fmt_err("f64 lse", &compare(&gl, &wl), 1e-3);
                msgs.push(format!("{m3}; {m4}"));
                ok &= ok3 && ok4;
            }
            // Differential: the NVRTC patch on the same inputs (d 128, bf16, dense BHSD).
            if c.dqk == 128 && c.dv == 128 && c.io == IoType::Bf16 && !c.bshd {
                let e = self.cudnn_vs_nvrtc(c, &bufs, &rows)?;
                let (m5, ok5) = fmt_err("vs NVRTC o", &e, 2e-2);
                msgs.push(m5);
                ok &= ok5;
            }
        }
        let times = if c.timed {
            let t = self.time(|| {
                // SAFETY: as above.
                unsafe { cudnn.forward(&s, &call) }.map_err(RuntimeError::from)
            })?;
            Some(t)
        } else {
            None
        };
        let st = cudnn.plan_stats();
        msgs.push(format!(
            "plans built {} failed {} hits {}",
            st.built, st.failed, st.hits
        ));
        self.push(&id, times, call.flops(), (msgs.join("; "), ok));
        Ok(())
    }

    /// The NVRTC patch's output for the same inputs (f32 O into a scratch tensor), compared
    /// with cuDNN's on `rows`.
    fn cudnn_vs_nvrtc(&mut self, c: &Case, bufs: &Bufs, rows: &[i64]) -> Result<ErrStats> {
        let s = self.stream.clone();
        let st = c.sq + 2 * c.pad;
        let o2 = dev_alloc(&s, c.b * c.hq * st * 128 * 4)?;
        let l2 = dev_alloc(&s, c.b * c.hq * st * 4)?;
        self.poison(&o2, DType::F32)?;
        let call = bufs.call;
        let to3 = |t: Tensor4| Strided3 {
            ptr: t.ptr,
            sb: t.strides[0],
            sh: t.strides[1],
            sr: t.strides[2],
        };
        let (q_offset, k_offset) = match c.causal {
            Some(d) if d >= 0 => (d as usize, 0),
            Some(d) => (0, (-d) as usize),
            None => (0, 0),
        };
        let args = AttnLaunch {
            dims: AttnDims {
                b: c.b,
                hq: c.hq,
                hk: c.hk,
                sq: c.sq,
                sk: c.sk,
                d: 128,
            },
            dv: 128,
            params: AttnParams {
                causal: c.causal.is_some(),
                scale: call.scale as f64,
                q_offset,
                k_offset,
            },
            q: to3(call.q),
            k: to3(call.k),
            v: to3(call.v),
            o: Strided3 {
                ptr: o2.ptr + (c.pad * 128 * 4) as u64,
                sb: (c.hq * st * 128) as i64,
                sh: (st * 128) as i64,
                sr: 128,
            },
            lse: Strided3 {
                ptr: l2.ptr + (c.pad * 4) as u64,
                sb: (c.hq * st) as i64,
                sh: st as i64,
                sr: 1,
            },
            elem: ElemType::BF16,
            accumulate: false,
            bounds: None,
        };
        // SAFETY: buffers sized for the views.
        unsafe { self.attention.launch(&s, &args)? };
        // SAFETY: live, written.
        let theirs = unsafe { self.check.attention_rows(&s, &args, rows)? };
        // SAFETY: live, written.
        let ours = unsafe { self.check.sdpa_rows(&s, &call, rows)? };
        let g: Vec<f64> = ours.o_got.iter().map(|x| *x as f64).collect();
        let w: Vec<f64> = theirs.o_got.iter().map(|x| *x as f64).collect();
        Ok(compare(&g, &w))
    }

    /// P2c: the cuDNN patch at the benchmark shapes and the check-only shapes.
    pub fn p2_cudnn(&mut self) -> Result<()> {
        let cudnn = match CudnnAttention::new(&self.ctx) {
            Ok(c) => c,
            Err(e) => {
                self.record_error("P2c.load", &e.into());
                return Ok(());
            }
        };
        let lib = cudnn.library();
        crate::outln!(
            "P2c cuDNN fused attention: cuDNN {} from {}",
            mercury_kernels::cuda::cudnn::version_string(lib.version),
            lib.origin
        );
        let only = self.opts.p2c_cases.clone();
        let cases: Vec<Case> = if only.is_empty() {
            PERF.iter().copied().chain(odd_cases()).collect()
        } else {
            PERF.iter()
                .copied()
                .filter(|c| only.iter().any(|id| id == c.id))
                .collect()
        };
        for c in &cases {
            if let Err(e) = self.cudnn_case(&cudnn, c) {
                self.record_error(&format!("P2c.{}", c.id), &e);
            }
        }
        if !only.is_empty() {
            return Ok(());
        }
        let dk = DeviceKernels::load(&self.ctx, &self.dk_ptx)?;
        for seq in [4096, 16384, 32768] {
            let id = format!("P2c.ring_step.b1h32s{}k", seq / 1024);
            if let Err(e) = self.cudnn_ring_step(&cudnn, &dk, &id, seq) {
                self.record_error(&id, &e);
            }
        }
        Ok(())
    }

    /// One ring step as the executor runs it: the cuDNN patch into a bf16 part, then the MLIR
    /// merge kernels into a random f32 accumulator (a quarter of its rows empty, lse = -inf),
    /// against the plain cuDNN call on the same block. Checked on sampled rows against the
    /// f64 merge of the accumulator as it was and the part cuDNN wrote.
    fn cudnn_ring_step(
        &mut self,
        cudnn: &CudnnAttention,
        dk: &DeviceKernels,
        id: &str,
        seq: usize,
    ) -> Result<()> {
        let (b, h, d) = (1, 32, 128);
        let c = case("", (b, h, h, seq, seq), (d, d), None, true);
        let bufs = self.cudnn_bufs(&c)?;
        let call = bufs.call;
        let s = self.stream.clone();
        let acc_o = dev_alloc(&s, b * h * seq * d * 4)?;
        let acc_l = dev_alloc(&s, b * h * seq * 4)?;
        let nrows = b * h * seq;
        let (seed1, seed2) = (self.seed(), self.seed());
        // SAFETY: the buffers hold these many f32.
        unsafe {
            self.check
                .fill_random_f32(&s, acc_o.ptr, nrows * d, seed1, -1.0, 1.0)?;
            self.check
                .fill_random_f32(&s, acc_l.ptr, nrows, seed2, 4.0, 9.0)?;
        }
        let acc = AttnAcc {
            o: acc_o.ptr,
            lse: acc_l.ptr,
            b,
            hq: h,
            sq: seq,
            d,
            o_strides: [(h * seq * d) as i64, (seq * d) as i64, d as i64],
            lse_strides: [(h * seq) as i64, seq as i64],
        };
        let rows = self.sample_rows(b, h, seq, 64);
        // A quarter of the sampled rows start empty.
        for (i, r) in rows.iter().enumerate() {
            if i % 4 == 0 {
                // SAFETY: row r of the lse accumulator.
                unsafe { self.htod_f32(acc_l.ptr + (*r as u64) * 4, &[f32::NEG_INFINITY])? };
            }
        }
        let take = |v: &Vec<f32>, r: i64, w: usize| -> Vec<f64> {
            v[r as usize * w..(r as usize + 1) * w]
                .iter()
                .map(|x| *x as f64)
                .collect()
        };
        // SAFETY: the accumulator holds these many f32.
        let (o0, l0): (Vec<f32>, Vec<f32>) =
            unsafe { (dtoh(&s, acc_o.ptr, nrows * d)?, dtoh(&s, acc_l.ptr, nrows)?) };
        let step = || -> Result<()> {
            // SAFETY: buffers sized for the call and the accumulator.
            unsafe {
                cudnn.forward(&s, &call)?;
                dk.attn_merge(&s, &acc, call.o.ptr, call.stats.ptr, false)
            }
        };
        step()?;
        // SAFETY: written by the step.
        let part = unsafe { self.check.sdpa_rows(&s, &call, &rows)? };
        let (o1, l1): (Vec<f32>, Vec<f32>) =
            // SAFETY: as above.
            unsafe { (dtoh(&s, acc_o.ptr, nrows * d)?, dtoh(&s, acc_l.ptr, nrows)?) };
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for (i, &r) in rows.iter().enumerate() {
            let la = l0[r as usize] as f64;
            let mut oa = if la == f64::NEG_INFINITY {
                vec![0.0; d]
            } else {
                take(&o0, r, d)
            };
            let mut lacc = [la];
            let op: Vec<f64> = part.o_got[i * d..(i + 1) * d]
                .iter()
                .map(|x| *x as f64)
                .collect();
            mercury_kernels::cpu::lse_merge(&mut oa, &mut lacc, &op, &[part.lse_got[i] as f64], d);
            want.extend(oa);
            want.push(lacc[0]);
            got.extend(take(&o1, r, d));
            got.push(l1[r as usize] as f64);
        }
        let (msg, ok) = fmt_err("merged vs f64", &compare(&got, &want), 1e-5);
        let merge_alone = self.time(|| {
            // SAFETY: as above.
            unsafe { dk.attn_merge(&s, &acc, call.o.ptr, call.stats.ptr, false) }
        })?;
        // The plain call and the step's two halves in one alternating loop (the clocks drift
        // over a measurement: `Bench::time_alternating`). Until 2026-12-03 the plain call was
        // timed first and the step after it, and the step's excess at 16K (1.16x, "not
        // explained") was the clocks: the plain call timed again after the step took as long
        // as the step's own cuDNN call (7.10 / 7.09 ms against 6.25 first), the merge inside
        // the step as long as alone.
        let t = self.time_alternating(&mut [
            &mut || {
                // SAFETY: as above.
                unsafe { cudnn.forward(&s, &call) }.map_err(RuntimeError::from)
            },
            &mut || {
                // SAFETY: as above.
                unsafe { cudnn.forward(&s, &call) }.map_err(RuntimeError::from)
            },
            &mut || {
                // SAFETY: as above.
                unsafe { dk.attn_merge(&s, &acc, call.o.ptr, call.stats.ptr, false) }
            },
        ])?;
        let (plain, in_step, merge) = (t[0].0, t[1].0, t[2].0);
        let merged = (in_step + merge, t[1].1 + t[2].1);
        // Bytes the merge must move: the bf16 part, the f32 accumulator read and written,
        // the lse rows.
        let bytes = (nrows * d * (2 + 4 + 4) + nrows * 12) as f64;
        let msg = format!(
            "{msg}; step / plain cuDNN {:.3}x, timed alternating (plain {plain:.3} ms; the step's cuDNN {in_step:.3} ms + merge {merge:.3} ms; merge alone {:.3} ms = {:.0} GB/s)",
            merged.0 / plain,
            merge_alone.0,
            bytes / (merge_alone.0 * 1e-3) / 1e9
        );
        self.push(id, Some(merged), call.flops(), (msg, ok));
        Ok(())
    }
}
