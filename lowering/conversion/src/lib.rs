//! Conversion of a scheduled CommIR kernel into a per-rank execution plan.
//!
//! The loop nest is executed symbolically for every rank (parallel loops take the rank's mesh
//! coordinate, sequential loops iterate); each iteration of an innermost sequential loop is one
//! plan stage. Buffers stay where their sharding puts them and move only when a consumer needs
//! them:
//! - a tile inside the rank's shard is read in place;
//! - a shifted read (index `(j + p) mod J`) not held locally is received during the previous
//!   stage from a rank that holds it then, preferring the peer on the fastest link that used it
//!   in that stage (a ring, double-buffered), else its owner;
//! - any other read of remote data gathers the buffer first (AllGather in the prologue);
//! - a `commir.reshard` becomes an AllToAll (levels move to another dimension), an AllGather
//!   (sharded to replicated) or a local slice;
//! - reductions accumulate locally (add, or the softmax log-sum-exp merge); partial results of
//!   one output tile held by several ranks are combined by AllReduce, or ReduceScatter when the
//!   output is sharded over those ranks; a shifted reduction sends each partial tile to the
//!   tile's owner in the next stage (shift-reduce), overlapped with the next computation (of
//!   ranks that compute the same partial, only one sends; a partial that arrives before the
//!   owner's own gemm becomes that gemm's accumulator, `partials.rs`).
//!
//! A schedule that needs data nothing brings is a lowering error, so a wrong annotation cannot
//! silently produce a plan.

// Bookkeeping maps keyed by (buffer, tile) read clearer spelled out than behind aliases.
#![allow(clippy::type_complexity)]
//!
//! The conversion is a short driver ([`lower_kernel`]) over phases on one lowering context
//! (`context.rs`), in the way MLIR's `Shard/Transforms/Partition.cpp` and Triton's
//! one-file-per-op-family lowering are organised:
//!
//! | phase | file |
//! |---|---|
//! | symbolic execution per rank | `trace.rs` |
//! | global buffers, input shards, prologue reshards and gathers | `prologue.rs` |
//! | compute stages, one file per event kind | `compute.rs`: `load.rs`, `patch.rs`, `tile.rs`, `reduce.rs`, `store.rs` |
//! | combining partial results, reshards at the end | `epilogue.rs` |
//! | reshard patterns (all-gather, slice, all-to-all, general) | `reshard.rs` |
//! | where buffers live (shards, owners, the ranks holding a tile, groups) | `placement.rs` |
//! | the order each dimension is laid out in (zigzag, striped placements) | `order.rs` |
//! | moves between placements no collective expresses (point to point) | `permute.rs` |
//! | causal attention tiles cut into full / diagonal / empty blocks | `causal.rs` |
//! | the causal mask of an unpatched body: rows without a visible key skipped or computed | `mask.rs` |
//! | gemm epilogues (activation, cast) fused into the gemm | `activation.rs` |
//! | received shift-reduce partials as the owner's gemm operand | `partials.rs` |
//! | carried sums: accumulators that travel with a ring's pieces (ring-flash-attn) | `carry.rs` |
//! | output delivery, slot pruning, the plan | `deliver.rs` |
//! | the passes that print a lowered plan | `passes.rs` |

mod activation;
mod carry;
mod causal;
mod compute;
mod context;
mod dead_transfers;
mod deliver;
mod epilogue;
mod load;
mod mask;
mod order;
mod partials;
pub mod passes;
mod patch;
mod permute;
mod placement;
mod prologue;
mod reduce;
mod reshard;
mod store;
mod tile;
mod trace;

pub mod report;

pub use placement::{group_of, shard_box};

use context::{err, Lowering};
use mercury_commir::Kernel;
use mercury_ir::{Diagnostic, Operation};
use mercury_plan::Plan;

/// Lowers one kernel to a plan: the phases in order on one lowering context.
pub fn lower_kernel(k: &Kernel) -> Result<Plan, Diagnostic> {
    let mut cx = Lowering::new(k)?;
    let (begin, end) = cx.split_reshards();
    cx.place_inputs();
    let base = cx.prologue(&begin)?;
    cx.carry_chains(base)?;
    cx.compute_stages(base)?;
    cx.insert_post_stages();
    let epi = cx.combine_partials();
    cx.keep_lse();
    cx.end_reshards(&end, epi)?;
    let mut pieces = cx.deliver_outputs()?;
    cx.fuse_gemm_epilogues(&pieces);
    cx.fold_received_partials(&mut pieces);
    cx.finish(pieces)
}

/// Lowers the kernel named `name` (or the only kernel) of a module.
pub fn lower_module(module: &Operation, name: Option<&str>) -> Result<Plan, Diagnostic> {
    let kernels = mercury_commir::kernels(module)?;
    let k = match name {
        Some(n) => kernels
            .iter()
            .find(|k| k.name == n.trim_start_matches('@'))
            .ok_or_else(|| {
                err(
                    &module.loc,
                    format!(
                        "no kernel '@{}' (the module has {})",
                        n.trim_start_matches('@'),
                        match kernels.as_slice() {
                            [] => "none".to_string(),
                            ks => mercury_commir::kernel_names(ks),
                        }
                    ),
                )
            })?,
        None => match kernels.as_slice() {
            [k] => k,
            [] => return Err(err(&module.loc, "the module has no commir.kernel")),
            // Located at the second kernel: where the module stops having one.
            ks => {
                return Err(err(
                    &ks[1].loc,
                    format!(
                        "the module has several kernels ({}); choose one with --kernel NAME",
                        mercury_commir::kernel_names(ks)
                    ),
                ))
            }
        },
    };
    lower_kernel(k)
}
