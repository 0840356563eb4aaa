#!/usr/bin/env python3
"""PyTorch attention baselines for issue 13, one process per GPU under torchrun.

Launch (the launcher must also export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
NVSHMEM_DISABLE_NVLS=1; this script sets them again before torch.distributed is imported):

    torchrun --standalone --nproc_per_node=2 scripts/baselines/attention.py --json-out OUT.json
    ... --quick                      # 4 cases, short timing: a first run (~1 min on 2 H200s)
    ... --full                       # adds the 512K non-causal cases (~6.5 min on 2 H200s)
    ... --cases 'gqa.*s128k' --baselines 'ulysses|cp_ring'
    python3 scripts/baselines/attention.py --estimate --world 2 [--quick|--full]   # no GPU
    torchrun --standalone --nproc_per_node=2 scripts/baselines/attention.py --world-size-check

Smoke test without a GPU (CPU, gloo, tiny shapes, same code paths except cuDNN and torch CP):

    torchrun --standalone --nproc_per_node=2 scripts/baselines/attention.py --smoke
    torchrun --standalone --nproc_per_node=4 scripts/baselines/attention.py --smoke --full

Cases: MHA (32 query and K/V heads) and GQA (32 query / 8 K/V heads), head dim 128, bf16;
batch 1 at 32K, 128K, 512K tokens and batch 16 at 4K; causal and non-causal. Case ids (stable,
our side joins on them): attn.<mha|gqa>.b<batch>.s<32k|128k|512k|4k>.<causal|noncausal>, e.g.
attn.mha.b1.s32k.causal, attn.gqa.b1.s128k.noncausal, attn.mha.b16.s4k.noncausal. Default set:
every case but the 512K non-causal ones (--full adds them, --cases selects from all).

Baselines (each row: median ms, TFLOP/s of the whole problem, relative error, note):
  cudnn_1gpu          whole problem on rank 0, SDPA with the CUDNN_ATTENTION backend only
                      (skipped when it does not fit); other rows get scaling_eff = t1 / (N t).
  torch_cp_ring       torch.distributed.tensor.experimental.context_parallel, cuDNN per block,
                      K/V rotated around the ring (set_rotate_method("alltoall")); load balancing
                      (head-tail) ON for causal, OFF for non-causal (_cp_options.enable_load_balance).
  torch_cp_allgather  the same with torch 2.11's default rotation: one all-gather of K/V, then
                      the ring's block loop.
  allgather_kv        all_gather K and V (NCCL), local cuDNN on the local query shard. Non-causal:
                      contiguous shards, one SDPA call. Causal: zigzag shards (rank r holds
                      chunks r and 2N-1-r of 2N), gathered K/V put back in order (one
                      index_select), then per query chunk c: cuDNN causal on the diagonal block
                      + cuDNN non-causal on K[0:cL], merged through the softmax statistics (LSE).
  ulysses             all-to-all sequence->heads, cuDNN SDPA on the full sequence for H/N heads,
                      all-to-all back. GQA: K/V heads split over ranks when N divides them, else
                      replicated (each rank gets the K/V head of its query heads).
Own baselines keep Megatron's [s, b, h, d] activation layout (gathers need no copies); torch CP
takes [b, h, s, d] (its seq dim is 2). GQA uses cuDNN's native GQA when a start-up probe shows it
works, else K/V are expanded to all heads (said in the note).

Inputs: uniform in [-1, 1), drawn in f32 and rounded to bf16, as mercury-run draws its inputs
(--inputs normal: the earlier normal draws, which cost the same kernel 2-3% more; not alike).
Checks: fresh random inputs per case (seed from the clock, printed; --seed fixes it), outputs
poisoned (NaN) first, every rank compares its rows at sampled positions (shard boundaries, first
and last rows, 48 random; first and last batch; first and last head, one head of each
rank's head group, two at random) against an f64 reference computed on one device
from the full inputs; rel. error = ||out - ref|| / ||ref|| over those rows, FAIL above --tol or when an
element is off by more than 10 x tol x (rms + |ref|) (mercury-run's --check rule).
Timing: the checked run is the warm-up, then samples of >= 2 ms each, ranks aligned by a
device-side all-reduce before each sample, CUDA events; a sample is the slowest rank's time; the
row is the median (2..30 samples, about --target-ms per baseline).
"""
import os

