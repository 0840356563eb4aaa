// The generated epilogue of the MLP (examples/mlp.mlir) where it is not patched: GeLU (tanh
// form) of the tile matmul's f32 output, cast to bf16 and stored into the temp buffer @H, one
// kernel for every block (its name hashes what it computes), with the contract of
// mercury_plan::tile_kernel: out, in0, d0, d1, cols, then three element strides per operand.
// RUN: %mercury-opt --emit=gpu-mlir %repo/examples/mlp.mlir | FileCheck %s --check-prefix=MLIR
// RUN: %mercury-opt --emit=ptx %repo/examples/mlp.mlir | FileCheck %s
// Under the schedules the matmul is a gemm patch and GeLU + cast become its cuBLASLt epilogue
// (lowering/conversion/src/activation.rs): no generated elementwise kernel is left.
// RUN: %mercury-opt --emit=gpu-mlir --schedule=%repo/examples/schedules/mlp_overlap.sched %repo/examples/mlp.mlir | FileCheck %s --check-prefix=FUSED
// RUN: %mercury-opt --emit=gpu-mlir --schedule=%repo/examples/schedules/mlp_megatron.sched %repo/examples/mlp.mlir | FileCheck %s --check-prefix=FUSED
// FUSED: gpu.module @mercury_kernels
// FUSED-NOT: gpu.func @mercury_ew_

// MLIR: gpu.func @[[K:mercury_ew_[0-9a-f]+]](%out: !llvm.ptr<1>, %in0: !llvm.ptr<1>, %d0: i64, %d1: i64, %cols: i64, %out_s0: i64, %out_s1: i64, %out_s2: i64, %in0_s0: i64, %in0_s1: i64, %in0_s2: i64) kernel
// MLIR: scf.for %e = %gid to %total step %stride : i64
// MLIR-NOT: gpu.func @mercury_ew_

// CHECK-LABEL: .visible .entry mercury_ew_2367f5de463c477d(
// CHECK-NEXT:  .param .u64 .ptr .global .align 1 [[K:mercury_ew_[0-9a-f]+]]_param_0,
// CHECK-NEXT:  .param .u64 .ptr .global .align 1 [[K]]_param_1,
// CHECK-COUNT-8: .param .u64 [[K]]_param_{{[0-9]+}},
// CHECK-NEXT:  .param .u64 [[K]]_param_10
// CHECK-NEXT: )
// Grid-stride loop over d0 * d1 * cols work items, split in 32-bit arithmetic.
// CHECK:      %ctaid.x
// CHECK:      div.u32
// The f32 input element, then GeLU: x + 0.044715 x^3, times 2 sqrt(2/pi) log2(e), 2^(.) on
// ex2.approx, tanh = 1 - 2 / (e^(2y) + 1), times 0.5 x.
// CHECK:      ld.global.b32 [[X:%r[0-9]+]], [%rd{{[0-9]+}}];
// CHECK:      mul.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0f3D372713;
// CHECK:      mul.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0f3FCC422A;
// CHECK:      mul.rn.f32 {{%r[0-9]+}}, {{%r[0-9]+}}, 0f3FB8AA3B;
// CHECK-NEXT: ex2.approx.f32
// CHECK:      div.rn.f32
// CHECK:      mul.rn.f32 {{%r[0-9]+}}, [[X]], 0f3F000000;
// Rounded to nearest even bf16 (NaN kept quiet) and stored as 16 bits.
// CHECK:      add.s32 {{%r[0-9]+}}, {{%r[0-9]+}}, 32767;
// CHECK:      setp.nan.f32
// CHECK:      st.global.b16
// CHECK:      ret;
// CHECK-NOT:  .extern
