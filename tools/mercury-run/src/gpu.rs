//! The GPU backend: the scheduled plan and the single-device plan on the CUDA executor, with
//! the same fresh random inputs (outputs poisoned by the executor before each run), an f32
//! comparison of the whole outputs and an f64 spot check of rows on the CPU.
//!
//! Where the scheduled plan's ranks run:
//! * `--virtual` (no `--devices`): every rank on GPU 0 (virtual ranks, device copies);
//! * `--virtual --devices N`: rank r on GPU r % N, several ranks per GPU;
//! * otherwise rank r on GPU r (of `--devices N`, default every visible GPU); a plan with
//!   more ranks than GPUs is refused; transfers between GPUs by `--transport peer|nccl`;
//! * `--alias K`: rank r on device id r % K, every id on GPU 0: the peer-copy paths of K GPUs
//!   (each id its own resources, copies between ids through `cuMemcpyPeerAsync`) on one GPU;
//! * `--launcher env`: one process per GPU or node (NCCL world from the launcher's
//!   environment); each process checks the output pieces its ranks write.
//!
//! The single-device reference always runs on the first GPU this process uses.
//!
//! Faults (`cuda::fault`): the process starts the fault watchdog (SIGTERM and a host blocked
//! past its limit end the process with a report); a run that stops making progress for
//! `--stage-timeout` seconds or an NCCL error prints `error: rank R (pid P, GPU g) stage S/N:
//! ...` and ends the process at once with status 1 (no destructor may block on a stuck GPU).
//! `--inject-fault` (or `$MERCURY_INJECT_FAULT`) injects a fault into the schedule's first run.

use crate::args::{Args, AttentionArg, TransportArg};
use crate::{check, Compiled, Failure};
use mercury_kernels::cpu as k;
use mercury_plan::mask::{Boundaries, MaskCx};
use mercury_plan::{ComputeOp, PatchKind, Plan, Role, SlotInit};
use mercury_runtime::cuda::fault::{self, FaultSpec};
use mercury_runtime::cuda::{nccl, RuntimeError};
use mercury_runtime::cuda::{
    AttnBackend, CudaExecutor, DeviceMap, ExecOptions, HostBuffer, Placement, TransportChoice,
};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::time::Duration;

/// The executor options of this run (`--attention`, `--stage-timeout`, `--no-direct-binding`).
pub(crate) fn exec_options(a: &Args) -> ExecOptions {
    ExecOptions {
        attention: match a.attention {
            AttentionArg::Cudnn => AttnBackend::Cudnn,
            AttentionArg::Nvrtc => AttnBackend::Nvrtc,
        },
        stage_timeout: Duration::from_secs_f64(a.stage_timeout),
        direct_binding: !a.no_direct_binding,
        ..ExecOptions::default()
    }
}

/// The scheduled plan's options: [`exec_options`] with the injected fault, checked against
/// `plan` (the single-device reference never gets the fault).
pub(crate) fn schedule_options(a: &Args, plan: &Plan) -> Result<ExecOptions, Failure> {
    let mut o = exec_options(a);
    if let Some(text) = a.inject_fault() {
        let f = FaultSpec::parse(&text)
            .and_then(|f| f.validate(plan.num_ranks(), plan.num_stages()).map(|_| f))
            .map_err(|e| Failure::Input(format!("--inject-fault: {e}")))?;
        outln!("fault injection: {f} (runs of the schedule's executor count from 1)");
        o.fault = Some(f);
    }
    Ok(o)
}

/// Starts the fault watchdog of this process with `--setup-timeout`.
pub fn start_watchdog(a: &Args) -> Result<(), Failure> {
    fault::progress().set_setup_timeout(Duration::from_secs_f64(a.setup_timeout));
    fault::Watchdog::start().map_err(Failure::Input)
}

/// [`rt`], except that a fault report ends the process at once (status 1): its GPU work may
/// never finish, and no destructor may wait for it.
fn rte(e: RuntimeError) -> Failure {
    if let RuntimeError::Fault(r) = &e {
        fault::die(&r.to_string());
    }
    rt(e)
}

