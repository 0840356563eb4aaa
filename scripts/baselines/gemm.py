#!/usr/bin/env python3
"""PyTorch tensor-parallel GEMM baselines for issue 13, one process per GPU under torchrun.

Launch (the launcher must also export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1; this script sets them again before torch.distributed is imported):

    torchrun --standalone --nproc_per_node=2 scripts/baselines/gemm.py --json-out OUT.json
    ... --quick                      # the four M = 8192 cases, short timing
    ... --cases 'gemm.ag' --baselines asynctp
    python3 scripts/baselines/gemm.py --estimate --world 2        # no GPU
    torchrun --standalone --nproc_per_node=2 scripts/baselines/gemm.py --world-size-check

Smoke test without a GPU (CPU, gloo, shapes / 64; AsyncTP runs torch's own non-symmetric
fallback of the same ops there, so the call signatures and result handling are exercised):

    torchrun --standalone --nproc_per_node=2 scripts/baselines/gemm.py --smoke

Operations (bf16 in and out, N ranks):
  ag  all-gather GEMM: A [M/N, K] row-sharded is all-gathered, times B [K, Ncols/N]
      column-sharded; each rank ends with C[:, its columns] = A @ B_shard, [M, Ncols/N].
  rs  GEMM reduce-scatter: A [M, K/N] times B [K/N, Ncols], partial products reduce-scattered
      over M; each rank ends with rows r*M/N.. of A @ B, [M/N, Ncols].
Cases: Ncols = K = 8192 with M in 1024..16384, and the Llama-3-70B MLP pair (TP up projection
as ag: K = 8192, Ncols = 28672; down projection as rs: K = 28672, Ncols = 8192) at M in 2048,
8192, 16384. Case ids (stable, our side joins on them): gemm.<ag|rs>.m<M>.n<Ncols>.k<K>, e.g.
gemm.ag.m8192.n8192.k8192, gemm.rs.m8192.n8192.k8192, and gemm.ag.llama70b.m<M> (K 8192,
Ncols 28672), gemm.rs.llama70b.m<M> (K 28672, Ncols 8192). Each row also carries m, n, k.

Baselines:
  nccl_cublas  dist.all_gather_into_tensor + torch.matmul(out=), or torch.matmul(out=) +
               dist.reduce_scatter_tensor (sum in bf16, NCCL).
  asynctp      torch.ops.symm_mem.fused_all_gather_matmul(A, [B], 0, group_name) and
               torch.ops.symm_mem.fused_matmul_reduce_scatter(A, B, "sum", 0, group_name)
               (torch 2.11 needs no enable_symm_mem_for_group; if the first call fails it is
               called and the op retried, said in the note). Multicast disabled.
Inputs: uniform in [-1, 1), drawn in f32 and rounded to bf16, as mercury-run draws its inputs
(--inputs normal: the earlier normal draws, which cost the same kernel 2-3% more; not alike).
Checks: fresh random inputs per case (seed from the clock), outputs poisoned (NaN) first, every
rank's whole output against an f32 reference (TF32 off) computed on its device from the full
inputs; rel. error = ||out - ref|| / ||ref|| over all ranks, FAIL above --tol
or when an element is off by more than 10 x tol x (rms + |ref|) (mercury-run's rule). Timing as in
attention.py: ranks aligned before each sample, CUDA events, slowest rank, median.
"""
import os

os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                   "NVSHMEM_DISABLE_NVLS": "1"})

import argparse  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

BF16 = torch.bfloat16
SQUARE_M = [1024, 2048, 4096, 8192, 16384]
LLAMA_M = [2048, 8192, 16384]
SMOKE_DIV = 64
QUICK = ["gemm.ag.m8192.n8192.k8192", "gemm.rs.m8192.n8192.k8192", "gemm.ag.llama70b.m8192",
         "gemm.rs.llama70b.m8192"]
BASELINES = ["nccl_cublas", "asynctp"]


