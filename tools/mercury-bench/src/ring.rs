//! The RingAttention plan used by the benchmarks (built here, in bench code, not by the
//! compiler): q sharded by sequence over N ranks; each rank's K/V shard travels around the
//! ring with double buffering (receive into the buffer not being read), one `Send`/`Recv`
//! pair per tensor per stage; every stage runs one accumulating attention patch
//! (`PatchKind::Attention { accumulate: true }`) on the resident K/V shard, which merges its
//! result into the rank's (o, lse) accumulator in the kernel's epilogue: no `LseMerge` pass,
//! no partial-result slots. The first step is not special: the accumulator starts empty
//! (o = 0, lse = -inf) and the first merge takes the tile's rows. Under the causal mask a rank
//! skips shards that lie entirely in its future.
//!
//! This is the same shape of plan the compiler emits for a ring step (accumulate = true);
//! the executor runs it with event dependencies only (no host synchronisation per stage).

use mercury_plan::{
    CommOp, ComputeOp, DType, GlobalBuffer, OutputPiece, PatchKind, Plan, RankProgram, Region,
    Role, Slot, SlotInit, Stage, View,
};

/// Shape of a RingAttention problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingSpec {
    pub ranks: usize,
    pub b: usize,
    pub hq: usize,
    pub hk: usize,
    /// Total sequence length (queries and keys), split evenly over the ranks.
    pub seq: usize,
    pub d: usize,
    pub causal: bool,
    pub scale: f64,
}

/// Buffer indices of the ring plan.
pub const BUF_Q: usize = 0;
pub const BUF_K: usize = 1;
pub const BUF_V: usize = 2;
pub const BUF_O: usize = 3;
pub const BUF_LSE: usize = 4;

fn full(slot: usize, shape: &[usize]) -> View {
    View {
        slot,
        region: Region::full(shape),
    }
}

