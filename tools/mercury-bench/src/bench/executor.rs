//! P0: executor self-checks, the small plans of [`super::selfcheck`] run through the CUDA
//! executor and compared with host f64 results.

use super::*;

impl Bench {
    /// P0: executor self-checks on small plans (every collective, strided views, casts,
    /// a GEMM through the plan), against host f64 results.
    pub fn p0_executor(&mut self) -> Result<()> {
        crate::outln!(
            "P0 executor self-checks (device kernels: {})",
            self.dk_origin
        );
        let cases: Vec<(&str, SelfCheck)> = vec![
            ("P0.allgather_cols", selfcheck_allgather()),
            ("P0.allreduce_add_f32", selfcheck_allreduce(DType::F32)),
            ("P0.allreduce_add_bf16", selfcheck_allreduce(DType::BF16)),
            ("P0.reduce_scatter", selfcheck_reduce_scatter()),
            ("P0.reduce_f32", selfcheck_reduce(DType::F32)),
            ("P0.reduce_bf16", selfcheck_reduce(DType::BF16)),
            ("P0.all_to_all", selfcheck_all_to_all()),
            ("P0.broadcast", selfcheck_broadcast()),
            ("P0.allreduce_lse", selfcheck_allreduce_lse()),
            ("P0.sendrecv_strided_copy_add", selfcheck_sendrecv()),
            ("P0.gemm_plan", selfcheck_gemm()),
            ("P0.gemm_accumulate_beta1", selfcheck_gemm_accumulate()),
            ("P0.gemm_epilogue_gelu", selfcheck_gemm_gelu()),
            ("P0.ring4_acc_attn_causal", selfcheck_ring(true)),
            ("P0.ring4_acc_attn_noncausal", selfcheck_ring(false)),
            ("P0.attn_masked_rows", selfcheck_attention_masked_rows()),
        ];
        // Every case under both stage orderings (fresh inputs each time).
        for (id, case) in cases {
            let mut msgs = Vec::new();
            let mut ok = true;
            for sync in [StageSync::Barrier, StageSync::Peers] {
                let tag = match sync {
                    StageSync::Barrier => "barrier",
                    StageSync::Peers => "peers",
                };
                match self.run_selfcheck(&case, sync) {
                    Ok((e, nan)) => {
                        let (mut msg, o) = fmt_err("out", &e, case.tol);
                        if nan > 0 {
                            msg.push_str(&format!(" {nan} NaN FAIL"));
                        }
                        ok &= o && nan == 0;
                        msgs.push(format!("{tag}: {msg}"));
                    }
                    Err(e) => {
                        ok = false;
                        msgs.push(format!("{tag}: ERROR: {e}"));
                    }
                }
            }
            self.push(id, None, 0.0, (msgs.join("; "), ok));
        }
        Ok(())
    }

    fn run_selfcheck(&mut self, case: &SelfCheck, sync: StageSync) -> Result<(ErrStats, usize)> {
        let mut ex = CudaExecutor::new(
            self.ctx.clone(),
            case.plan.clone(),
            &self.dk_ptx,
            ExecOptions {
                sync,
                ..ExecOptions::default()
            },
        )?;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed());
        let mut inputs = Vec::new();
        for (i, b) in case.plan.buffers.iter().enumerate() {
            if b.role == Role::Input {
                let n: usize = b.shape.iter().product();
                let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
                ex.upload_input_f64(i, &v)?;
                // What the device holds after rounding to the buffer's dtype.
                inputs.push(
                    mercury_runtime::cuda::executor::HostData::from_f64(&v, b.dtype)
                        .to_f64(b.dtype),
                );
            } else {
                inputs.push(Vec::new());
            }
        }
        ex.run()?;
        let got = ex.download_f64(case.output)?;
        let want = (case.expect)(&inputs);
        let nan = got.iter().filter(|x| x.is_nan()).count();
        Ok((compare(&got, &want), nan))
    }
}
