//! FIXTURE plans: hand-written plan builders for known attention and GEMM schedules. They are
//! *not* produced by the compiler, and no product path uses them (the search, the graph level
//! and `mercury-tune` take their candidates from the CommIR generator); they remain as a
//! cross-check of the lowering in the simulation study ([`crate::study`]) and as the plans of
//! the cost model's closed-form tests (`tests/sim_fixtures.rs`). Every builder returns a plan
//! that passes [`mercury_plan::verify()`] and computes the operator exactly
//! (`tests/fixtures_exec.rs` runs them on the runtime's CPU executor against the reference
//! kernels).
//!
//! Attention contract (the baselines' one, so that all schedules are comparable): q, k, v and
//! the output o are global `[b, h, s, d]` buffers; device `r` of `n` starts with tokens
//! `[r*s/n, (r+1)*s/n)` of q, k, v (all heads) and must end with the same tokens of o.
//!
//! The attention family ([`AttnSchedule`]) covers Ring, Ulysses, USP, LoongTrain and context
//! parallelism (all-gather KV) as role assignments over a logical mesh (an ordered
//! factorisation of the device count): every level is either *Ulysses* (an all-to-all turns
//! the level's sequence split into a head split) or *ring* (KV chunks travel, or are
//! all-gathered, along it). The levels of a plan's logical mesh map onto physical devices by
//! row-major numbering, as everywhere in Mercury.

use mercury_plan::{
    coords_of, Collective, CombineKind, CommOp, ComputeOp, DType, GlobalBuffer, OutputPiece,
    PatchKind, Plan, RankProgram, Region, Role as BufRole, Slot, SlotInit, Stage, View,
};
use mercury_search::operator::{AttentionShape, GemmShape, OperatorSpec};
use mercury_search::search::{Candidate, CandidateSource, SourceError};
use mercury_search::Topology;
use serde::{Deserialize, Serialize};

mod gemm;
mod source;
#[cfg(test)]
mod tests;

pub use gemm::{gemm_plan, GemmSchedule};
pub use source::{paper_baselines, FixtureSource};

/// Role of one logical mesh level in an attention schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LevelRole {
    Ulysses,
    Ring,
}

/// How KV moves along the ring levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RingMode {
    /// One ring over all ring levels (shift).
    Flat,
    /// Inner ring on the fastest ring level, outer ring over the others, the outer transfer
    /// spread over the inner steps (LoongTrain's double ring; Mercury's two-level shift).
    TwoLevel,
    /// All-gather KV over the ring levels, no shift (context parallelism).
    AllGather,
}

/// One attention schedule of the fixture family.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttnSchedule {
    /// Logical mesh (product = device count), slowest first.
    pub mesh: Vec<usize>,
    pub roles: Vec<LevelRole>,
    pub ring: RingMode,
    /// Query blocks per attention call group: >1 shrinks the partial-result buffer by this
    /// factor at the price of more, smaller kernels (a memory-lean variant).
    pub q_blocks: usize,
    /// Attention tiles merge into the accumulator themselves (`PatchKind::Attention` with
    /// `accumulate`): no partial buffers, no separate merge kernels.
    #[serde(default)]
    pub fused: bool,
}

impl AttnSchedule {
    fn levels_with(&self, role: LevelRole) -> Vec<usize> {
        (0..self.mesh.len())
            .filter(|&i| self.roles[i] == role)
            .collect()
    }
    pub fn ulysses_degree(&self) -> usize {
        self.levels_with(LevelRole::Ulysses)
            .iter()
            .map(|&i| self.mesh[i])
            .product()
    }
    pub fn ring_degree(&self) -> usize {
        self.levels_with(LevelRole::Ring)
            .iter()
            .map(|&i| self.mesh[i])
            .product()
    }

