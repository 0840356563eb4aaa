//! P2b: the cuDNN attention backward patch ([`CudnnAttention::backward`]) alone.
//!
//! Every case draws fresh random q, k, v, dO, runs the forward patch for O and the softmax
//! statistics, poisons dQ, dK, dV, runs the backward, counts non-finite gradients and compares
//! sampled rows with f64 rows on the host (`attn_bwd_ref.rs`): the *given* reference (on the
//! very O and lse the backward read) for every case, the *exact* one (forward recomputed in
//! f64) for the check-only shapes. Timed cases carry the ids of `scripts/sdpa_bwd_baseline.py`,
//! which times torch's cuDNN backward on the same shapes and inputs. Then the cost of taking a
//! ring block's gradients into f32 accumulators (`P2b.accumulate.*`).

use super::attn_bwd_ref::{Group, Plane};
use super::{dev_alloc, fmt_err, Bench, DevBuf};
use mercury_kernels::cuda::check::{bf16_to_f64, compare, dtoh};
use mercury_kernels::cuda::cudnn::{IoType, Route, SdpaBwdCall, SdpaCall, Tensor4};
use mercury_kernels::cuda::{CudnnAttention, ElemType};
use mercury_plan::DType;
use mercury_runtime::cuda::device_kernels::DeviceKernels;
use mercury_runtime::cuda::error::{Result, RuntimeError};

/// One P2b case.
#[derive(Debug, Clone, Copy)]
pub(super) struct BwdCase {
    pub id: &'static str,
    pub b: usize,
    pub hq: usize,
    pub hk: usize,
    pub sq: usize,
    pub sk: usize,
    pub dqk: usize,
    pub dv: usize,
    pub io: IoType,
    pub causal: Option<i64>,
    pub route: Option<Route>,
    /// `[b, s, h, d]` memory order for every tensor.
    pub bshd: bool,
    pub timed: bool,
}

const fn case(
    id: &'static str,
    (b, hq, hk, sq, sk): (usize, usize, usize, usize, usize),
    (dqk, dv): (usize, usize),
    causal: Option<i64>,
    timed: bool,
) -> BwdCase {
    BwdCase {
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
        route: None,
        bshd: false,
        timed,
    }
}

/// The timed shapes: P2c's (the B1 H32 S32K D128 causal and not, GQA 32/8, B16 H32
/// S4K, D64, D256; and one ring block of S32K over 8 ranks), with the same ids.
fn perf() -> Vec<BwdCase> {
    super::cudnn::PERF
        .iter()
        .map(|c| {
            case(
                c.id,
                (c.b, c.hq, c.hk, c.sq, c.sk),
                (c.dqk, c.dv),
                c.causal,
                true,
            )
        })
        .collect()
}

/// Check-only shapes: every head dim, GQA, d_v != d_qk, f16, shifted diagonals, BSHD, the
/// lengths of the known NaN traps (s % 128 == 64, odd), and the unified operation (a probe:
/// cuDNN 9.19 refuses it).
fn odd_cases() -> Vec<BwdCase> {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let mut v = Vec::new();
    for (name, d) in [("d64", 64), ("d128", 128), ("d256", 256)] {
        for (suffix, causal) in [("noncausal", None), ("causal", Some(0))] {
            let id = leak(format!("odd.{name}.gqa.s777x1000.{suffix}"));
            v.push(case(id, (2, 8, 2, 777, 1000), (d, d), causal, false));
        }
    }
    v.push(case(
        "odd.mla.dqk192.dv128.causal",
        (1, 8, 8, 512, 512),
        (192, 128),
        Some(0),
        false,
    ));
    v.push(case(
        "odd.dqk128.dv64.noncausal",
        (1, 8, 4, 300, 333),
        (128, 64),
        None,
        false,
    ));
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
    // pytorch/pytorch#196678, NVIDIA/cudnn-frontend#160: NaN backward at s % 128 == 64.
    for s in [64, 192, 320, 1088] {
        for (suffix, causal) in [("noncausal", None), ("causal", Some(0))] {
            let id = leak(format!("odd.awkward.s{s}.{suffix}"));
            v.push(case(id, (1, 8, 2, s, s), (128, 128), causal, false));
        }
    }
    v.push(case(
        "odd.awkward.s1000x1088.causal_shift88",
        (1, 4, 4, 1000, 1088),
        (64, 64),
        Some(88),
        false,
    ));
    let mut bshd = case(
        "odd.bshd.causal",
        (2, 8, 2, 256, 384),
        (128, 128),
        Some(0),
        false,
    );
    bshd.bshd = true;
    v.push(bshd);
    for (suffix, hk) in [("mha", 8), ("gqa", 2)] {
        let mut c = case(
            leak(format!("odd.route_unified.{suffix}")),
            (1, 8, hk, 512, 512),
            (128, 128),
            None,
            false,
        );
        c.route = Some(Route::Unified);
        v.push(c);
    }
    v
}

