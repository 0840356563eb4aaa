// GEMM epilogue fusion (lowering/conversion/src/activation.rs): a gemm patch whose f32 product
// only feeds GeLU and/or a cast right after it becomes one gemm with a cuBLASLt epilogue that
// writes the cast result; anything else keeps the generated elementwise kernel.
// RUN: %mercury-opt --pass-pipeline='builtin.module(patch{kernel=gemm})' --emit=plan --kernel=gelu_cast %s | FileCheck %s --check-prefix=FUSED
// RUN: %mercury-opt --pass-pipeline='builtin.module(patch{kernel=gemm})' --emit=plan --kernel=cast_only %s | FileCheck %s --check-prefix=CAST
// RUN: %mercury-opt --pass-pipeline='builtin.module(patch{kernel=gemm})' --emit=plan --kernel=silu %s | FileCheck %s --check-prefix=SILU
// RUN: %mercury-opt --pass-pipeline='builtin.module(patch{kernel=gemm})' --emit=plan --kernel=product_stored %s | FileCheck %s --check-prefix=STORED
// On the CPU executor the fused plan equals the unscheduled (unpatched, unfused) reference.
// RUN: %if mercury-run %{ %mercury-run %s --kernel=gelu_cast --pass-pipeline='builtin.module(patch{kernel=gemm})' --backend cpu --check --seed 3 | FileCheck %s --check-prefix=RUN-CHECK %}
// RUN-CHECK: check @H: relative error {{.*}} ok

commir.mesh @mesh shape [1] names ["gpu"]

// FUSED:      "kind": "gemm",
// FUSED-NEXT: "accumulate": false,
// FUSED-NEXT: "epilogue": "gelu"
// FUSED-NOT:  "op": "tile"
commir.kernel @gelu_cast on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @d = 32 managed
  commir.axis @f = 48 spatial
  commir.buffer @X : [@m, @d] bf16 in sharding [R, R]
  commir.buffer @W : [@d, @f] bf16 in sharding [R, R]
  commir.buffer @H : [@m, @f] bf16 out sharding [R, R]
  %x = commir.load @X[@m, @d] : !commir.tile<bf16>
  %w = commir.load @W[@d, @f] : !commir.tile<bf16>
  %a = commir.matmul %x, %w : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %g = commir.unary gelu %a : !commir.tile<f32>
  %gb = commir.cast %g : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %gb into @H[@m, @f] : !commir.tile<bf16>
}

// A lone cast is an epilogue too (the gemm writes bf16).
// CAST:      "kind": "gemm",
// CAST-NEXT: "accumulate": false
// CAST-NEXT: },
// CAST-NOT:  "op": "tile"
commir.kernel @cast_only on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @d = 32 managed
  commir.axis @f = 48 spatial
  commir.buffer @X : [@m, @d] bf16 in sharding [R, R]
  commir.buffer @W : [@d, @f] bf16 in sharding [R, R]
  commir.buffer @H : [@m, @f] bf16 out sharding [R, R]
  %x = commir.load @X[@m, @d] : !commir.tile<bf16>
  %w = commir.load @W[@d, @f] : !commir.tile<bf16>
  %a = commir.matmul %x, %w : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %ab = commir.cast %a : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %ab into @H[@m, @f] : !commir.tile<bf16>
}

// cuBLASLt has no SiLU epilogue: the generated kernel stays.
// SILU:      "kind": "gemm",
// SILU-NEXT: "accumulate": false
// SILU-NEXT: },
// SILU:      "op": "tile",
// SILU:      "f": "silu",
commir.kernel @silu on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @d = 32 managed
  commir.axis @f = 48 spatial
  commir.buffer @X : [@m, @d] bf16 in sharding [R, R]
  commir.buffer @W : [@d, @f] bf16 in sharding [R, R]
  commir.buffer @H : [@m, @f] bf16 out sharding [R, R]
  %x = commir.load @X[@m, @d] : !commir.tile<bf16>
  %w = commir.load @W[@d, @f] : !commir.tile<bf16>
  %a = commir.matmul %x, %w : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  %g = commir.unary silu %a : !commir.tile<f32>
  %gb = commir.cast %g : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %gb into @H[@m, @f] : !commir.tile<bf16>
}

// The f32 product is also stored: the gemm keeps writing it, GeLU stays a generated kernel.
// STORED:      "kind": "gemm",
// STORED-NEXT: "accumulate": false
// STORED-NEXT: },
// STORED:      "op": "tile",
// STORED:      "f": "gelu",
commir.kernel @product_stored on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @d = 32 managed
  commir.axis @f = 48 spatial
  commir.buffer @X : [@m, @d] bf16 in sharding [R, R]
  commir.buffer @W : [@d, @f] bf16 in sharding [R, R]
  commir.buffer @A : [@m, @f] f32 out sharding [R, R]
  commir.buffer @H : [@m, @f] bf16 out sharding [R, R]
  %x = commir.load @X[@m, @d] : !commir.tile<bf16>
  %w = commir.load @W[@d, @f] : !commir.tile<bf16>
  %a = commir.matmul %x, %w : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.store %a into @A[@m, @f] : !commir.tile<f32>
  %g = commir.unary gelu %a : !commir.tile<f32>
  %gb = commir.cast %g : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %gb into @H[@m, @f] : !commir.tile<bf16>
}