    /// Canonical name: `ring`, `ulysses`, `loongtrain[2x4]`, `usp[r2.u4]`, ...
    pub fn name(&self) -> String {
        let u = self.ulysses_degree();
        let r = self.ring_degree();
        let levels: Vec<String> = self
            .mesh
            .iter()
            .zip(&self.roles)
            .map(|(m, role)| match role {
                LevelRole::Ulysses => format!("u{m}"),
                LevelRole::Ring => format!("r{m}"),
            })
            .collect();
        let base = if r == 1 {
            "ulysses".to_string()
        } else {
            match (u == 1, self.ring) {
                (true, RingMode::Flat) if self.mesh.len() == 1 => "ring".into(),
                (true, RingMode::AllGather) if self.mesh.len() == 1 => "cp-allgather".into(),
                (true, RingMode::TwoLevel) => format!("loongtrain[{}]", levels.join(".")),
                (false, RingMode::Flat) => format!("usp[{}]", levels.join(".")),
                (false, RingMode::TwoLevel) => format!("usp-2level[{}]", levels.join(".")),
                (false, RingMode::AllGather) => format!("usp-allgather[{}]", levels.join(".")),
                (true, RingMode::Flat) => format!("ring[{}]", levels.join(".")),
                (true, RingMode::AllGather) => format!("cp-allgather[{}]", levels.join(".")),
            }
        };
        let base = if self.q_blocks > 1 {
            format!("{base}+lean{}", self.q_blocks)
        } else {
            base
        };
        if self.fused {
            format!("{base}+fused")
        } else {
            base
        }
    }

    /// A Mercury-style description of the schedule (for the chosen-schedule file).
    pub fn transform_script(&self, shape: &AttentionShape) -> String {
        let mut s = String::new();
        s.push_str("// FIXTURE schedule (hand-written plan builder, not generated from CommIR)\n");
        s.push_str(&format!("// operator: {}\n", shape.signature()));
        s.push_str(&format!(
            "mesh {}\n",
            self.mesh
                .iter()
                .map(|m| m.to_string())
                .collect::<Vec<_>>()
                .join("x")
        ));
        let ring_levels = self.levels_with(LevelRole::Ring);
        for (i, (m, role)) in self.mesh.iter().zip(&self.roles).enumerate() {
            let inner = ring_levels.last() == Some(&i);
            match role {
                LevelRole::Ulysses => s.push_str(&format!(
                    "level {i} ({m}): all-to-all q,k,v from sequence- to head-sharded, o back\n"
                )),
                LevelRole::Ring => s.push_str(&format!(
                    "level {i} ({m}): parallelize(I); {}\n",
                    match self.ring {
                        RingMode::Flat => "shift(J) with double-buffered kv",
                        RingMode::TwoLevel if inner =>
                            "shift(J) on the inner ring (double-buffered kv)",
                        RingMode::TwoLevel => {
                            "shift(J) on the outer ring, each transfer spread over the inner steps"
                        }
                        RingMode::AllGather => "shard(kv) read as all-gather",
                    }
                )),
            }
        }
        if self.fused {
            s.push_str("patch(attention, accumulate): tiles merge into the accumulator\n");
        }
        if self.q_blocks > 1 {
            s.push_str(&format!(
                "tile(I, {}) inside each step: partial buffer 1/{} of the query shard\n",
                self.q_blocks, self.q_blocks
            ));
        }
        s
    }
}

/// Why a schedule does not apply to a shape.
pub fn check_schedule(shape: &AttentionShape, s: &AttnSchedule) -> Result<(), String> {
    let n: usize = s.mesh.iter().product();
    if s.mesh.is_empty() || s.mesh.len() != s.roles.len() || s.mesh.contains(&0) {
        return Err("mesh and roles must be non-empty, same length, sizes >= 1".into());
    }
    if shape.batch == 0 || shape.heads == 0 || shape.kv_heads == 0 || shape.head_dim == 0 {
        return Err("attention dimensions must be positive".into());
    }
    if !shape.heads.is_multiple_of(shape.kv_heads) {
        return Err(format!(
            "{} query heads are not a multiple of {} kv heads",
            shape.heads, shape.kv_heads
        ));
    }
    if !shape.seq.is_multiple_of(n) {
        return Err(format!(
            "sequence {} does not split over {n} devices",
            shape.seq
        ));
    }
    let u = s.ulysses_degree();
    if !shape.kv_heads.is_multiple_of(u) {
        return Err(format!(
            "Ulysses degree {u} does not divide {} kv heads",
            shape.kv_heads
        ));
    }
    if s.q_blocks == 0 || !(shape.seq / n * u).is_multiple_of(s.q_blocks) {
        return Err(format!(
            "q_blocks {} does not split the query shard",
            s.q_blocks
        ));
    }
    if s.ring == RingMode::TwoLevel && s.levels_with(LevelRole::Ring).len() < 2 {
        return Err("a two-level ring needs two ring levels".into());
    }
    Ok(())
}

