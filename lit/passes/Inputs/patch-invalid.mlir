// Bodies that are not what the attention patch computes (lit/passes/patch.mlir runs this
// file with patch{kernel=attention}).

commir.mesh @mesh shape [2]
// expected-error@+1 {{patch{kernel=attention}: '@none' has no commir.matmul to start from}}
commir.kernel @none on @mesh {
  commir.axis @i = 8 spatial
  commir.buffer @A : [@i] f32 in
  commir.buffer @B : [@i] f32 out
  %a = commir.load @A[@i] : !commir.tile<f32>
  %e = commir.unary exp %a : !commir.tile<f32>
  commir.store %e into @B[@i] : !commir.tile<f32>
}

// -----

commir.mesh @mesh shape [2]
commir.kernel @silu on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention}: the shifted scores must go through 'unary exp'; the body does not compute attention}}
  %p = commir.unary silu %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  commir.store %o into @O[@h, @i] : !commir.tile<f32>
}

// -----

commir.mesh @mesh shape [2]
commir.kernel @leak on @mesh {
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@h, @i, 4] f32 out
  commir.buffer @M : [@h, @i] f32 out
  %q = commir.load @Q[@h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention}: the row maximum is used by other ops than the subtraction and the log-sum-exp}}
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  commir.store %o into @O[@h, @i] : !commir.tile<f32>
  commir.store %m into @M[@h, @i] : !commir.tile<f32>
}

// -----

// Keys and values without the batch dimension of the queries: attention's tiles all have it.
commir.mesh @mesh shape [2]
commir.kernel @roles on @mesh {
  commir.axis @b = 2 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@b, @h, @i, 4] f32 in
  commir.buffer @K : [@h, @j, 4] f32 in
  commir.buffer @V : [@h, @j, 4] f32 in
  commir.buffer @O : [@b, @h, @i, 4] f32 out
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<f32>
  %k = commir.load @K[@h, @j] : !commir.tile<f32>
  %v = commir.load @V[@h, @j] : !commir.tile<f32>
  // expected-error@+1 {{patch{kernel=attention}: q, k and v do not have attention's roles (attention: tiles must all be [batch, heads, sequence, head_dim] or all [heads, sequence, head_dim]}}
  %s = commir.matmul %q, %k transpose_b : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %m = commir.row_reduce max %s : !commir.tile<f32>
  %d = commir.binary sub %s, %m : !commir.tile<f32>
  %p = commir.unary exp %d : !commir.tile<f32>
  %l = commir.row_reduce sum %p : !commir.tile<f32>
  %u = commir.matmul %p, %v : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
  %o = commir.binary div %u, %l : !commir.tile<f32>
  commir.store %o into @O[@b, @h, @i] : !commir.tile<f32>
}
