// step: reshard{buffer=Q sharding=R,R,S(zigzag(0)),R}
// step: reshard{buffer=K sharding=R,R,S(zigzag(0)),R}
// step: reshard{buffer=V sharding=R,R,S(zigzag(0)),R}
// step: reshard{buffer=O sharding=R,R,S(zigzag(0)),R}
// step: tile{axis=i factor=2 outer=i0 inner=i_t}
// step: parallelize{axis=i0 level=0}
// step: tile{axis=j factor=2 outer=j0 inner=j_t}
// step: shift{axis=j0 by=i0}
// step: reshard{buffer=O sharding=R,R,S(0),R at=end}
// examples/schedules/zigzag_ring.sched on a small examples/attention_causal.mlir (2 GPUs).
commir.mesh @mesh shape [2] names ["gpu"]
commir.kernel @attention on @mesh {
  commir.axis @b = 1 spatial
  commir.axis @h = 2 spatial
  commir.axis @i = 8 spatial
  commir.axis @j = 8 managed
  commir.buffer @Q : [@b, @h, @i, 4] bf16 in sharding [R, R, S(0), R]
  commir.buffer @K : [@b, @h, @j, 4] bf16 in sharding [R, R, S(0), R]
  commir.buffer @V : [@b, @h, @j, 4] bf16 in sharding [R, R, S(0), R]
  commir.buffer @O : [@b, @h, @i, 4] bf16 out sharding [R, R, S(0), R]
  %q = commir.load @Q[@b, @h, @i] : !commir.tile<bf16>
  %k = commir.load @K[@b, @h, @j] : !commir.tile<bf16>
  %v = commir.load @V[@b, @h, @j] : !commir.tile<bf16>
  %o, %lse = commir.patch "attention" (%q, %k, %v) {causal = true} : (!commir.tile<bf16>, !commir.tile<bf16>, !commir.tile<bf16>) -> (!commir.tile<f32>, !commir.tile<f32>)
  commir.reduce lse_merge %o, %lse into @O[@b, @h, @i] : !commir.tile<f32>, !commir.tile<f32>
}
