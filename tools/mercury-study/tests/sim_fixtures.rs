//! The cost model on the FIXTURE plans (`mercury_study::fixtures`): closed forms of a ring
//! on one node and across nodes, NIC sharing, causal tiles, bad plans, collective GEMMs.

use mercury_plan::{CommOp, ComputeOp, Plan};
use mercury_search::operator::{AttentionShape, GemmShape};
use mercury_search::sim::{simulate, SimError, SimOptions};
use mercury_search::Topology;
use mercury_study::fixtures::{
    attention_plan, attention_schedules, gemm_plan, AttnSchedule, GemmSchedule, LevelRole, RingMode,
};

fn topo(name: &str) -> Topology {
    Topology::preset(name).unwrap().unwrap()
}

fn shape(seq: usize) -> AttentionShape {
    AttentionShape {
        batch: 1,
        heads: 32,
        kv_heads: 32,
        seq,
        head_dim: 128,
        causal: false,
    }
}

fn sched(mesh: Vec<usize>, roles: Vec<LevelRole>, ring: RingMode) -> AttnSchedule {
    AttnSchedule {
        mesh,
        roles,
        ring,
        q_blocks: 1,
        fused: false,
    }
}

fn ring8() -> AttnSchedule {
    sched(vec![8], vec![LevelRole::Ring], RingMode::Flat)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

/// The ring's latency by hand: per stage max(compute, transfer), plus one NVLink latency after
/// a stage with a transfer (the last step moves nothing and waits for no peer).
#[test]
fn ring_matches_hand_computation_on_one_node() {
    let t = topo("h100-1x8");
    let s = shape(32768);
    let plan = attention_plan(&s, &ring8()).unwrap();
    let sim = simulate(&plan, &t, SimOptions::default()).unwrap();
    let c = s.seq / 8;
    // One attention call per step (plus a merge after the first).
    let flops = 4.0 * 32.0 * 128.0 * (c * c) as f64;
    let blocks = 32.0 * (c as f64 / 128.0).ceil();
    let eff = blocks / ((blocks / 132.0).ceil() * 132.0);
    let attn = t.launch_overhead() + flops / (t.attention_rate(false) * eff);
    let obytes = (32 * c * 128 * 2) as f64;
    let lbytes = (32 * c * 4) as f64;
    let merge = t.launch_overhead() + (3.0 * obytes + 3.0 * lbytes) / t.hbm_bandwidth();
    // k and v leave through the same NVLink egress at once.
    let kv = obytes; // kv heads = 32 in this shape
    let xfer = t.launch_overhead() + t.latency(1) + 2.0 * kv / t.bandwidth(1);
    let sync = t.latency(1);
    let mut want = 0.0;
    for step in 0..8 {
        let compute = if step == 0 { attn } else { attn + merge };
        let (comm, sync) = if step < 7 { (xfer, sync) } else { (0.0, 0.0) };
        want += compute.max(comm) + sync;
    }
    assert!(close(sim.latency, want), "{} vs {want}", sim.latency);
    assert_eq!(sim.stages.len(), 8);
    // Compute-bound on NVLink at this size.
    assert!(sim.exposed_comm_fraction() < 0.01);
}

#[test]
fn ring_across_nodes_is_bound_by_the_shared_nic() {
    let t = topo("h100-2x4");
    let s = shape(32768);
    let plan = attention_plan(&s, &ring8()).unwrap();
    let sim = simulate(&plan, &t, SimOptions::default()).unwrap();
    let kv = (32 * (s.seq / 8) * 128 * 2) as f64;
    // Ranks 3 -> 4 and 7 -> 0 cross; k and v share the NIC of their node.
    let xfer = t.launch_overhead() + t.latency(0) + 2.0 * kv / t.bandwidth(0);
    let st = &sim.stages[0];
    assert!(close(st.comm, xfer), "{} vs {xfer}", st.comm);
    assert!(st.comm > 5.0 * st.compute, "the NIC must dominate");
    assert_eq!(
        sim.tier_bytes[0],
        7.0 * 2.0 * 2.0 * kv,
        "2 crossings x 7 steps x k,v"
    );
}

#[test]
fn per_gpu_nics_relieve_the_two_level_ring_but_not_the_flat_one() {
    let shared = topo("h100-2x4");
    let mut per_gpu = shared.clone();
    per_gpu.levels[0].ports = Some(4);
    let s = shape(65536);
    let flat = attention_plan(&s, &ring8()).unwrap();
    let two = attention_plan(
        &s,
        &sched(
            vec![2, 4],
            vec![LevelRole::Ring, LevelRole::Ring],
            RingMode::TwoLevel,
        ),
    )
    .unwrap();
    let lat = |p: &Plan, t: &Topology| simulate(p, t, SimOptions::default()).unwrap().latency;
    assert!(close(lat(&flat, &shared), lat(&flat, &per_gpu)));
    assert!(lat(&two, &per_gpu) < 0.6 * lat(&two, &shared));
    // With one NIC per node the two-level ring still moves fewer bytes across than the flat
    // ring (4 chunks per node instead of 7).
    assert!(lat(&two, &shared) < lat(&flat, &shared));
}

#[test]
fn ulysses_is_nic_bound_and_has_no_overlap() {
    let t = topo("h100-2x4");
    let s = shape(32768);
    let plan = attention_plan(
        &s,
        &sched(vec![8], vec![LevelRole::Ulysses], RingMode::Flat),
    )
    .unwrap();
    let sim = simulate(&plan, &t, SimOptions::default()).unwrap();
    assert_eq!(sim.stages.len(), 3, "a2a in, attention, a2a out");
    assert_eq!(sim.stages[0].compute, 0.0);
    assert_eq!(sim.stages[2].compute, 0.0);
    // Stage 0 moves q, k, v: each GPU sends half of each across one NIC shared by 4 GPUs.
    let per = (32 * (s.seq / 8) * 128 * 2) as f64;
    let nic = 4.0 * 3.0 * per / 2.0 / t.bandwidth(0);
    assert!(
        sim.stages[0].comm >= nic && sim.stages[0].comm < nic * 1.02,
        "{} vs {nic}",
        sim.stages[0].comm
    );
}

#[test]
fn causal_diagonal_tiles_cost_about_half() {
    let t = topo("h100-1x8");
    let mut s = shape(16384);
    let full = simulate(
        &attention_plan(&s, &ring8()).unwrap(),
        &t,
        SimOptions::default(),
    )
    .unwrap()
    .flops;
    s.causal = true;
    let causal = simulate(
        &attention_plan(&s, &ring8()).unwrap(),
        &t,
        SimOptions::default(),
    )
    .unwrap()
    .flops;
    let ratio = causal / full;
    assert!((ratio - 0.5).abs() < 0.01, "{ratio}");
    assert!((causal - s.flops()).abs() / s.flops() < 1e-9);
}

#[test]
fn bad_plans_are_errors_not_panics() {
    let t = topo("h100-2x4");
    let s = shape(4096);
    let good = attention_plan(&s, &ring8()).unwrap();
    // Unmatched receive.
    let mut p = good.clone();
    p.ranks[2].stages[0]
        .comm
        .retain(|c| !matches!(c, CommOp::Send { .. }));
    let e = simulate(&p, &t, SimOptions::default()).unwrap_err();
    assert!(e.to_string().contains("no matching"), "{e}");
    // Out-of-range slot.
    let mut p = good.clone();
    if let ComputeOp::Patch { inputs, .. } = &mut p.ranks[0].stages[0].compute[0] {
        inputs[0].slot = 99;
    }
    let e = simulate(&p, &t, SimOptions::default()).unwrap_err();
    assert!(e.to_string().contains("slot 99"), "{e}");
    // More ranks than devices.
    let s16 = shape(4096);
    let big = attention_plan(
        &s16,
        &sched(vec![16], vec![LevelRole::Ring], RingMode::Flat),
    )
    .unwrap();
    let e = simulate(&big, &t, SimOptions::default()).unwrap_err();
    assert!(matches!(e, SimError::TooManyRanks { .. }), "{e}");
    // A collective not issued by every member.
    let ul = sched(vec![8], vec![LevelRole::Ulysses], RingMode::Flat);
    let mut p = attention_plan(&s, &ul).unwrap();
    p.ranks[5].stages[0].comm.clear();
    let e = simulate(&p, &t, SimOptions::default()).unwrap_err();
    assert!(e.to_string().contains("issued by ranks"), "{e}");
}

#[test]
fn gemm_collective_plans_price_their_collectives() {
    let t = topo("h100-2x4");
    let g = GemmShape {
        m: 8192,
        n: 8192,
        k: 8192,
        reduce_scatter: false,
    };
    let lat = |s: GemmSchedule| {
        simulate(&gemm_plan(&g, s, 8).unwrap(), &t, SimOptions::default())
            .unwrap()
            .latency
    };
    // All-reduce moves twice what reduce-scatter moves.
    assert!(lat(GemmSchedule::GemmAllReduce) > 1.5 * lat(GemmSchedule::GemmReduceScatter));
    // The ring overlaps the gather with the GEMMs but crosses the NIC 7 times; on this
    // machine the hierarchical all-gather wins.
    assert!(lat(GemmSchedule::AllGatherGemm) < lat(GemmSchedule::RingAllGatherGemm));
    let one = topo("h100-1x8");
    let lat1 = |s: GemmSchedule| {
        simulate(&gemm_plan(&g, s, 8).unwrap(), &one, SimOptions::default())
            .unwrap()
            .latency
    };
    // On NVLink alone the ring hides its transfers behind the GEMMs.
    assert!(lat1(GemmSchedule::RingAllGatherGemm) < lat1(GemmSchedule::AllGatherGemm));
}

#[test]
fn ranking_the_attention_example_is_fast() {
    let t = topo("h100-2x4");
    let s = AttentionShape {
        kv_heads: 8,
        ..shape(32768)
    };
    let start = std::time::Instant::now();
    let mut n = 0;
    for sc in attention_schedules(&s, 8, true) {
        let p = attention_plan(&s, &sc).unwrap();
        simulate(&p, &t, SimOptions::default()).unwrap();
        n += 1;
    }
    let el = start.elapsed().as_secs_f64();
    assert!(n > 20);
    // Debug build, shared CPU: a generous bound; the release binary is far below 1 s.
    assert!(el < 5.0, "{n} simulations took {el} s");
}
