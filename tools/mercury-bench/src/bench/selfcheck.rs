//! The P0 plans: small plans exercising every collective, strided views, casts and copies,
//! each with its expected output computed on the host in f64 (run by P0 and by
//! `mercury-mgpu selfcheck` under a device map).

use super::*;

/// Expected output of a self-check from its (rounded) inputs.
pub type Expectation = Box<dyn Fn(&[Vec<f64>]) -> Vec<f64>>;

/// A small plan, the output buffer to read, the expected output from the (rounded) inputs.
pub struct SelfCheck {
    pub plan: Plan,
    pub output: usize,
    pub expect: Expectation,
    pub tol: f64,
}

pub(crate) fn view(slot: usize, offset: &[usize], extent: &[usize]) -> View {
    View {
        slot,
        region: Region {
            offset: offset.to_vec(),
            extent: extent.to_vec(),
        },
    }
}

pub(crate) fn fullv(slot: usize, shape: &[usize]) -> View {
    View {
        slot,
        region: Region::full(shape),
    }
}

pub(crate) fn slot(name: &str, dtype: DType, shape: &[usize], init: SlotInit) -> Slot {
    Slot {
        name: name.into(),
        dtype,
        shape: shape.to_vec(),
        init,
    }
}

pub(crate) fn buffer(name: &str, dtype: DType, shape: &[usize], role: Role) -> GlobalBuffer {
    GlobalBuffer {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
        role,
    }
}

fn from_global(buffer: usize, offset: &[usize], extent: &[usize]) -> SlotInit {
    SlotInit::FromGlobal {
        buffer,
        region: Region {
            offset: offset.to_vec(),
            extent: extent.to_vec(),
        },
    }
}

fn one_stage_plan(
    name: &str,
    buffers: Vec<GlobalBuffer>,
    n: usize,
    per_rank: impl Fn(usize) -> (Vec<Slot>, Stage, Vec<OutputPiece>),
) -> Plan {
    Plan {
        name: name.into(),
        mesh: vec![n],
        buffers,
        documents: vec![],
        ranks: (0..n)
            .map(|r| {
                let (slots, stage, outputs) = per_rank(r);
                RankProgram {
                    rank: r,
                    coords: vec![r],
                    slots,
                    stages: vec![stage],
                    outputs,
                }
            })
            .collect(),
    }
}

/// 4 ranks each hold a column block x[:, 2r..2r+2] of x [6, 8]; all-gather along axis 1
/// (strided destination chunks); every rank outputs its gathered copy into y[r].
pub fn selfcheck_allgather() -> SelfCheck {
    let n = 4;
    let plan = one_stage_plan(
        "allgather",
        vec![
            buffer("x", DType::F32, &[6, 8], Role::Input),
            buffer("y", DType::F32, &[4, 6, 8], Role::Output),
        ],
        n,
        |r| {
            (
                vec![
                    slot(
                        "part",
                        DType::F32,
                        &[6, 2],
                        from_global(0, &[0, 2 * r], &[6, 2]),
                    ),
                    slot("all", DType::F32, &[6, 8], SlotInit::Uninit),
                ],
                Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: (0..n).collect(),
                        collective: Collective::AllGather {
                            src: fullv(0, &[6, 2]),
                            dst: fullv(1, &[6, 8]),
                            axis: 1,
                        },
                    }],
                },
                vec![OutputPiece {
                    buffer: 1,
                    region: Region {
                        offset: vec![r, 0, 0],
                        extent: vec![1, 6, 8],
                    },
                    src: fullv(1, &[6, 8]),
                }],
            )
        },
    );
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| inp[0].repeat(4)),
        tol: 0.0,
    }
}

/// 3 ranks all-reduce (add) their row x[r] of x [3, 40] (f32 or bf16 slots).
pub fn selfcheck_allreduce(dtype: DType) -> SelfCheck {
    let n = 3;
    let plan = one_stage_plan(
        "allreduce",
        vec![
            buffer("x", dtype, &[3, 40], Role::Input),
            buffer("y", dtype, &[3, 40], Role::Output),
        ],
        n,
        |r| {
            (
                vec![slot("b", dtype, &[40], from_global(0, &[r, 0], &[1, 40]))],
                Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: (0..n).collect(),
                        collective: Collective::AllReduce {
                            bufs: vec![fullv(0, &[40])],
                            kind: CombineKind::Add,
                        },
                    }],
                },
                vec![OutputPiece {
                    buffer: 1,
                    region: Region {
                        offset: vec![r, 0],
                        extent: vec![1, 40],
                    },
                    src: fullv(0, &[40]),
                }],
            )
        },
    );
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| {
            let x = &inp[0];
            let s: Vec<f64> = (0..40).map(|j| x[j] + x[40 + j] + x[80 + j]).collect();
            s.repeat(3)
        }),
        tol: if dtype == DType::BF16 { 1e-2 } else { 1e-6 },
    }
}

