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
        (
            Reduce {
                root: x, kind: kx, ..
            },
            Reduce {
                root: y, kind: ky, ..
            },
        ) => x == y && kx == ky,
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
            if let Collective::Reduce { root, kind, .. } = &ops[0] {
                if *root >= group.len() {
                    return Err(format!(
                        "stage {si}: reduce root {root} outside group {group:?} (root is a position in the group)"
                    ));
                }
                if *kind == CombineKind::LseMerge {
                    return Err(format!(
                        "stage {si}: reduce with lse merge needs [o, lse] pairs; not expressible"
                    ));
                }
                // The root, and only the root, names a destination.
                if let Some(p) = ops.iter().enumerate().position(|(p, m)| {
                    matches!(m, Collective::Reduce { dst, .. } if dst.is_some() != (p == *root))
                }) {
                    return Err(format!(
                        "stage {si}: reduce over {group:?} into member {root}: member {p} (rank {}) {} a destination",
                        group[p],
                        if p == *root { "lacks" } else { "names" }
                    ));
                }
            }
            st.collectives.push(CollectiveCall {
                group,
                members: ops,
            });
        }
    }
    Ok(out)
}

/// How the executor orders one stage after the previous ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StageSync {
    /// A barrier over all ranks after every stage: each rank stream records an event, a hub
    /// stream waits on all of them, every rank stream waits on the hub (no host wait).
    Barrier,
    /// Point-to-point event dependencies (see [`peer_waits`]): a stream waits only for the
    /// streams that earlier touched the ranks it touches now, so one rank's next stage can
    /// start while unrelated ranks finish theirs (no drain of the GPU between stages).
    #[default]
    Peers,
}

/// Stream ids of the per-stage dependency logic: rank `r`'s compute stream is `r`, its
/// transfer stream `ranks + r`.
pub fn compute_stream(r: usize) -> usize {
    r
}

/// See [`compute_stream`].
pub fn transfer_stream(ranks: usize, r: usize) -> usize {
    ranks + r
}

/// The streams that do work in each stage and the ranks whose memory each touches: a rank's
/// compute ops touch that rank; a message touches its sender and receiver and runs on the
/// transfer stream of `message_rank(msg)`; a collective touches every member and runs on the
/// transfer stream of `collective_rank(call)`.
pub fn stage_touches(
    sched: &Schedule,
    ranks: usize,
    has_compute: impl Fn(usize, usize) -> bool,
    message_rank: impl Fn(&Message) -> usize,
    collective_rank: impl Fn(&CollectiveCall) -> usize,
) -> Vec<BTreeMap<usize, Vec<usize>>> {
    stage_touches_work(
        sched,
        ranks,
        has_compute,
        |m| vec![(message_rank(m), vec![m.src_rank, m.dst_rank])],
        |c| vec![(collective_rank(c), c.group.clone())],
    )
}

/// The general form of [`stage_touches`]: a transfer may run on several transfer streams.
/// `message_work(msg)` and `collective_work(call)` list, for each rank whose transfer stream
/// gets work, the ranks whose memory that work touches (NCCL: the sender's stream touches the
/// sender, the receiver's the receiver; peer copies across devices: each member pulls into
/// its own memory from the others).
pub fn stage_touches_work(
    sched: &Schedule,
    ranks: usize,
    has_compute: impl Fn(usize, usize) -> bool,
    message_work: impl Fn(&Message) -> Vec<(usize, Vec<usize>)>,
    collective_work: impl Fn(&CollectiveCall) -> Vec<(usize, Vec<usize>)>,
) -> Vec<BTreeMap<usize, Vec<usize>>> {
    let mut out = Vec::with_capacity(sched.len());
    for (si, st) in sched.stages.iter().enumerate() {
        let mut m: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for r in 0..ranks {
            if has_compute(si, r) {
                m.entry(compute_stream(r)).or_default().push(r);
            }
        }
        for msg in &st.messages {
            for (y, touched) in message_work(msg) {
                m.entry(transfer_stream(ranks, y))
                    .or_default()
                    .extend(touched);
            }
        }
        for c in &st.collectives {
            for (y, touched) in collective_work(c) {
                m.entry(transfer_stream(ranks, y))
                    .or_default()
                    .extend(touched);
            }
        }
        for v in m.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        out.push(m);
    }
    out
}

