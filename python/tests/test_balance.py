"""mercury.balance_documents: a packing order of a batch's documents that balances the ranks'
attention work; reordering leaves attention inside documents as it was (forward and
gradients against the pairwise f64 reference, on the tokens put back in the given order)."""

import pytest
import torch
from conftest import cuts, fresh, masked64, prefix_sums, varlen_mask

import mercury


def _work(lengths_in_order, world, zigzag, causal=True):
    """Each rank's query-key pairs, row by row (what the balancer counts in closed form)."""
    total = sum(lengths_in_order)
    pieces = 2 * world if zigzag else world
    size = total // pieces
    owner = [(p if p < world else pieces - 1 - p) for p in range(pieces)]
    work = [0] * world
    pos = 0
    for n in lengths_in_order:
        for u in range(n):
            work[owner[(pos + u) // size]] += (u + 1) if causal else n
        pos += n
    return work


def _ratio(work):
    return max(work) * len(work) / sum(work)


def _long_tail(total):
    """Three long documents (each longer than a zigzag piece over 8 ranks) first, then many
    short ones (fresh lengths)."""
    longs = [int(torch.randint(total // 40, total // 25, ())) for _ in range(3)]
    return longs + cuts(total - sum(longs), total // 40)


def _fixed_long_tail(total):
    """Three long documents first, then short ones of 10-59 tokens (fixed lengths: a batch the
    balancer evens to within 1%, whatever the layout and mask)."""
    lengths, i = [150, 130, 110], 0
    while sum(lengths) < total:
        lengths.append(min(10 + (i * 17) % 50, total - sum(lengths)))
        i += 1
    return lengths


@pytest.mark.parametrize("balance", [None, "zigzag"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("draw", ["fixed", "fresh"])
def test_the_order_balances_the_work_it_reports(balance, causal, draw):
    """The order is a permutation, its figures are the row-by-row count, never worse than the
    given order; on the fixed batch within 5% of the mean. (Fresh long-tail batches of this size
    stay above 1.05x now and then: the search is a heuristic, and docs/perf.md gives its spread.)"""
    world, total = 8, 4096
    lengths = _fixed_long_tail(total) if draw == "fixed" else _long_tail(total)
    cu = prefix_sums(lengths)
    got = mercury.balance_documents(cu, world, balance=balance, causal=causal)
    order = got.order.tolist()
    assert sorted(order) == list(range(len(lengths)))
    new = [lengths[d] for d in order]
    assert got.cu_seqlens.tolist() == prefix_sums(new).tolist()
    assert got.cu_seqlens.dtype == torch.int32
    # Its figures are the row-by-row count of each packing.
    zig = balance == "zigzag"
    assert got.before == pytest.approx(_ratio(_work(lengths, world, zig, causal)), rel=1e-12)
    assert got.after == pytest.approx(_ratio(_work(new, world, zig, causal)), rel=1e-12)
    assert got.after <= got.before
    if draw == "fixed":
        assert got.before > 1.5 and got.after < 1.05, (got.before, got.after)
    # Deterministic: every rank computes the same order.
    again = mercury.balance_documents(cu, world, balance=balance, causal=causal)
    assert again.order.tolist() == order


def test_apply_and_restore_move_whole_documents():
    lengths = [5, 0, 9, 1, 17]
    cu = prefix_sums(lengths)
    got = mercury.balance_documents(cu, 2, balance="zigzag")
    x = fresh(32, 3)
    y = got.apply(x)
    for new, d in enumerate(got.order.tolist()):
        a, b = int(got.cu_seqlens[new]), int(got.cu_seqlens[new + 1])
        torch.testing.assert_close(y[a:b], x[int(cu[d]) : int(cu[d + 1])], rtol=0, atol=0)
    torch.testing.assert_close(got.restore(y), x, rtol=0, atol=0)
    torch.testing.assert_close(got.apply(x.T, dim=1), y.T, rtol=0, atol=0)
    with pytest.raises(ValueError, match="dimension 0 of x has 31 tokens, the documents 32"):
        got.apply(x[:31])
    with pytest.raises(ValueError, match="dim 2 is out of range for x of 2 dimensions"):
        got.apply(x, dim=2)
    with pytest.raises(TypeError, match="dim must be an int"):
        got.restore(x, dim=0.0)
    assert got.max_seqlen == 17
    assert got != mercury.balance_documents(cu, 2, balance="zigzag")  # by identity, no error


@pytest.mark.parametrize("causal, window", [(True, (-1, -1)), (True, (4, -1)), (False, (3, 2))])
def test_attention_is_the_same_in_the_balanced_order(causal, window):
    """varlen_attention on the reordered batch, put back in the given order, equals the
    reference on the given batch (outputs and gradients, f64)."""
    lengths = _long_tail(256)
    cu = prefix_sums(lengths)
    got = mercury.balance_documents(cu, 8, balance="zigzag", causal=causal, window_size=window)
    q, k, v = fresh(256, 4, 8), fresh(256, 2, 8), fresh(256, 2, 6)
    mine = [got.apply(t).requires_grad_(True) for t in (q, k, v)]
    longest = got.max_seqlen
    assert longest == max(lengths)
    o = mercury.varlen_attention(
        *mine, got.cu_seqlens, got.cu_seqlens, longest, longest, causal=causal,
        window_size=window,
    )  # fmt: skip
    refs = [t.clone().requires_grad_(True) for t in (q, k, v)]
    want, _ = masked64(*refs, varlen_mask(cu, cu, causal=causal, window=window))
    torch.testing.assert_close(got.restore(o), want, rtol=1e-9, atol=1e-12)
    do = fresh(*want.shape)
    want.backward(do)
    o.backward(got.apply(do))
    for ref, t in zip(refs, mine, strict=True):
        torch.testing.assert_close(got.restore(t.grad), ref.grad, rtol=1e-9, atol=1e-12)


def test_refusals_name_the_argument():
    cu = prefix_sums([3, 5, 2])
    with pytest.raises(ValueError, match="10 positions do not split into 8 equal zigzag chunks"):
        mercury.balance_documents(cu, 4, balance="zigzag")
    with pytest.raises(ValueError, match="balance must be None"):
        mercury.balance_documents(cu, 2, balance="documents")
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        mercury.balance_documents(cu, 0)
    with pytest.raises(TypeError, match="cu_seqlens must be a torch.Tensor"):
        mercury.balance_documents([0, 3, 8], 2)
    with pytest.raises(ValueError, match="cu_seqlens decreases at entry 2"):
        mercury.balance_documents(torch.tensor([0, 5, 3], dtype=torch.int32), 2)
    with pytest.raises(TypeError, match="window_size must be a pair"):
        mercury.balance_documents(cu, 2, window_size=4)
    for bad in (cu[None], torch.tensor(5), torch.tensor([0])):
        with pytest.raises(ValueError, match="cu_seqlens must be 1-D with at least 2 entries"):
            mercury.balance_documents(bad, 2)
    with pytest.raises(ValueError, match="cu_seqlens is a meta tensor"):
        mercury.balance_documents(cu.to("meta"), 2)
    # One rank: nothing to balance, the order as given.
    got = mercury.balance_documents(cu, 1)
    assert got.order.tolist() == [0, 1, 2] and got.before == got.after == 1.0
