// --check on the CPU also runs both plans with every value stored in its slot's dtype (what a
// device holds) and says how many elements the schedule rounds otherwise than the
// single-device plan: none when every partial sum is finished in f32 before its bf16 cast
// (two GEMMs per rank summing into an f32 accumulator before the reduce-scatter), many for
// Megatron's reduce-scatter of bf16 partial sums (one GEMM per rank writes bf16) and for
// shift-reduce, whose partial tiles travel in bf16.
// REQUIRES: mercury-run
// RUN: %mercury-run %s --pass-pipeline='builtin.module(tile{axis=k factor=8 outer=k0 inner=k_t},parallelize{axis=k0 level=0},tile{axis=k_t factor=2 outer=k1 inner=k_u})' --backend cpu --check --seed 3 2>&1 | FileCheck %s --check-prefix=F32ACC
// F32ACC: check @C: relative error {{.*}} ok
// F32ACC: check @C in its dtypes: relative error {{.*}} (tolerance 2e-2), largest element error {{.*}} of (rms + |want|) (at most 2e-1), 0 of 4096 elements rounded otherwise than the single-device plan  ok
// RUN: %mercury-run %s --schedule %repo/examples/schedules/megatron_rs.sched --backend cpu --check --seed 3 2>&1 | FileCheck %s --check-prefix=MEGATRON
// MEGATRON: check @C: relative error {{.*}} ok
// MEGATRON: check @C in its dtypes: relative error {{[0-9.]+}}e-3 (tolerance 2e-2), largest element error {{.*}} of (rms + |want|) (at most 2e-1), {{[1-9][0-9]+}} of 4096 elements rounded otherwise than the single-device plan  ok
// RUN: %mercury-run %s --schedule %repo/examples/schedules/shift_reduce.sched --backend cpu --check --seed 3 2>&1 | FileCheck %s --check-prefix=SHIFT
// SHIFT: check @C: relative error {{.*}} ok
// SHIFT: check @C in its dtypes: relative error {{[0-9.]+}}e-3 (tolerance 2e-2), largest element error {{.*}} of (rms + |want|) (at most 2e-1), {{[1-9][0-9]+}} of 4096 elements rounded otherwise than the single-device plan  ok

// examples/gemm_rs.mlir with M = K = N = 64.
commir.mesh @mesh shape [8] names ["gpu"] bandwidth [450.0]

commir.kernel @gemm_rs on @mesh {
  commir.axis @m = 64 spatial
  commir.axis @k = 64 managed
  commir.axis @n = 64 spatial
  commir.buffer @A : [@m, @k] bf16 in sharding [R, S(0)]
  commir.buffer @B : [@k, @n] bf16 in sharding [S(0), R]
  commir.buffer @C : [@m, @n] bf16 out sharding [S(0), R]
  %a = commir.load @A[@m, @k] : !commir.tile<bf16>
  %b = commir.load @B[@k, @n] : !commir.tile<bf16>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
}
