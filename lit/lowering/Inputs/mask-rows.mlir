// Kernels whose causal mask reaches something other than a softmax (lit/lowering/mask-rows.mlir).
commir.mesh @mesh shape [2]

// Y[m] = sum_n max(mask(A B^T), A B^T): the masked positions keep the unmasked scores.
commir.kernel @keep on @mesh {
  commir.axis @m = 32 spatial
  commir.axis @k = 8 managed
  commir.axis @n = 32 managed
  commir.buffer @A : [@m, @k] f32 in
  commir.buffer @B : [@n, @k] f32 in
  commir.buffer @Y : [@m] f32 out
  %a = commir.load @A[@m, @k] : !commir.tile<f32>
  %b = commir.load @B[@n, @k] : !commir.tile<f32>
  %c = commir.matmul %a, %b transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.mask causal %c : !commir.tile<f32>
  %u = commir.binary max %t, %c : !commir.tile<f32>
  %r = commir.row_reduce sum %u : !commir.tile<f32>
  commir.reduce add %r into @Y[@m] : !commir.tile<f32>
}

// C = exp(mask(A B^T / 10)), stored: zeros above the diagonal.
commir.kernel @stored on @mesh {
  commir.axis @i = 48 spatial
  commir.axis @k2 = 16 managed
  commir.axis @j = 48 spatial
  commir.buffer @P : [@i, @k2] f32 in
  commir.buffer @Q : [@j, @k2] f32 in
  commir.buffer @C : [@i, @j] f32 out
  %p = commir.load @P[@i, @k2] : !commir.tile<f32>
  %q = commir.load @Q[@j, @k2] : !commir.tile<f32>
  %c = commir.matmul %p, %q transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %s = commir.scale %c by 0.1 : !commir.tile<f32>
  %t = commir.mask causal %s : !commir.tile<f32>
  %e = commir.unary exp %t : !commir.tile<f32>
  commir.store %e into @C[@i, @j] : !commir.tile<f32>
}

// Z[x] = sum_y silu(mask(A B^T)): silu(-inf) is NaN (the unsplit kernel's result is NaN too).
commir.kernel @nan on @mesh {
  commir.axis @x = 32 spatial
  commir.axis @k3 = 8 managed
  commir.axis @y = 32 managed
  commir.buffer @E : [@x, @k3] f32 in
  commir.buffer @F : [@y, @k3] f32 in
  commir.buffer @Z : [@x] f32 out
  %e = commir.load @E[@x, @k3] : !commir.tile<f32>
  %f = commir.load @F[@y, @k3] : !commir.tile<f32>
  %c = commir.matmul %e, %f transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.mask causal %c : !commir.tile<f32>
  %u = commir.unary silu %t : !commir.tile<f32>
  %r = commir.row_reduce sum %u : !commir.tile<f32>
  commir.reduce add %r into @Z[@x] : !commir.tile<f32>
}

// G = exp(mask(A B^T / 10)) V through the gemm patch, reduced over the keys.
commir.kernel @gemm on @mesh {
  commir.axis @g = 32 spatial
  commir.axis @k4 = 8 managed
  commir.axis @h = 32 managed
  commir.axis @d = 8 spatial
  commir.buffer @R : [@g, @k4] f32 in
  commir.buffer @S : [@h, @k4] f32 in
  commir.buffer @V : [@h, @d] f32 in
  commir.buffer @G : [@g, @d] f32 out
  %r = commir.load @R[@g, @k4] : !commir.tile<f32>
  %s = commir.load @S[@h, @k4] : !commir.tile<f32>
  %v = commir.load @V[@h, @d] : !commir.tile<f32>
  %c = commir.matmul %r, %s transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %c2 = commir.scale %c by 0.1 : !commir.tile<f32>
  %t = commir.mask causal %c2 : !commir.tile<f32>
  %p = commir.unary exp %t : !commir.tile<f32>
  %u = commir.patch "gemm" (%p, %v) : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %u into @G[@g, @d] : !commir.tile<f32>
}

// S = mask(A B^T), stored: -inf above the diagonal, in the reference too.
commir.kernel @scores on @mesh {
  commir.axis @a = 16 spatial
  commir.axis @k5 = 8 managed
  commir.axis @b = 16 spatial
  commir.buffer @L : [@a, @k5] f32 in
  commir.buffer @M : [@b, @k5] f32 in
  commir.buffer @S : [@a, @b] f32 out
  %l = commir.load @L[@a, @k5] : !commir.tile<f32>
  %m = commir.load @M[@b, @k5] : !commir.tile<f32>
  %c = commir.matmul %l, %m transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %t = commir.mask causal %c : !commir.tile<f32>
  commir.store %t into @S[@a, @b] : !commir.tile<f32>
}
