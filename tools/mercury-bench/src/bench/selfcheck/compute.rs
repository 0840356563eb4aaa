//! The P0 plans that compute: GEMMs through the plan (k-split, accumulating, with the GeLU
//! epilogue), attention with rows that see no key, and a 4-rank ring.

use super::*;

/// 2 ranks compute a k-split GEMM (bf16 in, f32 partials, the second k half accumulated
/// through a strided output view), all-reduce the partials, output C = A B.
pub fn selfcheck_gemm() -> SelfCheck {
    let (m, n, k) = (48, 40, 64);
    let ranks = 2;
    let kh = k / ranks;
    let mut plan = one_stage_plan(
        "gemm",
        vec![
            buffer("a", DType::BF16, &[m, k], Role::Input),
            buffer("b", DType::BF16, &[k, n], Role::Input),
            buffer("c", DType::F32, &[m, n], Role::Output),
        ],
        ranks,
        |r| {
            (
                vec![
                    slot(
                        "a",
                        DType::BF16,
                        &[m, kh],
                        from_global(0, &[0, r * kh], &[m, kh]),
                    ),
                    slot(
                        "b",
                        DType::BF16,
                        &[kh, n],
                        from_global(1, &[r * kh, 0], &[kh, n]),
                    ),
                    // c lives in the right half of a wider slot: ldc = 2n.
                    slot("c", DType::F32, &[m, 2 * n], SlotInit::Zero),
                ],
                Stage::default(),
                vec![OutputPiece {
                    buffer: 2,
                    region: Region {
                        offset: vec![r * (m / 2), 0],
                        extent: vec![m / 2, n],
                    },
                    src: view(2, &[r * (m / 2), n], &[m / 2, n]),
                }],
            )
        },
    );
    for r in 0..ranks {
        plan.ranks[r].stages = vec![
            Stage {
                compute: vec![
                    ComputeOp::Patch {
                        patch: PatchKind::Gemm {
                            accumulate: false,
                            epilogue: None,
                        },
                        inputs: vec![
                            view(0, &[0, 0], &[m, kh / 2]),
                            view(1, &[0, 0], &[kh / 2, n]),
                        ],
                        outputs: vec![view(2, &[0, n], &[m, n])],
                    },
                    ComputeOp::Patch {
                        patch: PatchKind::Gemm {
                            accumulate: true,
                            epilogue: None,
                        },
                        inputs: vec![
                            view(0, &[0, kh / 2], &[m, kh / 2]),
                            view(1, &[kh / 2, 0], &[kh / 2, n]),
                        ],
                        outputs: vec![view(2, &[0, n], &[m, n])],
                    },
                ],
                comm: vec![],
            },
            Stage {
                compute: vec![],
                comm: vec![CommOp::Collective {
                    group: vec![0, 1],
                    collective: Collective::AllReduce {
                        bufs: vec![view(2, &[0, n], &[m, n])],
                        kind: CombineKind::Add,
                    },
                }],
            },
        ];
    }
    SelfCheck {
        plan,
        output: 2,
        expect: Box::new(move |inp| {
            let mut c = vec![0.0; m * n];
            cpu::gemm(m, n, k, &inp[0], &inp[1], &mut c, false);
            c
        }),
        tol: 1e-5,
    }
}

/// Buffers 0 and 1 and slots 0 and 1 of the one-rank GEMM self-checks: `a [m, k]` and
/// `b [k, n]`, bf16 inputs, each slot loaded whole from its buffer.
fn gemm_inputs(m: usize, n: usize, k: usize) -> (Vec<GlobalBuffer>, Vec<Slot>) {
    (
        vec![
            buffer("a", DType::BF16, &[m, k], Role::Input),
            buffer("b", DType::BF16, &[k, n], Role::Input),
        ],
        vec![
            slot("a", DType::BF16, &[m, k], from_global(0, &[0, 0], &[m, k])),
            slot("b", DType::BF16, &[k, n], from_global(1, &[0, 0], &[k, n])),
        ],
    )
}

