use super::*;
use crate::cuda::error::RuntimeError;
use crate::cuda::mem::{MemTable, SlotInfo};
use mercury_kernels::cuda::{ElemType, Strided3};
use mercury_plan::Region;
use mercury_plan::{CombineKind, ComputeOp, DType, PatchKind, View};

fn v(slot: usize, off: &[usize], ext: &[usize]) -> View {
    View {
        slot,
        region: Region {
            offset: off.to_vec(),
            extent: ext.to_vec(),
        },
    }
}

fn table() -> MemTable {
    let s = |ptr, dtype, shape: &[usize]| SlotInfo {
        ptr,
        dtype,
        shape: shape.to_vec(),
    };
    MemTable {
        ranks: vec![vec![
            s(0x10000, DType::BF16, &[64, 32]),          // 0: a
            s(0x20000, DType::BF16, &[32, 48]),          // 1: b
            s(0x30000, DType::F32, &[2, 64, 48]),        // 2: c (two tiles)
            s(0x40000, DType::BF16, &[1, 4, 256, 128]),  // 3: q
            s(0x80000, DType::BF16, &[1, 2, 512, 128]),  // 4: k
            s(0x100000, DType::BF16, &[1, 2, 512, 128]), // 5: v
            s(0x200000, DType::F32, &[1, 4, 256, 128]),  // 6: o
            s(0x400000, DType::F32, &[1, 4, 256]),       // 7: lse
            s(0x500000, DType::F32, &[4, 100]),          // 8: f32 scratch
            s(0x600000, DType::F32, &[1, 4, 256, 512]),  // 9: scores
        ]],
        ..MemTable::default()
    }
}

#[test]
fn gemm_resolution() {
    let t = table();
    let op = ComputeOp::Patch {
        patch: PatchKind::Gemm {
            accumulate: true,
            epilogue: None,
        },
        inputs: vec![v(0, &[0, 0], &[64, 32]), v(1, &[0, 0], &[32, 48])],
        outputs: vec![v(2, &[1, 0, 0], &[1, 64, 48])],
    };
    match resolve(&t, 0, &op).unwrap() {
        ComputeLaunch::Gemm { spec, c, .. } => {
            assert_eq!((spec.m, spec.n, spec.k), (64, 48, 32));
            assert_eq!((spec.lda, spec.ldb, spec.ldc), (32, 48, 48));
            assert_eq!(spec.out_type, ElemType::F32);
            assert!(spec.accumulate);
            assert_eq!(c.ptr, Some(0x30000 + 64 * 48 * 4));
        }
        other => panic!("{other:?}"),
    }
    // Column sub-block of b: ldb stays 48.
    let op = ComputeOp::Patch {
        patch: PatchKind::Gemm {
            accumulate: false,
            epilogue: None,
        },
        inputs: vec![v(0, &[0, 0], &[64, 32]), v(1, &[0, 16], &[32, 16])],
        outputs: vec![v(2, &[0, 0, 0], &[1, 64, 16])],
    };
    match resolve(&t, 0, &op).unwrap() {
        ComputeLaunch::Gemm { spec, b, .. } => {
            assert_eq!((spec.n, spec.ldb, spec.ldc), (16, 48, 48));
            assert_eq!(b.ptr, Some(0x20000 + 16 * 2));
        }
        other => panic!("{other:?}"),
    }
    // Inner dimensions disagree.
    let bad = ComputeOp::Patch {
        patch: PatchKind::Gemm {
            accumulate: false,
            epilogue: None,
        },
        inputs: vec![v(0, &[0, 0], &[64, 16]), v(1, &[0, 0], &[32, 48])],
        outputs: vec![v(2, &[0, 0, 0], &[1, 64, 48])],
    };
    assert!(matches!(
        resolve(&t, 0, &bad),
        Err(RuntimeError::Schedule(_))
    ));
}

