// A matrix-vector product (a GEMM patch whose second operand is 1-D: B[k], C[m]) is tuned with
// the GEMM roles that do not name n: m, k, k+shift(m), k+shift-halves(m), m+ring(k). It was
// refused ("written for A[m, k] and B[k, n]"); the paper's running example is one.
// REQUIRES: mercury-tune
// RUN: rm -rf %t && mkdir -p %t
// RUN: %mercury-tune %repo/examples/weighted_sum.mlir --topology h100-1x4 --out %t/big | FileCheck %s --check-prefix=BIG
// BIG: chosen: mesh 4: L0=
// BIG: searched:  5 seen, 0 invalid
// Every candidate on every mesh of 8 devices computes the product: each profiled run is checked.
// RUN: %mercury-tune %S/Inputs/matvec-small.mlir --topology h200-1x8 --refactor-mesh --profile-top 1000 --backend cpu --out %t/small | FileCheck %s --check-prefix=ALL
// ALL: searched:  [[N:[0-9]+]] seen, 0 invalid, 0 over memory, [[N]] simulated, [[N]] profiled
// RUN: %mercury-run %S/Inputs/matvec-small.mlir --schedule %t/small/schedule.transform --backend cpu --check | FileCheck %s --check-prefix=CHECKED
// CHECKED: check @C: relative error {{.*}} ok