/// Point-to-point ordering of stages (all streams start after one common barrier). Before a
/// stage, every stream with work waits on the last recorded event of every *other* stream
/// that touched, in an earlier stage, a rank this stream touches now; after the stage, every
/// stream with work records its event. Streams run in order and a wait sees the event's most
/// recent record, so each operation starts after every earlier-stage operation on the memory
/// of the ranks it touches (operations of one stage run concurrently, as under the barrier).
///
/// Returns, per stage, the `(waiting stream, awaited stream)` pairs and the streams that
/// record after the stage.
pub fn peer_waits(touches: &[BTreeMap<usize, Vec<usize>>], ranks: usize) -> Vec<StageWaits> {
    let mut touched: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); ranks];
    let mut out = Vec::with_capacity(touches.len());
    for st in touches {
        let mut waits = Vec::new();
        for (&y, rs) in st {
            let mut from: std::collections::BTreeSet<usize> = Default::default();
            for &r in rs {
                from.extend(touched[r].iter().copied().filter(|x| *x != y));
            }
            waits.extend(from.into_iter().map(|x| (y, x)));
        }
        for (&y, rs) in st {
            for &r in rs {
                touched[r].insert(y);
            }
        }
        out.push(StageWaits {
            waits,
            record: st.keys().copied().collect(),
        });
    }
    out
}

/// The ranks that `ranks` exchange data with in stage `st` (the other ends of their messages
/// and the other members of their collectives), sorted, without `ranks` themselves: the
/// "peers in this group" of a fault report.
pub fn stage_partners(st: &StageTransfers, ranks: &[usize]) -> Vec<usize> {
    let mut out = std::collections::BTreeSet::new();
    for m in &st.messages {
        if ranks.contains(&m.src_rank) {
            out.insert(m.dst_rank);
        }
        if ranks.contains(&m.dst_rank) {
            out.insert(m.src_rank);
        }
    }
    for c in &st.collectives {
        if c.group.iter().any(|r| ranks.contains(r)) {
            out.extend(c.group.iter().copied());
        }
    }
    out.into_iter().filter(|r| !ranks.contains(r)).collect()
}

/// The dependencies of one stage under [`StageSync::Peers`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StageWaits {
    /// `(waiting stream, awaited stream)`: enqueue a wait on the awaited stream's event.
    pub waits: Vec<(usize, usize)>,
    /// Streams that record their event after the stage's work.
    pub record: Vec<usize>,
}

/// Region `chunk` of `parts` equal chunks of `region` along `axis` (the plan's collective
/// geometry, [`mercury_plan::Region::chunk`]).
pub fn chunk_region(
    region: &mercury_plan::Region,
    axis: usize,
    parts: usize,
    chunk: usize,
) -> Result<mercury_plan::Region, String> {
    region.chunk(axis, parts, chunk)
}

