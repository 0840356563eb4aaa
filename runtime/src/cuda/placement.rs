//! Where ranks run: the rank -> device map of a multi-device executor, the link class of a
//! pair of ranks, the communicator groups a plan needs, and which ranks a process drives when
//! a launcher starts one process per GPU or per node. Pure host logic (no CUDA), unit-tested
//! on the CPU.

use super::schedule::Schedule;
use mercury_plan::Plan;
use std::collections::BTreeSet;
use std::ops::Range;

/// Rank -> CUDA device ordinal.
///
/// Several ranks may share a device (virtual ranks: each keeps its own slots and streams);
/// ranks on different devices exchange data through peer copies or NCCL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMap {
    devices: Vec<usize>,
}

impl DeviceMap {
    /// Every one of `ranks` ranks on device `ordinal` (the virtual mode).
    pub fn single(ranks: usize, ordinal: usize) -> DeviceMap {
        DeviceMap {
            devices: vec![ordinal; ranks],
        }
    }

    /// Rank `r` on device `r % devices`.
    pub fn round_robin(ranks: usize, devices: usize) -> Result<DeviceMap, String> {
        if devices == 0 {
            return Err("a device map needs at least one device".into());
        }
        Ok(DeviceMap {
            devices: (0..ranks).map(|r| r % devices).collect(),
        })
    }

    /// An explicit list: `ordinals[r]` is the device of rank `r`.
    pub fn from_ordinals(ordinals: Vec<usize>) -> DeviceMap {
        DeviceMap { devices: ordinals }
    }

    /// Parses `"0,1,2,3"` (one ordinal per rank) or `"rr:N"` (rank r on device r % N).
    pub fn parse(spec: &str, ranks: usize) -> Result<DeviceMap, String> {
        let spec = spec.trim();
        if let Some(n) = spec.strip_prefix("rr:") {
            let n: usize = n
                .trim()
                .parse()
                .map_err(|e| format!("device map '{spec}': {e}"))?;
            return DeviceMap::round_robin(ranks, n);
        }
        let ordinals = spec
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|e| format!("device map '{spec}': '{s}': {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if ordinals.len() != ranks {
            return Err(format!(
                "device map '{spec}' names {} devices for {ranks} ranks",
                ordinals.len()
            ));
        }
        Ok(DeviceMap { devices: ordinals })
    }

    /// Number of ranks mapped.
    pub fn ranks(&self) -> usize {
        self.devices.len()
    }

    /// Device ordinal of `rank`.
    pub fn device(&self, rank: usize) -> usize {
        self.devices[rank]
    }

    /// The ordinal of every rank.
    pub fn as_slice(&self) -> &[usize] {
        &self.devices
    }

    /// Distinct ordinals in order of first use by a rank (the first is rank 0's device).
    pub fn ordinals(&self) -> Vec<usize> {
        let mut seen = BTreeSet::new();
        self.devices
            .iter()
            .copied()
            .filter(|d| seen.insert(*d))
            .collect()
    }

    /// Distinct ordinals used by `ranks` only, in the same order as [`DeviceMap::ordinals`].
    pub fn ordinals_of(&self, ranks: &[usize]) -> Vec<usize> {
        let want: BTreeSet<usize> = ranks.iter().map(|r| self.devices[*r]).collect();
        self.ordinals()
            .into_iter()
            .filter(|d| want.contains(d))
            .collect()
    }

    /// Ranks on device `ordinal`, ascending.
    pub fn ranks_on(&self, ordinal: usize) -> Vec<usize> {
        (0..self.devices.len())
            .filter(|r| self.devices[*r] == ordinal)
            .collect()
    }

    /// True when every rank is on one device (the plan runs as virtual ranks).
    pub fn is_single_device(&self) -> bool {
        self.devices.windows(2).all(|w| w[0] == w[1])
    }

    /// True when the members of `group` sit on pairwise distinct devices (what one NCCL
    /// communicator over the group needs: NCCL allows one rank per device and communicator).
    pub fn distinct_devices(&self, group: &[usize]) -> bool {
        let mut seen = BTreeSet::new();
        group.iter().all(|r| seen.insert(self.devices[*r]))
    }

    /// True when `a` and `b` are on the same device.
    pub fn same_device(&self, a: usize, b: usize) -> bool {
        self.devices[a] == self.devices[b]
    }

