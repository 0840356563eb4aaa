// Partial sums of a bf16 output travel in bf16 (lowering/conversion/src/epilogue.rs,
// bf16_partial_sums; the rule is context.rs's partial_sum_dtype), in a reduce-scatter and in
// an all-reduce. Megatron's row-parallel GEMM
// on 2 GPUs: each rank's one GEMM writes its partial sum in bf16 directly (accumulate false,
// no f32 accumulator, no cast) and the reduce-scatter moves bf16 into a bf16 shard.
// RUN: %mercury-opt %S/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --emit=plan | FileCheck %s --check-prefix=ONE
// ONE-NOT:   "name": "C.acc"
// ONE:       "name": "C.partial",
// ONE-NEXT:  "dtype": "bf16",
// ONE:       "name": "C.rs",
// ONE-NEXT:  "dtype": "bf16",
// ONE:       "kind": "gemm",
// ONE-NEXT:  "accumulate": false
// ONE:       "collective": "reduce_scatter"
// ONE-NOT:   "name": "C.acc"
//
// Two GEMMs per rank sum into the accumulator (k tiled again inside the rank): it stays f32,
// and so does the scatter (cuBLASLt cannot read an f32 C and write a bf16 D).
// RUN: %mercury-opt %S/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=k_t factor=2 outer=k1 inner=k_u})' --emit=plan | FileCheck %s --check-prefix=TWO
// TWO-NOT:   "name": "C.partial"
// TWO:       "name": "C.acc",
// TWO-NEXT:  "dtype": "f32",
// TWO:       "name": "C.rs",
// TWO-NEXT:  "dtype": "f32",
// TWO:       "collective": "reduce_scatter"
//
// A replicated output (an all-reduce in place): the accumulator is bf16, written by the GEMM.
// RUN: %mercury-opt %S/Inputs/gemm-ar-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --emit=plan | FileCheck %s --check-prefix=AR
// AR:       "name": "C.acc",
// AR-NEXT:  "dtype": "bf16",
// AR:       "kind": "gemm",
// AR-NEXT:  "accumulate": false
// AR:       "collective": "all_reduce"
//
// f32 operands: a GEMM cannot write bf16 from them (mercury_plan::patch::gemm_writes), so the
// partial sums stay f32, under Megatron and under shift-reduce alike (found by a new-user pass:
// the plan had an f32 -> bf16 GEMM the CUDA backend refuses).
// RUN: %mercury-opt %S/Inputs/gemm-rs-f32in-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --emit=plan | FileCheck %s --check-prefix=F32IN
// RUN: %mercury-opt %S/Inputs/gemm-rs-f32in-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=m factor=2 outer=m0 inner=m_t},shift{axis=m0 by=k0 offset=1})' --emit=plan | FileCheck %s --check-prefix=F32IN
// F32IN:     "ranks": [
// F32IN-NOT: "dtype": "bf16"
//
// All agree with the unscheduled operator on the CPU executor, in f64 and in their dtypes.
// RUN: %if mercury-run %{ %mercury-run %S/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN: %if mercury-run %{ %mercury-run %S/Inputs/gemm-rs-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=k_t factor=2 outer=k1 inner=k_u})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN: %if mercury-run %{ %mercury-run %S/Inputs/gemm-ar-2.mlir --pass-pipeline='builtin.module(tile{axis=k factor=2 outer=k0 inner=k_t},parallelize{axis=k0 level=0})' --backend cpu --check | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN-CHECK: check @C: relative error {{.*}} ok
// RUN-CHECK: check @C in its dtypes: relative error {{.*}} ok
