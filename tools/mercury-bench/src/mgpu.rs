//! Multi-device self-checks: the P0 executor self-checks (`bench::selfcheck_*`: every
//! collective, strided views, casts, Send/Recv, GEMMs, a 4-rank ring) run through
//! [`CudaExecutor::new_placed`] under a device map, with the copy/peer or the NCCL transport,
//! plus NCCL checks that one GPU can run (library version, one-rank communicators, a launcher
//! world of one process). Used by the GPU tests below (which skip without a driver) and by
//! the `mercury-mgpu selfcheck` tool on machines with several GPUs.
//!
//! On one GPU the placed paths run in two ways: every rank on device 0 (the degenerate map:
//! virtual ranks through the placed constructor), and device ids that alias GPU 0 (rank r on
//! id r % k, every id on GPU 0), which sends every copy between ids through the peer-copy
//! code (`cuMemcpyPeerAsync` / `cuMemcpy3DPeerAsync` within one context) and the pull-mode
//! collectives. NCCL across ranks needs one GPU per rank and could not run here.

use crate::bench::{buffer, fullv as full, slot, view};
use crate::bench::{
    selfcheck_all_to_all, selfcheck_allgather, selfcheck_allreduce, selfcheck_allreduce_lse,
    selfcheck_broadcast, selfcheck_gemm, selfcheck_gemm_accumulate, selfcheck_reduce,
    selfcheck_reduce_scatter, selfcheck_ring, selfcheck_sendrecv, SelfCheck,
};
use mercury_kernels::cuda::check::compare;
use mercury_plan::{
    Collective, CombineKind, CommOp, DType, OutputPiece, Plan, RankProgram, Region, Role, SlotInit,
    Stage,
};
use mercury_runtime::cuda::error::{Result, RuntimeError};
use mercury_runtime::cuda::executor::{
    CudaExecutor, ExecOptions, HostData, Placement, TransportChoice,
};
use mercury_runtime::cuda::launcher::{IdSource, LaunchEnv, World};
use mercury_runtime::cuda::nccl::{self, Comm};
use mercury_runtime::cuda::placement::DeviceMap;
use mercury_runtime::cuda::schedule::StageSync;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Which transport a placed check uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Copies and copy-engine peer copies.
    Peer,
    /// NCCL (groups sharing a GPU fall back to copies).
    Nccl,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Peer => "peer",
            Mode::Nccl => "nccl",
        }
    }
}

/// One line of a self-check report.
#[derive(Debug, Clone)]
pub struct CheckRow {
    pub id: String,
    pub pass: bool,
    pub detail: String,
}

/// The P0 self-check cases (as `mercury-gpu-bench` runs them).
pub fn p0_cases() -> Vec<(&'static str, SelfCheck)> {
    vec![
        ("allgather_cols", selfcheck_allgather()),
        ("allreduce_add_f32", selfcheck_allreduce(DType::F32)),
        ("allreduce_add_bf16", selfcheck_allreduce(DType::BF16)),
        ("reduce_scatter", selfcheck_reduce_scatter()),
        ("reduce_f32", selfcheck_reduce(DType::F32)),
        ("reduce_bf16", selfcheck_reduce(DType::BF16)),
        ("all_to_all", selfcheck_all_to_all()),
        ("broadcast", selfcheck_broadcast()),
        ("allreduce_lse", selfcheck_allreduce_lse()),
        ("sendrecv_strided_copy_add", selfcheck_sendrecv()),
        ("gemm_plan", selfcheck_gemm()),
        ("gemm_accumulate_beta1", selfcheck_gemm_accumulate()),
        ("ring4_acc_attn_causal", selfcheck_ring(true)),
        ("ring4_acc_attn_noncausal", selfcheck_ring(false)),
    ]
}

/// Random inputs for `plan` (uploaded), and the values the device holds after rounding.
fn upload_random(ex: &mut CudaExecutor, plan: &Plan, seed: u64) -> Result<Vec<Vec<f64>>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut inputs = Vec::new();
    for (i, b) in plan.buffers.iter().enumerate() {
        if b.role == Role::Input {
            let n: usize = b.shape.iter().product();
            let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
            ex.upload_input_f64(i, &v)?;
            inputs.push(HostData::from_f64(&v, b.dtype).to_f64(b.dtype));
        } else {
            inputs.push(Vec::new());
        }
    }
    Ok(inputs)
}