/// 4 ranks reduce-scatter (add) x[r] [8, 4] along axis 0: rank p keeps rows 2p..2p+2.
pub fn selfcheck_reduce_scatter() -> SelfCheck {
    let n = 4;
    let plan = one_stage_plan(
        "reduce_scatter",
        vec![
            buffer("x", DType::F32, &[4, 8, 4], Role::Input),
            buffer("y", DType::F32, &[8, 4], Role::Output),
        ],
        n,
        |r| {
            (
                vec![
                    slot(
                        "src",
                        DType::F32,
                        &[8, 4],
                        from_global(0, &[r, 0, 0], &[1, 8, 4]),
                    ),
                    slot("dst", DType::F32, &[2, 4], SlotInit::Uninit),
                ],
                Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: (0..n).collect(),
                        collective: Collective::ReduceScatter {
                            src: fullv(0, &[8, 4]),
                            dst: fullv(1, &[2, 4]),
                            axis: 0,
                            kind: CombineKind::Add,
                        },
                    }],
                },
                vec![OutputPiece {
                    buffer: 1,
                    region: Region {
                        offset: vec![2 * r, 0],
                        extent: vec![2, 4],
                    },
                    src: fullv(1, &[2, 4]),
                }],
            )
        },
    );
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| {
            (0..32)
                .map(|e| (0..4).map(|r| inp[0][r * 32 + e]).sum())
                .collect()
        }),
        tol: 1e-6,
    }
}

/// The group of [`selfcheck_reduce`], not in rank order (roots are positions in it).
const REDUCE_GROUP: [usize; 4] = [3, 1, 0, 2];

/// 4 ranks over the group [3, 1, 0, 2] hold x[r] [6, 8] (f32 or bf16 slots) and reduce (add)
/// its column halves to two owners, as the lowering reduces a tile to the owners of its parts:
/// columns 0..4 (a strided view) to member 0 (rank 3), columns 4..8 to member 2 (rank 0), each
/// into its own [6, 4] slot; ranks 1 and 2 only send. y [6, 8] is the sum over ranks, its
/// halves output by the two roots.
pub fn selfcheck_reduce(dtype: DType) -> SelfCheck {
    let n = 4;
    let group = REDUCE_GROUP.to_vec();
    // (position in the group of the root, first column) of the two reduces.
    let reduces = [(0usize, 0usize), (2, 4)];
    let plan = one_stage_plan(
        "reduce",
        vec![
            buffer("x", dtype, &[4, 6, 8], Role::Input),
            buffer("y", dtype, &[6, 8], Role::Output),
        ],
        n,
        |r| {
            let mut slots = vec![slot(
                "x",
                dtype,
                &[6, 8],
                from_global(0, &[r, 0, 0], &[1, 6, 8]),
            )];
            let mut comm = Vec::new();
            let mut outputs = Vec::new();
            for (root, col) in reduces {
                let dst = (group[root] == r).then(|| {
                    slots.push(slot("y.reduced", dtype, &[6, 4], SlotInit::Uninit));
                    outputs.push(OutputPiece {
                        buffer: 1,
                        region: Region {
                            offset: vec![0, col],
                            extent: vec![6, 4],
                        },
                        src: fullv(slots.len() - 1, &[6, 4]),
                    });
                    fullv(slots.len() - 1, &[6, 4])
                });
                comm.push(CommOp::Collective {
                    group: group.clone(),
                    collective: Collective::Reduce {
                        src: view(0, &[0, col], &[6, 4]),
                        dst,
                        root,
                        kind: CombineKind::Add,
                    },
                });
            }
            (
                slots,
                Stage {
                    compute: vec![],
                    comm,
                },
                outputs,
            )
        },
    );
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| {
            (0..48)
                .map(|e| REDUCE_GROUP.iter().map(|r| inp[0][r * 48 + e]).sum())
                .collect()
        }),
        tol: if dtype == DType::BF16 { 2e-2 } else { 1e-6 },
    }
}

