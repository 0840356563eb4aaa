// A reduction read back inside the loop: iteration 1 reads the sum over blocks 0 and 1, so
// the loop cannot become one step.
commir.mesh @m shape [1]
commir.kernel @k on @m {
  commir.axis @a0 = 2 spatial
  commir.axis @a_t = 4 spatial
  commir.axis @c = 4 spatial
  commir.axis @e = 4 spatial
  commir.buffer @X : [@a0 * @a_t, @c] f32 in
  commir.buffer @W : [@a0 * @a_t, @e] f32 in
  commir.buffer @G : [@c, @e] f32 temp
  commir.buffer @Y : [@a0 * @a_t, @e] f32 out
  // expected-note@+1 {{the loop is here}}
  commir.for @a0 {
    %x = commir.load @X[@a0, @a_t, @c] : !commir.tile<f32>
    %w = commir.load @W[@a0, @a_t, @e] : !commir.tile<f32>
    %g = commir.matmul %x, %w transpose_a : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    // expected-error@+1 {{join: '@a0' has a loop and '@a_t' none, so joining them computes every iteration of the loop at once; this reduction into '@G' touches the same tile as the access at the note in different iterations of '@a0', so their order would be lost}}
    commir.reduce add %g into @G[@c, @e] : !commir.tile<f32>
    // expected-note@+1 {{the other access is here}}
    %s = commir.load @G[@c, @e] : !commir.tile<f32>
    %y = commir.matmul %x, %s : (!commir.tile<f32>, !commir.tile<f32>) -> !commir.tile<f32>
    commir.store %y into @Y[@a0, @a_t, @e] : !commir.tile<f32>
  }
}