/// View `chunk` of `parts` equal chunks of `view` along `axis`, in the same slot.
///
/// # Errors
/// [`super::error::RuntimeError::Schedule`] when the parts do not divide the region.
pub fn chunk_view(
    view: &View,
    axis: usize,
    parts: usize,
    chunk: usize,
) -> Result<View, super::error::RuntimeError> {
    Ok(View {
        slot: view.slot,
        region: chunk_region(&view.region, axis, parts, chunk)
            .map_err(super::error::RuntimeError::Schedule)?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mercury_plan::{DType, RankProgram, Region, Slot, SlotInit, Stage};

    /// A 1-D view `[off, off + ext)` of `slot` (the transports' tests use it too).
    pub(crate) fn view(slot: usize, off: usize, ext: usize) -> View {
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

    /// The ranks as a plan (a plan delivers an output, the verifier refuses one without: each
    /// rank delivers one element of an input, through a slot of its own after theirs).
    fn plan(mut ranks: Vec<RankProgram>) -> Plan {
        let n = ranks.len();
        let at = |r: usize| Region {
            offset: vec![r],
            extent: vec![1],
        };
        for (r, p) in ranks.iter_mut().enumerate() {
            p.slots.push(Slot {
                name: "out".into(),
                dtype: DType::F32,
                shape: vec![1],
                init: SlotInit::FromGlobal {
                    buffer: 1,
                    region: at(r),
                },
            });
            p.outputs.push(mercury_plan::OutputPiece {
                buffer: 0,
                region: at(r),
                src: View {
                    slot: p.slots.len() - 1,
                    region: Region::full(&[1]),
                },
            });
        }
        let buffer = |name: &str, role| mercury_plan::GlobalBuffer {
            name: name.into(),
            shape: vec![n],
            dtype: DType::F32,
            role,
        };
        Plan {
            name: "t".into(),
            mesh: vec![n],
            buffers: vec![
                buffer("O", mercury_plan::Role::Output),
                buffer("I", mercury_plan::Role::Input),
            ],
            documents: vec![],
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
    fn partners_of_messages_and_collectives() {
        let msg = |a: usize, b: usize| Message {
            src_rank: a,
            src: view(0, 0, 4),
            dst_rank: b,
            dst: view(0, 4, 4),
            tag: 0,
        };
        let st = StageTransfers {
            messages: vec![msg(0, 1), msg(1, 2), msg(3, 0)],
            collectives: vec![CollectiveCall {
                group: vec![4, 5, 6],
                members: vec![],
            }],
        };
        assert_eq!(stage_partners(&st, &[0]), vec![1, 3]);
        assert_eq!(stage_partners(&st, &[1]), vec![0, 2]);
        assert_eq!(stage_partners(&st, &[0, 1]), vec![2, 3]);
        assert_eq!(stage_partners(&st, &[5]), vec![4, 6]);
        assert_eq!(stage_partners(&st, &[7]), Vec::<usize>::new());
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

    /// Three ranks over the group [2, 0, 1] reduce `[0, 4)` of slot 'x' to member `root`,
    /// which names `[8, 12)` as its destination; `dst_on` says which members name one.
    fn reduce_plan(roots: [usize; 3], dst_on: [bool; 3]) -> Plan {
        let group = vec![2, 0, 1];
        let ranks = (0..3)
            .map(|r| {
                let p = group.iter().position(|g| *g == r).unwrap();
                rank(
                    r,
                    vec![Stage {
                        compute: vec![],
                        comm: vec![CommOp::Collective {
                            group: group.clone(),
                            collective: Collective::Reduce {
                                src: view(0, 0, 4),
                                dst: dst_on[p].then(|| view(0, 8, 4)),
                                root: roots[p],
                                kind: CombineKind::Add,
                            },
                        }],
                    }],
                )
            })
            .collect();
        plan(ranks)
    }

    /// A reduce is one call with every member's operands in group order; members that
    /// disagree on the root, a root outside the group, or a destination named by a member
    /// other than the root are refused.
    #[test]
    fn reduces_match_and_check_their_root() {
        let ok = reduce_plan([1, 1, 1], [false, true, false]);
        mercury_plan::verify(&ok).unwrap();
        let s = build(&ok).unwrap();
        let c = &s.stages[0].collectives;
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].group, vec![2, 0, 1]);
        assert!(matches!(
            &c[0].members[1],
            Collective::Reduce {
                dst: Some(_),
                root: 1,
                ..
            }
        ));
        let e = build(&reduce_plan([1, 2, 1], [false, true, false])).unwrap_err();
        assert!(e.contains("disagree"), "{e}");
        let e = build(&reduce_plan([3, 3, 3], [false, true, false])).unwrap_err();
        assert!(e.contains("reduce root 3 outside group"), "{e}");
        let e = build(&reduce_plan([1, 1, 1], [true, true, false])).unwrap_err();
        assert!(e.contains("member 0 (rank 2) names a destination"), "{e}");
        let e = build(&reduce_plan([1, 1, 1], [false, false, false])).unwrap_err();
        assert!(e.contains("member 1 (rank 0) lacks a destination"), "{e}");
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

    /// Happens-before closure over (stream, stage) nodes: stream order plus the waits.
    /// Every pair of operations on different streams that touch the same rank in different
    /// stages must be ordered.
    fn assert_ordered(touches: &[BTreeMap<usize, Vec<usize>>], ranks: usize) {
        let w = peer_waits(touches, ranks);
        let streams = 2 * ranks;
        let stages = touches.len();
        let id = |x: usize, s: usize| x * stages + s;
        let nn = streams * stages;
        // reach[a][b]: node a completes before node b starts.
        let mut reach = vec![vec![false; nn]; nn];
        // Last record of each stream before stage s (the event a wait sees).
        let mut last: Vec<Option<usize>> = vec![None; streams];
        for s in 0..stages {
            for &(y, x) in &w[s].waits {
                // The wait sees the record after stream x's last active stage.
                let src = last[x].expect("wait on a stream that never recorded");
                reach[id(x, src)][id(y, s)] = true;
            }
            for &y in &w[s].record {
                last[y] = Some(s);
            }
        }
        // Stream order: node (x, s) before (x, t) for s < t.
        for x in 0..streams {
            for s in 0..stages {
                for t in s + 1..stages {
                    reach[id(x, s)][id(x, t)] = true;
                }
            }
        }
        // Transitive closure.
        for k in 0..nn {
            let via = reach[k].clone();
            for row in reach.iter_mut().filter(|row| row[k]) {
                for (cell, v) in row.iter_mut().zip(&via) {
                    *cell |= *v;
                }
            }
        }
        for s in 0..stages {
            for t in s + 1..stages {
                for (&x, rx) in &touches[s] {
                    for (&y, ry) in &touches[t] {
                        if x != y && rx.iter().any(|r| ry.contains(r)) {
                            assert!(
                                reach[id(x, s)][id(y, t)],
                                "stream {x} stage {s} not ordered before stream {y} stage {t}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn peer_waits_order_ring_and_collectives() {
        // A double-buffered ring with compute every stage (as the RingAttention plan).
        let n = 4;
        let ranks: Vec<RankProgram> = (0..n)
            .map(|r| {
                rank(
                    r,
                    (0..n)
                        .map(|t| Stage {
                            compute: vec![],
                            comm: if t + 1 < n {
                                vec![
                                    CommOp::Send {
                                        peer: (r + 1) % n,
                                        src: view(0, if t % 2 == 0 { 0 } else { 8 }, 8),
                                        tag: 0,
                                    },
                                    CommOp::Recv {
                                        peer: (r + n - 1) % n,
                                        dst: view(0, if t % 2 == 0 { 8 } else { 0 }, 8),
                                        tag: 0,
                                    },
                                ]
                            } else {
                                vec![]
                            },
                        })
                        .collect(),
                )
            })
            .collect();
        let s = build(&plan(ranks)).unwrap();
        let t = stage_touches(&s, n, |_, _| true, |m| m.dst_rank, |c| c.leader());
        assert_eq!(t[0].len(), 2 * n);
        assert_eq!(t[0][&transfer_stream(n, 1)], vec![0, 1]);
        let w = peer_waits(&t, n);
        assert!(w[0].waits.is_empty());
        // Rank 1's compute waits on its own receive (transfer 1) and on the send of its buffer
        // (transfer 2); nothing else.
        let c1: Vec<usize> = w[1]
            .waits
            .iter()
            .filter(|(y, _)| *y == compute_stream(1))
            .map(|(_, x)| *x)
            .collect();
        assert_eq!(c1, vec![transfer_stream(n, 1), transfer_stream(n, 2)]);
        assert_ordered(&t, n);

        // Collectives on leaders, computes on some ranks only.
        let ar = |g: Vec<usize>| CommOp::Collective {
            group: g,
            collective: Collective::AllReduce {
                bufs: vec![view(0, 0, 4)],
                kind: CombineKind::Add,
            },
        };
        let ranks: Vec<RankProgram> = (0..3)
            .map(|r| {
                let st = |comm| Stage {
                    compute: vec![],
                    comm,
                };
                rank(
                    r,
                    vec![
                        st(if r < 2 { vec![ar(vec![0, 1])] } else { vec![] }),
                        st(if r > 0 { vec![ar(vec![2, 1])] } else { vec![] }),
                        st(vec![]),
                        st(vec![ar(vec![0, 1, 2])]),
                    ],
                )
            })
            .collect();
        let s = build(&plan(ranks)).unwrap();
        let t = stage_touches(
            &s,
            3,
            |si, r| (si + r) % 2 == 0,
            |m| m.dst_rank,
            |c| c.leader(),
        );
        assert_eq!(t[1][&transfer_stream(3, 2)], vec![1, 2]);
        assert_ordered(&t, 3);
    }

    #[test]
    fn peer_waits_order_the_ring_attention_plan() {
        for causal in [false, true] {
            let p = crate::cuda::test_plans::ring_attention(8, (1, 2, 1), 512, 128, causal);
            let s = build(&p).unwrap();
            let t = stage_touches(
                &s,
                8,
                |si, r| {
                    p.ranks[r]
                        .stages
                        .get(si)
                        .is_some_and(|st| !st.compute.is_empty())
                },
                |m| m.dst_rank,
                |c| c.leader(),
            );
            assert_ordered(&t, 8);
        }
    }

    /// NCCL-style work (each side of a message and each member of a collective on its own
    /// transfer stream, touching only its own memory) and pull-style peer copies are ordered
    /// by the same point-to-point waits.
    #[test]
    fn peer_waits_order_split_work() {
        let p = crate::cuda::test_plans::ring_attention(4, (1, 2, 1), 256, 64, true);
        let s = build(&p).unwrap();
        let has = |si: usize, r: usize| {
            p.ranks[r]
                .stages
                .get(si)
                .is_some_and(|st| !st.compute.is_empty())
        };
        let t = stage_touches_work(
            &s,
            4,
            has,
            |m| {
                vec![
                    (m.src_rank, vec![m.src_rank]),
                    (m.dst_rank, vec![m.dst_rank]),
                ]
            },
            |c| c.group.iter().map(|r| (*r, vec![*r])).collect(),
        );
        // Rank 0's first transfers touch only its own memory on its transfer stream.
        let first = (0..p.ranks[0].stages.len())
            .find(|si| !p.ranks[0].stages[*si].comm.is_empty())
            .expect("a stage with transfers");
        assert_eq!(t[first][&transfer_stream(4, 0)], vec![0]);
        assert_ordered(&t, 4);

        // Collectives split per member, over overlapping groups.
        let ar = |g: Vec<usize>| CommOp::Collective {
            group: g,
            collective: Collective::AllReduce {
                bufs: vec![view(0, 0, 4)],
                kind: CombineKind::Add,
            },
        };
        let ranks: Vec<RankProgram> = (0..3)
            .map(|r| {
                let st = |comm| Stage {
                    compute: vec![],
                    comm,
                };
                rank(
                    r,
                    vec![
                        st(if r < 2 { vec![ar(vec![0, 1])] } else { vec![] }),
                        st(if r > 0 { vec![ar(vec![2, 1])] } else { vec![] }),
                        st(vec![ar(vec![0, 1, 2])]),
                    ],
                )
            })
            .collect();
        let s = build(&plan(ranks)).unwrap();
        for pull in [false, true] {
            let t = stage_touches_work(
                &s,
                3,
                |si, r| (si + r) % 2 == 1,
                |m| vec![(m.dst_rank, vec![m.src_rank, m.dst_rank])],
                |c| {
                    if pull {
                        c.group.iter().map(|r| (*r, c.group.clone())).collect()
                    } else {
                        c.group.iter().map(|r| (*r, vec![*r])).collect()
                    }
                },
            );
            assert_ordered(&t, 3);
        }
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
