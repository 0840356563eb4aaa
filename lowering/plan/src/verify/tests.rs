use super::delivery::{cuts, undelivered, COVER_CELLS};
use super::*;
use crate::{DType, RankProgram, Slot, Stage};

/// One rank computing `out = a b` on slots of these shapes, the views whole.
/// `p` with one output element, which rank 0 delivers from a slot of its own holding one
/// element of an input (a plan delivers every output: [`check_outputs_delivered`]).
fn delivering(mut p: crate::Plan) -> crate::Plan {
    let one = || Region::full(&[1]);
    p.buffers.insert(
        0,
        crate::GlobalBuffer {
            name: "done".into(),
            shape: vec![1],
            dtype: DType::F32,
            role: crate::Role::Output,
        },
    );
    p.buffers.push(crate::GlobalBuffer {
        name: "seed".into(),
        shape: vec![1],
        dtype: DType::F32,
        role: crate::Role::Input,
    });
    let seed = p.buffers.len() - 1;
    let r0 = &mut p.ranks[0];
    r0.slots.push(Slot {
        name: "done.src".into(),
        dtype: DType::F32,
        shape: vec![1],
        init: SlotInit::FromGlobal {
            buffer: seed,
            region: one(),
        },
    });
    r0.outputs.push(crate::OutputPiece {
        buffer: 0,
        region: one(),
        src: View {
            slot: r0.slots.len() - 1,
            region: one(),
        },
    });
    p
}

fn gemm_plan(a: &[usize], b: &[usize], out: &[usize], accumulate: bool) -> crate::Plan {
    delivering(gemm_plan_bare(a, b, out, accumulate))
}

fn gemm_plan_bare(a: &[usize], b: &[usize], out: &[usize], accumulate: bool) -> crate::Plan {
    let slot = |name: &str, shape: &[usize]| Slot {
        name: name.into(),
        dtype: DType::F32,
        shape: shape.to_vec(),
        init: SlotInit::Zero,
    };
    let whole = |slot: usize, shape: &[usize]| View {
        slot,
        region: Region::full(shape),
    };
    crate::Plan {
        name: "g".into(),
        mesh: vec![1],
        buffers: vec![],
        documents: vec![],
        ranks: vec![RankProgram {
            rank: 0,
            coords: vec![0],
            slots: vec![slot("a", a), slot("b", b), slot("out", out)],
            stages: vec![Stage {
                compute: vec![ComputeOp::Patch {
                    patch: PatchKind::Gemm {
                        accumulate,
                        epilogue: None,
                    },
                    inputs: vec![whole(0, a), whole(1, b)],
                    outputs: vec![whole(2, out)],
                }],
                comm: vec![],
            }],
            outputs: vec![],
        }],
    }
}

/// A GEMM whose views hold the right element counts but not a `[k, n]` b (or not an
/// `m x n` out) is refused, naming the stage and rank; so is a patch with missing operands.
#[test]
fn gemm_views_must_agree() {
    assert_eq!(
        verify(&gemm_plan(&[64, 32], &[32, 16], &[64, 16], true)),
        Ok(())
    );
    let e = verify(&gemm_plan(&[64, 32], &[16, 64], &[64, 32], false)).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("stage 0: rank 0: gemm shapes do not agree")
            && e.to_string().contains("b must be laid out [k, n]"),
        "{e}"
    );
    let e = verify(&gemm_plan(&[64, 32], &[32, 16], &[16, 64], false)).unwrap_err();
    assert!(e.to_string().contains("out must be m x n"), "{e}");
    let mut missing = gemm_plan(&[64, 32], &[32, 16], &[64, 16], false);
    if let ComputeOp::Patch { inputs, .. } = &mut missing.ranks[0].stages[0].compute[0] {
        inputs.pop();
    }
    let e = verify(&missing).unwrap_err();
    assert!(
        e.to_string()
            .contains("a gemm patch takes 2 inputs and 1 outputs, not 1 and 1"),
        "{e}"
    );
    let mut both = gemm_plan(&[64, 32], &[32, 16], &[64, 16], true);
    if let ComputeOp::Patch { patch, .. } = &mut both.ranks[0].stages[0].compute[0] {
        *patch = PatchKind::Gemm {
            accumulate: true,
            epilogue: Some(crate::tile::UnaryFn::Gelu),
        };
    }
    let e = verify(&both).unwrap_err();
    assert!(e.to_string().contains("cannot both accumulate"), "{e}");
}

