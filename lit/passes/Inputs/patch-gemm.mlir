// patch{kernel=gemm} (lit/passes/patch.mlir runs this file): the matmuls that are what the
// gemm patch computes become it, the others stay; a body with none is refused at the first
// candidate.

// Scores (a transposed operand) and a batched product stay matmuls; the projection is a gemm.
commir.mesh @mesh shape [2]
commir.kernel @mixed on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 reduction
  commir.axis @n = 4 spatial
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @W : [4, @n] f32 in
  commir.buffer @O : [@h, @i, @n] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %w = commir.load @W[@n] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %u = commir.matmul %s, %k : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %y = commir.matmul %u, %w : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.store %y into @O[@h, @i, @n] : !commir.tile<f32>
}

// GEMM-LABEL: commir.kernel @mixed
// GEMM: %s = commir.matmul %q, %k transpose_b
// GEMM: %u = commir.matmul %s, %k :
// GEMM: %y = commir.patch "gemm" (%u, %w)

// -----

commir.mesh @mesh shape [2]
commir.kernel @t on @mesh {
  commir.axis @i = 8 spatial
  commir.axis @n = 8 spatial
  commir.axis @k = 4 managed
  commir.buffer @A : [@i, @k] f32 in
  commir.buffer @B : [@n, @k] f32 in
  commir.buffer @C : [@i, @n] f32 out
  %a = commir.load @A[@i, @k] : !commir.tile<f32>
  %b = commir.load @B[@n, @k] : !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=gemm}: this matmul is not what gemm computes: it transposes an operand (gemm computes C[m.., n..] = A[m.., k] B[k, n..]: a matmul without transposes whose right operand is a matrix)}}
  %c = commir.matmul %a, %b transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@i, @n] : !commir.tile<f32>
}

// -----

commir.mesh @mesh shape [2]
commir.kernel @batched on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @n = 8 spatial
  commir.axis @k = 4 managed
  commir.buffer @A : [@h, @i, @k] f32 in
  commir.buffer @B : [@h, @k, @n] f32 in
  commir.buffer @C : [@h, @i, @n] f32 out
  %a = commir.load @A[@h, @i, @k] : !commir.tile<f32>
  %b = commir.load @B[@h, @k, @n] : !commir.tile<f32>
  // expected-error@+1 {{this matmul is not what gemm computes: it is batched over the right operand's leading dimensions [@h]}}
  %c = commir.matmul %a, %b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  commir.reduce add %c into @C[@h, @i, @n] : !commir.tile<f32>
}
