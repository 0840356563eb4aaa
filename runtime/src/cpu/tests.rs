//! The CPU executor's tests.

use super::*;
use mercury_driver::{Compiler, Schedule};
use mercury_plan::*;
use std::collections::HashMap;

/// A GEMM with a bf16, an f16 and an f32 input: 3 x 100000 values (more than one chunk).
const KERNEL: &str = "commir.mesh @m shape [1]
commir.kernel @g on @m {
  commir.axis @i = 1000 spatial
  commir.axis @j = 100 managed
  commir.buffer @A : [@i, @j] bf16 in
  commir.buffer @B : [@i, @j] f16 in
  commir.buffer @D : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<bf16>
  %d = commir.load @D[@j] : !commir.tile<f32>
  %c = commir.patch \"gemm\" (%a, %d) : (!commir.tile<bf16>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
";

#[test]
fn random_inputs_are_rounded_seekable_and_seeded() {
    use rand::{RngCore, SeedableRng};
    let plan = Compiler::new()
        .compile("g.mlir", KERNEL, &Schedule::default())
        .unwrap();
    let a = random_inputs(&plan, 3);
    for b in plan.buffers.iter().filter(|b| b.role == Role::Input) {
        let v = &a[&b.name];
        assert_eq!(v.len(), b.shape.iter().product::<usize>());
        assert!(v.iter().all(|x| (-1.0..=1.0).contains(x)));
        // Exactly representable in the buffer's dtype: the device holds these numbers.
        assert!(v.iter().all(|x| round_to(b.dtype, *x) == *x), "{}", b.name);
    }
    // Stream k is the k-th input buffer, drawn sequentially: the chunks seek right.
    let k = plan
        .buffers
        .iter()
        .filter(|b| b.role == Role::Input)
        .position(|b| b.name == "A")
        .unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    rng.set_stream(k as u64);
    let seq: Vec<f64> = (0..100_000)
        .map(|_| {
            let u = (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 52) as f64);
            round_to(DType::BF16, u - 1.0)
        })
        .collect();
    assert_eq!(a["A"], seq);
    assert_eq!(random_inputs(&plan, 3), a);
    let b = random_inputs(&plan, 4);
    assert_ne!(b["A"], a["A"]);
    assert_ne!(a["A"][..50], a["B"][..50]);
}

fn whole(slot: usize, n: usize) -> View {
    View {
        slot,
        region: Region::full(&[n]),
    }
}

fn slot(name: &str, dtype: DType, n: usize, init: SlotInit) -> Slot {
    Slot {
        name: name.into(),
        dtype,
        shape: vec![n],
        init,
    }
}

/// Two ranks: rank 0 loads X into an f32 slot and copies it into a bf16 one, rank 1
/// receives rank 0's f32 slot into a bf16 one; Y gathers both bf16 slots, Z (bf16) is read
/// straight from rank 0's f32 slot.
fn rounding_plan() -> Plan {
    let x = SlotInit::FromGlobal {
        buffer: 0,
        region: Region::full(&[4]),
    };
    let buffer = |name: &str, n: usize, dtype: DType, role: Role| GlobalBuffer {
        name: name.into(),
        shape: vec![n],
        dtype,
        role,
    };
    let piece = |buffer: usize, offset: usize, src: View| OutputPiece {
        buffer,
        region: Region {
            offset: vec![offset],
            extent: vec![4],
        },
        src,
    };
    Plan {
        name: "rounding".into(),
        mesh: vec![2],
        buffers: vec![
            buffer("X", 4, DType::F32, Role::Input),
            buffer("Y", 8, DType::F32, Role::Output),
            buffer("Z", 4, DType::BF16, Role::Output),
        ],
        documents: vec![],
        ranks: vec![
            RankProgram {
                rank: 0,
                coords: vec![0],
                slots: vec![
                    slot("x", DType::F32, 4, x.clone()),
                    slot("x.narrow", DType::BF16, 4, SlotInit::Uninit),
                ],
                stages: vec![Stage {
                    compute: vec![ComputeOp::Copy {
                        src: whole(0, 4),
                        dst: whole(1, 4),
                    }],
                    comm: vec![CommOp::Send {
                        peer: 1,
                        src: whole(0, 4),
                        tag: 0,
                    }],
                }],
                outputs: vec![piece(1, 0, whole(1, 4)), piece(2, 0, whole(0, 4))],
            },
            RankProgram {
                rank: 1,
                coords: vec![1],
                slots: vec![slot("x.received", DType::BF16, 4, SlotInit::Uninit)],
                stages: vec![Stage {
                    compute: vec![],
                    comm: vec![CommOp::Recv {
                        peer: 0,
                        dst: whole(0, 4),
                        tag: 0,
                    }],
                }],
                outputs: vec![piece(1, 4, whole(0, 4))],
            },
        ],
    }
}