os.environ.update({"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                   "NVSHMEM_DISABLE_NVLS": "1"})

import argparse  # noqa: E402
import contextlib  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common as C  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

_ORIG_SDPA = F.scaled_dot_product_attention  # torch CP monkey-patches F's attribute
BF16 = torch.bfloat16

SHAPES = [("b1.s32k", 1, 32768), ("b1.s128k", 1, 131072), ("b1.s512k", 1, 524288),
          ("b16.s4k", 16, 4096)]
VARIANTS = [("mha", 32, 32), ("gqa", 32, 8)]
HEAD_DIM = 128
# --smoke: same ids, tiny shapes (8 q heads, GQA 8/2 so 4 and 8 ranks replicate K/V heads).
SMOKE_SHAPES = {"b1.s32k": (1, 256), "b1.s128k": (1, 512), "b1.s512k": (1, 1024),
                "b16.s4k": (3, 128)}
SMOKE_HEADS = {"mha": (8, 8), "gqa": (8, 2)}
SMOKE_HEAD_DIM = 32
QUICK = ["attn.mha.b1.s32k.causal", "attn.mha.b1.s32k.noncausal", "attn.gqa.b1.s32k.noncausal",
         "attn.mha.b16.s4k.noncausal"]
BASELINES = ["cudnn_1gpu", "torch_cp_ring", "torch_cp_allgather", "allgather_kv", "ulysses"]


def all_cases(smoke):
    for v, hq, hk in VARIANTS:
        for sname, b, s in SHAPES:
            for causal in (True, False):
                cid = f"attn.{v}.{sname}.{'causal' if causal else 'noncausal'}"
                d = HEAD_DIM
                if smoke:
                    b, s = SMOKE_SHAPES[sname]
                    hq, hk = SMOKE_HEADS[v]
                    d = SMOKE_HEAD_DIM
                yield dict(id=cid, kind="attention", variant=v, b=b, hq=hq, hkv=hk, s=s, d=d,
                           causal=causal)


def select_cases(args, smoke):
    cases = list(all_cases(smoke))
    if args.cases:
        return [c for c in cases if re.search(args.cases, c["id"])]
    if args.quick:
        return [c for c in cases if c["id"] in QUICK]
    if args.full:
        return cases
    return [c for c in cases if not (".s512k." in c["id"] and not c["causal"])]


def select_baselines(args):
    return [b for b in BASELINES if not args.baselines or re.search(args.baselines, b)]


def flops(c):
    return 4.0 * c["b"] * c["hq"] * c["s"] * c["s"] * c["d"] * (0.5 if c["causal"] else 1.0)


# -- attention kernels ----------------------------------------------------------------------
class Kern:
    """cuDNN SDPA (with or without softmax statistics) on CUDA, math on CPU (--smoke)."""

    def __init__(self, ctx):
        self.cuda = ctx.cuda
        self.gqa_native = True       # decided by probe()
        self.need_contig = {}        # (kind, gqa) -> True when strided inputs were refused
        self.used = set()            # fallbacks used since the last reset (goes into notes)

    def probe(self, ctx):
        """Does cuDNN SDPA take fewer K/V heads than query heads, with right results?"""
        if not self.cuda:
            return "math (smoke)"
        ok, why = 1.0, "native"
        try:
            g = torch.Generator(device=ctx.device)
            g.manual_seed(1)
            q = torch.randn(1, 4, 256, 128, device=ctx.device, dtype=BF16, generator=g)
            k = torch.randn(1, 2, 256, 128, device=ctx.device, dtype=BF16, generator=g)
            v = torch.randn(1, 2, 256, 128, device=ctx.device, dtype=BF16, generator=g)
            ke, ve = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                a = _ORIG_SDPA(q, k, v, is_causal=True, enable_gqa=True)
                b = _ORIG_SDPA(q, ke, ve, is_causal=True)
            c = torch.ops.aten._scaled_dot_product_cudnn_attention(
                q, k, v, None, True, 0.0, True, False)[0]
            err = max((a.float() - b.float()).abs().max().item(),
                      (c.float() - b.float()).abs().max().item())
            if not err < 1e-2:
                ok, why = 0.0, f"wrong results (max err {err:.2e})"
        except Exception as e:  # noqa: BLE001
            ok, why = 0.0, C.fmt_err(e)[:120]
        ok = ctx.allreduce([ok], "min")[0]
        self.gqa_native = ok == 1.0
        return "native" if self.gqa_native else f"K/V expanded ({why})"

    def _prep(self, q, k, v):
        if q.size(1) != k.size(1) and not self.gqa_native:
            g = q.size(1) // k.size(1)
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
            self.used.add("K/V expanded per call")
        return k, v

    def _call(self, kind, fn, q, k, v):
        key = (kind, q.size(1) != k.size(1))
        if self.need_contig.get(key):
            return fn(q.contiguous(), k.contiguous(), v.contiguous())
        try:
            return fn(q, k, v)
        except RuntimeError:
            if all(t.is_contiguous() for t in (q, k, v)):
                raise
            self.need_contig[key] = True
            self.used.add("inputs made contiguous (strided layout refused)")
            return fn(q.contiguous(), k.contiguous(), v.contiguous())

    def sdpa(self, q, k, v, causal):
        """[b, h, s, d] views in, [b, h, s, d] out."""
        k, v = self._prep(q, k, v)
        gqa = q.size(1) != k.size(1)
        if not self.cuda:
            return _ORIG_SDPA(q, k, v, is_causal=causal, enable_gqa=gqa)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def fn(q, k, v):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                return _ORIG_SDPA(q, k, v, is_causal=causal, enable_gqa=gqa)
        return self._call("sdpa", fn, q, k, v)

    def sdpa_lse(self, q, k, v, causal):
        """Returns (out [b, h, s, d], lse [b, h, s, 1] f32, natural log). is_causal is the
        top-left diagonal: only used here on square blocks."""
        k, v = self._prep(q, k, v)
        b, h, s, _ = q.shape
        if not self.cuda:
            return _math_lse(q, k, v, causal)

        def fn(q, k, v):
            r = torch.ops.aten._scaled_dot_product_cudnn_attention(
                q, k, v, None, True, 0.0, causal, False)
            return r[0], r[1].reshape(b, h, s, 1).float()
        return self._call("lse", fn, q, k, v)


def _math_lse(q, k, v, causal):
    b, h, sq, d = q.shape
    if k.size(1) != h:
        g = h // k.size(1)
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) / math.sqrt(d)
    if causal:
        s.masked_fill_(torch.ones(sq, k.size(2), dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1, keepdim=True)
    return torch.matmul(torch.exp(s - lse), v.float()).to(q.dtype), lse


def merge_into(dst, o1, l1, o2, l2):
    """dst <- softmax-weighted merge of two partial attentions over disjoint key sets."""
    dst.copy_(torch.lerp(o1.float(), o2.float(), torch.sigmoid(l2 - l1)))


def bhsd(x):  # [s, b, h, d] storage -> [b, h, s, d] view
    return x.permute(1, 2, 0, 3)


def sbhd(x_bhsd, pos):  # full [b, h, s, d] -> local rows at pos as contiguous [s, b, h, d]
    return x_bhsd.index_select(2, pos).permute(2, 0, 1, 3).contiguous()


def zigzag_positions(s, n, r, device):
    L = s // (2 * n)
    a, b = r, 2 * n - 1 - r
    return torch.cat([torch.arange(a * L, (a + 1) * L), torch.arange(b * L, (b + 1) * L)]).to(device)


def contiguous_positions(s, n, r, device):
    return torch.arange(r * s // n, (r + 1) * s // n, device=device)


# -- inputs and the reference ------------------------------------------------------------------
class Inputs:
    def __init__(self, ctx, case, seed, inputs):
        b, hq, hk, s, d = case["b"], case["hq"], case["hkv"], case["s"], case["d"]
        self.case, self.ctx = case, ctx
        self.q = torch.empty(b, hq, s, d, dtype=BF16, device=ctx.device)
        self.k = torch.empty(b, hk, s, d, dtype=BF16, device=ctx.device)
        self.v = torch.empty(b, hk, s, d, dtype=BF16, device=ctx.device)
        if ctx.rank == 0:
            g = torch.Generator(device=ctx.device)
            g.manual_seed(seed)
            # --inputs normal: q x 2 (score std ~2, attention less uniform than at std 1).
            for t, scale in ((self.q, 2.0), (self.k, 1.0), (self.v, 1.0)):
                C.fill_(t, g, inputs, scale)
        C.broadcast_(ctx, self.q, self.k, self.v)
        self._reference(seed)

    def _reference(self, seed):
        """f64 reference at sampled rows, from the full inputs, on this device."""
        c, ctx = self.case, self.ctx
        b, hq, hk, s, d = c["b"], c["hq"], c["hkv"], c["s"], c["d"]
        n = ctx.world
        L = s // (2 * n)
        g = torch.Generator()
        g.manual_seed(seed + 1)
        pos = {0, 1, s - 2, s - 1}
        for j in range(1, 2 * n):
            pos |= {j * L - 1, j * L}
        pos |= set(torch.randint(0, s, (48,), generator=g).tolist())
        self.pos = torch.tensor(sorted(pos), device=ctx.device)
        # first, last, one head in each rank's head group (Ulysses), two more at random
        grp = max(1, hq // n)
        heads = {0, hq - 1} | set(torch.randint(0, hq, (2,), generator=g).tolist())
        heads |= {j * grp + int(torch.randint(0, grp, (1,), generator=g)) for j in range(hq // grp)}
        self.ref = {}
        for bi in sorted({0, b - 1}):
            for h in sorted(heads):
                qr = self.q[bi, h].index_select(0, self.pos).double()
                kk = self.k[bi, h // (hq // hk)].double()
                vv = self.v[bi, h // (hq // hk)].double()
                sc = (qr @ kk.T) / math.sqrt(d)
                if c["causal"]:
                    cols = torch.arange(s, device=ctx.device)
                    sc.masked_fill_(cols[None, :] > self.pos[:, None], float("-inf"))
                self.ref[(bi, h)] = torch.softmax(sc, -1) @ vv
        del kk, vv, sc

    def stats(self, out_bhsd, pos_local, c):
        """(sum sq err, sum sq ref, max abs err, element excess, count) over the sampled rows
        this rank holds (C.element_excess with weight c)."""
        s = self.case["s"]
        inv = torch.full((s,), -1, dtype=torch.long, device=self.ctx.device)
        inv[pos_local] = torch.arange(pos_local.numel(), device=self.ctx.device)
        li = inv[self.pos]
        m = li >= 0
        sel = li[m]
        se = sr = 0.0
        mx = 0.0
        ex, cnt = -math.inf, 0
        if sel.numel() == 0:
            return se, sr, mx, ex, cnt
        for (bi, h), ref in self.ref.items():
            got = out_bhsd[bi, h].index_select(0, sel).double()
            r = ref[m]
            dlt = got - r
            se += float((dlt * dlt).sum())
            sr += float((r * r).sum())
            a = float(dlt.abs().max())
            mx = a if (a != a or a > mx) else mx
            e = C.element_excess(dlt, r, c)
            ex = e if (e != e or e > ex) else ex
            cnt += r.numel()
        return se, sr, mx, ex, cnt

    def close(self):
        self.q = self.k = self.v = None
        self.ref = None


# -- baselines -------------------------------------------------------------------------------------
class Runner:
    base_note = ""

    def __init__(self, ctx, kern, inp):
        self.ctx, self.kern, self.inp, self.c = ctx, kern, inp, inp.case
        kern.used.clear()

    @property
    def note(self):
        return ", ".join(x for x in [self.base_note] + sorted(self.kern.used) if x)

    def out_bytes(self):
        c = self.c
        return c["b"] * c["hq"] * c["s"] * c["d"] * 2 // self.ctx.world

    def poison(self):
        pass

    def close(self):
        pass


class Single(Runner):
    def __init__(self, ctx, kern, inp):
        super().__init__(ctx, kern, inp)
        if ctx.cuda:
            need = inp.q.numel() * 2 + (2 << 30)
            if inp.q.size(1) != inp.k.size(1) and not kern.gqa_native:
                need += 2 * inp.q.numel() * 2
            free, _ = torch.cuda.mem_get_info(ctx.device)
            if need > free:
                raise C.Skip(f"needs ~{need / 2**30:.0f} GiB more on one GPU, {free / 2**30:.0f} free")
        self.out = None

    def out_bytes(self):
        return self.inp.q.numel() * 2

    def run(self):
        self.out = self.kern.sdpa(self.inp.q, self.inp.k, self.inp.v, self.c["causal"])

    def check(self, c):
        return self.inp.stats(self.out, torch.arange(self.c["s"], device=self.ctx.device), c)

    def close(self):
        self.out = None


_MESH = {}


def _mesh(ctx):
    if "m" not in _MESH:
        from torch.distributed.device_mesh import init_device_mesh
        _MESH["m"] = init_device_mesh(ctx.device.type, (ctx.world,))
    return _MESH["m"]


def _cp_module():
    try:
        from torch.distributed.tensor.experimental._context_parallel import _attention as cpa
    except ImportError:  # older layout
        from torch.distributed.tensor.experimental import _attention as cpa
    return cpa


def _smoke_cpu_cp_handler(op_call, args, kwargs):
    """--smoke only: torch CP has no handler for the CPU flash kernel; this one runs torch's own
    ring (_templated_ring_attention, same load balancing and rotation options) with it, so the
    smoke run exercises the context_parallel sharding, options and position mapping."""
    from torch.distributed.tensor import DTensor, Shard
    cpa = _cp_module()
    q, k, v = args[:3]
    is_causal = args[4] if len(args) > 4 else kwargs.get("is_causal", False)
    scale = kwargs.get("scale")
    mesh = q.device_mesh

    def op(q, k, v, is_causal=False, **kw):
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, 0.0, bool(is_causal), scale=scale)
    out, lse = cpa._templated_ring_attention(mesh.get_group(), 2, op, q.to_local(),
                                             k.to_local(), v.to_local(), is_causal=is_causal)[:2]
    return tuple(DTensor.from_local(t, mesh, [Shard(2)], run_check=False) for t in (out, lse))


class TorchCP(Runner):
    def __init__(self, ctx, kern, inp, rotate, expand_kv):
        super().__init__(ctx, kern, inp)
        cpa = _cp_module()
        c = self.c
        self.cm = None
        self.gqa = c["hq"] != c["hkv"] and not expand_kv
        if ctx.smoke:
            cpa.custom_ops[torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default] = \
                _smoke_cpu_cp_handler
        cpa._cp_options.enable_load_balance = bool(c["causal"])
        cpa.set_rotate_method(rotate)
        q = inp.q.clone()
        if expand_kv and c["hq"] != c["hkv"]:
            g = c["hq"] // c["hkv"]
            k, v = inp.k.repeat_interleave(g, 1), inp.v.repeat_interleave(g, 1)
        else:
            k, v = inp.k.clone(), inp.v.clone()
        self.base_note = (f"load balance {'ON (head-tail)' if c['causal'] else 'OFF'}, "
                          f"rotate={rotate}" + (", K/V expanded" if expand_kv and c["hq"] != c["hkv"] else ""))
        cm = cpa.context_parallel(_mesh(ctx), buffers=[q, k, v], buffer_seq_dims=[2, 2, 2],
                                  no_restore_buffers={q, k, v})
        cm.__enter__()
        self.cm = cm
        self.q, self.k, self.v = q, k, v  # now this rank's shards
        s, n = c["s"], ctx.world
        try:
            from torch.distributed.tensor.experimental._context_parallel._load_balancer import (
                _create_default_load_balancer)
            lb = _create_default_load_balancer(s, n, ctx.device)
            idx = lb._generate_indices()[0] if lb is not None else torch.arange(s)
            self.pos = idx.to(ctx.device).view(n, -1)[ctx.rank].contiguous()
        except ImportError:
            self.pos = (zigzag_positions if c["causal"] else contiguous_positions)(s, n, ctx.rank, ctx.device)
        self.out = None

    def run(self):
        kctx = contextlib.nullcontext()
        if self.ctx.cuda:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            kctx = sdpa_kernel([SDPBackend.CUDNN_ATTENTION])
        with kctx:
            self.out = F.scaled_dot_product_attention(self.q, self.k, self.v,
                                                      is_causal=self.c["causal"],
                                                      enable_gqa=self.gqa)

    def check(self, c):
        return self.inp.stats(self.out, self.pos, c)

    def close(self):
        self.out = None
        if self.cm is not None:
            cm, self.cm = self.cm, None
            cm.__exit__(None, None, None)
        if F.scaled_dot_product_attention is not _ORIG_SDPA:  # never leave SDPA patched
            F.scaled_dot_product_attention = _ORIG_SDPA
        self.q = self.k = self.v = None


class AllGatherKV(Runner):
    def __init__(self, ctx, kern, inp):
        super().__init__(ctx, kern, inp)
        c, n, r = self.c, ctx.world, ctx.rank
        s, self.causal = c["s"], c["causal"]
        if self.causal:
            self.pos = zigzag_positions(s, n, r, ctx.device)
            self.base_note = ("zigzag shards (chunks r, 2N-1-r); per chunk: diagonal block causal + "
                              "prefix non-causal, LSE merge")
        else:
            self.pos = contiguous_positions(s, n, r, ctx.device)
            self.base_note = "contiguous shards, one SDPA on gathered K/V"
        self.q = sbhd(inp.q, self.pos)
        self.k = sbhd(inp.k, self.pos)
        self.v = sbhd(inp.v, self.pos)
        sl, b, hk, d = self.k.shape
        self.kg = torch.empty(n * sl, b, hk, d, dtype=BF16, device=ctx.device)
        self.vg = torch.empty_like(self.kg)
        if self.causal:
            self.L = s // (2 * n)
            self.chunks = (r, 2 * n - 1 - r)
            # gathered row-blocks are (rank, half); natural chunk j sits at 2j (j < N) or
            # 2(2N-1-j)+1 (j >= N)
            order = [2 * j for j in range(n)] + [2 * (2 * n - 1 - j) + 1 for j in range(n, 2 * n)]
            self.order = torch.tensor(order, device=ctx.device)
            self.kn = torch.empty_like(self.kg)
            self.vn = torch.empty_like(self.kg)
            self.out = torch.empty(sl, b, c["hq"], d, dtype=BF16, device=ctx.device)
        self.o = None

    def poison(self):
        for t in (self.kg, self.vg) + ((self.kn, self.vn, self.out) if self.causal else ()):
            t.fill_(float("nan"))

    def run(self):
        dist.all_gather_into_tensor(self.kg, self.k)
        dist.all_gather_into_tensor(self.vg, self.v)
        if not self.causal:
            self.o = self.kern.sdpa(bhsd(self.q), bhsd(self.kg), bhsd(self.vg), False)
            return
        n2 = self.order.numel()
        torch.index_select(self.kg.view(n2, -1), 0, self.order, out=self.kn.view(n2, -1))
        torch.index_select(self.vg.view(n2, -1), 0, self.order, out=self.vn.view(n2, -1))
        L = self.L
        for i, c in enumerate(self.chunks):
            qc = bhsd(self.q[i * L:(i + 1) * L])
            o2, l2 = self.kern.sdpa_lse(qc, bhsd(self.kn[c * L:(c + 1) * L]),
                                        bhsd(self.vn[c * L:(c + 1) * L]), True)
            dst = bhsd(self.out[i * L:(i + 1) * L])
            if c == 0:
                dst.copy_(o2)
            else:
                o1, l1 = self.kern.sdpa_lse(qc, bhsd(self.kn[:c * L]), bhsd(self.vn[:c * L]), False)
                merge_into(dst, o1, l1, o2, l2)
        self.o = bhsd(self.out)

    def check(self, c):
        return self.inp.stats(self.o, self.pos, c)

    def close(self):
        self.o = None


class Ulysses(Runner):
    def __init__(self, ctx, kern, inp):
        super().__init__(ctx, kern, inp)
        c, n, r = self.c, ctx.world, ctx.rank
        s, b, hq, hk, d = c["s"], c["b"], c["hq"], c["hkv"], c["d"]
        if hq % n:
            raise ValueError(f"{hq} query heads not divisible by {n} ranks")
        if hk % n == 0:
            self.e, self.hg = 1, hk // n
            self.base_note = "contiguous shards, K/V heads split"
        elif n % hk == 0:
            self.e, self.hg = n // hk, 1
            self.base_note = f"contiguous shards, K/V heads replicated x{self.e}"
        else:
            raise ValueError(f"{hk} K/V heads vs {n} ranks: neither divides the other")
        self.n, self.sl, self.hl, self.hk = n, s // n, hq // n, hk
        self.pos = contiguous_positions(s, n, r, ctx.device)
        self.q = sbhd(inp.q, self.pos)
        self.k = sbhd(inp.k, self.pos)
        self.v = sbhd(inp.v, self.pos)
        e = dict(dtype=BF16, device=ctx.device)
        self.sq = torch.empty(n, self.sl, b, self.hl, d, **e)
        self.rq = torch.empty_like(self.sq)
        self.sk = torch.empty(n, self.sl, b, self.hg, d, **e)
        self.rk, self.sv, self.rv = (torch.empty_like(self.sk) for _ in range(3))
        self.so = torch.empty_like(self.sq)
        self.ro = torch.empty_like(self.sq)
        self.out = torch.empty(self.sl, b, hq, d, **e)

    def poison(self):
        for t in (self.sq, self.rq, self.sk, self.rk, self.sv, self.rv, self.so, self.ro, self.out):
            t.fill_(float("nan"))

    def _pack_kv(self, dst, src):
        sl, b, d = src.shape[0], src.shape[1], src.shape[3]
        if self.e == 1:
            dst.copy_(src.view(sl, b, self.n, self.hg, d).permute(2, 0, 1, 3, 4))
        else:  # group j of N gets original K/V head j // e
            dst.view(self.hk, self.e, sl, b, d).copy_(
                src.view(sl, b, self.hk, 1, d).permute(2, 3, 0, 1, 4)
                .expand(self.hk, self.e, sl, b, d))

    def run(self):
        n, sl, hl = self.n, self.sl, self.hl
        b, d = self.q.shape[1], self.q.shape[3]
        s = n * sl
        self.sq.copy_(self.q.view(sl, b, n, hl, d).permute(2, 0, 1, 3, 4))
        self._pack_kv(self.sk, self.k)
        self._pack_kv(self.sv, self.v)
        dist.all_to_all_single(self.rq, self.sq)
        dist.all_to_all_single(self.rk, self.sk)
        dist.all_to_all_single(self.rv, self.sv)
        o = self.kern.sdpa(bhsd(self.rq.view(s, b, hl, d)), bhsd(self.rk.view(s, b, self.hg, d)),
                           bhsd(self.rv.view(s, b, self.hg, d)), self.c["causal"])
        ot = o.permute(2, 0, 1, 3)  # [s, b, hl, d]
        if ot.is_contiguous():
            send = ot.view(n, sl, b, hl, d)
        else:
            self.so.view(s, b, hl, d).copy_(ot)
            send = self.so
        dist.all_to_all_single(self.ro, send)
        self.out.view(sl, b, n, hl, d).copy_(self.ro.permute(1, 2, 0, 3, 4))

    def check(self, c):
        return self.inp.stats(bhsd(self.out), self.pos, c)


# -- driver ----------------------------------------------------------------------------------------
def attempts_for(name, ctx, kern, inp):
    c = inp.case
    gqa = c["hq"] != c["hkv"]
    if name == "cudnn_1gpu":
        return [("", lambda: Single(ctx, kern, inp))]
    if name.startswith("torch_cp"):
        rotate = "alltoall" if name == "torch_cp_ring" else "allgather"
        native = ("", lambda: TorchCP(ctx, kern, inp, rotate, False))
        expanded = ("K/V expanded", lambda: TorchCP(ctx, kern, inp, rotate, True))
        if not gqa:
            return [native]
        return [native, expanded] if kern.gqa_native else [expanded]
    if name == "allgather_kv":
        return [("", lambda: AllGatherKV(ctx, kern, inp))]
    if name == "ulysses":
        return [("", lambda: Ulysses(ctx, kern, inp))]
    raise ValueError(name)


def case_seconds(c, world, baselines, target_ms):
    """Estimated wall time of one case (see --estimate)."""
    t1 = flops(c) / C.RATE_CUDNN * 1e3
    total = 0.5 + 3 * c["b"] * c["hq"] * c["s"] * c["d"] * 2 / 50e9  # inputs, reference
    for b in baselines:
        t = t1 if b == "cudnn_1gpu" else t1 / world * 1.1
        inner = 1 if t >= 2 else math.ceil(2 / t)
        n = max(2, min(30, round(target_ms / (t * inner))))
        calls = 1 + (n if inner == 1 else 1 + n * inner)
        total += calls * t / 1e3 + 0.5
    return total


def estimate(args, world):
    C.estimate(args, world, select_cases(args, False), select_baselines(args), case_seconds,
               flops, f", cuDNN at {C.RATE_CUDNN / 1e12:.0f} TFLOP/s, multi-GPU at 1/{world} x 1.1")


def main():
    ap = C.common_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    args = ap.parse_args()
    ctx = C.pre_launch(args, lambda world: estimate(args, world))
    cases = select_cases(args, ctx.smoke)
    baselines = select_baselines(args)
    kern = Kern(ctx)
    gqa_mode = kern.probe(ctx)
    seed = C.seed_for(ctx, args)
    header = dict(ctx.info(), script="attention.py", argv=sys.argv[1:], seed=seed, inputs=args.inputs,
                  gqa_cudnn=gqa_mode, baselines=baselines, tol=args.tol)
    try:
        cpa = _cp_module()
        header["cp_default_rotate"] = str(cpa._ContextParallelOptions().rotate_method)
    except Exception as e:  # noqa: BLE001
        header["cp_import_error"] = C.fmt_err(e)
    report = C.Report(ctx, args, f"attention baselines, {ctx.world} ranks", header)
    if ctx.rank == 0:
        print(f"attention baselines: {len(cases)} cases x {len(baselines)} baselines on "
              f"{ctx.world} ranks ({header['device']}), seed {seed}, cuDNN GQA: {gqa_mode}",
              file=sys.stderr, flush=True)
    def make_inputs(c, sd):
        if c["s"] % (2 * ctx.world):
            raise ValueError(f"sequence {c['s']} not divisible by 2 x {ctx.world} ranks")
        return Inputs(ctx, c, sd, args.inputs)

    def run_case(meta, inp):
        t1 = None
        for b in baselines:
            row = C.drive(ctx, report, meta, b, attempts_for(b, ctx, kern, inp), flops(meta),
                          args, only_rank0=(b == "cudnn_1gpu"))
            if b == "cudnn_1gpu":
                t1 = row["ms"]
            elif t1 and row["ms"]:
                row["scaling_eff"] = t1 / (ctx.world * row["ms"])
                row["note"] = f"eff {100 * row['scaling_eff']:.1f}%" + (
                    f"; {row['note']}" if row["note"] else "")

    C.run_cases(ctx, args, report, cases, baselines, seed, case_seconds, make_inputs, run_case)
    C.finish(ctx, args, report)


if __name__ == "__main__":
    main()