def all_cases(smoke):
    f = SMOKE_DIV if smoke else 1

    def case(cid, op, m, n, k):
        return dict(id=cid, kind="gemm", op=op, m=m // f, n=n // f, k=k // f)
    for op in ("ag", "rs"):
        for m in SQUARE_M:
            yield case(f"gemm.{op}.m{m}.n8192.k8192", op, m, 8192, 8192)
        for m in LLAMA_M:
            n, k = (28672, 8192) if op == "ag" else (8192, 28672)
            yield case(f"gemm.{op}.llama70b.m{m}", op, m, n, k)


def select_cases(args, smoke):
    cases = list(all_cases(smoke))
    if args.cases:
        return [c for c in cases if re.search(args.cases, c["id"])]
    if args.quick:
        return [c for c in cases if c["id"] in QUICK]
    return cases


def select_baselines(args):
    return [b for b in BASELINES if not args.baselines or re.search(args.baselines, b)]


def flops(c):
    return 2.0 * c["m"] * c["n"] * c["k"]


# -- inputs ------------------------------------------------------------------------------------
class Inputs:
    """Full A [M, K], B [K, Ncols] on every rank (rank 0 draws, broadcast) and this rank's shards."""

    def __init__(self, ctx, c, seed, inputs):
        m, n, k, w, r = c["m"], c["n"], c["k"], ctx.world, ctx.rank
        for what, size in (("M", m), ("Ncols", n) if c["op"] == "ag" else ("K", k)):
            if size % w:
                raise ValueError(f"{what} = {size} not divisible by {w} ranks")
        self.c, self.ctx = c, ctx
        a = torch.empty(m, k, dtype=BF16, device=ctx.device)
        b = torch.empty(k, n, dtype=BF16, device=ctx.device)
        if r == 0:
            g = torch.Generator(device=ctx.device)
            g.manual_seed(seed)
            C.fill_(a, g, inputs)
            C.fill_(b, g, inputs, 1.0 / math.sqrt(k))  # normal: outputs O(1)
        C.broadcast_(ctx, a, b)
        if c["op"] == "ag":
            self.a = a[r * m // w:(r + 1) * m // w].contiguous()
            self.b = b[:, r * n // w:(r + 1) * n // w].contiguous()
            self.ref = a.float() @ self.b.float()                      # [M, Ncols/N]
            self.out_shape = (m, n // w)
        else:
            self.a = a[:, r * k // w:(r + 1) * k // w].contiguous()
            self.b = b[r * k // w:(r + 1) * k // w].contiguous()
            self.ref = a[r * m // w:(r + 1) * m // w].float() @ b.float()   # [M/N, Ncols]
            self.out_shape = (m // w, n)
        del a, b

    def stats(self, out, c):
        return C.output_stats(out, self.ref, self.out_shape, c)

    def close(self):
        self.a = self.b = self.ref = None


# -- baselines ---------------------------------------------------------------------------------
class NcclCublas(C.TpRunner):
    def __init__(self, ctx, inp):
        super().__init__(ctx, inp)
        e = dict(dtype=BF16, device=ctx.device)
        if self.c["op"] == "ag":
            self.buf = torch.empty(self.c["m"], self.c["k"], **e)            # gathered A
            self.note = "all_gather_into_tensor, then matmul"
        else:
            self.buf = torch.empty(self.c["m"], self.c["n"], **e)            # partial product
            self.note = "matmul, then reduce_scatter_tensor (bf16 sum)"
        self.res = torch.empty(*inp.out_shape, **e)

    def poison(self):
        self.buf.fill_(float("nan"))
        self.res.fill_(float("nan"))

    def run(self):
        if self.c["op"] == "ag":
            dist.all_gather_into_tensor(self.buf, self.inp.a)
            torch.matmul(self.buf, self.inp.b, out=self.res)
        else:
            torch.matmul(self.inp.a, self.inp.b, out=self.buf)
            dist.reduce_scatter_tensor(self.res, self.buf)
        self.out = self.res


class AsyncTP(C.SymmMemRunner):
    def __init__(self, ctx, inp, mode):
        super().__init__(ctx, inp, mode, "fused_all_gather_matmul" if inp.c["op"] == "ag"
                         else "fused_matmul_reduce_scatter")

    def run(self):
        if self.c["op"] == "ag":
            _, outs = self.ag(self.inp.a, [self.inp.b], 0, self.gname)
            self.out = outs[0]
        else:
            self.out = self.rs(self.inp.a, self.inp.b, "sum", 0, self.gname)


def attempts_for(name, ctx, inp):
    return C.tp_attempts(name, ctx, lambda: NcclCublas(ctx, inp),
                         lambda mode: AsyncTP(ctx, inp, mode))


# -- estimate and driver -------------------------------------------------------------------------
def case_seconds(c, world, baselines, target_ms):
    comp = flops(c) / world / C.RATE_GEMM * 1e3
    moved = (c["m"] * c["k"] if c["op"] == "ag" else c["m"] * c["n"]) * 2 * (world - 1) / world
    comm = moved / C.RATE_LINK * 1e3
    total = 0.3 + 2 * (c["m"] * c["k"] + c["k"] * c["n"]) * 4 / 50e9 + flops(c) / world / 50e12
    for b in baselines:
        t = comp + comm if b == "nccl_cublas" else max(comp, comm) * 1.1
        inner = 1 if t >= 2 else math.ceil(2 / t)
        n = max(2, min(30, round(target_ms / (t * inner))))
        total += (1 + 1 + n * inner) * t / 1e3 + 0.3
    return total


def estimate(args, world):
    C.estimate(args, world, select_cases(args, False), select_baselines(args), case_seconds,
               flops, f", GEMM at {C.RATE_GEMM / 1e12:.0f} TFLOP/s per GPU, links at "
               f"{C.RATE_LINK / 1e9:.0f} GB/s")


def main():
    ap = C.common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = ap.parse_args()
    ctx = C.pre_launch(args, lambda world: estimate(args, world))
    if ctx.cuda:
        torch.backends.cuda.matmul.allow_tf32 = False   # the f32 reference stays f32
    cases = select_cases(args, ctx.smoke)
    baselines = select_baselines(args)
    seed = C.seed_for(ctx, args)
    header = dict(ctx.info(), script="gemm.py", argv=sys.argv[1:], seed=seed, inputs=args.inputs,
                  baselines=baselines, tol=args.tol)
    report = C.Report(ctx, args, f"tensor-parallel GEMM baselines, {ctx.world} ranks", header)
    if ctx.rank == 0:
        print(f"gemm baselines: {len(cases)} cases x {len(baselines)} baselines on {ctx.world} "
              f"ranks ({header['device']}), seed {seed}", file=sys.stderr, flush=True)
    C.run_cases(ctx, args, report, cases, baselines, seed, case_seconds,
                lambda c, sd: Inputs(ctx, c, sd, args.inputs),
                lambda meta, inp: [C.drive(ctx, report, meta, b, attempts_for(b, ctx, inp),
                                           flops(meta), args) for b in baselines])
    C.finish(ctx, args, report)


if __name__ == "__main__":
    main()