/// Builds the plan (see the module docs). Slots of each rank: 0 q, 1/2 k/v buffer A,
/// 3/4 k/v buffer B, 5/6 o/lse accumulator (zero / minus infinity).
pub fn ring_attention_plan(s: &RingSpec) -> Result<Plan, String> {
    let n = s.ranks;
    if n == 0 || !s.seq.is_multiple_of(n) || s.hk == 0 || !s.hq.is_multiple_of(s.hk) {
        return Err(format!(
            "ring spec {s:?}: seq must split over ranks, hq over hk"
        ));
    }
    let c = s.seq / n;
    let q_shape = vec![s.b, s.hq, s.seq, s.d];
    let kv_shape = vec![s.b, s.hk, s.seq, s.d];
    let lse_shape = vec![s.b, s.hq, s.seq];
    let buffers = vec![
        GlobalBuffer {
            name: "q".into(),
            shape: q_shape,
            dtype: DType::BF16,
            role: Role::Input,
        },
        GlobalBuffer {
            name: "k".into(),
            shape: kv_shape.clone(),
            dtype: DType::BF16,
            role: Role::Input,
        },
        GlobalBuffer {
            name: "v".into(),
            shape: kv_shape,
            dtype: DType::BF16,
            role: Role::Input,
        },
        GlobalBuffer {
            name: "o".into(),
            shape: vec![s.b, s.hq, s.seq, s.d],
            dtype: DType::F32,
            role: Role::Output,
        },
        GlobalBuffer {
            name: "lse".into(),
            shape: lse_shape,
            dtype: DType::F32,
            role: Role::Output,
        },
    ];
    let q_tile = vec![s.b, s.hq, c, s.d];
    let kv_tile = vec![s.b, s.hk, c, s.d];
    let lse_tile = vec![s.b, s.hq, c];
    let chunk4 = |i: usize, heads: usize| Region {
        offset: vec![0, 0, i * c, 0],
        extent: vec![s.b, heads, c, s.d],
    };
    let mut ranks = Vec::with_capacity(n);
    for r in 0..n {
        let slot = |name: &str, dtype, shape: &Vec<usize>, init| Slot {
            name: name.into(),
            dtype,
            shape: shape.clone(),
            init,
        };
        let slots = vec![
            slot(
                "q",
                DType::BF16,
                &q_tile,
                SlotInit::FromGlobal {
                    buffer: BUF_Q,
                    region: chunk4(r, s.hq),
                },
            ),
            slot(
                "k_a",
                DType::BF16,
                &kv_tile,
                SlotInit::FromGlobal {
                    buffer: BUF_K,
                    region: chunk4(r, s.hk),
                },
            ),
            slot(
                "v_a",
                DType::BF16,
                &kv_tile,
                SlotInit::FromGlobal {
                    buffer: BUF_V,
                    region: chunk4(r, s.hk),
                },
            ),
            slot("k_b", DType::BF16, &kv_tile, SlotInit::Uninit),
            slot("v_b", DType::BF16, &kv_tile, SlotInit::Uninit),
            slot("o_acc", DType::F32, &q_tile, SlotInit::Zero),
            slot("lse_acc", DType::F32, &lse_tile, SlotInit::NegInf),
        ];
        let mut stages = Vec::with_capacity(n);
        for t in 0..n {
            let chunk = (r + n - t) % n;
            let (kc, vc, kn, vn) = if t % 2 == 0 {
                (1, 2, 3, 4)
            } else {
                (3, 4, 1, 2)
            };
            let mut compute = Vec::new();
            if !s.causal || chunk <= r {
                compute.push(ComputeOp::Patch {
                    patch: PatchKind::Attention {
                        causal: s.causal && chunk == r,
                        scale: s.scale,
                        q_offset: r * c,
                        k_offset: chunk * c,
                        mask: Default::default(),
                        accumulate: true,
                    },
                    inputs: vec![full(0, &q_tile), full(kc, &kv_tile), full(vc, &kv_tile)],
                    outputs: vec![full(5, &q_tile), full(6, &lse_tile)],
                });
            }
            let mut comm = Vec::new();
            if t + 1 < n {
                let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
                comm.push(CommOp::Send {
                    peer: next,
                    src: full(kc, &kv_tile),
                    tag: 0,
                });
                comm.push(CommOp::Send {
                    peer: next,
                    src: full(vc, &kv_tile),
                    tag: 1,
                });
                comm.push(CommOp::Recv {
                    peer: prev,
                    dst: full(kn, &kv_tile),
                    tag: 0,
                });
                comm.push(CommOp::Recv {
                    peer: prev,
                    dst: full(vn, &kv_tile),
                    tag: 1,
                });
            }
            stages.push(Stage { compute, comm });
        }
        let outputs = vec![
            OutputPiece {
                buffer: BUF_O,
                region: chunk4(r, s.hq),
                src: full(5, &q_tile),
            },
            OutputPiece {
                buffer: BUF_LSE,
                region: Region {
                    offset: vec![0, 0, r * c],
                    extent: vec![s.b, s.hq, c],
                },
                src: full(6, &lse_tile),
            },
        ];
        ranks.push(RankProgram {
            rank: r,
            coords: vec![r],
            slots,
            stages,
            outputs,
        });
    }
    let plan = Plan {
        name: "ring_attention".into(),
        mesh: vec![n],
        buffers,
        documents: vec![],
        ranks,
    };
    mercury_plan::verify(&plan).map_err(|e| e.to_string())?;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_runtime::cuda::schedule;

    fn spec(causal: bool) -> RingSpec {
        RingSpec {
            ranks: 8,
            b: 1,
            hq: 4,
            hk: 2,
            seq: 1024,
            d: 128,
            causal,
            scale: 0.088,
        }
    }

    #[test]
    fn ring_plan_verifies_and_schedules() {
        for causal in [false, true] {
            let p = ring_attention_plan(&spec(causal)).unwrap();
            let s = schedule::build(&p).unwrap();
            assert_eq!(s.len(), 8);
            for (t, st) in s.stages.iter().enumerate() {
                // Two messages (k and v) per rank per stage, none in the last stage.
                assert_eq!(st.messages.len(), if t < 7 { 16 } else { 0 });
                assert!(st.collectives.is_empty());
            }
            let ops: Vec<&ComputeOp> = p
                .ranks
                .iter()
                .flat_map(|r| &r.stages)
                .flat_map(|s| &s.compute)
                .collect();
            // Causal: rank r computes r + 1 shards (36 of 64); one accumulating patch each,
            // nothing else (no merge pass, no partial slots).
            assert_eq!(ops.len(), if causal { 36 } else { 64 });
            assert!(ops.iter().all(|op| matches!(
                op,
                ComputeOp::Patch {
                    patch: PatchKind::Attention {
                        accumulate: true,
                        ..
                    },
                    ..
                }
            )));
            assert!(p.ranks.iter().all(|r| r.slots.len() == 7));
        }
    }

    /// The plan's semantics (accumulating attention steps, ring transfers, empty
    /// accumulators) through the CPU reference executor equal whole-sequence attention.
    #[test]
    fn ring_plan_matches_attention_on_the_cpu_executor() {
        use mercury_kernels::cpu::{attention, AttnDims, AttnParams};
        for causal in [false, true] {
            let s = RingSpec {
                ranks: 4,
                b: 1,
                hq: 2,
                hk: 1,
                seq: 96,
                d: 128,
                causal,
                scale: 0.1,
            };
            let p = ring_attention_plan(&s).unwrap();
            let inputs = mercury_runtime::cpu::random_inputs(&p, 7);
            let out = mercury_runtime::cpu::execute(&p, &inputs).unwrap();
            let mut o = vec![0.0; s.hq * s.seq * s.d];
            let mut lse = vec![0.0; s.hq * s.seq];
            attention(
                &inputs["q"],
                &inputs["k"],
                &inputs["v"],
                &mut o,
                &mut lse,
                AttnDims {
                    b: 1,
                    hq: s.hq,
                    hk: s.hk,
                    sq: s.seq,
                    sk: s.seq,
                    d: s.d,
                },
                AttnParams {
                    causal,
                    scale: s.scale,
                    q_offset: 0,
                    k_offset: 0,
                },
            );
            let want =
                std::collections::HashMap::from([("o".to_string(), o), ("lse".to_string(), lse)]);
            let err = mercury_runtime::cpu::relative_error(&out, &want);
            assert!(err < 1e-12, "causal {causal}: {err}");
        }
    }

    #[test]
    fn bad_ring_spec() {
        let mut s = spec(false);
        s.seq = 1001;
        assert!(ring_attention_plan(&s).is_err());
    }
}
