//! Pure host logic: a verified plan turned into per-stage work. Point-to-point `Send`/`Recv`
//! pairs are matched by (stage, sender, receiver, tag) into one message each; the per-rank
//! copies of a collective are matched by (stage, group, occurrence) into one instance with
//! every member's operands. No CUDA here; unit-tested on CPU.

use mercury_plan::{Collective, CombineKind, CommOp, Plan, View};
use std::collections::BTreeMap;

/// One matched point-to-point message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub src_rank: usize,
    pub src: View,
    pub dst_rank: usize,
    pub dst: View,
    pub tag: u64,
}

/// One collective, with each member's operands in group order.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveCall {
    /// Ranks of the group; `members[p]` is the operation as rank `group[p]` wrote it.
    pub group: Vec<usize>,
    pub members: Vec<Collective>,
}

impl CollectiveCall {
    /// The rank whose transfer stream performs the collective in virtual mode.
    pub fn leader(&self) -> usize {
        self.group[0]
    }
}

/// The transfers of one stage.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageTransfers {
    pub messages: Vec<Message>,
    pub collectives: Vec<CollectiveCall>,
}

/// Transfers of every stage (index = stage).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Schedule {
    pub stages: Vec<StageTransfers>,
}

impl Schedule {
    /// Number of stages.
    pub fn len(&self) -> usize {
        self.stages.len()
    }
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }
}

fn same_collective_kind(a: &Collective, b: &Collective) -> Result<(), String> {
    use Collective::*;
    let ok = match (a, b) {
        (AllGather { axis: x, .. }, AllGather { axis: y, .. }) => x == y,
        (AllReduce { kind: x, bufs: bx }, AllReduce { kind: y, bufs: by }) => {
            x == y && bx.len() == by.len()
        }
        (
            ReduceScatter {
                axis: x, kind: kx, ..
            },
            ReduceScatter {
                axis: y, kind: ky, ..
            },
        ) => x == y && kx == ky,
        (
            AllToAll {
                split_axis: s1,
                concat_axis: c1,
                ..
            },
            AllToAll {
                split_axis: s2,
                concat_axis: c2,
                ..
            },
        ) => s1 == s2 && c1 == c2,
        (Broadcast { root: x, .. }, Broadcast { root: y, .. }) => x == y,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("members disagree: {a:?} vs {b:?}"))
    }
}

