//! Fresh accumulators: an attention block that is the first to touch its (o, lse) accumulator
//! overwrites it instead of merging into it, and the accumulator's initialisation (o = 0,
//! lse = -inf) is skipped. Same values, two passes over the accumulator fewer: at world size
//! 1 (one block, the whole output) the zero fill and the merge's read of the accumulator are
//! a sixth of what surrounds the cuDNN call.
//!
//! A block qualifies when its o and lse views cover their whole slots, the slots start as
//! `Zero` and `NegInf` (not the masked variants of the backward), and nothing reads or writes
//! either slot earlier: no compute op of an earlier stage or earlier in the same stage, no
//! transfer of the same or an earlier stage (transfers of a stage may run beside its
//! compute). Every patch writes every row of a non-accumulating launch (rows that see no key
//! get o = 0, lse = -inf), so the skipped initialisation is never read.

use super::InitLaunch;
use crate::cuda::ops::ComputeLaunch;
use mercury_plan::verify::{comm_access, compute_access};
use mercury_plan::{ComputeOp, PatchKind, RankProgram, SlotInit, View};

/// The slots a pair of (read, written) view lists touches.
fn slots((reads, writes): (Vec<&View>, Vec<&View>)) -> Vec<usize> {
    reads.into_iter().chain(writes).map(|v| v.slot).collect()
}

