"""Shared plumbing for the torchrun baselines (attention.py, gemm.py).

Process setup, the world-size check, a collective-aligned timer, error agreement between ranks
(one failing baseline becomes a row, never a hang or an abort), poisoning, numerics statistics,
and the markdown table / JSON writer. Import this module before torch.distributed: it sets the
NVLS/multicast switches the H200 machines need (the launcher must export them as well).
"""
import os

# NVLS/multicast is off on the lent machines: NCCL and symmetric memory must not try it. Set before
# torch.distributed is imported (NCCL and NVSHMEM read them at init). The launcher exports them too.
ENV_FLAGS = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
             "NVSHMEM_DISABLE_NVLS": "1"}
os.environ.update(ENV_FLAGS)
import time  # noqa: E402

T_START = time.time()  # process start (close enough: before torch is imported)

import datetime  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# Rates the time estimates use (issue 13: measured on the H200s).
RATE_CUDNN = 600e12      # cuDNN SDPA, FLOP/s
RATE_GEMM = 790e12       # bf16 GEMM, FLOP/s
RATE_LINK = 340e9        # NVLink, bytes/s per direction as NCCL sees it


def world_size_check(smoke):
    """Fails with a clear message when the launch cannot work (no torchrun, too few GPUs)."""
    quiet = int(os.environ.get("RANK", "0")) != 0  # one message, from rank 0
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise SystemExit("error: launch with torchrun, e.g. `torchrun --standalone "
                         "--nproc_per_node=2 " + sys.argv[0] + " ...` (RANK/WORLD_SIZE unset)")
    world = int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if smoke:
        return world
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < local_world:
        raise SystemExit(2 if quiet else 
            f"error: {local_world} ranks on this host but only {n} CUDA device(s) visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); "
            f"run with --nproc_per_node={max(n, 1)} or on a machine with more GPUs "
            "(use --smoke for a CPU run)")
    return world