/// Runs one self-check case through the placed executor; returns a report line.
pub fn run_placed(
    id: &str,
    case: &SelfCheck,
    ptx: &str,
    placement: Placement,
    sync: StageSync,
    seed: u64,
) -> CheckRow {
    let r = (|| -> Result<(f64, usize, bool, String)> {
        let mut ex = CudaExecutor::new_placed(
            case.plan.clone(),
            ptx,
            ExecOptions {
                sync,
                ..ExecOptions::default()
            },
            placement,
        )?;
        let inputs = upload_random(&mut ex, &case.plan, seed)?;
        ex.run()?;
        // A second run on the same executor (reused slots, scratch, communicators).
        ex.run()?;
        let got = ex.download_f64(case.output)?;
        let want = (case.expect)(&inputs);
        let e = compare(&got, &want);
        let nan = got.iter().filter(|x| x.is_nan()).count();
        Ok((
            e.rel,
            nan,
            e.ok(case.tol) && nan == 0,
            ex.transport_name().to_string(),
        ))
    })();
    match r {
        Ok((rel, nan, ok, transport)) => CheckRow {
            id: id.to_string(),
            pass: ok,
            detail: format!(
                "rel {rel:.2e}{} [{transport}]",
                if nan > 0 {
                    format!(", {nan} NaN")
                } else {
                    String::new()
                }
            ),
        },
        Err(e) => CheckRow {
            id: id.to_string(),
            pass: false,
            detail: format!("ERROR: {e}"),
        },
    }
}

/// The P0 cases with rank `r` on device id `r % ids`, device id `i` on GPU `physical[i]`
/// (`None`: id = GPU), under both stage orderings.
pub fn placed_selfchecks(
    ptx: &str,
    ids: usize,
    physical: Option<Vec<usize>>,
    mode: Mode,
    seed: u64,
) -> Vec<CheckRow> {
    let mut rows = Vec::new();
    let tag = match &physical {
        Some(p) => format!("{}ids-on-gpus{:?}", ids, p),
        None => format!("{ids}gpus"),
    };
    for (k, (name, case)) in p0_cases().into_iter().enumerate() {
        for sync in [StageSync::Peers, StageSync::Barrier] {
            let n = case.plan.ranks.len();
            let map = match DeviceMap::round_robin(n, ids) {
                Ok(m) => m,
                Err(e) => {
                    rows.push(CheckRow {
                        id: name.into(),
                        pass: false,
                        detail: e,
                    });
                    continue;
                }
            };
            let placement = Placement {
                devices: map,
                transport: match mode {
                    Mode::Peer => TransportChoice::Copy,
                    Mode::Nccl => TransportChoice::Nccl,
                },
                physical: physical.clone(),
            };
            let id = format!(
                "{}.{}.{}.{}",
                mode.name(),
                tag,
                name,
                if sync == StageSync::Peers {
                    "peers"
                } else {
                    "barrier"
                }
            );
            rows.push(run_placed(
                &id,
                &case,
                ptx,
                placement,
                sync,
                seed.wrapping_add(k as u64 * 7919),
            ));
        }
    }
    rows
}

fn global(buffer: usize, shape: &[usize]) -> SlotInit {
    SlotInit::FromGlobal {
        buffer,
        region: Region::full(shape),
    }
}

/// Output buffers of [`nccl_single_rank_plan`] and, for each, the expected values from the
/// rounded inputs `[x, xb, lse_in]`.
pub struct SingleRankCase {
    pub plan: Plan,
    /// (output buffer index, expected values).
    pub expect: Box<dyn Fn(&[Vec<f64>]) -> Vec<(usize, Vec<f64>)>>,
}