/// 3 ranks all-to-all: src x[p] [6, 5] split along axis 0, concatenated along axis 1 of
/// dst [2, 15]: dst_q[:, 5p..5p+5] = src_p[2q..2q+2, :].
pub fn selfcheck_all_to_all() -> SelfCheck {
    let n = 3;
    let plan = one_stage_plan(
        "all_to_all",
        vec![
            buffer("x", DType::F32, &[3, 6, 5], Role::Input),
            buffer("y", DType::F32, &[3, 2, 15], Role::Output),
        ],
        n,
        |r| {
            (
                vec![
                    slot(
                        "src",
                        DType::F32,
                        &[6, 5],
                        from_global(0, &[r, 0, 0], &[1, 6, 5]),
                    ),
                    slot("dst", DType::F32, &[2, 15], SlotInit::Uninit),
                ],
                Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: (0..n).collect(),
                        collective: Collective::AllToAll {
                            src: fullv(0, &[6, 5]),
                            dst: fullv(1, &[2, 15]),
                            split_axis: 0,
                            concat_axis: 1,
                        },
                    }],
                },
                vec![OutputPiece {
                    buffer: 1,
                    region: Region {
                        offset: vec![r, 0, 0],
                        extent: vec![1, 2, 15],
                    },
                    src: fullv(1, &[2, 15]),
                }],
            )
        },
    );
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| {
            let x = &inp[0];
            let mut y = vec![0.0; 3 * 2 * 15];
            for q in 0..3 {
                for p in 0..3 {
                    for i in 0..2 {
                        for j in 0..5 {
                            y[q * 30 + i * 15 + 5 * p + j] = x[p * 30 + (2 * q + i) * 5 + j];
                        }
                    }
                }
            }
            y
        }),
        tol: 0.0,
    }
}

/// 4 ranks, group [3, 1, 0, 2] (not rank order), broadcast from position 2 (rank 0).
pub fn selfcheck_broadcast() -> SelfCheck {
    let n = 4;
    let group = vec![3, 1, 0, 2];
    let plan = one_stage_plan(
        "broadcast",
        vec![
            buffer("x", DType::BF16, &[4, 16], Role::Input),
            buffer("y", DType::BF16, &[4, 16], Role::Output),
        ],
        n,
        |r| {
            (
                vec![slot(
                    "b",
                    DType::BF16,
                    &[16],
                    from_global(0, &[r, 0], &[1, 16]),
                )],
                Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: group.clone(),
                        collective: Collective::Broadcast {
                            buf: fullv(0, &[16]),
                            root: 2,
                        },
                    }],
                },
                vec![OutputPiece {
                    buffer: 1,
                    region: Region {
                        offset: vec![r, 0],
                        extent: vec![1, 16],
                    },
                    src: fullv(0, &[16]),
                }],
            )
        },
    );
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| inp[0][..16].repeat(4)),
        tol: 0.0,
    }
}

/// 3 ranks hold partial attention results (o [5, 8], lse [5]); all-reduce with lse merge;
/// compared with `kernels::cpu::lse_merge` in member order. Row 4 of rank 1 and row 3 of
/// every rank carry lse = -inf (empty partials).
pub fn selfcheck_allreduce_lse() -> SelfCheck {
    let n = 3;
    let plan = one_stage_plan(
        "allreduce_lse",
        vec![
            buffer("o", DType::F32, &[3, 5, 8], Role::Input),
            buffer("l", DType::F32, &[3, 5], Role::Input),
            buffer("y", DType::F32, &[3, 5, 9], Role::Output),
        ],
        n,
        |r| {
            (
                vec![
                    slot(
                        "o",
                        DType::F32,
                        &[5, 8],
                        from_global(0, &[r, 0, 0], &[1, 5, 8]),
                    ),
                    slot("lse", DType::F32, &[5], from_global(1, &[r, 0], &[1, 5])),
                    slot("ninf", DType::F32, &[5], SlotInit::NegInf),
                    slot("scratch_o", DType::F32, &[5, 8], SlotInit::Zero),
                ],
                Stage::default(),
                vec![
                    OutputPiece {
                        buffer: 2,
                        region: Region {
                            offset: vec![r, 0, 0],
                            extent: vec![1, 5, 8],
                        },
                        src: fullv(0, &[5, 8]),
                    },
                    OutputPiece {
                        buffer: 2,
                        region: Region {
                            offset: vec![r, 0, 8],
                            extent: vec![1, 5, 1],
                        },
                        src: fullv(1, &[5]),
                    },
                ],
            )
        },
    );
    // Two stages: stage 0 empties some partials (and merges an empty accumulator pair into
    // itself, which must leave it untouched), stage 1 all-reduces.
    let mut plan = plan;
    for r in 0..n {
        let mut compute = vec![ComputeOp::Combine {
            kind: CombineKind::LseMerge,
            acc: vec![fullv(3, &[5, 8]), fullv(2, &[5])],
            part: vec![fullv(3, &[5, 8]), fullv(2, &[5])],
        }];
        compute.push(ComputeOp::Copy {
            src: view(2, &[3], &[1]),
            dst: view(1, &[3], &[1]),
        });
        if r == 1 {
            compute.push(ComputeOp::Copy {
                src: view(2, &[4], &[1]),
                dst: view(1, &[4], &[1]),
            });
        }
        plan.ranks[r].stages = vec![
            Stage {
                compute,
                comm: vec![],
            },
            Stage {
                compute: vec![],
                comm: vec![CommOp::Collective {
                    group: (0..n).collect(),
                    collective: Collective::AllReduce {
                        bufs: vec![fullv(0, &[5, 8]), fullv(1, &[5])],
                        kind: CombineKind::LseMerge,
                    },
                }],
            },
        ];
    }
    SelfCheck {
        plan,
        output: 2,
        expect: Box::new(|inp| {
            let (o, l) = (&inp[0], &inp[1]);
            let mut lse: Vec<Vec<f64>> = (0..3).map(|r| l[r * 5..r * 5 + 5].to_vec()).collect();
            for l in lse.iter_mut() {
                l[3] = f64::NEG_INFINITY;
            }
            lse[1][4] = f64::NEG_INFINITY;
            let mut acc_o = o[0..40].to_vec();
            let mut acc_l = lse[0].clone();
            for r in 1..3 {
                cpu::lse_merge(&mut acc_o, &mut acc_l, &o[r * 40..r * 40 + 40], &lse[r], 8);
            }
            // Row 3 is empty everywhere: o keeps member 0's values (the kernels leave it).
            let mut out = Vec::new();
            for _ in 0..3 {
                for i in 0..5 {
                    out.extend_from_slice(&acc_o[i * 8..i * 8 + 8]);
                    out.push(acc_l[i]);
                }
            }
            out
        }),
        tol: 1e-5,
    }
}

