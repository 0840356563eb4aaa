"""World size > 1: the distributed operators in a process group of two processes on the CPU
(gloo; the CPU reference executor runs every rank's plan in each process), against torch in
float64 on the gathered tensors; ranks that disagree; and the NCCL side that needs no GPU (the
NCCL library torch loaded is the one used, a communicator's arguments checked first)."""

import contextlib
import datetime
import faulthandler
import gc
import json
import re
import sys
import traceback
import weakref

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from conftest import fresh, masked64, prefix_sums, random_lengths, sdpa64, varlen_mask

import mercury
from mercury import _call, _mercury, _ops, _sequence

WORLD = 2


def _shared(*shape):
    """Fresh random values drawn by rank 0, the same on every rank."""
    t = fresh(*shape)
    dist.broadcast(t, 0)
    return t


def _block(t, rank, dim=0):
    return t.chunk(WORLD, dim)[rank]


def _attention(rank, balance, chunk=None):
    q, k, v = (_shared(1, 32, 2, 8) for _ in range(3))
    for t in (q, k, v):
        t.requires_grad_(True)
    shards = [
        mercury.shard_sequence(t.detach(), balance=balance, chunk_size=chunk).requires_grad_(True)
        for t in (q, k, v)
    ]
    o = mercury.attention(*shards, causal=True, balance=balance, chunk_size=chunk)
    # The plan reads only this layout's shards (the CPU path gathers every rank's, so the
    # numbers alone would not tell a plan compiled for another layout).
    layout = _sequence.layout(balance, chunk)
    assert _outside_shards(_ops.last_op, _ops.attention_shardings(layout), WORLD) == []
    want = sdpa64(*(t.transpose(1, 2) for t in (q, k, v)), causal=True).transpose(1, 2)
    mine = mercury.shard_sequence(want.detach(), balance=balance, chunk_size=chunk)
    torch.testing.assert_close(o, mine, rtol=1e-9, atol=1e-12)
    # Gradients: the same upstream gradient everywhere, each rank its shard of it.
    do = _shared(*want.shape)
    want.backward(do)
    o.backward(mercury.shard_sequence(do, balance=balance, chunk_size=chunk))
    for name, full, shard in zip("qkv", (q, k, v), shards, strict=True):
        torch.testing.assert_close(
            shard.grad,
            mercury.shard_sequence(full.grad, balance=balance, chunk_size=chunk),
            rtol=1e-9,
            atol=1e-12,
            msg=lambda m, name=name: f"rank {rank}: d{name} ({balance}): {m}",
        )


