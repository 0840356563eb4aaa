//! P1: the GEMM patch (cuBLASLt) against `cublasGemmEx`.

use super::*;

impl Bench {
    /// P1: GEMM patch (cuBLASLt) vs `cublasGemmEx`, 8192^3 bf16 (f32 accumulate).
    pub fn p1_gemm(&mut self, size: usize) -> Result<()> {
        crate::outln!("P1 GEMM {size}^3 bf16");
        let (m, n, k) = (size, size, size);
        let s = self.stream.clone();
        let a = dev_alloc(&s, m * k * 2)?;
        let b = dev_alloc(&s, k * n * 2)?;
        let c32 = dev_alloc(&s, m * n * 4)?;
        let c16 = dev_alloc(&s, m * n * 2)?;
        let c16d = dev_alloc(&s, m * n * 2)?;
        self.fill_bf16(&a, -1.0, 1.0)?;
        self.fill_bf16(&b, -1.0, 1.0)?;
        let gemm = GemmPatch::new(&self.ctx, GemmWorkspace::DEFAULT_BYTES)?;
        let ws = GemmWorkspace::new(&s, GemmWorkspace::DEFAULT_BYTES)?;
        let direct = CublasDirect::new(&self.ctx)?;
        let spec16 = GemmSpec::dense(m, n, k, ElemType::BF16, ElemType::BF16, false);
        let spec32 = GemmSpec::dense(m, n, k, ElemType::BF16, ElemType::F32, false);
        let flops = spec16.flops();

        let mut check16 = ("-".to_string(), true);
        let mut check32 = ("-".to_string(), true);
        let mut check_direct = ("-".to_string(), true);
        if self.opts.check {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed());
            let idx: Vec<i64> = (0..2048)
                .map(|_| rng.gen_range(0..(m * n) as i64))
                .collect();
            // f32 output: whole output written, sampled entries vs f32 reference, f64 spot.
            self.poison(&c32, DType::F32)?;
            // SAFETY: operands sized for the spec.
            unsafe { gemm.run(&s, &ws, &spec32, a.ptr, b.ptr, c32.ptr)? };
            let bad = self.nonfinite(c32.ptr, m * n, ElemType::F32)?;
            // SAFETY: as above.
            let (r, g) = unsafe {
                self.check
                    .gemm_entries(&s, &spec32, a.ptr, b.ptr, c32.ptr, &idx)?
            };
            let e = compare(
                &g.iter().map(|x| *x as f64).collect::<Vec<_>>(),
                &r.iter().map(|x| *x as f64).collect::<Vec<_>>(),
            );
            // f64 spot check of 6 entries against kernels::cpu::gemm.
            // SAFETY: `b` holds k * n bf16.
            let bh: Vec<u16> = unsafe { dtoh(&s, b.ptr, k * n)? };
            let mut spot_got = Vec::new();
            let mut spot_ref = Vec::new();
            for &e_idx in idx.iter().take(6) {
                let (i, j) = ((e_idx as usize) / n, (e_idx as usize) % n);
                // SAFETY: row i of a is k bf16 values inside the allocation.
                let arow: Vec<u16> = unsafe { dtoh(&s, a.ptr + (i * k * 2) as u64, k)? };
                let av: Vec<f64> = arow.iter().map(|x| bf16_to_f64(*x)).collect();
                let bcol: Vec<f64> = (0..k).map(|p| bf16_to_f64(bh[p * n + j])).collect();
                let mut out = [0.0];
                cpu::gemm(1, 1, k, &av, &bcol, &mut out, false);
                spot_ref.push(out[0]);
                // SAFETY: entry (i, j) of the f32 output.
                let gv: Vec<f32> = unsafe { dtoh(&s, c32.ptr + ((i * n + j) * 4) as u64, 1)? };
                spot_got.push(gv[0] as f64);
            }
            let spot = compare(&spot_got, &spot_ref);
            let (m1, ok1) = fmt_err("f32ref", &e, 1e-4);
            let (m2, ok2) = fmt_err("f64spot", &spot, 1e-4);
            check32 = (
                format!("{m1}; {m2}; nonfinite {bad}"),
                ok1 && ok2 && bad == 0,
            );
            // bf16 output of the patch and of cuBLAS direct.
            self.poison(&c16, DType::BF16)?;
            self.poison(&c16d, DType::BF16)?;
            // SAFETY: operands sized for the spec.
            unsafe {
                gemm.run(&s, &ws, &spec16, a.ptr, b.ptr, c16.ptr)?;
                direct.run(&s, &spec16, a.ptr, b.ptr, c16d.ptr)?;
            }
            let bad16 = self.nonfinite(c16.ptr, m * n, ElemType::BF16)?;
            let badd = self.nonfinite(c16d.ptr, m * n, ElemType::BF16)?;
            // SAFETY: as above.
            let (r16, g16) = unsafe {
                self.check
                    .gemm_entries(&s, &spec16, a.ptr, b.ptr, c16.ptr, &idx)?
            };
            // SAFETY: as above.
            let (_, gd) = unsafe {
                self.check
                    .gemm_entries(&s, &spec16, a.ptr, b.ptr, c16d.ptr, &idx)?
            };
            let f = |v: &[f32]| v.iter().map(|x| *x as f64).collect::<Vec<_>>();
            let e16 = compare(&f(&g16), &f(&r16));
            let ed = compare(&f(&gd), &f(&r16));
            let (m3, ok3) = fmt_err("f32ref", &e16, 1e-2);
            check16 = (format!("{m3}; nonfinite {bad16}"), ok3 && bad16 == 0);
            let (m4, ok4) = fmt_err("f32ref", &ed, 1e-2);
            check_direct = (format!("{m4}; nonfinite {badd}"), ok4 && badd == 0);
        }

        let t_direct =
            // SAFETY: operands sized for the spec/dims; outputs are overwritten.
            self.time(|| unsafe { Ok(direct.run(&s, &spec16, a.ptr, b.ptr, c16d.ptr)?) })?;
        self.push("P1.cublas_gemmex_bf16", Some(t_direct), flops, check_direct);
        let t_patch =
            // SAFETY: operands sized for the spec/dims; outputs are overwritten.
            self.time(|| unsafe { Ok(gemm.run(&s, &ws, &spec16, a.ptr, b.ptr, c16.ptr)?) })?;
        self.push("P1.patch_bf16_out", Some(t_patch), flops, check16.clone());
        // SAFETY: as above.
        let cand = unsafe { gemm.tune(&s, &ws, &spec16, a.ptr, b.ptr, c16.ptr, 5)? };
        crate::outln!(
            "  (cuBLASLt candidates, median ms: {})",
            cand.iter()
                .map(|t| format!("{t:.3}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let t_tuned =
            // SAFETY: operands sized for the spec/dims; outputs are overwritten.
            self.time(|| unsafe { Ok(gemm.run(&s, &ws, &spec16, a.ptr, b.ptr, c16.ptr)?) })?;
        self.push("P1.patch_bf16_out_tuned", Some(t_tuned), flops, check16);
        let t32 =
            // SAFETY: operands sized for the spec/dims; outputs are overwritten.
            self.time(|| unsafe { Ok(gemm.run(&s, &ws, &spec32, a.ptr, b.ptr, c32.ptr)?) })?;
        self.push("P1.patch_f32_out", Some(t32), flops, check32);
        Ok(())
    }
}
