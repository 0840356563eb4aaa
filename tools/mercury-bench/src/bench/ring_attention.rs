//! P3: RingAttention on virtual ranks (the hand-written [`crate::ring`] plan) against the
//! single-device patch, and the merge error over the ring size.

use super::attention::{cudnn_call_of, dense_attn};
use super::*;

impl Bench {
    /// P3: RingAttention on `ranks` virtual ranks vs the single-device patch, with the cuDNN
    /// patch (the executor's default) and with the NVRTC kernel; then the merge error over
    /// 2 to 64 virtual ranks.
    pub fn p3_ring(&mut self, ranks: usize, seq: usize) -> Result<()> {
        crate::outln!("P3 RingAttention, {ranks} virtual ranks on one GPU, B1 H32 S{seq} D128");
        for (backend, defer, tag) in [
            (AttnBackend::Cudnn, true, ""),
            (AttnBackend::Cudnn, false, ".merge_each"),
            (AttnBackend::Nvrtc, false, ".nvrtc"),
        ] {
            for causal in [true, false] {
                let id = format!(
                    "P3.ring{ranks}.{}{tag}",
                    if causal { "causal" } else { "noncausal" },
                );
                let opts = ExecOptions {
                    attention: backend,
                    defer_merges: defer,
                    ..ExecOptions::default()
                };
                if let Err(e) = self.p3_case(&id, ranks, seq, causal, opts) {
                    self.record_error(&id, &e);
                }
            }
        }
        if self.opts.check {
            if let Err(e) = self.p3_error_growth() {
                self.record_error("P3.merge_error", &e);
            }
        }
        Ok(())
    }

    fn p3_case(
        &mut self,
        id: &str,
        ranks: usize,
        seq: usize,
        causal: bool,
        opts: ExecOptions,
    ) -> Result<()> {
        let backend = opts.attention;
        let (b, hq, hk, d) = (1, 32, 32, 128);
        let spec = RingSpec {
            ranks,
            b,
            hq,
            hk,
            seq,
            d,
            causal,
            scale: 1.0 / (d as f64).sqrt(),
        };
        let plan = ring_attention_plan(&spec).map_err(RuntimeError::Schedule)?;
        let mut ex = CudaExecutor::new(self.ctx.clone(), plan, &self.dk_ptx, opts)?;
        let fell_back: Vec<&String> = ex
            .warnings()
            .iter()
            .filter(|w| w.contains("attention"))
            .collect();
        if backend == AttnBackend::Cudnn && !fell_back.is_empty() {
            return Err(RuntimeError::Unsupported(format!(
                "the cuDNN ring did not run on cuDNN: {fell_back:?}"
            )));
        }
        let up = ex.upload_stream().clone();
        for (buf, lo, hi) in [(BUF_Q, -1.5, 1.5), (BUF_K, -1.5, 1.5), (BUF_V, -1.0, 1.0)] {
            let n = if buf == BUF_Q {
                b * hq * seq * d
            } else {
                b * hk * seq * d
            };
            let seed = self.seed();
            // SAFETY: the global buffer holds `n` bf16 values.
            unsafe {
                self.check
                    .fill_random_bf16(&up, ex.global_ptr(buf)?, n, seed, lo, hi)?
            };
            ex.mark_input_written(buf)?;
        }
        let s = self.stream.clone();
        up.synchronize()
            .map_err(RuntimeError::driver("synchronize"))?;
        // The single-device patch on the same global inputs.
        let o1 = dev_alloc(&s, b * hq * seq * d * 4)?;
        let l1 = dev_alloc(&s, b * hq * seq * 4)?;
        let single = dense_attn(
            (b, hq, hk, seq, d),
            causal,
            spec.scale,
            [
                ex.global_ptr(BUF_Q)?,
                ex.global_ptr(BUF_K)?,
                ex.global_ptr(BUF_V)?,
                o1.ptr,
                l1.ptr,
            ],
        );
        let ring_out = AttnLaunch {
            o: Strided3::dense(ex.global_ptr(BUF_O)?, hq, seq, d),
            lse: Strided3::dense(ex.global_ptr(BUF_LSE)?, hq, seq, 1),
            ..single
        };
        let mut rows = Vec::new();
        if self.opts.check {
            self.poison(&o1, DType::F32)?;
            self.poison(&l1, DType::F32)?;
            // SAFETY: buffers sized for the dims.
            unsafe { self.attention.launch(&s, &single)? };
            rows = self.sample_rows(b, hq, seq, 48);
            // Rows at shard boundaries.
            let c = seq / ranks;
            for r in 1..ranks {
                rows.push((r * c) as i64);
                rows.push((r * c - 1) as i64);
            }
        }
        let flops = attn_flops(b, hq, seq, seq, d, causal);
        // The same executor and inputs under both stage orderings; each run poisons the
        // outputs and starts from freshly initialised slots.
        for (sync, suffix) in [(StageSync::Barrier, ""), (StageSync::Peers, ".peers")] {
            ex.set_sync(sync);
            let first = ex.run()?;
            let mut chk = ("-".to_string(), true);
            if self.opts.check {
                let (mut msg, mut ok) = self.check_attention(&ring_out, &rows, 2, true)?;
                // Ring vs single-device patch on the same rows.
                // SAFETY: both outputs are written.
                let (a1, a2) = unsafe {
                    (
                        self.check.attention_rows(&s, &ring_out, &rows)?,
                        self.check.attention_rows(&s, &single, &rows)?,
                    )
                };
                let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
                let e = compare(&f(&a1.o_got), &f(&a2.o_got));
                let (m, o) = fmt_err("vs_single", &e, 1e-2);
                msg.push_str(&format!("; {m}"));
                ok &= o;
                chk = (msg, ok);
            }
            let mut stages = Vec::new();
            let mut totals = Vec::new();
            for i in 0..self.opts.warmup + self.opts.reps {
                let t = ex.run()?;
                if i >= self.opts.warmup {
                    stages.push(t.stages_ms as f64);
                    totals.push((t.init_ms + t.stages_ms + t.outputs_ms) as f64);
                }
            }
            let ts = median_min(stages);
            let (tot, _) = median_min(totals);
            crate::outln!(
                "  ({id}{suffix}: first run init {:.2} ms; median stages {:.3} ms (min {:.3}), whole run incl. shard copies and output gather {:.3} ms)",
                first.init_ms, ts.0, ts.1, tot
            );
            self.push(&format!("{id}{suffix}"), Some(ts), flops, chk);
        }
        let t1 = if backend == AttnBackend::Cudnn {
            // The single-device cuDNN patch: the whole problem in one call (bf16 O, f32 LSE).
            let cudnn = CudnnAttention::new(&self.ctx)?;
            let ob = dev_alloc(&s, b * hq * seq * d * 2)?;
            let mut call = cudnn_call_of(&single)?;
            call.o = Tensor4::dense(ob.ptr, [b, hq, seq, d]);
            call.stats = Tensor4::dense(l1.ptr, [b, hq, seq, 1]);
            // SAFETY: buffers sized for the dims.
            self.time(|| unsafe { Ok(cudnn.forward(&s, &call)?) })?
        } else {
            let attn = &self.attention;
            // SAFETY: buffers sized for the dims.
            self.time(|| unsafe { Ok(attn.launch(&s, &single)?) })?
        };
        self.push(
            &format!("{id}.single_device"),
            Some(t1),
            flops,
            ("-".into(), true),
        );
        drop(ex);
        Ok(())
    }