def _varlen(rank, balance, chunk=None):
    """Packed sequences over the group: each rank its shard of the packed tokens (contiguous or
    zigzag, once or over chunks of ``chunk`` tokens, ``shard_sequence(dim=0)``) with the
    global cu_seqlens; fresh lengths drawn by rank 0 (a sequence longer than a shard, one token
    each, many short), causal and windows, grouped-query heads, forward, lse and gradients
    against the pairwise reference."""
    total = 32
    for kind, causal, window in (
        ("long", True, (-1, -1)),
        ("many", True, (5, -1)),
        ("one", False, (2, 3)),
        ("many", False, (-1, -1)),
    ):
        lengths = torch.tensor(random_lengths(total, kind))
        n = torch.tensor([len(lengths)])
        dist.broadcast(n, 0)
        lengths = lengths if rank == 0 else torch.zeros(int(n), dtype=lengths.dtype)
        dist.broadcast(lengths, 0)
        cu = prefix_sums(lengths.tolist())
        q, k, v = _shared(total, 4, 8), _shared(total, 2, 8), _shared(total, 2, 6)
        shards = [
            mercury.shard_sequence(t, balance=balance, chunk_size=chunk, dim=0).requires_grad_(True)
            for t in (q, k, v)
        ]
        longest = int((cu[1:] - cu[:-1]).max())
        o, lse = mercury.varlen_attention(
            *shards, cu, cu, longest, longest, causal=causal, window_size=window,
            balance=balance, chunk_size=chunk, return_lse=True,
        )  # fmt: skip
        layout = _sequence.layout(balance, chunk)
        assert _outside_shards(_ops.last_op, _ops.attention_shardings(layout), WORLD) == []
        refs = [t.clone().requires_grad_(True) for t in (q, k, v)]
        want, want_lse = masked64(*refs, varlen_mask(cu, cu, causal=causal, window=window))
        what = f"rank {rank}, {balance}, {kind}, causal={causal}, window={window}, {cu.tolist()}"
        mine = mercury.shard_sequence(want.detach(), balance=balance, chunk_size=chunk, dim=0)
        torch.testing.assert_close(
            o, mine, rtol=1e-9, atol=1e-12, msg=lambda m, w=what: f"{w}: {m}"
        )
        mine = mercury.shard_sequence(want_lse.detach(), balance=balance, chunk_size=chunk, dim=1)
        torch.testing.assert_close(
            lse, mine, rtol=1e-9, atol=1e-12, msg=lambda m, w=what: f"{w}: {m}"
        )
        do = _shared(*want.shape)
        want.backward(do)
        o.backward(mercury.shard_sequence(do, balance=balance, chunk_size=chunk, dim=0))
        for name, ref, shard in zip("qkv", refs, shards, strict=True):
            torch.testing.assert_close(
                shard.grad,
                mercury.shard_sequence(ref.grad, balance=balance, chunk_size=chunk, dim=0),
                rtol=1e-9,
                atol=1e-12,
                msg=lambda m, name=name, w=what: f"{w}: d{name}: {m}",
            )
    # Other key lengths (cu_seqlens_q != cu_seqlens_k), aligned at the bottom right.
    cu_q, cu_k = prefix_sums([5, 1, 6, 0, 4]), prefix_sums([2, 7, 6, 3, 6])
    q, k, v = _shared(16, 4, 8), _shared(24, 2, 8), _shared(24, 2, 6)
    shards = [
        mercury.shard_sequence(t, balance=balance, chunk_size=chunk, dim=0).requires_grad_(True)
        for t in (q, k, v)
    ]
    o = mercury.varlen_attention(*shards, cu_q, cu_k, 6, 7, causal=True, window_size=(3, -1),
                                 balance=balance, chunk_size=chunk)  # fmt: skip
    refs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    want, _ = masked64(*refs, varlen_mask(cu_q, cu_k, causal=True, window=(3, -1)))
    mine = mercury.shard_sequence(want.detach(), balance=balance, chunk_size=chunk, dim=0)
    torch.testing.assert_close(o, mine, rtol=1e-9, atol=1e-12)
    # unshard_sequence puts every rank's packed tokens back in order.
    whole = mercury.unshard_sequence(o.detach(), balance=balance, chunk_size=chunk, dim=0)
    torch.testing.assert_close(whole, want, rtol=1e-9, atol=1e-12)
    do = _shared(*want.shape)
    want.backward(do)
    o.backward(mercury.shard_sequence(do, balance=balance, chunk_size=chunk, dim=0))
    for ref, shard in zip(refs, shards, strict=True):
        mine = mercury.shard_sequence(ref.grad, balance=balance, chunk_size=chunk, dim=0)
        torch.testing.assert_close(shard.grad, mine, rtol=1e-9, atol=1e-12)
    # A rank's local cu_seqlens (ring-flash-attn's per-document layout) is refused, naming it.
    q = fresh(8, 2, 8)
    local = prefix_sums([3, 5])
    with pytest.raises(ValueError, match="pass the global cu_seqlens"):
        mercury.varlen_attention(q, q, q, local, local, 5, 5, balance=balance, chunk_size=chunk)
    # Ranks that disagree on the boundaries are refused on every rank.
    cu = prefix_sums([4, 12] if rank == 0 else [8, 8])
    with pytest.raises(ValueError, match="mercury.varlen_attention: the ranks disagree"):
        mercury.varlen_attention(q, q, q, cu, cu, 12, 12, balance=balance, chunk_size=chunk)