/// One rank: C, an f32 slot initialised from an input buffer (arbitrary values), gets A B
/// added in two k halves (`Gemm { accumulate: true }`, cuBLASLt beta = 1), the second half
/// through sub-block views of A and B; output C0 + A B.
pub fn selfcheck_gemm_accumulate() -> SelfCheck {
    let (m, n, k) = (40, 24, 48);
    let kh = k / 2;
    let (mut buffers, mut slots) = gemm_inputs(m, n, k);
    buffers.push(buffer("c0", DType::F32, &[m, n], Role::Input));
    buffers.push(buffer("c", DType::F32, &[m, n], Role::Output));
    slots.push(slot(
        "c",
        DType::F32,
        &[m, n],
        from_global(2, &[0, 0], &[m, n]),
    ));
    let mut plan = one_stage_plan("gemm_accumulate", buffers, 1, |_| {
        (
            slots.clone(),
            Stage::default(),
            vec![OutputPiece {
                buffer: 3,
                region: Region::full(&[m, n]),
                src: fullv(2, &[m, n]),
            }],
        )
    });
    plan.ranks[0].stages = vec![Stage {
        compute: (0..2)
            .map(|h| ComputeOp::Patch {
                patch: PatchKind::Gemm {
                    accumulate: true,
                    epilogue: None,
                },
                inputs: vec![
                    view(0, &[0, h * kh], &[m, kh]),
                    view(1, &[h * kh, 0], &[kh, n]),
                ],
                outputs: vec![fullv(2, &[m, n])],
            })
            .collect(),
        comm: vec![],
    }];
    SelfCheck {
        plan,
        output: 3,
        expect: Box::new(move |inp| {
            let mut c = inp[2].clone();
            cpu::gemm(m, n, k, &inp[0], &inp[1], &mut c, true);
            c
        }),
        tol: 1e-5,
    }
}

/// One rank: `C = GeLU(A B)` through the gemm epilogue (cuBLASLt `CUBLASLT_EPILOGUE_GELU`),
/// bf16 in, f32 out, C the left half of a wider slot (ldc = 2n); against the tanh-form GeLU
/// ([`UnaryFn::Gelu`], what the lowering's fusion replaces) of the f64 product. The f32 output
/// and tolerance 1e-5 tell the tanh form from erf's (they differ by up to ~5e-4).
pub fn selfcheck_gemm_gelu() -> SelfCheck {
    let (m, n, k) = (72, 40, 64);
    let (mut buffers, mut slots) = gemm_inputs(m, n, k);
    buffers.push(buffer("c", DType::F32, &[m, n], Role::Output));
    slots.push(slot("c", DType::F32, &[m, 2 * n], SlotInit::Zero));
    let mut plan = one_stage_plan("gemm_gelu", buffers, 1, |_| {
        (
            slots.clone(),
            Stage::default(),
            vec![OutputPiece {
                buffer: 2,
                region: Region::full(&[m, n]),
                src: view(2, &[0, 0], &[m, n]),
            }],
        )
    });
    plan.ranks[0].stages = vec![Stage {
        compute: vec![ComputeOp::Patch {
            patch: PatchKind::Gemm {
                accumulate: false,
                epilogue: Some(UnaryFn::Gelu),
            },
            inputs: vec![fullv(0, &[m, k]), fullv(1, &[k, n])],
            outputs: vec![view(2, &[0, 0], &[m, n])],
        }],
        comm: vec![],
    }];
    SelfCheck {
        plan,
        output: 2,
        expect: Box::new(move |inp| {
            let mut c = vec![0.0; m * n];
            cpu::gemm(m, n, k, &inp[0], &inp[1], &mut c, false);
            c.iter().map(|x| UnaryFn::Gelu.apply(*x)).collect()
        }),
        tol: 1e-5,
    }
}

