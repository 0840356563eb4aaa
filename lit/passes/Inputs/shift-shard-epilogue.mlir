// A GEMM whose product feeds epilogues before it is stored (lit/passes/shift-shard.mlir).
commir.mesh @mesh shape [3] names ["gpu"]

commir.kernel @g on @mesh {
  commir.axis @m = 96 spatial
  commir.axis @k = 48 managed
  commir.axis @n = 40 spatial
  commir.buffer @A : [@m, @k] f32 in
  commir.buffer @B : [@k, @n] f32 in
  commir.buffer @Bias : [@n] f32 in
  commir.buffer @C : [@m, @n] f32 out
  commir.buffer @D : [@m, @n] bf16 out sharding [S(0), R]
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@k, @n] : !commir.tile<f32>
  %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %g = commir.unary gelu %c : !commir.tile<f32>
  commir.store %g into @C[@m, @n] : !commir.tile<f32>
  %s = commir.unary silu %c : !commir.tile<f32>
  %sb = commir.cast %s : !commir.tile<f32> to !commir.tile<bf16>
  commir.store %sb into @D[@m, @n] : !commir.tile<bf16>
}