/// One rank, every collective over the group `[0]` (identities with one member), with
/// strided sources and destinations, a bf16 all-reduce (in bf16), the lse all-reduce and two
/// reduces (f32 from a strided source, bf16 into bf16):
/// exercises the NCCL transport's packing, group calls and unpacking on one GPU. Every
/// expected output is exact.
pub fn nccl_single_rank_plan() -> SingleRankCase {
    let s86 = [8usize, 6];
    let buffers = vec![
        buffer("x", DType::F32, &s86, Role::Input),
        buffer("xb", DType::BF16, &s86, Role::Input),
        buffer("lse_in", DType::F32, &[4], Role::Input),
    ];
    let outs: Vec<(&str, DType, Vec<usize>)> = vec![
        ("y_ar", DType::F32, vec![8, 6]),
        ("y_arb", DType::BF16, vec![8, 6]),
        ("y_ag", DType::F32, vec![8, 12]),
        ("y_rs", DType::F32, vec![4, 4]),
        ("y_a2a", DType::F32, vec![8, 8]),
        ("y_bc", DType::F32, vec![8, 6]),
        ("y_o", DType::F32, vec![4, 6]),
        ("y_lse", DType::F32, vec![4]),
        ("y_red", DType::F32, vec![4, 4]),
        ("y_redb", DType::BF16, vec![8, 6]),
    ];
    let mut buffers = buffers;
    for (n, d, s) in &outs {
        buffers.push(buffer(n, *d, s, Role::Output));
    }
    let slots = vec![
        slot("a", DType::F32, &s86, global(0, &s86)),
        slot("b", DType::BF16, &s86, global(1, &s86)),
        slot("s", DType::F32, &s86, global(0, &s86)),
        slot("g", DType::F32, &[8, 12], SlotInit::Zero),
        slot("r", DType::F32, &s86, global(0, &s86)),
        slot("rd", DType::F32, &[4, 4], SlotInit::Uninit),
        slot("t", DType::F32, &s86, global(0, &s86)),
        slot("td", DType::F32, &[8, 8], SlotInit::Zero),
        slot("c", DType::F32, &s86, global(0, &s86)),
        slot(
            "o",
            DType::F32,
            &[4, 6],
            SlotInit::FromGlobal {
                buffer: 0,
                region: Region {
                    offset: vec![0, 0],
                    extent: vec![4, 6],
                },
            },
        ),
        slot("l", DType::F32, &[4], global(2, &[4])),
        slot("u", DType::F32, &s86, global(0, &s86)),
        slot("ud", DType::F32, &[4, 4], SlotInit::Uninit),
        slot("ub", DType::BF16, &s86, global(1, &s86)),
        slot("ubd", DType::BF16, &s86, SlotInit::Uninit),
    ];
    let g = vec![0usize];
    let coll = |c: Collective| CommOp::Collective {
        group: g.clone(),
        collective: c,
    };
    let comm = vec![
        coll(Collective::AllReduce {
            bufs: vec![view(0, &[2, 1], &[4, 4])],
            kind: CombineKind::Add,
        }),
        coll(Collective::AllReduce {
            bufs: vec![full(1, &s86)],
            kind: CombineKind::Add,
        }),
        coll(Collective::AllGather {
            src: full(2, &s86),
            dst: view(3, &[0, 3], &[8, 6]),
            axis: 1,
        }),
        coll(Collective::ReduceScatter {
            src: view(4, &[4, 1], &[4, 4]),
            dst: full(5, &[4, 4]),
            axis: 0,
            kind: CombineKind::Add,
        }),
        coll(Collective::AllToAll {
            src: full(6, &s86),
            dst: view(7, &[0, 1], &[8, 6]),
            split_axis: 0,
            concat_axis: 1,
        }),
        coll(Collective::Broadcast {
            buf: full(8, &s86),
            root: 0,
        }),
        coll(Collective::AllReduce {
            bufs: vec![full(9, &[4, 6]), full(10, &[4])],
            kind: CombineKind::LseMerge,
        }),
        // A reduce to the one member from a strided source (packed), and one of bf16 into
        // bf16 (an `ncclBfloat16` reduce straight from the slot).
        coll(Collective::Reduce {
            src: view(11, &[2, 1], &[4, 4]),
            dst: Some(full(12, &[4, 4])),
            root: 0,
            kind: CombineKind::Add,
        }),
        coll(Collective::Reduce {
            src: full(13, &s86),
            dst: Some(full(14, &s86)),
            root: 0,
            kind: CombineKind::Add,
        }),
    ];
    let src_of = [0usize, 1, 3, 5, 7, 8, 9, 10, 12, 14];
    let outputs = outs
        .iter()
        .enumerate()
        .map(|(i, (_, _, s))| OutputPiece {
            buffer: 3 + i,
            region: Region::full(s),
            src: full(src_of[i], s),
        })
        .collect();
    let plan = Plan {
        name: "nccl_single_rank".into(),
        mesh: vec![1],
        buffers,
        documents: vec![],
        ranks: vec![RankProgram {
            rank: 0,
            coords: vec![0],
            slots,
            stages: vec![Stage {
                compute: vec![],
                comm,
            }],
            outputs,
        }],
    };
    let expect = Box::new(|inp: &[Vec<f64>]| {
        let x = &inp[0];
        let xb = &inp[1];
        let l = &inp[2];
        let at = |r: usize, c: usize| x[r * 6 + c];
        let mut ag = vec![0.0; 8 * 12];
        let mut a2a = vec![0.0; 8 * 8];
        for r in 0..8 {
            for c in 0..6 {
                ag[r * 12 + 3 + c] = at(r, c);
                a2a[r * 8 + 1 + c] = at(r, c);
            }
        }
        let rs: Vec<f64> = (4..8)
            .flat_map(|r| (1..5).map(move |c| (r, c)))
            .map(|(r, c)| at(r, c))
            .collect();
        let red: Vec<f64> = (2..6)
            .flat_map(|r| (1..5).map(move |c| (r, c)))
            .map(|(r, c)| at(r, c))
            .collect();
        vec![
            (3, x.clone()),
            (4, xb.clone()),
            (5, ag),
            (6, rs),
            (7, a2a),
            (8, x.clone()),
            (9, x[..24].to_vec()),
            (10, l.clone()),
            (11, red),
            (12, xb.clone()),
        ]
    });
    SingleRankCase { plan, expect }
}

