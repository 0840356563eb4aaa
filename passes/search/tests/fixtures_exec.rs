//! Runs the FIXTURE plans on a small f64 CPU executor (written here, independent of the
//! runtime crate) and compares the outputs with the reference kernels, so the plans the cost
//! model times are real schedules. Uninitialised slots are NaN-poisoned.

use mercury_kernels::cpu;
use mercury_plan::{
    Collective, CombineKind, CommOp, ComputeOp, PatchKind, Plan, Region, SlotInit, View,
};
use mercury_search::fixtures::{
    attention_plan, attention_schedules, gemm_plan, AttentionShape, GemmSchedule, GemmShape,
};
use std::collections::BTreeMap;

fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Row-major flat indices of a region of a tensor of `shape`.
fn indices(shape: &[usize], r: &Region) -> Vec<usize> {
    let st = strides(shape);
    let mut out = Vec::with_capacity(r.numel());
    let n = r.rank();
    let mut idx = vec![0usize; n];
    if r.numel() == 0 {
        return out;
    }
    loop {
        let flat: usize = (0..n).map(|d| (r.offset[d] + idx[d]) * st[d]).sum();
        out.push(flat);
        let mut d = n;
        loop {
            if d == 0 {
                return out;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < r.extent[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

struct Mem {
    slots: Vec<Vec<f64>>,
    shapes: Vec<Vec<usize>>,
}

impl Mem {
    fn read(&self, v: &View) -> Vec<f64> {
        indices(&self.shapes[v.slot], &v.region)
            .into_iter()
            .map(|i| self.slots[v.slot][i])
            .collect()
    }
    fn write(&mut self, v: &View, data: &[f64]) {
        let idx = indices(&self.shapes[v.slot], &v.region);
        assert_eq!(idx.len(), data.len(), "write size");
        for (i, x) in idx.into_iter().zip(data) {
            self.slots[v.slot][i] = *x;
        }
    }
}

/// Splits `data` of `shape` into `n` equal chunks along `axis`.
fn chunks(data: &[f64], shape: &[usize], axis: usize, n: usize) -> Vec<Vec<f64>> {
    let len = shape[axis] / n;
    (0..n)
        .map(|c| {
            let mut r = Region::full(shape);
            r.offset[axis] = c * len;
            r.extent[axis] = len;
            indices(shape, &r).into_iter().map(|i| data[i]).collect()
        })
        .collect()
}

/// Concatenates equal chunks along `axis` into a tensor of `shape`.
fn concat(parts: &[Vec<f64>], shape: &[usize], axis: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; shape.iter().product()];
    let len = shape[axis] / parts.len();
    for (c, p) in parts.iter().enumerate() {
        let mut r = Region::full(shape);
        r.offset[axis] = c * len;
        r.extent[axis] = len;
        for (i, x) in indices(shape, &r).into_iter().zip(p) {
            out[i] = *x;
        }
    }
    out
}

fn merge(kind: CombineKind, acc: &mut [Vec<f64>], part: &[Vec<f64>], d: usize) {
    match kind {
        CombineKind::Add => {
            for (a, p) in acc.iter_mut().zip(part) {
                cpu::add(a, p);
            }
        }
        CombineKind::LseMerge => {
            let (o, l) = acc.split_at_mut(1);
            cpu::lse_merge(&mut o[0], &mut l[0], &part[0], &part[1], d);
        }
    }
}

/// Executes `plan` with the given global inputs; returns the global outputs.
fn execute(plan: &Plan, globals: &BTreeMap<usize, Vec<f64>>) -> BTreeMap<usize, Vec<f64>> {
    let mut mems: Vec<Mem> = plan
        .ranks
        .iter()
        .map(|r| {
            let slots = r
                .slots
                .iter()
                .map(|s| {
                    let n: usize = s.shape.iter().product();
                    match &s.init {
                        SlotInit::Uninit => vec![f64::NAN; n],
                        SlotInit::Zero => vec![0.0; n],
                        SlotInit::NegInf => vec![f64::NEG_INFINITY; n],
                        SlotInit::FromGlobal { buffer, region } => {
                            let g = &plan.buffers[*buffer];
                            indices(&g.shape, region)
                                .into_iter()
                                .map(|i| globals[buffer][i])
                                .collect()
                        }
                    }
                })
                .collect();
            Mem {
                slots,
                shapes: r.slots.iter().map(|s| s.shape.clone()).collect(),
            }
        })
        .collect();
    for si in 0..plan.num_stages() {
        // 1. Read everything transfers send (hazard-free by verification).
        let mut p2p: BTreeMap<(usize, usize, u64), Vec<f64>> = BTreeMap::new();
        type Inputs = BTreeMap<usize, Vec<Vec<f64>>>;
        let mut coll_in: BTreeMap<(Vec<usize>, usize), Inputs> = BTreeMap::new();
        for r in &plan.ranks {
            let Some(st) = r.stages.get(si) else { continue };
            let mut occ: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
            for op in &st.comm {
                match op {
                    CommOp::Send { peer, src, tag } => {
                        p2p.insert((r.rank, *peer, *tag), mems[r.rank].read(src));
                    }
                    CommOp::Recv { .. } => {}
                    CommOp::Collective { group, collective } => {
                        let k = occ.entry(group.clone()).or_insert(0);
                        let key = (group.clone(), *k);
                        *k += 1;
                        let data = match collective {
                            Collective::AllGather { src, .. }
                            | Collective::ReduceScatter { src, .. }
                            | Collective::AllToAll { src, .. } => vec![mems[r.rank].read(src)],
                            Collective::AllReduce { bufs, .. } => {
                                bufs.iter().map(|b| mems[r.rank].read(b)).collect()
                            }
                            Collective::Broadcast { buf, .. } => vec![mems[r.rank].read(buf)],
                        };
                        coll_in.entry(key).or_default().insert(r.rank, data);
                    }
                }
            }
        }
        // 2. Compute.
        for r in &plan.ranks {
            let Some(st) = r.stages.get(si) else { continue };
            let m = &mut mems[r.rank];
            for op in &st.compute {
                match op {
                    ComputeOp::Patch {
                        patch,
                        inputs,
                        outputs,
                    } => match patch {
                        PatchKind::Attention {
                            causal,
                            scale,
                            q_offset,
                            k_offset,
                            accumulate,
                        } => {
                            let (q, k, v) =
                                (m.read(&inputs[0]), m.read(&inputs[1]), m.read(&inputs[2]));
                            let qe = &inputs[0].region.extent;
                            let ke = &inputs[1].region.extent;
                            let dims = cpu::AttnDims {
                                b: qe[0],
                                hq: qe[1],
                                hk: ke[1],
                                sq: qe[2],
                                sk: ke[2],
                                d: qe[3],
                            };
                            let mut o = vec![0.0; q.len()];
                            let mut l = vec![0.0; qe[0] * qe[1] * qe[2]];
                            cpu::attention(
                                &q,
                                &k,
                                &v,
                                &mut o,
                                &mut l,
                                dims,
                                cpu::AttnParams {
                                    causal: *causal,
                                    scale: *scale,
                                    q_offset: *q_offset,
                                    k_offset: *k_offset,
                                },
                            );
                            if *accumulate {
                                let mut acc = vec![m.read(&outputs[0]), m.read(&outputs[1])];
                                merge(CombineKind::LseMerge, &mut acc, &[o, l], qe[3]);
                                m.write(&outputs[0], &acc[0]);
                                m.write(&outputs[1], &acc[1]);
                            } else {
                                m.write(&outputs[0], &o);
                                m.write(&outputs[1], &l);
                            }
                        }
                        PatchKind::Gemm { accumulate } => {
                            let sq = |v: &View| -> (usize, usize) {
                                let e: Vec<usize> = v
                                    .region
                                    .extent
                                    .iter()
                                    .copied()
                                    .skip_while(|&x| x == 1)
                                    .collect();
                                match e.as_slice() {
                                    [a, b] => (*a, *b),
                                    [b] => (1, *b),
                                    [] => (1, 1),
                                    _ => panic!("gemm view {e:?}"),
                                }
                            };
                            let ((mm, kk), (_, nn)) = (sq(&inputs[0]), sq(&inputs[1]));
                            let (a, b) = (m.read(&inputs[0]), m.read(&inputs[1]));
                            let mut c = if *accumulate {
                                m.read(&outputs[0])
                            } else {
                                vec![0.0; mm * nn]
                            };
                            cpu::gemm(mm, nn, kk, &a, &b, &mut c, *accumulate);
                            m.write(&outputs[0], &c);
                        }
                    },
                    ComputeOp::Combine { kind, acc, part } => {
                        let mut a: Vec<Vec<f64>> = acc.iter().map(|v| m.read(v)).collect();
                        let p: Vec<Vec<f64>> = part.iter().map(|v| m.read(v)).collect();
                        let d = *acc[0].region.extent.last().unwrap();
                        merge(*kind, &mut a, &p, d);
                        for (v, x) in acc.iter().zip(&a) {
                            m.write(v, x);
                        }
                    }
                    ComputeOp::Copy { src, dst } => {
                        let x = m.read(src);
                        m.write(dst, &x);
                    }
                }
            }
        }
        // 3. Deliver transfers.
        for r in &plan.ranks {
            let Some(st) = r.stages.get(si) else { continue };
            let mut occ: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
            for op in &st.comm {
                match op {
                    CommOp::Send { .. } => {}
                    CommOp::Recv { peer, dst, tag } => {
                        let data = p2p[&(*peer, r.rank, *tag)].clone();
                        mems[r.rank].write(dst, &data);
                    }
                    CommOp::Collective { group, collective } => {
                        let k = occ.entry(group.clone()).or_insert(0);
                        let key = (group.clone(), *k);
                        *k += 1;
                        let inputs = &coll_in[&key];
                        let me = group.iter().position(|g| *g == r.rank).unwrap();
                        let shape_of = |v: &View| v.region.extent.clone();
                        match collective {
                            Collective::AllGather { src, dst, axis } => {
                                let _ = src;
                                let parts: Vec<Vec<f64>> =
                                    group.iter().map(|g| inputs[g][0].clone()).collect();
                                let out = concat(&parts, &shape_of(dst), *axis);
                                mems[r.rank].write(dst, &out);
                            }
                            Collective::AllToAll {
                                src,
                                dst,
                                split_axis,
                                concat_axis,
                            } => {
                                let n = group.len();
                                let parts: Vec<Vec<f64>> = group
                                    .iter()
                                    .map(|g| {
                                        chunks(&inputs[g][0], &shape_of(src), *split_axis, n)[me]
                                            .clone()
                                    })
                                    .collect();
                                let out = concat(&parts, &shape_of(dst), *concat_axis);
                                mems[r.rank].write(dst, &out);
                            }
                            Collective::AllReduce { bufs, kind } => {
                                let mut acc = inputs[&group[0]].clone();
                                for g in &group[1..] {
                                    let d = *bufs[0].region.extent.last().unwrap();
                                    merge(*kind, &mut acc, &inputs[g], d);
                                }
                                for (v, x) in bufs.iter().zip(&acc) {
                                    mems[r.rank].write(v, x);
                                }
                            }
                            Collective::ReduceScatter {
                                src,
                                dst,
                                axis,
                                kind,
                            } => {
                                assert_eq!(*kind, CombineKind::Add);
                                let mut acc = inputs[&group[0]][0].clone();
                                for g in &group[1..] {
                                    cpu::add(&mut acc, &inputs[g][0]);
                                }
                                let mine =
                                    chunks(&acc, &shape_of(src), *axis, group.len())[me].clone();
                                mems[r.rank].write(dst, &mine);
                            }
                            Collective::Broadcast { buf, root } => {
                                let data = inputs[&group[*root]][0].clone();
                                mems[r.rank].write(buf, &data);
                            }
                        }
                    }
                }
            }
        }
    }
    // Outputs, each element written exactly once.
    let mut outs: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut count: BTreeMap<usize, Vec<u32>> = BTreeMap::new();
    for (bi, b) in plan.buffers.iter().enumerate() {
        if b.role == mercury_plan::Role::Output {
            let n: usize = b.shape.iter().product();
            outs.insert(bi, vec![f64::NAN; n]);
            count.insert(bi, vec![0; n]);
        }
    }
    for r in &plan.ranks {
        for o in &r.outputs {
            let data = mems[r.rank].read(&o.src);
            let idx = indices(&plan.buffers[o.buffer].shape, &o.region);
            for (i, x) in idx.into_iter().zip(data) {
                outs.get_mut(&o.buffer).unwrap()[i] = x;
                count.get_mut(&o.buffer).unwrap()[i] += 1;
            }
        }
    }
    for (b, c) in &count {
        assert!(
            c.iter().all(|&x| x == 1),
            "output buffer {b}: coverage {:?}",
            c
        );
    }
    outs
}

fn data(n: usize, seed: f64) -> Vec<f64> {
    (0..n).map(|i| ((i as f64 + 1.0) * seed).sin()).collect()
}

fn check_attention(shape: AttentionShape, n: usize) -> usize {
    let AttentionShape {
        batch: b,
        heads: hq,
        kv_heads: hk,
        seq: s,
        head_dim: d,
        causal,
    } = shape;
    let q = data(b * hq * s * d, 0.37);
    let k = data(b * hk * s * d, 0.71);
    let v = data(b * hk * s * d, 1.13);
    let mut want = vec![0.0; q.len()];
    let mut lse = vec![0.0; b * hq * s];
    cpu::attention(
        &q,
        &k,
        &v,
        &mut want,
        &mut lse,
        cpu::AttnDims {
            b,
            hq,
            hk,
            sq: s,
            sk: s,
            d,
        },
        cpu::AttnParams {
            causal,
            scale: 1.0 / (d as f64).sqrt(),
            q_offset: 0,
            k_offset: 0,
        },
    );
    let globals: BTreeMap<usize, Vec<f64>> = [(0, q), (1, k), (2, v)].into_iter().collect();
    let scheds = attention_schedules(&shape, n, true);
    for sch in &scheds {
        let plan = attention_plan(&shape, sch).unwrap();
        mercury_plan::verify(&plan).unwrap();
        let got = execute(&plan, &globals);
        let o = &got[&3];
        for (i, (x, y)) in o.iter().zip(&want).enumerate() {
            assert!(
                (x - y).abs() < 1e-10,
                "{} (causal {causal}): element {i}: {x} vs {y}",
                sch.name()
            );
        }
    }
    scheds.len()
}

#[test]
fn attention_fixtures_compute_attention() {
    let base = AttentionShape {
        batch: 2,
        heads: 8,
        kv_heads: 8,
        seq: 64,
        head_dim: 4,
        causal: false,
    };
    let n = check_attention(base, 8);
    assert!(n >= 30, "only {n} schedules checked");
    // GQA and causal masks.
    check_attention(
        AttentionShape {
            kv_heads: 2,
            batch: 1,
            ..base
        },
        8,
    );
    check_attention(
        AttentionShape {
            causal: true,
            kv_heads: 4,
            ..base
        },
        8,
    );
    check_attention(
        AttentionShape {
            causal: true,
            ..base
        },
        4,
    );
}

#[test]
fn gemm_fixtures_compute_gemm() {
    let (m, n, k) = (16, 8, 12);
    let a = data(m * k, 0.3);
    let b = data(k * n, 0.9);
    let mut want = vec![0.0; m * n];
    cpu::gemm(m, n, k, &a, &b, &mut want, false);
    let globals: BTreeMap<usize, Vec<f64>> = [(0, a), (1, b)].into_iter().collect();
    for p in [1, 2, 4] {
        for s in GemmSchedule::ALL {
            let plan = gemm_plan(&GemmShape { m, n, k }, s, p).unwrap();
            let got = execute(&plan, &globals);
            for (x, y) in got[&2].iter().zip(&want) {
                assert!((x - y).abs() < 1e-10, "{} over {p}: {x} vs {y}", s.name());
            }
        }
    }
}

#[test]
fn executor_catches_a_broken_plan() {
    // Drop one ring transfer's receive target: the plan then reads poisoned data.
    let shape = AttentionShape {
        batch: 1,
        heads: 2,
        kv_heads: 2,
        seq: 16,
        head_dim: 2,
        causal: false,
    };
    let sched = attention_schedules(&shape, 4, false)
        .into_iter()
        .find(|s| s.name() == "ring")
        .unwrap();
    let mut plan = attention_plan(&shape, &sched).unwrap();
    // Make rank 1 attend its own chunk twice instead of the received one.
    let st = &mut plan.ranks[1].stages[1];
    if let ComputeOp::Patch { inputs, .. } = &mut st.compute[0] {
        inputs[1].slot = 1; // k_in
        inputs[2].slot = 2; // v_in
    }
    let q = data(2 * 16 * 2, 0.37);
    let k = data(2 * 16 * 2, 0.71);
    let v = data(2 * 16 * 2, 1.13);
    let globals: BTreeMap<usize, Vec<f64>> = [(0, q), (1, k), (2, v)].into_iter().collect();
    let got = execute(&plan, &globals);
    let sched_ok = attention_plan(&shape, &sched).unwrap();
    let good = execute(&sched_ok, &globals);
    assert!(
        got[&3]
            .iter()
            .zip(&good[&3])
            .any(|(a, b)| (a - b).abs() > 1e-6),
        "the check must notice a wrong plan"
    );
}

/// The same plans on the runtime's CPU executor (the lead's interpretation of the plan
/// format): every fixture schedule must agree with the reference there too.
#[test]
fn fixtures_run_on_the_runtime_cpu_executor() {
    let shapes = [
        AttentionShape {
            batch: 1,
            heads: 8,
            kv_heads: 4,
            seq: 32,
            head_dim: 4,
            causal: false,
        },
        AttentionShape {
            batch: 1,
            heads: 4,
            kv_heads: 4,
            seq: 32,
            head_dim: 4,
            causal: true,
        },
    ];
    let mut checked = 0;
    for shape in shapes {
        for sch in attention_schedules(&shape, 4, true) {
            let plan = attention_plan(&shape, &sch).unwrap();
            let inputs = mercury_runtime::cpu::random_inputs(&plan, 7);
            let got = mercury_runtime::cpu::execute(&plan, &inputs)
                .unwrap_or_else(|e| panic!("{}: {e}", sch.name()));
            let globals: BTreeMap<usize, Vec<f64>> = (0..3)
                .map(|i| (i, inputs[&plan.buffers[i].name].clone()))
                .collect();
            let mine = execute(&plan, &globals);
            let theirs = &got["o"];
            for (i, (x, y)) in theirs.iter().zip(&mine[&3]).enumerate() {
                assert!(
                    (x - y).abs() < 1e-10,
                    "{}: element {i}: {x} vs {y}",
                    sch.name()
                );
            }
            checked += 1;
        }
    }
    for s in GemmSchedule::ALL {
        let plan = gemm_plan(&GemmShape { m: 8, n: 8, k: 8 }, s, 4).unwrap();
        let inputs = mercury_runtime::cpu::random_inputs(&plan, 3);
        let got = mercury_runtime::cpu::execute(&plan, &inputs).unwrap();
        let mut want = vec![0.0; 64];
        cpu::gemm(8, 8, 8, &inputs["a"], &inputs["b"], &mut want, false);
        for (x, y) in got["c"].iter().zip(&want) {
            assert!((x - y).abs() < 1e-10, "{}: {x} vs {y}", s.name());
        }
    }
    assert!(checked >= 20, "{checked}");
}
