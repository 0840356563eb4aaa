//! One process per GPU (or per node), started by a launcher such as `torchrun`, `srun` or
//! `mpirun`: the launcher's environment says which process this is, the NCCL unique id is
//! shared through a file or NCCL's own `NCCL_COMM_ID`, and [`World`] builds the world
//! communicator (NCCL rank = plan rank) and splits it per collective group.
//!
//! Environment read by [`LaunchEnv::from_env`]:
//!
//! | variable | meaning |
//! | --- | --- |
//! | `RANK` (or `OMPI_COMM_WORLD_RANK`, `SLURM_PROCID`) | this process's rank among the processes |
//! | `WORLD_SIZE` (or `OMPI_COMM_WORLD_SIZE`, `SLURM_NTASKS`) | number of processes |
//! | `LOCAL_RANK` (or `OMPI_COMM_WORLD_LOCAL_RANK`, `SLURM_LOCALID`; default 0) | rank among the processes of this node: the first GPU this process drives |
//! | `MERCURY_NCCL_ID_FILE` | a path on a file system all processes see: process 0 writes the unique id there, the others wait for it (use a fresh path per job) |
//! | `NCCL_COMM_ID` | `host:port` of the bootstrap root; every process derives the same id from it (NCCL's own mechanism) |
//! | `MASTER_ADDR` + `MASTER_PORT` | torchrun-style: `NCCL_COMM_ID` becomes `MASTER_ADDR:(MASTER_PORT + 1)` (the port after the launcher's own store) |
//!
//! The first of the three id sources that is set wins. The plan's ranks are split evenly over
//! the processes in contiguous blocks (`placement::owned_ranks`): process `p` of `P` drives
//! ranks `p*k .. (p+1)*k` with `k = ranks / P`, its `i`-th on device `LOCAL_RANK * k + i`.
//!
//! **Two tiers on one host (or several ranks per GPU).** When a process's ranks share one GPU
//! (virtual ranks: `mercury-run --launcher env --virtual`), NCCL cannot give each of them a
//! world rank (one rank per device and communicator). The world is then a *bridge*: one NCCL
//! rank per process (NCCL rank = process rank), on the process's GPU. Messages between ranks of
//! different processes travel over it, to and from the peer *process*, in plan order (NCCL
//! matches the Send/Recv of one pair of ranks in issue order; every process walks the same
//! plan). Collective groups with one member per process are split from it; groups inside one
//! process use device copies; groups with several members in some process and members in
//! others are decomposed into messages (all-gather, all-to-all, broadcast) or refused
//! (reductions), see `nccl::NcclTransport`. This is how two processes act as two "nodes"
//! with NCCL's socket transport as the slow tier (docs/multi-gpu.md, "Two tiers").
//!
//! The blocking steps (waiting for the id file, `ncclCommInitRank`, `ncclCommSplit`) arm the
//! process's fault watchdog with the setup limit (`fault::Progress::setup_timeout`, default
//! 120 s): a process whose peer died or hangs during setup ends with a report instead of
//! waiting forever (when a `fault::Watchdog` runs, as in mercury-run).

use super::error::{Result, RuntimeError};
use super::fault::{self, Phase};
use super::nccl::{self, nccl_err, Comm};
use super::placement::{group_span, owned_ranks, process_of, split_color_key, GroupSpan};
use cudarc::driver::CudaContext;
use cudarc::nccl::sys as ns;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the NCCL unique id comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdSource {
    /// Process 0 writes it to this file; the others read it.
    File(PathBuf),
    /// `NCCL_COMM_ID` (`host:port`): every process calls `ncclGetUniqueId` itself. `set` says
    /// whether this process must set the variable (derived from `MASTER_ADDR`).
    CommId { addr: String, set: bool },
    /// Exchanged by the caller before the world is joined (the Python package broadcasts it
    /// through the user's process group): every process passes the same id.
    Given(Box<[std::ffi::c_char; 128]>),
}

/// This process's place among the launcher's processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    pub id: IdSource,
}