/// Three ranks over the group [2, 0, 1] each hold X[4r..4r + 4] and reduce (add) it in two
/// halves: elements 0..2 to member 1 (rank 0), in place, and elements 2..4 to member 0
/// (rank 2) into a bf16 slot; rank 1 only sends. Y[i] is the sum over ranks, each half
/// output by its root, the second rounded to bf16 when stored in its dtype.
#[test]
fn reduce_sums_into_the_root_only() {
    let group = vec![2, 0, 1];
    let half = |slot: usize, at: usize| View {
        slot,
        region: Region {
            offset: vec![at],
            extent: vec![2],
        },
    };
    let ranks = (0..3)
        .map(|r| {
            let mut slots = vec![slot(
                "x",
                DType::F32,
                4,
                SlotInit::FromGlobal {
                    buffer: 0,
                    region: Region {
                        offset: vec![4 * r],
                        extent: vec![4],
                    },
                },
            )];
            let mut outputs = Vec::new();
            let first = (r == 0).then(|| half(0, 0));
            let second = (r == 2).then(|| {
                slots.push(slot("y.reduced", DType::BF16, 2, SlotInit::Uninit));
                whole(1, 2)
            });
            for (at, dst) in [(0, &first), (2, &second)] {
                if let Some(d) = dst {
                    outputs.push(OutputPiece {
                        buffer: 1,
                        region: Region {
                            offset: vec![at],
                            extent: vec![2],
                        },
                        src: d.clone(),
                    });
                }
            }
            let reduce = |src: View, dst: Option<View>, root: usize| CommOp::Collective {
                group: group.clone(),
                collective: Collective::Reduce {
                    src,
                    dst,
                    root,
                    kind: CombineKind::Add,
                },
            };
            RankProgram {
                rank: r,
                coords: vec![r],
                slots,
                stages: vec![Stage {
                    compute: vec![],
                    comm: vec![reduce(half(0, 0), first, 1), reduce(half(0, 2), second, 0)],
                }],
                outputs,
            }
        })
        .collect();
    let plan = Plan {
        name: "reduce".into(),
        mesh: vec![3],
        buffers: vec![
            GlobalBuffer {
                name: "X".into(),
                shape: vec![12],
                dtype: DType::F32,
                role: Role::Input,
            },
            GlobalBuffer {
                name: "Y".into(),
                shape: vec![4],
                dtype: DType::F32,
                role: Role::Output,
            },
        ],
        documents: vec![],
        ranks,
    };
    // Rank r holds (r + 1) + i 2^-9: the sums are 6 + 3 i 2^-9, f32 numbers; bf16 (an
    // ulp of 2^-5 there) rounds the last two to 6 and 6 + 2^-5.
    let x: Vec<f64> = (0..12)
        .map(|e| (e / 4 + 1) as f64 + (e % 4) as f64 * 2f64.powi(-9))
        .collect();
    let inputs = HashMap::from([("X".to_string(), x)]);
    let sum = |i: usize| 6.0 + 3.0 * i as f64 * 2f64.powi(-9);
    let exact: Vec<f64> = (0..4).map(sum).collect();
    assert_eq!(execute(&plan, &inputs).unwrap()["Y"], exact);
    let stored = execute_with(&plan, &inputs, Storage::Dtype).unwrap();
    assert_eq!(stored["Y"], vec![sum(0), sum(1), 6.0, 6.0 + 2f64.powi(-5)]);
    // A root that names no destination is refused (by the verifier, located).
    let mut bad = plan.clone();
    if let CommOp::Collective {
        collective: Collective::Reduce { dst, .. },
        ..
    } = &mut bad.ranks[2].stages[0].comm[1]
    {
        *dst = None;
    }
    let e = execute(&bad, &inputs).unwrap_err().to_string();
    assert!(
        e.contains("rank 2") && e.contains("names no destination"),
        "{e}"
    );
}