/// Matches the transfers of `plan` (which should already pass `mercury_plan::verify`).
pub fn build(plan: &Plan) -> Result<Schedule, String> {
    let stages = plan.num_stages();
    let mut out = Schedule {
        stages: vec![StageTransfers::default(); stages],
    };
    for (si, st) in out.stages.iter_mut().enumerate() {
        // (from, to, tag) -> view
        let mut sends: BTreeMap<(usize, usize, u64), View> = BTreeMap::new();
        let mut recvs: BTreeMap<(usize, usize, u64), View> = BTreeMap::new();
        // (group, occurrence) -> members
        let mut colls: BTreeMap<(Vec<usize>, usize), Vec<Option<Collective>>> = BTreeMap::new();
        let mut coll_order: Vec<(Vec<usize>, usize)> = Vec::new();
        for r in &plan.ranks {
            let Some(stage) = r.stages.get(si) else {
                continue;
            };
            let mut seen: BTreeMap<Vec<usize>, usize> = BTreeMap::new();
            for op in &stage.comm {
                match op {
                    CommOp::Send { peer, src, tag } => {
                        if sends.insert((r.rank, *peer, *tag), src.clone()).is_some() {
                            return Err(format!(
                                "stage {si}: rank {} sends twice to {peer} with tag {tag}",
                                r.rank
                            ));
                        }
                    }
                    CommOp::Recv { peer, dst, tag } => {
                        if recvs.insert((*peer, r.rank, *tag), dst.clone()).is_some() {
                            return Err(format!(
                                "stage {si}: rank {} receives twice from {peer} with tag {tag}",
                                r.rank
                            ));
                        }
                    }
                    CommOp::Collective { group, collective } => {
                        let pos = group.iter().position(|g| *g == r.rank).ok_or_else(|| {
                            format!("stage {si}: rank {} not in its group {group:?}", r.rank)
                        })?;
                        if group.iter().any(|g| *g >= plan.ranks.len()) {
                            return Err(format!("stage {si}: group {group:?} names no rank"));
                        }
                        let occ = seen.entry(group.clone()).or_insert(0);
                        let key = (group.clone(), *occ);
                        *occ += 1;
                        let slot = colls.entry(key.clone()).or_insert_with(|| {
                            coll_order.push(key.clone());
                            vec![None; group.len()]
                        });
                        if slot[pos].is_some() {
                            return Err(format!(
                                "stage {si}: rank {} appears twice in group {group:?}",
                                r.rank
                            ));
                        }
                        slot[pos] = Some(collective.clone());
                    }
                }
            }
        }
        for ((from, to, tag), src) in sends {
            let dst = recvs.remove(&(from, to, tag)).ok_or_else(|| {
                format!("stage {si}: send {from} -> {to} tag {tag} has no receive")
            })?;
            st.messages.push(Message {
                src_rank: from,
                src,
                dst_rank: to,
                dst,
                tag,
            });
        }
        if let Some(((from, to, tag), _)) = recvs.into_iter().next() {
            return Err(format!(
                "stage {si}: receive {from} -> {to} tag {tag} has no send"
            ));
        }
        for key in coll_order {
            let members = colls.remove(&key).unwrap_or_default();
            let group = key.0;
            let mut ops = Vec::with_capacity(members.len());
            for (p, m) in members.into_iter().enumerate() {
                ops.push(m.ok_or_else(|| {
                    format!(
                        "stage {si}: rank {} of group {group:?} lacks collective #{}",
                        group[p], key.1
                    )
                })?);
            }
            for m in &ops[1..] {
                same_collective_kind(&ops[0], m).map_err(|e| format!("stage {si}: {e}"))?;
            }
            if let Collective::Broadcast { root, .. } = &ops[0] {
                if *root >= group.len() {
                    return Err(format!(
                        "stage {si}: broadcast root {root} outside group {group:?} (root is a position in the group)"
                    ));
                }
            }
            if let Collective::ReduceScatter {
                kind: CombineKind::LseMerge,
                ..
            } = &ops[0]
            {
                return Err(format!(
                    "stage {si}: reduce-scatter with lse merge needs [o, lse] pairs; not expressible"
                ));
            }
            st.collectives.push(CollectiveCall {
                group,
                members: ops,
            });
        }
    }
    Ok(out)
}

