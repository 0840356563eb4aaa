// The paper's running example: C[i] += A[i, j] * B[j], on 4 GPUs. @j is a managed reduction
// (the compiler may combine partial sums across devices with an addition).
commir.mesh @mesh shape [4] names ["gpu"]

commir.kernel @weighted_sum on @mesh {
  commir.axis @i = 4096 spatial
  commir.axis @j = 4096 managed
  commir.buffer @A : [@i, @j] f32 in
  commir.buffer @B : [@j] f32 in
  commir.buffer @C : [@i] f32 out
  %a = commir.load @A[@i, @j] : !commir.tile<f32>
  %b = commir.load @B[@j] : !commir.tile<f32>
  %c = commir.patch "gemm" (%a, %b) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i] : !commir.tile<f32>
}
