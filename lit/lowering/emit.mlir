// The per-rank plan, and the device kernels it needs as MLIR gpu-dialect code and as PTX
// (compiled in-process through MLIR's NVVM pipeline; no CUDA needed).
// RUN: %mercury-opt --shift-shard --emit=plan %repo/examples/attention.mlir | FileCheck %s --check-prefix=PLAN
// RUN: %mercury-opt --schedule=%repo/examples/schedules/tree_attention.sched --emit=gpu-mlir %repo/examples/attention.mlir | FileCheck %s --check-prefix=GPU
// RUN: %mercury-opt --schedule=%repo/examples/schedules/tree_attention.sched --emit=ptx %repo/examples/attention.mlir | FileCheck %s --check-prefix=PTX
// RUN: %mercury-opt --emit=ptx --all-device-kernels --chip=sm_80 %repo/examples/attention.mlir | FileCheck %s --check-prefix=SM80
// RUN: not %mercury-opt --emit=ptx --chip=sm_999 %repo/examples/attention.mlir 2>&1 | FileCheck %s --check-prefix=BADCHIP

// PLAN: "name": "attention",
// PLAN: "op": "send",
// PLAN: "op": "recv",
// PLAN: "kind": "attention",
// PLAN: "accumulate": true

// TreeAttention merges partial softmax results across ranks: the log-sum-exp merge kernels.
// GPU: gpu.module @mercury_kernels {
// GPU: gpu.func @mercury_lse_merge_o_f32(
// GPU-SAME: kernel
// GPU: gpu.func @mercury_lse_merge_lse_f32(

// PTX: .version 8.0
// PTX: .target sm_90
// PTX-DAG: .visible .entry mercury_lse_merge_o_f32(
// PTX-DAG: .visible .entry mercury_lse_merge_lse_f32(
// PTX-DAG: .visible .entry mercury_cast_f32_to_bf16(
// PTX-NOT: __nv_

// SM80: .target sm_80
// SM80-COUNT-8: .visible .entry mercury_

// BADCHIP: error: --chip: invalid NVPTX target options: unknown NVPTX chip `sm_999`