/// Device buffers of one case, the forward call that produced O and Stats, the backward call.
struct BwdBufs {
    /// Q, K, V, O, dO, Stats: alive as long as the calls.
    _inputs: Vec<DevBuf>,
    dq: DevBuf,
    dk: DevBuf,
    dv: DevBuf,
    bwd: SdpaBwdCall,
}

/// A workspace of the bench's for `call` (allocated outside the timed calls).
struct BwdWs {
    buf: DevBuf,
}

fn strides(c: &BwdCase, h: usize, s: usize, d: usize) -> [i64; 4] {
    let (h, s, d) = (h as i64, s as i64, d as i64);
    if c.bshd {
        [s * h * d, d, h * d, 1]
    } else {
        [h * s * d, s * d, d, 1]
    }
}

impl Bench {
    fn bwd_bufs(&mut self, cudnn: &CudnnAttention, c: &BwdCase) -> Result<BwdBufs> {
        let s = self.stream.clone();
        let gsz = 2;
        let q = dev_alloc(&s, c.b * c.hq * c.sq * c.dqk * 2)?;
        let k = dev_alloc(&s, c.b * c.hk * c.sk * c.dqk * 2)?;
        let v = dev_alloc(&s, c.b * c.hk * c.sk * c.dv * 2)?;
        let o = dev_alloc(&s, c.b * c.hq * c.sq * c.dv * 2)?;
        let d_o = dev_alloc(&s, c.b * c.hq * c.sq * c.dv * 2)?;
        let stats = dev_alloc(&s, c.b * c.hq * c.sq * 4)?;
        let dq = dev_alloc(&s, c.b * c.hq * c.sq * c.dqk * gsz)?;
        let dk = dev_alloc(&s, c.b * c.hk * c.sk * c.dqk * gsz)?;
        let dv = dev_alloc(&s, c.b * c.hk * c.sk * c.dv * gsz)?;
        // The value ranges of scripts/sdpa_bwd_baseline.py's inputs (as P2c's).
        for (buf, lo, hi) in [
            (&q, -1.5, 1.5),
            (&k, -1.5, 1.5),
            (&v, -1.0, 1.0),
            (&d_o, -1.0, 1.0),
        ] {
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
        let t = |b: &DevBuf, h: usize, sl: usize, d: usize| Tensor4 {
            ptr: b.ptr,
            strides: strides(c, h, sl, d),
        };
        let stats_t = Tensor4 {
            ptr: stats.ptr,
            strides: [(c.hq * c.sq) as i64, c.sq as i64, 1, 1],
        };
        let scale = 1.0 / (c.dqk as f32).sqrt();
        let fwd = SdpaCall {
            io: c.io,
            o_f32: false,
            b: c.b,
            hq: c.hq,
            hk: c.hk,
            sq: c.sq,
            sk: c.sk,
            dqk: c.dqk,
            dv: c.dv,
            q: t(&q, c.hq, c.sq, c.dqk),
            k: t(&k, c.hk, c.sk, c.dqk),
            v: t(&v, c.hk, c.sk, c.dv),
            o: t(&o, c.hq, c.sq, c.dv),
            stats: stats_t,
            scale,
            causal_delta: c.causal,
        };
        self.poison(&o, DType::BF16)?;
        self.poison(&stats, DType::F32)?;
        // SAFETY: the buffers cover the views of `fwd`.
        unsafe { cudnn.forward(&s, &fwd)? };
        let bwd = SdpaBwdCall {
            io: c.io,
            b: c.b,
            hq: c.hq,
            hk: c.hk,
            sq: c.sq,
            sk: c.sk,
            dqk: c.dqk,
            dv: c.dv,
            q: fwd.q,
            k: fwd.k,
            v: fwd.v,
            o: fwd.o,
            d_o: t(&d_o, c.hq, c.sq, c.dv),
            stats: stats_t,
            grad_q: t(&dq, c.hq, c.sq, c.dqk),
            grad_k: t(&dk, c.hk, c.sk, c.dqk),
            grad_v: t(&dv, c.hk, c.sk, c.dv),
            scale,
            causal_delta: c.causal,
            route: c.route,
        };
        Ok(BwdBufs {
            _inputs: vec![q, k, v, o, d_o, stats],
            dq,
            dk,
            dv,
            bwd,
        })
    }

    /// Rows `[0, s)` of head `h`, batch `bi` of a 16-bit tensor (or an f32 one with `f32`) as
    /// f64, `d` wide.
    #[allow(clippy::too_many_arguments)]
    fn plane(
        &self,
        t: Tensor4,
        f32: bool,
        io: IoType,
        bi: usize,
        h: usize,
        s: usize,
        d: usize,
    ) -> Result<Plane> {
        let [s0, s1, s2, _] = t.strides.map(|x| x as usize);
        let first = bi * s0 + h * s1;
        let span = (s - 1) * s2 + d;
        let esz = if f32 { 4 } else { 2 };
        let base = t.ptr + (first * esz) as u64;
        let vals: Vec<f64> = if f32 {
            // SAFETY: the span lies inside the tensor's allocation.
            let h: Vec<f32> = unsafe { dtoh(&self.stream, base, span)? };
            h.into_iter().map(f64::from).collect()
        } else {
            // SAFETY: as above.
            let h: Vec<u16> = unsafe { dtoh(&self.stream, base, span)? };
            h.into_iter()
                .map(|x| match io {
                    IoType::Bf16 => bf16_to_f64(x),
                    IoType::F16 => half::f16::from_bits(x).to_f64(),
                })
                .collect()
        };
        let mut data = Vec::with_capacity(s * d);
        for r in 0..s {
            data.extend_from_slice(&vals[r * s2..r * s2 + d]);
        }
        Ok(Plane { d, data })
    }

    /// The host side of group (`bi`, K/V head `kh`).
    fn bwd_group(&self, c: &BwdCase, call: &SdpaBwdCall, bi: usize, kh: usize) -> Result<Group> {
        let g = c.hq / c.hk;
        let heads = kh * g..(kh + 1) * g;
        let planes = |t: Tensor4, d: usize| -> Result<Vec<Plane>> {
            heads
                .clone()
                .map(|h| self.plane(t, false, c.io, bi, h, c.sq, d))
                .collect()
        };
        let lse = heads
            .clone()
            .map(|h| {
                self.plane(call.stats, true, c.io, bi, h, c.sq, 1)
                    .map(|p| p.data)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Group {
            sq: c.sq,
            sk: c.sk,
            scale: call.scale as f64,
            causal: c.causal,
            q: planes(call.q, c.dqk)?,
            o: planes(call.o, c.dv)?,
            d_o: planes(call.d_o, c.dv)?,
            lse,
            k: self.plane(call.k, false, c.io, bi, kh, c.sk, c.dqk)?,
            v: self.plane(call.v, false, c.io, bi, kh, c.sk, c.dv)?,
        })
    }

    /// Row `r` of head `h`, batch `bi` of tensor `t` (16-bit, or f32 with `f32`) as f64.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        t: Tensor4,
        f32: bool,
        io: IoType,
        bi: usize,
        h: usize,
        r: usize,
        d: usize,
    ) -> Result<Vec<f64>> {
        let [s0, s1, s2, _] = t.strides.map(|x| x as usize);
        let at = Tensor4 {
            ptr: t.ptr + ((bi * s0 + h * s1 + r * s2) * if f32 { 4 } else { 2 }) as u64,
            strides: t.strides,
        };
        Ok(self.plane(at, f32, io, 0, 0, 1, d)?.data)
    }

    /// Sampled gradient rows of group (`bi`, `kh`): [got, given reference, exact reference
    /// (empty unless asked)].
    fn bwd_compare(
        &mut self,
        c: &BwdCase,
        call: &SdpaBwdCall,
        (bi, kh): (usize, usize),
        exact: bool,
    ) -> Result<[Vec<f64>; 3]> {
        let grp = self.bwd_group(c, call, bi, kh)?;
        let g = c.hq / c.hk;
        let mut rows = |n: usize, count: usize| -> Vec<usize> {
            let mut v: Vec<usize> = [0, 1, 63, 64, 127, 128, n / 2, n - 1]
                .into_iter()
                .filter(|r| *r < n)
                .collect();
            while v.len() < count {
                v.push((self.seed() % n as u64) as usize);
            }
            v
        };
        let qrows: Vec<(usize, usize)> = rows(c.sq, 12)
            .into_iter()
            .enumerate()
            .map(|(i, r)| (i % g, r))
            .collect();
        let krows = rows(c.sk, if c.timed { 6 } else { 12 });
        let terms = grp.terms(false);
        let exact_terms = exact.then(|| grp.terms(true));
        let mut out: [Vec<f64>; 3] = Default::default();
        for &(h, r) in &qrows {
            out[0].extend(self.row(call.grad_q, false, c.io, bi, kh * g + h, r, c.dqk)?);
            out[1].extend(grp.dq_row(&terms, h, r));
            if let Some(t) = &exact_terms {
                out[2].extend(grp.dq_row(t, h, r));
            }
        }
        let refs: Vec<_> = super::attn_bwd_ref::par_map(krows.len(), |i| {
            (
                grp.dkdv_row(&terms, krows[i]),
                exact_terms.as_ref().map(|t| grp.dkdv_row(t, krows[i])),
            )
        });
        for (&j, ((dk, dv), ex)) in krows.iter().zip(refs) {
            out[0].extend(self.row(call.grad_k, false, c.io, bi, kh, j, c.dqk)?);
            out[0].extend(self.row(call.grad_v, false, c.io, bi, kh, j, c.dv)?);
            out[1].extend(dk);
            out[1].extend(dv);
            if let Some((a, b)) = ex {
                out[2].extend(a);
                out[2].extend(b);
            }
        }
        Ok(out)
    }

    /// A workspace of the bench's for `call`.
    fn bwd_ws(&self, cudnn: &CudnnAttention, call: &SdpaBwdCall) -> Result<BwdWs> {
        let bytes = cudnn.prepare_backward(call)?;
        Ok(BwdWs {
            buf: dev_alloc(&self.stream, bytes)?,
        })
    }

    /// Runs and checks one case; times it when the case says so.
    fn bwd_case(&mut self, cudnn: &CudnnAttention, c: &BwdCase) -> Result<()> {
        let id = format!("P2b.{}", c.id);
        let bufs = self.bwd_bufs(cudnn, c)?;
        let call = bufs.bwd;
        let route = match cudnn.support_backward(&call) {
            Ok(r) => r,
            Err(e) => {
                // The unified operation is a probe: its refusal is the expected answer on
                // cuDNN 9.19, located and named; the composite graph must work.
                let probe = c.route == Some(Route::Unified);
                let msg = if probe {
                    format!("refused: {e}")
                } else {
                    format!("REFUSED: {e} FAIL")
                };
                self.push(&id, None, 0.0, (msg, probe));
                return Ok(());
            }
        };
        let s = self.stream.clone();
        let ws = self.bwd_ws(cudnn, &call)?;
        for b in [&bufs.dq, &bufs.dk, &bufs.dv] {
            self.poison(b, DType::BF16)?;
        }
        self.poison(&ws.buf, DType::F32)?;
        // SAFETY: the buffers cover the views of `call`; the workspace is the plan's size.
        unsafe { cudnn.backward_ws(&s, &call, ws.buf.ptr, ws.buf.bytes)? };
        let mut msgs = vec![format!("{route:?}")];
        let mut ok = true;
        if self.opts.check {
            // Non-finite values anywhere in the gradients (poison left unwritten, NaN traps).
            if c.io == IoType::Bf16 {
                let mut bad = 0;
                for b in [&bufs.dq, &bufs.dk, &bufs.dv] {
                    bad += self.nonfinite(b.ptr, b.bytes / 2, ElemType::BF16)?;
                }
                msgs.push(format!("non-finite {bad}"));
                ok &= bad == 0;
            }
            let exact = !c.timed;
            let mut groups = vec![(0, 0)];
            if c.b * c.hk > 1 {
                groups.push((c.b - 1, c.hk - 1));
            }
            let mut all: [Vec<f64>; 3] = Default::default();
            for grp in groups {
                for (a, v) in all.iter_mut().zip(self.bwd_compare(c, &call, grp, exact)?) {
                    a.extend(v);
                }
            }
            let (m1, ok1) = fmt_err("vs f64 given o/lse", &compare(&all[0], &all[1]), 2e-2);
            msgs.push(m1);
            ok &= ok1;
            if exact {
                let (m2, ok2) = fmt_err("vs f64 exact", &compare(&all[0], &all[2]), 3e-2);
                msgs.push(m2);
                ok &= ok2;
            }
        }
        let times = if c.timed {
            Some(self.time(|| {
                // SAFETY: as above.
                unsafe { cudnn.backward_ws(&s, &call, ws.buf.ptr, ws.buf.bytes) }
                    .map_err(RuntimeError::from)
            })?)
        } else {
            None
        };
        drop((bufs, ws));
        self.push(&id, times, call.flops(), (msgs.join("; "), ok));
        Ok(())
    }

    /// P2b: the cuDNN backward at the benchmark shapes and the check-only shapes, then the
    /// accumulation cost of a ring block.
    pub fn p2_cudnn_bwd(&mut self) -> Result<()> {
        let cudnn = match CudnnAttention::new(&self.ctx) {
            Ok(c) => c,
            Err(e) => {
                self.record_error("P2b.load", &e.into());
                return Ok(());
            }
        };
        let lib = cudnn.library();
        crate::outln!(
            "P2b cuDNN fused attention backward: cuDNN {} from {}",
            mercury_kernels::cuda::cudnn::version_string(lib.version),
            lib.origin
        );
        let only = self.opts.p2c_cases.clone();
        let cases: Vec<BwdCase> = if only.is_empty() {
            // The route probes last: a library that mishandles an operation it does not know
            // must not cost the other rows.
            let (probes, odd): (Vec<_>, Vec<_>) =
                odd_cases().into_iter().partition(|c| c.route.is_some());
            odd.into_iter().chain(perf()).chain(probes).collect()
        } else {
            perf()
                .into_iter()
                .filter(|c| only.iter().any(|id| id == c.id))
                .collect()
        };
        for c in &cases {
            if let Err(e) = self.bwd_case(&cudnn, c) {
                self.record_error(&format!("P2b.{}", c.id), &e);
            }
        }
        if only.is_empty() {
            let dk = DeviceKernels::load(&self.ctx, &self.dk_ptx)?;
            for causal in [None, Some(0)] {
                let id = format!(
                    "P2b.accumulate.b1h32s4kx4k.{}",
                    if causal.is_some() {
                        "causal"
                    } else {
                        "noncausal"
                    }
                );
                if let Err(e) = self.bwd_accumulate(&cudnn, &dk, &id, causal) {
                    self.record_error(&id, &e);
                }
            }
        }
        let st = cudnn.plan_stats();
        crate::outln!(
            "P2b plans built {} failed {} hits {}",
            st.built,
            st.failed,
            st.hits
        );
        Ok(())
    }

    /// The cost of a ring block's gradients into f32 accumulators, at one block of S32K over
    /// 8 ranks (B1 H32 4K x 4K D128), timed alternating: the backward alone, then the adds of
    /// its bf16 dQ, dK, dV into f32 accumulators (`mercury_add_bf16_f32`), as the executor
    /// does them (cuDNN 9.19 has no f32 or accumulating gradient output: `bwd_graph.rs`).
    fn bwd_accumulate(
        &mut self,
        cudnn: &CudnnAttention,
        dk: &DeviceKernels,
        id: &str,
        causal: Option<i64>,
    ) -> Result<()> {
        let c = case("", (1, 32, 32, 4096, 4096), (128, 128), causal, true);
        let bufs = self.bwd_bufs(cudnn, &c)?;
        let call = bufs.bwd;
        let ws = self.bwd_ws(cudnn, &call)?;
        let s = self.stream.clone();
        let n_q = c.b * c.hq * c.sq * c.dqk;
        let n_kv = c.b * c.hk * c.sk * c.dqk;
        let acc: Vec<DevBuf> = [n_q, n_kv, n_kv]
            .iter()
            .map(|n| dev_alloc(&s, n * 4))
            .collect::<Result<_>>()?;
        for a in &acc {
            let seed = self.seed();
            // SAFETY: f32 buffers of bytes / 4 values.
            unsafe {
                self.check
                    .fill_random_f32(&s, a.ptr, a.bytes / 4, seed, -1.0, 1.0)?
            };
        }
        let t = self.time_alternating(&mut [
            &mut || {
                // SAFETY: the buffers cover the call's views; the workspace is the plan's.
                unsafe { cudnn.backward_ws(&s, &call, ws.buf.ptr, ws.buf.bytes) }
                    .map_err(RuntimeError::from)
            },
            &mut || {
                // SAFETY: f32 accumulators and bf16 parts of these many elements.
                unsafe {
                    dk.add(&s, acc[0].ptr, bufs.dq.ptr, n_q, true)?;
                    dk.add(&s, acc[1].ptr, bufs.dk.ptr, n_kv, true)?;
                    dk.add(&s, acc[2].ptr, bufs.dv.ptr, n_kv, true)
                }
            },
        ])?;
        let (plain, adds) = (t[0].0, t[1].0);
        // The adds move the parts and read and write the f32 accumulators.
        let bytes = ((n_q + 2 * n_kv) * (2 + 4 + 4)) as f64;
        let msg = format!(
            "backward {plain:.3} ms + bf16 parts' adds {adds:.3} ms ({:.0} GB/s) = {:.3}x the backward",
            bytes / (adds * 1e-3) / 1e9,
            (plain + adds) / plain
        );
        drop((bufs, ws, acc));
        self.push(
            id,
            Some((plain + adds, t[0].1 + t[1].1)),
            call.flops(),
            (msg, true),
        );
        Ok(())
    }
}
