// Every reduction into one output is combined over the same mesh levels: its partial results
// share one accumulator per tile, summed once over one group of ranks. Hand-written nests that
// reduce into @C over different levels are refused at the second reduction (the sum over all
// four ranks added each product twice: C came out doubled, exit 0).
// RUN: not %mercury-opt %s --emit=plan 2>&1 | FileCheck %s
// CHECK: reduction-levels-invalid.mlir:[[# @LINE + 30]]:5: error: this reduction into '@C' is combined over mesh levels {1} but the one at {{.*}}reduction-levels-invalid.mlir:[[# @LINE + 24]]:5 over {0}: one accumulator cannot combine both
// A reduction outside every parallel loop (each rank computes the whole product) beside one
// split over level 0: the first would be added once per rank of the level.
// RUN: not %mercury-opt %S/Inputs/reduce-outside-loop.mlir --emit=plan 2>&1 | FileCheck %s --check-prefix=OUTSIDE
// OUTSIDE: reduce-outside-loop.mlir:23:3: error: this reduction into '@C' is combined over mesh levels {} but the one at {{.*}}reduce-outside-loop.mlir:18:5 over {0}

commir.mesh @mesh shape [2, 2] names ["node", "gpu"]

commir.kernel @rs on @mesh {
  commir.axis @m = 32 spatial
  commir.axis @k0 = 2 managed
  commir.axis @k_t = 24 managed
  commir.axis @q0 = 2 managed
  commir.axis @q_t = 8 managed
  commir.axis @n = 16 spatial
  commir.buffer @A : [@m, @k0 * @k_t] bf16 in sharding [R, S(0)]
  commir.buffer @B : [@k0 * @k_t, @n] bf16 in sharding [S(0), R]
  commir.buffer @A2 : [@m, @q0 * @q_t] bf16 in sharding [R, S(1)]
  commir.buffer @B2 : [@q0 * @q_t, @n] bf16 in sharding [S(1), R]
  commir.buffer @C : [@m, @n] bf16 out sharding [S(0), R]
  commir.for @k0 parallel(0) {
    %a = commir.load @A[@m, @k0, @k_t] : !commir.tile<bf16>
    %b = commir.load @B[@k0, @k_t, @n] : !commir.tile<bf16>
    %c = commir.patch "gemm" (%a, %b) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
    commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
  }
  commir.for @q0 parallel(1) {
    %a2 = commir.load @A2[@m, @q0, @q_t] : !commir.tile<bf16>
    %b2 = commir.load @B2[@q0, @q_t, @n] : !commir.tile<bf16>
    %c2 = commir.patch "gemm" (%a2, %b2) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
    commir.reduce add %c2 into @C[@m, @n] : !commir.tile<f32>
  }
}