/// Under `Storage::Dtype` every store rounds to its slot's dtype (the initial load to f32,
/// the copy and the received message to bf16) and an output piece to its buffer's dtype;
/// under `Storage::F64` nothing is rounded.
#[test]
fn dtype_storage_rounds_every_store() {
    let plan = rounding_plan();
    // 1 + 2^-30 is not an f32; 1 + 2^-10 and 3 + 2^-20 are f32s but not bf16s.
    let x = vec![
        1.0 + 2f64.powi(-30),
        1.0 + 2f64.powi(-10),
        3.0 + 2f64.powi(-20),
        0.5,
    ];
    let inputs = HashMap::from([("X".to_string(), x.clone())]);
    let exact = execute(&plan, &inputs).unwrap();
    assert_eq!(exact["Y"], [x.clone(), x.clone()].concat());
    assert_eq!(exact["Z"], x);
    let stored = execute_with(&plan, &inputs, Storage::Dtype).unwrap();
    let bf16: Vec<f64> = x.iter().map(|v| round_to(DType::BF16, *v)).collect();
    assert_eq!(bf16, [1.0, 1.0, 3.0, 0.5]);
    assert_eq!(stored["Y"], [bf16.clone(), bf16.clone()].concat());
    assert_eq!(stored["Z"], bf16);
    // The f32 load alone: the rank-0 slot read as an f64 output.
    let mut f32_out = plan.clone();
    f32_out.buffers[2].dtype = DType::F64;
    let got = execute_with(&f32_out, &inputs, Storage::Dtype).unwrap();
    assert_eq!(got["Z"], [1.0, x[1], x[2], 0.5]);
}

/// An attention patch whose output view has the wrong rank is refused with an error (it
/// used to panic slicing the output's extent).
#[test]
fn attention_with_a_malformed_output_view_is_an_error() {
    let four = |name: &str, init: SlotInit| Slot {
        name: name.into(),
        dtype: DType::F32,
        shape: vec![1, 1, 2, 4],
        init,
    };
    let view4 = |slot: usize| View {
        slot,
        region: Region::full(&[1, 1, 2, 4]),
    };
    let plan = Plan {
        name: "attn".into(),
        mesh: vec![1],
        buffers: vec![],
        documents: vec![],
        ranks: vec![RankProgram {
            rank: 0,
            coords: vec![0],
            slots: vec![
                four("q", SlotInit::Zero),
                four("k", SlotInit::Zero),
                four("v", SlotInit::Zero),
                slot("o", DType::F32, 8, SlotInit::Zero),
                slot("lse", DType::F32, 2, SlotInit::Zero),
            ],
            stages: vec![Stage {
                compute: vec![ComputeOp::Patch {
                    patch: PatchKind::Attention {
                        causal: false,
                        scale: 0.5,
                        q_offset: 0,
                        k_offset: 0,
                        mask: Default::default(),
                        accumulate: false,
                    },
                    inputs: vec![view4(0), view4(1), view4(2)],
                    outputs: vec![whole(3, 8), whole(4, 2)],
                }],
                comm: vec![],
            }],
            outputs: vec![],
        }],
    };
    let e = execute(&plan, &HashMap::new()).unwrap_err();
    assert!(
        e.to_string().contains("attention shapes do not agree"),
        "{e}"
    );
}

/// Elements apart by more than 2^-16 of the reference's root mean square count; f32-level
/// differences, a missing output and non-finite values as the doc says.
#[test]
fn rounded_otherwise_counts_elements_rounded_apart() {
    let out = |v: Vec<f64>| HashMap::from([("C".to_string(), v)]);
    let want = out(vec![1.0; 8]);
    let mut got = want["C"].clone();
    got[0] += 2f64.powi(-20);
    assert_eq!(rounded_otherwise(&out(got.clone()), &want), 0);
    got[1] += 2f64.powi(-8);
    got[2] = f64::NAN;
    assert_eq!(rounded_otherwise(&out(got), &want), 2);
    assert_eq!(rounded_otherwise(&out(vec![1.0; 8]), &HashMap::new()), 8);
}