fn run_single_rank(id: &str, ptx: &str, placement: Placement, seed: u64) -> CheckRow {
    let case = nccl_single_rank_plan();
    let outputs = case
        .plan
        .buffers
        .iter()
        .filter(|b| b.role == Role::Output)
        .count();
    let r = (|| -> Result<(String, bool, String)> {
        let mut ex =
            CudaExecutor::new_placed(case.plan.clone(), ptx, ExecOptions::default(), placement)?;
        let inputs = upload_random(&mut ex, &case.plan, seed)?;
        ex.run()?;
        ex.run()?;
        let mut ok = true;
        let mut notes = Vec::new();
        for (b, want) in (case.expect)(&inputs) {
            let got = ex.download_f64(b)?;
            let exact = got.len() == want.len()
                && got
                    .iter()
                    .zip(&want)
                    .all(|(g, w)| g.to_bits() == w.to_bits());
            if !exact {
                ok = false;
                let e = compare(&got, &want);
                notes.push(format!(
                    "{} rel {:.2e} max {:.2e} bad {}",
                    case.plan.buffers[b].name, e.rel, e.max_abs, e.bad
                ));
            }
        }
        Ok((notes.join("; "), ok, ex.transport_name().to_string()))
    })();
    match r {
        Ok((notes, ok, t)) => CheckRow {
            id: id.into(),
            pass: ok,
            detail: if ok {
                format!("{outputs} outputs bit-exact [{t}]")
            } else {
                format!("{notes} [{t}]")
            },
        },
        Err(e) => CheckRow {
            id: id.into(),
            pass: false,
            detail: format!("ERROR: {e}"),
        },
    }
}

