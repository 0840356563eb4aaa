#!/usr/bin/env python3
"""PyTorch tensor-parallel MLP baselines (issue 14), one process per GPU under torchrun.

The Megatron MLP of examples/mlp.mlir and examples/2gpu/mlp_llama3_*.mlir, bf16, N ranks:
Y = GeLU(X W1) W2 with X [M, D] row-sharded (X shard [M/N, D]), W1 [D, F] column-sharded
([D, F/N]), W2 [F, E] row-sharded ([F/N, E]); each rank ends with rows r*M/N.. of Y, [M/N, E].
GeLU is the tanh form (PyTorch's gelu(approximate="tanh"), our UnaryFn::Gelu).

Launch (the launcher must also export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1; this script sets them again before torch.distributed is imported):

    torchrun --standalone --nproc_per_node=2 scripts/baselines/mlp.py --json-out OUT.json
    ... --cases 'llama3-8b' --baselines asynctp
    python3 scripts/baselines/mlp.py --estimate --world 2        # no GPU
    torchrun --standalone --nproc_per_node=2 scripts/baselines/mlp.py --smoke   # CPU, gloo

Cases (ids, our side joins on them): mlp.llama3-8b.m8192 (D = E = 4096, F = 14336) and
mlp.llama3-70b.m8192 (D = E = 8192, F = 28672), M = 8192 tokens. --quick: the same two.

Baselines:
  nccl_cublas  dist.all_gather_into_tensor(X), torch.matmul(out=) with W1, in-place
               gelu(approximate="tanh"), torch.matmul(out=) with W2, dist.reduce_scatter_tensor
               (bf16 sum, NCCL).
  asynctp      torch.ops.symm_mem.fused_all_gather_matmul(X, [W1], 0, group), in-place GeLU,
               torch.ops.symm_mem.fused_matmul_reduce_scatter(H, W2, "sum", 0, group)
               (retried after enable_symm_mem_for_group if the first call fails). Multicast off.
Inputs: uniform in [-1, 1), drawn in f32 and rounded to bf16, as mercury-run draws its inputs
(--inputs normal: the earlier normal draws, which cost the same kernel 2-3% more; not alike).
Checks: fresh random inputs per case (seed from the clock), outputs poisoned (NaN) first, every
rank's output against an f32 reference (TF32 off) of its rows computed on its device from the
full inputs; rel. error = ||out - ref|| / ||ref|| over all ranks, FAIL above --tol
or when an element is off by more than 10 x tol x (rms + |ref|) (mercury-run's rule). Timing as in
gemm.py: ranks aligned before each sample, CUDA events, slowest rank, median.
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
import torch.nn.functional as F  # noqa: E402

BF16 = torch.bfloat16
SMOKE_DIV = 64
BASELINES = ["nccl_cublas", "asynctp"]
MODELS = [("llama3-8b", 4096, 14336), ("llama3-70b", 8192, 28672)]


def all_cases(smoke):
    f = SMOKE_DIV if smoke else 1
    for name, d, ff in MODELS:
        m = 8192
        yield dict(id=f"mlp.{name}.m{m}", kind="mlp", m=m // f, d=d // f, f=ff // f, e=d // f)


def select_cases(args, smoke):
    cases = list(all_cases(smoke))
    if args.cases:
        return [c for c in cases if re.search(args.cases, c["id"])]
    return cases


def select_baselines(args):
    return [b for b in BASELINES if not args.baselines or re.search(args.baselines, b)]


def flops(c):
    return 2.0 * c["m"] * c["f"] * (c["d"] + c["e"])


def gelu_(x):
    """In-place tanh GeLU (the form of our UnaryFn::Gelu)."""
    return torch.ops.aten.gelu_(x, approximate="tanh")


class Inputs:
    """Full X, W1, W2 on every rank (rank 0 draws, broadcast) and this rank's shards."""

    def __init__(self, ctx, c, seed, inputs):
        m, d, f, e, w, r = c["m"], c["d"], c["f"], c["e"], ctx.world, ctx.rank
        for what, size in (("M", m), ("F", f)):
            if size % w:
                raise ValueError(f"{what} = {size} not divisible by {w} ranks")
        self.c = c
        dev = ctx.device
        x = torch.empty(m, d, dtype=BF16, device=dev)
        w1 = torch.empty(d, f, dtype=BF16, device=dev)
        w2 = torch.empty(f, e, dtype=BF16, device=dev)
        if r == 0:
            g = torch.Generator(device=dev)
            g.manual_seed(seed)
            C.fill_(x, g, inputs)
            C.fill_(w1, g, inputs, 1.0 / math.sqrt(d))  # normal: O(1) activations
            C.fill_(w2, g, inputs, 1.0 / math.sqrt(f))
        C.broadcast_(ctx, x, w1, w2)
        self.x = x[r * m // w:(r + 1) * m // w].contiguous()
        self.w1 = w1[:, r * f // w:(r + 1) * f // w].contiguous()
        self.w2 = w2[r * f // w:(r + 1) * f // w].contiguous()
        h = F.gelu(x[r * m // w:(r + 1) * m // w].float() @ w1.float(), approximate="tanh")
        self.ref = h @ w2.float()                                  # [M/N, E]
        self.out_shape = (m // w, e)
        del x, w1, w2, h

    def stats(self, out, c):
        return C.output_stats(out, self.ref, self.out_shape, c)

    def close(self):
        self.x = self.w1 = self.w2 = self.ref = None


class NcclCublas(C.TpRunner):
    def __init__(self, ctx, inp):
        super().__init__(ctx, inp)
        c, w = self.c, ctx.world
        e = dict(dtype=BF16, device=ctx.device)
        self.xg = torch.empty(c["m"], c["d"], **e)              # gathered X
        self.h = torch.empty(c["m"], c["f"] // w, **e)          # hidden activation
        self.p = torch.empty(c["m"], c["e"], **e)               # partial Y
        self.res = torch.empty(*inp.out_shape, **e)
        self.note = "all_gather_into_tensor, matmul, gelu_(tanh), matmul, reduce_scatter_tensor"

    def poison(self):
        for t in (self.xg, self.h, self.p, self.res):
            t.fill_(float("nan"))

    def run(self):
        dist.all_gather_into_tensor(self.xg, self.inp.x)
        torch.matmul(self.xg, self.inp.w1, out=self.h)
        gelu_(self.h)
        torch.matmul(self.h, self.inp.w2, out=self.p)
        dist.reduce_scatter_tensor(self.res, self.p)
        self.out = self.res


class AsyncTP(C.SymmMemRunner):
    def __init__(self, ctx, inp, mode):
        super().__init__(ctx, inp, mode,
                         "fused_all_gather_matmul, gelu_(tanh), fused_matmul_reduce_scatter")

    def run(self):
        _, outs = self.ag(self.inp.x, [self.inp.w1], 0, self.gname)
        h = gelu_(outs[0])
        self.out = self.rs(h, self.inp.w2, "sum", 0, self.gname)


def attempts_for(name, ctx, inp):
    return C.tp_attempts(name, ctx, lambda: NcclCublas(ctx, inp),
                         lambda mode: AsyncTP(ctx, inp, mode))


def case_seconds(c, world, baselines, target_ms):
    comp = flops(c) / world / C.RATE_GEMM * 1e3
    comm = (c["m"] * c["d"] + c["m"] * c["e"]) * 2 * (world - 1) / world / C.RATE_LINK * 1e3
    # Inputs, the f32 reference (TF32 off, ~50 TFLOP/s) and start-up.
    total = 0.5 + (c["d"] * c["f"] * 2) * 4 / 50e9 + flops(c) / world / 50e12
    for b in baselines:
        t = comp + comm if b == "nccl_cublas" else max(comp, comm) * 1.1
        inner = 1 if t >= 2 else math.ceil(2 / t)
        n = max(2, min(30, round(target_ms / (t * inner))))
        total += (1 + 1 + n * inner) * t / 1e3 + 0.3
    return total


def estimate(args, world):
    C.estimate(args, world, select_cases(args, False), select_baselines(args), case_seconds,
               flops, "", id_width=28)


def main():
    ap = C.common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = ap.parse_args()
    ctx = C.pre_launch(args, lambda world: estimate(args, world))
    if ctx.cuda:
        torch.backends.cuda.matmul.allow_tf32 = False   # the f32 reference stays f32
    cases = select_cases(args, ctx.smoke)
    baselines = select_baselines(args)
    seed = C.seed_for(ctx, args)
    header = dict(ctx.info(), script="mlp.py", argv=sys.argv[1:], seed=seed, inputs=args.inputs,
                  baselines=baselines, tol=args.tol)
    report = C.Report(ctx, args, f"tensor-parallel MLP baselines, {ctx.world} ranks", header)
    if ctx.rank == 0:
        print(f"mlp baselines: {len(cases)} cases x {len(baselines)} baselines on {ctx.world} "
              f"ranks ({header['device']}), seed {seed}", file=sys.stderr, flush=True)
    C.run_cases(ctx, args, report, cases, baselines, seed, case_seconds,
                lambda c, sd: Inputs(ctx, c, sd, args.inputs),
                lambda meta, inp: [C.drive(ctx, report, meta, b, attempts_for(b, ctx, inp),
                                           flops(meta), args) for b in baselines])
    C.finish(ctx, args, report)


if __name__ == "__main__":
    main()