class Ctx:
    """One process of the run: rank, device, backend, and the helpers that need them."""

    def __init__(self, smoke, timeout_s):
        self.smoke = smoke
        self.world = world_size_check(smoke)
        self.rank = int(os.environ["RANK"])
        self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
        self.cuda = not smoke
        if self.cuda:
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
            backend = "nccl"
        else:
            self.device = torch.device("cpu")
            backend = "gloo"
        kw = {"backend": backend, "timeout": datetime.timedelta(seconds=timeout_s)}
        if self.cuda:
            kw["device_id"] = self.device
        try:
            dist.init_process_group(**kw)
        except TypeError:  # older torch without device_id
            kw.pop("device_id", None)
            dist.init_process_group(**kw)
        self.group = dist.group.WORLD
        self._tiny = torch.zeros(1, device=self.device)
        torch.set_grad_enabled(False)
        warnings.filterwarnings("once")

    # -- synchronisation --------------------------------------------------------------------
    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def barrier(self):
        """Host and device barrier: every rank's queued work done, then all ranks meet."""
        self.sync()
        t = torch.zeros(1, device=self.device)
        dist.all_reduce(t)
        self.sync()

    def allreduce(self, values, op="sum"):
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op={"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX,
                               "min": dist.ReduceOp.MIN}[op])
        return t.tolist()

    def agree(self, err):
        """Every rank calls this; returns None when no rank failed, else the failures' text."""
        flag = self.allreduce([1.0 if err else 0.0], "max")[0]
        if flag == 0.0:
            return None
        msgs = [None] * self.world
        dist.all_gather_object(msgs, err)
        bad = [(r, m) for r, m in enumerate(msgs) if m]
        first = bad[0][1]
        if len(bad) == 1 or all(m == first for _, m in bad):
            return f"rank {','.join(str(r) for r, _ in bad)}: {first}"
        return "; ".join(f"rank {r}: {m}" for r, m in bad)

    def free(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()

    def poison_cache(self, nbytes):
        """Best effort: fill about 2*nbytes of free cached memory with NaN and release it, so a
        fresh output allocated next (same size class) starts as NaN rather than old results."""
        if not self.cuda or nbytes <= 0:
            return
        free, _ = torch.cuda.mem_get_info(self.device)
        n = int(min(2 * nbytes, 0.5 * free)) // 2
        if n > 0:
            torch.empty(n, dtype=torch.bfloat16, device=self.device).fill_(float("nan"))
        self.sync()

    def info(self):
        d = {"torch": torch.__version__, "world_size": self.world, "smoke": self.smoke,
             "host": socket.gethostname(), "env": {k: os.environ.get(k) for k in ENV_FLAGS},
             "backend": dist.get_backend()}
        if self.cuda:
            d["device"] = torch.cuda.get_device_name(self.device)
            d["cuda"] = torch.version.cuda
            d["cudnn"] = torch.backends.cudnn.version()
            try:
                d["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
            except Exception:  # noqa: BLE001
                d["nccl"] = None
        else:
            d["device"] = "cpu (smoke)"
        return d


class Skip(Exception):
    """Raised by a runner factory when a baseline does not apply (e.g. does not fit one GPU)."""


def fmt_err(e):
    if isinstance(e, Skip):
        return f"skipped: {e}"
    msg = str(e).split("\n")[0]
    for cut in (" This could be because", " If you are a Facebook"):
        msg = msg.split(cut)[0]
    s = f"{type(e).__name__}: {msg}"
    if "out of memory" in s.lower():
        s = "OOM: " + s
    return s[:240]


# -- timing ---------------------------------------------------------------------------------
def bench(ctx, fn, target_ms, collective=True, min_samples=2, max_samples=30):
    """Median time of fn in ms. fn has run once already (the checked run is the warm-up).

    One estimate call fixes, identically on every rank, the calls per sample (`inner`, so a
    sample lasts >= 2 ms) and the number of samples (about target_ms in all, 2..30). Each
    sample starts after a device-side all-reduce (ranks aligned), is timed with CUDA events,
    and counts as the slowest rank's time; the result is the median over samples.
    With collective=False (single-GPU baseline on one rank) there is no alignment.
    """
    def one(inner):
        if collective and ctx.cuda:
            dist.all_reduce(ctx._tiny)  # device-side alignment, no host sync
        elif collective:
            ctx.barrier()
        if ctx.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(inner):
                fn()
            b.record()
            return (a, b)
        t = time.perf_counter()
        for _ in range(inner):
            fn()
        return time.perf_counter() - t

    def resolve(x, inner):
        if ctx.cuda:
            return x[0].elapsed_time(x[1]) / inner
        return 1e3 * x / inner

    if collective:
        ctx.barrier()
    est = one(1)
    ctx.sync()
    est = resolve(est, 1)
    if collective:
        est = ctx.allreduce([est], "max")[0]
    inner = 1 if est >= 2.0 else min(50, max(1, math.ceil(2.0 / max(est, 1e-3))))
    n = int(round(target_ms / (est * inner)))
    n = max(min_samples, min(max_samples, n))
    samples = [est] if inner == 1 else []
    pending = [one(inner) for _ in range(n - len(samples))]
    ctx.sync()
    samples += [resolve(x, inner) for x in pending]
    if collective:
        samples = ctx.allreduce(samples, "max")
    samples.sort()
    return samples[len(samples) // 2], len(samples), inner


# -- rows, table, JSON -------------------------------------------------------------------------
# Every element must also lie within ELEMENT_FACTOR x tol x (rms + |want|), rms the reference's
# root mean square over the compared elements: mercury-run's `--check` rule
# (mercury_driver::check::ELEMENT_FACTOR), so a few wrong elements cannot hide in the norm.
ELEMENT_FACTOR = 10.0


def element_weight(tol):
    """The c of the element bound |got - want| <= c (rms + |want|)."""
    return ELEMENT_FACTOR * tol


def element_excess(dlt, ref, c):
    """max over elements of |got - want| - c |want| (+inf if any is NaN, so it fails): the
    element bound holds iff this is <= c rms. It reduces over ranks by max (rms needs every
    rank's sum of squares first)."""
    if dlt.numel() == 0:
        return -math.inf
    e = dlt.abs() - c * ref.abs()
    if bool(torch.isnan(e).any()):
        return math.inf
    return float(e.max())


def check_stats(sq_err, sq_ref, max_abs, excess, count, tol):
    """(relative error, max |error|, elements ok, ok): ok when the norm-wise relative error is
    within `tol` and every element within the element bound."""
    rel = math.sqrt(sq_err / sq_ref) if sq_ref > 0 else float("nan")
    rms = math.sqrt(sq_ref / count) if count > 0 else 0.0
    c = element_weight(tol)
    elem_ok = excess <= c * rms
    ok = rel == rel and rel <= tol and elem_ok
    return rel, max_abs, elem_ok, ok


def drive(ctx, report, meta, baseline, attempts, flops, args, only_rank0=False):
    """Runs one baseline of one case on every rank and adds its row on rank 0.

    attempts: list of (label, factory). factory() builds a runner (prepare: shard inputs,
    allocate) with .run(), .poison(), .out_bytes(), .check(c) -> (sq_err, sq_ref, max_abs,
    excess, count) (see element_excess; c = element_weight(args.tol)),
    .note, .close(). The next attempt is tried only when the previous one failed on some rank.
    Every phase ends with an agreement between ranks, so a failure is a row, not a hang.
    """
    notes, row = [], None
    participate = (not only_rank0) or ctx.rank == 0
    for label, factory in attempts:
        runner, err, stats, timing = None, None, (0.0, 0.0, 0.0, -math.inf, 0), None
        if participate:
            try:
                runner = factory()
            except Exception as e:  # noqa: BLE001
                err = fmt_err(e)
                if args.verbose:
                    traceback.print_exc()
        err = ctx.agree(err)
        if err is None:  # checked run, outputs poisoned first
            if participate:
                try:
                    runner.poison()
                    ctx.poison_cache(runner.out_bytes())
                    runner.run()
                    ctx.sync()
                    stats = runner.check(element_weight(args.tol))
                except Exception as e:  # noqa: BLE001
                    err = fmt_err(e)
                    if args.verbose:
                        traceback.print_exc()
            err = ctx.agree(err)
        if err is None:
            sq_err, sq_ref, count = ctx.allreduce([stats[0], stats[1], float(stats[4])], "sum")
            max_abs, excess = ctx.allreduce([stats[2], stats[3]], "max")
            if participate:
                try:
                    timing = bench(ctx, runner.run, args.target_ms, collective=not only_rank0)
                except Exception as e:  # noqa: BLE001
                    err = fmt_err(e)
            err = ctx.agree(err)
        note = runner.note if runner is not None else ""
        if runner is not None:
            try:
                runner.close()
            except Exception as e:  # noqa: BLE001
                note += f" (close failed: {fmt_err(e)})"
        runner = None
        ctx.free()
        if err is None:
            rel, max_abs, elem_ok, ok = check_stats(sq_err, sq_ref, max_abs, excess, count,
                                                    args.tol)
            if not elem_ok:
                notes.append(f"an element is off by more than {ELEMENT_FACTOR:g} x tol x "
                             "(rms + |want|)")
            ms, nsamp, inner = timing if timing else (None, 0, 0)
            row = dict(meta, baseline=baseline, ms=ms,
                       tflops=(flops / (ms * 1e-3) / 1e12) if ms else None,
                       rel_err=rel, max_abs_err=max_abs, check="ok" if ok else "FAIL",
                       samples=nsamp, calls_per_sample=inner,
                       note="; ".join(x for x in notes + [label, note] if x))
            break
        if notes and err == notes[-1].split(" failed: ", 1)[-1]:
            notes.append(f"{label or 'try'} failed: same")
        else:
            notes.append(f"{label or 'try'} failed: {err}")
        if "skipped:" in err:
            break
    if row is None:
        if len(notes) == 1:
            notes = [notes[0].split(" failed: ", 1)[-1]]
        row = dict(meta, baseline=baseline, ms=None, tflops=None, rel_err=None,
                   max_abs_err=None,
                   check="skipped" if notes and "skipped:" in notes[-1] else "error",
                   samples=0, calls_per_sample=0,
                   note="; ".join(notes))
    report.add(row)
    return row


class Report:
    def __init__(self, ctx, args, title, header):
        self.ctx, self.args, self.title = ctx, args, title
        self.header = header
        self.rows = []
        self.t0 = time.time()

    def add(self, row):
        self.rows.append(row)
        if self.ctx.rank != 0:
            return
        if row["ms"] is not None:
            msg = (f"{row['ms']:10.3f} ms {row['tflops'] or 0:7.1f} TFLOP/s "
                   f"rel {row['rel_err']:.2e} {row['check']}")
        else:
            msg = row["check"].upper()
        print(f"[{time.time() - self.t0:7.1f}s] {row['id']:<34} {row['baseline']:<22} {msg}"
              + (f"  {row['note']}" if row["note"] else ""), file=sys.stderr, flush=True)
        self.write_json()

    def write_json(self):
        if self.ctx.rank != 0 or not self.args.json_out:
            return
        out = _finite(dict(self.header, elapsed_s=round(time.time() - self.t0, 1),
                           results=self.rows))
        tmp = self.args.json_out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1, default=str, allow_nan=False)
        os.replace(tmp, self.args.json_out)

    def table(self):
        if self.ctx.rank != 0:
            return
        h = self.header
        sub = (f"{h.get('device')}, torch {h.get('torch')}, cuDNN {h.get('cudnn', '-')}, "
               f"NCCL {h.get('nccl', '-')}, {h.get('world_size')} ranks, seed {h.get('seed')}, "
               f"inputs {h.get('inputs', '-')}"
               + (f", GQA in cuDNN: {h['gqa_cudnn']}" if "gqa_cudnn" in h else ""))
        lines = [f"### {self.title}", "", sub, "",
                 "| case | baseline | ms | TFLOP/s | rel. err | note |",
                 "| --- | --- | ---: | ---: | ---: | --- |"]
        for r in self.rows:
            ms = f"{r['ms']:.3f}" if r["ms"] is not None else "-"
            tf = f"{r['tflops']:.1f}" if r["tflops"] is not None else "-"
            if r["rel_err"] is None:
                re_ = "-"
            else:
                re_ = (f"{r['rel_err']:.1e}" if r["rel_err"] == r["rel_err"] else "NaN") + (
                    "" if r["check"] == "ok" else " FAIL")
            note = r["note"].replace("|", "/")
            lines.append(f"| {r['id']} | {r['baseline']} | {ms} | {tf} | {re_} | {note} |")
        print("\n".join(lines), flush=True)
        self.write_json()


def finish(ctx, args, report):
    """Prints the table, closes the process group; exit status 3 under --strict on a FAIL."""
    report.table()
    failed = any(r["check"] == "FAIL" for r in report.rows)
    dist.destroy_process_group()
    if args.strict and failed:
        raise SystemExit(3)


def _finite(x):
    """Strict JSON: NaN/inf become null (the row's check already says FAIL)."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def common_args(ap):
    ap.add_argument("--json-out", default=None, help="write the rows as JSON here (rank 0)")
    ap.add_argument("--cases", default=None, help="regex on case ids (re.search)")
    ap.add_argument("--baselines", default=None, help="regex on baseline names")
    ap.add_argument("--quick", action="store_true", help="small first-run case set, short timing")
    ap.add_argument("--full", action="store_true", help="every case (longer)")
    ap.add_argument("--smoke", "--dry-run", dest="smoke", action="store_true",
                    help="CPU + gloo at tiny shapes: exercises the logic and the checks, no GPU")
    ap.add_argument("--estimate", action="store_true",
                    help="print the estimated run time of the selected cases and exit (no torchrun)")
    ap.add_argument("--world-size-check", action="store_true",
                    help="only check ranks vs visible GPUs, print the environment and exit")
    ap.add_argument("--target-ms", type=float, default=None,
                    help="timed milliseconds per baseline (default 1000, --quick 300)")
    ap.add_argument("--tol", type=float, default=2e-2, help="relative error that fails a check")
    ap.add_argument("--seed", type=int, default=None, help="input seed (default: from the clock)")
    ap.add_argument("--inputs", choices=["unit", "normal"], default="unit",
                    help="how inputs are drawn: unit (the default) uniform in [-1, 1) in f32 "
                         "rounded to bf16, every input, as mercury-run draws them; normal: the "
                         "earlier normal draws with the scripts' scales (q x 2, weights / sqrt(K)), "
                         "which cost the same cuDNN kernel 2-3% (docs/perf.md): not alike with ours")
    ap.add_argument("--timeout-s", type=int, default=600, help="process-group timeout")
    ap.add_argument("--world", type=int, default=None, help="ranks assumed by --estimate")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="skip the cases whose estimated time would end past this many seconds "
                         "after start (rows say so); for a launcher with a hard time limit")
    ap.add_argument("--strict", action="store_true",
                    help="exit 3 when a row's numerics check FAILs (errors and skips do not count)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    return ap


def pre_launch(args, estimate_fn):
    """Handles --estimate (no process group) and --world-size-check; returns a Ctx or exits."""
    if args.target_ms is None:
        args.target_ms = 300.0 if args.quick else 1000.0
    if args.estimate:
        world = args.world or int(os.environ.get("WORLD_SIZE", "2"))
        estimate_fn(world)
        raise SystemExit(0)
    if args.world_size_check:
        world = world_size_check(args.smoke)
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"world-size check ok: {world} ranks, {n} visible CUDA device(s), "
                  f"torch {torch.__version__}, env {ENV_FLAGS}", flush=True)
        raise SystemExit(0)
    return Ctx(args.smoke, args.timeout_s)


def over_budget(ctx, args, report, est_s):
    """True (on every rank) when this case would end past --budget-s."""
    if not args.budget_s:
        return False
    end = time.time() - T_START + est_s
    return ctx.allreduce([end], "max")[0] > args.budget_s


def error_rows(report, meta, baselines, check, note):
    for b in baselines:
        report.add(dict(meta, baseline=b, ms=None, tflops=None, rel_err=None, max_abs_err=None,
                        check=check, samples=0, calls_per_sample=0, note=note))


def estimate(args, world, cases, baselines, case_seconds, flops, rates, id_width=32):
    """--estimate: the estimated wall time of each selected case and of the whole run."""
    tot = 20.0
    print(f"estimate for {world} ranks, baselines {', '.join(baselines)}{rates}:")
    for c in cases:
        sec = case_seconds(c, world, baselines, args.target_ms)
        tot += sec
        print(f"  {c['id']:<{id_width}} {flops(c) / 1e12:9.2f} TFLOP  ~{sec:6.1f} s")
    print(f"total ~{tot / 60:.1f} min ({len(cases)} cases, 20 s start-up)")


def run_cases(ctx, args, report, cases, baselines, seed, case_seconds, make_inputs, run_case):
    """The case loop of every baseline script. Per case: skipped under --budget-s; inputs
    made by `make_inputs(case, seed)` (an error on any rank gives every rank error rows);
    then `run_case(meta, inputs)` adds the rows; the inputs are closed and memory freed."""
    for ci, c in enumerate(cases):
        meta = dict(c, world_size=ctx.world)
        est = case_seconds(c, ctx.world, baselines, args.target_ms)
        if over_budget(ctx, args, report, est):
            error_rows(report, meta, baselines, "skipped",
                       f"skipped: --budget-s {args.budget_s:.0f} (case estimated {est:.0f} s)")
            continue
        inp, err = None, None
        try:
            inp = make_inputs(c, seed + ci)
        except Exception as e:  # noqa: BLE001
            err = fmt_err(e)
        err = ctx.agree(err)
        if err is not None:
            error_rows(report, meta, baselines, "error", f"inputs: {err}")
            inp = None
            ctx.free()
            continue
        run_case(meta, inp)
        inp.close()
        inp = None
        ctx.free()


# -- tensor-parallel GEMM runners (gemm.py, mlp.py) ---------------------------------------------
def output_stats(out, ref, out_shape, c):
    """(sum of squared errors, sum of squared reference values, max |error|, element excess,
    count) of `out` against the f32 reference `ref` (element_excess with weight c); a wrong
    shape raises."""
    if tuple(out.shape) != tuple(out_shape):
        raise ValueError(f"output shape {tuple(out.shape)}, expected {tuple(out_shape)}")
    d = out.float() - ref
    return (float((d * d).sum()), float((ref * ref).sum()), float(d.abs().max()),
            element_excess(d, ref, c), ref.numel())


class TpRunner:
    """A baseline over inputs with `c` (the case), `out_shape` and `stats(out)`; bf16 output."""
    base_note = ""

    def __init__(self, ctx, inp):
        self.ctx, self.inp, self.c = ctx, inp, inp.c
        self.out = None
        self.note = self.base_note

    def out_bytes(self):
        return math.prod(self.inp.out_shape) * 2

    def poison(self):
        pass

    def check(self, c):
        return self.inp.stats(self.out, c)

    def close(self):
        self.out = None


class SymmMemRunner(TpRunner):
    """AsyncTP's fused ops on the world group. mode: "op" (torch.ops.symm_mem.*), "op+enable"
    (enable_symm_mem_for_group first), "fallback" (--smoke: torch's own non-symmetric fallback
    of the same ops, CPU/gloo). Sets `ag` (fused_all_gather_matmul), `rs`
    (fused_matmul_reduce_scatter), `gname` and `note` (`what` plus how the ops were reached)."""

    def __init__(self, ctx, inp, mode, what):
        super().__init__(ctx, inp)
        import torch.distributed._symmetric_memory as symm  # registers torch.ops.symm_mem.*
        self.gname = dist.group.WORLD.group_name
        if mode == "op+enable":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                symm.enable_symm_mem_for_group(self.gname)
        if mode == "fallback":
            self.ag = symm._fused_all_gather_matmul_fallback
            self.rs = symm._fused_matmul_reduce_scatter_fallback
            self.note = "smoke: torch's fallback of the symm_mem ops (no symmetric memory)"
        else:
            self.ag = torch.ops.symm_mem.fused_all_gather_matmul
            self.rs = torch.ops.symm_mem.fused_matmul_reduce_scatter
            self.note = what + (", after enable_symm_mem_for_group" if mode == "op+enable" else "")


def tp_attempts(name, ctx, nccl_cublas, asynctp):
    """The attempts of the two tensor-parallel baselines: `nccl_cublas()` and
    `asynctp(mode)` (a SymmMemRunner); the symm_mem ops have CUDA kernels only, so under
    --smoke their CPU failure is expected and torch's fallback runs instead."""
    if name == "nccl_cublas":
        return [("", nccl_cublas)]
    if name == "asynctp":
        if ctx.smoke:
            return [("symm_mem op on CPU", lambda: asynctp("op")),
                    ("", lambda: asynctp("fallback"))]
        return [("symm_mem op", lambda: asynctp("op")),
                ("", lambda: asynctp("op+enable"))]
    raise ValueError(name)


def seed_for(ctx, args):
    s = args.seed if args.seed is not None else time.time_ns() % (2 ** 31)
    return int(ctx.allreduce([float(s)], "max")[0]) if args.seed is None else s


def fill_(t, g, inputs, normal_scale=1.0):
    """Fills bf16 tensor `t` with fresh random inputs from generator `g`. `inputs` is
    --inputs: "unit" draws uniform in [-1, 1) in f32 and rounds to bf16 (every mantissa bit
    random), the distribution of mercury-run's inputs (runtime/src/cpu.rs, random_inputs), so
    both sides of the suite run their kernels on alike data (at the power limit the clocks
    follow the data's bits); "normal" draws N(0, 1) x `normal_scale`. Draws in chunks of
    2^26 values, so the f32 scratch stays at 256 MiB whatever the tensor's size."""
    flat = t.view(-1)
    if inputs == "normal":
        flat.normal_(generator=g)
        if normal_scale != 1.0:
            flat.mul_(normal_scale)
        return
    if inputs != "unit":
        raise ValueError(f"--inputs {inputs}: expected unit or normal")
    chunk = 1 << 26
    for i in range(0, flat.numel(), chunk):
        part = flat[i:i + chunk]
        u = torch.rand(part.numel(), generator=g, device=t.device, dtype=torch.float32)
        part.copy_(u.mul_(2.0).sub_(1.0))


def broadcast_(ctx, *tensors):
    for t in tensors:
        dist.broadcast(t, 0)
