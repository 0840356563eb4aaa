//! `--launcher env`: this process drives its block of the plan's ranks; NCCL joins the
//! processes (docs/multi-gpu.md). A [`Session`] joins the world once and then runs plans in
//! turn, every process the same plans in the same order: `mercury-run --launcher env` runs one,
//! `mercury-tune --profile-top K --launcher env` the model's K best candidates.
//!
//! Every process must reach the same collective calls in the same order, or the others wait
//! (bounded by the fault watchdog). So each plan's run has three points where the processes
//! agree, and failures local to one process are turned into the same decision in all of them:
//! 1. after the local preparation (rank count, fault spec, device kernels): if any process
//!    could not prepare the plan, every process refuses it ([`Verdict::Refused`]); then the
//!    plans, seeds and run counts must be equal (`World::agree`), else an error;
//! 2. after building the executor, whose communicator splits come first, after checks that
//!    are the same in every process (`CudaExecutor::build`): a process that could not build it
//!    (a refused collective, no memory) makes every process refuse the plan;
//! 3. after the run and the check against the single-device plan: every process learns the
//!    slowest process's time and which processes' checks failed ([`Outcome`]); a reference
//!    that could not run fails this process's check.
//!
//! Between the run and the executor's teardown the processes wait for each other, so no
//! process aborts its communicators while NCCL still carries a peer's data. What fails
//! between the points (a communicator split, a stage) is an error that ends this process; the
//! others end through NCCL's remote error or the watchdog.

use crate::args::Args;
use crate::gpu::{
    cudarc_device_count, device_kernels, exec_options, execute, rt, schedule_options,
};
use crate::{check, Failure};
use mercury_plan::{Plan, Role};
use mercury_runtime::cuda::fault::{self, Who};
use mercury_runtime::cuda::launcher::{self, LaunchEnv, World};
use mercury_runtime::cuda::{nccl, placement};
use mercury_runtime::cuda::{CudaExecutor, DeviceMap, Placement, TransportChoice};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

/// What a process contributes to a gather when it has nothing to give (it could not prepare
/// the plan, or its check failed). No digest the run compares and no time (the bits of a
/// positive finite f64) equals it.
const NOTHING: u64 = u64::MAX;

/// This process's part of a launched run: its ranks, their GPUs and the world communicator.
pub struct Session {
    env: LaunchEnv,
    n: usize,
    owned: Range<usize>,
    devs: Vec<usize>,
    ctxs: Vec<Arc<mercury_kernels::cuda::CudaContext>>,
    world: World,
    /// `[process R/W]`, the prefix of this process's lines.
    pub tag: String,
    cc: (i32, i32),
}

/// One plan's run, the same in every process (gathered at the third agreement point).
#[derive(Debug, Clone)]
pub struct Outcome {
    /// This process's median time of one run of the plan, milliseconds.
    pub median_ms: f64,
    /// The slowest process's median, milliseconds (`NaN` when a check failed somewhere).
    pub slowest_ms: f64,
    /// The single-device reference's median on this process's first GPU, milliseconds.
    pub reference_ms: Option<f64>,
    /// Processes whose check failed (empty: every process's check passed or none ran).
    pub failed_processes: Vec<usize>,
    /// The outputs that failed the check in this process.
    pub failed_here: Vec<String>,
    /// Wall time of this process's part (preparation, run, reference, check), seconds.
    pub wall_s: f64,
}

/// A plan run in every process, or refused in every process.
#[derive(Debug, Clone)]
pub enum Verdict {
    Ran(Outcome),
    /// Some process could not prepare the plan (why: this process's reason, or which process).
    Refused(String),
}