#[test]
fn attention_resolution() {
    let t = table();
    let op = ComputeOp::Patch {
        patch: PatchKind::Attention {
            causal: true,
            scale: 0.088,
            q_offset: 256,
            k_offset: 0,
            mask: Default::default(),
            accumulate: false,
        },
        inputs: vec![
            v(3, &[0, 0, 128, 0], &[1, 4, 128, 128]),
            v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
            v(5, &[0, 0, 0, 0], &[1, 2, 512, 128]),
        ],
        outputs: vec![
            v(6, &[0, 0, 128, 0], &[1, 4, 128, 128]),
            v(7, &[0, 0, 128], &[1, 4, 128]),
        ],
    };
    match resolve(&t, 0, &op).unwrap() {
        ComputeLaunch::Attention { launch: a, via } => {
            assert_eq!(via, AttnVia::Undecided);
            assert_eq!(
                (a.dims.hq, a.dims.hk, a.dims.sq, a.dims.sk),
                (4, 2, 128, 512)
            );
            // Tile view: base moved by 128 rows, head stride of the whole slot.
            assert_eq!(a.q.ptr, 0x40000 + 128 * 128 * 2);
            assert_eq!((a.q.sh, a.q.sr), (256 * 128, 128));
            assert_eq!(a.lse.ptr, 0x400000 + 128 * 4);
            assert_eq!((a.lse.sh, a.lse.sr), (256, 1));
            assert!(a.params.causal);
            assert!(!a.accumulate);
        }
        other => panic!("{other:?}"),
    }
    // Accumulating: the same launch, merging into the outputs.
    let acc = ComputeOp::Patch {
        patch: PatchKind::Attention {
            causal: false,
            scale: 0.088,
            q_offset: 0,
            k_offset: 0,
            mask: Default::default(),
            accumulate: true,
        },
        inputs: vec![
            v(3, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(4, &[0, 0, 256, 0], &[1, 2, 256, 128]),
            v(5, &[0, 0, 256, 0], &[1, 2, 256, 128]),
        ],
        outputs: vec![
            v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(7, &[0, 0, 0], &[1, 4, 256]),
        ],
    };
    match resolve(&t, 0, &acc).unwrap() {
        ComputeLaunch::Attention { launch: a, .. } => {
            assert!(a.accumulate);
            assert_eq!((a.dims.sq, a.dims.sk), (256, 256));
            assert_eq!(a.k.ptr, 0x80000 + 256 * 128 * 2);
            assert_eq!(a.o.ptr, 0x200000);
        }
        other => panic!("{other:?}"),
    }
    // f32 q is rejected with a clear message.
    let bad = ComputeOp::Patch {
        patch: PatchKind::Attention {
            causal: false,
            scale: 1.0,
            q_offset: 0,
            k_offset: 0,
            mask: Default::default(),
            accumulate: false,
        },
        inputs: vec![
            v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
            v(5, &[0, 0, 0, 0], &[1, 2, 512, 128]),
        ],
        outputs: vec![
            v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(7, &[0, 0, 0], &[1, 4, 256]),
        ],
    };
    match resolve(&t, 0, &bad) {
        Err(RuntimeError::Unsupported(m)) => {
            assert!(m.contains(ATTENTION_REFUSED) && m.contains("bf16"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

/// The cuDNN form of causal blocks: which rows see no key, the shift cuDNN gets, and the
/// views of q and of the accumulator.
#[test]
fn cudnn_split_of_causal_blocks() {
    use mercury_kernels::cpu::{AttnDims, AttnParams};
    let launch = |q_offset: usize, k_offset: usize, causal: bool| AttnLaunch {
        dims: AttnDims {
            b: 2,
            hq: 4,
            hk: 2,
            sq: 100,
            sk: 64,
            d: 128,
        },
        dv: 128,
        params: AttnParams {
            causal,
            scale: 0.1,
            q_offset,
            k_offset,
        },
        q: Strided3::dense(0x10000, 4, 300, 128),
        k: Strided3::dense(0x20000, 2, 64, 128),
        v: Strided3::dense(0x30000, 2, 64, 128),
        o: Strided3::dense(0x40000, 4, 300, 128),
        lse: Strided3::dense(0x50000, 4, 300, 1),
        elem: ElemType::BF16,
        accumulate: true,
        bounds: None,
    };
    // Keys 30 positions after the queries: the first 30 rows see nothing.
    let s = cudnn_split(&launch(0, 30, true)).unwrap();
    assert_eq!(s.masked, 30);
    let c = s.call.unwrap();
    assert_eq!((c.sq, c.causal_delta), (70, Some(0)));
    assert_eq!(c.q.ptr, 0x10000 + 30 * 128 * 2);
    assert_eq!(c.q.strides, [4 * 300 * 128, 300 * 128, 128, 1]);
    assert_eq!(s.acc.skip_rows(30).o, 0x40000 + 30 * 128 * 4);
    assert_eq!(s.acc.skip_rows(30).lse, 0x50000 + 30 * 4);
    // Queries after the keys: a shifted diagonal, nothing masked.
    let s = cudnn_split(&launch(40, 0, true)).unwrap();
    assert_eq!((s.masked, s.call.unwrap().causal_delta), (0, Some(40)));
    // Keys entirely in the future: every row masked, no cuDNN call.
    let s = cudnn_split(&launch(0, 500, true)).unwrap();
    assert_eq!((s.masked, s.call), (100, None));
    // Non-causal: offsets do not matter.
    let s = cudnn_split(&launch(0, 500, false)).unwrap();
    assert_eq!((s.masked, s.call.unwrap().causal_delta), (0, None));
    // A misaligned accumulator is refused (the merge kernels move 16 bytes at a time).
    let mut l = launch(0, 0, false);
    l.o.ptr += 8;
    assert!(cudnn_split(&l).is_err());
}

/// One bf16 attention block of `b1 hq4 hk2 sq256 sk512` with head dims `dqk` / `dv` on slots
/// of its own, resolved (nothing decided yet).
fn resolved_block(dqk: usize, dv: usize, causal: bool) -> AttnLaunch {
    match resolve_block([DType::BF16; 3], dqk, dv, causal) {
        Ok(ComputeLaunch::Attention {
            launch,
            via: AttnVia::Undecided,
        }) => launch,
        other => panic!("d_qk {dqk} / d_v {dv}: {other:?}"),
    }
}

/// [`resolved_block`] with q/k/v of the dtypes `qkv`, as `resolve` answers.
fn resolve_block(qkv: [DType; 3], dqk: usize, dv: usize, causal: bool) -> Result<ComputeLaunch> {
    let s = |ptr, dtype, shape: &[usize]| SlotInfo {
        ptr,
        dtype,
        shape: shape.to_vec(),
    };
    let t = MemTable {
        ranks: vec![vec![
            s(0x100000, qkv[0], &[1, 4, 256, dqk]),
            s(0x200000, qkv[1], &[1, 2, 512, dqk]),
            s(0x300000, qkv[2], &[1, 2, 512, dv]),
            s(0x400000, DType::F32, &[1, 4, 256, dv]),
            s(0x500000, DType::F32, &[1, 4, 256]),
        ]],
        ..MemTable::default()
    };
    let op = ComputeOp::Patch {
        patch: PatchKind::Attention {
            causal,
            scale: 0.1,
            q_offset: 256,
            k_offset: 0,
            mask: Default::default(),
            accumulate: true,
        },
        inputs: vec![
            v(0, &[0, 0, 0, 0], &[1, 4, 256, dqk]),
            v(1, &[0, 0, 0, 0], &[1, 2, 512, dqk]),
            v(2, &[0, 0, 0, 0], &[1, 2, 512, dv]),
        ],
        outputs: vec![
            v(3, &[0, 0, 0, 0], &[1, 4, 256, dv]),
            v(4, &[0, 0, 0], &[1, 4, 256]),
        ],
    };
    resolve(&t, 0, &op)
}

/// f32 q/k/v route to the f32 kernel at any head dims up to 256 (cuDNN and the bf16 kernel
/// refuse them by their element type); mixed or 16-bit-float inputs are refused by `resolve`
/// naming the dtypes; head dims above 256 are refused naming the shape.
#[test]
fn f32_attention_routes_to_the_f32_kernel() {
    for (dqk, dv) in [(24, 16), (64, 64), (5, 3), (256, 256), (192, 128)] {
        let Ok(ComputeLaunch::Attention { launch: l, .. }) =
            resolve_block([DType::F32; 3], dqk, dv, true)
        else {
            panic!("f32 d_qk {dqk} / d_v {dv} does not resolve");
        };
        assert_eq!(l.elem, ElemType::F32);
        let cudnn = cudnn_host_check(&l);
        assert!(
            cudnn.as_ref().is_err_and(|e| e.contains("bf16")),
            "{cudnn:?}"
        );
        let nvrtc = l.validate().map_err(|e| e.to_string());
        assert!(
            nvrtc.as_ref().is_err_and(|e| e.contains("bf16")),
            "{nvrtc:?}"
        );
        let f32 = mercury_kernels::cuda::validate_f32(&l).map_err(|e| e.to_string());
        let (via, w) = attention_route(&l, cudnn, nvrtc, f32).unwrap();
        assert_eq!((via, w), (AttnVia::F32, None));
    }
    let Ok(ComputeLaunch::Attention { launch: l, .. }) =
        resolve_block([DType::F32; 3], 264, 264, false)
    else {
        panic!("resolves");
    };
    let f32 = mercury_kernels::cuda::validate_f32(&l).map_err(|e| e.to_string());
    let e = attention_route(&l, Err("-".into()), Err("-".into()), f32)
        .unwrap_err()
        .to_string();
    for want in [
        "d_qk264 d_v264 f32",
        ATTENTION_REFUSED,
        "head dims 1 to 256",
    ] {
        assert!(e.contains(want), "{e} lacks {want}");
    }
    for qkv in [
        [DType::F32, DType::BF16, DType::F32],
        [DType::F16, DType::F16, DType::F16],
    ] {
        let e = resolve_block(qkv, 64, 64, false).unwrap_err().to_string();
        assert!(
            e.contains(ATTENTION_REFUSED) && e.contains("or f32 q/k/v"),
            "{e}"
        );
    }
}

/// Every head dim the cuDNN patch takes resolves and routes to it (no head-dim assumption
/// before the choice), MLA included: its O and the accumulator take the value head dim.
#[test]
fn odd_head_dims_route_to_cudnn() {
    for (dqk, dv) in [
        (32, 32),
        (64, 64),
        (96, 96),
        (128, 128),
        (256, 256),
        (192, 128),
        (128, 64),
        (24, 16),
    ] {
        for causal in [false, true] {
            let l = resolved_block(dqk, dv, causal);
            assert_eq!((l.dims.d, l.dv), (dqk, dv));
            assert_eq!(l.o.sr, dv as i64);
            let split = cudnn_host_check(&l).unwrap();
            let call = split.call.as_ref().unwrap();
            assert_eq!((call.dqk, call.dv), (dqk, dv));
            assert_eq!(
                call.o.strides,
                [(4 * 256 * dv) as i64, (256 * dv) as i64, dv as i64, 1]
            );
            // The merge kernels walk rows of the value head dim.
            assert_eq!(split.acc.d, dv);
            let nvrtc = l.validate().map_err(|e| e.to_string());
            assert_eq!(nvrtc.is_ok(), dqk == 128 && dv == 128);
            let (via, warning) = attention_route(&l, Ok(split), nvrtc, Err("-".into())).unwrap();
            assert!(matches!(via, AttnVia::Cudnn(_)));
            assert_eq!(warning, None);
        }
    }
}

/// Where cuDNN refuses, the NVRTC kernel takes head dim 128 (with a warning naming the shape
/// and cuDNN's reason); a shape neither computes is refused naming the shape and both reasons.
#[test]
fn attention_routing_falls_back_or_refuses_with_both_reasons() {
    let l = resolved_block(128, 128, true);
    let (via, w) = attention_route(&l, Err("no plan".into()), Ok(()), Err("-".into())).unwrap();
    assert_eq!(via, AttnVia::Nvrtc);
    let w = w.unwrap();
    assert!(
        w.contains("b1 hq4 hk2 sq256 sk512 d_qk128 d_v128 causal"),
        "{w}"
    );
    assert!(w.contains("cuDNN refused (no plan)"), "{w}");
    // Head dims cuDNN's fused kernels do not take (not a multiple of 8, above 256): refused
    // by both, each reason named.
    for (dqk, dv, cudnn_why, nvrtc_why) in [
        (100, 100, "d_qk = 100", "head dim 128 only, got 100"),
        (264, 264, "d_qk = 264", "head dim 128 only, got 264"),
        (128, 12, "d_v = 12", "d_qk 128 / d_v 12"),
    ] {
        let l = resolved_block(dqk, dv, false);
        let cudnn = cudnn_host_check(&l);
        assert!(
            cudnn.as_ref().is_err_and(|e| e.contains(cudnn_why)),
            "{cudnn:?}"
        );
        let nvrtc = l.validate().map_err(|e| e.to_string());
        let e = attention_route(&l, cudnn, nvrtc, Err("-".into()))
            .unwrap_err()
            .to_string();
        let shape = format!("b1 hq4 hk2 sq256 sk512 d_qk{dqk} d_v{dv}");
        for want in [shape.as_str(), cudnn_why, nvrtc_why, ATTENTION_REFUSED] {
            assert!(e.contains(want), "{e} lacks {want}");
        }
    }
}

/// The value head dim must agree between v and o, and q/k between q and k.
#[test]
fn attention_shapes_disagreeing_are_refused() {
    let t = table();
    let op = |v_ext: &[usize], o_ext: &[usize]| ComputeOp::Patch {
        patch: PatchKind::Attention {
            causal: false,
            scale: 0.1,
            q_offset: 0,
            k_offset: 0,
            mask: Default::default(),
            accumulate: false,
        },
        inputs: vec![
            v(3, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
            v(5, &[0, 0, 0, 0], v_ext),
        ],
        outputs: vec![v(6, &[0, 0, 0, 0], o_ext), v(7, &[0, 0, 0], &[1, 4, 256])],
    };
    // o narrower than v.
    assert!(matches!(
        resolve(&t, 0, &op(&[1, 2, 512, 128], &[1, 4, 256, 64])),
        Err(RuntimeError::Schedule(_))
    ));
    // v over other keys than k.
    assert!(matches!(
        resolve(&t, 0, &op(&[1, 2, 256, 128], &[1, 4, 256, 128])),
        Err(RuntimeError::Schedule(_))
    ));
    // A narrower v and o of the same width (MLA) resolve.
    assert!(resolve(&t, 0, &op(&[1, 2, 512, 64], &[1, 4, 256, 64])).is_ok());
}

/// The ring's blocks into one accumulator form one deferral group per rank; another
/// operation touching the accumulator in between cuts the group.
#[test]
fn ring_blocks_form_deferral_groups() {
    let plan = crate::cuda::test_plans::ring_attention(4, (1, 4, 2), 800, 128, false);
    for prog in &plan.ranks {
        let g = defer_groups(prog, |_, _| true, MAX_DEFERRED_PARTS);
        assert_eq!(g.len(), 1, "rank {}: {g:?}", prog.rank);
        assert_eq!(g[0].len(), 4);
        // Chunks of at most 3; the single leftover block merges on its own.
        let g = defer_groups(prog, |_, _| true, 3);
        assert_eq!(g.iter().map(Vec::len).collect::<Vec<_>>(), vec![3]);
        // Blocks the executor does not run on cuDNN are not deferred.
        assert!(defer_groups(prog, |si, _| si == 0, 8).is_empty());
    }
    // A copy out of the accumulator between two blocks ends the group there.
    let mut prog = plan.ranks[0].clone();
    let blocks: Vec<usize> = (0..prog.stages.len())
        .filter(|s| {
            matches!(
                prog.stages[*s].compute.first(),
                Some(ComputeOp::Patch { .. })
            )
        })
        .collect();
    assert_eq!(blocks.len(), 4);
    let (o, _) = match &prog.stages[blocks[1]].compute[0] {
        ComputeOp::Patch { outputs, .. } => (outputs[0].clone(), outputs[1].clone()),
        other => panic!("{other:?}"),
    };
    prog.stages[blocks[1]].compute.push(ComputeOp::Copy {
        src: o.clone(),
        dst: o,
    });
    let g = defer_groups(&prog, |_, _| true, 8);
    assert_eq!(
        g,
        vec![
            vec![(blocks[0], 0), (blocks[1], 0)],
            vec![(blocks[2], 0), (blocks[3], 0)]
        ]
    );
}

#[test]
fn combine_resolution() {
    let t = table();
    let op = ComputeOp::Combine {
        kind: CombineKind::LseMerge,
        acc: vec![
            v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(7, &[0, 0, 0], &[1, 4, 256]),
        ],
        part: vec![
            v(6, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(7, &[0, 0, 0], &[1, 4, 256]),
        ],
    };
    match resolve(&t, 0, &op).unwrap() {
        ComputeLaunch::LseMerge { rows, d, .. } => assert_eq!((rows, d), (1024, 128)),
        other => panic!("{other:?}"),
    }
    let add_bf16 = ComputeOp::Combine {
        kind: CombineKind::Add,
        acc: vec![v(0, &[0, 0], &[4, 32])],
        part: vec![v(0, &[4, 0], &[4, 32])],
    };
    assert!(matches!(
        resolve(&t, 0, &add_bf16),
        Err(RuntimeError::Unsupported(_))
    ));
    let add = ComputeOp::Combine {
        kind: CombineKind::Add,
        acc: vec![v(8, &[0, 0], &[2, 100])],
        part: vec![v(8, &[2, 0], &[2, 100])],
    };
    assert!(matches!(resolve(&t, 0, &add).unwrap(), ComputeLaunch::Add(p) if p.len() == 1));
    let copy_cast = ComputeOp::Copy {
        src: v(8, &[0, 0], &[1, 100]),
        dst: v(1, &[0, 0], &[2, 48]),
    };
    assert!(resolve(&t, 0, &copy_cast).is_err());
}

#[test]
fn tile_resolution() {
    use mercury_plan::tile::{Instr, RowReduceKind, UnaryFn};
    use mercury_plan::TileOp;
    let t = table();
    // GeLU + cast epilogue: f32 block of slot 2 into a bf16 column block of slot 1.
    let ep = ComputeOp::Tile {
        tile: TileOp::Elementwise {
            program: vec![
                Instr::Unary {
                    f: UnaryFn::Gelu,
                    x: 0,
                },
                Instr::Cast {
                    to: DType::BF16,
                    x: 1,
                },
            ],
            trailing: vec![],
        },
        inputs: vec![v(2, &[1, 0, 16], &[1, 32, 16])],
        output: v(1, &[0, 16], &[32, 16]),
    };
    match resolve(&t, 0, &ep).unwrap() {
        ComputeLaunch::Tile(l) => {
            assert!(l.name.starts_with("mercury_ew_"));
            assert_eq!(l.dims, [1, 32, 16]);
            assert_eq!(l.items, 32 * 16);
            assert_eq!(l.out.direct, Some((0x20000 + 16 * 2, [0, 48, 1])));
            assert_eq!(
                l.inputs[0].direct,
                Some((0x30000 + (64 * 48 + 16) * 4, [0, 48, 1]))
            );
            assert!(l.masks.is_empty() && !l.reduce);
        }
        other => panic!("{other:?}"),
    }
    // A row operand (one value per row) is broadcast with column stride 0; mask offsets are
    // launch arguments.
    let sub = ComputeOp::Tile {
        tile: TileOp::Elementwise {
            program: vec![
                Instr::Binary {
                    f: mercury_plan::tile::BinaryFn::Sub,
                    a: 0,
                    b: 1,
                },
                Instr::CausalMask {
                    x: 2,
                    row_offset: 64,
                    col_offset: 0,
                },
            ],
            trailing: vec![],
        },
        inputs: vec![v(8, &[0, 0], &[4, 100]), v(7, &[0, 0, 0], &[1, 1, 4])],
        output: v(8, &[0, 0], &[4, 100]),
    };
    match resolve(&t, 0, &sub).unwrap() {
        ComputeLaunch::Tile(l) => {
            assert_eq!(l.inputs[1].direct, Some((0x400000, [0, 1, 0])));
            assert_eq!(l.masks, vec![(64, 0)]);
        }
        other => panic!("{other:?}"),
    }
    // Row max of q's rows into lse.
    let rmax = ComputeOp::Tile {
        tile: TileOp::RowReduce {
            reduce: RowReduceKind::Max,
        },
        inputs: vec![v(3, &[0, 0, 0, 0], &[1, 4, 256, 128])],
        output: v(7, &[0, 0, 0], &[1, 4, 256]),
    };
    match resolve(&t, 0, &rmax).unwrap() {
        ComputeLaunch::Tile(l) => {
            assert!(l.reduce);
            assert_eq!(l.name, "mercury_row_max_bf16_f32");
            assert_eq!((l.dims, l.items), ([4, 256, 128], 1024));
            assert_eq!(l.inputs[0].direct, Some((0x40000, [256 * 128, 128, 1])));
            assert_eq!(l.out.direct, Some((0x400000, [256, 1, 0])));
        }
        other => panic!("{other:?}"),
    }
    // An output overlapping an input it is not identical to is refused.
    let shifted = ComputeOp::Tile {
        tile: TileOp::Elementwise {
            program: vec![Instr::Unary {
                f: UnaryFn::Exp,
                x: 0,
            }],
            trailing: vec![],
        },
        inputs: vec![v(8, &[0, 0], &[2, 100])],
        output: v(8, &[1, 0], &[2, 100]),
    };
    assert!(matches!(
        resolve(&t, 0, &shifted),
        Err(RuntimeError::Unsupported(_))
    ));
}

#[test]
fn tile_matmul_on_the_gemm_patch() {
    use mercury_plan::TileOp;
    let t = table();
    // a^T: slot 1 [32, 48] read as [k = 32, m = 48]; b: slot 0^T... [n = 64, k = 32] transposed.
    let op = ComputeOp::Tile {
        tile: TileOp::Matmul {
            transpose_a: true,
            transpose_b: true,
            outer: false,
        },
        inputs: vec![v(1, &[0, 0], &[32, 48]), v(0, &[0, 0], &[64, 32])],
        output: v(2, &[0, 0, 0], &[1, 48, 48]),
    };
    // The output holds 48 x 48 but the product is 48 x 64: the op's own check refuses it.
    assert!(matches!(
        resolve(&t, 0, &op),
        Err(RuntimeError::Schedule(_))
    ));
    let op = ComputeOp::Tile {
        tile: TileOp::Matmul {
            transpose_a: true,
            transpose_b: true,
            outer: false,
        },
        inputs: vec![v(1, &[0, 0], &[32, 48]), v(0, &[0, 0], &[48, 32])],
        output: v(2, &[0, 0, 0], &[1, 48, 48]),
    };
    match resolve(&t, 0, &op).unwrap() {
        ComputeLaunch::Gemm { spec, .. } => {
            assert_eq!((spec.m, spec.n, spec.k), (48, 48, 32));
            assert_eq!((spec.lda, spec.ldb, spec.ldc), (48, 32, 48));
            assert!(spec.trans_a && spec.trans_b && !spec.accumulate);
        }
        other => panic!("{other:?}"),
    }
    // Batched b (grouped heads) has no device code: refused, not run wrongly.
    let op = ComputeOp::Tile {
        tile: TileOp::Matmul {
            transpose_a: false,
            transpose_b: true,
            outer: false,
        },
        inputs: vec![
            v(3, &[0, 0, 0, 0], &[1, 4, 256, 128]),
            v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
        ],
        output: v(9, &[0, 0, 0, 0], &[1, 4, 256, 512]),
    };
    assert!(matches!(
        resolve(&t, 0, &op),
        Err(RuntimeError::Unsupported(m)) if m.contains("batched")
    ));
}

/// A sliding window or document boundaries resolve to the masked path (the NVRTC kernel
/// under per-row key bounds, waiting for the run's documents); the backward has no CUDA patch and
/// is refused (never run as dense or causal), saying what to use instead.
#[test]
fn masked_attention_resolves_and_its_backward_is_refused() {
    let t = table();
    let mask = mercury_plan::AttnMask {
        left: Some(16),
        documents: Some([0, 0]),
        ..Default::default()
    };
    let fwd = ComputeOp::Patch {
        patch: PatchKind::Attention {
            causal: true,
            scale: 0.088,
            q_offset: 0,
            k_offset: 0,
            mask,
            accumulate: false,
        },
        inputs: vec![
            v(3, &[0, 0, 128, 0], &[1, 4, 128, 128]),
            v(4, &[0, 0, 0, 0], &[1, 2, 512, 128]),
            v(5, &[0, 0, 0, 0], &[1, 2, 512, 128]),
        ],
        outputs: vec![
            v(6, &[0, 0, 128, 0], &[1, 4, 128, 128]),
            v(7, &[0, 0, 128], &[1, 4, 128]),
        ],
    };
    let ComputeOp::Patch {
        inputs, outputs, ..
    } = fwd.clone()
    else {
        unreachable!()
    };
    let bwd = ComputeOp::Patch {
        patch: PatchKind::AttentionBwd {
            causal: true,
            scale: 0.088,
            q_offset: 0,
            k_offset: 0,
            mask,
            accumulate: false,
        },
        inputs,
        outputs,
    };
    match resolve(&t, 0, &fwd).expect("masked forward") {
        ComputeLaunch::Attention {
            via: AttnVia::Masked(s),
            ..
        } => {
            assert!(s.needs_documents() && s.empty.is_none());
            assert_eq!((s.causal, s.mask), (true, mask));
        }
        other => panic!("{other:?}"),
    }
    let e = format!("{:?}", resolve(&t, 0, &bwd).expect_err("masked backward"));
    assert!(
        e.contains("no CUDA backward patch yet") && e.contains("--backend cpu"),
        "{e}"
    );
}
