//! Carried sums (`commir.reduce add ... carry`, the `carry` schedule primitive): the
//! accumulator of a shifted sum travels from rank to rank with the pieces of the shifted loop
//! and reaches the tile's owner after the last step (ring-flash-attn's dK/dV), instead of each
//! step's partial going to the owner (shift-reduce, `reduce.rs`).
//!
//! For one tile, the ranks that reduce into it at consecutive stages form a chain. The first
//! keeps its partial as the accumulator; each next one receives the accumulator during its
//! stage (while it computes its own partial) and adds its partial to it after the stage's
//! transfers, in a stage of adds inserted after the ring step (the plan's stages are bulk
//! synchronous: a send reads what earlier stages wrote, so the add must finish before the next
//! step sends the sum on). ring-flash-attn has the same order: wait for the accumulator, add,
//! send it on during the next step. The last rank of the chain hands the sum to the owner:
//! it is the owner's accumulator when the last rank is the owner (`shift{offset=1}` puts the
//! owner's own piece last), else it is sent home in the next stage and added there. A fully
//! masked block adds nothing: the accumulator is passed on as it is (or, with nothing summed
//! yet, the next rank starts it). Chains must advance one stage per step, one rank per stage
//! (a ring); anything else is refused.

use crate::compute::StageCx;
use crate::context::{err, key, Event, Lowering};
use crate::reduce::{ensure_acc, ensure_masked_acc};
use mercury_ir::{Diagnostic, Location};
use mercury_plan::{CombineKind, ComputeOp, DType, Region, SlotInit, View};
use std::collections::BTreeMap;