/// Rank 0 receives `rows` one-row pieces of slot 'x' from rank 1 in one stage, then
/// `extra` (if any); rank 1 sends them all from its slot 'y'.
fn receives(rows: usize, extra: Option<Region>) -> crate::Plan {
    delivering(receives_bare(rows, extra))
}

fn receives_bare(rows: usize, extra: Option<Region>) -> crate::Plan {
    let slot = |name: &str, shape: &[usize]| Slot {
        name: name.into(),
        dtype: DType::F32,
        shape: shape.to_vec(),
        init: SlotInit::Zero,
    };
    let mut dsts: Vec<Region> = (0..rows)
        .map(|i| Region {
            offset: vec![i, 0],
            extent: vec![1, 2],
        })
        .collect();
    dsts.extend(extra);
    let recv = dsts
        .iter()
        .enumerate()
        .map(|(t, region)| CommOp::Recv {
            peer: 1,
            dst: View {
                slot: 0,
                region: region.clone(),
            },
            tag: t as u64,
        })
        .collect();
    let send = (0..dsts.len())
        .map(|t| CommOp::Send {
            peer: 0,
            src: View {
                slot: 0,
                region: Region::full(&[1, 2]),
            },
            tag: t as u64,
        })
        .collect();
    let rank = |r: usize, slots, comm| RankProgram {
        rank: r,
        coords: vec![r],
        slots,
        stages: vec![Stage {
            compute: vec![],
            comm,
        }],
        outputs: vec![],
    };
    crate::Plan {
        name: "p".into(),
        mesh: vec![2],
        buffers: vec![],
        documents: vec![],
        ranks: vec![
            rank(0, vec![slot("x", &[rows, 2])], recv),
            rank(1, vec![slot("y", &[1, 2])], send),
        ],
    }
}

/// Two transfers of a stage writing one element are refused, naming the first of them,
/// whether the stage has a few transfers (scanned) or many (indexed).
#[test]
fn transfers_may_not_write_the_same_element() {
    for rows in [4, 100] {
        assert_eq!(verify(&receives(rows, None)), Ok(()));
        let overlapping = Region {
            offset: vec![2, 1],
            extent: vec![2, 1],
        };
        let e = verify(&receives(rows, Some(overlapping))).unwrap_err();
        assert_eq!(
            e.to_string(),
            "stage 0: rank 0: two transfers write slot 'x' [2:3, 0:2]",
            "{rows} rows"
        );
    }
}

/// Two ranks reduce their [4, 2] slot 'x' over the group [1, 0] to member 0 (rank 1),
/// into its [4, 2] slot 'y'; rank 0 only sends.
fn reduce_plan() -> crate::Plan {
    delivering(reduce_plan_bare())
}

fn reduce_plan_bare() -> crate::Plan {
    let slot = |name: &str| Slot {
        name: name.into(),
        dtype: DType::F32,
        shape: vec![4, 2],
        init: SlotInit::Zero,
    };
    let whole = |slot: usize| View {
        slot,
        region: Region::full(&[4, 2]),
    };
    let rank = |r: usize| RankProgram {
        rank: r,
        coords: vec![r],
        slots: vec![slot("x"), slot("y")],
        stages: vec![Stage {
            compute: vec![],
            comm: vec![CommOp::Collective {
                group: vec![1, 0],
                collective: Collective::Reduce {
                    src: whole(0),
                    dst: (r == 1).then(|| whole(1)),
                    root: 0,
                    kind: CombineKind::Add,
                },
            }],
        }],
        outputs: vec![],
    };
    crate::Plan {
        name: "r".into(),
        mesh: vec![2],
        buffers: vec![],
        documents: vec![],
        ranks: vec![rank(0), rank(1)],
    }
}

