// The generated device code of the Llama-3-8B layer's own compute (examples/llama3_layer.mlir
// under the context-parallel layer schedule): RMSNorm's row sum, its scale, epsilon and
// reciprocal square root (sqrt.rn and rcp.rn: correctly rounded), the weight a trailing
// operand; RoPE's rotation, which loads its input again at column (c + cols/2) mod cols and
// negates the first half. The host-compiled kernels are held to the f64 reference in
// lowering/gpu/src/elementwise/tests.rs; these lines hold the emitted code.
// RUN: %mercury-opt --emit=gpu-mlir --kernel attn_norm --schedule=%repo/examples/schedules/llama3_layer_cp.sched %repo/examples/llama3_layer.mlir | FileCheck %s --check-prefix=NORM
// RUN: %mercury-opt --emit=ptx --kernel attn_norm --schedule=%repo/examples/schedules/llama3_layer_cp.sched %repo/examples/llama3_layer.mlir | FileCheck %s --check-prefix=PTX
// RUN: %mercury-opt --emit=gpu-mlir --kernel qkv_rope --schedule=%repo/examples/schedules/llama3_layer_cp.sched %repo/examples/llama3_layer.mlir | FileCheck %s --check-prefix=ROPE
// NORM: gpu.func @mercury_row_sum_f32_f32(
// NORM: llvm.call_intrinsic "llvm.sqrt.f32"
// NORM-NEXT: arith.constant 0x3F800000 : f32
// NORM-NEXT: arith.divf
// PTX: .visible .entry mercury_row_sum_f32_f32(
// PTX: sqrt.rn.f32
// PTX-NEXT: rcp.rn.f32
// ROPE: gpu.func @mercury_ew_{{[0-9a-f]+}}(%out: !llvm.ptr<1>, %in0: !llvm.ptr<1>, %in1: !llvm.ptr<1>, %in2: !llvm.ptr<1>,
// ROPE: %[[H:.*]] = arith.divui %cols, %{{.*}} : i64
// ROPE-NEXT: %[[UP:.*]] = arith.addi %i2, %[[H]] : i64
// ROPE-NEXT: %[[WRAP:.*]] = arith.cmpi uge, %[[UP]], %cols : i64
// ROPE-NEXT: %[[DOWN:.*]] = arith.subi %i2, %[[H]] : i64
// ROPE-NEXT: %[[COL:.*]] = arith.select %[[WRAP]], %[[DOWN]], %[[UP]] : i64
// ROPE: %[[X:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// ROPE-NEXT: %[[NEG:.*]] = arith.negf %[[X]] : f32
// ROPE-NEXT: arith.select %[[WRAP]], %[[X]], %[[NEG]] : f32
