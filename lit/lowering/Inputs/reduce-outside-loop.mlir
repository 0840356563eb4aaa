// C = A B + A2 B2 on 2 ranks: A B split over k on level 0, A2 B2 computed whole by every rank.
commir.mesh @mesh shape [2]
commir.kernel @bias on @mesh {
  commir.axis @m = 32 spatial
  commir.axis @k0 = 2 managed
  commir.axis @k_t = 24 managed
  commir.axis @q = 8 managed
  commir.axis @n = 16 spatial
  commir.buffer @A : [@m, @k0 * @k_t] bf16 in sharding [R, S(0)]
  commir.buffer @B : [@k0 * @k_t, @n] bf16 in sharding [S(0), R]
  commir.buffer @A2 : [@m, @q] bf16 in
  commir.buffer @B2 : [@q, @n] bf16 in
  commir.buffer @C : [@m, @n] bf16 out sharding [S(0), R]
  commir.for @k0 parallel(0) {
    %a = commir.load @A[@m, @k0, @k_t] : !commir.tile<bf16>
    %b = commir.load @B[@k0, @k_t, @n] : !commir.tile<bf16>
    %c = commir.patch "gemm" (%a, %b) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
    commir.reduce add %c into @C[@m, @n] : !commir.tile<f32>
  }
  %a2 = commir.load @A2[@m, @q] : !commir.tile<bf16>
  %b2 = commir.load @B2[@q, @n] : !commir.tile<bf16>
  %c2 = commir.patch "gemm" (%a2, %b2) : (!commir.tile<bf16>, !commir.tile<bf16>) -> !commir.tile<f32>
  commir.reduce add %c2 into @C[@m, @n] : !commir.tile<f32>
}