/// The reduce of rank `r` in [`reduce_plan`], to edit.
fn reduce_of(p: &mut crate::Plan, r: usize) -> &mut Collective {
    match &mut p.ranks[r].stages[0].comm[0] {
        CommOp::Collective { collective, .. } => collective,
        _ => unreachable!(),
    }
}

/// Plans given as JSON are checked before anything counts from them (new-user pass,
/// 2026-12-03): sizes past [`crate::MAX_ELEMENTS`] (a slot extent of 2^63 overflowed a
/// product: a panic), coordinates that are not the rank's, a group holding a rank twice,
/// a collective axis outside its views (each was accepted, priced and picked).
#[test]
fn malformed_plans_are_refused_before_counting() {
    let refused = |edit: &dyn Fn(&mut crate::Plan)| {
        let mut p = reduce_plan();
        edit(&mut p);
        verify(&p).unwrap_err().to_string()
    };
    let e = refused(&|p| p.ranks[1].slots[0].shape = vec![4, 1 << 63]);
    assert!(
        e.contains("slot 'x' of shape [4, 9223372036854775808] has more than"),
        "{e}"
    );
    let e = refused(&|p| p.mesh = vec![1 << 40, 1 << 40]);
    assert!(e.contains("has more than"), "{e}");
    let e = refused(&|p| p.ranks[1].coords = vec![9]);
    assert_eq!(
        e,
        "rank 1: coordinates [9], but rank 1 of mesh [2] is at [1] (ranks are numbered row-major)"
    );
    let e = refused(&|p| {
        for r in &mut p.ranks {
            if let CommOp::Collective { group, .. } = &mut r.stages[0].comm[0] {
                *group = vec![1, 1, 0];
            }
        }
    });
    assert!(
        e.ends_with("collective group [1, 1, 0] holds rank 1 twice"),
        "{e}"
    );
    let e = refused(&|p| {
        let v = View {
            slot: 0,
            region: Region::full(&[4, 2]),
        };
        for r in &mut p.ranks {
            if let CommOp::Collective { collective, .. } = &mut r.stages[0].comm[0] {
                *collective = Collective::AllGather {
                    src: v.clone(),
                    dst: v.clone(),
                    axis: 9,
                };
            }
        }
    });
    assert!(
        e.ends_with("the axis 9 is not a dimension of the 2-d view [0:4, 0:2]"),
        "{e}"
    );
    // Every output element delivered, no input written, some output.
    let e = refused(&|p| p.ranks[0].outputs.clear());
    assert_eq!(e, "output 'done' [1]: no rank delivers any of it");
    let e = refused(&|p| {
        p.buffers[0].shape = vec![3];
        p.ranks[0].outputs[0].region = Region {
            offset: vec![2],
            extent: vec![1],
        };
    });
    assert_eq!(e, "output 'done' [3]: no rank delivers [0:2]");
    let e = refused(&|p| p.buffers[0].role = crate::Role::Input);
    assert_eq!(e, "the plan has no output buffer");
    let e = refused(&|p| {
        let n = p.ranks[0].slots.len() - 1;
        p.ranks[0].slots[n].init = SlotInit::Zero;
    });
    assert_eq!(
        e,
        "rank 0: output piece [0:1] comes from slot 'done.src' [0:1], which nothing writes"
    );
    // The same slot marked as a tile the causal mask leaves empty (its final value is its
    // initial one) is delivered.
    let mut p = reduce_plan();
    let n = p.ranks[0].slots.len() - 1;
    p.ranks[0].slots[n].init = SlotInit::MaskedZero;
    verify(&p).unwrap();
}