/// Direct one-rank communicator calls on `ordinal`: all-reduce and all-gather with a single
/// member must return their input.
fn raw_single_rank(ordinal: usize) -> Result<String> {
    use cudarc::nccl::sys as ns;
    let ctx = mercury_kernels::cuda::open_context(ordinal)?;
    let stream = ctx
        .new_stream()
        .map_err(RuntimeError::driver("create stream"))?;
    let comms = Comm::init_all(&[ordinal])?;
    let host: Vec<f32> = (0..1000).map(|i| (i as f32) * 0.25 - 7.0).collect();
    let a = stream
        .clone_htod(&host)
        .map_err(RuntimeError::driver("htod"))?;
    let mut b = stream
        .alloc_zeros::<f32>(host.len())
        .map_err(RuntimeError::driver("alloc"))?;
    {
        use cudarc::driver::{DevicePtr, DevicePtrMut};
        let (pa, _ga) = a.device_ptr(&stream);
        let (pb, _gb) = b.device_ptr_mut(&stream);
        let s = stream.cu_stream() as ns::cudaStream_t;
        // SAFETY: `pa` and `pb` hold 1000 f32 on the communicator's device; the stream belongs
        // to it; the guards keep both alive until the calls are enqueued and the stream is
        // synchronised below.
        unsafe {
            mercury_runtime::cuda::nccl::lib::ncclAllReduce(
                pa as *const _,
                pb as *mut _,
                host.len(),
                ns::ncclDataType_t::ncclFloat32,
                ns::ncclRedOp_t::ncclSum,
                comms[0].raw(),
                s,
            )
            .result()
            .map_err(nccl::nccl_err("ncclAllReduce"))?;
        }
    }
    let got_ar = stream
        .clone_dtoh(&b)
        .map_err(RuntimeError::driver("dtoh"))?;
    {
        use cudarc::driver::{DevicePtr, DevicePtrMut};
        let (pa, _ga) = a.device_ptr(&stream);
        let (pb, _gb) = b.device_ptr_mut(&stream);
        let s = stream.cu_stream() as ns::cudaStream_t;
        // SAFETY: as above; one member gathers 4000 bytes into a 4000-byte buffer.
        unsafe {
            mercury_runtime::cuda::nccl::lib::ncclAllGather(
                pa as *const _,
                pb as *mut _,
                host.len() * 4,
                ns::ncclDataType_t::ncclUint8,
                comms[0].raw(),
                s,
            )
            .result()
            .map_err(nccl::nccl_err("ncclAllGather"))?;
        }
    }
    let got_ag = stream
        .clone_dtoh(&b)
        .map_err(RuntimeError::driver("dtoh"))?;
    stream
        .synchronize()
        .map_err(RuntimeError::driver("synchronize"))?;
    if got_ar != host || got_ag != host {
        return Err(RuntimeError::Unsupported(
            "one-rank all-reduce / all-gather changed the data".into(),
        ));
    }
    Ok(format!(
        "1-rank communicator on GPU {ordinal}: all-reduce and all-gather are the identity"
    ))
}

/// NCCL checks one GPU can run (each row says what it covered).
pub fn nccl_checks(ptx: &str, seed: u64) -> Vec<CheckRow> {
    let mut rows = Vec::new();
    if let Err(e) = nccl::probe() {
        rows.push(CheckRow {
            id: "nccl.load".into(),
            pass: false,
            detail: e.to_string(),
        });
        return rows;
    }
    let notes = nccl::prepare_env().join("; ");
    rows.push(match nccl::version() {
        Ok((a, b, c)) => CheckRow {
            id: "nccl.version".into(),
            pass: std::env::var("NCCL_NVLS_ENABLE").as_deref() == Ok("0"),
            detail: format!(
                "NCCL {a}.{b}.{c}; NCCL_NVLS_ENABLE={} {}",
                std::env::var("NCCL_NVLS_ENABLE").unwrap_or_default(),
                if notes.is_empty() {
                    "(already set)".to_string()
                } else {
                    format!("({notes})")
                }
            ),
        },
        Err(e) => CheckRow {
            id: "nccl.version".into(),
            pass: false,
            detail: e.to_string(),
        },
    });
    rows.push(match raw_single_rank(0) {
        Ok(d) => CheckRow {
            id: "nccl.comm_1rank_raw".into(),
            pass: true,
            detail: d,
        },
        Err(e) => CheckRow {
            id: "nccl.comm_1rank_raw".into(),
            pass: false,
            detail: format!("ERROR: {e}"),
        },
    });
    rows.push(run_single_rank(
        "nccl.executor_1rank_in_process",
        ptx,
        Placement::new(DeviceMap::single(1, 0), TransportChoice::Nccl),
        seed,
    ));
    // A launcher world of one process: world communicator, split per group, the executor's
    // multi-process path with this process driving the only rank.
    let env = LaunchEnv {
        rank: 0,
        world_size: 1,
        local_rank: 0,
        id: IdSource::CommId {
            addr: String::new(),
            set: false,
        },
    };
    let world = (|| -> Result<World> {
        let ctx = mercury_kernels::cuda::open_context(0)?;
        World::init(&env, 1, &[ctx])
    })();
    rows.push(match world {
        Ok(w) => run_single_rank(
            "nccl.executor_1rank_launcher_world",
            ptx,
            Placement::new(DeviceMap::single(1, 0), TransportChoice::NcclWorld(w)),
            seed.wrapping_add(1),
        ),
        Err(e) => CheckRow {
            id: "nccl.executor_1rank_launcher_world".into(),
            pass: false,
            detail: format!("ERROR: {e}"),
        },
    });
    rows
}