/// The device kernels' PTX: the file of `--device-kernels` (from `mercury-opt --emit=ptx`,
/// which must hold the generated tile kernels of both plans), or (with the `mlir` feature)
/// every fixed kernel plus the generated kernels of the tile ops of `plans`, compiled here.
pub(crate) fn device_kernels(
    a: &Args,
    cc: (i32, i32),
    plans: &[&mercury_plan::Plan],
) -> Result<String, Failure> {
    if let Some(p) = &a.device_kernels {
        return std::fs::read_to_string(p)
            .map_err(|e| Failure::Input(format!("cannot read '{}': {e}", p.display())));
    }
    #[cfg(feature = "mlir")]
    {
        let opts = mercury_lowering::TargetOptions::for_chip(&format!("sm_{}{}", cc.0, cc.1))
            .map_err(|e| Failure::Input(e.to_string()))?;
        let mut tiles = Vec::new();
        for p in plans {
            tiles.extend(mercury_plan::tile_kernel::plan_tile_kernels(p));
        }
        mercury_lowering::plan_kernels_ptx(&tiles, &opts)
            .map_err(|e| Failure::Input(format!("compiling the device kernels: {e}")))
    }
    #[cfg(not(feature = "mlir"))]
    {
        let _ = (cc, plans);
        Err(Failure::Input("this build cannot compile device kernels (no `mlir` feature); pass --device-kernels FILE from `mercury-opt --emit=ptx`".into()))
    }
}

pub(crate) fn rt(e: impl std::fmt::Display) -> Failure {
    Failure::Input(e.to_string())
}

pub(crate) struct Run {
    pub(crate) outputs: HashMap<String, HostBuffer>,
    pub(crate) median_ms: f64,
    pub(crate) runs: Vec<f64>,
}

pub(crate) fn execute(
    exec: &mut CudaExecutor,
    plan: &Plan,
    inputs: &HashMap<String, HostBuffer>,
    docs: &[Boundaries],
    warmup: usize,
    iters: usize,
) -> Result<Run, Failure> {
    if !plan.documents.is_empty() {
        exec.set_documents(docs).map_err(rt)?;
    }
    for (i, b) in plan
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.role == Role::Input)
    {
        exec.upload_input(i, &inputs[&b.name].data).map_err(rt)?;
    }
    let mut runs = Vec::new();
    for it in 0..warmup + iters {
        let t = exec.run().map_err(rte)?;
        if it >= warmup {
            runs.push(t.stages_ms as f64);
        }
    }
    let mut outputs = HashMap::new();
    for (i, b) in plan
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.role == Role::Output)
    {
        outputs.insert(b.name.clone(), exec.download_buffer(i).map_err(rt)?);
    }
    let mut sorted = runs.clone();
    sorted.sort_by(f64::total_cmp);
    Ok(Run {
        outputs,
        median_ms: sorted[sorted.len() / 2],
        runs,
    })
}

/// Floating-point operations of the single-device plan: its patches and compiled tile ops.
fn flops(plan: &Plan, docs: &[Boundaries]) -> f64 {
    let mut f = 0.0;
    for r in &plan.ranks {
        for st in &r.stages {
            for op in &st.compute {
                if let ComputeOp::Patch { patch, inputs, .. } = op {
                    let e = |i: usize| inputs[i].region.extent.clone();
                    match patch {
                        PatchKind::Gemm { .. } => {
                            let (a, b) = (e(0), e(1));
                            let kd = *a.last().unwrap_or(&1) as f64;
                            f += 2.0
                                * (a.iter().product::<usize>() as f64 / kd)
                                * kd
                                * (b.iter().product::<usize>() as f64 / kd);
                        }
                        PatchKind::Attention {
                            causal,
                            mask,
                            q_offset,
                            k_offset,
                            ..
                        } if !mask.is_none() => {
                            // The pairs the mask leaves visible for this batch (useful work).
                            let (q, kk, v) = (e(0), e(1), e(2));
                            let (sq, sk) = (q[q.len() - 2], kk[kk.len() - 2]);
                            let (d, dv) = (q[q.len() - 1] as f64, v[v.len() - 1] as f64);
                            let bh = q[..q.len() - 2].iter().product::<usize>() as f64;
                            if let Ok(m) = MaskCx::new(*causal, mask, docs) {
                                let pairs =
                                    m.pairs(*q_offset..q_offset + sq, *k_offset..k_offset + sk);
                                f += 2.0 * bh * pairs as f64 * (d + dv);
                            }
                        }
                        PatchKind::Attention { causal, .. } => {
                            let (q, kk, v) = (e(0), e(1), e(2));
                            let (sq, sk, d, dv) = (
                                q[q.len() - 2] as f64,
                                kk[kk.len() - 2] as f64,
                                q[q.len() - 1] as f64,
                                v[v.len() - 1] as f64,
                            );
                            let bh = q[..q.len() - 2].iter().product::<usize>() as f64;
                            // q k^T is d wide, p v is dv wide.
                            f += 2.0 * bh * sq * sk * (d + dv) * if *causal { 0.5 } else { 1.0 };
                        }
                        PatchKind::AttentionBwd { .. } => {
                            let shapes: Vec<Vec<usize>> = (0..inputs.len()).map(e).collect();
                            f += (patch.spec().flops)(patch, &shapes);
                        }
                    }
                }
                // Compiled tile ops (a tile matmul of the unpatched single-device operator, an
                // epilogue): their own count (2 m n k per matmul, one per element and
                // instruction otherwise).
                if let ComputeOp::Tile {
                    tile,
                    inputs,
                    output,
                } = op
                {
                    let shapes: Vec<Vec<usize>> =
                        inputs.iter().map(|v| v.region.extent.clone()).collect();
                    f += tile.flops(&shapes, &output.region.extent);
                }
            }
        }
    }
    f
}