impl Session {
    /// Joins the world of `n` plan ranks started by the launcher (`RANK`, `WORLD_SIZE`,
    /// `LOCAL_RANK`, an NCCL id source): opens this process's GPUs (with `--virtual` every rank
    /// on GPU `LOCAL_RANK % visible`, else one GPU per rank from `LOCAL_RANK * ranks`) and
    /// initialises NCCL. Lines go to `say`.
    ///
    /// # Errors
    /// `Failure::Input` for a missing launcher environment, a rank count the processes do not
    /// divide or a GPU out of range; `Failure::NoDevice` without a usable GPU; NCCL failures.
    pub fn start(a: &Args, n: usize, say: &mut dyn FnMut(String)) -> Result<Session, Failure> {
        for note in nccl::prepare_env() {
            say(format!("nccl: {note}"));
        }
        let env = LaunchEnv::from_env()
            .map_err(|e| Failure::Input(format!("--launcher env: {e}")))?
            .ok_or_else(|| {
                Failure::Input("--launcher env: RANK and WORLD_SIZE are not set (start it with torchrun, srun or mpirun; docs/multi-gpu.md)".into())
            })?;
        let owned = placement::owned_ranks(n, env.world_size, env.rank).map_err(Failure::Input)?;
        let visible = cudarc_device_count()?;
        // --virtual: every rank of this process on one GPU (the processes meet through a
        // bridge communicator, launcher module docs).
        let devs = if a.virtual_ranks {
            vec![env.local_rank % visible; owned.len()]
        } else {
            placement::local_devices(env.local_rank, owned.len(), 0)
        };
        if let Some(d) = devs.iter().find(|d| **d >= visible) {
            return Err(Failure::Input(format!(
                "process {} (LOCAL_RANK {}) would drive GPU {d}, but {visible} are visible",
                env.rank, env.local_rank
            )));
        }
        let mut ctxs = Vec::with_capacity(devs.len());
        for d in &devs {
            ctxs.push(
                mercury_kernels::cuda::open_context(*d)
                    .map_err(|e| Failure::NoDevice(format!("GPU {d}: {e}")))?,
            );
        }
        let tag = format!("[process {}/{}]", env.rank, env.world_size);
        let cc = ctxs[0].compute_capability().map_err(rt)?;
        say(format!(
            "{tag} gpu: {} (sm_{}{}), ranks {owned:?} of {n} on GPUs {devs:?}, seed {}, pid {}",
            ctxs[0].name().unwrap_or_else(|_| "?".into()),
            cc.0,
            cc.1,
            a.seed(),
            std::process::id()
        ));
        // Who this process is, for a report of the watchdog during the NCCL setup.
        fault::progress().set_context(
            Arc::new(Who {
                ranks: owned.clone().collect(),
                gpus: devs.clone(),
                pid: std::process::id(),
            }),
            0,
            Arc::new(Vec::new()),
        );
        let world = World::init(&env, n, &ctxs).map_err(rt)?;
        Ok(Session {
            env,
            n,
            owned,
            devs,
            ctxs,
            world,
            tag,
            cc,
        })
    }

    /// This process's rank among the processes.
    pub fn process(&self) -> usize {
        self.env.rank
    }

    /// The number of processes.
    pub fn processes(&self) -> usize {
        self.env.world_size
    }

    /// The distinct GPUs this process drives.
    pub fn gpus_here(&self) -> usize {
        let mut d = self.devs.clone();
        d.sort_unstable();
        d.dedup();
        d.len()
    }