/// Prints `rows` as a table; returns whether all passed.
pub fn print_rows(rows: &[CheckRow]) -> bool {
    crate::outln!("| check | result | detail |");
    crate::outln!("| --- | --- | --- |");
    for r in rows {
        crate::outln!(
            "| {} | {} | {} |",
            r.id,
            if r.pass { "ok" } else { "FAILED" },
            r.detail
        );
    }
    rows.iter().all(|r| r.pass)
}

/// Device kernels for the checks: `path`'s PTX, or the bench stand-in compiled by NVRTC.
pub fn device_kernels_ptx(path: Option<&str>) -> Result<String> {
    if let Some(p) = path {
        return std::fs::read_to_string(p)
            .map_err(|e| RuntimeError::Io(format!("cannot read '{p}': {e}")));
    }
    let ctx = mercury_kernels::cuda::open_context(0)?;
    let cc = ctx
        .compute_capability()
        .map_err(RuntimeError::driver("compute capability"))?;
    Ok(mercury_kernels::cuda::nvrtc::compile_ptx(
        crate::bench::STANDIN_DEVICE_KERNELS_CU,
        cc,
        "stand-in device kernels",
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-rank plan verifies and schedules (no GPU needed).
    #[test]
    fn single_rank_plan_is_valid() {
        let c = nccl_single_rank_plan();
        mercury_plan::verify(&c.plan).unwrap_or_else(|e| panic!("{e}"));
        let s = mercury_runtime::cuda::schedule::build(&c.plan).unwrap();
        assert_eq!(s.stages[0].collectives.len(), 9);
        let inputs = vec![vec![0.5; 48], vec![0.25; 48], vec![1.0; 4]];
        for (b, v) in (c.expect)(&inputs) {
            assert_eq!(v.len(), c.plan.buffers[b].shape.iter().product::<usize>());
        }
    }

    /// The GPU paths one device can run, or a skip (a pass) without a driver.
    fn gpu_or_skip() -> Option<String> {
        use mercury_kernels::cuda::{probe, Library};
        if let Err(e) = probe(Library::Driver).and(probe(Library::Nvrtc)) {
            eprintln!("skipping GPU test: {e}");
            return None;
        }
        match device_kernels_ptx(std::env::var("MERCURY_DEVICE_KERNELS_PTX").ok().as_deref()) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("skipping GPU test: {e}");
                None
            }
        }
    }

    fn assert_rows(rows: &[CheckRow]) {
        let ok = print_rows(rows);
        assert!(
            ok,
            "failed: {:?}",
            rows.iter().filter(|r| !r.pass).collect::<Vec<_>>()
        );
    }

    /// Every rank on device 0 through the placed constructor (the degenerate map), with both
    /// transports (NCCL falls back to copies: the ranks share the GPU).
    #[test]
    fn gpu_placed_single_device_or_skip() {
        let Some(ptx) = gpu_or_skip() else { return };
        let mut rows = placed_selfchecks(&ptx, 1, None, Mode::Peer, 11);
        rows.extend(placed_selfchecks(&ptx, 1, None, Mode::Nccl, 12));
        assert_rows(&rows);
    }

    /// Device ids aliasing GPU 0: every copy between ids takes the peer-copy paths and the
    /// collectives the pull mode of multi-device groups.
    #[test]
    fn gpu_placed_aliased_peer_paths_or_skip() {
        let Some(ptx) = gpu_or_skip() else { return };
        let mut rows = placed_selfchecks(&ptx, 2, Some(vec![0, 0]), Mode::Peer, 21);
        rows.extend(placed_selfchecks(
            &ptx,
            3,
            Some(vec![0, 0, 0]),
            Mode::Peer,
            22,
        ));
        assert_rows(&rows);
    }

    /// NCCL on one GPU: library and version, one-rank communicators, the NCCL transport's
    /// packing and group calls, and a launcher world of one process.
    #[test]
    fn gpu_nccl_single_rank_or_skip() {
        let Some(ptx) = gpu_or_skip() else { return };
        if let Err(e) = nccl::probe() {
            eprintln!("skipping NCCL test: {e}");
            return;
        }
        assert_rows(&nccl_checks(&ptx, 31));
    }
}