/// Recomputes a few output rows in f64 from the single-device plan's one patch; returns the
/// largest relative row error.
fn spot_check(
    reference: &Plan,
    inputs: &HashMap<String, HostBuffer>,
    out: &HashMap<String, HostBuffer>,
    docs: &[Boundaries],
    seed: u64,
) -> Option<f64> {
    let r = reference.ranks.first()?;
    let patches: Vec<&ComputeOp> = r
        .stages
        .iter()
        .flat_map(|s| &s.compute)
        .filter(|op| matches!(op, ComputeOp::Patch { .. }))
        .collect();
    let [ComputeOp::Patch {
        patch, inputs: ins, ..
    }] = patches.as_slice()
    else {
        return None;
    };
    // Operands must be whole input buffers.
    let buf = |v: &mercury_plan::View| -> Option<(String, Vec<usize>)> {
        match &r.slots[v.slot].init {
            SlotInit::FromGlobal { buffer, .. } => Some((
                reference.buffers[*buffer].name.clone(),
                v.region.extent.clone(),
            )),
            _ => None,
        }
    };
    let ops: Vec<(String, Vec<usize>)> = ins.iter().map(buf).collect::<Option<_>>()?;
    let out_name = reference
        .buffers
        .iter()
        .find(|b| b.role == Role::Output)?
        .name
        .clone();
    let got = &out[&out_name];
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut worst: f64 = 0.0;
    match patch {
        PatchKind::Attention {
            causal,
            scale,
            mask,
            q_offset,
            k_offset,
            ..
        } => {
            let m = MaskCx::new(*causal, mask, docs).ok()?;
            let (qn, qs) = &ops[0];
            let (kn, ks) = &ops[1];
            let (vn, vs) = &ops[2];
            let four = |s: &Vec<usize>| {
                if s.len() == 3 {
                    vec![1, s[0], s[1], s[2]]
                } else {
                    s.clone()
                }
            };
            let (qs, ks) = (four(qs), four(ks));
            let (b, hq, sq, d, hk, sk) = (qs[0], qs[1], qs[2], qs[3], ks[1], ks[2]);
            // The value head dim (multi-head latent attention: dv != d).
            let dv = *vs.last()?;
            let group = hq / hk.max(1);
            for _ in 0..4 {
                let (bi, h, row) = (
                    rng.gen_range(0..b),
                    rng.gen_range(0..hq),
                    rng.gen_range(0..sq),
                );
                let kh = h / group;
                // The keys the row sees (`mercury_plan::mask`; causal alone when no mask),
                // as positions of the key buffer.
                let keys = if mask.is_none() {
                    0..sk
                } else {
                    let ks = m.keys(q_offset + row);
                    ks.start.clamp(*k_offset, k_offset + sk) - k_offset
                        ..ks.end.clamp(*k_offset, k_offset + sk) - k_offset
                };
                let n = keys.len();
                let q = inputs[qn].slice_f64(((bi * hq + h) * sq + row) * d, d);
                let kk = inputs[kn].slice_f64(((bi * hk + kh) * sk + keys.start) * d, n * d);
                let vv = inputs[vn].slice_f64(((bi * hk + kh) * sk + keys.start) * dv, n * dv);
                let (mut o, mut lse) = (vec![0.0; dv], vec![0.0; 1]);
                let dims = k::AttnDims {
                    b: 1,
                    hq: 1,
                    hk: 1,
                    sq: 1,
                    sk: n,
                    d,
                };
                if n > 0 {
                    k::attention_dv(
                        &q,
                        &kk,
                        &vv,
                        &mut o,
                        &mut lse,
                        dims,
                        dv,
                        k::AttnParams {
                            causal: *causal && mask.is_none(),
                            scale: *scale,
                            q_offset: row,
                            k_offset: 0,
                        },
                    );
                }
                let g = got.slice_f64(((bi * hq + h) * sq + row) * dv, dv);
                let num: f64 = g
                    .iter()
                    .zip(&o)
                    .map(|(x, y)| (x - y) * (x - y))
                    .sum::<f64>()
                    .sqrt();
                // A row that sees no key must come out exactly 0 (absolute error then).
                let den: f64 = if n == 0 {
                    1.0
                } else {
                    o.iter().map(|y| y * y).sum::<f64>().sqrt().max(1e-300)
                };
                worst = worst.max(if g.iter().all(|x| x.is_finite()) {
                    num / den
                } else {
                    f64::INFINITY
                });
            }
        }
        PatchKind::AttentionBwd { causal, scale, .. } => {
            // The gradients: the output buffers in declaration order (dQ, dK, dV).
            let outs: Vec<&HostBuffer> = reference
                .buffers
                .iter()
                .filter(|b| b.role == Role::Output)
                .map(|b| out.get(&b.name))
                .collect::<Option<_>>()?;
            let [dq, dk, dv] = outs.as_slice() else {
                return None;
            };
            return crate::bwd_check::attention_bwd_rows(
                &ops,
                [dq, dk, dv],
                inputs,
                (*causal, *scale),
                &mut rng,
            );
        }
        PatchKind::Gemm { epilogue, .. } => {
            let (an, ash) = &ops[0];
            let (bn, bsh) = &ops[1];
            let kd = *ash.last()?;
            let (m, n) = (
                ash.iter().product::<usize>() / kd,
                bsh.iter().product::<usize>() / kd,
            );
            let (mut num, mut den) = (0.0f64, 0.0f64);
            for _ in 0..64 {
                let (i, j) = (rng.gen_range(0..m), rng.gen_range(0..n));
                let dot: f64 = (0..kd)
                    .map(|p| inputs[an].at(i * kd + p) * inputs[bn].at(p * n + j))
                    .sum();
                let want = epilogue.map_or(dot, |f| f.apply(dot));
                num += (got.at(i * n + j) - want).powi(2);
                den += want * want;
            }
            worst = (num / den.max(1e-300)).sqrt();
        }
    }
    Some(worst)
}

