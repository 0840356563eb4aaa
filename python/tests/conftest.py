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
    """``schedule="auto"`` reads and writes a cache of this session's own."""
    mp = pytest.MonkeyPatch()
    mp.setenv("MERCURY_CACHE_DIR", str(tmp_path_factory.mktemp("schedules")))
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
