//! NCCL: library probing and version, the process environment NCCL must see, communicator
//! handles, and [`NcclTransport`] (collectives and Send/Recv as NCCL kernels on every rank's
//! transfer stream).
//!
//! **NVLink multicast stays off.** [`prepare_env`] sets `NCCL_NVLS_ENABLE=0` (and
//! `TORCH_SYMM_MEM_DISABLE_MULTICAST=1`, `NVSHMEM_DISABLE_NVLS=1`) in this process before NCCL's
//! first use, overriding a different value with a warning: on the shared multi-GPU machines a
//! program using multicast can take the host's GPUs out of service. Every entry point of this
//! module that calls NCCL calls it first. The workspace is edition 2021, where
//! `std::env::set_var` is a safe function; it is still only sound while no other thread reads
//! the environment, so call [`prepare_env`] early (mercury-run does, before opening devices).
//!
//! Communicators (one process, several GPUs): one per distinct collective group of the plan
//! whose members sit on distinct devices (`ncclCommInitAll` over the group's devices in group
//! order, so NCCL rank = position in the group), plus a world communicator over all ranks for
//! Send/Recv when every rank has its own device. Groups or messages whose ranks share a device
//! (NCCL allows one rank per device and communicator) fall back to the copy transport. With a
//! launcher (one process per GPU or node), `launcher::World` builds the world communicator and
//! splits it per group (`ncclCommSplit`), and messages to ranks of other processes are NCCL
//! Send/Recv. When a process's ranks share one GPU the world is a *bridge* (one NCCL rank per
//! process, `launcher` module docs): messages to other processes' ranks are Send/Recv to the
//! peer process in plan order; groups with one member per process are split from the bridge;
//! groups inside one process use device copies; *mixed* groups (several members in one
//! process, others elsewhere) are carried out as messages when the collective is a data
//! movement (all-gather, all-to-all, broadcast: [`decompose`], in one order every process
//! shares) and refused when it reduces.
//!
//! A stage runs in three phases: operands are packed into contiguous scratch where needed
//! (and reductions with an f32 side widened to f32) on each rank's transfer stream; all NCCL calls of the
//! stage are issued between one `ncclGroupStart`/`ncclGroupEnd`; results are unpacked (and
//! the log-sum-exp all-reduce merged in group order) afterwards. NCCL launches a group's
//! kernels at `ncclGroupEnd`, so nothing that consumes a result may be enqueued before it.
//!
//! Files: `comm.rs` the library, its environment and communicator handles; this one the
//! transport's state and construction; `plan.rs` how a stage's messages and collectives become
//! NCCL calls (phase A); `decompose.rs` mixed groups as messages and grouped Send/Recv;
//! `stage.rs` the `Transport` implementation (the three phases of a stage).

use super::error::{Result, RuntimeError};
use super::launcher::{World, WorldParts};
use super::mem::{copy, Loc, MemTable};
use super::ops::{enqueue_lse_merge, lse_shape};
use super::placement::{group_span, process_of, DeviceMap, GroupSpan};
use super::schedule::{chunk_view, CollectiveCall, Message, StageTransfers};
use super::transport::{reduce_members, CopyTransport, TransferCx, Transport, Work};
use cudarc::nccl::sys as ns;
use mercury_plan::{Collective, CombineKind, DType, View};
use std::collections::HashMap;

mod comm;
mod decompose;
pub mod lib;
mod plan;
mod stage;
#[cfg(test)]
mod tests;

use comm::check;
pub use comm::{nccl_err, prepare_env, probe, result_text, version, Comm, NCCL_ENV};
use decompose::*;
pub use decompose::{decompose, group_send_recv, Decomposed, P2p};

/// NCCL data type of a plan dtype.
fn nccl_type(d: DType) -> ns::ncclDataType_t {
    match d {
        DType::F32 => ns::ncclDataType_t::ncclFloat32,
        DType::F64 => ns::ncclDataType_t::ncclFloat64,
        DType::F16 => ns::ncclDataType_t::ncclFloat16,
        DType::BF16 => ns::ncclDataType_t::ncclBfloat16,
    }
}