/// Where the scheduled plan's ranks go (see the module docs).
enum Layout {
    /// Every rank on GPU 0 through the virtual-rank constructor (the original path).
    Virtual,
    /// Ranks placed on GPUs by the map, with a transport.
    Placed(DeviceMap, TransportArg),
    /// `--alias K`: rank r on device id r % K, every id on GPU 0 (peer copies between ids).
    Aliased(DeviceMap),
}

fn choose_layout(n: usize, visible: usize, a: &Args) -> Result<Layout, Failure> {
    if let Some(d) = a.devices {
        if d > visible {
            return Err(Failure::Input(format!(
                "--devices {d} but only {visible} GPU(s) are visible"
            )));
        }
    }
    if let Some(k) = a.alias {
        return Ok(Layout::Aliased(
            DeviceMap::round_robin(n, k).map_err(Failure::Input)?,
        ));
    }
    if a.virtual_ranks {
        return Ok(match a.devices {
            None | Some(1) if a.transport == TransportArg::Peer => Layout::Virtual,
            None | Some(1) => Layout::Placed(DeviceMap::single(n, 0), a.transport),
            Some(d) => Layout::Placed(
                DeviceMap::round_robin(n, d).map_err(Failure::Input)?,
                a.transport,
            ),
        });
    }
    let d = a.devices.unwrap_or(visible);
    if n == 1 {
        return Ok(Layout::Virtual);
    }
    if n > d {
        return Err(Failure::Input(format!(
            "the plan has {n} ranks but only {d} GPU(s) {}; without --virtual every rank needs its own GPU. Pass --virtual to run the ranks as virtual ranks (all on GPU 0, or rank r on GPU r % N with --devices N), or run on a machine with {n} GPUs (or several processes: --launcher env)",
            if a.devices.is_some() { "(--devices)" } else { "are visible" }
        )));
    }
    Ok(Layout::Placed(
        DeviceMap::round_robin(n, d).map_err(Failure::Input)?,
        a.transport,
    ))
}