    /// Largest ordinal used plus one (how many devices must be visible).
    pub fn devices_needed(&self) -> usize {
        self.devices.iter().max().map_or(0, |m| m + 1)
    }

    /// Checks the map against a plan with `ranks` ranks and `visible` devices.
    pub fn check(&self, ranks: usize, visible: usize) -> Result<(), String> {
        if self.devices.len() != ranks {
            return Err(format!(
                "the device map has {} entries, the plan {ranks} ranks",
                self.devices.len()
            ));
        }
        if self.devices_needed() > visible {
            return Err(format!(
                "the device map uses device {} but only {visible} device(s) are visible",
                self.devices_needed() - 1
            ));
        }
        Ok(())
    }
}

/// How two devices exchange data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkClass {
    /// Same device: device-to-device copies.
    Local,
    /// Peer access enabled: copy-engine peer copies over NVLink or PCIe P2P.
    Peer,
    /// No peer access (`cuDeviceCanAccessPeer` said no): the driver stages peer copies
    /// through host memory. Correct but slow; the executor warns.
    Staged,
}

/// Which ordered device pairs can access each other directly (`cuDeviceCanAccessPeer`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerMatrix {
    ordinals: Vec<usize>,
    /// `can[i][j]`: device `ordinals[i]` can access memory of `ordinals[j]`.
    can: Vec<Vec<bool>>,
}

impl PeerMatrix {
    /// Builds the matrix by asking `can(a, b)` for every ordered pair of distinct ordinals.
    pub fn build(ordinals: &[usize], mut can: impl FnMut(usize, usize) -> bool) -> PeerMatrix {
        let m = ordinals
            .iter()
            .map(|a| {
                ordinals
                    .iter()
                    .map(|b| a == b || can(*a, *b))
                    .collect::<Vec<_>>()
            })
            .collect();
        PeerMatrix {
            ordinals: ordinals.to_vec(),
            can: m,
        }
    }

    fn index(&self, ordinal: usize) -> Option<usize> {
        self.ordinals.iter().position(|o| *o == ordinal)
    }

    /// Whether `a` can access `b`'s memory (false for unknown ordinals).
    pub fn can_access(&self, a: usize, b: usize) -> bool {
        match (self.index(a), self.index(b)) {
            (Some(i), Some(j)) => self.can[i][j],
            _ => false,
        }
    }

    /// The class of the link between devices `a` and `b` (peer only when both directions work).
    pub fn link(&self, a: usize, b: usize) -> LinkClass {
        if a == b {
            LinkClass::Local
        } else if self.can_access(a, b) && self.can_access(b, a) {
            LinkClass::Peer
        } else {
            LinkClass::Staged
        }
    }

    /// Ordered pairs of distinct devices without direct access.
    pub fn staged_pairs(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        for (i, a) in self.ordinals.iter().enumerate() {
            for (j, b) in self.ordinals.iter().enumerate() {
                if i != j && !self.can[i][j] {
                    out.push((*a, *b));
                }
            }
        }
        out
    }
}

/// The link classes the transfers of `sched` use under `map` (each class once, in the order
/// local, peer, staged), e.g. to report what a run exercises.
pub fn link_classes(sched: &Schedule, map: &DeviceMap, peers: &PeerMatrix) -> Vec<LinkClass> {
    let mut seen = BTreeSet::new();
    let mut note = |a: usize, b: usize| {
        let c = peers.link(map.device(a), map.device(b));
        seen.insert(match c {
            LinkClass::Local => 0,
            LinkClass::Peer => 1,
            LinkClass::Staged => 2,
        });
    };
    for st in &sched.stages {
        for m in &st.messages {
            note(m.src_rank, m.dst_rank);
        }
        for c in &st.collectives {
            for a in &c.group {
                for b in &c.group {
                    note(*a, *b);
                }
            }
        }
    }
    seen.into_iter()
        .map(|i| match i {
            0 => LinkClass::Local,
            1 => LinkClass::Peer,
            _ => LinkClass::Staged,
        })
        .collect()
}

/// Every distinct collective group of `plan`, as the plan writes it (member order = NCCL rank
/// order of the group's communicator), in order of first appearance (stage by stage, rank by
/// rank). Every process computes the same list from the same plan, which is what makes the
/// per-group communicator splits line up.
pub fn distinct_groups(plan: &Plan) -> Vec<Vec<usize>> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for si in 0..plan.num_stages() {
        for r in &plan.ranks {
            let Some(st) = r.stages.get(si) else {
                continue;
            };
            for op in &st.comm {
                if let mercury_plan::CommOp::Collective { group, .. } = op {
                    if seen.insert(group.clone()) {
                        out.push(group.clone());
                    }
                }
            }
        }
    }
    out
}

