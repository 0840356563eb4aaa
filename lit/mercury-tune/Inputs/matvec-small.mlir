// examples/weighted_sum.mlir at 64 x 64 (the paper's running example, C[i] += A[i, j] * B[j], a
// matrix-vector product), small enough for the CPU executor to profile every candidate.
commir.mesh @mesh shape [4] names ["gpu"]

commir.kernel @weighted_sum on @mesh {
  commir.axis @i = 64 spatial
  commir.axis @j = 64 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