fn choice(t: TransportArg) -> TransportChoice {
    match t {
        TransportArg::Peer => TransportChoice::Copy,
        TransportArg::Nccl => TransportChoice::Nccl,
    }
}

fn describe(map: &DeviceMap) -> String {
    let ords = map.ordinals();
    if ords.len() == 1 {
        return format!("all on GPU {}", ords[0]);
    }
    let m = map.as_slice();
    if m.iter().enumerate().all(|(r, d)| *d == r % ords.len()) {
        format!("rank r on GPU r % {}", ords.len())
    } else {
        format!("ranks on GPUs {m:?}")
    }
}

pub(crate) fn cudarc_device_count() -> Result<usize, Failure> {
    match mercury_runtime::cuda::visible_gpus() {
        Ok(0) => Err(Failure::NoDevice(
            "no usable GPU: the driver shows none".into(),
        )),
        Ok(n) => Ok(n),
        Err(e) => Err(Failure::NoDevice(format!("no usable GPU: {e}"))),
    }
}

/// `mercury-run --backend cuda`: the launcher path, or [`checked_bench`] with its lines
/// printed. Returns the schedule's median time in seconds when `--bench` timed it: this
/// process's, or under a launcher the slowest process's, in process 0 only (`None` elsewhere).
pub fn run(a: &Args, c: &Compiled, plan: Plan) -> Result<Option<f64>, Failure> {
    let n = plan.num_ranks();
    if let Some(r) = a.ranks {
        if r != n {
            return Err(Failure::Input(format!(
                "--ranks {r} but the mesh {:?} has {n} ranks",
                plan.mesh
            )));
        }
    }
    start_watchdog(a)?;
    if a.launcher.is_some() {
        return crate::launched::run_launched(a, crate::reference_plan(a, c)?, plan);
    }
    let b = checked_bench(a, plan, || crate::reference_plan(a, c), &mut |l| {
        outln!("{l}")
    })
    .map_err(|f| locate_attention_refusal(c, f))?;
    Ok(a.bench.then_some(b.median_ms * 1e-3))
}

/// A refusal of an attention block by every GPU patch (`ops::ATTENTION_REFUSED`: a dtype they
/// do not compute, a shape neither cuDNN nor the NVRTC kernel takes), located at the
/// operator's attention patch; any other failure as it is.
pub(crate) fn locate_attention_refusal(c: &Compiled, f: Failure) -> Failure {
    let Failure::Input(m) = &f else { return f };
    if !m.contains(mercury_runtime::cuda::ops::ATTENTION_REFUSED) {
        return f;
    }
    let mut at = None;
    c.declared.walk(&mut |s, _| {
        if let mercury_commir::Stmt::Patch { kernel, loc, .. } = s {
            if kernel == "attention" && at.is_none() {
                at = Some(loc.clone());
            }
        }
    });
    match at {
        Some(loc) => crate::diag(mercury_ir::Diagnostic::error(loc, m.clone())),
        None => f,
    }
}

/// What [`checked_bench`] measured.
#[derive(Debug, Clone)]
pub struct Bench {
    /// Median time of one run of the schedule (the stages, on the device), milliseconds.
    pub median_ms: f64,
    /// Median of the single-device reference, when it ran (`--check` or `--bench`).
    pub reference_median_ms: Option<f64>,
    /// Timed runs of the schedule.
    pub runs: usize,
    /// GPUs the schedule's ranks ran on.
    pub gpus: usize,
    /// Wall time of the whole call (set-up, warm-up, reference, checks), seconds.
    pub wall_s: f64,
    /// The schedule's outputs, whole, by buffer name.
    pub outputs: HashMap<String, HostBuffer>,
}

/// Runs `plan` on the GPU(s) as `a` says (`--virtual`, `--devices`, `--transport`,
/// `--attention`, `--warmup`, `--iters`), checks it against the single-device plan that
/// `reference` lowers (`--check`: f32 comparison of the whole outputs and f64 rows, within
/// `--tolerance`), times both (`--bench`), and reports each line through `say`. A failed check
/// is `Err(Failure::Check)`; no usable GPU is `Err(Failure::NoDevice)`. The fault watchdog must
/// be running ([`start_watchdog`]); a fault report ends the process. Not for `--launcher`.
pub fn checked_bench(
    a: &Args,
    plan: Plan,
    reference: impl FnOnce() -> Result<Plan, Failure>,
    say: &mut dyn FnMut(String),
) -> Result<Bench, Failure> {
    checked_bench_on(a, plan, reference, None, say)
}