/// How a collective group lies over the processes of a launcher world whose processes drive
/// `per_process` ranks each (process of rank `r` = `r / per_process`, as [`owned_ranks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSpan {
    /// Every member in this process (device copies among them).
    Within(usize),
    /// One member in each of several processes (a communicator split from the bridge).
    OnePerProcess,
    /// Several members in some process and members in others.
    Mixed,
}

/// The process that drives plan rank `rank` when every process drives `per_process` ranks in
/// contiguous blocks ([`owned_ranks`]); `per_process` 0 counts as 1.
pub fn process_of(rank: usize, per_process: usize) -> usize {
    rank / per_process.max(1)
}

/// The [`GroupSpan`] of `group`.
pub fn group_span(group: &[usize], per_process: usize) -> GroupSpan {
    let procs: Vec<usize> = group.iter().map(|r| process_of(*r, per_process)).collect();
    let distinct: BTreeSet<usize> = procs.iter().copied().collect();
    if distinct.len() <= 1 {
        GroupSpan::Within(procs.first().copied().unwrap_or(0))
    } else if distinct.len() == procs.len() {
        GroupSpan::OnePerProcess
    } else {
        GroupSpan::Mixed
    }
}

/// `ncclCommSplit` arguments of `rank` for group number `index` (`groups[index]`): the color
/// is the group's index for members and `None` (NCCL_SPLIT_NOCOLOR) for the others; the key is
/// the member's position, so the new communicator's ranks follow the plan's group order.
pub fn split_color_key(group: &[usize], index: usize, rank: usize) -> Option<(i32, i32)> {
    group
        .iter()
        .position(|r| *r == rank)
        .map(|p| (index as i32, p as i32))
}

/// The plan ranks process `proc_rank` of `world_size` drives: contiguous blocks of
/// `ranks / world_size` (one process per GPU: one rank each; one process per node: a node's
/// GPUs). `ranks` must be a multiple of `world_size`.
pub fn owned_ranks(
    ranks: usize,
    world_size: usize,
    proc_rank: usize,
) -> Result<Range<usize>, String> {
    if world_size == 0 || proc_rank >= world_size {
        return Err(format!(
            "process rank {proc_rank} outside a world of {world_size} processes"
        ));
    }
    if ranks == 0 || !ranks.is_multiple_of(world_size) {
        return Err(format!(
            "the plan's {ranks} ranks do not split evenly over {world_size} processes"
        ));
    }
    let k = ranks / world_size;
    Ok(proc_rank * k..(proc_rank + 1) * k)
}

/// Device ordinals of the ranks a process drives: its `i`-th rank runs on device
/// `local_rank * per_process + i` (one process per GPU: device `LOCAL_RANK`; one process per
/// node: devices `0..per_process`), modulo the visible devices when `visible > 0`.
pub fn local_devices(local_rank: usize, per_process: usize, visible: usize) -> Vec<usize> {
    (0..per_process)
        .map(|i| {
            let d = local_rank * per_process + i;
            if visible > 0 {
                d % visible
            } else {
                d
            }
        })
        .collect()
}