    /// The ring's error against the f32 reference, over 2 to 64 virtual ranks (B1 H8 S16K,
    /// causal and not), next to the single-device cuDNN patch's error on the same rows: the
    /// log-sum-exp merges must not make it grow with the ring (goal: within 1.5x).
    fn p3_error_growth(&mut self) -> Result<()> {
        let (b, hq, hk, seq, d) = (1, 8, 8, 16384, 128);
        let s = self.stream.clone();
        let cudnn = CudnnAttention::new(&self.ctx)?;
        for causal in [false, true] {
            let mut msgs = Vec::new();
            let mut ok = true;
            let mut worst: f64 = 0.0;
            for ranks in [2usize, 4, 8, 16, 32, 64] {
                let spec = RingSpec {
                    ranks,
                    b,
                    hq,
                    hk,
                    seq,
                    d,
                    causal,
                    scale: 1.0 / (d as f64).sqrt(),
                };
                let plan = ring_attention_plan(&spec).map_err(RuntimeError::Schedule)?;
                let mut ex = CudaExecutor::new(
                    self.ctx.clone(),
                    plan,
                    &self.dk_ptx,
                    ExecOptions::default(),
                )?;
                let up = ex.upload_stream().clone();
                for (buf, lo, hi) in [(BUF_Q, -1.5, 1.5), (BUF_K, -1.5, 1.5), (BUF_V, -1.0, 1.0)] {
                    let seed = self.seed();
                    // SAFETY: each global buffer holds b * h * seq * d bf16 values.
                    unsafe {
                        self.check.fill_random_bf16(
                            &up,
                            ex.global_ptr(buf)?,
                            b * hq * seq * d,
                            seed,
                            lo,
                            hi,
                        )?
                    };
                    ex.mark_input_written(buf)?;
                }
                up.synchronize()
                    .map_err(RuntimeError::driver("synchronize"))?;
                ex.run()?;
                let ptr = |i| ex.global_ptr(i);
                let single = dense_attn(
                    (b, hq, hk, seq, d),
                    causal,
                    spec.scale,
                    [
                        ptr(BUF_Q)?,
                        ptr(BUF_K)?,
                        ptr(BUF_V)?,
                        ptr(BUF_O)?,
                        ptr(BUF_LSE)?,
                    ],
                );
                let rows = self.sample_rows(b, hq, seq, 64);
                // SAFETY: the ring's outputs are written.
                let ring = unsafe { self.check.attention_rows(&s, &single, &rows)? };
                // The single-device cuDNN patch on the same inputs.
                let ob = dev_alloc(&s, b * hq * seq * d * 2)?;
                let lb = dev_alloc(&s, b * hq * seq * 4)?;
                let mut call = cudnn_call_of(&single)?;
                call.o = Tensor4::dense(ob.ptr, [b, hq, seq, d]);
                call.stats = Tensor4::dense(lb.ptr, [b, hq, seq, 1]);
                // SAFETY: buffers sized for the dims.
                unsafe { cudnn.forward(&s, &call)? };
                // SAFETY: written above.
                let one = unsafe { self.check.sdpa_rows(&s, &call, &rows)? };
                let (er, e1) = (ring.o_err(), one.o_err());
                let ratio = er.rel / e1.rel.max(1e-12);
                worst = worst.max(ratio);
                ok &= er.bad == 0 && ratio <= 1.5;
                msgs.push(format!("{ranks}: {:.2e}/{:.2e}={ratio:.2}", er.rel, e1.rel));
            }
            let id = format!(
                "P3.merge_error.{}",
                if causal { "causal" } else { "noncausal" }
            );
            let msg = format!(
                "ring/single-cuDNN error, ranks 2..64 (worst {worst:.2}x, goal <= 1.5x{}): {}",
                if ok { "" } else { " FAIL" },
                msgs.join(", ")
            );
            self.push(&id, None, 0.0, (msg, ok));
        }
        Ok(())
    }
}
