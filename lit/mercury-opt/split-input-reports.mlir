// With --split-input-file a pass's report (--commir-print-comm-plan) comes with its own
// chunk: after the previous chunk's IR and its split marker, before its IR (every report came
// first, ahead of the first chunk's IR).
// RUN: %mercury-opt --split-input-file --commir-print-comm-plan %s | FileCheck %s
// CHECK:      // comm-plan @first: mesh [2]
// CHECK:      commir.kernel @first
// CHECK:      {{//}} -----
// CHECK-NEXT: // comm-plan @second: mesh [4]
// CHECK:      commir.kernel @second
commir.mesh @m shape [2]
commir.kernel @first on @m {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in sharding [S(0)]
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  %a = commir.load @A[@i] : !commir.tile<f32>
  commir.store %a into @C[@i] : !commir.tile<f32>
}

// -----

commir.mesh @m shape [4]
commir.kernel @second on @m {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in sharding [S(0)]
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  %a = commir.load @A[@i] : !commir.tile<f32>
  commir.store %a into @C[@i] : !commir.tile<f32>
}
