// Zigzag (one round or over chunks) and striped placements: the custom form prints back as
// written, the generic form spells each level as a mesh dimension or ["zigzag", level],
// ["zigzag", level, chunk] / ["striped", level, block],
// reads back, and upstream mlir-opt 22 accepts it through the IRDL definition.
// RUN: %mercury-opt %s | FileCheck %s
// RUN: %mercury-opt %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | FileCheck %s --check-prefix=GENERIC
// RUN: %mercury-opt --mlir-print-op-generic %s | %mercury-opt | FileCheck %s
// RUN: %mercury-opt --mlir-print-op-generic %s | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir | FileCheck %s --check-prefix=UPSTREAM
// RUN: %mercury-opt --split-input-file --verify-diagnostics %S/Inputs/placements-invalid.mlir

commir.mesh @m shape [2, 4]
commir.kernel @k on @m {
  commir.axis @b = 2 spatial
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @Q : [@b, @i, 8] f32 in sharding [R, S(zigzag(0), zigzag(1)), R]
  commir.buffer @K : [@b, @j, 8] f32 in sharding [S(0), S(striped(1, 4)), R]
  commir.buffer @V : [@b, @j, 8] f32 in sharding [R, S(0, zigzag(1)), R]
  commir.buffer @O : [@b, @i, 8] f32 out sharding [R, S(striped(0, 8), 1), R]
  commir.buffer @T : [@b, @i, 8] f32 temp sharding [R, S(zigzag(0, 4), 1), R]
  commir.reshard @Q to [R, S(0, 1), R]
  %q = commir.load @Q[@b, @i] : !commir.tile<f32>
  %k = commir.load @K[@b, @j] : !commir.tile<f32>
  %v = commir.load @V[@b, @j] : !commir.tile<f32>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<f32>, !commir.tile<f32>, !commir.tile<f32>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @i] : !commir.tile<f32>, !commir.tile<f32>
}

// CHECK: commir.buffer @Q : [@b, @i, 8] f32 in sharding [R, S(zigzag(0), zigzag(1)), R]
// CHECK: commir.buffer @K : [@b, @j, 8] f32 in sharding [S(0), S(striped(1, 4)), R]
// CHECK: commir.buffer @V : [@b, @j, 8] f32 in sharding [R, S(0, zigzag(1)), R]
// CHECK: commir.buffer @O : [@b, @i, 8] f32 out sharding [R, S(striped(0, 8), 1), R]
// CHECK: commir.buffer @T : [@b, @i, 8] f32 temp sharding [R, S(zigzag(0, 4), 1), R]
// CHECK: commir.reshard @Q to [R, S(0, 1), R]

// GENERIC: sharding = {{\[}}[], {{\[}}["zigzag", 0], ["zigzag", 1]], []]
// GENERIC: sharding = {{\[}}[0], {{\[}}["striped", 1, 4]], []]
// GENERIC: sharding = {{\[}}[], [0, ["zigzag", 1]], []]
// GENERIC: sharding = {{\[}}[], {{\[}}["striped", 0, 8], 1], []]
// GENERIC: sharding = {{\[}}[], {{\[}}["zigzag", 0, 4], 1], []]

// UPSTREAM: "commir.buffer"() {{.*}}sharding = {{\[}}[], {{\[}}["zigzag", 0], ["zigzag", 1]], []]
// UPSTREAM: "commir.buffer"() {{.*}}sharding = {{\[}}[], {{\[}}["zigzag", 0, 4], 1], []]
