use super::*;
use mercury_plan::{ComputeOp, PatchKind, RankProgram, Region, Slot, SlotInit, Stage, View};

fn topo(name: &str) -> Topology {
    Topology::preset(name).unwrap().unwrap()
}

/// A zero-filled bf16 slot.
fn slot(name: &str, shape: Vec<usize>) -> Slot {
    Slot {
        name: name.into(),
        dtype: mercury_plan::DType::BF16,
        shape,
        init: SlotInit::Zero,
    }
}

/// The whole of slot `s` of `shape`.
fn full(s: usize, shape: &[usize]) -> View {
    View {
        slot: s,
        region: Region::full(shape),
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn overlap_takes_the_max_and_the_barrier_the_slowest_rank() {
    let t = topo("h100-1x8");
    // Rank 0 computes a big GEMM while rank 1 sends it a buffer; rank 1 computes nothing.
    let (m, k, n) = (8192, 8192, 8192);
    let r0 = RankProgram {
        rank: 0,
        coords: vec![0],
        slots: vec![
            slot("a", vec![m, k]),
            slot("b", vec![k, n]),
            slot("c", vec![m, n]),
            slot("in", vec![1 << 20]),
        ],
        stages: vec![Stage {
            compute: vec![ComputeOp::Patch {
                patch: PatchKind::Gemm {
                    accumulate: false,
                    epilogue: None,
                },
                inputs: vec![full(0, &[m, k]), full(1, &[k, n])],
                outputs: vec![full(2, &[m, n])],
            }],
            comm: vec![CommOp::Recv {
                peer: 1,
                dst: full(3, &[1 << 20]),
                tag: 0,
            }],
        }],
        outputs: vec![],
    };
    let r1 = RankProgram {
        rank: 1,
        coords: vec![1],
        slots: vec![slot("out", vec![1 << 20])],
        stages: vec![Stage {
            compute: vec![],
            comm: vec![CommOp::Send {
                peer: 0,
                src: full(0, &[1 << 20]),
                tag: 0,
            }],
        }],
        outputs: vec![],
    };
    let plan = Plan {
        name: "overlap".into(),
        mesh: vec![2],
        buffers: vec![],
        documents: vec![],
        ranks: vec![r0, r1],
    };
    let sim = simulate(&plan, &t, SimOptions { trace: true }).unwrap();
    let gemm = t.launch_overhead() + 2.0 * (m * n * k) as f64 / t.gemm_rate();
    let xfer = t.launch_overhead() + t.latency(1) + (2 << 20) as f64 / t.bandwidth(1);
    assert!(gemm > xfer);
    assert!(
        close(sim.latency, gemm + t.latency(1)),
        "{} vs {}",
        sim.latency,
        gemm
    );
    assert!(close(sim.compute_busy[0], gemm));
    assert!(close(sim.comm_busy[1], xfer));
    assert_eq!(sim.stages[0].critical_rank, 0);
    // The trace: one compute slice on rank 0, a send on rank 1 and a receive on rank 0.
    let tr = sim.chrome_trace("overlap", 2);
    let evs = tr["traceEvents"].as_array().unwrap();
    let x: Vec<&serde_json::Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(x.len(), 3);
    assert!(x
        .iter()
        .any(|e| e["pid"] == 1 && e["tid"] == 1 && e["cat"] == "comm"));
    assert!(x
        .iter()
        .any(|e| e["pid"] == 0 && e["tid"] == 0 && e["cat"] == "compute"));
    assert!(evs
        .iter()
        .any(|e| e["ph"] == "M" && e["args"]["name"] == "compute"));
}

/// A stage without transfers adds no synchronisation (the executor's streams continue in
/// order), an empty stage costs nothing, and a GEMM at a measured point of the topology's
/// rate table is priced at that point's rate.
#[test]
fn local_stages_pay_no_sync_and_rate_points_price_exact_shapes() {
    let mut t = topo("h100-1x8");
    let (m, n, k) = (512, 4096, 8192);
    t.device.rates.gemm_points = vec![crate::topology::GemmPoint {
        m,
        n,
        k,
        tflops: 500.0,
    }];
    let gemm_op = || ComputeOp::Patch {
        patch: PatchKind::Gemm {
            accumulate: false,
            epilogue: None,
        },
        inputs: vec![full(0, &[m, k]), full(1, &[k, n])],
        outputs: vec![full(2, &[m, n])],
    };
    let empty = || Stage {
        compute: vec![],
        comm: vec![],
    };
    let program = |rank: usize, comm: Vec<CommOp>| RankProgram {
        rank,
        coords: vec![rank],
        slots: vec![
            slot("a", vec![m, k]),
            slot("b", vec![k, n]),
            slot("c", vec![m, n]),
            slot("x", vec![1 << 10]),
        ],
        stages: vec![
            empty(),
            Stage {
                compute: vec![gemm_op()],
                comm,
            },
            Stage {
                compute: vec![gemm_op()],
                comm: vec![],
            },
            empty(),
        ],
        outputs: vec![],
    };
    let x = full(3, &[1 << 10]);
    let plan = Plan {
        name: "local".into(),
        mesh: vec![2],
        buffers: vec![],
        documents: vec![],
        ranks: vec![
            program(
                0,
                vec![CommOp::Send {
                    peer: 1,
                    src: x.clone(),
                    tag: 0,
                }],
            ),
            program(
                1,
                vec![CommOp::Recv {
                    peer: 0,
                    dst: x,
                    tag: 0,
                }],
            ),
        ],
    };
    let sim = simulate(&plan, &t, SimOptions::default()).unwrap();
    let gemm = t.launch_overhead() + 2.0 * (m * n * k) as f64 / 500e12;
    assert!(gemm > t.launch_overhead() + t.latency(1) + 2048.0 / t.bandwidth(1));
    // Stage 1: the GEMM (longer than the 2 KiB message) and one NVLink latency; stage 2: the
    // GEMM alone; stages 0 and 3: nothing.
    let want = gemm + t.latency(1) + gemm;
    assert!(close(sim.latency, want), "{} vs {want}", sim.latency);
    assert_eq!(sim.stages[0].end, 0.0);
}

/// A plan names a broadcast's or a reduce's root by its position in the group; the cost model
/// needs its device id (it prices the group sorted). Position 0 of group [5, 2] is device 5.
#[test]
fn roots_are_positions_in_the_plan_and_devices_in_the_model() {
    let r = RankProgram {
        rank: 5,
        coords: vec![5],
        slots: vec![slot("x", vec![1024])],
        stages: vec![],
        outputs: vec![],
    };
    let group = [5, 2];
    let b = Collective::Broadcast {
        buf: full(0, &[1024]),
        root: 0,
    };
    let (kind, _) = collective_kind(&r, &group, &b).unwrap();
    assert!(
        matches!(kind, CollectiveKind::Broadcast { root: 5, .. }),
        "{kind:?}"
    );
    let red = Collective::Reduce {
        src: full(0, &[1024]),
        dst: None,
        root: 1,
        kind: mercury_plan::CombineKind::Add,
    };
    let (kind, _) = collective_kind(&r, &group, &red).unwrap();
    assert!(
        matches!(kind, CollectiveKind::Reduce { root: 2, .. }),
        "{kind:?}"
    );
    let out = Collective::Broadcast {
        buf: full(0, &[1024]),
        root: 2,
    };
    assert!(collective_kind(&r, &group, &out).is_err());
}
