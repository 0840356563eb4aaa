"""Shared fixtures: the repository's examples made small for the CPU executor, fresh random
inputs, and a schedule cache of the test session's own."""

import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SCHEDULES = EXAMPLES / "schedules"


@pytest.fixture(autouse=True, scope="session")
def _schedule_cache(tmp_path_factory):
    """``schedule="auto"`` reads and writes a cache of this session's own, and the outputs
    the package allocates start as NaN (an element the executor does not write shows)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MERCURY_CACHE_DIR", str(tmp_path_factory.mktemp("schedules")))
    mp.setenv("MERCURY_POISON_OUTPUTS", "1")
    yield
    mp.undo()


def small(
    example: str,
    axes: dict[str, int],
    *,
    dims: dict[int, int] | None = None,
    dtype: str | None = "f64",
) -> str:
    """The example operator ``examples/<example>`` with the axis extents ``axes`` (``min``
    bounds dropped), literal buffer dimensions replaced as ``dims`` says (``{128: 16}``: the
    head dim), and bf16 buffers and tiles made ``dtype`` (f64: every value exact, so the plan's
    data flow is checked to f64 precision)."""
    text = (EXAMPLES / example).read_text()
    for name, n in axes.items():
        text, k = re.subn(rf"(commir\.axis @{name} = )\d+", rf"\g<1>{n}", text)
        assert k == 1, f"{example} has no axis @{name}"
    text = re.sub(r"(commir\.axis @\w+ = \d+ \w+) min \d+", r"\1", text)
    for old, new in (dims or {}).items():
        text = re.sub(rf", {old}\]", f", {new}]", text)
    if dtype:
        text = text.replace("bf16", dtype)
    return text


def fresh(*shape: int, dtype=torch.float64) -> torch.Tensor:
    """Fresh random values uniform in [-1, 1), rounded to ``dtype``."""
    return (torch.rand(*shape, dtype=torch.float64) * 2 - 1).to(dtype)


def sdpa64(q, k, v, *, causal=False, scale=None) -> torch.Tensor:
    """Attention in float64 on ``[b, h, s, d]`` tensors (grouped-query heads expanded),
    torch's reference."""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(g, dim=1)
    v = v.repeat_interleave(g, dim=1)
    s = (q @ k.transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale)
    if causal:
        n = q.shape[-2]
        mask = torch.ones(n, k.shape[-2], dtype=torch.bool).tril()
        s = s.masked_fill(~mask, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def cuts(total: int, pieces: int) -> list[int]:
    """``pieces`` fresh random lengths summing to ``total`` (empty ones allowed)."""
    points = sorted(torch.randint(0, total + 1, (pieces - 1,)).tolist())
    b = [0, *points, total]
    return [b[i + 1] - b[i] for i in range(pieces)]


def random_lengths(total: int, kind: str) -> list[int]:
    """Fresh random sequence lengths summing to ``total``: ``"one"`` token each, one ``"long"``
    sequence (more than half the tokens: longer than any rank's shard) and a few others, or
    ``"many"`` short ones (some empty)."""
    if kind == "one":
        return [1] * total
    if kind == "long":
        first = int(torch.randint(total // 2 + 1, total + 1, ()))
        return [first, *cuts(total - first, 3)]
    assert kind == "many", kind
    return cuts(total, total // 2)


def prefix_sums(lengths: list[int]) -> torch.Tensor:
    """flash-attn's ``cu_seqlens`` (int32) of ``lengths``."""
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return torch.tensor(out, dtype=torch.int32)


def varlen_mask(cu_q, cu_k, *, causal=False, window=(-1, -1)) -> torch.Tensor:
    """flash-attn's varlen mask ``[total_q, total_k]``, pair by pair: query ``i`` of sequence
    ``d`` sees key ``j`` of sequence ``d`` when its offset ``t = (j - k0) - (i - q0) - (sk -
    sq)`` (bottom-right aligned) has ``t <= 0`` for causal and ``-left <= t <= right``."""
    cu_q, cu_k = [int(x) for x in cu_q], [int(x) for x in cu_k]
    left, right = window
    mask = torch.zeros(cu_q[-1], cu_k[-1], dtype=torch.bool)
    for d in range(len(cu_q) - 1):
        q0, q1, k0, k1 = cu_q[d], cu_q[d + 1], cu_k[d], cu_k[d + 1]
        shift = (k1 - k0) - (q1 - q0)
        for i in range(q0, q1):
            for j in range(k0, k1):
                t = (j - k0) - (i - q0) - shift
                mask[i, j] = (
                    (not causal or t <= 0)
                    and (left < 0 or t >= -left)
                    and (right < 0 or t <= right)
                )
    return mask


def masked64(q, k, v, mask, scale=None):
    """Attention in float64 on THD tensors ``[tokens, heads, dim]`` (grouped-query heads
    expanded) under the boolean ``mask [total_q, total_k]``: ``(out [tq, hq, dv], lse [hq,
    tq])``; a row that sees nothing has output 0 and lse -inf. Differentiable."""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.einsum("ihd,jhd->hij", q, k) * (q.shape[-1] ** -0.5 if scale is None else scale)
    seen = mask.any(-1)
    s = s.masked_fill(~seen[:, None], 0.0).masked_fill(~mask & seen[:, None], float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]) * mask
    o = torch.einsum("hij,jhd->ihd", p, v)
    return o, lse.masked_fill(~seen, float("-inf"))
