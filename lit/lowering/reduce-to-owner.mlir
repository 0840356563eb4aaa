// A tile whose owners are some of the reducing group is reduced to each owner, not
// all-reduced to every member (lowering/conversion/src/epilogue.rs, reduce_where_owned).
// The GEMM reduce-scatter with K split over 8 GPUs and M tiled 8 ways
// (examples/schedules/chunked_rs.sched): each row tile is one GPU's block of C, so each of the
// 8 tiles is reduced to its one owner, in place in its bf16 accumulator: 7 x 128 MiB in all,
// the bytes of Megatron's reduce-scatter (an all-reduce per tile sent 1.8 GiB), and the same
// memory as the all-reduce plan. Each tile is reduced in the stage after its GEMM, beside the
// next tile's GEMM: the reduces take 8 stages, and the plan no more stages than before (the
// GEMMs in stages 1-8, the last tile's reduce in stage 9).
// RUN: %mercury-opt --schedule=%repo/examples/schedules/chunked_rs.sched --commir-print-comm-plan --commir-print-memory %repo/examples/gemm_rs.mlir | FileCheck %s --check-prefix=CHUNKED
// CHUNKED:     comm-plan @gemm_rs: mesh [8], 8 ranks, 10 stages
// CHUNKED-NEXT:  @C: reduce(add), 64 ops in 8 stages, 896.0 MiB sent in total
// CHUNKED-NOT:   all_reduce
// CHUNKED:     memory @gemm_rs: 160.0 MiB per rank at most (8 ranks)
//
// Megatron's reduce-scatter of the whole C, for comparison.
// RUN: %mercury-opt --schedule=%repo/examples/schedules/megatron_rs.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s --check-prefix=MEGATRON
// MEGATRON:    @C: reduce_scatter(add), 8 ops in 1 stages, 896.0 MiB sent in total
//
// M tiled 2 ways: each tile holds 4 GPUs' blocks, reduced to each of them (8 reduces per GPU,
// each owner's part into its own slot); M tiled 16 ways: two tiles per block.
// RUN: sed 's/factor=8 outer=m0/factor=2 outer=m0/' %repo/examples/schedules/chunked_rs.sched > %t.two.sched
// RUN: %mercury-opt --schedule=%t.two.sched --commir-print-comm-plan=detail %repo/examples/gemm_rs.mlir | FileCheck %s --check-prefix=TWO
// TWO:         @C: reduce(add), 64 ops in 2 stages, 896.0 MiB sent in total
// TWO-NEXT:    stage 2: reduce(add) @C over ranks [0, 1, 2, 3, 4, 5, 6, 7] to rank 0
// TWO-NEXT:    stage 2: reduce(add) @C over ranks [0, 1, 2, 3, 4, 5, 6, 7] to rank 1
// TWO:         stage 2: reduce(add) @C over ranks [0, 1, 2, 3, 4, 5, 6, 7] to rank 3
// TWO-NEXT:    stage 3: reduce(add) @C over ranks [0, 1, 2, 3, 4, 5, 6, 7] to rank 4
// TWO:         stage 3: reduce(add) @C over ranks [0, 1, 2, 3, 4, 5, 6, 7] to rank 7
// RUN: sed 's/factor=8 outer=m0/factor=16 outer=m0/' %repo/examples/schedules/chunked_rs.sched > %t.sixteen.sched
// RUN: %mercury-opt --schedule=%t.sixteen.sched --commir-print-comm-plan %repo/examples/gemm_rs.mlir | FileCheck %s --check-prefix=SIXTEEN
// SIXTEEN:     @C: reduce(add), 128 ops in 16 stages, 896.0 MiB sent in total
//
// The plan on 2 GPUs: the root names its destination (its own accumulator, the tile summed in
// place), the other member none; the partial sums are bf16, written by the GEMM directly.
// RUN: %mercury-opt %S/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t})' --emit=plan | FileCheck %s --check-prefix=PLAN
// PLAN:        "rank": 0,
// PLAN:        "name": "C.acc",
// PLAN-NEXT:   "dtype": "bf16",
// PLAN:        "name": "C.partial",
// PLAN-NEXT:   "dtype": "bf16",
// PLAN:        "accumulate": false
// PLAN:        "collective": "reduce",
// PLAN-NEXT:   "src": {
// PLAN-NEXT:     "slot": 2,
// PLAN:        "dst": {
// PLAN-NEXT:     "slot": 2,
// PLAN:        "root": 0,
// PLAN-NEXT:   "kind": "add"
// PLAN:        "collective": "reduce",
// PLAN-NEXT:   "src": {
// PLAN-NEXT:     "slot": 3,
// PLAN:        "dst": null,
// PLAN-NEXT:   "root": 1,
// PLAN-NEXT:   "kind": "add"
// PLAN:        "outputs": [
// PLAN:        "rank": 1,
//
// A replicated C: every rank keeps the sum, the all-reduce stays.
// RUN: sed 's/out sharding \[S(0), R\]/out sharding [R, R]/' %repo/examples/gemm_rs.mlir > %t.mlir
// RUN: %mercury-opt --schedule=%repo/examples/schedules/chunked_rs.sched --commir-print-comm-plan %t.mlir | FileCheck %s --check-prefix=REPL
// REPL:        @C: all_reduce(add), 64 ops in 8 stages, 1.8 GiB sent in total
//
// A column-sharded C: each row tile crosses every GPU's columns and every GPU owns one column
// part of it, so each tile is one reduce-scatter along the columns (scatter_order), not 8
// reduces: the same bytes in 8 calls instead of 64.
// RUN: sed 's/out sharding \[S(0), R\]/out sharding [R, S(0)]/' %repo/examples/gemm_rs.mlir > %t.cols.mlir
// RUN: %mercury-opt --schedule=%repo/examples/schedules/chunked_rs.sched --commir-print-comm-plan %t.cols.mlir | FileCheck %s --check-prefix=COLS
// COLS:        @C: reduce_scatter(add), 64 ops in 8 stages, 896.0 MiB sent in total
// COLS-NOT:    reduce(add)
