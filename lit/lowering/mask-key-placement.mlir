// A causal mask reads the real positions of its tile's last two dimensions. The key dimension
// was followed only where it is a loaded tile's second-to-last (K as [.., j, d]): a tile whose
// last dimension is zigzag or striped (a score tile loaded whole, or K stored transposed) was
// masked at the rank's order offset (relative error 0.69 and 0.40 against numpy, exit 0;
// ninth new-user pass, 2026-12-03). Every dimension now carries its real first position when
// it is one run, and a mask over one that is not is refused, as the query dimension's is.
// RUN: %exit-status %mercury-run %s --backend cpu 2>&1 | FileCheck %s --check-prefix=WHOLE
// WHOLE: mask-key-placement.mlir:[[@LINE+17]]:8: error: a causal mask on a tile whose sequence positions are not one run (a zigzag or striped placement) is not supported
// WHOLE: exit status 1
// RUN: %exit-status %mercury-run %s --backend cpu --pass-pipeline='builtin.module(reshard{buffer=X sharding=R,S(striped(0,2))})' 2>&1 | FileCheck %s --check-prefix=WHOLE
// RUN: %exit-status %mercury-run %S/Inputs/mask-kt-zigzag.mlir --backend cpu 2>&1 | FileCheck %s --check-prefix=KT
// KT: mask-kt-zigzag.mlir:14:9: error: a causal mask on a tile whose sequence positions are not one run
// KT: exit status 1
// Tiles of the key axis that are each one zigzag chunk are masked at their real positions
// (checked against the single-device run, where no placement reorders anything).
// RUN: %mercury-run %s --backend cpu --check --pass-pipeline='builtin.module(tile{axis=j factor=4 outer=j0 inner=jt})' | FileCheck %s --check-prefix=TILED
// TILED: check @Y: relative error {{.*}} ok
commir.mesh @mesh shape [2]
commir.kernel @mk on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @j = 8 spatial
  commir.buffer @X : [@i, @j] f32 in sharding [R, S(zigzag(0))]
  commir.buffer @Y : [@i, @j] f32 out
  %x = commir.load @X[@i, @j] : !commir.tile<f32>
  %m = commir.mask causal %x : !commir.tile<f32>
  %e = commir.unary exp %m : !commir.tile<f32>
  commir.store %e into @Y[@i, @j] : !commir.tile<f32>
}