/// A reduce is checked per member (root in the group, a destination on the root only, of
/// the source's extents, an add) and across members (all reduce, to one root, sources
/// alike), each refusal naming the stage and rank.
#[test]
fn bad_reduces_are_refused() {
    assert_eq!(verify(&reduce_plan()), Ok(()));
    // The root only receives; the other member sends its whole source (8 f32).
    assert_eq!(
        reduce_plan().bytes_sent_per_rank(),
        BTreeMap::from([(0, 32), (1, 0)])
    );
    let refused = |edit: &dyn Fn(&mut crate::Plan)| {
        let mut p = reduce_plan();
        edit(&mut p);
        verify(&p).unwrap_err().to_string()
    };
    let e = refused(&|p| {
        if let Collective::Reduce { root, .. } = reduce_of(p, 0) {
            *root = 2;
        }
    });
    assert_eq!(
            e,
            "stage 0: rank 0: reduce root 2 is outside group [1, 0] (the root is a position in the group)"
        );
    let e = refused(&|p| {
        if let Collective::Reduce { dst, .. } = reduce_of(p, 1) {
            *dst = None;
        }
    });
    assert!(
        e.starts_with("stage 0: rank 1: ") && e.contains("names no destination"),
        "{e}"
    );
    let e = refused(&|p| {
        if let Collective::Reduce { dst, .. } = reduce_of(p, 0) {
            *dst = Some(View {
                slot: 1,
                region: Region::full(&[4, 2]),
            });
        }
    });
    assert!(
        e.starts_with("stage 0: rank 0: ") && e.contains("(only the root does)"),
        "{e}"
    );
    let e = refused(&|p| {
        if let Collective::Reduce { dst: Some(d), .. } = reduce_of(p, 1) {
            d.region.extent = vec![2, 2];
        }
    });
    assert!(e.contains("does not have the extents of its source"), "{e}");
    let e = refused(&|p| {
        for r in 0..2 {
            if let Collective::Reduce { kind, .. } = reduce_of(p, r) {
                *kind = CombineKind::LseMerge;
            }
        }
    });
    assert!(e.contains("lse merge needs [o, lse]"), "{e}");
    // Rank 0 takes itself for the root (member 1): each member alone is consistent.
    let e = refused(&|p| {
        if let Collective::Reduce { root, dst, .. } = reduce_of(p, 0) {
            *root = 1;
            *dst = Some(View {
                slot: 1,
                region: Region::full(&[4, 2]),
            });
        }
    });
    assert!(
        e.starts_with("stage 0: rank 1: reduce #0 of group [1, 0]")
            || e.starts_with("stage 0: rank 0: reduce #0 of group [1, 0]"),
        "{e}"
    );
    assert!(e.contains("into root"), "{e}");
    let e = refused(&|p| p.ranks[0].slots[0].dtype = DType::BF16);
    assert!(e.contains("bf16") && e.contains("f32"), "{e}");
    let e = refused(&|p| {
        if let Collective::Reduce { src, .. } = reduce_of(p, 0) {
            src.region.extent = vec![2, 2];
        }
    });
    assert!(e.contains("reduce #0 of group [1, 0]"), "{e}");
    let e = refused(&|p| {
        *reduce_of(p, 0) = Collective::AllReduce {
            bufs: vec![View {
                slot: 0,
                region: Region::full(&[4, 2]),
            }],
            kind: CombineKind::Add,
        };
    });
    assert_eq!(
        e,
        "stage 0: rank 0: collective #0 of group [1, 0] is a reduce on rank 1 but not here"
    );
    let e = refused(&|p| p.ranks[0].stages[0].comm.clear());
    assert_eq!(
        e,
        "stage 0: rank 0: does not join reduce #0 of group [1, 0]"
    );
}