    /// Runs `plan` (of the session's rank count) in every process: this process's ranks on
    /// its GPUs, checked against `reference` (the single-device plan) on the output pieces its
    /// ranks write (`--check`), timed with `--warmup`/`--iters` (`--bench`). Every process must
    /// call it with the same plan, in the same order (module docs: the three agreement points).
    /// Lines go to `say`.
    ///
    /// # Errors
    /// Processes that run different plans, seeds or run counts; failures of NCCL, the
    /// executor or a stage (a fault report ends the process at once).
    pub fn run_plan(
        &self,
        a: &Args,
        plan: &Plan,
        reference: &Plan,
        say: &mut dyn FnMut(String),
    ) -> Result<Verdict, Failure> {
        let t0 = std::time::Instant::now();
        let tag = &self.tag;
        let (warmup, iters) = if a.bench { (a.warmup, a.iters) } else { (0, 1) };
        let seed = a.seed();
        // 1. Local preparation, then the first agreement point.
        let prepared = if plan.num_ranks() != self.n {
            Err(Failure::Input(format!(
                "the plan has {} ranks, the processes' world {}",
                plan.num_ranks(),
                self.n
            )))
        } else {
            schedule_options(a, plan)
                .and_then(|o| Ok((o, device_kernels(a, self.cc, &[plan, reference])?)))
        };
        let (sched_opts, ptx) = match self.everyone_ok(prepared)? {
            Ok(x) => x,
            Err(why) => return Ok(Verdict::Refused(why)),
        };
        // Processes started with different operators, schedules, seeds or run counts would
        // pair their NCCL calls wrongly: refuse before anything runs.
        let digest =
            launcher::fnv1a(format!("{}\n{seed}\n{warmup} {iters}", plan.to_json()).as_bytes());
        self.world
            .agree(&self.ctxs, digest, "plan, --seed or run count")
            .map_err(rt)?;
        let inputs = mercury_runtime::cuda::HostBuffer::random_inputs(plan, seed);
        // The same document boundaries in every process (drawn from the agreed seed).
        let docs = mercury_runtime::cpu::documents(
            plan,
            &mercury_runtime::cpu::random_documents(plan, seed),
        )
        .map_err(rt)?;
        let owned = &self.owned;
        let map = DeviceMap::from_ordinals(
            (0..self.n)
                .map(|r| {
                    if owned.contains(&r) {
                        self.devs[r - owned.start]
                    } else {
                        0
                    }
                })
                .collect(),
        );
        // 2. The executor takes a world of its own; this one stays for the agreements. Its
        // communicator splits come first in its build, after checks that are the same in every
        // process (`CudaExecutor::build`), so every process gets here and agrees whether all
        // could build it: a refusal (e.g. a reduction over ranks of several processes) drops
        // the plan everywhere.
        let world = self.world.duplicate().map_err(rt)?;
        let built = CudaExecutor::new_placed(
            plan.clone(),
            &ptx,
            sched_opts,
            Placement::new(map, TransportChoice::NcclWorld(world)),
        )
        .map_err(rt);
        let mut exec = match self.everyone_ok(built)? {
            Ok(e) => e,
            Err(why) => return Ok(Verdict::Refused(why)),
        };
        say(format!("{tag} transport: {}", exec.transport_name()));
        let got = execute(&mut exec, plan, &inputs, &docs, warmup, iters)?;
        // Every process's runs are over before any aborts its communicators (an abort does
        // not wait for what NCCL's proxy still sends to a peer).
        self.world.all_gather_u64(&self.ctxs, 0).map_err(rt)?;
        drop(exec);
        // 3. The reference and the check (local), then the third agreement point.
        let local: Vec<usize> = owned.clone().collect();
        let masks: HashMap<String, Vec<bool>> = plan
            .buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.role == Role::Output)
            .map(|(i, b)| (b.name.clone(), placement::output_mask(plan, i, &local)))
            .collect();
        let mut failed_here: Vec<String> = Vec::new();
        let mut reference_ms = None;
        // The reference is local: its failure fails this process's check (the third
        // agreement point then drops the plan everywhere); it does not end the process.
        let want = if a.check || a.bench {
            let r = CudaExecutor::new(
                self.ctxs[0].clone(),
                reference.clone(),
                &ptx,
                exec_options(a),
            )
            .map_err(rt)
            .and_then(|mut rexec| execute(&mut rexec, reference, &inputs, &docs, warmup, iters));
            match r {
                Ok(w) => Some(w),
                Err(f) => {
                    say(format!(
                        "{tag} error: the single-device reference failed: {}",
                        f.message()
                    ));
                    failed_here.push("the single-device reference".into());
                    None
                }
            }
        } else {
            None
        };
        if let Some(want) = want {
            reference_ms = Some(want.median_ms);
            if a.check {
                let tol = a.tolerance.unwrap_or(2e-2);
                for c in check::compare(&got.outputs, &want.outputs, Some(&masks)) {
                    let ok = c.within(tol);
                    say(format!(
                        "{tag} check @{} (this process's {} elements) vs single-device (GPU): {}{}{}",
                        c.name,
                        c.elements,
                        c.describe(tol),
                        if c.nonfinite > 0 { format!(", {} non-finite", c.nonfinite) } else { String::new() },
                        if ok { "  ok" } else { "  FAILED" }
                    ));
                    if !ok {
                        failed_here.push(c.name);
                    }
                }
            }
        }
        let mine = if failed_here.is_empty() {
            got.median_ms.to_bits()
        } else {
            NOTHING
        };
        let all = self.world.all_gather_u64(&self.ctxs, mine).map_err(rt)?;
        let mut failed_processes: Vec<usize> = all
            .iter()
            .enumerate()
            .filter(|(_, v)| **v == NOTHING)
            .map(|(i, _)| self.world.participant_process(i))
            .collect();
        failed_processes.dedup();
        let slowest_ms = if failed_processes.is_empty() {
            all.iter().map(|v| f64::from_bits(*v)).fold(0.0, f64::max)
        } else {
            f64::NAN
        };
        if a.bench {
            say(format!(
                "{tag} | schedule, {} ranks (this process) | {:.3} ms | single-device | {:.3} ms |",
                self.n,
                got.median_ms,
                reference_ms.unwrap_or(f64::NAN)
            ));
        }
        Ok(Verdict::Ran(Outcome {
            median_ms: got.median_ms,
            slowest_ms,
            reference_ms,
            failed_processes,
            failed_here,
            wall_s: t0.elapsed().as_secs_f64(),
        }))
    }

    /// An agreement point: every process says whether its step (`mine`) succeeded. `Ok(Ok)`
    /// when all did; `Ok(Err(why))` when any did not (this process's own reason, or which
    /// process failed): the same decision in every process.
    ///
    /// # Errors
    /// NCCL failures of the gather.
    fn everyone_ok<T>(&self, mine: Result<T, Failure>) -> Result<Result<T, String>, Failure> {
        let all = self
            .world
            .all_gather_u64(&self.ctxs, if mine.is_ok() { 0 } else { NOTHING })
            .map_err(rt)?;
        Ok(match mine {
            Err(f) => Err(f.message().to_string()),
            Ok(_) if all.contains(&NOTHING) => {
                let p = all
                    .iter()
                    .position(|v| *v == NOTHING)
                    .map_or(0, |i| self.world.participant_process(i));
                Err(format!(
                    "process {p} could not prepare or build the plan (its output says why)"
                ))
            }
            Ok(x) => Ok(x),
        })
    }
}

