// distribute (passes/transforms/src/distribute.rs): loop fission at the points no SSA value
// crosses; the nests share their axis, and shift picks one with nth=.
// RUN: %mercury-opt --split-input-file --pass-pipeline='builtin.module(distribute{axis=m0},shift{axis=m0 by=f0 nth=0},shift{axis=m0 by=f0 nth=1 offset=1})' %s | FileCheck %s
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(distribute{axis=m0})' %S/Inputs/distribute-invalid.mlir
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(distribute{axis=m0},shift{axis=m0 by=f0})' %S/Inputs/distribute-then-shift.mlir
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(distribute{axis=m0},shift{axis=m0 by=f0 nth=2})' %S/Inputs/distribute-then-shift-nth.mlir
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(distribute{axis=m0},tile{axis=m0 factor=2})' %S/Inputs/distribute-then-tile.mlir
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(distribute{axis=m0},distribute{axis=m0})' %S/Inputs/distribute-twice.mlir
// RUN: %mercury-opt --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(distribute{axis=m0},shard{buffer=A axis=m0})' %S/Inputs/distribute-then-shard.mlir

// The MLP's two halves: the first nest stores the temp @H, the second loads it at the same
// tile; the perfectly nested loop over @m1 is copied into both.
// CHECK-LABEL: commir.kernel @mlp
// CHECK:       commir.for @f0 parallel(0) {
// CHECK-NEXT:    commir.for @m0 shift(@f0) {
// CHECK-NEXT:      commir.for @m1 {
// CHECK-NEXT:        %{{.*}} = commir.load @X[(@m0 + @f0) mod 2, @m1, @m_u, @d]
// CHECK:             commir.store %{{.*}} into @H[(@m0 + @f0) mod 2, @m1, @m_u, @f0, @f_t]
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:    commir.for @m0 shift(@f0) {
// CHECK-NEXT:      commir.for @m1 {
// CHECK-NEXT:        %{{.*}} = commir.load @H[(@m0 + @f0 + 1) mod 2, @m1, @m_u, @f0, @f_t]
// CHECK:             commir.reduce add %{{.*}} into @Y[(@m0 + @f0 + 1) mod 2, @m1, @m_u, @e]
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
commir.mesh @mesh shape [2] names ["gpu"]
commir.kernel @mlp on @mesh {
  commir.axis @m0 = 2 spatial
  commir.axis @m1 = 2 spatial
  commir.axis @m_u = 16 spatial
  commir.axis @d = 32 managed
  commir.axis @f0 = 2 managed
  commir.axis @f_t = 24 managed
  commir.axis @e = 32 spatial
  commir.buffer @X : [@m0 * @m1 * @m_u, @d] bf16 in sharding [S(0), R]
  commir.buffer @W1 : [@d, @f0 * @f_t] bf16 in sharding [R, S(0)]
  commir.buffer @H : [@m0 * @m1 * @m_u, @f0 * @f_t] bf16 temp sharding [R, S(0)]
  commir.buffer @W2 : [@f0 * @f_t, @e] bf16 in sharding [S(0), R]
  commir.buffer @Y : [@m0 * @m1 * @m_u, @e] bf16 out sharding [S(0), R]
  commir.for @f0 parallel(0) {
    commir.for @m0 {
      commir.for @m1 {
        %x = commir.load @X[@m0, @m1, @m_u, @d] : !commir.tile<bf16>
        %w1 = commir.load @W1[@d, @f0, @f_t] : !commir.tile<bf16>
        %a = commir.patch "gemm" (%x, %w1) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
        %gb = commir.cast %a : !commir.tile<f32> to !commir.tile<bf16>
        commir.store %gb into @H[@m0, @m1, @m_u, @f0, @f_t] : !commir.tile<bf16>
        %h = commir.load @H[@m0, @m1, @m_u, @f0, @f_t] : !commir.tile<bf16>
        %w2 = commir.load @W2[@f0, @f_t, @e] : !commir.tile<bf16>
        %y = commir.patch "gemm" (%h, %w2) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
        commir.reduce add %y into @Y[@m0, @m1, @m_u, @e] : !commir.tile<f32>
      }
    }
  }
}
