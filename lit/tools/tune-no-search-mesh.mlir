// mercury-tune --no-search keeps the declared mesh as the search does (its default schedule
// puts one role on every declared level); it used to re-shape a [2, 4] mesh to a flat 8 and
// write reshape-mesh without --refactor-mesh.
// REQUIRES: mercury-tune, mercury-run
// RUN: rm -rf %t && %mercury-tune %S/Inputs/gemm-rs-2x4.mlir --topology h100-2x4 --out %t --no-search 2>&1 | FileCheck %s
// CHECK: chosen: {{.*}}mesh 2x4: L0=m L1=m
// RUN: FileCheck %s --check-prefix=TRANSFORM < %t/schedule.transform
// TRANSFORM: # mesh shape [2, 4]
// TRANSFORM-NOT: reshape-mesh
// RUN: %mercury-run %S/Inputs/gemm-rs-2x4.mlir --schedule %t/schedule.transform --backend cpu --check 2>&1 | FileCheck %s --check-prefix=APPLY
// APPLY: comm-plan @gemm_rs: mesh [2, 4], 8 ranks
// APPLY: check @C: relative error {{.*}} ok
// With --refactor-mesh the default is the one level of every device, as before.
// RUN: rm -rf %t.re && %mercury-tune %S/Inputs/gemm-rs-2x4.mlir --topology h100-2x4 --out %t.re --no-search --refactor-mesh 2>&1 | FileCheck %s --check-prefix=RE
// RE: chosen: {{.*}}mesh 8: L0=m

// --no-search with --profile-top measures only a cached schedule: with none, it says that
// nothing was profiled, and why the default is used (an eleventh new-user pass: silent).
// RUN: rm -rf %t.p && %mercury-tune %S/Inputs/gemm-rs-2x4.mlir --topology h100-2x4 --out %t.p --no-search --profile-top 2 --backend cpu 2>&1 | FileCheck %s --check-prefix=PROFILE
// PROFILE: --profile-top 2 profiled nothing: --no-search measures only a cached schedule, and there is no usable one
// PROFILE: search disabled and no usable cached schedule: using the default