/// `mercury-run --backend cuda --launcher env`: one plan through a [`Session`], lines printed;
/// a check that failed in any process fails every process.
pub fn run_launched(a: &Args, reference: Plan, plan: Plan) -> Result<Option<f64>, Failure> {
    let mut say = |l: String| outln!("{l}");
    let session = Session::start(a, plan.num_ranks(), &mut say)?;
    let tag = session.tag.clone();
    match session.run_plan(a, &plan, &reference, &mut say)? {
        Verdict::Refused(why) => Err(Failure::Input(format!("{tag} the plan was not run: {why}"))),
        Verdict::Ran(o) if !o.failed_here.is_empty() => Err(Failure::Check(format!(
            "{tag} check failed for {}",
            o.failed_here.join(", ")
        ))),
        Verdict::Ran(o) if !o.failed_processes.is_empty() => Err(Failure::Check(format!(
            "{tag} the check failed in process(es) {:?} (their output says which outputs)",
            o.failed_processes
        ))),
        // The run's time is the slowest process's; process 0 alone holds it against a
        // schedule cache entry (one writer of a file the processes may share).
        Verdict::Ran(o) if a.bench && session.process() == 0 => Ok(Some(o.slowest_ms * 1e-3)),
        Verdict::Ran(_) => {
            if a.cache_file.is_some() {
                say(format!(
                    "{tag} cache: process 0 holds the slowest process's time against the entry"
                ));
            }
            Ok(None)
        }
    }
}