fn first(get: &dyn Fn(&str) -> Option<String>, names: &[&str]) -> Option<(String, String)> {
    names
        .iter()
        .find_map(|n| get(n).map(|v| (n.to_string(), v.trim().to_string())))
}

fn number(name: &str, v: &str) -> std::result::Result<usize, String> {
    v.parse::<usize>()
        .map_err(|e| format!("{name}='{v}' is not a non-negative integer: {e}"))
}

impl LaunchEnv {
    /// Reads the launcher's variables through `get` (see the module docs). `Ok(None)`: no
    /// launcher (neither a rank nor a world size is set).
    pub fn from_lookup(
        get: &dyn Fn(&str) -> Option<String>,
    ) -> std::result::Result<Option<LaunchEnv>, String> {
        let rank = first(get, &["RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"]);
        let size = first(get, &["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"]);
        let (rank, size) = match (rank, size) {
            (None, None) => return Ok(None),
            (Some(r), Some(s)) => (number(&r.0, &r.1)?, number(&s.0, &s.1)?),
            (Some((n, _)), None) => return Err(format!("{n} is set but no WORLD_SIZE")),
            (None, Some((n, _))) => return Err(format!("{n} is set but no RANK")),
        };
        if size == 0 || rank >= size {
            return Err(format!("RANK {rank} outside WORLD_SIZE {size}"));
        }
        let local_rank = match first(
            get,
            &["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"],
        ) {
            Some((n, v)) => number(&n, &v)?,
            None => 0,
        };
        let id = if let Some(p) = get("MERCURY_NCCL_ID_FILE").filter(|p| !p.is_empty()) {
            IdSource::File(PathBuf::from(p))
        } else if let Some(a) = get("NCCL_COMM_ID").filter(|a| !a.is_empty()) {
            IdSource::CommId {
                addr: a,
                set: false,
            }
        } else if let (Some(addr), Some(port)) = (get("MASTER_ADDR"), get("MASTER_PORT")) {
            let port = number("MASTER_PORT", port.trim())?;
            IdSource::CommId {
                addr: format!("{}:{}", addr.trim(), port + 1),
                set: true,
            }
        } else if size == 1 {
            // A single process needs no exchange: it makes the id itself.
            IdSource::CommId {
                addr: String::new(),
                set: false,
            }
        } else {
            return Err(
                "no way to share the NCCL unique id: set MERCURY_NCCL_ID_FILE (a path all processes see), NCCL_COMM_ID (host:port) or MASTER_ADDR and MASTER_PORT".into(),
            );
        };
        Ok(Some(LaunchEnv {
            rank,
            world_size: size,
            local_rank,
            id,
        }))
    }

    /// [`LaunchEnv::from_lookup`] over the process environment.
    pub fn from_env() -> std::result::Result<Option<LaunchEnv>, String> {
        LaunchEnv::from_lookup(&|k| std::env::var(k).ok())
    }
}

/// The unique id as 256 hex digits (what the id file holds).
pub fn id_to_hex(id: &[std::ffi::c_char; 128]) -> String {
    id.iter().map(|b| format!("{:02x}", *b as u8)).collect()
}

/// Parses [`id_to_hex`]'s text (surrounding whitespace allowed).
pub fn id_from_hex(text: &str) -> std::result::Result<[std::ffi::c_char; 128], String> {
    let t = text.trim();
    if t.len() != 256 || !t.is_ascii() {
        return Err(format!(
            "an NCCL unique id file holds 256 hex digits, got {} characters",
            t.len()
        ));
    }
    let mut out = [0 as std::ffi::c_char; 128];
    for (i, o) in out.iter_mut().enumerate() {
        let b = u8::from_str_radix(&t[2 * i..2 * i + 2], 16)
            .map_err(|e| format!("unique id file: {e}"))?;
        *o = b as std::ffi::c_char;
    }
    Ok(out)
}