/// [`checked_bench`] on `inputs` (by buffer name; fresh random inputs of `--seed` where
/// `None`): the schedule and the single-device plan both read them. The [`Bench`] carries the
/// schedule's outputs (what `--backward` hands to the backward kernel).
pub fn checked_bench_on(
    a: &Args,
    plan: Plan,
    reference: impl FnOnce() -> Result<Plan, Failure>,
    inputs: Option<HashMap<String, HostBuffer>>,
    say: &mut dyn FnMut(String),
) -> Result<Bench, Failure> {
    let t_all = std::time::Instant::now();
    let n = plan.num_ranks();
    let sched_opts = schedule_options(a, &plan)?;
    if a.transport == TransportArg::Nccl {
        // NVLink multicast off before anything can start NCCL.
        for note in nccl::prepare_env() {
            say(format!("nccl: {note}"));
        }
    }
    let ctx = mercury_kernels::cuda::open_context(0)
        .map_err(|e| Failure::NoDevice(format!("no usable GPU: {e}")))?;
    let visible = cudarc_device_count()?;
    let layout = choose_layout(n, visible, a)?;
    let cc = ctx.compute_capability().map_err(rt)?;
    let name = ctx.name().unwrap_or_else(|_| "?".into());
    let reference = reference()?;
    let ptx = device_kernels(a, cc, &[&plan, &reference])?;
    let seed = a.seed();
    let inputs = inputs.unwrap_or_else(|| HostBuffer::random_inputs(&plan, seed));
    // Fresh random document boundaries (the CPU executor's draw) unless `--documents` gives
    // them, the same for both plans.
    let mut drawn = mercury_runtime::cpu::random_documents(&plan, seed);
    for (name, b) in given_documents(a)? {
        if !plan.documents.iter().any(|d| d.name == name) {
            return Err(Failure::Input(format!(
                "--documents {name}=...: the operator has no documents input '{name}'"
            )));
        }
        drawn.insert(name, b);
    }
    if a.balance_documents {
        say(crate::balance::reorder(&plan, &mut drawn).map_err(Failure::Input)?);
    }
    let docs = mercury_runtime::cpu::documents(&plan, &drawn).map_err(rt)?;
    for (d, b) in plan.documents.iter().zip(&docs) {
        let longest = (0..b.len()).map(|i| b.range(i).len()).max().unwrap_or(0);
        say(format!(
            "documents @{}: {} in this batch, the longest {longest} of {} positions",
            d.name,
            b.len(),
            d.positions
        ));
    }
    let (warmup, iters) = if a.bench { (a.warmup, a.iters) } else { (0, 1) };
    let mut exec = match &layout {
        Layout::Virtual => {
            say(format!(
                "gpu: {name} (sm_{}{}), {n} {} ranks, seed {seed}",
                cc.0,
                cc.1,
                if n > 1 { "virtual" } else { "" }
            ));
            CudaExecutor::new(ctx.clone(), plan.clone(), &ptx, sched_opts).map_err(rt)?
        }
        Layout::Placed(..) | Layout::Aliased(_) => {
            let (placement, place) = match &layout {
                Layout::Aliased(map) => {
                    let ids = map.ordinals().len();
                    (
                        Placement {
                            devices: map.clone(),
                            transport: TransportChoice::Copy,
                            physical: Some(vec![0; ids]),
                        },
                        format!(" on {ids} device ids aliasing GPU 0 (rank r on id r % {ids}; peer-copy paths, one GPU's times)"),
                    )
                }
                Layout::Placed(map, t) => (
                    Placement::new(map.clone(), choice(*t)),
                    format!(", {} ({} GPU(s) visible)", describe(map), visible),
                ),
                Layout::Virtual => unreachable!("matched above"),
            };
            let e =
                CudaExecutor::new_placed(plan.clone(), &ptx, sched_opts, placement).map_err(rt)?;
            say(format!(
                "gpu: {name} (sm_{}{}), {n} ranks{place}, seed {seed}",
                cc.0, cc.1
            ));
            say(format!("transport: {}", e.transport_name()));
            e
        }
    };
    let got = execute(&mut exec, &plan, &inputs, &docs, warmup, iters)?;
    drop(exec);
    let want = if a.check || a.bench {
        let mut rexec =
            CudaExecutor::new(ctx, reference.clone(), &ptx, exec_options(a)).map_err(rt)?;
        Some(execute(
            &mut rexec, &reference, &inputs, &docs, warmup, iters,
        )?)
    } else {
        None
    };
    let mut failed = Vec::new();
    if a.check {
        let want = want.as_ref().expect("reference ran");
        let tol = a.tolerance.unwrap_or(2e-2);
        for c in check::compare(&got.outputs, &want.outputs, None) {
            let ok = c.within(tol);
            say(format!(
                "check @{} vs single-device (GPU): {}{}{}",
                c.name,
                c.describe(tol),
                if c.nonfinite > 0 {
                    format!(", {} non-finite", c.nonfinite)
                } else {
                    String::new()
                },
                if ok { "  ok" } else { "  FAILED" }
            ));
            if !ok {
                failed.push(c.name);
            }
        }
        // The f64 rows start from the numbers the device holds (the inputs in their dtype).
        match spot_check(&reference, &inputs, &got.outputs, &docs, seed) {
            Some(e) => {
                let ok = e <= tol;
                say(format!("check rows vs f64 CPU: relative error {e:.3e}{}", if ok { "  ok" } else { "  FAILED" }));
                if !ok {
                    failed.push("f64 rows".into());
                }
            }
            None => say("check rows vs f64 CPU: skipped (the operator is not a single patch over whole buffers)".into()),
        }
    }
    if a.bench {
        let want = want.as_ref().expect("reference ran");
        let f = flops(&reference, &docs);
        let tf = |ms: f64| f / (ms * 1e-3) / 1e12;
        say(String::new());
        say("| what | median ms | TFLOP/s | runs |".into());
        say("| --- | ---: | ---: | ---: |".into());
        say(format!(
            "| schedule, {n} ranks | {:.3} | {:.0} | {} |",
            got.median_ms,
            tf(got.median_ms),
            got.runs.len()
        ));
        say(format!(
            "| single-device patch | {:.3} | {:.0} | {} |",
            want.median_ms,
            tf(want.median_ms),
            want.runs.len()
        ));
        say(format!(
            "| schedule / single time | {:.3}x | | |",
            got.median_ms / want.median_ms
        ));
    }
    if !failed.is_empty() {
        return Err(Failure::Check(format!(
            "check failed for {}",
            failed.join(", ")
        )));
    }
    Ok(Bench {
        median_ms: got.median_ms,
        reference_median_ms: want.as_ref().map(|w| w.median_ms),
        runs: got.runs.len(),
        gpus: match &layout {
            Layout::Virtual => 1,
            Layout::Placed(map, _) => map.ordinals().len(),
            Layout::Aliased(_) => 1,
        },
        wall_s: t_all.elapsed().as_secs_f64(),
        outputs: got.outputs,
    })
}