// ----- small plan-building helpers -----

#[derive(Default)]
struct RankB {
    slots: Vec<Slot>,
    stages: Vec<Stage>,
    outputs: Vec<OutputPiece>,
}

impl RankB {
    fn slot(&mut self, name: &str, dtype: DType, shape: Vec<usize>, init: SlotInit) -> usize {
        self.slots.push(Slot {
            name: name.into(),
            dtype,
            shape,
            init,
        });
        self.slots.len() - 1
    }
    fn stage(&mut self, i: usize) -> &mut Stage {
        while self.stages.len() <= i {
            self.stages.push(Stage::default());
        }
        &mut self.stages[i]
    }
    fn full(&self, slot: usize) -> View {
        View {
            slot,
            region: Region::full(&self.slots[slot].shape),
        }
    }
    /// Sub-view of `slot` restricted to `[start, start + len)` along `axis`.
    fn along(&self, slot: usize, axis: usize, start: usize, len: usize) -> View {
        let mut region = Region::full(&self.slots[slot].shape);
        region.offset[axis] = start;
        region.extent[axis] = len;
        View { slot, region }
    }
}

fn region_along(shape: &[usize], axis: usize, start: usize, len: usize) -> Region {
    let mut r = Region::full(shape);
    r.offset[axis] = start;
    r.extent[axis] = len;
    r
}

fn finish(name: String, mesh: Vec<usize>, buffers: Vec<GlobalBuffer>, ranks: Vec<RankB>) -> Plan {
    let ranks = ranks
        .into_iter()
        .enumerate()
        .map(|(i, r)| RankProgram {
            rank: i,
            coords: coords_of(&mesh, i),
            slots: r.slots,
            stages: r.stages,
            outputs: r.outputs,
        })
        .collect();
    Plan {
        name,
        mesh,
        buffers,
        documents: vec![],
        ranks,
    }
}

fn attn_buffers(shape: &AttentionShape) -> Vec<GlobalBuffer> {
    let AttentionShape {
        batch: b,
        heads: hq,
        kv_heads: hk,
        seq: s,
        head_dim: d,
        ..
    } = *shape;
    let buf = |name: &str, h: usize, role| GlobalBuffer {
        name: name.into(),
        shape: vec![b, h, s, d],
        dtype: DType::BF16,
        role,
    };
    vec![
        buf("q", hq, BufRole::Input),
        buf("k", hk, BufRole::Input),
        buf("v", hk, BufRole::Input),
        buf("o", hq, BufRole::Output),
    ]
}

/// One contiguous range of the local sequence axis and the global token it starts at.
#[derive(Clone, Copy, Debug)]
struct Piece {
    local: usize,
    len: usize,
    global: usize,
}

/// State of the attention accumulation of one rank.
struct Acc {
    q: usize,
    o: usize,
    lse: usize,
    /// Partial-result slots (None when tiles accumulate in place).
    part: Option<(usize, usize)>,
    /// Query blocks (local ranges of q with their global token offsets).
    blocks: Vec<Piece>,
    /// Whether each block already holds a contribution.
    started: Vec<bool>,
    causal: bool,
    scale: f64,
}