/// Operand and output types the GEMM cannot run (`patch::gemm_writes`) are refused.
#[test]
fn gemm_types_must_be_runnable() {
    let typed = |a: DType, b: DType, out: DType| {
        let mut p = gemm_plan(&[64, 32], &[32, 16], &[64, 16], false);
        for (s, d) in p.ranks[0].slots.iter_mut().zip([a, b, out]) {
            s.dtype = d;
        }
        verify(&p)
    };
    for (a, out) in [
        (DType::BF16, DType::BF16),
        (DType::BF16, DType::F32),
        (DType::F16, DType::F16),
        (DType::F16, DType::F32),
        (DType::F32, DType::F32),
        (DType::F64, DType::F32),
    ] {
        assert_eq!(typed(a, a, out), Ok(()), "{a:?} -> {out:?}");
    }
    let e = typed(DType::F32, DType::F32, DType::BF16).unwrap_err();
    assert!(
        e.to_string()
            .contains("a gemm of f32 x f32 operands cannot write bf16"),
        "{e}"
    );
    assert!(typed(DType::F16, DType::F16, DType::BF16).is_err());
    assert!(typed(DType::BF16, DType::F16, DType::BF16).is_err());
}

/// The cover test before [`cover_counts`]: each cell of the cut grid against each piece
/// (O(d P C)), kept as the reference the fast test must agree with.
fn undelivered_by_scan(shape: &[usize], pieces: &[&Region]) -> Option<String> {
    let cuts = cuts(shape, pieces);
    let n: usize = cuts.iter().map(|c| c.len() - 1).product();
    assert!(n <= COVER_CELLS);
    let mut idx = vec![0usize; cuts.len()];
    for _ in 0..n {
        let corner: Vec<usize> = idx.iter().zip(&cuts).map(|(i, c)| c[*i]).collect();
        let inside = |p: &&Region| {
            corner
                .iter()
                .enumerate()
                .all(|(d, x)| p.offset[d] <= *x && *x < p.offset[d] + p.extent[d])
        };
        if !pieces.iter().any(inside) {
            let end: Vec<usize> = idx.iter().zip(&cuts).map(|(i, c)| c[i + 1]).collect();
            let cell = Region {
                extent: end.iter().zip(&corner).map(|(e, o)| e - o).collect(),
                offset: corner,
            };
            return Some(cell.to_string());
        }
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] + 1 < cuts[d].len() {
                break;
            }
            idx[d] = 0;
        }
    }
    None
}

/// The cover test by difference array names the same first undelivered cell as testing
/// every cell against every piece, on pseudo-random pieces of buffers of 0 to 4
/// dimensions (empty pieces, empty buffers, overlaps, and tilings that cover exactly).
#[test]
fn cover_counts_agree_with_the_cell_by_cell_scan() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |below: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % below as u64) as usize
    };
    let (mut covered, mut uncovered) = (0, 0);
    for case in 0..4000 {
        let rank = next(5);
        let shape: Vec<usize> = (0..rank).map(|_| next(6)).collect();
        let mut pieces: Vec<Region> = Vec::new();
        if case % 3 == 0 {
            // A tiling (some tiles left out or doubled now and then).
            // Per dimension the split points, 0 and the extent among them (twice for an
            // extent of 0, whose one tile is empty).
            let splits: Vec<Vec<usize>> = shape
                .iter()
                .map(|s| {
                    let mut c: Vec<usize> = (0..next(3)).map(|_| next(s + 1)).collect();
                    c.extend([0, *s]);
                    c.sort_unstable();
                    c.dedup();
                    if c.len() == 1 {
                        c.push(0);
                    }
                    c
                })
                .collect();
            let tiles: usize = splits.iter().map(|c| c.len() - 1).product();
            for t in 0..tiles {
                let mut rest = t;
                let mut tile = Region::full(&shape);
                for (d, c) in splits.iter().enumerate().rev() {
                    let i = rest % (c.len() - 1);
                    rest /= c.len() - 1;
                    tile.offset[d] = c[i];
                    tile.extent[d] = c[i + 1] - c[i];
                }
                match next(8) {
                    0 => {}
                    1 => pieces.extend([tile.clone(), tile]),
                    _ => pieces.push(tile),
                }
            }
        }
        for _ in 0..next(6) {
            let mut p = Region::full(&shape);
            for (d, s) in shape.iter().enumerate() {
                p.offset[d] = next(s + 1);
                p.extent[d] = next(s - p.offset[d] + 1);
            }
            pieces.push(p);
        }
        if pieces.is_empty() {
            pieces.push(Region::full(&shape));
        }
        let refs: Vec<&Region> = pieces.iter().collect();
        let want = undelivered_by_scan(&shape, &refs);
        assert_eq!(
            undelivered(&shape, &refs),
            want,
            "shape {shape:?}, pieces {pieces:?}"
        );
        if want.is_some() {
            uncovered += 1;
        } else {
            covered += 1;
        }
    }
    // Both verdicts were exercised often.
    assert!(covered > 500 && uncovered > 500, "{covered} {uncovered}");
}