/// The boundaries `--documents NAME=FILE` gives, by name (checked against the plan later).
fn given_documents(a: &Args) -> Result<Vec<(String, Vec<f64>)>, Failure> {
    a.documents
        .iter()
        .map(|arg| {
            let (name, file) = arg
                .split_once('=')
                .ok_or_else(|| Failure::Input(format!("--documents {arg}: expected NAME=FILE")))?;
            let text = std::fs::read_to_string(file)
                .map_err(|e| Failure::Input(format!("--documents {arg}: {e}")))?;
            let v = text
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|t| !t.is_empty())
                .map(|t| {
                    t.parse::<u64>().map(|x| x as f64).map_err(|_| {
                        Failure::Input(format!("--documents {arg}: '{t}' is not a whole number"))
                    })
                })
                .collect::<Result<Vec<f64>, Failure>>()?;
            Ok((name.trim_start_matches('@').to_string(), v))
        })
        .collect()
}

/// The name of GPU `ordinal` (`Err(Failure::NoDevice)` without one).
pub fn device_name(ordinal: usize) -> Result<String, Failure> {
    let ctx = mercury_kernels::cuda::open_context(ordinal)
        .map_err(|e| Failure::NoDevice(format!("no usable GPU: {e}")))?;
    Ok(ctx.name().unwrap_or_else(|_| "?".into()))
}