/// The RingAttention plan of P3 (one accumulating attention patch per step, no merge pass)
/// at a small ragged size: 4 ranks of 200 rows (partial query tiles and key blocks), GQA
/// 4q/2kv, d 128; o against `kernels::cpu::attention` over the whole sequence in f64.
/// One rank, two causal attention blocks whose keys start after the first queries: the
/// first block (no accumulation) leaves its leading 37 rows with no visible key (o = 0,
/// lse = -inf), the second accumulates keys 128..256 placed 165 positions on, which the first
/// 165 rows do not see (left untouched). The query rows are a view into a wider slot. Checks
/// the attention patch's handling of rows that see no key, on whichever patch the executor
/// picked (cuDNN splits them off).
pub fn selfcheck_attention_masked_rows() -> SelfCheck {
    let (hq, hk, sq, sk, d, scale) = (4, 2, 300, 256, 128, 0.08);
    let (koff, pad) = (37, 20);
    let patch = |accumulate: bool, k_offset: usize| PatchKind::Attention {
        causal: true,
        scale,
        q_offset: 0,
        k_offset,
        mask: Default::default(),
        accumulate,
    };
    let inputs = |lo: usize| {
        vec![
            fullv(0, &[1, hq, sq, d]),
            view(1, &[0, 0, lo, 0], &[1, hk, 128, d]),
            view(2, &[0, 0, lo, 0], &[1, hk, 128, d]),
        ]
    };
    // o and lse are the middle rows of wider slots (strided accumulator views).
    let outs = || {
        vec![
            view(3, &[0, 0, pad, 0], &[1, hq, sq, d]),
            view(4, &[0, 0, pad], &[1, hq, sq]),
        ]
    };
    let whole = |n: usize, e: &[usize]| from_global(n, &vec![0; e.len()], e);
    let mut plan = one_stage_plan(
        "attention-masked-rows",
        vec![
            buffer("q", DType::BF16, &[1, hq, sq, d], Role::Input),
            buffer("k", DType::BF16, &[1, hk, sk, d], Role::Input),
            buffer("v", DType::BF16, &[1, hk, sk, d], Role::Input),
            buffer("o", DType::F32, &[1, hq, sq, d], Role::Output),
        ],
        1,
        |_| {
            (
                vec![
                    slot("q", DType::BF16, &[1, hq, sq, d], whole(0, &[1, hq, sq, d])),
                    slot("k", DType::BF16, &[1, hk, sk, d], whole(1, &[1, hk, sk, d])),
                    slot("v", DType::BF16, &[1, hk, sk, d], whole(2, &[1, hk, sk, d])),
                    slot("o", DType::F32, &[1, hq, sq + 2 * pad, d], SlotInit::Uninit),
                    slot("lse", DType::F32, &[1, hq, sq + 2 * pad], SlotInit::Uninit),
                ],
                Stage {
                    compute: vec![
                        ComputeOp::Patch {
                            patch: patch(false, koff),
                            inputs: inputs(0),
                            outputs: outs(),
                        },
                        ComputeOp::Patch {
                            patch: patch(true, koff + 128),
                            inputs: inputs(128),
                            outputs: outs(),
                        },
                    ],
                    comm: vec![],
                },
                vec![OutputPiece {
                    buffer: 3,
                    region: Region {
                        offset: vec![0; 4],
                        extent: vec![1, hq, sq, d],
                    },
                    src: view(3, &[0, 0, pad, 0], &[1, hq, sq, d]),
                }],
            )
        },
    );
    plan.name = "attention-masked-rows".into();
    SelfCheck {
        plan,
        output: 3,
        expect: Box::new(move |inp| {
            let mut o = vec![0.0; hq * sq * d];
            let mut lse = vec![0.0; hq * sq];
            cpu::attention(
                &inp[0],
                &inp[1],
                &inp[2],
                &mut o,
                &mut lse,
                AttnDims {
                    b: 1,
                    hq,
                    hk,
                    sq,
                    sk,
                    d,
                },
                AttnParams {
                    causal: true,
                    scale,
                    q_offset: 0,
                    k_offset: koff,
                },
            );
            o
        }),
        tol: 1e-2,
    }
}

pub fn selfcheck_ring(causal: bool) -> SelfCheck {
    let (ranks, hq, hk, seq, d, scale) = (4, 4, 2, 800, 128, 0.09);
    let spec = RingSpec {
        ranks,
        b: 1,
        hq,
        hk,
        seq,
        d,
        causal,
        scale,
    };
    let plan = match ring_attention_plan(&spec) {
        Ok(p) => p,
        Err(e) => panic!("ring self-check plan: {e}"),
    };
    SelfCheck {
        plan,
        output: BUF_O,
        expect: Box::new(move |inp| {
            let mut o = vec![0.0; hq * seq * d];
            let mut lse = vec![0.0; hq * seq];
            cpu::attention(
                &inp[BUF_Q],
                &inp[BUF_K],
                &inp[BUF_V],
                &mut o,
                &mut lse,
                AttnDims {
                    b: 1,
                    hq,
                    hk,
                    sq: seq,
                    sk: seq,
                    d,
                },
                AttnParams {
                    causal,
                    scale,
                    q_offset: 0,
                    k_offset: 0,
                },
            );
            o
        }),
        // bf16 probabilities in P V: ~1e-3 relative.
        tol: 1e-2,
    }
}