def _balanced(rank, chunk=None):
    """The documents reordered by mercury.balance_documents (the group's size, zigzag shards,
    over chunks of ``chunk`` tokens when given):
    every rank computes the same order; reorder, shard, attend, unshard, restore equals the
    reference on the batch as given."""
    lengths = torch.tensor(random_lengths(64, "many"))
    n = torch.tensor([len(lengths)])
    dist.broadcast(n, 0)
    lengths = lengths if rank == 0 else torch.zeros(int(n), dtype=lengths.dtype)
    dist.broadcast(lengths, 0)
    cu = prefix_sums(lengths.tolist())
    got = mercury.balance_documents(cu, balance="zigzag", chunk_size=chunk)
    # A rank outside a group is told so (new_group gives it a marker, not a group).
    sub = dist.new_group([0])
    if rank != 0:
        with pytest.raises(ValueError, match="a rank outside it"):
            mercury.balance_documents(cu, group=sub)
    orders = [torch.empty_like(got.order) for _ in range(WORLD)]
    dist.all_gather(orders, got.order)
    assert all(torch.equal(o, orders[0]) for o in orders), orders
    q, k, v = _shared(64, 4, 8), _shared(64, 2, 8), _shared(64, 2, 8)
    shards = [
        mercury.shard_sequence(
            got.apply(t), balance="zigzag", chunk_size=chunk, dim=0
        ).requires_grad_(True)
        for t in (q, k, v)
    ]
    longest = int(lengths.max())
    o = mercury.varlen_attention(*shards, got.cu_seqlens, got.cu_seqlens, longest, longest,
                                 causal=True, balance="zigzag", chunk_size=chunk)  # fmt: skip
    whole = got.restore(
        mercury.unshard_sequence(o.detach(), balance="zigzag", chunk_size=chunk, dim=0)
    )
    want, _ = masked64(q, k, v, varlen_mask(cu, cu, causal=True))
    torch.testing.assert_close(whole, want, rtol=1e-9, atol=1e-12)


def _gemms(rank):
    x, w = _shared(8, 6), _shared(6, 4)
    # all_gather_matmul: rows of x sharded, columns of w and of the output.
    out = mercury.all_gather_matmul(_block(x, rank), _block(w, rank, 1))
    torch.testing.assert_close(out, _block(x @ w, rank, 1), rtol=1e-12, atol=1e-12)
    # matmul_reduce_scatter: columns of x and rows of w sharded, the output's rows.
    out = mercury.matmul_reduce_scatter(_block(x, rank, 1), _block(w, rank))
    torch.testing.assert_close(out, _block(x @ w, rank), rtol=1e-12, atol=1e-12)


def _disagreements(rank):
    # Shapes that differ across ranks: refused on every rank before anything runs.
    q = fresh(1, 16 if rank == 0 else 8, 2, 8)
    with pytest.raises(ValueError, match=r"mercury.attention: the ranks disagree: rank 0 has"):
        mercury.attention(q, q, q)
    with pytest.raises(ValueError, match="the ranks disagree"):
        mercury.all_gather_matmul(fresh(4, 6), fresh(6, 2 + rank))
    # Options too (here causal).
    q = fresh(1, 16, 2, 8)
    with pytest.raises(ValueError, match="the ranks disagree"):
        mercury.attention(q, q, q, causal=rank == 0)
    # Equal values of different types (digests differ, values agree): not a disagreement.
    mercury.attention(q, q, q, softmax_scale=1 if rank == 0 else 1.0)
    # Chunk sizes that differ: refused by attention (named as the user spelled them) and by
    # unshard_sequence, which would otherwise put the chunks back in the wrong places.
    chunk = 2 if rank == 0 else 4
    with pytest.raises(ValueError, match=r"chunk_size=2.*chunk_size=4"):
        mercury.attention(q, q, q, balance="zigzag", chunk_size=chunk)
    with pytest.raises(ValueError, match=r"unshard_sequence: the ranks disagree on their shards"):
        mercury.unshard_sequence(q, balance="zigzag", chunk_size=chunk)
    with pytest.raises(ValueError, match=r"rank 1: balance=None with 16 positions"):
        mercury.unshard_sequence(q, balance="zigzag" if rank == 0 else None)
    # A shard the group cannot split: odd rows for the reduce-scatter.
    with pytest.raises(ValueError, match="does not split"):
        mercury.matmul_reduce_scatter(fresh(3, 6), fresh(6, 4))
    # The group still works afterwards (nothing was left half-done).
    _gemms(rank)


class _FakeCall:
    """What ``_cuda.communicator`` reads of a prepared call."""

    def __init__(self, name, rank):
        self.group_name = name
        self.group = dist.group.WORLD
        self.rank = rank
        self.world = WORLD