/// Writes the id atomically (temporary file + rename).
fn write_id_file(path: &Path, hex: &str) -> Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, hex)
        .and_then(|_| std::fs::rename(&tmp, path))
        .map_err(|e| RuntimeError::Io(format!("writing the NCCL id file {}: {e}", path.display())))
}

/// Waits for the id file (polling) up to `timeout`.
fn read_id_file(path: &Path, timeout: Duration) -> Result<[std::ffi::c_char; 128]> {
    let start = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            if let Ok(id) = id_from_hex(&text) {
                return Ok(id);
            }
        }
        if start.elapsed() > timeout {
            return Err(RuntimeError::Timeout {
                what: format!("the NCCL id file {} (written by process 0)", path.display()),
                secs: start.elapsed().as_secs_f64(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Obtains the unique id every process of `env` shares.
fn unique_id(env: &LaunchEnv, timeout: Duration) -> Result<ns::ncclUniqueId> {
    match &env.id {
        IdSource::File(path) => {
            if env.rank == 0 {
                let id =
                    crate::cuda::nccl::lib::get_uniqueid().map_err(nccl_err("ncclGetUniqueId"))?;
                write_id_file(path, &id_to_hex(&id.internal))?;
                Ok(id)
            } else {
                Ok(ns::ncclUniqueId {
                    internal: read_id_file(path, timeout)?,
                })
            }
        }
        IdSource::CommId { .. } => {
            // With NCCL_COMM_ID set every process derives the same id; a single process makes
            // a fresh one.
            crate::cuda::nccl::lib::get_uniqueid().map_err(nccl_err("ncclGetUniqueId"))
        }
        IdSource::Given(id) => Ok(ns::ncclUniqueId { internal: **id }),
    }
}

/// A fresh NCCL unique id as [`id_to_hex`]'s text, for a caller that shares it itself (the
/// Python package broadcasts it through the user's process group, then every process joins
/// with [`IdSource::Given`]).
///
/// # Errors
/// No usable NCCL library (the error says where it looked), `ncclGetUniqueId` failing.
pub fn fresh_unique_id() -> Result<String> {
    nccl::probe()?;
    nccl::prepare_env();
    let id = crate::cuda::nccl::lib::get_uniqueid().map_err(nccl_err("ncclGetUniqueId"))?;
    Ok(id_to_hex(&id.internal))
}

/// FNV-1a (64 bit) of `bytes`: the digest [`World::agree`] compares.
pub use mercury_plan::fnv1a;

/// `ncclCommSplit` of each `(parent, color, key, size)` (color -1: NCCL_SPLIT_NOCOLOR, no
/// handle; `size`: the new communicator's ranks, for its `Comm`), inside one NCCL group when
/// there are several (one thread drives them all). Returns the new handles in the same order,
/// each its rank `key` (`None` where NCCL gave none); on failure every handle made is aborted.
/// `what` names the call in errors.
fn split_handles(
    parents: &[(&Comm, i32, i32, usize)],
    what: &'static str,
) -> Result<Vec<Option<Comm>>> {
    let mut raw = vec![std::ptr::null_mut(); parents.len()];
    let grouped = parents.len() > 1;
    if grouped {
        crate::cuda::nccl::lib::group_start().map_err(nccl_err("ncclGroupStart"))?;
    }
    let mut res = Ok(());
    for (i, (p, color, key, _)) in parents.iter().enumerate() {
        // SAFETY: the parent handle is live; `raw[i]` receives the new handle (null for
        // NCCL_SPLIT_NOCOLOR); a null config asks for the parent's configuration. Inside a
        // group NCCL may write `raw[i]` up to ncclGroupEnd: `raw` is not moved before then.
        let e = unsafe {
            crate::cuda::nccl::lib::ncclCommSplit(
                p.raw(),
                *color,
                *key,
                &mut raw[i],
                std::ptr::null_mut(),
            )
        };
        if let Err(e) = e.result() {
            res = Err(nccl_err(what)(e));
            break;
        }
    }
    if grouped {
        let end = crate::cuda::nccl::lib::group_end().map_err(nccl_err("ncclGroupEnd"));
        res = res.and(end.map(|_| ()));
    }
    // Owned (aborted on drop) before anything can return.
    let handles: Vec<Option<Comm>> = parents
        .iter()
        .zip(raw)
        .map(|((p, _, key, size), h)| {
            (!h.is_null()).then(|| Comm::from_raw(h, (*key).max(0) as usize, *size, p.ordinal))
        })
        .collect();
    res.map(|_| handles)
}

/// The world communicator of this process's ranks: one handle per local rank (NCCL rank =
/// plan rank), or, when the local ranks share a GPU, one bridge handle for the process (NCCL
/// rank = process rank; see the module docs).
pub struct World {
    env: LaunchEnv,
    nranks: usize,
    ranks: Range<usize>,
    comms: HashMap<usize, Comm>,
    bridge: Option<Comm>,
}

/// The communicators of a [`World`], taken apart for the transport.
pub struct WorldParts {
    /// Per local rank (NCCL rank = plan rank); empty in bridge mode.
    pub per_rank: HashMap<usize, Comm>,
    /// The process's bridge handle (NCCL rank = process rank) when its ranks share a GPU.
    pub bridge: Option<Comm>,
    /// Plan ranks per process (`placement::process_of`).
    pub per_process: usize,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("env", &self.env)
            .field("nranks", &self.nranks)
            .field("ranks", &self.ranks)
            .field("bridge", &self.bridge.is_some())
            .finish()
    }
}

impl World {
    /// Joins the world of `nranks` plan ranks: this process's ranks (`owned_ranks`) on
    /// `ctxs[i]` (one context per local rank, in rank order). Blocks until every process has
    /// joined (NCCL's bootstrap), or fails; the fault watchdog, when running, bounds the wait
    /// by the setup limit.
    ///
    /// # Errors
    /// NCCL failures, a missing or stale id file (after the setup limit + 5 s), a process
    /// whose rank block does not match `ctxs`.
    pub fn init(env: &LaunchEnv, nranks: usize, ctxs: &[Arc<CudaContext>]) -> Result<World> {
        nccl::probe()?;
        if let IdSource::CommId { addr, set: true } = &env.id {
            // Before NCCL reads its environment (its first call below).
            if std::env::var("NCCL_COMM_ID").is_err() {
                std::env::set_var("NCCL_COMM_ID", addr);
            }
        }
        nccl::prepare_env();
        let ranks =
            owned_ranks(nranks, env.world_size, env.rank).map_err(RuntimeError::Schedule)?;
        if ctxs.len() != ranks.len() {
            return Err(RuntimeError::Schedule(format!(
                "process {} drives ranks {ranks:?} but got {} device contexts",
                env.rank,
                ctxs.len()
            )));
        }
        let progress = fault::progress();
        let limit = progress.setup_timeout();
        let _armed = progress.arm(
            Phase::Setup("NCCL bootstrap: every process joins the world communicator"),
            limit,
            "waiting for the other processes (NCCL unique id, ncclCommInitRank)",
        );
        // The watchdog (limit) comes first; this bound serves callers without one.
        let id = unique_id(env, limit + Duration::from_secs(5))?;
        let ordinals: Vec<usize> = ctxs.iter().map(|c| c.ordinal()).collect();
        let mut seen = std::collections::BTreeSet::new();
        if !ordinals.iter().all(|o| seen.insert(*o)) {
            // Local ranks share a GPU: one bridge rank per process.
            if seen.len() > 1 {
                return Err(RuntimeError::Unsupported(format!(
                    "process {} drives ranks {ranks:?} on GPUs {ordinals:?}: some share a GPU and some do not; NCCL between processes needs one GPU per rank or one GPU per process",
                    env.rank
                )));
            }
            ctxs[0]
                .bind_to_thread()
                .map_err(RuntimeError::driver("bind context"))?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: `raw` receives the handle; the id is the same in every process, and every
            // process joins with its process rank.
            unsafe {
                crate::cuda::nccl::lib::comm_init_rank(
                    &mut raw,
                    env.world_size as i32,
                    id,
                    env.rank as i32,
                )
            }
            .map_err(nccl_err("ncclCommInitRank (bridge)"))?;
            return Ok(World {
                env: env.clone(),
                nranks,
                ranks,
                comms: HashMap::new(),
                bridge: Some(Comm::from_raw(raw, env.rank, env.world_size, ordinals[0])),
            });
        }
        let mut raw = vec![std::ptr::null_mut(); ranks.len()];
        let grouped = ranks.len() > 1;
        if grouped {
            crate::cuda::nccl::lib::group_start().map_err(nccl_err("ncclGroupStart"))?;
        }
        let mut res = Ok(());
        for (i, r) in ranks.clone().enumerate() {
            // NCCL takes the rank's device from the current context.
            if let Err(e) = ctxs[i].bind_to_thread() {
                res = Err(RuntimeError::driver("bind context")(e));
                break;
            }
            // SAFETY: `raw[i]` receives the handle; the id is the same in every process.
            let r = unsafe {
                crate::cuda::nccl::lib::comm_init_rank(&mut raw[i], nranks as i32, id, r as i32)
            };
            if let Err(e) = r {
                res = Err(nccl_err("ncclCommInitRank")(e));
                break;
            }
        }
        if grouped {
            let end = crate::cuda::nccl::lib::group_end().map_err(nccl_err("ncclGroupEnd"));
            res = res.and(end.map(|_| ()));
        }
        res?;
        let comms = ranks
            .clone()
            .zip(raw)
            .zip(ctxs)
            .map(|((r, h), c)| (r, Comm::from_raw(h, r, nranks, c.ordinal())))
            .collect();
        Ok(World {
            env: env.clone(),
            nranks,
            ranks,
            comms,
            bridge: None,
        })
    }

    /// The plan ranks this process drives.
    pub fn local_ranks(&self) -> Range<usize> {
        self.ranks.clone()
    }

    /// The launcher's view of this process.
    pub fn env(&self) -> &LaunchEnv {
        &self.env
    }

    /// The world handle of local rank `r` (none in bridge mode).
    pub fn comm(&self, r: usize) -> Option<&Comm> {
        self.comms.get(&r)
    }

    /// The process's bridge handle, when its ranks share a GPU (NCCL rank = process rank).
    pub fn bridge(&self) -> Option<&Comm> {
        self.bridge.as_ref()
    }

    /// Splits the world per group (`ncclCommSplit`, color = the group's index, key = the
    /// member's position): every process must pass the same list (`placement::distinct_groups`
    /// of the same plan). Returns, per group, the handles of this process's members.
    ///
    /// In bridge mode only the groups with one member per process are split (from the bridge,
    /// key = the member's position); the others get no entry.
    pub fn split(
        &self,
        groups: &[Vec<usize>],
    ) -> Result<HashMap<Vec<usize>, HashMap<usize, Comm>>> {
        let progress = fault::progress();
        let _armed = progress.arm(
            Phase::Setup("ncclCommSplit: one communicator per collective group"),
            progress.setup_timeout(),
            "in ncclCommSplit (every process must take part)",
        );
        if let Some(bridge) = &self.bridge {
            return self.split_bridge(bridge, groups);
        }
        let mut out = HashMap::new();
        for (gi, g) in groups.iter().enumerate() {
            progress.beat();
            let local: Vec<usize> = self.ranks.clone().collect();
            // -1: NCCL_SPLIT_NOCOLOR (not a member of this group).
            let parents: Vec<(&Comm, i32, i32, usize)> = local
                .iter()
                .map(|r| {
                    let (color, key) = split_color_key(g, gi, *r).unwrap_or((-1, 0));
                    (&self.comms[r], color, key, g.len())
                })
                .collect();
            let handles = split_handles(&parents, "ncclCommSplit")?;
            let mut members = HashMap::new();
            for ((r, h), (_, color, _, _)) in local.iter().zip(handles).zip(&parents) {
                match h {
                    Some(h) => {
                        members.insert(*r, h);
                    }
                    None if *color >= 0 => {
                        return Err(RuntimeError::Unsupported(format!(
                            "ncclCommSplit gave rank {r} no communicator for group {g:?}"
                        )))
                    }
                    None => {}
                }
            }
            out.insert(g.clone(), members);
        }
        Ok(out)
    }

    /// Checks that every process runs the same thing: each contributes `digest` (of its plan,
    /// inputs' seed, ...: [`fnv1a`]) and gathers everyone's (`ncclAllGather` of 8 bytes over
    /// the world or the bridge, on `ctxs`, this process's ranks' contexts in rank order).
    /// Processes that disagree would pair their NCCL sends and receives wrongly: a hang, an
    /// error, or a silently wrong result; this turns that into an error before anything runs.
    ///
    /// # Errors
    /// A process whose digest differs from this one's (named with its ranks), NCCL and CUDA
    /// failures.
    pub fn agree(&self, ctxs: &[Arc<CudaContext>], digest: u64, what: &str) -> Result<()> {
        let all = self.all_gather_u64(ctxs, digest)?;
        let per_process = self.ranks.len().max(1);
        for (i, d) in all.iter().enumerate() {
            if *d != digest {
                let p = self.participant_process(i);
                let ranks = if self.bridge.is_some() {
                    p * per_process..(p + 1) * per_process
                } else {
                    i..i + 1
                };
                return Err(RuntimeError::Schedule(format!(
                    "process {p} (ranks {ranks:?}) runs a different {what} than process {} (digest {d:016x}, here {digest:016x}): every process must be started with the same operator, schedule and arguments",
                    self.env.rank
                )));
            }
        }
        Ok(())
    }

    /// The process of participant `i` of [`World::all_gather_u64`]: participant `i` itself in
    /// bridge mode (one per process), else the process of plan rank `i`.
    pub fn participant_process(&self, i: usize) -> usize {
        if self.bridge.is_some() {
            i
        } else {
            process_of(i, self.ranks.len())
        }
    }

    /// Every participant's `value`: one per process in bridge mode (in process order), else
    /// one per plan rank (every local rank contributes this process's value). `ctxs` are this
    /// process's ranks' contexts in rank order. Bounded by the setup limit when the fault
    /// watchdog runs.
    ///
    /// # Errors
    /// NCCL and CUDA failures.
    pub fn all_gather_u64(&self, ctxs: &[Arc<CudaContext>], value: u64) -> Result<Vec<u64>> {
        use cudarc::driver::{DevicePtr, DevicePtrMut};
        let progress = fault::progress();
        let _armed = progress.arm(
            Phase::Setup("every process exchanges 8 bytes (plan digest, placement)"),
            progress.setup_timeout(),
            "in ncclAllGather of 8 bytes per process (every process must take part)",
        );
        // (context, handle) per participant of this process: the bridge, or each local rank.
        let parts: Vec<(&Arc<CudaContext>, &Comm)> = match &self.bridge {
            Some(b) => vec![(&ctxs[0], b)],
            None => self
                .ranks
                .clone()
                .enumerate()
                .map(|(i, r)| (&ctxs[i], &self.comms[&r]))
                .collect(),
        };
        let n = parts[0].1.size;
        let drv = RuntimeError::driver;
        let mut bufs = Vec::with_capacity(parts.len());
        for (ctx, _) in &parts {
            let stream = ctx.new_stream().map_err(drv("create stream"))?;
            let send = stream.clone_htod(&[value]).map_err(drv("htod"))?;
            let recv = stream.alloc_zeros::<u64>(n).map_err(drv("alloc"))?;
            bufs.push((stream, send, recv));
        }
        crate::cuda::nccl::lib::group_start().map_err(nccl_err("ncclGroupStart"))?;
        let mut res = Ok(());
        for ((_, comm), (stream, send, recv)) in parts.iter().zip(bufs.iter_mut()) {
            let (ps, _gs) = send.device_ptr(stream);
            let (pr, _gr) = recv.device_ptr_mut(stream);
            // SAFETY: `ps` holds 8 bytes and `pr` 8 * n on the communicator's device; the
            // stream belongs to it; the buffers outlive the synchronisation below.
            let r = unsafe {
                crate::cuda::nccl::lib::ncclAllGather(
                    ps as *const _,
                    pr as *mut _,
                    8,
                    ns::ncclDataType_t::ncclUint8,
                    comm.raw(),
                    stream.cu_stream() as ns::cudaStream_t,
                )
            };
            if let Err(e) = r.result() {
                res = Err(nccl_err("ncclAllGather")(e));
                break;
            }
        }
        let end = crate::cuda::nccl::lib::group_end().map_err(nccl_err("ncclGroupEnd"));
        res.and(end.map(|_| ()))?;
        let (stream, _, recv) = &bufs[0];
        stream.clone_dtoh(recv).map_err(drv("dtoh"))
    }

    /// Bridge mode of [`World::split`]: every process walks `groups` in the same order and
    /// decides the same (from the plan alone), so the collective splits match.
    fn split_bridge(
        &self,
        bridge: &Comm,
        groups: &[Vec<usize>],
    ) -> Result<HashMap<Vec<usize>, HashMap<usize, Comm>>> {
        let per_process = self.ranks.len();
        let mut out = HashMap::new();
        for (gi, g) in groups.iter().enumerate() {
            if group_span(g, per_process) != GroupSpan::OnePerProcess {
                continue;
            }
            fault::progress().beat();
            // At most one member here (one per process); -1: NCCL_SPLIT_NOCOLOR.
            let member = g.iter().position(|r| self.ranks.contains(r));
            let (color, key) = member
                .and_then(|p| split_color_key(g, gi, g[p]))
                .unwrap_or((-1, 0));
            let handle = split_handles(&[(bridge, color, key, g.len())], "ncclCommSplit (bridge)")?
                .pop()
                .flatten();
            if let Some(p) = member {
                let handle = handle.ok_or_else(|| {
                    RuntimeError::Unsupported(format!(
                        "ncclCommSplit gave rank {} no communicator for group {g:?}",
                        g[p]
                    ))
                })?;
                out.insert(g.clone(), HashMap::from([(g[p], handle)]));
            }
        }
        Ok(out)
    }

    /// A second world over the same processes and ranks, with handles of its own
    /// (`ncclCommSplit` of every handle with one color, key = its rank: NCCL's way to duplicate
    /// a communicator). An executor takes a duplicate ([`TransportChoice::NcclWorld`] consumes
    /// its world), so one process can run several plans in turn and keep this world for
    /// [`World::agree`] and [`World::all_gather_u64`] between them. Every process must call it
    /// at the same point (a collective); bounded by the setup limit when the fault watchdog
    /// runs.
    ///
    /// [`TransportChoice::NcclWorld`]: crate::cuda::TransportChoice::NcclWorld
    ///
    /// # Errors
    /// NCCL failures.
    pub fn duplicate(&self) -> Result<World> {
        let progress = fault::progress();
        let _armed = progress.arm(
            Phase::Setup("ncclCommSplit: a fresh world communicator for the next plan"),
            progress.setup_timeout(),
            "in ncclCommSplit of the world (every process must take part)",
        );
        // The handles of this process.
        let parents: Vec<&Comm> = match &self.bridge {
            Some(b) => vec![b],
            None => self.ranks.clone().map(|r| &self.comms[&r]).collect(),
        };
        // Every handle splits with color 0, key = its rank: the same communicator again.
        let split: Vec<(&Comm, i32, i32, usize)> = parents
            .iter()
            .map(|p| (*p, 0, p.rank as i32, p.size))
            .collect();
        let handles = split_handles(&split, "ncclCommSplit (duplicate)")?;
        let handles: Vec<Comm> = handles.into_iter().flatten().collect();
        if handles.len() != parents.len() {
            return Err(RuntimeError::Unsupported(
                "ncclCommSplit gave no handle for a duplicate of the world".into(),
            ));
        }
        let mut handles = handles.into_iter();
        Ok(match &self.bridge {
            Some(_) => World {
                env: self.env.clone(),
                nranks: self.nranks,
                ranks: self.ranks.clone(),
                comms: HashMap::new(),
                bridge: handles.next(),
            },
            None => World {
                env: self.env.clone(),
                nranks: self.nranks,
                ranks: self.ranks.clone(),
                comms: self.ranks.clone().zip(handles).collect(),
                bridge: None,
            },
        })
    }

    /// The handles and the ranks per process (the transport keeps the handles for messages).
    pub fn into_parts(self) -> WorldParts {
        WorldParts {
            per_rank: self.comms,
            bridge: self.bridge,
            per_process: self.ranks.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> std::result::Result<Option<LaunchEnv>, String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        LaunchEnv::from_lookup(&|k| m.get(k).cloned())
    }

    #[test]
    fn torchrun_style_environment() {
        assert_eq!(env(&[]).unwrap(), None);
        let e = env(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "3"),
            ("MASTER_ADDR", "10.0.0.1"),
            ("MASTER_PORT", "29500"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((e.rank, e.world_size, e.local_rank), (3, 8, 3));
        assert_eq!(
            e.id,
            IdSource::CommId {
                addr: "10.0.0.1:29501".into(),
                set: true
            }
        );
        // The id file wins over NCCL_COMM_ID, which wins over MASTER_ADDR.
        let e = env(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MERCURY_NCCL_ID_FILE", "/shared/job7.id"),
            ("NCCL_COMM_ID", "h:1"),
            ("MASTER_ADDR", "x"),
            ("MASTER_PORT", "1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(e.id, IdSource::File("/shared/job7.id".into()));
        assert_eq!(e.local_rank, 0);
        let e = env(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("NCCL_COMM_ID", "h:1")])
            .unwrap()
            .unwrap();
        assert_eq!(
            e.id,
            IdSource::CommId {
                addr: "h:1".into(),
                set: false
            }
        );
        // MPI and Slurm names.
        let e = env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("NCCL_COMM_ID", "h:1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((e.rank, e.world_size, e.local_rank), (1, 4, 1));
        // A single process needs no exchange.
        assert!(env(&[("RANK", "0"), ("WORLD_SIZE", "1")])
            .unwrap()
            .is_some());
    }

    #[test]
    fn bad_environments() {
        assert!(env(&[("RANK", "0")]).unwrap_err().contains("WORLD_SIZE"));
        assert!(env(&[("WORLD_SIZE", "2")]).unwrap_err().contains("RANK"));
        assert!(
            env(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("NCCL_COMM_ID", "h:1")])
                .unwrap_err()
                .contains("outside")
        );
        assert!(env(&[("RANK", "x"), ("WORLD_SIZE", "2")]).is_err());
        assert!(env(&[("RANK", "0"), ("WORLD_SIZE", "2")])
            .unwrap_err()
            .contains("unique id"));
    }

    #[test]
    fn id_roundtrip() {
        let mut id = [0 as std::ffi::c_char; 128];
        for (i, b) in id.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37) as std::ffi::c_char;
        }
        let hex = id_to_hex(&id);
        assert_eq!(hex.len(), 256);
        assert_eq!(id_from_hex(&format!("{hex}\n")).unwrap(), id);
        assert!(id_from_hex("abc").is_err());
        assert!(id_from_hex(&"zz".repeat(128)).is_err());
        // Through a file, as processes exchange it.
        let dir = std::env::temp_dir().join(format!("mercury-id-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("id");
        write_id_file(&p, &hex).unwrap();
        assert_eq!(read_id_file(&p, Duration::from_secs(1)).unwrap(), id);
        let missing = read_id_file(&dir.join("none"), Duration::from_millis(100));
        assert!(matches!(missing, Err(RuntimeError::Timeout { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