/// 2 ranks: each sends a strided column block to the other (paired 2-D copies), then adds
/// what it received to its own block (f32), copies the sum into a transposed-shape slot and
/// outputs it; stage 2 moves a bf16 tile with a cast (f32 -> bf16 local copy).
pub fn selfcheck_sendrecv() -> SelfCheck {
    let n = 2;
    let mut plan = one_stage_plan(
        "sendrecv",
        vec![
            buffer("x", DType::F32, &[2, 6, 10], Role::Input),
            buffer("y", DType::F32, &[2, 24], Role::Output),
            buffer("z", DType::BF16, &[2, 24], Role::Output),
        ],
        n,
        |r| {
            (
                vec![
                    slot(
                        "x",
                        DType::F32,
                        &[6, 10],
                        from_global(0, &[r, 0, 0], &[1, 6, 10]),
                    ),
                    slot("rx", DType::F32, &[8, 7], SlotInit::Uninit),
                    slot("sum", DType::F32, &[24], SlotInit::Uninit),
                    slot("sum16", DType::BF16, &[4, 6], SlotInit::Uninit),
                ],
                Stage::default(),
                vec![
                    OutputPiece {
                        buffer: 1,
                        region: Region {
                            offset: vec![r, 0],
                            extent: vec![1, 24],
                        },
                        src: fullv(2, &[24]),
                    },
                    OutputPiece {
                        buffer: 2,
                        region: Region {
                            offset: vec![r, 0],
                            extent: vec![1, 24],
                        },
                        src: fullv(3, &[4, 6]),
                    },
                ],
            )
        },
    );
    for r in 0..n {
        let peer = 1 - r;
        plan.ranks[r].stages = vec![
            Stage {
                compute: vec![],
                comm: vec![
                    // x[1..5, 2..8] (4 x 6, strided) -> rx[2..6, 1..7] (strided).
                    CommOp::Send {
                        peer,
                        src: view(0, &[1, 2], &[4, 6]),
                        tag: 5,
                    },
                    CommOp::Recv {
                        peer,
                        dst: view(1, &[2, 1], &[4, 6]),
                        tag: 5,
                    },
                ],
            },
            Stage {
                compute: vec![
                    // sum = own block (packed) ; sum += received block (packed).
                    ComputeOp::Copy {
                        src: view(0, &[1, 2], &[4, 6]),
                        dst: fullv(2, &[24]),
                    },
                    ComputeOp::Combine {
                        kind: CombineKind::Add,
                        acc: vec![fullv(2, &[24])],
                        part: vec![view(1, &[2, 1], &[4, 6])],
                    },
                    ComputeOp::Copy {
                        src: fullv(2, &[24]),
                        dst: fullv(3, &[4, 6]),
                    },
                ],
                comm: vec![],
            },
        ];
    }
    SelfCheck {
        plan,
        output: 1,
        expect: Box::new(|inp| {
            let x = &inp[0];
            let mut y = Vec::new();
            for r in 0..2 {
                let p = 1 - r;
                for i in 0..4 {
                    for j in 0..6 {
                        y.push(x[r * 60 + (1 + i) * 10 + 2 + j] + x[p * 60 + (1 + i) * 10 + 2 + j]);
                    }
                }
            }
            y
        }),
        tol: 1e-6,
    }
}

mod compute;
pub use compute::{
    selfcheck_attention_masked_rows, selfcheck_gemm, selfcheck_gemm_accumulate,
    selfcheck_gemm_gelu, selfcheck_ring,
};
