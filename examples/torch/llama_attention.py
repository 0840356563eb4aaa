"""A Llama-3-style attention block whose attention is ``mercury.attention``.

    torchrun --nproc_per_node=N examples/torch/llama_attention.py [--seq 8192] [--balance zigzag]
    python examples/torch/llama_attention.py            # world size 1, no process group
    python examples/torch/llama_attention.py --device cpu --seq 256 --dim 256 --heads 8 --kv-heads 2

The sequence is sharded over the ranks (contiguous, or ring-flash-attn's zigzag with
``--balance zigzag``); each rank projects its own tokens (QKV, grouped-query heads), applies
RoPE at their global positions, calls ``mercury.attention`` (the schedule is the search's pick
for this machine and shape) and projects the output. The result is checked against the same
block on the whole sequence on one device (``F.scaled_dot_product_attention``), and both are
timed (median of 7 after 2 warm-up calls). Runs on CPU tensors too (``--device cpu``, small
shapes: the CPU reference executor).

With several ranks the attention runs over the process group (CUDA tensors: an NCCL
communicator made from the group on the NCCL torch loaded; CPU tensors: the CPU reference
executor, the shards gathered over the group, e.g. gloo). The exit status is 1 when the check
fails (relative error above 2e-2 in bfloat16, 1e-9 in float64). The timing beside torch's
context parallel is not in the example.
"""

import argparse
import os
import time

import mercury
import torch
import torch.distributed as dist
import torch.nn.functional as F


class Attention(torch.nn.Module):
    """Llama-3 attention: QKV projections (grouped-query), RoPE, attention, output projection."""

    def __init__(self, dim, heads, kv_heads, rope_theta=500000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = torch.nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = torch.nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = torch.nn.Linear(heads * self.head_dim, dim, bias=False)
        self.rope_theta = rope_theta

    def rope(self, x, positions):
        """Rotary embedding of ``x`` [b, s, h, d] at ``positions`` [s] (Llama's pairing)."""
        d = self.head_dim
        inv = 1.0 / (self.rope_theta ** (torch.arange(0, d, 2, device=x.device).float() / d))
        ang = positions.float()[:, None] * inv[None, :]
        cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
        x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)

    def qkv(self, x, positions):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim)
        return self.rope(q, positions), self.rope(k, positions), v

    def forward(self, x, positions, group=None, balance=None):
        """``x`` is this rank's [b, s_local, dim] shard at global ``positions``."""
        q, k, v = self.qkv(x, positions)
        o = mercury.attention(q, k, v, causal=True, group=group, balance=balance)  # the swap
        return self.wo(o.flatten(2))

    def forward_single(self, x):
        """The block on the whole sequence on one device: torch's SDPA."""
        q, k, v = self.qkv(x, torch.arange(x.shape[1], device=x.device))
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.wo(o.transpose(1, 2).flatten(2))


def timed(fn, reps=7):
    for _ in range(2):
        fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--balance", choices=["contiguous", "zigzag"], default="zigzag")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    balance = None if args.balance == "contiguous" else "zigzag"
    group = None
    if "RANK" in os.environ:
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        if args.device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        group = dist.group.WORLD
    rank = dist.get_rank() if group is not None else 0
    device = (
        torch.device(args.device, torch.cuda.current_device())
        if args.device == "cuda"
        else torch.device("cpu")
    )
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float64
    torch.manual_seed(0)
    block = Attention(args.dim, args.heads, args.kv_heads).to(device, dtype)
    x = torch.randn(1, args.seq, args.dim, device=device, dtype=dtype)
    if group is not None:
        dist.broadcast(x, 0)
    positions = torch.arange(args.seq, device=device)
    x_local = mercury.shard_sequence(x, group, balance=balance, dim=1)
    pos_local = mercury.shard_sequence(positions[None], group, balance=balance, dim=1)[0]

    with torch.no_grad():
        out = mercury.unshard_sequence(
            block(x_local, pos_local, group, balance), group, balance=balance, dim=1
        )
        want = block.forward_single(x)
        err = ((out.double() - want.double()).norm() / want.double().norm()).item()
        ours = timed(lambda: block(x_local, pos_local, group, balance))
        single = timed(lambda: block.forward_single(x))
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-9
    if rank == 0:
        world = 1 if group is None else dist.get_world_size()
        print(
            f"llama attention block: seq {args.seq}, dim {args.dim}, {args.heads} heads "
            f"({args.kv_heads} kv), {dtype}, {world} rank(s), {args.balance} shards"
        )
        verdict = "ok" if err <= tol else "FAILED"
        print(f"check against the single-device block: relative error {err:.3e} ({verdict})")
        print(f"time per block: mercury {ours:.3f} ms, single-device torch SDPA {single:.3f} ms")
    if group is not None:
        dist.destroy_process_group()
    return 0 if err <= tol else 1


if __name__ == "__main__":
    raise SystemExit(main())