/// Flat element indices of global buffer `buffer` that the ranks in `local` write back
/// (their output pieces), as a mask over the buffer (row-major). Used to check a process's
/// share of the outputs when each process drives only some ranks.
pub fn output_mask(plan: &Plan, buffer: usize, local: &[usize]) -> Vec<bool> {
    let shape = &plan.buffers[buffer].shape;
    let n: usize = shape.iter().product();
    let mut mask = vec![false; n];
    let strides = super::layout::row_major_strides(shape);
    for r in local {
        for piece in plan.ranks[*r].outputs.iter().filter(|p| p.buffer == buffer) {
            let reg = &piece.region;
            let total = reg.numel();
            let mut idx = vec![0usize; reg.rank()];
            for _ in 0..total {
                let flat: usize = (0..reg.rank())
                    .map(|d| (reg.offset[d] + idx[d]) * strides[d])
                    .sum();
                if flat < n {
                    mask[flat] = true;
                }
                for d in (0..reg.rank()).rev() {
                    idx[d] += 1;
                    if idx[d] < reg.extent[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
    }
    mask
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::schedule;

    #[test]
    fn group_spans() {
        // Mesh [2, 4] over two processes of 4 ranks.
        assert_eq!(group_span(&[0, 1, 2, 3], 4), GroupSpan::Within(0));
        assert_eq!(group_span(&[5, 7], 4), GroupSpan::Within(1));
        assert_eq!(group_span(&[1, 5], 4), GroupSpan::OnePerProcess);
        assert_eq!(group_span(&[5, 1], 4), GroupSpan::OnePerProcess);
        assert_eq!(group_span(&[0, 1, 4], 4), GroupSpan::Mixed);
        assert_eq!(group_span(&(0..8).collect::<Vec<_>>(), 4), GroupSpan::Mixed);
        // One rank per process: every group spans one process per member.
        assert_eq!(group_span(&[0, 1], 1), GroupSpan::OnePerProcess);
    }

    #[test]
    fn maps() {
        let m = DeviceMap::round_robin(8, 4).unwrap();
        assert_eq!(m.as_slice(), &[0, 1, 2, 3, 0, 1, 2, 3]);
        assert_eq!(m.ordinals(), vec![0, 1, 2, 3]);
        assert_eq!(m.ranks_on(2), vec![2, 6]);
        assert!(!m.is_single_device());
        assert!(m.distinct_devices(&[0, 1, 2, 3]));
        assert!(!m.distinct_devices(&[0, 4]));
        assert!(m.same_device(1, 5));
        assert_eq!(m.devices_needed(), 4);
        assert!(m.check(8, 4).is_ok());
        assert!(m.check(8, 2).unwrap_err().contains("only 2"));
        assert!(m.check(4, 4).unwrap_err().contains("8 entries"));
        assert!(DeviceMap::round_robin(4, 0).is_err());

        // One GPU: everything degenerates to device 0.
        let one = DeviceMap::round_robin(8, 1).unwrap();
        assert_eq!(one, DeviceMap::single(8, 0));
        assert!(one.is_single_device());
        assert_eq!(one.ordinals(), vec![0]);
        assert!(!one.distinct_devices(&[0, 1]));
        assert!(one.distinct_devices(&[3]));

        assert_eq!(
            DeviceMap::parse("1, 0,1,0", 4).unwrap().as_slice(),
            &[1, 0, 1, 0]
        );
        assert_eq!(
            DeviceMap::parse("1,0,1,0", 4).unwrap().ordinals(),
            vec![1, 0]
        );
        assert_eq!(
            DeviceMap::parse("rr:3", 5).unwrap().as_slice(),
            &[0, 1, 2, 0, 1]
        );
        assert!(DeviceMap::parse("0,1", 4).is_err());
        assert!(DeviceMap::parse("0,x", 2).is_err());
        assert_eq!(
            DeviceMap::from_ordinals(vec![2, 2, 5]).ordinals_of(&[2]),
            vec![5]
        );
    }

    #[test]
    fn peer_matrix() {
        // 0 <-> 1 peer, 2 reachable by nobody (PCIe across sockets, say).
        let p = PeerMatrix::build(&[0, 1, 2], |a, b| a < 2 && b < 2);
        assert_eq!(p.link(0, 0), LinkClass::Local);
        assert_eq!(p.link(0, 1), LinkClass::Peer);
        assert_eq!(p.link(1, 2), LinkClass::Staged);
        assert_eq!(p.staged_pairs(), vec![(0, 2), (1, 2), (2, 0), (2, 1)]);
        assert!(!p.can_access(0, 7));
        // One-way access is not enough for a peer link.
        let q = PeerMatrix::build(&[0, 1], |a, _| a == 0);
        assert_eq!(q.link(0, 1), LinkClass::Staged);
        // A single device has no pairs.
        let s = PeerMatrix::build(&[0], |_, _| false);
        assert!(s.staged_pairs().is_empty());
        assert_eq!(s.link(0, 0), LinkClass::Local);
    }

    #[test]
    fn groups_splits_and_link_classes() {
        let p = crate::cuda::test_plans::ring_attention(4, (1, 2, 1), 256, 64, false);
        let s = schedule::build(&p).unwrap();
        // 4 ranks on 2 devices: neighbours on different devices, nothing local.
        let map = DeviceMap::round_robin(4, 2).unwrap();
        let peers = PeerMatrix::build(&map.ordinals(), |_, _| true);
        assert_eq!(link_classes(&s, &map, &peers), vec![LinkClass::Peer]);
        let none = PeerMatrix::build(&map.ordinals(), |_, _| false);
        assert_eq!(link_classes(&s, &map, &none), vec![LinkClass::Staged]);
        // Everything on one device: all local.
        let one = DeviceMap::single(4, 0);
        assert_eq!(
            link_classes(&s, &one, &PeerMatrix::build(&[0], |_, _| false)),
            vec![LinkClass::Local]
        );

        assert_eq!(split_color_key(&[3, 1, 0, 2], 5, 0), Some((5, 2)));
        assert_eq!(split_color_key(&[3, 1], 0, 2), None);
    }

    #[test]
    fn distinct_groups_in_first_use_order() {
        use mercury_plan::{
            Collective, CombineKind, CommOp, DType, RankProgram, Region, Slot, SlotInit, Stage,
            View,
        };
        let v = View {
            slot: 0,
            region: Region::full(&[4]),
        };
        let ar = |g: Vec<usize>| CommOp::Collective {
            group: g,
            collective: Collective::AllReduce {
                bufs: vec![v.clone()],
                kind: CombineKind::Add,
            },
        };
        let ranks = (0..4)
            .map(|r| RankProgram {
                rank: r,
                coords: vec![r],
                slots: vec![Slot {
                    name: "x".into(),
                    dtype: DType::F32,
                    shape: vec![4],
                    init: SlotInit::Zero,
                }],
                stages: vec![
                    Stage {
                        compute: vec![],
                        comm: vec![ar(if r < 2 { vec![1, 0] } else { vec![2, 3] })],
                    },
                    Stage {
                        compute: vec![],
                        comm: vec![
                            ar(vec![0, 1, 2, 3]),
                            ar(if r < 2 { vec![1, 0] } else { vec![2, 3] }),
                        ],
                    },
                ],
                outputs: vec![],
            })
            .collect();
        let plan = Plan {
            name: "g".into(),
            mesh: vec![4],
            buffers: vec![],
            documents: vec![],
            ranks,
        };
        assert_eq!(
            distinct_groups(&plan),
            vec![vec![1, 0], vec![2, 3], vec![0, 1, 2, 3]]
        );
    }

    #[test]
    fn process_ownership() {
        assert_eq!(owned_ranks(8, 8, 3).unwrap(), 3..4);
        assert_eq!(owned_ranks(8, 2, 1).unwrap(), 4..8);
        assert!(owned_ranks(8, 3, 0).unwrap_err().contains("evenly"));
        assert!(owned_ranks(8, 2, 2).is_err());
        assert_eq!(local_devices(3, 1, 8), vec![3]);
        assert_eq!(local_devices(0, 4, 4), vec![0, 1, 2, 3]);
        // One visible GPU: everything on device 0.
        assert_eq!(local_devices(1, 2, 1), vec![0, 0]);
    }

    #[test]
    fn output_masks() {
        use mercury_plan::{
            DType, GlobalBuffer, OutputPiece, RankProgram, Region, Role, Slot, SlotInit, View,
        };
        let piece = |r: usize| OutputPiece {
            buffer: 0,
            region: Region {
                offset: vec![0, 2 * r],
                extent: vec![2, 2],
            },
            src: View {
                slot: 0,
                region: Region::full(&[2, 2]),
            },
        };
        let plan = Plan {
            name: "m".into(),
            mesh: vec![2],
            buffers: vec![GlobalBuffer {
                name: "y".into(),
                shape: vec![2, 4],
                dtype: DType::F32,
                role: Role::Output,
            }],
            documents: vec![],
            ranks: (0..2)
                .map(|r| RankProgram {
                    rank: r,
                    coords: vec![r],
                    slots: vec![Slot {
                        name: "y".into(),
                        dtype: DType::F32,
                        shape: vec![2, 2],
                        init: SlotInit::Zero,
                    }],
                    stages: vec![],
                    outputs: vec![piece(r)],
                })
                .collect(),
        };
        assert_eq!(
            output_mask(&plan, 0, &[1]),
            vec![false, false, true, true, false, false, true, true]
        );
        assert!(output_mask(&plan, 0, &[0, 1]).iter().all(|x| *x));
    }
}