/// Turns the first attention block into each fresh accumulator of rank program `r` into an
/// overwrite (`stages` are `r`'s resolved launches, op for op) and drops the accumulator's
/// initialisation from `init`. Returns how many blocks it changed.
pub(super) fn overwrite_fresh_accumulators(
    r: &RankProgram,
    init: &mut [InitLaunch],
    stages: &mut [Vec<ComputeLaunch>],
) -> usize {
    let mut touched = vec![false; r.slots.len()];
    let mut changed = 0;
    let full = |v: &View| {
        r.slots
            .get(v.slot)
            .is_some_and(|s| v.region.offset.iter().all(|&o| o == 0) && v.region.extent == s.shape)
    };
    for (si, st) in r.stages.iter().enumerate() {
        // Transfers of this stage may run beside its compute: they count as earlier.
        for c in &st.comm {
            for s in slots(comm_access(c)) {
                if let Some(t) = touched.get_mut(s) {
                    *t = true;
                }
            }
        }
        for (oi, op) in st.compute.iter().enumerate() {
            if let (
                ComputeOp::Patch {
                    patch:
                        PatchKind::Attention {
                            accumulate: true, ..
                        },
                    outputs,
                    ..
                },
                Some(ComputeLaunch::Attention { launch, .. }),
            ) = (op, stages.get_mut(si).and_then(|s| s.get_mut(oi)))
            {
                if let [o, l] = outputs.as_slice() {
                    let fresh = o.slot != l.slot
                        && full(o)
                        && full(l)
                        && !touched[o.slot]
                        && !touched[l.slot]
                        && matches!(r.slots[o.slot].init, SlotInit::Zero)
                        && matches!(r.slots[l.slot].init, SlotInit::NegInf);
                    if fresh && launch.accumulate {
                        launch.accumulate = false;
                        init[o.slot] = InitLaunch::Nothing;
                        init[l.slot] = InitLaunch::Nothing;
                        changed += 1;
                    }
                }
            }
            for s in slots(compute_access(op)) {
                if let Some(t) = touched.get_mut(s) {
                    *t = true;
                }
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::ops::AttnVia;
    use mercury_kernels::cpu::{AttnDims, AttnParams};
    use mercury_kernels::cuda::{AttnLaunch, ElemType, Strided3};
    use mercury_plan::{CommOp, DType, Region, Slot, Stage};

    fn view(slot: usize, shape: &[usize]) -> View {
        View {
            slot,
            region: Region {
                offset: vec![0; shape.len()],
                extent: shape.to_vec(),
            },
        }
    }

    const QKV: [usize; 4] = [1, 2, 64, 16];
    const LSE: [usize; 3] = [1, 2, 64];

    /// Slots q, k, v (inputs), o (zero), lse (-inf), k2 (a received block).
    fn slots() -> Vec<Slot> {
        let s = |name: &str, dtype, shape: &[usize], init| Slot {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            init,
        };
        vec![
            s("q", DType::BF16, &QKV, SlotInit::Uninit),
            s("k", DType::BF16, &QKV, SlotInit::Uninit),
            s("v", DType::BF16, &QKV, SlotInit::Uninit),
            s("o", DType::F32, &QKV, SlotInit::Zero),
            s("lse", DType::F32, &LSE, SlotInit::NegInf),
            s("k2", DType::BF16, &QKV, SlotInit::Uninit),
        ]
    }

    fn block(k: usize) -> ComputeOp {
        ComputeOp::Patch {
            patch: PatchKind::Attention {
                causal: false,
                scale: 0.25,
                q_offset: 0,
                k_offset: 0,
                mask: Default::default(),
                accumulate: true,
            },
            inputs: vec![view(0, &QKV), view(k, &QKV), view(2, &QKV)],
            outputs: vec![view(3, &QKV), view(4, &LSE)],
        }
    }

    fn launch() -> ComputeLaunch {
        let d = |p| Strided3::dense(p, 2, 64, 16);
        ComputeLaunch::Attention {
            launch: AttnLaunch {
                dims: AttnDims {
                    b: 1,
                    hq: 2,
                    hk: 2,
                    sq: 64,
                    sk: 64,
                    d: 16,
                },
                dv: 16,
                params: AttnParams {
                    causal: false,
                    scale: 0.25,
                    q_offset: 0,
                    k_offset: 0,
                },
                q: d(0x1000),
                k: d(0x2000),
                v: d(0x3000),
                o: d(0x4000),
                lse: Strided3::dense(0x5000, 2, 64, 1),
                elem: ElemType::BF16,
                bounds: None,
                accumulate: true,
            },
            via: AttnVia::Undecided,
        }
    }

    fn accumulates(stages: &[Vec<ComputeLaunch>]) -> Vec<bool> {
        stages
            .iter()
            .flatten()
            .map(|l| match l {
                ComputeLaunch::Attention { launch, .. } => launch.accumulate,
                _ => panic!("not attention"),
            })
            .collect()
    }

    fn run(stages: Vec<Stage>) -> (usize, Vec<bool>, Vec<bool>) {
        let r = RankProgram {
            rank: 0,
            coords: vec![0],
            slots: slots(),
            stages,
            outputs: vec![],
        };
        let mut init: Vec<InitLaunch> = r.slots.iter().map(|_| InitLaunch::Zero).collect();
        let mut launches: Vec<Vec<ComputeLaunch>> = r
            .stages
            .iter()
            .map(|s| s.compute.iter().map(|_| launch()).collect())
            .collect();
        let n = overwrite_fresh_accumulators(&r, &mut init, &mut launches);
        let skipped = init
            .iter()
            .map(|i| matches!(i, InitLaunch::Nothing))
            .collect();
        (n, accumulates(&launches), skipped)
    }

    #[test]
    fn the_first_block_into_a_fresh_accumulator_overwrites_it() {
        // One block (world size 1): overwrite, o and lse not initialised.
        let (n, acc, skipped) = run(vec![Stage {
            compute: vec![block(1)],
            comm: vec![],
        }]);
        assert_eq!((n, acc), (1, vec![false]));
        assert_eq!(skipped, vec![false, false, false, true, true, false]);
        // A ring: the first block overwrites, the next merges.
        let (n, acc, _) = run(vec![
            Stage {
                compute: vec![block(1)],
                comm: vec![CommOp::Recv {
                    peer: 1,
                    dst: view(5, &QKV),
                    tag: 0,
                }],
            },
            Stage {
                compute: vec![block(5)],
                comm: vec![],
            },
        ]);
        assert_eq!((n, acc), (1, vec![false, true]));
    }

    #[test]
    fn an_accumulator_touched_before_keeps_its_merge() {
        // A transfer of the same stage touches o: nothing changes.
        let (n, acc, skipped) = run(vec![Stage {
            compute: vec![block(1)],
            comm: vec![CommOp::Send {
                peer: 1,
                src: view(3, &QKV),
                tag: 0,
            }],
        }]);
        assert_eq!((n, acc), (0, vec![true]));
        assert!(!skipped[3] && !skipped[4]);
        // A block writing part of o: not fresh for the block after it either.
        let mut part = block(1);
        if let ComputeOp::Patch { outputs, .. } = &mut part {
            outputs[0].region.extent[2] = 32;
        }
        let (n, acc, _) = run(vec![Stage {
            compute: vec![part, block(1)],
            comm: vec![],
        }]);
        assert_eq!((n, acc), (0, vec![true, true]));
    }
}