impl Acc {
    /// Attention of every query block against `k_ranges` of the kv slots, merged into acc.
    fn attend(&mut self, rb: &mut RankB, stage: usize, k: usize, v: usize, k_ranges: &[Piece]) {
        for bi in 0..self.blocks.len() {
            let qb = self.blocks[bi];
            for kr in k_ranges {
                if self.causal && kr.global > qb.global + qb.len - 1 {
                    continue; // fully masked: skipped (the kernel would do nothing)
                }
                let qv = rb.along(self.q, 2, qb.local, qb.len);
                let kv = rb.along(k, 2, kr.local, kr.len);
                let vv = rb.along(v, 2, kr.local, kr.len);
                let patch = PatchKind::Attention {
                    causal: self.causal,
                    scale: self.scale,
                    q_offset: qb.global,
                    k_offset: kr.global,
                    mask: Default::default(),
                    accumulate: false,
                };
                let acc_views = vec![
                    rb.along(self.o, 2, qb.local, qb.len),
                    rb.along(self.lse, 2, qb.local, qb.len),
                ];
                match self.part {
                    Some((o_part, lse_part)) if self.started[bi] => {
                        let part = vec![
                            rb.along(o_part, 2, 0, qb.len),
                            rb.along(lse_part, 2, 0, qb.len),
                        ];
                        let st = rb.stage(stage);
                        st.compute.push(ComputeOp::Patch {
                            patch,
                            inputs: vec![qv, kv, vv],
                            outputs: part.clone(),
                        });
                        st.compute.push(ComputeOp::Combine {
                            kind: CombineKind::LseMerge,
                            acc: acc_views,
                            part,
                        });
                    }
                    _ => {
                        let patch = match patch {
                            PatchKind::Attention {
                                causal,
                                scale,
                                q_offset,
                                k_offset,
                                ..
                            } => PatchKind::Attention {
                                causal,
                                scale,
                                q_offset,
                                k_offset,
                                mask: Default::default(),
                                accumulate: self.started[bi],
                            },
                            other => other,
                        };
                        rb.stage(stage).compute.push(ComputeOp::Patch {
                            patch,
                            inputs: vec![qv, kv, vv],
                            outputs: acc_views,
                        });
                    }
                }
                self.started[bi] = true;
            }
        }
    }
}

