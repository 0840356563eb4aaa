// The per-rank plan, and the device kernels it needs as MLIR gpu-dialect code and as PTX
// (compiled in-process through MLIR's NVVM pipeline; no CUDA needed).
// RUN: %mercury-opt --shift-shard --emit=plan %repo/examples/attention.mlir | FileCheck %s --check-prefix=PLAN
// RUN: %mercury-opt --schedule=%repo/examples/schedules/tree_attention.sched --emit=gpu-mlir %repo/examples/attention.mlir | FileCheck %s --check-prefix=GPU
// RUN: %mercury-opt --schedule=%repo/examples/schedules/tree_attention.sched --emit=ptx %repo/examples/attention.mlir | FileCheck %s --check-prefix=PTX
// RUN: %mercury-opt --emit=ptx --all-device-kernels --chip=sm_80 %repo/examples/attention.mlir | FileCheck %s --check-prefix=SM80
// RUN: %mercury-opt --emit=ptx --all-device-kernels %repo/examples/attention.mlir | FileCheck %s --check-prefix=ATTN
// An unknown --chip is a command-line error (not located in the input), said before the input
// is read.
// RUN: %exit-status %mercury-opt --emit=ptx --chip=sm_999 %repo/examples/attention.mlir 2>&1 | FileCheck %s --check-prefix=BADCHIP
// RUN: %exit-status %mercury-opt --emit=ptx --chip=sm_999 %t.does-not-exist.mlir 2>&1 | FileCheck %s --check-prefix=BADCHIP
// Flags only device-code output reads are refused with any other --emit (they were ignored).
// RUN: %exit-status %mercury-opt --all-device-kernels %repo/examples/attention.mlir 2>&1 | FileCheck %s --check-prefix=UNREAD-ALL
// UNREAD-ALL: mercury-opt: error: --all-device-kernels applies to --emit=ptx and --emit=gpu-mlir only
// UNREAD-ALL: exit status 1
// RUN: %exit-status %mercury-opt --emit=plan --chip=sm_80 --shift-shard %repo/examples/attention.mlir 2>&1 | FileCheck %s --check-prefix=UNREAD-CHIP
// UNREAD-CHIP: mercury-opt: error: --chip applies to --emit=ptx only (nothing else reads it)
// UNREAD-CHIP: exit status 1

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
// SM80-COUNT-10: .visible .entry mercury_

// The epilogue of the cuDNN attention patch: a bf16 partial output merged into a strided f32
// accumulator, four elements per thread through vector loads and stores, 32-bit index math.
// ATTN-LABEL: .visible .entry mercury_attn_merge_o_bf16(
// ATTN-DAG: ld.global.v4.b16
// ATTN-DAG: ld.global.v4.b32
// ATTN-DAG: st.global.v4.b32
// ATTN-DAG: ex2.approx.f32
// ATTN-DAG: div.u32
// ATTN-LABEL: .visible .entry mercury_attn_merge_lse(
// ATTN: lg2.approx.f32

// BADCHIP: {{^}}mercury-opt: error: --chip sm_999: invalid NVPTX target options: unknown NVPTX chip `sm_999`
// BADCHIP-NEXT: {{^}}exit status 1