def _orchestration(rank):
    """The host side of a group's NCCL path, with the native communicator faked (no GPU):
    rank 0's unique id reaches every rank, a rank that fails makes every rank raise, and the
    ranks must have compiled one schedule."""
    from mercury import _cuda

    made = []
    mp_ = pytest.MonkeyPatch()
    mp_.setattr(torch.cuda, "device", lambda _ordinal: contextlib.nullcontext())
    mp_.setattr(_cuda._mercury, "nccl_unique_id", lambda: "cd" * 128)
    mp_.setattr(_cuda._mercury, "GroupComm", lambda *a: made.append(a) or ("comm", a))
    try:
        comm = _cuda.communicator(_FakeCall("fake-ok", rank), 0)
        assert made == [("cd" * 128, rank, WORLD, 0)], made
        # Made once per group: the second call runs no collective and builds nothing.
        assert _cuda.communicator(_FakeCall("fake-ok", rank), 0) is comm and len(made) == 1
        with pytest.raises(ValueError, match="on GPU 0, the tensors on GPU 1"):
            _cuda.communicator(_FakeCall("fake-ok", rank), 1)

        def no_nccl():
            raise RuntimeError("no usable NCCL library")

        mp_.setattr(_cuda._mercury, "nccl_unique_id", no_nccl)
        with pytest.raises(RuntimeError, match="rank 0 has no NCCL id: .*no usable NCCL"):
            _cuda.communicator(_FakeCall("fake-no-nccl", rank), 0)
        assert len(made) == 1
    finally:
        mp_.undo()
    group = dist.group.WORLD
    _cuda._agree_or_raise(group, "@op over 2 ranks", None, "shift-shard")
    with pytest.raises(RuntimeError, match="@op over 2 ranks: rank 1: boom"):
        _cuda._agree_or_raise(group, "@op over 2 ranks", "boom" if rank == 1 else None, "s")
    with pytest.raises(RuntimeError, match="compiled different schedules"):
        _cuda._agree_or_raise(group, "@op over 2 ranks", None, f"schedule {rank}")


def _worker(rank, init_file):
    # A native abort (gloo, the executor) prints every thread's Python stack.
    faulthandler.enable()
    dist.init_process_group(
        "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=120),
    )
    world = weakref.ref(dist.group.WORLD)
    try:
        _attention(rank, None)
        _attention(rank, "zigzag")
        _attention(rank, "zigzag", 4)
        _varlen(rank, None)
        _varlen(rank, "zigzag")
        _varlen(rank, "zigzag", 2)
        _balanced(rank)
        _balanced(rank, 4)
        _gemms(rank)
        _disagreements(rank)
        _orchestration(rank)
        # Both ranks done before either closes its connections (gloo aborts a process whose
        # peer hangs up while it is still in the group).
        dist.barrier()
    except BaseException:
        # Printed now: when this rank leaves the group, its peer's gloo aborts that process,
        # and mp.spawn may report the abort and kill this one before its error is written.
        traceback.print_exc()
        sys.stderr.flush()
        raise
    finally:
        dist.destroy_process_group()
    # Nothing of mercury's (its compiled calls are cached for the process's life) keeps the group
    # alive: a gloo group freed at interpreter exit can abort the process (its threads can no
    # longer take the GIL).
    gc.collect()
    assert world() is None, f"rank {rank}: the process group outlived destroy_process_group"
    # A new default group reuses the old one's name: nothing prepared under the old group is
    # used under the new one (here each process alone, a world of 1, the same local shapes as
    # _attention's first call).
    dist.init_process_group("gloo", init_method=f"file://{init_file}-{rank}", rank=0, world_size=1)
    try:
        q, k, v = (fresh(1, 16, 2, 8).requires_grad_(True) for _ in range(3))
        o = mercury.attention(q, k, v, causal=True)
        want = sdpa64(*(t.transpose(1, 2) for t in (q, k, v)), causal=True).transpose(1, 2)
        torch.testing.assert_close(o, want, rtol=1e-9, atol=1e-12)
    finally:
        dist.destroy_process_group()


@pytest.mark.skipif(not dist.is_gloo_available(), reason="torch without gloo")
def test_two_processes_on_the_cpu(tmp_path):
    mp.spawn(_worker, args=(str(tmp_path / "store"),), nprocs=WORLD, join=True)