/// Region `chunk` of `parts` equal chunks of `region` along `axis`.
pub fn chunk_region(
    region: &mercury_plan::Region,
    axis: usize,
    parts: usize,
    chunk: usize,
) -> Result<mercury_plan::Region, String> {
    if axis >= region.rank() || parts == 0 || chunk >= parts {
        return Err(format!(
            "chunk {chunk} of {parts} along axis {axis} of {region}"
        ));
    }
    if !region.extent[axis].is_multiple_of(parts) {
        return Err(format!(
            "extent {} of axis {axis} does not split into {parts} chunks",
            region.extent[axis]
        ));
    }
    let step = region.extent[axis] / parts;
    let mut out = region.clone();
    out.offset[axis] += chunk * step;
    out.extent[axis] = step;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mercury_plan::{DType, RankProgram, Region, Slot, SlotInit, Stage};

    fn view(slot: usize, off: usize, ext: usize) -> View {
        View {
            slot,
            region: Region {
                offset: vec![off],
                extent: vec![ext],
            },
        }
    }

    fn rank(r: usize, stages: Vec<Stage>) -> RankProgram {
        RankProgram {
            rank: r,
            coords: vec![r],
            slots: vec![Slot {
                name: "x".into(),
                dtype: DType::F32,
                shape: vec![16],
                init: SlotInit::Zero,
            }],
            stages,
            outputs: vec![],
        }
    }

    fn plan(ranks: Vec<RankProgram>) -> Plan {
        Plan {
            name: "t".into(),
            mesh: vec![ranks.len()],
            buffers: vec![],
            ranks,
        }
    }

    #[test]
    fn ring_messages_match() {
        let n = 4;
        let ranks = (0..n)
            .map(|r| {
                rank(
                    r,
                    vec![Stage {
                        compute: vec![],
                        comm: vec![
                            CommOp::Send {
                                peer: (r + 1) % n,
                                src: view(0, 0, 8),
                                tag: 7,
                            },
                            CommOp::Recv {
                                peer: (r + n - 1) % n,
                                dst: view(0, 8, 8),
                                tag: 7,
                            },
                        ],
                    }],
                )
            })
            .collect();
        let p = plan(ranks);
        mercury_plan::verify(&p).unwrap();
        let s = build(&p).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s.stages[0].messages.len(), n);
        for m in &s.stages[0].messages {
            assert_eq!(m.dst_rank, (m.src_rank + 1) % n);
            assert_eq!(m.src.region.offset, vec![0]);
            assert_eq!(m.dst.region.offset, vec![8]);
        }
    }

    #[test]
    fn unmatched_send_is_an_error() {
        let ranks = vec![
            rank(
                0,
                vec![Stage {
                    compute: vec![],
                    comm: vec![CommOp::Send {
                        peer: 1,
                        src: view(0, 0, 4),
                        tag: 1,
                    }],
                }],
            ),
            rank(1, vec![Stage::default()]),
        ];
        assert!(build(&plan(ranks)).unwrap_err().contains("no receive"));
    }

    #[test]
    fn collectives_grouped_by_occurrence() {
        let ar = |off| CommOp::Collective {
            group: vec![0, 1],
            collective: Collective::AllReduce {
                bufs: vec![view(0, off, 4)],
                kind: CombineKind::Add,
            },
        };
        let ranks = (0..2)
            .map(|r| {
                rank(
                    r,
                    vec![Stage {
                        compute: vec![],
                        comm: vec![ar(0), ar(4)],
                    }],
                )
            })
            .collect();
        let s = build(&plan(ranks)).unwrap();
        let c = &s.stages[0].collectives;
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].leader(), 0);
        match (&c[1].members[0], &c[1].members[1]) {
            (Collective::AllReduce { bufs: a, .. }, Collective::AllReduce { bufs: b, .. }) => {
                assert_eq!(a[0].region.offset, vec![4]);
                assert_eq!(b[0].region.offset, vec![4]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mismatched_collectives_rejected() {
        let ranks = vec![
            rank(
                0,
                vec![Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: vec![0, 1],
                        collective: Collective::Broadcast {
                            buf: view(0, 0, 4),
                            root: 0,
                        },
                    }],
                }],
            ),
            rank(
                1,
                vec![Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: vec![0, 1],
                        collective: Collective::Broadcast {
                            buf: view(0, 0, 4),
                            root: 1,
                        },
                    }],
                }],
            ),
        ];
        assert!(build(&plan(ranks)).unwrap_err().contains("disagree"));
        let missing = vec![
            rank(
                0,
                vec![Stage {
                    compute: vec![],
                    comm: vec![CommOp::Collective {
                        group: vec![0, 1],
                        collective: Collective::Broadcast {
                            buf: view(0, 0, 4),
                            root: 0,
                        },
                    }],
                }],
            ),
            rank(1, vec![]),
        ];
        assert!(build(&plan(missing)).unwrap_err().contains("lacks"));
    }

    #[test]
    fn chunks() {
        let r = Region {
            offset: vec![0, 8],
            extent: vec![4, 16],
        };
        let c = chunk_region(&r, 1, 4, 2).unwrap();
        assert_eq!(c.offset, vec![0, 16]);
        assert_eq!(c.extent, vec![4, 4]);
        assert!(chunk_region(&r, 0, 3, 0).is_err());
        assert!(chunk_region(&r, 2, 2, 0).is_err());
    }
}
