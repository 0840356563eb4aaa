// Upstream MLIR prints the implicit terminator our generic form spells out in its own custom
// form, a bare `transform.yield`; we read it as that generic op, which the region's op drops.
// It was refused ("custom op 'transform.yield' is unknown"), so a kernel's round trip through
// `mlir-opt --irdl-file` did not read back unless upstream printed generically too (found by a
// fourteenth new-user pass).
// RUN: rm -rf %t && split-file --leading-lines %s %t
// RUN: %mercury-opt --mlir-print-op-generic %t/kernel.mlir | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir | FileCheck %s --check-prefix=UPSTREAM
// UPSTREAM: "commir.for"
// UPSTREAM: {{^ *}}transform.yield{{ *$}}
// RUN: %mercury-opt --mlir-print-op-generic %t/kernel.mlir | %mlir-opt --irdl-file=%repo/dialects/commir/commir.irdl.mlir | %mercury-opt | FileCheck %s --check-prefix=BACK
// BACK:      commir.kernel @k on @m {
// BACK:        commir.for @i parallel(0) {
// BACK-NEXT:     %[[X:.*]] = commir.load @X[@i] : !commir.tile<f32>
// BACK-NEXT:     commir.store %[[X]] into @Y[@i] : !commir.tile<f32>
// BACK-NEXT:   }
// BACK-NEXT: }
// BACK-NOT: transform.yield
// A bare `transform.yield` anywhere else is still the unknown op it was.
// RUN: not %mercury-opt %t/stray.mlir 2>&1 | FileCheck %s --check-prefix=STRAY
// STRAY: stray.mlir:{{[0-9]+}}:1: error: {{.*}}transform.yield

//--- kernel.mlir
commir.mesh @m shape [2]
commir.kernel @k on @m {
  commir.axis @i = 2 spatial
  commir.buffer @X : [@i] f32 in sharding [S(0)]
  commir.buffer @Y : [@i] f32 out sharding [S(0)]
  commir.for @i parallel(0) {
    %x = commir.load @X[@i] : !commir.tile<f32>
    commir.store %x into @Y[@i] : !commir.tile<f32>
  }
}

//--- stray.mlir
transform.yield