def _mapped_nccl() -> list[str]:
    """Paths of the libnccl.so* files mapped in this process."""
    paths = []
    for line in open("/proc/self/maps"):
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and re.search(r"/libnccl\.so(\.\d+)*$", fields[5].strip()):
            paths.append(fields[5].strip())
    return sorted(set(paths))


def _native_cuda() -> bool:
    return hasattr(mercury._mercury, "GroupComm")


@pytest.mark.skipif(not _native_cuda(), reason="the package was built without CUDA")
def test_the_nccl_torch_loaded_is_the_one_used():
    before = _mapped_nccl()
    if not before:
        pytest.skip("torch loaded no NCCL in this process (a torch without CUDA)")
    assert mercury._mercury.nccl_library() == before[0]
    # No second NCCL was loaded.
    assert _mapped_nccl() == before


@pytest.mark.skipif(not _native_cuda(), reason="the package was built without CUDA")
def test_a_communicator_checks_its_group_first():
    with pytest.raises(ValueError, match="rank 2 is outside a group of size 2"):
        mercury._mercury.GroupComm("ab" * 128, 2, 2, 0)
    with pytest.raises(ValueError, match="256 hex digits"):
        mercury._mercury.GroupComm("abc", 0, 2, 0)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no usable GPU 0"):
            mercury._mercury.GroupComm("ab" * 128, 0, 2, 0)


def _found(x, key):
    """Every value under ``key`` anywhere in the JSON value ``x``."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from ([v] if k == key else _found(v, key))
    elif isinstance(x, list):
        for v in x:
            yield from _found(v, key)


def _outside_shards(op, shardings: dict, world: int) -> list:
    """Global regions a rank's plan reads (slot initialisations) or writes (outputs) that lie
    inside none of the regions its process binds: under a process group each rank binds only
    its shards, and the executor refuses a use outside them (or straddling two)."""
    plan = json.loads(op.plan_json())
    bufs = plan["buffers"]
    bad = []
    for r in plan["ranks"]:
        uses = [(g["buffer"], g["region"]) for g in _found(r["slots"], "from_global")]
        uses += [(o["buffer"], o["region"]) for o in r["outputs"]]
        for b, reg in uses:
            name, shape = bufs[b]["name"], bufs[b]["shape"]
            held = _call.pieces(shape, shardings.get(name), world, r["rank"])
            if not any(
                all(
                    po <= o and o + e <= po + pe
                    for o, e, po, pe in zip(reg["offset"], reg["extent"], off, ext, strict=True)
                )
                for off, ext, _ in held
            ):
                bad.append((r["rank"], name, reg))
    return bad


@pytest.mark.parametrize("world", [2, 4])
def test_every_rank_uses_only_its_shards(world):
    for balance in (None, "zigzag", "zigzag:2"):
        zigzag, chunk = _sequence.parse(balance)
        for causal, hk in ((True, 4), (False, 2)):
            spec = dict(batch=1, heads=4, kv_heads=hk, seq=16 * world, head_dim=8, v_head_dim=8,
                        causal=causal, scale=None, dtype="torch.float64", world=world,
                        zigzag=zigzag, zigzag_chunk=chunk)  # fmt: skip
            sh = _ops.attention_shardings(balance)
            text, bwd_schedule = _mercury.attention_commir(**spec, lse=True)
            fwd = mercury.compile(text, schedule="auto")
            assert _outside_shards(fwd, sh, world) == [], (spec, fwd.decision)
            text, _ = _mercury.attention_commir(**spec, backward=True)
            bwd = mercury.compile(text, schedule=bwd_schedule)
            assert _outside_shards(bwd, sh, world) == [], (spec, bwd_schedule)
    for kind, dims in (
        ("all_gather", dict(m=8 * world, k=16, n=8 * world)),
        ("reduce_scatter", dict(m=8 * world, k=8 * world, n=16)),
    ):
        text = _mercury.gemm_commir(kind=kind, dtype="torch.float64", world=world, **dims)
        op = mercury.compile(text, schedule="auto")
        assert _outside_shards(op, _ops._GEMM_SHARDINGS[kind], world) == [], (kind, op.decision)