/// One NCCL call of a stage, with raw handles (issued between group start and end).
enum Call {
    Send {
        buf: u64,
        bytes: usize,
        peer: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    Recv {
        buf: u64,
        bytes: usize,
        peer: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    AllReduce {
        buf: u64,
        count: usize,
        dtype: DType,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    AllGather {
        send: u64,
        recv: u64,
        bytes: usize,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    ReduceScatter {
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    Broadcast {
        send: u64,
        recv: u64,
        bytes: usize,
        root: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
    /// `ncclReduce` (sum) into NCCL rank `root`; `recv` is 0 on every other member (NCCL
    /// reads it on the root only).
    Reduce {
        send: u64,
        recv: u64,
        count: usize,
        dtype: DType,
        root: i32,
        comm: ns::ncclComm_t,
        stream: ns::cudaStream_t,
    },
}

/// Work after the group: on `rank`'s transfer stream.
enum Post {
    Copy {
        rank: usize,
        src: Loc,
        dst: Loc,
    },
    /// Merge `n` gathered `[o | lse]` parts (f32, `rows * d + rows` each) in group order into
    /// `o` and `lse`.
    LseMerge {
        rank: usize,
        base: u64,
        n: usize,
        rows: usize,
        d: usize,
        o: Loc,
        lse: Loc,
    },
}

/// Collectives and messages through NCCL (see the module docs).
pub struct NcclTransport {
    map: DeviceMap,
    local: Vec<bool>,
    /// World communicator handle of each local rank (NCCL rank = plan rank).
    world: HashMap<usize, Comm>,
    /// Per group (as the plan writes it): the handle of each local member.
    groups: HashMap<Vec<usize>, HashMap<usize, Comm>>,
    fallback: CopyTransport,
    /// Groups left to the copy transport (members sharing a device).
    fallback_groups: Vec<Vec<usize>>,
    multi_process: bool,
    /// The process's bridge handle (NCCL rank = process rank) when its ranks share a GPU.
    bridge: Option<Comm>,
    /// Plan ranks per process (`placement::process_of`).
    per_process: usize,
}

impl NcclTransport {
    /// One process drives every rank: a communicator per group whose members sit on distinct
    /// GPUs, a world communicator when every rank has its own GPU. `map` gives each rank's
    /// CUDA ordinal, `ids` the device ids its memory carries (the same map unless device ids
    /// alias GPUs; copies fall back on it).
    pub fn single_process(
        map: &DeviceMap,
        ids: &DeviceMap,
        groups: &[Vec<usize>],
    ) -> Result<NcclTransport> {
        let all: Vec<usize> = (0..map.ranks()).collect();
        let mut world = HashMap::new();
        if map.ranks() > 1 && map.distinct_devices(&all) {
            for (r, c) in Comm::init_all(map.as_slice())?.into_iter().enumerate() {
                world.insert(r, c);
            }
        }
        let mut by_group = HashMap::new();
        let mut fallback_groups = Vec::new();
        for g in groups {
            if !map.distinct_devices(g) {
                fallback_groups.push(g.clone());
                continue;
            }
            let ordinals: Vec<usize> = g.iter().map(|r| map.device(*r)).collect();
            let comms = Comm::init_all(&ordinals)?;
            by_group.insert(g.clone(), g.iter().copied().zip(comms).collect());
        }
        Ok(NcclTransport {
            map: map.clone(),
            local: vec![true; map.ranks()],
            world,
            groups: by_group,
            fallback: CopyTransport::placed(ids.clone()),
            fallback_groups,
            multi_process: false,
            bridge: None,
            per_process: map.ranks().max(1),
        })
    }

    /// A launcher started one process per GPU or node: `world` holds this process's ranks'
    /// world communicators; every group of the plan (`groups`, identical in every process) is
    /// split from it.
    pub fn from_world(
        world: World,
        map: &DeviceMap,
        groups: &[Vec<usize>],
    ) -> Result<NcclTransport> {
        let by_group = world.split(groups)?;
        let local_ranks = world.local_ranks();
        let mut local = vec![false; map.ranks()];
        for r in local_ranks {
            local[r] = true;
        }
        let WorldParts {
            per_rank,
            bridge,
            per_process,
        } = world.into_parts();
        Ok(NcclTransport {
            map: map.clone(),
            local,
            world: per_rank,
            groups: by_group,
            fallback: CopyTransport::placed(map.clone()),
            fallback_groups: Vec::new(),
            multi_process: true,
            bridge,
            per_process,
        })
    }

    /// Groups carried by the copy transport instead (their members share a device).
    pub fn fallback_groups(&self) -> &[Vec<usize>] {
        &self.fallback_groups
    }

    /// Number of group communicators this process holds a handle of.
    pub fn communicators(&self) -> usize {
        self.groups.len() + usize::from(!self.world.is_empty() || self.bridge.is_some())
    }

    fn is_local(&self, r: usize) -> bool {
        self.local[r]
    }

    /// Whether this process drives an end of `msg` (else the message is not its business).
    fn involved(&self, msg: &Message) -> bool {
        self.is_local(msg.src_rank) || self.is_local(msg.dst_rank)
    }

    /// Whether this process drives a member of `call`.
    fn member(&self, call: &CollectiveCall) -> bool {
        call.group.iter().any(|r| self.is_local(*r))
    }

    /// A collective of a mixed group (`GroupSpan::Mixed`: no communicator) under the bridge:
    /// it runs as messages ([`decompose`]).
    fn mixed_group(&self, call: &CollectiveCall) -> bool {
        self.bridge.is_some() && group_span(&call.group, self.per_process) == GroupSpan::Mixed
    }

    /// A mixed collective this process takes part in.
    fn mixed(&self, call: &CollectiveCall) -> bool {
        self.mixed_group(call) && self.member(call)
    }

    /// The communicator handle and NCCL peer for local rank `here` talking to rank `other`:
    /// the world (peer = `other`), or the bridge (peer = `other`'s process).
    fn p2p(&self, here: usize, other: usize) -> Result<(ns::ncclComm_t, i32)> {
        match &self.bridge {
            Some(b) => Ok((b.raw(), process_of(other, self.per_process) as i32)),
            None => Ok((self.world_comm(here)?.raw(), other as i32)),
        }
    }

    /// The stage's messages this process takes part in, in plan order, followed by the
    /// messages of its mixed collectives (in collective order, each in [`decompose`]'s order):
    /// every process derives the same sequence, so NCCL pairs the bridge's sends and receives
    /// right.
    ///
    /// Also returns the fan-out copies of the mixed collectives whose first receiver is local
    /// (run on that receiver's stream after the messages landed).
    fn stage_messages(&self, st: &StageTransfers) -> Result<(Vec<Message>, Vec<Message>)> {
        let mut out: Vec<Message> = st
            .messages
            .iter()
            .filter(|m| self.involved(m))
            .cloned()
            .collect();
        let mut fan_out = Vec::new();
        for c in st.collectives.iter().filter(|c| self.mixed(c)) {
            let d = decompose(c, self.per_process)?;
            out.extend(d.messages.into_iter().filter(|m| self.involved(m)));
            fan_out.extend(d.fan_out.into_iter().filter(|m| self.is_local(m.src_rank)));
        }
        Ok((out, fan_out))
    }

    /// Whether `msg` goes through NCCL (else a copy within this process).
    fn nccl_message(&self, msg: &Message) -> bool {
        let both_local = self.is_local(msg.src_rank) && self.is_local(msg.dst_rank);
        !(both_local
            && (msg.src_rank == msg.dst_rank
                || self.map.same_device(msg.src_rank, msg.dst_rank)
                || self.world.is_empty()))
    }

    fn nccl_collective(&self, call: &CollectiveCall) -> bool {
        self.groups.contains_key(&call.group)
    }

    fn world_comm(&self, rank: usize) -> Result<&Comm> {
        self.world.get(&rank).ok_or_else(|| {
            RuntimeError::Unsupported(format!(
                "no NCCL world communicator for rank {rank} (messages between GPUs with NCCL need every rank on its own device)"
            ))
        })
    }

    fn group_comm(&self, group: &[usize], rank: usize) -> Result<&Comm> {
        self.groups
            .get(group)
            .and_then(|m| m.get(&rank))
            .ok_or_else(|| {
                RuntimeError::Schedule(format!(
                    "no NCCL communicator of rank {rank} for group {group:?}"
                ))
            })
    }
}