/// An output cell nobody delivers is refused, naming the first such cell in row-major
/// order; an element delivered twice is not an error; nor is a piece from a zeroed slot
/// that some op writes. Past [`COVER_CELLS`] grid cells only the element count is tested.
#[test]
fn outputs_are_delivered_whole() {
    // 'done' [2, 3] from one-element pieces on rank 0: (0, 1) twice, (1, 0) and (1, 1) late.
    let pieces = |at: &[[usize; 2]]| {
        let mut p = reduce_plan();
        p.buffers[0].shape = vec![2, 3];
        let src = p.ranks[0].outputs[0].src.clone();
        p.ranks[0].outputs = at
            .iter()
            .map(|o| crate::OutputPiece {
                buffer: 0,
                region: Region {
                    offset: o.to_vec(),
                    extent: vec![1, 1],
                },
                src: src.clone(),
            })
            .collect();
        verify(&p).map_err(|e| e.to_string())
    };
    let some = [[0, 0], [0, 1], [0, 2], [0, 1], [1, 2]];
    assert_eq!(
        pieces(&some),
        Err("output 'done' [2, 3]: no rank delivers [1:2, 0:1]".into())
    );
    let most = [&some[..], &[[1, 0]]].concat();
    assert_eq!(
        pieces(&most),
        Err("output 'done' [2, 3]: no rank delivers [1:2, 1:2]".into())
    );
    let all = [&most[..], &[[1, 1]]].concat();
    assert_eq!(pieces(&all), Ok(()));

    // An output from a zeroed slot is refused unless some op of its rank writes it: on
    // rank 1 the reduce writes all of 'y' and nothing writes 'x'.
    let from = |slot: usize| {
        let mut p = reduce_plan();
        p.buffers[0].shape = vec![2];
        p.ranks[1].outputs.push(crate::OutputPiece {
            buffer: 0,
            region: Region {
                offset: vec![1],
                extent: vec![1],
            },
            src: View {
                slot,
                region: Region {
                    offset: vec![1, 0],
                    extent: vec![1, 1],
                },
            },
        });
        verify(&p).map_err(|e| e.to_string())
    };
    assert_eq!(from(1), Ok(()));
    assert_eq!(
        from(0),
        Err(
            "rank 1: output piece [1:2] comes from slot 'x' [1:2, 0:1], which nothing writes"
                .into()
        )
    );

    // 2050 x 513 grid cells (over 2^20): rows 0, 2, .., 2048 and columns 0, 2, .., 510.
    let shape = [2050, 2050];
    let strips: Vec<Region> = (0..1025)
        .map(|i| Region {
            offset: vec![2 * i, 0],
            extent: vec![1, 2050],
        })
        .chain((0..256).map(|j| Region {
            offset: vec![0, 2 * j],
            extent: vec![2050, 1],
        }))
        .collect();
    let refs: Vec<&Region> = strips.iter().collect();
    let held = (1025 + 256) * 2050;
    assert_eq!(
        undelivered(&shape, &refs),
        Some(format!("every element (the pieces hold {held} elements)"))
    );
    let whole = Region::full(&shape);
    let refs: Vec<&Region> = strips.iter().chain([&whole]).collect();
    assert_eq!(undelivered(&shape, &refs), None);
}
