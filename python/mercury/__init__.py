"""Mercury-rs from PyTorch.

- ``mercury.compile(source, *, kernel=None, schedule="auto", topology=None)``: any CommIR
  operator, compiled with a schedule (the search's pick by default); ``op(**inputs)`` runs it on
  full tensors (CPU: the f64 reference executor).
- ``mercury.attention``, ``mercury.all_gather_matmul``, ``mercury.matmul_reduce_scatter``: the
  distributed operators, each rank passing its own shard (world size 1 needs no process group).
- ``mercury.varlen_attention``: packed sequences (THD tensors and ``cu_seqlens``), flash-attn's
  ``flash_attn_varlen_func`` arguments, sliding windows, over a process group.
- ``mercury.balance_documents``: a packing order of a batch's documents that balances the
  ranks' attention work (reorder, shard, call ``varlen_attention``, restore).
- ``mercury.shard_sequence`` / ``mercury.unshard_sequence``: contiguous or zigzag sequence
  shards, as ring-flash-attn lays them out.

The API reference is ``docs/python.md``.
"""

from ._balance import DocumentOrder, balance_documents
from ._compile import Op, compile, schedule_cache_dir
from ._mercury import CompileError, __version__
from ._ops import all_gather_matmul, attention, matmul_reduce_scatter, synchronize
from ._sequence import shard_sequence, unshard_sequence
from ._varlen import varlen_attention

__all__ = [
    "CompileError",
    "DocumentOrder",
    "Op",
    "__version__",
    "all_gather_matmul",
    "attention",
    "balance_documents",
    "compile",
    "matmul_reduce_scatter",
    "schedule_cache_dir",
    "shard_sequence",
    "synchronize",
    "unshard_sequence",
    "varlen_attention",
]