impl Lowering<'_> {
    /// Collects the chain of every carried tile from the traces (plan stage = `base` + trace
    /// stage) and checks that each is a ring: one rank per stage, consecutive stages.
    pub(crate) fn carry_chains(&mut self, base: usize) -> Result<(), Diagnostic> {
        let mut chains: BTreeMap<(String, Vec<usize>), Vec<(usize, usize, Location)>> =
            BTreeMap::new();
        for (r, t) in self.traces.iter().enumerate() {
            for (s, e) in t {
                if let Event::Reduce {
                    buffer,
                    bx,
                    carry: true,
                    shifted,
                    loc,
                    ..
                } = e
                {
                    if !shifted {
                        return Err(err(
                            loc,
                            format!("this reduction into '@{buffer}' carries its accumulator, but its tile {bx} is not shifted: only a shifted sum has an accumulator that moves"),
                        ));
                    }
                    chains.entry((buffer.clone(), key(bx))).or_default().push((
                        base + s,
                        r,
                        loc.clone(),
                    ));
                }
            }
        }
        for ((buffer, _), c) in chains.iter_mut() {
            c.sort_by_key(|(s, r, _)| (*s, *r));
            for w in c.windows(2) {
                let ((s0, r0, _), (s1, r1, loc)) = (&w[0], &w[1]);
                if *s1 != s0 + 1 {
                    let why = if s1 == s0 {
                        format!("ranks {r0} and {r1} both add to it at stage {s0} (a replicated partial, or two pieces per step)")
                    } else {
                        format!("rank {r0} adds to it at stage {s0}, the next (rank {r1}) at stage {s1}")
                    };
                    return Err(err(
                        loc,
                        format!("carry: the accumulator of a tile of '@{buffer}' must move one rank per step around a ring, but {why}; use shift-reduce (no carry)"),
                    ));
                }
            }
        }
        self.carry_chains = chains
            .into_iter()
            .map(|(k, c)| (k, c.into_iter().map(|(s, r, _)| (s, r)).collect()))
            .collect();
        Ok(())
    }

    /// Lowers one carried reduction of `cx`'s rank and stage: `parts` its partial (`None`:
    /// fully masked), `owner` the tile's owner (see the module docs).
    pub(crate) fn lower_carried(
        &mut self,
        cx: &StageCx,
        parts: Option<Vec<View>>,
        buffer: &str,
        bx: &Region,
        owner: usize,
    ) -> Result<(), Diagnostic> {
        let (r, ps) = (cx.r, cx.ps);
        let tk = (buffer.to_string(), key(bx));
        let chain = self.carry_chains.get(&tk).cloned().unwrap_or_default();
        let at = chain.iter().position(|&(s, q)| s == ps && q == r);
        let last = at.is_none_or(|i| i + 1 == chain.len());
        let home = last && r == owner;
        let part = match parts {
            Some(p) => match p.as_slice() {
                [one] => Some(one.clone()),
                _ => None,
            },
            None => None,
        };
        // The accumulator from the previous rank, received during this stage.
        let incoming = match self.carry_at.remove(&tk) {
            Some((q, Some(src))) => {
                let shape = bx.extent.clone();
                let slot = if home && !self.ranks[r].acc.contains_key(&tk) {
                    // The owner's last step: the received sum is the output's accumulator.
                    let s = self.ranks[r].slot(
                        format!("{buffer}.carry_home"),
                        DType::F32,
                        shape,
                        SlotInit::Uninit,
                    );
                    self.ranks[r].acc.insert(
                        tk.clone(),
                        (bx.clone(), vec![s], mercury_commir::ReduceKind::Add),
                    );
                    s
                } else {
                    let parity = ps % 2;
                    let rb = &mut self.ranks[r];
                    let c = rb.carry_count.entry((ps, buffer.to_string())).or_insert(0);
                    let k = *c;
                    *c += 1;
                    let sk = (buffer.to_string(), parity, k, shape.clone());
                    match rb.carry_slots.get(&sk) {
                        Some(s) => *s,
                        None => {
                            let s = rb.slot(
                                format!("{buffer}.carry{parity}_{k}"),
                                DType::F32,
                                shape,
                                SlotInit::Uninit,
                            );
                            rb.carry_slots.insert(sk, s);
                            s
                        }
                    }
                };
                let dst = self.ranks[r].whole(slot);
                self.send_recv(ps, q, r, src, dst.clone());
                Some(dst)
            }
            _ => None,
        };
        // This rank's sum: the received one plus its partial (added after the transfers), or
        // its partial alone.
        let acc = match (incoming, part) {
            (Some(a), Some(p)) => {
                self.post_add(r, ps, vec![a.clone()], p);
                Some(a)
            }
            (Some(a), None) => Some(a),
            (None, Some(p)) => Some(
                self.stable_parts(cx, vec![p], buffer, (ps + 1) % 2)
                    .remove(0),
            ),
            (None, None) => None,
        };
        if !last {
            self.carry_at.insert(tk, (r, acc));
            return Ok(());
        }
        // The end of the chain: the sum goes to the owner.
        match acc {
            None => ensure_masked_acc(
                &mut self.ranks[owner],
                buffer,
                bx,
                mercury_commir::ReduceKind::Add,
            ),
            Some(a)
                if self.ranks[r]
                    .acc
                    .get(&tk)
                    .is_some_and(|(_, s, _)| s == &vec![a.slot]) => {}
            Some(a) if r == owner => {
                let o = ensure_acc(
                    &mut self.ranks[r],
                    buffer,
                    bx,
                    mercury_commir::ReduceKind::Add,
                );
                self.post_add(r, ps, o, a);
            }
            Some(a) => self.send_to_owner(
                cx,
                owner,
                vec![a],
                buffer,
                bx,
                mercury_commir::ReduceKind::Add,
            ),
        }
        Ok(())
    }

    /// `acc += part` on rank `r` after stage `ps`'s transfers.
    fn post_add(&mut self, r: usize, ps: usize, acc: Vec<View>, part: View) {
        self.ranks[r]
            .post
            .entry(ps)
            .or_default()
            .push(ComputeOp::Combine {
                kind: CombineKind::Add,
                acc,
                part: vec![part],
            });
    }

    /// Inserts after every stage with post-transfer ops (`RankBuild::post`) a stage holding
    /// them, on every rank (the stages after it move one later).
    pub(crate) fn insert_post_stages(&mut self) {
        let mut at: Vec<usize> = self
            .ranks
            .iter()
            .flat_map(|rb| rb.post.keys().copied())
            .collect();
        at.sort_unstable();
        at.dedup();
        if at.is_empty() {
            return;
        }
        let shift = |s: usize| s + at.iter().filter(|p| **p < s).count();
        for rb in &mut self.ranks {
            let old = std::mem::take(&mut rb.stages);
            rb.stages = old.into_iter().map(|(s, st)| (shift(s), st)).collect();
            for (s, ops) in std::mem::take(&mut rb.post) {
                rb.stage(shift(s) + 1).compute.extend(ops);
            }
        }
    }
}