/// Builds the plan of one attention schedule.
pub fn attention_plan(shape: &AttentionShape, s: &AttnSchedule) -> Result<Plan, String> {
    check_schedule(shape, s)?;
    let AttentionShape {
        batch: b,
        heads: hq,
        kv_heads: hk,
        seq,
        head_dim: d,
        causal,
    } = *shape;
    let n: usize = s.mesh.iter().product();
    let t = seq / n; // tokens per device
    let u_levels = s.levels_with(LevelRole::Ulysses);
    let r_levels = s.levels_with(LevelRole::Ring);
    let u_deg = s.ulysses_degree();
    let r_deg = s.ring_degree();
    let (hql, hkl) = (hq / u_deg, hk / u_deg);
    let lq = u_deg * t; // local sequence length after the all-to-all
    let index_over = |coords: &[usize], levels: &[usize]| -> usize {
        levels.iter().fold(0, |acc, &l| acc * s.mesh[l] + coords[l])
    };
    // (ulysses position, ring position) of each device, and the inverse map.
    let pos: Vec<(usize, usize)> = (0..n)
        .map(|dev| {
            let c = coords_of(&s.mesh, dev);
            (index_over(&c, &u_levels), index_over(&c, &r_levels))
        })
        .collect();
    let mut dev_of = vec![vec![0usize; r_deg]; u_deg];
    for (dev, &(u, p)) in pos.iter().enumerate() {
        dev_of[u][p] = dev;
    }
    // Token pieces of ring position p: the chunks of its Ulysses group, in u order.
    let pieces = |p: usize, local0: usize| -> Vec<Piece> {
        (0..u_deg)
            .map(|u| Piece {
                local: local0 + u * t,
                len: t,
                global: dev_of[u][p] * t,
            })
            .collect()
    };
    let k_ranges = |p: usize, local0: usize| -> Vec<Piece> {
        if causal {
            pieces(p, local0)
        } else {
            vec![Piece {
                local: local0,
                len: lq,
                global: 0,
            }]
        }
    };
    let buffers = attn_buffers(shape);
    let scale = 1.0 / (d as f64).sqrt();
    let two_level = s.ring == RingMode::TwoLevel;
    // Inner ring on the fastest ring level, outer ring over the rest; a degenerate split
    // (either side of size 1) is a flat ring.
    let inner_size = r_levels.last().map(|&l| s.mesh[l]).unwrap_or(1);
    let (r_in, r_out) = if two_level && inner_size > 1 && r_deg / inner_size > 1 {
        (inner_size, r_deg / inner_size)
    } else {
        (r_deg, 1)
    };
    let mut ranks: Vec<RankB> = Vec::with_capacity(n);
    for (dev, &(u, p)) in pos.iter().enumerate() {
        let mut rb = RankB::default();
        let tok = region_along(&[b, hq, seq, d], 2, dev * t, t);
        let tok_kv = region_along(&[b, hk, seq, d], 2, dev * t, t);
        let q_in = rb.slot(
            "q_in",
            DType::BF16,
            vec![b, hq, t, d],
            SlotInit::FromGlobal {
                buffer: 0,
                region: tok.clone(),
            },
        );
        let k_in = rb.slot(
            "k_in",
            DType::BF16,
            vec![b, hk, t, d],
            SlotInit::FromGlobal {
                buffer: 1,
                region: tok_kv.clone(),
            },
        );
        let v_in = rb.slot(
            "v_in",
            DType::BF16,
            vec![b, hk, t, d],
            SlotInit::FromGlobal {
                buffer: 2,
                region: tok_kv,
            },
        );
        let mut stage = 0;
        // Ulysses all-to-all in.
        let group: Vec<usize> = (0..u_deg).map(|uu| dev_of[uu][p]).collect();
        let (q, x0k, x0v) = if u_deg > 1 {
            let q = rb.slot("q", DType::BF16, vec![b, hql, lq, d], SlotInit::Uninit);
            let xk = rb.slot("kv0_k", DType::BF16, vec![b, hkl, lq, d], SlotInit::Uninit);
            let xv = rb.slot("kv0_v", DType::BF16, vec![b, hkl, lq, d], SlotInit::Uninit);
            for (src, dst) in [(q_in, q), (k_in, xk), (v_in, xv)] {
                let (src, dst) = (rb.full(src), rb.full(dst));
                rb.stage(stage).comm.push(CommOp::Collective {
                    group: group.clone(),
                    collective: Collective::AllToAll {
                        src,
                        dst,
                        split_axis: 1,
                        concat_axis: 2,
                    },
                });
            }
            stage += 1;
            (q, xk, xv)
        } else {
            (q_in, k_in, v_in)
        };
        let block_len = lq / s.q_blocks;
        let mut blocks = Vec::new();
        if causal {
            // Blocks never straddle two pieces (their global offsets differ).
            for piece in pieces(p, 0) {
                let per = s.q_blocks.min(piece.len).max(1);
                let len = piece.len / per;
                for i in 0..per {
                    blocks.push(Piece {
                        local: piece.local + i * len,
                        len: if i + 1 == per {
                            piece.len - i * len
                        } else {
                            len
                        },
                        global: piece.global + i * len,
                    });
                }
            }
        } else {
            for i in 0..s.q_blocks {
                blocks.push(Piece {
                    local: i * block_len,
                    len: block_len,
                    global: 0,
                });
            }
        }
        let part_len = blocks.iter().map(|bl| bl.len).max().unwrap_or(lq);
        let o = rb.slot("o_acc", DType::BF16, vec![b, hql, lq, d], SlotInit::Uninit);
        let lse = rb.slot("lse_acc", DType::F32, vec![b, hql, lq], SlotInit::Uninit);
        let part = if s.fused {
            None
        } else {
            let o_part = rb.slot(
                "o_part",
                DType::BF16,
                vec![b, hql, part_len, d],
                SlotInit::Uninit,
            );
            let lse_part = rb.slot(
                "lse_part",
                DType::F32,
                vec![b, hql, part_len],
                SlotInit::Uninit,
            );
            Some((o_part, lse_part))
        };
        let mut acc = Acc {
            q,
            o,
            lse,
            part,
            started: vec![false; blocks.len()],
            blocks,
            causal,
            scale,
        };
        match s.ring {
            RingMode::AllGather => {
                let ring_group: Vec<usize> = (0..r_deg).map(|pp| dev_of[u][pp]).collect();
                // Own chunk now, overlapped with the gather of everything.
                acc.attend(&mut rb, stage, x0k, x0v, &k_ranges(p, 0));
                if r_deg > 1 {
                    let kf = rb.slot(
                        "k_all",
                        DType::BF16,
                        vec![b, hkl, lq * r_deg, d],
                        SlotInit::Uninit,
                    );
                    let vf = rb.slot(
                        "v_all",
                        DType::BF16,
                        vec![b, hkl, lq * r_deg, d],
                        SlotInit::Uninit,
                    );
                    for (src, dst) in [(x0k, kf), (x0v, vf)] {
                        let (src, dst) = (rb.full(src), rb.full(dst));
                        rb.stage(stage).comm.push(CommOp::Collective {
                            group: ring_group.clone(),
                            collective: Collective::AllGather { src, dst, axis: 2 },
                        });
                    }
                    stage += 1;
                    let mut ranges = Vec::new();
                    for pp in (0..r_deg).filter(|&pp| pp != p) {
                        if causal {
                            ranges.extend(pieces(pp, pp * lq));
                        } else {
                            // Merge neighbouring positions into one call.
                            match ranges.last_mut() {
                                Some(Piece { local, len, .. }) if *local + *len == pp * lq => {
                                    *len += lq
                                }
                                _ => ranges.push(Piece {
                                    local: pp * lq,
                                    len: lq,
                                    global: 0,
                                }),
                            }
                        }
                    }
                    acc.attend(&mut rb, stage, kf, vf, &ranges);
                }
                stage += 1;
            }
            RingMode::Flat | RingMode::TwoLevel => {
                // KV buffers: outer double buffer X (X0 = the local chunk) and, for two
                // levels, an inner double buffer I.
                let mk = |rb: &mut RankB, name: &str| {
                    rb.slot(name, DType::BF16, vec![b, hkl, lq, d], SlotInit::Uninit)
                };
                let x1 = if r_deg > 1 {
                    Some((mk(&mut rb, "kv1_k"), mk(&mut rb, "kv1_v")))
                } else {
                    None
                };
                let xs = [(x0k, x0v), x1.unwrap_or((x0k, x0v))];
                let is = if r_out > 1 {
                    Some([
                        (mk(&mut rb, "kv_in0_k"), mk(&mut rb, "kv_in0_v")),
                        (mk(&mut rb, "kv_in1_k"), mk(&mut rb, "kv_in1_v")),
                    ])
                } else {
                    None
                };
                let (a, bb) = (p / r_in, p % r_in); // outer and inner ring coordinates
                let ring_dev = |aa: usize, bbb: usize| dev_of[u][aa * r_in + bbb];
                let mut tag = 0u64;
                for o_round in 0..r_out {
                    for step in 0..r_in {
                        // Position whose chunk this rank holds at (o_round, step).
                        let src_pos = ((a + r_out - o_round % r_out) % r_out) * r_in
                            + (bb + r_in - step % r_in) % r_in;
                        let cur = match &is {
                            None => xs[step % 2],
                            Some(_) if step == 0 => xs[o_round % 2],
                            Some(ib) => ib[step % 2],
                        };
                        acc.attend(&mut rb, stage, cur.0, cur.1, &k_ranges(src_pos, 0));
                        let last_inner = step + 1 == r_in;
                        let next_in = ring_dev(a, (bb + 1) % r_in);
                        let prev_in = ring_dev(a, (bb + r_in - 1) % r_in);
                        if !last_inner {
                            let dst = match &is {
                                Some(ib) => ib[(step + 1) % 2],
                                None => xs[(step + 1) % 2],
                            };
                            for (sv, dv) in [(cur.0, dst.0), (cur.1, dst.1)] {
                                let (sv, dv) = (rb.full(sv), rb.full(dv));
                                let st = rb.stage(stage);
                                st.comm.push(CommOp::Send {
                                    peer: next_in,
                                    src: sv,
                                    tag,
                                });
                                st.comm.push(CommOp::Recv {
                                    peer: prev_in,
                                    dst: dv,
                                    tag,
                                });
                                tag += 1;
                            }
                        }
                        if is.is_some() && o_round + 1 < r_out {
                            // Piece `step` of the outer buffer travels to the next outer
                            // position during this inner step.
                            let next_out = ring_dev((a + 1) % r_out, bb);
                            let prev_out = ring_dev((a + r_out - 1) % r_out, bb);
                            let (from, to) = (xs[o_round % 2], xs[(o_round + 1) % 2]);
                            let (start, len) = split_range(lq, r_in, step);
                            if len > 0 {
                                for (sv, dv) in [(from.0, to.0), (from.1, to.1)] {
                                    let sv = rb.along(sv, 2, start, len);
                                    let dv = rb.along(dv, 2, start, len);
                                    let st = rb.stage(stage);
                                    st.comm.push(CommOp::Send {
                                        peer: next_out,
                                        src: sv,
                                        tag,
                                    });
                                    st.comm.push(CommOp::Recv {
                                        peer: prev_out,
                                        dst: dv,
                                        tag,
                                    });
                                    tag += 1;
                                }
                            }
                        }
                        stage += 1;
                    }
                }
            }
        }
        // Ulysses all-to-all out (the output reuses q_in's slot), or the accumulator itself.
        if u_deg > 1 {
            let (src, dst) = (rb.full(o), rb.full(q_in));
            rb.stage(stage).comm.push(CommOp::Collective {
                group: group.clone(),
                collective: Collective::AllToAll {
                    src,
                    dst,
                    split_axis: 2,
                    concat_axis: 1,
                },
            });
            rb.slots[q_in].name = "q_in/o_out".into();
            rb.outputs.push(OutputPiece {
                buffer: 3,
                region: tok,
                src: rb.full(q_in),
            });
        } else {
            rb.outputs.push(OutputPiece {
                buffer: 3,
                region: tok,
                src: rb.full(o),
            });
        }
        ranks.push(rb);
    }
    Ok(finish(s.name(), s.mesh.clone(), buffers, ranks))
}

