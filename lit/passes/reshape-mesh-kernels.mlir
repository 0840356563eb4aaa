// reshape-mesh re-shapes one kernel's mesh and touches no other kernel
// (passes/transforms/src/mesh.rs, `reshape_mesh`): `on=` (or mercury-opt --kernel) names the
// kernel; without it the kernels must share one mesh.
//
// Two kernels on meshes of 8 and 2 devices: which mesh is meant? Refused, at the first kernel
// on a second mesh (before, both became 2x4: the 2-device kernel silently ran on 8).
// RUN: not %mercury-opt --reshape-mesh=shape=2x4 %s 2>&1 | FileCheck %s --check-prefix=SEVERAL
// SEVERAL: reshape-mesh-kernels.mlir:72:1: error: reshape-mesh{shape=2x4}: the module's kernels are on several meshes (@m8 and @m2, of '@small'); name the kernel whose mesh to re-shape with 'on=' (mercury-opt --kernel)
//
// on=big: @m8 becomes 2x4, @small keeps its 2 devices and its placements.
// RUN: %mercury-opt --pass-pipeline='builtin.module(reshape-mesh{shape=2x4 on=big})' %s | FileCheck %s --check-prefix=BIG
// The same through the driver's --kernel (the pass's default target).
// RUN: %mercury-opt --kernel big --reshape-mesh=shape=2x4 %s | FileCheck %s --check-prefix=BIG
// BIG:      commir.mesh @m8 shape [2, 4]
// BIG-NEXT: commir.mesh @m2 shape [2] names ["gpu"]
// BIG:      commir.kernel @big on @m8
// BIG:      commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
// BIG:      commir.kernel @small on @m2
// BIG:      commir.buffer @C : [@i] f32 out sharding [S(0)]
//
// on=small: only @m2 changes (2 devices as 1x2: the sharded dimension over both levels).
// RUN: %mercury-opt --pass-pipeline='builtin.module(reshape-mesh{shape=1x2 on=small})' %s | FileCheck %s --check-prefix=SMALL
// SMALL:      commir.mesh @m8 shape [8] names ["gpu"]
// SMALL-NEXT: commir.mesh @m2 shape [1, 2]
// SMALL:      commir.kernel @big on @m8
// SMALL:      commir.buffer @C : [@i] f32 out sharding [S(0)]
// SMALL:      commir.kernel @small on @m2
// SMALL:      commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
//
// RUN: not %mercury-opt --pass-pipeline='builtin.module(reshape-mesh{shape=2x4 on=nope})' %s 2>&1 | FileCheck %s --check-prefix=NOPE
// NOPE: error: reshape-mesh{shape=2x4}: no commir.kernel named '@nope'
//
// A shape the operator's shards do not divide into is refused by the pass, at the buffer (it
// used to pass, and the verifier refused the result: "IR invalid after pass"); so is one of
// more devices than a mesh may have.
// RUN: not %mercury-opt --kernel big --reshape-mesh=shape=3 %s 2>&1 | FileCheck %s --check-prefix=THREE
// THREE: reshape-mesh-kernels.mlir:64:3: error: reshape-mesh{shape=3} cannot place the operator on mesh [3]: dimension 0 of '@A' (size 1024) does not divide into 3 shards; keep the mesh [8], or give a shape whose devices divide it
// THREE-NOT: IR invalid after pass
// RUN: not %mercury-opt --kernel big --reshape-mesh=shape=4294967296x4294967296x2 %s 2>&1 | FileCheck %s --check-prefix=HUGE
// HUGE: error: pass 'reshape-mesh': option 'shape' = '4294967296x4294967296x2' has more than 1048576 devices
//
// Both kernels on @m8: on=big gets a re-shaped copy of the mesh of its own, @small keeps @m8.
// RUN: sed 's/@small on @m2/@small on @m8/' %s > %t.shared.mlir
// RUN: %mercury-opt --kernel big --reshape-mesh=shape=2x4 %t.shared.mlir | FileCheck %s --check-prefix=COPY
// COPY:      commir.mesh @m8 shape [8] names ["gpu"]
// COPY-NEXT: commir.mesh @m8_2x4 shape [2, 4]
// COPY:      commir.kernel @big on @m8_2x4
// COPY:      commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
// COPY:      commir.kernel @small on @m8
// COPY:      commir.buffer @C : [@i] f32 out sharding [S(0)]
// Without a kernel named, the one shared mesh is re-shaped for both.
// RUN: %mercury-opt --reshape-mesh=shape=2x4 %t.shared.mlir | FileCheck %s --check-prefix=BOTH
// BOTH:     commir.mesh @m8 shape [2, 4]
// BOTH:     commir.kernel @big on @m8
// BOTH:     commir.buffer @C : [@i] f32 out sharding [S(0, 1)]
// BOTH:     commir.kernel @small on @m8
// BOTH:     commir.buffer @C : [@i] f32 out sharding [S(0, 1)]

commir.mesh @m8 shape [8] names ["gpu"]
commir.mesh @m2 shape [2] names ["gpu"]
commir.kernel @big on @m8 {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
commir.kernel @small on @m2 {
  commir.axis @i = 1024 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in sharding [S(0), R]
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out sharding [S(0)]
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