/// `[start, start + len)` of part `i` when `total` is split into `parts` near-equal ranges.
fn split_range(total: usize, parts: usize, i: usize) -> (usize, usize) {
    let start = total * i / parts;
    let end = total * (i + 1) / parts;
    (start, end - start)
}

/// Ordered factorisations of `n` into factors >= 2 (e.g. 8: `[8]`, `[2, 4]`, `[4, 2]`, `[2, 2, 2]`).
pub fn factorisations(n: usize) -> Vec<Vec<usize>> {
    fn go(n: usize, prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if n == 1 {
            if !prefix.is_empty() {
                out.push(prefix.clone());
            }
            return;
        }
        for f in 2..=n {
            if n.is_multiple_of(f) {
                prefix.push(f);
                go(n / f, prefix, out);
                prefix.pop();
            }
        }
    }
    let mut out = Vec::new();
    if n == 1 {
        return vec![vec![1]];
    }
    go(n, &mut Vec::new(), &mut out);
    out.sort_by_key(|f| (f.len(), f.clone()));
    out
}

/// Every distinct schedule of the family for `n` devices (deduplicated by name). With
/// `variants`, each also comes as `+lean4` (partial buffer a quarter of the query shard, four
/// times the kernels) and `+fused` (tiles accumulate in place: no partial buffer, no merge).
pub fn attention_schedules(shape: &AttentionShape, n: usize, variants: bool) -> Vec<AttnSchedule> {
    let mut out: Vec<AttnSchedule> = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    for mesh in factorisations(n) {
        let levels = mesh.len();
        for mask in 0..(1u32 << levels) {
            let roles: Vec<LevelRole> = (0..levels)
                .map(|i| {
                    if mask & (1 << i) != 0 {
                        LevelRole::Ulysses
                    } else {
                        LevelRole::Ring
                    }
                })
                .collect();
            let ring_levels = roles.iter().filter(|r| **r == LevelRole::Ring).count();
            for ring in [RingMode::Flat, RingMode::TwoLevel, RingMode::AllGather] {
                if ring == RingMode::TwoLevel && ring_levels < 2 {
                    continue;
                }
                if ring_levels == 0 && ring != RingMode::Flat {
                    continue;
                }
                let sched = AttnSchedule {
                    mesh: mesh.clone(),
                    roles: roles.clone(),
                    ring,
                    q_blocks: 1,
                    fused: false,
                };
                if !canonical(&sched) {
                    continue;
                }
                let variants: &[(usize, bool)] = if variants {
                    &[(1, false), (4, false), (1, true)]
                } else {
                    &[(1, false)]
                };
                for &(q_blocks, fused) in variants {
                    let sc = AttnSchedule {
                        q_blocks,
                        fused,
                        ..sched.clone()
                    };
                    if check_schedule(shape, &sc).is_ok() && names.insert(sc.name()) {
                        out.push(sc);
                    }
                }
            }
        }
    }
    out
}

/// Adjacent levels with the same role give the same plan as their merged level, so only
/// meshes without such pairs are generated; a two-level ring needs exactly two ring levels
/// (they stay separate) and no adjacent Ulysses levels.
fn canonical(s: &AttnSchedule) -> bool {
    match s.ring {
        RingMode::TwoLevel => {
            s.levels_with(LevelRole::Ring).len() == 2
                && s.roles
                    .windows(2)
                    .all(|w| !(w[0] == LevelRole::Ulysses && w[1] == LevelRole::Ulysses))
        }
        _ => s.roles.windows(2).all(|w| w[0] != w[1]),
    }
}
